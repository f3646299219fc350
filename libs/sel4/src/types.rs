//! Basic ABI types: words, capability pointers, the message tag, rights,
//! capability data, priorities, errors, object types and VM attributes.
//!
//! Bit layouts come from `shared_types_64.bf` and `types_64.bf` of seL4 5.0.0
//! (the bitfield generator lists fields from the most significant bit down).

/// A machine word (`seL4_Word`).
pub type Word = u64;

/// A capability pointer (`seL4_CPtr`): an address in the caller's CSpace.
pub type CPtr = u64;

/// The message tag (`seL4_MessageInfo_t`) that travels with every IPC.
///
/// 5.0 layout of the 64-bit word: bits 63..32 are padding, `label` is 20
/// bits at 12, `capsUnwrapped` 3 bits at 9, `extraCaps` 2 bits at 7 and
/// `length` 7 bits at 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MessageInfo(Word);

impl MessageInfo {
    /// Width of the label field; larger labels are truncated as the C
    /// generator's constructor does.
    pub const LABEL_BITS: u32 = 20;
    /// Width of the `capsUnwrapped` field.
    pub const CAPS_UNWRAPPED_BITS: u32 = 3;
    /// Width of the `extraCaps` field (`seL4_MsgExtraCapBits`).
    pub const EXTRA_CAPS_BITS: u32 = 2;
    /// Width of the `length` field (`seL4_MsgLengthBits`).
    pub const LENGTH_BITS: u32 = 7;

    const LABEL_SHIFT: u32 = 12;
    const CAPS_UNWRAPPED_SHIFT: u32 = 9;
    const EXTRA_CAPS_SHIFT: u32 = 7;
    const LENGTH_SHIFT: u32 = 0;

    const fn mask(bits: u32) -> Word {
        (1 << bits) - 1
    }

    /// Builds a tag; every field is masked to its width.
    pub const fn new(label: Word, caps_unwrapped: Word, extra_caps: Word, length: Word) -> Self {
        MessageInfo(
            ((label & Self::mask(Self::LABEL_BITS)) << Self::LABEL_SHIFT)
                | ((caps_unwrapped & Self::mask(Self::CAPS_UNWRAPPED_BITS)) << Self::CAPS_UNWRAPPED_SHIFT)
                | ((extra_caps & Self::mask(Self::EXTRA_CAPS_BITS)) << Self::EXTRA_CAPS_SHIFT)
                | ((length & Self::mask(Self::LENGTH_BITS)) << Self::LENGTH_SHIFT),
        )
    }

    /// Reinterprets a raw tag word, e.g. the one a receive returned in `rsi`.
    pub const fn from_word(w: Word) -> Self {
        MessageInfo(w)
    }

    /// The raw tag word as passed in `rsi`.
    pub const fn into_word(self) -> Word {
        self.0
    }

    /// The label: the invocation label on requests, the `seL4_Error` on
    /// kernel replies, the fault type on fault messages.
    pub const fn label(self) -> Word {
        (self.0 >> Self::LABEL_SHIFT) & Self::mask(Self::LABEL_BITS)
    }

    /// Bit `i` is set when extra cap `i` was unwrapped into a badge.
    pub const fn caps_unwrapped(self) -> Word {
        (self.0 >> Self::CAPS_UNWRAPPED_SHIFT) & Self::mask(Self::CAPS_UNWRAPPED_BITS)
    }

    /// Number of extra caps (0..=3).
    pub const fn extra_caps(self) -> Word {
        (self.0 >> Self::EXTRA_CAPS_SHIFT) & Self::mask(Self::EXTRA_CAPS_BITS)
    }

    /// Number of message registers (0..=120).
    pub const fn length(self) -> Word {
        (self.0 >> Self::LENGTH_SHIFT) & Self::mask(Self::LENGTH_BITS)
    }
}

