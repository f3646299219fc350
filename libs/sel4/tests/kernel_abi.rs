//! Checks the hand-written ABI against the seL4 5.0.0 source tree named by
//! `SEL4_SOURCE` (the directory holding `libsel4/` and `include/`), with the
//! configuration read from the project's `kernel-config/`.
//!
//! Re-derived here, the way the kernel's generators do it:
//! - invocation labels (`invocation_header_gen.py`), evaluating each
//!   method's `condition` against our configuration;
//! - syscall numbers (`syscall_header_gen.py`);
//! - object type numbers (the `objecttype.h` enums with their `#ifdef`s);
//! - the message layout of every invocation (`syscall_stub_gen.py`'s packing
//!   rules), compared with `sel4::invocation::encode`.
//!
//! A missing `SEL4_SOURCE` or file is a failure, not a skip: these checks
//! are the only guard against a silently wrong ABI.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use sel4::invocation::encode::{self, Invocation};
use sel4::invocation::labels;
use sel4::{CapData, CapRights, ObjectType, PrioProps, UserContext, VmAttributes, Word};

// ---------------------------------------------------------------------------
// Locating inputs

fn sel4_source() -> PathBuf {
    let dir = std::env::var_os("SEL4_SOURCE").unwrap_or_else(|| {
        panic!(
            "SEL4_SOURCE is not set: point it at the seL4 5.0.0 source tree \
             (the directory containing libsel4/ and include/, e.g. /tmp/kb/src)"
        )
    });
    PathBuf::from(dir)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e} (is SEL4_SOURCE right?)", path.display()))
}

fn interface_files() -> [PathBuf; 3] {
    let src = sel4_source();
    // The order matters: generic, then sel4_arch (x86_64), then arch (x86).
    [
        src.join("libsel4/include/interfaces/sel4.xml"),
        src.join("libsel4/sel4_arch_include/x86_64/interfaces/sel4arch.xml"),
        src.join("libsel4/arch_include/x86/interfaces/sel4arch.xml"),
    ]
}

/// `#define NAME VALUE` lines of the project's kernel configuration (the
/// debug variant; labels and object types do not depend on the variant).
fn kernel_config() -> HashMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel-config");
    let mut defs = HashMap::new();
    for f in ["common.h", "pc99-debug.h"] {
        for line in read(&dir.join(f)).lines() {
            let mut it = line.split_whitespace();
            if it.next() == Some("#define") {
                if let Some(name) = it.next() {
                    defs.insert(name.to_string(), it.collect::<Vec<_>>().join(" "));
                }
            }
        }
    }
    assert!(defs.contains_key("CONFIG_ARCH_X86_64"), "kernel-config/common.h does not look like our configuration");
    defs
}

// ---------------------------------------------------------------------------
// A minimal XML reader: elements and attributes only, which is all the
// interface files use. Attribute values may contain '>' (conditions do).

#[derive(Debug, Clone)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Element>,
}

impl Element {
    fn attr(&self, k: &str) -> &str {
        self.attrs.get(k).map(String::as_str).unwrap_or("")
    }

    /// All descendants named `name`, in document order (like minidom's
    /// getElementsByTagName, which the generators use).
    fn descendants<'a>(&'a self, name: &str, out: &mut Vec<&'a Element>) {
        for c in &self.children {
            if c.name == name {
                out.push(c);
            }
            c.descendants(name, out);
        }
    }

    fn all(&self, name: &str) -> Vec<&Element> {
        let mut v = Vec::new();
        self.descendants(name, &mut v);
        v
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

fn parse_xml(text: &str) -> Element {
    let b = text.as_bytes();
    let mut i = 0;
    let mut stack = vec![Element { name: "#document".into(), attrs: BTreeMap::new(), children: vec![] }];
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        if text[i..].starts_with("<!--") {
            i += text[i..].find("-->").expect("unterminated comment") + 3;
            continue;
        }
        if text[i..].starts_with("<?") || text[i..].starts_with("<!") {
            i += text[i..].find('>').expect("unterminated declaration") + 1;
            continue;
        }
        if text[i..].starts_with("</") {
            let end = i + text[i..].find('>').expect("unterminated end tag");
            let name = text[i + 2..end].trim();
            let el = stack.pop().unwrap();
            assert_eq!(el.name, name, "mismatched XML end tag");
            stack.last_mut().unwrap().children.push(el);
            i = end + 1;
            continue;
        }
        // Start tag: name, then attributes until '>' or '/>' outside quotes.
        i += 1;
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' && b[i] != b'/' {
            i += 1;
        }
        let name = text[start..i].to_string();
        let mut attrs = BTreeMap::new();
        let self_closing;
        loop {
            while b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b[i] == b'>' {
                self_closing = false;
                i += 1;
                break;
            }
            if b[i] == b'/' {
                assert_eq!(b[i + 1], b'>');
                self_closing = true;
                i += 2;
                break;
            }
            let ks = i;
            while b[i] != b'=' && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            let key = text[ks..i].to_string();
            while b[i] != b'=' {
                i += 1;
            }
            i += 1;
            while b[i].is_ascii_whitespace() {
                i += 1;
            }
            let q = b[i];
            assert!(q == b'"' || q == b'\'', "unquoted attribute in <{name}>");
            let vs = i + 1;
            let ve = vs + text[vs..].find(q as char).expect("unterminated attribute");
            attrs.insert(key, unescape(&text[vs..ve]));
            i = ve + 1;
        }
        let el = Element { name, attrs, children: vec![] };
        if self_closing {
            stack.last_mut().unwrap().children.push(el);
        } else {
            stack.push(el);
        }
    }
    assert_eq!(stack.len(), 1, "unclosed XML elements");
    stack.pop().unwrap()
}

