//! IO-Lite pipes: aggregates one way, releases back, no payload copied.
//!
//! A channel lives in one shared region holding two SPSC rings:
//!
//! ```text
//! offset 0                      : forward ring of AggDesc (sender → receiver)
//! offset round_up(fwd bytes, 64): release ring of RelDesc (receiver → sender)
//! ```
//!
//! The sender's [`ChannelTx::send`] lends an aggregate's holds to the peer
//! and enqueues its descriptor; [`ChannelTx::flush`] signals the receiver once
//! per batch. The receiver's [`ChannelRx::recv`] validates each descriptor and
//! yields an [`Aggregate`]; when it drops its references, the library queues
//! releases that [`ChannelRx::flush_releases`] puts on the release ring, and
//! the sender applies them in [`ChannelTx::poll_releases`].
//!
//! Back-pressure: a full forward ring, a full release ring, or the peer's
//! quota make `send` fail with the aggregate handed back; nothing is lost.

use crate::aggregate::Aggregate;
use crate::desc::{AggDesc, PoolId, RelDesc, FLAG_EOF, FLAG_RECLAIM};
use crate::domain::{Domain, PeerId};
use crate::mode::{Boundary, CopyMode};
use crate::region::RwRegion;
use crate::ring::{ring_bytes, RingConsumer, RingProducer};
use crate::{Error, Result};

/// Wakes the other side of a channel (an seL4 notification on target).
pub trait Notify {
    /// Signal the peer that the ring it consumes has new entries.
    fn notify(&self);
}

/// A [`Notify`] that does nothing (polling peers, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNotify;

impl Notify for NoNotify {
    fn notify(&self) {}
}

impl<F: Fn()> Notify for F {
    fn notify(&self) {
        self()
    }
}

const fn release_ring_off(fwd_cap: usize) -> usize {
    ring_bytes::<AggDesc>(fwd_cap).div_ceil(64) * 64
}

/// Bytes of shared memory needed for a channel.
pub const fn channel_bytes(fwd_cap: usize, rel_cap: usize) -> usize {
    release_ring_off(fwd_cap) + ring_bytes::<RelDesc>(rel_cap)
}

fn split(region: RwRegion, fwd_cap: usize, rel_cap: usize) -> Result<(RwRegion, RwRegion)> {
    if region.len() < channel_bytes(fwd_cap, rel_cap) {
        return Err(Error::BadRegion);
    }
    let off = release_ring_off(fwd_cap);
    // SAFETY: both sub-ranges are inside `region`.
    unsafe {
        let fwd = RwRegion::from_raw_parts(region.as_ptr(), off).ok_or(Error::BadRegion)?;
        let rel = RwRegion::from_raw_parts(region.as_ptr().add(off), region.len() - off)
            .ok_or(Error::BadRegion)?;
        Ok((fwd, rel))
    }
}

/// Initialises a channel's shared region (both rings empty). Done once by
/// whoever sets the channel up (the loader, or one side at boot), and again
/// to reset the channel when one side was restarted.
///
/// # Safety
/// `region` must be the channel's shared memory and no side may be using it.
pub unsafe fn init_channel(region: RwRegion, fwd_cap: usize, rel_cap: usize) -> Result<()> {
    let (fwd, rel) = split(region, fwd_cap, rel_cap)?;
    // SAFETY: per this function's contract.
    unsafe {
        RingProducer::<AggDesc>::init(fwd, fwd_cap)?;
        RingProducer::<RelDesc>::init(rel, rel_cap)?;
    }
    Ok(())
}

/// The sending end of a channel.
pub struct ChannelTx<'d, N: Notify = NoNotify> {
    d: &'d Domain,
    peer: PeerId,
    fwd: RingProducer<AggDesc>,
    rel: RingConsumer<RelDesc>,
    notify: N,
    unsignalled: usize,
    notifications: u64,
}