/// Access rights of a capability (`seL4_CapRights_t`).
///
/// 5.0 has three rights: grant (bit 2), read (bit 1), write (bit 0). There
/// is no separate grant-reply right in this version.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CapRights(Word);

impl CapRights {
    const GRANT: Word = 1 << 2;
    const READ: Word = 1 << 1;
    const WRITE: Word = 1 << 0;

    /// Rights from the three flags, in the argument order of
    /// `seL4_CapRights_new(grant, read, write)`.
    pub const fn new(grant: bool, read: bool, write: bool) -> Self {
        CapRights(
            (if grant { Self::GRANT } else { 0 })
                | (if read { Self::READ } else { 0 })
                | (if write { Self::WRITE } else { 0 }),
        )
    }

    /// `seL4_AllRights`.
    pub const fn all() -> Self {
        Self::new(true, true, true)
    }

    /// `seL4_ReadWrite`.
    pub const fn read_write() -> Self {
        Self::new(false, true, true)
    }

    /// `seL4_CanRead`.
    pub const fn read_only() -> Self {
        Self::new(false, true, false)
    }

    /// `seL4_CanWrite`.
    pub const fn write_only() -> Self {
        Self::new(false, false, true)
    }

    /// `seL4_CanGrant`.
    pub const fn grant_only() -> Self {
        Self::new(true, false, false)
    }

    /// `seL4_NoRights`.
    pub const fn none() -> Self {
        Self::new(false, false, false)
    }

    /// Reinterprets a raw rights word; bits above 2 are dropped.
    pub const fn from_word(w: Word) -> Self {
        CapRights(w & (Self::GRANT | Self::READ | Self::WRITE))
    }

    /// The word passed to the kernel.
    pub const fn into_word(self) -> Word {
        self.0
    }

    /// Whether the grant right is present.
    pub const fn can_grant(self) -> bool {
        self.0 & Self::GRANT != 0
    }

    /// Whether the read right is present.
    pub const fn can_read(self) -> bool {
        self.0 & Self::READ != 0
    }

    /// Whether the write right is present.
    pub const fn can_write(self) -> bool {
        self.0 & Self::WRITE != 0
    }
}

/// Capability data (`seL4_CapData_t`): one word, interpreted by the kernel
/// according to the type of the capability it is applied to (badge for
/// endpoints and notifications, guard for CNodes, port range for I/O ports).
///
/// In 5.0 this is a bitfield tagged union (`Badge` with tag bit 31 clear,
/// `Guard` with it set) but the kernel reads the raw word, so any word may be
/// passed; the constructors below produce what libsel4's would.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CapData(Word);

impl CapData {
    /// `seL4_NilData`: no badge, or no change of guard.
    pub const NONE: CapData = CapData(0);

    /// A raw word, passed through unchanged.
    pub const fn new(w: Word) -> Self {
        CapData(w)
    }

    /// `seL4_CapData_Badge_new`: the badge occupies the low
    /// [`BADGE_BITS`](crate::BADGE_BITS) bits; higher bits are dropped as the
    /// kernel's 28-bit endpoint badge field cannot hold them.
    pub const fn badge(badge: Word) -> Self {
        CapData(badge & ((1 << crate::BADGE_BITS) - 1))
    }

    /// `seL4_CapData_Guard_new(guard, guard_size)`: tag bit 31 set, guard
    /// 18 bits at bit 8, guard size 6 bits at bit 2.
    pub const fn guard(guard: Word, guard_size: Word) -> Self {
        CapData((1 << 31) | ((guard & ((1 << crate::GUARD_BITS) - 1)) << 8) | ((guard_size & 0x3f) << 2))
    }

    /// Restricts an I/O port capability to `first..=last` when used with
    /// [`cnode_mint`](crate::cnode_mint) (x86_64 `io_port_capdata`:
    /// first port in bits 31..16, last port in bits 15..0). This is how 5.0
    /// hands out port ranges: there is no IOPortControl object.
    pub const fn io_port_range(first: u16, last: u16) -> Self {
        CapData(((first as Word) << 16) | last as Word)
    }

