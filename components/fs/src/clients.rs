//! What fs keeps per client: its own open-file table and its own quota of
//! buffers, both sized by the assembly (`fs.client_files`,
//! `fs.client_quota`), so that one client exhausting its share gets an
//! error and the others are unaffected: a CGI that opens files in a loop,
//! or reads and keeps every buffer, cannot starve the web server.
//!
//! * [`OpenFiles`]: one table per client; handles index the caller's own
//!   table, so a client can neither use nor close another's files, and a
//!   full table is [`ErrorCode::TooManyOpen`] for that client only.
//! * The quota is the IO-Lite one (`Domain::set_quota`: distinct buffers a
//!   peer may hold from fs at once). [`queue_range`] turns a refusal into
//!   a short count, or [`ErrorCode::ChannelBusy`] when nothing fits.

use alloc::vec::Vec;

use iolite::{ChannelTx, FLAG_EOF};

use crate::proto::ErrorCode;
use crate::{BlockDevice, File, FileKind, Fs, Stat};

/// Per-client open-file tables.
#[derive(Debug)]
pub struct OpenFiles<F> {
    tables: Vec<Vec<Option<F>>>,
    /// The incarnation of fs the handles belong to
    /// (`fs_api::client::handle`).
    epoch: u64,
}

impl<F> OpenFiles<F> {
    /// One table per client, client `i` with room for `sizes[i]` files.
    pub fn new(sizes: &[usize]) -> Self {
        Self::with_epoch(sizes, 0)
    }

    /// As [`OpenFiles::new`], for incarnation `epoch` of fs (its death
    /// count when it started): a handle an earlier incarnation gave out is
    /// `BadHandle` here, never another file.
    pub fn with_epoch(sizes: &[usize], epoch: u64) -> Self {
        let tables = sizes
            .iter()
            .map(|&n| {
                let mut t = Vec::new();
                t.resize_with(n, || None);
                t
            })
            .collect();
        Self { tables, epoch }
    }

    fn slot(&self, handle: u32) -> Result<usize, ErrorCode> {
        fs_api::client::handle_slot(self.epoch, handle).map(|s| s as usize).ok_or(ErrorCode::BadHandle)
    }

    /// Number of clients.
    pub fn clients(&self) -> usize {
        self.tables.len()
    }

    fn table(&mut self, client: usize) -> Result<&mut Vec<Option<F>>, ErrorCode> {
        self.tables.get_mut(client).ok_or(ErrorCode::BadHandle)
    }

    /// Puts `file` in `client`'s table: its handle there, or `TooManyOpen`
    /// when that table is full (other clients' tables do not matter).
    pub fn open(&mut self, client: usize, file: F) -> Result<u32, ErrorCode> {
        let t = self.table(client)?;
        let slot = t.iter().position(Option::is_none).ok_or(ErrorCode::TooManyOpen)?;
        t[slot] = Some(file);
        Ok(fs_api::client::handle(self.epoch, slot as u32))
    }

    /// `client`'s file `handle`.
    pub fn get(&self, client: usize, handle: u32) -> Result<&F, ErrorCode> {
        let slot = self.slot(handle)?;
        self.tables.get(client).and_then(|t| t.get(slot)).and_then(Option::as_ref).ok_or(ErrorCode::BadHandle)
    }

    /// Closes `client`'s file `handle`.
    pub fn close(&mut self, client: usize, handle: u32) -> Result<(), ErrorCode> {
        let slot = self.slot(handle)?;
        let f = self.table(client)?.get_mut(slot).ok_or(ErrorCode::BadHandle)?;
        f.take().map(drop).ok_or(ErrorCode::BadHandle)
    }

    /// Closes every file of `client` (it restarted); returns how many.
    pub fn close_all(&mut self, client: usize) -> usize {
        let Ok(t) = self.table(client) else { return 0 };
        t.iter_mut().filter_map(Option::take).count()
    }

