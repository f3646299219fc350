//! The static system spec: every kernel object, capability and mapping of the
//! system, decided at build time by the `camkes` compiler and carried out at
//! boot by the loader (the seL4 root task).
//!
//! The compiler (host, `std`) builds a [`SystemSpec`] from the CAmkES
//! assembly and writes it with [`SystemSpec::encode`]; the loader (`no_std` +
//! `alloc`) reads it back with [`SystemSpec::decode`], which also runs
//! [`SystemSpec::validate`], so the loader never acts on an inconsistent spec.
//!
//! # What the loader has to do with a spec
//!
//! 1. Create every [`Object`] in [`SystemSpec::objects`], in order. Objects are
//!    referred to by their index ([`ObjectId`]). Create endpoints and
//!    notifications before IRQs, because an [`ObjectKind::IoApicIrq`] names
//!    the notification it signals.
//! 2. For every [`Component`]: load the ELF named [`Component::elf`], create a
//!    CNode of `2^cnode_size_bits` slots, copy (mint) each [`Cap`] into its
//!    slot with the given rights and badge, and map each [`Mapping`].
//! 3. Place the stack and the IPC buffer (the spec leaves their virtual
//!    addresses to the loader; [`DATAPORT_BASE`] and up is taken).
//!
//! # Layout the compiler uses (documented here so the loader can rely on it)
//!
//! * CSpace slot 0 stays empty (seL4_CapNull). Slots from
//!   [`FIRST_INTERFACE_SLOT`] on hold one capability per non-dataport
//!   interface of the component type, in declaration order; after those come
//!   the secondary capabilities (the IRQ handler of an interrupt-consuming
//!   interface), again in declaration order. Slots from
//!   [`Component::first_free_slot`] on are free for the loader.
//! * Dataports are mapped from [`DATAPORT_BASE`] up, in declaration order,
//!   each aligned to its [`frame_size`] and followed by one unmapped guard
//!   page. A dataport whose size is a multiple of 2 MiB is backed by 2 MiB
//!   frames: the loader then makes and maps 512 times fewer capabilities
//!   (the big IO-Lite pools would otherwise cost tens of thousands of
//!   invocations at boot).
//!
//! The layout depends only on the component *type*, so every instance of a
//! type can run the same ELF with the same generated glue.

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde::{Deserialize, Serialize};

mod validate;

pub use validate::SpecError;

/// Bumped whenever the encoded form changes, so a loader never misreads a
/// spec written by a different compiler.
pub const FORMAT_VERSION: u32 = 7;

/// The first bytes of an encoded spec; they make a stray blob fail loudly.
pub const MAGIC: [u8; 8] = *b"IOLSPEC\0";

/// The size of a small page on x86_64; all sizes and addresses in a spec are
/// multiples of it.
pub const PAGE_SIZE: u64 = 4096;

/// The virtual address of a component's first dataport; above the ELF image
/// (linked at 0x400000) and below anything the loader places by default.
pub const DATAPORT_BASE: u64 = 0x1_0000_0000;

/// Bytes in a large (2 MiB) frame.
pub const LARGE_PAGE_SIZE: u64 = 2 << 20;

/// The frame size backing a RAM dataport of `size` bytes (and the alignment
/// of its virtual address): [`LARGE_PAGE_SIZE`] when `size` is a non-zero
/// multiple of it, [`PAGE_SIZE`] otherwise. Device regions always use
/// [`PAGE_SIZE`] frames.
pub const fn frame_size(size: u64) -> u64 {
    if size != 0 && size.is_multiple_of(LARGE_PAGE_SIZE) {
        LARGE_PAGE_SIZE
    } else {
        PAGE_SIZE
    }
}

/// The CSpace slot of a component's first interface capability. Slot 0 is
/// left empty because seL4 treats CPtr 0 as the null capability.
pub const FIRST_INTERFACE_SLOT: u64 = 1;

