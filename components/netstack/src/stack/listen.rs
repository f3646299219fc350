//! Listeners and their backlogs: listening sockets topped up as memory
//! allows, established connections waiting to be accepted, the sockets
//! made for good SYN cookies, and the backlog sockets that died or timed
//! out in SYN-RECEIVED replaced by fresh ones.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::NetStack;
use crate::admission::PortRoom;
use crate::conn::{ipv4_of, tuple_of, Tuple};
use crate::{ConnId, NetError, TcpState};

/// A listened port and its backlog of sockets.
pub(super) struct Listener {
    port: u16,
    /// Sockets listening or holding connections not yet accepted.
    backlog: Vec<SocketHandle>,
    /// How many `backlog` should have; fewer while memory is short
    /// (topped up by `refill_listeners`). Sockets made for SYN cookies
    /// take the place of listening ones; the backlog exceeds it only
    /// while none is free.
    want: usize,
    /// When each of its sockets in SYN-RECEIVED was first seen there
    /// (`Config::syn_recv_timeout_ms`).
    half_open_since: BTreeMap<SocketHandle, u64>,
}

impl<'d> NetStack<'d> {
    /// Tops listeners' backlogs up to what was asked, as memory allows.
    pub(super) fn refill_listeners(&mut self) {
        for li in 0..self.listeners.len() {
            while self.listeners[li].backlog.len() < self.listeners[li].want {
                let port = self.listeners[li].port;
                let Some(mut s) = self.new_socket(false) else { return };
                if s.listen(port).is_err() {
                    break;
                }
                let h = self.sockets.add(s);
                self.listeners[li].backlog.push(h);
            }
        }
    }

