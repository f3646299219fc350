//! Building one incarnation of a component from the spec, in the phases a
//! capDL loader goes through:
//!
//! 1. **create objects**: its VSpace root (assigned an ASID), CNode and TCB,
//!    from its private untyped;
//! 2. **map frames**: its own (image, stack, IPC buffer, start-info page,
//!    each made and filled here) and the shared ones (dataports, log rings,
//!    the events and progress pages: loader copies of frames made at boot);
//! 3. **install caps**: exactly the spec's capabilities, plus the fault
//!    endpoint;
//! 4. **configure the thread**: its CSpace, VSpace, IPC buffer, priorities
//!    and fault endpoint;
//! 5. **start** it at its entry point.
//!
//! Paging structures come from the private untyped as the mappings need
//! them, so a restart (which revokes that untyped) frees them too.

use super::globals::Loaded;
use super::{elf, invoke, seed, Instance, LoadError, System};
use crate::objects::{ComponentMemory, Retype};
use crate::vspace;
use alloc::format;
use alloc::vec::Vec;
use component_runtime::events;
use component_runtime::logring;
use component_runtime::start::{self, StartInfo};
use sel4::{CPtr, CapData, CapRights, ObjectType, VmAttributes, Word};
use system_spec::{Access, Component, LARGE_PAGE_SIZE};

/// The kernel objects of an incarnation, as the phases hand them on.
struct Parts {
    pml4: CPtr,
    cnode: CPtr,
    cnode_bits: Word,
    tcb: CPtr,
    /// The fault endpoint's slot: the CNode's last.
    fault_slot: Word,
}

/// A log ring the log server reads: its frame, where it is mapped in the
/// server, and its writer's name ("" for the root task's).
struct ServerRing<'s> {
    frame: CPtr,
    vaddr: u64,
    writer: &'s str,
}

impl System {
    /// Builds `instance` from the spec and starts its thread.
    pub(super) fn build(&mut self, instance: &mut Instance) -> Result<(), LoadError> {
        let component = self.spec.components[instance.index].clone();
        let image = self.image(&component)?;
        let parts = create_objects(&mut instance.memory, &component)?;
        let ipc_buffer = self.map_own_frames(instance, &component, &image, &parts)?;
        self.map_shared_frames(instance, &component, parts.pml4)?;
        self.install_caps(instance, &component, &parts)?;
        configure_thread(&parts, &component, ipc_buffer)?;
        self.start(instance, &component, &parts, image.entry)
    }

    /// Phase 2, the component's own frames: the image (fresh frames filled
    /// through the scratch window, mapped with the segment's rights), the
    /// stack, the IPC buffer (returned) and the start-info page.
    fn map_own_frames(
        &mut self,
        instance: &mut Instance,
        component: &Component,
        image: &elf::Image<'static>,
        parts: &Parts,
    ) -> Result<CPtr, LoadError> {
        let pml4 = parts.pml4;
        for page in &image.pages {
            let memory = &mut instance.memory;
            let frame = memory.object(ObjectType::X86_4K, 0)?;
            self.scratch.fill(frame, |bytes| image.fill_page(page.vaddr, bytes))?;
            let rights = if page.writable { CapRights::read_write() } else { CapRights::read_only() };
            vspace::map_frame(memory, pml4, frame, page.vaddr, rights, VmAttributes::DEFAULT)?;
        }
        // The stack, with the page below it left unmapped as a guard.
        let stack_pages = component.stack_size.div_ceil(elf::PAGE);
        for i in 1..=stack_pages {
            map_fresh_page(&mut instance.memory, pml4, start::STACK_TOP - i * elf::PAGE, CapRights::read_write())?;
        }
        let ipc_buffer = map_fresh_page(&mut instance.memory, pml4, start::IPC_BUFFER_VADDR, CapRights::read_write())?;
        let info = self.start_info(instance, component, parts.fault_slot)?;
        let start_page = instance.memory.object(ObjectType::X86_4K, 0)?;
        self.scratch.fill(start_page, |bytes| {
            // SAFETY: StartInfo is plain old data smaller than a page.
            let raw = unsafe {
                core::slice::from_raw_parts(&info as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>())
            };
            bytes[..raw.len()].copy_from_slice(raw);
        })?;
        let memory = &mut instance.memory;
        vspace::map_frame(
            memory,
            pml4,
            start_page,
            start::START_INFO_VADDR,
            CapRights::read_only(),
            VmAttributes::DEFAULT,
        )?;
        Ok(ipc_buffer)
    }

