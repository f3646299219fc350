//! The pure half of each invocation: label, message words and extra caps,
//! without any system call, so the encodings can be tested on the host.
//!
//! Packing follows `syscall_stub_gen.py` of 5.0: capability-typed
//! parameters (`seL4_CPtr`, `seL4_CNode`, `seL4_TCB`, `seL4_Untyped`,
//! `seL4_X64_PML4`, ...) become extra caps in order, all other parameters
//! are packed into words in order, each aligned to its own size (or to a
//! word if larger): so a `seL4_Bool` takes 1 bit, a following `seL4_Uint8`
//! starts at bit 8 of the same word, and a following `seL4_Word` starts a
//! new word. The service cap is the syscall's destination, not part of this.
//!
//! Capability data (`seL4_CapData_t`: badges, guards, port ranges) is a
//! plain word in 5.0's ABI and is taken as a [`Word`]; build it with
//! [`CapData`](crate::CapData) when the layout matters (guards, port ranges).

use super::labels;
use crate::types::{CPtr, CapRights, MessageInfo, ObjectType, PrioProps, UserContext, VmAttributes, Word};

/// Most words any invocation sends: TCB_WriteRegisters (2 + 19).
pub const MAX_WORDS: usize = 2 + UserContext::WORDS as usize;

/// An encoded invocation: what goes into the message tag, the message
/// registers and the extra-cap slots of the IPC buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    label: Word,
    words: [Word; MAX_WORDS],
    len: usize,
    caps: [CPtr; 3],
    ncaps: usize,
}

impl Invocation {
    /// An invocation with `label`, no words and no caps.
    pub const fn new(label: Word) -> Self {
        Invocation { label, words: [0; MAX_WORDS], len: 0, caps: [0; 3], ncaps: 0 }
    }

    /// Appends a message word.
    ///
    /// # Panics
    /// After [`MAX_WORDS`] words.
    pub const fn word(mut self, w: Word) -> Self {
        self.words[self.len] = w;
        self.len += 1;
        self
    }

    /// Appends an extra cap.
    ///
    /// # Panics
    /// After 3 caps.
    pub const fn cap(mut self, c: CPtr) -> Self {
        self.caps[self.ncaps] = c;
        self.ncaps += 1;
        self
    }

    /// The invocation label.
    pub const fn label(&self) -> Word {
        self.label
    }

    /// The message tag: label, no unwrapped caps, the cap and word counts.
    pub const fn info(&self) -> MessageInfo {
        MessageInfo::new(self.label, 0, self.ncaps as Word, self.len as Word)
    }

    /// The message words; MR0-3 travel in registers, the rest in the IPC
    /// buffer.
    pub fn words(&self) -> &[Word] {
        &self.words[..self.len]
    }

    /// The extra caps (`caps_or_badges` of the IPC buffer).
    pub fn caps(&self) -> &[CPtr] {
        &self.caps[..self.ncaps]
    }
}

const fn flag(b: bool, bit: u32) -> Word {
    (b as Word) << bit
}

// Untyped

/// `seL4_Untyped_Retype`.
pub const fn untyped_retype(
    ty: ObjectType,
    size_bits: Word,
    root: CPtr,
    node_index: Word,
    node_depth: Word,
    node_offset: Word,
    num_objects: Word,
) -> Invocation {
    Invocation::new(labels::UNTYPED_RETYPE)
        .word(ty.into_word())
        .word(size_bits)
        .cap(root)
        .word(node_index)
        .word(node_depth)
        .word(node_offset)
        .word(num_objects)
}

// TCB

/// `seL4_TCB_ReadRegisters`: suspend_source is bit 0 and arch_flags bits
/// 8..16 of MR0, count is MR1.
pub const fn tcb_read_registers(suspend_source: bool, arch_flags: u8, count: Word) -> Invocation {
    Invocation::new(labels::TCB_READ_REGISTERS).word(flag(suspend_source, 0) | (arch_flags as Word) << 8).word(count)
}

