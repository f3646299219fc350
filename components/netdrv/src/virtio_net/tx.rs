//! Transmit: a frame becomes a chain of the `virtio_net_hdr` (a slot of
//! the header page) and one descriptor per slice at the slice's physical
//! address; its holds are kept until the device gives the chain back.
//!
//! A TSO frame's headers are the one thing written again: netstack
//! prepares them for the e1000 (IPv4 header checksum 0, the TCP
//! pseudo-header sum without its length), while a virtio device hands the
//! frame to a host stack that checks the IPv4 header and adjusts the TCP
//! sum by the whole frame's length (Linux's GSO). The headers (at most
//! 134 bytes, never payload) are written into the frame's slot with the
//! IPv4 length and checksum and the TCP sum completed, and take the place
//! of the first slice's first bytes in the chain.

use core::sync::atomic::{fence, Ordering};

use iolite::Aggregate;
use virtio::queue::Buf;
use virtio::Regs;

use super::{Counter, Dma, VirtioNet, F_CSUM, HDR, MAX_FRAME, MIN_FRAME, TXQ};
use crate::e1000::{Pull, TxRequest};

/// Bytes of a header slot: the `virtio_net_hdr` at 0, a TSO frame's
/// rewritten headers at [`HEADERS_AT`].
pub(super) const SLOT: usize = 256;
/// Where a TSO frame's headers go in its slot.
const HEADERS_AT: usize = 64;
/// `virtio_net_hdr.flags`: the device completes the checksum.
const NEEDS_CSUM: u8 = 1;
/// `virtio_net_hdr.gso_type`: TCP over IPv4.
const GSO_TCPV4: u8 = 1;

/// The `virtio_net_hdr` of a frame, once its request has been checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) struct NetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl NetHdr {
    pub(super) fn bytes(self) -> [u8; HDR] {
        let mut b = [0u8; HDR];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }
}