    /// Files `client` has open.
    pub fn open_count(&self, client: usize) -> usize {
        self.tables.get(client).map_or(0, |t| t.iter().flatten().count())
    }
}

/// Queues `[offset, offset + length)` of `file` (clipped at its end) on a
/// client's channel as aggregates of the cache's buffers, each tagged
/// `tag`, the one that reaches the end of the file with `FLAG_EOF`
/// (`FsIoLite.read`). Returns the bytes queued: less than asked when the
/// channel is full or the client holds its whole quota, and
/// `ChannelBusy` if not one byte could be queued.
///
/// Sends go through the client's `guard`: a release ring the client has
/// corrupted breaks its channel (`Io`, and `guard.broken()` says why), and
/// a broken channel is not written again.
#[allow(clippy::too_many_arguments)]
pub fn queue_range<'d, D: BlockDevice>(
    fs: &mut Fs<'d, D>,
    tx: &mut ChannelTx<'d>,
    guard: &mut iolite::Guard,
    file: &File,
    offset: u64,
    length: u64,
    tag: u64,
) -> Result<i64, ErrorCode> {
    let size = file.stat().size;
    let end = size.min(offset.saturating_add(length));
    let mut pos = offset;
    while pos < end {
        let agg = fs.read_shared(file, pos, (end - pos).min(usize::MAX as u64) as usize).map_err(ErrorCode::from)?;
        if agg.is_empty() {
            break;
        }
        let n = agg.len() as u64;
        let flags = if pos + n >= size { FLAG_EOF } else { 0 };
        match guard.send(tx, agg, tag, flags) {
            Ok(()) => pos += n,
            Err((iolite::Error::Full | iolite::Error::QuotaExceeded, _, _)) => break,
            Err(_) => return Err(ErrorCode::Io),
        }
    }
    if pos == offset && pos < end {
        return Err(ErrorCode::ChannelBusy);
    }
    Ok((pos - offset) as i64)
}

