//! Whole small files kept by reference: for each recently served file
//! that fs sent whole with its `open_read`, the aggregate of the file
//! cache's buffers and the file's stat, so the next GET of the same path
//! is answered without a call to fs.
//!
//! Why: a call to fs is two address-space switches, and under QEMU's TCG
//! each switch flushes the software TLB; the call is the only work fs does
//! for a cached small file. IO-Lite's buffers make this possible without
//! a copy and without staleness: they are immutable, so a reference kept
//! here reads the same bytes fs has (fs serves a read-only ext2 image; a
//! new incarnation of fs, which may read the disk afresh, empties this
//! cache).
//!
//! What it costs: the pages stay in use while referenced here, also if
//! fs evicts them, so the cache is bounded (entries, bytes, file size) and
//! emptied whenever fs says it is short of memory. Only the modes in which
//! fs's buffers reach us by reference use it; the posix mode reads (and
//! copies) the file per request, as a POSIX server does.

use alloc::string::String;
use alloc::vec::Vec;

use iolite::Aggregate;

use crate::source::FileStat;

struct Entry<'d> {
    path: String,
    stat: FileStat,
    agg: Aggregate<'d>,
    used: u64,
}

/// Bounds of a [`FileRefs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most files kept (0: the cache is off).
    pub entries: usize,
    /// Most bytes kept in all.
    pub bytes: usize,
    /// Largest file kept.
    pub file: usize,
}

/// Counters of a [`FileRefs`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileRefsStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Files put in.
    pub inserts: u64,
    /// Files dropped for room.
    pub evictions: u64,
    /// Times everything was dropped (fs died or ran short of memory).
    pub clears: u64,
}

/// An LRU map path → (stat, whole file by reference).
pub struct FileRefs<'d> {
    entries: Vec<Entry<'d>>,
    limits: Limits,
    bytes: usize,
    clock: u64,
    stats: FileRefsStats,
}

impl<'d> FileRefs<'d> {
    /// An empty cache within `limits`.
    pub fn new(limits: Limits) -> Self {
        Self { entries: Vec::new(), limits, bytes: 0, clock: 0, stats: FileRefsStats::default() }
    }

    /// The file at `path`: its stat and a new reference to all its bytes.
    pub fn get(&mut self, path: &str) -> Option<(FileStat, Aggregate<'d>)> {
        let e = self.entries.iter_mut().find(|e| e.path == path)?;
        // A duplicate fails only when a hold count would overflow: then
        // fs is asked, as without the cache.
        let agg = e.agg.duplicate().ok()?;
        self.clock += 1;
        e.used = self.clock;
        self.stats.hits += 1;
        Some((e.stat, agg))
    }

