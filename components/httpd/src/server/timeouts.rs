//! Time: what [`Server::tick`] ends or answers when it has waited too
//! long. Requests arriving too slowly or for too long (408), CGI calls the
//! cgi does not answer (504) or that it was away for too long (503),
//! streamed bodies that stop arriving, clients that take none of their
//! output (closed), and idle keep-alive connections (closed).

use alloc::vec::Vec;

use super::{Conn, ConnId, Core, Out, Server, State};
use crate::source::{Clock, FileSource};

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// Whether `bytes` arriving in `elapsed` ms is slower than
    /// `min_input_rate`, once past `rate_grace_ms`.
    pub(super) fn too_slow(&self, bytes: u64, elapsed: u64) -> bool {
        let rate = self.cfg.min_input_rate;
        rate > 0 && elapsed >= self.cfg.rate_grace_ms && bytes.saturating_mul(1000) < rate.saturating_mul(elapsed)
    }

    /// `conn`'s timeouts at `now`; returns whether it has output to pull
    /// because of them (or had some waiting already).
    fn tick_conn(&mut self, conn: &mut Conn<'d, S::File>, now: u64) -> bool {
        // Requests parsed only when the output before them is pulled (one
        // open file per connection) count as output: they wait for the
        // client to read just the same.
        let deferred = matches!(conn.state, State::Reading) && conn.inq_len > 0 && conn.req_start.is_none();
        let had = conn.outq.len() + usize::from(deferred);
        if self.upload_timed_out(conn, now) {
            return true;
        }
        self.cgi_waits_for_client(conn, now);
        self.time_out(conn, now, had);
        // A stream with nothing to pull yet waits for the cgi, not us.
        let waits_for_cgi = matches!(&conn.state, State::Stream(s) if s.parts.is_empty() && conn.outq.len() == 1);
        !waits_for_cgi && (conn.outq.len() != had || (had > 0 && !conn.outq.is_empty()))
    }

    /// A body streaming to the cgi that stopped arriving, or arrives
    /// slower than `min_input_rate`: 408. Returns whether it was.
    fn upload_timed_out(&mut self, conn: &mut Conn<'d, S::File>, now: u64) -> bool {
        if self.upload_stalled(conn, now) {
            // The body stopped arriving while the cgi waits for it.
            self.stats.request_timeouts += 1;
            self.upload_fail(conn, Some(408));
            return true;
        }
        if self.upload_too_slow(conn, now) {
            // It arrives, but slower than `min_input_rate`.
            self.stats.request_timeouts += 1;
            self.stats.body_too_slow += 1;
            self.upload_fail(conn, Some(408));
            return true;
        }
        false
    }

    /// A program that has consumed all of the body it was given waits for
    /// the client, not the other way round: its time runs from the next
    /// part.
    fn cgi_waits_for_client(&mut self, conn: &mut Conn<'d, S::File>, now: u64) {
        match (&mut conn.state, &conn.upload) {
            (State::Cgi(w), Some(u)) if !u.cgi_owes() && w.deadline != u64::MAX => {
                w.deadline = now + self.cfg.cgi_timeout_ms;
            }
            (State::Stream(s), Some(u)) if s.id == u.id && !u.cgi_owes() => {
                // The same for a program that streams its answer while it
                // reads: waiting for the client's next body part, it owes
                // us no output.
                s.deadline = now + self.cfg.cgi_timeout_ms;
            }
            _ => {}
        }
    }

    /// The timeouts of `conn`'s state (`had`: the output it had waiting).
    fn time_out(&mut self, conn: &mut Conn<'d, S::File>, now: u64, had: usize) {
        let cfg_send = self.cfg.send_timeout_ms;
        match &conn.state {
            State::Cgi(w) if now >= w.deadline => {
                let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                // It may have begun a stream: stop it.
                self.cancel(w.id);
                self.cgi_done(conn, w, Err(cgi_api::Failure::Timeout));
                self.process(conn);
            }
            State::Stream(s) if s.owed() && now >= s.deadline => {
                // The cgi had the credit for a part and sent none in time.
                self.stream_abort(conn, cgi_api::Failure::Timeout);
            }
            State::Stream(s)
                if (conn.outq.len() > 1 || !s.parts.is_empty()) && now.saturating_sub(conn.last_active) >= cfg_send =>
            {
                // Parts wait and the client took none for that long.
                self.leave_cgi(conn);
                self.send_timed_out(conn);
            }
            State::Reading if had > 0 && now.saturating_sub(conn.last_active) >= cfg_send => {
                // Output waits and nothing was taken for that long: the
                // client stopped reading. Its slot and buffers go.
                self.send_timed_out(conn);
            }
            State::Reading | State::Body(_) | State::Chunked(_) => self.input_timeouts(conn, now),
            _ => {}
        }
    }

    /// A client that took none of its output for `send_timeout_ms`: its
    /// output is dropped and the connection closes.
    fn send_timed_out(&mut self, conn: &mut Conn<'d, S::File>) {
        self.stats.send_timeouts += 1;
        for o in conn.outq.drain(..) {
            if let Out::File { f, .. } = o {
                self.src.close(f);
            }
        }
        conn.outq.push_back(Out::Close);
        conn.state = State::Closing;
    }

    /// A request arriving for longer than `request_timeout_ms`, or slower
    /// than `min_input_rate`: 408; a keep-alive connection idle for
    /// `idle_timeout_ms`: closed.
    fn input_timeouts(&mut self, conn: &mut Conn<'d, S::File>, now: u64) {
        let head = matches!(conn.state, State::Reading);
        let elapsed = conn.req_start.map(|t| now.saturating_sub(t));
        let bytes = conn.received - conn.req_base;
        if elapsed.is_some_and(|e| e >= self.cfg.request_timeout_ms) {
            self.stats.request_timeouts += 1;
            self.stats.head_timeouts_408 += u64::from(head);
            self.reject(conn, 408, false);
        } else if elapsed.is_some_and(|e| self.too_slow(bytes, e)) {
            // Arriving, but slower than any client needs: a peer that holds
            // the connection (and its buffers) with a byte now and then.
            self.stats.request_timeouts += 1;
            if head {
                self.stats.head_too_slow += 1;
            } else {
                self.stats.body_too_slow += 1;
            }
            self.reject(conn, 408, false);
        } else if conn.outq.is_empty()
            && conn.inq_len == 0
            && now.saturating_sub(conn.last_active) >= self.cfg.idle_timeout_ms
        {
            self.stats.idle_closes += 1;
            conn.outq.push_back(Out::Close);
            conn.state = State::Closing;
        }
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// Applies timeouts: a request arriving for longer than
    /// `request_timeout_ms` gets 408 and the connection closes; a CGI
    /// request older than `cgi_timeout_ms` gets 504; a keep-alive
    /// connection idle for `idle_timeout_ms` is closed. Returns the
    /// connections that now have output. Call it periodically.
    pub fn tick(&mut self) -> Vec<ConnId> {
        let now = self.core.clock.now_ms();
        let mut ready = self.expire_held(now);
        for (&id, conn) in self.conns.iter_mut() {
            if self.core.tick_conn(conn, now) {
                ready.push(ConnId(id));
            }
        }
        // A connection whose held call expired may be in twice.
        ready.sort_unstable();
        ready.dedup();
        ready
    }

    /// Held CGI calls the cgi did not come back for in time: 503. Returns
    /// their connections.
    fn expire_held(&mut self, now: u64) -> Vec<ConnId> {
        let mut ready = Vec::new();
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
        ready
    }
}
