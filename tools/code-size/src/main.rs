//! Prints the largest production file and function of the tree, and fails
//! when any file or function is past its limit.
//!
//! usage: code-size [ROOT] [--max-file LINES] [--max-fn LINES] [--top N]
//!
//! Production code is every Rust file under `components/`, `libs/`,
//! `roottask/`, `tools/` and `examples/` except what only tests compile:
//! `tests/` folders (integration tests and snapshots), modules declared
//! under `#[cfg(test)]` (with everything they declare in turn), and items
//! marked `#[cfg(test)]` inside a file, whose lines are not counted. A
//! function is measured from its `fn` keyword to its closing brace, so its
//! doc comment does not count against it. The limits keep every file small
//! enough to read in one sitting (800 lines) and every function small enough
//! to hold in one's head (120).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use syn::spanned::Spanned;
use syn::visit::Visit;

/// The folders whose Rust is checked, relative to the root.
const TREES: [&str; 5] = ["components", "libs", "roottask", "tools", "examples"];

/// Folder names never descended into: build output and test-only trees.
const SKIPPED_DIRS: [&str; 4] = ["target", "tests", "corpus", "artifacts"];

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("code size: {message}");
            ExitCode::from(2)
        }
    }
}

struct Options {
    root: PathBuf,
    max_file: usize,
    max_fn: usize,
    top: usize,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options { root: PathBuf::from("."), max_file: 800, max_fn: 120, top: 5 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            let value = args.next().ok_or(format!("{name} needs a value"))?;
            value.parse().map_err(|_| format!("{name}: `{value}` is not a number of lines"))
        };
        match arg.as_str() {
            "--max-file" => options.max_file = number("--max-file")?,
            "--max-fn" => options.max_fn = number("--max-fn")?,
            "--top" => options.top = number("--top")?,
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            path => options.root = PathBuf::from(path),
        }
    }
    Ok(options)
}

/// A function's size and where it starts.
struct Function {
    file: PathBuf,
    line: usize,
    name: String,
    lines: usize,
}

fn run() -> Result<bool, String> {
    let options = parse_args()?;
    let mut files = Vec::new();
    for tree in TREES {
        collect_rust_files(&options.root.join(tree), &mut files)?;
    }
    if files.is_empty() {
        return Err(format!("no Rust files under {}: wrong root?", options.root.display()));
    }
    let parsed = parse_all(&files)?;
    let test_only = test_only_files(&parsed);

    let mut file_sizes: Vec<(usize, PathBuf)> = Vec::new();
    let mut functions = Vec::new();
    for (path, file) in &parsed {
        if test_only.contains(path) {
            continue;
        }
        let mut sizer = Sizer { file: path, test_lines: BTreeSet::new(), functions: &mut functions };
        sizer.visit_file(&file.ast);
        let lines = file.lines - sizer.test_lines.len();
        file_sizes.push((lines, path.clone()));
    }
    file_sizes.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    functions.sort_by(|a, b| b.lines.cmp(&a.lines).then_with(|| a.file.cmp(&b.file)));

    let show = |path: &Path| path.strip_prefix(&options.root).unwrap_or(path).display().to_string();
    println!("code size: {} production files, {} functions", file_sizes.len(), functions.len());
    for (lines, path) in file_sizes.iter().take(options.top) {
        println!("  file {lines:5} lines  {}", show(path));
    }
    for f in functions.iter().take(options.top) {
        println!("  fn   {:5} lines  {}:{} {}", f.lines, show(&f.file), f.line, f.name);
    }
    let big_files: Vec<_> = file_sizes.iter().filter(|(lines, _)| *lines > options.max_file).collect();
    let big_fns: Vec<_> = functions.iter().filter(|f| f.lines > options.max_fn).collect();
    for (lines, path) in &big_files {
        println!("code size: {} has {lines} production lines (limit {})", show(path), options.max_file);
    }
    for f in &big_fns {
        println!(
            "code size: {}:{} fn {} has {} lines (limit {})",
            show(&f.file),
            f.line,
            f.name,
            f.lines,
            options.max_fn
        );
    }
    if big_files.is_empty() && big_fns.is_empty() {
        println!(
            "code size: PASS (largest file {} lines, limit {}; largest function {} lines, limit {})",
            file_sizes.first().map_or(0, |f| f.0),
            options.max_file,
            functions.first().map_or(0, |f| f.lines),
            options.max_fn
        );
        Ok(true)
    } else {
        println!(
            "code size: FAIL ({} files over {} lines, {} functions over {} lines)",
            big_files.len(),
            options.max_file,
            big_fns.len(),
            options.max_fn
        );
        Ok(false)
    }
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut entries: Vec<_> = entries
        .map(|e| e.map(|e| e.path()).map_err(|e| format!("{}: {e}", dir.display())))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name) && !name.starts_with('.') {
                collect_rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

struct Parsed {
    ast: syn::File,
    lines: usize,
}

fn parse_all(files: &[PathBuf]) -> Result<BTreeMap<PathBuf, Parsed>, String> {
    let mut parsed = BTreeMap::new();
    for path in files {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let ast = syn::parse_file(&text).map_err(|e| {
            let at = e.span().start();
            format!("{}:{}:{}: {e}", path.display(), at.line, at.column + 1)
        })?;
        parsed.insert(path.clone(), Parsed { ast, lines: text.lines().count() });
    }
    Ok(parsed)
}

/// Whether an attribute list holds `#[cfg(test)]` (or `#[cfg(all(test, ..))]`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = attr.meta.require_list() else {
            return false;
        };
        let tokens = list.tokens.to_string();
        let tokens = tokens.replace(' ', "");
        tokens == "test" || (tokens.starts_with("all(") && tokens[4..].split([',', ')']).any(|t| t == "test"))
    })
}

