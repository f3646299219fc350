//! Finding what is on the bus: every function behind every bridge, its
//! BARs and interrupt pin, which driver kind it is for, and where its INTx
//! arrives at the IOAPIC.
//!
//! The root task runs this once at boot (it holds the I/O port control
//! capability before any component runs), through the 0xCF8/0xCFC pair.

use crate::{ConfigAccess, Device, Function, COMMAND_IO, COMMAND_MEMORY, REG_BAR0, REG_CLASS, REG_COMMAND};
use crate::{REG_HEADER, REG_ID, REG_INTERRUPT};

/// Type 1 header: primary, secondary and subordinate bus numbers.
const REG_BRIDGE_BUSES: u8 = 0x18;
/// Status register bit (high half of REG_COMMAND): a capability list.
const STATUS_CAPABILITIES: u32 = 1 << 20;
/// The capabilities pointer.
const REG_CAPABILITIES: u8 = 0x34;
/// Capability ID of MSI.
const CAP_MSI: u8 = 0x05;
/// Capability ID of MSI-X.
const CAP_MSIX: u8 = 0x11;
/// The deepest bridge nesting followed (real machines have 2-3).
const MAX_DEPTH: usize = 8;

/// One base address register as found (and sized) at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Bar {
    /// Not implemented, or the upper half of a 64-bit BAR.
    #[default]
    None,
    /// Memory space: base and size in bytes.
    Memory {
        /// Physical base address.
        base: u64,
        /// Size in bytes (a power of two).
        size: u64,
    },
    /// I/O space: first port and number of ports.
    Io {
        /// First port.
        base: u16,
        /// Number of ports (a power of two).
        size: u16,
    },
}

/// A function found by [`enumerate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Where it is.
    pub function: Function,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Class, subclass and programming interface (24 bits).
    pub class: u32,
    /// INTx pin: 0 none, 1..=4 INTA#..INTD#.
    pub interrupt_pin: u8,
    /// The interrupt line the firmware wrote (PIC IRQ; 0xff unknown).
    pub interrupt_line: u8,
    /// The six BARs of a type 0 header (bridges: none).
    pub bars: [Bar; 6],
    /// Offset of the MSI capability, if it has one.
    pub msi: Option<u8>,
    /// Offset of the MSI-X capability, if it has one.
    pub msix: Option<u8>,
    /// Where its INTx reaches bus 0: the slot of the bus-0 device it sits
    /// behind and the pin there after the standard bridge swizzle (PCI
    /// bridge spec 9.1: pin' = (pin + device) mod 4 at each bridge).
    pub root_intx: Option<(u8, u8)>,
}

impl Found {
    /// Bits 8..24 of the class: base class and subclass (`0x0200`
    /// Ethernet, `0x0100` SCSI, `0x0108` NVMe, ...).
    pub fn class_code(&self) -> u16 {
        (self.class >> 8) as u16
    }
}

/// What a driver component drives (`<instance>.match` in the assembly),
/// and which devices of that kind a driver here supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchKind {
    /// The assembly's name for it.
    pub name: &'static str,
    /// The base classes and subclasses a candidate may have (block
    /// devices: SCSI-class virtio-blk, NVMe).
    pub classes: &'static [u16],
    /// Devices a driver here supports: vendor, device, a short name.
    pub supported: &'static [(u16, u16, &'static str)],
}

/// Every match the assembly may name. A device of the class that no entry
/// lists is found, reported and left alone. New drivers add their IDs here
/// (the driver itself tells the models apart by the vendor and device IDs
/// it is given).
pub const MATCHES: &[MatchKind] = &[
    // Ethernet: the 82540EM (QEMU's e1000), the 82574L (QEMU's e1000e) and
    // a modern (1.0, non-transitional) virtio-net, whose register BAR its
    // virtio capabilities name.
    MatchKind {
        name: "net",
        classes: &[0x0200],
        supported: &[(0x8086, 0x100e, "e1000"), (0x8086, 0x10d3, "e1000e"), (0x1af4, 0x1041, "virtio-net")],
    },
    // Mass storage: the legacy (transitional) virtio-blk (SCSI class) and
    // QEMU's NVMe controller (class 01/08, programming interface 02).
    MatchKind {
        name: "block",
        classes: &[0x0100, 0x0108],
        supported: &[(0x1af4, 0x1001, "virtio-blk"), (0x1b36, 0x0010, "nvme")],
    },
];

/// The match called `name`, if there is one.
pub fn match_kind(name: &str) -> Option<&'static MatchKind> {
    MATCHES.iter().find(|m| m.name == name)
}

impl MatchKind {
    /// Whether `found` has this kind's class.
    pub fn candidate(&self, found: &Found) -> bool {
        self.has_class(found.class_code())
    }

    /// Whether `class` (base class and subclass) is one of this kind's.
    pub fn has_class(&self, class: u16) -> bool {
        self.classes.contains(&class)
    }

