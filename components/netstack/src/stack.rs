//! The stack: a smoltcp interface, its sockets and connections, and the
//! poll that runs them. What a connection does is in the submodules: its
//! socket rings (`rings`), listening and accepting (`listen`), sending
//! (`send`), receiving (`recv`); and the interface's DHCP lease (`dhcp`).
//! A connection's own record is [`Conn`](crate::conn::Conn), its send
//! queue [`TxQueue`](crate::txqueue::TxQueue).

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use iolite::{CopyMode, Domain, SliceDesc};
use smoltcp::iface::{Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint, Ipv4Address, Ipv4Cidr};

use crate::admission::{Admission, Limits};
use crate::conn::{died_under_user, in_time_wait, tuple_of, Conn, Tuple};
use crate::csum::{CacheStats, ChecksumCache};
use crate::device::Dev;
use crate::frame::NicPort;
use crate::txqueue::TxQueue;
use crate::{Config, ConnId, NetError, NetStats};

mod dhcp;
mod listen;
mod recv;
mod rings;
mod send;

pub use dhcp::DhcpLease;
use listen::Listener;
pub use recv::Recv;
pub use smoltcp::socket::tcp::State as TcpState;

/// A TCP/IPv4 stack over IO-Lite (see the crate docs).
pub struct NetStack<'d> {
    d: &'d Domain,
    cfg: Config,
    iface: Interface,
    sockets: SocketSet<'static>,
    pub(crate) conns: Vec<Conn<'d>>,
    /// Connection id → index in `conns` (lookups stay O(log n) with
    /// hundreds of connections: every poll looks each one up).
    conn_index: BTreeMap<ConnId, usize>,
    /// 4-tuple → index in `conns`, for the device layer's per-frame lookup.
    pub(crate) tuple_index: BTreeMap<Tuple, usize>,
    /// Socket → index in `conns`, for what smoltcp dispatched.
    handle_index: BTreeMap<SocketHandle, usize>,
    /// Connections to look at after the next poll besides what smoltcp
    /// dispatched in it: a segment arrived for them, or the user sent,
    /// received or closed (see `after_poll`). May repeat; stale handles
    /// are skipped.
    dirty: Vec<SocketHandle>,
    /// Every connection is looked at after the next poll.
    dirty_all: bool,
    /// The indexes `after_poll` looks at (kept for its capacity).
    visit: Vec<usize>,
    /// The connections the user closed that are in TIME-WAIT, by
    /// `Conn::time_wait_order` (oldest first; `Config::time_wait_cap`).
    time_wait_set: BTreeSet<(u64, SocketHandle)>,
    listeners: Vec<Listener>,
    /// Admission of connection requests: the backlogs as each poll
    /// starts, per-address use, SYN cookies (see `admission`).
    adm: Admission<'d>,
    dhcp: Option<SocketHandle>,
    /// A lease obtained (Some) or lost (None) since the last
    /// [`NetStack::take_dhcp_change`].
    dhcp_change: Option<Option<DhcpLease>>,
    cache: ChecksumCache,
    stats: NetStats,
    scratch: Vec<u8>,
    next_id: ConnId,
    tx_blocked: bool,
    /// The last stale slice a transmit found ([`NetStack::take_stale`]).
    last_stale: Option<SliceDesc>,
    /// Connections that may have changed since the last
    /// [`NetStack::take_touched`]: a segment arrived for them, an
    /// acknowledgement freed send space, their state changed, or they were
    /// forgotten. Each at most once (`Conn::touched`).
    touched: Vec<ConnId>,
    /// Something changed that was not attributed to a connection (a
    /// received frame in several slices, or more touched ids than kept):
    /// every connection counts as touched.
    touched_all: bool,
    /// Connections that have entered TIME-WAIT so far (orders them).
    time_waits: u64,
    /// Connections with an open receive page, looked at a few per poll:
    /// a page nothing but its writer holds any more goes back to the pool
    /// (`sweep_open_pages`).
    rx_open_list: VecDeque<ConnId>,
    /// Connections whose input waits for their pages to come back
    /// (`Conn::rx_paused`), looked at after every poll.
    rx_paused: Vec<ConnId>,
}

