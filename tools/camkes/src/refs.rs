//! Grant lists of IO-Lite channel ends (Iolite's own; ordinary attributes
//! to upstream).
//!
//! A component type that declares `attribute string <dp>_refs[];` for one of
//! its dataports `<dp>` says that `<dp>` is an IO-Lite channel end, and the
//! instance's value lists the pools (its own dataports) whose slices the
//! sender at the other end may reference. The receiver rejects every other
//! slice (`iolite::Domain::set_peer_pools`); the glue carries the list as
//! `glue::attributes::<DP>_REFS`.
//!
//! The compiler checks each list against the connections: `<dp>` must be
//! shared (seL4SharedData) with exactly one other instance, the sender, and
//! every listed pool must be a dataport of this instance that the sender
//! maps too (it is an end of the same seL4SharedData connection), and that
//! connection is an IO-Lite pool (`<connection>.pool = true`, see
//! `crate::pools`). So a list can grant no reference to a pool the sender
//! cannot read: the sender may reference pools it maps, and nothing else.
//! The default list of a `maybe` channel an assembly leaves unconnected is
//! not checked (there is no sender); a list the assembly sets is,
//! connected or not.

use std::collections::HashSet;

use crate::ast::{InterfaceKind, Value, ValueKind};
use crate::check::{ConnectorKind, System};
use crate::diag::{err, Result};

/// The instances (other than `instance`) at the ends of the connection
/// that connects `instance.interface`, if it is an seL4SharedData one.
pub(crate) fn shared_with(system: &System, instance: usize, interface: usize) -> Option<(String, Vec<usize>)> {
    let (c, _) = system.connection_of(instance, interface)?;
    let conn = &system.connections[c];
    if conn.connector != ConnectorKind::SharedData {
        return None;
    }
    let mut others: Vec<usize> =
        conn.from.iter().chain(&conn.to).map(|e| e.instance).filter(|&i| i != instance).collect();
    others.sort_unstable();
    others.dedup();
    Some((conn.name.text.clone(), others))
}

/// Checks every `<dp>_refs` grant list of every instance (see the module
/// documentation).
pub fn check(system: &System) -> Result<()> {
    for (index, inst) in system.instances.iter().enumerate() {
        let component = system.component_of(index);
        if component.is_hardware() {
            continue;
        }
        for decl in &component.decl.attributes {
            let Some(dp) = decl.name.text.strip_suffix("_refs") else { continue };
            let Some(channel) = component.interface(dp) else { continue };
            if component.decl.interfaces[channel].kind != InterfaceKind::Dataport {
                continue;
            }
            let configured = inst.config.attributes.get(&decl.name.text);
            if configured.is_none()
                && component.decl.interfaces[channel].maybe
                && system.connection_of(index, channel).is_none()
            {
                // An optional channel this assembly leaves out: its
                // default list grants nothing to nobody.
                continue;
            }
            let Some(value) = configured.or(decl.default.as_ref()) else {
                continue;
            };
            let label = format!("'{}.{}'", inst.name.text, decl.name.text);
            if decl.ty.text != "string" || !decl.array {
                return err(
                    &decl.name.pos,
                    format!("{label}: a grant list is declared 'attribute string {}[]'", decl.name.text),
                );
            }
            let Some((conn, others)) = shared_with(system, index, channel) else {
                return err(
                    &value.pos,
                    format!("{label}: '{dp}' is not connected by seL4SharedData, so it is no channel"),
                );
            };
            let [sender] = others[..] else {
                return err(
                    &value.pos,
                    format!(
                        "{label}: channel '{conn}' must join '{}' and exactly one other instance (the sender)",
                        inst.name.text
                    ),
                );
            };
            let sender_name = &system.instances[sender].name.text;
            let ValueKind::List(items) = &value.kind else {
                return err(&value.pos, format!("{label}: expected a list of dataport names"));
            };
            let mut seen = HashSet::new();
            for item in items {
                let ValueKind::Str(pool) = &item.kind else {
                    return err(&item.pos, format!("{label}: expected a dataport name (a string)"));
                };
                check_pool(system, index, channel, sender, item, pool, &label, &conn, sender_name)?;
                if !seen.insert(pool.clone()) {
                    return err(&item.pos, format!("{label} names '{pool}' twice"));
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn check_pool(
    system: &System,
    instance: usize,
    channel: usize,
    sender: usize,
    item: &Value,
    pool: &str,
    label: &str,
    conn: &str,
    sender_name: &str,
) -> Result<()> {
    let component = system.component_of(instance);
    let Some(i) = component.interface(pool).filter(|&i| component.decl.interfaces[i].kind == InterfaceKind::Dataport)
    else {
        return err(
            &item.pos,
            format!("{label} names '{pool}', which is not a dataport of '{}'", component.decl.name.text),
        );
    };
    if i == channel {
        return err(&item.pos, format!("{label} names the channel '{pool}' itself"));
    }
    match shared_with(system, instance, i) {
        Some((pool_conn, others)) if others.contains(&sender) => {
            let (c, _) = system.connection_of(instance, i).expect("shared, so connected");
            if system.connections[c].pool.is_none() {
                return err(
                    &item.pos,
                    format!(
                        "{label} names '{pool}', which is not an IO-Lite pool: a grant list names pools, and '{pool_conn}' is one only with '{pool_conn}.pool = true'"
                    ),
                );
            }
            Ok(())
        }
        Some((pool_conn, _)) => err(
            &item.pos,
            format!(
                "{label} names '{pool}', which '{sender_name}' (the sender on '{conn}') does not map (it is no end of '{pool_conn}'): a sender may reference only pools it maps"
            ),
        ),
        None => err(&item.pos, format!("{label} names '{pool}', which no seL4SharedData connection shares")),
    }
}
