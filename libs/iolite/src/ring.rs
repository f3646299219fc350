//! Single-producer single-consumer rings of plain descriptors in shared memory.
//!
//! Layout of a ring region (all offsets in bytes, `#[repr(C)]`):
//!
//! | offset | field | written by |
//! |---|---|---|
//! | 0   | `head: u32` (free-running count of entries produced) | producer |
//! | 4   | `want_space: u32` (non-zero: the producer asks for a signal when an entry is consumed) | producer sets, consumer clears |
//! | 64  | `tail: u32` (free-running count of entries consumed) | consumer |
//! | 68  | `want_data: u32` (non-zero: the consumer asks for a signal when an entry is produced) | consumer sets, producer clears |
//! | 128 | `capacity: u32` (power of two) | initialiser |
//! | 132 | `magic: u32` = [`RING_MAGIC`] | initialiser |
//! | 192 | `entries: [T; capacity]` | producer |
//!
//! `head` and `tail` live on separate cache lines. The producer publishes an
//! entry with a release store of `head`; the consumer acquires `head` before
//! reading the entry and frees the slot with a release store of `tail`.
//!
//! ## Wake-ups ("signal me", as sDDF's queues)
//! A side that is about to block sets its flag (`want_data` for the
//! consumer, `want_space` for the producer), then looks at the ring once
//! more: whatever the other side published before it saw the flag is then
//! found by that look, and whatever it publishes after sees the flag (a
//! sequentially consistent fence on both sides orders the flag against the
//! index). The other side signals only if the flag is set, and clears it
//! when it does ([`RingProducer::take_data_request`],
//! [`RingConsumer::take_space_request`]): one signal per wait, however many
//! entries were produced meanwhile. A side clears its own flag when it runs
//! again ([`RingConsumer::cancel_data_request`]), so a peer that is busy
//! anyway is not signalled. The flags are advisory: a peer that sets or
//! clears them at random costs itself wake-ups (or gets spurious ones, at
//! most one per batch), never this side's memory safety or progress.
//! A fresh ring starts with `want_data` set (the consumer has not run yet,
//! so the first entry signals it).
//!
//! Each side keeps its own index privately and only *reads* the other side's
//! index from shared memory, validating it (`0 ≤ head − tail ≤ capacity`), so
//! a corrupt or malicious peer can make the ring look full, empty or broken
//! ([`Error::CorruptRing`]), but cannot make this side read or write outside
//! the region.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use core::sync::atomic::{fence, AtomicU32, Ordering};

use crate::desc::{AggDesc, Pod, SliceDesc};
use crate::region::RwRegion;
use crate::{Error, MAX_SLICES};

/// Magic number written by [`RingProducer::init`].
pub const RING_MAGIC: u32 = 0x494f_4c52; // "IOLR"

const HEAD_OFF: usize = 0;
const WANT_SPACE_OFF: usize = 4;
const TAIL_OFF: usize = 64;
const WANT_DATA_OFF: usize = 68;
const CAP_OFF: usize = 128;
const MAGIC_OFF: usize = 132;
const ENTRIES_OFF: usize = 192;

/// Bytes of shared memory needed for a ring of `capacity` entries of `T`.
pub const fn ring_bytes<T>(capacity: usize) -> usize {
    ENTRIES_OFF + capacity * size_of::<T>()
}

fn check_geometry<T>(region: &RwRegion, capacity: usize) -> Result<(), Error> {
    if capacity == 0
        || !capacity.is_power_of_two()
        || capacity > (u32::MAX as usize) / 2
        || region.len() < ring_bytes::<T>(capacity)
        || !(region.as_ptr() as usize).is_multiple_of(64)
        || align_of::<T>() > 64
    {
        return Err(Error::BadRegion);
    }
    Ok(())
}

struct Shared<T> {
    region: RwRegion,
    mask: u32,
    cap: u32,
    _t: PhantomData<T>,
}

