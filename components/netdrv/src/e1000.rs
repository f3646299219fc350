//! The e1000 rings, over any [`RegisterFile`] and [`Dma`], for both models
//! [`Model`] names: the 82540EM (QEMU `e1000`) and the 82574L (QEMU
//! `e1000e`), which keeps the 82540EM's legacy descriptors, rings,
//! checksum and TSO context descriptors and ITR. What differs is set up
//! per model ([`Setup`]): the interrupt causes the 82574 may report (its
//! ICR also carries INT_ASSERTED and the MSI-X queue causes), and its
//! interrupt acknowledge auto-mask, switched off (CTRL_EXT.IAME, IAM), so
//! that the mask stays as the driver set it; without it a read of ICR
//! need not clear it (QEMU 7.2's e1000e clears on read only with IMS 0 or
//! the auto-mask on), so the causes read are cleared by writing them back
//! (write 1 to clear, which every 82574 honours).
//!
//! * **Receive:** [`RING`] descriptors, each pointing at a buffer of the
//!   driver's IO-Lite pool. A completed buffer is sealed at the frame's
//!   length and handed to the caller as a one-slice aggregate, by reference
//!   ([`E1000::rx_drain`]); [`E1000::rx_refill`] gives the device a fresh
//!   buffer for every free descriptor and hands them over with one RDT
//!   write per batch. Descriptors in `[rx_next, rx_tail)` are the
//!   device's; nothing outside that range is ever read as a frame, and
//!   one slot always stays empty (RDT never reaches RDH).
//! * **Transmit:** an aggregate (a header slice and payload slices in any
//!   mapped pool) becomes one data descriptor per slice at the slice's
//!   physical address, so payload is never copied ([`E1000::tx_post`]). A
//!   TCP checksum request becomes a context descriptor, written only when
//!   it changes. The frame's holds are kept until the device reports its
//!   last descriptor done ([`E1000::tx_reap`]); a frame that does not fit
//!   the ring waits, whole, for the next pass.
//! * **TCP segmentation offload** (where enabled, [`E1000::set_tso`]): a
//!   frame of up to 64 KiB asking for it ([`TxRequest::Tso`]) gets a TSO
//!   context descriptor of its own (its payload length is in it), then
//!   one TSO data descriptor per slice, as above; the device sends it as
//!   segments of at most the MSS, with both checksums. The request is
//!   checked against the frame's length and headers first.
//! * **What the device says is checked:** a write-back with errors, without
//!   end of packet (the rest of that frame is dropped too), or with a
//!   length outside 14..=2048 is dropped and its buffer reused; an interrupt
//!   cause register with bits set the model does not define did not come
//!   from the device
//!   ([`Interrupt::NotTheDevice`]); after reset, the head registers must
//!   read back as programmed ([`InitError::Head`]), and the reset must
//!   finish within a bound ([`InitError::ResetStuck`]).

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

use e1000_regs::*;
use iolite::{Aggregate, BufMut, Domain, PoolId};

#[cfg(test)]
pub(crate) mod fake;
mod takeover;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_82574;
mod tx;

pub use takeover::{quiesce_tx, running, salvage_rx, take_over, PoolWindow, Salvaged, TakenOver, TX_DRAIN_POLLS};
use tx::InFlight;

/// Descriptors per ring (16 bytes each: two pages per ring). QEMU's e1000
/// drops frames that arrive while the RX ring is full, and slirp dumps
/// whole windows at once: a deep ring matters more than anything else here.
pub const RING: usize = 512;
/// Fewest RX descriptors [`E1000::rx_refill`] hands to the device at once
/// while it owns at least half the ring.
pub const RX_REFILL_BATCH: usize = 32;
/// RX buffer size (RCTL.BSIZE = 2048).
pub const RX_BUF: usize = RX_BUFFER_BYTES;
/// Largest frame transmitted (no jumbo frames; the NIC adds the CRC), but
/// for frames the device cuts into segments ([`TxRequest::Tso`]), each of
/// which is at most this long.
pub const MAX_FRAME: usize = nic_api::MAX_WIRE_FRAME;
/// Smallest frame accepted either way: an Ethernet header.
pub const MIN_FRAME: usize = 14;
/// How many times [`reset`] looks at CTRL.RST before giving up.
pub const RESET_POLLS: u32 = 100_000;

