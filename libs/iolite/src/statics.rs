//! Static memory for pools without `static mut`: a component's [`BufMeta`]
//! tables and private pool regions as ordinary `static`s, each handed out
//! at most once.
//!
//! [`Domain::add_owned_pool`](crate::Domain::add_owned_pool) and
//! [`Domain::add_foreign_pool`](crate::Domain::add_foreign_pool) take the
//! bookkeeping table as `&'static mut [BufMeta]`: the domain owns it for
//! the rest of the program. Components without an allocator get one from a
//! [`StaticMeta`]; a pool that lives in the component's own memory (not a
//! dataport, e.g. the private pool a copying receiver copies into) gets its
//! region from a [`StaticRegion`]:
//!
//! ```
//! use iolite::{Domain, PoolLayout, StaticMeta, StaticRegion, Trust};
//!
//! const PAGES: u32 = 16;
//! static META: StaticMeta<{ PAGES as usize }> = StaticMeta::new();
//! static MEM: StaticRegion<{ PoolLayout { pages: PAGES }.region_bytes() }> = StaticRegion::new();
//!
//! let d = Domain::new();
//! let (region, meta) = (MEM.take().unwrap(), META.take().unwrap());
//! d.add_owned_pool(1, region, meta, Trust::Trusted).unwrap();
//! assert!(META.take().is_none(), "each static is handed out once");
//! assert_eq!(d.pool_stats(1).unwrap().free_pages, PAGES);
//! ```
//!
//! The macros [`static_meta!`](crate::static_meta) and
//! [`static_pool!`](crate::static_pool) declare the static and take it in one
//! expression. Both statics are zero-initialised (`.bss`: no space in the
//! image), and the region is page-aligned as a pool requires.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::pool::BufMeta;
use crate::region::RwRegion;

/// A `BufMeta` table of `N` entries in a `static`, handed out once by
/// [`StaticMeta::take`].
pub struct StaticMeta<const N: usize> {
    taken: AtomicBool,
    table: UnsafeCell<[BufMeta; N]>,
}

// SAFETY: the table is reached only through `take`, which hands out the one
// `&mut` at most once (atomic flag).
unsafe impl<const N: usize> Sync for StaticMeta<N> {}

impl<const N: usize> StaticMeta<N> {
    /// An untaken table (for a `static` initialiser).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self { taken: AtomicBool::new(false), table: UnsafeCell::new([BufMeta::ZERO; N]) }
    }

    /// The table, initialised to [`BufMeta::EMPTY`], the first time; `None`
    /// afterwards.
    // The flag makes the returned `&mut` unique (the lint cannot see it).
    #[allow(clippy::mut_from_ref)]
    pub fn take(&'static self) -> Option<&'static mut [BufMeta]> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the flag was clear, so this is the only reference ever
        // made to the table, and it lives as long as the static.
        let table = unsafe { &mut *self.table.get() };
        table.fill(BufMeta::EMPTY);
        Some(table)
    }
}

/// `BYTES` zeroed, page-aligned bytes in a `static`, handed out once as a
/// region by [`StaticRegion::take`] (e.g. a private pool:
/// `StaticRegion<{ PoolLayout { pages: N }.region_bytes() }>`).
#[repr(C)]
pub struct StaticRegion<const BYTES: usize> {
    mem: PageAligned<BYTES>,
    taken: AtomicBool,
}

#[repr(C, align(4096))]
struct PageAligned<const BYTES: usize>(UnsafeCell<[u8; BYTES]>);

// SAFETY: the bytes are reached only through the region `take` hands out at
// most once (atomic flag); from then on the region's protocol applies.
unsafe impl<const BYTES: usize> Sync for StaticRegion<BYTES> {}

impl<const BYTES: usize> StaticRegion<BYTES> {
    /// Untaken, zeroed memory (for a `static` initialiser).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self { mem: PageAligned(UnsafeCell::new([0; BYTES])), taken: AtomicBool::new(false) }
    }

    /// The memory as a read-write region the first time; `None` afterwards.
    pub fn take(&'static self) -> Option<RwRegion> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the flag was clear, so nobody else uses these bytes; they
        // live (mapped read-write) as long as the static.
        unsafe { RwRegion::from_raw_parts(self.mem.0.get() as *mut u8, BYTES) }
    }
}

/// Declares a [`StaticMeta`] of `$pages` entries and takes it: evaluates
/// to `&'static mut [BufMeta]`, for a pool whose region is a dataport.
///
/// Each expansion has its own static, so it can be evaluated once; a second
/// evaluation (e.g. in a loop) panics instead of aliasing the table.
///
/// ```
/// let meta: &'static mut [iolite::BufMeta] = iolite::static_meta!(8);
/// assert_eq!(meta.len(), 8);
/// ```
#[macro_export]
macro_rules! static_meta {
    ($pages:expr) => {{
        static META: $crate::StaticMeta<{ ($pages) as usize }> = $crate::StaticMeta::new();
        META.take().expect("static_meta!: this expansion was already evaluated")
    }};
}

/// Declares a private pool of `$pages` data pages in the component's own
/// memory (a [`StaticRegion`], `.bss`) and its [`StaticMeta`], takes both and
/// evaluates to `(RwRegion, &'static mut [BufMeta])`, ready for
/// [`Domain::add_owned_pool`](crate::Domain::add_owned_pool). Same rule as
/// [`static_meta!`](crate::static_meta): evaluate each expansion once.
///
/// ```
/// let (region, meta) = iolite::static_pool!(4);
/// let d = iolite::Domain::new();
/// d.add_owned_pool(2, region, meta, iolite::Trust::Trusted).unwrap();
/// assert_eq!(d.pool_stats(2).unwrap().pages, 4);
/// ```
#[macro_export]
macro_rules! static_pool {
    ($pages:expr) => {{
        const PAGES: u32 = $pages;
        static REGION: $crate::StaticRegion<{ $crate::PoolLayout { pages: PAGES }.region_bytes() }> =
            $crate::StaticRegion::new();
        let region = REGION.take().expect("static_pool!: this expansion was already evaluated");
        (region, $crate::static_meta!(PAGES))
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Domain, PoolLayout, Trust};

    #[test]
    fn statics_are_handed_out_once() {
        static META: StaticMeta<4> = StaticMeta::new();
        static MEM: StaticRegion<{ PoolLayout { pages: 4 }.region_bytes() }> = StaticRegion::new();
        let r = MEM.take().unwrap();
        assert!(MEM.take().is_none());
        assert!((r.as_ptr() as usize).is_multiple_of(4096));
        assert_eq!(r.len(), PoolLayout { pages: 4 }.region_bytes());
        let m = META.take().unwrap();
        assert!(META.take().is_none());
        let d = Domain::new();
        d.add_owned_pool(1, r, m, Trust::Trusted).unwrap();
        let a = d.alloc_copy(1, b"static").unwrap();
        assert!(a.eq_bytes(b"static"));
    }

    #[test]
    fn macros_evaluate_once() {
        let take = || crate::static_meta!(3);
        assert_eq!(take().len(), 3);
        assert!(std::panic::catch_unwind(take).is_err(), "a second evaluation panics");
        let (r, m) = crate::static_pool!(2);
        assert_eq!((PoolLayout::fitting(r.len()).pages, m.len()), (2, 2));
    }
}
