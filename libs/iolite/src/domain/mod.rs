//! The IO-Lite state of one protection domain.
//!
//! A [`Domain`] knows the pools this component owns (it allocates from them
//! and writes them) and the foreign pools it may read (mapped read-only). It
//! keeps, per buffer, how many references ("holds") exist:
//!
//! * `local`: slices of aggregates alive in this domain, plus one for each
//!   live writer ([`BufMut`] or the sub-page packer);
//! * `lent[peer]`: holds this domain granted to a peer and not yet returned;
//! * `recv[peer]`: holds a peer granted to this domain and not yet returned.
//!
//! An owned buffer returns to its pool when all three are zero. For a buffer
//! received from a peer, whenever `Σrecv` exceeds `local + Σlent` the excess is
//! queued for return to the granting peer(s) (see
//! [`Domain::drain_returns`]), so every hold goes back, hop by hop, to the
//! component that granted it. See README "Reference counting across
//! components" for the full protocol, including peer death.
//!
//! A `Domain` is single-threaded (one per component event loop): it uses
//! `Cell`/`RefCell` and is neither `Send` nor `Sync`.

use core::cell::{Cell, RefCell};

use crate::aggregate::Aggregate;
use crate::desc::{PoolId, SliceDesc};
use crate::pool::{BufMeta, BufState, Pack, PoolEntry, Trust, NO_PEER, PAGE_SIZE};
use crate::region::{RoRegion, RwRegion};
use crate::{Error, Result, MAX_PEERS, MAX_POOLS};

mod peer;
mod transfer;

/// Index of a peer of this domain (the far end of a channel), `< MAX_PEERS`.
///
/// Peer ids are local to a domain: the system composition gives each
/// channel end a peer slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerId(pub u8);

impl PeerId {
    fn idx(self) -> Result<usize> {
        let i = self.0 as usize;
        if i < MAX_PEERS {
            Ok(i)
        } else {
            Err(Error::BadPeer)
        }
    }
}

/// Life-cycle state of a peer slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Normal operation.
    Active,
    /// The peer died; the holds it had are quarantined (kept, not reusable)
    /// until [`Domain::peer_settled`]. Nothing is sent to or accepted from it.
    Dying,
}

#[derive(Debug, Clone, Copy)]
struct Peer {
    state: PeerState,
    quota: u32,
    held_bufs: u32,
    refusals: u64,
    /// Bit `k` set: the peer may reference slices of the pool in this
    /// domain's pool slot `k` ([`Domain::set_peer_pools`]).
    pools: u32,
    /// Descriptors from this peer that validation rejected.
    rejected: u64,
}

/// Counters of one domain ("zero copy" is measured, not claimed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Payload bytes this domain copied (memcpy), on any path.
    pub bytes_copied: u64,
    /// Payload bytes sent to peers by reference (sum of aggregate lengths).
    pub bytes_by_ref_sent: u64,
    /// Payload bytes received from peers and delivered by reference. A
    /// channel end that copies (copy mode) counts what it receives in
    /// `bytes_copied` instead, so each byte counts once.
    pub bytes_by_ref_received: u64,
    /// Buffers currently allocated from this domain's own pools.
    pub buffers_in_use: u64,
    /// Pages currently allocated from this domain's own pools.
    pub pages_in_use: u64,
    /// Sum over own pools of each pool's page high-water mark.
    pub high_water_pages: u64,
    /// Allocations that failed because a pool was exhausted.
    pub alloc_failures: u64,
    /// Sends refused because a peer's quota was reached.
    pub quota_refusals: u64,
    /// Incoming descriptors rejected by validation (every reason, the two
    /// below included).
    pub rejected_descriptors: u64,
    /// Of those, descriptors with a slice of a pool outside the sender's
    /// grant list ([`Domain::set_peer_pools`]) or not mapped here.
    pub rejected_foreign_pool: u64,
    /// Of those, descriptors with a slice of one of our own buffers that we
    /// had not lent to that sender (a reference it cannot have been
    /// granted).
    pub rejected_not_granted: u64,
    /// Incoming releases that did not match a hold we granted.
    pub bad_releases: u64,
    /// Release messages handed to channels for sending.
    pub releases_sent: u64,
    /// Release messages received and applied.
    pub releases_received: u64,
}

