//! One connection of the stack: its socket, its send queue of references
//! and what the stack tracks of it between polls; and the 4-tuple that
//! names it to the device layer.

use alloc::vec::Vec;
use iolite::{BufMut, PoolId};
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::wire::IpAddress;

use crate::txqueue::TxQueue;
use crate::ConnId;
use smoltcp::socket::tcp::State as TcpState;

/// (local address, local port, remote address, remote port).
pub(crate) type Tuple = ([u8; 4], u16, [u8; 4], u16);

/// One connection (an accepted or connected TCP socket).
pub(crate) struct Conn<'d> {
    pub id: ConnId,
    pub handle: SocketHandle,
    /// Zero-copy send (iolite mode): the socket holds lengths, `queue` the data.
    pub zero_copy: bool,
    /// (local address, local port, remote address, remote port).
    pub tuple: Option<Tuple>,
    /// Sequence number of `queue`'s first byte (set when the connection is
    /// made and after each poll, when the queue is trimmed to what is
    /// unacknowledged; nothing else moves it).
    pub seq_base: u32,
    /// Stream offset of `queue`'s first byte.
    pub front: u64,
    /// Highest stream offset transmitted so far (retransmission accounting).
    pub sent_hi: u64,
    pub queue: TxQueue<'d>,
    pub closed_by_user: bool,
    /// Copy modes: the send ring went back to the heap (closed by the user
    /// and everything acknowledged).
    pub ring_released: bool,
    /// A queued slice went stale (see `TxQueue::stale_slice`): the
    /// connection is reset after this poll.
    pub reset_stale: bool,
    /// In `NetStack::touched` (see there).
    pub touched: bool,
    /// Received data goes into `Config::hand_off_pool` (`set_hand_off`).
    pub hand_off: bool,
    /// The TCP state as of the end of the last poll (a change that no
    /// received segment caused, e.g. a timeout, still touches it).
    pub last_state: TcpState,
    /// When it entered TIME-WAIT (`NetStack::time_waits` then): the oldest
    /// go first when more wait than `Config::time_wait_cap`.
    pub time_wait_order: Option<u64>,
    /// The largest window the peer advertised so far: what sets the
    /// connection's slack (`NetStack::slack_of`).
    pub max_window: usize,
    /// The page small received chunks go into, one after another, until it
    /// is full (`NetStack::recv`): this connection's only, so what one
    /// connection holds never pins a page of another's bytes.
    pub rx_open: Option<BufMut<'d>>,
    /// In `NetStack::rx_open_list` (looked at by the sweep).
    pub rx_open_listed: bool,
    /// Buffers this connection's data was delivered in that may still be
    /// in use: (pool, buffer, generation, pages). Pruned as they are
    /// freed; what they add up to is bounded by `Config::rx_conn_pages`.
    pub rx_bufs: Vec<(PoolId, u32, u32, u32)>,
    /// In `NetStack::rx_paused`: its input waits in TCP for pages back.
    pub rx_paused: bool,
}

/// The IPv4 octets of `a` (`None` for any other address family).
pub(crate) fn ipv4_of(a: IpAddress) -> Option<[u8; 4]> {
    #[allow(unreachable_patterns)]
    match a {
        IpAddress::Ipv4(v) => Some(v.octets()),
        _ => None,
    }
}

/// Whether `c`'s socket `s` closed under its user (reset by the peer,
/// timed out, aborted for a stale slice) and the user has taken all it
/// received: nothing sent on it can reach anyone, so it is forgotten at
/// once, its queue's references go back and its user hears `Closed`. A
/// peer that pipelined large responses and reset must not have them
/// pulled (from a file cache, by reference) only to be refused here: it
/// used to stay until its user closed it, reading as end of input.
pub(crate) fn died_under_user(c: &Conn, s: &tcp::Socket) -> bool {
    !c.closed_by_user && s.state() == TcpState::Closed && s.recv_queue() == 0
}

/// When a connection the user closed entered TIME-WAIT (its order), if
/// it did: the ones `Config::time_wait_cap` bounds.
pub(crate) fn in_time_wait(c: &Conn) -> Option<u64> {
    if c.closed_by_user {
        c.time_wait_order
    } else {
        None
    }
}

/// The 4-tuple of socket `s`, once both its ends are known.
pub(crate) fn tuple_of(s: &tcp::Socket) -> Option<Tuple> {
    let (l, r) = (s.local_endpoint()?, s.remote_endpoint()?);
    Some((ipv4_of(l.addr)?, l.port, ipv4_of(r.addr)?, r.port))
}
