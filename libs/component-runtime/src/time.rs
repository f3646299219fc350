//! Time for every protection domain: the time-stamp counter, the rate that
//! converts it into milliseconds, and the layout of the ticker's clock page.
//!
//! **The TSC rate** is measured once, by the kernel: seL4's `tsc_init` reads
//! it from the platform-info MSR on the Intel models it knows and otherwise
//! counts TSC cycles over a wrap-around of the PIT (a known 1.193182 MHz
//! clock), and puts the result in the boot info (`archInfo`, MHz). The root
//! task checks it against its own measurement over 100 ms of the PIT
//! ([`pit`]: the kernel's single window is easily disturbed under
//! emulation) and keeps it when the two agree ([`init_root_task`]); the
//! loader passes the rate in use to
//! every component in its start record (`StartInfo::tsc_mhz`), which
//! [`component_entry!`](crate::component_entry) hands to [`init_component`].
//! No component needs a connection or a capability for it, and none
//! measures anything itself (a component cannot reach the PIT).
//!
//! **The fallback** is explicit: a rate outside [`PLAUSIBLE_MHZ`] (0: the
//! loader had none) is not used; [`FALLBACK_TSC_MHZ`] is, and the component
//! says so in its log once, at start (`warning: no TSC rate ...`). Only
//! timeouts and TCP timers depend on it, never correctness of data.
//!
//! Under QEMU's TCG the guest's TSC is the host's, and QEMU's PIT runs on
//! the host's clock: measured against it, the rate is the host's TSC rate,
//! as it should be.
//!
//! **The clock page** ([`ClockPage`]) is the ticker's: PIT ticks and the
//! boot time from the RTC, for wall-clock time (HTTP dates) and for
//! components that want time that advances with the PIT rather than the
//! TSC.

use core::sync::atomic::{AtomicU64, Ordering};

/// The rate assumed when none was measured (MHz).
pub const FALLBACK_TSC_MHZ: u64 = 2600;
/// Rates taken as measured (MHz); anything else is a broken measurement.
pub const PLAUSIBLE_MHZ: core::ops::RangeInclusive<u64> = 50..=20_000;

/// The rate in use (MHz); 0 until set.
static TSC_MHZ: AtomicU64 = AtomicU64::new(0);
/// The measured rate (MHz); 0 if there was none.
static MEASURED_MHZ: AtomicU64 = AtomicU64::new(0);

/// The time-stamp counter, unordered: for time of day and timers, where a
/// few cycles of reordering do not matter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC only reads the counter; seL4 leaves it enabled for user
    // threads (CR4.TSD clear), and so do host systems.
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// The time-stamp counter, fenced so that code being timed can neither
/// start before this reading nor still be running at it (`lfence` waits
/// for every earlier instruction, and later ones wait for it): for
/// measuring a stretch of code.
#[inline(always)]
pub fn rdtsc_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let low: u32;
        let high: u32;
        // SAFETY: lfence and rdtsc only write eax and edx; RDTSC is
        // enabled for user threads (see `rdtsc`).
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
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Where a rate came from, for the log line of a fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// A measured rate, in use.
    Measured(u64),
    /// No usable measurement (the value given): [`FALLBACK_TSC_MHZ`] is in
    /// use.
    Fallback(u64),
}

/// Sets the rate from a measurement (`mhz`), or the fallback if it is not
/// plausible; returns which.
pub fn set_tsc_mhz(mhz: u64) -> Rate {
    if PLAUSIBLE_MHZ.contains(&mhz) {
        MEASURED_MHZ.store(mhz, Ordering::Relaxed);
        TSC_MHZ.store(mhz, Ordering::Relaxed);
        Rate::Measured(mhz)
    } else {
        MEASURED_MHZ.store(0, Ordering::Relaxed);
        TSC_MHZ.store(FALLBACK_TSC_MHZ, Ordering::Relaxed);
        Rate::Fallback(mhz)
    }
}

/// The root task: the kernel's calibration from the boot info, checked
/// against the root task's own measurement over several PIT periods
/// (`pit_mhz`, [`pit::measure`]; `None` if it could not measure). Logs
/// which rate it takes and why.
pub fn init_root_task(kernel_mhz: u64, pit_mhz: Option<u64>) {
    let chosen = pit::choose(kernel_mhz, pit_mhz);
    match (pit_mhz, chosen == kernel_mhz) {
        (Some(p), true) => crate::log!("TSC at {kernel_mhz} MHz (the kernel's; {p} MHz over 100 ms of the PIT)"),
        (Some(p), false) => crate::warn!(
            "the kernel measured the TSC at {kernel_mhz} MHz, 100 ms of the PIT say {p} MHz: using {p} MHz"
        ),
        (None, _) => crate::warn!("no PIT measurement of the TSC: taking the kernel's {kernel_mhz} MHz"),
    }
    if let Rate::Fallback(v) = set_tsc_mhz(chosen) {
        crate::warn!("the TSC rate ({v} MHz) is not plausible: assuming {FALLBACK_TSC_MHZ} MHz");
    }
}