/// Hold counts of one buffer in one domain ([`Domain::holds`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holds {
    /// Slices of live aggregates in this domain, plus one per live writer.
    pub local: u32,
    /// Holds granted to peers and not returned yet (all peers).
    pub lent: u32,
    /// Holds received from peers and still kept (all peers).
    pub received: u32,
}

/// Occupancy of one pool ([`Domain::pool_stats`]).
///
/// For an owned pool every figure is exact. A reader of a foreign pool sees
/// only the buffers it holds: `pages_in_use` counts their pages (from
/// their published sealed lengths) and `free_pages` is what the rest of the
/// pool would be, an upper bound of the owner's free pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Total data pages.
    pub pages: u32,
    /// Live buffers (owned pools) or buffers we hold references to (foreign).
    pub buffers_in_use: u32,
    /// Pages in live buffers (owned), or pages of the buffers we hold
    /// (foreign).
    pub pages_in_use: u32,
    /// `pages - pages_in_use`: the pool's free pages (owned; what a
    /// component prints as "pool free pages"), or the pages not held by us
    /// (foreign).
    pub free_pages: u32,
    /// Highest `pages_in_use` seen (owned pools only).
    pub high_water_pages: u32,
}

const DIRTY_CAP: usize = 256;

struct Dirty {
    list: [(u8, u32); DIRTY_CAP],
    len: usize,
    overflow: bool,
    /// Per peer: buffers whose `taint` has that peer's bit (see
    /// [`Domain::tainted`]); kept here because every hold change passes
    /// through [`settle`], which sees this struct.
    tainted: [u32; MAX_PEERS],
}

#[derive(Default)]
struct Counters {
    bytes_copied: Cell<u64>,
    by_ref_sent: Cell<u64>,
    by_ref_recv: Cell<u64>,
    alloc_failures: Cell<u64>,
    quota_refusals: Cell<u64>,
    rejected: Cell<u64>,
    rejected_foreign_pool: Cell<u64>,
    rejected_not_granted: Cell<u64>,
    bad_releases: Cell<u64>,
    releases_sent: Cell<u64>,
    releases_received: Cell<u64>,
}

fn bump(c: &Cell<u64>, n: u64) {
    c.set(c.get().wrapping_add(n));
}

/// The IO-Lite state of one protection domain. See the module docs.
pub struct Domain {
    pools: RefCell<[Option<PoolEntry>; MAX_POOLS]>,
    peers: RefCell<[Peer; MAX_PEERS]>,
    dirty: RefCell<Dirty>,
    c: Counters,
    seed: Cell<u64>,
}

