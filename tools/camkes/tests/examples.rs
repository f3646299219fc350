//! The assemblies in camkes/ compile, their specs validate and round-trip,
//! the layout is the documented one, and the generated glue matches the
//! snapshots in tests/snapshots (which tests/glue_real_sel4.rs compiles
//! against the real `sel4` crate). Regenerate the snapshots with
//! `UPDATE_SNAPSHOTS=1 cargo test -p camkes --test examples`.

use camkes::imports::DiskFiles;
use std::path::{Path, PathBuf};
use system_spec::{Access, Binding, ObjectKind, Rights, SystemSpec, DATAPORT_BASE, PAGE_SIZE};

/// Where `import <...>;` looks, as the build passes it (`--import-path
/// camkes`): the shared interfaces and component types.
const IMPORT_PATH: &str = "../../camkes";

fn compile(path: &str) -> camkes::Output {
    match camkes::compile(Path::new(path), &[PathBuf::from(IMPORT_PATH)], &DiskFiles) {
        Ok(out) => out,
        Err(d) => panic!("{d}"),
    }
}

fn roundtrip(spec: &SystemSpec) {
    let bytes = spec.encode().unwrap();
    assert_eq!(&SystemSpec::decode(&bytes).unwrap(), spec);
}

fn snapshots(out: &camkes::Output, dir: &str) {
    let dir = PathBuf::from("tests/snapshots").join(dir);
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for (name, text) in &out.glue {
        let path = dir.join(name);
        if update {
            std::fs::write(&path, text).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing snapshot {}", path.display()));
        assert!(
            expected == *text,
            "{} is out of date: rerun with UPDATE_SNAPSHOTS=1 and review the diff",
            path.display()
        );
    }
}

#[test]
fn hello_compiles_with_the_documented_layout() {
    let out = compile("../../examples/hello/hello.camkes");
    let spec = &out.spec;
    spec.validate().unwrap();
    roundtrip(spec);
    snapshots(&out, "hello");

    let client = spec.component("hello_client").unwrap();
    let server = spec.component("hello_server").unwrap();
    let reader = spec.component("hello_reader").unwrap();
    assert_eq!(client.elf, "hello_client");
    assert!(client.control && !server.control);
    assert!(reader.restartable && !client.restartable);
    assert_eq!(server.priority, 200);
    assert_eq!(client.priority, 200);

    // Slots 1.. for non-dataport interfaces in declaration order.
    assert_eq!(client.interfaces[0].binding, Binding::RpcClient { slot: 1 });
    assert_eq!(client.interfaces[1].binding, Binding::EventEmitter { slot: 2 });
    assert_eq!(server.interfaces[0].binding, Binding::RpcServer { slot: 1 });
    assert_eq!(reader.interfaces[0].binding, Binding::EventConsumer { slot: 1 });
    assert_eq!(client.caps[0].rights, Rights::CALL);
    assert_eq!(client.caps[0].badge, 1);
    assert_eq!(server.caps[0].rights, Rights::READ);

    // The shared buffer: RW for the client, R for the reader, same frames.
    let rw = Binding::Dataport { vaddr: DATAPORT_BASE, size: 2 * PAGE_SIZE, access: Access::ReadWrite };
    let ro = Binding::Dataport { vaddr: DATAPORT_BASE, size: 2 * PAGE_SIZE, access: Access::ReadOnly };
    assert_eq!(client.interfaces[2].binding, rw);
    assert_eq!(reader.interfaces[1].binding, ro);
    assert_eq!(client.mappings[0].object, reader.mappings[0].object);
    assert_eq!(spec.objects[client.mappings[0].object.0 as usize].kind, ObjectKind::Frames { size: 8192 });

    let names: Vec<_> = out.glue.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["hello_client.rs", "hello_server.rs", "hello_reader.rs"]);
}

