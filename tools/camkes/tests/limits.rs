//! Input that used to crash, hang or slow down the compiler is refused
//! with a positioned error, or compiled in reasonable time: deep nesting,
//! long import chains, tens of thousands of component types, huge or
//! endless files and over-long names.

use camkes::imports::{DiskFiles, MemoryFiles, MAX_SOURCE_BYTES};
use std::path::{Path, PathBuf};

/// A fresh, empty scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compile(source: &str) -> Result<camkes::Output, camkes::diag::Diagnostic> {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", source);
    camkes::compile(Path::new("sys/main.camkes"), &[], &files)
}

fn glue_of<'a>(out: &'a camkes::Output, file: &str) -> &'a str {
    &out.glue.iter().find(|(name, _)| name == file).expect("glue file").1
}

const NESTING: &str = "nesting is deeper than 64 levels";

/// An assembly whose third line sets `a.x` to `value`, and the column at
/// which the value starts.
fn with_setting(value: &str) -> (String, usize) {
    let prefix = "assembly { composition { component A a; } configuration { a.x = ";
    let source = format!(
        "import <std_connector.camkes>;\ncomponent A {{ control; attribute int x; attribute int xs[]; }}\n{prefix}{value}; }} }}\n"
    );
    (source, prefix.len() + 1)
}

#[test]
fn deep_nesting_is_refused_where_it_passes_the_limit() {
    let n = 3000;
    // (value, offset in it of the opener that passes 64 levels)
    let cases = [
        ("parentheses", format!("{}1{}", "(".repeat(n), ")".repeat(n)), 64),
        ("brackets", format!("{}{}", "[".repeat(n), "]".repeat(n)), 64),
        ("braces", format!("{}1{}", "{1:".repeat(n), "}".repeat(n)), 3 * 64),
        ("minus signs", format!("{}1", "-".repeat(n)), 64),
        ("negations", format!("{}1", "!".repeat(n)), 64),
        ("complements", format!("{}1", "~".repeat(n)), 64),
        ("exponents", format!("2{}", "**2".repeat(n)), 1 + 3 * 64),
        ("conditionals", format!("{}1{}", "1?".repeat(n), ":1".repeat(n)), 2 * 65 - 1),
        // 40 lists, then a parenthesis and a minus sign a level each.
        ("mixed", format!("{}{}1{}{}", "[".repeat(40), "(-".repeat(n), ")".repeat(n), "]".repeat(40)), 64),
    ];
    for (what, value, offset) in cases {
        let (source, col) = with_setting(&value);
        let e = compile(&source).expect_err(what);
        assert_eq!(
            (e.message.as_str(), e.line_col()),
            (format!("{NESTING} (parentheses, brackets, braces or operators)").as_str(), format!("3:{}", col + offset)),
            "{what}"
        );
    }
}

#[test]
fn deep_nesting_is_refused_everywhere_a_value_is_read() {
    let deep = format!("{}4096{}", "(".repeat(3000), ")".repeat(3000));
    let size = format!("component C {{ control; dataport Buf({deep}) d; }}");
    let e = compile(&size).expect_err("dataport size");
    let col = size.find("((").unwrap() + 2;
    assert_eq!((e.message.contains(NESTING), e.line_col()), (true, format!("1:{}", col + 64)));
    let default = format!("component C {{ control; attribute int x = {deep}; }}");
    let e = compile(&default).expect_err("attribute default");
    let col = default.find('(').unwrap() + 1;
    assert_eq!((e.message.contains(NESTING), e.line_col()), (true, format!("1:{}", col + 64)));
    let e = camkes::overrides::parse_setting(&format!("a.x={deep}")).expect_err("--set");
    assert!(e.message.contains(NESTING), "{e}");
}

#[test]
fn nesting_up_to_the_limit_compiles_to_the_folded_value() {
    for (value, expected) in [
        (format!("{}7{}", "(".repeat(64), ")".repeat(64)), "7"),
        (format!("{}7", "-".repeat(64)), "7"),
        (format!("{}7", "~".repeat(64)), "7"),
        (format!("{}7{}", "(-".repeat(32), ")".repeat(32)), "7"),
    ] {
        let (source, _) = with_setting(&value);
        let out = compile(&source).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert!(glue_of(&out, "a.rs").contains(&format!("pub const X: i64 = {expected};")), "{value}");
    }
    let lists = camkes::overrides::parse_setting(&format!("a.b={}{}", "[".repeat(64), "]".repeat(64))).unwrap();
    assert!(matches!(lists.value.kind, camkes::ast::ValueKind::List(_)));
}

#[test]
fn negating_the_smallest_integer_is_an_error_not_a_panic() {
    let (source, col) = with_setting("-(~0x7fffffffffffffffffffffffffffffff)");
    let e = compile(&source).expect_err("overflow");
    assert_eq!((e.message.as_str(), e.line_col()), ("cannot fold '-' in this constant expression", format!("3:{col}")));
}

