//! The protocol between the TCP/IP stack (netstack) and its socket
//! clients (httpd, tcp_echo), and netstack's counter page. Tiny and
//! kernel-free: clients depend on this, not on the stack.
//!
//! ## The client region
//! Each `client` dataport is an IO-Lite duplex region ([`iolite::Duplex`])
//! of [`GEOMETRY`]:
//!
//! | channel | sender | messages |
//! |---|---|---|
//! | A | netstack ([`STACK_SIDE`]) | [`Event`]s; `Data` carries received bytes by reference |
//! | B | the client ([`CLIENT_SIDE`]) | [`Request`]s; `Send` carries the bytes to send by reference |
//!
//! The client runs above netstack and initialises the region; netstack
//! attaches at start (and exits if it is not initialised) and records the
//! generation it attached to ([`WORD_STACK_ATTACHED`]). When netstack
//! dies, the client (which follows its deaths in the system events page)
//! sets the region up again; the restarted netstack attaches only to a
//! generation no incarnation of it attached to before. Each side wakes
//! the other only for what it asked (the rings' "signal me" flags). A
//! second client region (`client2`, where an assembly connects it) is set
//! up by its client whenever it starts: netstack attaches when it sees the
//! generation, has no event for it (that client polls), and attaches a new
//! incarnation only after the client's death (the system events page).
//!
//! ## Messages
//! Every message is an IO-Lite aggregate and a tag: the tag carries the
//! operation and its arguments ([`Request::encode`], [`Event::encode`]),
//! the aggregate the data, by reference (`Send` requests and `Data`
//! events; empty otherwise). So sending a file is one descriptor holding
//! its slices, and the stack keeps those references until TCP has them
//! acknowledged.
//!
//! Tag layout: bits 56..63 operation, 24..55 id (connection id or port),
//! 0..23 argument.
//!
//! A tag has no room for a connection id *and* the peer's address, so an
//! accepted connection is announced by two events in a row: [`Event::Peer`]
//! (address and port) and then [`Event::Accepted`] (the connection), which
//! takes the peer of the `Peer` event just before it. One channel keeps
//! them in order, so the client needs no more than "the last peer seen".
//!
//! ## The client half
//! [`client`]: a client's connection table, one record per connection,
//! which reads the send window events for it (httpd and tcp_echo). It
//! allocates: every client has a heap.
//!
//! ## Counters
//! [`StackCounter`]: netstack's counter page (`stack_stats`), read by the
//! cgi (`/cgi-bin/stats`) and tcp_echo.
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod client;
pub mod window;
pub use window::{
    send_allowance, Grant, SendWindow, SEND_CREDIT, SEND_SPACE_MAX, SEND_SPACE_MIN, WINDOW_SENDS_MODULUS, WINDOW_UNIT,
    WINDOW_UNITS_MODULUS,
};

use core::sync::atomic::Ordering;
pub use counters::{Counter, CounterPage, Values};
use iolite::duplex::Control;
use iolite::{init_duplex, Aggregate, ChannelTx, Domain, Duplex, DuplexAttach, Geometry, PeerId, RwRegion, Side};

/// A connection id (never 0; not reused while the stack runs for a long
/// time: 2^32 connections).
pub type ConnId = u32;

/// Aggregate descriptors in flight per direction (336 bytes each).
pub const FWD_CAP: usize = 256;
/// Releases in flight per direction (16 bytes each).
pub const REL_CAP: usize = 2048;
/// Both channels' ring capacities.
pub const GEOMETRY: Geometry = Geometry { fwd: FWD_CAP, rel: REL_CAP };
/// The smallest client dataport.
pub const REGION_BYTES: usize = GEOMETRY.duplex_bytes();
/// netstack's side of a client region.
pub const STACK_SIDE: Side = Side::A;
/// The client's side of its region.
pub const CLIENT_SIDE: Side = Side::B;
/// Protocol word (netstack): the generation of the region netstack
/// attached to. [`init_client`] clears it (a fresh region shows 0), so a
/// restarted netstack that finds it equal to the region's generation knows
/// a dead incarnation of its own used these channels, and waits for the
/// client to set the region up again (after it saw netstack's death in the
/// system events page) instead of attaching to rings in any state. A
/// client that writes it delays only its own attachment.
pub const WORD_STACK_ATTACHED: usize = 0;

