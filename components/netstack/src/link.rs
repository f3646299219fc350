//! What the seL4 components of the network path share besides the stack
//! itself: the shape of their channel dataports, how a frame's checksum
//! offload request travels, and the counter pages that make "zero copy"
//! observable (netdrv, netstack, and the clients that print or serve them).
//!
//! Kernel-free and allocation-free, so the driver and the clients can use it
//! without pulling the stack in at run time.
//!
//! ## Channel dataports
//! The `link` (netdrv ↔ netstack) and each `client` (netstack ↔ a socket
//! client) dataport is an IO-Lite duplex region ([`iolite::Duplex`]) of
//! [`GEOMETRY`]: channel A, channel B, a control page.
//!
//! | region | side A (sends on A) | side B (sends on B) | initialised by |
//! |---|---|---|---|
//! | `link` | netdrv: received frames | netstack: frames to send, the offload request in the tag | netstack (it runs first) |
//! | `client` | netstack: events | the client: requests | the client (it runs first) |
//!
//! The link's protocol words: [`WORD_MAC`] and [`WORD_LINK_UP`], written by
//! netdrv. Wake-ups follow the rings' "signal me" flags: each side signals
//! the other only for what it asked before it blocked.

use core::sync::atomic::{AtomicU64, Ordering};
use iolite::{Geometry, Side};

use crate::TxOffload;

/// Aggregate descriptors in flight per direction (336 bytes each).
pub const FWD_CAP: usize = 256;
/// Releases in flight per direction (16 bytes each). A release names one
/// buffer (several holds coalesce), so this many distinct buffers can be on
/// their way back before the returns wait (they are kept, never lost).
pub const REL_CAP: usize = 2048;
/// Both channels' ring capacities.
pub const GEOMETRY: Geometry = Geometry { fwd: FWD_CAP, rel: REL_CAP };
/// The smallest link or client dataport.
pub const PAIR_BYTES: usize = GEOMETRY.duplex_bytes();
/// netdrv's side of the link.
pub const DRV_SIDE: Side = Side::A;
/// netstack's side of the link.
pub const STACK_LINK_SIDE: Side = Side::B;
/// netstack's side of a client region.
pub const STACK_CLIENT_SIDE: Side = Side::A;
/// A client's side of its region.
pub const CLIENT_SIDE: Side = Side::B;
/// Link word (netdrv): the MAC address in the low 48 bits, bit 63 = valid.
pub const WORD_MAC: usize = 0;
/// Link word (netdrv): 1 when the link is up.
pub const WORD_LINK_UP: usize = 1;

/// The tag of a frame on the netstack → netdrv channel: the checksum offload
/// request. Bit 63: offload; bits 0..16: start; bits 16..32: offset.
pub fn encode_offload(o: TxOffload) -> u64 {
    match o {
        TxOffload::None => 0,
        TxOffload::TcpChecksum { start, offset } => 1 << 63 | (offset as u64) << 16 | start as u64,
    }
}

/// Inverse of [`encode_offload`] (garbage decodes to something harmless:
/// the driver checks the offsets against the frame).
pub fn decode_offload(tag: u64) -> TxOffload {
    if tag >> 63 == 0 {
        TxOffload::None
    } else {
        TxOffload::TcpChecksum { start: tag as u16, offset: (tag >> 16) as u16 }
    }
}

/// A page of named counters, written by one component, read by others.
#[repr(C)]
pub struct CounterPage {
    /// [`COUNTERS_MAGIC`] once the writer has started.
    pub magic: AtomicU64,
    /// Bumped by the writer after each update of `values`.
    pub updates: AtomicU64,
    /// The counters; their meaning is given by a `*_NAMES` table.
    pub values: [AtomicU64; 126],
}

/// "IOLCNTRS".
pub const COUNTERS_MAGIC: u64 = u64::from_le_bytes(*b"IOLCNTRS");

