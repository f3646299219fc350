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
