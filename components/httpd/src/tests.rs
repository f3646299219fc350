//! Host tests of the state machine, on the fixtures of [`crate::testing`].
//! (The tests against the real CGI programs, the corpus among them, are
//! in `tests/httpd-cgi`: no component crate links another's code.)

pub use iolite::SliceDesc;

pub use crate::testing::*;
pub use crate::{Action, CgiCall, Config, ConnId, Remote, SourceError};

mod access;
mod features;
mod health;
mod protocol;
mod queue;
mod slow_input;
mod streaming;
mod uploads;
