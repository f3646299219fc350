//! A read-only ext2 reader over an untrusted image.
//!
//! Layout (revision 0 and 1, as `mke2fs -t ext2` writes it): the superblock
//! at byte 1024; block groups, each described by a 32-byte group descriptor
//! in the table that starts in the block after the superblock; per group an
//! inode table; inodes with 12 direct block pointers and single-, double-
//! and triple-indirect pointers; directories as blocks of variable-length
//! entries (a hashed `dir_index` directory reads correctly as a linear one,
//! which is why that compat feature needs nothing here).
//!
//! Every value read from the image is untrusted. Geometry is checked once at
//! mount (the filesystem must fit on the device, groups must cover the
//! inodes, ...), and every pointer is checked where it is used, so a corrupt
//! image gives a [`FsError::Corrupt`] naming the check, never a panic or an
//! out-of-bounds access. Work is bounded: resolving one logical block reads
//! at most three indirect blocks (a cycle in a block map cannot make it
//! loop), a directory scan reads at most `size / block_size` blocks, path
//! resolution handles at most [`MAX_SYMLINK_HOPS`] symlinks of at most one
//! block each, and [`Ext2::walk`] visits every directory at most once and
//! reports a second visit as [`Corruption::DirectoryLoop`].

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;

use crate::device::BlockDevice;
use crate::error::{Corruption, FsError, Result};

/// Inode number of the root directory.
pub const ROOT_INO: u32 = 2;
/// Largest file size served. Larger files are refused with
/// [`FsError::TooLarge`]: offsets in the cache and the RPC interface are
/// then guaranteed to fit 32 bits plus one.
pub const MAX_FILE_SIZE: u64 = 1 << 32;
/// Symlinks followed while resolving one path before giving up with
/// [`FsError::TooManySymlinks`].
pub const MAX_SYMLINK_HOPS: u32 = 8;
/// Longest path accepted (bytes), as PATH_MAX.
pub const MAX_PATH_LEN: usize = 4096;
/// Longest name in a directory entry (the on-disk field is one byte).
pub const MAX_NAME_LEN: usize = 255;

const MAGIC: u16 = 0xEF53;
const SUPERBLOCK_OFFSET: u64 = 1024;
const DESC_SIZE: u64 = 32;
const N_DIRECT: u64 = 12;
const INCOMPAT_FILETYPE: u32 = 0x2;
/// Inode flag: the file is mapped by extents (ext4), not by a block map.
const FL_EXTENTS: u32 = 0x0008_0000;
/// Inode flag: the data is stored inside the inode (ext4 inline data).
const FL_INLINE_DATA: u32 = 0x1000_0000;
/// Metadata blocks kept in memory (inode table, indirect and directory
/// blocks; 1 MiB at 4 KiB blocks). A web site's hot set of metadata fits:
/// a directory of a few thousand entries is ~15 blocks, an inode table
/// block holds 16 inodes. With the 16 blocks this once was, a site of
/// 3000 files read ~2.4 metadata blocks from the disk per request even
/// when every byte of file data came from the cache.
const META_SLOTS: usize = 256;
/// Names remembered by [`Ext2::lookup`] ((directory, name) -> inode: the
/// pathname translation cache Flash keeps, here below the server). The
/// volume is read-only, so an entry never goes stale; when full, it starts
/// over (bounded memory whatever names clients ask for).
const NAME_CACHE_MAX: usize = 8192;

/// Incompatible features a reader must understand, with the name reported
/// when the image uses one we do not implement.
const INCOMPAT_NAMES: [(u32, &str); 14] = [
    (0x0001, "compression"),
    (0x0004, "journal needs recovery"),
    (0x0008, "external journal device"),
    (0x0010, "meta_bg"),
    (0x0040, "extents (ext4)"),
    (0x0080, "64bit"),
    (0x0100, "mmp"),
    (0x0200, "flex_bg"),
    (0x0400, "ea_inode"),
    (0x1000, "dirdata"),
    (0x2000, "csum_seed"),
    (0x4000, "largedir"),
    (0x8000, "inline_data"),
    (0x10000, "encrypt"),
];

fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The type of an inode (the protocol's kinds, `fs_api::FileKind`).
pub use fs_api::FileKind;

/// What `stat` returns: enough for an HTTP server's Content-Length,
/// Last-Modified and ETag (e.g. `"{ino:x}-{generation:x}-{mtime:x}-{size:x}"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Inode number (stable for the life of the image).
    pub ino: u32,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, seconds since the Unix epoch.
    pub mtime: u32,
    /// File type.
    pub kind: FileKind,
    /// The inode's generation number (changes when an inode is reused).
    pub generation: u32,
}

/// An inode as read from the image (only the fields this reader uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// Inode number.
    pub ino: u32,
    /// Type and permission bits.
    pub mode: u16,
    /// Size in bytes (64-bit for regular files, 32-bit otherwise).
    pub size: u64,
    /// Modification time (seconds).
    pub mtime: u32,
    /// `i_flags`.
    pub flags: u32,
    /// `i_generation`.
    pub generation: u32,
    /// 512-byte sectors allocated (`i_blocks`), used to tell fast symlinks.
    pub sectors: u32,
    /// Extended-attribute block (0 if none).
    pub file_acl: u32,
    /// 12 direct, then single-, double- and triple-indirect block pointers.
    pub block: [u32; 15],
}

impl Inode {
    /// The file type from the mode bits.
    pub fn kind(&self) -> FileKind {
        match self.mode & 0xF000 {
            0x8000 => FileKind::File,
            0x4000 => FileKind::Dir,
            0xA000 => FileKind::Symlink,
            _ => FileKind::Other,
        }
    }

    /// The `stat` view of this inode.
    pub fn stat(&self) -> Stat {
        Stat { ino: self.ino, size: self.size, mtime: self.mtime, kind: self.kind(), generation: self.generation }
    }
}

/// One entry of a directory listing (`.` and `..` are not listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name, as bytes (UTF-8 by convention, not checked).
    pub name: Vec<u8>,
    /// Inode the entry points to.
    pub ino: u32,
    /// The type recorded in the entry (`filetype` feature), or read from the
    /// inode when the image has no such field. Untrusted either way: `open`
    /// and `stat` read the inode itself.
    pub kind: FileKind,
}

/// Device traffic counters of a volume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Requests issued to the device.
    pub reads: u64,
    /// Bytes read from the device (metadata and data).
    pub bytes: u64,
    /// Of those, bytes of file data (read straight into cache buffers).
    pub data_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Geometry {
    block_size: u64,
    blocks_count: u64,
    first_data_block: u64,
    inodes_count: u64,
    inodes_per_group: u64,
    inode_size: u64,
    inode_table_blocks: u64,
    groups: u64,
    filetype: bool,
}

/// A mounted, read-only ext2 volume over a [`BlockDevice`].
pub struct Ext2<D> {
    dev: D,
    g: Geometry,
    /// Small metadata cache: (block number, last use, contents). Metadata is
    /// kept out of the IO-Lite file cache, as in the paper (§3: the buffer
    /// cache keeps metadata, file data lives in IO-Lite buffers).
    meta: Vec<(u64, u64, Vec<u8>)>,
    /// Block number -> its slot in `meta`.
    meta_index: BTreeMap<u64, usize>,
    tick: u64,
    /// (directory inode, name) -> inode number: found names.
    names: BTreeMap<(u32, Vec<u8>), u32>,
    stats: DiskStats,
}

