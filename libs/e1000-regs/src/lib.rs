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
/// 82574 interrupt cause: set in ICR whenever a cause the mask lets
/// through is pending (the interrupt is asserted); a read without it, in
/// INTx mode, is not this device's interrupt.
pub const INT_ASSERTED: u32 = 1 << 31;
/// The causes the 82574 defines: the 82540EM's, ACK and MNG (17, 18), the
/// per-queue causes of its MSI-X mode (20..=24) and [`INT_ASSERTED`].
pub const INT_DEFINED_82574: u32 = INT_DEFINED | 0b11 << 17 | 0x1f << 20 | INT_ASSERTED;
/// 82574 extended device control.
pub const CTRL_EXT: usize = 0x0018;
/// CTRL_EXT: interrupt acknowledge auto-mask enable (reading an asserted
/// ICR also masks the causes in [`IAM`]).
pub const CTRL_EXT_IAME: u32 = 1 << 27;
/// 82574 interrupt acknowledge auto-mask: the causes a read of ICR masks
/// while [`CTRL_EXT_IAME`] is set.
pub const IAM: usize = 0x00E0;
/// 82574 extended interrupt auto-clear (MSI-X only: the vectors whose
/// causes clear themselves when sent).
pub const EIAC: usize = 0x00DC;

/// The models this register file describes, told apart by PCI ID. The
/// 82574 keeps the 82540EM's legacy descriptors, ring and receive/transmit
/// control registers, checksum and TSO context descriptors and ITR; what
/// a driver must treat differently is listed on [`Model`]'s methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The 82540EM (QEMU `-device e1000`, 8086:100e).
    I82540EM,
    /// The 82574L (QEMU `-device e1000e`, 8086:10d3).
    I82574L,
}

impl Model {
    /// The model with this PCI vendor and device ID, if supported.
    pub const fn from_ids(vendor: u16, device: u16) -> Option<Model> {
        match (vendor, device) {
            (0x8086, 0x100e) => Some(Model::I82540EM),
            (0x8086, 0x10d3) => Some(Model::I82574L),
            _ => None,
        }
    }

    /// The driver's name for it (what `/cgi-bin/stats` and the boot log
    /// say).
    pub const fn name(self) -> &'static str {
        match self {
            Model::I82540EM => "e1000",
            Model::I82574L => "e1000e",
        }
    }

    /// Every ICR bit the model may set; a read with any other bit set did
    /// not come from it (all ones: a device that no longer answers).
    pub const fn causes_defined(self) -> u32 {
        match self {
            Model::I82540EM => INT_DEFINED,
            Model::I82574L => INT_DEFINED_82574,
        }
    }
}

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
/// Data descriptor POPTS: insert the IPv4 header checksum.
pub const TXD_POPTS_IXSM: u32 = 0x01;
/// TX command (context and data descriptors): TCP segmentation enable.
pub const TXD_CMD_TSE: u32 = 0x04;
/// Context descriptor TUCMD: the packet is IPv4 (the bit of IFCS in a
/// data descriptor).
pub const TXD_CMD_IP: u32 = 0x02;
/// Context descriptor TUCMD: the packet is TCP (the bit of EOP in a data
/// descriptor).
pub const TXD_CMD_TCP: u32 = 0x01;
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

/// The second word of a TX data descriptor of `len` bytes of a frame the
/// device cuts into TCP segments with the current TSO context
/// ([`TsoContext`]); `last` ends the frame (EOP, RS). Both checksums are
/// inserted in every segment (IXSM, TXSM).
pub const fn tx_data_tso(len: u16, last: bool) -> u64 {
    let end = if last { TXD_CMD_EOP | TXD_CMD_RS } else { 0 };
    let cmd = TXD_CMD_DEXT | TXD_CMD_IFCS | TXD_CMD_TSE | end;
    len as u64 | TXD_DTYP_D as u64 | (cmd as u64) << 24 | ((TXD_POPTS_IXSM | TXD_POPTS_TXSM) as u64) << 40
}

