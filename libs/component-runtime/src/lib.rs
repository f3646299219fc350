//! The runtime every Iolite OS protection domain links against.
//!
//! It provides what a `no_std` program on seL4 needs before its own logic can
//! run: an entry point ([`root_task_entry!`], [`component_entry!`]), a console
//! with logging macros ([`log!`], [`info!`], [`warn!`], [`error!`]), a panic
//! handler that names the component, time ([`time`]: the TSC at the rate the
//! kernel measured, the ticker's clock page), the CPU check the root task
//! runs at boot ([`cpu`]) and (feature `heap`) a global
//! allocator over a static region. On top of those, the shape every
//! component shell shares: the loop ([`shell`]: `init`, then
//! `notified(round)`) and one [`link::Link`] per peer (its channel,
//! guards and death watch).
//!
//! Host builds (unit tests of crates that depend on this one) get only the
//! formatting parts: the entry points, the panic handler and the allocator
//! exist only on the seL4 target (`target_os = "none"`).
#![cfg_attr(target_os = "none", no_std)]
#![warn(missing_docs)]

pub mod console;
pub mod cpu;
pub mod entry;
pub mod events;
#[cfg(feature = "heap")]
pub mod heap;
pub mod inject;
pub mod link;
pub mod liveness;
pub mod logring;
mod panic;
pub mod restart;
pub mod shell;
pub mod start;
pub mod time;

pub use restart::{restart, RestartError};

#[doc(hidden)]
pub use sel4;
#[doc(hidden)]
pub use sel4::BootInfo;

use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

static NAME_PTR: AtomicPtr<u8> = AtomicPtr::new(b"?".as_ptr() as *mut u8);
static NAME_LEN: AtomicUsize = AtomicUsize::new(1);

/// Records the name this protection domain prints in logs and panics.
///
/// The entry macros call it before `main`; a name set later replaces it.
pub fn set_component_name(name: &'static str) {
    NAME_LEN.store(0, Ordering::Relaxed);
    NAME_PTR.store(name.as_ptr() as *mut u8, Ordering::Relaxed);
    NAME_LEN.store(name.len(), Ordering::Release);
}

/// The name given to [`set_component_name`], or `"?"` before it was called.
pub fn component_name() -> &'static str {
    let len = NAME_LEN.load(Ordering::Acquire);
    let ptr = NAME_PTR.load(Ordering::Relaxed);
    // SAFETY: the pointer and length always come from one `&'static str`
    // (set_component_name publishes the length last, with Release).
    unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(ptr, len)) }
}

static SUPERVISOR_SLOT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Records where the supervisor endpoint is (the entry macro does this).
#[doc(hidden)]
pub fn set_supervisor_slot(slot: u64) {
    SUPERVISOR_SLOT.store(slot, Ordering::Relaxed);
}

/// The supervisor endpoint's slot (0: none, as in the root task).
fn supervisor_slot() -> u64 {
    SUPERVISOR_SLOT.load(Ordering::Relaxed)
}

/// Ends this component normally: tells the supervisor (which reports the
/// status and frees the component) and never returns. Blocks without using
/// CPU until the supervisor has torn the component down.
pub fn exit(status: u64) -> ! {
    let slot = SUPERVISOR_SLOT.load(Ordering::Relaxed);
    if slot != 0 {
        let info = sel4::MessageInfo::new(start::SUPERVISOR_EXIT_LABEL, 0, 0, 1);
        // The supervisor never replies: the call blocks for good.
        let _ = sel4::call(slot, info, [status, 0, 0, 0]);
    }
    abort()
}

/// Stops the calling thread for good in a way its supervisor sees: an
/// invalid-opcode exception is delivered to the thread's fault endpoint (or,
/// for the root task, reported by a debug kernel).
pub fn abort() -> ! {
    // SAFETY: ud2 only raises #UD; nothing is touched. The supervisor never
    // resumes a thread after a fault, so this does not return.
    #[cfg(target_os = "none")]
    unsafe {
        core::arch::asm!("ud2", options(nomem, nostack, noreturn));
    }
    #[cfg(not(target_os = "none"))]
    std::process::abort();
}
