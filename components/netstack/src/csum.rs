//! Internet checksum arithmetic and the per-slice checksum cache (IO-Lite
//! §2.9).
//!
//! The TCP checksum is the ones'-complement of the ones'-complement sum of
//! the pseudo-header, the TCP header and the payload, taken as big-endian
//! 16-bit words. Partial sums combine by ones'-complement addition, so the
//! sum of a segment is the sum of the sums of its pieces, with one twist: a
//! piece that starts at an odd byte position of the segment contributes its
//! sum byte-swapped ([`Sum::at_odd`]).
//!
//! [`ChecksumCache`] remembers the partial sum of fixed-size, aligned blocks
//! of IO-Lite buffers, keyed by ⟨pool, buffer, generation, block⟩. Because
//! buffers are immutable and the generation changes on every reallocation,
//! that key names the *contents*: the same key always has the same sum. A
//! payload slice ⟨pool, buf, gen, off, len⟩ is summed as its unaligned head
//! and tail (computed) plus the whole blocks in between (cached). Using
//! aligned blocks rather than whole slices as the unit makes the cache
//! independent of where TCP cuts segments: a file sent again behind a
//! response header of another length is cut at other places, yet it reuses
//! every interior block.

use alloc::vec::Vec;
use iolite::{Domain, SliceDesc, Trust};

/// A ones'-complement partial sum (not yet complemented), folded to 16 bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sum(pub u16);

impl Sum {
    /// Ones'-complement addition.
    #[inline]
    pub fn plus(self, other: Sum) -> Sum {
        let s = self.0 as u32 + other.0 as u32;
        Sum(((s & 0xffff) + (s >> 16)) as u16)
    }

    /// The contribution of a piece whose sum is `self` when it starts at an
    /// odd byte position of the checksummed range (bytes pair up the other
    /// way round, which swaps the bytes of the sum).
    #[inline]
    pub fn at_odd(self) -> Sum {
        Sum(self.0.swap_bytes())
    }

    /// `self` placed at byte position `pos` of the checksummed range.
    #[inline]
    pub fn at(self, pos: usize) -> Sum {
        if pos & 1 == 1 {
            self.at_odd()
        } else {
            self
        }
    }

    /// The checksum field value: the complement of the sum.
    #[inline]
    pub fn checksum(self) -> u16 {
        !self.0
    }
}

/// The ones'-complement sum of `data` as big-endian 16-bit words (a final
/// odd byte is padded with zero), starting at an even position.
pub fn sum(data: &[u8]) -> Sum {
    // Add 64-bit big-endian words with end-around carry: arithmetic modulo
    // 2^64 - 1, which 2^16 - 1 divides, so folding gives the 16-bit sum.
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(w);
        acc = s + carry as u64;
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let (s, carry) = acc.overflowing_add(u64::from_be_bytes(tail));
    acc = s + carry as u64;
    fold64(acc)
}

fn fold64(mut acc: u64) -> Sum {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let mut a = (acc & 0xffff) + (acc >> 16);
    a = (a & 0xffff) + (a >> 16);
    a = (a & 0xffff) + (a >> 16);
    Sum(a as u16)
}

/// The sum of the IPv4 pseudo-header of a TCP segment of `tcp_len` bytes.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, tcp_len: u16) -> Sum {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src);
    b[4..8].copy_from_slice(&dst);
    b[9] = proto;
    b[10..12].copy_from_slice(&tcp_len.to_be_bytes());
    sum(&b)
}

/// Counters of a [`ChecksumCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Block lookups that found the block's sum.
    pub hits: u64,
    /// Block lookups that had to sum the block (and then cached it).
    pub misses: u64,
    /// Payload bytes whose sum came from the cache.
    pub bytes_cached: u64,
    /// Payload bytes summed (block misses, unaligned heads and tails,
    /// untrusted pools).
    pub bytes_summed: u64,
}

