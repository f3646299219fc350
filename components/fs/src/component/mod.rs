//! The fs component: brings up the disk, mounts the site, and serves
//! `FsIoLite` (see camkes/interfaces/FsIoLite.idl4 and README.md).
//!
//! Lines it prints (stable; tests/robot/filesystem.robot waits for some):
//!
//! ```text
//! [fs] virtio-blk at 00:05.0: I/O ports 0xc000, interrupt line 10 (irq), queue 256, 16384 sectors
//! [fs] superblock: magic 0xef53
//! [fs] mounted ext2: block size 4096, cache budget 2048 KiB, chunk 16 KiB, pool 1023 pages, mode iolite
//! [fs] ready
//! [fs] evict <ino> <offset> referenced|unreferenced       (when fs.evict_log = 1)
//! [fs] budget <bytes>                                     (set_budget)
//! ```

mod pci;
mod virtio_blk;

use alloc::boxed::Box;
use alloc::vec::Vec;

use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use fs::proto::{self, ErrorCode, FS_POOL, PEER};
use fs::{Config, File, Fs};
use iolite::{BufMeta, ChannelTx, Domain, NoNotify, PoolLayout, RwRegion, Trust, BUILD_COPY_MODE, FLAG_EOF};

use virtio_blk::VirtioBlk;

extern crate alloc;

