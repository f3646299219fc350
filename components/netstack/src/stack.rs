//! The stack: a smoltcp interface, its sockets, and the connections'
//! send queues of IO-Lite references.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use iolite::{Aggregate, BufMut, CopyMode, Domain, Error as IolError, PoolId, SliceDesc, PAGE_SIZE};
use smoltcp::iface::{Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{dhcpv4, tcp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{DhcpRepr, EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint, Ipv4Address, Ipv4Cidr};

use crate::admission::{Admission, Limits, PortRoom};
use crate::csum::{CacheStats, ChecksumCache};
use crate::device::Dev;
use crate::frame::NicPort;
use crate::{Config, ConnId, NetError, NetStats};

pub use smoltcp::socket::tcp::State as TcpState;

/// (local address, local port, remote address, remote port).
pub(crate) type Tuple = ([u8; 4], u16, [u8; 4], u16);

/// The bytes a connection has queued and not yet had acknowledged, as the
/// sender's aggregates (references, not copies), oldest first.
pub(crate) struct TxQueue<'d> {
    aggs: VecDeque<Aggregate<'d>>,
    len: usize,
}

impl<'d> TxQueue<'d> {
    pub(crate) fn new() -> Self {
        Self { aggs: VecDeque::new(), len: 0 }
    }

    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Aggregates held (each is up to 16 slices' worth of heap).
    pub fn entries(&self) -> usize {
        self.aggs.len()
    }

    /// Whether `a` can be queued within `max` entries (merged into the last
    /// one, or as a new one).
    fn fits(&self, a: &Aggregate<'d>, max: usize) -> bool {
        self.aggs.len() < max
            || self.aggs.back().is_some_and(|b| b.slice_count() + a.slice_count() <= iolite::MAX_SLICES)
    }

    pub(crate) fn push(&mut self, a: Aggregate<'d>) {
        self.len += a.len();
        // Small sends (pipelined responses of small files) share entries:
        // one aggregate holds up to 16 slices, whoever sent them.
        let a = match self.aggs.back_mut() {
            Some(b) if b.slice_count() + a.slice_count() <= iolite::MAX_SLICES => match b.append(a) {
                Ok(()) => return,
                Err((_, a)) => a,
            },
            _ => a,
        };
        self.aggs.push_back(a);
    }

    /// Drops the first `n` bytes (acknowledged), releasing their references.
    fn trim(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(front) = self.aggs.front_mut() else { break };
            if front.len() <= n {
                n -= front.len();
                self.aggs.pop_front();
            } else {
                // Cannot fail: n < len. On failure (never), keep the bytes
                // (they are only freed later) rather than lose track.
                if front.advance(n).is_err() {
                    self.len += n;
                }
                n = 0;
            }
        }
        // A queue that was long gives its memory back once it is short.
        if self.aggs.capacity() > 16 && self.aggs.len() * 4 < self.aggs.capacity() {
            self.aggs.shrink_to(self.aggs.len().max(8));
        }
    }

    /// A new aggregate referencing bytes `[off, off+len)` of the queue.
    pub fn range(&self, off: usize, len: usize) -> Result<Aggregate<'d>, IolError> {
        let mut out: Option<Aggregate<'d>> = None;
        let (mut pos, end) = (0usize, off + len);
        for a in &self.aggs {
            let (a_start, a_end) = (pos, pos + a.len());
            pos = a_end;
            if a_end <= off {
                continue;
            }
            if a_start >= end {
                break;
            }
            let from = off.max(a_start) - a_start;
            let to = end.min(a_end) - a_start;
            let part = a.range(from, to - from)?;
            out = Some(match out {
                None => part,
                Some(mut o) => {
                    o.append(part).map_err(|(e, _)| e)?;
                    o
                }
            });
        }
        match out {
            Some(o) if o.len() == len => Ok(o),
            _ => Err(IolError::InvalidArgument),
        }
    }

    /// The first slice in `[off, off + len)` of an untrusted pool whose
    /// owner no longer publishes it with the generation and sealed length
    /// it was queued with (`device::stale_slice`; whole aggregates that
    /// overlap the range are checked, which can only err towards a reset).
    pub fn stale_slice(&self, d: &Domain, off: usize, len: usize) -> Option<SliceDesc> {
        let end = off.saturating_add(len);
        let mut pos = 0usize;
        for a in &self.aggs {
            let (start, stop) = (pos, pos + a.len());
            pos = stop;
            if stop <= off {
                continue;
            }
            if start >= end {
                break;
            }
            if let Some(s) = crate::device::stale_slice(d, a) {
                return Some(s);
            }
        }
        None
    }

    /// Where to cut bytes `[off, off+len)` of the queue, a TCP segment of
    /// `len` bytes the NIC cuts into segments of `mss` bytes, into frames
    /// of at most `max` payload slices each: the ends of the pieces,
    /// relative to `off` (the last is `len`; just `[len]` when the range
    /// has no more than `max` slices). Every piece but the last is a
    /// multiple of `mss` long, so the NIC puts the same segments on the
    /// wire as from one frame; a piece is a single `mss` when that many
    /// bytes already span more than `max` slices (`gather` then coalesces
    /// it, as it would the segment without segmentation offload).
    pub fn tso_cuts(&self, off: usize, len: usize, max: usize, mss: usize) -> Vec<usize> {
        let (end, mss, max) = (off.saturating_add(len), mss.max(1), max.max(1));
        // Where each slice piece of the range starts, relative to `off`.
        let mut starts: Vec<usize> = Vec::new();
        let mut pos = 0usize;
        'outer: for a in &self.aggs {
            if pos + a.len() <= off {
                pos += a.len();
                continue;
            }
            for s in a.slices() {
                let (s_start, s_end) = (pos, pos + s.len());
                pos = s_end;
                if s_end <= off || s.is_empty() {
                    continue;
                }
                if s_start >= end {
                    break 'outer;
                }
                starts.push(s_start.max(off) - off);
            }
        }
        if starts.len() <= max {
            return alloc::vec![len];
        }
        let mut cuts = Vec::new();
        let (mut at, mut first) = (0usize, 0usize);
        while at < len {
            // Pieces `first..first + max` fit one frame: end at or before
            // where the next one starts, on a multiple of the MSS.
            let room = starts.get(first + max).map_or(len, |&s| s.min(len));
            let step = (room - at) / mss * mss;
            let next = if room >= len { len } else { (at + step.max(mss)).min(len) };
            cuts.push(next);
            at = next;
            while first + 1 < starts.len() && starts[first + 1] <= at {
                first += 1;
            }
        }
        cuts
    }

    /// Bytes `[off, off+len)` of the queue as an aggregate of at most `max`
    /// slices (`max >= 3`), and how many of its bytes were copied. By
    /// reference when the range has that few slices. Otherwise (many tiny
    /// aggregates, e.g. pipelined responses of small files) the `(max - 1) / 2`
    /// largest pieces stay references and each run of pieces between them is
    /// copied into one object of `pool`: the frame still carries exactly the
    /// queued bytes, whatever the number of slices.
    pub fn gather(
        &self,
        d: &'d Domain,
        off: usize,
        len: usize,
        max: usize,
        pool: PoolId,
    ) -> Result<(Aggregate<'d>, usize), IolError> {
        if let Ok(a) = self.range(off, len) {
            if a.slice_count() <= max {
                return Ok((a, 0));
            }
        }
        // (aggregate, offset in it, length) of every non-empty slice piece.
        let mut pieces: Vec<(usize, usize, usize)> = Vec::new();
        let (mut pos, end) = (0usize, off.checked_add(len).ok_or(IolError::InvalidArgument)?);
        'outer: for (i, a) in self.aggs.iter().enumerate() {
            let mut in_agg = 0usize;
            for s in a.slices() {
                let (s_start, s_end) = (pos, pos + s.len());
                pos = s_end;
                let at = in_agg;
                in_agg += s.len();
                if s_end <= off || s.is_empty() {
                    continue;
                }
                if s_start >= end {
                    break 'outer;
                }
                let from = off.max(s_start);
                pieces.push((i, at + (from - s_start), end.min(s_end) - from));
            }
        }
        if pieces.iter().map(|p| p.2).sum::<usize>() != len {
            return Err(IolError::InvalidArgument);
        }
        let keep_n = (max.max(3) - 1) / 2;
        let mut by_size: Vec<usize> = (0..pieces.len()).collect();
        by_size.sort_by(|&x, &y| pieces[y].2.cmp(&pieces[x].2));
        let mut keep = alloc::vec![false; pieces.len()];
        for &k in by_size.iter().take(keep_n) {
            keep[k] = true;
        }
        let mut out = Aggregate::new(d);
        let mut copied = 0usize;
        let mut k = 0;
        while k < pieces.len() {
            let part = if keep[k] {
                let (i, from, n) = pieces[k];
                k += 1;
                self.aggs[i].range(from, n)?
            } else {
                let run_end = (k..pieces.len()).find(|&j| keep[j]).unwrap_or(pieces.len());
                let run = &pieces[k..run_end];
                let run_len: usize = run.iter().map(|p| p.2).sum();
                let mut short = false;
                let obj = d.pack(pool, run_len, |buf| {
                    let mut at = 0;
                    for &(i, from, n) in run {
                        short |= self.aggs[i].read_at(from, &mut buf[at..at + n]) != n;
                        at += n;
                    }
                })?;
                if short {
                    return Err(IolError::InvalidArgument);
                }
                copied += run_len;
                k = run_end;
                obj
            };
            out.append(part).map_err(|(e, _)| e)?;
        }
        Ok((out, copied))
    }
}

