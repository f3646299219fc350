//! The client interface's server side: the stack's state machine for one
//! socket client ([`Session`]), host-tested. The messages themselves
//! (requests, events, their tags) are the `socket-api` protocol crate's,
//! re-exported here.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use iolite::Aggregate;
use outbox::Outbox;

use crate::{ConnId, NetError, NetStack, NicPort, Recv};

pub use socket_api::{ErrorCode, Event, Request};
use socket_api::{Grant, OP_SEND};

impl From<NetError> for ErrorCode {
    fn from(e: NetError) -> Self {
        match e {
            NetError::NotFound => ErrorCode::NotFound,
            NetError::WouldBlock => ErrorCode::WouldBlock,
            NetError::NotConnected => ErrorCode::NotConnected,
            NetError::AddressInUse => ErrorCode::AddressInUse,
            NetError::InvalidArgument => ErrorCode::InvalidArgument,
            NetError::Iolite(_) | NetError::NoMemory => ErrorCode::NoMemory,
        }
    }
}

struct SessConn<'d> {
    id: ConnId,
    /// Sends waiting for TCP's send buffer, in order (at most
    /// `max_pending`).
    pending: Outbox<Aggregate<'d>>,
    /// A window that opens is owed (sends were held back or refused).
    blocked: bool,
    /// A window that closed was sent and none that opened since.
    full_sent: bool,
    close_requested: bool,
    eof_sent: bool,
    /// The client asked for no `Data` for now (`Request::Receive`).
    rx_paused: bool,
    /// The client's sends on it as we took them, and the send window we
    /// told it (`socket_api::window`): once it sent all the window allows
    /// and nothing is held back, the next window goes out unasked (the
    /// client may be waiting for it).
    grant: Grant,
}

/// The stack's side of one client: which ports and connections are its,
/// the aggregates waiting for send space, and the events to deliver.
///
/// Everything it keeps is bounded. Per connection at most `max_pending`
/// aggregates wait for send space (a client beyond its window's send limit
/// gets `WouldBlock`), and while any wait, the connection's received data stays
/// in TCP (no `Data` events: its receive window closes). Events wait in a ring of `events_cap`: events that carry
/// or announce data (received data, EOF, accepted connections, closes) are
/// made only while a quarter of the ring is free, otherwise they wait in
/// the stack (TCP's receive window closes; counted in
/// [`SessionStats::events_deferred`]); the other events use the rest, and
/// an error report that finds the ring full is dropped
/// ([`SessionStats::events_dropped`]). Its listening sockets (every port's
/// backlog together) are at most its listen budget
/// ([`Session::with_listen_budget`]): socket rings come from one budget for
/// all clients, so one client's listens must not take what another's
/// listeners refill from.
pub struct Session<'d> {
    /// Ports listened on, with their backlogs.
    ports: Vec<(u16, u16)>,
    /// Listening sockets (backlogs) the client may hold in all.
    listen_budget: usize,
    conns: Vec<SessConn<'d>>,
    /// Index in `conns` by id: a request or a touched connection is found
    /// in O(log n), not by a walk over hundreds of connections. Checked
    /// on use and rebuilt if it does not match (see `index_of`).
    conn_at: BTreeMap<ConnId, usize>,
    events: VecDeque<(Event, Option<Aggregate<'d>>)>,
    max_pending: usize,
    events_cap: usize,
    stats: SessionStats,
    /// Held-back bytes went into TCP since the stack's last poll.
    queued_since_poll: bool,
    /// The connections accepted in a poll (looked at in it), and the
    /// touched ones [`Session::poll`] takes from the stack: buffers kept
    /// between polls.
    visit: Vec<ConnId>,
    touched: Vec<ConnId>,
    /// Look at every connection in the next [`Session::poll`] (events
    /// waited for ring room: they are made on a later visit).
    visit_all: bool,
}

/// What a [`Session`] deferred or dropped to stay within its bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Times data, EOF, accept or close events waited for ring room.
    pub events_deferred: u64,
    /// Error events dropped because the event ring was full.
    pub events_dropped: u64,
    /// Sends refused with `WouldBlock` (the connection's held-back sends
    /// were at `max_pending`).
    pub sends_refused: u64,
    /// Listens refused with `NoMemory` because they would exceed the
    /// session's listen budget.
    pub listens_refused: u64,
    /// Windows that closed (a connection's sends were held back).
    pub send_full: u64,
    /// Times a client paused a connection's input (`Request::Receive`).
    pub receive_pauses: u64,
    /// Times a held-back send was offered to TCP and did not fit (work
    /// spent on a connection that could not send).
    pub send_retries: u64,
}

impl<'d> Session<'d> {
    /// A session that holds back at most `max_pending` aggregates per
    /// connection while TCP's send window is full, and at most 1024
    /// undelivered events.
    pub fn new(max_pending: usize) -> Self {
        Self::with_events(max_pending, 1024)
    }

    /// As [`Session::new`], with room for `events_cap` (>= 8) undelivered
    /// events.
    pub fn with_events(max_pending: usize, events_cap: usize) -> Self {
        let events_cap = events_cap.max(8);
        Self {
            ports: Vec::new(),
            listen_budget: usize::MAX,
            conns: Vec::new(),
            conn_at: BTreeMap::new(),
            events: VecDeque::with_capacity(events_cap),
            max_pending,
            events_cap,
            stats: SessionStats::default(),
            queued_since_poll: false,
            visit: Vec::new(),
            touched: Vec::new(),
            visit_all: false,
        }
    }

    /// Limits the client to `sockets` listening sockets, all its ports'
    /// backlogs together (default: no limit but the stack's memory). A
    /// listen beyond it fails with `NoMemory` and takes nothing.
    pub fn with_listen_budget(mut self, sockets: usize) -> Self {
        self.listen_budget = sockets;
        self
    }

    /// Listening sockets the client holds (its ports' backlogs together).
    pub fn listen_sockets(&self) -> usize {
        self.ports.iter().map(|&(_, b)| b as usize).sum()
    }

    /// Connections the client holds.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Bytes of the client's sends held back (waiting for TCP's send
    /// buffer) on all its connections: what it pins beyond TCP's queues.
    pub fn held_back_bytes(&self) -> usize {
        self.conns.iter().flat_map(|c| c.pending.iter()).map(Aggregate::len).sum()
    }

    /// The session's bound counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Events waiting for the client.
    pub fn events_queued(&self) -> usize {
        self.events.len()
    }

    /// Room for `n` more events that carry or announce data.
    fn data_room(&self, n: usize) -> bool {
        self.events.len() + n <= self.events_cap - self.events_cap / 4
    }

    /// Queues a control event if the ring has room; `false` if not.
    fn control(&mut self, e: Event) -> bool {
        if self.events.len() >= self.events_cap {
            return false;
        }
        self.events.push_back((e, None));
        true
    }

