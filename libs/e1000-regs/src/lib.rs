//! e1000 (82540EM) registers and descriptor formats (Intel's PCI/PCI-X
//! Family of Gigabit Ethernet Controllers Software Developer's Manual, §13
//! and §3), as far as Iolite OS uses them: one definition for the driver
//! (netdrv) and the hardware probe (pci_probe).
//!
//! Registers are accessed as whole 32-bit words ([`RegisterFile`]): QEMU's
//! e1000 implements only 32-bit accesses, so a byte write becomes a dword
//! write with the other three bytes zero, and the first byte read of ICR
//! would clear every cause. [`Mmio`] is the real register block (the BAR0
//! dataport, mapped uncached by the loader); netdrv's host tests implement
//! [`RegisterFile`] with a simulated device instead.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

use glue_rt::{Dataport, ReadWrite};

/// Device control.
pub const CTRL: usize = 0x0000;
/// Device status (read-only).
pub const STATUS: usize = 0x0008;
/// Interrupt cause read: reading returns the pending causes and clears them.
pub const ICR: usize = 0x00C0;
/// Interrupt throttling: the minimum interval between interrupts, in 256 ns units.
pub const ITR: usize = 0x00C4;
/// Interrupt cause set: writing 1s raises those causes as if the device had.
pub const ICS: usize = 0x00C8;
/// Interrupt mask set: 1s enable those causes to assert INTA#.
pub const IMS: usize = 0x00D0;
/// Interrupt mask clear: 1s disable those causes.
pub const IMC: usize = 0x00D8;
/// Receive control.
pub const RCTL: usize = 0x0100;
/// Transmit control.
pub const TCTL: usize = 0x0400;
/// Transmit inter-packet gap.
pub const TIPG: usize = 0x0410;
/// RX descriptor ring base, low 32 bits.
pub const RDBAL: usize = 0x2800;
/// RX descriptor ring base, high 32 bits.
pub const RDBAH: usize = 0x2804;
/// RX descriptor ring length in bytes (a multiple of 128).
pub const RDLEN: usize = 0x2808;
/// RX descriptor head: the next descriptor the device fills.
pub const RDH: usize = 0x2810;
/// RX descriptor tail: one past the last descriptor the device may fill.
pub const RDT: usize = 0x2818;
/// RX interrupt delay timer.
pub const RDTR: usize = 0x2820;
/// RX interrupt absolute delay timer.
pub const RADV: usize = 0x282C;
/// TX descriptor ring base, low 32 bits.
pub const TDBAL: usize = 0x3800;
/// TX descriptor ring base, high 32 bits.
pub const TDBAH: usize = 0x3804;
/// TX descriptor ring length in bytes (a multiple of 128).
pub const TDLEN: usize = 0x3808;
/// TX descriptor head: the next descriptor the device processes.
pub const TDH: usize = 0x3810;
/// TX descriptor tail: one past the last descriptor software posted.
pub const TDT: usize = 0x3818;
/// TX interrupt delay value.
pub const TIDV: usize = 0x3820;
/// TX absolute interrupt delay value.
pub const TADV: usize = 0x382C;
/// Multicast table array (128 words).
pub const MTA: usize = 0x5200;
/// Receive address low, entry 0: the first four bytes of the MAC address.
pub const RAL0: usize = 0x5400;
/// Receive address high, entry 0: the last two bytes and [`RAH_AV`].
pub const RAH0: usize = 0x5404;

/// CTRL: auto-speed detection.
pub const CTRL_ASDE: u32 = 1 << 5;
/// CTRL: set link up.
pub const CTRL_SLU: u32 = 1 << 6;
/// CTRL: device reset (self-clearing).
pub const CTRL_RST: u32 = 1 << 26;
/// STATUS: link up.
pub const STATUS_LU: u32 = 1 << 1;
/// RAH: the entry is valid.
pub const RAH_AV: u32 = 1 << 31;

/// RCTL: receiver enable.
pub const RCTL_EN: u32 = 1 << 1;
/// RCTL: accept broadcast. The buffer size, 2048, is BSIZE = 00 with
/// BSEX = 0 ([`RX_BUFFER_BYTES`]).
pub const RCTL_BAM: u32 = 1 << 15;
/// RCTL: strip the Ethernet CRC.
pub const RCTL_SECRC: u32 = 1 << 26;
/// The receive buffer size RCTL selects with BSIZE = 00, BSEX = 0.
pub const RX_BUFFER_BYTES: usize = 2048;