/// Virtual to physical addresses, for what the device reads and writes by
/// DMA (every dataport is physically contiguous).
pub trait Dma {
    /// The physical address of the byte at `vaddr`, if it is in a dataport.
    fn physical(&self, vaddr: u64) -> Option<u64>;
}

/// The driver's counters, declared once in the protocol crate (the
/// `drv_stats` page its readers know). There is no transmit copy counter:
/// the driver never copies a frame it sends; `BytesCopied` is the domain's
/// count of any copy at all. The component counts `Irqs`, `Wakeups`, `BytesCopied`
/// and `BusyCycles`; the rest are counted here.
pub use nic_api::DrvCounter as Counter;
use nic_api::Values;

/// How [`E1000::new`] programs the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// Which device it is (by PCI ID, [`Model::from_ids`]).
    pub model: Model,
    /// The interrupt throttling register (ITR, 256 ns units; 0: off).
    pub itr: u32,
    /// Unmask the causes the driver handles (otherwise the caller polls).
    pub interrupts: bool,
}

/// Why the device could not be brought up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitError {
    /// CTRL.RST still set after [`RESET_POLLS`] looks.
    ResetStuck,
    /// Receive address 0 is not valid: no MAC address.
    NoMac,
    /// A head register does not read back the 0 just written (the value):
    /// not the device the driver expects, or a broken one.
    Head(&'static str, u32),
    /// The ring pages could not be allocated from the pool.
    Pool(iolite::Error),
    /// A ring page has no physical address (the pool is not a dataport).
    NotInDataport,
}

impl core::fmt::Display for InitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InitError::ResetStuck => {
                write!(f, "CTRL.RST still set after {RESET_POLLS} looks: the reset never finished")
            }
            InitError::NoMac => f.write_str("receive address 0 not valid: no MAC address"),
            InitError::Head(name, v) => write!(f, "{name} reads {v:#x} right after another value was written"),
            InitError::Pool(e) => write!(f, "no pages for the descriptor rings: {e:?}"),
            InitError::NotInDataport => f.write_str("the descriptor rings have no physical address"),
        }
    }
}

/// A transmit request: the frame and what the device must do to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxRequest {
    /// Send as is.
    Plain,
    /// Compute the ones'-complement sum from byte `start` to the end of the
    /// frame and store its complement at byte `offset` (TUCSS/TUCSO).
    TcpChecksum {
        /// First byte summed.
        start: u16,
        /// Where the checksum goes.
        offset: u16,
    },
    /// Cut the frame (up to [`nic_api::TSO_MAX_FRAME`] bytes) into TCP
    /// segments, both checksums computed for each (TSE, IXSM, TXSM).
    Tso(nic_api::Tso),
}

/// What [`E1000::tx_post`]'s source has next.
// Not boxed: one is moved per frame, and boxing would allocate per frame.
#[allow(clippy::large_enum_variant)]
pub enum Pull<'d> {
    /// A frame to send.
    Frame(Aggregate<'d>, TxRequest),
    /// A message the source refused (counted as rejected); ask again.
    Refused,
    /// A message the source refused, and nothing more now (the channel
    /// broke): counted as rejected.
    Broken,
    /// Nothing now.
    Empty,
}

/// One reading of the interrupt cause register ([`E1000::interrupt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// The causes (reading cleared them); `link`: the link state, if it
    /// changed.
    Causes {
        /// ICR as read.
        icr: u32,
        /// The new link state after a link status change.
        link: Option<bool>,
    },
    /// Bits set the model does not define (all ones: a device that no
    /// longer answers): the causes are not believed.
    NotTheDevice(u32),
}

