//! The fs component: brings up the disk, mounts the site, and serves
//! `FsIoLite` (see camkes/interfaces/FsIoLite.idl4 and README.md).
//!
//! Clients: the RPC badge `b` (1, 2, … in the order of the connection's
//! `from` ends) names client `b`, the instance `glue::fs::CLIENTS[b - 1]`
//! (at most two); its channel is whichever of the dataports `channel` and
//! `channel2` the assembly shares with that instance (its peer). Each
//! client has its own open-file table and its own quota of buffers it may
//! hold at once, sized by the assembly by the client's name
//! (`client_files`, `client_quota`: `"httpd=520"`; `fs::clients`):
//! a client that exhausts its share gets errors (`TooManyOpen`,
//! `ChannelBusy`), the others are unaffected. A client that (re)starts calls
//! `reset` first: fs then sets its channel up afresh (a restartable client,
//! e.g. the cgi) and quarantines what it had lent to the old incarnation,
//! which may have forwarded those pages (the cgi passes file fragments on
//! to httpd, netstack and the NIC): they are neither evicted for reuse nor
//! freed until the system events page says that the client's own death is
//! settled (`fs::quarantine`; the client's instance is the one the
//! assembly's RPC connection to us names, `CLIENT_NAMES`; fs polls the
//! page on every call, `fs.system_events = "poll"`).
//!
//! Lines it prints (stable; tests/robot/filesystem.robot waits for some):
//!
//! ```text
//! [fs] virtio-blk at 00:05.0: I/O ports 0xc000, ioapic pin 10 (irq), queue 256, 16384 sectors
//! [fs] superblock: magic 0xef53
//! [fs] mounted ext2: block size 4096, cache budget 2048 KiB, chunk 16 KiB, pool 1023 pages, mode iolite
//! [fs] cache policy lru                                   (or gds: fs.cache_policy)
//! [fs] /.iolite/config: address 10.0.2.20/24, ...         (or why not: site.rs)
//! [fs] ready
//! [fs] evict <ino> <offset> referenced|unreferenced       (when fs.evict_log = 1)
//! [fs] budget <bytes>                                     (set_budget)
//! [fs] memory budget <M> KiB, cache floor <F> KiB, charging httpd's pool (yes|no) and netstack's send rings (yes|no)
//! ```
//!
//! **The cache's share of memory** (`memory_budget` > 0; `fs::budget`
//! explains the model): every [`UPDATE_EVERY`] calls, and on `stats` and
//! `budget`, fs reads the *I/O bytes held* that httpd and netstack
//! publish in their counter pages (`httpd_stats`: its application pool's
//! pages in use; `stack_stats`: its send-ring bytes in use), both mapped
//! read-only and untrusted (read once, bounded), and its own pool's pages
//! held outside the cache, and
//! shrinks or grows the cache to what they leave of the memory budget.

//!
//! The shell: fs is an RPC server, so the glue's dispatcher is its loop
//! (`rpc.rs`: the calls); each client is a `component_runtime::link::Link`
//! over its channel, and `Deaths` confirms every death at once (we
//! receive no buffers) and ends our own quarantine. `probe.rs` finds the
//! disk.

mod disk;
mod nvme_disk;
mod probe;
mod rpc;
mod site;
mod virtio_blk;

use alloc::boxed::Box;
use alloc::vec::Vec;

use component_runtime::link::{Deaths, Link};
use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use counters::CounterPage;
use fs::budget::{Elastic, Model};
use fs::clients::{open_read, queue_range, OpenFiles};
use fs::proto::{self, ErrorCode};
use fs::quarantine::Quarantines;
// The file cache's pool id: derived by the compiler from the assembly.
use fs::{Config, File, Fs};
use glue::pools::FILE_POOL;
use iolite::{Attach, ChannelTx, Domain, Geometry, PeerId, PoolLayout, RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF};

use disk::Disk;

