//! Upstream settings this compiler leaves out, each with why: naming one
//! is "not supported" and the reason, never "unknown attribute", so an
//! assembly written for upstream learns what to do instead.

use super::model::ComponentType;
use crate::ast::InterfaceKind;

/// Per-interface forms of thread attributes (`<iface>_priority`, ...):
/// upstream gives some interfaces a glue thread of their own; here each
/// component has exactly one thread.
pub(super) const PER_INTERFACE_THREAD_ATTRIBUTES: &[&str] =
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
pub(super) const UNSUPPORTED_CONNECTION_SETTINGS: &[(&str, &str)] = &[
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
pub(super) fn unsupported_instance_setting(component: &ComponentType, attr: &str) -> Option<&'static str> {
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
