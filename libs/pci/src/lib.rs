//! PCI configuration space, independent of how it is reached.
//!
//! Components reach configuration space in one of two ways: through the
//! pci_config server's RPC (camkes/interfaces/PciConfig.idl4; only it holds
//! the 0xCF8/0xCFC address/data pair, which components cannot share
//! safely), or, for the hardware probe, through those ports directly. Each
//! implements [`ConfigAccess`]; everything above it (the register layout,
//! BAR sizing, bus scans, the two address encodings) lives here once, and
//! so does what a driver may write ([`DriverPolicy`], which the pci_config
//! server enforces).

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

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

/// Command register: the function answers I/O-space accesses.
pub const COMMAND_IO: u32 = 1 << 0;
/// Command register: the function answers memory-space accesses.
pub const COMMAND_MEMORY: u32 = 1 << 1;
/// Command register: the function may master the bus (DMA).
pub const COMMAND_BUS_MASTER: u32 = 1 << 2;
/// Command register: INTx# disabled.
pub const COMMAND_INTX_DISABLE: u32 = 1 << 10;

/// The command register bits a driver may change through pci_config:
/// decoding of its I/O and memory BARs, bus mastering (DMA) and INTx#.
/// Everything else in configuration space (BARs, expansion ROM, interrupt
/// line, MSI and the other capabilities, error reporting) stays as the
/// firmware left it: a driver that could move its BARs or point MSI writes
/// anywhere could reach memory it was never granted.
pub const COMMAND_DRIVER_BITS: u32 = COMMAND_IO | COMMAND_MEMORY | COMMAND_BUS_MASTER | COMMAND_INTX_DISABLE;

/// Why a driver's write to configuration space was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteRefusal {
    /// Not the command register: only that one is writable.
    NotCommand,
    /// A command bit outside [`COMMAND_DRIVER_BITS`] would change (these
    /// bits).
    CommandBits(u32),
    /// Ones in the status half (write-one-to-clear error bits).
    StatusBits(u32),
}

impl core::fmt::Display for WriteRefusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WriteRefusal::NotCommand => f.write_str("drivers write only the command register"),
            WriteRefusal::CommandBits(b) => write!(f, "command bits {b:#06x} are not a driver's to change"),
            WriteRefusal::StatusBits(b) => write!(f, "status bits {b:#010x} (write-one-to-clear)"),
        }
    }
}

/// Whether a driver may write `value` to `register` of its own function,
/// whose dword there now reads `current`: only the command register, only
/// the bits of [`COMMAND_DRIVER_BITS`] may change, and the status half must
/// be written as zeros (which changes nothing).
pub fn driver_write_allowed(register: u8, current: u32, value: u32) -> Result<(), WriteRefusal> {
    if register != REG_COMMAND {
        return Err(WriteRefusal::NotCommand);
    }
    if value >> 16 != 0 {
        return Err(WriteRefusal::StatusBits(value & 0xffff_0000));
    }
    let changed = (value ^ current) & 0xffff & !COMMAND_DRIVER_BITS;
    if changed != 0 {
        return Err(WriteRefusal::CommandBits(changed));
    }
    Ok(())
}

/// The name of the configuration register at `register` (a type 0
/// header), for messages.
pub fn register_name(register: u8) -> &'static str {
    match register & 0xfc {
        0x00 => "id",
        0x04 => "command/status",
        0x08 => "class/revision",
        0x0c => "header",
        0x10 => "BAR0",
        0x14 => "BAR1",
        0x18 => "BAR2",
        0x1c => "BAR3",
        0x20 => "BAR4",
        0x24 => "BAR5",
        0x28 => "CardBus CIS",
        0x2c => "subsystem id",
        0x30 => "expansion ROM",
        0x34 => "capabilities pointer",
        0x38 => "reserved",
        0x3c => "interrupt line/pin",
        _ => "device-specific (capabilities: MSI, power management, ...)",
    }
}

