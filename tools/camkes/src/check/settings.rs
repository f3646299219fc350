//! The configuration: every setting of the merged assemblies (and `--set`)
//! against what its target declares or this compiler implements, typed and
//! range-checked; upstream settings left out say why.

use super::model::{dataport_size, ComponentType, ConnectorKind, EndRef, IrqConfig, MmioConfig};
use super::Checker;
use crate::ast::{self, InterfaceKind, Value, ValueKind};
use crate::diag::{err, Pos, Result};
use system_spec::{Access, MAX_IRQ_VECTOR, PAGE_SIZE};

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

/// Bounds of component attributes that are policy (limits, timeouts),
/// beyond their C type's: (component, attribute, least, most). A value
/// outside them is refused where it is written (the setting, the
/// default or `--set`), not found wrong at run time.
const POLICY_BOUNDS: &[(&str, &str, i128, i128)] = &[
    // netstack's admission of connection requests (its README, "Admission").
    ("Netstack", "syn_recv_timeout_ms", 100, 600_000),
    ("Netstack", "half_open_budget", 0, 64),
    ("Netstack", "per_address_half_open", 0, 64),
    ("Netstack", "per_address_connections", 1, 1 << 20),
    // Received pages one connection may keep (netstack README, "Received
    // pages, not only bytes, are bounded").
    ("Netstack", "rx_conn_pages", 1, 65_536),
    // httpd's slow input (its README, "Slow and fragmented input").
    ("Httpd", "request_timeout_ms", 100, 3_600_000),
    ("Httpd", "min_input_rate", 0, 1 << 30),
    ("Httpd", "rate_grace_ms", 0, 3_600_000),
    ("Httpd", "max_input_slices", 1, 4096),
];

/// Checks `value` of attribute `decl` of component `component` against
/// [`POLICY_BOUNDS`] (after [`type_check`]).
pub(super) fn policy_check(component: &str, decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
    let ValueKind::Int(n) = value.kind else { return Ok(()) };
    match POLICY_BOUNDS.iter().find(|b| b.0 == component && b.1 == decl.name.text) {
        Some(&(_, _, min, max)) if !(min..=max).contains(&n) => {
            err(&value.pos, format!("{label} = {n} is out of its bounds ({min}..={max})"))
        }
        _ => Ok(()),
    }
}

