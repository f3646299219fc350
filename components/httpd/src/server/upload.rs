//! Streamed request bodies: a POST to a CGI program whose body is larger
//! than `max_body` (up to `max_cgi_body`; a `Content-Length` over it, or
//! a chunked body that grows past it) is not waited for. The CGI call
//! leaves at once (chunked: with the body decoded so far) marked `more`,
//! and the rest follows as **parts** ([`Action::CgiBody`]) as it arrives:
//! each part is a set of the client's own slices (at most
//! [`PART_MAX`] bytes and one aggregate's slices, chunk framing skipped),
//! never copied here.
//!
//! **Window.** At most `cgi_api::wire::INPUT_WINDOW` messages of a body
//! are taken from the input and not credited back by the cgi
//! ([`Server::cgi_input_credit`](super::Server::cgi_input_credit)). While
//! the window is full no more is taken: the body waits in the input
//! queue, and [`Server::input_paused`](super::Server::input_paused) tells
//! the caller to stop reading the connection (so TCP's window closes on
//! the client).
//!
//! **Endings.** The last part goes without `more`. If the program's answer
//! is complete (or failed, or was a local redirect) before the body is,
//! the rest of the body is read and discarded here (counted in
//! `cgi_upload_discarded_bytes`), and the connection goes on with the
//! next request. A client that sends nothing for `request_timeout_ms`
//! while the cgi waits for it gets 408 (if the answer has not begun; else
//! the connection closes) and the cgi a cancel; one that half-closes
//! mid-body gets no answer; a malformed chunk gets 400.

use alloc::collections::VecDeque;

use cgi_api::wire::INPUT_WINDOW;
use iolite::Aggregate;

use super::{Action, Conn, Core, Out, State};
use crate::chunked::{Decoder, Step};
use crate::source::{Clock, FileSource};

/// Most body bytes in one part.
pub const PART_MAX: usize = 64 * 1024;

/// How the body is delimited.
pub(super) enum BodyKind {
    /// `Content-Length`: bytes still to come.
    Length { left: u64 },
    /// Chunked: the framing decoder.
    Chunked(Decoder),
}

/// A body going to the cgi in parts.
pub(super) struct Upload<'d> {
    /// The CGI call (assigned when it is made: `fresh` until then).
    pub(super) id: u32,
    fresh: bool,
    kind: BodyKind,
    /// Parts taken from the input, not handed out yet.
    ready: VecDeque<Aggregate<'d>>,
    /// Parts handed out with `more` that the cgi has not credited.
    in_flight: u32,
    /// The call itself has been handed out (parts may follow it).
    call_sent: bool,
    /// The whole body has been taken from the input.
    ended: bool,
    /// The answer no longer needs the body: the rest is dropped.
    discard: bool,
    /// When the client last sent body bytes (or the upload began).
    last_progress: u64,
    /// Since when, and how many bytes of it, the body has been arriving
    /// while the cgi waits for it (`Config::min_input_rate`); starts again
    /// whenever the cgi's window is full (then the cgi is the slow one).
    rate_since: u64,
    rate_bytes: u64,
}

impl<'d> Upload<'d> {
    pub(super) fn new(kind: BodyKind, now: u64) -> Self {
        Self {
            id: 0,
            fresh: true,
            kind,
            ready: VecDeque::new(),
            in_flight: 0,
            call_sent: false,
            ended: false,
            discard: false,
            last_progress: now,
            rate_since: now,
            rate_bytes: 0,
        }
    }

    /// Assigns the CGI call (once): its `CONTENT_LENGTH`, if known.
    pub(super) fn assign(&mut self, id: u32, so_far: u64) -> Option<Option<u64>> {
        if !self.fresh {
            return None;
        }
        self.fresh = false;
        self.id = id;
        Some(match self.kind {
            BodyKind::Length { left } => Some(so_far + left),
            // The length is known only at the end: the program reads to
            // the end of its input (as Apache's mod_cgi passes chunked
            // bodies).
            BodyKind::Chunked(_) => None,
        })
    }

    /// Whether the window is full: nothing more is taken from the input.
    pub(super) fn window_full(&self) -> bool {
        !self.discard && self.ready.len() as u32 + self.in_flight >= INPUT_WINDOW
    }

    /// Whether the body waits for the client (not for the cgi).
    fn waits_for_client(&self) -> bool {
        !self.ended && !self.window_full()
    }

    /// Whether the cgi has body parts of ours it has not consumed: its
    /// answer's timeout runs only then (or once the body is complete).
    pub(super) fn cgi_owes(&self) -> bool {
        self.discard || self.ended || self.in_flight > 0
    }

