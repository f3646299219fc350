//! Turns a checked [`System`] into the static [`SystemSpec`]: one object per
//! connection (two for an interrupt), capabilities in fixed slots and
//! dataports at fixed addresses. The layout rules are in `system_spec`'s
//! crate docs; [`TypeLayout`] is their single implementation, shared with
//! the glue emitter so code and spec cannot disagree.

use crate::ast::InterfaceKind;
use crate::check::{dataport_size, ComponentType, ConnectorKind, System};
use crate::diag::{err, Result};
use std::collections::HashMap;
use system_spec::{
    frame_size, Access, Binding, Cap, Component, Interface, IoApicIrq, LogRingEnd, LogRingSource, LogServer, Mapping,
    ObjectId, ObjectKind, RestartPolicy, Rights, SystemSpec, DATAPORT_BASE, DEFAULT_CNODE_SIZE_BITS,
    DEFAULT_CONFIRM_DEATH_MS, DEFAULT_PRIORITY, DEFAULT_RESTART_BACKOFF_MS, DEFAULT_RESTART_LIMIT,
    DEFAULT_RESTART_WINDOW_MS, DEFAULT_STACK_SIZE, FIRST_INTERFACE_SLOT, LOG_RING_SIZE, PAGE_SIZE,
};

/// Where a component type's interfaces live: the same for every instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeLayout {
    /// Per interface: its capability slot (every non-dataport interface).
    pub slot: Vec<Option<u64>>,
    /// Per interface: the IRQ handler slot of an interrupt consumer.
    pub irq_handler_slot: Vec<Option<u64>>,
    /// Per interface: the virtual address of a dataport.
    pub vaddr: Vec<Option<u64>>,
    /// The first slot the layout leaves free.
    pub first_free_slot: u64,
}

