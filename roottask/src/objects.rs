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
/// A bump allocator per untyped: global objects live as long as the system,
/// so nothing is ever returned to it.
///
/// Which untyped: the kernel hands the root task its untypeds marked as fully
/// used, so the first retype of each one clears all of it (seL4's
/// resetUntypedCap) — under QEMU TCG about a second for 256 MiB. So an
/// object goes into an untyped already in use if one has room, else into the
/// smallest unused one that fits: the memory cleared at boot stays close to
/// the memory the system needs.
pub struct ObjectAllocator<'a> {
    bootinfo: &'a sel4::BootInfo,
    next_slot: CPtr,
    /// Per untyped of the boot info's list: the bytes handed out so far, or
    /// `None` if it was never used (an estimate: the kernel aligns each
    /// object to its size like we do, and knows better; see `object`).
    used: alloc::vec::Vec<Option<u64>>,
}

impl<'a> ObjectAllocator<'a> {
    /// Starts with the boot info's empty slot range and untyped list.
    pub fn new(bootinfo: &'a sel4::BootInfo) -> Self {
        let used = alloc::vec![None; bootinfo.untypeds().count()];
        ObjectAllocator { bootinfo, next_slot: bootinfo.empty.start, used }
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

    /// RAM untyped bytes not handed out yet (by our estimate, which the
    /// kernel bounds; an untyped it called full counts as full). Nothing
    /// is ever returned to this allocator, so after boot this must stay
    /// put: the supervisor reports it after every restart, which is how a
    /// leak would show.
    pub fn free_bytes(&self) -> u64 {
        self.bootinfo
            .untypeds()
            .enumerate()
            .filter(|(_, (_, u))| !u.is_device())
            .map(|(i, (_, u))| (1u64 << u.size_bits).saturating_sub(self.used[i].unwrap_or(0)))
            .sum()
    }

    fn untyped(&self, index: usize) -> (CPtr, &'a sel4::UntypedDesc) {
        self.bootinfo.untypeds().nth(index).expect("untyped index in range")
    }

    /// The RAM untyped to put an object of `bytes` (a power of two) in, and
    /// where in it: the first one in use with room, else the smallest unused
    /// one that can hold it (see the type's docs).
    fn choose_untyped(&self, bytes: u64) -> Result<(usize, u64), AllocError> {
        let ram = || self.bootinfo.untypeds().enumerate().filter(|(_, (_, u))| !u.is_device());
        let in_use = ram().find_map(|(i, (_, u))| {
            let aligned = self.used[i]?.next_multiple_of(bytes);
            (aligned + bytes <= 1u64 << u.size_bits).then_some((i, aligned))
        });
        in_use
            .or_else(|| {
                ram()
                    .filter(|(i, (_, u))| self.used[*i].is_none() && 1u64 << u.size_bits >= bytes)
                    .min_by_key(|(_, (_, u))| u.size_bits)
                    .map(|(i, _)| (i, 0))
            })
            .ok_or(AllocError::OutOfMemory)
    }
}

impl Retype for ObjectAllocator<'_> {
    fn object(&mut self, ty: ObjectType, size_bits: Word) -> Result<CPtr, AllocError> {
        let bytes = 1u64 << ty.size_bits(size_bits);
        let slot = self.slot()?;
        loop {
            let (index, aligned) = self.choose_untyped(bytes)?;
            let (cap, _) = self.untyped(index);
            match sel4::untyped_retype(cap, ty, size_bits, sel4::CAP_INIT_THREAD_CNODE, 0, 0, slot, 1) {
                Ok(()) => {
                    self.used[index] = Some(aligned + bytes);
                    return Ok(slot);
                }
                // Our estimate of the untyped's use is only a bound; the
                // kernel knows better: count this one as full.
                Err(sel4::Error::NotEnoughMemory) => self.used[index] = Some(u64::MAX / 2),
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
    /// Bytes retyped since the last reset (each object aligned to its
    /// size, as the kernel places it).
    used: u64,
}

impl ComponentMemory {
    /// Private memory backed by `untyped`, with `slots` for its objects.
    pub fn new(untyped: CPtr, slots: core::ops::Range<CPtr>) -> Self {
        let next_slot = slots.start;
        ComponentMemory { untyped, slots, next_slot, used: 0 }
    }

    /// Bytes of the private untyped the current incarnation was built
    /// from: the same after every restart, or something leaks.
    pub fn used_bytes(&self) -> u64 {
        self.used
    }

    /// Destroys every object made from this memory.
    pub fn reset(&mut self) -> sel4::Result<()> {
        sel4::cnode_revoke(sel4::CAP_INIT_THREAD_CNODE, self.untyped, 64)?;
        self.next_slot = self.slots.start;
        self.used = 0;
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
                let bytes = 1u64 << ty.size_bits(size_bits);
                self.used = self.used.next_multiple_of(bytes) + bytes;
                Ok(slot)
            }
            Err(sel4::Error::NotEnoughMemory) => Err(AllocError::OutOfMemory),
            Err(e) => Err(AllocError::Retype(e)),
        }
    }
}
