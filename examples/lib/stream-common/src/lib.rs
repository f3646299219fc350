//! IO-Lite channels on the target: the code shared by the stream test
//! (`stream_producer` → `stream_consumer`, examples/stream/stream.camkes)
//! and the channel benchmark (`bench_channel_producer` →
//! `bench_channel_consumer`, examples/channelbench/channelbench.camkes).
//!
//! The component crates are thin: they take their dataports and events from
//! the generated glue and call [`stream`] or [`bench`]. Everything here is
//! kernel-free (events are closures), so `cargo test -p stream-common` runs
//! the same producer and consumer on the host, on two threads.
//!
//! Shared memory of one producer/consumer pair:
//!
//! | dataport | producer | consumer | contents |
//! |---|---|---|---|
//! | `stream_pool` / `bench_pool` | RW | R | the producer's IO-Lite pool (header pages + data pages) |
//! | `channel` | RW | RW | the channel's two rings ([`iolite::channel_bytes`]), then a [`Control`] block |
//!
//! and two notifications: `data` (producer → consumer: new descriptors, or
//! a change of the control block) and `space` (consumer → producer:
//! releases, or a change of the control block). The consumer's private pool
//! (where the `posix` copy mode copies into, as `read(2)` copies into the
//! caller's buffer) is ordinary memory of the consumer ([`static_pool!`]):
//! it is shared with nobody.
#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

pub mod bench;
pub mod stream;

pub use iolite;

use core::sync::atomic::{AtomicU64, Ordering};
use iolite::{channel_bytes, Attach, Domain, Geometry, PeerId, PoolId, RwRegion};

/// The consumer's private pool (copies in the `posix` mode): shared with
/// nobody, so an id no pool of the assembly has. (The producer's pool has
/// the id the compiler derives, `glue::pools`, which the components pass
/// in their ports.)
pub const PRIVATE_POOL: PoolId = iolite::FIRST_PRIVATE_POOL;
/// Each side's peer slot for the other (one channel, so slot 0 on both).
pub const PEER: PeerId = PeerId(0);
/// Forward ring: aggregate descriptors in flight (336 bytes each).
pub const FWD_CAP: usize = 64;
/// Release ring. One `flush_releases` puts at most one entry per distinct
/// buffer the consumer held from the producer, which the producer's quota
/// bounds (48 or 64 here), and the producer applies every release before
/// each send and each wait. So the ring fills only if the consumer flushes
/// dozens of times while the producer never runs, and a consumer whose
/// flush could not place everything panics (`expect_all_flushed`) instead
/// of waiting with releases held back (the producer, waiting for them,
/// would never wake it). Also at least the pool's data pages
/// ([`release_ring_fits`]).
pub const REL_CAP: usize = 2048;
/// The channel's ring capacities.
pub const GEOMETRY: Geometry = Geometry { fwd: FWD_CAP, rel: REL_CAP };

/// How either side attaches to the channel dataport.
pub fn attach(d: &Domain, channel: RwRegion) -> Attach<'_> {
    Attach { domain: d, peer: PEER, region: channel, geometry: GEOMETRY }
}

/// Offset of the [`Control`] block in the channel dataport.
pub const CONTROL_OFF: usize = channel_bytes(FWD_CAP, REL_CAP).div_ceil(64) * 64;
/// The smallest channel dataport: rings plus the control block.
pub const CHANNEL_DATAPORT_MIN: usize = CONTROL_OFF + core::mem::size_of::<Control>();

/// Whether [`REL_CAP`] covers a pool of `pages` data pages (see there).
pub const fn release_ring_fits(pages: u32) -> bool {
    pages as usize <= REL_CAP
}

/// Panics if releases are still queued after a flush (release ring full):
/// waiting for data now could deadlock (see [`REL_CAP`]).
pub fn expect_all_flushed(d: &iolite::Domain) {
    assert!(!d.has_returns(PEER), "release ring full: releases held back (REL_CAP too small)");
}

/// Marks an initialised [`Control`] block ("IOLSTRM\0").
pub const CONTROL_MAGIC: u64 = u64::from_le_bytes(*b"IOLSTRM\0");

/// Application-level state both sides share next to the channel rings.
/// Every field is written by one side only (noted per field) and read by
/// the other; each change is followed by that side's event.
#[repr(C)]
pub struct Control {
    /// Producer: [`CONTROL_MAGIC`] once the channel and the pool are set up.
    pub magic: AtomicU64,
    /// Consumer: 1 once it has seen the end of the stream, dropped
    /// everything and queued every release.
    pub consumer_done: AtomicU64,
    /// Producer: 1 once it has printed its final report.
    pub producer_reported: AtomicU64,
    /// Consumer (a restarted incarnation): its restart count.
    pub consumer_restarted: AtomicU64,
    /// Consumer: bytes received (stream) or in the last bench round.
    pub bytes: AtomicU64,
    /// Consumer: aggregates received.
    pub aggregates: AtomicU64,
    /// Consumer: checksum of what it received.
    pub checksum: AtomicU64,
    /// Consumer: its copied-bytes counter.
    pub copied: AtomicU64,
    /// Consumer (bench): `round + 1` of the last round marker handled.
    pub ack: AtomicU64,
    /// Consumer (bench): TSC when it handled the round marker.
    pub end_tsc: AtomicU64,
    /// Consumer (bench): release notifications sent so far.
    pub notifications: AtomicU64,
    /// Producer (bench): 1 when the benchmark is over.
    pub finished: AtomicU64,
}