impl<D: BlockDevice> Ext2<D> {
    /// Mounts the image on `dev`: reads and checks the superblock. Nothing is
    /// trusted beyond what the checks establish.
    pub fn mount(mut dev: D) -> Result<Self> {
        let dev_size = dev.size();
        if dev_size < SUPERBLOCK_OFFSET + 1024 {
            return Err(Corruption::Truncated.into());
        }
        let mut sb = [0u8; 1024];
        dev.read_at(SUPERBLOCK_OFFSET, &mut sb)?;
        if le16(&sb, 56) != MAGIC {
            return Err(Corruption::BadMagic.into());
        }
        let inodes_count = le32(&sb, 0) as u64;
        let blocks_count = le32(&sb, 4) as u64;
        let first_data_block = le32(&sb, 20) as u64;
        let log_block_size = le32(&sb, 24);
        let blocks_per_group = le32(&sb, 32) as u64;
        let inodes_per_group = le32(&sb, 40) as u64;
        let rev_level = le32(&sb, 76);
        if log_block_size > 6 {
            return Err(Corruption::BadGeometry.into());
        }
        let block_size = 1024u64 << log_block_size;
        let (inode_size, incompat) = match rev_level {
            0 => (128, 0),
            1 => (le16(&sb, 88) as u64, le32(&sb, 96)),
            _ => return Err(FsError::Unsupported("superblock revision > 1")),
        };
        if let Some(&(_, name)) = INCOMPAT_NAMES.iter().find(|(bit, _)| incompat & bit != 0) {
            return Err(FsError::Unsupported(name));
        }
        if incompat & !INCOMPAT_FILETYPE != 0 {
            return Err(FsError::Unsupported("unknown incompatible feature"));
        }
        // Read-only: ro_compat features (sparse_super, large_file, checksums,
        // huge_file...) only constrain writers, so they are all accepted.
        let bits = 8 * block_size;
        let geometry_ok = first_data_block == u64::from(block_size == 1024)
            && blocks_count > first_data_block + 1
            && (1..=bits).contains(&blocks_per_group)
            && (1..=bits).contains(&inodes_per_group)
            && inode_size.is_power_of_two()
            && (128..=block_size).contains(&inode_size)
            && inodes_count >= ROOT_INO as u64;
        if !geometry_ok {
            return Err(Corruption::BadGeometry.into());
        }
        // The whole filesystem must be on the device: this is where a
        // truncated image is caught, and it bounds every later block number.
        if blocks_count.saturating_mul(block_size) > dev_size {
            return Err(Corruption::Truncated.into());
        }
        let groups = (blocks_count - first_data_block).div_ceil(blocks_per_group);
        if groups * inodes_per_group < inodes_count {
            return Err(Corruption::BadGeometry.into());
        }
        let gdt_blocks = (groups * DESC_SIZE).div_ceil(block_size);
        if first_data_block + 1 + gdt_blocks > blocks_count {
            return Err(Corruption::BadGeometry.into());
        }
        let g = Geometry {
            block_size,
            blocks_count,
            first_data_block,
            inodes_count,
            inodes_per_group,
            inode_size,
            inode_table_blocks: (inodes_per_group * inode_size).div_ceil(block_size),
            groups,
            filetype: incompat & INCOMPAT_FILETYPE != 0,
        };
        let mut fs = Self {
            dev,
            g,
            meta: Vec::new(),
            meta_index: BTreeMap::new(),
            tick: 0,
            names: BTreeMap::new(),
            stats: DiskStats::default(),
        };
        let root = fs.inode(ROOT_INO)?;
        if root.kind() != FileKind::Dir {
            return Err(Corruption::RootNotDirectory.into());
        }
        Ok(fs)
    }

    /// Filesystem block size in bytes.
    pub fn block_size(&self) -> usize {
        self.g.block_size as usize
    }

    /// Device traffic so far.
    pub fn disk_stats(&self) -> DiskStats {
        self.stats
    }

    /// The device (e.g. to inspect a test device).
    pub fn device(&self) -> &D {
        &self.dev
    }

    fn check_block(&self, blk: u64) -> Result<()> {
        if blk == 0 || blk >= self.g.blocks_count {
            return Err(Corruption::BlockOutOfRange.into());
        }
        Ok(())
    }

