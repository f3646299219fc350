//! What the loader tells a component when it starts it.
//!
//! The loader maps one read-only page holding a [`StartInfo`] at
//! [`START_INFO_VADDR`] in every component and passes that address in `rdi`.
//! [`component_entry!`](crate::component_entry) reads it before `main`: the
//! instance name (for logs and panics), where the IPC buffer is, how many
//! times the supervisor has restarted this instance, and the TSC rate.

/// Where the loader maps the start-info page in every component.
pub const START_INFO_VADDR: u64 = 0x0000_7100_0000_0000;
/// Where the loader maps the component's IPC buffer (one page, guard pages
/// on both sides).
pub const IPC_BUFFER_VADDR: u64 = 0x0000_7100_0000_2000;
/// The top of the component's stack; the stack grows down from here and has
/// an unmapped guard page below its lowest page.
pub const STACK_TOP: u64 = 0x0000_7000_0000_0000;
/// Marks a valid [`StartInfo`] ("IOLSTART").
pub const START_INFO_MAGIC: u64 = u64::from_le_bytes(*b"IOLSTART");
/// `StartInfo::flags`: the kernel is a debug build with seL4_DebugPutChar.
pub const START_FLAG_DEBUG_KERNEL: u64 = 1 << 0;
/// `StartInfo::flags`: the system events page is mapped at
/// [`EVENTS_VADDR`](crate::events::EVENTS_VADDR) (the assembly subscribes
/// this component, see [`crate::events`]).
pub const START_FLAG_EVENTS: u64 = 1 << 1;
/// `StartInfo::flags`: the component's log ring is mapped at
/// [`LOG_RING_VADDR`](crate::logring::LOG_RING_VADDR) and
/// `log_signal_slot` holds its capability to the log server's
/// notification: the console writes lines there ([`crate::logring`]).
pub const START_FLAG_LOG_RING: u64 = 1 << 2;
/// `StartInfo::flags`: this component is the log server; `log_rings` lists
/// what it reads.
pub const START_FLAG_LOG_SERVER: u64 = 1 << 3;
/// `StartInfo::flags`: the assembly watches this component's liveness; its
/// progress page is mapped read-write at
/// [`PROGRESS_VADDR`](crate::liveness::PROGRESS_VADDR) ([`crate::liveness`]).
pub const START_FLAG_PROGRESS: u64 = 1 << 4;
/// Message label of [`exit`](crate::exit)'s call to the supervisor; far
/// from the kernel's fault labels (0..=5) so the two cannot be confused.
pub const SUPERVISOR_EXIT_LABEL: u64 = 0xE417;
/// Longest instance name the start info carries.
pub const MAX_NAME_LEN: usize = 64;

/// The loader-to-component start record (one page, read-only for the
/// component).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StartInfo {
    /// [`START_INFO_MAGIC`].
    pub magic: u64,
    /// Virtual address of this thread's IPC buffer.
    pub ipc_buffer: u64,
    /// Index of this instance in the system spec's component list.
    pub instance: u64,
    /// How many times the supervisor has restarted this instance (0 on the
    /// first start).
    pub restarts: u64,
    /// Bit set of `START_FLAG_*`.
    pub flags: u64,
    /// The CSpace slot of this component's endpoint to the supervisor (its
    /// fault endpoint, which [`exit`](crate::exit) also uses).
    pub supervisor_slot: u64,
    /// Length of `name` in bytes.
    pub name_len: u64,
    /// The instance name from the assembly, UTF-8.
    pub name: [u8; MAX_NAME_LEN],
    /// How many entries of `dataports` are valid.
    pub dataport_count: u64,
    /// Where this component's dataports are, virtually and physically.
    /// Every dataport is physically contiguous, so a driver can give a
    /// device any address inside one (DMA) from these records alone.
    pub dataports: [DataportRecord; MAX_DATAPORTS],
    /// Random bits for this incarnation (the root task's RDRAND where the
    /// CPU has it, mixed with its TSC): e.g. the tags of the IO-Lite
    /// generations the component issues, so they cannot be predicted.
    pub seed: u64,
    /// With [`START_FLAG_LOG_RING`]: the slot of the capability that
    /// signals the log server after a line.
    pub log_signal_slot: u64,
    /// With [`START_FLAG_LOG_SERVER`]: the slot of the notification the
    /// writers signal.
    pub log_wait_slot: u64,
    /// With [`START_FLAG_LOG_SERVER`]: how many entries of `log_rings` are
    /// valid.
    pub log_ring_count: u64,
    /// With [`START_FLAG_LOG_SERVER`]: every ring, where it is mapped
    /// (read-only) and whose it is.
    pub log_rings: [LogRingRecord; MAX_LOG_RINGS],
    /// The TSC rate in MHz as the kernel measured it at boot (boot info
    /// `archInfo`), 0 if there was none; see [`crate::time`].
    pub tsc_mhz: u64,
    /// How many entries of `pci` are valid.
    pub pci_count: u64,
    /// The PCI functions the root task found at boot, in the order it
    /// walked the buses, and which component each is bound to: a driver
    /// finds its own with [`StartInfo::own_pci_device`], pci_config its
    /// clients', the stats page them all.
    pub pci: [PciRecord; MAX_PCI_DEVICES],
}