impl<'d, N: Notify> ChannelTx<'d, N> {
    /// Attaches to an initialised channel as its sender; `peer` is the
    /// receiver's peer slot in `d`, `notify` wakes the receiver.
    ///
    /// # Safety
    /// `region` must be the channel's shared memory, initialised with
    /// [`init_channel`] with the same capacities; only one sender may exist.
    pub unsafe fn attach(d: &'d Domain, peer: PeerId, region: RwRegion, fwd_cap: usize, rel_cap: usize, notify: N) -> Result<Self> {
        let (f, r) = split(region, fwd_cap, rel_cap)?;
        // SAFETY: per this function's contract.
        let (fwd, rel) = unsafe { (RingProducer::attach(f, fwd_cap)?, RingConsumer::attach(r, rel_cap)?) };
        Ok(Self { d, peer, fwd, rel, notify, unsignalled: 0, notifications: 0 })
    }

    /// The receiver's peer id.
    pub fn peer(&self) -> PeerId {
        self.peer
    }

    /// Enqueues an aggregate (its references are lent to the receiver, no
    /// bytes are copied). Does not signal; call [`ChannelTx::flush`] after a
    /// batch. On back-pressure (`Full`, `QuotaExceeded`) or a dead peer the
    /// aggregate is handed back unchanged.
    pub fn send(&mut self, agg: Aggregate<'d>, tag: u64, flags: u32) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        // Returned releases may make room under the quota.
        let _ = self.poll_releases();
        match self.fwd.free() {
            Ok(0) => return Err((Error::Full, agg)),
            Ok(_) => {}
            Err(e) => return Err((e, agg)),
        }
        let desc = self.d.lend(agg, self.peer, tag, flags)?;
        // Cannot fail: we checked for room and are the only producer.
        self.fwd.push(desc).expect("room checked");
        self.unsignalled += 1;
        Ok(())
    }

    /// Sends an end-of-stream marker (an empty aggregate with [`FLAG_EOF`]).
    pub fn send_eof(&mut self) -> Result<()> {
        self.send(Aggregate::new(self.d), 0, FLAG_EOF).map_err(|(e, _)| e)
    }

    /// Asks the receiver to drop references it can live without
    /// ([`FLAG_RECLAIM`]); used by an owner whose pool runs low.
    pub fn request_reclaim(&mut self) -> Result<()> {
        self.send(Aggregate::new(self.d), 0, FLAG_RECLAIM).map_err(|(e, _)| e)
    }

    /// Signals the receiver if anything was sent since the last signal
    /// (one notification per batch). Returns whether it signalled.
    pub fn flush(&mut self) -> bool {
        if self.unsignalled == 0 {
            return false;
        }
        self.unsignalled = 0;
        self.notifications += 1;
        self.notify.notify();
        true
    }

    /// Notifications sent so far.
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Applies every release the receiver returned. Bad releases are counted
    /// in [`Stats::bad_releases`](crate::Stats::bad_releases) and skipped.
    /// Returns the number of release messages consumed.
    pub fn poll_releases(&mut self) -> Result<usize> {
        let mut n = 0;
        while let Some(r) = self.rel.pop()? {
            let _ = self.d.apply_release(&r, self.peer);
            n += 1;
        }
        Ok(n)
    }
}

/// One message taken from a channel.
#[derive(Debug)]
pub struct Received<'d> {
    /// The data (empty for control messages).
    pub agg: Aggregate<'d>,
    /// The sender's tag.
    pub tag: u64,
    /// The sender's `FLAG_*` bits.
    pub flags: u32,
}

/// The receiving end of a channel.
pub struct ChannelRx<'d, N: Notify = NoNotify> {
    d: &'d Domain,
    peer: PeerId,
    fwd: RingConsumer<AggDesc>,
    rel: RingProducer<RelDesc>,
    notify: N,
    copy: bool,
    copy_pool: Option<PoolId>,
    /// Rejected descriptor whose releases did not all fit the ring yet.
    reject: Option<(AggDesc, usize)>,
    /// Received but not yet copied (copy pool was exhausted).
    stalled: Option<Received<'d>>,
    /// Remainder of a message partly consumed by `iol_read`.
    pub(crate) pending: Option<Aggregate<'d>>,
    pub(crate) eof: bool,
    notifications: u64,
}

