//! A simulated 82540EM or 82574L for the host tests: a register file that records
//! every write, and enough of the device behind it to move frames through
//! the rings the driver sets up: receive into the buffers the RX
//! descriptors point at, transmit (context and data descriptors, gathered
//! into frames; TCP segmentation as the manual describes it, §3.5), DD
//! write-back, heads, interrupt causes. All its DMA goes
//! through the same physical address map the driver was given; an address
//! outside it is recorded as a DMA fault, never followed.
//!
//! The 82574L ([`Device::new_82574`]) differs where QEMU 7.2's `e1000e`
//! does in INTx mode: a read of ICR carries INT_ASSERTED while a cause the
//! mask lets through is pending; it clears ICR only with IMS 0 or, with
//! CTRL_EXT.IAME set, when asserted, and then also masks the causes in
//! IAM (the auto-mask the driver must leave off); writing 1s to ICR clears
//! those causes.
//!
//! Hostile settings make it lie the ways a broken or malicious device
//! could: a head register with any value, an interrupt cause register of
//! all ones, a reset that never finishes, any write-back in any descriptor.

use std::cell::Cell;

use e1000_regs::*;

use super::Dma;

/// Physical address map: (virtual base, length, physical base) per
/// "dataport". The driver translates with it; the device reads and writes
/// memory through it.
#[derive(Clone, Default)]
pub struct Map(pub Vec<(u64, u64, u64)>);

impl Map {
    /// Adds a region at a made-up physical address (distinct per region,
    /// far from its virtual one, so that mixing the two up shows).
    pub fn add(&mut self, va: u64, len: u64) {
        let pa = 0x10_0000_0000 * (self.0.len() as u64 + 1);
        self.0.push((va, len, pa));
    }

    /// Where the device finds `len` bytes at `pa`, if they are mapped.
    pub fn virt(&self, pa: u64, len: usize) -> Option<*mut u8> {
        self.0
            .iter()
            .find(|&&(_, l, p)| pa >= p && pa - p + len as u64 <= l)
            .map(|&(v, _, p)| (v + (pa - p)) as *mut u8)
    }
}

impl Dma for Map {
    fn physical(&self, vaddr: u64) -> Option<u64> {
        self.0.iter().find(|&&(v, l, _)| vaddr >= v && vaddr - v < l).map(|&(v, _, p)| p + (vaddr - v))
    }
}

/// A frame the device sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// Its bytes, gathered from every data descriptor.
    pub bytes: Vec<u8>,
    /// The checksum context applied (TUCSS, TUCSO), if the data
    /// descriptors asked for it.
    pub checksum: Option<(u8, u8)>,
    /// Data descriptors it took (for a segment: the whole TSO frame's).
    pub descriptors: usize,
    /// For a segment the device cut from a TSO frame: its index.
    pub segment: Option<usize>,
}

/// The TSO context last given (the fields of [`TsoContext`]).
#[derive(Debug, Clone, Copy)]
struct Tso {
    ipcss: usize,
    ipcso: usize,
    ipcse: usize,
    tucss: usize,
    tucso: usize,
    hdr_len: usize,
    mss: usize,
    paylen: usize,
}

/// Internet checksum of `data` (big-endian words, a last odd byte padded).
pub fn internet_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The device.
pub struct Device {
    model: Model,
    regs: Vec<Cell<u32>>,
    map: Map,
    /// Every register write, in order.
    pub writes: Vec<(usize, u32)>,
    /// Frames sent, in order.
    pub sent: Vec<Sent>,
    /// Descriptors or buffers the driver pointed outside the map.
    pub dma_faults: usize,
    /// Frames that arrived with no descriptor free (RXO).
    pub overruns: usize,
    /// Hostile: reading this register returns this value.
    pub lie: Option<(usize, u32)>,
    /// Hostile: CTRL.RST never clears.
    pub stuck_reset: bool,
    /// Every TX descriptor processed, as read, in order.
    pub tx_descriptors: Vec<[u64; 2]>,
    context: Option<(u8, u8)>,
    tso: Option<Tso>,
    gathering: (Vec<u8>, usize),
}

pub const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

