//! Static requests waiting for the file source: fs refused an open for
//! now (busy: short of buffers or handles while clients hold its pages),
//! so the request waits in the connection's output (`Out::Retry`) and is
//! tried again, oldest first, until it is served or has waited
//! `Config::source_wait_ms` (503).

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::rc::Rc;
use alloc::string::String;
use core::cell::{Cell, RefCell};

use super::{Conn, ConnMode, Core, Out};
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource};

/// How many of the oldest requests waiting for the file source may try
/// it: the pages that come back go to them, not to the newest request
/// or the lowest connection number (the component pumps connections in
/// that order), which once kept one waiting for 10 s and a 503.
const SOURCE_TRIERS: usize = 8;

/// The static requests waiting for the file source, by ticket (oldest
/// first). A ticket leaves the queue when dropped: answered, expired, or
/// its connection gone.
#[derive(Default, Clone)]
pub(super) struct SourceQueue(Rc<RefCell<BTreeSet<u64>>>, Rc<Cell<u64>>);

/// A place in the [`SourceQueue`].
pub(super) struct Ticket {
    n: u64,
    queue: SourceQueue,
}

impl SourceQueue {
    pub(super) fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }

    pub(super) fn join(&self) -> Ticket {
        let n = self.1.get();
        self.1.set(n + 1);
        self.0.borrow_mut().insert(n);
        Ticket { n, queue: self.clone() }
    }

    /// Whether `t` is among the oldest `SOURCE_TRIERS`.
    pub(super) fn may_try(&self, t: &Ticket) -> bool {
        self.0.borrow().iter().take(SOURCE_TRIERS).any(|&n| n == t.n)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.queue.0.borrow_mut().remove(&self.n);
    }
}

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    /// `conn`'s waiting request (an `Out::Retry`, just taken from the front
    /// of its output) pulled again: still behind older ones, it goes back
    /// to the front; expired, it gets its 503; else the source is tried
    /// again. Returns whether `conn` has new output to pull (false: it
    /// still waits).
    pub(super) fn retry(&mut self, conn: &mut Conn<'d, S::File>, waiting: Out<'d, S::File>) -> bool {
        let Out::Retry { req, path, mode, since, ticket } = waiting else { unreachable!("not a waiting request") };
        let expired = self.clock.now_ms().saturating_sub(since) >= self.cfg.source_wait_ms;
        if !expired && !self.waiting.may_try(&ticket) {
            // Older ones first.
            conn.outq.push_front(Out::Retry { req, path, mode, since, ticket });
            return false;
        }
        // Its answer (or the request again) takes its place: what was
        // queued behind it (a `Close`) stays behind.
        let behind = core::mem::take(&mut conn.outq);
        if expired {
            self.stats.file_opens_expired += 1;
            drop(ticket);
            self.push_simple(conn, 503, req.method == Method::Head, mode, "");
        } else {
            self.serve_static_waited(conn, &req, &path, mode, Some(ticket));
        }
        let refused = match conn.outq.back_mut() {
            Some(Out::Retry { since: again, .. }) => {
                *again = since;
                true
            }
            _ => false,
        };
        conn.outq.extend(behind);
        !refused
    }
}

/// The parts of a waiting request (`Out::Retry`), as `files` queues it.
pub(super) fn waiting<'d, F>(req: &Request, path: &str, mode: ConnMode, since: u64, ticket: Ticket) -> Out<'d, F> {
    Out::Retry { req: Box::new(req.clone()), path: String::from(path), mode, since, ticket }
}
