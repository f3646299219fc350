//! The system loader: carries out the static system spec the CAmkES compiler
//! wrote, the way a capDL loader does.
//!
//! Global objects (endpoints, notifications, dataport frames, device
//! frames, IRQ handlers, I/O port ranges) are made once from the boot
//! untypeds. Each component gets a private untyped, from which its CNode,
//! VSpace (PML4 and paging structures), ELF pages, stack, IPC buffer,
//! start-info page and TCB are made. Its CSpace holds exactly the
//! capabilities the spec grants plus its fault endpoint; dataports are
//! mapped with the rights of its end. Restarting a component revokes its
//! private untyped (destroying all of the above at once), deletes the
//! loader's copies of the shared frames it had mapped, and builds it again
//! from the spec.

mod device;
mod elf;

use crate::objects::{AllocError, ComponentMemory, ObjectAllocator, Retype};
use crate::vspace::{self, MapError, Scratch};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use component_runtime::events::{self, EventsPage, EVENTS_MAGIC};
use component_runtime::logring::{self, Ring};
use component_runtime::start::{self, StartInfo};
use sel4::{CPtr, CapData, CapRights, ObjectType, VmAttributes, Word};
use system_spec::{Access, Component, ObjectKind, SystemSpec, LARGE_PAGE_SIZE};

/// Lowest and highest address a component's ELF segments may use: below
/// them is the null guard, above them the dataports.
const IMAGE_LOW: u64 = 0x1000;
const IMAGE_HIGH: u64 = system_spec::DATAPORT_BASE;

/// `CONFIG_RETYPE_FAN_OUT_LIMIT` (kernel-config/common.h): the most objects
/// one Untyped_Retype may make.
const RETYPE_FAN_OUT_LIMIT: u64 = 256;

/// A global object, as made for the spec.
enum Loaded {
    Endpoint(CPtr),
    Notification(CPtr),
    /// Frames of a dataport (RAM, zeroed) or a device region, in order.
    Frames(Frames),
    IrqHandler(CPtr),
    IoPorts(CPtr),
}

/// The frame capabilities backing one dataport, in address order.
struct Frames {
    caps: Vec<CPtr>,
    /// Bytes per frame: `system_spec::frame_size` of the dataport (RAM), or
    /// 4 KiB (device regions).
    frame_size: u64,
}

/// Why something could not be built.
#[derive(Debug)]
pub struct LoadError(pub String);

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<AllocError> for LoadError {
    fn from(e: AllocError) -> Self {
        LoadError(format!("{e}"))
    }
}

impl From<MapError> for LoadError {
    fn from(e: MapError) -> Self {
        LoadError(format!("{e}"))
    }
}

fn invoke(what: &str, result: sel4::Result<()>) -> Result<(), LoadError> {
    result.map_err(|e| LoadError(format!("{what}: {e:?}")))
}

/// A component as the supervisor tracks it.
pub struct Instance {
    /// Index in the spec's component list (also its fault badge minus one).
    pub index: usize,
    /// The instance name from the assembly.
    pub name: String,
    /// May the supervisor restart it after a fault?
    pub restartable: bool,
    /// How many times it has been restarted.
    pub restarts: u64,
    /// Who asked for the restart that is pending, if another component did.
    pub restart_requester: Option<String>,
    /// Its TCB (in the loader's CSpace), while it exists.
    pub tcb: Option<CPtr>,
    memory: ComponentMemory,
    /// Loader slots holding the frame capabilities mapped into this
    /// component's dataports (and, last, the events page); derived from the
    /// global frames, so revoking the private untyped does not delete them:
    /// `destroy` does.
    shared_copies: core::ops::Range<CPtr>,
}

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

/// The loaded system: global objects and every instance.
pub struct System {
    spec: SystemSpec,
    elves: &'static [(&'static str, &'static [u8])],
    objects: Vec<Loaded>,
    /// The supervisor's fault endpoint (unbadged, full rights).
    pub fault_endpoint: CPtr,
    /// Every component, in spec order.
    pub instances: Vec<Instance>,
    scratch: Scratch,
    debug_kernel: bool,
    /// The system events page's frame (the root task's own mapping).
    events_frame: CPtr,
    /// Per spec component: the supervisor's capability to its events
    /// notification, badged `SYSTEM_EVENT_BADGE`.
    events_caps: Vec<Option<CPtr>>,
    /// The root task's log ring frame, when the system has a log server.
    root_ring: Option<CPtr>,
    /// Per spec component: the frame of its progress page, if the assembly
    /// watches it (`hang_cpu_ms`); made once, kept across restarts.
    progress_frames: Vec<Option<CPtr>>,
}