/// One connection (an accepted or connected TCP socket).
pub(crate) struct Conn<'d> {
    pub id: ConnId,
    pub handle: SocketHandle,
    /// Zero-copy send (iolite mode): the socket holds lengths, `queue` the data.
    pub zero_copy: bool,
    /// (local address, local port, remote address, remote port).
    pub tuple: Option<([u8; 4], u16, [u8; 4], u16)>,
    /// Sequence number of `queue`'s first byte (set when the connection is
    /// made and after each poll, when the queue is trimmed to what is
    /// unacknowledged; nothing else moves it).
    pub seq_base: u32,
    /// Stream offset of `queue`'s first byte.
    pub front: u64,
    /// Highest stream offset transmitted so far (retransmission accounting).
    pub sent_hi: u64,
    pub queue: TxQueue<'d>,
    pub closed_by_user: bool,
    /// Copy modes: the send ring went back to the heap (closed by the user
    /// and everything acknowledged).
    pub ring_released: bool,
    /// A queued slice went stale (see `device::stale_slice`): the
    /// connection is reset after this poll.
    pub reset_stale: bool,
    /// In `NetStack::touched` (see there).
    pub touched: bool,
    /// Received data goes into `Config::hand_off_pool` (`set_hand_off`).
    pub hand_off: bool,
    /// The TCP state as of the end of the last poll (a change that no
    /// received segment caused, e.g. a timeout, still touches it).
    pub last_state: TcpState,
    /// When it entered TIME-WAIT (`NetStack::time_waits` then): the oldest
    /// go first when more wait than `Config::time_wait_cap`.
    pub time_wait_order: Option<u64>,
    /// The largest window the peer advertised so far: what sets the
    /// connection's slack (`NetStack::slack_of`).
    pub max_window: usize,
    /// The page small received chunks go into, one after another, until it
    /// is full (`NetStack::recv`): this connection's only, so what one
    /// connection holds never pins a page of another's bytes.
    pub rx_open: Option<BufMut<'d>>,
    /// In `NetStack::rx_open_list` (looked at by the sweep).
    pub rx_open_listed: bool,
    /// Buffers this connection's data was delivered in that may still be
    /// in use: (pool, buffer, generation, pages). Pruned as they are
    /// freed; what they add up to is bounded by `Config::rx_conn_pages`.
    pub rx_bufs: Vec<(PoolId, u32, u32, u32)>,
    /// In `NetStack::rx_paused`: its input waits in TCP for pages back.
    pub rx_paused: bool,
}