fn mix_seed(seed: u64, pool: PoolId) -> u64 {
    let x = (seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (pool as u64).rotate_left(29);
    if x == 0 {
        1
    } else {
        x
    }
}

impl Default for Domain {
    fn default() -> Self {
        Self::new()
    }
}

impl Domain {
    /// An empty domain: no pools, all peers active with unlimited quota.
    pub fn new() -> Self {
        Self {
            pools: RefCell::new([const { None }; MAX_POOLS]),
            peers: RefCell::new(
                [Peer {
                    state: PeerState::Active,
                    quota: u32::MAX,
                    held_bufs: 0,
                    refusals: 0,
                    pools: u32::MAX,
                    rejected: 0,
                }; MAX_PEERS],
            ),
            dirty: RefCell::new(Dirty { list: [(0, 0); DIRTY_CAP], len: 0, overflow: false, tainted: [0; MAX_PEERS] }),
            c: Counters::default(),
            seed: Cell::new(0x6A09_E667_F3BC_C908),
        }
    }

    fn add_pool(&self, e: PoolEntry) -> Result<()> {
        let mut pools = self.pools.borrow_mut();
        if pools.iter().flatten().any(|p| p.id == e.id) {
            return Err(Error::InvalidArgument);
        }
        let slot = pools.iter().position(|p| p.is_none()).ok_or(Error::TableFull)?;
        let mut e = e;
        e.slot = slot as u8;
        pools[slot] = Some(e);
        Ok(())
    }

    /// Registers a pool this domain owns (produces into). `region` is the
    /// pool's dataport mapped read-write here; `meta` is private bookkeeping
    /// with at least one entry per data page ([`PoolLayout::fitting`]).
    /// Call once, at start. The pool's header is kept: on a fresh dataport
    /// (all zero) every page is free; after a restart of this component the
    /// pages its earlier incarnation left in use are quarantined until
    /// [`Domain::end_quarantine`], and every page continues its generation
    /// counter (README "Death").
    ///
    /// [`PoolLayout::fitting`]: crate::PoolLayout::fitting
    pub fn add_owned_pool(
        &self,
        id: PoolId,
        region: RwRegion,
        meta: &'static mut [BufMeta],
        trust: Trust,
    ) -> Result<()> {
        let mut e = PoolEntry::new_owned(id, region, meta, trust)?;
        e.rng = mix_seed(self.seed.get(), id);
        self.add_pool(e)
    }

    /// Seeds the random tags of the generations this domain issues (every
    /// owned pool, present and future). Components pass the per-incarnation
    /// seed the root task gives them, so generations cannot be predicted.
    pub fn seed_generations(&self, seed: u64) {
        self.seed.set(seed);
        for e in self.pools.borrow_mut().iter_mut().flatten() {
            e.rng = mix_seed(seed, e.id);
        }
    }

    /// Pages of an owned pool still quarantined from an earlier incarnation.
    pub fn quarantined_pages(&self, pool: PoolId) -> Result<u32> {
        self.with_pool(pool, |e, _| e.quarantined)
    }

    /// Ends the quarantine of an owned pool's pages left in use by an
    /// earlier incarnation: call it once the system says every consumer of
    /// that incarnation released them. Returns how many pages it freed.
    pub fn end_quarantine(&self, pool: PoolId) -> Result<u32> {
        self.with_pool(pool, |e, _| if e.owned { Ok(e.end_quarantine()) } else { Err(Error::NotOwner) })?
    }

    /// Registers a foreign pool this domain may read (it is in the pool's
    /// ACL and has it mapped read-only).
    pub fn add_foreign_pool(
        &self,
        id: PoolId,
        region: RoRegion,
        meta: &'static mut [BufMeta],
        trust: Trust,
    ) -> Result<()> {
        self.add_pool(PoolEntry::new_foreign(id, region, meta, trust)?)
    }

    /// Whether the producer of `pool` is trusted (see [`Trust`]). Content
    /// caches (e.g. checksums keyed on ⟨buffer, generation⟩) must only be
    /// used for trusted pools.
    pub fn pool_trust(&self, pool: PoolId) -> Result<Trust> {
        self.with_pool(pool, |e, _| e.trust)
    }

    /// Declares which peers are in `pool`'s ACL (have it mapped), as a set
    /// of peer ids. Lending a slice of the pool to any other peer fails with
    /// [`Error::NotInAcl`] before anything is sent. By default every peer
    /// is allowed (the receiver still rejects slices of pools it has not
    /// mapped).
    pub fn set_pool_acl(&self, pool: PoolId, readers: &[PeerId]) -> Result<()> {
        let mut mask = 0u32;
        for p in readers {
            mask |= 1 << p.idx()?;
        }
        self.with_pool(pool, |e, _| e.acl = mask)
    }

    /// Occupancy of a pool.
    pub fn pool_stats(&self, pool: PoolId) -> Result<PoolStats> {
        self.with_pool(pool, |e, _| {
            let pages = e.layout.pages;
            let (held, in_use) = if e.owned {
                (e.in_use, e.pages_in_use)
            } else {
                let (mut bufs, mut held_pages) = (0u32, 0u32);
                for (buf, m) in e.meta[..pages as usize].iter().enumerate() {
                    if m.state == BufState::Held {
                        // At least one page; as many as the sealed bytes
                        // span, and never past the pool's end.
                        let sealed = e.published(buf as u32).1 as usize;
                        let span = sealed.div_ceil(PAGE_SIZE).clamp(1, (pages as usize) - buf);
                        bufs += 1;
                        held_pages += span as u32;
                    }
                }
                (bufs, held_pages.min(pages))
            };
            PoolStats {
                pages,
                buffers_in_use: held,
                pages_in_use: in_use,
                free_pages: pages - in_use,
                high_water_pages: e.high_water,
            }
        })
    }

    /// A snapshot of this domain's counters.
    pub fn stats(&self) -> Stats {
        let pools = self.pools.borrow();
        let mut s = Stats {
            bytes_copied: self.c.bytes_copied.get(),
            bytes_by_ref_sent: self.c.by_ref_sent.get(),
            bytes_by_ref_received: self.c.by_ref_recv.get(),
            alloc_failures: self.c.alloc_failures.get(),
            quota_refusals: self.c.quota_refusals.get(),
            rejected_descriptors: self.c.rejected.get(),
            rejected_foreign_pool: self.c.rejected_foreign_pool.get(),
            rejected_not_granted: self.c.rejected_not_granted.get(),
            bad_releases: self.c.bad_releases.get(),
            releases_sent: self.c.releases_sent.get(),
            releases_received: self.c.releases_received.get(),
            ..Stats::default()
        };
        for e in pools.iter().flatten().filter(|e| e.owned) {
            s.buffers_in_use += e.in_use as u64;
            s.pages_in_use += e.pages_in_use as u64;
            s.high_water_pages += e.high_water as u64;
        }
        s
    }

    /// Adds `n` to the copied-bytes counter. Components call this for copies
    /// they make outside the library (e.g. into a NIC frame), so that the
    /// figure covers every copy.
    pub fn count_copy(&self, n: usize) {
        bump(&self.c.bytes_copied, n as u64);
    }

    // ----------------------------------------------------------------
    // Internal plumbing.

    fn with_pool<R>(&self, id: PoolId, f: impl FnOnce(&mut PoolEntry, &mut Dirty) -> R) -> Result<R> {
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let e = pools.iter_mut().flatten().find(|e| e.id == id).ok_or(Error::UnknownPool)?;
        Ok(f(e, &mut dirty))
    }

    /// Address of a slice's first byte. The slice must be held.
    pub(crate) fn slice_ptr(&self, s: &SliceDesc) -> *const u8 {
        self.with_pool(s.pool, |e, _| e.data_ptr(s.buf, s.off)).expect("held slice refers to a registered pool")
    }

    /// Takes one more local hold on a slice's buffer (duplicate, split).
    pub(crate) fn hold_local(&self, s: &SliceDesc) -> Result<()> {
        let mut pools = self.pools.borrow_mut();
        let e = pools.iter_mut().flatten().find(|e| e.id == s.pool).ok_or(Error::UnknownPool)?;
        let m = &mut e.meta[s.buf as usize];
        m.local = m.local.checked_add(1).ok_or(Error::RefOverflow)?;
        Ok(())
    }

    /// Drops one local hold (an aggregate's slice went away).
    pub(crate) fn release_local(&self, s: &SliceDesc) {
        let mut pools = self.pools.borrow_mut();
        let Some(e) = pools.iter_mut().flatten().find(|e| e.id == s.pool) else { return };
        let m = &mut e.meta[s.buf as usize];
        debug_assert!(m.local > 0);
        m.local = m.local.saturating_sub(1);
        if !settled(e, s.buf) {
            settle_slow(e, &mut self.dirty.borrow_mut(), s.buf);
        }
    }

    // ----------------------------------------------------------------
    // Allocation.

    /// Allocates a buffer of at least `len` bytes (whole pages, at least
    /// one) from an owned pool, with a fresh generation, for the caller to
    /// fill. A full pool is `Err(Error::PoolExhausted)`.
    pub fn alloc(&self, pool: PoolId, len: usize) -> Result<BufMut<'_>> {
        let npages = len.max(1).div_ceil(PAGE_SIZE);
        let npages = u32::try_from(npages).map_err(|_| Error::PoolExhausted)?;
        let r = self.with_pool(pool, |e, _| {
            if !e.owned {
                return Err(Error::NotOwner);
            }
            let (buf, gen) = e.alloc(npages)?;
            e.meta[buf as usize].local = 1; // the writer's hold
            Ok((buf, gen, e.buf_capacity(buf)))
        })?;
        match r {
            Ok((buf, gen, cap)) => Ok(BufMut { d: self, pool, buf, gen, cap, sealed: 0 }),
            Err(err) => {
                if err == Error::PoolExhausted {
                    bump(&self.c.alloc_failures, 1);
                }
                Err(err)
            }
        }
    }

    /// Allocates a small object of `len` bytes, packed with other small
    /// objects of the same pool into shared pages (paper §2.3), lets `fill`
    /// write it in place, and returns it sealed. Objects larger than half a
    /// page get their own buffer. No bytes are copied.
    pub fn pack(&self, pool: PoolId, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<Aggregate<'_>> {
        if len == 0 {
            fill(&mut []);
            return Ok(Aggregate::new(self));
        }
        if len > PAGE_SIZE / 2 {
            let mut b = self.alloc(pool, len)?;
            fill(&mut b.writable()[..len]);
            return b.seal(len).map_err(|(e, _)| e);
        }
        let len32 = len as u32;
        let r = self.with_pool(pool, |e, d| -> Result<(SliceDesc, *mut u8)> {
            if !e.owned {
                return Err(Error::NotOwner);
            }
            if let Some(p) = e.pack {
                if p.used + len32 > p.cap {
                    close_pack(e, d);
                }
            }
            if e.pack.is_none() {
                let (buf, gen) = e.alloc(1)?;
                e.meta[buf as usize].local = 1; // the packer's writer hold
                e.pack = Some(Pack { buf, gen, cap: e.buf_capacity(buf), used: 0 });
            }
            let p = e.pack.as_mut().expect("pack present");
            let s = SliceDesc { pool: e.id, buf: p.buf, gen: p.gen, off: p.used, len: len32 };
            p.used += len32;
            let ptr = e.data_ptr_mut(s.buf, s.off);
            Ok((s, ptr))
        })?;
        let (s, ptr) = match r {
            Ok(v) => v,
            Err(err) => {
                if err == Error::PoolExhausted {
                    bump(&self.c.alloc_failures, 1);
                }
                return Err(err);
            }
        };
        // SAFETY: [off, off+len) of the pack buffer is reserved for this
        // object, not yet sealed, so nobody else can see or write it.
        fill(unsafe { core::slice::from_raw_parts_mut(ptr, len) });
        self.with_pool(pool, |e, _| {
            e.publish_sealed(s.buf, s.off + s.len);
            e.meta[s.buf as usize].local += 1;
        })?;
        Ok(Aggregate::from_held(self, &[s]))
    }

    /// Stops packing into the current partially filled page of `pool` (its
    /// unused tail is wasted; the page is reclaimed once its objects are
    /// released).
    pub fn flush_pack(&self, pool: PoolId) -> Result<()> {
        self.with_pool(pool, close_pack)
    }

    /// Allocates a buffer and copies `bytes` into it (counted as copied).
    /// This is the path of the compatibility `write` and of `mutate`.
    pub fn alloc_copy(&self, pool: PoolId, bytes: &[u8]) -> Result<Aggregate<'_>> {
        if bytes.is_empty() {
            return Ok(Aggregate::new(self));
        }
        let mut b = self.alloc(pool, bytes.len())?;
        b.writable()[..bytes.len()].copy_from_slice(bytes);
        self.count_copy(bytes.len());
        b.seal(bytes.len()).map_err(|(e, _)| e)
    }

    /// Hold counts of the buffer whose head page is `buf` in `pool`, as this
    /// domain sees them. A cache uses it to ask whether anything besides its
    /// own aggregates references a buffer: the file cache evicts entries that
    /// nobody else references first (paper §2.7).
    pub fn holds(&self, pool: PoolId, buf: u32) -> Result<Holds> {
        self.with_pool(pool, |e, _| {
            let m = e.meta.get(buf as usize).filter(|_| buf < e.layout.pages).ok_or(Error::BadBuffer)?;
            Ok(Holds { local: m.local, lent: m.lent_total(), received: m.recv_total() })
        })?
    }

    /// The current generation and sealed length published for a buffer of
    /// any known pool (0 generation = no live buffer). Readers can use it to
    /// re-validate a slice (e.g. before retransmitting from it).
    pub fn published(&self, pool: PoolId, buf: u32) -> Result<(u32, u32)> {
        self.with_pool(pool, |e, _| if buf >= e.layout.pages { Err(Error::BadBuffer) } else { Ok(e.published(buf)) })?
    }
}

