//! The protocol between the NIC driver (netdrv) and the TCP/IP stack
//! (netstack), and netdrv's counter page. Tiny and kernel-free: netdrv
//! depends on this, not on the stack.
//!
//! ## The link region
//! The `link` dataport is an IO-Lite duplex region ([`iolite::Duplex`]) of
//! [`GEOMETRY`]:
//!
//! | channel | sender | messages |
//! |---|---|---|
//! | A | netdrv ([`DRV_SIDE`]) | received frames: one-slice aggregates of netdrv's receive pool, tag 0 |
//! | B | netstack ([`STACK_SIDE`]) | frames to send: a header slice and payload slices by reference, the offload request in the tag ([`TxOffload::tag`]) |
//!
//! netstack runs above netdrv and initialises the region; netdrv attaches
//! once it is initialised (and exits if it is not). netdrv writes the
//! protocol words [`WORD_OFFLOADS`], then [`WORD_MAC`] (netstack reads
//! both once the MAC address is valid), and [`WORD_LINK_UP`]. Each side
//! wakes the other only for what it asked (the rings' "signal me" flags).
//!
//! ## Offloads
//! Every frame may ask for the TCP checksum ([`TxOffload::TcpChecksum`]).
//! Where netdrv offers it ([`Offloads::tso`]), a frame may also be one
//! TCP/IPv4 segment of up to [`TSO_MAX_FRAME`] bytes that the NIC cuts
//! into wire segments of at most [`Tso::mss`] payload bytes each
//! ([`TxOffload::Tso`]); a [`Tso`] holds only requests the e1000 can carry
//! out, and the driver checks the frame against it.
//!
//! ## Counters
//! [`DrvCounter`]: netdrv's counter page (`drv_stats`), read by the cgi
//! (`/cgi-bin/stats`) and tcp_echo.
#![no_std]
#![deny(missing_docs)]

pub use counters::{Counter, CounterPage, Values};
use iolite::{Geometry, Side};

/// Aggregate descriptors in flight per direction (336 bytes each).
pub const FWD_CAP: usize = 256;
/// Releases in flight per direction (16 bytes each). A release names one
/// buffer (several holds coalesce), so this many distinct buffers can be on
/// their way back before the returns wait (they are kept, never lost).
pub const REL_CAP: usize = 2048;
/// Both channels' ring capacities.
pub const GEOMETRY: Geometry = Geometry { fwd: FWD_CAP, rel: REL_CAP };
/// The smallest link dataport.
pub const REGION_BYTES: usize = GEOMETRY.duplex_bytes();
/// netdrv's side of the link.
pub const DRV_SIDE: Side = Side::A;
/// netstack's side of the link.
pub const STACK_SIDE: Side = Side::B;
/// Protocol word (netdrv): the MAC address in the low 48 bits, bit 63 =
/// valid.
pub const WORD_MAC: usize = 0;
/// Protocol word (netdrv): 1 when the link is up.
pub const WORD_LINK_UP: usize = 1;
/// Protocol word (netdrv): what the NIC does for netstack's frames
/// ([`Offloads::word`]), written before [`WORD_MAC`].
pub const WORD_OFFLOADS: usize = 2;

/// The offloads netdrv offers beyond the TCP checksum (which it always
/// offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    /// TCP segmentation offload ([`TxOffload::Tso`]).
    pub tso: bool,
}

impl Offloads {
    /// The protocol word: bit 0, TSO; the other bits are reserved (0).
    pub fn word(self) -> u64 {
        self.tso as u64
    }

    /// Inverse of [`Offloads::word`] (reserved bits ignored).
    pub fn from_word(word: u64) -> Offloads {
        Offloads { tso: word & 1 != 0 }
    }
}

/// Where the IPv4 header of a [`TxOffload::Tso`] frame starts: right after
/// an Ethernet II header without a VLAN tag.
pub const TSO_IP_START: usize = 14;
/// The largest [`TxOffload::Tso`] frame, headers included: its IPv4 total
/// length still fits the 16-bit field, and each of its slices fits one
/// e1000 data descriptor (16-bit length).
pub const TSO_MAX_FRAME: usize = 65535;
/// The largest frame on the wire (no jumbo frames; the NIC adds the CRC):
/// every segment the NIC cuts from a [`TxOffload::Tso`] frame fits it.
pub const MAX_WIRE_FRAME: usize = 1514;

