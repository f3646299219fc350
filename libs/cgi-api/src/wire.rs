//! The httpd ↔ cgi messages on their IO-Lite channels.
//!
//! * **Request** (httpd → cgi): one aggregate `env ++ body` with
//!   `tag = id << 32 | env_len`. `env` is [`Env::encode`], `body` the POST
//!   body (absent for GET/HEAD), both in the pool the caller names: on the
//!   system, httpd's CGI request pool, which holds only what httpd hands
//!   the cgi (it copies the body there from netstack's socket pool, whose
//!   other buffers hold other clients' requests). `FLAG_EOF` is set.
//! * **Reply** (cgi → httpd): the program's output (CGI header, empty
//!   line, body), with `tag = id` ([`reply_tag`]), either whole in one
//!   message with `FLAG_EOF`, or **streamed**: parts with [`REPLY_MORE`]
//!   in the tag and no `FLAG_EOF`, as the program produces them, the last
//!   one (possibly empty) with `FLAG_EOF`. A message with neither is a
//!   failure (502, or a cut-off response once streaming started). The
//!   body's fragments may be slices of the fs pool and the echo body slices
//!   of the request pool: the CGI forwards references, it does not copy
//!   them.
//! * **Flow control** of a streamed reply: the cgi may have at most
//!   [`STREAM_WINDOW`] messages of one request that httpd has not taken
//!   yet; every message of a stream (the last included) needs one. httpd
//!   gives them back with a [`Control::Credit`] (httpd → cgi, an empty
//!   aggregate without `FLAG_EOF`, [`control_tag`]) when it hands a part to
//!   the network (so a client that does not read stops the program), and
//!   ends a stream it no longer wants (the client left, a `HEAD`, the
//!   `Content-Length` the program announced is complete) with a
//!   [`Control::Cancel`]. A cgi that sends beyond its window breaks the
//!   protocol: httpd has it restarted.
//!
//! * **Streamed request bodies**: a body too large to wait for (over
//!   httpd's `max_body`) goes in parts as it arrives. The request message
//!   carries [`BODY_MORE`] in its tag (and the body so far, maybe none);
//!   the rest follows in **body parts** (`FLAG_EOF` set, like requests, so
//!   they are not controls; tag [`body_part_tag`]: the request's id,
//!   [`BODY_PART`], and [`BODY_MORE`] on every part but the last). Every
//!   message with [`BODY_MORE`] uses one of the [`INPUT_WINDOW`] slots of
//!   that request: httpd sends no more until the cgi gives slots back with
//!   an **input credit** on the reply channel (an empty aggregate without
//!   `FLAG_EOF`, [`input_credit_tag`]) once the program consumed them (or
//!   the cgi discarded them: a program that does not read its body). The
//!   last part needs no credit. httpd stops sending parts once the
//!   program's answer is complete (the rest of the body is discarded
//!   there), or after a [`Control::Cancel`].
//!
//! httpd is the only sender of requests and the cgi the only sender of
//! replies; each side validates what it receives.

use iolite::{Aggregate, Domain, PoolId};

use crate::env::{Env, EnvError, MAX_ENV_BYTES};

/// Request-tag bit: more of the body follows in body parts.
pub const BODY_MORE: u64 = 1 << 31;
/// Request-tag bit: the message is a body part of an earlier request (no
/// environment).
pub const BODY_PART: u64 = 1 << 30;
/// The environment length's bits of a request tag.
const ENV_MASK: u64 = BODY_PART - 1;

/// Body messages of one request (those with [`BODY_MORE`]) httpd may
/// have sent that the cgi has not credited yet.
pub const INPUT_WINDOW: u32 = 4;

/// The tag of a request message.
pub fn request_tag(id: u32, env_len: usize) -> u64 {
    (u64::from(id) << 32) | (env_len as u64 & ENV_MASK)
}

/// `(id, env_len)` from a request tag.
pub fn split_request_tag(tag: u64) -> (u32, usize) {
    ((tag >> 32) as u32, (tag & ENV_MASK) as usize)
}

/// The tag of a body part of request `id` (`more`: not the last).
pub fn body_part_tag(id: u32, more: bool) -> u64 {
    (u64::from(id) << 32) | BODY_PART | if more { BODY_MORE } else { 0 }
}

/// What a message from httpd with `FLAG_EOF` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A request (decode it with [`decode_request`]); `more`: its body
    /// goes on in body parts.
    Request {
        /// The request.
        id: u32,
        /// More of the body follows.
        more: bool,
    },
    /// A body part of request `id`; `more`: not the last.
    Part {
        /// The request.
        id: u32,
        /// More parts follow.
        more: bool,
    },
}

/// Tells a request from a body part by its tag.
pub fn decode_input(tag: u64) -> Input {
    let (id, more) = ((tag >> 32) as u32, tag & BODY_MORE != 0);
    if tag & BODY_PART != 0 {
        Input::Part { id, more }
    } else {
        Input::Request { id, more }
    }
}

/// Reply-tag bit of an input credit (see [`input_credit_tag`]).
pub const INPUT_CREDIT: u64 = 1 << 33;

