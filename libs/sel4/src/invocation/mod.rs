//! Kernel object invocations: `<object>_<method>` as in libsel4, parameters
//! in XML order (without the implicit `_service` cap first).
//!
//! Each wrapper encodes with [`encode`] and performs one [`invoke`]. The
//! IPC buffer must have been registered with
//! [`set_ipc_buffer`](crate::set_ipc_buffer) before any invocation that
//! sends more than four words or any extra cap, or reads more than four
//! reply words; otherwise the wrapper panics rather than write through null.

pub mod encode;
pub mod labels;

pub use encode::Invocation;

use crate::constants::MSG_REGISTERS;
use crate::ipc_buffer::ipc_buffer_mut;
use crate::types::{
    CPtr, CapRights, Error, MessageInfo, ObjectType, PrioProps, Result, UserContext, VmAttributes, Word,
};

/// A successful reply from the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The reply tag (label 0).
    pub info: MessageInfo,
    /// Reply MR0-3; further ones are in the IPC buffer.
    pub mrs: [Word; 4],
}

impl Reply {
    /// Reply message register `i`, from the registers or the IPC buffer.
    pub fn mr(&self, i: usize) -> Word {
        if i < MSG_REGISTERS {
            self.mrs[i]
        } else {
            ipc_buffer_mut().msg[i]
        }
    }
}

/// Sends an encoded invocation to `service` with `seL4_Call` and turns the
/// reply label into a result. On error the kernel's details (e.g. the
/// missing paging level, see
/// [`MAPPING_LOOKUP_LEVEL_MR`](crate::MAPPING_LOOKUP_LEVEL_MR)) are left in
/// the IPC buffer's message registers, readable with
/// [`get_mr`](crate::get_mr), as with libsel4.
// Always inlined: with the invocation known at the call site the word
// array, the IPC-buffer branch and the copies fold away for short messages.
#[inline(always)]
pub fn invoke(service: CPtr, inv: &Invocation) -> Result<Reply> {
    let words = inv.words();
    let caps = inv.caps();
    if words.len() > MSG_REGISTERS || !caps.is_empty() {
        let buf = ipc_buffer_mut();
        if words.len() > MSG_REGISTERS {
            buf.msg[MSG_REGISTERS..words.len()].copy_from_slice(&words[MSG_REGISTERS..]);
        }
        buf.caps_or_badges[..caps.len()].copy_from_slice(caps);
    }
    let mut mrs = [0; MSG_REGISTERS];
    let n = words.len().min(MSG_REGISTERS);
    mrs[..n].copy_from_slice(&words[..n]);
    let (info, out) = crate::syscalls::call_quietly(service, inv.info(), mrs);
    if let Err(e) = Error::check(info.label()) {
        // Error details start at MR0, which came back in registers; put them
        // where get_mr() finds them, as libsel4's stubs do.
        let p = crate::ipc_buffer::ipc_buffer();
        if !p.is_null() {
            // SAFETY: set_ipc_buffer's contract; the buffer is this thread's.
            unsafe { (&mut (*p).msg)[..MSG_REGISTERS].copy_from_slice(&out) };
        }
        return Err(e);
    }
    Ok(Reply { info, mrs: out })
}

#[inline]
fn invoke_unit(service: CPtr, inv: Invocation) -> Result<()> {
    invoke(service, &inv).map(|_| ())
}

// Untyped

/// `seL4_Untyped_Retype`: create `num_objects` objects of type `ty` from the
/// untyped `service`, with caps placed from slot `node_offset` of the CNode
/// at (`root`, `node_index`, `node_depth`). `node_depth` 0 means `root`
/// itself.
#[allow(clippy::too_many_arguments)]
pub fn untyped_retype(
    service: CPtr,
    ty: ObjectType,
    size_bits: Word,
    root: CPtr,
    node_index: Word,
    node_depth: Word,
    node_offset: Word,
    num_objects: Word,
) -> Result<()> {
    invoke_unit(service, encode::untyped_retype(ty, size_bits, root, node_index, node_depth, node_offset, num_objects))
}

// TCB

/// `seL4_TCB_ReadRegisters`: the first `count` registers of the thread
/// (the others are returned as 0), optionally suspending it first.
pub fn tcb_read_registers(service: CPtr, suspend_source: bool, arch_flags: u8, count: Word) -> Result<UserContext> {
    let r = invoke(service, &encode::tcb_read_registers(suspend_source, arch_flags, count))?;
    let n = (r.info.length() as usize).min(UserContext::LEN);
    let mut words = [0; UserContext::LEN];
    for (i, w) in words.iter_mut().enumerate().take(n) {
        *w = r.mr(i);
    }
    Ok(UserContext::from_words(&words))
}

