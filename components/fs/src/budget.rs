//! The file cache's share of memory: it gets what other I/O buffers do not
//! use (paper §2.6–2.8, §4.3).
//!
//! In IO-Lite's FreeBSD the file cache and every other I/O buffer live in
//! the same pageable physical memory, and the pageout daemon's "more than
//! half of the replaced pages held cached data" rule (§2.7) settles the
//! cache at whatever the other buffers leave. A server that copies file
//! data (an application buffer filled by `read(2)`, the socket buffer
//! filled by `write(2)`) holds those copies in that same memory, so its
//! cache is smaller by them and its hit rate lower on a data set larger
//! than memory: the secondary gain of Table 1. seL4 has no pageout daemon
//! and our pools are static dataports, so without a model the copies would
//! cost the cache nothing.
//!
//! **The model.** The assembly gives fs a *memory budget* `M` (bytes) for
//! the I/O data of the web server's data path. The cache's budget is
//!
//! ```text
//!     budget = clamp(M − httpd − netstack − fs_held, floor, pool)
//! ```
//!
//! rounded down to whole pages, where, read afresh as fs works
//! ([`Elastic::update`]):
//!
//! * `httpd`: pages of httpd's application pool in use (× 4 KiB). In posix
//!   mode that is where `read(2)` copies file data; in every mode it also
//!   holds response headers and request environments (a few pages).
//! * `netstack`: bytes queued in smoltcp's send rings, i.e. copies of
//!   response data not yet acknowledged. Only the copy modes (flash,
//!   posix) have send rings; in iolite mode the stack queues references to
//!   the pages where they already are (fs's pool, httpd's), so it is 0.
//!   Rings are charged by their bytes in use, not their capacity: like an
//!   mbuf chain, a ring's unused part holds no data (and netstack's heap
//!   reserves it anyway, in every mode, within its own `socket_budget`).
//!   Receive rings are not charged: they hold requests, not file data, and
//!   every mode has the same ones.
//! * `fs_held`: pages of fs's own pool in use that the cache does not
//!   hold: entries evicted while others still referenced them (their
//!   pages stay until the last reader lets go), directory listings in
//!   flight, reads too large to cache, quarantined pages of a dead client.
//!   Pages the cache holds are the cache's, referenced or not.
//!
//! So in iolite mode the cache gets nearly all of `M` (file pages are
//! shared by reference and sit in the cache already); in the copy modes it
//! is smaller by the copies held right now.
//!
//! **Untrusted figures.** `httpd` and `netstack` come from pages those
//! components write (fs maps them read-only). Each is read once per update
//! and bounded by `M` before it is used; whatever they say, the budget
//! stays within `[floor, pool]`: a lying peer can at most shrink the cache
//! to its floor (or, by under-reporting, let it have what a zero-copy
//! system would), never make fs misbehave.
//!
//! **Shrinking and growing.** A lower budget evicts unreferenced entries
//! by the replacement policy at once ([`FileCache::shrink_unreferenced_to`]);
//! referenced ones stay (evicting them would free no page) until released
//! or until a miss needs room, when the policy's usual order applies. A
//! higher budget just lets later misses add entries.

use iolite::PAGE_SIZE;

use crate::cache::FileCache;

/// What the cache is charged for, in bytes (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charges {
    /// httpd's application pool pages in use, in bytes.
    pub httpd: u64,
    /// Bytes in netstack's send rings (copy modes; 0 in iolite mode).
    pub netstack: u64,
    /// fs pool bytes in use that the cache does not hold.
    pub fs_held: u64,
}

impl Charges {
    /// All three, added (saturating).
    pub fn total(&self) -> u64 {
        self.httpd.saturating_add(self.netstack).saturating_add(self.fs_held)
    }
}

/// The memory model: the memory budget, the cache's floor and ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    memory: u64,
    floor: usize,
    ceiling: usize,
}

/// `n` rounded down to whole pages.
const fn pages_down(n: usize) -> usize {
    n / PAGE_SIZE * PAGE_SIZE
}

