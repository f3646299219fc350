//! A simulated virtio-net device (1.0, PCI) for the host tests: the
//! common configuration, ISR, device configuration and doorbells at
//! QEMU's offsets in one BAR, and enough of the device behind them to move
//! frames: receive into the buffers the RX queue offers (the header in
//! front), transmit gathering each chain (header split off), used entries
//! and interrupts as `VIRTIO_F_EVENT_IDX` asks. Its DMA goes through the
//! e1000 fake's physical address map; an address outside it is recorded,
//! never followed.
//!
//! Hostile settings: any used entry or used index written by hand.

use std::cell::Cell;

use virtio::caps::{Layout, Region};
use virtio::Regs;

use crate::e1000::fake::Map;

/// The device's MAC address.
pub const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0xab, 0xcd, 0xef];

/// The layout the capabilities give (QEMU's).
pub fn layout() -> Layout {
    Layout {
        common: Region { bar: 4, offset: 0, length: 0x1000 },
        isr: Region { bar: 4, offset: 0x1000, length: 0x1000 },
        device: Some(Region { bar: 4, offset: 0x2000, length: 0x1000 }),
        notify: Region { bar: 4, offset: 0x3000, length: 0x1000 },
        notify_multiplier: 4,
    }
}

/// A frame the device sent: its `virtio_net_hdr` and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The 12 header bytes.
    pub hdr: [u8; 12],
    /// The frame, gathered from the rest of the chain.
    pub frame: Vec<u8>,
    /// Descriptors in the chain.
    pub descriptors: usize,
}

/// A chain as the device reads it: its head and (address, length, write)
/// per descriptor.
type Chain = (u16, Vec<(u64, u32, bool)>);

#[derive(Clone, Copy, Default)]
struct Q {
    size: u16,
    max: u16,
    desc: u64,
    avail: u64,
    used: u64,
    enabled: bool,
    /// Next avail entry to take.
    seen: u16,
    /// Used index written.
    used_idx: u16,
}

/// The simulated device.
pub struct Device {
    pub map: Map,
    /// Features offered.
    pub offered: u64,
    /// Features the driver wrote.
    pub accepted: u64,
    pub status: u8,
    feature_select: u32,
    driver_select: u32,
    select: u16,
    q: [Q; 2],
    /// The ISR (read-to-clear).
    pub isr: Cell<u8>,
    /// Interrupts raised (ISR queue bit set while clear).
    pub interrupts: u32,
    /// Doorbell writes, per queue.
    pub notifies: [u32; 2],
    pub link: bool,
    /// Addresses outside the map the driver gave the device.
    pub dma_faults: u32,
    /// Refuse FEATURES_OK.
    pub refuse_features: bool,
}

fn rd<const N: usize>(map: &Map, pa: u64, faults: &mut u32) -> [u8; N] {
    match map.virt(pa, N) {
        // SAFETY: mapped memory of the test's pools and queues.
        Some(p) => unsafe { core::ptr::read_volatile(p.cast::<[u8; N]>()) },
        None => {
            *faults += 1;
            [0; N]
        }
    }
}

fn wr(map: &Map, pa: u64, bytes: &[u8], faults: &mut u32) {
    match map.virt(pa, bytes.len()) {
        // SAFETY: as in `rd`.
        Some(p) => unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) },
        None => *faults += 1,
    }
}

impl Device {
    /// A device offering `offered` (VERSION_1 is added), queues of 256.
    pub fn new(map: Map, offered: u64) -> Device {
        let q = Q { max: 256, ..Q::default() };
        Device {
            map,
            offered: offered | virtio::F_VERSION_1,
            accepted: 0,
            status: 0,
            feature_select: 0,
            driver_select: 0,
            select: 0,
            q: [q, q],
            isr: Cell::new(0),
            interrupts: 0,
            notifies: [0; 2],
            link: true,
            dma_faults: 0,
            refuse_features: false,
        }
    }

