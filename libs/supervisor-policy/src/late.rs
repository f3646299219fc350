//! The judgement on a subscriber that has not confirmed a peer's death
//! within its `confirm_death_ms` ("nobody holds a death hostage").
//!
//! An untrusted subscriber (the cgi) that is late is treated as dead
//! itself: its death drops what it holds, so the death it held up can
//! settle. A trusted one is reported once and waited for: it may still read
//! the pages (the NIC may still DMA from them through it), and reusing a
//! page a live holder reads is the one thing the protocol must never do.

/// What the supervisor does about a subscriber that has not confirmed a
/// peer's death yet ([`late`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Late {
    /// Within its bound, or already reported: nothing.
    Wait,
    /// Untrusted and restartable: treat it as dead and restart it.
    Restart,
    /// Untrusted, not restartable: treat it as dead and stop it.
    Stop,
    /// Trusted: report it by name (once per death) and go on waiting.
    Report,
}

impl Late {
    /// Whether the verdict finds the subscriber late: the supervisor counts
    /// each such verdict (the events page's `late_confirms`). [`late`]
    /// gives a trusted subscriber one `Report` per death and an untrusted
    /// one one `Restart` or `Stop` (its death takes it off the pending
    /// list), so each late death counts once.
    pub fn is_late(self) -> bool {
        self != Late::Wait
    }
}

/// The verdict on a subscriber that has waited `waited_ms` without
/// confirming a death, given its bound (`confirm_death_ms`), whether it is
/// untrusted and restartable, and whether it was reported for this death
/// already.
pub fn late(waited_ms: u64, bound_ms: u32, untrusted: bool, restartable: bool, reported: bool) -> Late {
    match (waited_ms >= u64::from(bound_ms), untrusted, restartable) {
        (false, _, _) => Late::Wait,
        (true, true, true) => Late::Restart,
        (true, true, false) => Late::Stop,
        (true, false, _) if reported => Late::Wait,
        (true, false, _) => Late::Report,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscriber_within_its_bound_is_left_alone() {
        for (untrusted, restartable, reported) in [(true, true, false), (false, true, false), (true, false, true)] {
            assert_eq!(late(0, 2000, untrusted, restartable, reported), Late::Wait);
            assert_eq!(late(1999, 2000, untrusted, restartable, reported), Late::Wait);
        }
    }

    #[test]
    fn an_untrusted_late_subscriber_is_treated_as_dead() {
        assert_eq!(late(2000, 2000, true, true, false), Late::Restart);
        assert_eq!(late(u64::MAX, 1, true, true, false), Late::Restart);
        assert_eq!(late(2000, 2000, true, false, false), Late::Stop);
    }

    /// The supervisor's pass over one pending subscriber, every `step_ms`
    /// from the death to `until_ms`: how many times it counts it late.
    fn late_counts(untrusted: bool, step_ms: u64, until_ms: u64) -> u32 {
        let (mut reported, mut pending, mut counted) = (false, true, 0);
        let mut t = 0;
        while t <= until_ms && pending {
            let verdict = late(t, 2000, untrusted, true, reported);
            if verdict.is_late() {
                counted += 1;
            }
            match verdict {
                Late::Report => reported = true,
                Late::Restart | Late::Stop => pending = false,
                Late::Wait => {}
            }
            t += step_ms;
        }
        counted
    }

    #[test]
    fn each_late_death_counts_once() {
        assert_eq!(late_counts(false, 50, 60_000), 1, "trusted: reported once, counted once");
        assert_eq!(late_counts(true, 50, 60_000), 1, "untrusted: restarted once");
        assert_eq!(late_counts(false, 50, 1999), 0, "within the bound: not late");
        assert!(!Late::Wait.is_late());
        assert!([Late::Restart, Late::Stop, Late::Report].iter().all(|v| v.is_late()));
    }

    #[test]
    fn a_trusted_late_subscriber_is_reported_once_and_waited_for() {
        assert_eq!(late(2000, 2000, false, true, false), Late::Report);
        assert_eq!(late(2000, 2000, false, false, false), Late::Report);
        assert_eq!(late(9000, 2000, false, true, true), Late::Wait, "once per death");
    }
}