/// The files only `#[cfg(test)]` module declarations reach, transitively.
fn test_only_files(parsed: &BTreeMap<PathBuf, Parsed>) -> BTreeSet<PathBuf> {
    let mut test_only = BTreeSet::new();
    let mut pending: Vec<PathBuf> = Vec::new();
    for (path, file) in parsed {
        for (child, test) in declared_modules(path, &file.ast.items) {
            if test {
                pending.push(child);
            }
        }
    }
    while let Some(path) = pending.pop() {
        if !test_only.insert(path.clone()) {
            continue;
        }
        if let Some(file) = parsed.get(&path) {
            pending.extend(declared_modules(&path, &file.ast.items).into_iter().map(|(c, _)| c));
        }
    }
    test_only
}

/// The files a file's `mod name;` declarations name, each with whether the
/// declaration is test-only. `#[path]` is honoured; inline modules are
/// searched for nested declarations.
fn declared_modules(path: &Path, items: &[syn::Item]) -> Vec<(PathBuf, bool)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let base = if matches!(stem, "mod" | "lib" | "main") { dir.to_path_buf() } else { dir.join(stem) };
    let mut out = Vec::new();
    walk_modules(&base, dir, items, false, &mut out);
    out
}

fn walk_modules(base: &Path, dir: &Path, items: &[syn::Item], test: bool, out: &mut Vec<(PathBuf, bool)>) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let test = test || is_test_only(&m.attrs);
        let name = m.ident.to_string();
        let explicit = m.attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else { return None };
            let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value else {
                return None;
            };
            Some(dir.join(s.value()))
        });
        match &m.content {
            None => {
                let child = explicit.unwrap_or_else(|| {
                    let flat = base.join(format!("{name}.rs"));
                    if flat.exists() {
                        flat
                    } else {
                        base.join(&name).join("mod.rs")
                    }
                });
                out.push((child, test));
            }
            Some((_, inner)) => walk_modules(&base.join(&name), dir, inner, test, out),
        }
    }
}

/// Measures one file: the lines of its test-only items and its functions.
struct Sizer<'a> {
    file: &'a Path,
    test_lines: BTreeSet<usize>,
    functions: &'a mut Vec<Function>,
}

impl Sizer<'_> {
    fn function(&mut self, name: &syn::Ident, sig: &syn::Signature, body: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = body.brace_token.span.close().end().line;
        self.functions.push(Function {
            file: self.file.to_path_buf(),
            line: start,
            name: name.to_string(),
            lines: end + 1 - start,
        });
    }

    /// Counts an item's lines as test code; true if it is test-only.
    fn skip_test(&mut self, attrs: &[syn::Attribute], span: proc_macro2::Span) -> bool {
        if !is_test_only(attrs) {
            return false;
        }
        let from = attrs.first().map_or(span.start().line, |a| a.span().start().line);
        self.test_lines.extend(from..=span.end().line);
        true
    }
}

impl<'ast> Visit<'ast> for Sizer<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => &[],
        };
        if self.skip_test(attrs, item.span()) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if self.skip_test(&item.attrs, item.span()) {
            return;
        }
        self.function(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(body) = &item.default {
            self.function(&item.sig.ident, &item.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}
