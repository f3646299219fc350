//! The cgi link's traffic: CGI calls and the parts of their request
//! bodies on the request ring (bodies by reference from netstack's hand-off
//! pool, or copied into the CGI request pool: the cgi sees no other
//! client's bytes), the replies and streamed parts that come back (file
//! buffers in them vouched for by fs), and the credits and cancels the
//! server decides for the cgi's streams.

use alloc::boxed::Box;

use cgi_api::wire::{Control as CgiControl, Reply};
use component_runtime::{error, warn};
use httpd::{Clock, ConnId as HConn};
use iolite::{Aggregate, Copier, CopyMode, Duplex, Guard, Next, BUILD_COPY_MODE, FLAG_EOF};

use super::{glue, Httpd, BODY_POOL, CGI_REQ_POOL, FILE_POOL, FS};

/// Our end of the cgi's channels, while an incarnation of it is attached.
pub(super) struct Cgi {
    /// Requests on `link.tx`, replies on `link.rx`.
    pub(super) link: Duplex<'static>,
    /// The copy modes copy replies at our end.
    pub(super) copier: Copier<'static>,
    /// Replies: a corrupt ring or forged descriptor breaks the channel
    /// (reported once); pending calls then time out and the cgi is
    /// restarted, which attaches fresh channels.
    pub(super) guard: Guard,
}

