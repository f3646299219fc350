//! PCI configuration space through the pci_config component
//! (camkes/interfaces/PciConfig.idl4): it alone holds ports 0xCF8..0xCFF
//! (an address/data pair that components cannot share safely) and lets us
//! touch only the functions the assembly grants fs (the disk). Just what the
//! driver needs to find and enable its device.

use super::glue::pci_config as pci;

/// The server refused the access (a function the assembly does not grant us).
#[derive(Debug, Clone, Copy)]
pub struct Refused;

/// Vendor ID (low 16 bits), device ID (high 16 bits).
pub const REG_ID: u8 = 0x00;
/// Command (low 16 bits), status (high 16 bits).
pub const REG_COMMAND: u8 = 0x04;
/// Base address register 0.
pub const REG_BAR0: u8 = 0x10;
/// Interrupt line (bits 0..8), interrupt pin (bits 8..16).
pub const REG_INTERRUPT: u8 = 0x3C;

/// Command: I/O space decoding.
pub const COMMAND_IO: u32 = 1 << 0;
/// Command: bus mastering (the device may DMA).
pub const COMMAND_BUS_MASTER: u32 = 1 << 2;
/// Command: INTx# disabled.
pub const COMMAND_INTX_DISABLE: u32 = 1 << 10;

/// A PCI function on bus 0.
#[derive(Clone, Copy)]
pub struct Function {
    pub device: u8,
    pub function: u8,
}

impl core::fmt::Display for Function {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "00:{:02x}.{:x}", self.device, self.function)
    }
}

impl Function {
    fn bdf(&self) -> u32 {
        u32::from(self.device & 0x1f) << 3 | u32::from(self.function & 7)
    }

    /// Reads the dword at `register` (all ones if nothing answers or the
    /// function is not ours).
    pub fn read(&self, register: u8) -> Result<u32, Refused> {
        Ok(pci::read32(self.bdf(), u32::from(register & 0xfc)))
    }

    /// Writes the dword at `register`.
    pub fn write(&self, register: u8, value: u32) -> Result<(), Refused> {
        match pci::write32(self.bdf(), u32::from(register & 0xfc), value) {
            0 => Ok(()),
            _ => Err(Refused),
        }
    }
}
