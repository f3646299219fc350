//! Finding the NIC: its PCI function through the pci_config server, the
//! driver picked by vendor and device ID (an 82540EM e1000, or a modern
//! virtio-net device), its register BAR checked against where the
//! assembly maps the registers, memory decoding and bus mastering
//! switched on.

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use e1000_regs::Mmio;
use netdrv::virtio_net;
use virtio::caps::{self, Layout};

use super::{glue, TEST_HOOKS};

/// The NIC, through the pci_config server (it alone holds the 0xCF8/0xCFC
/// pair, and lets netdrv touch only the function the assembly grants).
pub(super) const E1000: pci::Device<pci::ThroughServer> = pci::Device::new(
    pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32),
    pci::Function::new(0, 3, 0),
);
const E1000_IDS: (u16, u16) = (0x8086, 0x100e);

/// The device found and its registers.
pub(super) enum Found {
    /// An 82540EM: BAR0 is the register dataport.
    E1000(Mmio),
    /// A virtio 1.0 network device: its structures' BAR inside the
    /// register dataport, and where the structures are.
    Virtio(virtio::Mmio, Layout),
}

/// Finds the NIC, picks its driver by ID, checks its register BAR against
/// the assembly and enables memory decoding and bus mastering.
pub(super) fn probe(start: &StartInfo) -> Result<Option<Found>, pci::Refused> {
    let mapped = start.physical_address(glue::regs::VADDR as u64).unwrap_or(0);
    let found = match E1000.ids()? {
        Some(ids) if ids == E1000_IDS => e1000(mapped)?.map(Found::E1000),
        Some(ids) if ids == virtio_net::PCI_IDS => virtio(mapped)?,
        other => {
            error!("no e1000 or virtio-net at {E1000} (found {other:x?}): boot with --net or --port");
            return Ok(None);
        }
    };
    if found.is_none() {
        return Ok(None);
    }
    let command = E1000.read(pci::REG_COMMAND)? & 0xffff;
    E1000.write(
        pci::REG_COMMAND,
        (command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE,
    )?;
    if TEST_HOOKS {
        try_forbidden_writes()?;
    }
    Ok(found)
}

/// The e1000's BAR0 must be the register dataport.
fn e1000(mapped: u64) -> Result<Option<Mmio>, pci::Refused> {
    // Read only: pci_config refuses a driver's BAR writes (sizing), and the
    // assembly fixes the size (e1000.regs_size, checked by the compiler).
    match E1000.memory_bar0_base()? {
        Some(base) if base == mapped => {}
        Some(base) => {
            error!("pci {E1000}: bar0 {base:#x}, but the assembly maps {mapped:#x} (fix e1000.regs_paddr)");
            return Ok(None);
        }
        None => {
            error!("pci {E1000}: BAR0 is an I/O BAR");
            return Ok(None);
        }
    }
    Ok(Some(Mmio::new(glue::regs::get())))
}

/// A virtio-net device: its capabilities, then the BAR they name, which
/// must lie inside the register dataport (the structures checked against
/// the part of it mapped).
fn virtio(mapped: u64) -> Result<Option<Found>, pci::Refused> {
    let mut refused = false;
    let layout = caps::parse(|off| {
        E1000.read(off).unwrap_or_else(|_| {
            refused = true;
            0
        })
    });
    if refused {
        return Err(pci::Refused);
    }
    let layout = match layout {
        Ok(l) => l,
        Err(e) => {
            error!("pci {E1000}: virtio-net capabilities: {e}");
            return Ok(None);
        }
    };
    let bar = layout.common.bar;
    let low = E1000.read(pci::REG_BAR0 + 4 * bar)?;
    if low & 1 != 0 {
        error!("pci {E1000}: virtio BAR{bar} is an I/O BAR");
        return Ok(None);
    }
    let high = if low & 0b110 == 0b100 && bar < 5 { E1000.read(pci::REG_BAR0 + 4 * (bar + 1))? } else { 0 };
    let base = (high as u64) << 32 | (low & !0xf) as u64;
    let size = glue::regs::SIZE as u64;
    let Some(offset) = base.checked_sub(mapped).filter(|&o| o < size) else {
        error!("pci {E1000}: virtio BAR{bar} at {base:#x}, outside the {size:#x} bytes the assembly maps at {mapped:#x} (fix e1000.regs_paddr)");
        return Ok(None);
    };
    if let Err(e) = layout.check(size - offset) {
        error!("pci {E1000}: {e}");
        return Ok(None);
    }
    let regs = virtio::Mmio::new(glue::regs::get(), offset as usize, (size - offset) as usize);
    log!("virtio-net at {E1000}: BAR{bar} {base:#x}");
    Ok(regs.map(|r| Found::Virtio(r, layout)))
}

/// Writes a driver must not make (BAR0, the interrupt line, a command bit
/// it does not need), each with the value the register already has, so
/// that nothing changes even where pci_config let them through. Logs
/// whether each was refused, for the end-to-end test of pci_config's
/// policy.
fn try_forbidden_writes() -> Result<(), pci::Refused> {
    let serr = 1 << 8;
    let command = E1000.read(pci::REG_COMMAND)? & 0xffff;
    for (name, register, value) in [
        ("BAR0", pci::REG_BAR0, E1000.read(pci::REG_BAR0)?),
        ("the interrupt line", pci::REG_INTERRUPT, E1000.read(pci::REG_INTERRUPT)?),
        ("SERR# enable", pci::REG_COMMAND, command ^ serr),
    ] {
        match E1000.write(register, value) {
            Err(pci::Refused) => log!("test hook: writing {name} was refused"),
            Ok(()) => {
                error!("test hook: writing {name} was accepted");
                if register == pci::REG_COMMAND {
                    E1000.write(register, command)?;
                }
            }
        }
    }
    Ok(())
}
