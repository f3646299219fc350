//! The Iolite CAmkES compiler: reads an assembly written in (a subset of)
//! upstream CAmkES ADL, checks it, and emits the static system spec and the
//! per-component Rust glue. See README.md for the subset and the layout.

#![deny(missing_docs)]

pub mod diag;
pub mod lexer;
pub mod ast;
pub mod parser;