/// The end of the user half of the x86_64 address space (exclusive); no
/// mapping may reach it.
pub const USER_TOP: u64 = 0x0000_8000_0000_0000;

/// Priority of a component whose assembly sets none (upstream CAmkES's
/// `--default-priority`).
pub const DEFAULT_PRIORITY: u8 = 254;

/// Stack size in bytes of a component whose assembly sets no `_stack_size`
/// (upstream CAmkES's `CAmkESDefaultStackSize`).
pub const DEFAULT_STACK_SIZE: u64 = 16384;

/// CNode size (log2 of the slot count) when the assembly sets no
/// `cnode_size_bits`: 256 slots leave plenty of room after the interfaces.
pub const DEFAULT_CNODE_SIZE_BITS: u8 = 8;

/// The badge bit the supervisor signals a component's system-events
/// notification with ([`Component::events`]); far above the bits the
/// compiler gives emitters (one per `from` end).
pub const SYSTEM_EVENT_BADGE: u64 = 1 << 40;

/// Restarts within [`DEFAULT_RESTART_WINDOW_MS`] after which a component is
/// held down (`<instance>.restart_limit`).
pub const DEFAULT_RESTART_LIMIT: u32 = 5;
/// The window of the restart limit, in milliseconds
/// (`<instance>.restart_window_ms`).
pub const DEFAULT_RESTART_WINDOW_MS: u32 = 10_000;
/// The back-off before the second restart within the window, doubled for
/// every further one (`<instance>.restart_backoff_ms`); the first restart
/// after a quiet window is immediate.
pub const DEFAULT_RESTART_BACKOFF_MS: u32 = 100;
/// How long a subscriber of system events may take to confirm a peer's
/// death when the assembly sets no `<instance>.confirm_death_ms`.
pub const DEFAULT_CONFIRM_DEATH_MS: u32 = 2000;

/// The largest IOAPIC vector seL4 on x86_64 accepts for a user IRQ.
pub const MAX_IRQ_VECTOR: u32 = 107;

/// The whole system: kernel objects and the components that hold
/// capabilities to them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemSpec {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Every kernel object the loader creates, referred to by index.
    pub objects: Vec<Object>,
    /// Every software component instance (hardware stand-ins are not
    /// components: they only contribute objects).
    pub components: Vec<Component>,
}

/// The index of an object in [`SystemSpec::objects`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId(pub u32);

/// One kernel object (or, for frames, one run of page-sized frames).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Where the object comes from, for messages: the connection name, with a
    /// suffix where one connection makes several objects.
    pub name: String,
    /// What to create.
    pub kind: ObjectKind,
}

/// The kinds of kernel object a spec can ask for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKind {
    /// An endpoint for synchronous RPC (`seL4RPCCall`).
    Endpoint,
    /// A notification object (`seL4Notification`, or the target of an IRQ).
    Notification,
    /// Zero-filled, physically contiguous RAM frames of [`frame_size`]
    /// backing a shared dataport (`seL4SharedData`).
    Frames {
        /// Bytes; a non-zero multiple of [`PAGE_SIZE`].
        size: u64,
    },
    /// Device frames at a fixed physical address (`seL4HardwareMMIO`).
    DeviceFrames {
        /// Physical base address, page-aligned.
        paddr: u64,
        /// Bytes; a non-zero multiple of [`PAGE_SIZE`].
        size: u64,
    },
    /// An IRQ handler for an IOAPIC line (`seL4HardwareInterrupt`).
    IoApicIrq(IoApicIrq),
    /// An x86 I/O port capability for an inclusive range
    /// (`seL4HardwareIOPort`).
    IoPorts {
        /// First port of the range.
        first: u16,
        /// Last port of the range (inclusive, as upstream's `"0xA:0xB"`).
        last: u16,
    },
    /// Device frames covering memory BAR `bar` of the PCI function the
    /// loader bound to `driver` ([`Component::pci_match`]), found at boot
    /// (`seL4HardwareMMIO` with `<dataport>_bar`). The BAR must be at
    /// least `size` bytes; the first `size` are mapped.
    PciBarFrames {
        /// The driver component's instance name.
        driver: String,
        /// BAR number, 0..=5.
        bar: u8,
        /// Bytes mapped (the dataport's size); a multiple of [`PAGE_SIZE`].
        size: u64,
    },
    /// The I/O port range of I/O BAR `bar` of the function bound to
    /// `driver` (`seL4HardwareIOPort` with `<interface>_bar`).
    PciBarPorts {
        /// The driver component's instance name.
        driver: String,
        /// BAR number, 0..=5.
        bar: u8,
    },
    /// The interrupt of the function bound to `driver`, routed by the
    /// loader (`seL4HardwareInterrupt` with `_irq_type = "device"`).
    PciIrq(PciIrq),
}

