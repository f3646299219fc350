//! Defining the items in order, as upstream reads them: procedures and
//! component types (define before use, unique names, what the glue can
//! spell), the built-in `std_connector.camkes`, and each assembly's
//! instances and connections (connector rules, one connection per
//! interface). Settings are only collected here; `settings` reads them.

use super::model::{
    snake_case, ComponentType, ConnectionInfo, ConnectorKind, EndKind, EndRef, InstanceConfig, InstanceInfo,
};
use super::values::{policy_check, type_check};
use super::{Checker, Defined};
use crate::ast::{self, DataportType, EndSide, InterfaceKind, Item, Name};
use crate::diag::{err, Pos, Result};
use crate::imports::STD_CONNECTOR;
use crate::{lexer, parser};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use system_spec::{Access, PAGE_SIZE};

/// Connectors `std_connector.camkes` declares that this compiler does not
/// implement: naming one is "not supported", not "unknown".
const UNSUPPORTED_STD_CONNECTORS: &[&str] = &[
    "seL4DirectCall",
    "seL4NotificationBind",
    "seL4NotificationQueue",
    "seL4RPCEvent",
    "seL4DMASharedData",
    "seL4IOAPICHardwareInterrupt",
    "seL4DTBHardware",
    "seL4DTBHW",
    "seL4InitHardware",
    "seL4GDB",
    "seL4GDBMem",
    "seL4RPCDataport",
    "seL4RPCOverMultiSharedData",
    "seL4MessageQueue",
    "seL4SharedDataWithCaps",
];

/// What `import <std_connector.camkes>;` brings in besides connectors:
/// upstream's `procedure IOPort` from `camkes-hardware.idl4`.
const STD_CONNECTOR_SOURCE: &str = "procedure IOPort {
    uint8_t  in8(in uint16_t port);
    uint16_t in16(in uint16_t port);
    uint32_t in32(in uint16_t port);
    void out8(in uint16_t port, in uint8_t value);
    void out16(in uint16_t port, in uint16_t value);
    void out32(in uint16_t port, in uint32_t value);
};";

/// Names upstream's std_connector.camkes defines through its own imports;
/// user code must not redefine them.
const STD_RESERVED_NAMES: &[&str] = &["GDB_delegate", "CAmkES_Debug", "debug_server"];

/// Names the generated Rust cannot spell even as raw identifiers.
const UNSPELLABLE_IN_RUST: &[&str] = &["self", "Self", "super", "crate", "_"];

fn rust_spellable(name: &Name, what: &str) -> Result<()> {
    if UNSPELLABLE_IN_RUST.contains(&name.text.as_str()) {
        return err(
            &name.pos,
            format!("'{}' cannot be used as {what}: the generated Rust glue cannot spell it", name.text),
        );
    }
    Ok(())
}

impl Checker {
    pub(super) fn define(&mut self, name: &Name, what: Defined) -> Result<()> {
        if let Some((_, previous)) = self.names.get(&name.text) {
            return err(&name.pos, format!("'{}' is already defined at {previous}", name.text));
        }
        self.names.insert(name.text.clone(), (what, name.pos.clone()));
        Ok(())
    }

    fn not_defined_yet(&self, name: &Name, what: &str) -> String {
        match self.later.get(&name.text) {
            Some(pos) => format!(
                "{what} '{}' is used before its definition at {pos} (CAmkES requires define-before-use)",
                name.text
            ),
            None => format!("unknown {what} '{}'", name.text),
        }
    }

    pub(super) fn import_std(&mut self, pos: &Pos) -> Result<()> {
        if self.std_imported {
            return Ok(());
        }
        self.std_imported = true;
        let file: Arc<str> = Arc::from(format!("<{STD_CONNECTOR}>"));
        for item in parser::parse(lexer::lex(&file, STD_CONNECTOR_SOURCE)?)? {
            if let Item::Procedure(p) = item {
                self.define_procedure(p)?;
            }
        }
        for name in STD_RESERVED_NAMES {
            self.names.insert(name.to_string(), (Defined::Reserved, pos.clone()));
        }
        Ok(())
    }

    pub(super) fn define_procedure(&mut self, p: ast::Procedure) -> Result<()> {
        self.define(&p.name, Defined::Procedure)?;
        let mut methods: HashMap<&str, &Pos> = HashMap::new();
        for m in &p.methods {
            if let Some(first) = methods.insert(&m.name.text, &m.name.pos) {
                return err(
                    &m.name.pos,
                    format!("duplicate method '{}' in procedure '{}' (first at {first})", m.name.text, p.name.text),
                );
            }
            rust_spellable(&m.name, "a method name")?;
            let mut params = HashSet::new();
            for param in &m.params {
                if !params.insert(param.name.text.as_str()) {
                    return err(
                        &param.name.pos,
                        format!("duplicate parameter '{}' in method '{}'", param.name.text, m.name.text),
                    );
                }
                rust_spellable(&param.name, "a parameter name")?;
            }
        }
        self.system.procedure_index.insert(p.name.text.clone(), self.system.procedures.len());
        self.system.procedures.push(p);
        Ok(())
    }

