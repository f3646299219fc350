//! The supervisor's own clock: the CMOS RTC's periodic interrupt, on a
//! notification bound to the root task's thread.
//!
//! seL4 without MCS gives a receive no timeout, and the supervisor needs
//! to act on time even when no component sends it anything: to read
//! injection commands from the test console, to carry out restarts after
//! their back-off, and to see that a component stopped making progress.
//! Why not the ticker: a watchdog that a hung ticker silences watches
//! nothing; the ticker is one of the components it must be able to judge
//! (a ticker spinning at priority 200 starves everybody but the root task,
//! so only an interrupt of the root task's own gets the supervisor in).
//! The PIT is the ticker's, the local APIC timer the kernel's; the RTC's
//! periodic interrupt (ISA IRQ 8, IOAPIC pin 8) is unused and needs only
//! two registers set once.
//!
//! Sharing the RTC with the ticker: the ticker reads the date through the
//! same index/data port pair (0x70/0x71), once at its start. The
//! supervisor, at the top priority, may select register C between the
//! ticker's index write and data read; the ticker reads the date twice
//! until two reads agree and waits out the update flag, so such a read is
//! simply repeated.

use crate::objects::{ObjectAllocator, Retype};
use component_runtime::error;
use sel4::{CPtr, CapData, CapRights, ObjectType, Word};

/// The badge the clock's signals arrive with on the supervisor's endpoint
/// (bound notification): far above every fault badge (instance + 1).
pub const CLOCK_BADGE: Word = 1 << (sel4::BADGE_BITS - 1);

/// RTC periodic rate: 32768 >> (rate - 1) Hz; 12 gives 16 Hz (62.5 ms).
const RATE: u8 = 12;
/// ISA IRQ 8: IOAPIC 0, pin 8 (no MADT override on QEMU's pc), edge,
/// active high.
const PIN: Word = 8;
/// A CPU vector no assembly uses (theirs are listed in the spec; the
/// loader made those IRQs first, so a clash fails here, reported).
const VECTOR: Word = 8;

/// The RTC ticking into the root task's bound notification.
pub struct Clock {
    handler: CPtr,
}

fn cmos_write(reg: u8, value: u8) {
    // Bit 7 of the index keeps NMIs disabled, as the ticker writes it.
    let _ = sel4::x86_io_port_out8(sel4::CAP_IO_PORT, 0x70, 0x80 | reg);
    let _ = sel4::x86_io_port_out8(sel4::CAP_IO_PORT, 0x71, value);
}

fn cmos_read(reg: u8) -> u8 {
    let _ = sel4::x86_io_port_out8(sel4::CAP_IO_PORT, 0x70, 0x80 | reg);
    sel4::x86_io_port_in8(sel4::CAP_IO_PORT, 0x71).unwrap_or(0)
}

impl Clock {
    /// Binds a notification to the root task's thread, routes the RTC's
    /// interrupt to it and starts the periodic interrupt. `None` (reported)
    /// if any step fails: the supervisor then only reacts to messages.
    pub fn start(objects: &mut ObjectAllocator<'_>) -> Option<Clock> {
        match Self::try_start(objects) {
            Ok(clock) => Some(clock),
            Err(e) => {
                error!("no supervisor clock (RTC periodic interrupt): {e}");
                None
            }
        }
    }

    fn try_start(objects: &mut ObjectAllocator<'_>) -> Result<Clock, alloc::string::String> {
        use alloc::format;
        let notification = objects.object(ObjectType::Notification, 0).map_err(|e| format!("{e}"))?;
        let badged = objects.slot().map_err(|e| format!("{e}"))?;
        sel4::cnode_mint(
            sel4::CAP_INIT_THREAD_CNODE,
            badged,
            64,
            sel4::CAP_INIT_THREAD_CNODE,
            notification,
            64,
            CapRights::new(false, false, true),
            CapData::badge(CLOCK_BADGE).into_word(),
        )
        .map_err(|e| format!("CNode_Mint: {e:?}"))?;
        sel4::tcb_bind_notification(sel4::CAP_INIT_THREAD_TCB, notification)
            .map_err(|e| format!("TCB_BindNotification: {e:?}"))?;
        let handler = objects.slot().map_err(|e| format!("{e}"))?;
        sel4::irq_control_get_ioapic(
            sel4::CAP_IRQ_CONTROL,
            sel4::CAP_INIT_THREAD_CNODE,
            handler,
            64,
            0,
            PIN,
            0,
            0,
            VECTOR,
        )
        .map_err(|e| format!("IRQControl_GetIOAPIC (pin {PIN}, vector {VECTOR}): {e:?}"))?;
        sel4::irq_handler_set_notification(handler, badged)
            .map_err(|e| format!("IRQHandler_SetNotification: {e:?}"))?;
        // Register A: keep the divider (bits 4..6), set the rate; register
        // B: periodic interrupt enable (bit 6); reading C clears a pending
        // flag so the first edge comes.
        let a = cmos_read(0x0A);
        cmos_write(0x0A, (a & 0xF0) | RATE);
        let b = cmos_read(0x0B);
        cmos_write(0x0B, b | 0x40);
        let _ = cmos_read(0x0C);
        let _ = sel4::irq_handler_ack(handler);
        Ok(Clock { handler })
    }

    /// Takes one tick: clears the RTC's flag (else it raises no further
    /// interrupt) and acknowledges the IRQ.
    pub fn tick(&self) {
        let _ = cmos_read(0x0C);
        let _ = sel4::irq_handler_ack(self.handler);
    }
}
