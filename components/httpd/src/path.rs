//! Request targets: the forms of RFC 9112 §3.2, percent-decoding, and
//! normalisation that never leaves the site root.
//!
//! Rules (each violation is 400 Bad Request):
//! * origin-form (`/path?query`) and absolute-form (`http://host/path`,
//!   `https://...`) are accepted; asterisk- and authority-form are not
//!   (they only go with OPTIONS and CONNECT, which are 501 anyway);
//! * raw bytes outside visible ASCII, and `#`, are refused;
//! * the path is percent-decoded **once**; a malformed escape, or a decoded
//!   NUL, control character, `\`, or `/` (`%2F`, which would let a segment
//!   hide a separator) is refused, and so is a result that is not UTF-8;
//! * then `.` and empty segments are dropped and `..` removes the previous
//!   segment; a `..` with nothing left to remove would leave the root and is
//!   refused (not clamped: a client that sends it is attacking or broken);
//! * the query string is kept raw (CGI gets it undecoded, RFC 3875 §4.1.7).
//!
//! Because decoding happens before normalisation, `%2e%2e` is `..` and is
//! treated exactly like it, and because it happens once, `%252e` stays the
//! literal name `%2e`.

use alloc::string::String;
use alloc::vec::Vec;

/// A request target taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Decoded, normalised path: starts with `/`, no `.`/`..`/empty
    /// segments, ends with `/` iff the request named a directory.
    pub path: String,
    /// The raw query (without `?`), possibly empty.
    pub query: String,
    /// The authority of an absolute-form target (it overrides Host).
    pub authority: Option<String>,
}

/// A target that is refused (400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadTarget;

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Parses a raw request target. `Err` means 400.
pub fn parse_target(raw: &[u8]) -> Result<Target, BadTarget> {
    if raw.is_empty() || raw.iter().any(|&b| !(0x21..0x7f).contains(&b) || b == b'#') {
        return Err(BadTarget);
    }
    let raw = core::str::from_utf8(raw).map_err(|_| BadTarget)?;
    let (authority, rest) = if raw.starts_with('/') {
        (None, raw)
    } else {
        let lower_starts = |p: &str| raw.len() >= p.len() && raw[..p.len()].eq_ignore_ascii_case(p);
        let after = if lower_starts("http://") {
            &raw[7..]
        } else if lower_starts("https://") {
            &raw[8..]
        } else {
            return Err(BadTarget);
        };
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let auth = &after[..end];
        if auth.is_empty() || auth.contains('@') {
            return Err(BadTarget);
        }
        let rest = &after[end..];
        (Some(String::from(auth)), rest)
    };
    let (p, q) = rest.split_once('?').unwrap_or((rest, ""));
    let p = if p.is_empty() { "/" } else { p };
    if !p.starts_with('/') {
        return Err(BadTarget);
    }
    Ok(Target { path: normalize(p.as_bytes())?, query: String::from(q), authority })
}

/// Percent-decodes and normalises an origin-form path (see module docs).
pub fn normalize(p: &[u8]) -> Result<String, BadTarget> {
    // Decode once.
    let mut dec = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let b = p[i];
        if b == b'%' {
            let h = p.get(i + 1).copied().and_then(hex).ok_or(BadTarget)?;
            let l = p.get(i + 2).copied().and_then(hex).ok_or(BadTarget)?;
            let c = h << 4 | l;
            if c == b'/' {
                return Err(BadTarget);
            }
            dec.push(c);
            i += 3;
        } else {
            dec.push(b);
            i += 1;
        }
    }
    if dec.iter().any(|&b| b < 0x20 || b == 0x7f || b == b'\\') {
        return Err(BadTarget);
    }
    let dec = String::from_utf8(dec).map_err(|_| BadTarget)?;
    // Normalise.
    let mut segs: Vec<&str> = Vec::new();
    let mut dir = false;
    for s in dec.split('/').skip(1) {
        dir = false;
        match s {
            "" | "." => dir = true,
            ".." => {
                segs.pop().ok_or(BadTarget)?;
                dir = true;
            }
            s => segs.push(s),
        }
    }
    let mut out = String::with_capacity(dec.len());
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    if segs.is_empty() || dir {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> Result<String, BadTarget> {
        normalize(p.as_bytes())
    }

    #[test]
    fn normalises_inside_the_root() {
        assert_eq!(n("/").unwrap(), "/");
        assert_eq!(n("/index.html").unwrap(), "/index.html");
        assert_eq!(n("//a///b").unwrap(), "/a/b");
        assert_eq!(n("/a/./b/").unwrap(), "/a/b/");
        assert_eq!(n("/a/b/..").unwrap(), "/a/");
        assert_eq!(n("/a/../index.html").unwrap(), "/index.html");
        assert_eq!(n("/sub/.").unwrap(), "/sub/");
        assert_eq!(n("/%7Euser/a%20b").unwrap(), "/~user/a b");
        assert_eq!(n("/caf%C3%A9").unwrap(), "/café");
        assert_eq!(n("/%252e%252e/x").unwrap(), "/%2e%2e/x", "decoded once");
        assert_eq!(n("/..a/b..").unwrap(), "/..a/b..");
    }

    #[test]
    fn never_leaves_the_root() {
        for bad in [
            "/..",
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/etc",
            "/%2E%2E/",
            "/.%2e/x",
            "/a/%2e%2e/%2e%2e/x",
            "/a%2fb",
            "/a%2F..%2F..",
            "/a\\b",
            "/a%5c..%5cb",
            "/a%00b",
            "/a%0d%0a",
            "/%",
            "/%2",
            "/%zz",
            "/%c3",
            "/%ff",
            "/a%7f",
        ] {
            assert!(n(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn target_forms() {
        let t = parse_target(b"/cgi-bin/echo/x?a=1&b=%20").unwrap();
        assert_eq!((t.path.as_str(), t.query.as_str(), t.authority), ("/cgi-bin/echo/x", "a=1&b=%20", None));
        let t = parse_target(b"http://example.org:8080/a/b?q").unwrap();
        assert_eq!((t.path.as_str(), t.query.as_str()), ("/a/b", "q"));
        assert_eq!(t.authority.as_deref(), Some("example.org:8080"));
        let t = parse_target(b"HTTPS://h").unwrap();
        assert_eq!(t.path, "/");
        let t = parse_target(b"http://h?x").unwrap();
        assert_eq!((t.path.as_str(), t.query.as_str()), ("/", "x"));
        for bad in [
            &b"*"[..],
            b"example.org:443",
            b"index.html",
            b"ftp://h/x",
            b"http:///x",
            b"http://u@h/x",
            b"/a#frag",
            b"/a b",
            b"/caf\xc3\xa9",
            b"/\x01",
            b"",
        ] {
            assert!(parse_target(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