// ---------------------------------------------------------------------------
// C preprocessor conditions as they appear in the XML and headers:
// defined(X), defined X, !, &&, ||, parentheses, comparisons, integers.

struct CondEval<'a> {
    toks: Vec<String>,
    pos: usize,
    config: &'a HashMap<String, String>,
}

impl<'a> CondEval<'a> {
    fn eval(expr: &str, config: &'a HashMap<String, String>) -> bool {
        let mut toks = Vec::new();
        let cs: Vec<char> = expr.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_alphanumeric() || c == '_' {
                let s = i;
                while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                    i += 1;
                }
                toks.push(cs[s..i].iter().collect());
            } else {
                let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
                if ["&&", "||", "==", "!=", ">=", "<="].contains(&two.as_str()) {
                    toks.push(two);
                    i += 2;
                } else {
                    toks.push(c.to_string());
                    i += 1;
                }
            }
        }
        let mut e = CondEval { toks, pos: 0, config };
        let v = e.or();
        assert_eq!(e.pos, e.toks.len(), "cannot evaluate condition {expr:?}");
        v != 0
    }

    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }

    fn next(&mut self) -> String {
        let t = self.toks.get(self.pos).cloned().expect("condition ended early");
        self.pos += 1;
        t
    }

    fn or(&mut self) -> i64 {
        let mut v = self.and();
        while self.peek() == Some("||") {
            self.pos += 1;
            let r = self.and();
            v = ((v != 0) || (r != 0)) as i64;
        }
        v
    }

    fn and(&mut self) -> i64 {
        let mut v = self.cmp();
        while self.peek() == Some("&&") {
            self.pos += 1;
            let r = self.cmp();
            v = ((v != 0) && (r != 0)) as i64;
        }
        v
    }

    fn cmp(&mut self) -> i64 {
        let l = self.unary();
        match self.peek() {
            Some(op @ (">" | "<" | ">=" | "<=" | "==" | "!=")) => {
                let op = op.to_string();
                self.pos += 1;
                let r = self.unary();
                (match op.as_str() {
                    ">" => l > r,
                    "<" => l < r,
                    ">=" => l >= r,
                    "<=" => l <= r,
                    "==" => l == r,
                    _ => l != r,
                }) as i64
            }
            _ => l,
        }
    }

    fn unary(&mut self) -> i64 {
        let t = self.next();
        match t.as_str() {
            "!" => (self.unary() == 0) as i64,
            "(" => {
                let v = self.or();
                assert_eq!(self.next(), ")");
                v
            }
            "defined" => {
                let paren = self.peek() == Some("(");
                if paren {
                    self.pos += 1;
                }
                let name = self.next();
                if paren {
                    assert_eq!(self.next(), ")");
                }
                self.config.contains_key(&name) as i64
            }
            _ if t.chars().next().unwrap().is_ascii_digit() => t.parse().expect("bad number in condition"),
            // An undefined macro is 0 in #if, as in cpp.
            _ => self.config.get(&t).map(|v| v.parse().unwrap_or(1)).unwrap_or(0),
        }
    }
}

// ---------------------------------------------------------------------------
// Invocation labels

/// XML method id -> label, as invocation_header_gen.py numbers them for our
/// configuration. Also returns the three `n*InvocationLabels` values.
fn derive_labels() -> (BTreeMap<String, Word>, [Word; 3]) {
    let config = kernel_config();
    let mut map = BTreeMap::new();
    let mut next: Word = 1; // 0 is InvalidInvocation
    let mut ends = [0; 3];
    for (n, path) in interface_files().iter().enumerate() {
        let doc = parse_xml(&read(path));
        let methods = doc.all("method");
        assert!(!methods.is_empty(), "{} has no methods", path.display());
        for (k, m) in methods.iter().enumerate() {
            let cond = m.attr("condition");
            // The generator refuses a conditional first label in the arch files.
            assert!(!(n > 0 && k == 0 && !cond.is_empty()), "first arch label is conditional");
            if cond.is_empty() || CondEval::eval(cond, &config) {
                let id = m.attr("id").to_string();
                assert!(map.insert(id.clone(), next).is_none(), "duplicate method id {id}");
                next += 1;
            }
        }
        ends[n] = next;
    }
    (map, ends)
}

