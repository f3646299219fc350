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
//!
//! Here: the public API ([`Server`]), the per-connection state and the
//! response helpers every path shares (status line, complete small
//! responses, dispatch by method). The paths have modules of their own,
//! all methods of the same `Core` on the same `Conn`:
//! * `input`: buffered bytes into requests (heads parsed from a bounded
//!   copy, bodies taken by reference, chunked bodies decoded);
//! * `files`: static files (preconditions, ranges, the header cache, the
//!   file's bytes pulled lazily from the [`FileSource`]);
//! * `cgi`: CGI requests out ([`CgiCall`]) and their answers back into
//!   responses (local redirects included), whole or streamed as the
//!   program produces them.

mod cgi;
mod files;
mod input;
mod queue;
mod upload;

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt::Write;

use cgi_api::output::reason;
use iolite::gen::generate;
use iolite::{Aggregate, Domain, PoolId};

use crate::hcache::HeaderCache;
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource};
use crate::{date, Config, SERVER};

pub use cgi::OverWindow;
use cgi::{CgiStream, CgiWait, Pulled};
pub use cgi_api::wire::Control;
use input::ChunkedBody;
use queue::GapQueue;
use upload::Upload;
pub use upload::PART_MAX;

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
    /// The POST body, by reference, as it arrived (with `more`: the part
    /// of it that arrived so far, maybe none).
    pub body: Option<Aggregate<'d>>,
    /// The body goes on in [`Action::CgiBody`] parts (a streamed body:
    /// send with `cgi_api::wire::encode_request_more`).
    pub more: bool,
}

