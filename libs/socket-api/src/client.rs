//! The client half of the protocol: one record per connection.
//!
//! A socket client (httpd, tcp_echo) keeps, for every connection the stack
//! gave it, the same few facts: how much it may send now (the send credit
//! and the allowance of the last window the stack reported), whether it
//! asked to close, whether its input is paused or handed off, and its own
//! state of the connection. [`Conns`] keeps them in one record per
//! connection ([`Conn`]) and reads the stack's events for them: the send
//! window ([`crate::window`]) and the peer announcement are absorbed here, and
//! what is left for the client comes out as a [`Notice`]. A connection's
//! record goes with its `Closed` event, all of it at once, so nothing of a
//! closed connection lingers to be found by a later one with the same id.
//!
//! The client's loop is then: decode each event, hand it to
//! [`Conns::event`], act on the notice (`Writable`: pull more output for
//! the connection), and before each `Send` ask the record whether it may
//! ([`Conn::may_send`], [`Conn::window`]) and count it ([`Conn::sent`]).

use alloc::collections::BTreeMap;

use crate::{ConnId, ErrorCode, Event, Request, SendWindow};

/// A connection's peer, as the stack announced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// IPv4 address.
    pub addr: [u8; 4],
    /// TCP port.
    pub port: u16,
}

/// The client's record of one connection: its flow control, its requests'
/// state, and `app`, the client's own state of it.
#[derive(Debug)]
pub struct Conn<T> {
    /// The client's own state of the connection.
    pub app: T,
    /// Our sends against the last window: a client that keeps within its
    /// send limit is never refused a send.
    window: SendWindow,
    /// The client stopped for credit: the window that frees some is a
    /// [`Notice::Writable`].
    credit_wait: bool,
    /// A `Close` was asked; the `Closed` event has not come yet.
    closing: bool,
    /// The client asked the stack to keep this connection's input in TCP.
    rx_paused: bool,
    /// Its input goes to the stack's hand-off pool.
    handed_off: bool,
}

impl<T> Conn<T> {
    fn new(app: T) -> Self {
        Self {
            app,
            window: SendWindow::default(),
            credit_wait: false,
            closing: false,
            rx_paused: false,
            handed_off: false,
        }
    }

    /// Whether one more `Send` keeps within the send limit. When it does
    /// not, the record notes that the client waits: the window that frees
    /// credit then comes out as [`Notice::Writable`].
    pub fn may_send(&mut self) -> bool {
        let ok = self.window.may_send();
        self.credit_wait |= !ok;
        ok
    }

    /// Counts a `Send` of `bytes` against the window.
    pub fn sent(&mut self, bytes: usize) {
        self.window.sent(bytes);
    }

    /// Bytes the last window still lets the client send (`None` before the
    /// stack reported one): what it pulls for a slow peer stays about one
    /// window.
    pub fn window(&self) -> Option<usize> {
        self.window.left()
    }

    /// Whether the client should send nothing more now: its byte limit is
    /// reached (it used up its allowance, or the stack holds its sends
    /// back). The window that opens it is a [`Notice::Writable`].
    pub fn blocked(&self) -> bool {
        self.window() == Some(0)
    }

    /// Whether the client asked to close the connection.
    pub fn closing(&self) -> bool {
        self.closing
    }

    /// Whether the connection's input is handed off (see
    /// [`Request::HandOff`]).
    pub fn handed_off(&self) -> bool {
        self.handed_off
    }

    /// Whether the client paused the connection's input (see
    /// [`Request::Receive`]).
    pub fn input_paused(&self) -> bool {
        self.rx_paused
    }
}

/// What an event means for the client, once [`Conns`] took what is its.
#[derive(Debug, PartialEq, Eq)]
pub enum Notice<T> {
    /// Listening on `port`.
    Listening {
        /// TCP port.
        port: u16,
    },
    /// The stack accepted `conn` on `port`, from `peer` (if announced).
    /// The client makes its record with [`Conns::accept`], or refuses it.
    Accepted {
        /// The listening port.
        port: u16,
        /// The new connection.
        conn: ConnId,
        /// Its peer.
        peer: Option<Peer>,
    },
    /// The event's aggregate holds data received on `conn`.
    Data {
        /// Connection.
        conn: ConnId,
    },
    /// The peer finished sending on `conn`.
    Eof {
        /// Connection.
        conn: ConnId,
    },
    /// `conn` may send again: a window came, or credit the client waited
    /// for.
    Writable {
        /// Connection.
        conn: ConnId,
    },
    /// `conn` is gone; `app` is what the client kept of it (`None` for a
    /// connection it never recorded).
    Closed {
        /// Connection.
        conn: ConnId,
        /// The client's state of it, its record removed.
        app: Option<T>,
    },
    /// A request on `id` failed.
    Error {
        /// The request's operation code.
        op: u8,
        /// Its connection id or port.
        id: u32,
        /// Why.
        code: ErrorCode,
    },
}

