//! The shared region between httpd and the cgi component (`cgi_chan`).
//!
//! An IO-Lite duplex region ([`iolite::Duplex`]) of [`GEOMETRY`]: httpd is
//! side A ([`HTTPD_SIDE`]: requests on channel A), the cgi side B
//! ([`CGI_SIDE`]: replies on channel B, at [`B_OFF`]).
//!
//! **Restarts.** The cgi is `restartable`: after a fault the loader builds
//! it again from scratch, while the dataport (and httpd) live on. So the
//! cgi, on every start, (re)initialises the region
//! ([`iolite::init_duplex`], which publishes the next generation) and
//! wakes httpd. httpd compares the generation with the one it attached to
//! (`Duplex::peer_restarted`): when it changed, the old incarnation is
//! gone, so every request it had not answered fails with
//! `Failure::Fault` (502), httpd forgets the holds of the dead peer
//! (`Domain::peer_died`) and attaches to the fresh channels. Generation 0
//! means the cgi has not started yet (requests then get 503).
//!
//! Wake-ups follow the rings' "signal me" flags: httpd signals `cgi_go`
//! only when the cgi waits for requests, the cgi signals `done` only when
//! httpd waits for replies (and once per start, for the new generation).

use iolite::{Geometry, Side};

/// Request descriptors in flight (httpd → cgi) and reply descriptors.
pub const FWD_CAP: usize = 64;
/// Releases in flight per direction.
pub const REL_CAP: usize = 512;
/// Both channels' ring capacities.
pub const GEOMETRY: Geometry = Geometry { fwd: FWD_CAP, rel: REL_CAP };
/// Bytes of one channel (whole pages).
pub const CHANNEL_BYTES: usize = GEOMETRY.page_bytes();
/// httpd's side: it sends requests.
pub const HTTPD_SIDE: Side = Side::A;
/// The cgi's side: it sends replies, and (re)initialises the region.
pub const CGI_SIDE: Side = Side::B;
/// Offset of channel B (the replies).
pub const B_OFF: usize = GEOMETRY.duplex_channel_offset(Side::B);
/// The smallest `cgi_chan` dataport.
pub const REGION_BYTES: usize = GEOMETRY.duplex_bytes();
