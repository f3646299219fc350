//! The client interface: socket-like operations as messages on IO-Lite
//! channels (the seL4 wiring comes later; this is the message format and
//! the server-side state machine, host-tested).
//!
//! A client (httpd, ...) has two channels with the stack: requests go
//! client → stack, events stack → client. Every message is an IO-Lite
//! [`AggDesc`](iolite::AggDesc): its `tag` carries the operation and its
//! arguments ([`Request::encode`], [`Event::encode`]), its aggregate carries
//! the data, by reference (`Send` requests and `Data` events; empty
//! otherwise). So sending a file is one descriptor holding its slices, and
//! the stack keeps those references until TCP has them acknowledged.
//!
//! Tag layout: bits 56..63 operation, 24..55 id (connection id or port),
//! 0..23 argument.
//!
//! A tag has no room for a connection id *and* the peer's address, so an
//! accepted connection is announced by two events in a row: [`Event::Peer`]
//! (address and port) and then [`Event::Accepted`] (the connection), which
//! takes the peer of the `Peer` event just before it. One channel keeps
//! them in order, so the client needs no more than "the last peer seen".

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use iolite::Aggregate;

use crate::{ConnId, NetError, NetStack, NicPort, Recv};

const OP_LISTEN: u8 = 1;
const OP_UNLISTEN: u8 = 2;
const OP_SEND: u8 = 3;
const OP_CLOSE: u8 = 4;
const OP_ABORT: u8 = 5;
const EV_LISTENING: u8 = 0x81;
const EV_ACCEPTED: u8 = 0x82;
const EV_DATA: u8 = 0x83;
const EV_EOF: u8 = 0x84;
const EV_SEND_SPACE: u8 = 0x85;
const EV_CLOSED: u8 = 0x86;
const EV_ERROR: u8 = 0x87;
const EV_PEER: u8 = 0x88;

fn tag(op: u8, id: u32, arg: u32) -> u64 {
    (op as u64) << 56 | (id as u64) << 24 | (arg & 0xff_ffff) as u64
}

fn untag(t: u64) -> (u8, u32, u32) {
    ((t >> 56) as u8, (t >> 24) as u32, (t & 0xff_ffff) as u32)
}

/// A client's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Listen on `port` with a backlog of `backlog` connections.
    Listen {
        /// TCP port.
        port: u16,
        /// Connections established before they are accepted (1..=64).
        backlog: u16,
    },
    /// Stop listening on `port`.
    Unlisten {
        /// TCP port.
        port: u16,
    },
    /// Send the message's aggregate on `conn`.
    Send {
        /// Connection.
        conn: ConnId,
    },
    /// Close `conn` after the data sent so far (FIN).
    Close {
        /// Connection.
        conn: ConnId,
    },
    /// Reset `conn` at once, dropping unsent data.
    Abort {
        /// Connection.
        conn: ConnId,
    },
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ErrorCode {
    /// No such connection or listener.
    NotFound = 1,
    /// Too much data pending on the connection; the aggregate was dropped.
    WouldBlock = 2,
    /// The connection cannot send any more.
    NotConnected = 3,
    /// The port is already listened on.
    AddressInUse = 4,
    /// A bad argument.
    InvalidArgument = 5,
    /// The stack ran out of memory.
    NoMemory = 6,
    /// The connection or port belongs to another client.
    NotYours = 7,
    /// The message could not be decoded.
    BadRequest = 8,
}

impl ErrorCode {
    fn from_u8(v: u8) -> Option<Self> {
        use ErrorCode::*;
        [NotFound, WouldBlock, NotConnected, AddressInUse, InvalidArgument, NoMemory, NotYours, BadRequest]
            .into_iter()
            .find(|c| *c as u8 == v)
    }
}

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