/// [`ConfigAccess`] for a driver: reads pass through; writes pass only if
/// [`driver_write_allowed`] says so (the current value read first), and
/// are refused otherwise, before anything reaches the device. The
/// pci_config server puts every client behind this.
#[derive(Clone, Copy)]
pub struct DriverPolicy<A>(pub A);

/// A [`DriverPolicy`] access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyError<E> {
    /// The policy refused the write.
    Refused(WriteRefusal),
    /// The access below failed.
    Access(E),
}

impl<A: ConfigAccess> ConfigAccess for DriverPolicy<A> {
    type Error = PolicyError<A::Error>;

    fn read32(&self, f: Function, register: u8) -> Result<u32, Self::Error> {
        self.0.read32(f, register).map_err(PolicyError::Access)
    }

    fn write32(&self, f: Function, register: u8, value: u32) -> Result<(), Self::Error> {
        let current = self.0.read32(f, register).map_err(PolicyError::Access)?;
        driver_write_allowed(register, current, value).map_err(PolicyError::Refused)?;
        self.0.write32(f, register, value).map_err(PolicyError::Access)
    }
}

mod discover;
pub use discover::*;

/// A PCI function: bus 0..255, device 0..31, function 0..7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// Bus number.
    pub bus: u8,
    /// Device number (5 bits).
    pub device: u8,
    /// Function number (3 bits).
    pub function: u8,
}

impl Function {
    /// The function `bus:device.function`; out-of-range device and function
    /// bits are masked off.
    pub const fn new(bus: u8, device: u8, function: u8) -> Function {
        Function { bus, device: device & 0x1f, function: function & 7 }
    }

    /// The 16-bit bus/device/function number (`bus << 8 | device << 3 |
    /// function`), as the pci_config server's RPC names a function.
    pub const fn bdf(self) -> u32 {
        (self.bus as u32) << 8 | ((self.device & 0x1f) as u32) << 3 | (self.function & 7) as u32
    }

    /// The function of a 16-bit [`Function::bdf`] number, or `None` if it
    /// does not fit 16 bits.
    pub const fn from_bdf(bdf: u32) -> Option<Function> {
        if bdf >= 1 << 16 {
            return None;
        }
        Some(Function::new((bdf >> 8) as u8, (bdf >> 3) as u8 & 0x1f, bdf as u8 & 7))
    }

    /// The value for CONFIG_ADDRESS (port 0xCF8) that selects `register`
    /// (rounded down to its dword) of this function.
    pub const fn config_address(self, register: u8) -> u32 {
        1 << 31 | self.bdf() << 8 | (register & 0xfc) as u32
    }

    /// Parses `BB:DD.F` (hex bus and device, function digit), the notation
    /// of lspci and of our assemblies.
    pub fn parse(s: &str) -> Option<Function> {
        let (bus, rest) = s.trim().split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let bus = u8::from_str_radix(bus, 16).ok()?;
        let device = u8::from_str_radix(device, 16).ok().filter(|d| *d < 32)?;
        let function = function.parse::<u8>().ok().filter(|f| *f < 8)?;
        Some(Function::new(bus, device, function))
    }
}

impl core::fmt::Display for Function {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:02x}:{:02x}.{:x}", self.bus, self.device, self.function)
    }
}

/// A way to reach configuration space: dword reads and writes of a
/// function's registers (`register` a multiple of 4).
pub trait ConfigAccess {
    /// Why an access failed (refused by the server, a port capability
    /// missing, ...). Reads of absent functions are not errors: they return
    /// all ones, as the hardware does.
    type Error;
    /// Reads the dword at `register` of `f`.
    fn read32(&self, f: Function, register: u8) -> Result<u32, Self::Error>;
    /// Writes the dword at `register` of `f`.
    fn write32(&self, f: Function, register: u8, value: u32) -> Result<(), Self::Error>;
}

/// The pci_config server refused an access (a function or register the
/// assembly does not grant this client).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

