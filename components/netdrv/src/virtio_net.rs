//! A virtio-net device (virtio 1.0, PCI) over `virtio`'s transport and
//! split queues, with the same zero-copy discipline as the e1000 path.
//!
//! * **Receive:** queue 0 holds one-buffer chains, each a 2 KiB buffer of
//!   the driver's IO-Lite pool; the device writes the 12-byte
//!   `virtio_net_hdr` in front of the frame. A completed buffer is sealed
//!   at the length the device wrote and handed up as a one-slice aggregate
//!   past the header, by reference ([`VirtioNet::rx_drain`]);
//!   [`VirtioNet::rx_refill`] posts a fresh buffer per free descriptor and
//!   publishes them in batches (one avail index write, a notification
//!   only if the device asked for it).
//! * **Transmit:** a frame is a chain: the `virtio_net_hdr` from the
//!   driver's header page in its own descriptor, then one descriptor per
//!   slice at the slice's physical address ([`VirtioNet::tx_post`], in
//!   `tx.rs`). Checksum offload (`VIRTIO_NET_F_CSUM`) and TSO
//!   (`VIRTIO_NET_F_HOST_TSO4`) where the device offers them; every frame
//!   of a pass is published at once, with at most one notification.
//! * **What the device says is checked:** the used ring by `virtio`'s
//!   queue (index, id and length read once each; a broken ring stops the
//!   driver, [`VirtioNet::device_error`]); a received length outside
//!   header + 14..=1514 drops the frame.
//! * **Features refused:** merged receive buffers, guest checksum and
//!   guest TSO (netstack checks every received checksum itself and takes
//!   frames of at most 1514 bytes), the control queue, multiqueue,
//!   indirect descriptors (a frame's chain fits the ring), packed rings,
//!   `ACCESS_PLATFORM` (we give physical addresses, no IOMMU).

use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

use iolite::{Aggregate, BufMut, Domain, PoolId};
use virtio::caps::Layout;
use virtio::queue::{self, Buf, Queue, QueueError, UsedError};
use virtio::transport::{QueueSetup, Transport, TransportError, ISR_CONFIG, ISR_QUEUE};
use virtio::Regs;

use crate::e1000::{Counter, Dma, MAX_FRAME, MIN_FRAME};
use nic_api::Values;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
mod tx;

/// PCI vendor and device ID of a modern (1.0) virtio network device.
pub const PCI_IDS: (u16, u16) = (0x1af4, 0x1041);
/// Most descriptors per queue (the device's size if smaller).
pub const QUEUE_MAX: u16 = 256;
/// The `virtio_net_hdr` of a 1.0 device (with `num_buffers`).
pub const HDR: usize = 12;
/// Receive buffer size: the header and the largest frame fit.
pub const RX_BUF: usize = 2048;
/// Fewest receive buffers published at once while the device holds at
/// least half the queue (as the e1000's RDT writes are batched).
pub const RX_REFILL_BATCH: usize = 32;
/// Feature: the device computes a TCP checksum we ask for.
pub const F_CSUM: u64 = 1 << 0;
/// Feature: the device has a MAC address in its configuration.
pub const F_MAC: u64 = 1 << 5;
/// Feature: the device cuts TCP/IPv4 segments (TSO).
pub const F_HOST_TSO4: u64 = 1 << 11;
/// Feature: the device configuration has a link status.
pub const F_STATUS: u64 = 1 << 16;

const RXQ: u16 = 0;
const TXQ: u16 = 1;

/// Why the device could not be brought up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitError {
    /// Reset, negotiation or queue set-up failed.
    Transport(TransportError),
    /// The MAC address could not be read.
    NoMac,
    /// A queue could not be laid out in its pages.
    Queue(QueueError),
    /// No pages for the queues or the header page.
    Pool(iolite::Error),
    /// A queue page has no physical address (the pool is not a dataport).
    NotInDataport,
}

impl From<TransportError> for InitError {
    fn from(e: TransportError) -> Self {
        InitError::Transport(e)
    }
}

impl core::fmt::Display for InitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InitError::Transport(e) => write!(f, "{e}"),
            InitError::NoMac => f.write_str("no MAC address in the device configuration"),
            InitError::Queue(e) => write!(f, "queue layout: {e:?}"),
            InitError::Pool(e) => write!(f, "no pages for the queues: {e:?}"),
            InitError::NotInDataport => f.write_str("the queues have no physical address"),
        }
    }
}

/// One reading of the ISR ([`VirtioNet::interrupt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isr {
    /// A used ring changed.
    pub queue: bool,
    /// The link state, if the configuration changed.
    pub link: Option<bool>,
}

