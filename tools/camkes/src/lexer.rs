//! Turns CAmkES ADL text into tokens with positions, following upstream's
//! lexical rules (see docs in the crate README): `//` and `/* */` comments,
//! `#` lines skipped as cpp line markers, strings without escapes, lowercase
//! `0x` only, no leading-zero decimals.

use crate::diag::{err, Pos, Result};
use std::sync::Arc;

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An identifier or keyword; keywords are told apart by the parser.
    Ident(String),
    /// An integer literal (decimal or `0x` hex).
    Int(i128),
    /// A float literal (`2.5`).
    Float(f64),
    /// A double-quoted string, quotes removed.
    Str(String),
    /// The `<path>` of `import <...>;` or `include <...>;`.
    AnglePath(String),
    /// Punctuation or an operator.
    Punct(&'static str),
    /// End of input.
    Eof,
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its first character.
    pub pos: Pos,
}

/// Longest first, so `<<` wins over `<`.
const PUNCT: &[&str] = &[
    "**", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "<-", "{", "}", "(", ")", "[", "]", ";", ",", ".", "=",
    "<", ">", ":", "?", "|", "&", "^", "!", "~", "+", "-", "*", "/", "%",
];

/// The longest identifier, in characters. Names end up where length is
/// bounded: an instance's name in its 64-byte start record and in restart
/// requests (`component_runtime::start::MAX_NAME_LEN`), a component type's
/// snake_case name (up to twice as long) in the file name of its glue and
/// its crate's folder. Refusing a longer one here, at its position, stops
/// the compile before any output is written.
pub const MAX_IDENT_LEN: usize = 64;

/// Directives that would need the C preprocessor, which our subset does not
/// run; rejecting them keeps a file meaning the same with and without cpp.
const CPP_DIRECTIVES: &[&str] =
    &["define", "undef", "include", "if", "ifdef", "ifndef", "elif", "else", "endif", "error", "pragma", "warning"];

struct Lexer<'a> {
    chars: Vec<char>,
    at: usize,
    line: u32,
    col: u32,
    file: &'a Arc<str>,
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        Pos { file: self.file.clone(), line: self.line, col: self.col }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied()?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn at_line_start(&self) -> bool {
        self.chars[..self.at].iter().rev().take_while(|c| **c != '\n').all(|c| c.is_whitespace())
    }

    /// Skips whitespace, comments and `#` lines.
    fn skip_trivia(&mut self) -> Result<()> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('/'), Some('/')) => {
                    while !matches!(self.peek(0), None | Some('\n')) {
                        self.bump();
                    }
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match (self.peek(0), self.peek(1)) {
                            (Some('*'), Some('/')) => {
                                self.bump();
                                self.bump();
                                break;
                            }
                            (Some(_), _) => {
                                self.bump();
                            }
                            (None, _) => return err(&start, "unterminated block comment"),
                        }
                    }
                }
                (Some('#'), _) if self.at_line_start() => {
                    let start = self.pos();
                    let line: String = self.chars[self.at + 1..].iter().take_while(|c| **c != '\n').collect();
                    let word: String =
                        line.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if CPP_DIRECTIVES.contains(&word.as_str()) {
                        return err(
                            &start,
                            format!("preprocessor directive '#{word}' is not supported: .camkes files here must not need cpp"),
                        );
                    }
                    while !matches!(self.peek(0), None | Some('\n')) {
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn number(&mut self, pos: Pos) -> Result<Tok> {
        if self.peek(0) == Some('0') && matches!(self.peek(1), Some('x' | 'X')) {
            if self.peek(1) == Some('X') {
                return err(&pos, "hex literals need a lowercase '0x' prefix ('0X' is not CAmkES)");
            }
            self.bump();
            self.bump();
            let mut digits = String::new();
            while let Some(c) = self.peek(0).filter(|c| c.is_ascii_hexdigit()) {
                digits.push(c);
                self.bump();
            }
            if digits.is_empty() {
                return err(&pos, "'0x' must be followed by hex digits");
            }
            self.no_trailing_letters(&pos)?;
            return i128::from_str_radix(&digits, 16)
                .map(Tok::Int)
                .or_else(|_| err(&pos, "integer literal is too large"));
        }
        let mut digits = String::new();
        while let Some(c) = self.peek(0).filter(|c| c.is_ascii_digit()) {
            digits.push(c);
            self.bump();
        }
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            let mut fraction = String::new();
            while let Some(c) = self.peek(0).filter(|c| c.is_ascii_digit()) {
                fraction.push(c);
                self.bump();
            }
            self.no_trailing_letters(&pos)?;
            return Ok(Tok::Float(format!("{digits}.{fraction}").parse().expect("digits")));
        }
        if digits.len() > 1 && digits.starts_with('0') {
            return err(
                &pos,
                format!("decimal literal '{digits}' has a leading zero (write it without, or as 0x hex)"),
            );
        }
        self.no_trailing_letters(&pos)?;
        digits.parse().map(Tok::Int).or_else(|_| err(&pos, "integer literal is too large"))
    }

    fn no_trailing_letters(&self, pos: &Pos) -> Result<()> {
        match self.peek(0) {
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
                err(pos, format!("malformed number: unexpected '{c}' after the digits"))
            }
            _ => Ok(()),
        }
    }

    fn angle_path(&mut self, pos: Pos) -> Result<Tok> {
        self.bump();
        let mut path = String::new();
        loop {
            match self.bump() {
                Some('>') => break,
                Some('\n') | None => return err(&pos, "unterminated '<...>' path"),
                Some(c) => path.push(c),
            }
        }
        Ok(Tok::AnglePath(path.trim().to_string()))
    }
}

