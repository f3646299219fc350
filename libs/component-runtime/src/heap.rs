//! A global allocator over a static region, for components that need `alloc`.
//!
//! Uses the `linked_list_allocator` crate (no_std, first-fit with coalescing)
//! rather than an allocator of our own. Components declare the size with
//! [`global_heap!`]; the region lives in the component's .bss, so the loader
//! maps it like any other zeroed data.

pub use linked_list_allocator::LockedHeap;

/// Declares the global allocator with a static heap of `$size` bytes, a
/// function `init_heap()` that must run before the first allocation (the
/// entry macros call it when present via `$crate::heap::init`), and
/// `heap_used()`, the bytes allocated now (for the components' counters).
#[macro_export]
macro_rules! global_heap {
    ($size:expr) => {
        #[global_allocator]
        static IOLITE_HEAP: $crate::heap::LockedHeap = $crate::heap::LockedHeap::empty();

        /// Hands the static heap region to the allocator; call once, first.
        pub fn init_heap() {
            static mut REGION: [u8; $size] = [0; $size];
            // SAFETY: called once before any allocation; REGION is used by
            // nothing else.
            unsafe {
                IOLITE_HEAP.lock().init(core::ptr::addr_of_mut!(REGION) as *mut u8, $size);
            }
        }

        /// Bytes of the heap allocated now.
        #[allow(dead_code)]
        pub fn heap_used() -> usize {
            IOLITE_HEAP.lock().used()
        }
    };
}
