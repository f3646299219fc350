//! Admission of connection requests (README, "Admission"): SYN floods,
//! resets before accept, SYN cookies and per-address budgets, with raw
//! segments of clients that are not smoltcp (spoofed sources, forged
//! cookies) beside A's real connections.

use super::*;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, IpAddress, IpProtocol,
    Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

const B_IP: [u8; 4] = [10, 0, 2, 16];
const B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// A TCP segment to B:80 from a raw client at `src`.
struct Seg<'p> {
    src: [u8; 4],
    sport: u16,
    control: TcpControl,
    seq: u32,
    ack: Option<u32>,
    window: u16,
    mss: Option<u16>,
    wscale: Option<u8>,
    payload: &'p [u8],
}

impl Seg<'_> {
    fn syn(src: [u8; 4], sport: u16, seq: u32) -> Self {
        Seg {
            src,
            sport,
            control: TcpControl::Syn,
            seq,
            ack: None,
            window: 8192,
            mss: Some(1400),
            wscale: Some(7),
            payload: &[],
        }
    }

    fn ack(src: [u8; 4], sport: u16, seq: u32, ack: u32) -> Self {
        Seg { control: TcpControl::None, ack: Some(ack), mss: None, wscale: None, ..Seg::syn(src, sport, seq) }
    }

    /// The frame, checksums and all.
    fn frame(&self) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: self.sport,
            dst_port: 80,
            control: self.control,
            seq_number: TcpSeqNumber(self.seq as i32),
            ack_number: self.ack.map(|a| TcpSeqNumber(a as i32)),
            window_len: self.window,
            window_scale: self.wscale,
            max_seg_size: self.mss,
            sack_permitted: self.control == TcpControl::Syn,
            sack_ranges: [None, None, None],
            timestamp: None,
            payload: self.payload,
        };
        let ip = Ipv4Repr {
            src_addr: Ipv4Address::from(self.src),
            dst_addr: Ipv4Address::from(B_IP),
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let mut f = alloc::vec![0u8; ETH_HDR + ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::default();
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_src_addr(mac_of(self.src));
        eth.set_dst_addr(EthernetAddress(B_MAC));
        eth.set_ethertype(EthernetProtocol::Ipv4);
        let mut ipp = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip.emit(&mut ipp, &caps);
        let mut t = TcpPacket::new_unchecked(ipp.payload_mut());
        tcp.emit(&mut t, &IpAddress::Ipv4(ip.src_addr), &IpAddress::Ipv4(ip.dst_addr), &caps);
        f
    }
}

/// A TCP segment B sent, as parsed (checksums verified).
#[derive(Debug)]
struct Out {
    dst: [u8; 4],
    dport: u16,
    dst_mac: [u8; 6],
    control: TcpControl,
    seq: u32,
    ack: Option<u32>,
    window: u16,
    mss: Option<u16>,
    wscale: Option<u8>,
    sack: bool,
    payload: Vec<u8>,
}

/// The MAC address of the raw client at `ip`.
fn mac_of(ip: [u8; 4]) -> EthernetAddress {
    EthernetAddress([2, 1, 0, 0, ip[2], ip[3]])
}

/// The raw client at `src` asks B for its MAC address, so that B knows
/// the client's (smoltcp learns neighbours from ARP, and drops what it
/// would send to an unknown one, such as a reset).
fn arp_hello(n: &mut Net, src: [u8; 4]) {
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: mac_of(src),
        source_protocol_addr: Ipv4Address::from(src),
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: Ipv4Address::from(B_IP),
    };
    let mut f = alloc::vec![0u8; ETH_HDR + arp.buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    eth.set_src_addr(mac_of(src));
    eth.set_dst_addr(EthernetAddress::BROADCAST);
    eth.set_ethertype(EthernetProtocol::Arp);
    arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    n.pb.inbox.borrow_mut().push_back(f);
    poll_b(n);
}

/// Hands `seg` to B.
fn to_b(n: &Net, seg: &Seg) {
    n.pb.inbox.borrow_mut().push_back(seg.frame());
}