#[test]
fn invocation_labels_match_interface_xml() {
    let (derived, ends) = derive_labels();
    let mut ours = BTreeMap::new();
    for &(id, value) in labels::ALL {
        assert!(ours.insert(id.to_string(), value).is_none(), "label {id} listed twice");
        match derived.get(id) {
            Some(&d) => assert_eq!(value, d, "label of {id}: ours {value}, 5.0 XML {d}"),
            None => panic!("label {id} is not a method of this configuration"),
        }
    }
    // Every configured method has a constant, so nothing is silently missing.
    let missing: Vec<_> = derived.keys().filter(|k| !ours.contains_key(*k)).collect();
    assert!(missing.is_empty(), "methods without a label constant: {missing:?}");
    assert_eq!(
        [labels::N_INVOCATION_LABELS, labels::N_SEL4_ARCH_INVOCATION_LABELS, labels::N_ARCH_INVOCATION_LABELS],
        ends
    );
}

// ---------------------------------------------------------------------------
// Syscall numbers

#[test]
fn syscall_numbers_match_syscall_xml() {
    let doc = parse_xml(&read(&sel4_source().join("libsel4/include/api/syscall.xml")));
    // The kernel tree's copy must be the same list.
    let kdoc = parse_xml(&read(&sel4_source().join("include/api/syscall.xml")));
    let names = |d: &Element| -> Vec<String> {
        let mut v = Vec::new();
        for section in ["api", "debug"] {
            for s in d.all(section) {
                for c in s.all("syscall") {
                    v.push(c.attr("name").to_string());
                }
            }
        }
        v
    };
    let list = names(&doc);
    assert_eq!(list, names(&kdoc), "libsel4 and kernel syscall.xml differ");
    // Numbers count down from -1 through the api list then the debug list;
    // conditions only hide names, they do not renumber.
    let derived: HashMap<String, isize> = list.iter().enumerate().map(|(i, n)| (n.clone(), -1 - i as isize)).collect();
    use sel4::syscalls::id;
    let ours = [
        ("Call", id::CALL),
        ("ReplyRecv", id::REPLY_RECV),
        ("Send", id::SEND),
        ("NBSend", id::NB_SEND),
        ("Recv", id::RECV),
        ("Reply", id::REPLY),
        ("Yield", id::YIELD),
        ("NBRecv", id::NB_RECV),
        ("DebugPutChar", id::DEBUG_PUT_CHAR),
        ("DebugHalt", id::DEBUG_HALT),
        ("DebugCapIdentify", id::DEBUG_CAP_IDENTIFY),
        ("DebugSnapshot", id::DEBUG_SNAPSHOT),
        ("DebugNameThread", id::DEBUG_NAME_THREAD),
        ("DebugRun", id::DEBUG_RUN),
        ("BenchmarkFlushCaches", id::BENCHMARK_FLUSH_CACHES),
        ("BenchmarkResetLog", id::BENCHMARK_RESET_LOG),
        ("BenchmarkFinalizeLog", id::BENCHMARK_FINALIZE_LOG),
        ("BenchmarkSetLogBuffer", id::BENCHMARK_SET_LOG_BUFFER),
        ("BenchmarkNullSyscall", id::BENCHMARK_NULL_SYSCALL),
        ("BenchmarkGetThreadUtilisation", id::BENCHMARK_GET_THREAD_UTILISATION),
        ("BenchmarkResetThreadUtilisation", id::BENCHMARK_RESET_THREAD_UTILISATION),
        ("VMEnter", id::VM_ENTER),
    ];
    for (name, value) in ours {
        assert_eq!(Some(&value), derived.get(name), "syscall {name}");
    }
    assert_eq!(ours.len(), derived.len(), "syscall.xml has syscalls we do not know");

    // The debug syscalls the `debug` feature uses exist in a debug build,
    // and so do the benchmark ones (per-thread CPU time for the
    // supervisor's liveness check, kernel-config/pc99-debug.h).
    let config = kernel_config();
    for s in doc.all("debug")[0].all("config") {
        let on = CondEval::eval(s.attr("condition"), &config);
        for c in s.all("syscall") {
            let name = c.attr("name");
            let expect_on = (name.starts_with("Debug") && name != "DebugRun") || name.starts_with("Benchmark");
            assert_eq!(on, expect_on, "debug syscall {} availability", c.attr("name"));
        }
    }
}

// ---------------------------------------------------------------------------
// Object types

/// Enumerators of the `objecttype.h` enums, with `#ifdef`/`#ifndef`/`#if`
/// evaluated, numbered as C does.
fn derive_object_types() -> HashMap<String, i64> {
    let config = kernel_config();
    let src = sel4_source();
    let mut values: HashMap<String, i64> = HashMap::new();
    for f in [
        "libsel4/include/sel4/objecttype.h",
        "libsel4/sel4_arch_include/x86_64/sel4/sel4_arch/objecttype.h",
        "libsel4/arch_include/x86/sel4/arch/objecttype.h",
    ] {
        let text = read(&src.join(f));
        let mut active: Vec<bool> = vec![];
        let mut in_enum = false;
        let mut next = 0i64;
        for raw in text.lines() {
            let line = raw.split("/*").next().unwrap().trim();
            let on = active.iter().all(|&a| a);
            if let Some(rest) = line.strip_prefix("#ifdef") {
                active.push(config.contains_key(rest.trim()));
            } else if let Some(rest) = line.strip_prefix("#ifndef") {
                active.push(!config.contains_key(rest.trim()));
            } else if let Some(rest) = line.strip_prefix("#if ") {
                active.push(CondEval::eval(rest, &config));
            } else if line.starts_with("#else") {
                let top = active.pop().unwrap();
                active.push(!top);
            } else if line.starts_with("#endif") {
                active.pop();
            } else if !on || line.starts_with('#') {
                continue;
            } else if line.contains("enum") && line.contains('{') {
                in_enum = true;
                next = 0;
            } else if in_enum && line.starts_with('}') {
                in_enum = false;
            } else if in_enum && !line.is_empty() {
                let entry = line.trim_end_matches(',');
                let (name, v) = match entry.split_once('=') {
                    Some((n, v)) => {
                        let v = v.trim();
                        (n.trim(), values.get(v).copied().unwrap_or_else(|| v.parse().expect(v)))
                    }
                    None => (entry, next),
                };
                values.insert(name.to_string(), v);
                next = v + 1;
            }
        }
    }
    values
}

