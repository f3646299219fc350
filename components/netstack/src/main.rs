//! netstack as an seL4 component (examples/netecho/netecho.camkes): the
//! library's [`NetStack`](netstack::NetStack) between the e1000 driver
//! (netdrv, below) and one socket client (above), over IO-Lite channels.
//! On the host this binary is an empty stub; the component is
//! `component.rs`, built for `x86_64-unknown-none` only.
#![cfg_attr(target_os = "none", no_std, no_main)]
// Sends that do not fit hand the aggregate back by value (`outbox`);
// an aggregate is a few hundred bytes, which is fine.
#![allow(clippy::result_large_err)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod component;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("netstack is an seL4 component; see examples/netecho/netecho.camkes");
}