    /// What the component's runtime reads at start: its name, incarnation,
    /// flags, seed, the CPU's clock, its log rings and its dataports.
    fn start_info(&self, instance: &Instance, component: &Component, fault_slot: Word) -> Result<StartInfo, LoadError> {
        let mut flags = if self.debug_kernel { start::START_FLAG_DEBUG_KERNEL } else { 0 };
        if component.events {
            flags |= start::START_FLAG_EVENTS;
        }
        let mut info = StartInfo::new(&component.name, instance.index as u64, instance.restarts, flags, fault_slot);
        info.seed = seed::random_seed();
        info.tsc_mhz = component_runtime::time::measured_tsc_mhz().unwrap_or(0);
        self.discovery.fill(&mut info);
        if self.progress_frames.get(instance.index).copied().flatten().is_some() {
            info.flags |= start::START_FLAG_PROGRESS;
        }
        if let Some(end) = &component.log_ring {
            info.flags |= start::START_FLAG_LOG_RING;
            info.log_signal_slot = end.signal_slot;
        }
        if let Some(server) = &component.log_server {
            info.flags |= start::START_FLAG_LOG_SERVER;
            info.log_wait_slot = server.wait_slot;
            for (i, ring) in self.server_rings(component)?.iter().enumerate() {
                info.log_rings[i] = start::LogRingRecord::new(ring.vaddr, ring.writer);
                info.log_ring_count = i as u64 + 1;
            }
        }
        for mapping in &component.mappings {
            let Loaded::Frames(frames) = &self.objects[mapping.object.0 as usize] else { continue };
            let Some(&first) = frames.caps.first() else { continue };
            let paddr = sel4::x86_page_get_address(first).map_err(|e| LoadError(format!("Page_GetAddress: {e:?}")))?;
            let size = frames.caps.len() as u64 * frames.frame_size;
            let record = start::DataportRecord { vaddr: mapping.vaddr, paddr, size };
            if !info.add_dataport(record) {
                return Err(LoadError(format!("more than {} dataports", start::MAX_DATAPORTS)));
            }
        }
        Ok(info)
    }

