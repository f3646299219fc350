//! The server: connections, request handling, responses.
//!
//! Transport-independent: the caller feeds each connection's received
//! bytes ([`Server::receive`], aggregates as the network stack delivers
//! them; requests may be split anywhere and pipelined), and pulls what to
//! do with [`Server::next`]: send an aggregate, hand a request to the CGI,
//! or close. Responses are produced in request order. A static response is
//! a header aggregate (a small generated part plus the cached fixed part)
//! followed by the file's aggregates from the [`FileSource`], by
//! reference; file data is read lazily as the caller pulls, so a large
//! file does not have to be in flight at once.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use cgi_api::output::reason;
use iolite::gen::generate;
use iolite::{Aggregate, Domain, PoolId};

use crate::chunked::{Decoder, Step};
use crate::hcache::{HeaderCache, Lookup};
use crate::mime::content_type;
use crate::path::parse_target;
use crate::preconditions::{self, Conditions, Outcome};
use crate::range::{self, RangeSpec};
use crate::request::{parse_head, Head, Method, Request};
use crate::source::{Clock, FileSource, FileStat, Kind, SourceError};
use crate::{date, Config, SERVER};

/// Methods of static files (405 and OPTIONS).
const ALLOW_STATIC: &str = "GET, HEAD, OPTIONS";
/// Methods of CGI programs and of the server as a whole (`OPTIONS *`).
const ALLOW_CGI: &str = "GET, HEAD, POST, OPTIONS";

/// A connection, as named by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// The client's address (for `REMOTE_ADDR`/`REMOTE_PORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// IPv4 address.
    pub addr: [u8; 4],
    /// TCP port.
    pub port: u16,
}

/// A request for the CGI component: send `env ++ body` on the cgi channel
/// (see `cgi_api::wire::encode_request`), then call [`Server::cgi_reply`]
/// with the same `id`.
#[derive(Debug)]
pub struct CgiCall<'d> {
    /// Request id (unique per server).
    pub id: u32,
    /// CGI/1.1 meta-variables.
    pub env: cgi_api::Env,
    /// The POST body, by reference, as it arrived.
    pub body: Option<Aggregate<'d>>,
}

/// What the caller must do next for a connection.
#[derive(Debug)]
pub enum Action<'d> {
    /// Send these bytes (by reference) on the connection.
    Send(Aggregate<'d>),
    /// Hand this request to the CGI component.
    Cgi(CgiCall<'d>),
    /// Close the connection after everything sent so far, then call
    /// [`Server::closed`].
    Close,
}

/// Counters of the server (exported as the `httpd` component).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections refused at the limit (503).
    pub connections_refused: u64,
    /// Connections open now.
    pub connections_active: u64,
    /// Complete requests parsed (including rejected ones).
    pub requests: u64,
    /// Responses by class.
    pub responses_2xx: u64,
    /// 3xx responses.
    pub responses_3xx: u64,
    /// 4xx responses.
    pub responses_4xx: u64,
    /// 5xx responses.
    pub responses_5xx: u64,
    /// 304 responses.
    pub not_modified: u64,
    /// 206 responses.
    pub partial: u64,
    /// Fixed header parts reused from the header cache.
    pub header_cache_hits: u64,
    /// Fixed header parts generated (first use).
    pub header_cache_misses: u64,
    /// Fixed header parts regenerated because the file changed.
    pub header_cache_invalidations: u64,
    /// Header bytes generated (per-response parts and cache misses).
    pub header_bytes_generated: u64,
    /// Body bytes sent by reference (file data, CGI output).
    pub body_bytes_by_ref: u64,
    /// Requests handed to the CGI.
    pub cgi_requests: u64,
    /// CGI requests that timed out (504).
    pub cgi_timeouts: u64,
    /// CGI faults and invalid CGI output (502).
    pub cgi_failures: u64,
    /// CGI replies that came after their deadline (dropped).
    pub cgi_late_replies: u64,
    /// Bytes of CGI response headers copied for parsing (the header only:
    /// the body goes by reference).
    pub cgi_header_bytes_copied: u64,
    /// File reads the source refused for now (busy): the response waits
    /// and is read again later instead of being cut short.
    pub file_reads_deferred: u64,
    /// Requests that timed out while arriving (408).
    pub request_timeouts: u64,
    /// Idle keep-alive connections closed.
    pub idle_closes: u64,
    /// Idle keep-alive connections closed early to make room for a new
    /// connection at the limit.
    pub idle_evictions: u64,
    /// Connections closed because the network took none of their pending
    /// output for `send_timeout_ms` (a client that stopped reading).
    pub send_timeouts: u64,
    /// Request bytes copied into the per-connection parse buffer (request
    /// lines and headers, and whatever followed them in the input then).
    pub request_bytes_copied_to_parse: u64,
    /// Of those, bytes that turned out to be a request body (payload, which
    /// also goes on by reference): copied only because they arrived with
    /// the header.
    pub request_body_bytes_copied_to_parse: u64,
    /// Request bodies flattened (more slices than an aggregate holds).
    pub bodies_flattened: u64,
    /// Request body bytes copied by that flattening (payload).
    pub body_bytes_flattened: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ConnMode {
    /// HTTP/1.1 persistent: no Connection header.
    Default,
    /// HTTP/1.0 persistent: `Connection: keep-alive`.
    KeepAlive10,
    /// `Connection: close`, and close after this response.
    Close,
}

impl ConnMode {
    fn line(self) -> &'static str {
        match self {
            ConnMode::Default => "",
            ConnMode::KeepAlive10 => "Connection: keep-alive\r\n",
            ConnMode::Close => "Connection: close\r\n",
        }
    }
    fn of(req: &Request) -> Self {
        if !req.keep_alive {
            ConnMode::Close
        } else if req.minor == 0 {
            ConnMode::KeepAlive10
        } else {
            ConnMode::Default
        }
    }
}

