//! Import resolution: reads the root file and, depth first, every file it
//! imports, splicing each imported file's items in at the import so that
//! define-before-use works across files exactly as upstream.

use crate::ast::{ImportPath, Item};
use crate::diag::{err, Diagnostic, Pos, Result};
use crate::{lexer, parser};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The one import that needs no file: it defines the built-in connectors and
/// `procedure IOPort` (see `check::builtin`).
pub const STD_CONNECTOR: &str = "std_connector.camkes";

/// The largest source file the compiler reads, in bytes (8 MiB, some
/// hundred times the whole system's assembly). Files are read whole, so
/// without a bound an import of a huge or endless file (`/dev/zero`) would
/// take memory until the machine runs out.
pub const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// Why a source file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// There is no such file.
    NotFound,
    /// It is a directory, device, pipe or socket, not a file.
    NotRegular,
    /// It is larger than [`MAX_SOURCE_BYTES`]; how large it is (or at
    /// least was while being read).
    TooLarge(u64),
    /// Any other failure, as the system describes it.
    Other(String),
}

/// Where source text comes from: the disk for the CLI, memory for tests.
pub trait SourceFiles {
    /// The bytes of `path` (at most [`MAX_SOURCE_BYTES`]), or why not.
    fn read(&self, path: &Path) -> std::result::Result<Vec<u8>, ReadError>;
}

/// Reads files from the file system: regular files of at most
/// [`MAX_SOURCE_BYTES`], refusing anything else before reading it.
pub struct DiskFiles;

impl SourceFiles for DiskFiles {
    fn read(&self, path: &Path) -> std::result::Result<Vec<u8>, ReadError> {
        let io = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::NotFound,
            _ => ReadError::Other(e.to_string()),
        };
        // Checked before opening: opening a FIFO would block.
        let regular = |meta: &std::fs::Metadata| -> std::result::Result<(), ReadError> {
            if !meta.is_file() {
                return Err(ReadError::NotRegular);
            }
            if meta.len() > MAX_SOURCE_BYTES {
                return Err(ReadError::TooLarge(meta.len()));
            }
            Ok(())
        };
        regular(&std::fs::metadata(path).map_err(io)?)?;
        let file = std::fs::File::open(path).map_err(io)?;
        regular(&file.metadata().map_err(io)?)?;
        // The file may grow while it is read: never take more than the
        // limit and one byte.
        let mut bytes = Vec::new();
        file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 > MAX_SOURCE_BYTES {
            return Err(ReadError::TooLarge(bytes.len() as u64));
        }
        Ok(bytes)
    }
}

/// A fixed set of in-memory files, for tests.
#[derive(Default)]
pub struct MemoryFiles {
    files: HashMap<PathBuf, Vec<u8>>,
}

impl MemoryFiles {
    /// Adds (or replaces) a file.
    pub fn add(&mut self, path: impl AsRef<Path>, text: impl Into<String>) -> &mut Self {
        self.add_bytes(path, text.into().into_bytes())
    }

    /// Adds (or replaces) a file with any contents, UTF-8 or not.
    pub fn add_bytes(&mut self, path: impl AsRef<Path>, bytes: Vec<u8>) -> &mut Self {
        self.files.insert(normalise(path.as_ref()), bytes);
        self
    }
}

impl SourceFiles for MemoryFiles {
    fn read(&self, path: &Path) -> std::result::Result<Vec<u8>, ReadError> {
        self.files.get(&normalise(path)).cloned().ok_or(ReadError::NotFound)
    }
}

/// Removes `.` and folds `dir/..` without touching the file system, so the
/// same file reached by two spellings is still read once.
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Reads `path` as source text. `Ok(None)`: there is no such file (the
/// caller knows what was looked for); every other failure is an error at
/// `pos` naming the file, and text that is not UTF-8 an error at its first
/// bad byte.
fn read_source(files: &dyn SourceFiles, path: &Path, pos: &Pos) -> Result<Option<String>> {
    let shown = path.display();
    let bytes = match files.read(path) {
        Ok(bytes) => bytes,
        Err(ReadError::NotFound) => return Ok(None),
        Err(ReadError::NotRegular) => {
            return err(
                pos,
                format!("'{shown}' is not a regular file (a directory, device or pipe); sources must be files"),
            )
        }
        Err(ReadError::TooLarge(size)) => {
            return err(
                pos,
                format!("'{shown}' is {size} bytes, larger than the {MAX_SOURCE_BYTES}-byte limit of a source file"),
            )
        }
        Err(ReadError::Other(why)) => return err(pos, format!("cannot read '{shown}': {why}")),
    };
    // Whatever the source, the bound holds (memory sources too).
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return err(
            pos,
            format!(
                "'{shown}' is {} bytes, larger than the {MAX_SOURCE_BYTES}-byte limit of a source file",
                bytes.len()
            ),
        );
    }
    String::from_utf8(bytes).map(Some).or_else(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let good = std::str::from_utf8(&bytes[..at]).expect("valid up to here");
        let line = good.matches('\n').count() + 1;
        let col = good.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        let pos = Pos { file: Arc::from(shown.to_string()), line: line as u32, col: col as u32 };
        err(
            &pos,
            format!(
                "invalid UTF-8: byte {:#04x} (byte offset {at}) is not valid UTF-8; CAmkES sources are UTF-8 text",
                bytes[at]
            ),
        )
    })
}