impl Control {
    /// The control block of a channel dataport.
    ///
    /// # Safety
    /// `channel` must be the channel dataport (mapped read-write, at least
    /// [`CHANNEL_DATAPORT_MIN`] bytes, 64-aligned), shared only with the
    /// other end, which accesses the block only through this type.
    pub unsafe fn at(channel: RwRegion) -> &'static Control {
        assert!(channel.len() >= CHANNEL_DATAPORT_MIN, "channel dataport too small for the control block");
        // SAFETY: in range (checked), aligned (64-aligned base, CONTROL_OFF a
        // multiple of 64); all fields are atomics, valid for any bits.
        unsafe { &*(channel.as_ptr().add(CONTROL_OFF) as *const Control) }
    }

    /// Reads a field (acquire: what the writer did before is visible).
    pub fn get(field: &AtomicU64) -> u64 {
        field.load(Ordering::Acquire)
    }

    /// Writes a field (release).
    pub fn set(field: &AtomicU64, value: u64) {
        field.store(value, Ordering::Release)
    }
}

/// Clears the control block (the producer, before setting `magic`).
pub fn reset_control(c: &Control) {
    for f in [
        &c.magic,
        &c.consumer_done,
        &c.producer_reported,
        &c.consumer_restarted,
        &c.bytes,
        &c.aggregates,
        &c.checksum,
        &c.copied,
        &c.ack,
        &c.end_tsc,
        &c.notifications,
        &c.finished,
    ] {
        f.store(0, Ordering::Relaxed);
    }
}

/// 64-bit FNV-1a offset basis.
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a over `bytes`, continued from `hash`.
pub fn fnv1a64(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A cheap checksum that reads every byte: the wrapping sum of the
/// little-endian 64-bit words (then the tail bytes). It depends on where
/// slices start, so both sides must checksum the same slicing (the
/// benchmark sends single-slice aggregates).
pub fn word_sum(mut acc: u64, bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<8>();
    for w in words {
        acc = acc.wrapping_add(u64::from_le_bytes(*w));
    }
    for &b in tail {
        acc = acc.wrapping_add(u64::from(b));
    }
    acc
}

/// SplitMix64: a tiny deterministic generator (the stream's sizes and bytes).
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_u64() % u64::from(hi - lo + 1)) as u32
    }
}

/// An endless pseudo-random byte stream: consecutive calls to
/// [`ByteStream::fill`] continue where the last one stopped, whatever the
/// piece sizes, so the stream's bytes do not depend on how it is cut.
#[derive(Debug, Clone)]
pub struct ByteStream {
    rng: SplitMix,
    word: [u8; 8],
    used: usize,
}

impl ByteStream {
    /// The stream for `seed`.
    pub const fn new(seed: u64) -> ByteStream {
        ByteStream { rng: SplitMix::new(seed), word: [0; 8], used: 8 }
    }

    /// Writes the next `out.len()` bytes of the stream into `out`.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut i = 0;
        // Finish the current word, then whole words, then start a new one.
        while i < out.len() && self.used < 8 {
            out[i] = self.word[self.used];
            self.used += 1;
            i += 1;
        }
        let (words, _) = out[i..].as_chunks_mut::<8>();
        let whole = words.len();
        for w in words {
            *w = self.rng.next_u64().to_le_bytes();
        }
        i += whole * 8;
        while i < out.len() {
            if self.used == 8 {
                self.word = self.rng.next_u64().to_le_bytes();
                self.used = 0;
            }
            out[i] = self.word[self.used];
            self.used += 1;
            i += 1;
        }
    }
}

/// The time stamp counter, fenced (for timing a stretch of code).
pub use component_runtime::time::rdtsc_ordered as rdtsc;

/// Private pools and bookkeeping tables as statics: the library's
/// [`iolite::static_pool!`] and [`iolite::static_meta!`], re-exported so the
/// component crates can keep writing `stream_common::static_pool!(PAGES)`.
pub use iolite::{static_meta, static_pool};

#[cfg(test)]
pub(crate) mod host {
    //! Host stand-ins: IO-Lite's fixtures for dataports, and notifications
    //! as `iolite::testing::Note`s (sticky, as seL4's: a signal before the
    //! wait is not lost). A wait that no signal ends is a lost wake-up: the
    //! test fails instead of hanging.
    pub use iolite::testing::{meta, region};
    use std::sync::Arc;

    #[derive(Clone, Default)]
    pub struct Event(Arc<iolite::testing::Note>);

    impl Event {
        pub fn signal(&self) {
            self.0.signal();
        }
        pub fn wait(&self) {
            assert!(self.0.wait(), "lost wake-up: nobody signalled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_stream_does_not_depend_on_cuts() {
        let mut whole = vec![0u8; 1000];
        ByteStream::new(7).fill(&mut whole);
        let mut cut = vec![0u8; 1000];
        let mut s = ByteStream::new(7);
        let mut at = 0;
        for len in [1, 3, 8, 13, 0, 64, 5, 906] {
            s.fill(&mut cut[at..at + len]);
            at += len;
        }
        assert_eq!(at, 1000);
        assert_eq!(whole, cut);
    }

    // The channel dataports of the assemblies are 64 KiB.
    const _: () = assert!(CHANNEL_DATAPORT_MIN <= 0x10000 && CONTROL_OFF.is_multiple_of(64));

    #[test]
    fn checksums() {
        assert_eq!(fnv1a64(FNV_START, b""), FNV_START);
        assert_eq!(fnv1a64(FNV_START, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(word_sum(0, &[1, 0, 0, 0, 0, 0, 0, 0, 2]), 3);
    }
}
