//! The producer's side of the stream test: sets up the pool and the
//! channel, streams the plan group by group, ends the stream, and waits
//! for the consumer's report (and, on the image, its restart).

use super::{Group, Plan, CONSUMER_QUOTA, DATA_SEED, MAX_AGGREGATE, MAX_BODIES, MAX_BODY};
use crate::{fnv1a64, ByteStream, Control, FNV_START, PEER};
use component_runtime::log;
use iolite::{init_channel, Aggregate, BufMeta, ChannelTx, Domain, Error, PoolId, RwRegion, Trust};

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

/// The sending end of the channel with the two notifications it needs.
struct Sender<'d, S: Fn(), W: Fn()> {
    tx: ChannelTx<'d>,
    signal_data: S,
    wait_space: W,
}

/// What the stream took: its totals and how often it had to wait.
#[derive(Default)]
struct Streamed {
    bytes: u64,
    aggregates: u64,
    checksum: u64,
    /// Waits for the consumer to return pool pages.
    pool_waits: u64,
    /// Waits for room in the forward ring.
    ring_full_waits: u64,
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
    let tx = unsafe { ChannelTx::attach(crate::attach(&d, channel)) }.expect("attach");
    let mut s = Sender { tx, signal_data, wait_space };

    let free_before = free_pages(&d, pool_id);
    announce_start(free_before, pages);
    Control::set(&control.magic, crate::CONTROL_MAGIC);
    let streamed = stream_plan(&d, pool_id, &mut s);
    s.end_stream();
    // The last, partly used header page goes back once its objects are.
    d.flush_pack(pool_id).expect("flush pack");
    while Control::get(&control.consumer_done) != 1 {
        s.block(false);
    }
    log!("stream done: {} bytes, checksum {:#018x}", streamed.bytes, streamed.checksum);
    if await_restart {
        await_consumer_restart(&d, pool_id, pages, control, &mut s);
    } else {
        while d.pool_stats(pool_id).expect("pool").pages_in_use != 0 {
            s.block(false);
        }
        Control::set(&control.producer_reported, 1);
        (s.signal_data)();
    }
    let free_after = free_pages(&d, pool_id);
    log!("pool free pages after: {} of {}", free_after, pages);
    report_back_pressure(&d, &s, &streamed, pages);
    let Streamed { bytes, aggregates, checksum, .. } = streamed;
    ProducerReport { bytes, aggregates, checksum, free_before, free_after }
}

/// The producer's first lines: what the stream is, and the pool before it.
fn announce_start(free_before: u32, pages: u32) {
    let (total_bytes, total_aggs) = Plan::totals();
    log!(
        "stream start: {} bytes in {} aggregates (groups of 1-{} buffers up to {} KiB, headers packed, some split in two; consumer quota {} buffers)",
        total_bytes,
        total_aggs,
        MAX_BODIES + 1,
        MAX_BODY >> 10,
        CONSUMER_QUOTA
    );
    log!("pool free pages before: {} of {}", free_before, pages);
}

/// Builds and sends every group of the plan, in order, waiting for the
/// consumer whenever the pool or the ring is full.
fn stream_plan<'d, S: Fn(), W: Fn()>(d: &'d Domain, pool_id: PoolId, s: &mut Sender<'d, S, W>) -> Streamed {
    let mut data = ByteStream::new(DATA_SEED);
    let mut streamed = Streamed { checksum: FNV_START, ..Streamed::default() };
    for group in Plan::new() {
        let mut out = loop {
            let _ = s.tx.poll_releases();
            match build_group(d, pool_id, &group, &mut data, &mut streamed.checksum) {
                Ok(out) => break out,
                Err(Error::PoolExhausted) => {
                    // The consumer holds the pages: wait for its releases.
                    streamed.pool_waits += 1;
                    s.block(false);
                }
                Err(e) => panic!("building the group after aggregate {}: {:?}", streamed.aggregates, e),
            }
        };
        streamed.bytes += group.len();
        s.send_group(&mut out, &mut streamed);
    }
    let _ = s.tx.poll_releases();
    streamed
}

