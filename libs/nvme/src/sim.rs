//! A simulated NVMe controller for the host tests: registers, the admin
//! and one I/O queue pair, Identify, Create I/O CQ/SQ and Read, executed
//! when a submission doorbell is written. "Physical" addresses are host
//! addresses (the tests' memory is identity-mapped for it). It checks what
//! the driver gives it (queue sizes, PRP alignment and lists) as a real
//! controller would and answers with the spec's status codes; faults can
//! be injected.

extern crate std;

use std::cell::RefCell;
use std::rc::Rc;
use std::vec::Vec;

use super::{reg, Registers, CC_EN, CSTS_CFS, CSTS_RDY, PAGE};

/// What to do wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// CSTS.RDY never rises.
    NeverReady,
    /// Commands of this opcode on the I/O queue get no completion.
    Silent,
    /// Completions carry another command id.
    WrongCid,
    /// Completions carry queue id 7.
    WrongSqid,
    /// Completions are posted with the old phase (so never seen as new).
    StalePhase,
    /// Reads fail with this status code (generic type).
    ReadStatus(u8),
    /// CSTS.CFS set once the controller is ready.
    FatalAfterReady,
}

#[derive(Default, Clone, Copy)]
struct SimQueue {
    base: u64,
    size: u16,
    head: u16,
    tail: u16,
    phase: bool,
}

pub struct State {
    pub disk: Vec<u8>,
    pub lbads: u8,
    pub mdts: u8,
    pub dstrd: u8,
    pub fault: Fault,
    pub cc: u32,
    pub csts: u32,
    pub aqa: u32,
    pub asq: u64,
    pub acq: u64,
    pub intms: u32,
    sq: [SimQueue; 2],
    cq: [SimQueue; 2],
    /// Every read command's PRP2 was a list (counted).
    pub list_reads: u32,
    /// Commands executed, by opcode, in order (admin and I/O).
    pub log: Vec<(u16, u8)>,
}

#[derive(Clone)]
pub struct Sim(pub Rc<RefCell<State>>);

impl Sim {
    pub fn new(disk: Vec<u8>, lbads: u8) -> Sim {
        Sim(Rc::new(RefCell::new(State {
            disk,
            lbads,
            mdts: 0,
            dstrd: 0,
            fault: Fault::None,
            cc: 0,
            csts: 0,
            aqa: 0,
            asq: 0,
            acq: 0,
            intms: 0,
            sq: [SimQueue::default(); 2],
            cq: [SimQueue::default(); 2],
            list_reads: 0,
            log: Vec::new(),
        })))
    }

    pub fn state(&self) -> std::cell::RefMut<'_, State> {
        self.0.borrow_mut()
    }
}

fn rd32(a: u64) -> u32 {
    // SAFETY: the tests give the driver host memory as "physical".
    unsafe { (a as *const u32).read_volatile() }
}

fn rd64(a: u64) -> u64 {
    // SAFETY: as above.
    unsafe { (a as *const u64).read_volatile() }
}

fn wr32(a: u64, v: u32) {
    // SAFETY: as above.
    unsafe { (a as *mut u32).write_volatile(v) }
}

fn write_bytes(a: u64, b: &[u8]) {
    // SAFETY: as above; the driver named this memory as the destination.
    unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), a as *mut u8, b.len()) }
}

impl State {
    fn stride(&self) -> usize {
        4 << self.dstrd
    }

    fn cap(&self) -> u64 {
        let mqes = 1023u64;
        mqes | 1 << 16 | u64::from(self.dstrd) << 32 | 1 << 37
    }