/// A TCP/IPv4 segmentation context (§3.3.6, §3.5): the data descriptors
/// that follow ([`tx_data_tso`]) carry one frame of `hdr_len` bytes of
/// headers and `paylen` bytes of payload, which the device sends as
/// segments of at most `mss` payload bytes, each with a copy of the
/// headers in which it updates the IPv4 total length and identification,
/// the TCP sequence number and flags, and computes the IPv4 header
/// checksum (bytes `ipcss..=ipcse`, at `ipcso`) and the TCP checksum
/// (from `tucss` to the end, at `tucso`, seeded with the pseudo-header
/// sum without its length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsoContext {
    /// IPCSS: the IPv4 header's first byte.
    pub ipcss: u8,
    /// IPCSO: where its checksum goes.
    pub ipcso: u8,
    /// IPCSE: its last byte (inclusive).
    pub ipcse: u16,
    /// TUCSS: the TCP header's first byte.
    pub tucss: u8,
    /// TUCSO: where the TCP checksum goes.
    pub tucso: u8,
    /// HDRLEN: bytes of headers (copied in front of every segment).
    pub hdr_len: u8,
    /// MSS: payload bytes per segment, at most.
    pub mss: u16,
    /// PAYLEN: payload bytes of the whole frame (20 bits).
    pub paylen: u32,
}

impl TsoContext {
    /// The descriptor: IPCSS, IPCSO, IPCSE, TUCSS, TUCSO, TUCSE = 0 (to the
    /// end) in the first word; PAYLEN, DTYP context, TUCMD = DEXT | TSE |
    /// IP | TCP, HDRLEN and MSS in the second.
    pub const fn words(&self) -> [u64; 2] {
        let w0 = self.ipcss as u64
            | (self.ipcso as u64) << 8
            | (self.ipcse as u64) << 16
            | (self.tucss as u64) << 32
            | (self.tucso as u64) << 40;
        let cmd = TXD_CMD_DEXT | TXD_CMD_TSE | TXD_CMD_IP | TXD_CMD_TCP;
        let w1 = (self.paylen & 0xf_ffff) as u64
            | TXD_DTYP_C as u64
            | (cmd as u64) << 24
            | (self.hdr_len as u64) << 40
            | (self.mss as u64) << 48;
        [w0, w1]
    }
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
        // TSO data: DTYP 1, CMD DEXT | TSE | IFCS (+ EOP | RS), POPTS IXSM | TXSM.
        assert_eq!(tx_data_tso(1000, false), 1000 | 1 << 20 | 0x26 << 24 | 0x03 << 40);
        assert_eq!(tx_data_tso(54, true), 54 | 1 << 20 | 0x2f << 24 | 0x03 << 40);
        // TSO context: the byte layout of the manual's Table 3-10.
        let c =
            TsoContext { ipcss: 14, ipcso: 24, ipcse: 33, tucss: 34, tucso: 50, hdr_len: 66, mss: 1448, paylen: 65469 };
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&c.words()[0].to_le_bytes());
        bytes[8..].copy_from_slice(&c.words()[1].to_le_bytes());
        let paylen = 65469u32.to_le_bytes();
        let mss = 1448u16.to_le_bytes();
        #[rustfmt::skip]
        let want = [
            14, 24, 33, 0,                          // IPCSS, IPCSO, IPCSE
            34, 50, 0, 0,                           // TUCSS, TUCSO, TUCSE
            paylen[0], paylen[1], paylen[2], 0x27,  // PAYLEN (20 bits), DTYP 0; TUCMD DEXT | TSE | IP | TCP
            0, 66, mss[0], mss[1],                  // STA, HDRLEN, MSS
        ];
        assert_eq!(bytes, want);
        assert_eq!(TsoContext { paylen: 0x12_3456, ..c }.words()[1] & 0xff_ffff, 0x02_3456, "PAYLEN is 20 bits");
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
    fn models_by_pci_id() {
        assert_eq!(Model::from_ids(0x8086, 0x100e), Some(Model::I82540EM));
        assert_eq!(Model::from_ids(0x8086, 0x10d3), Some(Model::I82574L));
        // The 82576 (igb) and a virtio-net are not these models.
        assert_eq!(Model::from_ids(0x8086, 0x10c9), None);
        assert_eq!(Model::from_ids(0x1af4, 0x1041), None);
        assert_eq!((Model::I82540EM.name(), Model::I82574L.name()), ("e1000", "e1000e"));
        assert_eq!(Model::I82540EM.causes_defined() & INT_ASSERTED, 0);
        assert_eq!(Model::I82574L.causes_defined(), 0x81f7_ffff);
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