fn close_pack(e: &mut PoolEntry, d: &mut Dirty) {
    if let Some(p) = e.pack.take() {
        let m = &mut e.meta[p.buf as usize];
        m.state = BufState::Sealed;
        m.local -= 1;
        settle(e, d, p.buf);
    }
}

/// Recomputes what a buffer's counts imply: queue returns of excess received
/// holds, free an owned buffer nobody holds, forget a foreign one.
#[inline]
fn settle(e: &mut PoolEntry, d: &mut Dirty, buf: u32) {
    if !settled(e, buf) {
        settle_slow(e, d, buf)
    }
}

/// The fast path of [`settle`] (most calls): the buffer is still used here
/// and keeps no received hold beyond its uses, so there is nothing to
/// return or free.
#[inline]
fn settled(e: &PoolEntry, buf: u32) -> bool {
    let m = &e.meta[buf as usize];
    m.local > 0 && m.recv_total() <= if e.owned { 0 } else { m.local } && m.taint == 0
}

fn settle_slow(e: &mut PoolEntry, d: &mut Dirty, buf: u32) {
    let slot = e.slot;
    let m = &mut e.meta[buf as usize];
    let used = m.local + m.lent_total();
    if used == 0 && m.taint != 0 {
        // Nothing here uses what a dead peer gave us any more.
        for (p, n) in d.tainted.iter_mut().enumerate() {
            if m.taint & 1 << p != 0 {
                *n -= 1;
            }
        }
        m.taint = 0;
    }
    // Quarantined holds keep the buffer (and our received holds on it).
    let total = used + m.quar_total();
    let recv = m.recv_total();
    // An owner needs no holds on its own buffers (its own counts keep them
    // alive), so it returns every received hold at once. Anyone else keeps
    // as many received holds as it has uses.
    let keep = if e.owned { 0 } else { total };
    if recv > keep {
        let mut excess = recv - keep;
        if m.primary == NO_PEER {
            m.primary = m.recv.iter().position(|&r| r > 0).map_or(NO_PEER, |p| p as u8);
        }
        // Non-primary grantors first, the primary grantor last: primary
        // edges point to holders that were live earlier, so they never form
        // a cycle and every cycle of grants unwinds (see README §3).
        let primary = m.primary as usize; // NO_PEER: out of range, skipped
        let mut give_back = |p: usize, excess: &mut u32| {
            let take = (m.recv[p] as u32).min(*excess);
            m.recv[p] -= take as u16;
            m.ret[p] += take; // ≤ Σ holds ever received: no overflow in practice
            *excess -= take;
        };
        for p in 0..MAX_PEERS {
            if excess == 0 {
                break;
            }
            if p != primary {
                give_back(p, &mut excess);
            }
        }
        if excess > 0 && primary < MAX_PEERS {
            give_back(primary, &mut excess);
        }
        if m.primary != NO_PEER && m.recv[m.primary as usize] == 0 {
            m.primary = NO_PEER;
        }
        if !m.dirty {
            if d.len < DIRTY_CAP {
                d.list[d.len] = (slot, buf);
                d.len += 1;
                m.dirty = true;
            } else {
                d.overflow = true;
            }
        }
    }
    if total == 0 && m.recv == [0; MAX_PEERS] && m.ret == [0; MAX_PEERS] {
        match (e.owned, m.state) {
            (true, BufState::Sealed) => e.free(buf),
            (false, BufState::Held) => {
                m.state = BufState::Free;
                m.primary = NO_PEER;
            }
            _ => {}
        }
    }
}