    pub(super) fn define_component(&mut self, c: ast::Component) -> Result<()> {
        if let (Some(control), Some(hardware)) = (&c.control, &c.hardware) {
            let later = if (control.line, control.col) > (hardware.line, hardware.col) { control } else { hardware };
            return err(later, format!("component '{}' cannot be both control and hardware", c.name.text));
        }
        if c.hardware.is_some() {
            if let Some((kind, name)) = c.synchronisation.first() {
                return err(&name.pos, format!("a hardware component cannot have a {kind}"));
            }
        } else if let Some((kind, name)) = c.synchronisation.first() {
            return err(
                &name.pos,
                format!("'has {kind}' is not supported: Rust components bring their own synchronisation"),
            );
        }
        let mut seen: HashMap<&str, &Pos> = HashMap::new();
        for i in &c.interfaces {
            if let Some(first) = seen.insert(&i.name.text, &i.name.pos) {
                return err(
                    &i.name.pos,
                    format!(
                        "duplicate interface name '{}' in component '{}' (first declared at {first})",
                        i.name.text, c.name.text
                    ),
                );
            }
            rust_spellable(&i.name, "an interface name")?;
            match i.kind {
                InterfaceKind::Provides | InterfaceKind::Uses => match self.names.get(&i.type_name.text) {
                    Some((Defined::Procedure, _)) => {}
                    Some(_) => return err(&i.type_name.pos, format!("'{}' is not a procedure", i.type_name.text)),
                    None => return err(&i.type_name.pos, self.not_defined_yet(&i.type_name, "procedure")),
                },
                InterfaceKind::Emits | InterfaceKind::Consumes => {}
                InterfaceKind::Dataport => match &i.dataport {
                    Some(DataportType::Buf { size: Some(n) }) if *n > 1 << 40 => {
                        return err(&i.type_name.pos, format!("dataport size {n} is larger than 1 TiB"))
                    }
                    Some(DataportType::Buf { size: Some(n) }) if !(*n as u128).is_multiple_of(PAGE_SIZE as u128) => {
                        return err(
                            &i.type_name.pos,
                            format!("dataport size {n} is not a multiple of the {PAGE_SIZE}-byte page size"),
                        )
                    }
                    Some(DataportType::CType(t)) => {
                        return err(
                            &i.type_name.pos,
                            format!("dataport type '{t}' is not supported; use Buf or Buf(size)"),
                        )
                    }
                    _ => {}
                },
            }
        }
        let mut attributes: HashMap<&str, &Pos> = HashMap::new();
        for a in &c.attributes {
            if let Some(first) = attributes.insert(&a.name.text, &a.name.pos) {
                return err(&a.name.pos, format!("duplicate attribute '{}' (first declared at {first})", a.name.text));
            }
            if let Some(default) = &a.default {
                let label = format!("the default of '{}'", a.name.text);
                type_check(a, default, &label)?;
                policy_check(&c.name.text, a, default, &label)?;
            }
        }
        // A redefinition is reported as one before its (equal) folder name.
        let index = self.system.components.len();
        self.define(&c.name, Defined::Component(index))?;
        let elf = snake_case(&c.name.text);
        if let Some(&other) = self.elves.get(&elf) {
            return err(
                &c.name.pos,
                format!(
                    "component '{}' would share the folder name '{elf}' with '{}'",
                    c.name.text, self.system.components[other].decl.name.text
                ),
            );
        }
        self.elves.insert(elf.clone(), index);
        let n = c.interfaces.len();
        self.system.components.push(ComponentType {
            decl: c,
            elf,
            connectors: vec![None; n],
            access: vec![Access::ReadWrite; n],
            irq_badge: vec![0; n],
            instantiated: false,
            attribute_values: Vec::new(),
            pool_ids: vec![None; n],
            per_client: Vec::new(),
        });
        Ok(())
    }

    fn assembly_name(&mut self, name: &Name) -> Result<()> {
        if let Some(previous) = self.assembly_names.get(&name.text) {
            return err(&name.pos, format!("'{}' is already defined at {previous}", name.text));
        }
        self.assembly_names.insert(name.text.clone(), name.pos.clone());
        Ok(())
    }

