//! The httpd component: `httpd::Server` on seL4 (camkes/iolite.camkes).
//!
//! * **netstack** (`client` duplex, as tcp_echo; the `socket-api` protocol): we
//!   listen on `port` and turn socket events into `Server` calls; every
//!   `Action::Send` is a `Send` request carrying the aggregate **by
//!   reference** (the header from our pool, the body slices of fs's file
//!   cache). We run above netstack: when it signals us it waits until we
//!   are done, and finds our requests in the ring. When it waits for them
//!   (the region's "signal me" flags: something else woke us, a CGI reply
//!   or the ticker), we `kick` it. Before we block we ask it for events,
//!   and, while we hold output back, for our buffers or for it to take
//!   what we sent.
//! * **fs** (`FsIoLite` RPC + the `fs_channel`): [`FsSource`] implements
//!   `FileSource`: `stat` + `open` by path, `read` = an RPC that queues the
//!   range on the channel as aggregates of the cache's buffers, which we
//!   receive at once (fs has answered by then).
//! * **cgi** (`cgi_chan`, a duplex: requests A, replies B; see
//!   `cgi_api::chan`): the cgi runs below us (a CGI that spins harms nobody
//!   above it). Requests go on A and we signal `cgi_go` if it waits for
//!   them; it answers on B and signals our `wake` if we wait for replies. A request is its environment and body in our CGI
//!   request pool (`cgi_req_pool`), the only pool of ours the cgi maps: we
//!   copy the body there from netstack's socket pool (counted as
//!   `cgi_body_bytes_copied`), so the cgi sees its own requests and no
//!   other client's bytes. When the cgi restarts (a fault, restarted by the
//!   supervisor) it initialises the region again (a new generation) and wakes us:
//!   every request the dead incarnation had not answered gets 502, we forget
//!   its holds and attach to the fresh channels. Requests that arrive
//!   meanwhile are held (`Server::cgi_down`) and handed to the new
//!   incarnation in arrival order once it attached (`Server::cgi_up`). No answer within
//!   `cgi_timeout_ms` is 504 (`Server::tick`), and then we ask the
//!   supervisor to restart the cgi (the assembly grants it:
//!   `httpd.may_restart = ["cgi"]`): a CGI that spins would otherwise keep
//!   the component busy for good, and every later request would time out
//!   too. The fresh incarnation comes back as after a fault. A cgi that
//!   breaks its reply channel (a corrupt ring, a forged reference, parts
//!   beyond its window) is restarted the same way at once: the channel is
//!   never read again. A streamed answer's parts go to `Server::cgi_part`;
//!   the server's credits and cancels go back on the request channel
//!   after each round (`send_controls`).
//! * **Time**: the ticker's clock page (PIT ticks, boot time from the RTC);
//!   the ticker wakes us every 100 ms for `Server::tick`.
//! * **Counters**: the `httpd_stats` counter page (`httpd_api::HttpdCounter`,
//!   read by the cgi for /cgi-bin/stats; its *I/O bytes held*, our pool's
//!   pages in use, by fs's memory budget), refreshed on every tick and
//!   before every CGI request.
//!
//! Lines it prints: `[httpd] listening on port 80`, `[httpd] cgi attached
//! (generation G)`, `[httpd] cgi timed out: asking the supervisor to restart
//! it` (or `cgi broke its reply channel: ...`, after `channel cgi_chan.B
//! from cgi broken: WHY`), `[httpd] cgi restarted (generation G): N requests failed with 502`,
//! `[httpd] cgi generation G: N requests held while it was away handed to it (R refused)`.
//!
//! The files: this one holds the component's state and its loop (flush,
//! arm, wait, round) and publishes the counters; `start` maps the pools
//! and builds the component; `net` keeps our netstack connections (one
//! record each) and reads netstack's events; `pump` pulls output each
//! round; `cgi` carries CGI calls, bodies and replies; `cgi_life` follows
//! the cgi's restarts and lends it priority; `fs` is the file source;
//! `peers` reads the system events page (our peers' deaths) and answers
//! `/healthz`; `logs` prints the access and error logs.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use cgi_api::wire::Control as CgiControl;
use component_runtime::link::{Deaths, Link};
use component_runtime::log;
use component_runtime::shell::{self, Round, Shell, Then};
use component_runtime::time::ClockPage;
use httpd::{Clock, ConnId as HConn, Server};
use iolite::duplex::Control;
use iolite::{Aggregate, Copier, CopyMode, Domain, Duplex, PeerId, Want, BUILD_COPY_MODE};
use outbox::Outbox;
use socket_api::client::Conns;
use socket_api::{ConnId, Request};

