//! The pages the root task keeps mapped for itself and shares with the
//! components, made once at boot: the system events page it writes as the
//! supervisor, its own log ring, and the progress pages of the components
//! liveness watches; and its badged capabilities to signal the events
//! notifications of the subscribers.

use super::globals::Loaded;
use super::{elf, invoke, LoadError, System};
use crate::objects::{ObjectAllocator, Retype};
use crate::vspace;
use alloc::vec::Vec;
use component_runtime::events::{self, EventsPage, EVENTS_MAGIC};
use component_runtime::logring::Ring;
use core::sync::atomic::Ordering;
use sel4::{CPtr, CapData, CapRights, ObjectType, VmAttributes};
use system_spec::SystemSpec;

/// Where the root task keeps the system events page mapped (read-write),
/// next to the loader's scratch window (same page table).
const EVENTS_ROOT_VADDR: u64 = crate::vspace::Scratch::VADDR + 0x1000;

/// Where the root task keeps its own log ring (read-write): once the log
/// server runs, the root task's lines go there too, so that they come out
/// whole and in order with the components' (same page table again).
const LOG_RING_ROOT_VADDR: u64 = crate::vspace::Scratch::VADDR + 0x2000;

/// Where the root task maps the progress pages of watched components
/// (read-only), one page per spec index (same page table again).
const PROGRESS_ROOT_VADDR: u64 = crate::vspace::Scratch::VADDR + 0x10_0000;
/// Most progress pages the root task maps (spec indices beyond are not
/// watched).
const MAX_PROGRESS_PAGES: usize = 128;

/// The system events page, as the root task maps it.
pub fn events_page() -> &'static EventsPage {
    // SAFETY: mapped read-write at EVENTS_ROOT_VADDR by `System::boot`
    // before any use and never unmapped; EventsPage is atomics and bytes.
    unsafe { &*(EVENTS_ROOT_VADDR as *const EventsPage) }
}

/// Makes the system events page (one frame, read-write here, read-only in
/// every subscriber: `component_runtime::events`), writes one named record
/// per component and marks it valid; returns its frame.
pub(super) fn make_events_page(global: &mut ObjectAllocator<'_>, spec: &SystemSpec) -> Result<CPtr, LoadError> {
    let frame = global.object(ObjectType::X86_4K, 0)?;
    vspace::map_frame(
        global,
        sel4::CAP_INIT_THREAD_VSPACE,
        frame,
        EVENTS_ROOT_VADDR,
        CapRights::read_write(),
        VmAttributes::DEFAULT,
    )?;
    let page = events_page();
    let n = spec.components.len().min(events::MAX_COMPONENTS);
    if spec.components.len() > events::MAX_COMPONENTS {
        component_runtime::error!(
            "{} components: only the first {} have system event records",
            spec.components.len(),
            events::MAX_COMPONENTS
        );
    }
    for (i, c) in spec.components.iter().take(n).enumerate() {
        let r = &page.records[i];
        let len = c.name.len().min(events::RECORD_NAME_LEN);
        // SAFETY: nothing reads the names before the components start; the
        // page is ours (mapped read-write above).
        unsafe {
            core::ptr::copy_nonoverlapping(c.name.as_ptr(), r.name.as_ptr() as *mut u8, len);
        }
        r.name_len.store(len as u64, Ordering::Release);
    }
    page.count.store(n as u64, Ordering::Release);
    page.magic.store(EVENTS_MAGIC, Ordering::Release);
    Ok(frame)
}

/// Per spec component: the supervisor's capability to its events
/// notification (badged `SYSTEM_EVENT_BADGE`), if it subscribes.
pub(super) fn events_caps(
    global: &mut ObjectAllocator<'_>,
    spec: &SystemSpec,
    objects: &[Loaded],
) -> Result<Vec<Option<CPtr>>, LoadError> {
    let mut caps = Vec::with_capacity(spec.components.len());
    for c in &spec.components {
        let cap = match c.events_notification.map(|o| &objects[o.0 as usize]) {
            Some(&Loaded::Notification(n)) => {
                Some(mint_signal(global, n, system_spec::SYSTEM_EVENT_BADGE, "CNode_Mint (events notification)")?)
            }
            _ => None,
        };
        caps.push(cap);
    }
    Ok(caps)
}

