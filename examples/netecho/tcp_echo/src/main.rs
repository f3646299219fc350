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
//!
//! The shell (`component_runtime::shell`): one peer, netstack, and a round
//! that takes its events and sends what they asked for. netstack is not
//! restartable in this assembly and we are not subscribed to the system
//! events, so the peer is its region and a guard, without a death watch
//! (`component_runtime::link`). What a connection does: `conn`; the
//! source: `source`; the counters: `stats`.
#![no_std]
#![no_main]
// Sends that do not fit hand the aggregate back by value (`outbox`);
// an aggregate is a few hundred bytes, which is fine.
#![allow(clippy::result_large_err)]

extern crate alloc;

mod conn;
mod source;
mod stats;

use alloc::boxed::Box;
use component_runtime::shell::{self, Round, Shell, Then};
use component_runtime::warn;
use iolite::{Aggregate, Domain, Duplex, Guard, Next, PeerId, RwRegion, Trust, Want};
use outbox::Outbox;
use socket_api::client::Conns;
use socket_api::{ConnId, CounterPage, Event, Request};

use conn::Conn;

component_runtime::component_entry!(main);
component_runtime::global_heap!(1 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/tcp_echo.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, SOCK_POOL};
const ECHO_PORT: u16 = glue::attributes::ECHO_PORT as u16;
const SOURCE_PORT: u16 = glue::attributes::SOURCE_PORT as u16;
const NETSTACK: PeerId = PeerId(0);
const _: () = assert!(glue::client::SIZE >= socket_api::REGION_BYTES);

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
    /// netstack's connections, one record each (our sends against its
    /// credit, whether we closed it, and what we keep: [`Conn`]).
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
    let mut e = Echo::init();
    e.request(Request::Listen { port: ECHO_PORT, backlog: 48 }.encode(), Aggregate::new(e.d));
    e.request(Request::Listen { port: SOURCE_PORT, backlog: 2 }.encode(), Aggregate::new(e.d));
    shell::run(e)
}

/// Our rounds: netstack's events, then what they asked for goes out;
/// before we block, netstack is asked to signal us.
impl Shell for Echo {
    fn notified(&mut self, round: Round) -> Then {
        // The first round only sends the listens we queued as we started.
        if round.number > 0 {
            self.net.disarm();
            self.handle_events();
        }
        self.flush();
        // netstack is in its round whenever we run: it takes what we queued
        // when we return, so there is nobody to signal.
        let _ = self.net.flush();
        Then::Wait
    }

    fn arm(&mut self) -> bool {
        let want =
            Want { data: self.guard.broken().is_none(), releases: self.sources_wait, room: !self.outq.is_empty() };
        self.net.arm(want)
    }

    fn wait(&mut self) -> u64 {
        glue::event::wait() as u64
    }
}

impl Echo {
    /// Our pools, netstack's region (we initialise it: netstack runs below
    /// us and attaches after) and the counter pages.
    fn init() -> Echo {
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        // SAFETY: the pool dataports are mapped as declared for as long as
        // we run, and used only through this domain.
        unsafe {
            glue_rt::map_pool!(owned d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
            glue_rt::map_pool!(foreign d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
        }
        // SAFETY: the client dataport, mapped read-write for our lifetime,
        // shared with netstack only, which attaches after we initialised it
        // (it runs below us). Received data is echoed by reference: no copy
        // stage.
        let net = unsafe {
            let region = RwRegion::from_raw_parts(glue::client::VADDR as *mut u8, glue::client::SIZE).expect("client");
            socket_api::init_client(d, NETSTACK, region).expect("client")
        };
        // SAFETY: the counter pages, mapped read-only; we only load from them.
        let (drv, stk) = unsafe {
            (
                CounterPage::at(glue::drv_stats::VADDR as *const u8),
                CounterPage::at(glue::stack_stats::VADDR as *const u8),
            )
        };
        Echo {
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
        }
    }

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

    /// netstack's events, as far as they go: each to the connection table,
    /// and what it leaves for us to [`Echo::on_notice`].
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
}
