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
//! Here: the public API's types ([`Server`], [`Action`], [`CgiCall`]), the
//! per-connection state, and the connection's life (accept, input, close).
//! The rest has modules of their own, all methods of the same `Core` on
//! the same `Conn` (or of [`Server`] where they take a connection id):
//! * `input`: buffered bytes into requests (heads parsed from a bounded
//!   copy, bodies taken by reference, chunked bodies decoded);
//! * `respond`: the parts every response shares (status line, complete
//!   small responses, dispatch by method); `health`: `/healthz`;
//! * `access`: the access and error logs;
//! * `output`: the output pulled in order ([`Server::next`]);
//! * `files`: static files (preconditions, ranges, the header cache, the
//!   file's bytes pulled lazily from the [`FileSource`]); `waiting`: those
//!   whose file the source could not open yet;
//! * `cgi`: CGI requests out ([`CgiCall`]) and their answers back into
//!   responses (local redirects included), whole or streamed as the
//!   program produces them; `cgi_peer`: the cgi's answers coming in, its
//!   absence and return; `upload`: bodies streamed to it; `queue`: calls
//!   held while it is away;
//! * `timeouts`: what [`Server::tick`] ends; `stats`: the counters.

mod access;
mod cgi;
mod cgi_peer;
mod files;
mod health;
mod input;
mod output;
mod queue;
mod respond;
mod stats;
mod timeouts;
mod upload;
mod waiting;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use iolite::{Aggregate, Domain, PoolId};

use crate::hcache::HeaderCache;
use crate::request::Request;
use crate::source::{Clock, FileSource};
use crate::Config;

pub use access::{cause, escape_into, LogRate, AGENT_MAX, PENDING_MAX, REFERER_MAX, REQUEST_MAX};
pub use cgi::OverWindow;
use cgi::{CgiStream, CgiWait};
pub use cgi_api::wire::Control;
pub use health::{HealthProbe, HEALTH_PATH};
use input::ChunkedBody;
use queue::GapQueue;
pub use stats::HttpStats;
use upload::Upload;
pub use upload::PART_MAX;
use waiting::{SourceQueue, Ticket};

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
    /// The access log's entry of the request being answered (`access`).
    log: Option<Box<access::Entry>>,
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
    /// What answers `/healthz` ([`Server::set_health_probe`]).
    health_probe: Option<HealthProbe>,
    /// Access and error log lines not taken yet (`access`).
    log_lines: VecDeque<String>,
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
                health_probe: None,
                log_lines: VecDeque::new(),
            },
            conns: BTreeMap::new(),
            next_conn: 1,
            woken: Vec::new(),
        }
    }

    /// Answers `/healthz` with `probe` (GET and HEAD; see `health`).
    pub fn set_health_probe(&mut self, probe: HealthProbe) {
        self.core.health_probe = Some(probe);
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

    /// The connection is gone (closed by either side, or reset): frees its
    /// state and everything it held.
    pub fn closed(&mut self, c: ConnId) {
        // A held call never reached the cgi: nothing to cancel there.
        let held = self.core.gap.take(c.0).is_some();
        if held {
            self.core.stats.cgi_queue_dropped += 1;
        }
        if let Some(mut conn) = self.conns.remove(&c.0) {
            self.core.log_end(c, &mut conn);
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
