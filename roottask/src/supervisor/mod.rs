//! The supervisor: the root task after loading, waiting on the fault
//! endpoint every component's faults go to.
//!
//! It reports each fault with the component's name, the fault type, the
//! address and the instruction pointer, then restarts the component if the
//! assembly marks it `restartable` (a clean re-creation from the spec), or
//! stops it for good. Other components are not affected either way.
//!
//! It also restarts a component when another one asks
//! ([`component_runtime::restart`]) and the assembly grants it
//! (`may_restart`, checked against the spec): e.g. httpd has a cgi that
//! does not answer in time restarted. The target may be running (a CGI
//! spinning); the restart suspends its thread before tearing it down.
//! Undeclared requests are refused and logged.
//!
//! **Lent priority**: whoever may restart a component may also lend it its
//! own assembly priority (`component_runtime::restart::lend_priority`) and
//! take it back: httpd lends the cgi, which runs below everything, its
//! priority in short windows while it waits for a starved cgi. A lend
//! holds across the target's restart (the rebuild and the new incarnation
//! run at it) until it is returned; it never exceeds the lender's own.
//!
//! **Deaths** (a fault, an exit, a restart on request) run the system side
//! of the IO-Lite death protocol (`component_runtime::events`): the
//! component's death count goes up in the system events page and every
//! subscriber that shares a dataport with it is signalled. Each of them
//! confirms once it no longer uses anything the dead incarnation gave it;
//! when all have (and any of them that died meanwhile has settled too), the
//! death is *settled*: the page says so and the peers and the new
//! incarnation are signalled, which ends their quarantines.
//!
//! **Nobody holds a death hostage**: each subscriber has
//! `confirm_death_ms` (its assembly setting, default 2 s) from the death's
//! publication to confirm it; the clock's tick checks
//! (`supervisor_policy::late`). An untrusted one (the cgi:
//! `untrusted = true`) that has not confirmed is treated as dead itself:
//! `[supervisor] cgi did not confirm the death of fs within 2000 ms:
//! restarting it` (or stopping it, if not restartable). Its death drops
//! what it holds (its peers quarantine and settle it as any other), and the
//! first death then waits for that one to settle instead. A trusted one is
//! reported by name once per death and waited for: it may still read the
//! pages (the NIC may still DMA from them through it), and reusing a page
//! a live holder reads is the one thing the protocol must never do, so
//! the pages stay out of use until it confirms or dies. Without a clock
//! (no RTC) there is no bound. Each late death counts once on the late
//! subscriber's record in the events page (`late_confirms`, shown by the
//! cgi as `late_confirms_<name>`).
//!
//! **Callers of a dead server**: when a restartable component that serves
//! an endpoint dies (fs), its live RPC clients are resumed
//! (`release_callers`): one blocked in a call to it would otherwise wait
//! forever (without MCS the reply capability dies with the server's TCB);
//! resumed, it issues the call again, to the new incarnation.
//!
//! **Clock**: the supervisor's own periodic wake-up (`crate::clock`, the
//! RTC's interrupt on a notification bound to its thread) carries out
//! restarts when their back-off is over and, in test images, reads fault
//! injection commands from the console (`crate::inject`).
//!
//! **Liveness** (`component_runtime::liveness`): on every clock tick the
//! supervisor samples, for each component the assembly watches
//! (`hang_cpu_ms`), its progress counter and the CPU time the kernel gave
//! its thread (seL4's per-thread utilisation, debug kernel). A component
//! given `hang_cpu_ms` of CPU without progress is stuck: restarted like a
//! faulted one if restartable (the same death protocol and policy), else
//! reported by name once per episode. Starved and waiting components are
//! given no CPU and are never judged. How this relates to httpd's CGI
//! timeout: httpd judges a request by wall time (its 504) and then asks for
//! a restart; that catches a cgi that waits forever, which uses no CPU and
//! which liveness cannot see; a spinning cgi is caught by liveness after
//! `cgi.hang_cpu_ms` of CPU, usually before httpd's timeout. A release
//! kernel has no CPU accounting: there, liveness is off (said once).
//!
//! **Restart policy** (per component, from the assembly): the first
//! restart after a quiet window is immediate, each further one within
//! `restart_window_ms` waits `restart_backoff_ms` doubled per restart, and
//! a component that dies more than `restart_limit` times within the window
//! is held down (stopped and reported) while the rest keeps running. The
//! rebuild runs at the restarted component's own priority (or the one lent
//! to it), so it delays nobody that component could not delay anyway;
//! only receiving and
//! bookkeeping run at the root task's top priority. While a restart waits
//! out its back-off the supervisor polls its endpoint at the lowest
//! priority (seL4 without MCS gives it no timeout), which uses only CPU
//! time nobody else wants, and only for the length of the back-off.
//!
//! **Policy and acts**: what follows from each event (which death settles,
//! who is late, when a restart is due, who is held down, at which priority
//! someone runs) is decided by `supervisor_policy::Policy`, which is plain
//! bookkeeping tested on the host; the files here only carry those
//! decisions out on the kernel and the events page, and report them:
//! `deaths` (the death protocol), `restarts` (rebuilds and hold-downs),
//! `requests` (restart and priority requests from components),
//! `liveness` (stuck components), `injection` (test images' fault
//! injection) and `fault` (how a fault is described).

