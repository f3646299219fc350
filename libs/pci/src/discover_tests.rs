use super::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// Configuration space whose BARs keep only the bits above their size.
#[derive(Default)]
struct Bus {
    regs: RefCell<HashMap<(u32, u8), u32>>,
    masks: HashMap<(u32, u8), u32>,
}

impl ConfigAccess for &Bus {
    type Error = ();
    fn read32(&self, f: Function, register: u8) -> Result<u32, ()> {
        Ok(*self.regs.borrow().get(&(f.bdf(), register)).unwrap_or(&!0))
    }
    fn write32(&self, f: Function, register: u8, value: u32) -> Result<(), ()> {
        let mut regs = self.regs.borrow_mut();
        let old = *regs.get(&(f.bdf(), register)).unwrap_or(&0);
        let new = match self.masks.get(&(f.bdf(), register)) {
            Some(mask) => value & mask | old & !mask,
            None => value,
        };
        regs.insert((f.bdf(), register), new);
        Ok(())
    }
}

impl Bus {
    /// A type 0 function with `bars` as (register value, size mask).
    fn function(&mut self, f: Function, id: u32, class: u32, pin: u8, line: u8, bars: &[(u32, u32)]) {
        let mut regs = self.regs.borrow_mut();
        regs.insert((f.bdf(), REG_ID), id);
        regs.insert((f.bdf(), REG_CLASS), class << 8);
        regs.insert((f.bdf(), REG_HEADER), 0);
        regs.insert((f.bdf(), REG_COMMAND), 0x0000_0007);
        regs.insert((f.bdf(), REG_INTERRUPT), u32::from(pin) << 8 | u32::from(line));
        for n in 0..6u8 {
            let (value, mask) = bars.get(n as usize).copied().unwrap_or((0, 0));
            regs.insert((f.bdf(), REG_BAR0 + 4 * n), value);
            self.masks.insert((f.bdf(), REG_BAR0 + 4 * n), mask);
        }
    }

    /// A PCI-to-PCI bridge from `f`'s bus to `secondary`.
    fn bridge(&mut self, f: Function, secondary: u8) {
        let mut regs = self.regs.borrow_mut();
        regs.insert((f.bdf(), REG_ID), 0x000c_1b36);
        regs.insert((f.bdf(), REG_CLASS), 0x0604_0000);
        regs.insert((f.bdf(), REG_HEADER), 1 << 16);
        regs.insert((f.bdf(), REG_BRIDGE_BUSES), u32::from(secondary) << 16 | u32::from(secondary) << 8);
    }
}

/// QEMU `pc` with an e1000 at slot 7 and a legacy virtio-blk (I/O BAR,
/// MSI-X) at slot 9, and a NIC at 01:02.0 behind a bridge at slot 4.
fn machine() -> Bus {
    let mut bus = Bus::default();
    bus.function(Function::new(0, 0, 0), 0x1237_8086, 0x06_0000, 0, 0, &[]);
    bus.function(Function::new(0, 1, 0), 0x7000_8086, 0x06_0100, 0, 0, &[]);
    bus.regs.borrow_mut().insert((Function::new(0, 1, 0).bdf(), 0x60), 0x0b0b_0a0a);
    bus.function(
        Function::new(0, 7, 0),
        0x100e_8086,
        0x02_0000,
        1,
        11,
        &[(0xfeb8_0000, 0xfffe_0000), (0xc041, 0xffc1)],
    );
    bus.function(
        Function::new(0, 9, 0),
        0x1001_1af4,
        0x01_0000,
        1,
        10,
        &[(0xc001, 0xffc1), (0xfebf_1000, 0xffff_f000)],
    );
    let blk = Function::new(0, 9, 0).bdf();
    bus.regs.borrow_mut().insert((blk, REG_COMMAND), 0x0010_0005);
    bus.regs.borrow_mut().insert((blk, REG_CAPABILITIES), 0x98);
    bus.regs.borrow_mut().insert((blk, 0x98), 0x0000_8411);
    bus.regs.borrow_mut().insert((blk, 0x84), 0x0000_0005);
    bus.bridge(Function::new(0, 4, 0), 1);
    // 64-bit prefetchable BAR0 above 4 GiB, 16 KiB.
    bus.function(Function::new(1, 2, 0), 0x8139_10ec, 0x02_0000, 1, 11, &[(0x0000_000c, 0xffff_c000), (0x8, !0)]);
    bus
}