impl<T: Pod> Shared<T> {
    fn atomic(&self, off: usize) -> &AtomicU32 {
        // SAFETY: geometry checked at construction; offset is in range and
        // 4-aligned because the base is 64-aligned.
        unsafe { &*(self.region.as_ptr().add(off) as *const AtomicU32) }
    }
    fn head(&self) -> &AtomicU32 {
        self.atomic(HEAD_OFF)
    }
    fn tail(&self) -> &AtomicU32 {
        self.atomic(TAIL_OFF)
    }
    /// Sets one of this side's wake-up flags, then orders it before the
    /// look at the other side's index that must follow.
    fn request(&self, off: usize) {
        self.atomic(off).store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }
    /// Reads and clears the other side's wake-up flag, after this side's
    /// index store (one atomic access: the value read is the value acted on).
    fn take(&self, off: usize) -> bool {
        fence(Ordering::SeqCst);
        self.atomic(off).swap(0, Ordering::AcqRel) != 0
    }
    fn slot(&self, idx: u32) -> *mut T {
        let i = (idx & self.mask) as usize;
        // SAFETY: i < capacity, region holds `capacity` entries after ENTRIES_OFF.
        unsafe { (self.region.as_ptr().add(ENTRIES_OFF) as *mut T).add(i) }
    }
}

/// The producing end of a ring.
pub struct RingProducer<T: Pod> {
    sh: Shared<T>,
    head: u32,
}

/// The consuming end of a ring.
pub struct RingConsumer<T: Pod> {
    sh: Shared<T>,
    tail: u32,
}

// SAFETY: each end is used by one thread/component at a time; the shared
// indices are atomics.
unsafe impl<T: Pod> Send for RingProducer<T> {}
// SAFETY: as above.
unsafe impl<T: Pod> Send for RingConsumer<T> {}

impl<T: Pod> RingProducer<T> {
    /// Initialises a fresh ring in `region` (zeroes the indices) and returns
    /// its producer end. Call exactly once per ring, before the consumer
    /// attaches, or to reset a ring after its peer was restarted.
    ///
    /// # Safety
    /// `region` must be the ring's shared memory, not concurrently used as
    /// anything else; no other producer may exist.
    pub unsafe fn init(region: RwRegion, capacity: usize) -> Result<Self, Error> {
        check_geometry::<T>(&region, capacity)?;
        let sh = Shared { region, mask: capacity as u32 - 1, cap: capacity as u32, _t: PhantomData };
        sh.head().store(0, Ordering::Relaxed);
        sh.tail().store(0, Ordering::Relaxed);
        sh.atomic(WANT_SPACE_OFF).store(0, Ordering::Relaxed);
        sh.atomic(WANT_DATA_OFF).store(1, Ordering::Relaxed);
        sh.atomic(CAP_OFF).store(capacity as u32, Ordering::Relaxed);
        sh.atomic(MAGIC_OFF).store(RING_MAGIC, Ordering::Release);
        Ok(Self { sh, head: 0 })
    }

    /// Attaches as producer to a ring that was initialised elsewhere,
    /// continuing from the published `head`.
    ///
    /// # Safety
    /// As for [`RingProducer::init`].
    pub unsafe fn attach(region: RwRegion, capacity: usize) -> Result<Self, Error> {
        check_geometry::<T>(&region, capacity)?;
        let sh = Shared { region, mask: capacity as u32 - 1, cap: capacity as u32, _t: PhantomData };
        if sh.atomic(MAGIC_OFF).load(Ordering::Acquire) != RING_MAGIC {
            return Err(Error::CorruptRing);
        }
        let head = sh.head().load(Ordering::Relaxed);
        Ok(Self { sh, head })
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.sh.cap as usize
    }

    fn used(&self) -> Result<u32, Error> {
        let tail = self.sh.tail().load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > self.sh.cap {
            return Err(Error::CorruptRing);
        }
        Ok(used)
    }

