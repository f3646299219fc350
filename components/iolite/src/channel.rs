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
//! and enqueues its descriptor. The receiver's [`ChannelRx::recv`]
//! validates each descriptor and yields an [`Aggregate`]; when it drops its
//! references, the library queues releases that [`ChannelRx::flush`] puts
//! on the release ring, and the sender applies them in
//! [`ChannelTx::poll_releases`].
//!
//! **Wake-ups** follow the rings' "signal me" flags (see [`crate::ring`]):
//! a side about to block calls `arm` (the receiver asks for data; the
//! sender for releases and/or room), and does not block if `arm` says
//! there is already something to do; when it runs again it calls
//! `disarm`. `flush` on either end publishes what is queued and returns
//! whether the other side asked for what was published since the last
//! flush: then, and only then, the caller signals it (one signal per
//! batch, none to a peer that is running anyway). The library sends no
//! signal itself: the component owns its notifications.
//!
//! **Copy modes** are not the channel's business: a receiver that must
//! copy (flash/posix comparison modes) puts a [`crate::copy::Copier`]
//! after its `ChannelRx`.
//!
//! Back-pressure: a full forward ring, a full release ring, or the peer's
//! quota make `send` fail with the aggregate handed back; nothing is lost.

use crate::aggregate::{Aggregate, SliceVec};
use crate::desc::{AggDesc, RelDesc, FLAG_EOF, FLAG_RECLAIM};
use crate::domain::{Domain, PeerId};
use crate::region::RwRegion;
use crate::ring::{ring_bytes, RingConsumer, RingProducer};
use crate::{Error, Result, MAX_SLICES};

/// The capacities of a channel's two rings; both sides of a channel must
/// use the same (a protocol constant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Aggregate descriptors in flight (a power of two; 336 bytes each).
    pub fwd: usize,
    /// Releases in flight (a power of two; 16 bytes each).
    pub rel: usize,
}

impl Geometry {
    const fn release_ring_off(&self) -> usize {
        ring_bytes::<AggDesc>(self.fwd).div_ceil(64) * 64
    }

    /// Bytes of shared memory the channel needs.
    pub const fn bytes(&self) -> usize {
        self.release_ring_off() + ring_bytes::<RelDesc>(self.rel)
    }

    /// [`Geometry::bytes`] rounded up to whole pages.
    pub const fn page_bytes(&self) -> usize {
        self.bytes().div_ceil(4096) * 4096
    }

    /// The two rings' regions inside `region`.
    fn split(&self, region: RwRegion) -> Result<(RwRegion, RwRegion)> {
        if region.len() < self.bytes() {
            return Err(Error::BadRegion);
        }
        let off = self.release_ring_off();
        // SAFETY: both sub-ranges are inside `region`.
        unsafe {
            let fwd = RwRegion::from_raw_parts(region.as_ptr(), off).ok_or(Error::BadRegion)?;
            let rel = RwRegion::from_raw_parts(region.as_ptr().add(off), region.len() - off).ok_or(Error::BadRegion)?;
            Ok((fwd, rel))
        }
    }

    /// Byte offset of the release ring in the channel's region (a test or
    /// a deliberately hostile peer writing raw ring words needs it).
    pub const fn release_ring_offset(&self) -> usize {
        self.release_ring_off()
    }
}

/// Bytes of shared memory needed for a channel.
pub const fn channel_bytes(fwd_cap: usize, rel_cap: usize) -> usize {
    Geometry { fwd: fwd_cap, rel: rel_cap }.bytes()
}

/// Where and how one end attaches to a channel.
#[derive(Clone, Copy)]
pub struct Attach<'d> {
    /// The component's IO-Lite domain.
    pub domain: &'d Domain,
    /// The other end's peer slot in `domain`.
    pub peer: PeerId,
    /// The channel's shared memory (read-write on both sides).
    pub region: RwRegion,
    /// Ring capacities, as the channel was initialised with.
    pub geometry: Geometry,
}

/// Initialises a channel's shared region (both rings empty). Done once by
/// whoever sets the channel up (the loader, or one side at boot), and again
/// to reset the channel when one side was restarted.
///
/// # Safety
/// `region` must be the channel's shared memory and no side may be using it.
pub unsafe fn init_channel(region: RwRegion, geometry: Geometry) -> Result<()> {
    let (fwd, rel) = geometry.split(region)?;
    // SAFETY: per this function's contract.
    unsafe {
        RingProducer::<AggDesc>::init(fwd, geometry.fwd)?;
        RingProducer::<RelDesc>::init(rel, geometry.rel)?;
    }
    Ok(())
}

