//! Request heads: httparse for the syntax, our own checks for the limits
//! and for everything httparse leaves to the application (framing, Host,
//! methods, targets).
//!
//! Order of checks, and the status each gives (the corpus relies on it):
//! 1. request line longer than `max_request_line` → 414; more than
//!    `max_header_bytes` of header fields or more than `max_headers` fields
//!    → 431 (both also while the head is still incomplete);
//! 2. syntax (httparse) → 400; a well-formed but unsupported major
//!    version (`HTTP/2.0`, `HTTP/0.9`) → 505; a higher HTTP/1 minor
//!    (`HTTP/1.2`) is served as HTTP/1.1 (RFC 9110 §2.5);
//! 3. framing: a bad or conflicting Content-Length → 400; Transfer-Encoding
//!    with Content-Length, or in an HTTP/1.0 request → 400 (smuggling,
//!    RFC 9112 §6.1); codings (all TE lines together, case-insensitive)
//!    whose last is not `chunked`, or `chunked` twice → 400 (§6.3: the
//!    length cannot be determined); `chunked` last after another coding
//!    (`gzip, chunked`) → 501 (§6.1: a coding we do not understand);
//!    `chunked` alone → a chunked body ([`crate::chunked`]);
//! 4. Host: missing or repeated in HTTP/1.1, or malformed (bad characters,
//!    empty labels, a port that is not 0..=65535 digits) → 400;
//! 5. method other than GET, HEAD, POST, OPTIONS, PUT, DELETE, PATCH,
//!    TRACE → 501 (with `Allow`; a 501 for a transfer coding has none);
//!    the last four are 405 per resource;
//! 6. target (see [`crate::path`]; `*` for OPTIONS only; the authority of
//!    an absolute-form target checked as Host) → 400;
//! 7. Content-Length over `max_body` → 413 (over `max_cgi_body` for a
//!    POST to `/cgi-bin/`, whose body streams to the program);
//! 8. `Expect` other than `100-continue` → 417 (in HTTP/1.0 too; there
//!    `100-continue` itself is ignored: no 1xx goes to a 1.0 client).

use alloc::string::String;
use alloc::vec::Vec;

use crate::path::{parse_target, Target};
use crate::Limits;

/// Request methods the server recognises. GET, HEAD, POST (CGI) and
/// OPTIONS are served; the other standard ones are refused per resource
/// with 405 and `Allow` (RFC 9110 §15.5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST (CGI only).
    Post,
    /// OPTIONS (RFC 9110 §9.3.7).
    Options,
    /// PUT (405).
    Put,
    /// DELETE (405).
    Delete,
    /// PATCH (405).
    Patch,
    /// TRACE (405).
    Trace,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Options => "OPTIONS",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
        }
    }
}

/// A parsed, validated request head.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The target taken apart.
    pub target: Target,
    /// Minor version: 0 (HTTP/1.0) or 1 (HTTP/1.1).
    pub minor: u8,
    /// Every header field, in order (names as received, values raw).
    pub headers: Vec<(String, Vec<u8>)>,
    /// Host (from an absolute-form target, else the Host field), if any.
    pub host: Option<String>,
    /// Whether the connection stays open after this request.
    pub keep_alive: bool,
    /// Body length (0 without Content-Length; 0 for a chunked body).
    pub content_length: u64,
    /// The body has the chunked transfer coding.
    pub chunked: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
}

impl Request {
    /// The first value of a header field (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }

    /// `HTTP/1.0` or `HTTP/1.1`.
    pub fn protocol(&self) -> &'static str {
        if self.minor == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        }
    }
}

/// A request that cannot be served: the status, and whether to add
/// `Allow`. The connection is closed after such a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    /// HTTP status.
    pub status: u16,
    /// The method is the reason (501 for an unknown method): the response
    /// lists the methods the server has in `Allow`.
    pub allow: bool,
}

/// Result of looking at the buffered start of a connection's input.
#[derive(Debug)]
pub enum Head {
    /// Not complete yet (and no limit exceeded so far).
    Partial,
    /// Refused.
    Reject(Reject),
    /// A complete head of `len` bytes.
    Done(Request, usize),
}

/// Most empty lines accepted before a request line (RFC 9112 §2.2 asks to
/// ignore "at least one").
const MAX_LEADING_EMPTY: usize = 8;

fn reject(status: u16) -> Head {
    Head::Reject(Reject { status, allow: false })
}

/// What httparse's version error means: a well-formed `HTTP/d.d` of
/// another major version is 505; `HTTP/1.d` with a higher minor is to be
/// served as HTTP/1.1 (RFC 9110 §2.5): `Ok(offset of the minor digit in
/// the line)`; anything else is 400.
fn version_status(line: &[u8]) -> Result<usize, u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    match parts.as_slice() {
        [_, _, v]
            if v.len() == 8
                && v.starts_with(b"HTTP/")
                && v[5].is_ascii_digit()
                && v[6] == b'.'
                && v[7].is_ascii_digit() =>
        {
            if v[5] == b'1' && v[7] > b'1' {
                Ok(line.len() - 1)
            } else {
                Err(505)
            }
        }
        _ => Err(400),
    }
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(|t| t.trim_ascii()).filter(|t| !t.is_empty())
}

