//! The rules that need the whole system: every non-`maybe` interface
//! connected, device memory with its one driver, one writer per shared
//! region, interrupts and their badges, I/O port ranges, and instances of a
//! type wired and configured alike (they share one ELF and glue).

use super::model::{dataport_size, ConnectionInfo, ConnectorKind, EndRef};
use super::Checker;
use crate::ast::InterfaceKind;
use crate::diag::{err, Pos, Result};
use std::collections::HashMap;
use system_spec::Access;

impl Checker {
    /// Assembles each hardware interrupt from its settings and checks that
    /// every non-`maybe` interface is connected.
    pub(super) fn check_instances(&mut self) -> Result<()> {
        for index in 0..self.system.instances.len() {
            let component = self.system.component_of(index).clone();
            let name = self.system.instances[index].name.clone();
            for (i, decl) in component.decl.interfaces.iter().enumerate() {
                let needs_connection =
                    matches!(decl.kind, InterfaceKind::Uses | InterfaceKind::Consumes | InterfaceKind::Dataport)
                        && !decl.maybe;
                if needs_connection && self.system.connection_of(index, i).is_none() {
                    return err(
                        &name.pos,
                        format!("non-optional interface '{}.{}' is not connected", name.text, decl.name.text),
                    );
                }
            }
        }
        Ok(())
    }

    /// Device memory belongs to its one driver: whoever can write a
    /// device's registers can program its DMA engine (no IOMMU here) and so
    /// read or write any physical memory. One connection's `from` ends must
    /// be one instance, and no other connection may map an overlapping
    /// physical range.
    fn one_driver(&self, conn: &ConnectionInfo, regions: &mut Vec<(u64, u64, usize, Pos, String)>) -> Result<()> {
        let hw = &conn.to[0];
        let inst = &self.system.instances[hw.instance];
        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
        let mmio = &inst.config.mmio[&hw.interface];
        let device = format!("'{}.{iface}'", inst.name.text);
        let driver = conn.from[0].instance;
        if let Some(second) = conn.from.iter().find(|e| e.instance != driver) {
            return err(
                &second.pos,
                format!(
                    "device memory of {device} ({:#x}, {:#x} bytes) is already mapped into '{}' at {}; device registers belong to their one driver (map them into one component; others ask it, e.g. by a notification)",
                    mmio.paddr, mmio.size, self.system.instances[driver].name.text, conn.from[0].pos
                ),
            );
        }
        let (base, end) = (mmio.paddr, mmio.paddr + mmio.size);
        for (other_base, other_end, other_driver, other_pos, other_device) in regions.iter() {
            if base < *other_end && *other_base < end {
                let verb = if *other_driver == driver { "also" } else { "already" };
                return err(
                    &conn.from[0].pos,
                    format!(
                        "device memory of {device} ({base:#x}..{end:#x}) overlaps that of {other_device}, {verb} mapped into '{}' at {other_pos}; device registers belong to their one driver",
                        self.system.instances[*other_driver].name.text
                    ),
                );
            }
        }
        regions.push((base, end, driver, conn.from[0].pos.clone(), device));
        Ok(())
    }

    /// A seL4HardwareMMIO connection: its size, a fixed address or a BAR
    /// of the device found at boot, and its one driver.
    fn device_memory(
        &self,
        conn: &ConnectionInfo,
        device_regions: &mut Vec<(u64, u64, usize, Pos, String)>,
    ) -> Result<()> {
        let hw = &conn.to[0];
        let inst = &self.system.instances[hw.instance];
        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
        let mmio = inst.config.mmio.get(&hw.interface);
        if mmio.is_none_or(|m| m.size == 0) {
            return err(
                &hw.pos,
                format!("seL4HardwareMMIO connection '{}' needs '{}.{iface}_size'", conn.name.text, inst.name.text),
            );
        }
        let paddr = self.paddr_set(hw.instance, &format!("{iface}_paddr"));
        match (paddr, mmio.and_then(|m| m.bar)) {
            (true, Some(_)) => {
                return err(
                    &hw.pos,
                    format!("'{}.{iface}' has both '_paddr' and '_bar': a fixed address or a BAR of the device found at boot, not both", inst.name.text),
                );
            }
            (false, None) => {
                return err(
                    &hw.pos,
                    format!(
                        "seL4HardwareMMIO connection '{}' needs '{}.{iface}_bar' (a BAR of the PCI device its driver matches) or '{}.{iface}_paddr'",
                        conn.name.text, inst.name.text, inst.name.text
                    ),
                );
            }
            (false, Some(_)) => {
                self.matched_driver(&conn.from[0], &format!("{}.{iface}_bar", inst.name.text))?;
                self.one_driver_only(conn)?;
            }
            (true, None) => self.one_driver(conn, device_regions)?,
        }
        Ok(())
    }

