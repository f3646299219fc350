//! What goes back to httpd: replies (one may wait for room in its ring),
//! streamed outputs sent as they are due and as httpd's credits allow,
//! uploads fed their body parts, and tees passing a body back.

use alloc::vec::Vec;
use cgi::wire::{Control, STREAM_WINDOW};
use cgi::Programs;
use component_runtime::{error, warn};
use iolite::{Aggregate, ChannelTx, Domain, Error, FLAG_EOF};
use outbox::Outbox;

use super::fs::FsFragments;
use super::now_ms;

/// A reply message (tag: `cgi::wire::reply_tag`, flags, output or a
/// part of it) waiting for room in httpd's reply ring. We take no request
/// and make no part while one waits, so one is all that can.
pub(super) type Reply = (u64, u32, Aggregate<'static>);

/// One reply into httpd's reply ring: handed back while the ring is full
/// (httpd takes replies every round); dropped, and reported, when httpd
/// cannot take it at all.
pub(super) fn to_httpd(tx: &mut ChannelTx<'static>, (tag, flags, agg): Reply) -> Result<(), Reply> {
    match tx.send(agg, tag, flags) {
        Ok(()) => Ok(()),
        Err((Error::Full, agg)) => Err((tag, flags, agg)),
        Err((e, _)) => {
            warn!("reply {}: {e:?}", tag as u32);
            Ok(())
        }
    }
}

/// Most streamed outputs at once (`/cgi-bin/stream` answers 503 beyond):
/// each may have `STREAM_WINDOW` messages of `cgi::stream::MESSAGE_BYTES`
/// waiting at httpd, 1 MiB of our 4 MiB pool for all of them.
pub(super) const MAX_STREAMS: usize = 8;

/// A streamed output being sent.
pub(super) struct Active {
    pub(super) id: u32,
    pub(super) stream: cgi::Stream,
    /// Messages we may still send before httpd takes some (it gives them
    /// back with credits).
    pub(super) credit: u32,
}

impl Active {
    pub(super) fn ready(&self, now: u64) -> bool {
        self.credit > 0 && self.stream.due_ms().is_some_and(|t| t <= now)
    }
}

/// A `/cgi-bin/upload` consuming its body.
pub(super) struct Uploading {
    pub(super) id: u32,
    pub(super) upload: cgi::Upload,
}

/// A `/cgi-bin/tee` passing its streamed body back as it reads it: a
/// message per part it was given, each sent on output credit (as a
/// program's write blocks until the pipe has room), and each body part
/// credited back to httpd only once it went out. So a client that does
/// not read the answer stops the upload too, after the windows' worth:
/// the program never holds more than httpd's input window of parts.
pub(super) struct Teeing {
    pub(super) id: u32,
    /// Output messages we may send before httpd takes some.
    pub(super) credit: u32,
    /// Messages to send, in order: (message, last, an input credit is
    /// due once it went).
    pub(super) out: alloc::collections::VecDeque<(Aggregate<'static>, bool, bool)>,
    /// Input credits due that found a reply waiting: sent next.
    pub(super) owed: u32,
}

/// A control message from httpd about one of our streams (or uploads).
pub(super) fn control(streams: &mut Vec<Active>, uploads: &mut Vec<Uploading>, tees: &mut Vec<Teeing>, tag: u64) {
    match cgi::wire::decode_control(tag) {
        Control::Credit { id, parts } => {
            if let Some(a) = streams.iter_mut().find(|a| a.id == id) {
                // Never more than the window, whatever httpd says.
                a.credit = a.credit.saturating_add(parts).min(STREAM_WINDOW);
            }
            if let Some(t) = tees.iter_mut().find(|t| t.id == id) {
                t.credit = t.credit.saturating_add(parts).min(STREAM_WINDOW);
            }
        }
        // Ids are httpd's and never reused soon: one we do not know (a
        // stream that ended, a whole reply) has nothing to stop.
        Control::Cancel { id } => {
            streams.retain(|a| a.id != id);
            uploads.retain(|u| u.id != id);
            tees.retain(|t| t.id != id);
        }
    }
}

/// Sends what the tees may send now (output credit, room in httpd's
/// ring), and the input credits due after it.
pub(super) fn send_tees(
    d: &'static Domain,
    tees: &mut Vec<Teeing>,
    replies: &mut Outbox<Reply>,
    tx: &mut ChannelTx<'static>,
) {
    let mut i = 0;
    while i < tees.len() && replies.is_empty() {
        let t = &mut tees[i];
        if t.owed > 0 {
            let credit = (cgi::wire::input_credit_tag(t.id, t.owed), 0, Aggregate::new(d));
            t.owed = 0;
            let _ = replies.send(credit, |r| to_httpd(tx, r));
            continue;
        }
        if t.credit == 0 || t.out.is_empty() {
            i += 1;
            continue;
        }
        let (m, last, credit_due) = t.out.pop_front().expect("checked above");
        t.credit -= 1;
        t.owed += u32::from(credit_due);
        let msg = if last {
            (cgi::wire::reply_tag(t.id, false), FLAG_EOF, m)
        } else {
            (cgi::wire::reply_tag(t.id, true), 0, m)
        };
        if last {
            tees.remove(i);
        }
        if let Err((tag, ..)) = replies.send(msg, |r| to_httpd(tx, r)) {
            error!("reply {} dropped: a reply already waits", tag as u32);
        }
    }
}

/// Sends the messages of the streams that are due and have credit, one
/// per stream in turn, until none is or httpd's ring is full. True if our
/// pool had no room for one (it waits for buffers to come back).
pub(super) fn send_streams(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    streams: &mut Vec<Active>,
    replies: &mut Outbox<Reply>,
    tx: &mut ChannelTx<'static>,
) -> bool {
    let now = now_ms();
    loop {
        let mut sent = false;
        let mut i = 0;
        while i < streams.len() && replies.is_empty() {
            let a = &mut streams[i];
            if !a.ready(now) {
                i += 1;
                continue;
            }
            let (msg, flags) = match programs.stream_next(&mut a.stream) {
                Ok((m, true)) => ((cgi::wire::reply_tag(a.id, false), FLAG_EOF, m), true),
                Ok((m, false)) => ((cgi::wire::reply_tag(a.id, true), 0, m), false),
                Err(cgi::ProgramError::Iolite(Error::PoolExhausted)) => return true,
                Err(e) => {
                    // Cannot go on: a reply that is neither a part nor the
                    // last tells httpd it failed.
                    warn!("stream {}: {e:?}", a.id);
                    ((cgi::wire::reply_tag(a.id, false), 0, Aggregate::new(d)), true)
                }
            };
            a.credit -= 1;
            if flags {
                streams.remove(i);
            } else {
                i += 1;
            }
            sent = true;
            if let Err((tag, ..)) = replies.send(msg, |r| to_httpd(tx, r)) {
                error!("reply {} dropped: a reply already waits", tag as u32);
            }
        }
        if !sent || !replies.is_empty() {
            return false;
        }
    }
}