/// Polls B alone and takes the TCP segments it sent (A never sees them).
fn poll_b(n: &mut Net) -> Vec<Out> {
    n.b.poll(n.now, &mut n.pb);
    let caps = ChecksumCapabilities::default();
    let mut outs = Vec::new();
    for f in n.pa.inbox.borrow_mut().drain(..) {
        let Ok(eth) = EthernetFrame::new_checked(&f[..]) else { continue };
        let Ok(ipp) = Ipv4Packet::new_checked(eth.payload()) else { continue };
        let Ok(ip) = Ipv4Repr::parse(&ipp, &caps) else { continue };
        let Ok(tp) = TcpPacket::new_checked(ipp.payload()) else { continue };
        let t = TcpRepr::parse(&tp, &IpAddress::Ipv4(ip.src_addr), &IpAddress::Ipv4(ip.dst_addr), &caps)
            .expect("B's segments have good checksums");
        outs.push(Out {
            dst: ip.dst_addr.octets(),
            dport: t.dst_port,
            dst_mac: eth.dst_addr().0,
            control: t.control,
            seq: t.seq_number.0 as u32,
            ack: t.ack_number.map(|a| a.0 as u32),
            window: t.window_len,
            mss: t.max_seg_size,
            wscale: t.window_scale,
            sack: t.sack_permitted,
            payload: t.payload.to_vec(),
        });
    }
    n.now += 1;
    outs
}

/// A connects to B:80 from `port`, sends `req`; B accepts and must get
/// `req` byte for byte and answer `resp`, which A must get. B's id.
fn exchange(n: &mut Net, port: u16, req: &[u8], resp: &[u8]) -> ConnId {
    let ca = n.a.connect((B_IP, 80), port).unwrap();
    let (mut cb, mut sent, mut got_req, mut got_resp) = (None, false, Vec::new(), Vec::new());
    for _ in 0..20_000 {
        n.step();
        if !sent && n.a.state(ca) == Ok(TcpState::Established) {
            n.a.send(ca, make(n.da, req)).unwrap();
            sent = true;
        }
        if cb.is_none() {
            cb = n.b.accept(80);
        }
        if let Some(c) = cb {
            while let Ok(Recv::Data(d)) = n.b.recv(c, usize::MAX) {
                d.slices().for_each(|s| got_req.extend_from_slice(s));
                if got_req.len() == req.len() {
                    n.b.send(c, make(n.b.domain(), resp)).unwrap();
                }
            }
        }
        while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
            d.slices().for_each(|s| got_resp.extend_from_slice(s));
        }
        if got_resp.len() == resp.len() && got_req.len() == req.len() {
            break;
        }
    }
    assert_eq!(got_req, req, "the request, byte for byte");
    assert_eq!(got_resp, resp, "the response, byte for byte");
    cb.unwrap()
}

/// A and B, B with its admission settings changed by `f`.
fn net_with(f: impl FnOnce(&mut Config)) -> Net {
    let mut b = cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached);
    f(&mut b);
    Net::with(cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), b, 0)
}

