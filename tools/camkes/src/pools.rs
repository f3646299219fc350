//! IO-Lite pools as the assembly declares them (Iolite's own):
//! `connection seL4SharedData file_pool(from fs.file_pool, to
//! httpd.file_pool); file_pool.pool = true;` makes the region an IO-Lite
//! pool. The checker derives its id (`check::ConnectionInfo::pool`: 1, 2,
//! ... in the order the pools are written) and insists on one name end to
//! end; the glue gives every component the ids of its pools
//! (`glue::pools::FILE_POOL`, and `glue::pools::ALL` by name for the grant
//! lists), so no component, library or assembly writes an id by hand.
//!
//! [`table`] lists every pool with its id, each end's rights and the grant
//! lists that name it, for `system.txt` and the reviewed
//! `tests/golden/iolite-pools.txt`.

use crate::ast::ValueKind;
use crate::check::{ConnectorKind, System};
use std::fmt::Write;
use system_spec::Access;

/// The instances that map pool `name` read-write (its producer), in the
/// order of its ends.
pub fn writers(system: &System, name: &str) -> Vec<String> {
    let Some(conn) = system.connections.iter().find(|c| c.name.text == name) else { return Vec::new() };
    let mut out: Vec<String> = Vec::new();
    for end in conn.from.iter().chain(&conn.to) {
        let inst = &system.instances[end.instance];
        if inst.config.access.get(&end.interface) == Some(&Access::ReadWrite) && !out.contains(&inst.name.text) {
            out.push(inst.name.text.clone());
        }
    }
    out
}

/// Every pool of the system, in id order, one line per end (the pool, its
/// id, the end, its mapping), then every grant list with the ids of the
/// pools it names. Made for review: a changed id or right is a changed
/// line.
pub fn table(system: &System) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {:<16} {:>3}  {:<28} map", "pool", "id", "end (component.dataport)");
    for conn in system.connections.iter().filter(|c| c.connector == ConnectorKind::SharedData) {
        let Some(id) = conn.pool else { continue };
        for end in conn.from.iter().chain(&conn.to) {
            let inst = &system.instances[end.instance];
            let dataport = &system.component_of(end.instance).decl.interfaces[end.interface].name.text;
            let rights = match inst.config.access.get(&end.interface) {
                Some(Access::ReadWrite) => "RW",
                _ => "R",
            };
            let end = format!("{}.{dataport}", inst.name.text);
            let _ = writeln!(out, "{:<18} {id:>3}  {end:<28} {rights}", conn.name.text);
        }
    }
    let _ = writeln!(out, "# grant lists: channel end <- its sender: the pools (ids) the sender may reference");
    for (index, inst) in system.instances.iter().enumerate() {
        let component = system.component_of(index);
        for decl in &component.decl.attributes {
            let Some(channel) = decl.name.text.strip_suffix("_refs") else { continue };
            let Some(ci) = component.interface(channel) else { continue };
            let Some(value) = inst.config.attributes.get(&decl.name.text).or(decl.default.as_ref()) else { continue };
            let ValueKind::List(items) = &value.kind else { continue };
            // A `maybe` channel the assembly leaves unconnected has no
            // sender and grants nothing: not listed.
            let Some(sender) = crate::refs::shared_with(system, index, ci)
                .and_then(|(_, others)| others.first().map(|&s| system.instances[s].name.text.clone()))
            else {
                continue;
            };
            let pools: Vec<String> = items
                .iter()
                .filter_map(|item| match &item.kind {
                    ValueKind::Str(name) => {
                        let id = component
                            .interface(name)
                            .and_then(|i| system.connection_of(index, i))
                            .and_then(|(c, _)| system.connections[c].pool);
                        Some(format!("{name} ({})", id.map_or("?".to_string(), |id| id.to_string())))
                    }
                    _ => None,
                })
                .collect();
            let _ = writeln!(out, "{}.{channel} <- {sender}: {}", inst.name.text, pools.join(", "));
        }
    }
    out
}