/// Whether `[from, to)` can be an IPv4 or TCP header: 20 to 60 bytes in
/// 4-byte steps.
const fn header(from: usize, to: usize) -> bool {
    to >= from && to - from >= 20 && to - from <= 60 && (to - from).is_multiple_of(4)
}

/// A TCP segmentation offload request for a TCP/IPv4 frame in one
/// Ethernet II header: the IPv4 header at [`TSO_IP_START`], the TCP header
/// at [`Tso::tcp_start`], the payload at [`Tso::hdr_len`]. The NIC sends
/// the payload in segments of [`Tso::mss`] bytes (the last one shorter),
/// each behind a copy of the headers with the IPv4 total length, the IPv4
/// identification (+1 per segment), the TCP sequence number, PSH and FIN
/// (last segment only) and both checksums made right.
///
/// What the frame must hold: an IPv4 header checksum of 0, and in the TCP
/// checksum field the sum of the pseudo-header without its length (the
/// NIC adds each segment's TCP length).
///
/// Only requests the e1000 can carry out exist ([`Tso::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tso {
    tcp_start: u8,
    hdr_len: u8,
    mss: u16,
}

impl Tso {
    /// A request for a TCP header at `tcp_start` and payload at `hdr_len`,
    /// cut into `mss`-byte segments; `None` unless both headers are 20 to
    /// 60 bytes in 4-byte steps (as their length fields count them) and a
    /// segment of `mss` bytes behind the headers fits [`MAX_WIRE_FRAME`].
    pub const fn new(tcp_start: usize, hdr_len: usize, mss: usize) -> Option<Tso> {
        if !header(TSO_IP_START, tcp_start) || !header(tcp_start, hdr_len) {
            return None;
        }
        // hdr_len <= 134 here.
        if mss == 0 || mss > MAX_WIRE_FRAME - hdr_len {
            return None;
        }
        Some(Tso { tcp_start: tcp_start as u8, hdr_len: hdr_len as u8, mss: mss as u16 })
    }

    /// Where the TCP header starts (TUCSS).
    pub const fn tcp_start(self) -> usize {
        self.tcp_start as usize
    }

    /// The length of all headers: where the payload starts (HDRLEN).
    pub const fn hdr_len(self) -> usize {
        self.hdr_len as usize
    }

    /// Payload bytes per segment, at most (MSS).
    pub const fn mss(self) -> usize {
        self.mss as usize
    }

    /// Where the IPv4 header checksum is (IPCSO).
    pub const fn ip_checksum_at(self) -> usize {
        TSO_IP_START + 10
    }

    /// Where the TCP checksum is (TUCSO).
    pub const fn tcp_checksum_at(self) -> usize {
        self.tcp_start as usize + 16
    }

    /// How many segments a frame of `len` bytes becomes; `None` if it is
    /// not a frame this request can cut: at least one payload byte and at
    /// most [`TSO_MAX_FRAME`] bytes in all.
    pub const fn segments(self, len: usize) -> Option<usize> {
        if len <= self.hdr_len() || len > TSO_MAX_FRAME {
            return None;
        }
        Some((len - self.hdr_len()).div_ceil(self.mss()))
    }

    /// Whether `hdr` (the frame's first bytes) has the headers this request
    /// describes: IPv4 in Ethernet II, the IPv4 header length ending at
    /// [`Tso::tcp_start`], protocol TCP, the TCP header length ending at
    /// [`Tso::hdr_len`]. The NIC rewrites fields at these offsets in every
    /// segment.
    pub fn matches(self, hdr: &[u8]) -> bool {
        let (ip, tcp) = (TSO_IP_START, self.tcp_start());
        hdr.len() >= self.hdr_len()
            && hdr[12..14] == [0x08, 0x00]
            && hdr[ip] == 0x40 | ((tcp - ip) / 4) as u8
            && hdr[ip + 9] == 6
            && (hdr[tcp + 12] >> 4) as usize * 4 == self.hdr_len() - tcp
    }
}

