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
use crate::desc::{AggDesc, PoolId, RelDesc, SliceDesc};
use crate::pool::{BufMeta, BufState, Pack, PoolEntry, Trust, NO_PEER, PAGE_SIZE};
use crate::region::{RoRegion, RwRegion};
use crate::{Error, Result, MAX_PEERS, MAX_POOLS, MAX_SLICES};

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

    // ----------------------------------------------------------------
    // Passing aggregates between domains.

    /// Quota of peer `p`: the maximum number of distinct buffers it may hold
    /// from this domain at once (default: unlimited). Sends that would
    /// exceed it fail with [`Error::QuotaExceeded`] (back-pressure).
    pub fn set_quota(&self, p: PeerId, max_buffers: u32) -> Result<()> {
        let i = p.idx()?;
        self.peers.borrow_mut()[i].quota = max_buffers;
        Ok(())
    }

    /// Number of distinct buffers peer `p` currently holds from us.
    pub fn peer_held_buffers(&self, p: PeerId) -> Result<u32> {
        Ok(self.peers.borrow()[p.idx()?].held_bufs)
    }

    /// Number of sends to `p` refused by its quota.
    pub fn peer_refusals(&self, p: PeerId) -> Result<u64> {
        Ok(self.peers.borrow()[p.idx()?].refusals)
    }

    /// State of peer `p`.
    pub fn peer_state(&self, p: PeerId) -> Result<PeerState> {
        Ok(self.peers.borrow()[p.idx()?].state)
    }

    /// The grant list of peer `p`: the pools whose slices `p` may reference
    /// in what it sends us. A slice of any other pool is rejected
    /// ([`Error::ForeignPool`], counted in [`Stats::rejected_foreign_pool`]),
    /// even one of a pool mapped here. Every pool must be registered first
    /// (`UnknownPool` otherwise). By default a peer may reference every
    /// pool this domain knows; the system composition narrows each channel
    /// end to the pools its sender maps (README "Grant lists").
    ///
    /// Independently of the list, a slice of a pool this domain *owns* is
    /// accepted from `p` only while `p` holds a grant of that buffer from
    /// us ([`Error::NotGranted`]).
    pub fn set_peer_pools(&self, p: PeerId, pools: &[PoolId]) -> Result<()> {
        let i = p.idx()?;
        let mut mask = 0u32;
        {
            let table = self.pools.borrow();
            for id in pools {
                let e = table.iter().flatten().find(|e| e.id == *id).ok_or(Error::UnknownPool)?;
                mask |= 1 << e.slot;
            }
        }
        self.peers.borrow_mut()[i].pools = mask;
        Ok(())
    }

    /// [`Domain::set_peer_pools`] from a grant list as the assembly writes
    /// it, the names of our dataports (`<channel>_refs`), with `pools`
    /// naming each dataport's pool id (id 0: that optional dataport is not
    /// in this assembly). A name not in `pools`, or an absent pool, is
    /// `UnknownPool`: the compiler checked the list against the sender's
    /// mappings, so it means this component's table is out of date.
    pub fn set_peer_pools_named(&self, p: PeerId, names: &[&str], pools: &[(&str, PoolId)]) -> Result<()> {
        let mut ids = [0 as PoolId; MAX_POOLS];
        if names.len() > MAX_POOLS {
            return Err(Error::InvalidArgument);
        }
        for (slot, name) in ids.iter_mut().zip(names) {
            *slot = match pools.iter().find(|(n, _)| n == name) {
                Some(&(_, id)) if id != 0 => id,
                _ => return Err(Error::UnknownPool),
            };
        }
        self.set_peer_pools(p, &ids[..names.len()])
    }

    /// Descriptors from peer `p` that validation rejected.
    pub fn peer_rejections(&self, p: PeerId) -> Result<u64> {
        Ok(self.peers.borrow()[p.idx()?].rejected)
    }

    /// Turns an aggregate into a wire descriptor granting its holds to peer
    /// `p` (the holds move from this domain's aggregates to `lent[p]`).
    /// On error (peer down, quota reached) the aggregate is handed back
    /// unchanged.
    pub fn lend<'d>(
        &'d self,
        mut agg: Aggregate<'d>,
        p: PeerId,
        tag: u64,
        flags: u32,
    ) -> core::result::Result<AggDesc, (Error, Aggregate<'d>)> {
        if let Err(e) = self.lend_holds(&agg, p, true) {
            return Err((e, agg));
        }
        let slices = agg.descs();
        let mut d = AggDesc { nslices: slices.len() as u32, flags, tag, ..AggDesc::default() };
        d.slices[..slices.len()].copy_from_slice(slices);
        agg.forget_holds();
        Ok(d)
    }

    /// The bookkeeping half of [`Domain::lend`]: checks that `agg` may be
    /// granted to `p` and gives `p` one hold per slice. With `move_local`
    /// the holds move from `local` to `lent[p]`, and on success the caller
    /// must put the slices on the wire and forget the aggregate's holds
    /// ([`Aggregate::forget_holds`]). Without, new holds are granted and
    /// the aggregate keeps its own (a send by reference). On error nothing
    /// changed.
    pub(crate) fn lend_holds(&self, agg: &Aggregate<'_>, p: PeerId, move_local: bool) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        let peer = &mut peers[i];
        if peer.state != PeerState::Active {
            return Err(Error::PeerDown);
        }
        let slices = agg.descs();
        // Check everything first, so that failure changes nothing.
        let mut new_bufs = 0u32;
        {
            let pools = self.pools.borrow();
            for (k, s) in slices.iter().enumerate() {
                let e = pools.iter().flatten().find(|e| e.id == s.pool).ok_or(Error::UnknownPool)?;
                if e.acl & (1 << i) == 0 {
                    return Err(Error::NotInAcl);
                }
                let m = &e.meta[s.buf as usize];
                let dup_before = slices[..k].iter().filter(|o| o.pool == s.pool && o.buf == s.buf).count();
                if m.lent[i] == 0 && dup_before == 0 {
                    new_bufs += 1;
                }
                if m.lent[i] as usize + dup_before + 1 > u16::MAX as usize {
                    return Err(Error::RefOverflow);
                }
            }
        }
        if peer.held_bufs.saturating_add(new_bufs) > peer.quota {
            peer.refusals += 1;
            bump(&self.c.quota_refusals, 1);
            return Err(Error::QuotaExceeded);
        }
        let mut pools = self.pools.borrow_mut();
        let mut total = 0u64;
        for s in slices {
            let e = pools.iter_mut().flatten().find(|e| e.id == s.pool).expect("checked");
            let m = &mut e.meta[s.buf as usize];
            if m.lent[i] == 0 {
                peer.held_bufs += 1;
            }
            m.lent[i] += 1;
            if move_local {
                m.local -= 1;
            }
            total += s.len as u64;
        }
        bump(&self.c.by_ref_sent, total);
        Ok(())
    }

    /// Validates a descriptor received from peer `p` and turns it into an
    /// aggregate holding the granted references (its bytes count as
    /// received by reference).
    ///
    /// Every slice is checked: pool known here, buffer index in range and the
    /// head of a live buffer, generation current, offset+length inside the
    /// buffer's sealed bytes and inside the pool. On any failure nothing is
    /// taken and the error is returned; the caller must return the holds to
    /// the sender (channels do this; [`Domain::rejected_releases`]).
    pub fn accept(&self, desc: &AggDesc, p: PeerId) -> Result<Aggregate<'_>> {
        self.accept_holds(desc.nslices, desc.slices(), p)?;
        // Normalising drops zero-length slices and merges contiguous ones;
        // the holds this frees are queued for return to `p` at once.
        let a = Aggregate::from_held(self, desc.slices());
        self.count_by_ref_received(a.len());
        Ok(a)
    }

    /// The bookkeeping half of [`Domain::accept`], for a descriptor given as
    /// its `nslices` field (as sent, unvalidated) and the slices read (at
    /// most [`MAX_SLICES`]), which the caller copied out of shared memory:
    /// validates them and takes the granted holds. On success the caller
    /// must wrap exactly these slices in an aggregate
    /// ([`Aggregate::from_held`]). The bytes are not counted as received by
    /// reference (a copying receiver counts them as copied).
    pub(crate) fn accept_holds(&self, nslices: u32, slices: &[SliceDesc], p: PeerId) -> Result<()> {
        let r = self.accept_inner(nslices, slices, p);
        if let Err(e) = r {
            bump(&self.c.rejected, 1);
            match e {
                Error::ForeignPool | Error::UnknownPool => bump(&self.c.rejected_foreign_pool, 1),
                Error::NotGranted => bump(&self.c.rejected_not_granted, 1),
                _ => {}
            }
            if let Ok(i) = p.idx() {
                self.peers.borrow_mut()[i].rejected += 1;
            }
        }
        r
    }

    pub(crate) fn count_by_ref_received(&self, n: usize) {
        bump(&self.c.by_ref_recv, n as u64);
    }

    fn accept_inner(&self, nslices: u32, slices: &[SliceDesc], p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let granted_pools = {
            let peer = self.peers.borrow()[i];
            if peer.state != PeerState::Active {
                return Err(Error::PeerDown);
            }
            peer.pools
        };
        if nslices as usize > MAX_SLICES || slices.len() != nslices as usize {
            return Err(Error::TooManySlices);
        }
        {
            let pools = self.pools.borrow();
            for (k, s) in slices.iter().enumerate() {
                let e = pools.iter().flatten().find(|e| e.id == s.pool).ok_or(Error::UnknownPool)?;
                if granted_pools & (1 << e.slot) == 0 {
                    return Err(Error::ForeignPool);
                }
                e.validate(s)?;
                let m = &e.meta[s.buf as usize];
                // Our own buffer comes back only from a peer we lent it to
                // (and that has not returned it all): `validate` matched the
                // current generation, and our counts are of that generation.
                // A peer could otherwise name any live buffer of our pool,
                // e.g. make a network stack send its own receive buffers.
                if e.owned && m.lent[i] == 0 {
                    return Err(Error::NotGranted);
                }
                if !e.owned
                    && m.state == BufState::Held
                    && m.gen != s.gen
                    && (m.local > 0 || m.lent_total() > 0 || m.recv_total() > 0 || m.ret_total() > 0)
                {
                    // We still hold an older generation of this buffer: the
                    // owner recycled it early (or the sender lies).
                    return Err(Error::GenerationMismatch);
                }
                let dup_before = slices[..k].iter().filter(|o| o.pool == s.pool && o.buf == s.buf).count();
                if m.recv[i] as usize + dup_before + 1 > u16::MAX as usize {
                    return Err(Error::RefOverflow);
                }
            }
        }
        {
            let mut pools = self.pools.borrow_mut();
            let mut dirty = self.dirty.borrow_mut();
            for s in slices {
                let e = pools.iter_mut().flatten().find(|e| e.id == s.pool).expect("validated");
                let owned = e.owned;
                let m = &mut e.meta[s.buf as usize];
                if !owned {
                    m.gen = s.gen;
                    m.state = BufState::Held;
                    if m.recv_total() == 0 {
                        m.primary = i as u8;
                    }
                }
                m.recv[i] += 1;
                m.local += 1;
                // An owner returns holds on its own buffers at once.
                settle(e, &mut dirty, s.buf);
            }
        }
        Ok(())
    }

    /// The releases that give back every hold of a descriptor this domain
    /// rejected (one [`RelDesc`] per slice, verbatim). The sender validates
    /// them against its own records.
    pub fn rejected_releases(desc: &AggDesc) -> impl Iterator<Item = RelDesc> + '_ {
        desc.slices().iter().map(|s| RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count: 1 })
    }

    /// Applies a release received from peer `p`: `rel.count` holds that we
    /// granted to `p` come back. Releases that do not match a grant (wrong
    /// pool, buffer, generation, or more than was lent) are rejected and
    /// counted in [`Stats::bad_releases`]; they change nothing. Releases from
    /// a [`PeerState::Dying`] peer are ignored.
    pub fn apply_release(&self, rel: &RelDesc, p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        if peers[i].state != PeerState::Active {
            return Ok(());
        }
        let r = self.with_pool(rel.pool, |e, d| {
            if rel.buf >= e.layout.pages || rel.count == 0 {
                return Err(Error::BadBuffer);
            }
            let m = &mut e.meta[rel.buf as usize];
            if matches!(m.state, BufState::Free | BufState::Tail) || m.gen != rel.gen {
                return Err(Error::GenerationMismatch);
            }
            if (m.lent[i] as u32) < rel.count {
                return Err(Error::InvalidArgument);
            }
            m.lent[i] -= rel.count as u16;
            let emptied = m.lent[i] == 0;
            settle(e, d, rel.buf);
            Ok(emptied)
        });
        match r.and_then(|x| x) {
            Ok(emptied) => {
                if emptied {
                    peers[i].held_bufs -= 1;
                }
                bump(&self.c.releases_received, 1);
                Ok(())
            }
            Err(e) => {
                bump(&self.c.bad_releases, 1);
                Err(e)
            }
        }
    }

    /// Emits the releases owed to peer `p` (holds it granted us that we no
    /// longer need) through `emit`, which returns `false` when it cannot take
    /// more (ring full); the rest stays queued. Returns how many were emitted.
    pub fn drain_returns(&self, p: PeerId, mut emit: impl FnMut(RelDesc) -> bool) -> Result<usize> {
        let i = p.idx()?;
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut sent = 0usize;
        let mut blocked = false;
        // One pass: emit what is owed to `p`, and drop entries with nothing
        // owed to anyone any more (the last entry moves into their place).
        let mut k = 0;
        while k < dirty.len {
            let (slot, buf) = dirty.list[k];
            let Some(e) = pools[slot as usize].as_mut() else {
                dirty.len -= 1;
                dirty.list[k] = dirty.list[dirty.len];
                continue;
            };
            let m = &mut e.meta[buf as usize];
            if m.ret[i] > 0 && !blocked {
                let rel = RelDesc { pool: e.id, buf, gen: m.gen, count: m.ret[i] };
                if emit(rel) {
                    m.ret[i] = 0;
                    sent += 1;
                } else {
                    blocked = true;
                }
            }
            if m.ret == [0; MAX_PEERS] {
                m.dirty = false;
                dirty.len -= 1;
                dirty.list[k] = dirty.list[dirty.len];
                settle(e, &mut dirty, buf);
            } else {
                k += 1;
            }
        }
        if dirty.overflow && !blocked {
            // Some buffers did not fit in the dirty list: scan everything.
            let mut left = false;
            'scan: for e in pools.iter_mut().flatten() {
                for buf in 0..e.layout.pages {
                    let m = &mut e.meta[buf as usize];
                    if m.dirty || m.ret_total() == 0 {
                        continue;
                    }
                    if m.ret[i] > 0 {
                        let rel = RelDesc { pool: e.id, buf, gen: m.gen, count: m.ret[i] };
                        if !emit(rel) {
                            left = true;
                            break 'scan;
                        }
                        m.ret[i] = 0;
                        sent += 1;
                    }
                    if m.ret_total() > 0 {
                        left = true;
                    } else {
                        settle(e, &mut dirty, buf);
                    }
                }
            }
            dirty.overflow = left;
        }
        bump(&self.c.releases_sent, sent as u64);
        Ok(sent)
    }

    /// True if releases are queued for peer `p`.
    pub fn has_returns(&self, p: PeerId) -> bool {
        let Ok(i) = p.idx() else { return false };
        let pools = self.pools.borrow();
        let dirty = self.dirty.borrow();
        if dirty.overflow {
            return true;
        }
        dirty.list[..dirty.len]
            .iter()
            .any(|&(slot, buf)| pools[slot as usize].as_ref().is_some_and(|e| e.meta[buf as usize].ret[i] > 0))
    }

    // ----------------------------------------------------------------
    // Peer death.

    /// Peer `p` died. Holds it granted to us are forgotten (there is nobody
    /// to return them to); buffers we still use after that are *tainted* by
    /// `p` (we may have forwarded them: see [`Domain::tainted`]). Holds we
    /// granted to it are *quarantined*: kept, so their buffers are not
    /// reused while components downstream of `p` may still read them, until
    /// [`Domain::peer_settled`]. Sends to and descriptors from `p` are
    /// refused until [`Domain::peer_restarted`] (or `peer_settled`).
    /// Returns the number of buffers in quarantine for `p`.
    pub fn peer_failed(&self, p: PeerId) -> Result<u32> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        peers[i].state = PeerState::Dying;
        peers[i].held_bufs = 0;
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut quarantined = 0;
        for e in pools.iter_mut().flatten() {
            for buf in 0..e.layout.pages {
                let m = &mut e.meta[buf as usize];
                if m.lent[i] > 0 {
                    m.quar[i] = m.quar[i].saturating_add(m.lent[i]);
                    m.lent[i] = 0;
                }
                if m.quar[i] > 0 {
                    quarantined += 1;
                }
                if m.recv[i] > 0 || m.ret[i] > 0 {
                    let granted = m.recv[i] > 0;
                    m.recv[i] = 0;
                    m.ret[i] = 0;
                    if m.primary == i as u8 {
                        m.primary = NO_PEER;
                    }
                    if granted && !e.owned && m.local + m.lent_total() > 0 && m.taint & 1 << i == 0 {
                        m.taint |= 1 << i;
                        dirty.tainted[i] += 1;
                    }
                    settle(e, &mut dirty, buf);
                }
            }
        }
        Ok(quarantined)
    }

    /// The dead peer `p` is back (a new incarnation attached): its slot is
    /// active again, with no holds. What the old incarnation was lent stays
    /// quarantined until [`Domain::peer_settled`].
    pub fn peer_restarted(&self, p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        peers[i].state = PeerState::Active;
        peers[i].held_bufs = 0;
        Ok(())
    }

    /// Buffers granted to us by peer `p` before it died that we still use
    /// (locally or lent on). While this is not 0, components downstream of
    /// us may still read data that came through `p`; once it is 0 we can
    /// tell the supervisor that we have settled `p`'s death.
    pub fn tainted(&self, p: PeerId) -> Result<u32> {
        Ok(self.dirty.borrow().tainted[p.idx()?])
    }

    /// Ends the quarantine of peer `p`: every hold lent to its dead
    /// incarnation(s) is dropped (buffers nobody else holds return to their
    /// pool). A slot still dying becomes active again, with no holds. Call
    /// it when the system knows nobody still uses data obtained through the
    /// dead peer (directly after [`Domain::peer_failed`] if `p` forwarded
    /// nothing). Returns the number of buffers whose holds were dropped.
    pub fn peer_settled(&self, p: PeerId) -> Result<u32> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut dropped = 0;
        for e in pools.iter_mut().flatten() {
            for buf in 0..e.layout.pages {
                let m = &mut e.meta[buf as usize];
                if m.quar[i] > 0 {
                    m.quar[i] = 0;
                    dropped += 1;
                    settle(e, &mut dirty, buf);
                }
            }
        }
        if peers[i].state == PeerState::Dying {
            peers[i].held_bufs = 0;
            peers[i].state = PeerState::Active;
        }
        Ok(dropped)
    }

    /// [`Domain::peer_failed`] followed by [`Domain::peer_settled`]: a
    /// dead peer's references are released at once. Returns the number of
    /// buffers whose holds were dropped.
    pub fn peer_died(&self, p: PeerId) -> Result<u32> {
        self.peer_failed(p)?;
        self.peer_settled(p)
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
mod tests {
    use super::*;
    use crate::pool::{gen_counter, gen_is_live};
    use crate::testing::{bytes, make, map, meta, own, pool_region};
    use std::vec::Vec;

    const FS_POOL: PoolId = 1;
    const HTTP_POOL: PoolId = 2;

    // Peer slots, as the system composition would assign them.
    const FS_HTTP: PeerId = PeerId(0); // in fs: the http component
    const HTTP_FS: PeerId = PeerId(0); // in http: fs
    const HTTP_TCP: PeerId = PeerId(1); // in http: tcp
    const TCP_HTTP: PeerId = PeerId(0); // in tcp: http

    /// Moves all returns owed by `from` (to its peer `to_peer`) into `to`,
    /// which knows `from` as `from_peer`: what a release ring does.
    fn pump(from: &Domain, to_peer: PeerId, to: &Domain, from_peer: PeerId) -> usize {
        let mut rels = Vec::new();
        from.drain_returns(to_peer, |r| {
            rels.push(r);
            true
        })
        .unwrap();
        for r in &rels {
            to.apply_release(r, from_peer).unwrap();
        }
        rels.len()
    }

    /// fs owns pool 1; http maps it and owns pool 2; tcp maps both; fs
    /// maps pool 2 too (data can flow back to it).
    fn system() -> (Domain, Domain, Domain) {
        let (fs, http, tcp) = (Domain::new(), Domain::new(), Domain::new());
        let r1 = own(&fs, FS_POOL, 16);
        let r2 = own(&http, HTTP_POOL, 16);
        map(&fs, HTTP_POOL, r2);
        map(&http, FS_POOL, r1);
        map(&tcp, FS_POOL, r1);
        map(&tcp, HTTP_POOL, r2);
        (fs, http, tcp)
    }

    #[test]
    fn pool_exhaustion_is_an_error_value() {
        let d = Domain::new();
        own(&d, 1, 4);
        let bufs: Vec<_> = (0..4).map(|_| d.alloc(1, 1).unwrap()).collect();
        assert_eq!(d.alloc(1, 1).unwrap_err(), Error::PoolExhausted);
        assert_eq!(d.pack(1, 10, |_| ()).unwrap_err(), Error::PoolExhausted);
        assert_eq!(d.alloc(1, 100 * PAGE_SIZE).unwrap_err(), Error::PoolExhausted);
        assert_eq!(d.stats().alloc_failures, 3);
        assert_eq!(d.stats().buffers_in_use, 4);
        // Fragmentation: pages 1 and 3 free is not a 2-page run.
        let mut it = bufs.into_iter();
        let (b0, b1, b2, b3) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        drop((b1, b3));
        assert_eq!(d.alloc(1, 2 * PAGE_SIZE).unwrap_err(), Error::PoolExhausted);
        drop(b2);
        let big = d.alloc(1, 2 * PAGE_SIZE).unwrap();
        assert_eq!(big.remaining(), 2 * PAGE_SIZE);
        assert_eq!(d.pool_stats(1).unwrap().high_water_pages, 4);
        drop((b0, big));
        assert_eq!(d.stats().buffers_in_use, 0);
        // Allocation from a foreign pool is refused.
        let other = Domain::new();
        map(&other, 1, pool_region(4));
        assert_eq!(other.alloc(1, 1).unwrap_err(), Error::NotOwner);
        assert_eq!(other.alloc(9, 1).unwrap_err(), Error::UnknownPool);
    }

    #[test]
    fn generation_increments_on_reallocation_and_stale_refs_are_rejected() {
        // A one-page pool, so the next allocation must reuse the slot.
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 1));
        let a = make(&fs, FS_POOL, b"old");
        let s0 = a.descs()[0];
        let desc = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        let h = http.accept(&desc, HTTP_FS).unwrap();
        drop(h);
        pump(&http, HTTP_FS, &fs, FS_HTTP);
        assert_eq!(fs.stats().buffers_in_use, 0);
        let b = make(&fs, FS_POOL, b"new");
        let s1 = b.descs()[0];
        assert_eq!(s1.buf, s0.buf, "same slot");
        assert_eq!(gen_counter(s1.gen), gen_counter(s0.gen) + 1, "next generation");
        assert!(gen_is_live(s1.gen) && s1.gen != s0.gen);
        assert_eq!(fs.published(FS_POOL, s1.buf).unwrap(), (s1.gen, 3));
        // Replaying the old descriptor is detected.
        assert_eq!(http.accept(&desc, HTTP_FS).unwrap_err(), Error::GenerationMismatch);
        assert_eq!(http.stats().rejected_descriptors, 1);
    }

    #[test]
    fn forged_descriptors_are_rejected_and_change_nothing() {
        let (fs, http, _tcp) = system();
        let big = make(&fs, FS_POOL, &[7u8; PAGE_SIZE + 10]); // pages 0-1
        let good = big.descs()[0];
        let one = |s: SliceDesc| {
            let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
            d.slices[0] = s;
            d
        };
        let cases = [
            (SliceDesc { pool: 99, ..good }, Error::UnknownPool),
            (SliceDesc { buf: 16, ..good }, Error::BadBuffer),
            (SliceDesc { buf: u32::MAX, ..good }, Error::BadBuffer),
            (SliceDesc { buf: good.buf + 1, ..good }, Error::BadBuffer), // tail page
            (SliceDesc { buf: 5, ..good }, Error::BadBuffer),            // free page
            (SliceDesc { gen: good.gen + 1, ..good }, Error::GenerationMismatch),
            (SliceDesc { off: 0, len: PAGE_SIZE as u32 + 11, ..good }, Error::OutOfBounds),
            (SliceDesc { off: u32::MAX, len: u32::MAX, ..good }, Error::OutOfBounds),
        ];
        for (s, e) in cases {
            assert_eq!(http.accept(&one(s), HTTP_FS).unwrap_err(), e, "{s:?}");
        }
        let mut many = one(good);
        many.nslices = MAX_SLICES as u32 + 1;
        assert_eq!(http.accept(&many, HTTP_FS).unwrap_err(), Error::TooManySlices);
        assert_eq!(http.accept(&one(good), PeerId(MAX_PEERS as u8)).unwrap_err(), Error::BadPeer);
        assert_eq!(http.stats().rejected_descriptors, 10);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
        // The genuine slice is fine.
        let ok = http.accept(&one(good), HTTP_FS).unwrap();
        assert_eq!(ok.len(), PAGE_SIZE + 10);
        drop(big);
    }

    #[test]
    fn bad_releases_are_counted_and_ignored() {
        let (fs, _http, _tcp) = system();
        let a = make(&fs, FS_POOL, b"data");
        let s = a.descs()[0];
        let keep = a.duplicate().unwrap();
        fs.lend(a, FS_HTTP, 0, 0).unwrap();
        let rel = RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count: 1 };
        for bad in [
            RelDesc { count: 2, ..rel },
            RelDesc { count: 0, ..rel },
            RelDesc { gen: s.gen + 1, ..rel },
            RelDesc { buf: 3, ..rel },
            RelDesc { pool: 42, ..rel },
        ] {
            assert!(fs.apply_release(&bad, FS_HTTP).is_err());
        }
        assert!(fs.apply_release(&rel, PeerId(1)).is_err()); // never lent to peer 1
        assert_eq!(fs.stats().bad_releases, 6);
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
        fs.apply_release(&rel, FS_HTTP).unwrap();
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
        assert!(fs.apply_release(&rel, FS_HTTP).is_err(), "double release");
        drop(keep);
        assert_eq!(fs.stats().buffers_in_use, 0);
    }

    #[test]
    fn small_objects_share_a_page() {
        let (fs, http, _tcp) = system();
        let a = fs.pack(FS_POOL, 10, |b| b.fill(b'a')).unwrap();
        let b = fs.pack(FS_POOL, 20, |b| b.fill(b'b')).unwrap();
        let c = fs.pack(FS_POOL, 30, |b| b.fill(b'c')).unwrap();
        let (sa, sb, sc) = (a.descs()[0], b.descs()[0], c.descs()[0]);
        assert_eq!((sa.buf, sa.gen), (sb.buf, sb.gen));
        assert_eq!((sb.buf, sb.off), (sa.buf, 10));
        assert_eq!((sc.buf, sc.off), (sa.buf, 30));
        assert_eq!(fs.stats().buffers_in_use, 1);
        assert_eq!(fs.stats().bytes_copied, 0);
        // Objects are readable by the ACL as soon as they are packed...
        let desc = fs.lend(b, FS_HTTP, 0, 0).unwrap();
        let hb = http.accept(&desc, HTTP_FS).unwrap();
        assert_eq!(bytes(&hb), [b'b'; 20]);
        // ...but bytes past the sealed mark are not.
        let mut beyond = desc;
        beyond.slices[0].off = 60;
        beyond.slices[0].len = 1;
        assert_eq!(http.accept(&beyond, HTTP_FS).unwrap_err(), Error::OutOfBounds);
        // A big object gets its own buffer.
        let big = fs.pack(FS_POOL, PAGE_SIZE, |b| b.fill(1)).unwrap();
        assert_ne!(big.descs()[0].buf, sa.buf);
        drop((a, c, big, hb));
        pump(&http, HTTP_FS, &fs, FS_HTTP);
        assert_eq!(fs.stats().buffers_in_use, 1, "the packer still owns the page");
        fs.flush_pack(FS_POOL).unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
    }

    #[test]
    fn writer_sees_only_unsealed_bytes() {
        let d = Domain::new();
        own(&d, 1, 2);
        let mut w = d.alloc(1, 100).unwrap();
        assert_eq!(w.remaining(), PAGE_SIZE);
        w.writable()[..5].copy_from_slice(b"hello");
        let a = w.seal_part(5).unwrap();
        assert_eq!(w.remaining(), PAGE_SIZE - 5);
        w.writable()[0] = b'!'; // the next byte, not the sealed ones
        assert_eq!(bytes(&a), b"hello");
        let (e, w) = w.seal(PAGE_SIZE).unwrap_err();
        assert_eq!(e, Error::InvalidArgument);
        let b = w.seal(1).unwrap();
        assert_eq!(bytes(&b), b"!");
        // Dropping a writer without sealing frees the buffer.
        drop(d.alloc(1, 1).unwrap());
        drop((a, b));
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn holds_accessor_reports_local_and_lent() {
        let (fs, http, _tcp) = system();
        let a = make(&fs, FS_POOL, b"cached");
        let buf = a.descs()[0].buf;
        assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 0 });
        let d = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
        assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 1, received: 0 });
        let h = http.accept(&d, HTTP_FS).unwrap();
        assert_eq!(http.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 1 });
        drop(h);
        assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
        assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 0 });
        assert_eq!(fs.holds(FS_POOL, 1 << 20).unwrap_err(), Error::BadBuffer);
        assert_eq!(fs.holds(99, 0).unwrap_err(), Error::UnknownPool);
    }

    #[test]
    fn three_holders_forwarding_and_release() {
        let (fs, http, tcp) = system();
        // fs keeps the file in its cache and serves it to http.
        let cached = make(&fs, FS_POOL, b"<file body>");
        let d1 = fs.lend(cached.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
        let body = http.accept(&d1, HTTP_FS).unwrap();
        // http prepends a header from its own pool and sends to tcp.
        let mut resp = make(&http, HTTP_POOL, b"HTTP/1.0 200\r\n\r\n");
        resp.append(body.duplicate().unwrap()).unwrap();
        let d2 = http.lend(resp, HTTP_TCP, 0, 0).unwrap();
        let t = tcp.accept(&d2, TCP_HTTP).unwrap();
        assert_eq!(bytes(&t), b"HTTP/1.0 200\r\n\r\n<file body>");
        assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 1);
        // One physical copy: fs's buffer is the one tcp reads.
        assert_eq!(t.descs()[1].pool, FS_POOL);
        drop(body);
        assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 0, "tcp still holds it through http");
        drop(t);
        assert_eq!(pump(&tcp, TCP_HTTP, &http, HTTP_TCP), 2);
        assert_eq!(http.stats().buffers_in_use, 0, "header buffer freed");
        assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
        assert_eq!(fs.stats().buffers_in_use, 1, "still cached");
        drop(cached);
        assert_eq!(fs.stats().buffers_in_use, 0);
        for d in [&fs, &http, &tcp] {
            assert_eq!(d.stats().bytes_copied, 0);
            assert_eq!(d.stats().bad_releases, 0);
        }
    }

    #[test]
    fn duplicates_received_from_two_peers_go_back_to_each() {
        // tcp gets the same fs buffer via http (peer 0) and via "cgi" (peer 1).
        let (fs, http, tcp) = system();
        let cgi = Domain::new();
        map(&cgi, FS_POOL, pool_region(1));
        let a = make(&fs, FS_POOL, b"shared");
        let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        let h = http.accept(&d, HTTP_FS).unwrap();
        let d_h = http.lend(h.duplicate().unwrap(), HTTP_TCP, 0, 0).unwrap();
        let d_h2 = http.lend(h, HTTP_TCP, 0, 0).unwrap();
        let t1 = tcp.accept(&d_h, TCP_HTTP).unwrap();
        let t2 = tcp.accept(&d_h2, TCP_HTTP).unwrap();
        let mut both = t1;
        both.append(t2).unwrap();
        assert_eq!(bytes(&both), b"sharedshared");
        drop(both);
        assert_eq!(pump(&tcp, TCP_HTTP, &http, HTTP_TCP), 1, "coalesced into one release of 2");
        assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
        assert_eq!(fs.stats().buffers_in_use, 0);
    }

    #[test]
    fn death_of_a_leaf_releases_everything() {
        let (fs, http, _tcp) = system();
        let mut sent = Vec::new();
        for i in 0..5u8 {
            let a = make(&fs, FS_POOL, &[i; 100]);
            sent.push(fs.lend(a, FS_HTTP, 0, 0).unwrap());
        }
        let held: Vec<_> = sent.iter().map(|d| http.accept(d, HTTP_FS).unwrap()).collect();
        assert_eq!(fs.stats().buffers_in_use, 5);
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 5);
        // http dies: its memory (and `held`) is gone; the loader tells fs.
        std::mem::forget(held);
        assert_eq!(fs.peer_died(FS_HTTP).unwrap(), 5);
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Active);
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
        // The restarted incarnation works normally.
        let a = make(&fs, FS_POOL, b"again");
        let http2 = Domain::new();
        map(&http2, FS_POOL, pool_region(1)); // region contents do not matter here
        let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
        let rel = RelDesc { pool: FS_POOL, buf: d.slices[0].buf, gen: d.slices[0].gen, count: 1 };
        fs.apply_release(&rel, FS_HTTP).unwrap();
        assert_eq!(fs.stats().buffers_in_use, 0);
    }

    #[test]
    fn death_of_an_intermediary_quarantines_until_settled() {
        let (fs, http, tcp) = system();
        let a = make(&fs, FS_POOL, b"in flight");
        let d1 = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        let h = http.accept(&d1, HTTP_FS).unwrap();
        let d2 = http.lend(h, HTTP_TCP, 0, 0).unwrap();
        let t = tcp.accept(&d2, TCP_HTTP).unwrap();
        // http dies while tcp still transmits from fs's buffer.
        assert_eq!(fs.peer_failed(FS_HTTP).unwrap(), 1);
        assert_eq!(tcp.peer_failed(TCP_HTTP).unwrap(), 0);
        assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Dying);
        // Not freed early: the bytes tcp reads stay valid and unreused.
        assert_eq!(fs.stats().buffers_in_use, 1);
        assert!(make(&fs, FS_POOL, b"other").descs()[0].buf != d1.slices[0].buf);
        assert_eq!(bytes(&t), b"in flight");
        // Nothing is sent to or accepted from a dying peer.
        let (e, _) = fs.lend(make(&fs, FS_POOL, b"x"), FS_HTTP, 0, 0).unwrap_err();
        assert_eq!(e, Error::PeerDown);
        assert_eq!(tcp.accept(&d2, TCP_HTTP).unwrap_err(), Error::PeerDown);
        // tcp aborts the dead component's connections; nothing to return.
        drop(t);
        let mut n = 0;
        tcp.drain_returns(TCP_HTTP, |_| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 0);
        assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
        // The loader confirms every peer of http has dropped its state.
        assert_eq!(fs.peer_settled(FS_HTTP).unwrap(), 1);
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Active);
    }

    #[test]
    fn quotas_refuse_and_back_pressure() {
        let (fs, http, _tcp) = system();
        fs.set_quota(FS_HTTP, 2).unwrap();
        let a = make(&fs, FS_POOL, b"aaaa");
        let b = make(&fs, FS_POOL, b"bbbb");
        let c = make(&fs, FS_POOL, b"cccc");
        let da = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
        fs.lend(b, FS_HTTP, 0, 0).unwrap();
        let (e, c) = fs.lend(c, FS_HTTP, 0, 0).unwrap_err();
        assert_eq!(e, Error::QuotaExceeded);
        assert_eq!(bytes(&c), b"cccc", "handed back intact");
        assert_eq!(fs.stats().quota_refusals, 1);
        assert_eq!(fs.peer_refusals(FS_HTTP).unwrap(), 1);
        // More slices of a buffer the peer already holds are not new buffers.
        fs.lend(a.range(1, 2).unwrap(), FS_HTTP, 0, 0).unwrap();
        // An aggregate of two new buffers is refused as a whole.
        let (e, c) = fs.lend(c.concat(make(&fs, FS_POOL, b"d")).unwrap(), FS_HTTP, 0, 0).unwrap_err();
        assert_eq!(e, Error::QuotaExceeded);
        // The slow consumer releases one buffer: room again.
        let h = http.accept(&da, HTTP_FS).unwrap();
        drop(h);
        pump(&http, HTTP_FS, &fs, FS_HTTP);
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 2, "a is still held via the range");
        let rel = RelDesc { pool: FS_POOL, buf: a.descs()[0].buf, gen: a.descs()[0].gen, count: 1 };
        fs.apply_release(&rel, FS_HTTP).unwrap();
        assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
        let mut c = c;
        c.truncate(4); // only "cccc": one new buffer
        fs.lend(c, FS_HTTP, 0, 0).unwrap_or_else(|(e, _)| panic!("{e:?}"));
        // The owner can always reclaim from a misbehaving peer by declaring
        // it dead (the loader restarts it).
        fs.peer_died(FS_HTTP).unwrap();
        drop(a);
        assert_eq!(fs.stats().buffers_in_use, 0);
    }

    #[test]
    fn more_dirty_buffers_than_the_list_holds() {
        let fs = Domain::new();
        let http = Domain::new();
        let r = own(&fs, FS_POOL, 400);
        map(&http, FS_POOL, r);
        let mut held = Vec::new();
        for _ in 0..(DIRTY_CAP + 44) / MAX_SLICES {
            let mut a = Aggregate::new(&fs);
            for _ in 0..MAX_SLICES {
                a.append(make(&fs, FS_POOL, b"z")).unwrap();
            }
            let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
            held.push(http.accept(&d, HTTP_FS).unwrap());
        }
        assert_eq!(fs.stats().buffers_in_use, 300 - 300 % MAX_SLICES as u64);
        drop(held);
        assert!(http.has_returns(HTTP_FS));
        // A small ring: only 10 fit per drain; everything comes back eventually.
        let mut rounds = 0;
        while http.has_returns(HTTP_FS) {
            let mut budget = 10;
            let mut rels = Vec::new();
            http.drain_returns(HTTP_FS, |r| {
                if budget == 0 {
                    return false;
                }
                budget -= 1;
                rels.push(r);
                true
            })
            .unwrap();
            for r in rels {
                fs.apply_release(&r, FS_HTTP).unwrap();
            }
            rounds += 1;
            assert!(rounds < 100);
        }
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    }

    #[test]
    fn lending_outside_the_pool_acl_is_refused() {
        let (fs, _http, _tcp) = system();
        own(&fs, 5, 2); // a pool only http may read
        fs.set_pool_acl(5, &[FS_HTTP]).unwrap();
        let a = make(&fs, 5, b"for http only");
        let (e, a) = fs.lend(a, PeerId(3), 0, 0).unwrap_err();
        assert_eq!(e, Error::NotInAcl);
        assert!(a.eq_bytes(b"for http only"));
        fs.lend(a, FS_HTTP, 0, 0).unwrap();
        assert_eq!(fs.set_pool_acl(5, &[PeerId(200)]).unwrap_err(), Error::BadPeer);
    }

    #[test]
    fn own_buffer_coming_back_is_reclaimed() {
        // fs → http → fs: http hands fs's own buffer back (e.g. a write of
        // data it read). fs's counts stay exact through the loop.
        let (fs, http, _tcp) = system();
        let a = make(&fs, FS_POOL, b"loop");
        let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        let h = http.accept(&d, HTTP_FS).unwrap();
        let back = http.lend(h, HTTP_FS, 0, 0).unwrap();
        let again = fs.accept(&back, FS_HTTP).unwrap();
        assert!(again.eq_bytes(b"loop"));
        assert_eq!(fs.stats().buffers_in_use, 1);
        drop(again);
        assert_eq!(pump(&fs, FS_HTTP, &http, HTTP_FS), 1);
        assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    }

    #[test]
    fn cycle_through_a_downstream_peer_unwinds() {
        // fs → http → tcp → http: http holds fs's buffer both from fs (its
        // primary grantor) and back from tcp, while tcp holds http's grant.
        // The excess must go back to tcp first, or http and tcp would keep
        // each other's holds forever.
        let (fs, http, tcp) = system();
        let a = make(&fs, FS_POOL, b"cyc");
        let h = http.accept(&fs.lend(a, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
        let t = tcp.accept(&http.lend(h, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
        let h2 = http.accept(&tcp.lend(t.duplicate().unwrap(), TCP_HTTP, 0, 0).unwrap(), HTTP_TCP).unwrap();
        drop(h2);
        drop(t);
        let mut rounds = 0;
        while pump(&tcp, TCP_HTTP, &http, HTTP_TCP)
            + pump(&http, HTTP_TCP, &tcp, TCP_HTTP)
            + pump(&http, HTTP_FS, &fs, FS_HTTP)
            > 0
        {
            rounds += 1;
            assert!(rounds < 10);
        }
        assert_eq!(fs.stats().buffers_in_use, 0);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
        assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Make(u8),
            Send(usize),
            Recv,
            Fwd(usize, bool),
            TcpRecv,
            Split(u8, usize, usize),
            Drop(u8, usize),
            PumpHttp,
            PumpTcp,
            /// tcp sends something back to http (a cycle http→tcp→http).
            Back(usize),
            HttpRecvBack,
            /// http sends something to fs, the owner (a cycle fs→http→fs).
            ToFs(usize),
            FsRecv,
            PumpBack,
            PumpFs,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (1u8..50).prop_map(Op::Make),
                (0usize..8).prop_map(Op::Send),
                Just(Op::Recv),
                ((0usize..8), any::<bool>()).prop_map(|(i, h)| Op::Fwd(i, h)),
                Just(Op::TcpRecv),
                (0u8..3, 0usize..8, 0usize..60).prop_map(|(w, i, at)| Op::Split(w, i, at)),
                (0u8..3, 0usize..8).prop_map(|(w, i)| Op::Drop(w, i)),
                Just(Op::PumpHttp),
                Just(Op::PumpTcp),
                (0usize..8).prop_map(Op::Back),
                Just(Op::HttpRecvBack),
                (0usize..8).prop_map(Op::ToFs),
                Just(Op::FsRecv),
                Just(Op::PumpBack),
                Just(Op::PumpFs),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
            /// Whatever the interleaving of sends, forwards, duplicates,
            /// drops and (partial) release delivery, the bytes each holder
            /// sees never change, no release is ever rejected, and once
            /// everything is dropped and delivered every buffer is back.
            #[test]
            fn holds_balance_across_three_components(ops in proptest::collection::vec(op(), 1..60)) {
                let (fs, http, tcp) = system();
                let mut held: [Vec<(Aggregate<'_>, Vec<u8>)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
                let mut to_http: Vec<(AggDesc, Vec<u8>)> = Vec::new();
                let mut to_tcp: Vec<(AggDesc, Vec<u8>)> = Vec::new();
                let mut back_http: Vec<(AggDesc, Vec<u8>)> = Vec::new();
                let mut to_fs: Vec<(AggDesc, Vec<u8>)> = Vec::new();
                let mut n = 0u8;
                for op in ops {
                    match op {
                        Op::Make(len) => {
                            n = n.wrapping_add(1);
                            let v = vec![n; len as usize];
                            if let Ok(mut w) = fs.alloc(FS_POOL, v.len()) {
                                w.writable()[..v.len()].copy_from_slice(&v);
                                held[0].push((w.seal(v.len()).unwrap(), v));
                            }
                        }
                        Op::Send(i) => if let Some((a, v)) = held[0].get(i) {
                            let d = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
                            to_http.push((d, v.clone()));
                        },
                        Op::Recv => if let Some((d, v)) = to_http.pop() {
                            held[1].push((http.accept(&d, HTTP_FS).unwrap(), v));
                        },
                        Op::Fwd(i, with_header) => if let Some((a, v)) = held[1].get(i) {
                            let mut out = a.duplicate().unwrap();
                            let mut bytes_out = v.clone();
                            if with_header {
                                if let Ok(hd) = http.pack(HTTP_POOL, 3, |b| b.copy_from_slice(b"hd:")) {
                                    out.prepend(hd).unwrap();
                                    bytes_out.splice(0..0, b"hd:".iter().copied());
                                }
                            }
                            let d = http.lend(out, HTTP_TCP, 0, 0).unwrap();
                            to_tcp.push((d, bytes_out));
                        },
                        Op::TcpRecv => if let Some((d, v)) = to_tcp.pop() {
                            held[2].push((tcp.accept(&d, TCP_HTTP).unwrap(), v));
                        },
                        Op::Split(w, i, at) => {
                            let h = &mut held[w as usize];
                            if i < h.len() && at <= h[i].1.len() {
                                let t = h[i].0.split_off(at).unwrap();
                                let tv = h[i].1.split_off(at);
                                h.push((t, tv));
                            }
                        }
                        Op::Drop(w, i) => {
                            let h = &mut held[w as usize];
                            if i < h.len() { h.swap_remove(i); }
                        }
                        Op::PumpHttp => { pump(&http, HTTP_FS, &fs, FS_HTTP); }
                        Op::PumpTcp => { pump(&tcp, TCP_HTTP, &http, HTTP_TCP); }
                        Op::Back(i) => if let Some((a, v)) = held[2].get(i) {
                            let d = tcp.lend(a.duplicate().unwrap(), TCP_HTTP, 0, 0).unwrap();
                            back_http.push((d, v.clone()));
                        },
                        Op::HttpRecvBack => if let Some((d, v)) = back_http.pop() {
                            held[1].push((http.accept(&d, HTTP_TCP).unwrap(), v));
                        },
                        Op::ToFs(i) => if let Some((a, v)) = held[1].get(i) {
                            let d = http.lend(a.duplicate().unwrap(), HTTP_FS, 0, 0).unwrap();
                            to_fs.push((d, v.clone()));
                        },
                        Op::FsRecv => if let Some((d, v)) = to_fs.pop() {
                            held[0].push((fs.accept(&d, FS_HTTP).unwrap(), v));
                        },
                        Op::PumpBack => { pump(&http, HTTP_TCP, &tcp, TCP_HTTP); }
                        Op::PumpFs => { pump(&fs, FS_HTTP, &http, HTTP_FS); }
                    }
                    for h in &held {
                        for (a, v) in h { prop_assert!(a.eq_bytes(v)); }
                    }
                }
                // Everything in flight is received, then all is dropped.
                for (d, _) in to_http.drain(..) { held[1].push((http.accept(&d, HTTP_FS).unwrap(), vec![])); }
                for (d, _) in to_tcp.drain(..) { held[2].push((tcp.accept(&d, TCP_HTTP).unwrap(), vec![])); }
                for (d, _) in back_http.drain(..) { held[1].push((http.accept(&d, HTTP_TCP).unwrap(), vec![])); }
                for (d, _) in to_fs.drain(..) { held[0].push((fs.accept(&d, FS_HTTP).unwrap(), vec![])); }
                for h in &mut held { h.clear(); }
                http.flush_pack(HTTP_POOL).unwrap();
                let mut rounds = 0;
                while pump(&tcp, TCP_HTTP, &http, HTTP_TCP)
                    + pump(&http, HTTP_FS, &fs, FS_HTTP)
                    + pump(&http, HTTP_TCP, &tcp, TCP_HTTP)
                    + pump(&fs, FS_HTTP, &http, HTTP_FS)
                    > 0
                {
                    rounds += 1;
                    prop_assert!(rounds < 100, "releases must quiesce");
                }
                prop_assert_eq!(fs.pool_stats(HTTP_POOL).unwrap().buffers_in_use, 0);
                prop_assert_eq!(http.peer_held_buffers(HTTP_FS).unwrap(), 0);
                prop_assert_eq!(tcp.peer_held_buffers(TCP_HTTP).unwrap(), 0);
                prop_assert_eq!(fs.stats().buffers_in_use, 0);
                prop_assert_eq!(http.stats().buffers_in_use, 0);
                prop_assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
                prop_assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
                prop_assert_eq!(tcp.pool_stats(HTTP_POOL).unwrap().buffers_in_use, 0);
                prop_assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
                prop_assert_eq!(http.peer_held_buffers(HTTP_TCP).unwrap(), 0);
                for d in [&fs, &http, &tcp] {
                    prop_assert_eq!(d.stats().bad_releases, 0);
                    prop_assert_eq!(d.stats().bytes_copied, 0);
                }
            }
        }
    }

    #[test]
    fn pool_stats_free_pages_owned_and_foreign() {
        let (fs, http) = (Domain::new(), Domain::new());
        map(&http, FS_POOL, own(&fs, FS_POOL, 10));
        let st = |d: &Domain| {
            let s = d.pool_stats(FS_POOL).unwrap();
            assert_eq!(s.free_pages, s.pages - s.pages_in_use);
            (s.buffers_in_use, s.pages_in_use, s.free_pages)
        };
        assert_eq!(st(&fs), (0, 0, 10));
        let big = make(&fs, FS_POOL, &vec![7u8; 2 * PAGE_SIZE + 1]); // 3 pages
        let small = make(&fs, FS_POOL, b"x");
        assert_eq!(st(&fs), (2, 4, 6));
        assert_eq!(st(&http), (0, 0, 10), "the reader holds nothing yet");
        let got = http.accept(&fs.lend(big, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
        assert_eq!(st(&http), (1, 3, 7), "the reader counts the pages it holds");
        drop((got, small));
        pump(&http, HTTP_FS, &fs, FS_HTTP);
        assert_eq!(st(&http), (0, 0, 10));
        assert_eq!(st(&fs), (0, 0, 10));
        assert_eq!(fs.pool_stats(FS_POOL).unwrap().high_water_pages, 4);
    }

    #[test]
    fn untrusted_pools_are_flagged() {
        let d = Domain::new();
        let r = pool_region(2);
        d.add_foreign_pool(7, r.read_only(), meta(2), Trust::Untrusted).unwrap();
        assert_eq!(d.pool_trust(7).unwrap(), Trust::Untrusted);
        assert_eq!(d.add_foreign_pool(7, r.read_only(), meta(2), Trust::Trusted).unwrap_err(), Error::InvalidArgument);
        assert_eq!(d.add_owned_pool(8, r, meta(1), Trust::Trusted).unwrap_err(), Error::BadRegion, "meta too small");
    }

    /// The owner of a pool dies and a new incarnation registers the same
    /// region (the dataport survives): pages a consumer still reads are
    /// quarantined, every generation continues its counter, and a stale
    /// reference never validates against new contents.
    #[test]
    fn restarted_owner_quarantines_and_never_repeats_generations() {
        let region = pool_region(4);
        let old = Domain::new();
        old.seed_generations(1);
        old.add_owned_pool(FS_POOL, region, meta(4), Trust::Untrusted).unwrap();
        let http = Domain::new();
        map(&http, FS_POOL, region);
        // Old incarnation: page 0 held by the consumer, page 1 freed
        // after two uses, pages 2-3 never used.
        let held =
            http.accept(&old.lend(make(&old, FS_POOL, b"held response"), FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
        let s_held = held.descs()[0];
        let mut freed = Vec::new();
        for _ in 0..2 {
            let a = make(&old, FS_POOL, b"gone");
            freed.push(a.descs()[0]);
        }
        let s_freed = *freed.last().unwrap();
        assert_eq!(s_held.buf, 0);
        assert_eq!((s_freed.buf, gen_counter(s_freed.gen)), (2, 1));
        let freed_desc = {
            let mut slices = [SliceDesc::default(); MAX_SLICES];
            slices[0] = s_freed;
            AggDesc { nslices: 1, slices, ..Default::default() }
        };
        // The owner dies (its memory is gone) and comes back on the same region.
        // (`old` is never used again.)
        let new = Domain::new();
        new.seed_generations(2);
        new.add_owned_pool(FS_POOL, region, meta(4), Trust::Untrusted).unwrap();
        assert_eq!(new.quarantined_pages(FS_POOL).unwrap(), 1);
        assert_eq!(new.pool_stats(FS_POOL).unwrap().free_pages, 3);
        // It fills every free page; the held page is never handed out.
        let fresh: Vec<_> = (0..3).map(|i| make(&new, FS_POOL, &[b'a' + i; 64])).collect();
        assert!(fresh.iter().all(|a| a.descs()[0].buf != s_held.buf));
        assert_eq!(new.alloc(FS_POOL, 1).unwrap_err(), Error::PoolExhausted);
        assert_eq!(bytes(&held), b"held response", "the consumer's bytes did not change");
        // The still-held reference re-validates (same contents); the freed
        // one does not, though page 2 is live again: its counter went on.
        assert_eq!(http.published(FS_POOL, s_held.buf).unwrap().0, s_held.gen);
        let again = fresh.iter().find(|a| a.descs()[0].buf == s_freed.buf).unwrap().descs()[0];
        assert_eq!(gen_counter(again.gen), gen_counter(s_freed.gen) + 1);
        assert_eq!(http.accept(&freed_desc, HTTP_FS).unwrap_err(), Error::GenerationMismatch);
        // The consumer settles; the system ends the quarantine.
        drop(held);
        drop(fresh);
        assert_eq!(new.end_quarantine(FS_POOL).unwrap(), 1);
        assert_eq!(new.pool_stats(FS_POOL).unwrap().free_pages, 4);
        // Page 0 is reused with the next counter, never with the old generation.
        let all: Vec<_> = (0..4).map(|_| make(&new, FS_POOL, b"x")).collect();
        let p0 = all.iter().find(|a| a.descs()[0].buf == 0).unwrap().descs()[0];
        assert_eq!(gen_counter(p0.gen), gen_counter(s_held.gen) + 1);
        assert_ne!(p0.gen, s_held.gen);
        assert!(http.published(FS_POOL, 0).unwrap().0 != s_held.gen);
    }

    /// Generations over many reallocations and re-registrations of one
    /// page: the counter strictly increases, the tag is never 0, and tags
    /// differ between seeds (they cannot be predicted from the counter).
    #[test]
    fn generations_are_monotonic_across_incarnations_and_tagged() {
        let region = pool_region(1);
        let mut last_counter = 0;
        let mut seen = std::collections::HashSet::new();
        let mut tags = std::collections::HashSet::new();
        for incarnation in 0..20u64 {
            let d = Domain::new();
            d.seed_generations(incarnation.wrapping_mul(0x1234_5678_9abc) ^ 77);
            d.add_owned_pool(FS_POOL, region, meta(1), Trust::Trusted).unwrap();
            assert_eq!(d.quarantined_pages(FS_POOL).unwrap(), 0, "everything was freed");
            for _ in 0..50 {
                let g = make(&d, FS_POOL, b"x").descs()[0].gen;
                assert!(gen_is_live(g));
                assert!(gen_counter(g) > last_counter, "counter goes up across incarnations");
                last_counter = gen_counter(g);
                assert!(seen.insert(g), "generation {g:#x} repeated");
                tags.insert(g >> crate::pool::GEN_COUNTER_BITS);
            }
        }
        assert!(tags.len() > 500, "tags look random ({} distinct of 1000)", tags.len());
    }

    /// fs lends a buffer to cgi, which forwards it to http, which lends it
    /// to tcp. cgi dies: fs quarantines what cgi had, http's use is tainted
    /// by cgi until tcp releases it; the new cgi is served at once; only
    /// after the system settles does fs get its buffer back.
    #[test]
    fn death_with_forwarded_buffers_quarantines_until_consumers_release() {
        const FS_CGI: PeerId = PeerId(1);
        const CGI_FS: PeerId = PeerId(0);
        const CGI_HTTP: PeerId = PeerId(1);
        const HTTP_CGI: PeerId = PeerId(2);
        let (fs, http, tcp) = system();
        let cgi = Domain::new();
        map(&cgi, FS_POOL, region_of(&fs, FS_POOL));
        let a = make(&fs, FS_POOL, b"fragment");
        let c = cgi.accept(&fs.lend(a, FS_CGI, 0, 0).unwrap(), CGI_FS).unwrap();
        let h = http.accept(&cgi.lend(c, CGI_HTTP, 0, 0).unwrap(), HTTP_CGI).unwrap();
        let t = tcp.accept(&http.lend(h, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
        // cgi dies.
        // (`cgi` is never used again.)
        assert_eq!(fs.peer_failed(FS_CGI).unwrap(), 1);
        assert_eq!(http.peer_failed(HTTP_CGI).unwrap(), 0);
        assert_eq!(http.tainted(HTTP_CGI).unwrap(), 1, "http lent it on to tcp");
        // The new cgi is served at once; the quarantined buffer is not freed.
        fs.peer_restarted(FS_CGI).unwrap();
        http.peer_restarted(HTTP_CGI).unwrap();
        let b = make(&fs, FS_POOL, b"for the new cgi");
        fs.lend(b, FS_CGI, 0, 0).unwrap();
        assert_eq!(fs.stats().buffers_in_use, 2);
        assert_eq!(bytes(&t), b"fragment");
        // tcp releases (its segment was ACKed): http is no longer tainted.
        drop(t);
        pump(&tcp, TCP_HTTP, &http, HTTP_TCP);
        assert_eq!(http.tainted(HTTP_CGI).unwrap(), 0);
        assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
        // The supervisor publishes "settled": fs drops the quarantine only.
        assert_eq!(fs.peer_settled(FS_CGI).unwrap(), 1);
        assert_eq!(fs.stats().buffers_in_use, 1, "the new incarnation's buffer stays lent");
        assert_eq!(fs.peer_held_buffers(FS_CGI).unwrap(), 1);
    }

    /// A buffer a dead peer lent back to us (echo) while we had lent it to
    /// that peer: our quarantine must not keep our own taint alive
    /// (no self-deadlock).
    #[test]
    fn quarantine_does_not_keep_taint_alive() {
        const HTTP_CGI: PeerId = PeerId(2);
        const CGI_HTTP: PeerId = PeerId(0);
        let (_fs, http, tcp) = system();
        // tcp's received data: http got it from tcp (pool 2 is http's, so
        // use fs's pool 1 as "tcp's" foreign pool seen from http).
        let cgi = Domain::new();
        map(&cgi, HTTP_POOL, region_of(&http, HTTP_POOL));
        map(&cgi, FS_POOL, region_of(&_fs, FS_POOL));
        let body = make(&_fs, FS_POOL, b"posted body");
        let h = http.accept(&_fs.lend(body, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
        let c = cgi.accept(&http.lend(h, HTTP_CGI, 0, 0).unwrap(), CGI_HTTP).unwrap();
        let back = http.accept(&cgi.lend(c, CGI_HTTP, 0, 0).unwrap(), HTTP_CGI).unwrap();
        let t = tcp.accept(&http.lend(back, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
        // (`cgi` is never used again.)
        assert_eq!(http.peer_failed(HTTP_CGI).unwrap(), 1);
        assert_eq!(http.tainted(HTTP_CGI).unwrap(), 1);
        drop(t);
        pump(&tcp, TCP_HTTP, &http, HTTP_TCP);
        assert_eq!(http.tainted(HTTP_CGI).unwrap(), 0, "quarantined holds are not uses");
        assert_eq!(_fs.stats().buffers_in_use, 1, "still quarantined in http");
        assert_eq!(http.peer_settled(HTTP_CGI).unwrap(), 1);
        pump(&http, HTTP_FS, &_fs, FS_HTTP);
        assert_eq!(_fs.stats().buffers_in_use, 0);
    }

    fn region_of(d: &Domain, pool: PoolId) -> RwRegion {
        let pools = d.pools.borrow();
        let e = pools.iter().flatten().find(|e| e.id == pool).unwrap();
        let base = e.data_ptr(0, 0) as usize - e.layout.header_bytes();
        // SAFETY: the leaked host region behind the pool, alive for the test.
        unsafe { RwRegion::from_raw_parts(base as *mut u8, e.layout.region_bytes()) }.unwrap()
    }
}