/// `seL4_TCB_WriteRegisters`: set the first `count` registers from `regs`,
/// optionally resuming the thread.
pub fn tcb_write_registers(
    service: CPtr,
    resume_target: bool,
    arch_flags: u8,
    count: Word,
    regs: &UserContext,
) -> Result<()> {
    invoke_unit(service, encode::tcb_write_registers(resume_target, arch_flags, count, regs))
}

/// `seL4_TCB_CopyRegisters`: copy registers from `source` into `service`.
pub fn tcb_copy_registers(
    service: CPtr,
    source: CPtr,
    suspend_source: bool,
    resume_target: bool,
    transfer_frame: bool,
    transfer_integer: bool,
    arch_flags: u8,
) -> Result<()> {
    invoke_unit(
        service,
        encode::tcb_copy_registers(source, suspend_source, resume_target, transfer_frame, transfer_integer, arch_flags),
    )
}

/// `seL4_TCB_Configure` (5.0, non-MCS): fault endpoint (a CPtr resolved in
/// the configured thread's new CSpace), priority *and* MCP, CSpace root with
/// its guard data (0: leave the CNode's guard as is, else a
/// [`CapData::guard`](crate::CapData::guard) word), VSpace root (its data is
/// ignored on x86), IPC buffer address and frame cap.
#[allow(clippy::too_many_arguments)]
pub fn tcb_configure(
    service: CPtr,
    fault_ep: CPtr,
    priority: PrioProps,
    cspace_root: CPtr,
    cspace_root_data: Word,
    vspace_root: CPtr,
    vspace_root_data: Word,
    buffer: Word,
    buffer_frame: CPtr,
) -> Result<()> {
    invoke_unit(
        service,
        encode::tcb_configure(
            fault_ep,
            priority,
            cspace_root,
            cspace_root_data,
            vspace_root,
            vspace_root_data,
            buffer,
            buffer_frame,
        ),
    )
}

/// `seL4_TCB_SetPriority` (checked against the caller's MCP).
pub fn tcb_set_priority(service: CPtr, priority: u8) -> Result<()> {
    invoke_unit(service, encode::tcb_set_priority(priority))
}

/// `seL4_TCB_SetMCPriority`.
pub fn tcb_set_mc_priority(service: CPtr, mcp: u8) -> Result<()> {
    invoke_unit(service, encode::tcb_set_mc_priority(mcp))
}

/// `seL4_TCB_SetIPCBuffer`: `buffer` must be 512-byte aligned and mapped by
/// `buffer_frame` (a non-device frame).
pub fn tcb_set_ipc_buffer(service: CPtr, buffer: Word, buffer_frame: CPtr) -> Result<()> {
    invoke_unit(service, encode::tcb_set_ipc_buffer(buffer, buffer_frame))
}

/// `seL4_TCB_SetSpace`.
pub fn tcb_set_space(
    service: CPtr,
    fault_ep: CPtr,
    cspace_root: CPtr,
    cspace_root_data: Word,
    vspace_root: CPtr,
    vspace_root_data: Word,
) -> Result<()> {
    invoke_unit(service, encode::tcb_set_space(fault_ep, cspace_root, cspace_root_data, vspace_root, vspace_root_data))
}

/// `seL4_TCB_Suspend`.
pub fn tcb_suspend(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::tcb_suspend())
}

/// `seL4_TCB_Resume`.
pub fn tcb_resume(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::tcb_resume())
}

/// `seL4_TCB_BindNotification`: signals on `notification` wake the thread
/// while it waits on an endpoint.
pub fn tcb_bind_notification(service: CPtr, notification: CPtr) -> Result<()> {
    invoke_unit(service, encode::tcb_bind_notification(notification))
}

/// `seL4_TCB_UnbindNotification`.
pub fn tcb_unbind_notification(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::tcb_unbind_notification())
}

// CNode (service = CNode at the root of the CSpace the slots are in)

/// `seL4_CNode_Revoke`: delete all children of the cap at (index, depth).
pub fn cnode_revoke(service: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::cnode_revoke(index, depth))
}

/// `seL4_CNode_Delete`.
pub fn cnode_delete(service: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::cnode_delete(index, depth))
}

/// `seL4_CNode_CancelBadgedSends`.
pub fn cnode_cancel_badged_sends(service: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::cnode_cancel_badged_sends(index, depth))
}

/// `seL4_CNode_SaveCaller`: move the caller's reply cap into a slot.
pub fn cnode_save_caller(service: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::cnode_save_caller(index, depth))
}

/// `seL4_CNode_Copy`: copy with (possibly reduced) rights.
pub fn cnode_copy(
    service: CPtr,
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    rights: CapRights,
) -> Result<()> {
    invoke_unit(service, encode::cnode_copy(dest_index, dest_depth, src_root, src_index, src_depth, rights))
}