    pub(super) fn add_assembly(&mut self, a: ast::Assembly) -> Result<()> {
        self.first_assembly.get_or_insert(a.pos.clone());
        for inst in &a.instances {
            let component = match self.names.get(&inst.type_name.text) {
                Some((Defined::Component(c), _)) => *c,
                Some(_) => return err(&inst.type_name.pos, format!("'{}' is not a component", inst.type_name.text)),
                None => return err(&inst.type_name.pos, self.not_defined_yet(&inst.type_name, "component")),
            };
            rust_spellable(&inst.name, "an instance name")?;
            self.assembly_name(&inst.name)?;
            self.instance_names.insert(inst.name.text.clone(), self.system.instances.len());
            self.system.components[component].instantiated = true;
            self.system.instances.push(InstanceInfo {
                name: inst.name.clone(),
                component,
                config: InstanceConfig::default(),
            });
        }
        for conn in &a.connections {
            self.add_connection(conn)?;
        }
        self.settings_store.extend(a.settings);
        Ok(())
    }

    fn connector(&self, name: &Name) -> Result<ConnectorKind> {
        let supported = || ConnectorKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
        if let Some(kind) = ConnectorKind::ALL.iter().find(|k| k.name() == name.text) {
            if !self.std_imported {
                return err(
                    &name.pos,
                    format!("unknown connector '{}' (did you forget 'import <{STD_CONNECTOR}>;'?)", name.text),
                );
            }
            return Ok(*kind);
        }
        if self.std_imported && UNSUPPORTED_STD_CONNECTORS.contains(&name.text.as_str()) {
            return err(
                &name.pos,
                format!("connector '{}' is not supported by this compiler (supported: {})", name.text, supported()),
            );
        }
        if let Some((Defined::UserConnector, _)) = self.names.get(&name.text) {
            return err(
                &name.pos,
                format!(
                    "user-defined connector '{}' has no implementation here (supported: {})",
                    name.text,
                    supported()
                ),
            );
        }
        err(&name.pos, self.not_defined_yet(name, "connector"))
    }

    /// A connection of the composition: each end resolved and checked
    /// against the connector's rules, then the ends' numbers.
    fn add_connection(&mut self, conn: &ast::Connection) -> Result<()> {
        let kind = self.connector(&conn.connector)?;
        self.assembly_name(&conn.name)?;
        let index = self.system.connections.len();
        let mut info = ConnectionInfo {
            name: conn.name.clone(),
            connector: kind,
            from: Vec::new(),
            to: Vec::new(),
            channel: false,
            shared_writers: None,
            pool: None,
            pool_setting: None,
            initialiser: None,
        };
        let mut first_type: Option<(String, Pos)> = None;
        for end in &conn.ends {
            let end_ref = self.resolve_end(end, kind)?;
            let decl = &self.system.component_of(end_ref.instance).decl.interfaces[end_ref.interface];
            let label = format!("'{}.{}'", end.instance.text, end.interface.text);
            let type_name = decl.type_name.text.clone();
            match &first_type {
                Some((first, first_pos)) if *first != type_name && kind != ConnectorKind::RpcCallNoType => {
                    return err(
                        &end.interface.pos,
                        format!("conflicting types on connection '{}': {label} is '{type_name}' but the end at {first_pos} is '{first}'", conn.name.text),
                    );
                }
                None => first_type = Some((type_name, end_ref.pos.clone())),
                _ => {}
            }
            let key = (end_ref.instance, end_ref.interface);
            if let Some((other, other_pos)) = self.connected.get(&key) {
                let other_name = if *other == index {
                    conn.name.text.clone()
                } else {
                    self.system.connections[*other].name.text.clone()
                };
                return err(
                    &end_ref.pos,
                    format!("{label} is already connected by '{other_name}' at {other_pos} (one connection per interface; list several ends in one connection instead)"),
                );
            }
            self.connected.insert(key, (index, end_ref.pos.clone()));
            self.system.end_index.insert(key, (index, end.side));
            match end.side {
                EndSide::From => info.from.push(end_ref),
                EndSide::To => info.to.push(end_ref),
            }
        }
        self.check_end_counts(conn, &info)?;
        self.connection_names.insert(conn.name.text.clone(), index);
        self.system.connections.push(info);
        Ok(())
    }

