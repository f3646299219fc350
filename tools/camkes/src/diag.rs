//! Source positions and the one kind of error the compiler reports.

use std::fmt;
use std::sync::Arc;

/// A place in a source file: the file as the user named it (or as an import
/// resolved it), and a 1-based line and column (columns count characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pos {
    /// The file's path as displayed in messages.
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// A compile error: where, and a one-line reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the problem is.
    pub pos: Pos,
    /// One line, no trailing period.
    pub message: String,
}

impl Diagnostic {
    /// An error at `pos`.
    pub fn new(pos: &Pos, message: impl Into<String>) -> Diagnostic {
        Diagnostic { pos: pos.clone(), message: message.into() }
    }

    /// `line:col`, the form tests compare against.
    pub fn line_col(&self) -> String {
        format!("{}:{}", self.pos.line, self.pos.col)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error: {}", self.pos, self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// Every stage stops at the first error: later errors are usually
/// consequences of the first, and one precise message is what a user fixes.
pub type Result<T> = std::result::Result<T, Diagnostic>;

/// Shorthand for returning an error at `pos`.
pub fn err<T>(pos: &Pos, message: impl Into<String>) -> Result<T> {
    Err(Diagnostic::new(pos, message))
}