/// The interrupt of a PCI function found at boot: where it arrives (an
/// IOAPIC pin, worked out from the chipset) is the loader's to find; the
/// spec fixes the vector and where it is delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciIrq {
    /// The driver component's instance name ([`Component::pci_match`]).
    pub driver: String,
    /// The CPU vector, 0..=[`MAX_IRQ_VECTOR`], unique in the system.
    pub vector: u32,
    /// The notification the IRQ handler is bound to.
    pub notification: ObjectId,
    /// The badge the interrupt signals it with (as [`IoApicIrq::badge`]).
    pub badge: u64,
}

/// The arguments of `seL4_IRQControl_GetIOAPIC`, plus where the IRQ is
/// delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoApicIrq {
    /// The IOAPIC's index (`_irq_ioapic`), usually 0.
    pub ioapic: u32,
    /// The IOAPIC input pin (`_irq_ioapic_pin`), 0..=23.
    pub pin: u32,
    /// `true` for level-triggered (`_irq_level = 1`), `false` for edge.
    pub level_triggered: bool,
    /// `true` for active low (`_irq_polarity = 1`), `false` for active high.
    pub active_low: bool,
    /// The CPU vector (`_irq_vector`), 0..=[`MAX_IRQ_VECTOR`], unique in the
    /// system.
    pub vector: u32,
    /// The notification the IRQ handler is bound to
    /// (`seL4_IRQHandler_SetNotification`).
    pub notification: ObjectId,
    /// The badge the interrupt signals it with: 1 on a notification of its
    /// own; one bit of several when the consumer's other notifications
    /// share the object (e.g. a driver woken by its device and its client).
    pub badge: u64,
}