impl CacheStats {
    /// Hits per lookup, in percent (0 when nothing was looked up).
    pub fn hit_rate_percent(&self) -> u64 {
        (self.hits * 100).checked_div(self.hits + self.misses).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    pool: u32,
    buf: u32,
    /// 0 = empty (live buffers never have generation 0).
    gen: u32,
    block: u32,
    sum: u16,
}

/// The per-slice checksum cache (see the module docs). Direct-mapped, with
/// a fixed number of entries allocated once.
pub struct ChecksumCache {
    entries: Vec<Entry>,
    shift: u32,
    stats: CacheStats,
}

impl ChecksumCache {
    /// A cache of `entries` entries (rounded up to a power of two, at least
    /// one) over blocks of `1 << block_shift` bytes (at least 2). Covers
    /// `entries << block_shift` bytes of buffer contents.
    pub fn new(entries: usize, block_shift: u32) -> Self {
        let n = entries.max(1).next_power_of_two();
        Self {
            entries: alloc::vec![Entry::default(); n],
            shift: block_shift.clamp(1, 20),
            stats: CacheStats::default(),
        }
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> usize {
        1 << self.shift
    }

    /// The counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    fn slot(&self, s: &SliceDesc, block: u32) -> usize {
        let mut h = (s.pool as u64) << 48 ^ (s.buf as u64) << 24 ^ s.gen as u64 ^ (block as u64) << 32;
        h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 40) as usize & (self.entries.len() - 1)
    }

    /// The sum of slice `s` (whose bytes are `bytes`), as if it started at
    /// an even position. Uses and fills the cache when `cacheable` (the
    /// slice's pool is trusted: its sealed contents never change).
    pub fn slice_sum(&mut self, s: &SliceDesc, bytes: &[u8], cacheable: bool) -> Sum {
        let bs = self.block_size();
        let off = s.off as usize;
        let len = bytes.len();
        if !cacheable || len < bs {
            self.stats.bytes_summed += len as u64;
            return sum(bytes);
        }
        // [off, end) in buffer coordinates; whole blocks inside it.
        let first_block = off.div_ceil(bs);
        let last_block = (off + len) / bs; // exclusive
        if first_block >= last_block {
            self.stats.bytes_summed += len as u64;
            return sum(bytes);
        }
        let head = first_block * bs - off;
        let mut total = sum(&bytes[..head]);
        self.stats.bytes_summed += head as u64;
        let mut pos = head;
        for block in first_block..last_block {
            let piece = &bytes[pos..pos + bs];
            let b = block as u32;
            let i = self.slot(s, b);
            let e = self.entries[i];
            let part = if e.gen == s.gen && e.pool == s.pool && e.buf == s.buf && e.block == b {
                self.stats.hits += 1;
                self.stats.bytes_cached += bs as u64;
                Sum(e.sum)
            } else {
                self.stats.misses += 1;
                self.stats.bytes_summed += bs as u64;
                let v = sum(piece);
                self.entries[i] = Entry { pool: s.pool, buf: s.buf, gen: s.gen, block: b, sum: v.0 };
                v
            };
            total = total.plus(part.at(pos));
            pos += bs;
        }
        total = total.plus(sum(&bytes[pos..]).at(pos));
        self.stats.bytes_summed += (len - pos) as u64;
        total
    }

