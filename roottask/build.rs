//! Embeds the system image: the spec the CAmkES compiler wrote and every
//! component ELF, from the folder named by IOLITE_SYSTEM_DIR (made by
//! tools/image/build-system.sh). seL4 5.0 loads only the first multiboot
//! module, so the components travel inside the root task.
//!
//! Without IOLITE_SYSTEM_DIR the root task carries no system and only runs
//! its self-test (that is what a plain `cargo build -p roottask` gives).

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=IOLITE_SYSTEM_DIR");
    // `fault_injection`: the spec grants the test console injection into
    // some component (test images only); only then is the supervisor's
    // command reader built in (src/inject.rs).
    println!("cargo::rustc-check-cfg=cfg(fault_injection)");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("system_image.rs");
    let mut code = String::from(
        "/// Page-aligned bytes, so ELF and spec headers can be read in place.\n\
         #[repr(C, align(4096))]\n#[allow(dead_code)]\npub struct Aligned<T: ?Sized>(pub T);\n",
    );
    match std::env::var_os("IOLITE_SYSTEM_DIR") {
        None => {
            code.push_str("/// No system was built into this image.\npub static SPEC: &[u8] = &[];\n");
            code.push_str("/// Component ELFs by name.\npub static ELVES: &[(&str, &[u8])] = &[];\n");
        }
        Some(dir) => {
            let dir = PathBuf::from(dir);
            let spec = dir.join("system.spec");
            let list = dir.join("elves.txt");
            println!("cargo:rerun-if-changed={}", spec.display());
            let blob = std::fs::read(&spec).unwrap_or_else(|e| panic!("cannot read {}: {e}", spec.display()));
            let decoded = system_spec::SystemSpec::decode(&blob).unwrap_or_else(|e| panic!("{}: {e}", spec.display()));
            if decoded.components.iter().any(|c| c.fault_injection) {
                println!("cargo:rustc-cfg=fault_injection");
            }
            println!("cargo:rerun-if-changed={}", list.display());
            let names =
                std::fs::read_to_string(&list).unwrap_or_else(|e| panic!("cannot read {}: {e}", list.display()));
            writeln!(
                code,
                "static SPEC_BYTES: &Aligned<[u8]> = &Aligned(*include_bytes!({:?}));\n\
                 /// The system spec (postcard, see the system-spec crate).\n\
                 pub static SPEC: &[u8] = &SPEC_BYTES.0;",
                spec.display().to_string()
            )
            .unwrap();
            let mut table = String::new();
            for (i, name) in names.lines().map(str::trim).filter(|n| !n.is_empty()).enumerate() {
                let elf = dir.join("elves").join(format!("{name}.elf"));
                println!("cargo:rerun-if-changed={}", elf.display());
                writeln!(
                    code,
                    "static ELF_{i}: &Aligned<[u8]> = &Aligned(*include_bytes!({:?}));",
                    elf.display().to_string()
                )
                .unwrap();
                write!(table, "({name:?}, &ELF_{i}.0), ").unwrap();
            }
            writeln!(code, "/// Component ELFs by name.\npub static ELVES: &[(&str, &[u8])] = &[{table}];").unwrap();
        }
    }
    std::fs::write(&out, code).unwrap();
}