/// `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2): an IP
/// literal in brackets, or a reg-name / IPv4 address of unreserved
/// characters without empty labels; the port, if any, digits only and at
/// most 65535. Empty is allowed (RFC 9112 §3.2).
pub fn valid_host(h: &[u8]) -> bool {
    if h.is_empty() {
        return true;
    }
    if h.len() > 255 {
        return false;
    }
    let port = if let Some(rest) = h.strip_prefix(b"[") {
        let Some(end) = rest.iter().position(|&b| b == b']') else { return false };
        let lit = &rest[..end];
        if lit.is_empty() || !lit.iter().all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return false;
        }
        match &rest[end + 1..] {
            [] => None,
            [b':', port @ ..] => Some(port),
            _ => return false,
        }
    } else {
        let (host, port) = match h.iter().position(|&b| b == b':') {
            Some(i) => (&h[..i], Some(&h[i + 1..])),
            None => (h, None),
        };
        // One trailing dot (a fully qualified name) is allowed.
        let name = host.strip_suffix(b".").unwrap_or(host);
        let labels_ok = name
            .split(|&b| b == b'.')
            .all(|l| !l.is_empty() && l.iter().all(|&b| b.is_ascii_alphanumeric() || b"-_~".contains(&b)));
        if host.is_empty() || !labels_ok {
            return false;
        }
        port
    };
    match port {
        None | Some([]) => true,
        Some(p) => {
            p.len() <= 5
                && p.iter().all(u8::is_ascii_digit)
                && p.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0')) <= 65535
        }
    }
}

/// What the header fields say that the checks need (step 3 on).
struct Fields<'b> {
    content_length: Option<u64>,
    /// A Transfer-Encoding field was there, with these codings (all its
    /// lines together).
    te: bool,
    codings: Vec<&'b [u8]>,
    /// Host fields, and the last one's value.
    hosts: usize,
    host_value: &'b [u8],
    /// `Connection: close` / `keep-alive`.
    close: bool,
    keep: bool,
    expect: Option<&'b [u8]>,
}

/// The fields of a head, read in one pass; a bad or conflicting
/// Content-Length is refused at once (400).
fn read_fields<'b>(headers: &[httparse::Header<'b>]) -> Result<Fields<'b>, Head> {
    let mut f = Fields {
        content_length: None,
        te: false,
        codings: Vec::new(),
        hosts: 0,
        host_value: b"",
        close: false,
        keep: false,
        expect: None,
    };
    for h in headers {
        let name = h.name;
        let v = h.value.trim_ascii();
        if name.eq_ignore_ascii_case("content-length") {
            if v.is_empty() || v.len() > 18 || !v.iter().all(|b| b.is_ascii_digit()) {
                return Err(reject(400));
            }
            let len = v.iter().fold(0u64, |a, b| a * 10 + u64::from(b - b'0'));
            if f.content_length.is_some_and(|c| c != len) {
                return Err(reject(400));
            }
            f.content_length = Some(len);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            f.te = true;
            f.codings.extend(tokens(v));
        } else if name.eq_ignore_ascii_case("host") {
            f.hosts += 1;
            f.host_value = v;
        } else if name.eq_ignore_ascii_case("connection") {
            for t in tokens(v) {
                f.close |= t.eq_ignore_ascii_case(b"close");
                f.keep |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") {
            f.expect = Some(v);
        }
    }
    Ok(f)
}

/// Step 3's transfer codings: only `chunked`, alone and last, and not with
/// Content-Length or in HTTP/1.0.
fn check_codings(f: &Fields, minor: u8) -> Result<(), Head> {
    if !f.te {
        return Ok(());
    }
    if f.content_length.is_some() || minor == 0 {
        return Err(reject(400));
    }
    let is_chunked = |c: &&[u8]| c.eq_ignore_ascii_case(b"chunked");
    match f.codings.split_last() {
        Some((last, rest)) if is_chunked(last) => {
            if rest.iter().any(is_chunked) {
                return Err(reject(400));
            }
            if !rest.is_empty() {
                return Err(reject(501));
            }
            Ok(())
        }
        _ => Err(reject(400)),
    }
}

/// Step 5: the method (case-sensitive, RFC 9110 §9.1).
fn method(raw: &str) -> Result<Method, Head> {
    Ok(match raw {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "OPTIONS" => Method::Options,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "TRACE" => Method::Trace,
        _ => return Err(Head::Reject(Reject { status: 501, allow: true })),
    })
}

