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
//! (`component_runtime::events::late`). An untrusted one (the cgi:
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

use crate::clock::{Clock, CLOCK_BADGE};
use crate::loader::{events_page, System};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use component_runtime::events::SUPERVISOR_SETTLED_LABEL;
use component_runtime::restart::{
    self, RestartError, SUPERVISOR_LEND_PRIORITY_LABEL, SUPERVISOR_RESTART_LABEL, SUPERVISOR_RETURN_PRIORITY_LABEL,
};
use component_runtime::start::{MAX_NAME_LEN, SUPERVISOR_EXIT_LABEL};
use component_runtime::time::now_ms;
use component_runtime::{error, log};
use core::sync::atomic::Ordering;
use sel4::{Fault, MessageInfo, Word};

/// The root task's priority: seL4 starts it at the top (255).
const TOP_PRIORITY: u8 = 255;
/// Where the supervisor waits out a back-off: above only the idle thread.
const IDLE_PRIORITY: u8 = 1;

/// What the supervisor knows of one instance besides the loader's record.
#[derive(Default)]
struct Life {
    deaths: u64,
    settled: u64,
    /// Peers that have not confirmed the latest death yet.
    pending: Vec<usize>,
    /// (peer, its death): peers that died while pending; settled only
    /// after their own death is.
    waits_for: Vec<(usize, u64)>,
    /// When the latest death was published (ms): the pending peers'
    /// `confirm_death_ms` runs from here.
    died_at: u64,
    /// Trusted pending peers already reported late for the latest death.
    late_reported: Vec<usize>,
    /// Times (ms) of the deaths within the restart window.
    failures: VecDeque<u64>,
    /// A restart waiting out its back-off: when (ms).
    restart_at: Option<u64>,
    held_down: bool,
    /// A priority lent to it (`restart::lend_priority`): it runs, and is
    /// rebuilt, at the higher of this and its own.
    lent: Option<u8>,
    /// Liveness of the current incarnation, once sampled.
    watch: Option<component_runtime::liveness::Watch>,
}

struct Supervisor<'s, 'b> {
    system: &'s mut System,
    /// The boot allocator, kept only to report what is left of it.
    objects: crate::objects::ObjectAllocator<'b>,
    lives: Vec<Life>,
    clock: Option<Clock>,
    #[cfg(fault_injection)]
    console: crate::inject::Console,
}

