//! The rights of every end of the whole system (`camkes/iolite.camkes`),
//! derived from the compiled spec: the least-privilege rules asserted, and
//! the complete table compared with the reviewed one committed in
//! `tests/golden/iolite-rights.txt`. After an intended change to the
//! assembly: `UPDATE_GOLDEN=1 cargo test -p camkes --test rights`, then
//! review the diff of the table like code.

use camkes::check::{ConnectorKind, System};
use camkes::imports::DiskFiles;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use system_spec::{Access, ObjectKind, SystemSpec};

const ASSEMBLY: &str = "../../camkes/iolite.camkes";
const GOLDEN: &str = "../../tests/golden/iolite-rights.txt";

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
        if let ObjectKind::DeviceFrames { .. } = o.kind {
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
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &table).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN).unwrap_or_default();
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
            "the rights of camkes/iolite.camkes differ from {GOLDEN} (- reviewed, + compiled):\n{diff}\
             if the change is intended: UPDATE_GOLDEN=1 cargo test -p camkes --test rights, and review it"
        );
    }
}