fn round_up(value: u64) -> u64 {
    value.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

impl TypeLayout {
    /// Slots 1.. for non-dataport interfaces in declaration order, then the
    /// IRQ handler slots of interrupt consumers in declaration order;
    /// dataports from [`DATAPORT_BASE`] in declaration order, each aligned
    /// to its [`frame_size`] and followed by an unmapped guard page.
    pub fn of(component: &ComponentType) -> TypeLayout {
        let n = component.decl.interfaces.len();
        let mut layout = TypeLayout {
            slot: vec![None; n],
            irq_handler_slot: vec![None; n],
            vaddr: vec![None; n],
            first_free_slot: 0,
        };
        let mut next_slot = FIRST_INTERFACE_SLOT;
        let mut next_vaddr = DATAPORT_BASE;
        for (i, decl) in component.decl.interfaces.iter().enumerate() {
            if decl.kind == InterfaceKind::Dataport {
                let size = round_up(dataport_size(decl));
                let align = frame_size(size);
                let vaddr = next_vaddr.div_ceil(align) * align;
                layout.vaddr[i] = Some(vaddr);
                next_vaddr = vaddr + size + PAGE_SIZE;
            } else {
                layout.slot[i] = Some(next_slot);
                next_slot += 1;
            }
        }
        for i in 0..n {
            if component.connectors[i] == Some(ConnectorKind::HardwareInterrupt) {
                layout.irq_handler_slot[i] = Some(next_slot);
                next_slot += 1;
            }
        }
        layout.first_free_slot = next_slot;
        layout
    }
}

/// Builds the spec; the result has passed [`SystemSpec::validate`].
pub fn build(system: &System) -> Result<SystemSpec> {
    let mut spec = SystemSpec::new();
    let layouts: Vec<TypeLayout> = system.components.iter().map(TypeLayout::of).collect();
    let mut components: Vec<Option<Component>> = Vec::new();
    for inst in &system.instances {
        let component = &system.components[inst.component];
        if component.is_hardware() {
            components.push(None);
            continue;
        }
        let layout = &layouts[inst.component];
        let cnode_size_bits = inst.config.cnode_size_bits.unwrap_or(DEFAULT_CNODE_SIZE_BITS);
        if layout.first_free_slot > 1 << cnode_size_bits {
            return err(
                &inst.name.pos,
                format!(
                    "instance '{}' needs {} CSpace slots but cnode_size_bits = {cnode_size_bits} gives {}",
                    inst.name.text,
                    layout.first_free_slot,
                    1u64 << cnode_size_bits
                ),
            );
        }
        components.push(Some(Component {
            name: inst.name.text.clone(),
            component_type: component.decl.name.text.clone(),
            elf: component.elf.clone(),
            control: component.decl.control.is_some(),
            priority: inst.config.priority.unwrap_or(DEFAULT_PRIORITY),
            max_priority: inst.config.max_priority.unwrap_or(DEFAULT_PRIORITY),
            stack_size: round_up(inst.config.stack_size.unwrap_or(DEFAULT_STACK_SIZE)),
            restartable: inst.config.restartable,
            may_restart: Vec::new(),
            fault_injection: inst.config.fault_injection,
            hang_cpu_ms: inst.config.hang_cpu_ms,
            events: false,
            events_notification: None,
            confirm_death_ms: inst.config.confirm_death_ms.unwrap_or(DEFAULT_CONFIRM_DEATH_MS),
            untrusted: inst.config.untrusted,
            log_ring: None,
            log_server: None,
            restart_policy: RestartPolicy {
                limit: inst.config.restart_limit.unwrap_or(DEFAULT_RESTART_LIMIT),
                window_ms: inst.config.restart_window_ms.unwrap_or(DEFAULT_RESTART_WINDOW_MS),
                backoff_ms: inst.config.restart_backoff_ms.unwrap_or(DEFAULT_RESTART_BACKOFF_MS),
            },
            cnode_size_bits,
            first_free_slot: layout.first_free_slot,
            caps: Vec::new(),
            mappings: Vec::new(),
            interfaces: component
                .decl
                .interfaces
                .iter()
                .map(|i| Interface { name: i.name.text.clone(), binding: Binding::Unconnected })
                .collect(),
        }));
    }

    // A notification object per notification connection, made when first
    // needed: an interrupt delivered to one (`<irq>_notification`) may come
    // before it in the assembly, and the IRQ must name an existing object.
    let mut notifications: HashMap<usize, ObjectId> = HashMap::new();
    for (index, conn) in system.connections.iter().enumerate() {
        let name = conn.name.text.clone();
        let slot = |instance: usize, interface: usize| {
            layouts[system.instances[instance].component].slot[interface].expect("non-dataport interfaces have slots")
        };
        match conn.connector {
            ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType => {
                let endpoint = spec.add_object(name, ObjectKind::Endpoint);
                let server = &conn.to[0];
                let c = components[server.instance].as_mut().expect("RPC ends are software");
                let s = slot(server.instance, server.interface);
                c.caps.push(Cap { slot: s, object: endpoint, rights: Rights::READ, badge: 0 });
                c.interfaces[server.interface].binding = Binding::RpcServer { slot: s };
                // Badges 1.. tell the server which client called.
                for (index, client) in conn.from.iter().enumerate() {
                    let c = components[client.instance].as_mut().expect("RPC ends are software");
                    let s = slot(client.instance, client.interface);
                    c.caps.push(Cap { slot: s, object: endpoint, rights: Rights::CALL, badge: index as u64 + 1 });
                    c.interfaces[client.interface].binding = Binding::RpcClient { slot: s };
                }
            }
            ConnectorKind::Notification | ConnectorKind::NotificationNative => {
                let notification =
                    *notifications.entry(index).or_insert_with(|| spec.add_object(name, ObjectKind::Notification));
                // One emitter: badge 1. Several (seL4NotificationNative):
                // badge bit i for the i-th `from`, so signals are told apart.
                for (index, emitter) in conn.from.iter().enumerate() {
                    let c = components[emitter.instance].as_mut().expect("software");
                    let s = slot(emitter.instance, emitter.interface);
                    c.caps.push(Cap { slot: s, object: notification, rights: Rights::WRITE, badge: 1 << index });
                    c.interfaces[emitter.interface].binding = Binding::EventEmitter { slot: s };
                }
                for consumer in &conn.to {
                    let c = components[consumer.instance].as_mut().expect("software");
                    let s = slot(consumer.instance, consumer.interface);
                    c.caps.push(Cap { slot: s, object: notification, rights: Rights::READ, badge: 0 });
                    c.interfaces[consumer.interface].binding = Binding::EventConsumer { slot: s };
                }
            }
            ConnectorKind::SharedData | ConnectorKind::HardwareMmio => {
                let first = &conn.from[0];
                let size = dataport_size(&system.component_of(first.instance).decl.interfaces[first.interface]);
                let (object, cached, ends) = if conn.connector == ConnectorKind::SharedData {
                    (
                        spec.add_object(name, ObjectKind::Frames { size }),
                        true,
                        conn.from.iter().chain(&conn.to).collect::<Vec<_>>(),
                    )
                } else {
                    let hw = &conn.to[0];
                    let mmio = &system.instances[hw.instance].config.mmio[&hw.interface];
                    (
                        spec.add_object(name, ObjectKind::DeviceFrames { paddr: mmio.paddr, size }),
                        mmio.cached,
                        conn.from.iter().collect(),
                    )
                };
                for end in ends {
                    let vaddr =
                        layouts[system.instances[end.instance].component].vaddr[end.interface].expect("dataport");
                    let access = system.instances[end.instance]
                        .config
                        .access
                        .get(&end.interface)
                        .copied()
                        .unwrap_or(Access::ReadWrite);
                    let c = components[end.instance].as_mut().expect("software");
                    c.mappings.push(Mapping { object, vaddr, access, cached });
                    c.interfaces[end.interface].binding = Binding::Dataport { vaddr, size, access };
                }
            }
            ConnectorKind::HardwareInterrupt => {
                let hw = &conn.from[0];
                let irq = &system.instances[hw.instance].config.irq[&hw.interface];
                let driver = &conn.to[0];
                let config = &system.instances[driver.instance].config;
                // Its own notification, or (`<irq>_notification`) that of
                // the driver's other event, signalled with its own bit.
                let notification = match config.irq_into.get(&driver.interface) {
                    Some((into, _)) => {
                        let (target, _) = system.connection_of(driver.instance, *into).expect("checked: connected");
                        let target_name = system.connections[target].name.text.clone();
                        *notifications
                            .entry(target)
                            .or_insert_with(|| spec.add_object(target_name, ObjectKind::Notification))
                    }
                    None => spec.add_object(name.clone(), ObjectKind::Notification),
                };
                let badge = config.irq_badge[&driver.interface];
                let handler = spec.add_object(
                    format!("{name}.irq"),
                    ObjectKind::IoApicIrq(IoApicIrq {
                        ioapic: irq.ioapic,
                        pin: irq.pin,
                        level_triggered: irq.level,
                        active_low: irq.polarity_low,
                        vector: irq.vector,
                        notification,
                        badge,
                    }),
                );
                let layout = &layouts[system.instances[driver.instance].component];
                let s = layout.slot[driver.interface].expect("consumes has a slot");
                let h = layout.irq_handler_slot[driver.interface].expect("interrupt consumers have a handler slot");
                let c = components[driver.instance].as_mut().expect("software");
                c.caps.push(Cap { slot: s, object: notification, rights: Rights::READ, badge: 0 });
                c.caps.push(Cap { slot: h, object: handler, rights: Rights::ALL, badge: 0 });
                c.interfaces[driver.interface].binding = Binding::InterruptConsumer { slot: s, irq_handler_slot: h };
            }
            ConnectorKind::HardwareIoPort => {
                let hw = &conn.to[0];
                let (first, last) = system.instances[hw.instance].config.ports[&hw.interface];
                let ports = spec.add_object(name, ObjectKind::IoPorts { first, last });
                let user = &conn.from[0];
                let s = slot(user.instance, user.interface);
                let c = components[user.instance].as_mut().expect("software");
                c.caps.push(Cap { slot: s, object: ports, rights: Rights::ALL, badge: 0 });
                c.interfaces[user.interface].binding = Binding::IoPortUser { slot: s };
            }
        }
    }
    // Restart grants name instances; the spec numbers software components
    // only (hardware instances are not components).
    let spec_index: Vec<Option<u32>> = components
        .iter()
        .scan(0u32, |next, c| {
            Some(c.as_ref().map(|_| {
                *next += 1;
                *next - 1
            }))
        })
        .collect();
    for (i, inst) in system.instances.iter().enumerate() {
        if let Some(c) = components[i].as_mut() {
            c.may_restart =
                inst.config.may_restart.iter().map(|&t| spec_index[t].expect("checked: software")).collect();
            // The supervisor signals the notification behind the named
            // interface with SYSTEM_EVENT_BADGE, far above the emitters'
            // bits (at most 28 `from` ends).
            if let Some((interface, pos)) = &inst.config.system_events {
                c.events = true;
                let Some(interface) = interface else { continue };
                let Binding::EventConsumer { slot } = c.interfaces[*interface].binding else {
                    return err(
                        pos,
                        format!(
                            "'{}.system_events' names interface '{}', which is not connected to a notification",
                            inst.name.text, c.interfaces[*interface].name
                        ),
                    );
                };
                let cap = c.caps.iter().find(|cap| cap.slot == slot).expect("a consumer has its cap");
                c.events_notification = Some(cap.object);
            }
        }
    }
    add_log_rings(system, &mut spec, &mut components)?;
    for c in components.iter_mut().flatten() {
        c.caps.sort_by_key(|cap| cap.slot);
        c.mappings.sort_by_key(|m| m.vaddr);
    }
    spec.components = components.into_iter().flatten().collect();
    if let Err(e) = spec.validate() {
        let pos = &system.instances[0].name.pos;
        return err(pos, format!("internal error: the generated spec is inconsistent: {e}"));
    }
    Ok(spec)
}

/// With a log server (`<instance>.log_server = true`): one notification
/// the server waits on, and for every other component a one-page ring
/// (read-write in it, read-only in the server: the loader maps both) and a
/// send-only capability to the notification in its first free slot. Derived
/// from the instances, so no assembly wires a connection per component.
fn add_log_rings(system: &System, spec: &mut SystemSpec, components: &mut [Option<Component>]) -> Result<()> {
    let Some(server) = system.instances.iter().position(|i| i.config.log_server.is_some()) else { return Ok(()) };
    let name = &system.instances[server].name;
    if components[server].is_none() {
        return err(&name.pos, format!("log server '{}' is a hardware component", name.text));
    }
    let wake = spec.add_object(format!("{}.log_wake", name.text), ObjectKind::Notification);
    let claim_slot = |c: &mut Component| -> Result<u64> {
        let slot = c.first_free_slot;
        // The loader keeps the last slot for the fault endpoint.
        if slot + 1 >= 1 << c.cnode_size_bits {
            return err(&name.pos, format!("instance '{}' has no CSpace slot left for its log capability", c.name));
        }
        c.first_free_slot += 1;
        Ok(slot)
    };
    let mut rings = Vec::new();
    for (i, c) in components.iter_mut().enumerate() {
        let Some(c) = c.as_mut() else { continue };
        if i == server {
            continue;
        }
        let ring = spec.add_object(format!("log_ring.{}", c.name), ObjectKind::Frames { size: LOG_RING_SIZE });
        let signal_slot = claim_slot(c)?;
        c.caps.push(Cap { slot: signal_slot, object: wake, rights: Rights::WRITE, badge: 1 });
        c.log_ring = Some(LogRingEnd { ring, signal_slot });
        rings.push(LogRingSource { name: c.name.clone(), ring });
    }
    let c = components[server].as_mut().expect("software");
    let wait_slot = claim_slot(c)?;
    c.caps.push(Cap { slot: wait_slot, object: wake, rights: Rights::READ, badge: 0 });
    c.log_server = Some(LogServer { wait_slot, rings });
    Ok(())
}

/// A human-readable listing of the spec, for reviewing what a change to the
/// assembly does (written next to the binary spec by the CLI).
pub fn describe(spec: &SystemSpec) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "# system spec, format {}", spec.format_version);
    let _ = writeln!(out, "objects:");
    for (i, o) in spec.objects.iter().enumerate() {
        let _ = writeln!(out, "  #{i} {}: {:?}", o.name, o.kind);
    }
    // Whoever maps a device's registers can program its DMA: say who does.
    let _ = writeln!(out, "device regions (holder, rights):");
    let mut device_holders: HashMap<u32, Vec<String>> = HashMap::new();
    for c in &spec.components {
        for m in &c.mappings {
            if matches!(spec.object(m.object).map(|o| &o.kind), Some(ObjectKind::DeviceFrames { .. })) {
                device_holders.entry(m.object.0).or_default().push(format!("{} {}", c.name, access_letters(m.access)));
            }
        }
    }
    for (i, o) in spec.objects.iter().enumerate() {
        let ObjectKind::DeviceFrames { paddr, size } = o.kind else { continue };
        let holders = device_holders.remove(&(i as u32)).unwrap_or_default();
        let holders = if holders.is_empty() { "nobody".to_string() } else { holders.join(", ") };
        let _ = writeln!(out, "  #{i} {} {paddr:#x}+{size:#x}: {holders}", o.name);
    }
    for c in &spec.components {
        let _ = writeln!(
            out,
            "component {} ({}, elf {}): control={} priority={} max_priority={} stack={:#x} restartable={} cnode_bits={} first_free_slot={}",
            c.name, c.component_type, c.elf, c.control, c.priority, c.max_priority, c.stack_size, c.restartable, c.cnode_size_bits, c.first_free_slot
        );
        if !c.may_restart.is_empty() {
            let names: Vec<&str> = c.may_restart.iter().map(|&t| spec.components[t as usize].name.as_str()).collect();
            let _ = writeln!(out, "  may restart: {}", names.join(", "));
        }
        if c.hang_cpu_ms > 0 {
            let _ = writeln!(out, "  liveness: stuck after {} ms of CPU without progress", c.hang_cpu_ms);
        }
        if c.fault_injection {
            let _ = writeln!(out, "  fault injection: granted (test image)");
        }
        if c.restartable {
            let p = c.restart_policy;
            let _ = writeln!(
                out,
                "  restart policy: at most {} restarts in {} ms, back-off {} ms doubling",
                p.limit, p.window_ms, p.backoff_ms
            );
        }
        match (c.events, c.events_notification) {
            (true, Some(n)) => {
                let _ = writeln!(
                    out,
                    "  system events: the events page (read-only), signalled on #{} {} badge {:#x}",
                    n.0,
                    spec.objects[n.0 as usize].name,
                    system_spec::SYSTEM_EVENT_BADGE
                );
            }
            (true, None) => {
                let _ = writeln!(out, "  system events: the events page (read-only), polled");
            }
            _ => {}
        }
        if c.events {
            let _ = writeln!(out, "  confirms a peer's death within {} ms", c.confirm_death_ms);
        }
        if c.untrusted {
            let _ = writeln!(out, "  untrusted: restarted (or stopped) when it does not confirm a death in time");
        }
        if let Some(end) = &c.log_ring {
            let _ = writeln!(
                out,
                "  log ring: #{} {} (read-write here, read-only in the log server), signal slot {}",
                end.ring.0, spec.objects[end.ring.0 as usize].name, end.signal_slot
            );
        }
        if let Some(server) = &c.log_server {
            let names: Vec<&str> = server.rings.iter().map(|r| r.name.as_str()).collect();
            let _ = writeln!(
                out,
                "  log server: waits in slot {}, reads the rings of {} (read-only)",
                server.wait_slot,
                names.join(", ")
            );
        }
        for cap in &c.caps {
            let o = &spec.objects[cap.object.0 as usize];
            let _ = writeln!(
                out,
                "  slot {} -> #{} {} {:?} badge {}",
                cap.slot, cap.object.0, o.name, cap.rights, cap.badge
            );
        }
        for m in &c.mappings {
            let o = &spec.objects[m.object.0 as usize];
            let _ =
                writeln!(out, "  map {:#x} -> #{} {} {:?} cached={}", m.vaddr, m.object.0, o.name, m.access, m.cached);
        }
        for i in &c.interfaces {
            let _ = writeln!(out, "  interface {}: {:?}", i.name, i.binding);
        }
    }
    let _ = writeln!(out, "rights of every end:");
    out.push_str(&rights_table(spec));
    out
}