/// A DHCP lease as the server gave it ([`NetStack::take_dhcp_change`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DhcpLease {
    /// Our address and prefix length.
    pub address: ([u8; 4], u8),
    /// The default gateway (router option), if the server named one.
    pub gateway: Option<[u8; 4]>,
    /// The server that granted it.
    pub server: [u8; 4],
    /// The lease time in seconds (option 51 of the ACK), if present.
    pub lease_secs: Option<u32>,
}

/// What [`NetStack::recv`] found.
#[derive(Debug)]
pub enum Recv<'d> {
    /// Received bytes, in a fresh buffer of the stack's pool.
    Data(Aggregate<'d>),
    /// Nothing yet.
    WouldBlock,
    /// The peer closed its sending half, and everything was received.
    Eof,
}

struct Listener {
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

/// A zeroed ring of `n` bytes, or `None` if the heap cannot give it now
/// (instead of the allocator's abort, which takes the component down).
fn try_ring(n: usize) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, 0);
    Some(v)
}

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

/// Open receive pages the sweep looks at per poll.
const SWEEP_PER_POLL: usize = 16;

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

fn ipv4_of(a: IpAddress) -> Option<[u8; 4]> {
    #[allow(unreachable_patterns)]
    match a {
        IpAddress::Ipv4(v) => Some(v.octets()),
        _ => None,
    }
}

/// When a connection the user closed entered TIME-WAIT (its order), if
/// it did: the ones `Config::time_wait_cap` bounds.
/// Whether `c`'s socket `s` closed under its user (reset by the peer,
/// timed out, aborted for a stale slice) and the user has taken all it
/// received: nothing sent on it can reach anyone, so it is forgotten at
/// once, its queue's references go back and its user hears `Closed`. A
/// peer that pipelined large responses and reset must not have them
/// pulled (from a file cache, by reference) only to be refused here: it
/// used to stay until its user closed it, reading as end of input.
fn died_under_user(c: &Conn, s: &tcp::Socket) -> bool {
    !c.closed_by_user && s.state() == TcpState::Closed && s.recv_queue() == 0
}

