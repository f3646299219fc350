//! Entry points.
//!
//! seL4 starts the root task with no stack at all (only `rdi` holding the
//! boot info frame's address), so [`root_task_entry!`] points `rsp` at a
//! static stack first. Components started by our loader already have a stack
//! (with an unmapped guard page below it) and their start argument in `rdi`,
//! so [`component_entry!`] only aligns the stack and calls `main`.

/// Defines `_start` for the root task: switch to a static stack of
/// `$stack_size` bytes and call `$main(bootinfo: *const sel4::BootInfo) -> !`.
#[macro_export]
macro_rules! root_task_entry {
    ($name:expr, $main:path, $stack_size:expr) => {
        #[repr(C, align(16))]
        struct RootTaskStack([u8; $stack_size]);
        #[unsafe(no_mangle)]
        static mut IOLITE_ROOT_STACK: RootTaskStack = RootTaskStack([0; $stack_size]);

        #[unsafe(no_mangle)]
        extern "C" fn iolite_root_task_start(bootinfo: *const $crate::BootInfo) -> ! {
            $crate::set_component_name($name);
            $main(bootinfo)
        }

        core::arch::global_asm!(
            ".globl _start",
            "_start:",
            "lea rsp, [rip + IOLITE_ROOT_STACK + {size}]",
            "xor rbp, rbp",
            "call iolite_root_task_start",
            "ud2",
            size = const $stack_size,
        );
    };
}

/// Defines `_start` for a component started by the loader and calls
/// `$main(&'static StartInfo) -> !` on the stack the loader provided.
///
/// Before `main` it checks the start record whose address the loader passes
/// in `rdi`, takes the instance name from it for logs and panics, the TSC
/// rate for [`time`](crate::time), and registers the IPC buffer with the
/// bindings.
#[macro_export]
macro_rules! component_entry {
    ($main:path) => {
        #[unsafe(no_mangle)]
        extern "C" fn iolite_component_start(start: *const $crate::start::StartInfo) -> ! {
            // SAFETY: the loader maps the start page read-only before
            // starting us and never unmaps it while we run.
            let start: &'static $crate::start::StartInfo = unsafe { &*start };
            if start.magic != $crate::start::START_INFO_MAGIC {
                $crate::abort();
            }
            $crate::set_component_name(start.name().unwrap_or("?"));
            $crate::set_supervisor_slot(start.supervisor_slot);
            $crate::console::enable_debug_put_char(start.flags & $crate::start::START_FLAG_DEBUG_KERNEL != 0);
            $crate::console::init_from_start(start);
            $crate::time::init_component(start);
            // SAFETY: the loader registered this address as our IPC buffer.
            unsafe { $crate::sel4::set_ipc_buffer(start.ipc_buffer as *mut $crate::sel4::IpcBuffer) };
            if start.flags & $crate::start::START_FLAG_PROGRESS != 0 {
                // SAFETY: with this flag the loader mapped our progress page
                // read-write there for our whole life; its first word is an
                // AtomicU64 that only we write.
                let counter = unsafe { &*($crate::liveness::PROGRESS_VADDR as *const core::sync::atomic::AtomicU64) };
                $crate::sel4::set_progress_counter(counter);
            }
            $main(start)
        }

        // `iolite_hang`, the two bytes just before `_start`, is `jmp .`: an
        // endless loop in user mode that touches no register and no memory.
        // Nothing here jumps to it. The supervisor of a test image points a
        // component's instruction pointer at it to make the component hang
        // (it finds it at the ELF entry point minus 2 and checks the bytes),
        // so no component carries fault-injection code of its own.
        core::arch::global_asm!(
            ".globl iolite_hang",
            "iolite_hang:",
            // The bytes, not `jmp iolite_hang`: the assembler encodes a
            // jump to a global symbol in 5 bytes, with a relocation.
            ".byte 0xeb, 0xfe",
            ".globl _start",
            "_start:",
            "and rsp, -16",
            "xor rbp, rbp",
            "call iolite_component_start",
            "ud2",
        );
    };
}