    /// The word passed to the kernel.
    pub const fn into_word(self) -> Word {
        self.0
    }
}

impl From<Word> for CapData {
    fn from(w: Word) -> Self {
        CapData(w)
    }
}

/// Priority and maximum controlled priority (`seL4_PrioProps_t`), as taken
/// by [`tcb_configure`](crate::tcb_configure): `mcp` 8 bits at 8, `prio`
/// 8 bits at 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PrioProps(Word);

impl PrioProps {
    /// Priority `prio` and maximum controlled priority `mcp`, in the order
    /// of `seL4_PrioProps_new(mcp, prio)`.
    pub const fn new(mcp: u8, prio: u8) -> Self {
        PrioProps(((mcp as Word) << 8) | prio as Word)
    }

    /// The priority part.
    pub const fn prio(self) -> u8 {
        self.0 as u8
    }

    /// The maximum-controlled-priority part.
    pub const fn mcp(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// The word passed to the kernel.
    pub const fn into_word(self) -> Word {
        self.0
    }
}

/// Errors the kernel returns in the label of an invocation's reply
/// (`seL4_Error`; `seL4_NoError` = 0 becomes `Ok`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Error {
    /// `seL4_InvalidArgument`
    InvalidArgument = 1,
    /// `seL4_InvalidCapability`
    InvalidCapability,
    /// `seL4_IllegalOperation`
    IllegalOperation,
    /// `seL4_RangeError`
    RangeError,
    /// `seL4_AlignmentError`
    AlignmentError,
    /// `seL4_FailedLookup`
    FailedLookup,
    /// `seL4_TruncatedMessage`
    TruncatedMessage,
    /// `seL4_DeleteFirst`
    DeleteFirst,
    /// `seL4_RevokeFirst`
    RevokeFirst,
    /// `seL4_NotEnoughMemory`
    NotEnoughMemory,
}

impl Error {
    /// `seL4_NumErrors`: one more than the largest error value.
    pub const NUM_ERRORS: Word = 11;

    /// The error for a reply label; `None` for 0 (`seL4_NoError`) and for
    /// values the kernel never uses.
    pub const fn from_label(label: Word) -> Option<Error> {
        Some(match label {
            1 => Error::InvalidArgument,
            2 => Error::InvalidCapability,
            3 => Error::IllegalOperation,
            4 => Error::RangeError,
            5 => Error::AlignmentError,
            6 => Error::FailedLookup,
            7 => Error::TruncatedMessage,
            8 => Error::DeleteFirst,
            9 => Error::RevokeFirst,
            10 => Error::NotEnoughMemory,
            _ => return None,
        })
    }

    /// Converts a kernel reply label into a result.
    ///
    /// A label outside `seL4_Error` cannot come from the kernel, only from a
    /// user-level server answering on an endpoint; it is reported as
    /// `IllegalOperation` so that a caller never mistakes it for success.
    pub const fn check(label: Word) -> Result<()> {
        if label == 0 {
            return Ok(());
        }
        match Error::from_label(label) {
            Some(e) => Err(e),
            None => Err(Error::IllegalOperation),
        }
    }
}

/// Result of a kernel invocation.
pub type Result<T> = core::result::Result<T, Error>;

