//! Pages of named counters: what makes "zero copy" observable across
//! components.
//!
//! A component that publishes counters for others declares them once,
//! with [`counters!`]: an enum whose variants are the counters (their
//! order is their index in the page) and whose names come from the same
//! declaration. Adding a counter is one line there; the writer then sets
//! it by name ([`Values`] is indexed by the enum), and readers list the
//! page by iterating [`Counter::ALL`]. Nothing matches names to values by
//! position across crates.
//!
//! A [`CounterPage`] is one shared page: written by one component
//! ([`CounterPage::publish`]), read by the others (read-only mappings are
//! enough). Values are plain atomics; a reader may see a mix of two
//! updates, which counters tolerate.
//!
//! Besides its own counters, every page carries the standard slots a
//! reader may use without knowing the writer's counter set: today one,
//! the component's *I/O bytes held* ([`Values::set_io_bytes_held`],
//! [`CounterPage::io_bytes_held`]), which fs's memory budget charges the
//! file cache for.
#![no_std]
#![deny(missing_docs)]

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

/// Counters a page holds at most.
pub const CAPACITY: usize = 126;

/// "IOLCNTRS": the writer has published at least once.
pub const COUNTERS_MAGIC: u64 = u64::from_le_bytes(*b"IOLCNTRS");

/// A set of counters, declared with [`counters!`].
pub trait Counter: Copy + 'static {
    /// Every counter, in page order.
    const ALL: &'static [Self];
    /// The counter's index in the page.
    fn index(self) -> usize;
    /// The counter's name, `[a-z0-9_]+`, as readers show it.
    fn name(self) -> &'static str;
    /// What it counts: its doc comment, lines joined (each starts with
    /// the space after `///`), as `/metrics` gives it in `# HELP`.
    fn help(self) -> &'static str;
}

/// Declares a set of counters: an enum, each variant with its name and
/// its doc comment (the only attribute a variant takes: it becomes
/// [`Counter::help`]).
///
/// ```
/// counters::counters! {
///     /// What a driver counts.
///     pub enum Drv {
///         /// Frames received.
///         RxFrames = "drv_rx_frames",
///         /// Frames sent.
///         TxFrames = "drv_tx_frames",
///     }
/// }
/// use counters::Counter;
/// assert_eq!(Drv::TxFrames.index(), 1);
/// assert_eq!(Drv::ALL.iter().map(|c| c.name()).collect::<Vec<_>>(), ["drv_rx_frames", "drv_tx_frames"]);
/// let mut v = counters::Values::<Drv>::new();
/// v[Drv::TxFrames] += 3;
/// assert_eq!(v[Drv::TxFrames], 3);
/// assert_eq!(Drv::TxFrames.help(), " Frames sent.");
/// ```
#[macro_export]
macro_rules! counters {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[doc = $doc:literal])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        $vis enum $name {
            $( $(#[doc = $doc])* $variant, )+
        }

        impl $crate::Counter for $name {
            const ALL: &'static [Self] = &[$($name::$variant,)+];
            fn index(self) -> usize {
                self as usize
            }
            fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
            fn help(self) -> &'static str {
                match self {
                    $($name::$variant => concat!($($doc),*),)+
                }
            }
        }

        const _: () = assert!(
            <$name as $crate::Counter>::ALL.len() <= $crate::CAPACITY,
            "more counters than a page holds"
        );
    };
}

/// The values of a set of counters, indexed by the counters themselves,
/// and the standard slots every page carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values<C: Counter> {
    v: [u64; CAPACITY],
    io_bytes_held: u64,
    _c: PhantomData<C>,
}

impl<C: Counter> Values<C> {
    /// All counters 0.
    pub const fn new() -> Self {
        Self { v: [0; CAPACITY], io_bytes_held: 0, _c: PhantomData }
    }

    /// Sets the standard *I/O bytes held* slot: bytes of memory the
    /// component holds now for I/O data in buffers of its own (its pools'
    /// pages in use, the bytes queued in its rings), i.e. what a budget
    /// for the memory of the data path charges it. Pages it only refers to
    /// (another component's, lent by reference) are not its own. Each
    /// component documents what it counts here.
    pub fn set_io_bytes_held(&mut self, bytes: u64) {
        self.io_bytes_held = bytes;
    }

    /// The *I/O bytes held* slot ([`Values::set_io_bytes_held`]).
    pub fn io_bytes_held(&self) -> u64 {
        self.io_bytes_held
    }

    /// `(counter, value)` in page order.
    pub fn iter(&self) -> impl Iterator<Item = (C, u64)> + '_ {
        C::ALL.iter().map(|&c| (c, self.v[c.index()]))
    }
}

impl<C: Counter> Default for Values<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Counter> core::ops::Index<C> for Values<C> {
    type Output = u64;
    fn index(&self, c: C) -> &u64 {
        &self.v[c.index()]
    }
}

impl<C: Counter> core::ops::IndexMut<C> for Values<C> {
    fn index_mut(&mut self, c: C) -> &mut u64 {
        &mut self.v[c.index()]
    }
}

