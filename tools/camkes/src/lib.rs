//! The Iolite CAmkES compiler: reads an assembly written in (a subset of)
//! upstream CAmkES ADL, checks it, and emits the static system spec and the
//! per-component Rust glue. See README.md for the subset and the layout.
//!
//! Stages: [`imports::load`] (lexer, parser, import resolution) gives the
//! items of all files in define-before-use order; [`check::check`] resolves
//! and checks them into a [`check::System`]; [`spec::build`] and
//! [`glue::generate`] emit the outputs.

#![deny(missing_docs)]

pub mod ast;
pub mod check;
pub mod diag;
pub mod glue;
pub mod imports;
pub mod lexer;
pub mod overrides;
pub mod parser;
pub mod pools;
pub mod refs;
pub mod spec;

use std::path::{Path, PathBuf};

/// Everything a successful compile produces.
#[derive(Debug)]
pub struct Output {
    /// The checked system.
    pub system: check::System,
    /// The static system spec (already validated).
    pub spec: system_spec::SystemSpec,
    /// Glue files: (file name, contents), one per instantiated software
    /// component type.
    pub glue: Vec<(String, String)>,
}

/// Loads and checks `root` without emitting anything (`camkes check`).
pub fn check_file(
    root: &Path,
    import_paths: &[PathBuf],
    files: &dyn imports::SourceFiles,
) -> diag::Result<check::System> {
    check_file_with(root, import_paths, &[], files)
}

/// As [`check_file`], with configuration overrides (`--set`, see
/// [`overrides`]) applied before checking.
pub fn check_file_with(
    root: &Path,
    import_paths: &[PathBuf],
    settings: &[ast::Setting],
    files: &dyn imports::SourceFiles,
) -> diag::Result<check::System> {
    let mut items = imports::load(root, import_paths, files)?;
    overrides::apply(&mut items, settings)?;
    let system = check::check(items, &imports::normalise(root).display().to_string())?;
    glue::check_supported(&system)?;
    refs::check(&system)?;
    Ok(system)
}

/// Loads, checks and emits (`camkes compile`).
pub fn compile(root: &Path, import_paths: &[PathBuf], files: &dyn imports::SourceFiles) -> diag::Result<Output> {
    compile_with(root, import_paths, &[], files)
}

/// As [`compile`], with configuration overrides (`--set`, see [`overrides`]).
pub fn compile_with(
    root: &Path,
    import_paths: &[PathBuf],
    settings: &[ast::Setting],
    files: &dyn imports::SourceFiles,
) -> diag::Result<Output> {
    let system = check_file_with(root, import_paths, settings, files)?;
    let spec = spec::build(&system)?;
    let glue = glue::generate(&system, &root.display().to_string())?;
    Ok(Output { system, spec, glue })
}