impl Device {
    /// A device after power-on, link up, with [`MAC`] in receive address 0.
    pub fn new(map: Map) -> Device {
        Device::of(Model::I82540EM, map)
    }

    /// An 82574L after power-on, as [`Device::new`].
    pub fn new_82574(map: Map) -> Device {
        Device::of(Model::I82574L, map)
    }

    fn of(model: Model, map: Map) -> Device {
        let dev = Device {
            model,
            regs: (0..0x20000 / 4).map(|_| Cell::new(0)).collect(),
            map,
            writes: Vec::new(),
            sent: Vec::new(),
            dma_faults: 0,
            overruns: 0,
            lie: None,
            stuck_reset: false,
            tx_descriptors: Vec::new(),
            context: None,
            tso: None,
            gathering: (Vec::new(), 0),
        };
        dev.set(STATUS, STATUS_LU);
        dev.set(RAL0, u32::from_le_bytes([MAC[0], MAC[1], MAC[2], MAC[3]]));
        dev.set(RAH0, u32::from_le_bytes([MAC[4], MAC[5], 0, 0]) | RAH_AV);
        dev
    }

    /// The physical address map the device uses.
    pub fn map(&self) -> &Map {
        &self.map
    }

    fn get(&self, reg: usize) -> u32 {
        self.regs[reg / 4].get()
    }

    /// Sets a register as the device would (not a driver write).
    pub fn set(&self, reg: usize, v: u32) {
        self.regs[reg / 4].set(v)
    }

    /// Raises interrupt causes (as the device does on its own).
    pub fn raise(&self, causes: u32) {
        self.set(ICR, self.get(ICR) | causes);
    }

    /// Writes to `reg` so far.
    pub fn writes_to(&self, reg: usize) -> Vec<u32> {
        self.writes.iter().filter(|w| w.0 == reg).map(|w| w.1).collect()
    }

    fn ring_len(&self, len_reg: usize) -> usize {
        self.get(len_reg) as usize / DESC_BYTES
    }

    fn desc(&self, base_lo: usize, i: usize) -> Option<*mut u64> {
        let base = u64::from(self.get(base_lo + 4)) << 32 | u64::from(self.get(base_lo));
        self.map.virt(base + (i * DESC_BYTES) as u64, DESC_BYTES).map(|p| p.cast())
    }

    fn read_desc(&mut self, base_lo: usize, i: usize) -> Option<[u64; 2]> {
        match self.desc(base_lo, i) {
            // SAFETY: inside a mapped region of the test (checked by `virt`).
            Some(p) => Some(unsafe { [p.read_volatile(), p.add(1).read_volatile()] }),
            None => {
                self.dma_faults += 1;
                None
            }
        }
    }

    fn write_w1(&mut self, base_lo: usize, i: usize, w1: u64) {
        match self.desc(base_lo, i) {
            // SAFETY: as in `read_desc`.
            Some(p) => unsafe { p.add(1).write_volatile(w1) },
            None => self.dma_faults += 1,
        }
    }

    /// Descriptors the driver has given the device for receiving.
    pub fn rx_free(&self) -> usize {
        let n = self.ring_len(RDLEN);
        (self.get(RDT) as usize + n - self.get(RDH) as usize) % n.max(1)
    }

    /// A frame arrives: written into as many descriptors' buffers as it
    /// needs ([`RX_BUFFER_BYTES`] each), the last with EOP. False (an
    /// overrun, RXO) if the driver gave too few descriptors.
    pub fn receive(&mut self, frame: &[u8]) -> bool {
        let parts: Vec<&[u8]> = frame.chunks(RX_BUFFER_BYTES).collect();
        if self.rx_free() < parts.len() {
            self.overruns += 1;
            self.raise(INT_RXO);
            return false;
        }
        for (k, part) in parts.iter().enumerate() {
            let last = k + 1 == parts.len();
            self.receive_raw(part, if last { DD | RXD_EOP } else { DD }, 0);
        }
        true
    }

    /// One descriptor's worth: `bytes` into the buffer at RDH, then the
    /// write-back `len(bytes) | status | errors`, RDH advances.
    pub fn receive_raw(&mut self, bytes: &[u8], status: u8, errors: u8) {
        self.receive_lying(bytes, bytes.len() as u16, status, errors)
    }

