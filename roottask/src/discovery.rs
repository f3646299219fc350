//! PCI discovery at boot: the root task walks configuration space before
//! any component runs (it holds the I/O port control capability, so the
//! 0xCF8/0xCFC pair is its alone until pci_config starts), binds each
//! driver that names a match in the assembly (`<instance>.match`) to the
//! first supported function of that kind, and works out where each bound
//! function's INTx arrives at the IOAPIC (`pci::route_intx`).
//!
//! The loader then makes the spec's `Pci*` objects (BAR frames, BAR port
//! ranges, interrupts) from what was bound here, and every component's
//! start page lists what was found (`StartInfo::pci`).
//!
//! Configuration mechanism #1 only: it reaches all 256 buses' first 256
//! bytes of every function, which is all this needs (no extended
//! capabilities); ECAM (ACPI's MCFG) is not used.

use alloc::string::String;
use alloc::vec::Vec;
use component_runtime::start::{PciRecord, StartInfo, MAX_PCI_DEVICES, PCI_NO_PIN};
use component_runtime::{error, log};
use pci::{Bar, Chipset, Found, Route};
use system_spec::{ObjectKind, SystemSpec};

const CONFIG_ADDRESS: u16 = 0xCF8;
const CONFIG_DATA: u16 = 0xCFC;

/// Configuration space through the root task's I/O port control capability.
#[derive(Clone, Copy)]
struct RootPorts;

impl pci::ConfigAccess for RootPorts {
    type Error = sel4::Error;

    fn read32(&self, f: pci::Function, register: u8) -> Result<u32, sel4::Error> {
        sel4::x86_io_port_out32(sel4::CAP_IO_PORT, CONFIG_ADDRESS, f.config_address(register))?;
        sel4::x86_io_port_in32(sel4::CAP_IO_PORT, CONFIG_DATA)
    }

    fn write32(&self, f: pci::Function, register: u8, value: u32) -> Result<(), sel4::Error> {
        sel4::x86_io_port_out32(sel4::CAP_IO_PORT, CONFIG_ADDRESS, f.config_address(register))?;
        sel4::x86_io_port_out32(sel4::CAP_IO_PORT, CONFIG_DATA, value)
    }
}

/// A driver and the function bound to it.
pub struct Binding {
    /// The driver's instance name.
    pub driver: String,
    /// Index into [`Discovery::found`].
    pub found: usize,
    /// Where its interrupt arrives.
    pub route: Route,
    /// The memory BAR its registers are in, where the device says so
    /// rather than the assembly (`regs_bar`): a modern virtio function's
    /// is the one its capabilities name.
    pub regs_bar: Option<u8>,
}

/// What enumeration found and bound.
pub struct Discovery {
    /// The host bridge's chipset.
    pub chipset: Chipset,
    /// Every type 0 function, in walk order.
    pub found: Vec<Found>,
    /// One per driver that got a function.
    pub bindings: Vec<Binding>,
    /// Functions picked for a driver that could then not have them (an
    /// interrupt that cannot be routed or is taken): indices into `found`.
    refused: Vec<usize>,
}

impl Discovery {
    /// Walks the buses and binds the spec's drivers; prints one line per
    /// function found and one per driver left without a device.
    pub fn run(spec: &SystemSpec) -> Discovery {
        let chipset = match Chipset::detect(RootPorts) {
            Ok(c) => c,
            Err(e) => {
                error!("pci: configuration space unreachable ({e:?}): no devices");
                return Discovery {
                    chipset: Chipset::Other(0xffff, 0xffff),
                    found: Vec::new(),
                    bindings: Vec::new(),
                    refused: Vec::new(),
                };
            }
        };
        let mut found = Vec::new();
        if let Err(e) = pci::enumerate(RootPorts, |f| found.push(f)) {
            error!("pci: enumeration stopped ({e:?}); using what was found");
        }
        log!("pci: {} functions found ({})", found.len(), chipset.name());
        let mut discovery = Discovery { chipset, found, bindings: Vec::new(), refused: Vec::new() };
        discovery.bind(spec);
        discovery.report(spec);
        discovery
    }

    /// Binds every driver with a match to the first supported function of
    /// its kind that no driver before it took.
    fn bind(&mut self, spec: &SystemSpec) {
        for component in &spec.components {
            let Some(kind) = component.pci_match.as_deref() else { continue };
            let Some(kind) = pci::match_kind(kind) else {
                error!("{}.match = \"{kind}\": no such kind of device; {} not started", component.name, component.name);
                continue;
            };
            let taken = |i: usize| self.bindings.iter().any(|b| b.found == i);
            let pick = (0..self.found.len()).find(|&i| !taken(i) && kind.supports(&self.found[i]).is_some());
            let Some(index) = pick else {
                let models: Vec<&str> = kind.supported.iter().map(|(_, _, n)| *n).collect();
                let classes: Vec<String> = kind.classes.iter().map(|c| alloc::format!("{c:04x}")).collect();
                error!(
                    "pci: no device for {}.match = \"{}\" (class {}: {}): {} not started",
                    component.name,
                    kind.name,
                    classes.join(", "),
                    models.join(", "),
                    component.name
                );
                continue;
            };
            let route = pci::route_intx(&self.chipset, &self.found[index]);
            let wants_irq =
                spec.objects.iter().any(|o| matches!(&o.kind, ObjectKind::PciIrq(irq) if irq.driver == component.name));
            if wants_irq && !matches!(route, Route::IoApic { .. }) {
                let why = match route {
                    Route::Unknown(why) => why,
                    _ => "it has no interrupt pin",
                };
                error!(
                    "pci {}: its interrupt cannot be routed ({why}; no MSI support yet): {} not started",
                    self.found[index].function, component.name
                );
                self.refused.push(index);
                continue;
            }
            // seL4 binds one handler to an IOAPIC pin: two drivers cannot
            // share one (the second would take the pin from the first).
            if let Route::IoApic { pin, .. } = route {
                let shared = self
                    .bindings
                    .iter()
                    .find(|b| wants_irq && matches!(b.route, Route::IoApic { pin: p, .. } if p == pin));
                if let Some(other) = shared {
                    error!(
                        "pci {}: its interrupt arrives at IOAPIC pin {pin}, as that of {} ({}'s); shared pins are not supported (no MSI yet): {} not started",
                        self.found[index].function, self.found[other.found].function, other.driver, component.name
                    );
                    self.refused.push(index);
                    continue;
                }
            }
            let regs_bar = regs_bar(&self.found[index]);
            self.bindings.push(Binding { driver: component.name.clone(), found: index, route, regs_bar });
        }
    }

