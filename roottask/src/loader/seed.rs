//! The random seed each incarnation starts with (`StartInfo::seed`).

/// 64 random bits for a new incarnation: RDRAND where the CPU has it,
/// mixed with the TSC (which alone is only hard to predict, not random).
pub(super) fn random_seed() -> u64 {
    let tsc = component_runtime::time::rdtsc();
    let mut x = tsc.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if let Some(r) = rdrand() {
        x ^= r;
    }
    x ^ x >> 31
}

#[cfg(target_arch = "x86_64")]
fn rdrand() -> Option<u64> {
    // CPUID.1:ECX bit 30 says whether RDRAND exists.
    let leaf = core::arch::x86_64::__cpuid(1);
    if leaf.ecx & (1 << 30) == 0 {
        return None;
    }
    for _ in 0..10 {
        let (value, ok): (u64, u8);
        // SAFETY: RDRAND exists (checked above); it only writes the registers.
        unsafe {
            core::arch::asm!("rdrand {v}", "setc {ok}", v = out(reg) value, ok = out(reg_byte) ok, options(nomem, nostack));
        }
        if ok == 1 {
            return Some(value);
        }
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn rdrand() -> Option<u64> {
    None
}
