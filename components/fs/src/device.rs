//! The block device interface.
//!
//! The filesystem asks for whole filesystem blocks (1 KiB to 64 KiB, so
//! always whole 512-byte sectors at sector-aligned offsets), and nothing
//! else: the superblock read is the 1 KiB at offset 1024.
//!
//! **Zero-copy file data (DMA).** File data is read straight into the cache's
//! IO-Lite buffers: on a miss the cache allocates a [`iolite::BufMut`] from
//! its pool and passes `buf.writable()` as `dst`, after coalescing physically
//! contiguous blocks into one request. The bytes never pass through a bounce
//! buffer in this crate. On target, the virtio-blk driver receives a `dst`
//! that lies inside the fs pool's dataport; it knows that dataport's physical
//! frames (the system composition gives it the frame list, one per 4 KiB
//! page, not necessarily contiguous), so it can translate `dst` page by page
//! into a descriptor chain and let the device DMA into the pool pages. Only
//! the page-aligned, page-multiple destinations of file data need this; the
//! (small) metadata reads go into heap blocks, which the driver may serve
//! through its own bounce buffer.

use crate::error::IoError;

/// A read-only block device.
pub trait BlockDevice {
    /// Size of the device in bytes.
    fn size(&self) -> u64;

    /// Reads exactly `dst.len()` bytes starting at byte `offset`. The
    /// filesystem only issues requests whose offset and length are multiples
    /// of 512. `dst` may be pool memory that the driver DMAs into (see the
    /// module docs).
    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError>;
}

/// A byte slice is a device (host tests, the fuzzer, a RAM disk).
impl BlockDevice for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError> {
        let start = usize::try_from(offset).map_err(|_| IoError::OutOfRange)?;
        let end = start.checked_add(dst.len()).ok_or(IoError::OutOfRange)?;
        let src = self.get(start..end).ok_or(IoError::OutOfRange)?;
        dst.copy_from_slice(src);
        Ok(())
    }
}

/// An owned image in memory is a device too.
impl BlockDevice for alloc::vec::Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), IoError> {
        self.as_slice().read_at(offset, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_device_bounds() {
        let img = [7u8; 1024];
        let mut d: &[u8] = &img;
        let mut buf = [0u8; 512];
        d.read_at(512, &mut buf).unwrap();
        assert_eq!(buf, [7u8; 512]);
        assert_eq!(d.read_at(1024, &mut buf), Err(IoError::OutOfRange));
        assert_eq!(d.read_at(u64::MAX, &mut buf), Err(IoError::OutOfRange));
    }
}