/// `seL4_TCB_WriteRegisters`: like ReadRegisters, then all 19 registers
/// (always sent in full, whatever `count` is, as libsel4 does).
pub const fn tcb_write_registers(resume_target: bool, arch_flags: u8, count: Word, regs: &UserContext) -> Invocation {
    let mut inv = Invocation::new(labels::TCB_WRITE_REGISTERS)
        .word(flag(resume_target, 0) | (arch_flags as Word) << 8)
        .word(count);
    let words = regs.to_words();
    let mut i = 0;
    while i < words.len() {
        inv = inv.word(words[i]);
        i += 1;
    }
    inv
}

/// `seL4_TCB_CopyRegisters`: the four flags are bits 0-3, arch_flags bits
/// 8..16 of MR0.
pub const fn tcb_copy_registers(
    source: CPtr,
    suspend_source: bool,
    resume_target: bool,
    transfer_frame: bool,
    transfer_integer: bool,
    arch_flags: u8,
) -> Invocation {
    Invocation::new(labels::TCB_COPY_REGISTERS).cap(source).word(
        flag(suspend_source, 0)
            | flag(resume_target, 1)
            | flag(transfer_frame, 2)
            | flag(transfer_integer, 3)
            | (arch_flags as Word) << 8,
    )
}

/// `seL4_TCB_Configure`. `fault_ep` is a CPtr in the *configured* thread's
/// CSpace, passed as a plain word (not an extra cap).
#[allow(clippy::too_many_arguments)]
pub const fn tcb_configure(
    fault_ep: CPtr,
    priority: PrioProps,
    cspace_root: CPtr,
    cspace_root_data: Word,
    vspace_root: CPtr,
    vspace_root_data: Word,
    buffer: Word,
    buffer_frame: CPtr,
) -> Invocation {
    Invocation::new(labels::TCB_CONFIGURE)
        .word(fault_ep)
        .word(priority.into_word())
        .cap(cspace_root)
        .word(cspace_root_data)
        .cap(vspace_root)
        .word(vspace_root_data)
        .word(buffer)
        .cap(buffer_frame)
}

/// `seL4_TCB_SetPriority`.
pub const fn tcb_set_priority(priority: u8) -> Invocation {
    Invocation::new(labels::TCB_SET_PRIORITY).word(priority as Word)
}

/// `seL4_TCB_SetMCPriority`.
pub const fn tcb_set_mc_priority(mcp: u8) -> Invocation {
    Invocation::new(labels::TCB_SET_MC_PRIORITY).word(mcp as Word)
}

/// `seL4_TCB_SetIPCBuffer`.
pub const fn tcb_set_ipc_buffer(buffer: Word, buffer_frame: CPtr) -> Invocation {
    Invocation::new(labels::TCB_SET_IPC_BUFFER).word(buffer).cap(buffer_frame)
}

/// `seL4_TCB_SetSpace`.
pub const fn tcb_set_space(
    fault_ep: CPtr,
    cspace_root: CPtr,
    cspace_root_data: Word,
    vspace_root: CPtr,
    vspace_root_data: Word,
) -> Invocation {
    Invocation::new(labels::TCB_SET_SPACE)
        .word(fault_ep)
        .cap(cspace_root)
        .word(cspace_root_data)
        .cap(vspace_root)
        .word(vspace_root_data)
}

/// `seL4_TCB_Suspend`.
pub const fn tcb_suspend() -> Invocation {
    Invocation::new(labels::TCB_SUSPEND)
}

/// `seL4_TCB_Resume`.
pub const fn tcb_resume() -> Invocation {
    Invocation::new(labels::TCB_RESUME)
}

/// `seL4_TCB_BindNotification`.
pub const fn tcb_bind_notification(notification: CPtr) -> Invocation {
    Invocation::new(labels::TCB_BIND_NOTIFICATION).cap(notification)
}

/// `seL4_TCB_UnbindNotification`.
pub const fn tcb_unbind_notification() -> Invocation {
    Invocation::new(labels::TCB_UNBIND_NOTIFICATION)
}

// CNode