#[test]
fn hello_glue_has_typed_stubs_and_rights() {
    let out = compile("../../examples/hello/hello.camkes");
    let glue = |name: &str| out.glue.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let client = glue("hello_client.rs");
    for line in [
        "pub mod glue {",
        "pub const ELF_NAME: &str = \"hello_client\";",
        "pub fn echo_int(value: i32) -> i32 {",
        "pub fn add(a: u64, b: u64, overflow: &mut u8) -> u64 {",
        "pub fn swap(a: &mut u32, b: &mut u32) {",
        "pub fn is_even(value: i32) -> bool {",
        "pub fn count_bytes(text: &str) -> u32 {",
        "pub fn ping() {",
        "sel4::MessageInfo::new(1, 0, 0, __n as sel4::Word)",
        "pub fn emit() {",
        "pub fn get() -> rt::Dataport<rt::ReadWrite> {",
        "pub const VADDR: usize = 0x100000000;",
    ] {
        assert!(client.contains(line), "hello_client.rs lacks `{line}`");
    }
    let server = glue("hello_server.rs");
    for line in [
        "pub trait Echo {",
        "fn add(&mut self, a: u64, b: u64, overflow: &mut u8) -> u64;",
        "fn count_bytes(&mut self, text: &str) -> u32;",
        "pub fn run<S: Echo + ?Sized>(server: &mut S) -> ! {",
        "pub fn sender_badge() -> sel4::Word {",
    ] {
        assert!(server.contains(line), "hello_server.rs lacks `{line}`");
    }
    let reader = glue("hello_reader.rs");
    assert!(reader.contains("pub fn get() -> rt::Dataport<rt::ReadOnly> {"));
    assert!(reader.contains("pub fn wait() -> sel4::Word {"));
    // The read-only side has no way to write: the writing methods only
    // exist for Dataport<ReadWrite> (in glue-rt, which the glue uses rather
    // than carrying its own copy).
    assert!(reader.contains("pub use ::glue_rt as rt;"));
    assert!(!reader.contains("pub struct Dataport"), "the support code is not copied into the glue");
    assert!(!reader.contains("Dataport<rt::ReadWrite>"));
}

