//! Fuzz target `image`: the input is a whole disk image. Mount it, walk the
//! tree, list directories, stat and read files, all with bounded work; any
//! panic, out-of-bounds access (ASan), hang (libFuzzer's -timeout) or leaked
//! cache buffer is a finding. Seeds are real `mke2fs -d` images (run.sh).

#![no_main]

use fs::{Config, FileKind, Fs, FsError};
use iolite::{BufMeta, Domain, PoolLayout, RwRegion, Trust};
use libfuzzer_sys::fuzz_target;

const POOL: u32 = 1;
const PAGES: u32 = 256;

thread_local! {
    // One domain and pool for the whole run (dataports are never unmapped);
    // every iteration must give all its buffers back.
    static DOMAIN: &'static Domain = {
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        let len = PoolLayout { pages: PAGES }.region_bytes();
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: non-zero size; leaked, used only as the pool region.
        let region = unsafe { RwRegion::from_raw_parts(std::alloc::alloc_zeroed(layout), len).unwrap() };
        let meta = Box::leak(vec![BufMeta::EMPTY; PAGES as usize].into_boxed_slice());
        d.add_owned_pool(POOL, region, meta, Trust::Trusted).unwrap();
        d
    };
}

/// Stops a walk that has seen enough (bounded work per input).
const STOP: FsError = FsError::NoMemory;

fn exercise(d: &'static Domain, img: &[u8]) {
    let Ok(mut fs) = Fs::mount(img, d, POOL, Config::with_budget(128 * 4096)) else { return };
    let _ = fs.list_dir(b"/");
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut seen = 0;
    let _ = fs.walk(b"/", |p, inode| {
        seen += 1;
        if seen > 2000 {
            return Err(STOP);
        }
        match inode.kind() {
            FileKind::File | FileKind::Symlink if files.len() < 32 => files.push(p.to_vec()),
            FileKind::Dir if dirs.len() < 32 => dirs.push(p.to_vec()),
            _ => {}
        }
        Ok(())
    });
    for p in &dirs {
        let _ = fs.list_dir(p);
        let _ = fs.stat(&[p.as_slice(), b"/../x/./.."].concat());
    }
    let mut buf = [0u8; 3000];
    for p in &files {
        let _ = fs.stat(p);
        let Ok(f) = fs.open(p) else { continue };
        let mut off = 0u64;
        // At most 1 MiB per file.
        while off < 1 << 20 {
            match fs.read(&f, off, 256 * 1024) {
                Ok(a) if !a.is_empty() => off += a.len() as u64,
                _ => break,
            }
        }
        let _ = fs.read_into(&f, f.stat().size / 2, &mut buf);
    }
}

fuzz_target!(|data: &[u8]| {
    DOMAIN.with(|&d| {
        exercise(d, data);
        // The Fs (and its cache) is gone: no buffer may be left behind.
        assert_eq!(d.pool_stats(POOL).unwrap().buffers_in_use, 0, "cache leaked buffers");
    });
});
