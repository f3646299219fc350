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
//! | B | netstack ([`STACK_SIDE`]) | frames to send: a header slice and payload slices by reference, the checksum offload request in the tag ([`TxOffload::tag`]) |
//!
//! netstack runs above netdrv and initialises the region; netdrv attaches
//! once it is initialised (and exits if it is not). netdrv writes the
//! protocol words [`WORD_MAC`] and [`WORD_LINK_UP`]. Each side wakes the
//! other only for what it asked (the rings' "signal me" flags).
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

/// How the TCP checksum of a frame to send is to be completed.
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
}

impl TxOffload {
    /// The tag of a frame on channel B: bit 63: offload; bits 0..16:
    /// start; bits 16..32: offset.
    pub fn tag(self) -> u64 {
        match self {
            TxOffload::None => 0,
            TxOffload::TcpChecksum { start, offset } => 1 << 63 | (offset as u64) << 16 | start as u64,
        }
    }

    /// Inverse of [`TxOffload::tag`]. Garbage decodes to something
    /// harmless: the driver checks the offsets against the frame.
    pub fn from_tag(tag: u64) -> TxOffload {
        if tag >> 63 == 0 {
            TxOffload::None
        } else {
            TxOffload::TcpChecksum { start: tag as u16, offset: (tag >> 16) as u16 }
        }
    }
}

counters::counters! {
    /// netdrv's counters (its `drv_stats` page). There is no transmit copy
    /// counter: the driver never copies a frame (every slice gets its own
    /// descriptor); `BytesCopied` is the domain's count of any copy at all.
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
        /// Bytes the driver's domain copied (0: it copies nothing).
        BytesCopied = "drv_bytes_copied",
        /// TSC cycles of the driver's passes, without the time netstack ran
        /// inside its signals: the driver's own CPU cost.
        BusyCycles = "drv_busy_cycles",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_tag_round_trip() {
        for o in [TxOffload::None, TxOffload::TcpChecksum { start: 34, offset: 50 }] {
            assert_eq!(TxOffload::from_tag(o.tag()), o);
        }
        assert_eq!(TxOffload::TcpChecksum { start: 34, offset: 50 }.tag(), 1 << 63 | 50 << 16 | 34);
        const { assert!(REGION_BYTES <= 0x80000, "link dataports in the assemblies are 512 KiB") };
    }

    /// The names readers (the Robot suites, bench/) know: unchanged, in
    /// this order.
    #[test]
    fn counter_names_are_the_published_ones() {
        assert!(counters::names_are_valid::<DrvCounter>());
        let names: [&str; 16] = [
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
        ];
        assert!(DrvCounter::ALL.iter().map(|c| c.name()).eq(names));
    }
}
