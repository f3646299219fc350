//! Setting values: typed as upstream's C glue declares the attribute,
//! within the bounds a component's policy sets, and one of the words an
//! attribute allows, all refused where they are written (the setting, the
//! default or `--set`) rather than found wrong, or silently replaced, at
//! run time.

use crate::ast::{self, Value, ValueKind};
use crate::diag::{err, Pos, Result};
use system_spec::Access;

pub(super) fn int_in(value: &Value, label: &str, min: i128, max: i128) -> Result<i128> {
    match value.kind {
        ValueKind::Int(n) if (min..=max).contains(&n) => Ok(n),
        ValueKind::Int(n) => err(&value.pos, format!("{label} = {n} is out of range ({min}..={max})")),
        ref other => {
            err(&value.pos, format!("mistyped assignment: {label} expects an integer, found {}", other.describe()))
        }
    }
}

pub(super) fn string_value<'a>(value: &'a Value, label: &str) -> Result<&'a str> {
    match &value.kind {
        ValueKind::Str(s) => Ok(s),
        other => err(&value.pos, format!("mistyped assignment: {label} expects a string, found {}", other.describe())),
    }
}

/// Upstream's `_access` syntax is `^R?W?X?P?$`; of those, only `R` and
/// `RW` are mappings this system can give (x86 has no write-only pages, and
/// dataports are never executable).
pub(super) fn parse_access(rights: &str, label: &str, pos: &Pos) -> Result<Access> {
    let mut rest = rights;
    let mut letters = Vec::new();
    for letter in ['R', 'W', 'X', 'P'] {
        if let Some(r) = rest.strip_prefix(letter) {
            letters.push(letter);
            rest = r;
        }
    }
    if !rest.is_empty() {
        return err(pos, format!("malformed rights \"{rights}\" for {label}: use the letters R, W, X, P in that order, each at most once"));
    }
    if letters.contains(&'X') {
        return err(pos, format!("{label} = \"{rights}\": executable dataports ('X') cannot be given"));
    }
    match (letters.contains(&'R'), letters.contains(&'W')) {
        (true, false) => Ok(Access::ReadOnly),
        (false, true) => err(pos, format!("{label} = \"{rights}\": write-only cannot be given (x86 pages that are writable are readable); use \"RW\"")),
        // Unset or empty means full access upstream.
        _ => Ok(Access::ReadWrite),
    }
}

/// `"0x3f8:0x3ff"`: each half with base auto-detection (as Python's
/// `int(x, 0)`), inclusive.
pub(super) fn parse_port_range(text: &str, label: &str, pos: &Pos) -> Result<(u16, u16)> {
    let number = |s: &str| -> Option<u16> {
        let s = s.trim();
        let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            (h, 16)
        } else if let Some(o) = s.strip_prefix("0o").or_else(|| s.strip_prefix("0O")) {
            (o, 8)
        } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
            (b, 2)
        } else if s.len() > 1 && s.starts_with('0') {
            return None;
        } else {
            (s, 10)
        };
        u16::from_str_radix(digits, radix).ok()
    };
    let malformed = || {
        err(
            pos,
            format!("malformed I/O port range \"{text}\" for {label}: expected \"0xFIRST:0xLAST\" (inclusive, 16-bit)"),
        )
    };
    let Some((a, b)) = text.split_once(':') else { return malformed() };
    let (Some(first), Some(last)) = (number(a), number(b)) else { return malformed() };
    if first > last {
        return err(pos, format!("I/O port range \"{text}\" for {label} is empty: the first port is above the last"));
    }
    Ok((first, last))
}

/// The values an integer attribute type holds: upstream's C types (`int`
/// is C's, 32 bits on every platform CAmkES supports). The glue's constant
/// is `i64` or `u64`, but a value must also mean the same to upstream's C.
fn int_range(ty: &str) -> (i128, i128) {
    match ty {
        "uint64_t" => (0, u64::MAX as i128),
        "int64_t" => (i64::MIN as i128, i64::MAX as i128),
        _ => (i32::MIN as i128, i32::MAX as i128),
    }
}

/// Bounds of component attributes that are policy (limits, timeouts),
/// beyond their C type's: (component, attribute, least, most). A value
/// outside them is refused where it is written (the setting, the
/// default or `--set`), not found wrong at run time.
const POLICY_BOUNDS: &[(&str, &str, i128, i128)] = &[
    // netstack's admission of connection requests (its README, "Admission").
    ("Netstack", "syn_recv_timeout_ms", 100, 600_000),
    ("Netstack", "half_open_budget", 0, 64),
    ("Netstack", "per_address_half_open", 0, 64),
    ("Netstack", "per_address_connections", 1, 1 << 20),
    // Received pages one connection may keep (netstack README, "Received
    // pages, not only bytes, are bounded").
    ("Netstack", "rx_conn_pages", 1, 65_536),
    // httpd's slow input (its README, "Slow and fragmented input").
    ("Httpd", "request_timeout_ms", 100, 3_600_000),
    ("Httpd", "min_input_rate", 0, 1 << 30),
    ("Httpd", "rate_grace_ms", 0, 3_600_000),
    ("Httpd", "max_input_slices", 1, 4096),
];

/// Checks `value` of attribute `decl` of component `component` against
/// [`POLICY_BOUNDS`] (after [`type_check`]).
pub(super) fn policy_check(component: &str, decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
    let ValueKind::Int(n) = value.kind else { return Ok(()) };
    match POLICY_BOUNDS.iter().find(|b| b.0 == component && b.1 == decl.name.text) {
        Some(&(_, _, min, max)) if !(min..=max).contains(&n) => {
            err(&value.pos, format!("{label} = {n} is out of its bounds ({min}..={max})"))
        }
        _ => Ok(()),
    }
}

pub(super) fn type_check(decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
    let in_range = |v: &Value| -> Result<()> {
        let ValueKind::Int(n) = v.kind else { return Ok(()) };
        let (min, max) = int_range(&decl.ty.text);
        if (min..=max).contains(&n) {
            return Ok(());
        }
        let fits = |ty: &str| {
            let (min, max) = int_range(ty);
            (min..=max).contains(&n)
        };
        let hint = match decl.ty.text.as_str() {
            "int" if fits("int64_t") => "; declare it int64_t",
            "int" | "int64_t" if fits("uint64_t") => "; declare it uint64_t",
            _ => "",
        };
        err(&v.pos, format!("{label} = {n} is out of range for {} ({min}..={max}){hint}", decl.ty.text))
    };
    let element_ok = |v: &Value| match (decl.ty.text.as_str(), &v.kind) {
        ("string", ValueKind::Str(_)) => true,
        ("string", _) => false,
        (_, ValueKind::Int(_)) => true,
        _ => false,
    };
    let wanted = if decl.ty.text == "string" { "a string" } else { "an integer" };
    if decl.array {
        let ValueKind::List(items) = &value.kind else {
            return err(
                &value.pos,
                format!("mistyped assignment: {label} is an array attribute, found {}", value.kind.describe()),
            );
        };
        for item in items {
            if !element_ok(item) {
                return err(
                    &item.pos,
                    format!(
                        "mistyped assignment: elements of {label} must be {wanted}, found {}",
                        item.kind.describe()
                    ),
                );
            }
            in_range(item)?;
        }
        return Ok(());
    }
    if !element_ok(value) {
        return err(
            &value.pos,
            format!(
                "mistyped assignment: {label} is {} attribute, found {}",
                if decl.ty.text == "string" { "a string" } else { "an integer" },
                value.kind.describe()
            ),
        );
    }
    in_range(value)
}