    /// Number of free entries (0 = full).
    pub fn free(&self) -> Result<usize, Error> {
        Ok((self.sh.cap - self.used()?) as usize)
    }

    /// Enqueues `v`. A full ring is back-pressure: `Err(Error::Full)` and the
    /// caller still owns its value.
    pub fn push(&mut self, v: T) -> Result<(), Error> {
        self.push_with(|slot| slot.write(v))
    }

    /// Enqueues an entry that `fill` writes in place, field by field, into
    /// the free slot (no temporary copy of the whole entry). What `fill`
    /// leaves unwritten keeps whatever the slot held before (an earlier
    /// entry of this ring), so the entry's format must say which fields
    /// count (e.g. [`AggDesc::nslices`]). The entry is published when `fill`
    /// returns; a full ring is `Err(Error::Full)` and `fill` is not called.
    pub fn push_with(&mut self, fill: impl FnOnce(&mut SlotWriter<'_, T>)) -> Result<(), Error> {
        if self.used()? == self.sh.cap {
            return Err(Error::Full);
        }
        // The slot is not visible to the consumer until head moves.
        fill(&mut SlotWriter { p: self.sh.slot(self.head), _l: PhantomData });
        self.head = self.head.wrapping_add(1);
        self.sh.head().store(self.head, Ordering::Release);
        Ok(())
    }

    /// Whether the consumer asked to be signalled when entries are
    /// produced; clears its request (the caller signals it now). Call after
    /// publishing a batch.
    pub fn take_data_request(&self) -> bool {
        self.sh.take(WANT_DATA_OFF)
    }

    /// Asks the consumer to signal when it consumes an entry (this side is
    /// about to wait for room). Then look at [`RingProducer::free`] again
    /// before blocking: room made before the request was seen is found
    /// there.
    pub fn request_space_signal(&self) {
        self.sh.request(WANT_SPACE_OFF)
    }

    /// Withdraws [`RingProducer::request_space_signal`] (this side runs).
    pub fn cancel_space_request(&self) {
        self.sh.atomic(WANT_SPACE_OFF).store(0, Ordering::Relaxed);
    }
}

/// Write access to one ring slot in shared memory, for
/// [`RingProducer::push_with`]. Every write is a volatile store (the
/// consumer may read the slot at any time).
pub struct SlotWriter<'a, T: Pod> {
    p: *mut T,
    _l: PhantomData<&'a mut T>,
}

impl<T: Pod> SlotWriter<'_, T> {
    /// Writes the whole entry.
    #[inline]
    pub fn write(&mut self, v: T) {
        // SAFETY: `p` is an in-bounds, aligned slot of the ring, reserved
        // for the producer until it publishes it.
        unsafe { core::ptr::write_volatile(self.p, v) }
    }
}

impl SlotWriter<'_, AggDesc> {
    /// Writes the header fields of the descriptor.
    #[inline]
    pub fn set_header(&mut self, nslices: u32, flags: u32, tag: u64) {
        // SAFETY: as in `write`; field projections stay inside the slot.
        unsafe {
            core::ptr::addr_of_mut!((*self.p).nslices).write_volatile(nslices);
            core::ptr::addr_of_mut!((*self.p).flags).write_volatile(flags);
            core::ptr::addr_of_mut!((*self.p).tag).write_volatile(tag);
        }
    }

    /// Writes slice `k` (`k < MAX_SLICES`, else panics).
    #[inline]
    pub fn set_slice(&mut self, k: usize, s: &SliceDesc) {
        assert!(k < MAX_SLICES);
        // SAFETY: as in `write`; k is in bounds of the slices array.
        unsafe { (core::ptr::addr_of_mut!((*self.p).slices) as *mut SliceDesc).add(k).write_volatile(*s) }
    }
}

/// Read access to one published ring slot in shared memory, for
/// [`RingConsumer::pop_with`]. Every read is a volatile load of the current
/// contents: a misbehaving producer may change the slot between two reads,
/// so read each field once and validate the value read, not the slot.
pub struct SlotReader<'a, T: Pod> {
    p: *const T,
    _l: PhantomData<&'a T>,
}

