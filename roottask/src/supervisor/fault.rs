//! How a fault is reported: one line with its type, address and
//! instruction pointer.

use alloc::format;
use alloc::string::String;
use sel4::Fault;

/// One line: the fault type, the address and the instruction pointer.
pub(super) fn describe(fault: &Fault) -> String {
    match *fault {
        Fault::VmFault { ip, addr, instruction_fault, fsr } => format!(
            "vm fault ({} {}) at address {addr:#x}, ip {ip:#x}",
            if instruction_fault {
                "instruction fetch"
            } else if fsr & 2 != 0 {
                "write"
            } else {
                "read"
            },
            if fsr & 1 != 0 { "denied by page rights" } else { "of an unmapped page" },
        ),
        Fault::CapFault { ip, addr, in_recv_phase, .. } => format!(
            "capability fault (slot {addr:#x} in {} phase), ip {ip:#x}",
            if in_recv_phase { "receive" } else { "send" }
        ),
        Fault::UnknownSyscall { ip, syscall, .. } => format!("unknown syscall {:#x}, ip {ip:#x}", syscall as i64),
        Fault::UserException { ip, number, code, .. } => {
            format!("user exception {} (vector {number}, code {code:#x}), ip {ip:#x}", exception_name(number))
        }
        Fault::Unknown { label } => format!("unknown fault label {label}"),
    }
}

fn exception_name(vector: u64) -> &'static str {
    match vector {
        0 => "divide error",
        3 => "breakpoint",
        6 => "invalid opcode (panic or abort)",
        13 => "general protection",
        14 => "page fault",
        _ => "cpu exception",
    }
}
