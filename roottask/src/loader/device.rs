//! Frames at given physical addresses, from the boot info's device untypeds.
//!
//! An untyped is retyped from its start upwards, each object aligned to its
//! size. To reach a device register block in the middle of a device
//! untyped, the loader first retypes "filler" untypeds covering the gap (the
//! largest aligned blocks that fit), then the frames themselves. Requests
//! within one device untyped must therefore come in increasing address
//! order; the spec lists device objects in that order or the loader says so.

use super::LoadError;
use crate::objects::ObjectAllocator;
use alloc::format;
use alloc::vec::Vec;
use sel4::{CPtr, ObjectType, Word};

/// seL4's smallest untyped object (seL4_MinUntypedBits).
const MIN_UNTYPED_BITS: u32 = 4;

/// How far each device untyped has been retyped.
pub struct DeviceMemory<'a> {
    bootinfo: &'a sel4::BootInfo,
    /// (untyped slot, next free physical address) for every untyped used.
    cursors: Vec<(CPtr, u64)>,
}

impl<'a> DeviceMemory<'a> {
    /// Nothing retyped yet.
    pub fn new(bootinfo: &'a sel4::BootInfo) -> Self {
        DeviceMemory { bootinfo, cursors: Vec::new() }
    }

    /// Frames covering `[paddr, paddr + size)`, in address order.
    pub fn frames(&mut self, global: &mut ObjectAllocator<'_>, paddr: u64, size: u64) -> Result<Vec<CPtr>, LoadError> {
        let end =
            paddr.checked_add(size).ok_or_else(|| LoadError(format!("device region {paddr:#x}+{size:#x} wraps")))?;
        let (untyped, base) = self
            .bootinfo
            .untypeds()
            .find(|(_, u)| u.is_device() && u.paddr <= paddr && end <= u.paddr + (1u64 << u.size_bits))
            .map(|(cap, u)| (cap, u.paddr))
            .ok_or_else(|| {
                LoadError(format!("no device untyped covers {paddr:#x}..{end:#x} (not a device region, or split)"))
            })?;
        let cursor = match self.cursors.iter_mut().find(|(cap, _)| *cap == untyped) {
            Some((_, next)) => next,
            None => {
                self.cursors.push((untyped, base));
                &mut self.cursors.last_mut().unwrap().1
            }
        };
        if *cursor > paddr {
            return Err(LoadError(format!(
                "device region {paddr:#x} lies below one already taken from the same untyped (list device objects by address)"
            )));
        }
        while *cursor < paddr {
            let align = cursor.trailing_zeros();
            let fits = 63 - (paddr - *cursor).leading_zeros();
            let bits = align.min(fits);
            if bits < MIN_UNTYPED_BITS {
                return Err(LoadError(format!(
                    "cannot reach {paddr:#x}: gap at {:#x} is not 16-byte aligned",
                    *cursor
                )));
            }
            let filler = global.slot()?;
            sel4::untyped_retype(
                untyped,
                ObjectType::Untyped,
                bits as Word,
                sel4::CAP_INIT_THREAD_CNODE,
                0,
                0,
                filler,
                1,
            )
            .map_err(|e| LoadError(format!("filler untyped at {:#x}: {e:?}", *cursor)))?;
            *cursor += 1u64 << bits;
        }
        let mut frames = Vec::new();
        while *cursor < end {
            let frame = global.slot()?;
            sel4::untyped_retype(untyped, ObjectType::X86_4K, 0, sel4::CAP_INIT_THREAD_CNODE, 0, 0, frame, 1)
                .map_err(|e| LoadError(format!("device frame at {:#x}: {e:?}", *cursor)))?;
            frames.push(frame);
            *cursor += 4096;
        }
        Ok(frames)
    }
}