/// Ones'-complement sum of big-endian words, folded.
fn sum(data: &[u8], mut s: u32) -> u16 {
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The headers of a TSO frame of `len` bytes as a host stack takes them
/// (see the top): `h` is a copy of netstack's.
pub(super) fn complete_tso_headers(h: &mut [u8], t: nic_api::Tso, len: usize) {
    let (ip, tcp) = (nic_api::TSO_IP_START, t.tcp_start());
    h[ip + 2..ip + 4].copy_from_slice(&((len - ip) as u16).to_be_bytes());
    h[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
    let c = !sum(&h[ip..tcp], 0);
    h[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    let at = t.tcp_checksum_at();
    let seed = u16::from_be_bytes([h[at], h[at + 1]]);
    let with_len = sum(&((len - tcp) as u16).to_be_bytes(), seed as u32);
    h[at..at + 2].copy_from_slice(&with_len.to_be_bytes());
}

impl<'d, R: Regs, M: Dma> VirtioNet<'d, R, M> {
    /// Releases the frames the device gave back; returns how many.
    pub fn tx_reap(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.txq.pop() {
                Ok(Some(u)) => {
                    if let Some((_frame, slot)) = self.tx_frames[u.head as usize].take() {
                        self.free_slots.push(slot);
                        n += 1;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.fail(e);
                    break;
                }
            }
        }
        n
    }

    /// Frames posted and not yet given back.
    pub fn tx_in_flight(&self) -> usize {
        self.txq.in_flight()
    }

    /// Whether a frame waits for room in the queue.
    pub fn tx_waiting(&self) -> bool {
        self.tx_pending.is_some()
    }

    /// Posts the waiting frame, then what `pull` yields, until the queue is
    /// full or `pull` has nothing; publishes them at once and notifies the
    /// device only if it asked. Invalid frames are counted and dropped; a
    /// frame that does not fit waits, whole. A failed device takes nothing
    /// (every frame is dropped, so netstack gets its buffers back).
    pub fn tx_post(&mut self, mut pull: impl FnMut() -> Pull<'d>) {
        let mut posted = 0;
        loop {
            let (agg, req) = match self.tx_pending.take() {
                Some(f) => f,
                None => match pull() {
                    Pull::Frame(agg, req) => (agg, req),
                    Pull::Refused => {
                        self.counters[Counter::TxRejected] += 1;
                        continue;
                    }
                    Pull::Broken => {
                        self.counters[Counter::TxRejected] += 1;
                        break;
                    }
                    Pull::Empty => break,
                },
            };
            let Some(hdr) = self.offload(&agg, req).filter(|_| self.error.is_none()) else {
                self.counters[Counter::TxRejected] += 1;
                continue;
            };
            let tso = hdr.gso_type == GSO_TCPV4;
            // The header, the rewritten TSO headers, every slice.
            let descs = 1 + tso as usize + agg.slice_count();
            if self.txq.free() < descs || self.free_slots.is_empty() {
                self.tx_pending = Some((agg, req));
                break;
            }
            if !self.put_frame(agg, hdr, req) {
                self.counters[Counter::TxRejected] += 1;
                continue;
            }
            posted += 1;
        }
        if posted > 0 {
            if self.txq.publish() {
                fence(Ordering::SeqCst);
                self.t.notify(self.tx_setup, TXQ);
                self.counters[Counter::Notifies] += 1;
            } else {
                self.counters[Counter::NotifiesSuppressed] += 1;
            }
        }
    }

    /// The header for the frame, if its request is valid for it and the
    /// device can carry it out (`None`: rejected).
    fn offload(&self, agg: &Aggregate<'d>, req: TxRequest) -> Option<NetHdr> {
        let len = agg.len();
        let hdr = match req {
            TxRequest::Plain => NetHdr::default(),
            TxRequest::TcpChecksum { start, offset }
                if self.features & F_CSUM != 0 && start < offset && offset as usize + 2 <= len =>
            {
                NetHdr { flags: NEEDS_CSUM, csum_start: start, csum_offset: offset - start, ..NetHdr::default() }
            }
            TxRequest::TcpChecksum { .. } => return None,
            TxRequest::Tso(t) => {
                // The headers in the first slice, the ones the request names.
                let headers = agg.slices().next().is_some_and(|h| t.matches(h));
                if !(self.tso && headers && t.segments(len).is_some()) {
                    return None;
                }
                return Some(NetHdr {
                    flags: NEEDS_CSUM,
                    gso_type: GSO_TCPV4,
                    hdr_len: t.hdr_len() as u16,
                    gso_size: t.mss() as u16,
                    csum_start: t.tcp_start() as u16,
                    csum_offset: 16,
                });
            }
        };
        (MIN_FRAME..=MAX_FRAME).contains(&len).then_some(hdr)
    }

    /// Writes the frame's header (and a TSO frame's headers) into a free
    /// slot and pushes its chain; false if a slice has no physical address
    /// (nothing is left behind then). The queue and the slots have room.
    fn put_frame(&mut self, agg: Aggregate<'d>, hdr: NetHdr, req: TxRequest) -> bool {
        let mut chain = [Buf { pa: 0, len: 0, write: false }; iolite::MAX_SLICES + 2];
        let slot = *self.free_slots.last().expect("checked");
        let (va, pa) = (self.hdrs.0.wrapping_add(slot as usize * SLOT), self.hdrs.1 + (slot as usize * SLOT) as u64);
        chain[0] = Buf { pa, len: HDR as u32, write: false };
        let mut k = 1;
        // Bytes of the first slice the rewritten headers stand for.
        let mut skip = 0;
        if let TxRequest::Tso(t) = req {
            let first = agg.slices().next().expect("matched");
            let mut h = [0u8; SLOT - HEADERS_AT];
            let h = &mut h[..t.hdr_len()];
            h.copy_from_slice(&first[..t.hdr_len()]);
            complete_tso_headers(h, t, agg.len());
            // SAFETY: our header page, slot `slot` (not in flight).
            unsafe { core::ptr::copy_nonoverlapping(h.as_ptr(), va.add(HEADERS_AT), h.len()) };
            chain[1] = Buf { pa: pa + HEADERS_AT as u64, len: h.len() as u32, write: false };
            self.counters[Counter::TxTsoHeaderBytes] += h.len() as u64;
            k = 2;
            skip = t.hdr_len();
        }
        for s in agg.slices() {
            let (from, n) = (skip.min(s.len()), s.len().saturating_sub(skip));
            skip -= from;
            if n == 0 {
                continue;
            }
            let Some(p) = self.dma.physical(s.as_ptr() as u64 + from as u64) else { return false };
            chain[k] = Buf { pa: p, len: n as u32, write: false };
            k += 1;
        }
        // SAFETY: as above.
        unsafe { core::ptr::copy_nonoverlapping(hdr.bytes().as_ptr(), va, HDR) };
        let head = self.txq.push(&chain[..k]).expect("room checked");
        self.free_slots.pop();
        let len = agg.len();
        if agg.slices().next().is_some_and(|f| f.len() >= 14 && f[12..14] == [0x08, 0x06]) {
            self.counters[Counter::ArpTx] += 1;
        }
        self.counters[Counter::TxFrames] += 1;
        self.counters[Counter::TxBytes] += len as u64;
        self.counters[Counter::TxDescriptors] += k as u64;
        self.counters[Counter::TxOffloaded] += (hdr.flags != 0) as u64;
        if let TxRequest::Tso(t) = req {
            self.counters[Counter::TxTsoFrames] += 1;
            self.counters[Counter::TxTsoSegments] += t.segments(len).unwrap_or(0) as u64;
        }
        self.tx_frames[head as usize] = Some((agg, slot));
        true
    }
}