/// An event for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `Listen` succeeded.
    Listening {
        /// TCP port.
        port: u16,
    },
    /// The peer of the connection announced by the next event, an
    /// [`Event::Accepted`] (see the module docs). Sent only when the stack
    /// knows the peer, which it does for every established connection.
    Peer {
        /// The peer's IPv4 address.
        addr: [u8; 4],
        /// The peer's TCP port.
        port: u16,
    },
    /// A connection was accepted on `port`; its peer is the one of the
    /// [`Event::Peer`] right before it, if there was one.
    Accepted {
        /// The listening port.
        port: u16,
        /// The new connection.
        conn: ConnId,
    },
    /// The message's aggregate holds data received on `conn`.
    Data {
        /// Connection.
        conn: ConnId,
    },
    /// The peer closed its sending half of `conn`; no more `Data`.
    Eof {
        /// Connection.
        conn: ConnId,
    },
    /// Data that was held back on `conn` has been handed to TCP; the client
    /// may send more.
    SendSpace {
        /// Connection.
        conn: ConnId,
    },
    /// `conn` is gone (closed or reset); its id is no longer valid.
    Closed {
        /// Connection.
        conn: ConnId,
    },
    /// A request on `id` (a connection, or a port) failed.
    Error {
        /// The request's operation code.
        op: u8,
        /// Its connection id or port.
        id: u32,
        /// Why.
        code: ErrorCode,
    },
}

impl Request {
    /// The channel tag of this request.
    pub fn encode(&self) -> u64 {
        match *self {
            Request::Listen { port, backlog } => tag(OP_LISTEN, port as u32, backlog as u32),
            Request::Unlisten { port } => tag(OP_UNLISTEN, port as u32, 0),
            Request::Send { conn } => tag(OP_SEND, conn, 0),
            Request::Close { conn } => tag(OP_CLOSE, conn, 0),
            Request::Abort { conn } => tag(OP_ABORT, conn, 0),
        }
    }

    /// Decodes a request's tag; anything malformed is `BadRequest`.
    pub fn decode(t: u64) -> Result<Request, ErrorCode> {
        let (op, id, arg) = untag(t);
        let port = || u16::try_from(id).map_err(|_| ErrorCode::BadRequest);
        Ok(match op {
            OP_LISTEN => {
                Request::Listen { port: port()?, backlog: u16::try_from(arg).map_err(|_| ErrorCode::BadRequest)? }
            }
            OP_UNLISTEN => Request::Unlisten { port: port()? },
            OP_SEND => Request::Send { conn: id },
            OP_CLOSE => Request::Close { conn: id },
            OP_ABORT => Request::Abort { conn: id },
            _ => return Err(ErrorCode::BadRequest),
        })
    }

    fn op(&self) -> u8 {
        untag(self.encode()).0
    }

    fn id(&self) -> u32 {
        untag(self.encode()).1
    }
}

impl Event {
    /// The channel tag of this event.
    pub fn encode(&self) -> u64 {
        match *self {
            Event::Listening { port } => tag(EV_LISTENING, port as u32, 0),
            Event::Peer { addr, port } => tag(EV_PEER, u32::from_be_bytes(addr), port as u32),
            Event::Accepted { port, conn } => tag(EV_ACCEPTED, conn, port as u32),
            Event::Data { conn } => tag(EV_DATA, conn, 0),
            Event::Eof { conn } => tag(EV_EOF, conn, 0),
            Event::SendSpace { conn } => tag(EV_SEND_SPACE, conn, 0),
            Event::Closed { conn } => tag(EV_CLOSED, conn, 0),
            Event::Error { op, id, code } => tag(EV_ERROR, id, (op as u32) << 8 | code as u32),
        }
    }

    /// Decodes an event's tag (client side); `None` if malformed.
    pub fn decode(t: u64) -> Option<Event> {
        let (op, id, arg) = untag(t);
        Some(match op {
            EV_LISTENING => Event::Listening { port: u16::try_from(id).ok()? },
            EV_PEER => Event::Peer { addr: id.to_be_bytes(), port: u16::try_from(arg).ok()? },
            EV_ACCEPTED => Event::Accepted { port: u16::try_from(arg).ok()?, conn: id },
            EV_DATA => Event::Data { conn: id },
            EV_EOF => Event::Eof { conn: id },
            EV_SEND_SPACE => Event::SendSpace { conn: id },
            EV_CLOSED => Event::Closed { conn: id },
            EV_ERROR => Event::Error { op: (arg >> 8) as u8, id, code: ErrorCode::from_u8(arg as u8)? },
            _ => return None,
        })
    }
}

struct SessConn<'d> {
    id: ConnId,
    pending: VecDeque<Aggregate<'d>>,
    blocked: bool,
    close_requested: bool,
    eof_sent: bool,
}