/// Step 6: the target (asterisk-form only for OPTIONS, RFC 9112 §3.2.4).
fn target(raw: &[u8], method: Method) -> Result<Target, Head> {
    if raw == b"*" && method == Method::Options {
        return Ok(Target { path: String::from("*"), query: String::new(), authority: None });
    }
    let Ok(t) = parse_target(raw) else { return Err(reject(400)) };
    if t.authority.as_deref().is_some_and(|a| !valid_host(a.as_bytes())) {
        return Err(reject(400));
    }
    Ok(t)
}

/// Steps 1 and 2: the request line's and the fields' size limits, then
/// the syntax. `Ok(length of the head)` when it is complete, with `req`
/// filled in; `Err` with what to answer (or `Partial`).
fn syntax<'h, 'b>(buf: &'b [u8], lim: &Limits, req: &mut httparse::Request<'h, 'b>) -> Result<usize, Head> {
    let lead = buf.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
    if lead > 2 * MAX_LEADING_EMPTY {
        return Err(reject(400));
    }
    let rest = &buf[lead..];
    let line_end = rest.iter().position(|&b| b == b'\n');
    let line_len = line_end.unwrap_or(rest.len());
    if line_len > lim.max_request_line {
        return Err(reject(414));
    }
    let n = match req.parse(buf) {
        Err(httparse::Error::TooManyHeaders) => return Err(reject(431)),
        Err(httparse::Error::Version) => match version_status(&rest[..line_len]) {
            Err(status) => return Err(reject(status)),
            Ok(minor_at) => {
                // httparse knows only 1.0 and 1.1: parse a copy of the head
                // (at most the limits' worth; head bytes, only parsed,
                // never sent on) with the minor digit read as 1. Same
                // length, so the head's length holds for the original.
                let take = buf.len().min(lead + line_len + 1 + lim.max_header_bytes + 4);
                let mut copy = buf[..take].to_vec();
                copy[lead + minor_at] = b'1';
                return Err(match parse_head(&copy, lim) {
                    Head::Partial if take < buf.len() => reject(431),
                    other => other,
                });
            }
        },
        Err(_) => return Err(reject(400)),
        Ok(httparse::Status::Partial) => {
            if line_end.is_some() && rest.len() - line_len - 1 > lim.max_header_bytes {
                return Err(reject(431));
            }
            return Err(Head::Partial);
        }
        Ok(httparse::Status::Complete(n)) => n,
    };
    if n - lead - line_len - 1 > lim.max_header_bytes + 2 {
        return Err(reject(431));
    }
    Ok(n)
}

/// Looks at `buf` (the start of the connection's unparsed input).
pub fn parse_head(buf: &[u8], lim: &Limits) -> Head {
    let mut hdrs = alloc::vec![httparse::EMPTY_HEADER; lim.max_headers];
    let mut req = httparse::Request::new(&mut hdrs);
    match syntax(buf, lim, &mut req) {
        Ok(n) => validate(&req, n, lim).unwrap_or_else(|refused| refused),
        Err(h) => h,
    }
}

/// Steps 3 to 8 on a complete head of `n` bytes.
fn validate(req: &httparse::Request, n: usize, lim: &Limits) -> Result<Head, Head> {
    let minor = req.version.unwrap_or(1);
    // 3. Framing.
    let f = read_fields(req.headers)?;
    check_codings(&f, minor)?;
    // 4. Host.
    if (minor == 1 && f.hosts != 1) || f.hosts > 1 || (f.hosts == 1 && !valid_host(f.host_value)) {
        return Err(reject(400));
    }
    // 5. Method, 6. target.
    let method = method(req.method.unwrap_or(""))?;
    let target = target(req.path.unwrap_or("").as_bytes(), method)?;
    // 7. Body size.
    let content_length = f.content_length.unwrap_or(0);
    let to_cgi = method == Method::Post && (target.path == "/cgi-bin" || target.path.starts_with("/cgi-bin/"));
    let limit = if to_cgi { lim.max_cgi_body.max(lim.max_body) } else { lim.max_body };
    if content_length > limit as u64 {
        return Err(reject(413));
    }
    // 8. Expect. An HTTP/1.0 client's 100-continue is ignored: it may not
    // understand the 1xx a 100 Continue is (RFC 9110 §10.1.1, §15.2).
    let expect_continue = match f.expect {
        None => false,
        Some(e) if e.eq_ignore_ascii_case(b"100-continue") => minor >= 1,
        Some(_) => return Err(reject(417)),
    };
    let host = target.authority.clone().or_else(|| {
        (f.hosts == 1 && !f.host_value.is_empty()).then(|| String::from_utf8_lossy(f.host_value).into_owned())
    });
    let keep_alive = if minor == 1 { !f.close } else { f.keep && !f.close };
    let headers = req.headers.iter().map(|h| (String::from(h.name), h.value.trim_ascii().to_vec())).collect();
    let chunked = f.te;
    Ok(Head::Done(
        Request { method, target, minor, headers, host, keep_alive, content_length, chunked, expect_continue },
        n,
    ))
}