#[test]
fn a_syn_flood_of_ten_times_the_backlog_does_not_shut_the_port() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.b.listen(80, 8).unwrap();
    // 80 SYNs from 80 spoofed addresses that never answer the SYN-ACK.
    for i in 0..80u8 {
        to_b(&n, &Seg::syn([10, 0, 2, 100 + i], 1000 + i as u16, 7 * i as u32));
    }
    let outs = poll_b(&mut n);
    assert_eq!(n.b.backlog(80), Some((0, 8, 0)), "8 half-open");
    let st = n.b.stats();
    assert_eq!(st.syn_cookies_sent, 72, "the others got cookies: {st:?}");
    // Each cookie went back to its sender, whose MAC it came from.
    let cookies: Vec<&Out> = outs.iter().filter(|o| o.control == TcpControl::Syn).collect();
    assert!(cookies.len() >= 72);
    for o in &cookies {
        let i = o.dst[3] - 100;
        assert_eq!((o.dport, o.ack, o.dst_mac), (1000 + i as u16, Some(7 * i as u32 + 1), [2, 1, 0, 0, 2, o.dst[3]]));
    }
    // A normal client gets in through a cookie while they are still there.
    let t0 = n.now;
    exchange(&mut n, 49152, b"GET / HTTP/1.1\r\n\r\n", &pattern(3000, 1));
    assert!(n.now - t0 < 3000, "within the SYN-RECEIVED timeout");
    let st = n.b.stats();
    assert_eq!((st.syn_cookies_validated, st.syn_cookies_rejected), (1, 0), "{st:?}");
    assert_eq!(n.b.backlog(80).map(|b| b.1), Some(8), "the half-open ones are still there");
    // After the SYN-RECEIVED timeout (3 s) they are gone, every socket
    // is free again, and the next client gets a socket of its own.
    for _ in 0..10_000 {
        n.step();
        if n.b.stats().syn_recv_timeouts == 8 {
            break;
        }
    }
    assert_eq!(n.b.stats().syn_recv_timeouts, 8);
    assert_eq!(n.b.backlog(80), Some((8, 0, 0)));
    assert!(n.now - t0 < 4000, "at the timeout, not smoltcp's 60 s: {} ms", n.now - t0);
    exchange(&mut n, 49153, b"GET /again HTTP/1.1\r\n\r\n", &pattern(5000, 2));
    let st = n.b.stats();
    // 72 for the flood, 1 for the first client.
    assert_eq!((st.syn_cookies_sent, st.syn_cookies_validated), (73, 1), "no cookie for it: {st:?}");
    assert_eq!(st.backlog_recycled, 0);
}

#[test]
fn connections_reset_before_accept_cost_the_backlog_nothing() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.b.listen(80, 4).unwrap();
    for round in 0..10u16 {
        // The handshake completes, then the client resets before B accepts.
        let ca = n.a.connect((B_IP, 80), 50000 + round).unwrap();
        for _ in 0..1000 {
            n.step();
            if n.a.state(ca) == Ok(TcpState::Established) && n.b.backlog(80) == Some((3, 0, 1)) {
                break;
            }
        }
        assert_eq!(n.b.backlog(80), Some((3, 0, 1)), "round {round}: established, not accepted");
        n.a.abort(ca).unwrap();
        for _ in 0..1000 {
            n.step();
            if n.b.backlog(80) == Some((4, 0, 0)) {
                break;
            }
        }
        assert_eq!(n.b.backlog(80), Some((4, 0, 0)), "round {round}: the backlog is whole again");
    }
    assert_eq!(n.b.stats().backlog_recycled, 10);
    // Four at once still get listening sockets of their own.
    let ca: Vec<ConnId> = (0..4).map(|i| n.a.connect((B_IP, 80), 51000 + i).unwrap()).collect();
    let mut accepted = 0;
    for _ in 0..1000 {
        n.step();
        while n.b.accept(80).is_some() {
            accepted += 1;
        }
        if accepted == 4 {
            break;
        }
    }
    assert_eq!(accepted, 4);
    assert!(ca.iter().all(|&c| n.a.state(c) == Ok(TcpState::Established)));
    let st = n.b.stats();
    assert_eq!((st.syn_cookies_sent, st.syn_dropped_backlog_full), (0, 0), "{st:?}");
}

