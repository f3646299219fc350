//! ticker: time for the components that need it (camkes/iolite.camkes).
//!
//! * Programs PIT channel 0 (ports 0x40..0x43) as a rate generator at
//!   `hz` (default 20 Hz; divisor 1193182 / hz) and counts its interrupts
//!   (ISA IRQ 0, routed to IOAPIC pin 2 by QEMU's MADT, edge, active high).
//! * Reads the boot time once from the CMOS RTC (ports 0x70..0x71, UTC).
//! * Publishes both in the `clock` page, read-only for everyone else
//!   (layout: `component_runtime::time::ClockPage`): word 0 ticks, word 1
//!   boot time (Unix seconds), word 2 nanoseconds per tick, word 3 the TSC
//!   at the last tick.
//! * Restartable: a new incarnation keeps the boot time, continues the
//!   tick count where its predecessor left it plus the ticks the downtime
//!   took (from the TSC), so time never goes back, and unmasks the PIT's
//!   interrupt in case the predecessor died before acknowledging one.
//! * Wakes httpd every `httpd_every` ticks (request/CGI timeouts) and
//!   netstack every `net_every` ticks (TCP timers while the network is
//!   idle), through `to_httpd` and `to_net`; 0 means never (an assembly
//!   without httpd, examples/netecho/netecho.camkes, leaves `to_httpd`
//!   unconnected and sets `httpd_every = 0`). `to_drv` every `drv_every`
//!   ticks (default 0: never) drives netdrv's polling fallback, `to_cgi`
//!   every `cgi_every` ticks (default 0: never) the cgi's programs that
//!   wait for their time (a streamed output's next part).
//! * The `clock` page is optional: an assembly where nobody reads the time
//!   may leave it unconnected (`maybe dataport`); the loader's start record
//!   tells whether it is mapped.
//!
//! Lines it prints: `[ticker] PIT at N Hz (divisor D), boot time T (YYYY-MM-DD hh:mm:ss UTC)`.
#![no_std]
#![no_main]

use component_runtime::time::ClockPage;
use component_runtime::{error, log};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/ticker.rs"));

const PIT_HZ: u64 = 1_193_182;

fn cmos(reg: u8) -> u8 {
    // Bit 7 of the index keeps NMIs disabled as they are.
    let _ = glue::rtc::out8(0x70, 0x80 | reg);
    glue::rtc::in8(0x71).unwrap_or(0)
}

/// Seconds since the epoch of a UTC date (days from civil, H. Hinnant).
fn unix(y: i64, m: i64, d: i64, hh: i64, mm: i64, ss: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + hh * 3600 + mm * 60 + ss
}

fn read_rtc() -> (u64, [i64; 6]) {
    // Wait while an update is in progress, then read twice until stable.
    let read = || {
        for _ in 0..100_000 {
            if cmos(0x0A) & 0x80 == 0 {
                break;
            }
        }
        [cmos(0x00), cmos(0x02), cmos(0x04), cmos(0x07), cmos(0x08), cmos(0x09), cmos(0x32)]
    };
    let mut r = read();
    for _ in 0..5 {
        let again = read();
        if again == r {
            break;
        }
        r = again;
    }
    let b = cmos(0x0B);
    let bcd = |v: u8| if b & 0x04 == 0 { i64::from((v >> 4) * 10 + (v & 0x0f)) } else { i64::from(v) };
    let pm = b & 0x02 == 0 && r[2] & 0x80 != 0;
    let mut hour = bcd(r[2] & 0x7f);
    if b & 0x02 == 0 {
        hour %= 12;
        if pm {
            hour += 12;
        }
    }
    let century = if r[6] != 0 { bcd(r[6]) } else { 20 };
    let year = century * 100 + bcd(r[5]);
    let f = [year, bcd(r[4]), bcd(r[3]), hour, bcd(r[1]), bcd(r[0])];
    let t = unix(f[0], f[1], f[2], f[3], f[4], f[5]);
    (t.max(0) as u64, f)
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    // Writing an unmapped page would fault: publish only when the assembly
    // connects `clock` (the loader lists every mapped dataport).
    let clock_mapped = start.dataports().iter().any(|d| d.vaddr == glue::clock::VADDR as u64);
    // SAFETY: our clock page, mapped read-write (checked) for as long as we
    // run; only we write it.
    let clock = clock_mapped.then(|| unsafe { ClockPage::at(glue::clock::VADDR) });
    let hz = (glue::attributes::HZ as u64).clamp(19, 1000);
    let divisor = (PIT_HZ / hz).clamp(1, 65535);
    let ns_per_tick = divisor * 1_000_000_000 / PIT_HZ;
    // A restarted ticker keeps the boot time and continues the tick count
    // (time never goes back for the clock's readers), skipping the ticks
    // its downtime took; it reads the RTC only for its line.
    let (boot, f) = read_rtc();
    let mut ticks = 0u64;
    if let Some(clock) = clock {
        if start.restarts == 0 {
            clock.start(boot, ns_per_tick);
        } else {
            ticks = clock.resume(component_runtime::time::rdtsc(), component_runtime::time::tsc_per_ms());
        }
    }
    // Channel 0, lobyte/hibyte, mode 2 (rate generator), binary.
    let program = glue::pit::out8(0x43, 0x34)
        .and_then(|()| glue::pit::out8(0x40, divisor as u8))
        .and_then(|()| glue::pit::out8(0x40, (divisor >> 8) as u8));
    if let Err(e) = program {
        error!("PIT: {e:?}");
        component_runtime::exit(1)
    }
    log!(
        "PIT at {} Hz (divisor {divisor}), boot time {boot} ({:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC)",
        PIT_HZ / divisor,
        f[0],
        f[1],
        f[2],
        f[3],
        f[4],
        f[5]
    );
    // 0: that consumer is not woken at all (not in this assembly).
    let httpd_every = glue::attributes::HTTPD_EVERY.max(0) as u64;
    let net_every = glue::attributes::NET_EVERY.max(0) as u64;
    let drv_every = glue::attributes::DRV_EVERY.max(0) as u64;
    let cgi_every = glue::attributes::CGI_EVERY.max(0) as u64;
    // A predecessor that died between an interrupt and its acknowledgement
    // left the line masked: unmask it (harmless when it is not).
    let _ = glue::irq::acknowledge();
    loop {
        glue::irq::wait();
        let _ = glue::irq::acknowledge();
        ticks += 1;
        if let Some(clock) = clock {
            clock.set_ticks_at(ticks, component_runtime::time::rdtsc());
        }
        if httpd_every != 0 && ticks.is_multiple_of(httpd_every) {
            glue::to_httpd::emit();
        }
        if net_every != 0 && ticks.is_multiple_of(net_every) {
            glue::to_net::emit();
        }
        if drv_every != 0 && ticks.is_multiple_of(drv_every) {
            glue::to_drv::emit();
        }
        if cgi_every != 0 && ticks.is_multiple_of(cgi_every) {
            glue::to_cgi::emit();
        }
    }
}
