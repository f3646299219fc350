//! Conditional requests on static files (RFC 9110 §13).
//!
//! The order is §13.2.2's: `If-Match` (strong comparison, `*` = the file
//! exists) → 412 when none matches; otherwise `If-Unmodified-Since` → 412
//! when the file changed after the date (ignored when If-Match is
//! present, or when the date is invalid); then `If-None-Match` (weak
//! comparison, `*`) → 304 for GET/HEAD, 412 for other methods; otherwise
//! `If-Modified-Since` (GET/HEAD only, invalid dates ignored) → 304.
//! `If-Range` (step 5) is applied by the server with [`strong_match`].

use crate::date;

/// The result of evaluating the preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Serve the request.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// The request's conditional fields (raw values, if present).
#[derive(Debug, Clone, Copy, Default)]
pub struct Conditions<'a> {
    /// `If-Match`.
    pub if_match: Option<&'a [u8]>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<&'a [u8]>,
    /// `If-None-Match`.
    pub if_none_match: Option<&'a [u8]>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'a [u8]>,
}

/// One member of an entity-tag list: `*`, or a tag and whether it is weak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member<'a> {
    Any,
    Tag { weak: bool, opaque: &'a [u8] },
}

/// Parses `*` or `#entity-tag` (RFC 9110 §8.8.3); `None` if malformed.
fn members(v: &[u8]) -> Option<alloc::vec::Vec<Member<'_>>> {
    let mut out = alloc::vec::Vec::new();
    let v = v.trim_ascii();
    if v == b"*" {
        out.push(Member::Any);
        return Some(out);
    }
    let mut s = v;
    loop {
        while let [b' ' | b'\t' | b',', rest @ ..] = s {
            s = rest;
        }
        if s.is_empty() {
            return Some(out);
        }
        let (weak, rest) = match s.strip_prefix(b"W/") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let rest = rest.strip_prefix(b"\"")?;
        let end = rest.iter().position(|&b| b == b'"')?;
        let inner = &rest[..end];
        if inner.iter().any(|&b| !(b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)) {
            return None;
        }
        out.push(Member::Tag { weak, opaque: inner });
        s = &rest[end + 1..];
        match s.first() {
            None | Some(b' ' | b'\t' | b',') => {}
            _ => return None,
        }
    }
}

/// Our (strong) tag without its quotes.
fn opaque(ours: &str) -> &[u8] {
    let b = ours.as_bytes();
    b.strip_prefix(b"\"").and_then(|b| b.strip_suffix(b"\"")).unwrap_or(b)
}

/// Strong comparison (§8.8.3.2) of a single tag (If-Range) with ours.
pub fn strong_match(v: &[u8], ours: &str) -> bool {
    match members(v).as_deref() {
        Some([Member::Tag { weak: false, opaque: o }]) => *o == opaque(ours),
        _ => false,
    }
}

fn list_matches(v: &[u8], ours: &str, strong: bool) -> bool {
    let Some(list) = members(v) else { return false };
    list.iter().any(|m| match m {
        Member::Any => true,
        Member::Tag { weak, opaque: o } => !(strong && *weak) && *o == opaque(ours),
    })
}