/// `seL4_CNode_Mint`: copy with rights and capability data `badge`: the
/// badge itself for endpoints and notifications (< 2^28), a
/// [`CapData::guard`](crate::CapData::guard) for CNodes, a
/// [`CapData::io_port_range`](crate::CapData::io_port_range) for I/O ports.
#[allow(clippy::too_many_arguments)]
pub fn cnode_mint(
    service: CPtr,
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    rights: CapRights,
    badge: Word,
) -> Result<()> {
    invoke_unit(service, encode::cnode_mint(dest_index, dest_depth, src_root, src_index, src_depth, rights, badge))
}

/// `seL4_CNode_Move`.
pub fn cnode_move(
    service: CPtr,
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
) -> Result<()> {
    invoke_unit(service, encode::cnode_move(dest_index, dest_depth, src_root, src_index, src_depth))
}

/// `seL4_CNode_Mutate`: move, applying capability data.
pub fn cnode_mutate(
    service: CPtr,
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    badge: Word,
) -> Result<()> {
    invoke_unit(service, encode::cnode_mutate(dest_index, dest_depth, src_root, src_index, src_depth, badge))
}

/// `seL4_CNode_Rotate`: pivot -> dest and src -> pivot, atomically.
#[allow(clippy::too_many_arguments)]
pub fn cnode_rotate(
    service: CPtr,
    dest_index: Word,
    dest_depth: u8,
    dest_badge: Word,
    pivot_root: CPtr,
    pivot_index: Word,
    pivot_depth: u8,
    pivot_badge: Word,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
) -> Result<()> {
    invoke_unit(
        service,
        encode::cnode_rotate(
            dest_index,
            dest_depth,
            dest_badge,
            pivot_root,
            pivot_index,
            pivot_depth,
            pivot_badge,
            src_root,
            src_index,
            src_depth,
        ),
    )
}

// IRQ

/// `seL4_IRQControl_Get`: the generic form, which this IOAPIC kernel
/// rejects with `IllegalOperation`; kept for completeness.
pub fn irq_control_get(service: CPtr, irq: i32, root: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::irq_control_get(irq, root, index, depth))
}

/// `seL4_IRQControl_GetIOAPIC`: route IOAPIC `ioapic` pin `pin`
/// (`level`: 1 = level-triggered, `polarity`: 1 = active low) to `vector`
/// (0..=[`VECTOR_MAX`](crate::VECTOR_MAX); the CPU vector is
/// `vector + IRQ_OFFSET`), and put the handler cap at (root, index, depth).
#[allow(clippy::too_many_arguments)]
pub fn irq_control_get_ioapic(
    service: CPtr,
    root: CPtr,
    index: Word,
    depth: Word,
    ioapic: Word,
    pin: Word,
    level: Word,
    polarity: Word,
    vector: Word,
) -> Result<()> {
    invoke_unit(service, encode::irq_control_get_ioapic(root, index, depth, ioapic, pin, level, polarity, vector))
}

/// `seL4_IRQControl_GetMSI`: a handler cap for MSI `vector` of PCI device
/// bus/dev/func (`handle` is opaque to this kernel, which has no interrupt
/// remapping; the device must be programmed with the CPU vector
/// `vector + IRQ_OFFSET` by its driver).
#[allow(clippy::too_many_arguments)]
pub fn irq_control_get_msi(
    service: CPtr,
    root: CPtr,
    index: Word,
    depth: Word,
    pci_bus: Word,
    pci_dev: Word,
    pci_func: Word,
    handle: Word,
    vector: Word,
) -> Result<()> {
    invoke_unit(service, encode::irq_control_get_msi(root, index, depth, pci_bus, pci_dev, pci_func, handle, vector))
}

/// `seL4_IRQHandler_Ack`: re-enable the interrupt after handling it.
pub fn irq_handler_ack(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::irq_handler_ack())
}

/// `seL4_IRQHandler_SetNotification`.
pub fn irq_handler_set_notification(service: CPtr, notification: CPtr) -> Result<()> {
    invoke_unit(service, encode::irq_handler_set_notification(notification))
}

/// `seL4_IRQHandler_Clear`.
pub fn irq_handler_clear(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::irq_handler_clear())
}

/// `seL4_DomainSet_Set`.
pub fn domain_set_set(service: CPtr, domain: u8, thread: CPtr) -> Result<()> {
    invoke_unit(service, encode::domain_set_set(domain, thread))
}

// x86 paging

/// `seL4_X86_PDPT_Map`: map the PDPT `service` into PML4 `pml4` at `vaddr`.
pub fn x86_pdpt_map(service: CPtr, pml4: CPtr, vaddr: Word, attr: VmAttributes) -> Result<()> {
    invoke_unit(service, encode::x86_pdpt_map(pml4, vaddr, attr))
}

/// `seL4_X86_PDPT_Unmap`.
pub fn x86_pdpt_unmap(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::x86_pdpt_unmap())
}

