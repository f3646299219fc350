//! The system side of the death protocol, as the policy decides it: a
//! death is published on the events page and signalled to the dead
//! component's peers, confirmations are passed to the policy, settlements
//! published, and late peers dealt with (module docs, "Deaths" and "Nobody
//! holds a death hostage").

use super::Supervisor;
use crate::loader::events_page;
use component_runtime::time::now_ms;
use component_runtime::{error, log};
use core::sync::atomic::Ordering;
use supervisor_policy::{Late, Overdue, OverdueScan, Subscriber};

impl Supervisor<'_, '_> {
    /// A death of the instance at `position`: count it, tell its peers.
    pub(super) fn died(&mut self, position: usize) {
        let index = self.system.instances[position].index;
        let peers = self.system.event_peers(position);
        let death = self.policy.died(position, peers.clone(), now_ms());
        if let Some(r) = events_page().records.get(index) {
            r.deaths.store(death, Ordering::Release);
        }
        // Down until a new incarnation is built (`rebuild`): /healthz.
        events_page().set_running(index, false);
        self.release_callers(position);
        for p in peers {
            self.system.signal_events(p);
        }
        self.settle();
    }

    /// The instance at `position` died: its RPC clients that wait in a
    /// call to it would wait forever (without MCS the reply capability
    /// lives in the dead server's TCB and goes with it, and the caller
    /// stays blocked on it). `TCB_Resume` of a blocked thread cancels its
    /// system call and makes it execute it again: a call to the dead
    /// server is issued once more, to the endpoint, where the restarted
    /// incarnation receives it (a server that is not restarted leaves it
    /// queued there, as before). Any other blocking call (a wait on a
    /// notification, a receive) is issued again unchanged, a running
    /// thread is not touched. Only live instances are resumed: never one
    /// the supervisor stopped (dead, waiting for its restart, held down).
    /// Clients see the re-issued call as a call to the new incarnation,
    /// which knows none of the old one's state (fs: handles carry its
    /// incarnation, so a stale one is refused and the client re-opens).
    fn release_callers(&mut self, position: usize) {
        if !self.system.instances[position].restartable {
            return;
        }
        for p in self.system.rpc_callers(position) {
            if let (false, Some(tcb)) = (self.stopped(p), self.system.instances[p].tcb) {
                let _ = sel4::tcb_resume(tcb);
            }
        }
    }

    /// Whether the supervisor stopped the instance at `position` (it
    /// faulted, or waits for a restart) and so must not resume it.
    fn stopped(&self, position: usize) -> bool {
        self.policy.kept_stopped(position) || self.system.instances[position].tcb.is_none()
    }

    /// A peer says it no longer uses what death `death` of the component
    /// with spec index `index` gave it.
    pub(super) fn confirmed(&mut self, from: usize, index: usize, death: u64) {
        let Some(target) = self.system.instances.iter().position(|i| i.index == index) else { return };
        if self.policy.confirmed(from, target, death) {
            self.settle();
        }
    }

    /// Publishes every death the policy finds settled, until it finds no
    /// more (a settlement may complete another's wait): the page says so
    /// and the peers and the new incarnation are signalled.
    fn settle(&mut self) {
        while let Some((p, settled)) = self.policy.settle_next() {
            let index = self.system.instances[p].index;
            if let Some(r) = events_page().records.get(index) {
                r.settled.store(settled, Ordering::Release);
            }
            for q in self.system.event_peers(p) {
                self.system.signal_events(q);
            }
            self.system.signal_events(p);
        }
    }

    /// Deals with every subscriber that has not confirmed a death within
    /// its `confirm_death_ms`: the untrusted are treated as dead, the
    /// trusted reported (module docs, "Nobody holds a death hostage").
    pub(super) fn check_confirmations(&mut self) {
        let now = now_ms();
        let mut scan = OverdueScan::default();
        loop {
            let system = &*self.system;
            let subscriber = |q: usize| {
                let c = system.component(q);
                Subscriber {
                    confirm_death_ms: c.confirm_death_ms,
                    untrusted: c.untrusted,
                    restartable: system.instances[q].restartable,
                }
            };
            let Some(overdue) = self.policy.next_overdue(&mut scan, now, subscriber) else { break };
            self.overdue(overdue);
        }
        self.run_due_restarts();
    }

    /// Carries out the verdict on a subscriber late to confirm a death.
    fn overdue(&mut self, o: Overdue) {
        let bound = self.system.component(o.late).confirm_death_ms;
        let dead = self.system.instances[o.dead].name.clone();
        let who = self.system.instances[o.late].name.clone();
        // Counted once per late death (`Late::is_late`), on the late
        // subscriber's record: `late_confirms_<name>` on /cgi-bin/stats.
        events_page().note_late(self.system.instances[o.late].index);
        match o.verdict {
            Late::Restart => {
                log!("{who} did not confirm the death of {dead} within {bound} ms: restarting it");
                if let Some(tcb) = self.system.instances[o.late].tcb {
                    let _ = sel4::tcb_suspend(tcb);
                }
                self.died(o.late);
                self.schedule_restart(o.late);
            }
            Late::Stop => {
                match self.system.stop(o.late) {
                    Ok(()) => error!(
                        "{who} did not confirm the death of {dead} within {bound} ms: stopped (untrusted, not restartable)"
                    ),
                    Err(e) => error!("could not stop component {who}: {e}"),
                }
                self.died(o.late);
            }
            Late::Report => error!(
                "{who} did not confirm death {} of {dead} within {bound} ms: trusted, so its pages stay out of use until it does",
                o.death
            ),
            Late::Wait => {}
        }
    }
}
