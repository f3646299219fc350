//! Time for every protection domain: the time-stamp counter, the rate that
//! converts it into milliseconds, and the layout of the ticker's clock page.
//!
//! **The TSC rate** is measured once, by the kernel: seL4's `tsc_init` reads
//! it from the platform-info MSR on the Intel models it knows and otherwise
//! counts TSC cycles over a wrap-around of the PIT (a known 1.193182 MHz
//! clock), and puts the result in the boot info (`archInfo`, MHz). The root
//! task takes it from there ([`init_root_task`]) and the loader passes it to
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
//! Under QEMU's TCG the guest's TSC is the host's, and the kernel measures
//! it against QEMU's PIT, which runs on the host's clock: the rate is the
//! host's TSC rate, as it should be.
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

/// The root task: the kernel's calibration from the boot info. Logs the
/// fallback if it is taken.
pub fn init_root_task(kernel_mhz: u64) {
    if let Rate::Fallback(v) = set_tsc_mhz(kernel_mhz) {
        crate::warn!("the kernel's TSC rate ({v} MHz) is not plausible: assuming {FALLBACK_TSC_MHZ} MHz");
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
///
/// `now_ms = ticks * ns_per_tick / 1e6`. Before the ticker has run, every
/// word is 0: time stands at 0.
#[repr(C)]
pub struct ClockPage {
    ticks: AtomicU64,
    boot_unix_secs: AtomicU64,
    ns_per_tick: AtomicU64,
}

impl ClockPage {
    /// A page of zeros (host tests; a fresh dataport is zeroed by the loader).
    pub const fn new() -> ClockPage {
        ClockPage { ticks: AtomicU64::new(0), boot_unix_secs: AtomicU64::new(0), ns_per_tick: AtomicU64::new(0) }
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
}

impl Default for ClockPage {
    fn default() -> Self {
        ClockPage::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_page_layout_and_arithmetic() {
        assert_eq!(core::mem::size_of::<ClockPage>(), 24);
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
