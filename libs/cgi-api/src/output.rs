//! Parsing a CGI program's output (RFC 3875 §6) into a response.
//!
//! The output is an aggregate: header lines, an empty line, then the body.
//! The server copies the header (at most [`MAX_OUTPUT_HEADER`] bytes, never
//! body bytes) into private memory before parsing (the CGI's pool is untrusted: parsing a
//! private copy rules out double fetches), and passes the body on **by
//! reference** ([`split_output`]).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use iolite::Aggregate;

/// Most bytes of CGI response header the server accepts.
pub const MAX_OUTPUT_HEADER: usize = 8 * 1024;
/// Most header fields in a CGI response.
pub const MAX_OUTPUT_FIELDS: usize = 32;

/// What kind of response the program gave (RFC 3875 §6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A document (Content-Type, optional Status, body).
    Document,
    /// `Location: /path`: the server serves that path instead, as a GET
    /// (no other fields, no body).
    LocalRedirect(String),
    /// `Location: scheme:...`: the client is redirected (302 unless Status
    /// says otherwise).
    ClientRedirect(String),
}

/// A parsed CGI response header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The response kind.
    pub kind: Kind,
    /// HTTP status to send.
    pub status: u16,
    /// The reason phrase the program gave in `Status:`, if any (without
    /// one the server sends the status's standard phrase).
    pub reason: Option<String>,
    /// `Content-Type`, if given.
    pub content_type: Option<String>,
    /// Other fields to pass to the client (hop-by-hop and framing fields
    /// are dropped: the server frames the response itself).
    pub fields: Vec<(String, String)>,
    /// `Content-Length`, if given: the server frames a streamed body by it
    /// (a whole output is framed by its real length).
    pub content_length: Option<u64>,
    /// Bytes of header, including the empty line; the body starts here.
    pub header_len: usize,
}

/// Why a CGI response is invalid (the server answers 502).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputError {
    /// No empty line within [`MAX_OUTPUT_HEADER`] bytes.
    NoHeaderEnd,
    /// A line that is not `name: value`, or a bad name or value.
    BadField,
    /// Too many fields.
    TooManyFields,
    /// `Status` is not `NNN reason` with 200 ≤ NNN ≤ 599.
    BadStatus,
    /// A field the server interprets appears twice.
    Duplicate,
    /// A body without `Content-Type`, or no `Content-Type`/`Location`/`Status` at all.
    MissingContentType,
    /// `Location` is neither `/path` nor an absolute URI.
    BadLocation,
    /// A local redirect with other fields or a body.
    BadLocalRedirect,
}

/// Fields the server controls; a CGI's values are dropped
/// (`Content-Length` is read, and the server sends its own).
const DROPPED: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "date",
    "server",
    "upgrade",
    "trailer",
    "te",
    "proxy-connection",
    "content-range",
    "accept-ranges",
];

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_abs_uri(s: &str) -> bool {
    // scheme ":" ... with scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
    match s.find(':') {
        Some(i) if i > 0 => {
            let scheme = &s[..i];
            scheme.as_bytes()[0].is_ascii_alphabetic()
                && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                && s.len() > i + 1
        }
        _ => false,
    }
}

