//! The configuration: every setting of the merged assemblies (and `--set`)
//! against what its target declares or this compiler implements. What a
//! value may be is in `values`; upstream settings left out, with why, in
//! `unsupported`.

use super::model::{dataport_size, ComponentType, ConnectorKind, EndRef, IrqConfig, MmioConfig};
use super::unsupported::{
    unsupported_instance_setting, PER_INTERFACE_THREAD_ATTRIBUTES, UNSUPPORTED_CONNECTION_SETTINGS,
};
use super::values::{int_in, parse_access, parse_port_range, policy_check, string_value, type_check};
use super::Checker;
use crate::ast::{self, InterfaceKind, Value, ValueKind};
use crate::diag::{err, Pos, Result};
use system_spec::{MAX_IRQ_VECTOR, PAGE_SIZE};

fn is_dataport(component: &ComponentType, i: usize) -> bool {
    component.decl.interfaces[i].kind == InterfaceKind::Dataport
}

/// `system_events`: `"poll"`, or a `consumes` interface of the component
/// (its index), with where the setting is.
fn system_events(component: &ComponentType, value: &Value, label: &str) -> Result<(Option<usize>, Pos)> {
    let name = string_value(value, label)?;
    if name == "poll" {
        return Ok((None, value.pos.clone()));
    }
    match component.interface(name).filter(|&i| component.decl.interfaces[i].kind == InterfaceKind::Consumes) {
        Some(i) => Ok((Some(i), value.pos.clone())),
        None => err(
            &value.pos,
            format!(
                "{label} must name a 'consumes' interface of component '{}' (or be \"poll\"), not '{name}'",
                component.decl.name.text
            ),
        ),
    }
}

impl Checker {
    /// The connection settings: `channel`, `shared_writers`, `pool` and
    /// `initialiser`, all on `seL4SharedData` only (upstream accepts them
    /// silently).
    pub(super) fn connection_setting(&mut self, connection: usize, s: &ast::Setting) -> Result<()> {
        let conn = &mut self.system.connections[connection];
        let label = format!("'{}.{}'", s.target.text, s.attribute.text);
        let known = ["channel", "shared_writers", "pool", "initialiser"];
        if let Some((_, why)) = UNSUPPORTED_CONNECTION_SETTINGS.iter().find(|(name, _)| *name == s.attribute.text) {
            return err(&s.attribute.pos, format!("attribute {label} is not supported: {why}"));
        }
        if !known.contains(&s.attribute.text.as_str()) {
            return err(
                &s.attribute.pos,
                format!(
                    "unknown attribute '{}' for connection '{}' (connection settings: channel, shared_writers, pool, initialiser)",
                    s.attribute.text, s.target.text
                ),
            );
        }
        if conn.connector != ConnectorKind::SharedData {
            return err(
                &s.attribute.pos,
                format!("{label} applies to seL4SharedData connections only, not {}", conn.connector.name()),
            );
        }
        if s.attribute.text == "channel" {
            conn.channel = int_in(&s.value, &label, 0, 1)? == 1;
            if conn.channel && (conn.from.len() != 1 || conn.to.len() != 1) {
                return err(
                    &s.value.pos,
                    format!(
                        "{label}: a channel joins exactly two ends (one 'from', one 'to'), '{}' has {}",
                        s.target.text,
                        conn.from.len() + conn.to.len()
                    ),
                );
            }
        } else if s.attribute.text == "pool" {
            if int_in(&s.value, &label, 0, 1)? == 1 {
                conn.pool_setting = Some(s.attribute.pos.clone());
            }
        } else if s.attribute.text == "initialiser" {
            let name = string_value(&s.value, &label)?;
            let end = self.instance_names.get(name).copied().filter(|&i| {
                let conn = &self.system.connections[connection];
                conn.from.iter().chain(&conn.to).any(|e| e.instance == i)
            });
            let Some(instance) = end else {
                return err(
                    &s.value.pos,
                    format!("{label} names '{name}', which is not an end of '{}'", s.target.text),
                );
            };
            self.system.connections[connection].initialiser = Some((instance, s.value.pos.clone()));
        } else {
            let why = string_value(&s.value, &label)?;
            if why.trim().is_empty() {
                return err(&s.value.pos, format!("{label} must say why several components write this region"));
            }
            conn.shared_writers = Some(why.to_string());
        }
        Ok(())
    }

