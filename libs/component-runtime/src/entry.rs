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

/// Defines `_start` for a component started by the loader: call
/// `$main(arg: usize) -> !` on the stack the loader provided, with `rdi`
/// (the loader's start argument) passed through.
#[macro_export]
macro_rules! component_entry {
    ($name:expr, $main:path) => {
        #[unsafe(no_mangle)]
        extern "C" fn iolite_component_start(arg: usize) -> ! {
            $crate::set_component_name($name);
            $main(arg)
        }

        core::arch::global_asm!(
            ".globl _start",
            "_start:",
            "and rsp, -16",
            "xor rbp, rbp",
            "call iolite_component_start",
            "ud2",
        );
    };
}


