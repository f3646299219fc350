//! System calls of the seL4 5.0.0 x86_64 ABI (the `syscall` instruction,
//! `CONFIG_SYSCALL`).
//!
//! Register use: `rdx` = syscall number, `rdi` = capability (in) / badge
//! (out), `rsi` = message tag, MR0..MR3 in `r10`, `r8`, `r9`, `r15`. The
//! kernel returns with `sysret`, which leaves `rcx` = return address and
//! `r11` = flags, and it zeroes `rsp` rather than preserving it. libsel4
//! therefore parks `rsp` in `rbx` (which the kernel restores from the saved
//! context); Rust cannot name `rbx` as an asm operand, so the stubs save it
//! in a compiler-chosen register themselves.
//!
//! The wrappers mirror libsel4's `*WithMRs` variants: MR0-3 are passed and
//! returned by value and never go through the IPC buffer, which holds only
//! MR4 onwards. Unlike libsel4's plain `seL4_Recv` they do not copy MR0-3
//! into the buffer: the buffer pointer here is per address space, and a
//! second thread sharing it (as in the root task's self-test) must not have
//! its received words land in another thread's buffer.

use crate::types::{CPtr, MessageInfo, Word};

/// Syscall numbers (`seL4_Syscall_ID`), from `include/api/syscall.xml`: the
/// API calls count down from -1, then the debug ones continue the count
/// whether or not they are configured.
pub mod id {
    /// `seL4_SysCall`
    pub const CALL: isize = -1;
    /// `seL4_SysReplyRecv`
    pub const REPLY_RECV: isize = -2;
    /// `seL4_SysSend`
    pub const SEND: isize = -3;
    /// `seL4_SysNBSend`
    pub const NB_SEND: isize = -4;
    /// `seL4_SysRecv`
    pub const RECV: isize = -5;
    /// `seL4_SysReply`
    pub const REPLY: isize = -6;
    /// `seL4_SysYield`
    pub const YIELD: isize = -7;
    /// `seL4_SysNBRecv`
    pub const NB_RECV: isize = -8;
    /// `seL4_SysDebugPutChar` (CONFIG_DEBUG_BUILD)
    pub const DEBUG_PUT_CHAR: isize = -9;
    /// `seL4_SysDebugHalt` (CONFIG_DEBUG_BUILD)
    pub const DEBUG_HALT: isize = -10;
    /// `seL4_SysDebugCapIdentify` (CONFIG_DEBUG_BUILD)
    pub const DEBUG_CAP_IDENTIFY: isize = -11;
    /// `seL4_SysDebugSnapshot` (CONFIG_DEBUG_BUILD)
    pub const DEBUG_SNAPSHOT: isize = -12;
    /// `seL4_SysDebugNameThread` (CONFIG_DEBUG_BUILD)
    pub const DEBUG_NAME_THREAD: isize = -13;
    /// `seL4_SysDebugRun` (CONFIG_DANGEROUS_CODE_INJECTION, not configured)
    pub const DEBUG_RUN: isize = -14;
    /// `seL4_SysBenchmarkFlushCaches` (CONFIG_ENABLE_BENCHMARKS: debug kernel)
    pub const BENCHMARK_FLUSH_CACHES: isize = -15;
    /// `seL4_SysBenchmarkResetLog` (debug kernel)
    pub const BENCHMARK_RESET_LOG: isize = -16;
    /// `seL4_SysBenchmarkFinalizeLog` (debug kernel)
    pub const BENCHMARK_FINALIZE_LOG: isize = -17;
    /// `seL4_SysBenchmarkSetLogBuffer` (debug kernel; no log buffer configured)
    pub const BENCHMARK_SET_LOG_BUFFER: isize = -18;
    /// `seL4_SysBenchmarkNullSyscall` (debug kernel)
    pub const BENCHMARK_NULL_SYSCALL: isize = -19;
    /// `seL4_SysBenchmarkGetThreadUtilisation` (CONFIG_BENCHMARK_TRACK_UTILISATION: debug kernel)
    pub const BENCHMARK_GET_THREAD_UTILISATION: isize = -20;
    /// `seL4_SysBenchmarkResetThreadUtilisation` (debug kernel)
    pub const BENCHMARK_RESET_THREAD_UTILISATION: isize = -21;
    /// `seL4_SysVMEnter` (CONFIG_VTX, not configured)
    pub const VM_ENTER: isize = -22;
}