component_runtime::component_entry!(main);
component_runtime::global_heap!(8 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/httpd.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, BODY_POOL, CGI_REQ_POOL, FILE_POOL};

const NETSTACK: PeerId = PeerId(0);
const FS: PeerId = PeerId(1);
const CGI: PeerId = PeerId(2);
/// The assembly's port: what a site disk's `listen_port` replaces.
const PORT: u16 = glue::attributes::PORT as u16;
/// The port we listen on: [`PORT`] or the site's (`start::site_values`),
/// set once before the first listen; a restart of netstack listens anew
/// on the same.
static LISTEN_PORT: core::sync::atomic::AtomicU16 = core::sync::atomic::AtomicU16::new(PORT);

/// The port we listen on ([`LISTEN_PORT`]).
fn listen_port() -> u16 {
    LISTEN_PORT.load(core::sync::atomic::Ordering::Relaxed)
}
const _: () = assert!(glue::client::SIZE >= socket_api::REGION_BYTES);
const _: () = assert!(glue::cgi_chan::SIZE >= cgi_api::chan::REGION_BYTES);
const _: () = assert!(glue::fs_channel::SIZE >= fs_api::CHANNEL_BYTES);

/// Most file bytes one `FileSource::read` asks fs for: 15 cache chunks,
/// so the range touches at most 16 and fits one aggregate (one message).
/// In posix mode each message is copied into one contiguous buffer of our
/// pool at our end of the channel: smaller pieces then, which a fragmented
/// pool can still place.
const READ_MAX: u64 = match BUILD_COPY_MODE {
    CopyMode::Posix => 64 * 1024,
    _ => fs_api::ONE_MESSAGE_READ as u64,
};
/// Pull no more output while this many quarters of our pool are in use
/// (posix copies file data into it, and netstack holds those copies until
/// its socket buffer takes them).
const POOL_LOW_QUARTERS: u64 = match BUILD_COPY_MODE {
    CopyMode::Posix => 2,
    _ => 3,
};
/// Requests for netstack that may wait for ring room (`Httpd::outq`):
/// `pump` pulls nothing while a ring's worth waits and stops pulling at
/// two rings' worth, and one round of events (at most a ring of them) adds
/// at most two each (a refused connection's 503 and its close).
const OUTQ_CAP: usize = 4 * socket_api::FWD_CAP;
/// `pump` stops pulling output at this many requests waiting.
const OUTQ_PUMP_MAX: usize = 2 * socket_api::FWD_CAP;
/// Bytes pulled from the server per round before yielding to netstack.
const ROUND_BYTES: usize = 2 << 20;
/// Sends and bytes pulled for one connection per round (see `pump`).
const CONN_ROUND_SENDS: usize = 16;
const CONN_ROUND_BYTES: usize = 512 << 10;
/// Longest path we pass to fs (the RPC glue carries at most 800 bytes).
const MAX_PATH: usize = 768;
/// Interval of `Server::tick`.
const TICK_MS: u64 = 100;
/// The cgi's instance name in the assembly (what we ask the supervisor to
/// restart; `httpd.may_restart` must name it): our cgi channel's other end.
const CGI_INSTANCE: &str = glue::cgi_chan::PEER;
/// `httpd.test_hooks = 1` (test images only): a GET of /.fault/httpd faults.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
/// fs's instance name in the assembly (its record in the events page): the
/// server we call.
const FS_INSTANCE: &str = glue::fs::PEER;
/// netstack's instance name (its record in the events page): the client
/// region's other end.
const NETSTACK_INSTANCE: &str = glue::client::PEER;
/// Lending the cgi our priority (`lend_cgi`): after this long without
/// progress on our work, for at most this long, then not for this long.
const CGI_STARVED_MS: u64 = 50;
const CGI_LEND_MS: u64 = 20;
const CGI_LEND_GAP_MS: u64 = 80;
/// Controls for the cgi (credits, cancels) that may wait for room in the
/// request ring: four rings' worth (one credit per stream and round).
const CONTROLS_CAP: usize = 4 * cgi_api::chan::FWD_CAP;