/// Lets every component built so far run until it blocks, then takes the
/// CPU back (the root task runs at the top priority, 255; at priority 1
/// it runs only when they all wait). So each component initialises right
/// after it is built, while the next ones load, instead of all of them
/// after the last: device start-up delays overlap the loading. The one
/// that matters: QEMU's e1000 holds every received frame for one second
/// after the driver enables its receiver (`set_rx_control` arms its
/// `flush_queue_timer`), so the sooner netdrv runs, the sooner the first
/// request is answered. A component that faults meanwhile waits on the
/// fault endpoint until the supervisor runs.
fn let_built_components_run() {
    let _ = sel4::tcb_set_priority(sel4::CAP_INIT_THREAD_TCB, 1);
    let _ = sel4::tcb_set_priority(sel4::CAP_INIT_THREAD_TCB, 255);
}

impl System {
    /// Creates the global objects of `spec` and builds every component.
    /// A component that cannot be built is reported and left out; the
    /// others still start.
    pub fn boot(
        global: &mut ObjectAllocator<'_>,
        spec: SystemSpec,
        elves: &'static [(&'static str, &'static [u8])],
        debug_kernel: bool,
    ) -> Result<System, LoadError> {
        let scratch = Scratch::new(global)?;
        let fault_endpoint = global.object(ObjectType::Endpoint, 0)?;
        let mut devices = device::DeviceMemory::new(global.bootinfo());
        let mut objects = Vec::with_capacity(spec.objects.len());
        for object in &spec.objects {
            let loaded = make_object(global, &mut devices, &objects, &object.kind)
                .map_err(|e| LoadError(format!("object {}: {e}", object.name)))?;
            objects.push(loaded);
        }
        // The system events page: one frame, read-write here, read-only in
        // every subscriber (component_runtime::events).
        let events_frame = global.object(ObjectType::X86_4K, 0)?;
        vspace::map_frame(
            global,
            sel4::CAP_INIT_THREAD_VSPACE,
            events_frame,
            EVENTS_ROOT_VADDR,
            CapRights::read_write(),
            VmAttributes::DEFAULT,
        )?;
        {
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
                // SAFETY: nothing reads the names before the components
                // start; the page is ours (mapped read-write above).
                unsafe {
                    core::ptr::copy_nonoverlapping(c.name.as_ptr(), r.name.as_ptr() as *mut u8, len);
                }
                r.name_len.store(len as u64, core::sync::atomic::Ordering::Release);
            }
            page.count.store(n as u64, core::sync::atomic::Ordering::Release);
            page.magic.store(EVENTS_MAGIC, core::sync::atomic::Ordering::Release);
        }
        let mut events_caps = Vec::with_capacity(spec.components.len());
        for c in &spec.components {
            let cap = match c.events_notification.map(|o| &objects[o.0 as usize]) {
                Some(&Loaded::Notification(n)) => {
                    let slot = global.slot()?;
                    invoke(
                        "CNode_Mint (events notification)",
                        sel4::cnode_mint(
                            sel4::CAP_INIT_THREAD_CNODE,
                            slot,
                            64,
                            sel4::CAP_INIT_THREAD_CNODE,
                            n,
                            64,
                            CapRights::new(false, false, true),
                            CapData::badge(system_spec::SYSTEM_EVENT_BADGE).into_word(),
                        ),
                    )?;
                    Some(slot)
                }
                _ => None,
            };
            events_caps.push(cap);
        }
        // The root task's log ring and its capability to signal the server.
        let mut root_ring = None;
        if let Some(server) = spec.components.iter().find_map(|c| c.log_server.as_ref()) {
            let wake = spec.components.iter().find(|c| c.log_server.is_some()).and_then(|c| {
                c.caps.iter().find(|cap| cap.slot == server.wait_slot).map(|cap| &objects[cap.object.0 as usize])
            });
            if let Some(&Loaded::Notification(n)) = wake {
                let frame = global.object(ObjectType::X86_4K, 0)?;
                vspace::map_frame(
                    global,
                    sel4::CAP_INIT_THREAD_VSPACE,
                    frame,
                    LOG_RING_ROOT_VADDR,
                    CapRights::read_write(),
                    VmAttributes::DEFAULT,
                )?;
                let signal = global.slot()?;
                invoke(
                    "CNode_Mint (log server notification)",
                    sel4::cnode_mint(
                        sel4::CAP_INIT_THREAD_CNODE,
                        signal,
                        64,
                        sel4::CAP_INIT_THREAD_CNODE,
                        n,
                        64,
                        CapRights::new(false, false, true),
                        CapData::badge(1).into_word(),
                    ),
                )?;
                // SAFETY: mapped read-write just above, never unmapped; a
                // fresh frame is zeroed, which is an empty ring.
                let ring = unsafe { &*(LOG_RING_ROOT_VADDR as *const Ring) };
                component_runtime::console::init_log_ring(ring, signal, true);
                // Off until the server is built (`build` turns it on).
                component_runtime::console::set_log_ring_enabled(false);
                root_ring = Some(frame);
            }
        }
        // Progress pages of the watched components (component_runtime::liveness).
        let mut progress_frames = Vec::with_capacity(spec.components.len());
        for (i, c) in spec.components.iter().enumerate() {
            if c.hang_cpu_ms == 0 || i >= MAX_PROGRESS_PAGES {
                progress_frames.push(None);
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
            progress_frames.push(Some(frame));
        }
        let mut system = System {
            progress_frames,
            spec,
            elves,
            objects,
            fault_endpoint,
            instances: Vec::new(),
            scratch,
            debug_kernel,
            events_frame,
            events_caps,
            root_ring,
        };
        for index in 0..system.spec.components.len() {
            let component = &system.spec.components[index];
            let name = component.name.clone();
            let restartable = component.restartable;
            let memory = match system.reserve(global, index) {
                Ok(memory) => memory,
                Err(e) => {
                    component_runtime::error!("component {name}: cannot reserve memory: {e}");
                    continue;
                }
            };
            system.instances.push(Instance {
                index,
                name,
                restartable,
                restarts: 0,
                restart_requester: None,
                tcb: None,
                memory: memory.0,
                shared_copies: memory.1,
            });
        }
        // Highest priority first, each run until it blocks before the next
        // is built (`let_built_components_run`): a component finds what the
        // ones above it set up (shared regions are initialised by the side
        // that runs above) as when all of them started at once.
        let mut order: Vec<usize> = (0..system.instances.len()).collect();
        order.sort_by_key(|&p| core::cmp::Reverse(system.spec.components[system.instances[p].index].priority));
        for position in order {
            let mut instance = core::mem::replace(&mut system.instances[position], placeholder());
            match system.build(&mut instance) {
                Ok(()) => let_built_components_run(),
                Err(e) => component_runtime::error!("component {}: not started: {e}", instance.name),
            }
            system.instances[position] = instance;
        }
        Ok(system)
    }