impl Model {
    /// A model of `memory` bytes for I/O data, the cache never below
    /// `floor` nor above `ceiling` (the pool's bytes). Both are rounded
    /// down to pages; a floor above the ceiling is the ceiling.
    pub fn new(memory: u64, floor: usize, ceiling: usize) -> Self {
        let ceiling = pages_down(ceiling);
        Self { memory, floor: pages_down(floor).min(ceiling), ceiling }
    }

    /// The memory budget `M`.
    pub fn memory(&self) -> u64 {
        self.memory
    }

    /// The smallest cache budget.
    pub fn floor(&self) -> usize {
        self.floor
    }

    /// The largest cache budget (the pool).
    pub fn ceiling(&self) -> usize {
        self.ceiling
    }

    /// The charges as used: each bounded by the memory budget (a figure
    /// above all the memory there is can only be a lie or a bug; bounded,
    /// the sum cannot overflow and the stats stay meaningful).
    pub fn bound(&self, raw: Charges) -> Charges {
        Charges {
            httpd: raw.httpd.min(self.memory),
            netstack: raw.netstack.min(self.memory),
            fs_held: raw.fs_held.min(self.memory),
        }
    }

    /// The cache's budget under `raw` charges, and the charges as bounded.
    pub fn budget(&self, raw: Charges) -> (usize, Charges) {
        let c = self.bound(raw);
        let left = self.memory.saturating_sub(c.total());
        let left = pages_down(usize::try_from(left).unwrap_or(usize::MAX));
        (left.clamp(self.floor, self.ceiling), c)
    }
}

/// What [`Elastic`] did, for the stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// The cache's budget now.
    pub budget: u64,
    /// The lowest budget so far.
    pub low: u64,
    /// The charges of the last update, as bounded.
    pub charged: Charges,
    /// Updates that lowered the budget.
    pub shrinks: u64,
    /// Updates that raised it.
    pub grows: u64,
    /// Entries evicted because the budget fell.
    pub shrink_evictions: u64,
    /// Updates in all.
    pub updates: u64,
}

/// The cache's budget following the model (see the module docs).
#[derive(Debug, Clone)]
pub struct Elastic {
    model: Model,
    stats: BudgetStats,
}

impl Elastic {
    /// Starts with nothing charged: sets the cache's budget to what the
    /// model gives then.
    pub fn new(model: Model, cache: &mut FileCache<'_>) -> Self {
        let (b, _) = model.budget(Charges::default());
        cache.shrink_unreferenced_to(b);
        let stats = BudgetStats { budget: b as u64, low: b as u64, ..BudgetStats::default() };
        Self { model, stats }
    }

    /// The model.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Counters.
    pub fn stats(&self) -> BudgetStats {
        self.stats
    }

