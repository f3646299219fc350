//! httpd's file source: the fs component, through its `FsIoLite` RPC
//! (`stat`, `open`, `read`, `close`) and the `fs_channel` on which a read
//! arrives, as aggregates of the file cache's buffers, by reference
//! (posix mode copies them at our end, counted in `copied`).

use component_runtime::warn;
use fs_api::{ErrorCode as FsErr, FileKind};
use httpd::{FileSource, FileStat, Kind, SourceError};
use iolite::{Aggregate, ChannelRx, Copier, Domain};

use super::{glue, MAX_PATH, READ_MAX};

/// An open file of fs.
pub struct FsFile {
    handle: u32,
}

/// `FileSource` over the fs component.
pub struct FsSource {
    pub(super) d: &'static Domain,
    pub(super) rx: ChannelRx<'static>,
    /// posix copies file data at our end (flash and iolite do not).
    pub(super) copier: Copier<'static>,
    pub(super) tag: u64,
    /// Bytes copied on the channel (posix mode copies at our end).
    pub(super) copied: u64,
}

fn fs_error(e: i64, dir: bool) -> SourceError {
    let code = fs_api::ErrorCode::ALL.iter().copied().find(|c| c.ret() == e);
    match code {
        Some(FsErr::NotFound | FsErr::NotADirectory | FsErr::NameTooLong) => SourceError::NotFound,
        Some(FsErr::NotAFile) if dir => SourceError::IsDirectory,
        Some(FsErr::NotAFile | FsErr::TooManySymlinks | FsErr::Denied) => SourceError::Forbidden,
        Some(FsErr::NoMemory | FsErr::TooManyOpen | FsErr::ChannelBusy) => SourceError::Busy,
        _ => SourceError::Failed,
    }
}

impl FileSource<'static> for FsSource {
    type File = FsFile;

    fn open(&mut self, path: &str) -> Result<(FsFile, FileStat), SourceError> {
        if path.len() > MAX_PATH {
            // Longer than a path argument of the RPC can be (fs would say
            // NameTooLong for any real file anyway).
            return Err(SourceError::NotFound);
        }
        let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
        let r = glue::fs::stat(path, &mut size, &mut mtime, &mut kind, &mut ino, &mut generation);
        if r < 0 {
            return Err(fs_error(r.into(), false));
        }
        let kind = match fs_api::kind_from_code(kind) {
            FileKind::File => Kind::File,
            FileKind::Dir => return Err(SourceError::IsDirectory),
            FileKind::Symlink | FileKind::Other => Kind::Other,
        };
        if kind == Kind::Other {
            return Err(SourceError::Forbidden);
        }
        let (mut osize, mut oino) = (0, 0);
        let h = glue::fs::open(path, &mut osize, &mut oino);
        if h < 0 {
            return Err(fs_error(h, false));
        }
        Ok((FsFile { handle: h as u32 }, FileStat { ino, generation, mtime, size: osize, kind }))
    }

    fn read(&mut self, file: &FsFile, offset: u64, max: usize) -> Result<Aggregate<'static>, SourceError> {
        self.tag += 1;
        let tag = self.tag;
        let len = (max as u64).min(READ_MAX);
        let n = glue::fs::read(file.handle, offset, len, tag);
        if n < 0 {
            return Err(fs_error(n, false));
        }
        let mut out = Aggregate::new(self.d);
        if n == 0 {
            return Ok(out);
        }
        // fs queued the range before answering: it is in the ring now.
        loop {
            let before = self.d.stats().bytes_copied;
            let r = self.copier.recv(&mut self.rx);
            self.copied += self.d.stats().bytes_copied - before;
            match r {
                Ok(Some(m)) if m.tag == tag => {
                    if let Err((_, rest)) = out.append(m.agg) {
                        // Cannot happen with READ_MAX; keep what fits.
                        drop(rest);
                        break;
                    }
                    if out.len() as i64 >= n {
                        break;
                    }
                }
                Ok(Some(_)) => {} // a stale message of an earlier read
                Ok(None) => break,
                Err(e) => {
                    warn!("fs channel: {e:?}");
                    if out.is_empty() {
                        return Err(SourceError::Busy);
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    fn close(&mut self, file: FsFile) {
        glue::fs::close(file.handle);
    }
}
