//! Selects the system's copy mode at build time from IOLITE_COPY_MODE
//! (`iolite`, `flash` or `posix`; unset means `iolite`). CMake's COPY_MODE
//! option sets it for every component, so the whole image is built in one
//! mode; an environment variable rather than a cargo feature because it must
//! reach this crate through every component that depends on it.

fn main() {
    println!("cargo::rerun-if-env-changed=IOLITE_COPY_MODE");
    println!("cargo::rustc-check-cfg=cfg(iolite_copy_mode, values(\"iolite\", \"flash\", \"posix\"))");
    let mode = std::env::var("IOLITE_COPY_MODE").unwrap_or_else(|_| "iolite".into());
    match mode.as_str() {
        "iolite" | "flash" | "posix" => println!("cargo::rustc-cfg=iolite_copy_mode=\"{mode}\""),
        other => panic!("IOLITE_COPY_MODE={other:?}: expected iolite, flash or posix"),
    }
}