/// Measuring the TSC against the PIT, in the root task before the ticker
/// takes the PIT over.
///
/// The kernel measures over one PIT wrap-around of 50 ms, from where it
/// sees one wrap to where it sees the next. Under QEMU's TCG on a loaded
/// host the guest is descheduled for milliseconds at a time, often, so
/// either end can be seen late: boots of one image gave from 1071 to 2616
/// MHz for a 2445 MHz TSC, and every timeout and TCP timer would run that
/// far off. Here every reading of the PIT's count is bracketed by two TSC
/// readings, and only readings whose bracket is tight serve as the ends of
/// the window, so a deschedule costs nothing unless it falls inside the
/// few microseconds of a bracket. The PIT ticks in between are summed
/// from successive counts, which needs a reading at least once per PIT
/// period (55 ms): a longer gap could hide a whole period, and the window
/// starts again after it. On hardware the kernel's figure (from the
/// platform MSR on the Intel models it knows) and ours agree, and the
/// kernel's is kept.
pub mod pit {
    /// The PIT's input clock (Hz).
    pub const PIT_HZ: u64 = 1_193_182;
    /// Channel 0 counts down from this in rate-generator mode (55 ms).
    pub const DIVISOR: u16 = 0xffff;
    /// The window measured, in PIT ticks (100 ms).
    pub const WINDOW_TICKS: u64 = PIT_HZ / 10;
    /// A reading whose two TSC readings are further apart than this (µs)
    /// does not end a window.
    pub const TIGHT_US: u64 = 50;
    /// Readings further apart than this (µs) may hide a whole PIT period:
    /// the window starts again.
    pub const MAX_GAP_US: u64 = 25_000;
    /// How far the kernel's figure may be from ours and still be kept
    /// (per mille).
    pub const AGREE_PER_MILLE: u64 = 20;

    /// PIT ticks from count `earlier` to count `later` of a counter that
    /// counts `divisor`, …, 1, `divisor`, … (less than one period apart).
    pub fn ticks_between(earlier: u16, later: u16, divisor: u16) -> u64 {
        if later <= earlier {
            u64::from(earlier - later)
        } else {
            u64::from(earlier) + u64::from(divisor) - u64::from(later)
        }
    }

    /// Measures the TSC rate (MHz) over [`WINDOW_TICKS`] PIT ticks.
    /// `count` reads channel 0's count (`None`: the port failed), `tsc`
    /// the TSC; `approx_mhz` (the kernel's figure, off by up to 2x) only
    /// converts [`TIGHT_US`] and [`MAX_GAP_US`] into cycles. `None` after
    /// `max_reads` readings without a window (a PIT that does not count,
    /// or a guest never left alone for 100 ms).
    pub fn measure_with(
        mut count: impl FnMut() -> Option<u16>,
        mut tsc: impl FnMut() -> u64,
        approx_mhz: u64,
        max_reads: u32,
    ) -> Option<u64> {
        let approx = if super::PLAUSIBLE_MHZ.contains(&approx_mhz) { approx_mhz } else { super::FALLBACK_TSC_MHZ };
        let tight = approx * TIGHT_US;
        // Half the gap at the given rate: a rate 2x too low still keeps
        // gaps under a period.
        let max_gap = approx * MAX_GAP_US / 2;
        let mut prev: Option<(u16, u64)> = None;
        let mut start: Option<(u64, u64)> = None;
        let mut ticks = 0u64;
        for _ in 0..max_reads {
            let t0 = tsc();
            let c = count()?;
            let t1 = tsc();
            // Both counts were read inside their brackets: at most from
            // the previous t0 to this t1 apart.
            if let Some((pc, pt0)) = prev {
                if t1.wrapping_sub(pt0) > max_gap {
                    start = None;
                    ticks = 0;
                } else {
                    ticks += ticks_between(pc, c, DIVISOR);
                }
            }
            prev = Some((c, t0));
            if t1.wrapping_sub(t0) > tight {
                continue;
            }
            let mid = t0 + t1.wrapping_sub(t0) / 2;
            match start {
                None => start = Some((mid, ticks)),
                Some((m0, k0)) if ticks - k0 >= WINDOW_TICKS => {
                    let cycles = u128::from(mid.wrapping_sub(m0));
                    let hz = cycles * u128::from(PIT_HZ) / u128::from(ticks - k0);
                    return Some((hz / 1_000_000) as u64);
                }
                Some(_) => {}
            }
        }
        None
    }