/// A buffer being filled by its producer. Only the producer has one; it
/// gives mutable access to the not-yet-sealed part of the buffer. Sealing
/// consumes it (or advances its start), so sealed bytes can never be reached
/// mutably again: immutability is enforced by the types.
pub struct BufMut<'d> {
    d: &'d Domain,
    pool: PoolId,
    buf: u32,
    gen: u32,
    cap: u32,
    sealed: u32,
}

impl core::fmt::Debug for BufMut<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BufMut")
            .field("pool", &self.pool)
            .field("buf", &self.buf)
            .field("gen", &self.gen)
            .field("cap", &self.cap)
            .field("sealed", &self.sealed)
            .finish()
    }
}

impl<'d> BufMut<'d> {
    /// Bytes that can still be written (capacity minus the sealed prefix).
    pub fn remaining(&self) -> usize {
        (self.cap - self.sealed) as usize
    }

    /// ⟨pool, buffer, generation⟩ of this buffer.
    pub fn id(&self) -> (PoolId, u32, u32) {
        (self.pool, self.buf, self.gen)
    }

    /// The writable, unsealed part of the buffer.
    pub fn writable(&mut self) -> &mut [u8] {
        let ptr = self.d.with_pool(self.pool, |e, _| e.data_ptr_mut(self.buf, self.sealed)).expect("own pool");
        // SAFETY: [sealed, cap) is private to this writer (not published, no
        // slices reference it), and `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(ptr, self.remaining()) }
    }

