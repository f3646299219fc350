//! A connection's send queue in iolite mode: the bytes it has queued and
//! not yet had acknowledged, as the sender's aggregates (references, not
//! copies). The device layer cuts segments out of it, by reference or
//! partly coalesced, and checks them for stale slices before each
//! transmission.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use iolite::{Aggregate, Domain, Error as IolError, PoolId, SliceDesc, Trust};

/// The bytes a connection has queued and not yet had acknowledged, as the
/// sender's aggregates (references, not copies), oldest first.
pub(crate) struct TxQueue<'d> {
    aggs: VecDeque<Aggregate<'d>>,
    len: usize,
}

impl<'d> TxQueue<'d> {
    pub(crate) fn new() -> Self {
        Self { aggs: VecDeque::new(), len: 0 }
    }

    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Aggregates held (each is up to 16 slices' worth of heap).
    pub fn entries(&self) -> usize {
        self.aggs.len()
    }

    /// Whether `a` can be queued within `max` entries (merged into the last
    /// one, or as a new one).
    pub(crate) fn fits(&self, a: &Aggregate<'d>, max: usize) -> bool {
        self.aggs.len() < max
            || self.aggs.back().is_some_and(|b| b.slice_count() + a.slice_count() <= iolite::MAX_SLICES)
    }

    pub(crate) fn push(&mut self, a: Aggregate<'d>) {
        self.len += a.len();
        // Small sends (pipelined responses of small files) share entries:
        // one aggregate holds up to 16 slices, whoever sent them.
        let a = match self.aggs.back_mut() {
            Some(b) if b.slice_count() + a.slice_count() <= iolite::MAX_SLICES => match b.append(a) {
                Ok(()) => return,
                Err((_, a)) => a,
            },
            _ => a,
        };
        self.aggs.push_back(a);
    }

    /// Drops the first `n` bytes (acknowledged), releasing their references.
    pub(crate) fn trim(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(front) = self.aggs.front_mut() else { break };
            if front.len() <= n {
                n -= front.len();
                self.aggs.pop_front();
            } else {
                // Cannot fail: n < len. On failure (never), keep the bytes
                // (they are only freed later) rather than lose track.
                if front.advance(n).is_err() {
                    self.len += n;
                }
                n = 0;
            }
        }
        // A queue that was long gives its memory back once it is short.
        if self.aggs.capacity() > 16 && self.aggs.len() * 4 < self.aggs.capacity() {
            self.aggs.shrink_to(self.aggs.len().max(8));
        }
    }

