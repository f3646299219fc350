//! A connection's output, pulled in order: [`Server::next`] takes the
//! front of the queue (`Out`) and turns it into what the caller does next:
//! data to send (adjacent header parts and the first piece of a file
//! coalesced into one aggregate), a CGI call to hand over (or hold while
//! the cgi is away), a streamed CGI part, a waiting static request tried
//! again, or the close.

use iolite::Aggregate;

use super::cgi::Pulled;
use super::{Action, CgiCall, Conn, ConnId, Core, Out, Server, State};
use crate::source::{Clock, FileSource};

/// What one step of pulling gave.
// Returned and taken apart at once; boxing would allocate per action.
#[allow(clippy::large_enum_variant)]
enum Pull<'d> {
    /// Do this.
    Act(Action<'d>),
    /// Nothing for now.
    Wait,
    /// What was at the front is done with: pull again.
    Again,
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// A CGI call at the front of `c`'s output: handed out (its timeout
    /// starts now), or held while the cgi is away (or refused with 503,
    /// which is then the next output).
    fn call_out(&mut self, c: u32, conn: &mut Conn<'d, S::File>, call: CgiCall<'d>) -> Pull<'d> {
        if self.gap.down.is_some() {
            if self.hold_cgi(c, conn, call) {
                return Pull::Wait;
            }
            return Pull::Again;
        }
        if let State::Cgi(w) = &mut conn.state {
            if w.id == call.id {
                w.deadline = self.clock.now_ms() + self.cfg.cgi_timeout_ms;
            }
        }
        self.upload_call_sent(conn, call.id, call.more);
        Pull::Act(Action::Cgi(call))
    }

    /// `a` and the data right behind it, in one aggregate as far as it
    /// holds: further generated parts, and up to `max` bytes in all of a
    /// file that follows (a small response goes in one send).
    fn coalesce(&mut self, conn: &mut Conn<'d, S::File>, mut a: Aggregate<'d>, max: usize) -> Action<'d> {
        loop {
            match conn.outq.front() {
                Some(Out::Data(_)) => {
                    let Some(Out::Data(b)) = conn.outq.pop_front() else { unreachable!() };
                    if let Err((_, b)) = a.append(b) {
                        conn.outq.push_front(Out::Data(b));
                        break;
                    }
                }
                Some(Out::File { .. }) if a.len() < max => {
                    match self.pull_file(conn, max - a.len()) {
                        Ok(Some(chunk)) => {
                            if let Err((_, chunk)) = a.append(chunk) {
                                conn.outq.push_front(Out::Data(chunk));
                            }
                        }
                        Ok(None) => {}
                        Err(()) => {
                            // The header is already promised a body it
                            // cannot get: drop the connection.
                            drop(a);
                            return self.abort(conn);
                        }
                    }
                    break;
                }
                _ => break,
            }
        }
        Action::Send(a)
    }

    /// Ends `conn` at once (a response cannot be completed): its files are
    /// closed, nothing more is sent.
    fn abort(&mut self, conn: &mut Conn<'d, S::File>) -> Action<'d> {
        for o in conn.outq.drain(..) {
            if let Out::File { f, .. } = o {
                self.src.close(f);
            }
        }
        conn.state = State::Closing;
        Action::Close
    }

    /// One step: the front of `c`'s output taken (and put back if it is
    /// not done with).
    fn pull(&mut self, c: u32, conn: &mut Conn<'d, S::File>, out: Out<'d, S::File>, max: usize) -> Pull<'d> {
        match out {
            Out::Close => {
                conn.outq.clear();
                conn.state = State::Closing;
                Pull::Act(Action::Close)
            }
            Out::Cgi(call) => self.call_out(c, conn, call),
            Out::Stream => match self.pull_stream(conn) {
                Pulled::Act(a) => Pull::Act(a),
                Pulled::Wait => Pull::Wait,
                Pulled::Ended => Pull::Again,
            },
            waiting @ Out::Retry { .. } => {
                if self.retry(conn, waiting) {
                    Pull::Again
                } else {
                    Pull::Wait
                }
            }
            file @ Out::File { .. } => {
                conn.outq.push_front(file);
                match self.pull_file(conn, max) {
                    Ok(Some(a)) => Pull::Act(Action::Send(a)),
                    // Nothing now: `waits_for_source` says to ask again.
                    Ok(None) => Pull::Wait,
                    Err(()) => Pull::Act(self.abort(conn)),
                }
            }
            Out::Data(a) => Pull::Act(self.coalesce(conn, a, max)),
        }
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// Whether `c`'s output waits for its file source (a read or an open
    /// was busy): call [`Server::next`] for it again later (when buffers
    /// come back).
    pub fn waits_for_source(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| matches!(conn.outq.front(), Some(Out::File { .. } | Out::Retry { .. })))
    }

    /// Whether [`Server::next`] has something for `c`.
    pub fn has_output(&self, c: ConnId) -> bool {
        self.conns
            .get(&c.0)
            .is_some_and(|conn| !conn.outq.is_empty() || conn.upload.as_ref().is_some_and(|u| u.sendable()))
    }

    /// Whether `c`'s next output is already in memory (a header or a CGI
    /// reply), so that sending it needs no new buffers. A component that
    /// stops pulling output while its pool is low must still send these:
    /// they are what fills the pool, and only sending them frees it.
    pub fn holds_output(&self, c: ConnId) -> bool {
        self.conns.get(&c.0).is_some_and(|conn| match conn.outq.front() {
            Some(Out::Data(_)) => true,
            // A streamed CGI part waits in the cgi's pool.
            Some(Out::Stream) => matches!(&conn.state, State::Stream(s) if !s.parts.is_empty()),
            _ => false,
        })
    }

    /// The next thing to do for `c`, in order; `None` when there is nothing
    /// (until more input, a CGI reply or a timeout). Call it until `None`
    /// (or until the transport is full; call again when it drains).
    pub fn next(&mut self, c: ConnId) -> Option<Action<'d>> {
        self.next_within(c, usize::MAX)
    }
    /// As [`Server::next`], reading at most `max` bytes of a file into the
    /// send (headers and CGI output come whole): a transport that can take
    /// only a little now (a peer with a small window) then gets only a
    /// little of the file cache pinned for it.
    pub fn next_within(&mut self, c: ConnId, max: usize) -> Option<Action<'d>> {
        let core = &mut self.core;
        let conn = self.conns.get_mut(&c.0)?;
        conn.last_active = core.clock.now_ms();
        if conn.outq.is_empty() {
            // The previous response is done: its log lines.
            core.log_end(c, conn);
            core.process(conn);
            if matches!(conn.outq.front(), Some(Out::Retry { .. })) {
                // Refused just now: tried again on a later pull.
                return None;
            }
        }
        // Body parts go first: the answer may wait for them.
        if let Some(a) = core.upload_next(conn) {
            return Some(a);
        }
        let out = conn.outq.pop_front()?;
        match core.pull(c.0, conn, out, max) {
            Pull::Act(Action::Send(a)) => {
                core.log_sent(conn, &a);
                Some(Action::Send(a))
            }
            Pull::Act(Action::Close) => {
                core.log_end(c, conn);
                Some(Action::Close)
            }
            Pull::Act(a) => Some(a),
            Pull::Wait => None,
            Pull::Again => self.next_within(c, max),
        }
    }
}
