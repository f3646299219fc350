//! DHCP (`Config::dhcp`): the DISCOVER, and a whole exchange with a server
//! whose lease the stack takes and reports.

use super::*;

/// A stack configured by DHCP, and its port (capturing what it sends).
fn dhcp_client() -> (NetStack<'static>, Port) {
    let d = domain(16, Trust::Trusted);
    let mut c = cfg(9, 99, CopyMode::IoLite, TxChecksum::Cached);
    c.dhcp = true;
    let (mut p, _other) = Port::pair(d, d, 0);
    p.capture = true;
    (NetStack::new(d, c, 0), p)
}

#[test]
fn dhcp_sends_a_discover() {
    let (mut s, mut p) = dhcp_client();
    s.poll(0, &mut p);
    s.poll(100, &mut p);
    assert!(s.address().is_none());
    let discover = p.sent.iter().find(|f| f.len() > 42 && f[23] == 17 && f[36..38] == [0, 67]);
    assert!(discover.is_some(), "a DHCP request to port 67 went out");
}

/// A DHCP server's reply to the client's last message: OFFER for a
/// DISCOVER, ACK for a REQUEST (what QEMU's slirp would send), as an
/// Ethernet frame from 10.0.2.2 to the broadcast address.
fn dhcp_reply(request: &[u8], lease_secs: u32) -> Vec<u8> {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        DhcpMessageType, DhcpPacket, DhcpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr,
        IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
    };
    let caps = ChecksumCapabilities::default();
    let ip = Ipv4Packet::new_checked(&request[14..]).unwrap();
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    let dhcp = DhcpPacket::new_checked(udp.payload()).unwrap();
    let req = DhcpRepr::parse(&dhcp).unwrap();
    let message_type = match req.message_type {
        DhcpMessageType::Discover => DhcpMessageType::Offer,
        DhcpMessageType::Request => DhcpMessageType::Ack,
        other => panic!("unexpected DHCP {other:?}"),
    };
    let server = Ipv4Address::new(10, 0, 2, 2);
    let reply = DhcpRepr {
        message_type,
        transaction_id: req.transaction_id,
        secs: 0,
        client_hardware_address: req.client_hardware_address,
        client_ip: Ipv4Address::UNSPECIFIED,
        your_ip: Ipv4Address::new(10, 0, 2, 15),
        server_ip: server,
        router: Some(server),
        subnet_mask: Some(Ipv4Address::new(255, 255, 255, 0)),
        relay_agent_ip: Ipv4Address::UNSPECIFIED,
        broadcast: false,
        requested_ip: None,
        client_identifier: None,
        server_identifier: Some(server),
        parameter_request_list: None,
        dns_servers: None,
        max_size: None,
        lease_duration: Some(lease_secs),
        renew_duration: None,
        rebind_duration: None,
        additional_options: &[],
    };
    let dhcp_len = reply.buffer_len();
    let udp_repr = UdpRepr { src_port: 67, dst_port: 68 };
    let ip_repr = Ipv4Repr {
        src_addr: server,
        dst_addr: Ipv4Address::BROADCAST,
        next_header: IpProtocol::Udp,
        payload_len: 8 + dhcp_len,
        hop_limit: 64,
    };
    let mut frame = alloc::vec![0u8; 14 + 20 + 8 + dhcp_len];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: EthernetAddress([0x52, 0x55, 10, 0, 2, 2]),
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut eth);
    let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip_repr.emit(&mut ip, &caps);
    let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
    udp_repr.emit(
        &mut udp,
        &IpAddress::Ipv4(server),
        &IpAddress::Ipv4(Ipv4Address::BROADCAST),
        dhcp_len,
        |p| reply.emit(&mut DhcpPacket::new_unchecked(p)).unwrap(),
        &caps,
    );
    frame
}

/// The whole exchange with a server: DISCOVER, OFFER, REQUEST, ACK; the
/// stack takes the address and gateway and reports the lease the server
/// gave, including its time (option 51), once.
#[test]
fn dhcp_lease_is_taken_and_reported() {
    let (mut s, mut p) = dhcp_client();
    let is_dhcp = |f: &Vec<u8>| f.len() > 42 && f[23] == 17 && f[36..38] == [0, 67];
    let mut now = 0;
    for expected in ["discover", "request"] {
        for _ in 0..20 {
            s.poll(now, &mut p);
            now += 100;
            if p.sent.iter().any(is_dhcp) {
                break;
            }
        }
        let msg = p.sent.iter().find(|f| is_dhcp(f)).unwrap_or_else(|| panic!("no DHCP {expected} went out")).clone();
        p.sent.clear();
        assert_eq!(s.take_dhcp_change(), None, "no lease before the ACK");
        p.inbox.borrow_mut().push_back(dhcp_reply(&msg, 7200));
    }
    s.poll(now, &mut p);
    let lease = s.take_dhcp_change().expect("a lease after the ACK").expect("configured, not lost");
    assert_eq!(
        lease,
        crate::DhcpLease {
            address: ([10, 0, 2, 15], 24),
            gateway: Some([10, 0, 2, 2]),
            server: [10, 0, 2, 2],
            lease_secs: Some(7200)
        }
    );
    assert_eq!(s.address(), Some([10, 0, 2, 15]));
    assert_eq!(s.stats().dhcp_leases, 1);
    assert_eq!(s.take_dhcp_change(), None, "reported once");
}
