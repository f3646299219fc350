//! Where static files come from, and what time it is.

use iolite::Aggregate;

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory (served through its `index.html`).
    Dir,
    /// Anything else (never served: 403).
    Other,
}

/// What the server needs to know about a file: Content-Length,
/// Last-Modified, and the ETag `"ino-generation-mtime-size"` (hex).
/// Mirrors `fs::Stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Inode number.
    pub ino: u32,
    /// The inode's generation.
    pub generation: u32,
    /// Last modification, seconds since the epoch.
    pub mtime: u64,
    /// Size in bytes.
    pub size: u64,
    /// File type.
    pub kind: Kind,
}

/// Why a file cannot be served; each maps to a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceError {
    /// No such file (404). fs: `NotFound`, `NotADirectory`, `NameTooLong`.
    NotFound,
    /// Exists but may not be served (403). fs: `TooManySymlinks`, special files.
    Forbidden,
    /// The path names a directory (the server then tries `index.html`).
    IsDirectory,
    /// Out of memory or handles, try again later (503). fs: `NoMemory`, `TooManyOpen`.
    Busy,
    /// Anything else: I/O error, corrupt image, too large (500).
    Failed,
}

impl SourceError {
    /// The HTTP status for this error.
    pub fn status(self) -> u16 {
        match self {
            SourceError::NotFound => 404,
            SourceError::Forbidden | SourceError::IsDirectory => 403,
            SourceError::Busy => 503,
            SourceError::Failed => 500,
        }
    }
}

/// The file system as the web server sees it. On target: the fs client
/// (open/stat RPC, data as aggregates on the IO-Lite channel, by
/// reference). In tests: an in-memory tree.
pub trait FileSource<'d> {
    /// An open file.
    type File;
    /// Opens a regular file by its normalised path (`/a/b.html`) and
    /// returns its metadata. A directory is `Err(IsDirectory)`.
    fn open(&mut self, path: &str) -> Result<(Self::File, FileStat), SourceError>;
    /// Reads at most `max` bytes at `offset` **by reference** (the file
    /// cache's buffers). May return fewer bytes (at most
    /// `iolite::MAX_SLICES` slices); empty means end of file.
    fn read(&mut self, file: &Self::File, offset: u64, max: usize) -> Result<Aggregate<'d>, SourceError>;
    /// Closes a file (default: nothing to do).
    fn close(&mut self, file: Self::File) {
        let _ = file;
    }
}

/// Time, for `Date` and for timeouts.
pub trait Clock {
    /// Milliseconds on a monotonic clock (timeouts).
    fn now_ms(&self) -> u64;
    /// Seconds since the Unix epoch (the `Date` header).
    fn unix_secs(&self) -> u64;
}
