//! The cgi component: CGI programs in their own protection domain.
//!
//! * **Requests** arrive from httpd on channel A of `cgi_chan`
//!   (`cgi::wire`: env ++ body, the body by reference in netstack's pool),
//!   **replies** go back on channel B: the program's output as one
//!   aggregate, generated parts in our (untrusted) pool, echoed bodies and
//!   page fragments forwarded by reference. A program that fails answers
//!   with an empty message without `FLAG_EOF` (httpd: 502).
//! * **Restarts**: every start (re)initialises both channels, bumps the
//!   generation in the control block (`cgi::chan::Control`) and wakes httpd,
//!   which fails what the dead incarnation left unanswered (502) and
//!   attaches anew. We also `reset` our fs client slot, so fs takes back
//!   what it had lent to the dead incarnation.
//! * **Programs**: the library's `/cgi-bin/stats`, `/cgi-bin/echo`,
//!   `/cgi-bin/page`, plus three for tests: `/cgi-bin/crash` (panics: a
//!   fault the supervisor answers by restarting us), `/cgi-bin/slow?ms=N`
//!   (answers after N ms of spinning) and `/cgi-bin/spin` (spins forever:
//!   only the restart httpd asks for after its 504 ends it),
//!   `/cgi-bin/restart?component=NAME` (asks the supervisor to restart
//!   NAME and prints the answer: the assembly grants us no restarts, so
//!   this shows that the supervisor refuses); and for bench/web
//!   `/cgi-bin/blob?size=N` (N bytes made once and kept, sent by reference).
//! * **Counters** for /cgi-bin/stats: httpd's text page, netstack's and
//!   netdrv's counter pages, fs's `stats` RPC, our own.
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
use core::sync::atomic::{AtomicU64, Ordering};

use cgi::{Component, Counters, Env, FragmentSource, Programs};
use component_runtime::{error, log, warn};
use fs::proto;
use iolite::{
    Aggregate, Boundary, BufMeta, ChannelRx, ChannelTx, Domain, NoNotify, PeerId, PoolId, PoolLayout, RoRegion,
    RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF,
};
use netstack::link::{self, CounterPage};

component_runtime::component_entry!(main);
component_runtime::global_heap!(2 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/cgi.rs"));

const CGI_POOL: PoolId = glue::attributes::CGI_POOL_ID as PoolId;
const HTTPD_POOL: PoolId = glue::attributes::HTTPD_POOL_ID as PoolId;
const SOCK_POOL: PoolId = glue::attributes::SOCK_POOL_ID as PoolId;
const FILE_POOL: PoolId = proto::FS_POOL;
const HTTPD: PeerId = PeerId(0);
const FS: PeerId = PeerId(1);
const _: () = assert!(glue::cgi_chan::SIZE >= cgi::chan::REGION_BYTES);
const _: () = assert!(glue::fs_channel::SIZE >= proto::CHANNEL_BYTES);

fn meta(size: usize) -> &'static mut [BufMeta] {
    let pages = PoolLayout::fitting(size).pages as usize;
    Box::leak(alloc::vec![BufMeta::EMPTY; pages].into_boxed_slice())
}

/// # Safety
/// A dataport mapped read-write for the program's lifetime.
unsafe fn rw(vaddr: usize, size: usize) -> RwRegion {
    // SAFETY: per the contract.
    unsafe { RwRegion::from_raw_parts(vaddr as *mut u8, size) }.expect("dataport region")
}

/// # Safety
/// A dataport mapped (read-only is enough) for the program's lifetime.
unsafe fn ro(vaddr: usize, size: usize) -> RoRegion {
    // SAFETY: per the contract.
    unsafe { RoRegion::from_raw_parts(vaddr as *const u8, size) }.expect("dataport region")
}

fn clock_word(i: usize) -> u64 {
    // SAFETY: the ticker's clock page, mapped read-only; atomics.
    unsafe { (*(glue::clock::VADDR as *const AtomicU64).add(i)).load(Ordering::Acquire) }
}

