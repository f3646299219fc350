//! Transmit: frames built from what smoltcp wrote. Zero-copy (iolite
//! mode): the headers copied, the payload found in the connection's send
//! queue and attached by reference (a TSO segment of too many slices split
//! into several frames). Copy modes: the frame as smoltcp wrote it. Either
//! way the TCP checksum completed here or asked of the NIC (see the
//! device layer's module docs).

use alloc::vec::Vec;
use iolite::{Aggregate, MAX_SLICES, PAGE_SIZE};
use nic_api::Tso;

use super::Dev;
use crate::csum::{self, Sum};
use crate::frame::{parse_tcp, NicPort, TcpFrame, TxFrame, TxOffload, PROTO_TCP};
use crate::TxChecksum;

/// Where a zero-copy segment's payload comes from.
enum Payload<'d> {
    /// No payload (or not a TCP frame).
    Empty,
    /// The connection's queued bytes (references, and how many of them were
    /// coalesced into a copy).
    Attached(Aggregate<'d>, usize),
    /// A segment for the NIC to cut whose bytes span more slices than a
    /// frame takes: sent as several frames ([`Part`]s), each by reference.
    Split(Vec<Part<'d>>),
    /// smoltcp wrote the octets into the frame itself (keep-alive).
    Written,
    /// Octets nobody wrote: the frame must not be sent.
    Unmapped,
    /// The range holds a slice of an untrusted pool whose page its owner
    /// reused: the frame must not be sent, and the connection is reset.
    Stale,
}

/// One frame's share of a segment sent as several (`Payload::Split`).
struct Part<'d> {
    /// Its first byte's offset in the segment's payload.
    at: usize,
    /// Its payload, and how many bytes of it were coalesced into a copy.
    agg: Aggregate<'d>,
    copied: usize,
}

