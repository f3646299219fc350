//! Restarts as the policy schedules them: held down past the limit,
//! rebuilt once the back-off is over (module docs, "Restart policy" and
//! "Lent priority").

use super::{set_priority, Supervisor, IDLE_PRIORITY, TOP_PRIORITY};
use crate::loader::events_page;
use component_runtime::time::now_ms;
use component_runtime::{error, log};
use core::sync::atomic::Ordering;
use supervisor_policy::Restart;

impl Supervisor<'_, '_> {
    /// Applies the restart policy after a death of a restartable instance.
    pub(super) fn schedule_restart(&mut self, position: usize) {
        let policy = self.system.component(position).restart_policy;
        let name = self.system.instances[position].name.clone();
        match self.policy.schedule_restart(position, policy, now_ms()) {
            Restart::AlreadyHeldDown | Restart::AlreadyScheduled => {}
            Restart::HoldDown { restarts, span_ms } => {
                if let Err(e) = self.system.stop(position) {
                    error!("could not stop component {name}: {e}");
                }
                error!(
                    "component {name} held down after {restarts} restarts in {}.{} s (limit {} in {} ms); the others keep running",
                    span_ms / 1000,
                    span_ms % 1000 / 100,
                    policy.limit,
                    policy.window_ms
                );
                // Its peers stop waiting for it (httpd answers CGI requests
                // it held for the cgi's return with 503 at once).
                let index = self.system.instances[position].index;
                if let Some(r) = events_page().records.get(index) {
                    r.held_down.store(1, Ordering::Release);
                }
                for q in self.system.event_peers(position) {
                    self.system.signal_events(q);
                }
            }
            Restart::At { delay_ms, deaths, .. } => {
                if delay_ms > 0 {
                    log!(
                        "component {name} died {deaths} times in {} ms: restart in {delay_ms} ms (back-off)",
                        policy.window_ms
                    );
                }
            }
        }
    }

    /// Rebuilds every instance whose back-off is over.
    pub(super) fn run_due_restarts(&mut self) {
        let now = now_ms();
        while let Some(position) = self.policy.take_due(now) {
            self.rebuild(position);
        }
    }

    /// Rebuilds the instance at `position` from the spec and reports it.
    fn rebuild(&mut self, position: usize) {
        let name = self.system.instances[position].name.clone();
        let requested = core::mem::take(&mut self.system.instances[position].restart_requester);
        // The rebuild runs at the component's own priority (bounded work
        // that must not delay anyone the component could not), or at the
        // one lent to it: whoever lent it waits for it, and busy components
        // below the lender must not starve the rebuild.
        let own = self.system.component(position).priority;
        let priority = self.policy.priority(position, own);
        set_priority(priority.max(IDLE_PRIORITY));
        let result = self.system.restart(position);
        self.watches[position] = None;
        if let (Ok(()), Some(_), Some(tcb)) = (&result, self.policy.lent(position), self.system.instances[position].tcb)
        {
            let _ = sel4::tcb_set_priority(tcb, priority);
        }
        set_priority(TOP_PRIORITY);
        let restarts = self.system.instances[position].restarts;
        // A restarted log server starts reading its rings at their heads,
        // so the line saying it was restarted would never be printed: that
        // one goes to the console directly (the server has not run yet;
        // the supervisor runs above it).
        let log_server = self.system.is_log_server(position) && result.is_ok();
        if log_server {
            component_runtime::console::set_log_ring_enabled(false);
        }
        match (result, requested) {
            (Ok(()), Some(who)) => log!("restarted component {name} at the request of {who} (restart {restarts})"),
            (Ok(()), None) => log!("restarted component {name} (restart {restarts})"),
            (Err(e), _) => error!("could not restart component {name}: {e}"),
        }
        events_page().free_untyped_bytes.store(self.objects.free_bytes(), Ordering::Release);
        if self.system.instances[position].tcb.is_some() {
            let index = self.system.instances[position].index;
            events_page().set_running(index, true);
            // Restarts must not leak: the boot allocator's free memory
            // stays put, and an incarnation uses as much of its private
            // untyped as the last (recovery.robot compares).
            log!(
                "memory after restarting {name}: {} bytes of untyped free, {name} built from {} bytes",
                self.objects.free_bytes(),
                self.system.memory_used(position)
            );
        }
        if log_server {
            component_runtime::console::set_log_ring_enabled(true);
        }
    }
}
