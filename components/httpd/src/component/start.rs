//! Starting up: our pools and what each peer may reference, the netstack
//! region (set up first: we run above netstack), the file source over fs,
//! and the server with the assembly's policy.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use component_runtime::link::{Deaths, Link};
use component_runtime::start::StartInfo;
use component_runtime::time::{self, ClockPage};
use component_runtime::{log, warn};
use glue_rt::map_pool;
use glue_rt::pools::rw;
use httpd::{Config, FileRefs, FileRefsLimits, Server};
use iolite::duplex::Control;
use iolite::{Boundary, Copier, Domain, Trust, BUILD_COPY_MODE};
use outbox::Outbox;
use site_config::page;
use site_config::Settings;
use socket_api::client::Conns;

use super::fs::{self, FsSource};
use super::{
    glue, Httpd, TickClock, CGI, CGI_INSTANCE, CONTROLS_CAP, FS, FS_INSTANCE, LISTEN_PORT, NETSTACK, NETSTACK_INSTANCE,
    OUTQ_CAP, PORT,
};
use glue::pools::{APP_POOL, BODY_POOL, CGI_POOL, CGI_REQ_POOL, FILE_POOL, SOCK_POOL};

/// Maps our pools and sets who may read and reference what.
pub(super) fn map_pools(d: &'static Domain) {
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
    // Who may read the CGI request pool (echoed bodies go to the network).
    d.set_pool_acl(CGI_REQ_POOL, &[CGI, NETSTACK]).expect("cgi request pool acl");
    // What each peer may reference in what it sends us (the assembly's
    // grant lists); our own buffers only where we lent them to that peer.
    d.set_peer_pools_named(NETSTACK, glue::attributes::CLIENT_REFS, glue::pools::ALL).expect("netstack grant list");
    d.set_peer_pools_named(FS, glue::attributes::FS_CHANNEL_REFS, glue::pools::ALL).expect("fs grant list");
    d.set_peer_pools_named(CGI, glue::attributes::CGI_CHAN_REFS, glue::pools::ALL).expect("cgi grant list");
}

/// The file source over fs, attached afresh, and our side of the death
/// protocol (`me`: our record), which watches the system events page from
/// after the reset on. After a restart of ours, the pages our dead
/// incarnation left in use (headers netstack and the NIC may still send,
/// requests the cgi may still read) stay quarantined until every peer
/// settled that death.
fn file_source(d: &'static Domain, me: usize) -> (FsSource, Deaths) {
    // --- fs: a (re)start of ours: fs forgets what an earlier
    // incarnation of ours had open, quarantines what it lent it (netstack
    // may still send it) and sets our channel up afresh before answering ---
    glue::fs::reset();
    let fs_rx = fs::attach(d);
    let copier = Copier::new(BUILD_COPY_MODE, Boundary::FileCacheToApp, Some(APP_POOL)).expect("copy pool");
    let deaths = Deaths::new(me, d, &[APP_POOL, CGI_REQ_POOL]);
    let fs_index = deaths.page().and_then(|p| p.index_of(FS_INSTANCE));
    let client = fs_api::client::Client::new(fs::Glue { fs_index });
    // Whole small files by reference, where fs's buffers reach us by
    // reference: up to 64 of them, 64 KiB each, `file_refs_bytes` in all.
    let refs_bytes = if copier.copies() { 0 } else { glue::attributes::FILE_REFS_BYTES as usize };
    let refs = FileRefs::new(FileRefsLimits {
        entries: if refs_bytes == 0 { 0 } else { 64 },
        bytes: refs_bytes,
        file: 64 * 1024,
    });
    (FsSource { d, rx: fs_rx, copier, tag: 0, copied: 0, client, refs }, deaths)
}

/// How long we wait for fs to publish the site's values. fs publishes
/// them before it answers its first call, and we have called it (its
/// reset) by then: the wait is for an fs that is gone.
const SITE_WAIT_MS: u64 = 2000;