/// One software component instance: one thread in its own address space and
/// CSpace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// The instance name from the assembly (`component Echo echo;` gives
    /// `echo`).
    pub name: String,
    /// The CAmkES component type (`Echo`).
    pub component_type: String,
    /// The ELF to load: the component type's folder under `components/`
    /// (the type name in snake_case: `HttpServer` gives `http_server`).
    pub elf: String,
    /// Whether the type is declared `control` (it runs its own `run()`);
    /// otherwise its main serves its interfaces.
    pub control: bool,
    /// Thread priority (`_priority`, else `priority`, else
    /// [`DEFAULT_PRIORITY`]).
    pub priority: u8,
    /// Maximum controlled priority (`_max_priority`, else `max_priority`,
    /// else [`DEFAULT_PRIORITY`]).
    pub max_priority: u8,
    /// Stack size in bytes (`_stack_size` rounded up to a page); the loader
    /// adds the guard pages.
    pub stack_size: u64,
    /// Whether the supervisor may restart this component after a fault
    /// (`<instance>.restartable = true;`, our own attribute).
    pub restartable: bool,
    /// The components (indices into [`SystemSpec::components`]) this one
    /// may ask the supervisor to restart (`<instance>.may_restart =
    /// ["name", ...];`, our own attribute). Each is restartable and not
    /// this component; the supervisor refuses any other request.
    pub may_restart: Vec<u32>,
    /// Whether the test console may make this component fault or hang
    /// (`<instance>.fault_injection = 1;`, our own attribute, set only by
    /// test images: tests/variants). The supervisor obeys an injection
    /// command on COM1 only for a component the spec marks so, and reads
    /// COM1 at all only when one is (the root task of an image without
    /// any is built without the command reader).
    pub fault_injection: bool,
    /// Liveness (`<instance>.hang_cpu_ms`, our own attribute; 0: not
    /// watched): the supervisor judges the component stuck once the kernel
    /// gave its thread this much CPU time (ms) while it made no progress
    /// (component_runtime::liveness), and restarts it if it is
    /// restartable, else reports it once.
    pub hang_cpu_ms: u32,
    /// Whether the component subscribes to system events
    /// (`<instance>.system_events`, our own attribute): the loader maps the
    /// system events page into it, and the supervisor expects it to confirm
    /// the deaths of components it shares a dataport with.
    pub events: bool,
    /// The notification the supervisor signals (badge
    /// [`SYSTEM_EVENT_BADGE`]) when the page changes
    /// (`system_events = "<consumed notification>"`); `None` for a
    /// subscriber that polls the page itself (`system_events = "poll"`,
    /// e.g. an RPC server, on every call).
    pub events_notification: Option<ObjectId>,
    /// The time a subscriber has to confirm a peer's death
    /// (`<instance>.confirm_death_ms`, our own attribute; else
    /// [`DEFAULT_CONFIRM_DEATH_MS`]). One that does not is restarted (or
    /// stopped) if it is [`Component::untrusted`], else reported by name
    /// while the death stays unsettled.
    pub confirm_death_ms: u32,
    /// Whether the component is untrusted (`<instance>.untrusted = true`,
    /// our own attribute; e.g. the cgi, which runs CGI programs): the
    /// supervisor treats it as dead when it holds up a death protocol
    /// (does not confirm in time), instead of waiting for it.
    pub untrusted: bool,
    /// Restart policy (our own attributes `restart_limit`,
    /// `restart_window_ms`, `restart_backoff_ms`); see
    /// [`DEFAULT_RESTART_LIMIT`].
    pub restart_policy: RestartPolicy,
    /// This component's log ring, when the system has a log server
    /// (`<instance>.log_server`, our own attribute, names it): the
    /// component writes its console lines there instead of printing them.
    pub log_ring: Option<LogRingEnd>,
    /// Set on the log server only: the rings it prints from.
    pub log_server: Option<LogServer>,
    /// log2 of the number of CSpace slots.
    pub cnode_size_bits: u8,
    /// The first slot the spec does not use; the loader may put its own caps
    /// (TCB, CNode, ...) from here on.
    pub first_free_slot: u64,
    /// What PCI device this component drives (`<instance>.match`, our own
    /// attribute: `"net"`, `"block"`; `pci::MATCHES`): the loader binds the
    /// first supported function of that kind found at boot to it, makes
    /// the `Pci*` objects from that function, and does not start the
    /// component when there is none.
    pub pci_match: Option<String>,
    /// Capabilities to place in the component's CSpace.
    pub caps: Vec<Cap>,
    /// Frames to map into the component's address space.
    pub mappings: Vec<Mapping>,
    /// Every interface of the component type, in declaration order, and what
    /// it is bound to.
    pub interfaces: Vec<Interface>,
}

/// Bytes of one component's log ring: one page, written only by that
/// component and mapped read-only in the log server.
pub const LOG_RING_SIZE: u64 = PAGE_SIZE;

/// A writer's end of its log ring.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRingEnd {
    /// The ring: a [`ObjectKind::Frames`] object of [`LOG_RING_SIZE`]
    /// bytes, which the loader maps read-write at a fixed address
    /// (`component_runtime::logring`), outside the dataport range.
    pub ring: ObjectId,
    /// The slot of the writer's capability to the log server's
    /// notification (send only, badged by the writer), in [`Component::caps`].
    pub signal_slot: u64,
}