const fn cnode_slot(label: Word, index: Word, depth: u8) -> Invocation {
    Invocation::new(label).word(index).word(depth as Word)
}

/// `seL4_CNode_Revoke`.
pub const fn cnode_revoke(index: Word, depth: u8) -> Invocation {
    cnode_slot(labels::CNODE_REVOKE, index, depth)
}

/// `seL4_CNode_Delete`.
pub const fn cnode_delete(index: Word, depth: u8) -> Invocation {
    cnode_slot(labels::CNODE_DELETE, index, depth)
}

/// `seL4_CNode_CancelBadgedSends`.
pub const fn cnode_cancel_badged_sends(index: Word, depth: u8) -> Invocation {
    cnode_slot(labels::CNODE_CANCEL_BADGED_SENDS, index, depth)
}

/// `seL4_CNode_SaveCaller`.
pub const fn cnode_save_caller(index: Word, depth: u8) -> Invocation {
    cnode_slot(labels::CNODE_SAVE_CALLER, index, depth)
}

const fn cnode_two_slots(
    label: Word,
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
) -> Invocation {
    Invocation::new(label)
        .word(dest_index)
        .word(dest_depth as Word)
        .cap(src_root)
        .word(src_index)
        .word(src_depth as Word)
}

/// `seL4_CNode_Copy`.
pub const fn cnode_copy(
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    rights: CapRights,
) -> Invocation {
    cnode_two_slots(labels::CNODE_COPY, dest_index, dest_depth, src_root, src_index, src_depth).word(rights.into_word())
}

/// `seL4_CNode_Mint`.
pub const fn cnode_mint(
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    rights: CapRights,
    badge: Word,
) -> Invocation {
    cnode_two_slots(labels::CNODE_MINT, dest_index, dest_depth, src_root, src_index, src_depth)
        .word(rights.into_word())
        .word(badge)
}

/// `seL4_CNode_Move`.
pub const fn cnode_move(
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
) -> Invocation {
    cnode_two_slots(labels::CNODE_MOVE, dest_index, dest_depth, src_root, src_index, src_depth)
}

/// `seL4_CNode_Mutate`.
pub const fn cnode_mutate(
    dest_index: Word,
    dest_depth: u8,
    src_root: CPtr,
    src_index: Word,
    src_depth: u8,
    badge: Word,
) -> Invocation {
    cnode_two_slots(labels::CNODE_MUTATE, dest_index, dest_depth, src_root, src_index, src_depth).word(badge)
}

/// `seL4_CNode_Rotate`.
#[allow(clippy::too_many_arguments)]
pub const fn cnode_rotate(
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
) -> Invocation {
    Invocation::new(labels::CNODE_ROTATE)
        .word(dest_index)
        .word(dest_depth as Word)
        .word(dest_badge)
        .cap(pivot_root)
        .word(pivot_index)
        .word(pivot_depth as Word)
        .word(pivot_badge)
        .cap(src_root)
        .word(src_index)
        .word(src_depth as Word)
}

// IRQ

/// `seL4_IRQControl_Get` (the generic form; an IOAPIC kernel like ours
/// answers IllegalOperation, use [`irq_control_get_ioapic`]). `irq` is a C
/// `int`: 32 bits in the low half of MR0.
pub const fn irq_control_get(irq: i32, root: CPtr, index: Word, depth: u8) -> Invocation {
    Invocation::new(labels::IRQ_ISSUE_IRQ_HANDLER).word(irq as u32 as Word).cap(root).word(index).word(depth as Word)
}

/// `seL4_IRQControl_GetIOAPIC`.
#[allow(clippy::too_many_arguments)]
pub const fn irq_control_get_ioapic(
    root: CPtr,
    index: Word,
    depth: Word,
    ioapic: Word,
    pin: Word,
    level: Word,
    polarity: Word,
    vector: Word,
) -> Invocation {
    Invocation::new(labels::X86_IRQ_ISSUE_IRQ_HANDLER_IOAPIC)
        .cap(root)
        .word(index)
        .word(depth)
        .word(ioapic)
        .word(pin)
        .word(level)
        .word(polarity)
        .word(vector)
}

