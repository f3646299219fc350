//! What the root task's supervisor decides, without doing it: the policy
//! half of `roottask/src/supervisor/`, sans-IO.
//!
//! The supervisor receives faults, exits, requests and clock ticks, and
//! acts on the kernel (suspends, rebuilds, signals) and on the system
//! events page. Which of those acts follow from which event is decided
//! here, from numbers alone (positions of instances, death numbers,
//! milliseconds), so it runs and is tested on the host:
//!
//! * **Deaths** (`deaths`): each death's number, the peers that still have
//!   to confirm it, when it is settled, and which pending peer is late
//!   (the judgement itself is [`late`]).
//! * **Restarts** (`restart`): the restart window, back-off and hold-down
//!   of each restartable instance, and when a scheduled restart is due.
//! * **Lent priority**: who runs at a priority lent to it.
//!
//! Why a crate of its own: the root task is built for the seL4 target only
//! (it embeds the system image and calls the kernel), so nothing in it runs
//! under `cargo test`; `system-spec` is the format the compiler and the
//! loader share, and `component-runtime` what every component links, and
//! the supervisor's bookkeeping belongs to neither.

#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod deaths;
mod late;
mod restart;

use alloc::vec::Vec;
use system_spec::RestartPolicy;

pub use deaths::{Overdue, OverdueScan, Subscriber};
pub use late::{late, Late};
pub use restart::{backoff_ms, Restart};

/// What the policy keeps of one instance.
#[derive(Default, Debug)]
struct Life {
    deaths: deaths::Deaths,
    restarts: restart::Restarts,
    /// A priority lent to it: it runs, and is rebuilt, at the higher of
    /// this and its own.
    lent: Option<u8>,
}

/// The supervisor's decisions for a system of instances, each known by its
/// position (the loader's order).
#[derive(Debug)]
pub struct Policy {
    lives: Vec<Life>,
}

impl Policy {
    /// A policy for `instances` instances, none of which has died.
    pub fn new(instances: usize) -> Policy {
        Policy { lives: (0..instances).map(|_| Life::default()).collect() }
    }

    /// Counts a death at `now` (ms) of the restartable instance at
    /// `position` against its restart policy and says what follows.
    pub fn schedule_restart(&mut self, position: usize, policy: RestartPolicy, now: u64) -> Restart {
        self.lives[position].restarts.schedule(policy, now)
    }

    /// Takes the first restart whose back-off is over at `now` (ms): the
    /// caller rebuilds that instance.
    pub fn take_due(&mut self, now: u64) -> Option<usize> {
        let position = self.lives.iter().position(|l| l.restarts.at.is_some_and(|t| t <= now))?;
        self.lives[position].restarts.at = None;
        Some(position)
    }

    /// Whether any restart waits out its back-off.
    pub fn restarts_waiting(&self) -> bool {
        self.lives.iter().any(|l| l.restarts.at.is_some())
    }

    /// Whether a restart is due at `now` (ms).
    pub fn restart_due(&self, now: u64) -> bool {
        self.lives.iter().any(|l| l.restarts.at.is_some_and(|t| t <= now))
    }

    /// Whether the instance at `position` is dead and waits for its
    /// scheduled restart.
    pub fn restart_scheduled(&self, position: usize) -> bool {
        self.lives[position].restarts.at.is_some()
    }

    /// Whether the instance at `position` is held down (never restarted
    /// again).
    pub fn held_down(&self, position: usize) -> bool {
        self.lives[position].restarts.held_down
    }

    /// Whether the supervisor keeps the instance at `position` stopped: it
    /// waits for a restart or is held down. Such an instance is not to be
    /// resumed, judged or given a priority.
    pub fn kept_stopped(&self, position: usize) -> bool {
        self.restart_scheduled(position) || self.held_down(position)
    }

    /// Lends the instance at `position` a priority, or ends the lend
    /// (`None`). A lend holds across restarts until it ends.
    pub fn lend(&mut self, position: usize, priority: Option<u8>) {
        self.lives[position].lent = priority;
    }

    /// The priority the instance at `position` runs at, given its own
    /// assembly priority: the higher of that and one lent to it.
    pub fn priority(&self, position: usize, own: u8) -> u8 {
        self.lives[position].lent.map_or(own, |lent| lent.max(own))
    }

    /// The priority lent to the instance at `position`, if any.
    pub fn lent(&self, position: usize) -> Option<u8> {
        self.lives[position].lent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RestartPolicy = RestartPolicy { limit: 2, window_ms: 10_000, backoff_ms: 100 };

    #[test]
    fn a_scheduled_restart_is_due_after_its_back_off() {
        let mut p = Policy::new(3);
        assert!(!p.restarts_waiting());
        assert!(matches!(p.schedule_restart(1, POLICY, 0), Restart::At { at: 0, .. }));
        assert!(p.kept_stopped(1) && !p.kept_stopped(0));
        assert_eq!(p.take_due(0), Some(1));
        assert_eq!(p.take_due(0), None, "taken once");
        assert!(matches!(p.schedule_restart(1, POLICY, 50), Restart::At { at: 150, delay_ms: 100, .. }));
        assert!(matches!(p.schedule_restart(2, POLICY, 60), Restart::At { at: 60, .. }));
        assert!(p.restarts_waiting() && p.restart_due(100) && p.restart_scheduled(1));
        assert_eq!(p.take_due(100), Some(2));
        assert!(!p.restart_due(149));
        assert_eq!(p.take_due(149), None);
        assert_eq!(p.take_due(150), Some(1));
        assert!(!p.restarts_waiting());
    }

    #[test]
    fn a_held_down_instance_stays_stopped() {
        let mut p = Policy::new(1);
        for now in [0, 10] {
            p.schedule_restart(0, POLICY, now);
            p.take_due(u64::MAX);
        }
        assert_eq!(p.schedule_restart(0, POLICY, 20), Restart::HoldDown { restarts: 2, span_ms: 20 });
        assert!(p.held_down(0) && p.kept_stopped(0) && !p.restart_scheduled(0));
        assert_eq!(p.take_due(u64::MAX), None);
    }

    #[test]
    fn a_lent_priority_raises_never_lowers_and_ends_when_returned() {
        let mut p = Policy::new(1);
        assert_eq!(p.priority(0, 50), 50);
        p.lend(0, Some(200));
        assert_eq!((p.priority(0, 50), p.lent(0)), (200, Some(200)));
        assert_eq!(p.priority(0, 250), 250, "never below its own");
        p.lend(0, None);
        assert_eq!(p.priority(0, 50), 50);
    }
}
