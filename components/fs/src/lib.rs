//! The Iolite OS filesystem: a read-only ext2 reader and the IO-Lite file
//! cache (Pai, Druschel, Zwaenepoel, OSDI '99, §2.5 and §2.7).
//!
//! * [`Ext2`]: the on-disk format, over a [`BlockDevice`]. Every byte of the
//!   image is untrusted; see the module docs for the checks and bounds.
//! * [`FileCache`]: ⟨file, offset⟩ → aggregate of IO-Lite buffers, with the
//!   paper's replacement order and a memory budget.
//! * [`Fs`]: the two together, with the interface the fs component serves
//!   to other components: [`Fs::open`] by path, [`Fs::stat`],
//!   [`Fs::read`] of a range as an aggregate (by reference), [`Fs::list_dir`].
//!
//! See `README.md` for the design decisions (why a hand-written parser,
//! symlink policy, copy modes, what the on-target component still needs).

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
// Failing IO-Lite operations hand aggregates back by value.
#![allow(clippy::result_large_err)]

extern crate alloc;

pub mod budget;
pub mod cache;
pub mod clients;
pub mod device;
pub mod error;
pub mod ext2;
pub mod path;
pub mod quarantine;
/// The client protocol, which lives in its own crate (`fs_api`): clients
/// depend on that, never on this implementation.
pub use fs_api as proto;

#[cfg(test)]
mod image_tests;
#[cfg(test)]
pub(crate) mod testutil;

use alloc::vec::Vec;

use iolite::{Aggregate, Boundary, CopyMode, Domain, PoolId, BUILD_COPY_MODE, MAX_SLICES, PAGE_SIZE};

pub use cache::{CacheStats, Eviction, FileCache, Key, Object, Policy};
pub use device::BlockDevice;
pub use error::{Corruption, FsError, IoError, Result};
pub use ext2::{
    DirEntry, DiskStats, Ext2, FileKind, Inode, Stat, MAX_FILE_SIZE, MAX_NAME_LEN, MAX_PATH_LEN, MAX_SYMLINK_HOPS,
    ROOT_INO,
};

/// Default size of a cache entry (a chunk of a file): 16 KiB, four pages,
/// what clients expect (`fs_api::CHUNK_BYTES`). One read returns at most
/// [`MAX_SLICES`] chunks.
pub const DEFAULT_CHUNK_BYTES: usize = fs_api::CHUNK_BYTES;

/// How an [`Fs`] caches and delivers data.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Memory budget of the file cache, in bytes of pool pages.
    pub budget_bytes: usize,
    /// Size of a cache entry; rounded up to a power of two and at least one
    /// page and one filesystem block.
    pub chunk_bytes: usize,
    /// Copy discipline of [`Fs::read`] (default: the build's
    /// [`BUILD_COPY_MODE`]).
    pub mode: CopyMode,
    /// The caller's private pool that POSIX-mode reads copy into.
    pub private_pool: Option<PoolId>,
    /// The cache's replacement policy (default: the paper's LRU order).
    /// Under Greedy-Dual-Size each chunk is weighed by its whole file.
    pub policy: Policy,
}

impl Config {
    /// Defaults with the given budget.
    pub fn with_budget(budget_bytes: usize) -> Self {
        Self {
            budget_bytes,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            mode: BUILD_COPY_MODE,
            private_pool: None,
            policy: Policy::Lru,
        }
    }
}

/// An open regular file: its inode, read once at open. Reads through the
/// handle see the file as it was at open.
#[derive(Debug, Clone)]
pub struct File {
    inode: Inode,
}

impl File {
    /// Size, mtime, type, inode and generation numbers.
    pub fn stat(&self) -> Stat {
        self.inode.stat()
    }
}

/// All counters of a mounted filesystem.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// The file cache's counters (hits, misses, evictions, bytes cached,
    /// copied bytes).
    pub cache: CacheStats,
    /// Device traffic (bytes read from disk).
    pub disk: DiskStats,
}

/// A mounted filesystem with its file cache: the library behind the fs
/// component's interface.
pub struct Fs<'d, D> {
    vol: Ext2<D>,
    cache: FileCache<'d>,
    chunk: usize,
    mode: CopyMode,
    private_pool: Option<PoolId>,
    /// Inode numbers [`Fs::hide`] took out of the namespace.
    hidden: Vec<u32>,
}

impl<'d, D: BlockDevice> Fs<'d, D> {
    /// Mounts `dev` and sets up a cache allocating from `pool`, an owned pool
    /// of `domain`.
    pub fn mount(dev: D, domain: &'d Domain, pool: PoolId, cfg: Config) -> Result<Self> {
        let vol = Ext2::mount(dev)?;
        let chunk = cfg.chunk_bytes.max(PAGE_SIZE).max(vol.block_size()).next_power_of_two();
        let mut cache = FileCache::new(domain, pool, cfg.budget_bytes);
        cache.set_policy(cfg.policy);
        Ok(Self { vol, cache, chunk, mode: cfg.mode, private_pool: cfg.private_pool, hidden: Vec::new() })
    }