    /// A seL4HardwareIOPort connection: a fixed range (not overlapping
    /// another) or an I/O BAR of the device found at boot.
    fn io_ports(&self, conn: &ConnectionInfo, port_ranges: &mut Vec<((u16, u16), Pos, String)>) -> Result<()> {
        let hw = &conn.to[0];
        let inst = &self.system.instances[hw.instance];
        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
        let range = inst.config.ports.get(&hw.interface).copied();
        let bar = inst.config.port_bars.contains_key(&hw.interface);
        let range = match (range, bar) {
            (Some(_), true) => {
                return err(
                    &hw.pos,
                    format!("'{}.{iface}' has both '_attributes' and '_bar': fixed ports or a BAR of the device found at boot, not both", inst.name.text),
                );
            }
            (None, true) => {
                let what = format!("{}.{iface}_bar", inst.name.text);
                self.matched_driver(&conn.from[0], &what)?;
                return Ok(());
            }
            (Some(range), false) => range,
            (None, false) => {
                return err(
                    &hw.pos,
                    format!(
                        "seL4HardwareIOPort connection '{}' needs '{}.{iface}_bar' (an I/O BAR of the PCI device its driver matches) or '{}.{iface}_attributes = \"0xFIRST:0xLAST\"'",
                        conn.name.text, inst.name.text, inst.name.text
                    ),
                );
            }
        };
        for (other, other_pos, other_name) in port_ranges.iter() {
            if range.0 <= other.1 && other.0 <= range.1 {
                return err(
                    &hw.pos,
                    format!(
                        "I/O ports {:#x}:{:#x} of '{}.{iface}' overlap those of '{other_name}' at {other_pos}",
                        range.0, range.1, inst.name.text
                    ),
                );
            }
        }
        port_ranges.push((range, hw.pos.clone(), format!("{}.{iface}", inst.name.text)));
        Ok(())
    }

    /// A device object of the PCI function found at boot needs a driver
    /// that says what it drives (`<driver>.match`).
    fn matched_driver(&self, driver: &EndRef, what: &str) -> Result<()> {
        let inst = &self.system.instances[driver.instance];
        if inst.config.pci_match.is_none() {
            return err(
                &driver.pos,
                format!(
                    "'{what}' is a device found at boot, but its driver '{}' names no match (set '{}.match', e.g. \"net\")",
                    inst.name.text, inst.name.text
                ),
            );
        }
        Ok(())
    }

    /// Device memory of a device found at boot belongs to its one driver
    /// too (where it lies is known only then, and the loader gives each
    /// function to one driver).
    fn one_driver_only(&self, conn: &ConnectionInfo) -> Result<()> {
        let driver = conn.from[0].instance;
        if let Some(second) = conn.from.iter().find(|e| e.instance != driver) {
            return err(
                &second.pos,
                format!(
                    "device memory of connection '{}' is already mapped into '{}'; device registers belong to their one driver",
                    conn.name.text, self.system.instances[driver].name.text
                ),
            );
        }
        Ok(())
    }

