//! Per-component Rust glue: for each instantiated software component type,
//! one file `<elf>.rs` defining `pub mod glue` with one module per
//! interface. The slots and addresses come from [`TypeLayout`], the same
//! function that lays out the spec.
//!
//! RPC marshalling (both sides generated here, so they always agree):
//! * the method's index in the procedure is the message label;
//! * `in`, `refin` and `inout` scalars go in message registers in parameter
//!   order, one word each (MR0-3 in registers, the rest in the IPC buffer);
//! * an `in string` is a byte-length word followed by the bytes packed
//!   little-endian into words (at most [`MAX_STRING_BYTES`] each, and all
//!   arguments together within the 120 message registers: the client
//!   panics on a call that does not fit);
//! * the reply holds the return value (if any), then `out` and `inout`
//!   parameters in order; a reply label of 0 means success, 1 a rejected
//!   request (unknown method, short or malformed message).
//!
//! `out string`, `inout string`, array parameters and struct types are not
//! supported: [`check_supported`] reports them at their position.

mod peers;

use crate::ast::{Direction, InterfaceKind, Method, Param, Procedure};
use crate::check::{dataport_size, ComponentType, ConnectorKind, System};
use crate::diag::{err, Result};
use crate::spec::TypeLayout;
use std::fmt::Write;
use system_spec::Access;

/// The largest `in string` argument in bytes: 100 of the 120 message
/// registers, leaving room for the other arguments.
pub const MAX_STRING_BYTES: usize = 800;

/// The Rust type of a C scalar type name (as normalised by the parser).
pub fn rust_scalar(c_type: &str) -> Option<&'static str> {
    Some(match c_type {
        "int" | "int32_t" => "i32",
        "unsigned int" | "uint32_t" => "u32",
        "char" | "signed char" | "int8_t" => "i8",
        "unsigned char" | "uint8_t" => "u8",
        "int16_t" => "i16",
        "uint16_t" => "u16",
        "int64_t" => "i64",
        "uint64_t" | "seL4_Word" | "seL4_CPtr" => "u64",
        "size_t" | "uintptr_t" => "usize",
        "ssize_t" | "intptr_t" => "isize",
        "boolean" => "bool",
        "float" => "f32",
        "double" => "f64",
        _ => return None,
    })
}

const SUPPORTED: &str =
    "int, unsigned int, char, (u)int8/16/32/64_t, size_t, ssize_t, (u)intptr_t, bool, float, double, in string";

/// Rust keywords that the glue must spell as raw identifiers.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait",
    "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

fn ident(name: &str) -> String {
    if RUST_KEYWORDS.contains(&name) {
        format!("r#{name}")
    } else {
        name.to_string()
    }
}

fn is_string(param: &Param) -> bool {
    param.ty.text == "string"
}

fn check_method(method: &Method) -> Result<()> {
    if let Some(ret) = &method.ret {
        if rust_scalar(&ret.text).is_none() {
            return err(
                &ret.pos,
                format!("return type '{}' is not supported by the Rust glue (supported: {SUPPORTED})", ret.text),
            );
        }
    }
    for p in &method.params {
        if p.array {
            return err(
                &p.name.pos,
                format!(
                    "array parameter '{}[]' is not supported by the Rust glue; pass the data in a dataport",
                    p.name.text
                ),
            );
        }
        if is_string(p) {
            if matches!(p.direction, Direction::Out | Direction::Inout) {
                let dir = if p.direction == Direction::Out { "out" } else { "inout" };
                return err(&p.ty.pos, format!("'{dir} string' parameters are not supported by the Rust glue; return the data through a dataport"));
            }
        } else if rust_scalar(&p.ty.text).is_none() {
            return err(
                &p.ty.pos,
                format!("parameter type '{}' is not supported by the Rust glue (supported: {SUPPORTED})", p.ty.text),
            );
        }
    }
    if method.params.len() + 1 > 120 {
        return err(
            &method.name.pos,
            format!("method '{}' has too many parameters for the 120 message registers", method.name.text),
        );
    }
    Ok(())
}

