//! The netstack link: our connections (one record each in
//! `socket_api::client::Conns`) and the events that change them, the
//! requests that go with them (input paused for an upload, handed off for
//! a request body for the cgi), and netstack's death, which takes them all.

use alloc::vec::Vec;

use component_runtime::{error, log, warn};
use glue_rt::pools::rw;
use httpd::{ConnId as HConn, Remote};
use iolite::{Aggregate, Guard, Next};
use socket_api::client::Notice;
use socket_api::{ConnId, ErrorCode, Event, Request};

use super::{glue, listen_port, Httpd, NETSTACK, OUTQ_CAP};

impl Httpd {
    /// Sends a request to netstack (in order behind earlier ones waiting
    /// for ring room). `OUTQ_CAP` is never reached while `pump` keeps to
    /// `OUTQ_PUMP_MAX`; if it is, the request is lost: counted
    /// (`netstack_requests_refused`) and reported.
    pub(super) fn request(&mut self, tag: u64, agg: Aggregate<'static>) {
        let tx = &mut self.net.chan.tx;
        if let Err((tag, _)) = self.outq.send((tag, agg), |m| socket_api::send_request(tx, m)) {
            if self.outq.refused() <= 10 {
                error!("netstack request {tag:#x} dropped: {OUTQ_CAP} requests wait for ring room");
            }
        }
    }

    /// Tells netstack where `conn`'s input goes next: its hand-off pool
    /// while a request body for the cgi arrives (the body is passed on by
    /// reference), the shared socket pool otherwise. Requests go in order,
    /// so a `100 Continue` sent after this finds the switch made.
    pub(super) fn sync_hand_off(&mut self, id: HConn, conn: ConnId) {
        let want = self.srv.input_to_cgi(id);
        if let Some(req) = self.conns.hand_off(conn, want) {
            self.hand_off_switches += 1;
            self.request(req.encode(), Aggregate::new(self.d));
        }
    }

    /// Pauses the input of connections whose request body's window to the
    /// cgi is full (netstack keeps it in TCP: the client's window closes)
    /// and resumes the others.
    pub(super) fn sync_input_pauses(&mut self) {
        let mut done = Vec::new();
        let ids: Vec<HConn> = self.uploading.iter().copied().collect();
        for id in ids {
            let Some(&conn) = self.by_srv.get(&id.0) else {
                done.push(id);
                continue;
            };
            let pause = self.srv.input_paused(id);
            if let Some(req) = self.conns.receive(conn, !pause) {
                self.input_pauses += u64::from(pause);
                self.request(req.encode(), Aggregate::new(self.d));
            }
            if !pause && !self.srv.uploading(id) {
                done.push(id);
            }
        }
        for id in done {
            self.uploading.remove(&id);
        }
    }

    /// Reads netstack's events: its connection table ([`Conns`]) keeps
    /// what is flow control, the rest goes to the server.
    pub(super) fn handle_events(&mut self) {
        loop {
            let before = self.d.stats().bytes_copied;
            let r = self.net.rx_guard.recv(&mut self.events_copier.over(&mut self.net.chan.rx));
            self.request_copied += self.d.stats().bytes_copied - before;
            let r = match r {
                Next::Msg(r) => r,
                Next::Idle | Next::Wait(_) => break,
                Next::Refused(e) => {
                    warn!("netstack event refused: {e:?}");
                    continue;
                }
                Next::Broke(e) => {
                    error!("channel client.A from netstack broken: {e:?}");
                    break;
                }
            };
            if let Some(notice) = Event::decode(r.tag).and_then(|ev| self.conns.event(ev)) {
                self.on_notice(notice, r.agg);
            }
        }
    }

