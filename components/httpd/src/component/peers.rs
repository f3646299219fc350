//! Deaths and settlements of our peers, from the system events page: the
//! peer side of the death protocol for the cgi, fs and netstack, and the
//! end of our own quarantine once our last death is settled.

use alloc::vec::Vec;

use component_runtime::log;

use super::{Httpd, APP_POOL, CGI, CGI_REQ_POOL, FS, NETSTACK};

impl Httpd {
    /// Deaths and settlements of our peers (the system events page): the
    /// death protocol's peer side for the cgi.
    pub(super) fn check_events(&mut self) {
        let Some(w) = self.sys_events.as_mut() else { return };
        let mut seen = Vec::new();
        w.poll(|e| seen.push(e));
        for e in seen {
            match e {
                component_runtime::events::Event::Died { component, death } if Some(component) == self.cgi_index => {
                    self.cgi_died(death);
                }
                component_runtime::events::Event::Settled { component, death } if Some(component) == self.cgi_index => {
                    if death == self.cgi_death {
                        // Nobody downstream of the dead cgi uses what it
                        // had any more: what we lent it comes back.
                        let n = self.d.peer_settled(CGI).unwrap_or(0);
                        log!("cgi death {death} settled: {n} buffers lent to it released");
                    }
                }
                component_runtime::events::Event::Died { component, death }
                    if Some(component) == self.netstack_index =>
                {
                    self.netstack_died(death);
                }
                component_runtime::events::Event::Settled { component, death }
                    if Some(component) == self.netstack_index =>
                {
                    if death == self.netstack_death {
                        // Nothing the dead netstack had is read any more (the
                        // NIC sent its frames): what we lent it comes back.
                        let n = self.d.peer_settled(NETSTACK).unwrap_or(0);
                        log!("netstack death {death} settled: {n} buffers lent to it released");
                    }
                }
                component_runtime::events::Event::Died { component, death } if Some(component) == self.fs_index => {
                    // Reconnect now, so that what we still use of the dead
                    // incarnation is counted as tainted before we confirm.
                    self.srv.source_mut().reconnect();
                    self.fs_unconfirmed = Some(death);
                    log!(
                        "fs died (death {death}): reconnected, {} of its buffers still in use here or downstream",
                        self.d.tainted(FS).unwrap_or(0)
                    );
                }
                component_runtime::events::Event::Died { component, death } => {
                    // Not restartable in this assembly and no channel of
                    // ours carries its data but through the peers we
                    // track: nothing of ours waits for it.
                    component_runtime::events::confirm_settled(component, death);
                }
                component_runtime::events::Event::HeldDown { component } if Some(component) == self.cgi_index => {
                    let ready = self.srv.cgi_gone();
                    log!("cgi held down by the supervisor: {} held CGI requests answered 503", ready.len());
                    self.ready.extend(ready);
                }
                component_runtime::events::Event::Settled { .. }
                | component_runtime::events::Event::HeldDown { .. } => {}
            }
        }
        self.confirm_cgi_death();
        self.confirm_fs_death();
        self.confirm_netstack_death();
        if let (Some(death), Some(w)) = (self.own_quarantine, self.sys_events.as_ref()) {
            if w.page().state(self.me).1 >= death {
                let n = self.d.end_quarantine(APP_POOL).unwrap_or(0) + self.d.end_quarantine(CGI_REQ_POOL).unwrap_or(0);
                log!("death {death} settled: {n} quarantined pool pages free again");
                self.own_quarantine = None;
            }
        }
    }

    /// Confirms fs's latest death once nothing it gave us is in use here
    /// or downstream (netstack and the NIC return their holds to us): the
    /// new incarnation then frees the pages it kept quarantined.
    pub(super) fn confirm_fs_death(&mut self) {
        let (Some(death), Some(index)) = (self.fs_unconfirmed, self.fs_index) else { return };
        if self.d.tainted(FS).unwrap_or(0) == 0 {
            self.fs_unconfirmed = None;
            log!("fs death {death}: nothing of the dead incarnation in use any more, confirmed");
            component_runtime::events::confirm_settled(index, death);
        }
    }
}
