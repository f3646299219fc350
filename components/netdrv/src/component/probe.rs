//! Finding the e1000 (82540EM) or e1000e (82574L): the PCI function the root task bound to netdrv at
//! boot (`netdrv.match = "net"`; the start record names it), reached
//! through the pci_config server, the model told by its IDs, BAR0 checked against where the loader
//! mapped the registers, memory decoding and bus mastering switched on.

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use e1000_regs::{Mmio, Model};

use super::{glue, TEST_HOOKS};

/// The e1000, through the pci_config server (it alone holds the 0xCF8/0xCFC
/// pair, and lets netdrv touch only the function bound to it).
pub(super) type Pci = pci::Device<pci::ThroughServer>;

/// The function the root task bound to netdrv, if any.
pub(super) fn e1000(start: &StartInfo) -> Option<Pci> {
    let function = pci::Function::from_bdf(u32::from(start.own_pci_device()?.bdf))?;
    Some(pci::Device::new(pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32), function))
}

/// Finds the NIC, tells its model by ID, checks BAR0 against the assembly
/// and enables memory decoding and bus mastering. Both models' BAR0 is the
/// 128 KiB register file (`e1000.regs_size`); both interrupt by INTx here
/// (the 82574's MSI and MSI-X stay off: the root task routes the pin).
pub(super) fn probe(start: &StartInfo) -> Result<Option<(Model, Mmio)>, pci::Refused> {
    let Some(dev) = e1000(start) else {
        error!("the start record names no PCI function bound to netdrv (netdrv.match)");
        return Ok(None);
    };
    let model = match dev.ids()? {
        Some((vendor, device)) => Model::from_ids(vendor, device),
        None => None,
    };
    let Some(model) = model else {
        error!("no e1000 or e1000e at {dev} (found {:x?}): boot with --net or --port", dev.ids()?);
        return Ok(None);
    };
    let mapped = start.physical_address(glue::regs::VADDR as u64).unwrap_or(0);
    // Read only: pci_config refuses a driver's BAR writes (sizing); the
    // loader checked the BAR's size against e1000.regs_size.
    match dev.memory_bar0_base()? {
        Some(base) if base == mapped => {}
        Some(base) => {
            error!("pci {dev}: bar0 {base:#x}, but the loader mapped {mapped:#x}");
            return Ok(None);
        }
        None => {
            error!("pci {dev}: BAR0 is an I/O BAR");
            return Ok(None);
        }
    }
    let command = dev.read(pci::REG_COMMAND)? & 0xffff;
    dev.write(
        pci::REG_COMMAND,
        (command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE,
    )?;
    if TEST_HOOKS {
        try_forbidden_writes(&dev)?;
    }
    Ok(Some((model, Mmio::new(glue::regs::get()))))
}

/// Writes a driver must not make (BAR0, the interrupt line, a command bit
/// it does not need), each with the value the register already has, so
/// that nothing changes even where pci_config let them through. Logs
/// whether each was refused, for the end-to-end test of pci_config's
/// policy.
fn try_forbidden_writes(dev: &Pci) -> Result<(), pci::Refused> {
    let serr = 1 << 8;
    let command = dev.read(pci::REG_COMMAND)? & 0xffff;
    for (name, register, value) in [
        ("BAR0", pci::REG_BAR0, dev.read(pci::REG_BAR0)?),
        ("the interrupt line", pci::REG_INTERRUPT, dev.read(pci::REG_INTERRUPT)?),
        ("SERR# enable", pci::REG_COMMAND, command ^ serr),
    ] {
        match dev.write(register, value) {
            Err(pci::Refused) => log!("test hook: writing {name} was refused"),
            Ok(()) => {
                error!("test hook: writing {name} was accepted");
                if register == pci::REG_COMMAND {
                    dev.write(register, command)?;
                }
            }
        }
    }
    Ok(())
}