#[test]
fn enumerate_finds_every_function_behind_bridges_and_sizes_bars() {
    let bus = machine();
    let mut found = Vec::new();
    enumerate(&bus, |f| found.push(f)).unwrap();
    let names: Vec<String> =
        found.iter().map(|f| format!("{} {:04x}:{:04x}", f.function, f.vendor, f.device)).collect();
    assert_eq!(
        names,
        ["00:00.0 8086:1237", "00:01.0 8086:7000", "01:02.0 10ec:8139", "00:07.0 8086:100e", "00:09.0 1af4:1001"]
    );
    let e1000 = &found[3];
    assert_eq!(e1000.bars[0], Bar::Memory { base: 0xfeb8_0000, size: 0x20000 });
    assert_eq!(e1000.bars[1], Bar::Io { base: 0xc040, size: 0x40 });
    assert_eq!(e1000.bars[2], Bar::None);
    assert_eq!((e1000.msi, e1000.msix, e1000.root_intx), (None, None, Some((7, 1))));
    let blk = &found[4];
    assert_eq!(blk.bars[0], Bar::Io { base: 0xc000, size: 0x40 });
    assert_eq!(blk.bars[1], Bar::Memory { base: 0xfebf_1000, size: 0x1000 });
    assert_eq!((blk.msi, blk.msix), (Some(0x84), Some(0x98)));
    let wide = &found[2];
    assert_eq!(wide.bars[0], Bar::Memory { base: 0x8_0000_0000, size: 0x4000 });
    assert_eq!(wide.bars[1], Bar::None, "upper half of a 64-bit BAR");
    // Behind the bridge at slot 4: device 2's INTA# is the bridge's INTC#.
    assert_eq!(wide.root_intx, Some((4, 3)));
    // Every BAR and command register as before (decoding back on).
    let regs = bus.regs.borrow();
    assert_eq!(regs[&(Function::new(0, 7, 0).bdf(), REG_BAR0)], 0xfeb8_0000);
    assert_eq!(regs[&(Function::new(0, 9, 0).bdf(), REG_BAR0)], 0xc001);
    assert_eq!(regs[&(Function::new(0, 9, 0).bdf(), REG_COMMAND)] & 0xffff, 0x0005, "decoding restored");
    assert_eq!(regs[&(Function::new(1, 2, 0).bdf(), REG_BAR0 + 4)], 0x8);
}

#[test]
fn a_bridge_loop_is_walked_once() {
    let mut bus = machine();
    // A bridge on bus 1 claiming bus 1 again, and one pointing back at 0.
    bus.bridge(Function::new(1, 5, 0), 1);
    bus.bridge(Function::new(1, 6, 0), 0);
    let mut n = 0;
    enumerate(&bus, |_| n += 1).unwrap();
    assert_eq!(n, 5);
}

#[test]
fn swizzle_follows_the_bridge_spec() {
    assert_eq!(swizzle(1, 0), 1);
    assert_eq!(swizzle(1, 1), 2);
    assert_eq!(swizzle(4, 1), 1);
    assert_eq!(swizzle(2, 7), 1);
}

