//! The supervisor's side of the death protocol: counting deaths, the peers
//! that still have to confirm each, settlement, and who is late.
//!
//! A death is *settled* once every peer it was published to has confirmed
//! it no longer uses anything the dead incarnation gave it, and every peer
//! that died meanwhile (and so can confirm nothing any more) has had its
//! own death settled. Settling one death may complete another's wait, so
//! [`Policy::settle_next`] is called until it finds nothing.

use crate::late::{late, Late};
use crate::Policy;
use alloc::vec::Vec;

/// The death bookkeeping of one instance.
#[derive(Default, Debug)]
pub(crate) struct Deaths {
    /// Deaths so far.
    pub(crate) count: u64,
    /// The highest death settled.
    pub(crate) settled: u64,
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
}

/// What the late check needs to know of a pending subscriber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscriber {
    /// Its `confirm_death_ms`.
    pub confirm_death_ms: u32,
    /// Its `untrusted` setting.
    pub untrusted: bool,
    /// Whether the supervisor may restart it.
    pub restartable: bool,
}

/// A pending subscriber found late ([`Policy::next_overdue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overdue {
    /// The instance whose death it has not confirmed.
    pub dead: usize,
    /// That death's number.
    pub death: u64,
    /// The late subscriber.
    pub late: usize,
    /// What to do about it (never [`Late::Wait`]). A `Report` is recorded
    /// here, so the same death is not reported again; a `Restart` or `Stop`
    /// is the caller's to carry out, with [`Policy::died`] for `late`.
    pub verdict: Late,
}

/// Where a pass of [`Policy::next_overdue`] is: one pass goes once over
/// every instance's pending peers as they were when it reached that
/// instance, as the verdicts it hands out change them.
#[derive(Default, Debug)]
pub struct OverdueScan {
    /// The next instance to look at.
    next: usize,
    /// The instance being looked at, its peers still to judge, and how
    /// long its latest death has waited (ms).
    current: Option<(usize, Vec<usize>, u64)>,
}

impl Policy {
    /// A death of the instance at `position` at `now` (ms), published to
    /// `peers` (who must confirm it). Returns its number. Peers that were
    /// waiting for this instance to confirm a death of theirs now wait for
    /// this death to settle instead.
    pub fn died(&mut self, position: usize, peers: Vec<usize>, now: u64) -> u64 {
        let d = &mut self.lives[position].deaths;
        d.count += 1;
        let death = d.count;
        d.pending = peers;
        d.waits_for.clear();
        d.died_at = now;
        d.late_reported.clear();
        for (p, other) in self.lives.iter_mut().enumerate() {
            let other = &mut other.deaths;
            if p != position && other.pending.contains(&position) {
                other.pending.retain(|&q| q != position);
                other.waits_for.push((position, death));
            }
        }
        death
    }

    /// Deaths of the instance at `position` so far.
    pub fn deaths(&self, position: usize) -> u64 {
        self.lives[position].deaths.count
    }

    /// The highest death of the instance at `position` that is settled.
    pub fn settled(&self, position: usize) -> u64 {
        self.lives[position].deaths.settled
    }

    /// The peers that have not confirmed the latest death of the instance
    /// at `position`.
    pub fn pending(&self, position: usize) -> &[usize] {
        &self.lives[position].deaths.pending
    }

    /// The instance at `from` confirms death `death` of the one at
    /// `target`. Only a pending peer's confirmation of the latest death
    /// counts (returns true); a stale or foreign one is ignored.
    pub fn confirmed(&mut self, from: usize, target: usize, death: u64) -> bool {
        let d = &mut self.lives[target].deaths;
        if death != d.count || !d.pending.contains(&from) {
            return false;
        }
        d.pending.retain(|&q| q != from);
        true
    }

    /// Settles the first death whose peers have all confirmed and whose
    /// waits are over: returns (instance, its settled death), for the
    /// caller to publish; `None` when no death is ready.
    pub fn settle_next(&mut self) -> Option<(usize, u64)> {
        let lives = &self.lives;
        let ready = (0..lives.len()).find(|&p| {
            let d = &lives[p].deaths;
            d.settled < d.count
                && d.pending.is_empty()
                && d.waits_for.iter().all(|&(q, n)| lives[q].deaths.settled >= n)
        })?;
        let d = &mut self.lives[ready].deaths;
        d.settled = d.count;
        d.waits_for.clear();
        Some((ready, d.settled))
    }

