//! PCI configuration mechanism #1 through the `pci_config` I/O port
//! capability (0xCF8..0xCFF): just what the driver needs to find and
//! enable its device.

use super::glue::pci_config as ports;

const CONFIG_ADDRESS: u16 = 0xCF8;
const CONFIG_DATA: u16 = 0xCFC;

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
    fn address(&self, register: u8) -> u32 {
        (1 << 31) | u32::from(self.device & 0x1f) << 11 | u32::from(self.function & 7) << 8 | u32::from(register & 0xfc)
    }

    /// Reads the dword at `register`.
    pub fn read(&self, register: u8) -> sel4::Result<u32> {
        ports::out32(CONFIG_ADDRESS, self.address(register))?;
        ports::in32(CONFIG_DATA)
    }

    /// Writes the dword at `register`.
    pub fn write(&self, register: u8, value: u32) -> sel4::Result<()> {
        ports::out32(CONFIG_ADDRESS, self.address(register))?;
        ports::out32(CONFIG_DATA, value)
    }
}
