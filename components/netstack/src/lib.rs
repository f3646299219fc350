//! `netstack`: TCP/IPv4 for Iolite OS, on smoltcp 0.14.0 (pinned, with our
//! patches in `patches/smoltcp/`, zero-copy transmit first), over IO-Lite
//! aggregates.
//!
//! * [`NetStack`]: the stack (IPv4, ARP, ICMP echo, TCP; static address or
//!   DHCP), with a socket-like API: listen/accept/connect, send an
//!   aggregate, receive aggregates, close.
//! * Zero-copy send (iolite mode): sent aggregates stay in the sender's
//!   buffers, referenced until acknowledged; frames are built from the same
//!   references, retransmissions too ([`device`](crate::device) docs).
//! * [`csum::ChecksumCache`]: per-slice TCP checksum cache keyed by
//!   ⟨pool, buffer, generation, block⟩ (IO-Lite §2.9), or NIC offload.
//! * Copy modes (flash/posix): payload copied into smoltcp's send ring and
//!   into the frame buffer, as a conventional stack does; counted.
//! * [`api`]: the client interface's state machine (the messages are the
//!   `socket-api` protocol crate's); [`client`]: one client's region,
//!   session and guards, as the component serves it.
//! * [`frame`]: the frame model between the stack and the NIC driver (the
//!   link protocol is the `nic-api` crate's).
//!
//! See README.md for the design and the measurements.
#![no_std]
#![deny(missing_docs)]
// Aggregates are handed back on failure, like iolite's own API.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod admission;
pub mod api;
pub mod client;
mod conn;
pub mod csum;
mod device;
pub mod frame;
#[cfg(test)]
mod keepalive_tests;
mod stack;
#[cfg(test)]
mod tests;
mod txqueue;
#[cfg(test)]
mod zerowindow_tests;

pub use frame::{NicPort, TxFrame, TxOffload};
pub use stack::{DhcpLease, NetStack, Recv, TcpState};

use iolite::{CopyMode, PoolId};

pub use socket_api::ConnId;

/// How the TCP checksum of transmitted segments is computed (smoltcp's
/// `ChecksumCapabilities` has TCP transmit checksums off in every case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxChecksum {
    /// In software, with the per-slice checksum cache.
    Cached,
    /// In software, summing every payload byte of every frame.
    Software,
    /// By the NIC (e1000 TCP checksum offload through a context descriptor).
    Offload,
}

