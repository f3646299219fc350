//! Descriptors that travel between components (the wire format).
//!
//! Everything here is `#[repr(C)]`, made only of `u32`/`u64` fields, valid for
//! every bit pattern, and contains no pointers: a slice is named by
//! ⟨pool id, buffer index, generation, offset, length⟩ and is translated to an
//! address only inside the receiving component after validation.

use crate::MAX_SLICES;

/// Marker for plain-old-data types that may be copied through shared memory.
///
/// # Safety
/// The type must be `#[repr(C)]`, contain no padding that matters, no
/// pointers or references, and be valid for every bit pattern (a peer can
/// write anything into shared memory).
pub unsafe trait Pod: Copy + 'static {}

/// System-wide pool identifier: derived by the compiler from the assembly
/// (`glue::pools`, 1, 2, ...), or at least [`crate::FIRST_PRIVATE_POOL`]
/// for a component's private pool.
pub type PoolId = u32;

/// One slice: a byte range inside one buffer of one pool.
///
/// `buf` is the index of the buffer's first page within the pool's data
/// area; `(pool, buf, gen)` names the buffer's *contents* system-wide.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SliceDesc {
    /// Pool the buffer belongs to.
    pub pool: PoolId,
    /// Index of the buffer's first page inside the pool.
    pub buf: u32,
    /// Generation of the buffer (incremented on every reallocation, never 0
    /// for a live buffer).
    pub gen: u32,
    /// Byte offset of the slice from the start of the buffer.
    pub off: u32,
    /// Length of the slice in bytes.
    pub len: u32,
}

impl SliceDesc {
    /// End offset (exclusive) within the buffer, without overflow.
    pub fn end(&self) -> u64 {
        self.off as u64 + self.len as u64
    }

    /// True if `next` continues this slice contiguously in the same buffer
    /// contents, so the two can be merged into one.
    pub fn is_contiguous_with(&self, next: &SliceDesc) -> bool {
        self.pool == next.pool && self.buf == next.buf && self.gen == next.gen && self.end() == next.off as u64
    }
}

/// Flag on an [`AggDesc`]: the sender will send no more data (end of stream).
pub const FLAG_EOF: u32 = 1 << 0;
/// Flag on an [`AggDesc`]: the sender (pool owner) asks the receiver to drop
/// cached references it can live without (owner-side reclaim request).
pub const FLAG_RECLAIM: u32 = 1 << 1;

/// An aggregate on the wire: a bounded array of slices plus a user tag.
///
/// Passing an `AggDesc` over a channel passes one *hold* per slice from the
/// sender to the receiver; the receiver returns each hold to the sender with a
/// [`RelDesc`] when it no longer needs the slice.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggDesc {
    /// Number of valid entries in `slices` (≤ [`MAX_SLICES`]).
    pub nslices: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Free for the application (connection id, request id, file offset...).
    pub tag: u64,
    /// The slices, in order; entries past `nslices` are ignored.
    pub slices: [SliceDesc; MAX_SLICES],
}

impl Default for AggDesc {
    fn default() -> Self {
        Self { nslices: 0, flags: 0, tag: 0, slices: [SliceDesc::default(); MAX_SLICES] }
    }
}

impl AggDesc {
    /// The valid slices (clamped to [`MAX_SLICES`] so a corrupt count cannot
    /// index out of bounds).
    pub fn slices(&self) -> &[SliceDesc] {
        let n = (self.nslices as usize).min(MAX_SLICES);
        &self.slices[..n]
    }

    /// Total payload bytes described (saturating).
    pub fn total_len(&self) -> u64 {
        self.slices().iter().map(|s| s.len as u64).sum()
    }
}

/// A release on the wire: return `count` holds on buffer `(pool, buf, gen)`
/// to the component that granted them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelDesc {
    /// Pool of the buffer.
    pub pool: PoolId,
    /// Buffer index within the pool.
    pub buf: u32,
    /// Generation the holds were granted for.
    pub gen: u32,
    /// Number of holds returned.
    pub count: u32,
}

// SAFETY: repr(C), only integer fields, valid for all bit patterns.
unsafe impl Pod for SliceDesc {}
// SAFETY: as above (array of Pod plus integers).
unsafe impl Pod for AggDesc {}
// SAFETY: as above.
unsafe impl Pod for RelDesc {}
// SAFETY: integers.
unsafe impl Pod for u32 {}
// SAFETY: integers.
unsafe impl Pod for u64 {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, size_of};

    #[test]
    fn wire_sizes_are_stable() {
        assert_eq!(size_of::<SliceDesc>(), 20);
        assert_eq!(align_of::<SliceDesc>(), 4);
        assert_eq!(size_of::<RelDesc>(), 16);
        assert_eq!(size_of::<AggDesc>(), 16 + 20 * MAX_SLICES);
        assert_eq!(align_of::<AggDesc>(), 8);
    }

    #[test]
    fn corrupt_count_is_clamped() {
        let d = AggDesc { nslices: u32::MAX, ..Default::default() };
        assert_eq!(d.slices().len(), MAX_SLICES);
    }

    #[test]
    fn contiguity() {
        let a = SliceDesc { pool: 1, buf: 2, gen: 3, off: 10, len: 5 };
        let b = SliceDesc { off: 15, len: 1, ..a };
        assert!(a.is_contiguous_with(&b));
        assert!(!a.is_contiguous_with(&SliceDesc { gen: 4, ..b }));
        assert!(!b.is_contiguous_with(&a));
    }
}
