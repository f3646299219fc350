//! Values ("items" in upstream's grammar): strings, lists, dicts and
//! constant expressions, which are folded here with C's operators and
//! precedence (plus `**`), as upstream folds them. Every level of nesting
//! goes through [`Parser::nested`], so no input can take the recursion
//! further than [`MAX_NESTING`](super::MAX_NESTING) levels.

use super::Parser;
use crate::ast::{Value, ValueKind};
use crate::diag::{err, Result};
use crate::lexer::Tok;

/// A folded number: integers stay exact, a float makes the result a float.
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Parser {
    /// An "item": strings, lists, dicts or a constant expression.
    pub(super) fn value(&mut self) -> Result<Value> {
        let pos = self.pos();
        match self.peek().tok {
            Tok::Str(_) => Ok(Value { kind: ValueKind::Str(self.strings()), pos }),
            Tok::Punct("[") => self.nested(&pos.clone(), |p| {
                p.bump();
                let mut items = Vec::new();
                while !p.eat_punct("]") {
                    items.push(p.value()?);
                    if !p.eat_punct(",") {
                        p.expect_punct("]")?;
                        break;
                    }
                }
                Ok(Value { kind: ValueKind::List(items), pos })
            }),
            Tok::Punct("{") => self.nested(&pos.clone(), |p| {
                p.bump();
                let mut entries = Vec::new();
                while !p.eat_punct("}") {
                    let key = p.value()?;
                    if !matches!(key.kind, ValueKind::Str(_) | ValueKind::Int(_) | ValueKind::Float(_)) {
                        return err(&key.pos, "a dict key must be a string or a number");
                    }
                    p.expect_punct(":")?;
                    entries.push((key, p.value()?));
                    if !p.eat_punct(",") {
                        p.expect_punct("}")?;
                        break;
                    }
                }
                Ok(Value { kind: ValueKind::Dict(entries), pos })
            }),
            _ => self.expr(),
        }
    }

    /// A constant expression, folded with C operators and precedence.
    pub(super) fn expr(&mut self) -> Result<Value> {
        let pos = self.pos();
        let kind = match self.ternary()? {
            Num::Int(n) => ValueKind::Int(n),
            Num::Float(x) => ValueKind::Float(x),
        };
        Ok(Value { kind, pos })
    }

    fn ternary(&mut self) -> Result<Num> {
        let cond = self.binary(0)?;
        let pos = self.pos();
        if self.eat_punct("?") {
            let yes = self.nested(&pos, |p| p.ternary())?;
            let pos = self.pos();
            self.expect_punct(":")?;
            let no = self.nested(&pos, |p| p.ternary())?;
            return Ok(if truthy(cond) { yes } else { no });
        }
        Ok(cond)
    }

    /// Precedence climbing over the binary operators (all left
    /// associative): folds the operators of level `min` and above. A loop
    /// per level rather than a function per level, so each parenthesis
    /// costs a few stack frames, not one per precedence level.
    fn binary(&mut self, min: usize) -> Result<Num> {
        /// Lowest precedence first.
        const LEVELS: &[&[&str]] = &[
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", "<=", ">", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let mut left = self.unary()?;
        loop {
            let (op, level) = match &self.peek().tok {
                Tok::Punct(p) => match LEVELS.iter().position(|ops| ops.contains(p)) {
                    Some(level) if level >= min => (*p, level),
                    _ => return Ok(left),
                },
                _ => return Ok(left),
            };
            let pos = self.bump().pos;
            let right = self.binary(level + 1)?;
            left = fold(op, left, right)
                .ok_or(())
                .or_else(|_| err(&pos, format!("cannot fold '{op}' in this constant expression")))?;
        }
    }

    fn unary(&mut self) -> Result<Num> {
        let pos = self.pos();
        for op in ["-", "+", "!", "~"] {
            if self.eat_punct(op) {
                let operand = self.nested(&pos, |p| p.unary())?;
                return match (op, operand) {
                    ("-", Num::Int(n)) => n
                        .checked_neg()
                        .map(Num::Int)
                        .ok_or(())
                        .or_else(|_| err(&pos, "cannot fold '-' in this constant expression")),
                    ("-", Num::Float(x)) => Ok(Num::Float(-x)),
                    ("+", n) => Ok(n),
                    ("!", n) => Ok(Num::Int(!truthy(n) as i128)),
                    ("~", Num::Int(n)) => Ok(Num::Int(!n)),
                    _ => err(&pos, format!("cannot apply '{op}' to a float")),
                };
            }
        }
        let base = self.primary()?;
        if self.is_punct("**") {
            let pos = self.bump().pos;
            let exponent = self.nested(&pos, |p| p.unary())?;
            return fold("**", base, exponent)
                .ok_or(())
                .or_else(|_| err(&pos, "cannot fold '**' in this constant expression"));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Num> {
        let token = self.peek().clone();
        match token.tok {
            Tok::Int(n) => {
                self.bump();
                Ok(Num::Int(n))
            }
            Tok::Float(x) => {
                self.bump();
                Ok(Num::Float(x))
            }
            Tok::Ident(w) if w == "true" || w == "True" => {
                self.bump();
                Ok(Num::Int(1))
            }
            Tok::Ident(w) if w == "false" || w == "False" => {
                self.bump();
                Ok(Num::Int(0))
            }
            Tok::Punct("(") => self.nested(&token.pos, |p| {
                p.bump();
                let n = p.ternary()?;
                p.expect_punct(")")?;
                Ok(n)
            }),
            Tok::Ident(w) => err(
                &token.pos,
                format!("a value must be a literal; bare identifier '{w}' is not allowed (quote it for a string)"),
            ),
            _ => self.unexpected("a value"),
        }
    }
}

fn truthy(n: Num) -> bool {
    match n {
        Num::Int(i) => i != 0,
        Num::Float(x) => x != 0.0,
    }
}

/// Folds one binary operator; `None` for overflow, division by zero or an
/// integer-only operator applied to a float.
fn fold(op: &str, a: Num, b: Num) -> Option<Num> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(Num::Int(match op {
            "||" => (x != 0 || y != 0) as i128,
            "&&" => (x != 0 && y != 0) as i128,
            "|" => x | y,
            "^" => x ^ y,
            "&" => x & y,
            "==" => (x == y) as i128,
            "!=" => (x != y) as i128,
            "<" => (x < y) as i128,
            "<=" => (x <= y) as i128,
            ">" => (x > y) as i128,
            ">=" => (x >= y) as i128,
            "<<" => x.checked_shl(u32::try_from(y).ok()?)?,
            ">>" => x.checked_shr(u32::try_from(y).ok()?)?,
            "+" => x.checked_add(y)?,
            "-" => x.checked_sub(y)?,
            "*" => x.checked_mul(y)?,
            "/" => x.checked_div(y)?,
            "%" => x.checked_rem(y)?,
            "**" => x.checked_pow(u32::try_from(y).ok()?)?,
            _ => return None,
        })),
        (a, b) => {
            let f = |n| match n {
                Num::Int(i) => i as f64,
                Num::Float(x) => x,
            };
            let (x, y) = (f(a), f(b));
            Some(match op {
                "+" => Num::Float(x + y),
                "-" => Num::Float(x - y),
                "*" => Num::Float(x * y),
                "/" if y != 0.0 => Num::Float(x / y),
                "**" => Num::Float(x.powf(y)),
                "==" => Num::Int((x == y) as i128),
                "!=" => Num::Int((x != y) as i128),
                "<" => Num::Int((x < y) as i128),
                "<=" => Num::Int((x <= y) as i128),
                ">" => Num::Int((x > y) as i128),
                ">=" => Num::Int((x >= y) as i128),
                "||" => Num::Int((x != 0.0 || y != 0.0) as i128),
                "&&" => Num::Int((x != 0.0 && y != 0.0) as i128),
                _ => return None,
            })
        }
    }
}
