//! The boot information frame the kernel hands the root task
//! (`seL4_BootInfo`), with the untyped list and the extra boot info chunks.
//!
//! In 5.0 these structures are `SEL4_PACKED`. The boot info frame is page
//! aligned, so every field up to `initThreadCNodeSizeBits` (offset 136) is
//! naturally aligned and is an ordinary public field here; the fields after
//! it sit at odd offsets (`initThreadDomain` at 137, `archInfo` at 145,
//! `untyped` at 153, the list at 169 in 12-byte entries) and are read
//! through accessor methods. This keeps the exact offsets while letting the
//! common fields be used like any other (`format!`, references), which a
//! `packed` Rust struct would forbid. The Rust size is 2936 bytes (the C
//! size 2929 rounded up to the alignment), still within the 4 KiB frame.

use crate::constants::{MAX_BOOTINFO_UNTYPED_CAPS, PAGE_BITS};
use crate::ipc_buffer::IpcBuffer;
use crate::types::{CPtr, Word};

/// A range of CNode slots `[start, end)` in the root CNode (`seL4_SlotRegion`).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotRegion {
    /// First slot of the region.
    pub start: Word,
    /// First slot after the region.
    pub end: Word,
}

impl SlotRegion {
    /// Number of slots.
    pub const fn len(&self) -> Word {
        self.end.saturating_sub(self.start)
    }

    /// Whether the region has no slots.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slots as a range of CPtrs (root CNode, depth
    /// [`ROOT_CNODE_SIZE_BITS`](crate::ROOT_CNODE_SIZE_BITS)).
    pub fn slots(&self) -> core::ops::Range<CPtr> {
        self.start..self.end.max(self.start)
    }

    fn from_bytes(b: &[u8; 16]) -> Self {
        let (s, e) = b.split_at(8);
        SlotRegion {
            start: Word::from_ne_bytes(s.try_into().unwrap()),
            end: Word::from_ne_bytes(e.try_into().unwrap()),
        }
    }

    fn to_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.start.to_ne_bytes());
        b[8..].copy_from_slice(&self.end.to_ne_bytes());
        b
    }
}

/// One untyped capability handed to the root task (`seL4_UntypedDesc`).
/// 5.0 field order: paddr, two padding bytes, size_bits, is_device (12
/// bytes, packed). Read `paddr` by value (`let p = d.paddr;`) or with
/// [`paddr()`](Self::paddr): as an entry of the list it is misaligned, so
/// Rust refuses references to it.
#[repr(C, packed)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct UntypedDesc {
    /// Physical address of the untyped region.
    pub paddr: Word,
    /// Padding (`padding1`).
    pub padding1: u8,
    /// Padding (`padding2`).
    pub padding2: u8,
    /// log2 of the region size in bytes.
    pub size_bits: u8,
    /// Non-zero for device memory (MMIO; can only be retyped into frames).
    pub is_device: u8,
}

impl UntypedDesc {
    /// A RAM (`is_device == false`) or device untyped description.
    pub const fn new(paddr: Word, size_bits: u8, is_device: bool) -> Self {
        UntypedDesc { paddr, padding1: 0, padding2: 0, size_bits, is_device: is_device as u8 }
    }

    /// Physical address.
    pub const fn paddr(&self) -> Word {
        self.paddr
    }

    /// log2 of the size in bytes.
    pub const fn size_bits(&self) -> u8 {
        self.size_bits
    }

    /// Size in bytes.
    pub const fn size(&self) -> Word {
        1 << self.size_bits
    }

    /// Whether this is device memory rather than RAM.
    pub const fn is_device(&self) -> bool {
        self.is_device != 0
    }

    /// Whether `paddr` lies inside this region.
    pub const fn contains(&self, paddr: Word) -> bool {
        let base = self.paddr;
        paddr >= base && paddr - base < self.size()
    }
}

