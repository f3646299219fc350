//! The counters of one component, by name: what a counter text page
//! ([`crate::chan`]) carries and `/cgi-bin/stats` shows.

use alloc::string::String;
use alloc::vec::Vec;

/// The counters of one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Component name, `[a-z0-9_]+` (e.g. `httpd`, `netstack`, `fs`, `cgi`).
    pub name: String,
    /// `(counter name, value)`, in display order.
    pub counters: Vec<(String, u64)>,
}

fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

impl Component {
    /// A component without counters. The name is forced into `[a-z0-9_]`.
    pub fn new(name: &str) -> Self {
        Self { name: clean(name), counters: Vec::new() }
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