    /// A metadata block, through the small metadata cache.
    fn meta_block(&mut self, blk: u64) -> Result<&[u8]> {
        self.check_block(blk)?;
        self.tick += 1;
        let tick = self.tick;
        if let Some(&i) = self.meta_index.get(&blk) {
            self.meta[i].1 = tick;
            return Ok(&self.meta[i].2);
        }
        let bs = self.g.block_size as usize;
        let slot = if self.meta.len() < META_SLOTS {
            self.meta.push((u64::MAX, 0, vec![0; bs]));
            self.meta.len() - 1
        } else {
            // Least recently used slot; there is at least one.
            (0..self.meta.len()).min_by_key(|&i| self.meta[i].1).unwrap_or(0)
        };
        // Mark the slot invalid first, so a failed read leaves no stale entry.
        let old = core::mem::replace(&mut self.meta[slot].0, u64::MAX);
        self.meta_index.remove(&old);
        let off = blk * self.g.block_size;
        self.dev.read_at(off, &mut self.meta[slot].2)?;
        self.stats.reads += 1;
        self.stats.bytes += bs as u64;
        self.meta[slot].0 = blk;
        self.meta[slot].1 = tick;
        self.meta_index.insert(blk, slot);
        Ok(&self.meta[slot].2)
    }

    /// Reads inode `ino`, checking its number, its group descriptor and that
    /// it is in use.
    pub fn inode(&mut self, ino: u32) -> Result<Inode> {
        let g = self.g;
        let n = ino as u64;
        if n == 0 || n > g.inodes_count {
            return Err(Corruption::InodeOutOfRange.into());
        }
        let group = (n - 1) / g.inodes_per_group;
        let index = (n - 1) % g.inodes_per_group;
        if group >= g.groups {
            return Err(Corruption::InodeOutOfRange.into());
        }
        let dpos = group * DESC_SIZE;
        let dblk = g.first_data_block + 1 + dpos / g.block_size;
        let doff = (dpos % g.block_size) as usize;
        let table = le32(self.meta_block(dblk)?, doff + 8) as u64;
        if table == 0 || table + g.inode_table_blocks > g.blocks_count {
            return Err(Corruption::BadGroupDescriptor.into());
        }
        let ipos = index * g.inode_size;
        let iblk = table + ipos / g.block_size;
        let ioff = (ipos % g.block_size) as usize;
        let b = &self.meta_block(iblk)?[ioff..ioff + 128];
        let mode = le16(b, 0);
        if mode == 0 {
            return Err(Corruption::FreeInode.into());
        }
        let mut block = [0u32; 15];
        for (i, p) in block.iter_mut().enumerate() {
            *p = le32(b, 40 + 4 * i);
        }
        let mut inode = Inode {
            ino,
            mode,
            size: le32(b, 4) as u64,
            mtime: le32(b, 16),
            flags: le32(b, 32),
            generation: le32(b, 100),
            sectors: le32(b, 28),
            file_acl: le32(b, 104),
            block,
        };
        if inode.kind() == FileKind::File {
            // The true size, even beyond MAX_FILE_SIZE: `stat` and listings
            // report it; `Fs::open` and `read_data` refuse such files.
            inode.size |= (le32(b, 108) as u64) << 32;
        }
        if inode.flags & FL_EXTENTS != 0 {
            return Err(FsError::Unsupported("extents (ext4)"));
        }
        if inode.flags & FL_INLINE_DATA != 0 {
            return Err(FsError::Unsupported("inline_data"));
        }
        Ok(inode)
    }

    /// Where inode `ino` is stored: (block, byte offset in the block).
    /// Lets tests corrupt a specific inode.
    pub fn inode_location(&mut self, ino: u32) -> Result<(u64, usize)> {
        let g = self.g;
        let n = ino as u64;
        if n == 0 || n > g.inodes_count {
            return Err(Corruption::InodeOutOfRange.into());
        }
        let group = (n - 1) / g.inodes_per_group;
        let dpos = group * DESC_SIZE;
        let dblk = g.first_data_block + 1 + dpos / g.block_size;
        let table = le32(self.meta_block(dblk)?, (dpos % g.block_size) as usize + 8) as u64;
        let ipos = ((n - 1) % g.inodes_per_group) * g.inode_size;
        Ok((table + ipos / g.block_size, (ipos % g.block_size) as usize))
    }