    /// Destroys `instance` and builds it again from the spec.
    pub fn restart(&mut self, position: usize) -> Result<(), LoadError> {
        let mut instance = core::mem::replace(&mut self.instances[position], placeholder());
        let result = self.destroy(&mut instance).and_then(|()| {
            instance.restarts += 1;
            self.build(&mut instance)
        });
        self.instances[position] = instance;
        result
    }

    /// The spec's description of the instance at `position`.
    pub fn component(&self, position: usize) -> &Component {
        &self.spec.components[self.instances[position].index]
    }

    /// The instances that share a dataport with the one at `position` and
    /// subscribe to system events: who must hear of its death.
    pub fn event_peers(&self, position: usize) -> Vec<usize> {
        let me = self.component(position);
        (0..self.instances.len())
            .filter(|&p| p != position)
            .filter(|&p| {
                let other = self.component(p);
                other.events
                    && other.mappings.iter().any(|m| {
                        matches!(self.objects[m.object.0 as usize], Loaded::Frames(_))
                            && me.mappings.iter().any(|n| n.object == m.object)
                    })
            })
            .collect()
    }

    /// The instances that call an endpoint the one at `position` serves
    /// (they hold it with send rights, it with receive rights): the RPC
    /// clients of that server.
    pub fn rpc_callers(&self, position: usize) -> Vec<usize> {
        let me = self.component(position);
        let served: Vec<_> = me
            .caps
            .iter()
            .filter(|c| c.rights.read && matches!(self.objects[c.object.0 as usize], Loaded::Endpoint(_)))
            .map(|c| c.object)
            .collect();
        (0..self.instances.len())
            .filter(|&p| p != position)
            .filter(|&p| self.component(p).caps.iter().any(|c| c.rights.write && served.contains(&c.object)))
            .collect()
    }