/// `seL4_X86_PageDirectory_Map`.
pub fn x86_page_directory_map(service: CPtr, vroot: CPtr, vaddr: Word, attr: VmAttributes) -> Result<()> {
    invoke_unit(service, encode::x86_page_directory_map(vroot, vaddr, attr))
}

/// `seL4_X86_PageDirectory_Unmap`.
pub fn x86_page_directory_unmap(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::x86_page_directory_unmap())
}

/// `seL4_X86_PageDirectory_GetStatusBits`: (accessed, dirty) of the page
/// mapped at `vaddr`.
pub fn x86_page_directory_get_status_bits(service: CPtr, vaddr: Word) -> Result<(Word, Word)> {
    let r = invoke(service, &encode::x86_page_directory_get_status_bits(vaddr))?;
    Ok((r.mrs[0], r.mrs[1]))
}

/// `seL4_X86_PageTable_Map`.
pub fn x86_page_table_map(service: CPtr, vroot: CPtr, vaddr: Word, attr: VmAttributes) -> Result<()> {
    invoke_unit(service, encode::x86_page_table_map(vroot, vaddr, attr))
}

/// `seL4_X86_PageTable_Unmap`.
pub fn x86_page_table_unmap(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::x86_page_table_unmap())
}

/// `seL4_X86_Page_Map`: map frame `service` at `vaddr` in `vroot`. If a
/// paging structure is missing the error is `FailedLookup` and reply MR
/// [`MAPPING_LOOKUP_LEVEL_MR`](crate::MAPPING_LOOKUP_LEVEL_MR) says which.
pub fn x86_page_map(service: CPtr, vroot: CPtr, vaddr: Word, rights: CapRights, attr: VmAttributes) -> Result<()> {
    invoke_unit(service, encode::x86_page_map(vroot, vaddr, rights, attr))
}

/// `seL4_X86_Page_Remap`.
pub fn x86_page_remap(service: CPtr, vroot: CPtr, rights: CapRights, attr: VmAttributes) -> Result<()> {
    invoke_unit(service, encode::x86_page_remap(vroot, rights, attr))
}

/// `seL4_X86_Page_Unmap`.
pub fn x86_page_unmap(service: CPtr) -> Result<()> {
    invoke_unit(service, encode::x86_page_unmap())
}

/// `seL4_X86_Page_GetAddress`: the frame's physical address.
pub fn x86_page_get_address(service: CPtr) -> Result<Word> {
    Ok(invoke(service, &encode::x86_page_get_address())?.mrs[0])
}

/// `seL4_X86_ASIDControl_MakePool`: turn a 4 KiB untyped into an ASID pool
/// whose cap goes to (root, index, depth).
pub fn x86_asid_control_make_pool(service: CPtr, untyped: CPtr, root: CPtr, index: Word, depth: u8) -> Result<()> {
    invoke_unit(service, encode::x86_asid_control_make_pool(untyped, root, index, depth))
}

/// `seL4_X86_ASIDPool_Assign`: give the PML4 `vroot` an ASID from pool
/// `service` (needed before anything can be mapped into it).
pub fn x86_asid_pool_assign(service: CPtr, vroot: CPtr) -> Result<()> {
    invoke_unit(service, encode::x86_asid_pool_assign(vroot))
}

// x86 I/O ports (service = an I/O port cap covering the port)

/// `seL4_X86_IOPort_In8`.
pub fn x86_io_port_in8(service: CPtr, port: u16) -> Result<u8> {
    Ok(invoke(service, &encode::x86_io_port_in8(port))?.mrs[0] as u8)
}

/// `seL4_X86_IOPort_In16`.
pub fn x86_io_port_in16(service: CPtr, port: u16) -> Result<u16> {
    Ok(invoke(service, &encode::x86_io_port_in16(port))?.mrs[0] as u16)
}

/// `seL4_X86_IOPort_In32`.
pub fn x86_io_port_in32(service: CPtr, port: u16) -> Result<u32> {
    Ok(invoke(service, &encode::x86_io_port_in32(port))?.mrs[0] as u32)
}

/// `seL4_X86_IOPort_Out8`.
pub fn x86_io_port_out8(service: CPtr, port: u16, data: u8) -> Result<()> {
    invoke_unit(service, encode::x86_io_port_out8(port, data))
}

/// `seL4_X86_IOPort_Out16`.
pub fn x86_io_port_out16(service: CPtr, port: u16, data: u16) -> Result<()> {
    invoke_unit(service, encode::x86_io_port_out16(port, data))
}

/// `seL4_X86_IOPort_Out32`.
pub fn x86_io_port_out32(service: CPtr, port: u16, data: u32) -> Result<()> {
    invoke_unit(service, encode::x86_io_port_out32(port, data))
}