#[test]
fn iolite_system_compiles() {
    let out = compile("../../camkes/iolite.camkes");
    let spec = &out.spec;
    roundtrip(spec);
    snapshots(&out, "iolite");
    let names: Vec<_> = spec.components.iter().map(|c| c.name.as_str()).collect();
    for expected in ["pci_config", "ticker", "netdrv", "netstack", "fs", "httpd", "cgi"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    // The e1000's registers are BAR0 of the NIC found at boot for netdrv
    // (no address in the assembly), mapped uncached in netdrv only.
    let regs = spec
        .objects
        .iter()
        .position(|o| o.kind == ObjectKind::PciBarFrames { driver: "netdrv".into(), bar: 0, size: 0x20000 })
        .unwrap();
    let holders: Vec<_> = spec
        .components
        .iter()
        .filter(|c| c.mappings.iter().any(|m| m.object.0 as usize == regs))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(holders, ["netdrv"]);
    let netdrv = spec.component("netdrv").unwrap();
    assert!(netdrv.mappings.iter().any(|m| m.vaddr == DATAPORT_BASE && m.object.0 as usize == regs && !m.cached));
    assert_eq!(netdrv.pci_match.as_deref(), Some("net"));
    assert_eq!(spec.component("fs").unwrap().pci_match.as_deref(), Some("block"));
    // No device address anywhere: the disk's ports are its BAR0, both
    // interrupts the loader's to route; only fixed ISA devices (COM1, the
    // PIT, the RTC, 0xCF8) have addresses.
    assert!(spec.objects.iter().any(|o| o.kind == ObjectKind::PciBarPorts { driver: "fs".into(), bar: 0 }));
    let pci_irqs: Vec<_> = spec
        .objects
        .iter()
        .filter_map(|o| match &o.kind {
            ObjectKind::PciIrq(irq) => Some((irq.driver.as_str(), irq.vector)),
            _ => None,
        })
        .collect();
    assert_eq!(pci_irqs, [("netdrv", 11), ("fs", 10)]);
    assert!(!spec.objects.iter().any(|o| matches!(o.kind, ObjectKind::DeviceFrames { .. })));
    let pins: Vec<_> = spec
        .objects
        .iter()
        .filter_map(|o| match &o.kind {
            ObjectKind::IoApicIrq(irq) => Some(irq.pin),
            _ => None,
        })
        .collect();
    assert_eq!(pins, [2], "the PIT alone has a fixed pin");
    // PCI configuration space belongs to pci_config alone (address/data pair).
    let pci_ports =
        spec.objects.iter().position(|o| o.kind == ObjectKind::IoPorts { first: 0xcf8, last: 0xcff }).unwrap();
    let holders: Vec<_> = spec
        .components
        .iter()
        .filter(|c| c.caps.iter().any(|cap| cap.object.0 as usize == pci_ports))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(holders, ["pci_config"]);
    // Every component may be restarted by the supervisor.
    let restartable: Vec<_> = spec.components.iter().filter(|c| c.restartable).map(|c| c.name.as_str()).collect();
    assert_eq!(restartable, ["log", "pci_config", "ticker", "netdrv", "netstack", "fs", "httpd", "cgi"]);
    // Every component is watched for liveness, the cgi with the longest
    // limit; no component grants fault injection in the default assembly.
    let hang: Vec<_> = spec.components.iter().map(|c| (c.name.as_str(), c.hang_cpu_ms)).collect();
    assert!(hang.iter().all(|&(_, ms)| ms > 0), "{hang:?}");
    assert!(hang.iter().all(|&(n, ms)| n == "cgi" || ms < 1000), "{hang:?}");
    assert!(spec.components.iter().all(|c| !c.fault_injection));
    // The cgi alone is untrusted; every subscriber has a bound to confirm
    // a death in.
    let untrusted: Vec<_> = spec.components.iter().filter(|c| c.untrusted).map(|c| c.name.as_str()).collect();
    assert_eq!(untrusted, ["cgi"]);
    let bounds: Vec<_> =
        spec.components.iter().filter(|c| c.events).map(|c| (c.name.as_str(), c.confirm_death_ms)).collect();
    assert!(bounds.iter().all(|&(_, ms)| ms == 2000), "{bounds:?}");
    // The console: log alone holds COM1 and reads one ring per other
    // component, each ring mapped by no one as a dataport.
    let com1 = spec.objects.iter().position(|o| o.kind == ObjectKind::IoPorts { first: 0x3f8, last: 0x3ff }).unwrap();
    let holders: Vec<_> =
        spec.components.iter().filter(|c| c.caps.iter().any(|cap| cap.object.0 as usize == com1)).collect();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].name, "log");
    let server = holders[0].log_server.as_ref().expect("log is the log server");
    let writers: Vec<_> = spec.components.iter().filter(|c| c.name != "log").map(|c| c.name.as_str()).collect();
    assert_eq!(server.rings.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), writers);
    for c in spec.components.iter().filter(|c| c.name != "log") {
        let end = c.log_ring.as_ref().expect("every other component has a ring");
        assert!(spec.components.iter().all(|o| o.mappings.iter().all(|m| m.object != end.ring)));
    }
    // Only httpd may ask for a restart, and only of the cgi (a CGI that
    // does not answer in time).
    let grants: Vec<_> = spec
        .components
        .iter()
        .flat_map(|c| c.may_restart.iter().map(move |&t| (c.name.as_str(), spec.components[t as usize].name.as_str())))
        .collect();
    assert_eq!(grants, [("httpd", "cgi")]);
    // A read-only end is never mapped read-write: every RW dataport mapping
    // of a pool belongs to its one producer (checked by the compiler; here
    // spot-checked: httpd reads fs's cache, never writes it).
    let httpd = spec.component("httpd").unwrap();
    assert!(httpd.interfaces.iter().any(|i| matches!(i.binding, Binding::Dataport { access: Access::ReadOnly, .. })));
}

/// Every assembly of the repository: the system and each example.
fn assemblies() -> Vec<PathBuf> {
    let mut all = vec![PathBuf::from("../../camkes/iolite.camkes")];
    for example in std::fs::read_dir("../../examples").unwrap() {
        let dir = example.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let assembly = dir.join(format!("{name}.camkes"));
        if assembly.exists() {
            all.push(assembly);
        }
    }
    all.sort();
    all
}