    fn error(&mut self, op: u8, id: u32, code: ErrorCode) {
        if !self.control(Event::Error { op, id, code }) {
            self.stats.events_dropped += 1;
        }
    }

    /// Handles one request message (`tag` and its aggregate).
    pub fn handle(&mut self, stack: &mut NetStack<'d>, tag: u64, agg: Aggregate<'d>) {
        let req = match Request::decode(tag) {
            Ok(r) => r,
            Err(code) => {
                let (op, id, _) = socket_api::split_tag(tag);
                return self.error(op, id, code);
            }
        };
        let (op, id) = (req.op(), req.id());
        let conn = self.index_of(id);
        let not_yours = || if stack.exists(id) { ErrorCode::NotYours } else { ErrorCode::NotFound };
        match req {
            Request::Listen { backlog, .. }
                if self.listen_sockets().saturating_add(backlog as usize) > self.listen_budget =>
            {
                self.stats.listens_refused += 1;
                self.error(op, id, ErrorCode::NoMemory)
            }
            Request::Listen { port, backlog } => match stack.listen(port, backlog as usize) {
                Ok(()) => {
                    self.ports.push((port, backlog));
                    if !self.control(Event::Listening { port }) {
                        self.stats.events_dropped += 1;
                    }
                }
                Err(e) => self.error(op, id, e.into()),
            },
            Request::Unlisten { port } => {
                if !self.ports.iter().any(|&(p, _)| p == port) {
                    return self.error(op, id, ErrorCode::NotFound);
                }
                self.ports.retain(|&(p, _)| p != port);
                let _ = stack.unlisten(port);
            }
            Request::Send { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                let c = &mut self.conns[i];
                c.grant.seen(agg.len());
                if c.close_requested {
                    self.error(op, id, ErrorCode::NotConnected);
                    return self.report_taken(i);
                }
                // Behind what waits (and `push_pending` sends it at once
                // if TCP has room for all of it).
                if let Err(agg) = c.pending.push(agg) {
                    // Only a client beyond its credit gets here.
                    c.blocked = true;
                    self.stats.sends_refused += 1;
                    drop(agg);
                    self.error(op, id, ErrorCode::WouldBlock);
                    return self.report_taken(i);
                }
                self.push_pending(stack, i);
            }
            Request::Close { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                self.conns[i].close_requested = true;
                self.push_pending(stack, i);
            }
            Request::Abort { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                let _ = self.conns[i].pending.clear();
                let _ = stack.abort(id);
            }
            Request::HandOff { on, .. } => {
                let Some(_) = conn else { return self.error(op, id, not_yours()) };
                if stack.set_hand_off(id, on).is_err() {
                    self.error(op, id, ErrorCode::InvalidArgument);
                }
            }
            Request::Receive { on, .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                self.stats.receive_pauses += u64::from(!on && !self.conns[i].rx_paused);
                self.conns[i].rx_paused = !on;
                if on {
                    // What waited in TCP is delivered on the next poll.
                    self.visit_all = true;
                }
            }
        }
    }

    /// Moves held-back aggregates of connection `i` into TCP as space allows.
    fn push_pending(&mut self, stack: &mut NetStack<'d>, i: usize) {
        let c = &mut self.conns[i];
        let id = c.id;
        let (mut queued, mut failed, mut retries) = (false, None, 0);
        // No room at all on a connection that can still send (a peer that
        // does not read): nothing to try. (One that cannot send any more
        // goes on: its sends fail and the client is told.)
        let stuck = !c.pending.is_empty() && stack.send_space(id) == Ok(0) && stack.may_send(id);
        if !stuck {
            c.pending.drain(|a| match stack.send(id, a) {
                Ok(()) => {
                    queued = true;
                    Ok(())
                }
                Err((NetError::WouldBlock, mut a)) => {
                    retries += 1;
                    // Send what fits now: an aggregate larger than the whole
                    // send window would otherwise never go (references only:
                    // splitting copies nothing). The rest waits, first.
                    let space = stack.send_space(id).unwrap_or(0);
                    if space == 0 || space >= a.len() {
                        return Err(a);
                    }
                    let Ok(tail) = a.split_off(space) else { return Err(a) };
                    match stack.send(id, a) {
                        Ok(()) => {
                            queued = true;
                            Err(tail)
                        }
                        Err((_, mut whole)) => {
                            // Cannot happen (it fits); keep the order.
                            if let Err((_, t)) = whole.append(tail) {
                                drop(t);
                            }
                            Err(whole)
                        }
                    }
                }
                Err((e, a)) => {
                    failed = Some(e);
                    Err(a)
                }
            });
        }
        self.stats.send_retries += retries;
        self.queued_since_poll |= queued;
        if let Some(e) = failed {
            // The connection cannot send: what waits is dropped. On to what
            // an empty queue means (a close the client asked for goes to
            // TCP now: nothing may visit this connection again).
            c.pending.clear();
            if e == NetError::NotConnected && stack.forget_dead_with_input(id) {
                // Its peer reset it (or it timed out) and the client is
                // answering input nobody will read: gone, with what it
                // received; the next visit tells the client `Closed`.
                return;
            }
            let ev = Event::Error { op: OP_SEND, id, code: e.into() };
            if !self.control(ev) {
                self.stats.events_dropped += 1;
            }
        }
        self.conns[i].pending.shrink();
        // Credit first: a client whose window opens can use it at once.
        self.report_taken(i);
        let c = &self.conns[i];
        let (id, held, was_blocked) = (c.id, c.pending.len(), c.blocked);
        if held > 0 && !c.full_sent {
            // Close the client's window (it would otherwise keep pulling
            // its response into our held-back queue).
            let grant = c.grant.closed();
            if self.control(grant.event(id, held)) {
                let c = &mut self.conns[i];
                c.grant = grant;
                c.full_sent = true;
                c.blocked = true;
                self.stats.send_full += 1;
            } else {
                // The ring is full: told on a later visit.
                self.visit_all = true;
            }
        } else if held == 0 {
            // Held-back data went out, or the client used its allowance
            // and everything was taken: it may be waiting for this, and is
            // told once a worthwhile share is free (owed until then: the
            // acknowledgement that frees it brings a visit).
            let spent = c.grant.spent();
            if (was_blocked || spent) && !stack.send_space_worth_telling(id) {
                self.conns[i].blocked = true;
            } else if was_blocked || spent {
                let grant = c.grant.opened(stack.send_space(id).unwrap_or(0));
                if self.control(grant.event(id, 0)) {
                    let c = &mut self.conns[i];
                    c.grant = grant;
                    c.blocked = false;
                    c.full_sent = false;
                } else {
                    self.visit_all = true;
                }
            }
            if self.conns[i].close_requested {
                let _ = stack.close(id);
            }
        }
    }