impl<T: Pod> SlotReader<'_, T> {
    /// Reads the whole entry.
    #[inline]
    pub fn read(&self) -> T {
        // SAFETY: `p` is an in-bounds, aligned slot published to us; T is
        // valid for any bits.
        unsafe { core::ptr::read_volatile(self.p) }
    }
}

impl SlotReader<'_, AggDesc> {
    /// The `nslices` field as written (unvalidated).
    #[inline]
    pub fn nslices(&self) -> u32 {
        // SAFETY: as in `read`; field projections stay inside the slot.
        unsafe { core::ptr::addr_of!((*self.p).nslices).read_volatile() }
    }

    /// The `flags` field.
    #[inline]
    pub fn flags(&self) -> u32 {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of!((*self.p).flags).read_volatile() }
    }

    /// The `tag` field.
    #[inline]
    pub fn tag(&self) -> u64 {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of!((*self.p).tag).read_volatile() }
    }

    /// Slice `k` (`k < MAX_SLICES`, else panics).
    #[inline]
    pub fn slice(&self, k: usize) -> SliceDesc {
        assert!(k < MAX_SLICES);
        // SAFETY: as above; k is in bounds of the slices array.
        unsafe { (core::ptr::addr_of!((*self.p).slices) as *const SliceDesc).add(k).read_volatile() }
    }
}

impl<T: Pod> RingConsumer<T> {
    /// Attaches as consumer to a ring initialised by the producer, continuing
    /// from the published `tail`.
    ///
    /// # Safety
    /// `region` must be the ring's shared memory; no other consumer may exist.
    pub unsafe fn attach(region: RwRegion, capacity: usize) -> Result<Self, Error> {
        check_geometry::<T>(&region, capacity)?;
        let sh = Shared { region, mask: capacity as u32 - 1, cap: capacity as u32, _t: PhantomData };
        if sh.atomic(MAGIC_OFF).load(Ordering::Acquire) != RING_MAGIC
            || sh.atomic(CAP_OFF).load(Ordering::Relaxed) != capacity as u32
        {
            return Err(Error::CorruptRing);
        }
        let tail = sh.tail().load(Ordering::Relaxed);
        Ok(Self { sh, tail })
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.sh.cap as usize
    }

