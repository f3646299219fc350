//! Liveness: telling a stuck component from a starved or waiting one.
//!
//! Every component the assembly watches (`<instance>.hang_cpu_ms`, our own
//! attribute) gets a progress page from the loader, mapped read-write at
//! [`PROGRESS_VADDR`] for it and read-only for the supervisor. Its first
//! word counts the blocking system calls that returned and the yields
//! (`sel4::set_progress_counter`, set by the entry macro): each is one
//! turn of the component's loop, a wait that ended. A component can add
//! progress of its own with `sel4::progress` (the log server, per line).
//!
//! The supervisor samples the counter and the CPU time the kernel gave the
//! component's thread (seL4's per-thread utilisation, on the debug kernel)
//! on every tick of its clock, and [`Watch`] decides: a component is
//! *stuck* once it was given `hang_cpu_ms` of CPU without the counter
//! moving. A component that waits for an event uses no CPU; one that is
//! starved by busier components above it is given none: neither is ever
//! judged, however long it waits. Wall time plays no part.
//!
//! What this does not see: a component blocked for good uses no CPU
//! either. A deadlock of RPC calls cannot happen: a component has one
//! thread, and the assembly compiler rejects calls that form a cycle, so
//! every chain of calls ends at a component that answers, spins (stuck,
//! seen here) or dies (its callers are resumed). What is left are waits
//! for an event a peer owes over shared memory; each protocol bounds
//! those with a wall-time limit of its own (httpd's CGI timeout asks for
//! a restart of the cgi, its send timeout closes a connection).

/// Where the loader maps a watched component's progress page.
pub const PROGRESS_VADDR: u64 = crate::start::START_INFO_VADDR + 0x8000;

/// The verdict on one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It made progress, waits, is starved, or was already reported.
    Fine,
    /// It was given `cpu` (TSC cycles) of CPU without progress, at least
    /// the threshold: reported once per episode.
    Stuck {
        /// CPU time given since its last progress.
        cpu: u64,
    },
}

/// The supervisor's view of one component incarnation.
#[derive(Clone, Copy, Debug)]
pub struct Watch {
    threshold: u64,
    baseline: Option<(u64, u64)>,
    flagged: bool,
}

impl Watch {
    /// Watches with a threshold of `threshold` cycles of CPU time.
    pub const fn new(threshold: u64) -> Watch {
        Watch { threshold, baseline: None, flagged: false }
    }

    /// Forgets everything: a new incarnation (a new thread, whose CPU time
    /// starts at zero).
    pub fn reset(&mut self) {
        self.baseline = None;
        self.flagged = false;
    }

    /// One sample: the progress counter and the thread's total CPU time.
    pub fn observe(&mut self, progress: u64, cpu: u64) -> Verdict {
        match self.baseline {
            // Progress (or the first sample, or a CPU counter that went
            // back, which only a new thread does): a new baseline.
            Some((p, c)) if p == progress && cpu >= c => {
                let given = cpu - c;
                if given >= self.threshold && !self.flagged {
                    self.flagged = true;
                    return Verdict::Stuck { cpu: given };
                }
                Verdict::Fine
            }
            _ => {
                self.baseline = Some((progress, cpu));
                self.flagged = false;
                Verdict::Fine
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000; // cycles per ms in these tests

    #[test]
    fn a_spinning_component_is_stuck_once_it_had_the_threshold() {
        let mut w = Watch::new(500 * MS);
        assert_eq!(w.observe(7, 0), Verdict::Fine);
        // 62.5 ms ticks, all CPU to it, no progress.
        let mut cpu = 0;
        let mut verdicts = Vec::new();
        for _ in 0..10 {
            cpu += 62 * MS;
            verdicts.push(w.observe(7, cpu));
        }
        let first = verdicts.iter().position(|v| *v != Verdict::Fine).expect("judged stuck");
        assert_eq!(first, 8, "after 8 x 62 ms >= 500 ms");
        assert_eq!(verdicts[first], Verdict::Stuck { cpu: 9 * 62 * MS });
        // Reported once per episode.
        assert!(verdicts[first + 1..].iter().all(|v| *v == Verdict::Fine));
    }

    #[test]
    fn a_starved_component_is_never_stuck_however_long() {
        let mut w = Watch::new(500 * MS);
        w.observe(3, 100 * MS);
        // Minutes of wall time, no CPU given, no progress.
        for _ in 0..10_000 {
            assert_eq!(w.observe(3, 100 * MS), Verdict::Fine);
        }
        // A trickle of CPU below the threshold in total.
        for i in 0..400 {
            assert_eq!(w.observe(3, 100 * MS + i * MS), Verdict::Fine);
        }
    }

    #[test]
    fn a_waiting_component_is_never_stuck() {
        let mut w = Watch::new(100 * MS);
        w.observe(0, 0);
        for _ in 0..1000 {
            assert_eq!(w.observe(0, 0), Verdict::Fine);
        }
    }

    #[test]
    fn a_busy_component_that_makes_progress_is_never_stuck() {
        let mut w = Watch::new(100 * MS);
        let mut cpu = 0;
        for p in 0..1000 {
            cpu += 62 * MS;
            assert_eq!(w.observe(p, cpu), Verdict::Fine);
        }
    }

    #[test]
    fn cpu_before_the_last_progress_does_not_count() {
        let mut w = Watch::new(500 * MS);
        w.observe(1, 0);
        assert_eq!(w.observe(1, 400 * MS), Verdict::Fine);
        assert_eq!(w.observe(2, 450 * MS), Verdict::Fine); // progress
        assert_eq!(w.observe(2, 900 * MS), Verdict::Fine); // 450 since
        assert_eq!(w.observe(2, 950 * MS), Verdict::Stuck { cpu: 500 * MS });
    }

    #[test]
    fn the_threshold_is_a_setting() {
        for threshold in [50, 300, 2000] {
            let mut w = Watch::new(threshold * MS);
            w.observe(0, 0);
            assert_eq!(w.observe(0, threshold * MS - 1), Verdict::Fine);
            assert_eq!(w.observe(0, threshold * MS), Verdict::Stuck { cpu: threshold * MS });
        }
    }

    #[test]
    fn a_new_incarnation_starts_over() {
        let mut w = Watch::new(100 * MS);
        w.observe(0, 0);
        assert!(matches!(w.observe(0, 200 * MS), Verdict::Stuck { .. }));
        w.reset();
        assert_eq!(w.observe(0, 0), Verdict::Fine);
        assert_eq!(w.observe(0, 50 * MS), Verdict::Fine);
        assert!(matches!(w.observe(0, 100 * MS), Verdict::Stuck { .. }));
        // A thread whose CPU counter went back is a new baseline too.
        let mut w = Watch::new(100 * MS);
        w.observe(5, 1000 * MS);
        assert_eq!(w.observe(5, 10 * MS), Verdict::Fine);
        assert_eq!(w.observe(5, 60 * MS), Verdict::Fine);
    }
}