/// `seL4_IRQControl_GetMSI`.
#[allow(clippy::too_many_arguments)]
pub const fn irq_control_get_msi(
    root: CPtr,
    index: Word,
    depth: Word,
    pci_bus: Word,
    pci_dev: Word,
    pci_func: Word,
    handle: Word,
    vector: Word,
) -> Invocation {
    Invocation::new(labels::X86_IRQ_ISSUE_IRQ_HANDLER_MSI)
        .cap(root)
        .word(index)
        .word(depth)
        .word(pci_bus)
        .word(pci_dev)
        .word(pci_func)
        .word(handle)
        .word(vector)
}

/// `seL4_IRQHandler_Ack`.
pub const fn irq_handler_ack() -> Invocation {
    Invocation::new(labels::IRQ_ACK_IRQ)
}

/// `seL4_IRQHandler_SetNotification`.
pub const fn irq_handler_set_notification(notification: CPtr) -> Invocation {
    Invocation::new(labels::IRQ_SET_IRQ_HANDLER).cap(notification)
}

/// `seL4_IRQHandler_Clear`.
pub const fn irq_handler_clear() -> Invocation {
    Invocation::new(labels::IRQ_CLEAR_IRQ_HANDLER)
}

// Domains

/// `seL4_DomainSet_Set`.
pub const fn domain_set_set(domain: u8, thread: CPtr) -> Invocation {
    Invocation::new(labels::DOMAIN_SET_SET).word(domain as Word).cap(thread)
}

// x86 paging

const fn map_table(label: Word, vroot: CPtr, vaddr: Word, attr: VmAttributes) -> Invocation {
    Invocation::new(label).cap(vroot).word(vaddr).word(attr.into_word())
}

/// `seL4_X86_PDPT_Map` (into a PML4).
pub const fn x86_pdpt_map(pml4: CPtr, vaddr: Word, attr: VmAttributes) -> Invocation {
    map_table(labels::X86_PDPT_MAP, pml4, vaddr, attr)
}

/// `seL4_X86_PDPT_Unmap`.
pub const fn x86_pdpt_unmap() -> Invocation {
    Invocation::new(labels::X86_PDPT_UNMAP)
}

/// `seL4_X86_PageDirectory_Map`.
pub const fn x86_page_directory_map(vroot: CPtr, vaddr: Word, attr: VmAttributes) -> Invocation {
    map_table(labels::X86_PAGE_DIRECTORY_MAP, vroot, vaddr, attr)
}

/// `seL4_X86_PageDirectory_Unmap`.
pub const fn x86_page_directory_unmap() -> Invocation {
    Invocation::new(labels::X86_PAGE_DIRECTORY_UNMAP)
}

/// `seL4_X86_PageDirectory_GetStatusBits`.
pub const fn x86_page_directory_get_status_bits(vaddr: Word) -> Invocation {
    Invocation::new(labels::X86_PAGE_DIRECTORY_GET_STATUS_BITS).word(vaddr)
}

/// `seL4_X86_PageTable_Map`.
pub const fn x86_page_table_map(vroot: CPtr, vaddr: Word, attr: VmAttributes) -> Invocation {
    map_table(labels::X86_PAGE_TABLE_MAP, vroot, vaddr, attr)
}

/// `seL4_X86_PageTable_Unmap`.
pub const fn x86_page_table_unmap() -> Invocation {
    Invocation::new(labels::X86_PAGE_TABLE_UNMAP)
}

/// `seL4_X86_IOPageTable_Map` (needs an IOMMU, which this kernel lacks).
pub const fn x86_io_page_table_map(iospace: CPtr, ioaddr: Word) -> Invocation {
    Invocation::new(labels::X86_IO_PAGE_TABLE_MAP).cap(iospace).word(ioaddr)
}

/// `seL4_X86_IOPageTable_Unmap`.
pub const fn x86_io_page_table_unmap() -> Invocation {
    Invocation::new(labels::X86_IO_PAGE_TABLE_UNMAP)
}