/// TCTL: transmitter enable.
pub const TCTL_EN: u32 = 1 << 1;
/// TCTL: pad short packets.
pub const TCTL_PSP: u32 = 1 << 3;
/// TCTL: collision threshold 16.
pub const TCTL_CT: u32 = 0x10 << 4;
/// TCTL: collision distance 64 (full duplex).
pub const TCTL_COLD: u32 = 0x40 << 12;
/// IPGT 10, IPGR1 8, IPGR2 6 (the manual's values for IEEE 802.3).
pub const TIPG_DEFAULT: u32 = 10 | 8 << 10 | 6 << 20;

/// Interrupt cause (ICR/ICS/IMS/IMC): transmit descriptor written back.
pub const INT_TXDW: u32 = 1 << 0;
/// Interrupt cause: link status change.
pub const INT_LSC: u32 = 1 << 2;
/// Interrupt cause: RX descriptors below the minimum threshold.
pub const INT_RXDMT0: u32 = 1 << 4;
/// Interrupt cause: receiver overrun (a frame arrived with no descriptor).
pub const INT_RXO: u32 = 1 << 6;
/// Interrupt cause: receiver timer (a frame arrived).
pub const INT_RXT0: u32 = 1 << 7;
/// The causes the 82540EM defines (bits 0..=16; the rest are reserved and
/// read as 0). A read with a reserved bit set did not come from the device.
pub const INT_DEFINED: u32 = 0x1_FFFF;

/// Legacy TX descriptor command bit (byte 11): end of packet.
pub const TXD_CMD_EOP: u32 = 0x01;
/// TX command: insert the Ethernet CRC.
pub const TXD_CMD_IFCS: u32 = 0x02;
/// TX command: report status (write DD back when done).
pub const TXD_CMD_RS: u32 = 0x08;
/// TX command: extended descriptor (context or data).
pub const TXD_CMD_DEXT: u32 = 0x20;
/// Extended descriptor type data (bits 20..24 of the command/length word).
pub const TXD_DTYP_D: u32 = 1 << 20;
/// Extended descriptor type context.
pub const TXD_DTYP_C: u32 = 0;
/// Data descriptor POPTS: insert the TCP/UDP checksum.
pub const TXD_POPTS_TXSM: u32 = 0x02;
/// Descriptor done (TX status byte and RX status byte).
pub const DD: u8 = 0x01;
/// RX status: end of packet.
pub const RXD_EOP: u8 = 0x02;
/// Bytes of one descriptor (RX and TX alike).
pub const DESC_BYTES: usize = 16;

/// The second word of a TX data descriptor of `len` bytes; `last` ends the
/// frame (EOP, and RS: the device writes DD back); `checksum` makes it an
/// extended data descriptor that inserts the TCP checksum the current
/// context describes ([`tx_context`]).
pub const fn tx_data(len: u16, last: bool, checksum: bool) -> u64 {
    let end = if last { TXD_CMD_EOP | TXD_CMD_RS } else { 0 };
    if checksum {
        let cmd = TXD_CMD_DEXT | TXD_CMD_IFCS | end;
        len as u64 | TXD_DTYP_D as u64 | (cmd as u64) << 24 | (TXD_POPTS_TXSM as u64) << 40
    } else {
        len as u64 | ((TXD_CMD_IFCS | end) as u64) << 24
    }
}

/// A TCP/UDP checksum context descriptor: the checksum covers the frame
/// from byte `start` (TUCSS) to its end (TUCSE = 0) and goes to byte
/// `offset` (TUCSO). The IP fields are unused (the stack computes the IPv4
/// header checksum itself).
pub const fn tx_context(start: u8, offset: u8) -> [u64; 2] {
    let tu = start as u64 | (offset as u64) << 8;
    [tu << 32, ((TXD_CMD_DEXT << 24) | TXD_DTYP_C) as u64]
}

/// The status byte of a written-back TX descriptor (second word).
pub const fn tx_status(w1: u64) -> u8 {
    (w1 >> 32) as u8
}

/// A written-back RX descriptor's second word: (status, errors, length).
pub const fn rx_writeback(w1: u64) -> (u8, u8, u16) {
    ((w1 >> 32) as u8, (w1 >> 40) as u8, w1 as u16)
}

/// 32-bit access to the register block at byte offsets.
pub trait RegisterFile {
    /// Reads the register at byte offset `offset`.
    fn read(&self, offset: usize) -> u32;
    /// Writes the register at byte offset `offset`.
    fn write(&mut self, offset: usize, value: u32);
}