    /// Takes the directory at `path` and everything in it out of reach of
    /// [`Fs::open`], [`Fs::stat`] and [`Fs::list_dir`] ([`FsError::NotFound`];
    /// listings leave them out), by inode: a symlink or hard link to them
    /// elsewhere on the disk finds nothing either. For the system's own
    /// files (`/.iolite`), read before. Nothing at `path`: nothing hidden.
    pub fn hide(&mut self, path: &[u8]) -> Result<usize> {
        let dir = match self.vol.resolve(path, false) {
            Ok(d) => d,
            Err(FsError::NotFound) => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut inos = alloc::vec![dir.ino];
        if dir.kind() == FileKind::Dir {
            self.vol.walk(&dir, |_, inode| {
                inos.push(inode.ino);
                Ok(())
            })?;
        }
        let n = inos.len();
        self.hidden.extend(inos);
        self.hidden.sort_unstable();
        self.hidden.dedup();
        Ok(n)
    }

    /// Resolves `path`, hidden objects as missing.
    fn visible(&mut self, path: &[u8]) -> Result<Inode> {
        let inode = self.vol.resolve(path, true)?;
        if self.hidden.binary_search(&inode.ino).is_ok() {
            return Err(FsError::NotFound);
        }
        Ok(inode)
    }

    /// The volume (format-level access).
    pub fn volume(&mut self) -> &mut Ext2<D> {
        &mut self.vol
    }

    /// The file cache.
    pub fn cache(&mut self) -> &mut FileCache<'d> {
        &mut self.cache
    }

    /// Size of a cache entry in bytes.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats { cache: self.cache.stats(), disk: self.vol.disk_stats() }
    }

    /// Opens a regular file by path (normalised, symlinks followed within
    /// the image). A directory or special file is [`FsError::NotAFile`], a
    /// file over [`MAX_FILE_SIZE`] is [`FsError::TooLarge`].
    pub fn open(&mut self, path: &[u8]) -> Result<File> {
        let inode = self.visible(path)?;
        match inode.kind() {
            FileKind::File if inode.size > MAX_FILE_SIZE => Err(FsError::TooLarge),
            FileKind::File => Ok(File { inode }),
            _ => Err(FsError::NotAFile),
        }
    }

    /// `stat` of any object by path (symlinks followed).
    pub fn stat(&mut self, path: &[u8]) -> Result<Stat> {
        Ok(self.visible(path)?.stat())
    }

    /// Lists a directory by path.
    pub fn list_dir(&mut self, path: &[u8]) -> Result<Vec<DirEntry>> {
        let dir = self.visible(path)?;
        if dir.kind() != FileKind::Dir {
            return Err(FsError::NotADirectory);
        }
        let mut entries = self.vol.read_dir(&dir)?;
        entries.retain(|e| self.hidden.binary_search(&e.ino).is_err());
        Ok(entries)
    }

    /// Visits everything below the directory at `path` (see [`Ext2::walk`]).
    pub fn walk(&mut self, path: &[u8], f: impl FnMut(&[u8], &Inode) -> Result<()>) -> Result<()> {
        let dir = self.vol.resolve(path, true)?;
        if dir.kind() != FileKind::Dir {
            return Err(FsError::NotADirectory);
        }
        self.vol.walk(&dir, f)
    }

    /// Reads up to `max` bytes at `offset` as an aggregate of references to
    /// the cache's buffers (`IOL_read`): no byte is copied. It may return
    /// fewer bytes than asked (at most [`MAX_SLICES`] cache entries per
    /// call); an empty aggregate means end of file. The result is a snapshot.
    pub fn read_shared(&mut self, file: &File, offset: u64, max: usize) -> Result<Aggregate<'d>> {
        let size = file.inode.size;
        let mut out = Aggregate::new(self.cache.domain());
        if offset >= size || max == 0 {
            return Ok(out);
        }
        let end = size.min(offset.saturating_add(max as u64));
        let chunk = self.chunk as u64;
        let bs = self.vol.block_size();
        let mut pos = offset;
        while pos < end && out.slice_count() < MAX_SLICES {
            let cstart = pos / chunk * chunk;
            let clen = chunk.min(size - cstart) as usize;
            let key = Key { file: file.inode.ino, offset: cstart };
            let vol = &mut self.vol;
            let inode = &file.inode;
            // GDS weighs every chunk by the whole file: a web cache's object.
            let obj = Object::file(size);
            let entry = self
                .cache
                .get_or_fill_object(key, obj, clen, clen.div_ceil(bs) * bs, |dst| vol.read_data(inode, cstart, dst))?;
            let piece_len = (end.min(cstart + clen as u64) - pos) as usize;
            let piece = entry.range((pos - cstart) as usize, piece_len).map_err(FsError::Iolite)?;
            if let Err((e, _)) = out.append(piece) {
                if e == iolite::Error::TooManySlices {
                    break;
                }
                return Err(FsError::Iolite(e));
            }
            pos += piece_len as u64;
        }
        Ok(out)
    }

    /// Reads a range as the configured copy mode delivers it to a reader:
    /// under `iolite` and `flash` the cache's buffers are shared (as
    /// [`Fs::read_shared`]); under `posix` the bytes are copied into a
    /// private buffer in `Config::private_pool` (the reader's own memory), so
    /// the reader holds no reference to the cache. Copies are counted.
    pub fn read(&mut self, file: &File, offset: u64, max: usize) -> Result<Aggregate<'d>> {
        let shared = self.read_shared(file, offset, max)?;
        if !self.mode.copies(Boundary::FileCacheToApp) || shared.is_empty() {
            return Ok(shared);
        }
        let pool = self.private_pool.ok_or(FsError::Iolite(iolite::Error::NoCopyPool))?;
        let private = shared.copy_to_pool(pool).map_err(FsError::Iolite)?;
        self.cache.count_copy(private.len());
        Ok(private)
    }

    /// The POSIX `read(2)` path: copies up to `dst.len()` bytes at `offset`
    /// into the caller's buffer and returns how many (0 at end of file).
    pub fn read_into(&mut self, file: &File, offset: u64, dst: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < dst.len() {
            let a = self.read_shared(file, offset + done as u64, dst.len() - done)?;
            if a.is_empty() {
                break;
            }
            let n = a.read_at(0, &mut dst[done..]);
            self.cache.count_copy(n);
            done += n;
        }
        Ok(done)
    }
}
