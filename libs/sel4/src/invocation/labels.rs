//! Invocation labels of seL4 5.0.0 for this configuration.
//!
//! `invocation_header_gen.py` numbers the methods of `sel4.xml` from 1
//! (0 is `InvalidInvocation`), then continues with x86_64's `sel4arch.xml`
//! and then x86's `sel4arch.xml`, in document order. Methods with a
//! `condition` exist only when it holds, and then shift everything after
//! them; with `CONFIG_MAX_NUM_NODES` = 1 and no `CONFIG_HARDWARE_DEBUG_API`
//! or `CONFIG_VTX`, TCB_SetAffinity, the four breakpoint methods,
//! X86Page_MapEPT and the VCPU/EPT methods are absent. The host test
//! `tests/kernel_abi.rs` re-derives every number from the XML.

use crate::types::Word;

macro_rules! labels {
    ($($(#[$doc:meta])* $name:ident = $value:expr, $xml:literal;)*) => {
        $($(#[$doc])* pub const $name: Word = $value;)*

        /// Every label above with the XML method `id` it stands for.
        pub const ALL: &[(&str, Word)] = &[$(($xml, $name)),*];
    };
}

labels! {
    /// `UntypedRetype`
    UNTYPED_RETYPE = 1, "UntypedRetype";
    /// `TCBReadRegisters`
    TCB_READ_REGISTERS = 2, "TCBReadRegisters";
    /// `TCBWriteRegisters`
    TCB_WRITE_REGISTERS = 3, "TCBWriteRegisters";
    /// `TCBCopyRegisters`
    TCB_COPY_REGISTERS = 4, "TCBCopyRegisters";
    /// `TCBConfigure`
    TCB_CONFIGURE = 5, "TCBConfigure";
    /// `TCBSetPriority`
    TCB_SET_PRIORITY = 6, "TCBSetPriority";
    /// `TCBSetMCPriority`
    TCB_SET_MC_PRIORITY = 7, "TCBSetMCPriority";
    /// `TCBSetIPCBuffer`
    TCB_SET_IPC_BUFFER = 8, "TCBSetIPCBuffer";
    /// `TCBSetSpace`
    TCB_SET_SPACE = 9, "TCBSetSpace";
    /// `TCBSuspend`
    TCB_SUSPEND = 10, "TCBSuspend";
    /// `TCBResume`
    TCB_RESUME = 11, "TCBResume";
    /// `TCBBindNotification`
    TCB_BIND_NOTIFICATION = 12, "TCBBindNotification";
    /// `TCBUnbindNotification`
    TCB_UNBIND_NOTIFICATION = 13, "TCBUnbindNotification";
    /// `CNodeRevoke`
    CNODE_REVOKE = 14, "CNodeRevoke";
    /// `CNodeDelete`
    CNODE_DELETE = 15, "CNodeDelete";
    /// `CNodeCancelBadgedSends`
    CNODE_CANCEL_BADGED_SENDS = 16, "CNodeCancelBadgedSends";
    /// `CNodeCopy`
    CNODE_COPY = 17, "CNodeCopy";
    /// `CNodeMint`
    CNODE_MINT = 18, "CNodeMint";
    /// `CNodeMove`
    CNODE_MOVE = 19, "CNodeMove";
    /// `CNodeMutate`
    CNODE_MUTATE = 20, "CNodeMutate";
    /// `CNodeRotate`
    CNODE_ROTATE = 21, "CNodeRotate";
    /// `CNodeSaveCaller`
    CNODE_SAVE_CALLER = 22, "CNodeSaveCaller";
    /// `IRQIssueIRQHandler` (generic IRQControl_Get; rejected with
    /// IllegalOperation by an IOAPIC kernel)
    IRQ_ISSUE_IRQ_HANDLER = 23, "IRQIssueIRQHandler";
    /// `IRQAckIRQ`
    IRQ_ACK_IRQ = 24, "IRQAckIRQ";
    /// `IRQSetIRQHandler`
    IRQ_SET_IRQ_HANDLER = 25, "IRQSetIRQHandler";
    /// `IRQClearIRQHandler`
    IRQ_CLEAR_IRQ_HANDLER = 26, "IRQClearIRQHandler";
    /// `DomainSetSet`
    DOMAIN_SET_SET = 27, "DomainSetSet";
    /// `X86PDPTMap` (first x86_64 label, = nInvocationLabels)
    X86_PDPT_MAP = 28, "X86PDPTMap";
    /// `X86PDPTUnmap`
    X86_PDPT_UNMAP = 29, "X86PDPTUnmap";
    /// `X86PageDirectoryMap` (first x86 label, = nSeL4ArchInvocationLabels)
    X86_PAGE_DIRECTORY_MAP = 30, "X86PageDirectoryMap";
    /// `X86PageDirectoryUnmap`
    X86_PAGE_DIRECTORY_UNMAP = 31, "X86PageDirectoryUnmap";
    /// `X86PageDirectoryGetStatusBits`
    X86_PAGE_DIRECTORY_GET_STATUS_BITS = 32, "X86PageDirectoryGetStatusBits";
    /// `X86PageTableMap`
    X86_PAGE_TABLE_MAP = 33, "X86PageTableMap";
    /// `X86PageTableUnmap`
    X86_PAGE_TABLE_UNMAP = 34, "X86PageTableUnmap";
    /// `X86IOPageTableMap` (exists even without an IOMMU)
    X86_IO_PAGE_TABLE_MAP = 35, "X86IOPageTableMap";
    /// `X86IOPageTableUnmap`
    X86_IO_PAGE_TABLE_UNMAP = 36, "X86IOPageTableUnmap";
    /// `X86PageMap`
    X86_PAGE_MAP = 37, "X86PageMap";
    /// `X86PageRemap`
    X86_PAGE_REMAP = 38, "X86PageRemap";
    /// `X86PageUnmap`
    X86_PAGE_UNMAP = 39, "X86PageUnmap";
    /// `X86PageMapIO`
    X86_PAGE_MAP_IO = 40, "X86PageMapIO";
    /// `X86PageGetAddress`
    X86_PAGE_GET_ADDRESS = 41, "X86PageGetAddress";
    /// `X86ASIDControlMakePool`
    X86_ASID_CONTROL_MAKE_POOL = 42, "X86ASIDControlMakePool";
    /// `X86ASIDPoolAssign`
    X86_ASID_POOL_ASSIGN = 43, "X86ASIDPoolAssign";
    /// `X86IOPortIn8`
    X86_IO_PORT_IN8 = 44, "X86IOPortIn8";
    /// `X86IOPortIn16`
    X86_IO_PORT_IN16 = 45, "X86IOPortIn16";
    /// `X86IOPortIn32`
    X86_IO_PORT_IN32 = 46, "X86IOPortIn32";
    /// `X86IOPortOut8`
    X86_IO_PORT_OUT8 = 47, "X86IOPortOut8";
    /// `X86IOPortOut16`
    X86_IO_PORT_OUT16 = 48, "X86IOPortOut16";
    /// `X86IOPortOut32`
    X86_IO_PORT_OUT32 = 49, "X86IOPortOut32";
    /// `X86IRQIssueIRQHandlerIOAPIC`
    X86_IRQ_ISSUE_IRQ_HANDLER_IOAPIC = 50, "X86IRQIssueIRQHandlerIOAPIC";
    /// `X86IRQIssueIRQHandlerMSI`
    X86_IRQ_ISSUE_IRQ_HANDLER_MSI = 51, "X86IRQIssueIRQHandlerMSI";
}

/// `nInvocationLabels`: first label after the generic ones.
pub const N_INVOCATION_LABELS: Word = 28;
/// `nSeL4ArchInvocationLabels`: first label after the x86_64 ones.
pub const N_SEL4_ARCH_INVOCATION_LABELS: Word = 30;
/// `nArchInvocationLabels`: one more than the largest label.
pub const N_ARCH_INVOCATION_LABELS: Word = 52;