    fn write_reg(&mut self, off: usize, v: u32) {
        match off {
            reg::CC => {
                self.cc = v;
                if v & CC_EN != 0 {
                    if self.fault != Fault::NeverReady {
                        self.csts |= CSTS_RDY;
                    }
                    if self.fault == Fault::FatalAfterReady {
                        self.csts |= CSTS_CFS;
                    }
                    let n = (self.aqa & 0xfff) as u16 + 1;
                    self.sq[0] = SimQueue { base: self.asq, size: n, ..SimQueue::default() };
                    let n = (self.aqa >> 16 & 0xfff) as u16 + 1;
                    self.cq[0] = SimQueue { base: self.acq, size: n, phase: true, ..SimQueue::default() };
                    self.sq[1] = SimQueue::default();
                    self.cq[1] = SimQueue::default();
                } else {
                    self.csts &= !CSTS_RDY;
                }
            }
            reg::AQA => self.aqa = v,
            reg::ASQ => self.asq = self.asq & !0xffff_ffff | u64::from(v),
            o if o == reg::ASQ + 4 => self.asq = self.asq & 0xffff_ffff | u64::from(v) << 32,
            reg::ACQ => self.acq = self.acq & !0xffff_ffff | u64::from(v),
            o if o == reg::ACQ + 4 => self.acq = self.acq & 0xffff_ffff | u64::from(v) << 32,
            reg::INTMS => self.intms |= v,
            o if o >= reg::DOORBELLS => {
                let n = (o - reg::DOORBELLS) / self.stride();
                let (qid, completion) = (n / 2, n % 2 == 1);
                assert_eq!((o - reg::DOORBELLS) % self.stride(), 0, "doorbell at its stride");
                assert!(qid < 2, "doorbell of a queue that does not exist");
                if completion {
                    self.cq[qid].head = v as u16;
                } else {
                    self.sq[qid].tail = v as u16;
                    self.run(qid);
                }
            }
            _ => {}
        }
    }

    /// Executes every submitted entry of queue `qid`.
    fn run(&mut self, qid: usize) {
        if self.cc & CC_EN == 0 || self.csts & CSTS_RDY == 0 {
            return;
        }
        while self.sq[qid].head != self.sq[qid].tail {
            let q = self.sq[qid];
            let e = q.base + u64::from(q.head) * 64;
            self.sq[qid].head = (q.head + 1) % q.size;
            let dw: Vec<u32> = (0..16).map(|i| rd32(e + 4 * i)).collect();
            let opcode = dw[0] as u8;
            let cid = (dw[0] >> 16) as u16;
            self.log.push((qid as u16, opcode));
            if qid == 1 && self.fault == Fault::Silent {
                continue;
            }
            let status = if qid == 0 { self.admin(&dw) } else { self.io(&dw) };
            self.post(qid, cid, status);
        }
    }

    fn post(&mut self, qid: usize, cid: u16, status: u16) {
        let q = self.cq[qid];
        let e = q.base + u64::from(q.tail) * 16;
        let mut phase = q.phase;
        let mut cid = cid;
        let mut sqid = qid as u32;
        match self.fault {
            Fault::StalePhase if qid == 1 => phase = !phase,
            Fault::WrongCid if qid == 1 => cid = cid.wrapping_add(5),
            Fault::WrongSqid if qid == 1 => sqid = 7,
            _ => {}
        }
        wr32(e, 0);
        wr32(e + 4, 0);
        wr32(e + 8, u32::from(self.sq[qid].head) | sqid << 16);
        wr32(e + 12, u32::from(cid) | u32::from(phase) << 16 | u32::from(status) << 17);
        self.cq[qid].tail = (q.tail + 1) % q.size;
        if self.cq[qid].tail == 0 {
            self.cq[qid].phase = !q.phase;
        }
    }