    /// Recomputes the budget from the peers' figures (bytes, untrusted:
    /// read once by the caller, bounded here) and fs's pool, and shrinks
    /// or grows the cache to it. Returns the budget.
    pub fn update(&mut self, cache: &mut FileCache<'_>, httpd: u64, netstack: u64) -> usize {
        let in_use =
            cache.domain().pool_stats(cache.pool()).map(|p| u64::from(p.pages_in_use) * PAGE_SIZE as u64).unwrap_or(0);
        let fs_held = in_use.saturating_sub(cache.stats().pages_bytes);
        let (b, charged) = self.model.budget(Charges { httpd, netstack, fs_held });
        let old = cache.budget();
        if b < old {
            self.stats.shrinks += 1;
        } else if b > old {
            self.stats.grows += 1;
        }
        // Also when the budget stayed: entries that were referenced at the
        // last shrink may have been let go since.
        if cache.stats().pages_bytes as usize > b || b != old {
            self.stats.shrink_evictions += cache.shrink_unreferenced_to(b);
        }
        self.stats.updates += 1;
        self.stats.budget = b as u64;
        self.stats.low = self.stats.low.min(b as u64);
        self.stats.charged = charged;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Key;
    use crate::testutil::{domain, map_pool, own_pool, Rng};
    use iolite::{Aggregate, PeerId, PoolId};
    use std::vec::Vec;

    const POOL: PoolId = 1;
    const P: usize = PAGE_SIZE;
    const MIB: u64 = 1 << 20;

    fn ch(httpd: u64, netstack: u64, fs_held: u64) -> Charges {
        Charges { httpd, netstack, fs_held }
    }

    #[test]
    fn the_budget_is_memory_minus_the_charges_within_floor_and_pool() {
        let m = Model::new(4 * MIB, 1 << 20, 8 << 20);
        assert_eq!(m.budget(ch(0, 0, 0)).0, 4 << 20, "nothing charged: all of M");
        assert_eq!(m.budget(ch(MIB, 512 << 10, 0)).0, (4 << 20) - (1 << 20) - (512 << 10));
        assert_eq!(m.budget(ch(0, 0, 3 * MIB)).0, 1 << 20, "exactly the floor");
        assert_eq!(m.budget(ch(2 * MIB, 2 * MIB, 1)).0, 1 << 20, "below the floor: the floor");
        // Whole pages, rounded down: 1 byte charged costs a page.
        assert_eq!(m.budget(ch(1, 0, 0)).0, (4 << 20) - P);
        assert_eq!(m.budget(ch(P as u64, 0, 0)).0, (4 << 20) - P);
        assert_eq!(m.budget(ch(P as u64 + 1, 0, 0)).0, (4 << 20) - 2 * P);
        // M above the pool: the pool is the ceiling, whatever is charged.
        let big = Model::new(64 * MIB, 0, 8 << 20);
        assert_eq!(big.budget(ch(0, 0, 0)).0, 8 << 20);
        assert_eq!(big.budget(ch(50 * MIB, 0, 0)).0, 8 << 20);
        assert_eq!(big.budget(ch(57 * MIB, 0, 0)).0, 7 << 20);
    }

    #[test]
    fn hostile_figures_can_only_push_the_cache_to_its_floor() {
        let m = Model::new(4 * MIB, 1 << 20, 8 << 20);
        for raw in [
            ch(u64::MAX, 0, 0),
            ch(0, u64::MAX, 0),
            ch(u64::MAX, u64::MAX, u64::MAX),
            ch(u64::MAX - 1, 2, 0),
            ch(1 << 63, 1 << 63, 0),
        ] {
            let (b, c) = m.budget(raw);
            assert_eq!(b, 1 << 20, "{raw:?}");
            assert!(c.httpd <= 4 * MIB && c.netstack <= 4 * MIB && c.fs_held <= 4 * MIB, "bounded: {c:?}");
        }
        // Under-reporting gives at most what nothing charged gives.
        let mut rng = Rng(5);
        for _ in 0..10_000 {
            let raw = ch(rng.next(), rng.next() >> rng.below(64), rng.below(16 << 20));
            let (b, _) = m.budget(raw);
            assert!((1 << 20..=4 << 20).contains(&b) && b % P == 0, "{raw:?} -> {b}");
        }
    }

    #[test]
    fn odd_models_stay_consistent() {
        // Floor above the pool: the pool.
        let m = Model::new(4 * MIB, 16 << 20, 8 << 20);
        assert_eq!((m.floor(), m.ceiling()), (8 << 20, 8 << 20));
        assert_eq!(m.budget(ch(u64::MAX, 0, 0)).0, 8 << 20);
        // M below the floor: always the floor.
        let m = Model::new(1000, 2 * P + 5, 8 << 20);
        assert_eq!(m.floor(), 2 * P);
        assert_eq!(m.budget(ch(0, 0, 0)).0, 2 * P);
        // All zero: a cache of nothing (every read uncached), no panic.
        let m = Model::new(0, 0, 0);
        assert_eq!(m.budget(ch(5, 5, 5)).0, 0);
        // Pool not a whole number of pages: rounded down.
        assert_eq!(Model::new(u64::MAX, 0, 3 * P + 7).budget(ch(0, 0, 0)).0, 3 * P);
    }

    /// A one-page entry for `file`, every byte `seed(file)`.
    fn load<'d>(c: &mut FileCache<'d>, file: u32) -> Aggregate<'d> {
        c.get_or_fill(Key { file, offset: 0 }, P, P, |dst| {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = byte(file, i);
            }
            Ok(())
        })
        .unwrap()
    }

    fn byte(file: u32, i: usize) -> u8 {
        (file as usize * 31 + i * 7) as u8
    }

    fn exact(a: &Aggregate<'_>, file: u32) -> bool {
        a.len() == P && a.slices().flatten().enumerate().all(|(i, &b)| b == byte(file, i))
    }

    fn cached(c: &FileCache<'_>) -> Vec<u32> {
        (1..=64).filter(|&f| c.is_referenced(Key { file: f, offset: 0 }).is_some()).collect()
    }

    #[test]
    fn the_cache_shrinks_and_grows_with_the_charges_and_keeps_referenced_pages() {
        let d = domain();
        own_pool(d, POOL, 64);
        let mut c = FileCache::new(d, POOL, 0);
        let mut e = Elastic::new(Model::new(16 * P as u64, 2 * P, 32 * P), &mut c);
        assert_eq!(c.budget(), 16 * P);
        for f in 1..=16 {
            drop(load(&mut c, f));
        }
        assert_eq!(c.stats().pages_bytes, 16 * P as u64);
        // Readers hold files 1 and 2 (the oldest: first to go otherwise).
        let r1 = c.get(Key { file: 1, offset: 0 }).unwrap();
        let r2 = c.get(Key { file: 2, offset: 0 }).unwrap();
        // httpd and netstack hold 10 pages of copies: budget 6 pages.
        assert_eq!(e.update(&mut c, 6 * P as u64, 4 * P as u64), 6 * P);
        let s = e.stats();
        assert_eq!((s.shrinks, s.grows, s.shrink_evictions), (1, 0, 10));
        assert_eq!(s.charged, ch(6 * P as u64, 4 * P as u64, 0));
        // The LRU unreferenced entries went; the referenced ones stayed.
        assert_eq!(cached(&c), [1, 2, 13, 14, 15, 16]);
        assert_eq!(c.stats().evictions_referenced, 0);
        // Charges beyond the memory: the floor; only unreferenced go.
        assert_eq!(e.update(&mut c, u64::MAX, u64::MAX), 2 * P);
        assert_eq!(cached(&c), [1, 2], "referenced entries are never evicted by a shrink");
        assert!(exact(&r1, 1) && exact(&r2, 2));
        assert_eq!(e.stats().low, 2 * P as u64);
        // A referenced entry over the budget stays until it is let go; the
        // next update then evicts it.
        assert_eq!(e.update(&mut c, u64::MAX, 0), 2 * P);
        let r3 = load(&mut c, 3); // a miss at the floor: evicts by the policy
        assert_eq!(c.stats().pages_bytes, 2 * P as u64);
        // 1 or 2 left while referenced: its page is still in use, now
        // charged to fs itself.
        assert_eq!(c.stats().evictions_referenced, 1);
        e.update(&mut c, 0, 0);
        assert_eq!(e.stats().charged.fs_held, P as u64, "an evicted page still referenced");
        assert_eq!(c.budget(), 16 * P - P, "grown back, less the held page");
        assert!(exact(&r1, 1) && exact(&r2, 2) && exact(&r3, 3));
        drop((r1, r2, r3));
        // Nothing charged, nothing held: the whole memory again, and the
        // cache fills to it with every byte right.
        assert_eq!(e.update(&mut c, 0, 0), 16 * P);
        assert_eq!(e.stats().grows, 2);
        for f in 20..40 {
            let a = load(&mut c, f);
            assert!(exact(&a, f));
        }
        assert_eq!(c.stats().pages_bytes, 16 * P as u64);
        for f in 24..40 {
            assert!(exact(&c.get(Key { file: f, offset: 0 }).unwrap(), f), "file {f}");
        }
        drop(c);
        assert_eq!(d.pool_stats(POOL).unwrap().pages_in_use, 0, "every page back in the pool");
    }

    #[test]
    fn pages_lent_to_a_peer_are_never_evicted_by_a_shrink() {
        let d = domain();
        let r = own_pool(d, POOL, 32);
        let http = domain();
        map_pool(http, POOL, r);
        let mut c = FileCache::new(d, POOL, 0);
        let mut e = Elastic::new(Model::new(8 * P as u64, 0, 32 * P), &mut c);
        let lent = load(&mut c, 1);
        for f in 2..=8 {
            drop(load(&mut c, f));
        }
        let desc = d.lend(lent, PeerId(0), 0, 0).unwrap();
        let held = http.accept(&desc, PeerId(0)).unwrap();
        assert_eq!(e.update(&mut c, 8 * P as u64, 0), 0);
        assert_eq!(cached(&c), [1], "only the lent entry is left");
        assert!(exact(&held, 1));
        // The peer returns it: the next update evicts it too.
        drop(held);
        http.drain_returns(PeerId(0), |rel| d.apply_release(&rel, PeerId(0)).is_ok()).unwrap();
        e.update(&mut c, 8 * P as u64, 0);
        assert!(cached(&c).is_empty());
        assert_eq!(d.pool_stats(POOL).unwrap().pages_in_use, 0);
    }

    /// Random charges, reads and readers: the budget always follows the
    /// formula, a shrink never drops a referenced entry, and every reader's
    /// bytes stay exact.
    #[test]
    fn random_charges_keep_every_byte_and_every_reference() {
        let d = domain();
        own_pool(d, POOL, 64);
        let mut c = FileCache::new(d, POOL, 0);
        let model = Model::new(24 * P as u64, 4 * P, 48 * P);
        let mut e = Elastic::new(model, &mut c);
        let mut rng = Rng(31);
        let mut readers: Vec<(u32, Aggregate<'_>)> = Vec::new();
        for _ in 0..3000 {
            match rng.below(5) {
                0 => {
                    let (h, n) = (rng.below(14 * P as u64), rng.below(14 * P as u64));
                    let before: Vec<u32> = cached(&c);
                    let referenced: Vec<u32> = before
                        .iter()
                        .copied()
                        .filter(|&f| c.is_referenced(Key { file: f, offset: 0 }) == Some(true))
                        .collect();
                    let in_use = u64::from(d.pool_stats(POOL).unwrap().pages_in_use) * P as u64;
                    let held = in_use - c.stats().pages_bytes;
                    let b = e.update(&mut c, h, n);
                    assert_eq!(b, model.budget(ch(h, n, held)).0);
                    let after = cached(&c);
                    assert!(referenced.iter().all(|f| after.contains(f)), "a shrink evicted a referenced entry");
                    // Over budget only with referenced entries.
                    if c.stats().pages_bytes as usize > b {
                        assert!(after.iter().all(|&f| c.is_referenced(Key { file: f, offset: 0 }) == Some(true)));
                    }
                }
                1 | 2 => {
                    let f = 1 + rng.below(40) as u32;
                    match c.get_or_fill(Key { file: f, offset: 0 }, P, P, |dst| {
                        for (i, b) in dst.iter_mut().enumerate() {
                            *b = byte(f, i);
                        }
                        Ok(())
                    }) {
                        Ok(a) => {
                            assert!(exact(&a, f));
                            if rng.below(3) == 0 && readers.len() < 20 {
                                readers.push((f, a));
                            }
                        }
                        Err(err) => assert_eq!(err, crate::FsError::NoMemory),
                    }
                }
                3 if !readers.is_empty() => {
                    let i = rng.below(readers.len() as u64) as usize;
                    readers.swap_remove(i);
                }
                _ => {}
            }
            for (f, a) in &readers {
                assert!(exact(a, *f));
            }
        }
        assert!(e.stats().shrinks > 100 && e.stats().grows > 100);
    }
}
