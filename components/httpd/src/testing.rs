//! Host-test fixtures: an in-memory site in an IO-Lite "file cache" pool,
//! a fake clock, and a client that feeds bytes to a [`Server`] and reads
//! its responses. This crate's tests use them, and so do the tests that
//! run httpd against the real CGI programs (`tests/httpd-cgi`), through
//! the `testing` feature (for dev-dependencies: the component never
//! builds it).

extern crate std;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::format;
use std::rc::Rc;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use iolite::testing::own;
use iolite::{Aggregate, Domain, PoolId, SliceDesc};

use crate::source::FetchedAhead;
use crate::{Action, CgiCall, Clock, Config, ConnId, FileSource, FileStat, Kind, Remote, Server, SourceError};

/// httpd's own pool (generated headers).
pub const HTTPD_POOL: PoolId = 2;
/// The file cache's pool (the site's files).
pub const FS_POOL: PoolId = 1;
/// The network's pool (request bytes).
pub const NET_POOL: PoolId = 3;
/// The cgi's pool (CGI output).
pub const CGI_POOL: PoolId = 4;
/// The file cache's chunk size (as fs: 16 KiB per buffer).
pub const CHUNK: usize = 16 * 1024;
/// Modification time of the site's files.
pub const MTIME: u64 = 1_700_000_000;

/// A test domain owning the four pools.
pub fn domain() -> &'static Domain {
    let d = iolite::testing::domain();
    own(d, HTTPD_POOL, 256);
    own(d, FS_POOL, 1024);
    own(d, NET_POOL, 512);
    own(d, CGI_POOL, 256);
    d
}

/// Fills a fresh buffer in place (as a producer does); no copy is counted.
pub fn make<'d>(d: &'d Domain, pool: PoolId, bytes: &[u8]) -> Aggregate<'d> {
    if bytes.is_empty() {
        return Aggregate::new(d);
    }
    iolite::testing::make(d, pool, bytes)
}

pub use iolite::testing::bytes;

/// Deterministic file contents.
pub fn content(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(seed as u32 % 31) as u8 ^ seed).collect()
}

/// A file of [`MemSite`].
pub struct MemFile<'d> {
    /// Its bytes, one aggregate per 16 KiB chunk.
    pub chunks: Vec<Aggregate<'d>>,
    /// What `open` returns for it.
    pub stat: FileStat,
}

/// An in-memory site: files as 16 KiB chunks in FS_POOL (like the fs
/// cache), directories implied by paths.
pub struct MemSite<'d> {
    /// The domain of the chunks.
    pub d: &'d Domain,
    /// Files by path.
    pub files: BTreeMap<String, MemFile<'d>>,
    /// Directories (`/` and every parent of a file).
    pub dirs: Vec<String>,
    /// Files open now.
    pub open: Rc<Cell<i64>>,
    /// A path whose `open` fails, and how.
    pub fail: Option<(String, SourceError)>,
    /// Reads to refuse with `Busy` before answering again (fs out of
    /// buffers for now).
    pub busy_reads: u32,
    /// Opens to refuse with `Busy` before answering again.
    pub busy_opens: u32,
    /// Calls that reached the files: opens and the reads not answered by
    /// what an `open_to_read` fetched (fs's RPCs, on target).
    pub calls: Rc<Cell<u64>>,
    next_ino: u32,
}

impl<'d> MemSite<'d> {
    /// A site without files.
    pub fn new(d: &'d Domain) -> Self {
        Self {
            d,
            files: BTreeMap::new(),
            dirs: vec!["/".into()],
            open: Rc::new(Cell::new(0)),
            fail: None,
            busy_reads: 0,
            busy_opens: 0,
            calls: Rc::new(Cell::new(0)),
            next_ino: 12,
        }
    }

