//! Fault injection for test images: commands from the test console.
//!
//! Built only into a root task whose spec grants injection into at least
//! one component (`<instance>.fault_injection = 1`, set by tests/variants
//! alone; build.rs turns on `cfg(fault_injection)`), so the default image
//! carries neither this reader nor its command words (tests/robot/iso.robot
//! checks).
//!
//! The test writes a line to QEMU's serial port (COM1):
//! `iolite-inject fault NAME` or `iolite-inject hang NAME`. The supervisor
//! reads COM1's receive register on every tick of its clock
//! (`crate::clock`; QEMU holds what the 16-byte FIFO cannot take, so
//! nothing is lost, only read up to a tick late) and obeys a command for a
//! component the spec grants, refusing and reporting any other.
//!
//! Why the supervisor rewrites the target's registers rather than asking
//! the component to fail: the fault is then real (the kernel raises it
//! where the component runs, the supervisor learns of it on the fault
//! endpoint like any other) and no component carries injection code, so
//! what is tested is the image that ships. A *fault* points the thread's
//! instruction pointer at an unmapped address ([`FAULT_IP`], in the null
//! guard page); a *hang* points it at the endless loop the component
//! runtime puts before every entry point (`iolite_hang`, found at the
//! ELF entry minus 2 and checked), where it spins in user mode at its own
//! priority, holding whatever it held, which is what a component stuck in
//! a loop does. Why the supervisor reads COM1 itself rather than through
//! log, which owns the console's output: log is one of the components the
//! tests make fault, and commands must still arrive while it is dead.

use component_runtime::error;
pub use component_runtime::inject::{parse, Injection};

/// COM1's data (receive buffer) and line status registers.
const COM1: u16 = 0x3F8;
const LINE_STATUS: u16 = COM1 + 5;
const DATA_READY: u8 = 1;

/// Where an injected fault sends the thread: inside the unmapped page 0
/// (every component's null guard), so the report reads "ip 0xbad".
pub const FAULT_IP: u64 = 0xbad;

/// The longest command line; longer lines are dropped whole.
const MAX_LINE: usize = 96;

/// Collects COM1's input into lines.
pub struct Console {
    line: [u8; MAX_LINE],
    len: usize,
    too_long: bool,
}

impl Console {
    /// An empty line buffer.
    pub const fn new() -> Console {
        Console { line: [0; MAX_LINE], len: 0, too_long: false }
    }

    /// Reads every byte COM1 holds; calls `each` with every complete line.
    pub fn poll(&mut self, mut each: impl FnMut(&[u8])) {
        // Bounded: a UART that always says "ready" cannot keep us here.
        for _ in 0..4096 {
            match sel4::x86_io_port_in8(sel4::CAP_IO_PORT, LINE_STATUS) {
                Ok(status) if status & DATA_READY != 0 => {}
                Ok(_) => return,
                Err(e) => {
                    error!("fault injection: cannot read COM1: {e:?}");
                    return;
                }
            }
            let Ok(byte) = sel4::x86_io_port_in8(sel4::CAP_IO_PORT, COM1) else { return };
            match byte {
                b'\n' | b'\r' => {
                    if !self.too_long && self.len > 0 {
                        each(&self.line[..self.len]);
                    }
                    self.len = 0;
                    self.too_long = false;
                }
                _ if self.len == MAX_LINE => self.too_long = true,
                _ => {
                    self.line[self.len] = byte;
                    self.len += 1;
                }
            }
        }
    }
}
