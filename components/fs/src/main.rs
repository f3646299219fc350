//! The fs component (seL4 target): the virtio-blk driver, the ext2 volume
//! and the IO-Lite file cache of this crate's library, served to clients
//! over `FsIoLite` (RPC) plus one IO-Lite channel. See README.md, "The
//! component". On the host this binary is a stub, so that `cargo test -p
//! fs` and the fuzzer build the library alone.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod component;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("fs: this is an seL4 component (x86_64-unknown-none); the library is `fs`");
    std::process::exit(2);
}