    /// The next pending subscriber of `scan`'s pass that is late at `now`
    /// (ms), judged with what `subscriber` says of it ([`late`]).
    pub fn next_overdue(
        &mut self,
        scan: &mut OverdueScan,
        now: u64,
        subscriber: impl Fn(usize) -> Subscriber,
    ) -> Option<Overdue> {
        loop {
            let Some((dead, queue, waited)) = &mut scan.current else {
                let position = scan.next;
                let d = &self.lives.get(position)?.deaths;
                scan.next += 1;
                if d.settled < d.count && !d.pending.is_empty() {
                    scan.current = Some((position, d.pending.clone(), now.saturating_sub(d.died_at)));
                }
                continue;
            };
            let (dead, waited) = (*dead, *waited);
            if queue.is_empty() {
                scan.current = None;
                continue;
            }
            let q = queue.remove(0);
            let d = &mut self.lives[dead].deaths;
            // An earlier verdict in this pass may have changed the list.
            if !d.pending.contains(&q) {
                continue;
            }
            let s = subscriber(q);
            let reported = d.late_reported.contains(&q);
            let verdict = late(waited, s.confirm_death_ms, s.untrusted, s.restartable, reported);
            if verdict == Late::Wait {
                continue;
            }
            if verdict == Late::Report {
                d.late_reported.push(q);
            }
            return Some(Overdue { dead, death: d.count, late: q, verdict });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUSTED: Subscriber = Subscriber { confirm_death_ms: 2000, untrusted: false, restartable: true };
    const UNTRUSTED: Subscriber = Subscriber { confirm_death_ms: 2000, untrusted: true, restartable: true };

    fn settle_all(p: &mut Policy) -> Vec<(usize, u64)> {
        core::iter::from_fn(|| p.settle_next()).collect()
    }

    #[test]
    fn a_death_settles_once_every_peer_confirms() {
        let mut p = Policy::new(3);
        assert_eq!(p.died(0, vec![1, 2], 0), 1);
        assert_eq!(settle_all(&mut p), []);
        assert!(p.confirmed(1, 0, 1));
        assert_eq!(settle_all(&mut p), []);
        assert!(p.confirmed(2, 0, 1));
        assert_eq!(settle_all(&mut p), [(0, 1)]);
        assert_eq!((p.deaths(0), p.settled(0)), (1, 1));
    }

    #[test]
    fn a_death_without_peers_settles_at_once() {
        let mut p = Policy::new(2);
        p.died(1, vec![], 0);
        assert_eq!(settle_all(&mut p), [(1, 1)]);
    }

    #[test]
    fn stale_foreign_and_repeated_confirmations_are_ignored() {
        let mut p = Policy::new(3);
        p.died(0, vec![1], 0);
        p.died(0, vec![1], 10);
        assert!(!p.confirmed(1, 0, 1), "not the latest death");
        assert!(!p.confirmed(2, 0, 2), "not a peer of it");
        assert!(p.confirmed(1, 0, 2));
        assert!(!p.confirmed(1, 0, 2), "already confirmed");
        assert_eq!(settle_all(&mut p), [(0, 2)], "the latest death settles the earlier ones too");
    }

    #[test]
    fn a_peer_that_dies_while_pending_is_waited_for_instead() {
        let mut p = Policy::new(3);
        p.died(0, vec![1, 2], 0);
        assert!(p.confirmed(2, 0, 1));
        // 1 dies before confirming: 0's death now waits for 1's to settle.
        assert_eq!(p.died(1, vec![0, 2], 5), 1);
        assert_eq!(p.pending(0), [] as [usize; 0]);
        assert_eq!(settle_all(&mut p), []);
        assert!(p.confirmed(0, 1, 1));
        assert_eq!(settle_all(&mut p), []);
        assert!(p.confirmed(2, 1, 1));
        // 1's settlement completes 0's wait, in the same run of calls.
        assert_eq!(settle_all(&mut p), [(1, 1), (0, 1)]);
    }

    #[test]
    fn nobody_is_late_within_the_bound() {
        let mut p = Policy::new(2);
        p.died(0, vec![1], 1000);
        let mut scan = OverdueScan::default();
        assert_eq!(p.next_overdue(&mut scan, 2999, |_| UNTRUSTED), None);
    }

    #[test]
    fn a_trusted_late_peer_is_reported_once_per_death() {
        let mut p = Policy::new(2);
        p.died(0, vec![1], 0);
        let overdue = Overdue { dead: 0, death: 1, late: 1, verdict: Late::Report };
        let mut scan = OverdueScan::default();
        assert_eq!(p.next_overdue(&mut scan, 2000, |_| TRUSTED), Some(overdue));
        assert_eq!(p.next_overdue(&mut scan, 2000, |_| TRUSTED), None);
        let mut scan = OverdueScan::default();
        assert_eq!(p.next_overdue(&mut scan, 9000, |_| TRUSTED), None, "reported already");
        // A new death of the same instance is reported anew.
        p.died(0, vec![1], 10_000);
        let mut scan = OverdueScan::default();
        assert_eq!(p.next_overdue(&mut scan, 12_000, |_| TRUSTED), Some(Overdue { death: 2, ..overdue }));
    }

    #[test]
    fn an_untrusted_late_peer_is_judged_dead_and_its_death_is_waited_for() {
        let mut p = Policy::new(3);
        p.died(0, vec![1, 2], 0);
        assert!(p.confirmed(2, 0, 1));
        let mut scan = OverdueScan::default();
        let judge = |q| if q == 1 { UNTRUSTED } else { TRUSTED };
        let overdue = p.next_overdue(&mut scan, 2500, judge);
        assert_eq!(overdue, Some(Overdue { dead: 0, death: 1, late: 1, verdict: Late::Restart }));
        // The caller carries it out: 1 dies, published to 0 and 2.
        p.died(1, vec![0, 2], 2500);
        assert_eq!(p.next_overdue(&mut scan, 2500, judge), None, "its new peers have only just been told");
        assert!(p.confirmed(0, 1, 1) && p.confirmed(2, 1, 1));
        assert_eq!(settle_all(&mut p), [(1, 1), (0, 1)]);
    }

    #[test]
    fn an_untrusted_peer_that_cannot_restart_is_stopped() {
        let mut p = Policy::new(2);
        p.died(0, vec![1], 0);
        let mut scan = OverdueScan::default();
        let stop = Subscriber { restartable: false, ..UNTRUSTED };
        assert_eq!(p.next_overdue(&mut scan, 2000, |_| stop).map(|o| o.verdict), Some(Late::Stop));
    }

    #[test]
    fn a_settled_death_has_nobody_late() {
        let mut p = Policy::new(2);
        p.died(0, vec![1], 0);
        assert!(p.confirmed(1, 0, 1));
        settle_all(&mut p);
        let mut scan = OverdueScan::default();
        assert_eq!(p.next_overdue(&mut scan, 60_000, |_| UNTRUSTED), None);
    }
}
