//! Recursive-descent parser for the CAmkES subset (one function per grammar
//! rule; the grammar is in README.md). Anything upstream accepts but this
//! subset leaves out is reported as unsupported rather than misread.
//! Values and constant expressions are in `expr`.

mod expr;

use crate::ast::*;
use crate::diag::{err, Pos, Result};
use crate::lexer::{Tok, Token};

/// Upstream's reserved words: none of them can be a name.
pub const KEYWORDS: &[&str] = &[
    "assembly",
    "attribute",
    "Buf",
    "char",
    "component",
    "composition",
    "configuration",
    "connection",
    "connector",
    "consumes",
    "control",
    "dataport",
    "Dataport",
    "Dataports",
    "emits",
    "Event",
    "Events",
    "export",
    "False",
    "false",
    "from",
    "group",
    "hardware",
    "has",
    "import",
    "in",
    "include",
    "inout",
    "int",
    "integer",
    "int64_t",
    "maybe",
    "mutex",
    "out",
    "procedure",
    "Procedure",
    "Procedures",
    "provides",
    "refin",
    "semaphore",
    "schedule",
    "binary_semaphore",
    "signed",
    "struct",
    "string",
    "ticks",
    "thread",
    "threads",
    "True",
    "true",
    "to",
    "uint64_t",
    "unsigned",
    "us",
    "uses",
    "void",
    "with",
];

/// C keywords: upstream rejects them as method, parameter, attribute and
/// setting names because those become C identifiers in its glue.
pub const C_KEYWORDS: &[&str] = &[
    "asm",
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Imaginary",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Generic",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
];