enum Out<'d, F> {
    Data(Aggregate<'d>),
    /// File bytes `off..end`, then each of `parts` (multipart/byteranges:
    /// a generated part header, then that range of the same file).
    File {
        f: F,
        off: u64,
        end: u64,
        parts: VecDeque<(Aggregate<'d>, u64, u64)>,
    },
    Cgi(CgiCall<'d>),
    Close,
}

struct CgiWait {
    id: u32,
    deadline: u64,
    req: Box<Request>,
    redirects: u8,
}

/// A chunked request body being decoded: the framing decoder and the data
/// so far (the client's slices, by reference).
struct ChunkedBody<'d> {
    req: Box<Request>,
    dec: Decoder,
    body: Aggregate<'d>,
}

enum State<'d> {
    Reading,
    Body(Box<Request>),
    Chunked(Box<ChunkedBody<'d>>),
    Cgi(CgiWait),
    Closing,
}

struct Conn<'d, F> {
    inq: VecDeque<Aggregate<'d>>,
    inq_len: usize,
    scan: Vec<u8>,
    outq: VecDeque<Out<'d, F>>,
    state: State<'d>,
    req_start: Option<u64>,
    last_active: u64,
    remote: Option<Remote>,
    eof: bool,
    continue_sent: bool,
}

/// The shared part of the server (everything but the connection table),
/// so that a connection and the server can be borrowed at once.
struct Core<'d, S: FileSource<'d>, C> {
    d: &'d Domain,
    pool: PoolId,
    src: S,
    clock: C,
    cfg: Config,
    hcache: HeaderCache<'d>,
    stats: HttpStats,
    date: (u64, [u8; 29]),
    next_cgi: u32,
    next_boundary: u64,
}

/// The HTTP server state machine (see the module docs).
pub struct Server<'d, S: FileSource<'d>, C> {
    core: Core<'d, S, C>,
    conns: BTreeMap<u32, Conn<'d, S::File>>,
    next_conn: u32,
    /// Connections closed by `accept` to make room (their `Close` must be
    /// pulled): see [`Server::take_woken`].
    woken: Vec<ConnId>,
}

