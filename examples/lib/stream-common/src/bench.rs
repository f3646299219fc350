//! The channel benchmark: aggregates per cycle and payload bytes per cycle
//! through one IO-Lite channel, for messages of 4 KiB to 1 MiB, in the copy
//! mode the image was built with (bench/channel builds and boots one image
//! per mode and prints the ratio).
//!
//! The producer plays a file cache serving cached data: per size it fills
//! a few buffers once ([`CACHE_BYTES`] in all, pseudo-random bytes) and
//! then sends them round-robin, each message a single-slice aggregate of
//! `size` bytes (a duplicate of the cached aggregate: a reference, as
//! IO-Lite's cache lends its buffers). The consumer reads every byte of
//! every message ([`word_sum`]), so both modes do the same work apart
//! from what the mode itself costs: in `iolite` the consumer reads the
//! producer's buffers in place; in `posix` the channel first copies each
//! message into a fresh buffer of the consumer's private pool (what
//! `read(2)` into a private buffer costs).
//!
//! One round: the producer sends messages until [`BUDGET_CYCLES`] have
//! passed (at least [`MIN_MESSAGES`]), then a round marker
//! ([`FLAG_EOF`] with the round number as tag). The consumer, at the
//! marker, records its counts, its checksum and the TSC in the
//! [`Control`] block and signals. Time is from the producer's first send to
//! the consumer's handling of the marker (one core, one TSC), so it covers
//! every message being received and read. A warm-up round precedes each
//! timed round.
//!
//! Output, one line per size (cycles, because components do not know the
//! TSC frequency; bench/channel converts to seconds):
//!
//! ```text
//! [bench_channel_producer] channelbench 4096: 123456 aggregates/Gcycle, 505.6 MB/Gcycle (N aggregates, B bytes, C cycles, X data notifications, Y release notifications, copied Z, checksum ok, mode iolite)
//! [bench_channel_producer] channelbench done
//! ```

use crate::{rdtsc, word_sum, ByteStream, Control, PEER, PRIVATE_POOL};
use component_runtime::log;
use iolite::{
    init_channel, Aggregate, Boundary, BufMeta, ChannelRx, ChannelTx, Copier, Domain, Error, PoolId, RoRegion,
    RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF,
};

/// Message sizes, one round each.
pub const SIZES: [usize; 5] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20];
/// Bytes of cached buffers per size (fewer, larger buffers for large sizes).
pub const CACHE_BYTES: usize = 4 << 20;
/// Cached buffers per size, at most.
pub const MAX_CACHED: usize = 16;
/// TSC cycles each timed round lasts, at least.
pub const BUDGET_CYCLES: u64 = 1 << 30;
/// Messages each timed round sends, at least.
pub const MIN_MESSAGES: u64 = 64;
/// Messages of each warm-up round.
pub const WARMUP_MESSAGES: u64 = 16;
/// Distinct buffers the consumer may hold at once.
pub const CONSUMER_QUOTA: u32 = 64;
/// The largest message: the consumer's private pool must hold one.
pub const MAX_MESSAGE: usize = 1 << 20;

/// What the producer needs from its component.
pub struct ProducerPorts<S: Fn(), W: Fn()> {
    /// The pool's id (`glue::pools::BENCH_POOL`).
    pub pool_id: PoolId,
    /// The pool dataport (read-write here).
    pub pool: RwRegion,
    /// Bookkeeping for the pool.
    pub pool_meta: &'static mut [BufMeta],
    /// The `channel` dataport.
    pub channel: RwRegion,
    /// Emits `data`.
    pub signal_data: S,
    /// Waits for `space`.
    pub wait_space: W,
}

/// One size's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Message size.
    pub size: usize,
    /// Messages received.
    pub messages: u64,
    /// Bytes received.
    pub bytes: u64,
    /// TSC cycles from the first send to the marker's handling.
    pub cycles: u64,
    /// Whether the consumer's checksum is the expected one.
    pub checksum_ok: bool,
    /// Bytes the consumer copied in the round.
    pub copied: u64,
}

