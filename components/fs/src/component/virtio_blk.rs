//! A virtio-blk driver for QEMU's legacy virtio-pci device (virtio 1.0
//! spec, §4.1.4.8 "Legacy Interfaces: A Note on PCI Device Layout" and
//! §2.6.2 "Legacy Interfaces: A Note on Virtqueue Layout"; §5.2 for the
//! block device).
//!
//! * Registers: the I/O port BAR0, through the `blk_ports` capability.
//! * One virtqueue (queue 0) in the private `dma` dataport, whose physical
//!   address the start record gives. Requests are synchronous: one at a
//!   time, three descriptors each (header, data, status).
//! * **Zero copy.** When the destination lies in a dataport (the file
//!   cache's pool: an unsealed IO-Lite buffer), the data descriptor points
//!   at its physical address and the device writes the sectors straight
//!   into the cache's pages. Anything else (metadata blocks in the heap)
//!   goes through a bounce area in the `dma` dataport and is copied; those
//!   bytes are counted separately ([`DriverStats::bounce_bytes`]).
//! * Completion: the device's INTx interrupt (ISR read deasserts it, then
//!   the IRQ is acknowledged), or polling if the interrupt line is not the
//!   one the assembly routes.

use core::sync::atomic::{fence, Ordering};

use component_runtime::start::StartInfo;
use fs::{BlockDevice, IoError};

use super::glue;

/// Legacy register offsets in BAR0.
mod reg {
    pub const HOST_FEATURES: u16 = 0x00;
    pub const GUEST_FEATURES: u16 = 0x04;
    pub const QUEUE_ADDRESS: u16 = 0x08;
    pub const QUEUE_SIZE: u16 = 0x0C;
    pub const QUEUE_SELECT: u16 = 0x0E;
    pub const QUEUE_NOTIFY: u16 = 0x10;
    pub const DEVICE_STATUS: u16 = 0x12;
    pub const ISR_STATUS: u16 = 0x13;
    /// Device-specific configuration (no MSI-X): virtio-blk's capacity
    /// (u64, in 512-byte sectors) comes first.
    pub const CONFIG: u16 = 0x14;
}

const STATUS_ACKNOWLEDGE: u8 = 1;
const STATUS_DRIVER: u8 = 2;
const STATUS_DRIVER_OK: u8 = 4;
const STATUS_FAILED: u8 = 128;

const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;

const BLK_T_IN: u32 = 0;
const SECTOR: u64 = 512;

/// Layout of the `dma` dataport.
const RING_OFF: usize = 0;
const RING_MAX: usize = 0x10000;
const HDR_OFF: usize = 0x10000;
const STATUS_OFF: usize = HDR_OFF + 16;
const BOUNCE_OFF: usize = 0x18000;
const BOUNCE_LEN: usize = 0x8000;
const _: () = assert!(BOUNCE_OFF + BOUNCE_LEN <= glue::dma::SIZE);

/// Longest single request (the device takes more; this bounds one wait).
const MAX_REQUEST: usize = 256 << 10;

#[repr(C)]
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// What the driver did.
#[derive(Debug, Default, Clone, Copy)]
pub struct DriverStats {
    /// Requests completed.
    pub requests: u64,
    /// Bytes the device wrote straight into dataport memory (the pool).
    pub dma_bytes: u64,
    /// Bytes that went through the bounce area (heap destinations).
    pub bounce_bytes: u64,
    /// Interrupts handled.
    pub interrupts: u64,
}

/// Why the device could not be brought up.
#[derive(Debug)]
pub enum InitError {
    /// An I/O port access was refused (the port is outside the range the
    /// assembly grants).
    Port(u16, sel4::Error),
    /// Queue 0 is missing or too large for the DMA region.
    QueueSize(u16),
    /// The DMA region has no physical address (not a dataport?).
    NoPhysical,
}

/// The device.
pub struct VirtioBlk {
    base: u16,
    qsize: u16,
    dma: *mut u8,
    dma_phys: u64,
    used_off: usize,
    avail_idx: u16,
    last_used: u16,
    capacity: u64,
    use_irq: bool,
    start: &'static StartInfo,
    stats: DriverStats,
}

fn in8(port: u16) -> Result<u8, InitError> {
    glue::blk_ports::in8(port).map_err(|e| InitError::Port(port, e))
}

fn out8(port: u16, v: u8) -> Result<(), InitError> {
    glue::blk_ports::out8(port, v).map_err(|e| InitError::Port(port, e))
}