fn now_ms() -> u64 {
    clock_word(0) * clock_word(2).max(1) / 1_000_000
}

/// The page's fragments, read from fs by reference.
struct FsFragments {
    d: &'static Domain,
    rx: ChannelRx<'static, NoNotify>,
    tag: u64,
}

impl FragmentSource<'static> for FsFragments {
    fn version(&mut self, path: &str) -> Option<u64> {
        if path.len() > 768 {
            return None;
        }
        let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
        if glue::fs::stat(path, &mut size, &mut mtime, &mut kind, &mut ino, &mut generation) < 0 || kind != 1 {
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
        let (mut size, mut ino) = (0, 0);
        let h = glue::fs::open(path, &mut size, &mut ino);
        if h < 0 {
            return None;
        }
        self.tag += 1;
        let tag = self.tag;
        let n = glue::fs::read(h as u32, 0, size.min(15 * 16 * 1024), tag);
        glue::fs::close(h as u32);
        let mut out = Aggregate::new(self.d);
        if n <= 0 {
            return (n == 0).then_some(out);
        }
        while (out.len() as i64) < n {
            match self.rx.recv() {
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

/// netstack's and netdrv's counter pages as components, with the names
/// the stats schema uses for the common ones.
fn counter_page(name: &str, page: &CounterPage, names: &[&str]) -> Option<Component> {
    if !page.valid() {
        return None;
    }
    let mut c = Component::new(name);
    for (i, n) in names.iter().enumerate() {
        c.set(n, page.get(i));
    }
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
        _ => {
            alias(&mut c, "bytes_copied", "drv_bytes_copied");
        }
    }
    Some(c)
}

fn collect() -> Counters {
    let mut all = Counters { uptime_ms: now_ms(), components: Vec::new() };
    let mut text = Vec::new();
    // SAFETY: httpd's counter page, mapped read-only.
    if unsafe { cgi::chan::read(glue::httpd_stats::VADDR as *const u8, &mut text) } {
        all.push(cgi::chan::parse_counters("httpd", &text));
    }
    // SAFETY: the counter pages, mapped read-only; we only load from them.
    let (stk, drv) = unsafe {
        (CounterPage::at(glue::stack_stats::VADDR as *const u8), CounterPage::at(glue::drv_stats::VADDR as *const u8))
    };
    all.components.extend(counter_page("netstack", stk, link::STACK_NAMES));
    all.components.extend(counter_page("netdrv", drv, link::DRV_NAMES));
    let mut v = [0u64; 12];
    let [hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce] = &mut v;
    if glue::fs::stats(hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce) == 0 {
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
                .with("bounce_bytes", v[11]),
        );
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
    // SAFETY (all pools): mapped as the assembly declares for as long as
    // we run, used only through this domain.
    unsafe {
        d.add_owned_pool(
            CGI_POOL,
            rw(glue::cgi_pool::VADDR, glue::cgi_pool::SIZE),
            meta(glue::cgi_pool::SIZE),
            Trust::Trusted,
        )
        .expect("cgi pool");
        d.add_foreign_pool(
            HTTPD_POOL,
            ro(glue::app_pool::VADDR, glue::app_pool::SIZE),
            meta(glue::app_pool::SIZE),
            Trust::Trusted,
        )
        .expect("httpd pool");
        d.add_foreign_pool(
            SOCK_POOL,
            ro(glue::sock_pool::VADDR, glue::sock_pool::SIZE),
            meta(glue::sock_pool::SIZE),
            Trust::Trusted,
        )
        .expect("sock pool");
        d.add_foreign_pool(
            FILE_POOL,
            ro(glue::file_pool::VADDR, glue::file_pool::SIZE),
            meta(glue::file_pool::SIZE),
            Trust::Trusted,
        )
        .expect("file pool");
    }
    // A fresh start at fs: it takes back what an earlier incarnation held
    // and sets our channel up again.
    glue::fs::reset();
    // SAFETY: fs initialised the channel before answering; the only receiver.
    let fs_rx = unsafe {
        ChannelRx::attach(
            d,
            FS,
            rw(glue::fs_channel::VADDR, glue::fs_channel::SIZE),
            proto::FWD_CAP,
            proto::REL_CAP,
            NoNotify,
            BUILD_COPY_MODE,
            Boundary::FileCacheToApp,
            Some(CGI_POOL),
        )
    }
    .expect("fs channel");

    // --- the httpd channels: ours to (re)initialise ---
    let base = glue::cgi_chan::VADDR;
    let n = cgi::chan::CHANNEL_BYTES;
    // SAFETY: the cgi_chan dataport, mapped read-write; httpd attaches only
    // after we publish the generation below.
    let (requests, mut replies, control) = unsafe {
        iolite::init_channel(rw(base, n), cgi::chan::FWD_CAP, cgi::chan::REL_CAP).expect("channel A");
        iolite::init_channel(rw(base + cgi::chan::B_OFF, n), cgi::chan::FWD_CAP, cgi::chan::REL_CAP)
            .expect("channel B");
        let rx = ChannelRx::attach(
            d,
            HTTPD,
            rw(base, n),
            cgi::chan::FWD_CAP,
            cgi::chan::REL_CAP,
            NoNotify,
            BUILD_COPY_MODE,
            Boundary::Pipe,
            Some(CGI_POOL),
        )
        .expect("channel A");
        let tx = ChannelTx::attach(
            d,
            HTTPD,
            rw(base + cgi::chan::B_OFF, n),
            cgi::chan::FWD_CAP,
            cgi::chan::REL_CAP,
            NoNotify,
        )
        .expect("channel B");
        (rx, tx, cgi::chan::Control::at(base as *mut u8))
    };
    let mut requests = requests;
    let generation = control.start_generation();
    log!("ready (generation {generation}, restart {})", start.restarts);
    glue::done::emit();

    let mut programs = Programs::new(d, CGI_POOL, FsFragments { d, rx: fs_rx, tag: 0 });
    // httpd's requests: a corrupt ring or a forged descriptor breaks the
    // channel for good (reported once) rather than being retried.
    let mut guard = iolite::Guard::new();
    loop {
        let _ = replies.poll_releases();
        let _ = requests.flush_releases();
        let _ = programs.fragments_mut().rx.flush_releases();
        glue::wake::wait();
        let mut answered = 0;
        loop {
            let r = match guard.recv(&mut requests) {
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
            let (id, reply, ok) = run(d, &mut programs, r.agg, r.tag);
            let flags = if ok { FLAG_EOF } else { 0 };
            if let Err((e, _)) = replies.send(reply, u64::from(id), flags) {
                warn!("reply {id}: {e:?}");
            }
            answered += 1;
        }
        if answered > 0 {
            control.answered.fetch_add(answered, Ordering::Relaxed);
            replies.flush();
            glue::done::emit();
        }
    }
}

/// Runs one request; `(id, output, ok)`.
fn run(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    agg: Aggregate<'static>,
    tag: u64,
) -> (u32, Aggregate<'static>, bool) {
    let (id, env, body): (u32, Env, _) = match cgi::wire::decode_request(agg, tag) {
        Ok(x) => x,
        Err(_) => return (cgi::wire::split_request_tag(tag).0, Aggregate::new(d), false),
    };
    let script = String::from(env.get_str("SCRIPT_NAME").unwrap_or(""));
    match script.as_str() {
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
        _ => {
            let counters =
                if script == "/cgi-bin/stats" || script == "/cgi-bin/page" { collect() } else { Counters::default() };
            match programs.run(&env, body, &counters) {
                Ok(out) => (id, out, true),
                Err(e) => {
                    warn!("{script}: {e:?}");
                    (id, Aggregate::new(d), false)
                }
            }
        }
    }
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
