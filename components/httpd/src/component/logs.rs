//! The access and error logs on the console: the lines the server made
//! (`httpd::server::access`), printed through our log ring as
//! `[httpd] <line>` within [`LogRate`](httpd::server::LogRate)'s budget;
//! beyond it they are dropped, counted (`access_log_rate_dropped`), and
//! once a second a line says how many: `[httpd] N access log lines
//! dropped (rate limit)`.

use component_runtime::log;
use httpd::Clock;

use super::Httpd;

impl Httpd {
    /// Prints (or drops) the log lines made this round.
    pub(super) fn print_logs(&mut self) {
        let now = self.srv.clock().now_ms();
        for line in self.srv.take_log_lines() {
            if self.log_rate.admit(now) {
                log!("{line}");
            }
        }
        if let Some(n) = self.log_rate.report(now) {
            log!("{n} access log lines dropped (rate limit)");
        }
    }
}