/// Resets the device, leaves its interrupts masked, its receiver and
/// transmitter disabled and its link set up, clears the multicast table;
/// returns the MAC address. `yield_now` runs between looks at CTRL.RST.
pub fn reset<R: RegisterFile>(regs: &mut R, mut yield_now: impl FnMut()) -> Result<[u8; 6], InitError> {
    regs.write(IMC, !0);
    regs.write(CTRL, regs.read(CTRL) | CTRL_RST);
    let mut done = false;
    for _ in 0..RESET_POLLS {
        if regs.read(CTRL) & CTRL_RST == 0 {
            done = true;
            break;
        }
        yield_now();
    }
    if !done {
        return Err(InitError::ResetStuck);
    }
    regs.write(IMC, !0);
    let _ = regs.read(ICR);
    // A reset clears RCTL and TCTL; QEMU's e1000 ignores CTRL.RST but for
    // clearing the bit, so a device an earlier incarnation left running
    // would still receive into its ring while the rings move. Written
    // only when set: every RCTL write holds QEMU's received frames for a
    // second (see `take_over`).
    for reg in [RCTL, TCTL] {
        if regs.read(reg) != 0 {
            regs.write(reg, 0);
        }
    }
    regs.write(CTRL, (regs.read(CTRL) | CTRL_SLU | CTRL_ASDE) & !CTRL_RST);
    for i in 0..128 {
        regs.write(MTA + 4 * i, 0);
    }
    mac(regs).ok_or(InitError::NoMac)
}

/// The receive control the driver programs: receiver on, broadcasts
/// accepted, 2 KiB buffers, the CRC stripped.
pub const RCTL_OURS: u32 = RCTL_EN | RCTL_BAM | RCTL_SECRC;

/// A descriptor ring: [`RING`] descriptors in pages of the driver's pool,
/// kept for good.
struct Ring {
    base: *mut [u64; 2],
    phys: u64,
}

impl Ring {
    fn new(d: &Domain, pool: PoolId, dma: &impl Dma) -> Result<Ring, InitError> {
        let mut b = d.alloc(pool, RING * DESC_BYTES).map_err(InitError::Pool)?;
        let p = b.writable().as_mut_ptr();
        // SAFETY: the pages are ours (an unsealed buffer nobody else can
        // name, page-aligned); zero them before the device sees them.
        unsafe { core::ptr::write_bytes(p, 0, RING * DESC_BYTES) };
        let phys = dma.physical(p as u64).ok_or(InitError::NotInDataport)?;
        // Never released: the device owns the ring for the driver's life.
        core::mem::forget(b);
        Ok(Ring { base: p.cast(), phys })
    }

    fn read(&self, i: usize) -> [u64; 2] {
        // SAFETY: i % RING is inside the ring's pages; the device writes
        // descriptors back, so only volatile reads.
        unsafe {
            let d = self.base.add(i % RING);
            [core::ptr::read_volatile(&(*d)[0]), core::ptr::read_volatile(&(*d)[1])]
        }
    }

    fn write(&self, i: usize, words: [u64; 2]) {
        // SAFETY: as in `read`; the caller owns descriptor i (it is not in
        // the device's share of the ring).
        unsafe {
            let d = self.base.add(i % RING);
            core::ptr::write_volatile(&mut (*d)[0], words[0]);
            core::ptr::write_volatile(&mut (*d)[1], words[1]);
        }
    }
}

