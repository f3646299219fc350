//! Who is related to whom in the spec, as the supervisor needs it: the
//! peers that hear of a component's death, the RPC clients of a server,
//! and who may restart whom.

use super::globals::Loaded;
use super::System;
use alloc::vec::Vec;

impl System {
    /// The instances that share a dataport with the one at `position` and
    /// subscribe to system events: who must hear of its death.
    pub fn event_peers(&self, position: usize) -> Vec<usize> {
        let me = self.component(position);
        (0..self.instances.len())
            .filter(|&p| p != position)
            .filter(|&p| {
                let other = self.component(p);
                other.events
                    && other.mappings.iter().any(|m| {
                        matches!(self.objects[m.object.0 as usize], Loaded::Frames(_))
                            && me.mappings.iter().any(|n| n.object == m.object)
                    })
            })
            .collect()
    }

    /// The instances that call an endpoint the one at `position` serves
    /// (they hold it with send rights, it with receive rights): the RPC
    /// clients of that server.
    pub fn rpc_callers(&self, position: usize) -> Vec<usize> {
        let me = self.component(position);
        let served: Vec<_> = me
            .caps
            .iter()
            .filter(|c| c.rights.read && matches!(self.objects[c.object.0 as usize], Loaded::Endpoint(_)))
            .map(|c| c.object)
            .collect();
        (0..self.instances.len())
            .filter(|&p| p != position)
            .filter(|&p| self.component(p).caps.iter().any(|c| c.rights.write && served.contains(&c.object)))
            .collect()
    }

    /// Whether the assembly lets the instance at `requester` ask for a
    /// restart of the one at `target` (`may_restart`, in the spec).
    pub fn may_restart(&self, requester: usize, target: usize) -> bool {
        let (r, t) = (self.instances[requester].index, self.instances[target].index);
        self.spec.components[r].may_restart.contains(&(t as u32))
    }
}