component_runtime::component_entry!(main);
component_runtime::global_heap!(4 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/fs.rs"));

/// Data pages of the pool dataport.
const POOL_PAGES: u32 = PoolLayout::fitting(glue::file_pool::SIZE).pages;
const _: () = assert!(PoolLayout { pages: POOL_PAGES }.region_bytes() <= glue::file_pool::SIZE);
const _: () = assert!(POOL_PAGES as usize <= proto::REL_CAP, "release ring smaller than the pool");
const _: () = assert!(glue::channel::SIZE >= proto::CHANNEL_BYTES, "channel dataport too small");
const _: () = assert!(glue::channel2::SIZE >= proto::CHANNEL_BYTES, "channel2 dataport too small");
/// The instance behind each client, in badge order, from the assembly's
/// RPC connection to us (the compiler derives it): the name of its record
/// in the events page, whose death its reset waits for (`fs::quarantine`).
const CLIENT_NAMES: &[&str] = glue::fs::CLIENTS;
/// How many clients the assembly connects: one channel each.
const CLIENTS: usize = CLIENT_NAMES.len();
const _: () = assert!(CLIENTS >= 1 && CLIENTS <= 2, "fs serves one or two clients (two channels)");

/// Client `i`'s open-file table size and quota (distinct buffers held at
/// once), from the assembly, which gives them by the client's name (the
/// compiler checks every client has one of each and puts them in badge
/// order).
const CLIENT_FILES: &[i64] = glue::attributes::CLIENT_FILES_BY_BADGE;
const CLIENT_QUOTA: &[i64] = glue::attributes::CLIENT_QUOTA_BY_BADGE;
const _: () = assert!(CLIENT_FILES.len() >= CLIENTS && CLIENT_QUOTA.len() >= CLIENTS, "a share per client");
const _: () = {
    let mut i = 0;
    let mut sum = 0;
    while i < CLIENTS {
        // One read is up to MAX_SLICES buffers: a smaller quota could never
        // be served.
        assert!(CLIENT_QUOTA[i] >= iolite::MAX_SLICES as i64, "client_quota below one read");
        assert!(CLIENT_FILES[i] > 0, "client_files: at least one file");
        sum += CLIENT_QUOTA[i];
        i += 1;
    }
    assert!(sum <= POOL_PAGES as i64, "client quotas exceed the pool");
};
/// The cache's replacement policy, from the assembly's `cache_policy`
/// ("lru", the default, or "gds"); any other value fails the build here.
const POLICY: fs::Policy = match fs::Policy::parse(glue::attributes::CACHE_POLICY) {
    Some(p) => p,
    None => panic!("fs.cache_policy: expected \"lru\" or \"gds\""),
};
/// `fs.test_hooks = 1` (test images only): the fault hook (`fault_hook`).
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
/// Largest directory listing (one buffer).
const MAX_LISTING: usize = 256 << 10;
/// The memory budget for I/O data (0: the cache's budget is fixed,
/// `cache_budget`) and the cache's floor, from the assembly.
const MEMORY_BUDGET: u64 = if glue::attributes::MEMORY_BUDGET > 0 { glue::attributes::MEMORY_BUDGET as u64 } else { 0 };
const CACHE_FLOOR: usize = if glue::attributes::CACHE_FLOOR > 0 { glue::attributes::CACHE_FLOOR as usize } else { 0 };
/// Calls between two updates of the budget: an update evicts only when
/// the budget fell, so this is about keeping the per-call cost flat.
const UPDATE_EVERY: u32 = 8;

/// The counter pages fs charges its cache for (those the assembly maps).
struct Peers {
    /// httpd's counter page (`httpd_stats`).
    httpd: Option<&'static CounterPage>,
    /// netstack's counter page (`stack_stats`).
    stack: Option<&'static CounterPage>,
}

impl Peers {
    fn new(start: &StartInfo) -> Self {
        let mapped = |vaddr: usize| start.dataports().iter().any(|r| r.vaddr == vaddr as u64);
        // SAFETY: the counter pages, mapped read-only (4 KiB,
        // page-aligned); we only load from them.
        let page = |vaddr: usize| mapped(vaddr).then(|| unsafe { CounterPage::at(vaddr as *const u8) });
        Self { httpd: page(glue::httpd_stats::VADDR), stack: page(glue::stack_stats::VADDR) }
    }

    /// The I/O bytes httpd and netstack say they hold now (0 when unmapped
    /// or not yet published). Untrusted: read once here, bounded by the
    /// model.
    fn charges(&self) -> (u64, u64) {
        let held = |p: Option<&CounterPage>| p.and_then(CounterPage::io_bytes_held).unwrap_or(0);
        (held(self.httpd), held(self.stack))
    }
}

fn main(start: &'static StartInfo) -> ! {
    init_heap();
    let dev = match probe::bring_up(start) {
        Ok(dev) => dev,
        Err(msg) => {
            error!("{msg}");
            no_disk()
        }
    };
    serve(dev, start)
}

fn serve(mut dev: Disk, start: &'static StartInfo) -> ! {
    let seed = start.seed;
    check_superblock(&mut dev);
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    d.seed_generations(seed);
    // SAFETY: the pool dataport is used only through the IO-Lite library
    // from here on.
    unsafe { glue_rt::map_pool!(owned d, FILE_POOL, glue::file_pool, Trust::Trusted) }.expect("pool");
    let peers: Vec<PeerId> = (0..CLIENTS).map(|i| PeerId(i as u8)).collect();
    d.set_pool_acl(FILE_POOL, &peers).expect("acl");
    // Each client's record in the events page, by its instance's name
    // (`CLIENT_NAMES`): its own death is what its reset waits for.
    let page = component_runtime::events::page();
    let mut clients = Vec::new();
    for (i, &peer) in peers.iter().enumerate() {
        d.set_quota(peer, CLIENT_QUOTA[i] as u32).expect("quota");
        clients.push(Link::new(CLIENT_NAMES[i], peer, page, open_channel(d, i)));
    }
    let sizes: Vec<usize> = CLIENT_FILES[..CLIENTS].iter().map(|&n| n as usize).collect();

    let mut fs = mount(dev, d);
    site::load(&mut fs);
    let peers = Peers::new(start);
    let elastic = (MEMORY_BUDGET > 0).then(|| {
        let pool_bytes = POOL_PAGES as usize * iolite::PAGE_SIZE;
        Elastic::new(Model::new(MEMORY_BUDGET, CACHE_FLOOR, pool_bytes), fs.cache())
    });
    // Our incarnation: the death count our record in the events page had
    // when we started (the supervisor counts a death before the rebuild).
    // Handles carry it, so a call an earlier incarnation's client re-issues
    // to us (the supervisor resumes callers blocked in a call to the dead
    // one) with its old handle gets BadHandle, never another file.
    let me = start.instance as usize;
    let epoch = page.filter(|p| me < p.len()).map_or(0, |p| p.state(me).0);
    // Pages the dead incarnation left in use (the cache's buffers, which
    // httpd, netstack and the NIC's TX ring may still hold) stay
    // quarantined until every peer settled that death: never reallocated
    // while referenced. Free pages serve at once; the cache refills.
    let deaths = Deaths::new(me, d, &[FILE_POOL]);
    if let Some(e) = &elastic {
        let yes = |b: bool| if b { "yes" } else { "no" };
        log!(
            "memory budget {} KiB, cache floor {} KiB, charging httpd's pool ({}) and netstack's send rings ({})",
            e.model().memory() >> 10,
            e.model().floor() >> 10,
            yes(peers.httpd.is_some()),
            yes(peers.stack.is_some())
        );
    }
    let mut server = Server {
        fs,
        clients,
        d,
        files: OpenFiles::with_epoch(&sizes, epoch),
        admin: glue::attributes::ADMIN != 0,
        resets: 0,
        deaths,
        quarantines: Quarantines::default(),
        epoch,
        fault_next_read: false,
        elastic,
        peers,
        calls: 0,
    };
    server.poll_events();
    if start.restarts > 0 {
        log!("ready (restart {}, incarnation {epoch})", start.restarts);
    } else {
        log!("ready");
    }
    glue::fs::run(&mut server)
}

/// Without a disk we can read: the others run on the assembly's defaults
/// (the config page says so at once, rather than after their wait).
fn no_disk() -> ! {
    site::publish(site_config::page::Source::NoDisk, &site_config::Settings::default());
    component_runtime::exit(1)
}

/// Step one of bring-up, kept as a check: the superblock's magic, read
/// raw from sector 2 (bytes 1024.. of the disk).
fn check_superblock(dev: &mut Disk) {
    use fs::BlockDevice;
    let mut sb = [0u8; 1024];
    match dev.read_at(1024, &mut sb) {
        Ok(()) => log!("superblock: magic {:#06x}", u16::from_le_bytes([sb[56], sb[57]])),
        Err(e) => {
            error!("reading the superblock failed: {e:?}");
            no_disk()
        }
    }
}

/// Mounts the volume under the file cache the assembly configures.
fn mount(dev: Disk, d: &'static Domain) -> Fs<'static, Disk> {
    let budget = glue::attributes::CACHE_BUDGET.max(0) as usize;
    let mut cfg = Config::with_budget(budget);
    cfg.policy = POLICY;
    // Copies happen at the client's end of the channel (FileCacheToApp):
    // the cache always hands out references.
    cfg.mode = iolite::CopyMode::IoLite;
    let mut fs = match Fs::mount(dev, d, FILE_POOL, cfg) {
        Ok(fs) => fs,
        Err(e) => {
            error!("mount failed: {e}");
            no_disk()
        }
    };
    let evict_log = glue::attributes::EVICT_LOG != 0;
    fs.cache().set_eviction_log(evict_log);
    log!(
        "mounted ext2: block size {}, cache budget {} KiB, chunk {} KiB, pool {} pages, mode {}",
        fs.volume().block_size(),
        fs.cache().budget() >> 10,
        fs.chunk_bytes() >> 10,
        POOL_PAGES,
        BUILD_COPY_MODE.name()
    );
    log!("cache policy {}", POLICY.name());
    fs
}

/// Client `i`'s channel dataport: the one the assembly shares with that
/// client's instance (`channel` or `channel2`, by its peer, not its place).
fn channel_region(i: usize) -> RwRegion {
    let client = CLIENT_NAMES[i];
    let (vaddr, size) = if glue::channel::PEERS == [client] {
        (glue::channel::VADDR, glue::channel::SIZE)
    } else if glue::channel2::PEERS == [client] {
        (glue::channel2::VADDR, glue::channel2::SIZE)
    } else {
        panic!("no channel dataport is shared with client {client}")
    };
    // SAFETY: a channel dataport the assembly maps read-write (CLIENTS says
    // which exist), used only through the IO-Lite library.
    unsafe { glue_rt::pools::rw(vaddr, size) }
}

/// (Re)initialises client `i`'s channel and attaches as its only sender.
/// The client attaches only after a call we answer after this.
fn open_channel(d: &'static Domain, i: usize) -> ChannelTx<'static> {
    let geometry = Geometry { fwd: proto::FWD_CAP, rel: proto::REL_CAP };
    // SAFETY: per channel_region; nobody uses the rings until we answer.
    unsafe { iolite::init_channel(channel_region(i), geometry) }.expect("channel");
    // SAFETY: initialised above; the only sender.
    unsafe { ChannelTx::attach(Attach { domain: d, peer: PeerId(i as u8), region: channel_region(i), geometry }) }
        .expect("channel")
}

/// The calling client's index (from the RPC badge; unknown badges are
/// treated as client 1, which they cannot be: the assembly makes them).
fn caller() -> usize {
    (glue::fs::sender_badge() as usize).clamp(1, CLIENTS) - 1
}

struct Server {
    fs: Fs<'static, Disk>,
    /// Per client: its channel, and its record in the events page
    /// (`CLIENT_NAMES`). A release ring the client corrupts breaks its
    /// channel (the link's `tx_guard`, reported once); that client's
    /// reads then fail, the others go on.
    clients: Vec<Link<ChannelTx<'static>>>,
    d: &'static Domain,
    /// Each client's open files.
    files: OpenFiles<File>,
    admin: bool,
    resets: u64,
    /// Deaths in the system (the events page, if the assembly subscribes
    /// us), and our own pool's quarantine after a restart.
    deaths: Deaths,
    /// Clients whose dead incarnation's holds are quarantined, each
    /// waiting for its own death to settle (`fs::quarantine`).
    quarantines: Quarantines,
    /// Our incarnation (handles carry it).
    epoch: u64,
    /// Test hook: the next read faults.
    fault_next_read: bool,
    /// The cache's budget following the memory model (`memory_budget` >
    /// 0), until a client with `admin` sets a fixed one.
    elastic: Option<Elastic>,
    /// The counter pages the model charges.
    peers: Peers,
    /// Calls since boot, to update the budget every `UPDATE_EVERY`.
    calls: u32,
}

impl Server {
    /// Before a request: take back what the clients released, so that the
    /// cache's "referenced" test sees the clients' current holds.
    fn begin(&mut self) {
        for (i, c) in self.clients.iter_mut().enumerate() {
            if let (_, Some(e)) = c.tx_guard.poll_releases(&mut c.chan) {
                error!("channel channel{} from client {} broken: {e:?}", i + 1, i + 1);
            }
        }
        self.poll_events();
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(UPDATE_EVERY) {
            self.update_budget();
        }
    }

    /// Recomputes the cache's budget from what the others hold now.
    fn update_budget(&mut self) {
        let Some(e) = self.elastic.as_mut() else { return };
        let (httpd, stack) = self.peers.charges();
        e.update(self.fs.cache(), httpd, stack);
    }

    /// Confirms peers' deaths (we receive no buffers, so nothing of ours
    /// is tainted by a dead peer) and ends quarantines that are settled.
    fn poll_events(&mut self) {
        let d = self.d;
        // No death is a link's to follow: every one is confirmed at once.
        let _ = self.deaths.poll(d, &[]);
        let Some(page) = self.deaths.page() else { return };
        for client in self.quarantines.take_settled(page.len(), |i| page.state(i)) {
            let n = d.peer_settled(PeerId(client as u8)).unwrap_or(0);
            log!("client {} settled: {n} quarantined buffers released", client + 1);
        }
    }

    /// After a request: print the evictions it caused (when logging).
    fn end(&mut self) {
        for ev in self.fs.cache().take_evictions() {
            log!(
                "evict {} {} {}",
                ev.key.file,
                ev.key.offset,
                if ev.referenced { "referenced" } else { "unreferenced" }
            );
        }
    }

    fn read_file(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> Result<i64, ErrorCode> {
        let client = caller();
        let file = self.files.get(client, handle)?.clone();
        let c = &mut self.clients[client];
        let was_broken = c.tx_guard.broken().is_some();
        let queued = queue_range(&mut self.fs, &mut c.chan, &mut c.tx_guard, &file, offset, length, tag);
        if let (false, Some(b)) = (was_broken, c.tx_guard.broken()) {
            error!("channel channel{} from client {} broken: {b:?}", client + 1, client + 1);
        }
        queued
    }

    /// `open_read` (FsIoLite.idl4): the handle, the file's stat and the
    /// bytes queued (`fs::clients::open_read`).
    fn open_and_read(&mut self, path: &str, length: u64, tag: u64) -> Result<(u32, fs::Stat, u64), ErrorCode> {
        let client = caller();
        let c = &mut self.clients[client];
        let was_broken = c.tx_guard.broken().is_some();
        let r = open_read(
            &mut self.fs,
            &mut self.files,
            client,
            &mut c.chan,
            &mut c.tx_guard,
            path.as_bytes(),
            length,
            tag,
        );
        if let (false, Some(b)) = (was_broken, c.tx_guard.broken()) {
            error!("channel channel{} from client {} broken: {b:?}", client + 1, client + 1);
        }
        r
    }

    fn list(&mut self, path: &str, tag: u64) -> Result<i64, ErrorCode> {
        let entries = self.fs.list_dir(path.as_bytes()).map_err(ErrorCode::from)?;
        let mut bytes = Vec::new();
        for e in &entries {
            proto::encode_record(&mut bytes, e.ino, e.kind, &e.name);
        }
        if bytes.len() > MAX_LISTING {
            return Err(ErrorCode::TooLarge);
        }
        let agg = if bytes.is_empty() {
            iolite::Aggregate::new(self.d)
        } else {
            let mut buf = self.d.alloc(FILE_POOL, bytes.len()).map_err(|_| ErrorCode::NoMemory)?;
            buf.writable()[..bytes.len()].copy_from_slice(&bytes);
            buf.seal(bytes.len()).map_err(|_| ErrorCode::NoMemory)?
        };
        let client = caller();
        let c = &mut self.clients[client];
        match c.tx_guard.send(&mut c.chan, agg, tag, FLAG_EOF) {
            Ok(()) => Ok(entries.len() as i64),
            Err((iolite::Error::Full | iolite::Error::QuotaExceeded, _, _)) => Err(ErrorCode::ChannelBusy),
            Err((e, _, broke)) => {
                if let Some(b) = broke {
                    error!("channel channel{} from client {} broken: {b:?}", client + 1, client + 1);
                } else if c.tx_guard.broken().is_none() {
                    error!("send: {e:?}");
                }
                Err(ErrorCode::Io)
            }
        }
    }
}
