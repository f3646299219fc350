//! Builds the generated hello glue (and pci_config's) and the `glue-rt`
//! crate it uses against a mock `sel4` crate with rustc, runs client against server in one process, and checks
//! that a read-only dataport cannot be written (a compile error).

use camkes::imports::DiskFiles;
use std::path::{Path, PathBuf};
use std::process::Command;

fn rustc() -> Command {
    let mut cmd = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    cmd.args(["--edition", "2021"]);
    cmd
}

fn setup(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("camkes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for system in ["../../examples/hello/hello.camkes", "../../camkes/iolite.camkes"] {
        let out = camkes::compile(Path::new(system), &[PathBuf::from("../../camkes")], &DiskFiles)
            .unwrap_or_else(|d| panic!("{d}"));
        for (file, text) in out.glue {
            std::fs::write(dir.join(file), text).unwrap();
        }
    }
    let status = rustc()
        .args(["--crate-type", "rlib", "--crate-name", "sel4", "-o"])
        .arg(dir.join("libsel4.rlib"))
        .arg("tests/mock/mock_sel4.rs")
        .status()
        .unwrap();
    assert!(status.success(), "mock sel4 did not compile");
    // The glue's support crate, the real one, built on the mock bindings.
    let status = rustc()
        .args(["--crate-type", "rlib", "--crate-name", "glue_rt", "-o"])
        .arg(dir.join("libglue_rt.rlib"))
        .arg("--extern")
        .arg(format!("sel4={}", dir.join("libsel4.rlib").display()))
        .arg("../../libs/glue-rt/src/lib.rs")
        .status()
        .unwrap();
    assert!(status.success(), "glue-rt did not compile against the mock sel4");
    dir
}

fn build(dir: &Path, main: &Path, exe: &str) -> std::process::Output {
    rustc()
        .env("GLUE_DIR", dir)
        .arg("--extern")
        .arg(format!("sel4={}", dir.join("libsel4.rlib").display()))
        .arg("--extern")
        .arg(format!("glue_rt={}", dir.join("libglue_rt.rlib").display()))
        .arg("-L")
        .arg(dir)
        .arg("-o")
        .arg(dir.join(exe))
        .arg(main)
        .output()
        .unwrap()
}

#[test]
fn client_and_server_glue_agree() {
    let dir = setup("loopback");
    let output = build(&dir, Path::new("tests/mock/loopback.rs"), "loopback");
    assert!(output.status.success(), "glue did not compile:\n{}", String::from_utf8_lossy(&output.stderr));
    let run = Command::new(dir.join("loopback")).output().unwrap();
    assert!(run.status.success(), "loopback failed:\n{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "loopback ok\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_read_only_dataport_offers_no_mutable_access() {
    let dir = setup("readonly");
    let main = dir.join("write_ro.rs");
    std::fs::write(
        &main,
        "mod reader { include!(concat!(env!(\"GLUE_DIR\"), \"/hello_reader.rs\")); }
fn main() { let mut d = reader::glue::buffer::get(); d.write(0, b\"x\"); }\n",
    )
    .unwrap();
    let output = build(&dir, &main, "write_ro");
    assert!(!output.status.success(), "writing a read-only dataport compiled");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no method named `write` found for struct `Dataport<ReadOnly>`"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
