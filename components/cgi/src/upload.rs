//! `/cgi-bin/upload`: a program that consumes its whole request body, as
//! it arrives, and answers with its length and SHA-256:
//!
//! ```text
//! Content-Type: text/plain; charset=utf-8
//!
//! length: 8388608
//! sha256: 3f7a…(64 hex digits)
//! ```
//!
//! It shows a large POST body (up to httpd's `max_cgi_body`) reaching a
//! program in parts (`cgi_api::wire`: the request with `BODY_MORE`, then
//! body parts): the cgi component feeds each part to [`Upload::feed`] as it
//! comes and credits it back to httpd, so at most the window of parts is
//! ever in the request pool. The body's bytes are read in place (hashed),
//! never copied. A body without `more` (small, whole) is fed at once.

use iolite::{Aggregate, Domain, PoolId};
use sha2::{Digest, Sha256};

use crate::gen::generate;

/// A running `/cgi-bin/upload`: the body's length and hash so far.
pub struct Upload {
    len: u64,
    hash: Sha256,
}

impl Default for Upload {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Upload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Upload").field("len", &self.len).finish()
    }
}

impl Upload {
    /// Nothing consumed yet.
    pub fn new() -> Self {
        Self { len: 0, hash: Sha256::new() }
    }

    /// Consumes a part of the body (read in place, by reference).
    pub fn feed(&mut self, part: &Aggregate<'_>) {
        for s in part.slices() {
            self.hash.update(s);
        }
        self.len += part.len() as u64;
    }

    /// Body bytes consumed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was consumed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The program's output once the body is complete.
    pub fn finish<'d>(self, d: &'d Domain, pool: PoolId) -> Result<Aggregate<'d>, iolite::Error> {
        let digest = self.hash.finalize();
        let len = self.len;
        generate(d, pool, |w| {
            w.write_str("Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n\r\n")?;
            write!(w, "length: {len}\nsha256: ")?;
            for b in digest.iter() {
                write!(w, "{b:02x}")?;
            }
            w.write_char('\n')
        })
    }
}