/// Finds the end of the header (index after the empty line), accepting LF
/// or CRLF line ends (RFC 3875 §6: NL is either).
fn header_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut line_start = 0;
    while i < b.len() {
        if b[i] == b'\n' {
            let line = &b[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
        i += 1;
    }
    None
}

/// Parses the header part of a CGI response. `prefix` is the start of the
/// output (at most [`MAX_OUTPUT_HEADER`] bytes are looked at); `total_len`
/// is the length of the whole output (to know whether there is a body).
pub fn parse_output(prefix: &[u8], total_len: usize) -> Result<Output, OutputError> {
    let prefix = &prefix[..prefix.len().min(MAX_OUTPUT_HEADER)];
    let end = header_end(prefix).ok_or(OutputError::NoHeaderEnd)?;
    let has_body = total_len > end;
    let text = &prefix[..end];
    let mut status: Option<(u16, Option<String>)> = None;
    let mut ctype: Option<String> = None;
    let mut location: Option<String> = None;
    let mut length: Option<u64> = None;
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut nfields = 0;
    for raw in text.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            break;
        }
        nfields += 1;
        if nfields > MAX_OUTPUT_FIELDS {
            return Err(OutputError::TooManyFields);
        }
        let line = core::str::from_utf8(line).map_err(|_| OutputError::BadField)?;
        let (name, value) = line.split_once(':').ok_or(OutputError::BadField)?;
        if !is_token(name) {
            return Err(OutputError::BadField);
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(OutputError::BadField);
        }
        if name.eq_ignore_ascii_case("status") {
            if status.is_some() {
                return Err(OutputError::Duplicate);
            }
            let (code, why) = value.split_once(' ').unwrap_or((value, ""));
            if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
                return Err(OutputError::BadStatus);
            }
            let code: u16 = code.parse().map_err(|_| OutputError::BadStatus)?;
            if !(200..=599).contains(&code) {
                return Err(OutputError::BadStatus);
            }
            let why = why.trim();
            status = Some((code, (!why.is_empty()).then(|| why.to_string())));
        } else if name.eq_ignore_ascii_case("content-type") {
            if ctype.is_some() {
                return Err(OutputError::Duplicate);
            }
            if value.is_empty() {
                return Err(OutputError::BadField);
            }
            ctype = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("location") {
            if location.is_some() {
                return Err(OutputError::Duplicate);
            }
            location = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("content-length") {
            // Digits only, as a request's (RFC 9110 §8.6); at most 18, so
            // that it fits a u64.
            if length.is_some() {
                return Err(OutputError::Duplicate);
            }
            if value.is_empty() || value.len() > 18 || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(OutputError::BadField);
            }
            length = value.parse().ok();
        } else if DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            continue;
        } else {
            fields.push((name.to_string(), value.to_string()));
        }
    }
    let kind = match &location {
        Some(l) if l.starts_with('/') && !l.starts_with("//") => {
            if status.is_some() || ctype.is_some() || !fields.is_empty() || has_body {
                return Err(OutputError::BadLocalRedirect);
            }
            Kind::LocalRedirect(l.clone())
        }
        Some(l) if is_abs_uri(l) => {
            if has_body && ctype.is_none() {
                return Err(OutputError::MissingContentType);
            }
            Kind::ClientRedirect(l.clone())
        }
        Some(_) => return Err(OutputError::BadLocation),
        None => {
            if ctype.is_none() && (has_body || status.is_none()) {
                return Err(OutputError::MissingContentType);
            }
            Kind::Document
        }
    };
    let (status, reason_s) = match (&kind, status) {
        (_, Some(s)) => s,
        (Kind::ClientRedirect(_), None) => (302, None),
        _ => (200, None),
    };
    if let Kind::ClientRedirect(l) = &kind {
        fields.push(("Location".to_string(), l.clone()));
    }
    Ok(Output { kind, status, reason: reason_s, content_type: ctype, fields, content_length: length, header_len: end })
}

/// Parses a CGI output aggregate: copies at most [`MAX_OUTPUT_HEADER`]
/// bytes of its start into private memory (returned count: `copied`),
/// parses them, and returns the body as the rest of the aggregate **by
/// reference**.
pub fn split_output<'d>(mut out: Aggregate<'d>) -> Result<(Output, Aggregate<'d>, usize), OutputError> {
    let want = out.len().min(MAX_OUTPUT_HEADER);
    // Copy up to the header's end as it reads now, not 8 KiB: the body
    // stays where it is, so the copy is metadata only. What gets parsed is
    // the copy (the untrusted producer may rewrite its buffers meanwhile);
    // if its end moved, the parse of the copy decides (or fails).
    let n = header_len_in_place(&out, want).unwrap_or(want);
    let mut head = Vec::with_capacity(n);
    for s in out.slices() {
        let room = n - head.len();
        if room == 0 {
            break;
        }
        head.extend_from_slice(&s[..s.len().min(room)]);
    }
    let parsed = parse_output(&head, out.len())?;
    out.advance(parsed.header_len).map_err(|_| OutputError::NoHeaderEnd)?;
    Ok((parsed, out, head.len()))
}

/// The start of a streamed output, as [`split_head`] finds it.
#[derive(Debug)]
pub enum Head<'d> {
    /// The header has not ended yet: the output so far, handed back.
    Incomplete(Aggregate<'d>),
    /// The header, the body so far (by reference) and the header bytes
    /// copied to parse it.
    Done(Output, Aggregate<'d>, usize),
}

/// [`split_output`] for the start of an output that may go on (a streamed
/// reply): the header is parsed once its empty line is there, with the
/// body so far (a local redirect with a body is refused only if the body
/// has begun: the caller stops the rest). Nothing is copied until the
/// header is complete; one without its end within
/// [`MAX_OUTPUT_HEADER`] bytes is [`OutputError::NoHeaderEnd`].
pub fn split_head(out: Aggregate<'_>) -> Result<Head<'_>, OutputError> {
    let want = out.len().min(MAX_OUTPUT_HEADER);
    if header_len_in_place(&out, want).is_none() {
        if out.len() >= MAX_OUTPUT_HEADER {
            return Err(OutputError::NoHeaderEnd);
        }
        return Ok(Head::Incomplete(out));
    }
    let (o, body, copied) = split_output(out)?;
    Ok(Head::Done(o, body, copied))
}

/// The header length [`header_end`] would find in the first `want` bytes
/// of `out`, read in place.
fn header_len_in_place(out: &Aggregate<'_>, want: usize) -> Option<usize> {
    let (mut pos, mut line_len, mut last) = (0usize, 0usize, 0u8);
    for s in out.slices() {
        for &b in s {
            if pos == want {
                return None;
            }
            pos += 1;
            if b == b'\n' {
                if line_len == 0 || (line_len == 1 && last == b'\r') {
                    return Some(pos);
                }
                line_len = 0;
            } else {
                line_len += 1;
            }
            last = b;
        }
    }
    None
}
