//! Typed errors. Everything read from the disk is untrusted, so every way an
//! image can be wrong has a name here, and none of them is a panic.

use core::fmt;

/// A failure of the block device itself (not of the data on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoError {
    /// The request lies (partly) outside the device.
    OutOfRange,
    /// The device reported an error; the code is the driver's (e.g. the
    /// virtio-blk status byte).
    Device(u32),
}

/// How an image is corrupt. Each variant names the check that failed, so a
/// log line says what is wrong with the image rather than just "bad".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    /// The device is smaller than the superblock says the filesystem is
    /// (or too small to hold a superblock at all).
    Truncated,
    /// The superblock magic is not 0xEF53: not an ext2 filesystem.
    BadMagic,
    /// Superblock geometry is inconsistent (block size, group sizes, counts).
    BadGeometry,
    /// A group descriptor points outside the filesystem.
    BadGroupDescriptor,
    /// An inode number is 0 or beyond the inode count.
    InodeOutOfRange,
    /// A directory entry points at an unused inode (mode 0).
    FreeInode,
    /// A block pointer points past the end of the filesystem.
    BlockOutOfRange,
    /// A file needs more blocks than a triple-indirect map can address.
    BlockMapTooLarge,
    /// A directory entry's lengths are inconsistent, or its name holds '/' or NUL.
    BadDirEntry,
    /// A directory has a size that is not whole blocks, or a hole.
    BadDirectory,
    /// The root inode is not a directory.
    RootNotDirectory,
    /// A directory is reachable from itself (found by [`crate::Fs::walk`]).
    DirectoryLoop,
    /// A symlink target is empty, too long or contains NUL.
    BadSymlink,
}

/// Every error of the filesystem and the file cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsError {
    /// No such file or directory.
    NotFound,
    /// The object exists but is not a regular file (open, read).
    NotAFile,
    /// A path component that must be a directory is not one (or list_dir
    /// on a non-directory).
    NotADirectory,
    /// The file is larger than [`crate::MAX_FILE_SIZE`] (4 GiB).
    TooLarge,
    /// A name is longer than 255 bytes or a path longer than [`crate::MAX_PATH_LEN`].
    NameTooLong,
    /// More than [`crate::MAX_SYMLINK_HOPS`] symlinks while resolving one path.
    TooManySymlinks,
    /// The block device failed.
    Io(IoError),
    /// The image is corrupt.
    Corrupt(Corruption),
    /// The image uses a feature this read-only ext2 reader does not
    /// implement (extents, 64-bit, journal recovery...). Named, so the
    /// build can be told which `mke2fs` option to drop.
    Unsupported(&'static str),
    /// The cache's pool has no room even after evicting everything it could.
    NoMemory,
    /// An IO-Lite operation failed (e.g. the private copy pool is missing).
    Iolite(iolite::Error),
}

impl From<IoError> for FsError {
    fn from(e: IoError) -> Self {
        FsError::Io(e)
    }
}

impl From<Corruption> for FsError {
    fn from(c: Corruption) -> Self {
        FsError::Corrupt(c)
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::Corrupt(c) => write!(f, "corrupt filesystem: {c:?}"),
            FsError::Unsupported(what) => write!(f, "unsupported filesystem feature: {what}"),
            FsError::Io(e) => write!(f, "I/O error: {e:?}"),
            other => fmt::Debug::fmt(other, f),
        }
    }
}

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, FsError>;

impl From<FsError> for fs_api::ErrorCode {
    fn from(e: FsError) -> Self {
        use fs_api::ErrorCode;
        match e {
            FsError::NotFound => ErrorCode::NotFound,
            FsError::NotAFile => ErrorCode::NotAFile,
            FsError::NotADirectory => ErrorCode::NotADirectory,
            FsError::TooLarge => ErrorCode::TooLarge,
            FsError::NameTooLong => ErrorCode::NameTooLong,
            FsError::TooManySymlinks => ErrorCode::TooManySymlinks,
            FsError::Io(_) => ErrorCode::Io,
            FsError::Corrupt(_) => ErrorCode::Corrupt,
            FsError::Unsupported(_) => ErrorCode::Unsupported,
            FsError::NoMemory | FsError::Iolite(iolite::Error::PoolExhausted) => ErrorCode::NoMemory,
            FsError::Iolite(_) => ErrorCode::Io,
        }
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;
    use fs_api::ErrorCode;

    #[test]
    fn errors_map_onto_the_wire_codes() {
        assert_eq!(ErrorCode::from(FsError::NotFound).ret(), -1);
        assert_eq!(ErrorCode::from(FsError::Iolite(iolite::Error::PoolExhausted)), ErrorCode::NoMemory);
        assert_eq!(ErrorCode::from(FsError::Corrupt(Corruption::BadMagic)), ErrorCode::Corrupt);
    }
}
