//! The deployment values of the site disk's `/.iolite/config`
//! (docs/config.md): what differs per deployment (address or DHCP,
//! hostname, listen port, `Server:` header, index names, log level) read
//! at boot instead of being compiled into the assembly.
//!
//! - [`parse`]: the file's text (untrusted disk bytes) to typed
//!   [`Settings`], or every error as `/.iolite/config:LINE: what is wrong`
//!   ([`ConfigError`]). A file with any error is refused whole: the system
//!   then runs on the assembly's defaults, never on half a file (an address
//!   from the file with the default gateway could be unreachable).
//! - [`page`]: the fixed layout fs publishes the values in (one read-only
//!   page for netstack and httpd) and the receivers' re-validation of it:
//!   the writer may be hostile too.
//!
//! One parser for the component (fs) and the host (`site-config-check`,
//! run by `tools/image/make-disk`): the same messages before and at boot.

#![no_std]

extern crate alloc;

#[cfg(test)]
extern crate std;

pub mod page;
mod parse;
#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub use parse::parse;

/// Where the file lives on the site disk.
pub const PATH: &str = "/.iolite/config";
/// Largest file accepted (bytes): a few dozen lines are plenty, and fs
/// reads it into its heap.
pub const MAX_FILE: usize = 16 * 1024;
/// Most errors reported for one file (the rest are counted).
pub const MAX_ERRORS: usize = 16;
/// Longest `hostname` and `server_name` (bytes).
pub const MAX_NAME: usize = 63;
/// Most `index` names, and the longest one (bytes).
pub const MAX_INDEX: usize = 8;
/// Longest `index` name (bytes).
pub const MAX_INDEX_NAME: usize = 63;

/// Which lines components print ([`Settings::log_level`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LogLevel {
    /// Errors only.
    Error = 1,
    /// Errors and warnings.
    Warn = 2,
    /// Everything (the default).
    Info = 3,
}

impl LogLevel {
    /// The level named `s` in the file (`"error"`, `"warn"`, `"info"`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "error" => Some(Self::Error),
            "warn" => Some(Self::Warn),
            "info" => Some(Self::Info),
            _ => None,
        }
    }

    /// The level of its page encoding.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Error),
            2 => Some(Self::Warn),
            3 => Some(Self::Info),
            _ => None,
        }
    }

    /// Its name in the file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
        }
    }
}

/// The values a file sets; `None`: the assembly's default for that key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Static address and prefix length (`address = "10.0.3.15/24"`).
    pub address: Option<([u8; 4], u8)>,
    /// Default gateway (`gateway = "10.0.3.2"`), inside `address`'s subnet.
    pub gateway: Option<[u8; 4]>,
    /// `dhcp = true`: the address from DHCP (no `address`/`gateway` then);
    /// `false`: the static one.
    pub dhcp: Option<bool>,
    /// The machine's name: CGI's `SERVER_NAME` for a request without
    /// `Host`, and netstack's and httpd's boot lines.
    pub hostname: Option<String>,
    /// The TCP port httpd listens on (1-65535).
    pub listen_port: Option<u16>,
    /// httpd's `Server:` header (and CGI's `SERVER_SOFTWARE`).
    pub server_name: Option<String>,
    /// Names tried in order for a directory (`["index.html"]`).
    pub index: Option<Vec<String>>,
    /// The least severe lines fs, netstack and httpd print.
    pub log_level: Option<LogLevel>,
}

/// One thing wrong with the file, at its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line of the key, value or syntax error.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PATH}:{}: {}", self.line, self.message)
    }
}

/// Why a value is refused (the parser adds the key and line; the page's
/// reader reports the field).
pub type Invalid = String;

/// `a.b.c.d` as four octets; no leading zeros (010 reads as octal
/// elsewhere), nothing else around it.
pub fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in out.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) || (p.len() > 1 && p.starts_with('0'))
        {
            return None;
        }
        *o = p.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Whether `a` can be a host's own address: not 0.0.0.0/8, loopback,
/// multicast, reserved or broadcast.
fn host_address(a: [u8; 4]) -> Result<(), Invalid> {
    match a[0] {
        0 => Err(String::from("is in 0.0.0.0/8 (this network)")),
        127 => Err(String::from("is a loopback address")),
        224..=239 => Err(String::from("is a multicast address")),
        240..=255 => Err(String::from("is reserved or broadcast")),
        _ => Ok(()),
    }
}

/// The network of `a` with a prefix of `p` bits.
fn network(a: [u8; 4], p: u8) -> u32 {
    let mask = if p == 0 { 0 } else { u32::MAX << (32 - u32::from(p)) };
    u32::from_be_bytes(a) & mask
}

