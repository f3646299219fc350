//! The Iolite OS root task.
//!
//! seL4 hands the root task every capability in the system. This first
//! version reports what it received (untyped memory and device regions) and
//! proves our seL4 bindings end to end: it retypes untyped memory into a
//! thread, an endpoint and an IPC-buffer frame, maps the frame, starts the
//! thread in its own address space and exchanges IPC messages with it, one
//! short (registers only) and one long (through both IPC buffers).
//! The component-framework issue turns it into the system loader.
#![no_std]
#![no_main]

mod alloc;
mod bootinfo;
mod selftest;
mod vspace;

use component_runtime::{error, log, root_task_entry};

root_task_entry!("roottask", main, 64 * 1024);

/// The kernel configuration this image was built for, shown in the banner.
const KERNEL_VARIANT: &str = if cfg!(feature = "debug") { "debug" } else { "release" };

fn main(bootinfo: *const sel4::BootInfo) -> ! {
    // SAFETY: seL4 passes the address of the boot info frame, mapped
    // read-only in our address space for as long as we run.
    let bootinfo = unsafe { &*bootinfo };
    // SAFETY: the kernel maps our IPC buffer at this address.
    unsafe { sel4::set_ipc_buffer(bootinfo.ipc_buffer) };
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
    bootinfo::report(bootinfo);

    let mut objects = alloc::ObjectAllocator::new(bootinfo);
    match selftest::thread_and_ipc(&mut objects) {
        Ok(()) => log!("all checks passed"),
        Err(failure) => {
            error!("self-test failed: {failure}");
            component_runtime::abort();
        }
    }
    // Nothing else to do yet: stop this thread; the worker stays blocked.
    let _ = sel4::tcb_suspend(sel4::CAP_INIT_THREAD_TCB);
    component_runtime::abort()
}
