//! DHCP: the lease the server gave, applied to the interface after each
//! poll and reported to the stack's user once per change.

use smoltcp::iface::SocketHandle;
use smoltcp::socket::dhcpv4;
use smoltcp::wire::{DhcpRepr, IpCidr};

use super::NetStack;

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

impl<'d> NetStack<'d> {
    /// The DHCP lease obtained (or renewed: `Some(lease)`) or lost
    /// (`None`) since the last call, if anything changed.
    pub fn take_dhcp_change(&mut self) -> Option<Option<DhcpLease>> {
        self.dhcp_change.take()
    }

    /// After a poll: a lease obtained or renewed goes on the interface
    /// (its address and default route) and one lost comes off it; either
    /// is kept for [`NetStack::take_dhcp_change`].
    pub(super) fn poll_dhcp(&mut self, h: SocketHandle) {
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
