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

use crate::aggregate::{Aggregate, SliceVec};
use crate::desc::{AggDesc, PoolId, RelDesc, FLAG_EOF, FLAG_RECLAIM};
use crate::domain::{Domain, PeerId};
use crate::mode::{Boundary, CopyMode};
use crate::region::RwRegion;
use crate::ring::{ring_bytes, RingConsumer, RingProducer};
use crate::{Error, Result, MAX_SLICES};

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
        let rel = RwRegion::from_raw_parts(region.as_ptr().add(off), region.len() - off).ok_or(Error::BadRegion)?;
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
    pub unsafe fn attach(
        d: &'d Domain,
        peer: PeerId,
        region: RwRegion,
        fwd_cap: usize,
        rel_cap: usize,
        notify: N,
    ) -> Result<Self> {
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
    pub fn send(
        &mut self,
        mut agg: Aggregate<'d>,
        tag: u64,
        flags: u32,
    ) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        if !core::ptr::eq(agg.domain(), self.d) {
            return Err((Error::InvalidArgument, agg));
        }
        match self.enqueue(&agg, tag, flags, true) {
            Ok(()) => {
                agg.forget_holds();
                Ok(())
            }
            Err(e) => Err((e, agg)),
        }
    }

    /// Enqueues another reference to `agg`'s slices, which stays with the
    /// caller: the same as `send(agg.duplicate()?, tag, flags)` without
    /// creating (and moving) the duplicate. This is how a cache lends the
    /// buffers it keeps. On back-pressure or a dead peer nothing changed.
    pub fn send_ref(&mut self, agg: &Aggregate<'d>, tag: u64, flags: u32) -> Result<()> {
        if !core::ptr::eq(agg.domain(), self.d) {
            return Err(Error::InvalidArgument);
        }
        self.enqueue(agg, tag, flags, false)
    }

    /// Grants `agg`'s holds (moved from it, or new ones) and writes its
    /// descriptor into the ring.
    fn enqueue(&mut self, agg: &Aggregate<'d>, tag: u64, flags: u32, move_local: bool) -> Result<()> {
        // Returned releases may make room under the quota.
        let _ = self.poll_releases();
        if self.fwd.free()? == 0 {
            return Err(Error::Full);
        }
        self.d.lend_holds(agg, self.peer, move_local)?;
        // The descriptor is written straight into the ring slot: header and
        // the valid slices only. Cannot fail: we checked for room and are
        // the only producer.
        let slices = agg.descs();
        self.fwd
            .push_with(|slot| {
                slot.set_header(slices.len() as u32, flags, tag);
                for (k, s) in slices.iter().enumerate() {
                    slot.set_slice(k, s);
                }
            })
            .expect("room checked");
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
    ///
    /// If the release ring was full, the receiver may still hold releases it
    /// could not queue and be waiting for data: it is signalled, so it
    /// flushes them. Otherwise a sender waiting for pool space and a
    /// receiver waiting for data would wait for each other forever.
    pub fn poll_releases(&mut self) -> Result<usize> {
        let was_full = self.rel.len()? >= self.rel.capacity();
        let mut n = 0;
        while let Some(r) = self.rel.pop()? {
            let _ = self.d.apply_release(&r, self.peer);
            n += 1;
        }
        if was_full && n > 0 {
            self.notifications += 1;
            self.notify.notify();
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
            let Received { agg, tag, flags } = st;
            return self.deliver(agg, tag, flags).map(Some);
        }
        self.push_reject()?;
        if self.reject.is_some() {
            return Err(Error::Full);
        }
        // Copy out of the shared slot exactly what we use, each field once:
        // the header and the slices it claims (at most MAX_SLICES). The
        // sender may rewrite the slot meanwhile; only these copies count.
        let mut got = SliceVec::<MAX_SLICES>::new();
        let Some((nslices, flags, tag)) = self.fwd.pop_with(|e| {
            let n = e.nslices();
            for k in 0..(n as usize).min(MAX_SLICES) {
                got.push(e.slice(k));
            }
            (n, e.flags(), e.tag())
        })?
        else {
            return Ok(None);
        };
        if let Err(e) = self.d.accept_holds(nslices, got.as_slice(), self.peer) {
            let mut desc = AggDesc { nslices, flags, tag, ..AggDesc::default() };
            desc.slices[..got.len()].copy_from_slice(got.as_slice());
            self.reject = Some((desc, 0));
            let _ = self.push_reject();
            return Err(e);
        }
        // Normalising drops zero-length slices and merges contiguous ones;
        // the holds this frees are queued for return to the sender at once.
        if self.copy {
            let agg = Aggregate::from_held(self.d, got.as_slice());
            return self.deliver(agg, tag, flags).map(Some);
        }
        // By reference: built in place (no intermediate moves).
        let mut r = Received { agg: Aggregate::new(self.d), tag, flags };
        r.agg.set_held(got.as_slice());
        self.d.count_by_ref_received(r.agg.len());
        Ok(Some(r))
    }

    /// Hands a received aggregate to the caller: by reference, or as a
    /// private copy if this end copies. Counted as received by reference
    /// or as copied, never both. If the copy pool is exhausted the message
    /// is kept for the next `recv`.
    #[cold]
    fn deliver(&mut self, agg: Aggregate<'d>, tag: u64, flags: u32) -> Result<Received<'d>> {
        if self.copy && !agg.is_empty() {
            let pool = self.copy_pool.expect("checked at attach");
            return match agg.copy_to_pool(pool) {
                // The sender's buffers are released at once (as after write(2)).
                Ok(private) => Ok(Received { agg: private, tag, flags }),
                Err(e) => {
                    self.stalled = Some(Received { agg, tag, flags });
                    Err(e)
                }
            };
        }
        self.d.count_by_ref_received(agg.len());
        Ok(Received { agg, tag, flags })
    }

    #[inline]
    fn push_reject(&mut self) -> Result<()> {
        if self.reject.is_none() {
            return Ok(());
        }
        self.push_reject_slow()
    }

    #[cold]
    fn push_reject_slow(&mut self) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::host;
    use crate::testutil::{bytes, make, map, own};
    use crate::{SliceDesc, FLAG_EOF, MAX_SLICES, PAGE_SIZE};
    use std::cell::Cell;
    use std::vec::Vec;

    const FS_POOL: PoolId = 1;
    const HTTP_POOL: PoolId = 2;
    const PRIVATE_POOL: PoolId = 3; // fs-owned, not in http's ACL
    const FS_HTTP: PeerId = PeerId(0);
    const HTTP_FS: PeerId = PeerId(0);

    fn chan(fwd: usize, rel: usize) -> RwRegion {
        let r = host::region(channel_bytes(fwd, rel));
        // SAFETY: fresh region.
        unsafe { init_channel(r, fwd, rel).unwrap() };
        r
    }

    fn domains() -> (Domain, Domain) {
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 16));
        own(&fs, PRIVATE_POOL, 4);
        own(&http, HTTP_POOL, 16);
        (fs, http)
    }

    fn ends<'a, N: Notify>(
        fs: &'a Domain,
        http: &'a Domain,
        r: RwRegion,
        cap: (usize, usize),
        n: N,
        mode: CopyMode,
        b: Boundary,
    ) -> (ChannelTx<'a, N>, ChannelRx<'a>) {
        // SAFETY: `r` was initialised by chan(); one end each.
        unsafe {
            (
                ChannelTx::attach(fs, FS_HTTP, r, cap.0, cap.1, n).unwrap(),
                ChannelRx::attach(http, HTTP_FS, r, cap.0, cap.1, NoNotify, mode, b, Some(HTTP_POOL)).unwrap(),
            )
        }
    }

    #[test]
    fn round_trip_is_zero_copy_and_batched() {
        let (fs, http) = domains();
        let signals = Cell::new(0);
        let notify = || signals.set(signals.get() + 1);
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8), notify, CopyMode::IoLite, Boundary::AppToNet);
        for i in 0..3u8 {
            tx.send(make(&fs, FS_POOL, &[i; 1000]), i as u64, 0).unwrap();
        }
        assert!(tx.flush());
        assert!(!tx.flush(), "nothing new to signal");
        assert_eq!(signals.get(), 1, "one notification per batch");
        for i in 0..3u8 {
            let r = rx.recv().unwrap().unwrap();
            assert_eq!(r.tag, i as u64);
            assert_eq!(bytes(&r.agg), [i; 1000]);
        }
        assert!(rx.recv().unwrap().is_none());
        assert_eq!(fs.stats().bytes_by_ref_sent, 3000);
        assert_eq!(http.stats().bytes_by_ref_received, 3000);
        assert_eq!(fs.stats().bytes_copied + http.stats().bytes_copied, 0);
        assert_eq!(fs.stats().buffers_in_use, 3, "http holds them");
        assert_eq!(rx.flush_releases().unwrap(), 3);
        assert_eq!(tx.poll_releases().unwrap(), 3);
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(fs.stats().releases_received, 3);
    }

    #[test]
    fn send_ref_lends_without_giving_up_the_aggregate() {
        let (fs, http) = domains();
        fs.set_quota(FS_HTTP, 1).unwrap();
        let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        let cached = make(&fs, FS_POOL, b"cached");
        let buf = cached.descs()[0].buf;
        tx.send_ref(&cached, 1, 0).unwrap();
        tx.send_ref(&cached, 2, 0).unwrap(); // same buffer: within the quota of 1
        assert_eq!(tx.send_ref(&cached, 3, 0).unwrap_err(), Error::Full);
        assert_eq!(fs.holds(FS_POOL, buf).unwrap(), crate::Holds { local: 1, lent: 2, received: 0 });
        assert_eq!(fs.stats().bytes_by_ref_sent, 12);
        let other = make(&fs, FS_POOL, b"other");
        let a = rx.recv().unwrap().unwrap();
        assert_eq!(tx.send_ref(&other, 4, 0).unwrap_err(), Error::QuotaExceeded);
        let b = rx.recv().unwrap().unwrap();
        assert_eq!((a.tag, b.tag), (1, 2));
        assert!(a.agg.eq_bytes(b"cached") && b.agg.eq_bytes(b"cached"));
        drop((a, b));
        rx.flush_releases().unwrap();
        tx.poll_releases().unwrap();
        assert_eq!(fs.holds(FS_POOL, buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
        assert!(cached.eq_bytes(b"cached"), "the sender still has its aggregate");
        let foreign = make(&http, HTTP_POOL, b"not fs's");
        assert_eq!(tx.send_ref(&foreign, 5, 0).unwrap_err(), Error::InvalidArgument);
        drop(cached);
        assert_eq!(fs.pool_stats(FS_POOL).unwrap().buffers_in_use, 1, "only `other` is left");
    }

    #[test]
    fn full_ring_is_back_pressure_not_loss() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        tx.send(make(&fs, FS_POOL, b"1"), 1, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"2"), 2, 0).unwrap();
        let (e, back) = tx.send(make(&fs, FS_POOL, b"3"), 3, 0).unwrap_err();
        assert_eq!(e, Error::Full);
        assert_eq!(bytes(&back), b"3");
        assert_eq!(rx.recv().unwrap().unwrap().tag, 1);
        tx.send(back, 3, 0).unwrap();
        assert_eq!(rx.recv().unwrap().unwrap().tag, 2);
        let r = rx.recv().unwrap().unwrap();
        assert_eq!((r.tag, bytes(&r.agg)), (3, b"3".to_vec()));
    }

    #[test]
    fn quota_back_pressure_through_the_channel() {
        let (fs, http) = domains();
        fs.set_quota(FS_HTTP, 1).unwrap();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        tx.send(make(&fs, FS_POOL, b"a"), 0, 0).unwrap();
        let (e, b) = tx.send(make(&fs, FS_POOL, b"b"), 0, 0).unwrap_err();
        assert_eq!(e, Error::QuotaExceeded);
        drop(rx.recv().unwrap().unwrap());
        rx.flush_releases().unwrap();
        // send() polls releases first, so the slow consumer's release makes room.
        tx.send(b, 0, 0).unwrap();
    }

    #[test]
    fn honest_descriptor_rejected_by_receiver_returns_its_holds() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        // PRIVATE_POOL is not in http's ACL.
        let mut a = make(&fs, FS_POOL, b"ok ");
        a.append(make(&fs, PRIVATE_POOL, b"secret")).unwrap();
        tx.send(a, 1, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"next"), 2, 0).unwrap();
        assert_eq!(rx.recv().unwrap_err(), Error::UnknownPool);
        assert_eq!(http.stats().rejected_descriptors, 1);
        // The following message is unaffected.
        let r = rx.recv().unwrap().unwrap();
        assert_eq!(bytes(&r.agg), b"next");
        drop(r);
        rx.flush_releases().unwrap();
        tx.poll_releases().unwrap();
        assert_eq!(fs.stats().bad_releases, 0);
        assert_eq!(fs.stats().buffers_in_use, 0, "nothing leaked at the sender");
    }

    #[test]
    fn forged_descriptor_from_a_malicious_sender() {
        let (fs, http) = domains();
        let r = chan(8, 8);
        let (fwd, relr) = split(r, 8, 8).unwrap();
        // SAFETY: the test plays a malicious sender writing raw descriptors.
        let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 8).unwrap() };
        let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 8).unwrap() };
        let mut rx = unsafe {
            ChannelRx::attach(&http, HTTP_FS, r, 8, 8, NoNotify, CopyMode::IoLite, Boundary::Pipe, None).unwrap()
        };
        let live = make(&fs, FS_POOL, b"live data");
        let s = live.descs()[0];
        let mut d = AggDesc { nslices: 2, ..AggDesc::default() };
        d.slices[0] = s;
        d.slices[1] = SliceDesc { len: 5000, ..s }; // beyond sealed bytes
        evil.push(d).unwrap();
        evil.push(AggDesc { nslices: 1000, ..AggDesc::default() }).unwrap();
        assert_eq!(rx.recv().unwrap_err(), Error::OutOfBounds);
        assert_eq!(rx.recv().unwrap_err(), Error::TooManySlices);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
        // The claimed holds are handed back (the owner rejects them). The
        // receiver consumes nothing more until they fit in the release ring.
        let mut n = 0;
        loop {
            while let Some(rel) = evil_rel.pop().unwrap() {
                assert!(fs.apply_release(&rel, FS_HTTP).is_err());
                n += 1;
            }
            match rx.recv() {
                Err(Error::Full) => continue,
                Ok(None) => break,
                other => panic!("{other:?}"),
            }
        }
        while let Some(rel) = evil_rel.pop().unwrap() {
            assert!(fs.apply_release(&rel, FS_HTTP).is_err());
            n += 1;
        }
        assert_eq!(n, 2 + MAX_SLICES);
        assert_eq!(fs.stats().bad_releases, n as u64);
        assert!(live.eq_bytes(b"live data"));
    }

    /// A hostile sender (httpd) feeding a network stack's receive end:
    /// whatever it forges is rejected and counted, nothing of it is
    /// delivered, and its honest messages keep flowing in order.
    #[test]
    fn hostile_sender_cannot_forge_references() {
        const RX: PoolId = 21; // netdrv's receive pool (net reads it)
        const HDR: PoolId = 22; // net's frame headers
        const SOCK: PoolId = 23; // net's received data (lent to http)
        const APP: PoolId = 24; // http's pool
        const FILE: PoolId = 1; // fs's file cache
        const NET_DRV: PeerId = PeerId(0);
        const NET_HTTP: PeerId = PeerId(1);
        const NET_OTHER: PeerId = PeerId(2);
        const HTTP_NET: PeerId = PeerId(0);
        const DRV_NET: PeerId = PeerId(0);
        let (drv, net, http, fs) = (Domain::new(), Domain::new(), Domain::new(), Domain::new());
        let rx_pool = own(&drv, RX, 8);
        let hdr_pool = own(&net, HDR, 8);
        let sock_pool = own(&net, SOCK, 8);
        let app_pool = own(&http, APP, 8);
        let file_pool = own(&fs, FILE, 8);
        map(&net, RX, rx_pool);
        map(&net, APP, app_pool);
        map(&net, FILE, file_pool);
        map(&http, SOCK, sock_pool);
        map(&http, FILE, file_pool);
        let _ = hdr_pool;
        // http maps app, file and sock: its grant list at net, by the
        // dataport names an assembly writes (the rejections below check
        // that the named form set exactly these pools).
        let names: &[(&str, PoolId)] = &[
            ("rx_pool", RX),
            ("hdr_pool", HDR),
            ("app_pool", APP),
            ("file_pool", FILE),
            ("sock_pool", SOCK),
            ("cgi_pool", 0),
        ];
        assert_eq!(net.set_peer_pools(NET_HTTP, &[APP, 77]).unwrap_err(), Error::UnknownPool);
        assert_eq!(net.set_peer_pools_named(NET_HTTP, &["app_pool", "nosuch"], names), Err(Error::UnknownPool));
        assert_eq!(net.set_peer_pools_named(NET_HTTP, &["cgi_pool"], names), Err(Error::UnknownPool), "absent");
        net.set_peer_pools_named(NET_HTTP, &["app_pool", "file_pool", "sock_pool"], names).unwrap();

        // Live buffers http might try to name.
        let header = make(&net, HDR, b"frame header");
        let frame = make(&drv, RX, b"someone else's frame");
        let frame = net.accept(&drv.lend(frame, DRV_NET, 0, 0).unwrap(), NET_DRV).unwrap();
        let others = make(&net, SOCK, b"Authorization: Basic c2VjcmV0");
        let to_other = net.lend(others.duplicate().unwrap(), NET_OTHER, 0, 0).unwrap();
        let kept = make(&net, SOCK, b"never lent to anybody");
        let returned = make(&net, SOCK, b"lent to http, returned");
        let mine = make(&net, SOCK, b"GET / HTTP/1.1");
        let (s_hdr, s_frame, s_other, s_kept, s_ret) =
            (header.descs()[0], frame.descs()[0], others.descs()[0], kept.descs()[0], returned.descs()[0]);
        // http receives `returned` and gives it back, and keeps `mine`.
        let got = http.accept(&net.lend(returned.duplicate().unwrap(), HTTP_NET, 0, 0).unwrap(), HTTP_NET).unwrap();
        drop(got);
        http.drain_returns(HTTP_NET, |r| net.apply_release(&r, NET_HTTP).is_ok()).unwrap();
        let mine_at_http =
            http.accept(&net.lend(mine.duplicate().unwrap(), NET_HTTP, 0, 0).unwrap(), HTTP_NET).unwrap();
        let file = make(&fs, FILE, b"a cached file");
        let file_at_http = http.accept(&fs.lend(file, PeerId(0), 0, 0).unwrap(), PeerId(1)).unwrap();
        let app = make(&http, APP, b"HTTP/1.1 200 OK");
        let s_app = app.descs()[0];

        // The channel http -> net; http writes raw descriptors.
        let r = chan(64, 64);
        let (fwd, relr) = split(r, 64, 64).unwrap();
        // SAFETY: the test plays the hostile sender on a fresh channel.
        let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 64).unwrap() };
        let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 64).unwrap() };
        let mut rx = unsafe {
            ChannelRx::attach(&net, NET_HTTP, r, 64, 64, NoNotify, CopyMode::IoLite, Boundary::AppToNet, None).unwrap()
        };
        let one = |s: SliceDesc| {
            let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
            d.slices[0] = s;
            d
        };
        let forged = [
            (one(s_hdr), Error::ForeignPool),   // net's header pool: http does not map it
            (one(s_frame), Error::ForeignPool), // netdrv's receive pool
            (one(SliceDesc { pool: 99, ..s_app }), Error::UnknownPool), // no such pool
            (one(s_other), Error::NotGranted),  // lent to another client, not to http
            (one(s_kept), Error::NotGranted),   // never lent
            (one(s_ret), Error::NotGranted),    // lent once, returned since
            (one(SliceDesc { gen: s_app.gen + 1, ..s_app }), Error::GenerationMismatch),
            (one(SliceDesc { gen: s_app.gen.wrapping_sub(1), ..s_app }), Error::GenerationMismatch),
        ];
        let mut mixed = one(mine_at_http.descs()[0]);
        mixed.nslices = 2;
        mixed.slices[1] = s_hdr;
        let mut expected = 0;
        for (k, (d, e)) in forged.iter().chain([(mixed, Error::ForeignPool)].iter()).enumerate() {
            evil.push(*d).unwrap();
            assert_eq!(rx.recv().unwrap_err(), *e, "forgery {k}");
            // Honest traffic continues: a reply header, then the request
            // back (net's own buffer, which it lent to http).
            let honest = if k % 2 == 0 { app.duplicate().unwrap() } else { mine_at_http.duplicate().unwrap() };
            evil.push(http.lend(honest, HTTP_NET, k as u64, 0).unwrap()).unwrap();
            let m = rx.recv().unwrap().unwrap();
            assert_eq!(m.tag, k as u64);
            let want: &[u8] = if k % 2 == 0 { b"HTTP/1.1 200 OK" } else { b"GET / HTTP/1.1" };
            assert_eq!(bytes(&m.agg), want);
            expected += 1;
            while let Some(rel) = evil_rel.pop().unwrap() {
                let _ = http.apply_release(&rel, HTTP_NET);
            }
        }
        // Guessing generations of a buffer net never lent gets nothing:
        // small numbers are stale (a generation carries a random tag in its
        // high bits), and even the live one, as if guessed, is not granted.
        for gen in (1..63).chain([s_kept.gen]) {
            evil.push(one(SliceDesc { gen, ..s_kept })).unwrap();
            assert!(rx.recv().is_err());
            while let Some(rel) = evil_rel.pop().unwrap() {
                let _ = http.apply_release(&rel, HTTP_NET);
            }
        }
        // A file fragment http was lent by fs is fine (net cannot check fs's
        // grants, only that http maps the pool), and so is its own pool.
        evil.push(http.lend(file_at_http, HTTP_NET, 99, 0).unwrap()).unwrap();
        assert_eq!(bytes(&rx.recv().unwrap().unwrap().agg), b"a cached file");
        assert!(rx.recv().unwrap().is_none());

        let st = net.stats();
        assert_eq!(st.rejected_foreign_pool, 4);
        // Of the 63 guesses, the live generation was refused as not granted,
        // the others as stale.
        assert_eq!(st.rejected_not_granted, 3 + 1);
        assert_eq!(st.rejected_descriptors, forged.len() as u64 + 1 + 63);
        assert_eq!(net.peer_rejections(NET_HTTP).unwrap(), st.rejected_descriptors);
        assert_eq!(net.peer_rejections(NET_DRV).unwrap(), 0);
        // Only honest bytes arrived: 5 headers, 4 requests, the fragment,
        // and the frame netdrv sent.
        assert_eq!(expected, 9);
        assert_eq!(st.bytes_by_ref_received, 5 * 15 + 4 * 14 + 13 + 20);
        // net's own buffers are as they were: held by net (and `others`
        // by the other client), by nobody else.
        assert_eq!(net.holds(SOCK, s_kept.buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
        assert_eq!(net.holds(HDR, s_hdr.buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
        assert_eq!(net.holds(SOCK, s_other.buf).unwrap().lent, 1);
        assert!(header.eq_bytes(b"frame header") && kept.eq_bytes(b"never lent to anybody"));
        assert_eq!(to_other.slices()[0], s_other);
    }

    #[test]
    fn full_release_ring_drains_over_several_flushes() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        for i in 0..5u8 {
            tx.send(make(&fs, FS_POOL, &[i]), 0, 0).unwrap();
        }
        let got: Vec<_> = (0..5).map(|_| rx.recv().unwrap().unwrap()).collect();
        drop(got);
        let mut rounds = 0;
        while fs.stats().buffers_in_use > 0 {
            assert_eq!(rx.flush_releases().unwrap(), 1);
            tx.poll_releases().unwrap();
            rounds += 1;
        }
        assert_eq!(rounds, 5);
        assert_eq!(rx.flush_releases().unwrap(), 0);
    }

    #[test]
    fn draining_a_full_release_ring_wakes_the_receiver() {
        // The receiver could queue only one of its releases; if the sender
        // drained the ring silently, a receiver waiting for data would never
        // flush the rest while the sender waits for pool space.
        let (fs, http) = domains();
        let signals = Cell::new(0);
        let notify = || signals.set(signals.get() + 1);
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1), notify, CopyMode::IoLite, Boundary::Pipe);
        for i in 0..3u8 {
            tx.send(make(&fs, FS_POOL, &[i]), 0, 0).unwrap();
        }
        drop((0..3).map(|_| rx.recv().unwrap().unwrap()).collect::<Vec<_>>());
        assert_eq!(rx.flush_releases().unwrap(), 1, "the ring holds one release");
        let before = signals.get();
        assert_eq!(tx.poll_releases().unwrap(), 1);
        assert_eq!(signals.get(), before + 1, "the sender signals the receiver after draining a full ring");
        assert_eq!(rx.flush_releases().unwrap(), 1);
        tx.poll_releases().unwrap();
        assert_eq!(rx.flush_releases().unwrap(), 1);
        let before = signals.get();
        tx.poll_releases().unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(signals.get(), before + 1);
        assert_eq!(tx.poll_releases().unwrap(), 0);
        assert_eq!(signals.get(), before + 1, "no signal when nothing was drained");
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
            let (fs, http) = domains();
            let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8), NoNotify, mode, boundary);
            assert_eq!(rx.copies(), copies);
            let data = vec![0x5a; 3 * PAGE_SIZE];
            tx.send(make(&fs, FS_POOL, &data), 0, 0).unwrap();
            let r = rx.recv().unwrap().unwrap();
            assert!(r.agg.eq_bytes(&data));
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
        let (fs, http) = domains();
        let r = chan(8, 8);
        // SAFETY: initialised above.
        let e = unsafe {
            ChannelRx::attach(&http, HTTP_FS, r, 8, 8, NoNotify, CopyMode::Posix, Boundary::Pipe, None).err()
        };
        assert_eq!(e, Some(Error::NoCopyPool));
        let _ = fs;
    }

    #[test]
    fn copy_into_an_exhausted_pool_stalls_without_loss() {
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 16));
        own(&http, HTTP_POOL, 1);
        let r = chan(8, 8);
        // SAFETY: initialised above.
        let (mut tx, mut rx) = unsafe {
            (
                ChannelTx::attach(&fs, FS_HTTP, r, 8, 8, NoNotify).unwrap(),
                ChannelRx::attach(&http, HTTP_FS, r, 8, 8, NoNotify, CopyMode::Posix, Boundary::Pipe, Some(HTTP_POOL))
                    .unwrap(),
            )
        };
        tx.send(make(&fs, FS_POOL, b"first"), 1, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"second"), 2, 0).unwrap();
        let first = rx.recv().unwrap().unwrap();
        assert_eq!(rx.recv().unwrap_err(), Error::PoolExhausted);
        drop(first);
        let second = rx.recv().unwrap().unwrap();
        assert_eq!((second.tag, bytes(&second.agg)), (2, b"second".to_vec()));
        assert_eq!(http.stats().bytes_copied, 11, "the stalled message is copied once");
        assert_eq!(http.stats().bytes_by_ref_received, 0, "nothing was delivered by reference");
    }

    #[test]
    fn control_flags_pass_through() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        tx.request_reclaim().unwrap();
        tx.send_eof().unwrap();
        let a = rx.recv().unwrap().unwrap();
        assert!(a.agg.is_empty() && a.flags == FLAG_RECLAIM);
        let b = rx.recv().unwrap().unwrap();
        assert!(b.agg.is_empty() && b.flags == FLAG_EOF);
    }

    #[test]
    fn dead_receiver_then_channel_reset() {
        let (fs, http) = domains();
        let r = chan(4, 4);
        let (mut tx, mut rx) = ends(&fs, &http, r, (4, 4), NoNotify, CopyMode::IoLite, Boundary::Pipe);
        tx.send(make(&fs, FS_POOL, b"x"), 0, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"y"), 0, 0).unwrap();
        let got = rx.recv().unwrap().unwrap(); // one received, one still in the ring
        std::mem::forget(got);
        let _ = (rx, tx);
        // The loader restarts http: fs drops its holds, the channel is reset.
        fs.peer_died(FS_HTTP).unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
        // SAFETY: nobody uses the channel during the reset.
        unsafe { init_channel(r, 4, 4).unwrap() };
        let mut tx = unsafe { ChannelTx::attach(&fs, FS_HTTP, r, 4, 4, NoNotify).unwrap() };
        tx.send(make(&fs, FS_POOL, b"z"), 0, 0).unwrap();
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
    }

    #[test]
    fn two_components_on_two_threads() {
        // fs and http run concurrently; a small pool forces buffers to be
        // recycled through the release path many times.
        const MSGS: u64 = 3000;
        let pool = crate::testutil::pool_region(8);
        let r = chan(4, 4);
        let producer = std::thread::spawn(move || {
            let fs = Domain::new();
            fs.add_owned_pool(FS_POOL, pool, crate::testutil::meta(8), crate::Trust::Trusted).unwrap();
            // SAFETY: initialised before the threads start; one sender.
            let mut tx = unsafe { ChannelTx::attach(&fs, FS_HTTP, r, 4, 4, NoNotify).unwrap() };
            let mut seq = 0u64;
            let mut gens = std::collections::HashSet::new();
            while seq < MSGS {
                let len = 1 + (seq as usize * 37) % (2 * PAGE_SIZE);
                let mut w = match fs.alloc(FS_POOL, len) {
                    Ok(w) => w,
                    Err(Error::PoolExhausted) => {
                        tx.poll_releases().unwrap();
                        std::thread::yield_now();
                        continue;
                    }
                    Err(e) => panic!("{e:?}"),
                };
                gens.insert(w.id());
                for (i, b) in w.writable()[..len].iter_mut().enumerate() {
                    *b = (seq as usize + i) as u8;
                }
                let mut a = w.seal(len).unwrap();
                loop {
                    match tx.send(a, seq, if seq == MSGS - 1 { FLAG_EOF } else { 0 }) {
                        Ok(()) => break,
                        Err((Error::Full, back)) => {
                            a = back;
                            tx.flush();
                            tx.poll_releases().unwrap();
                            std::thread::yield_now();
                        }
                        Err((e, _)) => panic!("{e:?}"),
                    }
                }
                tx.flush();
                seq += 1;
            }
            while fs.stats().buffers_in_use > 0 {
                tx.poll_releases().unwrap();
                std::thread::yield_now();
            }
            assert_eq!(fs.stats().bytes_copied, 0);
            assert_eq!(fs.stats().bad_releases, 0);
            gens.len()
        });
        let consumer = std::thread::spawn(move || {
            let http = Domain::new();
            map(&http, FS_POOL, pool);
            // SAFETY: as above; one receiver.
            let mut rx = unsafe {
                ChannelRx::attach(&http, HTTP_FS, r, 4, 4, NoNotify, CopyMode::IoLite, Boundary::Pipe, None).unwrap()
            };
            let mut expect = 0u64;
            loop {
                match rx.recv().unwrap() {
                    Some(m) => {
                        assert_eq!(m.tag, expect);
                        let len = 1 + (expect as usize * 37) % (2 * PAGE_SIZE);
                        assert_eq!(m.agg.len(), len);
                        for (i, b) in bytes(&m.agg).into_iter().enumerate() {
                            assert_eq!(b, (expect as usize + i) as u8);
                        }
                        expect += 1;
                        let eof = m.flags & FLAG_EOF != 0;
                        drop(m);
                        while http.has_returns(HTTP_FS) {
                            rx.flush_releases().unwrap();
                            std::thread::yield_now();
                        }
                        if eof {
                            break;
                        }
                    }
                    None => std::thread::yield_now(),
                }
            }
            assert_eq!(http.stats().bytes_copied, 0);
            expect
        });
        assert_eq!(consumer.join().unwrap(), MSGS);
        let distinct = producer.join().unwrap();
        assert!(distinct as u64 > 8, "buffers were recycled with new generations");
    }
}
