//! Deaths and settlements of our peers, from the system events page: the
//! peer side of the death protocol for the cgi, fs and netstack, and the
//! end of our own quarantine once our last death is settled.

use component_runtime::link::PeerEvent;
use component_runtime::log;

use super::{Httpd, FS};

impl Httpd {
    /// Deaths, settlements and hold-downs of our peers (the system events
    /// page): each link takes what is about its peer; `deaths` confirms at
    /// once the deaths of the others (nothing of theirs reaches us but
    /// through the peers we track) and ends our own quarantine.
    pub(super) fn check_events(&mut self) {
        let claimed = [self.cgi_peer.index(), self.fs_peer.index(), self.net.index()];
        for e in self.deaths.poll(self.d, &claimed) {
            match self.cgi_peer.see(e, self.d) {
                Some(PeerEvent::Died { death }) => self.cgi_died(death),
                Some(PeerEvent::Settled { death, released: Some(n) }) => {
                    // Nobody downstream of the dead cgi uses what it had any
                    // more: what we lent it came back.
                    log!("cgi death {death} settled: {n} buffers lent to it released");
                }
                Some(PeerEvent::HeldDown) => {
                    let ready = self.srv.cgi_gone();
                    log!("cgi held down by the supervisor: {} held CGI requests answered 503", ready.len());
                    self.ready.extend(ready);
                }
                Some(PeerEvent::Settled { released: None, .. }) | None => {}
            }
            match self.net.see(e, self.d) {
                Some(PeerEvent::Died { death }) => self.netstack_died(death),
                Some(PeerEvent::Settled { death, released: Some(n) }) => {
                    // Nothing the dead netstack had is read any more (the NIC
                    // sent its frames): what we lent it came back.
                    log!("netstack death {death} settled: {n} buffers lent to it released");
                }
                _ => {}
            }
            if let Some(PeerEvent::Died { death }) = self.fs_peer.see(e, self.d) {
                // Reconnect now, so that what we still use of the dead
                // incarnation is counted as tainted before we confirm.
                self.srv.source_mut().reconnect();
                log!(
                    "fs died (death {death}): reconnected, {} of its buffers still in use here or downstream",
                    self.d.tainted(FS).unwrap_or(0)
                );
            }
        }
        self.confirm_cgi_death();
        self.confirm_fs_death();
        self.confirm_netstack_death();
    }

    /// Confirms fs's latest death once nothing it gave us is in use here
    /// or downstream (netstack and the NIC return their holds to us): the
    /// new incarnation then frees the pages it kept quarantined.
    pub(super) fn confirm_fs_death(&mut self) {
        if self.fs_peer.confirm_if_clean(self.d, &self.deaths) {
            log!("fs death {}: nothing of the dead incarnation in use any more, confirmed", self.fs_peer.death());
        }
    }
}

/// `/healthz`'s probe: a line per component the supervisor's events page
/// shows dead, held down or with a death not settled; the count. Read
/// from the page at each request (a few loads per component), so it
/// answers whatever state the cgi is in. Without a page (the assembly
/// does not subscribe us) nothing can be known: one line says so.
pub(super) fn health(out: &mut alloc::string::String) -> usize {
    use component_runtime::events::{page, Unhealthy};
    use core::fmt::Write;
    let Some(page) = page() else {
        out.push_str("no system events page: health unknown\n");
        return 1;
    };
    page.health(|name, u| {
        let _ = match u {
            Unhealthy::HeldDown => writeln!(out, "{name}: held down (not restarted any more)"),
            Unhealthy::Down { deaths } => writeln!(out, "{name}: down (death {deaths}, not restarted yet)"),
            Unhealthy::Unsettled { deaths, settled } => {
                writeln!(out, "{name}: death {deaths} not settled (settled: {settled})")
            }
        };
    })
}
