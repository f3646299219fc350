//! Precomputed response headers (Cheetah's "header precompute", kept as
//! IO-Lite buffers): for each recently served file, the fixed part of its
//! `200 OK` header (`Content-Type`, `Content-Length`, `Last-Modified`,
//! `ETag`, `Accept-Ranges`, the empty line) is generated once into an
//! IO-Lite object of httpd's pool and then sent by reference, response
//! after response, while the file's ⟨ino, generation, mtime, size⟩ is
//! unchanged. A change of any of them (a new version of the file) rebuilds
//! it. Only the first line and `Date`/`Connection` are generated per
//! response.

use alloc::string::String;
use alloc::vec::Vec;

use iolite::Aggregate;

/// What identifies a version of a file's header.
pub type Key = (u32, u32, u64, u64);

struct Entry<'d> {
    path: String,
    key: Key,
    agg: Aggregate<'d>,
    used: u64,
}

/// Result of a lookup.
#[allow(clippy::large_enum_variant)]
pub enum Lookup<'d> {
    /// The header for this version (a new reference to the same buffer).
    Hit(Aggregate<'d>),
    /// The path was cached for another version (now dropped).
    Stale,
    /// Not cached.
    Miss,
}

/// An LRU map path → header aggregate, bounded by entries.
pub struct HeaderCache<'d> {
    entries: Vec<Entry<'d>>,
    cap: usize,
    clock: u64,
}

impl<'d> HeaderCache<'d> {
    /// A cache of at most `cap` headers (0 disables it).
    pub fn new(cap: usize) -> Self {
        Self { entries: Vec::new(), cap, clock: 0 }
    }

    /// Looks `path` up for version `key`.
    pub fn get(&mut self, path: &str, key: Key) -> Lookup<'d> {
        self.clock += 1;
        let Some(i) = self.entries.iter().position(|e| e.path == path) else { return Lookup::Miss };
        if self.entries[i].key != key {
            self.entries.swap_remove(i);
            return Lookup::Stale;
        }
        self.entries[i].used = self.clock;
        match self.entries[i].agg.duplicate() {
            Ok(a) => Lookup::Hit(a),
            Err(_) => Lookup::Miss,
        }
    }

    /// Remembers `agg` as the header of `path` at version `key`.
    pub fn put(&mut self, path: &str, key: Key, agg: Aggregate<'d>) {
        if self.cap == 0 {
            return;
        }
        self.entries.retain(|e| e.path != path);
        if self.entries.len() >= self.cap {
            if let Some(i) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i) {
                self.entries.swap_remove(i);
            }
        }
        self.entries.push(Entry { path: String::from(path), key, agg, used: self.clock });
    }

    /// Number of cached headers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops everything (e.g. on `FLAG_RECLAIM`).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