impl VirtioBlk {
    /// Resets and sets up the device whose BAR0 is the I/O port `base`.
    /// `use_irq`: wait for the interrupt (else poll).
    pub fn new(base: u16, use_irq: bool, start: &'static StartInfo) -> Result<VirtioBlk, InitError> {
        let port = |off: u16| base + off;
        let dma = glue::dma::get().as_mut_ptr();
        let dma_phys = start.physical_address(dma as u64).ok_or(InitError::NoPhysical)?;
        // Reset, then acknowledge and claim the device.
        out8(port(reg::DEVICE_STATUS), 0)?;
        out8(port(reg::DEVICE_STATUS), STATUS_ACKNOWLEDGE)?;
        out8(port(reg::DEVICE_STATUS), STATUS_ACKNOWLEDGE | STATUS_DRIVER)?;
        // No optional features: plain 512-byte-sector reads are all we use.
        let _host = glue::blk_ports::in32(port(reg::HOST_FEATURES))
            .map_err(|e| InitError::Port(port(reg::HOST_FEATURES), e))?;
        glue::blk_ports::out32(port(reg::GUEST_FEATURES), 0)
            .map_err(|e| InitError::Port(port(reg::GUEST_FEATURES), e))?;
        glue::blk_ports::out16(port(reg::QUEUE_SELECT), 0).map_err(|e| InitError::Port(port(reg::QUEUE_SELECT), e))?;
        let qsize =
            glue::blk_ports::in16(port(reg::QUEUE_SIZE)).map_err(|e| InitError::Port(port(reg::QUEUE_SIZE), e))?;
        let (bytes, used_off) = ring_layout(qsize);
        if qsize == 0 || !qsize.is_power_of_two() || bytes > RING_MAX {
            let _ = out8(port(reg::DEVICE_STATUS), STATUS_FAILED);
            return Err(InitError::QueueSize(qsize));
        }
        // SAFETY: the dma dataport is ours alone (both ends of its
        // connection are this component) and RING_MAX bytes long at least.
        unsafe { core::ptr::write_bytes(dma.add(RING_OFF), 0, RING_MAX) };
        fence(Ordering::SeqCst);
        let pfn = (dma_phys + RING_OFF as u64) >> 12;
        glue::blk_ports::out32(port(reg::QUEUE_ADDRESS), pfn as u32)
            .map_err(|e| InitError::Port(port(reg::QUEUE_ADDRESS), e))?;
        out8(port(reg::DEVICE_STATUS), STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_DRIVER_OK)?;
        let lo = glue::blk_ports::in32(port(reg::CONFIG)).map_err(|e| InitError::Port(port(reg::CONFIG), e))?;
        let hi = glue::blk_ports::in32(port(reg::CONFIG + 4)).map_err(|e| InitError::Port(port(reg::CONFIG + 4), e))?;
        if use_irq {
            // The line may be masked from an earlier incarnation.
            let _ = in8(port(reg::ISR_STATUS));
            let _ = glue::blk_irq::acknowledge();
        }
        Ok(VirtioBlk {
            base,
            qsize,
            dma,
            dma_phys,
            used_off,
            avail_idx: 0,
            last_used: 0,
            capacity: u64::from(hi) << 32 | u64::from(lo),
            use_irq,
            start,
            stats: DriverStats::default(),
        })
    }

    /// Queue size (descriptors).
    pub fn queue_size(&self) -> u16 {
        self.qsize
    }

