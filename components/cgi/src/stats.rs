//! `/cgi-bin/stats`: the live counters of every component, as JSON or HTML.
//!
//! JSON schema (`/cgi-bin/stats?format=json`, `application/json`):
//!
//! ```text
//! {
//!   "schema": 1,
//!   "uptime_ms": <u64>,
//!   "<component>": { "<counter>": <u64>, ... },    one object per component
//!   ...
//!   "devices": [ { "bdf": "00:03.0", "id": "8086:100e", "class": "020000",
//!                  "driver": "netdrv" }, ... ]        the PCI functions found
//! }                                                   at boot ("driver": "" if
//! ```                                                 left alone)
//!
//! Component and counter names are `[a-z0-9_]+`. Every counter is a
//! non-negative integer that only grows, except the gauges whose names end
//! in `_active`, `_in_use` or `_cached`. Counters every component that uses
//! IO-Lite reports (from [`iolite::Stats`], see [`Component::with_iolite`]):
//! `bytes_copied`, `bytes_by_ref_sent`, `bytes_by_ref_received`,
//! `buffers_in_use`, `pages_in_use`, `high_water_pages`, `alloc_failures`.
//! Component-specific ones are listed in `components/cgi/README.md`.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::gen::html_escape;

/// The counters of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Component name, `[a-z0-9_]+` (e.g. `httpd`, `netstack`, `fs`, `cgi`).
    pub name: String,
    /// `(counter name, value)`, in display order.
    pub counters: Vec<(String, u64)>,
    /// `(counter name, what it counts)` where known (a counter page's
    /// docs, [`counters::Counter::help`]): `/metrics`' `# HELP`.
    pub help: Vec<(String, &'static str)>,
}

fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

impl Component {
    /// A component without counters. The name is forced into `[a-z0-9_]`.
    pub fn new(name: &str) -> Self {
        Self { name: clean(name), counters: Vec::new(), help: Vec::new() }
    }

    /// Says what counter `key` counts (for `/metrics`).
    pub fn describe(&mut self, key: &str, help: &'static str) {
        let key = clean(key);
        match self.help.iter_mut().find(|(k, _)| *k == key) {
            Some(h) => h.1 = help,
            None => self.help.push((key, help)),
        }
    }

    /// What counter `key` counts, if known.
    pub fn help_of(&self, key: &str) -> Option<&'static str> {
        self.help.iter().find(|(k, _)| k == key).map(|(_, h)| *h)
    }

    /// Adds (or replaces) a counter.
    pub fn set(&mut self, key: &str, value: u64) -> &mut Self {
        let key = clean(key);
        if let Some(c) = self.counters.iter_mut().find(|(k, _)| *k == key) {
            c.1 = value;
        } else {
            self.counters.push((key, value));
        }
        self
    }

    /// Builder form of [`Component::set`].
    pub fn with(mut self, key: &str, value: u64) -> Self {
        self.set(key, value);
        self
    }

    /// A component with `counters` (`(name, value)`, e.g. a counter page's
    /// `CounterPage::read`), in that order.
    pub fn from_counters<'a>(name: &str, counters: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut c = Self::new(name);
        for (k, v) in counters {
            c.set(k, v);
        }
        c
    }

    /// Adds the IO-Lite counters every component has.
    pub fn with_iolite(self, s: &iolite::Stats) -> Self {
        self.with("bytes_copied", s.bytes_copied)
            .with("bytes_by_ref_sent", s.bytes_by_ref_sent)
            .with("bytes_by_ref_received", s.bytes_by_ref_received)
            .with("buffers_in_use", s.buffers_in_use)
            .with("pages_in_use", s.pages_in_use)
            .with("high_water_pages", s.high_water_pages)
            .with("alloc_failures", s.alloc_failures)
    }

    /// A counter's value.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.counters.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// Everything `/cgi-bin/stats` shows: collected by the CGI component from
/// the others (on target: over their counter RPCs) and passed in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Milliseconds since boot.
    pub uptime_ms: u64,
    /// One entry per component, in display order.
    pub components: Vec<Component>,
    /// The PCI functions the root task found at boot.
    pub devices: Vec<Device>,
}

/// A PCI function found at boot, as the stats show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `BB:DD.F`.
    pub bdf: String,
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Class, subclass, programming interface (24 bits).
    pub class: u32,
    /// The component bound to it, `[a-z0-9_]` ("" if left alone).
    pub driver: String,
}

impl Counters {
    /// Adds a component (a component with the same name is replaced).
    pub fn push(&mut self, c: Component) {
        if let Some(old) = self.components.iter_mut().find(|o| o.name == c.name) {
            *old = c;
        } else {
            self.components.push(c);
        }
    }

    /// A component by name.
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Sum of one counter over all components (e.g. `bytes_copied`).
    pub fn total(&self, key: &str) -> u64 {
        self.components.iter().filter_map(|c| c.get(key)).sum()
    }
}

