//! `Range: bytes=...` (RFC 9110 §14), single ranges only.
//!
//! Decision: one range is served as 206; a request for several ranges
//! (`bytes=0-1,5-6`) is answered with the whole representation (200), which
//! RFC 9110 §14.2 allows ("a server MAY ignore the Range header field"), so
//! no multipart/byteranges. A syntactically invalid Range, or another unit,
//! is ignored the same way. A single range that starts at or past the end
//! (or a zero-length suffix, or any range of an empty file) is 416 with
//! `Content-Range: bytes */size`.

/// What to do with a Range header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSpec {
    /// Serve the whole representation (no Range, ignored, or several ranges).
    Full,
    /// Serve bytes `start..=end` (206).
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
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

/// Interprets a Range header value for a representation of `size` bytes.
pub fn parse(value: &[u8], size: u64) -> RangeSpec {
    let Ok(v) = core::str::from_utf8(value) else { return RangeSpec::Full };
    let v = v.trim();
    let Some((unit, set)) = v.split_once('=') else { return RangeSpec::Full };
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return RangeSpec::Full;
    }
    let Some((a, b)) = set.trim().split_once('-') else { return RangeSpec::Full };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        let Some(n) = digits(b) else { return RangeSpec::Full };
        if n == 0 || size == 0 {
            return RangeSpec::Unsatisfiable;
        }
        return RangeSpec::Partial { start: size - n.min(size), end: size - 1 };
    }
    let Some(start) = digits(a) else { return RangeSpec::Full };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match digits(b) {
            Some(e) if e >= start => e,
            _ => return RangeSpec::Full, // last < first: invalid, ignored (RFC 9110 §14.1.1)
        }
    };
    if start >= size {
        return RangeSpec::Unsatisfiable;
    }
    RangeSpec::Partial { start, end: end.min(size - 1) }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        for ignored in [
            &b"bytes=0-1,5-6"[..],
            b"items=0-1",
            b"bytes=5-1",
            b"bytes=a-b",
            b"bytes=",
            b"bytes=-",
            b"0-1",
            b"bytes=1",
            b"\xff",
        ] {
            assert_eq!(parse(ignored, 1000), Full, "{:?}", String::from_utf8_lossy(ignored));
        }
    }
}
