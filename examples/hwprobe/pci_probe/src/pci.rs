//! PCI configuration mechanism #1: the address/data port pair 0xCF8/0xCFC,
//! through the I/O port capability the assembly grants (`0xcf8:0xcff`). The
//! probe drives the ports itself, to show the capability at work; the real
//! drivers go through the pci_config server. The register layout and BAR
//! sizing are the shared `pci` crate's.

pub use ::pci::*;

use super::glue::pci_config as ports;

const CONFIG_ADDRESS: u16 = 0xCF8;
const CONFIG_DATA: u16 = 0xCFC;

/// Configuration space through the ports (an I/O port capability).
#[derive(Clone, Copy)]
pub struct ThroughPorts;

impl ConfigAccess for ThroughPorts {
    type Error = sel4::Error;

    fn read32(&self, f: Function, register: u8) -> sel4::Result<u32> {
        ports::out32(CONFIG_ADDRESS, f.config_address(register))?;
        ports::in32(CONFIG_DATA)
    }

    fn write32(&self, f: Function, register: u8, value: u32) -> sel4::Result<()> {
        ports::out32(CONFIG_ADDRESS, f.config_address(register))?;
        ports::out32(CONFIG_DATA, value)
    }
}