/// A device that has nothing, used only to create the interface (MTU,
/// segmentation offload).
struct NoDevice(usize, bool);
impl smoltcp::phy::Device for NoDevice {
    type RxToken<'a> = NoToken;
    type TxToken<'a> = NoToken;
    fn receive(&mut self, _: Instant) -> Option<(NoToken, NoToken)> {
        None
    }
    fn transmit(&mut self, _: Instant) -> Option<NoToken> {
        None
    }
    fn capabilities(&self) -> smoltcp::phy::DeviceCapabilities {
        // What the interface keeps for good (it never asks `Dev`).
        crate::device::capabilities(self.0, self.1)
    }
}
struct NoToken;
impl smoltcp::phy::RxToken for NoToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&[])
    }
}
impl smoltcp::phy::TxToken for NoToken {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        f(&mut alloc::vec![0; len])
    }
}

impl<'d> NetStack<'d> {
    /// A stack on `d` with `cfg`, at time `now_ms`. `cfg.pool` must be a
    /// pool `d` owns (headers, frames and received data are allocated there).
    pub fn new(d: &'d Domain, cfg: Config, now_ms: u64) -> Self {
        let mut ic = smoltcp::iface::Config::new(HardwareAddress::Ethernet(EthernetAddress(cfg.mac)));
        ic.random_seed = cfg.random_seed;
        let now = Instant::from_millis(now_ms as i64);
        let mut iface = Interface::new(ic, &mut NoDevice(cfg.mtu, cfg.tso), now);
        // The socket table at its largest at once: every socket has a
        // receive ring from the budget, so the budget bounds their number.
        // A table that grew under load would keep its size (no shrinking),
        // so memory would not return to where it was.
        let slots = cfg.socket_memory / cfg.recv_window.max(1) + 2;
        let mut sockets = SocketSet::new(Vec::with_capacity(slots));
        let mut dhcp = None;
        if cfg.dhcp {
            let mut socket = dhcpv4::Socket::new();
            // The socket keeps the last packet here; the lease time (option
            // 51) is read from the ACK, smoltcp's config does not carry it.
            // One stack per program with DHCP: leaked, like the stack.
            socket.set_receive_packet_buffer(alloc::boxed::Box::leak(alloc::vec![0u8; 1500].into_boxed_slice()));
            dhcp = Some(sockets.add(socket));
        } else {
            let (a, prefix) = cfg.address;
            iface.update_ip_addrs(|addrs| {
                let _ = addrs.push(IpCidr::Ipv4(Ipv4Cidr::new(Ipv4Address::from(a), prefix)));
            });
            if let Some(gw) = cfg.gateway {
                let _ = iface.routes_mut().add_default_ipv4_route(Ipv4Address::from(gw));
            }
        }
        let cache = ChecksumCache::new(cfg.csum_cache_entries, cfg.csum_block_shift);
        let limits = Limits {
            half_open: cfg.half_open_budget,
            per_address_half_open: cfg.per_address_half_open,
            per_address_connections: cfg.per_address_connections,
        };
        let adm = Admission::new(cfg.random_seed, limits);
        Self {
            d,
            cfg,
            iface,
            sockets,
            conns: Vec::new(),
            conn_index: BTreeMap::new(),
            tuple_index: BTreeMap::new(),
            handle_index: BTreeMap::new(),
            dirty: Vec::new(),
            dirty_all: false,
            visit: Vec::new(),
            time_wait_set: BTreeSet::new(),
            listeners: Vec::new(),
            adm,
            dhcp,
            dhcp_change: None,
            cache,
            stats: NetStats::default(),
            scratch: Vec::new(),
            touched: Vec::new(),
            touched_all: false,
            next_id: 1,
            tx_blocked: false,
            last_stale: None,
            time_waits: 0,
            rx_open_list: VecDeque::new(),
            rx_paused: Vec::new(),
        }
    }

    /// The domain the stack's references belong to.
    pub fn domain(&self) -> &'d Domain {
        self.d
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn zero_copy(&self) -> bool {
        self.cfg.copy_mode == CopyMode::IoLite
    }

    /// The IPv4 address in use (static, or from DHCP), if any.
    pub fn address(&self) -> Option<[u8; 4]> {
        self.iface.ipv4_addr().map(|a| a.octets())
    }

