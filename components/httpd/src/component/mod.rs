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

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use cgi_api::wire::{Control as CgiControl, Reply};
use component_runtime::time::ClockPage;
use component_runtime::{error, log, warn};
use glue_rt::map_pool;
use glue_rt::pools::rw;
use httpd::{Action, Clock, Config, ConnId as HConn, FileRefs, FileRefsLimits, Remote, Server};
use iolite::duplex::Control;
use iolite::{
    Aggregate, Boundary, Copier, CopyMode, Domain, Duplex, DuplexAttach, Guard, Next, PeerId, Trust, Want,
    BUILD_COPY_MODE, FLAG_EOF,
};
use outbox::Outbox;
use socket_api::{ErrorCode, Event, Request, SendCredit};

component_runtime::component_entry!(main);
component_runtime::global_heap!(8 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/httpd.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, BODY_POOL, CGI_POOL, CGI_REQ_POOL, FILE_POOL, SOCK_POOL};

const NETSTACK: PeerId = PeerId(0);
const FS: PeerId = PeerId(1);
const CGI: PeerId = PeerId(2);
const PORT: u16 = glue::attributes::PORT as u16;
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
/// Why a CGI call was not sent.
enum Unsent {
    /// Failed with this status (no cgi attached, no room for its body).
    Failed(u32, cgi_api::Failure),
    /// The cgi went away just now: the call is held for the next
    /// incarnation (`Server::cgi_hold`). Boxed: the rare case.
    Away(Box<httpd::CgiCall<'static>>),
}

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
/// restart; `httpd.may_restart` must name it).
const CGI_INSTANCE: &str = "cgi";
/// `httpd.test_hooks = 1` (test images only): a GET of /.fault/httpd faults.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
/// fs's instance name in the assembly (its record in the events page).
const FS_INSTANCE: &str = "fs";
/// netstack's instance name (its record in the events page).
const NETSTACK_INSTANCE: &str = "netstack";
/// Lending the cgi our priority (`lend_cgi`): after this long without
/// progress on our work, for at most this long, then not for this long.
const CGI_STARVED_MS: u64 = 50;
const CGI_LEND_MS: u64 = 20;
const CGI_LEND_GAP_MS: u64 = 80;
/// Controls for the cgi (credits, cancels) that may wait for room in the
/// request ring: four rings' worth (one credit per stream and round).
const CONTROLS_CAP: usize = 4 * cgi_api::chan::FWD_CAP;

/// What a netstack connection's last `SendSpace` let us send, and what we
/// sent since.
struct Allowance {
    bytes: usize,
    sent: usize,
}

/// Why fs did not vouch for a file buffer in a CGI reply.
enum Vouch {
    /// No other client holds it: the cgi made the reference up.
    Forged(u32),
    /// Our quota of fs buffers is used up: the reply must wait or fail.
    Busy,
}

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

mod fs;
use fs::FsSource;

// ---- the component -----------------------------------------------------------

struct Cgi {
    /// Requests on `link.tx`, replies on `link.rx`.
    link: Duplex<'static>,
    /// The copy modes copy replies at our end.
    copier: Copier<'static>,
    /// Replies: a corrupt ring or forged descriptor breaks the channel
    /// (reported once); pending calls then time out and the cgi is
    /// restarted, which attaches fresh channels.
    guard: Guard,
}

struct Httpd {
    d: &'static Domain,
    srv: Server<'static, FsSource, TickClock>,
    /// The netstack region: events on `net.rx`, requests on `net.tx`.
    net: Duplex<'static>,
    /// The copy modes copy received data at our end (as recv(2)).
    events_copier: Copier<'static>,
    /// netstack's events: see `Cgi::guard`.
    events_guard: Guard,
    /// Requests (tag, aggregate) waiting for room in `net.tx`, in order.
    outq: Outbox<(u64, Aggregate<'static>)>,
    /// netstack connection → server connection, and back.
    by_net: BTreeMap<u32, HConn>,
    by_srv: BTreeMap<u32, u32>,
    /// netstack connections we closed whose Closed event has not come yet.
    closing: BTreeSet<u32>,
    /// netstack connections that said `SendFull` (their peer's window and
    /// netstack's slack are used up): nothing more is pulled for them from
    /// the file cache until `SendSpace`.
    net_full: BTreeSet<u32>,
    /// Our sends on each netstack connection against what it reported
    /// taken: we keep within `socket_api::SEND_CREDIT`, so netstack never
    /// refuses a send of ours, however long it was kept from running.
    credit: BTreeMap<u32, SendCredit>,
    /// Per netstack connection: the allowance its last `SendSpace` gave
    /// (`socket_api::send_allowance`: about what its peer's window and
    /// netstack's slack can take) and the bytes we sent since. At the
    /// allowance we pull no more for it until the next `SendSpace`, which
    /// netstack sends once it took them: a peer that reads through a small
    /// window so pins about one window of the file cache, not the rounds'
    /// worth we would otherwise pull before its `SendFull` reached us.
    allowance: BTreeMap<u32, Allowance>,
    /// Connections that wait for credit: their `SendsTaken` pumps them.
    credit_wait: BTreeSet<u32>,
    /// Times a connection waited for credit.
    credit_waits: u64,
    /// The peer netstack announced for the next accepted connection
    /// (`Event::Peer` comes right before its `Event::Accepted`).
    next_peer: Option<Remote>,
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
    rx_paused: BTreeSet<u32>,
    /// netstack connections handed off: their input goes to netstack's
    /// hand-off pool (`body_pool`) while a request body for the cgi
    /// arrives, so the body reaches the cgi by reference.
    handed_off: BTreeSet<u32>,
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
    /// The system events page (deaths of our peers), if the assembly
    /// subscribes us.
    sys_events: Option<component_runtime::events::Watcher>,
    /// The cgi's record in it.
    cgi_index: Option<usize>,
    /// The cgi died and its channel slot refuses everything until the new
    /// incarnation attaches (`Domain::peer_restarted`).
    cgi_dying: bool,
    /// A death of the cgi we still have to confirm to the supervisor, once
    /// nothing we or netstack hold came from it (`Domain::tainted`).
    cgi_unconfirmed: Option<u64>,
    /// The cgi's latest death we saw.
    cgi_death: u64,
    /// fs's record in the events page.
    fs_index: Option<usize>,
    /// A death of fs we still have to confirm, once nothing it gave us is
    /// in use here or downstream.
    fs_unconfirmed: Option<u64>,
    /// netstack's record in the events page (`netstack.restartable`).
    netstack_index: Option<usize>,
    /// netstack's latest death we saw, and whether we still have to
    /// confirm it (once nothing it gave us is in use here or downstream).
    netstack_death: u64,
    netstack_unconfirmed: Option<u64>,
    /// Times netstack died under us, and the connections that went with it.
    netstack_restarts: u64,
    netstack_conns_lost: u64,
    /// Our record in the events page.
    me: usize,
    /// Our death whose pool pages are still quarantined.
    own_quarantine: Option<u64>,
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    // SAFETY (all pools): the dataports are mapped as the assembly
    // declares for as long as we run, used only through this domain.
    unsafe {
        map_pool!(owned d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
        map_pool!(foreign d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
        map_pool!(foreign d, BODY_POOL, glue::body_pool, Trust::Trusted).expect("body pool");
        map_pool!(foreign d, FILE_POOL, glue::file_pool, Trust::Trusted).expect("file pool");
        // CGI output: the cgi can rewrite its buffers, so nothing keys a
        // cache on them and headers are parsed from a private copy.
        map_pool!(foreign d, CGI_POOL, glue::cgi_pool, Trust::Untrusted).expect("cgi pool");
        map_pool!(owned d, CGI_REQ_POOL, glue::cgi_req_pool, Trust::Trusted).expect("cgi request pool");
    }
    // After a restart of ours: the pages our dead incarnation left in use
    // (headers netstack and the NIC may still send, requests the cgi may
    // still read) stay quarantined until every peer settled that death.
    let quarantined = d.quarantined_pages(APP_POOL).unwrap_or(0) + d.quarantined_pages(CGI_REQ_POOL).unwrap_or(0);
    if quarantined > 0 {
        log!("{quarantined} pool pages of the dead incarnation quarantined until its death is settled");
    }
    // Who may read the CGI request pool (echoed bodies go to the network).
    d.set_pool_acl(CGI_REQ_POOL, &[CGI, NETSTACK]).expect("cgi request pool acl");
    // What each peer may reference in what it sends us (the assembly's
    // grant lists); our own buffers only where we lent them to that peer.
    d.set_peer_pools_named(NETSTACK, glue::attributes::CLIENT_REFS, glue::pools::ALL).expect("netstack grant list");
    d.set_peer_pools_named(FS, glue::attributes::FS_CHANNEL_REFS, glue::pools::ALL).expect("fs grant list");
    d.set_peer_pools_named(CGI, glue::attributes::CGI_CHAN_REFS, glue::pools::ALL).expect("cgi grant list");

    // --- the netstack region: we run above netstack, so we set it up
    // now, before anything that could block ---
    // SAFETY: the client dataport, mapped read-write for our lifetime,
    // shared with netstack only, which attaches after we initialised it.
    let net =
        unsafe { socket_api::init_client(d, NETSTACK, rw(glue::client::VADDR, glue::client::SIZE)) }.expect("client");

    // --- fs: a (re)start of ours: fs forgets what an earlier
    // incarnation of ours had open, quarantines what it lent it (netstack
    // may still send it) and sets our channel up afresh before answering ---
    glue::fs::reset();
    let fs_rx = fs::attach(d);
    let copier = Copier::new(BUILD_COPY_MODE, Boundary::FileCacheToApp, Some(APP_POOL)).expect("copy pool");
    let sys_events = component_runtime::events::Watcher::new();
    let fs_index = sys_events.as_ref().and_then(|w| w.page().index_of(FS_INSTANCE));
    let client = fs_api::client::Client::new(fs::Glue { fs_index });
    // Whole small files by reference, where fs's buffers reach us by
    // reference: up to 64 of them, 64 KiB each, `file_refs_bytes` in all.
    let refs_bytes = if copier.copies() { 0 } else { glue::attributes::FILE_REFS_BYTES as usize };
    let refs = FileRefs::new(FileRefsLimits {
        entries: if refs_bytes == 0 { 0 } else { 64 },
        bytes: refs_bytes,
        file: 64 * 1024,
    });
    let src = FsSource { d, rx: fs_rx, copier, tag: 0, copied: 0, client, refs };

    let cfg = Config {
        server_port: PORT,
        server_name: String::from("iolite"),
        // Held while the cgi is away: as many calls as a fresh request ring
        // takes at once, and bodies up to half the CGI request pool (the
        // dead incarnation's requests may stay quarantined there until its
        // death settles; each call also needs room for its environment).
        cgi_queue_max: cgi_api::chan::FWD_CAP,
        cgi_queue_bytes: glue::cgi_req_pool::SIZE / 2,
        // Slow and fragmented input: the assembly's policy, within the
        // bounds the assembly compiler enforces (its `POLICY_BOUNDS`).
        request_timeout_ms: glue::attributes::REQUEST_TIMEOUT_MS as u64,
        min_input_rate: glue::attributes::MIN_INPUT_RATE as u64,
        rate_grace_ms: glue::attributes::RATE_GRACE_MS as u64,
        max_input_slices: glue::attributes::MAX_INPUT_SLICES as usize,
        ..Config::default()
    };
    // SAFETY: the clock dataport, mapped read-only for our lifetime.
    let clock = TickClock(unsafe { ClockPage::at(glue::clock::VADDR) });
    let srv = Server::new(d, APP_POOL, src, clock, cfg);
    // SAFETY: the cgi_chan dataport, mapped read-write for our lifetime;
    // its control page is written by the cgi only.
    let cgi_control = unsafe { Control::of(rw(glue::cgi_chan::VADDR, glue::cgi_chan::SIZE), cgi_api::chan::GEOMETRY) }
        .expect("cgi_chan");
    let mut me = Httpd {
        d,
        srv,
        net,
        events_copier: Copier::new(BUILD_COPY_MODE, Boundary::NetToApp, Some(APP_POOL)).expect("copy pool"),
        events_guard: Guard::new(),
        outq: Outbox::new(OUTQ_CAP),
        by_net: BTreeMap::new(),
        by_srv: BTreeMap::new(),
        closing: BTreeSet::new(),
        net_full: BTreeSet::new(),
        next_peer: None,
        ready: Vec::new(),
        fs_waiting: Vec::new(),
        cgi: None,
        cgi_gen: 0,
        cgi_control,
        cgi_pending: BTreeMap::new(),
        cgi_stuck: false,
        cgi_controls: Outbox::new(CONTROLS_CAP),
        body_wait: alloc::collections::VecDeque::new(),
        uploading: BTreeSet::new(),
        rx_paused: BTreeSet::new(),
        handed_off: BTreeSet::new(),
        hand_off_switches: 0,
        cgi_body_by_ref: 0,
        cgi_controls_dropped: 0,
        last_tick: 0,
        static_copied: 0,
        cgi_copied: 0,
        cgi_body_copied: 0,
        cgi_vouched: 0,
        cgi_unheld_refs: 0,
        request_copied: 0,
        send_errors: 0,
        credit: BTreeMap::new(),
        allowance: BTreeMap::new(),
        credit_wait: BTreeSet::new(),
        credit_waits: 0,
        cgi_restarts: 0,
        cgi_restart_requests: 0,
        cgi_restart_failures: 0,
        cgi_unavailable: 0,
        body_parts_deferred: 0,
        input_pauses: 0,
        cgi_lent_since: None,
        cgi_returned_at: 0,
        cgi_progress_at: 0,
        cgi_lends: 0,
        cgi_lend_failures: 0,
        wakeups: 0,
        sys_events,
        cgi_index: None,
        fs_index,
        fs_unconfirmed: None,
        netstack_index: None,
        netstack_death: 0,
        netstack_unconfirmed: None,
        netstack_restarts: 0,
        netstack_conns_lost: 0,
        me: 0,
        own_quarantine: None,
        cgi_dying: false,
        cgi_unconfirmed: None,
        cgi_death: 0,
    };
    // Until the cgi attaches, CGI requests are held for it (503 after
    // `cgi_queue_timeout_ms`).
    me.srv.cgi_down();
    me.cgi_index = me.sys_events.as_ref().and_then(|w| w.page().index_of(CGI_INSTANCE));
    me.netstack_index = me.sys_events.as_ref().and_then(|w| w.page().index_of(NETSTACK_INSTANCE));
    me.me = start.instance as usize;
    // A cgi held down before we started is not coming (our watcher took
    // the page as seen): no request waits for it.
    if let (Some(i), Some(w)) = (me.cgi_index, me.sys_events.as_ref()) {
        if w.page().held_down(i) {
            log!("the cgi is held down by the supervisor: CGI requests get 503");
            let _ = me.srv.cgi_gone();
        }
    }
    me.own_quarantine = (quarantined > 0)
        .then(|| me.sys_events.as_ref().filter(|w| me.me < w.page().len()).map(|w| w.page().state(me.me).0))
        .flatten();
    if start.restarts > 0 {
        // The cgi may still work on requests of our dead incarnation, on
        // channels it left in any state: a fresh cgi drops them (its death
        // runs the protocol here as any other).
        log!("restarted (restart {}): asking the supervisor to restart the cgi", start.restarts);
        me.restart_cgi("paired with our dead incarnation");
    }
    me.request(Request::Listen { port: PORT, backlog: 64 }.encode(), Aggregate::new(d));
    me.publish();
    loop {
        // One turn of the loop: progress (component_runtime::liveness),
        // also when it goes round without waiting under load.
        component_runtime::sel4::progress();
        me.flush();
        if !me.arm() {
            glue::wake::wait();
            me.wakeups += 1;
        }
        me.net.disarm();
        if let Some(c) = &mut me.cgi {
            c.link.disarm();
        }
        me.round();
    }
}

impl Httpd {
    /// Sends a request to netstack (in order behind earlier ones waiting
    /// for ring room). `OUTQ_CAP` is never reached while `pump` keeps to
    /// `OUTQ_PUMP_MAX`; if it is, the request is lost: counted
    /// (`netstack_requests_refused`) and reported.
    fn request(&mut self, tag: u64, agg: Aggregate<'static>) {
        let tx = &mut self.net.tx;
        if let Err((tag, _)) = self.outq.send((tag, agg), |m| socket_api::send_request(tx, m)) {
            if self.outq.refused() <= 10 {
                error!("netstack request {tag:#x} dropped: {OUTQ_CAP} requests wait for ring room");
            }
        }
    }

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
    }

    /// Tells netstack where `conn`'s input goes next: its hand-off pool
    /// while a request body for the cgi arrives (the body is passed on by
    /// reference), the shared socket pool otherwise. Requests go in order,
    /// so a `100 Continue` sent after this finds the switch made.
    fn sync_hand_off(&mut self, id: HConn, conn: u32) {
        let want = self.srv.input_to_cgi(id);
        if want == self.handed_off.contains(&conn) {
            return;
        }
        if want {
            self.handed_off.insert(conn);
        } else {
            self.handed_off.remove(&conn);
        }
        self.hand_off_switches += 1;
        self.request(Request::HandOff { conn, on: want }.encode(), Aggregate::new(self.d));
    }

    /// A request body for the cgi as it may go: by reference when every
    /// byte is in netstack's hand-off pool (nothing but bodies for the
    /// cgi), else copied into the CGI request pool (bytes that came in the
    /// shared socket pool: with the request's head, or when the hand-off
    /// pool was full). Counted either way.
    fn body_for_cgi(&mut self, body: Aggregate<'static>) -> Result<Aggregate<'static>, Aggregate<'static>> {
        // A part that waited for ring room may already be a copy.
        if body.descs().iter().all(|s| s.pool == BODY_POOL || s.pool == CGI_REQ_POOL) {
            self.cgi_body_by_ref +=
                body.descs().iter().filter(|s| s.pool == BODY_POOL).map(|s| u64::from(s.len)).sum::<u64>();
            return Ok(body);
        }
        match body.copy_to_pool(CGI_REQ_POOL) {
            Ok(copy) => {
                self.cgi_body_copied += copy.len() as u64;
                Ok(copy)
            }
            Err(_) => Err(body),
        }
    }

    /// Pauses the input of connections whose request body's window to the
    /// cgi is full (netstack keeps it in TCP: the client's window closes)
    /// and resumes the others.
    fn sync_input_pauses(&mut self) {
        let mut done = Vec::new();
        let ids: Vec<HConn> = self.uploading.iter().copied().collect();
        for id in ids {
            let Some(&conn) = self.by_srv.get(&id.0) else {
                done.push(id);
                continue;
            };
            let pause = self.srv.input_paused(id);
            if pause != self.rx_paused.contains(&conn) {
                if pause {
                    self.rx_paused.insert(conn);
                } else {
                    self.rx_paused.remove(&conn);
                }
                self.input_pauses += u64::from(pause);
                self.request(Request::Receive { conn, on: !pause }.encode(), Aggregate::new(self.d));
            }
            if !pause && !self.srv.uploading(id) {
                done.push(id);
            }
        }
        for id in done {
            self.uploading.remove(&id);
        }
    }

    /// Sends the body parts that wait for room, in order.
    fn send_body_parts(&mut self) {
        while let Some((id, call_id, part, more)) = self.body_wait.pop_front() {
            if let Err(part) = self.cgi_send_part(call_id, part, more) {
                self.body_wait.push_front((id, call_id, part, more));
                return;
            }
        }
    }

    /// One part of a streamed request body to the cgi: copied into the CGI
    /// request pool (the cgi maps no pool with other clients' bytes, as
    /// for whole bodies), sent as a body part. Handed back when there is
    /// no room now (pool or ring): it waits in `body_wait`. Dropped if the
    /// cgi is gone (its requests fail with 502 when it comes back).
    fn cgi_send_part(&mut self, call_id: u32, part: Aggregate<'static>, more: bool) -> Result<(), Aggregate<'static>> {
        if self.cgi.is_none() || !self.cgi_pending.contains_key(&call_id) {
            // Cancelled, answered or failed (or the cgi is gone): nobody
            // reads it.
            return Ok(());
        }
        // A copy (when one is needed) is kept if the ring has no room: it
        // is what waits and goes, never copied twice (the window bounds
        // what waits).
        let part = if part.is_empty() {
            part
        } else {
            match self.body_for_cgi(part) {
                Ok(part) => part,
                Err(part) => {
                    self.body_parts_deferred += 1;
                    return Err(part);
                }
            }
        };
        let Some(c) = &mut self.cgi else { return Ok(()) };
        match c.link.tx.send(part, cgi_api::wire::body_part_tag(call_id, more), FLAG_EOF) {
            Ok(()) => Ok(()),
            Err((_, part)) => {
                self.body_parts_deferred += 1;
                Err(part)
            }
        }
    }

    /// Sends what waits, returns releases, and signals netstack and the
    /// cgi if they wait for any of it.
    fn flush(&mut self) {
        let _ = self.net.tx.poll_releases();
        let tx = &mut self.net.tx;
        self.outq.drain(|m| socket_api::send_request(tx, m));
        let _ = self.srv.source_mut().rx.flush_releases();
        self.drain_controls();
        if let Some(c) = &mut self.cgi {
            let _ = c.link.tx.poll_releases();
            if c.link.flush() {
                glue::cgi_go::emit();
            }
        }
        if self.net.flush() {
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
    fn arm(&mut self) -> bool {
        let stalled = self.events_copier.stalled();
        let yielded = self.ready.iter().any(|&id| !self.must_wait(id));
        let waiting = !self.ready.is_empty() || !self.fs_waiting.is_empty() || self.cgi_stuck || stalled;
        let net_ok = self.events_guard.broken().is_none();
        let want = Want { data: net_ok && !stalled, releases: waiting, room: !self.outq.is_empty() || yielded };
        let from_net = self.net.arm(want);
        let from_cgi = match &mut self.cgi {
            Some(c) => {
                let data = !self.cgi_stuck && !c.copier.stalled() && c.guard.broken().is_none();
                c.link.arm(Want { data, ..Want::default() })
            }
            None => false,
        };
        from_net || from_cgi
    }

    fn handle_events(&mut self) {
        loop {
            let before = self.d.stats().bytes_copied;
            let r = self.events_guard.recv(&mut self.events_copier.over(&mut self.net.rx));
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
            match Event::decode(r.tag) {
                Some(Event::Listening { port }) => log!("listening on port {port}"),
                Some(Event::Peer { addr, port }) => self.next_peer = Some(Remote { addr, port }),
                // The peer (REMOTE_ADDR/REMOTE_PORT for CGI) is the one just
                // announced; `take` so that it never outlives its connection.
                Some(Event::Accepted { conn, .. }) => match self.srv.accept(self.next_peer.take()) {
                    Ok(id) => {
                        self.by_net.insert(conn, id);
                        self.credit.insert(conn, SendCredit::default());
                        self.allowance.remove(&conn);
                        self.by_srv.insert(id.0, conn);
                    }
                    Err(resp) => {
                        self.request(Request::Send { conn }.encode(), resp);
                        self.request(Request::Close { conn }.encode(), Aggregate::new(self.d));
                    }
                },
                Some(Event::Data { conn }) => {
                    if let Some(&id) = self.by_net.get(&conn).filter(|_| !self.closing.contains(&conn)) {
                        let before = self.d.stats().bytes_copied;
                        self.srv.receive(id, r.agg);
                        self.request_copied += self.d.stats().bytes_copied - before;
                        self.sync_hand_off(id, conn);
                        self.ready.push(id);
                    }
                }
                Some(Event::Eof { conn }) => {
                    if let Some(&id) = self.by_net.get(&conn).filter(|_| !self.closing.contains(&conn)) {
                        self.srv.receive_eof(id);
                        self.ready.push(id);
                    }
                }
                Some(Event::SendSpace { conn, space }) => {
                    self.allowance.insert(conn, Allowance { bytes: socket_api::send_allowance(space), sent: 0 });
                    self.net_full.remove(&conn);
                    if let Some(&id) = self.by_net.get(&conn) {
                        self.ready.push(id);
                    }
                }
                Some(Event::SendFull { conn }) => {
                    self.net_full.insert(conn);
                }
                Some(Event::SendsTaken { conn, taken }) => {
                    if let Some(c) = self.credit.get_mut(&conn) {
                        c.taken(taken);
                    }
                    if self.credit_wait.remove(&conn) {
                        if let Some(&id) = self.by_net.get(&conn) {
                            self.ready.push(id);
                        }
                    }
                }
                Some(Event::Closed { conn }) => {
                    self.closing.remove(&conn);
                    // Its id may come back for another connection.
                    self.rx_paused.remove(&conn);
                    self.handed_off.remove(&conn);
                    self.net_full.remove(&conn);
                    self.credit.remove(&conn);
                    self.allowance.remove(&conn);
                    self.credit_wait.remove(&conn);
                    if let Some(id) = self.by_net.remove(&conn) {
                        self.by_srv.remove(&id.0);
                        self.srv.closed(id);
                    }
                }
                Some(Event::Error { op, id, code }) => {
                    if code == ErrorCode::WouldBlock || code == ErrorCode::NoMemory {
                        // A send was dropped: the response is broken.
                        self.send_errors += 1;
                        if self.by_net.contains_key(&id) {
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
                None => {}
            }
        }
    }

    /// Pulls output of ready connections and hands it to netstack / the cgi.
    fn pump(&mut self) {
        if self.outq.len() >= socket_api::FWD_CAP {
            // netstack has not taken what we have for it: pull nothing more.
            return;
        }
        let mut ready = core::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        let mut budget = ROUND_BYTES;
        let mut later = Vec::new();
        let mut cgi_failures = Vec::new();
        for id in ready {
            let Some(&conn) = self.by_srv.get(&id.0) else { continue };
            let closing = self.srv.is_closing(id);
            let spent = self.allowance.get(&conn).is_some_and(|a| a.sent >= a.bytes);
            if (self.net_full.contains(&conn) || spent) && !closing {
                // Back-pressure: its `SendSpace` puts it back in `ready`.
                // Its request body still goes to the cgi as the cgi
                // credits it: only the answer waits for the client.
                self.pump_input(id);
                continue;
            }
            if budget == 0 || self.must_wait(id) {
                later.push(id);
                continue;
            }
            // Per connection and round, a bounded share (fairness), and no
            // more than its allowance (what a slow reader pins); what
            // netstack may hold is bounded by the send credit.
            let round_bytes = match self.allowance.get(&conn) {
                Some(a) if !closing => a.bytes.saturating_sub(a.sent).min(CONN_ROUND_BYTES),
                _ => CONN_ROUND_BYTES,
            };
            let (mut sends, mut bytes) = (0usize, 0usize);
            loop {
                if self.outq.len() >= OUTQ_PUMP_MAX {
                    // netstack's ring is full and two rings' worth wait.
                    later.push(id);
                    break;
                }
                if !self.credit.get(&conn).is_none_or(SendCredit::may_send) {
                    // Its `SendsTaken` puts it back in `ready`.
                    self.credit_wait.insert(conn);
                    self.credit_waits += 1;
                    self.pump_input(id);
                    break;
                }
                // Static responses are built here (file reads included):
                // every byte copied meanwhile is charged to them.
                let copied_before = self.d.stats().bytes_copied;
                let a = self.srv.next_within(id, round_bytes - bytes);
                self.static_copied += self.d.stats().bytes_copied - copied_before;
                // Pulling may have parsed a request whose body is for the
                // cgi (and queued its `100 Continue`): the hand-off goes
                // to netstack before anything that makes the client send.
                self.sync_hand_off(id, conn);
                match a {
                    None => {
                        if self.srv.waits_for_source(id) {
                            // fs was busy: ask again next round (a wake-up,
                            // e.g. netstack returning buffers), not now.
                            self.fs_waiting.push(id);
                        }
                        break;
                    }
                    Some(Action::Send(agg)) => {
                        budget = budget.saturating_sub(agg.len());
                        sends += 1;
                        bytes += agg.len();
                        if let Some(c) = self.credit.get_mut(&conn) {
                            c.sent();
                        }
                        if let Some(a) = self.allowance.get_mut(&conn) {
                            a.sent = a.sent.saturating_add(agg.len());
                        }
                        self.request(Request::Send { conn }.encode(), agg);
                        if budget == 0 || self.must_wait(id) || sends >= CONN_ROUND_SENDS || bytes >= round_bytes {
                            later.push(id);
                            break;
                        }
                    }
                    Some(Action::Close) => {
                        self.request(Request::Close { conn }.encode(), Aggregate::new(self.d));
                        // Everything is queued at netstack: the server's
                        // slot is free now, not only after TIME-WAIT (the
                        // later Closed event finds nothing to close).
                        self.by_srv.remove(&id.0);
                        self.srv.closed(id);
                        self.closing.insert(conn);
                        break;
                    }
                    Some(Action::Cgi(call)) => {
                        let more = call.more;
                        match self.cgi_send(id, call) {
                            Ok(()) if more => {
                                // Its body follows in parts: pull them too.
                                self.uploading.insert(id);
                                continue;
                            }
                            Ok(()) => {}
                            Err(Unsent::Failed(call_id, f)) => cgi_failures.push((id, (call_id, f))),
                            Err(Unsent::Away(call)) => {
                                if !self.srv.cgi_hold(id, *call) {
                                    // Refused (503): that is its output.
                                    later.push(id);
                                }
                            }
                        }
                        break;
                    }
                    Some(Action::CgiBody { id: call_id, part, more }) => self.body_part(id, call_id, part, more),
                }
            }
        }
        for (id, (call_id, f)) in cgi_failures {
            self.srv.cgi_reply(id, call_id, Err(f));
            later.push(id);
        }
        self.ready = later;
        if !self.ready.is_empty() && self.outq.is_empty() && !self.pool_low() && budget > 0 {
            // Only CGI failures were left: pull again at once.
            self.pump();
        }
    }

    /// Hands the cgi the parts of `id`'s request body that may go now (it
    /// has input credit) without pulling anything for the client: for a
    /// connection whose send side is full. A program that reads its body
    /// while its answer waits for the client must not wait for the client
    /// to read (it used to: the upload stalled, the program timed out).
    fn pump_input(&mut self, id: HConn) {
        while let Some(a) = self.srv.next_input(id) {
            if let Action::CgiBody { id: call_id, part, more } = a {
                self.body_part(id, call_id, part, more);
            }
        }
    }

    /// A body part for the cgi: sent, or queued behind those that wait.
    fn body_part(&mut self, id: HConn, call_id: u32, part: Aggregate<'static>, more: bool) {
        if !self.body_wait.is_empty() {
            self.body_wait.push_back((id, call_id, part, more));
        } else if let Err(part) = self.cgi_send_part(call_id, part, more) {
            self.body_wait.push_back((id, call_id, part, more));
        }
    }

    /// Whether `id` must wait for netstack to return buffers before we pull
    /// its output: our pool is low, and its next output is not already in
    /// the pool (output that is must go out, or nothing frees the pool).
    fn must_wait(&self, id: HConn) -> bool {
        self.pool_low() && !self.srv.holds_output(id)
    }

    /// Whether our pool is fuller than `POOL_LOW_QUARTERS` (copy modes copy
    /// into it): pull no more until netstack returns buffers.
    fn pool_low(&self) -> bool {
        self.d
            .pool_stats(APP_POOL)
            .map(|s| s.pages_in_use as u64 * 4 >= s.pages as u64 * POOL_LOW_QUARTERS)
            .unwrap_or(false)
    }

    fn cgi_send(&mut self, id: HConn, call: httpd::CgiCall<'static>) -> Result<(), Unsent> {
        let call_id = call.id;
        self.check_events();
        self.check_cgi();
        self.publish();
        if self.cgi.is_none() {
            if self.srv.cgi_is_down() {
                // Its death was seen just now: the call goes to the next
                // incarnation, as those that arrive from now on.
                return Err(Unsent::Away(Box::new(call)));
            }
            self.cgi_unavailable += 1;
            return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
        }
        // The cgi maps no pool with other clients' bytes: the body goes by
        // reference from netstack's hand-off pool, or as a copy in the
        // pool that holds only what we hand it (`body_for_cgi`). It stays
        // by reference from there on (an echo goes back out without
        // another copy). The environment takes one slice of the message.
        let body = match call.body {
            Some(b) if b.slice_count() >= iolite::MAX_SLICES => match b.copy_to_pool(CGI_REQ_POOL) {
                Ok(copy) => {
                    self.cgi_body_copied += copy.len() as u64;
                    Some(copy)
                }
                Err(_) => {
                    self.cgi_unavailable += 1;
                    return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
                }
            },
            Some(b) => match self.body_for_cgi(b) {
                Ok(b) => Some(b),
                Err(_) => {
                    self.cgi_unavailable += 1;
                    return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
                }
            },
            None => None,
        };
        let (msg, tag) =
            match cgi_api::wire::encode_request_more(self.d, CGI_REQ_POOL, call_id, &call.env, body, call.more) {
                Ok(m) => m,
                Err(_) => return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable)),
            };
        let Some(c) = &mut self.cgi else { unreachable!("checked above; nothing since removed it") };
        match c.link.tx.send(msg, tag, FLAG_EOF) {
            Ok(()) => {
                if self.cgi_pending.is_empty() {
                    // Starved or not is measured from here.
                    self.cgi_progress_at = self.srv.clock().now_ms();
                }
                self.cgi_pending.insert(call_id, id);
                Ok(())
            }
            Err(_) => {
                self.cgi_unavailable += 1;
                Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable))
            }
        }
    }

    fn handle_cgi_replies(&mut self) {
        self.cgi_stuck = false;
        loop {
            if BUILD_COPY_MODE != CopyMode::IoLite && self.pool_low() {
                // Copy modes copy each reply into our pool: leave the rest
                // queued (in the cgi's pool) until sending frees ours.
                self.cgi_stuck = true;
                return;
            }
            let Some(c) = &mut self.cgi else { return };
            let before = self.d.stats().bytes_copied;
            let r = c.guard.recv(&mut c.copier.over(&mut c.link.rx));
            self.cgi_copied += self.d.stats().bytes_copied - before;
            let r = match r {
                Next::Msg(r) => {
                    self.cgi_progress_at = self.srv.clock().now_ms();
                    r
                }
                Next::Idle | Next::Wait(iolite::Error::Full) => return,
                Next::Wait(_) => {
                    // Copy modes: no room for the copy yet; the reply stays
                    // queued, and netstack wakes us when it returns buffers.
                    self.cgi_stuck = true;
                    return;
                }
                Next::Refused(e) => {
                    warn!("cgi reply refused: {e:?}");
                    continue;
                }
                Next::Broke(e) => {
                    error!("channel cgi_chan.B from cgi broken: {e:?}");
                    // The cgi broke the protocol: it pays with a restart
                    // (what it left unanswered fails with 502 when the new
                    // incarnation attaches), as one that stops answering.
                    self.restart_cgi("broke its reply channel");
                    return;
                }
            };
            if let Err(why) = self.vouch_file_slices(&r.agg) {
                match why {
                    Vouch::Forged(buf) => {
                        error!("channel cgi_chan.B from cgi broken: file buffer {buf} it does not hold");
                        self.restart_cgi("broke its reply channel");
                        return;
                    }
                    Vouch::Busy => {
                        let call_id = r.tag as u32;
                        let Some(id) = self.cgi_pending.remove(&call_id) else { continue };
                        self.cgi_unavailable += 1;
                        self.srv.cgi_reply(id, call_id, Err(cgi_api::Failure::Unavailable));
                        self.ready.push(id);
                        continue;
                    }
                }
            }
            let (call_id, kind) = cgi_api::wire::decode_reply(r.tag, r.flags);
            let before = self.d.stats().bytes_copied;
            match kind {
                Reply::Part => {
                    // A streamed answer goes on: the call stays pending.
                    let Some(&id) = self.cgi_pending.get(&call_id) else { continue };
                    let over = self.srv.cgi_part(id, call_id, r.agg);
                    self.cgi_copied += self.d.stats().bytes_copied - before;
                    self.ready.push(id);
                    if over.is_err() {
                        error!("channel cgi_chan.B from cgi broken: parts of request {call_id} beyond its window");
                        self.restart_cgi("broke its reply channel");
                        return;
                    }
                }
                Reply::InputCredit(parts) => {
                    // The program consumed body parts: more may go.
                    let Some(&id) = self.cgi_pending.get(&call_id) else { continue };
                    if self.srv.cgi_input_credit(id, call_id, parts) {
                        self.ready.push(id);
                    }
                }
                Reply::Last | Reply::Failed => {
                    let Some(id) = self.cgi_pending.remove(&call_id) else { continue };
                    let result = if kind == Reply::Last { Ok(r.agg) } else { Err(cgi_api::Failure::Fault) };
                    self.srv.cgi_reply(id, call_id, result);
                    self.cgi_copied += self.d.stats().bytes_copied - before;
                    self.ready.push(id);
                }
            }
        }
    }

    /// Tells the cgi what the server decided about its streams: credits
    /// for the parts pulled, cancels for streams not wanted any more (in
    /// order, behind any that wait for ring room). A cancelled call is no
    /// longer pending: what the cgi still sends for it is dropped.
    fn send_controls(&mut self) {
        for ctl in self.srv.take_cgi_controls() {
            if let CgiControl::Cancel { id } = ctl {
                self.cgi_pending.remove(&id);
            }
            if self.cgi.is_some() && self.cgi_controls.push(ctl).is_err() {
                // The bound is four request rings: a cgi that takes none of
                // them is restarted by its timeouts; count and go on.
                self.cgi_controls_dropped += 1;
            }
        }
        self.drain_controls();
    }

    /// Sends the controls that wait, as far as the request ring takes them.
    fn drain_controls(&mut self) {
        let Some(c) = &mut self.cgi else {
            self.cgi_controls.clear();
            return;
        };
        let d = self.d;
        self.cgi_controls.drain(|ctl| {
            let tag = cgi_api::wire::control_tag(ctl);
            c.link.tx.send(Aggregate::new(d), tag, 0).map_err(|_| ctl)
        });
    }

    /// A reply's slices of the file cache's pool are on the cgi's word: it
    /// may name a buffer fs never lent it (the generation is public), or
    /// return its hold to fs while we still send from the buffer. fs
    /// vouches for each one: if the cgi holds it, we get a hold of our own
    /// from fs, which keeps the buffer until netstack is done with it.
    fn vouch_file_slices(&mut self, agg: &iolite::Aggregate<'_>) -> Result<(), Vouch> {
        let mut done: [(u32, u32); iolite::MAX_SLICES] = [(u32::MAX, 0); iolite::MAX_SLICES];
        let mut n = 0;
        for s in agg.descs().iter().filter(|s| s.pool == FILE_POOL) {
            if done[..n].contains(&(s.buf, s.gen)) {
                continue;
            }
            match glue::fs::vouch(s.buf, s.gen) {
                0 => {}
                r if r as i64 == fs_api::ErrorCode::ChannelBusy.ret() => return Err(Vouch::Busy),
                _ => {
                    self.cgi_unheld_refs += 1;
                    return Err(Vouch::Forged(s.buf));
                }
            }
            if let Err(e) = self.d.take_vouched(FILE_POOL, s.buf, s.gen, FS) {
                warn!("fs vouched for file buffer {} but it is not held here: {e:?}", s.buf);
            }
            self.cgi_vouched += 1;
            if n < done.len() {
                done[n] = (s.buf, s.gen);
                n += 1;
            }
        }
        Ok(())
    }

    /// Has the supervisor restart the cgi, which did not answer in time or
    /// broke its reply channel (`why`, for the log).
    /// On success the old incarnation is gone: we stop using its channels
    /// at once (requests until the new one attaches are held by the server,
    /// `Server::cgi_down`, instead of going into channels it is about to
    /// reset); `check_cgi` fails what it left unanswered when the new one
    /// publishes its generation, and hands it the held requests.
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
    fn lend_cgi(&mut self, now: u64) {
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

    fn restart_cgi(&mut self, why: &str) {
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

    /// Deaths and settlements of our peers (the system events page): the
    /// death protocol's peer side for the cgi.
    fn check_events(&mut self) {
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

    /// netstack died: its connections are gone (each one's peer sees a
    /// reset from the new incarnation, or nothing more). We drop every
    /// connection's state (responses in progress close their files at fs),
    /// the requests waiting for ring room, forget what it granted us
    /// (received data still in use is tainted until dropped) and
    /// quarantine what we lent it (headers of ours, and fs's and the cgi's
    /// pages we forwarded: the NIC may still send them) until the death is
    /// settled. Then we set the client region up afresh (a new
    /// generation), which the new incarnation waits for, and listen again.
    fn netstack_died(&mut self, death: u64) {
        self.netstack_death = death;
        self.netstack_restarts += 1;
        let conns = self.by_net.len();
        self.netstack_conns_lost += conns as u64;
        for (_, id) in core::mem::take(&mut self.by_net) {
            self.srv.closed(id);
        }
        self.by_srv.clear();
        self.closing.clear();
        self.net_full.clear();
        self.credit.clear();
        self.allowance.clear();
        self.credit_wait.clear();
        self.next_peer = None;
        self.ready.clear();
        self.fs_waiting.clear();
        self.uploading.clear();
        self.rx_paused.clear();
        self.handed_off.clear();
        let dropped = self.outq.len();
        self.outq.clear();
        let quarantined = self.d.peer_failed(NETSTACK).unwrap_or(0);
        // SAFETY: the client dataport, mapped read-write for our lifetime,
        // shared with netstack only; its dead incarnation no longer runs
        // (the supervisor stopped it before publishing the death) and the
        // new one attaches only to a generation no incarnation of it used
        // (`socket_api::WORD_STACK_ATTACHED`), which this one is.
        let net = unsafe { socket_api::init_client(self.d, NETSTACK, rw(glue::client::VADDR, glue::client::SIZE)) };
        match net {
            Ok(net) => self.net = net,
            Err(e) => error!("the client region cannot be set up again: {e:?}"),
        }
        self.events_guard = Guard::new();
        let _ = self.d.peer_restarted(NETSTACK);
        self.netstack_unconfirmed = Some(death);
        log!(
            "netstack died (death {death}): {conns} connections dropped, {dropped} requests unsent, {quarantined} buffers lent to it quarantined, region set up again (generation {})",
            self.net.generation()
        );
        self.request(Request::Listen { port: PORT, backlog: 64 }.encode(), Aggregate::new(self.d));
    }

    /// Confirms netstack's latest death once nothing it gave us (received
    /// data) is in use here any more.
    fn confirm_netstack_death(&mut self) {
        let (Some(death), Some(index)) = (self.netstack_unconfirmed, self.netstack_index) else { return };
        if self.d.tainted(NETSTACK).unwrap_or(0) == 0 {
            self.netstack_unconfirmed = None;
            log!("netstack death {death}: nothing of the dead incarnation in use any more, confirmed");
            component_runtime::events::confirm_settled(index, death);
        }
    }

    /// Confirms fs's latest death once nothing it gave us is in use here
    /// or downstream (netstack and the NIC return their holds to us): the
    /// new incarnation then frees the pages it kept quarantined.
    fn confirm_fs_death(&mut self) {
        let (Some(death), Some(index)) = (self.fs_unconfirmed, self.fs_index) else { return };
        if self.d.tainted(FS).unwrap_or(0) == 0 {
            self.fs_unconfirmed = None;
            log!("fs death {death}: nothing of the dead incarnation in use any more, confirmed");
            component_runtime::events::confirm_settled(index, death);
        }
    }

    /// The cgi died: stop using its channels, fail what it left unanswered,
    /// forget what it granted us and quarantine what we lent it.
    fn cgi_died(&mut self, death: u64) {
        self.cgi_death = death;
        self.cgi = None;
        // Requests from now on wait for the new incarnation.
        self.srv.cgi_down();
        let failed = self.cgi_pending.len();
        for (call_id, id) in core::mem::take(&mut self.cgi_pending) {
            self.srv.cgi_reply(id, call_id, Err(cgi_api::Failure::Fault));
            self.ready.push(id);
        }
        let quarantined = self.d.peer_failed(CGI).unwrap_or(0);
        self.cgi_dying = true;
        self.cgi_unconfirmed = Some(death);
        log!(
            "cgi died (death {death}): {failed} requests failed with 502, {quarantined} buffers lent to it quarantined, {} still in use downstream",
            self.d.tainted(CGI).unwrap_or(0)
        );
    }

    /// Confirms the cgi's latest death once nothing it gave us is in use
    /// here or downstream (netstack and the NIC return their holds to us).
    fn confirm_cgi_death(&mut self) {
        let (Some(death), Some(index)) = (self.cgi_unconfirmed, self.cgi_index) else { return };
        if self.d.tainted(CGI).unwrap_or(0) == 0 {
            self.cgi_unconfirmed = None;
            component_runtime::events::confirm_settled(index, death);
        }
    }

    /// Attaches to the cgi's channels when a (new) incarnation published
    /// them; fails what the old one left unanswered.
    fn check_cgi(&mut self) {
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
            if self.sys_events.is_none() {
                // No death protocol in this assembly: forget what the dead
                // incarnation granted us, and take back what we lent it.
                let _ = self.d.peer_died(CGI);
            } else {
                if !self.cgi_dying {
                    // Its death is not in the page yet (cannot happen: the
                    // supervisor counts it before the rebuild); be safe.
                    let death = self.cgi_death + 1;
                    self.cgi_died(death);
                }
                // The new incarnation is served; what the old one had stays
                // quarantined until its death is settled.
                let _ = self.d.peer_restarted(CGI);
                self.cgi_dying = false;
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
    fn release_held_calls(&mut self, g: u64) {
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
        v[H::ConnectionsSendFull] = self.net_full.len() as u64;
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
        // SAFETY: our counter page (4 KiB, page-aligned), mapped
        // read-write, written only here.
        unsafe { httpd_api::CounterPage::at(glue::httpd_stats::VADDR as *const u8) }.publish(&v);
    }
}
