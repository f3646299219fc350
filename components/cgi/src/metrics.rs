//! `/metrics`: every component's counters in the Prometheus text
//! exposition format 0.0.4 (`text/plain; version=0.0.4`), from the same
//! [`Counters`] `/cgi-bin/stats` shows.
//!
//! * One family per counter name, `iolite_<name>`, with the component as
//!   the label `component="httpd"` (so `bytes_copied` of every component
//!   is one family); counters get the `_total` suffix, gauges none.
//! * `# HELP` is the counter's own doc comment where its page declares it
//!   (`counters::counters!`), else a line naming the component; `# TYPE`
//!   says `counter` or `gauge` ([`is_gauge`]).
//! * The supervisor's per-component figures (`deaths_<name>`, ...) become
//!   families labelled by the component they are about:
//!   `iolite_component_deaths_total{component="cgi"}`,
//!   `iolite_component_deaths_settled_total`,
//!   `iolite_component_late_confirms_total`, `iolite_component_up` (1 while
//!   it runs and is not held down).
//! * `iolite_uptime_seconds`: time since boot.
//!
//! Served by the cgi, where the counter pages are mapped (httpd maps
//! none of netstack's or netdrv's: least rights) and fs's counters are a
//! call away: httpd hands `/metrics` to it as `/cgi-bin/metrics`. While
//! the cgi is down a scrape fails (Prometheus records `up` 0 for it);
//! `/healthz`, answered by httpd, names it then.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::stats::Counters;

/// The Content-Type of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Counters that are gauges although their names do not say so
/// ([`is_gauge`]'s suffixes): levels and sizes now, fixed settings.
const GAUGES: &[&str] = &[
    "high_water_pages",
    "file_refs_kept",
    "file_refs_bytes",
    "connections_open",
    "connections_send_full",
    "heap_used",
    "netstack_requests_queued",
    "pool_pages",
    "cgi_generation",
    "tcp_connections",
    "tcp_heap_used",
    "tcp_socket_bytes",
    "tcp_send_queued_bytes",
    "tcp_send_held_back_bytes",
    "tcp_quarantined_pages",
    "tcp_tso",
    "drv_link_up",
    "drv_quarantined_pages",
    "bytes_cached",
    "memory_budget",
    "cache_floor",
];

/// Whether the counter called `name` is a gauge (a level that goes up and
/// down, or a fixed setting) rather than a count that only grows: the
/// stats schema's suffixes (`_active`, `_in_use`, `_now`, `_low`, and
/// `_mode`, `_percent` for settings and ratios) or one of [`GAUGES`].
pub fn is_gauge(name: &str) -> bool {
    ["_active", "_in_use", "_now", "_low", "_mode", "_percent"].iter().any(|s| name.ends_with(s))
        || GAUGES.contains(&name)
}

/// The supervisor's per-component counters: (prefix, family, gauge).
const PER_COMPONENT: &[(&str, &str, bool)] = &[
    ("deaths_", "component_deaths", false),
    ("settled_", "component_deaths_settled", false),
    ("late_confirms_", "component_late_confirms", false),
    ("up_", "component_up", true),
];

/// Helps of the supervisor's families.
fn supervisor_help(family: &str) -> &'static str {
    match family {
        "component_deaths" => "Deaths of the component (fault, exit, restart on request), from the supervisor.",
        "component_deaths_settled" => "The highest death of the component every peer has settled.",
        "component_late_confirms" => "Deaths of peers the component did not confirm within its confirm_death_ms.",
        "component_up" => "1 while the component runs and is not held down, else 0.",
        "untyped_free_now" => "The supervisor's free untyped memory, bytes.",
        _ => "",
    }
}

/// One sample: family (without `iolite_` and `_total`), label, value.
struct Sample<'a> {
    family: &'a str,
    label: &'a str,
    value: u64,
    gauge: bool,
    help: &'a str,
}

fn samples(c: &Counters) -> Vec<Sample<'_>> {
    let mut out = Vec::new();
    for comp in &c.components {
        for (k, v) in &comp.counters {
            let per = (comp.name == "supervisor")
                .then(|| PER_COMPONENT.iter().find_map(|&(p, f, g)| k.strip_prefix(p).map(|rest| (f, rest, g))))
                .flatten();
            let s = match per {
                Some((family, label, gauge)) => {
                    Sample { family, label, value: *v, gauge, help: supervisor_help(family) }
                }
                None => Sample {
                    family: k,
                    label: &comp.name,
                    value: *v,
                    gauge: is_gauge(k),
                    help: comp
                        .help_of(k)
                        .or_else(|| (comp.name == "supervisor").then(|| supervisor_help(k)))
                        .unwrap_or(""),
                },
            };
            out.push(s);
        }
    }
    out
}

/// Writes `text` as a `# HELP` text: `\` and line feeds escaped.
fn help_text(w: &mut dyn Write, text: &str) -> fmt::Result {
    for ch in text.trim().chars() {
        match ch {
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            c => w.write_char(c)?,
        }
    }
    Ok(())
}

/// Writes the exposition (module docs). Families come in the order their
/// first sample appears, each with all its samples together (the format
/// requires that), one per component; a family whose counters disagree on
/// the kind takes its first one's.
pub fn write_metrics(w: &mut dyn Write, c: &Counters) -> fmt::Result {
    writeln!(w, "# HELP iolite_uptime_seconds Time since boot.\n# TYPE iolite_uptime_seconds gauge")?;
    writeln!(w, "iolite_uptime_seconds {}.{:03}", c.uptime_ms / 1000, c.uptime_ms % 1000)?;
    let all = samples(c);
    let mut done: Vec<&str> = Vec::new();
    for (i, first) in all.iter().enumerate() {
        if done.contains(&first.family) {
            continue;
        }
        done.push(first.family);
        let suffix = if first.gauge || first.family.ends_with("_total") { "" } else { "_total" };
        let name = first.family;
        write!(w, "# HELP iolite_{name}{suffix} ")?;
        match all[i..].iter().find(|s| s.family == name && !s.help.is_empty()) {
            Some(s) => help_text(w, s.help)?,
            None => write!(w, "{name} of the {} component (see /cgi-bin/stats).", first.label)?,
        }
        writeln!(w, "\n# TYPE iolite_{name}{suffix} {}", if first.gauge { "gauge" } else { "counter" })?;
        for s in all[i..].iter().filter(|s| s.family == name) {
            // Labels are [a-z0-9_] (stats' `clean`, the events page's
            // instance names): nothing to escape.
            writeln!(w, "iolite_{name}{suffix}{{component=\"{}\"}} {}", s.label, s.value)?;
        }
    }
    Ok(())
}

/// The exposition as a string.
pub fn to_metrics(c: &Counters) -> String {
    let mut s = String::new();
    let _ = write_metrics(&mut s, c);
    s
}