    /// The rate to use: the kernel's if ours agrees within
    /// [`AGREE_PER_MILLE`], else ours; the kernel's if we have none.
    pub fn choose(kernel_mhz: u64, pit_mhz: Option<u64>) -> u64 {
        match pit_mhz {
            Some(p) if p > 0 && kernel_mhz.abs_diff(p) * 1000 > p * AGREE_PER_MILLE => p,
            _ => kernel_mhz,
        }
    }

    /// Programs channel 0 as a rate generator of [`DIVISOR`] and measures
    /// through `out8`/`in8` (the PIT's ports), [`measure_with`] the TSC.
    /// The caller owns the PIT until the ticker programs it.
    pub fn measure(
        mut out8: impl FnMut(u16, u8) -> Option<()>,
        mut in8: impl FnMut(u16) -> Option<u8>,
        kernel_mhz: u64,
    ) -> Option<u64> {
        const CH0: u16 = 0x40;
        const MODE: u16 = 0x43;
        // Channel 0, low then high byte, mode 2 (rate generator), binary.
        out8(MODE, 0x34)?;
        out8(CH0, DIVISOR as u8)?;
        out8(CH0, (DIVISOR >> 8) as u8)?;
        let count = || {
            // Latch channel 0, then read the latched count.
            out8(MODE, 0x00)?;
            let lo = in8(CH0)?;
            let hi = in8(CH0)?;
            Some(u16::from_le_bytes([lo, hi]))
        };
        // A reading takes at least a few hundred ns: 100 ms is well under
        // 10M of them, and a guest starved for longer gets no figure.
        super::pit::measure_with(count, super::rdtsc_ordered, kernel_mhz, 10_000_000)
    }
}

/// A component: the rate in its start record (the entry macro calls this).
/// Logs the fallback if it is taken.
pub fn init_component(start: &crate::start::StartInfo) {
    if let Rate::Fallback(v) = set_tsc_mhz(start.tsc_mhz) {
        crate::warn!("no TSC rate from the loader ({v} MHz): assuming {FALLBACK_TSC_MHZ} MHz, timers may be off");
    }
}

/// The measured rate (MHz), if there was one (what the loader passes on).
pub fn measured_tsc_mhz() -> Option<u64> {
    Some(MEASURED_MHZ.load(Ordering::Relaxed)).filter(|&m| m != 0)
}

/// The rate in use (MHz): the measured one, or the fallback (also before
/// any was set).
pub fn tsc_mhz() -> u64 {
    match TSC_MHZ.load(Ordering::Relaxed) {
        0 => FALLBACK_TSC_MHZ,
        m => m,
    }
}

/// TSC cycles per millisecond.
pub fn tsc_per_ms() -> u64 {
    tsc_mhz() * 1000
}

/// Milliseconds since the TSC started counting (boot), from the TSC.
pub fn now_ms() -> u64 {
    rdtsc() / tsc_per_ms()
}

/// The ticker's clock page (`clock` dataport: read-write in the ticker,
/// read-only for everyone else). Three little-endian words, each written
/// with one atomic store:
///
/// | offset | word |
/// |---|---|
/// | 0 | PIT ticks since the ticker started (release store, after the others) |
/// | 8 | boot time, Unix seconds (from the CMOS RTC, UTC) |
/// | 16 | nanoseconds per tick |
/// | 24 | the TSC at the last tick (a restarted ticker continues from it) |
///
/// `now_ms = ticks * ns_per_tick / 1e6`. Before the ticker has run, every
/// word is 0: time stands at 0.
#[repr(C)]
pub struct ClockPage {
    ticks: AtomicU64,
    boot_unix_secs: AtomicU64,
    ns_per_tick: AtomicU64,
    tsc_at_tick: AtomicU64,
}

impl ClockPage {
    /// A page of zeros (host tests; a fresh dataport is zeroed by the loader).
    pub const fn new() -> ClockPage {
        ClockPage {
            ticks: AtomicU64::new(0),
            boot_unix_secs: AtomicU64::new(0),
            ns_per_tick: AtomicU64::new(0),
            tsc_at_tick: AtomicU64::new(0),
        }
    }

