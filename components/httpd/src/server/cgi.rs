//! The CGI path: a request for `/cgi-bin/NAME[/PATH_INFO]` becomes a
//! [`CgiCall`] (CGI/1.1 meta-variables, RFC 3875, and the body by
//! reference) that the caller hands to the cgi component; its answer
//! becomes the response: the CGI's header parsed from a private copy
//! (`cgi_api::split_output`), its body sent by reference, a local redirect
//! served as a new request (at most `max_cgi_redirects`), failures mapped
//! to 502/503/504.
//!
//! The answer comes whole ([`Server::cgi_reply`](super::Server::cgi_reply):
//! framed with its real `Content-Length`), or **streamed**, in parts
//! ([`Server::cgi_part`](super::Server::cgi_part), then `cgi_reply` with the
//! last): once the parts so far hold the whole CGI header, the response
//! header goes out and each part follows as the caller pulls it, by
//! reference, while the program still runs. A streamed body is framed by
//! the CGI's `Content-Length` if it gave one; else chunked for HTTP/1.1
//! (each part one chunk: a small generated size line, then the part's own
//! slices) and delimited by closing the connection for HTTP/1.0. At most
//! [`STREAM_WINDOW`] parts wait here per response: each part pulled gives
//! the cgi one back (a [`Control::Credit`], see `cgi_api::wire`), so a
//! client that does not read stops the program. A stream that fails (the
//! cgi died or stopped answering, or came up short of its
//! `Content-Length`) ends the connection after what was sent, without the
//! last chunk: the client sees an incomplete response.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::vec::Vec;

use cgi_api::wire::{Control, STREAM_WINDOW};
use iolite::Aggregate;

use super::{Action, CgiCall, Conn, ConnMode, Core, Out, State};
use crate::path::parse_target;
use crate::reason::reason;
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource};

/// A connection's request waiting for the CGI's answer.
pub(super) struct CgiWait<'d> {
    pub(super) id: u32,
    /// `u64::MAX` until the call leaves (`Server::next`).
    pub(super) deadline: u64,
    req: Box<Request>,
    redirects: u8,
    /// The parts of a streamed answer so far, while its header has not
    /// ended (boxed: most answers never have one).
    head: Option<Box<Aggregate<'d>>>,
}

/// How a streamed body is delimited.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Transfer-Encoding: chunked` (HTTP/1.1): `sent` once a chunk went
    /// out (the next size line starts with the CRLF that ends it).
    Chunked { sent: bool },
    /// The CGI's `Content-Length`: bytes still to come.
    Length { left: u64 },
    /// No length (HTTP/1.0): the connection's close ends the body.
    Close,
}

/// A CGI response whose body is being streamed: the header has been
/// queued, followed by an `Out::Stream` that pulls these parts.
pub(super) struct CgiStream<'d> {
    pub(super) id: u32,
    /// When the cgi is late with its next part; `u64::MAX` while it has
    /// no credit (every part it may send waits here).
    pub(super) deadline: u64,
    /// Parts received and not yet pulled, by reference.
    pub(super) parts: VecDeque<Aggregate<'d>>,
    framing: Framing,
    /// The body is complete: the last part came, or the CGI's
    /// `Content-Length` is reached.
    pub(super) done: bool,
    /// What happens after the response (`Close` for a close-delimited one).
    mode: ConnMode,
}

impl CgiStream<'_> {
    /// Whether the cgi owes us a part (it has credit and has not finished).
    pub(super) fn owed(&self) -> bool {
        !self.done && self.parts.len() < STREAM_WINDOW as usize
    }
}

/// A streamed part came beyond the window the cgi was given
/// ([`STREAM_WINDOW`]): a protocol violation (the caller has the cgi
/// restarted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverWindow;