    /// Tells the client its window (the same byte limit) once half its
    /// send credit is taken unreported (see `socket_api::SEND_CREDIT`): a
    /// client that waits for credit then always gets some. A full event
    /// ring defers it to a later visit.
    fn report_taken(&mut self, i: usize) {
        let c = &self.conns[i];
        let (id, held) = (c.id, c.pending.len());
        if !c.grant.report_due(held) {
            return;
        }
        if self.control(c.grant.event(id, held)) {
            let c = &mut self.conns[i];
            c.grant = c.grant.reported(held);
        } else {
            self.visit_all = true;
        }
    }

    /// One round of the stack for this session alone: [`run`].
    pub fn run<P: NicPort<'d>>(&mut self, stack: &mut NetStack<'d>, now_ms: u64, port: &mut P) -> u32 {
        run(&mut [self], stack, now_ms, port)
    }

    /// After [`NetStack::poll`]: accepts connections, moves held-back data,
    /// and turns received data and state changes into events, as far as
    /// the event ring has room (the rest waits in the stack). For a session
    /// alone on its stack; with several, [`run`] hands each the same
    /// touched connections.
    pub fn poll(&mut self, stack: &mut NetStack<'d>) {
        crate::shrink_unused(&mut self.conns);
        crate::shrink_unused(&mut self.visit);
        crate::shrink_unused_deque(&mut self.events);
        let mut touched = core::mem::take(&mut self.touched);
        let all = stack.take_touched(&mut touched);
        self.poll_touched(stack, &touched, all);
        touched.clear();
        self.touched = touched;
    }

    /// [`Session::poll`] given what the stack says may have changed since
    /// the last poll (`NetStack::take_touched`): only those connections
    /// (of this session's; others are ignored), the ones accepted now, or
    /// with `all` every one, are looked at. The others cannot have anything
    /// to do, so hundreds of idle or stalled connections cost a poll
    /// nothing.
    fn poll_touched(&mut self, stack: &mut NetStack<'d>, touched: &[ConnId], all: bool) {
        let mut visit = core::mem::take(&mut self.visit);
        for (p, _) in self.ports.clone() {
            // Peer + Accepted + Window, then the connection's first data.
            while self.data_room(4) {
                let Some(conn) = stack.accept(p) else { break };
                self.conn_at.insert(conn, self.conns.len());
                self.conns.push(SessConn {
                    id: conn,
                    pending: Outbox::new(self.max_pending),
                    blocked: false,
                    full_sent: false,
                    close_requested: false,
                    eof_sent: false,
                    rx_paused: false,
                    grant: Grant::default(),
                });
                if let Ok((addr, port)) = stack.peer(conn) {
                    self.events.push_back((Event::Peer { addr, port }, None));
                }
                self.events.push_back((Event::Accepted { port: p, conn }, None));
                // What it can take from the start: a client that pulls no
                // more than this for a peer with a small window keeps the
                // buffers it pins small from the first round on.
                let grant = Grant::default().opened(stack.send_space(conn).unwrap_or(0));
                if let Some(c) = self.conns.last_mut() {
                    c.grant = grant;
                }
                self.events.push_back((grant.event(conn, 0), None));
                // Its first data may have come with the handshake.
                visit.push(conn);
            }
        }
        let all = all | core::mem::take(&mut self.visit_all);
        let mut deferred = false;
        if all {
            let mut i = 0;
            while i < self.conns.len() {
                if !self.visit(stack, i, &mut deferred) {
                    i += 1;
                }
            }
        } else {
            for &id in touched.iter().chain(visit.iter()) {
                if let Some(i) = self.index_of(id) {
                    self.visit(stack, i, &mut deferred);
                }
            }
        }
        visit.clear();
        self.visit = visit;
        if deferred {
            self.stats.events_deferred += 1;
            // What waited is made on a later poll, whatever touches then.
            self.visit_all = true;
        }
    }

    /// The index in `conns` of connection `id`, if it is this session's.
    fn index_of(&mut self, id: ConnId) -> Option<usize> {
        match self.conn_at.get(&id) {
            Some(&i) if self.conns.get(i).is_some_and(|c| c.id == id) => return Some(i),
            None if self.conn_at.len() == self.conns.len() => return None,
            _ => {}
        }
        // Out of step with `conns` (never, as long as every change of
        // `conns` updates it): rebuilt.
        self.conn_at = self.conns.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        self.conn_at.get(&id).copied()
    }

    /// Connection `i`: moves held-back sends into TCP, turns received data
    /// and state changes into events. True if it was forgotten (removed
    /// from `conns`: the one at `i` is another now).
    fn visit(&mut self, stack: &mut NetStack<'d>, i: usize, deferred: &mut bool) -> bool {
        self.push_pending(stack, i);
        let id = self.conns[i].id;
        // A connection whose sends are held back gets no more data until
        // they went: its peer must read before it may send more (TCP's
        // receive window closes), as a server stops reading a socket it
        // cannot write. An echo would otherwise pile up everything the
        // peer sends.
        // A client that paused its input gets none (nor the FIN after it)
        // until it resumes: TCP's window closes on the peer.
        while !self.conns[i].eof_sent && self.conns[i].pending.is_empty() && !self.conns[i].rx_paused {
            if !self.data_room(1) {
                *deferred = true;
                break;
            }
            match stack.recv(id, usize::MAX) {
                Ok(Recv::Data(a)) => self.events.push_back((Event::Data { conn: id }, Some(a))),
                Ok(Recv::Eof) => {
                    self.conns[i].eof_sent = true;
                    self.events.push_back((Event::Eof { conn: id }, None));
                }
                Ok(Recv::WouldBlock) | Err(NetError::NotFound) => break,
                Err(_) => {
                    // No buffer for the data now (the pool is short): it
                    // waits in TCP, and nothing else may touch this
                    // connection, so every one is looked at next time.
                    self.visit_all = true;
                    break;
                }
            }
        }
        // A connection reset while it had unread data goes once that is
        // delivered, not a poll later.
        if stack.exists(id) && (!self.data_room(1) || !stack.forget_if_dead(id)) {
            return false;
        }
        if !self.data_room(1) {
            // Forgotten only once the client can be told.
            *deferred = true;
            return false;
        }
        self.conns.swap_remove(i);
        self.conn_at.remove(&id);
        if let Some(m) = self.conns.get(i) {
            self.conn_at.insert(m.id, i);
        }
        self.events.push_back((Event::Closed { conn: id }, None));
        true
    }

    /// The next event to send to the client, with its tag and data.
    pub fn next_event(&mut self) -> Option<(Event, u64, Option<Aggregate<'d>>)> {
        self.events.pop_front().map(|(e, a)| (e, e.encode(), a))
    }

    /// The client is cut off (it broke its channel, or died): resets its
    /// connections, stops listening on its ports and drops its held-back
    /// sends and undelivered events, so that everything it held in the
    /// stack (sockets, rings, references) goes back now. The session is
    /// empty afterwards.
    pub fn close_all(&mut self, stack: &mut NetStack<'d>) -> Closed {
        let closed = Closed { connections: self.conns.len(), ports: self.ports.len(), events: self.events.len() };
        for c in self.conns.drain(..) {
            // Reset at once; the stack forgets the socket once it is closed.
            let _ = stack.abort(c.id);
        }
        for (p, _) in self.ports.drain(..) {
            let _ = stack.unlisten(p);
        }
        self.events.clear();
        self.conn_at.clear();
        self.conns.shrink_to_fit();
        self.ports.shrink_to_fit();
        closed
    }
}