/// What the log server reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogServer {
    /// The slot of its notification capability (receive), in
    /// [`Component::caps`]: every writer signals it after a line.
    pub wait_slot: u64,
    /// Every writer's ring, by the writer's name: the name is the line
    /// prefix the server prints, so it comes from the spec, never from the
    /// ring (which its writer could fill with anything).
    pub rings: Vec<LogRingSource>,
}

/// One ring the log server reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRingSource {
    /// The writer's instance name.
    pub name: String,
    /// The ring object (the writer's [`LogRingEnd::ring`]).
    pub ring: ObjectId,
}

/// How the supervisor restarts a `restartable` component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartPolicy {
    /// More deaths than this within `window_ms` hold the component down.
    pub limit: u32,
    /// The window, in milliseconds.
    pub window_ms: u32,
    /// Delay before the second restart in the window; doubles per restart.
    pub backoff_ms: u32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            limit: DEFAULT_RESTART_LIMIT,
            window_ms: DEFAULT_RESTART_WINDOW_MS,
            backoff_ms: DEFAULT_RESTART_BACKOFF_MS,
        }
    }
}

/// A capability in a component's CSpace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cap {
    /// The CSpace slot (equal to the CPtr for a single-level CSpace).
    pub slot: u64,
    /// The object the capability refers to.
    pub object: ObjectId,
    /// The rights to mint the capability with.
    pub rights: Rights,
    /// The badge to mint with; 0 for none.
    pub badge: u64,
}

/// seL4 capability rights (`seL4_CapRights_new(grant_reply, grant, read,
/// write)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rights {
    /// May receive (endpoint, notification) or read (frame).
    pub read: bool,
    /// May send (endpoint, notification) or write (frame).
    pub write: bool,
    /// May transfer capabilities over an endpoint.
    pub grant: bool,
    /// May `seL4_Call` through an endpoint and so grant a reply capability.
    pub grant_reply: bool,
}

impl Rights {
    /// No rights: for objects whose capability carries none (IRQ handler,
    /// I/O ports).
    pub const NONE: Rights = Rights { read: false, write: false, grant: false, grant_reply: false };
    /// Receive only: an RPC server's endpoint or a consumer's notification.
    pub const READ: Rights = Rights { read: true, write: false, grant: false, grant_reply: false };
    /// Send only: an emitter's notification.
    pub const WRITE: Rights = Rights { read: false, write: true, grant: false, grant_reply: false };
    /// Call: an RPC client's endpoint (write plus grant-reply, so the server
    /// can answer).
    pub const CALL: Rights = Rights { read: false, write: true, grant: false, grant_reply: true };
    /// Everything.
    pub const ALL: Rights = Rights { read: true, write: true, grant: true, grant_reply: true };
}

/// How a dataport is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// Read-only mapping (`_access = "R"`); writes fault.
    ReadOnly,
    /// Read-write mapping (`_access = "RW"`; unset: the owner's end of a
    /// shared region, both ends of a channel, a driver's device memory).
    ReadWrite,
}

/// A run of frames mapped into a component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// A [`ObjectKind::Frames`] or [`ObjectKind::DeviceFrames`] object; the
    /// whole object is mapped.
    pub object: ObjectId,
    /// Page-aligned virtual address of the first byte.
    pub vaddr: u64,
    /// Read-only or read-write.
    pub access: Access,
    /// `false` maps the frames uncached (device memory, unless
    /// `_hardware_cached` is set).
    pub cached: bool,
}

/// One interface of a component and how it is bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// The interface name from the component type.
    pub name: String,
    /// What the generated glue for this interface uses.
    pub binding: Binding,
}

