//! The response parts every path shares: the status line and its
//! per-response headers (`prefix`), complete small responses (`simple`,
//! errors and redirects), refusals that close the connection, and the
//! dispatch of a parsed request by method and path (`handle`).

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::fmt::Write;

use iolite::gen::generate;
use iolite::Aggregate;

use super::{Conn, ConnMode, Core, Out, State};
use crate::date;
use crate::reason::reason;
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource};

/// Methods of static files (405 and OPTIONS).
pub(super) const ALLOW_STATIC: &str = "GET, HEAD, OPTIONS";
/// Where Prometheus scrapes (the usual path), and the cgi's program that
/// answers it (`cgi::metrics`).
pub const METRICS_PATH: &str = "/metrics";
/// See [`METRICS_PATH`].
pub const METRICS_PROGRAM: &str = "/cgi-bin/metrics";
/// Methods of CGI programs and of the server as a whole (`OPTIONS *`).
const ALLOW_CGI: &str = "GET, HEAD, POST, OPTIONS";

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    pub(super) fn date(&mut self) -> [u8; 29] {
        let now = self.clock.unix_secs();
        if self.date.0 != now {
            self.date = (now, date::format(now));
        }
        self.date.1
    }

    pub(super) fn count(&mut self, status: u16) {
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

    pub(super) fn gen(&mut self, f: impl Fn(&mut dyn Write) -> core::fmt::Result) -> Option<Aggregate<'d>> {
        let a = generate(self.d, self.pool, f).ok()?;
        self.stats.header_bytes_generated += a.len() as u64;
        Some(a)
    }

    /// Status line, Date, Server, Connection: the per-response part.
    pub(super) fn prefix(&mut self, status: u16, why: &str, mode: ConnMode) -> Option<Aggregate<'d>> {
        self.count(status);
        let date = self.date();
        let date = core::str::from_utf8(&date).unwrap_or("");
        let server = self.cfg.server_software.as_str();
        let a = generate(self.d, self.pool, |w| {
            write!(w, "HTTP/1.1 {status} {why}\r\nDate: {date}\r\nServer: {server}\r\n{}", mode.line())
        })
        .ok()?;
        self.stats.header_bytes_generated += a.len() as u64;
        Some(a)
    }

    /// A complete error (or other body-less-by-design) response with a
    /// small HTML body. `extra` are whole header lines.
    pub(super) fn simple(
        &mut self,
        status: u16,
        head_only: bool,
        mode: ConnMode,
        extra: &str,
    ) -> Option<Aggregate<'d>> {
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

    pub(super) fn push_simple<F>(
        &mut self,
        conn: &mut Conn<'d, F>,
        status: u16,
        head_only: bool,
        mode: ConnMode,
        extra: &str,
    ) {
        match self.simple(status, head_only, mode, extra) {
            Some(a) => conn.outq.push_back(Out::Data(a)),
            None => conn.outq.push_back(Out::Close),
        }
    }

    /// A refused request: error response, then close.
    pub(super) fn reject(&mut self, conn: &mut Conn<'d, S::File>, status: u16, allow: bool) {
        let extra = if allow { "Allow: GET, HEAD, POST, OPTIONS\r\n" } else { "" };
        self.push_simple(conn, status, false, ConnMode::Close, extra);
        conn.outq.push_back(Out::Close);
        conn.state = State::Closing;
    }

    pub(super) fn handle(&mut self, conn: &mut Conn<'d, S::File>, mut req: Request, body: Option<Aggregate<'d>>) {
        if req.target.path == METRICS_PATH && matches!(req.method, Method::Get | Method::Head) {
            // The cgi gathers every component's counters (the pages
            // are mapped there, not here): `/metrics` is its program.
            req.target.path = String::from(METRICS_PROGRAM);
        }
        let mode = ConnMode::of(&req);
        let path = &req.target.path;
        let cgi = path == "/cgi-bin" || path.starts_with("/cgi-bin/");
        let allow = if cgi || path == "*" { ALLOW_CGI } else { ALLOW_STATIC };
        match req.method {
            Method::Get | Method::Head | Method::Post if cgi => {
                self.dispatch_cgi(conn, Box::new(req), body, 0);
                return;
            }
            Method::Get | Method::Head
                if path == super::HEALTH_PATH && self.health(conn, req.method == Method::Head, mode) => {}
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