    /// The page at `vaddr`.
    ///
    /// # Safety
    /// `vaddr` must be a mapped clock dataport (at least 24 bytes, 8-byte
    /// aligned) for the rest of the program. Read-only is enough for the
    /// reading methods; the writing ones fault there.
    pub unsafe fn at(vaddr: usize) -> &'static ClockPage {
        // SAFETY: per the contract; the fields are atomics, so the writer
        // in another component never races a plain access.
        unsafe { &*(vaddr as *const ClockPage) }
    }

    /// PIT ticks so far.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Acquire)
    }

    /// Milliseconds since the ticker started.
    pub fn now_ms(&self) -> u64 {
        let ticks = self.ticks();
        let ns = self.ns_per_tick.load(Ordering::Relaxed).max(1);
        (u128::from(ticks) * u128::from(ns) / 1_000_000) as u64
    }

    /// Wall-clock time, Unix seconds: the boot time plus the ticks since.
    pub fn unix_secs(&self) -> u64 {
        let ms = self.now_ms(); // acquires the words written before the ticks
        self.boot_unix_secs.load(Ordering::Relaxed) + ms / 1000
    }

    /// The ticker, once at start: the boot time and the tick length; time
    /// restarts at 0.
    pub fn start(&self, boot_unix_secs: u64, ns_per_tick: u64) {
        self.boot_unix_secs.store(boot_unix_secs, Ordering::Relaxed);
        self.ns_per_tick.store(ns_per_tick, Ordering::Relaxed);
        self.ticks.store(0, Ordering::Release);
    }

    /// The ticker, on every tick.
    pub fn set_ticks(&self, ticks: u64) {
        self.ticks.store(ticks, Ordering::Release);
    }

    /// The ticker, on every tick: also remembers the TSC then, for
    /// [`resume`](Self::resume).
    pub fn set_ticks_at(&self, ticks: u64, tsc: u64) {
        self.tsc_at_tick.store(tsc, Ordering::Relaxed);
        self.ticks.store(ticks, Ordering::Release);
    }

    /// A restarted ticker: the tick count to continue from, the last one
    /// published plus the ticks its predecessor's death and the restart
    /// took (measured on the TSC, `tsc_per_ms` cycles per ms), so time
    /// never goes back and does not lag by the downtime. Boot time and
    /// tick length stay as they are.
    pub fn resume(&self, tsc_now: u64, tsc_per_ms: u64) -> u64 {
        let ticks = self.ticks();
        let last = self.tsc_at_tick.load(Ordering::Relaxed);
        let ns = self.ns_per_tick.load(Ordering::Relaxed);
        if last == 0 || ns == 0 || tsc_per_ms == 0 || tsc_now < last {
            return ticks;
        }
        let elapsed_ns = u128::from(tsc_now - last) * 1_000_000 / u128::from(tsc_per_ms);
        ticks + (elapsed_ns / u128::from(ns)) as u64
    }
}

