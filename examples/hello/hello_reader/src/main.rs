//! hello_reader: checks the dataport hello_client fills, once per `Ready`.
//!
//! Its mapping of the dataport is read-only. In its first life, after the
//! first good check, it writes to the dataport on purpose: the write must
//! VM-fault, the supervisor reports it and restarts the reader (it is
//! `restartable`), and the restarted reader (`StartInfo.restarts` > 0) only
//! reads.
#![no_std]
#![no_main]

use component_runtime::{error, log};

#[path = "../../hello_client/src/pattern.rs"]
mod pattern;

use pattern::Check;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/hello_reader.rs"));

/// How often a check that overlapped a rewrite by the client is retried
/// before giving up on that event. The client writes 8 KiB and then blocks
/// or yields, so one or two retries are the most a real run needs.
const MAX_RETRIES: usize = 100;

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    let restarts = start.restarts;
    log!("reader started (restart {})", restarts);
    let buffer = glue::buffer::get();
    // Only the first life misbehaves: a restarted reader must run cleanly.
    let mut fault_pending = restarts == 0;

    loop {
        glue::ready::wait();
        let mut outcome = Check::Changing;
        for _ in 0..MAX_RETRIES {
            outcome = pattern::check(buffer.len(), |offset, out| buffer.read(offset, out));
            if outcome != Check::Changing {
                break;
            }
            // The client is rewriting the buffer: let it finish (same
            // priority, so a yield runs it).
            sel4::yield_now();
        }
        match outcome {
            Check::Ok { round, bytes } => {
                log!("dataport OK: round {}, {} bytes verified (restart {})", round, bytes, restarts)
            }
            Check::Changing => {
                log!("dataport CORRUPT: still being rewritten after {} tries (restart {})", MAX_RETRIES, restarts)
            }
            Check::BadHeader { magic, round, length } => log!(
                "dataport CORRUPT: bad header magic {:#010x} round {} length {} (restart {})",
                magic,
                round,
                length,
                restarts
            ),
            Check::BadByte { round, offset, found, expected } => log!(
                "dataport CORRUPT: round {}, byte {:#x} is {:#04x}, expected {:#04x} (restart {})",
                round,
                offset,
                found,
                expected,
                restarts
            ),
            Check::BadChecksum { round, stored, computed } => log!(
                "dataport CORRUPT: round {}, checksum {:#010x} stored, {:#010x} computed (restart {})",
                round,
                stored,
                computed,
                restarts
            ),
        }

        if fault_pending && matches!(outcome, Check::Ok { .. }) {
            fault_pending = false;
            log!("writing to read-only dataport (expect a fault)");
            write_read_only(glue::buffer::VADDR as *mut u8);
            // Only reached if the loader mapped the dataport writable.
            error!("the write to the read-only dataport did not fault");
        }
    }
}

/// Writes the byte at `ptr` back unchanged. The glue gives a read-only
/// dataport no write method, hence the raw pointer; writing the value that
/// is already there means that even a wrongly writable mapping leaves the
/// client's data intact.
fn write_read_only(ptr: *mut u8) {
    // SAFETY: `ptr` is the dataport's first byte, mapped (readable) for the
    // component's lifetime. The write is meant to fault; if it does not, it
    // stores the value just read, which changes nothing.
    unsafe {
        let value = core::ptr::read_volatile(ptr);
        core::ptr::write_volatile(ptr, value);
    }
}