    /// Seals the next `len` written bytes and returns them as an aggregate,
    /// keeping the writer for the rest of the buffer (several objects can
    /// share the buffer's pages).
    pub fn seal_part(&mut self, len: usize) -> Result<Aggregate<'d>> {
        if len > self.remaining() {
            return Err(Error::InvalidArgument);
        }
        if len == 0 {
            return Ok(Aggregate::new(self.d));
        }
        let s = SliceDesc { pool: self.pool, buf: self.buf, gen: self.gen, off: self.sealed, len: len as u32 };
        self.d.with_pool(self.pool, |e, _| {
            e.publish_sealed(self.buf, s.end() as u32);
            e.meta[self.buf as usize].local += 1;
        })?;
        self.sealed += len as u32;
        Ok(Aggregate::from_held(self.d, &[s]))
    }

    /// Seals the next `len` written bytes, ends writing, and returns them as
    /// an aggregate. If `len` is larger than what is left the writer is
    /// handed back with the error.
    pub fn seal(mut self, len: usize) -> core::result::Result<Aggregate<'d>, (Error, BufMut<'d>)> {
        match self.seal_part(len) {
            Ok(a) => Ok(a), // Drop of `self` ends writing.
            Err(e) => Err((e, self)),
        }
    }
}

impl Drop for BufMut<'_> {
    fn drop(&mut self) {
        let _ = self.d.with_pool(self.pool, |e, d| {
            let m = &mut e.meta[self.buf as usize];
            m.state = BufState::Sealed;
            m.local -= 1;
            settle(e, d, self.buf);
        });
    }
}

#[cfg(test)]
mod tests;