/// Registers that come back from the kernel.
struct Regs {
    rdi: Word,
    rsi: Word,
    mrs: [Word; 4],
}

/// The one syscall stub: every register the ABI uses is an input and an
/// output, so no call site can forget a clobber. `rcx`/`r11` are destroyed
/// by `syscall`/`sysret`; `rdx` is declared clobbered because libsel4 does
/// not rely on it either.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn raw_syscall(sys: isize, rdi: Word, rsi: Word, mrs: [Word; 4]) -> Regs {
    let [mut m0, mut m1, mut m2, mut m3] = mrs;
    let out_rdi: Word;
    let out_rsi: Word;
    // SAFETY: the kernel only touches registers listed here, restores rbx
    // (holding our rsp) and every other register from the saved context,
    // and accesses user memory only through the registered IPC buffer, which
    // the default (non-`nomem`) asm contract already covers.
    unsafe {
        core::arch::asm!(
            // If the allocator picks rbx itself for {save}, both moves are
            // no-ops and rbx ends up holding rsp, which is still correct:
            // {save} is an output, so the compiler treats it as clobbered.
            "mov {save}, rbx",
            "mov rbx, rsp",
            "syscall",
            "mov rsp, rbx",
            "mov rbx, {save}",
            save = out(reg) _,
            inlateout("rdx") sys as Word => _,
            inlateout("rdi") rdi => out_rdi,
            inlateout("rsi") rsi => out_rsi,
            inlateout("r10") m0,
            inlateout("r8") m1,
            inlateout("r9") m2,
            inlateout("r15") m3,
            out("rcx") _,
            out("r11") _,
        );
    }
    Regs { rdi: out_rdi, rsi: out_rsi, mrs: [m0, m1, m2, m3] }
}

#[cfg(not(target_arch = "x86_64"))]
fn raw_syscall(_sys: isize, _rdi: Word, _rsi: Word, _mrs: [Word; 4]) -> Regs {
    unimplemented!("seL4 system calls exist only on x86_64 in this crate")
}

/// `seL4_Call`: send to `dest` and wait for the reply (through the reply
/// cap the kernel creates). Returns the reply's tag and MR0-3; MR4 onwards
/// are in the calling thread's IPC buffer.
#[inline]
pub fn call(dest: CPtr, info: MessageInfo, mrs: [Word; 4]) -> (MessageInfo, [Word; 4]) {
    let r = call_quietly(dest, info, mrs);
    progress();
    r
}

/// [`call`] without counting progress: kernel object invocations
/// (`invocation::invoke`) return at once and prove nothing; a loop of them
/// (polling a device register) is still a loop.
#[inline]
pub(crate) fn call_quietly(dest: CPtr, info: MessageInfo, mrs: [Word; 4]) -> (MessageInfo, [Word; 4]) {
    let r = raw_syscall(id::CALL, dest, info.into_word(), mrs);
    (MessageInfo::from_word(r.rsi), r.mrs)
}

