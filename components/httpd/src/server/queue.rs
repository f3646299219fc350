//! CGI requests that arrive while the cgi is away: between its death (or
//! the restart httpd asked for) and the attach of its new incarnation, a
//! CGI call is **held** here instead of failing with 503, and handed to the
//! new incarnation in arrival order ([`Server::cgi_up`]). Only the requests
//! the dead incarnation had (in flight) fail.
//!
//! Bounds: at most `cgi_queue_max` requests and `cgi_queue_bytes` of their
//! bodies (held by reference, in the transport's pool); a request beyond
//! either gets 503 at once (`cgi_queue_refused`). A held request the cgi
//! has not come back for within `cgi_queue_timeout_ms` gets 503
//! (`cgi_queue_expired`). A client that leaves (its connection closed, or a
//! FIN: as nginx takes a client's close while an upstream works for it, an
//! abort) is dropped from the queue (`cgi_queue_dropped`) and nothing goes
//! to the cgi for it. Requests behind a held one on the same connection
//! wait behind it, as behind any CGI request: the order per connection is
//! kept. Once the supervisor holds the cgi down ([`Server::cgi_gone`]) it
//! is not coming back: held calls and new ones get 503 at once. A streamed
//! request body (beyond `max_body`) is not held: its call
//! gets 503 and the body is read and dropped (holding it would pin up to
//! its window of body and the client's TCP window for the whole gap).
//!
//! [`Server::cgi_up`]: super::Server::cgi_up
//! [`Server::cgi_gone`]: super::Server::cgi_gone

use alloc::collections::VecDeque;

use super::{CgiCall, Conn, Core, Out, State};
use crate::source::{Clock, FileSource};

/// A CGI call held while the cgi is away.
pub(super) struct Held<'d> {
    /// The server connection.
    pub(super) conn: u32,
    pub(super) call: CgiCall<'d>,
    /// When it was held (for `cgi_queue_timeout_ms`).
    pub(super) at: u64,
}

/// The calls held while the cgi is away, in arrival order.
#[derive(Default)]
pub(super) struct GapQueue<'d> {
    /// `Some(since)` while the cgi is away.
    pub(super) down: Option<u64>,
    /// The cgi will not come back (the supervisor holds it down): calls
    /// are refused at once instead of held.
    pub(super) gone: bool,
    pub(super) held: VecDeque<Held<'d>>,
    /// Body bytes the held calls pin.
    pub(super) bytes: usize,
}

impl<'d> GapQueue<'d> {
    /// Takes `conn`'s held call out, if it has one.
    pub(super) fn take(&mut self, conn: u32) -> Option<Held<'d>> {
        let i = self.held.iter().position(|h| h.conn == conn)?;
        let h = self.held.remove(i)?;
        self.bytes -= body_len(&h.call);
        Some(h)
    }
}

/// The body bytes a call pins.
pub(super) fn body_len(call: &CgiCall<'_>) -> usize {
    call.body.as_ref().map_or(0, |b| b.len())
}

/// Whether `conn` still waits for call `id` (not answered, not closing).
pub(super) fn waits_for<F>(conn: &Conn<'_, F>, id: u32) -> bool {
    matches!(&conn.state, State::Cgi(w) if w.id == id)
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// The call leaves while the cgi is away: held (true), or refused with
    /// 503 (false: the queue is full, or its body streams).
    pub(super) fn hold_cgi(&mut self, c: u32, conn: &mut Conn<'d, S::File>, call: CgiCall<'d>) -> bool {
        let len = body_len(&call);
        let q = &self.gap;
        if q.gone || call.more || q.held.len() >= self.cfg.cgi_queue_max || q.bytes + len > self.cfg.cgi_queue_bytes {
            self.stats.cgi_queue_refused += 1;
            self.fail_held(conn, call.id, cgi_api::Failure::Unavailable);
            return false;
        }
        self.stats.cgi_queued += 1;
        let at = self.clock.now_ms();
        self.gap.bytes += len;
        self.gap.held.push_back(Held { conn: c, call, at });
        true
    }

    /// Answers `conn`'s call `id` (not sent to any cgi) with `f`'s status.
    pub(super) fn fail_held(&mut self, conn: &mut Conn<'d, S::File>, id: u32, f: cgi_api::Failure) {
        if !waits_for(conn, id) {
            return;
        }
        let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
        self.cgi_done(conn, w, Err(f));
        self.process(conn);
    }

    /// The client left while its call was held: nothing goes to the cgi,
    /// the connection closes (its answer is not wanted).
    pub(super) fn drop_held(&mut self, c: u32, conn: &mut Conn<'d, S::File>) {
        if self.gap.take(c).is_none() {
            return;
        }
        self.stats.cgi_queue_dropped += 1;
        conn.upload = None;
        for o in conn.outq.drain(..) {
            if let Out::File { f, .. } = o {
                self.src.close(f);
            }
        }
        conn.outq.push_back(Out::Close);
        conn.state = State::Closing;
    }
}
