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
//! [fs] virtio-blk at 00:05.0: I/O ports 0xc000, interrupt line 10 (irq), queue 256, 16384 sectors
//! [fs] superblock: magic 0xef53
//! [fs] mounted ext2: block size 4096, cache budget 2048 KiB, chunk 16 KiB, pool 1023 pages, mode iolite
//! [fs] cache policy lru                                   (or gds: fs.cache_policy)
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

mod virtio_blk;

use alloc::boxed::Box;
use alloc::vec::Vec;

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use counters::CounterPage;
use fs::budget::{Elastic, Model};
use fs::clients::{open_read, queue_range, OpenFiles};
use fs::proto::{self, ErrorCode};
use fs::quarantine::{Quarantines, Wait};
// The file cache's pool id: derived by the compiler from the assembly.
use fs::{Config, File, Fs};
use glue::pools::FILE_POOL;
use iolite::{Attach, ChannelTx, Domain, Geometry, PeerId, PoolLayout, RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF};

use virtio_blk::VirtioBlk;

extern crate alloc;

component_runtime::component_entry!(main);
component_runtime::global_heap!(4 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/fs.rs"));

/// Where `simulate --disk` puts the disk, reached through the pci_config
/// server (it alone holds the 0xCF8/0xCFC pair, and lets fs touch only the
/// function the assembly grants).
const BLK: pci::Device<pci::ThroughServer> = pci::Device::new(
    pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32),
    pci::Function::new(0, 5, 0),
);
const VIRTIO_VENDOR: u16 = 0x1af4;
/// Legacy (transitional) virtio-blk.
const VIRTIO_BLK_DEVICE: u16 = 0x1001;
/// The interrupt line the assembly routes (fsread.camkes: IOAPIC pin 10).
const ASSEMBLY_IRQ_LINE: u32 = 10;

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
    let dev = match bring_up(start) {
        Ok(dev) => dev,
        Err(msg) => {
            error!("{msg}");
            component_runtime::exit(1)
        }
    };
    serve(dev, start)
}