/// A client's connections: one [`Conn`] per connection the stack gave it.
#[derive(Debug)]
pub struct Conns<T> {
    map: BTreeMap<ConnId, Conn<T>>,
    /// The peer announced for the next accepted connection
    /// ([`Event::Peer`] comes right before its [`Event::Accepted`]).
    next_peer: Option<Peer>,
}

impl<T> Default for Conns<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Conns<T> {
    /// No connections.
    pub const fn new() -> Self {
        Self { map: BTreeMap::new(), next_peer: None }
    }

    /// Reads one event: flow control and peers are kept here, the rest is
    /// the client's ([`Notice`]). `None`: nothing for the client.
    pub fn event(&mut self, ev: Event) -> Option<Notice<T>> {
        Some(match ev {
            Event::Listening { port } => Notice::Listening { port },
            Event::Peer { addr, port } => {
                self.next_peer = Some(Peer { addr, port });
                return None;
            }
            // `take`, so that a peer never outlives its connection.
            Event::Accepted { port, conn } => Notice::Accepted { port, conn, peer: self.next_peer.take() },
            Event::Data { conn } => Notice::Data { conn },
            Event::Eof { conn } => Notice::Eof { conn },
            Event::Window { conn, sends, units } => {
                let c = self.map.get_mut(&conn)?;
                let opened = c.window.update(sends, units);
                // Woken for bytes it could not send before, or for the
                // credit it waited for.
                let credit = c.credit_wait && c.window.may_send();
                c.credit_wait &= !credit;
                if !opened && !credit {
                    return None;
                }
                Notice::Writable { conn }
            }
            Event::Closed { conn } => Notice::Closed { conn, app: self.map.remove(&conn).map(|c| c.app) },
            Event::Error { op, id, code } => Notice::Error { op, id, code },
        })
    }

    /// Records the connection of a [`Notice::Accepted`] with the client's
    /// state of it. A record the id still had (the stack reuses ids only
    /// after their `Closed`) is replaced.
    pub fn accept(&mut self, conn: ConnId, app: T) {
        self.map.insert(conn, Conn::new(app));
    }

    /// `conn`'s record.
    pub fn get(&self, conn: ConnId) -> Option<&Conn<T>> {
        self.map.get(&conn)
    }

    /// `conn`'s record, to change.
    pub fn get_mut(&mut self, conn: ConnId) -> Option<&mut Conn<T>> {
        self.map.get_mut(&conn)
    }

    /// Whether `conn` is recorded.
    pub fn contains(&self, conn: ConnId) -> bool {
        self.map.contains_key(&conn)
    }

    /// Connections recorded (closing ones included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no connection is recorded.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Connections whose window is closed (see [`Conn::blocked`]).
    pub fn blocked_count(&self) -> usize {
        self.map.values().filter(|c| c.blocked()).count()
    }