    /// The sum of an aggregate's bytes `[0, len)` seen through `d`, slice by
    /// slice, as if it started at an even position. Slices of untrusted
    /// pools are summed every time (their producer could rewrite them).
    pub fn aggregate_sum(&mut self, agg: &iolite::Aggregate<'_>, d: &Domain) -> Sum {
        let mut total = Sum(0);
        let mut pos = 0usize;
        for (desc, bytes) in agg.descs().iter().zip(agg.slices()) {
            let cacheable = matches!(d.pool_trust(desc.pool), Ok(Trust::Trusted));
            total = total.plus(self.slice_sum(desc, bytes, cacheable).at(pos));
            pos += bytes.len();
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pattern;

    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { (c[0] as u16) << 8 };
            s += w as u32;
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn sum_matches_naive_for_all_lengths_and_all_ones() {
        for n in 0..300 {
            let b = pattern(n, n as u32);
            assert_eq!(sum(&b).0 % 0xffff, naive(&b) % 0xffff, "len {n}");
        }
        let ff = [0xffu8; 1000];
        assert_eq!(sum(&ff).0 % 0xffff, naive(&ff) % 0xffff);
    }

    #[test]
    fn pieces_combine_including_odd_positions() {
        let b = pattern(1501, 7);
        let whole = sum(&b);
        for cut in [0, 1, 2, 3, 700, 701, 1500, 1501] {
            let s = sum(&b[..cut]).plus(sum(&b[cut..]).at(cut));
            assert_eq!(s.0 % 0xffff, whole.0 % 0xffff, "cut {cut}");
        }
    }

    #[test]
    fn known_ipv4_header_checksum() {
        // RFC 1071 style example: a real IPv4 header with checksum 0xb861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(sum(&h).checksum(), 0xb861);
    }

    #[test]
    fn cached_slice_sum_equals_plain_sum_at_any_offset_and_hits_second_time() {
        let data = pattern(8192, 3);
        let mut c = ChecksumCache::new(1024, 6);
        for &(off, len) in &[(0usize, 8192usize), (1, 1460), (63, 1460), (1461, 1460), (5000, 3000), (10, 20)] {
            let s = SliceDesc { pool: 1, buf: 2, gen: 9, off: off as u32, len: len as u32 };
            let got = c.slice_sum(&s, &data[off..off + len], true);
            assert_eq!(got.0 % 0xffff, sum(&data[off..off + len]).0 % 0xffff, "{off}+{len}");
        }
        let before = c.stats();
        let s = SliceDesc { pool: 1, buf: 2, gen: 9, off: 64, len: 1024 };
        c.slice_sum(&s, &data[64..1088], true);
        let after = c.stats();
        assert_eq!(after.misses, before.misses, "every block was seen before");
        assert_eq!(after.hits - before.hits, 16);
        // Another generation is other contents: no hit.
        let s2 = SliceDesc { gen: 10, ..s };
        c.slice_sum(&s2, &data[64..1088], true);
        assert_eq!(c.stats().hits, after.hits);
    }

    #[test]
    fn uncacheable_slices_are_always_summed() {
        let data = pattern(4096, 5);
        let mut c = ChecksumCache::new(64, 6);
        let s = SliceDesc { pool: 1, buf: 0, gen: 1, off: 0, len: 4096 };
        c.slice_sum(&s, &data, false);
        c.slice_sum(&s, &data, false);
        assert_eq!(c.stats().hits + c.stats().misses, 0);
        assert_eq!(c.stats().bytes_summed, 8192);
    }

    /// Cost of checksumming 1460-byte segments of a warm 1 MiB "file",
    /// plain vs cached, per block size. `cargo test --release -p netstack
    /// -- --ignored --nocapture bench_checksum`.
    #[test]
    #[ignore]
    fn bench_checksum() {
        use std::time::Instant;
        let data = pattern(1 << 20, 1);
        let seg = 1460;
        let rounds = 50;
        let segs = || (0..(data.len() - seg) / seg).map(|i| i * seg + 7);
        let t = Instant::now();
        let mut x = 0u32;
        for _ in 0..rounds {
            for off in segs() {
                x = x.wrapping_add(sum(&data[off..off + seg]).0 as u32);
            }
        }
        let n = (rounds * segs().count()) as f64;
        std::println!("plain:    {:6.1} ns/segment ({x})", t.elapsed().as_nanos() as f64 / n);
        for shift in [6, 7, 8, 9, 10] {
            let mut c = ChecksumCache::new((4 << 20) >> shift, shift);
            let mut y = 0u32;
            for off in segs() {
                let s = SliceDesc { pool: 1, buf: 0, gen: 1, off: off as u32, len: seg as u32 };
                c.slice_sum(&s, &data[off..off + seg], true);
            }
            let t = Instant::now();
            for r in 0..rounds {
                for off in segs() {
                    // Shifted by r so segments are cut at other places.
                    let off = off - (r % 7);
                    let s = SliceDesc { pool: 1, buf: 0, gen: 1, off: off as u32, len: seg as u32 };
                    y = y.wrapping_add(c.slice_sum(&s, &data[off..off + seg], true).0 as u32);
                }
            }
            let st = c.stats();
            std::println!(
                "cached {:4}-byte blocks: {:6.1} ns/segment, {}% of bytes summed ({y})",
                1 << shift,
                t.elapsed().as_nanos() as f64 / n,
                st.bytes_summed * 100 / (st.bytes_summed + st.bytes_cached)
            );
        }
    }
}
