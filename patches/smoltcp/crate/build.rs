// smoltcp's build script, from the patched tree tools/patched-crates.sh
// unpacks (see Cargo.toml here). Included rather than named in the
// manifest: smoltcp's script asks to rerun when `build.rs` changes, a path
// cargo takes relative to this directory, so this file must exist.
// "couldn't read .../.patched-crates/...": run tools/patched-crates.sh.
include!("../../../.patched-crates/smoltcp-0.14.0/build.rs");
