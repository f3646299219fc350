//! httpd's file source: the fs component, through its `FsIoLite` RPC
//! (`stat`, `open`, `read`, `close`; for a GET of a whole file
//! `open_read`, which stats, opens and queues the first `READ_MAX` bytes
//! in one call, and keeps no handle for a file queued whole) and the
//! `fs_channel` on which a read arrives, as aggregates of the file cache's
//! buffers, by reference (posix mode copies them at our end, counted in
//! `copied`). Each call is two address-space switches, and under TCG each
//! switch flushes QEMU's software TLB: a small file's GET costs one call
//! instead of four.
//!
//! fs is restartable: every call goes through `fs_api::client::Client`,
//! which notices a death of fs (the system events page), resets us at the
//! new incarnation and reattaches (`reattach`: what the dead incarnation
//! granted us is forgotten and what we still use of it counts as tainted,
//! so the component confirms the death only once netstack and the NIC gave
//! those buffers back; the channel is attached afresh), reopens the files
//! of responses in progress by path and retries the read that was in
//! flight. A response whose headers went out goes on byte-exact.

use component_runtime::warn;
use fs_api::client::{Client, OpenFile};
use fs_api::{ErrorCode as FsErr, FileKind};
use httpd::{FetchedAhead, FileRefs, FileRefsStats, FileSource, FileStat, Kind, SourceError};
use iolite::{Aggregate, Attach, ChannelRx, Copier, Domain};

use super::{glue, FS, MAX_PATH, READ_MAX};