/// The stack's side of one client: which ports and connections are its,
/// the aggregates waiting for send space, and the events to deliver.
pub struct Session<'d> {
    ports: Vec<u16>,
    conns: Vec<SessConn<'d>>,
    events: VecDeque<(Event, Option<Aggregate<'d>>)>,
    max_pending: usize,
    /// Held-back bytes went into TCP since the stack's last poll.
    queued_since_poll: bool,
}

impl<'d> Session<'d> {
    /// A session that holds back at most `max_pending` aggregates per
    /// connection while TCP's send window is full.
    pub fn new(max_pending: usize) -> Self {
        Self { ports: Vec::new(), conns: Vec::new(), events: VecDeque::new(), max_pending, queued_since_poll: false }
    }

    fn error(&mut self, op: u8, id: u32, code: ErrorCode) {
        self.events.push_back((Event::Error { op, id, code }, None));
    }

    /// Handles one request message (`tag` and its aggregate).
    pub fn handle(&mut self, stack: &mut NetStack<'d>, tag: u64, agg: Aggregate<'d>) {
        let req = match Request::decode(tag) {
            Ok(r) => r,
            Err(code) => return self.error(untag(tag).0, untag(tag).1, code),
        };
        let (op, id) = (req.op(), req.id());
        let conn = self.conns.iter().position(|c| c.id == id);
        let not_yours = || if stack.exists(id) { ErrorCode::NotYours } else { ErrorCode::NotFound };
        match req {
            Request::Listen { port, backlog } => match stack.listen(port, backlog as usize) {
                Ok(()) => {
                    self.ports.push(port);
                    self.events.push_back((Event::Listening { port }, None));
                }
                Err(e) => self.error(op, id, e.into()),
            },
            Request::Unlisten { port } => {
                if !self.ports.contains(&port) {
                    return self.error(op, id, ErrorCode::NotFound);
                }
                self.ports.retain(|&p| p != port);
                let _ = stack.unlisten(port);
            }
            Request::Send { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                let c = &mut self.conns[i];
                if c.close_requested {
                    return self.error(op, id, ErrorCode::NotConnected);
                }
                if c.pending.len() >= self.max_pending {
                    c.blocked = true;
                    return self.error(op, id, ErrorCode::WouldBlock);
                }
                c.pending.push_back(agg);
                self.push_pending(stack, i);
            }
            Request::Close { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                self.conns[i].close_requested = true;
                self.push_pending(stack, i);
            }
            Request::Abort { .. } => {
                let Some(i) = conn else { return self.error(op, id, not_yours()) };
                self.conns[i].pending.clear();
                let _ = stack.abort(id);
            }
        }
    }

    /// Moves held-back aggregates of connection `i` into TCP as space allows.
    fn push_pending(&mut self, stack: &mut NetStack<'d>, i: usize) {
        let c = &mut self.conns[i];
        while let Some(a) = c.pending.pop_front() {
            match stack.send(c.id, a) {
                Ok(()) => self.queued_since_poll = true,
                Err((NetError::WouldBlock, mut a)) => {
                    // Send what fits now: an aggregate larger than the whole
                    // send window would otherwise never go (references
                    // only: splitting copies nothing).
                    let space = stack.send_space(c.id).unwrap_or(0);
                    if space > 0 && space < a.len() {
                        if let Ok(tail) = a.split_off(space) {
                            match stack.send(c.id, a) {
                                Ok(()) => self.queued_since_poll = true,
                                Err((_, head)) => {
                                    // Cannot happen (it fits); keep the order.
                                    let mut whole = head;
                                    if let Err((_, t)) = whole.append(tail) {
                                        drop(t);
                                    }
                                    c.pending.push_front(whole);
                                    break;
                                }
                            }
                            c.pending.push_front(tail);
                            break;
                        }
                    }
                    c.pending.push_front(a);
                    break;
                }
                Err((e, _dropped)) => {
                    c.pending.clear();
                    self.events.push_back((Event::Error { op: OP_SEND, id: c.id, code: e.into() }, None));
                    break;
                }
            }
        }
        if c.pending.is_empty() {
            if c.blocked {
                c.blocked = false;
                self.events.push_back((Event::SendSpace { conn: c.id }, None));
            }
            if c.close_requested {
                let _ = stack.close(c.id);
            }
        }
    }

