//! fs_reader: the fs component's test client (examples/fsread/fsread.camkes).
//! It uses only the `FsIoLite` interface and its IO-Lite channel, and
//! prints what it finds; tests/robot/filesystem.robot checks the lines and
//! bench/fs takes the figures. In order:
//!
//! 1. **Every file, byte-exact.** Walks the site from `/` (list_dir),
//!    reads each regular file through the channel and prints
//!    `file <path> <size> <sha256>`, sorted by path: the format of the
//!    build's site.manifest (tools/image/make-site-image.sh), so the test
//!    compares line by line.
//! 2. **Second read is a hit.** Counters before and after re-reading
//!    /file-64k.bin: `reread /file-64k.bin: hits +4 misses +0 disk reads +0 disk bytes +0`.
//! 3. **Paths and typed errors** (`path ...`, `error ...` lines).
//! 4. **Replacement order** with a 64 KiB budget (`policy ...` lines;
//!    fs prints the `evict ...` lines; the expected order is in
//!    [`policy`]'s docs).
//! 5. **Memory for 8 readers of one 1 MiB file** held at once (`memory ...`).
//! 6. **Throughput**, cold and warm (`bench ...`, in TSC cycles).
//! 7. The disk's bytes split into file data DMAed into the pool and
//!    metadata through the driver's bounce area (`disk: ...`), the final
//!    counters, `fs_reader done`, and exit.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

use component_runtime::start::StartInfo;
use component_runtime::time::rdtsc_ordered as rdtsc;
use component_runtime::{error, log};
use fs_api::{ErrorCode, PEER, PRIVATE_POOL};
// fs's file cache: its pool id is derived by the compiler from the assembly.
use glue::pools::FILE_POOL;
use iolite::{
    Aggregate, Attach, Boundary, BufMeta, ChannelRx, Copier, Domain, Geometry, PoolLayout, RwRegion, Trust,
    BUILD_COPY_MODE,
};
use sha2::{Digest, Sha256};