/// Kernel object types for `Untyped_Retype`, numbered as in 5.0 with this
/// configuration: no `CONFIG_HUGE_PAGE` (so no `X64_HugePageObject` between
/// PML4 and 4K), no `CONFIG_IOMMU` (no IOPageTable), no `CONFIG_VTX`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum ObjectType {
    /// `seL4_UntypedObject`
    Untyped = 0,
    /// `seL4_TCBObject`
    Tcb = 1,
    /// `seL4_EndpointObject`
    Endpoint = 2,
    /// `seL4_NotificationObject`
    Notification = 3,
    /// `seL4_CapTableObject` (a CNode; size_bits is the radix in slots)
    CapTable = 4,
    /// `seL4_X86_PDPTObject`
    X86Pdpt = 5,
    /// `seL4_X64_PML4Object` (the VSpace root)
    X64Pml4 = 6,
    /// `seL4_X86_4K` (a 4 KiB frame)
    #[allow(non_camel_case_types)]
    X86_4K = 7,
    /// `seL4_X86_LargePageObject` (2 MiB)
    X86LargePage = 8,
    /// `seL4_X86_PageTableObject`
    X86PageTable = 9,
    /// `seL4_X86_PageDirectoryObject`
    X86PageDirectory = 10,
}

impl ObjectType {
    /// `seL4_ObjectTypeCount` for this configuration.
    pub const COUNT: Word = 11;

    /// The word passed to `Untyped_Retype`.
    pub const fn into_word(self) -> Word {
        self as Word
    }

    /// log2 of the memory one object takes from an untyped, as the kernel's
    /// `getObjectSize` computes it. `user_size_bits` is the `size_bits`
    /// argument of the retype: the object size for untypeds, the number of
    /// slots (radix) for CNodes, ignored for fixed-size objects.
    pub const fn size_bits(self, user_size_bits: Word) -> Word {
        use crate::constants::*;
        match self {
            ObjectType::Untyped => user_size_bits,
            ObjectType::Tcb => TCB_BITS,
            ObjectType::Endpoint => ENDPOINT_BITS,
            ObjectType::Notification => NOTIFICATION_BITS,
            ObjectType::CapTable => SLOT_BITS + user_size_bits,
            ObjectType::X86Pdpt => PDPT_BITS,
            ObjectType::X64Pml4 => PML4_BITS,
            ObjectType::X86_4K => PAGE_BITS,
            ObjectType::X86LargePage => LARGE_PAGE_BITS,
            ObjectType::X86PageTable => PAGE_TABLE_BITS,
            ObjectType::X86PageDirectory => PAGE_DIR_BITS,
        }
    }
}

/// x86 memory attributes for mappings (`seL4_X86_VMAttributes`): the PWT
/// (bit 0), PCD (bit 1) and PAT (bit 2) bits of the page-table entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum VmAttributes {
    /// `seL4_X86_WriteBack` (also `seL4_X86_Default_VMAttributes`)
    WriteBack = 0,
    /// `seL4_X86_WriteThrough`
    WriteThrough = 1,
    /// `seL4_X86_CacheDisabled`
    CacheDisabled = 2,
    /// `seL4_X86_Uncacheable`
    Uncacheable = 3,
    /// `seL4_X86_WriteCombining`
    WriteCombining = 4,
}

/// The libsel4 name of [`VmAttributes`].
pub type X86VmAttributes = VmAttributes;

impl VmAttributes {
    /// `seL4_X86_Default_VMAttributes`.
    pub const DEFAULT: VmAttributes = VmAttributes::WriteBack;

    /// The word passed to the kernel.
    pub const fn into_word(self) -> Word {
        self as Word
    }
}

/// Why a capability lookup failed (`seL4_LookupFailureType`), as reported in
/// cap faults and in the reply MRs of a `FailedLookup` error.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum LookupFailureType {
    /// `seL4_NoFailure`
    NoFailure = 0,
    /// `seL4_InvalidRoot`
    InvalidRoot = 1,
    /// `seL4_MissingCapability`
    MissingCapability = 2,
    /// `seL4_DepthMismatch`
    DepthMismatch = 3,
    /// `seL4_GuardMismatch`
    GuardMismatch = 4,
}

impl LookupFailureType {
    /// The type for a raw message word, `None` if out of range.
    pub const fn from_word(w: Word) -> Option<Self> {
        Some(match w {
            0 => Self::NoFailure,
            1 => Self::InvalidRoot,
            2 => Self::MissingCapability,
            3 => Self::DepthMismatch,
            4 => Self::GuardMismatch,
            _ => return None,
        })
    }
}

