//! How much a component is built from: its private untyped, sized for its
//! image, stack and paging structures, and the loader slots for its
//! objects and for the copies of the shared frames it maps. Reserved once
//! at boot; every incarnation is rebuilt inside the same reservation.

use super::{elf, LoadError, System};
use crate::objects::{ComponentMemory, ObjectAllocator, Retype};
use sel4::{CPtr, ObjectType, Word};
use system_spec::{Component, ObjectKind, SystemSpec};

impl System {
    /// Reserves a component's private untyped (sized for its image,
    /// stack and paging structures) and its loader slots.
    pub(super) fn reserve(
        &self,
        global: &mut ObjectAllocator<'_>,
        index: usize,
    ) -> Result<(ComponentMemory, core::ops::Range<CPtr>), LoadError> {
        let component = &self.spec.components[index];
        let image = self.image(component)?;
        let stack_pages = component.stack_size.div_ceil(elf::PAGE);
        let pages = image.pages.len() as u64 + stack_pages + 2;
        // Paging structures: a page table maps 512 pages, so the mapped
        // pages need at most pages/512 tables if packed, plus, for each
        // separately placed area (image, stack, IPC buffer, start page,
        // each dataport), one table, directory and PDPT at its edges.
        let mapped = pages + dataport_pages(component) + log_ring_frames(component);
        let areas = component.interfaces.len() as u64 + 6;
        let structures = mapped.div_ceil(512) + 3 * areas + 1;
        let bytes: u64 = (pages + structures) * elf::PAGE
            + (1 << ObjectType::Tcb.size_bits(0))
            + (1 << ObjectType::CapTable.size_bits(component.cnode_size_bits as Word));
        // Objects are aligned to their size inside the untyped: the TCB and
        // CNode (the only objects above 4 KiB) may each waste up to their own
        // size before them.
        let slack = (1 << ObjectType::Tcb.size_bits(0))
            + (1 << ObjectType::CapTable.size_bits(component.cnode_size_bits as Word));
        let size_bits = (bytes + slack).next_power_of_two().trailing_zeros() as Word;
        let untyped = global.object(ObjectType::Untyped, size_bits)?;
        let slots = global.slots(pages + structures + 8)?;
        // + the events page and the progress page.
        let shared = global.slots(dataport_frames(&self.spec, component) + 2 + log_ring_frames(component))?;
        Ok((ComponentMemory::new(untyped, slots), shared))
    }
}

/// 4 KiB pages the component's dataports span (for its paging structures).
fn dataport_pages(component: &Component) -> u64 {
    component
        .interfaces
        .iter()
        .filter_map(|i| match i.binding {
            system_spec::Binding::Dataport { size, .. } => Some(size.div_ceil(elf::PAGE)),
            _ => None,
        })
        .sum()
}

/// Log ring pages mapped into the component: its own, or (the server)
/// every writer's and the root task's.
fn log_ring_frames(component: &Component) -> u64 {
    component.log_ring.iter().count() as u64 + component.log_server.as_ref().map_or(0, |s| s.rings.len() as u64 + 1)
}

/// Frame capabilities the component's mappings need (one loader copy each).
fn dataport_frames(spec: &SystemSpec, component: &Component) -> u64 {
    component
        .mappings
        .iter()
        .map(|m| match spec.objects.get(m.object.0 as usize).map(|o| &o.kind) {
            Some(ObjectKind::Frames { size }) => size.div_ceil(system_spec::frame_size(*size)),
            Some(ObjectKind::DeviceFrames { size, .. } | ObjectKind::PciBarFrames { size, .. }) => {
                size.div_ceil(elf::PAGE)
            }
            _ => 0,
        })
        .sum()
}