/// Sets a client region up and attaches the client's side: the client
/// runs above netstack, so it initialises the region, before anything
/// that could block; netstack attaches once it sees the generation.
///
/// # Safety
/// `region` must be the client dataport, mapped read-write for `'d` and
/// shared with netstack only (`netstack` is its peer id), which must not
/// use it yet.
pub unsafe fn init_client<'d>(domain: &'d Domain, netstack: PeerId, region: RwRegion) -> iolite::Result<Duplex<'d>> {
    // SAFETY: per this function's contract.
    unsafe {
        init_duplex(region, GEOMETRY)?;
        Duplex::attach(DuplexAttach { domain, peer: netstack, region, geometry: GEOMETRY, side: CLIENT_SIDE })
    }
}

/// Whether an incarnation of netstack already attached to the region's
/// current generation ([`WORD_STACK_ATTACHED`]): a restarted netstack
/// must then wait for the client to set the region up again. The word is
/// the client's to clobber; read once.
pub fn stack_attached_before(control: &Control) -> bool {
    let g = control.generation();
    g != 0 && control.word(WORD_STACK_ATTACHED).load(Ordering::Acquire) == g
}

/// Records that netstack attached to `generation` of the region (see
/// [`stack_attached_before`]).
pub fn mark_stack_attached(control: &Control, generation: u64) {
    control.word(WORD_STACK_ATTACHED).store(generation, Ordering::Release);
}

/// A request waiting for room in the client's ring: its tag
/// ([`Request::encode`]) and its aggregate.
pub type Queued<'d> = (u64, Aggregate<'d>);

/// Puts a waiting request into the client's ring (`client.tx`), or hands
/// it back when the ring does not take it now: what an `outbox::Outbox`
/// of requests drains through.
#[allow(clippy::result_large_err)] // handed back by value: nothing is lost
pub fn send_request<'d>(tx: &mut ChannelTx<'d>, (tag, agg): Queued<'d>) -> Result<(), Queued<'d>> {
    tx.send(agg, tag, 0).map_err(|(_, agg)| (tag, agg))
}

/// Operation code of [`Request::Listen`].
pub const OP_LISTEN: u8 = 1;
/// Operation code of [`Request::Unlisten`].
pub const OP_UNLISTEN: u8 = 2;
/// Operation code of [`Request::Send`].
pub const OP_SEND: u8 = 3;
/// Operation code of [`Request::Close`].
pub const OP_CLOSE: u8 = 4;
/// Operation code of [`Request::Abort`].
pub const OP_ABORT: u8 = 5;
/// Operation code of [`Request::Receive`].
pub const OP_RECEIVE: u8 = 6;
/// Operation code of [`Request::HandOff`].
pub const OP_HAND_OFF: u8 = 7;
const EV_LISTENING: u8 = 0x81;
const EV_ACCEPTED: u8 = 0x82;
const EV_DATA: u8 = 0x83;
const EV_EOF: u8 = 0x84;
const EV_WINDOW: u8 = 0x85;
const EV_CLOSED: u8 = 0x86;
const EV_ERROR: u8 = 0x87;
const EV_PEER: u8 = 0x88;

fn tag(op: u8, id: u32, arg: u32) -> u64 {
    (op as u64) << 56 | (id as u64) << 24 | (arg & 0xff_ffff) as u64
}

/// `(operation, id, argument)` of any tag: what an error report names for
/// a request that does not decode.
pub fn split_tag(t: u64) -> (u8, u32, u32) {
    untag(t)
}

