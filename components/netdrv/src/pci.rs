//! PCI configuration space through the pci_config component
//! (camkes/interfaces/PciConfig.idl4): it alone holds ports 0xCF8..0xCFF (an
//! address/data pair components cannot share safely) and lets netdrv touch
//! only the functions the assembly grants it (the e1000).

#![allow(dead_code)] // not every helper is used here

use super::glue::pci_config as pci;

/// Vendor ID (low 16 bits) and device ID (high 16 bits).
pub const REG_ID: u8 = 0x00;
/// Command (low 16 bits) and status (high 16 bits).
pub const REG_COMMAND: u8 = 0x04;
/// Revision (bits 0..8) and class code (bits 8..32).
pub const REG_CLASS: u8 = 0x08;
/// Header type in bits 16..24; bit 23 marks a multi-function device.
pub const REG_HEADER: u8 = 0x0C;
/// Base address register 0.
pub const REG_BAR0: u8 = 0x10;
/// Interrupt line (bits 0..8) and interrupt pin (bits 8..16).
pub const REG_INTERRUPT: u8 = 0x3C;

/// Command register: the function answers memory-space accesses.
pub const COMMAND_MEMORY: u32 = 1 << 1;
/// Command register: the function may master the bus (DMA).
pub const COMMAND_BUS_MASTER: u32 = 1 << 2;
/// Command register: INTx# disabled.
pub const COMMAND_INTX_DISABLE: u32 = 1 << 10;

/// A PCI function on bus 0..255, device 0..31, function 0..7.
#[derive(Clone, Copy)]
pub struct Function {
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl core::fmt::Display for Function {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:02x}:{:02x}.{:x}",
            self.bus, self.device, self.function
        )
    }
}

impl Function {
    /// Bus 0 device/function number as pci_config names it.
    fn bdf(&self) -> u32 {
        u32::from(self.bus) << 8 | u32::from(self.device & 0x1f) << 3 | u32::from(self.function & 0x7)
    }

    /// Reads the dword at `register` (a multiple of 4); all ones if nothing
    /// answers or the function is not granted to us.
    pub fn read(&self, register: u8) -> sel4::Result<u32> {
        Ok(pci::read32(self.bdf(), u32::from(register & 0xfc)))
    }

    /// Writes the dword at `register` (a multiple of 4).
    pub fn write(&self, register: u8, value: u32) -> sel4::Result<()> {
        match pci::write32(self.bdf(), u32::from(register & 0xfc), value) {
            0 => Ok(()),
            _ => Err(sel4::Error::IllegalOperation),
        }
    }

    /// Vendor and device ID, or `None` if no function answers here.
    pub fn ids(&self) -> sel4::Result<Option<(u16, u16)>> {
        let id = self.read(REG_ID)?;
        let vendor = id as u16;
        Ok((vendor != 0xffff).then_some((vendor, (id >> 16) as u16)))
    }
}

/// A memory BAR: base address and size in bytes.
pub struct MemoryBar {
    pub base: u64,
    pub size: u64,
}

/// Reads and sizes BAR0, a memory BAR (32- or 64-bit). Sizing writes all
/// ones and reads back which bits stick; memory decoding is off meanwhile
/// so nothing answers at a half-written address, and everything is
/// restored afterwards. `Ok(None)` if BAR0 is an I/O BAR.
pub fn memory_bar0(f: Function) -> sel4::Result<Option<MemoryBar>> {
    let low = f.read(REG_BAR0)?;
    if low & 1 != 0 {
        return Ok(None);
    }
    let wide = (low >> 1) & 3 == 2;
    let high = if wide { f.read(REG_BAR0 + 4)? } else { 0 };

    let command = f.read(REG_COMMAND)?;
    f.write(REG_COMMAND, command & 0xffff & !COMMAND_MEMORY)?;
    f.write(REG_BAR0, !0)?;
    let low_mask = f.read(REG_BAR0)?;
    f.write(REG_BAR0, low)?;
    let high_mask = if wide {
        f.write(REG_BAR0 + 4, !0)?;
        let mask = f.read(REG_BAR0 + 4)?;
        f.write(REG_BAR0 + 4, high)?;
        mask
    } else {
        !0
    };
    // Writing the command register's low half leaves the status bits alone
    // (they are write-one-to-clear, and we write zeros there).
    f.write(REG_COMMAND, command & 0xffff)?;

    let mask = u64::from(high_mask) << 32 | u64::from(low_mask & !0xf);
    Ok(Some(MemoryBar {
        base: u64::from(high) << 32 | u64::from(low & !0xf),
        size: (!mask).wrapping_add(1),
    }))
}

/// Calls `found(function, vendor, device, class)` for every function on
/// `bus` (functions 1..7 only of multi-function devices).
pub fn scan_bus(bus: u8, mut found: impl FnMut(Function, u16, u16, u32)) -> sel4::Result<()> {
    for device in 0..32 {
        for function in 0..8 {
            let f = Function {
                bus,
                device,
                function,
            };
            let Some((vendor, device_id)) = f.ids()? else {
                if function == 0 {
                    break;
                }
                continue;
            };
            found(f, vendor, device_id, f.read(REG_CLASS)? >> 8);
            if function == 0 && f.read(REG_HEADER)? & (1 << 23) == 0 {
                break;
            }
        }
    }
    Ok(())
}