/// Serves faults and requests forever.
pub fn run(system: &mut System, clock: Option<Clock>, objects: crate::objects::ObjectAllocator<'_>) -> ! {
    component_runtime::set_component_name("supervisor");
    let lives = (0..system.instances.len()).map(|_| Life::default()).collect();
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
        lives,
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
            if self.clock.is_some() || self.lives.iter().all(|l| l.restart_at.is_none()) {
                return sel4::recv(self.system.fault_endpoint);
            }
            set_priority(IDLE_PRIORITY);
            loop {
                let (info, badge, mrs) = sel4::nb_recv(self.system.fault_endpoint);
                if badge != 0 {
                    set_priority(TOP_PRIORITY);
                    return (info, badge, mrs);
                }
                let now = now_ms();
                if self.lives.iter().any(|l| l.restart_at.is_some_and(|t| t <= now)) {
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
            _ => {
                let fault = Fault::from_received(info, &mrs);
                log!("FAULT in component {name}: {}", describe(&fault));
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

    /// Deals with every subscriber that has not confirmed a death within
    /// its `confirm_death_ms`: the untrusted are treated as dead, the
    /// trusted reported (module docs, "Nobody holds a death hostage").
    fn check_confirmations(&mut self) {
        use component_runtime::events::{late, Late};
        let now = now_ms();
        for position in 0..self.lives.len() {
            let life = &self.lives[position];
            if life.settled >= life.deaths || life.pending.is_empty() {
                continue;
            }
            let waited = now.saturating_sub(life.died_at);
            for q in life.pending.clone() {
                // An earlier verdict in this pass may have changed the list.
                if !self.lives[position].pending.contains(&q) {
                    continue;
                }
                let c = self.system.component(q);
                let (bound, untrusted) = (c.confirm_death_ms, c.untrusted);
                let restartable = self.system.instances[q].restartable;
                let reported = self.lives[position].late_reported.contains(&q);
                let verdict = late(waited, bound, untrusted, restartable, reported);
                if verdict == Late::Wait {
                    continue;
                }
                let dead = self.system.instances[position].name.clone();
                let who = self.system.instances[q].name.clone();
                let death = self.lives[position].deaths;
                // Counted once per late death (`Late::is_late`), on the
                // late subscriber's record: `late_confirms_<name>` on
                // /cgi-bin/stats.
                events_page().note_late(self.system.instances[q].index);
                match verdict {
                    Late::Restart => {
                        log!("{who} did not confirm the death of {dead} within {bound} ms: restarting it");
                        if let Some(tcb) = self.system.instances[q].tcb {
                            let _ = sel4::tcb_suspend(tcb);
                        }
                        self.died(q);
                        self.schedule_restart(q);
                    }
                    Late::Stop => {
                        match self.system.stop(q) {
                            Ok(()) => error!(
                                "{who} did not confirm the death of {dead} within {bound} ms: stopped (untrusted, not restartable)"
                            ),
                            Err(e) => error!("could not stop component {who}: {e}"),
                        }
                        self.died(q);
                    }
                    Late::Report => {
                        error!(
                            "{who} did not confirm death {death} of {dead} within {bound} ms: trusted, so its pages stay out of use until it does"
                        );
                        self.lives[position].late_reported.push(q);
                    }
                    Late::Wait => {}
                }
            }
        }
        self.run_due_restarts();
    }

    /// Samples every watched component; restarts (or reports) the stuck.
    #[cfg(feature = "debug")]
    fn check_liveness(&mut self) {
        use component_runtime::liveness::{Verdict, Watch};
        let per_ms = component_runtime::time::tsc_per_ms().max(1);
        for position in 0..self.lives.len() {
            let limit_ms = self.system.component(position).hang_cpu_ms;
            let life = &self.lives[position];
            if limit_ms == 0 || life.restart_at.is_some() || life.held_down {
                continue;
            }
            let (Some(tcb), Some(progress)) = (self.system.instances[position].tcb, self.system.progress(position))
            else {
                continue;
            };
            let cpu = sel4::benchmark_thread_utilisation(tcb);
            let watch = self.lives[position].watch.get_or_insert(Watch::new(limit_ms as u64 * per_ms));
            let Verdict::Stuck { cpu } = watch.observe(progress, cpu) else { continue };
            let name = self.system.instances[position].name.clone();
            if self.system.is_log_server(position) {
                // It prints nothing more: say it directly.
                component_runtime::console::set_log_ring_enabled(false);
            }
            let given = cpu / per_ms;
            if self.system.instances[position].restartable {
                log!("component {name} is stuck: {given} ms of CPU without progress (limit {limit_ms} ms): restarting it");
                let _ = sel4::tcb_suspend(tcb);
                self.died(position);
                self.schedule_restart(position);
            } else {
                error!("component {name} is stuck: {given} ms of CPU without progress (limit {limit_ms} ms); not restartable");
            }
        }
    }

    /// Obeys the injection commands that arrived on the console.
    #[cfg(fault_injection)]
    fn poll_console(&mut self) {
        use alloc::string::String;
        let mut commands: Vec<(crate::inject::Injection, String)> = Vec::new();
        self.console.poll(|line| {
            if let Some(c) = crate::inject::parse(line) {
                commands.push((c.what, c.name.into()));
            }
        });
        for (what, name) in commands {
            self.inject(what, &name);
        }
    }

    /// Makes the component `name` fault or hang, if the spec grants it, by
    /// rewriting its thread's instruction pointer (`crate::inject`).
    #[cfg(fault_injection)]
    fn inject(&mut self, what: crate::inject::Injection, name: &str) {
        use crate::inject::{Injection, FAULT_IP};
        let kind = match what {
            Injection::Fault => "fault",
            Injection::Hang => "hang",
        };
        let Some(position) = self.system.instances.iter().position(|i| i.name == name) else {
            error!("cannot inject a {kind} into component {name}: no such component");
            return;
        };
        if !self.system.component(position).fault_injection {
            error!(
                "cannot inject a {kind} into component {name}: not granted by the assembly ({name}.fault_injection)"
            );
            return;
        }
        let life = &self.lives[position];
        let (Some(tcb), None, false) = (self.system.instances[position].tcb, life.restart_at, life.held_down) else {
            error!("cannot inject a {kind} into component {name}: it is not running");
            return;
        };
        let target = match what {
            Injection::Fault => FAULT_IP,
            Injection::Hang => match self.system.hang_address(position) {
                Some(at) => at,
                None => {
                    error!("cannot inject a hang into component {name}: no iolite_hang before its entry point");
                    return;
                }
            },
        };
        if self.system.is_log_server(position) {
            // It will print nothing more (it faults or spins): the
            // supervisor's lines go to the console directly until it runs
            // again (the loader turns its ring back on when it rebuilds it).
            component_runtime::console::set_log_ring_enabled(false);
        }
        // Stopped while its registers change: a blocked thread's wait is
        // cancelled, a running one resumes at the new address.
        let _ = sel4::tcb_suspend(tcb);
        let mut regs = match sel4::tcb_read_registers(tcb, false, 0, sel4::UserContext::WORDS) {
            Ok(regs) => regs,
            Err(e) => {
                let _ = sel4::tcb_resume(tcb);
                error!("cannot inject a {kind} into component {name}: TCB_ReadRegisters: {e:?}");
                return;
            }
        };
        let was = regs.rip;
        regs.rip = target;
        match sel4::tcb_write_registers(tcb, true, 0, sel4::UserContext::WORDS, &regs) {
            Ok(()) => log!("injected a {kind} into component {name}: ip {was:#x} -> {target:#x}"),
            Err(e) => {
                let _ = sel4::tcb_resume(tcb);
                error!("cannot inject a {kind} into component {name}: TCB_WriteRegisters: {e:?}");
            }
        }
    }

    /// A death of the instance at `position`: count it, tell its peers.
    fn died(&mut self, position: usize) {
        let index = self.system.instances[position].index;
        let life = &mut self.lives[position];
        life.deaths += 1;
        let death = life.deaths;
        life.pending = self.system.event_peers(position);
        life.waits_for.clear();
        life.died_at = now_ms();
        life.late_reported.clear();
        // Peers waiting for this one to confirm now wait for its death to
        // settle instead (it can confirm nothing any more).
        for (p, other) in self.lives.iter_mut().enumerate() {
            if p != position && other.pending.contains(&position) {
                other.pending.retain(|&q| q != position);
                other.waits_for.push((position, death));
            }
        }
        if let Some(r) = events_page().records.get(index) {
            r.deaths.store(death, Ordering::Release);
        }
        self.release_callers(position);
        for p in self.lives[position].pending.clone() {
            self.system.signal_events(p);
        }
        self.try_settle();
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
        let life = &self.lives[position];
        life.restart_at.is_some() || life.held_down || self.system.instances[position].tcb.is_none()
    }

    /// A peer says it no longer uses what death `death` of the component
    /// with spec index `index` gave it.
    fn confirmed(&mut self, from: usize, index: usize, death: u64) {
        let Some(target) = self.system.instances.iter().position(|i| i.index == index) else { return };
        let life = &mut self.lives[target];
        if death == life.deaths && life.pending.contains(&from) {
            life.pending.retain(|&q| q != from);
            self.try_settle();
        }
    }

    /// Settles every death whose peers have all confirmed, until nothing
    /// changes (a settlement may complete another's wait).
    fn try_settle(&mut self) {
        loop {
            let ready = (0..self.lives.len()).find(|&p| {
                let l = &self.lives[p];
                l.settled < l.deaths
                    && l.pending.is_empty()
                    && l.waits_for.iter().all(|&(q, d)| self.lives[q].settled >= d)
            });
            let Some(p) = ready else { return };
            let life = &mut self.lives[p];
            life.settled = life.deaths;
            life.waits_for.clear();
            let index = self.system.instances[p].index;
            if let Some(r) = events_page().records.get(index) {
                r.settled.store(life.settled, Ordering::Release);
            }
            for q in self.system.event_peers(p) {
                self.system.signal_events(q);
            }
            self.system.signal_events(p);
        }
    }

    /// Applies the restart policy after a death of a restartable instance.
    fn schedule_restart(&mut self, position: usize) {
        let policy = self.system.component(position).restart_policy;
        let name = self.system.instances[position].name.clone();
        let now = now_ms();
        let life = &mut self.lives[position];
        if life.held_down {
            return;
        }
        while life.failures.front().is_some_and(|&t| now.saturating_sub(t) >= policy.window_ms as u64) {
            life.failures.pop_front();
        }
        life.failures.push_back(now);
        let n = life.failures.len() as u32;
        if n > policy.limit {
            life.held_down = true;
            life.restart_at = None;
            let span = now - life.failures.front().copied().unwrap_or(now);
            if let Err(e) = self.system.stop(position) {
                error!("could not stop component {name}: {e}");
            }
            error!(
                "component {name} held down after {} restarts in {}.{} s (limit {} in {} ms); the others keep running",
                n - 1,
                span / 1000,
                span % 1000 / 100,
                policy.limit,
                policy.window_ms
            );
            // Its peers stop waiting for it (httpd answers CGI requests it
            // held for the cgi's return with 503 at once).
            let index = self.system.instances[position].index;
            if let Some(r) = events_page().records.get(index) {
                r.held_down.store(1, Ordering::Release);
            }
            for q in self.system.event_peers(position) {
                self.system.signal_events(q);
            }
            return;
        }
        if life.restart_at.is_some() {
            return; // already waiting
        }
        let delay = if n <= 1 { 0 } else { (policy.backoff_ms as u64) << (n - 2).min(20) };
        let delay = delay.min(policy.window_ms as u64);
        if delay > 0 {
            log!("component {name} died {n} times in {} ms: restart in {delay} ms (back-off)", policy.window_ms);
        }
        life.restart_at = Some(now + delay);
    }

    /// Rebuilds every instance whose back-off is over.
    fn run_due_restarts(&mut self) {
        let now = now_ms();
        for position in 0..self.lives.len() {
            if self.lives[position].restart_at.is_none_or(|t| t > now) {
                continue;
            }
            self.lives[position].restart_at = None;
            let name = self.system.instances[position].name.clone();
            let requested = core::mem::take(&mut self.system.instances[position].restart_requester);
            // The rebuild runs at the component's own priority (bounded
            // work that must not delay anyone the component could not), or
            // at the one lent to it: whoever lent it waits for it, and
            // busy components below the lender must not starve the rebuild.
            let own = self.system.component(position).priority;
            let lent = self.lives[position].lent;
            set_priority(lent.unwrap_or(own).max(own).max(IDLE_PRIORITY));
            let result = self.system.restart(position);
            self.lives[position].watch = None;
            if let (Ok(()), Some(p), Some(tcb)) = (&result, lent, self.system.instances[position].tcb) {
                let _ = sel4::tcb_set_priority(tcb, p.max(own));
            }
            set_priority(TOP_PRIORITY);
            let restarts = self.system.instances[position].restarts;
            // A restarted log server starts reading its rings at their
            // heads, so the line saying it was restarted would never be
            // printed: that one goes to the console directly (the server
            // has not run yet; the supervisor runs above it).
            let log_server = self.system.is_log_server(position) && result.is_ok();
            if log_server {
                component_runtime::console::set_log_ring_enabled(false);
            }
            match (result, requested) {
                (Ok(()), Some(who)) => log!("restarted component {name} at the request of {who} (restart {restarts})"),
                (Ok(()), None) => log!("restarted component {name} (restart {restarts})"),
                (Err(e), _) => error!("could not restart component {name}: {e}"),
            }
            events_page().free_untyped_bytes.store(self.objects.free_bytes(), core::sync::atomic::Ordering::Release);
            if self.system.instances[position].tcb.is_some() {
                // Restarts must not leak: the boot allocator's free memory
                // stays put, and an incarnation uses as much of its
                // private untyped as the last (recovery.robot compares).
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

    /// Carries out a restart request of the instance at `requester` if the
    /// assembly grants it; logs the outcome either way.
    /// The component a restart or priority request from `requester` names,
    /// if the assembly grants it (`may_restart`); every refusal is logged.
    fn granted_target(
        &mut self,
        requester: usize,
        info: MessageInfo,
        mrs: [Word; 4],
        what: &str,
    ) -> Result<usize, RestartError> {
        let system = &mut *self.system;
        let who = system.instances[requester].name.clone();
        let n = info.length() as usize;
        if n > restart::MAX_REQUEST_WORDS {
            error!("malformed {what} request from {who} ({n} words): refused");
            return Err(RestartError::Malformed);
        }
        let mut words = [0; restart::MAX_REQUEST_WORDS];
        for (i, w) in words.iter_mut().enumerate().take(n) {
            *w = if i < 4 { mrs[i] } else { sel4::get_mr(i) };
        }
        let mut buf = [0u8; MAX_NAME_LEN];
        let name = match restart::decode_request(&words[..n], &mut buf) {
            Ok(name) => name,
            Err(e) => {
                error!("malformed {what} request from {who}: refused");
                return Err(e);
            }
        };
        let Some(target) = system.instances.iter().position(|i| i.name == name) else {
            error!("{who} asked to {what} component {name}, which does not exist: refused");
            return Err(RestartError::NoSuchComponent);
        };
        if !system.may_restart(requester, target) {
            error!("{who} may not {what} component {name} (not granted by the assembly's {who}.may_restart): refused");
            return Err(RestartError::Refused);
        }
        Ok(target)
    }

    /// Lends `requester`'s priority to the component a request names, or
    /// ends the lend (`lend` false). Never above the requester's own
    /// assembly priority, so no one gains priority it does not have.
    fn priority_request(
        &mut self,
        requester: usize,
        info: MessageInfo,
        mrs: [Word; 4],
        lend: bool,
    ) -> Result<(), RestartError> {
        let what = if lend { "lend priority to" } else { "return priority from" };
        let target = self.granted_target(requester, info, mrs, what)?;
        let lent = lend.then(|| self.system.component(requester).priority);
        self.lives[target].lent = lent;
        let own = self.system.component(target).priority;
        let alive = self.lives[target].restart_at.is_none() && !self.lives[target].held_down;
        if let (true, Some(tcb)) = (alive, self.system.instances[target].tcb) {
            let _ = sel4::tcb_set_priority(tcb, lent.unwrap_or(own).max(own));
        }
        Ok(())
    }

    fn restart_request(&mut self, requester: usize, info: MessageInfo, mrs: [Word; 4]) -> Result<(), RestartError> {
        let target = self.granted_target(requester, info, mrs, "restart")?;
        let system = &mut *self.system;
        let who = system.instances[requester].name.clone();
        let name = system.instances[target].name.clone();
        if self.lives[target].held_down {
            error!("{who} asked to restart component {name}, which is held down: refused");
            return Err(RestartError::Failed);
        }
        if self.lives[target].restart_at.is_some() {
            return Ok(()); // already dead and waiting for its restart
        }
        // Stop it at once (it may spin); the rebuild follows the policy.
        if let Some(tcb) = system.instances[target].tcb {
            let _ = sel4::tcb_suspend(tcb);
        }
        system.instances[target].restart_requester = Some(who);
        self.died(target);
        self.schedule_restart(target);
        if self.lives[target].held_down {
            return Err(RestartError::Failed);
        }
        Ok(())
    }
}

fn set_priority(priority: u8) {
    let _ = sel4::tcb_set_priority(sel4::CAP_INIT_THREAD_TCB, priority);
}

/// One line: the fault type, the address and the instruction pointer.
fn describe(fault: &Fault) -> alloc::string::String {
    use alloc::format;
    match *fault {
        Fault::VmFault { ip, addr, instruction_fault, fsr } => format!(
            "vm fault ({} {}) at address {addr:#x}, ip {ip:#x}",
            if instruction_fault {
                "instruction fetch"
            } else if fsr & 2 != 0 {
                "write"
            } else {
                "read"
            },
            if fsr & 1 != 0 { "denied by page rights" } else { "of an unmapped page" },
        ),
        Fault::CapFault { ip, addr, in_recv_phase, .. } => format!(
            "capability fault (slot {addr:#x} in {} phase), ip {ip:#x}",
            if in_recv_phase { "receive" } else { "send" }
        ),
        Fault::UnknownSyscall { ip, syscall, .. } => format!("unknown syscall {:#x}, ip {ip:#x}", syscall as i64),
        Fault::UserException { ip, number, code, .. } => {
            format!("user exception {} (vector {number}, code {code:#x}), ip {ip:#x}", exception_name(number))
        }
        Fault::Unknown { label } => format!("unknown fault label {label}"),
    }
}

fn exception_name(vector: u64) -> &'static str {
    match vector {
        0 => "divide error",
        3 => "breakpoint",
        6 => "invalid opcode (panic or abort)",
        13 => "general protection",
        14 => "page fault",
        _ => "cpu exception",
    }
}