/// What [`Session::close_all`] gave back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Closed {
    /// Connections reset.
    pub connections: usize,
    /// Ports no longer listened on.
    pub ports: usize,
    /// Undelivered events dropped.
    pub events: usize,
}

/// One round of the stack for its sessions (one per client):
/// [`NetStack::poll`], then each [`Session::poll`]; while that moved
/// held-back data into TCP, the stack is polled again (a few times at
/// most) so that the data goes out now. Returns how many times the stack
/// was polled.
///
/// Why: the acknowledgements a poll takes in are what make room for
/// held-back data, and only a poll transmits. A peer that acknowledges
/// everything in flight at once (Linux, whose delayed ACKs cover a
/// whole burst and whose window exceeds our send window) sends nothing
/// more after that ACK, so data queued after the poll waited for the
/// next timer wake-up: a keep-alive client fetching 1 MiB got one
/// send window per ticker period.
pub fn run<'d, P: NicPort<'d>>(
    sessions: &mut [&mut Session<'d>],
    stack: &mut NetStack<'d>,
    now_ms: u64,
    port: &mut P,
) -> u32 {
    let mut polls = 0;
    let mut touched = Vec::new();
    loop {
        for s in sessions.iter_mut() {
            s.queued_since_poll = false;
        }
        stack.poll(now_ms, port);
        polls += 1;
        // Every session sees what changed; each looks at its own.
        touched.clear();
        let all = stack.take_touched(&mut touched);
        for s in sessions.iter_mut() {
            s.poll_touched(stack, &touched, all);
        }
        // Bounded: later rounds only find room freed by ACKs that
        // arrived meanwhile; the frames that follow wake us anyway.
        if !sessions.iter().any(|s| s.queued_since_poll) || stack.tx_blocked() || polls == 4 {
            return polls;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{make, pattern, Net};
    use crate::TxChecksum;
    use iolite::CopyMode;

    #[test]
    fn a_session_serves_a_connection_end_to_end() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(4);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 2 }.encode(), Aggregate::new(db));
        assert_eq!(sess.next_event().map(|e| e.0), Some(Event::Listening { port: 80 }));
        // Garbage and foreign ids are refused with an error event.
        sess.handle(&mut n.b, 0xdead, Aggregate::new(db));
        sess.handle(&mut n.b, Request::Send { conn: 12345 }.encode(), Aggregate::new(db));
        let errs: Vec<_> = core::iter::from_fn(|| sess.next_event()).map(|e| e.0).collect();
        assert!(matches!(errs[0], Event::Error { code: ErrorCode::BadRequest, .. }));
        assert!(matches!(errs[1], Event::Error { code: ErrorCode::NotFound, id: 12345, .. }));

        let ca = n.a.connect(([10, 0, 2, 16], 80), 40000).unwrap();
        let mut conn = None;
        let mut peer = None;
        'accept: for _ in 0..1000 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                match ev {
                    // The peer comes first, then the connection it belongs to.
                    Event::Peer { addr, port } => peer = Some((addr, port)),
                    Event::Accepted { port: 80, conn: c } => {
                        conn = Some(c);
                        break 'accept;
                    }
                    e => panic!("unexpected {e:?}"),
                }
            }
        }
        let cb = conn.expect("accepted");
        // The peer is stack a: its address and the port it connected from.
        assert_eq!(peer, Some((n.a.address().unwrap(), 40000)));
        assert_eq!(n.b.peer(cb), Ok(peer.unwrap()));
        assert_eq!(n.b.peer(cb + 1000), Err(NetError::NotFound));
        // Client request in, response out (the "file" by reference).
        n.a.send(ca, make(n.da, b"GET / HTTP/1.0\r\n\r\n")).unwrap();
        let body = pattern(400_000, 77);
        let file = make(db, &body);
        let mut request = Vec::new();
        let mut sent = false;
        let mut got = Vec::new();
        let mut eof = false;
        let mut closed = false;
        let mut a_closed = false;
        for _ in 0..200_000 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, t, agg)) = sess.next_event() {
                assert_eq!(Event::decode(t), Some(ev));
                match ev {
                    Event::Data { conn } if conn == cb => {
                        agg.unwrap().slices().for_each(|s| request.extend_from_slice(s))
                    }
                    Event::Closed { conn } if conn == cb => closed = true,
                    _ => {}
                }
            }
            if !sent && request.ends_with(b"\r\n\r\n") {
                // Larger than the send window: the session holds back the rest.
                sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(0, 200_000).unwrap());
                sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(200_000, 200_000).unwrap());
                sess.handle(&mut n.b, Request::Close { conn: cb }.encode(), Aggregate::new(db));
                sent = true;
            }
            loop {
                match n.a.recv(ca, usize::MAX) {
                    Ok(Recv::Data(d)) => d.slices().for_each(|s| got.extend_from_slice(s)),
                    Ok(Recv::Eof) => {
                        eof = true;
                        break;
                    }
                    _ => break,
                }
            }
            if eof && !a_closed {
                n.a.close(ca).unwrap();
                a_closed = true;
            }
            if eof && closed {
                break;
            }
            if eof && got.len() == body.len() {
                n.now += 1000;
            }
        }
        assert_eq!(request, b"GET / HTTP/1.0\r\n\r\n");
        assert!(got == body, "got {} bytes", got.len());
        assert!(eof && closed);
        assert_eq!(n.b.stats().tx_copied(), 0);
        drop(file);
        assert_eq!(db.pool_stats(crate::tests::APP).unwrap().buffers_in_use, 0);
    }

    /// Accepts one connection from A on B's session; returns (A's id, B's id).
    fn accept_one(n: &mut Net, sess: &mut Session<'static>, local_port: u16) -> (ConnId, ConnId) {
        let ca = n.a.connect(([10, 0, 2, 16], 80), local_port).unwrap();
        for _ in 0..10_000 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                if let Event::Accepted { conn, .. } = ev {
                    while n.a.state(ca).unwrap() != crate::TcpState::Established {
                        n.step();
                    }
                    return (ca, conn);
                }
            }
        }
        panic!("not accepted");
    }

    #[test]
    fn a_client_that_stops_at_its_allowance_is_always_told_to_go_on() {
        // The client (like httpd) sends no more than the byte limit of the
        // last window and then waits for the next one, whether or not
        // anything was held back: 1 MiB must arrive byte-exact, never more
        // than the allowance may wait unacknowledged beyond TCP, and the
        // client is not woken for every acknowledgement.
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(32);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41001);
        let body = pattern(1 << 20, 6);
        let file = make(db, &body);
        let (mut off, mut w, mut spaces) = (0usize, socket_api::SendWindow::default(), 0);
        let (mut least, mut allowance) = (usize::MAX, 0);
        let mut got = Vec::new();
        for _ in 0..200_000 {
            while let Some((ev, _, _)) = sess.next_event() {
                match ev {
                    // Windows that open bytes: the others only report sends.
                    Event::Window { conn, sends, units } if conn == cb && w.update(sends, units) => {
                        spaces += 1;
                        allowance = w.left().unwrap_or(0);
                        least = least.min(allowance);
                    }
                    Event::Error { code, .. } => panic!("{code:?}"),
                    _ => {}
                }
            }
            // Odd pieces, cut at the window.
            while let Some(left) = w.left().filter(|&l| l > 0 && off < body.len()) {
                let k = left.min(7000).min(body.len() - off);
                assert!(w.may_send(), "the byte limit comes before the send limit here");
                sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(off, k).unwrap());
                w.sent(k);
                off += k;
            }
            assert!(sess.held_back_bytes() <= allowance);
            n.step();
            sess.poll(&mut n.b);
            while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
                d.slices().for_each(|s| got.extend_from_slice(s));
            }
            if got.len() == body.len() {
                break;
            }
        }
        assert!(got == body, "byte-exact ({} of {}, {spaces} windows that opened)", got.len(), body.len());
        assert!(spaces > 2, "{spaces} windows that opened");
        // Woken only once half of what the connection may hold is free
        // (here 64 KiB of 128 KiB: the peer's 64 KiB window and as much
        // slack; the byte limit is whole KiB, rounded down): 16 wake-ups
        // for 1 MiB, where one per acknowledgement made 30, some of them
        // for no space at all.
        let unit = socket_api::WINDOW_UNIT as usize;
        assert!(least > 64 * 1024 - unit, "a window of {least} bytes");
        assert!(spaces <= 18, "{spaces} windows that opened");
    }

    #[test]
    fn a_peer_that_never_reads_pins_only_its_window_plus_the_slack() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(8);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41000);
        // A 2 MiB response in 16 KiB pieces; the client (B's side, like
        // httpd) stops when its window closes and resumes when one opens.
        let body = pattern(2 << 20, 5);
        let file = make(db, &body);
        let (mut off, mut w, mut spaces) = (0usize, socket_api::SendWindow::default(), 0);
        let closed = |w: &socket_api::SendWindow| w.left() == Some(0);
        let mut most_queued = 0;
        // Until the client is told to stop, then a few more rounds (each
        // may jump to the next timer: zero-window probes).
        let mut after = 0;
        for _ in 0..100_000 {
            if closed(&w) {
                after += 1;
                if after > 12 {
                    break;
                }
            }
            send_pieces(&mut sess, &mut n.b, cb, &file, &mut off, &mut w);
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                match ev {
                    Event::Window { conn, sends, units } if conn == cb => spaces += usize::from(w.update(sends, units)),
                    Event::Error { code, .. } => panic!("{code:?} at {} ms, {:?}", n.now, n.b.state(cb)),
                    _ => {}
                }
            }
            most_queued = most_queued.max(n.b.held_send_bytes());
        }
        // A never read: its receive window (64 KiB) is full and it
        // advertises zero. B's queue is the slack (64 KiB) beyond that.
        assert!(closed(&w), "the client was told to stop");
        assert!(off < body.len(), "and stopped pulling ({off} of {})", body.len());
        let queued = n.b.held_send_bytes();
        assert!(queued <= 64 * 1024, "{queued} bytes queued for a zero window");
        assert!(most_queued <= 64 * 1024 + 64 * 1024, "{most_queued} at most");
        // A reads everything: the rest flows, byte-exact.
        let mut got = Vec::new();
        let opened_while_stalled = spaces;
        for _ in 0..200_000 {
            send_pieces(&mut sess, &mut n.b, cb, &file, &mut off, &mut w);
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                match ev {
                    Event::Window { sends, units, .. } => spaces += usize::from(w.update(sends, units)),
                    Event::Error { code, .. } => panic!("{code:?}"),
                    _ => {}
                }
            }
            while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
                d.slices().for_each(|s| got.extend_from_slice(s));
            }
            if got.len() == body.len() {
                break;
            }
        }
        assert!(got == body, "byte-exact ({} of {})", got.len(), body.len());
        assert!(spaces > opened_while_stalled, "windows opened once A read");
        assert_eq!(sess.stats().sends_refused, 0);
    }

    /// Up to four 16 KiB pieces of `file` from `off` on `cb`, as far as
    /// the window `w` allows (events are looked at once per round, as
    /// httpd does).
    fn send_pieces<'d>(
        sess: &mut Session<'d>,
        b: &mut NetStack<'d>,
        cb: ConnId,
        file: &Aggregate<'d>,
        off: &mut usize,
        w: &mut socket_api::SendWindow,
    ) {
        for _ in 0..4 {
            let k = w.left().unwrap_or(0).min(16384).min(file.len() - *off);
            if k == 0 || !w.may_send() {
                return;
            }
            sess.handle(b, Request::Send { conn: cb }.encode(), file.range(*off, k).unwrap());
            w.sent(k);
            *off += k;
        }
    }

    #[test]
    fn a_stalled_connection_the_client_closed_is_forgotten_when_its_peer_resets() {
        // httpd closes a connection whose peer stopped reading (send
        // timeout, idle keep-alive): the close waits behind held-back
        // sends. When the peer then resets, the sends fail, and the close
        // must reach TCP in that same visit: nothing else happens to the
        // connection afterwards that would make the session look again.
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(8);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41003);
        let body = pattern(1 << 20, 4);
        let file = make(db, &body);
        for k in 0..8 {
            sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(k * 65536, 65536).unwrap());
        }
        // A reads nothing: its window closes, the sends wait in the session
        // (and the client's window closes: it is told to stop).
        let mut full = false;
        for _ in 0..200 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                full |= matches!(ev, Event::Window { conn, .. } if conn == cb) && sess.stats().send_full > 0;
            }
            if full && n.b.send_space(cb) == Ok(0) {
                break;
            }
        }
        assert!(full && n.b.send_space(cb) == Ok(0), "the peer's window is closed");
        assert_eq!(n.b.state(cb), Ok(crate::TcpState::Established));
        sess.handle(&mut n.b, Request::Close { conn: cb }.encode(), Aggregate::new(db));
        n.a.abort(ca).unwrap();
        let mut closed = false;
        for _ in 0..2000 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                closed |= ev == Event::Closed { conn: cb };
            }
            if closed {
                break;
            }
        }
        assert!(closed, "still {:?} after the peer's reset", n.b.state(cb));
        assert!(!n.b.exists(cb));
        assert_eq!(n.b.held_send_bytes(), 0);
        drop(file);
        assert_eq!(db.pool_stats(crate::tests::APP).unwrap().buffers_in_use, 0, "every reference released");
    }

    #[test]
    fn held_back_sends_are_bounded_and_pause_the_input() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::with_events(4, 16);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41001);
        // A client that ignores its window: beyond 4 held-back sends, refused.
        let body = pattern(600_000, 1);
        let big = make(db, &body);
        for k in 0..10 {
            sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), big.range(k * 60_000, 60_000).unwrap());
        }
        assert!(sess.stats().sends_refused > 0);
        assert!(n.b.held_send_bytes() <= 64 * 1024 + 64 * 1024);
        // While sends are held back, what A sends stays in TCP.
        n.a.send(ca, make(n.da, b"more request bytes")).unwrap();
        for _ in 0..20 {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                assert!(!matches!(ev, Event::Data { .. }), "no data while sends are held back");
            }
        }
        // A reads: the held-back sends go, then the data comes.
        let mut data = Vec::new();
        let mut got = 0;
        for _ in 0..10_000 {
            n.step();
            sess.poll(&mut n.b);
            while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
                got += d.len();
            }
            while let Some((ev, _, agg)) = sess.next_event() {
                if let (Event::Data { .. }, Some(a)) = (ev, agg) {
                    a.slices().for_each(|s| data.extend_from_slice(s));
                }
            }
            if data.len() == 18 {
                break;
            }
        }
        assert_eq!(data, b"more request bytes", "paused, not lost");
        assert!(got >= 4 * 60_000, "the held-back sends went first ({got})");
    }

    #[test]
    fn a_client_within_its_send_credit_is_never_refused() {
        // A client that keeps to its window's send limit and ignores its
        // byte limit (httpd may run many rounds before the stack runs
        // once): however far ahead it is, no send is refused, and the
        // stream is exact.
        use socket_api::{SendWindow, SEND_CREDIT};
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(SEND_CREDIT as usize);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41004);
        let body = pattern(700_000, 7);
        let file = make(db, &body);
        // Pipelined responses: many small ones, some large.
        let mut cuts = Vec::new();
        let (mut at, mut k) = (0usize, 0usize);
        while at < body.len() {
            let len = [70, 1, 300, 4096, 20_000, 0, 1460, 65_536][k % 8].min(body.len() - at);
            cuts.push((at, len));
            at += len;
            k += 1;
        }
        let mut credit = SendWindow::default();
        let (mut next, mut got, mut reports, mut opened) = (0, Vec::new(), 0, 0);
        for round in 0..20_000 {
            // As many as the credit allows, before the stack runs.
            while next < cuts.len() && credit.may_send() {
                let (off, len) = cuts[next];
                sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(off, len).unwrap());
                credit.sent(len);
                next += 1;
            }
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                match ev {
                    Event::Window { conn, sends, units } if conn == cb => {
                        opened += usize::from(credit.update(sends, units));
                        reports += 1;
                    }
                    Event::Error { .. } => panic!("{ev:?} after {next} sends"),
                    _ => {}
                }
            }
            // The peer stops reading for a while: the window closes and
            // sends are held back.
            if !(200..2000).contains(&round) {
                while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
                    d.slices().for_each(|s| got.extend_from_slice(s));
                }
            }
            if got.len() == body.len() {
                break;
            }
        }
        assert_eq!(sess.stats().sends_refused, 0);
        assert_eq!(got.len(), body.len());
        assert!(got == body, "the stream is the sent bytes, in order");
        assert!(sess.stats().send_full > 0, "the window closed meanwhile");
        // One report per half credit, about (besides the windows that
        // opened bytes, which carry the count as well).
        assert!(reports >= cuts.len() / SEND_CREDIT as usize, "{reports} reports for {} sends", cuts.len());
        assert!(reports <= 2 * cuts.len() / (SEND_CREDIT as usize / 2) + 2 + opened, "{reports} reports");
    }

    #[test]
    fn a_client_beyond_its_send_credit_is_refused_and_told_what_was_taken() {
        // Sends beyond the credit are refused (WouldBlock), and the refused
        // ones count as taken, so the count stays right for the client.
        use socket_api::{SendWindow, SEND_CREDIT};
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(SEND_CREDIT as usize);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (_ca, cb) = accept_one(&mut n, &mut sess, 41005);
        // The window it was accepted with.
        let mut credit = SendWindow::default();
        while let Some((ev, _, _)) = sess.next_event() {
            if let Event::Window { sends, units, .. } = ev {
                credit.update(sends, units);
            }
        }
        let file = make(db, &pattern(4 << 20, 3));
        // The peer never reads: 64 KiB sends fill its window at once.
        for k in 0..64 {
            sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), file.range(k << 16, 1 << 16).unwrap());
            credit.sent(1 << 16);
        }
        let (mut refused, mut window) = (0, None);
        while let Some((ev, _, _)) = sess.next_event() {
            match ev {
                Event::Error { code: ErrorCode::WouldBlock, .. } => refused += 1,
                Event::Window { sends, units, .. } => window = Some((sends, units)),
                _ => {}
            }
        }
        assert!(refused > 0 && refused == sess.stats().sends_refused);
        let (sends, units) = window.expect("a report");
        credit.update(sends, units);
        // What is still held back is at most the credit.
        assert!(credit.outstanding() <= SEND_CREDIT, "{}", credit.outstanding());
    }

    #[test]
    fn the_event_ring_is_bounded_and_data_waits_in_tcp() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::with_events(4, 16);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, _cb) = accept_one(&mut n, &mut sess, 41002);
        // Nobody takes the events: the ring never holds more than 16, error
        // reports beyond are dropped and counted.
        for _ in 0..100 {
            sess.handle(&mut n.b, 0xdead, Aggregate::new(db));
        }
        assert!(sess.events_queued() <= 16);
        assert!(sess.stats().events_dropped > 0);
        // Data from A waits in the stack while the ring is full.
        n.a.send(ca, make(n.da, b"more request bytes")).unwrap();
        for _ in 0..50 {
            n.step();
            sess.poll(&mut n.b);
        }
        assert!(sess.events_queued() <= 16);
        assert!(sess.stats().events_deferred > 0);
        let mut data = Vec::new();
        for _ in 0..5 {
            while let Some((ev, _, agg)) = sess.next_event() {
                if let (Event::Data { .. }, Some(a)) = (ev, agg) {
                    a.slices().for_each(|s| data.extend_from_slice(s));
                }
            }
            n.step();
            sess.poll(&mut n.b);
        }
        assert_eq!(data, b"more request bytes", "deferred, not lost");
    }

    #[test]
    fn a_paused_input_stays_in_tcp_whose_window_closes_until_resumed() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(4);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        let _ = sess.next_event();
        let (ca, cb) = accept_one(&mut n, &mut sess, 41003);
        sess.handle(&mut n.b, Request::Receive { conn: cb, on: false }.encode(), Aggregate::new(db));
        assert_eq!(sess.stats().receive_pauses, 1);
        // The peer sends far more than TCP's receive buffer: no Data comes,
        // and the peer can queue only what the window lets through.
        let body = pattern(300_000, 5);
        let mut off = 0;
        let mut data = Vec::new();
        let pull = |sess: &mut Session<'static>, data: &mut Vec<u8>| {
            while let Some((ev, _, agg)) = sess.next_event() {
                if let (Event::Data { conn }, Some(a)) = (ev, agg) {
                    assert_eq!(conn, cb);
                    a.slices().for_each(|s| data.extend_from_slice(s));
                }
            }
        };
        // The peer sends what its window takes, then both stacks run.
        let step = |n: &mut Net, sess: &mut Session<'static>, off: &mut usize, data: &mut Vec<u8>| {
            if *off < body.len() {
                if let Ok(k) = n.a.send_space(ca) {
                    let k = k.min(body.len() - *off).min(16_384);
                    if k > 0 && n.a.send(ca, make(n.da, &body[*off..*off + k])).is_ok() {
                        *off += k;
                    }
                }
            }
            n.step();
            sess.poll(&mut n.b);
            pull(sess, data);
        };
        // Five seconds of the peer trying (not so long that a timer gives
        // the connection up).
        let until = n.now + 5000;
        while n.now < until {
            step(&mut n, &mut sess, &mut off, &mut data);
        }
        assert!(data.is_empty(), "paused: {} bytes delivered", data.len());
        assert!(off < body.len(), "the window closed on the peer");
        // Resumed: everything comes, in order, and the rest can be sent.
        sess.handle(&mut n.b, Request::Receive { conn: cb, on: true }.encode(), Aggregate::new(db));
        for _ in 0..20_000 {
            step(&mut n, &mut sess, &mut off, &mut data);
            if data.len() == body.len() {
                break;
            }
        }
        assert_eq!(data.len(), body.len());
        assert!(data == body, "in order, byte for byte");
    }

    #[test]
    fn a_clients_listens_stay_within_its_budget() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let ring = n.b.config().recv_window;
        // A client allowed 4 listening sockets floods listens: what fits
        // its budget is served, the rest refused with nothing taken.
        let mut greedy = Session::with_events(4, 1024).with_listen_budget(4);
        greedy.handle(&mut n.b, Request::Listen { port: 1000, backlog: 64 }.encode(), Aggregate::new(db));
        for p in 1001..1100 {
            greedy.handle(&mut n.b, Request::Listen { port: p, backlog: 2 }.encode(), Aggregate::new(db));
        }
        let evs: Vec<_> = core::iter::from_fn(|| greedy.next_event()).map(|e| e.0).collect();
        let listening = evs.iter().filter(|e| matches!(e, Event::Listening { .. })).count();
        let refused = evs.iter().filter(|e| matches!(e, Event::Error { code: ErrorCode::NoMemory, .. })).count();
        assert_eq!((listening, refused), (2, 98));
        assert_eq!(greedy.stats().listens_refused, 98);
        assert_eq!(greedy.listen_sockets(), 4);
        assert_eq!(n.b.socket_memory(), 4 * ring);
        // Unlistening gives budget back.
        greedy.handle(&mut n.b, Request::Unlisten { port: 1001 }.encode(), Aggregate::new(db));
        greedy.handle(&mut n.b, Request::Listen { port: 1200, backlog: 2 }.encode(), Aggregate::new(db));
        assert_eq!(greedy.next_event().map(|e| e.0), Some(Event::Listening { port: 1200 }));
        // The other client's listener is served as before, through `run`
        // with both sessions: its connection is accepted, and the greedy
        // one cannot touch it.
        let mut web = Session::new(4);
        web.handle(&mut n.b, Request::Listen { port: 80, backlog: 8 }.encode(), Aggregate::new(db));
        assert_eq!(web.next_event().map(|e| e.0), Some(Event::Listening { port: 80 }));
        let ca = n.a.connect(([10, 0, 2, 16], 80), 41100).unwrap();
        let mut conn = None;
        for _ in 0..1000 {
            n.step();
            super::run(&mut [&mut greedy, &mut web], &mut n.b, n.now, &mut n.pb);
            while let Some((ev, _, _)) = web.next_event() {
                if let Event::Accepted { conn: c, .. } = ev {
                    conn = Some(c);
                }
            }
            if conn.is_some() {
                break;
            }
        }
        let cb = conn.expect("accepted");
        assert!(greedy.next_event().is_none());
        for r in [Request::Abort { conn: cb }, Request::Close { conn: cb }, Request::Send { conn: cb }] {
            greedy.handle(&mut n.b, r.encode(), Aggregate::new(db));
            assert!(matches!(greedy.next_event().map(|e| e.0), Some(Event::Error { code: ErrorCode::NotYours, .. })));
        }
        greedy.handle(&mut n.b, Request::Unlisten { port: 80 }.encode(), Aggregate::new(db));
        assert!(matches!(greedy.next_event().map(|e| e.0), Some(Event::Error { code: ErrorCode::NotFound, .. })));
        for _ in 0..20 {
            n.step();
        }
        assert_eq!(n.a.state(ca), Ok(crate::TcpState::Established));
        assert_eq!(n.b.state(cb), Ok(crate::TcpState::Established));
    }

    #[test]
    fn every_session_on_a_stack_sees_its_own_connections_change() {
        // Two clients' sessions on one stack, run together: what the stack
        // reports touched is every session's, so the first one must not
        // take it away from the second.
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut one = Session::new(4);
        let mut two = Session::new(4);
        one.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        two.handle(&mut n.b, Request::Listen { port: 81, backlog: 4 }.encode(), Aggregate::new(db));
        let a1 = n.a.connect(([10, 0, 2, 16], 80), 41300).unwrap();
        let a2 = n.a.connect(([10, 0, 2, 16], 81), 41301).unwrap();
        let (mut got1, mut got2) = (Vec::new(), Vec::new());
        let mut sent = false;
        for _ in 0..2000 {
            n.step();
            super::run(&mut [&mut one, &mut two], &mut n.b, n.now, &mut n.pb);
            for (sess, got) in [(&mut one, &mut got1), (&mut two, &mut got2)] {
                while let Some((ev, _, agg)) = sess.next_event() {
                    if let (Event::Data { .. }, Some(a)) = (ev, agg) {
                        a.slices().for_each(|s| got.extend_from_slice(s));
                    }
                }
            }
            let up = |st| st == Ok(crate::TcpState::Established);
            if !sent && up(n.a.state(a1)) && up(n.a.state(a2)) && one.connections() == 1 && two.connections() == 1 {
                // Accepted and idle: from now on only the segments tell.
                for _ in 0..5 {
                    n.step();
                    super::run(&mut [&mut one, &mut two], &mut n.b, n.now, &mut n.pb);
                }
                n.a.send(a1, make(n.da, b"to the first")).unwrap();
                n.a.send(a2, make(n.da, b"to the second")).unwrap();
                sent = true;
            }
            if got1.len() == 12 && got2.len() == 13 {
                break;
            }
        }
        assert_eq!((&got1[..], &got2[..]), (&b"to the first"[..], &b"to the second"[..]));
    }

    #[test]
    fn closing_a_session_gives_everything_back() {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::with_events(4, 64);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
        sess.handle(&mut n.b, Request::Listen { port: 81, backlog: 2 }.encode(), Aggregate::new(db));
        let (ca, cb) = accept_one(&mut n, &mut sess, 41200);
        // Held-back sends (a large response) and undelivered events (data).
        let body = pattern(600_000, 9);
        let big = make(db, &body);
        for k in 0..4 {
            sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), big.range(k * 150_000, 150_000).unwrap());
        }
        drop(big);
        n.a.send(ca, make(n.da, b"unread request")).unwrap();
        for _ in 0..10 {
            n.step();
            sess.poll(&mut n.b);
        }
        assert!(sess.events_queued() > 0);
        assert!(db.pool_stats(crate::tests::APP).unwrap().buffers_in_use > 0);
        let closed = sess.close_all(&mut n.b);
        assert_eq!((closed.connections, closed.ports), (1, 2));
        assert!(closed.events > 0);
        assert_eq!((sess.connections(), sess.listen_sockets(), sess.events_queued()), (0, 0, 0));
        for _ in 0..100 {
            n.step();
        }
        // Sockets, rings and every reference the client's sends held.
        assert_eq!(n.b.connections(), 0);
        assert_eq!(n.b.socket_memory(), 0);
        assert_eq!(n.b.held_send_bytes(), 0);
        assert_eq!(db.pool_stats(crate::tests::APP).unwrap().buffers_in_use, 0);
        // The peer was reset, and both ports are free.
        assert!(n.a.state(ca) != Ok(crate::TcpState::Established));
        assert_eq!(n.b.listen(80, 1), Ok(()));
        assert_eq!(n.b.listen(81, 1), Ok(()));
    }

    #[test]
    fn a_connection_its_peer_resets_is_closed_once_its_data_is_delivered() {
        // A sends a request and resets before the session has read it: the
        // request is still delivered whole, then, in the same visit, its
        // end and `Closed`; the stack no longer has the connection.
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(4);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 2 }.encode(), Aggregate::new(db));
        let ca = n.a.connect(([10, 0, 2, 16], 80), 40000).unwrap();
        let mut cb = None;
        while cb.is_none() {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                if let Event::Accepted { conn, .. } = ev {
                    cb = Some(conn);
                }
            }
        }
        let cb = cb.unwrap();
        let request = pattern(3000, 41);
        n.a.send(ca, make(n.da, &request)).unwrap();
        // B's stack acknowledges it; its session has not looked yet.
        n.drain(ca);
        n.a.abort(ca).unwrap();
        for _ in 0..5 {
            n.step();
        }
        assert_eq!(n.b.state(cb), Ok(crate::TcpState::Closed), "unread data keeps the connection");
        let (mut got, mut closed_after) = (Vec::new(), None);
        for step in 0..3 {
            sess.poll(&mut n.b);
            while let Some((ev, _, agg)) = sess.next_event() {
                match ev {
                    Event::Data { conn } if conn == cb => agg.unwrap().slices().for_each(|s| got.extend_from_slice(s)),
                    Event::Closed { conn } if conn == cb => closed_after = Some(step),
                    Event::Eof { conn } if conn == cb => {}
                    e => panic!("unexpected {e:?}"),
                }
            }
            n.step();
        }
        assert!(got == request, "{} of {} bytes delivered, not byte-exact", got.len(), request.len());
        assert_eq!(closed_after, Some(0));
        assert_eq!(n.b.state(cb), Err(NetError::NotFound));
        assert_eq!(n.b.stats().dead_conns_forgotten, 1);
        assert_eq!(n.b.connections(), 0);
    }

    #[test]
    fn a_client_that_answers_on_a_reset_connection_loses_it_with_its_unread_input() {
        // The client holds its input back (as httpd does while it answers
        // one file request at a time), A resets, and the client sends an
        // answer: the connection goes at once with the 3000 bytes it never
        // took, and the client hears `Closed`, not one refused send per
        // pipelined request it would go on answering.
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let mut sess = Session::new(4);
        sess.handle(&mut n.b, Request::Listen { port: 80, backlog: 2 }.encode(), Aggregate::new(db));
        let ca = n.a.connect(([10, 0, 2, 16], 80), 40000).unwrap();
        let mut cb = None;
        while cb.is_none() {
            n.step();
            sess.poll(&mut n.b);
            while let Some((ev, _, _)) = sess.next_event() {
                if let Event::Accepted { conn, .. } = ev {
                    cb = Some(conn);
                }
            }
        }
        let cb = cb.unwrap();
        sess.handle(&mut n.b, Request::Receive { conn: cb, on: false }.encode(), Aggregate::new(db));
        n.a.send(ca, make(n.da, &pattern(3000, 43))).unwrap();
        n.drain(ca);
        n.a.abort(ca).unwrap();
        let mut events = Vec::new();
        for _ in 0..5 {
            n.step();
            sess.poll(&mut n.b);
            events.extend(core::iter::from_fn(|| sess.next_event()).map(|e| e.0));
        }
        // Its input waits for the client: the connection stays.
        assert!(events.iter().all(|e| matches!(e, Event::Window { .. })), "{events:?}");
        assert_eq!(n.b.state(cb), Ok(crate::TcpState::Closed));
        let answer = make(db, &pattern(5000, 44));
        sess.handle(&mut n.b, Request::Send { conn: cb }.encode(), answer);
        n.step();
        sess.poll(&mut n.b);
        let events: Vec<_> = core::iter::from_fn(|| sess.next_event()).map(|e| e.0).collect();
        assert_eq!(events, [Event::Closed { conn: cb }]);
        assert_eq!(n.b.state(cb), Err(NetError::NotFound));
        assert_eq!((n.b.stats().dead_conns_forgotten, n.b.stats().dead_input_dropped), (1, 3000));
        assert_eq!(n.b.connections(), 0);
        assert_eq!(db.pool_stats(crate::tests::APP).unwrap().buffers_in_use, 0, "the answer is released");
    }
}