    /// Signals the system-events notification of the instance at
    /// `position`, if it subscribes and runs.
    pub fn signal_events(&mut self, position: usize) {
        if self.instances[position].tcb.is_none() {
            return;
        }
        let Some(slot) = self.events_caps[self.instances[position].index] else { return };
        sel4::signal(slot);
    }

    /// Whether the assembly lets the instance at `requester` ask for a
    /// restart of the one at `target` (`may_restart`, in the spec).
    pub fn may_restart(&self, requester: usize, target: usize) -> bool {
        let (r, t) = (self.instances[requester].index, self.instances[target].index);
        self.spec.components[r].may_restart.contains(&(t as u32))
    }

    /// Bytes of its private untyped the instance at `position` is built from.
    pub fn memory_used(&self, position: usize) -> u64 {
        self.instances[position].memory.used_bytes()
    }

    /// Stops `instance` for good (it stays in the list, without a thread).
    pub fn stop(&mut self, position: usize) -> Result<(), LoadError> {
        let mut instance = core::mem::replace(&mut self.instances[position], placeholder());
        let result = self.destroy(&mut instance);
        self.instances[position] = instance;
        result
    }

    /// Reserves a component's private untyped (sized for its image,
    /// stack and paging structures) and its loader slots.
    fn reserve(
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

    fn image(&self, component: &Component) -> Result<elf::Image<'static>, LoadError> {
        let (_, data) = self
            .elves
            .iter()
            .find(|(name, _)| *name == component.elf)
            .ok_or_else(|| LoadError(format!("no ELF '{}' in this image", component.elf)))?;
        elf::Image::parse(data, IMAGE_LOW, IMAGE_HIGH).map_err(|e| LoadError(format!("ELF '{}': {e}", component.elf)))
    }

