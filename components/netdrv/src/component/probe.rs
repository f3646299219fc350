//! Finding the e1000: its PCI function through the pci_config server,
//! BAR0 checked against where the assembly maps the registers, memory
//! decoding and bus mastering switched on.

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use e1000_regs::Mmio;

use super::{glue, TEST_HOOKS};

/// The e1000, through the pci_config server (it alone holds the 0xCF8/0xCFC
/// pair, and lets netdrv touch only the function the assembly grants).
pub(super) const E1000: pci::Device<pci::ThroughServer> = pci::Device::new(
    pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32),
    pci::Function::new(0, 3, 0),
);
const E1000_IDS: (u16, u16) = (0x8086, 0x100e);

/// Finds the e1000, checks BAR0 against the assembly and enables memory
/// decoding and bus mastering.
pub(super) fn probe(start: &StartInfo) -> Result<Option<Mmio>, pci::Refused> {
    match E1000.ids()? {
        Some(ids) if ids == E1000_IDS => {}
        other => {
            error!("no e1000 at {E1000} (found {other:x?}): boot with --net or --port");
            return Ok(None);
        }
    }
    let mapped = start.physical_address(glue::regs::VADDR as u64).unwrap_or(0);
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
    let command = E1000.read(pci::REG_COMMAND)? & 0xffff;
    E1000.write(
        pci::REG_COMMAND,
        (command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE,
    )?;
    if TEST_HOOKS {
        try_forbidden_writes()?;
    }
    Ok(Some(Mmio::new(glue::regs::get())))
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
