//! Server attributes that give something to each client, by the client's
//! instance name: `"<instance>=<value>"` elements (fs's open-file tables
//! and quotas, pci_config's grants). A client is named, never numbered by
//! its badge or its place in a list, so reordering the `from` ends of the
//! RPC connection or adding a client cannot give one client's share to
//! another. The compiler checks every name against the callers of the
//! interface and, where each client needs exactly one entry, that each has
//! one; it resolves integer shares into badge order for the glue
//! (`glue::attributes::<NAME>_BY_BADGE`, badge 1 first, as
//! `glue::<iface>::CLIENTS`).

use super::Checker;
use crate::ast::{Value, ValueKind};
use crate::diag::{err, Result};

/// One attribute given per client.
pub struct PerClient {
    /// The component type that declares it.
    pub component: &'static str,
    /// The attribute (a `string` array).
    pub attribute: &'static str,
    /// The provided interface whose callers are the clients.
    pub interface: &'static str,
    /// Whether every client has exactly one entry (a share), rather than
    /// any number (grants).
    pub each_once: bool,
    /// Whether the part after `=` is a positive integer (then resolved
    /// into badge order for the glue).
    pub integer: bool,
    /// Whether the part after `=` must be the client's own `match` (the
    /// kind of device bound to it at boot).
    pub matched: bool,
}

/// The attributes given per client (see the module documentation).
pub const PER_CLIENT: &[PerClient] = &[
    // components/fs: each client's open-file table and quota of held buffers.
    PerClient {
        component: "Fs",
        attribute: "client_files",
        interface: "fs",
        each_once: true,
        integer: true,
        matched: false,
    },
    PerClient {
        component: "Fs",
        attribute: "client_quota",
        interface: "fs",
        each_once: true,
        integer: true,
        matched: false,
    },
    // components/pci_config: each client may touch the function bound to
    // it at boot, "name=MATCH".
    PerClient {
        component: "PciConfig",
        attribute: "allow",
        interface: "pci",
        each_once: false,
        integer: false,
        matched: true,
    },
];

impl Checker {
    /// Checks every per-client attribute of every instance and records the
    /// integer shares in badge order (`ComponentType::per_client`).
    pub(super) fn check_per_client(&mut self) -> Result<()> {
        for index in 0..self.system.instances.len() {
            let ci = self.system.instances[index].component;
            let type_name = self.system.components[ci].decl.name.text.clone();
            for rule in PER_CLIENT.iter().filter(|r| r.component == type_name) {
                let Some(by_badge) = self.per_client(index, rule)? else { continue };
                let attr = rule.attribute.to_string();
                let component = &mut self.system.components[ci];
                match component.per_client.iter().find(|(a, _)| *a == attr) {
                    None => component.per_client.push((attr, by_badge)),
                    Some((_, first)) if *first == by_badge => {}
                    Some(_) => {
                        let pos = &self.system.instances[index].name.pos;
                        return err(pos, format!("instances of component '{}' give '{}' different shares per badge (instances of a type share one ELF)", rule.component, rule.attribute));
                    }
                }
            }
        }
        Ok(())
    }

    /// One instance's value of `rule`'s attribute, checked; for an integer
    /// share, the values in badge order (`None`: no value, or not shares).
    fn per_client(&self, instance: usize, rule: &PerClient) -> Result<Option<Vec<i64>>> {
        let inst = &self.system.instances[instance];
        let component = self.system.component_of(instance);
        let Some(decl) = component.decl.attributes.iter().find(|a| a.name.text == rule.attribute) else {
            return Ok(None);
        };
        let Some(value) = inst.config.attributes.get(rule.attribute).or(decl.default.as_ref()) else {
            return Ok(None);
        };
        let ValueKind::List(items) = &value.kind else { return Ok(None) };
        let label = format!("'{}.{}'", inst.name.text, rule.attribute);
        let ends: Vec<usize> =
            match component.interface(rule.interface).and_then(|i| self.system.connection_of(instance, i)) {
                Some((c, _)) => self.system.connections[c].from.iter().map(|e| e.instance).collect(),
                None => Vec::new(),
            };
        let clients: Vec<&str> = ends.iter().map(|&e| self.system.instances[e].name.text.as_str()).collect();
        let mut shares: Vec<Option<(i64, &Value)>> = vec![None; clients.len()];
        for item in items {
            let ValueKind::Str(text) = &item.kind else { continue };
            let shape = if rule.integer { "\"<client>=<number>\"" } else { "\"<client>=...\"" };
            let Some((name, rest)) = text.split_once('=') else {
                return err(&item.pos, format!("{label}: \"{text}\" is not {shape}"));
            };
            let Some(badge) = clients.iter().position(|c| *c == name.trim()) else {
                let known = if clients.is_empty() { "none".to_string() } else { clients.join(", ") };
                return err(
                    &item.pos,
                    format!(
                        "{label} names '{}', which does not call '{}.{}' (its clients: {known})",
                        name.trim(),
                        inst.name.text,
                        rule.interface
                    ),
                );
            };
            if rule.matched {
                let own = self.system.instances[ends[badge]].config.pci_match.as_ref().map(|(m, _)| m.as_str());
                if own != Some(rest.trim()) {
                    let why = match own {
                        Some(m) => format!("'{}' drives \"{m}\"", clients[badge]),
                        None => format!("'{}' names no match (set '{}.match')", clients[badge], clients[badge]),
                    };
                    return err(&item.pos, format!("{label}: \"{text}\" is not the device bound to its client: {why}"));
                }
            }
            if !rule.integer {
                continue;
            }
            let Some(n) = rest.trim().parse::<i64>().ok().filter(|&n| n > 0) else {
                return err(&item.pos, format!("{label}: \"{text}\" does not give a positive number after '='"));
            };
            if let Some((_, first)) = shares[badge] {
                return err(
                    &item.pos,
                    format!("{label} gives '{}' a second share (the first at {})", clients[badge], first.pos),
                );
            }
            shares[badge] = Some((n, item));
        }
        if !rule.each_once {
            return Ok(None);
        }
        if let Some(missing) = shares.iter().position(|s| s.is_none()) {
            return err(
                &value.pos,
                format!(
                    "{label} gives client '{}' no share (every caller of '{}.{}' needs one)",
                    clients[missing], inst.name.text, rule.interface
                ),
            );
        }
        Ok(rule.integer.then(|| shares.iter().flatten().map(|(n, _)| *n).collect()))
    }
}
