//! The serial console and the logging macros.
//!
//! A debug kernel offers `seL4_DebugPutChar`: it needs no capability and
//! interleaves correctly with the kernel's own output. A release kernel has
//! no debug system calls (calling one is a fault), so that path is used only
//! once [`enable_debug_put_char`] says the kernel has it: the root task knows
//! from its own build, components from their start record. Otherwise the
//! console writes COM1 (0x3F8) through an I/O port capability given to
//! [`init_io_port`], or drops the output.
//!
//! In a system with a log server (`camkes/iolite.camkes`: the `log`
//! component owns COM1) a component prints nothing itself: its start record
//! gives it a log ring ([`crate::logring`]) and [`write_line`] and the
//! panic handler put each whole line there and signal the server, which
//! prints it with the component's name. Without one (the small examples),
//! and in the root task until the server runs, lines go out byte by byte
//! as above.

use crate::logring::{Ring, LINE_MAX};
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// COM1's data register: the port every PC and QEMU's `-serial` use.
pub const COM1: u16 = 0x3F8;

/// The I/O port capability for COM1, or 0 (seL4_CapNull) when there is none.
static IO_PORT_CAP: AtomicU64 = AtomicU64::new(0);

/// Whether the kernel offers seL4_DebugPutChar (a debug build).
static DEBUG_PUT_CHAR: AtomicBool = AtomicBool::new(false);

/// The log ring lines go to, or null.
static RING: AtomicPtr<Ring> = AtomicPtr::new(core::ptr::null_mut());
/// The capability that signals the log server after a line (0: none).
static RING_SIGNAL: AtomicU64 = AtomicU64::new(0);
/// Whether lines go to the ring now (the root task turns it off while the
/// log server is not running).
static RING_ON: AtomicBool = AtomicBool::new(false);
/// Whether ring lines carry their own `[name] ` prefix (the root task's:
/// its ring has no name in the spec, and its lines name themselves).
static RING_PREFIXED: AtomicBool = AtomicBool::new(false);

/// Sends whole lines to `ring` from now on, signalling `signal` (an
/// emitter capability to the log server's notification; 0 for none) after
/// each. `prefixed`: the lines carry their `[name] ` prefix themselves.
pub fn init_log_ring(ring: &'static Ring, signal: sel4::CPtr, prefixed: bool) {
    RING_SIGNAL.store(signal, Ordering::Relaxed);
    RING_PREFIXED.store(prefixed, Ordering::Relaxed);
    RING.store(ring as *const Ring as *mut Ring, Ordering::Release);
    RING_ON.store(true, Ordering::Release);
}

/// Turns the ring on or off (the root task: off while the log server is
/// dead, so its own reports then print directly).
pub fn set_log_ring_enabled(on: bool) {
    RING_ON.store(on, Ordering::Release);
}

/// The component's ring from its start record, if it has one (the entry
/// macro calls this).
pub fn init_from_start(start: &crate::start::StartInfo) {
    if start.flags & crate::start::START_FLAG_LOG_RING != 0 && start.log_signal_slot != 0 {
        // SAFETY: with this flag the loader mapped the ring read-write at
        // LOG_RING_VADDR for the component's life; it is only atomics.
        let ring = unsafe { &*(crate::logring::LOG_RING_VADDR as *const Ring) };
        init_log_ring(ring, start.log_signal_slot, false);
    }
}

fn ring() -> Option<&'static Ring> {
    if !RING_ON.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: only init_log_ring stores it, from a &'static Ring.
    unsafe { RING.load(Ordering::Acquire).as_ref() }
}

/// The time stamp lines carry, so that the server prints the lines of all
/// rings in the order they were written.
fn stamp() -> u64 {
    crate::time::rdtsc()
}

/// One line being formatted for the ring; what does not fit is cut (and
/// the ring marks it).
pub struct LineBuf {
    bytes: [u8; LINE_MAX + 1],
    len: usize,
}

impl LineBuf {
    /// An empty line.
    pub const fn new() -> LineBuf {
        LineBuf { bytes: [0; LINE_MAX + 1], len: 0 }
    }

    /// What was written (one byte past [`LINE_MAX`] if it was cut).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Default for LineBuf {
    fn default() -> Self {
        LineBuf::new()
    }
}

impl fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes `args` as one line: into the log ring if this component has one
/// (one slot, then one signal: the writer never waits), else to the
/// console byte by byte with `[name] ` in front. Returns whether it went to
/// the ring.
pub fn emit_line(args: fmt::Arguments<'_>) -> bool {
    use fmt::Write;
    let Some(ring) = ring() else {
        let _ = writeln!(Console, "[{}] {}", crate::component_name(), args);
        return false;
    };
    let mut line = LineBuf::new();
    if RING_PREFIXED.load(Ordering::Relaxed) {
        let _ = write!(line, "[{}] ", crate::component_name());
    }
    let _ = line.write_fmt(args);
    ring.write_line(stamp(), line.as_bytes());
    let signal = RING_SIGNAL.load(Ordering::Relaxed);
    if signal != 0 {
        sel4::signal(signal);
    }
    true
}

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

/// The least severe lines printed: 1 errors, 2 and warnings, 3 everything
/// (the default; a deployment's `log_level`, docs/config.md).
static LEVEL: AtomicU8 = AtomicU8::new(3);

/// Prints only lines of severity `level` and above from now on: 1 errors,
/// 2 warnings too, 3 (or more) everything.
pub fn set_level(level: u8) {
    LEVEL.store(level.clamp(1, 3), Ordering::Relaxed);
}

/// Writes one formatted log line prefixed with the component's name and the
/// level. Used by the logging macros; call those instead.
pub fn write_line(level: &str, args: fmt::Arguments<'_>) {
    let rank = match level {
        "error" => 1,
        "warning" => 2,
        _ => 3,
    };
    if rank > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    if level.is_empty() {
        emit_line(args);
    } else {
        emit_line(format_args!("{level}: {args}"));
    }
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