impl Default for ClockPage {
    fn default() -> Self {
        ClockPage::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_restarted_ticker_continues_time_and_skips_its_downtime() {
        let page = ClockPage::new();
        page.start(1_700_000_000, 50_000_000); // 20 Hz
        page.set_ticks_at(100, 1_000_000); // 5 s; TSC at 1e6
                                           // 1 GHz TSC: 1e6 cycles per ms; restarted 230 ms later.
        assert_eq!(page.resume(1_000_000 + 230 * 1_000_000, 1_000_000), 104);
        // No TSC recorded (an old ticker), or a TSC that went back: keep.
        let old = ClockPage::new();
        old.start(0, 50_000_000);
        old.set_ticks(7);
        assert_eq!(old.resume(5, 1_000_000), 7);
        assert_eq!(page.resume(10, 1_000_000), 100);
    }

    use super::*;

    #[test]
    fn clock_page_layout_and_arithmetic() {
        assert_eq!(core::mem::size_of::<ClockPage>(), 32);
        let page = ClockPage::new();
        assert_eq!((page.now_ms(), page.unix_secs()), (0, 0), "before the ticker ran");
        // 20 Hz: divisor 59659 of 1193182 Hz is 49_999_916 ns per tick.
        page.start(1_700_000_000, 49_999_916);
        page.set_ticks(21);
        assert_eq!(page.now_ms(), 1049);
        assert_eq!(page.unix_secs(), 1_700_000_001);
        // The words sit where other components read them.
        let words = &page as *const ClockPage as *const u64;
        // SAFETY: the page is three u64 words (repr(C), checked above).
        let raw = unsafe { [*words, *words.add(1), *words.add(2)] };
        assert_eq!(raw, [21, 1_700_000_000, 49_999_916]);
        // Years of ticks at 1 kHz do not overflow.
        page.start(0, 1_000_000);
        page.set_ticks(100 * 365 * 86_400 * 1000);
        assert_eq!(page.now_ms(), 100 * 365 * 86_400 * 1000);
    }

    /// A PIT at 1.193182 MHz beside a fake TSC of `tsc_mhz` that advances
    /// `step` cycles per port access and, at accesses where `stall(n)` says
    /// so, that many more (the guest descheduled). Returns the measurement.
    fn fake_pit(tsc_mhz: u64, step: u64, stall: impl Fn(u64) -> u64) -> Option<u64> {
        use core::cell::Cell;
        let t = Cell::new(0u64);
        let n = Cell::new(0u64);
        let tick = || {
            n.set(n.get() + 1);
            t.set(t.get() + step + stall(n.get()));
        };
        let count = || {
            tick();
            let pit = u128::from(t.get()) * u128::from(pit::PIT_HZ) / (u128::from(tsc_mhz) * 1_000_000);
            let d = u128::from(pit::DIVISOR);
            tick();
            Some((d - pit % d) as u16)
        };
        let tsc = || {
            tick();
            t.get()
        };
        pit::measure_with(count, tsc, 2600, 10_000_000)
    }

    #[test]
    fn pit_ticks_are_counted_across_the_reload() {
        assert_eq!(pit::ticks_between(100, 40, 0xffff), 60);
        assert_eq!(pit::ticks_between(5, 0xfff0, 0xffff), 5 + 0xffff - 0xfff0);
        assert_eq!(pit::ticks_between(7, 7, 0xffff), 0);
    }

    #[test]
    fn the_pit_gives_the_tsc_rate_while_the_guest_is_descheduled_often() {
        let close = |got: Option<u64>, want: u64| got.is_some_and(|g| g.abs_diff(want) * 1000 <= want * 2);
        // Quiet: 2445 MHz, an access every 2 µs.
        assert!(close(fake_pit(2445, 4890, |_| 0), 2445), "{:?}", fake_pit(2445, 4890, |_| 0));
        // Descheduled for 4 ms every 1000 accesses (a loaded host), the
        // first time inside the first reading's bracket, after the count
        // was read: that reading must not start the window.
        let stall = |n: u64| if n == 3 || n.is_multiple_of(1000) { 4 * 2_445_000 } else { 0 };
        assert!(close(fake_pit(2445, 4890, stall), 2445), "{:?}", fake_pit(2445, 4890, stall));
        // One stall longer than a PIT period (60 ms) inside the first
        // window: a whole period passes unseen, the window starts again.
        let long = |n: u64| if n == 20_000 { 60 * 800_000 } else { 0 };
        assert!(close(fake_pit(800, 1600, long), 800), "{:?}", fake_pit(800, 1600, long));
    }

    #[test]
    fn a_pit_that_does_not_count_is_no_measurement() {
        let mut t = 0u64;
        let mut tsc = || {
            t += 1000;
            t
        };
        assert_eq!(pit::measure_with(|| Some(42), &mut tsc, 2445, 100_000), None);
        assert_eq!(pit::measure_with(|| None, &mut tsc, 2445, 100_000), None);
    }

    #[test]
    fn the_kernels_rate_is_kept_when_the_pit_agrees() {
        assert_eq!(pit::choose(2496, Some(2500)), 2496);
        assert_eq!(pit::choose(1071, Some(2500)), 2500);
        assert_eq!(pit::choose(2616, Some(2500)), 2500);
        assert_eq!(pit::choose(2496, None), 2496);
        assert_eq!(pit::choose(2496, Some(0)), 2496);
    }

    #[test]
    fn rate_is_measured_or_an_explicit_fallback() {
        // One test: the rate is process-wide.
        assert_eq!(set_tsc_mhz(0), Rate::Fallback(0));
        assert_eq!((tsc_mhz(), measured_tsc_mhz()), (FALLBACK_TSC_MHZ, None));
        assert_eq!(set_tsc_mhz(1_000_000), Rate::Fallback(1_000_000), "1 THz is not a measurement");
        assert_eq!(set_tsc_mhz(3000), Rate::Measured(3000));
        assert_eq!((tsc_mhz(), tsc_per_ms(), measured_tsc_mhz()), (3000, 3_000_000, Some(3000)));
        let (a, b) = (rdtsc(), rdtsc_ordered());
        assert!(b >= a, "the TSC counts up");
    }
}
