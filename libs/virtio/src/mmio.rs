//! [`Regs`] over a mapped device window (the component's register
//! dataport), volatile and bounds-checked.

use glue_rt::{Dataport, ReadWrite};

use super::Regs;

/// A device's registers at `base` inside a mapped dataport.
pub struct Mmio {
    regs: Dataport<ReadWrite>,
    base: usize,
    len: usize,
}

impl Mmio {
    /// The `len` bytes at `base` of `regs`; `None` if they do not fit it.
    pub fn new(regs: Dataport<ReadWrite>, base: usize, len: usize) -> Option<Mmio> {
        (base.checked_add(len)? <= regs.len()).then_some(Mmio { regs, base, len })
    }

    fn at(&self, offset: usize, width: usize) -> *mut u8 {
        assert!(offset.is_multiple_of(width) && offset + width <= self.len, "virtio register {offset:#x} out of range");
        self.regs.as_mut_ptr().wrapping_add(self.base + offset)
    }
}

// SAFETY (every access): an aligned register inside the window (checked),
// which the loader keeps mapped for as long as we run; device memory is
// only ever accessed volatile.
impl Regs for Mmio {
    fn read8(&self, offset: usize) -> u8 {
        unsafe { self.at(offset, 1).read_volatile() }
    }
    fn read16(&self, offset: usize) -> u16 {
        unsafe { self.at(offset, 2).cast::<u16>().read_volatile() }
    }
    fn read32(&self, offset: usize) -> u32 {
        unsafe { self.at(offset, 4).cast::<u32>().read_volatile() }
    }
    fn write8(&mut self, offset: usize, value: u8) {
        unsafe { self.at(offset, 1).write_volatile(value) }
    }
    fn write16(&mut self, offset: usize, value: u16) {
        unsafe { self.at(offset, 2).cast::<u16>().write_volatile(value) }
    }
    fn write32(&mut self, offset: usize, value: u32) {
        unsafe { self.at(offset, 4).cast::<u32>().write_volatile(value) }
    }
}