    fn event_idx(&self) -> bool {
        self.accepted & virtio::F_EVENT_IDX != 0
    }

    fn r16(&mut self, pa: u64) -> u16 {
        u16::from_le_bytes(rd(&self.map, pa, &mut self.dma_faults))
    }

    fn w16(&mut self, pa: u64, v: u16) {
        wr(&self.map.clone(), pa, &v.to_le_bytes(), &mut self.dma_faults)
    }

    /// The next chain offered on queue `qi`: (head, [(addr, len, write)]).
    fn take(&mut self, qi: usize) -> Option<Chain> {
        let q = self.q[qi];
        if !q.enabled || self.status & 4 == 0 {
            return None;
        }
        if self.r16(q.avail + 2) == q.seen {
            return None;
        }
        let head = self.r16(q.avail + 4 + 2 * (q.seen % q.size) as u64);
        self.q[qi].seen = q.seen.wrapping_add(1);
        if self.event_idx() {
            // Notify me at the next one (as QEMU does when it has caught up).
            let at = q.used + 4 + 8 * q.size as u64;
            self.w16(at, self.q[qi].seen);
        }
        let mut out = Vec::new();
        let mut i = head;
        for _ in 0..q.size {
            let d: [u8; 16] = rd(&self.map, q.desc + 16 * (i % q.size) as u64, &mut self.dma_faults);
            let addr = u64::from_le_bytes(d[0..8].try_into().unwrap());
            let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
            let flags = u16::from_le_bytes([d[12], d[13]]);
            out.push((addr, len, flags & 2 != 0));
            if flags & 1 == 0 {
                break;
            }
            i = u16::from_le_bytes([d[14], d[15]]);
        }
        Some((head, out))
    }