fn untag(t: u64) -> (u8, u32, u32) {
    ((t >> 56) as u8, (t >> 24) as u32, (t & 0xff_ffff) as u32)
}

/// A client's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Listen on `port` with a backlog of `backlog` connections.
    Listen {
        /// TCP port.
        port: u16,
        /// Connections established before they are accepted (1..=64).
        backlog: u16,
    },
    /// Stop listening on `port`.
    Unlisten {
        /// TCP port.
        port: u16,
    },
    /// Send the message's aggregate on `conn`.
    Send {
        /// Connection.
        conn: ConnId,
    },
    /// Close `conn` after the data sent so far (FIN).
    Close {
        /// Connection.
        conn: ConnId,
    },
    /// Reset `conn` at once, dropping unsent data.
    Abort {
        /// Connection.
        conn: ConnId,
    },
    /// Stop (`on: false`) or resume (`on: true`) delivering `conn`'s
    /// received data: while stopped its bytes stay in TCP, whose receive
    /// window closes on the peer (a client that cannot take more input
    /// now, e.g. a request body its consumer has not read). A `Data` event
    /// already queued still comes.
    Receive {
        /// Connection.
        conn: ConnId,
        /// Deliver data (the default) or not.
        on: bool,
    },
    /// Receive `conn`'s data from now on into the stack's hand-off pool
    /// (`on: true`) or its shared receive pool (`on: false`, the default).
    /// The shared pool holds every connection's bytes; the hand-off pool
    /// only those of connections whose input the client hands on to a
    /// component that must not see other clients' bytes (a web server's
    /// request bodies for its CGI): the client can then pass them on by
    /// reference instead of copying them into a pool of its own. Data
    /// already delivered stays where it is. `InvalidArgument` if the stack
    /// has no hand-off pool.
    HandOff {
        /// Connection.
        conn: ConnId,
        /// Into the hand-off pool or not.
        on: bool,
    },
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ErrorCode {
    /// No such connection or listener.
    NotFound = 1,
    /// Too much data pending on the connection; the aggregate was dropped.
    WouldBlock = 2,
    /// The connection cannot send any more.
    NotConnected = 3,
    /// The port is already listened on.
    AddressInUse = 4,
    /// A bad argument.
    InvalidArgument = 5,
    /// The stack ran out of memory.
    NoMemory = 6,
    /// The connection or port belongs to another client.
    NotYours = 7,
    /// The message could not be decoded.
    BadRequest = 8,
}

impl ErrorCode {
    fn from_u8(v: u8) -> Option<Self> {
        use ErrorCode::*;
        [NotFound, WouldBlock, NotConnected, AddressInUse, InvalidArgument, NoMemory, NotYours, BadRequest]
            .into_iter()
            .find(|c| *c as u8 == v)
    }
}

/// An event for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `Listen` succeeded.
    Listening {
        /// TCP port.
        port: u16,
    },
    /// The peer of the connection announced by the next event, an
    /// [`Event::Accepted`] (see the module docs). Sent only when the stack
    /// knows the peer, which it does for every established connection.
    Peer {
        /// The peer's IPv4 address.
        addr: [u8; 4],
        /// The peer's TCP port.
        port: u16,
    },
    /// A connection was accepted on `port`; its peer is the one of the
    /// [`Event::Peer`] right before it, if there was one.
    Accepted {
        /// The listening port.
        port: u16,
        /// The new connection.
        conn: ConnId,
    },
    /// The message's aggregate holds data received on `conn`.
    Data {
        /// Connection.
        conn: ConnId,
    },
    /// The peer closed its sending half of `conn`; no more `Data`.
    Eof {
        /// Connection.
        conn: ConnId,
    },
    /// `conn`'s send window (see [`window`]): the client may make sends on
    /// it until its count of them (modulo [`WINDOW_SENDS_MODULUS`])
    /// reaches `sends`, and send bytes until its count of them reaches
    /// `units` [`WINDOW_UNIT`]s (modulo [`WINDOW_UNITS_MODULUS`]), both
    /// counted from the connection's start. [`SendWindow`] keeps the
    /// counts.
    Window {
        /// Connection.
        conn: ConnId,
        /// The send limit, modulo [`WINDOW_SENDS_MODULUS`].
        sends: u8,
        /// The byte limit in [`WINDOW_UNIT`]s, modulo
        /// [`WINDOW_UNITS_MODULUS`].
        units: u16,
    },
    /// `conn` is gone (closed or reset); its id is no longer valid.
    Closed {
        /// Connection.
        conn: ConnId,
    },
    /// A request on `id` (a connection, or a port) failed.
    Error {
        /// The request's operation code.
        op: u8,
        /// Its connection id or port.
        id: u32,
        /// Why.
        code: ErrorCode,
    },
}

