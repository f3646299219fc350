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

use crate::{fnv1a64, ByteStream, Control, SplitMix, FNV_START, PEER, PRIVATE_POOL};
use component_runtime::log;
use iolite::{
    init_channel, Aggregate, Boundary, BufMeta, ChannelRx, ChannelTx, Copier, Domain, Error, PoolId, RoRegion,
    RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF,
};

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

/// What the producer needs from its component.
pub struct ProducerPorts<S: Fn(), W: Fn()> {
    /// The pool's id (`glue::pools::STREAM_POOL`).
    pub pool_id: PoolId,
    /// The pool dataport (read-write here).
    pub pool: RwRegion,
    /// Bookkeeping for the pool, one entry per data page.
    pub pool_meta: &'static mut [BufMeta],
    /// The `channel` dataport.
    pub channel: RwRegion,
    /// Emits `data` to the consumer.
    pub signal_data: S,
    /// Waits for `space` from the consumer.
    pub wait_space: W,
}

/// The producer's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerReport {
    /// Payload bytes streamed.
    pub bytes: u64,
    /// Aggregates streamed (without the end marker).
    pub aggregates: u64,
    /// FNV-1a 64 of the stream.
    pub checksum: u64,
    /// Free pages of the pool before the stream.
    pub free_before: u32,
    /// Free pages of the pool after the stream and every release.
    pub free_after: u32,
}

/// A group being sent: its aggregates, in order.
struct Outbox<'d> {
    aggs: [Option<Aggregate<'d>>; 2],
    next: usize,
}

