//! What a connection does: its record (echo or source), and the events
//! the connection table leaves for us. Echoes go back by reference, held
//! while netstack's credit for the connection is used up.

use alloc::collections::VecDeque;
use alloc::string::String;
use component_runtime::{log, warn};
use iolite::Aggregate;
use socket_api::client::Notice;
use socket_api::{ConnId, ErrorCode, Request};

use crate::{Echo, ECHO_PORT, SOURCE_PORT};

// An aggregate is a fixed 16-slice array kept inline on purpose (no
// allocation per message); one per source connection is cheap.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Kind {
    /// Echo; `first` until the first data arrived.
    Echo { first: bool },
    /// Source: the command line so far, then the message and what is left.
    Source { line: String, msg: Option<Aggregate<'static>>, left: u64, size: usize },
}

/// What we keep of a connection (its record in `Echo::conns`, which also
/// keeps our sends against netstack's credit and whether we closed it).
pub(crate) struct Conn {
    pub(crate) kind: Kind,
    /// Echoes beyond the credit, in order. Bounded by what netstack lends
    /// us: it gives no more data while our echoes are held back.
    held: VecDeque<Aggregate<'static>>,
    /// The peer finished: close once `held` is sent.
    close_after_held: bool,
}

impl Echo {
    /// One event the connection table left for us (`agg`: its data).
    pub(crate) fn on_notice(&mut self, notice: Notice<Conn>, agg: Aggregate<'static>) {
        match notice {
            Notice::Listening { port } => {
                let what = if port == ECHO_PORT { "echo" } else { "source" };
                log!("{what} listening on port {port}");
            }
            // The echo does not need to know who connected.
            Notice::Accepted { port, conn, .. } => {
                self.connections += 1;
                let kind = if port == SOURCE_PORT {
                    Kind::Source { line: String::new(), msg: None, left: 0, size: 0 }
                } else {
                    Kind::Echo { first: true }
                };
                self.conns.accept(conn, Conn { kind, held: VecDeque::new(), close_after_held: false });
            }
            Notice::Data { conn } => self.data(conn, agg),
            Notice::Eof { conn } => {
                if let Some(c) = self.conns.get(conn) {
                    let idle_source = matches!(&c.app.kind, Kind::Source { msg: None, left: 0, .. });
                    if matches!(c.app.kind, Kind::Echo { .. }) || idle_source {
                        self.close(conn);
                    }
                }
            }
            // netstack stops giving us a connection's data while its echo
            // is held back (full), so only the credit matters here.
            Notice::Writable { conn } => self.send_held(conn),
            Notice::Closed { .. } => {
                self.closed += 1;
                if self.closed.is_multiple_of(1000) {
                    self.log_stats();
                }
            }
            Notice::Error { op, id, code } => {
                self.errors += 1;
                if self.errors <= 10 && code != ErrorCode::NotFound {
                    warn!("netstack: request {op} on {id} failed: {code:?}");
                }
            }
        }
    }

    /// Sends held echoes of `conn` as far as its credit allows.
    fn send_held(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(conn) else { return };
            if !c.may_send() {
                // The report that frees credit comes as `Writable`.
                return;
            }
            let Some(agg) = c.app.held.pop_front() else {
                if core::mem::take(&mut c.app.close_after_held) {
                    self.close(conn);
                }
                return;
            };
            c.sent(agg.len());
            self.request(Request::Send { conn }.encode(), agg);
        }
    }

    /// Closes `conn` once its held echoes are sent.
    pub(crate) fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(conn) {
            if !c.app.held.is_empty() {
                // After the echoes still held (sent as credit comes).
                c.app.close_after_held = true;
                return;
            }
        }
        if let Some(req) = self.conns.close(conn) {
            self.request(req.encode(), Aggregate::new(self.d));
        }
    }

    /// Data on `conn`: echoed, answered with the counters, or a source's
    /// command line.
    fn data(&mut self, conn: ConnId, agg: Aggregate<'static>) {
        let Some(c) = self.conns.get_mut(conn) else { return };
        match &mut c.app.kind {
            Kind::Echo { first } => {
                let was_first = core::mem::replace(first, false);
                if was_first && agg.eq_bytes(b"STATS\n") {
                    self.stats_requests += 1;
                    self.send_stats(conn);
                    return;
                }
                self.bytes_echoed += agg.len() as u64;
                // Back by reference: the same buffers netstack received into.
                c.app.held.push_back(agg);
                self.send_held(conn);
            }
            Kind::Source { line, msg, .. } => {
                if msg.is_some() || line.len() > 64 {
                    return;
                }
                for s in agg.slices() {
                    line.push_str(&String::from_utf8_lossy(s));
                }
                if let Some(end) = line.find('\n') {
                    let cmd = String::from(&line[..end]);
                    self.start_source(conn, &cmd);
                }
            }
        }
    }
}