fn in_time_wait(c: &Conn) -> Option<u64> {
    if c.closed_by_user {
        c.time_wait_order
    } else {
        None
    }
}

fn tuple_of(s: &tcp::Socket) -> Option<([u8; 4], u16, [u8; 4], u16)> {
    let (l, r) = (s.local_endpoint()?, s.remote_endpoint()?);
    Some((ipv4_of(l.addr)?, l.port, ipv4_of(r.addr)?, r.port))
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

    /// Bytes of socket rings allocated from the heap now: every receive
    /// ring, and in the copy modes every send ring (zero-copy sockets have
    /// none: their "ring" is a length).
    pub fn socket_memory(&self) -> usize {
        let copy = !self.zero_copy();
        self.sockets
            .iter()
            .filter_map(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => Some(t.recv_capacity() + if copy { t.send_capacity() } else { 0 }),
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .sum()
    }

    /// Bytes queued in send rings now: in the copy modes, copies of
    /// response data not yet acknowledged (what a conventional stack's
    /// socket buffers hold); 0 in iolite mode, where a socket's queue is
    /// references to the sender's pages (counted where those pages live).
    pub fn send_ring_bytes(&self) -> usize {
        if self.zero_copy() {
            return 0;
        }
        self.sockets
            .iter()
            .filter_map(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => Some(t.send_queue()),
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .sum()
    }

    /// Whether `n` more bytes of rings fit [`Config::socket_memory`].
    fn rings_fit(&self, n: usize) -> bool {
        self.socket_memory().saturating_add(n) <= self.cfg.socket_memory
    }

    /// A socket with its receive ring. In the copy modes its send ring only
    /// if `with_send_ring` (a connection); a listening socket gets it when
    /// accepted (`attach_send_ring`), so an idle backlog costs receive rings
    /// only. `None` if the rings do not fit the budget or the heap.
    fn new_socket(&self, with_send_ring: bool) -> Option<tcp::Socket<'static>> {
        let copy_ring = if self.zero_copy() || !with_send_ring { 0 } else { self.cfg.send_window };
        if !self.rings_fit(self.cfg.recv_window + copy_ring) {
            return None;
        }
        let rx = tcp::SocketBuffer::new(try_ring(self.cfg.recv_window)?);
        let mut s = if self.zero_copy() {
            tcp::Socket::new_zero_copy_tx(rx, self.cfg.send_window)
        } else {
            tcp::Socket::new(rx, tcp::SocketBuffer::new(try_ring(copy_ring)?))
        };
        s.set_nagle_enabled(self.cfg.nagle);
        s.set_timeout(Some(Duration::from_secs(60)));
        Some(s)
    }

    /// Copy modes: gives an accepted socket its send ring. False if it does
    /// not fit the budget or the heap now.
    fn attach_send_ring(&mut self, h: SocketHandle) -> bool {
        let s = self.sockets.get::<tcp::Socket>(h);
        let size = self.copy_ring_for(s.remote_window());
        if self.zero_copy() || s.send_capacity() >= size {
            return true;
        }
        if !self.rings_fit(size) {
            return false;
        }
        let Some(ring) = try_ring(size) else { return false };
        // Cannot fail: nothing can have been queued on an unaccepted socket.
        self.sockets.get_mut::<tcp::Socket>(h).replace_tx_buffer(tcp::SocketBuffer::new(ring)).is_ok()
    }

    /// Tops listeners' backlogs up to what was asked, as memory allows.
    fn refill_listeners(&mut self) {
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

    /// The IPv4 address in use (static, or from DHCP), if any.
    pub fn address(&self) -> Option<[u8; 4]> {
        self.iface.ipv4_addr().map(|a| a.octets())
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

    /// Bytes that [`NetStack::send`] can take on `id` now.
    pub fn send_space(&self, id: ConnId) -> Result<usize, NetError> {
        let c = &self.conns[self.conn(id)?];
        Ok(self.space_of(c, self.sockets.get::<tcp::Socket>(c.handle)))
    }

    /// Whether a client that has used up its send allowance on `id` is
    /// worth waking with the space there is now: half of what the
    /// connection may hold is free, it cannot send any more (the client
    /// must learn that), or acknowledgements do not bring a visit
    /// (`NetStack::take_touched` reports freed space for zero-copy
    /// connections only). Told earlier, a client would be woken for each
    /// acknowledgement's few KiB: at 1 MiB per response that was 25
    /// wake-ups of httpd, each an address-space switch each way. Told
    /// later, what stays queued (the other half) keeps the wire busy
    /// meanwhile.
    pub fn send_space_worth_telling(&self, id: ConnId) -> bool {
        let Ok(i) = self.conn(id) else { return true };
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if !c.zero_copy || !s.may_send() {
            return true;
        }
        let limit = s.remote_window().saturating_add(self.slack_of(c, s)).min(s.send_capacity());
        self.space_of(c, s).saturating_mul(2) >= limit
    }

    /// What a socket may take: its send capacity, and no more than the
    /// peer's advertised window plus the connection's slack queued in all
    /// (unacknowledged and unsent). A peer that stops reading (zero window)
    /// so holds at most the slack of the sender's buffers, whatever the
    /// sender has to send; the rest waits with the sender (back-pressure).
    fn space_of(&self, c: &Conn<'d>, s: &tcp::Socket) -> usize {
        let limit = s.remote_window().saturating_add(self.slack_of(c, s)).min(s.send_capacity());
        limit.saturating_sub(s.send_queue())
    }

    /// A connection's slack: four times the largest window its peer advertised,
    /// within `Config::min_send_slack..=Config::send_slack`. The slack is
    /// there so that data is ready when the window opens, and a window
    /// opens by at most its largest size per round trip: a peer that reads
    /// through a 2 KiB buffer needs a few KiB ready, not 64, and hundreds
    /// of such peers must not pin the file cache (each pins its window
    /// plus this).
    fn slack_of(&self, c: &Conn<'d>, s: &tcp::Socket) -> usize {
        self.slack_for(c.max_window.max(s.remote_window()))
    }

    /// The slack for a peer whose largest window is `window`.
    fn slack_for(&self, window: usize) -> usize {
        window.saturating_mul(4).clamp(self.cfg.min_send_slack.min(self.cfg.send_slack), self.cfg.send_slack)
    }

    /// Copy modes: the send ring for a peer whose largest window is
    /// `window`: what it may hold (the window and its slack) as a power of
    /// two, within 16 KiB and `Config::send_window`. A peer that reads
    /// through a small window so costs a small ring, as Linux sizes socket
    /// buffers by what a connection needs: with every ring at the full
    /// window, 64 slow readers took the whole `socket_memory` and new
    /// connections waited in the backlog for them.
    fn copy_ring_for(&self, window: usize) -> usize {
        let want = window.saturating_add(self.slack_for(window)).next_power_of_two();
        want.max(16 * 1024).min(self.cfg.send_window)
    }

    /// Whether [`NetStack::send`] on `id` could succeed given room: the
    /// connection exists, is not closed by the user and TCP may send.
    pub fn may_send(&self, id: ConnId) -> bool {
        self.conn(id).is_ok_and(|i| {
            let c = &self.conns[i];
            !c.closed_by_user && self.sockets.get::<tcp::Socket>(c.handle).may_send()
        })
    }

    /// Aggregates the send queue of `id` holds (heap use; bounded by
    /// `Config::max_queued`).
    pub fn send_queue_entries(&self, id: ConnId) -> Result<usize, NetError> {
        Ok(self.conns[self.conn(id)?].queue.entries())
    }

    /// Bytes queued on `id` and not yet acknowledged.
    pub fn send_queued(&self, id: ConnId) -> Result<usize, NetError> {
        let c = &self.conns[self.conn(id)?];
        Ok(self.sockets.get::<tcp::Socket>(c.handle).send_queue())
    }

    /// Sends an aggregate on `id`, all or nothing. In iolite mode the stack
    /// keeps the aggregate's references until the bytes are acknowledged (no
    /// byte is copied); in flash/posix mode it copies the bytes into the
    /// socket's send ring (counted) and releases the aggregate at once. The
    /// aggregate is handed back on failure (`WouldBlock`: not enough space).
    pub fn send(&mut self, id: ConnId, agg: Aggregate<'d>) -> Result<(), (NetError, Aggregate<'d>)> {
        let i = match self.conn(id) {
            Ok(i) => i,
            Err(e) => return Err((e, agg)),
        };
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if c.closed_by_user || !s.may_send() {
            return Err((NetError::NotConnected, agg));
        }
        let n = agg.len();
        if n == 0 {
            return Ok(());
        }
        if !c.zero_copy && s.send_queue() == 0 {
            // The peer's window grew beyond what its ring was sized for:
            // a larger ring, while nothing is queued in the old one.
            let (have, want) = (s.send_capacity(), self.copy_ring_for(c.max_window.max(s.remote_window())));
            if want > have && self.rings_fit(want - have) {
                if let Some(ring) = try_ring(want) {
                    let h = c.handle;
                    let _ = self.sockets.get_mut::<tcp::Socket>(h).replace_tx_buffer(tcp::SocketBuffer::new(ring));
                }
            }
        }
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if self.space_of(c, s) < n || (c.zero_copy && !c.queue.fits(&agg, self.cfg.max_queued)) {
            return Err((NetError::WouldBlock, agg));
        }
        let c = &mut self.conns[i];
        self.dirty.push(c.handle);
        let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
        if c.zero_copy {
            match s.send_virtual(n) {
                Ok(k) if k == n => {}
                _ => return Err((NetError::NotConnected, agg)),
            }
            c.queue.push(agg);
        } else {
            for bytes in agg.slices() {
                let k = s.send_slice(bytes).unwrap_or(0);
                self.d.count_copy(k);
                self.stats.tx_payload_copied_socket += k as u64;
            }
        }
        Ok(())
    }

    /// Receives up to `max` bytes from `id` as an aggregate in the
    /// stack's receive pool. smoltcp copied them from the frame into its
    /// receive ring, and they are copied once more into the buffer; both
    /// copies are counted.
    ///
    /// Pages, not only bytes, are bounded: a chunk smaller than a page goes
    /// into the connection's open page after the chunks before it (counted
    /// in `rx_coalesced_bytes`), so a peer sending one byte per segment
    /// costs a page per 4096 bytes, not one per byte; a larger chunk gets
    /// whole pages of its own. When the pages the connection's unreleased
    /// data keeps in use reach [`Config::rx_conn_pages`], its input stays
    /// in TCP (`WouldBlock`; `rx_paused_conn_pages`): the window closes on
    /// the peer, and the connection is touched again once pages are back.
    pub fn recv(&mut self, id: ConnId, max: usize) -> Result<Recv<'d>, NetError> {
        let i = self.conn(id)?;
        // Looked at through `get` first: taking nothing changes nothing (see
        // `after_poll`).
        let s = self.sockets.get::<tcp::Socket>(self.conns[i].handle);
        let n = s.recv_queue().min(max);
        if n == 0 {
            return Ok(if s.may_recv() || s.state() == TcpState::SynSent || s.state() == TcpState::SynReceived {
                Recv::WouldBlock
            } else {
                Recv::Eof
            });
        }
        // A connection handed off receives into the hand-off pool; when
        // that is full, into the shared pool (its client copies those
        // bytes on) rather than keep them waiting: a client may be
        // holding the hand-off pool for bytes it waits to complete. Either
        // way within the connection's share of pages.
        let hand_off = self.conns[i].hand_off.then_some(self.cfg.hand_off_pool).flatten();
        let open_pool = self.conns[i].rx_open.as_ref().map(|b| b.id().0);
        let open_room = self.conns[i].rx_open.as_ref().map_or(0, |b| b.remaining());
        let wanted = hand_off.unwrap_or(self.cfg.rx_pool);
        // The open page goes on being filled if it is in the pool wanted
        // (or in the shared pool the hand-off fell back to) and has room.
        let use_open = open_room > 0 && (open_pool == Some(wanted) || open_pool == Some(self.cfg.rx_pool));
        if !use_open {
            // It is full or in the other pool: given up (its pages go back
            // once the client has released what is in them).
            self.conns[i].rx_open = None;
        }
        let room = if use_open { None } else { Some(self.rx_pages_room(i)) };
        if room == Some(0) {
            if !self.conns[i].rx_paused {
                self.conns[i].rx_paused = true;
                self.rx_paused.push(id);
                self.stats.rx_paused_conn_pages += 1;
            }
            return Ok(Recv::WouldBlock);
        }
        self.dirty.push(self.conns[i].handle);
        let (got, agg, pool) = if use_open {
            let c = &mut self.conns[i];
            let b = c.rx_open.as_mut().expect("open page");
            let k = n.min(open_room);
            let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
            let got = s.recv_slice(&mut b.writable()[..k]).unwrap_or(0);
            let agg = b.seal_part(got).map_err(NetError::Iolite)?;
            let pool = b.id().0;
            if b.remaining() == 0 {
                c.rx_open = None;
            }
            self.stats.rx_coalesced_bytes += got as u64;
            (got, agg, pool)
        } else {
            let room = room.unwrap_or(1);
            // Whole pages for a chunk of a page or more (at most the share
            // left; the rest waits in TCP for the next call); a smaller one
            // opens a page that the next small chunks fill.
            let (len, open) = if n >= PAGE_SIZE { ((n / PAGE_SIZE).min(room) * PAGE_SIZE, false) } else { (n, true) };
            let mut b = match hand_off.map(|pool| self.d.alloc(pool, len)) {
                Some(Ok(b)) => b,
                _ => self.d.alloc(self.cfg.rx_pool, len).map_err(NetError::Iolite)?,
            };
            let (pool, buf, gen) = b.id();
            let pages = b.remaining().div_ceil(PAGE_SIZE) as u32;
            let c = &mut self.conns[i];
            c.rx_bufs.push((pool, buf, gen, pages));
            let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
            let got = s.recv_slice(&mut b.writable()[..len]).unwrap_or(0);
            let agg = if open && got < b.remaining() {
                let agg = b.seal_part(got).map_err(NetError::Iolite)?;
                c.rx_open = Some(b);
                if !c.rx_open_listed {
                    c.rx_open_listed = true;
                    self.rx_open_list.push_back(id);
                }
                agg
            } else {
                b.seal(got).map_err(|(e, _)| NetError::Iolite(e))?
            };
            (got, agg, pool)
        };
        self.d.count_copy(2 * got);
        self.stats.rx_payload_copied += 2 * got as u64;
        self.stats.rx_payload += got as u64;
        if hand_off == Some(pool) {
            self.stats.rx_hand_off += got as u64;
        } else if hand_off.is_some() {
            self.stats.rx_hand_off_fallback += got as u64;
        }
        Ok(Recv::Data(agg))
    }

    /// Pages connection `i` may still take for received data within
    /// [`Config::rx_conn_pages`].
    fn rx_pages_room(&mut self, i: usize) -> usize {
        self.cfg.rx_conn_pages.max(1).saturating_sub(self.rx_held_at(i))
    }

    /// Pages connection `i`'s delivered buffers still in use take (the
    /// freed ones are forgotten here).
    fn rx_held_at(&mut self, i: usize) -> usize {
        let d = self.d;
        let c = &mut self.conns[i];
        c.rx_bufs.retain(|&(pool, buf, gen, _)| d.published(pool, buf).is_ok_and(|(g, _)| g == gen));
        c.rx_bufs.iter().map(|b| b.3 as usize).sum()
    }

    /// Pages of the receive pools connection `id`'s delivered data keeps
    /// in use now (its open page included).
    pub fn rx_pages_held(&mut self, id: ConnId) -> Result<usize, NetError> {
        let i = self.conn(id)?;
        Ok(self.rx_held_at(i))
    }

    /// Whether some connection's input waits for its client to give
    /// received pages back: the caller should be woken by the client's
    /// releases (and poll then).
    pub fn rx_waiting_for_pages(&self) -> bool {
        !self.rx_paused.is_empty()
    }

    /// After a poll: open pages nothing but their writer holds any more
    /// go back to the pool (a few per poll, in turn), and connections
    /// whose input waited for pages are touched once they have room.
    fn sweep_rx(&mut self) {
        for _ in 0..SWEEP_PER_POLL.min(self.rx_open_list.len()) {
            let Some(id) = self.rx_open_list.pop_front() else { break };
            let Some(&i) = self.conn_index.get(&id) else { continue };
            let c = &mut self.conns[i];
            let Some((pool, buf, _)) = c.rx_open.as_ref().map(|b| b.id()) else {
                c.rx_open_listed = false;
                continue;
            };
            let idle = self.d.holds(pool, buf).is_ok_and(|h| h.local <= 1 && h.lent == 0);
            if idle {
                c.rx_open = None;
                c.rx_open_listed = false;
                self.stats.rx_open_pages_swept += 1;
            } else {
                self.rx_open_list.push_back(id);
            }
        }
        let mut k = 0;
        while k < self.rx_paused.len() {
            let id = self.rx_paused[k];
            let Some(&i) = self.conn_index.get(&id) else {
                self.rx_paused.swap_remove(k);
                continue;
            };
            if self.rx_pages_room(i) == 0 {
                k += 1;
                continue;
            }
            self.rx_paused.swap_remove(k);
            let c = &mut self.conns[i];
            c.rx_paused = false;
            if !c.touched {
                c.touched = true;
                self.touched.push(id);
            }
        }
    }

    /// Receives `id`'s data from now on into the hand-off pool (`on`) or
    /// the shared receive pool (see `Config::hand_off_pool`). Data already
    /// received stays where it is.
    pub fn set_hand_off(&mut self, id: ConnId, on: bool) -> Result<(), NetError> {
        if on && self.cfg.hand_off_pool.is_none() {
            return Err(NetError::InvalidArgument);
        }
        let i = self.conn(id)?;
        self.conns[i].hand_off = on;
        Ok(())
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

    /// The listeners' backlogs as a poll starts, for the device layer's
    /// admission (`Dev::admit`): per port its free (LISTEN), half-open
    /// (SYN-RECEIVED) and established sockets, per remote address what it
    /// holds there, and their 4-tuples. A SYN received this poll moves
    /// the counts.
    fn measure_backlogs(&mut self) {
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
    fn make_cookie_sockets(&mut self) {
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
    fn tend_listeners(&mut self) {
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
                gone.push(i);
            } else if died_under_user(c, s) {
                self.stats.dead_conns_forgotten += 1;
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
        // DHCP.
        if let Some(h) = self.dhcp {
            match self.sockets.get_mut::<dhcpv4::Socket>(h).poll() {
                Some(dhcpv4::Event::Configured(c)) => {
                    let addr = c.address;
                    let router = c.router;
                    let lease_secs = c.packet.and_then(|p| DhcpRepr::parse(&p).ok().and_then(|r| r.lease_duration));
                    self.dhcp_change = Some(Some(DhcpLease {
                        address: (addr.address().octets(), addr.prefix_len()),
                        gateway: router.map(|r| r.octets()),
                        server: c.server.address.octets(),
                        lease_secs,
                    }));
                    self.iface.update_ip_addrs(|a| {
                        a.clear();
                        let _ = a.push(IpCidr::Ipv4(addr));
                    });
                    match router {
                        Some(r) => {
                            let _ = self.iface.routes_mut().add_default_ipv4_route(r);
                        }
                        None => {
                            self.iface.routes_mut().remove_default_ipv4_route();
                        }
                    }
                    self.stats.dhcp_leases += 1;
                }
                Some(dhcpv4::Event::Deconfigured) => {
                    // smoltcp also reports this once at the start, when
                    // there was no lease to lose.
                    if self.iface.ipv4_addr().is_some() {
                        self.dhcp_change = Some(None);
                    }
                    self.iface.update_ip_addrs(|a| a.clear());
                    self.iface.routes_mut().remove_default_ipv4_route();
                }
                None => {}
            }
        }
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

    /// The DHCP lease obtained (or renewed: `Some(lease)`) or lost
    /// (`None`) since the last call, if anything changed.
    pub fn take_dhcp_change(&mut self) -> Option<Option<DhcpLease>> {
        self.dhcp_change.take()
    }

    /// Milliseconds until the stack wants [`NetStack::poll`] again (`None`:
    /// only when a frame arrives or the application acts).
    pub fn poll_delay(&mut self, now_ms: u64) -> Option<u64> {
        let tcp = self.iface.poll_delay(Instant::from_millis(now_ms as i64), &self.sockets).map(|d| d.total_millis());
        // The first SYN-RECEIVED socket to time out (`tend_listeners`).
        let timeout = self.cfg.syn_recv_timeout_ms;
        let half_open = self.listeners.iter().flat_map(|l| l.half_open_since.values()).min();
        let syn = half_open.map(|&since| since.saturating_add(timeout).saturating_sub(now_ms));
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

#[cfg(test)]
mod tests {
    use super::TxQueue;
    use crate::tests::{domain, pattern, APP};
    use alloc::vec::Vec;
    use iolite::Trust;

    /// Whatever the slices, the cuts tile the range, every piece but the
    /// last is a multiple of the MSS, and a piece spans at most `max`
    /// slices unless it is a single MSS (which then is coalesced).
    #[test]
    fn tso_cuts_tile_the_range_in_mss_multiples_of_few_slices() {
        let d = domain(4096, Trust::Trusted);
        let mut x = 5u32;
        let mut next = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        for round in 0..40 {
            let mut q = TxQueue::new();
            // Slices of 1..=4 bytes, of about a pipelined response, or of
            // pages, depending on the round.
            let most = [4, 300, 4096][round % 3];
            let mut sizes = Vec::new();
            while q.len() < 67_000 {
                let n = 1 + next(most) as usize;
                // One byte more than sent, so that neighbours in a page
                // stay slices of their own.
                let obj = d.pack(APP, n + 1, |b| b.copy_from_slice(&pattern(n + 1, round as u32))).unwrap();
                q.push(obj.range(0, n).unwrap());
                sizes.push(n);
            }
            let starts: Vec<usize> = sizes.iter().scan(0, |p, &n| Some(core::mem::replace(p, *p + n))).collect();
            let (max, mss) = (15, [1460, 1448, 536][round % 3]);
            let off = next(1000) as usize;
            let len = 1 + next(65_000) as usize;
            let cuts = q.tso_cuts(off, len, max, mss);
            assert_eq!(*cuts.last().unwrap(), len);
            let mut at = 0;
            for (k, &end) in cuts.iter().enumerate() {
                assert!(end > at, "round {round}: cuts increase");
                if k + 1 < cuts.len() {
                    assert_eq!((end - at) % mss, 0, "round {round}: piece {k} of {} bytes", end - at);
                }
                // Slices the piece [off + at, off + end) touches.
                let (a, b) = (off + at, off + end);
                let touched = starts.iter().zip(&sizes).filter(|&(&s, &n)| s < b && s + n > a).count();
                assert!(touched <= max || end - at == mss.min(len - at), "round {round}: {touched} slices");
                at = end;
            }
            if starts.iter().zip(&sizes).filter(|&(&s, &n)| s < off + len && s + n > off).count() <= max {
                assert_eq!(cuts, [len], "round {round}: few slices, one piece");
            }
        }
    }
}
