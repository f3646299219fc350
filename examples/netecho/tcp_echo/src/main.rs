//! tcp_echo: a socket client of netstack (examples/netecho/netecho.camkes).
//!
//! * **Echo, port `echo_port` (7):** every `Data` aggregate received on a
//!   connection is sent straight back on it, by reference: in iolite mode the
//!   bytes netstack received are the bytes it transmits, no copy here or
//!   below. EOF from the peer closes the connection after the echoed data.
//! * **Counters:** a connection to the echo port whose first data is exactly
//!   `STATS\n` gets one line of JSON with every counter of netdrv, netstack
//!   and tcp_echo (`{"connections":…,"drv_tx_frames":…,…}`) and is
//!   closed. The same counters are logged as a `stats: …` line then, and
//!   after every 1000th connection.
//! * **Source, port `source_port` (19):** the client sends one line
//!   `SEND <size> <count>\n`; we prepare one `<size>`-byte buffer (byte `i`
//!   is `i % 251`, at most 1 MiB) and send it `<count>` times by reference,
//!   at most a few messages in flight (counted as holds netstack has not
//!   returned yet), then close. The benchmark's guest→host bulk send.
//!
//! We run above netstack: we block on its `event` notification only, and
//! what we queue (requests, releases) is picked up when we block (it is in
//! its round whenever we run). Before blocking we ask it, through the
//! client region's "signal me" flags, for events, and, if requests wait
//! for ring room or a source for its buffers, for room or releases.
#![no_std]
#![no_main]
// Sends that do not fit hand the aggregate back by value (`outbox`);
// an aggregate is a few hundred bytes, which is fine.
#![allow(clippy::result_large_err)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use component_runtime::{log, warn};
use core::fmt::Write;
use iolite::{Aggregate, Domain, Duplex, Guard, Next, PeerId, RwRegion, Trust, Want};
use nic_api::DrvCounter;
use outbox::Outbox;
use socket_api::client::{Conns, Notice};
use socket_api::{ConnId, CounterPage, ErrorCode, Event, Request, StackCounter};

component_runtime::component_entry!(main);
component_runtime::global_heap!(1 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/tcp_echo.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, SOCK_POOL};
const ECHO_PORT: u16 = glue::attributes::ECHO_PORT as u16;
const SOURCE_PORT: u16 = glue::attributes::SOURCE_PORT as u16;
const NETSTACK: PeerId = PeerId(0);
const _: () = assert!(glue::client::SIZE >= socket_api::REGION_BYTES);
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

