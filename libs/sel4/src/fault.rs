//! Fault messages, as a fault handler receives them on the faulting thread's
//! fault endpoint: the tag's label is the fault type, the MRs hold the
//! details at the indices below (5.0, x86_64).

use crate::types::{MessageInfo, Word};

/// Fault types (`seL4_FaultType`, the label of a fault message).
pub mod label {
    use crate::types::Word;
    /// `seL4_Fault_NullFault`: no fault (never delivered as a message).
    pub const NULL_FAULT: Word = 0;
    /// `seL4_Fault_CapFault`: a capability lookup failed during a syscall.
    pub const CAP_FAULT: Word = 1;
    /// `seL4_Fault_UnknownSyscall`: an unknown syscall number.
    pub const UNKNOWN_SYSCALL: Word = 2;
    /// `seL4_Fault_UserException`: a CPU exception (e.g. #GP, #UD, #DE).
    pub const USER_EXCEPTION: Word = 3;
    /// `seL4_Fault_DebugException`: only with CONFIG_HARDWARE_DEBUG_API,
    /// which this kernel does not have.
    pub const DEBUG_EXCEPTION: Word = 4;
    /// `seL4_Fault_VMFault`: a page fault.
    pub const VM_FAULT: Word = 5;
}

/// MR indices of a VM fault (`seL4_VMFault_Msg`).
pub mod vm_fault {
    /// Instruction pointer of the faulting instruction.
    pub const IP: usize = 0;
    /// Faulting virtual address (CR2).
    pub const ADDR: usize = 1;
    /// 1 for an instruction fetch (`seL4_InstructionFault`), 0 for data.
    pub const PREFETCH_FAULT: usize = 2;
    /// The x86 page-fault error code (present/write/user/... bits).
    pub const FSR: usize = 3;
    /// Message length.
    pub const LENGTH: usize = 4;
}

/// MR indices of a cap fault (`seL4_CapFault_Msg`).
pub mod cap_fault {
    /// Instruction pointer of the syscall.
    pub const IP: usize = 0;
    /// The CPtr that failed to resolve.
    pub const ADDR: usize = 1;
    /// 1 if the failure happened in the receive phase.
    pub const IN_RECV_PHASE: usize = 2;
    /// `seL4_LookupFailureType` (the kernel's lookup fault type + 1).
    pub const LOOKUP_FAILURE_TYPE: usize = 3;
    /// Bits left to resolve (missing capability, depth/guard mismatch).
    pub const BITS_LEFT: usize = 4;
    /// Bits found (depth mismatch).
    pub const DEPTH_MISMATCH_BITS_FOUND: usize = 5;
    /// Guard found (guard mismatch).
    pub const GUARD_MISMATCH_GUARD_FOUND: usize = 5;
    /// Guard size found (guard mismatch).
    pub const GUARD_MISMATCH_BITS_FOUND: usize = 6;
}

/// MR indices of an unknown-syscall fault (`seL4_UnknownSyscall_Msg`); a
/// reply with the same layout (label 0) writes the registers back.
#[allow(missing_docs)]
pub mod unknown_syscall {
    pub const RAX: usize = 0;
    pub const RBX: usize = 1;
    pub const RCX: usize = 2;
    pub const RDX: usize = 3;
    pub const RSI: usize = 4;
    pub const RDI: usize = 5;
    pub const RBP: usize = 6;
    pub const R8: usize = 7;
    pub const R9: usize = 8;
    pub const R10: usize = 9;
    pub const R11: usize = 10;
    pub const R12: usize = 11;
    pub const R13: usize = 12;
    pub const R14: usize = 13;
    pub const R15: usize = 14;
    pub const FAULT_IP: usize = 15;
    pub const SP: usize = 16;
    pub const FLAGS: usize = 17;
    /// The syscall number that was not recognised.
    pub const SYSCALL: usize = 18;
    /// Message length.
    pub const LENGTH: usize = 19;
}

/// MR indices of a user exception (`seL4_UserException_Msg`); a reply
/// (label 0) with the first three words sets IP, SP and FLAGS.
pub mod user_exception {
    /// Instruction pointer.
    pub const FAULT_IP: usize = 0;
    /// Stack pointer.
    pub const SP: usize = 1;
    /// RFLAGS.
    pub const FLAGS: usize = 2;
    /// CPU exception vector.
    pub const NUMBER: usize = 3;
    /// CPU error code.
    pub const CODE: usize = 4;
    /// Message length.
    pub const LENGTH: usize = 5;
}