fn parse_file(path: &Path, text: &str) -> Result<Vec<Item>> {
    let name: Arc<str> = Arc::from(path.display().to_string());
    parser::parse(lexer::lex(&name, text)?)
}

/// Reads `root` and everything it imports; returns all items in
/// define-before-use order. Angle imports are searched in `import_paths`
/// in order; quoted imports only next to the importing file.
///
/// Each imported file's items are spliced in at its import, depth first,
/// with an explicit stack rather than recursion, so a long chain of
/// imports cannot exhaust the call stack.
pub fn load(root: &Path, import_paths: &[PathBuf], files: &dyn SourceFiles) -> Result<Vec<Item>> {
    let root = normalise(root);
    let root_pos = Pos { file: Arc::from(root.display().to_string()), line: 1, col: 1 };
    let Some(text) = read_source(files, &root, &root_pos)? else {
        return Err(Diagnostic::new(&root_pos, "cannot read the file: no such file"));
    };
    let mut seen = HashSet::from([root.clone()]);
    let mut items = Vec::new();
    let mut stack = vec![(root.clone(), parse_file(&root, &text)?.into_iter())];
    while let Some((path, pending)) = stack.last_mut() {
        let Some(item) = pending.next() else {
            stack.pop();
            continue;
        };
        let Item::Import(import) = &item else {
            items.push(item);
            continue;
        };
        let found = match &import.path {
            // The built-in stays in the stream: the checker defines its
            // names at this point, preserving define-before-use.
            ImportPath::Builtin(p) if p == STD_CONNECTOR => None,
            ImportPath::Builtin(p) => Some(search(files, import_paths, &seen, p, &import.pos)?),
            ImportPath::Relative(p) => {
                let dir = path.parent().unwrap_or(Path::new(""));
                let candidate = normalise(&dir.join(p));
                if seen.contains(&candidate) {
                    Some((candidate, None))
                } else {
                    match read_source(files, &candidate, &import.pos)? {
                        Some(text) => Some((candidate, Some(text))),
                        None => {
                            return err(
                                &import.pos,
                                format!("import '{p}' not found (looked for {})", candidate.display()),
                            )
                        }
                    }
                }
            }
        };
        match found {
            None => items.push(item),
            Some((file, Some(text))) => {
                let parsed = parse_file(&file, &text)?;
                seen.insert(file.clone());
                stack.push((file, parsed.into_iter()));
            }
            // Already read: each file once, at its first import.
            Some((_, None)) => {}
        }
    }
    Ok(items)
}

/// Finds `<name>` in the import path: the first directory that has it.
/// Returns its path and, unless it was read before, its text.
fn search(
    files: &dyn SourceFiles,
    import_paths: &[PathBuf],
    seen: &HashSet<PathBuf>,
    name: &str,
    pos: &Pos,
) -> Result<(PathBuf, Option<String>)> {
    for dir in import_paths {
        let candidate = normalise(&dir.join(name));
        if seen.contains(&candidate) {
            return Ok((candidate, None));
        }
        if let Some(text) = read_source(files, &candidate, pos)? {
            return Ok((candidate, Some(text)));
        }
    }
    err(pos, format!("import '{name}' not found in the import path (built-in: <{STD_CONNECTOR}>)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_folds_dots() {
        assert_eq!(normalise(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalise(Path::new("../x")), PathBuf::from("../x"));
    }

    #[test]
    fn each_file_is_read_once_and_spliced_in_place() {
        let mut files = MemoryFiles::default();
        files
            .add(
                "sys/top.camkes",
                "import \"if/a.idl4\"; import \"./if/../if/a.idl4\"; import <lib.camkes>; procedure Z {}",
            )
            .add("sys/if/a.idl4", "procedure A {}")
            .add("lib/lib.camkes", "import \"lib2.camkes\"; procedure L {}")
            .add("lib/lib2.camkes", "procedure L2 {}");
        let items =
            load(Path::new("sys/top.camkes"), &[PathBuf::from("nowhere"), PathBuf::from("lib")], &files).unwrap();
        let names: Vec<_> = items
            .iter()
            .map(|i| match i {
                Item::Procedure(p) => p.name.text.clone(),
                _ => "?".into(),
            })
            .collect();
        assert_eq!(names, ["A", "L2", "L", "Z"]);
    }

    #[test]
    fn import_cycles_terminate() {
        let mut files = MemoryFiles::default();
        files
            .add("a.camkes", "import \"b.camkes\"; procedure A {}")
            .add("b.camkes", "import \"a.camkes\"; procedure B {}");
        assert_eq!(load(Path::new("a.camkes"), &[], &files).unwrap().len(), 2);
    }
}