/// The component types declared in `path` itself (not in its imports).
fn declared_types(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let file = std::sync::Arc::from(path.display().to_string());
    let items = camkes::parser::parse(camkes::lexer::lex(&file, &text).unwrap()).unwrap();
    items
        .into_iter()
        .filter_map(|item| match item {
            camkes::ast::Item::Component(c) => Some(c.name.text),
            _ => None,
        })
        .collect()
}

#[test]
fn every_assembly_compiles_and_imports_the_shared_types() {
    let shared: Vec<String> = std::fs::read_dir(format!("{IMPORT_PATH}/components"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "camkes"))
        .flat_map(|p| {
            let types = declared_types(&p);
            // One type per file, named after it.
            assert_eq!(types, [p.file_stem().unwrap().to_str().unwrap()], "{}", p.display());
            types
        })
        .collect();
    assert!(shared.len() >= 12, "the shared types: {shared:?}");
    let assemblies = assemblies();
    assert!(assemblies.len() >= 8, "{assemblies:?}");
    for assembly in assemblies {
        compile(assembly.to_str().unwrap());
        // A type of camkes/components/ is imported, never declared again
        // (a copy would drift from the one every other assembly uses).
        for name in declared_types(&assembly) {
            assert!(
                !shared.contains(&name),
                "{} declares its own '{name}': import <components/{name}.camkes>",
                assembly.display()
            );
        }
    }
}

#[test]
fn the_cli_reports_errors_in_the_documented_form() {
    let dir = std::env::temp_dir().join(format!("camkes-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.camkes");
    std::fs::write(&bad, "component C {\n  maybe provides P p;\n}\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_camkes")).arg("check").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr,
        format!("{}:2:9: error: 'maybe' can only qualify uses, consumes or dataport, not 'provides'\n", bad.display())
    );

    let spec_out = dir.join("out/hello.spec");
    let glue_out = dir.join("glue");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_camkes"))
        .args(["compile", "--spec-out"])
        .arg(&spec_out)
        .arg("--glue-out")
        .arg(&glue_out)
        .arg("../../examples/hello/hello.camkes")
        .status()
        .unwrap();
    assert!(status.success());
    let spec = SystemSpec::decode(&std::fs::read(&spec_out).unwrap()).unwrap();
    assert_eq!(spec.components.len(), 3);
    assert!(glue_out.join("hello_reader.rs").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A compile whose last output cannot be written (here the ELF list, whose
/// folder would be inside a regular file) writes nothing: the old spec
/// stays whole and no temporary file is left behind.
#[test]
fn a_failed_late_write_leaves_the_old_outputs_whole() {
    let dir = std::env::temp_dir().join(format!("camkes-atomic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spec_out = dir.join("system.spec");
    std::fs::write(&spec_out, b"the previous spec").unwrap();
    std::fs::write(dir.join("not-a-dir"), b"").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_camkes"))
        .args(["compile", "--spec-out"])
        .arg(&spec_out)
        .arg("--glue-out")
        .arg(dir.join("glue"))
        .arg("--elf-list")
        .arg(dir.join("not-a-dir/elves"))
        .arg("../../examples/hello/hello.camkes")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("error: cannot create "), "{stderr}");
    assert_eq!(std::fs::read(&spec_out).unwrap(), b"the previous spec");
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("glue")).into_iter().flatten())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["glue", "not-a-dir", "system.spec"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--set` replaces a setting wherever the assembly makes it, also in a
/// second assembly block (examples/hostile adds one to the whole system).
#[test]
fn set_overrides_a_setting_of_a_second_assembly_block() {
    let hostile = Path::new("../../examples/hostile/hostile.camkes");
    let set = [camkes::overrides::parse_setting("netstack.client2_quota=8").unwrap()];
    let out = camkes::compile_with(hostile, &[PathBuf::from(IMPORT_PATH)], &set, &DiskFiles)
        .unwrap_or_else(|d| panic!("{d}"));
    let netstack = &out.glue.iter().find(|(name, _)| name == "netstack.rs").expect("netstack glue").1;
    assert!(netstack.contains("pub const CLIENT2_QUOTA: i64 = 8;"), "{netstack}");
}
