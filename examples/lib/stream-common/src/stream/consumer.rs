//! The consumer's side of the stream test: attaches once the producer is
//! ready, receives and checksums the stream in order, reports, and keeps
//! the last aggregates unreleased when asked (so that it faults holding
//! them on the image).

use crate::{fnv1a64, Control, FNV_START, PEER, PRIVATE_POOL};
use component_runtime::log;
use iolite::{
    Aggregate, Boundary, BufMeta, ChannelRx, Copier, Domain, PoolId, RoRegion, RwRegion, Trust, BUILD_COPY_MODE,
    FLAG_EOF,
};

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

/// What came in: totals, and the first byte received by reference.
struct Received {
    bytes: u64,
    aggregates: u64,
    checksum: u64,
    /// Address of the first slice received by reference (0: none).
    probe: usize,
}

/// The last aggregates received by reference, kept (see `hold_at_end`).
type Kept<'d> = [Option<Aggregate<'d>>; MAX_HELD];

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
    let private_free_before = announce_attach(&d, &copier);
    let hold = if copier.copies() { 0 } else { hold_at_end.min(MAX_HELD) };
    let mut kept: Kept<'_> = [None, None, None, None];
    let got = receive_stream(&d, &mut rx, &mut copier, hold, &mut kept, &signal_space, &wait_data);
    let copied = report(&d, control, &got, private_free_before);
    signal_space();
    while Control::get(&control.producer_reported) != 1 {
        wait_data();
    }
    let mut probe = keep(kept, got.probe);
    let probe_received = probe != 0;
    if !probe_received {
        // The copies are private (writable); aim at the producer's pool the
        // data came from: its first data page, mapped read-only here.
        probe = pool.as_ptr() as usize + iolite::PoolLayout::fitting(pool.len()).header_bytes();
    }
    let Received { bytes, aggregates, checksum, .. } = got;
    ConsumerReport { bytes, aggregates, checksum, copied, probe, probe_received }
}

/// The consumer's first line: how it receives; returns the private pool's
/// free pages before the stream.
fn announce_attach(d: &Domain, copier: &Copier) -> u32 {
    let private_stats = d.pool_stats(PRIVATE_POOL).expect("private pool");
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
    private_stats.free_pages
}

/// Receives until the end-of-stream marker: checks the order, checksums,
/// keeps the last `hold` aggregates in `kept` and releases the rest, one
/// release batch (and at most one notification) per wake-up.
fn receive_stream<'d>(
    d: &'d Domain,
    rx: &mut ChannelRx<'d>,
    copier: &mut Copier<'d>,
    hold: usize,
    kept: &mut Kept<'d>,
    signal_space: &impl Fn(),
    wait_data: &impl Fn(),
) -> Received {
    let mut got = Received { bytes: 0, aggregates: 0, checksum: FNV_START, probe: 0 };
    let mut eof = false;
    while !eof {
        loop {
            let r = match copier.recv(rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => panic!("receive after {} aggregates: {:?}", got.aggregates, e),
            };
            if r.flags & FLAG_EOF != 0 {
                eof = true;
                break;
            }
            assert_eq!(r.tag, got.aggregates, "aggregates out of order");
            for s in r.agg.slices() {
                got.checksum = fnv1a64(got.checksum, s);
                if got.probe == 0 && !copier.copies() {
                    got.probe = s.as_ptr() as usize;
                }
            }
            got.bytes += r.agg.len() as u64;
            got.aggregates += 1;
            if hold > 0 {
                // Replacing the oldest kept aggregate releases it.
                kept[got.aggregates as usize % hold] = Some(r.agg);
                continue;
            }
            // Dropping `r` queues the releases of its holds.
        }
        rx.flush_releases().expect("release ring");
        crate::expect_all_flushed(d);
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
    got
}

/// Prints the consumer's report and publishes it in the control block;
/// returns the copied-bytes counter.
fn report(d: &Domain, control: &Control, got: &Received, private_free_before: u32) -> u64 {
    assert!(!d.has_returns(PEER), "releases left over");
    let stats = d.stats();
    let copied = stats.bytes_copied;
    let private_stats = d.pool_stats(PRIVATE_POOL).expect("private pool");
    log!("received {} bytes in {} aggregates, checksum {:#018x}", got.bytes, got.aggregates, got.checksum);
    log!("copied bytes: {} (mode {}), by reference: {}", copied, BUILD_COPY_MODE.name(), stats.bytes_by_ref_received);
    log!("private pool free pages before: {}, after: {}", private_free_before, private_stats.free_pages);
    Control::set(&control.bytes, got.bytes);
    Control::set(&control.aggregates, got.aggregates);
    Control::set(&control.checksum, got.checksum);
    Control::set(&control.copied, copied);
    Control::set(&control.consumer_done, 1);
    copied
}

/// Keeps the aggregates in `kept` for good (the component faults next,
/// holding them, and the producer gets them back through the death
/// protocol) and returns where to aim that fault: a buffer still held, or
/// `probe` (0 if nothing was received by reference).
fn keep(kept: Kept<'_>, probe: usize) -> usize {
    let mut probe = probe;
    let held_buffers: usize = kept.iter().flatten().map(|a| a.descs().len()).sum();
    if let Some(first) = kept.iter().flatten().next() {
        // Aim the fault at a buffer still held: a received buffer.
        probe = first.slices().next().map_or(probe, |s| s.as_ptr() as usize);
        log!("keeping {} aggregates ({} slices) of the stream unreleased", kept.iter().flatten().count(), held_buffers);
    }
    // Never released.
    core::mem::forget(kept);
    probe
}

/// The restarted consumer's part: tell the producer, without touching the
/// channel (its first incarnation finished the stream).
pub fn announce_restart<S: Fn()>(channel: RwRegion, restarts: u64, signal_space: S) {
    // SAFETY: the channel dataport; only the control block is touched.
    let control = unsafe { Control::at(channel) };
    Control::set(&control.consumer_restarted, restarts);
    signal_space();
}
