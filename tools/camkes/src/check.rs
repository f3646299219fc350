//! The checker: resolves names (define before use), enforces upstream's
//! rules for components, connections and settings, applies this compiler's
//! stricter rules (unknown settings, rights a connector cannot give, page
//! sizes, one connection per interface), and produces a [`System`] that the
//! spec and glue emitters can trust.

use crate::ast::{self, DataportType, EndSide, InterfaceKind, Item, Name, Value, ValueKind};
use crate::diag::{err, Pos, Result};
use crate::imports::STD_CONNECTOR;
use crate::{lexer, parser};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use system_spec::{Access, MAX_IRQ_VECTOR, PAGE_SIZE};

/// The connectors this compiler implements (upstream's names and rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectorKind {
    /// `seL4RPCCall`: uses (1..n) to provides (1) over an endpoint.
    RpcCall,
    /// `seL4RPCCallNoType`: as `seL4RPCCall`, without the type check.
    RpcCallNoType,
    /// `seL4Notification`: emits (1) to consumes (1 here; upstream 1..n).
    Notification,
    /// `seL4NotificationNative`: emits (1..n) to consumes (1); emitter `i`
    /// signals badge bit `1 << i`, so the consumer's wait says who signalled.
    NotificationNative,
    /// `seL4SharedData`: dataports (1..n each side) sharing frames.
    SharedData,
    /// `seL4HardwareMMIO`: driver dataports (1..n) to a hardware dataport.
    HardwareMmio,
    /// `seL4HardwareInterrupt`: hardware emits (1) to consumes (1).
    HardwareInterrupt,
    /// `seL4HardwareIOPort`: uses IOPort (1) to hardware provides IOPort.
    HardwareIoPort,
}

/// What kind of interface a connector joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndKind {
    Procedure,
    Event,
    Dataport,
}

struct Rule {
    kind: EndKind,
    from_many: bool,
    to_many: bool,
    from_hardware: bool,
    to_hardware: bool,
}

impl ConnectorKind {
    /// All of them, for lookups and messages.
    pub const ALL: [ConnectorKind; 8] = [
        ConnectorKind::RpcCall,
        ConnectorKind::RpcCallNoType,
        ConnectorKind::Notification,
        ConnectorKind::NotificationNative,
        ConnectorKind::SharedData,
        ConnectorKind::HardwareMmio,
        ConnectorKind::HardwareInterrupt,
        ConnectorKind::HardwareIoPort,
    ];

    /// The upstream name.
    pub fn name(self) -> &'static str {
        match self {
            ConnectorKind::RpcCall => "seL4RPCCall",
            ConnectorKind::RpcCallNoType => "seL4RPCCallNoType",
            ConnectorKind::Notification => "seL4Notification",
            ConnectorKind::NotificationNative => "seL4NotificationNative",
            ConnectorKind::SharedData => "seL4SharedData",
            ConnectorKind::HardwareMmio => "seL4HardwareMMIO",
            ConnectorKind::HardwareInterrupt => "seL4HardwareInterrupt",
            ConnectorKind::HardwareIoPort => "seL4HardwareIOPort",
        }
    }

    fn rule(self) -> Rule {
        use EndKind::*;
        let r = |kind, from_many, to_many, from_hardware, to_hardware| Rule {
            kind,
            from_many,
            to_many,
            from_hardware,
            to_hardware,
        };
        match self {
            ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType => r(Procedure, true, false, false, false),
            ConnectorKind::Notification => r(Event, false, true, false, false),
            ConnectorKind::NotificationNative => r(Event, true, false, false, false),
            ConnectorKind::SharedData => r(Dataport, true, true, false, false),
            ConnectorKind::HardwareMmio => r(Dataport, true, false, false, true),
            ConnectorKind::HardwareInterrupt => r(Event, false, false, true, false),
            ConnectorKind::HardwareIoPort => r(Procedure, false, false, false, true),
        }
    }
}

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

/// A component type, with what the assembly connects its interfaces to.
#[derive(Clone, Debug)]
pub struct ComponentType {
    /// The declaration.
    pub decl: ast::Component,
    /// The ELF/folder name: the type name in snake_case.
    pub elf: String,
    /// Per interface (same order as `decl.interfaces`): the connector every
    /// instance uses for it, `None` if no instance connects it.
    pub connectors: Vec<Option<ConnectorKind>>,
    /// Per interface: the mapping rights of a dataport (the same for every
    /// instance); `ReadWrite` for other interfaces.
    pub access: Vec<Access>,
    /// Per interface: the badge bit its interrupt signals (interrupt
    /// consumers; 0 for other interfaces), the same for every instance.
    pub irq_badge: Vec<u64>,
    /// Whether any instance of the type exists.
    pub instantiated: bool,
    /// Per attribute declaration (same order as `decl.attributes`): the
    /// value every instance has (its setting, else the default), `None` if
    /// no instance gives one. Instances of a type share one ELF and glue,
    /// so they must agree.
    pub attribute_values: Vec<Option<Value>>,
}

