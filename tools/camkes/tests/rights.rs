//! The rights of every end of the whole system (`camkes/iolite.camkes`),
//! derived from the compiled spec: the least-privilege rules asserted, and
//! the complete table compared with the reviewed one committed in
//! `tests/golden/iolite-rights.txt`, and the IO-Lite pools with their
//! derived ids with `tests/golden/iolite-pools.txt`. After an intended change to the
//! assembly: `UPDATE_GOLDEN=1 cargo test -p camkes --test rights`, then
//! review the diff of the table like code.

use camkes::check::{ConnectorKind, System};
use camkes::imports::DiskFiles;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use system_spec::{Access, ObjectKind, SystemSpec};

const ASSEMBLY: &str = "../../camkes/iolite.camkes";
const GOLDEN: &str = "../../tests/golden/iolite-rights.txt";
const POOLS_GOLDEN: &str = "../../tests/golden/iolite-pools.txt";

fn compile() -> camkes::Output {
    camkes::compile(Path::new(ASSEMBLY), &[PathBuf::from("../../camkes")], &DiskFiles).unwrap_or_else(|e| panic!("{e}"))
}

/// `(component, access)` of every mapping of the object called `name`.
fn mappings(spec: &SystemSpec, name: &str) -> Vec<(String, Access)> {
    let object = spec.objects.iter().position(|o| o.name == name).unwrap_or_else(|| panic!("no object {name}"));
    spec.components
        .iter()
        .flat_map(|c| c.mappings.iter().filter(|m| m.object.0 as usize == object).map(|m| (c.name.clone(), m.access)))
        .collect()
}

fn channels(system: &System) -> BTreeSet<String> {
    system.connections.iter().filter(|c| c.channel).map(|c| c.name.text.clone()).collect()
}

#[test]
fn each_device_region_is_mapped_in_exactly_one_component() {
    let out = compile();
    let mut devices = 0;
    for o in &out.spec.objects {
        if let ObjectKind::DeviceFrames { .. } | ObjectKind::PciBarFrames { .. } = o.kind {
            devices += 1;
            let holders = mappings(&out.spec, &o.name);
            let components: BTreeSet<_> = holders.iter().map(|(c, _)| c.as_str()).collect();
            assert_eq!(components.len(), 1, "device region {} is mapped by {holders:?}", o.name);
        }
    }
    assert!(devices > 0, "the whole system drives at least the e1000");
    assert_eq!(mappings(&out.spec, "e1000_mmio"), [("netdrv".to_string(), Access::ReadWrite)]);
}

#[test]
fn every_pool_has_exactly_one_writer_and_channels_two_ends() {
    let out = compile();
    let channels = channels(&out.system);
    for c in &out.system.connections {
        if c.connector != ConnectorKind::SharedData {
            continue;
        }
        let ends = mappings(&out.spec, &c.name.text);
        let writers: BTreeSet<_> =
            ends.iter().filter(|(_, a)| *a == Access::ReadWrite).map(|(c, _)| c.as_str()).collect();
        if channels.contains(&c.name.text) {
            assert_eq!(ends.len(), 2, "channel {} has ends {ends:?}", c.name.text);
            assert_eq!(writers.len(), 2, "channel {}: both ends write their own half: {ends:?}", c.name.text);
        } else {
            assert!(c.shared_writers.is_none(), "{} declares several writers", c.name.text);
            assert_eq!(writers.len(), 1, "shared region {} has writers {writers:?} ({ends:?})", c.name.text);
            // The writer is the owner, the `from` end.
            let owner = &out.system.instances[c.from[0].instance].name.text;
            assert!(writers.contains(owner.as_str()), "{}: the writer is not the owner {owner}", c.name.text);
        }
    }
    for name in ["link", "client", "fs_channel", "fs_channel2", "cgi_chan"] {
        assert!(channels.contains(name), "{name} is a channel");
    }
}