/// Configuration space through the pci_config server's RPC
/// (camkes/interfaces/PciConfig.idl4), given the client glue's two stubs.
#[derive(Clone, Copy)]
pub struct ThroughServer {
    read32: fn(u32, u32) -> u32,
    write32: fn(u32, u32, u32) -> i32,
}

impl ThroughServer {
    /// Access through the glue's `pci_config::read32` and `write32`.
    pub const fn new(read32: fn(u32, u32) -> u32, write32: fn(u32, u32, u32) -> i32) -> ThroughServer {
        ThroughServer { read32, write32 }
    }
}

impl ConfigAccess for ThroughServer {
    type Error = Refused;

    fn read32(&self, f: Function, register: u8) -> Result<u32, Refused> {
        // The server answers a refused read with all ones, like an absent
        // function: nothing to tell apart here.
        Ok((self.read32)(f.bdf(), u32::from(register)))
    }

    fn write32(&self, f: Function, register: u8, value: u32) -> Result<(), Refused> {
        match (self.write32)(f.bdf(), u32::from(register), value) {
            0 => Ok(()),
            _ => Err(Refused),
        }
    }
}

/// A memory BAR: base address and size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBar {
    /// Physical base address.
    pub base: u64,
    /// Size in bytes (a power of two).
    pub size: u64,
}

/// One function reached through `A`.
#[derive(Clone, Copy)]
pub struct Device<A> {
    access: A,
    function: Function,
}

impl<A: ConfigAccess> Device<A> {
    /// `function`, reached through `access`.
    pub const fn new(access: A, function: Function) -> Device<A> {
        Device { access, function }
    }

    /// Which function this is.
    pub fn function(&self) -> Function {
        self.function
    }

    /// Reads the dword at `register` (all ones if nothing answers).
    pub fn read(&self, register: u8) -> Result<u32, A::Error> {
        self.access.read32(self.function, register & 0xfc)
    }

    /// Writes the dword at `register`.
    pub fn write(&self, register: u8, value: u32) -> Result<(), A::Error> {
        self.access.write32(self.function, register & 0xfc, value)
    }

    /// Vendor and device ID, or `None` if no function answers here.
    pub fn ids(&self) -> Result<Option<(u16, u16)>, A::Error> {
        let id = self.read(REG_ID)?;
        let vendor = id as u16;
        Ok((vendor != 0xffff).then_some((vendor, (id >> 16) as u16)))
    }

    /// The base address of BAR0 if it is a memory BAR (32- or 64-bit),
    /// read only: no sizing, so a driver behind [`DriverPolicy`] can check
    /// it against what the assembly maps. `None` for an I/O BAR.
    pub fn memory_bar0_base(&self) -> Result<Option<u64>, A::Error> {
        let low = self.read(REG_BAR0)?;
        if low & 1 != 0 {
            return Ok(None);
        }
        let high = if (low >> 1) & 3 == 2 { self.read(REG_BAR0 + 4)? } else { 0 };
        Ok(Some(u64::from(high) << 32 | u64::from(low & !0xf)))
    }

    /// Reads and sizes BAR0 if it is a memory BAR (32- or 64-bit); `None`
    /// for an I/O BAR. Sizing writes all ones and reads back which bits
    /// stick; memory decoding is off meanwhile, so nothing answers at a
    /// half-written address, and everything is restored afterwards.
    pub fn memory_bar0(&self) -> Result<Option<MemoryBar>, A::Error> {
        let low = self.read(REG_BAR0)?;
        if low & 1 != 0 {
            return Ok(None);
        }
        let wide = (low >> 1) & 3 == 2;
        let high = if wide { self.read(REG_BAR0 + 4)? } else { 0 };

        let command = self.read(REG_COMMAND)?;
        self.write(REG_COMMAND, command & 0xffff & !COMMAND_MEMORY)?;
        self.write(REG_BAR0, !0)?;
        let low_mask = self.read(REG_BAR0)?;
        self.write(REG_BAR0, low)?;
        let high_mask = if wide {
            self.write(REG_BAR0 + 4, !0)?;
            let mask = self.read(REG_BAR0 + 4)?;
            self.write(REG_BAR0 + 4, high)?;
            mask
        } else {
            !0
        };
        // Writing the command register's low half leaves the status bits
        // alone (they are write-one-to-clear, and we write zeros there).
        self.write(REG_COMMAND, command & 0xffff)?;

        let mask = u64::from(high_mask) << 32 | u64::from(low_mask & !0xf);
        Ok(Some(MemoryBar { base: u64::from(high) << 32 | u64::from(low & !0xf), size: (!mask).wrapping_add(1) }))
    }
}

