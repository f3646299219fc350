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
    let mut outputs: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    if let Some(path) = &args.spec_out {
        let bytes = output.spec.encode().map_err(|e| format!("error: cannot encode the spec: {e}"))?;
        outputs.push((path.clone(), bytes));
    }
    if let Some(path) = &args.spec_text {
        let mut text = camkes::spec::describe(&output.spec);
        text.push_str("IO-Lite pools (ids derived from the assembly):\n");
        text.push_str(&camkes::pools::table(&output.system));
        outputs.push((path.clone(), text.into_bytes()));
    }
    if let Some(dir) = &args.glue_out {
        for (name, text) in &output.glue {
            outputs.push((dir.join(name), text.as_bytes().to_vec()));
        }
    }
    if let Some(path) = &args.elf_list {
        let mut elves: Vec<&str> = output.spec.components.iter().map(|c| c.elf.as_str()).collect();
        elves.sort_unstable();
        elves.dedup();
        let mut text = elves.join("\n");
        text.push('\n');
        outputs.push((path.clone(), text.into_bytes()));
    }
    write_all(&outputs)
}

/// Writes every output or, as far as the file system allows, none: each
/// changed file is first written whole to a temporary file beside it, and
/// only once all of them are written are they renamed into place (a rename
/// replaces a file atomically). So a failure part-way (a full disk, a path
/// that cannot be created) leaves no file half-written and no spec that
/// disagrees with the glue beside it. Files whose contents are unchanged are
/// not touched, so incremental builds stay incremental.
fn write_all(outputs: &[(PathBuf, Vec<u8>)]) -> Result<(), String> {
    let mut staged: Vec<(PathBuf, &PathBuf)> = Vec::new();
    let result = stage(outputs, &mut staged).and_then(|()| {
        for (temp, path) in &staged {
            std::fs::rename(temp, path).map_err(|e| format!("error: cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    });
    if result.is_err() {
        for (temp, _) in &staged {
            let _ = std::fs::remove_file(temp);
        }
    }
    result
}

/// Writes each changed output to its temporary file, recording it in
/// `staged` (so the caller can remove them all if one fails).
fn stage<'a>(outputs: &'a [(PathBuf, Vec<u8>)], staged: &mut Vec<(PathBuf, &'a PathBuf)>) -> Result<(), String> {
    for (path, bytes) in outputs {
        if std::fs::read(path).is_ok_and(|old| old == *bytes) {
            continue;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("error: cannot create {}: {e}", dir.display()))?;
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".tmp{}", std::process::id()));
        let temp = path.with_file_name(name);
        let written = std::fs::write(&temp, bytes);
        staged.push((temp, path));
        written.map_err(|e| format!("error: cannot write {}: {e}", path.display()))?;
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
