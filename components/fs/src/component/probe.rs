//! Finding the disk: the function the root task bound to fs at boot
//! (`fs.match = "block"`; the start record names it and the IOAPIC pin its
//! interrupt was routed to), driven by its model: a legacy virtio-blk (its
//! I/O BAR checked, reset, its queue set up) or an NVMe controller (its
//! memory BAR0 mapped, reset, identified, an I/O queue pair).

use component_runtime::log;
use component_runtime::start::{StartInfo, PCI_NO_PIN};

use super::disk::Disk;
use super::glue;
use super::nvme_disk::{Mmio, NvmeDisk};
use super::virtio_blk::{self, VirtioBlk};

const VIRTIO_VENDOR: u16 = 0x1af4;
/// Legacy (transitional) virtio-blk.
const VIRTIO_BLK_DEVICE: u16 = 0x1001;
/// QEMU's NVMe controller (Red Hat's vendor id).
const NVME_ID: (u16, u16) = (0x1b36, 0x0010);

/// Finds, checks and enables the disk; resets it and sets up its queue.
pub(super) fn bring_up(start: &'static StartInfo) -> Result<Disk, alloc::string::String> {
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
    if (vendor, device) == NVME_ID {
        return nvme(start, &blk).map(Disk::Nvme);
    }
    if (vendor, device) != (VIRTIO_VENDOR, VIRTIO_BLK_DEVICE) {
        return Err(format!(
            "{blk} is {vendor:04x}:{device:04x}, neither a legacy virtio-blk ({VIRTIO_VENDOR:04x}:{VIRTIO_BLK_DEVICE:04x}) nor an NVMe ({:04x}:{:04x})",
            NVME_ID.0, NVME_ID.1
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
    Ok(Disk::Virtio(dev))
}

/// The NVMe controller `blk`: memory decoding and bus mastering on, BAR0
/// mapped (the root task mapped it at `nvme_regs` when BAR0 is memory),
/// then reset, identified and given its queues.
fn nvme(start: &'static StartInfo, blk: &pci::Device<pci::ThroughServer>) -> Result<NvmeDisk, alloc::string::String> {
    use alloc::format;
    let read = |r| blk.read(r).map_err(|e| format!("PCI configuration access failed: {e:?}"));
    let class = read(pci::REG_CLASS)? >> 8;
    if class != 0x01_0802 {
        return Err(format!("{blk}: class {class:06x}, not an NVMe controller (010802)"));
    }
    let bar0 = read(pci::REG_BAR0)?;
    let mapped = start.dataports().iter().any(|r| r.vaddr == glue::nvme_regs::VADDR as u64);
    if bar0 & 1 != 0 || !mapped {
        return Err(format!("{blk}: BAR0 {bar0:#x} is not mapped as memory (nvme_regs): no registers to drive"));
    }
    let command = read(pci::REG_COMMAND)? & 0xffff;
    // Memory and bus mastering; the pin interrupt off (completion is
    // polled: no MSI is programmed at boot).
    let want = command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER | pci::COMMAND_INTX_DISABLE;
    if want != command {
        blk.write(pci::REG_COMMAND, want).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    }
    // SAFETY: the start record lists the nvme_regs dataport: BAR0 of this
    // function, as the root task found it.
    let dev = NvmeDisk::new(unsafe { Mmio::new() }, start).map_err(|e| format!("{blk}: nvme: {e}"))?;
    let id = dev.identity();
    // The filesystem reads whole 512-byte sectors (the superblock is the
    // 1 KiB at 1024): a larger logical block could not serve that.
    if id.block_size != 512 {
        return Err(format!(
            "{blk}: nvme namespace 1 has {}-byte blocks; fs reads 512-byte sectors (format it with 512)",
            id.block_size
        ));
    }
    log!(
        "nvme at {blk}: BAR0 {:#x}, model \"{}\", serial \"{}\", version {:#x}, namespace 1: {} blocks of {} bytes, polled (no MSI programmed at boot)",
        bar0 & !0xf,
        id.model_str(),
        id.serial_str(),
        id.version,
        id.blocks,
        id.block_size
    );
    Ok(dev)
}
