//! Restart limits and back-off of one component (its assembly's
//! `restart_limit`, `restart_window_ms`, `restart_backoff_ms`).
//!
//! The first restart after a quiet window is immediate; each further one
//! within the window waits the back-off, doubled per restart (never longer
//! than the window); a component that dies more than `limit` times within
//! the window is held down for good, so one that cannot start does not
//! take the CPU from the rest of the system.

use alloc::collections::VecDeque;
use system_spec::RestartPolicy;

/// The restart state of one instance.
#[derive(Default, Debug)]
pub(crate) struct Restarts {
    /// Times (ms) of the deaths within the restart window.
    failures: VecDeque<u64>,
    /// A restart waiting out its back-off: when (ms).
    pub(crate) at: Option<u64>,
    /// Stopped for good: too many deaths within the window.
    pub(crate) held_down: bool,
}

/// What the supervisor is to do after a death of a restartable instance
/// ([`crate::Policy::schedule_restart`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// It was held down before: nothing more.
    AlreadyHeldDown,
    /// It died more than the limit within the window: stop it, report it,
    /// and tell its peers it will not come back.
    HoldDown {
        /// Restarts within the window before this death.
        restarts: u32,
        /// From the first death in the window to this one (ms).
        span_ms: u64,
    },
    /// A restart is already scheduled (the death it answers came first).
    AlreadyScheduled,
    /// Rebuild it at `at` (ms); [`crate::Policy::take_due`] says when.
    At {
        /// When the back-off is over (ms).
        at: u64,
        /// The back-off (0: at once).
        delay_ms: u64,
        /// Deaths within the window, this one included.
        deaths: u32,
    },
}

/// The back-off before the restart answering the `deaths`-th death within
/// the window: none for the first, then `backoff_ms` doubled per death,
/// never longer than the window.
pub fn backoff_ms(deaths: u32, policy: RestartPolicy) -> u64 {
    let delay = if deaths <= 1 { 0 } else { u64::from(policy.backoff_ms) << (deaths - 2).min(20) };
    delay.min(u64::from(policy.window_ms))
}

impl Restarts {
    /// Counts a death at `now` against the policy and says what follows.
    pub(crate) fn schedule(&mut self, policy: RestartPolicy, now: u64) -> Restart {
        if self.held_down {
            return Restart::AlreadyHeldDown;
        }
        let window = u64::from(policy.window_ms);
        while self.failures.front().is_some_and(|&t| now.saturating_sub(t) >= window) {
            self.failures.pop_front();
        }
        self.failures.push_back(now);
        let deaths = self.failures.len() as u32;
        if deaths > policy.limit {
            self.held_down = true;
            self.at = None;
            let span_ms = now - self.failures.front().copied().unwrap_or(now);
            return Restart::HoldDown { restarts: deaths - 1, span_ms };
        }
        if self.at.is_some() {
            return Restart::AlreadyScheduled;
        }
        let delay_ms = backoff_ms(deaths, policy);
        let at = now + delay_ms;
        self.at = Some(at);
        Restart::At { at, delay_ms, deaths }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RestartPolicy = RestartPolicy { limit: 3, window_ms: 10_000, backoff_ms: 100 };

    #[test]
    fn the_first_restart_is_immediate_and_further_ones_back_off_doubling() {
        assert_eq!(backoff_ms(0, POLICY), 0);
        assert_eq!(backoff_ms(1, POLICY), 0);
        assert_eq!(backoff_ms(2, POLICY), 100);
        assert_eq!(backoff_ms(3, POLICY), 200);
        assert_eq!(backoff_ms(4, POLICY), 400);
    }

    #[test]
    fn the_back_off_never_exceeds_the_window_nor_overflows() {
        assert_eq!(backoff_ms(9, POLICY), 10_000);
        assert_eq!(backoff_ms(u32::MAX, POLICY), 10_000);
        let huge = RestartPolicy { limit: u32::MAX, window_ms: u32::MAX, backoff_ms: u32::MAX };
        assert_eq!(backoff_ms(u32::MAX, huge), u64::from(u32::MAX));
    }

    #[test]
    fn deaths_within_the_window_are_held_down_past_the_limit() {
        let mut r = Restarts::default();
        assert_eq!(r.schedule(POLICY, 1000), Restart::At { at: 1000, delay_ms: 0, deaths: 1 });
        r.at = None; // carried out
        assert_eq!(r.schedule(POLICY, 2000), Restart::At { at: 2100, delay_ms: 100, deaths: 2 });
        r.at = None;
        assert_eq!(r.schedule(POLICY, 3000), Restart::At { at: 3200, delay_ms: 200, deaths: 3 });
        r.at = None;
        assert_eq!(r.schedule(POLICY, 4500), Restart::HoldDown { restarts: 3, span_ms: 3500 });
        assert!(r.held_down && r.at.is_none());
        assert_eq!(r.schedule(POLICY, 60_000), Restart::AlreadyHeldDown, "held down for good");
    }

    #[test]
    fn a_quiet_window_forgets_earlier_deaths() {
        let mut r = Restarts::default();
        for now in [0, 1000, 2000] {
            assert!(matches!(r.schedule(POLICY, now), Restart::At { .. }));
            r.at = None;
        }
        // 10 s after the first death it leaves the window: two remain.
        assert_eq!(r.schedule(POLICY, 10_000), Restart::At { at: 10_200, delay_ms: 200, deaths: 3 });
        r.at = None;
        assert_eq!(r.schedule(POLICY, 30_000), Restart::At { at: 30_000, delay_ms: 0, deaths: 1 });
    }

    #[test]
    fn a_death_while_a_restart_waits_counts_but_schedules_nothing_more() {
        let mut r = Restarts::default();
        assert!(matches!(r.schedule(POLICY, 0), Restart::At { .. }));
        r.at = None;
        assert_eq!(r.schedule(POLICY, 10), Restart::At { at: 110, delay_ms: 100, deaths: 2 });
        assert_eq!(r.schedule(POLICY, 20), Restart::AlreadyScheduled);
        assert_eq!(r.at, Some(110));
        // The third death counted: the next one is past the limit.
        assert_eq!(r.schedule(POLICY, 30), Restart::HoldDown { restarts: 3, span_ms: 30 });
    }
}