    /// The short name of a supported model, if `found` is one.
    pub fn supports(&self, found: &Found) -> Option<&'static str> {
        self.supported.iter().find(|(v, d, _)| (*v, *d) == (found.vendor, found.device)).map(|(_, _, n)| *n)
    }
}

/// Calls `found` for every function on bus 0 and on every bus behind a
/// PCI-to-PCI (or PCIe root port) bridge, depth first, in BDF order per
/// bus; sizes every BAR (decoding off meanwhile, restored afterwards).
/// Buses are visited once each, so a firmware that numbered two bridges'
/// ranges overlapping cannot make it loop.
pub fn enumerate<A: ConfigAccess + Copy>(access: A, mut found: impl FnMut(Found)) -> Result<(), A::Error> {
    let mut visited = [0u64; 4];
    walk(access, 0, None, 0, &mut visited, &mut found)
}

/// `behind`: for a bus behind a bridge, the bus-0 slot of the bridge it
/// hangs off and the sum of the device numbers of the bridges crossed
/// below that one (what the swizzle adds on the way up).
fn walk<A: ConfigAccess + Copy>(
    access: A,
    bus: u8,
    behind: Option<(u8, u8)>,
    depth: usize,
    visited: &mut [u64; 4],
    found: &mut impl FnMut(Found),
) -> Result<(), A::Error> {
    if visited[bus as usize / 64] & 1 << (bus % 64) != 0 || depth > MAX_DEPTH {
        return Ok(());
    }
    visited[bus as usize / 64] |= 1 << (bus % 64);
    for device in 0..32 {
        for function in 0..8 {
            let d = Device::new(access, Function::new(bus, device, function));
            let id = d.read(REG_ID)?;
            if id as u16 == 0xffff {
                if function == 0 {
                    break;
                }
                continue;
            }
            let header = (d.read(REG_HEADER)? >> 16) as u8;
            if header & 0x7f == 1 {
                let secondary = (d.read(REG_BRIDGE_BUSES)? >> 8) as u8;
                if secondary > bus {
                    let below = match behind {
                        None => (device, 0),
                        Some((slot, offset)) => (slot, (offset + device) % 4),
                    };
                    walk(access, secondary, Some(below), depth + 1, visited, found)?;
                }
            } else if header & 0x7f == 0 {
                let interrupt = d.read(REG_INTERRUPT)?;
                let pin = (interrupt >> 8) as u8;
                let root_intx = (1..=4).contains(&pin).then(|| match behind {
                    None => (device, pin),
                    Some((slot, offset)) => (slot, swizzle(pin, device + offset)),
                });
                found(read_function(&d, id, interrupt, root_intx)?);
            }
            if function == 0 && header & 0x80 == 0 {
                break;
            }
        }
    }
    Ok(())
}

/// The PCI-to-PCI bridge swizzle (PCI-to-PCI Bridge Architecture
/// Specification 1.2, 9.1): INTx `pin` (1..=4) of device `device` behind
/// a bridge arrives at the bridge's pin ((pin - 1 + device) mod 4) + 1;
/// across several bridges the device numbers add up.
pub fn swizzle(pin: u8, device: u8) -> u8 {
    (pin - 1 + device % 4) % 4 + 1
}

fn read_function<A: ConfigAccess + Copy>(
    d: &Device<A>,
    id: u32,
    interrupt: u32,
    root_intx: Option<(u8, u8)>,
) -> Result<Found, A::Error> {
    let command = d.read(REG_COMMAND)?;
    let mut msi = None;
    let mut msix = None;
    if command & STATUS_CAPABILITIES != 0 {
        let mut at = d.read(REG_CAPABILITIES)? as u8 & 0xfc;
        let mut hops = 0;
        while at >= 0x40 && hops < 48 {
            let cap = d.read(at)?;
            match cap as u8 {
                CAP_MSI => msi = msi.or(Some(at)),
                CAP_MSIX => msix = msix.or(Some(at)),
                _ => {}
            }
            at = (cap >> 8) as u8 & 0xfc;
            hops += 1;
        }
    }
    Ok(Found {
        function: d.function(),
        vendor: id as u16,
        device: (id >> 16) as u16,
        class: d.read(REG_CLASS)? >> 8,
        interrupt_pin: (interrupt >> 8) as u8,
        interrupt_line: interrupt as u8,
        bars: size_bars(d, command)?,
        msi,
        msix,
        root_intx,
    })
}