/// The sending end of a channel.
pub struct ChannelTx<'d> {
    d: &'d Domain,
    peer: PeerId,
    fwd: RingProducer<AggDesc>,
    rel: RingConsumer<RelDesc>,
    /// Descriptors published since the last flush.
    sent: usize,
    /// Releases consumed since the last flush.
    taken: usize,
    /// The last send found the forward ring full.
    full: bool,
    notifications: u64,
}

impl<'d> ChannelTx<'d> {
    /// Attaches to an initialised channel as its sender.
    ///
    /// # Safety
    /// `at.region` must be the channel's shared memory, initialised with
    /// [`init_channel`] with the same geometry; only one sender may exist.
    pub unsafe fn attach(at: Attach<'d>) -> Result<Self> {
        let (f, r) = at.geometry.split(at.region)?;
        // SAFETY: per this function's contract.
        let (fwd, rel) =
            unsafe { (RingProducer::attach(f, at.geometry.fwd)?, RingConsumer::attach(r, at.geometry.rel)?) };
        Ok(Self { d: at.domain, peer: at.peer, fwd, rel, sent: 0, taken: 0, full: false, notifications: 0 })
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
        self.full = self.fwd.free()? == 0;
        if self.full {
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
        self.sent += 1;
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

    /// Ends a batch: whether the receiver must be signalled now, because it
    /// asked ([`ChannelRx::arm`]) for what happened since the last flush:
    /// descriptors were sent, or releases were taken from a ring it found
    /// full. The request is used up; the caller signals.
    #[must_use = "signal the receiver when this is true"]
    pub fn flush(&mut self) -> bool {
        let data = self.sent > 0 && self.fwd.take_data_request();
        let room = self.taken > 0 && self.rel.take_space_request();
        self.sent = 0;
        self.taken = 0;
        let signal = data || room;
        self.notifications += signal as u64;
        signal
    }

    /// Before blocking: asks the receiver to signal when it returns
    /// releases (if `releases`: the caller waits for its buffers) and when
    /// it takes descriptors (if `room`: the caller holds messages back, or
    /// has more to send once the receiver made progress). Returns true if
    /// that already happened (do not block then, look again): releases are
    /// in the ring, or (`room`) the ring the last send found full has room,
    /// or the receiver took everything. A corrupt ring says false: blocking
    /// on a broken channel is the caller's choice, spinning on it is not;
    /// and a caller that will not send (its channel broken) asks for no
    /// room.
    pub fn arm(&mut self, releases: bool, room: bool) -> bool {
        let mut ready = false;
        if releases {
            self.rel.request_data_signal();
            ready |= self.rel.is_empty() == Ok(false);
        }
        if room {
            self.fwd.request_space_signal();
            let free = self.fwd.free().unwrap_or(0);
            ready |= if self.full { free > 0 } else { free == self.fwd.capacity() };
        }
        ready
    }

    /// Withdraws what [`ChannelTx::arm`] asked for (this side runs again).
    pub fn disarm(&mut self) {
        self.rel.cancel_data_request();
        self.fwd.cancel_space_request();
    }

    /// Signals [`ChannelTx::flush`] asked for so far.
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
        self.taken += n;
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

/// Something messages are received from: a [`ChannelRx`], or a stage
/// after one (a [`crate::copy::Copying`] receiver).
pub trait Receive<'d> {
    /// The next message, if any (see [`ChannelRx::recv`]).
    fn recv(&mut self) -> Result<Option<Received<'d>>>;
}

/// The receiving end of a channel.
pub struct ChannelRx<'d> {
    d: &'d Domain,
    peer: PeerId,
    fwd: RingConsumer<AggDesc>,
    rel: RingProducer<RelDesc>,
    /// Rejected descriptor whose releases did not all fit the ring yet.
    reject: Option<(AggDesc, usize)>,
    /// Remainder of a message partly consumed by `iol_read`.
    pub(crate) pending: Option<Aggregate<'d>>,
    pub(crate) eof: bool,
    /// Descriptors consumed since the last flush.
    taken: usize,
    /// Releases published since the last flush.
    released: usize,
    notifications: u64,
}

impl<'d> ChannelRx<'d> {
    /// Attaches to an initialised channel as its receiver.
    ///
    /// # Safety
    /// As for [`ChannelTx::attach`]; only one receiver may exist.
    pub unsafe fn attach(at: Attach<'d>) -> Result<Self> {
        let (f, r) = at.geometry.split(at.region)?;
        // SAFETY: per this function's contract.
        let (fwd, rel) =
            unsafe { (RingConsumer::attach(f, at.geometry.fwd)?, RingProducer::attach(r, at.geometry.rel)?) };
        Ok(Self {
            d: at.domain,
            peer: at.peer,
            fwd,
            rel,
            reject: None,
            pending: None,
            eof: false,
            taken: 0,
            released: 0,
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

    /// Signals [`ChannelRx::flush`] asked for so far.
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Takes the next message, if any, by reference (counted in
    /// [`Stats::bytes_by_ref_received`](crate::Stats::bytes_by_ref_received)).
    ///
    /// A descriptor that fails validation is dropped with its error
    /// returned, and every hold it claimed to grant goes back to the sender
    /// (nothing leaks at an honest sender). While those releases cannot be
    /// queued (release ring full) `recv` returns `Err(Error::Full)` and
    /// consumes nothing.
    pub fn recv(&mut self) -> Result<Option<Received<'d>>> {
        let r = self.recv_uncounted()?;
        if let Some(r) = &r {
            self.d.count_by_ref_received(r.agg.len());
        }
        Ok(r)
    }

    /// [`ChannelRx::recv`] without counting the bytes: a stage after the
    /// channel (a copier) counts them as what it makes of them.
    pub(crate) fn recv_uncounted(&mut self) -> Result<Option<Received<'d>>> {
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
        self.taken += 1;
        if let Err(e) = self.d.accept_holds(nslices, got.as_slice(), self.peer) {
            let mut desc = AggDesc { nslices, flags, tag, ..AggDesc::default() };
            desc.slices[..got.len()].copy_from_slice(got.as_slice());
            self.reject = Some((desc, 0));
            let _ = self.push_reject();
            return Err(e);
        }
        // Built in place (no intermediate moves). Normalising drops
        // zero-length slices and merges contiguous ones; the holds this
        // frees are queued for return to the sender at once.
        let mut r = Received { agg: Aggregate::new(self.d), tag, flags };
        r.agg.set_held(got.as_slice());
        Ok(Some(r))
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
            for rel in Domain::rejected_releases(&desc).skip(done) {
                match self.rel.push(rel) {
                    Ok(()) => {
                        done += 1;
                        self.released += 1;
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
        }
        Ok(())
    }

    /// Puts the releases owed to the sender on the release ring. Returns
    /// how many were queued; the rest stay pending (ring full) for the next
    /// call. Signals nobody: see [`ChannelRx::flush`].
    pub fn flush_releases(&mut self) -> Result<usize> {
        self.push_reject()?;
        let rel = &mut self.rel;
        let n = self.d.drain_returns(self.peer, |r| rel.push(r).is_ok())?;
        self.released += n;
        Ok(n)
    }

    /// Ends a batch: queues the releases owed ([`ChannelRx::flush_releases`];
    /// a corrupt ring queues nothing, which the next `recv` reports), and
    /// says whether the sender must be signalled now because it asked
    /// ([`ChannelTx::arm`]) for what happened since the last flush:
    /// releases were returned, or descriptors taken from a full ring. The
    /// request is used up; the caller signals.
    #[must_use = "signal the sender when this is true"]
    pub fn flush(&mut self) -> bool {
        let _ = self.flush_releases();
        let releases = self.released > 0 && self.rel.take_data_request();
        let room = self.taken > 0 && self.fwd.take_space_request();
        self.released = 0;
        self.taken = 0;
        let signal = releases || room;
        self.notifications += signal as u64;
        signal
    }

    /// Before blocking: asks the sender to signal when it sends (and, while
    /// releases wait for room in the release ring, when it takes some).
    /// Returns true if there is already something to do (a descriptor in
    /// the ring, or room for the waiting releases): do not block then, look
    /// again. A corrupt ring says false (see [`ChannelTx::arm`]).
    pub fn arm(&mut self) -> bool {
        let room = self.arm_releases_only();
        if self.reject.is_some() {
            // Nothing is taken from the forward ring until the rejected
            // descriptor's holds are back: only room can change that.
            return room;
        }
        self.fwd.request_data_signal();
        room || self.fwd.is_empty() == Ok(false)
    }

    /// [`ChannelRx::arm`] without asking for data: only room for releases
    /// that wait for it (a receiver that cannot take messages now).
    pub(crate) fn arm_releases_only(&mut self) -> bool {
        if self.reject.is_none() && !self.d.has_returns(self.peer) {
            return false;
        }
        self.rel.request_space_signal();
        self.rel.free().is_ok_and(|n| n > 0)
    }

    /// Withdraws what [`ChannelRx::arm`] asked for (this side runs again).
    pub fn disarm(&mut self) {
        self.fwd.cancel_data_request();
        self.rel.cancel_space_request();
    }
}

impl<'d> Receive<'d> for ChannelRx<'d> {
    fn recv(&mut self) -> Result<Option<Received<'d>>> {
        ChannelRx::recv(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::PoolId;
    use crate::testing::{bytes, make, map, own};
    use crate::{SliceDesc, FLAG_EOF, MAX_SLICES, PAGE_SIZE};
    use std::vec::Vec;

    const FS_POOL: PoolId = 1;
    const HTTP_POOL: PoolId = 2;
    const PRIVATE_POOL: PoolId = 3; // fs-owned, not in http's ACL
    const FS_HTTP: PeerId = PeerId(0);
    const HTTP_FS: PeerId = PeerId(0);

    fn chan(fwd: usize, rel: usize) -> RwRegion {
        let r = crate::testing::region(channel_bytes(fwd, rel));
        // SAFETY: fresh region.
        unsafe { init_channel(r, Geometry { fwd, rel }).unwrap() };
        r
    }

    fn at(d: &Domain, peer: PeerId, region: RwRegion, fwd: usize, rel: usize) -> Attach<'_> {
        Attach { domain: d, peer, region, geometry: Geometry { fwd, rel } }
    }

    fn domains() -> (Domain, Domain) {
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 16));
        own(&fs, PRIVATE_POOL, 4);
        own(&http, HTTP_POOL, 16);
        (fs, http)
    }

    fn ends<'a>(fs: &'a Domain, http: &'a Domain, r: RwRegion, cap: (usize, usize)) -> (ChannelTx<'a>, ChannelRx<'a>) {
        // SAFETY: `r` was initialised by chan(); one end each.
        unsafe {
            (
                ChannelTx::attach(at(fs, FS_HTTP, r, cap.0, cap.1)).unwrap(),
                ChannelRx::attach(at(http, HTTP_FS, r, cap.0, cap.1)).unwrap(),
            )
        }
    }

