//! The file's text to [`Settings`]: TOML by the `toml` crate (its
//! document parser keeps the span of every key and value, which gives each
//! error its line), then every key checked by the validators of the crate
//! root.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use toml::de::{DeTable, DeValue};

use crate::{
    check_address, check_combination, check_gateway, check_hostname, check_index_name, check_server_name, parse_ipv4,
    ConfigError, LogLevel, Settings, MAX_ERRORS, MAX_FILE, MAX_INDEX,
};

/// A value with its span in the file.
type Spanned<T> = toml::Spanned<T>;

/// The section kept for writable prefixes and their secret, which need
/// writes (not there yet): present, it is refused, so no file relies on
/// keys whose meaning is not settled.
const RESERVED_SECTION: &str = "writes";

/// Parses and checks the file's bytes. Every error is returned (at most
/// [`MAX_ERRORS`], the last one saying how many more), in line order; a
/// file with any error sets nothing.
pub fn parse(bytes: &[u8]) -> Result<Settings, Vec<ConfigError>> {
    if bytes.len() > MAX_FILE {
        return Err(alloc::vec![err(1, format!("file too large: {} bytes, at most {MAX_FILE}", bytes.len()))]);
    }
    let text = match core::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = line_of(bytes, e.valid_up_to());
            return Err(alloc::vec![err(line, String::from("not UTF-8"))]);
        }
    };
    let doc = match DeTable::parse(text) {
        Ok(d) => d,
        Err(e) => {
            let line = e.span().map_or(1, |s| line_of(text.as_bytes(), s.start));
            return Err(alloc::vec![err(line, format!("TOML: {}", first_line(e.message())))]);
        }
    };
    let mut p = Parser { text, errors: Vec::new(), settings: Settings::default() };
    let mut entries: Vec<_> = doc.get_ref().iter().collect();
    // The address first: the gateway is checked against it.
    entries.sort_by_key(|(k, _)| k.get_ref().as_ref() != "address");
    let mut dhcp_line = 1;
    for (key, value) in entries {
        if key.get_ref().as_ref() == "dhcp" {
            dhcp_line = p.line(key);
        }
        p.key(key, value);
    }
    if p.errors.is_empty() {
        if let Err(why) = check_combination(&p.settings) {
            p.errors.push(err(dhcp_line, why));
        }
    }
    if p.errors.is_empty() {
        return Ok(p.settings);
    }
    p.errors.sort_by_key(|e| e.line);
    if p.errors.len() > MAX_ERRORS {
        let more = p.errors.len() - (MAX_ERRORS - 1);
        let line = p.errors[MAX_ERRORS - 1].line;
        p.errors.truncate(MAX_ERRORS - 1);
        p.errors.push(err(line, format!("and {more} more errors")));
    }
    Err(p.errors)
}

fn err(line: usize, message: String) -> ConfigError {
    ConfigError { line, message }
}

/// The 1-based line of byte `at`.
fn line_of(bytes: &[u8], at: usize) -> usize {
    1 + bytes[..at.min(bytes.len())].iter().filter(|&&b| b == b'\n').count()
}

/// The parser's message without its rendering of the source (one line).
fn first_line(m: &str) -> &str {
    m.lines().next().unwrap_or(m).trim_end()
}

/// The kind of value a key holds, for "expected ..., found ...".
fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

struct Parser<'t> {
    text: &'t str,
    errors: Vec<ConfigError>,
    settings: Settings,
}