/// After the report, on the image: the consumer keeps part of the stream
/// and faults holding it; those buffers come back only through the death
/// protocol, once its restarted incarnation says it runs.
fn await_consumer_restart<S: Fn(), W: Fn()>(
    d: &Domain,
    pool_id: PoolId,
    pages: u32,
    control: &Control,
    s: &mut Sender<'_, S, W>,
) {
    s.tx.poll_releases().expect("release ring");
    let held = d.pool_stats(pool_id).expect("pool").pages_in_use;
    log!("consumer still holds {} pages of the stream", held);
    Control::set(&control.producer_reported, 1);
    (s.signal_data)();
    loop {
        s.tx.poll_releases().expect("release ring");
        let restarts = Control::get(&control.consumer_restarted);
        if restarts > 0 {
            let dropped = d.peer_died(PEER).expect("peer");
            log!(
                "consumer restarted after its fault (restart {}): death protocol dropped {} buffers, pool free pages {} of {}",
                restarts,
                dropped,
                free_pages(d, pool_id),
                pages
            );
            return;
        }
        (s.wait_space)();
    }
}

/// The producer's last line: how often it waited and for what.
fn report_back_pressure<S: Fn(), W: Fn()>(d: &Domain, s: &Sender<'_, S, W>, streamed: &Streamed, pages: u32) {
    let stats = d.stats();
    log!(
        "back-pressure: {} quota refusals, {} ring-full waits, {} pool-empty waits; pool high water {} of {} pages; {} data notifications for {} aggregates; {} releases received",
        stats.quota_refusals,
        streamed.ring_full_waits,
        streamed.pool_waits,
        stats.high_water_pages,
        pages,
        s.tx.notifications(),
        streamed.aggregates,
        stats.releases_received,
    );
}

impl<'d, S: Fn(), W: Fn()> Sender<'d, S, W> {
    /// Sends a group's aggregates in order; the tag of each is its
    /// sequence number. A full ring or an exceeded quota waits for the
    /// consumer and sends the same aggregate again.
    fn send_group(&mut self, out: &mut Outbox<'d>, streamed: &mut Streamed) {
        while out.next < 2 {
            let Some(agg) = out.aggs[out.next].take() else {
                out.next += 1;
                continue;
            };
            match self.tx.send(agg, streamed.aggregates, 0) {
                Ok(()) => {
                    streamed.aggregates += 1;
                    out.next += 1;
                }
                Err((e, agg)) => {
                    out.aggs[out.next] = Some(agg);
                    match e {
                        Error::Full => streamed.ring_full_waits += 1,
                        // Counted by the domain (quota_refusals).
                        Error::QuotaExceeded => {}
                        e => panic!("send {}: {:?}", streamed.aggregates, e),
                    }
                    self.block(e == Error::Full);
                }
            }
        }
    }

    /// Sends the end-of-stream marker and tells the consumer.
    fn end_stream(&mut self) {
        loop {
            match self.tx.send_eof() {
                Ok(()) => break,
                Err(Error::Full) => self.block(true),
                Err(e) => panic!("end of stream: {:?}", e),
            }
        }
        if self.tx.flush() {
            (self.signal_data)();
        }
    }

    /// Tells the consumer about everything sent so far (a signal if it
    /// waits for data), then blocks until it signals (releases, room in the
    /// ring if `full`: the last send found it full, or a control change)
    /// and applies its releases. Does not block if they came in meanwhile.
    /// Never spins: seL4 notifications are sticky, so a signal that came in
    /// before the wait ends it at once.
    fn block(&mut self, full: bool) {
        if self.tx.flush() {
            (self.signal_data)();
        }
        if !self.tx.arm(true, full) {
            (self.wait_space)();
        }
        self.tx.disarm();
        let _ = self.tx.poll_releases();
    }
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