    #[test]
    fn round_trip_is_zero_copy_and_batched() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
        for i in 0..3u8 {
            tx.send(make(&fs, FS_POOL, &[i; 1000]), i as u64, 0).unwrap();
        }
        // A fresh channel: the receiver has not run yet, so it is waiting.
        assert!(tx.flush(), "one notification per batch");
        assert!(!tx.flush(), "nothing new to signal");
        assert_eq!(tx.notifications(), 1);
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
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
        let (fwd, relr) = Geometry { fwd: 8, rel: 8 }.split(r).unwrap();
        // SAFETY: the test plays a malicious sender writing raw descriptors.
        let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 8).unwrap() };
        let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 8).unwrap() };
        let mut rx = unsafe { ChannelRx::attach(at(&http, HTTP_FS, r, 8, 8)).unwrap() };
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
        let (fwd, relr) = Geometry { fwd: 64, rel: 64 }.split(r).unwrap();
        // SAFETY: the test plays the hostile sender on a fresh channel.
        let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 64).unwrap() };
        let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 64).unwrap() };
        let mut rx = unsafe { ChannelRx::attach(at(&net, NET_HTTP, r, 64, 64)).unwrap() };
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1));
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
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1));
        for i in 0..3u8 {
            tx.send(make(&fs, FS_POOL, &[i]), 0, 0).unwrap();
        }
        let _ = tx.flush();
        drop((0..3).map(|_| rx.recv().unwrap().unwrap()).collect::<Vec<_>>());
        assert_eq!(rx.flush_releases().unwrap(), 1, "the ring holds one release");
        assert!(rx.flush(), "a fresh ring: its consumer counts as waiting once");
        // The receiver blocks with releases held back: it asks for room.
        assert!(!rx.arm(), "nothing to do yet");
        assert_eq!(tx.poll_releases().unwrap(), 1);
        assert!(tx.flush(), "the sender signals the receiver after draining a full ring");
        assert!(rx.arm(), "room now: the receiver does not block");
        rx.disarm();
        assert_eq!(rx.flush_releases().unwrap(), 1);
        tx.poll_releases().unwrap();
        assert!(!tx.flush(), "the receiver runs (disarmed): no signal");
        assert_eq!(rx.flush_releases().unwrap(), 1);
        assert!(!rx.arm(), "every release queued: it waits for data only");
        tx.poll_releases().unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert!(!tx.flush(), "it did not ask for room");
        assert_eq!(tx.poll_releases().unwrap(), 0);
        assert!(!tx.flush(), "no signal when nothing was drained");
    }

    #[test]
    fn flush_signals_only_what_the_peer_asked_for() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
        // The receiver runs (which withdraws a fresh ring's standing
        // request): sends are not signalled.
        rx.disarm();
        tx.send(make(&fs, FS_POOL, b"a"), 1, 0).unwrap();
        assert!(!tx.flush());
        // It blocks: the look after arming finds the message.
        assert!(rx.arm());
        rx.disarm();
        let a = rx.recv().unwrap().unwrap();
        assert!(!rx.arm(), "nothing more: it may block");
        tx.send(make(&fs, FS_POOL, b"b"), 2, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"c"), 3, 0).unwrap();
        assert!(tx.flush(), "one signal for the batch");
        assert_eq!(tx.send(make(&fs, FS_POOL, b"d"), 4, 0).unwrap_err().0, Error::Full);
        assert!(!tx.flush(), "the request was used up");
        // The sender waits for room and for its buffers.
        assert!(!tx.arm(true, true));
        drop(a);
        assert!(rx.flush(), "releases: the sender asked");
        assert!(tx.arm(true, false), "releases arrived: do not block");
        tx.disarm();
        tx.poll_releases().unwrap();
        assert!(!tx.arm(true, true), "nothing left: the sender blocks");
        rx.disarm();
        let _b = rx.recv().unwrap().unwrap();
        assert!(rx.flush(), "room: the sender asked");
        assert!(!rx.flush());
        assert!(tx.arm(false, true), "room now");
        tx.disarm();
        tx.send(make(&fs, FS_POOL, b"d"), 4, 0).unwrap();
        assert!(!tx.arm(false, false), "nothing to wait for");
        // Waiting for the receiver to take what was sent (not full).
        tx.disarm();
        assert!(!tx.arm(false, true), "c and d are still in the ring");
        rx.disarm();
        let _c = rx.recv().unwrap().unwrap();
        let _d = rx.recv().unwrap().unwrap();
        assert!(rx.flush(), "the sender asked to hear when they were taken");
        assert!(tx.arm(false, true), "all taken: do not block");
        assert_eq!((tx.notifications(), rx.notifications()), (1, 3));
    }

    #[test]
    fn control_flags_pass_through() {
        let (fs, http) = domains();
        let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
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
        let (mut tx, mut rx) = ends(&fs, &http, r, (4, 4));
        tx.send(make(&fs, FS_POOL, b"x"), 0, 0).unwrap();
        tx.send(make(&fs, FS_POOL, b"y"), 0, 0).unwrap();
        let got = rx.recv().unwrap().unwrap(); // one received, one still in the ring
        std::mem::forget(got);
        let _ = (rx, tx);
        // The loader restarts http: fs drops its holds, the channel is reset.
        fs.peer_died(FS_HTTP).unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
        // SAFETY: nobody uses the channel during the reset.
        unsafe { init_channel(r, Geometry { fwd: 4, rel: 4 }).unwrap() };
        let mut tx = unsafe { ChannelTx::attach(at(&fs, FS_HTTP, r, 4, 4)).unwrap() };
        tx.send(make(&fs, FS_POOL, b"z"), 0, 0).unwrap();
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
    }

    #[test]
    fn two_components_on_two_threads() {
        // fs and http run concurrently; a small pool forces buffers to be
        // recycled through the release path many times.
        const MSGS: u64 = 3000;
        let pool = crate::testing::pool_region(8);
        let r = chan(4, 4);
        let producer = std::thread::spawn(move || {
            let fs = Domain::new();
            fs.add_owned_pool(FS_POOL, pool, crate::testing::meta(8), crate::Trust::Trusted).unwrap();
            // SAFETY: initialised before the threads start; one sender.
            let mut tx = unsafe { ChannelTx::attach(at(&fs, FS_HTTP, r, 4, 4)).unwrap() };
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
                            let _ = tx.flush(); // a polling receiver
                            tx.poll_releases().unwrap();
                            std::thread::yield_now();
                        }
                        Err((e, _)) => panic!("{e:?}"),
                    }
                }
                let _ = tx.flush();
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
            let mut rx = unsafe { ChannelRx::attach(at(&http, HTTP_FS, r, 4, 4)).unwrap() };
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