/// What pulling a stream gave.
// Returned and taken apart at once; boxing would allocate per part.
#[allow(clippy::large_enum_variant)]
pub(super) enum Pulled<'d> {
    /// Do this.
    Act(Action<'d>),
    /// Nothing until the cgi sends more.
    Wait,
    /// The stream ended with nothing more to send: go on with the output
    /// after it.
    Ended,
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
        let id = self.next_cgi;
        // A streamed body (see `upload`) gets its call now: CONTENT_LENGTH
        // is the announced length, none for a chunked one.
        let (more, content_length) =
            match conn.upload.as_mut().and_then(|u| u.assign(id, body.as_ref().map_or(0, |b| b.len() as u64))) {
                Some(len) => (true, len),
                None => (false, body.as_ref().map(|b| b.len() as u64)),
            };
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
            server_software: &self.cfg.server_software,
            content_length,
        });
        self.next_cgi = self.next_cgi.wrapping_add(1);
        self.stats.cgi_requests += 1;
        conn.outq.push_back(Out::Cgi(CgiCall { id, env, body, more }));
        // The CGI's time starts when the call leaves (`Server::next`), not
        // here: behind earlier responses of a pipeline that a slow client
        // has not taken yet, the call may wait longer than the timeout
        // without the CGI being at fault (and a timeout restarts it).
        let deadline = u64::MAX;
        conn.state = State::Cgi(CgiWait { id, deadline, req, redirects, head: None });
    }

    /// Gives the cgi one more part of stream `id` (coalesced per stream).
    fn credit(&mut self, id: u32) {
        if let Some(Control::Credit { id: last, parts }) = self.controls.last_mut() {
            if *last == id {
                *parts += 1;
                return;
            }
        }
        self.controls.push(Control::Credit { id, parts: 1 });
    }

    /// Tells the cgi to stop request `id`'s output (it is not wanted).
    pub(super) fn cancel(&mut self, id: u32) {
        self.controls.retain(|c| !matches!(c, Control::Credit { id: i, .. } if *i == id));
        self.controls.push(Control::Cancel { id });
    }

    /// The connection gives up its CGI request (it closes, the client
    /// stopped reading): the cgi is told to stop, if it still produces.
    pub(super) fn leave_cgi(&mut self, conn: &Conn<'d, S::File>) {
        match &conn.state {
            State::Cgi(w) => self.cancel(w.id),
            State::Stream(s) if !s.done => self.cancel(s.id),
            _ => {}
        }
    }

    /// A part of a streamed answer (more follow) for the connection's
    /// current CGI request (the caller checked the id).
    pub(super) fn cgi_part(&mut self, conn: &mut Conn<'d, S::File>, part: Aggregate<'d>) -> Result<(), OverWindow> {
        let now = self.clock.now_ms();
        let timeout = self.cfg.cgi_timeout_ms;
        self.stats.cgi_stream_parts += 1;
        match &mut conn.state {
            State::Cgi(w) => {
                // The header is still coming: gather the parts (each is
                // taken at once, so it gives its credit back).
                let mut so_far = w.head.take().map_or_else(|| Aggregate::new(self.d), |b| *b);
                w.deadline = now + timeout;
                let id = w.id;
                if so_far.append(part).is_err() {
                    // More pieces than an aggregate holds before the header
                    // ended: no CGI header is that fragmented.
                    self.stream_failed(conn, cgi_api::OutputError::NoHeaderEnd);
                    return Ok(());
                }
                match cgi_api::output::split_head(so_far) {
                    Ok(cgi_api::output::Head::Incomplete(so_far)) => {
                        let State::Cgi(w) = &mut conn.state else { unreachable!() };
                        w.head = Some(Box::new(so_far));
                        self.credit(id);
                    }
                    Ok(cgi_api::output::Head::Done(o, body, copied)) => {
                        let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                        self.stats.cgi_header_bytes_copied += copied as u64;
                        self.stream_start(conn, w, o, body);
                    }
                    Err(e) => self.stream_failed(conn, e),
                }
                Ok(())
            }
            State::Stream(s) => {
                if s.done {
                    // Past its Content-Length (already cancelled).
                    self.stats.cgi_late_replies += 1;
                    return Ok(());
                }
                if s.parts.len() >= STREAM_WINDOW as usize {
                    return Err(OverWindow);
                }
                s.deadline = now + timeout;
                self.push_part(conn, part, false);
                Ok(())
            }
            _ => unreachable!("checked by the caller"),
        }
    }

    /// The last part of a streamed answer (or a failure) while the body is
    /// being streamed.
    pub(super) fn stream_end(&mut self, conn: &mut Conn<'d, S::File>, last: Result<Aggregate<'d>, cgi_api::Failure>) {
        let State::Stream(s) = &mut conn.state else { return };
        if s.done {
            // Its Content-Length was complete before.
            self.stats.cgi_late_replies += 1;
            return;
        }
        match last {
            Ok(part) => self.push_part(conn, part, true),
            Err(f) => self.stream_abort(conn, f),
        }
    }

    /// A streamed response cannot be completed: what was sent stays sent,
    /// the connection closes after it (without a last chunk, or short of
    /// its Content-Length: the client sees that the response is
    /// incomplete), and the parts not sent yet are dropped.
    pub(super) fn stream_abort(&mut self, conn: &mut Conn<'d, S::File>, f: cgi_api::Failure) {
        let State::Stream(s) = &conn.state else { return };
        if f == cgi_api::Failure::Timeout {
            self.stats.cgi_timeouts += 1;
        } else {
            self.stats.cgi_failures += 1;
        }
        self.stats.cgi_streams_aborted += 1;
        if !s.done {
            self.cancel(s.id);
        }
        // The queued `Out::Stream` finds the state changed and closes.
        conn.state = State::Closing;
    }

    /// A part for the stream (the caller checked the window): cut at the
    /// CGI's Content-Length, queued to be pulled; an empty one gives its
    /// credit back at once. `last`: the cgi's final part.
    fn push_part(&mut self, conn: &mut Conn<'d, S::File>, mut part: Aggregate<'d>, last: bool) {
        let State::Stream(s) = &mut conn.state else { return };
        let id = s.id;
        let mut complete = last;
        if let Framing::Length { left } = &mut s.framing {
            let n = part.len() as u64;
            if n >= *left {
                if n > *left {
                    // More than it announced: the response ends at its length.
                    self.stats.cgi_stream_excess_bytes += n - *left;
                    part.truncate(*left as usize);
                }
                *left = 0;
                if !last {
                    self.cancel(id);
                }
                complete = true;
            } else {
                *left -= n;
            }
        }
        let State::Stream(s) = &mut conn.state else { return };
        s.done = complete;
        if complete {
            s.deadline = u64::MAX;
        }
        if part.is_empty() {
            if !complete {
                self.credit(id);
            }
        } else {
            s.parts.push_back(part);
        }
    }

    /// The header of a streamed answer is complete (`body`: the body's
    /// bytes so far): queue the response header, then stream the rest.
    fn stream_start(&mut self, conn: &mut Conn<'d, S::File>, w: CgiWait<'d>, o: cgi_api::Output, body: Aggregate<'d>) {
        let req = w.req;
        let mode = ConnMode::of(&req);
        let head = req.method == Method::Head;
        if let cgi_api::Kind::LocalRedirect(loc) = &o.kind {
            // `split_head` refused one whose body had begun; what the
            // program would still send is not wanted.
            self.cancel(w.id);
            if self.local_redirect(conn, &req, w.redirects, loc, mode, head) {
                return;
            }
            return self.finish(conn, mode);
        }
        let no_body = o.status == 204 || o.status == 304;
        let framing = match o.content_length {
            _ if no_body => Framing::Length { left: 0 },
            Some(n) => Framing::Length { left: n },
            None if req.minor >= 1 => Framing::Chunked { sent: false },
            None => Framing::Close,
        };
        // A close-delimited body ends the connection (a HEAD has none).
        let mode = if framing == Framing::Close && !head { ConnMode::Close } else { mode };
        let why = o.reason.as_deref().unwrap_or(reason(o.status));
        let Some(mut a) = self.prefix(o.status, why, mode) else { return conn.outq.push_back(Out::Close) };
        let tail = self.gen(|w| {
            if let Some(ct) = &o.content_type {
                write!(w, "Content-Type: {ct}\r\n")?;
            }
            for (n, v) in &o.fields {
                write!(w, "{n}: {v}\r\n")?;
            }
            match framing {
                _ if no_body => {}
                Framing::Length { left } => write!(w, "Content-Length: {left}\r\n")?,
                Framing::Chunked { .. } => w.write_str("Transfer-Encoding: chunked\r\n")?,
                Framing::Close => {}
            }
            w.write_str("\r\n")
        });
        match tail.map(|t| a.append(t)) {
            Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
            _ => {
                self.cancel(w.id);
                return conn.outq.push_back(Out::Close);
            }
        }
        self.stats.cgi_streams += 1;
        if head || no_body || framing == (Framing::Length { left: 0 }) {
            // Nothing of the body goes out: the header is the response.
            self.cancel(w.id);
            return self.finish(conn, mode);
        }
        let deadline = self.clock.now_ms() + self.cfg.cgi_timeout_ms;
        let s = CgiStream { id: w.id, deadline, parts: VecDeque::new(), framing, done: false, mode };
        conn.state = State::Stream(Box::new(s));
        conn.outq.push_back(Out::Stream);
        if body.is_empty() {
            // The part that ended the header is used up.
            self.credit(w.id);
        } else {
            // Its body bytes are a part like the others: the credit comes
            // back when they are pulled.
            self.push_part(conn, body, false);
        }
    }

    /// A streamed answer failed before its header was complete: 502.
    fn stream_failed(&mut self, conn: &mut Conn<'d, S::File>, e: cgi_api::OutputError) {
        let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { return };
        self.cancel(w.id);
        self.cgi_done(conn, w, Err(cgi_api::Failure::BadOutput(e)));
    }

    /// The next thing a streamed body has to send: a part (a chunk's size
    /// line, generated, then the part's slices by reference), the end (the
    /// last chunk, or the close), or nothing yet.
    pub(super) fn pull_stream(&mut self, conn: &mut Conn<'d, S::File>) -> Pulled<'d> {
        let now = self.clock.now_ms();
        let State::Stream(s) = &mut conn.state else {
            // Aborted (the cgi failed, or the connection is closing).
            return Pulled::Act(self.close_now(conn));
        };
        let (id, done) = (s.id, s.done);
        let Some(part) = s.parts.pop_front() else {
            if !done {
                conn.outq.push_front(Out::Stream);
                return Pulled::Wait;
            }
            return match self.stream_finish(conn) {
                Some(end) => Pulled::Act(Action::Send(end)),
                None if matches!(conn.state, State::Closing) => Pulled::Act(self.close_now(conn)),
                None => Pulled::Ended,
            };
        };
        if !done {
            // Its credit goes back: from now on the cgi owes us a part.
            s.deadline = now + self.cfg.cgi_timeout_ms;
            self.credit(id);
        }
        let len = part.len();
        self.stats.body_bytes_by_ref += len as u64;
        let State::Stream(s) = &mut conn.state else { unreachable!() };
        let (mut out, rest) = match &mut s.framing {
            Framing::Chunked { sent } => {
                let first = !*sent;
                *sent = true;
                let size = self.gen(|w| {
                    if !first {
                        w.write_str("\r\n")?;
                    }
                    write!(w, "{len:x}\r\n")
                });
                let Some(mut size) = size else { return Pulled::Act(self.close_now(conn)) };
                match size.append(part) {
                    Ok(()) => (size, None),
                    // A part of 16 slices: the size line goes alone.
                    Err((_, part)) => (size, Some(part)),
                }
            }
            Framing::Length { .. } | Framing::Close => (part, None),
        };
        if let Some(rest) = rest {
            conn.outq.push_front(Out::Stream);
            conn.outq.push_front(Out::Data(rest));
            return Pulled::Act(Action::Send(out));
        }
        let State::Stream(s) = &conn.state else { unreachable!() };
        if s.done && s.parts.is_empty() {
            // The last part: the end of the body goes with it.
            if let Some(end) = self.stream_finish(conn) {
                if let Err((_, end)) = out.append(end) {
                    conn.outq.push_front(Out::Data(end));
                }
            }
            if matches!(conn.state, State::Closing) && !matches!(conn.outq.back(), Some(Out::Close)) {
                // Close-delimited, or short of its length: the close is
                // the end.
                conn.outq.push_back(Out::Close);
            }
        } else {
            conn.outq.push_front(Out::Stream);
        }
        Pulled::Act(Action::Send(out))
    }

    /// The streamed body is complete and everything pulled: the state
    /// goes on (the next request, or the close) and the end of the body
    /// is returned if it has one (the last chunk).
    fn stream_finish(&mut self, conn: &mut Conn<'d, S::File>) -> Option<Aggregate<'d>> {
        let State::Stream(s) = core::mem::replace(&mut conn.state, State::Reading) else { return None };
        match s.framing {
            Framing::Chunked { sent } => {
                let end = self.gen(|w| w.write_str(if sent { "\r\n0\r\n\r\n" } else { "0\r\n\r\n" }));
                self.finish(conn, s.mode);
                if end.is_none() {
                    conn.outq.push_front(Out::Close);
                    conn.state = State::Closing;
                }
                end
            }
            Framing::Length { left: 0 } => {
                self.finish(conn, s.mode);
                None
            }
            Framing::Length { .. } => {
                // The program ended short of the length it announced.
                self.stats.cgi_streams_aborted += 1;
                self.stats.cgi_failures += 1;
                conn.state = State::Closing;
                None
            }
            Framing::Close => {
                conn.state = State::Closing;
                None
            }
        }
    }

    /// Ends the connection now (after what was sent): the output behind
    /// is dropped.
    fn close_now(&mut self, conn: &mut Conn<'d, S::File>) -> Action<'d> {
        for o in conn.outq.drain(..) {
            if let Out::File { f, .. } = o {
                self.src.close(f);
            }
        }
        conn.state = State::Closing;
        Action::Close
    }

    /// The CGI's whole answer (or the last part of one whose header had
    /// not ended), or how the request failed.
    pub(super) fn cgi_done(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        mut w: CgiWait<'d>,
        result: Result<Aggregate<'d>, cgi_api::Failure>,
    ) {
        conn.state = State::Reading;
        let result = match (w.head.take(), result) {
            (Some(mut so_far), Ok(last)) => match so_far.append(last) {
                Ok(()) => Ok(*so_far),
                Err(_) => Err(cgi_api::Failure::BadOutput(cgi_api::OutputError::NoHeaderEnd)),
            },
            (_, r) => r,
        };
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
                        if self.local_redirect(conn, &req, w.redirects, loc, mode, head) {
                            return;
                        }
                    } else {
                        self.cgi_response(conn, &o, body, head, mode);
                    }
                }
            },
        }
        self.finish(conn, mode);
    }

    /// Serves `loc` for the request (a CGI's local redirect): true if it
    /// went to the CGI again (the connection waits for that answer).
    fn local_redirect(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        req: &Request,
        redirects: u8,
        loc: &str,
        mode: ConnMode,
        head: bool,
    ) -> bool {
        let fail = |core: &mut Self, conn: &mut Conn<'d, S::File>, f: cgi_api::Failure| {
            core.stats.cgi_failures += 1;
            core.push_simple(conn, f.status(), head, mode, "");
        };
        if redirects >= self.cfg.max_cgi_redirects {
            fail(self, conn, cgi_api::Failure::Fault);
            return false;
        }
        let Ok(target) = parse_target(loc.as_bytes()) else {
            fail(self, conn, cgi_api::Failure::BadOutput(cgi_api::OutputError::BadLocation));
            return false;
        };
        let mut new = req.clone();
        new.target = target;
        if new.method == Method::Post {
            new.method = Method::Get;
        }
        new.content_length = 0;
        new.chunked = false;
        if new.target.path.starts_with("/cgi-bin/") {
            self.dispatch_cgi(conn, Box::new(new), None, redirects + 1);
            return true;
        }
        let path = new.target.path.clone();
        self.serve_static(conn, &new, &path, mode);
        false
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
        let why = o.reason.as_deref().unwrap_or(reason(o.status));
        let Some(mut a) = self.prefix(o.status, why, mode) else { return conn.outq.push_back(Out::Close) };
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
