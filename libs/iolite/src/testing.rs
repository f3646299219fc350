//! Host-test fixtures: the system composition in miniature.
//!
//! Pools and channels live in leaked, page-aligned, zeroed heap memory
//! (dataports are never unmapped either), viewed read-write by their owner
//! and read-only by the other "components" (domains). [`Note`] stands in
//! for an seL4 notification. This crate's tests use them, and so do other
//! crates' host tests, through the `testing` feature (a dev-dependency
//! feature: component images never contain it).

extern crate std;

use std::alloc::{alloc_zeroed, Layout};
use std::boxed::Box;
use std::sync::{Condvar, Mutex};
use std::time::Duration;
use std::vec;
use std::vec::Vec;

use crate::channel::{init_channel, Attach, ChannelRx, ChannelTx, Geometry};
use crate::duplex::{init_duplex, Duplex, DuplexAttach, Side};
use crate::pool::{BufMeta, PoolLayout, Trust};
use crate::region::RwRegion;
use crate::{Aggregate, Domain, PeerId, PoolId};

/// A zeroed, page-aligned region of `len` bytes that lives for the rest of
/// the test process.
pub fn region(len: usize) -> RwRegion {
    let layout = Layout::from_size_align(len.max(1), 4096).expect("layout");
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc_zeroed(layout) };
    assert!(!p.is_null(), "out of memory");
    // SAFETY: freshly allocated, never freed, used only through regions.
    unsafe { RwRegion::from_raw_parts(p, len) }.expect("non-null")
}

/// A bookkeeping table for a pool of `pages` pages.
pub fn meta(pages: u32) -> &'static mut [BufMeta] {
    Box::leak(vec![BufMeta::EMPTY; pages as usize].into_boxed_slice())
}

/// A pool region of `pages` data pages.
pub fn pool_region(pages: u32) -> RwRegion {
    region(PoolLayout { pages }.region_bytes())
}

/// A domain that lives for the rest of the test process (what a
/// component's `Box::leak(Box::new(Domain::new()))` is).
pub fn domain() -> &'static Domain {
    Box::leak(Box::new(Domain::new()))
}

/// Adds an owned, trusted pool `id` of `pages` pages to `d`; returns its
/// region (to [`map`] it elsewhere).
pub fn own(d: &Domain, id: PoolId, pages: u32) -> RwRegion {
    own_with(d, id, pages, Trust::Trusted)
}

/// [`own`] with a trust level.
pub fn own_with(d: &Domain, id: PoolId, pages: u32, trust: Trust) -> RwRegion {
    let r = pool_region(pages);
    d.add_owned_pool(id, r, meta(pages), trust).expect("add_owned_pool");
    r
}

/// Maps pool `id` (region `r`) read-only into `d`, trusted.
pub fn map(d: &Domain, id: PoolId, r: RwRegion) {
    map_with(d, id, r, Trust::Trusted)
}

/// [`map`] with a trust level.
pub fn map_with(d: &Domain, id: PoolId, r: RwRegion, trust: Trust) {
    let pages = PoolLayout::fitting(r.len()).pages;
    d.add_foreign_pool(id, r.read_only(), meta(pages), trust).expect("add_foreign_pool");
}

/// Allocates, fills with `bytes` in place and seals (no copy counted).
pub fn make<'d>(d: &'d Domain, pool: PoolId, bytes: &[u8]) -> Aggregate<'d> {
    let mut b = d.alloc(pool, bytes.len()).expect("alloc");
    b.writable()[..bytes.len()].copy_from_slice(bytes);
    b.seal(bytes.len()).map_err(|(e, _)| e).expect("seal")
}

/// An aggregate's bytes.
pub fn bytes(a: &Aggregate<'_>) -> Vec<u8> {
    a.slices().flat_map(|s| s.iter().copied()).collect()
}

/// An initialised channel region of `geometry`.
pub fn channel(geometry: Geometry) -> RwRegion {
    let r = region(geometry.bytes());
    // SAFETY: a fresh region nobody uses yet.
    unsafe { init_channel(r, geometry) }.expect("init_channel");
    r
}

/// Both ends of a fresh channel from `tx` (peer slot `tx_peer` there) to
/// `rx` (`rx_peer`).
pub fn channel_ends<'d>(
    tx: &'d Domain,
    tx_peer: PeerId,
    rx: &'d Domain,
    rx_peer: PeerId,
    geometry: Geometry,
) -> (ChannelTx<'d>, ChannelRx<'d>, RwRegion) {
    let region = channel(geometry);
    // SAFETY: initialised above; one sender and one receiver.
    unsafe {
        (
            ChannelTx::attach(Attach { domain: tx, peer: tx_peer, region, geometry }).expect("attach"),
            ChannelRx::attach(Attach { domain: rx, peer: rx_peer, region, geometry }).expect("attach"),
            region,
        )
    }
}

/// Both ends of a fresh duplex region between `a` (side A, its peer slot
/// for `b` is `a_peer`) and `b` (side B, `b_peer`).
pub fn duplex_ends<'d>(
    a: &'d Domain,
    a_peer: PeerId,
    b: &'d Domain,
    b_peer: PeerId,
    geometry: Geometry,
) -> (Duplex<'d>, Duplex<'d>, RwRegion) {
    let region = region(geometry.duplex_bytes());
    // SAFETY: a fresh region; one component attaches as each side.
    unsafe {
        init_duplex(region, geometry).expect("init_duplex");
        let at = |domain, peer, side| DuplexAttach { domain, peer, region, geometry, side };
        (
            Duplex::attach(at(a, a_peer, Side::A)).expect("attach A"),
            Duplex::attach(at(b, b_peer, Side::B)).expect("attach B"),
            region,
        )
    }
}

/// An seL4 notification on the host: a signal that comes before the wait
/// is kept (one bit), and the wait then returns at once.
#[derive(Debug, Default)]
pub struct Note {
    bit: Mutex<bool>,
    cv: Condvar,
}

impl Note {
    /// A notification with no signal pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signals (sets the bit, wakes a waiter).
    pub fn signal(&self) {
        *self.bit.lock().expect("lock") = true;
        self.cv.notify_one();
    }

    /// Waits for a signal, at most `timeout`; false if none came (in a
    /// test: a lost wake-up, if the waiter had work).
    pub fn wait_for(&self, timeout: Duration) -> bool {
        let g = self.bit.lock().expect("lock");
        let (mut g, _) = self.cv.wait_timeout_while(g, timeout, |set| !*set).expect("lock");
        core::mem::replace(&mut *g, false)
    }

    /// [`Note::wait_for`] twenty seconds (far longer than any honest wait
    /// in a test, even on a loaded machine).
    pub fn wait(&self) -> bool {
        self.wait_for(Duration::from_secs(20))
    }
}
