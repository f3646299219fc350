//! The shared region between httpd and the cgi component, and the counter
//! pages components publish for `/cgi-bin/stats`.
//!
//! ## The httpd ↔ cgi dataport (`cgi_chan`)
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
//!
//! ## Counter text pages
//!
//! A component that has no RPC for its counters publishes them as text
//! (`name=value` lines) in a page it shares read-only with the cgi: a
//! seqlock ([`publish`] / [`read`]): the writer makes the sequence odd,
//! writes, makes it even; a reader retries while it is odd or changed.

use core::sync::atomic::{fence, AtomicU64, Ordering};

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

/// Largest text in a counter page.
pub const PAGE_TEXT: usize = 4096 - 16;

/// Publishes `text` (at most [`PAGE_TEXT`] bytes, cut beyond) into the
/// counter page at `base`.
///
/// # Safety
/// `base` must be a 4096-byte, 8-aligned region mapped read-write for the
/// caller, written by nobody else.
pub unsafe fn publish(base: *mut u8, text: &[u8]) {
    let n = text.len().min(PAGE_TEXT);
    // SAFETY: per the contract: the sequence word at 0, the length at 8,
    // the text from 16, all inside the page.
    unsafe {
        let seq = &*(base as *const AtomicU64);
        let len = &*(base.add(8) as *const AtomicU64);
        let s = seq.load(Ordering::Relaxed);
        seq.store(s | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, b) in text[..n].iter().enumerate() {
            core::ptr::write_volatile(base.add(16 + i), *b);
        }
        len.store(n as u64, Ordering::Relaxed);
        seq.store((s | 1) + 1, Ordering::Release);
    }
}

/// Reads the text of the counter page at `base` into `out` (cleared
/// first); false if there is nothing consistent (never published, or the
/// writer kept changing it).
///
/// # Safety
/// `base` must be a 4096-byte, 8-aligned region mapped (read-only is
/// enough) for the caller's lifetime.
pub unsafe fn read(base: *const u8, out: &mut alloc::vec::Vec<u8>) -> bool {
    for _ in 0..100 {
        out.clear();
        // SAFETY: per the contract; the text is read with volatile loads
        // and only trusted if the sequence did not change meanwhile.
        unsafe {
            let seq = &*(base as *const AtomicU64);
            let len = &*(base.add(8) as *const AtomicU64);
            let s1 = seq.load(Ordering::Acquire);
            if s1 == 0 {
                return false;
            }
            if s1 & 1 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let n = (len.load(Ordering::Relaxed) as usize).min(PAGE_TEXT);
            for i in 0..n {
                out.push(core::ptr::read_volatile(base.add(16 + i)));
            }
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return true;
            }
        }
    }
    false
}

/// `name=value` lines (as published) into a [`crate::Component`]; lines
/// that do not parse are skipped.
pub fn parse_counters(name: &str, text: &[u8]) -> crate::Component {
    let mut c = crate::Component::new(name);
    for line in text.split(|b| *b == b'\n') {
        let Ok(line) = core::str::from_utf8(line) else { continue };
        let Some((k, v)) = line.split_once('=') else { continue };
        if let Ok(v) = v.trim().parse::<u64>() {
            c.set(k.trim(), v);
        }
    }
    c
}

/// A component's counters as `name=value` lines.
pub fn format_counters(c: &crate::Component, out: &mut alloc::string::String) {
    use core::fmt::Write;
    for (k, v) in &c.counters {
        let _ = writeln!(out, "{k}={v}");
    }
}