/// Finds, checks and enables the disk; resets it and sets up its queue.
fn bring_up(start: &'static StartInfo) -> Result<VirtioBlk, alloc::string::String> {
    use alloc::format;
    let id = BLK.read(pci::REG_ID).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    let (vendor, device) = (id as u16, (id >> 16) as u16);
    if vendor == 0xffff {
        return Err(format!("no disk at {BLK}: boot with simulate --disk <image>"));
    }
    if (vendor, device) != (VIRTIO_VENDOR, VIRTIO_BLK_DEVICE) {
        return Err(format!(
            "{BLK} is {vendor:04x}:{device:04x}, not a legacy virtio-blk ({VIRTIO_VENDOR:04x}:{VIRTIO_BLK_DEVICE:04x})"
        ));
    }
    let read = |r| BLK.read(r).map_err(|e| format!("PCI configuration access failed: {e:?}"));
    let bar0 = read(pci::REG_BAR0)?;
    if bar0 & 1 == 0 {
        return Err(format!(
            "{BLK}: BAR0 {bar0:#x} is not an I/O BAR (modern-only device? simulate uses disable-modern=on)"
        ));
    }
    let base = (bar0 & 0xfffc) as u16;
    let line = read(pci::REG_INTERRUPT)? & 0xff;
    let command = read(pci::REG_COMMAND)? & 0xffff;
    let want = (command | pci::COMMAND_IO | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE;
    if want != command {
        BLK.write(pci::REG_COMMAND, want).map_err(|e| format!("PCI configuration access failed: {e:?}"))?;
    }
    let use_irq = line == ASSEMBLY_IRQ_LINE;
    if !use_irq {
        log!("{BLK}: interrupt line {line}, but the assembly routes {ASSEMBLY_IRQ_LINE}: polling for completions");
    }
    let dev = VirtioBlk::new(base, use_irq, start).map_err(|e| match e {
        virtio_blk::InitError::Port(port, err) => format!(
            "{BLK}: I/O port {port:#x} refused ({err:?}): BAR0 is {base:#x}, outside the range the assembly grants (virtio_blk.ports_attributes)"
        ),
        virtio_blk::InitError::QueueSize(q) => format!("{BLK}: queue 0 has {q} entries (expected a power of two whose ring fits 64 KiB)"),
        virtio_blk::InitError::NoPhysical => "the dma dataport has no physical address in the start record".into(),
    })?;
    log!(
        "virtio-blk at {BLK}: I/O ports {base:#x}, interrupt line {line} ({}), queue {}, {} sectors",
        if dev.uses_irq() { "irq" } else { "polled" },
        dev.queue_size(),
        dev.sectors()
    );
    Ok(dev)
}

fn serve(mut dev: VirtioBlk, start: &'static StartInfo) -> ! {
    let seed = start.seed;
    use fs::BlockDevice;
    // Step one of bring-up, kept as a check: the superblock's magic, read
    // raw from sector 2 (bytes 1024.. of the disk).
    let mut sb = [0u8; 1024];
    match dev.read_at(1024, &mut sb) {
        Ok(()) => log!("superblock: magic {:#06x}", u16::from_le_bytes([sb[56], sb[57]])),
        Err(e) => {
            error!("reading the superblock failed: {e:?}");
            component_runtime::exit(1)
        }
    }

    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    d.seed_generations(seed);
    // SAFETY: the pool dataport is used only through the IO-Lite library
    // from here on.
    unsafe { glue_rt::map_pool!(owned d, FILE_POOL, glue::file_pool, Trust::Trusted) }.expect("pool");
    let peers: Vec<PeerId> = (0..CLIENTS).map(|i| PeerId(i as u8)).collect();
    d.set_pool_acl(FILE_POOL, &peers).expect("acl");
    let mut clients = Vec::new();
    for (i, &peer) in peers.iter().enumerate() {
        d.set_quota(peer, CLIENT_QUOTA[i] as u32).expect("quota");
        clients.push(open_channel(d, i));
    }
    let sizes: Vec<usize> = CLIENT_FILES[..CLIENTS].iter().map(|&n| n as usize).collect();

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
            component_runtime::exit(1)
        }
    };
    let evict_log = glue::attributes::EVICT_LOG != 0;
    fs.cache().set_eviction_log(evict_log);
    let peers = Peers::new(start);
    let elastic = (MEMORY_BUDGET > 0).then(|| {
        let pool_bytes = POOL_PAGES as usize * iolite::PAGE_SIZE;
        Elastic::new(Model::new(MEMORY_BUDGET, CACHE_FLOOR, pool_bytes), fs.cache())
    });
    log!(
        "mounted ext2: block size {}, cache budget {} KiB, chunk {} KiB, pool {} pages, mode {}",
        fs.volume().block_size(),
        fs.cache().budget() >> 10,
        fs.chunk_bytes() >> 10,
        POOL_PAGES,
        BUILD_COPY_MODE.name()
    );
    log!("cache policy {}", POLICY.name());
    // Our incarnation: the death count our record in the events page had
    // when we started (the supervisor counts a death before the rebuild).
    // Handles carry it, so a call an earlier incarnation's client re-issues
    // to us (the supervisor resumes callers blocked in a call to the dead
    // one) with its old handle gets BadHandle, never another file.
    let me = start.instance as usize;
    let epoch = component_runtime::events::page().filter(|p| me < p.len()).map_or(0, |p| p.state(me).0);
    // Pages the dead incarnation left in use (the cache's buffers, which
    // httpd, netstack and the NIC's TX ring may still hold) stay
    // quarantined until every peer settled that death: never reallocated
    // while referenced. Free pages serve at once; the cache refills.
    let quarantined = d.quarantined_pages(FILE_POOL).unwrap_or(0);
    if quarantined > 0 {
        log!("{quarantined} pool pages of the dead incarnation quarantined until its death is settled");
    }
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
    let guards = alloc::vec![iolite::Guard::new(); clients.len()];
    // Each client's record in the events page, by its instance's name
    // (`CLIENT_NAMES`): its own death is what its reset waits for.
    let client_records: Vec<Option<usize>> = (0..clients.len())
        .map(|i| {
            let name = CLIENT_NAMES.get(i)?;
            component_runtime::events::page()?.index_of(name)
        })
        .collect();
    let mut server = Server {
        fs,
        clients,
        guards,
        d,
        files: OpenFiles::with_epoch(&sizes, epoch),
        admin: glue::attributes::ADMIN != 0,
        resets: 0,
        events: component_runtime::events::Watcher::new(),
        quarantines: Quarantines::default(),
        client_records,
        me,
        epoch,
        fault_next_read: false,
        own_quarantine: (quarantined > 0).then_some(epoch),
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
    fs: Fs<'static, VirtioBlk>,
    clients: Vec<ChannelTx<'static>>,
    /// Per client: a release ring the client corrupts breaks its channel
    /// (reported once); that client's reads then fail, the others go on.
    guards: Vec<iolite::Guard>,
    d: &'static Domain,
    /// Each client's open files.
    files: OpenFiles<File>,
    admin: bool,
    resets: u64,
    /// The system events page, if the assembly subscribes us.
    events: Option<component_runtime::events::Watcher>,
    /// Clients whose dead incarnation's holds are quarantined, each
    /// waiting for its own death to settle (`fs::quarantine`).
    quarantines: Quarantines,
    /// Each client's record in the events page (`CLIENT_NAMES`).
    client_records: Vec<Option<usize>>,
    /// Our record in the events page.
    me: usize,
    /// Our incarnation (handles carry it).
    epoch: u64,
    /// Test hook: the next read faults.
    fault_next_read: bool,
    /// The death of ours whose pool pages are still quarantined.
    own_quarantine: Option<u64>,
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
        for (i, (tx, g)) in self.clients.iter_mut().zip(self.guards.iter_mut()).enumerate() {
            if let (_, Some(e)) = g.poll_releases(tx) {
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
        let Some(w) = self.events.as_mut() else { return };
        for (component, death) in w.deaths() {
            component_runtime::events::confirm_settled(component, death);
        }
        let page = w.page();
        let d = self.d;
        if let Some(death) = self.own_quarantine {
            if self.me < page.len() && page.state(self.me).1 >= death {
                let n = d.end_quarantine(FILE_POOL).unwrap_or(0);
                log!("death {death} settled: {n} quarantined pool pages free again");
                self.own_quarantine = None;
            }
        }
        for client in self.quarantines.take_settled(page.len(), |i| page.state(i)) {
            let n = d.peer_settled(PeerId(client as u8)).unwrap_or(0);
            log!("client {} settled: {n} quarantined buffers released", client + 1);
        }
    }

    /// Test images: a `stat` of `/.fault/fs/N` faults incarnation `N`
    /// (a write to an unmapped page: a real fault, which the supervisor
    /// reports and answers with a restart).
    /// `/.fault/fs-read/N` instead arms the fault for the next `read`,
    /// whichever client makes it: under load, a read in flight.
    fn fault_hook(&mut self, path: &str) {
        if let Some(n) = path.strip_prefix("/.fault/fs-read/").and_then(|n| n.parse::<u64>().ok()) {
            if n == self.epoch {
                log!("test hook: the next read faults incarnation {n}");
                self.fault_next_read = true;
            }
            return;
        }
        let Some(n) = path.strip_prefix("/.fault/fs/").and_then(|n| n.parse::<u64>().ok()) else { return };
        if n == self.epoch {
            log!("test hook: faulting incarnation {n}");
            fault();
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
        let was_broken = self.guards[client].broken().is_some();
        let queued =
            queue_range(&mut self.fs, &mut self.clients[client], &mut self.guards[client], &file, offset, length, tag);
        if let (false, Some(b)) = (was_broken, self.guards[client].broken()) {
            error!("channel channel{} from client {} broken: {b:?}", client + 1, client + 1);
        }
        queued
    }

    /// `open_read` (FsIoLite.idl4): the handle, the file's stat and the
    /// bytes queued (`fs::clients::open_read`).
    fn open_and_read(&mut self, path: &str, length: u64, tag: u64) -> Result<(u32, fs::Stat, u64), ErrorCode> {
        let client = caller();
        let was_broken = self.guards[client].broken().is_some();
        let r = open_read(
            &mut self.fs,
            &mut self.files,
            client,
            &mut self.clients[client],
            &mut self.guards[client],
            path.as_bytes(),
            length,
            tag,
        );
        if let (false, Some(b)) = (was_broken, self.guards[client].broken()) {
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
        match self.guards[client].send(&mut self.clients[client], agg, tag, FLAG_EOF) {
            Ok(()) => Ok(entries.len() as i64),
            Err((iolite::Error::Full | iolite::Error::QuotaExceeded, _, _)) => Err(ErrorCode::ChannelBusy),
            Err((e, _, broke)) => {
                if let Some(b) = broke {
                    error!("channel channel{} from client {} broken: {b:?}", client + 1, client + 1);
                } else if self.guards[client].broken().is_none() {
                    error!("send: {e:?}");
                }
                Err(ErrorCode::Io)
            }
        }
    }
}

/// The test hooks' fault: a write to an unmapped page (0x10 is below
/// every mapping: the loader leaves the first page unmapped).
fn fault() {
    // SAFETY: none needed; the write faults and the supervisor restarts us.
    unsafe { core::ptr::write_volatile(0x10 as *mut u64, 0xdead) };
}

fn ret<T: Into<i64>>(r: Result<T, ErrorCode>) -> i64 {
    match r {
        Ok(v) => v.into(),
        Err(e) => e.ret(),
    }
}

impl glue::fs::FsIoLite for Server {
    fn open(&mut self, path: &str, size: &mut u64, ino: &mut u32) -> i64 {
        self.begin();
        let r = (|| {
            let file = self.fs.open(path.as_bytes()).map_err(ErrorCode::from)?;
            let st = file.stat();
            let handle = self.files.open(caller(), file)?;
            (*size, *ino) = (st.size, st.ino);
            Ok(i64::from(handle))
        })();
        self.end();
        ret(r)
    }

    fn open_read(
        &mut self,
        path: &str,
        length: u64,
        tag: u64,
        size: &mut u64,
        mtime: &mut u64,
        ino: &mut u32,
        generation: &mut u32,
        queued: &mut u64,
    ) -> i64 {
        self.begin();
        // A read armed by an earlier call faults here (this call may arm
        // the next one).
        let armed = TEST_HOOKS && self.fault_next_read;
        if TEST_HOOKS {
            self.fault_hook(path);
        }
        if armed {
            log!("test hook: faulting incarnation {} in a read (client {})", self.epoch, caller() + 1);
            fault();
        }
        let r = self.open_and_read(path, length, tag).map(|(handle, st, n)| {
            (*size, *mtime, *ino, *generation, *queued) = (st.size, u64::from(st.mtime), st.ino, st.generation, n);
            i64::from(handle)
        });
        self.end();
        ret(r)
    }

    fn close(&mut self, handle: u32) -> i32 {
        match self.files.close(caller(), handle) {
            Ok(()) => 0,
            Err(e) => e.ret() as i32,
        }
    }

    fn stat(
        &mut self,
        path: &str,
        size: &mut u64,
        mtime: &mut u64,
        kind: &mut u32,
        ino: &mut u32,
        generation: &mut u32,
    ) -> i32 {
        self.begin();
        if TEST_HOOKS {
            self.fault_hook(path);
        }
        let r = match self.fs.stat(path.as_bytes()) {
            Ok(st) => {
                (*size, *mtime, *kind, *ino, *generation) =
                    (st.size, u64::from(st.mtime), u32::from(proto::kind_code(st.kind)), st.ino, st.generation);
                0
            }
            Err(e) => ErrorCode::from(e).ret() as i32,
        };
        self.end();
        r
    }

    fn read(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> i64 {
        if TEST_HOOKS && self.fault_next_read {
            log!("test hook: faulting incarnation {} in a read (client {})", self.epoch, caller() + 1);
            fault();
        }
        self.begin();
        let r = self.read_file(handle, offset, length, tag);
        self.end();
        ret(r)
    }

    fn list_dir(&mut self, path: &str, tag: u64) -> i64 {
        self.begin();
        let r = self.list(path, tag);
        self.end();
        ret(r)
    }

    fn stats(
        &mut self,
        hits: &mut u64,
        misses: &mut u64,
        evictions: &mut u64,
        evictions_referenced: &mut u64,
        bytes_cached: &mut u64,
        disk_reads: &mut u64,
        disk_bytes: &mut u64,
        copied_bytes: &mut u64,
        pool_pages_in_use: &mut u64,
        data_bytes: &mut u64,
        dma_bytes: &mut u64,
        bounce_bytes: &mut u64,
        reset_waits: &mut u64,
        reset_released: &mut u64,
    ) -> i32 {
        self.begin();
        self.update_budget();
        self.end();
        let s = self.fs.stats();
        *hits = s.cache.hits;
        *misses = s.cache.misses;
        *evictions = s.cache.evictions;
        *evictions_referenced = s.cache.evictions_referenced;
        *bytes_cached = s.cache.bytes_cached;
        *disk_reads = s.disk.reads;
        *disk_bytes = s.disk.bytes;
        *copied_bytes = s.cache.copied_bytes + self.d.stats().bytes_copied;
        *pool_pages_in_use = self.d.pool_stats(FILE_POOL).map(|p| u64::from(p.pages_in_use)).unwrap_or(0);
        *data_bytes = s.disk.data_bytes;
        let drv = self.fs.volume().device().stats();
        (*dma_bytes, *bounce_bytes) = (drv.dma_bytes, drv.bounce_bytes);
        (*reset_waits, *reset_released) = (self.quarantines.waited, self.quarantines.released_at_once);
        0
    }

    fn reset(&mut self) -> i32 {
        let client = caller();
        // The old incarnation is gone: its files close, and its channel
        // starts empty. What we lent it may have been forwarded and still
        // be in use downstream: it stays quarantined until the system says
        // so (without an events page, we can only release it at once).
        let peer = PeerId(client as u8);
        let dropped = match self.events.as_ref() {
            Some(w) => {
                // Only the client's own death concerns what it held
                // (`fs::quarantine`): a death elsewhere left unsettled
                // keeps none of its pages out of use.
                let page = w.page();
                let record = self.client_records.get(client).copied().flatten();
                let wait = Wait::at_reset(record, page.len(), |i| page.state(i));
                let n = self.d.peer_failed(peer).unwrap_or(0);
                let _ = self.d.peer_restarted(peer);
                if self.quarantines.reset(client, wait) {
                    log!("client {} reset ({} buffers quarantined)", client + 1, n);
                    None
                } else {
                    Some(self.d.peer_settled(peer).unwrap_or(0))
                }
            }
            None => Some(self.d.peer_died(peer).unwrap_or(0)),
        };
        self.files.close_all(client);
        self.clients[client] = open_channel(self.d, client);
        self.guards[client] = iolite::Guard::new();
        self.resets += 1;
        if let Some(dropped) = dropped {
            log!("client {} reset ({} buffers released)", client + 1, dropped);
        }
        self.poll_events();
        0
    }

    fn vouch(&mut self, buf: u32, generation: u32) -> i32 {
        let client = caller();
        // Releases first: a hold the other client gave back is not vouched
        // for.
        self.begin();
        let r = match self.d.vouch(FILE_POOL, buf, generation, PeerId(client as u8)) {
            Ok(()) => 0,
            Err(iolite::Error::QuotaExceeded) => ErrorCode::ChannelBusy.ret(),
            Err(_) => ErrorCode::NotHeld.ret(),
        };
        r as i32
    }

    fn budget(
        &mut self,
        budget: &mut u64,
        budget_low: &mut u64,
        memory_budget: &mut u64,
        floor: &mut u64,
        charged_httpd: &mut u64,
        charged_netstack: &mut u64,
        charged_fs_held: &mut u64,
        shrinks: &mut u64,
        grows: &mut u64,
        shrink_evictions: &mut u64,
        updates: &mut u64,
    ) -> i32 {
        self.begin();
        self.update_budget();
        self.end();
        *budget = self.fs.cache().budget() as u64;
        match &self.elastic {
            Some(e) => {
                let s = e.stats();
                (*budget_low, *memory_budget, *floor) = (s.low, e.model().memory(), e.model().floor() as u64);
                (*charged_httpd, *charged_netstack, *charged_fs_held) =
                    (s.charged.httpd, s.charged.netstack, s.charged.fs_held);
                (*shrinks, *grows, *shrink_evictions, *updates) = (s.shrinks, s.grows, s.shrink_evictions, s.updates);
            }
            None => {
                *budget_low = *budget;
                *memory_budget = 0;
                *floor = 0;
                *charged_httpd = 0;
                *charged_netstack = 0;
                *charged_fs_held = 0;
                *shrinks = 0;
                *grows = 0;
                *shrink_evictions = 0;
                *updates = 0;
            }
        }
        0
    }

    fn set_budget(&mut self, bytes: u64) -> i32 {
        if !self.admin {
            return ErrorCode::Denied.ret() as i32;
        }
        self.begin();
        // A fixed budget from now on: the memory model would undo it.
        if self.elastic.take().is_some() {
            log!("memory budget off: the cache budget is fixed from now on");
        }
        log!("budget {bytes}");
        self.fs.cache().shrink_to(bytes.min(usize::MAX as u64) as usize);
        self.end();
        0
    }
}
