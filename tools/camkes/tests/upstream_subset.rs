//! Behaviour of upstream's parser, checked against upstream's documentation
//! and sources, that this compiler must match for files in the subset: each case compiles, and
//! what it compiled to is checked, not only that it did.

use camkes::imports::MemoryFiles;
use std::path::Path;
use system_spec::{Binding, Rights};

fn compile_files(files: &[(&str, &str)]) -> camkes::Output {
    let mut memory = MemoryFiles::default();
    for (path, text) in files {
        memory.add(path, *text);
    }
    camkes::compile(Path::new(files[0].0), &[], &memory).unwrap_or_else(|e| panic!("{e}"))
}

fn compile(text: &str) -> camkes::Output {
    compile_files(&[("sys/main.camkes", text)])
}

const RPC: &str = "import <std_connector.camkes>;
procedure P { int f(in int a); }
component Client { control; uses P p; }
component Server { provides P p; }
";

#[test]
fn crlf_line_endings_read_as_newlines() {
    let text = format!("{RPC}assembly {{ composition {{\n component Client c; component Server s;\n connection seL4RPCCall r(from c.p, to s.p); }} }}\n")
        .replace('\n', "\r\n");
    let out = compile(&text);
    assert_eq!(out.spec.components.len(), 2);
    // Positions still count lines: an error on the third line is on line 3.
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", "import <std_connector.camkes>;\r\n\r\ncomponent C { uses Nope p; }\r\n");
    let e = camkes::compile(Path::new("sys/main.camkes"), &[], &files).unwrap_err();
    assert_eq!(e.line_col(), "3:20", "{e}");
}

#[test]
fn adjacent_strings_concatenate_in_imports_and_values() {
    let out = compile_files(&[
        (
            "sys/main.camkes",
            "import <std_connector.camkes>;\nimport \"if/\" \"P.idl4\";\ncomponent A { control; uses P p; attribute string s; }
component B { provides P p; }
assembly { composition { component A a; component B b; connection seL4RPCCall r(from a.p, to b.p); }
configuration { a.s = \"con\" \"cat\"; } }",
        ),
        ("sys/if/P.idl4", "procedure P { void f(); };"),
    ]);
    assert_eq!(out.system.procedure("P").unwrap().methods[0].name.text, "f");
    assert!(out.glue[0].1.contains("pub const S: &str = \"concat\";"));
}

#[test]
fn assemblies_may_be_named_and_several_merge_across_files() {
    let out = compile_files(&[
        (
            "sys/main.camkes",
            &format!(
                "{RPC}assembly top {{ composition {{ component Client c; }} }}\nimport \"more.camkes\";\nassembly {{ composition {{ connection seL4RPCCall r(from c.p, to s.p); }} configuration {{ c.priority = 9; }} }}"
            ),
        ),
        ("sys/more.camkes", "assembly second { composition { component Server s; } }"),
    ]);
    let names: Vec<&str> = out.spec.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["c", "s"]);
    assert_eq!(out.spec.component("c").unwrap().priority, 9);
}

#[test]
fn connection_ends_may_come_in_any_order() {
    let out = compile(&format!(
        "{RPC}assembly {{ composition {{ component Client c; component Server s; connection seL4RPCCall r(to s.p, from c.p); }} }}"
    ));
    let client = out.spec.component("c").unwrap();
    assert_eq!((client.caps[0].rights, client.caps[0].badge), (Rights::CALL, 1));
    assert_eq!(out.spec.component("s").unwrap().caps[0].rights, Rights::READ);
}

#[test]
fn procedure_syntax_variants() {
    let out = compile(
        "import <std_connector.camkes>;
procedure P {
    include <stdint.h>;
    int two(in int a, int b,);
    void none(void);
    void empty();;
};;
component A { control; uses P p; }
component B { provides P p; }
assembly { composition { component A a; component B b; connection seL4RPCCall r(from a.p, to b.p); } }",
    );
    let p = out.system.procedure("P").unwrap();
    let shape: Vec<(&str, usize)> = p.methods.iter().map(|m| (m.name.text.as_str(), m.params.len())).collect();
    assert_eq!(shape, [("two", 2), ("none", 0), ("empty", 0)]);
    // No direction means `in`: both are sent, by value.
    assert!(out.glue[0].1.contains("pub fn two(a: i32, b: i32) -> i32 {"), "{}", out.glue[0].1);
}

#[test]
fn provides_emits_and_maybe_interfaces_may_stay_unconnected() {
    let out = compile(
        "import <std_connector.camkes>;
procedure P { void f(); }
component A { control; provides P served; emits E e; maybe uses P p; maybe consumes E c; maybe dataport Buf d; }
assembly { composition { component A a; } }",
    );
    let a = out.spec.component("a").unwrap();
    assert!(a.interfaces.iter().all(|i| i.binding == Binding::Unconnected), "{:?}", a.interfaces);
    assert!(a.caps.is_empty() && a.mappings.is_empty());
}

#[test]
fn rpc_call_no_type_skips_the_type_check() {
    let out = compile(
        "import <std_connector.camkes>;
procedure P { void f(); }
procedure Q { void f(); }
component A { control; uses P p; }
component B { provides Q q; }
assembly { composition { component A a; component B b; connection seL4RPCCallNoType r(from a.p, to b.q); } }",
    );
    assert_eq!(out.spec.component("a").unwrap().caps[0].object, out.spec.component("b").unwrap().caps[0].object);
}

#[test]
fn literal_forms_fold_to_upstreams_values() {
    let out = compile(
        "import <std_connector.camkes>;
component A { control; attribute int64_t n[]; attribute string s[]; }
assembly { composition { component A a; } configuration {
    a.n = [0xFED00000, 0xfed00000, true, True, false, False, -0x10 + (1 << 12) * 2 % 7, 1 ? 2 : 3, ~0, !0, 3 >= 2 && 1, 2 ** 10,];
    a.s = [\"RW\", \"0x3f8:\" \"0x3ff\", \"no \\ escapes\"];
} }",
    );
    let glue = &out.glue[0].1;
    let expected = format!(
        "pub const N: &[i64] = &[{}, {}, 1, 1, 0, 0, {}, 2, -1, 1, 1, 1024];",
        0xFED0_0000u32,
        0xFED0_0000u32,
        -0x10 + ((1 << 12) * 2) % 7
    );
    assert!(glue.contains(&expected), "{glue}");
    assert!(glue.contains(r#"pub const S: &[&str] = &["RW", "0x3f8:0x3ff", "no \\ escapes"];"#), "{glue}");
}