/// `seL4_X86_Page_Map`.
pub const fn x86_page_map(vroot: CPtr, vaddr: Word, rights: CapRights, attr: VmAttributes) -> Invocation {
    Invocation::new(labels::X86_PAGE_MAP).cap(vroot).word(vaddr).word(rights.into_word()).word(attr.into_word())
}

/// `seL4_X86_Page_Remap`: change rights/attributes of a mapped page.
pub const fn x86_page_remap(vroot: CPtr, rights: CapRights, attr: VmAttributes) -> Invocation {
    Invocation::new(labels::X86_PAGE_REMAP).cap(vroot).word(rights.into_word()).word(attr.into_word())
}

/// `seL4_X86_Page_Unmap`.
pub const fn x86_page_unmap() -> Invocation {
    Invocation::new(labels::X86_PAGE_UNMAP)
}

/// `seL4_X86_Page_MapIO` (needs an IOMMU, which this kernel lacks).
pub const fn x86_page_map_io(iospace: CPtr, rights: CapRights, ioaddr: Word) -> Invocation {
    Invocation::new(labels::X86_PAGE_MAP_IO).cap(iospace).word(rights.into_word()).word(ioaddr)
}

/// `seL4_X86_Page_GetAddress`; the reply's MR0 is the physical address.
pub const fn x86_page_get_address() -> Invocation {
    Invocation::new(labels::X86_PAGE_GET_ADDRESS)
}

/// `seL4_X86_ASIDControl_MakePool`.
pub const fn x86_asid_control_make_pool(untyped: CPtr, root: CPtr, index: Word, depth: u8) -> Invocation {
    Invocation::new(labels::X86_ASID_CONTROL_MAKE_POOL).cap(untyped).cap(root).word(index).word(depth as Word)
}

/// `seL4_X86_ASIDPool_Assign`.
pub const fn x86_asid_pool_assign(vroot: CPtr) -> Invocation {
    Invocation::new(labels::X86_ASID_POOL_ASSIGN).cap(vroot)
}

// x86 I/O ports

/// `seL4_X86_IOPort_In8`; the reply's MR0 holds the value.
pub const fn x86_io_port_in8(port: u16) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_IN8).word(port as Word)
}

/// `seL4_X86_IOPort_In16`.
pub const fn x86_io_port_in16(port: u16) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_IN16).word(port as Word)
}

/// `seL4_X86_IOPort_In32`.
pub const fn x86_io_port_in32(port: u16) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_IN32).word(port as Word)
}

/// `seL4_X86_IOPort_Out8` (port and data are full words in 5.0's XML).
pub const fn x86_io_port_out8(port: u16, data: u8) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_OUT8).word(port as Word).word(data as Word)
}

/// `seL4_X86_IOPort_Out16`.
pub const fn x86_io_port_out16(port: u16, data: u16) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_OUT16).word(port as Word).word(data as Word)
}

/// `seL4_X86_IOPort_Out32`.
pub const fn x86_io_port_out32(port: u16, data: u32) -> Invocation {
    Invocation::new(labels::X86_IO_PORT_OUT32).word(port as Word).word(data as Word)
}

#[cfg(test)]
mod tests {
    //! Encodings worked out by hand from the 5.0 XML and the stub
    //! generator's rules; `tests/kernel_abi.rs` checks all of them
    //! mechanically against the kernel tree.
    use super::*;
    use crate::types::CapData;

    #[test]
    fn untyped_retype_root_is_extra_cap_and_six_words_follow() {
        let inv = untyped_retype(ObjectType::Tcb, 0, 2, 0, 0, 300, 4);
        assert_eq!(inv.label(), 1);
        assert_eq!(inv.caps(), &[2]);
        assert_eq!(inv.words(), &[1, 0, 0, 0, 300, 4]);
        assert_eq!(inv.info(), MessageInfo::new(1, 0, 1, 6));
        assert_eq!(inv.info().into_word(), (1 << 12) | (1 << 7) | 6);
    }

