//! The few e1000 (82540EM) registers hwprobe touches, in the BAR0 dataport.
//!
//! Device registers must be accessed as whole 32-bit words: the glue's
//! `Dataport::read`/`write` copy byte by byte, which the device sees as
//! four separate accesses. QEMU's e1000 implements only 32-bit accesses, so
//! a byte write becomes a dword write with the other three bytes zero, and
//! the first byte read of ICR clears every cause. So this goes through the
//! mapping's pointer with `read_volatile`/`write_volatile` of `u32`; the
//! loader maps the region uncached.

use super::glue;

/// Device status (read-only).
pub const STATUS: usize = 0x0008;
/// Interrupt cause read: reading returns the pending causes and clears them.
pub const ICR: usize = 0x00C0;
/// Interrupt cause set: writing 1s raises those causes as if the device had.
pub const ICS: usize = 0x00C8;
/// Interrupt mask set: 1s enable those causes to assert INTA#.
pub const IMS: usize = 0x00D0;
/// Interrupt mask clear: 1s disable those causes.
pub const IMC: usize = 0x00D8;
/// Receive address low/high, entry 0: the MAC address.
pub const RAL0: usize = 0x5400;
pub const RAH0: usize = 0x5404;

/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// RAH: the entry is valid.
pub const RAH_AV: u32 = 1 << 31;

/// Interrupt causes (ICR/ICS/IMS bits) the device does not raise on its own
/// while its receiver and transmitter are off, so a cause seen in ICR is
/// the one hwprobe set.
pub const CAUSE_TXDW: u32 = 1 << 0;
pub const CAUSE_LSC: u32 = 1 << 2;
pub const CAUSE_RXT0: u32 = 1 << 7;

/// The register block, mapped by the loader (seL4HardwareMMIO).
pub struct Registers {
    base: *mut u32,
}

impl Registers {
    /// The `regs` dataport.
    pub fn new() -> Registers {
        Registers { base: glue::regs::get().as_mut_ptr().cast() }
    }

    /// Reads the register at byte offset `offset`.
    pub fn read(&self, offset: usize) -> u32 {
        assert!(offset.is_multiple_of(4) && offset < glue::regs::SIZE);
        // SAFETY: in range and aligned (checked); the loader maps SIZE bytes
        // of device memory at this address for as long as we run.
        unsafe { self.base.add(offset / 4).read_volatile() }
    }

    /// Writes the register at byte offset `offset`.
    pub fn write(&mut self, offset: usize, value: u32) {
        assert!(offset.is_multiple_of(4) && offset < glue::regs::SIZE);
        // SAFETY: as in `read`; the mapping is read-write.
        unsafe { self.base.add(offset / 4).write_volatile(value) }
    }

    /// The MAC address in receive-address entry 0, if that entry is valid.
    pub fn mac(&self) -> Option<[u8; 6]> {
        let (low, high) = (self.read(RAL0), self.read(RAH0));
        if high & RAH_AV == 0 {
            return None;
        }
        let [a, b, c, d] = low.to_le_bytes();
        let [e, f, _, _] = high.to_le_bytes();
        Some([a, b, c, d, e, f])
    }
}
