//! What a checked system is: component types, instances with their
//! resolved settings, connections, and the connectors this compiler
//! implements. The spec and glue emitters read these.

use crate::ast::{self, DataportType, EndSide, Name, Value};
use crate::diag::Pos;
use std::collections::HashMap;
use system_spec::{Access, PAGE_SIZE};

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
pub(super) enum EndKind {
    Procedure,
    Event,
    Dataport,
}

/// How a connector's ends may look.
pub(super) struct Rule {
    pub(super) kind: EndKind,
    pub(super) from_many: bool,
    pub(super) to_many: bool,
    pub(super) from_hardware: bool,
    pub(super) to_hardware: bool,
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

    pub(super) fn rule(self) -> Rule {
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
    /// Per interface: the IO-Lite pool id of a dataport that is an end of a
    /// pool connection (`<connection>.pool = true`), the same for every
    /// instance; `None` for every other interface.
    pub pool_ids: Vec<Option<u32>>,
    /// Per attribute given per client by name (`check::PER_CLIENT`, integer
    /// shares): its values in badge order (badge 1 first), the same for
    /// every instance.
    pub per_client: Vec<(String, Vec<i64>)>,
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
    /// `_irq_type = "device"`: the interrupt of the PCI function bound to
    /// the driver at boot (pin, trigger and polarity are the loader's).
    pub device: bool,
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
    /// `<dataport>_bar`: this BAR of the PCI function bound to the driver
    /// at boot, instead of a fixed `_paddr`.
    pub bar: Option<u8>,
}

/// Per-instance settings, resolved and checked.
#[derive(Clone, Debug, Default)]
pub struct InstanceConfig {
    /// Thread priority.
    pub priority: Option<u8>,
    /// Where the priority that counts is set (`_priority` wins over
    /// `priority`), for the errors of the priority discipline.
    pub priority_setting: Option<Pos>,
    /// Maximum controlled priority.
    pub max_priority: Option<u8>,
    /// Stack bytes.
    pub stack_size: Option<u64>,
    /// CNode size bits.
    pub cnode_size_bits: Option<u8>,
    /// Whether the supervisor may restart it.
    pub restartable: bool,
    /// `fault_injection`: the test console may make it fault or hang.
    pub fault_injection: bool,
    /// `hang_cpu_ms`: CPU time without progress that makes it stuck (0:
    /// not watched).
    pub hang_cpu_ms: u32,
    /// `confirm_death_ms`: how long it may take to confirm a peer's death
    /// (unset: the default).
    pub confirm_death_ms: Option<u32>,
    /// `untrusted`: restarted rather than waited for when it holds up a
    /// death protocol.
    pub untrusted: bool,
    /// `may_restart`: the instances (indices into [`System::instances`])
    /// this one may ask the supervisor to restart; resolved and checked
    /// once every setting is known (whether a target is restartable may
    /// be set after this list).
    pub may_restart: Vec<usize>,
    /// The names as written, with where each is, until resolved.
    pub(super) may_restart_names: Vec<Value>,
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
    /// `<interface>_bar`: I/O BARs of the PCI function bound to the driver
    /// at boot, by (hardware) interface index, instead of a fixed range.
    pub port_bars: HashMap<usize, u8>,
    /// `match`: what PCI device this driver drives (`pci::MATCHES`), with
    /// where the setting is.
    pub pci_match: Option<(String, Pos)>,
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
    /// `<connection>.pool = true` on an `seL4SharedData` connection: the
    /// region is an IO-Lite pool, and this is its id, derived by the
    /// compiler (1, 2, ... in the order the pool connections are written)
    /// and the same at every end.
    pub pool: Option<u32>,
    /// Where `<connection>.pool = true` is set, until the ids are derived.
    pub(super) pool_setting: Option<Pos>,
    /// `<connection>.initialiser = "<instance>"`: the end (instance index)
    /// that sets the region up while the others attach at their start
    /// without waiting for it, so it must run above them; with where the
    /// setting's value is.
    pub initialiser: Option<(usize, Pos)>,
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
    pub(super) procedure_index: HashMap<String, usize>,
    /// `(instance, interface)` to the connection (and side) holding it.
    pub(super) end_index: HashMap<(usize, usize), (usize, EndSide)>,
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