/// Evaluates the preconditions for a file with strong tag `etag` and
/// modification time `mtime` (`get_or_head`: the method is GET or HEAD).
pub fn evaluate(c: &Conditions<'_>, get_or_head: bool, etag: &str, mtime: u64) -> Outcome {
    // 1, 2: the client's view of the current version.
    if let Some(im) = c.if_match {
        if !list_matches(im, etag, true) {
            return Outcome::Failed;
        }
    } else if let Some(t) = c.if_unmodified_since.and_then(date::parse) {
        if mtime > t {
            return Outcome::Failed;
        }
    }
    // 3, 4: whether the client's copy is still good.
    if let Some(inm) = c.if_none_match {
        if list_matches(inm, etag, false) {
            return if get_or_head { Outcome::NotModified } else { Outcome::Failed };
        }
    } else if get_or_head {
        if let Some(t) = c.if_modified_since.and_then(date::parse) {
            if mtime <= t {
                return Outcome::NotModified;
            }
        }
    }
    Outcome::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    const TAG: &str = "\"d-1-65-400\"";
    const MTIME: u64 = 1_700_000_000;
    const BEFORE: &[u8] = b"Tue, 14 Nov 2023 22:13:19 GMT"; // MTIME - 1
    const AT: &[u8] = b"Tue, 14 Nov 2023 22:13:20 GMT"; // MTIME

    fn ev(im: Option<&str>, ius: Option<&[u8]>, inm: Option<&str>, ims: Option<&[u8]>) -> Outcome {
        let c = Conditions {
            if_match: im.map(str::as_bytes),
            if_unmodified_since: ius,
            if_none_match: inm.map(str::as_bytes),
            if_modified_since: ims,
        };
        evaluate(&c, true, TAG, MTIME)
    }

    #[test]
    fn dates_are_right() {
        assert_eq!(date::parse(AT), Some(MTIME));
        assert_eq!(date::parse(BEFORE), Some(MTIME - 1));
    }

    #[test]
    fn if_match_strong_lists_and_star() {
        assert_eq!(ev(Some(TAG), None, None, None), Proceed);
        assert_eq!(ev(Some("*"), None, None, None), Proceed);
        assert_eq!(ev(Some("\"x\", \"d-1-65-400\""), None, None, None), Proceed);
        assert_eq!(ev(Some("\"x\",\"y\""), None, None, None), Failed);
        assert_eq!(ev(Some("W/\"d-1-65-400\""), None, None, None), Failed, "weak never matches strongly");
        assert_eq!(ev(Some("d-1-65-400"), None, None, None), Failed, "unquoted: malformed");
        assert_eq!(ev(Some(""), None, None, None), Failed);
    }

    #[test]
    fn if_unmodified_since() {
        assert_eq!(ev(None, Some(AT), None, None), Proceed);
        assert_eq!(ev(None, Some(BEFORE), None, None), Failed);
        assert_eq!(ev(None, Some(b"garbage"), None, None), Proceed, "invalid date ignored");
        assert_eq!(ev(Some(TAG), Some(BEFORE), None, None), Proceed, "ignored when If-Match is present");
    }

    #[test]
    fn none_match_and_modified_since_with_the_order() {
        assert_eq!(ev(None, None, Some(TAG), None), NotModified);
        assert_eq!(ev(None, None, Some("W/\"d-1-65-400\""), None), NotModified, "weak comparison");
        assert_eq!(ev(None, None, Some("\"a\", W/\"d-1-65-400\""), None), NotModified);
        assert_eq!(ev(None, None, Some("*"), None), NotModified);
        assert_eq!(ev(None, None, Some("\"a\""), Some(AT)), Proceed, "INM wins over IMS");
        assert_eq!(ev(None, None, None, Some(AT)), NotModified);
        assert_eq!(ev(None, None, None, Some(BEFORE)), Proceed);
        // If-Match fails first, even when the client's copy is current.
        assert_eq!(ev(Some("\"x\""), None, Some(TAG), None), Failed);
        assert_eq!(ev(None, Some(BEFORE), None, Some(AT)), Failed);
        // Not GET/HEAD: a matching If-None-Match is 412, IMS is ignored.
        let c = Conditions { if_none_match: Some(TAG.as_bytes()), ..Conditions::default() };
        assert_eq!(evaluate(&c, false, TAG, MTIME), Failed);
        let c = Conditions { if_modified_since: Some(AT), ..Conditions::default() };
        assert_eq!(evaluate(&c, false, TAG, MTIME), Proceed);
    }

    #[test]
    fn if_range_is_strong() {
        assert!(strong_match(TAG.as_bytes(), TAG));
        assert!(!strong_match(b"W/\"d-1-65-400\"", TAG));
        assert!(!strong_match(b"\"other\"", TAG));
        assert!(!strong_match(b"*", TAG));
    }
}
