//! pci_config: the PCI configuration space server (camkes/interfaces/PciConfig.idl4).
//!
//! Configuration mechanism #1 is an address/data port pair (0xCF8, 0xCFC):
//! two components using it at once can interleave an address write and a
//! data access and touch the wrong device. So one component owns the I/O
//! port capability `0xcf8:0xcff` and serves `read32`/`write32` by RPC, one
//! request at a time.
//!
//! **Access control.** Each client's calls arrive with its connection badge
//! (1, 2, … in the order of the `from` ends of the RPC connection). The
//! attribute `allow` lists `"CLIENT=MATCH"` strings, the client by its
//! instance name (the glue's `CLIENTS` gives its badge) and the kind of
//! device it drives (`"netdrv=net"`): each client may read and write the
//! function the root task bound to it at boot, as the start record lists
//! it (roottask/README.md, "Devices"). Anything else reads as `0xffffffff` (what an
//! empty slot reads) and writes are refused (`-1`); the first few denials
//! are logged by name. A client therefore can neither reconfigure another
//! component's device (BARs, bus mastering) nor probe the bus.
//!
//! **Its own function** a client may read whole, but write only what a
//! driver needs (`pci::DriverPolicy`): the command register's decoding,
//! bus-master and INTx#-disable bits. A BAR, the expansion ROM, the
//! interrupt line or an MSI capability written by a driver could point the
//! device (and so its DMA or its interrupts) anywhere; those writes are
//! refused (`-1`) before they reach the device, and logged.
//!
//! **Restartable** (camkes/iolite.camkes): it keeps no state but its
//! grants, which a new incarnation reads from the assembly again, and the
//! port pair, which it leaves between requests with no address pending.
//! A client whose call was in progress when it died is not answered (seL4
//! deletes the reply capability with the dead thread): the drivers call it
//! only while they start.
//!
//! Lines it prints: `[pci_config] ready: N grants (BADGE=BB:DD.F ...)`,
//! `[pci_config] denied: client BADGE read|write BB:DD.F offset 0xOFF`,
//! `[pci_config] refused write of REGISTER (0xOFF) by client BADGE
//! (BB:DD.F): REASON`.
#![no_std]
#![no_main]

use component_runtime::start::StartInfo;
use component_runtime::{error, log, warn};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/pci_config.rs"));

const CONFIG_ADDRESS: u16 = 0xCF8;
const CONFIG_DATA: u16 = 0xCFC;
const MAX_GRANTS: usize = 16;
/// Denials logged before going quiet (a misbehaving client must not flood).
const LOGGED_DENIALS: u32 = 8;

/// A grant: the client with this badge may use `function`.
#[derive(Clone, Copy)]
struct Grant {
    badge: u64,
    function: pci::Function,
}

/// Why a grant of the assembly gives nothing.
enum BadGrant {
    /// Not `CLIENT=MATCH` with a client of the RPC connection and a known
    /// match.
    Syntax,
    /// The root task bound no function of that kind to the client (the
    /// client is then not started either).
    Unbound,
}

/// Parses `"CLIENT=MATCH"` (a caller's instance name, the kind of device
/// it drives: `"netdrv=net"`) into the function the root task bound to
/// that client at boot, which the start record lists. The client's badge
/// is its place in the assembly's RPC connection (`glue::pci::CLIENTS`,
/// badge 1 first), which the compiler checked the name against.
fn parse_grant(s: &str, start: &StartInfo) -> Result<Grant, BadGrant> {
    let (client, kind) = s.split_once('=').ok_or(BadGrant::Syntax)?;
    let client = client.trim();
    let badge = glue::pci::CLIENTS.iter().position(|c| *c == client).ok_or(BadGrant::Syntax)? as u64 + 1;
    let kind = pci::match_kind(kind.trim()).ok_or(BadGrant::Syntax)?;
    let record = start
        .pci_devices()
        .iter()
        .find(|r| r.driver() == client && kind.has_class((r.class >> 8) as u16))
        .ok_or(BadGrant::Unbound)?;
    let function = pci::Function::from_bdf(u32::from(record.bdf)).ok_or(BadGrant::Unbound)?;
    Ok(Grant { badge, function })
}

struct Server {
    grants: [Option<Grant>; MAX_GRANTS],
    denials: u32,
}

