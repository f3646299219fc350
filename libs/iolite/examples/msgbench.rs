//! Host microbenchmark of the per-message and per-operation costs of the
//! library (no payload bytes are touched, so this is pure overhead):
//!
//! ```text
//! cargo run --release -p iolite --example msgbench
//! ```
//!
//! * `msg 1-slice` / `msg 4-slice`: one message through a channel, one at a
//!   time: `duplicate` of a cached aggregate, `send`, `recv`, drop,
//!   `flush_releases`, `poll_releases` (what a cache serving data costs per
//!   message, apart from reading the bytes).
//! * `batch32 …`: the same, 32 messages per batch (one flush and one poll per
//!   batch, as an event loop under load does).
//! * `posix 1-slice 64 B`: the copying receiver (copy mode `posix`) with a
//!   tiny payload, so the figure is the copy path's overhead.
//! * `send_ref msg …`: as `msg …`, sending with `ChannelTx::send_ref` (no
//!   duplicate is made).
//! * `dup+drop`, `append`, `split_off`, `range`: aggregate operations; the
//!   append and split figures include the duplicates they start from (see
//!   `dup+drop` for that part).
//!
//! Each figure is the best of several runs, in nanoseconds per iteration.
//! An argument runs only the cases whose name starts with it (profiling).
//! `MSGBENCH_RUNS=r MSGBENCH_DIV=k` make `r` runs of 1/k of the iterations
//! (e.g. 1 and 100 under `valgrind --tool=cachegrind`, which counts
//! instructions exactly where the timings are noisy).

use std::alloc::{alloc_zeroed, Layout};
use std::hint::black_box;
use std::time::Instant;

use iolite::{
    channel_bytes, init_channel, Aggregate, Attach, Boundary, BufMeta, ChannelRx, ChannelTx, Copier, CopyMode, Domain,
    Geometry, PeerId, PoolId, PoolLayout, RwRegion, Trust,
};

const P: PoolId = 1;
const PRIV: PoolId = 2;
const PEER: PeerId = PeerId(0);
const FWD: usize = 64;
const REL: usize = 2048;

fn region(len: usize) -> RwRegion {
    let layout = Layout::from_size_align(len, 4096).unwrap();
    // SAFETY: non-zero size; leaked on purpose (a dataport lives forever).
    let p = unsafe { alloc_zeroed(layout) };
    assert!(!p.is_null());
    // SAFETY: fresh memory used only through regions.
    unsafe { RwRegion::from_raw_parts(p, len).unwrap() }
}

fn meta(pages: u32) -> &'static mut [BufMeta] {
    Box::leak(vec![BufMeta::EMPTY; pages as usize].into_boxed_slice())
}

/// Best-of-`runs` nanoseconds per iteration of `f` (`iters` per run).
fn measure(name: &str, iters: u64, mut f: impl FnMut()) -> f64 {
    if !selected(name) {
        return 1.0;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let iters = (iters / env("MSGBENCH_DIV", 1)).max(1);
    let mut best = f64::MAX;
    for _ in 0..env("MSGBENCH_RUNS", 7) {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    println!("{name:<28} {best:8.1} ns");
    best
}

fn selected(name: &str) -> bool {
    std::env::args().nth(1).is_none_or(|f| name.starts_with(&f))
}

fn make<'d>(d: &'d Domain, len: usize, fill: u8) -> Aggregate<'d> {
    let mut w = d.alloc(P, len).unwrap();
    w.writable()[..len].fill(fill);
    w.seal(len).map_err(|(e, _)| e).unwrap()
}

/// An aggregate of `n` slices of `len` bytes each (distinct buffers).
fn cached<'d>(d: &'d Domain, n: usize, len: usize) -> Aggregate<'d> {
    let mut a = Aggregate::new(d);
    for i in 0..n {
        a.append(make(d, len, i as u8)).unwrap();
    }
    a
}

fn channel_case(name: &str, slices: usize, batch: usize, mode: CopyMode, len: usize) {
    channel_case_with(name, slices, batch, mode, len, false)
}