/// Most PCI functions the start page lists (more are found and reported
/// on the console, but left out here).
pub const MAX_PCI_DEVICES: usize = 16;
/// Longest driver name a [`PciRecord`] carries.
pub const PCI_DRIVER_LEN: usize = 24;
/// [`PciRecord::ioapic_pin`] of a function without a routed interrupt.
pub const PCI_NO_PIN: u8 = 0xff;

/// One PCI function found at boot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PciRecord {
    /// Bus, device, function: `bus << 8 | device << 3 | function`.
    pub bdf: u16,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// The IOAPIC pin its interrupt was routed to for its driver, or
    /// [`PCI_NO_PIN`].
    pub ioapic_pin: u8,
    /// Length of `driver` (0: left alone).
    pub driver_len: u8,
    /// Class, subclass, programming interface (24 bits).
    pub class: u32,
    /// The instance name of the component it is bound to.
    pub driver: [u8; PCI_DRIVER_LEN],
}

impl PciRecord {
    /// The component it is bound to, "" if none.
    pub fn driver(&self) -> &str {
        let len = (self.driver_len as usize).min(PCI_DRIVER_LEN);
        core::str::from_utf8(&self.driver[..len]).unwrap_or("")
    }

    /// Binds the record to `name` (truncated at a character boundary).
    pub fn set_driver(&mut self, name: &str) {
        let mut len = name.len().min(PCI_DRIVER_LEN);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        self.driver = [0; PCI_DRIVER_LEN];
        self.driver[..len].copy_from_slice(&name.as_bytes()[..len]);
        self.driver_len = len as u8;
    }
}

// The start record is one page.
const _: () = assert!(core::mem::size_of::<StartInfo>() <= 4096);

/// Most rings the log server reads (the start page's table size).
pub const MAX_LOG_RINGS: usize = 40;
/// Longest writer name a ring record carries.
pub const LOG_NAME_LEN: usize = 40;

/// One ring the log server reads.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LogRingRecord {
    /// Where the ring is mapped in the server.
    pub vaddr: u64,
    /// Length of `name`; 0 for the root task's ring, whose lines carry
    /// their own prefix (`[roottask]`, `[supervisor]`).
    pub name_len: u64,
    /// The writer's instance name, from the spec.
    pub name: [u8; LOG_NAME_LEN],
}

impl Default for LogRingRecord {
    fn default() -> Self {
        LogRingRecord { vaddr: 0, name_len: 0, name: [0; LOG_NAME_LEN] }
    }
}

impl LogRingRecord {
    /// A record for the ring at `vaddr` written by `name` (truncated at a
    /// character boundary; "" for the root task).
    pub fn new(vaddr: u64, name: &str) -> LogRingRecord {
        let mut len = name.len().min(LOG_NAME_LEN);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut record = LogRingRecord { vaddr, name_len: len as u64, ..Default::default() };
        record.name[..len].copy_from_slice(&name.as_bytes()[..len]);
        record
    }

    /// The writer's name ("" for the root task, or if not UTF-8).
    pub fn name(&self) -> &str {
        let len = (self.name_len as usize).min(LOG_NAME_LEN);
        core::str::from_utf8(&self.name[..len]).unwrap_or("")
    }
}

/// Most dataports one component can have (the start page's table size).
pub const MAX_DATAPORTS: usize = 32;

/// One dataport as mapped in the component.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataportRecord {
    /// Virtual address of its first byte in this component.
    pub vaddr: u64,
    /// Physical address of its first byte (RAM, or the device's registers).
    pub paddr: u64,
    /// Size in bytes.
    pub size: u64,
}

