//! Time for the supervisor's restart policy: the TSC, converted with the
//! frequency the kernel measured at boot (boot info `archInfo`).

use core::sync::atomic::{AtomicU64, Ordering};

static TSC_MHZ: AtomicU64 = AtomicU64::new(0);

/// Records the TSC frequency (MHz) from the boot info.
pub fn init(tsc_mhz: u64) {
    TSC_MHZ.store(tsc_mhz.max(1), Ordering::Relaxed);
}

/// The time-stamp counter.
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC only reads the counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Milliseconds since boot (TSC based).
pub fn now_ms() -> u64 {
    let mhz = TSC_MHZ.load(Ordering::Relaxed).max(1);
    rdtsc() / (mhz * 1000)
}
