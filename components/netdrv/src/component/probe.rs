//! Finding the NIC: the PCI function the root task bound to netdrv at boot
//! (`netdrv.match = "net"`; the start record names it), reached through the
//! pci_config server; the driver picked by vendor and device ID (an 82540EM
//! e1000, an 82574L e1000e, or a modern virtio-net device); its register BAR checked against
//! where the loader mapped the registers, every access bounded by the size
//! the loader mapped; memory decoding and bus mastering switched on.

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use e1000_regs::{Mmio, Model};
use netdrv::virtio_net;
use virtio::caps::{self, Layout};

use super::{glue, TEST_HOOKS};

/// The NIC, through the pci_config server (it alone holds the 0xCF8/0xCFC
/// pair, and lets netdrv touch only the function bound to it).
pub(super) type Pci = pci::Device<pci::ThroughServer>;

/// The device found and its registers.
pub(super) enum Found {
    /// An 82540EM or 82574L (the model): BAR0 is the register dataport.
    E1000(Model, Mmio),
    /// A virtio 1.0 network device: the BAR its capabilities name is the
    /// register dataport; and where the structures are in it.
    Virtio(virtio::Mmio, Layout),
}

/// The function the root task bound to netdrv, if any.
pub(super) fn nic(start: &StartInfo) -> Option<Pci> {
    let function = pci::Function::from_bdf(u32::from(start.own_pci_device()?.bdf))?;
    Some(pci::Device::new(pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32), function))
}

/// Where the loader mapped the registers and how many bytes of them: the
/// BAR's own size where it is smaller than the dataport the assembly
/// declares (the loader maps no more than the BAR).
fn mapped(start: &StartInfo) -> (u64, u64) {
    let vaddr = glue::regs::VADDR as u64;
    let record = start.dataports().iter().find(|r| r.vaddr == vaddr);
    record.map_or((0, 0), |r| (r.paddr, r.size.min(glue::regs::SIZE as u64)))
}

/// Finds the NIC, picks its driver by ID, checks its register BAR against
/// what the loader mapped and enables memory decoding and bus mastering.
pub(super) fn probe(start: &StartInfo) -> Result<Option<Found>, pci::Refused> {
    let Some(dev) = nic(start) else {
        error!("the start record names no PCI function bound to netdrv (netdrv.match)");
        return Ok(None);
    };
    let (paddr, len) = mapped(start);
    let found = match dev.ids()? {
        Some(ids) if ids == virtio_net::PCI_IDS => virtio(&dev, paddr, len)?,
        Some((vendor, device)) if Model::from_ids(vendor, device).is_some() => {
            let model = Model::from_ids(vendor, device).expect("matched above");
            e1000(&dev, paddr, len)?.map(|regs| Found::E1000(model, regs))
        }
        other => {
            error!("no e1000, e1000e or virtio-net at {dev} (found {other:x?}): boot with --net or --port");
            return Ok(None);
        }
    };
    if found.is_none() {
        return Ok(None);
    }
    let command = dev.read(pci::REG_COMMAND)? & 0xffff;
    dev.write(
        pci::REG_COMMAND,
        (command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE,
    )?;
    if TEST_HOOKS {
        try_forbidden_writes(&dev)?;
    }
    Ok(found)
}

/// The e1000's or e1000e's BAR0 must be the register dataport, all of it:
/// both models' registers sit at fixed offsets up to the declared 128 KiB.
/// Both interrupt by INTx here (the 82574's MSI and MSI-X stay off: the
/// root task routes the pin).
fn e1000(dev: &Pci, mapped: u64, len: u64) -> Result<Option<Mmio>, pci::Refused> {
    if len != glue::regs::SIZE as u64 {
        error!("pci {dev}: the loader mapped {len:#x} bytes of registers, the e1000 needs {:#x}", glue::regs::SIZE);
        return Ok(None);
    }
    // Read only: pci_config refuses a driver's BAR writes (sizing); the
    // loader checked the BAR's size.
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
    Ok(Some(Mmio::new(glue::regs::get())))
}

/// A virtio-net device: its capabilities, then the BAR they name, which
/// must be what the loader mapped (the structures checked against the
/// bytes mapped, every register access bounded by them).
fn virtio(dev: &Pci, mapped: u64, len: u64) -> Result<Option<Found>, pci::Refused> {
    let mut refused = false;
    let layout = caps::parse(|off| {
        dev.read(off).unwrap_or_else(|_| {
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
            error!("pci {dev}: virtio-net capabilities: {e}");
            return Ok(None);
        }
    };
    let bar = layout.common.bar;
    let low = dev.read(pci::REG_BAR0 + 4 * bar)?;
    if low & 1 != 0 {
        error!("pci {dev}: virtio BAR{bar} is an I/O BAR");
        return Ok(None);
    }
    let high = if low & 0b110 == 0b100 && bar < 5 { dev.read(pci::REG_BAR0 + 4 * (bar + 1))? } else { 0 };
    let base = (high as u64) << 32 | (low & !0xf) as u64;
    if base != mapped || len == 0 {
        error!("pci {dev}: virtio BAR{bar} at {base:#x}, but the loader mapped {len:#x} bytes at {mapped:#x}");
        return Ok(None);
    }
    if let Err(e) = layout.check(len) {
        error!("pci {dev}: {e} (BAR{bar}: {len:#x} bytes mapped)");
        return Ok(None);
    }
    let regs = virtio::Mmio::new(glue::regs::get(), 0, len as usize);
    log!("virtio-net at {dev}: BAR{bar} {base:#x}, {len:#x} bytes");
    Ok(regs.map(|r| Found::Virtio(r, layout)))
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
