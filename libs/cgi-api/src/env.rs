//! CGI/1.1 meta-variables (RFC 3875 §4.1) and their wire encoding.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// What the server knows about a request, in the terms CGI needs. The
/// server fills it from its parsed request; [`Env::from_request`] turns it
/// into meta-variables.
#[derive(Debug, Clone)]
pub struct RequestInfo<'a> {
    /// `GET`, `HEAD` or `POST`.
    pub method: &'a str,
    /// The program's path, e.g. `/cgi-bin/echo`.
    pub script_name: &'a str,
    /// The rest of the (decoded, normalised) path after the script name,
    /// e.g. `/a/b`, or empty.
    pub path_info: &'a str,
    /// The query string as received (not decoded), without `?`.
    pub query: &'a str,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub protocol: &'a str,
    /// The request's header fields, in order (names as received).
    pub headers: &'a [(&'a str, &'a [u8])],
    /// The client's address (dotted quad), or empty when unknown.
    pub remote_addr: &'a str,
    /// The client's port (0 when unknown).
    pub remote_port: u16,
    /// The server's name (from the Host header or the configuration).
    pub server_name: &'a str,
    /// The server's port.
    pub server_port: u16,
    /// `SERVER_SOFTWARE`.
    pub server_software: &'a str,
    /// Length of the body handed to the program, if there is one.
    pub content_length: Option<u64>,
}

/// Request header fields that are *not* passed as `HTTP_*` variables:
/// credentials (RFC 3875 §4.1.18 lets the server withhold them), the two
/// that become `CONTENT_*`, and `Proxy` (httpoxy: `HTTP_PROXY` would be
/// taken for a proxy setting by HTTP client libraries).
const WITHHELD: &[&str] = &["authorization", "proxy-authorization", "content-type", "content-length", "proxy"];

/// A set of meta-variables: names (upper case, `[A-Z0-9_]`) and byte values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: Vec<(String, Vec<u8>)>,
}

/// A malformed encoded environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvError {
    /// An entry has no `=`, a bad name, or a NUL is missing at the end.
    Malformed,
    /// More than [`MAX_VARS`] entries or more than [`MAX_ENV_BYTES`] bytes.
    TooLarge,
}

/// Most variables an encoded environment may carry.
pub const MAX_VARS: usize = 128;
/// Most bytes an encoded environment may have.
pub const MAX_ENV_BYTES: usize = 16 * 1024;

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Env {
    /// An empty environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` (replacing an earlier value).
    pub fn set(&mut self, name: &str, value: &[u8]) {
        debug_assert!(valid_name(name));
        if let Some(v) = self.vars.iter_mut().find(|(n, _)| n == name) {
            v.1 = value.to_vec();
        } else {
            self.vars.push((name.to_string(), value.to_vec()));
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }

    /// The value of `name` if it is UTF-8 (else `None`).
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| core::str::from_utf8(v).ok())
    }

    /// All variables in the order they were set.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// True if there are no variables.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The meta-variables of RFC 3875 §4.1 for a request:
    /// `GATEWAY_INTERFACE`, `SERVER_SOFTWARE`, `SERVER_NAME`, `SERVER_PORT`,
    /// `SERVER_PROTOCOL`, `REQUEST_METHOD`, `SCRIPT_NAME`, `PATH_INFO`,
    /// `QUERY_STRING`, `REMOTE_ADDR`, `REMOTE_HOST` (= the address; no DNS),
    /// `REMOTE_PORT`, `CONTENT_LENGTH` and `CONTENT_TYPE` (only with a body),
    /// and one `HTTP_<NAME>` per request header field (upper case, `-` →
    /// `_`; repeated fields joined with `, `). Fields whose names contain
    /// `_` are dropped, since they would be indistinguishable from `-`
    /// (header spoofing), and so are the fields in [`WITHHELD`].
    /// `PATH_TRANSLATED`, `AUTH_TYPE`, `REMOTE_USER` and `REMOTE_IDENT` are
    /// not set (no authentication, no filesystem path mapping).
    pub fn from_request(r: &RequestInfo<'_>) -> Self {
        let mut e = Env::new();
        e.set("GATEWAY_INTERFACE", b"CGI/1.1");
        e.set("SERVER_SOFTWARE", r.server_software.as_bytes());
        e.set("SERVER_NAME", r.server_name.as_bytes());
        e.set("SERVER_PORT", r.server_port.to_string().as_bytes());
        e.set("SERVER_PROTOCOL", r.protocol.as_bytes());
        e.set("REQUEST_METHOD", r.method.as_bytes());
        e.set("SCRIPT_NAME", r.script_name.as_bytes());
        e.set("PATH_INFO", r.path_info.as_bytes());
        e.set("QUERY_STRING", r.query.as_bytes());
        e.set("REMOTE_ADDR", r.remote_addr.as_bytes());
        e.set("REMOTE_HOST", r.remote_addr.as_bytes());
        e.set("REMOTE_PORT", r.remote_port.to_string().as_bytes());
        if let Some(n) = r.content_length {
            e.set("CONTENT_LENGTH", n.to_string().as_bytes());
            if let Some((_, v)) = r.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
                e.set("CONTENT_TYPE", v);
            }
        }
        for (name, value) in r.headers {
            if name.contains('_') || WITHHELD.iter().any(|w| name.eq_ignore_ascii_case(w)) {
                continue;
            }
            let mut var = String::with_capacity(5 + name.len());
            var.push_str("HTTP_");
            for c in name.chars() {
                var.push(if c == '-' { '_' } else { c.to_ascii_uppercase() });
            }
            if !valid_name(&var) {
                continue;
            }
            if let Some(v) = e.vars.iter_mut().find(|(n, _)| *n == var) {
                v.1.extend_from_slice(b", ");
                v.1.extend_from_slice(value);
            } else {
                e.vars.push((var, value.to_vec()));
            }
        }
        e
    }

    /// The wire form: `NAME=VALUE\0` per variable (like `environ`). Values
    /// never contain NUL (the HTTP parser rejects it).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, v) in &self.vars {
            out.extend_from_slice(n.as_bytes());
            out.push(b'=');
            out.extend(v.iter().copied().filter(|&b| b != 0));
            out.push(0);
        }
        out
    }

    /// Parses the wire form (untrusted input: checked and bounded).
    pub fn decode(bytes: &[u8]) -> Result<Self, EnvError> {
        if bytes.len() > MAX_ENV_BYTES {
            return Err(EnvError::TooLarge);
        }
        if bytes.is_empty() {
            return Ok(Env::new());
        }
        if *bytes.last().unwrap() != 0 {
            return Err(EnvError::Malformed);
        }
        let mut e = Env::new();
        for entry in bytes[..bytes.len() - 1].split(|&b| b == 0) {
            let eq = entry.iter().position(|&b| b == b'=').ok_or(EnvError::Malformed)?;
            let name = core::str::from_utf8(&entry[..eq]).map_err(|_| EnvError::Malformed)?;
            if !valid_name(name) {
                return Err(EnvError::Malformed);
            }
            if e.vars.len() == MAX_VARS {
                return Err(EnvError::TooLarge);
            }
            e.set(name, &entry[eq + 1..]);
        }
        Ok(e)
    }
}
