//! A restart of the driver: taking over the device an earlier
//! incarnation left running ([`running`], [`take_over`], [`quiesce_tx`])
//! instead of resetting it, and copying out the frames its receive ring
//! holds that nobody took ([`salvage_rx`]).

use e1000_regs::*;

use super::{InitError, MIN_FRAME, RCTL_OURS, RING, RX_BUF};

/// Whether an earlier incarnation of this driver left the device running:
/// its receiver enabled as [`E1000::new`](super::E1000::new) enables it, both rings of
/// [`RING`] descriptors. Then [`take_over`] and [`E1000::resume`](super::E1000::resume) may
/// replace [`reset`](super::reset) and [`E1000::new`](super::E1000::new).
pub fn running<R: RegisterFile>(regs: &R) -> bool {
    let len = (RING * DESC_BYTES) as u32;
    regs.read(RCTL) == RCTL_OURS && regs.read(RDLEN) == len && regs.read(TDLEN) == len
}

/// How often [`quiesce_tx`] reads TDH while the device sends what the dead
/// incarnation posted, before it stops the transmitter anyway (an MMIO read
/// takes about a microsecond on hardware: a few ms in all; QEMU's e1000
/// sends inside the TDT write, so there it is done at the first read).
pub const TX_DRAIN_POLLS: usize = 4096;

/// What [`take_over`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakenOver {
    /// The MAC address.
    pub mac: [u8; 6],
    /// Transmit descriptors the dead incarnation had posted that the
    /// device had not sent when the transmitter was stopped: never sent.
    pub tx_abandoned: usize,
}

/// Takes over a device an earlier incarnation left [`running`], without a
/// reset and without writing RCTL; returns the MAC address. Interrupts
/// are masked and their causes cleared; the transmitter is quiesced
/// ([`quiesce_tx`]: the device reads no transmit descriptor of the dead
/// incarnation, nor the frames they name, from here on); the receive ring
/// is emptied (RDH := RDT: the device owns no descriptor from here on, and
/// the dead incarnation's buffers, quarantined in our pool, get nothing
/// more; what they hold untaken is for [`salvage_rx`]). [`E1000::resume`](super::E1000::resume)
/// then moves both rings to fresh pages, starting at the tails found
/// here, so head and tail stay equal until the new receive ring is full,
/// and enables the transmitter again.
///
/// Why not a reset: the receiver's enable (RCTL) would have to be written
/// again, and QEMU's e1000 then holds every received frame for one second
/// (`set_rx_control` arms its `flush_queue_timer`; RDT writes do not
/// release them until it fires). A frame arriving while the receive ring
/// is empty waits in QEMU's queue instead (`e1000_can_receive` is false)
/// and is delivered at the RDT write that fills the new ring. A real
/// 82540EM is stricter: its manual has the ring registers written only
/// while the receiver is disabled, and it may have prefetched
/// descriptors, so there a restart must clear RCTL.EN (or reset) first;
/// that costs nothing like QEMU's second there.
pub fn take_over<R: RegisterFile>(regs: &mut R) -> Result<TakenOver, InitError> {
    regs.write(IMC, !0);
    let _ = regs.read(ICR);
    let tx_abandoned = quiesce_tx(regs);
    // Only the driver writes the tails, and the dead incarnation no longer
    // does: they are stable, the head moves up to it.
    let rdt = regs.read(RDT) % RING as u32;
    regs.write(RDH, rdt);
    let mac = mac(regs).ok_or(InitError::NoMac)?;
    Ok(TakenOver { mac, tx_abandoned })
}

/// Stops the device reading the dead incarnation's transmit ring: lets it
/// send what was posted (TDH reaching TDT, at most [`TX_DRAIN_POLLS`]
/// reads), then disables the transmitter (TCTL.EN) and empties the ring
/// (TDH := TDT); returns how many posted descriptors were not sent. Only
/// after this may the frames the dead incarnation lent the device be
/// reused: netstack releases them when the new incarnation is attached
/// (it publishes its MAC address after this) and the death is settled.
pub fn quiesce_tx<R: RegisterFile>(regs: &mut R) -> usize {
    let n = RING as u32;
    let tdt = regs.read(TDT) % n;
    let mut polls = 0;
    while regs.read(TDH) % n != tdt && polls < TX_DRAIN_POLLS {
        polls += 1;
        core::hint::spin_loop();
    }
    regs.write(TCTL, regs.read(TCTL) & !TCTL_EN);
    let tdh = regs.read(TDH) % n;
    regs.write(TDH, tdt);
    ((tdt + n - tdh) % n) as usize
}