component_runtime::component_entry!(main);
component_runtime::global_heap!(1 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/fs_reader.rs"));

const _: () = assert!(glue::channel::SIZE >= fs_api::CHANNEL_BYTES, "channel dataport too small");
/// The private pool (posix copies land here): room for 8 copies of the
/// 1 MiB file plus slack.
const PRIVATE_PAGES: u32 = 2112;
const PRIVATE_BYTES: usize = PoolLayout { pages: PRIVATE_PAGES }.region_bytes();
/// The cache budget the policy scenario uses: 16 pages.
const POLICY_BUDGET: u64 = 64 << 10;
/// The budget restored after it (fsread.camkes's fs.cache_budget).
const NORMAL_BUDGET: u64 = 2 << 20;
/// Chunk size of fs's cache.
const CHUNK: u64 = fs_api::CHUNK_BYTES as u64;
/// Simultaneous readers of one file in the memory measurement.
const READERS: usize = 8;
/// Warm rounds of the throughput measurement.
const WARM_ROUNDS: u64 = 16;

#[repr(C, align(4096))]
struct PrivateRegion([u8; PRIVATE_BYTES]);
static mut PRIVATE: PrivateRegion = PrivateRegion([0; PRIVATE_BYTES]);

fn err_name(ret: i64) -> String {
    match ErrorCode::from_ret(ret) {
        Some(c) => alloc::format!("{c:?}"),
        None => alloc::format!("unknown error {ret}"),
    }
}

/// The fs counters (the `stats` call).
#[derive(Clone, Copy, Default, Debug)]
struct Counters {
    hits: u64,
    misses: u64,
    evictions: u64,
    evictions_referenced: u64,
    bytes_cached: u64,
    disk_reads: u64,
    disk_bytes: u64,
    copied: u64,
    pool_pages: u64,
    data_bytes: u64,
    dma_bytes: u64,
    bounce_bytes: u64,
    reset_waits: u64,
    reset_released: u64,
}

fn counters() -> Counters {
    let mut c = Counters::default();
    let r = glue::fs::stats(
        &mut c.hits,
        &mut c.misses,
        &mut c.evictions,
        &mut c.evictions_referenced,
        &mut c.bytes_cached,
        &mut c.disk_reads,
        &mut c.disk_bytes,
        &mut c.copied,
        &mut c.pool_pages,
        &mut c.data_bytes,
        &mut c.dma_bytes,
        &mut c.bounce_bytes,
        &mut c.reset_waits,
        &mut c.reset_released,
    );
    assert_eq!(r, 0, "stats");
    c
}

fn set_budget(bytes: u64) {
    let r = glue::fs::set_budget(bytes);
    if r != 0 {
        error!("set_budget {bytes}: {}", err_name(r.into()));
    }
}

/// One client: the channel's receiving end.
struct Client {
    d: &'static Domain,
    rx: ChannelRx<'static>,
    /// The copy modes copy at our end, into our private pool.
    copier: Copier<'static>,
    tag: u64,
}

/// A whole file as received.
struct Read {
    size: u64,
    digest: [u8; 32],
    /// The aggregates, if asked to keep them: references to the cache's
    /// buffers, or private copies under posix. Only held (dropping them
    /// releases them), never read.
    #[allow(dead_code)]
    held: Vec<Aggregate<'static>>,
}

impl Client {
    /// Receives what one call queued: `bytes` bytes of tag `tag`.
    fn receive(&mut self, tag: u64, bytes: u64, mut each: impl FnMut(Aggregate<'static>)) {
        let mut got = 0;
        while got < bytes {
            match self.copier.recv(&mut self.rx) {
                Ok(Some(r)) => {
                    assert_eq!(r.tag, tag, "message of another request");
                    got += r.agg.len() as u64;
                    each(r.agg);
                }
                Ok(None) => panic!("fs answered {bytes} bytes but queued only {got}"),
                Err(e) => panic!("receive: {e:?}"),
            }
        }
    }

    /// Returns every hold no longer needed (fs sees them at its next call).
    fn release(&mut self) {
        self.rx.flush_releases().expect("release ring");
    }

    /// Reads `[offset, offset + len)` of an open file.
    fn read_range(
        &mut self,
        handle: u32,
        offset: u64,
        len: u64,
        hash: &mut Sha256,
        keep: bool,
        held: &mut Vec<Aggregate<'static>>,
    ) -> Result<u64, i64> {
        let mut done = 0;
        while done < len {
            self.tag += 1;
            let tag = self.tag;
            let n = glue::fs::read(handle, offset + done, len - done, tag);
            if n < 0 {
                return Err(n);
            }
            if n == 0 {
                break;
            }
            self.receive(tag, n as u64, |agg| {
                for s in agg.slices() {
                    hash.update(s);
                }
                if keep {
                    held.push(agg);
                }
            });
            self.release();
            done += n as u64;
        }
        Ok(done)
    }

    /// Opens, reads and closes a file.
    fn read_file(&mut self, path: &str, keep: bool) -> Result<Read, i64> {
        let (mut size, mut ino) = (0, 0);
        let h = glue::fs::open(path, &mut size, &mut ino);
        if h < 0 {
            return Err(h);
        }
        let mut hash = Sha256::new();
        let mut held = Vec::new();
        let r = self.read_range(h as u32, 0, size, &mut hash, keep, &mut held);
        glue::fs::close(h as u32);
        let got = r?;
        if got != size {
            error!("{path}: read {got} of {size} bytes");
        }
        Ok(Read { size: got, digest: hash.finalize().into(), held })
    }

    /// The entries of a directory: (name, inode, kind code).
    fn list(&mut self, path: &str) -> Result<Vec<(String, u32, u8)>, i64> {
        self.tag += 1;
        let tag = self.tag;
        let n = glue::fs::list_dir(path, tag);
        if n < 0 {
            return Err(n);
        }
        let mut out = Vec::new();
        match self.copier.recv(&mut self.rx) {
            Ok(Some(r)) => {
                assert_eq!(r.tag, tag);
                let mut bytes = alloc::vec![0u8; r.agg.len()];
                r.agg.read_at(0, &mut bytes);
                let recs = fs_api::decode_records(&bytes).expect("malformed listing");
                assert_eq!(recs.len() as i64, n, "listing count");
                for rec in recs {
                    out.push((String::from_utf8_lossy(rec.name).into_owned(), rec.ino, rec.kind));
                }
            }
            other => panic!("no listing on the channel: {:?}", other.map(|o| o.map(|r| r.tag))),
        }
        self.release();
        Ok(out)
    }

    /// Every regular file below `dir`, as full paths.
    fn walk(&mut self, dir: &str, out: &mut Vec<String>) {
        let entries = match self.list(dir) {
            Ok(e) => e,
            Err(e) => {
                error!("list_dir {dir}: {}", err_name(e));
                return;
            }
        };
        for (name, _, kind) in entries {
            let path = if dir == "/" { alloc::format!("/{name}") } else { alloc::format!("{dir}/{name}") };
            match kind {
                1 => out.push(path),
                2 => self.walk(&path, out),
                _ => {}
            }
        }
    }
}

fn main(_start: &'static StartInfo) -> ! {
    init_heap();
    log!("fs_reader started (mode {})", BUILD_COPY_MODE.name());
    // The first call returns once fs has set the channel up.
    let before = counters();
    let d: &'static Domain = alloc::boxed::Box::leak(alloc::boxed::Box::new(Domain::new()));
    let channel = glue::channel::get();
    // SAFETY: the dataports are mapped (pool read-only, channel read-write)
    // for as long as we run and are used only through the IO-Lite library;
    // PRIVATE is used by nothing else (also for the map_pool! below).
    let (channel, private) = unsafe {
        (
            RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()).expect("channel"),
            RwRegion::from_raw_parts(core::ptr::addr_of_mut!(PRIVATE) as *mut u8, PRIVATE_BYTES).expect("private"),
        )
    };
    let leak = |n: u32| -> &'static mut [BufMeta] {
        alloc::boxed::Box::leak(alloc::vec![BufMeta::EMPTY; n as usize].into_boxed_slice())
    };
    // SAFETY: see above.
    unsafe { glue_rt::map_pool!(foreign d, FILE_POOL, glue::file_pool, Trust::Trusted) }.expect("fs pool");
    d.add_owned_pool(PRIVATE_POOL, private, leak(PRIVATE_PAGES), Trust::Trusted).expect("private pool");
    // SAFETY: fs initialised the channel before answering `stats`; the only receiver.
    let geometry = Geometry { fwd: fs_api::FWD_CAP, rel: fs_api::REL_CAP };
    let rx =
        unsafe { ChannelRx::attach(Attach { domain: d, peer: PEER, region: channel, geometry }) }.expect("channel");
    let copier = Copier::new(BUILD_COPY_MODE, Boundary::FileCacheToApp, Some(PRIVATE_POOL)).expect("copy pool");
    let mut c = Client { d, rx, copier, tag: 0 };
    log!("counters at start: hits {} misses {} disk reads {}", before.hits, before.misses, before.disk_reads);

    every_file(&mut c);
    reread(&mut c);
    paths_and_errors(&mut c);
    policy(&mut c);
    memory(&mut c);
    throughput(&mut c);
    let end = counters();
    log!(
        "disk: {} bytes, file data {} bytes, by DMA into the pool {} bytes, through the bounce area {} bytes",
        end.disk_bytes,
        end.data_bytes,
        end.dma_bytes,
        end.bounce_bytes
    );
    log!(
        "counters: hits {} misses {} evictions {} (referenced {}) bytes cached {} disk reads {} disk bytes {} copied {} (reader copied {})",
        end.hits,
        end.misses,
        end.evictions,
        end.evictions_referenced,
        end.bytes_cached,
        end.disk_reads,
        end.disk_bytes,
        end.copied,
        c.d.stats().bytes_copied
    );
    log!("fs_reader done");
    component_runtime::exit(0)
}

