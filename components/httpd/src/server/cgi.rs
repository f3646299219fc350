//! The CGI path: a request for `/cgi-bin/NAME[/PATH_INFO]` becomes a
//! [`CgiCall`] (CGI/1.1 meta-variables, RFC 3875, and the body by
//! reference) that the caller hands to the cgi component; its answer
//! ([`Server::cgi_reply`](super::Server::cgi_reply), or a timeout) becomes
//! the response: the CGI's header parsed from a private copy
//! (`cgi_api::split_output`), its body sent by reference, a local redirect
//! served as a new request (at most `max_cgi_redirects`), failures mapped
//! to 502/503/504.

use alloc::boxed::Box;
use alloc::format;
use alloc::vec::Vec;

use iolite::Aggregate;

use super::{CgiCall, Conn, ConnMode, Core, Out, State};
use crate::path::parse_target;
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource};
use crate::SERVER;

/// A connection's request waiting for the CGI's answer.
pub(super) struct CgiWait {
    pub(super) id: u32,
    /// `u64::MAX` until the call leaves (`Server::next`).
    pub(super) deadline: u64,
    req: Box<Request>,
    redirects: u8,
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    pub(super) fn dispatch_cgi(
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

    pub(super) fn cgi_done(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        w: CgiWait,
        result: Result<Aggregate<'d>, cgi_api::Failure>,
    ) {
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
