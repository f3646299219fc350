//! pci_probe: proves, on the real image, the three kinds of hardware
//! capability the loader hands out (examples/hwprobe/hwprobe.camkes), as a
//! precursor to the e1000 driver. Boot with `simulate --net`.
//!
//! 1. **I/O ports:** reads PCI configuration space through 0xCF8/0xCFC,
//!    lists every function on bus 0, reports the e1000 the root task bound
//!    to it (IDs,
//!    BAR0 and its size, interrupt line and pin), and shows that the kernel
//!    refuses ports outside the granted range through the same capability.
//! 2. **MMIO:** checks BAR0 against the address the loader mapped, then
//!    reads STATUS and the MAC address from the uncached register mapping.
//! 3. **Interrupts:** raises an interrupt cause through the device's ICS
//!    register, waits (bounded) for the IOAPIC interrupt on the notification,
//!    clears the cause by reading ICR and acknowledges the IRQ handler;
//!    [`IRQ_ROUNDS`] times, each with a different cause, which only works if
//!    acknowledging really re-enables the line.
//! 4. Logs `hwprobe done` and exits.
//!
//! Every failure is logged as a line of its own (`... FAILED`, `error: ...`)
//! and the probe goes on with what still makes sense, so one run shows
//! everything that is wrong.
#![no_std]
#![no_main]

use component_runtime::{error, log};
use e1000_regs::{self as e1000, RegisterFile};

mod pci;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/pci_probe.rs"));

/// The e1000, wherever the root task found it (its start record names
/// the function bound to this component: `pci_probe.match = "net"`).
type E1000 = pci::Device<pci::ThroughPorts>;
const E1000_VENDOR: u16 = 0x8086;
const E1000_DEVICE: u16 = 0x100e;

/// Interrupt rounds, each with its own cause: causes the device does not
/// raise on its own while its receiver and transmitter are off, so a cause
/// seen in ICR is the one hwprobe set.
const IRQ_ROUNDS: [u32; 3] = [e1000::INT_LSC, e1000::INT_RXT0, e1000::INT_TXDW];

/// How many times to poll the interrupt notification (yielding in between)
/// before giving up. The interrupt is raised synchronously by the ICS write
/// and arrives within a few polls; this bound only keeps a broken path from
/// hanging the probe (a few hundred milliseconds under TCG).
const MAX_POLLS: u32 = 100_000;

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    log!("hwprobe started");
    // The loader's start record says where the MMIO dataport is physically
    // (BAR0 as the root task found it); check_bar0 compares it with what
    // the firmware put in BAR0.
    let mapped_bar0 = start.physical_address(glue::regs::VADDR as u64).unwrap_or(0);
    let Some(function) = start.own_pci_device().and_then(|r| pci::Function::from_bdf(u32::from(r.bdf))) else {
        error!("the start record names no PCI function bound to this component");
        component_runtime::exit(1)
    };
    let dev = pci::Device::new(pci::ThroughPorts, function);
    if let Err(e) = probe(&dev, mapped_bar0) {
        error!("I/O port access to PCI configuration space failed: {e:?}");
    }
    log!("hwprobe done");
    component_runtime::exit(0)
}

/// All steps; an `Err` is an I/O port access that should have worked.
fn probe(dev: &E1000, mapped_bar0: u64) -> sel4::Result<()> {
    scan_bus0()?;
    let e1000_found = report_e1000(dev)?;
    check_port_range();
    if !e1000_found {
        log!("no e1000 at {dev}: boot with --net; skipping MMIO and interrupts");
        return Ok(());
    }
    if !check_bar0(dev, mapped_bar0)? {
        log!("skipping MMIO and interrupts: the register mapping is not the e1000's");
        return Ok(());
    }
    let mut regs = e1000::Mmio::new(glue::regs::get());
    report_registers(&regs);
    raise_interrupts(&mut regs);
    Ok(())
}

/// Step 1a: every function on bus 0.
fn scan_bus0() -> sel4::Result<()> {
    let mut count = 0;
    pci::scan_bus(pci::ThroughPorts, 0, |f, vendor, device, class| {
        log!("pci {f} {vendor:04x}:{device:04x} class {class:06x}");
        count += 1;
    })?;
    log!("pci bus 0: {count} functions");
    Ok(())
}

/// Step 1b: the e1000's identity, BAR0 and interrupt routing. Returns
/// whether it is there.
fn report_e1000(dev: &E1000) -> sel4::Result<bool> {
    let Some((vendor, device)) = dev.ids()? else {
        return Ok(false);
    };
    log!("pci {dev}: vendor {vendor:#06x} device {device:#06x}");
    if (vendor, device) != (E1000_VENDOR, E1000_DEVICE) {
        error!("pci {dev}: expected the e1000 ({E1000_VENDOR:#06x}:{E1000_DEVICE:#06x})");
        return Ok(false);
    }
    let command = dev.read(pci::REG_COMMAND)? & 0xffff;
    log!(
        "pci {dev}: command {command:#06x} (memory {}, INTx {})",
        if command & pci::COMMAND_MEMORY != 0 { "on" } else { "off" },
        if command & pci::COMMAND_INTX_DISABLE != 0 { "disabled" } else { "enabled" },
    );
    match dev.memory_bar0()? {
        Some(bar) => log!("pci {dev}: bar0 {:#x} size {:#x}", bar.base, bar.size),
        None => error!("pci {dev}: BAR0 is an I/O BAR"),
    }
    let interrupt = dev.read(pci::REG_INTERRUPT)?;
    let (line, pin) = (interrupt & 0xff, (interrupt >> 8) & 0xff);
    let pin_name = match pin {
        0 => "none",
        1 => "INTA#",
        2 => "INTB#",
        3 => "INTC#",
        4 => "INTD#",
        _ => "invalid",
    };
    log!("pci {dev}: interrupt line {line} pin {pin} ({pin_name})");
    Ok(true)
}

