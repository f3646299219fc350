//! The shared region between httpd and the cgi component, and the counter
//! pages components publish for `/cgi-bin/stats`.
//!
//! ## The httpd ↔ cgi dataport (`cgi_chan`)
//!
//! | offset | content |
//! |---|---|
//! | 0 | channel A: requests, httpd → cgi ([`FWD_CAP`], [`REL_CAP`]) |
//! | [`B_OFF`] | channel B: replies, cgi → httpd |
//! | [`CONTROL_OFF`] | [`Control`] |
//!
//! **Restarts.** The cgi is `restartable`: after a fault the loader builds
//! it again from scratch, while the dataport (and httpd) live on. So the
//! cgi, on every start, (re)initialises both channels and then bumps
//! [`Control::generation`] and wakes httpd. httpd compares the generation
//! with the one it attached to: when it changed, the old incarnation is
//! gone, so every request it had not answered fails with
//! `Failure::Fault` (502), httpd forgets the holds of the dead peer
//! (`Domain::peer_died`) and attaches to the fresh channels. Generation 0
//! means the cgi has not started yet (requests then get 503).
//!
//! ## Counter text pages
//!
//! A component that has no RPC for its counters publishes them as text
//! (`name=value` lines) in a page it shares read-only with the cgi: a
//! seqlock ([`publish`] / [`read`]): the writer makes the sequence odd,
//! writes, makes it even; a reader retries while it is odd or changed.

use core::sync::atomic::{fence, AtomicU64, Ordering};

/// Request descriptors in flight (httpd → cgi) and reply descriptors.
pub const FWD_CAP: usize = 64;
/// Releases in flight per direction.
pub const REL_CAP: usize = 512;
/// Both channels' ring capacities.
pub const GEOMETRY: iolite::Geometry = iolite::Geometry { fwd: FWD_CAP, rel: REL_CAP };
/// Bytes of one channel (whole pages).
pub const CHANNEL_BYTES: usize = GEOMETRY.page_bytes();
/// Offset of channel B.
pub const B_OFF: usize = CHANNEL_BYTES;
/// Offset of the control block.
pub const CONTROL_OFF: usize = 2 * CHANNEL_BYTES;
/// The smallest `cgi_chan` dataport.
pub const REGION_BYTES: usize = CONTROL_OFF + 4096;

/// "IOLCGICH".
pub const MAGIC: u64 = u64::from_le_bytes(*b"IOLCGICH");

/// The control block: written by the cgi only.
#[repr(C)]
pub struct Control {
    /// [`MAGIC`] once the first incarnation initialised the channels.
    pub magic: AtomicU64,
    /// Bumped by every (re)started cgi after it initialised the channels.
    pub generation: AtomicU64,
    /// Requests the current incarnation has answered (for the tests).
    pub answered: AtomicU64,
}

impl Control {
    /// The control block of a `cgi_chan` dataport.
    ///
    /// # Safety
    /// `base` must be a mapped, 4096-aligned region of at least
    /// [`REGION_BYTES`] bytes that lives as long as the program, whose
    /// control block is used only through this type.
    pub unsafe fn at(base: *mut u8) -> &'static Control {
        // SAFETY: per the contract (in range, aligned; atomics accept any bits).
        unsafe { &*(base.add(CONTROL_OFF) as *const Control) }
    }

    /// The current generation (0: no cgi yet).
    pub fn generation(&self) -> u64 {
        if self.magic.load(Ordering::Acquire) != MAGIC {
            return 0;
        }
        self.generation.load(Ordering::Acquire)
    }

    /// The cgi, after (re)initialising the channels: publishes the next
    /// generation and returns it.
    pub fn start_generation(&self) -> u64 {
        let g =
            if self.magic.load(Ordering::Acquire) == MAGIC { self.generation.load(Ordering::Relaxed) + 1 } else { 1 };
        self.answered.store(0, Ordering::Relaxed);
        self.generation.store(g, Ordering::Release);
        self.magic.store(MAGIC, Ordering::Release);
        g
    }
}

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
