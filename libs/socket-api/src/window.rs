//! The send window: a connection's flow control in one event.
//!
//! A client must not pull more for a connection than its peer can take
//! soon (what it pulls pins buffers: a slow reader would pin a file cache's
//! worth), and the stack must not hold back more of its sends than it can
//! keep. [`Event::Window`] tells the client both limits at once, as counts
//! of the client's own sends on the connection since it was accepted:
//!
//! * **sends**: it may make sends until its count reaches this: the sends
//!   the stack has taken (handed to TCP, or refused with an error event)
//!   plus [`SEND_CREDIT`]. The stack holds back that many per connection
//!   while TCP's window is full and refuses more with `WouldBlock`: a
//!   client that keeps to the limit never sees that, however late the
//!   stack runs.
//! * **bytes**: it may send until its bytes reach this limit. The stack
//!   sets it to what it has seen of the client's sends plus an allowance
//!   ([`send_allowance`] of what the connection can take now: its peer's
//!   window and the stack's slack, less what is queued), and lowers it to
//!   what it has seen when it has to hold sends back (the peer's window and
//!   the slack are used up): nothing more is pulled then until the next
//!   window.
//!
//! Both limits count from the connection's start, so any window the client
//! receives stands on its own: sends it made after the stack wrote the
//! event count against it, and a later window supersedes an earlier one.
//! The stack sends a window when it accepts the connection; when sends it
//! held back went to TCP; once the client reached its byte limit and the
//! stack holds nothing back (on a connection whose acknowledgements the
//! stack follows, once half of what it may hold is free: a client is woken
//! once per half window, not per acknowledgement); and once half the send
//! credit is taken unreported. A client that stops at its limits and waits
//! for the next window never waits forever.
//!
//! The event's tag has 24 bits for both: the send limit modulo 256 (the
//! credit is far below it) and the byte limit in KiB modulo 2^16 (64 MiB,
//! far above the largest allowance); [`SendWindow`] restores the full
//! values from its own counts. [`Grant`] is the stack's half.

use crate::{ConnId, Event};

/// Sends a client may have on one connection that the stack has not yet
/// taken (see the module docs). The stack reports before half the credit
/// is taken unreported, so a client with every send taken has at least
/// half of it.
pub const SEND_CREDIT: u32 = 32;

/// The largest allowance a window gives beyond what the stack has seen.
pub const SEND_SPACE_MAX: usize = 0xff_ffff;
/// The least allowance a window gives, whatever the connection can take:
/// below it, events would cost more than the bytes they let go.
pub const SEND_SPACE_MIN: usize = 8 * 1024;

/// The allowance a window gives for a connection that can take `space`
/// bytes now.
pub fn send_allowance(space: usize) -> usize {
    space.clamp(SEND_SPACE_MIN, SEND_SPACE_MAX)
}

/// The send limit of an [`Event::Window`] is modulo this.
pub const WINDOW_SENDS_MODULUS: u32 = 1 << 8;
/// The byte limit of an [`Event::Window`] is in units of this many bytes
/// (rounded down).
pub const WINDOW_UNIT: u64 = 1024;
/// ... modulo this many units.
pub const WINDOW_UNITS_MODULUS: u64 = 1 << 16;

/// The client's half: its sends on one connection against the last window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWindow {
    /// Sends made, and the count they may reach (both modulo 256).
    posted: u8,
    sends_limit: u8,
    /// Bytes sent, and what they may reach (`None` before the first
    /// window: the byte limit is the stack's to set).
    sent: u64,
    bytes_limit: Option<u64>,
}

impl Default for SendWindow {
    /// A new connection's: the whole credit, no byte limit yet.
    fn default() -> Self {
        Self { posted: 0, sends_limit: SEND_CREDIT as u8, sent: 0, bytes_limit: None }
    }
}

impl SendWindow {
    /// Whether one more `Send` keeps within the send limit.
    pub fn may_send(&self) -> bool {
        self.sends_limit.wrapping_sub(self.posted) as i8 > 0
    }