/// Runs every size; prints one line each and `channelbench done`.
/// `budget` is [`BUDGET_CYCLES`] on target (tests pass less).
pub fn produce<S: Fn(), W: Fn()>(ports: ProducerPorts<S, W>, budget: u64) -> [Round; SIZES.len()] {
    let ProducerPorts { pool_id, pool, pool_meta, channel, signal_data, wait_space } = ports;
    let d = Domain::new();
    d.add_owned_pool(pool_id, pool, pool_meta, Trust::Trusted).expect("pool dataport");
    d.set_pool_acl(pool_id, &[PEER]).expect("acl");
    d.set_quota(PEER, CONSUMER_QUOTA).expect("quota");
    let pages = d.pool_stats(pool_id).expect("pool").pages;
    assert!(crate::release_ring_fits(pages), "release ring smaller than the pool");
    assert!(CACHE_BYTES <= pages as usize * 4096, "pool smaller than the cache");
    // SAFETY: the channel dataport; the consumer attaches after `magic`.
    let control = unsafe {
        init_channel(channel, crate::GEOMETRY).expect("channel dataport");
        Control::at(channel)
    };
    crate::reset_control(control);
    // SAFETY: initialised above; the only sender.
    let mut tx = unsafe { ChannelTx::attach(crate::attach(&d, channel)) }.expect("attach");
    log!(
        "channelbench start: mode {}, sizes 4 KiB..1 MiB, {} cycles per size (at least {} messages), {} MiB cached per size",
        BUILD_COPY_MODE.name(),
        budget,
        MIN_MESSAGES,
        CACHE_BYTES >> 20
    );
    Control::set(&control.magic, crate::CONTROL_MAGIC);

    let mut results = [Round { size: 0, messages: 0, bytes: 0, cycles: 0, checksum_ok: false, copied: 0 }; SIZES.len()];
    let mut bytes = ByteStream::new(0xbe9c);
    for (i, &size) in SIZES.iter().enumerate() {
        let cached = (CACHE_BYTES / size).min(MAX_CACHED);
        let mut cache: [Option<Aggregate<'_>>; MAX_CACHED] = [const { None }; MAX_CACHED];
        let mut sums = [0u64; MAX_CACHED];
        for (slot, sum) in cache.iter_mut().zip(sums.iter_mut()).take(cached) {
            let mut w = d.alloc(pool_id, size).expect("cache buffer");
            bytes.fill(&mut w.writable()[..size]);
            *sum = word_sum(0, &w.writable()[..size]);
            *slot = Some(w.seal(size).map_err(|(e, _)| e).expect("seal"));
        }
        let warmup = 2 * i as u64;
        let ctx = RoundCtx {
            d: &d,
            control,
            cache: &cache[..cached],
            sums: &sums[..cached],
            signal_data: &signal_data,
            wait_space: &wait_space,
        };
        round(&ctx, &mut tx, warmup, |sent, _| sent >= WARMUP_MESSAGES);
        let notified_before = tx.notifications();
        let releases_before = Control::get(&control.notifications);
        let timed = warmup + 1;
        let (start, sent, expected) =
            round(&ctx, &mut tx, timed, |sent, cycles| sent >= MIN_MESSAGES && cycles >= budget);
        let r = Round {
            size,
            messages: Control::get(&control.aggregates),
            bytes: Control::get(&control.bytes),
            cycles: Control::get(&control.end_tsc).wrapping_sub(start),
            checksum_ok: Control::get(&control.checksum) == expected && Control::get(&control.aggregates) == sent,
            copied: Control::get(&control.copied),
        };
        let per_g = |x: u64| (u128::from(x) * 1_000_000_000 / u128::from(r.cycles.max(1))) as u64;
        // MB (10^6 bytes) per 10^9 cycles, one decimal.
        let mb_tenths = (u128::from(r.bytes) * 10_000 / u128::from(r.cycles.max(1))) as u64;
        log!(
            "channelbench {}: {} aggregates/Gcycle, {}.{} MB/Gcycle ({} aggregates, {} bytes, {} cycles, {} data notifications, {} release notifications, copied {}, checksum {}, mode {})",
            size,
            per_g(r.messages),
            mb_tenths / 10,
            mb_tenths % 10,
            r.messages,
            r.bytes,
            r.cycles,
            tx.notifications() - notified_before,
            Control::get(&control.notifications) - releases_before,
            r.copied,
            if r.checksum_ok { "ok" } else { "MISMATCH" },
            BUILD_COPY_MODE.name()
        );
        results[i] = r;
        // Dropping the cache frees its buffers (every lent hold is back).
        drop(cache);
        assert_eq!(d.pool_stats(pool_id).expect("pool").pages_in_use, 0, "pool not empty after a round");
    }
    Control::set(&control.finished, 1);
    signal_data();
    log!("channelbench done");
    results
}

/// What a round needs besides the channel end.
struct RoundCtx<'a, 'd, S: Fn(), W: Fn()> {
    d: &'d Domain,
    control: &'a Control,
    cache: &'a [Option<Aggregate<'d>>],
    sums: &'a [u64],
    signal_data: &'a S,
    wait_space: &'a W,
}