#[test]
fn object_types_match_headers() {
    let derived = derive_object_types();
    let ours = [
        ("seL4_UntypedObject", ObjectType::Untyped),
        ("seL4_TCBObject", ObjectType::Tcb),
        ("seL4_EndpointObject", ObjectType::Endpoint),
        ("seL4_NotificationObject", ObjectType::Notification),
        ("seL4_CapTableObject", ObjectType::CapTable),
        ("seL4_X86_PDPTObject", ObjectType::X86Pdpt),
        ("seL4_X64_PML4Object", ObjectType::X64Pml4),
        ("seL4_X86_4K", ObjectType::X86_4K),
        ("seL4_X86_LargePageObject", ObjectType::X86LargePage),
        ("seL4_X86_PageTableObject", ObjectType::X86PageTable),
        ("seL4_X86_PageDirectoryObject", ObjectType::X86PageDirectory),
    ];
    for (name, ty) in ours {
        assert_eq!(derived.get(name), Some(&(ty as i64)), "object type {name}");
    }
    assert_eq!(derived["seL4_ObjectTypeCount"], ObjectType::COUNT as i64);
    // Objects this configuration leaves out must not be in the enums.
    for absent in ["seL4_X64_HugePageObject", "seL4_X86_IOPageTableObject", "seL4_X86_VCPUObject"] {
        assert!(!derived.contains_key(absent), "{absent} is configured in, ObjectType lacks it");
    }
}

// ---------------------------------------------------------------------------
// Invocation encodings

#[derive(Clone, Debug)]
enum Arg {
    W(Word),
    Struct(Vec<Word>),
}

/// Size in bits of a parameter type, or None for capability types; the
/// table of syscall_stub_gen.py for x86_64.
fn type_bits(ty: &str) -> Option<u32> {
    Some(match ty {
        "int" | "seL4_Uint32" => 32,
        "seL4_Uint8" => 8,
        "seL4_Uint16" => 16,
        "seL4_Uint64" | "seL4_Word" | "long" => 64,
        "seL4_Bool" => 1,
        "seL4_CapData_t" | "seL4_PrioProps_t" | "seL4_CapRights_t" | "seL4_X86_VMAttributes" => 64,
        "seL4_UserContext" => 64 * 19,
        "seL4_VCPUContext" => 64 * 7,
        "seL4_CPtr"
        | "seL4_CNode"
        | "seL4_IRQHandler"
        | "seL4_IRQControl"
        | "seL4_TCB"
        | "seL4_Untyped"
        | "seL4_DomainSet"
        | "seL4_X86_IOPort"
        | "seL4_X86_ASIDControl"
        | "seL4_X86_ASIDPool"
        | "seL4_X86_IOSpace"
        | "seL4_X86_Page"
        | "seL4_X64_PML4"
        | "seL4_X86_PDPT"
        | "seL4_X86_PageDirectory"
        | "seL4_X86_PageTable"
        | "seL4_X86_IOPageTable"
        | "seL4_X86_VCPU"
        | "seL4_X86_EPTPML4"
        | "seL4_X86_EPTPDPT"
        | "seL4_X86_EPTPD"
        | "seL4_X86_EPTPT" => return None,
        other => panic!("unknown parameter type {other} in the XML"),
    })
}

struct Interfaces {
    docs: Vec<Element>,
}

impl Interfaces {
    fn load() -> Self {
        Interfaces { docs: interface_files().iter().map(|p| parse_xml(&read(p))).collect() }
    }

    fn method(&self, interface: &str, name: &str) -> Element {
        let mut found = vec![];
        for d in &self.docs {
            for i in d.all("interface") {
                if i.attr("name") == interface {
                    for m in i.all("method") {
                        if m.attr("name") == name {
                            found.push(m.clone());
                        }
                    }
                }
            }
        }
        assert_eq!(found.len(), 1, "method {interface}_{name} not found exactly once");
        found.pop().unwrap()
    }