/// The driver's view of the device.
pub struct E1000<'d, R: RegisterFile, M: Dma> {
    model: Model,
    regs: R,
    dma: M,
    d: &'d Domain,
    rx_pool: PoolId,
    tx_ring: Ring,
    rx_ring: Ring,
    rx_bufs: Vec<Option<BufMut<'d>>>,
    /// Next RX descriptor to look at.
    rx_next: usize,
    /// The RDT value: descriptors [rx_next, rx_tail) belong to the device.
    rx_tail: usize,
    /// Descriptors [rx_tail, rx_prepared) have a buffer and a cleared
    /// status but are not the device's yet (`rx_refill` hands them over
    /// in batches).
    rx_prepared: usize,
    /// Inside a frame that spans descriptors: dropped up to its end.
    rx_discarding: bool,
    /// Next free TX descriptor (the TDT value once written).
    tx_tail: usize,
    /// TX descriptors the device has and has not reported done.
    tx_used: usize,
    tx_inflight: VecDeque<InFlight<'d>>,
    /// A frame that did not fit the ring yet.
    tx_pending: Option<(Aggregate<'d>, TxRequest)>,
    /// The checksum context last given to the device (start, offset).
    tx_context: Option<(u8, u8)>,
    /// TSO requests are carried out ([`E1000::set_tso`]).
    tso: bool,
    counters: Values<Counter>,
}

impl<'d, R: RegisterFile, M: Dma> E1000<'d, R, M> {
    /// Sets up both rings (pages of `rx_pool`, owned by `d`) on a device
    /// [`reset`] left quiet, fills the RX ring, and enables receive and
    /// transmit as `setup` says: interrupt throttling, and the interrupt
    /// causes the driver handles unmasked or not (the caller polls).
    pub fn new(regs: R, dma: M, d: &'d Domain, rx_pool: PoolId, setup: Setup) -> Result<Self, InitError> {
        Self::set_up(regs, dma, d, rx_pool, setup, None)
    }

    /// As [`E1000::new`], on a device [`take_over`] took over: the rings
    /// start at the tails it found (head = tail throughout, so the device
    /// never owns a descriptor of the new ring before it is filled) and
    /// RCTL, already as we want it, is not written again.
    pub fn resume(regs: R, dma: M, d: &'d Domain, rx_pool: PoolId, setup: Setup) -> Result<Self, InitError> {
        let tails = (regs.read(RDT) as usize % RING, regs.read(TDT) as usize % RING);
        Self::set_up(regs, dma, d, rx_pool, setup, Some(tails))
    }

    fn set_up(
        regs: R,
        dma: M,
        d: &'d Domain,
        rx_pool: PoolId,
        setup: Setup,
        tails: Option<(usize, usize)>,
    ) -> Result<Self, InitError> {
        let taken_over = tails.is_some();
        let (rx_start, tx_start) = tails.unwrap_or((0, 0));
        let tx_ring = Ring::new(d, rx_pool, &dma)?;
        let rx_ring = Ring::new(d, rx_pool, &dma)?;
        let mut nic = E1000 {
            model: setup.model,
            regs,
            dma,
            d,
            rx_pool,
            tx_ring,
            rx_ring,
            rx_bufs: (0..RING).map(|_| None).collect(),
            rx_next: rx_start,
            rx_tail: rx_start,
            rx_prepared: rx_start,
            rx_discarding: false,
            tx_tail: tx_start,
            tx_used: 0,
            tx_inflight: VecDeque::new(),
            tx_pending: None,
            tx_context: None,
            tso: false,
            counters: Values::new(),
        };
        let (rx_pa, tx_pa) = (nic.rx_ring.phys, nic.tx_ring.phys);
        let r = &mut nic.regs;
        r.write(RDBAL, rx_pa as u32);
        r.write(RDBAH, (rx_pa >> 32) as u32);
        r.write(RDLEN, (RING * DESC_BYTES) as u32);
        r.write(RDH, rx_start as u32);
        r.write(RDT, rx_start as u32);
        r.write(RDTR, 0);
        r.write(RADV, 0);
        r.write(TDBAL, tx_pa as u32);
        r.write(TDBAH, (tx_pa >> 32) as u32);
        r.write(TDLEN, (RING * DESC_BYTES) as u32);
        r.write(TDH, tx_start as u32);
        r.write(TDT, tx_start as u32);
        r.write(TIDV, 0);
        r.write(TADV, 0);
        // The driver tracks the rings by descriptor status, never by the
        // heads; but a device whose heads do not take the value just
        // written is not one whose write-backs can be believed either.
        for (name, reg, want) in [("RDH", RDH, rx_start), ("TDH", TDH, tx_start)] {
            match r.read(reg) as usize {
                v if v == want => {}
                v => return Err(InitError::Head(name, v as u32)),
            }
        }
        if setup.model == Model::I82574L {
            // No auto-mask: a read of an asserted ICR would otherwise also
            // mask the causes in IAM, and nothing here unmasks them again.
            // EIAC matters only with MSI-X, which is not enabled.
            r.write(CTRL_EXT, r.read(CTRL_EXT) & !CTRL_EXT_IAME);
            r.write(IAM, 0);
        }
        r.write(TIPG, TIPG_DEFAULT);
        r.write(TCTL, TCTL_EN | TCTL_PSP | TCTL_CT | TCTL_COLD);
        r.write(ITR, setup.itr);
        nic.rx_refill();
        if !taken_over {
            nic.regs.write(RCTL, RCTL_OURS);
        }
        if setup.interrupts {
            nic.regs.write(IMS, INT_RXT0 | INT_RXO | INT_RXDMT0 | INT_LSC | INT_TXDW);
        }
        nic.link_up();
        Ok(nic)
    }