impl<S: Fn(), W: Fn()> RoundCtx<'_, '_, S, W> {
    /// Signals the consumer if it waits for what was sent.
    fn flush(&self, tx: &mut ChannelTx<'_>) {
        if tx.flush() {
            (self.signal_data)();
        }
    }

    /// Flushes, then waits for the consumer (releases, room if `full`: the
    /// last send found the ring full, or its record of a round marker)
    /// unless that already came in.
    fn block(&self, tx: &mut ChannelTx<'_>, full: bool) {
        self.flush(tx);
        if !tx.arm(true, full) {
            (self.wait_space)();
        }
        tx.disarm();
    }
}

/// One round: sends duplicates of the cached aggregates round-robin until
/// `stop(sent, cycles)`, then the round marker, and waits for the
/// consumer's record of it and for every release. Returns the TSC at the
/// start, the messages sent and the checksum the consumer should report.
fn round<'d, S: Fn(), W: Fn()>(
    ctx: &RoundCtx<'_, 'd, S, W>,
    tx: &mut ChannelTx<'d>,
    number: u64,
    stop: impl Fn(u64, u64) -> bool,
) -> (u64, u64, u64) {
    let cached = ctx.cache.len() as u64;
    let mut sent = 0u64;
    let mut expected = 0u64;
    let start = rdtsc();
    while !stop(sent, rdtsc() - start) {
        let k = (sent % cached) as usize;
        let agg = ctx.cache[k].as_ref().expect("cached").duplicate().expect("duplicate");
        match tx.send(agg, number, 0) {
            Ok(()) => {
                sent += 1;
                expected = expected.wrapping_add(ctx.sums[k]);
            }
            Err((e @ (Error::Full | Error::QuotaExceeded), _)) => ctx.block(tx, e == Error::Full),
            Err((e, _)) => panic!("send: {:?}", e),
        }
    }
    loop {
        match tx.send(Aggregate::new(ctx.d), number, FLAG_EOF) {
            Ok(()) => break,
            Err((Error::Full, _)) => ctx.block(tx, true),
            Err((e, _)) => panic!("round marker: {:?}", e),
        }
    }
    ctx.flush(tx);
    // Wait for the consumer's record of the marker and every release.
    loop {
        let _ = tx.poll_releases();
        if Control::get(&ctx.control.ack) == number + 1 && ctx.d.peer_held_buffers(PEER).expect("peer") == 0 {
            break;
        }
        ctx.block(tx, false);
    }
    (start, sent, expected)
}

/// What the consumer needs from its component.
pub struct ConsumerPorts<S: Fn(), W: Fn()> {
    /// The producer's pool's id (`glue::pools::BENCH_POOL`).
    pub pool_id: PoolId,
    /// The producer's pool dataport (read-only here).
    pub pool: RoRegion,
    /// Bookkeeping for the foreign pool.
    pub pool_meta: &'static mut [BufMeta],
    /// The private pool (copies in `posix`).
    pub private: RwRegion,
    /// Bookkeeping for the private pool.
    pub private_meta: &'static mut [BufMeta],
    /// The `channel` dataport.
    pub channel: RwRegion,
    /// Emits `space`.
    pub signal_space: S,
    /// Waits for `data`.
    pub wait_data: W,
}