impl<A> core::fmt::Display for Device<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.function.fmt(f)
    }
}

/// Calls `found(device, vendor, device_id, class)` for every function on
/// `bus` (functions 1..7 only of multi-function devices).
pub fn scan_bus<A: ConfigAccess + Copy>(
    access: A,
    bus: u8,
    mut found: impl FnMut(Device<A>, u16, u16, u32),
) -> Result<(), A::Error> {
    for device in 0..32 {
        for function in 0..8 {
            let d = Device::new(access, Function::new(bus, device, function));
            let Some((vendor, device_id)) = d.ids()? else {
                if function == 0 {
                    break;
                }
                continue;
            };
            found(d, vendor, device_id, d.read(REG_CLASS)? >> 8);
            if function == 0 && d.read(REG_HEADER)? & (1 << 23) == 0 {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Configuration space of a few functions; BARs behave like hardware:
    /// only the address bits above the size stick.
    #[derive(Default)]
    struct Fake {
        regs: RefCell<HashMap<(u32, u8), u32>>,
        /// (function, register) -> writable mask of a BAR dword.
        bar_masks: HashMap<(u32, u8), u32>,
        writes: RefCell<Vec<(u32, u8, u32)>>,
    }

    impl ConfigAccess for &Fake {
        type Error = ();
        fn read32(&self, f: Function, register: u8) -> Result<u32, ()> {
            Ok(*self.regs.borrow().get(&(f.bdf(), register)).unwrap_or(&!0))
        }
        fn write32(&self, f: Function, register: u8, value: u32) -> Result<(), ()> {
            self.writes.borrow_mut().push((f.bdf(), register, value));
            let mut regs = self.regs.borrow_mut();
            let old = *regs.get(&(f.bdf(), register)).unwrap_or(&0);
            let new = match self.bar_masks.get(&(f.bdf(), register)) {
                Some(mask) => value & mask | old & !mask,
                None => value,
            };
            regs.insert((f.bdf(), register), new);
            Ok(())
        }
    }

    #[test]
    fn addresses_and_notation() {
        let e1000 = Function::new(0, 3, 0);
        assert_eq!(e1000.bdf(), 0x18);
        assert_eq!(e1000.config_address(REG_BAR0 + 2), 0x8000_1810);
        assert_eq!(Function::from_bdf(0x18), Some(e1000));
        assert_eq!(Function::from_bdf(1 << 16), None);
        assert_eq!(Function::parse("00:03.0"), Some(e1000));
        assert_eq!(Function::parse(" 1f:1f.7 "), Some(Function::new(0x1f, 0x1f, 7)));
        assert_eq!(e1000.to_string(), "00:03.0");
        for bad in ["00:20.0", "00:03.8", "100:03.0", "00-03.0", "00:03", "", "zz:03.0"] {
            assert_eq!(Function::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_a_64_bit_memory_bar_and_restores_everything() {
        let f = Function::new(0, 4, 0);
        let mut fake = Fake::default();
        // 64-bit prefetchable BAR at 0x1_2340_0000, 1 MiB.
        fake.regs.borrow_mut().extend([
            ((f.bdf(), REG_COMMAND), 0x0010_0007),
            ((f.bdf(), REG_BAR0), 0x2340_000c),
            ((f.bdf(), REG_BAR0 + 4), 0x1),
        ]);
        fake.bar_masks.insert((f.bdf(), REG_BAR0), 0xfff0_0000);
        fake.bar_masks.insert((f.bdf(), REG_BAR0 + 4), !0);
        let d = Device::new(&fake, f);
        assert_eq!(d.memory_bar0(), Ok(Some(MemoryBar { base: 0x1_2340_0000, size: 1 << 20 })));
        let regs = fake.regs.borrow();
        assert_eq!(regs[&(f.bdf(), REG_BAR0)], 0x2340_000c, "BAR restored");
        assert_eq!(regs[&(f.bdf(), REG_BAR0 + 4)], 0x1);
        assert_eq!(regs[&(f.bdf(), REG_COMMAND)], 0x0007, "command restored, status bits not written");
        let writes = fake.writes.borrow();
        assert_eq!(writes[0], (f.bdf(), REG_COMMAND, 0x0005), "memory decoding off while sizing");
    }

    /// The e1000 at 00:03.0 as QEMU's firmware leaves it: a 32-bit memory
    /// BAR0 at 0xfebc0000 (128 KiB), I/O decoding on, SERR# enabled, an MSI
    /// capability at 0xd0.
    fn e1000() -> (Function, Fake) {
        let f = Function::new(0, 3, 0);
        let mut fake = Fake::default();
        fake.regs.borrow_mut().extend([
            ((f.bdf(), REG_ID), 0x100e_8086),
            ((f.bdf(), REG_COMMAND), 0x0010_0103),
            ((f.bdf(), REG_BAR0), 0xfebc_0000),
            ((f.bdf(), REG_INTERRUPT), 0x0000_010b),
            ((f.bdf(), 0xd0), 0x0080_e005),
        ]);
        fake.bar_masks.insert((f.bdf(), REG_BAR0), 0xfffe_0000);
        (f, fake)
    }

    #[test]
    fn a_driver_may_enable_decoding_and_dma_and_read_its_bar() {
        let (f, fake) = e1000();
        let d = Device::new(DriverPolicy(&fake), f);
        assert_eq!(d.ids(), Ok(Some((0x8086, 0x100e))));
        assert_eq!(d.memory_bar0_base(), Ok(Some(0xfebc_0000)));
        // netdrv's probe: memory decoding and bus mastering on, INTx# on.
        let command = d.read(REG_COMMAND).unwrap() & 0xffff;
        let want = (command | COMMAND_MEMORY | COMMAND_BUS_MASTER) & !COMMAND_INTX_DISABLE;
        assert_eq!(d.write(REG_COMMAND, want), Ok(()));
        assert_eq!(fake.regs.borrow()[&(f.bdf(), REG_COMMAND)], 0x0107);
        // And off again (INTx# disabled, I/O decoding off).
        assert_eq!(d.write(REG_COMMAND, 0x0100 | COMMAND_INTX_DISABLE), Ok(()));
        assert_eq!(fake.regs.borrow()[&(f.bdf(), REG_COMMAND)], 0x0500);
    }

    #[test]
    fn every_other_driver_write_is_refused_before_it_reaches_the_device() {
        let (f, fake) = e1000();
        let d = Device::new(DriverPolicy(&fake), f);
        let refused = |register: u8, value: u32, why: WriteRefusal| {
            assert_eq!(d.write(register, value), Err(PolicyError::Refused(why)), "{}", register_name(register));
        };
        // Moving a BAR, the expansion ROM, the interrupt line, MSI.
        refused(REG_BAR0, 0x1000_0000, WriteRefusal::NotCommand);
        refused(REG_BAR0 + 4, 0, WriteRefusal::NotCommand);
        refused(0x30, 0xfff0_0001, WriteRefusal::NotCommand);
        refused(REG_INTERRUPT, 0x0000_0105, WriteRefusal::NotCommand);
        refused(0xd0, 0x0081_e005, WriteRefusal::NotCommand);
        refused(0xd4, 0xfee0_0000, WriteRefusal::NotCommand);
        // Command bits a driver does not need: SERR# off, memory-write-and-
        // invalidate on; status bits (write-one-to-clear).
        refused(REG_COMMAND, 0x0003, WriteRefusal::CommandBits(0x0100));
        refused(REG_COMMAND, 0x0113, WriteRefusal::CommandBits(0x0010));
        refused(REG_COMMAND, 0xffff_0103, WriteRefusal::StatusBits(0xffff_0000));
        // Nothing reached the device.
        assert!(fake.writes.borrow().is_empty(), "{:?}", fake.writes.borrow());
        // Sizing a BAR writes it: refused too (drivers read the base only).
        assert_eq!(d.memory_bar0(), Err(PolicyError::Refused(WriteRefusal::NotCommand)));
        assert_eq!(fake.regs.borrow()[&(f.bdf(), REG_BAR0)], 0xfebc_0000);
        assert_eq!(register_name(0x10), "BAR0");
        assert_eq!(register_name(0xd0), "device-specific (capabilities: MSI, power management, ...)");
    }

    #[test]
    fn io_bars_are_not_memory_bars() {
        let f = Function::new(0, 5, 0);
        let fake = Fake::default();
        fake.regs.borrow_mut().insert((f.bdf(), REG_BAR0), 0xc001);
        assert_eq!(Device::new(&fake, f).memory_bar0(), Ok(None));
    }

    #[test]
    fn scan_finds_functions_and_skips_absent_ones() {
        let fake = Fake::default();
        let mut regs = fake.regs.borrow_mut();
        // 00:00.0 single-function host bridge; 00:01.0 multi-function with .1
        // and .3; 00:03.0 the e1000.
        regs.insert((Function::new(0, 0, 0).bdf(), REG_ID), 0x1237_8086);
        regs.insert((Function::new(0, 0, 0).bdf(), REG_CLASS), 0x0600_0002);
        regs.insert((Function::new(0, 0, 0).bdf(), REG_HEADER), 0);
        regs.insert((Function::new(0, 1, 0).bdf(), REG_ID), 0x7000_8086);
        regs.insert((Function::new(0, 1, 0).bdf(), REG_CLASS), 0x0601_0000);
        regs.insert((Function::new(0, 1, 0).bdf(), REG_HEADER), 1 << 23);
        regs.insert((Function::new(0, 1, 1).bdf(), REG_ID), 0x7010_8086);
        regs.insert((Function::new(0, 1, 1).bdf(), REG_CLASS), 0x0101_8000);
        regs.insert((Function::new(0, 1, 3).bdf(), REG_ID), 0x7113_8086);
        regs.insert((Function::new(0, 1, 3).bdf(), REG_CLASS), 0x0680_0003);
        regs.insert((Function::new(0, 3, 0).bdf(), REG_ID), 0x100e_8086);
        regs.insert((Function::new(0, 3, 0).bdf(), REG_CLASS), 0x0200_0003);
        regs.insert((Function::new(0, 3, 0).bdf(), REG_HEADER), 0);
        // A function 1 of a single-function device must not be reported.
        regs.insert((Function::new(0, 3, 1).bdf(), REG_ID), 0xdead_beef);
        drop(regs);
        let mut seen = Vec::new();
        scan_bus(&fake, 0, |d, vendor, device, class| seen.push((d.function().to_string(), vendor, device, class)))
            .unwrap();
        assert_eq!(
            seen,
            [
                ("00:00.0".to_string(), 0x8086, 0x1237, 0x06_0000),
                ("00:01.0".to_string(), 0x8086, 0x7000, 0x06_0100),
                ("00:01.1".to_string(), 0x8086, 0x7010, 0x01_0180),
                ("00:01.3".to_string(), 0x8086, 0x7113, 0x06_8000),
                ("00:03.0".to_string(), 0x8086, 0x100e, 0x02_0000),
            ]
        );
    }
}
