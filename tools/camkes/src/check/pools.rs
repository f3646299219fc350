//! IO-Lite pools (Iolite's own; an ordinary connection setting to
//! upstream): an `seL4SharedData` connection with `<connection>.pool =
//! true` is a pool, and the compiler derives its id. See `crate::pools`
//! for what the glue and `system.txt` show of it.
//!
//! * Ids are 1, 2, ... in the order the pool connections are written, so
//!   they are unique in the system, the same at every end (every end is
//!   compiled from the one assembly) and the same on every compile of it.
//!   Ids from `iolite::FIRST_PRIVATE_POOL` (2^31) up are never derived: a
//!   component's private pools, shared with nobody, take those.
//! * A pool has one name end to end: every end's dataport is called like
//!   the connection, which is also what grant lists and the glue
//!   (`glue::<name>`, `glue::pools::<NAME>`) call it.
//! * Ids are not written by hand: a setting or an attribute declaration
//!   `<dataport>_id` for a pool's dataport is refused with the derived id.

use super::model::ComponentType;
use super::Checker;
use crate::ast::InterfaceKind;
use crate::diag::{err, Result};
use std::collections::HashMap;

/// The name of the glue's table of every pool (`glue::pools::ALL`), which
/// no pool constant may take.
pub const TABLE: &str = "ALL";

impl ComponentType {
    /// What the glue's `pools` module holds for this type: per dataport
    /// (its index), `Some(id)` for an end of a pool, `None` for a `maybe`
    /// dataport no instance connects (a pool elsewhere, perhaps; the
    /// component asks at compile time). In declaration order.
    pub fn glue_pools(&self) -> Vec<(usize, Option<u32>)> {
        self.decl
            .interfaces
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == InterfaceKind::Dataport)
            .filter_map(|(i, d)| match self.pool_ids[i] {
                Some(id) => Some((i, Some(id))),
                None if d.maybe && self.connectors[i].is_none() => Some((i, None)),
                None => None,
            })
            .collect()
    }
}

impl Checker {
    /// Gives every pool connection its id, once every connection setting
    /// is read; checks that a pool is no channel, has one writer and one
    /// name end to end.
    pub(super) fn derive_pool_ids(&mut self) -> Result<()> {
        let mut next: u32 = 1;
        for ci in 0..self.system.connections.len() {
            let conn = &self.system.connections[ci];
            let Some(at) = conn.pool_setting.clone() else { continue };
            let name = &conn.name.text;
            if conn.channel {
                return err(
                    &at,
                    format!("'{name}' is a channel ('{name}.channel = true'), so it cannot be an IO-Lite pool too: a channel carries descriptors, a pool the buffers they name"),
                );
            }
            if conn.shared_writers.is_some() {
                return err(
                    &at,
                    format!("IO-Lite pool '{name}' has one writer, its producer (the 'from' end): it cannot have '{name}.shared_writers'"),
                );
            }
            for end in conn.from.iter().chain(&conn.to) {
                let dataport = &self.system.component_of(end.instance).decl.interfaces[end.interface].name.text;
                if dataport != name {
                    return err(
                        &end.pos,
                        format!(
                            "'{}.{dataport}' is an end of IO-Lite pool '{name}', so it must be called '{name}' too: a pool has one name, in the assembly, in grant lists and in every component's glue (glue::{name}, glue::pools::{})",
                            self.system.instances[end.instance].name.text,
                            name.to_uppercase()
                        ),
                    );
                }
            }
            if next >= 1 << 31 {
                return err(&at, "more IO-Lite pools than ids below 2^31 (the private pools' range)");
            }
            self.system.connections[ci].pool = Some(next);
            next += 1;
        }
        Ok(())
    }

    /// Why setting `attr` of `instance` would be a hand-written pool id
    /// (`<dataport>_id` for a dataport that is an end of a pool), if it is
    /// one.
    pub(super) fn hand_written_pool_id(&self, instance: usize, attr: &str) -> Option<String> {
        let dataport = attr.strip_suffix("_id")?;
        let component = self.system.component_of(instance);
        let i = component.interface(dataport)?;
        let (c, _) = self.system.connection_of(instance, i)?;
        let id = self.system.connections[c].pool?;
        Some(derived(dataport, id))
    }

    /// The pool id of each dataport of each component type, which every
    /// instance of the type must agree on (one glue per type); refuses a
    /// declared attribute that would hold a pool's id by hand, and two
    /// glue constants of one name.
    pub(super) fn resolve_pool_ids(&mut self) -> Result<()> {
        let mut first: HashMap<(usize, usize), (usize, Option<u32>)> = HashMap::new();
        for index in 0..self.system.instances.len() {
            let ci = self.system.instances[index].component;
            let component = &self.system.components[ci];
            if component.is_hardware() {
                continue;
            }
            for (i, decl) in component.decl.interfaces.iter().enumerate() {
                if decl.kind != InterfaceKind::Dataport {
                    continue;
                }
                let conn = self.system.connection_of(index, i).map(|(c, _)| &self.system.connections[c]);
                let pool = conn.and_then(|c| c.pool);
                match first.get(&(ci, i)) {
                    None => {
                        first.insert((ci, i), (index, pool));
                    }
                    Some(&(other, other_pool)) if other_pool != pool => {
                        return err(
                            &self.system.instances[index].name.pos,
                            format!(
                                "instances '{}' and '{}' of component '{}' differ in whether dataport '{}' is an IO-Lite pool (the glue, with its pool ids, is one per type)",
                                self.system.instances[other].name.text,
                                self.system.instances[index].name.text,
                                component.decl.name.text,
                                decl.name.text
                            ),
                        );
                    }
                    Some(_) => {}
                }
            }
        }
        for ((ci, i), (_, pool)) in first {
            self.system.components[ci].pool_ids[i] = pool;
        }
        for component in self.system.components.iter().filter(|c| c.instantiated && !c.is_hardware()) {
            for decl in &component.decl.attributes {
                let Some(dataport) = decl.name.text.strip_suffix("_id") else { continue };
                let Some(id) = component.interface(dataport).and_then(|i| component.pool_ids[i]) else { continue };
                return err(
                    &decl.name.pos,
                    format!(
                        "attribute '{}' of component '{}': {}; remove this attribute",
                        decl.name.text,
                        component.decl.name.text,
                        derived(dataport, id)
                    ),
                );
            }
            let mut names: HashMap<String, &str> = HashMap::new();
            for (i, _) in component.glue_pools() {
                let decl = &component.decl.interfaces[i];
                let upper = decl.name.text.to_uppercase();
                if upper == TABLE {
                    return err(
                        &decl.name.pos,
                        format!("dataport '{}' of component '{}' cannot be a pool: its glue constant would be glue::pools::{TABLE}, the table of every pool", decl.name.text, component.decl.name.text),
                    );
                }
                if let Some(other) = names.insert(upper.clone(), &decl.name.text) {
                    return err(
                        &decl.name.pos,
                        format!(
                            "dataports '{other}' and '{}' of component '{}' differ only in case: both pools would be glue::pools::{upper}",
                            decl.name.text, component.decl.name.text
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

/// The message for a hand-written id of pool `name`.
fn derived(name: &str, id: u32) -> String {
    format!(
        "IO-Lite pool ids are derived from the assembly, not written by hand: '{name}' is pool {id} (glue::pools::{})",
        name.to_uppercase()
    )
}
