//! The IO-Lite file cache (paper §2.5, §2.7).
//!
//! A map from ⟨file, offset⟩ (the length is the entry's) to an
//! [`Aggregate`] of IO-Lite buffers in the cache's pool. There is no static
//! storage: entries are buffers allocated on a miss and returned to the pool
//! when the last reference goes away. Readers get *duplicates* of an entry's
//! aggregate (references, no copy), so a reader's aggregate is a snapshot:
//! replacing or evicting the entry later never changes the bytes a reader
//! holds, because buffers are immutable and live while anyone holds them.
//!
//! **Replacement (§2.7, exactly):** entries are ordered first by whether
//! anything other than the cache references their buffers, then by time of
//! last access (reads and replacements; a logical clock, so tests are
//! deterministic). The victim is the least recently used unreferenced entry,
//! else the least recently used referenced one. "Referenced" is read from
//! the IO-Lite [`Domain`]'s hold counts ([`Domain::holds`]): a buffer is
//! referenced outside the cache if this domain has more local holds on it
//! than the cache's own entries account for (a reader in this component
//! still has an aggregate), or if any hold is lent to a peer (HTTP, TCP...
//! still has it, until it returns the hold over the release ring).
//!
//! **Greedy-Dual-Size (optional, [`Policy::GreedyDualSize`]):** the policy
//! Flash-Lite plugged into IO-Lite's file cache (§2.7, §4; Cao and Irani,
//! "Cost-aware WWW proxy caching algorithms", USITS '97). Each entry has a
//! priority `H = L + cost / size`, where `size` and `cost` are those of the
//! *object* the entry belongs to ([`Object`]: for file data, the whole
//! file's size and a cost of one miss, so every chunk of a file weighs the
//! same and a large file counts as one large object, as in a web cache),
//! and `L` is the inflation value: 0 at first, raised to the priority of
//! every victim. A hit restores `H = L + cost / size`. The victim is the
//! unreferenced entry with the lowest `H` (ties: the least recently used),
//! else the referenced one with the lowest `H`: the §2.7 "referenced
//! last" rule stays on top of either policy. Small objects are kept before
//! large ones of equal cost, and `L` ages entries that are not hit: after
//! enough evictions of newer entries, `L` reaches an old entry's `H`.
//! `L` never decreases (the referenced rule can pick a victim whose `H` is
//! above that of a skipped referenced entry; `L` keeps the larger value).
//! Priorities are fixed point (`cost · 2³² / size`) in `u128`, so they are
//! exact and cannot overflow in any realistic run.
//!
//! **Budget:** the cache tries to hold at most `budget_bytes` of pool pages.
//! Before an entry is added, entries are evicted by the policy until it
//! fits. An evicted entry that is still referenced leaves the cache but its
//! pages stay allocated until the readers let go (the budget limits what the
//! cache holds, as in the paper; the pool size limits memory). If the pool
//! itself is exhausted, further entries are evicted and the allocation
//! retried; only when nothing is left to evict is the read
//! [`FsError::NoMemory`]. A chunk larger than the whole budget is read and
//! returned without being cached.

use alloc::collections::BTreeMap;

use iolite::{Aggregate, Domain, Error as IolError, PoolId, PAGE_SIZE};

use crate::error::{FsError, Result};

/// Key of a cache entry: the file (inode number) and the byte offset of the
/// entry's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// File id (inode number).
    pub file: u32,
    /// Offset in the file.
    pub offset: u64,
}

/// The replacement policy (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Least recently used among the unreferenced entries, else among the
    /// referenced ones: the paper's §2.7 order, the default.
    #[default]
    Lru,
    /// Greedy-Dual-Size, with the same "unreferenced first" rule.
    GreedyDualSize,
}

impl Policy {
    /// The policy by its configuration name, `"lru"` or `"gds"` (the fs
    /// component's `cache_policy` attribute); `None` for anything else.
    pub const fn parse(name: &str) -> Option<Policy> {
        match name.as_bytes() {
            b"lru" => Some(Policy::Lru),
            b"gds" => Some(Policy::GreedyDualSize),
            _ => None,
        }
    }

    /// The configuration name ([`Policy::parse`]'s inverse).
    pub const fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::GreedyDualSize => "gds",
        }
    }
}

/// What Greedy-Dual-Size weighs an entry by: the object it is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    /// The object's size in bytes (a file's size, for file data).
    pub size: u64,
    /// The cost of a miss on it, in any unit (1: every miss costs the same,
    /// which makes GDS favour hit rate).
    pub cost: u32,
}