mod deaths;
mod fault;
#[cfg(fault_injection)]
mod injection;
#[cfg(feature = "debug")]
mod liveness;
mod requests;
mod restarts;

use crate::clock::{Clock, CLOCK_BADGE};
use crate::loader::System;
use alloc::vec::Vec;
use component_runtime::events::SUPERVISOR_SETTLED_LABEL;
use component_runtime::restart::{
    SUPERVISOR_LEND_PRIORITY_LABEL, SUPERVISOR_RESTART_LABEL, SUPERVISOR_RETURN_PRIORITY_LABEL,
};
use component_runtime::start::SUPERVISOR_EXIT_LABEL;
use component_runtime::time::now_ms;
use component_runtime::{error, log};
use sel4::{Fault, MessageInfo, Word};
use supervisor_policy::Policy;

/// The root task's priority: seL4 starts it at the top (255).
const TOP_PRIORITY: u8 = 255;
/// Where the supervisor waits out a back-off: above only the idle thread.
const IDLE_PRIORITY: u8 = 1;

struct Supervisor<'s, 'b> {
    system: &'s mut System,
    /// The boot allocator, kept only to report what is left of it.
    objects: crate::objects::ObjectAllocator<'b>,
    /// What to do about deaths, restarts and lent priorities.
    policy: Policy,
    /// Per instance: liveness of the current incarnation, once sampled.
    watches: Vec<Option<component_runtime::liveness::Watch>>,
    clock: Option<Clock>,
    #[cfg(fault_injection)]
    console: crate::inject::Console,
}

/// Serves faults and requests forever.
pub fn run(system: &mut System, clock: Option<Clock>, objects: crate::objects::ObjectAllocator<'_>) -> ! {
    component_runtime::set_component_name("supervisor");
    let instances = system.instances.len();
    let watched = system.instances.iter().enumerate().filter(|&(p, _)| system.component(p).hang_cpu_ms > 0).count();
    if watched > 0 && clock.is_some() {
        if cfg!(feature = "debug") {
            // Starts the kernel's per-thread CPU time accounting.
            #[cfg(feature = "debug")]
            sel4::benchmark_reset_log();
            log!("liveness: watching {watched} components (CPU time without progress)");
        } else {
            log!("liveness: off (a release kernel has no per-thread CPU time)");
        }
    }
    let mut sup = Supervisor {
        system,
        objects,
        policy: Policy::new(instances),
        watches: (0..instances).map(|_| None).collect(),
        clock,
        #[cfg(fault_injection)]
        console: crate::inject::Console::new(),
    };
    loop {
        let (info, badge, mrs) = sup.next_message();
        sup.handle(info, badge, mrs);
    }
}