/// The deepest nesting of a value: parentheses, lists, dicts, prefix
/// operators, `**` exponents and `?:` branches, each one level. Real
/// assemblies nest a few levels; the limit keeps the recursive descent far
/// from the end of the stack (a few thousand parentheses used to overflow
/// it and abort the compiler) and ends with a positioned error instead.
pub const MAX_NESTING: u32 = 64;

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Current nesting of values and expressions (see [`MAX_NESTING`]).
    depth: u32,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(w) => format!("'{w}'"),
        Tok::Int(n) => format!("number {n}"),
        Tok::Float(x) => format!("number {x}"),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::AnglePath(p) => format!("<{p}>"),
        Tok::Punct(p) => format!("'{p}'"),
        Tok::Eof => "end of file".to_string(),
    }
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at]
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        &self.tokens[(self.at + ahead).min(self.tokens.len() - 1)].tok
    }

    fn pos(&self) -> Pos {
        self.peek().pos.clone()
    }

    fn bump(&mut self) -> Token {
        let t = self.tokens[self.at].clone();
        if self.at + 1 < self.tokens.len() {
            self.at += 1;
        }
        t
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(w) if w == word)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(q) if *q == p)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.bump();
        }
        yes
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let yes = self.is_word(word);
        if yes {
            self.bump();
        }
        yes
    }

    /// Runs `parse` one nesting level deeper, or refuses at `pos` when
    /// that would pass [`MAX_NESTING`].
    fn nested<T>(&mut self, pos: &Pos, parse: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_NESTING {
            return err(
                pos,
                format!("nesting is deeper than {MAX_NESTING} levels (parentheses, brackets, braces or operators)"),
            );
        }
        self.depth += 1;
        let result = parse(self);
        self.depth -= 1;
        result
    }

    fn unexpected<T>(&self, expected: &str) -> Result<T> {
        err(&self.pos(), format!("expected {expected}, found {}", describe(&self.peek().tok)))
    }

    fn expect_punct(&mut self, p: &str) -> Result<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            self.unexpected(&format!("'{p}'"))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<()> {
        if self.eat_word(word) {
            Ok(())
        } else {
            self.unexpected(&format!("'{word}'"))
        }
    }

    /// A name that is not a reserved word; `what` says what it names.
    fn expect_name(&mut self, what: &str) -> Result<Name> {
        let token = self.peek().clone();
        match token.tok {
            Tok::Ident(word) if KEYWORDS.contains(&word.as_str()) => {
                err(&token.pos, format!("'{word}' is a reserved word and cannot be used as {what}"))
            }
            Tok::Ident(word) => {
                self.bump();
                Ok(Name { text: word, pos: token.pos })
            }
            _ => self.unexpected(what),
        }
    }

    /// A name that also becomes a C identifier upstream, so it must not be
    /// a C keyword either.
    fn expect_c_name(&mut self, what: &str) -> Result<Name> {
        if let Tok::Ident(word) = &self.peek().tok {
            if C_KEYWORDS.contains(&word.as_str()) && !KEYWORDS.contains(&word.as_str()) {
                return err(&self.pos(), format!("'{word}' is a C keyword and cannot be used as {what}"));
            }
        }
        self.expect_name(what)
    }

    fn file(&mut self) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        loop {
            let pos = self.pos();
            let word = match &self.peek().tok {
                Tok::Eof => return Ok(items),
                Tok::Punct(";") => {
                    self.bump();
                    continue;
                }
                Tok::Ident(w) => w.clone(),
                _ => return self.unexpected("a top-level item (import, procedure, component, connector or assembly)"),
            };
            let item = match word.as_str() {
                "import" => Item::Import(self.import()?),
                "procedure" => Item::Procedure(self.procedure()?),
                "component" => Item::Component(self.component()?),
                "connector" => Item::Connector(self.connector()?),
                "assembly" => Item::Assembly(self.assembly()?),
                "struct" => return err(&pos, "struct definitions are not supported by this compiler"),
                "composition" | "configuration" => {
                    return err(
                        &pos,
                        format!("a top-level '{word}' block is not supported; put it inside assembly {{ }}"),
                    )
                }
                _ => return self.unexpected("a top-level item (import, procedure, component, connector or assembly)"),
            };
            items.push(item);
        }
    }

    /// `<path>` or one or more adjacent `"strings"`.
    fn path(&mut self, what: &str) -> Result<ImportPath> {
        match self.peek().tok.clone() {
            Tok::AnglePath(p) => {
                self.bump();
                Ok(ImportPath::Builtin(p))
            }
            Tok::Str(_) => Ok(ImportPath::Relative(self.strings())),
            _ => err(
                &self.pos(),
                format!(
                    "{what} path must be quoted (\"file\") or in angle brackets (<file>), found {}",
                    describe(&self.peek().tok)
                ),
            ),
        }
    }

    fn strings(&mut self) -> String {
        let mut s = String::new();
        while let Tok::Str(part) = &self.peek().tok {
            s.push_str(part);
            self.bump();
        }
        s
    }

    fn import(&mut self) -> Result<Import> {
        let pos = self.bump().pos;
        let path = self.path("import")?;
        self.expect_punct(";")?;
        Ok(Import { pos, path })
    }

    fn include(&mut self) -> Result<()> {
        self.bump();
        self.path("include")?;
        self.expect_punct(";")
    }

    fn procedure(&mut self) -> Result<Procedure> {
        self.bump();
        let name = self.expect_name("a procedure name")?;
        self.expect_punct("{")?;
        let mut methods = Vec::new();
        loop {
            if self.eat_punct("}") {
                return Ok(Procedure { name, methods });
            } else if self.eat_punct(";") {
            } else if self.is_word("include") {
                self.include()?;
            } else if self.is_word("attribute") {
                return err(&self.pos(), "attributes inside a procedure are not supported");
            } else {
                methods.push(self.method()?);
            }
        }
    }

    fn method(&mut self) -> Result<Method> {
        let ret = if self.eat_word("void") { None } else { Some(self.type_name("a method's return type")?) };
        let name = self.expect_c_name("a method name")?;
        self.expect_punct("(")?;
        let mut params = Vec::new();
        if self.is_word("void") && *self.peek_at(1) == Tok::Punct(")") {
            self.bump();
        }
        while !self.eat_punct(")") {
            params.push(self.param()?);
            if !self.eat_punct(",") {
                self.expect_punct(")")?;
                break;
            }
        }
        self.expect_punct(";")?;
        Ok(Method { name, ret, params })
    }

    fn param(&mut self) -> Result<Param> {
        let direction = if self.eat_word("in") {
            Direction::In
        } else if self.eat_word("refin") {
            Direction::Refin
        } else if self.eat_word("out") {
            Direction::Out
        } else if self.eat_word("inout") {
            Direction::Inout
        } else {
            Direction::In
        };
        let ty = self.type_name("a parameter type")?;
        let name = self.expect_c_name("a parameter name")?;
        let array = self.eat_punct("[");
        if array {
            self.expect_punct("]")?;
        }
        Ok(Param { direction, ty, name, array })
    }

    /// A parameter/return type, normalised as upstream normalises it.
    fn type_name(&mut self, what: &str) -> Result<TypeName> {
        let pos = self.pos();
        let word = match &self.peek().tok {
            Tok::Ident(w) => w.clone(),
            _ => return self.unexpected(what),
        };
        self.bump();
        let text = match word.as_str() {
            "int" | "integer" => "int".to_string(),
            "signed" => {
                if self.eat_word("char") {
                    "signed char".to_string()
                } else {
                    let _ = self.eat_word("int") || self.eat_word("integer");
                    "int".to_string()
                }
            }
            "unsigned" => {
                if self.eat_word("char") {
                    "unsigned char".to_string()
                } else {
                    let _ = self.eat_word("int") || self.eat_word("integer");
                    "unsigned int".to_string()
                }
            }
            "char" | "string" | "int64_t" | "uint64_t" => word,
            "struct" => format!("struct {}", self.expect_name("a struct name")?.text),
            "bool" => "boolean".to_string(),
            w if KEYWORDS.contains(&w) => return err(&pos, format!("expected {what}, found '{w}'")),
            _ => word,
        };
        Ok(TypeName { text, pos })
    }

    fn component(&mut self) -> Result<Component> {
        self.bump();
        let name = self.expect_name("a component name")?;
        self.expect_punct("{")?;
        let mut c = Component {
            name,
            control: None,
            hardware: None,
            interfaces: Vec::new(),
            attributes: Vec::new(),
            synchronisation: Vec::new(),
        };
        loop {
            let pos = self.pos();
            let word = match &self.peek().tok {
                Tok::Punct("}") => {
                    self.bump();
                    return Ok(c);
                }
                Tok::Punct(";") => {
                    self.bump();
                    continue;
                }
                Tok::Ident(w) => w.clone(),
                _ => return self.unexpected("a component body item or '}'"),
            };
            match word.as_str() {
                "control" | "hardware" => {
                    self.bump();
                    self.expect_punct(";")?;
                    if word == "control" {
                        c.control = Some(pos);
                    } else {
                        c.hardware = Some(pos);
                    }
                }
                "maybe" => {
                    self.bump();
                    let kind = match &self.peek().tok {
                        Tok::Ident(w) if w == "uses" => InterfaceKind::Uses,
                        Tok::Ident(w) if w == "consumes" => InterfaceKind::Consumes,
                        Tok::Ident(w) if w == "dataport" => InterfaceKind::Dataport,
                        Tok::Ident(w) if w == "provides" || w == "emits" => {
                            return err(
                                &self.pos(),
                                format!("'maybe' can only qualify uses, consumes or dataport, not '{w}'"),
                            )
                        }
                        _ => return self.unexpected("'uses', 'consumes' or 'dataport' after 'maybe'"),
                    };
                    self.bump();
                    c.interfaces.push(self.interface(kind, true)?);
                }
                "provides" | "uses" | "emits" | "consumes" | "dataport" => {
                    self.bump();
                    let kind = match word.as_str() {
                        "provides" => InterfaceKind::Provides,
                        "uses" => InterfaceKind::Uses,
                        "emits" => InterfaceKind::Emits,
                        "consumes" => InterfaceKind::Consumes,
                        _ => InterfaceKind::Dataport,
                    };
                    c.interfaces.push(self.interface(kind, false)?);
                }
                "attribute" => {
                    self.bump();
                    c.attributes.push(self.attribute()?);
                }
                "has" => {
                    self.bump();
                    let kind = match &self.peek().tok {
                        Tok::Ident(w) if ["mutex", "semaphore", "binary_semaphore"].contains(&w.as_str()) => w.clone(),
                        _ => return self.unexpected("'mutex', 'semaphore' or 'binary_semaphore' after 'has'"),
                    };
                    self.bump();
                    let name = self.expect_name("a mutex or semaphore name")?;
                    self.expect_punct(";")?;
                    c.synchronisation.push((kind, name));
                }
                "include" => self.include()?,
                "composition" | "configuration" | "export" => {
                    return err(&pos, format!("compound components ('{word}' inside a component) are not supported"))
                }
                _ => return self.unexpected("a component body item or '}'"),
            }
        }
    }

    fn interface(&mut self, kind: InterfaceKind, maybe: bool) -> Result<InterfaceDecl> {
        let (type_name, dataport) = if kind == InterfaceKind::Dataport {
            let pos = self.pos();
            let ty = if self.eat_word("Buf") {
                if self.eat_punct("(") {
                    let value = self.expr()?;
                    self.expect_punct(")")?;
                    match value.kind {
                        ValueKind::Int(n) if n > 0 => DataportType::Buf { size: Some(n) },
                        _ => return err(&value.pos, "a Buf size must be a positive integer"),
                    }
                } else {
                    DataportType::Buf { size: None }
                }
            } else {
                DataportType::CType(self.expect_name("a dataport type")?.text)
            };
            (Name { text: ty.spelling(), pos }, Some(ty))
        } else {
            let what = match kind {
                InterfaceKind::Provides | InterfaceKind::Uses => "a procedure name",
                _ => "an event type name",
            };
            (self.expect_name(what)?, None)
        };
        let name = self.expect_name("an interface name")?;
        self.expect_punct(";")?;
        Ok(InterfaceDecl { kind, maybe, type_name, dataport, name })
    }

    fn attribute(&mut self) -> Result<AttributeDecl> {
        let pos = self.pos();
        let word = match &self.peek().tok {
            Tok::Ident(w) => w.clone(),
            _ => return self.unexpected("an attribute type"),
        };
        self.bump();
        let text = match word.as_str() {
            "int" | "integer" => "int",
            "signed" => {
                let _ = self.eat_word("int") || self.eat_word("integer");
                "int"
            }
            "string" => "string",
            "int64_t" => "int64_t",
            "uint64_t" => "uint64_t",
            "unsigned" | "char" => {
                return err(
                    &pos,
                    format!("attribute type '{word}' is not supported (upstream rejects integer values for it); use int, int64_t, uint64_t or string"),
                )
            }
            "struct" => return err(&pos, "struct-typed attributes are not supported by this compiler"),
            _ => {
                return err(&pos, format!("unknown attribute type '{word}'; use int, int64_t, uint64_t or string"))
            }
        };
        let ty = TypeName { text: text.to_string(), pos };
        let name = self.expect_c_name("an attribute name")?;
        let array = self.eat_punct("[");
        if array {
            self.expect_punct("]")?;
        }
        let default = if self.eat_punct("=") { Some(self.value()?) } else { None };
        self.expect_punct(";")?;
        Ok(AttributeDecl { ty, array, name, default })
    }

    fn connector(&mut self) -> Result<Connector> {
        self.bump();
        let name = self.expect_name("a connector name")?;
        self.expect_punct("{")?;
        while !self.eat_punct("}") {
            if self.eat_punct(";") {
                continue;
            }
            if self.eat_word("attribute") {
                self.attribute()?;
                continue;
            }
            if !(self.eat_word("from") || self.eat_word("to")) {
                return self.unexpected("'from', 'to', 'attribute' or '}' in a connector");
            }
            self.eat_word("hardware");
            let kinds = ["Procedure", "Procedures", "Event", "Events", "Dataport", "Dataports"];
            if !kinds.iter().any(|k| self.is_word(k)) {
                return self.unexpected("a connector end kind (Procedure, Event, Dataport or their plurals)");
            }
            self.bump();
            if self.eat_word("with") {
                if !matches!(self.peek().tok, Tok::Int(_)) {
                    return self.unexpected("a thread count");
                }
                self.bump();
                if !(self.eat_word("threads") || self.eat_word("thread")) {
                    return self.unexpected("'threads'");
                }
            }
            self.expect_punct(";")?;
        }
        Ok(Connector { name })
    }

    fn assembly(&mut self) -> Result<Assembly> {
        let pos = self.bump().pos;
        if matches!(self.peek().tok, Tok::Ident(_)) {
            self.expect_name("an assembly name")?;
        }
        self.expect_punct("{")?;
        let mut a = Assembly { pos, instances: Vec::new(), connections: Vec::new(), settings: Vec::new() };
        self.expect_word("composition")?;
        self.expect_punct("{")?;
        self.composition(&mut a)?;
        let _ = self.eat_punct(";");
        if self.eat_word("configuration") {
            self.expect_punct("{")?;
            self.configuration(&mut a)?;
            let _ = self.eat_punct(";");
        }
        self.expect_punct("}")?;
        Ok(a)
    }

    fn composition(&mut self, a: &mut Assembly) -> Result<()> {
        loop {
            let pos = self.pos();
            if self.eat_punct("}") {
                return Ok(());
            } else if self.eat_punct(";") {
            } else if self.eat_word("component") {
                let type_name = self.expect_name("a component type")?;
                let name = self.expect_name("an instance name")?;
                self.expect_punct(";")?;
                a.instances.push(Instance { type_name, name });
            } else if self.eat_word("connection") {
                let connector = self.expect_name("a connector name")?;
                let name = self.expect_name("a connection name")?;
                self.expect_punct("(")?;
                let mut ends = Vec::new();
                while !self.eat_punct(")") {
                    ends.push(self.end()?);
                    if !self.eat_punct(",") {
                        self.expect_punct(")")?;
                        break;
                    }
                }
                self.expect_punct(";")?;
                a.connections.push(Connection { connector, name, ends });
            } else if self.is_word("group") || self.is_word("export") {
                let word = describe(&self.peek().tok);
                return err(&pos, format!("{word} is not supported by this compiler"));
            } else {
                return self.unexpected("'component', 'connection' or '}' in composition");
            }
        }
    }

    fn end(&mut self) -> Result<End> {
        let side = if self.eat_word("from") {
            EndSide::From
        } else if self.eat_word("to") {
            EndSide::To
        } else {
            return self.unexpected("'from' or 'to'");
        };
        let instance = self.expect_name("an instance name")?;
        self.expect_punct(".")?;
        let interface = self.expect_name("an interface name")?;
        if self.is_punct(".") {
            return err(&self.pos(), "a connection end is 'instance.interface' (groups are not supported)");
        }
        Ok(End { side, instance, interface })
    }

    fn configuration(&mut self, a: &mut Assembly) -> Result<()> {
        loop {
            if self.eat_punct("}") {
                return Ok(());
            }
            if self.eat_punct(";") {
                continue;
            }
            let target = self.expect_name("an instance or connection name")?;
            self.expect_punct(".")?;
            let attribute = self.expect_c_name("an attribute name")?;
            if self.is_punct(".") {
                return err(&self.pos(), "a setting is exactly 'name.attribute = value;' (no three-part names)");
            }
            if self.is_punct("<-") {
                return err(&self.pos(), "attribute references ('<-') are not supported by this compiler");
            }
            self.expect_punct("=")?;
            let value = self.value()?;
            self.expect_punct(";")?;
            a.settings.push(Setting { target, attribute, value });
        }
    }
}