impl Parser<'_> {
    fn line<T>(&self, s: &Spanned<T>) -> usize {
        line_of(self.text.as_bytes(), s.span().start)
    }

    fn fail<T>(&mut self, at: &Spanned<T>, message: String) {
        let line = self.line(at);
        self.errors.push(err(line, message));
    }

    /// A string value, or an error naming what it is instead.
    fn string<'v>(&mut self, key: &str, v: &'v Spanned<DeValue<'_>>) -> Option<&'v str> {
        let s = v.get_ref().as_str();
        if s.is_none() {
            self.fail(v, format!("{key}: expected a string, found {}", kind(v.get_ref())));
        }
        s
    }

    /// Checks a string with `check`, reporting `key: "value" why`.
    fn checked(
        &mut self,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        check: fn(&str) -> Result<(), String>,
    ) -> Option<String> {
        let s = self.string(key, v)?;
        match check(s) {
            Ok(()) => Some(s.to_owned()),
            Err(why) => {
                self.fail(v, format!("{key}: {s:?} {why}"));
                None
            }
        }
    }

    fn key(&mut self, key: &Spanned<toml::de::DeString<'_>>, v: &Spanned<DeValue<'_>>) {
        let name: &str = key.get_ref();
        match name {
            "address" => self.settings.address = self.address(v),
            "gateway" => self.settings.gateway = self.gateway(v),
            "dhcp" => match v.get_ref().as_bool() {
                Some(b) => self.settings.dhcp = Some(b),
                None => self.fail(v, format!("dhcp: expected a boolean, found {}", kind(v.get_ref()))),
            },
            "hostname" => self.settings.hostname = self.checked(name, v, check_hostname),
            "server_name" => self.settings.server_name = self.checked(name, v, check_server_name),
            "listen_port" => self.settings.listen_port = self.port(v),
            "index" => self.settings.index = self.index(v),
            "log_level" => {
                let level = self.string(name, v).map(|s| (s, LogLevel::parse(s)));
                match level {
                    Some((_, Some(l))) => self.settings.log_level = Some(l),
                    Some((s, None)) => self.fail(v, format!("log_level: {s:?} is not \"error\", \"warn\" or \"info\"")),
                    None => {}
                }
            }
            RESERVED_SECTION => self.fail(
                key,
                format!("[{RESERVED_SECTION}] is reserved for writable prefixes and their secret: writes are not supported yet"),
            ),
            _ => self.fail(key, format!("unknown key {name:?}")),
        }
    }

    fn address(&mut self, v: &Spanned<DeValue<'_>>) -> Option<([u8; 4], u8)> {
        let s = self.string("address", v)?;
        let Some((a, p)) = s.split_once('/') else {
            self.fail(v, format!("address: {s:?} needs a prefix length (a.b.c.d/N)"));
            return None;
        };
        let (Some(addr), Ok(prefix)) = (parse_ipv4(a), p.parse::<u8>()) else {
            self.fail(v, format!("address: {s:?} is not an IPv4 address with a prefix length (a.b.c.d/N)"));
            return None;
        };
        match check_address(addr, prefix) {
            Ok(()) => Some((addr, prefix)),
            Err(why) => {
                self.fail(v, format!("address: {s:?} {why}"));
                None
            }
        }
    }

    fn gateway(&mut self, v: &Spanned<DeValue<'_>>) -> Option<[u8; 4]> {
        let s = self.string("gateway", v)?;
        let Some(g) = parse_ipv4(s) else {
            self.fail(v, format!("gateway: {s:?} is not an IPv4 address (a.b.c.d)"));
            return None;
        };
        // `parse` takes `address` before every other key.
        match check_gateway(g, self.settings.address) {
            Ok(()) => Some(g),
            Err(why) => {
                self.fail(v, format!("gateway: {s:?} {why}"));
                None
            }
        }
    }

    fn port(&mut self, v: &Spanned<DeValue<'_>>) -> Option<u16> {
        let Some(i) = v.get_ref().as_integer() else {
            self.fail(v, format!("listen_port: expected an integer, found {}", kind(v.get_ref())));
            return None;
        };
        let digits: String = i.as_str().chars().filter(|&c| c != '_').collect();
        match i64::from_str_radix(&digits, i.radix()) {
            Ok(n @ 1..=65535) => Some(n as u16),
            Ok(n) => {
                self.fail(v, format!("listen_port: {n} is not a port (1-65535)"));
                None
            }
            Err(_) => {
                self.fail(v, format!("listen_port: {} is not a port (1-65535)", i.as_str()));
                None
            }
        }
    }

    fn index(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.fail(v, format!("index: expected an array of file names, found {}", kind(v.get_ref())));
            return None;
        };
        if items.is_empty() || items.len() > MAX_INDEX {
            self.fail(v, format!("index: must name 1 to {MAX_INDEX} files, not {}", items.len()));
            return None;
        }
        let before = self.errors.len();
        let mut names = Vec::new();
        for item in items.iter() {
            if let Some(n) = self.checked("index", item, check_index_name) {
                if names.contains(&n) {
                    self.fail(item, format!("index: {n:?} named twice"));
                }
                names.push(n);
            }
        }
        (self.errors.len() == before).then_some(names)
    }
}
