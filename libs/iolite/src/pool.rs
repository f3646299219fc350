//! Pools: page-granular buffer allocation over one shared region.
//!
//! A pool's dataport holds a *header area* followed by the *data pages*:
//!
//! ```text
//! +-----------------------------+----------------------------------------+
//! | BufHdr[pages] (rounded up   | page 0 | page 1 | ...      | page n-1    |
//! | to whole pages)             |        data area                        |
//! +-----------------------------+----------------------------------------+
//! ```
//!
//! The owner (producer) maps the whole pool read-write; every member of the
//! pool's ACL maps it read-only. `BufHdr[i]` is written only by the owner and
//! publishes, for the buffer whose first page is `i`, its current generation
//! (0 = no live buffer starts here) and how many of its bytes are sealed
//! (immutable and shareable). Readers validate every incoming slice against
//! it. The owner's private bookkeeping ([`BufMeta`]) is not shared.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::desc::{PoolId, SliceDesc};
use crate::region::{RoRegion, RwRegion};
use crate::{Error, Result, MAX_PEERS};

/// Size of a page: the granule of buffers and of access control.
pub const PAGE_SIZE: usize = 4096;

/// Whether the pool's producer is trusted to honour immutability.
///
/// The producer keeps its read-write mapping of the pool (write permission is
/// not toggled per buffer). A *trusted* producer (driver, TCP, filesystem) is
/// relied upon not to write sealed bytes. An *untrusted* producer (CGI) could;
/// readers must then not key content caches (checksums) on its
/// ⟨buffer, generation⟩ and must copy bytes they parse before validating them.
/// See README "Untrusted producers".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The producer honours immutability.
    Trusted,
    /// The producer might rewrite sealed bytes.
    Untrusted,
}

/// Bits of a generation that count the reallocations of its head page.
///
/// A generation is `tag << GEN_COUNTER_BITS | counter`: `counter` goes up
/// by one on every allocation of the page and survives a restart of the
/// owner (the pool header is kept, see [`PoolEntry::new_owned`]), so a
/// ⟨buf, gen⟩ never repeats before the page was reallocated 2^20 times;
/// `tag` is drawn at random for every allocation ([`Domain::seed_generations`])
/// and is never 0, so a generation cannot be guessed from the last one and
/// a published generation with tag 0 means "no live buffer starts here".
///
/// [`Domain::seed_generations`]: crate::Domain::seed_generations
pub const GEN_COUNTER_BITS: u32 = 20;
const GEN_COUNTER_MASK: u32 = (1 << GEN_COUNTER_BITS) - 1;

/// Whether a published generation names a live buffer (its tag is not 0).
pub const fn gen_is_live(gen: u32) -> bool {
    gen >> GEN_COUNTER_BITS != 0
}

/// The reallocation counter part of a generation.
pub const fn gen_counter(gen: u32) -> u32 {
    gen & GEN_COUNTER_MASK
}

/// `BufHdr::sealed` of a page that belongs to a live buffer starting at an
/// earlier page (its `gen` carries the page's own counter with tag 0).
const TAIL_MARK: u32 = u32::MAX;

/// xorshift64*: the tag source; not cryptographic, but seeded per
/// incarnation by the root task (RDRAND where the CPU has it, else the TSC).
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Shared per-page header, written by the owner, read by the ACL members.
///
/// Head of a live buffer: `gen` (tag != 0) and the sealed length. Page of
/// a live buffer after its head: `gen` = the page's counter (tag 0),
/// `sealed` = `TAIL_MARK`. Free page: `gen` = its counter (tag 0),
/// `sealed` = 0. The counters stay in the header when the page is freed, so
/// an owner that restarts continues them.
#[repr(C)]
pub(crate) struct BufHdr {
    gen: AtomicU32,
    sealed: AtomicU32,
}

/// Geometry of a pool region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLayout {
    /// Number of data pages.
    pub pages: u32,
}

impl PoolLayout {
    /// Bytes of the header area (whole pages).
    pub const fn header_bytes(&self) -> usize {
        let raw = self.pages as usize * core::mem::size_of::<BufHdr>();
        raw.div_ceil(PAGE_SIZE) * PAGE_SIZE
    }

    /// Total bytes of the pool region.
    pub const fn region_bytes(&self) -> usize {
        self.header_bytes() + self.pages as usize * PAGE_SIZE
    }