    /// Least rights for shared memory: an end without `_access` is
    /// read-write on the `from` side (the owner, who fills the region) and
    /// read-only on the `to` side; both ends of a channel are read-write.
    /// A region has one writing component unless it is a channel or the
    /// assembly says why (`<connection>.shared_writers`). The defaults are
    /// written into each instance's `access`, so the spec, the glue and
    /// the type check below all see the same rights.
    fn one_writer(&mut self, conn: &ConnectionInfo) -> Result<()> {
        for (end, owner) in conn.from.iter().map(|e| (e, true)).chain(conn.to.iter().map(|e| (e, false))) {
            let default = if owner || conn.channel { Access::ReadWrite } else { Access::ReadOnly };
            self.system.instances[end.instance].config.access.entry(end.interface).or_insert(default);
        }
        if conn.channel || conn.shared_writers.is_some() {
            return Ok(());
        }
        let mut writer: Option<&EndRef> = None;
        for end in conn.from.iter().chain(&conn.to) {
            if self.system.instances[end.instance].config.access[&end.interface] != Access::ReadWrite {
                continue;
            }
            match writer {
                None => writer = Some(end),
                Some(first) if first.instance == end.instance => {}
                Some(first) => {
                    let name = |e: &EndRef| {
                        let i = &self.system.instances[e.instance];
                        format!(
                            "{}.{}",
                            i.name.text,
                            self.system.component_of(e.instance).decl.interfaces[e.interface].name.text
                        )
                    };
                    return err(
                        &end.pos,
                        format!(
                            "'{}' would be a second writer of '{}' (after '{}' at {}): a shared region has one writer; map this end read-only (\"R\"), or say why with '{}.shared_writers = \"...\"' (or '{}.channel = true' for a two-ended channel)",
                            name(end), conn.name.text, name(first), first.pos, conn.name.text, conn.name.text
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// The badge an interrupt signals its consumer with: 1 on its own
    /// notification; with `<irq>_notification = "<consumes>"`, the bit
    /// after those of the emitters of that interface's notification
    /// connection, so one `wait()` tells the interrupt from each emitter.
    fn irq_badge(&self, conn: &ConnectionInfo) -> Result<u64> {
        let driver = &conn.to[0];
        let inst = &self.system.instances[driver.instance];
        let Some((into, pos)) = inst.config.irq_into.get(&driver.interface) else { return Ok(1) };
        let iface = &self.system.component_of(driver.instance).decl.interfaces[*into].name.text;
        let target = self.system.connection_of(driver.instance, *into).map(|(c, _)| &self.system.connections[c]);
        let Some(target) =
            target.filter(|t| matches!(t.connector, ConnectorKind::Notification | ConnectorKind::NotificationNative))
        else {
            return err(
                pos,
                format!(
                    "'{}.{iface}' must be connected by seL4Notification or seL4NotificationNative to take the interrupt of '{}'",
                    inst.name.text, conn.name.text
                ),
            );
        };
        if target.from.len() >= 28 {
            return err(
                pos,
                format!("'{}' has no badge bit left for the interrupt (28 bits, one per emitter)", target.name.text),
            );
        }
        Ok(1 << target.from.len())
    }

    /// RPC calls must not form a cycle. A component has one thread, and a
    /// call blocks it until the callee replies: if `a` calls `b` while `b`
    /// calls `a` (or any longer ring, or a component calling itself), each
    /// can wait for the other forever, using no CPU, so no liveness check
    /// that counts CPU time would ever see it. An acyclic call graph makes
    /// that deadlock impossible by construction; what is left for the
    /// supervisor's liveness watch is a component that spins.
    pub(super) fn check_call_graph(&self) -> Result<()> {
        let count = self.system.instances.len();
        // Edges in written order: caller -> (callee, connection, caller's end).
        let mut calls: Vec<Vec<(usize, usize, Pos)>> = vec![Vec::new(); count];
        for (ci, conn) in self.system.connections.iter().enumerate() {
            if !matches!(conn.connector, ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType) {
                continue;
            }
            let callee = conn.to[0].instance;
            for end in &conn.from {
                calls[end.instance].push((callee, ci, end.pos.clone()));
            }
        }
        // Depth-first, iteratively; `path` holds the edges that led here.
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnPath,
            Done,
        }
        let mut mark = vec![Mark::New; count];
        for root in 0..count {
            if mark[root] != Mark::New {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            let mut path: Vec<(usize, usize, usize)> = Vec::new(); // (caller, edge index, callee)
            mark[root] = Mark::OnPath;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let Some((callee, _, _)) = calls[node].get(*next).cloned() else {
                    mark[node] = Mark::Done;
                    stack.pop();
                    path.pop();
                    continue;
                };
                let edge = *next;
                *next += 1;
                match mark[callee] {
                    Mark::Done => {}
                    Mark::New => {
                        mark[callee] = Mark::OnPath;
                        path.push((node, edge, callee));
                        stack.push((callee, 0));
                    }
                    Mark::OnPath => {
                        let start = path.iter().position(|&(caller, _, _)| caller == callee).unwrap_or(path.len());
                        let mut ring: Vec<(usize, usize)> = path[start..].iter().map(|&(c, e, _)| (c, e)).collect();
                        ring.push((node, edge));
                        return Err(self.call_cycle(&calls, &ring));
                    }
                }
            }
        }
        Ok(())
    }

    /// The error for a ring of calls, reported at the call that closes it.
    fn call_cycle(&self, calls: &[Vec<(usize, usize, Pos)>], ring: &[(usize, usize)]) -> crate::diag::Diagnostic {
        let name = |i: usize| self.system.instances[i].name.text.clone();
        let mut names: Vec<String> = ring.iter().map(|&(caller, _)| name(caller)).collect();
        names.push(name(ring[0].0));
        let via: Vec<String> = ring
            .iter()
            .map(|&(caller, edge)| {
                let (_, ci, pos) = &calls[caller][edge];
                format!("'{}' at {pos}", self.system.connections[*ci].name.text)
            })
            .collect();
        let (last_caller, last_edge) = *ring.last().expect("a ring has an edge");
        let pos = calls[last_caller][last_edge].2.clone();
        let message = format!(
            "RPC calls form a cycle: {} (via {}); a component has one thread and a call blocks it until the reply, so these can wait for each other forever: break the cycle (e.g. let one side signal a notification instead of calling)",
            names.join(" -> "),
            via.join(", ")
        );
        crate::diag::Diagnostic::new(&pos, message)
    }

    pub(super) fn check_connections(&mut self) -> Result<()> {
        let mut device_regions: Vec<(u64, u64, usize, Pos, String)> = Vec::new();
        let mut vectors: HashMap<u32, Pos> = HashMap::new();
        let mut port_ranges: Vec<((u16, u16), Pos, String)> = Vec::new();
        for ci in 0..self.system.connections.len() {
            let conn = self.system.connections[ci].clone();
            match conn.connector {
                ConnectorKind::SharedData | ConnectorKind::HardwareMmio => {
                    let sizes: Vec<u64> = conn
                        .from
                        .iter()
                        .chain(&conn.to)
                        .map(|e| dataport_size(&self.system.component_of(e.instance).decl.interfaces[e.interface]))
                        .collect();
                    debug_assert!(sizes.windows(2).all(|w| w[0] == w[1]), "types were compared");
                    for end in conn.from.iter().chain(&conn.to) {
                        let inst = &self.system.instances[end.instance];
                        let Some(access) = inst.config.access.get(&end.interface).copied() else { continue };
                        if conn.connector == ConnectorKind::HardwareMmio && access != Access::ReadWrite {
                            let iface =
                                &self.system.component_of(end.instance).decl.interfaces[end.interface].name.text;
                            return err(
                                &end.pos,
                                format!("'{}.{iface}_access' asks for read-only, but seL4HardwareMMIO always maps the device read-write (upstream ignores _access here)", inst.name.text),
                            );
                        }
                    }
                    if conn.connector == ConnectorKind::HardwareMmio {
                        self.device_memory(&conn, &mut device_regions)?;
                    } else {
                        self.one_writer(&conn)?;
                    }
                }
                ConnectorKind::HardwareInterrupt => {
                    let hw = &conn.from[0];
                    let irq = self.interrupt(hw, &conn.name.text)?;
                    if irq.device {
                        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
                        let what =
                            format!("{}.{iface}_irq_type = \"device\"", self.system.instances[hw.instance].name.text);
                        self.matched_driver(&conn.to[0], &what)?;
                    }
                    if let Some(previous) = vectors.insert(irq.vector, hw.pos.clone()) {
                        return err(
                            &hw.pos,
                            format!("IRQ vector {} is already used by the interrupt at {previous}", irq.vector),
                        );
                    }
                    self.system.instances[hw.instance].config.irq.insert(hw.interface, irq);
                    let badge = self.irq_badge(&conn)?;
                    let driver = &conn.to[0];
                    self.system.instances[driver.instance].config.irq_badge.insert(driver.interface, badge);
                }
                ConnectorKind::HardwareIoPort => self.io_ports(&conn, &mut port_ranges)?,
                ConnectorKind::RpcCall
                | ConnectorKind::RpcCallNoType
                | ConnectorKind::Notification
                | ConnectorKind::NotificationNative => {}
            }
        }
        for inst in &self.system.instances {
            for (i, (_, pos)) in &inst.config.irq_into {
                if !inst.config.irq_badge.contains_key(i) {
                    let iface = &self.system.components[inst.component].decl.interfaces[*i].name.text;
                    return err(
                        pos,
                        format!("'{}.{iface}' is not connected by seL4HardwareInterrupt: it has no interrupt to deliver elsewhere", inst.name.text),
                    );
                }
            }
        }
        Ok(())
    }

    /// Every instance of a type must wire each interface the same way, so
    /// one ELF and one glue file serve them all.
    pub(super) fn check_component_types(&mut self) -> Result<()> {
        let mut first_seen: HashMap<(usize, usize), (usize, Option<ConnectorKind>, Access)> = HashMap::new();
        for index in 0..self.system.instances.len() {
            let ci = self.system.instances[index].component;
            let component = &self.system.components[ci];
            if component.is_hardware() {
                continue;
            }
            for i in 0..component.decl.interfaces.len() {
                let connector = self.system.connection_of(index, i).map(|(c, _)| self.system.connections[c].connector);
                let access = self.system.instances[index].config.access.get(&i).copied().unwrap_or(Access::ReadWrite);
                let access = if connector.is_some() { access } else { Access::ReadWrite };
                match first_seen.get(&(ci, i)) {
                    None => {
                        first_seen.insert((ci, i), (index, connector, access));
                    }
                    Some(&(other, other_connector, other_access)) => {
                        let iface = &component.decl.interfaces[i].name.text;
                        let (a, b) = (&self.system.instances[other].name.text, &self.system.instances[index].name.text);
                        if let (Some(x), Some(y)) = (other_connector, connector) {
                            if x != y {
                                return err(
                                    &self.system.instances[index].name.pos,
                                    format!("instances '{a}' and '{b}' of component '{}' connect '{iface}' with different connectors ({} and {})", component.decl.name.text, x.name(), y.name()),
                                );
                            }
                            if other_access != access {
                                return err(
                                    &self.system.instances[index].name.pos,
                                    format!("instances '{a}' and '{b}' of component '{}' map dataport '{iface}' with different rights", component.decl.name.text),
                                );
                            }
                        }
                        if other_connector.is_some() {
                            continue;
                        }
                        first_seen.insert((ci, i), (index, connector, access));
                    }
                }
            }
        }
        for ((ci, i), (_, connector, access)) in first_seen {
            self.system.components[ci].connectors[i] = connector;
            self.system.components[ci].access[i] = access;
        }
        for inst in &self.system.instances {
            for (&i, &badge) in &inst.config.irq_badge {
                let ct = &mut self.system.components[inst.component];
                if ct.irq_badge[i] != 0 && ct.irq_badge[i] != badge {
                    return err(
                        &inst.name.pos,
                        format!("instances of component '{}' take the interrupt of '{}' with different badges (instances of a type share one ELF)", ct.decl.name.text, ct.decl.interfaces[i].name.text),
                    );
                }
                ct.irq_badge[i] = badge;
            }
        }
        self.resolve_attribute_values()
    }
}