impl ComponentType {
    /// Whether the type is a hardware stand-in.
    pub fn is_hardware(&self) -> bool {
        self.decl.hardware.is_some()
    }

    /// The index of interface `name`.
    pub fn interface(&self, name: &str) -> Option<usize> {
        self.decl.interfaces.iter().position(|i| i.name.text == name)
    }
}

/// The byte size of a `Buf`/`Buf(n)` dataport.
pub fn dataport_size(decl: &ast::InterfaceDecl) -> u64 {
    match decl.dataport {
        Some(DataportType::Buf { size: Some(n) }) => n as u64,
        _ => PAGE_SIZE,
    }
}

/// One IOAPIC interrupt, from a hardware instance's `<event>_irq_*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqConfig {
    /// `_irq_ioapic`
    pub ioapic: u32,
    /// `_irq_ioapic_pin`
    pub pin: u32,
    /// `_irq_level` (or fixed by `_irq_type`)
    pub level: bool,
    /// `_irq_polarity` (or fixed by `_irq_type`)
    pub polarity_low: bool,
    /// `_irq_vector`
    pub vector: u32,
}

/// Device memory, from `<dataport>_paddr`/`_size`/`_hardware_cached`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmioConfig {
    /// Physical base.
    pub paddr: u64,
    /// Bytes.
    pub size: u64,
    /// Whether to map it cached.
    pub cached: bool,
}

/// Per-instance settings, resolved and checked.
#[derive(Clone, Debug, Default)]
pub struct InstanceConfig {
    /// Thread priority.
    pub priority: Option<u8>,
    /// Maximum controlled priority.
    pub max_priority: Option<u8>,
    /// Stack bytes.
    pub stack_size: Option<u64>,
    /// CNode size bits.
    pub cnode_size_bits: Option<u8>,
    /// Whether the supervisor may restart it.
    pub restartable: bool,
    /// `may_restart`: the instances (indices into [`System::instances`])
    /// this one may ask the supervisor to restart; resolved and checked
    /// once every setting is known (whether a target is restartable may
    /// be set after this list).
    pub may_restart: Vec<usize>,
    /// The names as written, with where each is, until resolved.
    may_restart_names: Vec<Value>,
    /// `system_events`: the consumed notification interface (index) the
    /// supervisor signals on a peer's death and settlement, and where the
    /// setting is (for errors found when the spec is laid out).
    pub system_events: Option<(Option<usize>, crate::diag::Pos)>,
    /// `log_server`: this instance prints every other component's lines
    /// (the compiler gives each of them a log ring and a way to signal it).
    pub log_server: Option<crate::diag::Pos>,
    /// `restart_limit`, `restart_window_ms`, `restart_backoff_ms`.
    pub restart_limit: Option<u32>,
    /// See `restart_limit`.
    pub restart_window_ms: Option<u32>,
    /// See `restart_limit`.
    pub restart_backoff_ms: Option<u32>,
    /// Dataport rights by interface index.
    pub access: HashMap<usize, Access>,
    /// Device memory by (hardware) interface index.
    pub mmio: HashMap<usize, MmioConfig>,
    /// Interrupts by (hardware) interface index.
    pub irq: HashMap<usize, IrqConfig>,
    /// I/O port ranges by (hardware) interface index.
    pub ports: HashMap<usize, (u16, u16)>,
    /// `<irq>_notification = "<consumes>"`: interrupt-consuming interface
    /// index to the `consumes` interface whose notification the interrupt
    /// is delivered to (with where the setting is).
    pub irq_into: HashMap<usize, (usize, Pos)>,
    /// The badge an interrupt-consuming interface's IRQ signals with: 1 on
    /// its own notification, the bit after the emitters' on a shared one.
    pub irq_badge: HashMap<usize, u64>,
    /// Values of the component's declared attributes, by name.
    pub attributes: HashMap<String, Value>,
}

/// A component instance.
#[derive(Clone, Debug)]
pub struct InstanceInfo {
    /// Its name.
    pub name: Name,
    /// Index into [`System::components`].
    pub component: usize,
    /// Its checked settings.
    pub config: InstanceConfig,
}

/// One end of a resolved connection.
#[derive(Clone, Debug)]
pub struct EndRef {
    /// Index into [`System::instances`].
    pub instance: usize,
    /// Index into the instance's component's interfaces.
    pub interface: usize,
    /// Where the end is written.
    pub pos: Pos,
}

/// A resolved connection.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// Its name.
    pub name: Name,
    /// Its connector.
    pub connector: ConnectorKind,
    /// Its `from` ends, in written order.
    pub from: Vec<EndRef>,
    /// Its `to` ends, in written order.
    pub to: Vec<EndRef>,
    /// `<connection>.channel = true` on an `seL4SharedData` connection: a
    /// channel between two ends, each of which writes its own half (ring
    /// slots and its index), so both map it read-write.
    pub channel: bool,
    /// `<connection>.shared_writers = "why"`: the assembly's reason for
    /// letting several components write one shared region.
    pub shared_writers: Option<String>,
}

