//! Requests from components: restart another one, lend it priority or
//! take the lend back, as far as the assembly grants (`may_restart`).

use super::Supervisor;
use component_runtime::error;
use component_runtime::restart::{self, RestartError};
use component_runtime::start::MAX_NAME_LEN;
use sel4::{MessageInfo, Word};

impl Supervisor<'_, '_> {
    /// The component a restart or priority request from `requester` names,
    /// if the assembly grants it (`may_restart`); every refusal is logged.
    fn granted_target(
        &mut self,
        requester: usize,
        info: MessageInfo,
        mrs: [Word; 4],
        what: &str,
    ) -> Result<usize, RestartError> {
        let system = &mut *self.system;
        let who = system.instances[requester].name.clone();
        let n = info.length() as usize;
        if n > restart::MAX_REQUEST_WORDS {
            error!("malformed {what} request from {who} ({n} words): refused");
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
                error!("malformed {what} request from {who}: refused");
                return Err(e);
            }
        };
        let Some(target) = system.instances.iter().position(|i| i.name == name) else {
            error!("{who} asked to {what} component {name}, which does not exist: refused");
            return Err(RestartError::NoSuchComponent);
        };
        if !system.may_restart(requester, target) {
            error!("{who} may not {what} component {name} (not granted by the assembly's {who}.may_restart): refused");
            return Err(RestartError::Refused);
        }
        Ok(target)
    }

    /// Lends `requester`'s priority to the component a request names, or
    /// ends the lend (`lend` false). Never above the requester's own
    /// assembly priority, so no one gains priority it does not have.
    pub(super) fn priority_request(
        &mut self,
        requester: usize,
        info: MessageInfo,
        mrs: [Word; 4],
        lend: bool,
    ) -> Result<(), RestartError> {
        let what = if lend { "lend priority to" } else { "return priority from" };
        let target = self.granted_target(requester, info, mrs, what)?;
        let lent = lend.then(|| self.system.component(requester).priority);
        self.policy.lend(target, lent);
        let own = self.system.component(target).priority;
        let alive = !self.policy.kept_stopped(target);
        if let (true, Some(tcb)) = (alive, self.system.instances[target].tcb) {
            let _ = sel4::tcb_set_priority(tcb, self.policy.priority(target, own));
        }
        Ok(())
    }

    /// Carries out a restart request of the instance at `requester` if the
    /// assembly grants it; logs the outcome either way.
    pub(super) fn restart_request(
        &mut self,
        requester: usize,
        info: MessageInfo,
        mrs: [Word; 4],
    ) -> Result<(), RestartError> {
        let target = self.granted_target(requester, info, mrs, "restart")?;
        let system = &mut *self.system;
        let who = system.instances[requester].name.clone();
        let name = system.instances[target].name.clone();
        if self.policy.held_down(target) {
            error!("{who} asked to restart component {name}, which is held down: refused");
            return Err(RestartError::Failed);
        }
        if self.policy.restart_scheduled(target) {
            return Ok(()); // already dead and waiting for its restart
        }
        // Stop it at once (it may spin); the rebuild follows the policy.
        if let Some(tcb) = system.instances[target].tcb {
            let _ = sel4::tcb_suspend(tcb);
        }
        system.instances[target].restart_requester = Some(who);
        self.died(target);
        self.schedule_restart(target);
        if self.policy.held_down(target) {
            return Err(RestartError::Failed);
        }
        Ok(())
    }
}