    /// Builds `instance` from the spec and starts its thread.
    fn build(&mut self, instance: &mut Instance) -> Result<(), LoadError> {
        let component = self.spec.components[instance.index].clone();
        let image = self.image(&component)?;
        let memory = &mut instance.memory;

        let pml4 = memory.object(ObjectType::X64Pml4, 0)?;
        invoke("ASIDPool_Assign", sel4::x86_asid_pool_assign(sel4::CAP_INIT_THREAD_ASID_POOL, pml4))?;
        let cnode_bits = component.cnode_size_bits as Word;
        let cnode = memory.object(ObjectType::CapTable, cnode_bits)?;

        // The image: fresh frames filled through the scratch window, then
        // mapped with the segment's rights.
        for page in &image.pages {
            let frame = memory.object(ObjectType::X86_4K, 0)?;
            self.scratch.fill(frame, |bytes| image.fill_page(page.vaddr, bytes))?;
            let rights = if page.writable { CapRights::read_write() } else { CapRights::read_only() };
            vspace::map_frame(memory, pml4, frame, page.vaddr, rights, VmAttributes::DEFAULT)?;
        }

        // Stack, with the page below it left unmapped as a guard.
        let stack_pages = component.stack_size.div_ceil(elf::PAGE);
        for i in 1..=stack_pages {
            let frame = memory.object(ObjectType::X86_4K, 0)?;
            vspace::map_frame(
                memory,
                pml4,
                frame,
                start::STACK_TOP - i * elf::PAGE,
                CapRights::read_write(),
                VmAttributes::DEFAULT,
            )?;
        }

        let ipc_buffer = memory.object(ObjectType::X86_4K, 0)?;
        vspace::map_frame(
            memory,
            pml4,
            ipc_buffer,
            start::IPC_BUFFER_VADDR,
            CapRights::read_write(),
            VmAttributes::DEFAULT,
        )?;

        let start_page = memory.object(ObjectType::X86_4K, 0)?;
        let flags = if self.debug_kernel { start::START_FLAG_DEBUG_KERNEL } else { 0 };
        // The fault endpoint goes in the CNode's last slot (see below).
        let fault_slot = (1u64 << component.cnode_size_bits) - 1;
        let flags = if component.events { flags | start::START_FLAG_EVENTS } else { flags };
        let mut info = StartInfo::new(&component.name, instance.index as u64, instance.restarts, flags, fault_slot);
        info.seed = random_seed();
        info.tsc_mhz = component_runtime::time::measured_tsc_mhz().unwrap_or(0);
        let progress_frame = self.progress_frames.get(instance.index).copied().flatten();
        if progress_frame.is_some() {
            info.flags |= start::START_FLAG_PROGRESS;
        }
        if let Some(end) = &component.log_ring {
            info.flags |= start::START_FLAG_LOG_RING;
            info.log_signal_slot = end.signal_slot;
        }
        // The server's rings, in spec order, then the root task's.
        let mut rings: Vec<(CPtr, u64)> = Vec::new();
        if let Some(server) = &component.log_server {
            info.flags |= start::START_FLAG_LOG_SERVER;
            info.log_wait_slot = server.wait_slot;
            let sources = server.rings.iter().map(|r| (self.ring_frame(r.ring), r.name.as_str()));
            let root = self.root_ring.map(|f| (Ok(f), ""));
            for (i, (frame, name)) in sources.chain(root).enumerate() {
                if i >= start::MAX_LOG_RINGS {
                    return Err(LoadError(format!("more than {} log rings", start::MAX_LOG_RINGS)));
                }
                let vaddr = logring::LOG_RINGS_VADDR + i as u64 * logring::LOG_RINGS_STRIDE;
                info.log_rings[i] = start::LogRingRecord::new(vaddr, name);
                info.log_ring_count = i as u64 + 1;
                rings.push((frame?, vaddr));
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
        self.scratch.fill(start_page, |bytes| {
            // SAFETY: StartInfo is plain old data smaller than a page.
            let raw = unsafe {
                core::slice::from_raw_parts(&info as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>())
            };
            bytes[..raw.len()].copy_from_slice(raw);
        })?;
        vspace::map_frame(
            memory,
            pml4,
            start_page,
            start::START_INFO_VADDR,
            CapRights::read_only(),
            VmAttributes::DEFAULT,
        )?;

        // Dataports: the loader keeps one copy of each frame capability per
        // mapping (x86 seL4 maps a capability once), with the end's rights.
        let mut copy_slot = instance.shared_copies.start;
        for mapping in &component.mappings {
            let Loaded::Frames(frames) = &self.objects[mapping.object.0 as usize] else {
                return Err(LoadError(format!("mapping of a non-frame object #{}", mapping.object.0)));
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
                invoke(
                    "CNode_Copy (dataport frame)",
                    sel4::cnode_copy(
                        sel4::CAP_INIT_THREAD_CNODE,
                        copy_slot,
                        64,
                        sel4::CAP_INIT_THREAD_CNODE,
                        *frame,
                        64,
                        rights,
                    ),
                )?;
                let vaddr = mapping.vaddr + i as u64 * frames.frame_size;
                if frames.frame_size == LARGE_PAGE_SIZE {
                    vspace::map_large_frame(memory, pml4, copy_slot, vaddr, rights, attrs)?;
                } else {
                    vspace::map_frame(memory, pml4, copy_slot, vaddr, rights, attrs)?;
                }
                copy_slot += 1;
            }
        }

        // The log rings: the component's own read-write, the server's
        // read-only.
        let own = component.log_ring.as_ref().map(|end| self.ring_frame(end.ring)).transpose()?;
        let mapped_rings = own
            .map(|f| (f, logring::LOG_RING_VADDR, CapRights::read_write()))
            .into_iter()
            .chain(rings.iter().map(|&(f, vaddr)| (f, vaddr, CapRights::read_only())));
        for (frame, vaddr, rights) in mapped_rings {
            if copy_slot + 1 >= instance.shared_copies.end {
                return Err(LoadError("more log ring pages than reserved".into()));
            }
            invoke(
                "CNode_Copy (log ring)",
                sel4::cnode_copy(
                    sel4::CAP_INIT_THREAD_CNODE,
                    copy_slot,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    frame,
                    64,
                    rights,
                ),
            )?;
            vspace::map_frame(memory, pml4, copy_slot, vaddr, rights, VmAttributes::DEFAULT)?;
            copy_slot += 1;
        }

        // The system events page, read-only, in the last reserved slot.
        if component.events {
            let slot = instance.shared_copies.end - 1;
            if copy_slot > slot {
                return Err(LoadError("more dataport pages than reserved".into()));
            }
            invoke(
                "CNode_Copy (events page)",
                sel4::cnode_copy(
                    sel4::CAP_INIT_THREAD_CNODE,
                    slot,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    self.events_frame,
                    64,
                    CapRights::read_only(),
                ),
            )?;
            vspace::map_frame(memory, pml4, slot, events::EVENTS_VADDR, CapRights::read_only(), VmAttributes::DEFAULT)?;
        }

        // The progress page, read-write, in the last but one reserved slot.
        if let Some(frame) = progress_frame {
            let slot = instance.shared_copies.end - 2;
            if copy_slot > slot {
                return Err(LoadError("more dataport pages than reserved".into()));
            }
            invoke(
                "CNode_Copy (progress page)",
                sel4::cnode_copy(
                    sel4::CAP_INIT_THREAD_CNODE,
                    slot,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    frame,
                    64,
                    CapRights::read_write(),
                ),
            )?;
            vspace::map_frame(
                memory,
                pml4,
                slot,
                component_runtime::liveness::PROGRESS_VADDR,
                CapRights::read_write(),
                VmAttributes::DEFAULT,
            )?;
        }

        // The CSpace: exactly the spec's capabilities, plus the fault
        // endpoint in the last slot, badged with the instance's number.
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
                    cnode_bits as u8,
                    sel4::CAP_INIT_THREAD_CNODE,
                    src,
                    64,
                    rights,
                    CapData::badge(cap.badge).into_word(),
                ),
                // Already restricted to their range/IRQ: copy as they are
                // (minting an I/O port capability would change its range).
                &Loaded::IrqHandler(src) | &Loaded::IoPorts(src) => sel4::cnode_copy(
                    cnode,
                    cap.slot,
                    cnode_bits as u8,
                    sel4::CAP_INIT_THREAD_CNODE,
                    src,
                    64,
                    CapRights::all(),
                ),
                Loaded::Frames(_) => {
                    return Err(LoadError(format!("slot {}: frames are mapped, not granted", cap.slot)))
                }
            };
            invoke("CNode_Mint (component capability)", result)?;
        }
        invoke(
            "CNode_Mint (fault endpoint)",
            sel4::cnode_mint(
                cnode,
                fault_slot,
                cnode_bits as u8,
                sel4::CAP_INIT_THREAD_CNODE,
                self.fault_endpoint,
                64,
                CapRights::new(true, false, true),
                CapData::badge(instance.index as Word + 1).into_word(),
            ),
        )?;

