//! Receive loops that a hostile peer cannot stall.
//!
//! A channel's rings live in memory the peer writes. A corrupt index makes
//! every `recv` fail the same way without consuming anything, and a receive
//! loop that treats the error as "try again" spins for ever at its priority;
//! a malformed descriptor (a slice outside a pool, a forged generation, too
//! many slices, a pool outside the sender's grant list, a buffer of ours
//! we never lent it) is a protocol violation by the sender. Both are the peer's
//! fault, and the peer must pay for them, not the receiver: a [`Guard`]
//! marks the channel broken at the first such error, says so once (the
//! caller reports it by name), and from then on the channel is never read
//! again, while the component goes on serving its other channels.
//! Back-pressure (`Full`, `PoolExhausted`, `QuotaExceeded`) and a peer that
//! is down are not faults: the message waits, or only it is refused.

use crate::channel::{ChannelTx, Receive, Received};
use crate::{Aggregate, Error};

/// Whether `e`, returned by a channel operation, means the peer broke the
/// protocol (corrupt ring state or a descriptor that fails validation), as
/// opposed to back-pressure or a peer that is down.
pub fn peer_fault(e: Error) -> bool {
    matches!(
        e,
        Error::CorruptRing
            | Error::BadBuffer
            | Error::GenerationMismatch
            | Error::OutOfBounds
            | Error::ForeignPool
            | Error::NotGranted
            | Error::TooManySlices
            | Error::BadPeer
            | Error::UnknownPool
            | Error::NotInAcl
            | Error::InvalidArgument
            | Error::RefOverflow
            | Error::BadRegion
    )
}

/// What [`Guard::recv`] found.
// The message is moved out at once; boxing it would allocate per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Next<'d> {
    /// A message.
    Msg(Received<'d>),
    /// Nothing to do now: the ring is empty, or the channel is broken.
    Idle,
    /// The receiver must wait (back-pressure: `Full` while the returns of a
    /// refused descriptor wait for ring space, `PoolExhausted` while a copy
    /// mode has no room for the copy); the message stays and comes with a
    /// later call.
    Wait(Error),
    /// One message was refused for a reason that is not the sender's fault
    /// (quota, peer going down); its holds went back. Go on reading.
    Refused(Error),
    /// The channel broke just now (the error says why): report it once.
    /// It is never read again.
    Broke(Error),
}

/// The state of one channel as its user sees it: healthy, or broken by its
/// peer (and why).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    broken: Option<Error>,
}

impl Guard {
    /// A healthy channel.
    pub const fn new() -> Self {
        Self { broken: None }
    }

    /// Why the channel is broken, if it is.
    pub fn broken(&self) -> Option<Error> {
        self.broken
    }

    /// Records the outcome of any operation on the channel; returns the
    /// error exactly once, when it breaks the channel (to be reported).
    pub fn note(&mut self, e: Error) -> Option<Error> {
        if self.broken.is_none() && peer_fault(e) {
            self.broken = Some(e);
            return Some(e);
        }
        None
    }

