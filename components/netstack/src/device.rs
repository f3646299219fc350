//! smoltcp's `Device` over a [`NicPort`]: where frames become aggregates.
//!
//! Transmit, zero-copy (iolite mode): smoltcp writes a frame into a scratch
//! buffer; for a segment of a zero-copy socket it writes the headers only
//! (the patched `TcpRepr::emit` skips the payload). The device layer parses
//! the headers, finds the connection by its 4-tuple and the payload's stream
//! offset by `seq - send_seq_base`, and builds the frame as an aggregate:
//! the headers copied into a small object of the stack's pool (header bytes
//! only), then the payload range of the connection's send queue, by
//! reference. Retransmissions map to the same stream range, hence to the same
//! slices. It then completes the TCP checksum: in software from the
//! pseudo-header, the header and the per-slice cached sums
//! ([`ChecksumCache`]), or by asking the NIC ([`TxOffload`]).
//!
//! Transmit, copy modes (flash/posix): smoltcp copies the payload from its
//! socket ring straight into a frame buffer of the stack's pool (the
//! driver's TX buffer), as a conventional stack does; counted.
//!
//! TCP segmentation offload (`Config::tso`, where the NIC offers it): the
//! capabilities tell smoltcp the device takes TCP/IPv4 frames of up to
//! [`TSO_MAX_FRAME`] bytes, so a segment may carry up to 64 KiB (within
//! the peer's window, the congestion window and what is queued); smoltcp
//! then gives the MSS in the packet's metadata (`TxToken::set_meta`). Such
//! a frame is built as any other (by reference in iolite mode, copied in
//! the copy modes) and goes to the NIC as one [`TxOffload::Tso`] request:
//! the IPv4 header checksum 0 and the pseudo-header sum without its length
//! in the TCP checksum field, which the e1000 completes per segment. No
//! payload byte is summed for it.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::num::NonZeroUsize;
use iolite::{Aggregate, Domain, PoolId, SliceDesc, Trust, MAX_SLICES, PAGE_SIZE};
use nic_api::{Tso, TSO_MAX_FRAME};
use smoltcp::iface::SocketHandle;
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium, PacketMeta};
use smoltcp::time::Instant;

use smoltcp::socket::tcp::CookieHandshake;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpAddress, IpEndpoint, IpProtocol, Ipv4Address, Ipv4Packet,
    Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

use crate::admission::Admission;
use crate::csum::{self, ChecksumCache, Sum};
use crate::frame::{parse_tcp, NicPort, TcpFrame, TxFrame, TxOffload, ETH_HDR, PROTO_TCP};
use crate::stack::{Conn, Tuple};
use crate::{ConnId, NetStats, TxChecksum};

/// Everything the device layer touches during one `Interface::poll`.
pub(crate) struct Dev<'a, 'd, P: NicPort<'d>> {
    pub d: &'d Domain,
    pub port: &'a mut P,
    pub pool: PoolId,
    pub zero_copy: bool,
    pub checksum: TxChecksum,
    pub mtu: usize,
    /// The NIC cuts TCP segments (see the module docs).
    pub tso: bool,
    pub conns: &'a mut [Conn<'d>],
    /// 4-tuple → index in `conns`.
    pub tuples: &'a BTreeMap<Tuple, usize>,
    pub cache: &'a mut ChecksumCache,
    pub stats: &'a mut NetStats,
    pub scratch: &'a mut Vec<u8>,
    /// Set when smoltcp was refused a transmit token (NIC queue or frame
    /// pool full): it keeps the segments and emits them on a later poll, so
    /// the owner must poll again once the driver gives buffers back.
    pub blocked: bool,
    /// The last stale slice found this poll (for the owner's report).
    pub stale: Option<SliceDesc>,
    /// Connections a received segment is for (`NetStack::touched`), and
    /// whether a frame could not be attributed.
    pub touched: &'a mut Vec<ConnId>,
    pub touched_all: &'a mut bool,
    /// The sockets of the connections received segments are for, and
    /// whether a frame could not be attributed: what `NetStack::poll`
    /// looks at afterwards besides what smoltcp dispatched.
    pub dirty: &'a mut Vec<SocketHandle>,
    pub dirty_all: bool,
    /// The index of the connection the last frame was for: a burst is one
    /// connection's, and the 4-tuple index is deep with hundreds of them.
    pub last_conn: Option<usize>,
    /// Connection requests: per listened port, the backlog's sockets this
    /// poll (see `admit`), the per-address budgets, SYN cookies.
    pub adm: &'a mut Admission<'d>,
    /// Our MAC address (the source of SYN-ACKs made for cookies).
    pub mac: [u8; 6],
    /// Our IPv4 address, if any: only SYNs for it are answered with cookies.
    pub addr: Option<[u8; 4]>,
    /// The receive window of a socket (what a cookie's SYN-ACK advertises,
    /// at most 65535: it offers no window scaling).
    pub recv_window: usize,
}

