//! The IPC buffer and where this address space keeps its pointer to it.

use core::sync::atomic::{AtomicPtr, Ordering};

use crate::constants::{MSG_MAX_EXTRA_CAPS, MSG_MAX_LENGTH};
use crate::types::{CPtr, Word};

/// The per-thread IPC buffer (`seL4_IPCBuffer`), 128 words, laid out as in
/// 5.0. The kernel reads message registers 4.. and extra caps from here and
/// writes received ones back. `msg[0..4]` are not used by the kernel on
/// x86_64: those travel in registers.
#[repr(C, align(1024))]
#[derive(Clone, Debug)]
pub struct IpcBuffer {
    /// Message tag of the last message (unused by the kernel on x86_64,
    /// where the tag travels in `rsi`).
    pub tag: Word,
    /// Message registers.
    pub msg: [Word; MSG_MAX_LENGTH],
    /// Free for user use; libsel4 keeps the buffer's own address here.
    pub user_data: Word,
    /// Extra caps to send (CPtrs) or received badges of unwrapped caps.
    pub caps_or_badges: [Word; MSG_MAX_EXTRA_CAPS],
    /// CNode (CPtr, resolved in the receiver's CSpace) where a received
    /// cap is placed.
    pub receive_cnode: CPtr,
    /// Slot index within `receive_cnode`.
    pub receive_index: CPtr,
    /// Depth to resolve `receive_index` to.
    pub receive_depth: Word,
}

impl IpcBuffer {
    /// An all-zero buffer, e.g. for a `static` that is then registered with
    /// [`tcb_configure`](crate::tcb_configure).
    pub const fn zeroed() -> Self {
        IpcBuffer {
            tag: 0,
            msg: [0; MSG_MAX_LENGTH],
            user_data: 0,
            caps_or_badges: [0; MSG_MAX_EXTRA_CAPS],
            receive_cnode: 0,
            receive_index: 0,
            receive_depth: 0,
        }
    }

    /// Sets where the next received capability goes (`seL4_SetCapReceivePath`).
    pub fn set_receive_path(&mut self, cnode: CPtr, index: CPtr, depth: Word) {
        self.receive_cnode = cnode;
        self.receive_index = index;
        self.receive_depth = depth;
    }
}

// One pointer per address space rather than per thread: Iolite components
// are single-threaded, and Rust has no portable thread-local storage without
// a TLS setup we do not do. The x86_64 5.0 kernel also points the GS base at
// the thread's registered buffer, but reading through `gs:` would tie this
// crate to that quirk, so the pointer is stored explicitly.
static IPC_BUFFER: AtomicPtr<IpcBuffer> = AtomicPtr::new(core::ptr::null_mut());

/// Records where this address space's IPC buffer is mapped.
///
/// There is one such pointer per address space (a `static`), which is
/// correct because every Iolite component runs a single thread. A
/// multi-threaded component would have to call this on every switch, so it
/// is not supported.
///
/// # Safety
/// `ptr` must be the virtual address registered as the calling thread's IPC
/// buffer with the kernel (TCB_Configure / TCB_SetIPCBuffer, or
/// `BootInfo::ipc_buffer` for the root task), mapped writable, for as long as
/// any function of this crate is used.
pub unsafe fn set_ipc_buffer(ptr: *mut IpcBuffer) {
    IPC_BUFFER.store(ptr, Ordering::Relaxed);
}

/// The pointer given to [`set_ipc_buffer`], or null if none was.
pub fn ipc_buffer() -> *mut IpcBuffer {
    IPC_BUFFER.load(Ordering::Relaxed)
}

/// The IPC buffer, panicking with a clear message if none was set: a null
/// write would otherwise fault far from the cause.
pub(crate) fn ipc_buffer_mut() -> &'static mut IpcBuffer {
    let p = ipc_buffer();
    assert!(!p.is_null(), "sel4: IPC buffer not set (call sel4::set_ipc_buffer first)");
    // SAFETY: set_ipc_buffer's contract makes p valid and exclusively ours
    // (single-threaded address space); callers do not hold the reference
    // across another call to this function.
    unsafe { &mut *p }
}

/// Reads message register `i` from the IPC buffer (`seL4_GetMR`).
///
/// Received MR0-3 are returned by the syscall wrappers and are *not* in the
/// buffer (except after a failed invocation, whose error details
/// [`invoke`](crate::invoke) copies there); use this for indices >= 4.
///
/// # Panics
/// If no IPC buffer was set or `i >= 120`.
pub fn get_mr(i: usize) -> Word {
    ipc_buffer_mut().msg[i]
}

/// Writes message register `i` in the IPC buffer (`seL4_SetMR`). Only
/// indices >= 4 reach the kernel through the buffer; the syscall wrappers
/// take MR0-3 as arguments.
///
/// # Panics
/// If no IPC buffer was set or `i >= 120`.
pub fn set_mr(i: usize, value: Word) {
    ipc_buffer_mut().msg[i] = value;
}

/// Sets extra cap `i` of the next message (`seL4_SetCap`).
///
/// # Panics
/// If no IPC buffer was set or `i >= 3`.
pub fn set_cap(i: usize, cap: CPtr) {
    ipc_buffer_mut().caps_or_badges[i] = cap;
}

/// Badge of unwrapped extra cap `i` of the last received message
/// (`seL4_GetBadge`).
///
/// # Panics
/// If no IPC buffer was set or `i >= 3`.
pub fn get_badge(i: usize) -> Word {
    ipc_buffer_mut().caps_or_badges[i]
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn layout_matches_sel4_ipcbuffer() {
        // tag + msg[120] + userData + caps_or_badges[3] + 3 receive words
        assert_eq!(size_of::<IpcBuffer>(), 128 * 8);
        assert_eq!(align_of::<IpcBuffer>(), 1024);
        assert_eq!(offset_of!(IpcBuffer, tag), 0);
        assert_eq!(offset_of!(IpcBuffer, msg), 8);
        assert_eq!(offset_of!(IpcBuffer, user_data), 121 * 8);
        assert_eq!(offset_of!(IpcBuffer, caps_or_badges), 122 * 8);
        assert_eq!(offset_of!(IpcBuffer, receive_cnode), 125 * 8);
        assert_eq!(offset_of!(IpcBuffer, receive_index), 126 * 8);
        assert_eq!(offset_of!(IpcBuffer, receive_depth), 127 * 8);
    }
}