/// `seL4_BootInfo` with `CONFIG_MAX_NUM_BOOTINFO_UNTYPED_CAPS` = 230, at the
/// offsets of the packed C struct (see the module documentation).
#[repr(C)]
#[derive(Clone, Debug)]
pub struct BootInfo {
    /// Length in bytes of the extra boot info that starts one page after
    /// this frame (0 if none).
    pub extra_len: Word,
    /// Node ID (0: single core).
    pub node_id: Word,
    /// Number of nodes (1: single core).
    pub num_nodes: Word,
    /// Number of IOMMU page-table levels (0: no IOMMU).
    pub num_iopt_levels: Word,
    /// Address of the root task's IPC buffer.
    pub ipc_buffer: *mut IpcBuffer,
    /// Empty slots of the root CNode, free for the root task.
    pub empty: SlotRegion,
    /// Frames shared between nodes (empty on single core).
    pub shared_frames: SlotRegion,
    /// Frame caps of the root task's image.
    pub user_image_frames: SlotRegion,
    /// Paging-structure caps of the root task's image.
    pub user_image_paging: SlotRegion,
    /// IOSpace caps (ARM SMMU only; empty here).
    pub io_space_caps: SlotRegion,
    /// Frame caps backing the extra boot info.
    pub extra_bi_pages: SlotRegion,
    /// Radix of the root CNode (2^n slots).
    pub init_thread_cnode_size_bits: u8,
    init_thread_domain: [u8; 8],
    arch_info: [u8; 8],
    untyped: [u8; 16],
    untyped_list: [UntypedDesc; MAX_BOOTINFO_UNTYPED_CAPS],
}

impl BootInfo {
    /// An all-zero boot info, for building test fixtures.
    pub const fn zeroed() -> Self {
        BootInfo {
            extra_len: 0,
            node_id: 0,
            num_nodes: 0,
            num_iopt_levels: 0,
            ipc_buffer: core::ptr::null_mut(),
            empty: SlotRegion { start: 0, end: 0 },
            shared_frames: SlotRegion { start: 0, end: 0 },
            user_image_frames: SlotRegion { start: 0, end: 0 },
            user_image_paging: SlotRegion { start: 0, end: 0 },
            io_space_caps: SlotRegion { start: 0, end: 0 },
            extra_bi_pages: SlotRegion { start: 0, end: 0 },
            init_thread_cnode_size_bits: 0,
            init_thread_domain: [0; 8],
            arch_info: [0; 8],
            untyped: [0; 16],
            untyped_list: [UntypedDesc::new(0, 0, false); MAX_BOOTINFO_UNTYPED_CAPS],
        }
    }

    /// Turns the pointer the kernel passes the root task (in `rdi`) into a
    /// reference.
    ///
    /// # Safety
    /// `ptr` must point to the mapped boot info frame, which must stay mapped
    /// and unmodified for the rest of the program.
    pub unsafe fn from_ptr(ptr: *const BootInfo) -> &'static BootInfo {
        &*ptr
    }

    /// The root task's scheduling domain (`initThreadDomain`).
    pub fn init_thread_domain(&self) -> Word {
        Word::from_ne_bytes(self.init_thread_domain)
    }

    /// `archInfo`: on x86 the TSC frequency in MHz.
    pub fn arch_info(&self) -> Word {
        Word::from_ne_bytes(self.arch_info)
    }

    /// Slots holding the untyped caps; slot `untyped().start + i` is
    /// described by `untyped_list()[i]`.
    pub fn untyped(&self) -> SlotRegion {
        SlotRegion::from_bytes(&self.untyped)
    }

    /// The untyped caps: (slot in the root CNode, description), in list
    /// order. The count is clamped to the list length so a corrupt frame
    /// cannot make this read past it.
    pub fn untypeds(&self) -> impl Iterator<Item = (CPtr, &UntypedDesc)> + '_ {
        self.untyped().slots().zip(self.untyped_list().iter())
    }

    /// The valid part of the untyped list.
    pub fn untyped_list(&self) -> &[UntypedDesc] {
        let n = (self.untyped().len() as usize).min(MAX_BOOTINFO_UNTYPED_CAPS);
        &self.untyped_list[..n]
    }

    /// Free slots of the root CNode.
    pub fn empty_slots(&self) -> core::ops::Range<CPtr> {
        self.empty.slots()
    }

    /// Sets `initThreadDomain` (for fixtures).
    pub fn set_init_thread_domain(&mut self, v: Word) {
        self.init_thread_domain = v.to_ne_bytes();
    }

    /// Sets `archInfo` (for fixtures).
    pub fn set_arch_info(&mut self, v: Word) {
        self.arch_info = v.to_ne_bytes();
    }

    /// Sets the untyped slot region and list (for fixtures); the region is
    /// `first_slot..first_slot + list.len()`.
    ///
    /// # Panics
    /// If `list` has more than 230 entries.
    pub fn set_untypeds(&mut self, first_slot: CPtr, list: &[UntypedDesc]) {
        self.untyped_list[..list.len()].copy_from_slice(list);
        self.untyped = SlotRegion { start: first_slot, end: first_slot + list.len() as Word }.to_bytes();
    }

    /// The extra boot info bytes, which the kernel maps one page after the
    /// boot info frame.
    ///
    /// # Safety
    /// `self` must be the kernel's boot info frame mapping (as obtained from
    /// [`from_ptr`](Self::from_ptr)), with the extra pages mapped after it as
    /// the kernel sets up the root task.
    pub unsafe fn extra_bytes(&self) -> &[u8] {
        let base = (self as *const BootInfo as *const u8).add(1 << PAGE_BITS);
        core::slice::from_raw_parts(base, self.extra_len as usize)
    }

    /// The extra boot info chunks.
    ///
    /// # Safety
    /// As for [`extra_bytes`](Self::extra_bytes).
    pub unsafe fn extra_chunks(&self) -> ExtraChunks<'_> {
        ExtraChunks::new(self.extra_bytes())
    }
}

