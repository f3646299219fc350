//! The httpd ↔ cgi messages on their IO-Lite channels.
//!
//! * **Request** (httpd → cgi): one aggregate `env ++ body` with
//!   `tag = id << 32 | env_len`. `env` is [`Env::encode`], `body` the POST
//!   body (absent for GET/HEAD), both in the pool the caller names: on the
//!   system, httpd's CGI request pool, which holds only what httpd hands
//!   the cgi (it copies the body there from netstack's socket pool, whose
//!   other buffers hold other clients' requests). `FLAG_EOF` is set.
//! * **Reply** (cgi → httpd): one aggregate, the program's output (CGI
//!   header, empty line, body), with `tag = id` and `FLAG_EOF`. The body's
//!   fragments may be slices of the fs pool and the echo body slices of
//!   the request pool: the CGI forwards references, it does not copy them.
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