/// The thread's progress counter, if it has one (see [`set_progress_counter`]).
static PROGRESS: core::sync::atomic::AtomicPtr<core::sync::atomic::AtomicU64> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Makes every blocking system call that returns ([`call`], [`recv`],
/// [`reply_recv`], [`wait`]) and every [`yield_now`] add one to `counter`:
/// the thread waited for something and got it, so its loop goes round.
/// The supervisor reads the counter to tell a component that is stuck
/// (CPU time given, no progress) from one that waits or is starved
/// (component_runtime::liveness).
pub fn set_progress_counter(counter: &'static core::sync::atomic::AtomicU64) {
    PROGRESS.store(counter as *const _ as *mut _, core::sync::atomic::Ordering::Release);
}

/// Adds one to the progress counter, if there is one: for work that
/// makes progress without a blocking call (a log server printing a long
/// backlog).
#[inline]
pub fn progress() {
    let p = PROGRESS.load(core::sync::atomic::Ordering::Relaxed);
    if !p.is_null() {
        // SAFETY: set from a `&'static AtomicU64`.
        unsafe { (*p).fetch_add(1, core::sync::atomic::Ordering::Relaxed) };
    }
}

/// `seL4_Send`: blocking send.
#[inline]
pub fn send(dest: CPtr, info: MessageInfo, mrs: [Word; 4]) {
    raw_syscall(id::SEND, dest, info.into_word(), mrs);
}

/// `seL4_NBSend`: send if a receiver is waiting, otherwise drop the message.
#[inline]
pub fn nb_send(dest: CPtr, info: MessageInfo, mrs: [Word; 4]) {
    raw_syscall(id::NB_SEND, dest, info.into_word(), mrs);
}

/// `seL4_Recv`: block until a message (or signal) arrives on `src`.
/// Returns the tag, the sender's badge and MR0-3.
#[inline]
pub fn recv(src: CPtr) -> (MessageInfo, Word, [Word; 4]) {
    let r = raw_syscall(id::RECV, src, 0, [0; 4]);
    progress();
    (MessageInfo::from_word(r.rsi), r.rdi, r.mrs)
}

/// `seL4_NBRecv`: like [`recv`] but returns at once if nothing is pending
/// (then the badge is 0 and the tag is empty).
#[inline]
pub fn nb_recv(src: CPtr) -> (MessageInfo, Word, [Word; 4]) {
    let r = raw_syscall(id::NB_RECV, src, 0, [0; 4]);
    (MessageInfo::from_word(r.rsi), r.rdi, r.mrs)
}

/// `seL4_Reply`: answer the last caller through the thread's reply cap.
#[inline]
pub fn reply(info: MessageInfo, mrs: [Word; 4]) {
    raw_syscall(id::REPLY, 0, info.into_word(), mrs);
}

/// `seL4_ReplyRecv`: reply to the last caller, then wait on `src`.
/// Returns the next message's tag, badge and MR0-3.
#[inline]
pub fn reply_recv(src: CPtr, info: MessageInfo, mrs: [Word; 4]) -> (MessageInfo, Word, [Word; 4]) {
    let r = raw_syscall(id::REPLY_RECV, src, info.into_word(), mrs);
    progress();
    (MessageInfo::from_word(r.rsi), r.rdi, r.mrs)
}

/// `seL4_Yield`: give up the rest of the time slice.
#[inline]
pub fn yield_now() {
    raw_syscall(id::YIELD, 0, 0, [0; 4]);
    progress();
}

/// `seL4_Signal`: signal a notification (a `Send` the kernel turns into an
/// OR of the cap's badge into the notification word). The tag is libsel4's
/// `seL4_MessageInfo_new(0, 0, 0, 1)`.
#[inline]
pub fn signal(dest: CPtr) {
    raw_syscall(id::SEND, dest, MessageInfo::new(0, 0, 0, 1).into_word(), [0; 4]);
}

/// `seL4_Wait`: block on a notification; returns the accumulated badge.
#[inline]
pub fn wait(src: CPtr) -> Word {
    recv(src).1
}

/// `seL4_Poll`: read and clear a notification without blocking; returns the
/// badge (0 if it was not signalled).
#[inline]
pub fn poll(src: CPtr) -> Word {
    nb_recv(src).1
}

/// Debug system calls, present only in a `CONFIG_DEBUG_BUILD` kernel (our
/// debug variant). On a release kernel they raise an UnknownSyscall fault.
#[cfg(feature = "debug")]
mod debug {
    use super::*;

    /// `seL4_DebugPutChar`: print one byte on the kernel's serial console.
    #[inline]
    pub fn debug_put_char(c: u8) {
        raw_syscall(id::DEBUG_PUT_CHAR, c as Word, 0, [0; 4]);
    }

    /// Prints every byte of `s` with [`debug_put_char`].
    pub fn debug_put_str(s: &str) {
        for b in s.bytes() {
            debug_put_char(b);
        }
    }

    /// `seL4_DebugHalt`: stop the whole system (the kernel prints a message
    /// and halts).
    pub fn debug_halt() {
        raw_syscall(id::DEBUG_HALT, 0, 0, [0; 4]);
    }

    /// `seL4_DebugSnapshot`: the kernel prints a capDL dump of the system.
    pub fn debug_snapshot() {
        raw_syscall(id::DEBUG_SNAPSHOT, 0, 0, [0; 4]);
    }

    /// `seL4_DebugCapIdentify`: the kernel's internal type tag of the cap at
    /// `cap` (0 for a null cap).
    pub fn debug_cap_identify(cap: CPtr) -> u32 {
        raw_syscall(id::DEBUG_CAP_IDENTIFY, cap, 0, [0; 4]).rdi as u32
    }

    /// Longest name [`debug_name_thread`] passes on; the kernel halts the
    /// system if the NUL terminator is not within the 960-byte message area.
    pub const MAX_THREAD_NAME_LEN: usize = crate::constants::MSG_MAX_LENGTH * 8 - 1;

    /// Writes `name` as the NUL-terminated string the kernel expects in the
    /// message area, truncated to [`MAX_THREAD_NAME_LEN`] bytes.
    pub fn pack_thread_name(msg: &mut [Word; crate::constants::MSG_MAX_LENGTH], name: &str) {
        let bytes = &name.as_bytes()[..name.len().min(MAX_THREAD_NAME_LEN)];
        // Whole words, zero padded: the word after the last byte always
        // holds the terminator because MAX_THREAD_NAME_LEN < 960.
        for (i, w) in msg.iter_mut().enumerate().take(bytes.len() / 8 + 1) {
            let mut chunk = [0u8; 8];
            let start = i * 8;
            let end = bytes.len().min(start + 8);
            chunk[..end - start].copy_from_slice(&bytes[start..end]);
            *w = Word::from_ne_bytes(chunk);
        }
    }

    /// `seL4_DebugNameThread`: name the thread of TCB cap `tcb` in kernel
    /// output. The kernel reads the NUL-terminated name from the *calling*
    /// thread's IPC buffer message area, so this writes it there (truncated
    /// to [`MAX_THREAD_NAME_LEN`] bytes) before the call.
    ///
    /// # Panics
    /// If no IPC buffer was set.
    pub fn debug_name_thread(tcb: CPtr, name: &str) {
        pack_thread_name(&mut crate::ipc_buffer::ipc_buffer_mut().msg, name);
        raw_syscall(id::DEBUG_NAME_THREAD, tcb, 0, [0; 4]);
    }

    /// `seL4_BenchmarkResetLog`: (re)starts the kernel's per-thread CPU
    /// time accounting (our debug kernel has
    /// `CONFIG_BENCHMARK_TRACK_UTILISATION`, kernel-config/pc99-debug.h).
    pub fn benchmark_reset_log() {
        raw_syscall(id::BENCHMARK_RESET_LOG, 0, 0, [0; 4]);
    }

    /// `seL4_BenchmarkGetThreadUtilisation`: the CPU time (TSC cycles)
    /// the thread of TCB cap `tcb` ran since accounting started, which the
    /// kernel writes to the caller's IPC buffer (word 0).
    ///
    /// # Panics
    /// If no IPC buffer was set.
    pub fn benchmark_thread_utilisation(tcb: CPtr) -> u64 {
        raw_syscall(id::BENCHMARK_GET_THREAD_UTILISATION, tcb, 0, [0; 4]);
        crate::ipc_buffer::ipc_buffer_mut().msg[0]
    }
}

#[cfg(feature = "debug")]
pub use debug::*;

#[cfg(all(test, feature = "debug"))]
mod tests {
    use super::*;

    fn unpack(msg: &[Word; 120]) -> Vec<u8> {
        let bytes: Vec<u8> = msg.iter().flat_map(|w| w.to_ne_bytes()).collect();
        bytes[..bytes.iter().position(|&b| b == 0).expect("no terminator")].to_vec()
    }

    #[test]
    fn thread_names_are_nul_terminated_and_truncated() {
        let mut msg = [Word::MAX; 120];
        pack_thread_name(&mut msg, "uart-driver");
        assert_eq!(unpack(&msg), b"uart-driver");
        let mut msg = [Word::MAX; 120];
        pack_thread_name(&mut msg, "exactly8");
        assert_eq!(unpack(&msg), b"exactly8");
        let long = "x".repeat(2000);
        let mut msg = [Word::MAX; 120];
        pack_thread_name(&mut msg, &long);
        assert_eq!(unpack(&msg).len(), MAX_THREAD_NAME_LEN);
        assert_eq!(MAX_THREAD_NAME_LEN, 959);
    }

    #[test]
    fn syscall_numbers() {
        assert_eq!((id::CALL, id::REPLY_RECV, id::SEND, id::NB_SEND), (-1, -2, -3, -4));
        assert_eq!((id::RECV, id::REPLY, id::YIELD, id::NB_RECV), (-5, -6, -7, -8));
        assert_eq!((id::DEBUG_PUT_CHAR, id::DEBUG_HALT, id::DEBUG_CAP_IDENTIFY), (-9, -10, -11));
        assert_eq!((id::DEBUG_SNAPSHOT, id::DEBUG_NAME_THREAD), (-12, -13));
    }
}