    /// One setting of an instance: an attribute its component declares, or
    /// one this compiler implements for software or hardware instances.
    pub(super) fn instance_setting(&mut self, instance: usize, s: &ast::Setting) -> Result<()> {
        let component = &self.system.components[self.system.instances[instance].component];
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let label = format!("'{target}.{attr}'");
        if let Some(why) = self.hand_written_pool_id(instance, attr) {
            return err(&s.attribute.pos, format!("{label}: {why}; remove this setting"));
        }
        if let Some(decl) = component.decl.attributes.iter().find(|a| a.name.text == attr) {
            type_check(decl, &s.value, &label)?;
            policy_check(&component.decl.name.text, decl, &s.value, &label)?;
            self.system.instances[instance].config.attributes.insert(attr.to_string(), s.value.clone());
            return Ok(());
        }
        if let Some(why) = unsupported_instance_setting(component, attr) {
            return err(&s.attribute.pos, format!("attribute {label} is not supported: {why}"));
        }
        let handled = if component.is_hardware() {
            self.hardware_setting(instance, s)?
        } else {
            self.software_setting(instance, s)?
        };
        if handled {
            return Ok(());
        }
        let component = &self.system.components[self.system.instances[instance].component];
        err(
            &s.attribute.pos,
            format!("unknown attribute '{attr}' for instance '{target}' (component '{}')", component.decl.name.text),
        )
    }

    /// A setting of a software instance that this compiler implements:
    /// its thread, its supervision, or how it is wired beyond its
    /// connections. `false` if `s` is none of them.
    fn software_setting(&mut self, instance: usize, s: &ast::Setting) -> Result<bool> {
        let label = format!("'{}.{}'", s.target.text, s.attribute.text);
        if self.thread_setting(instance, s, &label)? || self.supervision_setting(instance, s, &label)? {
            return Ok(true);
        }
        self.wiring_setting(instance, s, &label)
    }

