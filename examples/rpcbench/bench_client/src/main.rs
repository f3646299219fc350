//! bench_client: times round trips with the TSC and prints, per kind,
//! `bench <name>: median <c> cycles, p10 <c>, p90 <c>, n=<N>`:
//!
//! - `rpc_glue`: `glue::glue_rpc::echo(v)` to bench_glue_server (generated
//!   stub and server loop);
//! - `rpc_raw`: a bare `sel4::call` on the `raw_rpc` slot to bench_raw_server,
//!   which answers with a bare `sel4::reply_recv`: the same endpoint, message
//!   shape and priorities, without the glue;
//! - `notification_glue`: `glue::ping::emit()` then `glue::pong::wait()`,
//!   bench_ping answering each ping with a pong;
//! - `rdtsc_overhead`: two timestamps with nothing between them, the part of
//!   every figure above that is the measurement itself.
//!
//! Each kind is warmed up first (caches, TLB, and any first-time slowpath
//! such as a server that has not reached its receive yet), then timed one
//! round trip at a time, so the median and percentiles are of single trips
//! and a timer interrupt only spoils the sample it lands in.
#![no_std]
#![no_main]

use component_runtime::log;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_client.rs"));

/// Timed round trips per kind.
const SAMPLES: usize = 2000;
/// Untimed round trips before each kind.
const WARMUP: usize = 200;

/// One sample buffer, reused by every kind. In .bss rather than on the
/// 16 KiB stack, which it would fill.
static mut CYCLES: [u64; SAMPLES] = [0; SAMPLES];

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    // SAFETY: the component is single-threaded and this is the only
    // reference to CYCLES ever taken.
    let cycles = unsafe { &mut *core::ptr::addr_of_mut!(CYCLES) };
    log!("bench started: {} round trips per kind after {} warm-up, cycles from rdtsc", SAMPLES, WARMUP);

    measure("rdtsc_overhead", cycles, |value| value);
    measure("rpc_glue", cycles, glue::glue_rpc::echo);
    measure("rpc_raw", cycles, raw_echo);
    measure("notification_glue", cycles, |value| {
        glue::ping::emit();
        // bench_ping's pong carries badge 1; answer the expected value
        // only if that is what arrived.
        if glue::pong::wait() == 1 {
            value
        } else {
            !value
        }
    });

    log!("bench done");
    component_runtime::exit(0)
}

/// One RPC to bench_raw_server without the glue: label 0, one word in MR0,
/// one word back in MR0.
#[inline(always)]
fn raw_echo(value: u64) -> u64 {
    let (info, mrs) = sel4::call(glue::raw_rpc::SLOT, sel4::MessageInfo::new(0, 0, 0, 1), [value, 0, 0, 0]);
    if info.length() == 1 {
        mrs[0]
    } else {
        !value
    }
}

/// Runs `trip(value)`, which must return `value`, WARMUP times untimed and
/// SAMPLES times timed, and prints the result line for `name`.
fn measure(name: &str, cycles: &mut [u64; SAMPLES], mut trip: impl FnMut(u64) -> u64) {
    let mut wrong = 0usize;
    for i in 0..WARMUP {
        let value = 0x5eed_0000 + i as u64;
        wrong += usize::from(trip(value) != value);
    }
    for (i, sample) in cycles.iter_mut().enumerate() {
        let value = i as u64;
        let start = timestamp();
        let answer = trip(value);
        let end = timestamp();
        *sample = end.wrapping_sub(start);
        wrong += usize::from(answer != value);
    }
    if wrong != 0 {
        log!("bench {}: FAILED, {} of {} round trips answered wrongly", name, wrong, WARMUP + SAMPLES);
        return;
    }
    cycles.sort_unstable();
    log!(
        "bench {}: median {} cycles, p10 {}, p90 {}, n={}",
        name,
        cycles[SAMPLES / 2],
        cycles[SAMPLES / 10],
        cycles[SAMPLES * 9 / 10],
        SAMPLES
    );
}

/// The TSC, fenced so that the code being timed can neither start before
/// the first reading nor still be running at the second (`lfence` waits for
/// every earlier instruction to finish, and later ones for it).
#[inline(always)]
fn timestamp() -> u64 {
    let low: u32;
    let high: u32;
    // SAFETY: lfence and rdtsc only write eax and edx; seL4 leaves rdtsc
    // enabled for user threads (CR4.TSD clear).
    unsafe {
        core::arch::asm!(
            "lfence",
            "rdtsc",
            "lfence",
            out("eax") low,
            out("edx") high,
            options(nostack, preserves_flags),
        );
    }
    (u64::from(high) << 32) | u64::from(low)
}
