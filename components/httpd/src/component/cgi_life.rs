//! The cgi's lives: restarts we ask for (a timeout, a broken reply
//! channel), its deaths (what it left unanswered fails with 502), the
//! attachment to each new incarnation's channels (the requests held
//! while it was away go to it then), and the priority we lend it while it
//! is starved of CPU.

use component_runtime::events::Event;
use component_runtime::{error, log, warn};
use glue_rt::pools::rw;
use httpd::Clock;
use iolite::{Boundary, Copier, Duplex, DuplexAttach, Guard, BUILD_COPY_MODE};

use super::cgi::{Cgi, Unsent};
use super::{glue, Httpd, APP_POOL, CGI, CGI_INSTANCE, CGI_LEND_GAP_MS, CGI_LEND_MS, CGI_STARVED_MS};

impl Httpd {
    /// Has the supervisor restart the cgi, which did not answer in time or
    /// broke its reply channel (`why`, for the log).
    /// On success the old incarnation is gone: we stop using its channels
    /// at once (requests until the new one attaches are held by the server,
    /// `Server::cgi_down`, instead of going into channels it is about to
    /// reset); `check_cgi` fails what it left unanswered when the new one
    /// publishes its generation, and hands it the held requests.
    pub(super) fn restart_cgi(&mut self, why: &str) {
        log!("cgi {why}: asking the supervisor to restart it");
        match component_runtime::restart(CGI_INSTANCE) {
            Ok(()) => {
                self.cgi = None;
                // Requests from now on wait for the new incarnation.
                self.srv.cgi_down();
                self.cgi_restart_requests += 1;
            }
            Err(e) => {
                self.cgi_restart_failures += 1;
                if self.cgi_restart_failures <= 10 {
                    error!("restart of {CGI_INSTANCE} failed: {e}");
                }
            }
        }
    }