    /// Sends made and not yet reported taken.
    pub fn outstanding(&self) -> u32 {
        (SEND_CREDIT as i32 - self.sends_limit.wrapping_sub(self.posted) as i8 as i32).max(0) as u32
    }

    /// Counts a `Send` of `bytes`.
    pub fn sent(&mut self, bytes: usize) {
        self.posted = self.posted.wrapping_add(1);
        self.sent = self.sent.saturating_add(bytes as u64);
    }

    /// Bytes the byte limit still allows (`None` before the first window).
    pub fn left(&self) -> Option<usize> {
        self.bytes_limit.map(|l| usize::try_from(l.saturating_sub(self.sent)).unwrap_or(usize::MAX))
    }

    /// Takes a window's limits (`sends` and `units` as the event carries
    /// them); true if it lets the client send bytes it could not before.
    /// A send limit beyond the credit, or below the last one, is a stack
    /// that miscounts: that part is ignored.
    pub fn update(&mut self, sends: u8, units: u16) -> bool {
        let ahead = sends.wrapping_sub(self.posted) as i8;
        let grows = sends.wrapping_sub(self.sends_limit) as i8 >= 0;
        if grows && i32::from(ahead) <= SEND_CREDIT as i32 {
            self.sends_limit = sends;
        }
        // The full limit nearest to what we sent: the wire keeps 16 bits.
        let base = self.sent / WINDOW_UNIT;
        let delta = i64::from(units.wrapping_sub(base as u16) as i16);
        let limit = (base as i64 + delta).max(0) as u64 * WINDOW_UNIT;
        let before = self.left();
        self.bytes_limit = Some(limit);
        before.is_none_or(|b| self.left().is_some_and(|now| now > b))
    }
}

/// The stack's half: what it has seen of a client's sends on one
/// connection, and the byte limit it gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grant {
    /// Sends seen (modulo 256), and those taken as last reported (a
    /// window that reports sends taken goes once half the credit was
    /// taken since: [`Grant::report_due`]).
    sends: u8,
    taken_told: u8,
    /// Bytes seen, and the byte limit told (a multiple of the unit).
    bytes: u64,
    limit: u64,
}

impl Grant {
    /// Counts a `Send` request of `bytes`.
    pub fn seen(&mut self, bytes: usize) {
        self.sends = self.sends.wrapping_add(1);
        self.bytes = self.bytes.saturating_add(bytes as u64);
    }

    /// This grant with a byte limit of the allowance for `space` beyond
    /// what was seen.
    pub fn opened(self, space: usize) -> Self {
        let limit = (self.bytes + send_allowance(space) as u64) / WINDOW_UNIT * WINDOW_UNIT;
        Self { limit, ..self }
    }

    /// This grant with nothing more allowed than was seen.
    pub fn closed(self) -> Self {
        Self { limit: self.limit.min(self.bytes / WINDOW_UNIT * WINDOW_UNIT), ..self }
    }

    /// Whether the client sent all its byte limit allows.
    pub fn spent(&self) -> bool {
        self.bytes >= self.limit
    }

    /// Whether, with `held` sends held back, half the credit was taken
    /// since the last report: then worth a window of its own.
    pub fn report_due(&self, held: usize) -> bool {
        u32::from(self.taken(held).wrapping_sub(self.taken_told)) >= SEND_CREDIT / 2
    }

    /// The window for `conn` with `held` of its sends held back.
    pub fn event(&self, conn: ConnId, held: usize) -> Event {
        let sends = self.taken(held).wrapping_add(SEND_CREDIT as u8);
        let units = ((self.limit / WINDOW_UNIT) % WINDOW_UNITS_MODULUS) as u16;
        Event::Window { conn, sends, units }
    }

    /// This grant once its [`Grant::event`] with `held` went to the client
    /// as a report of sends taken. (Every window carries the count; only
    /// reports restart it, so that they come at the same pace whatever
    /// windows go between.)
    pub fn reported(self, held: usize) -> Self {
        Self { taken_told: self.taken(held), ..self }
    }

