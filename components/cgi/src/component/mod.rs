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
//!
//! The shell (`component_runtime::shell`): [`Cgi`]'s peers are httpd (the
//! `cgi_chan` duplex) and fs (`fs.rs`: the fragments' client, whose link
//! follows fs's deaths); its round takes deaths, then requests
//! (`requests.rs`), then sends what streams and tees may (`streams.rs`).
//! `counters.rs` gathers `/cgi-bin/stats`'s figures; `hooks.rs` holds the
//! test images' programs.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use cgi::Programs;
use component_runtime::link::{Deaths, Link, PeerEvent};
use component_runtime::log;
use component_runtime::shell::{self, Round, Shell, Then};
use component_runtime::time::ClockPage;
use glue_rt::map_pool;
use glue_rt::pools::rw;
use iolite::{init_duplex, Boundary, Copier, Domain, Duplex, DuplexAttach, PeerId, Trust, Want, BUILD_COPY_MODE};
use outbox::Outbox;

mod counters;
mod fs;
mod hooks;
mod requests;
mod streams;

use fs::{attach_fs, FsFragments};
use streams::{send_streams, send_tees, to_httpd, Active, Reply, Teeing, Uploading};

component_runtime::component_entry!(main);
component_runtime::global_heap!(2 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/cgi.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{BODY_POOL, CGI_POOL, CGI_REQ_POOL, FILE_POOL};
/// `cgi.test_hooks = 1` (test images only): build in the test hooks
/// (`hooks.rs`). A constant from the assembly, so the default image's
/// binary has neither their code nor their names.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
const HTTPD: PeerId = PeerId(0);
const FS: PeerId = PeerId(1);
/// fs's instance name in the events page, as the assembly connects it.
const FS_NAME: &str = glue::fs::PEER;
const _: () = assert!(glue::cgi_chan::SIZE >= cgi::chan::REGION_BYTES);
const _: () = assert!(glue::fs_channel::SIZE >= fs_api::CHANNEL_BYTES);

fn now_ms() -> u64 {
    // SAFETY: the ticker's clock page, mapped read-only for our lifetime.
    unsafe { ClockPage::at(glue::clock::VADDR) }.now_ms()
}

/// The cgi's peers (httpd, fs) and what its programs have in progress.
struct Cgi {
    d: &'static Domain,
    /// httpd: requests on `chan.rx` (a corrupt ring or a forged
    /// descriptor breaks the channel for good, reported once, rather
    /// than being retried), replies on `chan.tx`. Its deaths are not
    /// ours to follow (a new httpd asks for a fresh cgi): the link has
    /// no record, and they are confirmed at once.
    httpd: Link<Duplex<'static>>,
    /// The copy modes copy requests at our end (posix: as read(2) from a
    /// pipe).
    copier: Copier<'static>,
    /// Deaths in the system; our own quarantine after a restart.
    deaths: Deaths,
    /// The programs, and fs (through their fragment source).
    programs: Programs<'static, FsFragments>,
    /// A reply httpd's ring had no room for: it goes first, and until it
    /// has gone we take no more requests (httpd's request ring fills and
    /// it answers 503 itself), instead of dropping the reply (a 504 and a
    /// restart of ours).
    replies: Outbox<Reply>,
    /// Streamed outputs: each sends a message when it is due and has
    /// credit.
    streams: Vec<Active>,
    /// Programs consuming a streamed body.
    uploads: Vec<Uploading>,
    /// `/cgi-bin/tee`s passing a streamed body back.
    tees: Vec<Teeing>,
    /// A stream found our pool full: wait for buffers to come back.
    starved: bool,
    /// What the round asks httpd to signal us for.
    want: Want,
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
    // Pages our dead predecessor left in use (responses httpd, netstack or
    // the NIC may still be sending) stay quarantined until the supervisor
    // says every peer settled that death; the pool's generations go on.
    let deaths = Deaths::new(start.instance as usize, d, &[CGI_POOL]).confirming_with(hooks::confirm);
    // A fresh start at fs: it takes back what an earlier incarnation held
    // and sets our channel up again.
    glue::fs::reset();
    let fs = Link::new(FS_NAME, FS, deaths.page(), attach_fs(d));
    let fs_copier = Copier::new(BUILD_COPY_MODE, Boundary::FileCacheToApp, Some(CGI_POOL)).expect("copy pool");
    let copier = Copier::new(BUILD_COPY_MODE, Boundary::Pipe, Some(CGI_POOL)).expect("copy pool");
    // --- the httpd region: ours to (re)initialise, last: publishing its
    // new generation tells httpd we serve ---
    // SAFETY: the cgi_chan dataport, mapped read-write for our lifetime;
    // httpd attaches only after it sees the generation this publishes.
    let (chan, generation) = unsafe {
        let region = rw(glue::cgi_chan::VADDR, glue::cgi_chan::SIZE);
        let generation = init_duplex(region, cgi::chan::GEOMETRY).expect("cgi_chan");
        let at =
            DuplexAttach { domain: d, peer: HTTPD, region, geometry: cgi::chan::GEOMETRY, side: cgi::chan::CGI_SIDE };
        (Duplex::attach(at).expect("cgi_chan"), generation)
    };
    log!("ready (generation {generation}, restart {})", start.restarts);
    glue::done::emit();
    shell::run(Cgi {
        d,
        httpd: Link::new("httpd", HTTPD, None, chan),
        copier,
        deaths,
        programs: Programs::new(d, CGI_POOL, FsFragments::new(d, fs, fs_copier)),
        replies: Outbox::new(1),
        streams: Vec::new(),
        uploads: Vec::new(),
        tees: Vec::new(),
        starved: false,
        want: Want::default(),
    })
}

impl Shell for Cgi {
    fn notified(&mut self, _: Round) -> Then {
        self.httpd.chan.disarm();
        self.check_events();
        self.take_requests();
        let muted = TEST_HOOKS && hooks::MUTED.load(Ordering::Relaxed);
        if !muted {
            let tx = &mut self.httpd.chan.tx;
            self.starved = send_streams(self.d, &mut self.programs, &mut self.streams, &mut self.replies, tx);
            send_tees(self.d, &mut self.tees, &mut self.replies, tx);
        }
        let _ = self.httpd.chan.tx.poll_releases();
        let tx = &mut self.httpd.chan.tx;
        self.replies.drain(|r| to_httpd(tx, r));
        // Replies, and the requests' buffers back: httpd is signalled if
        // it waits for them.
        if self.httpd.chan.flush() {
            glue::done::emit();
        }
        let _ = self.programs.fragments_mut().link.chan.flush_releases();
        // Requests, unless the copy stage waits for room in our pool (then
        // our replies' buffers coming back) or a reply waits for room.
        // A stream waiting for its time wakes with the ticker; for credit,
        // with httpd's control message.
        let stalled = self.copier.stalled();
        let waiting = !self.replies.is_empty();
        let data = !stalled && !waiting && self.httpd.rx_guard.broken().is_none();
        self.want = Want { data, releases: stalled || self.starved, room: waiting };
        let now = now_ms();
        let due = !waiting
            && (!self.starved && self.streams.iter().any(|a| a.ready(now))
                || self.tees.iter().any(|t| t.owed > 0 || (t.credit > 0 && !t.out.is_empty())));
        if due {
            return Then::Again;
        }
        Then::Wait
    }

    fn arm(&mut self) -> bool {
        self.httpd.chan.arm(self.want)
    }

    fn wait(&mut self) -> u64 {
        glue::wake::wait()
    }
}

impl Cgi {
    /// Deaths of our peers (the system events page). fs's: reconnect at
    /// once, drop the fragment cache (its buffers are the dead
    /// incarnation's), and confirm once the taint is gone (httpd,
    /// netstack and the NIC gave back the fragments we forwarded). Any
    /// other: confirmed at once (we hold nothing it granted us but
    /// through httpd, which tracks its own; we share dataports with the
    /// network path, netdrv maps our pool and we read the counter pages,
    /// but receive no buffer from it). Our own settled ends our pool's
    /// quarantine.
    fn check_events(&mut self) {
        let d = self.d;
        let fs_index = self.programs.fragments_mut().link.index();
        for e in self.deaths.poll(d, &[fs_index]) {
            if let Some(PeerEvent::Died { death }) = self.programs.fragments_mut().link.see(e, d) {
                self.programs.drop_cache();
                self.programs.fragments_mut().fs_died(death);
            }
        }
        self.programs.fragments_mut().link.confirm_if_clean(d, &self.deaths);
    }
}