/// What becomes of a received TCP segment (`Dev::admit`).
enum Verdict {
    /// smoltcp takes it.
    Pass,
    /// Dropped (counted), or answered with a SYN cookie.
    Consumed,
    /// The ACK of a good cookie: its socket is made after the poll.
    Cookie(CookieHandshake),
    /// A later segment of a connection whose cookie ACK waits for its
    /// socket: smoltcp gets it after that ACK (`cookie_followers`).
    Follows,
}

/// The fields of an Ethernet/IPv4/TCP frame that cookies need, its
/// checksums verified (smoltcp's parsers): the sender's MAC address, and
/// the IPv4 and TCP headers. `None` for anything else, a fragment among
/// them.
fn parse_checked(bytes: &[u8]) -> Option<(EthernetAddress, Ipv4Repr, TcpRepr<'_>)> {
    let caps = ChecksumCapabilities::default();
    let eth = EthernetFrame::new_checked(bytes).ok()?;
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.more_frags() || ip.frag_offset() != 0 {
        return None;
    }
    let ipr = Ipv4Repr::parse(&ip, &caps).ok()?;
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    let (src, dst) = (IpAddress::Ipv4(ipr.src_addr), IpAddress::Ipv4(ipr.dst_addr));
    let tr = TcpRepr::parse(&tcp, &src, &dst, &caps).ok()?;
    Some((eth.src_addr(), ipr, tr))
}

/// Whether `a` may be the source of a connection: not unspecified,
/// broadcast, multicast or loopback (no SYN-ACK goes to such an address).
fn unicast_source(a: [u8; 4]) -> bool {
    let ip = Ipv4Address::from(a);
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback())
}

/// Pages of the stack's pool that segments smoltcp sends on its own (data,
/// ACKs, retransmissions) leave free, so that the replies it makes to
/// received frames (ACKs, RSTs, ARP) still find room. A port should likewise
/// accept some frames beyond what `can_transmit` admits (see `NicPort`).
pub(crate) const REPLY_RESERVE_PAGES: u32 = 4;

/// Where a zero-copy segment's payload comes from.
enum Payload<'d> {
    /// No payload (or not a TCP frame).
    Empty,
    /// The connection's queued bytes (references, and how many of them were
    /// coalesced into a copy).
    Attached(Aggregate<'d>, usize),
    /// A segment for the NIC to cut whose bytes span more slices than a
    /// frame takes: sent as several frames ([`Part`]s), each by reference.
    Split(Vec<Part<'d>>),
    /// smoltcp wrote the octets into the frame itself (keep-alive).
    Written,
    /// Octets nobody wrote: the frame must not be sent.
    Unmapped,
    /// The range holds a slice of an untrusted pool whose page its owner
    /// reused: the frame must not be sent, and the connection is reset.
    Stale,
}

/// One frame's share of a segment sent as several (`Payload::Split`).
struct Part<'d> {
    /// Its first byte's offset in the segment's payload.
    at: usize,
    /// Its payload, and how many bytes of it were coalesced into a copy.
    agg: Aggregate<'d>,
    copied: usize,
}

/// A zero-copy frame's payload, found.
enum Body<'d> {
    /// One frame's (`Payload::Attached`).
    One(Aggregate<'d>, usize),
    /// Several frames' (`Payload::Split`).
    Split(Vec<Part<'d>>),
}

/// A received frame.
pub(crate) struct Rx<'d> {
    agg: Aggregate<'d>,
}

/// Permission to transmit one frame.
pub(crate) struct Tx<'b, 'a, 'd, P: NicPort<'d>> {
    dev: &'b mut Dev<'a, 'd, P>,
    /// The MSS smoltcp asks the NIC to cut the frame by (segmentation
    /// offload), from the packet's metadata.
    mss: Option<usize>,
}