    /// A new aggregate referencing bytes `[off, off+len)` of the queue.
    pub fn range(&self, off: usize, len: usize) -> Result<Aggregate<'d>, IolError> {
        let mut out: Option<Aggregate<'d>> = None;
        let (mut pos, end) = (0usize, off + len);
        for a in &self.aggs {
            let (a_start, a_end) = (pos, pos + a.len());
            pos = a_end;
            if a_end <= off {
                continue;
            }
            if a_start >= end {
                break;
            }
            let from = off.max(a_start) - a_start;
            let to = end.min(a_end) - a_start;
            let part = a.range(from, to - from)?;
            out = Some(match out {
                None => part,
                Some(mut o) => {
                    o.append(part).map_err(|(e, _)| e)?;
                    o
                }
            });
        }
        match out {
            Some(o) if o.len() == len => Ok(o),
            _ => Err(IolError::InvalidArgument),
        }
    }

    /// The first slice in `[off, off + len)` of an untrusted pool whose
    /// owner no longer publishes it with the generation and sealed length
    /// it was queued with ([`stale_slice`]; whole aggregates that
    /// overlap the range are checked, which can only err towards a reset).
    pub fn stale_slice(&self, d: &Domain, off: usize, len: usize) -> Option<SliceDesc> {
        let end = off.saturating_add(len);
        let mut pos = 0usize;
        for a in &self.aggs {
            let (start, stop) = (pos, pos + a.len());
            pos = stop;
            if stop <= off {
                continue;
            }
            if start >= end {
                break;
            }
            if let Some(s) = stale_slice(d, a) {
                return Some(s);
            }
        }
        None
    }

    /// Where to cut bytes `[off, off+len)` of the queue, a TCP segment of
    /// `len` bytes the NIC cuts into segments of `mss` bytes, into frames
    /// of at most `max` payload slices each: the ends of the pieces,
    /// relative to `off` (the last is `len`; just `[len]` when the range
    /// has no more than `max` slices). Every piece but the last is a
    /// multiple of `mss` long, so the NIC puts the same segments on the
    /// wire as from one frame; a piece is a single `mss` when that many
    /// bytes already span more than `max` slices (`gather` then coalesces
    /// it, as it would the segment without segmentation offload).
    pub fn tso_cuts(&self, off: usize, len: usize, max: usize, mss: usize) -> Vec<usize> {
        let (end, mss, max) = (off.saturating_add(len), mss.max(1), max.max(1));
        // Where each slice piece of the range starts, relative to `off`.
        let mut starts: Vec<usize> = Vec::new();
        let mut pos = 0usize;
        'outer: for a in &self.aggs {
            if pos + a.len() <= off {
                pos += a.len();
                continue;
            }
            for s in a.slices() {
                let (s_start, s_end) = (pos, pos + s.len());
                pos = s_end;
                if s_end <= off || s.is_empty() {
                    continue;
                }
                if s_start >= end {
                    break 'outer;
                }
                starts.push(s_start.max(off) - off);
            }
        }
        if starts.len() <= max {
            return alloc::vec![len];
        }
        let mut cuts = Vec::new();
        let (mut at, mut first) = (0usize, 0usize);
        while at < len {
            // Pieces `first..first + max` fit one frame: end at or before
            // where the next one starts, on a multiple of the MSS.
            let room = starts.get(first + max).map_or(len, |&s| s.min(len));
            let step = (room - at) / mss * mss;
            let next = if room >= len { len } else { (at + step.max(mss)).min(len) };
            cuts.push(next);
            at = next;
            while first + 1 < starts.len() && starts[first + 1] <= at {
                first += 1;
            }
        }
        cuts
    }

    /// Bytes `[off, off+len)` of the queue as an aggregate of at most `max`
    /// slices (`max >= 3`), and how many of its bytes were copied. By
    /// reference when the range has that few slices. Otherwise (many tiny
    /// aggregates, e.g. pipelined responses of small files) the `(max - 1) / 2`
    /// largest pieces stay references and each run of pieces between them is
    /// copied into one object of `pool`: the frame still carries exactly the
    /// queued bytes, whatever the number of slices.
    pub fn gather(
        &self,
        d: &'d Domain,
        off: usize,
        len: usize,
        max: usize,
        pool: PoolId,
    ) -> Result<(Aggregate<'d>, usize), IolError> {
        if let Ok(a) = self.range(off, len) {
            if a.slice_count() <= max {
                return Ok((a, 0));
            }
        }
        // (aggregate, offset in it, length) of every non-empty slice piece.
        let mut pieces: Vec<(usize, usize, usize)> = Vec::new();
        let (mut pos, end) = (0usize, off.checked_add(len).ok_or(IolError::InvalidArgument)?);
        'outer: for (i, a) in self.aggs.iter().enumerate() {
            let mut in_agg = 0usize;
            for s in a.slices() {
                let (s_start, s_end) = (pos, pos + s.len());
                pos = s_end;
                let at = in_agg;
                in_agg += s.len();
                if s_end <= off || s.is_empty() {
                    continue;
                }
                if s_start >= end {
                    break 'outer;
                }
                let from = off.max(s_start);
                pieces.push((i, at + (from - s_start), end.min(s_end) - from));
            }
        }
        if pieces.iter().map(|p| p.2).sum::<usize>() != len {
            return Err(IolError::InvalidArgument);
        }
        let keep_n = (max.max(3) - 1) / 2;
        let mut by_size: Vec<usize> = (0..pieces.len()).collect();
        by_size.sort_by(|&x, &y| pieces[y].2.cmp(&pieces[x].2));
        let mut keep = alloc::vec![false; pieces.len()];
        for &k in by_size.iter().take(keep_n) {
            keep[k] = true;
        }
        let mut out = Aggregate::new(d);
        let mut copied = 0usize;
        let mut k = 0;
        while k < pieces.len() {
            let part = if keep[k] {
                let (i, from, n) = pieces[k];
                k += 1;
                self.aggs[i].range(from, n)?
            } else {
                let run_end = (k..pieces.len()).find(|&j| keep[j]).unwrap_or(pieces.len());
                let run = &pieces[k..run_end];
                let run_len: usize = run.iter().map(|p| p.2).sum();
                let mut short = false;
                let obj = d.pack(pool, run_len, |buf| {
                    let mut at = 0;
                    for &(i, from, n) in run {
                        short |= self.aggs[i].read_at(from, &mut buf[at..at + n]) != n;
                        at += n;
                    }
                })?;
                if short {
                    return Err(IolError::InvalidArgument);
                }
                copied += run_len;
                k = run_end;
                obj
            };
            out.append(part).map_err(|(e, _)| e)?;
        }
        Ok((out, copied))
    }
}