    /// Physical block of logical block `lblk` of `inode`, or 0 for a hole.
    /// At most three indirect blocks are read, so a block map that points
    /// back into itself cannot make this loop.
    pub fn bmap(&mut self, inode: &Inode, lblk: u64) -> Result<u64> {
        let p = self.g.block_size / 4; // pointers per indirect block
        if lblk < N_DIRECT {
            return self.checked_ptr(inode.block[lblk as usize]);
        }
        let mut l = lblk - N_DIRECT;
        let (root, depth) = if l < p {
            (inode.block[12], 0u32)
        } else if l - p < p * p {
            l -= p;
            (inode.block[13], 1)
        } else if l - p - p * p < p * p * p {
            l -= p + p * p;
            (inode.block[14], 2)
        } else {
            return Err(Corruption::BlockMapTooLarge.into());
        };
        // The index at each level is a base-`p` digit of `l`, most
        // significant first.
        let mut cur = root as u64;
        for level in (0..=depth).rev() {
            if cur == 0 {
                return Ok(0); // the whole subtree is a hole
            }
            let idx = (l / p.pow(level)) % p;
            let b = self.meta_block(cur)?;
            cur = le32(b, idx as usize * 4) as u64;
        }
        self.checked_ptr(cur as u32)
    }

    fn checked_ptr(&self, p: u32) -> Result<u64> {
        let p = p as u64;
        if p != 0 && p >= self.g.blocks_count {
            return Err(Corruption::BlockOutOfRange.into());
        }
        Ok(p)
    }

    /// Fills `dst` with file data starting at `offset`, which must be a
    /// multiple of the block size. Whole blocks are read (`dst` should be
    /// rounded up to the block size); holes and blocks past the end of the
    /// file read as zeros. Physically contiguous blocks are coalesced into
    /// one device request, and the device writes straight into `dst` (see
    /// [`crate::device`] for why this matters for DMA).
    pub fn read_data(&mut self, inode: &Inode, offset: u64, dst: &mut [u8]) -> Result<()> {
        let bs = self.g.block_size;
        if inode.size > MAX_FILE_SIZE {
            return Err(FsError::TooLarge);
        }
        if !offset.is_multiple_of(bs) {
            return Err(FsError::Iolite(iolite::Error::InvalidArgument));
        }
        let file_blocks = inode.size.div_ceil(bs);
        let first = offset / bs;
        let nblocks = (dst.len() as u64).div_ceil(bs);
        let mut i = 0u64;
        while i < nblocks {
            let lblk = first + i;
            let pblk = if lblk < file_blocks { self.bmap(inode, lblk)? } else { 0 };
            let start = (i * bs) as usize;
            if pblk == 0 {
                let end = (start + bs as usize).min(dst.len());
                dst[start..end].fill(0);
                i += 1;
                continue;
            }
            // Extend the run while the next logical block is the next
            // physical block.
            let mut run = 1u64;
            while i + run < nblocks && first + i + run < file_blocks && self.bmap(inode, first + i + run)? == pblk + run
            {
                run += 1;
            }
            let end = ((i + run) * bs).min(dst.len() as u64) as usize;
            self.dev.read_at(pblk * bs, &mut dst[start..end])?;
            self.stats.reads += 1;
            self.stats.bytes += (end - start) as u64;
            self.stats.data_bytes += (end - start) as u64;
            i += run;
        }
        Ok(())
    }