/// A checked system.
#[derive(Clone, Debug, Default)]
pub struct System {
    /// Procedures, in definition order (including IOPort if imported).
    pub procedures: Vec<ast::Procedure>,
    /// Component types, in definition order.
    pub components: Vec<ComponentType>,
    /// Instances, in composition order.
    pub instances: Vec<InstanceInfo>,
    /// Connections, in composition order.
    pub connections: Vec<ConnectionInfo>,
    /// Procedure name to index in `procedures`.
    procedure_index: HashMap<String, usize>,
    /// `(instance, interface)` to the connection (and side) holding it.
    end_index: HashMap<(usize, usize), (usize, EndSide)>,
}

impl System {
    /// The procedure called `name`.
    pub fn procedure(&self, name: &str) -> Option<&ast::Procedure> {
        self.procedure_index.get(name).map(|&i| &self.procedures[i])
    }

    /// The component type of instance `i`.
    pub fn component_of(&self, instance: usize) -> &ComponentType {
        &self.components[self.instances[instance].component]
    }

    /// The connection (and side) that connects `instance.interface`.
    pub fn connection_of(&self, instance: usize, interface: usize) -> Option<(usize, EndSide)> {
        self.end_index.get(&(instance, interface)).copied()
    }
}

/// `HttpServer` gives `http_server`, `HTTPServer` too, `Echo` gives `echo`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

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

#[derive(Clone)]
enum Defined {
    Procedure,
    Component(usize),
    UserConnector,
    Reserved,
}

#[derive(Default)]
struct Checker {
    system: System,
    names: HashMap<String, (Defined, Pos)>,
    /// Every top-level definition anywhere, to explain forward references.
    later: HashMap<String, Pos>,
    std_imported: bool,
    /// Instance and connection names share one namespace, as upstream.
    assembly_names: HashMap<String, Pos>,
    connection_names: HashMap<String, usize>,
    instance_names: HashMap<String, usize>,
    /// Which connection already holds `(instance, interface)`.
    connected: HashMap<(usize, usize), (usize, Pos)>,
    /// Every setting of every assembly, in order; checked once all
    /// assemblies are merged.
    settings_store: Vec<ast::Setting>,
    first_assembly: Option<Pos>,
    root_file: Option<Arc<str>>,
    /// ELF (folder) name to the component type that has it.
    elves: HashMap<String, usize>,
    /// `(target, attribute)` of every setting to its index in
    /// `settings_store`, once all assemblies are merged.
    setting_index: HashMap<(String, String), usize>,
}

