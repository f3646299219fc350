//! The driver against the simulated controller (`sim`).

extern crate std;

use std::vec;
use std::vec::Vec;

use super::sim::{Fault, Sim};
use super::*;

#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Page([u8; PAGE]);

/// Page-aligned host memory, identity-"physical" for the simulator.
struct Mem(Vec<Page>);

impl Mem {
    fn new(bytes: usize) -> Mem {
        Mem(vec![Page([0; PAGE]); bytes.div_ceil(PAGE)])
    }

    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the pages are contiguous plain bytes.
        unsafe { core::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * PAGE) }
    }
}

struct Spin(u32);

impl Wait for Spin {
    fn pause(&mut self) {
        self.0 += 1;
    }
}

/// A disk whose every 8 bytes say where they are (and a salt).
fn pattern(len: usize) -> Vec<u8> {
    (0..len / 8).flat_map(|i| (((i as u64) * 0x9e37_79b9) ^ 0x5a5a).to_le_bytes()).collect()
}

const LIMITS: Limits = Limits { ready_polls: 100, command_polls: 100 };

fn bring_up(sim: &Sim, area: &mut Mem) -> Result<Controller<Sim>, Error> {
    let p = area.ptr();
    // SAFETY: the test's own page-aligned memory, used by nothing else.
    let dma = unsafe { DmaArea::new(p, p as u64, layout::SIZE) }?;
    Controller::init(sim.clone(), dma, LIMITS, &mut Spin(0))
}

#[test]
fn identifies_and_creates_the_io_queues() {
    let sim = Sim::new(pattern(1 << 20), 9);
    let mut area = Mem::new(layout::SIZE);
    let c = bring_up(&sim, &mut area).unwrap();
    let id = c.identity();
    assert_eq!(id.vendor, 0x1b36);
    assert_eq!(id.model_str(), "Simulated NVMe Ctrl");
    assert_eq!(id.serial_str(), "sim-serial-1");
    assert_eq!((id.block_size, id.blocks), (512, 2048));
    assert_eq!(c.size(), 1 << 20);
    assert_eq!(id.version, 0x0001_0400);
    // Identify controller, namespace, then the CQ before the SQ.
    assert_eq!(sim.state().log, vec![(0, 0x06), (0, 0x06), (0, 0x05), (0, 0x01)]);
    assert_eq!(sim.state().intms, 1, "pin interrupt masked: polled");
    assert_eq!(sim.state().cc & 0x00ff_fff1, 4 << 20 | 6 << 16 | 1);
}

#[test]
fn reads_are_byte_exact_at_every_size_and_alignment() {
    for lbads in [9u8, 12] {
        let disk = pattern(4 << 20);
        let sim = Sim::new(disk.clone(), lbads);
        let mut area = Mem::new(layout::SIZE);
        let mut c = bring_up(&sim, &mut area).unwrap();
        let bs = 1usize << lbads;
        let mut dst = Mem::new(1 << 20);
        // One block, two pages, a PRP list, a page-offset start (512-byte
        // blocks only), and more than one command's worth.
        for (off_blocks, len, dst_off) in
            [(0, bs, 0), (3, 2 * PAGE, 0), (1, 5 * PAGE, 0), (7, 64 * PAGE, 0), (0, 96 * PAGE, 0), (2, 3 * PAGE, 512)]
        {
            if dst_off % bs != 0 {
                continue;
            }
            let off = off_blocks * bs;
            let base = dst.ptr() as u64 + dst_off as u64;
            c.read_phys(off as u64, base, len, &mut Spin(0)).unwrap();
            assert_eq!(&dst.bytes()[dst_off..dst_off + len], &disk[off..off + len], "{lbads} {off} {len}");
        }
        let s = c.stats();
        assert!(s.prp_lists >= 3 && sim.state().list_reads as u64 == s.prp_lists);
        assert!(s.reads >= 6, "96 pages take two commands");
        let last = (disk.len() - bs) as u64;
        let mut tail = vec![0u8; bs];
        c.read_bounce(last, &mut tail, &mut Spin(0)).unwrap();
        assert_eq!(tail, disk[disk.len() - bs..]);
        let mut big = vec![0u8; 40 << 10];
        c.read_bounce(4096, &mut big, &mut Spin(0)).unwrap();
        assert_eq!(big, disk[4096..4096 + (40 << 10)]);
        assert_eq!(c.stats().bounce_bytes, (bs + (40 << 10)) as u64);
    }
}

