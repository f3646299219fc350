//! The stream test: the producer streams a deterministic pseudo-random byte
//! stream to the consumer as aggregates through one IO-Lite channel; the
//! consumer checksums it; both report so a test can compare.
//!
//! The stream is cut into *groups*. A group is one aggregate made of 1..=4
//! body buffers of mixed sizes (a few bytes to 128 KiB, each its own
//! buffer), half of the time with a small header prepended that is packed
//! with other headers into shared pages ([`iolite::Domain::pack`]); one
//! group in four is split at a random byte into two aggregates sent one
//! after the other ([`iolite::Aggregate::split_off`]: two messages sharing
//! a buffer). The bytes, in stream order, are one [`ByteStream`], so the
//! checksum does not depend on the cutting.
//!
//! What each side prints (exact prefixes; the Robot suite
//! tests/robot/iolite.robot waits for them in this order, which the
//! protocol below makes deterministic):
//!
//! ```text
//! [stream_producer] stream start: N bytes in M aggregates (...)
//! [stream_producer] pool free pages before: X of P
//! [stream_consumer] consumer attached: mode <mode>, ...
//! [stream_consumer] received N bytes in M aggregates, checksum 0x...
//! [stream_consumer] copied bytes: C (mode <mode>), by reference: R
//! [stream_consumer] private pool free pages before: X, after: X
//! [stream_consumer] keeping K aggregates (S slices) of the stream unreleased   (image, by reference)
//! [stream_producer] stream done: N bytes, checksum 0x...
//! [stream_producer] consumer still holds H pages of the stream                 (image)
//!   ... the consumer's fault, its restart (supervisor lines) ...
//! [stream_producer] consumer restarted after its fault (restart 1): death protocol dropped B buffers, ...
//! [stream_producer] pool free pages after: X of P
//! [stream_producer] back-pressure: ...
//! ```
//!
//! Ordering protocol (through the [`Control`] block and the two events):
//! 1. The producer sets up the pool and the channel, prints its start
//!    lines, sets `magic` and streams. The consumer waits for `magic`
//!    before attaching and printing anything.
//! 2. After the last aggregate, the producer sends an end-of-stream marker
//!    and waits until the consumer has set `consumer_done`.
//! 3. The consumer, at the marker, releases everything except the last
//!    `hold_at_end` aggregates, flushes its releases, prints its lines,
//!    sets `consumer_done` and signals.
//! 4. The producer prints `stream done` and what the consumer still holds,
//!    sets `producer_reported`; only then may the consumer fault (it does,
//!    holding those buffers). On the host (no fault) the producer instead
//!    waits for every page to come back.
//! 5. The supervisor restarts the consumer, which sets `consumer_restarted`;
//!    the producer runs the death protocol (`Domain::peer_died`): the
//!    dead consumer's holds are dropped and the pool is whole again, which
//!    its final lines show.
//!
//! The producer's side is in `producer`, the consumer's in `consumer`;
//! what both share (the plan of groups) is here.

mod consumer;
mod producer;

pub use consumer::{announce_restart, consume, ConsumerPorts, ConsumerReport, MAX_HELD};
pub use producer::{produce, ProducerPorts, ProducerReport};

use crate::SplitMix;

/// Bytes the producer streams (at least; the last group may go over).
pub const STREAM_BYTES: u64 = 8 << 20;
/// Seed of the group sizes.
const PLAN_SEED: u64 = 0x10_1173;
/// Seed of the stream's bytes.
const DATA_SEED: u64 = 0x5eed_0fb1_7e55;
/// Distinct buffers of the producer's pool the consumer may hold at once.
pub const CONSUMER_QUOTA: u32 = 48;
/// The largest body buffer.
const MAX_BODY: u32 = 128 << 10;
/// The largest header.
const MAX_HEADER: u32 = 200;
/// Body buffers per group, at most.
const MAX_BODIES: usize = 4;
/// The largest aggregate: the consumer's private pool must hold one (in
/// the copying modes it copies each aggregate into one buffer).
pub const MAX_AGGREGATE: u32 = MAX_HEADER + MAX_BODIES as u32 * MAX_BODY;

/// One group of the stream: sizes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// Header bytes (0: no header).
    pub header: u32,
    /// Body buffer sizes (the first `bodies` entries).
    pub body: [u32; MAX_BODIES],
    /// How many body buffers.
    pub bodies: usize,
    /// Split into two aggregates at this byte (0: not split).
    pub split: u32,
}

impl Group {
    /// Payload bytes of the group.
    pub fn len(&self) -> u64 {
        u64::from(self.header) + self.body[..self.bodies].iter().map(|&b| u64::from(b)).sum::<u64>()
    }

