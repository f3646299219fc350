//! Proof that the bindings work against the real kernel: a second thread,
//! built from untyped memory, answering IPC in the root task's address space.

use crate::objects::{AllocError, ObjectAllocator, Retype};
use crate::vspace::{self, MapError};
use component_runtime::log;
use core::fmt::Write;
use sel4::{CapRights, MessageInfo, ObjectType, Word};

/// Where the worker's IPC buffer is mapped: far from the root task's image,
/// so the mapping needs a page table of its own (exercising PageTable_Map).
const WORKER_IPC_BUFFER: Word = 0x1000_0000;
/// Badge on the root task's copy of the endpoint; the worker must see it.
const CLIENT_BADGE: Word = 0x10_117e;
/// Message labels of the little protocol between the root task and worker.
const LABEL_SUM: Word = 1;
const LABEL_CHECKSUM_LONG: Word = 2;
/// Words in the long message: more than the four registers carry.
const LONG_WORDS: usize = 12;
const WORKER_PRIORITY: u8 = 200;
const WORKER_STACK_BYTES: usize = 16 * 1024;

#[repr(C, align(16))]
struct Stack([u8; WORKER_STACK_BYTES]);
static mut WORKER_STACK: Stack = Stack([0; WORKER_STACK_BYTES]);

/// Why the self-test failed.
#[derive(Debug)]
pub enum Failure {
    Alloc(AllocError),
    Map(MapError),
    Invocation(&'static str, sel4::Error),
    WrongReply(&'static str, [Word; 4]),
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Failure::Alloc(e) => write!(f, "allocation: {e}"),
            Failure::Map(e) => write!(f, "mapping the worker's IPC buffer: {e}"),
            Failure::Invocation(what, e) => write!(f, "{what}: {e:?}"),
            Failure::WrongReply(what, mrs) => write!(f, "{what}: unexpected reply {mrs:x?}"),
        }
    }
}

impl From<AllocError> for Failure {
    fn from(e: AllocError) -> Self {
        Failure::Alloc(e)
    }
}

fn invoke(what: &'static str, result: sel4::Result<()>) -> Result<(), Failure> {
    result.map_err(|e| Failure::Invocation(what, e))
}