impl Request {
    /// The channel tag of this request.
    pub fn encode(&self) -> u64 {
        match *self {
            Request::Listen { port, backlog } => tag(OP_LISTEN, port as u32, backlog as u32),
            Request::Unlisten { port } => tag(OP_UNLISTEN, port as u32, 0),
            Request::Send { conn } => tag(OP_SEND, conn, 0),
            Request::Close { conn } => tag(OP_CLOSE, conn, 0),
            Request::Abort { conn } => tag(OP_ABORT, conn, 0),
            Request::Receive { conn, on } => tag(OP_RECEIVE, conn, u32::from(on)),
            Request::HandOff { conn, on } => tag(OP_HAND_OFF, conn, u32::from(on)),
        }
    }

    /// Decodes a request's tag; anything malformed is `BadRequest`.
    pub fn decode(t: u64) -> Result<Request, ErrorCode> {
        let (op, id, arg) = untag(t);
        let port = || u16::try_from(id).map_err(|_| ErrorCode::BadRequest);
        Ok(match op {
            OP_LISTEN => {
                Request::Listen { port: port()?, backlog: u16::try_from(arg).map_err(|_| ErrorCode::BadRequest)? }
            }
            OP_UNLISTEN => Request::Unlisten { port: port()? },
            OP_SEND => Request::Send { conn: id },
            OP_CLOSE => Request::Close { conn: id },
            OP_ABORT => Request::Abort { conn: id },
            OP_RECEIVE if arg <= 1 => Request::Receive { conn: id, on: arg == 1 },
            OP_HAND_OFF if arg <= 1 => Request::HandOff { conn: id, on: arg == 1 },
            _ => return Err(ErrorCode::BadRequest),
        })
    }

    /// The request's operation code (what an [`Event::Error`] names).
    pub fn op(&self) -> u8 {
        untag(self.encode()).0
    }

    /// The request's connection id or port.
    pub fn id(&self) -> u32 {
        untag(self.encode()).1
    }
}

impl Event {
    /// The channel tag of this event.
    pub fn encode(&self) -> u64 {
        match *self {
            Event::Listening { port } => tag(EV_LISTENING, port as u32, 0),
            Event::Peer { addr, port } => tag(EV_PEER, u32::from_be_bytes(addr), port as u32),
            Event::Accepted { port, conn } => tag(EV_ACCEPTED, conn, port as u32),
            Event::Data { conn } => tag(EV_DATA, conn, 0),
            Event::Eof { conn } => tag(EV_EOF, conn, 0),
            Event::Window { conn, sends, units } => tag(EV_WINDOW, conn, u32::from(sends) << 16 | u32::from(units)),
            Event::Closed { conn } => tag(EV_CLOSED, conn, 0),
            Event::Error { op, id, code } => tag(EV_ERROR, id, (op as u32) << 8 | code as u32),
        }
    }