impl StartInfo {
    /// A start record for `name` (truncated to [`MAX_NAME_LEN`] bytes at a
    /// character boundary).
    pub fn new(name: &str, instance: u64, restarts: u64, flags: u64, supervisor_slot: u64) -> StartInfo {
        let mut len = name.len().min(MAX_NAME_LEN);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0u8; MAX_NAME_LEN];
        bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
        StartInfo {
            magic: START_INFO_MAGIC,
            ipc_buffer: IPC_BUFFER_VADDR,
            instance,
            restarts,
            flags,
            supervisor_slot,
            name_len: len as u64,
            name: bytes,
            dataport_count: 0,
            dataports: [DataportRecord::default(); MAX_DATAPORTS],
            seed: 0,
            log_signal_slot: 0,
            log_wait_slot: 0,
            log_ring_count: 0,
            log_rings: [LogRingRecord::default(); MAX_LOG_RINGS],
            tsc_mhz: 0,
            pci_count: 0,
            pci: [PciRecord::default(); MAX_PCI_DEVICES],
        }
    }

    /// The PCI functions found at boot.
    pub fn pci_devices(&self) -> &[PciRecord] {
        &self.pci[..(self.pci_count as usize).min(MAX_PCI_DEVICES)]
    }

    /// The PCI function the root task bound to this component (its
    /// `match` in the assembly), if any.
    pub fn own_pci_device(&self) -> Option<&PciRecord> {
        self.pci_devices().iter().find(|r| r.driver_len != 0 && Some(r.driver()) == self.name())
    }

    /// Adds a dataport record; false if the table is full.
    pub fn add_dataport(&mut self, record: DataportRecord) -> bool {
        let n = self.dataport_count as usize;
        if n >= MAX_DATAPORTS {
            return false;
        }
        self.dataports[n] = record;
        self.dataport_count += 1;
        true
    }

    /// The valid dataport records.
    pub fn dataports(&self) -> &[DataportRecord] {
        &self.dataports[..(self.dataport_count as usize).min(MAX_DATAPORTS)]
    }

    /// The physical address behind `vaddr`, if it lies in a dataport (for
    /// DMA descriptors).
    pub fn physical_address(&self, vaddr: u64) -> Option<u64> {
        self.dataports()
            .iter()
            .find(|d| vaddr >= d.vaddr && vaddr - d.vaddr < d.size)
            .map(|d| d.paddr + (vaddr - d.vaddr))
    }

    /// The valid log ring records (the log server's).
    pub fn log_rings(&self) -> &[LogRingRecord] {
        &self.log_rings[..(self.log_ring_count as usize).min(MAX_LOG_RINGS)]
    }

    /// The instance name, or `None` if the record is not valid UTF-8.
    pub fn name(&self) -> Option<&str> {
        let len = (self.name_len as usize).min(MAX_NAME_LEN);
        core::str::from_utf8(&self.name[..len]).ok()
    }
}

/// This component's start record, or `None` in the root task or a host
/// build.
pub fn start_info() -> Option<&'static StartInfo> {
    if crate::supervisor_slot() == 0 {
        return None;
    }
    // SAFETY: a component started by the loader has its start page mapped
    // read-only here for its whole life (the entry macro checked it).
    let start = unsafe { &*(START_INFO_VADDR as *const StartInfo) };
    (start.magic == START_INFO_MAGIC).then_some(start)
}

/// Whether the loader mapped the system events page into this component.
pub fn has_events() -> bool {
    if crate::supervisor_slot() == 0 {
        return false; // the root task, or a host build
    }
    // SAFETY: a component started by the loader has its start page mapped
    // read-only here for its whole life (the entry macro checked it).
    let start = unsafe { &*(START_INFO_VADDR as *const StartInfo) };
    start.magic == START_INFO_MAGIC && start.flags & START_FLAG_EVENTS != 0
}

/// Where a component's endless loop `iolite_hang` is (see
/// [`component_entry!`](crate::component_entry)): this many bytes before
/// its ELF entry point, `_start`.
pub const HANG_BEFORE_ENTRY: u64 = 2;
/// The bytes there: `jmp .` (a short jump to itself). The supervisor of a
/// test image checks them before it points a thread there.
pub const HANG_BYTES: [u8; 2] = [0xEB, 0xFE];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_round_trips_and_truncates_at_char_boundary() {
        assert_eq!(StartInfo::new("hello_reader", 2, 1, 0, 255).name(), Some("hello_reader"));
        let long = "é".repeat(40); // 80 bytes
        let info = StartInfo::new(&long, 0, 0, 0, 255);
        assert_eq!(info.name().unwrap().len(), 64);
    }

    #[test]
    fn physical_addresses_of_dataports() {
        let mut info = StartInfo::new("netdrv", 0, 0, 0, 255);
        assert!(info.add_dataport(DataportRecord { vaddr: 0x1_0000_0000, paddr: 0x200_0000, size: 0x2000 }));
        assert_eq!(info.physical_address(0x1_0000_1234), Some(0x200_1234));
        assert_eq!(info.physical_address(0x1_0000_2000), None);
        for _ in 1..MAX_DATAPORTS {
            assert!(info.add_dataport(DataportRecord::default()));
        }
        assert!(!info.add_dataport(DataportRecord::default()));
    }

    #[test]
    fn fits_in_one_page() {
        assert!(core::mem::size_of::<StartInfo>() <= 4096);
    }
}
