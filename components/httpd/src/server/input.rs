//! Input: a connection's received aggregates into requests. Heads are
//! parsed from a bounded copy of the first input bytes (`Conn::scan`,
//! counted in `request_bytes_copied_to_parse`); bodies are taken by
//! reference, the client's own slices (flattened, counted, only beyond
//! `MAX_SLICES`); chunked bodies are decoded into slices of the input with
//! the framing skipped. A complete request goes to `Core::handle`;
//! `max_pipeline` responses queued stop the parsing until the caller pulls
//! (back-pressure), and a FIN ends the connection once what arrived is
//! answered.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use iolite::{Aggregate, PoolId};

use super::upload::{BodyKind, Upload};
use super::{Conn, Core, HttpStats, Out, Remote, State};
use crate::chunked::{Decoder, Step};
use crate::request::{parse_head, Head, Method, Request};
use crate::source::{Clock, FileSource};

/// A chunked request body being decoded: the framing decoder and the data
/// so far (the client's slices, by reference).
pub(super) struct ChunkedBody<'d> {
    req: Box<Request>,
    dec: Decoder,
    body: Aggregate<'d>,
}
impl ChunkedBody<'_> {
    /// Whether this body goes to the cgi (see [`streams_body`]).
    pub(super) fn streams(&self) -> bool {
        streams_body(&self.req)
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// Parses and handles as many requests as the buffered input holds.
    pub(super) fn process(&mut self, conn: &mut Conn<'d, S::File>) {
        let now = self.clock.now_ms();
        loop {
            if conn.upload.is_some() {
                self.upload_step(conn);
                if conn.upload.is_some() {
                    // The input is that body's until it ends.
                    return;
                }
            }
            match &conn.state {
                State::Closing | State::Cgi(_) | State::Stream(_) => return,
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
                    // Back-pressure, resumed by next(): a bounded queue of
                    // answers, and at most one open file per connection (it
                    // stays open until its last byte is pulled, which for a
                    // slow reader is a long time: a client that pipelines
                    // many file requests must not take fs's file table).
                    if conn.outq.len() >= self.cfg.max_pipeline
                        || conn.outq.iter().any(|o| matches!(o, Out::File { .. } | Out::Retry { .. }))
                    {
                        return;
                    }
                    if conn.inq_len == 0 {
                        conn.req_start = None;
                        if conn.eof {
                            conn.outq.push_back(Out::Close);
                            conn.state = State::Closing;
                        }
                        return;
                    }
                    if conn.req_start.is_none() {
                        // Its bytes so far are those buffered now.
                        conn.req_start = Some(now);
                        conn.req_base = conn.received - conn.inq_len as u64;
                    }
                    match parse_head(&conn.scan, &self.cfg.limits) {
                        Head::Partial => {
                            if conn.eof {
                                conn.outq.push_back(Out::Close);
                                conn.state = State::Closing;
                            }
                            return;
                        }
                        Head::Reject(r) => {
                            self.log_begin(conn, None);
                            self.reject(conn, r.status, r.allow);
                            return;
                        }
                        Head::Done(req, n) => {
                            self.log_begin(conn, Some(&req));
                            // A body is taken by reference: the parse buffer
                            // is refilled only after it (not copied into it).
                            conn.consume(n, &mut self.stats, self.cfg.scan_cap(), req.content_length == 0);
                            let streams = streams_body(&req);
                            if req.chunked {
                                let limit =
                                    if streams { self.cfg.limits.max_cgi_body } else { self.cfg.limits.max_body };
                                let dec = Decoder::new(limit as u64, self.cfg.limits.max_header_bytes);
                                let body = Aggregate::new(self.d);
                                conn.state = State::Chunked(Box::new(ChunkedBody { req: Box::new(req), dec, body }));
                            } else if streams && req.content_length > self.cfg.limits.max_body as u64 {
                                // Too large to wait for: the call goes now,
                                // the body follows in parts.
                                self.stats.cgi_uploads += 1;
                                let kind = BodyKind::Length { left: req.content_length };
                                conn.upload = Some(Box::new(Upload::new(kind, now)));
                                if req.expect_continue && conn.inq_len == 0 {
                                    conn.continue_sent = true;
                                    if let Some(a) = self.gen(|w| w.write_str("HTTP/1.1 100 Continue\r\n\r\n")) {
                                        conn.outq.push_back(Out::Data(a));
                                    }
                                }
                                conn.req_start = None;
                                conn.continue_sent = false;
                                self.handle(conn, req, None);
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
        let now = self.clock.now_ms();
        loop {
            let State::Chunked(cb) = &mut conn.state else { return false };
            if cb.dec.wants_framing() {
                // Only the framing is copied to be read, not chunk data.
                conn.refill_framing(cap, &mut self.stats);
            }
            let State::Chunked(cb) = &mut conn.state else { return false };
            match cb.dec.step(&conn.scan) {
                Step::Skip(n) => conn.consume(n, &mut self.stats, cap, false),
                Step::Data(n) if conn.inq_len > 0 => {
                    if streams_body(&cb.req)
                        && cb.body.len() as u64 + n.min(conn.inq_len as u64) > self.cfg.limits.max_body as u64
                    {
                        // Past what we wait for: the call goes now with the
                        // body so far, the rest follows in parts.
                        let State::Chunked(cb) = core::mem::replace(&mut conn.state, State::Reading) else {
                            unreachable!()
                        };
                        let ChunkedBody { req, body, dec } = *cb;
                        self.stats.cgi_uploads += 1;
                        conn.upload = Some(Box::new(Upload::new(BodyKind::Chunked(dec), now)));
                        conn.req_start = None;
                        conn.continue_sent = false;
                        self.handle(conn, *req, (!body.is_empty()).then_some(body));
                        return true;
                    }
                    let k = (n as usize).min(conn.inq_len);
                    let piece = conn.take_part(k, &mut self.stats);
                    let State::Chunked(cb) = &mut conn.state else { return false };
                    cb.dec.took(piece.len() as u64);
                    if let Err((_, piece)) = cb.body.append(piece) {
                        // More chunks than an aggregate has slices.
                        self.stats.bodies_flattened += 1;
                        self.stats.body_bytes_flattened += cb.body.len() as u64;
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
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// A pending head's input in more than `max_input_slices` slices is
    /// copied into one buffer of our pool (counted), and the transport's
    /// buffers go back. Only while everything buffered can be the head
    /// (no more than the parser looks at): a larger input is refused by
    /// the parser's limits anyway.
    pub(super) fn bound_head_input(&mut self, conn: &mut Conn<'d, S::File>) {
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
}

/// Whether a request's body may stream to the cgi (a POST to a program):
/// up to `max_cgi_body`, in parts beyond `max_body`.
pub(super) fn streams_body(req: &Request) -> bool {
    req.method == Method::Post && (req.target.path == "/cgi-bin" || req.target.path.starts_with("/cgi-bin/"))
}

impl<'d, F> Conn<'d, F> {
    pub(super) fn new(remote: Option<Remote>, now: u64) -> Self {
        Self {
            inq: VecDeque::new(),
            inq_len: 0,
            scan: Vec::new(),
            outq: VecDeque::new(),
            state: State::Reading,
            req_start: None,
            received: 0,
            req_base: 0,
            last_active: now,
            remote,
            eof: false,
            continue_sent: false,
            log: None,
            upload: None,
        }
    }

    /// Makes `scan` the first `min(inq_len, cap)` input bytes (it is always
    /// a prefix of them: while a body is awaited it is not refilled).
    pub(super) fn refill(&mut self, cap: usize, stats: &mut HttpStats) {
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
    pub(super) fn consume(&mut self, mut n: usize, stats: &mut HttpStats, cap: usize, refill: bool) {
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
    pub(super) fn take(
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
