//! Path normalisation. Paths are byte strings (names on disk are bytes;
//! UTF-8 by convention). A path is always taken relative to the
//! filesystem's root, which is the site root: a leading '/' changes nothing,
//! and `..` at the root stays at the root, so no path can name anything
//! outside the image. Symlink targets are resolved by the same rule (see
//! [`crate::Ext2::resolve`]).

use alloc::vec::Vec;

/// The normalised components of `path`: empty components (`//`) and `.`
/// dropped, `..` removing the previous component and clamped at the root.
pub fn components(path: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `path` in canonical form: `/` followed by the normalised components
/// joined with `/` (the root is `/`). Useful as a cache or log key.
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + 1);
    for c in components(path) {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> std::string::String {
        std::string::String::from_utf8(normalize(p.as_bytes())).unwrap()
    }

    #[test]
    fn normalises_and_clamps() {
        assert_eq!(n(""), "/");
        assert_eq!(n("/"), "/");
        assert_eq!(n("//a///b/"), "/a/b");
        assert_eq!(n("a/./b/."), "/a/b");
        assert_eq!(n("/a/b/../c"), "/a/c");
        assert_eq!(n("/../../etc/passwd"), "/etc/passwd");
        assert_eq!(n("a/../../.."), "/");
        assert_eq!(n("/..."), "/...", "three dots is a name");
        assert_eq!(n("/é/ü"), "/é/ü");
    }
}