/// Streams the whole plan, waits for every release and for the consumer's
/// report, prints the producer's lines and sets `producer_reported`.
///
/// With `await_restart` it then waits until the consumer's restarted
/// incarnation says so (it faults on purpose after the report), applies
/// the death protocol for it (nothing is left to drop: it had returned
/// every hold before faulting) and reports that too.
pub fn produce<S: Fn(), W: Fn()>(ports: ProducerPorts<S, W>, await_restart: bool) -> ProducerReport {
    let ProducerPorts { pool_id, pool, pool_meta, channel, signal_data, wait_space } = ports;
    let d = Domain::new();
    d.add_owned_pool(pool_id, pool, pool_meta, Trust::Trusted).expect("pool dataport");
    // Only the consumer has the pool mapped; lending to anyone else fails.
    d.set_pool_acl(pool_id, &[PEER]).expect("acl");
    d.set_quota(PEER, CONSUMER_QUOTA).expect("quota");
    let pages = d.pool_stats(pool_id).expect("pool").pages;
    assert!(crate::release_ring_fits(pages), "release ring smaller than the pool");
    assert!(u64::from(MAX_AGGREGATE) < u64::from(pages) * 4096 / 2, "pool too small for the largest group");

    let control = {
        // SAFETY: the channel dataport, used only as a channel and control
        // block; the consumer attaches only after `magic` is set below.
        unsafe {
            init_channel(channel, crate::GEOMETRY).expect("channel dataport");
            Control::at(channel)
        }
    };
    crate::reset_control(control);
    // SAFETY: initialised above with the same capacities; the only sender.
    let mut tx = unsafe { ChannelTx::attach(crate::attach(&d, channel)) }.expect("attach");

    let (total_bytes, total_aggs) = Plan::totals();
    let free_before = free_pages(&d, pool_id);
    log!(
        "stream start: {} bytes in {} aggregates (groups of 1-{} buffers up to {} KiB, headers packed, some split in two; consumer quota {} buffers)",
        total_bytes,
        total_aggs,
        MAX_BODIES + 1,
        MAX_BODY >> 10,
        CONSUMER_QUOTA
    );
    log!("pool free pages before: {} of {}", free_before, pages);
    Control::set(&control.magic, crate::CONTROL_MAGIC);

    let mut data = ByteStream::new(DATA_SEED);
    let mut checksum = FNV_START;
    let (mut bytes, mut aggregates) = (0u64, 0u64);
    let (mut pool_waits, mut ring_full_waits) = (0u64, 0u64);
    let mut plan = Plan::new().peekable();
    let mut outbox: Option<Outbox<'_>> = None;

    loop {
        let _ = tx.poll_releases();
        if outbox.is_none() {
            let Some(group) = plan.peek().copied() else { break };
            match build_group(&d, pool_id, &group, &mut data, &mut checksum) {
                Ok(out) => {
                    plan.next();
                    bytes += group.len();
                    outbox = Some(out);
                }
                Err(Error::PoolExhausted) => {
                    // The consumer holds the pages: wait for its releases.
                    pool_waits += 1;
                    block(&mut tx, &signal_data, &wait_space, false);
                    continue;
                }
                Err(e) => panic!("building the group after aggregate {}: {:?}", aggregates, e),
            }
        }
        let out = outbox.as_mut().expect("filled above");
        while out.next < 2 {
            let Some(agg) = out.aggs[out.next].take() else {
                out.next += 1;
                continue;
            };
            // The tag is the aggregate's sequence number.
            match tx.send(agg, aggregates, 0) {
                Ok(()) => {
                    aggregates += 1;
                    out.next += 1;
                }
                Err((e, agg)) => {
                    out.aggs[out.next] = Some(agg);
                    match e {
                        Error::Full => ring_full_waits += 1,
                        // Counted by the domain (quota_refusals).
                        Error::QuotaExceeded => {}
                        e => panic!("send {}: {:?}", aggregates, e),
                    }
                    block(&mut tx, &signal_data, &wait_space, e == Error::Full);
                }
            }
        }
        outbox = None;
    }
    loop {
        match tx.send_eof() {
            Ok(()) => break,
            Err(Error::Full) => block(&mut tx, &signal_data, &wait_space, true),
            Err(e) => panic!("end of stream: {:?}", e),
        }
    }
    if tx.flush() {
        signal_data();
    }
    // The last, partly used header page goes back once its objects are.
    d.flush_pack(pool_id).expect("flush pack");
    while Control::get(&control.consumer_done) != 1 {
        block(&mut tx, &signal_data, &wait_space, false);
    }
    log!("stream done: {} bytes, checksum {:#018x}", bytes, checksum);
    if await_restart {
        // The consumer may keep part of the stream and fault holding it:
        // those buffers come back only through the death protocol.
        tx.poll_releases().expect("release ring");
        let held = d.pool_stats(pool_id).expect("pool").pages_in_use;
        log!("consumer still holds {} pages of the stream", held);
        Control::set(&control.producer_reported, 1);
        signal_data();
        loop {
            tx.poll_releases().expect("release ring");
            let restarts = Control::get(&control.consumer_restarted);
            if restarts > 0 {
                let dropped = d.peer_died(PEER).expect("peer");
                log!(
                    "consumer restarted after its fault (restart {}): death protocol dropped {} buffers, pool free pages {} of {}",
                    restarts,
                    dropped,
                    free_pages(&d, pool_id),
                    pages
                );
                break;
            }
            wait_space();
        }
    } else {
        while d.pool_stats(pool_id).expect("pool").pages_in_use != 0 {
            block(&mut tx, &signal_data, &wait_space, false);
        }
        Control::set(&control.producer_reported, 1);
        signal_data();
    }
    let free_after = free_pages(&d, pool_id);
    log!("pool free pages after: {} of {}", free_after, pages);
    let s = d.stats();
    log!(
        "back-pressure: {} quota refusals, {} ring-full waits, {} pool-empty waits; pool high water {} of {} pages; {} data notifications for {} aggregates; {} releases received",
        s.quota_refusals,
        ring_full_waits,
        pool_waits,
        s.high_water_pages,
        pages,
        tx.notifications(),
        aggregates,
        s.releases_received,
    );
    ProducerReport { bytes, aggregates, checksum, free_before, free_after }
}

/// Tells the consumer about everything sent so far (a signal if it waits
/// for data), then blocks until it signals (releases, room in the ring if
/// `full`: the last send found it full, or a control change) and applies
/// its releases. Does not block if they came in meanwhile. Never spins:
/// seL4 notifications are sticky, so a signal that came in before the
/// wait ends it at once.
fn block(tx: &mut ChannelTx<'_>, signal_data: &impl Fn(), wait_space: &impl Fn(), full: bool) {
    if tx.flush() {
        signal_data();
    }
    if !tx.arm(true, full) {
        wait_space();
    }
    tx.disarm();
    let _ = tx.poll_releases();
}

fn free_pages(d: &Domain, pool: PoolId) -> u32 {
    let s = d.pool_stats(pool).expect("pool");
    s.free_pages
}

