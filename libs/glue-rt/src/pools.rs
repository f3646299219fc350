//! IO-Lite pools and channel regions from dataports (feature `iolite`):
//! the one start-up path of every component that maps pools.
//!
//! A pool is a dataport mapped read-write in its owner (the only component
//! that allocates from it) and read-only in the components its buffers go
//! to. [`map_pool!`](crate::map_pool) registers a glue dataport with an
//! IO-Lite [`Domain`]: `owned` takes the dataport as a
//! [`Dataport<ReadWrite>`] ([`map_owned`]), so a pool the assembly grants
//! read-only cannot be registered as owned (a compile error, not a fault
//! at the first allocation); `foreign` maps any dataport read-only
//! ([`map_foreign`]). The pool's bookkeeping table ([`iolite::BufMeta`],
//! one per page) is a static sized from the dataport's size
//! ([`iolite::static_meta!`]), so no heap is needed and each expansion maps
//! its pool once (a second evaluation panics rather than aliasing the
//! table).
//!
//! [`rw`] and [`ro`] are the raw form, for channel regions that are parts
//! of a dataport.

pub use iolite;
use iolite::{BufMeta, Domain, Error, PoolId, PoolLayout, RoRegion, RwRegion, Trust};

use crate::{Dataport, ReadWrite};

/// Pages of the pool in a dataport of `size` bytes (its header included).
pub const fn pages(size: usize) -> u32 {
    PoolLayout::fitting(size).pages
}

/// The region `vaddr..vaddr + size`, read-write.
///
/// # Safety
/// It must be mapped readable and writable for the rest of the program and
/// used only through the IO-Lite objects built on the returned region.
pub unsafe fn rw(vaddr: usize, size: usize) -> RwRegion {
    // SAFETY: per the contract.
    unsafe { RwRegion::from_raw_parts(vaddr as *mut u8, size) }.expect("dataport at address 0")
}

/// The region `vaddr..vaddr + size`, read-only.
///
/// # Safety
/// It must be mapped readable for the rest of the program.
pub unsafe fn ro(vaddr: usize, size: usize) -> RoRegion {
    // SAFETY: per the contract.
    unsafe { RoRegion::from_raw_parts(vaddr as *const u8, size) }.expect("dataport at address 0")
}

/// Registers `dataport` with `d` as pool `id`, owned (`d` allocates from
/// it), with `meta` as its bookkeeping table ([`pages`] entries).
///
/// # Safety
/// From now on the dataport's bytes are used only through `d` (no other
/// handle of it reads or writes them).
pub unsafe fn map_owned(
    d: &Domain,
    id: PoolId,
    dataport: Dataport<ReadWrite>,
    meta: &'static mut [BufMeta],
    trust: Trust,
) -> Result<(), Error> {
    // SAFETY: a dataport handle is a mapping with its rights for the rest of
    // the program (the glue's contract); exclusive use is the caller's.
    let region = unsafe { rw(dataport.as_mut_ptr() as usize, dataport.len()) };
    d.add_owned_pool(id, region, meta, trust)
}

/// Registers `dataport` with `d` as pool `id` of another component, read
/// only (`trust`: whether its producer may rewrite published buffers, see
/// [`Trust`]).
///
/// # Safety
/// As for [`map_owned`].
pub unsafe fn map_foreign<R>(
    d: &Domain,
    id: PoolId,
    dataport: Dataport<R>,
    meta: &'static mut [BufMeta],
    trust: Trust,
) -> Result<(), Error> {
    // SAFETY: as in `map_owned`; read-only use.
    let region = unsafe { ro(dataport.as_ptr() as usize, dataport.len()) };
    d.add_foreign_pool(id, region, meta, trust)
}

/// Registers a glue dataport (`glue::NAME`, the module) with an IO-Lite
/// domain as pool `id` (the compiler's, `glue::pools::NAME`):
/// `map_pool!(owned d, id, glue::NAME, trust)` or
/// `map_pool!(foreign d, id, glue::NAME, trust)`; evaluates to
/// `Result<(), iolite::Error>`. Unsafe to evaluate: see [`map_owned`].
/// Each expansion can be evaluated once.
#[macro_export]
macro_rules! map_pool {
    (owned $d:expr, $id:expr, $($dataport:ident)::+, $trust:expr) => {
        $crate::pools::map_owned(
            $d,
            $id,
            $($dataport)::+::get(),
            $crate::pools::iolite::static_meta!($crate::pools::pages($($dataport)::+::SIZE)),
            $trust,
        )
    };
    (foreign $d:expr, $id:expr, $($dataport:ident)::+, $trust:expr) => {
        $crate::pools::map_foreign(
            $d,
            $id,
            $($dataport)::+::get(),
            $crate::pools::iolite::static_meta!($crate::pools::pages($($dataport)::+::SIZE)),
            $trust,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReadOnly;
    use std::alloc::{alloc_zeroed, Layout};

    /// Stands in for a glue dataport module.
    mod glue {
        pub mod pool {
            pub static BASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            pub const SIZE: usize = iolite::PoolLayout { pages: 8 }.region_bytes();
            pub fn get() -> crate::Dataport<crate::ReadWrite> {
                // SAFETY: BASE is set to SIZE bytes that live for the rest
                // of the test program, used only through one domain.
                unsafe { crate::Dataport::new(BASE.load(std::sync::atomic::Ordering::Relaxed), SIZE) }
            }
        }
    }

    /// `pages` data pages of a pool with its header, page-aligned, leaked.
    fn memory(pages: u32) -> (usize, usize) {
        let size = PoolLayout { pages }.region_bytes();
        let layout = Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        assert!(!p.is_null());
        (p as usize, size)
    }

    #[test]
    fn owned_and_foreign_pools_share_the_bytes() {
        let (base, size) = memory(8);
        assert_eq!(size, glue::pool::SIZE);
        glue::pool::BASE.store(base, std::sync::atomic::Ordering::Relaxed);
        let (owner, reader) = (Domain::new(), Domain::new());
        // SAFETY: the memory lives for the rest of the test program and is
        // used only through the two domains.
        unsafe {
            crate::map_pool!(owned & owner, 3, glue::pool, Trust::Trusted).unwrap();
            let ro = Dataport::<ReadOnly>::new(base, size);
            map_foreign(&reader, 3, ro, iolite::static_meta!(pages(glue::pool::SIZE)), Trust::Untrusted).unwrap();
        }
        assert_eq!(owner.pool_stats(3).unwrap().pages, 8, "the table covers every page");
        assert_eq!(reader.pool_stats(3).unwrap().pages, 8);
        assert_eq!((owner.pool_trust(3), reader.pool_trust(3)), (Ok(Trust::Trusted), Ok(Trust::Untrusted)));
        // Only the owner allocates; what it writes is in the shared bytes.
        let mut b = owner.alloc(3, 5).unwrap();
        b.writable()[..5].copy_from_slice(b"hello");
        let agg = b.seal(5).map_err(|_| ()).unwrap();
        let mut out = [0u8; 5];
        agg.read_at(0, &mut out);
        assert_eq!(&out, b"hello");
        assert!(reader.alloc(3, 5).is_err(), "a foreign pool allocates nothing");
        // SAFETY: as above (a second registration is refused before use).
        let again = unsafe { map_owned(&owner, 3, glue::pool::get(), iolite::static_meta!(8), Trust::Trusted) };
        assert!(again.is_err(), "one pool id once");
        assert_eq!(pages(glue::pool::SIZE), 8, "the header is not counted as data pages");
    }
}