    fn admin(&mut self, dw: &[u32]) -> u16 {
        let prp1 = u64::from(dw[6]) | u64::from(dw[7]) << 32;
        match dw[0] as u8 {
            0x06 => {
                let mut page = [0u8; PAGE];
                match (dw[10] & 0xff, dw[1]) {
                    (1, _) => {
                        page[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
                        page[4..24].copy_from_slice(b"sim-serial-1        ");
                        page[24..64].copy_from_slice(b"Simulated NVMe Ctrl                     ");
                        page[77] = self.mdts;
                        page[516..520].copy_from_slice(&1u32.to_le_bytes());
                    }
                    (0, 1) => {
                        let blocks = (self.disk.len() >> self.lbads) as u64;
                        page[0..8].copy_from_slice(&blocks.to_le_bytes());
                        page[25] = 1;
                        page[26] = 1;
                        page[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
                        page[132..136].copy_from_slice(&(u32::from(self.lbads) << 16).to_le_bytes());
                    }
                    _ => return 0x0b, // invalid namespace or format
                }
                write_bytes(prp1, &page);
                0
            }
            0x05 => {
                let (qid, size) = ((dw[10] & 0xffff) as usize, (dw[10] >> 16) as u16 + 1);
                if qid != 1 || dw[11] & 1 == 0 || !prp1.is_multiple_of(PAGE as u64) {
                    return 0x102; // command specific: invalid queue identifier
                }
                self.cq[1] = SimQueue { base: prp1, size, phase: true, ..SimQueue::default() };
                0
            }
            0x01 => {
                let (qid, size) = ((dw[10] & 0xffff) as usize, (dw[10] >> 16) as u16 + 1);
                if qid != 1 || dw[11] >> 16 != 1 || self.cq[1].size == 0 {
                    return 0x100; // completion queue invalid
                }
                self.sq[1] = SimQueue { base: prp1, size, ..SimQueue::default() };
                0
            }
            _ => 0x01, // invalid opcode
        }
    }

    fn io(&mut self, dw: &[u32]) -> u16 {
        if dw[0] as u8 != 0x02 || dw[1] != 1 {
            return 0x01;
        }
        if let Fault::ReadStatus(sc) = self.fault {
            return u16::from(sc);
        }
        let bs = 1usize << self.lbads;
        let lba = (u64::from(dw[10]) | u64::from(dw[11]) << 32) as usize;
        let len = ((dw[12] & 0xffff) as usize + 1) * bs;
        if (lba + len / bs) * bs > self.disk.len() {
            return 0x80; // LBA out of range
        }
        if self.mdts != 0 && len > PAGE << self.mdts {
            return 0x02; // invalid field
        }
        let Some(pages) = self.walk_prps(dw, len) else { return 0x13 };
        let mut at = lba * bs;
        for (addr, n) in pages {
            let src = self.disk[at..at + n].to_vec();
            write_bytes(addr, &src);
            at += n;
        }
        0
    }

    /// The (address, length) pieces PRP1/PRP2 describe for `len` bytes, or
    /// None when an entry is misaligned.
    fn walk_prps(&mut self, dw: &[u32], len: usize) -> Option<Vec<(u64, usize)>> {
        let page = PAGE as u64;
        let prp1 = u64::from(dw[6]) | u64::from(dw[7]) << 32;
        let prp2 = u64::from(dw[8]) | u64::from(dw[9]) << 32;
        if !prp1.is_multiple_of(4) {
            return None;
        }
        let first = ((page - prp1 % page) as usize).min(len);
        let mut out = std::vec![(prp1, first)];
        let mut rest = len - first;
        if rest == 0 {
            return Some(out);
        }
        if rest <= PAGE {
            if !prp2.is_multiple_of(page) {
                return None;
            }
            out.push((prp2, rest));
            return Some(out);
        }
        if !prp2.is_multiple_of(8) {
            return None;
        }
        self.list_reads += 1;
        let mut i = 0;
        while rest > 0 {
            assert!(i < PAGE / 8 - 1, "one list page is enough for our transfers");
            let e = rd64(prp2 + 8 * i as u64);
            if !e.is_multiple_of(page) {
                return None;
            }
            let n = rest.min(PAGE);
            out.push((e, n));
            rest -= n;
            i += 1;
        }
        Some(out)
    }
}

impl Registers for Sim {
    fn read32(&mut self, off: usize) -> u32 {
        let s = self.0.borrow();
        match off {
            reg::CAP => s.cap() as u32,
            o if o == reg::CAP + 4 => (s.cap() >> 32) as u32,
            reg::VS => 0x0001_0400,
            reg::CC => s.cc,
            reg::CSTS => s.csts,
            reg::AQA => s.aqa,
            _ => 0,
        }
    }

    fn write32(&mut self, off: usize, value: u32) {
        self.0.borrow_mut().write_reg(off, value);
    }
}
