//! What a client's `reset` waits for before fs releases what it had lent
//! the client's old incarnation.
//!
//! A client resets when it (re)starts: what fs lent the old incarnation
//! may have been forwarded (httpd passes file pages on to netstack and the
//! NIC) and is quarantined, neither evicted for reuse nor freed. The holds
//! that concern it are the client's own: everyone the client forwarded
//! them to holds them from the client, so the client's death is settled
//! only once they all gave them back (every peer confirmed it,
//! `component_runtime::events`). So the quarantine waits for **the
//! client's own latest death** to settle, and for nothing else: a death
//! elsewhere that stays unsettled does not keep this client's pages out
//! of use. A reset with no unsettled death of the client (a live client
//! resetting, or one whose death is already settled) releases at once:
//! a live client says it uses nothing it had, and a receiver that uses a
//! file page the cgi passed on holds its own hold from fs (httpd vouches
//! for every one, `Domain::vouch`), so only the resetting client can be
//! hurt by it. A client fs cannot name (no events page record for the
//! instance the compiler says is behind it) waits, as before, for every
//! death that had happened by then.
//!
//! Bounded: one entry per client, whatever it does; a reset while an
//! entry waits keeps the later of the two waits (settled counts only go
//! up, so the later one covers the earlier).

use alloc::vec::Vec;

/// What one client's quarantine waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Death `death` of the client's own record `record` to be settled.
    Own {
        /// The client's record in the events page.
        record: usize,
        /// Its death to be settled.
        death: u64,
    },
    /// Every record's death count at the reset to be settled (a client fs
    /// cannot name).
    Every(Vec<u64>),
}

impl Wait {
    /// What a reset waits for: `record` is the client's own record, if
    /// known; `state(i)` is record `i`'s (deaths, settled); `n` records.
    /// `None`: nothing to wait for, release at once.
    pub fn at_reset(record: Option<usize>, n: usize, state: impl Fn(usize) -> (u64, u64)) -> Option<Wait> {
        match record.filter(|&r| r < n) {
            Some(record) => {
                let (deaths, settled) = state(record);
                (deaths > settled).then_some(Wait::Own { record, death: deaths })
            }
            None => Some(Wait::Every((0..n).map(|i| state(i).0).collect())),
        }
    }

    /// Whether it is over, given the records' `(deaths, settled)`.
    pub fn settled(&self, n: usize, state: impl Fn(usize) -> (u64, u64)) -> bool {
        match self {
            Wait::Own { record, death } => *record >= n || state(*record).1 >= *death,
            Wait::Every(deaths) => deaths.iter().enumerate().all(|(i, &d)| i >= n || state(i).1 >= d),
        }
    }

    /// The wait that covers both `self` (still pending) and a later one.
    pub fn merge(self, later: Option<Wait>) -> Wait {
        match (self, later) {
            (w, None) => w,
            (Wait::Own { record, death }, Some(Wait::Own { record: r, death: d })) if r == record => {
                Wait::Own { record, death: death.max(d) }
            }
            (Wait::Every(a), Some(Wait::Every(b))) => {
                Wait::Every((0..a.len().max(b.len())).map(|i| a.get(i).max(b.get(i)).copied().unwrap_or(0)).collect())
            }
            // Mixed kinds (the client's record appeared or vanished): the
            // wider of the two, for every record.
            (a, Some(b)) => {
                let of = |w: &Wait, i: usize| match w {
                    Wait::Own { record, death } => {
                        if *record == i {
                            *death
                        } else {
                            0
                        }
                    }
                    Wait::Every(d) => d.get(i).copied().unwrap_or(0),
                };
                let n = [&a, &b]
                    .iter()
                    .map(|w| match w {
                        Wait::Own { record, .. } => record + 1,
                        Wait::Every(d) => d.len(),
                    })
                    .max()
                    .unwrap_or(0);
                Wait::Every((0..n).map(|i| of(&a, i).max(of(&b, i))).collect())
            }
        }
    }
}

/// Each client's pending quarantine (at most one), and what they cost.
#[derive(Debug, Default)]
pub struct Quarantines {
    waits: Vec<(usize, Wait)>,
    /// Resets whose holds had to wait (counted).
    pub waited: u64,
    /// Resets whose holds were released at once (counted).
    pub released_at_once: u64,
}

