//! An NVMe controller driver (NVM Express Base Specification 1.4: §3.1 the
//! registers, §4 the queues and PRPs, §5 the admin commands; NVM Command
//! Set §6.9 Read), over any register access ([`Registers`]) and one
//! physically contiguous DMA area ([`DmaArea`]). `no_std`, no allocation.
//!
//! What it does: resets the controller, sets up the admin queue pair,
//! identifies the controller and namespace 1, creates one I/O completion
//! and one I/O submission queue, and reads logical blocks straight into
//! any physically contiguous memory the caller names (one command per
//! request, PRP1/PRP2 or a PRP list for more than two pages), or through
//! its own bounce area ([`Controller::read_bounce`]).
//!
//! **The controller is not trusted.** Every completion entry is read once
//! (16 bytes copied out of the queue, then checked): its phase bit says
//! whether it is new, its command id must be the one outstanding, its
//! submission queue id and head must be in range, its status must be
//! success; anything else is an [`Error`] naming what was wrong. Waits are
//! bounded by a poll budget ([`Limits`]): a controller that never becomes
//! ready or never completes gives [`Error::Timeout`], never a hang.
//!
//! Completion is polled: the caller's [`Wait::pause`] runs between polls
//! (yield, or wait for the interrupt when one is routed: the interrupt is
//! then a hint to look again, never trusted to mean "done").
#![no_std]
#![warn(missing_docs)]

use core::sync::atomic::{fence, Ordering};

/// Controller register offsets (§3.1).
pub mod reg {
    /// Controller capabilities (64 bits).
    pub const CAP: usize = 0x00;
    /// Version.
    pub const VS: usize = 0x08;
    /// Interrupt mask set.
    pub const INTMS: usize = 0x0C;
    /// Controller configuration.
    pub const CC: usize = 0x14;
    /// Controller status.
    pub const CSTS: usize = 0x1C;
    /// Admin queue attributes.
    pub const AQA: usize = 0x24;
    /// Admin submission queue base (64 bits).
    pub const ASQ: usize = 0x28;
    /// Admin completion queue base (64 bits).
    pub const ACQ: usize = 0x30;
    /// First doorbell.
    pub const DOORBELLS: usize = 0x1000;
}

/// CC.EN.
pub const CC_EN: u32 = 1;
/// CSTS.RDY.
pub const CSTS_RDY: u32 = 1;
/// CSTS.CFS (controller fatal status).
pub const CSTS_CFS: u32 = 2;

/// Admin and NVM opcodes this driver issues.
pub mod opcode {
    /// Create I/O submission queue (admin).
    pub const CREATE_SQ: u8 = 0x01;
    /// Create I/O completion queue (admin).
    pub const CREATE_CQ: u8 = 0x05;
    /// Identify (admin).
    pub const IDENTIFY: u8 = 0x06;
    /// Read (NVM).
    pub const READ: u8 = 0x02;
}

/// The memory page size the driver configures (CC.MPS = 0).
pub const PAGE: usize = 4096;
/// Entries per queue (each queue is one page: 64 × 64-byte submission
/// entries; completion queues the same count).
pub const QUEUE_ENTRIES: u16 = 64;

/// Layout of the DMA area, in bytes from its start.
pub mod layout {
    /// Admin submission queue (one page).
    pub const ASQ: usize = 0x0000;
    /// Admin completion queue.
    pub const ACQ: usize = 0x1000;
    /// I/O submission queue.
    pub const IOSQ: usize = 0x2000;
    /// I/O completion queue.
    pub const IOCQ: usize = 0x3000;
    /// Identify data (one page).
    pub const IDENTIFY: usize = 0x4000;
    /// The PRP list of the outstanding read (one page: 512 entries).
    pub const PRP_LIST: usize = 0x5000;
    /// Bounce area for destinations the device cannot reach.
    pub const BOUNCE: usize = 0x8000;
    /// Its length.
    pub const BOUNCE_LEN: usize = 0x8000;
    /// The area must be at least this long.
    pub const SIZE: usize = BOUNCE + BOUNCE_LEN;
}

/// Longest transfer one command carries here: PRP1 plus a one-page list of
/// 512 entries would reach 2 MiB; 256 KiB bounds one wait.
pub const MAX_TRANSFER: usize = 256 << 10;