    /// Capacity in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        self.capacity
    }

    /// Whether completions come by interrupt.
    pub fn uses_irq(&self) -> bool {
        self.use_irq
    }

    /// Counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    fn desc(&self, i: usize) -> *mut Desc {
        // SAFETY (of the arithmetic): i < 3 <= qsize, inside the ring.
        unsafe { self.dma.add(RING_OFF).cast::<Desc>().add(i) }
    }

    /// One request: `len` bytes from `sector` into physical `phys`.
    fn request(&mut self, sector: u64, phys: u64, len: usize) -> Result<(), IoError> {
        let q = usize::from(self.qsize);
        let hdr_phys = self.dma_phys + HDR_OFF as u64;
        // SAFETY: every pointer below is inside the dma dataport (offsets
        // checked against its size at compile time and in `new`); the device
        // only reads or writes them between notify and completion, which
        // this function waits for, and the accesses are volatile.
        unsafe {
            let hdr = self.dma.add(HDR_OFF);
            hdr.cast::<u32>().write_volatile(BLK_T_IN);
            hdr.add(4).cast::<u32>().write_volatile(0);
            hdr.add(8).cast::<u64>().write_volatile(sector);
            self.dma.add(STATUS_OFF).write_volatile(0xff);
            self.desc(0).write_volatile(Desc { addr: hdr_phys, len: 16, flags: DESC_NEXT, next: 1 });
            self.desc(1).write_volatile(Desc { addr: phys, len: len as u32, flags: DESC_NEXT | DESC_WRITE, next: 2 });
            self.desc(2).write_volatile(Desc {
                addr: self.dma_phys + STATUS_OFF as u64,
                len: 1,
                flags: DESC_WRITE,
                next: 0,
            });
            // Available ring: flags u16, idx u16, ring[q] u16.
            let avail = self.dma.add(RING_OFF + 16 * q).cast::<u16>();
            avail.add(2 + usize::from(self.avail_idx) % q).write_volatile(0);
            fence(Ordering::SeqCst);
            self.avail_idx = self.avail_idx.wrapping_add(1);
            avail.add(1).write_volatile(self.avail_idx);
            fence(Ordering::SeqCst);
        }
        glue::blk_ports::out16(self.base + reg::QUEUE_NOTIFY, 0).map_err(|_| IoError::Device(0x100))?;
        let used_idx = || {
            // SAFETY: the used ring's idx field, inside the dma dataport.
            unsafe { self.dma.add(RING_OFF + self.used_off + 2).cast::<u16>().read_volatile() }
        };
        let mut spins = 0u64;
        while used_idx() == self.last_used {
            if self.use_irq {
                glue::blk_irq::wait();
                // Reading ISR clears it and deasserts the (level) line
                // before the kernel unmasks it.
                let _ = glue::blk_ports::in8(self.base + reg::ISR_STATUS);
                let _ = glue::blk_irq::acknowledge();
                self.stats.interrupts += 1;
            } else {
                spins += 1;
                if spins > 50_000_000 {
                    return Err(IoError::Device(0x200));
                }
                sel4::yield_now();
            }
        }
        fence(Ordering::SeqCst);
        self.last_used = self.last_used.wrapping_add(1);
        // SAFETY: the status byte, written by the device before the used
        // index moved.
        let status = unsafe { self.dma.add(STATUS_OFF).read_volatile() };
        self.stats.requests += 1;
        if status != 0 {
            return Err(IoError::Device(u32::from(status)));
        }
        Ok(())
    }

    /// The physical address of `dst` if all of it lies in one dataport.
    fn dma_target(&self, dst: &[u8]) -> Option<u64> {
        let start = dst.as_ptr() as u64;
        let first = self.start.physical_address(start)?;
        let last = self.start.physical_address(start + dst.len() as u64 - 1)?;
        (last == first + dst.len() as u64 - 1).then_some(first)
    }
}

/// Bytes of the legacy ring for `q` entries and the used ring's offset.
const fn ring_layout(q: u16) -> (usize, usize) {
    let q = q as usize;
    let used_off = (16 * q + 6 + 2 * q).div_ceil(4096) * 4096;
    (used_off + (6 + 8 * q).div_ceil(4096) * 4096, used_off)
}

impl BlockDevice for VirtioBlk {
    fn size(&self) -> u64 {
        self.capacity * SECTOR
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError> {
        if !offset.is_multiple_of(SECTOR) || !(dst.len() as u64).is_multiple_of(SECTOR) {
            return Err(IoError::OutOfRange);
        }
        let end = offset.checked_add(dst.len() as u64).ok_or(IoError::OutOfRange)?;
        if end > self.size() {
            return Err(IoError::OutOfRange);
        }
        if dst.is_empty() {
            return Ok(());
        }
        if let Some(phys) = self.dma_target(dst) {
            // Straight into the pool's pages.
            let mut done = 0;
            while done < dst.len() {
                let n = (dst.len() - done).min(MAX_REQUEST);
                self.request((offset + done as u64) / SECTOR, phys + done as u64, n)?;
                done += n;
            }
            self.stats.dma_bytes += dst.len() as u64;
            return Ok(());
        }
        let mut done = 0;
        while done < dst.len() {
            let n = (dst.len() - done).min(BOUNCE_LEN);
            self.request((offset + done as u64) / SECTOR, self.dma_phys + BOUNCE_OFF as u64, n)?;
            // SAFETY: the bounce area is inside the dma dataport, the device
            // finished writing it, and `dst` is ordinary memory of ours.
            unsafe { core::ptr::copy_nonoverlapping(self.dma.add(BOUNCE_OFF), dst[done..].as_mut_ptr(), n) };
            done += n;
        }
        self.stats.bounce_bytes += dst.len() as u64;
        Ok(())
    }
}
