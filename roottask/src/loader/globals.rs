//! The global objects of the spec (endpoints, notifications, dataport
//! frames, device frames, IRQ handlers, I/O port ranges): made once at boot
//! from the boot untypeds, in spec order, and shared by every incarnation
//! of the components that use them.

use super::{device, elf, invoke, LoadError};
use crate::discovery::Discovery;
use crate::objects::{ObjectAllocator, Retype};
use alloc::format;
use alloc::vec::Vec;
use pci::Route;
use sel4::{CPtr, CapData, CapRights, ObjectType, Word};
use system_spec::{IoApicIrq, ObjectKind, SystemSpec, LARGE_PAGE_SIZE, PAGE_SIZE};

/// `CONFIG_RETYPE_FAN_OUT_LIMIT` (kernel-config/common.h): the most objects
/// one Untyped_Retype may make.
const RETYPE_FAN_OUT_LIMIT: u64 = 256;

/// A global object, as made for the spec.
pub(super) enum Loaded {
    Endpoint(CPtr),
    Notification(CPtr),
    /// Frames of a dataport (RAM, zeroed) or a device region, in order.
    Frames(Frames),
    IrqHandler(CPtr),
    IoPorts(CPtr),
    /// A device object of a driver that got no device at boot (it is not
    /// started, so nothing refers to this).
    Absent,
    /// A register object of another model of the driver's kind (an I/O BAR
    /// for a virtio-blk when the disk found is an NVMe, whose BAR0 is
    /// memory): the driver starts without it (its slot empty, its dataport
    /// unmapped) if another of its register objects fits the device.
    Unfit,
}

/// The frame capabilities backing one dataport, in address order.
pub(super) struct Frames {
    pub(super) caps: Vec<CPtr>,
    /// Bytes per frame: `system_spec::frame_size` of the dataport (RAM), or
    /// 4 KiB (device regions).
    pub(super) frame_size: u64,
}

/// Makes every global object of `spec`, in order (an IRQ names a
/// notification made before it).
pub(super) fn make_objects(
    global: &mut ObjectAllocator<'_>,
    spec: &SystemSpec,
    found: &Discovery,
) -> Result<Vec<Loaded>, LoadError> {
    let mut devices = device::DeviceMemory::new(global.bootinfo());
    let mut objects = Vec::with_capacity(spec.objects.len());
    for object in &spec.objects {
        let loaded = match pci_object(&object.kind, found) {
            Some(Err(Unmade::Absent)) => Loaded::Absent,
            Some(Err(Unmade::Unfit)) => Loaded::Unfit,
            // A device found at boot that cannot be had (its BAR in no
            // device region, a pin the kernel refuses) costs its driver
            // alone: it is not started (`System::build_all`).
            Some(Ok(kind)) => make_object(global, &mut devices, &objects, &kind).unwrap_or_else(|e| {
                component_runtime::error!("object {}: {e}", object.name);
                Loaded::Absent
            }),
            None => make_object(global, &mut devices, &objects, &object.kind)
                .map_err(|e| LoadError(format!("object {}: {e}", object.name)))?,
        };
        objects.push(loaded);
    }
    Ok(objects)
}

/// Why a device object of a found function was not made.
enum Unmade {
    /// The driver got no device, or the BAR cannot be had (said here; the
    /// driver is not started).
    Absent,
    /// The BAR is not of the object's kind (memory for a port range, or
    /// the other way round): an object for another model.
    Unfit,
}

/// A device object of a function found at boot, as the fixed object it
/// resolves to: `None` for objects that are fixed already, `Some(Err)`
/// when it is not made (`Unmade`).
fn pci_object(kind: &ObjectKind, found: &Discovery) -> Option<Result<ObjectKind, Unmade>> {
    use pci::Bar;
    let (driver, bar) = match kind {
        ObjectKind::PciBarFrames { driver, bar, .. } | ObjectKind::PciBarPorts { driver, bar } => (driver, *bar),
        ObjectKind::PciIrq(irq) => (&irq.driver, 0),
        _ => return None,
    };
    let Some((f, binding)) = found.bound(driver) else { return Some(Err(Unmade::Absent)) };
    // The register frames map the BAR the device names where it names one
    // (virtio's capabilities), else the assembly's: one BAR, never all of
    // the function's.
    let bar = match kind {
        ObjectKind::PciBarFrames { .. } => binding.regs_bar.unwrap_or(bar),
        _ => bar,
    };
    let fail = |what: core::fmt::Arguments<'_>| {
        component_runtime::error!("pci {}: {what}: {driver} not started", f.function);
        Some(Err(Unmade::Absent))
    };
    Some(Ok(match (kind, f.bars.get(bar as usize).copied().unwrap_or(Bar::None)) {
        (ObjectKind::PciBarFrames { size, .. }, Bar::Memory { base, size: bar_size }) => {
            // A BAR smaller than the dataport (virtio's 16 KiB in the
            // e1000's 128 KiB) is mapped at its own size, no more: the
            // driver reads that size from its start record and bounds
            // every access by it.
            let mapped = bar_size.min(*size);
            if mapped < PAGE_SIZE || mapped % PAGE_SIZE != 0 || base % PAGE_SIZE != 0 {
                return fail(format_args!(
                    "bar{bar} is {bar_size:#x} bytes at {base:#x}: not whole pages the driver can map ({size:#x} at most)"
                ));
            }
            ObjectKind::DeviceFrames { paddr: base, size: mapped }
        }
        (ObjectKind::PciBarPorts { .. }, Bar::Io { base, size }) => {
            ObjectKind::IoPorts { first: base, last: base + (size - 1) }
        }
        (ObjectKind::PciIrq(irq), _) => {
            let Route::IoApic { pin, active_low } = binding.route else {
                return fail(format_args!("its interrupt cannot be routed"));
            };
            ObjectKind::IoApicIrq(IoApicIrq {
                ioapic: 0,
                pin: u32::from(pin),
                level_triggered: true,
                active_low,
                vector: irq.vector,
                notification: irq.notification,
                badge: irq.badge,
            })
        }
        // The other kind of BAR: the object of another model (the driver
        // starts if one of its register objects fits: `System::build_all`).
        (ObjectKind::PciBarFrames { .. }, Bar::Io { .. }) | (ObjectKind::PciBarPorts { .. }, Bar::Memory { .. }) => {
            return Some(Err(Unmade::Unfit))
        }
        (ObjectKind::PciBarFrames { .. }, other) => {
            return fail(format_args!("bar{bar} is not a memory BAR ({other:?})"))
        }
        (_, other) => return fail(format_args!("bar{bar} is not an I/O BAR ({other:?})")),
    }))
}