    /// The thread and its CSpace: priorities, stack, CNode size.
    fn thread_setting(&mut self, instance: usize, s: &ast::Setting, label: &str) -> Result<bool> {
        let attr = s.attribute.text.as_str();
        let config = &mut self.system.instances[instance].config;
        match attr {
            "priority" | "_priority" | "max_priority" | "_max_priority" => {
                let value = int_in(&s.value, label, 0, 255)? as u8;
                // The control-thread form wins over the instance-wide one.
                let slot = if attr.ends_with("max_priority") { &mut config.max_priority } else { &mut config.priority };
                if attr.starts_with('_') || slot.is_none() {
                    *slot = Some(value);
                }
                if !attr.ends_with("max_priority") && (attr.starts_with('_') || config.priority_setting.is_none()) {
                    config.priority_setting = Some(s.value.pos.clone());
                }
            }
            "_stack_size" => config.stack_size = Some(int_in(&s.value, label, 1, 1 << 30)? as u64),
            "cnode_size_bits" => config.cnode_size_bits = Some(int_in(&s.value, label, 4, 20)? as u8),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// What the supervisor does with the instance: restarts and their
    /// policy, the liveness watch, the death protocol's deadline and trust,
    /// fault injection.
    fn supervision_setting(&mut self, instance: usize, s: &ast::Setting, label: &str) -> Result<bool> {
        let config = &mut self.system.instances[instance].config;
        let flag = |value: &Value| Ok::<bool, crate::diag::Diagnostic>(int_in(value, label, 0, 1)? == 1);
        match s.attribute.text.as_str() {
            "restartable" => config.restartable = flag(&s.value)?,
            "untrusted" => config.untrusted = flag(&s.value)?,
            "fault_injection" => config.fault_injection = flag(&s.value)?,
            "hang_cpu_ms" => config.hang_cpu_ms = int_in(&s.value, label, 0, 3_600_000)? as u32,
            "confirm_death_ms" => config.confirm_death_ms = Some(int_in(&s.value, label, 1, 600_000)? as u32),
            "restart_limit" => config.restart_limit = Some(int_in(&s.value, label, 1, 1000)? as u32),
            "restart_window_ms" => config.restart_window_ms = Some(int_in(&s.value, label, 1, 3_600_000)? as u32),
            "restart_backoff_ms" => config.restart_backoff_ms = Some(int_in(&s.value, label, 0, 600_000)? as u32),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// How the instance is wired beyond its connections: the console
    /// server, system events, restart grants, an interrupt delivered into
    /// another notification, dataport rights; per-interface thread
    /// attributes are refused here with why.
    fn wiring_setting(&mut self, instance: usize, s: &ast::Setting, label: &str) -> Result<bool> {
        let component = &self.system.components[self.system.instances[instance].component];
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let interface_with_suffix = |suffix: &str| -> Option<usize> {
            let prefix = attr.strip_suffix(suffix)?;
            component.interface(prefix)
        };
        let config = &mut self.system.instances[instance].config;
        match attr {
            "log_server" => {
                if int_in(&s.value, label, 0, 1)? == 1 {
                    config.log_server = Some(s.value.pos.clone());
                }
                return Ok(true);
            }
            "system_events" => {
                config.system_events = Some(system_events(component, &s.value, label)?);
                return Ok(true);
            }
            "match" => {
                let name = string_value(&s.value, label)?;
                if pci::match_kind(name).is_none() {
                    let known: Vec<String> = pci::MATCHES.iter().map(|m| format!("\"{}\"", m.name)).collect();
                    return err(
                        &s.value.pos,
                        format!(
                            "{label} = \"{name}\" names no kind of device a driver here drives; use one of {}",
                            known.join(", ")
                        ),
                    );
                }
                config.pci_match = Some((name.to_string(), s.value.pos.clone()));
                return Ok(true);
            }
            "may_restart" => {
                let ValueKind::List(names) = &s.value.kind else {
                    return err(
                        &s.value.pos,
                        format!(
                            "mistyped assignment: {label} expects a list of instance names, found {}",
                            s.value.kind.describe()
                        ),
                    );
                };
                for name in names {
                    string_value(name, label)?;
                }
                config.may_restart_names = names.clone();
                return Ok(true);
            }
            _ => {}
        }
        if let Some(i) = interface_with_suffix("_notification") {
            if component.decl.interfaces[i].kind == InterfaceKind::Consumes {
                let name = string_value(&s.value, label)?;
                let Some(into) = component.interface(name) else {
                    return err(
                        &s.value.pos,
                        format!("{label} names '{name}', which is not an interface of '{target}'"),
                    );
                };
                if component.decl.interfaces[into].kind != InterfaceKind::Consumes || into == i {
                    return err(
                        &s.value.pos,
                        format!("{label} names '{name}', which is not another 'consumes' interface of '{target}'"),
                    );
                }
                config.irq_into.insert(i, (into, s.value.pos.clone()));
                return Ok(true);
            }
        }
        if let Some(i) = interface_with_suffix("_access") {
            if component.decl.interfaces[i].kind == InterfaceKind::Dataport {
                let rights = string_value(&s.value, label)?;
                config.access.insert(i, parse_access(rights, label, &s.value.pos)?);
                return Ok(true);
            }
        }
        for suffix in PER_INTERFACE_THREAD_ATTRIBUTES {
            if interface_with_suffix(suffix).is_some() {
                return err(
                    &s.attribute.pos,
                    format!("per-interface thread attribute {label} is not supported: each component has one thread (set '{target}.priority' or '{target}._stack_size')"),
                );
            }
        }
        Ok(false)
    }

    /// A setting of a hardware instance: its device memory, interrupts and
    /// I/O ports. `false` if `s` is none of them.
    fn hardware_setting(&mut self, instance: usize, s: &ast::Setting) -> Result<bool> {
        let component = &self.system.components[self.system.instances[instance].component];
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let label = format!("'{target}.{attr}'");
        let interface_with_suffix = |suffix: &str| -> Option<usize> {
            let prefix = attr.strip_suffix(suffix)?;
            component.interface(prefix)
        };
        let config = &mut self.system.instances[instance].config;
        if let Some(i) = interface_with_suffix("_paddr").filter(|&i| is_dataport(component, i)) {
            let paddr = int_in(&s.value, &label, 0, (1 << 52) - 1)? as u64;
            if !paddr.is_multiple_of(PAGE_SIZE) {
                return err(&s.value.pos, format!("{label} = {paddr:#x} is not page-aligned"));
            }
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false, bar: None }).paddr = paddr;
            return Ok(true);
        }
        if let Some(i) = interface_with_suffix("_size").filter(|&i| is_dataport(component, i)) {
            let size = int_in(&s.value, &label, 1, 1 << 40)? as u64;
            let declared = dataport_size(&component.decl.interfaces[i]);
            if size != declared {
                return err(
                    &s.value.pos,
                    format!(
                        "{label} is {size:#x} but dataport '{}' is {} ({declared:#x} bytes)",
                        component.decl.interfaces[i].name.text, component.decl.interfaces[i].type_name.text
                    ),
                );
            }
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false, bar: None }).size = size;
            return Ok(true);
        }
        if let Some(i) = interface_with_suffix("_bar") {
            let bar = int_in(&s.value, &label, 0, 5)? as u8;
            if is_dataport(component, i) {
                config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false, bar: None }).bar =
                    Some(bar);
                return Ok(true);
            }
            if component.decl.interfaces[i].kind == InterfaceKind::Provides {
                config.port_bars.insert(i, bar);
                return Ok(true);
            }
        }
        if let Some(i) = interface_with_suffix("_hardware_cached").filter(|&i| is_dataport(component, i)) {
            let cached = int_in(&s.value, &label, 0, 1)? == 1;
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false, bar: None }).cached = cached;
            return Ok(true);
        }
        if let Some(i) = interface_with_suffix("_attributes") {
            if component.decl.interfaces[i].kind == InterfaceKind::Provides {
                let text = string_value(&s.value, &label)?;
                config.ports.insert(i, parse_port_range(text, &label, &s.value.pos)?);
                return Ok(true);
            }
        }
        if Self::irq_setting(component, s, &label)? {
            return Ok(true);
        }
        if [
            "priority",
            "_priority",
            "_stack_size",
            "restartable",
            "fault_injection",
            "hang_cpu_ms",
            "confirm_death_ms",
            "untrusted",
            "may_restart",
            "system_events",
            "log_server",
            "restart_limit",
            "restart_window_ms",
            "restart_backoff_ms",
            "max_priority",
            "_max_priority",
            "cnode_size_bits",
        ]
        .contains(&attr)
        {
            return err(
                &s.attribute.pos,
                format!("{label} does not apply: hardware component '{target}' has no thread"),
            );
        }
        Ok(false)
    }

    /// A hardware instance's `<event>_irq_*` setting, checked on its own
    /// (combined once all are known: `interrupt`). `false` if `s` is none.
    fn irq_setting(component: &ComponentType, s: &ast::Setting, label: &str) -> Result<bool> {
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let interface_with_suffix = |suffix: &str| -> Option<usize> {
            let prefix = attr.strip_suffix(suffix)?;
            component.interface(prefix)
        };
        for (suffix, proper) in [("_irq_ioapic_level", "_irq_level"), ("_irq_ioapic_polarity", "_irq_polarity")] {
            if let Some(i) = interface_with_suffix(suffix) {
                let name = &component.decl.interfaces[i].name.text;
                return err(
                    &s.attribute.pos,
                    format!("'{target}.{name}{suffix}' is the manual's spelling, which upstream's template ignores; use '{target}.{name}{proper}'"),
                );
            }
        }
        let irq_suffixes =
            ["_irq_type", "_irq_ioapic", "_irq_ioapic_pin", "_irq_level", "_irq_polarity", "_irq_vector"];
        for suffix in irq_suffixes {
            if let Some(i) =
                interface_with_suffix(suffix).filter(|&i| component.decl.interfaces[i].kind == InterfaceKind::Emits)
            {
                // Stored raw; combined and checked once all are known.
                let _ = i;
                match suffix {
                    "_irq_type" => {
                        let t = string_value(&s.value, label)?;
                        if !["ioapic", "isa", "pci", "device"].contains(&t) {
                            return err(
                                &s.value.pos,
                                format!("{label} = \"{t}\" is not supported; use \"device\" (the interrupt of the PCI function found for the driver), or \"ioapic\", \"isa\" or \"pci\" (a fixed x86 IOAPIC pin)"),
                            );
                        }
                    }
                    "_irq_ioapic" => {
                        int_in(&s.value, label, 0, 255)?;
                    }
                    "_irq_ioapic_pin" => {
                        int_in(&s.value, label, 0, 23)?;
                    }
                    "_irq_level" | "_irq_polarity" => {
                        int_in(&s.value, label, 0, 1)?;
                    }
                    _ => {
                        int_in(&s.value, label, 0, MAX_IRQ_VECTOR as i128)?;
                    }
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Resolves every `may_restart` list: each name is another software
    /// instance, marked `restartable`, listed once. A grant is a privilege
    /// (the holder can stop the target at any time), so anything doubtful
    /// is an error rather than ignored.
    pub(super) fn resolve_restart_grants(&mut self) -> Result<()> {
        for index in 0..self.system.instances.len() {
            let names = core::mem::take(&mut self.system.instances[index].config.may_restart_names);
            let who = self.system.instances[index].name.text.clone();
            let mut targets = Vec::new();
            for value in &names {
                let ValueKind::Str(name) = &value.kind else { unreachable!("checked with the setting") };
                let Some(&target) = self.instance_names.get(name) else {
                    return err(
                        &value.pos,
                        format!("'{who}.may_restart' names '{name}', which is not an instance of this assembly"),
                    );
                };
                if target == index {
                    return err(
                        &value.pos,
                        format!("'{who}.may_restart' names '{who}' itself (a component ends itself with exit)"),
                    );
                }
                if self.system.component_of(target).is_hardware() {
                    return err(
                        &value.pos,
                        format!("'{who}.may_restart' names hardware instance '{name}', which has no thread to restart"),
                    );
                }
                if !self.system.instances[target].config.restartable {
                    return err(&value.pos, format!("'{who}.may_restart' names '{name}', which is not restartable (set '{name}.restartable = true')"));
                }
                if targets.contains(&target) {
                    return err(&value.pos, format!("'{who}.may_restart' names '{name}' twice"));
                }
                targets.push(target);
            }
            self.system.instances[index].config.may_restart = targets;
        }
        Ok(())
    }

    /// The value of setting `target.attribute`, if the assembly has one.
    fn setting(&self, target: &str, attribute: &str) -> Option<&Value> {
        let index = self.setting_index.get(&(target.to_string(), attribute.to_string()))?;
        Some(&self.settings_store[*index].value)
    }

    pub(super) fn paddr_set(&self, instance: usize, attr: &str) -> bool {
        self.setting(&self.system.instances[instance].name.text, attr).is_some()
    }

    pub(super) fn interrupt(&self, hw: &EndRef, connection: &str) -> Result<IrqConfig> {
        let inst = &self.system.instances[hw.instance];
        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
        let get = |suffix: &str| self.setting(&inst.name.text, &format!("{iface}{suffix}"));
        let need = |suffix: &str| -> Result<&Value> {
            get(suffix).ok_or(()).or_else(|_| {
                err(
                    &hw.pos,
                    format!(
                        "seL4HardwareInterrupt connection '{connection}' needs '{}.{iface}{suffix}'",
                        inst.name.text
                    ),
                )
            })
        };
        let int = |v: &Value| match v.kind {
            ValueKind::Int(n) => n,
            _ => 0,
        };
        let irq_type = match &need("_irq_type")?.kind {
            ValueKind::Str(s) => s.clone(),
            _ => unreachable!("checked as a string"),
        };
        if irq_type == "device" {
            for suffix in ["_irq_ioapic", "_irq_ioapic_pin", "_irq_level", "_irq_polarity"] {
                if let Some(v) = get(suffix) {
                    return err(
                        &v.pos,
                        format!(
                            "'{}.{iface}{suffix}' does not apply: irq type \"device\" is routed by the loader from what it finds at boot",
                            inst.name.text
                        ),
                    );
                }
            }
            let vector = int(need("_irq_vector")?) as u32;
            return Ok(IrqConfig { ioapic: 0, pin: 0, level: true, polarity_low: true, vector, device: true });
        }
        let (level, polarity_low) = match irq_type.as_str() {
            "ioapic" => (int(need("_irq_level")?) == 1, int(need("_irq_polarity")?) == 1),
            fixed => {
                for suffix in ["_irq_level", "_irq_polarity"] {
                    if let Some(v) = get(suffix) {
                        return err(
                            &v.pos,
                            format!(
                                "'{}.{iface}{suffix}' does not apply: irq type \"{fixed}\" fixes it",
                                inst.name.text
                            ),
                        );
                    }
                }
                let pci = fixed == "pci";
                (pci, pci)
            }
        };
        Ok(IrqConfig {
            ioapic: get("_irq_ioapic").map(int).unwrap_or(0) as u32,
            pin: int(need("_irq_ioapic_pin")?) as u32,
            level,
            polarity_low,
            vector: int(need("_irq_vector")?) as u32,
            device: false,
        })
    }

    /// Fills `ComponentType::attribute_values`: each instance's setting or
    /// the declaration's default; instances of one type must agree.
    pub(super) fn resolve_attribute_values(&mut self) -> Result<()> {
        let mut instances_of: Vec<Vec<usize>> = vec![Vec::new(); self.system.components.len()];
        for (index, instance) in self.system.instances.iter().enumerate() {
            instances_of[instance.component].push(index);
        }
        for (ci, instances) in instances_of.iter().enumerate() {
            let decls = self.system.components[ci].decl.attributes.clone();
            let mut values: Vec<Option<(Value, usize)>> = vec![None; decls.len()];
            for &index in instances {
                let instance = &self.system.instances[index];
                for (d, decl) in decls.iter().enumerate() {
                    let Some(value) = instance.config.attributes.get(&decl.name.text).or(decl.default.as_ref()) else {
                        continue;
                    };
                    match &values[d] {
                        None => values[d] = Some((value.clone(), index)),
                        Some((first, other)) if first.kind != value.kind => {
                            return err(
                                &value.pos,
                                format!(
                                    "instances '{}' and '{}' of component '{}' give attribute '{}' different values (instances of a type share one ELF)",
                                    self.system.instances[*other].name.text,
                                    instance.name.text,
                                    self.system.components[ci].decl.name.text,
                                    decl.name.text
                                ),
                            );
                        }
                        Some(_) => {}
                    }
                }
            }
            self.system.components[ci].attribute_values =
                values.into_iter().map(|v| v.map(|(value, _)| value)).collect();
        }
        Ok(())
    }
}