    /// What syscall_stub_gen.py would send for this method with these
    /// argument values: (label id, extra caps, message words).
    fn expected(&self, interface: &str, name: &str, args: &[(&str, Arg)]) -> (String, Vec<Word>, Vec<Word>) {
        let m = self.method(interface, name);
        let args: HashMap<&str, &Arg> = args.iter().map(|(k, v)| (*k, v)).collect();
        let params: Vec<&Element> = m.all("param").into_iter().filter(|p| p.attr("dir") == "in").collect();
        assert_eq!(
            params.len(),
            args.len(),
            "{interface}_{name}: test gives {} args, XML has {}",
            args.len(),
            params.len()
        );
        let mut caps = vec![];
        let mut words: Vec<Word> = vec![];
        let mut bit: u32 = 0;
        for p in params {
            let pname = p.attr("name");
            let arg = args.get(pname).unwrap_or_else(|| panic!("{interface}_{name}: no test value for {pname}"));
            match type_bits(p.attr("type")) {
                None => match arg {
                    Arg::W(v) => caps.push(*v),
                    Arg::Struct(_) => panic!("cap {pname} given as struct"),
                },
                Some(size) => {
                    let align = size.min(64);
                    bit = bit.div_ceil(align) * align;
                    let (w, off) = ((bit / 64) as usize, bit % 64);
                    let vals = match arg {
                        Arg::W(v) => vec![*v],
                        Arg::Struct(v) => v.clone(),
                    };
                    assert_eq!(vals.len() as u32, size.div_ceil(64), "{pname}: wrong number of words");
                    for (k, v) in vals.iter().enumerate() {
                        while words.len() <= w + k {
                            words.push(0);
                        }
                        let masked = if size < 64 { v & ((1 << size) - 1) } else { *v };
                        assert_eq!(masked, *v, "{pname}: test value does not fit its type");
                        words[w + k] |= masked << off;
                    }
                    bit += size;
                }
            }
        }
        (m.attr("id").to_string(), caps, words)
    }
}