#[test]
fn a_cookie_ack_with_data_delivers_it_and_a_bad_one_is_reset() {
    // Every SYN gets a cookie (no half-open socket at all).
    let mut n = net_with(|b| b.half_open_budget = 0);
    n.b.listen(80, 4).unwrap();
    let c = [10, 0, 2, 50];
    arp_hello(&mut n, c);
    // A bare ACK before any cookie was sent is not taken for one.
    to_b(&n, &Seg::ack(c, 40000, 1001, 12345));
    let outs = poll_b(&mut n);
    assert!(outs.iter().any(|o| o.control == TcpControl::Rst), "smoltcp resets it: {outs:?}");
    assert_eq!(n.b.stats().syn_cookies_rejected, 0, "not checked");
    to_b(&n, &Seg::syn(c, 40000, 1000));
    let outs = poll_b(&mut n);
    let [synack] = &outs[..] else { panic!("one SYN-ACK: {outs:?}") };
    assert_eq!((synack.control, synack.ack, synack.dst, synack.dport), (TcpControl::Syn, Some(1001), c, 40000));
    // The MSS option only: a cookie carries no window scale or SACK.
    assert_eq!((synack.mss, synack.wscale, synack.sack), (Some(1460), None, false));
    assert_eq!(synack.window, 65535, "B's 64 KiB window, unscaled");
    let cookie = synack.seq;
    assert_eq!(n.b.backlog(80), Some((4, 0, 0)), "no socket for it");
    assert_eq!(n.b.stats().syn_cookies_sent, 1);

    // Bad cookies (wrong number, or another port): reset, no socket. (A
    // number a few above is another MSS index, as in Linux: the cookie
    // is checked to 22 bits.)
    for (sport, ack) in [(40000, cookie.wrapping_add(0x1000)), (40000, cookie ^ 0x8000_0000), (40001, cookie + 1)] {
        to_b(&n, &Seg::ack(c, sport, 1001, ack));
        let outs = poll_b(&mut n);
        assert!(
            outs.iter().any(|o| o.control == TcpControl::Rst && o.seq == ack && o.dport == sport),
            "reset: {outs:?} {:?}",
            n.b.stats()
        );
    }
    assert_eq!(n.b.stats().syn_cookies_rejected, 3);
    assert_eq!(n.b.backlog(80), Some((4, 0, 0)));
    assert!(n.b.accept(80).is_none());

    // The good ACK carries the request's first 700 bytes: none is lost.
    let data = pattern(700, 9);
    to_b(&n, &Seg { payload: &data, ..Seg::ack(c, 40000, 1001, cookie + 1) });
    let outs = poll_b(&mut n);
    assert_eq!(n.b.stats().syn_cookies_validated, 1);
    assert_eq!(n.b.backlog(80), Some((3, 0, 1)), "in the backlog, in place of a listening socket");
    let cb = n.b.accept(80).expect("accepted");
    assert_eq!(n.b.peer(cb), Ok((c, 40000)));
    let mut got = Vec::new();
    while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
        d.slices().for_each(|s| got.extend_from_slice(s));
    }
    assert_eq!(got, data, "the ACK's data, byte for byte");
    // (smoltcp delays the ACK a few ms.)
    let outs: Vec<Out> = outs.into_iter().chain((0..50).flat_map(|_| poll_b(&mut n))).collect();
    assert!(outs.iter().any(|o| o.ack == Some(1001 + 700)), "acknowledged: {outs:?}");
    // B sends within the MSS the cookie carried (1400 -> 1300) and from
    // the sequence number after the cookie.
    let resp = pattern(4000, 10);
    n.b.send(cb, make(n.b.domain(), &resp)).unwrap();
    let outs = poll_b(&mut n);
    let data_segs: Vec<&Out> = outs.iter().filter(|o| !o.payload.is_empty()).collect();
    assert_eq!(data_segs.first().map(|o| o.seq), Some(cookie + 1));
    assert!(data_segs.iter().all(|o| o.payload.len() <= 1300), "{:?}", data_segs.iter().map(|o| o.payload.len()));
    let sent: Vec<u8> = data_segs.iter().flat_map(|o| o.payload.iter().copied()).collect();
    assert_eq!(sent[..], resp[..sent.len()], "the response's bytes");
    assert!(sent.len() >= 1300);
}