// An aggregate is a fixed 16-slice array kept inline on purpose (no
// allocation per message); one per source connection is cheap.
#[allow(clippy::large_enum_variant)]
enum Kind {
    /// Echo; `first` until the first data arrived.
    Echo { first: bool },
    /// Source: the command line so far, then the message and what is left.
    Source { line: String, msg: Option<Aggregate<'static>>, left: u64, size: usize },
}

/// What we keep of a connection (its record in `Echo::conns`, which also
/// keeps our sends against netstack's credit and whether we closed it).
struct Conn {
    kind: Kind,
    /// Echoes beyond the credit, in order. Bounded by what netstack lends
    /// us: it gives no more data while our echoes are held back.
    held: VecDeque<Aggregate<'static>>,
    /// The peer finished: close once `held` is sent.
    close_after_held: bool,
}

struct Echo {
    d: &'static Domain,
    /// The netstack region: events on `net.rx`, requests on `net.tx`.
    net: Duplex<'static>,
    /// A corrupt ring or a forged event breaks it for good (reported once).
    guard: Guard,
    /// A source waits for netstack to return its buffers.
    sources_wait: bool,
    /// Requests (tag, aggregate) waiting for room in `net.tx`, in order.
    /// Sources add to it only while it is empty, at most a ring's worth;
    /// events (a ring's worth per run) one request each.
    outq: Outbox<(u64, Aggregate<'static>)>,
    conns: Conns<Conn>,
    connections: u64,
    closed: u64,
    bytes_echoed: u64,
    bytes_sourced: u64,
    errors: u64,
    stats_requests: u64,
    drv: &'static CounterPage,
    stk: &'static CounterPage,
}

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    // SAFETY: the pool dataports are mapped as declared for as long as we
    // run, and used only through this domain.
    unsafe {
        glue_rt::map_pool!(owned d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
        glue_rt::map_pool!(foreign d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
    }
    // SAFETY: the client dataport, mapped read-write for our lifetime,
    // shared with netstack only, which attaches after we initialised it (it
    // runs below us). Received data is echoed by reference: no copy stage.
    let net = unsafe {
        let region = RwRegion::from_raw_parts(glue::client::VADDR as *mut u8, glue::client::SIZE).expect("client");
        socket_api::init_client(d, NETSTACK, region).expect("client")
    };
    // SAFETY: the counter pages, mapped read-only; we only load from them.
    let (drv, stk) = unsafe {
        (CounterPage::at(glue::drv_stats::VADDR as *const u8), CounterPage::at(glue::stack_stats::VADDR as *const u8))
    };
    let mut e = Echo {
        d,
        net,
        guard: Guard::new(),
        sources_wait: false,
        outq: Outbox::new(4 * socket_api::FWD_CAP),
        conns: Conns::new(),
        connections: 0,
        closed: 0,
        bytes_echoed: 0,
        bytes_sourced: 0,
        errors: 0,
        stats_requests: 0,
        drv,
        stk,
    };
    e.request(Request::Listen { port: ECHO_PORT, backlog: 48 }.encode(), Aggregate::new(d));
    e.request(Request::Listen { port: SOURCE_PORT, backlog: 2 }.encode(), Aggregate::new(d));
    loop {
        e.flush();
        // netstack is in its round whenever we run: it takes what we queued
        // when we return, so there is nobody to signal.
        let _ = e.net.flush();
        let want = Want { data: e.guard.broken().is_none(), releases: e.sources_wait, room: !e.outq.is_empty() };
        if !e.net.arm(want) {
            glue::event::wait();
        }
        e.net.disarm();
        e.handle_events();
    }
}

impl Echo {
    /// Sends a request (in order behind earlier ones waiting for ring
    /// room). One that finds the queue full is lost: counted and reported.
    fn request(&mut self, tag: u64, agg: Aggregate<'static>) {
        let tx = &mut self.net.tx;
        if self.outq.send((tag, agg), |m| socket_api::send_request(tx, m)).is_err() {
            self.errors += 1;
            if self.outq.refused() <= 10 {
                warn!("request {tag:#x} dropped: {} requests wait for ring room", self.outq.len());
            }
        }
    }

    /// Sends what waits and makes progress on sources; notes whether a
    /// source waits for its buffers.
    fn flush(&mut self) {
        let _ = self.net.tx.poll_releases();
        let tx = &mut self.net.tx;
        self.outq.drain(|m| socket_api::send_request(tx, m));
        let ids: alloc::vec::Vec<ConnId> = self.conns.ids().collect();
        let mut waiting = false;
        for id in ids {
            waiting |= self.pump_source(id);
        }
        self.sources_wait = waiting;
    }

    fn handle_events(&mut self) {
        loop {
            let r = match self.guard.recv(&mut self.net.rx) {
                Next::Msg(r) => r,
                Next::Idle | Next::Wait(_) => break,
                Next::Refused(_) => {
                    self.errors += 1;
                    continue;
                }
                Next::Broke(e) => {
                    self.errors += 1;
                    warn!("channel client.A from netstack broken: {e:?}");
                    break;
                }
            };
            let Some(ev) = Event::decode(r.tag) else {
                self.errors += 1;
                continue;
            };
            if let Some(notice) = self.conns.event(ev) {
                self.on_notice(notice, r.agg);
            }
        }
    }

    /// One event the connection table left for us (`agg`: its data).
    fn on_notice(&mut self, notice: Notice<Conn>, agg: Aggregate<'static>) {
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

    fn close(&mut self, conn: ConnId) {
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

    fn start_source(&mut self, conn: ConnId, cmd: &str) {
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
    fn pump_source(&mut self, conn: ConnId) -> bool {
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
        let mut sends = alloc::vec::Vec::new();
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

    fn counters_json(&self, out: &mut String) {
        let mode = iolite::BUILD_COPY_MODE.name();
        let _ = write!(
            out,
            "{{\"copy_mode\":\"{mode}\",\"connections\":{},\"closed\":{},\"bytes_echoed\":{},\"bytes_sourced\":{},\"echo_errors\":{},\"stats_requests\":{},\"echo_bytes_copied\":{}",
            self.connections,
            self.closed,
            self.bytes_echoed,
            self.bytes_sourced,
            self.errors,
            self.stats_requests,
            self.d.stats().bytes_copied,
        );
        let mut first = false;
        let _ = self.drv.write_json::<DrvCounter>(out, &mut first);
        let _ = self.stk.write_json::<StackCounter>(out, &mut first);
        out.push_str("}\n");
    }

    fn log_stats(&self) {
        let mut s = String::new();
        self.counters_json(&mut s);
        log!("stats: {}", s.trim_end());
    }

    fn send_stats(&mut self, conn: ConnId) {
        let mut s = String::new();
        self.counters_json(&mut s);
        log!("stats: {}", s.trim_end());
        match self.d.alloc(APP_POOL, s.len()) {
            Ok(mut b) => {
                b.writable()[..s.len()].copy_from_slice(s.as_bytes());
                if let Ok(a) = b.seal(s.len()) {
                    self.request(Request::Send { conn }.encode(), a);
                }
            }
            Err(_) => warn!("stats: app pool exhausted"),
        }
        self.close(conn);
    }
}