impl Supervisor<'_, '_> {
    /// Blocks for the next message (or clock tick); without a clock, while
    /// restarts wait out a back-off, polls at the lowest priority and
    /// carries them out when due.
    fn next_message(&mut self) -> (MessageInfo, Word, [Word; 4]) {
        loop {
            self.run_due_restarts();
            if self.clock.is_some() || !self.policy.restarts_waiting() {
                return sel4::recv(self.system.fault_endpoint);
            }
            set_priority(IDLE_PRIORITY);
            loop {
                let (info, badge, mrs) = sel4::nb_recv(self.system.fault_endpoint);
                if badge != 0 {
                    set_priority(TOP_PRIORITY);
                    return (info, badge, mrs);
                }
                if self.policy.restart_due(now_ms()) {
                    set_priority(TOP_PRIORITY);
                    break;
                }
                sel4::yield_now();
            }
        }
    }

    fn handle(&mut self, info: MessageInfo, badge: Word, mrs: [Word; 4]) {
        if badge & CLOCK_BADGE != 0 {
            self.tick();
            return;
        }
        let system = &mut *self.system;
        let Some(position) = system.instances.iter().position(|i| i.index as u64 + 1 == badge) else {
            error!("message with unknown badge {badge:#x} on the fault endpoint (label {})", info.label());
            return;
        };
        let name = system.instances[position].name.clone();
        if system.is_log_server(position) {
            // The log server only ever faults or exits: from here on the
            // supervisor's reports print directly, until it runs again.
            component_runtime::console::set_log_ring_enabled(false);
        }
        match info.label() {
            SUPERVISOR_EXIT_LABEL => {
                match system.stop(position) {
                    Ok(()) => log!("component {name} exited (status {})", mrs[0]),
                    Err(e) => error!("could not stop component {name} after its exit: {e}"),
                }
                self.died(position);
            }
            SUPERVISOR_RESTART_LABEL => {
                let result = self.restart_request(position, info, mrs);
                // The requester waits in its Call; label 0 is success. It
                // is answered before the rebuild, which may wait.
                let label = result.err().map_or(0, |e| e as Word);
                sel4::reply(MessageInfo::new(label, 0, 0, 0), [0; 4]);
                self.run_due_restarts();
            }
            SUPERVISOR_LEND_PRIORITY_LABEL | SUPERVISOR_RETURN_PRIORITY_LABEL => {
                let lend = info.label() == SUPERVISOR_LEND_PRIORITY_LABEL;
                let result = self.priority_request(position, info, mrs, lend);
                let label = result.err().map_or(0, |e| e as Word);
                sel4::reply(MessageInfo::new(label, 0, 0, 0), [0; 4]);
            }
            SUPERVISOR_SETTLED_LABEL => self.confirmed(position, mrs[0] as usize, mrs[1]),
            _ => self.faulted(position, Fault::from_received(info, &mrs)),
        }
    }

    /// The instance at `position` faulted: restarted if the assembly says
    /// so, stopped for good otherwise; a death either way.
    fn faulted(&mut self, position: usize, fault: Fault) {
        let system = &mut *self.system;
        let name = system.instances[position].name.clone();
        log!("FAULT in component {name}: {}", fault::describe(&fault));
        if system.instances[position].restartable {
            if let Some(tcb) = system.instances[position].tcb {
                let _ = sel4::tcb_suspend(tcb);
            }
            self.died(position);
            self.schedule_restart(position);
            self.run_due_restarts();
        } else {
            match system.stop(position) {
                Ok(()) => log!("component {name} stopped (not restartable)"),
                Err(e) => error!("could not stop component {name}: {e}"),
            }
            self.died(position);
        }
    }

    /// One tick of the supervisor's clock.
    fn tick(&mut self) {
        if let Some(clock) = &self.clock {
            clock.tick();
        }
        #[cfg(fault_injection)]
        self.poll_console();
        #[cfg(feature = "debug")]
        self.check_liveness();
        self.check_confirmations();
    }
}

fn set_priority(priority: u8) {
    let _ = sel4::tcb_set_priority(sel4::CAP_INIT_THREAD_TCB, priority);
}