// ---- time --------------------------------------------------------------

/// The ticker's clock page.
#[derive(Clone, Copy)]
pub struct TickClock(&'static ClockPage);

impl Clock for TickClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
    fn unix_secs(&self) -> u64 {
        self.0.unix_secs()
    }
}

mod cgi;
mod cgi_life;
mod fs;
mod logs;
mod net;
mod peers;
mod pump;
mod start;
use cgi::Cgi;
use fs::FsSource;

// ---- the component -----------------------------------------------------------

struct Httpd {
    d: &'static Domain,
    srv: Server<'static, FsSource, TickClock>,
    /// netstack: its region (events on `net.chan.rx`, through
    /// `net.rx_guard`, as the cgi's replies: see `Cgi::guard`; requests on
    /// `net.chan.tx`) and its death watch (`netstack.restartable`).
    net: Link<Duplex<'static>>,
    /// The copy modes copy received data at our end (as recv(2)).
    events_copier: Copier<'static>,
    /// Requests (tag, aggregate) waiting for room in `net.chan.tx`, in order.
    outq: Outbox<(u64, Aggregate<'static>)>,
    /// netstack's connections, one record each (the server connection it
    /// serves, its send window and input switches; see `net`). We keep
    /// within the window's send limit, so netstack never refuses a send of
    /// ours, however long it was kept from running; and within its byte
    /// limit, so a peer that reads through a small window pins about one
    /// window of the file cache, not the rounds' worth we would otherwise
    /// pull before netstack told us to stop.
    conns: Conns<HConn>,
    /// Server connection → netstack connection, for those the server has
    /// not closed yet.
    by_srv: BTreeMap<u32, ConnId>,
    /// Times a connection waited for credit.
    credit_waits: u64,
    /// Server connections with output to pull.
    ready: Vec<HConn>,
    /// Connections whose file read fs refused for now (busy): pumped again
    /// in the next round.
    fs_waiting: Vec<HConn>,
    cgi: Option<Cgi>,
    cgi_gen: u64,
    cgi_control: Control,
    /// CGI request id → server connection.
    cgi_pending: BTreeMap<u32, HConn>,
    /// A CGI reply waits for room in our pool (copy modes).
    cgi_stuck: bool,
    /// Credits and cancels for the cgi's streams waiting for room in the
    /// request ring, and those lost to a full queue.
    cgi_controls: Outbox<CgiControl>,
    cgi_controls_dropped: u64,
    /// Parts of streamed request bodies waiting for room (in the CGI
    /// request pool, or in the request ring), in order: (connection, call,
    /// part, more). At most the window's worth per upload.
    body_wait: alloc::collections::VecDeque<(HConn, u32, Aggregate<'static>, bool)>,
    /// Connections whose request body streams to the cgi (their input may
    /// be paused), and those whose input we asked netstack to pause.
    uploading: BTreeSet<HConn>,
    /// Hand-off switches asked of netstack (on and off).
    hand_off_switches: u64,
    /// Request body bytes passed to the cgi by reference (from body_pool).
    cgi_body_by_ref: u64,
    last_tick: u64,
    // counters of the component (beyond the server's)
    static_copied: u64,
    cgi_copied: u64,
    /// Request bodies copied into the CGI request pool.
    cgi_body_copied: u64,
    /// File buffers in CGI replies that fs vouched for, and that it did
    /// not (the cgi named a buffer it does not hold).
    cgi_vouched: u64,
    cgi_unheld_refs: u64,
    request_copied: u64,
    send_errors: u64,
    cgi_restarts: u64,
    /// Restarts of the cgi we asked the supervisor for (timeouts), and
    /// requests it refused or could not carry out.
    cgi_restart_requests: u64,
    cgi_restart_failures: u64,
    cgi_unavailable: u64,
    /// Body parts that waited for room, and input pauses asked of netstack.
    body_parts_deferred: u64,
    input_pauses: u64,
    /// Lending the cgi our priority while it is starved (see `lend_cgi`):
    /// since when it is lent, when it was last taken back, when the cgi
    /// last made progress for us, and how often it was lent.
    cgi_lent_since: Option<u64>,
    cgi_returned_at: u64,
    cgi_progress_at: u64,
    cgi_lends: u64,
    cgi_lend_failures: u64,
    wakeups: u64,
    /// Our side of the death protocol: the system events page (if the
    /// assembly subscribes us) and our own quarantine after a restart.
    deaths: Deaths,
    /// The cgi's death watch (its channels are `cgi`, attached per
    /// generation): a death we still have to confirm once nothing we or
    /// netstack hold came from it (`Domain::tainted`).
    cgi_peer: Link<()>,
    /// fs's death watch (its channel is the file source's; `fs_api::client`
    /// reconnects).
    fs_peer: Link<()>,
    /// Times netstack died under us, and the connections that went with it.
    netstack_restarts: u64,
    netstack_conns_lost: u64,
    /// What the access and error logs may print (see `logs`).
    log_rate: httpd::server::LogRate,
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    start::map_pools(d);
    let mut me = Httpd::new(d, start);
    if start.restarts > 0 {
        // The cgi may still work on requests of our dead incarnation, on
        // channels it left in any state: a fresh cgi drops them (its death
        // runs the protocol here as any other).
        log!("restarted (restart {}): asking the supervisor to restart the cgi", start.restarts);
        me.restart_cgi("paired with our dead incarnation");
    }
    me.request(Request::Listen { port: listen_port(), backlog: 64 }.encode(), Aggregate::new(d));
    me.publish();
    shell::run(me)
}

/// Our rounds: what came (netstack's events, the cgi's replies, deaths,
/// the ticker), then what waits goes out; before we block, the peers are
/// asked to signal us.
impl Shell for Httpd {
    fn notified(&mut self, round: Round) -> Then {
        // The first round only sends what we queued as we started.
        if round.number > 0 {
            self.net.chan.disarm();
            if let Some(c) = &mut self.cgi {
                c.link.disarm();
            }
            self.round();
        }
        self.flush();
        Then::Wait
    }

    fn arm(&mut self) -> bool {
        self.arm_peers()
    }

    fn wait(&mut self) -> u64 {
        let badge = glue::wake::wait();
        self.wakeups += 1;
        badge as u64
    }
}

impl Httpd {
    /// One round: deaths and the cgi's generation, netstack's events, the
    /// connections that became ready, the cgi's replies, the ticker; then
    /// the output is pulled.
    fn round(&mut self) {
        self.check_events();
        self.check_cgi();
        self.handle_events();
        // Idle connections closed to make room for new ones.
        let woken = self.srv.take_woken();
        self.ready.extend(woken);
        let waiting = core::mem::take(&mut self.fs_waiting);
        self.ready.extend(waiting);
        self.handle_cgi_replies();
        let now = self.srv.clock().now_ms();
        self.lend_cgi(now);
        if now.saturating_sub(self.last_tick) >= TICK_MS {
            self.last_tick = now;
            let timeouts = self.srv.stats().cgi_timeouts;
            let ready = self.srv.tick();
            self.ready.extend(ready);
            if self.srv.stats().cgi_timeouts != timeouts {
                self.restart_cgi("timed out");
            }
            self.publish();
        }
        self.send_body_parts();
        self.pump();
        self.send_controls();
        self.sync_input_pauses();
        self.print_logs();
    }

    /// Sends what waits, returns releases, and signals netstack and the
    /// cgi if they wait for any of it.
    fn flush(&mut self) {
        let _ = self.net.chan.tx.poll_releases();
        let tx = &mut self.net.chan.tx;
        self.outq.drain(|m| socket_api::send_request(tx, m));
        let _ = self.srv.source_mut().rx.flush_releases();
        self.drain_controls();
        if let Some(c) = &mut self.cgi {
            let _ = c.link.tx.poll_releases();
            if c.link.flush() {
                glue::cgi_go::emit();
            }
        }
        if self.net.chan.flush() {
            // netstack waits for our requests (or buffers): it is not in a
            // round of its own, so wake it up.
            glue::kick::emit();
        }
    }

    /// Before blocking: asks netstack for events (unless the copy stage
    /// waits for room in our pool), for our buffers back while we hold
    /// output for lack of pool or fs, and for it to take our requests while
    /// some wait for ring room or connections yielded the round; asks the
    /// cgi for replies (unless one waits for room). True if something
    /// already came in: run again instead.
    fn arm_peers(&mut self) -> bool {
        let stalled = self.events_copier.stalled();
        let yielded = self.ready.iter().any(|&id| !self.must_wait(id));
        let waiting = !self.ready.is_empty() || !self.fs_waiting.is_empty() || self.cgi_stuck || stalled;
        let net_ok = self.net.rx_guard.broken().is_none();
        let want = Want { data: net_ok && !stalled, releases: waiting, room: !self.outq.is_empty() || yielded };
        let from_net = self.net.chan.arm(want);
        let from_cgi = match &mut self.cgi {
            Some(c) => {
                let data = !self.cgi_stuck && !c.copier.stalled() && c.guard.broken().is_none();
                c.link.arm(Want { data, ..Want::default() })
            }
            None => false,
        };
        from_net || from_cgi
    }

    /// Our counters, for the cgi (/cgi-bin/stats).
    fn publish(&mut self) {
        use httpd_api::HttpdCounter as H;
        let mut v = httpd_api::Values::<H>::new();
        self.srv.counters(&mut v);
        v[H::CgiControlsDropped] = self.cgi_controls_dropped;
        v[H::StaticBytesCopied] = self.static_copied;
        v[H::CgiBytesCopied] = self.cgi_copied;
        v[H::RequestBytesCopied] = self.request_copied;
        v[H::CgiBodyBytesCopied] = self.cgi_body_copied;
        v[H::CgiBodyBytesByRef] = self.cgi_body_by_ref;
        v[H::HandOffSwitches] = self.hand_off_switches;
        v[H::CgiBodyPartsDeferred] = self.body_parts_deferred;
        v[H::InputPauses] = self.input_pauses;
        v[H::CgiFileRefsVouched] = self.cgi_vouched;
        v[H::CgiFileRefsUnheld] = self.cgi_unheld_refs;
        let ds = self.d.stats();
        v[H::RejectedDescriptors] = ds.rejected_descriptors;
        v[H::RejectedForeignPool] = ds.rejected_foreign_pool;
        v[H::RejectedNotGranted] = ds.rejected_not_granted;
        v[H::SendErrors] = self.send_errors;
        v[H::SendCreditWaits] = self.credit_waits;
        let fs = self.srv.source_mut().client.stats();
        v[H::FsReconnects] = fs.reconnects;
        v[H::FsReopens] = fs.reopens;
        let (refs, kept, kept_bytes) = self.srv.source_mut().refs();
        v[H::FileRefsHits] = refs.hits;
        v[H::FileRefsInserts] = refs.inserts;
        v[H::FileRefsEvictions] = refs.evictions;
        v[H::FileRefsClears] = refs.clears;
        v[H::FileRefsKept] = kept as u64;
        v[H::FileRefsBytes] = kept_bytes as u64;
        v[H::FsRetries] = fs.retries;
        v[H::CgiRestarts] = self.cgi_restarts;
        v[H::NetstackRestarts] = self.netstack_restarts;
        v[H::NetstackConnectionsLost] = self.netstack_conns_lost;
        v[H::CgiRestartRequests] = self.cgi_restart_requests;
        v[H::CgiRestartFailures] = self.cgi_restart_failures;
        v[H::CgiUnavailable] = self.cgi_unavailable;
        v[H::CgiPriorityLends] = self.cgi_lends;
        v[H::CgiGeneration] = self.cgi_gen;
        v[H::Wakeups] = self.wakeups;
        v[H::ConnectionsOpen] = self.by_srv.len() as u64;
        v[H::ConnectionsSendFull] = self.conns.blocked_count() as u64;
        v[H::HeapUsed] = heap_used() as u64;
        v[H::NetstackRequestsQueued] = self.outq.len() as u64;
        v[H::NetstackRequestsRefused] = self.outq.refused();
        if let Ok(p) = self.d.pool_stats(APP_POOL) {
            v[H::PoolPages] = u64::from(p.pages);
            v[H::PoolPagesInUse] = u64::from(p.pages_in_use);
            // What we hold of the data path's memory: the application
            // pool's pages (headers, environments; in posix mode the
            // copies of file data).
            v.set_io_bytes_held(u64::from(p.pages_in_use) * iolite::PAGE_SIZE as u64);
        }
        v[H::CopyMode] = BUILD_COPY_MODE.number();
        v[H::AccessLogRateDropped] = self.log_rate.dropped_total();
        // SAFETY: our counter page (4 KiB, page-aligned), mapped
        // read-write, written only here.
        unsafe { httpd_api::CounterPage::at(glue::httpd_stats::VADDR as *const u8) }.publish(&v);
    }
}