    /// Calls `f(ino, entry type byte, name)` for each used entry of the
    /// directory `dir` (including `.` and `..`), in disk order, until `f`
    /// returns `true`. Every entry is checked before `f` sees it.
    fn scan_dir(&mut self, dir: &Inode, mut f: impl FnMut(u32, u8, &[u8]) -> bool) -> Result<()> {
        if dir.kind() != FileKind::Dir {
            return Err(FsError::NotADirectory);
        }
        let bs = self.g.block_size;
        // Whole blocks, and no more blocks than the filesystem has: a
        // corrupt size cannot make a scan longer than the image.
        if !dir.size.is_multiple_of(bs) || dir.size / bs > self.g.blocks_count {
            return Err(Corruption::BadDirectory.into());
        }
        let filetype = self.g.filetype;
        for lblk in 0..dir.size / bs {
            let pblk = self.bmap(dir, lblk)?;
            if pblk == 0 {
                return Err(Corruption::BadDirectory.into());
            }
            let b = self.meta_block(pblk)?;
            let bs = b.len();
            let mut off = 0usize;
            while off < bs {
                if off + 8 > bs {
                    return Err(Corruption::BadDirEntry.into());
                }
                let ino = le32(b, off);
                let mut rec_len = le16(b, off + 4) as usize;
                if bs == 65536 && (rec_len == 0 || rec_len == 65535) {
                    rec_len = 65536; // how 64 KiB blocks encode a full-block entry
                }
                let (name_len, ftype) =
                    if filetype { (b[off + 6] as usize, b[off + 7]) } else { (le16(b, off + 6) as usize, 0) };
                if rec_len < 8 || !rec_len.is_multiple_of(4) || off + rec_len > bs {
                    return Err(Corruption::BadDirEntry.into());
                }
                if ino != 0 {
                    if name_len == 0 || name_len > MAX_NAME_LEN || 8 + name_len > rec_len {
                        return Err(Corruption::BadDirEntry.into());
                    }
                    let name = &b[off + 8..off + 8 + name_len];
                    if name.iter().any(|&c| c == b'/' || c == 0) {
                        return Err(Corruption::BadDirEntry.into());
                    }
                    if f(ino, ftype, name) {
                        return Ok(());
                    }
                }
                off += rec_len;
            }
        }
        Ok(())
    }

    /// Looks `name` up in directory `dir`: the inode number, or `NotFound`.
    pub fn lookup(&mut self, dir: &Inode, name: &[u8]) -> Result<u32> {
        if name.len() > MAX_NAME_LEN {
            return Err(FsError::NameTooLong);
        }
        let key = (dir.ino, name.to_vec());
        if let Some(&ino) = self.names.get(&key) {
            return Ok(ino);
        }
        let mut found = None;
        self.scan_dir(dir, |ino, _, n| {
            if n == name {
                found = Some(ino);
            }
            found.is_some()
        })?;
        let ino = found.ok_or(FsError::NotFound)?;
        if self.names.len() >= NAME_CACHE_MAX {
            self.names.clear();
        }
        self.names.insert(key, ino);
        Ok(ino)
    }

    /// Lists directory `dir` (without `.` and `..`). The listing is bounded
    /// by the directory's size.
    pub fn read_dir(&mut self, dir: &Inode) -> Result<Vec<DirEntry>> {
        let mut raw: Vec<(u32, u8, Vec<u8>)> = Vec::new();
        self.scan_dir(dir, |ino, t, name| {
            if name != b"." && name != b".." {
                raw.push((ino, t, name.to_vec()));
            }
            false
        })?;
        let mut out = Vec::with_capacity(raw.len());
        for (ino, t, name) in raw {
            let kind = match t {
                1 => FileKind::File,
                2 => FileKind::Dir,
                7 => FileKind::Symlink,
                0 if !self.g.filetype => self.inode(ino)?.kind(),
                _ => FileKind::Other,
            };
            out.push(DirEntry { name, ino, kind });
        }
        Ok(out)
    }