/// A component's interfaces by what their bindings hold, so that each
/// capability and mapping finds its end in one lookup.
struct EndNames<'a> {
    /// Interface by capability slot (the first interface using it).
    slot: HashMap<u64, &'a str>,
    /// Interrupt consumer by its IRQ handler slot.
    handler: HashMap<u64, &'a str>,
    /// Dataport by virtual address.
    vaddr: HashMap<u64, &'a str>,
}

impl<'a> EndNames<'a> {
    fn of(c: &'a Component) -> EndNames<'a> {
        let mut names = EndNames { slot: HashMap::new(), handler: HashMap::new(), vaddr: HashMap::new() };
        for i in &c.interfaces {
            let name = i.name.as_str();
            match i.binding {
                Binding::RpcClient { slot }
                | Binding::RpcServer { slot }
                | Binding::EventEmitter { slot }
                | Binding::EventConsumer { slot }
                | Binding::IoPortUser { slot } => {
                    names.slot.entry(slot).or_insert(name);
                }
                Binding::InterruptConsumer { slot, irq_handler_slot } => {
                    names.slot.entry(slot).or_insert(name);
                    names.handler.entry(irq_handler_slot).or_insert(name);
                }
                Binding::Dataport { vaddr, .. } => {
                    names.vaddr.entry(vaddr).or_insert(name);
                }
                Binding::Unconnected => {}
            }
        }
        names
    }

    /// `component.interface` of the capability in `slot`; the console's
    /// wiring, which has no interface, by what it is; else `component.?`.
    fn cap(&self, c: &Component, slot: u64) -> String {
        match self.slot.get(&slot).or_else(|| self.handler.get(&slot)) {
            Some(name) => format!("{}.{name}", c.name),
            None if c.log_ring.as_ref().is_some_and(|r| r.signal_slot == slot) => format!("{}.(log signal)", c.name),
            None if c.log_server.as_ref().is_some_and(|l| l.wait_slot == slot) => format!("{}.(log wait)", c.name),
            None => format!("{}.?", c.name),
        }
    }

    /// `component.dataport` of the mapping at `vaddr`, or `component.?`.
    fn mapping(&self, c: &Component, vaddr: u64) -> String {
        match self.vaddr.get(&vaddr) {
            Some(name) => format!("{}.{name}", c.name),
            None => format!("{}.?", c.name),
        }
    }
}

fn access_letters(access: Access) -> &'static str {
    match access {
        Access::ReadOnly => "R",
        Access::ReadWrite => "RW",
    }
}

