//! Transmit: an aggregate becomes one data descriptor per slice at the
//! slice's physical address (after a context descriptor where an offload
//! needs one), its holds kept until the device reports its last
//! descriptor done.

use core::sync::atomic::{fence, Ordering};

use e1000_regs::*;
use iolite::Aggregate;

use super::{Counter, Dma, Pull, TxRequest, E1000, MAX_FRAME, MIN_FRAME, RING};

/// What the device does to one frame, once its request has been checked.
#[derive(Clone, Copy)]
enum Offload {
    None,
    /// TUCSS, TUCSO.
    Checksum(u8, u8),
    /// The request and how many segments the frame becomes.
    Tso(nic_api::Tso, usize),
}

/// A transmitted frame waiting for its last descriptor to be done.
pub(super) struct InFlight<'d> {
    last: usize,
    descs: usize,
    _frame: Aggregate<'d>,
}

/// The physical address and length of each slice of a frame.
type Physical = [(u64, usize); iolite::MAX_SLICES];

impl<'d, R: RegisterFile, M: Dma> E1000<'d, R, M> {
    /// Releases the frames whose last descriptor the device has done;
    /// returns how many.
    pub fn tx_reap(&mut self) -> usize {
        let mut n = 0;
        while let Some(f) = self.tx_inflight.front() {
            if tx_status(self.tx_ring.read(f.last)[1]) & DD == 0 {
                break;
            }
            self.tx_used -= f.descs;
            self.tx_inflight.pop_front();
            n += 1;
        }
        n
    }

    /// Frames posted and not yet reaped.
    pub fn tx_in_flight(&self) -> usize {
        self.tx_inflight.len()
    }

    /// Whether a frame waits for ring space.
    pub fn tx_waiting(&self) -> bool {
        self.tx_pending.is_some()
    }

    /// Posts the waiting frame, then what `pull` yields, until the ring is
    /// full or `pull` has nothing; writes TDT once. Invalid frames are
    /// counted and dropped; a frame that does not fit waits, whole.
    pub fn tx_post(&mut self, mut pull: impl FnMut() -> Pull<'d>) {
        let start_tail = self.tx_tail;
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
            let Some(offload) = self.offload(&agg, req) else {
                self.counters[Counter::TxRejected] += 1;
                continue;
            };
            // A checksum context only when it changes; a TSO frame always
            // has one of its own (its payload length is in it).
            let ctx = match offload {
                Offload::Checksum(start, offset) => self.tx_context != Some((start, offset)),
                Offload::Tso(..) => true,
                Offload::None => false,
            };
            if RING - 1 - self.tx_used < agg.slice_count() + ctx as usize {
                self.tx_pending = Some((agg, req));
                break;
            }
            let Some(pas) = self.physical(&agg) else {
                self.counters[Counter::TxRejected] += 1;
                continue;
            };
            self.put_frame(agg, offload, ctx, &pas);
        }
        if self.tx_tail != start_tail {
            fence(Ordering::Release);
            self.regs.write(TDT, self.tx_tail as u32);
            self.counters[Counter::Notifies] += 1;
        }
    }

    /// What the device is to do to the frame, if its request is valid for
    /// it (`None`: rejected).
    fn offload(&self, agg: &Aggregate<'d>, req: TxRequest) -> Option<Offload> {
        let len = agg.len();
        let offload = match req {
            TxRequest::TcpChecksum { start, offset }
                if start < offset && offset < 256 && offset as usize + 2 <= len =>
            {
                Offload::Checksum(start as u8, offset as u8)
            }
            TxRequest::TcpChecksum { .. } => return None,
            TxRequest::Tso(t) => {
                // The headers must be in the first slice (netstack's
                // header object), and be the ones the request names:
                // the device rewrites fields at those offsets.
                let headers = agg.slices().next().is_some_and(|h| t.matches(h));
                match t.segments(len) {
                    Some(n) if self.tso && headers => Offload::Tso(t, n),
                    _ => return None,
                }
            }
            TxRequest::Plain => Offload::None,
        };
        // A TSO frame's length was checked with its request.
        let sized = matches!(offload, Offload::Tso(..)) || (MIN_FRAME..=MAX_FRAME).contains(&len);
        sized.then_some(offload)
    }

    /// Physical addresses first: a slice outside the dataports
    /// (impossible after the channel's validation, but checked) rejects
    /// the frame before any descriptor is written. Every slice fits a
    /// descriptor's 16-bit length: frames are at most TSO_MAX_FRAME bytes.
    fn physical(&self, agg: &Aggregate<'d>) -> Option<Physical> {
        let mut pas = [(0u64, 0usize); iolite::MAX_SLICES];
        for (k, s) in agg.slices().enumerate() {
            pas[k] = (self.dma.physical(s.as_ptr() as u64)?, s.len());
        }
        Some(pas)
    }

    /// Writes the frame's descriptors (its context first where `ctx`) and
    /// keeps its holds until the device is done with it. The ring has room.
    fn put_frame(&mut self, agg: Aggregate<'d>, offload: Offload, ctx: bool, pas: &Physical) {
        let len = agg.len();
        if let Some(first) = agg.slices().next() {
            if first.len() >= 14 && first[12] == 0x08 && first[13] == 0x06 {
                self.counters[Counter::ArpTx] += 1;
            }
        }
        let first_idx = self.tx_tail;
        match offload {
            Offload::Checksum(start, offset) if ctx => {
                self.put_tx(tx_context(start, offset));
                self.tx_context = Some((start, offset));
            }
            Offload::Tso(t, segments) => {
                let tcp = t.tcp_start() as u8;
                self.put_tx(
                    TsoContext {
                        ipcss: nic_api::TSO_IP_START as u8,
                        ipcso: t.ip_checksum_at() as u8,
                        ipcse: tcp as u16 - 1,
                        tucss: tcp,
                        tucso: t.tcp_checksum_at() as u8,
                        hdr_len: t.hdr_len() as u8,
                        mss: t.mss() as u16,
                        paylen: (len - t.hdr_len()) as u32,
                    }
                    .words(),
                );
                // The 82540EM has one context: the checksum one is gone.
                self.tx_context = None;
                self.counters[Counter::TxTsoFrames] += 1;
                self.counters[Counter::TxTsoSegments] += segments as u64;
            }
            _ => {}
        }
        let n = agg.slice_count();
        for (k, &(pa, l)) in pas[..n].iter().enumerate() {
            let last = k + 1 == n;
            let w1 = match offload {
                Offload::Tso(..) => tx_data_tso(l as u16, last),
                Offload::Checksum(..) => tx_data(l as u16, last, true),
                Offload::None => tx_data(l as u16, last, false),
            };
            self.put_tx([pa, w1]);
        }
        let last = (self.tx_tail + RING - 1) % RING;
        let descs = (self.tx_tail + RING - first_idx) % RING;
        self.tx_used += descs;
        self.counters[Counter::TxFrames] += 1;
        self.counters[Counter::TxBytes] += len as u64;
        self.counters[Counter::TxDescriptors] += descs as u64;
        self.counters[Counter::TxOffloaded] += !matches!(offload, Offload::None) as u64;
        self.tx_inflight.push_back(InFlight { last, descs, _frame: agg });
    }

    fn put_tx(&mut self, words: [u64; 2]) {
        // A free descriptor: tx_used < RING - 1 (checked by the caller).
        self.tx_ring.write(self.tx_tail, words);
        self.tx_tail = (self.tx_tail + 1) % RING;
    }
}