    /// The next message of `rx` (a `ChannelRx`, or one behind its copy
    /// stage: [`Copier::over`](crate::Copier::over)), unless the channel is
    /// broken.
    pub fn recv<'d>(&mut self, rx: &mut impl Receive<'d>) -> Next<'d> {
        if self.broken.is_some() {
            return Next::Idle;
        }
        match rx.recv() {
            Ok(Some(m)) => Next::Msg(m),
            Ok(None) => Next::Idle,
            Err(e @ (Error::Full | Error::PoolExhausted | Error::NoCopyPool)) => Next::Wait(e),
            Err(e) => match self.note(e) {
                Some(e) => Next::Broke(e),
                None => Next::Refused(e),
            },
        }
    }

    /// `tx.send` unless the channel is broken (then `PeerDown`, and the
    /// aggregate is handed back); a send that finds the ring corrupt breaks
    /// it (the error is returned as usual; [`Guard::note`]'s report is
    /// returned with it).
    pub fn send<'d>(
        &mut self,
        tx: &mut ChannelTx<'d>,
        agg: Aggregate<'d>,
        tag: u64,
        flags: u32,
    ) -> Result<(), (Error, Aggregate<'d>, Option<Error>)> {
        if self.broken.is_some() {
            return Err((Error::PeerDown, agg, None));
        }
        tx.send(agg, tag, flags).map_err(|(e, agg)| (e, agg, self.note(e)))
    }

    /// `tx.poll_releases` unless the channel is broken; returns the number
    /// applied, and the error that broke the channel just now, if any.
    pub fn poll_releases(&mut self, tx: &mut ChannelTx<'_>) -> (usize, Option<Error>) {
        if self.broken.is_some() {
            return (0, None);
        }
        match tx.poll_releases() {
            Ok(n) => (n, None),
            Err(e) => (0, self.note(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{init_channel, Attach, ChannelRx, Geometry};
    use crate::testing::{make, map, own};
    use crate::{Domain, PeerId};

    const FWD: usize = 8;
    const REL: usize = 16;

    /// A channel from `a` (pool 1) to `b`, and the raw bytes of its shared
    /// region (for the hostile writes).
    fn pair() -> (&'static Domain, &'static Domain, ChannelTx<'static>, ChannelRx<'static>, crate::RwRegion) {
        let a: &'static Domain = Box::leak(Box::new(Domain::new()));
        let b: &'static Domain = Box::leak(Box::new(Domain::new()));
        let r = own(a, 1, 16);
        map(b, 1, r);
        let bytes = crate::channel_bytes(FWD, REL);
        let shared = crate::testing::region(bytes);
        // SAFETY: the region is ours, initialised once, then shared by the
        // two ends below only.
        let geometry = Geometry { fwd: FWD, rel: REL };
        unsafe {
            init_channel(shared, geometry).unwrap();
            let tx = ChannelTx::attach(Attach { domain: a, peer: PeerId(0), region: shared, geometry }).unwrap();
            let rx = ChannelRx::attach(Attach { domain: b, peer: PeerId(0), region: shared, geometry }).unwrap();
            (a, b, tx, rx, shared)
        }
    }

    /// The u32 at byte `at` of the shared region (the forward ring starts
    /// it: `head` at 0, the first slot at 192, see `ring`).
    fn word(r: crate::RwRegion, at: usize) -> *mut u32 {
        assert!(at + 4 <= r.len());
        // SAFETY: in range (checked), 4-aligned offsets only.
        unsafe { r.as_ptr().add(at) as *mut u32 }
    }

    #[test]
    fn a_corrupt_index_breaks_the_channel_once_and_it_is_not_read_again() {
        let (a, _b, mut tx, mut rx, shared) = pair();
        tx.send(make(a, 1, b"first"), 1, 0).unwrap();
        let mut g = Guard::new();
        assert!(matches!(g.recv(&mut rx), Next::Msg(m) if m.agg.eq_bytes(b"first")));
        tx.send(make(a, 1, b"second"), 2, 0).unwrap();
        // The hostile sender publishes an impossible head (more entries than
        // the ring holds): every plain recv now fails without consuming.
        let head = word(shared, 0);
        // SAFETY: the ring's head word; the test is single-threaded.
        let old = unsafe { head.read_volatile() };
        unsafe { head.write_volatile(old.wrapping_add(1000)) };
        assert_eq!(rx.recv().err(), Some(Error::CorruptRing));
        assert_eq!(rx.recv().err(), Some(Error::CorruptRing), "persistent: a plain loop would spin");
        let mut broke = 0;
        for _ in 0..1000 {
            match g.recv(&mut rx) {
                Next::Broke(e) => {
                    assert_eq!(e, Error::CorruptRing);
                    broke += 1;
                }
                Next::Idle => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(broke, 1, "reported once");
        assert_eq!(g.broken(), Some(Error::CorruptRing));
        // Broken for good: not read again even once the ring looks sane.
        unsafe { head.write_volatile(old) };
        assert!(matches!(g.recv(&mut rx), Next::Idle));
        // The sender learns it: sends are refused, its aggregate handed back.
        let back = g.send(&mut tx, make(a, 1, b"x"), 3, 0);
        assert!(matches!(back, Err((Error::PeerDown, ref agg, None)) if agg.eq_bytes(b"x")));
    }

    #[test]
    fn a_forged_descriptor_breaks_the_channel_and_its_holds_go_back() {
        let (a, _b, mut tx, mut rx, shared) = pair();
        let mut g = Guard::new();
        tx.send(make(a, 1, b"forged"), 7, 0).unwrap();
        // The sender rewrites the published descriptor (slot 0 at byte 192:
        // nslices, flags, tag, then the slices of 5 u32 each): a slice
        // length far past its buffer.
        let len = word(shared, 192 + 16 + 16);
        // SAFETY: slot 0's first slice's `len`; single-threaded test.
        unsafe { len.write_volatile(1 << 30) };
        let got = g.recv(&mut rx);
        assert!(matches!(got, Next::Broke(e) if peer_fault(e)), "{got:?}");
        assert!(matches!(g.recv(&mut rx), Next::Idle));
        // The holds the descriptor carried went back to the sender: its
        // buffer is free again once it applies the releases.
        let _ = tx.poll_releases();
        assert_eq!(a.pool_stats(1).unwrap().buffers_in_use, 0);
    }

    #[test]
    fn a_pool_outside_the_senders_grant_list_breaks_the_channel() {
        let (a, b, mut tx, mut rx, _shared) = pair();
        // The sender may reference pool 2 only (the receiver's own): its
        // pool 1 is not in the list, although the receiver maps it.
        let _r2 = own(b, 2, 4);
        b.set_peer_pools(PeerId(0), &[2]).unwrap();
        let mut g = Guard::new();
        tx.send(make(a, 1, b"outside"), 1, 0).unwrap();
        tx.send(make(a, 1, b"after"), 2, 0).unwrap();
        assert!(matches!(g.recv(&mut rx), Next::Broke(Error::ForeignPool)));
        assert_eq!(b.stats().rejected_foreign_pool, 1);
        // Broken for good: the message after it is not read, even once
        // the list would allow it.
        b.set_peer_pools(PeerId(0), &[1]).unwrap();
        assert!(matches!(g.recv(&mut rx), Next::Idle));
        assert_eq!(g.broken(), Some(Error::ForeignPool));
        let back = g.send(&mut tx, make(a, 1, b"x"), 3, 0);
        assert!(matches!(back, Err((Error::PeerDown, ref agg, None)) if agg.eq_bytes(b"x")));
        drop(back);
        // The refused descriptor's hold went back; the unread one is the
        // sender's to recover at the peer's death (it is still lent).
        let _ = tx.poll_releases();
        assert_eq!(a.pool_stats(1).unwrap().buffers_in_use, 1);
    }

    #[test]
    fn a_buffer_of_ours_we_never_lent_breaks_the_channel() {
        let (a, b, mut tx, mut rx, shared) = pair();
        // The receiver owns pool 2, the sender maps it and may reference
        // it (a buffer lent to it could come back), but was lent nothing.
        let r2 = own(b, 2, 4);
        map(a, 2, r2);
        b.set_peer_pools(PeerId(0), &[1, 2]).unwrap();
        let kept = make(b, 2, b"the receiver's own bytes");
        let s = kept.descs()[0];
        let mut g = Guard::new();
        tx.send(make(a, 1, b"honest"), 1, 0).unwrap();
        // The sender rewrites the published slice to name the buffer,
        // right generation and bounds (slot 0 at 192: nslices, flags, tag,
        // then pool, buf, gen, off, len).
        for (k, v) in [s.pool, s.buf, s.gen, s.off, s.len].into_iter().enumerate() {
            // SAFETY: slot 0's first slice; single-threaded test.
            unsafe { word(shared, 192 + 16 + 4 * k).write_volatile(v) };
        }
        assert!(matches!(g.recv(&mut rx), Next::Broke(Error::NotGranted)));
        assert_eq!(b.stats().rejected_not_granted, 1);
        assert!(matches!(g.recv(&mut rx), Next::Idle));
        // Nothing changed at the receiver: its buffer is still its own,
        // byte for byte, held once.
        assert!(kept.eq_bytes(b"the receiver's own bytes"));
        assert_eq!(b.pool_stats(2).unwrap().buffers_in_use, 1);
    }

    #[test]
    fn back_pressure_is_not_a_fault() {
        for e in [Error::Full, Error::PoolExhausted, Error::QuotaExceeded, Error::PeerDown] {
            assert!(!peer_fault(e), "{e:?}");
            let mut g = Guard::new();
            assert_eq!(g.note(e), None);
            assert_eq!(g.broken(), None);
        }
        let mut g = Guard::new();
        assert_eq!(g.note(Error::OutOfBounds), Some(Error::OutOfBounds));
        assert_eq!(g.note(Error::CorruptRing), None, "reported once, the first reason kept");
        assert_eq!(g.broken(), Some(Error::OutOfBounds));
    }
}
