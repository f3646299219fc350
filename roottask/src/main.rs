//! The Iolite OS root task: loader and supervisor.
//!
//! seL4 hands the root task every capability in the system. It reports what
//! it received (untyped memory and device regions), proves the seL4
//! bindings with a self-test (a second thread built from untyped memory,
//! exchanging IPC with it), then builds every component of the system spec
//! it carries (see `loader`) and stays on as their supervisor (see
//! `supervisor`).
#![no_std]
#![no_main]

extern crate alloc;

mod bootinfo;
mod clock;
mod discovery;
#[cfg(fault_injection)]
mod inject;
mod loader;
mod objects;
mod selftest;
mod supervisor;
mod vspace;

/// The spec and component ELFs, embedded by build.rs.
mod system_image {
    include!(concat!(env!("OUT_DIR"), "/system_image.rs"));
}

use component_runtime::{error, log, root_task_entry};

root_task_entry!("roottask", main, 64 * 1024);
component_runtime::global_heap!(1024 * 1024);

/// The kernel configuration this image was built for, shown in the banner.
const KERNEL_VARIANT: &str = if cfg!(feature = "debug") { "debug" } else { "release" };

fn main(bootinfo: *const sel4::BootInfo) -> ! {
    init_heap();
    // SAFETY: seL4 passes the address of the boot info frame, mapped
    // read-only in our address space for as long as we run.
    let bootinfo = unsafe { &*bootinfo };
    // SAFETY: the kernel maps our IPC buffer at this address.
    unsafe { sel4::set_ipc_buffer(bootinfo.ipc_buffer) };
    #[cfg(feature = "debug")]
    component_runtime::console::enable_debug_put_char(true);
    #[cfg(not(feature = "debug"))]
    component_runtime::console::init_io_port(sel4::CAP_IO_PORT);

    {
        use core::fmt::Write;
        // Leading newline: a release kernel prints nothing, so the banner
        // would otherwise continue the firmware's last line.
        let _ = writeln!(
            component_runtime::console::Console,
            "\nIolite OS root task (seL4 5.0.0, {KERNEL_VARIANT} kernel, x86_64 pc99)"
        );
    }
    // Before anything is loaded, so a machine that cannot run the system
    // says why instead of failing somewhere later.
    if !bootinfo::check_cpu() {
        let _ = sel4::tcb_suspend(sel4::CAP_INIT_THREAD_TCB);
        component_runtime::abort()
    }
    bootinfo::report(bootinfo);
    // The PIT is ours until the ticker starts: check the kernel's TSC rate
    // against it (component_runtime::time::pit).
    let pit_mhz = component_runtime::time::pit::measure(
        |port, v| sel4::x86_io_port_out8(sel4::CAP_IO_PORT, port, v).ok(),
        |port| sel4::x86_io_port_in8(sel4::CAP_IO_PORT, port).ok(),
        bootinfo.arch_info(),
    );
    component_runtime::time::init_root_task(bootinfo.arch_info(), pit_mhz);

    let mut objects = objects::ObjectAllocator::new(bootinfo);
    match selftest::thread_and_ipc(&mut objects) {
        Ok(()) => log!("all checks passed"),
        Err(failure) => {
            error!("self-test failed: {failure}");
            component_runtime::abort();
        }
    }

    if system_image::SPEC.is_empty() {
        log!("no system spec in this image: nothing to load");
        let _ = sel4::tcb_suspend(sel4::CAP_INIT_THREAD_TCB);
        component_runtime::abort()
    }
    let spec = match system_spec::SystemSpec::decode(system_image::SPEC) {
        Ok(spec) => spec,
        Err(e) => {
            error!("cannot load the system: {e}");
            component_runtime::abort()
        }
    };
    // Before anything runs: the root task has configuration space to itself.
    let found = discovery::Discovery::run(&spec);
    log!("loading {} components, {} objects", spec.components.len(), spec.objects.len());
    let mut system = match loader::System::boot(&mut objects, spec, system_image::ELVES, cfg!(feature = "debug"), found)
    {
        Ok(system) => system,
        Err(e) => {
            error!("cannot load the system: {e}");
            component_runtime::abort()
        }
    };
    let started = system.instances.iter().filter(|i| i.tcb.is_some()).count();
    log!("system started: {started} of {} components running; supervising faults", system.instances.len());
    let clock = clock::Clock::start(&mut objects);
    log!("free untyped memory after loading: {} KiB", objects.free_bytes() / 1024);
    loader::events_page().free_untyped_bytes.store(objects.free_bytes(), core::sync::atomic::Ordering::Release);
    supervisor::run(&mut system, clock, objects)
}
