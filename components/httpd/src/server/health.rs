//! `/healthz`: whether every component is up and every death settled,
//! for load balancers that poll it every second or so.
//!
//! Answered here, in httpd, from what the component's probe says (on
//! target: the supervisor's system events page, a few loads per
//! component), never by the cgi: it must be cheap, and it must answer
//! while the cgi is dead (then 503, naming it). `200` with the body
//! `ok\n`; else `503` with one line per component that is not healthy.
//! Never cached (`Cache-Control: no-store`). Without a probe (the
//! component set none) the path is an ordinary static one.

use alloc::string::String;

use super::{Conn, ConnMode, Core, Out};
use crate::reason::reason;
use crate::source::{Clock, FileSource};

/// The path the probe answers.
pub const HEALTH_PATH: &str = "/healthz";

/// Writes one line per component that is not healthy into the string
/// (nothing when all are) and returns how many it wrote.
pub type HealthProbe = fn(&mut String) -> usize;

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// Answers `/healthz` (GET or HEAD) if there is a probe; false if not
    /// (the caller serves the path as any other).
    pub(super) fn health(&mut self, conn: &mut Conn<'d, S::File>, head_only: bool, mode: ConnMode) -> bool {
        let Some(probe) = self.health_probe else { return false };
        let mut body = String::new();
        let status = if probe(&mut body) == 0 {
            body.clear();
            body.push_str("ok\n");
            200
        } else {
            503
        };
        self.stats.health_checks += 1;
        let Some(mut a) = self.prefix(status, reason(status), mode) else {
            conn.outq.push_back(Out::Close);
            return true;
        };
        let tail = self.gen(|w| {
            write!(
                w,
                "Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )?;
            if !head_only {
                w.write_str(&body)?;
            }
            Ok(())
        });
        match tail.map(|t| a.append(t)) {
            Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
            _ => conn.outq.push_back(Out::Close),
        }
        true
    }
}
