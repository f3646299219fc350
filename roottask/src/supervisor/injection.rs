//! Fault injection in test images: the console asks for a fault or a
//! hang in a component the assembly lets it (`crate::inject`).

use super::Supervisor;
use alloc::vec::Vec;
use component_runtime::{error, log};

impl Supervisor<'_, '_> {
    /// Obeys the injection commands that arrived on the console.
    pub(super) fn poll_console(&mut self) {
        use alloc::string::String;
        let mut commands: Vec<(crate::inject::Injection, String)> = Vec::new();
        self.console.poll(|line| {
            if let Some(c) = crate::inject::parse(line) {
                commands.push((c.what, c.name.into()));
            }
        });
        for (what, name) in commands {
            self.inject(what, &name);
        }
    }

    /// Makes the component `name` fault or hang, if the spec grants it, by
    /// rewriting its thread's instruction pointer (`crate::inject`).
    fn inject(&mut self, what: crate::inject::Injection, name: &str) {
        use crate::inject::{Injection, FAULT_IP};
        let kind = match what {
            Injection::Fault => "fault",
            Injection::Hang => "hang",
        };
        let Some(position) = self.system.instances.iter().position(|i| i.name == name) else {
            error!("cannot inject a {kind} into component {name}: no such component");
            return;
        };
        if !self.system.component(position).fault_injection {
            error!(
                "cannot inject a {kind} into component {name}: not granted by the assembly ({name}.fault_injection)"
            );
            return;
        }
        let (Some(tcb), false) = (self.system.instances[position].tcb, self.policy.kept_stopped(position)) else {
            error!("cannot inject a {kind} into component {name}: it is not running");
            return;
        };
        let target = match what {
            Injection::Fault => FAULT_IP,
            Injection::Hang => match self.system.hang_address(position) {
                Some(at) => at,
                None => {
                    error!("cannot inject a hang into component {name}: no iolite_hang before its entry point");
                    return;
                }
            },
        };
        if self.system.is_log_server(position) {
            // It will print nothing more (it faults or spins): the
            // supervisor's lines go to the console directly until it runs
            // again (the loader turns its ring back on when it rebuilds it).
            component_runtime::console::set_log_ring_enabled(false);
        }
        // Stopped while its registers change: a blocked thread's wait is
        // cancelled, a running one resumes at the new address.
        let _ = sel4::tcb_suspend(tcb);
        let mut regs = match sel4::tcb_read_registers(tcb, false, 0, sel4::UserContext::WORDS) {
            Ok(regs) => regs,
            Err(e) => {
                let _ = sel4::tcb_resume(tcb);
                error!("cannot inject a {kind} into component {name}: TCB_ReadRegisters: {e:?}");
                return;
            }
        };
        let was = regs.rip;
        regs.rip = target;
        match sel4::tcb_write_registers(tcb, true, 0, sel4::UserContext::WORDS, &regs) {
            Ok(()) => log!("injected a {kind} into component {name}: ip {was:#x} -> {target:#x}"),
            Err(e) => {
                let _ = sel4::tcb_resume(tcb);
                error!("cannot inject a {kind} into component {name}: TCB_WriteRegisters: {e:?}");
            }
        }
    }
}
