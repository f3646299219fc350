//! Admission of received TCP segments, before smoltcp sees them: SYNs
//! within the listener's and the sender's budgets pass, beyond them they
//! get a SYN cookie (answered here, no socket) or are dropped; a bare ACK
//! that no socket has may be a cookie's, checked here and set aside for
//! its socket to be made after the poll (README, "Admission").

use iolite::Aggregate;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::tcp::CookieHandshake;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpAddress, IpEndpoint, IpProtocol, Ipv4Address, Ipv4Packet,
    Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

use super::Dev;
use crate::conn::Tuple;
use crate::frame::{NicPort, TcpFrame, TxFrame, TxOffload, ETH_HDR};

/// What becomes of a received TCP segment (`Dev::admit`).
pub(super) enum Verdict {
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

impl<'a, 'd, P: NicPort<'d>> Dev<'a, 'd, P> {
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
    pub(super) fn admit(&mut self, agg: &Aggregate<'d>, t: &TcpFrame) -> Verdict {
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
}
