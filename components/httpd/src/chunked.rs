//! The chunked transfer coding of request bodies (RFC 9112 §7.1).
//!
//! The decoder only reads the framing: size lines, the CRLF after each
//! chunk's data and the trailer section. It looks at the start of the
//! connection's unparsed input (the same copy the head parser sees) and
//! tells the server what to do next: skip framing bytes, take data bytes
//! (which the server takes **by reference** from the received aggregates,
//! so the decoded body is the client's own slices without the framing), or
//! stop with an error status. It keeps no bytes of its own.
//!
//! Decisions (the corpus pins them):
//! * size: one or more hex digits, either case, leading zeros allowed; a
//!   value that does not fit in 64 bits, a sign, `0x` or no digits → 400;
//!   a running total over `max_body` → 413.
//! * chunk extensions (`;name=value`, `BWS` around `;` and `=`) are
//!   accepted and ignored; their names must be tokens and their values
//!   tokens or quoted strings, else 400. A size line longer than
//!   [`MAX_LINE`] → 400.
//! * line ends: CRLF, or LF alone (RFC 9112 §2.2, as for the head); a CR
//!   elsewhere → 400. Data followed by anything but a line end (data longer
//!   than its size, or a missing CRLF) → 400.
//! * trailer fields are checked for syntax and discarded (RFC 9112 §7.1.2
//!   lets a recipient drop them; none of ours is useful to a CGI); more
//!   than `max_trailer` bytes of them → 431.

/// Longest chunk-size line (size, extensions, line end).
pub const MAX_LINE: usize = 4096;

/// What the server does next with the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The framing bytes seen so far are incomplete: wait for more input.
    NeedMore,
    /// Drop this many framing bytes from the front of the input.
    Skip(usize),
    /// Up to this many bytes of chunk data follow: take what has arrived
    /// (by reference) and report it with [`Decoder::took`].
    Data(u64),
    /// The body is complete after dropping this many bytes (the last line
    /// of the trailer section).
    Done(usize),
    /// The body is malformed or too large: answer with this status and
    /// close the connection (the framing is lost).
    Error(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Incremental chunked-body decoder (framing only).
#[derive(Debug, Clone)]
pub struct Decoder {
    phase: Phase,
    total: u64,
    max_body: u64,
    trailer_bytes: usize,
    max_trailer: usize,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| is_ws(b)).count();
    &s[n..]
}

fn take_token(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = s.iter().take_while(|&&b| is_tchar(b)).count();
    (n > 0).then(|| s.split_at(n))
}

/// `quoted-string` (RFC 9110 §5.6.4) at the start of `s`; the rest after it.
fn take_quoted(s: &[u8]) -> Option<&[u8]> {
    let mut i = 1;
    if s.first() != Some(&b'"') {
        return None;
    }
    while i < s.len() {
        match s[i] {
            b'"' => return Some(&s[i + 1..]),
            b'\\' => {
                let c = *s.get(i + 1)?;
                if !(c == b'\t' || (0x20..0x7f).contains(&c) || c >= 0x80) {
                    return None;
                }
                i += 2;
            }
            c if c == b'\t' || c == b' ' || c == 0x21 || (0x23..0x7f).contains(&c) || c >= 0x80 => i += 1,
            _ => return None,
        }
    }
    None
}

/// `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`.
fn valid_extensions(mut s: &[u8]) -> bool {
    loop {
        s = skip_ws(s);
        if s.is_empty() {
            return true;
        }
        let Some(rest) = s.strip_prefix(b";") else { return false };
        let Some((_, rest)) = take_token(skip_ws(rest)) else { return false };
        s = skip_ws(rest);
        if let Some(rest) = s.strip_prefix(b"=") {
            let rest = skip_ws(rest);
            s = match take_token(rest) {
                Some((_, r)) => r,
                None => match take_quoted(rest) {
                    Some(r) => r,
                    None => return false,
                },
            };
        }
    }
}

/// The size at the start of a chunk-size line, and what follows it.
fn parse_size(line: &[u8]) -> Option<(u64, &[u8])> {
    let n = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if n == 0 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in &line[..n] {
        let d = (b as char).to_digit(16)? as u64;
        v = v.checked_mul(16)?.checked_add(d)?;
    }
    Some((v, &line[n..]))
}

/// One line (without its end) at the start of `buf` and the bytes it
/// takes with its end; `Err` = a CR that is not part of a CRLF.
fn line(buf: &[u8]) -> Option<Result<(&[u8], usize), ()>> {
    let lf = buf.iter().position(|&b| b == b'\n')?;
    let l = &buf[..lf];
    let l = l.strip_suffix(b"\r").unwrap_or(l);
    if l.contains(&b'\r') {
        return Some(Err(()));
    }
    Some(Ok((l, lf + 1)))
}

