//! Consistency checks the loader runs before it creates anything: a spec
//! that passes can be carried out without the loader having to guess.

use crate::{
    Access, Binding, Cap, Component, Mapping, ObjectId, ObjectKind, Rights, SystemSpec, FORMAT_VERSION, MAX_IRQ_VECTOR,
    PAGE_SIZE, USER_TOP,
};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Why a spec is inconsistent. Every variant names the object or component
/// at fault so the message alone locates the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// `format_version` is not [`FORMAT_VERSION`].
    WrongVersion(u32),
    /// A frame object's size is zero or not page-aligned.
    BadFrameSize {
        /// The object's name.
        object: String,
        /// Its size.
        size: u64,
    },
    /// A device frame object's physical address is not page-aligned.
    UnalignedPaddr {
        /// The object's name.
        object: String,
        /// Its physical address.
        paddr: u64,
    },
    /// An I/O port range whose first port is above its last.
    EmptyPortRange {
        /// The object's name.
        object: String,
    },
    /// Two I/O port objects overlap, so one device would be reachable from
    /// two capabilities.
    OverlappingPorts {
        /// One object.
        first: String,
        /// The other.
        second: String,
    },
    /// Two device frame objects overlap.
    OverlappingDeviceFrames {
        /// One object.
        first: String,
        /// The other.
        second: String,
    },
    /// An IOAPIC pin or vector out of range.
    BadIrq {
        /// The object's name.
        object: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A device object of a PCI function found at boot names a BAR or a
    /// driver it cannot have.
    BadPciDevice {
        /// The object's name.
        object: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Two IRQs ask for the same vector.
    DuplicateVector {
        /// The vector.
        vector: u32,
    },
    /// An IRQ's notification is not a notification object.
    IrqTargetNotNotification {
        /// The IRQ object's name.
        object: String,
    },
    /// Two components share a name.
    DuplicateComponent(String),
    /// A component without an ELF name.
    MissingElf(String),
    /// A stack size that is zero or not page-aligned.
    BadStackSize(String),
    /// A CNode too small or too large to be created.
    BadCNodeSize(String),
    /// A reference to an object index that does not exist.
    NoSuchObject {
        /// The component holding the reference.
        component: String,
        /// The missing index.
        object: ObjectId,
    },
    /// A capability in slot 0, beyond the CNode, or at or after
    /// `first_free_slot`.
    BadSlot {
        /// The component.
        component: String,
        /// The slot.
        slot: u64,
    },
    /// Two capabilities in one slot.
    DuplicateSlot {
        /// The component.
        component: String,
        /// The slot.
        slot: u64,
    },
    /// A capability with rights its object cannot carry, e.g. a badge on a
    /// frame.
    BadCap {
        /// The component.
        component: String,
        /// The slot.
        slot: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A mapping of an object that is not frames, or at an unaligned or
    /// out-of-range address.
    BadMapping {
        /// The component.
        component: String,
        /// The address.
        vaddr: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Two mappings of one component overlap.
    OverlappingMappings {
        /// The component.
        component: String,
        /// One of the addresses.
        vaddr: u64,
    },
    /// A `may_restart` entry that names no component, the component
    /// itself, or one that is not restartable.
    BadRestartGrant {
        /// The component holding the grant.
        component: String,
        /// The index it names.
        target: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// `events` names an object that is not a notification the component
    /// can receive on.
    BadEvents {
        /// The component.
        component: String,
    },
    /// A log ring or the log server's wiring is inconsistent.
    BadLog {
        /// The component.
        component: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An interface's binding disagrees with the caps or mappings.
    BadInterface {
        /// The component.
        component: String,
        /// The interface.
        interface: String,
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SpecError::*;
        match self {
            WrongVersion(v) => write!(f, "format version {v}, expected {FORMAT_VERSION}"),
            BadFrameSize { object, size } => {
                write!(f, "object '{object}': frame size {size:#x} is not a non-zero multiple of {PAGE_SIZE:#x}")
            }
            UnalignedPaddr { object, paddr } => {
                write!(f, "object '{object}': physical address {paddr:#x} is not page-aligned")
            }
            EmptyPortRange { object } => write!(f, "object '{object}': I/O port range is empty"),
            OverlappingPorts { first, second } => {
                write!(f, "I/O port ranges of '{first}' and '{second}' overlap")
            }
            OverlappingDeviceFrames { first, second } => {
                write!(f, "device frames of '{first}' and '{second}' overlap")
            }
            BadIrq { object, reason } | BadPciDevice { object, reason } => write!(f, "object '{object}': {reason}"),
            DuplicateVector { vector } => write!(f, "IRQ vector {vector} is used twice"),
            IrqTargetNotNotification { object } => {
                write!(f, "object '{object}': an IRQ must signal a notification object")
            }
            DuplicateComponent(name) => write!(f, "component '{name}' appears twice"),
            MissingElf(name) => write!(f, "component '{name}' has no ELF name"),
            BadStackSize(name) => {
                write!(f, "component '{name}': stack size is not a non-zero multiple of {PAGE_SIZE:#x}")
            }
            BadCNodeSize(name) => write!(f, "component '{name}': cnode_size_bits must be 4..=20"),
            NoSuchObject { component, object } => {
                write!(f, "component '{component}' refers to object #{} which does not exist", object.0)
            }
            BadSlot { component, slot } => {
                write!(f, "component '{component}': slot {slot} is null, outside the CNode or past first_free_slot")
            }
            DuplicateSlot { component, slot } => {
                write!(f, "component '{component}': slot {slot} holds two capabilities")
            }
            BadCap { component, slot, reason } => {
                write!(f, "component '{component}', slot {slot}: {reason}")
            }
            BadMapping { component, vaddr, reason } => {
                write!(f, "component '{component}', mapping at {vaddr:#x}: {reason}")
            }
            OverlappingMappings { component, vaddr } => {
                write!(f, "component '{component}': mapping at {vaddr:#x} overlaps another (or its guard page)")
            }
            BadRestartGrant { component, target, reason } => {
                write!(f, "component '{component}' may restart component #{target}: {reason}")
            }
            BadLog { component, reason } => write!(f, "component '{component}': log: {reason}"),
            BadEvents { component } => {
                write!(f, "component '{component}': its system events object is not a notification it receives on")
            }
            BadInterface { component, interface, reason } => {
                write!(f, "component '{component}', interface '{interface}': {reason}")
            }
        }
    }
}

fn aligned(value: u64) -> bool {
    value.is_multiple_of(PAGE_SIZE)
}

/// The first pair of half-open ranges `[start, end)` that overlap, as
/// `(earlier, later)` by their `tag` (the order they were given in), or
/// `None`. Sorted once and swept, so thousands of ranges cost n log n,
/// not n² comparisons.
fn first_overlap(mut ranges: Vec<(u64, u64, usize)>) -> Option<(usize, usize)> {
    ranges.sort_unstable();
    let mut widest: Option<(u64, usize)> = None; // (end, tag) reaching furthest so far
    let mut found: Option<(usize, usize)> = None;
    for (start, end, tag) in ranges {
        if let Some((reach, other)) = widest {
            if start < reach {
                let pair = (other.min(tag), other.max(tag));
                // Of several overlaps, report the one whose later range
                // comes first, as a check in given order would.
                if found.is_none_or(|f| (pair.1, pair.0) < (f.1, f.0)) {
                    found = Some(pair);
                }
            }
        }
        if widest.is_none_or(|(reach, _)| end > reach) {
            widest = Some((end, tag));
        }
    }
    found
}

/// What the log checks need of the whole spec, gathered once (not per
/// component: a system of thousands of components has thousands of rings).
struct LogIndex<'a> {
    /// Components with `log_server`.
    servers: Vec<&'a Component>,
    /// Per ring object: the names the (one) server reads it under.
    sources: BTreeMap<ObjectId, Vec<&'a str>>,
    /// Per ring object: how many components write it.
    writers: BTreeMap<ObjectId, usize>,
    /// Every object some component maps as a dataport.
    mapped: BTreeSet<ObjectId>,
    /// The notification the server waits on.
    server_wait: Option<ObjectId>,
}

impl<'a> LogIndex<'a> {
    fn of(spec: &'a SystemSpec) -> LogIndex<'a> {
        let servers: Vec<&Component> = spec.components.iter().filter(|c| c.log_server.is_some()).collect();
        let mut sources: BTreeMap<ObjectId, Vec<&str>> = BTreeMap::new();
        let mut server_wait = None;
        if let Some(server) = servers.first() {
            let log = server.log_server.as_ref().expect("filtered");
            for source in &log.rings {
                sources.entry(source.ring).or_default().push(&source.name);
            }
            server_wait = server.caps.iter().find(|cap| cap.slot == log.wait_slot).map(|cap| cap.object);
        }
        let mut writers: BTreeMap<ObjectId, usize> = BTreeMap::new();
        for end in spec.components.iter().filter_map(|c| c.log_ring.as_ref()) {
            *writers.entry(end.ring).or_default() += 1;
        }
        let mapped = spec.components.iter().flat_map(|c| c.mappings.iter().map(|m| m.object)).collect();
        LogIndex { servers, sources, writers, mapped, server_wait }
    }
}

impl SystemSpec {
    /// Checks that the spec can be carried out as written: objects are
    /// well-formed and do not clash, every reference resolves, slots and
    /// mappings fit and do not collide, and every interface binding agrees
    /// with the capability or mapping behind it. Near-linear in the size of
    /// the spec (lookups are indexed), so a generated system of tens of
    /// thousands of connections validates in well under a second.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.format_version != FORMAT_VERSION {
            return Err(SpecError::WrongVersion(self.format_version));
        }
        self.validate_objects()?;
        let log = LogIndex::of(self);
        let mut names = BTreeSet::new();
        for (index, component) in self.components.iter().enumerate() {
            if !names.insert(component.name.as_str()) {
                return Err(SpecError::DuplicateComponent(component.name.clone()));
            }
            self.validate_component(component)?;
            if component.events_notification.is_some() && !component.events {
                return Err(SpecError::BadEvents { component: component.name.clone() });
            }
            if let Some(events) = component.events_notification {
                let receives = component.caps.iter().any(|c| c.object == events && c.rights.read);
                if !matches!(self.object(events).map(|o| &o.kind), Some(ObjectKind::Notification)) || !receives {
                    return Err(SpecError::BadEvents { component: component.name.clone() });
                }
            }
            self.validate_log(component, &log)?;
            self.validate_restart_grants(index, component)?;
        }
        Ok(())
    }

    /// `may_restart` names other, restartable components, each once.
    fn validate_restart_grants(&self, index: usize, component: &Component) -> Result<(), SpecError> {
        let mut seen = BTreeSet::new();
        for &target in &component.may_restart {
            let bad = |reason| SpecError::BadRestartGrant { component: component.name.clone(), target, reason };
            match self.components.get(target as usize) {
                None => return Err(bad("no such component")),
                Some(_) if target as usize == index => return Err(bad("a component cannot restart itself")),
                Some(t) if !t.restartable => return Err(bad("it is not restartable")),
                Some(_) if !seen.insert(target) => return Err(bad("listed twice")),
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A writer's ring is a one-page frame object only it writes, read by
    /// the server alone; the server's notification is one every writer can
    /// signal and only the server receives on.
    fn validate_log(&self, c: &Component, log: &LogIndex<'_>) -> Result<(), SpecError> {
        let bad = |reason| Err(SpecError::BadLog { component: c.name.clone(), reason });
        let is_ring = |id: ObjectId| matches!(self.object(id).map(|o| &o.kind), Some(ObjectKind::Frames { size }) if *size == crate::LOG_RING_SIZE);
        if log.servers.len() > 1 {
            return bad("more than one log server");
        }
        if let Some(end) = &c.log_ring {
            if log.servers.is_empty() {
                return bad("a log ring without a log server");
            }
            if !is_ring(end.ring) {
                return bad("the ring is not a one-page frame object");
            }
            if log.sources.get(&end.ring).is_none_or(|names| names.as_slice() != [c.name.as_str()]) {
                return bad("the server does not read this ring, once, under this component's name");
            }
            let Some(cap) = c.caps.iter().find(|cap| cap.slot == end.signal_slot) else {
                return bad("no capability in the signal slot");
            };
            if Some(cap.object) != log.server_wait || cap.rights != Rights::WRITE {
                return bad("the signal capability is not a send-only capability to the server's notification");
            }
        }
        if let Some(server) = &c.log_server {
            if c.log_ring.is_some() {
                return bad("the log server prints its own lines and has no ring");
            }
            let Some(cap) = c.caps.iter().find(|cap| cap.slot == server.wait_slot) else {
                return bad("no capability in the wait slot");
            };
            if !matches!(self.object(cap.object).map(|o| &o.kind), Some(ObjectKind::Notification))
                || cap.rights != Rights::READ
            {
                return bad("the wait capability is not a receive capability to a notification");
            }
            let mut listed = BTreeSet::new();
            for source in &server.rings {
                if !is_ring(source.ring) || !listed.insert(source.ring) {
                    return bad("a ring that is not a one-page frame object, or listed twice");
                }
                if log.writers.get(&source.ring).copied().unwrap_or(0) != 1 {
                    return bad("a ring without exactly one writer");
                }
            }
        }
        // A ring is mapped by nothing else (the loader maps it itself).
        if c.log_ring.as_ref().is_some_and(|end| log.mapped.contains(&end.ring)) {
            return bad("a log ring is also mapped as a dataport");
        }
        Ok(())
    }

    /// Each object on its own, then the pairs that must not clash (device
    /// frames, I/O ports, IRQ vectors), each found by one sort.
    fn validate_objects(&self) -> Result<(), SpecError> {
        let mut devices = Vec::new();
        let mut ports = Vec::new();
        let mut vectors = BTreeSet::new();
        for (index, object) in self.objects.iter().enumerate() {
            let name = || object.name.clone();
            match &object.kind {
                ObjectKind::Endpoint | ObjectKind::Notification => {}
                ObjectKind::Frames { size } => {
                    if *size == 0 || !aligned(*size) {
                        return Err(SpecError::BadFrameSize { object: name(), size: *size });
                    }
                }
                ObjectKind::DeviceFrames { paddr, size } => {
                    if *size == 0 || !aligned(*size) {
                        return Err(SpecError::BadFrameSize { object: name(), size: *size });
                    }
                    if !aligned(*paddr) {
                        return Err(SpecError::UnalignedPaddr { object: name(), paddr: *paddr });
                    }
                    devices.push((*paddr, paddr.saturating_add(*size), index));
                }
                ObjectKind::IoPorts { first, last } => {
                    if first > last {
                        return Err(SpecError::EmptyPortRange { object: name() });
                    }
                    ports.push((u64::from(*first), u64::from(*last) + 1, index));
                }
                ObjectKind::IoApicIrq(irq) => {
                    if irq.pin > 23 {
                        return Err(SpecError::BadIrq { object: name(), reason: "IOAPIC pin must be 0..=23" });
                    }
                    if irq.vector > MAX_IRQ_VECTOR {
                        return Err(SpecError::BadIrq { object: name(), reason: "IRQ vector must be 0..=107" });
                    }
                    if irq.badge == 0 || irq.badge >= 1 << 28 {
                        return Err(SpecError::BadIrq { object: name(), reason: "badge must be 1..2^28" });
                    }
                    match self.object(irq.notification) {
                        Some(target) if target.kind == ObjectKind::Notification => {}
                        _ => return Err(SpecError::IrqTargetNotNotification { object: name() }),
                    }
                    if !vectors.insert(irq.vector) {
                        return Err(SpecError::DuplicateVector { vector: irq.vector });
                    }
                }
                ObjectKind::PciBarFrames { driver, bar, size } => {
                    if *size == 0 || !aligned(*size) {
                        return Err(SpecError::BadFrameSize { object: name(), size: *size });
                    }
                    self.validate_pci(name, driver, *bar)?;
                }
                ObjectKind::PciBarPorts { driver, bar } => self.validate_pci(name, driver, *bar)?,
                ObjectKind::PciIrq(irq) => {
                    self.validate_pci(name, &irq.driver, 0)?;
                    if irq.vector > MAX_IRQ_VECTOR {
                        return Err(SpecError::BadIrq { object: name(), reason: "IRQ vector must be 0..=107" });
                    }
                    if irq.badge == 0 || irq.badge >= 1 << 28 {
                        return Err(SpecError::BadIrq { object: name(), reason: "badge must be 1..2^28" });
                    }
                    match self.object(irq.notification) {
                        Some(target) if target.kind == ObjectKind::Notification => {}
                        _ => return Err(SpecError::IrqTargetNotNotification { object: name() }),
                    }
                    if !vectors.insert(irq.vector) {
                        return Err(SpecError::DuplicateVector { vector: irq.vector });
                    }
                }
            }
        }
        let names = |(a, b): (usize, usize)| (self.objects[a].name.clone(), self.objects[b].name.clone());
        if let Some((first, second)) = first_overlap(devices).map(names) {
            return Err(SpecError::OverlappingDeviceFrames { first, second });
        }
        if let Some((first, second)) = first_overlap(ports).map(names) {
            return Err(SpecError::OverlappingPorts { first, second });
        }
        Ok(())
    }

    fn validate_component(&self, c: &Component) -> Result<(), SpecError> {
        let name = || c.name.clone();
        if c.elf.is_empty() {
            return Err(SpecError::MissingElf(name()));
        }
        if c.stack_size == 0 || !aligned(c.stack_size) {
            return Err(SpecError::BadStackSize(name()));
        }
        if !(4..=20).contains(&c.cnode_size_bits) {
            return Err(SpecError::BadCNodeSize(name()));
        }
        let slot_count = 1u64 << c.cnode_size_bits;
        if c.first_free_slot > slot_count {
            return Err(SpecError::BadSlot { component: name(), slot: c.first_free_slot });
        }
        let mut caps: BTreeMap<u64, &Cap> = BTreeMap::new();
        for cap in &c.caps {
            if cap.slot == 0 || cap.slot >= c.first_free_slot {
                return Err(SpecError::BadSlot { component: name(), slot: cap.slot });
            }
            if caps.insert(cap.slot, cap).is_some() {
                return Err(SpecError::DuplicateSlot { component: name(), slot: cap.slot });
            }
            self.validate_cap(c, cap)?;
        }
        let mut mappings: BTreeMap<u64, &Mapping> = BTreeMap::new();
        let mut spans = Vec::with_capacity(c.mappings.len());
        for (index, mapping) in c.mappings.iter().enumerate() {
            let size = self.validate_mapping(c, mapping)?;
            // The guard page after each mapping must stay unmapped too.
            spans.push((mapping.vaddr, mapping.vaddr + size + PAGE_SIZE, index));
            mappings.entry(mapping.vaddr).or_insert(mapping);
        }
        if let Some((_, later)) = first_overlap(spans) {
            return Err(SpecError::OverlappingMappings { component: name(), vaddr: c.mappings[later].vaddr });
        }
        for interface in &c.interfaces {
            self.validate_interface(c, interface, &caps, &mappings)?;
        }
        Ok(())
    }

    /// A found-at-boot device object: a BAR number of a type 0 header and
    /// a driver that names what it drives.
    fn validate_pci(&self, name: impl Fn() -> String, driver: &str, bar: u8) -> Result<(), SpecError> {
        if bar > 5 {
            return Err(SpecError::BadPciDevice { object: name(), reason: "BAR number must be 0..=5" });
        }
        match self.components.iter().find(|c| c.name == driver) {
            Some(c) if c.pci_match.is_some() => Ok(()),
            _ => Err(SpecError::BadPciDevice { object: name(), reason: "its driver is no component with a match" }),
        }
    }

    /// One capability: its object exists and can carry its rights.
    fn validate_cap(&self, c: &Component, cap: &Cap) -> Result<(), SpecError> {
        let object =
            self.object(cap.object).ok_or(SpecError::NoSuchObject { component: c.name.clone(), object: cap.object })?;
        let bad = |reason| SpecError::BadCap { component: c.name.clone(), slot: cap.slot, reason };
        match object.kind {
            ObjectKind::Endpoint | ObjectKind::Notification => {
                if cap.rights == Rights::NONE {
                    return Err(bad("an endpoint or notification capability without rights is useless"));
                }
            }
            ObjectKind::Frames { .. } | ObjectKind::DeviceFrames { .. } | ObjectKind::PciBarFrames { .. } => {
                return Err(bad("frames are mapped, not placed in a CSpace"));
            }
            ObjectKind::IoApicIrq(_)
            | ObjectKind::IoPorts { .. }
            | ObjectKind::PciIrq(_)
            | ObjectKind::PciBarPorts { .. } => {
                if cap.badge != 0 {
                    return Err(bad("only endpoint and notification capabilities carry badges"));
                }
            }
        }
        Ok(())
    }

    /// One mapping on its own (the overlaps are checked together): frames,
    /// aligned, within the user address space. Returns the mapped size.
    fn validate_mapping(&self, c: &Component, mapping: &Mapping) -> Result<u64, SpecError> {
        let bad = |reason| SpecError::BadMapping { component: c.name.clone(), vaddr: mapping.vaddr, reason };
        let object = self
            .object(mapping.object)
            .ok_or(SpecError::NoSuchObject { component: c.name.clone(), object: mapping.object })?;
        let size = object.kind.mappable_size().ok_or_else(|| bad("only frames can be mapped"))?;
        if mapping.vaddr == 0 || !aligned(mapping.vaddr) {
            return Err(bad("virtual address is zero or not page-aligned"));
        }
        if let ObjectKind::Frames { size } = object.kind {
            if !mapping.vaddr.is_multiple_of(crate::frame_size(size)) {
                return Err(bad(
                    "a dataport of 2 MiB multiples is backed by 2 MiB frames: its address must be 2 MiB-aligned",
                ));
            }
        }
        if mapping.vaddr.checked_add(size).is_none_or(|end| end > USER_TOP) {
            return Err(bad("mapping reaches past the user address space"));
        }
        if matches!(object.kind, ObjectKind::Frames { .. }) && !mapping.cached {
            return Err(bad("ordinary RAM is always mapped cached"));
        }
        Ok(size)
    }

    fn validate_interface(
        &self,
        c: &Component,
        interface: &crate::Interface,
        caps: &BTreeMap<u64, &Cap>,
        mappings: &BTreeMap<u64, &Mapping>,
    ) -> Result<(), SpecError> {
        let bad =
            |reason| SpecError::BadInterface { component: c.name.clone(), interface: interface.name.clone(), reason };
        let cap_kind = |slot: u64| caps.get(&slot).and_then(|cap| self.object(cap.object).map(|o| (*cap, &o.kind)));
        let expect = |slot: u64, want: fn(&ObjectKind) -> bool, rights_ok: fn(Rights) -> bool| match cap_kind(slot) {
            Some((cap, kind)) if want(kind) && rights_ok(cap.rights) => Ok(()),
            Some(_) => Err(bad("the capability in its slot has the wrong object kind or rights")),
            None => Err(bad("its slot holds no capability")),
        };
        let is_endpoint: fn(&ObjectKind) -> bool = |k| *k == ObjectKind::Endpoint;
        let is_notification: fn(&ObjectKind) -> bool = |k| *k == ObjectKind::Notification;
        match interface.binding {
            Binding::Unconnected => Ok(()),
            Binding::RpcClient { slot } => expect(slot, is_endpoint, |r| r.write && r.grant_reply && !r.read),
            Binding::RpcServer { slot } => expect(slot, is_endpoint, |r| r.read),
            Binding::EventEmitter { slot } => expect(slot, is_notification, |r| r.write && !r.read),
            Binding::EventConsumer { slot } => expect(slot, is_notification, |r| r.read),
            Binding::InterruptConsumer { slot, irq_handler_slot } => {
                expect(slot, is_notification, |r| r.read)?;
                expect(irq_handler_slot, |k| matches!(k, ObjectKind::IoApicIrq(_) | ObjectKind::PciIrq(_)), |_| true)
            }
            Binding::IoPortUser { slot } => {
                expect(slot, |k| matches!(k, ObjectKind::IoPorts { .. } | ObjectKind::PciBarPorts { .. }), |_| true)
            }
            Binding::Dataport { vaddr, size, access } => {
                let mapping = mappings.get(&vaddr).ok_or_else(|| bad("no mapping at the dataport's address"))?;
                let mapped_size = self.object(mapping.object).and_then(|o| o.kind.mappable_size());
                if mapped_size != Some(size) {
                    return Err(bad("the mapping's size differs from the dataport's"));
                }
                if mapping.access != access {
                    return Err(bad("the mapping's rights differ from the dataport's"));
                }
                if access == Access::ReadOnly
                    && matches!(
                        self.object(mapping.object).map(|o| &o.kind),
                        Some(ObjectKind::DeviceFrames { .. } | ObjectKind::PciBarFrames { .. })
                    )
                {
                    return Err(bad("device memory is always mapped read-write"));
                }
                Ok(())
            }
        }
    }
}