fn rights_letters(r: Rights) -> String {
    let mut s = String::new();
    for (on, letter) in [(r.read, "R"), (r.write, "W"), (r.grant, "G"), (r.grant_reply, "P")] {
        if on {
            s.push_str(letter);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

/// Every end of every object, one line each, in object order: the
/// object, what it is, who holds it and with which rights (mappings:
/// `R`/`RW`; capabilities: `R` receive, `W` send, `G` grant, `P`
/// grant-reply, `-` none, then the badge). Made for review: a change in
/// anybody's rights is a changed line (`tests/golden/iolite-rights.txt`).
pub fn rights_table(spec: &SystemSpec) -> String {
    use std::fmt::Write;
    // Every end, bucketed by object in one pass over the components (in
    // their order, mappings before capabilities, as the table lists them),
    // then the console rings, which the loader maps outside the dataports.
    let mut ends: Vec<Vec<String>> = vec![Vec::new(); spec.objects.len()];
    for c in &spec.components {
        let names = EndNames::of(c);
        for m in &c.mappings {
            let cached = if m.cached { "" } else { " uncached" };
            let end = names.mapping(c, m.vaddr);
            if let Some(lines) = ends.get_mut(m.object.0 as usize) {
                lines.push(format!("{end:<24} map {}{cached}", access_letters(m.access)));
            }
        }
        for cap in &c.caps {
            let badge = if cap.badge != 0 { format!(" badge {:#x}", cap.badge) } else { String::new() };
            let end = names.cap(c, cap.slot);
            if let Some(lines) = ends.get_mut(cap.object.0 as usize) {
                lines.push(format!("{end:<24} cap {}{badge}", rights_letters(cap.rights)));
            }
        }
    }
    let mut rings: Vec<Vec<String>> = vec![Vec::new(); spec.objects.len()];
    for c in &spec.components {
        let mut ring_line = |ring: ObjectId, line: String| {
            if let Some(lines) = rings.get_mut(ring.0 as usize) {
                lines.push(line);
            }
        };
        if let Some(r) = &c.log_ring {
            ring_line(r.ring, format!("{:<24} map RW", format!("{}.(log ring)", c.name)));
        }
        if let Some(l) = &c.log_server {
            let mut read = std::collections::HashSet::new();
            for r in l.rings.iter().filter(|r| read.insert(r.ring)) {
                ring_line(r.ring, format!("{:<24} map R", format!("{}.(log rings)", c.name)));
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "# {:<18} {:<28} {:<24} rights", "object", "kind", "end (component.interface)");
    for (i, o) in spec.objects.iter().enumerate() {
        let kind = match &o.kind {
            ObjectKind::Endpoint => "endpoint".to_string(),
            ObjectKind::Notification => "notification".to_string(),
            ObjectKind::Frames { size } => format!("frames {size:#x}"),
            ObjectKind::DeviceFrames { paddr, size } => format!("device {paddr:#x}+{size:#x}"),
            ObjectKind::IoApicIrq(irq) => format!("irq pin {} badge {:#x}", irq.pin, irq.badge),
            ObjectKind::IoPorts { first, last } => format!("ports {first:#x}:{last:#x}"),
        };
        let mut holders = 0;
        for end in ends[i].iter().chain(&rings[i]) {
            let _ = writeln!(out, "{:<20} {kind:<28} {end}", o.name);
            holders += 1;
        }
        if holders == 0 {
            let _ = writeln!(out, "{:<20} {kind:<28} {:<24} -", o.name, "(nobody)");
        }
    }
    out
}
