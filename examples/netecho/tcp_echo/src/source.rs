//! The bulk source (port `source_port`): one `SEND <size> <count>` line,
//! then one prepared buffer sent `count` times by reference, a window of
//! messages in flight.

use alloc::vec::Vec;
use component_runtime::warn;
use iolite::Aggregate;
use socket_api::client::Conns;
use socket_api::{ConnId, Request};

use crate::conn::{Conn, Kind};
use crate::{Echo, APP_POOL};

/// Largest source message.
const MAX_MESSAGE: usize = 1 << 20;
/// Bytes a source keeps in flight (sent, not yet returned by netstack).
const SOURCE_WINDOW: usize = 512 * 1024;

fn msg_slot(conns: &mut Conns<Conn>, conn: ConnId) -> &mut Option<Aggregate<'static>> {
    match conns.get_mut(conn).map(|c| &mut c.app) {
        Some(Conn { kind: Kind::Source { msg, .. }, .. }) => msg,
        _ => unreachable!("a source connection"),
    }
}

impl Echo {
    /// Starts the source `cmd` asks for (or closes `conn` on a bad one).
    pub(crate) fn start_source(&mut self, conn: ConnId, cmd: &str) {
        let mut w = cmd.split_whitespace();
        let parsed = match (
            w.next(),
            w.next().and_then(|s| s.parse::<usize>().ok()),
            w.next().and_then(|s| s.parse::<u64>().ok()),
        ) {
            (Some("SEND"), Some(size), Some(count)) if (1..=MAX_MESSAGE).contains(&size) => Some((size, count)),
            _ => None,
        };
        let Some((size, count)) = parsed else {
            self.close(conn);
            return;
        };
        let mut buf = match self.d.alloc(APP_POOL, size) {
            Ok(b) => b,
            Err(_) => {
                warn!("source: no room for a {size}-byte message");
                self.close(conn);
                return;
            }
        };
        for (i, b) in buf.writable()[..size].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let Ok(msg) = buf.seal(size) else {
            self.close(conn);
            return;
        };
        if let Some(Conn { kind: Kind::Source { msg: m, left, size: s, .. }, .. }) =
            self.conns.get_mut(conn).map(|c| &mut c.app)
        {
            *m = Some(msg);
            *left = count;
            *s = size;
        }
        self.pump_source(conn);
    }

    /// Sends more of a source's messages while few are in flight; returns
    /// whether it waits for netstack to return some.
    pub(crate) fn pump_source(&mut self, conn: ConnId) -> bool {
        let d = self.d;
        // Messages waiting in `outq` are not lent yet, so the window does
        // not see them: none are made while any wait, and at most a ring's
        // worth at once.
        let room = if self.outq.is_empty() { socket_api::FWD_CAP } else { 0 };
        let Some(rec) = self.conns.get_mut(conn) else { return false };
        let Kind::Source { msg: Some(_), left, size, .. } = &rec.app.kind else { return false };
        let (mut left, size) = (*left, *size);
        if rec.closing() {
            return false;
        }
        let window = (SOURCE_WINDOW / size).max(2) as u32;
        let mut sends = Vec::new();
        while left > 0 && sends.len() < room && rec.may_send() {
            let Kind::Source { msg: Some(msg), .. } = &rec.app.kind else { break };
            let id = msg.descs()[0];
            let in_flight = d.holds(id.pool, id.buf).map(|h| h.lent).unwrap_or(0);
            if in_flight + sends.len() as u32 >= window {
                break;
            }
            match msg.duplicate() {
                Ok(m) => sends.push(m),
                Err(_) => break,
            }
            rec.sent(size);
            left -= 1;
        }
        if let Kind::Source { left: l, .. } = &mut rec.app.kind {
            *l = left;
        }
        let done = left == 0;
        if done {
            // The holds lent to netstack keep the buffer alive until it
            // is sent; our own reference can go now.
            *msg_slot(&mut self.conns, conn) = None;
        }
        let size = size as u64;
        let waiting = !done;
        for m in sends {
            self.bytes_sourced += size;
            self.request(Request::Send { conn }.encode(), m);
        }
        if done {
            self.close(conn);
        }
        waiting
    }
}