/// Step 1.
fn every_file(c: &mut Client) {
    let mut paths = Vec::new();
    c.walk("/", &mut paths);
    paths.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let (mut files, mut bytes) = (0, 0);
    for p in &paths {
        match c.read_file(p, false) {
            Ok(r) => {
                log!("file {} {} {}", p, r.size, Hex(&r.digest));
                files += 1;
                bytes += r.size;
            }
            Err(e) => error!("read {p}: {}", err_name(e)),
        }
    }
    log!("files done: {files} files, {bytes} bytes");
}

/// Step 2.
fn reread(c: &mut Client) {
    let path = "/file-64k.bin";
    let a = counters();
    if let Err(e) = c.read_file(path, false) {
        error!("read {path}: {}", err_name(e));
    }
    let b = counters();
    log!(
        "reread {path}: hits +{} misses +{} disk reads +{} disk bytes +{}",
        b.hits - a.hits,
        b.misses - a.misses,
        b.disk_reads - a.disk_reads,
        b.disk_bytes - a.disk_bytes
    );
}

fn stat_line(path: &str) -> Result<(u64, u64, u32, u32, u32), i64> {
    let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
    let r = glue::fs::stat(path, &mut size, &mut mtime, &mut kind, &mut ino, &mut generation);
    if r < 0 {
        return Err(r.into());
    }
    Ok((size, mtime, kind, ino, generation))
}

