//! The system loader: carries out the static system spec the CAmkES compiler
//! wrote, the way a capDL loader does.
//!
//! Global objects (endpoints, notifications, dataport frames, device
//! frames, IRQ handlers, I/O port ranges) are made once from the boot
//! untypeds (`globals`), with the pages the root task shares with the
//! components (`root_pages`). Each component gets a private untyped
//! (`reserve`), from which its CNode, VSpace (PML4 and paging structures),
//! ELF pages, stack, IPC buffer, start-info page and TCB are made
//! (`build`, in capDL's phases). Its CSpace holds exactly the capabilities
//! the spec grants plus its fault endpoint; dataports are mapped with the
//! rights of its end. Restarting a component revokes its private untyped
//! (destroying all of the above at once), deletes the loader's copies of
//! the shared frames it had mapped, and builds it again from the spec.
//! What the supervisor asks of the spec (who hears of a death, who calls
//! whom, who may restart whom) is in `peers`.

mod build;
mod device;
mod elf;
mod globals;
mod peers;
mod reserve;
mod root_pages;
mod seed;

pub use root_pages::events_page;

use crate::discovery::Discovery;
use crate::objects::{AllocError, ComponentMemory, ObjectAllocator, Retype};
use crate::vspace::{MapError, Scratch};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
#[cfg(fault_injection)]
use component_runtime::start;
use globals::Loaded;
use sel4::{CPtr, ObjectType};
use system_spec::{Component, SystemSpec};

/// Lowest and highest address a component's ELF segments may use: below
/// them is the null guard, above them the dataports.
const IMAGE_LOW: u64 = 0x1000;
const IMAGE_HIGH: u64 = system_spec::DATAPORT_BASE;

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
    /// The PCI functions found at boot and which driver each is bound to.
    discovery: Discovery,
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
        discovery: Discovery,
    ) -> Result<System, LoadError> {
        let scratch = Scratch::new(global)?;
        let fault_endpoint = global.object(ObjectType::Endpoint, 0)?;
        let objects = globals::make_objects(global, &spec, &discovery)?;
        let events_frame = root_pages::make_events_page(global, &spec)?;
        let events_caps = root_pages::events_caps(global, &spec, &objects)?;
        let root_ring = root_pages::make_root_ring(global, &spec, &objects)?;
        let progress_frames = root_pages::make_progress_pages(global, &spec)?;
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
            discovery,
        };
        system.reserve_all(global);
        system.build_all();
        Ok(system)
    }

    /// Reserves every component's memory; one that does not fit is
    /// reported and left out.
    fn reserve_all(&mut self, global: &mut ObjectAllocator<'_>) {
        for index in 0..self.spec.components.len() {
            let component = &self.spec.components[index];
            let name = component.name.clone();
            let restartable = component.restartable;
            let (memory, shared_copies) = match self.reserve(global, index) {
                Ok(memory) => memory,
                Err(e) => {
                    component_runtime::error!("component {name}: cannot reserve memory: {e}");
                    continue;
                }
            };
            self.instances.push(Instance {
                index,
                name,
                restartable,
                restarts: 0,
                restart_requester: None,
                tcb: None,
                memory,
                shared_copies,
            });
        }
    }

    /// Builds and starts every reserved component, highest priority first,
    /// each run until it blocks before the next is built
    /// (`let_built_components_run`): a component finds what the ones above
    /// it set up (shared regions are initialised by the side that runs
    /// above) as when all of them started at once.
    fn build_all(&mut self) {
        let mut order: Vec<usize> = (0..self.instances.len()).collect();
        order.sort_by_key(|&p| core::cmp::Reverse(self.spec.components[self.instances[p].index].priority));
        for position in order {
            let component = &self.spec.components[self.instances[position].index];
            if component.pci_match.is_some() && self.discovery.bound(&component.name).is_none() {
                // Discovery said why (no device, or none it could route).
                continue;
            }
            let absent = |o: system_spec::ObjectId| matches!(self.objects[o.0 as usize], Loaded::Absent);
            if component.caps.iter().any(|c| absent(c.object)) || component.mappings.iter().any(|m| absent(m.object)) {
                component_runtime::error!(
                    "component {}: not started: a device object of it could not be made",
                    component.name
                );
                continue;
            }
            if !self.registers_fit(component) {
                component_runtime::error!(
                    "component {}: not started: none of its register BARs is of the kind its device has",
                    component.name
                );
                continue;
            }
            let mut instance = core::mem::replace(&mut self.instances[position], placeholder());
            match self.build(&mut instance) {
                Ok(()) => let_built_components_run(),
                Err(e) => component_runtime::error!("component {}: not started: {e}", instance.name),
            }
            self.instances[position] = instance;
        }
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

    /// Stops `instance` for good (it stays in the list, without a thread).
    pub fn stop(&mut self, position: usize) -> Result<(), LoadError> {
        let mut instance = core::mem::replace(&mut self.instances[position], placeholder());
        let result = self.destroy(&mut instance);
        self.instances[position] = instance;
        result
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

    /// The spec's description of the instance at `position`.
    pub fn component(&self, position: usize) -> &Component {
        &self.spec.components[self.instances[position].index]
    }

    /// Bytes of its private untyped the instance at `position` is built from.
    pub fn memory_used(&self, position: usize) -> u64 {
        self.instances[position].memory.used_bytes()
    }

    /// Whether the instance at `position` is the log server (the
    /// supervisor prints directly while it is dead).
    pub fn is_log_server(&self, position: usize) -> bool {
        self.component(position).log_server.is_some()
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

    /// The parsed ELF image the component is built from.
    /// Whether a component with register objects of another model
    /// (`Loaded::Unfit`) has one that fits its device.
    fn registers_fit(&self, component: &Component) -> bool {
        let objects = || component.caps.iter().map(|c| c.object).chain(component.mappings.iter().map(|m| m.object));
        let unfit = |o: system_spec::ObjectId| matches!(self.objects[o.0 as usize], Loaded::Unfit);
        let bar = |o: system_spec::ObjectId| {
            matches!(
                self.spec.objects[o.0 as usize].kind,
                system_spec::ObjectKind::PciBarFrames { .. } | system_spec::ObjectKind::PciBarPorts { .. }
            )
        };
        !objects().any(unfit) || objects().any(|o| bar(o) && !unfit(o))
    }

    fn image(&self, component: &Component) -> Result<elf::Image<'static>, LoadError> {
        let (_, data) = self
            .elves
            .iter()
            .find(|(name, _)| *name == component.elf)
            .ok_or_else(|| LoadError(format!("no ELF '{}' in this image", component.elf)))?;
        elf::Image::parse(data, IMAGE_LOW, IMAGE_HIGH).map_err(|e| LoadError(format!("ELF '{}': {e}", component.elf)))
    }
}

/// What stands in an instance's place while it is taken out to be built.
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