        let tcb = memory.object(ObjectType::Tcb, 0)?;
        invoke(
            "TCB_Configure",
            sel4::tcb_configure(
                tcb,
                fault_slot,
                sel4::PrioProps::new(component.max_priority, component.priority),
                cnode,
                // The guard makes the CNode resolve a whole 64-bit CPtr, so a
                // slot number is its own CPtr in the component.
                CapData::guard(0, 64 - cnode_bits).into_word(),
                pml4,
                0,
                start::IPC_BUFFER_VADDR,
                ipc_buffer,
            ),
        )?;
        #[cfg(feature = "debug")]
        sel4::debug_name_thread(tcb, &component.name);
        let regs = sel4::UserContext {
            rip: image.entry,
            rsp: start::STACK_TOP,
            rdi: start::START_INFO_VADDR,
            ..Default::default()
        };
        invoke("TCB_WriteRegisters", sel4::tcb_write_registers(tcb, true, 0, sel4::UserContext::WORDS, &regs))?;
        instance.tcb = Some(tcb);
        if component.log_server.is_some() {
            // The server runs: the root task's lines go through it again.
            component_runtime::console::set_log_ring_enabled(self.root_ring.is_some());
        }
        Ok(())
    }

    /// The address of the endless loop every component's runtime has just
    /// before its entry point (`component_runtime::start::HANG_BYTES`), if
    /// the image has it there.
    #[cfg(fault_injection)]
    pub fn hang_address(&self, position: usize) -> Option<u64> {
        let image = self.image(self.component(position)).ok()?;
        let at = image.entry.checked_sub(start::HANG_BEFORE_ENTRY)?;
        let bytes = start::HANG_BYTES;
        let found = image.segments.iter().find_map(|s| {
            let offset = at.checked_sub(s.vaddr)? as usize;
            s.file.get(offset..offset + bytes.len())
        })?;
        (found == bytes).then_some(at)
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
        Some(counter.load(core::sync::atomic::Ordering::Acquire))
    }

    /// Whether the instance at `position` is the log server (the
    /// supervisor prints directly while it is dead).
    pub fn is_log_server(&self, position: usize) -> bool {
        self.component(position).log_server.is_some()
    }

    /// The frame capability of a log ring object.
    fn ring_frame(&self, ring: system_spec::ObjectId) -> Result<CPtr, LoadError> {
        match self.objects.get(ring.0 as usize) {
            Some(Loaded::Frames(f)) if f.caps.len() == 1 => Ok(f.caps[0]),
            _ => Err(LoadError(format!("log ring #{} is not a one-page frame object", ring.0))),
        }
    }

    /// Destroys everything `instance` was built from; global objects stay.
    fn destroy(&mut self, instance: &mut Instance) -> Result<(), LoadError> {
        if let Some(tcb) = instance.tcb.take() {
            // Stop it first, so it cannot run between the steps below.
            let _ = sel4::tcb_suspend(tcb);
        }
        for slot in instance.shared_copies.clone() {
            // Deleting the copy unmaps it; empty slots are fine.
            invoke("CNode_Delete (dataport frame)", sel4::cnode_delete(sel4::CAP_INIT_THREAD_CNODE, slot, 64))?;
        }
        invoke("CNode_Revoke (private untyped)", instance.memory.reset())
    }
}