/// The first slice of `agg` from an untrusted pool whose buffer no longer
/// has the slice's generation, or is sealed shorter than the slice reaches
/// (re-read from the owner's published header, as a transmit or
/// retransmit is about to read the bytes).
fn stale_slice(d: &Domain, agg: &Aggregate<'_>) -> Option<SliceDesc> {
    agg.descs().iter().copied().find(|s| {
        d.pool_trust(s.pool) == Ok(Trust::Untrusted)
            && !d.published(s.pool, s.buf).is_ok_and(|(gen, sealed)| gen == s.gen && s.off + s.len <= sealed)
    })
}

#[cfg(test)]
mod tests {
    use super::TxQueue;
    use crate::tests::{domain, pattern, APP};
    use alloc::vec::Vec;
    use iolite::Trust;

    /// Whatever the slices, the cuts tile the range, every piece but the
    /// last is a multiple of the MSS, and a piece spans at most `max`
    /// slices unless it is a single MSS (which then is coalesced).
    #[test]
    fn tso_cuts_tile_the_range_in_mss_multiples_of_few_slices() {
        let d = domain(4096, Trust::Trusted);
        let mut x = 5u32;
        let mut next = move |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        for round in 0..40 {
            let mut q = TxQueue::new();
            // Slices of 1..=4 bytes, of about a pipelined response, or of
            // pages, depending on the round.
            let most = [4, 300, 4096][round % 3];
            let mut sizes = Vec::new();
            while q.len() < 67_000 {
                let n = 1 + next(most) as usize;
                // One byte more than sent, so that neighbours in a page
                // stay slices of their own.
                let obj = d.pack(APP, n + 1, |b| b.copy_from_slice(&pattern(n + 1, round as u32))).unwrap();
                q.push(obj.range(0, n).unwrap());
                sizes.push(n);
            }
            let starts: Vec<usize> = sizes.iter().scan(0, |p, &n| Some(core::mem::replace(p, *p + n))).collect();
            let (max, mss) = (15, [1460, 1448, 536][round % 3]);
            let off = next(1000) as usize;
            let len = 1 + next(65_000) as usize;
            let cuts = q.tso_cuts(off, len, max, mss);
            assert_eq!(*cuts.last().unwrap(), len);
            let mut at = 0;
            for (k, &end) in cuts.iter().enumerate() {
                assert!(end > at, "round {round}: cuts increase");
                if k + 1 < cuts.len() {
                    assert_eq!((end - at) % mss, 0, "round {round}: piece {k} of {} bytes", end - at);
                }
                // Slices the piece [off + at, off + end) touches.
                let (a, b) = (off + at, off + end);
                let touched = starts.iter().zip(&sizes).filter(|&(&s, &n)| s < b && s + n > a).count();
                assert!(touched <= max || end - at == mss.min(len - at), "round {round}: {touched} slices");
                at = end;
            }
            if starts.iter().zip(&sizes).filter(|&(&s, &n)| s < off + len && s + n > off).count() <= max {
                assert_eq!(cuts, [len], "round {round}: few slices, one piece");
            }
        }
    }
}