/// Checks a static address and prefix (also the page's reader).
pub fn check_address(a: [u8; 4], prefix: u8) -> Result<(), Invalid> {
    if prefix > 32 {
        return Err(alloc::format!("prefix /{prefix} is over 32"));
    }
    if prefix == 0 {
        return Err(String::from("prefix /0 leaves no network"));
    }
    host_address(a)?;
    if prefix <= 30 {
        let host = u32::from_be_bytes(a) & !(u32::MAX << (32 - u32::from(prefix)));
        if host == 0 {
            return Err(String::from("is the network's own address"));
        }
        if host == !(u32::MAX << (32 - u32::from(prefix))) {
            return Err(String::from("is the network's broadcast address"));
        }
    }
    Ok(())
}

/// Checks a gateway against the address it serves.
pub fn check_gateway(g: [u8; 4], address: Option<([u8; 4], u8)>) -> Result<(), Invalid> {
    host_address(g)?;
    if let Some((a, p)) = address {
        if g == a {
            return Err(String::from("is the address itself"));
        }
        if p <= 32 && network(g, p) != network(a, p) {
            return Err(alloc::format!("is outside {}.{}.{}.{}/{p}, the address's network", a[0], a[1], a[2], a[3]));
        }
    }
    Ok(())
}

/// Checks a hostname: DNS labels (RFC 1123) of letters, digits and
/// hyphens, dot-separated, at most [`MAX_NAME`] bytes.
pub fn check_hostname(s: &str) -> Result<(), Invalid> {
    if s.is_empty() || s.len() > MAX_NAME {
        return Err(alloc::format!("must be 1 to {MAX_NAME} bytes"));
    }
    for label in s.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(String::from("must be DNS labels (letters, digits, inner hyphens) separated by dots"));
        }
    }
    Ok(())
}

/// Checks a `Server:` header value: visible ASCII and inner spaces (it
/// goes into every response head as it is), at most [`MAX_NAME`] bytes.
pub fn check_server_name(s: &str) -> Result<(), Invalid> {
    if s.is_empty() || s.len() > MAX_NAME {
        return Err(alloc::format!("must be 1 to {MAX_NAME} bytes"));
    }
    if !s.bytes().all(|b| b.is_ascii_graphic() || b == b' ') || s.starts_with(' ') || s.ends_with(' ') {
        return Err(String::from("must be visible ASCII (spaces only inside)"));
    }
    Ok(())
}

/// Checks one index name: a file name in the directory (no `/`, not `.`
/// or `..`), visible ASCII, at most [`MAX_INDEX_NAME`] bytes.
pub fn check_index_name(s: &str) -> Result<(), Invalid> {
    if s.is_empty() || s.len() > MAX_INDEX_NAME {
        return Err(alloc::format!("must be 1 to {MAX_INDEX_NAME} bytes"));
    }
    if s == "." || s == ".." || !s.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\') {
        return Err(String::from("must be a file name (visible ASCII, no '/' or '\\', not . or ..)"));
    }
    Ok(())
}

/// Checks what the keys say together (the parser reports it at the line
/// of `dhcp`).
pub fn check_combination(s: &Settings) -> Result<(), Invalid> {
    if s.dhcp == Some(true) && (s.address.is_some() || s.gateway.is_some()) {
        return Err(String::from("dhcp = true and a static address or gateway: set one or the other"));
    }
    if s.gateway.is_some() && s.address.is_none() {
        return Err(String::from("gateway needs address in the same file"));
    }
    Ok(())
}

/// What a file sets, for the boot line.
pub fn summary(s: &Settings) -> String {
    use alloc::format;
    let mut parts: Vec<String> = Vec::new();
    if let Some((a, p)) = s.address {
        parts.push(format!("address {}.{}.{}.{}/{p}", a[0], a[1], a[2], a[3]));
    }
    if let Some(g) = s.gateway {
        parts.push(format!("gateway {}.{}.{}.{}", g[0], g[1], g[2], g[3]));
    }
    if let Some(d) = s.dhcp {
        parts.push(format!("dhcp {d}"));
    }
    if let Some(h) = &s.hostname {
        parts.push(format!("hostname {h}"));
    }
    if let Some(p) = s.listen_port {
        parts.push(format!("listen_port {p}"));
    }
    if let Some(n) = &s.server_name {
        parts.push(format!("server_name {n:?}"));
    }
    if let Some(i) = &s.index {
        parts.push(format!("index {}", i.join(" ")));
    }
    if let Some(l) = s.log_level {
        parts.push(format!("log_level {}", l.name()));
    }
    if parts.is_empty() {
        String::from("sets nothing: assembly defaults")
    } else {
        parts.join(", ")
    }
}