/// Allocates and fills one group; on `PoolExhausted` nothing was written
/// and the stream's position is unchanged (so the retry sends the same
/// bytes).
fn build_group<'d>(
    d: &'d Domain,
    pool: PoolId,
    g: &Group,
    data: &mut ByteStream,
    checksum: &mut u64,
) -> Result<Outbox<'d>, Error> {
    // Every buffer first, unwritten, so that a full pool costs nothing.
    let mut writers: [Option<iolite::BufMut<'d>>; MAX_BODIES] = [None, None, None, None];
    for (w, &len) in writers.iter_mut().zip(&g.body[..g.bodies]) {
        *w = Some(d.alloc(pool, len as usize)?);
    }
    let mut agg = if g.header > 0 {
        // Sub-page object: packed with other headers into a shared page.
        d.pack(pool, g.header as usize, |bytes| {
            data.fill(bytes);
            *checksum = fnv1a64(*checksum, bytes);
        })?
    } else {
        Aggregate::new(d)
    };
    for (w, &len) in writers.iter_mut().zip(&g.body[..g.bodies]) {
        let mut w = w.take().expect("allocated");
        let bytes = &mut w.writable()[..len as usize];
        data.fill(bytes);
        *checksum = fnv1a64(*checksum, bytes);
        let sealed = w.seal(len as usize).map_err(|(e, _)| e)?;
        agg.append(sealed).map_err(|(e, _)| e)?;
    }
    let second = if g.split > 0 { Some(agg.split_off(g.split as usize)?) } else { None };
    Ok(Outbox { aggs: [Some(agg), second], next: 0 })
}

/// What the consumer needs from its component.
pub struct ConsumerPorts<S: Fn(), W: Fn()> {
    /// The producer's pool's id (`glue::pools::STREAM_POOL`).
    pub pool_id: PoolId,
    /// The producer's pool dataport (read-only here).
    pub pool: RoRegion,
    /// Bookkeeping for the foreign pool.
    pub pool_meta: &'static mut [BufMeta],
    /// The consumer's private pool (its own memory).
    pub private: RwRegion,
    /// Bookkeeping for the private pool.
    pub private_meta: &'static mut [BufMeta],
    /// The `channel` dataport.
    pub channel: RwRegion,
    /// Emits `space` to the producer.
    pub signal_space: S,
    /// Waits for `data` from the producer.
    pub wait_data: W,
    /// How many of the last aggregates received by reference the consumer
    /// keeps (never releases) when the stream ends: on the image it then
    /// faults holding them, so the producer gets them back only through
    /// the death protocol. 0 releases everything (host test).
    pub hold_at_end: usize,
}

/// Most aggregates the consumer can keep at the end of the stream.
pub const MAX_HELD: usize = 4;

/// The consumer's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerReport {
    /// Payload bytes received.
    pub bytes: u64,
    /// Aggregates received (without the end marker).
    pub aggregates: u64,
    /// FNV-1a 64 of everything received, in order.
    pub checksum: u64,
    /// The copied-bytes counter.
    pub copied: u64,
    /// An address inside a buffer of the producer's pool this consumer
    /// received (by reference), or, when the mode copies, inside the
    /// producer's pool the copies were made from: mapped read-only here.
    pub probe: usize,
    /// Whether `probe` is in a buffer received by reference.
    pub probe_received: bool,
}