impl Checker {
    fn define(&mut self, name: &Name, what: Defined) -> Result<()> {
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

    fn import_std(&mut self, pos: &Pos) -> Result<()> {
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

    fn define_procedure(&mut self, p: ast::Procedure) -> Result<()> {
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

    fn define_component(&mut self, c: ast::Component) -> Result<()> {
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
                type_check(a, default, &format!("the default of '{}'", a.name.text))?;
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

    fn add_assembly(&mut self, a: ast::Assembly) -> Result<()> {
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

    fn add_connection(&mut self, conn: &ast::Connection) -> Result<()> {
        let kind = self.connector(&conn.connector)?;
        let rule = kind.rule();
        self.assembly_name(&conn.name)?;
        let index = self.system.connections.len();
        let mut info = ConnectionInfo {
            name: conn.name.clone(),
            connector: kind,
            from: Vec::new(),
            to: Vec::new(),
            channel: false,
            shared_writers: None,
        };
        let mut first_type: Option<(String, Pos)> = None;
        for end in &conn.ends {
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
            let type_name = decl.type_name.text.clone();
            match &first_type {
                Some((first, first_pos)) if *first != type_name && kind != ConnectorKind::RpcCallNoType => {
                    return err(
                        &end.interface.pos,
                        format!("conflicting types on connection '{}': {label} is '{type_name}' but the end at {first_pos} is '{first}'", conn.name.text),
                    );
                }
                None => first_type = Some((type_name, pos.clone())),
                _ => {}
            }
            if let Some((other, other_pos)) = self.connected.get(&(instance, interface)) {
                let other_name = if *other == index {
                    conn.name.text.clone()
                } else {
                    self.system.connections[*other].name.text.clone()
                };
                return err(
                    &pos,
                    format!("{label} is already connected by '{other_name}' at {other_pos} (one connection per interface; list several ends in one connection instead)"),
                );
            }
            self.connected.insert((instance, interface), (index, pos.clone()));
            self.system.end_index.insert((instance, interface), (index, end.side));
            let end_ref = EndRef { instance, interface, pos };
            match end.side {
                EndSide::From => info.from.push(end_ref),
                EndSide::To => info.to.push(end_ref),
            }
        }
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
            return err(&info.to[1].pos, self.one_consumer_hint(conn, &info));
        }
        self.connection_names.insert(conn.name.text.clone(), index);
        self.system.connections.push(info);
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

    fn finish(mut self) -> Result<System> {
        let Some(assembly_pos) = self.first_assembly.clone() else {
            let file = self.root_file.clone().unwrap_or_else(|| Arc::from("<input>"));
            let pos = Pos { file, line: 1, col: 1 };
            return err(&pos, "no assembly: a system needs 'assembly { composition { ... } }'");
        };
        if self.system.instances.is_empty() {
            return err(&assembly_pos, "the assembly has no component instances");
        }
        {
            for (index, s) in self.settings_store.clone().into_iter().enumerate() {
                let key = (s.target.text.clone(), s.attribute.text.clone());
                if let Some(&previous) = self.setting_index.get(&key) {
                    let previous = &self.settings_store[previous].attribute.pos;
                    return err(&s.attribute.pos, format!("'{}.{}' is already set at {previous}", key.0, key.1));
                }
                self.setting_index.insert(key, index);
                if let Some(&instance) = self.instance_names.get(&s.target.text) {
                    self.instance_setting(instance, &s)?;
                } else if let Some(&connection) = self.connection_names.get(&s.target.text) {
                    self.connection_setting(connection, &s)?;
                } else {
                    return err(&s.target.pos, format!("unknown instance or connection '{}'", s.target.text));
                }
            }
        }
        self.resolve_restart_grants()?;
        let mut servers = self.system.instances.iter().filter_map(|i| i.config.log_server.as_ref().map(|p| (i, p)));
        if let (Some((first, _)), Some((_, pos))) = (servers.next(), servers.next()) {
            return err(pos, format!("a second log server: '{}' already is one", first.name.text));
        }
        self.check_instances()?;
        self.check_connections()?;
        self.check_component_types()?;
        Ok(self.system)
    }

    /// The two connection settings: `channel` and `shared_writers`, both on
    /// `seL4SharedData` only (upstream accepts them silently).
    fn connection_setting(&mut self, connection: usize, s: &ast::Setting) -> Result<()> {
        let conn = &mut self.system.connections[connection];
        let label = format!("'{}.{}'", s.target.text, s.attribute.text);
        let known = ["channel", "shared_writers"];
        if let Some((_, why)) = UNSUPPORTED_CONNECTION_SETTINGS.iter().find(|(name, _)| *name == s.attribute.text) {
            return err(&s.attribute.pos, format!("attribute {label} is not supported: {why}"));
        }
        if !known.contains(&s.attribute.text.as_str()) {
            return err(
                &s.attribute.pos,
                format!(
                    "unknown attribute '{}' for connection '{}' (connection settings: channel, shared_writers)",
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
        } else {
            let why = string_value(&s.value, &label)?;
            if why.trim().is_empty() {
                return err(&s.value.pos, format!("{label} must say why several components write this region"));
            }
            conn.shared_writers = Some(why.to_string());
        }
        Ok(())
    }

    fn instance_setting(&mut self, instance: usize, s: &ast::Setting) -> Result<()> {
        let component = &self.system.components[self.system.instances[instance].component];
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let label = format!("'{target}.{attr}'");
        if let Some(decl) = component.decl.attributes.iter().find(|a| a.name.text == attr) {
            type_check(decl, &s.value, &label)?;
            self.system.instances[instance].config.attributes.insert(attr.to_string(), s.value.clone());
            return Ok(());
        }
        let hardware = component.is_hardware();
        let interface_with_suffix = |suffix: &str| -> Option<usize> {
            let prefix = attr.strip_suffix(suffix)?;
            component.interface(prefix)
        };
        if let Some(why) = unsupported_instance_setting(component, attr) {
            return err(&s.attribute.pos, format!("attribute {label} is not supported: {why}"));
        }
        let config = &mut self.system.instances[instance].config;
        if !hardware {
            match attr {
                "priority" | "_priority" | "max_priority" | "_max_priority" => {
                    let value = int_in(&s.value, &label, 0, 255)? as u8;
                    // The control-thread form wins over the instance-wide one.
                    let slot =
                        if attr.ends_with("max_priority") { &mut config.max_priority } else { &mut config.priority };
                    if attr.starts_with('_') || slot.is_none() {
                        *slot = Some(value);
                    }
                    return Ok(());
                }
                "_stack_size" => {
                    config.stack_size = Some(int_in(&s.value, &label, 1, 1 << 30)? as u64);
                    return Ok(());
                }
                "cnode_size_bits" => {
                    config.cnode_size_bits = Some(int_in(&s.value, &label, 4, 20)? as u8);
                    return Ok(());
                }
                "restartable" => {
                    config.restartable = int_in(&s.value, &label, 0, 1)? == 1;
                    return Ok(());
                }
                "log_server" => {
                    if int_in(&s.value, &label, 0, 1)? == 1 {
                        config.log_server = Some(s.value.pos.clone());
                    }
                    return Ok(());
                }
                "restart_limit" => {
                    config.restart_limit = Some(int_in(&s.value, &label, 1, 1000)? as u32);
                    return Ok(());
                }
                "restart_window_ms" => {
                    config.restart_window_ms = Some(int_in(&s.value, &label, 1, 3_600_000)? as u32);
                    return Ok(());
                }
                "restart_backoff_ms" => {
                    config.restart_backoff_ms = Some(int_in(&s.value, &label, 0, 600_000)? as u32);
                    return Ok(());
                }
                "system_events" => {
                    let name = string_value(&s.value, &label)?;
                    if name == "poll" {
                        config.system_events = Some((None, s.value.pos.clone()));
                        return Ok(());
                    }
                    let Some(i) = component
                        .interface(name)
                        .filter(|&i| component.decl.interfaces[i].kind == InterfaceKind::Consumes)
                    else {
                        return err(
                            &s.value.pos,
                            format!("{label} must name a 'consumes' interface of component '{}' (or be \"poll\"), not '{name}'", component.decl.name.text),
                        );
                    };
                    config.system_events = Some((Some(i), s.value.pos.clone()));
                    return Ok(());
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
                        string_value(name, &label)?;
                    }
                    config.may_restart_names = names.clone();
                    return Ok(());
                }
                _ => {}
            }
            if let Some(i) = interface_with_suffix("_notification") {
                if component.decl.interfaces[i].kind == InterfaceKind::Consumes {
                    let name = string_value(&s.value, &label)?;
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
                    return Ok(());
                }
            }
            if let Some(i) = interface_with_suffix("_access") {
                if component.decl.interfaces[i].kind == InterfaceKind::Dataport {
                    let rights = string_value(&s.value, &label)?;
                    config.access.insert(i, parse_access(rights, &label, &s.value.pos)?);
                    return Ok(());
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
        } else {
            if let Some(i) = interface_with_suffix("_paddr").filter(|&i| is_dataport(component, i)) {
                let paddr = int_in(&s.value, &label, 0, (1 << 52) - 1)? as u64;
                if !paddr.is_multiple_of(PAGE_SIZE) {
                    return err(&s.value.pos, format!("{label} = {paddr:#x} is not page-aligned"));
                }
                config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).paddr = paddr;
                return Ok(());
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
                config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).size = size;
                return Ok(());
            }
            if let Some(i) = interface_with_suffix("_hardware_cached").filter(|&i| is_dataport(component, i)) {
                let cached = int_in(&s.value, &label, 0, 1)? == 1;
                config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).cached = cached;
                return Ok(());
            }
            if let Some(i) = interface_with_suffix("_attributes") {
                if component.decl.interfaces[i].kind == InterfaceKind::Provides {
                    let text = string_value(&s.value, &label)?;
                    config.ports.insert(i, parse_port_range(text, &label, &s.value.pos)?);
                    return Ok(());
                }
            }
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
                            let t = string_value(&s.value, &label)?;
                            if !["ioapic", "isa", "pci"].contains(&t) {
                                return err(
                                    &s.value.pos,
                                    format!("{label} = \"{t}\" is not supported; use \"ioapic\", \"isa\" or \"pci\" (x86 IOAPIC)"),
                                );
                            }
                        }
                        "_irq_ioapic" => {
                            int_in(&s.value, &label, 0, 255)?;
                        }
                        "_irq_ioapic_pin" => {
                            int_in(&s.value, &label, 0, 23)?;
                        }
                        "_irq_level" | "_irq_polarity" => {
                            int_in(&s.value, &label, 0, 1)?;
                        }
                        _ => {
                            int_in(&s.value, &label, 0, MAX_IRQ_VECTOR as i128)?;
                        }
                    }
                    return Ok(());
                }
            }
            if [
                "priority",
                "_priority",
                "_stack_size",
                "restartable",
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
        }
        err(
            &s.attribute.pos,
            format!("unknown attribute '{attr}' for instance '{target}' (component '{}')", component.decl.name.text),
        )
    }

    /// Resolves every `may_restart` list: each name is another software
    /// instance, marked `restartable`, listed once. A grant is a privilege
    /// (the holder can stop the target at any time), so anything doubtful
    /// is an error rather than ignored.
    fn resolve_restart_grants(&mut self) -> Result<()> {
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

    /// Assembles each hardware interrupt from its settings and checks that
    /// every non-`maybe` interface is connected.
    fn check_instances(&mut self) -> Result<()> {
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

    fn check_connections(&mut self) -> Result<()> {
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
                        let hw = &conn.to[0];
                        let inst = &self.system.instances[hw.instance];
                        let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
                        let mmio = inst.config.mmio.get(&hw.interface);
                        if mmio.is_none_or(|m| m.size == 0) {
                            return err(
                                &hw.pos,
                                format!(
                                    "seL4HardwareMMIO connection '{}' needs '{}.{iface}_size'",
                                    conn.name.text, inst.name.text
                                ),
                            );
                        }
                        if !self.paddr_set(hw.instance, &format!("{iface}_paddr")) {
                            return err(
                                &hw.pos,
                                format!(
                                    "seL4HardwareMMIO connection '{}' needs '{}.{iface}_paddr'",
                                    conn.name.text, inst.name.text
                                ),
                            );
                        }
                        self.one_driver(&conn, &mut device_regions)?;
                    } else {
                        self.one_writer(&conn)?;
                    }
                }
                ConnectorKind::HardwareInterrupt => {
                    let hw = &conn.from[0];
                    let irq = self.interrupt(hw, &conn.name.text)?;
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
                ConnectorKind::HardwareIoPort => {
                    let hw = &conn.to[0];
                    let inst = &self.system.instances[hw.instance];
                    let iface = &self.system.component_of(hw.instance).decl.interfaces[hw.interface].name.text;
                    let Some(&range) = inst.config.ports.get(&hw.interface) else {
                        return err(
                            &hw.pos,
                            format!(
                                "seL4HardwareIOPort connection '{}' needs '{}.{iface}_attributes = \"0xFIRST:0xLAST\"'",
                                conn.name.text, inst.name.text
                            ),
                        );
                    };
                    for (other, other_pos, other_name) in &port_ranges {
                        if range.0 <= other.1 && other.0 <= range.1 {
                            return err(&hw.pos, format!("I/O ports {:#x}:{:#x} of '{}.{iface}' overlap those of '{other_name}' at {other_pos}", range.0, range.1, inst.name.text));
                        }
                    }
                    port_ranges.push((range, hw.pos.clone(), format!("{}.{iface}", inst.name.text)));
                }
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

    /// The value of setting `target.attribute`, if the assembly has one.
    fn setting(&self, target: &str, attribute: &str) -> Option<&Value> {
        let index = self.setting_index.get(&(target.to_string(), attribute.to_string()))?;
        Some(&self.settings_store[*index].value)
    }

    fn paddr_set(&self, instance: usize, attr: &str) -> bool {
        self.setting(&self.system.instances[instance].name.text, attr).is_some()
    }

    fn interrupt(&self, hw: &EndRef, connection: &str) -> Result<IrqConfig> {
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
        })
    }

    /// Every instance of a type must wire each interface the same way, so
    /// one ELF and one glue file serve them all.
    fn check_component_types(&mut self) -> Result<()> {
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

    /// Fills `ComponentType::attribute_values`: each instance's setting or
    /// the declaration's default; instances of one type must agree.
    fn resolve_attribute_values(&mut self) -> Result<()> {
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

/// Per-interface forms of thread attributes (`<iface>_priority`, ...):
/// upstream gives some interfaces a glue thread of their own; here each
/// component has exactly one thread.
const PER_INTERFACE_THREAD_ATTRIBUTES: &[&str] =
    &["_priority", "_max_priority", "_stack_size", "_affinity", "_domain", "_passive", "_period", "_budget", "_data"];

/// Upstream instance settings this compiler does not implement, with why
/// (exact names; the per-interface ones are matched by suffix elsewhere).
/// Naming one is "not supported", never "unknown attribute".
const UNSUPPORTED_INSTANCE_SETTINGS: &[(&str, &str)] = &[
    (
        "integrity_label",
        "it labels components for upstream's capDL integrity proofs, which this compiler does not produce",
    ),
    ("heap_size", "a component sizes its heap in its crate (component_runtime::global_heap!), not in the assembly"),
    ("affinity", "the kernel runs on one core (CONFIG_MAX_NUM_NODES = 1)"),
    ("_affinity", "the kernel runs on one core (CONFIG_MAX_NUM_NODES = 1)"),
    ("_domain", "the kernel has one scheduling domain (CONFIG_NUM_DOMAINS = 1)"),
    ("period", MCS),
    ("_period", MCS),
    ("budget", MCS),
    ("_budget", MCS),
    ("data", MCS),
    ("_data", MCS),
    ("dma_pool", DMA),
    ("dma_pool_paddr", DMA),
    ("dma_pool_cached", DMA),
    ("simple", SIMPLE),
    ("simple_extra_bootinfo", SIMPLE),
    ("asid_pool", SIMPLE),
    ("ioports", SIMPLE),
    ("mmios", SIMPLE),
    ("untyped_mmios", SIMPLE),
    ("irqs", SIMPLE),
    ("dtb", "there is no device tree on this x86 system; hardware is described by settings"),
    ("generate_interrupts", "there is no device tree on this x86 system; hardware is described by settings"),
];

const MCS: &str = "the kernel is not built for MCS, so threads have no scheduling contexts";
const DMA: &str = "there is no per-component DMA pool: dataports are physically contiguous and a component learns their physical addresses from its start record, so DMA buffers are dataports";
const SIMPLE: &str =
    "it is for upstream's 'simple' components (capabilities handed to C code, VMs), which this compiler does not generate";

/// Upstream settings of a hardware instance's interrupt (`<emits>` +
/// suffix) for schemes other than the IOAPIC, with why.
const UNSUPPORTED_IRQ_SETTINGS: &[(&str, &str)] = &[
    ("_irq_number", IRQ_NOT_IOAPIC),
    ("_irq_trigger", IRQ_NOT_IOAPIC),
    ("_irq_target", IRQ_NOT_IOAPIC),
    ("_spi_number", IRQ_NOT_IOAPIC),
    ("_irq_handle", IRQ_MSI),
    ("_irq_pci_bus", IRQ_MSI),
    ("_irq_pci_dev", IRQ_MSI),
    ("_irq_pci_fun", IRQ_MSI),
    (
        "_attributes",
        "it configures seL4IOAPICHardwareInterrupt, which is not supported; use seL4HardwareInterrupt with '_irq_type' and the '_irq_ioapic*' settings",
    ),
];

const IRQ_NOT_IOAPIC: &str = "it is for upstream's \"simple\" and \"arm\" interrupt types (the legacy PIC, an ARM GIC); this system takes x86 interrupts through the IOAPIC: set '_irq_type' (\"ioapic\", \"isa\" or \"pci\") and '_irq_ioapic_pin'";
const IRQ_MSI: &str = "it is for MSI interrupts (irq type \"msi\"), which are not supported; this system takes interrupts through the IOAPIC";

/// Upstream connection settings this compiler does not implement.
const UNSUPPORTED_CONNECTION_SETTINGS: &[(&str, &str)] = &[
    ("size", "shared memory is as large as its dataport type says: declare 'dataport Buf(n)'"),
    ("buffer", "RPC through a shared buffer is not supported: the glue marshals arguments in message registers"),
    ("paddr", "the loader places shared memory; only seL4HardwareMMIO maps a fixed physical address ('<dp>_paddr')"),
    (
        "integrity_label",
        "it labels connections for upstream's capDL integrity proofs, which this compiler does not produce",
    ),
];

/// Why upstream setting `attr` of an instance of `component` is not
/// supported, if it is one this compiler leaves out.
fn unsupported_instance_setting(component: &ComponentType, attr: &str) -> Option<&'static str> {
    let hardware = component.is_hardware();
    // A hardware instance has no thread, heap or address space to set up.
    let applies = |name: &str| !hardware || name == "integrity_label";
    if let Some((_, why)) = UNSUPPORTED_INSTANCE_SETTINGS.iter().find(|(name, _)| *name == attr && applies(name)) {
        return Some(why);
    }
    if !hardware {
        return None;
    }
    UNSUPPORTED_IRQ_SETTINGS.iter().find_map(|(suffix, why)| {
        let i = component.interface(attr.strip_suffix(suffix)?)?;
        (component.decl.interfaces[i].kind == InterfaceKind::Emits).then_some(*why)
    })
}

fn is_dataport(component: &ComponentType, i: usize) -> bool {
    component.decl.interfaces[i].kind == InterfaceKind::Dataport
}

fn int_in(value: &Value, label: &str, min: i128, max: i128) -> Result<i128> {
    match value.kind {
        ValueKind::Int(n) if (min..=max).contains(&n) => Ok(n),
        ValueKind::Int(n) => err(&value.pos, format!("{label} = {n} is out of range ({min}..={max})")),
        ref other => {
            err(&value.pos, format!("mistyped assignment: {label} expects an integer, found {}", other.describe()))
        }
    }
}

fn string_value<'a>(value: &'a Value, label: &str) -> Result<&'a str> {
    match &value.kind {
        ValueKind::Str(s) => Ok(s),
        other => err(&value.pos, format!("mistyped assignment: {label} expects a string, found {}", other.describe())),
    }
}

/// Upstream's `_access` syntax is `^R?W?X?P?$`; of those, only `R` and
/// `RW` are mappings this system can give (x86 has no write-only pages, and
/// dataports are never executable).
fn parse_access(rights: &str, label: &str, pos: &Pos) -> Result<Access> {
    let mut rest = rights;
    let mut letters = Vec::new();
    for letter in ['R', 'W', 'X', 'P'] {
        if let Some(r) = rest.strip_prefix(letter) {
            letters.push(letter);
            rest = r;
        }
    }
    if !rest.is_empty() {
        return err(pos, format!("malformed rights \"{rights}\" for {label}: use the letters R, W, X, P in that order, each at most once"));
    }
    if letters.contains(&'X') {
        return err(pos, format!("{label} = \"{rights}\": executable dataports ('X') cannot be given"));
    }
    match (letters.contains(&'R'), letters.contains(&'W')) {
        (true, false) => Ok(Access::ReadOnly),
        (false, true) => err(pos, format!("{label} = \"{rights}\": write-only cannot be given (x86 pages that are writable are readable); use \"RW\"")),
        // Unset or empty means full access upstream.
        _ => Ok(Access::ReadWrite),
    }
}

/// `"0x3f8:0x3ff"`: each half with base auto-detection (as Python's
/// `int(x, 0)`), inclusive.
fn parse_port_range(text: &str, label: &str, pos: &Pos) -> Result<(u16, u16)> {
    let number = |s: &str| -> Option<u16> {
        let s = s.trim();
        let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            (h, 16)
        } else if let Some(o) = s.strip_prefix("0o").or_else(|| s.strip_prefix("0O")) {
            (o, 8)
        } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
            (b, 2)
        } else if s.len() > 1 && s.starts_with('0') {
            return None;
        } else {
            (s, 10)
        };
        u16::from_str_radix(digits, radix).ok()
    };
    let malformed = || {
        err(
            pos,
            format!("malformed I/O port range \"{text}\" for {label}: expected \"0xFIRST:0xLAST\" (inclusive, 16-bit)"),
        )
    };
    let Some((a, b)) = text.split_once(':') else { return malformed() };
    let (Some(first), Some(last)) = (number(a), number(b)) else { return malformed() };
    if first > last {
        return err(pos, format!("I/O port range \"{text}\" for {label} is empty: the first port is above the last"));
    }
    Ok((first, last))
}