    /// The recorded connections' ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.map.keys().copied()
    }

    /// The `Close` request for `conn`, the first time it is asked for a
    /// recorded connection (`None` after, or for one not recorded). The
    /// record stays until the `Closed` event; its input is no longer the
    /// client's business ([`Conn::closing`]).
    pub fn close(&mut self, conn: ConnId) -> Option<Request> {
        let c = self.map.get_mut(&conn)?;
        (!core::mem::replace(&mut c.closing, true)).then_some(Request::Close { conn })
    }

    /// The request that pauses (`on: false`) or resumes `conn`'s input,
    /// if that changes what the client last asked.
    pub fn receive(&mut self, conn: ConnId, on: bool) -> Option<Request> {
        let c = self.map.get_mut(&conn)?;
        (core::mem::replace(&mut c.rx_paused, !on) == on).then_some(Request::Receive { conn, on })
    }

    /// The request that hands `conn`'s input off (`on`) or back, if that
    /// changes what the client last asked.
    pub fn hand_off(&mut self, conn: ConnId, on: bool) -> Option<Request> {
        let c = self.map.get_mut(&conn)?;
        (core::mem::replace(&mut c.handed_off, on) != on).then_some(Request::HandOff { conn, on })
    }

    /// Forgets every connection (the stack died, and they with it): their
    /// ids and the client's states of them, in order.
    pub fn take_all(&mut self) -> impl Iterator<Item = (ConnId, T)> {
        self.next_peer = None;
        core::mem::take(&mut self.map).into_iter().map(|(id, c)| (id, c.app))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Grant, SEND_CREDIT, SEND_SPACE_MAX, SEND_SPACE_MIN};
    use alloc::vec::Vec;

    fn accepted(t: &mut Conns<u32>, conn: ConnId, app: u32) {
        assert_eq!(t.event(Event::Accepted { port: 80, conn }), Some(Notice::Accepted { port: 80, conn, peer: None }));
        t.accept(conn, app);
    }

    #[test]
    fn an_accepted_connection_takes_the_peer_announced_just_before_it() {
        let mut t = Conns::<u32>::new();
        assert_eq!(t.event(Event::Peer { addr: [10, 0, 2, 2], port: 4000 }), None);
        let peer = Some(Peer { addr: [10, 0, 2, 2], port: 4000 });
        assert_eq!(t.event(Event::Accepted { port: 80, conn: 5 }), Some(Notice::Accepted { port: 80, conn: 5, peer }));
        // Taken: the next connection has none unless announced.
        assert_eq!(
            t.event(Event::Accepted { port: 80, conn: 6 }),
            Some(Notice::Accepted { port: 80, conn: 6, peer: None })
        );
        assert!(t.is_empty(), "recorded only when the client accepts");
    }

    #[test]
    fn the_window_gates_sends_and_its_opening_wakes_the_connection() {
        let (mut t, mut g) = (Conns::new(), Grant::default());
        accepted(&mut t, 1, 7);
        assert_eq!(t.get(1).and_then(Conn::window), None);
        g = g.opened(100);
        assert_eq!(t.event(g.event(1, 0)), Some(Notice::Writable { conn: 1 }));
        g = g.reported(0);
        let c = t.get_mut(1).expect("recorded");
        assert_eq!(c.window(), Some(SEND_SPACE_MIN), "at least the least allowance");
        c.sent(SEND_SPACE_MIN - 1);
        g.seen(SEND_SPACE_MIN - 1);
        assert!(!c.blocked());
        c.sent(1);
        g.seen(1);
        assert!(c.blocked(), "allowance spent");
        g = g.opened(70_000);
        assert_eq!(t.event(g.event(1, 0)), Some(Notice::Writable { conn: 1 }));
        assert_eq!(t.get(1).and_then(Conn::window), Some(70_000 / 1024 * 1024));
        // Closed: blocked until the next window, whatever was left of this
        // one; a window that opens nothing wakes nobody.
        g = g.closed();
        assert_eq!(t.event(g.event(1, 1)), None);
        assert!(t.get(1).is_some_and(Conn::blocked));
        assert_eq!(t.blocked_count(), 1);
        g = g.opened(0);
        assert_eq!(t.event(g.event(1, 0)), Some(Notice::Writable { conn: 1 }));
        assert!(t.get(1).is_some_and(|c| !c.blocked()));
        // Windows of connections the client does not hold are nothing.
        assert_eq!(t.event(g.event(9, 0)), None);
    }

    #[test]
    fn a_connection_that_waited_for_credit_is_woken_by_the_window_that_frees_it() {
        let (mut t, mut g) = (Conns::new(), Grant::default().opened(SEND_SPACE_MAX));
        accepted(&mut t, 3, 0);
        assert_eq!(t.event(g.event(3, 0)), Some(Notice::Writable { conn: 3 }));
        g = g.reported(0);
        let c = t.get_mut(3).expect("recorded");
        for _ in 0..SEND_CREDIT {
            assert!(c.may_send());
            c.sent(10);
            g.seen(10);
        }
        // A window while nobody waits wakes nobody.
        let held = SEND_CREDIT as usize - 1;
        assert_eq!(t.event(g.event(3, held)), None);
        g = g.reported(held);
        let c = t.get_mut(3).expect("recorded");
        assert!(c.may_send());
        c.sent(10);
        g.seen(10);
        assert!(!c.may_send(), "at the credit");
        assert_eq!(t.event(g.event(3, 0)), Some(Notice::Writable { conn: 3 }));
        g = g.reported(0);
        assert!(t.get_mut(3).is_some_and(|c| c.may_send()));
        // Once: the next window wakes nobody.
        assert_eq!(t.event(g.event(3, 0)), None);
    }

    #[test]
    fn closed_removes_the_whole_record_and_hands_back_the_clients_state() {
        let mut t = Conns::new();
        accepted(&mut t, 4, 40);
        assert_eq!(t.hand_off(4, true), Some(Request::HandOff { conn: 4, on: true }));
        assert_eq!(t.receive(4, false), Some(Request::Receive { conn: 4, on: false }));
        let g = Grant::default().opened(0);
        assert_eq!(t.event(g.event(4, 0)), Some(Notice::Writable { conn: 4 }));
        assert_eq!(t.close(4), Some(Request::Close { conn: 4 }));
        assert_eq!(t.close(4), None, "asked once");
        assert!(t.get(4).is_some_and(Conn::closing));
        assert_eq!(t.event(Event::Closed { conn: 4 }), Some(Notice::Closed { conn: 4, app: Some(40) }));
        assert!(!t.contains(4));
        assert_eq!(t.event(Event::Closed { conn: 4 }), Some(Notice::Closed { conn: 4, app: None }));
        // The id comes back as a new connection with nothing of the old.
        accepted(&mut t, 4, 41);
        let c = t.get(4).expect("recorded");
        assert!(!c.closing() && !c.handed_off() && !c.input_paused() && c.window().is_none());
    }

    #[test]
    fn input_switches_are_asked_only_when_they_change() {
        let mut t = Conns::new();
        accepted(&mut t, 2, 0);
        assert_eq!(t.receive(2, true), None, "input flows by default");
        assert_eq!(t.receive(2, false), Some(Request::Receive { conn: 2, on: false }));
        assert_eq!(t.receive(2, false), None);
        assert!(t.get(2).is_some_and(Conn::input_paused));
        assert_eq!(t.receive(2, true), Some(Request::Receive { conn: 2, on: true }));
        assert_eq!(t.hand_off(2, false), None, "not handed off by default");
        assert_eq!(t.hand_off(2, true), Some(Request::HandOff { conn: 2, on: true }));
        assert_eq!(t.hand_off(2, true), None);
        assert_eq!(t.hand_off(2, false), Some(Request::HandOff { conn: 2, on: false }));
        assert_eq!(t.receive(8, false), None, "not recorded");
        assert_eq!(t.hand_off(8, true), None);
        assert_eq!(t.close(8), None);
    }

    #[test]
    fn the_stacks_death_takes_every_connection_and_the_announced_peer() {
        let mut t = Conns::new();
        accepted(&mut t, 1, 10);
        accepted(&mut t, 2, 20);
        assert_eq!(t.event(Event::Peer { addr: [1, 2, 3, 4], port: 5 }), None);
        let all: Vec<_> = t.take_all().collect();
        assert_eq!(all, [(1, 10), (2, 20)]);
        assert!(t.is_empty());
        assert_eq!(
            t.event(Event::Accepted { port: 7, conn: 3 }),
            Some(Notice::Accepted { port: 7, conn: 3, peer: None })
        );
    }

    #[test]
    fn other_events_pass_through() {
        let mut t = Conns::<()>::new();
        assert_eq!(t.event(Event::Listening { port: 80 }), Some(Notice::Listening { port: 80 }));
        assert_eq!(t.event(Event::Data { conn: 1 }), Some(Notice::Data { conn: 1 }));
        assert_eq!(t.event(Event::Eof { conn: 1 }), Some(Notice::Eof { conn: 1 }));
        let e = Event::Error { op: crate::OP_SEND, id: 1, code: ErrorCode::WouldBlock };
        assert_eq!(t.event(e), Some(Notice::Error { op: crate::OP_SEND, id: 1, code: ErrorCode::WouldBlock }));
    }
}
