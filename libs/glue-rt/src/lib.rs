//! Support code of the Rust glue the `camkes` compiler generates: message
//! register access and the marshalling of `in string` arguments for RPC
//! stubs, the typed [`Dataport`] whose type records the rights the
//! assembly granted, and (feature `iolite`) IO-Lite pools mapped from
//! dataports (`pools`).
//!
//! Generated glue reaches it as `glue::rt` (`pub use ::glue_rt as rt;`), so
//! every component crate that includes glue depends on this crate. It used
//! to be copied into every generated file; one crate keeps it in one place,
//! reviewed and compiled once. The compiler's own limits must agree with
//! the constants here (`camkes`'s tests check [`MAX_STRING_BYTES`]).
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

use core::marker::PhantomData;

#[cfg(any(feature = "iolite", test))]
pub mod pools;

/// The reply label of a successful call.
pub const OK: sel4::Word = 0;
/// The reply label of a request the server rejected: unknown method,
/// too short, or a string that is too long or not UTF-8.
pub const BAD_REQUEST: sel4::Word = 1;
/// The number of message registers (`seL4_MsgMaxLength`).
pub const MSG_MAX: usize = 120;
/// The longest `in string` argument, in bytes.
pub const MAX_STRING_BYTES: usize = 800;

/// Message register `i`: MR0-3 travel in registers, the rest in the
/// IPC buffer.
#[inline]
pub fn get_mr(mrs: &[sel4::Word; 4], i: usize) -> sel4::Word {
    if i < 4 {
        mrs[i]
    } else {
        sel4::get_mr(i)
    }
}

/// Sets message register `i` (see [`get_mr`]).
#[inline]
pub fn set_mr(mrs: &mut [sel4::Word; 4], i: usize, value: sel4::Word) {
    if i < 4 {
        mrs[i] = value
    } else {
        sel4::set_mr(i, value)
    }
}

/// Writes `bytes` from MR `at` as a length word and packed words;
/// returns the next free MR.
pub fn put_bytes(mrs: &mut [sel4::Word; 4], at: usize, bytes: &[u8]) -> usize {
    assert!(
        bytes.len() <= MAX_STRING_BYTES && at + 1 + bytes.len().div_ceil(8) <= MSG_MAX,
        "camkes glue: string argument does not fit in the message registers"
    );
    set_mr(mrs, at, bytes.len() as sel4::Word);
    let mut next = at + 1;
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        set_mr(mrs, next, u64::from_le_bytes(word) as sel4::Word);
        next += 1;
    }
    next
}

/// Reads what [`put_bytes`] wrote at MR `at` into `out`; returns the
/// byte count and the next MR, or `None` if the length is too large
/// or runs past `length` registers.
pub fn get_bytes(
    mrs: &[sel4::Word; 4],
    at: usize,
    length: usize,
    out: &mut [u8; MAX_STRING_BYTES],
) -> Option<(usize, usize)> {
    if at >= length {
        return None;
    }
    let count = get_mr(mrs, at) as usize;
    let words = count.div_ceil(8);
    if count > MAX_STRING_BYTES || at + 1 + words > length {
        return None;
    }
    for w in 0..words {
        let bytes = (get_mr(mrs, at + 1 + w) as u64).to_le_bytes();
        let start = w * 8;
        let end = (start + 8).min(count);
        out[start..end].copy_from_slice(&bytes[..end - start]);
    }
    Some((count, at + 1 + words))
}

/// Panics unless a reply says success: a rejected call means client
/// and server disagree about the interface, a bug to stop at.
#[inline]
pub fn expect_ok(info: sel4::MessageInfo, what: &str) {
    if info.label() != OK {
        panic!("camkes glue: the server rejected {}", what);
    }
}

/// Marker: the dataport is mapped read-only.
pub struct ReadOnly;
/// Marker: the dataport is mapped read-write.
pub struct ReadWrite;

/// A dataport mapping. The type parameter records the rights the
/// assembly granted (`_access`), so a read-only dataport offers no
/// way to write: writing it would fault.
///
/// The memory is shared with other components that may write it at
/// any time, so references into it are `unsafe` (the caller vouches
/// that the agreed protocol keeps the bytes stable meanwhile, as
/// IO-Lite's sealed buffers do); the copying accessors are safe.
pub struct Dataport<R> {
    base: *mut u8,
    size: usize,
    _rights: PhantomData<R>,
}