/// Step 3.
fn paths_and_errors(c: &mut Client) {
    let kind_name = |k: u32| match k {
        1 => "file",
        2 => "dir",
        3 => "symlink",
        _ => "other",
    };
    for path in ["/index.html", "/../../../index.html", "/sub/../index.html", "//sub/./note.txt", "/", "/sub"] {
        match stat_line(path) {
            Ok((size, mtime, kind, ino, generation)) => {
                log!("path {path}: {} ino {ino} size {size} mtime {mtime} generation {generation}", kind_name(kind))
            }
            Err(e) => log!("path {path}: {}", err_name(e)),
        }
    }
    let (mut size, mut ino) = (0, 0);
    for path in ["/nope.txt", "/sub", "/index.html/x", "/sub/nope/x"] {
        let r = glue::fs::open(path, &mut size, &mut ino);
        if r < 0 {
            log!("error open {path}: {}", err_name(r));
        } else {
            log!("error open {path}: opened (handle {r})");
            glue::fs::close(r as u32);
        }
    }
    match c.list("/index.html") {
        Err(e) => log!("error list_dir /index.html: {}", err_name(e)),
        Ok(_) => log!("error list_dir /index.html: listed"),
    }
    let r = glue::fs::read(63, 0, 1, 0);
    log!("error read handle 63: {}", if r < 0 { err_name(r) } else { String::from("read") });
    let r = glue::fs::close(63);
    log!("error close handle 63: {}", if r < 0 { err_name(r.into()) } else { String::from("closed") });
}

/// Reads one chunk of `path` (at `offset`), keeping it if `hold`.
fn chunk(c: &mut Client, path: &str, offset: u64, hold: bool) -> Vec<Aggregate<'static>> {
    let (mut size, mut ino) = (0, 0);
    let h = glue::fs::open(path, &mut size, &mut ino);
    assert!(h >= 0, "open {path}: {}", err_name(h));
    let mut held = Vec::new();
    let mut hash = Sha256::new();
    let len = CHUNK.min(size - offset);
    c.read_range(h as u32, offset, len, &mut hash, hold, &mut held).expect("read");
    glue::fs::close(h as u32);
    held
}

/// Step 4: the replacement order (§2.7) with a budget of 16 pages and
/// 16 KiB chunks (4 pages; /file-1k.txt's only chunk is 1 page). `A` is
/// /file-64k.bin, chunk `Ak` at offset 16 KiB·k; `B` /file-16k.bin, `C`
/// /file-1k.txt, `E` /file-256k.bin. LRU order is oldest first; `*` marks
/// an entry this reader holds (referenced).
///
/// | step | reads | cache after (LRU order) | fs prints |
/// |---|---|---|---|
/// | 1 | A0 A1* A2 A3 (misses) | A0 A1* A2 A3 | |
/// | 2 | A0 (hit) | A1* A2 A3 A0 | |
/// | 3 | B0 | A1* A3 A0 B0 | `evict A 32768 unreferenced` |
/// | 4 | C0 | A1* A0 B0 C0 | `evict A 49152 unreferenced` |
/// | 5 | A0* B0* C0* (hits, held) | A1* A0* B0* C0* | |
/// | 6 | E0 | A0* B0* C0* E0 | `evict A 16384 referenced` (all are referenced: the LRU one goes) |
/// | 7 | drop all holds; E1 | B0 C0 E0 E1 | `evict A 0 unreferenced` |
///
/// In the copying mode (posix) the reader never holds the cache's buffers,
/// so nothing is referenced and the order is plain LRU (documented in the
/// `policy` lines; the test checks the iolite build).
fn policy(c: &mut Client) {
    log!("policy: budget {} KiB", POLICY_BUDGET >> 10);
    set_budget(0); // empties the cache (fs logs those evictions)
    set_budget(POLICY_BUDGET);
    for p in ["/file-64k.bin", "/file-16k.bin", "/file-1k.txt", "/file-256k.bin"] {
        if let Ok((_, _, _, ino, _)) = stat_line(p) {
            log!("policy inode {p} {ino}");
        }
    }
    let a = "/file-64k.bin";
    log!("policy step 1: read A0 A1* A2 A3");
    drop(chunk(c, a, 0, false));
    let a1 = chunk(c, a, CHUNK, true);
    drop(chunk(c, a, 2 * CHUNK, false));
    drop(chunk(c, a, 3 * CHUNK, false));
    log!("policy step 2: read A0 (hit)");
    drop(chunk(c, a, 0, false));
    log!("policy step 3: read B0");
    drop(chunk(c, "/file-16k.bin", 0, false));
    log!("policy step 4: read C0");
    drop(chunk(c, "/file-1k.txt", 0, false));
    log!("policy step 5: hold A0 B0 C0 (hits)");
    let a0 = chunk(c, a, 0, true);
    let b0 = chunk(c, "/file-16k.bin", 0, true);
    let c0 = chunk(c, "/file-1k.txt", 0, true);
    log!("policy step 6: read E0");
    drop(chunk(c, "/file-256k.bin", 0, false));
    log!("policy step 7: release all, read E1");
    drop((a1, a0, b0, c0));
    c.release();
    drop(chunk(c, "/file-256k.bin", CHUNK, false));
    let k = counters();
    log!("policy done: evictions {} (referenced {})", k.evictions, k.evictions_referenced);
    set_budget(0);
    set_budget(NORMAL_BUDGET);
}

