//! Finding the disk: a legacy virtio-blk at the PCI function the
//! assembly grants, its I/O BAR and interrupt line checked, then reset
//! and its queue set up.

use component_runtime::log;
use component_runtime::start::StartInfo;

use super::glue;
use super::virtio_blk::{self, VirtioBlk};

/// Where `simulate --disk` puts the disk, reached through the pci_config
/// server (it alone holds the 0xCF8/0xCFC pair, and lets fs touch only the
/// function the assembly grants).
const BLK: pci::Device<pci::ThroughServer> = pci::Device::new(
    pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32),
    pci::Function::new(0, 5, 0),
);
const VIRTIO_VENDOR: u16 = 0x1af4;
/// Legacy (transitional) virtio-blk.
const VIRTIO_BLK_DEVICE: u16 = 0x1001;
/// The interrupt line the assembly routes (fsread.camkes: IOAPIC pin 10).
const ASSEMBLY_IRQ_LINE: u32 = 10;

/// Finds, checks and enables the disk; resets it and sets up its queue.
pub(super) fn bring_up(start: &'static StartInfo) -> Result<VirtioBlk, alloc::string::String> {
    use alloc::format;
    let id = BLK.read(pci::REG_ID).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    if vendor == 0xffff {
        return Err(format!("no disk at {BLK}: boot with simulate --disk <image>"));
    }
    if (vendor, device) != (VIRTIO_VENDOR, VIRTIO_BLK_DEVICE) {
        return Err(format!(
            "{BLK} is {vendor:04x}:{device:04x}, not a legacy virtio-blk ({VIRTIO_VENDOR:04x}:{VIRTIO_BLK_DEVICE:04x})"
        ));
    }
    let read = |r| BLK.read(r).map_err(|e| format!("PCI configuration access failed: {e:?}"));
    let bar0 = read(pci::REG_BAR0)?;
    if bar0 & 1 == 0 {
        return Err(format!(
            "{BLK}: BAR0 {bar0:#x} is not an I/O BAR (modern-only device? simulate uses disable-modern=on)"
        ));
    }
    let base = (bar0 & 0xfffc) as u16;
    let line = read(pci::REG_INTERRUPT)? & 0xff;
    let command = read(pci::REG_COMMAND)? & 0xffff;
    let want = (command | pci::COMMAND_IO | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE;
    if want != command {
        BLK.write(pci::REG_COMMAND, want).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    }
    let use_irq = line == ASSEMBLY_IRQ_LINE;
    if !use_irq {
        log!("{BLK}: interrupt line {line}, but the assembly routes {ASSEMBLY_IRQ_LINE}: polling for completions");
    }
    let dev = VirtioBlk::new(base, use_irq, start).map_err(|e| match e {
        virtio_blk::InitError::Port(port, err) => format!(
            "{BLK}: I/O port {port:#x} refused ({err:?}): BAR0 is {base:#x}, outside the range the assembly grants (virtio_blk.ports_attributes)"
        ),
        virtio_blk::InitError::QueueSize(q) => format!("{BLK}: queue 0 has {q} entries (expected a power of two whose ring fits 64 KiB)"),
        virtio_blk::InitError::NoPhysical => "the dma dataport has no physical address in the start record".into(),
    })?;
    log!(
        "virtio-blk at {BLK}: I/O ports {base:#x}, interrupt line {line} ({}), queue {}, {} sectors",
        if dev.uses_irq() { "irq" } else { "polled" },
        dev.queue_size(),
        dev.sectors()
    );
    Ok(dev)
}