impl<'a, 'd, P: NicPort<'d>> phy::Device for Dev<'a, 'd, P> {
    type RxToken<'b>
        = Rx<'d>
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b, 'a, 'd, P>
    where
        Self: 'b;

    fn receive(&mut self, _t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        // Always take received frames, even when transmit room is short:
        // they carry the ACKs that free send windows, and a frame left with
        // the driver makes it drop the ones behind it (its channel to us is
        // sized for one batch). The reply token may then find no room (its
        // frame is dropped and counted in `tx_dropped`); replies carry no
        // data (ACKs, RSTs, ARP), and `REPLY_RESERVE_PAGES` plus the NIC
        // port's slack make that rare.
        loop {
            // The ACKs of cookies whose sockets were just made go first
            // (they were received already).
            let agg = match self.adm.inject.pop_front() {
                Some(agg) => agg,
                None => {
                    let agg = self.port.receive()?;
                    self.stats.rx_frames += 1;
                    agg
                }
            };
            match agg.contiguous().map(|bytes| parse_tcp(bytes, bytes.len())) {
                Some(Some(t)) => {
                    match self.admit(&agg, &t) {
                        Verdict::Pass => {}
                        Verdict::Consumed => continue,
                        Verdict::Cookie(h) => {
                            self.adm.cookie_acks.push((agg, h));
                            continue;
                        }
                        Verdict::Follows => {
                            self.adm.cookie_followers.push(agg);
                            continue;
                        }
                    }
                    self.touch(&t);
                }
                // Not TCP/IPv4 (ARP, ICMP, garbage): for no connection.
                Some(None) => {}
                None => {
                    // Flattened by the token below (a copy of the whole frame).
                    self.stats.rx_frame_bytes_flattened += agg.len() as u64;
                    *self.touched_all = true;
                    self.dirty_all = true;
                }
            }
            return Some((Rx { agg }, Tx { dev: self, mss: None }));
        }
    }

    fn transmit(&mut self, _t: Instant) -> Option<Self::TxToken<'_>> {
        // Refuse rather than accept a frame we might have to drop: smoltcp
        // then keeps the segment (its state does not advance) and sends it on
        // a later poll. A dropped segment would only be sent again after a
        // retransmission timeout (seconds), which is what made the copy
        // modes collapse when their frame pool filled up.
        if self.tx_room(REPLY_RESERVE_PAGES) {
            Some(Tx { dev: self, mss: None })
        } else {
            self.blocked = true;
            self.stats.tx_deferred += 1;
            None
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.mtu, self.tso)
    }
}

/// The device's capabilities as smoltcp sees them. smoltcp's `Interface`
/// reads them once, when it is made (`NetStack::new`, from a stand-in
/// device), not from the device of each poll: both must give these.
pub(crate) fn capabilities(mtu: usize, tso: bool) -> DeviceCapabilities {
    let mut c = DeviceCapabilities::default();
    c.medium = Medium::Ethernet;
    c.max_transmission_unit = mtu;
    let mut cs = ChecksumCapabilities::default();
    // smoltcp verifies received TCP checksums but computes none on
    // transmit: the device layer does (cache or NIC offload). Computing it
    // anyway would sum every frame's payload area for nothing (in iolite
    // mode an area smoltcp never wrote), since the device layer overwrites
    // the field.
    cs.tcp = Checksum::Rx;
    c.checksum = cs;
    // Segmentation offload: TCP/IPv4 frames up to TSO_MAX_FRAME bytes
    // (Ethernet header included), cut by the NIC.
    c.segmentation.tcpv4 = NonZeroUsize::new(TSO_MAX_FRAME).filter(|_| tso);
    c
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match self.agg.contiguous() {
            Some(bytes) => f(bytes),
            None => {
                // A driver hands over one slice per frame; anything else is
                // flattened (counted in `rx_frame_bytes_flattened`, and by
                // `read_at` in the domain's copies).
                let mut v = alloc::vec![0u8; self.agg.len()];
                self.agg.read_at(0, &mut v);
                f(&v)
            }
        }
    }
}

impl<'d, P: NicPort<'d>> phy::TxToken for Tx<'_, '_, 'd, P> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        if self.dev.zero_copy {
            self.dev.emit_zero_copy(len, f, self.mss)
        } else {
            self.dev.emit_copy(len, f, self.mss)
        }
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        // Only where the capabilities offered it (smoltcp sets it only then).
        self.mss = meta.segmentation_offload_size.map(|m| usize::from(m.get())).filter(|_| self.dev.tso);
    }
}