/// What the NIC must do to a frame to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxOffload {
    /// The frame is complete (checksums filled in).
    None,
    /// The NIC must compute the ones'-complement sum from byte `start` to the
    /// end of the frame and store its complement at byte `offset` (e1000
    /// TUCSS/TUCSO; the field is preloaded with the pseudo-header sum).
    TcpChecksum {
        /// First byte summed (the TCP header).
        start: u16,
        /// Where the checksum goes.
        offset: u16,
    },
    /// The NIC must cut the frame into TCP segments (only where netdrv
    /// offers it, [`Offloads::tso`]).
    Tso(Tso),
}

impl TxOffload {
    /// The tag of a frame on channel B. Bits 62..64: the kind (0 none, 2
    /// TCP checksum, 1 TSO). TCP checksum: bits 0..16 start, 16..32
    /// offset. TSO: bits 0..8 the TCP header's start, 8..16 the headers'
    /// length, 16..32 the MSS. Every other bit is 0.
    pub fn tag(self) -> u64 {
        match self {
            TxOffload::None => 0,
            TxOffload::TcpChecksum { start, offset } => 1 << 63 | (offset as u64) << 16 | start as u64,
            TxOffload::Tso(t) => 1 << 62 | (t.mss as u64) << 16 | (t.hdr_len as u64) << 8 | t.tcp_start as u64,
        }
    }

    /// Inverse of [`TxOffload::tag`]; `None` for a tag it never makes (a
    /// reserved bit set, or a TSO request [`Tso::new`] refuses). The driver
    /// still checks a checksum request's offsets against the frame.
    pub fn from_tag(tag: u64) -> Option<TxOffload> {
        match tag >> 62 {
            0 => (tag == 0).then_some(TxOffload::None),
            2 => (tag >> 32 & 0x3fff_ffff == 0)
                .then_some(TxOffload::TcpChecksum { start: tag as u16, offset: (tag >> 16) as u16 }),
            1 if tag >> 32 & 0x3fff_ffff == 0 => {
                Tso::new(tag as u8 as usize, (tag >> 8) as u8 as usize, (tag >> 16) as u16 as usize).map(TxOffload::Tso)
            }
            _ => None,
        }
    }
}

