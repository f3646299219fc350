//! Errors that used to be wrong, vague or missing: attribute values out of
//! their type's range, sources that are not UTF-8, upstream settings this
//! compiler leaves out, and a hint that has to lead to a system that
//! compiles.

use camkes::imports::{DiskFiles, MemoryFiles};
use std::path::{Path, PathBuf};

fn compile(source: &str) -> Result<camkes::Output, camkes::diag::Diagnostic> {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", source);
    camkes::compile(Path::new("sys/main.camkes"), &[], &files)
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("messages").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A component with one attribute of each integer type, and the assembly
/// setting `settings` (on line 3).
fn attributes(settings: &str) -> String {
    format!(
        "import <std_connector.camkes>;\ncomponent A {{ control; attribute int i; attribute int64_t s; attribute uint64_t u; attribute uint64_t vs[]; }}\nassembly {{ composition {{ component A a; }} configuration {{ {settings} }} }}\n"
    )
}

#[test]
fn attribute_values_out_of_their_types_range_are_refused() {
    let cases = [
        ("a.u = -1;", "'a.u' = -1 is out of range for uint64_t (0..=18446744073709551615)"),
        ("a.u = 0x10000000000000000;", "'a.u' = 18446744073709551616 is out of range for uint64_t (0..=18446744073709551615)"),
        ("a.u = 1 << 64;", "'a.u' = 18446744073709551616 is out of range for uint64_t"),
        ("a.vs = [1, 2, -3];", "'a.vs' = -3 is out of range for uint64_t"),
        ("a.s = 0x8000000000000000;", "'a.s' = 9223372036854775808 is out of range for int64_t (-9223372036854775808..=9223372036854775807); declare it uint64_t"),
        ("a.s = -0x8000000000000001;", "'a.s' = -9223372036854775809 is out of range for int64_t"),
        ("a.i = 0x80000000;", "'a.i' = 2147483648 is out of range for int (-2147483648..=2147483647); declare it int64_t"),
        ("a.i = -2147483649;", "'a.i' = -2147483649 is out of range for int (-2147483648..=2147483647); declare it int64_t"),
        ("a.i = 0xffffffffffffffff;", "'a.i' = 18446744073709551615 is out of range for int (-2147483648..=2147483647); declare it uint64_t"),
    ];
    for (setting, message) in cases {
        let source = attributes(setting);
        let e = compile(&source).expect_err(setting);
        let value = source.lines().nth(2).unwrap().find(setting).unwrap() + setting.find('=').unwrap() + 3;
        let value = if setting.contains('[') {
            value + setting.find("-3").unwrap() - setting.find('[').unwrap()
        } else {
            value
        };
        assert!(e.message.starts_with(message), "{setting}: {e}");
        assert_eq!(e.line_col(), format!("3:{value}"), "{setting}: {e}");
    }
    // A default is checked as a setting is, and so is a --set override.
    let e = compile("component A { control; attribute uint64_t x = -1; }").expect_err("default");
    assert_eq!(
        (e.message.as_str(), e.line_col()),
        ("the default of 'x' = -1 is out of range for uint64_t (0..=18446744073709551615)", "1:47".into())
    );
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", attributes(""));
    let set = camkes::overrides::parse_setting("a.i=1<<31").unwrap();
    let e = camkes::compile_with(Path::new("sys/main.camkes"), &[], &[set], &files).expect_err("--set");
    assert!(e.message.starts_with("'a.i' = 2147483648 is out of range for int"), "{e}");
    assert_eq!(&*e.pos.file, "--set 'a.i=1<<31'");
}

#[test]
fn policy_values_out_of_their_bounds_are_refused_where_written() {
    // netstack's admission settings (POLICY_BOUNDS in check/settings.rs).
    let netstack = |default: &str, setting: &str| {
        format!(
            "import <std_connector.camkes>;\ncomponent Netstack {{ control; attribute int half_open_budget{default}; attribute int syn_recv_timeout_ms = 3000; }}\nassembly {{ composition {{ component Netstack n; }} configuration {{ {setting} }} }}\n"
        )
    };
    let e = compile(&netstack("", "n.half_open_budget = 65;")).expect_err("above");
    assert_eq!(e.message, "'n.half_open_budget' = 65 is out of its bounds (0..=64)");
    assert_eq!(e.line_col(), "3:87");
    let e = compile(&netstack("", "n.half_open_budget = 4; n.syn_recv_timeout_ms = 0;")).expect_err("below");
    assert_eq!(e.message, "'n.syn_recv_timeout_ms' = 0 is out of its bounds (100..=600000)");
    let e = compile(&netstack(" = 99", "n.half_open_budget = 4;")).expect_err("default");
    assert_eq!(e.message, "the default of 'half_open_budget' = 99 is out of its bounds (0..=64)");
    assert_eq!(e.line_col(), "2:64");
    compile(&netstack("", "n.half_open_budget = 0; n.syn_recv_timeout_ms = 600000;")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_extremes_of_each_type_become_constants_that_compile() {
    let out = compile(&attributes(
        "a.i = -2147483648; a.s = -0x8000000000000000; a.u = 0xffffffffffffffff; a.vs = [0, 0xffffffffffffffff];",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let glue = &out.glue[0].1;
    let start = glue.find("    pub mod attributes {").unwrap();
    let module = &glue[start..start + glue[start..].find("\n    }\n").unwrap() + 7];
    let constants: Vec<&str> = module.lines().filter(|l| l.contains("pub const")).map(str::trim).collect();
    assert_eq!(
        constants,
        [
            "pub const I: i64 = -2147483648;",
            "pub const S: i64 = -9223372036854775808;",
            "pub const U: u64 = 18446744073709551615;",
            "pub const VS: &[u64] = &[0, 18446744073709551615];",
        ]
    );
    // And rustc agrees they are values of those types.
    let dir = scratch("extremes");
    std::fs::write(dir.join("attributes.rs"), module).unwrap();
    let status = std::process::Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--edition", "2021", "--crate-type", "lib", "--emit", "metadata", "-o"])
        .arg(dir.join("attributes.rmeta"))
        .arg(dir.join("attributes.rs"))
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_source_that_is_not_utf8_is_reported_at_its_first_bad_byte() {
    let dir = scratch("utf8");
    // Line 3, after eight characters (one of them two bytes long).
    let bad = b"import <std_connector.camkes>;\ncomponent A { control; }\n// caf\xc3\xa9 \xff\xfe\n";
    std::fs::write(dir.join("main.camkes"), bad).unwrap();
    let e = camkes::check_file(&dir.join("main.camkes"), &[], &DiskFiles).expect_err("root");
    assert_eq!(
        (e.to_string()),
        format!(
            "{}:3:9: error: invalid UTF-8: byte 0xff (byte offset 65) is not valid UTF-8; CAmkES sources are UTF-8 text",
            dir.join("main.camkes").display()
        )
    );
    // An imported file: reported in that file, not as "not found".
    std::fs::write(dir.join("lib.camkes"), b"procedure P {\n  \x80 }\n").unwrap();
    std::fs::write(dir.join("top.camkes"), "import \"lib.camkes\";\n").unwrap();
    let e = camkes::check_file(&dir.join("top.camkes"), &[], &DiskFiles).expect_err("import");
    assert_eq!(
        (e.pos.file.as_ref(), e.line_col(), e.message.starts_with("invalid UTF-8: byte 0x80 (byte offset 16)")),
        (&*dir.join("lib.camkes").display().to_string(), "2:3".to_string(), true),
        "{e}"
    );
}

#[test]
fn upstream_settings_left_out_say_why() {
    let system = |setting: &str| {
        format!(
            r#"import <std_connector.camkes>;
procedure P {{ void f(); }}
component S {{ provides P p; }}
component C {{ control; uses P p; dataport Buf d; }}
component R {{ control; consumes I irq; dataport Buf d; }}
component D {{ hardware; emits I irq; }}
assembly {{ composition {{
    component S s; component C c; component R r; component D d;
    connection seL4RPCCall x(from c.p, to s.p);
    connection seL4SharedData m(from c.d, to r.d);
    connection seL4HardwareInterrupt i(from d.irq, to r.irq);
}} configuration {{
    d.irq_irq_type = "isa"; d.irq_irq_ioapic_pin = 4; d.irq_irq_vector = 4;
    {setting}
}} }}"#
        )
    };
    let cases = [
        ("s.integrity_label = \"high\";", "attribute 's.integrity_label' is not supported: it labels components for upstream's capDL integrity proofs"),
        ("d.integrity_label = \"low\";", "attribute 'd.integrity_label' is not supported: it labels components"),
        ("x.integrity_label = \"low\";", "attribute 'x.integrity_label' is not supported: it labels connections"),
        ("d.irq_irq_number = 4;", "attribute 'd.irq_irq_number' is not supported: it is for upstream's \"simple\" and \"arm\" interrupt types"),
        ("d.irq_irq_trigger = \"edge\";", "attribute 'd.irq_irq_trigger' is not supported: it is for upstream's \"simple\""),
        ("d.irq_irq_pci_bus = 0;", "attribute 'd.irq_irq_pci_bus' is not supported: it is for MSI interrupts"),
        ("d.irq_attributes = \"4,0,0\";", "attribute 'd.irq_attributes' is not supported: it configures seL4IOAPICHardwareInterrupt"),
        ("s.p_priority = 100;", "per-interface thread attribute 's.p_priority' is not supported: each component has one thread"),
        ("s.p_max_priority = 100;", "per-interface thread attribute 's.p_max_priority' is not supported"),
        ("s.p_stack_size = 8192;", "per-interface thread attribute 's.p_stack_size' is not supported"),
        ("s.p_period = 10;", "per-interface thread attribute 's.p_period' is not supported"),
        ("c.heap_size = 4096;", "attribute 'c.heap_size' is not supported: a component sizes its heap in its crate"),
        ("c.affinity = 0;", "attribute 'c.affinity' is not supported: the kernel runs on one core"),
        ("c._domain = 0;", "attribute 'c._domain' is not supported: the kernel has one scheduling domain"),
        ("c.budget = 100;", "attribute 'c.budget' is not supported: the kernel is not built for MCS"),
        ("c.dma_pool = 4096;", "attribute 'c.dma_pool' is not supported: there is no per-component DMA pool"),
        ("c.simple = true;", "attribute 'c.simple' is not supported: it is for upstream's 'simple' components"),
        ("m.size = 8192;", "attribute 'm.size' is not supported: shared memory is as large as its dataport type says"),
        ("x.buffer = \"m\";", "attribute 'x.buffer' is not supported: RPC through a shared buffer is not supported"),
    ];
    for (setting, message) in cases {
        let e = compile(&system(setting)).expect_err(setting);
        assert!(e.message.starts_with(message), "{setting}: {e}");
        assert_eq!(e.line_col(), "14:7", "{setting}: {e}");
    }
    // Settings nobody defines stay unknown.
    let e = compile(&system("c.no_such_thing = 1;")).expect_err("unknown");
    assert!(e.message.starts_with("unknown attribute 'no_such_thing' for instance 'c'"), "{e}");
    // Synchronisation primitives.
    let e = compile("component A { control; has mutex m; }").expect_err("mutex");
    assert_eq!(e.message, "'has mutex' is not supported: Rust components bring their own synchronisation");
    let e = compile("component A { control; has semaphore s; }").expect_err("semaphore");
    assert_eq!(e.message, "'has semaphore' is not supported: Rust components bring their own synchronisation");
}

/// The hint for an seL4Notification with several consumers, applied as it
/// says, one consumer at a time, gives a system that compiles, with one
/// notification per consumer.
#[test]
fn the_hint_for_a_second_consumer_leads_to_a_system_that_compiles() {
    let mut source = String::from(
        "import <std_connector.camkes>;
component E { control; emits Wake w; }
component C { control; consumes Wake w; }
assembly { composition {
    component E e; component C c1; component C c2; component C c3;
    connection seL4Notification n(from e.w, to c1.w, to c2.w, to c3.w);
} }
",
    );
    let quoted = |message: &str, after: &str| -> String {
        let rest = message.split(after).nth(1).unwrap_or_else(|| panic!("no \"{after}\" in: {message}"));
        rest.split('\'').next().unwrap().to_string()
    };
    let mut hints = 0;
    let out = loop {
        let e = match compile(&source) {
            Ok(out) => break out,
            Err(e) => e,
        };
        hints += 1;
        assert!(hints <= 2, "the hint does not converge: {e}\n{source}");
        assert!(e.message.starts_with("seL4Notification with more than one consumer is not supported"), "{e}");
        let (declaration, component) = (quoted(&e.message, "add '"), quoted(&e.message, "to component '"));
        let (end, connection) = (quoted(&e.message, "remove '"), quoted(&e.message, "and add '"));
        let header = format!("component {component} {{");
        source = source.replacen(&header, &format!("{header} {declaration}"), 1);
        assert!(source.contains(&format!(", {end}")), "{end}");
        source = source.replacen(&format!(", {end}"), "", 1);
        source = source.replacen("\n} }", &format!("\n    {connection}\n}} }}"), 1);
    };
    assert_eq!(hints, 2);
    let spec = &out.spec;
    let emitter = spec.component("e").unwrap();
    let mut signalled: Vec<u32> = emitter.caps.iter().map(|c| c.object.0).collect();
    signalled.sort_unstable();
    signalled.dedup();
    assert_eq!(signalled.len(), 3, "one notification per consumer");
    for consumer in ["c1", "c2", "c3"] {
        let waits = &spec.component(consumer).unwrap().caps[0];
        assert!(signalled.contains(&waits.object.0), "{consumer} waits on one the emitter signals");
    }
}

/// The example of README.md's seL4NotificationNative section compiles,
/// with the badges it promises.
#[test]
fn the_readme_example_of_native_notification_badges_compiles() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let section = readme.split("### seL4NotificationNative").nth(1).expect("the section");
    let example = section.split("```camkes\n").nth(1).unwrap().split("```").next().unwrap();
    let out = compile(example).unwrap_or_else(|e| panic!("{e}"));
    let badge = |name: &str| out.spec.component(name).unwrap().caps[0].badge;
    assert_eq!((badge("w0"), badge("w1")), (1, 2));
    let boss = out.spec.component("boss").unwrap();
    assert_eq!(boss.caps[0].object, out.spec.component("w0").unwrap().caps[0].object, "one notification");
}

/// Which instance is behind each badge of a server is derived from the
/// assembly (no setting can name a wrong one): `glue::<iface>::CLIENTS` is
/// the connection's `from` ends in badge order, not composition order; a
/// server type whose instances have different clients gets no constant,
/// and says why, rather than a list that is right for one instance only.
#[test]
fn a_servers_clients_are_named_from_its_connection() {
    let types = "import <std_connector.camkes>;\nprocedure P { void f(); }\ncomponent S { control; provides P p; }\ncomponent C { control; uses P p; }\n";
    let glue = |source: &str, file: &str| {
        let out = compile(source).unwrap_or_else(|e| panic!("{e}"));
        out.glue.into_iter().find(|(n, _)| n == file).unwrap().1
    };
    let one = format!(
        "{types}assembly {{ composition {{ component C a; component C b; component S s;\n connection seL4RPCCall r(from b.p, from a.p, to s.p); }} }}\n"
    );
    let server = glue(&one, "s.rs");
    assert!(server.contains("pub const CLIENTS: &[&str] = &[\"b\", \"a\"];"), "{server}");
    // Badge 1 is the first `from` end: the spec agrees with the list.
    let out = compile(&one).unwrap();
    let badge = |name: &str| {
        let c = out.spec.components.iter().find(|c| c.name == name).unwrap();
        c.caps.iter().find(|cap| cap.badge != 0).unwrap().badge
    };
    assert_eq!((badge("b"), badge("a")), (1, 2));
    // The client side has no list.
    assert!(!glue(&one, "c.rs").contains("CLIENTS"));

    let two = format!(
        "{types}assembly {{ composition {{ component C a; component C b; component S s; component S t;\n connection seL4RPCCall r(from a.p, to s.p); connection seL4RPCCall q(from b.p, to t.p); }} }}\n"
    );
    let server = glue(&two, "s.rs");
    assert!(!server.contains("pub const CLIENTS"), "{server}");
    assert!(server.contains("// No `CLIENTS`: instances of `S` have different clients here"), "{server}");
}

/// Every interface names the instances at its other side from the
/// assembly, with their spec indices (their system events records), so no
/// setting restates the wiring: one peer also as `PEER`; an unconnected
/// `maybe` interface has none; a hardware peer or instances of a type with
/// different peers get no constant, and a comment says why.
#[test]
fn peers_are_named_from_the_connections() {
    let types = "import <std_connector.camkes>;\nprocedure P { void f(); }\n\
        component S { control; provides P p; dataport Buf d; maybe dataport Buf spare; }\n\
        component C { control; uses P p; dataport Buf d; }\n\
        component Dev { hardware; emits Irq irq; }\n\
        component D { control; consumes Irq irq; }\n";
    let glue = |source: &str, file: &str| {
        let out = compile(source).unwrap_or_else(|e| panic!("{e}"));
        out.glue.into_iter().find(|(n, _)| n == file).unwrap().1
    };
    let module = |text: &str, name: &str| {
        let start = text.find(&format!("pub mod {name} {{")).unwrap_or_else(|| panic!("no module {name}"));
        text[start..].split("\n    }\n").next().unwrap().to_string()
    };
    let one = format!(
        "{types}assembly {{ composition {{ component Dev dev; component C a; component C b; component S s; component D drv;\n\
         connection seL4RPCCall r(from b.p, from a.p, to s.p);\n\
         connection seL4SharedData m(from s.d, to a.d, to b.d);\n\
         connection seL4HardwareInterrupt i(from dev.irq, to drv.irq); }}\n\
         configuration {{ dev.irq_irq_type = \"isa\"; dev.irq_irq_ioapic_pin = 4; dev.irq_irq_vector = 4; }} }}\n"
    );
    let server = glue(&one, "s.rs");
    // Spec indices count software instances only (`dev` is hardware).
    let p = module(&server, "p");
    assert!(p.contains("pub const PEERS: &[&str] = &[\"b\", \"a\"];"), "{p}");
    assert!(p.contains("pub const PEER_INDICES: &[usize] = &[1, 0];"), "{p}");
    assert!(!p.contains("pub const PEER:"), "{p}");
    let spare = module(&server, "spare");
    assert!(spare.contains("pub const PEERS: &[&str] = &[];"), "{spare}");
    let client = glue(&one, "c.rs");
    let p = module(&client, "p");
    assert!(p.contains("pub const PEER: &str = \"s\";") && p.contains("pub const PEER_INDEX: usize = 2;"), "{p}");
    // Both clients see `s` at the other side of `d`: one constant serves.
    assert!(module(&client, "d").contains("pub const PEER: &str = \"s\";"));
    let driver = glue(&one, "d.rs");
    assert!(module(&driver, "irq").contains("// No `PEERS`: a hardware instance is at the other end"), "{driver}");

    let two = format!(
        "{types}assembly {{ composition {{ component C a; component C b; component S s; component S t;\n\
         connection seL4RPCCall r(from a.p, to s.p); connection seL4RPCCall q(from b.p, to t.p);\n\
         connection seL4SharedData m(from s.d, to a.d); connection seL4SharedData n(from t.d, to b.d); }} }}\n"
    );
    let client = glue(&two, "c.rs");
    assert!(module(&client, "p").contains("// No `PEERS`: instances of this type have different peers here"));
}

/// fs's clients are named by the compiler, so the setting that once named
/// them (and could name a wrong instance) is refused in the real assembly,
/// at its place.
#[test]
fn fs_client_names_is_no_longer_a_setting() {
    let real = std::fs::read_to_string("../../camkes/iolite.camkes").unwrap();
    let anchor = "        fs.client_files = [\"httpd=520\", \"cgi=16\"];\n";
    assert!(real.contains(anchor), "the assembly no longer sets fs.client_files so");
    let stale = real.replacen(anchor, &format!("{anchor}        fs.client_names = [\"httpd\", \"cgi\"];\n"), 1);
    let line = stale[..stale.find("fs.client_names").unwrap()].lines().count();
    let path = scratch("client_names").join("iolite.camkes");
    std::fs::write(&path, stale).unwrap();
    let e = camkes::compile(&path, &[PathBuf::from("../../camkes")], &DiskFiles).expect_err("client_names");
    assert_eq!(e.message, "unknown attribute 'client_names' for instance 'fs' (component 'Fs')", "{e}");
    assert_eq!(e.line_col(), format!("{line}:12"), "{e}");
    // Unchanged, it compiles, and fs's glue names its callers.
    let out = camkes::compile(Path::new("../../camkes/iolite.camkes"), &[PathBuf::from("../../camkes")], &DiskFiles)
        .unwrap_or_else(|e| panic!("{e}"));
    let fs = &out.glue.iter().find(|(n, _)| n == "fs.rs").unwrap().1;
    assert!(fs.contains("pub const CLIENTS: &[&str] = &[\"httpd\", \"cgi\"];"));
    // Nor is their number, nor their shares' places: the shares are given
    // by name and put in badge order for fs.
    let e = compile_real("fs.clients = 2;", "clients").expect_err("clients");
    assert_eq!(e.message, "unknown attribute 'clients' for instance 'fs' (component 'Fs')", "{e}");
    assert!(fs.contains("pub const CLIENT_FILES_BY_BADGE: &[i64] = &[520, 16];"), "{fs}");
    assert!(fs.contains("pub const CLIENT_QUOTA_BY_BADGE: &[i64] = &[640, 64];"), "{fs}");
    let e = compile_real("fs.client_files = [\"cgi=16\", \"httpd=520\"];", "reordered");
    let fs = e.unwrap_or_else(|e| panic!("{e}")).glue.into_iter().find(|(n, _)| n == "fs.rs").unwrap().1;
    assert!(fs.contains("pub const CLIENT_FILES_BY_BADGE: &[i64] = &[520, 16];"), "{fs}");
}

/// The real assembly with its `fs.client_files` line replaced by `line`.
fn compile_real(line: &str, name: &str) -> Result<camkes::Output, camkes::diag::Diagnostic> {
    let real = std::fs::read_to_string("../../camkes/iolite.camkes").unwrap();
    let anchor = "        fs.client_files = [\"httpd=520\", \"cgi=16\"];\n";
    let changed = if line.starts_with("fs.client_files") {
        real.replacen(anchor, &format!("        {line}\n"), 1)
    } else {
        real.replacen(anchor, &format!("{anchor}        {line}\n"), 1)
    };
    let path = scratch(name).join("iolite.camkes");
    std::fs::write(&path, changed).unwrap();
    camkes::compile(&path, &[PathBuf::from("../../camkes")], &DiskFiles)
}

/// The real components name their peers from the glue, not from settings
/// or constants: netstack's client and second client, fs's channels.
#[test]
fn the_real_components_peers_come_from_the_assembly() {
    let out = camkes::compile(Path::new("../../camkes/iolite.camkes"), &[PathBuf::from("../../camkes")], &DiskFiles)
        .unwrap_or_else(|e| panic!("{e}"));
    let glue = |file: &str| out.glue.iter().find(|(n, _)| n == file).unwrap().1.clone();
    let (netstack, fs, httpd, netdrv) = (glue("netstack.rs"), glue("fs.rs"), glue("httpd.rs"), glue("netdrv.rs"));
    assert!(!netstack.contains("CLIENT_NAME") && !netstack.contains("CLIENT2_NAME"), "{netstack}");
    for (text, peer) in
        [(&netstack, "httpd"), (&netstack, "netdrv"), (&netdrv, "netstack"), (&httpd, "cgi"), (&httpd, "fs")]
    {
        assert!(text.contains(&format!("pub const PEER: &str = \"{peer}\";")), "{peer}");
    }
    assert!(
        fs.contains("pub const PEERS: &[&str] = &[\"httpd\"];")
            && fs.contains("pub const PEERS: &[&str] = &[\"cgi\"];")
    );
}