/// Stack configuration. [`Config::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// MAC address of the interface.
    pub mac: [u8; 6],
    /// Static address and prefix length (default 10.0.2.15/24), unless `dhcp`.
    pub address: ([u8; 4], u8),
    /// Default gateway (default 10.0.2.2), unless `dhcp`.
    pub gateway: Option<[u8; 4]>,
    /// Get the address and gateway by DHCP instead.
    pub dhcp: bool,
    /// Largest frame including the Ethernet header (default 1514).
    pub mtu: usize,
    /// Copy discipline (default: the build's, `iolite::BUILD_COPY_MODE`).
    pub copy_mode: CopyMode,
    /// TCP transmit checksum (default [`TxChecksum::Cached`]).
    pub checksum: TxChecksum,
    /// TCP segmentation offload (default off; only where the NIC offers
    /// it, `nic_api::Offloads`): a TCP segment may carry up to 64 KiB,
    /// which the NIC cuts into segments of at most the MSS
    /// ([`TxOffload::Tso`]; their checksums are the NIC's whatever
    /// `checksum` says).
    pub tso: bool,
    /// The stack's own pool (owned by its domain): frame headers and frames
    /// in copy modes (and received data, unless `rx_pool` says otherwise).
    pub pool: PoolId,
    /// Where received data is copied for the application (owned by the
    /// stack's domain; default: `pool`). A separate pool keeps received data
    /// that applications hold on to from starving frame headers.
    pub rx_pool: PoolId,
    /// Where the received data of connections the client hands off
    /// (`Request::HandOff`) goes instead (owned by the stack's domain):
    /// a pool that holds only input the client passes on by reference
    /// to a component that must not see other connections' bytes (a web
    /// server's request bodies for its CGI). `None`: no hand-off.
    pub hand_off_pool: Option<PoolId>,
    /// Per-connection send window: bytes queued and not yet acknowledged.
    pub send_window: usize,
    /// Per-connection receive window (smoltcp's receive ring).
    pub recv_window: usize,
    /// Most bytes a connection may queue beyond the peer's advertised
    /// window (default 64 KiB): enough to keep the pipe full, while a peer
    /// that reads nothing pins no more than this of the sender's buffers.
    /// A connection's slack is twice the largest window its peer has
    /// advertised, within `min_send_slack..=send_slack`.
    pub send_slack: usize,
    /// Least slack of a connection (default 8 KiB).
    pub min_send_slack: usize,
    /// Aggregates a zero-copy connection's send queue holds at most (each
    /// up to 16 slices; small sends are merged into one; default 64): with
    /// the byte bound above, what a connection costs in heap is bounded
    /// even when it is sent one tiny aggregate at a time.
    pub max_queued: usize,
    /// Seed of smoltcp's random numbers (initial sequence numbers, ports).
    pub random_seed: u64,
    /// Checksum cache entries.
    pub csum_cache_entries: usize,
    /// Checksum cache block size, as a power of two.
    pub csum_block_shift: u32,
    /// Nagle's algorithm (default off: servers send whole responses).
    pub nagle: bool,
    /// Most bytes of socket rings the stack allocates from the heap
    /// (receive rings, and send rings in the copy modes; default 8 MiB).
    /// Beyond it a listener keeps fewer sockets ready and an established
    /// connection waits in the backlog until rings are freed, instead of
    /// the heap running out (which panics the component).
    pub socket_memory: usize,
    /// Most connections kept in TIME-WAIT (default 64). TIME-WAIT is the
    /// state of the side that closed first, which for a web server is the
    /// server: every connection it closes would hold its socket and
    /// receive ring for smoltcp's TIME-WAIT delay, and a few hundred
    /// closes a second would take every ring of `socket_memory`, so that
    /// new connections are refused. Beyond the cap the oldest is dropped
    /// silently, as Linux recycles TIME-WAIT sockets beyond
    /// `tcp_max_tw_buckets`; TIME-WAIT only guards against a delayed
    /// duplicate of the old connection, and its last ACK was sent.
    pub time_wait_cap: usize,
    /// Most pages of the receive pools (`rx_pool`, `hand_off_pool`) that
    /// one connection's delivered data may keep in use (default 24: a
    /// whole request body of 64 KiB behind a full head). The pages count
    /// until the client has released everything in them. While a
    /// connection holds its share the stack leaves its input in TCP (its
    /// window closes on the peer) and delivers again once the client gave
    /// pages back: a peer that trickles a request no client completes
    /// cannot take the pool other connections receive into. Small chunks
    /// share a page of their connection, so 1-byte segments cost a page
    /// per 4096 of them, not a page each.
    pub rx_conn_pages: usize,
    /// How long a connection request may wait in SYN-RECEIVED for the
    /// peer's ACK (default 3000 ms; smoltcp alone: its 60 s timeout).
    /// Beyond it the socket goes back to the listener, silently (the peer
    /// never answered: a spoofed source, or a client that left).
    pub syn_recv_timeout_ms: u64,
    /// Sockets of one listener that may sit in SYN-RECEIVED (default 32),
    /// apart from its backlog: SYNs beyond it are answered with SYN
    /// cookies, so half-open requests never take the sockets of
    /// connections that complete.
    pub half_open_budget: usize,
    /// Sockets in SYN-RECEIVED one remote address may hold (default 16);
    /// beyond it its SYNs get cookies.
    pub per_address_half_open: usize,
    /// Sockets one remote address may hold, connections and backlog
    /// together (default 256); beyond it its SYNs are dropped.
    pub per_address_connections: usize,
}

