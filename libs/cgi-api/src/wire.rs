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
//! httpd is the only sender of requests and the cgi the only sender of
//! replies; each side validates what it receives.

use iolite::{Aggregate, Domain, PoolId};

use crate::env::{Env, EnvError, MAX_ENV_BYTES};

/// The tag of a request message.
pub fn request_tag(id: u32, env_len: usize) -> u64 {
    (u64::from(id) << 32) | (env_len as u64 & 0xffff_ffff)
}

/// `(id, env_len)` from a request tag.
pub fn split_request_tag(tag: u64) -> (u32, usize) {
    ((tag >> 32) as u32, (tag & 0xffff_ffff) as usize)
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
    // The environment is metadata built by the server (not payload): it is
    // written once into a packed object of `pool`.
    let bytes = env.encode();
    let mut agg = d.pack(pool, bytes.len(), |buf| buf.copy_from_slice(&bytes))?;
    let tag = request_tag(id, agg.len());
    if let Some(b) = body {
        agg.append(b).map_err(|(e, _)| e)?;
    }
    Ok((agg, tag))
}

/// Splits a received request message into `(id, env, body)`. The env part
/// is copied out and parsed (bounded); the body stays by reference.
pub fn decode_request<'d>(agg: Aggregate<'d>, tag: u64) -> Result<(u32, Env, Option<Aggregate<'d>>), EnvError> {
    let (id, env_len) = split_request_tag(tag);
    if env_len > agg.len() || env_len > MAX_ENV_BYTES {
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