/// Writes the TCP checksum field (or prepares it for offload) of a frame
/// whose headers are `frame[..payload_off]`; `payload` is its payload sum
/// (not asked for when the NIC computes the checksum). With `mss` (smoltcp
/// asked for segmentation), the frame becomes a TSO request: the IPv4
/// header checksum 0 and the pseudo-header sum without its length in the
/// TCP checksum field (the NIC adds each segment's length, and computes
/// the IPv4 header checksum of each). `None`: a TSO request the NIC could
/// not carry out (headers or MSS out of its bounds); the frame must not be
/// sent.
fn finish_tcp_checksum(
    frame: &mut [u8],
    t: &TcpFrame,
    mode: TxChecksum,
    mss: Option<usize>,
    payload: impl FnOnce() -> Sum,
) -> Option<TxOffload> {
    let field = t.tcp_off + 16;
    if let Some(mss) = mss {
        let tso = Tso::new(t.tcp_off, t.payload_off, mss).filter(|_| t.ip_off == nic_api::TSO_IP_START)?;
        frame[t.ip_off + 10..t.ip_off + 12].copy_from_slice(&[0, 0]);
        let seed = csum::pseudo_header_v4(t.src, t.dst, PROTO_TCP, 0);
        frame[field..field + 2].copy_from_slice(&seed.0.to_be_bytes());
        return Some(TxOffload::Tso(tso));
    }
    let tcp_len = (t.payload_off - t.tcp_off + t.payload_len) as u16;
    let pseudo = csum::pseudo_header_v4(t.src, t.dst, PROTO_TCP, tcp_len);
    Some(match mode {
        TxChecksum::Offload => {
            frame[field..field + 2].copy_from_slice(&pseudo.0.to_be_bytes());
            TxOffload::TcpChecksum { start: t.tcp_off as u16, offset: field as u16 }
        }
        TxChecksum::Software | TxChecksum::Cached => {
            frame[field..field + 2].copy_from_slice(&[0, 0]);
            let hdr = csum::sum(&frame[t.tcp_off..t.payload_off]);
            // The payload starts at an even position (headers are 4-byte multiples).
            let s = pseudo.plus(hdr).plus(payload());
            frame[field..field + 2].copy_from_slice(&s.checksum().to_be_bytes());
            TxOffload::None
        }
    })
}

/// Completes a frame smoltcp wrote whole into `buf` (copy modes): the TCP
/// checksum as [`finish_tcp_checksum`] does; returns the payload bytes
/// smoltcp copied into it and the NIC's work (`None`: not to be sent).
fn finish_copied(buf: &mut [u8], mode: TxChecksum, mss: Option<usize>) -> (usize, Option<TxOffload>) {
    let len = buf.len();
    match parse_tcp(buf, len) {
        Some(t) => {
            // Summed only where the checksum is ours to compute.
            let body = match (mss, mode) {
                (None, TxChecksum::Cached | TxChecksum::Software) => {
                    csum::sum(&buf[t.payload_off..t.payload_off + t.payload_len])
                }
                _ => Sum(0),
            };
            let off = finish_tcp_checksum(buf, &t, mode, mss, || body);
            (t.payload_len, off)
        }
        None => (0, Some(TxOffload::None)),
    }
}

