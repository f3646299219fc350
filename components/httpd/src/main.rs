//! The httpd component (seL4 target): the library's `Server` wired to
//! netstack (socket events and requests on the `client` pair), fs
//! (`FsIoLite` RPC plus its channel: files by reference) and the cgi
//! component (two IO-Lite channels in `cgi_chan`). See README.md, "The
//! component". On the host this binary is a stub.
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
    eprintln!("httpd: this is an seL4 component (x86_64-unknown-none); the library is `httpd`");
    std::process::exit(2);
}
