//! `--set INSTANCE.ATTRIBUTE=VALUE`: configuration settings given on the
//! command line, applied to the assembly as if written at the end of its
//! `configuration` block, replacing a setting of the same name there.
//!
//! Why: one assembly serves several test images that differ in one
//! setting (e.g. `netstack.dhcp = 1`), and our ADL subset has no
//! preprocessor to derive one file from another. The override goes through
//! the same parser and checker as the file, so an unknown instance or
//! attribute, or a value of the wrong type, is reported as usual.

use std::sync::Arc;

use crate::ast::{Item, Setting};
use crate::diag::{err, Pos, Result};
use crate::lexer::lex;
use crate::parser::parse;

/// Where an override's diagnostics point: the argument itself.
const ORIGIN: &str = "--set";

/// Parses one override, `target.attribute=value` (value in ADL syntax:
/// `1`, `"text"`, `[...]`).
pub fn parse_setting(text: &str) -> Result<Setting> {
    let file: Arc<str> = Arc::from(format!("{ORIGIN} '{text}'"));
    let pos = Pos { file: file.clone(), line: 1, col: 1 };
    if text.contains(['{', '}', ';']) {
        return err(&pos, "an override is one 'instance.attribute=value' (no braces or semicolons)");
    }
    // Wrapped in an otherwise empty assembly, so that the file's own parser
    // (and its rules for names and values) reads it.
    let wrapped = format!("assembly {{ composition {{}} configuration {{ {text}; }} }}");
    let items = parse(lex(&file, &wrapped)?)?;
    match items.as_slice() {
        [Item::Assembly(a)] if a.settings.len() == 1 => Ok(a.settings[0].clone()),
        _ => err(&pos, "an override is one 'instance.attribute=value'"),
    }
}

/// Applies `settings` to the assemblies of `items`: each replaces the
/// setting of the same target and attribute in whichever assembly block
/// makes it (several blocks merge into one system, so an override must
/// reach a setting of the second as well as the first), or is added at the
/// end of the last block.
pub fn apply(items: &mut [Item], settings: &[Setting]) -> Result<()> {
    let Some(first) = settings.first() else { return Ok(()) };
    let mut assemblies: Vec<&mut crate::ast::Assembly> = items
        .iter_mut()
        .filter_map(|i| match i {
            Item::Assembly(a) => Some(a),
            _ => None,
        })
        .collect();
    if assemblies.is_empty() {
        return err(&first.target.pos, "there is no assembly to apply the override to");
    }
    let overridden: std::collections::HashSet<(&str, &str)> =
        settings.iter().map(|s| (s.target.text.as_str(), s.attribute.text.as_str())).collect();
    for assembly in assemblies.iter_mut() {
        assembly.settings.retain(|old| !overridden.contains(&(old.target.text.as_str(), old.attribute.text.as_str())));
    }
    let last = assemblies.last_mut().expect("not empty");
    for s in settings {
        // A later override of the same setting wins, as on a command line.
        last.settings.retain(|old| !(old.target.text == s.target.text && old.attribute.text == s.attribute.text));
        last.settings.push(s.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::ValueKind;

    #[test]
    fn parses_values_like_the_file_does() {
        let s = parse_setting("netstack.dhcp=1").unwrap();
        assert_eq!((s.target.text.as_str(), s.attribute.text.as_str()), ("netstack", "dhcp"));
        assert_eq!(s.value.kind, ValueKind::Int(1));
        let s = parse_setting("netstack.address = \"10.0.2.16/24\"").unwrap();
        assert_eq!(s.value.kind, ValueKind::Str("10.0.2.16/24".into()));
        assert_eq!(parse_setting("a.b = 2 * 3").unwrap().value.kind, ValueKind::Int(6));
    }

    #[test]
    fn rejects_what_is_not_one_setting() {
        for bad in
            ["netstack", "netstack.dhcp", "netstack.dhcp=", "a.b=1; c.d=2", "a.b.c=1", "} assembly { a.b=1", "=1"]
        {
            let e = parse_setting(bad).unwrap_err().to_string();
            assert!(e.contains("--set"), "{bad}: {e}");
        }
    }

    #[test]
    fn replaces_or_adds() {
        let file: Arc<str> = Arc::from("t.camkes");
        let text = "assembly { composition {} configuration { n.dhcp = 0; n.gateway = \"x\"; } }";
        let mut items = parse(lex(&file, text).unwrap()).unwrap();
        apply(&mut items, &[parse_setting("n.dhcp=1").unwrap(), parse_setting("n.itr=5").unwrap()]).unwrap();
        let Item::Assembly(a) = &items[0] else { panic!() };
        let got: Vec<_> = a.settings.iter().map(|s| (s.attribute.text.as_str(), s.value.kind.clone())).collect();
        assert_eq!(
            got,
            [("gateway", ValueKind::Str("x".into())), ("dhcp", ValueKind::Int(1)), ("itr", ValueKind::Int(5))]
        );
        let mut none: Vec<Item> = Vec::new();
        assert!(apply(&mut none, &[parse_setting("n.dhcp=1").unwrap()]).is_err());
        apply(&mut none, &[]).unwrap();
    }

    #[test]
    fn replaces_a_setting_of_a_second_assembly_block() {
        let file: Arc<str> = Arc::from("t.camkes");
        let text = "assembly { composition {} configuration { n.dhcp = 0; } }
                    assembly { composition {} configuration { n.quota = 4; n.port = 1; } }";
        let mut items = parse(lex(&file, text).unwrap()).unwrap();
        apply(&mut items, &[parse_setting("n.quota=8").unwrap(), parse_setting("n.dhcp=1").unwrap()]).unwrap();
        let settings = |i: usize| -> Vec<(String, ValueKind)> {
            let Item::Assembly(a) = &items[i] else { panic!() };
            a.settings.iter().map(|s| (s.attribute.text.clone(), s.value.kind.clone())).collect()
        };
        assert_eq!(settings(0), []);
        assert_eq!(
            settings(1),
            [
                ("port".into(), ValueKind::Int(1)),
                ("quota".into(), ValueKind::Int(8)),
                ("dhcp".into(), ValueKind::Int(1))
            ]
        );
    }
}
