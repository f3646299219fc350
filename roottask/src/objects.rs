//! Kernel objects from untyped memory, and the slots to hold them.
//!
//! Two allocators share the [`Retype`] interface: the global
//! [`ObjectAllocator`] hands out the boot info's RAM untypeds for objects that
//! live as long as the system (endpoints, dataport frames, per-component
//! untypeds); a [`ComponentMemory`] retypes one component's private untyped,
//! so that revoking that single capability destroys every object the
//! component was built from (which is how a restart starts clean).

use sel4::{CPtr, ObjectType, Word};

/// Where an allocation failed and why.
#[derive(Debug, Clone, Copy)]
pub enum AllocError {
    /// No empty slot is left (in the root CNode or a component's range).
    OutOfSlots,
    /// No untyped memory has room for the object.
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

/// Something that can make kernel objects into fresh root-CNode slots.
pub trait Retype {
    /// Retypes one object of `ty` (with `size_bits` for variable-size
    /// types) into a fresh slot of the root CNode and returns that slot.
    fn object(&mut self, ty: ObjectType, size_bits: Word) -> Result<CPtr, AllocError>;
}

/// Hands out empty slots of the root CNode and retypes RAM untypeds into them.
///
/// A bump allocator: global objects live as long as the system, so nothing
/// is ever returned to it.
pub struct ObjectAllocator<'a> {
    bootinfo: &'a sel4::BootInfo,
    next_slot: CPtr,
    /// Index into the boot info's untyped list of the untyped in use, and how
    /// many bytes of it have been handed out (an estimate: the kernel aligns
    /// each object to its size, and knows better; see `object`).
    current: Option<(usize, u64)>,
}

impl<'a> ObjectAllocator<'a> {
    /// Starts with the boot info's empty slot range and untyped list.
    pub fn new(bootinfo: &'a sel4::BootInfo) -> Self {
        ObjectAllocator { bootinfo, next_slot: bootinfo.empty.start, current: None }
    }

    /// The boot info this allocator hands out.
    pub fn bootinfo(&self) -> &'a sel4::BootInfo {
        self.bootinfo
    }

    /// Reserves one empty slot in the root CNode.
    pub fn slot(&mut self) -> Result<CPtr, AllocError> {
        Ok(self.slots(1)?.start)
    }

    /// Reserves `count` consecutive empty slots in the root CNode.
    pub fn slots(&mut self, count: u64) -> Result<core::ops::Range<CPtr>, AllocError> {
        let start = self.next_slot;
        let end = start.checked_add(count).ok_or(AllocError::OutOfSlots)?;
        if end > self.bootinfo.empty.end {
            return Err(AllocError::OutOfSlots);
        }
        self.next_slot = end;
        Ok(start..end)
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

impl Retype for ObjectAllocator<'_> {
    fn object(&mut self, ty: ObjectType, size_bits: Word) -> Result<CPtr, AllocError> {
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
}

/// One component's private memory: an untyped capability and a range of
/// root-CNode slots for the objects made from it.
///
/// [`ComponentMemory::reset`] revokes the untyped, which deletes every object
/// retyped from it (and every capability to those objects, wherever it is),
/// and makes the whole untyped and slot range available again.
pub struct ComponentMemory {
    untyped: CPtr,
    slots: core::ops::Range<CPtr>,
    next_slot: CPtr,
}

impl ComponentMemory {
    /// Private memory backed by `untyped`, with `slots` for its objects.
    pub fn new(untyped: CPtr, slots: core::ops::Range<CPtr>) -> Self {
        let next_slot = slots.start;
        ComponentMemory { untyped, slots, next_slot }
    }

    /// Destroys every object made from this memory.
    pub fn reset(&mut self) -> sel4::Result<()> {
        sel4::cnode_revoke(sel4::CAP_INIT_THREAD_CNODE, self.untyped, 64)?;
        self.next_slot = self.slots.start;
        Ok(())
    }
}

impl Retype for ComponentMemory {
    fn object(&mut self, ty: ObjectType, size_bits: Word) -> Result<CPtr, AllocError> {
        if self.next_slot >= self.slots.end {
            return Err(AllocError::OutOfSlots);
        }
        let slot = self.next_slot;
        match sel4::untyped_retype(self.untyped, ty, size_bits, sel4::CAP_INIT_THREAD_CNODE, 0, 0, slot, 1) {
            Ok(()) => {
                self.next_slot += 1;
                Ok(slot)
            }
            Err(sel4::Error::NotEnoughMemory) => Err(AllocError::OutOfMemory),
            Err(e) => Err(AllocError::Retype(e)),
        }
    }
}