/// The values an integer attribute type holds: upstream's C types (`int`
/// is C's, 32 bits on every platform CAmkES supports). The glue's constant
/// is `i64` or `u64`, but a value must also mean the same to upstream's C.
fn int_range(ty: &str) -> (i128, i128) {
    match ty {
        "uint64_t" => (0, u64::MAX as i128),
        "int64_t" => (i64::MIN as i128, i64::MAX as i128),
        _ => (i32::MIN as i128, i32::MAX as i128),
    }
}

fn type_check(decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
    let in_range = |v: &Value| -> Result<()> {
        let ValueKind::Int(n) = v.kind else { return Ok(()) };
        let (min, max) = int_range(&decl.ty.text);
        if (min..=max).contains(&n) {
            return Ok(());
        }
        let fits = |ty: &str| {
            let (min, max) = int_range(ty);
            (min..=max).contains(&n)
        };
        let hint = match decl.ty.text.as_str() {
            "int" if fits("int64_t") => "; declare it int64_t",
            "int" | "int64_t" if fits("uint64_t") => "; declare it uint64_t",
            _ => "",
        };
        err(&v.pos, format!("{label} = {n} is out of range for {} ({min}..={max}){hint}", decl.ty.text))
    };
    let element_ok = |v: &Value| match (decl.ty.text.as_str(), &v.kind) {
        ("string", ValueKind::Str(_)) => true,
        ("string", _) => false,
        (_, ValueKind::Int(_)) => true,
        _ => false,
    };
    let wanted = if decl.ty.text == "string" { "a string" } else { "an integer" };
    if decl.array {
        let ValueKind::List(items) = &value.kind else {
            return err(
                &value.pos,
                format!("mistyped assignment: {label} is an array attribute, found {}", value.kind.describe()),
            );
        };
        for item in items {
            if !element_ok(item) {
                return err(
                    &item.pos,
                    format!(
                        "mistyped assignment: elements of {label} must be {wanted}, found {}",
                        item.kind.describe()
                    ),
                );
            }
            in_range(item)?;
        }
        return Ok(());
    }
    if !element_ok(value) {
        return err(
            &value.pos,
            format!(
                "mistyped assignment: {label} is {} attribute, found {}",
                if decl.ty.text == "string" { "a string" } else { "an integer" },
                value.kind.describe()
            ),
        );
    }
    in_range(value)
}

/// Checks the items of a whole system (as returned by
/// [`crate::imports::load`]).
/// `root_file` names the file that a whole-system error (no assembly) is
/// reported against.
pub fn check(items: Vec<Item>, root_file: &str) -> Result<System> {
    let mut checker = Checker { root_file: Some(Arc::from(root_file)), ..Checker::default() };
    for item in &items {
        let name = match item {
            Item::Procedure(p) => &p.name,
            Item::Component(c) => &c.name,
            Item::Connector(k) => &k.name,
            _ => continue,
        };
        checker.later.entry(name.text.clone()).or_insert(name.pos.clone());
    }
    for item in items {
        match item {
            Item::Import(import) => checker.import_std(&import.pos)?,
            Item::Procedure(p) => checker.define_procedure(p)?,
            Item::Component(c) => checker.define_component(c)?,
            Item::Connector(k) => checker.define(&k.name, Defined::UserConnector)?,
            Item::Assembly(a) => checker.add_assembly(a)?,
        }
    }
    checker.finish()
}
