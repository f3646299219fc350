//! Mapping 4 KiB and 2 MiB frames into an address space (the root task's own, or a
//! component's).
//!
//! x86_64 has four levels (PML4, PDPT, page directory, page table). seL4
//! reports a missing level as FailedLookup; we then create every missing
//! structure for that address, from the page table up, and retry.

use crate::objects::{AllocError, Retype};
use sel4::{CPtr, CapRights, ObjectType, VmAttributes, Word};

/// Why a mapping failed.
#[derive(Debug, Clone, Copy)]
pub enum MapError {
    /// Creating a paging structure failed.
    Alloc(AllocError),
    /// The kernel refused a map invocation.
    Map(sel4::Error),
}

impl core::fmt::Display for MapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MapError::Alloc(e) => write!(f, "{e}"),
            MapError::Map(e) => write!(f, "map failed: {e:?}"),
        }
    }
}

impl From<AllocError> for MapError {
    fn from(e: AllocError) -> Self {
        MapError::Alloc(e)
    }
}

/// Maps the 4 KiB `frame` at `vaddr` in `vspace` with `rights` and `attrs`,
/// creating paging structures from `memory` as needed.
pub fn map_frame(
    memory: &mut impl Retype,
    vspace: CPtr,
    frame: CPtr,
    vaddr: Word,
    rights: CapRights,
    attrs: VmAttributes,
) -> Result<(), MapError> {
    map_creating(memory, vspace, frame, vaddr, rights, attrs, add_missing_levels)
}

/// Maps the 2 MiB `frame` at `vaddr` (2 MiB-aligned) like [`map_frame`]: a
/// large frame takes a page-directory entry, so no page table is made.
pub fn map_large_frame(
    memory: &mut impl Retype,
    vspace: CPtr,
    frame: CPtr,
    vaddr: Word,
    rights: CapRights,
    attrs: VmAttributes,
) -> Result<(), MapError> {
    map_creating(memory, vspace, frame, vaddr, rights, attrs, add_missing_directory)
}

/// Maps `frame`; if a level is missing, `add_levels` creates every missing
/// one at once, so there are two tries.
fn map_creating<M: Retype>(
    memory: &mut M,
    vspace: CPtr,
    frame: CPtr,
    vaddr: Word,
    rights: CapRights,
    attrs: VmAttributes,
    add_levels: fn(&mut M, CPtr, Word) -> Result<(), MapError>,
) -> Result<(), MapError> {
    for _ in 0..2 {
        match sel4::x86_page_map(frame, vspace, vaddr, rights, attrs) {
            Ok(()) => return Ok(()),
            Err(sel4::Error::FailedLookup) => add_levels(memory, vspace, vaddr)?,
            Err(e) => return Err(MapError::Map(e)),
        }
    }
    Err(MapError::Map(sel4::Error::FailedLookup))
}

/// Creates and maps the page directory (and PDPT) missing for `vaddr`.
fn add_missing_directory(memory: &mut impl Retype, vspace: CPtr, vaddr: Word) -> Result<(), MapError> {
    let attrs = VmAttributes::DEFAULT;
    let directory = memory.object(ObjectType::X86PageDirectory, 0)?;
    if !mapped(sel4::x86_page_directory_map(directory, vspace, vaddr, attrs))? {
        let pdpt = memory.object(ObjectType::X86Pdpt, 0)?;
        sel4::x86_pdpt_map(pdpt, vspace, vaddr, attrs).map_err(MapError::Map)?;
        sel4::x86_page_directory_map(directory, vspace, vaddr, attrs).map_err(MapError::Map)?;
    }
    Ok(())
}

/// Creates and maps every paging structure missing below the PML4 for
/// `vaddr`, from the page table up, so that a 4 KiB frame can be mapped.
fn add_missing_levels(memory: &mut impl Retype, vspace: CPtr, vaddr: Word) -> Result<(), MapError> {
    let attrs = VmAttributes::DEFAULT;
    let table = memory.object(ObjectType::X86PageTable, 0)?;
    if mapped(sel4::x86_page_table_map(table, vspace, vaddr, attrs))? {
        return Ok(());
    }
    let directory = memory.object(ObjectType::X86PageDirectory, 0)?;
    if !mapped(sel4::x86_page_directory_map(directory, vspace, vaddr, attrs))? {
        let pdpt = memory.object(ObjectType::X86Pdpt, 0)?;
        sel4::x86_pdpt_map(pdpt, vspace, vaddr, attrs).map_err(MapError::Map)?;
        sel4::x86_page_directory_map(directory, vspace, vaddr, attrs).map_err(MapError::Map)?;
    }
    sel4::x86_page_table_map(table, vspace, vaddr, attrs).map_err(MapError::Map)
}

/// Ok(true) if a map invocation succeeded, Ok(false) if the level above is
/// missing, the error otherwise.
fn mapped(result: sel4::Result<()>) -> Result<bool, MapError> {
    match result {
        Ok(()) => Ok(true),
        Err(sel4::Error::FailedLookup) => Ok(false),
        Err(e) => Err(MapError::Map(e)),
    }
}

/// A one-page window in the root task's address space through which the
/// loader fills frames before handing them to a component.
pub struct Scratch {
    vaddr: Word,
}

impl Scratch {
    /// Where the window is: far from the root task's image and the self-test.
    pub const VADDR: Word = 0x2000_0000;

    /// Prepares the window's paging structures (once) from `memory`.
    pub fn new(memory: &mut impl Retype) -> Result<Scratch, MapError> {
        // Map a throw-away frame once so the page table exists; later
        // fills then only map and unmap the frame itself.
        let frame = memory.object(ObjectType::X86_4K, 0)?;
        map_frame(
            memory,
            sel4::CAP_INIT_THREAD_VSPACE,
            frame,
            Self::VADDR,
            CapRights::read_write(),
            VmAttributes::DEFAULT,
        )?;
        sel4::x86_page_unmap(frame).map_err(MapError::Map)?;
        Ok(Scratch { vaddr: Self::VADDR })
    }

    /// Maps `frame` in the window, lets `fill` write the page, unmaps it.
    pub fn fill(&mut self, frame: CPtr, fill: impl FnOnce(&mut [u8; 4096])) -> Result<(), MapError> {
        sel4::x86_page_map(
            frame,
            sel4::CAP_INIT_THREAD_VSPACE,
            self.vaddr,
            CapRights::read_write(),
            VmAttributes::DEFAULT,
        )
        .map_err(MapError::Map)?;
        // SAFETY: the frame is mapped read-write at vaddr for the duration of
        // `fill` and nothing else uses the window.
        fill(unsafe { &mut *(self.vaddr as *mut [u8; 4096]) });
        sel4::x86_page_unmap(frame).map_err(MapError::Map)
    }
}