/// Register state of an x86_64 thread (`seL4_UserContext`), in the order
/// `TCB_ReadRegisters`/`TCB_WriteRegisters` transfer it: the 18 frame
/// registers, then `tls_base` (the FS base the kernel loads for the thread).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct UserContext {
    pub rip: Word,
    pub rsp: Word,
    pub rflags: Word,
    pub rax: Word,
    pub rbx: Word,
    pub rcx: Word,
    pub rdx: Word,
    pub rsi: Word,
    pub rdi: Word,
    pub rbp: Word,
    pub r8: Word,
    pub r9: Word,
    pub r10: Word,
    pub r11: Word,
    pub r12: Word,
    pub r13: Word,
    pub r14: Word,
    pub r15: Word,
    pub tls_base: Word,
}

impl UserContext {
    /// Number of words (19 on x86_64), as a `Word` so it can be passed as
    /// the `count` of [`tcb_write_registers`](crate::tcb_write_registers).
    pub const WORDS: Word = Self::LEN as Word;
    /// Number of words as an array length.
    pub const LEN: usize = 19;
    /// How many leading words are frame registers (`n_frameRegisters`); the
    /// rest are general-purpose registers (`tls_base`).
    pub const FRAME_REGISTERS: usize = 18;

    /// The registers as words, in transfer order.
    pub const fn to_words(&self) -> [Word; Self::LEN] {
        [
            self.rip,
            self.rsp,
            self.rflags,
            self.rax,
            self.rbx,
            self.rcx,
            self.rdx,
            self.rsi,
            self.rdi,
            self.rbp,
            self.r8,
            self.r9,
            self.r10,
            self.r11,
            self.r12,
            self.r13,
            self.r14,
            self.r15,
            self.tls_base,
        ]
    }