/// Why a CGI call was not sent.
pub(super) enum Unsent {
    /// Failed with this status (no cgi attached, no room for its body).
    Failed(u32, cgi_api::Failure),
    /// The cgi went away just now: the call is held for the next
    /// incarnation (`Server::cgi_hold`). Boxed: the rare case.
    Away(Box<httpd::CgiCall<'static>>),
}

/// Why fs did not vouch for a file buffer in a CGI reply.
enum Vouch {
    /// No other client holds it: the cgi made the reference up.
    Forged(u32),
    /// Our quota of fs buffers is used up: the reply must wait or fail.
    Busy,
}

impl Httpd {
    /// Sends `id`'s CGI call to the cgi (its body as it may go, see
    /// `body_for_cgi`), after a look at the events page and the cgi's
    /// generation, so that a call never goes to a dead incarnation.
    pub(super) fn cgi_send(&mut self, id: HConn, call: httpd::CgiCall<'static>) -> Result<(), Unsent> {
        let call_id = call.id;
        self.check_events();
        self.check_cgi();
        self.publish();
        if self.cgi.is_none() {
            if self.srv.cgi_is_down() {
                // Its death was seen just now: the call goes to the next
                // incarnation, as those that arrive from now on.
                return Err(Unsent::Away(Box::new(call)));
            }
            self.cgi_unavailable += 1;
            return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
        }
        // The cgi maps no pool with other clients' bytes: the body goes by
        // reference from netstack's hand-off pool, or as a copy in the
        // pool that holds only what we hand it (`body_for_cgi`). It stays
        // by reference from there on (an echo goes back out without
        // another copy). The environment takes one slice of the message.
        let body = match call.body {
            Some(b) if b.slice_count() >= iolite::MAX_SLICES => match b.copy_to_pool(CGI_REQ_POOL) {
                Ok(copy) => {
                    self.cgi_body_copied += copy.len() as u64;
                    Some(copy)
                }
                Err(_) => {
                    self.cgi_unavailable += 1;
                    return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
                }
            },
            Some(b) => match self.body_for_cgi(b) {
                Ok(b) => Some(b),
                Err(_) => {
                    self.cgi_unavailable += 1;
                    return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable));
                }
            },
            None => None,
        };
        let (msg, tag) =
            match cgi_api::wire::encode_request_more(self.d, CGI_REQ_POOL, call_id, &call.env, body, call.more) {
                Ok(m) => m,
                Err(_) => return Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable)),
            };
        let Some(c) = &mut self.cgi else { unreachable!("checked above; nothing since removed it") };
        match c.link.tx.send(msg, tag, FLAG_EOF) {
            Ok(()) => {
                if self.cgi_pending.is_empty() {
                    // Starved or not is measured from here.
                    self.cgi_progress_at = self.srv.clock().now_ms();
                }
                self.cgi_pending.insert(call_id, id);
                Ok(())
            }
            Err(_) => {
                self.cgi_unavailable += 1;
                Err(Unsent::Failed(call_id, cgi_api::Failure::Unavailable))
            }
        }
    }

    /// A request body for the cgi as it may go: by reference when every
    /// byte is in netstack's hand-off pool (nothing but bodies for the
    /// cgi), else copied into the CGI request pool (bytes that came in the
    /// shared socket pool: with the request's head, or when the hand-off
    /// pool was full). Counted either way.
    pub(super) fn body_for_cgi(&mut self, body: Aggregate<'static>) -> Result<Aggregate<'static>, Aggregate<'static>> {
        // A part that waited for ring room may already be a copy.
        if body.descs().iter().all(|s| s.pool == BODY_POOL || s.pool == CGI_REQ_POOL) {
            self.cgi_body_by_ref +=
                body.descs().iter().filter(|s| s.pool == BODY_POOL).map(|s| u64::from(s.len)).sum::<u64>();
            return Ok(body);
        }
        match body.copy_to_pool(CGI_REQ_POOL) {
            Ok(copy) => {
                self.cgi_body_copied += copy.len() as u64;
                Ok(copy)
            }
            Err(_) => Err(body),
        }
    }

    /// Sends the body parts that wait for room, in order.
    pub(super) fn send_body_parts(&mut self) {
        while let Some((id, call_id, part, more)) = self.body_wait.pop_front() {
            if let Err(part) = self.cgi_send_part(call_id, part, more) {
                self.body_wait.push_front((id, call_id, part, more));
                return;
            }
        }
    }

    /// One part of a streamed request body to the cgi: copied into the CGI
    /// request pool (the cgi maps no pool with other clients' bytes, as
    /// for whole bodies), sent as a body part. Handed back when there is
    /// no room now (pool or ring): it waits in `body_wait`. Dropped if the
    /// cgi is gone (its requests fail with 502 when it comes back).
    pub(super) fn cgi_send_part(
        &mut self,
        call_id: u32,
        part: Aggregate<'static>,
        more: bool,
    ) -> Result<(), Aggregate<'static>> {
        if self.cgi.is_none() || !self.cgi_pending.contains_key(&call_id) {
            // Cancelled, answered or failed (or the cgi is gone): nobody
            // reads it.
            return Ok(());
        }
        // A copy (when one is needed) is kept if the ring has no room: it
        // is what waits and goes, never copied twice (the window bounds
        // what waits).
        let part = if part.is_empty() {
            part
        } else {
            match self.body_for_cgi(part) {
                Ok(part) => part,
                Err(part) => {
                    self.body_parts_deferred += 1;
                    return Err(part);
                }
            }
        };
        let Some(c) = &mut self.cgi else { return Ok(()) };
        match c.link.tx.send(part, cgi_api::wire::body_part_tag(call_id, more), FLAG_EOF) {
            Ok(()) => Ok(()),
            Err((_, part)) => {
                self.body_parts_deferred += 1;
                Err(part)
            }
        }
    }

    /// Takes the cgi's replies (whole answers, streamed parts, input
    /// credits) for the server, as far as our pool has room for the copy
    /// modes' copies; a broken reply channel or a forged file reference
    /// has the cgi restarted.
    pub(super) fn handle_cgi_replies(&mut self) {
        self.cgi_stuck = false;
        loop {
            if BUILD_COPY_MODE != CopyMode::IoLite && self.pool_low() {
                // Copy modes copy each reply into our pool: leave the rest
                // queued (in the cgi's pool) until sending frees ours.
                self.cgi_stuck = true;
                return;
            }
            let Some(c) = &mut self.cgi else { return };
            let before = self.d.stats().bytes_copied;
            let r = c.guard.recv(&mut c.copier.over(&mut c.link.rx));
            self.cgi_copied += self.d.stats().bytes_copied - before;
            let r = match r {
                Next::Msg(r) => {
                    self.cgi_progress_at = self.srv.clock().now_ms();
                    r
                }
                Next::Idle | Next::Wait(iolite::Error::Full) => return,
                Next::Wait(_) => {
                    // Copy modes: no room for the copy yet; the reply stays
                    // queued, and netstack wakes us when it returns buffers.
                    self.cgi_stuck = true;
                    return;
                }
                Next::Refused(e) => {
                    warn!("cgi reply refused: {e:?}");
                    continue;
                }
                Next::Broke(e) => {
                    error!("channel cgi_chan.B from cgi broken: {e:?}");
                    // The cgi broke the protocol: it pays with a restart
                    // (what it left unanswered fails with 502 when the new
                    // incarnation attaches), as one that stops answering.
                    self.restart_cgi("broke its reply channel");
                    return;
                }
            };
            if let Err(why) = self.vouch_file_slices(&r.agg) {
                match why {
                    Vouch::Forged(buf) => {
                        error!("channel cgi_chan.B from cgi broken: file buffer {buf} it does not hold");
                        self.restart_cgi("broke its reply channel");
                        return;
                    }
                    Vouch::Busy => {
                        let call_id = r.tag as u32;
                        let Some(id) = self.cgi_pending.remove(&call_id) else { continue };
                        self.cgi_unavailable += 1;
                        self.srv.cgi_reply(id, call_id, Err(cgi_api::Failure::Unavailable));
                        self.ready.push(id);
                        continue;
                    }
                }
            }
            let (call_id, kind) = cgi_api::wire::decode_reply(r.tag, r.flags);
            let before = self.d.stats().bytes_copied;
            match kind {
                Reply::Part => {
                    // A streamed answer goes on: the call stays pending.
                    let Some(&id) = self.cgi_pending.get(&call_id) else { continue };
                    let over = self.srv.cgi_part(id, call_id, r.agg);
                    self.cgi_copied += self.d.stats().bytes_copied - before;
                    self.ready.push(id);
                    if over.is_err() {
                        error!("channel cgi_chan.B from cgi broken: parts of request {call_id} beyond its window");
                        self.restart_cgi("broke its reply channel");
                        return;
                    }
                }
                Reply::InputCredit(parts) => {
                    // The program consumed body parts: more may go.
                    let Some(&id) = self.cgi_pending.get(&call_id) else { continue };
                    if self.srv.cgi_input_credit(id, call_id, parts) {
                        self.ready.push(id);
                    }
                }
                Reply::Last | Reply::Failed => {
                    let Some(id) = self.cgi_pending.remove(&call_id) else { continue };
                    let result = if kind == Reply::Last { Ok(r.agg) } else { Err(cgi_api::Failure::Fault) };
                    self.srv.cgi_reply(id, call_id, result);
                    self.cgi_copied += self.d.stats().bytes_copied - before;
                    self.ready.push(id);
                }
            }
        }
    }

    /// Tells the cgi what the server decided about its streams: credits
    /// for the parts pulled, cancels for streams not wanted any more (in
    /// order, behind any that wait for ring room). A cancelled call is no
    /// longer pending: what the cgi still sends for it is dropped.
    pub(super) fn send_controls(&mut self) {
        for ctl in self.srv.take_cgi_controls() {
            if let CgiControl::Cancel { id } = ctl {
                self.cgi_pending.remove(&id);
            }
            if self.cgi.is_some() && self.cgi_controls.push(ctl).is_err() {
                // The bound is four request rings: a cgi that takes none of
                // them is restarted by its timeouts; count and go on.
                self.cgi_controls_dropped += 1;
            }
        }
        self.drain_controls();
    }

    /// Sends the controls that wait, as far as the request ring takes them.
    pub(super) fn drain_controls(&mut self) {
        let Some(c) = &mut self.cgi else {
            self.cgi_controls.clear();
            return;
        };
        let d = self.d;
        self.cgi_controls.drain(|ctl| {
            let tag = cgi_api::wire::control_tag(ctl);
            c.link.tx.send(Aggregate::new(d), tag, 0).map_err(|_| ctl)
        });
    }

    /// A reply's slices of the file cache's pool are on the cgi's word: it
    /// may name a buffer fs never lent it (the generation is public), or
    /// return its hold to fs while we still send from the buffer. fs
    /// vouches for each one: if the cgi holds it, we get a hold of our own
    /// from fs, which keeps the buffer until netstack is done with it.
    fn vouch_file_slices(&mut self, agg: &iolite::Aggregate<'_>) -> Result<(), Vouch> {
        let mut done: [(u32, u32); iolite::MAX_SLICES] = [(u32::MAX, 0); iolite::MAX_SLICES];
        let mut n = 0;
        for s in agg.descs().iter().filter(|s| s.pool == FILE_POOL) {
            if done[..n].contains(&(s.buf, s.gen)) {
                continue;
            }
            match glue::fs::vouch(s.buf, s.gen) {
                0 => {}
                r if r as i64 == fs_api::ErrorCode::ChannelBusy.ret() => return Err(Vouch::Busy),
                _ => {
                    self.cgi_unheld_refs += 1;
                    return Err(Vouch::Forged(s.buf));
                }
            }
            if let Err(e) = self.d.take_vouched(FILE_POOL, s.buf, s.gen, FS) {
                warn!("fs vouched for file buffer {} but it is not held here: {e:?}", s.buf);
            }
            self.cgi_vouched += 1;
            if n < done.len() {
                done[n] = (s.buf, s.gen);
                n += 1;
            }
        }
        Ok(())
    }
}
