//! The netdrv component (seL4 target): the `e1000` device logic of the
//! library wired to the real registers, the loader's physical addresses,
//! pci_config and netstack's link (`component.rs`). On the host this binary
//! is a stub; `cargo test -p netdrv` tests the library.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod component;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("netdrv: this is an seL4 component (x86_64-unknown-none); the library is `netdrv`");
    std::process::exit(2);
}