    /// Whether the group has no bytes (never, for a planned one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Aggregates the group is sent as.
    pub fn aggregates(&self) -> u64 {
        if self.split > 0 {
            2
        } else {
            1
        }
    }
}

/// The deterministic sequence of groups adding up to [`STREAM_BYTES`].
#[derive(Debug, Clone)]
pub struct Plan {
    rng: SplitMix,
    planned: u64,
}

impl Default for Plan {
    fn default() -> Self {
        Self::new()
    }
}

impl Plan {
    /// The stream's plan from the start.
    pub fn new() -> Plan {
        Plan { rng: SplitMix::new(PLAN_SEED), planned: 0 }
    }

    /// Total bytes and aggregates of the whole stream.
    pub fn totals() -> (u64, u64) {
        let (mut bytes, mut aggregates) = (0, 0);
        for g in Plan::new() {
            bytes += g.len();
            aggregates += g.aggregates();
        }
        (bytes, aggregates)
    }
}

impl Iterator for Plan {
    type Item = Group;

    fn next(&mut self) -> Option<Group> {
        if self.planned >= STREAM_BYTES {
            return None;
        }
        let r = &mut self.rng;
        let header = if r.next_u64().is_multiple_of(2) { r.range(16, MAX_HEADER) } else { 0 };
        let bodies = r.range(1, MAX_BODIES as u32) as usize;
        let mut body = [0u32; MAX_BODIES];
        for b in body.iter_mut().take(bodies) {
            *b = match r.next_u64() % 8 {
                0..=3 => r.range(1, 4096),
                4..=6 => r.range(4097, 32 << 10),
                _ => r.range((32 << 10) + 1, MAX_BODY),
            };
        }
        let mut g = Group { header, body, bodies, split: 0 };
        if r.next_u64().is_multiple_of(4) {
            g.split = r.range(1, g.len() as u32 - 1);
        }
        self.planned += g.len();
        Some(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{meta, region, Event};
    use iolite::{Boundary, PoolLayout, BUILD_COPY_MODE};

    #[test]
    fn plan_is_deterministic_and_mixed() {
        let a: Vec<Group> = Plan::new().collect();
        let b: Vec<Group> = Plan::new().collect();
        assert_eq!(a, b);
        let (bytes, aggs) = Plan::totals();
        assert!(bytes >= STREAM_BYTES && bytes < STREAM_BYTES + u64::from(MAX_AGGREGATE));
        assert!(aggs > a.len() as u64, "some groups are split");
        assert!(a.iter().any(|g| g.header > 0) && a.iter().any(|g| g.header == 0));
        assert!(a.iter().any(|g| g.bodies == MAX_BODIES));
        assert!(a.iter().all(|g| g.len() <= u64::from(MAX_AGGREGATE) && (g.split as u64) < g.len()));
    }

    /// Producer and consumer on two threads, over host memory: what the
    /// image does, minus the fault.
    #[test]
    fn stream_end_to_end_on_the_host() {
        // The dataport sizes of examples/stream/stream.camkes.
        let pool = region(0x20_0000);
        let pages = PoolLayout::fitting(pool.len()).pages;
        let channel = region(0x10000);
        let private_pages = 160;
        let private = region(PoolLayout { pages: private_pages }.region_bytes());
        let (data, space) = (Event::default(), Event::default());
        let (d2, s2) = (data.clone(), space.clone());
        let consumer = std::thread::spawn(move || {
            consume(ConsumerPorts {
                hold_at_end: 0,
                pool_id: 1,
                pool: pool.read_only(),
                pool_meta: meta(pages),
                private,
                private_meta: meta(private_pages),
                channel,
                signal_space: || s2.signal(),
                wait_data: || d2.wait(),
            })
        });
        let p = produce(
            ProducerPorts {
                pool_id: 1,
                pool,
                pool_meta: meta(pages),
                channel,
                signal_data: || data.signal(),
                wait_space: || space.wait(),
            },
            false,
        );
        let c = consumer.join().unwrap();
        assert_eq!((p.bytes, p.aggregates), Plan::totals());
        assert_eq!((c.bytes, c.aggregates, c.checksum), (p.bytes, p.aggregates, p.checksum));
        assert_eq!(p.free_before, p.free_after);
        assert_eq!(p.free_before, pages);
        assert_eq!(pages, 511);
        let expected_copies = if BUILD_COPY_MODE.copies(Boundary::Pipe) { p.bytes } else { 0 };
        assert_eq!(c.copied, expected_copies);
        assert!(c.probe >= pool.as_ptr() as usize && c.probe < pool.as_ptr() as usize + pool.len());
    }
}
