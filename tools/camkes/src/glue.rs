//! Per-component Rust glue (placeholder, filled in below).
use crate::check::System;
use crate::diag::Result;

/// Generates one glue file per instantiated software component type.
pub fn generate(_system: &System, _source: &str) -> Result<Vec<(String, String)>> {
    Ok(Vec::new())
}