    /// As [`receive_raw`](Self::receive_raw), with any length in the
    /// write-back.
    pub fn receive_lying(&mut self, bytes: &[u8], len: u16, status: u8, errors: u8) {
        let n = self.ring_len(RDLEN);
        let h = self.get(RDH) as usize;
        assert!(h != self.get(RDT) as usize, "the test receives into a ring the driver left empty");
        if let Some([addr, _]) = self.read_desc(RDBAL, h) {
            match self.map.virt(addr, RX_BUFFER_BYTES) {
                // SAFETY: a whole RX buffer inside a mapped region.
                Some(p) => unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) },
                None => self.dma_faults += 1,
            }
            let w1 = u64::from(len) | u64::from(status) << 32 | u64::from(errors) << 40;
            self.write_w1(RDBAL, h, w1);
        }
        self.set(RDH, ((h + 1) % n) as u32);
        self.raise(INT_RXT0);
    }

    /// Hostile: writes `w1` into RX descriptor `i`, whoever owns it.
    pub fn poke_rx(&mut self, i: usize, w1: u64) {
        self.write_w1(RDBAL, i, w1);
    }

    /// Processes up to `max` posted TX descriptors (from TDH towards TDT)
    /// while the transmitter is enabled (TCTL.EN); returns how many.
    pub fn transmit(&mut self, max: usize) -> usize {
        let n = self.ring_len(TDLEN);
        let mut done = 0;
        if self.get(TCTL) & TCTL_EN == 0 {
            // The transmitter is off: no descriptor is fetched.
            return 0;
        }
        while done < max && self.get(TDH) != self.get(TDT) {
            let h = self.get(TDH) as usize;
            let Some([w0, w1]) = self.read_desc(TDBAL, h) else { break };
            self.tx_descriptors.push([w0, w1]);
            let cmd = (w1 >> 24) as u32 & 0xff;
            let ext = cmd & TXD_CMD_DEXT != 0;
            if ext && (w1 as u32 & (0xf << 20)) == TXD_DTYP_C {
                // One context (the 82540EM's): either kind replaces it.
                if cmd & TXD_CMD_TSE != 0 {
                    let b = |at: u32| (w0 >> at) as u8 as usize;
                    self.tso = Some(Tso {
                        ipcss: b(0),
                        ipcso: b(8),
                        ipcse: (w0 >> 16) as u16 as usize,
                        tucss: b(32),
                        tucso: b(40),
                        hdr_len: (w1 >> 40) as u8 as usize,
                        mss: (w1 >> 48) as u16 as usize,
                        paylen: (w1 & 0xf_ffff) as usize,
                    });
                    self.context = None;
                } else {
                    self.context = Some(((w0 >> 32) as u8, (w0 >> 40) as u8));
                    self.tso = None;
                }
            } else {
                let len = (w1 & 0xffff) as usize;
                match self.map.virt(w0, len) {
                    // SAFETY: inside a mapped region.
                    Some(p) => self.gathering.0.extend_from_slice(unsafe { core::slice::from_raw_parts(p, len) }),
                    None => self.dma_faults += 1,
                }
                self.gathering.1 += 1;
                if cmd & TXD_CMD_EOP != 0 {
                    let popts = (w1 >> 40) as u32;
                    let sum = ext && popts & TXD_POPTS_TXSM != 0;
                    let (bytes, descriptors) = core::mem::take(&mut self.gathering);
                    if ext && cmd & TXD_CMD_TSE != 0 {
                        let t = self.tso.expect("a TSO data descriptor without a TSO context");
                        assert_eq!(popts, TXD_POPTS_IXSM | TXD_POPTS_TXSM, "TSO needs both checksums");
                        self.segment(&t, &bytes, descriptors);
                    } else {
                        let checksum = if sum { self.context } else { None };
                        self.sent.push(Sent { bytes, checksum, descriptors, segment: None });
                    }
                }
                if cmd & TXD_CMD_RS != 0 {
                    self.write_w1(TDBAL, h, w1 | u64::from(DD) << 32);
                }
            }
            self.set(TDH, ((h + 1) % n) as u32);
            done += 1;
        }
        if done > 0 {
            self.raise(INT_TXDW);
        }
        done
    }

    /// Cuts a TSO frame into segments as the manual says (§3.5): the
    /// headers in front of every `mss` bytes of payload; per segment the
    /// IPv4 total length, identification + index, TCP sequence number +
    /// bytes before it, PSH and FIN cleared but in the last; the TCP
    /// checksum over the segment from the field's seed plus the segment's
    /// TCP length, the IPv4 header checksum over `ipcss..=ipcse` from the
    /// field as given.
    fn segment(&mut self, t: &Tso, frame: &[u8], descriptors: usize) {
        assert_eq!(frame.len(), t.hdr_len + t.paylen, "PAYLEN is the frame's payload");
        let (hdr, payload) = frame.split_at(t.hdr_len);
        let chunks: Vec<&[u8]> = payload.chunks(t.mss).collect();
        for (k, chunk) in chunks.iter().enumerate() {
            let mut f = [hdr, chunk].concat();
            let be16 = |f: &[u8], at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
            let put16 = |f: &mut [u8], at: usize, v: u16| f[at..at + 2].copy_from_slice(&v.to_be_bytes());
            let ip_len = (f.len() - t.ipcss) as u16;
            put16(&mut f, t.ipcss + 2, ip_len);
            let id = be16(&f, t.ipcss + 4).wrapping_add(k as u16);
            put16(&mut f, t.ipcss + 4, id);
            let seq_at = t.tucss + 4;
            let seq = u32::from_be_bytes(f[seq_at..seq_at + 4].try_into().unwrap()).wrapping_add((k * t.mss) as u32);
            f[seq_at..seq_at + 4].copy_from_slice(&seq.to_be_bytes());
            if k + 1 < chunks.len() {
                f[t.tucss + 13] &= !0x09;
            }
            let tcp_len = (f.len() - t.tucss) as u32;
            let seed = u32::from(be16(&f, t.tucso)) + tcp_len;
            put16(&mut f, t.tucso, ((seed & 0xffff) + (seed >> 16)) as u16);
            let tcp_sum = !internet_sum(&f[t.tucss..]);
            put16(&mut f, t.tucso, tcp_sum);
            let ip_sum = !internet_sum(&f[t.ipcss..=t.ipcse]);
            put16(&mut f, t.ipcso, ip_sum);
            self.sent.push(Sent {
                bytes: f,
                checksum: Some((t.tucss as u8, t.tucso as u8)),
                descriptors,
                segment: Some(k),
            });
        }
    }

    /// TX descriptors posted and not yet processed.
    pub fn tx_queued(&self) -> usize {
        let n = self.ring_len(TDLEN);
        (self.get(TDT) as usize + n - self.get(TDH) as usize) % n.max(1)
    }
}

impl RegisterFile for Device {
    fn read(&self, offset: usize) -> u32 {
        if let Some((reg, v)) = self.lie {
            if reg == offset {
                return v;
            }
        }
        let mut v = self.get(offset);
        if offset == ICR && self.model == Model::I82540EM {
            self.set(ICR, 0);
        } else if offset == ICR {
            let asserted = v & self.get(IMS) != 0;
            let iame = self.get(CTRL_EXT) & CTRL_EXT_IAME != 0;
            if asserted {
                v |= INT_ASSERTED;
            }
            if asserted && iame {
                self.set(IMS, self.get(IMS) & !self.get(IAM));
            }
            if self.get(IMS) == 0 || asserted && iame {
                self.set(ICR, 0);
            }
        }
        v
    }

    fn write(&mut self, offset: usize, value: u32) {
        self.writes.push((offset, value));
        match offset {
            CTRL if !self.stuck_reset => self.set(CTRL, value & !CTRL_RST),
            IMS => self.set(IMS, self.get(IMS) | value),
            IMC => self.set(IMS, self.get(IMS) & !value),
            ICS => self.raise(value),
            ICR if self.model == Model::I82574L => self.set(ICR, self.get(ICR) & !value),
            _ => self.set(offset, value),
        }
    }
}
