//! The send side of a connection: how much it may take (the peer's
//! window plus a slack, within the send capacity), and sends, queued by
//! reference in iolite mode or copied into the send ring otherwise.

use iolite::Aggregate;
use smoltcp::socket::tcp;

use super::rings::try_ring;
use super::NetStack;
use crate::conn::Conn;
use crate::{ConnId, NetError};

impl<'d> NetStack<'d> {
    /// Bytes that [`NetStack::send`] can take on `id` now.
    pub fn send_space(&self, id: ConnId) -> Result<usize, NetError> {
        let c = &self.conns[self.conn(id)?];
        Ok(self.space_of(c, self.sockets.get::<tcp::Socket>(c.handle)))
    }

    /// Whether a client that has used up its send allowance on `id` is
    /// worth waking with the space there is now: half of what the
    /// connection may hold is free, it cannot send any more (the client
    /// must learn that), or acknowledgements do not bring a visit
    /// (`NetStack::take_touched` reports freed space for zero-copy
    /// connections only). Told earlier, a client would be woken for each
    /// acknowledgement's few KiB: at 1 MiB per response that was 25
    /// wake-ups of httpd, each an address-space switch each way. Told
    /// later, what stays queued (the other half) keeps the wire busy
    /// meanwhile.
    pub fn send_space_worth_telling(&self, id: ConnId) -> bool {
        let Ok(i) = self.conn(id) else { return true };
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if !c.zero_copy || !s.may_send() {
            return true;
        }
        let limit = s.remote_window().saturating_add(self.slack_of(c, s)).min(s.send_capacity());
        self.space_of(c, s).saturating_mul(2) >= limit
    }

    /// What a socket may take: its send capacity, and no more than the
    /// peer's advertised window plus the connection's slack queued in all
    /// (unacknowledged and unsent). A peer that stops reading (zero window)
    /// so holds at most the slack of the sender's buffers, whatever the
    /// sender has to send; the rest waits with the sender (back-pressure).
    fn space_of(&self, c: &Conn<'d>, s: &tcp::Socket) -> usize {
        let limit = s.remote_window().saturating_add(self.slack_of(c, s)).min(s.send_capacity());
        limit.saturating_sub(s.send_queue())
    }

    /// A connection's slack: four times the largest window its peer advertised,
    /// within `Config::min_send_slack..=Config::send_slack`. The slack is
    /// there so that data is ready when the window opens, and a window
    /// opens by at most its largest size per round trip: a peer that reads
    /// through a 2 KiB buffer needs a few KiB ready, not 64, and hundreds
    /// of such peers must not pin the file cache (each pins its window
    /// plus this).
    fn slack_of(&self, c: &Conn<'d>, s: &tcp::Socket) -> usize {
        self.slack_for(c.max_window.max(s.remote_window()))
    }

    /// The slack for a peer whose largest window is `window`.
    pub(super) fn slack_for(&self, window: usize) -> usize {
        window.saturating_mul(4).clamp(self.cfg.min_send_slack.min(self.cfg.send_slack), self.cfg.send_slack)
    }

    /// Whether [`NetStack::send`] on `id` could succeed given room: the
    /// connection exists, is not closed by the user and TCP may send.
    pub fn may_send(&self, id: ConnId) -> bool {
        self.conn(id).is_ok_and(|i| {
            let c = &self.conns[i];
            !c.closed_by_user && self.sockets.get::<tcp::Socket>(c.handle).may_send()
        })
    }

    /// Aggregates the send queue of `id` holds (heap use; bounded by
    /// `Config::max_queued`).
    pub fn send_queue_entries(&self, id: ConnId) -> Result<usize, NetError> {
        Ok(self.conns[self.conn(id)?].queue.entries())
    }

    /// Bytes queued on `id` and not yet acknowledged.
    pub fn send_queued(&self, id: ConnId) -> Result<usize, NetError> {
        let c = &self.conns[self.conn(id)?];
        Ok(self.sockets.get::<tcp::Socket>(c.handle).send_queue())
    }

    /// Sends an aggregate on `id`, all or nothing. In iolite mode the stack
    /// keeps the aggregate's references until the bytes are acknowledged (no
    /// byte is copied); in flash/posix mode it copies the bytes into the
    /// socket's send ring (counted) and releases the aggregate at once. The
    /// aggregate is handed back on failure (`WouldBlock`: not enough space).
    pub fn send(&mut self, id: ConnId, agg: Aggregate<'d>) -> Result<(), (NetError, Aggregate<'d>)> {
        let i = match self.conn(id) {
            Ok(i) => i,
            Err(e) => return Err((e, agg)),
        };
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if c.closed_by_user || !s.may_send() {
            return Err((NetError::NotConnected, agg));
        }
        let n = agg.len();
        if n == 0 {
            return Ok(());
        }
        if !c.zero_copy && s.send_queue() == 0 {
            // The peer's window grew beyond what its ring was sized for:
            // a larger ring, while nothing is queued in the old one.
            let (have, want) = (s.send_capacity(), self.copy_ring_for(c.max_window.max(s.remote_window())));
            if want > have && self.rings_fit(want - have) {
                if let Some(ring) = try_ring(want) {
                    let h = c.handle;
                    let _ = self.sockets.get_mut::<tcp::Socket>(h).replace_tx_buffer(tcp::SocketBuffer::new(ring));
                }
            }
        }
        let c = &self.conns[i];
        let s = self.sockets.get::<tcp::Socket>(c.handle);
        if self.space_of(c, s) < n || (c.zero_copy && !c.queue.fits(&agg, self.cfg.max_queued)) {
            return Err((NetError::WouldBlock, agg));
        }
        let c = &mut self.conns[i];
        self.dirty.push(c.handle);
        let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
        if c.zero_copy {
            match s.send_virtual(n) {
                Ok(k) if k == n => {}
                _ => return Err((NetError::NotConnected, agg)),
            }
            c.queue.push(agg);
        } else {
            for bytes in agg.slices() {
                let k = s.send_slice(bytes).unwrap_or(0);
                self.d.count_copy(k);
                self.stats.tx_payload_copied_socket += k as u64;
            }
        }
        Ok(())
    }
}