    fn add_conn(&mut self, handle: SocketHandle) -> ConnId {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let s = self.sockets.get::<tcp::Socket>(handle);
        self.conn_index.insert(id, self.conns.len());
        self.handle_index.insert(handle, self.conns.len());
        if let Some(t) = tuple_of(s) {
            self.tuple_index.insert(t, self.conns.len());
            self.adm.count_conn(t.2, true);
        }
        self.dirty.push(handle);
        self.conns.push(Conn {
            id,
            handle,
            zero_copy: self.zero_copy(),
            tuple: tuple_of(s),
            seq_base: s.send_seq_base().0 as u32,
            front: 0,
            sent_hi: 0,
            queue: TxQueue::new(),
            closed_by_user: false,
            ring_released: false,
            reset_stale: false,
            touched: true,
            last_state: s.state(),
            time_wait_order: None,
            hand_off: false,
            max_window: s.remote_window(),
            rx_open: None,
            rx_open_listed: false,
            rx_bufs: Vec::new(),
            rx_paused: false,
        });
        self.touched.push(id);
        id
    }

    /// Opens a connection to `remote` (address, port) from `local_port`.
    pub fn connect(&mut self, remote: ([u8; 4], u16), local_port: u16) -> Result<ConnId, NetError> {
        let mut s = self.new_socket(true).ok_or(NetError::NoMemory)?;
        let ep = IpEndpoint::new(IpAddress::Ipv4(Ipv4Address::from(remote.0)), remote.1);
        s.connect(self.iface.context(), ep, local_port).map_err(|_| NetError::InvalidArgument)?;
        let h = self.sockets.add(s);
        Ok(self.add_conn(h))
    }

    fn conn(&self, id: ConnId) -> Result<usize, NetError> {
        self.conn_index.get(&id).copied().ok_or(NetError::NotFound)
    }

    /// The TCP state of a connection.
    pub fn state(&self, id: ConnId) -> Result<TcpState, NetError> {
        let c = &self.conns[self.conn(id)?];
        Ok(self.sockets.get::<tcp::Socket>(c.handle).state())
    }

    /// The peer's IPv4 address and TCP port (`NotFound` for an unknown
    /// connection, `NotConnected` while the peer is not known yet).
    pub fn peer(&self, id: ConnId) -> Result<([u8; 4], u16), NetError> {
        let c = &self.conns[self.conn(id)?];
        c.tuple.map(|(_, _, addr, port)| (addr, port)).ok_or(NetError::NotConnected)
    }

    /// Closes the sending half of `id` (FIN after the queued data). The
    /// connection's resources go once the socket has fully closed.
    pub fn close(&mut self, id: ConnId) -> Result<(), NetError> {
        let i = self.conn(id)?;
        self.conns[i].closed_by_user = true;
        self.dirty.push(self.conns[i].handle);
        self.sockets.get_mut::<tcp::Socket>(self.conns[i].handle).close();
        Ok(())
    }

    /// Resets `id` and forgets it at once (queued data is released).
    pub fn abort(&mut self, id: ConnId) -> Result<(), NetError> {
        let i = self.conn(id)?;
        self.conns[i].closed_by_user = true;
        self.dirty.push(self.conns[i].handle);
        self.sockets.get_mut::<tcp::Socket>(self.conns[i].handle).abort();
        Ok(())
    }

    /// Forgets `id` now if its socket closed under its user and the user
    /// has taken everything it received (see [`died_under_user`]): for a
    /// user that has just read the last of it and would otherwise hear of
    /// the close only after the next poll. True if it was forgotten.
    pub fn forget_if_dead(&mut self, id: ConnId) -> bool {
        let Ok(i) = self.conn(id) else { return false };
        if !died_under_user(&self.conns[i], self.sockets.get::<tcp::Socket>(self.conns[i].handle)) {
            return false;
        }
        self.stats.dead_conns_forgotten += 1;
        self.forget(i);
        true
    }

