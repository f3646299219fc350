//! The Iolite OS web server, as a host-testable library (Pai, Druschel,
//! Zwaenepoel, OSDI '99, §2.10 and §4: Flash-Lite).
//!
//! A response is a header aggregate plus the file's aggregate from the
//! unified file cache, sent **by reference**: no byte of a file is copied
//! on its way from the cache to the network. The fixed part of each file's
//! response header is precomputed once into an IO-Lite buffer and reused
//! while the file is unchanged (Cheetah, "header precompute"). CGI output
//! comes back from the cgi component as an aggregate and goes out by
//! reference too.
//!
//! * [`Server`]: the transport-independent state machine: [`Server::accept`],
//!   [`Server::receive`] (aggregates, any split, pipelined),
//!   [`Server::next`] (→ [`Action`]: send / CGI / close),
//!   [`Server::cgi_reply`] and [`Server::cgi_part`] (whole or streamed CGI
//!   answers; [`Server::take_cgi_controls`]: the cgi's flow control),
//!   [`Server::tick`] (timeouts), [`Server::closed`].
//! * [`FileSource`] (open/read by reference; typed errors → 404/403/503/500)
//!   and [`Clock`]: implemented by the fs client and the timer on target,
//!   by memory and a fake clock in tests.
//! * [`request`], [`path`], [`range`], [`date`], [`mime`]: parsing.
//!
//! See `README.md` for the decisions (parser, dates, ranges,
//! Transfer-Encoding, limits and their statuses).

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![allow(clippy::result_large_err)]

extern crate alloc;

pub mod chunked;
pub mod date;
pub mod filerefs;
pub mod hcache;
pub mod mime;
pub mod path;
pub mod preconditions;
pub mod range;
pub mod reason;
pub mod request;
pub mod server;
pub mod source;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;

use alloc::string::String;

pub use filerefs::{FileRefs, FileRefsStats, Limits as FileRefsLimits};
pub use server::{
    Action, CgiCall, ConnId, Control, HealthProbe, HttpStats, OverWindow, Remote, Server, HEALTH_PATH, PART_MAX,
};
pub use source::{Clock, FetchedAhead, FileSource, FileStat, Kind, SourceError};

/// The default `Server` header and `SERVER_SOFTWARE`
/// ([`Config::server_software`]).
pub const SERVER: &str = "Iolite-httpd/0.1";

/// Request size limits (see [`request`] for the statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line (414 beyond).
    pub max_request_line: usize,
    /// Most bytes of header fields after the request line (431 beyond).
    pub max_header_bytes: usize,
    /// Most header fields (431 beyond).
    pub max_headers: usize,
    /// Largest request body a request waits for whole (413 beyond, except
    /// for a POST to a CGI program: see `max_cgi_body`).
    pub max_body: usize,
    /// Largest body of a POST to a CGI program (413 beyond); one larger
    /// than `max_body` goes to the cgi in parts as it arrives.
    pub max_cgi_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_line: 8 * 1024,
            max_header_bytes: 8 * 1024,
            max_headers: 64,
            max_body: 64 * 1024,
            max_cgi_body: 16 << 20,
        }
    }
}

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Request size limits.
    pub limits: Limits,
    /// Most open connections; more get 503 at accept.
    pub max_connections: usize,
    /// A keep-alive connection with nothing to do is closed after this.
    pub idle_timeout_ms: u64,
    /// A connection whose pending output the network took nothing of for
    /// this long is closed (nginx's `send_timeout`, also 60 s).
    pub send_timeout_ms: u64,
    /// A request (head and body) must arrive within this, else 408.
    pub request_timeout_ms: u64,
    /// A CGI must answer within this, else 504.
    pub cgi_timeout_ms: u64,
    /// A static request whose file the source cannot open for now (fs out
    /// of buffers or handles: clients hold its pages) waits this long for
    /// them, then gets 503.
    pub source_wait_ms: u64,
    /// Most queued responses per connection before pipelined input waits.
    pub max_pipeline: usize,
    /// Most unparsed input bytes per connection; more closes it.
    pub max_buffered: usize,
    /// Least average rate, in bytes per second, at which a request (its
    /// head, a whole body with it, or a streamed body while the cgi waits
    /// for it) must arrive once it has been arriving for `rate_grace_ms`;
    /// a slower one gets 408 and the connection closes (0: no minimum).
    /// `request_timeout_ms` still bounds the whole head and body: a peer
    /// that trickles its head fast enough still has only that long.
    pub min_input_rate: u64,
    /// How long a request may arrive at any rate before `min_input_rate`
    /// applies (default 5 s: a head sent in pieces over a slow link, or
    /// stalled by a lost segment, whose retransmissions back off from
    /// 1 s to 2 s and more; with 3 s, a client that lost a segment just
    /// after its first bytes got 408 for a head it had sent in full).
    pub rate_grace_ms: u64,
    /// Most slices a connection's unparsed input may take while its
    /// request head is incomplete; beyond, the input is copied into one
    /// buffer of the server's pool (`input_bytes_flattened`) and the
    /// transport's buffers go back: a peer that sends its head in many
    /// pieces holds one buffer here, not one per piece.
    pub max_input_slices: usize,
    /// Largest file read per [`FileSource::read`] call.
    pub read_chunk: usize,
    /// Cached response headers (0 disables the cache).
    pub header_cache_entries: usize,
    /// Most CGI local redirects per request (then 502).
    pub max_cgi_redirects: u8,
    /// Most CGI requests held while the cgi is away (between its death or
    /// restart and the new incarnation: [`Server::cgi_down`]); more get 503.
    pub cgi_queue_max: usize,
    /// Most request-body bytes those held requests may pin (by reference,
    /// in the transport's pool); a request that would pass it gets 503.
    pub cgi_queue_bytes: usize,
    /// A held request the cgi has not come back for within this gets 503.
    pub cgi_queue_timeout_ms: u64,
    /// `SERVER_NAME` when the request has no Host (the machine's
    /// hostname).
    pub server_name: String,
    /// The `Server` header and `SERVER_SOFTWARE` (default [`SERVER`]).
    pub server_software: String,
    /// The names tried in order for a directory's index (default
    /// `index.html`); none found: 403.
    pub index: alloc::vec::Vec<String>,
    /// `SERVER_PORT`.
    pub server_port: u16,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_connections: 512,
            idle_timeout_ms: 15_000,
            send_timeout_ms: 60_000,
            request_timeout_ms: 10_000,
            cgi_timeout_ms: 5_000,
            source_wait_ms: 10_000,
            max_pipeline: 16,
            max_buffered: 256 * 1024,
            min_input_rate: 256,
            rate_grace_ms: 5_000,
            max_input_slices: 32,
            read_chunk: 256 * 1024,
            header_cache_entries: 128,
            max_cgi_redirects: 4,
            cgi_queue_max: 64,
            cgi_queue_bytes: 1 << 20,
            cgi_queue_timeout_ms: 5_000,
            server_name: String::from("iolite"),
            server_software: String::from(SERVER),
            index: alloc::vec![String::from("index.html")],
            server_port: 80,
        }
    }
}

impl Config {
    /// How many input bytes the parser looks at: enough for the largest
    /// acceptable head plus one byte, so that every limit is detected.
    pub fn scan_cap(&self) -> usize {
        self.limits.max_request_line + self.limits.max_header_bytes + 64
    }
}
