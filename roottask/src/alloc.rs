//! Kernel objects from untyped memory, and the slots to hold them.
//!
//! A bump allocator: objects are retyped from one RAM untyped at a time and
//! never returned. The root task creates a fixed set of objects, so the
//! simplicity is worth more than reuse here; the loader will keep its own
//! accounting per component.

use sel4::{CPtr, ObjectType, Word};

/// Where an allocation failed and why.
#[derive(Debug, Clone, Copy)]
pub enum AllocError {
    /// No empty slot is left in the root CNode.
    OutOfSlots,
    /// No RAM untyped has room for the object.
    OutOfMemory,
    /// The kernel refused the retype.
    Retype(sel4::Error),
}

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AllocError::OutOfSlots => write!(f, "no empty capability slot left"),
            AllocError::OutOfMemory => write!(f, "no untyped memory left"),
            AllocError::Retype(e) => write!(f, "Untyped_Retype failed: {e:?}"),
        }
    }
}

/// Hands out empty slots of the root CNode and retypes RAM untypeds into them.
pub struct ObjectAllocator<'a> {
    bootinfo: &'a sel4::BootInfo,
    next_slot: CPtr,
    /// Index into the boot info's untyped list of the untyped in use, and how
    /// many bytes of it have been handed out (an upper bound: the kernel
    /// aligns each object to its size).
    current: Option<(usize, u64)>,
}

impl<'a> ObjectAllocator<'a> {
    /// Starts with the boot info's empty slot range and untyped list.
    pub fn new(bootinfo: &'a sel4::BootInfo) -> Self {
        ObjectAllocator { bootinfo, next_slot: bootinfo.empty.start, current: None }
    }

    /// Reserves one empty slot in the root CNode.
    pub fn slot(&mut self) -> Result<CPtr, AllocError> {
        if self.next_slot >= self.bootinfo.empty.end {
            return Err(AllocError::OutOfSlots);
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        Ok(slot)
    }

    /// Retypes one object of `ty` (with `size_bits` for variable-size types)
    /// into a fresh slot and returns that slot.
    pub fn object(&mut self, ty: ObjectType, size_bits: Word) -> Result<CPtr, AllocError> {
        let bytes = 1u64 << ty.size_bits(size_bits);
        let slot = self.slot()?;
        loop {
            let (index, used) = match self.current {
                Some(current) => current,
                None => (self.next_untyped(0, bytes)?, 0),
            };
            let (cap, untyped) = self.untyped(index);
            let capacity = 1u64 << untyped.size_bits;
            let aligned = (used + bytes - 1) & !(bytes - 1);
            if aligned + bytes > capacity {
                self.current = Some((self.next_untyped(index + 1, bytes)?, 0));
                continue;
            }
            match sel4::untyped_retype(cap, ty, size_bits, sel4::CAP_INIT_THREAD_CNODE, 0, 0, slot, 1) {
                Ok(()) => {
                    self.current = Some((index, aligned + bytes));
                    return Ok(slot);
                }
                // Our estimate of the untyped's use is only a bound; the
                // kernel knows better. Move on to the next untyped.
                Err(sel4::Error::NotEnoughMemory) => {
                    self.current = Some((self.next_untyped(index + 1, bytes)?, 0));
                }
                Err(e) => return Err(AllocError::Retype(e)),
            }
        }
    }

    fn untyped(&self, index: usize) -> (CPtr, &'a sel4::UntypedDesc) {
        self.bootinfo.untypeds().nth(index).expect("untyped index in range")
    }

    /// The first RAM untyped at or after `from` that can hold `bytes`.
    fn next_untyped(&self, from: usize, bytes: u64) -> Result<usize, AllocError> {
        self.bootinfo
            .untypeds()
            .enumerate()
            .skip(from)
            .find(|(_, (_, u))| !u.is_device() && (1u64 << u.size_bits) >= bytes)
            .map(|(i, _)| i)
            .ok_or(AllocError::OutOfMemory)
    }
}