/// (interface, method, XML argument values, our encoding).
type Case = (&'static str, &'static str, Vec<(&'static str, Arg)>, Invocation);

fn w(v: Word) -> Arg {
    Arg::W(v)
}

fn b(v: bool) -> Arg {
    Arg::W(v as Word)
}

#[test]
fn invocation_encodings_match_stub_generator() {
    let xml = Interfaces::load();
    let (label_of, _) = derive_labels();
    let regs = UserContext::from_words(&std::array::from_fn(|i| 0x1000 + i as Word));
    let rights = CapRights::new(true, false, true);
    let rw = CapRights::read_write();
    let badge = CapData::badge(0xabc);
    let guard = CapData::guard(0x5, 0x7);
    let prio = PrioProps::new(200, 150);
    let attr = VmAttributes::WriteCombining;

    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("seL4_Untyped", "Retype",
            vec![("type", w(5)), ("size_bits", w(0x11)), ("root", w(0x22)), ("node_index", w(0x33)),
                 ("node_depth", w(0x44)), ("node_offset", w(0x55)), ("num_objects", w(0x66))],
            encode::untyped_retype(ObjectType::X86Pdpt, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66)),
        ("seL4_TCB", "ReadRegisters",
            vec![("suspend_source", b(true)), ("arch_flags", w(0x5a)), ("count", w(19))],
            encode::tcb_read_registers(true, 0x5a, 19)),
        ("seL4_TCB", "WriteRegisters",
            vec![("resume_target", b(true)), ("arch_flags", w(0xa5)), ("count", w(17)),
                 ("regs", Arg::Struct(regs.to_words().to_vec()))],
            encode::tcb_write_registers(true, 0xa5, 17, &regs)),
        ("seL4_TCB", "CopyRegisters",
            vec![("source", w(0x77)), ("suspend_source", b(true)), ("resume_target", b(false)),
                 ("transfer_frame", b(true)), ("transfer_integer", b(true)), ("arch_flags", w(0x3c))],
            encode::tcb_copy_registers(0x77, true, false, true, true, 0x3c)),
        ("seL4_TCB", "Configure",
            vec![("fault_ep", w(0x101)), ("priority", w(prio.into_word())), ("cspace_root", w(0x102)),
                 ("cspace_root_data", w(guard.into_word())), ("vspace_root", w(0x103)),
                 ("vspace_root_data", w(0x104)), ("buffer", w(0x7000_0000)), ("bufferFrame", w(0x105))],
            encode::tcb_configure(0x101, prio, 0x102, guard.into_word(), 0x103, 0x104, 0x7000_0000, 0x105)),
        ("seL4_TCB", "SetPriority", vec![("priority", w(254))], encode::tcb_set_priority(254)),
        ("seL4_TCB", "SetMCPriority", vec![("mcp", w(253))], encode::tcb_set_mc_priority(253)),
        ("seL4_TCB", "SetIPCBuffer", vec![("buffer", w(0x8000)), ("bufferFrame", w(0x33))],
            encode::tcb_set_ipc_buffer(0x8000, 0x33)),
        ("seL4_TCB", "SetSpace",
            vec![("fault_ep", w(0x9)), ("cspace_root", w(0xa)), ("cspace_root_data", w(guard.into_word())),
                 ("vspace_root", w(0xb)), ("vspace_root_data", w(0xc))],
            encode::tcb_set_space(0x9, 0xa, guard.into_word(), 0xb, 0xc)),
        ("seL4_TCB", "Suspend", vec![], encode::tcb_suspend()),
        ("seL4_TCB", "Resume", vec![], encode::tcb_resume()),
        ("seL4_TCB", "BindNotification", vec![("notification", w(0x44))], encode::tcb_bind_notification(0x44)),
        ("seL4_TCB", "UnbindNotification", vec![], encode::tcb_unbind_notification()),
        ("seL4_CNode", "Revoke", vec![("index", w(0x1234)), ("depth", w(16))], encode::cnode_revoke(0x1234, 16)),
        ("seL4_CNode", "Delete", vec![("index", w(0x1235)), ("depth", w(17))], encode::cnode_delete(0x1235, 17)),
        ("seL4_CNode", "CancelBadgedSends", vec![("index", w(0x1236)), ("depth", w(18))],
            encode::cnode_cancel_badged_sends(0x1236, 18)),
        ("seL4_CNode", "SaveCaller", vec![("index", w(0x1237)), ("depth", w(19))],
            encode::cnode_save_caller(0x1237, 19)),
        ("seL4_CNode", "Copy",
            vec![("dest_index", w(0x10)), ("dest_depth", w(16)), ("src_root", w(0x2)), ("src_index", w(0x20)),
                 ("src_depth", w(15)), ("rights", w(rights.into_word()))],
            encode::cnode_copy(0x10, 16, 0x2, 0x20, 15, rights)),
        ("seL4_CNode", "Mint",
            vec![("dest_index", w(0x11)), ("dest_depth", w(14)), ("src_root", w(0x3)), ("src_index", w(0x21)),
                 ("src_depth", w(13)), ("rights", w(rw.into_word())), ("badge", w(badge.into_word()))],
            encode::cnode_mint(0x11, 14, 0x3, 0x21, 13, rw, badge.into_word())),
        ("seL4_CNode", "Move",
            vec![("dest_index", w(0x12)), ("dest_depth", w(12)), ("src_root", w(0x4)), ("src_index", w(0x22)),
                 ("src_depth", w(11))],
            encode::cnode_move(0x12, 12, 0x4, 0x22, 11)),
        ("seL4_CNode", "Mutate",
            vec![("dest_index", w(0x13)), ("dest_depth", w(10)), ("src_root", w(0x5)), ("src_index", w(0x23)),
                 ("src_depth", w(9)), ("badge", w(badge.into_word()))],
            encode::cnode_mutate(0x13, 10, 0x5, 0x23, 9, badge.into_word())),
        ("seL4_CNode", "Rotate",
            vec![("dest_index", w(0x14)), ("dest_depth", w(8)), ("dest_badge", w(0x15)), ("pivot_root", w(0x6)),
                 ("pivot_index", w(0x16)), ("pivot_depth", w(7)), ("pivot_badge", w(0x17)), ("src_root", w(0x7)),
                 ("src_index", w(0x18)), ("src_depth", w(6))],
            encode::cnode_rotate(0x14, 8, 0x15, 0x6, 0x16, 7, 0x17, 0x7, 0x18, 6)),
        ("seL4_IRQControl", "Get",
            vec![("irq", w(0x7fff_fff1)), ("root", w(0x2)), ("index", w(0x300)), ("depth", w(16))],
            encode::irq_control_get(0x7fff_fff1, 0x2, 0x300, 16)),
        ("seL4_IRQHandler", "Ack", vec![], encode::irq_handler_ack()),
        ("seL4_IRQHandler", "SetNotification", vec![("notification", w(0x55))],
            encode::irq_handler_set_notification(0x55)),
        ("seL4_IRQHandler", "Clear", vec![], encode::irq_handler_clear()),
        ("seL4_DomainSet", "Set", vec![("domain", w(3)), ("thread", w(0x66))], encode::domain_set_set(3, 0x66)),
        ("seL4_X86_PDPT", "Map", vec![("pml4", w(0x3)), ("vaddr", w(0x80_0000_0000)), ("attr", w(attr as Word))],
            encode::x86_pdpt_map(0x3, 0x80_0000_0000, attr)),
        ("seL4_X86_PDPT", "Unmap", vec![], encode::x86_pdpt_unmap()),
        ("seL4_X86_PageDirectory", "Map",
            vec![("vroot", w(0x3)), ("vaddr", w(0x4000_0000)), ("attr", w(VmAttributes::CacheDisabled as Word))],
            encode::x86_page_directory_map(0x3, 0x4000_0000, VmAttributes::CacheDisabled)),
        ("seL4_X86_PageDirectory", "Unmap", vec![], encode::x86_page_directory_unmap()),
        ("seL4_X86_PageDirectory", "GetStatusBits", vec![("vaddr", w(0x40_1000))],
            encode::x86_page_directory_get_status_bits(0x40_1000)),
        ("seL4_X86_PageTable", "Map",
            vec![("vroot", w(0x3)), ("vaddr", w(0x20_0000)), ("attr", w(VmAttributes::WriteThrough as Word))],
            encode::x86_page_table_map(0x3, 0x20_0000, VmAttributes::WriteThrough)),
        ("seL4_X86_PageTable", "Unmap", vec![], encode::x86_page_table_unmap()),
        ("seL4_X86_IOPageTable", "Map", vec![("iospace", w(0x8)), ("ioaddr", w(0x1000))],
            encode::x86_io_page_table_map(0x8, 0x1000)),
        ("seL4_X86_IOPageTable", "Unmap", vec![], encode::x86_io_page_table_unmap()),
        ("seL4_X86_Page", "Map",
            vec![("vroot", w(0x3)), ("vaddr", w(0x40_0000)), ("rights", w(rw.into_word())),
                 ("attr", w(VmAttributes::Uncacheable as Word))],
            encode::x86_page_map(0x3, 0x40_0000, rw, VmAttributes::Uncacheable)),
        ("seL4_X86_Page", "Remap",
            vec![("vroot", w(0x3)), ("rights", w(rights.into_word())), ("attr", w(attr as Word))],
            encode::x86_page_remap(0x3, rights, attr)),
        ("seL4_X86_Page", "Unmap", vec![], encode::x86_page_unmap()),
        ("seL4_X86_Page", "MapIO", vec![("iospace", w(0x8)), ("rights", w(rw.into_word())), ("ioaddr", w(0x2000))],
            encode::x86_page_map_io(0x8, rw, 0x2000)),
        ("seL4_X86_Page", "GetAddress", vec![], encode::x86_page_get_address()),
        ("seL4_X86_ASIDControl", "MakePool",
            vec![("untyped", w(0x30)), ("root", w(0x2)), ("index", w(0x31)), ("depth", w(16))],
            encode::x86_asid_control_make_pool(0x30, 0x2, 0x31, 16)),
        ("seL4_X86_ASIDPool", "Assign", vec![("vroot", w(0x40))], encode::x86_asid_pool_assign(0x40)),
        ("seL4_X86_IOPort", "In8", vec![("port", w(0x3f8))], encode::x86_io_port_in8(0x3f8)),
        ("seL4_X86_IOPort", "In16", vec![("port", w(0xcfc))], encode::x86_io_port_in16(0xcfc)),
        ("seL4_X86_IOPort", "In32", vec![("port", w(0xcf8))], encode::x86_io_port_in32(0xcf8)),
        ("seL4_X86_IOPort", "Out8", vec![("port", w(0x3f9)), ("data", w(0x41))], encode::x86_io_port_out8(0x3f9, 0x41)),
        ("seL4_X86_IOPort", "Out16", vec![("port", w(0x1f0)), ("data", w(0xbeef))],
            encode::x86_io_port_out16(0x1f0, 0xbeef)),
        ("seL4_X86_IOPort", "Out32", vec![("port", w(0xcf8)), ("data", w(0x8000_0010))],
            encode::x86_io_port_out32(0xcf8, 0x8000_0010)),
        ("seL4_IRQControl", "GetIOAPIC",
            vec![("root", w(0x2)), ("index", w(0x200)), ("depth", w(16)), ("ioapic", w(0)), ("pin", w(4)),
                 ("level", w(1)), ("polarity", w(1)), ("vector", w(4))],
            encode::irq_control_get_ioapic(0x2, 0x200, 16, 0, 4, 1, 1, 4)),
        ("seL4_IRQControl", "GetMSI",
            vec![("root", w(0x2)), ("index", w(0x201)), ("depth", w(16)), ("pci_bus", w(1)), ("pci_dev", w(2)),
                 ("pci_func", w(3)), ("handle", w(7)), ("vector", w(9))],
            encode::irq_control_get_msi(0x2, 0x201, 16, 1, 2, 3, 7, 9)),
    ];

    let mut covered = BTreeSet::new();
    for (interface, name, args, ours) in &cases {
        let (id, caps, words) = xml.expected(interface, name, args);
        let what = format!("{interface}_{name}");
        assert_eq!(ours.label(), label_of[&id], "{what}: label");
        assert_eq!(ours.caps(), caps.as_slice(), "{what}: extra caps");
        assert_eq!(ours.words(), words.as_slice(), "{what}: message words");
        let info = ours.info();
        assert_eq!(
            (info.label(), info.caps_unwrapped(), info.extra_caps(), info.length()),
            (label_of[&id], 0, caps.len() as Word, words.len() as Word),
            "{what}: message info"
        );
        covered.insert(id);
    }
    let all: BTreeSet<String> = label_of.keys().cloned().collect();
    let untested: Vec<_> = all.difference(&covered).collect();
    assert!(untested.is_empty(), "methods without an encoding check: {untested:?}");
}

// ---------------------------------------------------------------------------
// Constants and layouts that the headers spell out as numbers

fn header_define(text: &str, name: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some("#define") && it.next() == Some(name)).then(|| {
            let v = it.next().unwrap().trim_matches(|c| c == '(' || c == ')');
            v.strip_prefix("0x").map(|h| i64::from_str_radix(h, 16).unwrap()).unwrap_or_else(|| v.parse().unwrap())
        })
    })
}