    /// Adds (or replaces) a file; its directories are implied.
    pub fn put(&mut self, path: &str, data: &[u8], mtime: u64) {
        let chunks = data.chunks(CHUNK).map(|c| make(self.d, FS_POOL, c)).collect();
        let ino = match self.files.get(path) {
            Some(f) => f.stat.ino,
            None => {
                self.next_ino += 1;
                self.next_ino
            }
        };
        let stat = FileStat { ino, generation: 1, mtime, size: data.len() as u64, kind: Kind::File };
        self.files.insert(path.into(), MemFile { chunks, stat });
        let mut p = String::new();
        for seg in path.split('/').filter(|s| !s.is_empty()).collect::<Vec<_>>().split_last().unwrap().1 {
            p.push('/');
            p.push_str(seg);
            if !self.dirs.contains(&p) {
                self.dirs.push(p.clone());
            }
        }
    }

    /// Adds an empty directory.
    pub fn mkdir(&mut self, p: &str) {
        self.dirs.push(p.into());
    }

    /// The slice descriptors of a file's data (to check by-reference sends).
    pub fn descs(&self, path: &str) -> Vec<SliceDesc> {
        self.files[path].chunks.iter().flat_map(|c| c.descs().to_vec()).collect()
    }
}

/// An open file of [`MemSite`].
pub struct Open<'d> {
    path: String,
    fetched: FetchedAhead<'d>,
}

impl<'d> MemSite<'d> {
    fn bytes(&self, path: &str, offset: u64, max: usize) -> Result<Aggregate<'d>, SourceError> {
        let f = self.files.get(path).ok_or(SourceError::Failed)?;
        let mut out = Aggregate::new(self.d);
        let mut off = offset as usize;
        let end = (offset as usize + max).min(f.stat.size as usize);
        while off < end && out.slice_count() < iolite::MAX_SLICES {
            let (ci, co) = (off / CHUNK, off % CHUNK);
            let c = &f.chunks[ci];
            let n = (c.len() - co).min(end - off);
            out.append(c.range(co, n).unwrap()).map_err(|_| SourceError::Failed)?;
            off += n;
        }
        Ok(out)
    }
}

impl<'d> FileSource<'d> for MemSite<'d> {
    type File = Open<'d>;

    fn open(&mut self, path: &str) -> Result<(Open<'d>, FileStat), SourceError> {
        self.calls.set(self.calls.get() + 1);
        if self.busy_opens > 0 {
            self.busy_opens -= 1;
            return Err(SourceError::Busy);
        }
        if let Some((p, e)) = &self.fail {
            if p == path {
                return Err(*e);
            }
        }
        let trimmed = path.trim_end_matches('/');
        let as_dir = if trimmed.is_empty() { "/" } else { trimmed };
        if self.dirs.iter().any(|d| d == as_dir) {
            return Err(SourceError::IsDirectory);
        }
        let f = self.files.get(trimmed).ok_or(SourceError::NotFound)?;
        self.open.set(self.open.get() + 1);
        Ok((Open { path: trimmed.into(), fetched: FetchedAhead::none() }, f.stat))
    }

    /// As fs's `open_read`: the open and the first `first` bytes in one
    /// call.
    fn open_to_read(&mut self, path: &str, first: usize) -> Result<(Open<'d>, FileStat), SourceError> {
        let (mut f, stat) = self.open(path)?;
        f.fetched = FetchedAhead::new(0, self.bytes(&f.path, 0, first)?);
        Ok((f, stat))
    }

    fn read(&mut self, file: &Open<'d>, offset: u64, max: usize) -> Result<Aggregate<'d>, SourceError> {
        if let Some(a) = file.fetched.take(offset, max) {
            return Ok(a);
        }
        self.calls.set(self.calls.get() + 1);
        if self.busy_reads > 0 {
            self.busy_reads -= 1;
            return Err(SourceError::Busy);
        }
        self.bytes(&file.path, offset, max)
    }

    fn close(&mut self, _f: Open<'d>) {
        self.open.set(self.open.get() - 1);
    }
}