    /// Listens on `port` with `backlog` (1..=64) connections that can be
    /// established before they are accepted.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<(), NetError> {
        if port == 0 || !(1..=64).contains(&backlog) {
            return Err(NetError::InvalidArgument);
        }
        if self.listeners.iter().any(|l| l.port == port) {
            return Err(NetError::AddressInUse);
        }
        let mut l = Listener { port, backlog: Vec::new(), want: backlog, half_open_since: BTreeMap::new() };
        // At least one socket now, or the port is not listened on at all.
        let Some(mut s) = self.new_socket(false) else { return Err(NetError::NoMemory) };
        s.listen(port).map_err(|_| NetError::InvalidArgument)?;
        l.backlog.push(self.sockets.add(s));
        self.listeners.push(l);
        self.refill_listeners();
        Ok(())
    }

    /// `port`'s backlog now: its sockets in LISTEN (free), in
    /// SYN-RECEIVED (half-open) and established ones not accepted yet.
    pub fn backlog(&self, port: u16) -> Option<(usize, usize, usize)> {
        let l = self.listeners.iter().find(|l| l.port == port)?;
        let mut n = (0, 0, 0);
        for &h in &l.backlog {
            match self.sockets.get::<tcp::Socket>(h).state() {
                TcpState::Listen => n.0 += 1,
                TcpState::SynReceived => n.1 += 1,
                TcpState::Closed => {}
                _ => n.2 += 1,
            }
        }
        Some(n)
    }

    /// Stops listening on `port` (pending, not accepted connections are reset).
    pub fn unlisten(&mut self, port: u16) -> Result<(), NetError> {
        let i = self.listeners.iter().position(|l| l.port == port).ok_or(NetError::NotFound)?;
        for h in self.listeners.swap_remove(i).backlog {
            self.sockets.get_mut::<tcp::Socket>(h).abort();
            // The RST goes out on the next poll only if the socket lives;
            // a removed socket simply stops answering.
            self.sockets.remove(h);
        }
        Ok(())
    }

    /// Takes one established connection from `port`'s backlog, if any. In
    /// the copy modes a connection whose send ring does not fit in memory
    /// now stays in the backlog (it can receive meanwhile) and is taken by
    /// a later call, once other connections have given their rings back.
    pub fn accept(&mut self, port: u16) -> Option<ConnId> {
        let li = self.listeners.iter().position(|l| l.port == port)?;
        let bi = self.listeners[li].backlog.iter().position(|&h| {
            let s = self.sockets.get::<tcp::Socket>(h);
            !matches!(s.state(), TcpState::Listen | TcpState::SynReceived | TcpState::Closed)
        })?;
        if !self.attach_send_ring(self.listeners[li].backlog[bi]) {
            self.stats.accept_deferred += 1;
            return None;
        }
        let handle = self.listeners[li].backlog.swap_remove(bi);
        self.listeners[li].half_open_since.remove(&handle);
        self.refill_listeners();
        Some(self.add_conn(handle))
    }

    /// The listeners' backlogs as a poll starts, for the device layer's
    /// admission (`Dev::admit`): per port its free (LISTEN), half-open
    /// (SYN-RECEIVED) and established sockets, per remote address what it
    /// holds there, and their 4-tuples. A SYN received this poll moves
    /// the counts.
    pub(super) fn measure_backlogs(&mut self) {
        let a = &mut self.adm;
        a.rooms.clear();
        a.backlog_use.clear();
        a.backlog_tuples.clear();
        for l in &self.listeners {
            let mut room = PortRoom { port: l.port, free: 0, half_open: 0, ready: 0, want: l.want };
            for &h in &l.backlog {
                let s = self.sockets.get::<tcp::Socket>(h);
                let half_open = match s.state() {
                    TcpState::Listen => {
                        room.free += 1;
                        continue;
                    }
                    TcpState::Closed => continue,
                    TcpState::SynReceived => true,
                    _ => false,
                };
                room.half_open += half_open as usize;
                room.ready += !half_open as usize;
                if let Some(t) = tuple_of(s) {
                    a.backlog_tuples.insert(t);
                    let u = a.backlog_use.entry(t.2).or_default();
                    u.held += 1;
                    u.half_open += half_open as usize;
                }
            }
            a.rooms.push(room);
        }
    }

    /// Whether a backlog socket has 4-tuple `t`.
    fn in_backlog(&self, t: &Tuple) -> bool {
        self.listeners
            .iter()
            .flat_map(|l| &l.backlog)
            .any(|&h| tuple_of(self.sockets.get::<tcp::Socket>(h)).as_ref() == Some(t))
    }

    /// Makes the sockets of the cookie ACKs the device layer set aside
    /// (`Admission::cookie_acks`), established (smoltcp patch 0011), in
    /// their listener's backlog in place of a listening socket, and queues
    /// the ACKs for smoltcp. One whose listener's accept queue is full,
    /// whose sender holds its share of sockets already, or for which no
    /// socket fits the memory budget is dropped: the peer resends its
    /// data (or ACK), which carries the cookie again, and gets in later
    /// (Linux's listen overflow).
    pub(super) fn make_cookie_sockets(&mut self) {
        for (frame, h) in core::mem::take(&mut self.adm.cookie_acks) {
            let (Some(local), Some(remote)) = (ipv4_of(h.local.addr), ipv4_of(h.remote.addr)) else { continue };
            let t: Tuple = (local, h.local.port, remote, h.remote.port);
            // A duplicate of one made this poll: the socket's now.
            if self.tuple_index.contains_key(&t) || self.in_backlog(&t) {
                self.adm.inject.push_back(frame);
                continue;
            }
            let Some(li) = self.listeners.iter().position(|l| l.port == h.local.port) else {
                // Not listened on any more: smoltcp resets it.
                self.adm.inject.push_back(frame);
                continue;
            };
            if self.adm.held_by(remote) >= self.cfg.per_address_connections {
                self.stats.syn_dropped_per_address += 1;
                continue;
            }
            let l = &self.listeners[li];
            let ready = l
                .backlog
                .iter()
                .filter(|&&b| {
                    let st = self.sockets.get::<tcp::Socket>(b).state();
                    !matches!(st, TcpState::Listen | TcpState::SynReceived | TcpState::Closed)
                })
                .count();
            if ready >= l.want {
                self.stats.syn_dropped_backlog_full += 1;
                continue;
            }
            let Some(mut s) = self.new_socket(false) else {
                self.stats.syn_dropped_backlog_full += 1;
                continue;
            };
            if s.establish_from_cookie(self.iface.context(), &h).is_err() {
                continue;
            }
            let handle = self.sockets.add(s);
            let l = &mut self.listeners[li];
            l.backlog.push(handle);
            if l.backlog.len() > l.want {
                let free =
                    l.backlog.iter().position(|&b| self.sockets.get::<tcp::Socket>(b).state() == TcpState::Listen);
                if let Some(bi) = free {
                    let b = l.backlog.swap_remove(bi);
                    self.sockets.remove(b);
                }
            }
            let u = self.adm.backlog_use.entry(remote).or_default();
            u.held += 1;
            self.adm.backlog_tuples.insert(t);
            self.adm.inject.push_back(frame);
        }
        // After every ACK, in the order they came: a segment whose socket
        // could not be made goes through admission again (a data segment
        // carries the cookie again; smoltcp ignores a reset for nothing).
        let followers = core::mem::take(&mut self.adm.cookie_followers);
        self.adm.inject.extend(followers);
    }

    /// Takes out of the backlogs the sockets that closed before they were
    /// accepted (a reset after the handshake, a timeout: `backlog_recycled`)
    /// and those that waited `Config::syn_recv_timeout_ms` in SYN-RECEIVED
    /// (`syn_recv_timeouts`; silently, as Linux drops a request whose
    /// SYN-ACKs went unanswered); `refill_listeners` puts fresh listening
    /// sockets in their place. Without it they stayed in the backlog for
    /// good, and a few dozen lost handshakes closed the port.
    pub(super) fn tend_listeners(&mut self) {
        let now = self.adm.now_ms;
        for l in self.listeners.iter_mut() {
            let mut i = 0;
            while i < l.backlog.len() {
                let h = l.backlog[i];
                let state = self.sockets.get::<tcp::Socket>(h).state();
                let expired = if state == TcpState::SynReceived {
                    let since = *l.half_open_since.entry(h).or_insert(now);
                    now.saturating_sub(since) >= self.cfg.syn_recv_timeout_ms
                } else {
                    l.half_open_since.remove(&h);
                    false
                };
                if state != TcpState::Closed && !expired {
                    i += 1;
                    continue;
                }
                if expired {
                    self.stats.syn_recv_timeouts += 1;
                } else {
                    self.stats.backlog_recycled += 1;
                }
                l.half_open_since.remove(&h);
                l.backlog.swap_remove(i);
                self.sockets.remove(h);
            }
        }
    }

    /// Milliseconds until the first SYN-RECEIVED socket times out
    /// (`tend_listeners`), if any is half-open.
    pub(super) fn syn_recv_delay(&self, now_ms: u64) -> Option<u64> {
        let timeout = self.cfg.syn_recv_timeout_ms;
        let half_open = self.listeners.iter().flat_map(|l| l.half_open_since.values()).min();
        half_open.map(|&since| since.saturating_add(timeout).saturating_sub(now_ms))
    }
}