impl<'d, N: Notify> ChannelRx<'d, N> {
    /// Attaches to an initialised channel as its receiver; `peer` is the
    /// sender's peer slot in `d`, `notify` wakes the sender (for releases).
    /// `mode` and `boundary` decide whether received data is copied into a
    /// private buffer of `copy_pool` (see [`CopyMode`]).
    ///
    /// # Safety
    /// As for [`ChannelTx::attach`]; only one receiver may exist.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attach(
        d: &'d Domain,
        peer: PeerId,
        region: RwRegion,
        fwd_cap: usize,
        rel_cap: usize,
        notify: N,
        mode: CopyMode,
        boundary: Boundary,
        copy_pool: Option<PoolId>,
    ) -> Result<Self> {
        let (f, r) = split(region, fwd_cap, rel_cap)?;
        // SAFETY: per this function's contract.
        let (fwd, rel) = unsafe { (RingConsumer::attach(f, fwd_cap)?, RingProducer::attach(r, rel_cap)?) };
        let copy = mode.copies(boundary);
        if copy && copy_pool.is_none() {
            return Err(Error::NoCopyPool);
        }
        Ok(Self {
            d,
            peer,
            fwd,
            rel,
            notify,
            copy,
            copy_pool,
            reject: None,
            stalled: None,
            pending: None,
            eof: false,
            notifications: 0,
        })
    }

    /// The sender's peer id.
    pub fn peer(&self) -> PeerId {
        self.peer
    }

    /// The domain this end belongs to.
    pub fn domain(&self) -> &'d Domain {
        self.d
    }

    /// Whether this end copies received data (copy mode at its boundary).
    pub fn copies(&self) -> bool {
        self.copy
    }

    /// Notifications sent so far (for releases).
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Takes the next message, if any.
    ///
    /// A descriptor that fails validation is dropped with its error
    /// returned, and every hold it claimed to grant goes back to the sender
    /// (nothing leaks at an honest sender). While those releases cannot be
    /// queued (release ring full) `recv` returns `Err(Error::Full)` and
    /// consumes nothing.
    pub fn recv(&mut self) -> Result<Option<Received<'d>>> {
        if let Some(st) = self.stalled.take() {
            return match self.copy_in(st) {
                Ok(r) => Ok(Some(r)),
                Err((e, st)) => {
                    self.stalled = Some(st);
                    Err(e)
                }
            };
        }
        self.push_reject()?;
        if self.reject.is_some() {
            return Err(Error::Full);
        }
        let Some(desc) = self.fwd.pop()? else { return Ok(None) };
        match self.d.accept(&desc, self.peer) {
            Ok(agg) => {
                let r = Received { agg, tag: desc.tag, flags: desc.flags };
                match self.copy_in(r) {
                    Ok(r) => Ok(Some(r)),
                    Err((e, r)) => {
                        self.stalled = Some(r);
                        Err(e)
                    }
                }
            }
            Err(e) => {
                self.reject = Some((desc, 0));
                let _ = self.push_reject();
                Err(e)
            }
        }
    }

    fn copy_in(&mut self, r: Received<'d>) -> core::result::Result<Received<'d>, (Error, Received<'d>)> {
        if !self.copy || r.agg.is_empty() {
            return Ok(r);
        }
        let pool = self.copy_pool.expect("checked at attach");
        match r.agg.copy_to_pool(pool) {
            // The sender's buffers are released at once (as after write(2)).
            Ok(private) => Ok(Received { agg: private, tag: r.tag, flags: r.flags }),
            Err(e) => Err((e, r)),
        }
    }

    fn push_reject(&mut self) -> Result<()> {
        if let Some((desc, mut done)) = self.reject.take() {
            let mut pushed = false;
            for rel in Domain::rejected_releases(&desc).skip(done) {
                match self.rel.push(rel) {
                    Ok(()) => {
                        done += 1;
                        pushed = true;
                    }
                    Err(Error::Full) => {
                        self.reject = Some((desc, done));
                        break;
                    }
                    Err(e) => {
                        self.reject = Some((desc, done));
                        return Err(e);
                    }
                }
            }
            if pushed {
                self.notifications += 1;
                self.notify.notify();
            }
        }
        Ok(())
    }

    /// Puts the releases owed to the sender on the release ring and signals
    /// it if any were queued. Returns how many were queued; the rest stay
    /// pending (ring full) for the next call.
    pub fn flush_releases(&mut self) -> Result<usize> {
        self.push_reject()?;
        let rel = &mut self.rel;
        let n = self.d.drain_returns(self.peer, |r| rel.push(r).is_ok())?;
        if n > 0 {
            self.notifications += 1;
            self.notify.notify();
        }
        Ok(n)
    }
}