/// The driver's own pool as the device sees it: where it is mapped and
/// its physical address. [`salvage_rx`] follows the dead incarnation's
/// descriptors only into it.
pub struct PoolWindow {
    base: *const u8,
    len: usize,
    pa: u64,
}

impl PoolWindow {
    /// # Safety
    /// `len` bytes at `base` stay mapped and readable while the window is
    /// used, and `pa` is the physical address of `base` (the region is
    /// physically contiguous).
    pub unsafe fn new(base: *const u8, len: usize, pa: u64) -> Self {
        PoolWindow { base, len, pa }
    }

    /// The offset of `len` bytes at physical address `pa`, if all of them
    /// are inside the window.
    fn offset(&self, pa: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(pa.checked_sub(self.pa)?).ok()?;
        (off.checked_add(len)? <= self.len).then_some(off)
    }

    fn descriptor(&self, pa: u64) -> Option<[u64; 2]> {
        let off = self.offset(pa, DESC_BYTES)?;
        // SAFETY: inside the window (`new`); read once per field, as any
        // memory another party wrote.
        unsafe {
            let p = self.base.add(off).cast::<u64>();
            Some([p.read_unaligned(), p.add(1).read_unaligned()])
        }
    }

    fn bytes(&self, pa: u64, len: usize) -> Option<&[u8]> {
        let off = self.offset(pa, len)?;
        // SAFETY: inside the window (`new`). Only pages of a dead
        // incarnation are read this way (quarantined: nobody writes them).
        Some(unsafe { core::slice::from_raw_parts(self.base.add(off), len) })
    }
}

/// What [`salvage_rx`] found in the dead incarnation's receive ring.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Salvaged {
    /// Complete frames handed on.
    pub frames: usize,
    /// Completed descriptors not believed: errors, a frame over several
    /// descriptors, a bad length, a buffer outside the pool.
    pub dropped: usize,
}

/// After [`take_over`]: hands `frame` every frame the device completed in
/// the dead incarnation's receive ring that no incarnation took, oldest
/// first (the device keeps receiving into the buffers a dead driver had
/// posted until `take_over` empties the ring, and a driver may die between
/// the write-back and its drain).
///
/// Lost, each of them would cost its sender a retransmission timeout
/// (slirp's is a second, Linux's at least 200 ms); with the requests of
/// every client of a busy server in the ring at the fault, the whole
/// service would stall that long.
///
/// What the dead incarnation left is not believed: the ring is read only
/// where RDBA says and only inside `pool` (the driver allocates its rings
/// and buffers there), each frame's buffer must lie wholly inside it, and
/// a write-back is checked as [`E1000::rx_drain`](super::E1000::rx_drain) checks one. Frames have
/// DD set only until taken: the drain clears the status of each descriptor
/// it takes, a refill posts descriptors with it clear. Nothing writes the
/// ring meanwhile: the device owns no descriptor after `take_over`, and
/// the dead incarnation's pages stay quarantined.
pub fn salvage_rx<R: RegisterFile>(regs: &R, pool: &PoolWindow, mut frame: impl FnMut(&[u8])) -> Salvaged {
    let mut found = Salvaged::default();
    if regs.read(RDLEN) as usize != RING * DESC_BYTES {
        return found;
    }
    let ring = u64::from(regs.read(RDBAL)) | u64::from(regs.read(RDBAH)) << 32;
    if pool.offset(ring, RING * DESC_BYTES).is_none() {
        return found;
    }
    // From the tail: the descriptors the dead incarnation took but had not
    // yet given back come first, then those the device completed, in order.
    let start = regs.read(RDT) as usize % RING;
    let mut discarding = false;
    for k in 0..RING {
        let i = (start + k) % RING;
        let Some([addr, writeback]) = pool.descriptor(ring + (i * DESC_BYTES) as u64) else { break };
        let (status, errors, len) = rx_writeback(writeback);
        if status & DD == 0 {
            discarding = false;
            continue;
        }
        let eop = status & RXD_EOP != 0;
        let continuation = core::mem::replace(&mut discarding, !eop);
        let len = len as usize;
        if !eop || continuation || errors != 0 || !(MIN_FRAME..=RX_BUF).contains(&len) {
            found.dropped += usize::from(!continuation);
            continue;
        }
        match pool.bytes(addr, len) {
            Some(b) => {
                found.frames += 1;
                frame(b);
            }
            None => found.dropped += 1,
        }
    }
    found
}