/// What the caller must do next for a connection.
#[derive(Debug)]
pub enum Action<'d> {
    /// Send these bytes (by reference) on the connection.
    Send(Aggregate<'d>),
    /// Hand this request to the CGI component.
    Cgi(CgiCall<'d>),
    /// Hand the cgi the next part of request `id`'s streamed body (a body
    /// part message, `cgi_api::wire::body_part_tag`), by reference.
    CgiBody {
        /// The request.
        id: u32,
        /// The client's slices, chunk framing skipped.
        part: Aggregate<'d>,
        /// More parts follow (this one needs a credit back).
        more: bool,
    },
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
    /// CGI responses streamed (their header sent before the program ended).
    pub cgi_streams: u64,
    /// Parts of streamed CGI answers received.
    pub cgi_stream_parts: u64,
    /// Streamed responses cut off (the cgi failed or stopped answering,
    /// or ended short of its `Content-Length`): the connection closed
    /// after what was sent.
    pub cgi_streams_aborted: u64,
    /// Bytes a CGI sent beyond the `Content-Length` it announced (dropped).
    pub cgi_stream_excess_bytes: u64,
    /// File reads the source refused for now (busy): the response waits
    /// and is read again later instead of being cut short.
    pub file_reads_deferred: u64,
    /// Times a static request waited for the file source: refused for
    /// now (busy), or queued behind requests that were (the oldest try
    /// first). It is tried again later (`Config::source_wait_ms`).
    pub file_opens_deferred: u64,
    /// Requests answered 503 because the source stayed busy for
    /// `Config::source_wait_ms`.
    pub file_opens_expired: u64,
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
    /// Request bodies streamed to the cgi in parts.
    pub cgi_uploads: u64,
    /// Body parts handed to the cgi (after the call).
    pub cgi_upload_parts: u64,
    /// Body bytes handed to the cgi in those parts, by reference.
    pub cgi_upload_bytes: u64,
    /// Body bytes read and dropped because the answer no longer needed
    /// them (it was complete before the body).
    pub cgi_upload_discarded_bytes: u64,
    /// Streamed bodies that could not be completed (the client stalled,
    /// half-closed or sent bad framing).
    pub cgi_uploads_aborted: u64,
    /// CGI requests held while the cgi was away ([`Server::cgi_down`]).
    pub cgi_queued: u64,
    /// Held requests handed to the new incarnation ([`Server::cgi_up`]).
    pub cgi_queue_served: u64,
    /// Held requests whose client left before the cgi came back.
    pub cgi_queue_dropped: u64,
    /// Requests refused with 503 while the cgi was away: the queue was
    /// full (by count or bytes), the body streams, or the cgi is held down.
    pub cgi_queue_refused: u64,
    /// Held requests answered 503 because the cgi did not come back within
    /// `cgi_queue_timeout_ms`.
    pub cgi_queue_expired: u64,

    // Slow and fragmented input (`Config::min_input_rate`,
    // `Config::max_input_slices`); each 408 here is in `request_timeouts`.
    /// Request heads not complete within `request_timeout_ms` (408).
    pub head_timeouts_408: u64,
    /// Requests whose head arrived slower than `min_input_rate` (408).
    pub head_too_slow: u64,
    /// Request bodies that arrived slower than `min_input_rate` (408).
    pub body_too_slow: u64,
    /// Times a pending head's input was copied into one buffer (it had
    /// more than `max_input_slices` slices).
    pub input_flattens: u64,
    /// Bytes copied by those flattenings.
    pub input_bytes_flattened: u64,
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
    /// A static request whose file the source could not open for now (fs
    /// short of buffers or handles while clients hold its pages: they come
    /// back as the clients read). Tried again when pulled; 503 once it
    /// has waited `Config::source_wait_ms` since `since`. Nothing after it
    /// is parsed until it is answered (only a `Close` may follow it).
    Retry {
        req: Box<Request>,
        path: String,
        mode: ConnMode,
        since: u64,
        ticket: Ticket,
    },
    /// The rest of a streamed CGI body: the parts in `State::Stream`, as
    /// they come.
    Stream,
    Close,
}

enum State<'d> {
    Reading,
    Body(Box<Request>),
    Chunked(Box<ChunkedBody<'d>>),
    Cgi(CgiWait<'d>),
    /// A CGI response is being streamed (its header is queued).
    Stream(Box<CgiStream<'d>>),
    Closing,
}

/// A connection: its input (buffered aggregates, and a copy of their
/// first bytes to parse heads from; see `input`), its output in order, and
/// where its current request is.
struct Conn<'d, F> {
    inq: VecDeque<Aggregate<'d>>,
    inq_len: usize,
    scan: Vec<u8>,
    outq: VecDeque<Out<'d, F>>,
    state: State<'d>,
    req_start: Option<u64>,
    /// Bytes received on the connection in all, and how many of them had
    /// arrived before the current request's first byte (set with
    /// `req_start`): the request's bytes so far are the difference.
    received: u64,
    req_base: u64,
    last_active: u64,
    remote: Option<Remote>,
    eof: bool,
    continue_sent: bool,
    /// A body going to the cgi in parts (see `upload`).
    upload: Option<Box<Upload<'d>>>,
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
    /// Credits and cancels for the cgi's streams, until the caller takes
    /// them ([`Server::take_cgi_controls`]).
    controls: Vec<Control>,
    /// CGI calls held while the cgi is away (see `queue`).
    gap: GapQueue<'d>,
    /// Static requests waiting for the file source (`Out::Retry`).
    waiting: SourceQueue,
}

/// How many of the oldest requests waiting for the file source may try
/// it: the pages that come back go to them, not to the newest request
/// or the lowest connection number (the component pumps connections in
/// that order), which once kept one waiting for 10 s and a 503.
const SOURCE_TRIERS: usize = 8;

/// The static requests waiting for the file source, by ticket (oldest
/// first). A ticket leaves the queue when dropped: answered, expired, or
/// its connection gone.
#[derive(Default, Clone)]
struct SourceQueue(Rc<RefCell<BTreeSet<u64>>>, Rc<Cell<u64>>);

/// A place in the [`SourceQueue`].
struct Ticket {
    n: u64,
    queue: SourceQueue,
}

impl SourceQueue {
    fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }

    fn join(&self) -> Ticket {
        let n = self.1.get();
        self.1.set(n + 1);
        self.0.borrow_mut().insert(n);
        Ticket { n, queue: self.clone() }
    }

    /// Whether `t` is among the oldest `SOURCE_TRIERS`.
    fn may_try(&self, t: &Ticket) -> bool {
        self.0.borrow().iter().take(SOURCE_TRIERS).any(|&n| n == t.n)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.queue.0.borrow_mut().remove(&self.n);
    }
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

    /// Whether `bytes` arriving in `elapsed` ms is slower than
    /// `min_input_rate`, once past `rate_grace_ms`.
    fn too_slow(&self, bytes: u64, elapsed: u64) -> bool {
        let rate = self.cfg.min_input_rate;
        rate > 0 && elapsed >= self.cfg.rate_grace_ms && bytes.saturating_mul(1000) < rate.saturating_mul(elapsed)
    }

    /// A pending head's input in more than `max_input_slices` slices is
    /// copied into one buffer of our pool (counted), and the transport's
    /// buffers go back. Only while everything buffered can be the head
    /// (no more than the parser looks at): a larger input is refused by
    /// the parser's limits anyway.
    fn bound_head_input(&mut self, conn: &mut Conn<'d, S::File>) {
        if !matches!(conn.state, State::Reading) || conn.inq_len > self.cfg.scan_cap() {
            return;
        }
        let slices: usize = conn.inq.iter().map(Aggregate::slice_count).sum();
        if slices <= self.cfg.max_input_slices.max(1) {
            return;
        }
        let n = conn.inq_len;
        let Ok(mut b) = self.d.alloc(self.pool, n) else { return };
        let mut at = 0;
        for a in &conn.inq {
            at += a.read_at(0, &mut b.writable()[at..at + a.len()]);
        }
        if at != n {
            return;
        }
        let Ok(one) = b.seal(n) else { return };
        self.stats.input_flattens += 1;
        self.stats.input_bytes_flattened += n as u64;
        conn.inq.clear();
        conn.inq.push_back(one);
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
                controls: Vec::new(),
                gap: GapQueue::default(),
                waiting: SourceQueue::default(),
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
            .with("cgi_streams", s.cgi_streams)
            .with("cgi_stream_parts", s.cgi_stream_parts)
            .with("cgi_streams_aborted", s.cgi_streams_aborted)
            .with("cgi_uploads", s.cgi_uploads)
            .with("cgi_upload_parts", s.cgi_upload_parts)
            .with("cgi_upload_bytes", s.cgi_upload_bytes)
            .with("cgi_upload_discarded_bytes", s.cgi_upload_discarded_bytes)
            .with("cgi_uploads_aborted", s.cgi_uploads_aborted)
            .with("cgi_queued", s.cgi_queued)
            .with("cgi_queue_served", s.cgi_queue_served)
            .with("cgi_queue_dropped", s.cgi_queue_dropped)
            .with("cgi_queue_refused", s.cgi_queue_refused)
            .with("cgi_queue_expired", s.cgi_queue_expired)
            .with("request_timeouts", s.request_timeouts)
            .with("idle_closes", s.idle_closes)
            .with("head_timeouts_408", s.head_timeouts_408)
            .with("head_too_slow", s.head_too_slow)
            .with("body_too_slow", s.body_too_slow)
            .with("input_flattens", s.input_flattens)
            .with("input_bytes_flattened", s.input_bytes_flattened)
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
            // More unparsed input than any legitimate client sends. A held
            // call never reached the cgi: dropped, nothing to cancel.
            if self.core.gap.take(c.0).is_some() {
                self.core.stats.cgi_queue_dropped += 1;
            } else {
                self.core.leave_cgi(conn);
            }
            conn.inq.clear();
            conn.inq_len = 0;
            conn.scan.clear();
            conn.outq.push_back(Out::Close);
            conn.state = State::Closing;
            return;
        }
        conn.inq_len += data.len();
        conn.received += data.len() as u64;
        // Appended to the last aggregate where it fits: pieces that
        // continue each other in the transport's buffer (tiny segments
        // netstack put in one page) become one slice.
        match conn.inq.back_mut() {
            Some(last) => {
                if let Err((_, data)) = last.append(data) {
                    conn.inq.push_back(data);
                }
            }
            None => conn.inq.push_back(data),
        }
        // A body being received is taken by reference, never parsed (a
        // chunked one's framing is read as it is needed).
        if !matches!(conn.state, State::Body(_) | State::Chunked(_)) && conn.upload.is_none() {
            self.core.bound_head_input(conn);
            conn.refill(self.core.cfg.scan_cap(), &mut self.core.stats);
        }
        self.core.process(conn);
    }

    /// The client closed its side (FIN). Complete requests already
    /// received are answered, then the connection closes.
    pub fn receive_eof(&mut self, c: ConnId) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        conn.eof = true;
        // A client that leaves while its CGI call is held for the cgi's
        // return: the call is dropped, the connection closes.
        self.core.drop_held(c.0, conn);
        self.core.process(conn);
    }

    /// Whether `c`'s output waits for its file source (a read or an open
    /// was busy): call [`Server::next`] for it again later (when buffers
    /// come back).
    pub fn waits_for_source(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(conn.outq.front(), Some(Out::File { .. } | Out::Retry { .. })))
    }

    /// Whether [`Server::next`] has something for `c`.
    pub fn has_output(&self, c: ConnId) -> bool {
        self.conns
            .get(&c.0)
            .is_some_and(|conn| !conn.outq.is_empty() || conn.upload.as_ref().is_some_and(|u| u.sendable()))
    }

    /// Whether `c`'s streamed request body waits for the cgi (its window
    /// is full): stop reading the connection until a credit comes
    /// ([`Server::cgi_input_credit`]), so that TCP's window closes on the
    /// client instead of the body piling up here.
    pub fn input_paused(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| conn.upload.as_ref().is_some_and(|u| u.window_full()))
    }

    /// Whether the input `c` receives next is a request body for the cgi
    /// (its head was parsed; the body, whole or streamed, has not all
    /// arrived): a transport that can keep such input apart from other
    /// clients' (netstack's hand-off pool) lets the body reach the cgi by
    /// reference. Input after the body is parsed as usual wherever it
    /// lands.
    pub fn input_to_cgi(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| {
            conn.upload.is_some()
                || match &conn.state {
                    State::Body(req) => input::streams_body(req),
                    State::Chunked(cb) => cb.streams(),
                    _ => false,
                }
        })
    }

    /// Whether `c` has a request body streaming to the cgi (or being read
    /// to its end and discarded).
    pub fn uploading(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| conn.upload.is_some())
    }

    /// The cgi consumed `parts` body messages of request `id` on `c` (an
    /// input credit): more of the body may go. Then pull [`Server::next`]
    /// for `c` (and read the connection again if it was paused). False
    /// if no body of that request is streaming (a late credit: ignore).
    pub fn cgi_input_credit(&mut self, c: ConnId, id: u32, parts: u32) -> bool {
        let Some(conn) = self.conns.get_mut(&c.0) else { return false };
        if !self.core.upload_credit(conn, id, parts) {
            return false;
        }
        self.core.process(conn);
        true
    }

    /// The next action for `c` that does not go to the client: a part of
    /// its streamed request body for the cgi, while the cgi has input
    /// credit. Call it (until `None`) for a connection whose transport
    /// takes nothing now (netstack closed its send window, or its allowance is
    /// spent), instead of [`Server::next`]: a program that reads its body
    /// while its answer waits for the client then still gets the body, and
    /// the only thing that waits is what the client is slow to take. (A
    /// program that blocks on its output stops crediting input; then the
    /// client's upload waits too, and the send timeout ends a client that
    /// reads nothing.) Taking body parts is no output taken by the client:
    /// it does not put off the send timeout.
    pub fn next_input(&mut self, c: ConnId) -> Option<Action<'d>> {
        let conn = self.conns.get_mut(&c.0)?;
        self.core.upload_next(conn)
    }

    /// Whether `c`'s next output is already in memory (a header or a CGI
    /// reply), so that sending it needs no new buffers. A component that
    /// stops pulling output while its pool is low must still send these:
    /// they are what fills the pool, and only sending them frees it.
    pub fn holds_output(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match conn.outq.front() {
            Some(Out::Data(_)) => true,
            // A streamed CGI part waits in the cgi's pool.
            Some(Out::Stream) => matches!(&conn.state, State::Stream(s) if !s.parts.is_empty()),
            _ => false,
        })
    }

    /// The next thing to do for `c`, in order; `None` when there is nothing
    /// (until more input, a CGI reply or a timeout). Call it until `None`
    /// (or until the transport is full; call again when it drains).
    pub fn next(&mut self, c: ConnId) -> Option<Action<'d>> {
        self.next_within(c, usize::MAX)
    }

    /// As [`Server::next`], reading at most `max` bytes of a file into the
    /// send (headers and CGI output come whole): a transport that can take
    /// only a little now (a peer with a small window) then gets only a
    /// little of the file cache pinned for it.
    pub fn next_within(&mut self, c: ConnId, max: usize) -> Option<Action<'d>> {
        let core = &mut self.core;
        let conn = self.conns.get_mut(&c.0)?;
        conn.last_active = core.clock.now_ms();
        if conn.outq.is_empty() {
            core.process(conn);
            if matches!(conn.outq.front(), Some(Out::Retry { .. })) {
                // Refused just now: tried again on a later pull.
                return None;
            }
        }
        // Body parts go first: the answer may wait for them.
        if let Some(a) = core.upload_next(conn) {
            return Some(a);
        }
        let out = conn.outq.pop_front()?;
        let act = match out {
            Out::Close => {
                conn.outq.clear();
                conn.state = State::Closing;
                Action::Close
            }
            Out::Cgi(call) => {
                if core.gap.down.is_some() {
                    // The cgi is away: held until it is back (or refused
                    // with 503, which is then the next output).
                    if core.hold_cgi(c.0, conn, call) {
                        return None;
                    }
                    return self.next_within(c, max);
                }
                if let State::Cgi(w) = &mut conn.state {
                    if w.id == call.id {
                        w.deadline = core.clock.now_ms() + core.cfg.cgi_timeout_ms;
                    }
                }
                core.upload_call_sent(conn, call.id, call.more);
                Action::Cgi(call)
            }
            Out::Stream => match core.pull_stream(conn) {
                Pulled::Act(a) => a,
                Pulled::Wait => return None,
                Pulled::Ended => return self.next_within(c, max),
            },
            Out::Retry { req, path, mode, since, ticket } => {
                let expired = core.clock.now_ms().saturating_sub(since) >= core.cfg.source_wait_ms;
                if !expired && !core.waiting.may_try(&ticket) {
                    // Older ones first.
                    conn.outq.push_front(Out::Retry { req, path, mode, since, ticket });
                    return None;
                }
                // Its answer (or the request again) takes its place: what
                // was queued behind it (a `Close`) stays behind.
                let behind = core::mem::take(&mut conn.outq);
                if expired {
                    core.stats.file_opens_expired += 1;
                    drop(ticket);
                    core.push_simple(conn, 503, req.method == Method::Head, mode, "");
                } else {
                    core.serve_static_waited(conn, &req, &path, mode, Some(ticket));
                }
                let refused = match conn.outq.back_mut() {
                    Some(Out::Retry { since: again, .. }) => {
                        *again = since;
                        true
                    }
                    _ => false,
                };
                conn.outq.extend(behind);
                if refused {
                    return None;
                }
                return self.next_within(c, max);
            }
            file @ Out::File { .. } => {
                conn.outq.push_front(file);
                match core.pull_file(conn, max) {
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
                        Some(Out::File { .. }) if a.len() < max => {
                            match core.pull_file(conn, max - a.len()) {
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

    /// Whether connection `c` still waits for the CGI to send something
    /// for request `id`: its answer, or (streamed) a part it has the credit
    /// for. False once it was answered, timed out with 504, while every
    /// part it may send waits here, or when `c` is gone.
    pub fn cgi_awaiting(&self, c: ConnId, id: u32) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match &conn.state {
            State::Cgi(w) => w.id == id,
            State::Stream(s) => s.id == id && s.owed(),
            _ => false,
        })
    }

    /// Whether request `id`'s answer is still coming on `c`: awaited, or
    /// being streamed (whether or not the cgi has credit now).
    pub fn cgi_open(&self, c: ConnId, id: u32) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match &conn.state {
            State::Cgi(w) => w.id == id,
            State::Stream(s) => s.id == id && !s.done,
            _ => false,
        })
    }

    /// The CGI's answer to request `id` on `c`: its whole output (by
    /// reference), the last part of a streamed one ([`Server::cgi_part`]),
    /// or how it failed. Late answers (after the 504) are dropped. A
    /// failure once a streamed response started ends the connection after
    /// what was sent (the client sees an incomplete response).
    pub fn cgi_reply(&mut self, c: ConnId, id: u32, result: Result<Aggregate<'d>, cgi_api::Failure>) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        match &conn.state {
            State::Cgi(w) if w.id == id => {
                let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                self.core.cgi_done(conn, w, result);
            }
            State::Stream(s) if s.id == id => self.core.stream_end(conn, result),
            _ => {
                self.core.stats.cgi_late_replies += 1;
                return;
            }
        }
        self.core.process(conn);
    }

    /// A part of the CGI's streamed answer to request `id` on `c`, by
    /// reference; more follow, the last comes with [`Server::cgi_reply`].
    /// Once the parts hold the CGI's whole header the response starts;
    /// each part then goes out as [`Server::next`] pulls it. A part for a
    /// request that is no longer waiting is dropped (counted as late).
    /// `Err(OverWindow)`: the cgi sent more parts than its window allows
    /// (`cgi_api::wire::STREAM_WINDOW`) without the credits that
    /// [`Server::take_cgi_controls`] gave back: it broke the protocol.
    pub fn cgi_part(&mut self, c: ConnId, id: u32, part: Aggregate<'d>) -> Result<(), OverWindow> {
        let Some(conn) = self.conns.get_mut(&c.0) else { return Ok(()) };
        match &conn.state {
            State::Cgi(w) if w.id == id => {}
            State::Stream(s) if s.id == id => {}
            _ => {
                self.core.stats.cgi_late_replies += 1;
                return Ok(());
            }
        }
        self.core.cgi_part(conn, part)?;
        self.core.process(conn);
        Ok(())
    }

    /// The cgi is away (it died, or a restart was asked for): until
    /// [`Server::cgi_up`], CGI calls are held instead of coming out of
    /// [`Server::next`] (see the `queue` module: bounded by
    /// `cgi_queue_max` and `cgi_queue_bytes`, 503 beyond; 503 after
    /// `cgi_queue_timeout_ms`; dropped when the client leaves). Calls
    /// already handed out are the caller's to fail (502).
    pub fn cgi_down(&mut self) {
        if self.core.gap.down.is_none() {
            self.core.gap.down = Some(self.core.clock.now_ms());
        }
    }

    /// The cgi is away for good (the supervisor holds it down): the calls
    /// held for its return and every CGI call from now on get 503 at once
    /// (`cgi_queue_refused`), until a [`Server::cgi_up`]. Returns the
    /// connections that now have output.
    pub fn cgi_gone(&mut self) -> Vec<ConnId> {
        self.cgi_down();
        self.core.gap.gone = true;
        let mut ready = Vec::new();
        while let Some(h) = self.core.gap.held.pop_front() {
            self.core.gap.bytes -= queue::body_len(&h.call);
            if let Some(conn) = self.conns.get_mut(&h.conn) {
                self.core.stats.cgi_queue_refused += 1;
                self.core.fail_held(conn, h.call.id, cgi_api::Failure::Unavailable);
                ready.push(ConnId(h.conn));
            }
        }
        ready
    }

    /// A call [`Server::next`] handed out that could not be sent: the cgi
    /// went away just before (its death was seen while sending). It is
    /// held like a call that arrives while the cgi is away, or refused
    /// with 503 as those are (which is then the connection's next output):
    /// only calls the dead incarnation had fail with 502. Marks the cgi
    /// away. Returns whether the call was held.
    pub fn cgi_hold(&mut self, c: ConnId, call: CgiCall<'d>) -> bool {
        self.cgi_down();
        let Some(conn) = self.conns.get_mut(&c.0) else { return false };
        match &mut conn.state {
            // It has not left: its time starts when it does.
            State::Cgi(w) if w.id == call.id => w.deadline = u64::MAX,
            _ => return false,
        }
        self.core.hold_cgi(c.0, conn, call)
    }

    /// Whether the cgi is away ([`Server::cgi_down`]).
    pub fn cgi_is_down(&self) -> bool {
        self.core.gap.down.is_some()
    }

    /// CGI calls held now.
    pub fn cgi_queue_len(&self) -> usize {
        self.core.gap.held.len()
    }

    /// A (new) cgi is attached: the held calls, in arrival order, to hand
    /// to it now, as [`Action::Cgi`] (their timeout runs from here); then
    /// pull [`Server::next`] for each connection. Calls go out as before
    /// from now on.
    pub fn cgi_up(&mut self) -> Vec<(ConnId, CgiCall<'d>)> {
        self.core.gap.down = None;
        self.core.gap.gone = false;
        let now = self.core.clock.now_ms();
        let mut out = Vec::new();
        // Held as their connections were pulled; released in the order the
        // requests arrived (were parsed): call ids are assigned then, in
        // sequence (wrapping: all are before `next_cgi`).
        let next = self.core.next_cgi;
        let mut held = core::mem::take(&mut self.core.gap.held);
        held.make_contiguous().sort_by_key(|h| h.call.id.wrapping_sub(next));
        for h in held {
            self.core.gap.bytes -= queue::body_len(&h.call);
            // A connection that gave up its request meanwhile (closing:
            // too much input) drops it.
            let Some(w) = self.conns.get_mut(&h.conn).and_then(|conn| match &mut conn.state {
                State::Cgi(w) if w.id == h.call.id => Some(w),
                _ => None,
            }) else {
                self.core.stats.cgi_queue_dropped += 1;
                continue;
            };
            w.deadline = now + self.core.cfg.cgi_timeout_ms;
            self.core.stats.cgi_queue_served += 1;
            out.push((ConnId(h.conn), h.call));
        }
        out
    }

    /// What to tell the cgi about its streams, in order: credits for parts
    /// pulled (`Control::Credit`), and streams no longer wanted
    /// (`Control::Cancel`: the client left, a `HEAD`, a complete
    /// `Content-Length`, a failure). Send each on the request channel
    /// (`cgi_api::wire::control_tag`).
    pub fn take_cgi_controls(&mut self) -> Vec<Control> {
        core::mem::take(&mut self.core.controls)
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
        // Held CGI calls the cgi did not come back for in time: 503.
        let limit = self.core.cfg.cgi_queue_timeout_ms;
        while let Some(h) = self.core.gap.held.front().filter(|h| now.saturating_sub(h.at) >= limit) {
            let c = h.conn;
            let h = self.core.gap.take(c).expect("the front");
            if let Some(conn) = self.conns.get_mut(&c) {
                self.core.stats.cgi_queue_expired += 1;
                self.core.fail_held(conn, h.call.id, cgi_api::Failure::Unavailable);
                ready.push(ConnId(c));
            }
        }
        for (&id, conn) in self.conns.iter_mut() {
            // Requests parsed only when the output before them is pulled
            // (one open file per connection) count as output: they wait
            // for the client to read just the same.
            let deferred = matches!(conn.state, State::Reading) && conn.inq_len > 0 && conn.req_start.is_none();
            let had = conn.outq.len() + usize::from(deferred);
            if self.core.upload_stalled(conn, now) {
                // The body stopped arriving while the cgi waits for it.
                self.core.stats.request_timeouts += 1;
                self.core.upload_fail(conn, Some(408));
                ready.push(ConnId(id));
                continue;
            }
            if self.core.upload_too_slow(conn, now) {
                // It arrives, but slower than `min_input_rate`.
                self.core.stats.request_timeouts += 1;
                self.core.stats.body_too_slow += 1;
                self.core.upload_fail(conn, Some(408));
                ready.push(ConnId(id));
                continue;
            }
            match (&mut conn.state, &conn.upload) {
                (State::Cgi(w), Some(u)) if !u.cgi_owes() && w.deadline != u64::MAX => {
                    // It has consumed all we gave it and waits for the
                    // client: its time runs from the next part.
                    w.deadline = now + self.core.cfg.cgi_timeout_ms;
                }
                (State::Stream(s), Some(u)) if s.id == u.id && !u.cgi_owes() => {
                    // The same for a program that streams its answer while
                    // it reads: waiting for the client's next body part, it
                    // owes us no output.
                    s.deadline = now + self.core.cfg.cgi_timeout_ms;
                }
                _ => {}
            }
            match &conn.state {
                State::Cgi(w) if now >= w.deadline => {
                    let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                    // It may have begun a stream: stop it.
                    self.core.cancel(w.id);
                    self.core.cgi_done(conn, w, Err(cgi_api::Failure::Timeout));
                    self.core.process(conn);
                }
                State::Stream(s) if s.owed() && now >= s.deadline => {
                    // The cgi had the credit for a part and sent none in time.
                    self.core.stream_abort(conn, cgi_api::Failure::Timeout);
                }
                State::Stream(s)
                    if (conn.outq.len() > 1 || !s.parts.is_empty())
                        && now.saturating_sub(conn.last_active) >= cfg_send =>
                {
                    // Parts wait and the client took none for that long.
                    self.core.stats.send_timeouts += 1;
                    self.core.leave_cgi(conn);
                    for o in conn.outq.drain(..) {
                        if let Out::File { f, .. } = o {
                            self.core.src.close(f);
                        }
                    }
                    conn.outq.push_back(Out::Close);
                    conn.state = State::Closing;
                }
                State::Reading if had > 0 && now.saturating_sub(conn.last_active) >= cfg_send => {
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
                    let head = matches!(conn.state, State::Reading);
                    let elapsed = conn.req_start.map(|t| now.saturating_sub(t));
                    let bytes = conn.received - conn.req_base;
                    if elapsed.is_some_and(|e| e >= cfg_req) {
                        self.core.stats.request_timeouts += 1;
                        self.core.stats.head_timeouts_408 += u64::from(head);
                        self.core.reject(conn, 408, false);
                    } else if elapsed.is_some_and(|e| self.core.too_slow(bytes, e)) {
                        // Arriving, but slower than any client needs: a
                        // peer that holds the connection (and its buffers)
                        // with a byte now and then.
                        self.core.stats.request_timeouts += 1;
                        if head {
                            self.core.stats.head_too_slow += 1;
                        } else {
                            self.core.stats.body_too_slow += 1;
                        }
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
            // A stream with nothing to pull yet waits for the cgi, not us.
            let waits_for_cgi = matches!(&conn.state, State::Stream(s) if s.parts.is_empty() && conn.outq.len() == 1);
            if !waits_for_cgi && (conn.outq.len() != had || (had > 0 && !conn.outq.is_empty())) {
                ready.push(ConnId(id));
            }
        }
        // A connection whose held call expired may be in twice.
        ready.sort_unstable();
        ready.dedup();
        ready
    }

    /// The connection is gone (closed by either side, or reset): frees its
    /// state and everything it held.
    pub fn closed(&mut self, c: ConnId) {
        // A held call never reached the cgi: nothing to cancel there.
        let held = self.core.gap.take(c.0).is_some();
        if held {
            self.core.stats.cgi_queue_dropped += 1;
        }
        if let Some(mut conn) = self.conns.remove(&c.0) {
            if !held {
                self.core.leave_cgi(&conn);
            }
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