/// A clock at the given milliseconds (set by the test).
#[derive(Clone)]
pub struct FakeClock(pub Rc<Cell<u64>>);

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.0.get()
    }
    fn unix_secs(&self) -> u64 {
        MTIME + 86_400 + self.0.get() / 1000
    }
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Header fields, in order.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Resp {
    /// The value of field `n` (any case).
    pub fn header(&self, n: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.as_str())
    }
}

/// Splits a byte stream into responses. Bodies: none for 1xx/204/304 or
/// when `head` says so for that response; otherwise Content-Length.
pub fn parse_responses(mut b: &[u8], head: &dyn Fn(usize) -> bool) -> Vec<Resp> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hs);
        let n = match r.parse(b) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!("bad response stream ({other:?}): {:?}", String::from_utf8_lossy(&b[..b.len().min(300)])),
        };
        let status = r.code.unwrap();
        let headers: Vec<(String, String)> =
            r.headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())).collect();
        let cl: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        let no_body = (100..200).contains(&status) || status == 204 || status == 304 || head(out.len());
        let blen = if no_body { 0 } else { cl };
        assert!(b.len() >= n + blen, "truncated body: status {status}, want {blen}, have {}", b.len() - n);
        out.push(Resp { status, headers, body: b[n..n + blen].to_vec() });
        b = &b[n + blen..];
    }
    out
}

/// Everything a connection had to do, as [`Harness::drain`] pulled it.
pub struct Drained<'d> {
    /// The bytes sent.
    pub bytes: Vec<u8>,
    /// The aggregates sent.
    pub sends: Vec<Aggregate<'d>>,
    /// The CGI calls (not answered).
    pub cgi: Vec<CgiCall<'d>>,
    /// Parts of streamed request bodies: `(id, part, more)`.
    pub body_parts: Vec<(u32, Aggregate<'d>, bool)>,
    /// Whether the connection closed.
    pub closed: bool,
}

/// A transport for [`Harness::pump`]: netstack's send buffer plus the
/// client's receive window, as one bound on the bytes the client has not
/// read yet.
#[derive(Debug, Clone, Copy)]
pub struct Wire {
    /// Bytes sent and not read by the client.
    pub held: usize,
    /// The most it holds: at that, netstack closes the send window.
    pub window: usize,
}

impl Wire {
    /// An empty transport holding at most `window` bytes.
    pub fn new(window: usize) -> Self {
        Self { held: 0, window }
    }

    /// Whether it takes nothing more (its send window is closed).
    pub fn full(&self) -> bool {
        self.held >= self.window
    }

    /// The client reads what is held.
    pub fn read_all(&mut self) {
        self.held = 0;
    }
}

impl Drained<'_> {
    /// Nothing yet.
    pub fn new() -> Self {
        Self { bytes: Vec::new(), sends: Vec::new(), cgi: Vec::new(), body_parts: Vec::new(), closed: false }
    }
}

impl Default for Drained<'_> {
    fn default() -> Self {
        Self::new()
    }
}

/// A server on [`site`] with a fake clock, and a client.
pub struct Harness<'d> {
    /// The domain.
    pub d: &'d Domain,
    /// The server.
    pub srv: Server<'d, MemSite<'d>, FakeClock>,
    /// The clock's milliseconds.
    pub now: Rc<Cell<u64>>,
}

/// The test site: small and large files, an index, subdirectories.
pub fn site(d: &Domain) -> MemSite<'_> {
    let mut s = MemSite::new(d);
    s.put("/index.html", b"<!DOCTYPE html><title>Iolite</title><p>hello</p>\n", MTIME);
    s.put("/style.css", b"body { color: #222 }\n", MTIME);
    s.put("/file-1k.txt", &content(1024, 1), MTIME);
    s.put("/file-64k.bin", &content(65536, 2), MTIME);
    s.put("/file-1m.bin", &content(1 << 20, 3), MTIME);
    s.put("/empty.txt", b"", MTIME);
    s.put("/sub/note.txt", b"a note in a subdirectory\n", MTIME);
    s.put("/docs/index.html", b"<p>docs</p>\n", MTIME);
    s.mkdir("/noindex");
    s
}