/// The MAC address in receive-address entry 0, if that entry is valid.
pub fn mac<R: RegisterFile + ?Sized>(regs: &R) -> Option<[u8; 6]> {
    let (low, high) = (regs.read(RAL0), regs.read(RAH0));
    if high & RAH_AV == 0 {
        return None;
    }
    let [a, b, c, d] = low.to_le_bytes();
    let [e, f, _, _] = high.to_le_bytes();
    Some([a, b, c, d, e, f])
}

/// The register block: the device's BAR0, a dataport the loader maps
/// uncached (seL4HardwareMMIO).
pub struct Mmio {
    regs: Dataport<ReadWrite>,
}

impl Mmio {
    /// The registers behind `regs` (the component's `regs` dataport).
    pub fn new(regs: Dataport<ReadWrite>) -> Mmio {
        Mmio { regs }
    }

    fn word(&self, offset: usize) -> *mut u32 {
        assert!(offset.is_multiple_of(4) && offset < self.regs.len(), "e1000 register {offset:#x} out of range");
        // In range and aligned (checked); the dataport starts page-aligned.
        self.regs.as_mut_ptr().wrapping_add(offset).cast()
    }
}

impl RegisterFile for Mmio {
    fn read(&self, offset: usize) -> u32 {
        // SAFETY: an aligned word inside the mapping (checked), which the
        // loader keeps mapped for as long as we run; device memory is only
        // ever accessed volatile.
        unsafe { self.word(offset).read_volatile() }
    }

    fn write(&mut self, offset: usize, value: u32) {
        // SAFETY: as in `read`; the mapping is read-write (the type says so).
        unsafe { self.word(offset).write_volatile(value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_words_match_the_manual() {
        // Legacy data: length, CMD in bits 24..32 (IFCS | EOP | RS = 0x0b).
        assert_eq!(tx_data(60, true, false), 60 | 0x0b << 24);
        assert_eq!(tx_data(1514, false, false), 1514 | 0x02 << 24);
        // Extended data: DTYP 1 (bit 20), DEXT, POPTS.TXSM in bits 40..48.
        assert_eq!(tx_data(100, true, true), 100 | 1 << 20 | 0x2b << 24 | 0x02 << 40);
        // Context: TUCSS in bits 32..40, TUCSO in 40..48, TUCSE 0; DEXT, DTYP 0.
        assert_eq!(tx_context(34, 50), [34 << 32 | 50 << 40, 0x20 << 24]);
        assert_eq!(tx_status(0x01 << 32), DD);
        assert_eq!(rx_writeback(0x0000_0003_0000_05ea), (0x03, 0x00, 1514));
        assert_eq!(rx_writeback(0x0000_0103_0000_0040), (0x03, 0x01, 64), "the errors byte");
    }

    struct Words([u32; 0x1600]);

    impl RegisterFile for Words {
        fn read(&self, offset: usize) -> u32 {
            self.0[offset / 4]
        }
        fn write(&mut self, offset: usize, value: u32) {
            self.0[offset / 4] = value;
        }
    }

    #[test]
    fn mac_only_from_a_valid_entry() {
        let mut r = Words([0; 0x1600]);
        r.write(RAL0, u32::from_le_bytes([0x52, 0x54, 0x00, 0x12]));
        r.write(RAH0, u32::from_le_bytes([0x34, 0x56, 0, 0]));
        assert_eq!(mac(&r), None, "RAH.AV clear");
        r.write(RAH0, r.read(RAH0) | RAH_AV);
        assert_eq!(mac(&r), Some([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
    }

    #[test]
    fn mmio_is_word_access_inside_the_block() {
        let mut mem = vec![0u32; 64];
        let base = mem.as_mut_ptr() as usize;
        // SAFETY: `mem` outlives every handle, nothing else touches it.
        let block = || Mmio::new(unsafe { Dataport::<ReadWrite>::new(base, 256) });
        let mut m = block();
        m.write(STATUS, 0xdead_beef);
        assert_eq!(m.read(STATUS), 0xdead_beef);
        assert_eq!(mem[2], 0xdead_beef);
        let mut past = block();
        assert!(std::panic::catch_unwind(move || past.write(256, 1)).is_err(), "past the block");
        let unaligned = block();
        assert!(std::panic::catch_unwind(move || unaligned.read(6)).is_err(), "unaligned");
    }
}