/// Builds the worker thread, then runs both IPC round trips and checks them.
pub fn thread_and_ipc(objects: &mut ObjectAllocator<'_>) -> Result<(), Failure> {
    let tcb = objects.object(ObjectType::Tcb, 0)?;
    let endpoint = objects.object(ObjectType::Endpoint, 0)?;
    let ipc_frame = objects.object(ObjectType::X86_4K, 0)?;
    vspace::map_frame(
        objects,
        sel4::CAP_INIT_THREAD_VSPACE,
        ipc_frame,
        WORKER_IPC_BUFFER,
        CapRights::read_write(),
        sel4::VmAttributes::DEFAULT,
    )
    .map_err(Failure::Map)?;

    // The root task calls through a badged copy; the worker receives on the
    // original, so the badge it sees proves CNode_Mint.
    let client = objects.slot()?;
    invoke(
        "CNode_Mint",
        sel4::cnode_mint(
            sel4::CAP_INIT_THREAD_CNODE,
            client,
            64,
            sel4::CAP_INIT_THREAD_CNODE,
            endpoint,
            64,
            CapRights::all(),
            CLIENT_BADGE,
        ),
    )?;

    invoke(
        "TCB_Configure",
        sel4::tcb_configure(
            tcb,
            0, // no fault endpoint: a debug kernel prints the fault instead
            sel4::PrioProps::new(0, WORKER_PRIORITY),
            sel4::CAP_INIT_THREAD_CNODE,
            0,
            sel4::CAP_INIT_THREAD_VSPACE,
            0,
            WORKER_IPC_BUFFER,
            ipc_frame,
        ),
    )?;

    let stack_top = core::ptr::addr_of!(WORKER_STACK) as Word + WORKER_STACK_BYTES as Word;
    let regs = sel4::UserContext {
        rip: worker_main as *const () as Word,
        // As if `call` had pushed a return address: rsp + 8 is 16-byte aligned.
        rsp: stack_top - 8,
        rdi: endpoint,
        rsi: WORKER_IPC_BUFFER,
        ..Default::default()
    };
    invoke("TCB_WriteRegisters", sel4::tcb_write_registers(tcb, false, 0, sel4::UserContext::WORDS, &regs))?;
    #[cfg(feature = "debug")]
    sel4::debug_name_thread(tcb, "worker");
    invoke("TCB_Resume", sel4::tcb_resume(tcb))?;
    log!("worker thread started (TCB, endpoint and IPC buffer retyped from untyped memory)");

    // Round trip 1: four words in registers.
    let words = [3, 5, 7, 11];
    let (reply, mrs) = sel4::call(client, MessageInfo::new(LABEL_SUM, 0, 0, 4), words);
    let expected_sum: Word = words.iter().sum();
    if reply.label() != 0 || reply.length() != 2 || mrs[0] != expected_sum || mrs[1] != CLIENT_BADGE {
        return Err(Failure::WrongReply("short message", mrs));
    }

    // Round trip 2: a message longer than the registers, so the kernel
    // copies words 4.. from our IPC buffer into the worker's.
    let long: [Word; LONG_WORDS] = core::array::from_fn(|i| 0x1000 + (i as Word) * 3);
    // SAFETY: our IPC buffer is mapped and used by this thread only.
    let buffer = unsafe { &mut *sel4::ipc_buffer() };
    buffer.msg[4..LONG_WORDS].copy_from_slice(&long[4..]);
    let info = MessageInfo::new(LABEL_CHECKSUM_LONG, 0, 0, LONG_WORDS as Word);
    let (reply, mrs) = sel4::call(client, info, [long[0], long[1], long[2], long[3]]);
    if reply.label() != 0 || mrs[0] != checksum(&long) || mrs[1] != LONG_WORDS as Word {
        return Err(Failure::WrongReply("long message", mrs));
    }
    log!(
        "ipc: round trip OK (sum {} and badge {:#x} in registers; checksum {:#x} of {} words through the IPC buffers)",
        expected_sum,
        CLIENT_BADGE,
        mrs[0],
        LONG_WORDS
    );
    Ok(())
}

/// Order-sensitive, so a word copied to the wrong place changes the result.
fn checksum(words: &[Word]) -> Word {
    words.iter().fold(0, |acc: Word, w| acc.rotate_left(7) ^ w)
}

/// The worker: answers requests on `endpoint` forever. It shares the root
/// task's address space but has its own stack and IPC buffer, whose address
/// arrives in `ipc_buffer` (the bindings' global IPC-buffer pointer belongs to
/// the root task's thread).
extern "C" fn worker_main(endpoint: Word, ipc_buffer: Word) -> ! {
    let _ = writeln!(component_runtime::console::Console, "[worker] running");
    let buffer = ipc_buffer as *const sel4::IpcBuffer;
    let (mut info, mut badge, mut mrs) = sel4::recv(endpoint);
    loop {
        let (reply, words) = match info.label() {
            LABEL_SUM => {
                let n = (info.length() as usize).min(4);
                (MessageInfo::new(0, 0, 0, 2), [mrs[..n].iter().sum(), badge, 0, 0])
            }
            LABEL_CHECKSUM_LONG => {
                let n = (info.length() as usize).min(LONG_WORDS);
                let mut all = [0 as Word; LONG_WORDS];
                all[..4].copy_from_slice(&mrs);
                // SAFETY: the kernel wrote the words past the fourth into our
                // IPC buffer before waking us.
                all[4..n].copy_from_slice(unsafe { &(&(*buffer).msg)[4..n] });
                (MessageInfo::new(0, 0, 0, 2), [checksum(&all[..n]), n as Word, 0, 0])
            }
            _ => (MessageInfo::new(1, 0, 0, 0), [0; 4]),
        };
        (info, badge, mrs) = sel4::reply_recv(endpoint, reply, words);
    }
}