    /// One line per function: what it is and what it was bound to.
    fn report(&self, spec: &SystemSpec) {
        for (i, f) in self.found.iter().enumerate() {
            let kind = pci::MATCHES.iter().find(|m| m.candidate(f));
            let head = alloc::format!(
                "pci {} {:04x}:{:04x} {}",
                f.function,
                f.vendor,
                f.device,
                kind.map_or_else(|| alloc::format!("class {:04x}", f.class_code()), |k| String::from(k.name))
            );
            if let Some(b) = self.bindings.iter().find(|b| b.found == i) {
                let pin = match b.route {
                    Route::IoApic { pin, .. } => alloc::format!("ioapic pin {pin}"),
                    _ => String::from("no interrupt"),
                };
                log!("{head} -> {} ({}{pin})", b.driver, bars(f));
                continue;
            }
            let Some(kind) = kind else { continue };
            if self.refused.contains(&i) {
                log!("{head}: not bound (its driver cannot have it: see above)");
                continue;
            }
            let wanted = spec.components.iter().any(|c| c.pci_match.as_deref() == Some(kind.name));
            if !wanted {
                log!("{head}: left alone (no driver in this system matches \"{}\")", kind.name);
            } else if kind.supports(f).is_none() {
                log!("{head}: left alone (not a model a driver here supports)");
            } else {
                log!("{head}: left alone (every \"{}\" driver has its device)", kind.name);
            }
        }
        let others = self.found.iter().filter(|f| !pci::MATCHES.iter().any(|m| m.candidate(f))).count();
        if others > 0 {
            let list: Vec<String> = self
                .found
                .iter()
                .filter(|f| !pci::MATCHES.iter().any(|m| m.candidate(f)))
                .map(|f| alloc::format!("{} {:04x}:{:04x}", f.function, f.vendor, f.device))
                .collect();
            log!("pci: not for any driver: {}", list.join(", "));
        }
    }

    /// The function bound to `driver`, with its binding.
    pub fn bound(&self, driver: &str) -> Option<(&Found, &Binding)> {
        let b = self.bindings.iter().find(|b| b.driver == driver)?;
        Some((&self.found[b.found], b))
    }

    /// Fills the start page's table of what was found.
    pub fn fill(&self, info: &mut StartInfo) {
        for (i, f) in self.found.iter().take(MAX_PCI_DEVICES).enumerate() {
            let mut record = PciRecord {
                bdf: f.function.bdf() as u16,
                vendor: f.vendor,
                device: f.device,
                ioapic_pin: PCI_NO_PIN,
                class: f.class,
                ..Default::default()
            };
            if let Some(b) = self.bindings.iter().find(|b| b.found == i) {
                record.set_driver(&b.driver);
                if let Route::IoApic { pin, .. } = b.route {
                    record.ioapic_pin = pin;
                }
            }
            info.pci[i] = record;
            info.pci_count = i as u64 + 1;
        }
    }
}

/// The BAR a modern (1.0) virtio function's structures are in, from its
/// capabilities (`virtio::caps`; the driver parses them again, through
/// pci_config, and checks they lie in what was mapped); `None` for other
/// functions, whose register BAR the assembly names. A virtio function
/// whose capabilities are unusable gets `None` too: the loader then maps
/// the assembly's BAR and the driver refuses the device, saying why.
fn regs_bar(f: &Found) -> Option<u8> {
    let modern_virtio = f.vendor == 0x1af4 && (0x1040..=0x107f).contains(&f.device);
    if !modern_virtio {
        return None;
    }
    let read = |register: u8| pci::ConfigAccess::read32(&RootPorts, f.function, register & !3).unwrap_or(0);
    match virtio::caps::parse(read) {
        Ok(layout) => Some(layout.common.bar),
        Err(e) => {
            error!("pci {}: virtio capabilities: {e}", f.function);
            None
        }
    }
}

/// `bar0 0xfebc0000, bar1 io 0xc040, ` for the implemented BARs.
fn bars(f: &Found) -> String {
    let mut out = String::new();
    for (n, bar) in f.bars.iter().enumerate() {
        match *bar {
            Bar::Memory { base, .. } => out.push_str(&alloc::format!("bar{n} {base:#x}, ")),
            Bar::Io { base, .. } => out.push_str(&alloc::format!("bar{n} io {base:#x}, ")),
            Bar::None => {}
        }
    }
    out
}
