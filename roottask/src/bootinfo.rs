//! Printing what the kernel handed over: memory and device regions.

use component_runtime::log;

/// Prints the untyped memory total, the empty slot range and every device
/// region (device untypeds merged where they are physically contiguous).
pub fn report(bootinfo: &sel4::BootInfo) {
    let mut ram_bytes: u64 = 0;
    let mut caps = 0usize;
    let mut device_regions = 0usize;
    for (_, untyped) in bootinfo.untypeds() {
        caps += 1;
        if untyped.is_device() {
            continue;
        }
        ram_bytes += 1u64 << untyped.size_bits;
    }
    for_each_device_region(bootinfo, |_, _| device_regions += 1);
    log!(
        "boot info: {} untyped caps, {} MiB of RAM in untyped memory, {} device regions",
        caps,
        ram_bytes >> 20,
        device_regions
    );
    // x86: the kernel's TSC calibration (archInfo), so that cycle counts
    // (benchmarks) can be turned into seconds; the root task and every
    // component convert the TSC with it (component_runtime::time).
    log!("boot info: TSC frequency {} MHz", bootinfo.arch_info());
    log!(
        "boot info: empty slots {:#x}..{:#x}, node {} of {}",
        bootinfo.empty.start,
        bootinfo.empty.end,
        bootinfo.node_id,
        bootinfo.num_nodes
    );
    for_each_device_region(bootinfo, |start, end| {
        log!("device region {:#x}-{:#x} ({} KiB)", start, end - 1, (end - start) >> 10);
    });
}

/// Calls `visit(start, end)` for each maximal run of physically contiguous
/// device untypeds (the kernel lists them in address order per region).
fn for_each_device_region(bootinfo: &sel4::BootInfo, mut visit: impl FnMut(u64, u64)) {
    let mut current: Option<(u64, u64)> = None;
    for (_, untyped) in bootinfo.untypeds() {
        if !untyped.is_device() {
            continue;
        }
        let start = untyped.paddr;
        let end = start + (1u64 << untyped.size_bits);
        current = match current {
            Some((s, e)) if e == start => Some((s, end)),
            Some((s, e)) => {
                visit(s, e);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        visit(s, e);
    }
}

/// Prints the CPU and checks it against what seL4 and the system need
/// (`component_runtime::cpu`); false when something required is missing.
pub fn check_cpu() -> bool {
    use component_runtime::{cpu, error};
    let report = cpu::check(cpu::cpuid);
    let (family, model, stepping) = report.signature;
    log!("cpu: {} \"{}\" family {family} model {model} stepping {stepping}", report.vendor(), report.brand());
    for f in report.missing() {
        error!("cpu: missing {}: {}", f.name, f.why);
    }
    if !report.runs() {
        error!("cpu: this CPU cannot run Iolite OS (README, \"Booting a real PC\"); stopping");
        return false;
    }
    let mut names = [""; cpu::REQUIRED.len()];
    for (name, f) in names.iter_mut().zip(cpu::REQUIRED.iter()) {
        *name = f.name;
    }
    log!("cpu: has everything seL4 and Iolite OS need: {}", Names(&names));
    for f in report.lacking() {
        log!("cpu: no {}: {}", f.name, f.why);
    }
    true
}

/// Space-separated names.
struct Names<'a>(&'a [&'a str]);

impl core::fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}