#[test]
fn size_constants_match_headers() {
    let text = read(&sel4_source().join("libsel4/sel4_arch_include/x86_64/sel4/sel4_arch/constants.h"));
    let pairs = [
        ("seL4_WordBits", sel4::WORD_BITS),
        ("seL4_PageBits", sel4::PAGE_BITS),
        ("seL4_SlotBits", sel4::SLOT_BITS),
        ("seL4_TCBBits", sel4::TCB_BITS),
        ("seL4_EndpointBits", sel4::ENDPOINT_BITS),
        ("seL4_NotificationBits", sel4::NOTIFICATION_BITS),
        ("seL4_PageTableBits", sel4::PAGE_TABLE_BITS),
        ("seL4_PageDirBits", sel4::PAGE_DIR_BITS),
        ("seL4_PDPTBits", sel4::PDPT_BITS),
        ("seL4_PML4Bits", sel4::PML4_BITS),
        ("seL4_IOPageTableBits", sel4::IO_PAGE_TABLE_BITS),
        ("seL4_LargePageBits", sel4::LARGE_PAGE_BITS),
        ("seL4_HugePageBits", sel4::HUGE_PAGE_BITS),
        ("seL4_ASIDPoolBits", sel4::ASID_POOL_BITS),
        ("seL4_MinUntypedBits", sel4::MIN_UNTYPED_BITS),
        ("seL4_MaxUntypedBits", sel4::MAX_UNTYPED_BITS),
    ];
    for (name, ours) in pairs {
        assert_eq!(header_define(&text, name), Some(ours as i64), "{name}");
    }
    let types = read(&sel4_source().join("libsel4/include/sel4/types.h"));
    assert_eq!(header_define(&types, "seL4_BadgeBits"), Some(sel4::BADGE_BITS as i64));
    assert_eq!(header_define(&types, "seL4_GuardBits"), Some(sel4::GUARD_BITS as i64));
    assert_eq!(header_define(&types, "seL4_UntypedRetypeMaxObjects"), Some(sel4::UNTYPED_RETYPE_MAX_OBJECTS as i64));

    let config = kernel_config();
    assert_eq!(config["CONFIG_MAX_NUM_BOOTINFO_UNTYPED_CAPS"], sel4::MAX_BOOTINFO_UNTYPED_CAPS.to_string());
    assert_eq!(config["CONFIG_ROOT_CNODE_SIZE_BITS"], sel4::ROOT_CNODE_SIZE_BITS.to_string());
    assert_eq!(config["CONFIG_NUM_PRIORITIES"], (sel4::MAX_PRIO + 1).to_string());
    assert!(config.contains_key("CONFIG_SYSCALL"), "the stubs use the syscall instruction");
    assert!(!config.contains_key("CONFIG_KERNEL_MCS"), "MCS changes TCB_Configure and the syscalls");
}

