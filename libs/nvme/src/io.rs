//! Reads: one Read command per request of at most [`MAX_TRANSFER`] bytes,
//! its destination described by PRP1, PRP2 and, beyond two pages, a PRP
//! list (§4.3).

use super::{layout, opcode, Command, Controller, Error, Registers, Wait, MAX_TRANSFER, PAGE};

/// Where a transfer of `len` bytes at physical `phys` goes: PRP1, PRP2 and
/// the PRP list's entries (pages after the second), which the caller
/// writes to the list page at `list_phys` when there are any.
pub fn prps(phys: u64, len: usize, list_phys: u64, list: &mut [u64; PAGE / 8]) -> (u64, u64, usize) {
    let page = PAGE as u64;
    let first_len = (page - phys % page).min(len as u64) as usize;
    let rest = len - first_len;
    let second = (phys / page + 1) * page;
    if rest == 0 {
        return (phys, 0, 0);
    }
    if rest <= PAGE {
        return (phys, second, 0);
    }
    let pages = rest.div_ceil(PAGE);
    for (i, e) in list.iter_mut().take(pages).enumerate() {
        *e = second + (i * PAGE) as u64;
    }
    (phys, list_phys, pages)
}

impl<R: Registers> Controller<R> {
    /// Reads `len` bytes from byte `offset` of namespace 1 into the
    /// physically contiguous memory at `phys` (the controller writes it
    /// directly: DMA). Offset and length must be whole blocks.
    pub fn read_phys(&mut self, offset: u64, phys: u64, len: usize, wait: &mut impl Wait) -> Result<(), Error> {
        self.check_range(offset, len)?;
        // PRP entries are dword-aligned (§4.3).
        if !phys.is_multiple_of(4) {
            return Err(Error::OutOfRange);
        }
        let step = self.step();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(step);
            self.read_one(offset + done as u64, phys + done as u64, n, wait)?;
            done += n;
        }
        self.stats.dma_bytes += len as u64;
        Ok(())
    }

    /// Reads `dst.len()` bytes from byte `offset` through the bounce area
    /// (for memory the controller cannot reach), copying them out.
    pub fn read_bounce(&mut self, offset: u64, dst: &mut [u8], wait: &mut impl Wait) -> Result<(), Error> {
        self.check_range(offset, dst.len())?;
        let step = self.step().min(layout::BOUNCE_LEN);
        let bounce = self.dma.phys + layout::BOUNCE as u64;
        let mut done = 0;
        while done < dst.len() {
            let n = (dst.len() - done).min(step);
            self.read_one(offset + done as u64, bounce, n, wait)?;
            self.dma.copy_out(layout::BOUNCE, &mut dst[done..done + n]);
            done += n;
        }
        self.stats.bounce_bytes += dst.len() as u64;
        Ok(())
    }

    /// The longest one command may carry: ours, the controller's MDTS.
    fn step(&self) -> usize {
        match self.identity.max_transfer {
            0 => MAX_TRANSFER,
            m => MAX_TRANSFER.min(m),
        }
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<(), Error> {
        let bs = u64::from(self.identity.block_size);
        let end = offset.checked_add(len as u64).ok_or(Error::OutOfRange)?;
        if !offset.is_multiple_of(bs) || !(len as u64).is_multiple_of(bs) || end > self.size() {
            return Err(Error::OutOfRange);
        }
        Ok(())
    }

    fn read_one(&mut self, offset: u64, phys: u64, len: usize, wait: &mut impl Wait) -> Result<(), Error> {
        let bs = u64::from(self.identity.block_size);
        let lba = offset / bs;
        let blocks = (len as u64 / bs) as u32;
        let mut list = [0u64; PAGE / 8];
        let list_phys = self.dma.phys + layout::PRP_LIST as u64;
        let (prp1, prp2, entries) = prps(phys, len, list_phys, &mut list);
        for (i, e) in list.iter().take(entries).enumerate() {
            self.dma.write_u64(layout::PRP_LIST + 8 * i, *e);
        }
        if entries > 0 {
            self.stats.prp_lists += 1;
        }
        let cmd = Command {
            opcode: opcode::READ,
            nsid: 1,
            prp1,
            prp2,
            cdw10: lba as u32,
            cdw11: (lba >> 32) as u32,
            cdw12: blocks - 1,
        };
        self.execute(true, cmd, wait)?;
        self.stats.reads += 1;
        Ok(())
    }
}
