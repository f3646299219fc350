//! The access and error logs: one line per response in nginx's `combined`
//! format plus `$request_time`, and an nginx-like `[error]` line for each
//! 4xx/5xx with its cause.
//!
//! ```text
//! 10.0.2.2 - - [02/Dec/2026:06:10:00 +0000] "GET / HTTP/1.1" 200 1234 "-" "curl/7.88.1" 0.004
//! 2026/12/02 06:10:00 [error] *7: not found (404), client: 10.0.2.2, request: "GET /x HTTP/1.1"
//! ```
//!
//! * **What is logged.** A request's entry is made when its head is
//!   parsed (or refused), with the raw request line, `Referer` and
//!   `User-Agent`; the status and `$body_bytes_sent` come from what is
//!   actually pulled for the connection (the status line and the bytes
//!   after the header's end: a response cut short logs what went out), so
//!   every path (static, CGI whole or streamed, errors) is counted alike.
//!   The line is made when the response is done: its last byte pulled,
//!   or the connection closed. A response with no request (408 for a head
//!   that never ended) logs the request `""`, as nginx does.
//! * **Untrusted strings** are escaped as nginx's `escape=default` does:
//!   `"`, `\`, bytes below 0x20 and above 0x7e as `\xHH`; and cut (at a
//!   whole escape, marked `...`) to [`REQUEST_MAX`], [`REFERER_MAX`] and
//!   [`AGENT_MAX`] bytes, so a line fits the log ring's 240-byte line.
//!   Those bytes are copies of the client's input (metadata, not payload),
//!   counted in `access_log_bytes_copied`.
//! * **Time**: `$time_local` from the clock page (the RTC at boot plus the
//!   ticks since), in UTC; `$request_time` in seconds with milliseconds,
//!   from the request's first byte to its response's last.
//! * **Bounded.** At most [`PENDING_MAX`] lines wait for the component to
//!   take them ([`Server::take_log_lines`]); beyond, lines are dropped and
//!   counted (`access_log_lines_dropped`). The component rate-limits what
//!   it prints on top (components/httpd/README.md, "Access log").

use alloc::collections::VecDeque;
use alloc::string::String;
use core::fmt::Write;

use iolite::Aggregate;

use super::{Conn, ConnId, Core, Remote, Server};
use crate::date::{write_error_log_time, write_log_time};
use crate::request::Request;
use crate::source::{Clock, FileSource};

/// Longest request line logged, escaped, with its `...`.
pub const REQUEST_MAX: usize = 72;
/// Longest `Referer` logged, escaped.
pub const REFERER_MAX: usize = 32;
/// Longest `User-Agent` logged, escaped.
pub const AGENT_MAX: usize = 40;
/// Lines that may wait for the component.
pub const PENDING_MAX: usize = 256;

/// Writes `raw` escaped as nginx does (module docs), at most `max` bytes
/// (with `...` when cut); returns the bytes written.
pub fn escape_into(out: &mut String, raw: &[u8], max: usize) -> usize {
    let start = out.len();
    for (i, &b) in raw.iter().enumerate() {
        let esc = b == b'"' || b == b'\\' || !(0x20..=0x7e).contains(&b);
        let need = if esc { 4 } else { 1 };
        // Room for this byte and, unless it is the last, a `...`.
        let reserve = if i + 1 == raw.len() { 0 } else { 3 };
        if out.len() - start + need + reserve > max {
            out.push_str("...");
            break;
        }
        if esc {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b as char);
        }
    }
    out.len() - start
}

/// A request's entry while its response goes out.
pub(super) struct Entry {
    request: String,
    referer: String,
    agent: String,
    start_ms: u64,
    /// The final status, once its status line went out (0 before).
    status: u16,
    /// Where in the current response header we are: bytes so far, the
    /// status digits, progress through `\r\n\r\n`.
    pos: usize,
    code: u16,
    crlf: u8,
    body: u64,
}

impl Entry {
    fn new(start_ms: u64) -> Entry {
        Entry {
            request: String::new(),
            referer: String::new(),
            agent: String::new(),
            start_ms,
            status: 0,
            pos: 0,
            code: 0,
            crlf: 0,
            body: 0,
        }
    }

    /// Takes the bytes of `a`, as pulled for the client: the status from
    /// the status line (past any 100 Continue), then the body's length.
    fn sent(&mut self, a: &Aggregate<'_>) {
        for s in a.slices() {
            self.feed(s);
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            if self.status != 0 {
                self.body += (bytes.len() - i) as u64;
                return;
            }
            // `HTTP/1.1 200 ...`: the digits are bytes 9 to 11.
            if (9..12).contains(&self.pos) && b.is_ascii_digit() {
                self.code = self.code * 10 + u16::from(b - b'0');
            }
            self.pos += 1;
            self.crlf = match (self.crlf, b) {
                (0 | 2, b'\r') => self.crlf + 1,
                (1 | 3, b'\n') => self.crlf + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if self.crlf == 4 {
                if self.code / 100 == 1 {
                    // An interim response: the real one follows.
                    (self.pos, self.code, self.crlf) = (0, 0, 0);
                } else {
                    self.status = self.code.max(1);
                }
            }
        }
    }
}

/// The cause an error line gives for a status.
pub fn cause(status: u16) -> &'static str {
    match status {
        400 => "malformed request",
        403 => "forbidden",
        404 => "not found",
        405 => "method not allowed",
        408 => "request timed out",
        411 => "length required",
        412 => "precondition failed",
        413 => "request body too large",
        414 => "request target too long",
        416 => "range not satisfiable",
        417 => "expectation failed",
        431 => "request header fields too large",
        501 => "method not implemented",
        502 => "CGI failed (fault or invalid output)",
        503 => "service unavailable (busy, or the cgi away)",
        504 => "CGI timed out",
        505 => "HTTP version not supported",
        500..=599 => "server error",
        _ => "client error",
    }
}