    /// Whether a part can be handed out now.
    pub(super) fn sendable(&self) -> bool {
        self.call_sent && !self.discard && !self.ready.is_empty()
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// Takes as much of the connection's streamed body from its input as
    /// the window allows (all of it when discarding).
    pub(super) fn upload_step(&mut self, conn: &mut Conn<'d, S::File>) {
        let now = self.clock.now_ms();
        let cap = self.cfg.scan_cap();
        let Some(up) = conn.upload.as_mut() else { return };
        let wanted = match &conn.state {
            State::Cgi(w) => w.id == up.id || up.fresh,
            State::Stream(s) => s.id == up.id && !s.done,
            _ => false,
        };
        if !wanted && !up.discard {
            up.discard = true;
            let dropped: usize = up.ready.drain(..).map(|p| p.len()).sum();
            self.stats.cgi_upload_discarded_bytes += dropped as u64;
        }
        loop {
            let Some(up) = conn.upload.as_mut() else { return };
            if up.ended || up.window_full() {
                break;
            }
            if matches!(&up.kind, BodyKind::Chunked(d) if d.wants_framing()) {
                conn.refill_framing(cap, &mut self.stats);
            }
            let up = conn.upload.as_mut().expect("checked above");
            let step = match &mut up.kind {
                BodyKind::Length { left } if *left == 0 => {
                    up.ended = true;
                    continue;
                }
                BodyKind::Length { left } => Step::Data(*left),
                BodyKind::Chunked(dec) => dec.step(&conn.scan),
            };
            match step {
                Step::Skip(n) => conn.consume(n, &mut self.stats, cap, false),
                Step::Data(n) if conn.inq_len > 0 => {
                    let k = (n as usize).min(PART_MAX);
                    let part = conn.take_part(k, &mut self.stats);
                    let got = part.len() as u64;
                    let up = conn.upload.as_mut().expect("checked above");
                    up.last_progress = now;
                    up.rate_bytes += got;
                    match &mut up.kind {
                        BodyKind::Length { left } => *left -= got,
                        BodyKind::Chunked(dec) => dec.took(got),
                    }
                    if up.discard {
                        self.stats.cgi_upload_discarded_bytes += got;
                    } else {
                        up.ready.push_back(part);
                    }
                }
                Step::Done(n) => {
                    conn.consume(n, &mut self.stats, cap, false);
                    conn.upload.as_mut().expect("checked above").ended = true;
                }
                Step::Error(status) => return self.upload_fail(conn, Some(status)),
                Step::NeedMore | Step::Data(_) => {
                    if conn.eof {
                        // Cut off by a half-close: nothing to answer.
                        return self.upload_fail(conn, None);
                    }
                    break;
                }
            }
        }
        let Some(up) = conn.upload.as_ref() else { return };
        if up.ended {
            // What follows the body is the next request's head.
            conn.refill(cap, &mut self.stats);
            let up = conn.upload.as_mut().expect("checked above");
            if up.discard {
                // Read to its end: the input goes on with the next request.
                conn.upload = None;
                conn.req_start = None;
            } else if up.ready.is_empty() {
                // The last part ends the body, even without bytes.
                up.ready.push_back(Aggregate::new(self.d));
            }
        }
    }

    /// The call of the connection's upload was handed out.
    pub(super) fn upload_call_sent(&mut self, conn: &mut Conn<'d, S::File>, id: u32, more: bool) {
        if let Some(up) = conn.upload.as_mut().filter(|u| u.id == id && !u.fresh) {
            up.call_sent = true;
            if more {
                up.in_flight += 1;
            }
        }
    }

    /// The next body part to hand to the cgi, if one is ready.
    pub(super) fn upload_next(&mut self, conn: &mut Conn<'d, S::File>) -> Option<Action<'d>> {
        let up = conn.upload.as_mut()?;
        if !up.sendable() {
            return None;
        }
        let part = up.ready.pop_front()?;
        let more = !(up.ended && up.ready.is_empty());
        let id = up.id;
        if more {
            up.in_flight += 1;
        } else {
            conn.upload = None;
        }
        self.stats.cgi_upload_parts += 1;
        self.stats.cgi_upload_bytes += part.len() as u64;
        self.refresh_cgi_deadline(conn, id);
        Some(Action::CgiBody { id, part, more })
    }

    /// The cgi consumed `parts` body messages of request `id`.
    pub(super) fn upload_credit(&mut self, conn: &mut Conn<'d, S::File>, id: u32, parts: u32) -> bool {
        let Some(up) = conn.upload.as_mut().filter(|u| u.id == id && !u.fresh) else { return false };
        up.in_flight = up.in_flight.saturating_sub(parts);
        self.refresh_cgi_deadline(conn, id);
        true
    }

    fn refresh_cgi_deadline(&mut self, conn: &mut Conn<'d, S::File>, id: u32) {
        if let State::Cgi(w) = &mut conn.state {
            if w.id == id && w.deadline != u64::MAX {
                w.deadline = self.clock.now_ms() + self.cfg.cgi_timeout_ms;
            }
        }
    }

    /// Whether the upload's client sent nothing for `request_timeout_ms`
    /// while the body waited for it.
    pub(super) fn upload_stalled(&self, conn: &Conn<'d, S::File>, now: u64) -> bool {
        conn.upload
            .as_ref()
            .is_some_and(|u| u.waits_for_client() && now.saturating_sub(u.last_progress) >= self.cfg.request_timeout_ms)
    }

    /// Whether the body arrives slower than `min_input_rate` while the
    /// cgi waits for it (the measure starts again while it does not).
    pub(super) fn upload_too_slow(&self, conn: &mut Conn<'d, S::File>, now: u64) -> bool {
        let Some(u) = conn.upload.as_mut() else { return false };
        if !u.waits_for_client() {
            u.rate_since = now;
            u.rate_bytes = 0;
            return false;
        }
        self.too_slow(u.rate_bytes, now.saturating_sub(u.rate_since))
    }

    /// The body cannot be completed (`status`: the answer to give if the
    /// response has not begun; `None`: none, the client half-closed): the
    /// cgi is told to stop, the connection closes.
    pub(super) fn upload_fail(&mut self, conn: &mut Conn<'d, S::File>, status: Option<u16>) {
        conn.upload = None;
        self.stats.cgi_uploads_aborted += 1;
        self.leave_cgi(conn);
        match (&conn.state, status) {
            (State::Cgi(_), Some(s)) => {
                conn.state = State::Reading;
                self.reject(conn, s, false);
            }
            _ => {
                // The answer began (or is complete): the close ends it.
                conn.outq.retain(|o| !matches!(o, Out::Stream));
                conn.outq.push_back(Out::Close);
                conn.state = State::Closing;
            }
        }
    }
}

impl<'d, F> Conn<'d, F> {
    /// Takes up to `max` bytes from the front of the input by reference,
    /// as many as one aggregate holds without flattening (at least one
    /// byte while there is input). Body bytes already copied into the
    /// parse buffer are counted as such; the buffer is not refilled.
    pub(super) fn take_part(&mut self, max: usize, stats: &mut super::HttpStats) -> Aggregate<'d> {
        let mut out: Option<Aggregate<'d>> = None;
        let mut left = max.min(self.inq_len);
        while left > 0 {
            let Some(mut front) = self.inq.pop_front() else { break };
            let piece = if front.len() <= left {
                front
            } else {
                match front.split_off(left) {
                    Ok(tail) => {
                        self.inq.push_front(tail);
                        front
                    }
                    Err(_) => {
                        self.inq.push_front(front);
                        break;
                    }
                }
            };
            let n = piece.len();
            match &mut out {
                None => out = Some(piece),
                Some(o) => {
                    if let Err((_, piece)) = o.append(piece) {
                        // A full aggregate: the rest is the next part's.
                        self.inq.push_front(piece);
                        break;
                    }
                }
            }
            left -= n;
            self.inq_len -= n;
        }
        let out = out.unwrap_or_else(|| unreachable!("input was there"));
        let s = out.len().min(self.scan.len());
        self.scan.drain(..s);
        stats.request_body_bytes_copied_to_parse += s as u64;
        out
    }

    /// Refills the parse buffer for chunk framing only: up to the first
    /// line end (a size line, the CRLF after data, a trailer line), so
    /// that the chunk data after it is not copied.
    pub(super) fn refill_framing(&mut self, cap: usize, stats: &mut super::HttpStats) {
        if self.scan.contains(&b'\n') {
            return;
        }
        let mut skip = self.scan.len();
        let before = skip;
        'outer: for a in &self.inq {
            for s in a.slices() {
                if skip >= s.len() {
                    skip -= s.len();
                    continue;
                }
                let part = &s[skip..];
                skip = 0;
                let room = cap.saturating_sub(self.scan.len());
                let want = part.iter().position(|&b| b == b'\n').map_or(part.len(), |i| i + 1);
                self.scan.extend_from_slice(&part[..want.min(room)]);
                if self.scan.len() >= cap || want < part.len() || part.get(want - 1) == Some(&b'\n') {
                    break 'outer;
                }
            }
        }
        stats.request_bytes_copied_to_parse += (self.scan.len() - before) as u64;
    }
}