    /// Whether frames asking for TCP segmentation ([`TxRequest::Tso`]) are
    /// carried out (`on`) or rejected (the default: the driver's owner
    /// offers the offload only where its assembly allows it).
    pub fn set_tso(&mut self, on: bool) {
        self.tso = on;
    }

    /// The counters.
    pub fn counters(&self) -> &Values<Counter> {
        &self.counters
    }

    /// Adds `n` to counter `c`.
    pub fn count(&mut self, c: Counter, n: u64) {
        self.counters[c] += n;
    }

    /// Sets counter `c`.
    pub fn set_counter(&mut self, c: Counter, value: u64) {
        self.counters[c] = value;
    }

    /// The model driven.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The register file (tests reach the simulated device through it).
    pub fn regs(&mut self) -> &mut R {
        &mut self.regs
    }

    /// Reads the link state (STATUS.LU) into [`Counter::LinkUp`].
    pub fn link_up(&mut self) -> bool {
        let up = self.regs.read(STATUS) & STATUS_LU != 0;
        self.counters[Counter::LinkUp] = up as u64;
        up
    }

    /// Reads and clears the interrupt causes; on a link status change
    /// also the new link state. Clearing ICR deasserts a level interrupt:
    /// on the 82540EM the read does it, on the 82574 the write back of the
    /// causes read (only those: one arriving in between stays pending).
    pub fn interrupt(&mut self) -> Interrupt {
        let icr = self.regs.read(ICR);
        if icr & !self.model.causes_defined() != 0 {
            return Interrupt::NotTheDevice(icr);
        }
        let causes = icr & !INT_ASSERTED;
        if self.model == Model::I82574L && causes != 0 {
            self.regs.write(ICR, causes);
        }
        let link = (icr & INT_LSC != 0).then(|| self.link_up());
        Interrupt::Causes { icr, link }
    }

    /// Whether the device has completed the next RX descriptor (more to
    /// drain). False while the device owns no descriptor: the status there
    /// is an old one.
    pub fn rx_ready(&self) -> bool {
        self.rx_next != self.rx_tail && rx_writeback(self.rx_ring.read(self.rx_next)[1]).0 & DD != 0
    }