/// Parses the tokens of one file into its top-level items.
pub fn parse(tokens: Vec<Token>) -> Result<Vec<Item>> {
    Parser { tokens, at: 0, depth: 0 }.file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;
    use std::sync::Arc;

    fn parse_text(text: &str) -> Result<Vec<Item>> {
        parse(lex(&Arc::from("t.camkes"), text)?)
    }

    fn setting_value(expr: &str) -> ValueKind {
        let text = format!("assembly {{ composition {{}} configuration {{ a.b = {expr}; }} }}");
        match &parse_text(&text).unwrap()[0] {
            Item::Assembly(a) => a.settings[0].value.kind.clone(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn folds_constant_expressions_like_c() {
        assert_eq!(setting_value("-0x10 + (1 << 12) * 2 % 7"), ValueKind::Int(-0x10 + ((1 << 12) * 2) % 7));
        assert_eq!(setting_value("1 ? 2 : 3"), ValueKind::Int(2));
        assert_eq!(setting_value("~0"), ValueKind::Int(-1));
        assert_eq!(setting_value("!0"), ValueKind::Int(1));
        assert_eq!(setting_value("3 >= 2 && 1"), ValueKind::Int(1));
        assert_eq!(setting_value("2 ** 10"), ValueKind::Int(1024));
        assert_eq!(setting_value("true"), ValueKind::Int(1));
        assert_eq!(setting_value("False"), ValueKind::Int(0));
        assert_eq!(setting_value("2.5"), ValueKind::Float(2.5));
        assert_eq!(setting_value("\"con\" \"cat\""), ValueKind::Str("concat".into()));
    }

    #[test]
    fn lists_and_dicts() {
        match setting_value("[1, \"a\", [2], {\"k\": 3},]") {
            ValueKind::List(items) => assert_eq!(items.len(), 4),
            other => panic!("{other:?}"),
        }
        match setting_value("{\"name\": \"n\", 3: \"three\",}") {
            ValueKind::Dict(entries) => assert_eq!(entries.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn procedure_types_are_normalised() {
        let items = parse_text(
            "procedure P { include <stdint.h>; unsigned get(in integer a, out signed int b, inout bool c, refin string d, int e[],); void f(void); };",
        )
        .unwrap();
        let Item::Procedure(p) = &items[0] else { panic!() };
        assert_eq!(p.methods[0].ret.as_ref().unwrap().text, "unsigned int");
        let types: Vec<_> = p.methods[0].params.iter().map(|p| p.ty.text.as_str()).collect();
        assert_eq!(types, ["int", "int", "boolean", "string", "int"]);
        assert_eq!(p.methods[0].params[1].direction, Direction::Out);
        assert!(p.methods[0].params[4].array);
        assert!(p.methods[1].params.is_empty());
    }

    #[test]
    fn dataport_sizes_are_canonical() {
        let items =
            parse_text("component C { dataport Buf(0x1000) a; dataport Buf(2*4096) b; dataport Buf c; }").unwrap();
        let Item::Component(c) = &items[0] else { panic!() };
        let spellings: Vec<_> = c.interfaces.iter().map(|i| i.type_name.text.as_str()).collect();
        assert_eq!(spellings, ["Buf(4096)", "Buf(8192)", "Buf"]);
    }

    #[test]
    fn user_connectors_parse() {
        parse_text("connector K { from Procedures with 0 threads; to hardware Event; attribute string x = \"y\"; }")
            .unwrap();
    }
}
