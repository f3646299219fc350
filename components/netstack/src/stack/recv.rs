//! The receive side of a connection: received bytes copied out of
//! smoltcp's ring into the stack's receive pools, bounded in pages per
//! connection (`Config::rx_conn_pages`), small chunks sharing an open
//! page, and the connections paused for their pages resumed.

use iolite::{Aggregate, PAGE_SIZE};
use smoltcp::socket::tcp;

use super::NetStack;
use crate::{ConnId, NetError, TcpState};

/// What [`NetStack::recv`] found.
#[derive(Debug)]
pub enum Recv<'d> {
    /// Received bytes, in a fresh buffer of the stack's pool.
    Data(Aggregate<'d>),
    /// Nothing yet.
    WouldBlock,
    /// The peer closed its sending half, and everything was received.
    Eof,
}

/// Open receive pages the sweep looks at per poll.
const SWEEP_PER_POLL: usize = 16;

impl<'d> NetStack<'d> {
    /// Receives up to `max` bytes from `id` as an aggregate in the
    /// stack's receive pool. smoltcp copied them from the frame into its
    /// receive ring, and they are copied once more into the buffer; both
    /// copies are counted.
    ///
    /// Pages, not only bytes, are bounded: a chunk smaller than a page goes
    /// into the connection's open page after the chunks before it (counted
    /// in `rx_coalesced_bytes`), so a peer sending one byte per segment
    /// costs a page per 4096 bytes, not one per byte; a larger chunk gets
    /// whole pages of its own. When the pages the connection's unreleased
    /// data keeps in use reach [`Config::rx_conn_pages`], its input stays
    /// in TCP (`WouldBlock`; `rx_paused_conn_pages`): the window closes on
    /// the peer, and the connection is touched again once pages are back.
    pub fn recv(&mut self, id: ConnId, max: usize) -> Result<Recv<'d>, NetError> {
        let i = self.conn(id)?;
        // Looked at through `get` first: taking nothing changes nothing (see
        // `after_poll`).
        let s = self.sockets.get::<tcp::Socket>(self.conns[i].handle);
        let n = s.recv_queue().min(max);
        if n == 0 {
            return Ok(if s.may_recv() || s.state() == TcpState::SynSent || s.state() == TcpState::SynReceived {
                Recv::WouldBlock
            } else {
                Recv::Eof
            });
        }
        // A connection handed off receives into the hand-off pool; when
        // that is full, into the shared pool (its client copies those
        // bytes on) rather than keep them waiting: a client may be
        // holding the hand-off pool for bytes it waits to complete. Either
        // way within the connection's share of pages.
        let hand_off = self.conns[i].hand_off.then_some(self.cfg.hand_off_pool).flatten();
        let open_pool = self.conns[i].rx_open.as_ref().map(|b| b.id().0);
        let open_room = self.conns[i].rx_open.as_ref().map_or(0, |b| b.remaining());
        let wanted = hand_off.unwrap_or(self.cfg.rx_pool);
        // The open page goes on being filled if it is in the pool wanted
        // (or in the shared pool the hand-off fell back to) and has room.
        let use_open = open_room > 0 && (open_pool == Some(wanted) || open_pool == Some(self.cfg.rx_pool));
        if !use_open {
            // It is full or in the other pool: given up (its pages go back
            // once the client has released what is in them).
            self.conns[i].rx_open = None;
        }
        let room = if use_open { None } else { Some(self.rx_pages_room(i)) };
        if room == Some(0) {
            if !self.conns[i].rx_paused {
                self.conns[i].rx_paused = true;
                self.rx_paused.push(id);
                self.stats.rx_paused_conn_pages += 1;
            }
            return Ok(Recv::WouldBlock);
        }
        self.dirty.push(self.conns[i].handle);
        let (got, agg, pool) = if use_open {
            let c = &mut self.conns[i];
            let b = c.rx_open.as_mut().expect("open page");
            let k = n.min(open_room);
            let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
            let got = s.recv_slice(&mut b.writable()[..k]).unwrap_or(0);
            let agg = b.seal_part(got).map_err(NetError::Iolite)?;
            let pool = b.id().0;
            if b.remaining() == 0 {
                c.rx_open = None;
            }
            self.stats.rx_coalesced_bytes += got as u64;
            (got, agg, pool)
        } else {
            let room = room.unwrap_or(1);
            // Whole pages for a chunk of a page or more (at most the share
            // left; the rest waits in TCP for the next call); a smaller one
            // opens a page that the next small chunks fill.
            let (len, open) = if n >= PAGE_SIZE { ((n / PAGE_SIZE).min(room) * PAGE_SIZE, false) } else { (n, true) };
            let mut b = match hand_off.map(|pool| self.d.alloc(pool, len)) {
                Some(Ok(b)) => b,
                _ => self.d.alloc(self.cfg.rx_pool, len).map_err(NetError::Iolite)?,
            };
            let (pool, buf, gen) = b.id();
            let pages = b.remaining().div_ceil(PAGE_SIZE) as u32;
            let c = &mut self.conns[i];
            c.rx_bufs.push((pool, buf, gen, pages));
            let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
            let got = s.recv_slice(&mut b.writable()[..len]).unwrap_or(0);
            let agg = if open && got < b.remaining() {
                let agg = b.seal_part(got).map_err(NetError::Iolite)?;
                c.rx_open = Some(b);
                if !c.rx_open_listed {
                    c.rx_open_listed = true;
                    self.rx_open_list.push_back(id);
                }
                agg
            } else {
                b.seal(got).map_err(|(e, _)| NetError::Iolite(e))?
            };
            (got, agg, pool)
        };
        self.d.count_copy(2 * got);
        self.stats.rx_payload_copied += 2 * got as u64;
        self.stats.rx_payload += got as u64;
        if hand_off == Some(pool) {
            self.stats.rx_hand_off += got as u64;
        } else if hand_off.is_some() {
            self.stats.rx_hand_off_fallback += got as u64;
        }
        Ok(Recv::Data(agg))
    }

    /// Pages connection `i` may still take for received data within
    /// [`Config::rx_conn_pages`].
    fn rx_pages_room(&mut self, i: usize) -> usize {
        self.cfg.rx_conn_pages.max(1).saturating_sub(self.rx_held_at(i))
    }

    /// Pages connection `i`'s delivered buffers still in use take (the
    /// freed ones are forgotten here).
    fn rx_held_at(&mut self, i: usize) -> usize {
        let d = self.d;
        let c = &mut self.conns[i];
        c.rx_bufs.retain(|&(pool, buf, gen, _)| d.published(pool, buf).is_ok_and(|(g, _)| g == gen));
        c.rx_bufs.iter().map(|b| b.3 as usize).sum()
    }

    /// Pages of the receive pools connection `id`'s delivered data keeps
    /// in use now (its open page included).
    pub fn rx_pages_held(&mut self, id: ConnId) -> Result<usize, NetError> {
        let i = self.conn(id)?;
        Ok(self.rx_held_at(i))
    }

    /// Whether some connection's input waits for its client to give
    /// received pages back: the caller should be woken by the client's
    /// releases (and poll then).
    pub fn rx_waiting_for_pages(&self) -> bool {
        !self.rx_paused.is_empty()
    }

    /// After a poll: open pages nothing but their writer holds any more
    /// go back to the pool (a few per poll, in turn), and connections
    /// whose input waited for pages are touched once they have room.
    pub(super) fn sweep_rx(&mut self) {
        for _ in 0..SWEEP_PER_POLL.min(self.rx_open_list.len()) {
            let Some(id) = self.rx_open_list.pop_front() else { break };
            let Some(&i) = self.conn_index.get(&id) else { continue };
            let c = &mut self.conns[i];
            let Some((pool, buf, _)) = c.rx_open.as_ref().map(|b| b.id()) else {
                c.rx_open_listed = false;
                continue;
            };
            let idle = self.d.holds(pool, buf).is_ok_and(|h| h.local <= 1 && h.lent == 0);
            if idle {
                c.rx_open = None;
                c.rx_open_listed = false;
                self.stats.rx_open_pages_swept += 1;
            } else {
                self.rx_open_list.push_back(id);
            }
        }
        let mut k = 0;
        while k < self.rx_paused.len() {
            let id = self.rx_paused[k];
            let Some(&i) = self.conn_index.get(&id) else {
                self.rx_paused.swap_remove(k);
                continue;
            };
            if self.rx_pages_room(i) == 0 {
                k += 1;
                continue;
            }
            self.rx_paused.swap_remove(k);
            let c = &mut self.conns[i];
            c.rx_paused = false;
            if !c.touched {
                c.touched = true;
                self.touched.push(id);
            }
        }
    }

    /// Receives `id`'s data from now on into the hand-off pool (`on`) or
    /// the shared receive pool (see `Config::hand_off_pool`). Data already
    /// received stays where it is.
    pub fn set_hand_off(&mut self, id: ConnId, on: bool) -> Result<(), NetError> {
        if on && self.cfg.hand_off_pool.is_none() {
            return Err(NetError::InvalidArgument);
        }
        let i = self.conn(id)?;
        self.conns[i].hand_off = on;
        Ok(())
    }
}