    /// Hands at most `max` completed frames to `deliver`, each a sealed
    /// one-slice aggregate of the RX pool; `deliver` returns whether it
    /// took the frame (a refused one counts as dropped). Returns how many
    /// were taken.
    pub fn rx_drain(&mut self, max: usize, mut deliver: impl FnMut(Aggregate<'d>) -> bool) -> usize {
        let mut n = 0;
        // At most one lap per call, whatever the descriptors say.
        for _ in 0..RING {
            if n == max {
                break;
            }
            let i = self.rx_next;
            if i == self.rx_tail {
                break;
            }
            let desc = self.rx_ring.read(i);
            let (status, errors, len) = rx_writeback(desc[1]);
            if status & DD == 0 {
                break;
            }
            fence(Ordering::Acquire);
            // Taken: the status is cleared at once, so that only frames no
            // incarnation took have DD set in the ring (`salvage_rx`).
            self.rx_ring.write(i, [desc[0], 0]);
            self.rx_next = (i + 1) % RING;
            // Every descriptor the device owns has a buffer (rx_refill).
            let Some(mut buf) = self.rx_bufs[i].take() else { continue };
            let len = len as usize;
            let eop = status & RXD_EOP != 0;
            let continuation = core::mem::replace(&mut self.rx_discarding, !eop);
            if !eop || continuation || errors != 0 || !(MIN_FRAME..=RX_BUF).contains(&len) {
                // One count per frame, at its first descriptor.
                if !continuation {
                    self.counters[Counter::RxDropped] += 1;
                }
                self.rx_bufs[i] = Some(buf); // reused as is
                continue;
            }
            let w = buf.writable();
            let arp = w[12] == 0x08 && w[13] == 0x06;
            match buf.seal(len) {
                Ok(agg) => {
                    if deliver(agg) {
                        n += 1;
                        self.counters[Counter::RxFrames] += 1;
                        self.counters[Counter::RxBytes] += len as u64;
                        self.counters[Counter::ArpRx] += arp as u64;
                    } else {
                        self.counters[Counter::RxDropped] += 1;
                    }
                }
                Err((_, b)) => {
                    self.counters[Counter::RxDropped] += 1;
                    self.rx_bufs[i] = Some(b);
                }
            }
        }
        n
    }

    /// Gives every free RX descriptor a buffer, then hands them to the
    /// device with one RDT write: in batches of at least
    /// [`RX_REFILL_BATCH`] while the device still owns half the ring (as
    /// Linux's e1000 driver batches its tail writes), since an RDT write
    /// is an exit to QEMU's e1000, which takes its big lock and re-polls
    /// its backend. Written after every frame (~200 per 1 MiB response:
    /// the peer's ACKs), it cost 10-14% of the host CPU per 1 MiB response
    /// (bench/profile, same run). The buffers are allocated at once either
    /// way: the pool's use does not depend on when the write comes.
    pub fn rx_refill(&mut self) {
        while (self.rx_prepared + 1) % RING != self.rx_next {
            let i = self.rx_prepared;
            if self.rx_bufs[i].is_none() {
                match self.d.alloc(self.rx_pool, RX_BUF) {
                    Ok(b) => self.rx_bufs[i] = Some(b),
                    Err(_) => {
                        self.counters[Counter::RxRingEmpty] += 1;
                        break;
                    }
                }
            }
            let b = self.rx_bufs[i].as_mut().expect("filled above");
            let va = b.writable().as_mut_ptr() as u64;
            let pa = self.dma.physical(va).expect("the RX pool is a dataport");
            // Not the device's (outside [rx_next, rx_tail)); status cleared.
            self.rx_ring.write(i, [pa, 0]);
            self.rx_prepared = (i + 1) % RING;
        }
        let waiting = (self.rx_prepared + RING - self.rx_tail) % RING;
        let owned = (self.rx_tail + RING - self.rx_next) % RING;
        if waiting > 0 && (waiting >= RX_REFILL_BATCH || owned < RING / 2) {
            fence(Ordering::Release);
            self.rx_tail = self.rx_prepared;
            self.regs.write(RDT, self.rx_tail as u32);
            self.counters[Counter::RxTailWrites] += 1;
            self.counters[Counter::Notifies] += 1;
        }
    }
}