impl CounterPage {
    /// The counter page at `base`.
    ///
    /// # Safety
    /// `base` must be a dataport of at least 4096 bytes, 8-aligned, mapped
    /// for the caller's lifetime (read-only is fine for readers: they only
    /// load), used only through this type.
    pub unsafe fn at(base: *const u8) -> &'static CounterPage {
        // SAFETY: per the contract.
        unsafe { &*(base as *const CounterPage) }
    }

    /// Publishes `values` (the writer).
    pub fn publish(&self, values: &[u64]) {
        for (slot, v) in self.values.iter().zip(values) {
            slot.store(*v, Ordering::Relaxed);
        }
        self.magic.store(COUNTERS_MAGIC, Ordering::Release);
        self.updates.fetch_add(1, Ordering::Release);
    }

    /// Whether the writer has published at least once.
    pub fn valid(&self) -> bool {
        self.magic.load(Ordering::Acquire) == COUNTERS_MAGIC
    }

    /// Counter `i`.
    pub fn get(&self, i: usize) -> u64 {
        self.values.get(i).map_or(0, |v| v.load(Ordering::Relaxed))
    }

    /// Writes `"name":value` pairs for `names` as JSON members (no braces).
    pub fn write_json(&self, out: &mut impl core::fmt::Write, names: &[&str], first: &mut bool) -> core::fmt::Result {
        for (i, n) in names.iter().enumerate() {
            if !*first {
                out.write_char(',')?;
            }
            *first = false;
            write!(out, "\"{n}\":{}", self.get(i))?;
        }
        Ok(())
    }
}

/// netdrv's counters, in [`CounterPage::values`] order.
pub const DRV_NAMES: &[&str] = &[
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

/// netstack's counters, in [`CounterPage::values`] order.
pub const STACK_NAMES: &[&str] = &[
    "tcp_copy_mode",
    "tcp_checksum_mode",
    "tcp_tx_frames",
    "tcp_tx_dropped",
    "tcp_rx_frames",
    "tcp_tx_payload_by_ref",
    "tcp_tx_retransmitted",
    "tcp_tx_payload_copied_socket",
    "tcp_tx_payload_copied_frame",
    "tcp_tx_copied",
    "tcp_tx_coalesced_segments",
    "tcp_rx_payload",
    "tcp_rx_payload_copied",
    "tcp_csum_hits",
    "tcp_csum_misses",
    "tcp_csum_bytes_cached",
    "tcp_csum_bytes_summed",
    "tcp_csum_hit_rate_percent",
    "tcp_bytes_copied",
    "tcp_bytes_by_ref_sent",
    "tcp_connections_accepted",
    "tcp_polls",
    "tcp_wakeups",
    "tcp_client_requests",
    "tcp_client_events",
    "tcp_tx_held_back",
    "tcp_busy_cycles",
    "tcp_tx_deferred",
    "tcp_accept_deferred",
    "tcp_socket_bytes",
    "tcp_rejected_descriptors",
    "tcp_rejected_foreign_pool",
    "tcp_rejected_not_granted",
    "tcp_tx_stale_withheld",
    "tcp_tx_stale_resets",
    "tcp_tx_coalesced_bytes",
    "tcp_tx_withheld",
    "tcp_tx_header_bytes",
    "tcp_tx_nontcp_frame_bytes",
    "tcp_rx_frame_bytes_flattened",
    "tcp_events_deferred",
    "tcp_events_dropped",
    "tcp_sends_refused",
    "tcp_send_full",
    "tcp_connections",
    "tcp_heap_used",
    "tcp_send_queued_bytes",
    "tcp_rx_errors",
    "tcp_channels_broken",
    "tcp_hdr_pool_pages_in_use",
    "tcp_sock_pool_pages_in_use",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_tag_round_trip_and_layout() {
        for o in [TxOffload::None, TxOffload::TcpChecksum { start: 34, offset: 50 }] {
            assert_eq!(decode_offload(encode_offload(o)), o);
        }
        const { assert!(PAIR_BYTES <= 0x80000, "pair dataports in netecho.camkes are 512 KiB") };
        assert_eq!(PAIR_BYTES, 2 * GEOMETRY.page_bytes() + 4096);
        assert!(core::mem::size_of::<CounterPage>() <= 4096);
        assert!(DRV_NAMES.len() <= 126 && STACK_NAMES.len() <= 126);
    }
}
