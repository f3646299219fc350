//! `Range: bytes=...` (RFC 9110 §14).
//!
//! One satisfiable range is served as a single-part 206; several as a
//! `multipart/byteranges` 206 (RFC 9110 §14.6). Like nginx: unsatisfiable
//! ranges of a set are dropped (none left → 416 with `Content-Range: bytes
//! */size`); a set whose ranges add up to more than the file (overlapping
//! or repeated ranges, a cheap amplification) is ignored and the whole
//! file sent (200), as is a set of more than [`MAX_RANGES`] ranges. A
//! syntactically invalid Range, or another unit, is ignored the same way
//! (RFC 9110 §14.2: "a server MAY ignore the Range header field"; nginx
//! answers 416 there). A range that starts at or past the end, `-0`, or
//! any range of an empty file is unsatisfiable.

use alloc::vec::Vec;

/// Most ranges served as one multipart response.
pub const MAX_RANGES: usize = 16;

/// What to do with a Range header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeSpec {
    /// Serve the whole representation (no Range, or ignored).
    Full,
    /// Serve bytes `start..=end` (206).
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// Serve these inclusive ranges, in the order asked, as
    /// `multipart/byteranges` (206).
    Multi(Vec<(u64, u64)>),
    /// 416.
    Unsatisfiable,
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Saturate: a start past any file is simply unsatisfiable.
    Some(s.bytes().fold(0u64, |a, b| a.saturating_mul(10).saturating_add(u64::from(b - b'0'))))
}

/// One range-spec: `Some(None)` = valid but unsatisfiable, `None` = invalid.
fn one(spec: &str, size: u64) -> Option<Option<(u64, u64)>> {
    let (a, b) = spec.trim().split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let n = digits(b)?;
        if n == 0 || size == 0 {
            return Some(None);
        }
        return Some(Some((size - n.min(size), size - 1)));
    }
    let start = digits(a)?;
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match digits(b) {
            Some(e) if e >= start => e,
            _ => return None, // last < first: invalid (RFC 9110 §14.1.1)
        }
    };
    if start >= size {
        return Some(None);
    }
    Some(Some((start, end.min(size - 1))))
}

/// Interprets a Range header value for a representation of `size` bytes.
pub fn parse(value: &[u8], size: u64) -> RangeSpec {
    let Ok(v) = core::str::from_utf8(value) else { return RangeSpec::Full };
    let v = v.trim();
    let Some((unit, set)) = v.split_once('=') else { return RangeSpec::Full };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeSpec::Full;
    }
    let mut ranges = Vec::new();
    let mut specs = 0;
    for spec in set.split(',') {
        if spec.trim().is_empty() {
            continue; // empty list elements are allowed (RFC 9110 §5.6.1)
        }
        specs += 1;
        if specs > MAX_RANGES {
            return RangeSpec::Full;
        }
        match one(spec, size) {
            None => return RangeSpec::Full,
            Some(None) => {}
            Some(Some(r)) => ranges.push(r),
        }
    }
    if specs == 0 {
        return RangeSpec::Full;
    }
    let total = ranges.iter().fold(0u64, |t, (s, e)| t.saturating_add(e - s + 1));
    match ranges.as_slice() {
        [] => RangeSpec::Unsatisfiable,
        [(start, end)] => RangeSpec::Partial { start: *start, end: *end },
        _ if total > size => RangeSpec::Full,
        _ => RangeSpec::Multi(ranges),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;
    use RangeSpec::*;

    #[test]
    fn single_ranges() {
        assert_eq!(parse(b"bytes=0-99", 1000), Partial { start: 0, end: 99 });
        assert_eq!(parse(b"bytes=900-", 1000), Partial { start: 900, end: 999 });
        assert_eq!(parse(b"bytes=900-5000", 1000), Partial { start: 900, end: 999 });
        assert_eq!(parse(b"bytes=-100", 1000), Partial { start: 900, end: 999 });
        assert_eq!(parse(b"bytes=-5000", 1000), Partial { start: 0, end: 999 });
        assert_eq!(parse(b"BYTES = 5-5", 1000), Partial { start: 5, end: 5 });
        assert_eq!(parse(b"bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=99999999999999999999999-", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=-0", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=0-0", 0), Unsatisfiable);
        assert_eq!(parse(b"bytes=-1", 0), Unsatisfiable);
        for ignored in
            [&b"items=0-1"[..], b"bytes=5-1", b"bytes=a-b", b"bytes=", b"bytes=-", b"0-1", b"bytes=1", b"\xff"]
        {
            assert_eq!(parse(ignored, 1000), Full, "{:?}", String::from_utf8_lossy(ignored));
        }
    }

    #[test]
    fn range_sets() {
        assert_eq!(parse(b"bytes=0-1,5-6", 1000), Multi(vec![(0, 1), (5, 6)]));
        assert_eq!(parse(b"bytes=5-6, 0-1, -2", 1000), Multi(vec![(5, 6), (0, 1), (998, 999)]));
        assert_eq!(parse(b"bytes=0-1,,", 1000), Partial { start: 0, end: 1 });
        assert_eq!(parse(b"bytes=0-1,2000-3000", 1000), Partial { start: 0, end: 1 }, "unsatisfiable dropped");
        assert_eq!(parse(b"bytes=2000-,3000-", 1000), Unsatisfiable);
        assert_eq!(parse(b"bytes=0-1,5-1", 1000), Full, "one invalid spec: ignored");
        assert_eq!(parse(b"bytes=0-699,300-999", 1000), Full, "overlap adding up to more than the file");
        assert_eq!(parse(b"bytes=0-1,0-1", 1000), Multi(vec![(0, 1), (0, 1)]), "small repeats are served");
        let many: Vec<String> = (0..17).map(|i| format!("{i}-{i}")).collect();
        assert_eq!(parse(format!("bytes={}", many.join(",")).as_bytes(), 1000), Full);
        let max: Vec<String> = (0..16).map(|i| format!("{i}-{i}")).collect();
        assert!(matches!(parse(format!("bytes={}", max.join(",")).as_bytes(), 1000), Multi(r) if r.len() == 16));
    }
}