/// A zero-copy frame's payload, found.
enum Body<'d> {
    /// One frame's (`Payload::Attached`).
    One(Aggregate<'d>, usize),
    /// Several frames' (`Payload::Split`).
    Split(Vec<Part<'d>>),
}

/// Writes the TCP checksum field (or prepares it for offload) of a frame
/// whose headers are `frame[..payload_off]`; `payload` is its payload sum
/// (not asked for when the NIC computes the checksum). With `mss` (smoltcp
/// asked for segmentation), the frame becomes a TSO request: the IPv4
/// header checksum 0 and the pseudo-header sum without its length in the
/// TCP checksum field (the NIC adds each segment's length, and computes
/// the IPv4 header checksum of each). `None`: a TSO request the NIC could
/// not carry out (headers or MSS out of its bounds); the frame must not be
/// sent.
fn finish_tcp_checksum(
    frame: &mut [u8],
    t: &TcpFrame,
    mode: TxChecksum,
    mss: Option<usize>,
    payload: impl FnOnce() -> Sum,
) -> Option<TxOffload> {
    let field = t.tcp_off + 16;
    if let Some(mss) = mss {
        let tso = Tso::new(t.tcp_off, t.payload_off, mss).filter(|_| t.ip_off == nic_api::TSO_IP_START)?;
        frame[t.ip_off + 10..t.ip_off + 12].copy_from_slice(&[0, 0]);
        let seed = csum::pseudo_header_v4(t.src, t.dst, PROTO_TCP, 0);
        frame[field..field + 2].copy_from_slice(&seed.0.to_be_bytes());
        return Some(TxOffload::Tso(tso));
    }
    let tcp_len = (t.payload_off - t.tcp_off + t.payload_len) as u16;
    let pseudo = csum::pseudo_header_v4(t.src, t.dst, PROTO_TCP, tcp_len);
    Some(match mode {
        TxChecksum::Offload => {
            frame[field..field + 2].copy_from_slice(&pseudo.0.to_be_bytes());
            TxOffload::TcpChecksum { start: t.tcp_off as u16, offset: field as u16 }
        }
        TxChecksum::Software | TxChecksum::Cached => {
            frame[field..field + 2].copy_from_slice(&[0, 0]);
            let hdr = csum::sum(&frame[t.tcp_off..t.payload_off]);
            // The payload starts at an even position (headers are 4-byte multiples).
            let s = pseudo.plus(hdr).plus(payload());
            frame[field..field + 2].copy_from_slice(&s.checksum().to_be_bytes());
            TxOffload::None
        }
    })
}

/// Completes a frame smoltcp wrote whole into `buf` (copy modes): the TCP
/// checksum as [`finish_tcp_checksum`] does; returns the payload bytes
/// smoltcp copied into it and the NIC's work (`None`: not to be sent).
fn finish_copied(buf: &mut [u8], mode: TxChecksum, mss: Option<usize>) -> (usize, Option<TxOffload>) {
    let len = buf.len();
    match parse_tcp(buf, len) {
        Some(t) => {
            // Summed only where the checksum is ours to compute.
            let body = match (mss, mode) {
                (None, TxChecksum::Cached | TxChecksum::Software) => {
                    csum::sum(&buf[t.payload_off..t.payload_off + t.payload_len])
                }
                _ => Sum(0),
            };
            let off = finish_tcp_checksum(buf, &t, mode, mss, || body);
            (t.payload_len, off)
        }
        None => (0, Some(TxOffload::None)),
    }
}

impl<'a, 'd, P: NicPort<'d>> Dev<'a, 'd, P> {
    /// Finds the payload of segment `t` of a zero-copy socket: the matching
    /// range of its connection's send queue, by reference (or partly
    /// coalesced, see `TxQueue::gather`).
    fn zero_copy_payload(&mut self, t: &TcpFrame, mss: Option<usize>) -> Payload<'d> {
        if t.payload_len == 0 {
            return Payload::Empty;
        }
        // In iolite mode every TCP socket is a zero-copy one: a segment
        // that maps to no connection has no payload bytes in the frame.
        let tuple = (t.src, t.sport, t.dst, t.dport);
        let Some(c) = self.conn_of(&tuple).map(|i| &mut self.conns[i]).filter(|c| c.zero_copy) else {
            return Payload::Unmapped;
        };
        let rel = t.seq.wrapping_sub(c.seq_base);
        // Entirely before the oldest unacknowledged byte: only smoltcp's
        // keep-alive (one octet at seq_base - 1) does that, and it writes
        // that octet itself.
        if (rel as i32) < 0 && (rel.wrapping_add(t.payload_len as u32) as i32) <= 0 {
            return Payload::Written;
        }
        let rel = rel as usize;
        if rel.saturating_add(t.payload_len) > c.queue.len() {
            return Payload::Unmapped;
        }
        // The owner of an untrusted pool may have reused a page the queue
        // still references (a restarted producer that ended its quarantine
        // early, or one that lies): its bytes are not the stream's any
        // more. Sending them would put another response's bytes on the
        // wire under a valid checksum; reset the connection instead.
        // Checked before `gather`, which could copy them into a buffer of
        // our own where the check would no longer see them.
        if let Some(s) = c.queue.stale_slice(self.d, rel, t.payload_len) {
            self.stats.tx_stale_withheld += 1;
            c.reset_stale = true;
            self.stale = Some(s);
            return Payload::Stale;
        }
        // One descriptor is the header's. A segment for the NIC to cut
        // whose bytes span more slices (pipelined responses of small
        // files) goes as several frames rather than through `gather`'s
        // copy: up to 64 KiB of tiny slices would be copied almost whole.
        let cuts = match mss {
            Some(mss) => c.queue.tso_cuts(rel, t.payload_len, MAX_SLICES - 1, mss),
            None => alloc::vec![t.payload_len],
        };
        let mut parts = Vec::with_capacity(cuts.len());
        let mut at = 0;
        for &end in &cuts {
            let (agg, copied) = match c.queue.gather(self.d, rel + at, end - at, MAX_SLICES - 1, self.pool) {
                Ok(x) => x,
                Err(_) => return Payload::Unmapped,
            };
            if copied > 0 {
                self.stats.tx_coalesced_segments += 1;
                self.stats.tx_coalesced_bytes += copied as u64;
            }
            parts.push(Part { at, agg, copied });
            at = end;
        }
        if parts.len() > 1 {
            self.stats.tx_tso_split += 1;
        }
        let start = c.front + rel as u64;
        let end = start + t.payload_len as u64;
        if start < c.sent_hi {
            self.stats.tx_retransmitted += c.sent_hi.min(end) - start;
        }
        c.sent_hi = c.sent_hi.max(end);
        match parts.pop() {
            Some(p) if parts.is_empty() => Payload::Attached(p.agg, p.copied),
            Some(p) => {
                parts.push(p);
                Payload::Split(parts)
            }
            None => Payload::Unmapped,
        }
    }

    pub(super) fn emit_zero_copy<R, F: FnOnce(&mut [u8]) -> R>(&mut self, len: usize, f: F, mss: Option<usize>) -> R {
        let r = f(self.scratch(len));
        let tcp = parse_tcp(&self.scratch[..len], len);
        let payload = match &tcp {
            Some(t) => self.zero_copy_payload(t, mss),
            None => Payload::Empty,
        };
        let mut payload = match payload {
            Payload::Unmapped => {
                // The frame's payload octets were never written (the patched
                // emit leaves them to us): sending it would put stale bytes
                // on the wire under a valid checksum. smoltcp counts it as
                // sent and retransmits it after a timeout.
                self.stats.tx_withheld += 1;
                return r;
            }
            // Counted and reported by `zero_copy_payload`.
            Payload::Stale => return r,
            Payload::Split(parts) => Some(Body::Split(parts)),
            Payload::Attached(p, copied) => Some(Body::One(p, copied)),
            Payload::Written | Payload::Empty => None,
        };
        let mut offload = TxOffload::None;
        let hdr_len = match (&tcp, &payload) {
            (Some(t), Some(_)) => t.payload_off,
            _ => len,
        };
        if let Some(t) = &tcp {
            let (mode, d) = (self.checksum, self.d);
            let cache = &mut *self.cache;
            let frame = &mut self.scratch[..len];
            let finished = match &payload {
                // Only for the NIC to cut (tso_cuts): no sum asked for.
                Some(Body::Split(_)) => finish_tcp_checksum(frame, t, mode, mss, || Sum(0)),
                Some(Body::One(p, _)) => finish_tcp_checksum(frame, t, mode, mss, || match mode {
                    TxChecksum::Cached => cache.aggregate_sum(p, d),
                    _ => {
                        p.slices().fold((Sum(0), 0usize), |(s, pos), b| (s.plus(csum::sum(b).at(pos)), pos + b.len())).0
                    }
                }),
                None => {
                    let body_sum = csum::sum(&frame[t.payload_off..t.payload_off + t.payload_len]);
                    // Payload smoltcp wrote itself (its keep-alive octet) is
                    // copied into the frame buffer below: count it.
                    self.stats.tx_payload_copied_frame += t.payload_len as u64;
                    d.count_copy(t.payload_len);
                    finish_tcp_checksum(frame, t, mode, mss, || body_sum)
                }
            };
            offload = match finished {
                Some(o) => o,
                None => {
                    // A segment the NIC cannot cut (never, with the MSS
                    // smoltcp derives from our MTU): not sent, as above.
                    self.stats.tx_withheld += 1;
                    return r;
                }
            };
            self.stats.tx_header_bytes += (hdr_len.min(t.payload_off)) as u64;
        } else {
            // ARP, ICMP (echo replies carry the request's data), DHCP:
            // smoltcp wrote the whole frame; it is copied below.
            self.stats.tx_nontcp_frame_bytes += len as u64;
        }
        if let (Some(t), Some(Body::Split(parts))) = (&tcp, &mut payload) {
            self.send_split(t, core::mem::take(parts), offload, hdr_len);
            return r;
        }
        let hdr = &self.scratch[..hdr_len];
        let head = match self.d.pack(self.pool, hdr_len, |b| b.copy_from_slice(hdr)) {
            Ok(a) => a,
            Err(_) => {
                self.stats.tx_dropped += 1;
                return r;
            }
        };
        let agg = match payload {
            Some(Body::Split(_)) => unreachable!("sent above"),
            Some(Body::One(p, copied)) => {
                self.stats.tx_payload_by_ref += (p.len() - copied) as u64;
                match head.concat(p) {
                    Ok(a) => a,
                    Err(_) => {
                        self.stats.tx_dropped += 1;
                        return r;
                    }
                }
            }
            None => head,
        };
        self.send(TxFrame { agg, offload });
        r
    }

    /// Sends a segment for the NIC to cut as one frame per part
    /// (`Payload::Split`), each behind a copy of the headers smoltcp wrote
    /// (`hdr_len` bytes of the scratch buffer, completed for `offload`, a
    /// TSO request) with its own sequence number and IPv4 total length,
    /// and PSH and FIN in the last part only: the NIC puts on the wire the
    /// segments it would have cut from the whole.
    fn send_split(&mut self, t: &TcpFrame, parts: Vec<Part<'d>>, offload: TxOffload, hdr_len: usize) {
        let n = parts.len();
        let (ip, tcp) = (t.ip_off, t.tcp_off);
        for (k, part) in parts.into_iter().enumerate() {
            let hdr = &self.scratch[..hdr_len];
            let (payload, copied) = (part.agg.len(), part.copied);
            let ip_len = (hdr_len - ip + payload) as u16;
            let seq = t.seq.wrapping_add(part.at as u32);
            let head = self.d.pack(self.pool, hdr_len, |b| {
                b.copy_from_slice(hdr);
                b[ip + 2..ip + 4].copy_from_slice(&ip_len.to_be_bytes());
                b[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
                if k + 1 < n {
                    b[tcp + 13] &= !0x09;
                }
            });
            if k > 0 {
                // The first one's were counted with the segment's.
                self.stats.tx_header_bytes += hdr_len as u64;
            }
            match head.map_err(|_| ()).and_then(|h| h.concat(part.agg).map_err(|_| ())) {
                Ok(agg) => {
                    self.stats.tx_payload_by_ref += (payload - copied) as u64;
                    self.send(TxFrame { agg, offload });
                }
                // smoltcp sends what the peer did not get again.
                Err(()) => self.stats.tx_dropped += 1,
            }
        }
    }

    pub(super) fn emit_copy<R, F: FnOnce(&mut [u8]) -> R>(&mut self, len: usize, f: F, mss: Option<usize>) -> R {
        let mut f = Some(f);
        let mut out = None;
        let mut finished = (0, None);
        let (mode, d, pool) = (self.checksum, self.d, self.pool);
        let packed = d.pack(pool, len, |buf| {
            if let Some(f) = f.take() {
                out = Some(f(buf));
                // smoltcp copied the payload from its socket ring into this
                // frame buffer.
                finished = finish_copied(buf, mode, mss);
            }
        });
        let agg = match (packed, f.take()) {
            (Ok(agg), _) => Ok(agg),
            (Err(_), Some(f)) => {
                // No buffer for the frame: smoltcp writes it into the
                // scratch buffer. A frame longer than a page (a TSO frame)
                // may have found no run of free pages that long: it goes
                // out from page-sized buffers, a second copy (counted).
                // Anything shorter is dropped: the pool is exhausted.
                out = Some(f(self.scratch(len)));
                finished = finish_copied(&mut self.scratch[..len], mode, mss);
                if len > PAGE_SIZE && finished.1.is_some() {
                    let pieces = self.scratch[..len].chunks(PAGE_SIZE).try_fold(Aggregate::new(d), |agg, piece| {
                        let part = d.pack(pool, piece.len(), |b| b.copy_from_slice(piece)).map_err(|_| ())?;
                        agg.concat(part).map_err(|_| ())
                    });
                    if pieces.is_ok() {
                        d.count_copy(finished.0);
                        self.stats.tx_payload_copied_frame += finished.0 as u64;
                    }
                    pieces
                } else {
                    Err(())
                }
            }
            (Err(_), None) => Err(()),
        };
        let (copied, offload) = finished;
        d.count_copy(copied);
        self.stats.tx_payload_copied_frame += copied as u64;
        match (agg, offload) {
            (Ok(agg), Some(offload)) => self.send(TxFrame { agg, offload }),
            // Not sent: smoltcp sends the segment again after a timeout.
            (Ok(_), None) => self.stats.tx_withheld += 1,
            (Err(_), _) => self.stats.tx_dropped += 1,
        }
        match out {
            Some(r) => r,
            None => unreachable!("f is called on one of the two paths"),
        }
    }
}