/// Pools that hold data received from the network: frames (rx_pool),
/// socket data (sock_pool) and httpd's pool, which holds request headers
/// and environments built from them (app_pool). cgi must see only what
/// is meant for it, so it may map none of them.
#[test]
fn cgi_maps_no_pool_that_holds_socket_data() {
    let out = compile();
    for pool in ["rx_pool", "sock_pool", "app_pool"] {
        let holders = mappings(&out.spec, pool);
        assert!(!holders.iter().any(|(c, _)| c == "cgi"), "cgi maps {pool}: {holders:?}");
    }
}

#[test]
fn the_rights_table_is_the_reviewed_one() {
    let out = compile();
    let table = format!(
        "# The rights of every end of camkes/iolite.camkes, from its compiled spec\n\
         # (tools/camkes/tests/rights.rs; regenerate with UPDATE_GOLDEN=1 and review).\n\
         # map: R read-only, RW read-write; cap: R receive, W send, G grant,\n\
         # P grant-reply (call), - none; badge: the sender's bits.\n{}",
        camkes::spec::rights_table(&out.spec)
    );
    same_as_golden(GOLDEN, &table, "the rights");
}

/// The IO-Lite pools: the ids the compiler derives, every end's mapping
/// and the grant lists by id, as reviewed.
#[test]
fn the_pool_table_is_the_reviewed_one() {
    let out = compile();
    let table = format!(
        "# The IO-Lite pools of camkes/iolite.camkes (`<connection>.pool = true`) with\n\
         # the ids the compiler derives, as system.txt lists them\n\
         # (tools/camkes/tests/rights.rs; regenerate with UPDATE_GOLDEN=1 and review).\n{}",
        camkes::pools::table(&out.system)
    );
    same_as_golden(POOLS_GOLDEN, &table, "the pools");
}

/// The ids are the ones every end's glue carries, and the rights those
/// of the spec: the table shows what the components are built with.
#[test]
fn the_pool_table_agrees_with_the_glue_and_the_spec() {
    let out = compile();
    let mut pools = 0;
    for c in out.system.connections.iter().filter(|c| c.pool.is_some()) {
        pools += 1;
        let id = c.pool.unwrap();
        let name = &c.name.text;
        for end in c.from.iter().chain(&c.to) {
            let inst = &out.system.instances[end.instance];
            let component = out.system.component_of(end.instance);
            let (_, glue) = out.glue.iter().find(|(n, _)| *n == format!("{}.rs", component.elf)).unwrap();
            let constant = format!("pub const {}: ", name.to_uppercase());
            let line = glue
                .lines()
                .find(|l| l.contains(&constant))
                .unwrap_or_else(|| panic!("{name} not in {}", component.elf));
            assert!(line.ends_with(&format!(" = {id};")) || line.ends_with(&format!(" = Some({id});")), "{line}");
            assert!(glue.contains(&format!("({name:?}, {id}),")), "{name} not in {}'s ALL", component.elf);
            let access = mappings(&out.spec, name).into_iter().find(|(c, _)| *c == inst.name.text).unwrap().1;
            let letters = if access == Access::ReadWrite { "RW" } else { "R" };
            let row = format!("{}.{name}", inst.name.text);
            let table = camkes::pools::table(&out.system);
            assert!(
                table.lines().any(
                    |l| l.split_whitespace().collect::<Vec<_>>() == [name.as_str(), &id.to_string(), &row, letters]
                ),
                "no row {name} {id} {row} {letters} in\n{table}"
            );
        }
    }
    assert_eq!(pools, 8, "the system's pools");
}

fn same_as_golden(path: &str, table: &str, what: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, table).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(path).unwrap_or_default();
    if golden != table {
        let old: Vec<&str> = golden.lines().collect();
        let new: Vec<&str> = table.lines().collect();
        let mut diff = String::new();
        for line in &old {
            if !new.contains(line) {
                diff.push_str(&format!("- {line}\n"));
            }
        }
        for line in &new {
            if !old.contains(line) {
                diff.push_str(&format!("+ {line}\n"));
            }
        }
        if diff.is_empty() {
            diff.push_str("(same lines, different order)\n");
        }
        panic!(
            "{what} of camkes/iolite.camkes differ from {path} (- reviewed, + compiled):\n{diff}\
             if the change is intended: UPDATE_GOLDEN=1 cargo test -p camkes --test rights, and review it"
        );
    }
}