    #[test]
    fn page_map_vroot_is_cap_then_vaddr_rights_attr() {
        let inv = x86_page_map(3, 0x40_0000, CapRights::read_write(), VmAttributes::CacheDisabled);
        assert_eq!(inv.label(), 37);
        assert_eq!(inv.caps(), &[3]);
        assert_eq!(inv.words(), &[0x40_0000, 3, 2]);
        assert_eq!(inv.info(), MessageInfo::new(37, 0, 1, 3));
    }

    #[test]
    fn bool_and_u8_share_a_word() {
        // seL4_Bool at bit 0, seL4_Uint8 aligned up to bit 8, then a new word.
        let inv = tcb_read_registers(true, 0xff, 19);
        assert_eq!(inv.words(), &[0xff01, 19]);
        let inv = tcb_copy_registers(9, false, true, false, true, 1);
        assert_eq!(inv.words(), &[0b1010 | 1 << 8]);
        assert_eq!(inv.caps(), &[9]);
    }

    #[test]
    fn write_registers_sends_all_nineteen() {
        let regs = UserContext { rip: 0x40_1000, rsp: 0x7fff_0000, tls_base: 0x9000, ..Default::default() };
        let inv = tcb_write_registers(true, 0, 2, &regs);
        assert_eq!(inv.info(), MessageInfo::new(3, 0, 0, 21));
        assert_eq!(&inv.words()[..4], &[1, 2, 0x40_1000, 0x7fff_0000]);
        assert_eq!(inv.words()[20], 0x9000);
    }

    #[test]
    fn configure_has_three_caps_and_five_words() {
        let inv = tcb_configure(0x10, PrioProps::new(255, 100), 2, 0, 3, 0, 0x7000, 10);
        assert_eq!(inv.label(), 5);
        assert_eq!(inv.caps(), &[2, 3, 10]);
        assert_eq!(inv.words(), &[0x10, (255 << 8) | 100, 0, 0, 0x7000]);
    }

    #[test]
    fn cnode_depths_take_whole_words() {
        let inv = cnode_mint(0x100, 16, 2, 0x5, 16, CapRights::all(), CapData::badge(7).into_word());
        assert_eq!(inv.label(), 18);
        assert_eq!(inv.caps(), &[2]);
        assert_eq!(inv.words(), &[0x100, 16, 0x5, 16, 7, 7]);
        let inv = cnode_delete(0x100, 16);
        assert_eq!((inv.label(), inv.words()), (15, &[0x100, 16][..]));
    }

    #[test]
    fn irq_and_io_port_layouts() {
        let inv = irq_control_get_ioapic(2, 0x200, 16, 0, 4, 0, 0, 4);
        assert_eq!(inv.label(), 50);
        assert_eq!(inv.caps(), &[2]);
        assert_eq!(inv.words(), &[0x200, 16, 0, 4, 0, 0, 4]);
        let inv = irq_control_get_msi(2, 0x201, 16, 0, 3, 0, 0, 5);
        assert_eq!((inv.label(), inv.words().len()), (51, 7));
        assert_eq!(irq_handler_set_notification(0x44).caps(), &[0x44]);
        assert_eq!(irq_handler_ack().info(), MessageInfo::new(24, 0, 0, 0));
        let inv = x86_io_port_out8(0x3f8, b'A');
        assert_eq!((inv.label(), inv.words()), (47, &[0x3f8, 0x41][..]));
        assert_eq!(x86_io_port_in32(0xcfc).info(), MessageInfo::new(46, 0, 0, 1));
    }

    #[test]
    fn asid_make_pool_has_untyped_then_root() {
        let inv = x86_asid_control_make_pool(0x30, 2, 0x31, 16);
        assert_eq!(inv.label(), 42);
        assert_eq!(inv.caps(), &[0x30, 2]);
        assert_eq!(inv.words(), &[0x31, 16]);
        assert_eq!(x86_asid_pool_assign(0x40).caps(), &[0x40]);
    }
}