/// 32- and 64-bit access to the controller's register BAR.
pub trait Registers {
    /// Reads the 32-bit register at `off`.
    fn read32(&mut self, off: usize) -> u32;
    /// Writes the 32-bit register at `off`.
    fn write32(&mut self, off: usize, value: u32);
    /// Reads a 64-bit register as two 32-bit halves, low first.
    fn read64(&mut self, off: usize) -> u64 {
        let lo = self.read32(off);
        u64::from(self.read32(off + 4)) << 32 | u64::from(lo)
    }
    /// Writes a 64-bit register as two 32-bit halves, low first.
    fn write64(&mut self, off: usize, value: u64) {
        self.write32(off, value as u32);
        self.write32(off + 4, (value >> 32) as u32);
    }
}

/// What runs between two polls of the controller.
pub trait Wait {
    /// Gives the CPU away for a while (yield, or wait for the interrupt).
    fn pause(&mut self);
}

/// Poll budgets.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Polls of CSTS while enabling or disabling.
    pub ready_polls: u32,
    /// Polls of the completion queue per command.
    pub command_polls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { ready_polls: 5_000_000, command_polls: 50_000_000 }
    }
}

/// A physically contiguous region the controller may read and write: the
/// queues, identify data, the PRP list and the bounce area.
pub struct DmaArea {
    virt: *mut u8,
    phys: u64,
    len: usize,
}

impl DmaArea {
    /// The area at `virt` (its physical address `phys`), `len` bytes.
    ///
    /// # Safety
    /// `virt..virt+len` must be mapped, writable, physically contiguous
    /// from `phys`, page-aligned, and used by nothing else (the controller
    /// and this driver only) for as long as the controller lives.
    pub unsafe fn new(virt: *mut u8, phys: u64, len: usize) -> Result<DmaArea, Error> {
        if len < layout::SIZE || !(virt as usize).is_multiple_of(PAGE) || !phys.is_multiple_of(PAGE as u64) {
            return Err(Error::DmaArea);
        }
        Ok(DmaArea { virt, phys, len })
    }

    fn ptr(&self, off: usize, len: usize) -> *mut u8 {
        assert!(off + len <= self.len, "inside the DMA area");
        // SAFETY: in bounds (checked above).
        unsafe { self.virt.add(off) }
    }

    fn zero(&mut self, off: usize, len: usize) {
        // SAFETY: in bounds, our memory (DmaArea::new's contract).
        unsafe { core::ptr::write_bytes(self.ptr(off, len), 0, len) }
    }

    fn write_u32(&mut self, off: usize, v: u32) {
        // SAFETY: in bounds, aligned (callers use 4-byte multiples).
        unsafe { self.ptr(off, 4).cast::<u32>().write_volatile(v) }
    }

    fn write_u64(&mut self, off: usize, v: u64) {
        // SAFETY: in bounds, aligned (callers use 8-byte multiples).
        unsafe { self.ptr(off, 8).cast::<u64>().write_volatile(v) }
    }

    fn read_u32(&self, off: usize) -> u32 {
        // SAFETY: in bounds, aligned.
        unsafe { self.ptr(off, 4).cast::<u32>().read_volatile() }
    }

