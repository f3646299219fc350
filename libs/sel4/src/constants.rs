//! Constants of seL4 5.0.0 for x86_64 pc99 with the Iolite configuration
//! (`kernel-config/`): slot numbers of the initial CSpace, object sizes,
//! message limits, priorities and interrupt vector ranges.

use crate::types::{CPtr, Word};

// Initial CSpace of the root task (`bootinfo_types.h`).

/// `seL4_CapNull`: slot 0 is always empty.
pub const CAP_NULL: CPtr = 0;
/// `seL4_CapInitThreadTCB`: the root task's TCB.
pub const CAP_INIT_THREAD_TCB: CPtr = 1;
/// `seL4_CapInitThreadCNode`: the root task's CSpace root.
pub const CAP_INIT_THREAD_CNODE: CPtr = 2;
/// `seL4_CapInitThreadVSpace` (`seL4_CapInitThreadPD`): the root task's PML4.
pub const CAP_INIT_THREAD_VSPACE: CPtr = 3;
/// `seL4_CapIRQControl`.
pub const CAP_IRQ_CONTROL: CPtr = 4;
/// `seL4_CapASIDControl`.
pub const CAP_ASID_CONTROL: CPtr = 5;
/// `seL4_CapInitThreadASIDPool`.
pub const CAP_INIT_THREAD_ASID_POOL: CPtr = 6;
/// `seL4_CapIOPort`: all I/O ports 0..=0xffff; narrow it with
/// [`cnode_mint`](crate::cnode_mint) and
/// [`CapData::io_port_range`](crate::CapData::io_port_range).
pub const CAP_IO_PORT: CPtr = 7;
/// `seL4_CapIOSpace`: a null cap here, as the kernel has no IOMMU support.
pub const CAP_IO_SPACE: CPtr = 8;
/// `seL4_CapBootInfoFrame`.
pub const CAP_BOOT_INFO_FRAME: CPtr = 9;
/// `seL4_CapInitThreadIPCBuffer`.
pub const CAP_INIT_THREAD_IPC_BUFFER: CPtr = 10;
/// `seL4_CapDomain`.
pub const CAP_DOMAIN: CPtr = 11;
/// `seL4_NumInitialCaps`: the first slot not holding one of the above.
pub const NUM_INITIAL_CAPS: CPtr = 12;

// Object sizes (log2 bytes), `sel4_arch/constants.h`.

/// `seL4_WordBits`.
pub const WORD_BITS: Word = 64;
/// `seL4_PageBits`: 4 KiB frames.
pub const PAGE_BITS: Word = 12;
/// `seL4_LargePageBits`: 2 MiB frames.
pub const LARGE_PAGE_BITS: Word = 21;
/// `seL4_HugePageBits`: 1 GiB frames (unusable: no `CONFIG_HUGE_PAGE`).
pub const HUGE_PAGE_BITS: Word = 30;
/// `seL4_SlotBits`: one CNode slot is 32 bytes.
pub const SLOT_BITS: Word = 5;
/// `seL4_TCBBits`.
pub const TCB_BITS: Word = 11;
/// `seL4_EndpointBits`.
pub const ENDPOINT_BITS: Word = 4;
/// `seL4_NotificationBits`.
pub const NOTIFICATION_BITS: Word = 5;
/// `seL4_PageTableBits`.
pub const PAGE_TABLE_BITS: Word = 12;
/// `seL4_PageDirBits`.
pub const PAGE_DIR_BITS: Word = 12;
/// `seL4_PDPTBits`.
pub const PDPT_BITS: Word = 12;
/// `seL4_PML4Bits`.
pub const PML4_BITS: Word = 12;
/// `seL4_ASIDPoolBits`.
pub const ASID_POOL_BITS: Word = 12;
/// `seL4_IOPageTableBits`.
pub const IO_PAGE_TABLE_BITS: Word = 12;
/// `seL4_MinUntypedBits`.
pub const MIN_UNTYPED_BITS: Word = 4;
/// `seL4_MaxUntypedBits`.
pub const MAX_UNTYPED_BITS: Word = 47;
/// `seL4_UntypedRetypeMaxObjects` (`CONFIG_RETYPE_FAN_OUT_LIMIT`).
pub const UNTYPED_RETYPE_MAX_OBJECTS: Word = 256;

// Capability data.

/// `seL4_BadgeBits`: endpoint badges are 28 bits wide.
pub const BADGE_BITS: Word = 28;
/// `seL4_GuardBits`: width of a CNode guard in capability data.
pub const GUARD_BITS: Word = 18;
/// `seL4_GuardSizeBits` as libsel4 5.0 defines it (the guard-size field
/// itself is 6 bits wide in the capability data word).
pub const GUARD_SIZE_BITS: Word = 5;

// Messages.

/// `seL4_MsgLengthBits`.
pub const MSG_LENGTH_BITS: Word = 7;
/// `seL4_MsgExtraCapBits`.
pub const MSG_EXTRA_CAP_BITS: Word = 2;
/// `seL4_MsgMaxLength`: message registers in one message.
pub const MSG_MAX_LENGTH: usize = 120;
/// `seL4_MsgMaxExtraCaps`.
pub const MSG_MAX_EXTRA_CAPS: usize = 3;
/// Message registers passed in machine registers on x86_64 (`r10`, `r8`,
/// `r9`, `r15`); the rest go through the IPC buffer.
pub const MSG_REGISTERS: usize = 4;

// Scheduling (`CONFIG_NUM_PRIORITIES` = 256).

/// `seL4_MinPrio`.
pub const MIN_PRIO: Word = 0;
/// `seL4_MaxPrio`.
pub const MAX_PRIO: Word = 255;

// Bootinfo.

/// `CONFIG_MAX_NUM_BOOTINFO_UNTYPED_CAPS`: length of the untyped list.
pub const MAX_BOOTINFO_UNTYPED_CAPS: usize = 230;
/// `CONFIG_ROOT_CNODE_SIZE_BITS`: radix of the root task's CNode, hence the
/// depth to use with root-CNode addresses.
pub const ROOT_CNODE_SIZE_BITS: Word = 16;

// Interrupts (`arch/constants.h`).

/// `IRQ_OFFSET`: CPU vector of IRQ 0 as seen by user level.
pub const IRQ_OFFSET: Word = 0x20 + 16;
/// `VECTOR_MIN`: smallest `vector` argument of `IRQControl_GetIOAPIC/GetMSI`.
pub const VECTOR_MIN: Word = 0;
/// `VECTOR_MAX`: largest `vector` argument of `IRQControl_GetIOAPIC/GetMSI`.
pub const VECTOR_MAX: Word = 109;

// Mapping errors (`sel4_arch/mapping.h`).

/// When a map invocation fails with `FailedLookup`, the reply MR at this
/// index tells which paging level is missing.
pub const MAPPING_LOOKUP_LEVEL_MR: usize = 2;
/// `SEL4_MAPPING_LOOKUP_NO_PT`: a page table is missing.
pub const MAPPING_LOOKUP_NO_PT: Word = 21;
/// `SEL4_MAPPING_LOOKUP_NO_PD`: a page directory is missing.
pub const MAPPING_LOOKUP_NO_PD: Word = 30;
/// `SEL4_MAPPING_LOOKUP_NO_PDPT`: a PDPT is missing.
pub const MAPPING_LOOKUP_NO_PDPT: Word = 39;
