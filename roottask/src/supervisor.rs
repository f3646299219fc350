//! The supervisor: the root task after loading, waiting on the fault
//! endpoint every component's faults go to.
//!
//! It reports each fault with the component's name, the fault type, the
//! address and the instruction pointer, then restarts the component if the
//! assembly marks it `restartable` (a clean re-creation from the spec), or
//! stops it for good. Other components are not affected either way.
//!
//! It also restarts a component when another one asks
//! ([`component_runtime::restart`]) and the assembly grants it
//! (`may_restart`, checked against the spec): e.g. httpd has a cgi that
//! does not answer in time restarted. The target may be running (a CGI
//! spinning); the restart suspends its thread before tearing it down.
//! Undeclared requests are refused and logged.

use crate::loader::System;
use component_runtime::restart::{self, RestartError, SUPERVISOR_RESTART_LABEL};
use component_runtime::start::{MAX_NAME_LEN, SUPERVISOR_EXIT_LABEL};
use component_runtime::{error, log};
use sel4::{Fault, MessageInfo, Word};

/// Serves faults forever.
pub fn run(system: &mut System) -> ! {
    component_runtime::set_component_name("supervisor");
    loop {
        let (info, badge, mrs) = sel4::recv(system.fault_endpoint);
        let Some(position) = system.instances.iter().position(|i| i.index as u64 + 1 == badge) else {
            error!("message with unknown badge {badge:#x} on the fault endpoint (label {})", info.label());
            continue;
        };
        let name = system.instances[position].name.clone();
        if info.label() == SUPERVISOR_EXIT_LABEL {
            match system.stop(position) {
                Ok(()) => log!("component {name} exited (status {})", mrs[0]),
                Err(e) => error!("could not stop component {name} after its exit: {e}"),
            }
            continue;
        }
        if info.label() == SUPERVISOR_RESTART_LABEL {
            let result = restart_request(system, position, info, mrs);
            // The requester waits in its Call; label 0 is success.
            let label = result.err().map_or(0, |e| e as Word);
            sel4::reply(MessageInfo::new(label, 0, 0, 0), [0; 4]);
            continue;
        }
        let fault = Fault::from_received(info, &mrs);
        log!("FAULT in component {name}: {}", describe(&fault));
        if system.instances[position].restartable {
            match system.restart(position) {
                Ok(()) => log!("restarted component {name} (restart {})", system.instances[position].restarts),
                Err(e) => error!("could not restart component {name}: {e}"),
            }
        } else {
            match system.stop(position) {
                Ok(()) => log!("component {name} stopped (not restartable)"),
                Err(e) => error!("could not stop component {name}: {e}"),
            }
        }
    }
}

/// Carries out a restart request of the instance at `requester` if the
/// assembly grants it; logs the outcome either way.
fn restart_request(
    system: &mut System,
    requester: usize,
    info: MessageInfo,
    mrs: [Word; 4],
) -> Result<(), RestartError> {
    let who = system.instances[requester].name.clone();
    let n = info.length() as usize;
    if n > restart::MAX_REQUEST_WORDS {
        error!("malformed restart request from {who} ({n} words): refused");
        return Err(RestartError::Malformed);
    }
    let mut words = [0; restart::MAX_REQUEST_WORDS];
    for (i, w) in words.iter_mut().enumerate().take(n) {
        *w = if i < 4 { mrs[i] } else { sel4::get_mr(i) };
    }
    let mut buf = [0u8; MAX_NAME_LEN];
    let name = match restart::decode_request(&words[..n], &mut buf) {
        Ok(name) => name,
        Err(e) => {
            error!("malformed restart request from {who}: refused");
            return Err(e);
        }
    };
    let Some(target) = system.instances.iter().position(|i| i.name == name) else {
        error!("{who} asked to restart component {name}, which does not exist: refused");
        return Err(RestartError::NoSuchComponent);
    };
    if !system.may_restart(requester, target) {
        error!("{who} may not restart component {name} (not granted by the assembly's {who}.may_restart): refused");
        return Err(RestartError::Refused);
    }
    match system.restart(target) {
        Ok(()) => {
            log!("restarted component {name} at the request of {who} (restart {})", system.instances[target].restarts);
            Ok(())
        }
        Err(e) => {
            error!("could not restart component {name} at the request of {who}: {e}");
            Err(RestartError::Failed)
        }
    }
}

/// One line: the fault type, the address and the instruction pointer.
fn describe(fault: &Fault) -> alloc::string::String {
    use alloc::format;
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
