//! The frame model between the stack and the NIC driver, and the header
//! parsing the device layer needs.
//!
//! A transmitted frame is an IO-Lite aggregate: the headers, written by
//! smoltcp into a small object of the stack's own pool, followed by the
//! payload as slices of the sender's buffers (by reference). The driver puts
//! each slice in its own TX descriptor and keeps the frame (its holds) until
//! the NIC has sent it. A received frame is an aggregate of the driver's
//! RX pool.

use iolite::Aggregate;

/// Ethernet header length.
pub const ETH_HDR: usize = 14;
/// Ethertype of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

pub use nic_api::TxOffload;

/// A frame to transmit: headers and payload slices, plus checksum work left
/// for the NIC.
#[derive(Debug)]
pub struct TxFrame<'d> {
    /// The frame's bytes, by reference.
    pub agg: Aggregate<'d>,
    /// Checksum offload request.
    pub offload: TxOffload,
}

/// The stack's view of a NIC driver (over IO-Lite channels on seL4, an
/// in-memory wire in host tests).
pub trait NicPort<'d> {
    /// Whether the stack may send a frame of its own now (data, ACKs,
    /// retransmissions); when false, smoltcp keeps its segments for later.
    fn can_transmit(&self) -> bool;
    /// Queues a frame for transmission; hands it back if the NIC cannot take
    /// it (the stack then drops it). Should accept a batch of replies to
    /// received frames beyond what `can_transmit` admits: the stack always
    /// takes received frames, and a reply it cannot queue is lost.
    fn transmit(&mut self, frame: TxFrame<'d>) -> Result<(), TxFrame<'d>>;
    /// The next received frame, if any.
    fn receive(&mut self) -> Option<Aggregate<'d>>;
}

/// The TCP/IPv4 facts of a frame the stack emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpFrame {
    /// Offset of the IPv4 header.
    pub ip_off: usize,
    /// Offset of the TCP header.
    pub tcp_off: usize,
    /// Offset of the payload (= length of all headers).
    pub payload_off: usize,
    /// Payload length.
    pub payload_len: usize,
    /// Source and destination addresses.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// The flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10, ...).
    pub flags: u8,
}

impl TcpFrame {
    /// A connection request: SYN without ACK.
    pub fn is_syn(&self) -> bool {
        self.flags & 0x12 == 0x02
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Parses an Ethernet/IPv4/TCP frame of `frame_len` bytes whose first bytes
/// (at least the headers) are `hdr`. Anything else, or inconsistent
/// lengths, gives `None`. Never panics.
pub fn parse_tcp(hdr: &[u8], frame_len: usize) -> Option<TcpFrame> {
    if be16(hdr, 12)? != ETHERTYPE_IPV4 {
        return None;
    }
    let ip_off = ETH_HDR;
    let vihl = *hdr.get(ip_off)?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = (vihl & 0xf) as usize * 4;
    let total = be16(hdr, ip_off + 2)? as usize;
    if ihl < 20 || *hdr.get(ip_off + 9)? != PROTO_TCP || ip_off + total > frame_len || total < ihl + 20 {
        return None;
    }
    let tcp_off = ip_off + ihl;
    let doff = (*hdr.get(tcp_off + 12)? >> 4) as usize * 4;
    if doff < 20 || ihl + doff > total || tcp_off + doff > hdr.len() {
        return None;
    }
    let g4 = |at: usize| -> Option<[u8; 4]> { hdr.get(at..at + 4)?.try_into().ok() };
    Some(TcpFrame {
        ip_off,
        tcp_off,
        payload_off: tcp_off + doff,
        payload_len: total - ihl - doff,
        src: g4(ip_off + 12)?,
        dst: g4(ip_off + 16)?,
        sport: be16(hdr, tcp_off)?,
        dport: be16(hdr, tcp_off + 2)?,
        seq: u32::from_be_bytes(g4(tcp_off + 4)?),
        flags: *hdr.get(tcp_off + 13)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: usize) -> alloc::vec::Vec<u8> {
        let mut f = alloc::vec![0u8; 14 + 20 + 20 + payload];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 2, 15]);
        f[30..34].copy_from_slice(&[10, 0, 2, 2]);
        f[34..36].copy_from_slice(&80u16.to_be_bytes());
        f[36..38].copy_from_slice(&1234u16.to_be_bytes());
        f[38..42].copy_from_slice(&7u32.to_be_bytes());
        f[46] = 0x50;
        f
    }

    #[test]
    fn parses_a_tcp_frame() {
        let f = frame(100);
        let t = parse_tcp(&f, f.len()).unwrap();
        assert_eq!((t.tcp_off, t.payload_off, t.payload_len), (34, 54, 100));
        assert_eq!((t.sport, t.dport, t.seq), (80, 1234, 7));
        assert_eq!(t.src, [10, 0, 2, 15]);
    }

    #[test]
    fn rejects_garbage_and_bad_lengths_without_panicking() {
        let f = frame(10);
        for cut in 0..f.len() {
            let _ = parse_tcp(&f[..cut], cut);
        }
        let mut g = f.clone();
        g[16..18].copy_from_slice(&5000u16.to_be_bytes()); // longer than the frame
        assert!(parse_tcp(&g, g.len()).is_none());
        let mut g = f.clone();
        g[46] = 0xf0; // TCP header longer than the IP payload
        assert!(parse_tcp(&g, g.len()).is_none());
        let mut g = f.clone();
        g[14] = 0x41; // IHL 4 bytes
        assert!(parse_tcp(&g, g.len()).is_none());
        let mut x = 1u32;
        for _ in 0..2000 {
            let junk: alloc::vec::Vec<u8> = (0..64)
                .map(|_| {
                    x = x.wrapping_mul(1103515245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = parse_tcp(&junk, junk.len());
        }
    }
}