#[test]
fn a_long_chain_of_imports_is_read_without_recursion() {
    let n = 20_000;
    let mut files = MemoryFiles::default();
    for i in 0..n - 1 {
        files
            .add(format!("sys/f{i}.camkes"), format!("import \"f{}.camkes\";\ncomponent T{i} {{ control; }}\n", i + 1));
    }
    files.add(
        format!("sys/f{}.camkes", n - 1),
        "import <std_connector.camkes>;\ncomponent Last { control; }\nassembly { composition { component Last l; } }\n",
    );
    // Depth first: the deepest file's items come first, T0 last.
    let out = camkes::compile(Path::new("sys/f0.camkes"), &[], &files).unwrap_or_else(|e| panic!("{e}"));
    let types: Vec<&str> = out.system.components.iter().map(|c| c.decl.name.text.as_str()).collect();
    assert_eq!(types.len(), n);
    assert_eq!((types[0], types[1], types[n - 1]), ("Last", &*format!("T{}", n - 2), "T0"));
    assert_eq!(out.glue.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["last.rs"]);
}

/// The checker used to look for a clash of folder names with a linear
/// scan per component type: 50 000 types took minutes. This completes in
/// about a second (debug build); the test asserts what it produced, not how
/// fast.
#[test]
fn fifty_thousand_component_types_compile() {
    let n = 50_000;
    let mut source = String::from("import <std_connector.camkes>;\nprocedure P { void f(); }\n");
    for i in 0..n {
        source.push_str(&format!("component Type{i} {{ control; uses P p; attribute int a{i} = {i}; }}\n"));
    }
    source.push_str("component Server { provides P p; }\n");
    source.push_str("assembly { composition { component Type49999 last; component Server s;\n");
    source.push_str("connection seL4RPCCall c(from last.p, to s.p); } }\n");
    let out = compile(&source).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.system.components.len(), n + 1);
    assert_eq!(out.spec.components.iter().map(|c| c.elf.as_str()).collect::<Vec<_>>(), ["type49999", "server"]);
    assert!(glue_of(&out, "type49999.rs").contains("pub const A49999: i64 = 49999;"));
}

#[test]
fn a_redefinition_is_reported_as_one_before_its_folder_name() {
    let mut source = String::from("import <std_connector.camkes>;\n");
    for i in 0..1000 {
        source.push_str(&format!("component Type{i} {{ control; }}\n"));
    }
    source.push_str("component Type7 { control; }\n");
    source.push_str("assembly { composition { component Type0 a; } }\n");
    let e = compile(&source).expect_err("redefinition");
    assert_eq!(
        (e.message.as_str(), e.line_col()),
        ("'Type7' is already defined at sys/main.camkes:9:11", "1002:11".to_string())
    );
    // Different names, one folder: still the folder-name message.
    let e = compile("component HttpServer { control; }\ncomponent HTTPServer { control; }\n").expect_err("clash");
    assert_eq!(
        (e.message.as_str(), e.line_col()),
        ("component 'HTTPServer' would share the folder name 'http_server' with 'HttpServer'", "2:11".to_string())
    );
}

#[test]
fn identifiers_longer_than_64_characters_are_refused_before_anything_is_written() {
    let dir = scratch("long-names");
    let name = format!("Long{}", "x".repeat(61));
    assert_eq!(name.len(), 65);
    let source = dir.join("main.camkes");
    std::fs::write(
        &source,
        format!("import <std_connector.camkes>;\ncomponent {name} {{ control; }}\nassembly {{ composition {{ component {name} a; }} }}\n"),
    )
    .unwrap();
    let out = dir.join("out");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_camkes"))
        .arg("compile")
        .arg("--spec-out")
        .arg(out.join("system.spec"))
        .arg("--spec-text")
        .arg(out.join("system.txt"))
        .arg("--glue-out")
        .arg(out.join("glue"))
        .arg("--elf-list")
        .arg(out.join("elves.txt"))
        .arg(&source)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "{}:2:11: error: identifier 'Longxxxxxxxxxxxx...' is 65 characters long; the limit is 64\n",
            source.display()
        )
    );
    assert!(!out.exists(), "nothing is written");

    // 64 characters is fine, for every kind of name.
    let name = &name[..64];
    let inst = format!("i{}", "n".repeat(63));
    let text = format!(
        "import <std_connector.camkes>;\ncomponent {name} {{ control; attribute int {inst}; }}\nassembly {{ composition {{ component {name} {inst}; }} configuration {{ {inst}.{inst} = 1; }} }}\n"
    );
    let out = compile(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.spec.components[0].name, inst);
}

#[test]
fn the_identifier_limit_is_the_start_records_name_length() {
    assert_eq!(camkes::lexer::MAX_IDENT_LEN, component_runtime::start::MAX_NAME_LEN);
}

