//! The disk fs found: a legacy virtio-blk or an NVMe controller, behind
//! one `BlockDevice`.

use fs::{BlockDevice, IoError};

use super::nvme_disk::NvmeDisk;
use super::virtio_blk::{DriverStats, VirtioBlk};

/// Either driver.
pub enum Disk {
    /// A legacy virtio-blk (I/O BAR0, INTx).
    Virtio(VirtioBlk),
    /// An NVMe controller (memory BAR0, polled).
    Nvme(NvmeDisk),
}

impl Disk {
    /// The driver's counters (requests, DMA and bounce bytes).
    pub fn stats(&self) -> DriverStats {
        match self {
            Disk::Virtio(d) => d.stats(),
            Disk::Nvme(d) => d.stats(),
        }
    }
}

impl BlockDevice for Disk {
    fn size(&self) -> u64 {
        match self {
            Disk::Virtio(d) => d.size(),
            Disk::Nvme(d) => d.size(),
        }
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError> {
        match self {
            Disk::Virtio(d) => d.read_at(offset, dst),
            Disk::Nvme(d) => d.read_at(offset, dst),
        }
    }
}