    fn copy_out(&self, off: usize, dst: &mut [u8]) {
        // SAFETY: in bounds; `dst` is ordinary memory of the caller.
        unsafe { core::ptr::copy_nonoverlapping(self.ptr(off, dst.len()), dst.as_mut_ptr(), dst.len()) }
    }
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The DMA area is too small or not page-aligned.
    DmaArea,
    /// CAP says the controller cannot use 4 KiB pages, the NVM command
    /// set, or queues of our size.
    Unsupported(&'static str),
    /// The controller did not reach the state in time.
    Timeout(&'static str),
    /// The controller reported a fatal status (CSTS.CFS).
    Fatal,
    /// A completion named a command that is not outstanding.
    UnknownCommand {
        /// The command id in the entry.
        cid: u16,
        /// The one outstanding.
        expected: u16,
    },
    /// A completion's submission queue id or head is out of range.
    BadCompletion {
        /// Its submission queue id.
        sqid: u16,
        /// Its submission queue head.
        head: u16,
    },
    /// The command failed: status code type and status code (§4.6.1.2).
    Status {
        /// The command's opcode.
        opcode: u8,
        /// Status code type.
        sct: u8,
        /// Status code.
        sc: u8,
    },
    /// The namespace is missing or its format is not usable (block size
    /// not 512..=4096 bytes, a power of two; metadata interleaved).
    Namespace(&'static str),
    /// A read outside the namespace, or not in whole blocks.
    OutOfRange,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::DmaArea => write!(f, "DMA area too small or not page-aligned"),
            Error::Unsupported(what) => write!(f, "unsupported controller: {what}"),
            Error::Timeout(what) => write!(f, "timed out waiting for {what}"),
            Error::Fatal => write!(f, "controller fatal status (CSTS.CFS)"),
            Error::UnknownCommand { cid, expected } => {
                write!(f, "completion for command {cid}, but {expected} is outstanding")
            }
            Error::BadCompletion { sqid, head } => write!(f, "completion with queue {sqid} head {head}"),
            Error::Status { opcode, sct, sc } => {
                write!(f, "command {opcode:#04x} failed: status type {sct:#x} code {sc:#04x}")
            }
            Error::Namespace(what) => write!(f, "namespace 1: {what}"),
            Error::OutOfRange => write!(f, "read outside the namespace or not in whole blocks"),
        }
    }
}

/// One completion entry, copied out of the queue (§4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Command specific (DW0).
    pub result: u32,
    /// Submission queue head pointer.
    pub sq_head: u16,
    /// Submission queue id.
    pub sqid: u16,
    /// Command id.
    pub cid: u16,
    /// Phase tag.
    pub phase: bool,
    /// Status field without the phase bit (SC bits 0..8, SCT 8..11).
    pub status: u16,
}

impl Completion {
    /// Decodes the four dwords of an entry.
    pub fn decode(dw: [u32; 4]) -> Completion {
        Completion {
            result: dw[0],
            sq_head: dw[2] as u16,
            sqid: (dw[2] >> 16) as u16,
            cid: dw[3] as u16,
            phase: dw[3] & (1 << 16) != 0,
            status: (dw[3] >> 17) as u16,
        }
    }
}

/// A queue pair's state on our side.
struct Queue {
    id: u16,
    sq_off: usize,
    cq_off: usize,
    tail: u16,
    head: u16,
    phase: bool,
    next_cid: u16,
}

impl Queue {
    fn new(id: u16, sq_off: usize, cq_off: usize) -> Queue {
        Queue { id, sq_off, cq_off, tail: 0, head: 0, phase: true, next_cid: 0 }
    }
}

/// A submission entry's fields this driver sets (§4.2).
#[derive(Clone, Copy, Default)]
struct Command {
    opcode: u8,
    nsid: u32,
    prp1: u64,
    prp2: u64,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
}

/// What the driver did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Commands completed successfully (admin and I/O).
    pub commands: u64,
    /// Read commands.
    pub reads: u64,
    /// Bytes the controller wrote straight into the caller's memory.
    pub dma_bytes: u64,
    /// Bytes read through the bounce area and copied out.
    pub bounce_bytes: u64,
    /// Reads that needed a PRP list (more than two pages).
    pub prp_lists: u64,
}

/// What identify said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// PCI vendor id (identify controller bytes 0..2).
    pub vendor: u16,
    /// Model number, ASCII, space padded.
    pub model: [u8; 40],
    /// Serial number, ASCII, space padded.
    pub serial: [u8; 20],
    /// Largest transfer in bytes (MDTS; 0: no limit).
    pub max_transfer: usize,
    /// Logical block size of namespace 1.
    pub block_size: u32,
    /// Its size in logical blocks.
    pub blocks: u64,
    /// Version register (major << 16 | minor << 8).
    pub version: u32,
}

impl Identity {
    /// The model number without its padding.
    pub fn model_str(&self) -> &str {
        trimmed(&self.model)
    }

    /// The serial number without its padding.
    pub fn serial_str(&self) -> &str {
        trimmed(&self.serial)
    }
}

fn trimmed(b: &[u8]) -> &str {
    let s = core::str::from_utf8(b).unwrap_or("?");
    s.trim_end_matches([' ', '\0'])
}

/// A controller, enabled, with namespace 1 identified and one I/O queue
/// pair.
pub struct Controller<R: Registers> {
    regs: R,
    dma: DmaArea,
    stride: usize,
    limits: Limits,
    admin: Queue,
    io: Queue,
    identity: Identity,
    stats: Stats,
}