impl Decoder {
    /// A decoder for a body of at most `max_body` bytes whose trailer
    /// section may have at most `max_trailer` bytes.
    pub fn new(max_body: u64, max_trailer: usize) -> Self {
        Self { phase: Phase::Size, total: 0, max_body, trailer_bytes: 0, max_trailer }
    }

    /// Decoded body bytes so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether the next step reads framing (not chunk data): only then
    /// does the caller need the input's first bytes in the buffer.
    pub fn wants_framing(&self) -> bool {
        !matches!(self.phase, Phase::Data(_) | Phase::Done)
    }

    /// Whether the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Looks at `buf`, the start of the unparsed input (all of it, or at
    /// least [`MAX_LINE`] bytes of it), and says what to do. After
    /// `Skip`/`Done` the caller drops those bytes; after `Data` it takes
    /// data and calls [`Decoder::took`].
    pub fn step(&mut self, buf: &[u8]) -> Step {
        match self.phase {
            Phase::Done => Step::Done(0),
            Phase::Data(n) => Step::Data(n),
            Phase::DataEnd => match buf {
                [b'\r', b'\n', ..] => {
                    self.phase = Phase::Size;
                    Step::Skip(2)
                }
                [b'\n', ..] => {
                    self.phase = Phase::Size;
                    Step::Skip(1)
                }
                [] | [b'\r'] => Step::NeedMore,
                _ => Step::Error(400),
            },
            Phase::Size => {
                let Some(l) = line(buf) else {
                    return if buf.len() >= MAX_LINE { Step::Error(400) } else { Step::NeedMore };
                };
                let Ok((l, used)) = l else { return Step::Error(400) };
                if used > MAX_LINE {
                    return Step::Error(400);
                }
                let Some((size, ext)) = parse_size(l) else { return Step::Error(400) };
                if !valid_extensions(ext) {
                    return Step::Error(400);
                }
                match self.total.checked_add(size) {
                    Some(t) if t <= self.max_body => self.total = t,
                    _ => return Step::Error(413),
                }
                self.phase = if size == 0 { Phase::Trailer } else { Phase::Data(size) };
                Step::Skip(used)
            }
            Phase::Trailer => {
                let Some(l) = line(buf) else {
                    return if self.trailer_bytes + buf.len() > self.max_trailer {
                        Step::Error(431)
                    } else {
                        Step::NeedMore
                    };
                };
                let Ok((l, used)) = l else { return Step::Error(400) };
                if l.is_empty() {
                    self.phase = Phase::Done;
                    return Step::Done(used);
                }
                self.trailer_bytes += used;
                if self.trailer_bytes > self.max_trailer {
                    return Step::Error(431);
                }
                // field-line = field-name ":" OWS field-value OWS
                let Some((_, rest)) = take_token(l) else { return Step::Error(400) };
                let Some(value) = rest.strip_prefix(b":") else { return Step::Error(400) };
                if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                    return Step::Error(400);
                }
                Step::Skip(used)
            }
        }
    }

    /// `n` bytes of chunk data were taken (at most what `Data` offered).
    pub fn took(&mut self, n: u64) {
        if let Phase::Data(left) = self.phase {
            let left = left - n.min(left);
            self.phase = if left == 0 { Phase::DataEnd } else { Phase::Data(left) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Decodes a whole body fed in pieces of `split` bytes; the body and
    /// the number of bytes consumed, or the error status.
    fn decode(input: &[u8], split: usize) -> Result<(Vec<u8>, usize), u16> {
        let mut d = Decoder::new(1 << 20, 1024);
        let mut pos = 0;
        let mut avail = split.min(input.len());
        let mut body = Vec::new();
        loop {
            match d.step(&input[pos..avail]) {
                Step::NeedMore => {
                    if avail == input.len() {
                        return Err(0); // cut off
                    }
                    avail = (avail + split).min(input.len());
                }
                Step::Skip(n) => pos += n,
                Step::Data(n) => {
                    let k = (n as usize).min(avail - pos);
                    if k == 0 {
                        avail = (avail + split).min(input.len());
                        if avail == pos {
                            return Err(0);
                        }
                        continue;
                    }
                    body.extend_from_slice(&input[pos..pos + k]);
                    pos += k;
                    d.took(k as u64);
                }
                Step::Done(n) => return Ok((body, pos + n)),
                Step::Error(s) => return Err(s),
            }
        }
    }

    fn all_splits(input: &[u8]) -> Result<(Vec<u8>, usize), u16> {
        let whole = decode(input, input.len());
        for s in 1..input.len().max(2) {
            assert_eq!(decode(input, s), whole, "split {s}: {:?}", core::str::from_utf8(input));
        }
        whole
    }

    #[test]
    fn valid_bodies_at_every_split() {
        let ok = |i: &[u8], body: &[u8]| {
            assert_eq!(all_splits(i), Ok((body.to_vec(), i.len())), "{:?}", core::str::from_utf8(i));
        };
        ok(b"0\r\n\r\n", b"");
        ok(b"5\r\nhello\r\n0\r\n\r\n", b"hello");
        ok(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world");
        ok(b"000005\r\nhello\r\n0000\r\n\r\n", b"hello"); // leading zeros
        ok(b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789"); // upper case
        ok(b"a\r\n0123456789\r\n0\r\n\r\n", b"0123456789");
        ok(b"5;ext\r\nhello\r\n0;last=yes\r\n\r\n", b"hello");
        ok(b"5 ; a = b ; c=\"q \\\" ;x\"\r\nhello\r\n0\r\n\r\n", b"hello");
        ok(b"5\nhello\n0\n\n", b"hello"); // bare LF
        ok(b"5\r\nhello\r\n0\r\nExpires: never\r\nX-Sum: 1\r\n\r\n", b"hello"); // trailers
        ok(b"3\r\n\r\n\r\r\n0\r\n\r\n", b"\r\n\r"); // data may hold line ends
    }

    #[test]
    fn what_follows_the_body_is_not_consumed() {
        let i = b"5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        assert_eq!(all_splits(i), Ok((b"hello".to_vec(), 15)));
    }

    #[test]
    fn malformed_bodies() {
        let bad = |i: &[u8], status: u16| {
            assert_eq!(all_splits(i), Err(status), "{:?}", core::str::from_utf8(i));
        };
        bad(b"-5\r\nhello\r\n0\r\n\r\n", 400); // negative
        bad(b"+5\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"0x5\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"\r\nhello\r\n0\r\n\r\n", 400); // no digits
        bad(b" 5\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"5x\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"5 x\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"5;\r\nhello\r\n0\r\n\r\n", 400); // empty extension name
        bad(b"5;a=\"open\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"5;a=b c\r\nhello\r\n0\r\n\r\n", 400);
        bad(b"10000000000000000\r\n", 400); // 2^64: overflow
        bad(b"ffffffffffffffffff\r\n", 400);
        bad(b"5\rhello\r\n0\r\n\r\n", 400); // CR alone
        bad(b"5\r\nhello!\r\n0\r\n\r\n", 400); // data longer than its size
        bad(b"5\r\nhellox0\r\n\r\n", 400); // no CRLF after the data
        bad(b"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n", 400);
        bad(b"5\r\nhello\r\n0\r\n: v\r\n\r\n", 400);
        bad(b"5\r\nhello\r\n0\r\nX: a\x01b\r\n\r\n", 400);
    }

    #[test]
    fn limits() {
        let mut d = Decoder::new(10, 1024);
        assert_eq!(d.step(b"b\r\n"), Step::Error(413));
        let mut d = Decoder::new(10, 1024);
        assert_eq!(d.step(b"fffffffffffffff0\r\n"), Step::Error(413)); // fits u64, over the limit
        let mut d = Decoder::new(10, 1024);
        assert_eq!(d.step(b"6\r\n"), Step::Skip(3));
        d.took(6);
        assert_eq!(d.step(b"\r\n"), Step::Skip(2));
        assert_eq!(d.step(b"5\r\n"), Step::Error(413)); // 11 in all
                                                        // An endless size line or trailer is refused, not buffered.
        let mut d = Decoder::new(10, 1024);
        assert_eq!(d.step(&[b'0'; MAX_LINE]), Step::Error(400));
        let mut d = Decoder::new(10, 16);
        assert_eq!(d.step(b"0\r\n"), Step::Skip(3));
        assert_eq!(d.step(b"X-Long: 0123456789\r\n"), Step::Error(431));
        let mut d = Decoder::new(10, 16);
        assert_eq!(d.step(b"0\r\n"), Step::Skip(3));
        assert_eq!(d.step(b"X-Long: 0123456789"), Step::Error(431));
        // Cut off anywhere: never complete.
        let i = b"5\r\nhello\r\n0\r\n\r\n";
        for n in 0..i.len() {
            assert_eq!(decode(&i[..n], 1), Err(0), "cut at {n}");
        }
    }
}
