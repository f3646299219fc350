//! The link with netdrv below us (the `nic-api` protocol): our
//! [`NicPort`] for the stack, the queue of frames waiting for room in
//! netdrv's ring, and setting the link up (at start, after a restart of
//! ours, after netdrv's death).

use alloc::collections::VecDeque;
use component_runtime::events::EventsPage;
use component_runtime::link::Link;
use component_runtime::time::now_ms;
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use iolite::duplex::Control;
use iolite::{init_duplex, Aggregate, Domain, Duplex, DuplexAttach, Next, RwRegion};
use netstack::{NicPort, TxFrame};
use outbox::Outbox;

use super::{glue, NETDRV};

/// Frames queued for netdrv beyond the ring (smoltcp stops emitting when
/// this is full; they go out as the ring drains).
pub(super) const TX_QUEUE: usize = 512;

/// netdrv's instance name in the events page (its record: its deaths): the
/// link's other end, as the assembly connects it.
const NETDRV_NAME: &str = glue::link::PEER;

/// The stack's NIC: netdrv through the link region.
pub(super) struct Port {
    /// The link dataport, set up again when netdrv dies.
    pub(super) region: RwRegion,
    /// The link (`chan`: frames from netdrv on link.A, `rx`, frames to it
    /// on link.B, `tx`), its guards (a corrupt ring or a forged descriptor
    /// breaks a direction for good, never retried in a loop) and netdrv's
    /// death watch (the assembly subscribes us to system events and netdrv
    /// is `restartable`). What we lent a dead netdrv goes back only on
    /// request: see `Node::release_drv_frames`.
    pub(super) link: Link<Duplex<'static>>,
    /// The link was set up afresh for a new netdrv incarnation that has
    /// not published its MAC address yet; since when (ms).
    pub(super) awaiting: Option<u64>,
    /// netdrv deaths whose release had to wait for that
    /// (`tcp_drv_releases_deferred`).
    pub(super) releases_deferred: u64,
    /// Frames a dead netdrv incarnation had handed us (taken off the link
    /// before it was reset), delivered before any new one.
    pub(super) inherited: VecDeque<Aggregate<'static>>,
    /// Frames are held back, or our pools run low: wait for netdrv to
    /// return buffers.
    pub(super) want_releases: bool,
    /// Frames waiting for room in netdrv's ring, in order; at most
    /// `TX_QUEUE` plus a batch of replies (see `transmit`).
    pub(super) queue: Outbox<TxFrame<'static>>,
    pub(super) rx_errors: u64,
    pub(super) held_back: u64,
    /// Frames handed to netdrv (posted on the link).
    pub(super) posted: u64,
}

impl NicPort<'static> for Port {
    fn can_transmit(&self) -> bool {
        self.queue.len() < TX_QUEUE
    }

    fn transmit(&mut self, frame: TxFrame<'static>) -> Result<(), TxFrame<'static>> {
        // Beyond TX_QUEUE only replies to received frames come here (the
        // stack's own segments wait on can_transmit): at most one per frame
        // netdrv hands us in a batch, which the queue's bound leaves room
        // for.
        self.queue.push(frame)
    }

    fn receive(&mut self) -> Option<Aggregate<'static>> {
        if let Some(agg) = self.inherited.pop_front() {
            return Some(agg);
        }
        self.receive_link()
    }
}

impl Port {
    /// The port over `link`, set up in `region`; netdrv's deaths are
    /// followed on `page`.
    pub(super) fn new(region: RwRegion, link: Duplex<'static>, page: Option<&EventsPage>) -> Port {
        Port {
            region,
            link: Link::new(NETDRV_NAME, NETDRV, page, link).release_on_request(),
            awaiting: None,
            releases_deferred: 0,
            inherited: VecDeque::new(),
            want_releases: false,
            queue: Outbox::new(TX_QUEUE + nic_api::FWD_CAP),
            rx_errors: 0,
            held_back: 0,
            posted: 0,
        }
    }