#[test]
fn imports_of_devices_directories_and_huge_files_are_refused() {
    let dir = scratch("bounded");
    std::fs::create_dir(dir.join("sub")).unwrap();
    // One byte over the limit, otherwise a valid (comment-only) file.
    let mut big = vec![b' '; MAX_SOURCE_BYTES as usize + 1];
    big[..2].copy_from_slice(b"//");
    std::fs::write(dir.join("big.camkes"), &big).unwrap();
    let system =
        "\nimport <std_connector.camkes>;\ncomponent A { control; }\nassembly { composition { component A a; } }\n";
    let cases = [
        (
            "import \"/dev/zero\";",
            "'/dev/zero' is not a regular file (a directory, device or pipe); sources must be files",
        ),
        ("import \"sub\";", &*format!("'{}' is not a regular file", dir.join("sub").display())),
        (
            "  import \"big.camkes\";",
            &*format!(
                "'{}' is 8388609 bytes, larger than the 8388608-byte limit of a source file",
                dir.join("big.camkes").display()
            ),
        ),
    ];
    for (import, message) in cases {
        let main = dir.join("main.camkes");
        std::fs::write(&main, format!("{import}{system}")).unwrap();
        let e = camkes::check_file(&main, &[], &DiskFiles).expect_err(import);
        let col = import.find("import").unwrap() + 1;
        assert_eq!(
            (e.pos.file.as_ref(), e.line_col(), e.message.starts_with(message)),
            (&*main.display().to_string(), format!("1:{col}"), true),
            "{import}: {e}"
        );
    }
    // An import path directory that holds a directory of that name: an
    // error, not "not found" nor a silent skip to the next directory.
    std::fs::create_dir(dir.join("sub/lib.camkes")).unwrap();
    std::fs::write(dir.join("main.camkes"), format!("import <lib.camkes>;{system}")).unwrap();
    let e = camkes::check_file(&dir.join("main.camkes"), &[dir.join("sub")], &DiskFiles).expect_err("dir");
    assert!(e.message.contains("is not a regular file"), "{e}");

    // The file named on the command line too.
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_camkes")).args(["check", "/dev/zero"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "/dev/zero:1:1: error: '/dev/zero' is not a regular file (a directory, device or pipe); sources must be files\n"
    );
}

#[test]
fn a_file_of_exactly_the_limit_is_read() {
    let dir = scratch("at-limit");
    let system =
        "import <std_connector.camkes>;\ncomponent A { control; }\nassembly { composition { component A a; } }\n//";
    let mut text = system.as_bytes().to_vec();
    text.resize(MAX_SOURCE_BYTES as usize, b'x');
    std::fs::write(dir.join("main.camkes"), &text).unwrap();
    let system = camkes::check_file(&dir.join("main.camkes"), &[], &DiskFiles).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(system.instances[0].name.text, "a");
}

/// A system of `n` connections (a third each RPC, shared memory and
/// notification, between `n / 3` pairs of instances) with a log server, so
/// every component also has a log ring.
fn connections(n: usize) -> String {
    let mut source = String::from(
        "import <std_connector.camkes>;\nprocedure P { void f(); }\n\
         component C { control; uses P p; dataport Buf d; emits E e; }\n\
         component S { control; provides P p; dataport Buf d; consumes E e; }\n\
         component L { control; }\nassembly { composition { component L log;\n",
    );
    for i in 0..n / 3 {
        source.push_str(&format!(
            "component C c{i}; component S s{i};\n\
             connection seL4RPCCall r{i}(from c{i}.p, to s{i}.p);\n\
             connection seL4SharedData d{i}(from c{i}.d, to s{i}.d);\n\
             connection seL4Notification e{i}(from c{i}.e, to s{i}.e);\n"
        ));
    }
    source.push_str("} configuration { log.log_server = true; } }\n");
    source
}

/// The fastest of `runs` compiles (and the system-wide listings a build
/// writes beside the spec), in seconds: the least disturbed by other load.
fn fastest_compile(source: &str, runs: usize) -> f64 {
    (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            let out = compile(source).unwrap_or_else(|e| panic!("{e}"));
            let text = camkes::spec::describe(&out.spec);
            assert!(text.contains("rights of every end:"));
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// `compile` was quadratic where `check` is not (the spec's validation and
/// its rights table looked every end up by scanning): 20 000 connections
/// took 26 s. Ten times the connections must now cost about ten times the
/// time, not a hundred: the bound (40x) is wide enough that load on the
/// machine cannot make a linear compile fail it, and a quadratic one
/// cannot pass it.
#[test]
fn compile_time_grows_linearly_with_the_connections() {
    let (small, large) = (connections(1_500), connections(15_000));
    let out = compile(&large).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.system.connections.len(), 15_000);
    assert_eq!(out.spec.components.len(), 10_001);
    let t_small = fastest_compile(&small, 3);
    let t_large = fastest_compile(&large, 1);
    assert!(t_large < 40.0 * t_small.max(0.001), "1 500 connections: {t_small:.3} s, 15 000: {t_large:.3} s");
}
