//! What the loader needs from a component's ELF file: its entry point and
//! the pages its loadable segments cover, with the bytes and rights of each.

use alloc::vec::Vec;
use object::elf::{FileHeader64, PF_W, PF_X, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian;

/// Size of a page.
pub const PAGE: u64 = 4096;

/// One page of the image: where it goes and what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImagePage {
    /// Page-aligned virtual address.
    pub vaddr: u64,
    /// Mapped read-write (data, bss) rather than read-only (text, rodata).
    pub writable: bool,
    /// Contains code (informational: seL4 5.0's x86 mapping API has no
    /// execute-disable, so every readable page is executable).
    pub executable: bool,
}

/// A loadable segment: `file` bytes of the image go to `vaddr`, followed
/// by zeros up to `mem_size`.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// Where the segment starts in the component's address space.
    pub vaddr: u64,
    /// Bytes in memory (the tail past `file` is zero).
    pub mem_size: u64,
    /// The bytes from the file.
    pub file: &'a [u8],
}

/// A parsed component image.
#[derive(Debug)]
pub struct Image<'a> {
    /// The entry point.
    pub entry: u64,
    /// Every page the segments touch, sorted by address, each once.
    pub pages: Vec<ImagePage>,
    /// The loadable segments.
    pub segments: Vec<Segment<'a>>,
}

impl<'a> Image<'a> {
    /// Parses `data` as a static x86_64 ELF executable whose segments lie in
    /// `[lowest, highest)`.
    pub fn parse(data: &'a [u8], lowest: u64, highest: u64) -> Result<Image<'a>, &'static str> {
        let endian = LittleEndian;
        let header = FileHeader64::<LittleEndian>::parse(data).map_err(|_| "not a 64-bit little-endian ELF file")?;
        if header.e_machine(endian) != object::elf::EM_X86_64 {
            return Err("not an x86_64 ELF file");
        }
        if header.e_type(endian) != object::elf::ET_EXEC {
            return Err("not a static executable (ET_EXEC)");
        }
        let entry = header.e_entry(endian);
        let headers = header.program_headers(endian, data).map_err(|_| "bad program headers")?;
        let mut segments = Vec::new();
        let mut pages: Vec<ImagePage> = Vec::new();
        for ph in headers.iter().filter(|ph| ph.p_type(endian) == PT_LOAD) {
            let vaddr = ph.p_vaddr(endian);
            let mem_size = ph.p_memsz(endian);
            let file = ph.data(endian, data).map_err(|_| "a segment lies outside the file")?;
            if (file.len() as u64) > mem_size {
                return Err("a segment's file size exceeds its memory size");
            }
            let end = vaddr.checked_add(mem_size).ok_or("a segment wraps around")?;
            if mem_size == 0 {
                continue;
            }
            if vaddr < lowest || end > highest {
                return Err("a segment lies outside the component image area");
            }
            let flags = ph.p_flags(endian);
            let mut page = vaddr & !(PAGE - 1);
            while page < end {
                pages.push(ImagePage { vaddr: page, writable: flags & PF_W != 0, executable: flags & PF_X != 0 });
                page += PAGE;
            }
            segments.push(Segment { vaddr, mem_size, file });
        }
        if segments.is_empty() {
            return Err("no loadable segments");
        }
        // Segments may share a boundary page: map it once, with the union of
        // their rights.
        pages.sort_by_key(|p| p.vaddr);
        pages.dedup_by(|later, earlier| {
            if later.vaddr == earlier.vaddr {
                earlier.writable |= later.writable;
                earlier.executable |= later.executable;
                true
            } else {
                false
            }
        });
        if !segments.iter().any(|s| (s.vaddr..s.vaddr + s.mem_size).contains(&entry)) {
            return Err("the entry point is outside every segment");
        }
        Ok(Image { entry, pages, segments })
    }

    /// Writes the bytes that belong in the page at `page_vaddr` into `page`
    /// (which must be zero-filled: untouched bytes stay zero, as bss needs).
    pub fn fill_page(&self, page_vaddr: u64, page: &mut [u8; 4096]) {
        for segment in &self.segments {
            let file_end = segment.vaddr + segment.file.len() as u64;
            let start = segment.vaddr.max(page_vaddr);
            let end = file_end.min(page_vaddr + PAGE);
            if start >= end {
                continue;
            }
            let from = (start - segment.vaddr) as usize;
            let to = (start - page_vaddr) as usize;
            let len = (end - start) as usize;
            page[to..to + len].copy_from_slice(&segment.file[from..from + len]);
        }
    }
}