/// The system events page, as the root task maps it.
pub fn events_page() -> &'static EventsPage {
    // SAFETY: mapped read-write at EVENTS_ROOT_VADDR by `System::boot`
    // before any use and never unmapped; EventsPage is atomics and bytes.
    unsafe { &*(EVENTS_ROOT_VADDR as *const EventsPage) }
}

/// 64 random bits for a new incarnation: RDRAND where the CPU has it,
/// mixed with the TSC (which alone is only hard to predict, not random).
fn random_seed() -> u64 {
    let tsc = component_runtime::time::rdtsc();
    let mut x = tsc.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if let Some(r) = rdrand() {
        x ^= r;
    }
    x ^ x >> 31
}

#[cfg(target_arch = "x86_64")]
fn rdrand() -> Option<u64> {
    // CPUID.1:ECX bit 30 says whether RDRAND exists.
    let leaf = core::arch::x86_64::__cpuid(1);
    if leaf.ecx & (1 << 30) == 0 {
        return None;
    }
    for _ in 0..10 {
        let (value, ok): (u64, u8);
        // SAFETY: RDRAND exists (checked above); it only writes the registers.
        unsafe {
            core::arch::asm!("rdrand {v}", "setc {ok}", v = out(reg) value, ok = out(reg_byte) ok, options(nomem, nostack));
        }
        if ok == 1 {
            return Some(value);
        }
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn rdrand() -> Option<u64> {
    None
}

fn placeholder() -> Instance {
    Instance {
        index: usize::MAX,
        name: String::new(),
        restartable: false,
        restarts: 0,
        restart_requester: None,
        tcb: None,
        memory: ComponentMemory::new(0, 0..0),
        shared_copies: 0..0,
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
            Some(ObjectKind::DeviceFrames { size, .. }) => size.div_ceil(elf::PAGE),
            _ => 0,
        })
        .sum()
}

/// Makes one global object of the spec.
fn make_object(
    global: &mut ObjectAllocator<'_>,
    devices: &mut device::DeviceMemory<'_>,
    made: &[Loaded],
    kind: &ObjectKind,
) -> Result<Loaded, LoadError> {
    Ok(match kind {
        ObjectKind::Endpoint => Loaded::Endpoint(global.object(ObjectType::Endpoint, 0)?),
        ObjectKind::Notification => Loaded::Notification(global.object(ObjectType::Notification, 0)?),
        ObjectKind::Frames { size } => {
            // One untyped of the next power of two, retyped frame by frame
            // from its start: the dataport is physically contiguous, so a
            // driver can hand a device any address inside it (DMA).
            let frame_size = system_spec::frame_size(*size);
            let (ty, count) = match frame_size {
                LARGE_PAGE_SIZE => (ObjectType::X86LargePage, size / LARGE_PAGE_SIZE),
                _ => (ObjectType::X86_4K, size.div_ceil(elf::PAGE)),
            };
            let bits = (count * frame_size).next_power_of_two().trailing_zeros() as Word;
            let untyped = global.object(ObjectType::Untyped, bits)?;
            let slots = global.slots(count)?;
            // Consecutive slots, so one Retype makes up to the kernel's
            // fan-out limit of frames at a time.
            let mut next = slots.start;
            while next < slots.end {
                let batch = (slots.end - next).min(RETYPE_FAN_OUT_LIMIT);
                sel4::untyped_retype(untyped, ty, 0, sel4::CAP_INIT_THREAD_CNODE, 0, 0, next, batch)
                    .map_err(|e| LoadError(format!("dataport frames: {e:?}")))?;
                next += batch;
            }
            Loaded::Frames(Frames { caps: slots.collect(), frame_size })
        }
        ObjectKind::DeviceFrames { paddr, size } => {
            Loaded::Frames(Frames { caps: devices.frames(global, *paddr, *size)?, frame_size: elf::PAGE })
        }
        ObjectKind::IoApicIrq(irq) => {
            let Some(Loaded::Notification(notification)) = made.get(irq.notification.0 as usize) else {
                return Err(LoadError(format!(
                    "IRQ notification #{} is not a notification made before it",
                    irq.notification.0
                )));
            };
            let handler = global.slot()?;
            invoke(
                "IRQControl_GetIOAPIC",
                sel4::irq_control_get_ioapic(
                    sel4::CAP_IRQ_CONTROL,
                    sel4::CAP_INIT_THREAD_CNODE,
                    handler,
                    64,
                    irq.ioapic as Word,
                    irq.pin as Word,
                    irq.level_triggered as Word,
                    irq.active_low as Word,
                    irq.vector as Word,
                ),
            )?;
            // The kernel signals the notification with the badge of the
            // capability bound here. An unbadged one would deliver badge 0,
            // which a consumer's seL4_Poll cannot tell from "nothing
            // arrived" (and seL4_Wait returns 0): bind a copy badged as the
            // spec says (1, or its own bit on a shared notification).
            let badged = global.slot()?;
            invoke(
                "CNode_Mint (IRQ notification, badged)",
                sel4::cnode_mint(
                    sel4::CAP_INIT_THREAD_CNODE,
                    badged,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    *notification,
                    64,
                    CapRights::new(false, false, true),
                    CapData::badge(irq.badge as Word).into_word(),
                ),
            )?;
            invoke("IRQHandler_SetNotification", sel4::irq_handler_set_notification(handler, badged))?;
            Loaded::IrqHandler(handler)
        }
        ObjectKind::IoPorts { first, last } => {
            let slot = global.slot()?;
            invoke(
                "CNode_Mint (I/O ports)",
                sel4::cnode_mint(
                    sel4::CAP_INIT_THREAD_CNODE,
                    slot,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    sel4::CAP_IO_PORT,
                    64,
                    CapRights::all(),
                    CapData::io_port_range(*first, *last).into_word(),
                ),
            )?;
            Loaded::IoPorts(slot)
        }
    })
}
