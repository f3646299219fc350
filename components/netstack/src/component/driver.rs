//! netdrv's deaths (the assembly subscribes us to system events and
//! netdrv is `restartable`): the death protocol's peer side for the link
//! (the port's [`Link`](component_runtime::link::Link)), the link set up
//! afresh for the new incarnation, and the frames lent to the dead one
//! held until the device can no longer read them.

use component_runtime::log;
use component_runtime::time::now_ms;
use core::sync::atomic::Ordering;

use super::port::set_up_link;
use super::Node;

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
        let quarantined = self.port.link.fail(self.d);
        // SAFETY: the link dataport; its dead incarnation no longer runs
        // (the supervisor stopped it before publishing the death) and a new
        // one attaches only once the region no longer shows a MAC address,
        // which setting it up clears.
        let link = unsafe { set_up_link(self.d, self.port.region) };
        let generation = link.generation();
        // Fresh guards; the peer slot serves the new incarnation.
        self.port.link.reattach(link, self.d);
        self.port.awaiting = Some(now_ms());
        log!(
            "netdrv died (death {death}): {quarantined} buffers lent to it quarantined, {kept} frames it received kept, link set up again (generation {generation})"
        );
    }

    /// netdrv's latest death is settled: what we lent it goes back once
    /// its new incarnation stopped the device too.
    pub(super) fn netdrv_settled(&mut self, death: u64) {
        if self.port.awaiting.is_some() {
            self.port.releases_deferred += 1;
            log!(
                "netdrv death {death} settled: what was lent to it waits until the new incarnation stopped the device"
            );
        }
        self.release_drv_frames();
    }

    /// The frames we lent a dead netdrv go back to their pools only when
    /// both its death is settled and its new incarnation has stopped the
    /// device reading the dead one's rings (`e1000::quiesce_tx`, before it
    /// publishes its MAC address): a NIC that DMAs later (real hardware;
    /// QEMU sends inside the TDT write) would otherwise read pages already
    /// reused. A netdrv held down never comes back: its frames stay out
    /// of use (the device may still hold them).
    pub(super) fn release_drv_frames(&mut self) {
        if self.port.awaiting.is_some() {
            return;
        }
        if let Some(n) = self.port.link.release(self.d) {
            log!("netdrv death {} settled: {n} buffers lent to it released", self.port.link.death());
        }
    }

    /// Once netdrv's new incarnation is attached (its MAC address is on
    /// the link again, published after it stopped the device): every
    /// connection resends what the dead one may have lost, now rather
    /// than after the RTO, and the frames lent to the dead one may go
    /// back once its death is settled too.
    pub(super) fn check_driver(&mut self) {
        let Some(since) = self.port.awaiting else { return };
        if self.port.link.chan.control().word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 0 {
            return;
        }
        self.port.awaiting = None;
        self.release_drv_frames();
        let n = self.stack.retransmit_now();
        self.kick_drv = true;
        log!("netdrv back after {} ms: {n} connections resend what is unacknowledged", now_ms().saturating_sub(since));
    }
}