    /// The next frame netdrv put on the link.
    pub(super) fn receive_link(&mut self) -> Option<Aggregate<'static>> {
        loop {
            match self.link.rx_guard.recv(&mut self.link.chan.rx) {
                Next::Msg(r) => return Some(r.agg),
                Next::Idle | Next::Wait(_) => return None,
                // One message refused (its holds went back): the next.
                Next::Refused(_) => self.rx_errors += 1,
                Next::Broke(e) => {
                    self.rx_errors += 1;
                    error!("channel link.A from netdrv broken: {e:?}");
                    return None;
                }
            }
        }
    }

    /// Moves queued frames into netdrv's ring, as many as fit.
    /// `starving`: our pools run low, so netdrv should wake us when it
    /// returns buffers (it holds frames' buffers until they are sent).
    pub(super) fn flush(&mut self, starving: bool) {
        let (tx, guard) = (&mut self.link.chan.tx, &mut self.link.tx_guard);
        self.posted += self.queue.drain(|f| {
            guard.send(tx, f.agg, f.offload.tag(), 0).map_err(|(_, agg, broke)| {
                if let Some(e) = broke {
                    error!("channel link.B from netdrv broken: {e:?}");
                }
                TxFrame { agg, offload: f.offload }
            })
        }) as u64;
        if self.link.tx_guard.broken().is_some() {
            // Nobody will send them: their holds go back now.
            self.queue.clear();
        }
        let waiting = !self.queue.is_empty();
        if waiting {
            self.held_back += 1;
        }
        self.want_releases = waiting || starving;
    }
}

/// How long a restarted netstack waits for netdrv to let go of the link
/// its dead incarnation shared with it before setting it up anyway.
const RELINK_WAIT_MS: u64 = 1000;

/// After a restart of ours: netdrv runs below us and may be in the middle
/// of a pass over the link our dead incarnation shared with it (we may
/// have died inside its signal). Setting the link up under it would let
/// it write stale ring indices into the fresh rings (a `CorruptRing` for
/// good). So we wait until it let go: it saw our death in the events page
/// and cleared the MAC address word (then signals us). Bounded, for a
/// netdrv that does not follow our deaths.
pub(super) fn wait_for_released_link(region: RwRegion) {
    // SAFETY: the link region, a duplex region of this geometry, mapped
    // for our lifetime; only its control words are read here.
    let Ok(control) = (unsafe { Control::of(region, nic_api::GEOMETRY) }) else { return };
    let since = now_ms();
    while control.generation() != 0 && control.word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 1 {
        if now_ms().saturating_sub(since) > RELINK_WAIT_MS {
            warn!("netdrv did not let go of the link within {RELINK_WAIT_MS} ms: setting it up anyway");
            return;
        }
        // netdrv's signal, or the ticker's within 200 ms.
        glue::wake::wait();
    }
    log!("netdrv let go of the link after {} ms", now_ms().saturating_sub(since));
}

/// Sets the link region up afresh and attaches to it as the stack's side
/// (netdrv attaches once it sees the new generation).
///
/// # Safety
///
/// `region` is the link dataport, mapped read-write for our lifetime and
/// shared with netdrv alone, and no netdrv incarnation is using it: it
/// runs below us and attaches only after we initialised it (at start), or
/// its dead incarnation no longer runs (the supervisor stopped it before
/// publishing the death) and a new one attaches only once the region no
/// longer shows a MAC address, which this initialisation clears.
pub(super) unsafe fn set_up_link(d: &'static Domain, region: RwRegion) -> Duplex<'static> {
    // SAFETY: as the caller promises.
    unsafe {
        init_duplex(region, nic_api::GEOMETRY).expect("link");
        Duplex::attach(DuplexAttach {
            domain: d,
            peer: NETDRV,
            region,
            geometry: nic_api::GEOMETRY,
            side: nic_api::STACK_SIDE,
        })
        .expect("link")
    }
}

/// The MAC address netdrv publishes on the link with its first wake-up
/// (after it stopped the device, and after publishing its offloads).
pub(super) fn wait_for_mac(link: &Duplex<'static>) -> [u8; 6] {
    loop {
        let m = link.control().word(nic_api::WORD_MAC).load(Ordering::Acquire);
        if m >> 63 == 1 {
            let b = m.to_le_bytes();
            return [b[0], b[1], b[2], b[3], b[4], b[5]];
        }
        glue::wake::wait();
    }
}
