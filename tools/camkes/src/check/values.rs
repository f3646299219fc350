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

/// What a string attribute's value must look like, beyond being a string.
#[derive(Clone, Copy)]
enum Form {
    /// One of these words.
    Words(&'static [&'static str]),
    /// An IPv4 address `a.b.c.d`, or `""` for none.
    Ipv4OrNone,
    /// An IPv4 address with an optional prefix length, `a.b.c.d[/n]`.
    Ipv4Prefix,
}

/// String attributes whose component reads them as one of a few forms:
/// (component, attribute, form). A component that cannot use a value it is
/// given must not fall back on a default in silence (a typo in
/// `checksum` once ran the cached mode for "ofload"): the value is refused
/// where it is written.
const STRING_FORMS: &[(&str, &str, Form)] = &[
    // components/netstack: how TCP/IP checksums are made (its README).
    ("Netstack", "checksum", Form::Words(&["cached", "software", "offload"])),
    ("Netstack", "address", Form::Ipv4Prefix),
    ("Netstack", "gateway", Form::Ipv4OrNone),
    // components/fs: the replacement order of the file cache (fs::Policy).
    ("Fs", "cache_policy", Form::Words(&["lru", "gds"])),
];

fn is_ipv4(text: &str) -> bool {
    let parts: Vec<&str> = text.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
        && parts.iter().all(|p| p.parse::<u16>().is_ok_and(|n| n <= 255))
}

/// Whether `text` has `form`, else what it should look like.
fn check_form(text: &str, form: Form) -> std::result::Result<(), String> {
    match form {
        Form::Words(words) if words.contains(&text) => Ok(()),
        Form::Words(words) => {
            let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
            Err(format!("one of {}", quoted.join(", ")))
        }
        Form::Ipv4OrNone if text.is_empty() || is_ipv4(text) => Ok(()),
        Form::Ipv4OrNone => Err("an IPv4 address \"a.b.c.d\" (or \"\" for none)".into()),
        Form::Ipv4Prefix => {
            let (address, prefix) = text.split_once('/').unwrap_or((text, "0"));
            let prefix_ok = !prefix.is_empty()
                && prefix.len() <= 2
                && prefix.bytes().all(|b| b.is_ascii_digit())
                && prefix.parse::<u8>().is_ok_and(|n| n <= 32);
            if is_ipv4(address) && prefix_ok {
                Ok(())
            } else {
                Err("an IPv4 address with a prefix length, \"a.b.c.d/n\" (n 0..=32)".into())
            }
        }
    }
}

/// Checks `value` of attribute `decl` of component `component` against
/// [`POLICY_BOUNDS`] and [`STRING_FORMS`] (after [`type_check`]).
pub(super) fn policy_check(component: &str, decl: &ast::AttributeDecl, value: &Value, label: &str) -> Result<()> {
    if let ValueKind::Str(text) = &value.kind {
        let form = STRING_FORMS.iter().find(|f| f.0 == component && f.1 == decl.name.text);
        if let Some(Err(wanted)) = form.map(|f| check_form(text, f.2)) {
            return err(&value.pos, format!("{label} = \"{text}\" is not {wanted}"));
        }
        return Ok(());
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_forms() {
        let words = Form::Words(&["cached", "software"]);
        assert_eq!(check_form("cached", words), Ok(()));
        assert_eq!(check_form("cachd", words), Err("one of \"cached\", \"software\"".into()));
        for good in ["10.0.2.15/24", "10.0.2.15", "0.0.0.0/0", "255.255.255.255/32"] {
            assert_eq!(check_form(good, Form::Ipv4Prefix), Ok(()), "{good}");
        }
        for bad in ["10.0.2/24", "10.0.2.256/24", "10.0.2.15/33", "10.0.2.15/", "a.b.c.d", "", "1.2.3.4/+1"] {
            assert!(check_form(bad, Form::Ipv4Prefix).is_err(), "{bad}");
        }
        assert_eq!(check_form("", Form::Ipv4OrNone), Ok(()));
        assert_eq!(check_form("10.0.2.2", Form::Ipv4OrNone), Ok(()));
        assert!(check_form("10.0.2.2/24", Form::Ipv4OrNone).is_err());
    }
}