/// A capability of the root task's to signal notification `n` with `badge`.
fn mint_signal(global: &mut ObjectAllocator<'_>, n: CPtr, badge: u64, what: &str) -> Result<CPtr, LoadError> {
    let slot = global.slot()?;
    invoke(
        what,
        sel4::cnode_mint(
            sel4::CAP_INIT_THREAD_CNODE,
            slot,
            64,
            sel4::CAP_INIT_THREAD_CNODE,
            n,
            64,
            CapRights::new(false, false, true),
            CapData::badge(badge).into_word(),
        ),
    )?;
    Ok(slot)
}

/// The root task's log ring, when the system has a log server: mapped
/// here, set up as the console's ring with a capability to wake the
/// server, and left off until the server is built (`System::build` turns
/// it on). Returns its frame.
pub(super) fn make_root_ring(
    global: &mut ObjectAllocator<'_>,
    spec: &SystemSpec,
    objects: &[Loaded],
) -> Result<Option<CPtr>, LoadError> {
    let Some(server) = spec.components.iter().find(|c| c.log_server.is_some()) else { return Ok(None) };
    let wait_slot = server.log_server.as_ref().map(|s| s.wait_slot);
    let wake = server.caps.iter().find(|cap| Some(cap.slot) == wait_slot).map(|cap| &objects[cap.object.0 as usize]);
    let Some(&Loaded::Notification(n)) = wake else { return Ok(None) };
    let frame = global.object(ObjectType::X86_4K, 0)?;
    vspace::map_frame(
        global,
        sel4::CAP_INIT_THREAD_VSPACE,
        frame,
        LOG_RING_ROOT_VADDR,
        CapRights::read_write(),
        VmAttributes::DEFAULT,
    )?;
    let signal = mint_signal(global, n, 1, "CNode_Mint (log server notification)")?;
    // SAFETY: mapped read-write just above, never unmapped; a fresh frame
    // is zeroed, which is an empty ring.
    let ring = unsafe { &*(LOG_RING_ROOT_VADDR as *const Ring) };
    component_runtime::console::init_log_ring(ring, signal, true);
    component_runtime::console::set_log_ring_enabled(false);
    Ok(Some(frame))
}

/// Per spec component: the frame of its progress page if the assembly
/// watches it (`hang_cpu_ms`: `component_runtime::liveness`), mapped
/// read-only here; made once, kept across restarts.
pub(super) fn make_progress_pages(
    global: &mut ObjectAllocator<'_>,
    spec: &SystemSpec,
) -> Result<Vec<Option<CPtr>>, LoadError> {
    let mut frames = Vec::with_capacity(spec.components.len());
    for (i, c) in spec.components.iter().enumerate() {
        if c.hang_cpu_ms == 0 || i >= MAX_PROGRESS_PAGES {
            frames.push(None);
            continue;
        }
        let frame = global.object(ObjectType::X86_4K, 0)?;
        vspace::map_frame(
            global,
            sel4::CAP_INIT_THREAD_VSPACE,
            frame,
            PROGRESS_ROOT_VADDR + i as u64 * elf::PAGE,
            CapRights::read_only(),
            VmAttributes::DEFAULT,
        )?;
        frames.push(Some(frame));
    }
    Ok(frames)
}

impl System {
    /// Signals the system-events notification of the instance at
    /// `position`, if it subscribes and runs.
    pub fn signal_events(&mut self, position: usize) {
        if self.instances[position].tcb.is_none() {
            return;
        }
        let Some(slot) = self.events_caps[self.instances[position].index] else { return };
        sel4::signal(slot);
    }

    /// The progress counter of the instance at `position`, if the assembly
    /// watches it (component_runtime::liveness). Read on a debug kernel
    /// only: a release kernel has no per-thread CPU time to judge it by.
    #[cfg(feature = "debug")]
    pub fn progress(&self, position: usize) -> Option<u64> {
        let index = self.instances[position].index;
        self.progress_frames.get(index).copied().flatten()?;
        // SAFETY: mapped read-only at this address in `boot` for as long as
        // we run; the first word is the component's AtomicU64 (a component
        // may write anything there, which costs only its own liveness).
        let counter =
            unsafe { &*((PROGRESS_ROOT_VADDR + index as u64 * elf::PAGE) as *const core::sync::atomic::AtomicU64) };
        Some(counter.load(Ordering::Acquire))
    }
}
