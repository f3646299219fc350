//! The serial console and the logging macros.
//!
//! A debug kernel offers `seL4_DebugPutChar`: it needs no capability and
//! interleaves correctly with the kernel's own output. A release kernel has
//! no debug system calls (calling one is a fault), so that path is used only
//! once [`enable_debug_put_char`] says the kernel has it: the root task knows
//! from its own build, components from their start record. Otherwise the
//! console writes COM1 (0x3F8) through an I/O port capability given to
//! [`init_io_port`], or drops the output.

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// COM1's data register: the port every PC and QEMU's `-serial` use.
pub const COM1: u16 = 0x3F8;

/// The I/O port capability for COM1, or 0 (seL4_CapNull) when there is none.
static IO_PORT_CAP: AtomicU64 = AtomicU64::new(0);

/// Whether the kernel offers seL4_DebugPutChar (a debug build).
static DEBUG_PUT_CHAR: AtomicBool = AtomicBool::new(false);

/// Tells the console whether the kernel is a debug build with
/// seL4_DebugPutChar. Never enable it on a release kernel: the call faults.
pub fn enable_debug_put_char(available: bool) {
    DEBUG_PUT_CHAR.store(available, Ordering::Release);
}

/// Makes the console write COM1 through `cap`, an I/O port capability whose
/// range covers 0x3F8..=0x3FD (data and line status registers).
pub fn init_io_port(cap: sel4::CPtr) {
    IO_PORT_CAP.store(cap, Ordering::Release);
}

/// Writes one byte to the console, dropping it if there is no way to print.
pub fn put_byte(byte: u8) {
    let cap = IO_PORT_CAP.load(Ordering::Acquire);
    if cap != 0 {
        put_byte_io_port(cap, byte);
        return;
    }
    #[cfg(all(target_os = "none", feature = "debug-console"))]
    if DEBUG_PUT_CHAR.load(Ordering::Acquire) {
        sel4::debug_put_char(byte);
    }
    #[cfg(not(target_os = "none"))]
    {
        use std::io::Write;
        let _ = std::io::stdout().write_all(&[byte]);
    }
}

fn put_byte_io_port(cap: sel4::CPtr, byte: u8) {
    const LINE_STATUS: u16 = COM1 + 5;
    const TRANSMIT_EMPTY: u8 = 1 << 5;
    // Bounded wait: a missing or stuck UART must not hang the component.
    for _ in 0..100_000 {
        match sel4::x86_io_port_in8(cap, LINE_STATUS) {
            Ok(status) if status & TRANSMIT_EMPTY != 0 => break,
            Ok(_) => continue,
            Err(_) => return,
        }
    }
    let _ = sel4::x86_io_port_out8(cap, COM1, byte);
}

/// A [`fmt::Write`] sink for the console that turns `\n` into `\r\n`.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            if byte == b'\n' {
                put_byte(b'\r');
            }
            put_byte(byte);
        }
        Ok(())
    }
}

/// Writes one formatted log line prefixed with the component's name and the
/// level. Used by the logging macros; call those instead.
pub fn write_line(level: &str, args: fmt::Arguments<'_>) {
    use fmt::Write;
    let mut console = Console;
    let _ = if level.is_empty() {
        writeln!(console, "[{}] {}", crate::component_name(), args)
    } else {
        writeln!(console, "[{}] {}: {}", crate::component_name(), level, args)
    };
}

/// Prints a line on the console, prefixed with the component's name.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => { $crate::console::write_line("", format_args!($($arg)*)) };
}

/// Prints an informational line (`[name] info: ...`).
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::console::write_line("info", format_args!($($arg)*)) };
}

/// Prints a warning line (`[name] warning: ...`).
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::console::write_line("warning", format_args!($($arg)*)) };
}

/// Prints an error line (`[name] error: ...`).
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::console::write_line("error", format_args!($($arg)*)) };
}