#[test]
fn initial_cap_slots_match_header() {
    let text = read(&sel4_source().join("libsel4/include/sel4/bootinfo_types.h"));
    let slot = |name: &str| -> i64 {
        let line =
            text.lines().find(|l| l.trim_start().starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}"));
        line.split('=').nth(1).unwrap().split(',').next().unwrap().trim().parse().unwrap()
    };
    let pairs = [
        ("seL4_CapNull", sel4::CAP_NULL),
        ("seL4_CapInitThreadTCB", sel4::CAP_INIT_THREAD_TCB),
        ("seL4_CapInitThreadCNode", sel4::CAP_INIT_THREAD_CNODE),
        ("seL4_CapInitThreadVSpace", sel4::CAP_INIT_THREAD_VSPACE),
        ("seL4_CapIRQControl", sel4::CAP_IRQ_CONTROL),
        ("seL4_CapASIDControl", sel4::CAP_ASID_CONTROL),
        ("seL4_CapInitThreadASIDPool", sel4::CAP_INIT_THREAD_ASID_POOL),
        ("seL4_CapIOPort", sel4::CAP_IO_PORT),
        ("seL4_CapIOSpace", sel4::CAP_IO_SPACE),
        ("seL4_CapBootInfoFrame", sel4::CAP_BOOT_INFO_FRAME),
        ("seL4_CapInitThreadIPCBuffer", sel4::CAP_INIT_THREAD_IPC_BUFFER),
        ("seL4_CapDomain", sel4::CAP_DOMAIN),
        ("seL4_NumInitialCaps", sel4::NUM_INITIAL_CAPS),
    ];
    for (name, ours) in pairs {
        assert_eq!(slot(name), ours as i64, "{name}");
    }
}

#[test]
fn xml_reader_handles_conditions_with_operators() {
    let doc = parse_xml(
        r#"<?xml version="1.0"?><!-- c --><api><method id="A" condition="X &gt; 1"/><method id='B'></method></api>"#,
    );
    let ms = doc.all("method");
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0].attr("condition"), "X > 1");
    let mut cfg = HashMap::new();
    cfg.insert("X".to_string(), "2".to_string());
    assert!(CondEval::eval("X > 1", &cfg));
    assert!(!CondEval::eval("defined(Y)", &cfg));
    assert!(CondEval::eval("defined X && !defined(Y)", &cfg));
    assert!(!CondEval::eval("Y", &cfg));
}
