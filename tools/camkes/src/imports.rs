//! Import resolution: reads the root file and, depth first, every file it
//! imports, splicing each imported file's items in at the import so that
//! define-before-use works across files exactly as upstream.

use crate::ast::{ImportPath, Item};
use crate::diag::{err, Diagnostic, Pos, Result};
use crate::{lexer, parser};
use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The one import that needs no file: it defines the built-in connectors and
/// `procedure IOPort` (see `check::builtin`).
pub const STD_CONNECTOR: &str = "std_connector.camkes";

/// Where source text comes from: the disk for the CLI, memory for tests.
pub trait SourceFiles {
    /// The contents of `path`, or `None` if there is no such file.
    fn read(&self, path: &Path) -> Option<String>;
}

/// Reads files from the file system.
pub struct DiskFiles;

impl SourceFiles for DiskFiles {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// A fixed set of in-memory files, for tests.
#[derive(Default)]
pub struct MemoryFiles {
    files: HashMap<PathBuf, String>,
}

impl MemoryFiles {
    /// Adds (or replaces) a file.
    pub fn add(&mut self, path: impl AsRef<Path>, text: impl Into<String>) -> &mut Self {
        self.files.insert(normalise(path.as_ref()), text.into());
        self
    }
}

impl SourceFiles for MemoryFiles {
    fn read(&self, path: &Path) -> Option<String> {
        self.files.get(&normalise(path)).cloned()
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

struct Loader<'a> {
    files: &'a dyn SourceFiles,
    import_paths: &'a [PathBuf],
    seen: HashSet<PathBuf>,
    items: Vec<Item>,
}

impl Loader<'_> {
    fn load_file(&mut self, path: &Path, text: &str) -> Result<()> {
        let name: Arc<str> = Arc::from(path.display().to_string());
        let items = parser::parse(lexer::lex(&name, text)?)?;
        for item in items {
            if let Item::Import(import) = &item {
                let found = match &import.path {
                    ImportPath::Builtin(p) if p == STD_CONNECTOR => None,
                    ImportPath::Builtin(p) => Some(self.search(p, &import.pos)?),
                    ImportPath::Relative(p) => {
                        let dir = path.parent().unwrap_or(Path::new(""));
                        let candidate = normalise(&dir.join(p));
                        match self.files.read(&candidate) {
                            Some(text) => Some((candidate, text)),
                            None => {
                                return err(
                                    &import.pos,
                                    format!("import '{p}' not found (looked for {})", candidate.display()),
                                )
                            }
                        }
                    }
                };
                match found {
                    Some((file, text)) => {
                        if self.seen.insert(file.clone()) {
                            self.load_file(&file, &text)?;
                        }
                    }
                    // The built-in stays in the stream: the checker defines
                    // its names at this point, preserving define-before-use.
                    None => self.items.push(item),
                }
            } else {
                self.items.push(item);
            }
        }
        Ok(())
    }

    fn search(&self, name: &str, pos: &Pos) -> Result<(PathBuf, String)> {
        for dir in self.import_paths {
            let candidate = normalise(&dir.join(name));
            if let Some(text) = self.files.read(&candidate) {
                return Ok((candidate, text));
            }
        }
        err(pos, format!("import '{name}' not found in the import path (built-in: <{STD_CONNECTOR}>)"))
    }
}

/// Reads `root` and everything it imports; returns all items in
/// define-before-use order. Angle imports are searched in `import_paths`
/// in order; quoted imports only next to the importing file.
pub fn load(root: &Path, import_paths: &[PathBuf], files: &dyn SourceFiles) -> Result<Vec<Item>> {
    let root = normalise(root);
    let Some(text) = files.read(&root) else {
        let pos = Pos { file: Arc::from(root.display().to_string()), line: 1, col: 1 };
        return Err(Diagnostic::new(&pos, "cannot read the file"));
    };
    let mut loader = Loader { files, import_paths, seen: HashSet::from([root.clone()]), items: Vec::new() };
    loader.load_file(&root, &text)?;
    Ok(loader.items)
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