#[test]
fn one_address_cannot_take_every_socket() {
    let mut n = net_with(|b| {
        b.per_address_connections = 3;
        b.per_address_half_open = 1;
    });
    n.b.listen(80, 8).unwrap();
    // One address's second and third handshakes get cookies, not sockets.
    for p in 0..3 {
        to_b(&n, &Seg::syn([10, 0, 2, 60], 2000 + p, 100));
    }
    poll_b(&mut n);
    assert_eq!(n.b.backlog(80), Some((7, 1, 0)));
    assert_eq!(n.b.stats().syn_cookies_sent, 2);
    // A opens 3 connections, then 2 more: their SYNs are dropped.
    let mut cb = Vec::new();
    let mut ca = Vec::new();
    for i in 0..5 {
        ca.push(n.a.connect((B_IP, 80), 52000 + i).unwrap());
        let t0 = n.now;
        // 3 s: within A's SYN retransmissions (smoltcp gives up after 60 s).
        while n.now < t0 + 3000 && cb.len() <= i as usize {
            n.step();
            while let Some(c) = n.b.accept(80) {
                cb.push(c);
            }
        }
    }
    assert_eq!(cb.len(), 3, "A's share");
    assert!(n.b.stats().syn_dropped_per_address > 0);
    let states: Vec<_> = ca.iter().map(|&c| n.a.state(c)).collect();
    let waiting = states.iter().filter(|&&s| s == Ok(TcpState::SynSent)).count();
    assert_eq!(waiting, 2, "the others wait (their SYNs were dropped, not reset): {states:?}");
    // Another address still gets a socket.
    let (half_open, cookies) = (n.b.backlog(80).unwrap().1, n.b.stats().syn_cookies_sent);
    to_b(&n, &Seg::syn([10, 0, 2, 61], 3000, 5));
    poll_b(&mut n);
    assert_eq!(n.b.backlog(80).unwrap().1, half_open + 1, "10.0.2.61's handshake took a socket");
    assert_eq!(n.b.stats().syn_cookies_sent, cookies);
    // Once A holds fewer, a retransmitted SYN of its gets in.
    n.b.abort(cb[0]).unwrap();
    for _ in 0..20_000 {
        n.step();
        while let Some(c) = n.b.accept(80) {
            cb.push(c);
        }
        if cb.len() == 4 {
            break;
        }
    }
    assert_eq!(cb.len(), 4);
    assert_eq!(ca.iter().filter(|&&c| n.a.state(c) == Ok(TcpState::Established)).count(), 3);
}

#[test]
fn a_reset_right_after_a_cookie_ack_is_not_lost() {
    // Every SYN gets a cookie; the client completes the handshake and
    // resets at once, both segments arriving in one poll (what a burst
    // of clients that give up looks like). The reset must reach the
    // socket the ACK makes: given to smoltcp before it exists, it was
    // dropped, and the connection stayed established with nobody there.
    let mut n = net_with(|b| b.half_open_budget = 0);
    n.b.listen(80, 4).unwrap();
    let c = [10, 0, 2, 51];
    arp_hello(&mut n, c);
    let mut cookies = Vec::new();
    for sport in 41000..41003u16 {
        to_b(&n, &Seg::syn(c, sport, 5000));
        let outs = poll_b(&mut n);
        let [synack] = &outs[..] else { panic!("one SYN-ACK: {outs:?}") };
        cookies.push((sport, synack.seq));
    }
    for &(sport, cookie) in &cookies {
        to_b(&n, &Seg::ack(c, sport, 5001, cookie + 1));
        to_b(&n, &Seg { control: TcpControl::Rst, ack: None, ..Seg::ack(c, sport, 5001, 0) });
    }
    poll_b(&mut n);
    let st = n.b.stats();
    assert_eq!(st.syn_cookies_validated, 3, "{st:?}");
    for _ in 0..10 {
        poll_b(&mut n);
    }
    assert!(n.b.accept(80).is_none(), "no connection is left for httpd");
    assert_eq!(n.b.backlog(80), Some((4, 0, 0)), "the backlog is whole again");
    assert_eq!(n.b.stats().backlog_recycled, 3);
    assert_eq!(n.b.connections(), 0);
}
