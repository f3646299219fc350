//! CGI for Iolite OS: dynamic content in its own protection domain, talking
//! to httpd over IO-Lite channels (Pai, Druschel, Zwaenepoel, OSDI '99,
//! §2.10 and §4.2: CGI output and POST bodies cross the boundary by
//! reference, never copied).
//!
//! * [`stats`]: `/cgi-bin/stats` as JSON (schema documented there) and HTML;
//!   [`metrics`]: the same counters for Prometheus (`/metrics`).
//! * [`programs`]: the built-in programs (stats, echo, the fragment page,
//!   [`stream`], output that comes over time, and [`upload`], a program
//!   that consumes a large body as it arrives).
//! * [`gen`]: escaping for generated text; the test hooks' byte pattern.
//!
//! The protocol with httpd (the `cgi_chan` region, the request and reply
//! formats, [`Failure`]) is the `cgi-api` crate's,
//! re-exported here as [`chan`], [`env`], [`output`] and [`wire`].
//!
//! `no_std` + `alloc`; host-tested. See `README.md`.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![allow(clippy::result_large_err)]

extern crate alloc;

pub use cgi_api::{chan, env, output, wire};
pub mod gen;
pub mod metrics;
pub mod programs;
pub mod stats;
pub mod stream;
pub mod upload;

#[cfg(test)]
mod tests;

pub use cgi_api::{parse_output, split_output, Env, EnvError, Failure, Kind, Output, OutputError, RequestInfo};
pub use programs::{FragmentSource, ProgramError, ProgramStats, Programs, Started};
pub use stats::{Component, Counters, Device};
pub use stream::Stream;
pub use upload::Upload;
