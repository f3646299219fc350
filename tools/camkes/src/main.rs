//! `camkes`: the command-line front end. See README.md.

use camkes::imports::DiskFiles;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  camkes compile [--import-path DIR]... [--set INST.ATTR=VALUE]... --spec-out FILE [--glue-out DIR] [--spec-text FILE] [--elf-list FILE] SYSTEM.camkes
  camkes check [--import-path DIR]... [--set INST.ATTR=VALUE]... SYSTEM.camkes

compile: check SYSTEM.camkes, write the binary system spec to FILE (and a
readable listing to --spec-text), and one Rust glue file per software
component type to DIR, and the ELF (= crate) names the image needs, one per
line, to --elf-list. Files whose contents are unchanged are not rewritten, so
incremental builds stay incremental. check: only check. --set overrides
(or adds) one configuration setting of the assembly, the value in ADL syntax
(1, \"text\", [...]). Errors go to stderr as
'file:line:col: error: reason', and the exit code is 1.";

struct Args {
    command: String,
    import_paths: Vec<PathBuf>,
    settings: Vec<String>,
    spec_out: Option<PathBuf>,
    spec_text: Option<PathBuf>,
    glue_out: Option<PathBuf>,
    elf_list: Option<PathBuf>,
    input: PathBuf,
}

/// Hand-rolled: six options do not justify a dependency.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let command = args.next().ok_or("missing command")?;
    if command != "compile" && command != "check" {
        return Err(format!("unknown command '{command}'"));
    }
    let (mut import_paths, mut settings, mut spec_out, mut spec_text, mut glue_out, mut elf_list, mut input) =
        (Vec::new(), Vec::new(), None, None, None, None, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().map(PathBuf::from).ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--import-path" | "-I" => import_paths.push(value(&arg)?),
            "--set" => settings.push(value(&arg)?.display().to_string()),
            "--spec-out" => spec_out = Some(value(&arg)?),
            "--spec-text" => spec_text = Some(value(&arg)?),
            "--glue-out" => glue_out = Some(value(&arg)?),
            "--elf-list" => elf_list = Some(value(&arg)?),
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with('-') => return Err(format!("unknown option '{flag}'")),
            _ if input.is_some() => return Err(format!("more than one input file ('{arg}')")),
            _ => input = Some(PathBuf::from(arg)),
        }
    }
    let input = input.ok_or("missing input file")?;
    if command == "compile" && spec_out.is_none() && glue_out.is_none() {
        return Err("compile needs --spec-out and/or --glue-out".into());
    }
    Ok(Args { command, import_paths, settings, spec_out, spec_text, glue_out, elf_list, input })
}

fn run(args: Args) -> Result<(), String> {
    let settings = args
        .settings
        .iter()
        .map(|s| camkes::overrides::parse_setting(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|d| d.to_string())?;
    if args.command == "check" {
        camkes::check_file_with(&args.input, &args.import_paths, &settings, &DiskFiles).map_err(|d| d.to_string())?;
        return Ok(());
    }
    let output =
        camkes::compile_with(&args.input, &args.import_paths, &settings, &DiskFiles).map_err(|d| d.to_string())?;
    let write = |path: &PathBuf, bytes: &[u8]| {
        if std::fs::read(path).is_ok_and(|old| old == bytes) {
            return Ok(());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("error: cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, bytes).map_err(|e| format!("error: cannot write {}: {e}", path.display()))
    };
    if let Some(path) = &args.spec_out {
        let bytes = output.spec.encode().map_err(|e| format!("error: cannot encode the spec: {e}"))?;
        write(path, &bytes)?;
    }
    if let Some(path) = &args.spec_text {
        let mut text = camkes::spec::describe(&output.spec);
        text.push_str("IO-Lite pools (ids derived from the assembly):\n");
        text.push_str(&camkes::pools::table(&output.system));
        write(path, text.as_bytes())?;
    }
    if let Some(dir) = &args.glue_out {
        for (name, text) in &output.glue {
            write(&dir.join(name), text.as_bytes())?;
        }
    }
    if let Some(path) = &args.elf_list {
        let mut elves: Vec<&str> = output.spec.components.iter().map(|c| c.elf.as_str()).collect();
        elves.sort_unstable();
        elves.dedup();
        let mut text = elves.join("\n");
        text.push('\n');
        write(path, text.as_bytes())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            if !problem.is_empty() {
                eprintln!("camkes: {problem}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
    }
}