impl<'d> Harness<'d> {
    /// A server with the default configuration.
    pub fn new(d: &'d Domain) -> Self {
        Self::with_config(d, Config::default())
    }

    /// A server with `cfg`.
    pub fn with_config(d: &'d Domain, cfg: Config) -> Self {
        let now = Rc::new(Cell::new(1000));
        let srv = Server::new(d, HTTPD_POOL, site(d), FakeClock(now.clone()), cfg);
        Self { d, srv, now }
    }

    /// A new connection from 10.0.2.2:40000.
    pub fn connect(&mut self) -> ConnId {
        self.srv.accept(Some(Remote { addr: [10, 0, 2, 2], port: 40000 })).unwrap_or_else(|_| panic!("refused"))
    }

    /// Bytes from the client (one aggregate in the network's pool).
    pub fn send(&mut self, c: ConnId, b: &[u8]) {
        if !b.is_empty() {
            let a = make(self.d, NET_POOL, b);
            self.srv.receive(c, a);
        }
    }

    /// Moves the clock on.
    pub fn advance(&mut self, ms: u64) {
        self.now.set(self.now.get() + ms);
    }

    /// Pulls every action of `c` (CGI calls are returned, not answered).
    pub fn drain(&mut self, c: ConnId) -> Drained<'d> {
        let mut dr =
            Drained { bytes: Vec::new(), sends: Vec::new(), cgi: Vec::new(), body_parts: Vec::new(), closed: false };
        while let Some(a) = self.srv.next(c) {
            match a {
                Action::Send(a) => {
                    dr.bytes.extend(bytes(&a));
                    dr.sends.push(a);
                }
                Action::Cgi(call) => dr.cgi.push(call),
                Action::CgiBody { id, part, more } => dr.body_parts.push((id, part, more)),
                Action::Close => {
                    dr.closed = true;
                    break;
                }
            }
        }
        dr
    }

    /// Pulls `c`'s actions as the component's `pump` does for a transport
    /// that holds at most `wire.window` bytes the client has not read:
    /// while it is full (netstack closed the send window) nothing that goes to the
    /// client is pulled, only body parts for the cgi
    /// ([`Server::next_input`]). What was pulled lands in `wire` and `dr`.
    pub fn pump(&mut self, c: ConnId, wire: &mut Wire, dr: &mut Drained<'d>) {
        if wire.full() {
            while let Some(a) = self.srv.next_input(c) {
                match a {
                    Action::CgiBody { id, part, more } => dr.body_parts.push((id, part, more)),
                    _ => unreachable!("only body parts"),
                }
            }
            return;
        }
        while let Some(a) = self.srv.next_within(c, wire.window - wire.held) {
            match a {
                Action::Send(a) => {
                    wire.held += a.len();
                    dr.bytes.extend(bytes(&a));
                    dr.sends.push(a);
                }
                Action::Cgi(call) => dr.cgi.push(call),
                Action::CgiBody { id, part, more } => dr.body_parts.push((id, part, more)),
                Action::Close => {
                    dr.closed = true;
                    return;
                }
            }
            if wire.full() {
                return;
            }
        }
    }

    /// One request on a fresh connection; the responses and whether it closed.
    pub fn roundtrip(&mut self, req: &[u8]) -> (Vec<Resp>, bool) {
        let c = self.connect();
        self.send(c, req);
        let dr = self.drain(c);
        let head = req.starts_with(b"HEAD");
        let r = parse_responses(&dr.bytes, &|_| head);
        if dr.closed {
            self.srv.closed(c);
        }
        (r, dr.closed)
    }

    /// `GET path` on a fresh connection: its one response.
    pub fn get(&mut self, path: &str) -> Resp {
        let (mut r, _) = self.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.len(), 1);
        r.remove(0)
    }
}