impl Object {
    /// A file of `size` bytes, every miss costing the same.
    pub const fn file(size: u64) -> Self {
        Self { size, cost: 1 }
    }
}

/// Cache counters (the list plus what the policy test needs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the entry.
    pub hits: u64,
    /// Lookups that had to read the disk.
    pub misses: u64,
    /// Entries evicted (for any reason other than replacement).
    pub evictions: u64,
    /// Of those, entries that were still referenced outside the cache (the
    /// policy only picks one when no unreferenced entry exists).
    pub evictions_referenced: u64,
    /// Payload bytes currently in cache entries.
    pub bytes_cached: u64,
    /// Pool bytes (whole pages) currently held by cache entries; this is
    /// what the budget limits.
    pub pages_bytes: u64,
    /// Number of entries.
    pub entries: u64,
    /// Bytes copied out of the cache (POSIX-mode reads and `read_into`).
    pub copied_bytes: u64,
    /// Reads served without caching because one chunk exceeds the budget.
    pub uncached: u64,
}

struct Entry<'d> {
    agg: Aggregate<'d>,
    /// Logical time of the last access.
    last: u64,
    /// GDS priority `H` (0 under LRU); the order key is `(prio, last)`.
    prio: u128,
    obj: Object,
    page_bytes: usize,
}

/// The file cache. See the module docs.
pub struct FileCache<'d> {
    d: &'d Domain,
    pool: PoolId,
    budget: usize,
    entries: BTreeMap<Key, Entry<'d>>,
    /// (priority, last-access tick) → key: the eviction order, lowest
    /// first. Under LRU every priority is 0, so it is the LRU order.
    order: BTreeMap<(u128, u64), Key>,
    policy: Policy,
    /// GDS's inflation value `L`.
    inflation: u128,
    /// Slices the cache's entries hold per ⟨pool, buffer⟩, to tell the
    /// cache's own holds from everyone else's.
    own: BTreeMap<(PoolId, u32), u32>,
    tick: u64,
    stats: CacheStats,
    /// Evictions not yet taken by [`FileCache::take_evictions`], when the
    /// log is on (the fs component prints them for the policy test).
    evict_log: Option<alloc::vec::Vec<Eviction>>,
}

/// One eviction, as the log records it ([`FileCache::set_eviction_log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction {
    /// The entry that left the cache.
    pub key: Key,
    /// Whether something besides the cache still referenced it (the policy
    /// picks such an entry only when no unreferenced entry is left).
    pub referenced: bool,
}

impl<'d> FileCache<'d> {
    /// A cache allocating from `pool` (owned by `d`) and trying to hold at
    /// most `budget_bytes` of pool pages.
    pub fn new(d: &'d Domain, pool: PoolId, budget_bytes: usize) -> Self {
        Self {
            d,
            pool,
            budget: budget_bytes,
            entries: BTreeMap::new(),
            order: BTreeMap::new(),
            policy: Policy::Lru,
            inflation: 0,
            own: BTreeMap::new(),
            tick: 0,
            stats: CacheStats::default(),
            evict_log: None,
        }
    }

