//! Turns a checked [`System`] into the static [`SystemSpec`]: one object per
//! connection (two for an interrupt), capabilities in fixed slots and
//! dataports at fixed addresses. The layout rules are in `system_spec`'s
//! crate docs; [`TypeLayout`] is their single implementation, shared with
//! the glue emitter so code and spec cannot disagree.

use crate::ast::InterfaceKind;
use crate::check::{dataport_size, ComponentType, ConnectionInfo, ConnectorKind, EndRef, InstanceInfo, System};
use crate::diag::{err, Result};
use std::collections::HashMap;

mod listing;

pub use listing::{describe, rights_table};
use system_spec::{
    frame_size, Access, Binding, Cap, Component, Interface, IoApicIrq, LogRingEnd, LogRingSource, LogServer, Mapping,
    ObjectId, ObjectKind, PciIrq, RestartPolicy, Rights, SystemSpec, DATAPORT_BASE, DEFAULT_CNODE_SIZE_BITS,
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
///
/// In the order the loader carries a spec out: a component per software
/// instance (its thread and policy), then the objects of each connection
/// with the capabilities and mappings of its ends, then what refers to
/// other components (restart grants, system events) and the console's
/// rings.
pub fn build(system: &System) -> Result<SystemSpec> {
    let layouts: Vec<TypeLayout> = system.components.iter().map(TypeLayout::of).collect();
    let components =
        system.instances.iter().map(|inst| component(system, inst, &layouts[inst.component])).collect::<Result<_>>()?;
    let mut builder = Builder { system, spec: SystemSpec::new(), layouts, components, notifications: HashMap::new() };
    for (index, conn) in system.connections.iter().enumerate() {
        match conn.connector {
            ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType => builder.rpc(conn),
            ConnectorKind::Notification | ConnectorKind::NotificationNative => builder.notification(index, conn),
            ConnectorKind::SharedData | ConnectorKind::HardwareMmio => builder.shared_memory(conn),
            ConnectorKind::HardwareInterrupt => builder.interrupt(conn),
            ConnectorKind::HardwareIoPort => builder.io_ports(conn),
        }
    }
    let Builder { mut spec, mut components, .. } = builder;
    grants_and_events(system, &mut components)?;
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

/// The component of a software instance, without capabilities or
/// mappings yet (`None` for a hardware instance, which is no component):
/// its thread, CSpace, and what the supervisor does with it.
fn component(system: &System, inst: &InstanceInfo, layout: &TypeLayout) -> Result<Option<Component>> {
    let component = &system.components[inst.component];
    if component.is_hardware() {
        return Ok(None);
    }
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
    Ok(Some(Component {
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
        pci_match: inst.config.pci_match.as_ref().map(|(m, _)| m.clone()),
        caps: Vec::new(),
        mappings: Vec::new(),
        interfaces: component
            .decl
            .interfaces
            .iter()
            .map(|i| Interface { name: i.name.text.clone(), binding: Binding::Unconnected })
            .collect(),
    }))
}

/// The spec while connections are added to it.
struct Builder<'a> {
    system: &'a System,
    spec: SystemSpec,
    layouts: Vec<TypeLayout>,
    /// Per instance: its component (`None`: a hardware instance).
    components: Vec<Option<Component>>,
    /// A notification object per notification connection (by index), made
    /// when first needed: an interrupt delivered to one
    /// (`<irq>_notification`) may come before it in the assembly, and the
    /// IRQ must name an existing object.
    notifications: HashMap<usize, ObjectId>,
}

impl Builder<'_> {
    /// The capability slot of a (non-dataport) end.
    fn slot(&self, end: &EndRef) -> u64 {
        self.layouts[self.system.instances[end.instance].component].slot[end.interface]
            .expect("non-dataport interfaces have slots")
    }

    /// Gives `end`'s component a capability in its interface's slot and
    /// binds the interface as `bind` says.
    fn cap(&mut self, end: &EndRef, object: ObjectId, rights: Rights, badge: u64, bind: fn(u64) -> Binding) {
        let slot = self.slot(end);
        let c = self.components[end.instance].as_mut().expect("these ends are software");
        c.caps.push(Cap { slot, object, rights, badge });
        c.interfaces[end.interface].binding = bind(slot);
    }

    /// One endpoint: the server receives, each client calls with badge
    /// 1, 2, ... in `from` order, so the server tells who called.
    fn rpc(&mut self, conn: &ConnectionInfo) {
        let endpoint = self.spec.add_object(conn.name.text.clone(), ObjectKind::Endpoint);
        self.cap(&conn.to[0], endpoint, Rights::READ, 0, |slot| Binding::RpcServer { slot });
        for (index, client) in conn.from.iter().enumerate() {
            self.cap(client, endpoint, Rights::CALL, index as u64 + 1, |slot| Binding::RpcClient { slot });
        }
    }

    /// The connection's notification object, made on first use.
    fn notification_object(&mut self, index: usize) -> ObjectId {
        let name = &self.system.connections[index].name.text;
        *self.notifications.entry(index).or_insert_with(|| self.spec.add_object(name.clone(), ObjectKind::Notification))
    }

    /// One emitter signals badge 1; several (seL4NotificationNative) badge
    /// bit i for the i-th `from`, so the consumer tells them apart.
    fn notification(&mut self, index: usize, conn: &ConnectionInfo) {
        let notification = self.notification_object(index);
        for (index, emitter) in conn.from.iter().enumerate() {
            self.cap(emitter, notification, Rights::WRITE, 1 << index, |slot| Binding::EventEmitter { slot });
        }
        for consumer in &conn.to {
            self.cap(consumer, notification, Rights::READ, 0, |slot| Binding::EventConsumer { slot });
        }
    }

    /// Frames mapped at every end (seL4SharedData), or device frames at
    /// their physical address mapped at the drivers' ends (seL4HardwareMMIO),
    /// each with the rights the checker derived.
    fn shared_memory(&mut self, conn: &ConnectionInfo) {
        let system = self.system;
        let name = conn.name.text.clone();
        let first = &conn.from[0];
        let size = dataport_size(&system.component_of(first.instance).decl.interfaces[first.interface]);
        let (object, cached, ends) = if conn.connector == ConnectorKind::SharedData {
            (self.spec.add_object(name, ObjectKind::Frames { size }), true, conn.from.iter().chain(&conn.to).collect())
        } else {
            let hw = &conn.to[0];
            let mmio = &system.instances[hw.instance].config.mmio[&hw.interface];
            let kind = match mmio.bar {
                Some(bar) => {
                    let driver = system.instances[first.instance].name.text.clone();
                    ObjectKind::PciBarFrames { driver, bar, size }
                }
                None => ObjectKind::DeviceFrames { paddr: mmio.paddr, size },
            };
            let object = self.spec.add_object(name, kind);
            (object, mmio.cached, conn.from.iter().collect::<Vec<_>>())
        };
        for end in ends {
            let vaddr = self.layouts[system.instances[end.instance].component].vaddr[end.interface].expect("dataport");
            let config = &system.instances[end.instance].config;
            let access = config.access.get(&end.interface).copied().unwrap_or(Access::ReadWrite);
            let c = self.components[end.instance].as_mut().expect("software");
            c.mappings.push(Mapping { object, vaddr, access, cached });
            c.interfaces[end.interface].binding = Binding::Dataport { vaddr, size, access };
        }
    }

    /// An IOAPIC IRQ bound to the driver's notification: its own, or
    /// (`<irq>_notification`) that of the driver's other event, signalled
    /// with its own bit.
    fn interrupt(&mut self, conn: &ConnectionInfo) {
        let system = self.system;
        let hw = &conn.from[0];
        let irq = &system.instances[hw.instance].config.irq[&hw.interface];
        let driver = &conn.to[0];
        let config = &system.instances[driver.instance].config;
        let notification = match config.irq_into.get(&driver.interface) {
            Some((into, _)) => {
                let (target, _) = system.connection_of(driver.instance, *into).expect("checked: connected");
                self.notification_object(target)
            }
            None => self.spec.add_object(conn.name.text.clone(), ObjectKind::Notification),
        };
        let badge = config.irq_badge[&driver.interface];
        let kind = if irq.device {
            let driver = system.instances[driver.instance].name.text.clone();
            ObjectKind::PciIrq(PciIrq { driver, vector: irq.vector, notification, badge })
        } else {
            ObjectKind::IoApicIrq(IoApicIrq {
                ioapic: irq.ioapic,
                pin: irq.pin,
                level_triggered: irq.level,
                active_low: irq.polarity_low,
                vector: irq.vector,
                notification,
                badge,
            })
        };
        let handler = self.spec.add_object(format!("{}.irq", conn.name.text), kind);
        let layout = &self.layouts[system.instances[driver.instance].component];
        let s = layout.slot[driver.interface].expect("consumes has a slot");
        let h = layout.irq_handler_slot[driver.interface].expect("interrupt consumers have a handler slot");
        let c = self.components[driver.instance].as_mut().expect("software");
        c.caps.push(Cap { slot: s, object: notification, rights: Rights::READ, badge: 0 });
        c.caps.push(Cap { slot: h, object: handler, rights: Rights::ALL, badge: 0 });
        c.interfaces[driver.interface].binding = Binding::InterruptConsumer { slot: s, irq_handler_slot: h };
    }

    /// The I/O port range of the hardware end, held by its one user.
    fn io_ports(&mut self, conn: &ConnectionInfo) {
        let hw = &conn.to[0];
        let config = &self.system.instances[hw.instance].config;
        let kind = match config.port_bars.get(&hw.interface) {
            Some(&bar) => {
                let driver = self.system.instances[conn.from[0].instance].name.text.clone();
                ObjectKind::PciBarPorts { driver, bar }
            }
            None => {
                let (first, last) = config.ports[&hw.interface];
                ObjectKind::IoPorts { first, last }
            }
        };
        let ports = self.spec.add_object(conn.name.text.clone(), kind);
        self.cap(&conn.from[0], ports, Rights::ALL, 0, |slot| Binding::IoPortUser { slot });
    }
}

/// What refers to other components or to the finished wiring: restart
/// grants (by spec index: the spec numbers software components only) and
/// the notification the supervisor signals system events on.
fn grants_and_events(system: &System, components: &mut [Option<Component>]) -> Result<()> {
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
        let Some(c) = components[i].as_mut() else { continue };
        c.may_restart = inst.config.may_restart.iter().map(|&t| spec_index[t].expect("checked: software")).collect();
        // The supervisor signals the notification behind the named
        // interface with SYSTEM_EVENT_BADGE, far above the emitters' bits
        // (at most 28 `from` ends).
        let Some((interface, pos)) = &inst.config.system_events else { continue };
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
    Ok(())
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