    /// One end of a connection of `kind`: an interface of a known
    /// instance, of the kind the side and the connector join, on the
    /// hardware or software side as the connector needs.
    fn resolve_end(&self, end: &ast::End, kind: ConnectorKind) -> Result<EndRef> {
        let rule = kind.rule();
        let pos = end.instance.pos.clone();
        let Some(&instance) = self.instance_names.get(&end.instance.text) else {
            return err(&end.instance.pos, format!("unknown instance '{}'", end.instance.text));
        };
        let component = &self.system.components[self.system.instances[instance].component];
        let Some(interface) = component.interface(&end.interface.text) else {
            return err(
                &end.interface.pos,
                format!(
                    "instance '{}' (component '{}') has no interface '{}'",
                    end.instance.text, component.decl.name.text, end.interface.text
                ),
            );
        };
        let decl = &component.decl.interfaces[interface];
        let label = format!("'{}.{}'", end.instance.text, end.interface.text);
        let (side_word, allowed): (&str, &[InterfaceKind]) = match end.side {
            EndSide::From => ("from", &[InterfaceKind::Uses, InterfaceKind::Emits, InterfaceKind::Dataport]),
            EndSide::To => ("to", &[InterfaceKind::Provides, InterfaceKind::Consumes, InterfaceKind::Dataport]),
        };
        if !allowed.contains(&decl.kind) {
            return err(
                &pos,
                format!(
                    "{label} is a {} interface and cannot be a '{side_word}' end (those are {})",
                    decl.kind.keyword(),
                    allowed.iter().map(|k| k.keyword()).collect::<Vec<_>>().join(", ")
                ),
            );
        }
        let end_kind = match decl.kind {
            InterfaceKind::Provides | InterfaceKind::Uses => EndKind::Procedure,
            InterfaceKind::Emits | InterfaceKind::Consumes => EndKind::Event,
            InterfaceKind::Dataport => EndKind::Dataport,
        };
        if end_kind != rule.kind {
            let wanted = match rule.kind {
                EndKind::Procedure => "procedures (uses/provides)",
                EndKind::Event => "events (emits/consumes)",
                EndKind::Dataport => "dataports",
            };
            return err(
                &pos,
                format!("{} connects {wanted}, but {label} is a {} interface", kind.name(), decl.kind.keyword()),
            );
        }
        let needs_hardware = match end.side {
            EndSide::From => rule.from_hardware,
            EndSide::To => rule.to_hardware,
        };
        if needs_hardware != component.is_hardware() {
            return err(
                &pos,
                if needs_hardware {
                    format!("{} needs a hardware component on its '{side_word}' side; '{}' (component '{}') is not hardware", kind.name(), end.instance.text, component.decl.name.text)
                } else {
                    format!(
                        "'{}' is a hardware component and cannot be on the '{side_word}' side of {}",
                        end.instance.text,
                        kind.name()
                    )
                },
            );
        }
        if kind == ConnectorKind::HardwareIoPort && decl.type_name.text != "IOPort" {
            return err(
                &pos,
                format!("{} connects 'IOPort' interfaces; {label} is '{}'", kind.name(), decl.type_name.text),
            );
        }
        Ok(EndRef { instance, interface, pos })
    }

    /// Each side has as many ends as the connector permits.
    fn check_end_counts(&self, conn: &ast::Connection, info: &ConnectionInfo) -> Result<()> {
        let (kind, rule) = (info.connector, info.connector.rule());
        for (side, ends, many) in [("from", &info.from, rule.from_many), ("to", &info.to, rule.to_many)] {
            if ends.is_empty() {
                return err(
                    &conn.name.pos,
                    format!("connection '{}' has no '{side}' end; {} needs one", conn.name.text, kind.name()),
                );
            }
            if ends.len() > 1 && !many {
                return err(&ends[1].pos, format!("{} permits only one '{side}' end", kind.name()));
            }
        }
        // seL4 5.0 badges have 28 bits: one bit per emitter.
        if kind == ConnectorKind::NotificationNative && info.from.len() > 28 {
            return err(&info.from[28].pos, "seL4NotificationNative takes at most 28 emitters (one badge bit each)");
        }
        if kind == ConnectorKind::Notification && info.to.len() > 1 {
            return err(&info.to[1].pos, self.one_consumer_hint(conn, info));
        }
        Ok(())
    }

    /// What to write instead of an seL4Notification with a second
    /// consumer: an interface of the emitter per consumer, each with a
    /// connection of its own (one interface is in one connection only).
    fn one_consumer_hint(&self, conn: &ast::Connection, info: &ConnectionInfo) -> String {
        let (emitter, consumer) = (&info.from[0], &info.to[1]);
        let instance = |e: &EndRef| &self.system.instances[e.instance].name.text;
        let interface = |e: &EndRef| &self.system.component_of(e.instance).decl.interfaces[e.interface];
        let event = interface(emitter);
        let (e, c) = (instance(emitter), instance(consumer));
        let (iface, consumed) = (&event.name.text, &interface(consumer).name.text);
        let new_iface = format!("{iface}_{c}");
        format!(
            "seL4Notification with more than one consumer is not supported by this compiler; give the emitter one interface per consumer: add 'emits {} {new_iface};' to component '{}', remove 'to {c}.{consumed}' from '{}' and add 'connection seL4Notification {}_{c}(from {e}.{new_iface}, to {c}.{consumed});' (the emitter then emits on both)",
            event.type_name.text,
            self.system.component_of(emitter.instance).decl.name.text,
            conn.name.text,
            conn.name.text,
        )
    }
}