impl Server {
    /// The function and register `bdf`/`offset` name, if the calling
    /// client (its badge) was granted them.
    fn allowed(&mut self, op: &str, bdf: u32, offset: u32) -> Option<(pci::Function, u8)> {
        let badge = glue::pci::sender_badge();
        let function = pci::Function::from_bdf(bdf);
        let granted = function.filter(|f| {
            offset < 256
                && offset.is_multiple_of(4)
                && self.grants.iter().flatten().any(|g| g.badge == badge && g.function == *f)
        });
        if granted.is_none() && self.denial_logged() {
            match function {
                Some(f) => warn!("denied: client {badge} {op} {f} offset {offset:#x}"),
                None => warn!("denied: client {badge} {op} bdf {bdf:#x} (not a function number)"),
            }
        }
        granted.map(|f| (f, offset as u8))
    }

    fn select(function: pci::Function, register: u8) -> bool {
        glue::ports::out32(CONFIG_ADDRESS, function.config_address(register)).is_ok()
    }

    fn denial_logged(&mut self) -> bool {
        self.denials += 1;
        self.denials <= LOGGED_DENIALS
    }
}

/// Configuration mechanism #1 through our port capability.
#[derive(Clone, Copy)]
struct Ports;

impl pci::ConfigAccess for Ports {
    type Error = sel4::Error;

    fn read32(&self, f: pci::Function, register: u8) -> Result<u32, sel4::Error> {
        glue::ports::out32(CONFIG_ADDRESS, f.config_address(register))?;
        glue::ports::in32(CONFIG_DATA)
    }

    fn write32(&self, f: pci::Function, register: u8, value: u32) -> Result<(), sel4::Error> {
        glue::ports::out32(CONFIG_ADDRESS, f.config_address(register))?;
        glue::ports::out32(CONFIG_DATA, value)
    }
}

impl glue::pci::PciConfigSpace for Server {
    fn read32(&mut self, bdf: u32, offset: u32) -> u32 {
        match self.allowed("read", bdf, offset) {
            Some((f, register)) if Self::select(f, register) => {}
            _ => return u32::MAX,
        }
        glue::ports::in32(CONFIG_DATA).unwrap_or(u32::MAX)
    }

    fn write32(&mut self, bdf: u32, offset: u32, value: u32) -> i32 {
        let Some((f, register)) = self.allowed("write", bdf, offset) else { return -1 };
        match pci::ConfigAccess::write32(&pci::DriverPolicy(Ports), f, register, value) {
            Ok(()) => 0,
            Err(pci::PolicyError::Refused(why)) => {
                if self.denial_logged() {
                    let badge = glue::pci::sender_badge();
                    warn!(
                        "refused write of {} ({register:#x}) by client {badge} ({f}): {why}",
                        pci::register_name(register)
                    );
                }
                -1
            }
            Err(pci::PolicyError::Access(_)) => -1,
        }
    }
}

fn main(start: &'static StartInfo) -> ! {
    let mut server = Server { grants: [None; MAX_GRANTS], denials: 0 };
    let mut n = 0;
    for s in glue::attributes::ALLOW {
        match parse_grant(s, start) {
            Ok(g) if n < MAX_GRANTS => {
                server.grants[n] = Some(g);
                n += 1;
            }
            Ok(_) => error!("more than {MAX_GRANTS} grants; ignoring {s:?}"),
            Err(BadGrant::Syntax) => error!("bad grant {s:?} (want \"CLIENT=MATCH\", e.g. \"netdrv=net\")"),
            Err(BadGrant::Unbound) => log!("grant {s:?}: no device was bound to that client at boot"),
        }
    }
    let mut list = heapless_list::List::new();
    for g in server.grants.iter().flatten() {
        list.push(g.badge, g.function);
    }
    log!("ready: {n} grants ({})", list);
    glue::pci::run(&mut server)
}

/// A fixed-size formatter for the grant list (no heap in this component).
mod heapless_list {
    pub struct List {
        items: [(u64, pci::Function); super::MAX_GRANTS],
        n: usize,
    }
    impl List {
        pub fn new() -> Self {
            Self { items: [(0, pci::Function::new(0, 0, 0)); super::MAX_GRANTS], n: 0 }
        }
        pub fn push(&mut self, badge: u64, function: pci::Function) {
            if self.n < self.items.len() {
                self.items[self.n] = (badge, function);
                self.n += 1;
            }
        }
    }
    impl core::fmt::Display for List {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            for (i, (b, function)) in self.items[..self.n].iter().enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{b}={function}")?;
            }
            Ok(())
        }
    }
}