/// Checks that every procedure the glue will marshal uses only what the
/// Rust glue supports. Run by `check` too, so `camkes check` catches it.
pub fn check_supported(system: &System) -> Result<()> {
    for component in system.components.iter().filter(|c| c.instantiated && !c.is_hardware()) {
        for (i, decl) in component.decl.interfaces.iter().enumerate() {
            if matches!(component.connectors[i], Some(ConnectorKind::RpcCall | ConnectorKind::RpcCallNoType)) {
                let procedure = system.procedure(&decl.type_name.text).expect("checked");
                for method in &procedure.methods {
                    check_method(method)?;
                }
            }
        }
    }
    Ok(())
}

/// Generates `(file name, contents)` for every instantiated software
/// component type. `source` names the assembly in the header comment.
pub fn generate(system: &System, source: &str) -> Result<Vec<(String, String)>> {
    check_supported(system)?;
    let spec_index = peers::spec_indices(system);
    let mut instances_of: Vec<Vec<usize>> = vec![Vec::new(); system.components.len()];
    for (index, inst) in system.instances.iter().enumerate() {
        instances_of[inst.component].push(index);
    }
    let typed = Typed { system, spec_index: &spec_index };
    Ok(system
        .components
        .iter()
        .enumerate()
        .filter(|(_, c)| c.instantiated && !c.is_hardware())
        .map(|(ci, c)| (format!("{}.rs", c.elf), component_glue(&typed, c, &instances_of[ci], source)))
        .collect())
}

/// What the glue of every type needs of the whole system.
struct Typed<'a> {
    system: &'a System,
    /// Per instance: its index in the spec (`None`: hardware).
    spec_index: &'a [Option<usize>],
}

/// How the glue reaches its support code: the `glue-rt` crate (one copy
/// for every component, instead of one per generated file).
const RUNTIME: &str = "
    /// Support code shared by the interface modules (the `glue-rt` crate).
    pub use ::glue_rt as rt;
";

/// The whole glue file of one component type: a header naming where it
/// came from, `mod glue` with the type's constants, its attributes and one
/// module per interface.
fn component_glue(typed: &Typed<'_>, component: &ComponentType, instances: &[usize], source: &str) -> String {
    let system = typed.system;
    let layout = TypeLayout::of(component);
    let mut out = String::new();
    header(&mut out, component, source);
    out.push_str(RUNTIME);
    attributes(&mut out, component);
    pools(&mut out, system, component);
    for i in 0..component.decl.interfaces.len() {
        interface_module(&mut out, typed, component, instances, &layout, i);
    }
    out.push_str("}\n");
    out
}