counters::counters! {
    /// netdrv's counters (its `drv_stats` page). There is no transmit copy
    /// counter: the driver never copies a frame it sends (every slice gets
    /// its own descriptor); `BytesCopied` is the domain's count of any copy
    /// at all (after a restart: the frames it salvaged, `RxSalvaged`).
    pub enum DrvCounter {
        /// Frames received and handed to netstack.
        RxFrames = "drv_rx_frames",
        /// Their bytes.
        RxBytes = "drv_rx_bytes",
        /// Frames dropped on receive (errors, bad length, a broken link).
        RxDropped = "drv_rx_dropped",
        /// Frames sent.
        TxFrames = "drv_tx_frames",
        /// Their bytes.
        TxBytes = "drv_tx_bytes",
        /// TX descriptors used (a frame takes one per slice, plus contexts).
        TxDescriptors = "drv_tx_descriptors",
        /// Frames sent with checksum offload.
        TxOffloaded = "drv_tx_offloaded",
        /// Frames from netstack refused (bad length, offsets or slices).
        TxRejected = "drv_tx_rejected",
        /// Interrupts taken.
        Irqs = "drv_irqs",
        /// Signals to netstack.
        Wakeups = "drv_wakeups_sent",
        /// ARP frames received.
        ArpRx = "drv_arp_rx",
        /// ARP frames sent.
        ArpTx = "drv_arp_tx",
        /// 1 when the link is up.
        LinkUp = "drv_link_up",
        /// Times the receive ring could not be refilled (pool empty).
        RxRingEmpty = "drv_rx_ring_empty",
        /// Bytes the driver's domain copied (0 but for the frames a restart
        /// salvaged).
        BytesCopied = "drv_bytes_copied",
        /// TSC cycles of the driver's passes, without the time netstack ran
        /// inside its signals: the driver's own CPU cost.
        BusyCycles = "drv_busy_cycles",
        /// Frames the NIC cut into TCP segments (TSO; also counted in
        /// `TxFrames`, `TxBytes` and `TxOffloaded`).
        TxTsoFrames = "drv_tx_tso_frames",
        /// The TCP segments those frames became on the wire.
        TxTsoSegments = "drv_tx_tso_segments",
        /// Pages of the driver's pool in use (rings, posted buffers, frames
        /// netstack holds, and quarantined pages).
        RxPoolPagesInUse = "drv_rx_pool_pages_in_use",
        /// Of those, pages a dead incarnation left in use, quarantined
        /// until its death is settled.
        QuarantinedPages = "drv_quarantined_pages",
        /// Incarnations before this one (restarts by the supervisor).
        Restarts = "drv_restarts",
        /// Frames a dead incarnation's receive ring held untaken, salvaged
        /// (copied, counted in `BytesCopied`) by this one at its start.
        RxSalvaged = "drv_rx_salvaged",
        /// Writes of the receive tail (RDT): one per refill batch.
        RxTailWrites = "drv_rx_tail_writes",
        /// Take-overs of a running device that stopped the dead
        /// incarnation's transmitter (drained, then disabled) before
        /// netstack may reuse the frames it had lent it.
        TxQuiesced = "drv_tx_quiesced",
        /// Transmit descriptors a dead incarnation had posted that the
        /// device had not sent when it was stopped (never sent; TCP resends).
        TxAbandoned = "drv_tx_abandoned",
        /// Doorbell writes, each an exit to the hypervisor: the e1000's
        /// RDT and TDT writes, a virtio device's queue notifications.
        Notifies = "drv_notifies",
        /// Batches published to a virtio queue without a notification (the
        /// device had not asked for one: `VIRTIO_F_EVENT_IDX`).
        NotifiesSuppressed = "drv_notifies_suppressed",
        /// Used-ring entries of a virtio device that could not be true (an
        /// index ahead of what is in flight, an unknown id): the driver
        /// marks the device failed and stops.
        DeviceErrors = "drv_device_errors",
        /// Header bytes (never payload) of TSO frames a virtio driver wrote
        /// again with the IPv4 length and checksum a host stack checks.
        TxTsoHeaderBytes = "drv_tx_tso_header_bytes",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_tag_round_trip() {
        let tso = Tso::new(34, 66, 1448).unwrap();
        for o in [TxOffload::None, TxOffload::TcpChecksum { start: 34, offset: 50 }, TxOffload::Tso(tso)] {
            assert_eq!(TxOffload::from_tag(o.tag()), Some(o));
        }
        assert_eq!(TxOffload::TcpChecksum { start: 34, offset: 50 }.tag(), 1 << 63 | 50 << 16 | 34);
        assert_eq!(TxOffload::Tso(tso).tag(), 1 << 62 | 1448 << 16 | 66 << 8 | 34);
        // Tags nobody makes: reserved bits, both kinds, TSO requests the
        // NIC could not carry out.
        for bad in [
            1,
            1 << 40,
            1 << 63 | 1 << 32,
            3 << 62 | 34,
            1 << 62 | 1 << 40 | 1448 << 16 | 66 << 8 | 34,
            1 << 62 | 1448 << 16 | 66 << 8 | 33,
            1 << 62 | 1448 << 16 | 50 << 8 | 34,
            1 << 62 | 1500 << 16 | 66 << 8 | 34,
            1 << 62 | 66 << 8 | 34,
        ] {
            assert_eq!(TxOffload::from_tag(bad), None, "{bad:#x}");
        }
        const { assert!(REGION_BYTES <= 0x80000, "link dataports in the assemblies are 512 KiB") };
    }

    #[test]
    fn tso_requests_are_ones_the_e1000_can_carry_out() {
        let t = Tso::new(34, 54, 1460).unwrap();
        assert_eq!(
            (t.tcp_start(), t.hdr_len(), t.mss(), t.ip_checksum_at(), t.tcp_checksum_at()),
            (34, 54, 1460, 24, 50)
        );
        assert_eq!(Tso::new(34, 66, 1448).map(Tso::mss), Some(1448), "timestamps: 12 bytes of options");
        assert_eq!(Tso::new(74, 134, 1380).map(Tso::hdr_len), Some(134), "both headers at their longest");
        for (tcp, hdr, mss) in [
            (33, 54, 1000), // IPv4 header of 19 bytes
            (35, 55, 1000), // not a multiple of 4
            (78, 98, 1000), // IPv4 header of 64 bytes
            (34, 50, 1000), // TCP header of 16 bytes
            (34, 98, 1000), // TCP header of 64 bytes
            (34, 54, 0),    // no payload per segment
            (34, 54, 1461), // 1515-byte segments
            (34, 66, 1460), // likewise, with options
            (0, 0, 1),
            (usize::MAX, 54, 1000),
            (34, usize::MAX, 1000),
            (34, 54, usize::MAX),
        ] {
            assert_eq!(Tso::new(tcp, hdr, mss), None, "{tcp} {hdr} {mss}");
        }
        assert_eq!(t.segments(54), None, "no payload");
        assert_eq!(t.segments(55), Some(1));
        assert_eq!(t.segments(54 + 1460), Some(1));
        assert_eq!(t.segments(54 + 1461), Some(2));
        assert_eq!(t.segments(54 + 44 * 1460), Some(44));
        assert_eq!(t.segments(TSO_MAX_FRAME), Some((TSO_MAX_FRAME - 54).div_ceil(1460)));
        assert_eq!(t.segments(TSO_MAX_FRAME + 1), None);
    }

    #[test]
    fn a_tso_request_matches_only_its_headers() {
        let t = Tso::new(34, 66, 1448).unwrap();
        let mut h = [0u8; 66];
        h[12..14].copy_from_slice(&[0x08, 0x00]);
        h[14] = 0x45;
        h[23] = 6;
        h[34 + 12] = 8 << 4;
        assert!(t.matches(&h));
        assert!(!t.matches(&h[..65]), "shorter than the headers");
        for (at, v) in [(12, 0x86), (13, 0x06), (14, 0x46), (14, 0x65), (23, 17), (46, 7 << 4), (46, 5 << 4)] {
            let mut g = h;
            g[at] = v;
            assert!(!t.matches(&g), "byte {at} = {v:#x}");
        }
        assert!(!Tso::new(34, 54, 1460).unwrap().matches(&h), "a TCP header of 32 bytes is not one of 20");
    }

    #[test]
    fn offloads_word() {
        assert_eq!(Offloads::from_word(Offloads { tso: true }.word()), Offloads { tso: true });
        assert_eq!(Offloads::default().word(), 0);
        assert_eq!(Offloads::from_word(!1), Offloads { tso: false }, "reserved bits ignored");
    }

    /// The names readers (the Robot suites, bench/) know: unchanged, in
    /// this order.
    #[test]
    fn counter_names_are_the_published_ones() {
        assert!(counters::names_are_valid::<DrvCounter>());
        let names: [&str; 29] = [
            "drv_rx_frames",
            "drv_rx_bytes",
            "drv_rx_dropped",
            "drv_tx_frames",
            "drv_tx_bytes",
            "drv_tx_descriptors",
            "drv_tx_offloaded",
            "drv_tx_rejected",
            "drv_irqs",
            "drv_wakeups_sent",
            "drv_arp_rx",
            "drv_arp_tx",
            "drv_link_up",
            "drv_rx_ring_empty",
            "drv_bytes_copied",
            "drv_busy_cycles",
            "drv_tx_tso_frames",
            "drv_tx_tso_segments",
            "drv_rx_pool_pages_in_use",
            "drv_quarantined_pages",
            "drv_restarts",
            "drv_rx_salvaged",
            "drv_rx_tail_writes",
            "drv_tx_quiesced",
            "drv_tx_abandoned",
            "drv_notifies",
            "drv_notifies_suppressed",
            "drv_device_errors",
            "drv_tx_tso_header_bytes",
        ];
        assert!(DrvCounter::ALL.iter().map(|c| c.name()).eq(names));
    }
}