/// `SEL4_BOOTINFO_HEADER_PADDING`: filler up to the end of the extra region.
pub const BOOTINFO_HEADER_PADDING: Word = 0;
/// `SEL4_BOOTINFO_HEADER_X86_VBE`: VESA BIOS extension information
/// (`seL4_X86_BootInfo_VBE`).
pub const BOOTINFO_HEADER_X86_VBE: Word = 1;

/// Header of an extra boot info chunk (`seL4_BootInfoHeader`).
#[repr(C, packed)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BootInfoHeader {
    /// Chunk type (`BOOTINFO_HEADER_*`).
    pub id: Word,
    /// Length of the chunk including this header.
    pub len: Word,
}

/// One extra boot info chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ExtraChunk<'a> {
    /// Chunk type (`BOOTINFO_HEADER_*`).
    pub id: Word,
    /// The chunk's bytes after the header.
    pub body: &'a [u8],
}

/// Iterator over the chunks of the extra boot info. It stops at the first
/// malformed header (shorter than a header or longer than what is left)
/// instead of looping or reading out of bounds.
#[derive(Clone, Debug)]
pub struct ExtraChunks<'a> {
    rest: &'a [u8],
}

impl<'a> ExtraChunks<'a> {
    /// Parses chunks from the extra boot info bytes.
    pub fn new(bytes: &'a [u8]) -> Self {
        ExtraChunks { rest: bytes }
    }
}

impl<'a> Iterator for ExtraChunks<'a> {
    type Item = ExtraChunk<'a>;

