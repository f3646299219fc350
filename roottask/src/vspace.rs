//! Mapping frames into the root task's own address space.
//!
//! x86_64 has four levels (PML4, PDPT, page directory, page table). seL4
//! reports a missing level as FailedLookup; we then create the missing
//! structure, map it, and retry, from the lowest level up.

use crate::alloc::{AllocError, ObjectAllocator};
use sel4::{CPtr, CapRights, ObjectType, Word};

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

/// Maps the 4 KiB `frame` at `vaddr` in the root task's VSpace with `rights`
/// and the default (write-back) attributes, creating paging structures as
/// needed.
pub fn map_frame(
    objects: &mut ObjectAllocator<'_>,
    frame: CPtr,
    vaddr: Word,
    rights: CapRights,
) -> Result<(), MapError> {
    let vspace = sel4::CAP_INIT_THREAD_VSPACE;
    let attrs = sel4::X86VmAttributes::DEFAULT;
    // add_missing_level creates every missing level at once: two tries.
    for _ in 0..2 {
        match sel4::x86_page_map(frame, vspace, vaddr, rights, attrs) {
            Ok(()) => return Ok(()),
            Err(sel4::Error::FailedLookup) => add_missing_level(objects, vaddr)?,
            Err(e) => return Err(MapError::Map(e)),
        }
    }
    Err(MapError::Map(sel4::Error::FailedLookup))
}

/// Creates and maps every paging structure missing below the PML4 for
/// `vaddr`, from the page table up, so that a 4 KiB frame can be mapped.
fn add_missing_level(objects: &mut ObjectAllocator<'_>, vaddr: Word) -> Result<(), MapError> {
    let vspace = sel4::CAP_INIT_THREAD_VSPACE;
    let attrs = sel4::X86VmAttributes::DEFAULT;
    let table = objects.object(ObjectType::X86PageTable, 0)?;
    if mapped(sel4::x86_page_table_map(table, vspace, vaddr, attrs))? {
        return Ok(());
    }
    let directory = objects.object(ObjectType::X86PageDirectory, 0)?;
    if !mapped(sel4::x86_page_directory_map(directory, vspace, vaddr, attrs))? {
        let pdpt = objects.object(ObjectType::X86Pdpt, 0)?;
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