impl Config {
    /// The defaults: 10.0.2.15/24 via 10.0.2.2 (QEMU user networking),
    /// 1514-byte frames, build copy mode, cached checksums, 256 KiB send and
    /// 64 KiB receive windows, a 16384-entry cache of 256-byte blocks (4 MiB
    /// of contents).
    pub fn new(mac: [u8; 6], pool: PoolId) -> Self {
        Self {
            mac,
            address: ([10, 0, 2, 15], 24),
            gateway: Some([10, 0, 2, 2]),
            dhcp: false,
            mtu: 1514,
            copy_mode: iolite::BUILD_COPY_MODE,
            checksum: TxChecksum::Cached,
            tso: false,
            pool,
            rx_pool: pool,
            hand_off_pool: None,
            send_window: 256 * 1024,
            recv_window: 64 * 1024,
            send_slack: 64 * 1024,
            min_send_slack: 8 * 1024,
            max_queued: 64,
            random_seed: 0x0101_7e05,
            csum_cache_entries: 16384,
            csum_block_shift: 8,
            nagle: false,
            socket_memory: 8 << 20,
            time_wait_cap: 64,
            rx_conn_pages: 24,
            syn_recv_timeout_ms: 3000,
            half_open_budget: 32,
            per_address_half_open: 16,
            per_address_connections: 256,
        }
    }
}

/// Errors of the stack's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetError {
    /// No such connection or listener.
    NotFound,
    /// Not enough send space now (retry after acknowledgements).
    WouldBlock,
    /// The connection cannot send (closed, reset, or not yet established).
    NotConnected,
    /// The port is already listened on.
    AddressInUse,
    /// A bad argument (port 0, backlog out of range...).
    InvalidArgument,
    /// An IO-Lite operation failed (e.g. the stack's pool is exhausted).
    Iolite(iolite::Error),
    /// No memory for the socket's rings now ([`Config::socket_memory`] or
    /// the heap); retry after connections have closed.
    NoMemory,
}