/// The file's header comment and the opening of `mod glue` with the
/// component type's own constants.
fn header(out: &mut String, component: &ComponentType, source: &str) {
    let name = &component.decl.name.text;
    let elf = &component.elf;
    let _ = write!(
        out,
        "// @generated by the Iolite camkes compiler from {source}. Do not edit.
//
// Glue for component type `{name}` (ELF `{elf}`). A component crate uses it with
//     include!(concat!(env!(\"IOLITE_GLUE_DIR\"), \"/{elf}.rs\"));
// which defines `glue`, with one module per interface.

/// The CAmkES glue of component type `{name}`: one module per interface.
#[allow(dead_code, unused_imports, unused_mut, unused_variables, clippy::all)]
pub mod glue {{
    /// The component type's name in the assembly.
    pub const COMPONENT_TYPE: &str = \"{name}\";
    /// The ELF (and `components/` folder) name.
    pub const ELF_NAME: &str = \"{elf}\";
    /// Whether the type is `control` (runs its own `run()`).
    pub const CONTROL: bool = {control};
",
        control = component.decl.control.is_some(),
    );
}

/// The module of interface `i`: what it was declared as and connected by,
/// its capability slot, and what its kind and connector give the code.
fn interface_module(
    out: &mut String,
    typed: &Typed<'_>,
    component: &ComponentType,
    instances: &[usize],
    layout: &TypeLayout,
    i: usize,
) {
    let system = typed.system;
    let decl = &component.decl.interfaces[i];
    let maybe = if decl.maybe { "maybe " } else { "" };
    let declared = format!("{maybe}{} {} {}", decl.kind.keyword(), decl.type_name.text, decl.name.text);
    let connector = component.connectors[i];
    let via = connector.map(|c| c.name()).unwrap_or("nothing (no instance connects it)");
    let _ = writeln!(out, "\n    /// `{declared};`, connected by {via}.");
    let _ = writeln!(out, "    pub mod {} {{", ident(&decl.name.text));
    let _ = writeln!(out, "        use super::rt;");
    if let Some(slot) = layout.slot[i] {
        let _ = writeln!(
            out,
            "        /// The CSpace slot of this interface's capability.\n        pub const SLOT: sel4::CPtr = {slot};"
        );
    }
    peers::peers(out, system, typed.spec_index, instances, i);
    let procedure = || system.procedure(&decl.type_name.text).expect("checked");
    match (decl.kind, connector) {
        (InterfaceKind::Uses, Some(ConnectorKind::HardwareIoPort)) => io_port_user(out),
        (InterfaceKind::Uses, _) => rpc_client(out, procedure()),
        (InterfaceKind::Provides, _) => {
            rpc_clients(out, system, instances, i);
            rpc_server(out, procedure())
        }
        (InterfaceKind::Emits, _) => emitter(out),
        (InterfaceKind::Consumes, _) => consumer(out, layout.irq_handler_slot[i], component.irq_badge[i]),
        (InterfaceKind::Dataport, _) => {
            dataport(out, layout.vaddr[i].expect("dataports have addresses"), dataport_size(decl), component.access[i])
        }
    }
    out.push_str("    }\n");
}

fn emitter(out: &mut String) {
    out.push_str(
        "        /// Signals the consumer (upstream's `<name>_emit()`).
        pub fn emit() {
            sel4::signal(SLOT)
        }
",
    );
}

/// `wait()` and `poll()`; for an interrupt (one with an IRQ handler slot)
/// also its badge bit and `acknowledge()`.
fn consumer(out: &mut String, irq_handler_slot: Option<u64>, badge: u64) {
    out.push_str(
        "        /// Blocks until the event arrives; returns the badge bits.
        pub fn wait() -> sel4::Word {
            sel4::wait(SLOT)
        }

        /// The badge bits of an event that already arrived, or 0.
        pub fn poll() -> sel4::Word {
            sel4::poll(SLOT)
        }
",
    );
    let Some(handler) = irq_handler_slot else { return };
    let _ = write!(
        out,
        "
        /// The CSpace slot of the IRQ handler capability.
        pub const IRQ_HANDLER_SLOT: sel4::CPtr = {handler};

        /// The badge bit `wait()`/`poll()` return when the interrupt fired.
        pub const BADGE: sel4::Word = {badge:#x};

        /// Re-enables the interrupt after handling it.
        pub fn acknowledge() -> sel4::Result<()> {{
            sel4::irq_handler_ack(IRQ_HANDLER_SLOT)
        }}
"
    );
}

/// Where the dataport is mapped, its size, and an accessor whose type
/// carries the rights the component has to it.
fn dataport(out: &mut String, vaddr: u64, size: u64, access: Access) {
    let (rights, what) = match access {
        Access::ReadOnly => ("ReadOnly", "read-only"),
        Access::ReadWrite => ("ReadWrite", "read-write"),
    };
    let _ = write!(
        out,
        "        /// The virtual address of the mapping.
        pub const VADDR: usize = {vaddr:#x};
        /// The size in bytes.
        pub const SIZE: usize = {size:#x};
        /// This component's rights to the dataport.
        pub type Rights = rt::{rights};

        /// The dataport, mapped {what}.
        pub fn get() -> rt::Dataport<rt::{rights}> {{
            // SAFETY: the loader maps SIZE bytes at VADDR with these rights
            // (system spec, same layout function).
            unsafe {{ rt::Dataport::new(VADDR, SIZE) }}
        }}
"
    );
}

/// `attribute T name = v;` and `instance.name = v;` become constants in
/// `glue::attributes`, named in upper case: integers as `i64` (`u64` for
/// unsigned types), strings as `&str`, arrays as slices. Attributes no
/// instance gives a value are left out.
fn attributes(out: &mut String, component: &ComponentType) {
    let _ =
        writeln!(out, "\n    /// The component's attributes, as the assembly sets them.\n    pub mod attributes {{");
    for (decl, value) in component.decl.attributes.iter().zip(&component.attribute_values) {
        let Some(value) = value else { continue };
        let unsigned = matches!(decl.ty.text.as_str(), "uint64_t" | "unsigned int" | "unsigned");
        let scalar = match decl.ty.text.as_str() {
            "string" => "&str",
            _ if unsigned => "u64",
            _ => "i64",
        };
        let literal = |v: &crate::ast::Value| match &v.kind {
            crate::ast::ValueKind::Str(text) => format!("{text:?}"),
            crate::ast::ValueKind::Int(n) => format!("{n}"),
            _ => "0".to_string(),
        };
        let (ty, text) = match &value.kind {
            crate::ast::ValueKind::List(items) => {
                (format!("&[{scalar}]"), format!("&[{}]", items.iter().map(literal).collect::<Vec<_>>().join(", ")))
            }
            _ => (scalar.to_string(), literal(value)),
        };
        let _ = writeln!(
            out,
            "        /// `attribute {} {}{};`\n        pub const {}: {ty} = {text};",
            decl.ty.text,
            decl.name.text,
            if decl.array { "[]" } else { "" },
            decl.name.text.to_uppercase()
        );
        if let Some(ids) = grant_ids(component, decl, value) {
            let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
            let _ = writeln!(
                out,
                "        /// `{}` as pool ids (`glue::pools`), for `Domain::set_peer_pools`.\n        pub const {}_IDS: &[u32] = &[{}];",
                decl.name.text,
                decl.name.text.to_uppercase(),
                ids.join(", ")
            );
        }
        if let Some((_, shares)) = component.per_client.iter().find(|(a, _)| *a == decl.name.text) {
            let shares: Vec<String> = shares.iter().map(|n| n.to_string()).collect();
            let _ = writeln!(
                out,
                "        /// `{}` in badge order (badge 1 first, as the server's `CLIENTS`).\n        pub const {}_BY_BADGE: &[i64] = &[{}];",
                decl.name.text,
                decl.name.text.to_uppercase(),
                shares.join(", ")
            );
        }
    }
    let _ = writeln!(out, "    }}");
}

/// A grant list (`<dp>_refs` of a dataport `<dp>`, see `crate::refs`) as
/// the derived ids of the pools it names, when every one is a connected
/// pool of the type (the compiler checked the list against the sender's
/// mappings); `None` for any other attribute.
fn grant_ids(
    component: &ComponentType,
    decl: &crate::ast::AttributeDecl,
    value: &crate::ast::Value,
) -> Option<Vec<u32>> {
    let dp = decl.name.text.strip_suffix("_refs")?;
    let channel = component.interface(dp)?;
    if component.decl.interfaces[channel].kind != InterfaceKind::Dataport {
        return None;
    }
    let crate::ast::ValueKind::List(names) = &value.kind else { return None };
    names
        .iter()
        .map(|name| match &name.kind {
            crate::ast::ValueKind::Str(name) => component.interface(name).and_then(|i| component.pool_ids[i]),
            _ => None,
        })
        .collect()
}

/// `glue::pools`: the IO-Lite pools of the type (`crate::pools`), one
/// constant per pool named after it, then `ALL`, every pool by name (for
/// the grant lists). Left out when the type maps no pool and has no
/// unconnected `maybe` dataport.
fn pools(out: &mut String, system: &System, component: &ComponentType) {
    let pools = component.glue_pools();
    if pools.is_empty() {
        return;
    }
    out.push_str(
        "
    /// The IO-Lite pools this component maps, with the ids the compiler
    /// derives from the assembly (`<connection>.pool = true`): the same at
    /// every end of a pool, each named after the pool (its connection and
    /// its dataport here, `glue::<name>`). A `maybe` dataport's id is an
    /// `Option`, `None` where the assembly leaves it unconnected.
    pub mod pools {
",
    );
    let mut all = Vec::new();
    for (i, id) in pools {
        let decl = &component.decl.interfaces[i];
        let name = &decl.name.text;
        let upper = name.to_uppercase();
        let Some(id) = id else {
            let _ = writeln!(
                out,
                "        /// `maybe dataport {name}`: not connected in this assembly.\n        pub const {upper}: Option<u32> = None;"
            );
            continue;
        };
        let rights = match component.access[i] {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        };
        let writers = crate::pools::writers(system, name).join("`, `");
        let (ty, value) = if decl.maybe { ("Option<u32>", format!("Some({id})")) } else { ("u32", id.to_string()) };
        let _ = writeln!(
            out,
            "        /// Pool `{name}`, written by `{writers}`; mapped here {rights}.\n        pub const {upper}: {ty} = {value};"
        );
        all.push(format!("            ({name:?}, {id}),\n"));
    }
    let _ = writeln!(
        out,
        "        /// Every pool above that the assembly connects, by name (what grant\n        /// lists name, `iolite::Domain::set_peer_pools_named`).\n        pub const {}: &[(&str, u32)] = &[\n{}        ];\n    }}",
        crate::check::POOL_TABLE,
        all.concat()
    );
}

fn io_port_user(out: &mut String) {
    for (bits, ty) in [(8, "u8"), (16, "u16"), (32, "u32")] {
        let _ = write!(
            out,
            "
        /// Reads a {bits}-bit value from `port` (must be in the granted range).
        pub fn in{bits}(port: u16) -> sel4::Result<{ty}> {{
            sel4::x86_io_port_in{bits}(SLOT, port)
        }}

        /// Writes a {bits}-bit value to `port` (must be in the granted range).
        pub fn out{bits}(port: u16, value: {ty}) -> sel4::Result<()> {{
            sel4::x86_io_port_out{bits}(SLOT, port, value)
        }}
"
        );
    }
}

fn encode(ty: &str, value: &str) -> String {
    match ty {
        "bool" => format!("{value} as sel4::Word"),
        "f32" => format!("{value}.to_bits() as sel4::Word"),
        "f64" => format!("{value}.to_bits() as sel4::Word"),
        _ => format!("{value} as sel4::Word"),
    }
}

fn decode(ty: &str, word: &str) -> String {
    match ty {
        "bool" => format!("{word} != 0"),
        "f32" => format!("f32::from_bits({word} as u32)"),
        "f64" => format!("f64::from_bits({word} as u64)"),
        _ => format!("{word} as {ty}"),
    }
}

fn signature(method: &Method, with_self: bool) -> String {
    let mut params: Vec<String> = Vec::new();
    if with_self {
        params.push("&mut self".to_string());
    }
    for p in &method.params {
        let name = ident(&p.name.text);
        let ty = if is_string(p) { "&str".to_string() } else { rust_scalar(&p.ty.text).expect("checked").to_string() };
        match p.direction {
            Direction::In | Direction::Refin => params.push(format!("{name}: {ty}")),
            Direction::Out | Direction::Inout => params.push(format!("{name}: &mut {ty}")),
        }
    }
    let ret = match &method.ret {
        Some(t) => format!(" -> {}", rust_scalar(&t.text).expect("checked")),
        None => String::new(),
    };
    format!("fn {}({}){ret}", ident(&method.name.text), params.join(", "))
}

fn c_signature(method: &Method) -> String {
    let params: Vec<String> = method
        .params
        .iter()
        .map(|p| {
            let dir = match p.direction {
                Direction::In => "in",
                Direction::Refin => "refin",
                Direction::Out => "out",
                Direction::Inout => "inout",
            };
            format!("{dir} {} {}", p.ty.text, p.name.text)
        })
        .collect();
    let ret = method.ret.as_ref().map(|t| t.text.as_str()).unwrap_or("void");
    format!("{ret} {}({})", method.name.text, params.join(", "))
}

fn sends(p: &Param) -> bool {
    matches!(p.direction, Direction::In | Direction::Refin | Direction::Inout)
}

fn returns(p: &Param) -> bool {
    matches!(p.direction, Direction::Out | Direction::Inout)
}

/// One function per method, which marshals the call and unmarshals the
/// reply.
fn rpc_client(out: &mut String, procedure: &Procedure) {
    for (label, method) in procedure.methods.iter().enumerate() {
        client_method(out, &procedure.name.text, label, method);
    }
}

fn client_method(out: &mut String, procedure: &str, label: usize, method: &Method) {
    let _ = writeln!(out, "\n        /// `{}` (label {label}).", c_signature(method));
    let _ = writeln!(out, "        pub {} {{", signature(method, false));
    out.push_str("            let mut __mrs: [sel4::Word; 4] = [0; 4];\n            let mut __n = 0usize;\n");
    for p in method.params.iter().filter(|p| sends(p)) {
        let name = ident(&p.name.text);
        if is_string(p) {
            let _ = writeln!(out, "            __n = rt::put_bytes(&mut __mrs, __n, {name}.as_bytes());");
        } else {
            let ty = rust_scalar(&p.ty.text).expect("checked");
            let value = if p.direction == Direction::Inout { format!("(*{name})") } else { name.clone() };
            let _ = writeln!(
                out,
                "            rt::set_mr(&mut __mrs, __n, {});\n            __n += 1;",
                encode(ty, &value)
            );
        }
    }
    let _ = writeln!(
        out,
        "            let (__info, __mrs) = sel4::call(SLOT, sel4::MessageInfo::new({label}, 0, 0, __n as sel4::Word), __mrs);
            rt::expect_ok(__info, \"{}.{}\");
            let mut __n = 0usize;",
        procedure, method.name.text
    );
    if let Some(ret) = &method.ret {
        let ty = rust_scalar(&ret.text).expect("checked");
        let _ =
            writeln!(out, "            let __ret = {};\n            __n += 1;", decode(ty, "rt::get_mr(&__mrs, __n)"));
    }
    for p in method.params.iter().filter(|p| returns(p)) {
        let ty = rust_scalar(&p.ty.text).expect("checked");
        let _ = writeln!(
            out,
            "            *{} = {};\n            __n += 1;",
            ident(&p.name.text),
            decode(ty, "rt::get_mr(&__mrs, __n)")
        );
    }
    if method.ret.is_some() {
        out.push_str("            __ret\n");
    }
    out.push_str("        }\n");
}

/// The trait a server implements, its receive loop and `handle`, which
/// decodes a call by its label and encodes the reply.
fn rpc_server(out: &mut String, procedure: &Procedure) {
    server_trait(out, procedure);
    server_loop(out, &ident(&procedure.name.text));
    for (label, method) in procedure.methods.iter().enumerate() {
        server_method(out, label, method);
    }
    out.push_str("                _ => __rejected,\n            }\n        }\n");
}

/// `CLIENTS`: the instances at the `from` ends of the RPC connection that
/// reaches provided interface `i`, in badge order (badge 1 first), so a
/// server can tell who called (`sender_badge`) by name, from the assembly
/// itself: fs's reset quarantine waits for that instance's own death. The
/// glue is per type, so the constant is there only when every instance of
/// the type has the same clients (else a server that needs it does not
/// build, rather than guess).
fn rpc_clients(out: &mut String, system: &System, instances: &[usize], i: usize) {
    let mut lists = instances.iter().map(|&index| match system.connection_of(index, i) {
        Some((c, _)) => {
            system.connections[c].from.iter().map(|e| system.instances[e.instance].name.text.as_str()).collect()
        }
        None => Vec::new(),
    });
    let Some(first) = lists.next() else { return };
    let doc = "        /// The instances that call this interface, in badge order: badge 1\n        /// is `CLIENTS[0]` (the connection's `from` ends, as written).";
    if lists.all(|l| l == first) {
        let names = first.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "{doc}\n        pub const CLIENTS: &[&str] = &[{names}];");
    } else {
        let _ = writeln!(
            out,
            "        // No `CLIENTS`: instances of `{}` have different clients here (the glue is per type).",
            system.component_of(instances[0]).decl.name.text
        );
    }
}

/// `trait P`: one `&mut self` method per procedure method.
fn server_trait(out: &mut String, procedure: &Procedure) {
    let trait_name = ident(&procedure.name.text);
    let _ = writeln!(
        out,
        "
        /// Implement this to serve `procedure {}`; then call [`run`] (or
        /// [`handle`] from your own receive loop).
        pub trait {trait_name} {{",
        procedure.name.text
    );
    for method in &procedure.methods {
        let _ = writeln!(out, "            /// `{}`.\n            {};", c_signature(method), signature(method, true));
    }
    out.push_str("        }\n");
}

/// The sender's badge, `run` and the head of `handle` (up to its `match`
/// on the label).
fn server_loop(out: &mut String, trait_name: &str) {
    let _ = write!(
        out,
        "
        static SENDER: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

        /// The badge of the client whose call is being handled: 1, 2, ... in
        /// the order of the connection's `from` ends.
        pub fn sender_badge() -> sel4::Word {{
            SENDER.load(core::sync::atomic::Ordering::Relaxed) as sel4::Word
        }}

        /// Serves calls forever.
        pub fn run<S: {trait_name} + ?Sized>(server: &mut S) -> ! {{
            let (mut info, mut badge, mut mrs) = sel4::recv(SLOT);
            loop {{
                let (reply, reply_mrs) = handle(server, badge, info, mrs);
                (info, badge, mrs) = sel4::reply_recv(SLOT, reply, reply_mrs);
            }}
        }}

        /// Decodes one call, runs the method and encodes the reply.
        pub fn handle<S: {trait_name} + ?Sized>(
            server: &mut S,
            badge: sel4::Word,
            info: sel4::MessageInfo,
            mrs: [sel4::Word; 4],
        ) -> (sel4::MessageInfo, [sel4::Word; 4]) {{
            SENDER.store(badge as u64, core::sync::atomic::Ordering::Relaxed);
            let __length = info.length() as usize;
            let __rejected = (sel4::MessageInfo::new(rt::BAD_REQUEST, 0, 0, 0), [0; 4]);
            let mut __reply: [sel4::Word; 4] = [0; 4];
            match info.label() {{
"
    );
}

/// The `match` arm of one method: decode the arguments (rejecting a short
/// or malformed message), call the server, encode the reply.
fn server_method(out: &mut String, label: usize, method: &Method) {
    let _ = writeln!(out, "                {label} => {{\n                    let mut __n = 0usize;");
    for p in &method.params {
        let name = ident(&p.name.text);
        if is_string(p) {
            let _ = write!(
                out,
                "                    let mut __{0}_bytes = [0u8; rt::MAX_STRING_BYTES];
                    let Some((__count, __next)) = rt::get_bytes(&mrs, __n, __length, &mut __{0}_bytes) else {{ return __rejected }};
                    __n = __next;
                    let Ok({name}) = core::str::from_utf8(&__{0}_bytes[..__count]) else {{ return __rejected }};
",
                p.name.text
            );
        } else {
            let ty = rust_scalar(&p.ty.text).expect("checked");
            if sends(p) {
                let _ = writeln!(
                    out,
                    "                    let mut {name} = {};\n                    __n += 1;",
                    decode(ty, "rt::get_mr(&mrs, __n)")
                );
            } else {
                let _ = writeln!(out, "                    let mut {name}: {ty} = Default::default();");
            }
        }
    }
    out.push_str(
        "                    if __n > __length {\n                        return __rejected;\n                    }\n",
    );
    let args: Vec<String> = method
        .params
        .iter()
        .map(|p| {
            let name = ident(&p.name.text);
            if returns(p) {
                format!("&mut {name}")
            } else {
                name
            }
        })
        .collect();
    let call = format!("server.{}({})", ident(&method.name.text), args.join(", "));
    if method.ret.is_some() {
        let _ = writeln!(out, "                    let __ret = {call};");
    } else {
        let _ = writeln!(out, "                    {call};");
    }
    out.push_str("                    let mut __n = 0usize;\n");
    if let Some(ret) = &method.ret {
        let ty = rust_scalar(&ret.text).expect("checked");
        let _ = writeln!(
            out,
            "                    rt::set_mr(&mut __reply, __n, {});\n                    __n += 1;",
            encode(ty, "__ret")
        );
    }
    for p in method.params.iter().filter(|p| returns(p)) {
        let ty = rust_scalar(&p.ty.text).expect("checked");
        let _ = writeln!(
            out,
            "                    rt::set_mr(&mut __reply, __n, {});\n                    __n += 1;",
            encode(ty, &ident(&p.name.text))
        );
    }
    out.push_str(
        "                    (sel4::MessageInfo::new(rt::OK, 0, 0, __n as sel4::Word), __reply)\n                }\n",
    );
}

/// Names used by tests: the interface modules a glue file defines.
pub fn module_names(component: &ComponentType) -> Vec<String> {
    component.decl.interfaces.iter().map(|i| ident(&i.name.text)).collect()
}