fn write_addr(out: &mut String, remote: Option<Remote>) {
    let _ = match remote {
        Some(Remote { addr: [a, b, c, d], .. }) => write!(out, "{a}.{b}.{c}.{d}"),
        None => write!(out, "-"),
    };
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// A request's head was parsed (`req`) or refused (`None`): counted,
    /// and its entry made, with the raw request line from the start of
    /// `conn`'s parse buffer.
    pub(super) fn log_begin(&mut self, conn: &mut Conn<'d, S::File>, req: Option<&Request>) {
        self.stats.requests += 1;
        let mut e = Entry::new(conn.req_start.unwrap_or_else(|| self.clock.now_ms()));
        let head = &conn.scan;
        let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
        let line = head[..line_end].strip_suffix(b"\r").unwrap_or(&head[..line_end]);
        let mut copied = escape_into(&mut e.request, line, REQUEST_MAX);
        let field = |out: &mut String, name: &str, max: usize| match req.and_then(|r| r.header(name)) {
            Some(v) => escape_into(out, v, max),
            None => {
                out.push('-');
                0
            }
        };
        copied += field(&mut e.referer, "referer", REFERER_MAX);
        copied += field(&mut e.agent, "user-agent", AGENT_MAX);
        self.stats.access_log_bytes_copied += copied as u64;
        conn.log = Some(alloc::boxed::Box::new(e));
    }

    /// `a` is about to go to `conn`'s client.
    pub(super) fn log_sent(&mut self, conn: &mut Conn<'d, S::File>, a: &Aggregate<'d>) {
        let now = self.clock.now_ms();
        conn.log.get_or_insert_with(|| alloc::boxed::Box::new(Entry::new(now))).sent(a);
    }

    /// `conn`'s response is done (or the connection is): its lines.
    pub(super) fn log_end(&mut self, c: ConnId, conn: &mut Conn<'d, S::File>) {
        let Some(e) = conn.log.take_if(|e| e.status != 0) else { return };
        let now = self.clock.now_ms();
        let secs = self.clock.unix_secs();
        let ms = now.saturating_sub(e.start_ms);
        let mut line = String::with_capacity(240);
        write_addr(&mut line, conn.remote);
        line.push_str(" - - [");
        let _ = write_log_time(&mut line, secs);
        let _ = write!(
            line,
            "] \"{}\" {} {} \"{}\" \"{}\" {}.{:03}",
            e.request,
            e.status,
            e.body,
            e.referer,
            e.agent,
            ms / 1000,
            ms % 1000
        );
        self.push_log(line);
        if e.status >= 400 {
            let mut err = String::with_capacity(200);
            let _ = write_error_log_time(&mut err, secs);
            let _ = write!(err, " [error] *{}: {} ({}), client: ", c.0, cause(e.status), e.status);
            write_addr(&mut err, conn.remote);
            let _ = write!(err, ", request: \"{}\"", e.request);
            self.push_log(err);
        }
    }

    fn push_log(&mut self, line: String) {
        if self.log_lines.len() >= PENDING_MAX {
            self.stats.access_log_lines_dropped += 1;
            return;
        }
        self.stats.access_log_lines += 1;
        self.log_lines.push_back(line);
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// The access and error log lines made since the last call, in order
    /// (module docs): the component prints them through its log ring.
    pub fn take_log_lines(&mut self) -> VecDeque<String> {
        core::mem::take(&mut self.core.log_lines)
    }
}

/// What the component prints of the log lines: a token bucket of
/// [`LogRate::BURST`] lines refilled at [`LogRate::PER_SECOND`], below the
/// log server's own budget per ring (`logring::LineBudget`, 200/s), so a
/// flood of requests costs the console and the log server a bounded
/// share and the server's other lines still get through. Lines beyond it
/// are dropped and counted; once a second at most, while there were
/// some, [`LogRate::report`] says how many (`N access log lines dropped`).
pub struct LogRate {
    /// Thousandths of a line.
    tokens: u64,
    last_ms: u64,
    dropped: u64,
    dropped_total: u64,
    reported_ms: u64,
}

impl LogRate {
    /// Lines at once after a quiet spell.
    pub const BURST: u64 = 50;
    /// Lines per second in a sustained flood.
    pub const PER_SECOND: u64 = 50;
    /// Least time between two reports of dropped lines.
    pub const REPORT_MS: u64 = 1000;

    /// A full bucket at `now_ms`.
    pub fn new(now_ms: u64) -> LogRate {
        LogRate { tokens: Self::BURST * 1000, last_ms: now_ms, dropped: 0, dropped_total: 0, reported_ms: now_ms }
    }

    /// Whether one more line may be printed at `now_ms` (taking it); a
    /// line refused is counted as dropped.
    pub fn admit(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed.saturating_mul(Self::PER_SECOND)).min(Self::BURST * 1000);
        if self.tokens < 1000 {
            self.dropped += 1;
            self.dropped_total += 1;
            return false;
        }
        self.tokens -= 1000;
        true
    }

    /// Lines dropped since the last report, if there were some and the
    /// last report is [`LogRate::REPORT_MS`] old (the report itself is
    /// not charged to the bucket: it is one line a second at most).
    pub fn report(&mut self, now_ms: u64) -> Option<u64> {
        if self.dropped == 0 || now_ms.saturating_sub(self.reported_ms) < Self::REPORT_MS {
            return None;
        }
        self.reported_ms = now_ms;
        Some(core::mem::take(&mut self.dropped))
    }

    /// Lines dropped in all.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }
}
