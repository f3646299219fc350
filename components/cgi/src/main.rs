//! The cgi component (seL4 target): runs the library's programs in their
//! own protection domain, for httpd, over the `cgi_chan` channels (see
//! `cgi::chan`). Restartable: a fault restarts it and httpd serves on. On
//! the host this binary is a stub.
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
    eprintln!("cgi: this is an seL4 component (x86_64-unknown-none); the library is `cgi`");
    std::process::exit(2);
}
