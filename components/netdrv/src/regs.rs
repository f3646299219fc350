//! e1000 (82540EM) registers and descriptor formats (Intel's PCI/PCI-X
//! Family of Gigabit Ethernet Controllers Software Developer's Manual, §13
//! and §3), as far as this driver uses them.
//!
//! Registers are accessed as whole 32-bit words through the uncached BAR0
//! mapping (QEMU implements only 32-bit accesses; a byte access of ICR would
//! clear every cause).

use super::glue;

pub const CTRL: usize = 0x0000;
pub const STATUS: usize = 0x0008;
pub const ICR: usize = 0x00C0;
pub const ITR: usize = 0x00C4;
pub const IMS: usize = 0x00D0;
pub const IMC: usize = 0x00D8;
pub const RCTL: usize = 0x0100;
pub const TCTL: usize = 0x0400;
pub const TIPG: usize = 0x0410;
pub const RDBAL: usize = 0x2800;
pub const RDBAH: usize = 0x2804;
pub const RDLEN: usize = 0x2808;
pub const RDH: usize = 0x2810;
pub const RDT: usize = 0x2818;
pub const RDTR: usize = 0x2820;
pub const RADV: usize = 0x282C;
pub const TDBAL: usize = 0x3800;
pub const TDBAH: usize = 0x3804;
pub const TDLEN: usize = 0x3808;
pub const TDH: usize = 0x3810;
pub const TDT: usize = 0x3818;
pub const TIDV: usize = 0x3820;
pub const TADV: usize = 0x382C;
pub const MTA: usize = 0x5200;
pub const RAL0: usize = 0x5400;
pub const RAH0: usize = 0x5404;

pub const CTRL_ASDE: u32 = 1 << 5;
pub const CTRL_SLU: u32 = 1 << 6;
pub const CTRL_RST: u32 = 1 << 26;
pub const STATUS_LU: u32 = 1 << 1;
pub const RAH_AV: u32 = 1 << 31;

pub const RCTL_EN: u32 = 1 << 1;
pub const RCTL_BAM: u32 = 1 << 15;
/// Buffer size 2048 is BSIZE = 00 with BSEX = 0.
pub const RCTL_SECRC: u32 = 1 << 26;

pub const TCTL_EN: u32 = 1 << 1;
pub const TCTL_PSP: u32 = 1 << 3;
pub const TCTL_CT: u32 = 0x10 << 4;
pub const TCTL_COLD: u32 = 0x40 << 12;
/// IPGT 10, IPGR1 8, IPGR2 6 (the manual's values for IEEE 802.3).
pub const TIPG_DEFAULT: u32 = 10 | 8 << 10 | 6 << 20;

pub const INT_TXDW: u32 = 1 << 0;
pub const INT_LSC: u32 = 1 << 2;
pub const INT_RXDMT0: u32 = 1 << 4;
pub const INT_RXO: u32 = 1 << 6;
pub const INT_RXT0: u32 = 1 << 7;

/// Legacy TX descriptor command bits (byte 11).
pub const TXD_CMD_EOP: u32 = 0x01;
pub const TXD_CMD_IFCS: u32 = 0x02;
pub const TXD_CMD_RS: u32 = 0x08;
pub const TXD_CMD_DEXT: u32 = 0x20;
/// Extended descriptor types (bits 20..24 of the command/length word).
pub const TXD_DTYP_D: u32 = 1 << 20;
pub const TXD_DTYP_C: u32 = 0;
/// Data descriptor POPTS: insert the TCP/UDP checksum.
pub const TXD_POPTS_TXSM: u32 = 0x02;
/// Descriptor done (TX status byte and RX status byte).
pub const DD: u8 = 0x01;
/// RX status: end of packet.
pub const RXD_EOP: u8 = 0x02;

/// The register block.
pub struct Registers {
    base: *mut u32,
}

impl Registers {
    /// The `regs` dataport.
    pub fn new() -> Registers {
        Registers { base: glue::regs::get().as_mut_ptr().cast() }
    }

    /// Reads the register at byte offset `offset`.
    pub fn read(&self, offset: usize) -> u32 {
        assert!(offset.is_multiple_of(4) && offset < glue::regs::SIZE);
        // SAFETY: in range and aligned (checked); the loader maps SIZE bytes
        // of device memory, uncached, for as long as we run.
        unsafe { self.base.add(offset / 4).read_volatile() }
    }

    /// Writes the register at byte offset `offset`.
    pub fn write(&mut self, offset: usize, value: u32) {
        assert!(offset.is_multiple_of(4) && offset < glue::regs::SIZE);
        // SAFETY: as in `read`; the mapping is read-write.
        unsafe { self.base.add(offset / 4).write_volatile(value) }
    }

    /// The MAC address in receive-address entry 0, if that entry is valid.
    pub fn mac(&self) -> Option<[u8; 6]> {
        let (low, high) = (self.read(RAL0), self.read(RAH0));
        if high & RAH_AV == 0 {
            return None;
        }
        let [a, b, c, d] = low.to_le_bytes();
        let [e, f, _, _] = high.to_le_bytes();
        Some([a, b, c, d, e, f])
    }
}