fn channel_case_with(name: &str, slices: usize, batch: usize, mode: CopyMode, len: usize, by_ref: bool) {
    if !selected(name) {
        return;
    }
    let (tx_d, rx_d) = (Domain::new(), Domain::new());
    let pages = 64;
    let pool = region(PoolLayout { pages }.region_bytes());
    tx_d.add_owned_pool(P, pool, meta(pages), Trust::Trusted).unwrap();
    rx_d.add_foreign_pool(P, pool.read_only(), meta(pages), Trust::Trusted).unwrap();
    let priv_pages = 256;
    rx_d.add_owned_pool(
        PRIV,
        region(PoolLayout { pages: priv_pages }.region_bytes()),
        meta(priv_pages),
        Trust::Trusted,
    )
    .unwrap();
    let ch = region(channel_bytes(FWD, REL));
    // SAFETY: fresh channel region, one sender and one receiver.
    let geometry = Geometry { fwd: FWD, rel: REL };
    let (mut tx, mut rx) = unsafe {
        init_channel(ch, geometry).unwrap();
        (
            ChannelTx::attach(Attach { domain: &tx_d, peer: PEER, region: ch, geometry }).unwrap(),
            ChannelRx::attach(Attach { domain: &rx_d, peer: PEER, region: ch, geometry }).unwrap(),
        )
    };
    let mut copier = Copier::new(mode, Boundary::Pipe, Some(PRIV)).unwrap();
    let src = cached(&tx_d, slices, len);
    assert_eq!(src.slice_count(), slices);
    let iters = 200_000 / batch as u64;
    let ns = measure(name, iters, || {
        for i in 0..batch {
            if by_ref {
                tx.send_ref(&src, i as u64, 0).unwrap();
            } else {
                tx.send(src.duplicate().unwrap(), i as u64, 0).map_err(|(e, _)| e).unwrap();
            }
        }
        black_box(tx.flush());
        for _ in 0..batch {
            let r = copier.recv(&mut rx).unwrap().unwrap();
            black_box(&r);
        }
        rx.flush_releases().unwrap();
        tx.poll_releases().unwrap();
    });
    if batch > 1 {
        println!("{:<28} {:8.1} ns", "  per message", ns / batch as f64);
    }
    assert_eq!(tx_d.stats().buffers_in_use, slices as u64);
    assert_eq!(rx_d.stats().bad_releases + tx_d.stats().bad_releases, 0);
}

fn main() {
    channel_case("msg 1-slice", 1, 1, CopyMode::IoLite, 4096);
    channel_case("msg 4-slice", 4, 1, CopyMode::IoLite, 4096);
    channel_case("batch32 1-slice", 1, 32, CopyMode::IoLite, 4096);
    channel_case("batch32 4-slice", 4, 32, CopyMode::IoLite, 4096);
    channel_case("posix 1-slice 64 B", 1, 1, CopyMode::Posix, 64);
    channel_case_with("send_ref msg 1-slice", 1, 1, CopyMode::IoLite, 4096, true);
    channel_case_with("send_ref msg 4-slice", 4, 1, CopyMode::IoLite, 4096, true);

    let d = Domain::new();
    let pages = 64;
    d.add_owned_pool(P, region(PoolLayout { pages }.region_bytes()), meta(pages), Trust::Trusted).unwrap();
    let one = cached(&d, 1, 100);
    let four = cached(&d, 4, 100);
    let n = 1_000_000;
    measure("dup+drop 1-slice", n, || drop(black_box(one.duplicate().unwrap())));
    measure("dup+drop 4-slice", n, || drop(black_box(four.duplicate().unwrap())));
    measure("append 4+1 (2 dups)", n, || {
        let mut a = four.duplicate().unwrap();
        a.append(one.duplicate().unwrap()).map_err(|(e, _)| e).unwrap();
        black_box(&a);
    });
    measure("split_off 4-slice mid (dup)", n, || {
        let mut a = four.duplicate().unwrap();
        let b = a.split_off(150).unwrap();
        black_box((&a, &b));
    });
    measure("range 4-slice (no dup)", n, || {
        black_box(four.range(50, 200).unwrap());
    });
    measure("Aggregate::new+drop", n, || {
        black_box(Aggregate::new(&d));
    });
}