    fn avail(&self) -> Result<u32, Error> {
        let head = self.sh.head().load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail);
        if n > self.sh.cap {
            return Err(Error::CorruptRing);
        }
        Ok(n)
    }

    /// Number of entries ready to be consumed.
    pub fn len(&self) -> Result<usize, Error> {
        Ok(self.avail()? as usize)
    }

    /// True if nothing is ready.
    pub fn is_empty(&self) -> Result<bool, Error> {
        Ok(self.avail()? == 0)
    }

    /// Looks at the next entry without consuming it.
    pub fn peek(&self) -> Result<Option<T>, Error> {
        if self.avail()? == 0 {
            return Ok(None);
        }
        // The entry was published by the release store of head, which we
        // acquired in avail(). The copy is taken by value, so later writes by
        // a misbehaving producer cannot change what we validate.
        Ok(Some(SlotReader { p: self.sh.slot(self.tail), _l: PhantomData }.read()))
    }

    /// Dequeues the next entry, if any.
    pub fn pop(&mut self) -> Result<Option<T>, Error> {
        self.pop_with(|slot| slot.read())
    }

    /// Dequeues the next entry, if any, letting `take` read what it needs
    /// of it in place (e.g. only the valid slices of an [`AggDesc`]) instead
    /// of copying the whole entry out. The slot is freed when `take`
    /// returns. `take` must copy out every value it uses, reading each
    /// field once (see [`SlotReader`]).
    pub fn pop_with<R>(&mut self, take: impl FnOnce(&SlotReader<'_, T>) -> R) -> Result<Option<R>, Error> {
        if self.avail()? == 0 {
            return Ok(None);
        }
        let r = take(&SlotReader { p: self.sh.slot(self.tail), _l: PhantomData });
        self.tail = self.tail.wrapping_add(1);
        self.sh.tail().store(self.tail, Ordering::Release);
        Ok(Some(r))
    }

    /// Whether the producer asked to be signalled when entries are
    /// consumed; clears its request (the caller signals it now). Call after
    /// consuming a batch.
    pub fn take_space_request(&self) -> bool {
        self.sh.take(WANT_SPACE_OFF)
    }

    /// Asks the producer to signal when it produces an entry (this side is
    /// about to wait for data). Then look at [`RingConsumer::is_empty`]
    /// again before blocking: entries produced before the request was seen
    /// are found there.
    pub fn request_data_signal(&self) {
        self.sh.request(WANT_DATA_OFF)
    }

    /// Withdraws [`RingConsumer::request_data_signal`] (this side runs).
    pub fn cancel_data_request(&self) {
        self.sh.atomic(WANT_DATA_OFF).store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cap: usize) -> (RingProducer<u64>, RingConsumer<u64>) {
        let r = crate::testing::region(ring_bytes::<u64>(cap));
        // SAFETY: fresh region, one producer and one consumer.
        unsafe { (RingProducer::init(r, cap).unwrap(), RingConsumer::attach(r, cap).unwrap()) }
    }

    #[test]
    fn empty_full_and_wraparound() {
        let (mut p, mut c) = pair(4);
        assert_eq!(c.pop().unwrap(), None);
        assert!(c.is_empty().unwrap());
        for round in 0..10u64 {
            for i in 0..4 {
                p.push(round * 10 + i).unwrap();
            }
            assert_eq!(p.push(99), Err(Error::Full));
            assert_eq!(p.free().unwrap(), 0);
            assert_eq!(c.len().unwrap(), 4);
            for i in 0..4 {
                assert_eq!(c.pop().unwrap(), Some(round * 10 + i));
            }
            assert_eq!(c.pop().unwrap(), None);
        }
    }

    #[test]
    fn indices_wrap_past_u32_max() {
        let r = crate::testing::region(ring_bytes::<u64>(8));
        // SAFETY: fresh region.
        unsafe {
            let _ = RingProducer::<u64>::init(r, 8).unwrap();
            // Move both indices close to u32::MAX as if the ring ran for ages.
            let head = &*(r.as_ptr().add(HEAD_OFF) as *const AtomicU32);
            let tail = &*(r.as_ptr().add(TAIL_OFF) as *const AtomicU32);
            head.store(u32::MAX - 2, Ordering::Relaxed);
            tail.store(u32::MAX - 2, Ordering::Relaxed);
            let mut p = RingProducer::<u64>::attach(r, 8).unwrap();
            let mut c = RingConsumer::<u64>::attach(r, 8).unwrap();
            for i in 0..100 {
                p.push(i).unwrap();
                p.push(i + 1000).unwrap();
                assert_eq!(c.pop().unwrap(), Some(i));
                assert_eq!(c.pop().unwrap(), Some(i + 1000));
            }
        }
    }

    #[test]
    fn bad_geometry_rejected() {
        let r = crate::testing::region(ring_bytes::<u64>(8));
        // SAFETY: fresh region.
        unsafe {
            assert!(RingProducer::<u64>::init(r, 6).is_err());
            assert!(RingProducer::<u64>::init(r, 16).is_err());
            assert!(RingProducer::<u64>::init(r, 0).is_err());
            // Not initialised: consumer refuses to attach.
            assert_eq!(RingConsumer::<u64>::attach(r, 8).err(), Some(Error::CorruptRing));
        }
    }

    #[test]
    fn corrupt_peer_index_is_detected() {
        let r = crate::testing::region(ring_bytes::<u64>(8));
        // SAFETY: fresh region; we then act as a malicious peer.
        unsafe {
            let mut p = RingProducer::<u64>::init(r, 8).unwrap();
            let mut c = RingConsumer::<u64>::attach(r, 8).unwrap();
            let head = &*(r.as_ptr().add(HEAD_OFF) as *const AtomicU32);
            head.store(1000, Ordering::Relaxed); // producer lies
            assert_eq!(c.pop(), Err(Error::CorruptRing));
            let tail = &*(r.as_ptr().add(TAIL_OFF) as *const AtomicU32);
            tail.store(12345, Ordering::Relaxed); // consumer lies
            assert_eq!(p.push(1), Err(Error::CorruptRing));
        }
    }

    #[test]
    fn descriptors_in_place() {
        let r = crate::testing::region(ring_bytes::<AggDesc>(2));
        // SAFETY: fresh region, one producer and one consumer.
        let (mut p, mut c) =
            unsafe { (RingProducer::<AggDesc>::init(r, 2).unwrap(), RingConsumer::<AggDesc>::attach(r, 2).unwrap()) };
        let s = |i: u32| SliceDesc { pool: 1, buf: i, gen: 2 * i + 1, off: 3 * i, len: 4 * i + 1 };
        let mut full = AggDesc { nslices: 3, flags: 1, tag: 7, ..AggDesc::default() };
        for k in 0..MAX_SLICES {
            full.slices[k] = s(k as u32 + 100);
        }
        p.push(full).unwrap();
        p.push_with(|w| {
            w.set_header(2, 2, u64::MAX);
            w.set_slice(0, &s(1));
            w.set_slice(1, &s(2));
        })
        .unwrap();
        assert_eq!(p.push_with(|_| unreachable!("full ring: not called")), Err(Error::Full));
        assert_eq!(c.pop().unwrap(), Some(full));
        c.pop_with(|_| ()).unwrap(); // nothing read, the slot is freed anyway
                                     // Slot 0 again: header and two slices new, the rest left over.
        p.push_with(|w| {
            w.set_header(2, 2, u64::MAX);
            w.set_slice(0, &s(1));
            w.set_slice(1, &s(2));
        })
        .unwrap();
        let got = c
            .pop_with(|e| {
                let v: Vec<_> = (0..e.nslices() as usize).map(|k| e.slice(k)).collect();
                (e.flags(), e.tag(), v, e.slice(2))
            })
            .unwrap()
            .unwrap();
        assert_eq!(got, (2, u64::MAX, vec![s(1), s(2)], s(102)));
        assert_eq!(c.pop_with(|_| ()).unwrap(), None);
    }

    #[test]
    fn signal_requests_are_taken_once() {
        let (mut p, mut c) = pair(4);
        // A fresh ring: the consumer has not run, so the first batch signals.
        p.push(1).unwrap();
        assert!(p.take_data_request());
        assert!(!p.take_data_request(), "taken: one signal per request");
        p.push(2).unwrap();
        assert!(!p.take_data_request(), "nobody asked");
        c.request_data_signal();
        c.cancel_data_request();
        p.push(3).unwrap();
        assert!(!p.take_data_request(), "withdrawn by a consumer that runs");
        c.request_data_signal();
        assert!(!c.is_empty().unwrap(), "the look after the request finds the entries");
        assert!(p.take_data_request());
        // Space: the producer waits for room, the consumer signals after
        // taking an entry.
        p.push(4).unwrap();
        assert_eq!(p.push(5), Err(Error::Full));
        assert!(!c.take_space_request(), "nobody asked");
        p.request_space_signal();
        assert_eq!(p.free().unwrap(), 0);
        assert_eq!(c.pop().unwrap(), Some(1));
        assert!(c.take_space_request());
        assert!(!c.take_space_request());
        p.request_space_signal();
        p.cancel_space_request();
        assert!(!c.take_space_request());
    }

    #[test]
    fn a_peer_scribbling_on_the_flags_changes_only_wakeups() {
        let r = crate::testing::region(ring_bytes::<u64>(4));
        // SAFETY: fresh region; the test then writes the flags as a peer.
        let (mut p, mut c) =
            unsafe { (RingProducer::<u64>::init(r, 4).unwrap(), RingConsumer::<u64>::attach(r, 4).unwrap()) };
        let word = |off: usize| unsafe { &*(r.as_ptr().add(off) as *const AtomicU32) };
        let _ = p.take_data_request();
        word(WANT_DATA_OFF).store(0xdead_beef, Ordering::Relaxed);
        word(WANT_SPACE_OFF).store(u32::MAX, Ordering::Relaxed);
        // Any non-zero value is a request, read and cleared in one access.
        assert!(p.take_data_request());
        assert_eq!(word(WANT_DATA_OFF).load(Ordering::Relaxed), 0);
        assert!(c.take_space_request());
        // The indices are untouched: the ring works as before.
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(Error::Full));
        assert_eq!((0..4).map(|_| c.pop().unwrap().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    /// Both sides block whenever they cannot go on (empty ring, full ring)
    /// and rely on the other's signal alone: a wake-up lost in the window
    /// between a side's last look and its wait leaves it blocked with work
    /// in the ring (the wait times out and the test fails).
    #[test]
    fn signal_me_flags_lose_no_wakeup_between_two_threads() {
        const N: u64 = 100_000;
        let (mut p, mut c) = pair(8);
        let (data, space) =
            (std::sync::Arc::new(crate::testing::Note::new()), std::sync::Arc::new(crate::testing::Note::new()));
        let (d2, s2) = (data.clone(), space.clone());
        let signals = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sig2 = signals.clone();
        let prod = std::thread::spawn(move || {
            let mut i = 0u64;
            while i < N {
                p.cancel_space_request();
                let mut pushed = 0;
                while i < N && p.push(i).is_ok() {
                    i += 1;
                    pushed += 1;
                }
                if pushed > 0 && p.take_data_request() {
                    sig2.fetch_add(1, Ordering::Relaxed);
                    d2.signal();
                }
                if i < N {
                    p.request_space_signal();
                    if p.free().unwrap() == 0 {
                        assert!(s2.wait(), "lost wake-up: the producer waits for room for ever");
                    }
                }
            }
        });
        let mut expect = 0u64;
        while expect < N {
            c.cancel_data_request();
            let mut popped = 0;
            while let Some(v) = c.pop().unwrap() {
                assert_eq!(v, expect);
                expect += 1;
                popped += 1;
            }
            if popped > 0 && c.take_space_request() {
                space.signal();
            }
            if expect < N {
                c.request_data_signal();
                if c.is_empty().unwrap() {
                    assert!(data.wait(), "lost wake-up: the consumer waits for data for ever");
                }
            }
        }
        prod.join().unwrap();
        // Batching: far fewer signals than entries.
        assert!(signals.load(Ordering::Relaxed) < N / 2);
    }

    #[test]
    fn two_threads_hammer_the_ring() {
        const N: u64 = 200_000;
        let (mut p, mut c) = pair(16);
        let prod = std::thread::spawn(move || {
            let mut i = 0u64;
            while i < N {
                // Entry encodes its index twice so torn reads would show.
                match p.push(i << 32 | (i & 0xffff_ffff)) {
                    Ok(()) => i += 1,
                    Err(Error::Full) => std::hint::spin_loop(),
                    Err(e) => panic!("{e:?}"),
                }
            }
        });
        let mut expect = 0u64;
        let mut spins = 0u64;
        while expect < N {
            match c.pop().unwrap() {
                Some(v) => {
                    assert_eq!(v, expect << 32 | (expect & 0xffff_ffff));
                    expect += 1;
                }
                None => {
                    spins += 1;
                    std::hint::spin_loop();
                }
            }
        }
        prod.join().unwrap();
        assert_eq!(c.pop().unwrap(), None);
        let _ = spins;
    }
}