/// Receives and reads every message until the producer is finished.
pub fn consume<S: Fn(), W: Fn()>(ports: ConsumerPorts<S, W>) {
    let ConsumerPorts { pool_id, pool, pool_meta, private, private_meta, channel, signal_space, wait_data } = ports;
    // SAFETY: the channel dataport; the block is only read until `magic`.
    let control = unsafe { Control::at(channel) };
    while Control::get(&control.magic) != crate::CONTROL_MAGIC {
        wait_data();
    }
    let d = Domain::new();
    d.add_foreign_pool(pool_id, pool, pool_meta, Trust::Trusted).expect("producer pool");
    d.add_owned_pool(PRIVATE_POOL, private, private_meta, Trust::Trusted).expect("private pool");
    assert!(
        d.pool_stats(PRIVATE_POOL).expect("private").pages as usize * 4096 >= MAX_MESSAGE,
        "private pool too small"
    );
    // SAFETY: initialised by the producer (magic is set); the only receiver.
    let mut rx = unsafe { ChannelRx::attach(crate::attach(&d, channel)) }.expect("attach");
    let mut copier = Copier::new(BUILD_COPY_MODE, Boundary::Pipe, Some(PRIVATE_POOL)).expect("copy pool");
    let (mut messages, mut bytes, mut sum) = (0u64, 0u64, 0u64);
    let mut copied_before = 0u64;
    loop {
        let mut marker = false;
        loop {
            let r = match copier.recv(&mut rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => panic!("receive: {:?}", e),
            };
            if r.flags & FLAG_EOF != 0 {
                let copied = d.stats().bytes_copied;
                Control::set(&control.aggregates, messages);
                Control::set(&control.bytes, bytes);
                Control::set(&control.checksum, sum);
                Control::set(&control.copied, copied - copied_before);
                Control::set(&control.end_tsc, rdtsc());
                Control::set(&control.ack, r.tag + 1);
                (messages, bytes, sum, copied_before) = (0, 0, 0, copied);
                marker = true;
                continue;
            }
            for s in r.agg.slices() {
                sum = sum.wrapping_add(word_sum(0, s));
            }
            bytes += r.agg.len() as u64;
            messages += 1;
        }
        rx.flush_releases().expect("release ring");
        crate::expect_all_flushed(&d);
        let asked = rx.flush();
        Control::set(&control.notifications, rx.notifications());
        if asked || marker {
            // The producer waits for the record even if nothing was released.
            signal_space();
        }
        if Control::get(&control.finished) == 1 {
            return;
        }
        if !rx.arm() {
            wait_data();
        }
        rx.disarm();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{meta, region, Event};
    use iolite::PoolLayout;

    #[test]
    fn bench_rounds_on_the_host() {
        // The dataport sizes of examples/channelbench/channelbench.camkes.
        let pool = region(0x80_0000);
        let pages = PoolLayout::fitting(pool.len()).pages;
        let channel = region(0x10000);
        let private_pages = 320;
        let private = region(PoolLayout { pages: private_pages }.region_bytes());
        let (data, space) = (Event::default(), Event::default());
        let (d2, s2) = (data.clone(), space.clone());
        let consumer = std::thread::spawn(move || {
            consume(ConsumerPorts {
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
        let rounds = produce(
            ProducerPorts {
                pool_id: 1,
                pool,
                pool_meta: meta(pages),
                channel,
                signal_data: || data.signal(),
                wait_space: || space.wait(),
            },
            1 << 20,
        );
        consumer.join().unwrap();
        for r in rounds {
            assert!(r.checksum_ok, "{r:?}");
            assert!(r.messages >= MIN_MESSAGES);
            assert_eq!(r.bytes, r.messages * r.size as u64);
            let copies = BUILD_COPY_MODE.copies(Boundary::Pipe);
            assert_eq!(r.copied, if copies { r.bytes } else { 0 });
        }
    }
}
