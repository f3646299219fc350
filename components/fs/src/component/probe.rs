//! Finding the disk: the legacy virtio-blk the root task bound to fs at
//! boot (`fs.match = "block"`; the start record names its function and
//! the IOAPIC pin its interrupt was routed to), its I/O BAR checked, then
//! reset and its queue set up.

use component_runtime::log;
use component_runtime::start::{StartInfo, PCI_NO_PIN};

use super::glue;
use super::virtio_blk::{self, VirtioBlk};

const VIRTIO_VENDOR: u16 = 0x1af4;
/// Legacy (transitional) virtio-blk.
const VIRTIO_BLK_DEVICE: u16 = 0x1001;

/// Finds, checks and enables the disk; resets it and sets up its queue.
pub(super) fn bring_up(start: &'static StartInfo) -> Result<VirtioBlk, alloc::string::String> {
    use alloc::format;
    // Through the pci_config server (it alone holds the 0xCF8/0xCFC pair,
    // and lets fs touch only the function bound to it).
    let own =
        start.own_pci_device().ok_or_else(|| alloc::string::String::from("no disk was found at boot (fs.match)"))?;
    let function = pci::Function::from_bdf(u32::from(own.bdf)).ok_or_else(|| format!("bad function {:#x}", own.bdf))?;
    let access = pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32);
    let blk = pci::Device::new(access, function);
    let id = blk.read(pci::REG_ID).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    if vendor == 0xffff {
        return Err(format!("no disk at {blk}: boot with simulate --disk <image>"));
    }
    if (vendor, device) != (VIRTIO_VENDOR, VIRTIO_BLK_DEVICE) {
        return Err(format!(
            "{blk} is {vendor:04x}:{device:04x}, not a legacy virtio-blk ({VIRTIO_VENDOR:04x}:{VIRTIO_BLK_DEVICE:04x})"
        ));
    }
    let read = |r| blk.read(r).map_err(|e| format!("PCI configuration access failed: {e:?}"));
    let bar0 = read(pci::REG_BAR0)?;
    if bar0 & 1 == 0 {
        return Err(format!(
            "{blk}: BAR0 {bar0:#x} is not an I/O BAR (modern-only device? simulate uses disable-modern=on)"
        ));
    }
    let base = (bar0 & 0xfffc) as u16;
    let command = read(pci::REG_COMMAND)? & 0xffff;
    let want = (command | pci::COMMAND_IO | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE;
    if want != command {
        blk.write(pci::REG_COMMAND, want).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    }
    // The loader routed the interrupt (and the IRQ handler exists) when the
    // record has a pin.
    let use_irq = own.ioapic_pin != PCI_NO_PIN;
    if !use_irq {
        log!("{blk}: no interrupt was routed at boot: polling for completions");
    }
    let dev = VirtioBlk::new(base, use_irq, start).map_err(|e| match e {
        virtio_blk::InitError::Port(port, err) => format!(
            "{blk}: I/O port {port:#x} refused ({err:?}): BAR0 is {base:#x}, outside the range the loader granted (BAR0 as found at boot)"
        ),
        virtio_blk::InitError::QueueSize(q) => format!("{blk}: queue 0 has {q} entries (expected a power of two whose ring fits 64 KiB)"),
        virtio_blk::InitError::NoPhysical => "the dma dataport has no physical address in the start record".into(),
    })?;
    log!(
        "virtio-blk at {blk}: I/O ports {base:#x}, ioapic pin {} ({}), queue {}, {} sectors",
        own.ioapic_pin,
        if dev.uses_irq() { "irq" } else { "polled" },
        dev.queue_size(),
        dev.sectors()
    );
    Ok(dev)
}