impl<R> Dataport<R> {
    /// # Safety
    /// `base..base + size` must be this dataport's mapping with
    /// rights `R`; only the generated `get()` functions call this.
    pub const unsafe fn new(base: usize, size: usize) -> Self {
        Dataport { base: base as *mut u8, size, _rights: PhantomData }
    }

    /// The size in bytes.
    pub const fn len(&self) -> usize {
        self.size
    }

    /// Whether the dataport has no bytes (never, for a real one).
    pub const fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The first byte.
    pub const fn as_ptr(&self) -> *const u8 {
        self.base
    }

    /// The whole dataport as a slice.
    ///
    /// # Safety
    /// No other component (or other handle) may write the bytes
    /// while the slice is alive.
    pub unsafe fn as_slice(&self) -> &[u8] {
        unsafe { core::slice::from_raw_parts(self.base, self.size) }
    }

    /// Copies `out.len()` bytes from `offset` into `out` with volatile
    /// reads. Panics if the range is outside the dataport.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset.checked_add(out.len()).is_some_and(|end| end <= self.size), "dataport read out of range");
        for (i, byte) in out.iter_mut().enumerate() {
            // SAFETY: in range (checked above) and mapped readable.
            *byte = unsafe { core::ptr::read_volatile(self.base.add(offset + i)) };
        }
    }
}

impl Dataport<ReadWrite> {
    /// The first byte, for writing.
    pub const fn as_mut_ptr(&self) -> *mut u8 {
        self.base
    }

    /// The whole dataport as a mutable slice.
    ///
    /// # Safety
    /// No other component (or other handle) may read or write the
    /// bytes while the slice is alive.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        unsafe { core::slice::from_raw_parts_mut(self.base, self.size) }
    }

    /// Copies `data` to `offset` with volatile writes. Panics if the
    /// range is outside the dataport.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(offset.checked_add(data.len()).is_some_and(|end| end <= self.size), "dataport write out of range");
        for (i, byte) in data.iter().enumerate() {
            // SAFETY: in range (checked above) and mapped writable.
            unsafe { core::ptr::write_volatile(self.base.add(offset + i), *byte) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_the_register_words() {
        // Strings that fit MR0-3 (no IPC buffer on the host): length word
        // plus up to three packed words.
        for text in ["", "a", "exactly8", "twenty-four bytes here!!"] {
            let mut mrs = [0; 4];
            let next = put_bytes(&mut mrs, 0, text.as_bytes());
            assert_eq!(next, 1 + text.len().div_ceil(8));
            let mut out = [0u8; MAX_STRING_BYTES];
            assert_eq!(get_bytes(&mrs, 0, next, &mut out), Some((text.len(), next)));
            assert_eq!(&out[..text.len()], text.as_bytes());
        }
    }

    #[test]
    fn malformed_strings_are_rejected() {
        let mut out = [0u8; MAX_STRING_BYTES];
        // Length past the message, past the limit, or no length word at all.
        assert_eq!(get_bytes(&[9, 0, 0, 0], 0, 2, &mut out), None);
        assert_eq!(get_bytes(&[MAX_STRING_BYTES as sel4::Word + 1, 0, 0, 0], 0, 4, &mut out), None);
        assert_eq!(get_bytes(&[0; 4], 1, 1, &mut out), None);
    }

    #[test]
    fn dataport_copies_are_bounds_checked() {
        let mut mem = [0u8; 64];
        // SAFETY: `mem` outlives the handle and nothing else touches it.
        let mut d: Dataport<ReadWrite> = unsafe { Dataport::new(mem.as_mut_ptr() as usize, mem.len()) };
        d.write(60, b"abcd");
        let mut back = [0u8; 4];
        d.read(60, &mut back);
        assert_eq!(&back, b"abcd");
        assert_eq!(d.len(), 64);
        let r = std::panic::catch_unwind(move || d.read(61, &mut [0u8; 4]));
        assert!(r.is_err(), "a read past the end panics");
    }
}