mod init;
mod io;
pub use io::prps;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

impl<R: Registers> Controller<R> {
    /// What identify said.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Namespace 1's size in bytes.
    pub fn size(&self) -> u64 {
        self.identity.blocks * u64::from(self.identity.block_size)
    }

    /// The register access (the caller's, e.g. to read INTx state).
    pub fn registers(&mut self) -> &mut R {
        &mut self.regs
    }

    fn doorbell(&mut self, qid: u16, completion: bool, value: u16) {
        let off = reg::DOORBELLS + (2 * usize::from(qid) + usize::from(completion)) * self.stride;
        fence(Ordering::SeqCst);
        self.regs.write32(off, u32::from(value));
    }

    /// Submits `cmd` on the admin queue (`io` false) or the I/O queue and
    /// waits for its completion, checked.
    fn execute(&mut self, io: bool, cmd: Command, wait: &mut impl Wait) -> Result<Completion, Error> {
        let q = if io { &mut self.io } else { &mut self.admin };
        let cid = q.next_cid;
        q.next_cid = q.next_cid.wrapping_add(1);
        let (qid, sq_off, tail) = (q.id, q.sq_off, q.tail);
        let entry = sq_off + usize::from(tail) * 64;
        self.dma.zero(entry, 64);
        self.dma.write_u32(entry, u32::from(cmd.opcode) | u32::from(cid) << 16);
        self.dma.write_u32(entry + 4, cmd.nsid);
        self.dma.write_u64(entry + 24, cmd.prp1);
        self.dma.write_u64(entry + 32, cmd.prp2);
        self.dma.write_u32(entry + 40, cmd.cdw10);
        self.dma.write_u32(entry + 44, cmd.cdw11);
        self.dma.write_u32(entry + 48, cmd.cdw12);
        let new_tail = (tail + 1) % QUEUE_ENTRIES;
        if io {
            self.io.tail = new_tail
        } else {
            self.admin.tail = new_tail
        }
        self.doorbell(qid, false, new_tail);
        let done = self.complete(io, cid, wait)?;
        if done.status != 0 {
            let sct = ((done.status >> 8) & 7) as u8;
            return Err(Error::Status { opcode: cmd.opcode, sct, sc: done.status as u8 });
        }
        self.stats.commands += 1;
        Ok(done)
    }

    /// Waits for the completion of command `cid`: the entry at the head,
    /// read once, new when its phase is the one expected.
    fn complete(&mut self, io: bool, cid: u16, wait: &mut impl Wait) -> Result<Completion, Error> {
        let mut polls = 0u32;
        loop {
            let q = if io { &self.io } else { &self.admin };
            let at = q.cq_off + usize::from(q.head) * 16;
            let dw3 = self.dma.read_u32(at + 12);
            if (dw3 & (1 << 16) != 0) == q.phase {
                fence(Ordering::SeqCst);
                // Read once: the entry as it is now, then only the copy.
                let dw = [self.dma.read_u32(at), self.dma.read_u32(at + 4), self.dma.read_u32(at + 8), dw3];
                return self.accept(io, cid, Completion::decode(dw));
            }
            if self.regs.read32(reg::CSTS) & CSTS_CFS != 0 {
                return Err(Error::Fatal);
            }
            polls += 1;
            if polls > self.limits.command_polls {
                return Err(Error::Timeout("a command completion"));
            }
            wait.pause();
        }
    }

    /// Consumes the entry at the head (whatever it says: a bad one is not
    /// looked at twice) and checks it.
    fn accept(&mut self, io: bool, cid: u16, c: Completion) -> Result<Completion, Error> {
        let q = if io { &mut self.io } else { &mut self.admin };
        q.head = (q.head + 1) % QUEUE_ENTRIES;
        if q.head == 0 {
            q.phase = !q.phase;
        }
        let (qid, head) = (q.id, q.head);
        self.doorbell(qid, true, head);
        if c.sqid != qid || c.sq_head >= QUEUE_ENTRIES {
            return Err(Error::BadCompletion { sqid: c.sqid, head: c.sq_head });
        }
        if c.cid != cid {
            return Err(Error::UnknownCommand { cid: c.cid, expected: cid });
        }
        Ok(c)
    }
}