/// The site disk's deployment values (docs/config.md), from the page fs
/// publishes (untrusted: one copy, every field checked again), over
/// which the assembly's are the defaults. Logged either way.
fn site_values() -> Settings {
    const _: () = assert!(glue::site_config::SIZE >= page::PAGE_BYTES);
    // SAFETY: the site_config dataport, mapped read-only for our lifetime.
    let got =
        unsafe { page::receive(glue::site_config::VADDR as *const u8, SITE_WAIT_MS, time::now_ms, sel4::yield_now) };
    let (warning, line) = got.report(SITE_WAIT_MS);
    if warning {
        warn!("{line}");
    } else {
        log!("{line}");
    }
    let s = got.into_settings();
    if let Some(l) = s.log_level {
        component_runtime::console::set_level(l as u8);
    }
    s
}

/// The server's configuration: the assembly's policy, and the site's
/// values where it sets them.
fn config(site: Settings) -> Config {
    let port = site.listen_port.unwrap_or(PORT);
    LISTEN_PORT.store(port, core::sync::atomic::Ordering::Relaxed);
    let d = Config::default();
    Config {
        server_port: port,
        server_name: site.hostname.unwrap_or_else(|| String::from("iolite")),
        server_software: site.server_name.unwrap_or(d.server_software),
        index: site.index.unwrap_or(d.index),
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
        ..d
    }
}

impl Httpd {
    /// The component as it starts, its netstack region set up, before it
    /// listens.
    pub(super) fn new(d: &'static Domain, start: &StartInfo) -> Self {
        // We run above netstack, so we set its region up now, before
        // anything that could block.
        // SAFETY: the client dataport, mapped read-write for our lifetime,
        // shared with netstack only, which attaches after we initialised it.
        let net = unsafe { socket_api::init_client(d, NETSTACK, rw(glue::client::VADDR, glue::client::SIZE)) }
            .expect("client");
        let (src, deaths) = file_source(d, start.instance as usize);
        let page = deaths.page();
        let net = Link::new(NETSTACK_INSTANCE, NETSTACK, page, net);
        let cgi_peer = Link::new(CGI_INSTANCE, CGI, page, ());
        // fs holds nothing of ours to release (its channel runs one way).
        let fs_peer = Link::new(FS_INSTANCE, FS, page, ()).release_on_request();
        // SAFETY: the clock dataport, mapped read-only for our lifetime.
        let clock = TickClock(unsafe { ClockPage::at(glue::clock::VADDR) });
        let mut srv = Server::new(d, APP_POOL, src, clock, config(site_values()));
        srv.set_health_probe(super::peers::health);
        // SAFETY: the cgi_chan dataport, mapped read-write for our lifetime;
        // its control page is written by the cgi only.
        let cgi_control =
            unsafe { Control::of(rw(glue::cgi_chan::VADDR, glue::cgi_chan::SIZE), cgi_api::chan::GEOMETRY) }
                .expect("cgi_chan");
        let mut me = Httpd {
            d,
            srv,
            net,
            events_copier: Copier::new(BUILD_COPY_MODE, Boundary::NetToApp, Some(APP_POOL)).expect("copy pool"),
            outq: Outbox::new(OUTQ_CAP),
            conns: Conns::new(),
            by_srv: BTreeMap::new(),
            ready: Vec::new(),
            fs_waiting: Vec::new(),
            cgi: None,
            cgi_gen: 0,
            cgi_control,
            cgi_pending: BTreeMap::new(),
            cgi_stuck: false,
            cgi_controls: Outbox::new(CONTROLS_CAP),
            body_wait: VecDeque::new(),
            uploading: BTreeSet::new(),
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
            deaths,
            cgi_peer,
            fs_peer,
            netstack_restarts: 0,
            netstack_conns_lost: 0,
            log_rate: httpd::server::LogRate::new(0),
        };
        // Until the cgi attaches, CGI requests are held for it (503 after
        // `cgi_queue_timeout_ms`).
        me.srv.cgi_down();
        // A cgi held down before we started is not coming (our watcher took
        // the page as seen): no request waits for it.
        if me.cgi_peer.is_held_down() {
            log!("the cgi is held down by the supervisor: CGI requests get 503");
            let _ = me.srv.cgi_gone();
        }
        me
    }
}