    /// Writes a used entry on queue `qi` (any id and length) and interrupts
    /// as the driver's `used_event` (or flags) ask.
    pub fn complete(&mut self, qi: usize, id: u32, len: u32) {
        let q = self.q[qi];
        let e = q.used + 4 + 8 * (q.used_idx % q.size) as u64;
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&id.to_le_bytes());
        b[4..].copy_from_slice(&len.to_le_bytes());
        wr(&self.map.clone(), e, &b, &mut self.dma_faults);
        self.set_used_idx(qi, q.used_idx.wrapping_add(1));
    }

    /// Writes queue `qi`'s used index (hostile tests write any).
    pub fn set_used_idx(&mut self, qi: usize, idx: u16) {
        let q = self.q[qi];
        let old = q.used_idx;
        self.q[qi].used_idx = idx;
        self.w16(q.used + 2, idx);
        let want = if self.event_idx() {
            let ev = self.r16(q.avail + 4 + 2 * q.size as u64);
            idx.wrapping_sub(ev).wrapping_sub(1) < idx.wrapping_sub(old)
        } else {
            self.r16(q.avail) & 1 == 0
        };
        if want {
            if self.isr.get() & 1 == 0 {
                self.interrupts += 1;
            }
            self.isr.set(self.isr.get() | 1);
        }
    }

    /// Receives `frame` into the next offered buffer; false if none is
    /// offered or it does not fit.
    pub fn receive(&mut self, frame: &[u8]) -> bool {
        let Some((head, descs)) = self.take(0) else { return false };
        let (addr, len, write) = descs[0];
        if !write || (len as usize) < 12 + frame.len() {
            self.complete(0, head as u32, 0);
            return false;
        }
        let mut b = vec![0u8; 12];
        b[10] = 1; // num_buffers
        b.extend_from_slice(frame);
        wr(&self.map.clone(), addr, &b, &mut self.dma_faults);
        self.complete(0, head as u32, b.len() as u32);
        true
    }

    /// Takes every chain offered on the TX queue and completes it.
    pub fn transmit(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        while let Some((head, descs)) = self.take(1) {
            let mut bytes = Vec::new();
            for &(addr, len, _) in &descs {
                match self.map.virt(addr, len as usize) {
                    // SAFETY: as in `rd`.
                    Some(p) => bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(p, len as usize) }),
                    None => self.dma_faults += 1,
                }
            }
            let hdr: [u8; 12] = bytes[..12].try_into().unwrap();
            out.push(Sent { hdr, frame: bytes[12..].to_vec(), descriptors: descs.len() });
            self.complete(1, head as u32, 0);
        }
        out
    }

    /// Takes every chain offered on the TX queue without completing it
    /// (the device is slow): their heads.
    pub fn hold_transmit(&mut self) -> Vec<u16> {
        let mut heads = Vec::new();
        while let Some((head, _)) = self.take(1) {
            heads.push(head);
        }
        heads
    }

    fn common_write(&mut self, off: usize, v: u32) {
        let s = self.select as usize % 2;
        match off {
            0x00 => self.feature_select = v,
            0x08 => self.driver_select = v,
            0x0c => {
                let sh = 32 * (self.driver_select & 1);
                self.accepted = (self.accepted & !(0xffff_ffffu64 << sh)) | (v as u64) << sh;
            }
            0x14 => {
                let v = v as u8;
                if v == 0 {
                    let max = self.q[0].max;
                    self.q = [Q { max, ..Q::default() }; 2];
                    self.accepted = 0;
                    self.isr.set(0);
                }
                self.status =
                    if v & 8 != 0 && (self.refuse_features || self.accepted & !self.offered != 0) { v & !8 } else { v };
            }
            0x16 => self.select = v as u16,
            0x18 => self.q[s].size = v as u16,
            0x1c => self.q[s].enabled = v == 1,
            0x20 => self.q[s].desc = (self.q[s].desc & !0xffff_ffff) | v as u64,
            0x24 => self.q[s].desc = (self.q[s].desc & 0xffff_ffff) | (v as u64) << 32,
            0x28 => self.q[s].avail = (self.q[s].avail & !0xffff_ffff) | v as u64,
            0x2c => self.q[s].avail = (self.q[s].avail & 0xffff_ffff) | (v as u64) << 32,
            0x30 => self.q[s].used = (self.q[s].used & !0xffff_ffff) | v as u64,
            0x34 => self.q[s].used = (self.q[s].used & 0xffff_ffff) | (v as u64) << 32,
            _ => {}
        }
    }

    fn common_read(&self, off: usize) -> u32 {
        let q = self.q[self.select as usize % 2];
        match off {
            0x04 => (self.offered >> (32 * (self.feature_select & 1))) as u32,
            0x12 => 2,
            0x14 => self.status as u32,
            0x15 => 0,
            0x16 => self.select as u32,
            0x18 => {
                if q.size == 0 {
                    q.max as u32
                } else {
                    q.size as u32
                }
            }
            0x1c => q.enabled as u32,
            0x1e => self.select as u32,
            _ => 0,
        }
    }

    fn read(&self, off: usize) -> u32 {
        match off {
            0..0x1000 => self.common_read(off),
            0x1000 => self.isr.take() as u32,
            0x2000..0x2006 => MAC[off - 0x2000] as u32,
            0x2006 => self.link as u32,
            _ => 0,
        }
    }

    fn write(&mut self, off: usize, v: u32) {
        match off {
            0..0x1000 => self.common_write(off, v),
            0x3000 | 0x3004 => self.notifies[(off - 0x3000) / 4] += 1,
            _ => {}
        }
    }
}

impl Regs for Device {
    fn read8(&self, offset: usize) -> u8 {
        self.read32(offset) as u8
    }
    fn read16(&self, offset: usize) -> u16 {
        self.read32(offset) as u16
    }
    fn read32(&self, offset: usize) -> u32 {
        self.read(offset)
    }
    fn write8(&mut self, offset: usize, value: u8) {
        self.write(offset, value as u32)
    }
    fn write16(&mut self, offset: usize, value: u16) {
        self.write(offset, value as u32)
    }
    fn write32(&mut self, offset: usize, value: u32) {
        self.write(offset, value)
    }
}