    /// Keeps `agg`, the whole of the file at `path` (`stat.size` bytes),
    /// if it fits the limits; the least recently used files make room.
    pub fn put(&mut self, path: &str, stat: FileStat, agg: &Aggregate<'d>) {
        let size = agg.len();
        if self.limits.entries == 0
            || size == 0
            || size as u64 != stat.size
            || size > self.limits.file
            || size > self.limits.bytes
        {
            return;
        }
        let Ok(agg) = agg.duplicate() else { return };
        self.remove(path);
        while self.entries.len() >= self.limits.entries || self.bytes + size > self.limits.bytes {
            let Some(i) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i) else {
                break;
            };
            self.bytes -= self.entries.swap_remove(i).agg.len();
            self.stats.evictions += 1;
        }
        self.clock += 1;
        self.bytes += size;
        self.stats.inserts += 1;
        self.entries.push(Entry { path: String::from(path), stat, agg, used: self.clock });
    }

    fn remove(&mut self, path: &str) {
        if let Some(i) = self.entries.iter().position(|e| e.path == path) {
            self.bytes -= self.entries.swap_remove(i).agg.len();
        }
    }

    /// Drops every reference (fs died, or is short of memory).
    pub fn clear(&mut self) {
        if !self.entries.is_empty() {
            self.stats.clears += 1;
        }
        self.entries.clear();
        self.bytes = 0;
    }

    /// Files kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The counters.
    pub fn stats(&self) -> FileRefsStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Kind;
    use crate::testing::{bytes, content, domain, make, FS_POOL};

    fn stat(size: usize, ino: u32) -> FileStat {
        FileStat { ino, generation: 1, mtime: 7, size: size as u64, kind: Kind::File }
    }

    const LIMITS: Limits = Limits { entries: 3, bytes: 10_000, file: 4096 };

    #[test]
    fn a_kept_file_comes_back_byte_exact_and_by_reference() {
        let d = domain();
        let data = content(3000, 1);
        let agg = make(d, FS_POOL, &data);
        let mut c = FileRefs::new(LIMITS);
        assert!(c.get("/a").is_none());
        c.put("/a", stat(3000, 5), &agg);
        let (st, got) = c.get("/a").expect("kept");
        assert_eq!(st, stat(3000, 5));
        assert_eq!(bytes(&got), data);
        assert_eq!(got.descs(), agg.descs(), "the same buffers, not a copy");
        assert_eq!(d.stats().bytes_copied, 0);
        assert_eq!(c.stats().hits, 1);
    }

    #[test]
    fn what_does_not_fit_or_is_not_whole_is_not_kept() {
        let d = domain();
        let mut c = FileRefs::new(LIMITS);
        c.put("/big", stat(5000, 1), &make(d, FS_POOL, &content(5000, 2)));
        c.put("/part", stat(3000, 2), &make(d, FS_POOL, &content(2000, 3)));
        c.put("/empty", stat(0, 3), &Aggregate::new(d));
        assert!(c.is_empty());
        let mut off = FileRefs::new(Limits { entries: 0, ..LIMITS });
        off.put("/a", stat(10, 4), &make(d, FS_POOL, &content(10, 4)));
        assert!(off.is_empty());
    }

    #[test]
    fn the_least_recently_used_make_room_within_the_byte_and_entry_bounds() {
        let d = domain();
        let mut c = FileRefs::new(LIMITS);
        for (i, p) in ["/a", "/b", "/c"].iter().enumerate() {
            c.put(p, stat(4000, i as u32), &make(d, FS_POOL, &content(4000, i as u8)));
        }
        // 12 000 bytes would exceed 10 000: /a went when /c came.
        assert_eq!((c.len(), c.bytes()), (2, 8000));
        assert!(c.get("/a").is_none());
        assert!(c.get("/b").is_some()); // /b is now more recent than /c
        c.put("/d", stat(4000, 9), &make(d, FS_POOL, &content(4000, 9)));
        assert!(c.get("/c").is_none(), "the least recently used went");
        assert!(c.get("/b").is_some() && c.get("/d").is_some());
        for (i, p) in ["/e", "/f", "/g"].iter().enumerate() {
            c.put(p, stat(10, 20 + i as u32), &make(d, FS_POOL, &content(10, i as u8)));
        }
        assert_eq!(c.len(), 3, "never more entries than the bound");
        assert_eq!(c.stats().evictions, 4);
    }

    #[test]
    fn clearing_gives_every_buffer_back() {
        let d = domain();
        let before = d.pool_stats(FS_POOL).unwrap().pages_in_use;
        let mut c = FileRefs::new(LIMITS);
        let agg = make(d, FS_POOL, &content(3000, 1));
        c.put("/a", stat(3000, 1), &agg);
        drop(agg);
        assert!(d.pool_stats(FS_POOL).unwrap().pages_in_use > before, "the cache holds the page");
        c.put("/a", stat(3000, 1), &make(d, FS_POOL, &content(3000, 1)));
        assert_eq!(c.len(), 1, "a path is kept once");
        c.clear();
        assert_eq!(d.pool_stats(FS_POOL).unwrap().pages_in_use, before);
        assert_eq!((c.len(), c.bytes(), c.stats().clears), (0, 0, 1));
    }
}