/// What an interface is connected to, from the component's point of view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Binding {
    /// A `maybe` interface the assembly leaves unconnected; its slot or
    /// address range stays empty.
    Unconnected,
    /// `uses` over `seL4RPCCall`: the client's badged endpoint capability.
    RpcClient {
        /// Slot of the endpoint capability.
        slot: u64,
    },
    /// `provides` over `seL4RPCCall`: the server's endpoint capability.
    RpcServer {
        /// Slot of the endpoint capability.
        slot: u64,
    },
    /// `emits` over `seL4Notification`.
    EventEmitter {
        /// Slot of the notification capability (write).
        slot: u64,
    },
    /// `consumes` over `seL4Notification`.
    EventConsumer {
        /// Slot of the notification capability (read).
        slot: u64,
    },
    /// `consumes` over `seL4HardwareInterrupt`.
    InterruptConsumer {
        /// Slot of the notification the IRQ signals.
        slot: u64,
        /// Slot of the IRQ handler capability, for acknowledging.
        irq_handler_slot: u64,
    },
    /// `uses IOPort` over `seL4HardwareIOPort`.
    IoPortUser {
        /// Slot of the I/O port capability.
        slot: u64,
    },
    /// A dataport (`seL4SharedData` or the driver end of `seL4HardwareMMIO`).
    Dataport {
        /// Where it is mapped.
        vaddr: u64,
        /// Its size in bytes.
        size: u64,
        /// Its rights.
        access: Access,
    },
}

/// Why an encoded spec could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The blob does not start with [`MAGIC`].
    BadMagic,
    /// The blob was written for another [`FORMAT_VERSION`].
    WrongVersion {
        /// The version in the blob.
        found: u32,
    },
    /// postcard could not decode the blob.
    Malformed(postcard::Error),
    /// The blob decoded but describes an inconsistent system.
    Invalid(SpecError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadMagic => write!(f, "not a system spec (bad magic)"),
            DecodeError::WrongVersion { found } => {
                write!(f, "system spec format version {found}, this build reads version {FORMAT_VERSION}")
            }
            DecodeError::Malformed(e) => write!(f, "malformed system spec: {e}"),
            DecodeError::Invalid(e) => write!(f, "invalid system spec: {e}"),
        }
    }
}

impl SystemSpec {
    /// An empty spec of the current format version.
    pub fn new() -> SystemSpec {
        SystemSpec { format_version: FORMAT_VERSION, objects: Vec::new(), components: Vec::new() }
    }

    /// Adds an object and returns its id.
    pub fn add_object(&mut self, name: impl Into<String>, kind: ObjectKind) -> ObjectId {
        let id = ObjectId(self.objects.len() as u32);
        self.objects.push(Object { name: name.into(), kind });
        id
    }

    /// The object `id` refers to, if any.
    pub fn object(&self, id: ObjectId) -> Option<&Object> {
        self.objects.get(id.0 as usize)
    }

    /// The component called `name`, if any.
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Writes [`MAGIC`], then the format version (little endian, so a reader
    /// can check it before trusting the rest), then the postcard encoding.
    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&postcard::to_allocvec(self)?);
        Ok(out)
    }

    /// Reads a spec written by [`SystemSpec::encode`] and validates it.
    pub fn decode(bytes: &[u8]) -> Result<SystemSpec, DecodeError> {
        let rest = bytes.strip_prefix(&MAGIC[..]).ok_or(DecodeError::BadMagic)?;
        if rest.len() < 4 {
            return Err(DecodeError::BadMagic);
        }
        let found = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if found != FORMAT_VERSION {
            return Err(DecodeError::WrongVersion { found });
        }
        let spec: SystemSpec = postcard::from_bytes(&rest[4..]).map_err(DecodeError::Malformed)?;
        spec.validate().map_err(DecodeError::Invalid)?;
        Ok(spec)
    }
}

impl Default for SystemSpec {
    fn default() -> Self {
        SystemSpec::new()
    }
}

impl ObjectKind {
    /// The number of bytes a frame object covers, or `None` for objects that
    /// cannot be mapped.
    pub fn mappable_size(&self) -> Option<u64> {
        match self {
            ObjectKind::Frames { size }
            | ObjectKind::DeviceFrames { size, .. }
            | ObjectKind::PciBarFrames { size, .. } => Some(*size),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