/// Writes the JSON document (schema above).
pub fn write_json(w: &mut dyn Write, c: &Counters) -> fmt::Result {
    write!(w, "{{\"schema\":1,\"uptime_ms\":{}", c.uptime_ms)?;
    for comp in &c.components {
        if comp.name == "schema" || comp.name == "uptime_ms" {
            continue;
        }
        write!(w, ",\"{}\":{{", comp.name)?;
        for (i, (k, v)) in comp.counters.iter().enumerate() {
            if i > 0 {
                w.write_char(',')?;
            }
            write!(w, "\"{k}\":{v}")?;
        }
        w.write_char('}')?;
    }
    w.write_str(",\"devices\":[")?;
    for (i, d) in c.devices.iter().enumerate() {
        if i > 0 {
            w.write_char(',')?;
        }
        write!(
            w,
            "{{\"bdf\":\"{}\",\"id\":\"{:04x}:{:04x}\",\"class\":\"{:06x}\",\"driver\":\"{}\"}}",
            clean_bdf(&d.bdf),
            d.vendor,
            d.device,
            d.class & 0xff_ffff,
            clean(&d.driver)
        )?;
    }
    w.write_str("]}\n")
}

/// A `BB:DD.F` string with anything but hex digits, `:` and `.` replaced.
fn clean_bdf(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_hexdigit() || c == ':' || c == '.' { c } else { '_' }).collect()
}

/// The JSON document as a string.
pub fn to_json(c: &Counters) -> String {
    let mut s = String::new();
    let _ = write_json(&mut s, c);
    s
}

/// Writes the HTML page: one table per component, and the totals of
/// copied and by-reference bytes at the top. Links the site's stylesheet.
pub fn write_html(w: &mut dyn Write, c: &Counters) -> fmt::Result {
    w.write_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Iolite OS: counters</title><link rel=\"stylesheet\" href=\"/style.css\"></head>\n\
         <body><header><a class=\"home\" href=\"/\">Iolite OS</a>\n<nav><a href=\"/live.html\">Live counters</a> \
         <a href=\"/cgi-bin/stats\">Stats</a> <a href=\"/cgi-bin/page\">Fragment page</a> <a href=\"/cgi-bin/echo\">Echo</a></nav></header>\n<main>\n\
         <h1>Counters</h1>\n<p>Also as <a href=\"/cgi-bin/stats?format=json\"><code>JSON</code></a>, and as a \
         <a href=\"/live.html\">live chart</a>.</p>\n",
    )?;
    let secs = c.uptime_ms / 1000;
    write!(
        w,
        "<p class=\"lead\">Up {}h {:02}m {:02}s. Payload bytes passed by reference: <strong>{}</strong>; \
         copied: <strong>{}</strong>.</p>\n<div class=\"cards\">\n",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        Grouped(c.total("bytes_by_ref_sent")),
        Grouped(c.total("bytes_copied"))
    )?;
    for comp in &c.components {
        w.write_str("<section class=\"card\"><h2>")?;
        html_escape(w, &comp.name)?;
        w.write_str("</h2><table>\n")?;
        for (k, v) in &comp.counters {
            w.write_str("<tr><th>")?;
            // Names are [a-z0-9_] (see `clean`): allow line breaks after `_`.
            for (i, part) in k.split('_').enumerate() {
                if i > 0 {
                    w.write_str("_<wbr>")?;
                }
                html_escape(w, part)?;
            }
            writeln!(w, "</th><td>{}</td></tr>", Grouped(*v))?;
        }
        w.write_str("</table></section>\n")?;
    }
    w.write_str("</div>\n<h2>Devices</h2>\n<table class=\"devices\"><tr><th>PCI</th><th>vendor:device</th><th>class</th><th>driver</th></tr>\n")?;
    for d in &c.devices {
        w.write_str("<tr><td>")?;
        html_escape(w, &d.bdf)?;
        write!(w, "</td><td>{:04x}:{:04x}</td><td>{:06x}</td><td>", d.vendor, d.device, d.class & 0xff_ffff)?;
        html_escape(w, if d.driver.is_empty() { "(left alone)" } else { &d.driver })?;
        w.write_str("</td></tr>\n")?;
    }
    w.write_str("</table>\n</main></body></html>\n")
}

/// A number with thousands separators (`1,234,567`), for people.
struct Grouped(u64);

impl fmt::Display for Grouped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [0u8; 20];
        let mut n = self.0;
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in (0..len).rev() {
            f.write_char(digits[i] as char)?;
            if i > 0 && i % 3 == 0 {
                f.write_char(',')?;
            }
        }
        Ok(())
    }
}

/// The HTML page as a string.
pub fn to_html(c: &Counters) -> String {
    let mut s = String::new();
    let _ = write_html(&mut s, c);
    s
}
