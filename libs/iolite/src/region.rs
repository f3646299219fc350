//! Raw shared-memory regions (dataports).
//!
//! A dataport is a base pointer plus a length. The same physical memory is
//! mapped read-write in one component and read-only in others. The library
//! never assumes anything else about it, so host tests can back a region with
//! an ordinary heap allocation and hand out a producer view ([`RwRegion`]) and
//! a consumer view ([`RoRegion`]) of the same bytes.
//!
//! [`RoRegion`] deliberately has no method that yields mutable access.

use core::ptr::NonNull;

/// A read-write view of a shared region (the producer's / owner's mapping).
#[derive(Debug, Clone, Copy)]
pub struct RwRegion {
    base: NonNull<u8>,
    len: usize,
}

/// A read-only view of a shared region (a consumer's mapping).
///
/// There is no way to obtain a `*mut u8` or `&mut [u8]` from this type.
#[derive(Debug, Clone, Copy)]
pub struct RoRegion {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a region is a plain (pointer, length) pair naming memory that is
// shared between protection domains anyway; all accesses that can race go
// through atomics or are covered by the ownership protocol documented in the
// README.
unsafe impl Send for RwRegion {}
unsafe impl Send for RoRegion {}
unsafe impl Sync for RoRegion {}

impl RwRegion {
    /// Wraps a mapped read-write region.
    ///
    /// # Safety
    /// `base..base+len` must be mapped readable and writable for as long as
    /// any object built on this region is alive, and must not be accessed
    /// through Rust references by anything outside this library's protocol.
    pub unsafe fn from_raw_parts(base: *mut u8, len: usize) -> Option<Self> {
        NonNull::new(base).map(|base| Self { base, len })
    }

    /// Base address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The read-only view of the same memory (what a consumer maps).
    pub fn read_only(&self) -> RoRegion {
        RoRegion { base: self.base, len: self.len }
    }
}

impl RoRegion {
    /// Wraps a mapped read-only region.
    ///
    /// # Safety
    /// `base..base+len` must be mapped readable for as long as any object
    /// built on this region is alive.
    pub unsafe fn from_raw_parts(base: *const u8, len: usize) -> Option<Self> {
        NonNull::new(base as *mut u8).map(|base| Self { base, len })
    }

    /// Base address.
    pub fn as_ptr(&self) -> *const u8 {
        self.base.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