/// A page of counters, written by one component, read by others.
#[repr(C)]
pub struct CounterPage {
    /// [`COUNTERS_MAGIC`] once the writer has published.
    magic: AtomicU64,
    /// Bumped by the writer after each update of `values`.
    updates: AtomicU64,
    /// The counters, in their declaration's order.
    values: [AtomicU64; CAPACITY],
    /// The standard slot [`Values::set_io_bytes_held`].
    io_bytes_held: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<CounterPage>() <= 4096);

impl CounterPage {
    /// The counter page at `base`.
    ///
    /// # Safety
    /// `base` must be a dataport of at least 4096 bytes, 8-aligned, mapped
    /// for the caller's lifetime (read-only is fine for readers: they only
    /// load), used only through this type.
    pub unsafe fn at(base: *const u8) -> &'static CounterPage {
        // SAFETY: per the contract; atomics accept any bits.
        unsafe { &*(base as *const CounterPage) }
    }

    /// Publishes `values` (the writer).
    pub fn publish<C: Counter>(&self, values: &Values<C>) {
        for (c, v) in values.iter() {
            self.values[c.index()].store(v, Ordering::Relaxed);
        }
        self.io_bytes_held.store(values.io_bytes_held, Ordering::Relaxed);
        self.magic.store(COUNTERS_MAGIC, Ordering::Release);
        self.updates.fetch_add(1, Ordering::Release);
    }

    /// Whether the writer has published at least once.
    pub fn valid(&self) -> bool {
        self.magic.load(Ordering::Acquire) == COUNTERS_MAGIC
    }

    /// The writer's *I/O bytes held* ([`Values::set_io_bytes_held`]);
    /// `None` before it has published. Untrusted: whatever the writer
    /// says.
    pub fn io_bytes_held(&self) -> Option<u64> {
        self.valid().then(|| self.io_bytes_held.load(Ordering::Relaxed))
    }

    /// A counter's value.
    pub fn get<C: Counter>(&self, c: C) -> u64 {
        self.values[c.index()].load(Ordering::Relaxed)
    }

    /// Every counter of `C` as `(name, value)`, in page order.
    pub fn read<C: Counter>(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        C::ALL.iter().map(|&c| (c.name(), self.get(c)))
    }

    /// Writes `"name":value` pairs for every counter of `C` as JSON members
    /// (no braces); `first` says whether one was written before.
    pub fn write_json<C: Counter>(&self, out: &mut impl core::fmt::Write, first: &mut bool) -> core::fmt::Result {
        for (n, v) in self.read::<C>() {
            if !*first {
                out.write_char(',')?;
            }
            *first = false;
            write!(out, "\"{n}\":{v}")?;
        }
        Ok(())
    }
}

/// Checks a counter set's names: non-empty, `[a-z0-9_]+`, distinct. For the
/// declaring crate's tests.
pub fn names_are_valid<C: Counter>() -> bool {
    let ok = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    C::ALL
        .iter()
        .enumerate()
        .all(|(i, &c)| c.index() == i && ok(c.name()) && C::ALL[..i].iter().all(|&d| d.name() != c.name()))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    counters! {
        /// Test counters.
        enum T {
            /// One.
            One = "t_one",
            /// Two.
            Two = "t_two",
            /// Three.
            Three = "t_three",
        }
    }

    counters! {
        /// A bad set: a duplicate name.
        enum Bad {
            /// A.
            A = "same",
            /// B.
            B = "same",
        }
    }

    #[test]
    fn a_page_round_trip_by_name() {
        let mut mem = std::vec![0u64; 512];
        // SAFETY: 4 KiB, 8-aligned, used only through the page here.
        let page = unsafe { CounterPage::at(mem.as_mut_ptr() as *const u8) };
        assert!(!page.valid());
        let mut v = Values::<T>::new();
        v[T::Two] = 7;
        v[T::Three] += 1;
        v[T::Three] += 1;
        page.publish(&v);
        assert!(page.valid());
        assert_eq!((page.get(T::One), page.get(T::Two), page.get(T::Three)), (0, 7, 2));
        let mut json = String::new();
        let mut first = true;
        page.write_json::<T>(&mut json, &mut first).unwrap();
        assert_eq!(json, r#""t_one":0,"t_two":7,"t_three":2"#);
        assert_eq!(mem[2 + 1], 7, "values in declaration order after magic and updates");
    }

    #[test]
    fn every_page_carries_the_io_bytes_held() {
        let mut mem = std::vec![0u64; 512];
        // SAFETY: 4 KiB, 8-aligned, used only through the page here.
        let page = unsafe { CounterPage::at(mem.as_mut_ptr() as *const u8) };
        assert_eq!(page.io_bytes_held(), None, "not before the writer published");
        let mut v = Values::<T>::new();
        page.publish(&v);
        assert_eq!(page.io_bytes_held(), Some(0));
        v.set_io_bytes_held(3 << 12);
        v[T::One] = 1;
        page.publish(&v);
        assert_eq!((page.io_bytes_held(), v.io_bytes_held()), (Some(3 << 12), 3 << 12));
        // Whatever the writer's counter set, the slot is in the same place.
        assert_eq!(mem[2 + CAPACITY], 3 << 12);
        assert_eq!(page.read::<T>().map(|(_, v)| v).sum::<u64>(), 1, "not one of the counters");
    }

    #[test]
    fn names_are_checked() {
        assert!(names_are_valid::<T>());
        assert!(!names_are_valid::<Bad>());
        let _ = (Bad::A, Bad::B);
    }
}
