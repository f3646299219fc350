//! IO-Lite pools (`<connection>.pool = true`): the compiler derives their
//! ids (1, 2, ... in the order the connections are written), the same at
//! every end and on every compile, and gives each component its pools'
//! ids in `glue::pools`, named after the pool. The refusals (hand-written
//! ids, a pool end named otherwise, ...) are in tests/malformed.rs, a grant
//! list naming no pool in tests/grant_lists.rs, the whole system's table
//! in tests/rights.rs.

use camkes::imports::{DiskFiles, MemoryFiles};
use std::path::{Path, PathBuf};

/// `Src` owns `b_pool` and `a_pool` (written in that order), `Dst` maps
/// them read-only and, `maybe`, `c_pool`; `Far` owns `c_pool` when
/// `with_far`. `data` is shared memory but no pool.
fn system(with_far: bool) -> String {
    let far = if with_far {
        "component Far far;\n    connection seL4SharedData c_pool(from far.c_pool, to dst.c_pool);"
    } else {
        ""
    };
    let far_setting = if with_far { "c_pool.pool = true;" } else { "" };
    format!(
        r#"import <std_connector.camkes>;
component Src {{ control; dataport Buf b_pool; dataport Buf a_pool; dataport Buf data; }}
component Dst {{ control; dataport Buf a_pool; dataport Buf b_pool; maybe dataport Buf c_pool; dataport Buf data; }}
component Far {{ control; dataport Buf c_pool; }}
assembly {{ composition {{
    component Src src; component Dst dst;
    connection seL4SharedData b_pool(from src.b_pool, to dst.b_pool);
    connection seL4SharedData data(from src.data, to dst.data);
    connection seL4SharedData a_pool(from src.a_pool, to dst.a_pool);
    {far}
}} configuration {{
    a_pool.pool = true; b_pool.pool = true; {far_setting}
}} }}"#
    )
}

fn compile(source: &str) -> camkes::Output {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", source);
    camkes::compile(Path::new("sys/main.camkes"), &[], &files).unwrap_or_else(|e| panic!("{e}"))
}

fn glue<'a>(out: &'a camkes::Output, elf: &str) -> &'a str {
    &out.glue.iter().find(|(n, _)| *n == format!("{elf}.rs")).unwrap_or_else(|| panic!("no glue {elf}")).1
}

/// The `pub mod pools { ... }` block of a glue file.
fn pools_module(glue: &str) -> &str {
    let start = glue.find("    pub mod pools {").expect("a pools module");
    let end = start + glue[start..].find("\n    }\n").expect("its end");
    &glue[start..end]
}

#[test]
fn ids_follow_the_written_order_and_are_the_same_at_every_end() {
    let out = compile(&system(true));
    let src = pools_module(glue(&out, "src"));
    let dst = pools_module(glue(&out, "dst"));
    let far = pools_module(glue(&out, "far"));
    // b_pool is written first: id 1; `data` is no pool and takes no id.
    assert!(src.contains("pub const B_POOL: u32 = 1;") && src.contains("pub const A_POOL: u32 = 2;"), "{src}");
    assert!(dst.contains("pub const B_POOL: u32 = 1;") && dst.contains("pub const A_POOL: u32 = 2;"), "{dst}");
    assert!(dst.contains("pub const C_POOL: Option<u32> = Some(3);"), "{dst}");
    assert!(far.contains("pub const C_POOL: u32 = 3;"), "{far}");
    assert!(!src.contains("DATA") && !dst.contains("DATA"), "data is no pool");
    // The table the grant lists are resolved with, in declaration order.
    assert!(src.contains("(\"b_pool\", 1),\n            (\"a_pool\", 2),\n        ];"), "{src}");
    assert!(
        dst.contains("(\"a_pool\", 2),\n            (\"b_pool\", 1),\n            (\"c_pool\", 3),\n        ];"),
        "{dst}"
    );
    assert!(src.contains("/// Pool `a_pool`, written by `src`; mapped here read-write."), "{src}");
    assert!(dst.contains("/// Pool `a_pool`, written by `src`; mapped here read-only."), "{dst}");
    let ids: Vec<_> = out.system.connections.iter().map(|c| (c.name.text.as_str(), c.pool)).collect();
    assert_eq!(ids, [("b_pool", Some(1)), ("data", None), ("a_pool", Some(2)), ("c_pool", Some(3))]);
}

#[test]
fn an_unconnected_maybe_pool_is_none() {
    let out = compile(&system(false));
    let dst = pools_module(glue(&out, "dst"));
    assert!(dst.contains("pub const C_POOL: Option<u32> = None;"), "{dst}");
    assert!(!dst.contains("(\"c_pool\""), "not in the table: {dst}");
}

#[test]
fn every_compile_gives_the_same_ids() {
    let first = compile(&system(true));
    for _ in 0..5 {
        let again = compile(&system(true));
        assert_eq!(first.glue, again.glue);
        assert_eq!(camkes::pools::table(&first.system), camkes::pools::table(&again.system));
    }
}

#[test]
fn a_component_without_pools_has_no_pools_module() {
    let out = compile(
        r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition { component A a; component B b; connection seL4SharedData d(from a.d, to b.d); } }"#,
    );
    assert!(!glue(&out, "a").contains("pub mod pools"));
}

/// `--set` cannot write an id either (test images change settings so).
#[test]
fn an_override_cannot_set_a_pool_id() {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", system(true));
    let setting = camkes::overrides::parse_setting("src.a_pool_id=2").unwrap();
    let e = camkes::compile_with(Path::new("sys/main.camkes"), &[], &[setting], &files).unwrap_err().to_string();
    assert!(
        e.contains("'src.a_pool_id': IO-Lite pool ids are derived from the assembly, not written by hand: 'a_pool' is pool 2 (glue::pools::A_POOL); remove this setting"),
        "{e}"
    );
}

/// Every assembly in the repository: its pools have one name end to end
/// (the compiler insists), every `_refs` grant list names only pools, and
/// no component type declares an attribute for a pool's id.
#[test]
fn the_repositorys_assemblies_write_no_pool_ids() {
    let mut assemblies = vec![PathBuf::from("../../camkes/iolite.camkes")];
    for entry in std::fs::read_dir("../../examples").unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let file = dir.join(format!("{name}.camkes"));
        if file.exists() {
            assemblies.push(file);
        }
    }
    let mut with_pools = 0;
    for path in &assemblies {
        let out = camkes::compile(path, &[PathBuf::from("../../camkes")], &DiskFiles)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for c in out.system.components.iter().filter(|c| c.instantiated) {
            for a in &c.decl.attributes {
                assert!(
                    !a.name.text.ends_with("pool_id"),
                    "{}: component {} declares {}",
                    path.display(),
                    c.decl.name.text,
                    a.name.text
                );
            }
        }
        if out.system.connections.iter().any(|c| c.pool.is_some()) {
            with_pools += 1;
        }
    }
    // iolite, netecho, fsread, stream, channelbench, and hostile (which
    // imports iolite).
    assert_eq!(with_pools, 6, "assemblies with pools");
}
