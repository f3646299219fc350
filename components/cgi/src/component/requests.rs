//! httpd's requests: each message on the request channel is a request,
//! a part of a streamed body, or a credit or cancel for one of our
//! streams; a request runs its program at once (`run`).

use alloc::string::String;
use cgi::wire::STREAM_WINDOW;
use cgi::{Counters, Env, Programs, Started};
use component_runtime::{error, warn};
use core::sync::atomic::Ordering;
use iolite::{Aggregate, Domain, Received, FLAG_EOF};

use super::counters::collect;
use super::fs::FsFragments;
use super::hooks::{test_hook, MUTED};
use super::streams::{control, to_httpd, Active, Reply, Teeing, Uploading, MAX_STREAMS};
use super::{now_ms, Cgi, TEST_HOOKS};

impl Cgi {
    /// Takes httpd's messages while no reply waits for room (then httpd's
    /// request ring fills and it answers 503 itself, rather than us
    /// dropping a reply: a 504 and a restart of ours).
    pub(super) fn take_requests(&mut self) {
        while self.replies.is_empty() {
            let r = match self.httpd.rx_guard.recv(&mut self.copier.over(&mut self.httpd.chan.rx)) {
                iolite::Next::Msg(r) => r,
                iolite::Next::Idle | iolite::Next::Wait(_) => break,
                iolite::Next::Refused(e) => {
                    warn!("request refused: {e:?}");
                    continue;
                }
                iolite::Next::Broke(e) => {
                    error!("channel cgi_chan.A from httpd broken: {e:?}");
                    break;
                }
            };
            if r.flags & FLAG_EOF == 0 {
                // Not a request: a credit or a cancel for a stream.
                control(&mut self.streams, &mut self.uploads, &mut self.tees, r.tag);
                continue;
            }
            match cgi::wire::decode_input(r.tag) {
                cgi::wire::Input::Request { more, .. } => self.request(r, more),
                cgi::wire::Input::Part { id, more } => self.body_part(r, id, more),
            }
        }
    }

    /// A part of a streamed body: passed back by its tee, consumed by its
    /// upload, or dropped (a program that does not read it).
    fn body_part(&mut self, r: Received<'static>, id: u32, more: bool) {
        let d = self.d;
        if let Some(t) = self.tees.iter_mut().find(|t| t.id == id) {
            // Passed back when it has credit; credited then.
            t.out.push_back((self.programs.tee_part(r.agg), !more, more));
            return;
        }
        let i = self.uploads.iter().position(|u| u.id == id);
        if let Some(i) = i {
            self.programs.upload_feed(&mut self.uploads[i].upload, &r.agg);
        }
        drop(r.agg);
        let reply = if more {
            // Consumed: httpd may send the next.
            (cgi::wire::input_credit_tag(id, 1), 0, Aggregate::new(d))
        } else if let Some(i) = i {
            let u = self.uploads.swap_remove(i);
            match self.programs.upload_finish(u.upload) {
                Ok(out) => (cgi::wire::reply_tag(id, false), FLAG_EOF, out),
                Err(e) => {
                    warn!("/cgi-bin/upload: {e:?}");
                    (cgi::wire::reply_tag(id, false), 0, Aggregate::new(d))
                }
            }
        } else {
            return;
        };
        self.reply(reply, "reply");
    }

    /// A request: its program runs now; its output goes back whole, or
    /// becomes a stream, an upload or a tee.
    fn request(&mut self, r: Received<'static>, more: bool) {
        let d = self.d;
        let may_stream = self.streams.len() < MAX_STREAMS;
        let (id, outcome) = run(d, &mut self.programs, r.agg, r.tag, may_stream);
        if TEST_HOOKS && MUTED.load(Ordering::Relaxed) {
            // `/cgi-bin/hostile` wrote the reply ring behind our
            // producer's back: a send would overwrite what it wrote.
            return;
        }
        let (reply, ok) = match outcome {
            Outcome::Upload(upload) if more => {
                self.uploads.push(Uploading { id, upload });
                // The request's message is consumed (its body so far
                // went to the program): httpd may send the next part.
                // (Other programs answer at once; httpd then sends no
                // more and needs no credit.)
                self.reply((cgi::wire::input_credit_tag(id, 1), 0, Aggregate::new(d)), "credit");
                return;
            }
            Outcome::Upload(upload) => match self.programs.upload_finish(upload) {
                Ok(out) => (out, true),
                Err(_) => (Aggregate::new(d), false),
            },
            Outcome::Tee(first) if more => {
                // Its first message stands for the request's: credited
                // once it went.
                let out = [(first, false, true)].into_iter().collect();
                self.tees.push(Teeing { id, credit: STREAM_WINDOW, out, owed: 0 });
                return;
            }
            Outcome::Tee(whole) => (whole, true),
            Outcome::Whole(reply, ok) => (reply, ok),
            Outcome::Stream(stream) => {
                self.streams.push(Active { id, stream, credit: STREAM_WINDOW });
                return;
            }
        };
        let flags = if ok { FLAG_EOF } else { 0 };
        // Cannot fail: requests are taken only while no reply waits.
        self.reply((cgi::wire::reply_tag(id, false), flags, reply), "reply");
    }

    /// Sends `reply` to httpd, or keeps it until its ring has room.
    fn reply(&mut self, reply: Reply, what: &str) {
        let tx = &mut self.httpd.chan.tx;
        if let Err((tag, ..)) = self.replies.send(reply, |r| to_httpd(tx, r)) {
            error!("{what} {} dropped: a reply already waits", tag as u32);
        }
    }
}

/// What a request gave.
// Taken apart at once by the caller; boxing would allocate per request.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    /// The whole output, and whether the program succeeded.
    Whole(Aggregate<'static>, bool),
    /// An output that comes over time.
    Stream(cgi::Stream),
    /// A program that consumes its body first.
    Upload(cgi::Upload),
    /// `/cgi-bin/tee`'s first message.
    Tee(Aggregate<'static>),
}

/// Runs one request (`may_stream`: room for another stream).
fn run(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    agg: Aggregate<'static>,
    tag: u64,
    may_stream: bool,
) -> (u32, Outcome) {
    let (id, env, body): (u32, Env, _) = match cgi::wire::decode_request(agg, tag) {
        Ok(x) => x,
        Err(_) => return (cgi::wire::split_request_tag(tag).0, Outcome::Whole(Aggregate::new(d), false)),
    };
    let script = String::from(env.get_str("SCRIPT_NAME").unwrap_or(""));
    if TEST_HOOKS {
        if let Some((id, reply, ok)) = test_hook(d, programs, id, &script, &env) {
            return (id, Outcome::Whole(reply, ok));
        }
    }
    let counters = if matches!(script.as_str(), "/cgi-bin/stats" | "/cgi-bin/page" | "/cgi-bin/metrics") {
        collect()
    } else {
        Counters::default()
    };
    match programs.start(&env, body, &counters, now_ms(), may_stream) {
        Ok(Started::Whole(out)) => (id, Outcome::Whole(out, true)),
        Ok(Started::Stream(s)) => (id, Outcome::Stream(s)),
        Ok(Started::Upload(u)) => (id, Outcome::Upload(u)),
        Ok(Started::Tee(m)) => (id, Outcome::Tee(m)),
        Err(e) => {
            warn!("{script}: {e:?}");
            (id, Outcome::Whole(Aggregate::new(d), false))
        }
    }
}