fn etag(st: &FileStat) -> String {
    format!("\"{:x}-{:x}-{:x}-{:x}\"", st.ino, st.generation, st.mtime, st.size)
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    fn date(&mut self) -> [u8; 29] {
        let now = self.clock.unix_secs();
        if self.date.0 != now {
            self.date = (now, date::format(now));
        }
        self.date.1
    }

    fn count(&mut self, status: u16) {
        let s = &mut self.stats;
        match status {
            200..=299 => s.responses_2xx += 1,
            300..=399 => s.responses_3xx += 1,
            400..=499 => s.responses_4xx += 1,
            _ => s.responses_5xx += 1,
        }
        if status == 304 {
            s.not_modified += 1;
        }
        if status == 206 {
            s.partial += 1;
        }
    }

    fn gen(&mut self, f: impl Fn(&mut dyn Write) -> core::fmt::Result) -> Option<Aggregate<'d>> {
        let a = generate(self.d, self.pool, f).ok()?;
        self.stats.header_bytes_generated += a.len() as u64;
        Some(a)
    }

    /// Status line, Date, Server, Connection: the per-response part.
    fn prefix(&mut self, status: u16, why: &str, mode: ConnMode) -> Option<Aggregate<'d>> {
        self.count(status);
        let date = self.date();
        let date = core::str::from_utf8(&date).unwrap_or("");
        self.gen(|w| write!(w, "HTTP/1.1 {status} {why}\r\nDate: {date}\r\nServer: {SERVER}\r\n{}", mode.line()))
    }

    /// A complete error (or other body-less-by-design) response with a
    /// small HTML body. `extra` are whole header lines.
    fn simple(&mut self, status: u16, head_only: bool, mode: ConnMode, extra: &str) -> Option<Aggregate<'d>> {
        let why = reason(status);
        let body = format!(
            "<!DOCTYPE html>\n<html><head><title>{status} {why}</title></head><body><h1>{status} {why}</h1></body></html>\n"
        );
        let mut a = self.prefix(status, why, mode)?;
        let tail = self.gen(|w| {
            write!(w, "{extra}Content-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\r\n", body.len())?;
            if !head_only {
                w.write_str(&body)?;
            }
            Ok(())
        })?;
        a.append(tail).ok()?;
        Some(a)
    }

    fn push_simple<F>(&mut self, conn: &mut Conn<'d, F>, status: u16, head_only: bool, mode: ConnMode, extra: &str) {
        match self.simple(status, head_only, mode, extra) {
            Some(a) => conn.outq.push_back(Out::Data(a)),
            None => conn.outq.push_back(Out::Close),
        }
    }

    /// A refused request: error response, then close.
    fn reject(&mut self, conn: &mut Conn<'d, S::File>, status: u16, allow: bool) {
        let extra = if allow { "Allow: GET, HEAD, POST, OPTIONS\r\n" } else { "" };
        self.push_simple(conn, status, false, ConnMode::Close, extra);
        conn.outq.push_back(Out::Close);
        conn.state = State::Closing;
    }

    fn handle(&mut self, conn: &mut Conn<'d, S::File>, req: Request, body: Option<Aggregate<'d>>) {
        let mode = ConnMode::of(&req);
        let path = &req.target.path;
        let cgi = path == "/cgi-bin" || path.starts_with("/cgi-bin/");
        let allow = if cgi || path == "*" { ALLOW_CGI } else { ALLOW_STATIC };
        match req.method {
            Method::Get | Method::Head | Method::Post if cgi => {
                self.dispatch_cgi(conn, Box::new(req), body, 0);
                return;
            }
            Method::Get | Method::Head => {
                drop(body); // a body on GET/HEAD is read and ignored
                let path = req.target.path.clone();
                self.serve_static(conn, &req, &path, mode);
            }
            Method::Options => {
                // RFC 9110 §9.3.7: what the resource (or, for `*`, the
                // server) supports, and no content.
                let Some(mut a) = self.prefix(200, reason(200), mode) else { return conn.outq.push_back(Out::Close) };
                match self.gen(|w| write!(w, "Allow: {allow}\r\nContent-Length: 0\r\n\r\n")).map(|t| a.append(t)) {
                    Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
                    _ => conn.outq.push_back(Out::Close),
                }
            }
            _ => {
                let extra = format!("Allow: {allow}\r\n");
                self.push_simple(conn, 405, req.method == Method::Head, mode, &extra);
            }
        }
        if mode == ConnMode::Close {
            conn.outq.push_back(Out::Close);
            conn.state = State::Closing;
        }
    }

    fn dispatch_cgi(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        req: Box<Request>,
        body: Option<Aggregate<'d>>,
        redirects: u8,
    ) {
        let mode = ConnMode::of(&req);
        let rest = req.target.path.strip_prefix("/cgi-bin").unwrap_or("");
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        let (name, info) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if name.is_empty() {
            self.push_simple(conn, 404, req.method == Method::Head, mode, "");
            if mode == ConnMode::Close {
                conn.outq.push_back(Out::Close);
                conn.state = State::Closing;
            }
            return;
        }
        let script = format!("/cgi-bin/{name}");
        // The body reaches the CGI decoded, with its length: its transfer
        // coding is ours, not the program's (RFC 3875 §4.1.18).
        let headers: Vec<(&str, &[u8])> = req
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("transfer-encoding"))
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let host = req.host.as_deref().unwrap_or("");
        let host = if host.starts_with('[') {
            host.split_inclusive(']').next().unwrap_or(host)
        } else {
            host.split(':').next().unwrap_or(host)
        };
        let server_name = if host.is_empty() { self.cfg.server_name.as_str() } else { host };
        let remote =
            conn.remote.map(|r| format!("{}.{}.{}.{}", r.addr[0], r.addr[1], r.addr[2], r.addr[3])).unwrap_or_default();
        let env = cgi_api::Env::from_request(&cgi_api::RequestInfo {
            method: req.method.as_str(),
            script_name: &script,
            path_info: info,
            query: &req.target.query,
            protocol: req.protocol(),
            headers: &headers,
            remote_addr: &remote,
            remote_port: conn.remote.map_or(0, |r| r.port),
            server_name,
            server_port: self.cfg.server_port,
            server_software: SERVER,
            content_length: body.as_ref().map(|b| b.len() as u64),
        });
        let id = self.next_cgi;
        self.next_cgi = self.next_cgi.wrapping_add(1);
        self.stats.cgi_requests += 1;
        conn.outq.push_back(Out::Cgi(CgiCall { id, env, body }));
        // The CGI's time starts when the call leaves (`Server::next`), not
        // here: behind earlier responses of a pipeline that a slow client
        // has not taken yet, the call may wait longer than the timeout
        // without the CGI being at fault (and a timeout restarts it).
        let deadline = u64::MAX;
        conn.state = State::Cgi(CgiWait { id, deadline, req, redirects });
    }

    fn serve_static(&mut self, conn: &mut Conn<'d, S::File>, req: &Request, path: &str, mode: ConnMode) {
        let head = req.method == Method::Head;
        if !matches!(req.method, Method::Get | Method::Head) {
            self.push_simple(conn, 405, false, mode, &format!("Allow: {ALLOW_STATIC}\r\n"));
            return;
        }
        let opened = match self.src.open(path) {
            Err(SourceError::IsDirectory) if !path.ends_with('/') => {
                let q = if req.target.query.is_empty() { String::new() } else { format!("?{}", req.target.query) };
                let loc = format!("Location: {path}/{q}\r\n");
                self.push_simple(conn, 301, head, mode, &loc);
                return;
            }
            Err(SourceError::IsDirectory) => {
                let index = format!("{path}index.html");
                match self.src.open(&index) {
                    Ok(o) => Ok((o, index)),
                    Err(SourceError::NotFound | SourceError::IsDirectory) => Err(SourceError::Forbidden),
                    Err(e) => Err(e),
                }
            }
            Ok(o) => Ok((o, String::from(path))),
            Err(e) => Err(e),
        };
        let ((f, st), path) = match opened {
            Ok(o) => o,
            Err(e) => {
                self.push_simple(conn, e.status(), head, mode, "");
                return;
            }
        };
        if st.kind != Kind::File || (path.ends_with('/') && !path.ends_with("/index.html")) {
            self.src.close(f);
            let status = if st.kind == Kind::File { 404 } else { 403 };
            self.push_simple(conn, status, head, mode, "");
            return;
        }
        let tag = etag(&st);
        let lm = date::format(st.mtime);
        let lm = core::str::from_utf8(&lm).unwrap_or("");
        let conds = Conditions {
            if_match: req.header("if-match"),
            if_unmodified_since: req.header("if-unmodified-since"),
            if_none_match: req.header("if-none-match"),
            if_modified_since: req.header("if-modified-since"),
        };
        let outcome = preconditions::evaluate(&conds, true, &tag, st.mtime);
        if outcome == Outcome::Failed {
            self.src.close(f);
            self.push_simple(conn, 412, head, mode, "");
            return;
        }
        let not_modified = outcome == Outcome::NotModified;
        if not_modified {
            self.src.close(f);
            let Some(mut a) = self.prefix(304, reason(304), mode) else { return conn.outq.push_back(Out::Close) };
            match self.gen(|w| write!(w, "ETag: {tag}\r\nLast-Modified: {lm}\r\n\r\n")).map(|t| a.append(t)) {
                Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
                _ => conn.outq.push_back(Out::Close),
            }
            return;
        }
        // Range (GET only), unless If-Range says the client's copy is old.
        let spec = match req.header("range") {
            Some(r) if req.method == Method::Get => {
                let current = match req.header("if-range") {
                    None => true,
                    Some(v) if v.trim_ascii_start().starts_with(b"\"") || v.starts_with(b"W/") => {
                        preconditions::strong_match(v, &tag)
                    }
                    Some(v) => date::parse(v) == Some(st.mtime),
                };
                if current {
                    range::parse(r, st.size)
                } else {
                    RangeSpec::Full
                }
            }
            _ => RangeSpec::Full,
        };
        let ctype = content_type(&path);
        match spec {
            RangeSpec::Multi(ranges) => self.multipart(conn, f, &st, &ranges, ctype, &tag, lm, mode),
            RangeSpec::Unsatisfiable => {
                self.src.close(f);
                let extra = format!("Content-Range: bytes */{}\r\n", st.size);
                self.push_simple(conn, 416, head, mode, &extra);
            }
            RangeSpec::Partial { start, end } => {
                let Some(mut a) = self.prefix(206, reason(206), mode) else { return conn.outq.push_back(Out::Close) };
                let size = st.size;
                let len = end - start + 1;
                let tail = self.gen(|w| {
                    write!(
                        w,
                        "Content-Type: {ctype}\r\nContent-Length: {len}\r\nContent-Range: bytes {start}-{end}/{size}\r\n\
                         Last-Modified: {lm}\r\nETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
                    )
                });
                match tail.map(|t| a.append(t)) {
                    Some(Ok(())) => {
                        conn.outq.push_back(Out::Data(a));
                        conn.outq.push_back(Out::File { f, off: start, end: end + 1, parts: VecDeque::new() });
                    }
                    _ => {
                        self.src.close(f);
                        conn.outq.push_back(Out::Close);
                    }
                }
            }
            RangeSpec::Full => {
                let Some(mut a) = self.prefix(200, reason(200), mode) else { return conn.outq.push_back(Out::Close) };
                let key = (st.ino, st.generation, st.mtime, st.size);
                let fixed = match self.hcache.get(&path, key) {
                    Lookup::Hit(h) => {
                        self.stats.header_cache_hits += 1;
                        Some(h)
                    }
                    other => {
                        if matches!(other, Lookup::Stale) {
                            self.stats.header_cache_invalidations += 1;
                        } else {
                            self.stats.header_cache_misses += 1;
                        }
                        let size = st.size;
                        let h = self.gen(|w| {
                            write!(
                                w,
                                "Content-Type: {ctype}\r\nContent-Length: {size}\r\nLast-Modified: {lm}\r\n\
                                 ETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
                            )
                        });
                        if let Some(h) = &h {
                            if let Ok(keep) = h.duplicate() {
                                self.hcache.put(&path, key, keep);
                            }
                        }
                        h
                    }
                };
                match fixed.map(|t| a.append(t)) {
                    Some(Ok(())) => {
                        conn.outq.push_back(Out::Data(a));
                        if head || st.size == 0 {
                            self.src.close(f);
                        } else {
                            conn.outq.push_back(Out::File { f, off: 0, end: st.size, parts: VecDeque::new() });
                        }
                    }
                    _ => {
                        self.src.close(f);
                        conn.outq.push_back(Out::Close);
                    }
                }
            }
        }
    }

    /// Reads the next piece of the file at the front of the queue.
    /// `Err` = the file failed or shrank: the response cannot be completed.
    /// The next piece of the file at the front of `conn`'s output:
    /// `Ok(None)` when the source is busy for now (fs out of buffers or its
    /// channel full, typically while slow clients hold cached pages): the
    /// file stays where it is and is read again later, because the header
    /// has promised its bytes. `Err` when it cannot be read at all.
    fn pull_file(&mut self, conn: &mut Conn<'d, S::File>) -> Result<Option<Aggregate<'d>>, ()> {
        let Some(Out::File { f, off, end, parts }) = conn.outq.front_mut() else { return Err(()) };
        if *off >= *end {
            // The next part's header (and after the last range, the closing
            // delimiter as a part without bytes).
            let Some((hdr, s, e)) = parts.pop_front() else { return Err(()) };
            (*off, *end) = (s, e);
            if s >= e && parts.is_empty() {
                if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                    self.src.close(f);
                }
            }
            return Ok(Some(hdr));
        }
        let want = (*end - *off).min(self.cfg.read_chunk as u64) as usize;
        let r = self.src.read(f, *off, want);
        let agg = match r {
            Ok(a) if !a.is_empty() && a.len() <= want => a,
            Err(SourceError::Busy) => {
                self.stats.file_reads_deferred += 1;
                return Ok(None);
            }
            _ => {
                if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                    self.src.close(f);
                }
                return Err(());
            }
        };
        *off += agg.len() as u64;
        if *off >= *end && parts.is_empty() {
            if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                self.src.close(f);
            }
        }
        self.stats.body_bytes_by_ref += agg.len() as u64;
        Ok(Some(agg))
    }

    /// A `multipart/byteranges` 206 (RFC 9110 §14.6): the header and each
    /// part's header are generated into our pool, the file's bytes follow
    /// by reference (the file is read once per range, lazily).
    #[allow(clippy::too_many_arguments)]
    fn multipart(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        f: S::File,
        st: &FileStat,
        ranges: &[(u64, u64)],
        ctype: &str,
        tag: &str,
        lm: &str,
        mode: ConnMode,
    ) {
        self.next_boundary = self.next_boundary.wrapping_add(1);
        // Hex digits of a per-server counter and the file's version: no
        // line of a part header has this form, and a file would have to
        // contain it on its own line to confuse a client.
        let boundary = format!("iolite-{:016x}{:08x}", self.next_boundary, st.mtime as u32 ^ st.ino);
        let size = st.size;
        let heads: Vec<String> = ranges
            .iter()
            .map(|(s, e)| {
                format!("\r\n--{boundary}\r\nContent-Type: {ctype}\r\nContent-Range: bytes {s}-{e}/{size}\r\n\r\n")
            })
            .collect();
        let closing = format!("\r\n--{boundary}--\r\n");
        let len: u64 = heads.iter().map(|h| h.len() as u64).sum::<u64>()
            + ranges.iter().map(|(s, e)| e - s + 1).sum::<u64>()
            + closing.len() as u64;
        let Some(mut a) = self.prefix(206, reason(206), mode) else {
            self.src.close(f);
            return conn.outq.push_back(Out::Close);
        };
        let tail = self.gen(|w| {
            write!(
                w,
                "Content-Type: multipart/byteranges; boundary={boundary}\r\nContent-Length: {len}\r\n\
                 Last-Modified: {lm}\r\nETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
            )
        });
        let mut parts = VecDeque::new();
        for (h, (s, e)) in heads.iter().zip(ranges) {
            match self.gen(|w| w.write_str(h)) {
                Some(g) => parts.push_back((g, *s, e + 1)),
                None => break,
            }
        }
        match (self.gen(|w| w.write_str(&closing)), tail.map(|t| a.append(t))) {
            (Some(c), Some(Ok(()))) if parts.len() == ranges.len() => {
                parts.push_back((c, size, size));
                conn.outq.push_back(Out::Data(a));
                conn.outq.push_back(Out::File { f, off: 0, end: 0, parts });
            }
            _ => {
                self.src.close(f);
                conn.outq.push_back(Out::Close);
            }
        }
    }

    /// Parses and handles as many requests as the buffered input holds.
    fn process(&mut self, conn: &mut Conn<'d, S::File>) {
        let now = self.clock.now_ms();
        loop {
            match &conn.state {
                State::Closing | State::Cgi(_) => return,
                State::Body(req) => {
                    let need = req.content_length as usize;
                    if conn.inq_len < need {
                        if conn.eof {
                            conn.outq.push_back(Out::Close);
                            conn.state = State::Closing;
                        } else if req.expect_continue && !conn.continue_sent {
                            conn.continue_sent = true;
                            if let Some(a) = self.gen(|w| w.write_str("HTTP/1.1 100 Continue\r\n\r\n")) {
                                conn.outq.push_back(Out::Data(a));
                            }
                        }
                        return;
                    }
                    let State::Body(req) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                    let body = match conn.take(need, self.pool, &mut self.stats, self.cfg.scan_cap()) {
                        Ok(b) => b,
                        Err(_) => {
                            self.reject(conn, 500, false);
                            return;
                        }
                    };
                    conn.refill(self.cfg.scan_cap(), &mut self.stats);
                    conn.req_start = None;
                    conn.continue_sent = false;
                    self.handle(conn, *req, Some(body));
                }
                State::Chunked(_) => {
                    if !self.chunked_step(conn) {
                        return;
                    }
                }
                State::Reading => {
                    if conn.outq.len() >= self.cfg.max_pipeline {
                        return; // back-pressure: resumed by next()
                    }
                    if conn.inq_len == 0 {
                        conn.req_start = None;
                        if conn.eof {
                            conn.outq.push_back(Out::Close);
                            conn.state = State::Closing;
                        }
                        return;
                    }
                    conn.req_start.get_or_insert(now);
                    match parse_head(&conn.scan, &self.cfg.limits) {
                        Head::Partial => {
                            if conn.eof {
                                conn.outq.push_back(Out::Close);
                                conn.state = State::Closing;
                            }
                            return;
                        }
                        Head::Reject(r) => {
                            self.stats.requests += 1;
                            self.reject(conn, r.status, r.allow);
                            return;
                        }
                        Head::Done(req, n) => {
                            self.stats.requests += 1;
                            // A body is taken by reference: the parse buffer
                            // is refilled only after it (not copied into it).
                            conn.consume(n, &mut self.stats, self.cfg.scan_cap(), req.content_length == 0);
                            if req.chunked {
                                let dec =
                                    Decoder::new(self.cfg.limits.max_body as u64, self.cfg.limits.max_header_bytes);
                                let body = Aggregate::new(self.d);
                                conn.state = State::Chunked(Box::new(ChunkedBody { req: Box::new(req), dec, body }));
                            } else if req.content_length > 0 {
                                conn.state = State::Body(Box::new(req));
                            } else {
                                conn.req_start = None;
                                self.handle(conn, req, None);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decodes as much of a chunked body as has arrived. `true` when the
    /// request was handled (the caller goes on with the next one), `false`
    /// when it must wait for input (or the connection is closing).
    fn chunked_step(&mut self, conn: &mut Conn<'d, S::File>) -> bool {
        let cap = self.cfg.scan_cap();
        loop {
            let State::Chunked(cb) = &mut conn.state else { return false };
            match cb.dec.step(&conn.scan) {
                Step::Skip(n) => conn.consume(n, &mut self.stats, cap, true),
                Step::Data(n) if conn.inq_len > 0 => {
                    let k = (n as usize).min(conn.inq_len);
                    let piece = match conn.take(k, self.pool, &mut self.stats, cap) {
                        Ok(p) => p,
                        Err(_) => {
                            self.reject(conn, 500, false);
                            return false;
                        }
                    };
                    let State::Chunked(cb) = &mut conn.state else { return false };
                    cb.dec.took(k as u64);
                    if let Err((_, piece)) = cb.body.append(piece) {
                        // More chunks than an aggregate has slices.
                        self.stats.bodies_flattened += 1;
                        if cb.body.flatten(self.pool).is_err() || cb.body.append(piece).is_err() {
                            self.reject(conn, 500, false);
                            return false;
                        }
                    }
                }
                Step::NeedMore | Step::Data(_) => {
                    if conn.eof {
                        // Cut off by a half-close: nothing to answer.
                        conn.outq.push_back(Out::Close);
                        conn.state = State::Closing;
                    } else if cb.req.expect_continue && !conn.continue_sent {
                        conn.continue_sent = true;
                        if let Some(a) = self.gen(|w| w.write_str("HTTP/1.1 100 Continue\r\n\r\n")) {
                            conn.outq.push_back(Out::Data(a));
                        }
                    }
                    return false;
                }
                Step::Done(n) => {
                    conn.consume(n, &mut self.stats, cap, true);
                    let State::Chunked(cb) = core::mem::replace(&mut conn.state, State::Reading) else {
                        unreachable!()
                    };
                    let ChunkedBody { req, body, .. } = *cb;
                    conn.req_start = None;
                    conn.continue_sent = false;
                    self.handle(conn, *req, Some(body));
                    return true;
                }
                Step::Error(status) => {
                    self.reject(conn, status, false);
                    return false;
                }
            }
        }
    }

    fn cgi_done(&mut self, conn: &mut Conn<'d, S::File>, w: CgiWait, result: Result<Aggregate<'d>, cgi_api::Failure>) {
        conn.state = State::Reading;
        let req = w.req;
        let mode = ConnMode::of(&req);
        let head = req.method == Method::Head;
        let failed = |core: &mut Self, conn: &mut Conn<'d, S::File>, f: cgi_api::Failure| {
            if f == cgi_api::Failure::Timeout {
                core.stats.cgi_timeouts += 1;
            } else {
                core.stats.cgi_failures += 1;
            }
            core.push_simple(conn, f.status(), head, mode, "");
        };
        match result {
            Err(f) => failed(self, conn, f),
            Ok(out) => match cgi_api::split_output(out) {
                Err(e) => failed(self, conn, cgi_api::Failure::BadOutput(e)),
                Ok((o, body, copied)) => {
                    self.stats.cgi_header_bytes_copied += copied as u64;
                    if let cgi_api::Kind::LocalRedirect(loc) = &o.kind {
                        drop(body);
                        if w.redirects >= self.cfg.max_cgi_redirects {
                            failed(self, conn, cgi_api::Failure::Fault);
                        } else {
                            let Ok(target) = parse_target(loc.as_bytes()) else {
                                failed(self, conn, cgi_api::Failure::BadOutput(cgi_api::OutputError::BadLocation));
                                return self.finish(conn, mode);
                            };
                            let mut new = (*req).clone();
                            new.target = target;
                            if new.method == Method::Post {
                                new.method = Method::Get;
                            }
                            new.content_length = 0;
                            new.chunked = false;
                            if new.target.path.starts_with("/cgi-bin/") {
                                self.dispatch_cgi(conn, Box::new(new), None, w.redirects + 1);
                                return;
                            }
                            let path = new.target.path.clone();
                            self.serve_static(conn, &new, &path, mode);
                        }
                    } else {
                        self.cgi_response(conn, &o, body, head, mode);
                    }
                }
            },
        }
        self.finish(conn, mode);
    }

    fn finish(&mut self, conn: &mut Conn<'d, S::File>, mode: ConnMode) {
        if mode == ConnMode::Close {
            conn.outq.push_back(Out::Close);
            conn.state = State::Closing;
        }
    }

    fn cgi_response(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        o: &cgi_api::Output,
        body: Aggregate<'d>,
        head: bool,
        mode: ConnMode,
    ) {
        let no_body = o.status == 204 || o.status == 304;
        let Some(mut a) = self.prefix(o.status, &o.reason, mode) else { return conn.outq.push_back(Out::Close) };
        let len = body.len();
        let tail = self.gen(|w| {
            if let Some(ct) = &o.content_type {
                write!(w, "Content-Type: {ct}\r\n")?;
            }
            for (n, v) in &o.fields {
                write!(w, "{n}: {v}\r\n")?;
            }
            if !no_body {
                write!(w, "Content-Length: {len}\r\n")?;
            }
            w.write_str("\r\n")
        });
        match tail.map(|t| a.append(t)) {
            Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
            _ => return conn.outq.push_back(Out::Close),
        }
        if !head && !no_body && !body.is_empty() {
            self.stats.body_bytes_by_ref += body.len() as u64;
            conn.outq.push_back(Out::Data(body));
        }
    }
}

impl<'d, F> Conn<'d, F> {
    fn new(remote: Option<Remote>, now: u64) -> Self {
        Self {
            inq: VecDeque::new(),
            inq_len: 0,
            scan: Vec::new(),
            outq: VecDeque::new(),
            state: State::Reading,
            req_start: None,
            last_active: now,
            remote,
            eof: false,
            continue_sent: false,
        }
    }

    /// Makes `scan` the first `min(inq_len, cap)` input bytes (it is always
    /// a prefix of them: while a body is awaited it is not refilled).
    fn refill(&mut self, cap: usize, stats: &mut HttpStats) {
        let mut skip = self.scan.len();
        if skip >= cap || skip >= self.inq_len {
            return;
        }
        let before = self.scan.len();
        'outer: for a in &self.inq {
            for s in a.slices() {
                if skip >= s.len() {
                    skip -= s.len();
                    continue;
                }
                let room = cap - self.scan.len();
                let part = &s[skip..];
                self.scan.extend_from_slice(&part[..part.len().min(room)]);
                skip = 0;
                if self.scan.len() >= cap {
                    break 'outer;
                }
            }
        }
        stats.request_bytes_copied_to_parse += (self.scan.len() - before) as u64;
    }

    /// Drops `n` bytes from the front of the input; then refills the parse
    /// buffer if `refill` (not when a body follows).
    fn consume(&mut self, mut n: usize, stats: &mut HttpStats, cap: usize, refill: bool) {
        let s = n.min(self.scan.len());
        self.scan.drain(..s);
        self.inq_len -= n;
        while n > 0 {
            let Some(front) = self.inq.front_mut() else { break };
            if front.len() <= n {
                n -= front.len();
                self.inq.pop_front();
            } else {
                let _ = front.advance(n);
                n = 0;
            }
        }
        if refill {
            self.refill(cap, stats);
        }
    }

    /// Takes `n` bytes from the front of the input as one aggregate, by
    /// reference (flattened into `pool` if it would need more than
    /// `MAX_SLICES` slices).
    fn take(
        &mut self,
        n: usize,
        pool: PoolId,
        stats: &mut HttpStats,
        cap: usize,
    ) -> Result<Aggregate<'d>, iolite::Error> {
        let mut body: Option<Aggregate<'d>> = None;
        let mut left = n;
        while left > 0 {
            let Some(mut front) = self.inq.pop_front() else { return Err(iolite::Error::InvalidArgument) };
            let piece = if front.len() <= left {
                front
            } else {
                let tail = front.split_off(left)?;
                self.inq.push_front(tail);
                front
            };
            left -= piece.len();
            self.inq_len -= piece.len();
            body = Some(match body {
                None => piece,
                Some(mut b) => match b.append(piece) {
                    Ok(()) => b,
                    Err((_, piece)) => {
                        stats.bodies_flattened += 1;
                        stats.body_bytes_flattened += b.len() as u64;
                        b.flatten(pool)?;
                        b.append(piece).map_err(|(e, _)| e)?;
                        b
                    }
                },
            });
        }
        let s = n.min(self.scan.len());
        self.scan.drain(..s);
        stats.request_body_bytes_copied_to_parse += s as u64;
        self.refill(cap, stats);
        Ok(body.unwrap_or_else(|| unreachable!("n > 0")))
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// A server generating its headers into `pool` (owned by `d`).
    pub fn new(d: &'d Domain, pool: PoolId, src: S, clock: C, cfg: Config) -> Self {
        let hcache = HeaderCache::new(cfg.header_cache_entries);
        Self {
            core: Core {
                d,
                pool,
                src,
                clock,
                cfg,
                hcache,
                stats: HttpStats::default(),
                date: (u64::MAX, [0; 29]),
                next_cgi: 1,
                next_boundary: 0,
            },
            conns: BTreeMap::new(),
            next_conn: 1,
            woken: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.core.cfg
    }

    /// The counters.
    pub fn stats(&self) -> HttpStats {
        let mut s = self.core.stats;
        s.connections_active = self.conns.len() as u64;
        s
    }

    /// The counters as the `httpd` component of `/cgi-bin/stats`.
    pub fn component(&self) -> cgi_api::Component {
        let s = self.stats();
        cgi_api::Component::new("httpd")
            .with("connections_active", s.connections_active)
            .with("connections_accepted", s.connections_accepted)
            .with("connections_refused", s.connections_refused)
            .with("requests", s.requests)
            .with("responses_2xx", s.responses_2xx)
            .with("responses_3xx", s.responses_3xx)
            .with("responses_4xx", s.responses_4xx)
            .with("responses_5xx", s.responses_5xx)
            .with("not_modified", s.not_modified)
            .with("partial", s.partial)
            .with("header_cache_hits", s.header_cache_hits)
            .with("header_cache_misses", s.header_cache_misses)
            .with("header_cache_invalidations", s.header_cache_invalidations)
            .with("header_bytes_generated", s.header_bytes_generated)
            .with("body_bytes_by_ref", s.body_bytes_by_ref)
            .with("cgi_requests", s.cgi_requests)
            .with("cgi_timeouts", s.cgi_timeouts)
            .with("cgi_failures", s.cgi_failures)
            .with("request_timeouts", s.request_timeouts)
            .with("idle_closes", s.idle_closes)
            .with_iolite(&self.core.d.stats())
    }

    /// The file source (e.g. to reconnect it).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.core.src
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.core.clock
    }

    /// Drops the cached headers (on `FLAG_RECLAIM` from the pool's peers).
    pub fn drop_caches(&mut self) {
        self.core.hcache.clear();
    }

    /// Number of cached response headers.
    pub fn header_cache_len(&self) -> usize {
        self.core.hcache.len()
    }

    /// A new connection. At the limit it is refused: the `Err` holds a
    /// complete `503` response to send before closing.
    ///
    /// At the limit, the keep-alive connection idle the longest (nothing to
    /// parse, nothing to send) is closed to make room, as nginx reuses its
    /// idle keep-alive connections when it runs out; only when every
    /// connection is busy is the new one refused.
    pub fn accept(&mut self, remote: Option<Remote>) -> Result<ConnId, Aggregate<'d>> {
        let live = self.conns.values().filter(|c| !matches!(c.state, State::Closing)).count();
        if live >= self.core.cfg.max_connections {
            let victim = self
                .conns
                .iter()
                .filter(|(_, c)| matches!(c.state, State::Reading) && c.inq_len == 0 && c.outq.is_empty())
                .min_by_key(|(_, c)| c.last_active)
                .map(|(&id, _)| id);
            if let Some(v) = victim {
                let conn = self.conns.get_mut(&v).expect("found above");
                conn.outq.push_back(Out::Close);
                conn.state = State::Closing;
                self.core.stats.idle_evictions += 1;
                self.woken.push(ConnId(v));
            }
        }
        let live = self.conns.values().filter(|c| !matches!(c.state, State::Closing)).count();
        if live >= self.core.cfg.max_connections {
            self.core.stats.connections_refused += 1;
            let a = self
                .core
                .simple(503, false, ConnMode::Close, "Retry-After: 1\r\n")
                .unwrap_or_else(|| Aggregate::new(self.core.d));
            return Err(a);
        }
        let id = self.next_conn;
        self.next_conn = self.next_conn.wrapping_add(1).max(1);
        let now = self.core.clock.now_ms();
        self.conns.insert(id, Conn::new(remote, now));
        self.core.stats.connections_accepted += 1;
        Ok(ConnId(id))
    }

    /// Connections that have output because of another call (`accept`
    /// closing an idle one to make room): pull them with [`Server::next`].
    pub fn take_woken(&mut self) -> Vec<ConnId> {
        core::mem::take(&mut self.woken)
    }

    /// Whether `c` is closing (its next action is `Close`).
    pub fn is_closing(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(conn.state, State::Closing))
    }

    /// Bytes received on `c` (by reference; any split, any number of
    /// pipelined requests). Then call [`Server::next`].
    pub fn receive(&mut self, c: ConnId, data: Aggregate<'d>) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        if matches!(conn.state, State::Closing) || data.is_empty() {
            return;
        }
        conn.last_active = self.core.clock.now_ms();
        if conn.inq_len + data.len() > self.core.cfg.max_buffered {
            // More unparsed input than any legitimate client sends.
            conn.inq.clear();
            conn.inq_len = 0;
            conn.scan.clear();
            conn.outq.push_back(Out::Close);
            conn.state = State::Closing;
            return;
        }
        conn.inq_len += data.len();
        conn.inq.push_back(data);
        // A body being received is taken by reference, never parsed.
        if !matches!(conn.state, State::Body(_)) {
            conn.refill(self.core.cfg.scan_cap(), &mut self.core.stats);
        }
        self.core.process(conn);
    }

    /// The client closed its side (FIN). Complete requests already
    /// received are answered, then the connection closes.
    pub fn receive_eof(&mut self, c: ConnId) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        conn.eof = true;
        self.core.process(conn);
    }

    /// Whether `c`'s output waits for its file source (a read was busy):
    /// call [`Server::next`] for it again later (when buffers come back).
    pub fn waits_for_source(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(conn.outq.front(), Some(Out::File { .. })))
    }

    /// Whether [`Server::next`] has something for `c`.
    pub fn has_output(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| !conn.outq.is_empty())
    }

    /// Whether `c`'s next output is already in memory (a header or a CGI
    /// reply), so that sending it needs no new buffers. A component that
    /// stops pulling output while its pool is low must still send these:
    /// they are what fills the pool, and only sending them frees it.
    pub fn holds_output(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(conn.outq.front(), Some(Out::Data(_))))
    }

    /// The next thing to do for `c`, in order; `None` when there is nothing
    /// (until more input, a CGI reply or a timeout). Call it until `None`
    /// (or until the transport is full; call again when it drains).
    pub fn next(&mut self, c: ConnId) -> Option<Action<'d>> {
        let core = &mut self.core;
        let conn = self.conns.get_mut(&c.0)?;
        conn.last_active = core.clock.now_ms();
        if conn.outq.is_empty() {
            core.process(conn);
        }
        let out = conn.outq.pop_front()?;
        let act = match out {
            Out::Close => {
                conn.outq.clear();
                conn.state = State::Closing;
                Action::Close
            }
            Out::Cgi(call) => {
                if let State::Cgi(w) = &mut conn.state {
                    if w.id == call.id {
                        w.deadline = core.clock.now_ms() + core.cfg.cgi_timeout_ms;
                    }
                }
                Action::Cgi(call)
            }
            file @ Out::File { .. } => {
                conn.outq.push_front(file);
                match core.pull_file(conn) {
                    Ok(Some(a)) => Action::Send(a),
                    // Nothing now: `waits_for_source` says to ask again.
                    Ok(None) => return None,
                    Err(()) => Self::abort(core, conn),
                }
            }
            Out::Data(mut a) => {
                loop {
                    match conn.outq.front() {
                        Some(Out::Data(_)) => {
                            let Some(Out::Data(b)) = conn.outq.pop_front() else { unreachable!() };
                            if let Err((_, b)) = a.append(b) {
                                conn.outq.push_front(Out::Data(b));
                                break;
                            }
                        }
                        Some(Out::File { .. }) => {
                            match core.pull_file(conn) {
                                Ok(Some(chunk)) => {
                                    if let Err((_, chunk)) = a.append(chunk) {
                                        conn.outq.push_front(Out::Data(chunk));
                                    }
                                }
                                Ok(None) => {}
                                Err(()) => {
                                    // The header is already promised a body it
                                    // cannot get: drop the connection.
                                    drop(a);
                                    return Some(Self::abort(core, conn));
                                }
                            }
                            break;
                        }
                        _ => break,
                    }
                }
                Action::Send(a)
            }
        };
        Some(act)
    }

    fn abort(core: &mut Core<'d, S, C>, conn: &mut Conn<'d, S::File>) -> Action<'d> {
        for o in conn.outq.drain(..) {
            if let Out::File { f, .. } = o {
                core.src.close(f);
            }
        }
        conn.state = State::Closing;
        Action::Close
    }

    /// Whether connection `c` still waits for the CGI's answer to request
    /// `id` (false once it was answered, timed out with 504, or `c` is gone).
    pub fn cgi_awaiting(&self, c: ConnId, id: u32) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(&conn.state, State::Cgi(w) if w.id == id))
    }

    /// The CGI's answer to request `id` on `c`: its output (by reference),
    /// or how it failed. Late answers (after the 504) are dropped.
    pub fn cgi_reply(&mut self, c: ConnId, id: u32, result: Result<Aggregate<'d>, cgi_api::Failure>) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        match &conn.state {
            State::Cgi(w) if w.id == id => {}
            _ => {
                self.core.stats.cgi_late_replies += 1;
                return;
            }
        }
        let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
        self.core.cgi_done(conn, w, result);
        self.core.process(conn);
    }

    /// Applies timeouts: a request arriving for longer than
    /// `request_timeout_ms` gets 408 and the connection closes; a CGI
    /// request older than `cgi_timeout_ms` gets 504; a keep-alive
    /// connection idle for `idle_timeout_ms` is closed. Returns the
    /// connections that now have output. Call it periodically.
    pub fn tick(&mut self) -> Vec<ConnId> {
        let now = self.core.clock.now_ms();
        let cfg_req = self.core.cfg.request_timeout_ms;
        let cfg_idle = self.core.cfg.idle_timeout_ms;
        let cfg_send = self.core.cfg.send_timeout_ms;
        let mut ready = Vec::new();
        for (&id, conn) in self.conns.iter_mut() {
            let had = conn.outq.len();
            match &conn.state {
                State::Cgi(w) if now >= w.deadline => {
                    let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                    self.core.cgi_done(conn, w, Err(cgi_api::Failure::Timeout));
                    self.core.process(conn);
                }
                State::Reading if !conn.outq.is_empty() && now.saturating_sub(conn.last_active) >= cfg_send => {
                    // Output waits and nothing was taken for that long: the
                    // client stopped reading. Its slot and buffers go.
                    self.core.stats.send_timeouts += 1;
                    for o in conn.outq.drain(..) {
                        if let Out::File { f, .. } = o {
                            self.core.src.close(f);
                        }
                    }
                    conn.outq.push_back(Out::Close);
                    conn.state = State::Closing;
                }
                State::Reading | State::Body(_) | State::Chunked(_) => {
                    if conn.req_start.is_some_and(|t| now.saturating_sub(t) >= cfg_req) {
                        self.core.stats.request_timeouts += 1;
                        self.core.reject(conn, 408, false);
                    } else if conn.outq.is_empty()
                        && conn.inq_len == 0
                        && now.saturating_sub(conn.last_active) >= cfg_idle
                    {
                        self.core.stats.idle_closes += 1;
                        conn.outq.push_back(Out::Close);
                        conn.state = State::Closing;
                    }
                }
                _ => {}
            }
            if conn.outq.len() != had || (had > 0 && !conn.outq.is_empty()) {
                ready.push(ConnId(id));
            }
        }
        ready
    }

    /// The connection is gone (closed by either side, or reset): frees its
    /// state and everything it held.
    pub fn closed(&mut self, c: ConnId) {
        if let Some(mut conn) = self.conns.remove(&c.0) {
            for o in conn.outq.drain(..) {
                if let Out::File { f, .. } = o {
                    self.core.src.close(f);
                }
            }
        }
    }

    /// Number of open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }
}