    /// Sends taken: those seen, but the `held` ones held back.
    fn taken(&self, held: usize) -> u8 {
        self.sends.wrapping_sub(held as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's window after `g`'s event with `held` held back.
    fn tell(w: &mut SendWindow, g: &mut Grant, held: usize) -> bool {
        let Event::Window { sends, units, .. } = g.event(1, held) else { unreachable!() };
        *g = g.reported(held);
        w.update(sends, units)
    }

    fn send(w: &mut SendWindow, g: &mut Grant, bytes: usize) {
        assert!(w.may_send());
        w.sent(bytes);
        g.seen(bytes);
    }

    #[test]
    fn a_client_keeps_to_its_credit_until_sends_are_reported_taken() {
        let (mut w, mut g) = (SendWindow::default(), Grant::default());
        for _ in 0..SEND_CREDIT {
            send(&mut w, &mut g, 1);
        }
        assert!(!w.may_send());
        assert_eq!(w.outstanding(), SEND_CREDIT);
        // Half of them still held back: half the credit comes back.
        let held = SEND_CREDIT as usize / 2;
        assert!(g.report_due(held));
        tell(&mut w, &mut g, held);
        assert!(!g.report_due(held));
        assert_eq!(w.outstanding(), SEND_CREDIT / 2);
        assert!(w.may_send());
        // Beyond what was sent, or behind the last limit: ignored.
        let mut again = w;
        again.update(w.sends_limit.wrapping_add(SEND_CREDIT as u8), 0);
        assert_eq!(again.outstanding(), SEND_CREDIT / 2);
        again.update(w.sends_limit.wrapping_sub(3), 0);
        assert_eq!(again.outstanding(), SEND_CREDIT / 2);
        tell(&mut w, &mut g, 0);
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn the_counts_survive_wrapping() {
        let (mut w, mut g) = (SendWindow::default(), Grant::default());
        for round in 0..40 {
            for _ in 0..SEND_CREDIT - 1 {
                send(&mut w, &mut g, 3000);
            }
            assert!(g.report_due(0), "round {round}");
            tell(&mut w, &mut g, 0);
            assert_eq!(w.outstanding(), 0, "round {round}");
        }
    }

    #[test]
    fn the_byte_limit_is_the_allowance_beyond_what_the_stack_saw() {
        let (mut w, mut g) = (SendWindow::default(), Grant::default());
        assert_eq!(w.left(), None, "no byte limit before the first window");
        g = g.opened(0);
        assert!(tell(&mut w, &mut g, 0));
        assert_eq!(w.left(), Some(SEND_SPACE_MIN), "at least the least allowance");
        send(&mut w, &mut g, SEND_SPACE_MIN - 1);
        assert!(!g.spent());
        send(&mut w, &mut g, 1);
        assert!(g.spent());
        assert_eq!(w.left(), Some(0));
        // A send in flight when the stack wrote the window counts against it.
        g = g.opened(70_000);
        let Event::Window { sends, units, .. } = g.event(1, 0) else { unreachable!() };
        w.sent(500);
        assert!(w.update(sends, units));
        assert_eq!(w.left(), Some(70_000 / 1024 * 1024 - 500));
        g.seen(500);
        // Closed: no more than was seen, whatever was left.
        g = g.closed();
        assert!(!tell(&mut w, &mut g, 1), "a closing window wakes nobody");
        assert_eq!(w.left(), Some(0));
    }

    #[test]
    fn the_byte_limit_survives_the_wire_wrapping() {
        let (mut w, mut g) = (SendWindow::default(), Grant::default());
        let mut total = 0u64;
        while total < 3 * WINDOW_UNIT * WINDOW_UNITS_MODULUS {
            g = g.opened(SEND_SPACE_MAX);
            tell(&mut w, &mut g, 0);
            assert_eq!(w.left(), Some(((total + SEND_SPACE_MAX as u64) / 1024 * 1024 - total) as usize));
            let n = w.left().unwrap_or(0);
            send(&mut w, &mut g, n);
            total += n as u64;
            assert!(g.spent());
        }
    }
}