    /// One round of the stack for this session: [`NetStack::poll`], then
    /// [`Session::poll`]; while that moved held-back data into TCP, the
    /// stack is polled again (a few times at most) so that the data goes
    /// out now. Returns how many times the stack was polled.
    ///
    /// Why: the acknowledgements a poll takes in are what make room for
    /// held-back data, and only a poll transmits. A peer that acknowledges
    /// everything in flight at once (Linux, whose delayed ACKs cover a
    /// whole burst and whose window exceeds our send window) sends nothing
    /// more after that ACK, so data queued after the poll waited for the
    /// next timer wake-up: a keep-alive client fetching 1 MiB got one
    /// send window per ticker period.
    pub fn run<P: NicPort<'d>>(&mut self, stack: &mut NetStack<'d>, now_ms: u64, port: &mut P) -> u32 {
        let mut polls = 0;
        loop {
            self.queued_since_poll = false;
            stack.poll(now_ms, port);
            polls += 1;
            self.poll(stack);
            // Bounded: later rounds only find room freed by ACKs that
            // arrived meanwhile; the frames that follow wake us anyway.
            if !self.queued_since_poll || stack.tx_blocked() || polls == 4 {
                return polls;
            }
        }
    }

    /// After [`NetStack::poll`]: accepts connections, moves held-back data,
    /// and turns received data and state changes into events.
    pub fn poll(&mut self, stack: &mut NetStack<'d>) {
        for p in self.ports.clone() {
            while let Some(conn) = stack.accept(p) {
                self.conns.push(SessConn {
                    id: conn,
                    pending: VecDeque::new(),
                    blocked: false,
                    close_requested: false,
                    eof_sent: false,
                });
                if let Ok((addr, port)) = stack.peer(conn) {
                    self.events.push_back((Event::Peer { addr, port }, None));
                }
                self.events.push_back((Event::Accepted { port: p, conn }, None));
            }
        }
        let mut i = 0;
        while i < self.conns.len() {
            self.push_pending(stack, i);
            let id = self.conns[i].id;
            while !self.conns[i].eof_sent {
                match stack.recv(id, usize::MAX) {
                    Ok(Recv::Data(a)) => self.events.push_back((Event::Data { conn: id }, Some(a))),
                    Ok(Recv::Eof) => {
                        self.conns[i].eof_sent = true;
                        self.events.push_back((Event::Eof { conn: id }, None));
                    }
                    Ok(Recv::WouldBlock) | Err(_) => break,
                }
            }
            if !stack.exists(id) {
                self.conns.swap_remove(i);
                self.events.push_back((Event::Closed { conn: id }, None));
            } else {
                i += 1;
            }
        }
    }

    /// The next event to send to the client, with its tag and data.
    pub fn next_event(&mut self) -> Option<(Event, u64, Option<Aggregate<'d>>)> {
        self.events.pop_front().map(|(e, a)| (e, e.encode(), a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{make, pattern, Net};
    use crate::TxChecksum;
    use iolite::CopyMode;

    #[test]
    fn tags_round_trip_and_garbage_is_rejected() {
        for r in [
            Request::Listen { port: 80, backlog: 16 },
            Request::Unlisten { port: 65535 },
            Request::Send { conn: u32::MAX },
            Request::Close { conn: 1 },
            Request::Abort { conn: 7 },
        ] {
            assert_eq!(Request::decode(r.encode()), Ok(r));
        }
        for e in [
            Event::Listening { port: 80 },
            Event::Peer { addr: [10, 0, 2, 2], port: 40000 },
            Event::Peer { addr: [255, 255, 255, 255], port: 65535 },
            Event::Accepted { port: 443, conn: 99 },
            Event::Data { conn: 3 },
            Event::Eof { conn: 3 },
            Event::SendSpace { conn: 3 },
            Event::Closed { conn: 3 },
            Event::Error { op: OP_SEND, id: 5, code: ErrorCode::NotYours },
        ] {
            assert_eq!(Event::decode(e.encode()), Some(e));
        }
        assert_eq!(Request::decode(0), Err(ErrorCode::BadRequest));
        assert_eq!(Request::decode(u64::MAX), Err(ErrorCode::BadRequest));
        assert_eq!(Request::decode(tag(OP_LISTEN, 70000, 1)), Err(ErrorCode::BadRequest));
        assert_eq!(Event::decode(tag(EV_ERROR, 1, 0xff)), None);
        // A port that does not fit 16 bits is garbage, not a truncated port.
        assert_eq!(Event::decode(tag(EV_PEER, 1, 0x1_0000)), None);
    }

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
}