    /// Decodes an event's tag (client side); `None` if malformed.
    pub fn decode(t: u64) -> Option<Event> {
        let (op, id, arg) = untag(t);
        Some(match op {
            EV_LISTENING => Event::Listening { port: u16::try_from(id).ok()? },
            EV_PEER => Event::Peer { addr: id.to_be_bytes(), port: u16::try_from(arg).ok()? },
            EV_ACCEPTED => Event::Accepted { port: u16::try_from(arg).ok()?, conn: id },
            EV_DATA => Event::Data { conn: id },
            EV_EOF => Event::Eof { conn: id },
            EV_WINDOW => Event::Window { conn: id, sends: (arg >> 16) as u8, units: arg as u16 },
            EV_CLOSED => Event::Closed { conn: id },
            EV_ERROR => Event::Error { op: (arg >> 8) as u8, id, code: ErrorCode::from_u8(arg as u8)? },
            _ => return None,
        })
    }
}

counters::counters! {
    /// netstack's counters (its `stack_stats` page).
    pub enum StackCounter {
        /// The build's copy mode (0 iolite, 1 flash, 2 posix).
        CopyMode = "tcp_copy_mode",
        /// The TCP transmit checksum (0 cached, 1 software, 2 offload).
        ChecksumMode = "tcp_checksum_mode",
        /// Frames handed to the NIC.
        TxFrames = "tcp_tx_frames",
        /// Frames dropped on transmit.
        TxDropped = "tcp_tx_dropped",
        /// Frames received.
        RxFrames = "tcp_rx_frames",
        /// TCP payload bytes attached to frames by reference.
        TxPayloadByRef = "tcp_tx_payload_by_ref",
        /// TCP payload bytes sent again.
        TxRetransmitted = "tcp_tx_retransmitted",
        /// TCP payload bytes copied into smoltcp's send rings (copy modes).
        TxPayloadCopiedSocket = "tcp_tx_payload_copied_socket",
        /// TCP payload bytes copied into frame buffers.
        TxPayloadCopiedFrame = "tcp_tx_payload_copied_frame",
        /// TCP payload bytes copied on the send path, in all.
        TxCopied = "tcp_tx_copied",
        /// Zero-copy segments with small pieces coalesced into one copy.
        TxCoalescedSegments = "tcp_tx_coalesced_segments",
        /// TCP payload bytes delivered to clients.
        RxPayload = "tcp_rx_payload",
        /// Received payload bytes copied.
        RxPayloadCopied = "tcp_rx_payload_copied",
        /// Checksum cache hits.
        CsumHits = "tcp_csum_hits",
        /// Checksum cache misses.
        CsumMisses = "tcp_csum_misses",
        /// Bytes whose checksum came from the cache.
        CsumBytesCached = "tcp_csum_bytes_cached",
        /// Bytes summed.
        CsumBytesSummed = "tcp_csum_bytes_summed",
        /// Cache hit rate, percent.
        CsumHitRatePercent = "tcp_csum_hit_rate_percent",
        /// Bytes the stack's domain copied.
        BytesCopied = "tcp_bytes_copied",
        /// Bytes the stack's domain lent by reference.
        BytesByRefSent = "tcp_bytes_by_ref_sent",
        /// Connections accepted.
        ConnectionsAccepted = "tcp_connections_accepted",
        /// smoltcp polls.
        Polls = "tcp_polls",
        /// Times the stack was woken.
        Wakeups = "tcp_wakeups",
        /// Requests from the client.
        ClientRequests = "tcp_client_requests",
        /// Events to the client.
        ClientEvents = "tcp_client_events",
        /// Rounds that left frames waiting for room in netdrv's ring.
        TxHeldBack = "tcp_tx_held_back",
        /// TSC cycles the stack ran (without its client).
        BusyCycles = "tcp_busy_cycles",
        /// Times smoltcp was told to wait for the NIC queue or frame pool.
        TxDeferred = "tcp_tx_deferred",
        /// Times an established connection waited in the backlog for memory.
        AcceptDeferred = "tcp_accept_deferred",
        /// Bytes of socket rings allocated.
        SocketBytes = "tcp_socket_bytes",
        /// Descriptors rejected (forged or invalid references).
        RejectedDescriptors = "tcp_rejected_descriptors",
        /// Of them: a pool outside the sender's grant list.
        RejectedForeignPool = "tcp_rejected_foreign_pool",
        /// Of them: one of our buffers we had not lent to the sender.
        RejectedNotGranted = "tcp_rejected_not_granted",
        /// Segments withheld: an untrusted buffer changed generation.
        TxStaleWithheld = "tcp_tx_stale_withheld",
        /// Connections reset for that reason.
        TxStaleResets = "tcp_tx_stale_resets",
        /// TCP payload bytes copied by coalescing.
        TxCoalescedBytes = "tcp_tx_coalesced_bytes",
        /// Segments not sent because their payload could not be found.
        TxWithheld = "tcp_tx_withheld",
        /// Header bytes written into frame header objects.
        TxHeaderBytes = "tcp_tx_header_bytes",
        /// Bytes of non-TCP frames copied whole.
        TxNontcpFrameBytes = "tcp_tx_nontcp_frame_bytes",
        /// Bytes of received frames flattened before smoltcp read them.
        RxFrameBytesFlattened = "tcp_rx_frame_bytes_flattened",
        /// Times data, EOF, accept or close events waited for ring room.
        EventsDeferred = "tcp_events_deferred",
        /// Error events dropped (event ring full).
        EventsDropped = "tcp_events_dropped",
        /// Sends refused with `WouldBlock`.
        SendsRefused = "tcp_sends_refused",
        /// Windows that closed on a connection (its sends held back: the
        /// client pulls nothing more until the next window).
        SendFull = "tcp_send_full",
        /// Times a client paused a connection's input (`Request::Receive`).
        ReceivePauses = "tcp_receive_pauses",
        /// Connections open.
        Connections = "tcp_connections",
        /// Heap bytes in use.
        HeapUsed = "tcp_heap_used",
        /// Bytes held back in send queues.
        SendQueuedBytes = "tcp_send_queued_bytes",
        /// Frames refused on the link (invalid descriptors).
        RxErrors = "tcp_rx_errors",
        /// Channels broken by a peer.
        ChannelsBroken = "tcp_channels_broken",
        /// Pages of the frame header pool in use.
        HdrPoolPagesInUse = "tcp_hdr_pool_pages_in_use",
        /// Pages of the received-data pool in use.
        SockPoolPagesInUse = "tcp_sock_pool_pages_in_use",
        /// Listens refused: over the client's listen budget.
        ListensRefused = "tcp_listens_refused",
        /// Clients cut off for breaking a channel.
        ClientsCutOff = "tcp_clients_cut_off",
        /// Restarts asked of the supervisor for clients that broke a channel.
        ClientRestartRequests = "tcp_client_restart_requests",
        /// Requests from the second client (`client2`).
        Client2Requests = "tcp_client2_requests",
        /// Events to the second client.
        Client2Events = "tcp_client2_events",
        /// The second client's messages refused one by one (its quota of
        /// our buffers): its channel stayed up. A forged reference breaks
        /// the channel instead (`tcp_channels_broken`).
        Client2Refused = "tcp_client2_refused",
        /// The second client's descriptors rejected, whatever the reason.
        Client2Rejected = "tcp_client2_rejected",
        /// Releases refused: for buffers, generations or counts that the
        /// sender was never lent (any peer).
        BadReleases = "tcp_bad_releases",
        /// Held-back sends offered to TCP that did not fit.
        SendRetries = "tcp_send_retries",
        /// Connections taken out of TIME-WAIT early: more of them waited
        /// than the stack keeps (`time_wait_cap`).
        TimeWaitRecycled = "tcp_time_wait_recycled",
        /// Frames handed to the NIC as TCP segments of up to 64 KiB for it
        /// to cut (segmentation offload; netdrv counts the segments).
        TxTsoFrames = "tcp_tx_tso_frames",
        /// 1 when the NIC cuts TCP segments (netdrv offers it and the stack
        /// uses it).
        Tso = "tcp_tso",
        /// Segments for the NIC to cut that spanned more slices than a
        /// frame takes, sent as several frames by reference.
        TxTsoSplit = "tcp_tx_tso_split",
        /// Bytes of clients' sends held back (beyond what TCP took: its
        /// queues are `tcp_send_queued_bytes`).
        SendHeldBackBytes = "tcp_send_held_back_bytes",
        /// Bytes queued in the copy modes' send rings now (copies of
        /// response data not yet acknowledged; 0 in iolite mode, whose
        /// sockets queue references). fs charges them to its cache's
        /// budget (components/fs/src/budget.rs).
        SendRingBytesInUse = "tcp_send_ring_bytes_in_use",
        /// Received payload bytes delivered in the hand-off pool
        /// (`Request::HandOff`).
        RxHandOffBytes = "tcp_rx_hand_off_bytes",
        /// Of connections handed off, bytes delivered in the shared pool
        /// because the hand-off pool was full (the client copies them).
        RxHandOffFallbackBytes = "tcp_rx_hand_off_fallback_bytes",
        /// Incarnations of netstack before this one (0: first start).
        Restarts = "tcp_restarts",
        /// Pages of our pools (headers, received data) a dead incarnation
        /// left in use, not reused until its death is settled.
        QuarantinedPages = "tcp_quarantined_pages",
        /// netdrv deaths settled before its new incarnation had stopped the
        /// device (published its MAC address): the frames lent to the dead
        /// one were released only then, never while the NIC could read them.
        DrvReleasesDeferred = "tcp_drv_releases_deferred",
        /// Connection requests (SYNs, cookie ACKs) dropped because their
        /// listener's accept queue was full (the client retransmits).
        SynDroppedBacklogFull = "tcp_syn_dropped_backlog_full",
        // Receive-side bounds in pages (netstack `Config::rx_conn_pages`).
        /// Received bytes delivered into a page their connection had
        /// partly filled (tiny segments share pages).
        RxCoalescedBytes = "tcp_rx_coalesced_bytes",
        /// Times a connection's input stayed in TCP because its unreleased
        /// received data held its share of pages.
        RxPausedConnPages = "tcp_rx_paused_conn_pages",
        /// Partly filled receive pages given back once only netstack held
        /// them.
        RxOpenPagesSwept = "tcp_rx_open_pages_swept",
        /// Backlog sockets that closed before they were accepted (reset
        /// after the handshake, timed out), replaced by listening ones.
        BacklogRecycled = "tcp_backlog_recycled",
        /// Backlog sockets that waited out `syn_recv_timeout_ms` in
        /// SYN-RECEIVED, replaced by listening ones.
        SynRecvTimeouts = "tcp_syn_recv_timeouts",
        /// SYNs answered with a SYN cookie (beyond the half-open budgets).
        SynCookiesSent = "tcp_syn_cookies_sent",
        /// ACKs whose SYN cookie checked out.
        SynCookiesValidated = "tcp_syn_cookies_validated",
        /// ACKs taken for a cookie's whose cookie was bad (reset).
        SynCookiesRejected = "tcp_syn_cookies_rejected",
        /// SYNs dropped because their sender held its share of sockets
        /// (`per_address_connections`).
        SynDroppedPerAddress = "tcp_syn_dropped_per_address",
        /// Connections reset by their peer (or timed out) forgotten at
        /// once, what was queued on them released and the client told
        /// `Closed`, not when it closed them.
        DeadConnsForgotten = "tcp_dead_conns_forgotten",
        /// Received bytes of such connections dropped unread: the client
        /// sent on the connection instead of taking them.
        DeadInputDropped = "tcp_dead_input_dropped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_garbage_is_rejected() {
        for r in [
            Request::Listen { port: 80, backlog: 16 },
            Request::Unlisten { port: 65535 },
            Request::Send { conn: u32::MAX },
            Request::Close { conn: 1 },
            Request::Abort { conn: 7 },
            Request::Receive { conn: 7, on: false },
            Request::Receive { conn: u32::MAX, on: true },
            Request::HandOff { conn: 9, on: true },
            Request::HandOff { conn: 0, on: false },
        ] {
            assert_eq!(Request::decode(r.encode()), Ok(r));
        }
        for e in [
            Event::Listening { port: 80 },
            Event::Peer { addr: [10, 0, 2, 2], port: 40000 },
            Event::Peer { addr: [255, 255, 255, 255], port: 65535 },
            Event::Accepted { port: 443, conn: 99 },
            Event::Data { conn: 3 },
            Event::Eof { conn: 3 },
            Event::Window { conn: 3, sends: 0, units: 0 },
            Event::Window { conn: 3, sends: 32, units: 70 },
            Event::Window { conn: u32::MAX, sends: u8::MAX, units: u16::MAX },
            Event::Closed { conn: 3 },
            Event::Error { op: OP_SEND, id: 5, code: ErrorCode::NotYours },
        ] {
            assert_eq!(Event::decode(e.encode()), Some(e));
        }
        assert_eq!(Request::decode(0), Err(ErrorCode::BadRequest));
        assert_eq!(Request::decode(u64::MAX), Err(ErrorCode::BadRequest));
        assert_eq!(Request::decode(tag(OP_LISTEN, 70000, 1)), Err(ErrorCode::BadRequest));
        assert_eq!(Request::decode(tag(OP_HAND_OFF, 1, 2)), Err(ErrorCode::BadRequest));
        assert_eq!(Event::decode(tag(EV_ERROR, 1, 0xff)), None);
        // A port that does not fit 16 bits is garbage, not a truncated port.
        assert_eq!(Event::decode(tag(EV_PEER, 1, 0x1_0000)), None);
    }

    /// The names readers (the Robot suites, bench/) know: unchanged, in
    /// this order.
    #[test]
    fn counter_names_are_the_published_ones() {
        assert!(counters::names_are_valid::<StackCounter>());
        let names: [&str; 84] = [
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
            "tcp_receive_pauses",
            "tcp_connections",
            "tcp_heap_used",
            "tcp_send_queued_bytes",
            "tcp_rx_errors",
            "tcp_channels_broken",
            "tcp_hdr_pool_pages_in_use",
            "tcp_sock_pool_pages_in_use",
            "tcp_listens_refused",
            "tcp_clients_cut_off",
            "tcp_client_restart_requests",
            "tcp_client2_requests",
            "tcp_client2_events",
            "tcp_client2_refused",
            "tcp_client2_rejected",
            "tcp_bad_releases",
            "tcp_send_retries",
            "tcp_time_wait_recycled",
            "tcp_tx_tso_frames",
            "tcp_tso",
            "tcp_tx_tso_split",
            "tcp_send_held_back_bytes",
            "tcp_send_ring_bytes_in_use",
            "tcp_rx_hand_off_bytes",
            "tcp_rx_hand_off_fallback_bytes",
            "tcp_restarts",
            "tcp_quarantined_pages",
            "tcp_drv_releases_deferred",
            "tcp_syn_dropped_backlog_full",
            "tcp_rx_coalesced_bytes",
            "tcp_rx_paused_conn_pages",
            "tcp_rx_open_pages_swept",
            "tcp_backlog_recycled",
            "tcp_syn_recv_timeouts",
            "tcp_syn_cookies_sent",
            "tcp_syn_cookies_validated",
            "tcp_syn_cookies_rejected",
            "tcp_syn_dropped_per_address",
            "tcp_dead_conns_forgotten",
            "tcp_dead_input_dropped",
        ];
        assert!(StackCounter::ALL.iter().map(|c| c.name()).eq(names));
    }
}
