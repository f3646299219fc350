//! The loop every component shell runs, so that each component supplies
//! only what is its own: an `init` that builds its state (pools, peers,
//! devices) and a [`Shell::notified`] that does one round of work after
//! each wake-up. The framework runs the rest, the same everywhere:
//! progress for the liveness watch, the round, then arming the
//! notifications and blocking, unless work came meanwhile.
//!
//! The shape of a shell (a `Link` per peer: [`crate::link`]):
//!
//! ```ignore
//! struct Driver { deaths: Deaths, stack: Link<Duplex<'static>>, /* ... */ }
//!
//! impl Shell for Driver {
//!     fn notified(&mut self, round: Round) -> Then {
//!         for e in self.deaths.poll(self.d, &[self.stack.index()]) {
//!             if let Some(PeerEvent::Died { .. }) = self.stack.see(e, self.d) {
//!                 self.stack.fail(self.d); // after we stopped using its channel
//!             }
//!         }
//!         self.stack.confirm_if_clean(self.d, &self.deaths);
//!         // ... this component's work: take, pass on, publish ...
//!         Then::Wait
//!     }
//!     fn arm(&mut self) -> bool { self.stack.chan.arm(Want { data: true, ..Want::default() }) }
//!     fn wait(&mut self) -> u64 { glue::wake::wait() }
//! }
//!
//! fn main(start: &'static StartInfo) -> ! { shell::run(Driver::init(start)) }
//! ```
//!
//! An RPC server (fs) has no loop of its own: the glue's dispatcher runs
//! it, and it uses the per-peer part ([`crate::link`]) alone.

/// What one round is told about its wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// Rounds before this one (0: the first, right after `init`).
    pub number: u64,
    /// The badge bits [`Shell::wait`] returned, when the round follows a
    /// wait; `None` for the first round and for a round that went on at
    /// once ([`Then::Again`], or work found while arming).
    pub badge: Option<u64>,
}

/// What a round asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// There is more to do now: another round at once, without arming or
    /// waiting (a full batch, a stream that is due).
    Again,
    /// Nothing more now: arm, and block unless arming found work.
    Wait,
}

/// A component's side of the loop.
pub trait Shell {
    /// One round of work (deaths of peers, then whatever came).
    fn notified(&mut self, round: Round) -> Then;

    /// Asks the peers to signal us (the duplexes' "signal me" flags).
    /// True if work arrived while arming: the loop goes round again
    /// instead of blocking (the peer may have looked before we armed).
    fn arm(&mut self) -> bool {
        false
    }

    /// Blocks on the component's notification; returns its badge bits.
    fn wait(&mut self) -> u64;
}

/// The loop's state between turns; [`run`] turns it for ever, host tests
/// one turn at a time.
#[derive(Debug, Default)]
pub struct Rounds {
    number: u64,
    badge: Option<u64>,
}

impl Rounds {
    /// Before the first round.
    pub const fn new() -> Rounds {
        Rounds { number: 0, badge: None }
    }

    /// Rounds run so far.
    pub fn count(&self) -> u64 {
        self.number
    }

    /// One turn: progress, a round, and (if it asks) arming and the wait.
    pub fn turn(&mut self, shell: &mut impl Shell) {
        // One turn of the loop is progress (crate::liveness), also when
        // it goes round without waiting under load.
        sel4::progress();
        let round = Round { number: self.number, badge: self.badge.take() };
        self.number += 1;
        if shell.notified(round) == Then::Wait && !shell.arm() {
            self.badge = Some(shell.wait());
        }
    }
}

/// Runs `shell`'s rounds for ever.
pub fn run(mut shell: impl Shell) -> ! {
    let mut rounds = Rounds::new();
    loop {
        rounds.turn(&mut shell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers from a script and records what the loop did.
    struct Scripted {
        answers: Vec<(Then, bool)>,
        seen: Vec<Round>,
        waits: u64,
    }

    impl Shell for Scripted {
        fn notified(&mut self, round: Round) -> Then {
            self.seen.push(round);
            self.answers[round.number as usize].0
        }
        fn arm(&mut self) -> bool {
            self.answers[self.seen.len() - 1].1
        }
        fn wait(&mut self) -> u64 {
            self.waits += 1;
            0x10 + self.waits
        }
    }

    #[test]
    fn a_round_that_waits_hears_the_badge_in_the_next() {
        let mut s = Scripted { answers: vec![(Then::Wait, false); 3], seen: Vec::new(), waits: 0 };
        let mut r = Rounds::new();
        for _ in 0..3 {
            r.turn(&mut s);
        }
        let badges: Vec<_> = s.seen.iter().map(|r| r.badge).collect();
        assert_eq!(badges, [None, Some(0x11), Some(0x12)]);
        assert_eq!(s.seen.iter().map(|r| r.number).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(r.count(), 3);
    }

    #[test]
    fn again_and_work_found_while_arming_do_not_block() {
        let answers = vec![(Then::Again, false), (Then::Wait, true), (Then::Wait, false), (Then::Wait, false)];
        let mut s = Scripted { answers, seen: Vec::new(), waits: 0 };
        let mut r = Rounds::new();
        for _ in 0..4 {
            r.turn(&mut s);
        }
        assert_eq!(s.waits, 2, "only the last two rounds blocked");
        let badges: Vec<_> = s.seen.iter().map(|r| r.badge).collect();
        assert_eq!(badges, [None, None, None, Some(0x11)]);
    }
}