#[test]
fn mdts_bounds_each_command() {
    let disk = pattern(1 << 20);
    let sim = Sim::new(disk.clone(), 9);
    sim.state().mdts = 2; // 16 KiB per command
    let mut area = Mem::new(layout::SIZE);
    let mut c = bring_up(&sim, &mut area).unwrap();
    assert_eq!(c.identity().max_transfer, 16 << 10);
    let mut dst = Mem::new(64 << 10);
    c.read_phys(8192, dst.ptr() as u64, 64 << 10, &mut Spin(0)).unwrap();
    assert_eq!(dst.bytes(), &disk[8192..8192 + (64 << 10)]);
    assert_eq!(c.stats().reads, 4);
}

#[test]
fn bad_requests_are_refused_before_the_controller() {
    let sim = Sim::new(pattern(1 << 20), 12);
    let mut area = Mem::new(layout::SIZE);
    let mut c = bring_up(&sim, &mut area).unwrap();
    let mut dst = Mem::new(8192);
    let p = dst.ptr() as u64;
    let before = sim.state().log.len();
    assert_eq!(c.read_phys(512, p, 4096, &mut Spin(0)), Err(Error::OutOfRange));
    assert_eq!(c.read_phys(0, p, 100, &mut Spin(0)), Err(Error::OutOfRange));
    assert_eq!(c.read_phys(1 << 20, p, 4096, &mut Spin(0)), Err(Error::OutOfRange));
    assert_eq!(c.read_phys(u64::MAX - 4095, p, 4096, &mut Spin(0)), Err(Error::OutOfRange));
    assert_eq!(c.read_phys(0, p + 2, 4096, &mut Spin(0)), Err(Error::OutOfRange));
    assert_eq!(sim.state().log.len(), before, "nothing reached the controller");
}

#[test]
fn hostile_completions_are_errors_not_faults() {
    let cases = [
        (Fault::WrongCid, "cid"),
        (Fault::WrongSqid, "sqid"),
        (Fault::StalePhase, "phase"),
        (Fault::Silent, "silent"),
        (Fault::ReadStatus(0x81), "status"),
    ];
    for (fault, name) in cases {
        let disk = pattern(1 << 20);
        let sim = Sim::new(disk.clone(), 9);
        let mut area = Mem::new(layout::SIZE);
        let mut c = bring_up(&sim, &mut area).unwrap();
        sim.state().fault = fault;
        let mut dst = Mem::new(8192);
        let mut spin = Spin(0);
        let got = c.read_phys(0, dst.ptr() as u64, 8192, &mut spin);
        let want = match fault {
            Fault::WrongCid => Err(Error::UnknownCommand { cid: 5, expected: 0 }),
            Fault::WrongSqid => Err(Error::BadCompletion { sqid: 7, head: 1 }),
            Fault::StalePhase | Fault::Silent => Err(Error::Timeout("a command completion")),
            _ => Err(Error::Status { opcode: opcode::READ, sct: 0, sc: 0x81 }),
        };
        assert_eq!(got, want, "{name}");
        if matches!(fault, Fault::StalePhase | Fault::Silent) {
            assert_eq!(spin.0, LIMITS.command_polls, "bounded wait");
        }
        if matches!(fault, Fault::Silent | Fault::ReadStatus(_)) {
            assert!(dst.bytes().iter().all(|&b| b == 0), "{name}: the controller wrote nothing");
        }
        assert_eq!(c.stats().dma_bytes, 0, "{name}: nothing counted as read");
        // The driver stays usable once the controller behaves again
        // (the bad entry was consumed, not looked at twice).
        sim.state().fault = Fault::None;
        if matches!(fault, Fault::ReadStatus(_)) {
            c.read_phys(0, dst.ptr() as u64, 8192, &mut Spin(0)).unwrap();
            assert_eq!(dst.bytes(), &disk[..8192]);
        }
    }
}

