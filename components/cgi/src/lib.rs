//! CGI for Iolite OS: dynamic content in its own protection domain, talking
//! to httpd over IO-Lite channels (Pai, Druschel, Zwaenepoel, OSDI '99,
//! §2.10 and §4.2: CGI output and POST bodies cross the boundary by
//! reference, never copied).
//!
//! * [`env`]: CGI/1.1 meta-variables (RFC 3875 §4.1) from a request, and
//!   their wire encoding.
//! * [`output`]: parsing a program's output header (Status, Content-Type,
//!   Location: local vs client redirect, RFC 3875 §6) and splitting off the
//!   body by reference.
//! * [`stats`]: `/cgi-bin/stats` as JSON (schema documented there) and HTML.
//! * [`programs`]: the built-in programs (stats, echo, the fragment page).
//! * [`wire`]: the request/reply messages on the channels.
//! * [`chan`]: the httpd ↔ cgi dataport (channels, restart generation) and
//!   the counter text pages.
//! * [`Failure`]: what httpd answers when a CGI faults or is late.
//!
//! `no_std` + `alloc`; host-tested. See `README.md`.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![allow(clippy::result_large_err)]

extern crate alloc;

pub mod chan;
pub mod env;
pub mod gen;
pub mod output;
pub mod programs;
pub mod stats;
pub mod wire;

#[cfg(test)]
mod tests;

pub use env::{Env, EnvError, RequestInfo};
pub use output::{parse_output, split_output, Kind, Output, OutputError};
pub use programs::{FragmentSource, ProgramError, ProgramStats, Programs};
pub use stats::{Component, Counters};

/// How a CGI request failed, from httpd's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No reply within the deadline.
    Timeout,
    /// The cgi component faulted (the loader reported its death) or
    /// replied with an error.
    Fault,
    /// The reply was not a valid CGI response.
    BadOutput(OutputError),
    /// The request could not be handed to the cgi (channel full, no
    /// memory, the component is restarting).
    Unavailable,
}

impl Failure {
    /// The status httpd answers: 504 for a timeout, 502 otherwise
    /// (RFC 9110 §15.6.3/§15.6.5: the server acted as a gateway and the
    /// upstream failed).
    pub fn status(self) -> u16 {
        match self {
            Failure::Timeout => 504,
            Failure::Fault | Failure::BadOutput(_) => 502,
            Failure::Unavailable => 503,
        }
    }
}
