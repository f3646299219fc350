//! The server's side of the cgi: its answers (whole, or streamed in
//! parts), whether a connection still waits for it, and its absence and
//! return (calls held while it is away, see `queue`). The requests going
//! out and the answers' parsing are in `cgi`.

use alloc::vec::Vec;

use iolite::Aggregate;

use super::{queue, CgiCall, ConnId, Control, OverWindow, Server, State};
use crate::source::{Clock, FileSource};

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// Whether connection `c` still waits for the CGI to send something
    /// for request `id`: its answer, or (streamed) a part it has the credit
    /// for. False once it was answered, timed out with 504, while every
    /// part it may send waits here, or when `c` is gone.
    pub fn cgi_awaiting(&self, c: ConnId, id: u32) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match &conn.state {
            State::Cgi(w) => w.id == id,
            State::Stream(s) => s.id == id && s.owed(),
            _ => false,
        })
    }

    /// Whether request `id`'s answer is still coming on `c`: awaited, or
    /// being streamed (whether or not the cgi has credit now).
    pub fn cgi_open(&self, c: ConnId, id: u32) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match &conn.state {
            State::Cgi(w) => w.id == id,
            State::Stream(s) => s.id == id && !s.done,
            _ => false,
        })
    }

    /// The CGI's answer to request `id` on `c`: its whole output (by
    /// reference), the last part of a streamed one ([`Server::cgi_part`]),
    /// or how it failed. Late answers (after the 504) are dropped. A
    /// failure once a streamed response started ends the connection after
    /// what was sent (the client sees an incomplete response).
    pub fn cgi_reply(&mut self, c: ConnId, id: u32, result: Result<Aggregate<'d>, cgi_api::Failure>) {
        let Some(conn) = self.conns.get_mut(&c.0) else { return };
        match &conn.state {
            State::Cgi(w) if w.id == id => {
                let State::Cgi(w) = core::mem::replace(&mut conn.state, State::Reading) else { unreachable!() };
                self.core.cgi_done(conn, w, result);
            }
            State::Stream(s) if s.id == id => self.core.stream_end(conn, result),
            _ => {
                self.core.stats.cgi_late_replies += 1;
                return;
            }
        }
        self.core.process(conn);
    }

    /// A part of the CGI's streamed answer to request `id` on `c`, by
    /// reference; more follow, the last comes with [`Server::cgi_reply`].
    /// Once the parts hold the CGI's whole header the response starts;
    /// each part then goes out as [`Server::next`] pulls it. A part for a
    /// request that is no longer waiting is dropped (counted as late).
    /// `Err(OverWindow)`: the cgi sent more parts than its window allows
    /// (`cgi_api::wire::STREAM_WINDOW`) without the credits that
    /// [`Server::take_cgi_controls`] gave back: it broke the protocol.
    pub fn cgi_part(&mut self, c: ConnId, id: u32, part: Aggregate<'d>) -> Result<(), OverWindow> {
        let Some(conn) = self.conns.get_mut(&c.0) else { return Ok(()) };
        match &conn.state {
            State::Cgi(w) if w.id == id => {}
            State::Stream(s) if s.id == id => {}
            _ => {
                self.core.stats.cgi_late_replies += 1;
                return Ok(());
            }
        }
        self.core.cgi_part(conn, part)?;
        self.core.process(conn);
        Ok(())
    }

    /// The cgi is away (it died, or a restart was asked for): until
    /// [`Server::cgi_up`], CGI calls are held instead of coming out of
    /// [`Server::next`] (see the `queue` module: bounded by
    /// `cgi_queue_max` and `cgi_queue_bytes`, 503 beyond; 503 after
    /// `cgi_queue_timeout_ms`; dropped when the client leaves). Calls
    /// already handed out are the caller's to fail (502).
    pub fn cgi_down(&mut self) {
        if self.core.gap.down.is_none() {
            self.core.gap.down = Some(self.core.clock.now_ms());
        }
    }

    /// The cgi is away for good (the supervisor holds it down): the calls
    /// held for its return and every CGI call from now on get 503 at once
    /// (`cgi_queue_refused`), until a [`Server::cgi_up`]. Returns the
    /// connections that now have output.
    pub fn cgi_gone(&mut self) -> Vec<ConnId> {
        self.cgi_down();
        self.core.gap.gone = true;
        let mut ready = Vec::new();
        while let Some(h) = self.core.gap.held.pop_front() {
            self.core.gap.bytes -= queue::body_len(&h.call);
            if let Some(conn) = self.conns.get_mut(&h.conn) {
                self.core.stats.cgi_queue_refused += 1;
                self.core.fail_held(conn, h.call.id, cgi_api::Failure::Unavailable);
                ready.push(ConnId(h.conn));
            }
        }
        ready
    }

    /// A call [`Server::next`] handed out that could not be sent: the cgi
    /// went away just before (its death was seen while sending). It is
    /// held like a call that arrives while the cgi is away, or refused
    /// with 503 as those are (which is then the connection's next output):
    /// only calls the dead incarnation had fail with 502. Marks the cgi
    /// away. Returns whether the call was held.
    pub fn cgi_hold(&mut self, c: ConnId, call: CgiCall<'d>) -> bool {
        self.cgi_down();
        let Some(conn) = self.conns.get_mut(&c.0) else { return false };
        match &mut conn.state {
            // It has not left: its time starts when it does.
            State::Cgi(w) if w.id == call.id => w.deadline = u64::MAX,
            _ => return false,
        }
        self.core.hold_cgi(c.0, conn, call)
    }

    /// Whether the cgi is away ([`Server::cgi_down`]).
    pub fn cgi_is_down(&self) -> bool {
        self.core.gap.down.is_some()
    }

    /// CGI calls held now.
    pub fn cgi_queue_len(&self) -> usize {
        self.core.gap.held.len()
    }

    /// A (new) cgi is attached: the held calls, in arrival order, to hand
    /// to it now, as [`Action::Cgi`] (their timeout runs from here); then
    /// pull [`Server::next`] for each connection. Calls go out as before
    /// from now on.
    pub fn cgi_up(&mut self) -> Vec<(ConnId, CgiCall<'d>)> {
        self.core.gap.down = None;
        self.core.gap.gone = false;
        let now = self.core.clock.now_ms();
        let mut out = Vec::new();
        // Held as their connections were pulled; released in the order the
        // requests arrived (were parsed): call ids are assigned then, in
        // sequence (wrapping: all are before `next_cgi`).
        let next = self.core.next_cgi;
        let mut held = core::mem::take(&mut self.core.gap.held);
        held.make_contiguous().sort_by_key(|h| h.call.id.wrapping_sub(next));
        for h in held {
            self.core.gap.bytes -= queue::body_len(&h.call);
            // A connection that gave up its request meanwhile (closing:
            // too much input) drops it.
            let Some(w) = self.conns.get_mut(&h.conn).and_then(|conn| match &mut conn.state {
                State::Cgi(w) if w.id == h.call.id => Some(w),
                _ => None,
            }) else {
                self.core.stats.cgi_queue_dropped += 1;
                continue;
            };
            w.deadline = now + self.core.cfg.cgi_timeout_ms;
            self.core.stats.cgi_queue_served += 1;
            out.push((ConnId(h.conn), h.call));
        }
        out
    }

    /// What to tell the cgi about its streams, in order: credits for parts
    /// pulled (`Control::Credit`), and streams no longer wanted
    /// (`Control::Cancel`: the client left, a `HEAD`, a complete
    /// `Content-Length`, a failure). Send each on the request channel
    /// (`cgi_api::wire::control_tag`).
    pub fn take_cgi_controls(&mut self) -> Vec<Control> {
        core::mem::take(&mut self.core.controls)
    }
}
