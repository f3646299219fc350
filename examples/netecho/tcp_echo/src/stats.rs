//! The counters: ours, netdrv's and netstack's (their counter pages) as
//! one line of JSON, sent to a `STATS` connection and logged.

use alloc::string::String;
use component_runtime::{log, warn};
use core::fmt::Write;
use nic_api::DrvCounter;
use socket_api::{ConnId, Request, StackCounter};

use crate::{Echo, APP_POOL};

impl Echo {
    /// The counters as one line of JSON.
    fn counters_json(&self, out: &mut String) {
        let mode = iolite::BUILD_COPY_MODE.name();
        let _ = write!(
            out,
            "{{\"copy_mode\":\"{mode}\",\"connections\":{},\"closed\":{},\"bytes_echoed\":{},\"bytes_sourced\":{},\"echo_errors\":{},\"stats_requests\":{},\"echo_bytes_copied\":{}",
            self.connections,
            self.closed,
            self.bytes_echoed,
            self.bytes_sourced,
            self.errors,
            self.stats_requests,
            self.d.stats().bytes_copied,
        );
        let mut first = false;
        let _ = self.drv.write_json::<DrvCounter>(out, &mut first);
        let _ = self.stk.write_json::<StackCounter>(out, &mut first);
        out.push_str("}\n");
    }

    /// Logs the counters as a `stats: …` line.
    pub(crate) fn log_stats(&self) {
        let mut s = String::new();
        self.counters_json(&mut s);
        log!("stats: {}", s.trim_end());
    }

    /// Sends the counters on `conn` (and logs them), then closes it.
    pub(crate) fn send_stats(&mut self, conn: ConnId) {
        let mut s = String::new();
        self.counters_json(&mut s);
        log!("stats: {}", s.trim_end());
        match self.d.alloc(APP_POOL, s.len()) {
            Ok(mut b) => {
                b.writable()[..s.len()].copy_from_slice(s.as_bytes());
                if let Ok(a) = b.seal(s.len()) {
                    self.request(Request::Send { conn }.encode(), a);
                }
            }
            Err(_) => warn!("stats: app pool exhausted"),
        }
        self.close(conn);
    }
}