#[test]
fn pc_routes_through_the_piix_pirq_registers() {
    let bus = machine();
    let chipset = Chipset::detect(&bus).unwrap();
    assert_eq!(chipset, Chipset::I440fx { pirq_routes: [10, 10, 11, 11] });
    let mut found = Vec::new();
    enumerate(&bus, |f| found.push(f)).unwrap();
    // Slot 7 INTA -> PIRQD -> IRQ 11; slot 9 INTA -> PIRQB -> IRQ 10.
    assert_eq!(route_intx(&chipset, &found[3]), Route::IoApic { pin: 11, active_low: false });
    assert_eq!(route_intx(&chipset, &found[4]), Route::IoApic { pin: 10, active_low: false });
    assert_eq!(route_intx(&chipset, &found[0]), Route::NoPin);
    let off = Chipset::I440fx { pirq_routes: [0x80; 4] };
    assert!(matches!(route_intx(&off, &found[3]), Route::Unknown(_)));
}

#[test]
fn q35_routes_slots_to_pirq_e_to_h() {
    let mut found = Found {
        function: Function::new(0, 2, 0),
        vendor: 0x8086,
        device: 0x100e,
        class: 0x02_0000,
        interrupt_pin: 1,
        interrupt_line: 10,
        bars: [Bar::None; 6],
        msi: None,
        msix: None,
        root_intx: Some((2, 1)),
    };
    // Slot 2 INTA: PIRQ (2 + 0) mod 4 + 4 = G, pin 22; slot 5: F, pin 21.
    assert_eq!(route_intx(&Chipset::Q35, &found), Route::IoApic { pin: 22, active_low: true });
    found.root_intx = Some((5, 1));
    assert_eq!(route_intx(&Chipset::Q35, &found), Route::IoApic { pin: 21, active_low: true });
    found.root_intx = Some((31, 1));
    assert!(matches!(route_intx(&Chipset::Q35, &found), Route::Unknown(_)));
}

#[test]
fn matches_name_classes_and_supported_models() {
    let bus = machine();
    let mut found = Vec::new();
    enumerate(&bus, |f| found.push(f)).unwrap();
    let net = match_kind("net").unwrap();
    let block = match_kind("block").unwrap();
    assert!(match_kind("sound").is_none());
    assert_eq!(net.supports(&found[3]), Some("e1000"));
    assert!(net.candidate(&found[2]) && net.supports(&found[2]).is_none(), "rtl8139: a NIC, not ours");
    assert_eq!(block.supports(&found[4]), Some("virtio-blk"));
    assert!(!block.candidate(&found[3]));
    // A modern virtio-net is a NIC netdrv drives; a transitional one
    // (1af4:1000, legacy I/O registers) is not.
    let mut virtio = Found { vendor: 0x1af4, device: 0x1041, class: 0x02_0000, ..found[3] };
    assert_eq!(net.supports(&virtio), Some("virtio-net"));
    virtio.device = 0x1000;
    assert!(net.candidate(&virtio) && net.supports(&virtio).is_none());
}

#[test]
fn block_matches_virtio_blk_and_nvme_by_class_and_id() {
    let mut bus = Bus::default();
    // QEMU's NVMe on q35: class 01/08/02, a 64-bit memory BAR0 of 16 KiB.
    bus.function(Function::new(0, 3, 0), 0x0010_1b36, 0x01_0802, 1, 0, &[(0xfebf_0004, 0xffff_c004), (0, !0)]);
    // An NVMe of another vendor: its class, not a model of ours.
    bus.function(Function::new(0, 4, 0), 0x0953_8086, 0x01_0802, 1, 0, &[(0xfeb0_0004, 0xffff_c004), (0, !0)]);
    let mut found = Vec::new();
    enumerate(&bus, |f| found.push(f)).unwrap();
    let block = match_kind("block").unwrap();
    assert_eq!(found[0].class_code(), 0x0108);
    assert!(block.candidate(&found[0]) && block.has_class(0x0100) && !block.has_class(0x0200));
    assert_eq!(block.supports(&found[0]), Some("nvme"));
    assert!(matches!(found[0].bars[0], Bar::Memory { base: 0xfebf_0000, size: 0x4000 }));
    assert!(block.candidate(&found[1]) && block.supports(&found[1]).is_none());
    assert!(!match_kind("net").unwrap().candidate(&found[0]));
}