/// The tag of an input credit: the cgi consumed (or discarded) `parts`
/// body messages of request `id` (send an empty aggregate without
/// `FLAG_EOF` on the reply channel).
pub fn input_credit_tag(id: u32, parts: u32) -> u64 {
    u64::from(id) | INPUT_CREDIT | (u64::from(parts.clamp(1, 0xff_ffff)) << 40)
}

/// Builds a request message: the encoded environment generated into
/// `pool`, followed by the body by reference. On `TooManySlices` the
/// caller should flatten the body first.
pub fn encode_request<'d>(
    d: &'d Domain,
    pool: PoolId,
    id: u32,
    env: &Env,
    body: Option<Aggregate<'d>>,
) -> Result<(Aggregate<'d>, u64), iolite::Error> {
    encode_request_more(d, pool, id, env, body, false)
}

/// [`encode_request`] for a request whose body goes on in body parts
/// (`more`: the tag gets [`BODY_MORE`]).
pub fn encode_request_more<'d>(
    d: &'d Domain,
    pool: PoolId,
    id: u32,
    env: &Env,
    body: Option<Aggregate<'d>>,
    more: bool,
) -> Result<(Aggregate<'d>, u64), iolite::Error> {
    // The environment is metadata built by the server (not payload): it is
    // written once into a packed object of `pool`.
    let bytes = env.encode();
    let mut agg = d.pack(pool, bytes.len(), |buf| buf.copy_from_slice(&bytes))?;
    let tag = request_tag(id, agg.len()) | if more { BODY_MORE } else { 0 };
    if let Some(b) = body {
        agg.append(b).map_err(|(e, _)| e)?;
    }
    Ok((agg, tag))
}

/// Splits a received request message into `(id, env, body)`. The env part
/// is copied out and parsed (bounded); the body stays by reference.
pub fn decode_request<'d>(agg: Aggregate<'d>, tag: u64) -> Result<(u32, Env, Option<Aggregate<'d>>), EnvError> {
    let (id, env_len) = split_request_tag(tag);
    if tag & BODY_PART != 0 || env_len > agg.len() || env_len > MAX_ENV_BYTES {
        return Err(EnvError::Malformed);
    }
    let mut head = alloc::vec::Vec::with_capacity(env_len);
    for s in agg.slices() {
        let room = env_len - head.len();
        if room == 0 {
            break;
        }
        head.extend_from_slice(&s[..s.len().min(room)]);
    }
    let env = Env::decode(&head)?;
    let mut body = agg;
    body.advance(env_len).map_err(|_| EnvError::Malformed)?;
    let body = if body.is_empty() { None } else { Some(body) };
    Ok((id, env, body))
}

/// Messages of one streamed reply the cgi may send that httpd has not
/// taken yet (each gives one back with a [`Control::Credit`]).
pub const STREAM_WINDOW: u32 = 4;

/// Tag bit of a reply part after which more parts follow.
pub const REPLY_MORE: u64 = 1 << 32;

/// What a reply message is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// A part of a streamed output; more follow.
    Part,
    /// The whole output, or the last part of a streamed one (`FLAG_EOF`).
    Last,
    /// The program failed (neither `FLAG_EOF` nor [`REPLY_MORE`]).
    Failed,
    /// Not output: an input credit, the program consumed this many body
    /// messages ([`input_credit_tag`]).
    InputCredit(u32),
}

/// The tag of a reply message to request `id` (`more`: a part after which
/// more follow; send it without `FLAG_EOF`).
pub fn reply_tag(id: u32, more: bool) -> u64 {
    u64::from(id) | if more { REPLY_MORE } else { 0 }
}

/// `(id, kind)` of a reply message from its tag and flags. `FLAG_EOF`
/// wins over [`REPLY_MORE`] (a reply cannot be both).
pub fn decode_reply(tag: u64, flags: u32) -> (u32, Reply) {
    let kind = if flags & iolite::FLAG_EOF != 0 {
        Reply::Last
    } else if tag & INPUT_CREDIT != 0 {
        Reply::InputCredit(((tag >> 40) as u32).max(1))
    } else if tag & REPLY_MORE != 0 {
        Reply::Part
    } else {
        Reply::Failed
    };
    (tag as u32, kind)
}

/// A control message from httpd about a streamed reply: an empty
/// aggregate without `FLAG_EOF` (requests have it) and this tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// httpd took `parts` messages of request `id`'s stream: the cgi may
    /// send that many more (never more than [`STREAM_WINDOW`] untaken).
    Credit {
        /// The request.
        id: u32,
        /// Messages taken (at least 1).
        parts: u32,
    },
    /// httpd wants no more of request `id`'s output: the program stops
    /// (what it sends anyway is dropped).
    Cancel {
        /// The request.
        id: u32,
    },
}

/// The tag of a control message: `id << 32 | parts` (a credit) or
/// `id << 32` (a cancel).
pub fn control_tag(c: Control) -> u64 {
    match c {
        Control::Credit { id, parts } => (u64::from(id) << 32) | u64::from(parts.max(1)),
        Control::Cancel { id } => u64::from(id) << 32,
    }
}

/// The control message a message from httpd without `FLAG_EOF` carries.
pub fn decode_control(tag: u64) -> Control {
    let (id, parts) = ((tag >> 32) as u32, tag as u32);
    if parts == 0 {
        Control::Cancel { id }
    } else {
        Control::Credit { id, parts }
    }
}
