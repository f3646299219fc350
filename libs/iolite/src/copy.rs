//! The copy modes' receiving stage: a private copy after the channel.
//!
//! The comparison modes (`flash`, `posix`, see [`crate::mode`]) make a
//! receiver copy what crosses certain boundaries into a private buffer of
//! its own pool and give the sender's buffers back at once, as `read(2)`
//! into a caller's buffer does. That is not the channel's business (its
//! job is to move references): a [`Copier`] is a stage the receiver puts
//! after its [`ChannelRx`], as sDDF puts a copier component between a
//! driver's queues and a client's. It takes each message from the channel
//! and either passes it on by reference or copies it.
//!
//! Every received byte is counted once: by reference
//! ([`Stats::bytes_by_ref_received`](crate::Stats::bytes_by_ref_received))
//! or as copied ([`Stats::bytes_copied`](crate::Stats::bytes_copied)).
//! If the copy pool is exhausted, the message stays in the stage and the
//! next `recv` tries again: nothing is lost.

use crate::channel::{ChannelRx, Receive, Received};
use crate::desc::PoolId;
use crate::mode::{Boundary, CopyMode};
use crate::{Error, Result};

/// The copy stage of one receiving end.
#[derive(Debug)]
pub struct Copier<'d> {
    /// Where copies go; `None` when this end never copies.
    pool: Option<PoolId>,
    /// Received but not yet copied (the copy pool was exhausted).
    stalled: Option<Received<'d>>,
}

impl<'d> Copier<'d> {
    /// The stage for a receiver at `boundary` in `mode`, copying into
    /// `pool` (of the receiver's domain) when the mode copies there. A mode
    /// that copies at `boundary` with no pool to copy into is refused
    /// (`NoCopyPool`).
    pub fn new(mode: CopyMode, boundary: Boundary, pool: Option<PoolId>) -> Result<Self> {
        if !mode.copies(boundary) {
            return Ok(Self::by_reference());
        }
        match pool {
            Some(p) => Ok(Self { pool: Some(p), stalled: None }),
            None => Err(Error::NoCopyPool),
        }
    }

    /// A stage that never copies.
    pub const fn by_reference() -> Self {
        Self { pool: None, stalled: None }
    }

    /// Whether this stage copies what it receives.
    pub fn copies(&self) -> bool {
        self.pool.is_some()
    }

    /// Whether a message waits here for room in the copy pool: the
    /// receiver then waits for buffers to come back, not for messages.
    pub fn stalled(&self) -> bool {
        self.stalled.is_some()
    }

    /// The next message of `rx`, by reference or as a private copy.
    pub fn recv(&mut self, rx: &mut ChannelRx<'d>) -> Result<Option<Received<'d>>> {
        if let Some(r) = self.stalled.take() {
            return self.deliver(r).map(Some);
        }
        match rx.recv_uncounted()? {
            Some(r) => self.deliver(r).map(Some),
            None => Ok(None),
        }
    }

    /// `self` and `rx` as one [`Receive`]r (for [`crate::Guard::recv`]).
    pub fn over<'a>(&'a mut self, rx: &'a mut ChannelRx<'d>) -> Copying<'a, 'd> {
        Copying { copier: self, rx }
    }

    fn deliver(&mut self, r: Received<'d>) -> Result<Received<'d>> {
        let Some(pool) = self.pool.filter(|_| !r.agg.is_empty()) else {
            r.agg.domain().count_by_ref_received(r.agg.len());
            return Ok(r);
        };
        match r.agg.copy_to_pool(pool) {
            // The sender's buffers are released at once (as after read(2)).
            Ok(private) => Ok(Received { agg: private, tag: r.tag, flags: r.flags }),
            Err(e) => {
                self.stalled = Some(r);
                Err(e)
            }
        }
    }
}

/// A [`ChannelRx`] followed by its [`Copier`] ([`Copier::over`]).
pub struct Copying<'a, 'd> {
    copier: &'a mut Copier<'d>,
    rx: &'a mut ChannelRx<'d>,
}

impl<'d> Receive<'d> for Copying<'_, 'd> {
    fn recv(&mut self) -> Result<Option<Received<'d>>> {
        self.copier.recv(self.rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{channel_bytes, init_channel, Attach, ChannelTx, Geometry};
    use crate::testing::{bytes, make, map, own};
    use crate::{Domain, Guard, Next, PeerId, PAGE_SIZE};

    const FS_POOL: PoolId = 1;
    const HTTP_POOL: PoolId = 2;
    const G: Geometry = Geometry { fwd: 8, rel: 8 };

    fn ends<'a>(fs: &'a Domain, http: &'a Domain) -> (ChannelTx<'a>, ChannelRx<'a>) {
        let r = crate::testing::region(channel_bytes(G.fwd, G.rel));
        // SAFETY: a fresh region, initialised once; one end each.
        unsafe {
            init_channel(r, G).unwrap();
            (
                ChannelTx::attach(Attach { domain: fs, peer: PeerId(0), region: r, geometry: G }).unwrap(),
                ChannelRx::attach(Attach { domain: http, peer: PeerId(0), region: r, geometry: G }).unwrap(),
            )
        }
    }