    /// The target of a symlink. Fast symlinks (target < 60 bytes, no data
    /// block) live in the block-pointer array; others in their first block.
    pub fn read_link(&mut self, link: &Inode) -> Result<Vec<u8>> {
        if link.kind() != FileKind::Symlink {
            return Err(FsError::NotFound);
        }
        let len = link.size as usize;
        if len == 0 || len >= MAX_PATH_LEN || link.size > self.g.block_size {
            return Err(Corruption::BadSymlink.into());
        }
        let acl_sectors = if link.file_acl != 0 { (self.g.block_size / 512) as u32 } else { 0 };
        let target = if len < 60 && link.sectors == acl_sectors {
            let mut raw = [0u8; 60];
            for (i, p) in link.block.iter().enumerate() {
                raw[4 * i..4 * i + 4].copy_from_slice(&p.to_le_bytes());
            }
            raw[..len].to_vec()
        } else {
            let blk = self.bmap(link, 0)?;
            if blk == 0 {
                return Err(Corruption::BadSymlink.into());
            }
            self.meta_block(blk)?[..len].to_vec()
        };
        if target.contains(&0) {
            return Err(Corruption::BadSymlink.into());
        }
        Ok(target)
    }

    /// Resolves `path` from the root (see [`crate::path`]): `.`/`..`
    /// lexically, clamped at the root. Symlinks are followed (the last
    /// component only if `follow_last`), at most [`MAX_SYMLINK_HOPS`] in
    /// total; an absolute target restarts at the *filesystem* root and `..`
    /// in a target is clamped there too, so a symlink can never lead outside
    /// the image.
    pub fn resolve(&mut self, path: &[u8], follow_last: bool) -> Result<Inode> {
        if path.len() > MAX_PATH_LEN {
            return Err(FsError::NameTooLong);
        }
        let root = self.inode(ROOT_INO)?;
        // Directories from the root down to the current one.
        let mut stack: Vec<Inode> = Vec::new();
        // Components still to resolve, last one first (so `pop` gives the next).
        let mut pending: Vec<Vec<u8>> = path.split(|&b| b == b'/').rev().map(|c| c.to_vec()).collect();
        let mut hops = 0u32;
        while let Some(c) = pending.pop() {
            match c.as_slice() {
                b"" | b"." => continue,
                b".." => {
                    // `file/..` is an error as in POSIX, not a way back up.
                    if stack.last().is_some_and(|top| top.kind() != FileKind::Dir) {
                        return Err(FsError::NotADirectory);
                    }
                    stack.pop();
                    continue;
                }
                _ => {}
            }
            let cur = stack.last().unwrap_or(&root);
            if cur.kind() != FileKind::Dir {
                return Err(FsError::NotADirectory);
            }
            let ino = self.lookup(cur, &c)?;
            let child = self.inode(ino)?;
            let more = pending.iter().any(|c| !c.is_empty() && c != b".");
            if child.kind() == FileKind::Symlink && (follow_last || more) {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(FsError::TooManySymlinks);
                }
                let target = self.read_link(&child)?;
                if target.first() == Some(&b'/') {
                    stack.clear();
                }
                pending.extend(target.split(|&b| b == b'/').rev().map(|c| c.to_vec()));
                continue;
            }
            stack.push(child);
        }
        Ok(stack.pop().unwrap_or(root))
    }

    /// Visits every object below directory `start` depth-first, calling
    /// `f(path, inode)` for each (symlinks are reported, not followed).
    /// Each directory is entered at most once: a directory reachable twice
    /// (a hard-linked directory, a loop) is [`Corruption::DirectoryLoop`].
    pub fn walk(&mut self, start: &Inode, mut f: impl FnMut(&[u8], &Inode) -> Result<()>) -> Result<()> {
        let mut seen = BTreeSet::new();
        seen.insert(start.ino);
        let mut todo: Vec<(Vec<u8>, Inode)> = vec![(Vec::new(), start.clone())];
        while let Some((path, dir)) = todo.pop() {
            for e in self.read_dir(&dir)? {
                let inode = self.inode(e.ino)?;
                let mut p = path.clone();
                p.push(b'/');
                p.extend_from_slice(&e.name);
                f(&p, &inode)?;
                if inode.kind() == FileKind::Dir {
                    if !seen.insert(inode.ino) {
                        return Err(Corruption::DirectoryLoop.into());
                    }
                    todo.push((p, inode));
                }
            }
        }
        Ok(())
    }
}