    /// The cgi runs below netdrv, netstack and us, so that one that spins
    /// delays nobody; under static load it then gets no CPU at all, and a
    /// healthy cgi would time out and be restarted (and its new incarnation
    /// starve before it attaches). So while the cgi has our work (calls
    /// pending, or an incarnation to attach) and made no progress for
    /// `CGI_STARVED_MS`, we lend it our priority (the supervisor's
    /// `lend_priority`, granted by `may_restart`) for at most `CGI_LEND_MS`,
    /// then take it back for at least `CGI_LEND_GAP_MS`. A starved cgi so
    /// gets CPU in every window, and the timeout judges a cgi that was
    /// given CPU; one that spins takes at most the windows (a share of the
    /// CPU, never all of it) until it is restarted.
    pub(super) fn lend_cgi(&mut self, now: u64) {
        // A stream whose parts all wait here owes us nothing: the cgi then
        // waits for the client, it is not starved.
        let waits = self.cgi.is_none() || self.cgi_pending.iter().any(|(&call, &id)| self.srv.cgi_awaiting(id, call));
        match self.cgi_lent_since {
            Some(since) if !waits || now.saturating_sub(since) >= CGI_LEND_MS => {
                if let Err(e) = component_runtime::restart::return_priority(CGI_INSTANCE) {
                    warn!("could not take back the priority lent to {CGI_INSTANCE}: {e}");
                }
                self.cgi_lent_since = None;
                self.cgi_returned_at = now;
            }
            None if waits
                && now.saturating_sub(self.cgi_progress_at) >= CGI_STARVED_MS
                && now.saturating_sub(self.cgi_returned_at) >= CGI_LEND_GAP_MS =>
            {
                match component_runtime::restart::lend_priority(CGI_INSTANCE) {
                    Ok(()) => {
                        self.cgi_lent_since = Some(now);
                        self.cgi_lends += 1;
                    }
                    Err(e) => {
                        // Not granted (an assembly without may_restart):
                        // try again only after a gap.
                        self.cgi_returned_at = now;
                        self.cgi_lend_failures += 1;
                        if self.cgi_lend_failures == 1 {
                            warn!("could not lend {CGI_INSTANCE} our priority: {e}");
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The cgi died: stop using its channels, fail what it left unanswered,
    /// forget what it granted us and quarantine what we lent it.
    pub(super) fn cgi_died(&mut self, death: u64) {
        self.cgi = None;
        // Requests from now on wait for the new incarnation.
        self.srv.cgi_down();
        let failed = self.cgi_pending.len();
        for (call_id, id) in core::mem::take(&mut self.cgi_pending) {
            self.srv.cgi_reply(id, call_id, Err(cgi_api::Failure::Fault));
            self.ready.push(id);
        }
        let quarantined = self.cgi_peer.fail(self.d);
        log!(
            "cgi died (death {death}): {failed} requests failed with 502, {quarantined} buffers lent to it quarantined, {} still in use downstream",
            self.d.tainted(CGI).unwrap_or(0)
        );
    }

    /// Confirms the cgi's latest death once nothing it gave us is in use
    /// here or downstream (netstack and the NIC return their holds to us).
    pub(super) fn confirm_cgi_death(&mut self) {
        self.cgi_peer.confirm_if_clean(self.d, &self.deaths);
    }

    /// Attaches to the cgi's channels when a (new) incarnation published
    /// them; fails what the old one left unanswered.
    pub(super) fn check_cgi(&mut self) {
        let g = self.cgi_control.generation();
        if g == self.cgi_gen {
            return;
        }
        let old = self.cgi.take();
        // Credits and cancels were for the old incarnation's streams.
        self.cgi_controls.clear();
        // Requests that timed out (504) are not counted: they were answered.
        let failed = self.cgi_pending.iter().filter(|&(&call, &id)| self.srv.cgi_open(id, call)).count();
        if old.is_some() || self.cgi_gen != 0 {
            drop(old);
            for (call_id, id) in core::mem::take(&mut self.cgi_pending) {
                self.srv.cgi_reply(id, call_id, Err(cgi_api::Failure::Fault));
                self.ready.push(id);
            }
            if self.deaths.page().is_none() {
                // No death protocol in this assembly: forget what the dead
                // incarnation granted us, and take back what we lent it.
                let _ = self.d.peer_died(CGI);
            } else {
                if !self.cgi_peer.is_dead() {
                    // Its death is not in the page yet (cannot happen: the
                    // supervisor counts it before the rebuild); be safe.
                    let death = self.cgi_peer.death() + 1;
                    if let Some(component) = self.cgi_peer.index() {
                        self.cgi_peer.see(Event::Died { component, death }, self.d);
                    }
                    self.cgi_died(death);
                }
                // The new incarnation is served; what the old one had stays
                // quarantined until its death is settled.
                self.cgi_peer.revived(self.d);
            }
            self.cgi_restarts += 1;
            log!("cgi restarted (generation {g}): {failed} requests failed with 502");
        }
        self.cgi_gen = g;
        // SAFETY: the cgi initialised the region before publishing the
        // generation; we are its only side A.
        let attached = unsafe {
            Duplex::attach(DuplexAttach {
                domain: self.d,
                peer: CGI,
                region: rw(glue::cgi_chan::VADDR, glue::cgi_chan::SIZE),
                geometry: cgi_api::chan::GEOMETRY,
                side: cgi_api::chan::HTTPD_SIDE,
            })
            .and_then(|link| {
                let copier = Copier::new(BUILD_COPY_MODE, Boundary::CgiToApp, Some(APP_POOL))?;
                Ok(Cgi { link, copier, guard: Guard::new() })
            })
        };
        match attached {
            Ok(c) => {
                self.cgi = Some(c);
                self.cgi_progress_at = self.srv.clock().now_ms();
                if g == 1 {
                    log!("cgi attached (generation {g})");
                }
                self.release_held_calls(g);
            }
            Err(e) => error!("cgi channels: {e:?}"),
        }
    }

    /// The cgi (re)attached: the requests held while it was away go to it
    /// now, in the order they arrived (the fresh ring takes
    /// `cgi_queue_max` of them). One that finds no room (the request pool
    /// still holds the dead incarnation's quarantined requests) gets 503.
    pub(super) fn release_held_calls(&mut self, g: u64) {
        let calls = self.srv.cgi_up();
        if calls.is_empty() {
            return;
        }
        let n = calls.len();
        let mut refused = 0;
        for (id, call) in calls {
            match self.cgi_send(id, call) {
                Ok(()) => {}
                Err(Unsent::Failed(call_id, f)) => {
                    refused += 1;
                    self.srv.cgi_reply(id, call_id, Err(f));
                }
                // It died again before we sent: held for the next one.
                Err(Unsent::Away(call)) => {
                    if !self.srv.cgi_hold(id, *call) {
                        refused += 1;
                    }
                }
            }
            self.ready.push(id);
        }
        log!("cgi generation {g}: {n} requests held while it was away handed to it ({refused} refused)");
    }
}