    fn next(&mut self) -> Option<ExtraChunk<'a>> {
        const HDR: usize = core::mem::size_of::<BootInfoHeader>();
        if self.rest.len() < HDR {
            return None;
        }
        let id = Word::from_ne_bytes(self.rest[0..8].try_into().unwrap());
        let len = Word::from_ne_bytes(self.rest[8..16].try_into().unwrap());
        if len < HDR as Word || len > self.rest.len() as Word {
            self.rest = &[];
            return None;
        }
        let (chunk, rest) = self.rest.split_at(len as usize);
        self.rest = rest;
        Some(ExtraChunk { id, body: &chunk[HDR..] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn layout_matches_packed_c_struct() {
        assert_eq!(size_of::<SlotRegion>(), 16);
        assert_eq!(size_of::<UntypedDesc>(), 12);
        assert_eq!(offset_of!(UntypedDesc, size_bits), 10);
        assert_eq!(offset_of!(UntypedDesc, is_device), 11);
        assert_eq!(size_of::<BootInfoHeader>(), 16);
        // Offsets of the packed seL4_BootInfo, summed by hand from
        // bootinfo_types.h: 5 words, 6 slot regions, one u8, 2 words, 1 region.
        assert_eq!(offset_of!(BootInfo, extra_len), 0);
        assert_eq!(offset_of!(BootInfo, node_id), 8);
        assert_eq!(offset_of!(BootInfo, num_nodes), 16);
        assert_eq!(offset_of!(BootInfo, num_iopt_levels), 24);
        assert_eq!(offset_of!(BootInfo, ipc_buffer), 32);
        assert_eq!(offset_of!(BootInfo, empty), 40);
        assert_eq!(offset_of!(BootInfo, shared_frames), 56);
        assert_eq!(offset_of!(BootInfo, user_image_frames), 72);
        assert_eq!(offset_of!(BootInfo, user_image_paging), 88);
        assert_eq!(offset_of!(BootInfo, io_space_caps), 104);
        assert_eq!(offset_of!(BootInfo, extra_bi_pages), 120);
        assert_eq!(offset_of!(BootInfo, init_thread_cnode_size_bits), 136);
        assert_eq!(offset_of!(BootInfo, init_thread_domain), 137);
        assert_eq!(offset_of!(BootInfo, arch_info), 145);
        assert_eq!(offset_of!(BootInfo, untyped), 153);
        assert_eq!(offset_of!(BootInfo, untyped_list), 169);
        // The C struct ends at 169 + 230 * 12 = 2929; Rust rounds the size
        // up to the 8-byte alignment, still inside the 4 KiB frame.
        assert_eq!(offset_of!(BootInfo, untyped_list) + size_of::<[UntypedDesc; 230]>(), 2929);
        assert_eq!(size_of::<BootInfo>(), 2936);
        assert!(size_of::<BootInfo>() <= 4096);
    }

    fn sample() -> BootInfo {
        let mut bi = BootInfo::zeroed();
        bi.num_nodes = 1;
        bi.empty = SlotRegion { start: 300, end: 65536 };
        bi.user_image_frames = SlotRegion { start: 12, end: 40 };
        bi.init_thread_cnode_size_bits = 16;
        bi.set_arch_info(2000);
        bi.set_init_thread_domain(3);
        bi.set_untypeds(
            46,
            &[
                UntypedDesc::new(0x10_0000, 20, false),
                UntypedDesc::new(0xfee0_0000, 12, true),
                UntypedDesc::new(0x20_0000, 21, false),
            ],
        );
        bi
    }

    #[test]
    fn unaligned_fields_read_at_c_offsets() {
        let bi = sample();
        let bytes = unsafe { core::slice::from_raw_parts(&bi as *const BootInfo as *const u8, 2929) };
        let word_at = |o: usize| Word::from_ne_bytes(bytes[o..o + 8].try_into().unwrap());
        assert_eq!(word_at(137), 3);
        assert_eq!(word_at(145), 2000);
        assert_eq!((word_at(153), word_at(161)), (46, 49));
        assert_eq!(word_at(169 + 12), 0xfee0_0000);
        assert_eq!(bytes[169 + 12 + 10], 12);
        assert_eq!(bytes[169 + 12 + 11], 1);
        assert_eq!((bi.init_thread_domain(), bi.arch_info()), (3, 2000));
        assert_eq!(bi.untyped(), SlotRegion { start: 46, end: 49 });
        // Ordinary fields work in formatting, which packed ones would not.
        assert_eq!(format!("{:#x}", bi.empty.start), "0x12c");
    }

    #[test]
    fn untyped_iteration_pairs_slots_with_descriptions() {
        let bi = sample();
        let v: Vec<(CPtr, Word, u8, bool)> =
            bi.untypeds().map(|(c, d)| (c, d.paddr(), d.size_bits(), d.is_device())).collect();
        assert_eq!(v, vec![(46, 0x10_0000, 20, false), (47, 0xfee0_0000, 12, true), (48, 0x20_0000, 21, false)]);
        assert_eq!(bi.untyped_list().len(), 3);
        assert!(bi.untyped_list()[0].contains(0x1f_ffff));
        assert!(!bi.untyped_list()[0].contains(0x20_0000));
        assert_eq!(bi.empty_slots(), 300..65536);
    }

    #[test]
    fn untyped_count_is_clamped() {
        let mut bi = sample();
        bi.untyped = SlotRegion { start: 10, end: 10_000 }.to_bytes();
        assert_eq!(bi.untypeds().count(), MAX_BOOTINFO_UNTYPED_CAPS);
        bi.untyped = SlotRegion { start: 10, end: 5 }.to_bytes();
        assert_eq!(bi.untypeds().count(), 0);
    }

    #[test]
    fn extra_chunks_parse_and_stop_on_garbage() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&BOOTINFO_HEADER_X86_VBE.to_ne_bytes());
        bytes.extend_from_slice(&20u64.to_ne_bytes());
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes.extend_from_slice(&BOOTINFO_HEADER_PADDING.to_ne_bytes());
        bytes.extend_from_slice(&16u64.to_ne_bytes());
        let v: Vec<ExtraChunk> = ExtraChunks::new(&bytes).collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], ExtraChunk { id: 1, body: &[1, 2, 3, 4] });
        assert_eq!(v[1].id, 0);
        assert!(v[1].body.is_empty());

        // A zero length would loop forever; a too-long one would overrun.
        let mut bad = Vec::new();
        bad.extend_from_slice(&0u64.to_ne_bytes());
        bad.extend_from_slice(&0u64.to_ne_bytes());
        assert_eq!(ExtraChunks::new(&bad).count(), 0);
        bad[8] = 200;
        assert_eq!(ExtraChunks::new(&bad).count(), 0);
        assert_eq!(ExtraChunks::new(&bad[..5]).count(), 0);
    }
}