    /// The inverse of [`to_words`](Self::to_words).
    pub const fn from_words(w: &[Word; Self::LEN]) -> Self {
        UserContext {
            rip: w[0],
            rsp: w[1],
            rflags: w[2],
            rax: w[3],
            rbx: w[4],
            rcx: w[5],
            rdx: w[6],
            rsi: w[7],
            rdi: w[8],
            rbp: w[9],
            r8: w[10],
            r9: w[11],
            r10: w[12],
            r11: w[13],
            r12: w[14],
            r13: w[15],
            r14: w[16],
            r15: w[17],
            tls_base: w[18],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_info_bit_layout() {
        // shared_types_64.bf: padding 32 | label 20 | capsUnwrapped 3 | extraCaps 2 | length 7
        assert_eq!(MessageInfo::new(1, 0, 0, 0).into_word(), 1 << 12);
        assert_eq!(MessageInfo::new(0, 1, 0, 0).into_word(), 1 << 9);
        assert_eq!(MessageInfo::new(0, 0, 1, 0).into_word(), 1 << 7);
        assert_eq!(MessageInfo::new(0, 0, 0, 1).into_word(), 1);
        let all = MessageInfo::new(0xf_ffff, 7, 3, 0x7f);
        assert_eq!(all.into_word(), 0xffff_ffff);
        // Fields are masked like the generated constructor does.
        assert_eq!(MessageInfo::new(1 << 20, 8, 4, 128).into_word(), 0);
        let m = MessageInfo::new(0x12345, 5, 2, 21);
        assert_eq!(m.into_word(), (0x12345 << 12) | (5 << 9) | (2 << 7) | 21);
        assert_eq!((m.label(), m.caps_unwrapped(), m.extra_caps(), m.length()), (0x12345, 5, 2, 21));
        assert_eq!(MessageInfo::from_word(m.into_word()), m);
        // Upper half is padding: a word with only padding bits decodes as empty.
        let p = MessageInfo::from_word(0xffff_ffff_0000_0000);
        assert_eq!((p.label(), p.caps_unwrapped(), p.extra_caps(), p.length()), (0, 0, 0, 0));
    }

    #[test]
    fn cap_rights_bits() {
        // shared_types_64.bf: ... capAllowGrant 1 | capAllowRead 1 | capAllowWrite 1
        assert_eq!(CapRights::new(true, false, false).into_word(), 0b100);
        assert_eq!(CapRights::new(false, true, false).into_word(), 0b010);
        assert_eq!(CapRights::new(false, false, true).into_word(), 0b001);
        assert_eq!(CapRights::all().into_word(), 7);
        assert_eq!(CapRights::read_write().into_word(), 3);
        assert_eq!(CapRights::read_only().into_word(), 2);
        assert_eq!(CapRights::write_only().into_word(), 1);
        assert_eq!(CapRights::grant_only().into_word(), 4);
        assert_eq!(CapRights::none().into_word(), 0);
        let r = CapRights::from_word(0xff);
        assert!(r.can_grant() && r.can_read() && r.can_write());
        assert_eq!(r, CapRights::all());
    }

    #[test]
    fn cap_data_and_prio_props_bits() {
        assert_eq!(CapData::badge(0x1234).into_word(), 0x1234);
        assert_eq!(CapData::badge(u64::MAX).into_word(), (1 << 28) - 1);
        // types_64.bf Guard: CapDataType 1 | padding 5 | GuardBits 18 | GuardSize 6 | padding 2
        assert_eq!(CapData::guard(0, 0).into_word(), 1 << 31);
        assert_eq!(CapData::guard(0x3_ffff, 0).into_word(), (1 << 31) | (0x3_ffff << 8));
        assert_eq!(CapData::guard(0, 63).into_word(), (1 << 31) | (63 << 2));
        assert_eq!(CapData::io_port_range(0x3f8, 0x3ff).into_word(), 0x03f8_03ff);
        assert_eq!(CapData::NONE.into_word(), 0);
        // shared_types_64.bf PrioProps: padding 48 | mcp 8 | prio 8
        let p = PrioProps::new(254, 100);
        assert_eq!(p.into_word(), (254 << 8) | 100);
        assert_eq!((p.mcp(), p.prio()), (254, 100));
    }

    #[test]
    fn errors() {
        assert_eq!(Error::check(0), Ok(()));
        assert_eq!(Error::InvalidArgument as u64, 1);
        assert_eq!(Error::NotEnoughMemory as u64, 10);
        for l in 1..Error::NUM_ERRORS {
            assert_eq!(Error::from_label(l).unwrap() as u64, l);
        }
        assert_eq!(Error::from_label(11), None);
        assert_eq!(Error::check(999), Err(Error::IllegalOperation));
    }

    #[test]
    fn user_context_layout() {
        assert_eq!(core::mem::size_of::<UserContext>(), 19 * 8);
        assert_eq!(core::mem::offset_of!(UserContext, rip), 0);
        assert_eq!(core::mem::offset_of!(UserContext, r15), 17 * 8);
        assert_eq!(core::mem::offset_of!(UserContext, tls_base), 18 * 8);
        let words: [Word; 19] = core::array::from_fn(|i| i as Word + 100);
        let c = UserContext::from_words(&words);
        assert_eq!(c.rip, 100);
        assert_eq!(c.tls_base, 118);
        assert_eq!(c.to_words(), words);
    }

    #[test]
    fn object_sizes() {
        assert_eq!(ObjectType::Tcb.size_bits(0), 11);
        assert_eq!(ObjectType::Endpoint.size_bits(0), 4);
        assert_eq!(ObjectType::Notification.size_bits(0), 5);
        assert_eq!(ObjectType::CapTable.size_bits(10), 15);
        assert_eq!(ObjectType::Untyped.size_bits(20), 20);
        assert_eq!(ObjectType::X86LargePage.size_bits(0), 21);
        assert_eq!(ObjectType::X86_4K.size_bits(0), 12);
    }
}
