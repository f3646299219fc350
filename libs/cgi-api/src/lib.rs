//! The protocol between the web server (httpd) and the cgi component,
//! for both sides: tiny, `no_std` + `alloc`, no dependency on either
//! implementation.
//!
//! * [`chan`]: the `cgi_chan` region (an IO-Lite duplex: requests one way,
//!   replies the other; the restart generation).
//! * [`wire`]: the messages on the region's channels.
//! * [`env`]: a request's CGI/1.1 meta-variables (RFC 3875 §4.1) and their
//!   encoding.
//! * [`output`]: a reply's format, the program's output (RFC 3875 §6):
//!   parsing its header, splitting off the body by reference.
//! * [`Failure`]: how a CGI request fails, and what httpd answers.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![allow(clippy::result_large_err)]

extern crate alloc;

pub mod chan;
pub mod env;
pub mod output;
pub mod wire;

#[cfg(test)]
mod tests;

pub use env::{Env, EnvError, RequestInfo};
pub use output::{parse_output, split_output, Kind, Output, OutputError};

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