/// Step 1c: the kernel must refuse ports outside the capability's range
/// (seL4 5.0 answers `seL4_IllegalOperation`), for reads and writes alike,
/// including an access that starts inside the range and runs past its end.
fn check_port_range() {
    use glue::pci_config as ports;
    report_refusal("port 0x80", ports::in8(0x80).map(u32::from));
    // A byte on COM1 would show up on this console if it got through.
    report_refusal("port 0x3f8", ports::out8(0x3f8, b'!').map(|()| 0));
    report_refusal("port 0xcfe (32-bit, past 0xcff)", ports::in32(0xcfe));
}

fn report_refusal(what: &str, result: sel4::Result<u32>) {
    match result {
        Err(e) => log!("{what} refused: {e:?}"),
        Ok(value) => {
            log!("{what} NOT refused (got {value:#x}): the I/O port capability is not restricted")
        }
    }
}

/// Step 2a: does the mapping the loader made really cover the e1000's
/// registers? BAR0 must be where the assembly says, as large as the
/// dataport, and answered (memory decoding on).
fn check_bar0(dev: &E1000, mapped_bar0: u64) -> sel4::Result<bool> {
    let Some(bar) = dev.memory_bar0()? else {
        return Ok(false);
    };
    if bar.base != mapped_bar0 || bar.size != glue::regs::SIZE as u64 {
        error!(
            "pci {dev}: bar0 {:#x} size {:#x}, but the assembly maps {mapped_bar0:#x} size {:#x} \
             (the loader mapped another BAR)",
            bar.base,
            bar.size,
            glue::regs::SIZE
        );
        return Ok(false);
    }
    let command = dev.read(pci::REG_COMMAND)? & 0xffff;
    if command & pci::COMMAND_MEMORY == 0 {
        log!("pci {dev}: enabling memory decoding");
        dev.write(pci::REG_COMMAND, command | pci::COMMAND_MEMORY)?;
    }
    log!("pci {dev}: bar0 matches the mapping ({mapped_bar0:#x}, from the loader's start record)");
    Ok(true)
}

/// Step 2b: registers through the uncached mapping.
fn report_registers(regs: &e1000::Mmio) {
    let status = regs.read(e1000::STATUS);
    let link = if status & e1000::STATUS_LU != 0 { "up" } else { "down" };
    match e1000::mac(regs) {
        Some([a, b, c, d, e, f]) => {
            log!("e1000 status {status:#010x} mac {a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x} link {link}")
        }
        None => {
            error!("e1000 status {status:#010x}: receive address 0 not valid (RAH0 {:#010x})", regs.read(e1000::RAH0))
        }
    }
}

/// Step 3: one interrupt per cause in [`IRQ_ROUNDS`].
fn raise_interrupts(regs: &mut e1000::Mmio) {
    // Start from a quiet device and an empty notification: no cause
    // enabled, none pending, nothing signalled before we asked.
    regs.write(e1000::IMC, !0);
    let stale = regs.read(e1000::ICR);
    let signalled = glue::irq::poll();
    if stale != 0 || signalled != 0 {
        log!("irq: cleared stale state (ICR {stale:#x}, notification {signalled:#x})");
    }
    // The kernel masks the line when it delivers the interrupt and unmasks
    // it only on acknowledge; an instance that was restarted between the
    // two would otherwise never see it again. Harmless when not masked.
    if let Err(e) = glue::irq::acknowledge() {
        log!("irq FAILED: initial acknowledge: {e:?}");
    }
    for (round, &cause) in IRQ_ROUNDS.iter().enumerate() {
        let round = round + 1;
        regs.write(e1000::IMS, cause);
        regs.write(e1000::ICS, cause);
        let polls = wait_bounded();
        // Reading ICR clears the cause and so deasserts the (level) line
        // before the kernel unmasks it again.
        let icr = regs.read(e1000::ICR);
        regs.write(e1000::IMC, cause);
        let ack = glue::irq::acknowledge();
        match (polls, ack) {
            (Some(polls), Ok(())) if icr == cause => {
                log!("irq OK: cause {icr:#x} (round {round}, notification after {polls} polls, acknowledged)")
            }
            (Some(_), Ok(())) => log!("irq FAILED: round {round}: ICR {icr:#x}, expected exactly {cause:#x}"),
            (None, _) => log!(
                "irq FAILED: round {round}: no notification after {MAX_POLLS} polls (ICR {icr:#x}: {})",
                if icr & cause != 0 { "the device raised the cause" } else { "the device did not raise it" }
            ),
            (Some(_), Err(e)) => log!("irq FAILED: round {round}: acknowledge: {e:?}"),
        }
    }
}

/// Polls the interrupt notification up to [`MAX_POLLS`] times, yielding in
/// between; the number of polls it took, or `None`.
fn wait_bounded() -> Option<u32> {
    for polls in 1..=MAX_POLLS {
        if glue::irq::poll() != 0 {
            return Some(polls);
        }
        sel4::yield_now();
    }
    None
}