/// Step 5: eight readers hold /file-1m.bin at once.
fn memory(c: &mut Client) {
    let path = "/file-1m.bin";
    if let Err(e) = c.read_file(path, false) {
        error!("read {path}: {}", err_name(e));
        return;
    }
    let private_before = c.d.pool_stats(PRIVATE_POOL).map(|p| p.pages_in_use).unwrap_or(0);
    let mut readers = Vec::new();
    for _ in 0..READERS {
        match c.read_file(path, true) {
            Ok(r) => readers.push(r),
            Err(e) => {
                error!("read {path}: {}", err_name(e));
                return;
            }
        }
    }
    let fs_pages = counters().pool_pages;
    let private = u64::from(c.d.pool_stats(PRIVATE_POOL).map(|p| p.pages_in_use).unwrap_or(0) - private_before);
    let file_pages = readers[0].size.div_ceil(4096);
    let total = fs_pages + private;
    log!(
        "memory {READERS} readers of {path}: fs pool {fs_pages} pages, private copies {private} pages, total {total} pages = {}.{:02} copies of the file's {file_pages} pages (mode {})",
        total / file_pages,
        total % file_pages * 100 / file_pages,
        BUILD_COPY_MODE.name()
    );
    drop(readers);
    c.release();
}

/// Reads a whole file touching every byte (a word sum; no digest, so the
/// figure is the data path's).
fn touch_file(c: &mut Client, path: &str) -> u64 {
    let (mut size, mut ino) = (0, 0);
    let h = glue::fs::open(path, &mut size, &mut ino);
    assert!(h >= 0, "open {path}");
    let mut off = 0;
    let mut sum = 0u64;
    while off < size {
        c.tag += 1;
        let tag = c.tag;
        let n = glue::fs::read(h as u32, off, size - off, tag);
        assert!(n > 0, "read {path}: {}", err_name(n));
        c.receive(tag, n as u64, |agg| {
            for s in agg.slices() {
                let (words, tail) = s.as_chunks::<8>();
                for w in words {
                    sum = sum.wrapping_add(u64::from_le_bytes(*w));
                }
                for &b in tail {
                    sum = sum.wrapping_add(u64::from(b));
                }
            }
        });
        c.release();
        off += n as u64;
    }
    glue::fs::close(h as u32);
    core::hint::black_box(sum);
    size
}

/// Step 6: cold (cache emptied first: every chunk from the disk) and warm
/// (cached) reads of /file-1m.bin.
fn throughput(c: &mut Client) {
    let path = "/file-1m.bin";
    set_budget(0);
    set_budget(NORMAL_BUDGET);
    let a = counters();
    let t0 = rdtsc();
    let bytes = touch_file(c, path);
    let t1 = rdtsc();
    let b = counters();
    log!(
        "bench cold {path}: {bytes} bytes {} cycles (disk reads {}, disk bytes {})",
        t1 - t0,
        b.disk_reads - a.disk_reads,
        b.disk_bytes - a.disk_bytes
    );
    let t0 = rdtsc();
    let mut total = 0;
    for _ in 0..WARM_ROUNDS {
        total += touch_file(c, path);
    }
    let t1 = rdtsc();
    let d = counters();
    log!(
        "bench warm {path}: {total} bytes {} cycles ({WARM_ROUNDS} reads, disk reads {}, mode {})",
        t1 - t0,
        d.disk_reads - b.disk_reads,
        BUILD_COPY_MODE.name()
    );
}

/// Lower-case hexadecimal, as sha256sum prints digests.
struct Hex<'a>(&'a [u8]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}
