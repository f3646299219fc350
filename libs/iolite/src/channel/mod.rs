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
mod tests;
