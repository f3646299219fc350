//! Pulling output: each round, the ready connections' responses are
//! pulled from the server and handed to netstack (or their CGI calls and
//! request bodies to the cgi), within the round's budget, each
//! connection's share (fairness), its send window (what a slow reader
//! pins, and no send netstack would refuse), and the room in our pool and
//! netstack's ring.

use alloc::vec::Vec;

use httpd::{Action, ConnId as HConn};
use iolite::Aggregate;
use socket_api::{ConnId, Request};

use super::cgi::Unsent;
use super::{Httpd, APP_POOL, CONN_ROUND_BYTES, CONN_ROUND_SENDS, OUTQ_PUMP_MAX, POOL_LOW_QUARTERS, ROUND_BYTES};

/// What one round of `pump` has left: its byte budget, the connections to
/// pull again in the next round, and the CGI calls that failed to go.
struct Round {
    budget: usize,
    later: Vec<HConn>,
    cgi_failures: Vec<(HConn, (u32, cgi_api::Failure))>,
}

impl Httpd {
    /// Pulls output of ready connections and hands it to netstack / the cgi.
    pub(super) fn pump(&mut self) {
        if self.outq.len() >= socket_api::FWD_CAP {
            // netstack has not taken what we have for it: pull nothing more.
            return;
        }
        let mut ready = core::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        let mut round = Round { budget: ROUND_BYTES, later: Vec::new(), cgi_failures: Vec::new() };
        for id in ready {
            let Some(&conn) = self.by_srv.get(&id.0) else { continue };
            let closing = self.srv.is_closing(id);
            let (blocked, window) = match self.conns.get(conn) {
                Some(c) => (c.blocked(), c.window()),
                None => (false, None),
            };
            if blocked && !closing {
                // Back-pressure: its next window puts it back in `ready`.
                // Its request body still goes to the cgi as the cgi
                // credits it: only the answer waits for the client.
                self.pump_input(id);
                continue;
            }
            if round.budget == 0 || self.must_wait(id) {
                round.later.push(id);
                continue;
            }
            // Per connection and round, a bounded share (fairness), and no
            // more than its window allows (what a slow reader pins); what
            // netstack may hold is bounded by the window's send limit.
            let round_bytes = match window {
                Some(left) if !closing => left.min(CONN_ROUND_BYTES),
                _ => CONN_ROUND_BYTES,
            };
            self.pump_conn(id, conn, round_bytes, &mut round);
        }
        for (id, (call_id, f)) in round.cgi_failures {
            self.srv.cgi_reply(id, call_id, Err(f));
            round.later.push(id);
        }
        self.ready = round.later;
        if !self.ready.is_empty() && self.outq.is_empty() && !self.pool_low() && round.budget > 0 {
            // Only CGI failures were left: pull again at once.
            self.pump();
        }
    }

    /// Pulls `id`'s output (netstack connection `conn`) until it has had
    /// `round_bytes` or its share of sends, it waits (credit, fs, the cgi,
    /// ring room), or the round's budget is spent.
    fn pump_conn(&mut self, id: HConn, conn: ConnId, round_bytes: usize, round: &mut Round) {
        let (mut sends, mut bytes) = (0usize, 0usize);
        loop {
            if self.outq.len() >= OUTQ_PUMP_MAX {
                // netstack's ring is full and two rings' worth wait.
                round.later.push(id);
                return;
            }
            if !self.conns.get_mut(conn).is_none_or(|c| c.may_send()) {
                // The window that frees credit puts it back in `ready`.
                self.credit_waits += 1;
                self.pump_input(id);
                return;
            }
            // Static responses are built here (file reads included):
            // every byte copied meanwhile is charged to them.
            let copied_before = self.d.stats().bytes_copied;
            let a = self.srv.next_within(id, round_bytes - bytes);
            self.static_copied += self.d.stats().bytes_copied - copied_before;
            // Pulling may have parsed a request whose body is for the
            // cgi (and queued its `100 Continue`): the hand-off goes
            // to netstack before anything that makes the client send.
            self.sync_hand_off(id, conn);
            match a {
                None => {
                    if self.srv.waits_for_source(id) {
                        // fs was busy: ask again next round (a wake-up,
                        // e.g. netstack returning buffers), not now.
                        self.fs_waiting.push(id);
                    }
                    return;
                }
                Some(Action::Send(agg)) => {
                    round.budget = round.budget.saturating_sub(agg.len());
                    sends += 1;
                    bytes += agg.len();
                    if let Some(c) = self.conns.get_mut(conn) {
                        c.sent(agg.len());
                    }
                    self.request(Request::Send { conn }.encode(), agg);
                    if round.budget == 0 || self.must_wait(id) || sends >= CONN_ROUND_SENDS || bytes >= round_bytes {
                        round.later.push(id);
                        return;
                    }
                }
                Some(Action::Close) => {
                    if let Some(req) = self.conns.close(conn) {
                        self.request(req.encode(), Aggregate::new(self.d));
                    }
                    // Everything is queued at netstack: the server's
                    // slot is free now, not only after TIME-WAIT (the
                    // later Closed event finds nothing to close).
                    self.by_srv.remove(&id.0);
                    self.srv.closed(id);
                    return;
                }
                Some(Action::Cgi(call)) => {
                    let more = call.more;
                    match self.cgi_send(id, call) {
                        Ok(()) if more => {
                            // Its body follows in parts: pull them too.
                            self.uploading.insert(id);
                            continue;
                        }
                        Ok(()) => {}
                        Err(Unsent::Failed(call_id, f)) => round.cgi_failures.push((id, (call_id, f))),
                        Err(Unsent::Away(call)) => {
                            if !self.srv.cgi_hold(id, *call) {
                                // Refused (503): that is its output.
                                round.later.push(id);
                            }
                        }
                    }
                    return;
                }
                Some(Action::CgiBody { id: call_id, part, more }) => self.body_part(id, call_id, part, more),
            }
        }
    }

    /// Hands the cgi the parts of `id`'s request body that may go now (it
    /// has input credit) without pulling anything for the client: for a
    /// connection whose send side is full. A program that reads its body
    /// while its answer waits for the client must not wait for the client
    /// to read (it used to: the upload stalled, the program timed out).
    pub(super) fn pump_input(&mut self, id: HConn) {
        while let Some(a) = self.srv.next_input(id) {
            if let Action::CgiBody { id: call_id, part, more } = a {
                self.body_part(id, call_id, part, more);
            }
        }
    }

    /// A body part for the cgi: sent, or queued behind those that wait.
    pub(super) fn body_part(&mut self, id: HConn, call_id: u32, part: Aggregate<'static>, more: bool) {
        if !self.body_wait.is_empty() {
            self.body_wait.push_back((id, call_id, part, more));
        } else if let Err(part) = self.cgi_send_part(call_id, part, more) {
            self.body_wait.push_back((id, call_id, part, more));
        }
    }

    /// Whether `id` must wait for netstack to return buffers before we pull
    /// its output: our pool is low, and its next output is not already in
    /// the pool (output that is must go out, or nothing frees the pool).
    pub(super) fn must_wait(&self, id: HConn) -> bool {
        self.pool_low() && !self.srv.holds_output(id)
    }

    /// Whether our pool is fuller than `POOL_LOW_QUARTERS` (copy modes copy
    /// into it): pull no more until netstack returns buffers.
    pub(super) fn pool_low(&self) -> bool {
        self.d
            .pool_stats(APP_POOL)
            .map(|s| s.pages_in_use as u64 * 4 >= s.pages as u64 * POOL_LOW_QUARTERS)
            .unwrap_or(false)
    }
}
