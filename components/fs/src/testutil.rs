//! Host-test helpers: the system composition in miniature (IO-Lite's own
//! fixtures), a deterministic PRNG, and `mke2fs -d` image building.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::vec::Vec;

/// Domains and pools: the IO-Lite host fixtures (`iolite::testing`).
pub use iolite::testing::{domain, map as map_pool, own as own_pool};

/// xorshift64*: deterministic test data without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A fresh, empty temporary directory (removed by [`TempDir`]'s drop).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "iolite-fs-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `mke2fs -q -F -t ext2 -b <block_size> -d <tree> <img> <size_kib>k`
/// and returns the image. A missing `mke2fs` FAILS the test: these tests
/// are the acceptance tests of the format reader and must not be skipped.
pub fn mkfs(tree: &Path, block_size: u32, size_kib: u64) -> Vec<u8> {
    let img = tree.with_extension("img");
    let args = [
        "-q".to_string(),
        "-F".into(),
        "-t".into(),
        "ext2".into(),
        "-b".into(),
        block_size.to_string(),
        "-d".into(),
        tree.display().to_string(),
        img.display().to_string(),
        format!("{size_kib}k"),
    ];
    let candidates = ["mke2fs", "/usr/sbin/mke2fs", "/sbin/mke2fs"];
    let out = candidates
        .iter()
        .find_map(|c| Command::new(c).args(&args).output().ok())
        .unwrap_or_else(|| {
            panic!("mke2fs not found (tried {candidates:?}): install e2fsprogs (apt-get install e2fsprogs); the fs image tests need it and are not skipped")
        });
    assert!(out.status.success(), "mke2fs {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&img).unwrap();
    let _ = std::fs::remove_file(&img);
    bytes
}
