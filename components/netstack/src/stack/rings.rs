//! Socket rings and their budget (`Config::socket_memory`): every socket
//! has a receive ring from the heap, and in the copy modes a send ring
//! sized to what its peer reads; zero-copy sockets have none (their
//! "ring" is a length, the bytes are the sender's).

use alloc::vec::Vec;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::time::Duration;

use super::NetStack;

/// A zeroed ring of `n` bytes, or `None` if the heap cannot give it now
/// (instead of the allocator's abort, which takes the component down).
pub(super) fn try_ring(n: usize) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, 0);
    Some(v)
}

impl<'d> NetStack<'d> {
    /// Bytes of socket rings allocated from the heap now: every receive
    /// ring, and in the copy modes every send ring (zero-copy sockets have
    /// none: their "ring" is a length).
    pub fn socket_memory(&self) -> usize {
        let copy = !self.zero_copy();
        self.sockets
            .iter()
            .filter_map(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => Some(t.recv_capacity() + if copy { t.send_capacity() } else { 0 }),
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .sum()
    }

    /// Bytes queued in send rings now: in the copy modes, copies of
    /// response data not yet acknowledged (what a conventional stack's
    /// socket buffers hold); 0 in iolite mode, where a socket's queue is
    /// references to the sender's pages (counted where those pages live).
    pub fn send_ring_bytes(&self) -> usize {
        if self.zero_copy() {
            return 0;
        }
        self.sockets
            .iter()
            .filter_map(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => Some(t.send_queue()),
                #[allow(unreachable_patterns)]
                _ => None,
            })
            .sum()
    }

    /// Whether `n` more bytes of rings fit [`Config::socket_memory`].
    pub(super) fn rings_fit(&self, n: usize) -> bool {
        self.socket_memory().saturating_add(n) <= self.cfg.socket_memory
    }

    /// A socket with its receive ring. In the copy modes its send ring only
    /// if `with_send_ring` (a connection); a listening socket gets it when
    /// accepted (`attach_send_ring`), so an idle backlog costs receive rings
    /// only. `None` if the rings do not fit the budget or the heap.
    pub(super) fn new_socket(&self, with_send_ring: bool) -> Option<tcp::Socket<'static>> {
        let copy_ring = if self.zero_copy() || !with_send_ring { 0 } else { self.cfg.send_window };
        if !self.rings_fit(self.cfg.recv_window + copy_ring) {
            return None;
        }
        let rx = tcp::SocketBuffer::new(try_ring(self.cfg.recv_window)?);
        let mut s = if self.zero_copy() {
            tcp::Socket::new_zero_copy_tx(rx, self.cfg.send_window)
        } else {
            tcp::Socket::new(rx, tcp::SocketBuffer::new(try_ring(copy_ring)?))
        };
        s.set_nagle_enabled(self.cfg.nagle);
        s.set_timeout(Some(Duration::from_secs(60)));
        Some(s)
    }

    /// Copy modes: gives an accepted socket its send ring. False if it does
    /// not fit the budget or the heap now.
    pub(super) fn attach_send_ring(&mut self, h: SocketHandle) -> bool {
        let s = self.sockets.get::<tcp::Socket>(h);
        let size = self.copy_ring_for(s.remote_window());
        if self.zero_copy() || s.send_capacity() >= size {
            return true;
        }
        if !self.rings_fit(size) {
            return false;
        }
        let Some(ring) = try_ring(size) else { return false };
        // Cannot fail: nothing can have been queued on an unaccepted socket.
        self.sockets.get_mut::<tcp::Socket>(h).replace_tx_buffer(tcp::SocketBuffer::new(ring)).is_ok()
    }

    /// Copy modes: the send ring for a peer whose largest window is
    /// `window`: what it may hold (the window and its slack) as a power of
    /// two, within 16 KiB and `Config::send_window`. A peer that reads
    /// through a small window so costs a small ring, as Linux sizes socket
    /// buffers by what a connection needs: with every ring at the full
    /// window, 64 slow readers took the whole `socket_memory` and new
    /// connections waited in the backlog for them.
    pub(super) fn copy_ring_for(&self, window: usize) -> usize {
        let want = window.saturating_add(self.slack_for(window)).next_power_of_two();
        want.max(16 * 1024).min(self.cfg.send_window)
    }
}