impl<'a, 'd, P: NicPort<'d>> Dev<'a, 'd, P> {
    /// Whether one more frame can be built and queued now, keeping
    /// `reserve` pages of the pool free. A frame needs at most
    /// `mtu / PAGE_SIZE` pages, rounded up (one for MTU 1514: headers, and
    /// whole frames in the copy modes, are packed into shared pages), and a
    /// one-page allocation cannot fail while a page is free.
    fn tx_room(&self, reserve: u32) -> bool {
        // A whole TSO frame in the copy modes; headers only in iolite mode.
        let frame = if self.tso && !self.zero_copy { TSO_MAX_FRAME } else { self.mtu };
        let need = frame.div_ceil(PAGE_SIZE).max(1) as u32;
        self.port.can_transmit() && self.d.pool_stats(self.pool).is_ok_and(|s| s.free_pages >= need + reserve)
    }

    fn scratch(&mut self, len: usize) -> &mut [u8] {
        if self.scratch.len() < len {
            self.scratch.resize(len, 0);
        }
        &mut self.scratch[..len]
    }

    fn send(&mut self, frame: TxFrame<'d>) {
        let tso = matches!(frame.offload, TxOffload::Tso(_));
        match self.port.transmit(frame) {
            Ok(()) => {
                self.stats.tx_frames += 1;
                self.stats.tx_tso_frames += tso as u64;
            }
            Err(_dropped) => self.stats.tx_dropped += 1,
        }
    }

    /// The index of the connection with 4-tuple `tuple`, if any.
    fn conn_of(&mut self, tuple: &Tuple) -> Option<usize> {
        let hit = self.last_conn.filter(|&i| self.conns.get(i).is_some_and(|c| c.tuple.as_ref() == Some(tuple)));
        let i = hit.or_else(|| {
            self.tuples
                .get(tuple)
                .copied()
                .filter(|&i| self.conns.get(i).is_some_and(|c| c.tuple.as_ref() == Some(tuple)))
        })?;
        self.last_conn = Some(i);
        Some(i)
    }

    /// Admission of a received segment (README, "Admission"): a SYN for
    /// a listened port takes a listening socket while the listener's and
    /// its sender's half-open budgets allow, gets a SYN cookie beyond
    /// them (or when no listening socket is free), and is dropped when
    /// the listener's accept queue is full (`syn_dropped_backlog_full`:
    /// the client retransmits it and gets in once the server accepted; a
    /// reset would tell it "connection refused") or its sender holds
    /// `per_address_connections` sockets (`syn_dropped_per_address`). A
    /// bare ACK for a listened port that no socket has, while cookies may
    /// be outstanding, is checked as a cookie's. Segments of known
    /// connections (and backlog sockets) always go to smoltcp.
    fn admit(&mut self, agg: &Aggregate<'d>, t: &TcpFrame) -> Verdict {
        if !self.adm.cookie_acks.is_empty() && self.adm.cookie_pending(&(t.dst, t.dport, t.src, t.sport)) {
            return Verdict::Follows;
        }
        let syn = t.is_syn();
        // ACK without SYN or RST.
        let bare_ack = t.flags & 0x16 == 0x10;
        if !(syn || bare_ack) || self.addr != Some(t.dst) || !unicast_source(t.src) {
            return Verdict::Pass;
        }
        let Some(ri) = self.adm.rooms.iter().position(|r| r.port == t.dport) else { return Verdict::Pass };
        let tuple: Tuple = (t.dst, t.dport, t.src, t.sport);
        if self.adm.backlog_tuples.contains(&tuple) || self.tuples.contains_key(&tuple) {
            return Verdict::Pass;
        }
        let Some(bytes) = agg.contiguous() else { return Verdict::Pass };
        if !syn {
            return self.check_cookie(bytes, tuple);
        }
        let limits = self.adm.limits;
        if self.adm.held_by(t.src) >= limits.per_address_connections {
            self.stats.syn_dropped_per_address += 1;
            return Verdict::Consumed;
        }
        let room = self.adm.rooms[ri];
        if room.ready >= room.want {
            self.stats.syn_dropped_backlog_full += 1;
            return Verdict::Consumed;
        }
        let used = self.adm.backlog_use.get(&t.src).copied().unwrap_or_default();
        if room.free > 0 && room.half_open < limits.half_open && used.half_open < limits.per_address_half_open {
            let r = &mut self.adm.rooms[ri];
            r.free -= 1;
            r.half_open += 1;
            let u = self.adm.backlog_use.entry(t.src).or_default();
            u.half_open += 1;
            u.held += 1;
            return Verdict::Pass;
        }
        if self.send_cookie(bytes, &tuple) {
            self.stats.syn_cookies_sent += 1;
        }
        Verdict::Consumed
    }

    /// A bare ACK for a listened port that no socket has: the ACK of a
    /// cookie if one may be outstanding and it checks out (its sequence
    /// number less one is the peer's initial one, its acknowledgement
    /// less one our cookie). A bad one goes on to smoltcp, which answers
    /// it with a reset, as Linux does.
    fn check_cookie(&mut self, bytes: &[u8], tuple: Tuple) -> Verdict {
        let now = self.adm.now_ms;
        if !self.adm.jar.recently_sent(now) {
            return Verdict::Pass;
        }
        // A bad checksum: smoltcp drops it.
        let Some((_, ip, tr)) = parse_checked(bytes) else { return Verdict::Pass };
        let Some(ack) = tr.ack_number else { return Verdict::Pass };
        let (isn, cookie) = (tr.seq_number - 1, ack - 1);
        match self.adm.jar.check(&tuple, isn.0 as u32, cookie.0 as u32, now) {
            Some(mss) => {
                self.stats.syn_cookies_validated += 1;
                Verdict::Cookie(CookieHandshake {
                    local: IpEndpoint::new(IpAddress::Ipv4(ip.dst_addr), tr.dst_port),
                    remote: IpEndpoint::new(IpAddress::Ipv4(ip.src_addr), tr.src_port),
                    local_isn: cookie,
                    remote_isn: isn,
                    remote_mss: mss as usize,
                    remote_window: tr.window_len,
                    advertised_window: self.recv_window.min(u16::MAX as usize) as u16,
                })
            }
            None => {
                self.stats.syn_cookies_rejected += 1;
                Verdict::Pass
            }
        }
    }

    /// Answers the SYN in `bytes` with a SYN-ACK whose sequence number is
    /// a cookie (`CookieJar::make`): the MSS option only (the cookie
    /// carries no window scale, SACK or timestamps), our window unscaled.
    /// False if the SYN does not parse (bad checksums: dropped, as smoltcp
    /// would) or no frame could be made.
    fn send_cookie(&mut self, bytes: &[u8], tuple: &Tuple) -> bool {
        let Some((peer_mac, ip, tr)) = parse_checked(bytes) else { return false };
        let (cookie, _) = self.adm.jar.make(tuple, tr.seq_number.0 as u32, tr.max_seg_size, self.adm.now_ms);
        let reply = TcpRepr {
            src_port: tr.dst_port,
            dst_port: tr.src_port,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(cookie as i32),
            ack_number: Some(tr.seq_number + 1),
            window_len: self.recv_window.min(u16::MAX as usize) as u16,
            window_scale: None,
            max_seg_size: Some(self.mtu.saturating_sub(ETH_HDR + 40).min(u16::MAX as usize) as u16),
            sack_permitted: false,
            sack_ranges: [None, None, None],
            timestamp: None,
            payload: &[],
        };
        let ipr = Ipv4Repr {
            src_addr: ip.dst_addr,
            dst_addr: ip.src_addr,
            next_header: IpProtocol::Tcp,
            payload_len: reply.buffer_len(),
            hop_limit: 64,
        };
        let len = ETH_HDR + ipr.buffer_len() + reply.buffer_len();
        let mac = EthernetAddress(self.mac);
        let caps = ChecksumCapabilities::default();
        let frame = self.d.pack(self.pool, len, |b| {
            let mut eth = EthernetFrame::new_unchecked(&mut b[..]);
            eth.set_src_addr(mac);
            eth.set_dst_addr(peer_mac);
            eth.set_ethertype(EthernetProtocol::Ipv4);
            let mut ipp = Ipv4Packet::new_unchecked(eth.payload_mut());
            ipr.emit(&mut ipp, &caps);
            let mut tcp = TcpPacket::new_unchecked(ipp.payload_mut());
            reply.emit(&mut tcp, &IpAddress::Ipv4(ipr.src_addr), &IpAddress::Ipv4(ipr.dst_addr), &caps);
        });
        match frame {
            Ok(agg) => {
                self.stats.tx_header_bytes += len as u64;
                self.send(TxFrame { agg, offload: TxOffload::None });
                true
            }
            Err(_) => {
                self.stats.tx_dropped += 1;
                false
            }
        }
    }

    /// Marks the connection a received frame is for as touched: its user
    /// may have something to do after this poll (data, space, a close).
    /// Frames for no connection (SYNs for a listener, ARP) touch none.
    fn touch(&mut self, t: &TcpFrame) {
        // Ours is the frame's destination.
        let Some(i) = self.conn_of(&(t.dst, t.dport, t.src, t.sport)) else { return };
        let c = &mut self.conns[i];
        self.dirty.push(c.handle);
        if !c.touched {
            c.touched = true;
            self.touched.push(c.id);
        }
    }

    /// Finds the payload of segment `t` of a zero-copy socket: the matching
    /// range of its connection's send queue, by reference (or partly
    /// coalesced, see `TxQueue::gather`).
    fn zero_copy_payload(&mut self, t: &TcpFrame, mss: Option<usize>) -> Payload<'d> {
        if t.payload_len == 0 {
            return Payload::Empty;
        }
        // In iolite mode every TCP socket is a zero-copy one: a segment
        // that maps to no connection has no payload bytes in the frame.
        let tuple = (t.src, t.sport, t.dst, t.dport);
        let Some(c) = self.conn_of(&tuple).map(|i| &mut self.conns[i]).filter(|c| c.zero_copy) else {
            return Payload::Unmapped;
        };
        let rel = t.seq.wrapping_sub(c.seq_base);
        // Entirely before the oldest unacknowledged byte: only smoltcp's
        // keep-alive (one octet at seq_base - 1) does that, and it writes
        // that octet itself.
        if (rel as i32) < 0 && (rel.wrapping_add(t.payload_len as u32) as i32) <= 0 {
            return Payload::Written;
        }
        let rel = rel as usize;
        if rel.saturating_add(t.payload_len) > c.queue.len() {
            return Payload::Unmapped;
        }
        // The owner of an untrusted pool may have reused a page the queue
        // still references (a restarted producer that ended its quarantine
        // early, or one that lies): its bytes are not the stream's any
        // more. Sending them would put another response's bytes on the
        // wire under a valid checksum; reset the connection instead.
        // Checked before `gather`, which could copy them into a buffer of
        // our own where the check would no longer see them.
        if let Some(s) = c.queue.stale_slice(self.d, rel, t.payload_len) {
            self.stats.tx_stale_withheld += 1;
            c.reset_stale = true;
            self.stale = Some(s);
            return Payload::Stale;
        }
        // One descriptor is the header's. A segment for the NIC to cut
        // whose bytes span more slices (pipelined responses of small
        // files) goes as several frames rather than through `gather`'s
        // copy: up to 64 KiB of tiny slices would be copied almost whole.
        let cuts = match mss {
            Some(mss) => c.queue.tso_cuts(rel, t.payload_len, MAX_SLICES - 1, mss),
            None => alloc::vec![t.payload_len],
        };
        let mut parts = Vec::with_capacity(cuts.len());
        let mut at = 0;
        for &end in &cuts {
            let (agg, copied) = match c.queue.gather(self.d, rel + at, end - at, MAX_SLICES - 1, self.pool) {
                Ok(x) => x,
                Err(_) => return Payload::Unmapped,
            };
            if copied > 0 {
                self.stats.tx_coalesced_segments += 1;
                self.stats.tx_coalesced_bytes += copied as u64;
            }
            parts.push(Part { at, agg, copied });
            at = end;
        }
        if parts.len() > 1 {
            self.stats.tx_tso_split += 1;
        }
        let start = c.front + rel as u64;
        let end = start + t.payload_len as u64;
        if start < c.sent_hi {
            self.stats.tx_retransmitted += c.sent_hi.min(end) - start;
        }
        c.sent_hi = c.sent_hi.max(end);
        match parts.pop() {
            Some(p) if parts.is_empty() => Payload::Attached(p.agg, p.copied),
            Some(p) => {
                parts.push(p);
                Payload::Split(parts)
            }
            None => Payload::Unmapped,
        }
    }

    fn emit_zero_copy<R, F: FnOnce(&mut [u8]) -> R>(&mut self, len: usize, f: F, mss: Option<usize>) -> R {
        let r = f(self.scratch(len));
        let tcp = parse_tcp(&self.scratch[..len], len);
        let payload = match &tcp {
            Some(t) => self.zero_copy_payload(t, mss),
            None => Payload::Empty,
        };
        let mut payload = match payload {
            Payload::Unmapped => {
                // The frame's payload octets were never written (the patched
                // emit leaves them to us): sending it would put stale bytes
                // on the wire under a valid checksum. smoltcp counts it as
                // sent and retransmits it after a timeout.
                self.stats.tx_withheld += 1;
                return r;
            }
            // Counted and reported by `zero_copy_payload`.
            Payload::Stale => return r,
            Payload::Split(parts) => Some(Body::Split(parts)),
            Payload::Attached(p, copied) => Some(Body::One(p, copied)),
            Payload::Written | Payload::Empty => None,
        };
        let mut offload = TxOffload::None;
        let hdr_len = match (&tcp, &payload) {
            (Some(t), Some(_)) => t.payload_off,
            _ => len,
        };
        if let Some(t) = &tcp {
            let (mode, d) = (self.checksum, self.d);
            let cache = &mut *self.cache;
            let frame = &mut self.scratch[..len];
            let finished = match &payload {
                // Only for the NIC to cut (tso_cuts): no sum asked for.
                Some(Body::Split(_)) => finish_tcp_checksum(frame, t, mode, mss, || Sum(0)),
                Some(Body::One(p, _)) => finish_tcp_checksum(frame, t, mode, mss, || match mode {
                    TxChecksum::Cached => cache.aggregate_sum(p, d),
                    _ => {
                        p.slices().fold((Sum(0), 0usize), |(s, pos), b| (s.plus(csum::sum(b).at(pos)), pos + b.len())).0
                    }
                }),
                None => {
                    let body_sum = csum::sum(&frame[t.payload_off..t.payload_off + t.payload_len]);
                    // Payload smoltcp wrote itself (its keep-alive octet) is
                    // copied into the frame buffer below: count it.
                    self.stats.tx_payload_copied_frame += t.payload_len as u64;
                    d.count_copy(t.payload_len);
                    finish_tcp_checksum(frame, t, mode, mss, || body_sum)
                }
            };
            offload = match finished {
                Some(o) => o,
                None => {
                    // A segment the NIC cannot cut (never, with the MSS
                    // smoltcp derives from our MTU): not sent, as above.
                    self.stats.tx_withheld += 1;
                    return r;
                }
            };
            self.stats.tx_header_bytes += (hdr_len.min(t.payload_off)) as u64;
        } else {
            // ARP, ICMP (echo replies carry the request's data), DHCP:
            // smoltcp wrote the whole frame; it is copied below.
            self.stats.tx_nontcp_frame_bytes += len as u64;
        }
        if let (Some(t), Some(Body::Split(parts))) = (&tcp, &mut payload) {
            self.send_split(t, core::mem::take(parts), offload, hdr_len);
            return r;
        }
        let hdr = &self.scratch[..hdr_len];
        let head = match self.d.pack(self.pool, hdr_len, |b| b.copy_from_slice(hdr)) {
            Ok(a) => a,
            Err(_) => {
                self.stats.tx_dropped += 1;
                return r;
            }
        };
        let agg = match payload {
            Some(Body::Split(_)) => unreachable!("sent above"),
            Some(Body::One(p, copied)) => {
                self.stats.tx_payload_by_ref += (p.len() - copied) as u64;
                match head.concat(p) {
                    Ok(a) => a,
                    Err(_) => {
                        self.stats.tx_dropped += 1;
                        return r;
                    }
                }
            }
            None => head,
        };
        self.send(TxFrame { agg, offload });
        r
    }

    /// Sends a segment for the NIC to cut as one frame per part
    /// (`Payload::Split`), each behind a copy of the headers smoltcp wrote
    /// (`hdr_len` bytes of the scratch buffer, completed for `offload`, a
    /// TSO request) with its own sequence number and IPv4 total length,
    /// and PSH and FIN in the last part only: the NIC puts on the wire the
    /// segments it would have cut from the whole.
    fn send_split(&mut self, t: &TcpFrame, parts: Vec<Part<'d>>, offload: TxOffload, hdr_len: usize) {
        let n = parts.len();
        let (ip, tcp) = (t.ip_off, t.tcp_off);
        for (k, part) in parts.into_iter().enumerate() {
            let hdr = &self.scratch[..hdr_len];
            let (payload, copied) = (part.agg.len(), part.copied);
            let ip_len = (hdr_len - ip + payload) as u16;
            let seq = t.seq.wrapping_add(part.at as u32);
            let head = self.d.pack(self.pool, hdr_len, |b| {
                b.copy_from_slice(hdr);
                b[ip + 2..ip + 4].copy_from_slice(&ip_len.to_be_bytes());
                b[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
                if k + 1 < n {
                    b[tcp + 13] &= !0x09;
                }
            });
            if k > 0 {
                // The first one's were counted with the segment's.
                self.stats.tx_header_bytes += hdr_len as u64;
            }
            match head.map_err(|_| ()).and_then(|h| h.concat(part.agg).map_err(|_| ())) {
                Ok(agg) => {
                    self.stats.tx_payload_by_ref += (payload - copied) as u64;
                    self.send(TxFrame { agg, offload });
                }
                // smoltcp sends what the peer did not get again.
                Err(()) => self.stats.tx_dropped += 1,
            }
        }
    }

    fn emit_copy<R, F: FnOnce(&mut [u8]) -> R>(&mut self, len: usize, f: F, mss: Option<usize>) -> R {
        let mut f = Some(f);
        let mut out = None;
        let mut finished = (0, None);
        let (mode, d, pool) = (self.checksum, self.d, self.pool);
        let packed = d.pack(pool, len, |buf| {
            if let Some(f) = f.take() {
                out = Some(f(buf));
                // smoltcp copied the payload from its socket ring into this
                // frame buffer.
                finished = finish_copied(buf, mode, mss);
            }
        });
        let agg = match (packed, f.take()) {
            (Ok(agg), _) => Ok(agg),
            (Err(_), Some(f)) => {
                // No buffer for the frame: smoltcp writes it into the
                // scratch buffer. A frame longer than a page (a TSO frame)
                // may have found no run of free pages that long: it goes
                // out from page-sized buffers, a second copy (counted).
                // Anything shorter is dropped: the pool is exhausted.
                out = Some(f(self.scratch(len)));
                finished = finish_copied(&mut self.scratch[..len], mode, mss);
                if len > PAGE_SIZE && finished.1.is_some() {
                    let pieces = self.scratch[..len].chunks(PAGE_SIZE).try_fold(Aggregate::new(d), |agg, piece| {
                        let part = d.pack(pool, piece.len(), |b| b.copy_from_slice(piece)).map_err(|_| ())?;
                        agg.concat(part).map_err(|_| ())
                    });
                    if pieces.is_ok() {
                        d.count_copy(finished.0);
                        self.stats.tx_payload_copied_frame += finished.0 as u64;
                    }
                    pieces
                } else {
                    Err(())
                }
            }
            (Err(_), None) => Err(()),
        };
        let (copied, offload) = finished;
        d.count_copy(copied);
        self.stats.tx_payload_copied_frame += copied as u64;
        match (agg, offload) {
            (Ok(agg), Some(offload)) => self.send(TxFrame { agg, offload }),
            // Not sent: smoltcp sends the segment again after a timeout.
            (Ok(_), None) => self.stats.tx_withheld += 1,
            (Err(_), _) => self.stats.tx_dropped += 1,
        }
        match out {
            Some(r) => r,
            None => unreachable!("f is called on one of the two paths"),
        }
    }
}

/// The first slice of `agg` from an untrusted pool whose buffer no longer
/// has the slice's generation, or is sealed shorter than the slice reaches
/// (re-read from the owner's published header, as a transmit or
/// retransmit is about to read the bytes).
pub(crate) fn stale_slice(d: &Domain, agg: &Aggregate<'_>) -> Option<SliceDesc> {
    agg.descs().iter().copied().find(|s| {
        d.pool_trust(s.pool) == Ok(Trust::Untrusted)
            && !d.published(s.pool, s.buf).is_ok_and(|(gen, sealed)| gen == s.gen && s.off + s.len <= sealed)
    })
}