    /// Forgets `id` now if its socket closed under its user, with what it
    /// received and the user has not taken (a reset flushes the queues,
    /// RFC 793; counted in [`NetStats::dead_input_dropped`]): for a user
    /// that is sending on it, i.e. answering input that nobody will read
    /// the answers to. A user that holds its input back (a web server
    /// parses one file request at a time) would otherwise answer every
    /// pipelined request it then takes, into sends refused here. True if
    /// it was forgotten; the user hears `Closed` (see
    /// [`NetStack::take_touched`]).
    pub fn forget_dead_with_input(&mut self, id: ConnId) -> bool {
        let Ok(i) = self.conn(id) else { return false };
        let s = self.sockets.get::<tcp::Socket>(self.conns[i].handle);
        if self.conns[i].closed_by_user || s.state() != TcpState::Closed {
            return false;
        }
        self.stats.dead_input_dropped += s.recv_queue() as u64;
        self.stats.dead_conns_forgotten += 1;
        self.forget(i);
        true
    }

    /// Whether connection `id` still exists.
    pub fn exists(&self, id: ConnId) -> bool {
        self.conn(id).is_ok()
    }

    /// Runs the stack: receives and transmits frames through `port`, runs
    /// timers, then releases acknowledged references and finished
    /// connections. Returns whether any socket changed state.
    pub fn poll<P: NicPort<'d>>(&mut self, now_ms: u64, port: &mut P) -> bool {
        let now = Instant::from_millis(now_ms as i64);
        self.adm.now_ms = now_ms;
        self.tx_blocked = false;
        let mut changed = false;
        // The ACKs of good SYN cookies are set aside by the device layer
        // (their sockets cannot be made while smoltcp has the socket set);
        // their sockets are made after the interface's poll and smoltcp
        // takes the ACKs, and the data they may carry, in a second one
        // (so no byte of them is lost or waits for a retransmission).
        for round in 0..3 {
            if !self.adm.cookie_acks.is_empty() {
                self.make_cookie_sockets();
            }
            if round > 0 && self.adm.inject.is_empty() {
                break;
            }
            self.measure_backlogs();
            changed |= self.poll_iface(now, port);
            if self.adm.cookie_acks.is_empty() {
                break;
            }
        }
        self.after_poll();
        changed
    }

    /// One `Interface::poll` through the device layer.
    fn poll_iface<P: NicPort<'d>>(&mut self, now: Instant, port: &mut P) -> bool {
        // Every connection's `seq_base` and `tuple` are as of the end of the
        // last poll (`after_poll`), which is what the device layer needs:
        // only a poll acknowledges data, and the queue was trimmed to match.
        let addr = self.address();
        let mut dev = Dev {
            d: self.d,
            port,
            pool: self.cfg.pool,
            zero_copy: self.cfg.copy_mode == CopyMode::IoLite,
            checksum: self.cfg.checksum,
            mtu: self.cfg.mtu,
            tso: self.cfg.tso,
            conns: &mut self.conns,
            tuples: &self.tuple_index,
            cache: &mut self.cache,
            stats: &mut self.stats,
            scratch: &mut self.scratch,
            blocked: false,
            stale: None,
            touched: &mut self.touched,
            touched_all: &mut self.touched_all,
            dirty: &mut self.dirty,
            dirty_all: false,
            last_conn: None,
            adm: &mut self.adm,
            mac: self.cfg.mac,
            addr,
            recv_window: self.cfg.recv_window,
        };
        let changed = self.iface.poll(now, &mut dev, &mut self.sockets) != PollResult::None;
        self.tx_blocked |= dev.blocked;
        self.dirty_all |= dev.dirty_all;
        if let Some(s) = dev.stale {
            self.last_stale = Some(s);
        }
        changed
    }

    /// Every connection with something unacknowledged resends it from the
    /// last acknowledged byte at the next [`NetStack::poll`], as if its
    /// retransmission timer had fired (smoltcp patch 0008): the caller
    /// knows frames were lost on the way out (the NIC's driver died with
    /// them), so waiting out the RTO (at least a second) would only stall
    /// the connections. Returns how many TCP sockets were looked at.
    pub fn retransmit_now(&mut self) -> usize {
        let mut n = 0;
        for (_, s) in self.sockets.iter_mut() {
            if let smoltcp::socket::Socket::Tcp(t) = s {
                t.retransmit_now();
                n += 1;
            }
        }
        n
    }

    /// Whether the last [`NetStack::poll`] left frames unsent (or received
    /// frames untaken) for lack of room in the NIC queue or the frame pool.
    /// Poll again once the driver has given frames back: nothing was
    /// dropped, smoltcp still has the segments.
    pub fn tx_blocked(&self) -> bool {
        self.tx_blocked
    }

    fn after_poll(&mut self) {
        crate::shrink_unused(&mut self.conns);
        crate::shrink_unused(&mut self.visit);
        crate::shrink_unused(&mut self.touched);
        crate::shrink_unused(&mut self.rx_paused);
        crate::shrink_unused_deque(&mut self.rx_open_list);
        // The connections this poll may have changed: those a segment was
        // for or the user acted on (`dirty`), and those smoltcp dispatched
        // (gave a chance to send, to time out or to leave TIME-WAIT: also
        // every one whose timer came due). The others are as they were
        // after the last poll, so hundreds of idle or stalled connections
        // cost a poll nothing here (see README, "The poll loop").
        self.sockets.take_dispatched(&mut self.dirty);
        let mut visit = core::mem::take(&mut self.visit);
        visit.clear();
        if core::mem::take(&mut self.dirty_all) {
            visit.extend(0..self.conns.len());
        } else {
            visit.extend(self.dirty.iter().filter_map(|h| self.handle_index.get(h).copied()));
        }
        self.dirty.clear();
        visit.sort_unstable();
        visit.dedup();
        self.stats.poll_visits += visit.len() as u64;
        let mut gone: Vec<usize> = Vec::new();
        // Release what was acknowledged. (Sockets are read through `get`:
        // `get_mut` tells smoltcp the socket may have something to send,
        // and it would then look at it in the next poll.)
        for &i in &visit {
            if self.settle(i) {
                gone.push(i);
            }
        }
        // Beyond the cap, the connections longest in TIME-WAIT go (see
        // `Config::time_wait_cap`): without a segment, their socket and
        // ring are simply dropped below.
        while self.time_wait_set.len() > self.cfg.time_wait_cap {
            let Some((_, h)) = self.time_wait_set.pop_first() else { break };
            if let Some(&i) = self.handle_index.get(&h) {
                self.stats.time_wait_recycled += 1;
                gone.push(i);
            }
        }
        gone.sort_unstable();
        gone.dedup();
        // From the highest index down: `forget` moves the last connection
        // into the freed index, which is then not one still to go.
        for &i in gone.iter().rev() {
            self.forget(i);
        }
        self.visit = visit;
        // Nobody takes them (a user of the stack without a session): keep
        // the list bounded, everything counts as touched instead.
        if self.touched.len() > self.conns.len() + 64 {
            self.touched.clear();
            for c in self.conns.iter_mut() {
                c.touched = false;
            }
            self.touched_all = true;
        }
        // Backlog sockets that died before they were accepted, or waited
        // too long in SYN-RECEIVED, make room for fresh ones.
        self.tend_listeners();
        // Rings freed by closed connections let waiting listeners grow back.
        self.refill_listeners();
        self.sweep_rx();
        if let Some(h) = self.dhcp {
            self.poll_dhcp(h);
        }
    }

    /// After a poll, connection `i` (one the poll may have changed):
    /// a stale one is reset, what was acknowledged is released, its state,
    /// window, 4-tuple and TIME-WAIT order are recorded, and it is touched
    /// if its user may have something to do. True if it is to be
    /// forgotten: the user closed it and its socket is closed, or it died
    /// under its user (`died_under_user`).
    fn settle(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        if c.reset_stale && self.sockets.get::<tcp::Socket>(c.handle).state() != TcpState::Closed {
            // Nothing more of this stream can be vouched for: a reset
            // tells the peer so (it never sees the stale bytes).
            self.sockets.get_mut::<tcp::Socket>(c.handle).abort();
            self.stats.tx_stale_resets += 1;
        }
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        let mut touch = s.state() != c.last_state;
        c.last_state = s.state();
        c.max_window = c.max_window.max(s.remote_window());
        if c.last_state == TcpState::TimeWait && c.time_wait_order.is_none() {
            c.time_wait_order = Some(self.time_waits);
            self.time_waits += 1;
        }
        if let Some(o) = in_time_wait(c) {
            self.time_wait_set.insert((o, c.handle));
        }
        if c.zero_copy {
            let acked = c.queue.len().saturating_sub(s.send_queue());
            if acked > 0 {
                c.queue.trim(acked);
                c.front += acked as u64;
                touch = true;
            }
        }
        c.seq_base = s.send_seq_base().0 as u32;
        if c.tuple.is_none() {
            c.tuple = tuple_of(s);
            match c.tuple {
                Some(t) => {
                    self.tuple_index.insert(t, i);
                    self.adm.count_conn(t.2, true);
                }
                // Looked at again after the next poll, until known.
                None => self.dirty.push(c.handle),
            }
        }
        if touch && !c.touched {
            c.touched = true;
            self.touched.push(c.id);
        }
        if !c.zero_copy && c.closed_by_user && !c.ring_released && s.send_queue() == 0 {
            // Nothing more can be sent and everything sent was
            // acknowledged: the send ring goes back to the heap now
            // rather than after TIME-WAIT (new connections need it).
            let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
            c.ring_released = s.replace_tx_buffer(tcp::SocketBuffer::new(Vec::new())).is_ok();
        }
        // Forget connections the user closed once their socket is closed.
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if c.closed_by_user && s.state() == TcpState::Closed {
            return true;
        }
        if died_under_user(c, s) {
            self.stats.dead_conns_forgotten += 1;
            return true;
        }
        false
    }

    /// Removes connection `i` (its socket goes, its queued references are
    /// released): the last connection takes its index, and the indexes
    /// follow.
    fn forget(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        self.sockets.remove(c.handle);
        if !c.touched {
            self.touched.push(c.id);
        }
        self.conn_index.remove(&c.id);
        self.handle_index.remove(&c.handle);
        if let Some(t) = c.tuple {
            self.adm.count_conn(t.2, false);
        }
        if let Some(t) = c.tuple.filter(|t| self.tuple_index.get(t) == Some(&i)) {
            self.tuple_index.remove(&t);
        }
        if let Some(o) = in_time_wait(&c) {
            self.time_wait_set.remove(&(o, c.handle));
        }
        if let Some(m) = self.conns.get(i) {
            self.conn_index.insert(m.id, i);
            self.handle_index.insert(m.handle, i);
            if let Some(t) = m.tuple {
                self.tuple_index.insert(t, i);
            }
        }
    }

    /// Moves the connections that may have changed since the last call
    /// (see `touched`) into `into`; true if every connection must be
    /// looked at instead. What a connection's user has to do (deliver
    /// received data, move held-back sends into TCP, report a close) can
    /// only have become possible for these: the others need no visit.
    pub fn take_touched(&mut self, into: &mut Vec<ConnId>) -> bool {
        for &id in &self.touched {
            if let Some(&i) = self.conn_index.get(&id) {
                self.conns[i].touched = false;
            }
        }
        into.append(&mut self.touched);
        core::mem::take(&mut self.touched_all)
    }

    /// The last slice of an untrusted pool found stale on transmit since
    /// the last call (its segment was withheld and the connection reset;
    /// counted in `tx_stale_withheld`, `tx_stale_resets`).
    pub fn take_stale(&mut self) -> Option<SliceDesc> {
        self.last_stale.take()
    }

    /// Milliseconds until the stack wants [`NetStack::poll`] again (`None`:
    /// only when a frame arrives or the application acts).
    pub fn poll_delay(&mut self, now_ms: u64) -> Option<u64> {
        let tcp = self.iface.poll_delay(Instant::from_millis(now_ms as i64), &self.sockets).map(|d| d.total_millis());
        let syn = self.syn_recv_delay(now_ms);
        match (tcp, syn) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The stack's counters.
    pub fn stats(&self) -> NetStats {
        self.stats
    }

    /// The checksum cache's counters.
    pub fn checksum_cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Connections (accepted or connected, not yet forgotten).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Bytes the stack holds references to for unacknowledged or unsent
    /// data (zero-copy connections).
    pub fn held_send_bytes(&self) -> usize {
        self.conns.iter().map(|c| c.queue.len()).sum()
    }
}