    /// The rings a log server reads, in spec order, then the root task's;
    /// none for any other component.
    fn server_rings<'s>(&self, component: &'s Component) -> Result<Vec<ServerRing<'s>>, LoadError> {
        let Some(server) = &component.log_server else { return Ok(Vec::new()) };
        let sources = server.rings.iter().map(|r| (self.ring_frame(r.ring), r.name.as_str()));
        let root = self.root_ring.map(|f| (Ok(f), ""));
        let mut rings = Vec::new();
        for (i, (frame, writer)) in sources.chain(root).enumerate() {
            if i >= start::MAX_LOG_RINGS {
                return Err(LoadError(format!("more than {} log rings", start::MAX_LOG_RINGS)));
            }
            let vaddr = logring::LOG_RINGS_VADDR + i as u64 * logring::LOG_RINGS_STRIDE;
            rings.push(ServerRing { frame: frame?, vaddr, writer });
        }
        Ok(rings)
    }

    /// Phase 2, the shared frames: the loader keeps one copy of each frame
    /// capability per mapping (x86 seL4 maps a capability once), in the
    /// instance's reserved slots, and maps the copy with the end's rights.
    fn map_shared_frames(&self, instance: &mut Instance, component: &Component, pml4: CPtr) -> Result<(), LoadError> {
        let next = self.map_dataports(instance, component, pml4)?;
        let next = self.map_log_rings(instance, component, pml4, next)?;
        let slots = instance.shared_copies.clone();
        let memory = &mut instance.memory;
        // The system events page, read-only, in the last reserved slot.
        if component.events {
            let slot = slots.end - 1;
            if next > slot {
                return Err(LoadError("more dataport pages than reserved".into()));
            }
            copy_frame(slot, self.events_frame, CapRights::read_only(), "CNode_Copy (events page)")?;
            vspace::map_frame(memory, pml4, slot, events::EVENTS_VADDR, CapRights::read_only(), VmAttributes::DEFAULT)?;
        }
        // The progress page, read-write, in the last but one reserved slot.
        if let Some(frame) = self.progress_frames.get(instance.index).copied().flatten() {
            let slot = slots.end - 2;
            if next > slot {
                return Err(LoadError("more dataport pages than reserved".into()));
            }
            copy_frame(slot, frame, CapRights::read_write(), "CNode_Copy (progress page)")?;
            let vaddr = component_runtime::liveness::PROGRESS_VADDR;
            vspace::map_frame(memory, pml4, slot, vaddr, CapRights::read_write(), VmAttributes::DEFAULT)?;
        }
        Ok(())
    }

    /// The dataports, from the first reserved slot; returns the next free
    /// one.
    fn map_dataports(&self, instance: &mut Instance, component: &Component, pml4: CPtr) -> Result<CPtr, LoadError> {
        let mut copy_slot = instance.shared_copies.start;
        for mapping in &component.mappings {
            let frames = match &self.objects[mapping.object.0 as usize] {
                Loaded::Frames(frames) => frames,
                // Registers of another model: left unmapped (the driver
                // sees no dataport record for it).
                Loaded::Unfit => continue,
                _ => return Err(LoadError(format!("mapping of a non-frame object #{}", mapping.object.0))),
            };
            let rights = match mapping.access {
                Access::ReadOnly => CapRights::read_only(),
                Access::ReadWrite => CapRights::read_write(),
            };
            let attrs = if mapping.cached { VmAttributes::DEFAULT } else { VmAttributes::CacheDisabled };
            for (i, frame) in frames.caps.iter().enumerate() {
                if copy_slot >= instance.shared_copies.end {
                    return Err(LoadError("more dataport pages than reserved".into()));
                }
                copy_frame(copy_slot, *frame, rights, "CNode_Copy (dataport frame)")?;
                let vaddr = mapping.vaddr + i as u64 * frames.frame_size;
                let memory = &mut instance.memory;
                if frames.frame_size == LARGE_PAGE_SIZE {
                    vspace::map_large_frame(memory, pml4, copy_slot, vaddr, rights, attrs)?;
                } else {
                    vspace::map_frame(memory, pml4, copy_slot, vaddr, rights, attrs)?;
                }
                copy_slot += 1;
            }
        }
        Ok(copy_slot)
    }

    /// The log rings, from reserved slot `next` on: the component's own
    /// read-write, the server's read-only. Returns the next free slot.
    fn map_log_rings(
        &self,
        instance: &mut Instance,
        component: &Component,
        pml4: CPtr,
        mut next: CPtr,
    ) -> Result<CPtr, LoadError> {
        let own = component.log_ring.as_ref().map(|end| self.ring_frame(end.ring)).transpose()?;
        let server = self.server_rings(component)?;
        let mapped_rings = own
            .map(|f| (f, logring::LOG_RING_VADDR, CapRights::read_write()))
            .into_iter()
            .chain(server.iter().map(|r| (r.frame, r.vaddr, CapRights::read_only())));
        for (frame, vaddr, rights) in mapped_rings {
            if next + 1 >= instance.shared_copies.end {
                return Err(LoadError("more log ring pages than reserved".into()));
            }
            copy_frame(next, frame, rights, "CNode_Copy (log ring)")?;
            vspace::map_frame(&mut instance.memory, pml4, next, vaddr, rights, VmAttributes::DEFAULT)?;
            next += 1;
        }
        Ok(next)
    }

    /// Phase 3, the CSpace: exactly the spec's capabilities, plus the fault
    /// endpoint in the last slot, badged with the instance's number.
    fn install_caps(&self, instance: &Instance, component: &Component, parts: &Parts) -> Result<(), LoadError> {
        let (cnode, bits, fault_slot) = (parts.cnode, parts.cnode_bits as u8, parts.fault_slot);
        for cap in &component.caps {
            if cap.slot == 0 || cap.slot >= fault_slot {
                return Err(LoadError(format!("capability slot {} outside 1..{}", cap.slot, fault_slot)));
            }
            // seL4 5.0 has no separate grant-reply right: a Call sets up the
            // reply capability only if the caller's endpoint capability can
            // grant, so grant-reply is given as grant.
            let rights = CapRights::new(cap.rights.grant || cap.rights.grant_reply, cap.rights.read, cap.rights.write);
            let result = match &self.objects[cap.object.0 as usize] {
                &Loaded::Endpoint(src) | &Loaded::Notification(src) => sel4::cnode_mint(
                    cnode,
                    cap.slot,
                    bits,
                    sel4::CAP_INIT_THREAD_CNODE,
                    src,
                    64,
                    rights,
                    CapData::badge(cap.badge).into_word(),
                ),
                // Already restricted to their range/IRQ: copy as they are
                // (minting an I/O port capability would change its range).
                &Loaded::IrqHandler(src) | &Loaded::IoPorts(src) => {
                    sel4::cnode_copy(cnode, cap.slot, bits, sel4::CAP_INIT_THREAD_CNODE, src, 64, CapRights::all())
                }
                Loaded::Frames(_) => {
                    return Err(LoadError(format!("slot {}: frames are mapped, not granted", cap.slot)))
                }
                Loaded::Absent => return Err(LoadError(format!("slot {}: its device was not found", cap.slot))),
                // Another model's registers: the slot stays empty.
                Loaded::Unfit => continue,
            };
            invoke("CNode_Mint (component capability)", result)?;
        }
        invoke(
            "CNode_Mint (fault endpoint)",
            sel4::cnode_mint(
                cnode,
                fault_slot,
                bits,
                sel4::CAP_INIT_THREAD_CNODE,
                self.fault_endpoint,
                64,
                CapRights::new(true, false, true),
                CapData::badge(instance.index as Word + 1).into_word(),
            ),
        )
    }

    /// Phase 5: starts the thread at the image's entry point, with the
    /// stack and the start-info page its runtime expects.
    fn start(
        &self,
        instance: &mut Instance,
        component: &Component,
        parts: &Parts,
        entry: u64,
    ) -> Result<(), LoadError> {
        let regs =
            sel4::UserContext { rip: entry, rsp: start::STACK_TOP, rdi: start::START_INFO_VADDR, ..Default::default() };
        let tcb = parts.tcb;
        invoke("TCB_WriteRegisters", sel4::tcb_write_registers(tcb, true, 0, sel4::UserContext::WORDS, &regs))?;
        instance.tcb = Some(tcb);
        if component.log_server.is_some() {
            // The server runs: the root task's lines go through it again.
            component_runtime::console::set_log_ring_enabled(self.root_ring.is_some());
        }
        Ok(())
    }

    /// The frame capability of a log ring object.
    fn ring_frame(&self, ring: system_spec::ObjectId) -> Result<CPtr, LoadError> {
        match self.objects.get(ring.0 as usize) {
            Some(Loaded::Frames(f)) if f.caps.len() == 1 => Ok(f.caps[0]),
            _ => Err(LoadError(format!("log ring #{} is not a one-page frame object", ring.0))),
        }
    }
}

