//! Who is at the other end of an interface, from the assembly itself, so
//! a component names its peers (in logs, restart requests, the system
//! events page) without a setting that restates the wiring and could name
//! the wrong instance.
//!
//! Per interface: `PEERS`, the software instances on the other side of
//! its connection (the `to` ends for a `from` end, the `from` ends for a
//! `to` end), in written order, each once; `PEER_INDICES`, their indices
//! in the system spec, which are also their records in the system events
//! page (`component_runtime::events`, one record per component in spec
//! order); and, when there is exactly one, `PEER` and `PEER_INDEX`. An
//! unconnected `maybe` interface has empty lists. The glue is per type, so
//! when instances of the type have different peers there, or a peer is a
//! hardware instance (no component, no record), the constants are left
//! out with a comment saying why.

use crate::ast::EndSide;
use crate::check::System;
use std::fmt::Write;

/// The peers of `instance.interface` as (name, spec index), or `None` if
/// one of them is a hardware instance.
fn peers_of(
    system: &System,
    spec_index: &[Option<usize>],
    instance: usize,
    interface: usize,
) -> Option<Vec<(String, usize)>> {
    let Some((c, side)) = system.connection_of(instance, interface) else { return Some(Vec::new()) };
    let conn = &system.connections[c];
    let others = match side {
        EndSide::From => &conn.to,
        EndSide::To => &conn.from,
    };
    let mut peers: Vec<(String, usize)> = Vec::new();
    for end in others {
        let index = spec_index[end.instance]?;
        if !peers.iter().any(|(_, i)| *i == index) {
            peers.push((system.instances[end.instance].name.text.clone(), index));
        }
    }
    Some(peers)
}

/// Per instance: its index in the spec (software instances only, in
/// composition order, as `spec::build` numbers them).
pub(super) fn spec_indices(system: &System) -> Vec<Option<usize>> {
    let mut next = 0;
    system
        .instances
        .iter()
        .map(|inst| {
            if system.components[inst.component].is_hardware() {
                return None;
            }
            next += 1;
            Some(next - 1)
        })
        .collect()
}

/// The peer constants of interface `i` for the instances `instances` of
/// its type (see the module documentation).
pub(super) fn peers(out: &mut String, system: &System, spec_index: &[Option<usize>], instances: &[usize], i: usize) {
    let mut lists = instances.iter().map(|&instance| peers_of(system, spec_index, instance, i));
    let Some(first) = lists.next() else { return };
    let Some(first) = first else {
        out.push_str("        // No `PEERS`: a hardware instance is at the other end (it has no events record).\n");
        return;
    };
    if !lists.all(|l| l.as_ref() == Some(&first)) {
        out.push_str(
            "        // No `PEERS`: instances of this type have different peers here (the glue is per type).\n",
        );
        return;
    }
    let names: Vec<String> = first.iter().map(|(name, _)| format!("{name:?}")).collect();
    let indices: Vec<String> = first.iter().map(|(_, index)| index.to_string()).collect();
    let _ = writeln!(
        out,
        "        /// The instances at the other side of the connection, in written order.\n        pub const PEERS: &[&str] = &[{}];\n        /// Their spec indices, which are their records in the system events page.\n        pub const PEER_INDICES: &[usize] = &[{}];",
        names.join(", "),
        indices.join(", ")
    );
    if let [(name, index)] = first.as_slice() {
        let _ = writeln!(
            out,
            "        /// The one instance at the other side.\n        pub const PEER: &str = {name:?};\n        /// Its spec index (its record in the system events page).\n        pub const PEER_INDEX: usize = {index};"
        );
    }
}