/// Makes one global object of the spec.
fn make_object(
    global: &mut ObjectAllocator<'_>,
    devices: &mut device::DeviceMemory<'_>,
    made: &[Loaded],
    kind: &ObjectKind,
) -> Result<Loaded, LoadError> {
    Ok(match kind {
        ObjectKind::Endpoint => Loaded::Endpoint(global.object(ObjectType::Endpoint, 0)?),
        ObjectKind::Notification => Loaded::Notification(global.object(ObjectType::Notification, 0)?),
        ObjectKind::Frames { size } => Loaded::Frames(make_frames(global, *size)?),
        ObjectKind::DeviceFrames { paddr, size } => {
            Loaded::Frames(Frames { caps: devices.frames(global, *paddr, *size)?, frame_size: elf::PAGE })
        }
        ObjectKind::IoApicIrq(irq) => Loaded::IrqHandler(make_irq_handler(global, made, irq)?),
        ObjectKind::IoPorts { first, last } => {
            let slot = global.slot()?;
            invoke(
                "CNode_Mint (I/O ports)",
                sel4::cnode_mint(
                    sel4::CAP_INIT_THREAD_CNODE,
                    slot,
                    64,
                    sel4::CAP_INIT_THREAD_CNODE,
                    sel4::CAP_IO_PORT,
                    64,
                    CapRights::all(),
                    CapData::io_port_range(*first, *last).into_word(),
                ),
            )?;
            Loaded::IoPorts(slot)
        }
        ObjectKind::PciBarFrames { .. } | ObjectKind::PciBarPorts { .. } | ObjectKind::PciIrq(_) => {
            unreachable!("resolved by pci_object")
        }
    })
}

/// The frames of a RAM dataport of `size` bytes: one untyped of the next
/// power of two, retyped frame by frame from its start, so the dataport is
/// physically contiguous and a driver can hand a device any address
/// inside it (DMA).
fn make_frames(global: &mut ObjectAllocator<'_>, size: u64) -> Result<Frames, LoadError> {
    let frame_size = system_spec::frame_size(size);
    let (ty, count) = match frame_size {
        LARGE_PAGE_SIZE => (ObjectType::X86LargePage, size / LARGE_PAGE_SIZE),
        _ => (ObjectType::X86_4K, size.div_ceil(elf::PAGE)),
    };
    let bits = (count * frame_size).next_power_of_two().trailing_zeros() as Word;
    let untyped = global.object(ObjectType::Untyped, bits)?;
    let slots = global.slots(count)?;
    // Consecutive slots, so one Retype makes up to the kernel's fan-out
    // limit of frames at a time.
    let mut next = slots.start;
    while next < slots.end {
        let batch = (slots.end - next).min(RETYPE_FAN_OUT_LIMIT);
        sel4::untyped_retype(untyped, ty, 0, sel4::CAP_INIT_THREAD_CNODE, 0, 0, next, batch)
            .map_err(|e| LoadError(format!("dataport frames: {e:?}")))?;
        next += batch;
    }
    Ok(Frames { caps: slots.collect(), frame_size })
}

/// The handler of an I/O APIC interrupt, bound to its notification.
fn make_irq_handler(global: &mut ObjectAllocator<'_>, made: &[Loaded], irq: &IoApicIrq) -> Result<CPtr, LoadError> {
    let Some(Loaded::Notification(notification)) = made.get(irq.notification.0 as usize) else {
        return Err(LoadError(format!(
            "IRQ notification #{} is not a notification made before it",
            irq.notification.0
        )));
    };
    let handler = global.slot()?;
    invoke(
        "IRQControl_GetIOAPIC",
        sel4::irq_control_get_ioapic(
            sel4::CAP_IRQ_CONTROL,
            sel4::CAP_INIT_THREAD_CNODE,
            handler,
            64,
            irq.ioapic as Word,
            irq.pin as Word,
            irq.level_triggered as Word,
            irq.active_low as Word,
            irq.vector as Word,
        ),
    )?;
    // The kernel signals the notification with the badge of the capability
    // bound here. An unbadged one would deliver badge 0, which a consumer's
    // seL4_Poll cannot tell from "nothing arrived" (and seL4_Wait returns
    // 0): bind a copy badged as the spec says (1, or its own bit on a
    // shared notification).
    let badged = global.slot()?;
    invoke(
        "CNode_Mint (IRQ notification, badged)",
        sel4::cnode_mint(
            sel4::CAP_INIT_THREAD_CNODE,
            badged,
            64,
            sel4::CAP_INIT_THREAD_CNODE,
            *notification,
            64,
            CapRights::new(false, false, true),
            CapData::badge(irq.badge as Word).into_word(),
        ),
    )?;
    invoke("IRQHandler_SetNotification", sel4::irq_handler_set_notification(handler, badged))?;
    Ok(handler)
}