/// A file being served: one open at fs (with what `open_read` fetched of
/// it that no read has taken yet), or one the file cache's references
/// kept here hold whole (`FileRefs`: no call to fs at all).
pub enum FsFile {
    Open(OpenFile, FetchedAhead<'static>),
    Kept(Aggregate<'static>),
}

/// fs's calls through the RPC glue.
pub struct Glue {
    /// fs's record in the system events page.
    pub(super) fs_index: Option<usize>,
}

fs_api::rpc_over_glue!(Glue, glue::fs, component_runtime::events::page);

/// Attaches our end of the fs channel (fs has set it up: it answered a
/// call after it did).
pub fn attach(d: &'static Domain) -> ChannelRx<'static> {
    // SAFETY: the fs_channel dataport, mapped read-write for our lifetime;
    // fs initialised it before answering; we are its only receiver (the
    // end this replaces is dropped).
    unsafe {
        ChannelRx::attach(Attach {
            domain: d,
            peer: FS,
            region: glue_rt::pools::rw(glue::fs_channel::VADDR, glue::fs_channel::SIZE),
            geometry: iolite::Geometry { fwd: fs_api::FWD_CAP, rel: fs_api::REL_CAP },
        })
    }
    .expect("fs channel")
}

/// After a death of fs: forget what the dead incarnation granted us (what
/// we still use is tainted until it comes back from netstack), take its
/// slot back for the new one, and attach to the channel it set up.
fn reattach(d: &'static Domain, rx: &mut ChannelRx<'static>, refs: &mut FileRefs<'static>) {
    // What we keep of the dead incarnation's buffers goes first: the death
    // is confirmed only once we hold none of them (and the new incarnation
    // may read a disk that changed meanwhile).
    refs.clear();
    let _ = d.peer_failed(FS);
    let _ = d.peer_restarted(FS);
    *rx = attach(d);
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
    /// The calls, surviving restarts of fs.
    pub(super) client: Client<Glue>,
    /// Whole small files by reference (`httpd::filerefs`); its limits are
    /// zero where file data is copied at our end (posix).
    pub(super) refs: FileRefs<'static>,
}

impl FsSource {
    /// Reconnects now if fs died (the component calls it when the events
    /// page says so, so that the taint is counted before it confirms).
    pub fn reconnect(&mut self) -> bool {
        let (d, rx, refs) = (self.d, &mut self.rx, &mut self.refs);
        self.client.reconnect(&mut || reattach(d, rx, refs))
    }

    /// The kept files' counters, count and bytes.
    pub fn refs(&self) -> (FileRefsStats, usize, usize) {
        (self.refs.stats(), self.refs.len(), self.refs.bytes())
    }
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
        if super::TEST_HOOKS && path == "/.fault/httpd" {
            component_runtime::log!("test hook: faulting");
            // SAFETY: none needed; the write faults (0x10 is below every
            // mapping) and the supervisor restarts us.
            unsafe { core::ptr::write_volatile(0x10 as *mut u64, 0xdead) };
        }
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
        let (d, rx, refs) = (self.d, &mut self.rx, &mut self.refs);
        let file = self.client.open(path, &mut || reattach(d, rx, refs)).map_err(|e| fs_error(e.ret(), false))?;
        let size = file.size();
        Ok((FsFile::Open(file, FetchedAhead::none()), FileStat { ino, generation, mtime, size, kind }))
    }

    fn open_to_read(&mut self, path: &str, first: usize) -> Result<(FsFile, FileStat), SourceError> {
        if super::TEST_HOOKS && path == "/.fault/httpd" || path.len() > MAX_PATH {
            return self.open(path);
        }
        if let Some((stat, agg)) = self.refs.get(path) {
            return Ok((FsFile::Kept(agg), stat));
        }
        self.tag += 1;
        let tag = self.tag;
        let (d, rx, refs) = (self.d, &mut self.rx, &mut self.refs);
        let len = (first as u64).min(READ_MAX);
        let opened = self.client.open_read(path, len, tag, &mut || reattach(d, rx, refs));
        let (file, o) = opened.map_err(|e| match e {
            FsErr::NotAFile => SourceError::IsDirectory,
            e => {
                let e = fs_error(e.ret(), false);
                if e == SourceError::Busy {
                    // fs is short of buffers or handles: let go of the
                    // pages we keep, so its cache can reuse them.
                    self.refs.clear();
                }
                e
            }
        })?;
        let fetched = self.receive(tag, o.queued);
        let stat = FileStat { ino: o.ino, generation: o.generation, mtime: o.mtime, size: o.size, kind: Kind::File };
        if let Ok(a) = &fetched {
            // Kept only if it came whole (`put` checks the size).
            self.refs.put(path, stat, a);
        }
        // What did not arrive (fs died meanwhile) is read again at its turn.
        let fetched = fetched.map_or_else(|_| FetchedAhead::none(), |a| FetchedAhead::new(0, a));
        Ok((FsFile::Open(file, fetched), stat))
    }

    fn read(&mut self, file: &FsFile, offset: u64, max: usize) -> Result<Aggregate<'static>, SourceError> {
        let (file, fetched) = match file {
            FsFile::Kept(agg) => {
                // By reference, a new hold on the same buffers.
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(agg.len());
                let len = max.min(agg.len() - start);
                return agg.range(start, len).map_err(|_| SourceError::Busy);
            }
            FsFile::Open(file, fetched) => (file, fetched),
        };
        if let Some(fetched) = fetched.take(offset, max) {
            return Ok(fetched);
        }
        self.tag += 1;
        let tag = self.tag;
        let len = (max as u64).min(READ_MAX);
        let (d, rx, refs) = (self.d, &mut self.rx, &mut self.refs);
        let n = match self.client.read(file, offset, len, tag, &mut || reattach(d, rx, refs)) {
            Ok(n) => n,
            Err(e) => return Err(fs_error(e.ret(), false)),
        };
        self.receive(tag, n)
    }

    fn close(&mut self, file: FsFile) {
        if let FsFile::Open(file, _) = file {
            self.client.close(file);
        }
    }
}

impl FsSource {
    /// Receives the `n` bytes fs queued on the channel with `tag` (fewer
    /// if the channel went stale: fs died after queueing them).
    fn receive(&mut self, tag: u64, n: u64) -> Result<Aggregate<'static>, SourceError> {
        let n = n as i64;
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
}