#[test]
fn a_controller_that_never_readies_or_is_fatal_times_out_cleanly() {
    let sim = Sim::new(pattern(1 << 20), 9);
    sim.state().fault = Fault::NeverReady;
    let mut area = Mem::new(layout::SIZE);
    let e = bring_up(&sim, &mut area).err().unwrap();
    assert_eq!(e, Error::Timeout("the controller to be ready (CSTS.RDY = 1)"));
    assert!(std::format!("{e}").contains("timed out"));
    let sim = Sim::new(pattern(1 << 20), 9);
    sim.state().fault = Fault::FatalAfterReady;
    assert_eq!(bring_up(&sim, &mut area).err(), Some(Error::Fatal));
}

#[test]
fn a_running_controller_is_disabled_first_and_odd_formats_refused() {
    let sim = Sim::new(pattern(1 << 20), 9);
    let mut area = Mem::new(layout::SIZE);
    let first = bring_up(&sim, &mut area).unwrap();
    drop(first);
    // Left enabled (a restarted driver): brought up again from scratch.
    let mut c = bring_up(&sim, &mut area).unwrap();
    let mut dst = Mem::new(4096);
    c.read_phys(4096, dst.ptr() as u64, 4096, &mut Spin(0)).unwrap();
    assert_eq!(dst.bytes(), &pattern(1 << 20)[4096..8192]);
    let sim = Sim::new(pattern(1 << 20), 13); // 8 KiB blocks
    assert_eq!(bring_up(&sim, &mut area).err(), Some(Error::Namespace("block size not 512..=4096 bytes")));
    let sim = Sim::new(Vec::new(), 9);
    assert_eq!(bring_up(&sim, &mut area).err(), Some(Error::Namespace("no blocks (not attached?)")));
    let mut small = Mem::new(PAGE);
    let p = small.ptr();
    // SAFETY: only checked, never used.
    assert_eq!(unsafe { DmaArea::new(p, p as u64, PAGE) }.err(), Some(Error::DmaArea));
}

#[test]
fn doorbell_stride_is_honoured() {
    let disk = pattern(1 << 20);
    let sim = Sim::new(disk.clone(), 9);
    sim.state().dstrd = 2; // 16-byte doorbells
    let mut area = Mem::new(layout::SIZE);
    let mut c = bring_up(&sim, &mut area).unwrap();
    let mut dst = Mem::new(4096);
    // Enough commands to wrap both queues (64 entries) and flip the phase.
    for i in 0..150u64 {
        c.read_phys(i * 4096, dst.ptr() as u64, 4096, &mut Spin(0)).unwrap();
        assert_eq!(dst.bytes(), &disk[i as usize * 4096..(i as usize + 1) * 4096]);
    }
}

#[test]
fn prp_entries_follow_the_pages() {
    let mut list = [0u64; PAGE / 8];
    assert_eq!(prps(0x10000, 4096, 0x9000, &mut list), (0x10000, 0, 0));
    assert_eq!(prps(0x10000, 8192, 0x9000, &mut list), (0x10000, 0x11000, 0));
    assert_eq!(prps(0x10200, 4096, 0x9000, &mut list), (0x10200, 0x11000, 0));
    assert_eq!(prps(0x10000, 3 * 4096, 0x9000, &mut list), (0x10000, 0x9000, 2));
    assert_eq!(&list[..2], &[0x11000, 0x12000]);
}
