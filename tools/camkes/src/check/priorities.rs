//! The priority discipline the components rely on, checked as Hubris's
//! build checks that a task only calls tasks above it. The kernel has one
//! core and fixed priorities, so who runs first is decided by priority
//! alone:
//!
//! * **An RPC server is not below its callers.** The caller waits while
//!   the server works at the server's priority: a server below a caller
//!   lets every component between the two delay the caller (priority
//!   inversion; httpd waiting for fs while netstack runs). An equal
//!   priority is fine: seL4 switches from a caller straight to a server of
//!   its priority or above (its fastpath takes a Call only then), so
//!   assemblies that leave every priority at the default work.
//! * **The initialiser of a region runs above the ends that attach to
//!   it** (`<connection>.initialiser = "<instance>"`). An end that
//!   attaches at its start, without waiting for the region to be set up,
//!   finds it set up only if its initialiser ran first; at boot every
//!   component is ready at once, so that holds only if the initialiser is
//!   strictly above (netstack sets the link up before netdrv attaches,
//!   httpd the client region before netstack does).

use super::model::ConnectorKind;
use super::Checker;
use crate::diag::{err, Result};
use system_spec::DEFAULT_PRIORITY;

impl Checker {
    /// The thread priority of instance `i`.
    fn priority(&self, i: usize) -> u8 {
        self.system.instances[i].config.priority.unwrap_or(DEFAULT_PRIORITY)
    }

    /// Where instance `i`'s priority comes from, for a message.
    fn priority_origin(&self, i: usize) -> String {
        match &self.system.instances[i].config.priority_setting {
            Some(pos) => format!("set at {pos}"),
            None => "the default".to_string(),
        }
    }

    /// Checks both rules (see the module documentation).
    pub(super) fn check_priorities(&self) -> Result<()> {
        for conn in &self.system.connections {
            if matches!(conn.connector, ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType) {
                let server = conn.to[0].instance;
                for caller in &conn.from {
                    let (s, c) = (self.priority(server), self.priority(caller.instance));
                    if s >= c {
                        continue;
                    }
                    let name = |i: usize| &self.system.instances[i].name.text;
                    return err(
                        &caller.pos,
                        format!(
                            "RPC server '{}' (priority {s}, {}) is below its caller '{}' (priority {c}, {}) on '{}': the caller waits while the server works, so every component in between could delay it; give '{}' a priority of at least {c}",
                            name(server),
                            self.priority_origin(server),
                            name(caller.instance),
                            self.priority_origin(caller.instance),
                            conn.name.text,
                            name(server)
                        ),
                    );
                }
            }
            let Some((initialiser, pos)) = &conn.initialiser else { continue };
            let p = self.priority(*initialiser);
            for end in conn.from.iter().chain(&conn.to).filter(|e| e.instance != *initialiser) {
                let q = self.priority(end.instance);
                if p > q {
                    continue;
                }
                let name = |i: usize| &self.system.instances[i].name.text;
                return err(
                    pos,
                    format!(
                        "'{}' initialises '{}' (priority {p}, {}) but '{}' attaches to it at its start (priority {q}, {}): the initialiser must run first, so give '{}' a priority above {q}",
                        name(*initialiser),
                        conn.name.text,
                        self.priority_origin(*initialiser),
                        name(end.instance),
                        self.priority_origin(end.instance),
                        name(*initialiser)
                    ),
                );
            }
        }
        Ok(())
    }
}
