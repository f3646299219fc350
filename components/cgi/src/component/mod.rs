//! The cgi component: CGI programs in their own protection domain.
//!
//! * **Requests** arrive from httpd on channel A of `cgi_chan`
//!   (`cgi::wire`: env ++ body, both in httpd's CGI request pool
//!   `cgi_req_pool`, which holds nothing but what httpd hands us: we map no
//!   pool with other clients' requests),
//!   **replies** go back on channel B: the program's output as one
//!   aggregate, generated parts in our (untrusted) pool, echoed bodies and
//!   page fragments forwarded by reference. A program that fails answers
//!   with an empty message without `FLAG_EOF` (httpd: 502).
//! * **Restarts**: every start (re)initialises the region, which bumps its
//!   generation (`cgi::chan`), and wakes httpd,
//!   which fails what the dead incarnation left unanswered (502) and
//!   attaches anew. We also `reset` our fs client slot, so fs takes back
//!   what it had lent to the dead incarnation.
//! * **Streams**: a program whose output comes over time (the library's
//!   `/cgi-bin/stream`) sends its messages as they are due and as httpd's
//!   credits allow (`cgi::wire`: parts with `REPLY_MORE`, at most
//!   `STREAM_WINDOW` untaken; httpd's credits and cancels come on the
//!   request channel without `FLAG_EOF`). At most `MAX_STREAMS` at once.
//!   The ticker wakes us every tick for the ones waiting for their time.
//! * **Streamed request bodies** (`cgi::wire`: a request with `BODY_MORE`,
//!   then body parts): `/cgi-bin/upload` is fed each part as it comes
//!   (`Uploading`) and answers when the last one came; every message with
//!   `BODY_MORE` is credited back to httpd (an input credit on the reply
//!   channel) once consumed, so httpd sends the next. Any other program
//!   runs at once with what came with the request, and the rest of its
//!   body is credited and dropped as it comes (parts for a request we do
//!   not know, or no longer: a cancel ends an upload).
//! * **Passing a streamed body back** (`/cgi-bin/tee`, `Teeing`): each
//!   body part is its next output message, by reference, sent on output
//!   credit; the part is credited back to httpd only once it went, so
//!   the program reads only as fast as the client takes its answer.
//! * **Programs**: the library's `/cgi-bin/stats`, `/cgi-bin/echo`,
//!   `/cgi-bin/page`, `/cgi-bin/stream`, `/cgi-bin/upload`, `/cgi-bin/tee`; and in test images only (`cgi.test_hooks = 1`, e.g.
//!   tests/variants' `webtest`; the default image answers them 404 and
//!   does not contain them) the hooks `/cgi-bin/crash` (panics: a
//!   fault the supervisor answers by restarting us), `/cgi-bin/slow?ms=N`
//!   (answers after N ms of spinning) and `/cgi-bin/spin` (spins forever:
//!   only the restart httpd asks for after its 504 ends it),
//!   `/cgi-bin/restart?component=NAME` (asks the supervisor to restart
//!   NAME and prints the answer: the assembly grants us no restarts, so
//!   this shows that the supervisor refuses); and for bench/web
//!   `/cgi-bin/blob?size=N` (N bytes made once and kept, sent by reference);
//!   `/cgi-bin/pattern?seed=S&size=N` (N bytes depending on S, made afresh
//!   for each request: `cgi::gen::pattern`) for the death protocol's tests.
//!   With `cgi.test_hooks = 1` (test images only) also `/cgi-bin/fshog`:
//!   opens files until fs refuses and reads them, keeping every buffer,
//!   until fs refuses again; it shows that fs's per-client open-file table
//!   and quota stop a client from starving the others. And
//!   `/cgi-bin/hostile?mode=forge|garbage|unheld`: a hostile peer that
//!   forges references into its reply ring, writes impossible ring heads,
//!   or names a file-cache buffer fs never lent it (`hostile_forge`,
//!   `hostile_garbage`, `hostile_unheld`). And `/cgi-bin/fsreset`: reads
//!   files and resets its fs session in a loop (`fs_reset_loop`), which
//!   must cost fs no quarantined pages.
//! * **Counters** for /cgi-bin/stats: httpd's, netstack's and netdrv's
//!   counter pages, fs's `stats` RPC, our own.
//!
//! We run below httpd, netstack and netdrv: a CGI that spins delays only
//! itself.
//!
//! Lines it prints: `[cgi] ready (generation G, restart R)`,
//! `[cgi] crash requested`, `[cgi] spinning forever`.

extern crate alloc;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use cgi::wire::{Control, STREAM_WINDOW};
use cgi::{Component, Counters, Env, FragmentSource, Programs, Started};
use component_runtime::time::ClockPage;
use component_runtime::{error, log, warn};
use glue_rt::map_pool;
use glue_rt::pools::rw;
use httpd_api::HttpdCounter;
use iolite::{
    init_duplex, AggDesc, Aggregate, Attach, Boundary, ChannelRx, ChannelTx, Copier, Domain, Duplex, DuplexAttach,
    Error, Geometry, PeerId, PoolId, SliceDesc, Trust, Want, BUILD_COPY_MODE, FLAG_EOF,
};
use nic_api::{Counter, CounterPage, DrvCounter};
use outbox::Outbox;
use socket_api::StackCounter;

