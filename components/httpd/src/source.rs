//! Where static files come from, and what time it is.

use core::cell::Cell;

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
    /// As [`FileSource::open`], for a caller that reads the file from the
    /// start next: a source may fetch up to `first` bytes of it with the
    /// same request (fs: `open_read`, one call instead of three for a
    /// small file), which the next [`FileSource::read`] at offset 0 then
    /// returns without asking again.
    fn open_to_read(&mut self, path: &str, first: usize) -> Result<(Self::File, FileStat), SourceError> {
        let _ = first;
        self.open(path)
    }
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

/// Bytes a source fetched with the open ([`FileSource::open_to_read`]),
/// kept with the file until the read they answer.
pub struct FetchedAhead<'d>(Cell<Option<(u64, Aggregate<'d>)>>);

impl<'d> FetchedAhead<'d> {
    /// `agg`, the file's bytes from `offset` on (nothing if it is empty).
    pub fn new(offset: u64, agg: Aggregate<'d>) -> Self {
        Self(Cell::new((!agg.is_empty()).then_some((offset, agg))))
    }

    /// Nothing fetched.
    pub fn none() -> Self {
        Self(Cell::new(None))
    }

    /// The read of at most `max` bytes at `offset`, if the fetched bytes
    /// start there (the rest stays for the next read); `None` otherwise,
    /// and then what was fetched is dropped: reads go in order, so it
    /// would not be wanted any more.
    pub fn take(&self, offset: u64, max: usize) -> Option<Aggregate<'d>> {
        let (at, mut agg) = self.0.take()?;
        if at != offset || max == 0 {
            return None;
        }
        if agg.len() > max {
            // A split inside the aggregate cannot fail; were it to, the
            // rest is read again.
            if let Ok(rest) = agg.split_off(max) {
                self.0.set(Some((at + max as u64, rest)));
            } else {
                agg.truncate(max);
            }
        }
        Some(agg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{content, domain, make, FS_POOL};

    #[test]
    fn fetched_bytes_answer_the_reads_they_start_in_pieces() {
        let d = domain();
        let bytes = content(10_000, 3);
        let f = FetchedAhead::new(0, make(d, FS_POOL, &bytes));
        assert!(f.take(100, 4096).is_none(), "not where the read is");
        let f = FetchedAhead::new(0, make(d, FS_POOL, &bytes));
        let a = f.take(0, 4096).unwrap();
        assert!(a.eq_bytes(&bytes[..4096]));
        let b = f.take(4096, 100_000).unwrap();
        assert!(b.eq_bytes(&bytes[4096..]));
        assert!(f.take(10_000, 10).is_none(), "all taken");
        assert!(FetchedAhead::new(0, iolite::Aggregate::new(d)).take(0, 10).is_none());
        assert!(FetchedAhead::none().take(0, 10).is_none());
    }
}
