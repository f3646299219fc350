//! fs's NVMe disk: the `nvme` library (admin queue, identify, one I/O
//! queue pair, PRP lists; host-tested against a simulated controller)
//! over BAR0 mapped at the `nvme_regs` dataport, its queues in the
//! private `dma` dataport.
//!
//! * **Zero copy**, as on virtio-blk: a destination inside a dataport
//!   (the cache's unsealed pool pages) is handed to the controller by its
//!   physical address (PRP1/PRP2, a PRP list beyond two pages); metadata
//!   in the heap goes through the bounce area and is counted as such.
//! * **Polled completion.** The root task programs no MSI or MSI-X yet, so
//!   the pin interrupt is masked (INTMS) and fs polls the completion
//!   queue, yielding between polls; every entry is read once and checked
//!   (phase, command id, queue, status), a bounded number of polls.

use component_runtime::error;
use component_runtime::start::StartInfo;
use fs::{BlockDevice, IoError};
use nvme::{Controller, DmaArea, Limits, Registers, Wait};

use super::glue;
use super::virtio_blk::DriverStats;

/// BAR0's first pages, mapped uncached at the `nvme_regs` dataport.
pub struct Mmio(*mut u8);

impl Mmio {
    /// The registers at the `nvme_regs` dataport.
    ///
    /// # Safety
    /// The dataport must be mapped (the start record lists it) to the
    /// controller's BAR0.
    pub unsafe fn new() -> Mmio {
        Mmio(glue::nvme_regs::VADDR as *mut u8)
    }

    fn at(&self, off: usize) -> *mut u32 {
        assert!(off.is_multiple_of(4) && off + 4 <= glue::nvme_regs::SIZE, "register inside the mapped BAR");
        // SAFETY: in bounds of the mapping (checked above).
        unsafe { self.0.add(off).cast() }
    }
}

impl Registers for Mmio {
    fn read32(&mut self, off: usize) -> u32 {
        // SAFETY: a device register of the mapped BAR.
        unsafe { self.at(off).read_volatile() }
    }

    fn write32(&mut self, off: usize, value: u32) {
        // SAFETY: as above.
        unsafe { self.at(off).write_volatile(value) }
    }
}

/// Between two polls: let the others run.
struct Yield;

impl Wait for Yield {
    fn pause(&mut self) {
        sel4::yield_now();
    }
}

/// The controller, ready to read namespace 1.
pub struct NvmeDisk {
    ctrl: Controller<Mmio>,
    start: &'static StartInfo,
}

impl NvmeDisk {
    /// Resets and brings up the controller (its BAR0 mapped).
    pub fn new(regs: Mmio, start: &'static StartInfo) -> Result<NvmeDisk, alloc::string::String> {
        let dma = glue::dma::get().as_mut_ptr();
        let phys = start
            .physical_address(dma as u64)
            .ok_or_else(|| alloc::string::String::from("the dma dataport has no physical address"))?;
        // SAFETY: the dma dataport is ours alone (both ends of its
        // connection are fs), physically contiguous and page-aligned.
        let area = unsafe { DmaArea::new(dma, phys, glue::dma::SIZE) }.map_err(|e| alloc::format!("{e}"))?;
        let ctrl = Controller::init(regs, area, Limits::default(), &mut Yield).map_err(|e| alloc::format!("{e}"))?;
        Ok(NvmeDisk { ctrl, start })
    }

    /// What identify said.
    pub fn identity(&self) -> &nvme::Identity {
        self.ctrl.identity()
    }

    /// Counters, in the virtio-blk driver's terms.
    pub fn stats(&self) -> DriverStats {
        let s = self.ctrl.stats();
        DriverStats { requests: s.reads, dma_bytes: s.dma_bytes, bounce_bytes: s.bounce_bytes, interrupts: 0 }
    }

    /// The physical address of `dst` if all of it lies in one dataport.
    fn dma_target(&self, dst: &[u8]) -> Option<u64> {
        let start = dst.as_ptr() as u64;
        let first = self.start.physical_address(start)?;
        let last = self.start.physical_address(start + dst.len() as u64 - 1)?;
        (last == first + dst.len() as u64 - 1).then_some(first)
    }
}

/// The driver's error as a device code (`IoError::Device`), said once
/// here in words.
fn device_error(e: nvme::Error) -> IoError {
    error!("nvme: {e}");
    IoError::Device(match e {
        nvme::Error::OutOfRange => return IoError::OutOfRange,
        nvme::Error::Status { sct, sc, .. } => 0x1000 | u32::from(sct) << 8 | u32::from(sc),
        nvme::Error::Timeout(_) => 0x200,
        _ => 0x300,
    })
}

impl BlockDevice for NvmeDisk {
    fn size(&self) -> u64 {
        self.ctrl.size()
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError> {
        if dst.is_empty() {
            return Ok(());
        }
        match self.dma_target(dst) {
            // Straight into the pool's pages.
            Some(phys) => self.ctrl.read_phys(offset, phys, dst.len(), &mut Yield),
            None => self.ctrl.read_bounce(offset, dst, &mut Yield),
        }
        .map_err(device_error)
    }
}