    #[test]
    fn copy_modes_count_their_copies() {
        for (mode, boundary, copies) in [
            (CopyMode::IoLite, Boundary::AppToNet, false),
            (CopyMode::Flash, Boundary::FileCacheToApp, false),
            (CopyMode::Flash, Boundary::AppToNet, true),
            (CopyMode::Flash, Boundary::CgiToApp, true),
            (CopyMode::Posix, Boundary::FileCacheToApp, true),
        ] {
            let (fs, http) = (Domain::new(), Domain::new());
            map(&http, FS_POOL, own(&fs, FS_POOL, 16));
            own(&http, HTTP_POOL, 16);
            let (mut tx, mut rx) = ends(&fs, &http);
            let mut copier = Copier::new(mode, boundary, Some(HTTP_POOL)).unwrap();
            assert_eq!(copier.copies(), copies);
            let data = vec![0x5a; 3 * PAGE_SIZE];
            tx.send(make(&fs, FS_POOL, &data), 0, 0).unwrap();
            tx.send_eof().unwrap();
            let r = copier.recv(&mut rx).unwrap().unwrap();
            assert!(r.agg.eq_bytes(&data));
            let eof = copier.recv(&mut rx).unwrap().unwrap();
            assert!(eof.agg.is_empty() && eof.flags == crate::FLAG_EOF);
            rx.flush_releases().unwrap();
            tx.poll_releases().unwrap();
            let copied = http.stats().bytes_copied;
            let by_ref = http.stats().bytes_by_ref_received;
            // Each received byte counts once: by reference or copied.
            assert_eq!(copied + by_ref, data.len() as u64, "{mode:?} {boundary:?}");
            if copies {
                assert_eq!(copied, data.len() as u64, "{mode:?} {boundary:?}");
                assert_eq!(r.agg.descs()[0].pool, HTTP_POOL, "a private copy");
                assert_eq!(fs.stats().buffers_in_use, 0, "sender's buffer released at once");
            } else {
                assert_eq!(copied, 0, "{mode:?} {boundary:?}");
                assert_eq!(r.agg.descs()[0].pool, FS_POOL, "the one physical copy");
                assert_eq!(fs.stats().buffers_in_use, 1);
            }
        }
        assert_eq!(Copier::new(CopyMode::Posix, Boundary::Pipe, None).err(), Some(Error::NoCopyPool));
        assert!(!Copier::new(CopyMode::IoLite, Boundary::Pipe, None).unwrap().copies());
    }

    #[test]
    fn copy_into_an_exhausted_pool_stalls_without_loss() {
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 16));
        own(&http, HTTP_POOL, 1);
        let (mut tx, mut rx) = ends(&fs, &http);
        let mut copier = Copier::new(CopyMode::Posix, Boundary::Pipe, Some(HTTP_POOL)).unwrap();
        tx.send(make(&fs, FS_POOL, b"first"), 1, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"second"), 2, 0).unwrap();
        let mut g = Guard::new();
        let Next::Msg(first) = g.recv(&mut copier.over(&mut rx)) else { panic!("first") };
        // Back-pressure through the guard: a wait, not a fault.
        assert!(matches!(g.recv(&mut copier.over(&mut rx)), Next::Wait(Error::PoolExhausted)));
        assert_eq!(g.broken(), None);
        assert!(copier.stalled(), "the message waits in the stage, not in the ring");
        drop(first);
        let second = copier.recv(&mut rx).unwrap().unwrap();
        assert_eq!((second.tag, bytes(&second.agg)), (2, b"second".to_vec()));
        assert!(!copier.stalled());
        assert_eq!(http.stats().bytes_copied, 11, "the stalled message is copied once");
        assert_eq!(http.stats().bytes_by_ref_received, 0, "nothing was delivered by reference");
        assert!(copier.recv(&mut rx).unwrap().is_none());
    }
}