pub(super) fn type_check(decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
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

impl Checker {
    /// The two connection settings: `channel` and `shared_writers`, both on
    /// `seL4SharedData` only (upstream accepts them silently).
    pub(super) fn connection_setting(&mut self, connection: usize, s: &ast::Setting) -> Result<()> {
        let conn = &mut self.system.connections[connection];
        let label = format!("'{}.{}'", s.target.text, s.attribute.text);
        let known = ["channel", "shared_writers", "pool"];
        if let Some((_, why)) = UNSUPPORTED_CONNECTION_SETTINGS.iter().find(|(name, _)| *name == s.attribute.text) {
            return err(&s.attribute.pos, format!("attribute {label} is not supported: {why}"));
        }
        if !known.contains(&s.attribute.text.as_str()) {
            return err(
                &s.attribute.pos,
                format!(
                    "unknown attribute '{}' for connection '{}' (connection settings: channel, shared_writers, pool)",
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
    /// thread, restart, rights and interrupt-delivery settings. `false` if
    /// `s` is none of them.
    fn software_setting(&mut self, instance: usize, s: &ast::Setting) -> Result<bool> {
        let component = &self.system.components[self.system.instances[instance].component];
        let attr = s.attribute.text.as_str();
        let target = s.target.text.as_str();
        let label = format!("'{target}.{attr}'");
        let interface_with_suffix = |suffix: &str| -> Option<usize> {
            let prefix = attr.strip_suffix(suffix)?;
            component.interface(prefix)
        };
        let config = &mut self.system.instances[instance].config;
        match attr {
            "priority" | "_priority" | "max_priority" | "_max_priority" => {
                let value = int_in(&s.value, &label, 0, 255)? as u8;
                // The control-thread form wins over the instance-wide one.
                let slot = if attr.ends_with("max_priority") { &mut config.max_priority } else { &mut config.priority };
                if attr.starts_with('_') || slot.is_none() {
                    *slot = Some(value);
                }
                return Ok(true);
            }
            "_stack_size" => {
                config.stack_size = Some(int_in(&s.value, &label, 1, 1 << 30)? as u64);
                return Ok(true);
            }
            "cnode_size_bits" => {
                config.cnode_size_bits = Some(int_in(&s.value, &label, 4, 20)? as u8);
                return Ok(true);
            }
            "restartable" => {
                config.restartable = int_in(&s.value, &label, 0, 1)? == 1;
                return Ok(true);
            }
            "hang_cpu_ms" => {
                config.hang_cpu_ms = int_in(&s.value, &label, 0, 3_600_000)? as u32;
                return Ok(true);
            }
            "confirm_death_ms" => {
                config.confirm_death_ms = Some(int_in(&s.value, &label, 1, 600_000)? as u32);
                return Ok(true);
            }
            "untrusted" => {
                config.untrusted = int_in(&s.value, &label, 0, 1)? == 1;
                return Ok(true);
            }
            "fault_injection" => {
                config.fault_injection = int_in(&s.value, &label, 0, 1)? == 1;
                return Ok(true);
            }
            "log_server" => {
                if int_in(&s.value, &label, 0, 1)? == 1 {
                    config.log_server = Some(s.value.pos.clone());
                }
                return Ok(true);
            }
            "restart_limit" => {
                config.restart_limit = Some(int_in(&s.value, &label, 1, 1000)? as u32);
                return Ok(true);
            }
            "restart_window_ms" => {
                config.restart_window_ms = Some(int_in(&s.value, &label, 1, 3_600_000)? as u32);
                return Ok(true);
            }
            "restart_backoff_ms" => {
                config.restart_backoff_ms = Some(int_in(&s.value, &label, 0, 600_000)? as u32);
                return Ok(true);
            }
            "system_events" => {
                let name = string_value(&s.value, &label)?;
                if name == "poll" {
                    config.system_events = Some((None, s.value.pos.clone()));
                    return Ok(true);
                }
                let Some(i) =
                    component.interface(name).filter(|&i| component.decl.interfaces[i].kind == InterfaceKind::Consumes)
                else {
                    return err(
                        &s.value.pos,
                        format!(
                            "{label} must name a 'consumes' interface of component '{}' (or be \"poll\"), not '{name}'",
                            component.decl.name.text
                        ),
                    );
                };
                config.system_events = Some((Some(i), s.value.pos.clone()));
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
                    string_value(name, &label)?;
                }
                config.may_restart_names = names.clone();
                return Ok(true);
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
                return Ok(true);
            }
        }
        if let Some(i) = interface_with_suffix("_access") {
            if component.decl.interfaces[i].kind == InterfaceKind::Dataport {
                let rights = string_value(&s.value, &label)?;
                config.access.insert(i, parse_access(rights, &label, &s.value.pos)?);
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
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).paddr = paddr;
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
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).size = size;
            return Ok(true);
        }
        if let Some(i) = interface_with_suffix("_hardware_cached").filter(|&i| is_dataport(component, i)) {
            let cached = int_in(&s.value, &label, 0, 1)? == 1;
            config.mmio.entry(i).or_insert(MmioConfig { paddr: 0, size: 0, cached: false }).cached = cached;
            return Ok(true);
        }
        if let Some(i) = interface_with_suffix("_attributes") {
            if component.decl.interfaces[i].kind == InterfaceKind::Provides {
                let text = string_value(&s.value, &label)?;
                config.ports.insert(i, parse_port_range(text, &label, &s.value.pos)?);
                return Ok(true);
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
                return Ok(true);
            }
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
