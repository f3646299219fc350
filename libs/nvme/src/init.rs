//! Bring-up (§7.6.1): disable, admin queues, enable, identify, I/O queues.

use super::{
    layout, opcode, reg, Command, Controller, DmaArea, Error, Identity, Limits, Queue, Registers, Stats, Wait, CC_EN,
    CSTS_CFS, CSTS_RDY, PAGE, QUEUE_ENTRIES,
};

/// The I/O queue pair's id.
const IO_QID: u16 = 1;

impl<R: Registers> Controller<R> {
    /// Resets the controller behind `regs` and brings it up with its queues
    /// in `dma`. `wait` runs between polls.
    pub fn init(mut regs: R, mut dma: DmaArea, limits: Limits, wait: &mut impl Wait) -> Result<Self, Error> {
        let cap = regs.read64(reg::CAP);
        let mqes = (cap & 0xffff) as u16; // 0-based
        let stride = 4usize << ((cap >> 32) & 0xf);
        let css_nvm = (cap >> 37) & 1 != 0;
        let mps_min = (cap >> 48) & 0xf;
        if !css_nvm {
            return Err(Error::Unsupported("no NVM command set (CAP.CSS)"));
        }
        if mps_min != 0 {
            return Err(Error::Unsupported("no 4 KiB pages (CAP.MPSMIN)"));
        }
        if mqes < QUEUE_ENTRIES - 1 {
            return Err(Error::Unsupported("queues shorter than 64 entries (CAP.MQES)"));
        }
        // Four doorbells (admin and I/O, submission and completion).
        if 4 * stride > 0x1000 {
            return Err(Error::Unsupported("doorbell stride beyond the first register page (CAP.DSTRD)"));
        }
        // Disable (an earlier incarnation may have left it running).
        let cc = regs.read32(reg::CC);
        if cc & CC_EN != 0 {
            regs.write32(reg::CC, cc & !CC_EN);
        }
        wait_status(&mut regs, limits, wait, false, "the controller to stop (CSTS.RDY = 0)")?;
        dma.zero(0, layout::SIZE);
        let q = u32::from(QUEUE_ENTRIES - 1);
        regs.write32(reg::AQA, q << 16 | q);
        regs.write64(reg::ASQ, dma.phys + layout::ASQ as u64);
        regs.write64(reg::ACQ, dma.phys + layout::ACQ as u64);
        // Mask the pin-based interrupt: completion is polled (`Wait`).
        regs.write32(reg::INTMS, 1);
        // IOCQES 16 bytes (4), IOSQES 64 (6), round robin, MPS 4 KiB, NVM.
        regs.write32(reg::CC, 4 << 20 | 6 << 16 | CC_EN);
        wait_status(&mut regs, limits, wait, true, "the controller to be ready (CSTS.RDY = 1)")?;
        let version = regs.read32(reg::VS);
        let mut c = Controller {
            regs,
            dma,
            stride,
            limits,
            admin: Queue::new(0, layout::ASQ, layout::ACQ),
            io: Queue::new(IO_QID, layout::IOSQ, layout::IOCQ),
            identity: Identity {
                vendor: 0,
                model: [0; 40],
                serial: [0; 20],
                max_transfer: 0,
                block_size: 0,
                blocks: 0,
                version,
            },
            stats: Stats::default(),
        };
        c.identify(mps_min, wait)?;
        let qsize = u32::from(QUEUE_ENTRIES - 1) << 16 | u32::from(IO_QID);
        // Completion queue: physically contiguous, no interrupt vector.
        let cq = Command {
            opcode: opcode::CREATE_CQ,
            prp1: c.dma.phys + layout::IOCQ as u64,
            cdw10: qsize,
            cdw11: 1,
            ..Command::default()
        };
        c.execute(false, cq, wait)?;
        let sq = Command {
            opcode: opcode::CREATE_SQ,
            prp1: c.dma.phys + layout::IOSQ as u64,
            cdw10: qsize,
            cdw11: u32::from(IO_QID) << 16 | 1,
            ..Command::default()
        };
        c.execute(false, sq, wait)?;
        Ok(c)
    }

    /// Identify controller (CNS 1) and namespace 1 (CNS 0), each read once
    /// out of the identify page and checked.
    fn identify(&mut self, mps_min: u64, wait: &mut impl Wait) -> Result<(), Error> {
        let page = self.dma.phys + layout::IDENTIFY as u64;
        let id = Command { opcode: opcode::IDENTIFY, prp1: page, cdw10: 1, ..Command::default() };
        self.execute(false, id, wait)?;
        let mut buf = [0u8; 512];
        self.dma.copy_out(layout::IDENTIFY, &mut buf);
        self.identity.vendor = u16::from_le_bytes([buf[0], buf[1]]);
        self.identity.serial.copy_from_slice(&buf[4..24]);
        self.identity.model.copy_from_slice(&buf[24..64]);
        let mdts = buf[77];
        self.identity.max_transfer = match mdts {
            0 => 0,
            m if m >= 32 => 0,
            m => (PAGE << mps_min) << m,
        };
        // The namespace count (NN, bytes 516..520) is in the page's second
        // half.
        let mut nn = [0u8; 4];
        self.dma.copy_out(layout::IDENTIFY + 516, &mut nn);
        if u32::from_le_bytes(nn) < 1 {
            return Err(Error::Namespace("the controller has no namespaces (NN = 0)"));
        }
        self.dma.zero(layout::IDENTIFY, PAGE);
        let ns = Command { opcode: opcode::IDENTIFY, nsid: 1, prp1: page, cdw10: 0, ..Command::default() };
        self.execute(false, ns, wait)?;
        self.dma.copy_out(layout::IDENTIFY, &mut buf);
        let nsze = u64::from_le_bytes(buf[0..8].try_into().unwrap_or([0; 8]));
        let flbas = buf[26];
        let nlbaf = buf[25];
        // An inactive namespace identifies as all zeros: say that first.
        if nsze == 0 {
            return Err(Error::Namespace("no blocks (not attached?)"));
        }
        let index = usize::from(flbas & 0xf);
        if index > usize::from(nlbaf) || index >= 16 {
            return Err(Error::Namespace("FLBAS names no LBA format"));
        }
        let lbaf = u32::from_le_bytes(buf[128 + 4 * index..132 + 4 * index].try_into().unwrap_or([0; 4]));
        let ms = lbaf & 0xffff;
        let lbads = (lbaf >> 16) & 0xff;
        if ms != 0 {
            return Err(Error::Namespace("metadata with each block"));
        }
        if !(9..=12).contains(&lbads) {
            return Err(Error::Namespace("block size not 512..=4096 bytes"));
        }
        self.identity.block_size = 1 << lbads;
        self.identity.blocks = nsze;
        Ok(())
    }
}

/// Waits for CSTS.RDY to become `ready`, failing on CSTS.CFS.
fn wait_status(
    regs: &mut impl Registers,
    limits: Limits,
    wait: &mut impl Wait,
    ready: bool,
    what: &'static str,
) -> Result<(), Error> {
    let mut polls = 0u32;
    loop {
        let csts = regs.read32(reg::CSTS);
        if csts == u32::MAX {
            return Err(Error::Unsupported("registers read all ones (BAR not mapped?)"));
        }
        if ready && csts & CSTS_CFS != 0 {
            return Err(Error::Fatal);
        }
        if (csts & CSTS_RDY != 0) == ready {
            return Ok(());
        }
        polls += 1;
        if polls > limits.ready_polls {
            return Err(Error::Timeout(what));
        }
        wait.pause();
    }
}