component_runtime::component_entry!(main);
component_runtime::global_heap!(1 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/fs.rs"));

/// Where `simulate --disk` puts the disk.
const BLK: pci::Function = pci::Function { device: 5, function: 0 };
const VIRTIO_VENDOR: u16 = 0x1af4;
/// Legacy (transitional) virtio-blk.
const VIRTIO_BLK_DEVICE: u16 = 0x1001;
/// The interrupt line the assembly routes (fsread.camkes: IOAPIC pin 10).
const ASSEMBLY_IRQ_LINE: u32 = 10;

/// Data pages of the pool dataport.
const POOL_PAGES: u32 = PoolLayout::fitting(glue::pool::SIZE).pages;
const _: () = assert!(PoolLayout { pages: POOL_PAGES }.region_bytes() <= glue::pool::SIZE);
const _: () = assert!(POOL_PAGES as usize <= proto::REL_CAP, "release ring smaller than the pool");
const _: () = assert!(glue::channel::SIZE >= proto::CHANNEL_BYTES, "channel dataport too small");

/// Open files at once.
const MAX_OPEN: usize = 64;
/// Largest directory listing (one buffer).
const MAX_LISTING: usize = 256 << 10;

fn mode_name() -> &'static str {
    match BUILD_COPY_MODE {
        iolite::CopyMode::IoLite => "iolite",
        iolite::CopyMode::Flash => "flash",
        iolite::CopyMode::Posix => "posix",
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
    serve(dev)
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
        return Err(format!("{BLK} is {vendor:04x}:{device:04x}, not a legacy virtio-blk ({VIRTIO_VENDOR:04x}:{VIRTIO_BLK_DEVICE:04x})"));
    }
    let read = |r| BLK.read(r).map_err(|e| format!("PCI configuration access failed: {e:?}"));
    let bar0 = read(pci::REG_BAR0)?;
    if bar0 & 1 == 0 {
        return Err(format!("{BLK}: BAR0 {bar0:#x} is not an I/O BAR (modern-only device? simulate uses disable-modern=on)"));
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

fn serve(mut dev: VirtioBlk) -> ! {
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
    let pool = glue::pool::get();
    let channel = glue::channel::get();
    // SAFETY: both dataports are mapped read-write for as long as we run and
    // are used only through the IO-Lite library from here on.
    let (pool, channel) = unsafe {
        (
            RwRegion::from_raw_parts(pool.as_mut_ptr(), pool.len()).expect("pool dataport"),
            RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()).expect("channel dataport"),
        )
    };
    let meta: &'static mut [BufMeta] = Box::leak(alloc::vec![BufMeta::EMPTY; POOL_PAGES as usize].into_boxed_slice());
    d.add_owned_pool(FS_POOL, pool, meta, Trust::Trusted).expect("pool");
    d.set_pool_acl(FS_POOL, &[PEER]).expect("acl");
    d.set_quota(PEER, POOL_PAGES).expect("quota");
    // SAFETY: the channel dataport; the client attaches only after its
    // first call, which we answer after this.
    unsafe { iolite::init_channel(channel, proto::FWD_CAP, proto::REL_CAP) }.expect("channel");
    // SAFETY: initialised above; the only sender.
    let tx = unsafe { ChannelTx::attach(d, PEER, channel, proto::FWD_CAP, proto::REL_CAP, NoNotify) }.expect("channel");

    let budget = glue::attributes::CACHE_BUDGET.max(0) as usize;
    let mut cfg = Config::with_budget(budget);
    // Copies happen at the client's end of the channel (FileCacheToApp):
    // the cache always hands out references.
    cfg.mode = iolite::CopyMode::IoLite;
    let mut fs = match Fs::mount(dev, d, FS_POOL, cfg) {
        Ok(fs) => fs,
        Err(e) => {
            error!("mount failed: {e}");
            component_runtime::exit(1)
        }
    };
    let evict_log = glue::attributes::EVICT_LOG != 0;
    fs.cache().set_eviction_log(evict_log);
    log!(
        "mounted ext2: block size {}, cache budget {} KiB, chunk {} KiB, pool {} pages, mode {}",
        fs.volume().block_size(),
        budget >> 10,
        fs.chunk_bytes() >> 10,
        POOL_PAGES,
        mode_name()
    );
    let mut server = Server { fs, tx, d, files: Vec::new(), admin: glue::attributes::ADMIN != 0 };
    server.files.resize_with(MAX_OPEN, || None);
    log!("ready");
    glue::fs::run(&mut server)
}

struct Server {
    fs: Fs<'static, VirtioBlk>,
    tx: ChannelTx<'static, NoNotify>,
    d: &'static Domain,
    files: Vec<Option<File>>,
    admin: bool,
}

impl Server {
    /// Before a request: take back what the client released, so that the
    /// cache's "referenced" test sees the client's current holds.
    fn begin(&mut self) {
        if let Err(e) = self.tx.poll_releases() {
            error!("release ring: {e:?}");
        }
    }

    /// After a request: print the evictions it caused (when logging).
    fn end(&mut self) {
        for ev in self.fs.cache().take_evictions() {
            log!("evict {} {} {}", ev.key.file, ev.key.offset, if ev.referenced { "referenced" } else { "unreferenced" });
        }
    }

    fn read_file(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> Result<i64, ErrorCode> {
        let file = self.files.get(handle as usize).and_then(|f| f.clone()).ok_or(ErrorCode::BadHandle)?;
        let size = file.stat().size;
        let end = size.min(offset.saturating_add(length));
        let mut pos = offset;
        while pos < end {
            let agg = self.fs.read_shared(&file, pos, (end - pos).min(usize::MAX as u64) as usize).map_err(ErrorCode::from)?;
            if agg.is_empty() {
                break;
            }
            let n = agg.len() as u64;
            let flags = if pos + n >= size { FLAG_EOF } else { 0 };
            match self.tx.send(agg, tag, flags) {
                Ok(()) => pos += n,
                Err((iolite::Error::Full | iolite::Error::QuotaExceeded, _)) => break,
                Err((e, _)) => {
                    error!("send: {e:?}");
                    return Err(ErrorCode::Io);
                }
            }
        }
        if pos == offset && pos < end {
            return Err(ErrorCode::ChannelBusy);
        }
        Ok((pos - offset) as i64)
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
            let mut buf = self.d.alloc(FS_POOL, bytes.len()).map_err(|_| ErrorCode::NoMemory)?;
            buf.writable()[..bytes.len()].copy_from_slice(&bytes);
            buf.seal(bytes.len()).map_err(|_| ErrorCode::NoMemory)?
        };
        match self.tx.send(agg, tag, FLAG_EOF) {
            Ok(()) => Ok(entries.len() as i64),
            Err((iolite::Error::Full | iolite::Error::QuotaExceeded, _)) => Err(ErrorCode::ChannelBusy),
            Err((e, _)) => {
                error!("send: {e:?}");
                Err(ErrorCode::Io)
            }
        }
    }
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
            let slot = self.files.iter().position(Option::is_none).ok_or(ErrorCode::TooManyOpen)?;
            let st = file.stat();
            (*size, *ino) = (st.size, st.ino);
            self.files[slot] = Some(file);
            Ok(slot as i64)
        })();
        self.end();
        ret(r)
    }

    fn close(&mut self, handle: u32) -> i32 {
        match self.files.get_mut(handle as usize) {
            Some(f @ Some(_)) => {
                *f = None;
                0
            }
            _ => ErrorCode::BadHandle.ret() as i32,
        }
    }

    fn stat(&mut self, path: &str, size: &mut u64, mtime: &mut u64, kind: &mut u32, ino: &mut u32, generation: &mut u32) -> i32 {
        self.begin();
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
    ) -> i32 {
        self.begin();
        let s = self.fs.stats();
        *hits = s.cache.hits;
        *misses = s.cache.misses;
        *evictions = s.cache.evictions;
        *evictions_referenced = s.cache.evictions_referenced;
        *bytes_cached = s.cache.bytes_cached;
        *disk_reads = s.disk.reads;
        *disk_bytes = s.disk.bytes;
        *copied_bytes = s.cache.copied_bytes + self.d.stats().bytes_copied;
        *pool_pages_in_use = self.d.pool_stats(FS_POOL).map(|p| u64::from(p.pages_in_use)).unwrap_or(0);
        *data_bytes = s.disk.data_bytes;
        let drv = self.fs.volume().device().stats();
        (*dma_bytes, *bounce_bytes) = (drv.dma_bytes, drv.bounce_bytes);
        0
    }

    fn set_budget(&mut self, bytes: u64) -> i32 {
        if !self.admin {
            return ErrorCode::Denied.ret() as i32;
        }
        self.begin();
        log!("budget {bytes}");
        self.fs.cache().shrink_to(bytes.min(usize::MAX as u64) as usize);
        self.end();
        0
    }
}