/// Receives the whole stream, checks it arrives in order, returns every
/// hold, prints the consumer's lines, and waits until the producer has
/// printed its final report.
pub fn consume<S: Fn(), W: Fn()>(ports: ConsumerPorts<S, W>) -> ConsumerReport {
    let ConsumerPorts {
        pool_id,
        pool,
        pool_meta,
        private,
        private_meta,
        channel,
        signal_space,
        wait_data,
        hold_at_end,
    } = ports;
    // SAFETY: the channel dataport; the block is only read until `magic`.
    let control = unsafe { Control::at(channel) };
    while Control::get(&control.magic) != crate::CONTROL_MAGIC {
        wait_data();
    }
    let d = Domain::new();
    d.add_foreign_pool(pool_id, pool, pool_meta, Trust::Trusted).expect("producer pool");
    d.add_owned_pool(PRIVATE_POOL, private, private_meta, Trust::Trusted).expect("private pool");
    // SAFETY: initialised by the producer (magic is set); the only receiver.
    let mut rx = unsafe { ChannelRx::attach(crate::attach(&d, channel)) }.expect("attach");
    // The copy modes copy at this end, into the private pool.
    let mut copier = Copier::new(BUILD_COPY_MODE, Boundary::Pipe, Some(PRIVATE_POOL)).expect("copy pool");
    let private_stats = d.pool_stats(PRIVATE_POOL).expect("private pool");
    let private_free_before = private_stats.free_pages;
    log!(
        "consumer attached: mode {}, {} (private pool {} pages)",
        BUILD_COPY_MODE.name(),
        if copier.copies() {
            "each aggregate is copied into a private buffer"
        } else {
            "aggregates are received by reference"
        },
        private_stats.pages
    );

    let mut checksum = FNV_START;
    let (mut bytes, mut aggregates) = (0u64, 0u64);
    let mut probe = 0usize;
    let mut eof = false;
    // The last aggregates received by reference, kept (see `hold_at_end`).
    let hold = if copier.copies() { 0 } else { hold_at_end.min(MAX_HELD) };
    let mut kept: [Option<iolite::Aggregate<'_>>; MAX_HELD] = [None, None, None, None];
    while !eof {
        loop {
            let r = match copier.recv(&mut rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => panic!("receive after {} aggregates: {:?}", aggregates, e),
            };
            if r.flags & FLAG_EOF != 0 {
                eof = true;
                break;
            }
            assert_eq!(r.tag, aggregates, "aggregates out of order");
            for s in r.agg.slices() {
                checksum = fnv1a64(checksum, s);
                if probe == 0 && !copier.copies() {
                    probe = s.as_ptr() as usize;
                }
            }
            bytes += r.agg.len() as u64;
            aggregates += 1;
            if hold > 0 {
                // Replacing the oldest kept aggregate releases it.
                kept[aggregates as usize % hold] = Some(r.agg);
                continue;
            }
            // Dropping `r` queues the releases of its holds.
        }
        // One release batch (and at most one notification) per wake-up.
        rx.flush_releases().expect("release ring");
        crate::expect_all_flushed(&d);
        if rx.flush() {
            signal_space();
        }
        if !eof {
            if !rx.arm() {
                wait_data();
            }
            rx.disarm();
        }
    }
    assert!(!d.has_returns(PEER), "releases left over");
    let copied = d.stats().bytes_copied;
    let private_stats = d.pool_stats(PRIVATE_POOL).expect("private pool");
    log!("received {} bytes in {} aggregates, checksum {:#018x}", bytes, aggregates, checksum);
    log!(
        "copied bytes: {} (mode {}), by reference: {}",
        copied,
        BUILD_COPY_MODE.name(),
        d.stats().bytes_by_ref_received
    );
    log!("private pool free pages before: {}, after: {}", private_free_before, private_stats.free_pages);
    Control::set(&control.bytes, bytes);
    Control::set(&control.aggregates, aggregates);
    Control::set(&control.checksum, checksum);
    Control::set(&control.copied, copied);
    Control::set(&control.consumer_done, 1);
    signal_space();
    while Control::get(&control.producer_reported) != 1 {
        wait_data();
    }
    let held_buffers: usize = kept.iter().flatten().map(|a| a.descs().len()).sum();
    if let Some(first) = kept.iter().flatten().next() {
        // Aim the fault at a buffer still held: a received buffer.
        probe = first.slices().next().map_or(probe, |s| s.as_ptr() as usize);
        log!("keeping {} aggregates ({} slices) of the stream unreleased", kept.iter().flatten().count(), held_buffers);
    }
    // Never released: the component faults next, holding them, and the
    // producer gets them back through the death protocol.
    core::mem::forget(kept);
    let probe_received = probe != 0;
    if !probe_received {
        // The copies are private (writable); aim at the producer's pool the
        // data came from: its first data page, mapped read-only here.
        probe = pool.as_ptr() as usize + iolite::PoolLayout::fitting(pool.len()).header_bytes();
    }
    ConsumerReport { bytes, aggregates, checksum, copied, probe, probe_received }
}

/// The restarted consumer's part: tell the producer, without touching the
/// channel (its first incarnation finished the stream).
pub fn announce_restart<S: Fn()>(channel: RwRegion, restarts: u64, signal_space: S) {
    // SAFETY: the channel dataport; only the control block is touched.
    let control = unsafe { Control::at(channel) };
    Control::set(&control.consumer_restarted, restarts);
    signal_space();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{meta, region, Event};
    use iolite::PoolLayout;

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