/// A decoded fault message.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A page fault.
    VmFault {
        /// Faulting instruction.
        ip: Word,
        /// Faulting address.
        addr: Word,
        /// Whether it was an instruction fetch.
        instruction_fault: bool,
        /// x86 page-fault error code.
        fsr: Word,
    },
    /// A capability lookup failure in a syscall.
    CapFault {
        /// Faulting instruction.
        ip: Word,
        /// The CPtr that failed.
        addr: Word,
        /// Whether it failed in the receive phase.
        in_recv_phase: bool,
        /// Raw `seL4_LookupFailureType`.
        lookup_failure_type: Word,
    },
    /// An unknown syscall number.
    UnknownSyscall {
        /// Faulting instruction.
        ip: Word,
        /// Stack pointer.
        sp: Word,
        /// The syscall number (from `rdx`).
        syscall: Word,
    },
    /// A CPU exception.
    UserException {
        /// Faulting instruction.
        ip: Word,
        /// Stack pointer.
        sp: Word,
        /// RFLAGS.
        flags: Word,
        /// Exception vector.
        number: Word,
        /// Error code.
        code: Word,
    },
    /// A label this kernel does not send as a fault (or a non-fault message).
    Unknown {
        /// The label received.
        label: Word,
    },
}

impl Fault {
    /// Decodes a fault message; `mr(i)` must return message register `i`.
    pub fn decode(info: MessageInfo, mr: impl Fn(usize) -> Word) -> Fault {
        match info.label() {
            label::VM_FAULT => Fault::VmFault {
                ip: mr(vm_fault::IP),
                addr: mr(vm_fault::ADDR),
                instruction_fault: mr(vm_fault::PREFETCH_FAULT) != 0,
                fsr: mr(vm_fault::FSR),
            },
            label::CAP_FAULT => Fault::CapFault {
                ip: mr(cap_fault::IP),
                addr: mr(cap_fault::ADDR),
                in_recv_phase: mr(cap_fault::IN_RECV_PHASE) != 0,
                lookup_failure_type: mr(cap_fault::LOOKUP_FAILURE_TYPE),
            },
            label::UNKNOWN_SYSCALL => Fault::UnknownSyscall {
                ip: mr(unknown_syscall::FAULT_IP),
                sp: mr(unknown_syscall::SP),
                syscall: mr(unknown_syscall::SYSCALL),
            },
            label::USER_EXCEPTION => Fault::UserException {
                ip: mr(user_exception::FAULT_IP),
                sp: mr(user_exception::SP),
                flags: mr(user_exception::FLAGS),
                number: mr(user_exception::NUMBER),
                code: mr(user_exception::CODE),
            },
            l => Fault::Unknown { label: l },
        }
    }

    /// Decodes a message just received with [`recv`](crate::recv): MR0-3
    /// from `mrs`, the rest from the IPC buffer (needed for cap faults,
    /// user exceptions and unknown syscalls; panics if no buffer was set).
    pub fn from_received(info: MessageInfo, mrs: &[Word; 4]) -> Fault {
        Fault::decode(info, |i| if i < 4 { mrs[i] } else { crate::get_mr(i) })
    }

    /// The faulting instruction pointer, if the fault has one.
    pub fn ip(&self) -> Option<Word> {
        match *self {
            Fault::VmFault { ip, .. }
            | Fault::CapFault { ip, .. }
            | Fault::UnknownSyscall { ip, .. }
            | Fault::UserException { ip, .. } => Some(ip),
            Fault::Unknown { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_vm_fault_from_registers() {
        let info = MessageInfo::new(label::VM_FAULT, 0, 0, vm_fault::LENGTH as Word);
        let mrs = [0x40_1000, 0xdead_b000, 0, 6];
        let f = Fault::decode(info, |i| mrs[i]);
        assert_eq!(f, Fault::VmFault { ip: 0x40_1000, addr: 0xdead_b000, instruction_fault: false, fsr: 6 });
        assert_eq!(f.ip(), Some(0x40_1000));
    }

    #[test]
    fn decode_other_faults() {
        let words: Vec<Word> = (0..20).map(|i| 1000 + i).collect();
        let mr = |i: usize| words[i];
        assert_eq!(
            Fault::decode(MessageInfo::new(label::USER_EXCEPTION, 0, 0, 5), mr),
            Fault::UserException { ip: 1000, sp: 1001, flags: 1002, number: 1003, code: 1004 }
        );
        assert_eq!(
            Fault::decode(MessageInfo::new(label::UNKNOWN_SYSCALL, 0, 0, 19), mr),
            Fault::UnknownSyscall { ip: 1015, sp: 1016, syscall: 1018 }
        );
        assert_eq!(
            Fault::decode(MessageInfo::new(label::CAP_FAULT, 0, 0, 5), mr),
            Fault::CapFault { ip: 1000, addr: 1001, in_recv_phase: true, lookup_failure_type: 1003 }
        );
        assert_eq!(Fault::decode(MessageInfo::new(77, 0, 0, 0), mr), Fault::Unknown { label: 77 });
    }
}
