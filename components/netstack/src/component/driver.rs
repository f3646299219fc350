//! netdrv's deaths (the assembly subscribes us to system events and
//! netdrv is `restartable`): the death protocol's peer side for the link,
//! the link set up afresh for the new incarnation, and the frames lent to
//! the dead one held until the device can no longer read them.

use component_runtime::events;
use component_runtime::log;
use component_runtime::time::now_ms;
use core::sync::atomic::Ordering;
use iolite::Guard;

use super::port::set_up_link;
use super::{Node, NETDRV};

/// netdrv's instance name in the events page (its record: its deaths).
pub(super) const NETDRV_NAME: &str = "netdrv";

/// What we know of netdrv's deaths (the assembly subscribes us to system
/// events and netdrv is `restartable`): the death protocol's peer side for
/// the link.
#[derive(Default)]
pub(super) struct DrvLife {
    /// Its record in the events page.
    pub(super) index: Option<usize>,
    /// Its latest death, still to be confirmed (nothing it gave us in use).
    pub(super) death: u64,
    pub(super) unconfirmed: bool,
    /// The link was reset for a new incarnation that has not published
    /// its MAC address yet; since when (ms).
    pub(super) awaiting: Option<u64>,
    pub(super) restarts: u64,
    /// The latest death is settled, but the new incarnation has not yet
    /// stopped the device (it publishes its MAC address after that): the
    /// frames lent to the dead one wait, since the NIC may still read them.
    pub(super) settled_unquiesced: bool,
    /// Deaths whose release had to wait so (`tcp_drv_releases_deferred`).
    pub(super) releases_deferred: u64,
}

impl Node {
    /// netdrv died: keep the frames it had handed us, forget what it
    /// granted us, quarantine what we lent it (the frames it had not sent
    /// yet: their holds go back, and so their buffers to their owners,
    /// once its death is settled), set the link up afresh for its new
    /// incarnation and serve that one at once. Our queued frames wait for
    /// it; the ones the dead one took are lost, and TCP resends them as
    /// soon as the new one is there ([`Node::check_driver`]).
    pub(super) fn netdrv_died(&mut self, death: u64) {
        let mut kept = 0;
        while let Some(agg) = self.port.receive_link() {
            self.port.inherited.push_back(agg);
            kept += 1;
        }
        let quarantined = self.d.peer_failed(NETDRV).unwrap_or(0);
        // SAFETY: the link dataport; its dead incarnation no longer runs
        // (the supervisor stopped it before publishing the death) and a new
        // one attaches only once the region no longer shows a MAC address,
        // which setting it up clears.
        let link = unsafe { set_up_link(self.d, self.port.region) };
        let generation = link.generation();
        self.port.link = link;
        self.port.rx_guard = Guard::new();
        self.port.tx_guard = Guard::new();
        let _ = self.d.peer_restarted(NETDRV);
        self.drv.death = death;
        self.drv.settled_unquiesced = false;
        self.drv.unconfirmed = true;
        self.drv.awaiting = Some(now_ms());
        self.drv.restarts += 1;
        log!(
            "netdrv died (death {death}): {quarantined} buffers lent to it quarantined, {kept} frames it received kept, link set up again (generation {generation})"
        );
    }

    /// netdrv's latest death is settled: what we lent it goes back once
    /// its new incarnation stopped the device too.
    pub(super) fn netdrv_settled(&mut self, death: u64) {
        if death == self.drv.death {
            self.drv.settled_unquiesced = true;
            if self.drv.awaiting.is_some() {
                self.drv.releases_deferred += 1;
                log!("netdrv death {death} settled: what was lent to it waits until the new incarnation stopped the device");
            }
            self.release_drv_frames();
        }
    }

    /// The frames we lent a dead netdrv go back to their pools only when
    /// both its death is settled and its new incarnation has stopped the
    /// device reading the dead one's rings (`e1000::quiesce_tx`, before it
    /// publishes its MAC address): a NIC that DMAs later (real hardware;
    /// QEMU sends inside the TDT write) would otherwise read pages already
    /// reused. A netdrv held down never comes back: its frames stay out
    /// of use (the device may still hold them).
    pub(super) fn release_drv_frames(&mut self) {
        if !self.drv.settled_unquiesced || self.drv.awaiting.is_some() {
            return;
        }
        self.drv.settled_unquiesced = false;
        let n = self.d.peer_settled(NETDRV).unwrap_or(0);
        log!("netdrv death {} settled: {n} buffers lent to it released", self.drv.death);
    }

    /// Once netdrv's new incarnation is attached (its MAC address is on
    /// the link again, published after it stopped the device): every
    /// connection resends what the dead one may have lost, now rather
    /// than after the RTO, and the frames lent to the dead one may go
    /// back once its death is settled too.
    pub(super) fn check_driver(&mut self) {
        let Some(since) = self.drv.awaiting else { return };
        if self.port.link.control().word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 0 {
            return;
        }
        self.drv.awaiting = None;
        self.release_drv_frames();
        let n = self.stack.retransmit_now();
        self.kick_drv = true;
        log!("netdrv back after {} ms: {n} connections resend what is unacknowledged", now_ms().saturating_sub(since));
    }

    /// Confirms netdrv's latest death once nothing it gave us is in use.
    pub(super) fn confirm_netdrv(&mut self) {
        if let (true, Some(i)) = (self.drv.unconfirmed, self.drv.index) {
            if self.d.tainted(NETDRV).unwrap_or(0) == 0 {
                self.drv.unconfirmed = false;
                events::confirm_settled(i, self.drv.death);
            }
        }
    }
}