component_runtime::component_entry!(main);
component_runtime::global_heap!(2 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/cgi.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{BODY_POOL, CGI_POOL, CGI_REQ_POOL, FILE_POOL};
/// `cgi.test_hooks = 1` (test images only): build in the test hooks
/// (`test_hook`). A constant from the assembly, so the default image's
/// binary has neither their code nor their names.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
const HTTPD: PeerId = PeerId(0);
const FS: PeerId = PeerId(1);
const _: () = assert!(glue::cgi_chan::SIZE >= cgi::chan::REGION_BYTES);
const _: () = assert!(glue::fs_channel::SIZE >= fs_api::CHANNEL_BYTES);

/// A reply message (tag: `cgi::wire::reply_tag`, flags, output or a
/// part of it) waiting for room in httpd's reply ring. We take no request
/// and make no part while one waits, so one is all that can.
type Reply = (u64, u32, Aggregate<'static>);

/// One reply into httpd's reply ring: handed back while the ring is full
/// (httpd takes replies every round); dropped, and reported, when httpd
/// cannot take it at all.
fn to_httpd(tx: &mut ChannelTx<'static>, (tag, flags, agg): Reply) -> Result<(), Reply> {
    match tx.send(agg, tag, flags) {
        Ok(()) => Ok(()),
        Err((Error::Full, agg)) => Err((tag, flags, agg)),
        Err((e, _)) => {
            warn!("reply {}: {e:?}", tag as u32);
            Ok(())
        }
    }
}

/// Most streamed outputs at once (`/cgi-bin/stream` answers 503 beyond):
/// each may have `STREAM_WINDOW` messages of `cgi::stream::MESSAGE_BYTES`
/// waiting at httpd, 1 MiB of our 4 MiB pool for all of them.
const MAX_STREAMS: usize = 8;

/// A streamed output being sent.
struct Active {
    id: u32,
    stream: cgi::Stream,
    /// Messages we may still send before httpd takes some (it gives them
    /// back with credits).
    credit: u32,
}

impl Active {
    fn ready(&self, now: u64) -> bool {
        self.credit > 0 && self.stream.due_ms().is_some_and(|t| t <= now)
    }
}

/// A `/cgi-bin/upload` consuming its body.
struct Uploading {
    id: u32,
    upload: cgi::Upload,
}

/// A `/cgi-bin/tee` passing its streamed body back as it reads it: a
/// message per part it was given, each sent on output credit (as a
/// program's write blocks until the pipe has room), and each body part
/// credited back to httpd only once it went out. So a client that does
/// not read the answer stops the upload too, after the windows' worth:
/// the program never holds more than httpd's input window of parts.
struct Teeing {
    id: u32,
    /// Output messages we may send before httpd takes some.
    credit: u32,
    /// Messages to send, in order: (message, last, an input credit is
    /// due once it went).
    out: alloc::collections::VecDeque<(Aggregate<'static>, bool, bool)>,
    /// Input credits due that found a reply waiting: sent next.
    owed: u32,
}

/// A control message from httpd about one of our streams (or uploads).
fn control(streams: &mut Vec<Active>, uploads: &mut Vec<Uploading>, tees: &mut Vec<Teeing>, tag: u64) {
    match cgi::wire::decode_control(tag) {
        Control::Credit { id, parts } => {
            if let Some(a) = streams.iter_mut().find(|a| a.id == id) {
                // Never more than the window, whatever httpd says.
                a.credit = a.credit.saturating_add(parts).min(STREAM_WINDOW);
            }
            if let Some(t) = tees.iter_mut().find(|t| t.id == id) {
                t.credit = t.credit.saturating_add(parts).min(STREAM_WINDOW);
            }
        }
        // Ids are httpd's and never reused soon: one we do not know (a
        // stream that ended, a whole reply) has nothing to stop.
        Control::Cancel { id } => {
            streams.retain(|a| a.id != id);
            uploads.retain(|u| u.id != id);
            tees.retain(|t| t.id != id);
        }
    }
}

/// Sends what the tees may send now (output credit, room in httpd's
/// ring), and the input credits due after it.
fn send_tees(d: &'static Domain, tees: &mut Vec<Teeing>, replies: &mut Outbox<Reply>, tx: &mut ChannelTx<'static>) {
    let mut i = 0;
    while i < tees.len() && replies.is_empty() {
        let t = &mut tees[i];
        if t.owed > 0 {
            let credit = (cgi::wire::input_credit_tag(t.id, t.owed), 0, Aggregate::new(d));
            t.owed = 0;
            let _ = replies.send(credit, |r| to_httpd(tx, r));
            continue;
        }
        if t.credit == 0 || t.out.is_empty() {
            i += 1;
            continue;
        }
        let (m, last, credit_due) = t.out.pop_front().expect("checked above");
        t.credit -= 1;
        t.owed += u32::from(credit_due);
        let msg = if last {
            (cgi::wire::reply_tag(t.id, false), FLAG_EOF, m)
        } else {
            (cgi::wire::reply_tag(t.id, true), 0, m)
        };
        if last {
            tees.remove(i);
        }
        if let Err((tag, ..)) = replies.send(msg, |r| to_httpd(tx, r)) {
            error!("reply {} dropped: a reply already waits", tag as u32);
        }
    }
}

fn now_ms() -> u64 {
    // SAFETY: the ticker's clock page, mapped read-only for our lifetime.
    unsafe { ClockPage::at(glue::clock::VADDR) }.now_ms()
}

/// The page's fragments, read from fs by reference, through a client that
/// survives restarts of fs (`fs_api::client`: reset and reattach once per
/// death of fs, the read retried).
struct FsFragments {
    d: &'static Domain,
    rx: ChannelRx<'static>,
    /// The copy modes copy file data at our end (flash does not).
    copier: Copier<'static>,
    tag: u64,
    client: fs_api::client::Client<FsGlue>,
}

/// fs's calls through the RPC glue.
struct FsGlue {
    /// fs's record in the system events page.
    fs_index: Option<usize>,
}

fs_api::rpc_over_glue!(FsGlue, glue::fs, component_runtime::events::page);

/// Attaches our end of the fs channel (fs set it up before answering the
/// call that preceded this).
fn attach_fs(d: &'static Domain) -> ChannelRx<'static> {
    // SAFETY: the fs_channel dataport, mapped read-write for our lifetime;
    // the only receiver (the end this replaces is dropped).
    unsafe {
        ChannelRx::attach(Attach {
            domain: d,
            peer: FS,
            region: rw(glue::fs_channel::VADDR, glue::fs_channel::SIZE),
            geometry: Geometry { fwd: fs_api::FWD_CAP, rel: fs_api::REL_CAP },
        })
    }
    .expect("fs channel")
}

/// After a death of fs: forget what it granted (what we still use, e.g.
/// fragments in replies httpd and netstack hold, is tainted until it comes
/// back), and attach to the channel the new incarnation set up.
fn reattach_fs(d: &'static Domain, rx: &mut ChannelRx<'static>) {
    let _ = d.peer_failed(FS);
    let _ = d.peer_restarted(FS);
    *rx = attach_fs(d);
}

impl FsFragments {
    fn reconnect(&mut self) -> bool {
        let (d, rx) = (self.d, &mut self.rx);
        self.client.reconnect(&mut || reattach_fs(d, rx))
    }
}

impl FragmentSource<'static> for FsFragments {
    fn version(&mut self, path: &str) -> Option<u64> {
        if path.len() > 768 {
            return None;
        }
        let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
        if glue::fs::stat(path, &mut size, &mut mtime, &mut kind, &mut ino, &mut generation) < 0
            || fs_api::kind_from_code(kind) != fs_api::FileKind::File
        {
            return None;
        }
        // FNV-1a over ⟨ino, generation, mtime, size⟩.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for w in [u64::from(ino), u64::from(generation), mtime, size] {
            for b in w.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        Some(h)
    }

    fn read(&mut self, path: &str) -> Option<Aggregate<'static>> {
        let (d, rx) = (self.d, &mut self.rx);
        let file = self.client.open(path, &mut || reattach_fs(d, rx)).ok()?;
        self.tag += 1;
        let tag = self.tag;
        let len = file.size().min(fs_api::ONE_MESSAGE_READ as u64);
        let (d, rx) = (self.d, &mut self.rx);
        let n = match self.client.read(&file, 0, len, tag, &mut || reattach_fs(d, rx)) {
            Ok(n) => n as i64,
            Err(_) => -1,
        };
        self.client.close(file);
        let mut out = Aggregate::new(self.d);
        if n <= 0 {
            return (n == 0).then_some(out);
        }
        while (out.len() as i64) < n {
            match self.copier.recv(&mut self.rx) {
                Ok(Some(m)) if m.tag == tag => {
                    if out.append(m.agg).is_err() {
                        return None;
                    }
                }
                Ok(Some(_)) => {}
                _ => return None,
            }
        }
        Some(out)
    }
}

/// A component's counter page (httpd's, netstack's, netdrv's) as a
/// component, with the names the stats schema uses for the common ones.
fn counter_page<C: Counter>(name: &str, page: &CounterPage) -> Option<Component> {
    if !page.valid() {
        return None;
    }
    let mut c = Component::from_counters(name, page.read::<C>());
    let alias = |c: &mut Component, to: &str, from: &str| {
        if let Some(v) = c.get(from) {
            c.set(to, v);
        }
    };
    match name {
        "netstack" => {
            alias(&mut c, "checksum_cache_hits", "tcp_csum_hits");
            alias(&mut c, "checksum_cache_misses", "tcp_csum_misses");
            alias(&mut c, "bytes_copied", "tcp_bytes_copied");
            alias(&mut c, "bytes_by_ref_sent", "tcp_bytes_by_ref_sent");
            alias(&mut c, "tx_payload_copied", "tcp_tx_copied");
            alias(&mut c, "connections_accepted", "tcp_connections_accepted");
        }
        "netdrv" => {
            alias(&mut c, "bytes_copied", "drv_bytes_copied");
        }
        _ => {}
    }
    Some(c)
}

fn collect() -> Counters {
    let mut all = Counters { uptime_ms: now_ms(), components: Vec::new() };
    // SAFETY: the counter pages, mapped read-only; we only load from them.
    let (httpd, stk, drv) = unsafe {
        (
            CounterPage::at(glue::httpd_stats::VADDR as *const u8),
            CounterPage::at(glue::stack_stats::VADDR as *const u8),
            CounterPage::at(glue::drv_stats::VADDR as *const u8),
        )
    };
    all.components.extend(counter_page::<HttpdCounter>("httpd", httpd));
    all.components.extend(counter_page::<StackCounter>("netstack", stk));
    all.components.extend(counter_page::<DrvCounter>("netdrv", drv));
    let mut v = [0u64; 14];
    let [hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce, waits, released] = &mut v;
    if glue::fs::stats(hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce, waits, released)
        == 0
    {
        all.push(
            Component::new("fs")
                .with("cache_hits", v[0])
                .with("cache_misses", v[1])
                .with("evictions", v[2])
                .with("evictions_referenced", v[3])
                .with("bytes_cached", v[4])
                .with("disk_reads", v[5])
                .with("disk_bytes", v[6])
                .with("bytes_copied", v[7])
                .with("pool_pages_in_use", v[8])
                .with("data_bytes", v[9])
                .with("dma_bytes", v[10])
                .with("bounce_bytes", v[11])
                .with("reset_waits", v[12])
                .with("reset_released", v[13]),
        );
    }
    // The supervisor's view, from the system events page: deaths per
    // component, the peers' deaths each did not confirm in time, and its
    // free untyped memory (the same after any number of restarts unless
    // one leaked).
    if let Some(page) = component_runtime::events::page() {
        let mut sup = Component::new("supervisor");
        sup.set("untyped_free_now", page.free_untyped_bytes());
        for i in 0..page.len() {
            if let Some(name) = page.name(i) {
                sup.set(&alloc::format!("deaths_{name}"), page.state(i).0);
                sup.set(&alloc::format!("settled_{name}"), page.state(i).1);
                sup.set(&alloc::format!("late_confirms_{name}"), page.late_confirms(i));
            }
        }
        all.push(sup);
    }
    // The cache's share of memory (components/fs/src/budget.rs): gauges
    // end in `_now`, the low-water mark in `_low`.
    let mut b = [0u64; 11];
    let [budget, low, memory, floor, httpd, netstack, held, shrinks, grows, evicted, updates] = &mut b;
    if glue::fs::budget(budget, low, memory, floor, httpd, netstack, held, shrinks, grows, evicted, updates) == 0 {
        if let Some(fs) = all.components.iter_mut().find(|c| c.name == "fs") {
            for (k, v) in [
                ("cache_budget_now", b[0]),
                ("cache_budget_low", b[1]),
                ("memory_budget", b[2]),
                ("cache_floor", b[3]),
                ("charged_httpd_now", b[4]),
                ("charged_netstack_now", b[5]),
                ("charged_fs_held_now", b[6]),
                ("budget_shrinks", b[7]),
                ("budget_grows", b[8]),
                ("budget_shrink_evictions", b[9]),
                ("budget_updates", b[10]),
            ] {
                fs.set(k, v);
            }
        }
    }
    all
}

fn spin_ms(ms: u64) {
    let end = now_ms() + ms;
    while now_ms() < end {
        core::hint::spin_loop();
    }
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    // Unpredictable generations, different in every incarnation.
    d.seed_generations(start.seed);
    // SAFETY (all pools): mapped as the assembly declares for as long as
    // we run, used only through this domain.
    unsafe {
        map_pool!(owned d, CGI_POOL, glue::cgi_pool, Trust::Trusted).expect("cgi pool");
        map_pool!(foreign d, CGI_REQ_POOL, glue::cgi_req_pool, Trust::Trusted).expect("request pool");
        // Request bodies as netstack received them: only the input of
        // connections httpd handed off while their body to us arrived.
        map_pool!(foreign d, BODY_POOL, glue::body_pool, Trust::Trusted).expect("body pool");
        map_pool!(foreign d, FILE_POOL, glue::file_pool, Trust::Trusted).expect("file pool");
    }
    // What each peer may reference in what it sends us (the assembly's
    // grant lists): httpd its request pool, fs its file cache.
    d.set_peer_pools_named(HTTPD, glue::attributes::CGI_CHAN_REFS, glue::pools::ALL).expect("httpd grant list");
    d.set_peer_pools_named(FS, glue::attributes::FS_CHANNEL_REFS, glue::pools::ALL).expect("fs grant list");
    // A fresh start at fs: it takes back what an earlier incarnation held
    // and sets our channel up again.
    glue::fs::reset();
    let fs_rx = attach_fs(d);
    let mut fs_watch = FsWatch::new();
    let fs_client = fs_api::client::Client::new(FsGlue { fs_index: fs_watch.fs_index });
    let fs_copier = Copier::new(BUILD_COPY_MODE, Boundary::FileCacheToApp, Some(CGI_POOL)).expect("copy pool");

    // The copy modes copy requests at our end (posix: as read(2) from a pipe).
    let mut copier = Copier::new(BUILD_COPY_MODE, Boundary::Pipe, Some(CGI_POOL)).expect("copy pool");
    // Pages our dead predecessor left in use (responses httpd, netstack or
    // the NIC may still be sending) stay quarantined until the supervisor
    // says every peer settled that death; the pool's generations go on.
    let quarantined = d.quarantined_pages(CGI_POOL).unwrap_or(0);
    let mut death_watch = DeathWatch::new(start.instance as usize, quarantined);
    death_watch.poll(d);
    // --- the httpd region: ours to (re)initialise, last: publishing its
    // new generation tells httpd we serve ---
    // SAFETY: the cgi_chan dataport, mapped read-write for our lifetime;
    // httpd attaches only after it sees the generation this publishes.
    let (mut chan, generation) = unsafe {
        let region = rw(glue::cgi_chan::VADDR, glue::cgi_chan::SIZE);
        let generation = init_duplex(region, cgi::chan::GEOMETRY).expect("cgi_chan");
        let at =
            DuplexAttach { domain: d, peer: HTTPD, region, geometry: cgi::chan::GEOMETRY, side: cgi::chan::CGI_SIDE };
        (Duplex::attach(at).expect("cgi_chan"), generation)
    };
    log!("ready (generation {generation}, restart {})", start.restarts);
    glue::done::emit();

    let mut programs =
        Programs::new(d, CGI_POOL, FsFragments { d, rx: fs_rx, copier: fs_copier, tag: 0, client: fs_client });
    // httpd's requests: a corrupt ring or a forged descriptor breaks the
    // channel for good (reported once) rather than being retried.
    let mut guard = iolite::Guard::new();
    // A reply httpd's ring had no room for: it goes first, and until it
    // has gone we take no more requests (httpd's request ring fills and it
    // answers 503 itself), instead of dropping the reply (a 504 and a
    // restart of ours).
    let mut replies: Outbox<Reply> = Outbox::new(1);
    // Streamed outputs: each sends a message when it is due and has credit.
    let mut streams: Vec<Active> = Vec::new();
    // Programs consuming a streamed body.
    let mut uploads: Vec<Uploading> = Vec::new();
    // `/cgi-bin/tee`s passing a streamed body back.
    let mut tees: Vec<Teeing> = Vec::new();
    // A stream found our pool full: wait for buffers to come back.
    let mut starved = false;
    loop {
        // One turn of the loop: progress (component_runtime::liveness),
        // also when it goes round without waiting under load.
        component_runtime::sel4::progress();
        let _ = chan.tx.poll_releases();
        replies.drain(|r| to_httpd(&mut chan.tx, r));
        // Replies, and the requests' buffers back: httpd is signalled if
        // it waits for them.
        if chan.flush() {
            glue::done::emit();
        }
        let _ = programs.fragments_mut().rx.flush_releases();
        // Requests, unless the copy stage waits for room in our pool (then
        // our replies' buffers coming back) or a reply waits for room.
        // A stream waiting for its time wakes with the ticker; for credit,
        // with httpd's control message.
        let stalled = copier.stalled();
        let waiting = !replies.is_empty();
        let now = now_ms();
        let due = !waiting
            && (!starved && streams.iter().any(|a| a.ready(now))
                || tees.iter().any(|t| t.owed > 0 || (t.credit > 0 && !t.out.is_empty())));
        let data = !stalled && !waiting && guard.broken().is_none();
        let want = Want { data, releases: stalled || starved, room: waiting };
        if !chan.arm(want) && !due {
            glue::wake::wait();
        }
        chan.disarm();
        death_watch.poll(d);
        fs_watch.poll(d, &mut programs);
        while replies.is_empty() {
            let r = match guard.recv(&mut copier.over(&mut chan.rx)) {
                iolite::Next::Msg(r) => r,
                iolite::Next::Idle | iolite::Next::Wait(_) => break,
                iolite::Next::Refused(e) => {
                    warn!("request refused: {e:?}");
                    continue;
                }
                iolite::Next::Broke(e) => {
                    error!("channel cgi_chan.A from httpd broken: {e:?}");
                    break;
                }
            };
            if r.flags & FLAG_EOF == 0 {
                // Not a request: a credit or a cancel for a stream.
                control(&mut streams, &mut uploads, &mut tees, r.tag);
                continue;
            }
            let more = match cgi::wire::decode_input(r.tag) {
                cgi::wire::Input::Request { more, .. } => more,
                cgi::wire::Input::Part { id, more } => {
                    if let Some(t) = tees.iter_mut().find(|t| t.id == id) {
                        // Passed back when it has credit; credited then.
                        t.out.push_back((programs.tee_part(r.agg), !more, more));
                        continue;
                    }
                    // A part of a streamed body: consumed by its upload,
                    // or dropped (a program that does not read it).
                    let i = uploads.iter().position(|u| u.id == id);
                    if let Some(i) = i {
                        programs.upload_feed(&mut uploads[i].upload, &r.agg);
                    }
                    drop(r.agg);
                    let reply = if more {
                        // Consumed: httpd may send the next.
                        (cgi::wire::input_credit_tag(id, 1), 0, Aggregate::new(d))
                    } else if let Some(i) = i {
                        let u = uploads.swap_remove(i);
                        match programs.upload_finish(u.upload) {
                            Ok(out) => (cgi::wire::reply_tag(id, false), FLAG_EOF, out),
                            Err(e) => {
                                warn!("/cgi-bin/upload: {e:?}");
                                (cgi::wire::reply_tag(id, false), 0, Aggregate::new(d))
                            }
                        }
                    } else {
                        continue;
                    };
                    if let Err((tag, ..)) = replies.send(reply, |r| to_httpd(&mut chan.tx, r)) {
                        error!("reply {} dropped: a reply already waits", tag as u32);
                    }
                    continue;
                }
            };
            let (id, outcome) = run(d, &mut programs, r.agg, r.tag, streams.len() < MAX_STREAMS);
            if TEST_HOOKS && MUTED.load(Ordering::Relaxed) {
                // `/cgi-bin/hostile` wrote the reply ring behind our
                // producer's back: a send would overwrite what it wrote.
                continue;
            }
            let (reply, ok) = match outcome {
                Outcome::Upload(upload) if more => {
                    uploads.push(Uploading { id, upload });
                    // The request's message is consumed (its body so far
                    // went to the program): httpd may send the next part.
                    // (Other programs answer at once; httpd then sends no
                    // more and needs no credit.)
                    let credit = (cgi::wire::input_credit_tag(id, 1), 0, Aggregate::new(d));
                    if let Err((tag, ..)) = replies.send(credit, |r| to_httpd(&mut chan.tx, r)) {
                        error!("credit {} dropped: a reply already waits", tag as u32);
                    }
                    continue;
                }
                Outcome::Upload(upload) => match programs.upload_finish(upload) {
                    Ok(out) => (out, true),
                    Err(_) => (Aggregate::new(d), false),
                },
                Outcome::Tee(first) if more => {
                    // Its first message stands for the request's: credited
                    // once it went.
                    let out = [(first, false, true)].into_iter().collect();
                    tees.push(Teeing { id, credit: STREAM_WINDOW, out, owed: 0 });
                    continue;
                }
                Outcome::Tee(whole) => (whole, true),
                Outcome::Whole(reply, ok) => (reply, ok),
                Outcome::Stream(stream) => {
                    streams.push(Active { id, stream, credit: STREAM_WINDOW });
                    continue;
                }
            };
            let flags = if ok { FLAG_EOF } else { 0 };
            let tag = cgi::wire::reply_tag(id, false);
            if let Err((tag, ..)) = replies.send((tag, flags, reply), |r| to_httpd(&mut chan.tx, r)) {
                // Cannot happen: requests are taken only while none waits.
                error!("reply {} dropped: a reply already waits", tag as u32);
            }
        }
        if !(TEST_HOOKS && MUTED.load(Ordering::Relaxed)) {
            starved = send_streams(d, &mut programs, &mut streams, &mut replies, &mut chan.tx);
            send_tees(d, &mut tees, &mut replies, &mut chan.tx);
        }
    }
}

/// Sends the messages of the streams that are due and have credit, one
/// per stream in turn, until none is or httpd's ring is full. True if our
/// pool had no room for one (it waits for buffers to come back).
fn send_streams(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    streams: &mut Vec<Active>,
    replies: &mut Outbox<Reply>,
    tx: &mut ChannelTx<'static>,
) -> bool {
    let now = now_ms();
    loop {
        let mut sent = false;
        let mut i = 0;
        while i < streams.len() && replies.is_empty() {
            let a = &mut streams[i];
            if !a.ready(now) {
                i += 1;
                continue;
            }
            let (msg, flags) = match programs.stream_next(&mut a.stream) {
                Ok((m, true)) => ((cgi::wire::reply_tag(a.id, false), FLAG_EOF, m), true),
                Ok((m, false)) => ((cgi::wire::reply_tag(a.id, true), 0, m), false),
                Err(cgi::ProgramError::Iolite(Error::PoolExhausted)) => return true,
                Err(e) => {
                    // Cannot go on: a reply that is neither a part nor the
                    // last tells httpd it failed.
                    warn!("stream {}: {e:?}", a.id);
                    ((cgi::wire::reply_tag(a.id, false), 0, Aggregate::new(d)), true)
                }
            };
            a.credit -= 1;
            if flags {
                streams.remove(i);
            } else {
                i += 1;
            }
            sent = true;
            if let Err((tag, ..)) = replies.send(msg, |r| to_httpd(tx, r)) {
                error!("reply {} dropped: a reply already waits", tag as u32);
            }
        }
        if !sent || !replies.is_empty() {
            return false;
        }
    }
}

/// Our own deaths, from the system events page: the quarantine of the
/// pages an earlier incarnation left in use ends when its death is settled.
/// Also confirms the deaths of the network path's components at once: we
/// share dataports with them (netdrv maps our pool, we read their counter
/// pages) but receive no buffer from them.
struct DeathWatch {
    others: Option<component_runtime::events::Watcher>,
    me: usize,
    /// The death we started after (0: first start), while its pages are
    /// still quarantined.
    waiting: Option<u64>,
}

impl DeathWatch {
    fn new(me: usize, quarantined: u32) -> DeathWatch {
        let page = component_runtime::events::page();
        let death = page.filter(|p| me < p.len()).map_or(0, |p| p.state(me).0);
        if quarantined > 0 {
            log!("{quarantined} pool pages of the dead incarnation quarantined until its death is settled");
        }
        let waiting = (quarantined > 0).then_some(death);
        if waiting.is_some() && page.is_none() {
            warn!("no system events page: the quarantine never ends (set cgi.system_events)");
        }
        DeathWatch { others: component_runtime::events::Watcher::new(), me, waiting }
    }

    fn poll(&mut self, d: &Domain) {
        if let Some(w) = self.others.as_mut() {
            let page = w.page();
            for (component, death) in w.deaths() {
                // netdrv and netstack, the owners of the counter pages we
                // read, as the assembly connects them.
                let name = page.name(component);
                if name == Some(glue::drv_stats::PEER) || name == Some(glue::stack_stats::PEER) {
                    confirm(component, death);
                }
            }
        }
        let Some(death) = self.waiting else { return };
        let Some(page) = component_runtime::events::page() else { return };
        if page.state(self.me).1 >= death {
            let n = d.end_quarantine(CGI_POOL).unwrap_or(0);
            log!("death {death} settled: {n} quarantined pool pages free again");
            self.waiting = None;
        }
    }
}

/// Deaths of our peers (the system events page). fs's: reconnect at once
/// (what we still use of the dead incarnation counts as tainted from
/// then), drop the fragment cache (its buffers are the dead
/// incarnation's), and confirm once the taint is gone (httpd, netstack
/// and the NIC gave back the fragments we forwarded). Any other peer's:
/// confirmed at once (we hold nothing it granted us but through httpd,
/// which tracks its own).
struct FsWatch {
    events: Option<component_runtime::events::Watcher>,
    fs_index: Option<usize>,
    unconfirmed: Option<u64>,
}

impl FsWatch {
    fn new() -> FsWatch {
        let events = component_runtime::events::Watcher::new();
        let fs_index = events.as_ref().and_then(|w| w.page().index_of(glue::fs::PEER));
        FsWatch { events, fs_index, unconfirmed: None }
    }

    fn poll(&mut self, d: &'static Domain, programs: &mut Programs<'static, FsFragments>) {
        let Some(w) = self.events.as_mut() else { return };
        for (component, death) in w.deaths() {
            if Some(component) == self.fs_index {
                programs.drop_cache();
                programs.fragments_mut().reconnect();
                self.unconfirmed = Some(death);
                log!(
                    "fs died (death {death}): reconnected, {} of its buffers still in use",
                    d.tainted(FS).unwrap_or(0)
                );
            } else {
                confirm(component, death);
            }
        }
        if let (Some(death), Some(index)) = (self.unconfirmed, self.fs_index) {
            if d.tainted(FS).unwrap_or(0) == 0 {
                self.unconfirmed = None;
                confirm(index, death);
            }
        }
    }
}

/// What a request gave.
// Taken apart at once by the caller; boxing would allocate per request.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    /// The whole output, and whether the program succeeded.
    Whole(Aggregate<'static>, bool),
    /// An output that comes over time.
    Stream(cgi::Stream),
    /// A program that consumes its body first.
    Upload(cgi::Upload),
    /// `/cgi-bin/tee`'s first message.
    Tee(Aggregate<'static>),
}

/// Runs one request (`may_stream`: room for another stream).
fn run(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    agg: Aggregate<'static>,
    tag: u64,
    may_stream: bool,
) -> (u32, Outcome) {
    let (id, env, body): (u32, Env, _) = match cgi::wire::decode_request(agg, tag) {
        Ok(x) => x,
        Err(_) => return (cgi::wire::split_request_tag(tag).0, Outcome::Whole(Aggregate::new(d), false)),
    };
    let script = String::from(env.get_str("SCRIPT_NAME").unwrap_or(""));
    if TEST_HOOKS {
        if let Some((id, reply, ok)) = test_hook(d, programs, id, &script, &env) {
            return (id, Outcome::Whole(reply, ok));
        }
    }
    let counters =
        if script == "/cgi-bin/stats" || script == "/cgi-bin/page" { collect() } else { Counters::default() };
    match programs.start(&env, body, &counters, now_ms(), may_stream) {
        Ok(Started::Whole(out)) => (id, Outcome::Whole(out, true)),
        Ok(Started::Stream(s)) => (id, Outcome::Stream(s)),
        Ok(Started::Upload(u)) => (id, Outcome::Upload(u)),
        Ok(Started::Tee(m)) => (id, Outcome::Tee(m)),
        Err(e) => {
            warn!("{script}: {e:?}");
            (id, Outcome::Whole(Aggregate::new(d), false))
        }
    }
}

/// The programs only test images have (`TEST_HOOKS`); `None` for any
/// other name. In the default image nothing calls this, so neither the
/// code nor the names are in the binary, and the library answers 404.
fn test_hook(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    id: u32,
    script: &str,
    env: &Env,
) -> Option<(u32, Aggregate<'static>, bool)> {
    Some(match script {
        "/cgi-bin/noconfirm" => {
            // This incarnation confirms no death from now on: the
            // supervisor must not wait for it for ever (it restarts an
            // untrusted subscriber that does not confirm in time).
            NO_CONFIRM.store(true, Ordering::Relaxed);
            log!("test hook: confirming no death from now on");
            match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\nno confirmations\n")) {
                Ok(a) => (id, a, true),
                Err(_) => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/crash" => {
            log!("crash requested");
            panic!("/cgi-bin/crash: crashing on purpose");
        }
        "/cgi-bin/spin" => {
            // A program that never answers and never faults: nothing but a
            // restart from outside gets this component serving again.
            log!("spinning forever");
            loop {
                core::hint::spin_loop();
            }
        }
        "/cgi-bin/restart" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let name = cgi::programs::query_param(query, "component").unwrap_or("");
            let answer = match component_runtime::restart(name) {
                Ok(()) => String::from("restarted"),
                Err(e) => alloc::format!("not restarted: {e}"),
            };
            match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n{answer}\n")) {
                Ok(a) => (id, a, true),
                Err(_) => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/blob" => {
            // `size` bytes of a pattern (at most 1 MiB): bench/web's CGI
            // counterpart of the static files. The body is made once per
            // size and kept (immutable), then sent by reference after a
            // generated header, as a CGI that serves content it built.
            let size = cgi::programs::query_param(env.get_str("QUERY_STRING").unwrap_or(""), "size")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(1024)
                .min(1 << 20);
            (id, blob(d, size).unwrap_or_else(|| Aggregate::new(d)), true)
        }
        "/cgi-bin/fshog" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let paths = cgi::programs::query_param(query, "path").unwrap_or("/index.html");
            let f = programs.fragments_mut();
            let report = fs_hog(d, &mut f.copier, &mut f.rx, paths);
            match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n{report}\n")) {
                Ok(a) => (id, a, true),
                Err(_) => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/fsreset" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let paths = cgi::programs::query_param(query, "path").unwrap_or("/index.html");
            let rounds = cgi::programs::query_param(query, "rounds")
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(10)
                .clamp(1, MAX_RESET_ROUNDS);
            // Our fragment cache holds fs pages too: a reset says we use
            // nothing we had, so it goes first.
            programs.drop_cache();
            let report = fs_reset_loop(d, programs.fragments_mut(), paths, rounds);
            match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n{report}\n")) {
                Ok(a) => (id, a, true),
                Err(_) => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/pattern" => {
            // `size` bytes (at most 1 MiB) that depend on `seed`, made
            // afresh for every request in new pages of our pool: tests hold
            // one response while others fill the pool with other seeds
            // (`cgi::gen::pattern`).
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let param = |k, default| {
                cgi::programs::query_param(query, k).and_then(|v| v.parse::<usize>().ok()).unwrap_or(default)
            };
            let (seed, size) = (param("seed", 0) as u32, param("size", 1024).min(1 << 20));
            match pattern(d, seed, size) {
                Some(a) => (id, a, true),
                None => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/hostile" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            match cgi::programs::query_param(query, "mode").unwrap_or("") {
                "forge" => hostile_forge(d, id, cgi::programs::query_param(query, "pools").unwrap_or("")),
                "garbage" => hostile_garbage(),
                "unheld" => hostile_unheld(d, id),
                _ => return None,
            }
            // Nothing more goes out on the reply ring (`MUTED`): httpd must
            // find the channel broken, fail this request and restart us.
            (id, Aggregate::new(d), false)
        }
        "/cgi-bin/slow" => {
            let ms = cgi::programs::query_param(env.get_str("QUERY_STRING").unwrap_or(""), "ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1000u64);
            spin_ms(ms.min(60_000));
            match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\nslept {ms} ms\n")) {
                Ok(a) => (id, a, true),
                Err(_) => (id, Aggregate::new(d), false),
            }
        }
        _ => return None,
    })
}

/// Set by `/cgi-bin/noconfirm` (test hook): this incarnation confirms no
/// death any more, as a hostile cgi that holds the death protocol up.
static NO_CONFIRM: AtomicBool = AtomicBool::new(false);

/// Confirms a death unless the test hook forbade it (`NO_CONFIRM`).
fn confirm(component: usize, death: u64) {
    if !(TEST_HOOKS && NO_CONFIRM.load(Ordering::Relaxed)) {
        component_runtime::events::confirm_settled(component, death);
    }
}

/// Set by `/cgi-bin/hostile` once it has written the reply ring directly:
/// from then on this incarnation sends no replies (its typed producer no
/// longer knows the ring's state).
static MUTED: AtomicBool = AtomicBool::new(false);

/// The producer end of channel B of `cgi_chan` (our replies to httpd), as
/// raw ring memory, continuing at the published head.
fn raw_reply_ring() -> Option<iolite::ring::RingProducer<AggDesc>> {
    let base = glue::cgi_chan::VADDR + cgi::chan::B_OFF;
    // SAFETY: channel B's forward ring, mapped read-write; we are its only
    // producer, and the typed one is not used again (`MUTED`).
    unsafe { iolite::ring::RingProducer::attach(rw(base, cgi::chan::CHANNEL_BYTES), cgi::chan::FWD_CAP).ok() }
}

/// `/cgi-bin/hostile?mode=forge&pools=A,B` (test hook): replies to request
/// `id` whose slices name what we may not reference, written straight into
/// the ring (the typed API cannot build them): pools `A`, `B`, ... (ids of
/// pools that are not ours, as an attacker reads them from the system's
/// description: the test names httpd's application pool and netstack's
/// socket pool, which httpd maps and our grant list leaves out), then a
/// wrong generation of a live buffer of our own pool, guessed generations
/// of httpd's request pool and of fs's file pool, an out-of-range buffer,
/// an out-of-range length, and too many slices. Each breaks the channel;
/// httpd reads up to the first of them.
fn hostile_forge(d: &'static Domain, id: u32, pools: &str) {
    let Some(mut ring) = raw_reply_ring() else { return };
    MUTED.store(true, Ordering::Relaxed);
    // A live buffer of our pool, kept for good (one page per call of this
    // hook), so that its generation is current when httpd checks the
    // forged one against it.
    let Some(live) = d.alloc(CGI_POOL, 64).ok().and_then(|b| b.seal(64).ok()) else { return };
    let live = *Box::leak(Box::new(live)).descs().first().expect("one slice");
    let slice = |pool, buf, gen, off, len| SliceDesc { pool, buf, gen, off, len };
    // At most what leaves the ring room for the six replies that follow.
    let foreign = pools.split(',').filter_map(|p| p.parse::<PoolId>().ok()).take(cgi::chan::FWD_CAP - 8);
    let forged = foreign.map(|p| slice(p, 0, 1, 0, 4096)).chain([
        slice(CGI_POOL, live.buf, live.gen ^ 0x0100_0000, 0, 64),
        slice(CGI_REQ_POOL, 0, 0x5eed_0001, 0, 64),
        slice(FILE_POOL, 0, 0x5eed_0002, 0, 4096),
        slice(CGI_POOL, u32::MAX, 1, 0, 64),
        slice(CGI_POOL, 0, 1, u32::MAX - 8, 4096),
    ]);
    let mut sent = 0;
    for s in forged {
        let mut desc = AggDesc { nslices: 1, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
        desc.slices[0] = s;
        if ring.push(desc).is_ok() {
            sent += 1;
        }
    }
    let desc = AggDesc { nslices: u32::MAX, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
    if ring.push(desc).is_ok() {
        sent += 1;
    }
    log!("hostile: {sent} forged replies written");
    glue::done::emit();
}

/// `/cgi-bin/hostile?mode=unheld` (test hook): a reply that looks right
/// in every field: a header from our own pool, then a slice of a live
/// buffer of fs's file pool, at its current published generation, that fs
/// never lent us (we map the pool and read the generation). Every check a
/// receiver can make on its own passes; only fs knows we do not hold it.
fn hostile_unheld(d: &'static Domain, id: u32) {
    let pages = d.pool_stats(FILE_POOL).map(|s| s.pages).unwrap_or(0);
    let unheld = (0..pages).find_map(|buf| {
        let (gen, sealed) = d.published(FILE_POOL, buf).ok()?;
        let ours = d.holds(FILE_POOL, buf).ok()?;
        let free = ours == iolite::Holds::default();
        (iolite::pool::gen_is_live(gen) && sealed >= 16 && free).then_some((buf, gen, sealed.min(4096)))
    });
    let Some((buf, gen, len)) = unheld else {
        log!("hostile: no live file buffer we do not hold");
        return;
    };
    let Ok(head) = cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n")) else {
        return;
    };
    let head = *Box::leak(Box::new(head)).descs().first().expect("one slice");
    let Some(mut ring) = raw_reply_ring() else { return };
    MUTED.store(true, Ordering::Relaxed);
    let mut desc = AggDesc { nslices: 2, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
    desc.slices[0] = head;
    desc.slices[1] = SliceDesc { pool: FILE_POOL, buf, gen, off: 0, len };
    let pushed = ring.push(desc).is_ok();
    log!("hostile: reply with file buffer {buf} (generation {gen:#x}, {len} bytes) written: {pushed}");
    glue::done::emit();
}

/// `/cgi-bin/hostile?mode=garbage` (test hook): impossible ring states in
/// the rings we produce into: channel B's head of `cgi_chan` (httpd reads
/// it) and the head of our release ring on `fs_channel` (fs reads it), far
/// beyond what the rings hold. Then an fs call, so fs looks at once.
fn hostile_garbage() {
    MUTED.store(true, Ordering::Relaxed);
    let head = |addr: usize| {
        // SAFETY: a ring's head word in a dataport mapped read-write; the
        // peer reads it atomically.
        unsafe { &*(addr as *const core::sync::atomic::AtomicU32) }
    };
    let tail = |addr: usize| head(addr + 64).load(Ordering::Acquire);
    let b = glue::cgi_chan::VADDR + cgi::chan::B_OFF;
    head(b).store(tail(b).wrapping_add(0x4000_0000), Ordering::Release);
    let rel = glue::fs_channel::VADDR + iolite::ring::ring_bytes::<AggDesc>(fs_api::FWD_CAP).div_ceil(64) * 64;
    head(rel).store(tail(rel).wrapping_add(0x7777_7777), Ordering::Release);
    log!("hostile: ring heads overwritten");
    let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
    glue::fs::stat("/index.html", &mut size, &mut mtime, &mut kind, &mut ino, &mut generation);
    glue::done::emit();
}

/// Most rounds one `/cgi-bin/fsreset` runs (each reads its files and
/// resets once): well within httpd's CGI timeout on a loaded TCG guest.
const MAX_RESET_ROUNDS: u32 = 100;

/// fs's (pool pages in use, resets waited, resets released at once), from
/// its `stats` call; `None` if it failed.
fn fs_reset_figures() -> Option<(u64, u64, u64)> {
    let mut v = [0u64; 14];
    let [a, b, c, e, f, g, h, i, pages, j, k, l, waits, released] = &mut v;
    (glue::fs::stats(a, b, c, e, f, g, h, i, pages, j, k, l, waits, released) == 0).then_some((v[8], v[12], v[13]))
}

/// `/cgi-bin/fsreset?rounds=N&path=A,B` (test hook): a client that reads
/// files and resets its fs session in a loop, as a hostile cgi could to
/// make fs quarantine pages without end. Each round opens and reads every
/// path whole, keeping every buffer fs sends (held while we reset), then
/// calls `reset` (fs releases what we held: we are alive, so nothing of
/// ours is unsettled), forgets fs's grants and attaches to the fresh
/// channel (`reattach_fs`), and only then drops the buffers (they are
/// ours alone now: no release goes to fs). Reports
/// `rounds=N released=R waited=W max_pages=P held_at_reset=K bytes=B
/// mismatches=M errors=E sha256=H1,H2`: the resets fs released at once and
/// quarantined during the loop (its counters), the most pool pages fs had
/// in use after a reset, the most buffers we held at one, the bytes read,
/// the rounds whose bytes of a file differed from the first round's, the
/// opens and reads that failed, and each file's SHA-256 in the first
/// round (the test compares them with the site manifest). Files held by
/// `/cgi-bin/fshog` are not dropped: do not mix the two hooks.
fn fs_reset_loop(d: &'static Domain, f: &mut FsFragments, paths: &str, rounds: u32) -> String {
    use sha2::{Digest, Sha256};
    let paths: Vec<&str> = paths.split(',').filter(|p| !p.is_empty()).take(8).collect();
    let mut first: Vec<Option<[u8; 32]>> = alloc::vec![None; paths.len()];
    let (mut mismatches, mut errors, mut bytes, mut held_max, mut max_pages) = (0u32, 0u32, 0u64, 0u32, 0u64);
    let start = fs_reset_figures().unwrap_or_default();
    for round in 0..rounds {
        let mut held: Vec<Aggregate<'static>> = Vec::new();
        let mut round_ok = true;
        'paths: for (i, path) in paths.iter().enumerate() {
            let (mut size, mut ino) = (0, 0);
            let h = glue::fs::open(path, &mut size, &mut ino);
            if h < 0 {
                errors += 1;
                continue;
            }
            let mut hash = Sha256::new();
            let mut off = 0;
            while off < size {
                f.tag += 1;
                let tag = f.tag;
                let n = glue::fs::read(h as u32, off, size - off, tag);
                if n <= 0 {
                    errors += 1;
                    continue 'paths;
                }
                let mut got = 0i64;
                while got < n {
                    match f.copier.recv(&mut f.rx) {
                        Ok(Some(m)) if m.tag == tag => {
                            got += m.agg.len() as i64;
                            for s in m.agg.slices() {
                                hash.update(s);
                            }
                            held.push(m.agg);
                        }
                        Ok(Some(_)) => {}
                        _ => {
                            errors += 1;
                            continue 'paths;
                        }
                    }
                }
                off += n as u64;
            }
            bytes += size;
            let digest: [u8; 32] = hash.finalize().into();
            match first[i] {
                None if round == 0 => first[i] = Some(digest),
                Some(want) if want == digest => {}
                _ => round_ok = false,
            }
        }
        if !round_ok {
            mismatches += 1;
        }
        held_max = held_max.max(d.pool_stats(FILE_POOL).map(|s| s.buffers_in_use).unwrap_or(0));
        glue::fs::reset();
        reattach_fs(d, &mut f.rx);
        drop(held);
        if let Some((pages, _, _)) = fs_reset_figures() {
            max_pages = max_pages.max(pages);
        }
    }
    let end = fs_reset_figures().unwrap_or_default();
    let mut hex = String::new();
    for (i, digest) in first.iter().enumerate() {
        if i > 0 {
            hex.push(',');
        }
        for b in digest.unwrap_or_default() {
            let _ = core::fmt::Write::write_fmt(&mut hex, format_args!("{b:02x}"));
        }
    }
    log!("fsreset: {rounds} rounds, {mismatches} mismatched, {errors} errors");
    alloc::format!(
        "rounds={rounds} released={} waited={} max_pages={max_pages} held_at_reset={held_max} bytes={bytes} mismatches={mismatches} errors={errors} sha256={hex}",
        end.2.saturating_sub(start.2),
        end.1.saturating_sub(start.1),
    )
}

/// Header + a fresh body of `/cgi-bin/pattern?seed=S&size=N`.
fn pattern(d: &'static Domain, seed: u32, size: usize) -> Option<Aggregate<'static>> {
    let mut head = cgi::gen::generate(d, CGI_POOL, |w| {
        write!(w, "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n")
    })
    .ok()?;
    if size > 0 {
        let mut b = d.alloc(CGI_POOL, size).ok()?;
        cgi::gen::pattern(seed, &mut b.writable()[..size]);
        head.append(b.seal(size).ok()?).ok()?;
    }
    Some(head)
}

/// Header + the cached body of `/cgi-bin/blob?size=N`.
fn blob(d: &'static Domain, size: usize) -> Option<Aggregate<'static>> {
    static mut BLOBS: Vec<(usize, Aggregate<'static>)> = Vec::new();
    // SAFETY: the component is single-threaded; only this function touches it.
    let blobs = unsafe { &mut *core::ptr::addr_of_mut!(BLOBS) };
    let mut head = cgi::gen::generate(d, CGI_POOL, |w| {
        write!(w, "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n")
    })
    .ok()?;
    if size == 0 {
        return Some(head);
    }
    if !blobs.iter().any(|(n, _)| *n == size) {
        if blobs.len() >= 6 {
            blobs.remove(0);
        }
        let mut b = d.alloc(CGI_POOL, size).ok()?;
        for (i, x) in b.writable()[..size].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        blobs.push((size, b.seal(size).ok()?));
    }
    let body = blobs.iter().find(|(n, _)| *n == size)?.1.duplicate().ok()?;
    head.append(body).ok()?;
    Some(head)
}

/// `/cgi-bin/fshog` (test hook): opens the comma-separated `paths` in turn
/// until fs refuses, then reads the open files, keeping every buffer
/// received, until fs refuses again (distinct files: the quota counts
/// distinct buffers).
/// Handles and buffers stay with this incarnation (a restart gives them
/// back: fs `reset`). Reports `opened=N open_error=E held_bytes=B
/// held_buffers=K read_error=F` (errors as fs returns them, -(code)).
fn fs_hog(d: &'static Domain, copier: &mut Copier<'static>, rx: &mut ChannelRx<'static>, paths: &str) -> String {
    static mut HOARD: Vec<Aggregate<'static>> = Vec::new();
    // SAFETY: the component is single-threaded; only this function touches it.
    let hoard = unsafe { &mut *core::ptr::addr_of_mut!(HOARD) };
    let mut handles = Vec::new();
    let mut paths = paths.split(',').cycle();
    let open_error = loop {
        let (mut size, mut ino) = (0, 0);
        let h = glue::fs::open(paths.next().unwrap_or(""), &mut size, &mut ino);
        if h < 0 {
            break h;
        }
        handles.push((h as u32, size));
        if handles.len() >= 4096 {
            break 0;
        }
    };
    let mut read_error = 0;
    let mut tag = 1u64 << 48;
    'files: for &(h, size) in &handles {
        let mut off = 0;
        while off < size {
            tag += 1;
            let n = glue::fs::read(h, off, size - off, tag);
            if n <= 0 {
                read_error = n;
                break 'files;
            }
            let mut got = 0i64;
            while got < n {
                match copier.recv(rx) {
                    Ok(Some(m)) if m.tag == tag => {
                        got += m.agg.len() as i64;
                        hoard.push(m.agg);
                    }
                    Ok(Some(_)) => {}
                    _ => break 'files,
                }
            }
            off += n as u64;
        }
    }
    let held: usize = hoard.iter().map(|a| a.len()).sum();
    let buffers = d.pool_stats(FILE_POOL).map(|s| s.buffers_in_use).unwrap_or(0);
    log!("fshog: {} open, {held} bytes held", handles.len());
    alloc::format!(
        "opened={} open_error={open_error} held_bytes={held} held_buffers={buffers} read_error={read_error}",
        handles.len()
    )
}
