//! netstack's deaths, from below: the death protocol's peer side for the
//! link.
//!
//! At its death we stop using the link at once (we may have been in a pass
//! over it), forget the holds it granted us (the frames on the NIC's TX
//! ring: still sent, their buffers tainted until the NIC is done with
//! them), quarantine what we lent it (received frames it had not
//! returned) and clear the MAC address word: that tells its new
//! incarnation we let go, and it sets the link up afresh. We attach to the
//! new generation and publish the offloads and the MAC address again.
//! Frames received meanwhile wait in the NIC's RX ring. We confirm the
//! death once the TX ring holds nothing of the dead incarnation (the
//! link's death watch).

use component_runtime::time::now_ms;
use component_runtime::{error, log};
use core::sync::atomic::Ordering;
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{Duplex, DuplexAttach};
use nic_api::Offloads;

use super::{glue, Driver, NETSTACK};

/// How long a new incarnation waits for netstack to set the link up again
/// before it gives up (exits).
const RELINK_WAIT_MS: u64 = 5000;

/// While netstack's new incarnation has not set the link up again.
#[derive(Default)]
pub(super) struct Relink {
    /// Since when (ms), for the report.
    since: u64,
    /// A generation we could not attach to: we wait for another one.
    refused: Option<u64>,
}

impl Driver {
    /// netstack died: let go of the link (see the top).
    pub(super) fn netstack_died(&mut self, death: u64) {
        let quarantined = self.link.fail(self.d);
        let words = self.link.chan.control();
        words.word(nic_api::WORD_MAC).store(0, Ordering::Release);
        self.relink = Relink { since: now_ms(), refused: None };
        log!(
            "netstack died (death {death}): {quarantined} buffers lent to it quarantined, {} of its frames still on the NIC; link released",
            self.d.tainted(NETSTACK).unwrap_or(0)
        );
        // Its new incarnation may wait for that: it runs above us and sets
        // the link up before this returns.
        glue::wake::emit();
    }

    /// While we wait for netstack's new incarnation: attaches to the link
    /// once it set it up again (a new generation). True once attached (or
    /// when nothing is awaited).
    pub(super) fn relink(&mut self) -> bool {
        if !self.link.is_dead() {
            return true;
        }
        // The generation the dead incarnation used, or one that failed.
        let old = self.relink.refused.unwrap_or(self.link.chan.generation());
        let g = self.link.chan.control().generation();
        if g == 0 || g == old {
            return false;
        }
        // SAFETY: the link dataport, mapped read-write for our lifetime,
        // shared only with netstack, whose new incarnation set it up (a new
        // generation) and waits for our MAC address before using it; we
        // are its side A.
        let attached = unsafe {
            Duplex::attach(DuplexAttach {
                domain: self.d,
                peer: NETSTACK,
                region: rw(glue::link::VADDR, glue::link::SIZE),
                geometry: nic_api::GEOMETRY,
                side: nic_api::DRV_SIDE,
            })
        };
        let link = match attached {
            Ok(l) => l,
            Err(e) => {
                error!("netstack's new link (generation {g}) cannot be attached: {e:?}");
                self.relink.refused = Some(g);
                return false;
            }
        };
        self.link.reattach(link, self.d);
        let up = self.nic.link_up();
        publish_link(&self.link.chan, self.mac, up, self.tso);
        // It waits for the MAC address: it runs now, above us.
        glue::wake::emit();
        log!(
            "netstack's new incarnation attached after {} ms (link generation {g})",
            now_ms().saturating_sub(self.relink.since)
        );
        true
    }
}

/// The protocol words netstack reads: the offloads, then the MAC address
/// (which says they are valid), and the link state.
pub(super) fn publish_link(link: &Duplex<'_>, m: [u8; 6], up: bool, tso: bool) {
    let words = link.control();
    // Before the MAC address: netstack reads the offloads once it sees a
    // valid one.
    words.word(nic_api::WORD_OFFLOADS).store(Offloads { tso }.word(), Ordering::Release);
    words
        .word(nic_api::WORD_MAC)
        .store(1 << 63 | u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]), Ordering::Release);
    words.word(nic_api::WORD_LINK_UP).store(up as u64, Ordering::Release);
}

/// After a restart: waits until netstack has set the link up for us (it
/// saw our death): the region no longer shows the dead incarnation's MAC
/// address. netstack runs above us, so this normally returns at once.
pub(super) fn wait_for_fresh_link(region: iolite::RwRegion) {
    // SAFETY: the link region, a duplex region of this geometry, mapped
    // for our lifetime; only its control words are read here.
    let Ok(control) = (unsafe { Control::of(region, nic_api::GEOMETRY) }) else { return };
    let since = now_ms();
    while control.word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 1 {
        if now_ms().saturating_sub(since) > RELINK_WAIT_MS {
            error!("netstack did not set the link up again within {RELINK_WAIT_MS} ms (is it subscribed to system events?)");
            component_runtime::exit(1)
        }
        sel4::yield_now();
    }
}