/// Memory of our pool kept for the driver's life (queues, header page).
fn pages(d: &Domain, pool: PoolId, dma: &impl Dma, len: usize) -> Result<(*mut u8, u64), InitError> {
    let mut b = d.alloc(pool, len).map_err(InitError::Pool)?;
    let p = b.writable().as_mut_ptr();
    let pa = dma.physical(p as u64).ok_or(InitError::NotInDataport)?;
    // Never released: the device owns it for the driver's life.
    core::mem::forget(b);
    Ok((p, pa))
}

fn new_queue(d: &Domain, pool: PoolId, dma: &impl Dma, n: u16, ev: bool) -> Result<Queue, InitError> {
    let (va, pa) = pages(d, pool, dma, queue::bytes(n))?;
    // SAFETY: fresh pages of our pool, kept for good, at `pa`.
    unsafe { Queue::new(va, pa, queue::bytes(n), n, ev) }.map_err(InitError::Queue)
}

/// The driver's view of a virtio-net device.
pub struct VirtioNet<'d, R: Regs, M: Dma> {
    t: Transport<R>,
    dma: M,
    d: &'d Domain,
    rx_pool: PoolId,
    features: u64,
    mac: [u8; 6],
    rxq: Queue,
    rx_setup: QueueSetup,
    txq: Queue,
    tx_setup: QueueSetup,
    /// The buffer of each receive chain in flight, by head.
    rx_bufs: Vec<Option<BufMut<'d>>>,
    /// Receive chains pushed and not yet published.
    rx_unpublished: usize,
    /// The frame and header slot of each transmit chain in flight, by head.
    tx_frames: Vec<Option<(Aggregate<'d>, u16)>>,
    /// The header page: one [`tx::SLOT`]-byte slot per frame in flight.
    hdrs: (*mut u8, u64),
    free_slots: Vec<u16>,
    tx_pending: Option<(Aggregate<'d>, crate::e1000::TxRequest)>,
    tso: bool,
    error: Option<UsedError>,
    counters: Values<Counter>,
}

impl<'d, R: Regs, M: Dma> VirtioNet<'d, R, M> {
    /// Resets the device, negotiates (TSO only if `tso`), reads the MAC
    /// address, sets both queues up in pages of `rx_pool` (owned by `d`),
    /// sets DRIVER_OK and fills the receive queue. `yield_now` runs while
    /// the reset is in progress.
    pub fn new(
        regs: R,
        layout: Layout,
        dma: M,
        d: &'d Domain,
        rx_pool: PoolId,
        tso: bool,
        yield_now: impl FnMut(),
    ) -> Result<Self, InitError> {
        let mut t = Transport::new(regs, layout);
        t.reset(yield_now)?;
        let wanted = F_CSUM | F_STATUS | virtio::F_EVENT_IDX | if tso { F_HOST_TSO4 } else { 0 };
        let features = t.set_features(wanted, F_MAC)?;
        let mut mac = [0u8; 6];
        if !t.device_config(0, &mut mac) {
            return Err(InitError::NoMac);
        }
        let ev = features & virtio::F_EVENT_IDX != 0;
        let (nr, nt) = (t.queue_size(RXQ, QUEUE_MAX)?, t.queue_size(TXQ, QUEUE_MAX)?);
        let rxq = new_queue(d, rx_pool, &dma, nr, ev)?;
        let txq = new_queue(d, rx_pool, &dma, nt, ev)?;
        let hdrs = pages(d, rx_pool, &dma, tx::SLOT * nt as usize)?;
        let rx_setup = t.set_up_queue(RXQ, nr, rxq.rings())?;
        let tx_setup = t.set_up_queue(TXQ, nt, txq.rings())?;
        t.driver_ok();
        let mut nic = VirtioNet {
            t,
            dma,
            d,
            rx_pool,
            features,
            mac,
            rxq,
            rx_setup,
            txq,
            tx_setup,
            rx_bufs: (0..nr).map(|_| None).collect(),
            rx_unpublished: 0,
            tx_frames: (0..nt).map(|_| None).collect(),
            hdrs,
            free_slots: (0..nt).rev().collect(),
            tx_pending: None,
            tso: false,
            error: None,
            counters: Values::new(),
        };
        nic.set_tso(tso);
        nic.rx_refill();
        nic.link_up();
        Ok(nic)
    }

    /// Whether TSO requests are carried out: only if asked and the device
    /// took `HOST_TSO4` (with `CSUM`, which it implies).
    pub fn set_tso(&mut self, on: bool) {
        self.tso = on && self.features & (F_HOST_TSO4 | F_CSUM) == F_HOST_TSO4 | F_CSUM;
    }

    /// Whether TSO is carried out (what netdrv offers netstack).
    pub fn tso(&self) -> bool {
        self.tso
    }

    /// The features negotiated.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
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

    /// The transport (tests reach the simulated device through it).
    pub fn transport(&mut self) -> &mut Transport<R> {
        &mut self.t
    }

    /// The used-ring entry that stopped the driver, if one did: the device
    /// is marked FAILED and nothing it says is believed any more.
    pub fn device_error(&self) -> Option<UsedError> {
        self.error
    }

    fn fail(&mut self, e: UsedError) {
        if self.error.is_none() {
            self.error = Some(e);
            self.counters[Counter::DeviceErrors] += 1;
            self.t.set_failed();
        }
    }

    /// Reads the link state into [`Counter::LinkUp`] (always up without
    /// `VIRTIO_NET_F_STATUS`).
    pub fn link_up(&mut self) -> bool {
        let mut s = [0u8; 2];
        let up = self.features & F_STATUS == 0 || (self.t.device_config(6, &mut s) && s[0] & 1 != 0);
        self.counters[Counter::LinkUp] = up as u64;
        up
    }

    /// Reads (and so clears) the ISR; deasserts INTx.
    pub fn interrupt(&mut self) -> Isr {
        let isr = self.t.isr();
        let link = (isr & ISR_CONFIG != 0).then(|| self.link_up());
        Isr { queue: isr & ISR_QUEUE != 0, link }
    }

    /// Whether the device has given back a receive buffer not drained.
    pub fn rx_ready(&self) -> bool {
        self.error.is_none() && self.rxq.has_used()
    }

    /// Hands at most `max` received frames to `deliver`, each a sealed
    /// one-slice aggregate of the RX pool past the header; `deliver`
    /// returns whether it took the frame. Returns how many were taken.
    pub fn rx_drain(&mut self, max: usize, mut deliver: impl FnMut(Aggregate<'d>) -> bool) -> usize {
        let mut n = 0;
        while n < max {
            let used = match self.rxq.pop() {
                Ok(Some(u)) => u,
                Ok(None) => break,
                Err(e) => {
                    self.fail(e);
                    break;
                }
            };
            // Every chain in flight has its buffer (rx_refill).
            let Some(buf) = self.rx_bufs[used.head as usize].take() else { continue };
            let len = used.len.map_or(0, |l| l as usize);
            if !(HDR + MIN_FRAME..=HDR + MAX_FRAME).contains(&len) {
                // The buffer goes back to the pool; a fresh one replaces it.
                self.counters[Counter::RxDropped] += 1;
                continue;
            }
            let Ok(mut whole) = buf.seal(len).map_err(|_| ()) else {
                self.counters[Counter::RxDropped] += 1;
                continue;
            };
            let frame = match whole.split_off(HDR) {
                Ok(f) => f,
                Err(_) => {
                    self.counters[Counter::RxDropped] += 1;
                    continue;
                }
            };
            drop(whole);
            let arp = frame.slices().next().is_some_and(|s| s[12..14] == [0x08, 0x06]);
            let bytes = frame.len() as u64;
            if deliver(frame) {
                n += 1;
                self.counters[Counter::RxFrames] += 1;
                self.counters[Counter::RxBytes] += bytes;
                self.counters[Counter::ArpRx] += arp as u64;
            } else {
                self.counters[Counter::RxDropped] += 1;
            }
        }
        n
    }

    /// Posts a fresh buffer for every free receive descriptor and publishes
    /// them: in batches of at least [`RX_REFILL_BATCH`] while the device
    /// holds half the queue, notifying only if it asked.
    pub fn rx_refill(&mut self) {
        if self.error.is_some() {
            return;
        }
        while self.rxq.free() > 0 {
            let Ok(mut b) = self.d.alloc(self.rx_pool, RX_BUF) else {
                self.counters[Counter::RxRingEmpty] += 1;
                break;
            };
            let va = b.writable().as_mut_ptr() as u64;
            let pa = self.dma.physical(va).expect("the RX pool is a dataport");
            let head = self.rxq.push(&[Buf { pa, len: RX_BUF as u32, write: true }]).expect("a free descriptor");
            self.rx_bufs[head as usize] = Some(b);
            self.rx_unpublished += 1;
        }
        let held = self.rxq.in_flight() - self.rx_unpublished;
        let n = self.rxq.size() as usize;
        if self.rx_unpublished > 0 && (self.rx_unpublished >= RX_REFILL_BATCH || held < n / 2) {
            self.rx_unpublished = 0;
            self.counters[Counter::RxTailWrites] += 1;
            if self.rxq.publish() {
                fence(Ordering::SeqCst);
                self.t.notify(self.rx_setup, RXQ);
                self.counters[Counter::Notifies] += 1;
            } else {
                self.counters[Counter::NotifiesSuppressed] += 1;
            }
        }
    }
}