/// Phase 1: the VSpace root (with an ASID), the CNode and the TCB.
fn create_objects(memory: &mut ComponentMemory, component: &Component) -> Result<Parts, LoadError> {
    let pml4 = memory.object(ObjectType::X64Pml4, 0)?;
    invoke("ASIDPool_Assign", sel4::x86_asid_pool_assign(sel4::CAP_INIT_THREAD_ASID_POOL, pml4))?;
    let cnode_bits = component.cnode_size_bits as Word;
    let cnode = memory.object(ObjectType::CapTable, cnode_bits)?;
    let tcb = memory.object(ObjectType::Tcb, 0)?;
    // The fault endpoint goes in the CNode's last slot (`install_caps`).
    let fault_slot = (1u64 << component.cnode_size_bits) - 1;
    Ok(Parts { pml4, cnode, cnode_bits, tcb, fault_slot })
}

/// Phase 4: the thread's CSpace, VSpace, IPC buffer, priorities and fault
/// endpoint (and its name, on a debug kernel).
fn configure_thread(parts: &Parts, component: &Component, ipc_buffer: CPtr) -> Result<(), LoadError> {
    invoke(
        "TCB_Configure",
        sel4::tcb_configure(
            parts.tcb,
            parts.fault_slot,
            sel4::PrioProps::new(component.max_priority, component.priority),
            parts.cnode,
            // The guard makes the CNode resolve a whole 64-bit CPtr, so a
            // slot number is its own CPtr in the component.
            CapData::guard(0, 64 - parts.cnode_bits).into_word(),
            parts.pml4,
            0,
            start::IPC_BUFFER_VADDR,
            ipc_buffer,
        ),
    )?;
    #[cfg(feature = "debug")]
    sel4::debug_name_thread(parts.tcb, &component.name);
    Ok(())
}

/// A fresh (zeroed) page of the private untyped, mapped at `vaddr`.
fn map_fresh_page(memory: &mut ComponentMemory, pml4: CPtr, vaddr: u64, rights: CapRights) -> Result<CPtr, LoadError> {
    let frame = memory.object(ObjectType::X86_4K, 0)?;
    vspace::map_frame(memory, pml4, frame, vaddr, rights, VmAttributes::DEFAULT)?;
    Ok(frame)
}

/// Copies the root task's frame capability `frame` into its slot `slot`
/// with `rights` (the copy is what gets mapped).
fn copy_frame(slot: CPtr, frame: CPtr, rights: CapRights, what: &str) -> Result<(), LoadError> {
    invoke(
        what,
        sel4::cnode_copy(sel4::CAP_INIT_THREAD_CNODE, slot, 64, sel4::CAP_INIT_THREAD_CNODE, frame, 64, rights),
    )
}