    /// The domain whose buffers the cache holds.
    pub fn domain(&self) -> &'d Domain {
        self.d
    }

    /// The pool entries are allocated from.
    pub fn pool(&self) -> PoolId {
        self.pool
    }

    /// The replacement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Changes the replacement policy. Entries present are ordered by the
    /// new one from now on (under GDS each gets `H = L + cost / size`, as if
    /// just hit; their recency order is kept for ties).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
        self.order.clear();
        for (key, e) in self.entries.iter_mut() {
            e.prio = match policy {
                Policy::Lru => 0,
                Policy::GreedyDualSize => self.inflation + gds_value(e.obj),
            };
            self.order.insert((e.prio, e.last), *key);
        }
    }

    /// GDS's inflation value `L` (0 until GDS evicts; unused under LRU).
    pub fn inflation(&self) -> u128 {
        self.inflation
    }

    /// An entry's priority under the current policy if it were accessed now.
    fn priority(&self, obj: Object) -> u128 {
        match self.policy {
            Policy::Lru => 0,
            Policy::GreedyDualSize => self.inflation + gds_value(obj),
        }
    }

    /// Changes the memory budget; entries are evicted at the next insertion.
    pub fn set_budget(&mut self, budget_bytes: usize) {
        self.budget = budget_bytes;
    }

    /// Changes the budget and evicts by the policy at once until the cache
    /// fits it (`set_budget` alone waits for the next insertion).
    pub fn shrink_to(&mut self, budget_bytes: usize) {
        self.budget = budget_bytes;
        while self.stats.pages_bytes as usize > self.budget {
            if !self.evict_one() {
                break;
            }
        }
    }

    /// The memory budget (bytes of pool pages the cache tries to hold).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Changes the budget and evicts *unreferenced* entries by the policy
    /// until the cache fits it, or none is left; returns how many went.
    /// This is how the cache gives memory back when others need it
    /// ([`crate::budget`]): evicting an entry that something else still
    /// references would free no page (its readers keep it allocated) and
    /// would only lose the entry, so those stay, over the budget, until
    /// they are let go or an insertion needs their room.
    pub fn shrink_unreferenced_to(&mut self, budget_bytes: usize) -> u64 {
        self.budget = budget_bytes;
        let mut evicted = 0;
        while self.stats.pages_bytes as usize > self.budget {
            let Some(key) = self.victim() else { break };
            // `victim` returns a referenced entry only when no unreferenced
            // one is left.
            if self.entries.get(&key).is_none_or(|e| self.referenced(e)) {
                break;
            }
            if !self.evict_one() {
                break;
            }
            evicted += 1;
        }
        evicted
    }

    /// Turns the eviction log on or off (off by default; turning it off
    /// drops what was not taken).
    pub fn set_eviction_log(&mut self, on: bool) {
        self.evict_log = if on { Some(alloc::vec::Vec::new()) } else { None };
    }

    /// The evictions since the last call, oldest first (empty when the log
    /// is off).
    pub fn take_evictions(&mut self) -> alloc::vec::Vec<Eviction> {
        match &mut self.evict_log {
            Some(log) => core::mem::take(log),
            None => alloc::vec::Vec::new(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats { entries: self.entries.len() as u64, ..self.stats }
    }

    /// Adds `n` to the copied-bytes counter (a read that copied out).
    pub(crate) fn count_copy(&mut self, n: usize) {
        self.stats.copied_bytes += n as u64;
    }

    fn touch(&mut self, key: Key) {
        self.tick += 1;
        let Some(obj) = self.entries.get(&key).map(|e| e.obj) else { return };
        let prio = self.priority(obj);
        if let Some(e) = self.entries.get_mut(&key) {
            self.order.remove(&(e.prio, e.last));
            (e.prio, e.last) = (prio, self.tick);
            self.order.insert((prio, self.tick), key);
        }
    }

    /// A reference to the entry at `key` (a duplicate of its aggregate), if
    /// cached; counts a hit and makes it the most recently used.
    pub fn get(&mut self, key: Key) -> Option<Aggregate<'d>> {
        let dup = self.entries.get(&key)?.agg.duplicate().ok()?;
        self.stats.hits += 1;
        self.touch(key);
        Some(dup)
    }

    /// Whether anything besides the cache references the entry's buffers.
    fn referenced(&self, e: &Entry<'d>) -> bool {
        e.agg.descs().iter().any(|s| {
            let own = self.own.get(&(s.pool, s.buf)).copied().unwrap_or(0);
            match self.d.holds(s.pool, s.buf) {
                Ok(h) => h.local > own || h.lent > 0,
                Err(_) => true, // cannot tell: be conservative
            }
        })
    }

    /// Whether the entry at `key` is referenced outside the cache.
    pub fn is_referenced(&self, key: Key) -> Option<bool> {
        self.entries.get(&key).map(|e| self.referenced(e))
    }

    /// The entry the policy would evict next, without evicting it.
    pub fn victim(&self) -> Option<Key> {
        // The policy's order, lowest first: the first unreferenced entry
        // wins, else the lowest entry overall.
        let mut oldest = None;
        for key in self.order.values() {
            oldest = oldest.or(Some(*key));
            if let Some(e) = self.entries.get(key) {
                if !self.referenced(e) {
                    return Some(*key);
                }
            }
        }
        oldest
    }

    /// Evicts one entry by the policy; false if the cache is empty.
    pub fn evict_one(&mut self) -> bool {
        let Some(key) = self.victim() else { return false };
        let referenced = self.entries.get(&key).is_some_and(|e| self.referenced(e));
        if let Some(e) = self.entries.get(&key) {
            if self.policy == Policy::GreedyDualSize {
                self.inflation = self.inflation.max(e.prio);
            }
        }
        self.remove(key);
        self.stats.evictions += 1;
        if referenced {
            self.stats.evictions_referenced += 1;
        }
        if let Some(log) = &mut self.evict_log {
            log.push(Eviction { key, referenced });
        }
        true
    }

    fn remove(&mut self, key: Key) -> Option<Aggregate<'d>> {
        let e = self.entries.remove(&key)?;
        self.order.remove(&(e.prio, e.last));
        for s in e.agg.descs() {
            if let Some(n) = self.own.get_mut(&(s.pool, s.buf)) {
                *n -= 1;
                if *n == 0 {
                    self.own.remove(&(s.pool, s.buf));
                }
            }
        }
        self.stats.bytes_cached -= e.agg.len() as u64;
        self.stats.pages_bytes -= e.page_bytes as u64;
        Some(e.agg)
    }

    /// Drops every entry of `file` (e.g. the file changed); readers keep
    /// their snapshots.
    pub fn invalidate(&mut self, file: u32) {
        let keys: alloc::vec::Vec<Key> = self
            .entries
            .range(Key { file, offset: 0 }..)
            .take_while(|(k, _)| k.file == file)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.remove(k);
        }
    }

    /// Evicts by the policy until `need` more bytes fit the budget. False if
    /// they cannot fit even in an empty cache.
    fn make_room(&mut self, need: usize) -> bool {
        if need > self.budget {
            return false;
        }
        while self.stats.pages_bytes as usize + need > self.budget {
            if !self.evict_one() {
                break;
            }
        }
        true
    }

    /// Inserts (or replaces) the entry at `key` with `agg`, which may hold
    /// buffers of any pool, e.g. the ones a writer supplied (`IOL_write`,
    /// §2.5: the replaced buffers leave the cache but live on while
    /// referenced, so earlier readers keep their snapshot). Evicts by the
    /// policy to respect the budget. Returns a reference to the new entry.
    /// GDS weighs it as an object of its own length.
    pub fn insert(&mut self, key: Key, agg: Aggregate<'d>) -> Result<Aggregate<'d>> {
        let obj = Object::file(agg.len() as u64);
        self.insert_object(key, obj, agg)
    }

    /// [`FileCache::insert`], with GDS weighing the entry as part of `obj`.
    pub fn insert_object(&mut self, key: Key, obj: Object, agg: Aggregate<'d>) -> Result<Aggregate<'d>> {
        let page_bytes = agg.descs().iter().map(|s| (s.len as usize).div_ceil(PAGE_SIZE) * PAGE_SIZE).sum();
        self.remove(key);
        if !self.make_room(page_bytes) {
            self.stats.uncached += 1;
            return Ok(agg);
        }
        self.insert_sized(key, obj, agg, page_bytes)
    }

    /// Inserts an entry that fits the budget (room already made).
    fn insert_sized(&mut self, key: Key, obj: Object, agg: Aggregate<'d>, page_bytes: usize) -> Result<Aggregate<'d>> {
        self.remove(key);
        let dup = agg.duplicate().map_err(FsError::Iolite)?;
        for s in agg.descs() {
            *self.own.entry((s.pool, s.buf)).or_insert(0) += 1;
        }
        self.stats.bytes_cached += agg.len() as u64;
        self.stats.pages_bytes += page_bytes as u64;
        self.tick += 1;
        let prio = self.priority(obj);
        self.order.insert((prio, self.tick), key);
        self.entries.insert(key, Entry { agg, last: self.tick, prio, obj, page_bytes });
        Ok(dup)
    }

    /// The entry at `key`, reading it on a miss: allocates a buffer of
    /// `alloc_len` bytes (≥ `len`) in the cache's pool, lets `fill` write it
    /// in place (from the disk, by DMA on target), seals `len` bytes and
    /// inserts them. Pool exhaustion evicts by the policy and retries. GDS
    /// weighs the entry as an object of `len` bytes.
    pub fn get_or_fill(
        &mut self,
        key: Key,
        len: usize,
        alloc_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Aggregate<'d>> {
        self.get_or_fill_object(key, Object::file(len as u64), len, alloc_len, fill)
    }

    /// [`FileCache::get_or_fill`] for an entry that is part of `obj` (a
    /// chunk of a file: GDS weighs it by the whole file).
    pub fn get_or_fill_object(
        &mut self,
        key: Key,
        obj: Object,
        len: usize,
        alloc_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Aggregate<'d>> {
        if let Some(a) = self.get(key) {
            return Ok(a);
        }
        self.stats.misses += 1;
        let need = alloc_len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let cacheable = self.make_room(need);
        let mut buf = loop {
            match self.d.alloc(self.pool, alloc_len) {
                Ok(b) => break b,
                Err(IolError::PoolExhausted) => {
                    if !self.evict_one() {
                        return Err(FsError::NoMemory);
                    }
                }
                Err(e) => return Err(FsError::Iolite(e)),
            }
        };
        fill(&mut buf.writable()[..alloc_len])?;
        let agg = buf.seal(len).map_err(|(e, _)| FsError::Iolite(e))?;
        if !cacheable {
            self.stats.uncached += 1;
            return Ok(agg);
        }
        self.insert_sized(key, obj, agg, need)
    }
}

/// GDS's `cost / size`, fixed point with 32 fraction bits (a size of 0
/// counts as 1 byte).
fn gds_value(obj: Object) -> u128 {
    (u128::from(obj.cost) << 32) / u128::from(obj.size.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{domain, map_pool, own_pool, Rng};
    use iolite::PeerId;
    use std::vec::Vec;

    const POOL: PoolId = 1;

    fn key(file: u32) -> Key {
        Key { file, offset: 0 }
    }

    /// A one-page entry for `file` filled with `file as u8`.
    fn load<'d>(c: &mut FileCache<'d>, file: u32) -> Aggregate<'d> {
        c.get_or_fill(key(file), PAGE_SIZE, PAGE_SIZE, |dst| {
            dst.fill(file as u8);
            Ok(())
        })
        .unwrap()
    }

    fn keys(c: &FileCache<'_>) -> Vec<u32> {
        c.entries.keys().map(|k| k.file).collect()
    }

    #[test]
    fn eviction_order_is_unreferenced_lru_then_referenced_lru() {
        let d = domain();
        own_pool(d, POOL, 32);
        let mut c = FileCache::new(d, POOL, 3 * PAGE_SIZE);
        drop(load(&mut c, 1)); // t1
        drop(load(&mut c, 2)); // t2
        drop(load(&mut c, 3)); // t3
        let r2 = c.get(key(2)).unwrap(); // 2 referenced, order 1 3 2
        drop(c.get(key(1)).unwrap()); // order 3 2 1
        assert_eq!(c.is_referenced(key(2)), Some(true));
        assert_eq!(c.is_referenced(key(3)), Some(false));
        assert_eq!(c.victim(), Some(key(3)), "LRU among unreferenced");
        drop(load(&mut c, 4)); // evicts 3; order 2 1 4
        assert_eq!(keys(&c), [1, 2, 4]);
        assert_eq!(c.victim(), Some(key(1)), "2 is older but referenced");
        let r4 = load(&mut c, 5); // evicts 1; order 2 4 5; r4 refers to 5
        assert_eq!(keys(&c), [2, 4, 5]);
        let r4b = c.get(key(4)).unwrap(); // order 2 5 4
                                          // Everything referenced now: the LRU referenced entry goes.
        assert_eq!(c.victim(), Some(key(2)));
        drop(load(&mut c, 6));
        assert_eq!(keys(&c), [4, 5, 6]);
        let s = c.stats();
        assert_eq!((s.evictions, s.evictions_referenced), (3, 1));
        assert_eq!((s.hits, s.misses), (3, 6));
        // The evicted entry's reader still has its bytes (snapshot).
        assert!(r2.slices().next().unwrap().iter().all(|&b| b == 2));
        drop((r2, r4, r4b));
        assert_eq!(s.pages_bytes, 3 * PAGE_SIZE as u64);
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 3, "evicted buffers went back to the pool");
    }

    #[test]
    fn eviction_log_and_shrink_follow_the_policy() {
        let d = domain();
        own_pool(d, POOL, 32);
        let mut c = FileCache::new(d, POOL, 4 * PAGE_SIZE);
        assert!(c.take_evictions().is_empty(), "log off by default");
        c.set_eviction_log(true);
        for f in 1..=4 {
            drop(load(&mut c, f));
        }
        let held = c.get(key(1)).unwrap(); // 1 referenced; order 2 3 4 1
        drop(load(&mut c, 5)); // evicts 2
        c.shrink_to(2 * PAGE_SIZE); // evicts 3, then 4 (1 is referenced)
        let ev = |file, referenced| Eviction { key: key(file), referenced };
        assert_eq!(c.take_evictions(), [ev(2, false), ev(3, false), ev(4, false)]);
        assert!(c.take_evictions().is_empty(), "taken");
        c.shrink_to(0); // 1 is older than 5 but referenced: 5 first
        assert_eq!(c.take_evictions(), [ev(5, false), ev(1, true)]);
        assert_eq!(c.stats().pages_bytes, 0);
        drop(held);
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 0);
    }

    #[test]
    fn a_hold_lent_to_a_peer_counts_as_referenced() {
        let d = domain();
        let r = own_pool(d, POOL, 16);
        let http = domain();
        map_pool(http, POOL, r);
        let mut c = FileCache::new(d, POOL, 2 * PAGE_SIZE);
        let a = load(&mut c, 1);
        drop(load(&mut c, 2));
        // fs lends file 1 to http (peer 0 in both) and keeps no local copy.
        let desc = d.lend(a, PeerId(0), 0, 0).unwrap();
        assert_eq!(c.is_referenced(key(1)), Some(true));
        assert_eq!(c.victim(), Some(key(2)));
        // http drops it and returns the hold: unreferenced again.
        let h = http.accept(&desc, PeerId(0)).unwrap();
        drop(h);
        http.drain_returns(PeerId(0), |rel| d.apply_release(&rel, PeerId(0)).is_ok()).unwrap();
        assert_eq!(c.is_referenced(key(1)), Some(false));
        assert_eq!(c.victim(), Some(key(1)));
    }

    #[test]
    fn pool_exhaustion_evicts_then_reports_no_memory() {
        let d = domain();
        own_pool(d, POOL, 4);
        let mut c = FileCache::new(d, POOL, usize::MAX);
        for f in 1..=4 {
            drop(load(&mut c, f));
        }
        drop(load(&mut c, 5)); // pool full: the LRU (1) is evicted to make room
        assert_eq!(keys(&c), [2, 3, 4, 5]);
        let held: Vec<_> = (2..=5).map(|f| c.get(key(f)).unwrap()).collect();
        // Everything referenced: evicting frees no page, so the read fails
        // cleanly and the readers' data is intact.
        let e = c.get_or_fill(key(9), PAGE_SIZE, PAGE_SIZE, |_| Ok(())).unwrap_err();
        assert_eq!(e, FsError::NoMemory);
        assert_eq!(c.stats().entries, 0);
        for (f, a) in (2..=5).zip(&held) {
            assert!(a.slices().next().unwrap().iter().all(|&b| b == f as u8));
        }
        drop(held);
        drop(load(&mut c, 9));
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 1);
    }

    #[test]
    fn chunk_over_budget_is_served_uncached() {
        let d = domain();
        own_pool(d, POOL, 8);
        let mut c = FileCache::new(d, POOL, PAGE_SIZE);
        let a = c
            .get_or_fill(key(1), 2 * PAGE_SIZE, 2 * PAGE_SIZE, |dst| {
                dst.fill(7);
                Ok(())
            })
            .unwrap();
        assert_eq!(a.len(), 2 * PAGE_SIZE);
        assert_eq!((c.stats().entries, c.stats().uncached), (0, 1));
        drop(a);
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 0);
    }

    #[test]
    fn replacing_an_entry_keeps_readers_snapshot() {
        let d = domain();
        own_pool(d, POOL, 8);
        let mut c = FileCache::new(d, POOL, 8 * PAGE_SIZE);
        let old = load(&mut c, 1);
        // IOL_write: the writer's buffers replace the entry (§2.5).
        let new = d.alloc_copy(POOL, b"new contents").unwrap();
        drop(c.insert(key(1), new).unwrap());
        assert!(old.slices().next().unwrap().iter().all(|&b| b == 1), "snapshot unchanged");
        let now = c.get(key(1)).unwrap();
        assert!(now.eq_bytes(b"new contents"));
        assert_eq!(c.stats().bytes_cached, 12);
        drop((old, now));
        c.invalidate(1);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.stats().bytes_cached, 0);
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 0);
    }

    /// A one-page entry for `file`, weighed by GDS as an object of `size`
    /// bytes (a chunk of a file that large).
    fn load_obj<'d>(c: &mut FileCache<'d>, file: u32, size: u64) -> Aggregate<'d> {
        c.get_or_fill_object(key(file), Object::file(size), PAGE_SIZE, PAGE_SIZE, |dst| {
            dst.fill(file as u8);
            Ok(())
        })
        .unwrap()
    }

    /// GDS's `H` of an object of `size` bytes and cost 1 at inflation `l`.
    fn h(l: u128, size: u64) -> u128 {
        l + (1u128 << 32) / u128::from(size)
    }

    #[test]
    fn policy_names_round_trip() {
        for p in [Policy::Lru, Policy::GreedyDualSize] {
            assert_eq!(Policy::parse(p.name()), Some(p));
        }
        assert_eq!(Policy::parse("GDS"), None);
        assert_eq!(Policy::parse(""), None);
        assert_eq!(Policy::default(), Policy::Lru);
    }

    #[test]
    fn gds_evicts_the_large_cheap_object_before_the_small_one_of_equal_age() {
        let d = domain();
        own_pool(d, POOL, 16);
        let mut c = FileCache::new(d, POOL, 2 * PAGE_SIZE);
        c.set_policy(Policy::GreedyDualSize);
        // The small file is older: LRU would evict it; GDS keeps it, as a
        // miss on it costs as much as one on the large file.
        drop(load_obj(&mut c, 1, 4096)); // small: H = 2^20
        drop(load_obj(&mut c, 2, 1 << 20)); // large: H = 2^12
        assert_eq!(c.victim(), Some(key(2)));
        c.set_eviction_log(true);
        drop(load_obj(&mut c, 3, 4096));
        assert_eq!(c.take_evictions(), [Eviction { key: key(2), referenced: false }]);
        assert_eq!(c.inflation(), h(0, 1 << 20), "L rose to the victim's H");
        // The same sequence under LRU evicts the older small file.
        let d = domain();
        own_pool(d, POOL, 16);
        let mut lru = FileCache::new(d, POOL, 2 * PAGE_SIZE);
        drop(load_obj(&mut lru, 1, 4096));
        drop(load_obj(&mut lru, 2, 1 << 20));
        assert_eq!(lru.victim(), Some(key(1)));
    }

    #[test]
    fn gds_inflation_ages_entries_that_are_not_hit_and_ties_go_lru() {
        let d = domain();
        own_pool(d, POOL, 16);
        let mut c = FileCache::new(d, POOL, 2 * PAGE_SIZE);
        c.set_policy(Policy::GreedyDualSize);
        c.set_eviction_log(true);
        let (small, large) = (4096u64, 16384u64); // H: 2^20 and 2^18 at L = 0
        drop(load_obj(&mut c, 1, small));
        drop(load_obj(&mut c, 2, large));
        // Each new large file evicts the previous one and raises L by
        // 2^18, until L + 2^18 reaches the small file's H = 2^20.
        let mut l = 0;
        for f in 3..=5 {
            drop(load_obj(&mut c, f, large));
            assert_eq!(c.take_evictions(), [Eviction { key: key(f - 1), referenced: false }]);
            l = h(l, large);
            assert_eq!(c.inflation(), l);
            assert_eq!(c.entries[&key(f)].prio, h(l, large));
        }
        // File 5 has H = 3·2^18 + 2^18 = 2^20, the same as file 1: a tie,
        // and the older of the two (file 1) goes.
        assert_eq!(c.entries[&key(5)].prio, c.entries[&key(1)].prio);
        drop(load_obj(&mut c, 6, large));
        assert_eq!(c.take_evictions(), [Eviction { key: key(1), referenced: false }]);
        assert_eq!(c.inflation(), h(0, small));
        // A hit restores H = L + cost/size: file 5 hit now outranks file 6.
        drop(c.get(key(5)).unwrap());
        assert_eq!(c.entries[&key(5)].prio, h(h(0, small), large));
        assert_eq!(c.victim(), Some(key(6)));
    }

    #[test]
    fn gds_keeps_referenced_entries_last_and_inflation_never_falls() {
        let d = domain();
        own_pool(d, POOL, 16);
        let mut c = FileCache::new(d, POOL, 3 * PAGE_SIZE);
        c.set_policy(Policy::GreedyDualSize);
        c.set_eviction_log(true);
        let held = load_obj(&mut c, 1, 1 << 20); // lowest H, but referenced
        drop(load_obj(&mut c, 2, 8192));
        drop(load_obj(&mut c, 3, 4096));
        assert_eq!(c.victim(), Some(key(2)), "the referenced entry is skipped");
        drop(load_obj(&mut c, 4, 4096));
        assert_eq!(c.take_evictions(), [Eviction { key: key(2), referenced: false }]);
        assert_eq!(c.inflation(), h(0, 8192));
        // Released: file 1 (H below L now) goes next, and L stays.
        drop(held);
        drop(load_obj(&mut c, 5, 4096));
        assert_eq!(c.take_evictions(), [Eviction { key: key(1), referenced: false }]);
        assert_eq!(c.inflation(), h(0, 8192), "L never decreases");
    }

    #[test]
    fn switching_policies_reorders_the_entries() {
        let d = domain();
        own_pool(d, POOL, 16);
        let mut c = FileCache::new(d, POOL, 4 * PAGE_SIZE);
        drop(load_obj(&mut c, 1, 4096));
        drop(load_obj(&mut c, 2, 1 << 20));
        drop(load_obj(&mut c, 3, 4096));
        assert_eq!(c.victim(), Some(key(1)));
        c.set_policy(Policy::GreedyDualSize);
        assert_eq!(c.policy(), Policy::GreedyDualSize);
        assert_eq!(c.victim(), Some(key(2)));
        c.set_policy(Policy::Lru);
        assert_eq!(c.victim(), Some(key(1)));
    }

    /// Random operations against a plain model of GDS (with the referenced
    /// rule): the victim and L are always what the model says.
    #[test]
    fn gds_victim_matches_a_model() {
        let d = domain();
        own_pool(d, POOL, 64);
        let mut c = FileCache::new(d, POOL, 6 * PAGE_SIZE);
        c.set_policy(Policy::GreedyDualSize);
        let mut rng = Rng(1999);
        let size_of = |f: u32| 512u64 << (f % 7); // 512 B .. 32 KiB objects
                                                  // Model: file -> (H, last access); readers held per file; L.
        let mut model: std::collections::BTreeMap<u32, (u128, u64)> = Default::default();
        let mut readers: Vec<(u32, Aggregate<'_>)> = Vec::new();
        let (mut l, mut now) = (0u128, 0u64);
        for _ in 0..3000 {
            let f = 1 + rng.below(12) as u32;
            match rng.below(4) {
                0 | 1 => {
                    if !model.contains_key(&f) && model.len() == 6 {
                        let current = |g: &u32| c.entries[&key(*g)].agg.descs()[0];
                        let referenced = |g: &u32| {
                            readers.iter().any(|(x, a)| {
                                x == g && (a.descs()[0].buf, a.descs()[0].gen) == (current(g).buf, current(g).gen)
                            })
                        };
                        let lowest = |set: Vec<u32>| set.into_iter().min_by_key(|g| model[g]);
                        let free: Vec<u32> = model.keys().copied().filter(|g| !referenced(g)).collect();
                        let want = lowest(free).or_else(|| lowest(model.keys().copied().collect())).unwrap();
                        assert_eq!(c.victim(), Some(key(want)));
                        l = l.max(model[&want].0);
                        model.remove(&want);
                    }
                    let a = load_obj(&mut c, f, size_of(f));
                    now += 1;
                    model.insert(f, (h(l, size_of(f)), now));
                    assert_eq!(c.inflation(), l);
                    if rng.below(3) == 0 {
                        readers.push((f, a));
                    }
                }
                2 if !readers.is_empty() => {
                    let i = rng.below(readers.len() as u64) as usize;
                    readers.swap_remove(i);
                }
                _ => {}
            }
            let cached: Vec<u32> = keys(&c);
            assert_eq!(cached, model.keys().copied().collect::<Vec<_>>());
        }
        assert!(l > 0, "the run evicted");
    }

    /// Random operations against a plain model of the policy: the victim is
    /// always what the paper's rule picks.
    #[test]
    fn victim_matches_a_model_of_the_policy() {
        let d = domain();
        own_pool(d, POOL, 64);
        let mut c = FileCache::new(d, POOL, 6 * PAGE_SIZE);
        let mut rng = Rng(77);
        // Model: file -> last access time; readers held per file.
        let mut last: std::collections::BTreeMap<u32, u64> = Default::default();
        let mut readers: Vec<(u32, Aggregate<'_>)> = Vec::new();
        let mut now = 0u64;
        for _ in 0..2000 {
            let f = 1 + rng.below(10) as u32;
            match rng.below(4) {
                0 | 1 => {
                    // Expected victim before a miss that must evict.
                    if !last.contains_key(&f) && last.len() == 6 {
                        // A reader refers to the entry only if it holds the
                        // entry's current buffer (not one evicted earlier).
                        let current = |g: &u32| c.entries[&key(*g)].agg.descs()[0];
                        let referenced = |g: &u32| {
                            readers.iter().any(|(h, a)| {
                                h == g && (a.descs()[0].buf, a.descs()[0].gen) == (current(g).buf, current(g).gen)
                            })
                        };
                        let by_age = |set: Vec<u32>| set.into_iter().min_by_key(|g| last[g]);
                        let free: Vec<u32> = last.keys().copied().filter(|g| !referenced(g)).collect();
                        let want = by_age(free).or_else(|| by_age(last.keys().copied().collect())).unwrap();
                        assert_eq!(c.victim(), Some(key(want)));
                        last.remove(&want);
                    }
                    let a = load(&mut c, f);
                    now += 1;
                    last.insert(f, now);
                    if rng.below(3) == 0 {
                        readers.push((f, a));
                    }
                }
                2 if !readers.is_empty() => {
                    let i = rng.below(readers.len() as u64) as usize;
                    readers.swap_remove(i);
                }
                _ => {}
            }
            let cached: Vec<u32> = keys(&c);
            assert_eq!(cached, last.keys().copied().collect::<Vec<_>>());
        }
    }
}