/// Splits `text` (the contents of `file`) into tokens, ending with
/// [`Tok::Eof`].
pub fn lex(file: &Arc<str>, text: &str) -> Result<Vec<Token>> {
    let mut lx = Lexer { chars: text.chars().collect(), at: 0, line: 1, col: 1, file };
    let mut tokens: Vec<Token> = Vec::new();
    loop {
        lx.skip_trivia()?;
        let pos = lx.pos();
        let Some(c) = lx.peek(0) else {
            tokens.push(Token { tok: Tok::Eof, pos });
            return Ok(tokens);
        };
        let after_import_word = matches!(
            tokens.last(),
            Some(Token { tok: Tok::Ident(word), .. }) if word == "import" || word == "include"
        );
        let tok = if c == '<' && after_import_word {
            lx.angle_path(pos.clone())?
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::new();
            while let Some(c) = lx.peek(0).filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
                word.push(c);
                lx.bump();
            }
            if word.len() > MAX_IDENT_LEN {
                return err(
                    &pos,
                    format!(
                        "identifier '{}...' is {} characters long; the limit is {MAX_IDENT_LEN}",
                        &word[..16],
                        word.len()
                    ),
                );
            }
            Tok::Ident(word)
        } else if c.is_ascii_digit() {
            lx.number(pos.clone())?
        } else if c == '"' {
            lx.bump();
            let mut s = String::new();
            loop {
                match lx.bump() {
                    Some('"') => break,
                    Some(c) => s.push(c),
                    None => return err(&pos, "unterminated string literal"),
                }
            }
            Tok::Str(s)
        } else if c == '\'' {
            return err(&pos, "single-quoted strings are not CAmkES; use double quotes");
        } else if let Some(p) = PUNCT.iter().find(|p| p.chars().enumerate().all(|(i, pc)| lx.peek(i) == Some(pc))) {
            for _ in 0..p.len() {
                lx.bump();
            }
            Tok::Punct(p)
        } else {
            return err(&pos, format!("unexpected character '{c}'"));
        };
        tokens.push(Token { tok, pos });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        lex(&Arc::from("t.camkes"), text).unwrap().into_iter().map(|t| t.tok).collect()
    }

    fn lex_err(text: &str) -> String {
        let e = lex(&Arc::from("t.camkes"), text).unwrap_err();
        format!("{}: {}", e.line_col(), e.message)
    }

    #[test]
    fn literals() {
        assert_eq!(
            toks("0 42 0x3f8 0xFF 2.5 \"a b\""),
            vec![
                Tok::Int(0),
                Tok::Int(42),
                Tok::Int(0x3f8),
                Tok::Int(0xff),
                Tok::Float(2.5),
                Tok::Str("a b".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn comments_and_line_markers_are_skipped() {
        let text = "# 1 \"x.camkes\"\n// line\n/* block\n * more */ a /**/ b\n  # 7\n";
        assert_eq!(toks(text), vec![Tok::Ident("a".into()), Tok::Ident("b".into()), Tok::Eof]);
    }

    #[test]
    fn angle_paths_only_after_import() {
        assert_eq!(
            toks("import <std_connector.camkes>; a < b"),
            vec![
                Tok::Ident("import".into()),
                Tok::AnglePath("std_connector.camkes".into()),
                Tok::Punct(";"),
                Tok::Ident("a".into()),
                Tok::Punct("<"),
                Tok::Ident("b".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let tokens = lex(&Arc::from("t"), "a\n  bc").unwrap();
        assert_eq!((tokens[1].pos.line, tokens[1].pos.col), (2, 3));
    }

    #[test]
    fn errors() {
        assert_eq!(lex_err("a /* never closed"), "1:3: unterminated block comment");
        assert_eq!(lex_err("\n 0X10"), "2:2: hex literals need a lowercase '0x' prefix ('0X' is not CAmkES)");
        assert!(lex_err("x = 010;").starts_with("1:5: decimal literal '010' has a leading zero"));
        assert_eq!(lex_err("'R'"), "1:1: single-quoted strings are not CAmkES; use double quotes");
        assert_eq!(lex_err("\"abc"), "1:1: unterminated string literal");
        assert!(lex_err("#define X 1").starts_with("1:1: preprocessor directive '#define'"));
        assert_eq!(lex_err("a $"), "1:3: unexpected character '$'");
    }
}