/// `open_read` (`FsIoLite.open_read`): opens `path` in `client`'s table,
/// queues its first `length` bytes with `tag` as [`queue_range`] does,
/// and keeps the handle only while bytes remain (a file queued whole
/// holds no slot). Returns the handle, the file's stat and the bytes
/// queued (0 when the channel is full: the client reads later). A
/// directory is `NotAFile` (a web server redirects to it), anything else
/// but a regular file `Denied`.
#[allow(clippy::too_many_arguments)]
pub fn open_read<'d, D: BlockDevice>(
    fs: &mut Fs<'d, D>,
    files: &mut OpenFiles<File>,
    client: usize,
    tx: &mut ChannelTx<'d>,
    guard: &mut iolite::Guard,
    path: &[u8],
    length: u64,
    tag: u64,
) -> Result<(u32, Stat, u64), ErrorCode> {
    let file = match fs.open(path).map_err(ErrorCode::from) {
        Ok(f) => f,
        Err(ErrorCode::NotAFile) => {
            let dir = matches!(fs.stat(path), Ok(st) if st.kind == FileKind::Dir);
            return Err(if dir { ErrorCode::NotAFile } else { ErrorCode::Denied });
        }
        Err(e) => return Err(e),
    };
    let st = file.stat();
    // Opened before anything is queued, so that no error can follow bytes
    // already on the channel; closed again if they are all there.
    let handle = files.open(client, file.clone())?;
    let queued = match queue_range(fs, tx, guard, &file, 0, length, tag) {
        Ok(n) => n as u64,
        Err(ErrorCode::ChannelBusy) => 0,
        Err(e) => {
            let _ = files.close(client, handle);
            return Err(e);
        }
    };
    if queued >= st.size {
        let _ = files.close(client, handle);
    }
    Ok((handle, st, queued))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use crate::testutil::{domain, map_pool, mkfs, own_pool, TempDir};
    use crate::Config;
    use iolite::{Attach, ChannelRx, Domain, Geometry, PeerId, RwRegion};

    /// The file cache's pool (in a system, the id the compiler derives).
    const FS_POOL: iolite::PoolId = 1;

    const GEOMETRY: Geometry = Geometry { fwd: proto::FWD_CAP, rel: proto::REL_CAP };

    fn at(domain: &Domain, peer: PeerId, region: RwRegion) -> Attach<'_> {
        Attach { domain, peer, region, geometry: GEOMETRY }
    }

    #[test]
    fn each_client_has_its_own_table() {
        let mut t = OpenFiles::new(&[3, 2]);
        let a: Vec<u32> = (0..3).map(|i| t.open(0, i).unwrap()).collect();
        assert_eq!(t.open(0, 9), Err(ErrorCode::TooManyOpen), "client 0's table is full");
        // ... which does not concern client 1.
        let b0 = t.open(1, 10).unwrap();
        let b1 = t.open(1, 11).unwrap();
        assert_eq!(t.open(1, 12), Err(ErrorCode::TooManyOpen));
        assert_eq!((t.open_count(0), t.open_count(1)), (3, 2));
        // Handles name the caller's own files only.
        assert_eq!(*t.get(0, a[1]).unwrap(), 1);
        assert_eq!(*t.get(1, b1).unwrap(), 11);
        assert_eq!(t.get(1, 2), Err(ErrorCode::BadHandle), "client 1 has no handle 2 (client 0 has)");
        assert_eq!(t.close(1, 2), Err(ErrorCode::BadHandle));
        assert_eq!(t.get(7, 0), Err(ErrorCode::BadHandle), "no such client");
        // Closing frees a slot for its owner.
        t.close(0, a[0]).unwrap();
        assert_eq!(t.close(0, a[0]), Err(ErrorCode::BadHandle), "closed twice");
        assert_eq!(t.open(0, 20).unwrap(), a[0]);
        // A restarted client loses its files, the other keeps them.
        assert_eq!(t.close_all(1), 2);
        assert_eq!(t.get(1, b0), Err(ErrorCode::BadHandle));
        assert_eq!(*t.get(0, a[2]).unwrap(), 2);
    }

    #[test]
    fn handles_of_an_earlier_incarnation_name_no_file() {
        let mut old = OpenFiles::with_epoch(&[4], 1);
        let stale = old.open(0, "old").unwrap();
        // fs restarted: the new incarnation's table.
        let mut t = OpenFiles::with_epoch(&[4], 2);
        let fresh = t.open(0, "new").unwrap();
        assert_ne!(stale, fresh, "same slot, another incarnation");
        assert_eq!(t.get(0, stale), Err(ErrorCode::BadHandle));
        assert_eq!(t.close(0, stale), Err(ErrorCode::BadHandle), "a stale close closes nothing");
        assert_eq!(*t.get(0, fresh).unwrap(), "new");
        assert_eq!(t.get(0, fresh & 0xffff), Err(ErrorCode::BadHandle), "the bare slot is not a handle");
    }

    fn chan() -> RwRegion {
        iolite::testing::channel(GEOMETRY)
    }

    /// fs with two clients, as the assembly sets them up: each with its
    /// own table and quota. Client 2 (a CGI) opens a file until refused
    /// and reads it, keeping every buffer, until refused: client 1 (the
    /// web server) opens and reads every file as before, byte for byte.
    #[test]
    fn a_client_that_exhausts_its_share_does_not_starve_the_other() {
        let t = TempDir::new("clients");
        let site = t.0.join("site");
        std::fs::create_dir_all(&site).unwrap();
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(site.join("big.bin"), &big).unwrap();
        std::fs::write(site.join("index.html"), b"<h1>hello</h1>\n").unwrap();
        let img = mkfs(&site, 4096, 4096);

        let d: &'static Domain = domain();
        let pool = own_pool(d, FS_POOL, 512);
        let mut fs = Fs::mount(img, d, FS_POOL, Config::with_budget(512 * 4096)).unwrap();
        let (web, cgi): (&'static Domain, &'static Domain) = (domain(), domain());
        map_pool(web, FS_POOL, pool);
        map_pool(cgi, FS_POOL, pool);
        let (web_peer, cgi_peer) = (PeerId(0), PeerId(1));
        // The assembly's shares: 8 files and 64 buffers, 2 files and 20
        // (at least one read's worth: an aggregate has up to 16 buffers).
        let mut files = OpenFiles::new(&[8, 2]);
        d.set_quota(web_peer, 64).unwrap();
        d.set_quota(cgi_peer, 20).unwrap();
        let (rw, rc) = (chan(), chan());
        // SAFETY: fresh channels, one sender and one receiver each.
        let (mut tx_web, mut tx_cgi, mut rx_web, mut rx_cgi) = unsafe {
            (
                ChannelTx::attach(at(d, web_peer, rw)).unwrap(),
                ChannelTx::attach(at(d, cgi_peer, rc)).unwrap(),
                ChannelRx::attach(at(web, PeerId(0), rw)).unwrap(),
                ChannelRx::attach(at(cgi, PeerId(0), rc)).unwrap(),
            )
        };

        // The hog: opens until refused...
        let mut hog = Vec::new();
        let refused = loop {
            let f = fs.open(b"big.bin").unwrap();
            match files.open(1, f) {
                Ok(h) => hog.push(h),
                Err(e) => break e,
            }
        };
        assert_eq!((hog.len(), refused), (2, ErrorCode::TooManyOpen));
        // ... then reads and keeps everything until refused.
        let mut kept = Vec::new();
        let mut refusal = None;
        'hog: for &h in &hog {
            let f = files.get(1, h).unwrap().clone();
            let mut off = 0;
            while off < big.len() as u64 {
                match queue_range(&mut fs, &mut tx_cgi, &mut iolite::Guard::new(), &f, off, u64::MAX, 7) {
                    Ok(n) => off += n as u64,
                    Err(e) => {
                        refusal = Some(e);
                        break 'hog;
                    }
                }
                while let Some(m) = rx_cgi.recv().unwrap() {
                    kept.push(m.agg);
                }
            }
        }
        assert_eq!(refusal, Some(ErrorCode::ChannelBusy), "the hog's quota ends its reads");
        let hoarded = d.peer_held_buffers(cgi_peer).unwrap();
        assert!(hoarded > 0 && hoarded <= 20, "{hoarded} buffers: within its quota");
        assert!(kept.iter().map(|a| a.len()).sum::<usize>() < 2 * big.len(), "it could not read everything");
        assert!(d.peer_refusals(cgi_peer).unwrap() > 0);

        // The web server is unaffected: opens and reads whole files, over
        // and over (releasing as it goes), byte for byte.
        for round in 0..5 {
            for (path, want) in [(&b"big.bin"[..], &big[..]), (b"index.html", b"<h1>hello</h1>\n")] {
                let h = files.open(0, fs.open(path).unwrap()).unwrap();
                let f = files.get(0, h).unwrap().clone();
                let mut got = Vec::new();
                while (got.len() as u64) < want.len() as u64 {
                    let n = queue_range(
                        &mut fs,
                        &mut tx_web,
                        &mut iolite::Guard::new(),
                        &f,
                        got.len() as u64,
                        u64::MAX,
                        round,
                    )
                    .unwrap();
                    assert!(n > 0);
                    while let Some(m) = rx_web.recv().unwrap() {
                        got.extend(m.agg.slices().flat_map(|s| s.iter().copied()));
                    }
                    rx_web.flush_releases().unwrap();
                    tx_web.poll_releases().unwrap();
                }
                assert_eq!(got, want, "round {round}");
                files.close(0, h).unwrap();
            }
        }
        assert_eq!(d.peer_refusals(web_peer).unwrap(), 0);
        // The hog still holds its share; a restart gives it all back.
        assert_eq!(d.peer_held_buffers(cgi_peer).unwrap(), hoarded);
        drop(kept);
        assert_eq!(files.close_all(1), 2);
        d.peer_died(cgi_peer).unwrap();
        assert_eq!(d.peer_held_buffers(cgi_peer).unwrap(), 0);
    }

    /// `open_read`: a file queued whole holds no slot; a longer one keeps
    /// its handle for the rest; a full channel queues nothing and keeps
    /// it; a directory is `NotAFile`, a missing path `NotFound`.
    #[test]
    fn open_read_keeps_a_handle_only_while_bytes_remain() {
        let t = TempDir::new("open-read");
        let site = t.0.join("site");
        std::fs::create_dir_all(site.join("sub")).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
        std::fs::write(site.join("big.bin"), &big).unwrap();
        std::fs::write(site.join("small.txt"), b"small and whole\n").unwrap();
        let img = mkfs(&site, 4096, 4096);
        let d: &'static Domain = domain();
        let pool = own_pool(d, FS_POOL, 512);
        let mut fs = Fs::mount(img, d, FS_POOL, Config::with_budget(512 * 4096)).unwrap();
        let web: &'static Domain = domain();
        map_pool(web, FS_POOL, pool);
        let mut files = OpenFiles::new(&[4]);
        let region = chan();
        // SAFETY: a fresh channel, one sender and one receiver.
        let (mut tx, mut rx) = unsafe {
            (
                ChannelTx::attach(at(d, PeerId(0), region)).unwrap(),
                ChannelRx::attach(at(web, PeerId(0), region)).unwrap(),
            )
        };
        let mut guard = iolite::Guard::new();
        let take = |rx: &mut ChannelRx<'_>, tag: u64| {
            let mut got = Vec::new();
            while let Some(m) = rx.recv().unwrap() {
                assert_eq!(m.tag, tag);
                got.extend(m.agg.slices().flat_map(|s| s.iter().copied()));
            }
            rx.flush_releases().unwrap();
            got
        };

        let (_, st, n) = open_read(&mut fs, &mut files, 0, &mut tx, &mut guard, b"small.txt", 65536, 1).unwrap();
        assert_eq!((st.size, n), (16, 16));
        assert_eq!(take(&mut rx, 1), b"small and whole\n");
        assert_eq!(files.open_count(0), 0, "queued whole: nothing to close");

        let (h, st, n) = open_read(&mut fs, &mut files, 0, &mut tx, &mut guard, b"big.bin", 65536, 2).unwrap();
        assert_eq!((st.size, n), (big.len() as u64, 65536));
        let mut got = take(&mut rx, 2);
        assert_eq!(files.open_count(0), 1, "the rest is read with the handle");
        let f = files.get(0, h).unwrap().clone();
        while got.len() < big.len() {
            tx.poll_releases().unwrap();
            queue_range(&mut fs, &mut tx, &mut guard, &f, got.len() as u64, u64::MAX, 3).unwrap();
            got.extend(take(&mut rx, 3));
        }
        assert!(got == big, "byte-exact");
        files.close(0, h).unwrap();

        assert_eq!(
            open_read(&mut fs, &mut files, 0, &mut tx, &mut guard, b"sub", 100, 4).map(|r| r.2),
            Err(ErrorCode::NotAFile)
        );
        assert_eq!(
            open_read(&mut fs, &mut files, 0, &mut tx, &mut guard, b"nope", 100, 5).map(|r| r.2),
            Err(ErrorCode::NotFound)
        );

        // A channel with no room (the client holds its whole quota):
        // nothing queued, the handle kept for a later read.
        tx.poll_releases().unwrap();
        d.set_quota(PeerId(0), 1).unwrap();
        let (h, _, n) = open_read(&mut fs, &mut files, 0, &mut tx, &mut guard, b"big.bin", 65536, 6).unwrap();
        assert_eq!(n, 0);
        assert!(files.get(0, h).is_ok());
        assert!(take(&mut rx, 6).is_empty());
    }
}