/// Sizes the six BARs with I/O and memory decoding off, then restores
/// every BAR and the command register.
fn size_bars<A: ConfigAccess + Copy>(d: &Device<A>, command: u32) -> Result<[Bar; 6], A::Error> {
    let mut bars = [Bar::None; 6];
    d.write(REG_COMMAND, command & 0xffff & !(COMMAND_IO | COMMAND_MEMORY))?;
    let mut n = 0;
    while n < 6 {
        let reg = REG_BAR0 + 4 * n as u8;
        let low = d.read(reg)?;
        d.write(reg, !0)?;
        let low_mask = d.read(reg)?;
        d.write(reg, low)?;
        if low & 1 == 1 {
            let mask = low_mask & 0xfffc;
            if mask != 0 {
                let size = (!mask & 0xffff).wrapping_add(1) as u16;
                bars[n] = Bar::Io { base: (low & 0xfffc) as u16, size };
            }
            n += 1;
            continue;
        }
        let wide = (low >> 1) & 3 == 2 && n < 5;
        let (high, high_mask) = if wide {
            let high = d.read(reg + 4)?;
            d.write(reg + 4, !0)?;
            let mask = d.read(reg + 4)?;
            d.write(reg + 4, high)?;
            (high, mask)
        } else {
            (0, if low_mask & !0xf == 0 { 0 } else { !0 })
        };
        let mask = u64::from(high_mask) << 32 | u64::from(low_mask & !0xf);
        if mask != 0 {
            let base = u64::from(high) << 32 | u64::from(low & !0xf);
            bars[n] = Bar::Memory { base, size: (!mask).wrapping_add(1) };
        }
        n += if wide { 2 } else { 1 };
    }
    d.write(REG_COMMAND, command & 0xffff)?;
    Ok(bars)
}

/// The host bridge's chipset, which says how INTx pins reach the IOAPIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chipset {
    /// i440FX + PIIX3 (QEMU `pc`): PIRQA..D are steered to ISA IRQs by the
    /// PIIX3's PIRQRC registers (00:01.0, 0x60..0x63), which the firmware
    /// programs; the IOAPIC sees them at the pin of that ISA IRQ.
    I440fx {
        /// PIRQRC\[A..D\]: bit 7 set = disabled, else the ISA IRQ.
        pirq_routes: [u8; 4],
    },
    /// Q35 + ICH9 (QEMU `q35`): in APIC mode PIRQA..H arrive at IOAPIC
    /// pins 16..23; slot s's INTx p (0-based) is PIRQ (s + p) mod 4 + 4
    /// (E..H) for slots 0..24 (QEMU's ICH9 default device routing, which
    /// its ACPI tables describe; A..D serve the built-in slots 25..31,
    /// routed by registers we do not read).
    Q35,
    /// Another host bridge: the firmware's interrupt line is used as the
    /// IOAPIC pin (true for PIIX-like chipsets).
    Other(u16, u16),
}

/// PIIX3's PIRQ route control registers (function 00:01.0).
const PIIX_PIRQRC: u8 = 0x60;

impl Chipset {
    /// The chipset of the host bridge at 00:00.0.
    pub fn detect<A: ConfigAccess + Copy>(access: A) -> Result<Chipset, A::Error> {
        let host = Device::new(access, Function::new(0, 0, 0));
        let id = host.read(REG_ID)?;
        Ok(match (id as u16, (id >> 16) as u16) {
            (0x8086, 0x1237) => {
                let routes = Device::new(access, Function::new(0, 1, 0)).read(PIIX_PIRQRC)?.to_le_bytes();
                Chipset::I440fx { pirq_routes: routes }
            }
            (0x8086, 0x29c0) => Chipset::Q35,
            (v, d) => Chipset::Other(v, d),
        })
    }

    /// A short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Chipset::I440fx { .. } => "i440fx/piix3",
            Chipset::Q35 => "q35/ich9",
            Chipset::Other(..) => "unknown host bridge",
        }
    }
}

/// Where a function's INTx arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// IOAPIC 0, this pin, level-triggered, with this polarity.
    IoApic {
        /// The input pin.
        pin: u8,
        /// Active low (PCI's native polarity) or high (an ISA IRQ that
        /// the MADT overrides to active high, as QEMU's `pc` does).
        active_low: bool,
    },
    /// The function has no INTx pin.
    NoPin,
    /// It has one, but we cannot tell where it goes: why.
    Unknown(&'static str),
}

/// Where `found`'s INTx reaches the IOAPIC on `chipset`.
pub fn route_intx(chipset: &Chipset, found: &Found) -> Route {
    let Some((slot, pin)) = found.root_intx else { return Route::NoPin };
    match chipset {
        Chipset::I440fx { pirq_routes } => {
            // PIIX3: slot s's INTx p (0-based) drives PIRQ (s + p) mod 4.
            let route = pirq_routes[((slot + pin - 1) % 4) as usize];
            if route & 0x80 != 0 || route > 15 || route == 0 {
                return Route::Unknown("its PIRQ is not steered to an ISA IRQ (PIIX3 PIRQRC)");
            }
            Route::IoApic { pin: route, active_low: false }
        }
        Chipset::Q35 if slot >= 25 => Route::Unknown("ICH9 built-in slot (routed by D25IR..D31IR, not read)"),
        Chipset::Q35 => Route::IoApic { pin: 16 + 4 + (slot + pin - 1) % 4, active_low: true },
        Chipset::Other(..) => match found.interrupt_line {
            line @ 1..=15 => Route::IoApic { pin: line, active_low: false },
            _ => Route::Unknown("unknown chipset and no firmware interrupt line"),
        },
    }
}

#[cfg(test)]
#[path = "discover_tests.rs"]
mod tests;