    /// The largest layout that fits in `len` bytes.
    pub const fn fitting(len: usize) -> PoolLayout {
        // Each data page costs PAGE_SIZE + 8 header bytes (header rounded up).
        let mut pages = len / (PAGE_SIZE + core::mem::size_of::<BufHdr>());
        while pages > 0 && (PoolLayout { pages: pages as u32 }).region_bytes() > len {
            pages -= 1;
        }
        PoolLayout { pages: pages as u32 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufState {
    Free = 0,
    /// Page belongs to the buffer that starts at an earlier page.
    Tail,
    /// Head of a buffer whose producer may still append (a `BufMut` or the
    /// packer exists).
    Writing,
    /// Head of a fully sealed buffer.
    Sealed,
    /// Foreign pool: we hold references to the buffer starting here.
    Held,
    /// Owned pool: the page was in use when this incarnation registered the
    /// pool (an earlier incarnation's buffer that consumers may still read);
    /// not allocatable until [`Domain::end_quarantine`](crate::Domain::end_quarantine).
    Quarantined,
}

/// "No peer" marker for [`BufMeta::primary`].
pub(crate) const NO_PEER: u8 = u8::MAX;

/// Private per-page bookkeeping of a domain (one entry per data page of every
/// pool the domain knows). Opaque; allocate a table with
/// [`BufMeta::EMPTY`] and hand it to the [`Domain`](crate::Domain).
#[derive(Debug, Clone, Copy)]
pub struct BufMeta {
    pub(crate) gen: u32,
    pub(crate) npages: u32,
    pub(crate) state: BufState,
    pub(crate) dirty: bool,
    /// Foreign buffers: the peer whose grant made the buffer live here
    /// ([`NO_PEER`] if none). Its hold is returned last (cycle freedom).
    pub(crate) primary: u8,
    /// Holds by aggregates and writers inside this domain.
    pub(crate) local: u32,
    /// Holds this domain granted to each peer and that are not yet returned.
    pub(crate) lent: [u16; MAX_PEERS],
    /// Holds each peer granted to this domain and that are still kept.
    pub(crate) recv: [u16; MAX_PEERS],
    /// Holds to be returned to each peer at the next flush.
    pub(crate) ret: [u32; MAX_PEERS],
    /// Holds lent to each peer before it died, kept until the system says
    /// that nobody downstream of it still uses them
    /// ([`Domain::peer_settled`](crate::Domain::peer_settled)).
    pub(crate) quar: [u16; MAX_PEERS],
    /// Bit `p`: peer `p` granted us this buffer and died while we still used
    /// it (we may have forwarded it); cleared when we no longer use it.
    pub(crate) taint: u8,
}

impl BufMeta {
    /// An unused entry, for initialising static tables.
    pub const EMPTY: BufMeta = BufMeta { primary: NO_PEER, ..BufMeta::ZERO };

    /// All zero bits (so a static table of them lives in `.bss`); not a
    /// valid unused entry (`primary` must be `NO_PEER`): tables are filled
    /// with [`BufMeta::EMPTY`] before use.
    pub(crate) const ZERO: BufMeta = BufMeta {
        gen: 0,
        npages: 0,
        state: BufState::Free,
        dirty: false,
        primary: 0,
        local: 0,
        lent: [0; MAX_PEERS],
        recv: [0; MAX_PEERS],
        ret: [0; MAX_PEERS],
        quar: [0; MAX_PEERS],
        taint: 0,
    };

    pub(crate) fn lent_total(&self) -> u32 {
        self.lent.iter().map(|&x| x as u32).sum()
    }
    pub(crate) fn recv_total(&self) -> u32 {
        self.recv.iter().map(|&x| x as u32).sum()
    }
    pub(crate) fn ret_total(&self) -> u32 {
        self.ret.iter().sum()
    }
    pub(crate) fn quar_total(&self) -> u32 {
        self.quar.iter().map(|&x| x as u32).sum()
    }
}

/// The state of the current sub-page packing buffer of an owned pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pack {
    pub buf: u32,
    pub gen: u32,
    pub cap: u32,
    pub used: u32,
}

/// One pool as seen by one domain.
pub(crate) struct PoolEntry {
    pub id: PoolId,
    /// Index of this entry in the domain's pool table.
    pub slot: u8,
    pub owned: bool,
    pub trust: Trust,
    /// Bit `p` set: peer `p` is in the pool's ACL (maps it read-only).
    pub acl: u32,
    pub layout: PoolLayout,
    base: *mut u8, // never written through unless `owned`
    pub meta: &'static mut [BufMeta],
    next_fit: u32,
    pub in_use: u32,
    pub pages_in_use: u32,
    pub high_water: u32,
    pub pack: Option<Pack>,
    /// Pages left in use by an earlier incarnation ([`BufState::Quarantined`]).
    pub quarantined: u32,
    /// Tag source ([`next_random`]).
    pub rng: u64,
}

impl PoolEntry {
    /// Registers an owned pool. The header is *kept*: a dataport starts
    /// zeroed (every page free, counters 0), and after a restart of the
    /// owner it still describes the dead incarnation's buffers. Their pages
    /// are quarantined (consumers may still read them: they are neither
    /// rewritten nor unpublished) and every page continues its counter, so
    /// no ⟨buf, gen⟩ of the old incarnation is ever issued again.
    pub fn new_owned(id: PoolId, region: RwRegion, meta: &'static mut [BufMeta], trust: Trust) -> Result<Self> {
        let mut e = Self::new(id, region.as_ptr(), region.len(), meta, trust, true)?;
        for i in 0..e.layout.pages {
            let (gen, sealed) = e.published(i);
            let m = &mut e.meta[i as usize];
            m.gen = gen_counter(gen);
            if gen_is_live(gen) || sealed != 0 {
                m.state = BufState::Quarantined;
                e.quarantined += 1;
            }
        }
        e.pages_in_use = e.quarantined;
        e.high_water = e.quarantined;
        Ok(e)
    }

    /// Frees the pages an earlier incarnation left in use (see
    /// [`PoolEntry::new_owned`]); returns how many.
    pub fn end_quarantine(&mut self) -> u32 {
        let n = self.quarantined;
        if n == 0 {
            return 0;
        }
        for i in 0..self.layout.pages {
            if self.meta[i as usize].state == BufState::Quarantined {
                self.meta[i as usize].state = BufState::Free;
                self.hdr(i).gen.store(self.meta[i as usize].gen, Ordering::Release);
                self.hdr(i).sealed.store(0, Ordering::Release);
            }
        }
        self.quarantined = 0;
        self.pages_in_use -= n;
        n
    }

    pub fn new_foreign(id: PoolId, region: RoRegion, meta: &'static mut [BufMeta], trust: Trust) -> Result<Self> {
        Self::new(id, region.as_ptr() as *mut u8, region.len(), meta, trust, false)
    }

    fn new(
        id: PoolId,
        base: *mut u8,
        len: usize,
        meta: &'static mut [BufMeta],
        trust: Trust,
        owned: bool,
    ) -> Result<Self> {
        let layout = PoolLayout::fitting(len);
        if layout.pages == 0 || meta.len() < layout.pages as usize || !(base as usize).is_multiple_of(8) {
            return Err(Error::BadRegion);
        }
        for m in meta.iter_mut() {
            *m = BufMeta::EMPTY;
        }
        Ok(Self {
            id,
            slot: 0,
            owned,
            trust,
            acl: u32::MAX,
            layout,
            base,
            meta,
            next_fit: 0,
            in_use: 0,
            pages_in_use: 0,
            high_water: 0,
            pack: None,
            quarantined: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (id as u64) << 32,
        })
    }

    pub fn hdr(&self, page: u32) -> &BufHdr {
        debug_assert!(page < self.layout.pages);
        // SAFETY: page < pages, header area is inside the region and 8-aligned.
        unsafe { &*(self.base as *const BufHdr).add(page as usize) }
    }

    pub fn data_ptr(&self, buf: u32, off: u32) -> *const u8 {
        // SAFETY: callers only pass validated (buf, off) inside the data area.
        unsafe { self.base.add(self.layout.header_bytes() + buf as usize * PAGE_SIZE + off as usize) }
    }

    /// Writable pointer: only for owned pools (the owner's RW mapping).
    pub fn data_ptr_mut(&self, buf: u32, off: u32) -> *mut u8 {
        assert!(self.owned, "write access to a foreign pool");
        self.data_ptr(buf, off) as *mut u8
    }

    /// The generation and sealed length currently published for `buf`.
    pub fn published(&self, buf: u32) -> (u32, u32) {
        let h = self.hdr(buf);
        (h.gen.load(Ordering::Acquire), h.sealed.load(Ordering::Acquire))
    }

    pub fn publish_sealed(&self, buf: u32, sealed: u32) {
        self.hdr(buf).sealed.store(sealed, Ordering::Release);
    }

    /// Validates a slice against the shared header: known buffer, current
    /// generation, inside the sealed bytes and inside the pool.
    pub fn validate(&self, s: &SliceDesc) -> Result<()> {
        if s.buf >= self.layout.pages {
            return Err(Error::BadBuffer);
        }
        let (gen, sealed) = self.published(s.buf);
        if !gen_is_live(gen) {
            return Err(Error::BadBuffer);
        }
        if gen != s.gen {
            return Err(Error::GenerationMismatch);
        }
        let end = s.end();
        let pool_end = (self.layout.pages as u64 - s.buf as u64) * PAGE_SIZE as u64;
        if end > sealed as u64 || end > pool_end {
            return Err(Error::OutOfBounds);
        }
        Ok(())
    }

    /// Allocates a run of `npages` pages (next-fit). Returns the head page.
    pub fn alloc(&mut self, npages: u32) -> Result<(u32, u32)> {
        let pages = self.layout.pages;
        if npages == 0 || npages > pages {
            return Err(Error::PoolExhausted);
        }
        let mut start = self.next_fit % pages;
        let mut scanned = 0u32;
        while scanned < pages {
            if start + npages > pages {
                scanned += pages - start;
                start = 0;
                continue;
            }
            // Find the first non-free page in [start, start+npages).
            match (start..start + npages).find(|&p| self.meta[p as usize].state != BufState::Free) {
                None => {
                    let gen = self.take(start, npages);
                    self.next_fit = (start + npages) % pages;
                    return Ok((start, gen));
                }
                Some(busy) => {
                    scanned += busy + 1 - start;
                    start = busy + 1;
                    if start >= pages {
                        start = 0;
                    }
                }
            }
        }
        Err(Error::PoolExhausted)
    }

    fn take(&mut self, head: u32, npages: u32) -> u32 {
        for p in head + 1..head + npages {
            self.meta[p as usize].state = BufState::Tail;
            let counter = gen_counter(self.meta[p as usize].gen);
            self.hdr(p).gen.store(counter, Ordering::Relaxed);
            self.hdr(p).sealed.store(TAIL_MARK, Ordering::Relaxed);
        }
        let tag = loop {
            let t = (next_random(&mut self.rng) >> 40) as u32 & ((1 << (32 - GEN_COUNTER_BITS)) - 1);
            if t != 0 {
                break t;
            }
        };
        let m = &mut self.meta[head as usize];
        // The counter part goes up on every allocation of the page (and
        // across incarnations), so ⟨buf, gen⟩ names contents system-wide;
        // the random tag makes the next generation unguessable.
        let counter = (gen_counter(m.gen) + 1) & GEN_COUNTER_MASK;
        m.gen = tag << GEN_COUNTER_BITS | counter;
        m.npages = npages;
        m.state = BufState::Writing;
        m.local = 0;
        let gen = m.gen;
        self.hdr(head).sealed.store(0, Ordering::Relaxed);
        self.hdr(head).gen.store(gen, Ordering::Release);
        self.in_use += 1;
        self.pages_in_use += npages;
        self.high_water = self.high_water.max(self.pages_in_use);
        gen
    }

    /// Returns a buffer's pages to the free list.
    pub fn free(&mut self, head: u32) {
        let n = self.meta[head as usize].npages;
        // Unpublished (tag 0), but the counter stays for the next
        // allocation, in this incarnation or the next.
        self.hdr(head).gen.store(gen_counter(self.meta[head as usize].gen), Ordering::Release);
        self.hdr(head).sealed.store(0, Ordering::Release);
        for p in head..head + n {
            self.meta[p as usize].state = BufState::Free;
            if p != head {
                self.hdr(p).sealed.store(0, Ordering::Release);
            }
        }
        self.meta[head as usize].npages = 0;
        self.in_use -= 1;
        self.pages_in_use -= n;
    }

    /// Capacity in bytes of the buffer starting at `head`.
    pub fn buf_capacity(&self, head: u32) -> u32 {
        self.meta[head as usize].npages * PAGE_SIZE as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_math() {
        let l = PoolLayout { pages: 10 };
        assert_eq!(l.header_bytes(), PAGE_SIZE);
        assert_eq!(l.region_bytes(), 11 * PAGE_SIZE);
        assert_eq!(PoolLayout::fitting(11 * PAGE_SIZE), l);
        assert_eq!(PoolLayout::fitting(PAGE_SIZE).pages, 0);
        let big = PoolLayout { pages: 1024 };
        assert_eq!(big.header_bytes(), 2 * PAGE_SIZE);
        assert_eq!(PoolLayout::fitting(big.region_bytes()), big);
    }
}