    /// One event for the server (`agg`: its data, if it carries any).
    pub(super) fn on_notice(&mut self, notice: Notice<HConn>, agg: Aggregate<'static>) {
        match notice {
            Notice::Listening { port } => log!("listening on port {port}"),
            // The peer is REMOTE_ADDR/REMOTE_PORT for CGI.
            Notice::Accepted { conn, peer, .. } => {
                match self.srv.accept(peer.map(|p| Remote { addr: p.addr, port: p.port })) {
                    Ok(id) => {
                        self.conns.accept(conn, id);
                        self.by_srv.insert(id.0, conn);
                    }
                    Err(resp) => {
                        self.request(Request::Send { conn }.encode(), resp);
                        self.request(Request::Close { conn }.encode(), Aggregate::new(self.d));
                    }
                }
            }
            Notice::Data { conn } => {
                if let Some(id) = self.input_of(conn) {
                    let before = self.d.stats().bytes_copied;
                    self.srv.receive(id, agg);
                    self.request_copied += self.d.stats().bytes_copied - before;
                    self.sync_hand_off(id, conn);
                    self.ready.push(id);
                }
            }
            Notice::Eof { conn } => {
                if let Some(id) = self.input_of(conn) {
                    self.srv.receive_eof(id);
                    self.ready.push(id);
                }
            }
            Notice::Writable { conn } => {
                if let Some(c) = self.conns.get(conn) {
                    self.ready.push(c.app);
                }
            }
            Notice::Closed { conn: _, app } => {
                if let Some(id) = app {
                    self.by_srv.remove(&id.0);
                    self.srv.closed(id);
                }
            }
            Notice::Error { op, id, code } => {
                if code == ErrorCode::WouldBlock || code == ErrorCode::NoMemory {
                    // A send was dropped: the response is broken.
                    self.send_errors += 1;
                    if self.conns.contains(id) {
                        self.request(Request::Abort { conn: id }.encode(), Aggregate::new(self.d));
                    }
                }
                if code != ErrorCode::NotFound && code != ErrorCode::NotConnected {
                    self.send_errors += 1;
                    if self.send_errors <= 10 {
                        warn!("netstack: request {op} on {id} failed: {code:?}");
                    }
                }
            }
        }
    }

    /// The server connection `conn`'s input goes to: none once we closed it.
    pub(super) fn input_of(&self, conn: ConnId) -> Option<HConn> {
        self.conns.get(conn).filter(|c| !c.closing()).map(|c| c.app)
    }

    /// netstack died: its connections are gone (each one's peer sees a
    /// reset from the new incarnation, or nothing more). We drop every
    /// connection's state (responses in progress close their files at fs),
    /// the requests waiting for ring room, forget what it granted us
    /// (received data still in use is tainted until dropped) and
    /// quarantine what we lent it (headers of ours, and fs's and the cgi's
    /// pages we forwarded: the NIC may still send them) until the death is
    /// settled. Then we set the client region up afresh (a new
    /// generation), which the new incarnation waits for, and listen again.
    pub(super) fn netstack_died(&mut self, death: u64) {
        self.netstack_restarts += 1;
        let conns = self.conns.len();
        self.netstack_conns_lost += conns as u64;
        for (_, id) in self.conns.take_all() {
            self.srv.closed(id);
        }
        self.by_srv.clear();
        self.ready.clear();
        self.fs_waiting.clear();
        self.uploading.clear();
        let dropped = self.outq.len();
        self.outq.clear();
        let quarantined = self.net.fail(self.d);
        // SAFETY: the client dataport, mapped read-write for our lifetime,
        // shared with netstack only; its dead incarnation no longer runs
        // (the supervisor stopped it before publishing the death) and the
        // new one attaches only to a generation no incarnation of it used
        // (`socket_api::WORD_STACK_ATTACHED`), which this one is.
        let net = unsafe { socket_api::init_client(self.d, NETSTACK, rw(glue::client::VADDR, glue::client::SIZE)) };
        match net {
            // The old region's end goes once the new one is attached.
            Ok(net) => drop(self.net.reattach(net, self.d)),
            Err(e) => {
                error!("the client region cannot be set up again: {e:?}");
                self.net.rx_guard = Guard::new();
                self.net.revived(self.d);
            }
        }
        log!(
            "netstack died (death {death}): {conns} connections dropped, {dropped} requests unsent, {quarantined} buffers lent to it quarantined, region set up again (generation {})",
            self.net.chan.generation()
        );
        self.request(Request::Listen { port: listen_port(), backlog: 64 }.encode(), Aggregate::new(self.d));
    }

    /// Confirms netstack's latest death once nothing it gave us (received
    /// data) is in use here any more.
    pub(super) fn confirm_netstack_death(&mut self) {
        if self.net.confirm_if_clean(self.d, &self.deaths) {
            log!("netstack death {}: nothing of the dead incarnation in use any more, confirmed", self.net.death());
        }
    }
}