/// The stack's counters ("zero copy" is measured, not claimed). Every copy
/// is also added to the domain's `bytes_copied`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Frames handed to the NIC.
    pub tx_frames: u64,
    /// Of those, TCP segments of up to 64 KiB for the NIC to cut
    /// ([`Config::tso`]).
    pub tx_tso_frames: u64,
    /// Segments for the NIC to cut whose bytes spanned more slices than a
    /// frame takes, sent as several such frames (by reference, instead of
    /// coalescing most of their bytes into a copy).
    pub tx_tso_split: u64,
    /// Frames dropped on transmit: only replies to received frames that
    /// found neither pool nor queue room (the stack's own segments wait
    /// instead, see `tx_deferred`).
    pub tx_dropped: u64,
    /// Times smoltcp was told to wait because the NIC queue or the frame
    /// pool was full (back-pressure: the segments went out later, nothing
    /// was dropped).
    pub tx_deferred: u64,
    /// SYNs (and cookie ACKs) dropped because their listener's accept
    /// queue was full (established connections not accepted yet, or no
    /// memory for a cookie's socket): the client retransmits them.
    pub syn_dropped_backlog_full: u64,
    /// Times an established connection was left in the backlog for lack of
    /// memory for its send ring (copy modes; accepted on a later try).
    pub accept_deferred: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// TCP payload bytes attached to frames by reference (retransmissions
    /// included).
    pub tx_payload_by_ref: u64,
    /// TCP payload bytes sent again (zero-copy connections).
    pub tx_retransmitted: u64,
    /// TCP payload bytes copied into smoltcp's send rings (copy modes).
    pub tx_payload_copied_socket: u64,
    /// TCP payload bytes copied into frame buffers (copy modes; in iolite
    /// mode only payload smoltcp generates itself, such as keep-alives).
    pub tx_payload_copied_frame: u64,
    /// Zero-copy segments whose range of the send queue had more slices than
    /// a frame takes (many tiny aggregates, e.g. pipelined responses of
    /// small files): the smaller pieces were coalesced into one copy.
    pub tx_coalesced_segments: u64,
    /// TCP payload bytes copied by that coalescing (the rest of those
    /// segments went by reference).
    pub tx_coalesced_bytes: u64,
    /// Segments smoltcp emitted whose payload could not be found (or built)
    /// and that were therefore not sent (its retransmission sends them
    /// later); never a frame with bytes that are not the payload.
    pub tx_withheld: u64,
    /// Header bytes (Ethernet, IPv4, TCP) smoltcp wrote and the device
    /// copied into frame header objects (metadata, not payload).
    pub tx_header_bytes: u64,
    /// Bytes of non-TCP frames (ARP, ICMP echo replies, DHCP) copied whole
    /// from smoltcp's scratch buffer into frame buffers.
    pub tx_nontcp_frame_bytes: u64,
    /// Segments not sent because a slice of an untrusted pool (CGI output)
    /// no longer had the generation it was queued with: its owner reused
    /// the page, so the bytes are not the stream's (checked before every
    /// transmission and retransmission).
    pub tx_stale_withheld: u64,
    /// Connections reset for that reason.
    pub tx_stale_resets: u64,
    /// TCP payload bytes delivered to applications.
    pub rx_payload: u64,
    /// Received payload bytes copied (frame → smoltcp ring → aggregate: 2×).
    pub rx_payload_copied: u64,
    /// Of `rx_payload`: bytes delivered in the hand-off pool.
    pub rx_hand_off: u64,
    /// Of connections handed off: bytes delivered in `rx_pool` because the
    /// hand-off pool had no room (the client copies them on).
    pub rx_hand_off_fallback: u64,
    /// Bytes of received frames that came in more than one slice and were
    /// flattened into one buffer before smoltcp read them (netdrv gives
    /// one slice per frame: 0 there).
    pub rx_frame_bytes_flattened: u64,
    /// DHCP leases obtained.
    pub dhcp_leases: u64,
    /// Connections dropped from TIME-WAIT early ([`Config::time_wait_cap`]).
    pub time_wait_recycled: u64,
    /// Connections looked at after polls: those a segment, the user or a
    /// due timer touched (all of them only after a frame that could not
    /// be attributed), not every one per poll.
    pub poll_visits: u64,

    // Receive-side bounds in pages ([`Config::rx_conn_pages`]).
    /// Received bytes delivered into a page their connection already had
    /// partly filled (each chunk used to take a page of its own).
    pub rx_coalesced_bytes: u64,
    /// Times a connection's input was left in TCP because its delivered,
    /// unreleased data held its share of pages.
    pub rx_paused_conn_pages: u64,
    /// Partly filled receive pages given up because nothing but the stack
    /// held them any more (idle connections keep no page).
    pub rx_open_pages_swept: u64,
    /// Backlog sockets that closed before they were accepted (a reset
    /// after the handshake, any timeout), replaced by fresh listening
    /// ones.
    pub backlog_recycled: u64,
    /// Backlog sockets that waited [`Config::syn_recv_timeout_ms`] in
    /// SYN-RECEIVED and were replaced by fresh listening ones.
    pub syn_recv_timeouts: u64,
    /// SYNs answered with a SYN cookie (no socket).
    pub syn_cookies_sent: u64,
    /// ACKs that carried a good cookie.
    pub syn_cookies_validated: u64,
    /// ACKs taken for cookies (one was sent recently, no socket had their
    /// 4-tuple) whose cookie was bad: smoltcp answers them with a reset.
    pub syn_cookies_rejected: u64,
    /// SYNs (and cookie ACKs) dropped because their sender held
    /// [`Config::per_address_connections`] sockets already.
    pub syn_dropped_per_address: u64,
    /// Connections whose socket closed under their user (a reset from the
    /// peer, a timeout) forgotten at once, their queued references
    /// released, instead of when the user closed them.
    pub dead_conns_forgotten: u64,
    /// Received bytes of such connections dropped unread because their
    /// user sent on them instead (see `NetStack::forget_dead_with_input`).
    pub dead_input_dropped: u64,
}

impl NetStats {
    /// TCP payload bytes copied on the send path (socket ring, frame
    /// buffers, coalesced pieces).
    pub fn tx_copied(&self) -> u64 {
        self.tx_payload_copied_socket + self.tx_payload_copied_frame + self.tx_coalesced_bytes
    }
}

/// Gives back most of `v`'s capacity once it is far more than its length
/// (four times, and more than a few dozen): a burst of hundreds of
/// connections grows the per-connection tables, and memory must come
/// back once they are gone, not stay at the burst's high-water mark. The
/// margin keeps a steady load from shrinking and growing them in turn.
pub(crate) fn shrink_unused<T>(v: &mut alloc::vec::Vec<T>) {
    if v.capacity() > 64 && v.capacity() > 4 * v.len() {
        v.shrink_to(2 * v.len().max(16));
    }
}

/// [`shrink_unused`] for a queue.
pub(crate) fn shrink_unused_deque<T>(v: &mut alloc::collections::VecDeque<T>) {
    if v.capacity() > 64 && v.capacity() > 4 * v.len() {
        v.shrink_to(2 * v.len().max(16));
    }
}