impl Quarantines {
    /// A reset of `client`: true if its holds must wait (quarantine), false
    /// if they may be released now (and no earlier wait of it remains).
    pub fn reset(&mut self, client: usize, wait: Option<Wait>) -> bool {
        let earlier = self.waits.iter().position(|(c, _)| *c == client).map(|i| self.waits.swap_remove(i).1);
        let wait = match earlier {
            Some(w) => Some(w.merge(wait)),
            None => wait,
        };
        match wait {
            Some(w) => {
                self.waits.push((client, w));
                self.waited += 1;
                true
            }
            None => {
                self.released_at_once += 1;
                false
            }
        }
    }

    /// The clients whose wait is over (taken out).
    pub fn take_settled(&mut self, n: usize, state: impl Fn(usize) -> (u64, u64)) -> Vec<usize> {
        let mut done = Vec::new();
        self.waits.retain(|(c, w)| {
            let over = w.settled(n, &state);
            if over {
                done.push(*c);
            }
            !over
        });
        done
    }

    /// Clients with a quarantine pending (at most one entry each).
    pub fn pending(&self) -> usize {
        self.waits.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Records 0 (httpd), 1 (cgi), 2 (netstack): (deaths, settled).
    fn page(s: &[(u64, u64)]) -> impl Fn(usize) -> (u64, u64) + '_ {
        move |i| s[i]
    }

    #[test]
    fn a_reset_waits_only_for_the_clients_own_death() {
        // The cgi died (death 2, unsettled); netstack's death 1 never
        // settles (someone holds it up).
        let mut s = vec![(0, 0), (2, 1), (1, 0)];
        let mut q = Quarantines::default();
        assert!(q.reset(1, Wait::at_reset(Some(1), 3, page(&s))));
        assert!(q.take_settled(3, page(&s)).is_empty());
        s[1].1 = 2;
        assert_eq!(q.take_settled(3, page(&s)), [1], "netstack's unsettled death does not matter");
        assert_eq!(q.pending(), 0);
        assert_eq!((q.waited, q.released_at_once), (1, 0));
    }

    #[test]
    fn a_reset_loop_of_a_live_client_pins_nothing() {
        // A live cgi reads and resets in a loop while another death stays
        // unsettled: every reset releases at once, nothing accumulates.
        let s = vec![(0, 0), (3, 3), (1, 0)];
        let mut q = Quarantines::default();
        for _ in 0..1000 {
            assert!(!q.reset(1, Wait::at_reset(Some(1), 3, page(&s))));
        }
        assert_eq!(q.pending(), 0);
        assert_eq!((q.waited, q.released_at_once), (0, 1000));
    }

    #[test]
    fn repeated_resets_keep_one_entry_that_covers_them_all() {
        let mut s = vec![(0, 0), (1, 0), (0, 0)];
        let mut q = Quarantines::default();
        assert!(q.reset(1, Wait::at_reset(Some(1), 3, page(&s))));
        // It dies again before the first death settled, and resets again;
        // then once more while alive: the entry keeps the later death.
        s[1].0 = 2;
        assert!(q.reset(1, Wait::at_reset(Some(1), 3, page(&s))));
        assert!(q.reset(1, None), "an earlier wait still pending is kept");
        assert_eq!(q.pending(), 1);
        s[1].1 = 1;
        assert!(q.take_settled(3, page(&s)).is_empty(), "death 1 settled, death 2 not");
        s[1].1 = 2;
        assert_eq!(q.take_settled(3, page(&s)), [1]);
    }

    #[test]
    fn a_client_fs_cannot_name_waits_for_every_death() {
        let mut s = vec![(1, 0), (1, 1), (2, 1)];
        let w = Wait::at_reset(None, 3, page(&s)).unwrap();
        assert_eq!(w, Wait::Every(vec![1, 1, 2]));
        assert!(!w.settled(3, page(&s)));
        s[0].1 = 1;
        assert!(!w.settled(3, page(&s)));
        s[2].1 = 2;
        assert!(w.settled(3, page(&s)));
        // A record past the page (a bad name) is not waited for forever.
        assert_eq!(Wait::at_reset(Some(9), 3, page(&s)), Some(Wait::Every(vec![1, 1, 2])));
    }

    #[test]
    fn merging_keeps_the_wider_wait() {
        let own = Wait::Own { record: 1, death: 3 };
        assert_eq!(own.clone().merge(Some(Wait::Own { record: 1, death: 2 })), own);
        assert_eq!(Wait::Every(vec![1, 0]).merge(Some(Wait::Every(vec![0, 2, 1]))), Wait::Every(vec![1, 2, 1]));
        assert_eq!(own.merge(Some(Wait::Every(vec![2, 1]))), Wait::Every(vec![2, 3]));
    }
}
