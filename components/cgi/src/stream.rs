//! `/cgi-bin/stream?size=N&parts=K&delay_ms=D[&length=1][&seed=S]`: a
//! program whose output comes over time, in `K` parts `D` ms apart (the
//! first at once), `N` bytes of text in all. It shows a CGI's output
//! reaching the client while the program still runs: the cgi component
//! sends each message as it is made ([`Stream::next_message`], a part of
//! the `cgi_api::wire` stream protocol), and httpd passes it on at once
//! (chunked, or with the `Content-Length` the program announces when
//! `length=1`).
//!
//! The text is 64-byte lines, `OOOOOOOOOOOOOOOO LLL…L\n`: the line's byte
//! offset in hex (16 digits), a space, 46 times one letter (`a` + (line +
//! seed) mod 26) and a newline; the last line is cut at `N`. A byte's
//! value depends on its offset only, so a client can check every byte and
//! tell where a wrong one sits, however the parts fell.
//!
//! A part larger than [`MESSAGE_BYTES`] goes as several messages, one
//! after the other as the window allows. Bounds: `N` ≤ [`MAX_SIZE`], `K`
//! in 1..=[`MAX_PARTS`], `D` ≤ [`MAX_DELAY_MS`] (below httpd's CGI timeout,
//! which a stream must not sleep through).

use iolite::{Aggregate, Domain, PoolId};

use crate::gen::generate;
use crate::programs::query_param;

/// Largest output (bytes).
pub const MAX_SIZE: u64 = 16 << 20;
/// Most parts.
pub const MAX_PARTS: u32 = 1024;
/// Longest delay between parts.
pub const MAX_DELAY_MS: u64 = 2000;
/// Most body bytes in one message (one buffer of the cgi's pool).
pub const MESSAGE_BYTES: usize = 32 * 1024;
/// Bytes per line of the text.
pub const LINE: usize = 64;

/// The bytes at `offset..offset + buf.len()` of a stream's text with
/// `seed` (see the module docs).
pub fn text_at(seed: u32, offset: u64, buf: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut done = 0;
    while done < buf.len() {
        let pos = offset + done as u64;
        let index = pos / LINE as u64;
        let start = index * LINE as u64;
        let mut line = [0u8; LINE];
        for (k, b) in line[..16].iter_mut().enumerate() {
            *b = HEX[(start >> (60 - 4 * k)) as usize & 15];
        }
        line[16] = b' ';
        let letter = b'a' + ((index + u64::from(seed)) % 26) as u8;
        line[17..LINE - 1].fill(letter);
        line[LINE - 1] = b'\n';
        let from = (pos - start) as usize;
        let n = (LINE - from).min(buf.len() - done);
        buf[done..done + n].copy_from_slice(&line[from..from + n]);
        done += n;
    }
}

/// A running `/cgi-bin/stream` (see the module docs).
#[derive(Debug, Clone)]
pub struct Stream {
    seed: u32,
    size: u64,
    parts: u32,
    delay_ms: u64,
    length: bool,
    start_ms: u64,
    /// Body bytes made so far.
    sent: u64,
    /// The part the next byte belongs to.
    part: u32,
    /// Whether the header went (with the first message).
    header_sent: bool,
}

impl Stream {
    /// The program for `query`, started at `now_ms` (missing or bad values
    /// take the defaults: 1 MiB in 8 parts 250 ms apart; out-of-range ones
    /// are clamped).
    pub fn from_query(query: &str, now_ms: u64) -> Stream {
        let num = |k: &str| query_param(query, k).and_then(|v| v.parse::<u64>().ok());
        let mut s = Stream {
            seed: num("seed").unwrap_or(0) as u32,
            size: num("size").unwrap_or(1 << 20).min(MAX_SIZE),
            parts: num("parts").unwrap_or(8).clamp(1, u64::from(MAX_PARTS)) as u32,
            delay_ms: num("delay_ms").unwrap_or(250).min(MAX_DELAY_MS),
            length: num("length") == Some(1),
            start_ms: now_ms,
            sent: 0,
            part: 0,
            header_sent: false,
        };
        s.skip_empty_parts();
        s
    }

    /// Where part `j` begins.
    fn bound(&self, j: u32) -> u64 {
        u64::from(j) * self.size / u64::from(self.parts)
    }

    /// Moves `part` on to the part the next byte is in (parts of no bytes,
    /// when `size < parts`, are skipped).
    fn skip_empty_parts(&mut self) {
        while self.part + 1 < self.parts && self.bound(self.part + 1) <= self.sent {
            self.part += 1;
        }
    }

    /// Whether everything was made.
    pub fn finished(&self) -> bool {
        self.header_sent && self.sent == self.size
    }

    /// When the next message is due (`None`: finished).
    pub fn due_ms(&self) -> Option<u64> {
        if self.finished() {
            return None;
        }
        if !self.header_sent {
            return Some(self.start_ms);
        }
        Some(self.start_ms + u64::from(self.part) * self.delay_ms)
    }

    /// The total size of the body.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the next message in fresh buffers of `pool` (the first starts
    /// with the CGI header): at most [`MESSAGE_BYTES`] of the current part.
    /// `Ok((message, last))`. On an error (the pool is full for now)
    /// nothing changed: try again later.
    pub fn next_message<'d>(&mut self, d: &'d Domain, pool: PoolId) -> Result<(Aggregate<'d>, bool), iolite::Error> {
        let part_end = if self.part + 1 < self.parts { self.bound(self.part + 1) } else { self.size };
        // The header goes at once; alone if the first bytes are due later
        // (parts without bytes before them, when `size < parts`).
        let n = if !self.header_sent && self.part > 0 {
            0
        } else {
            (part_end - self.sent).min(MESSAGE_BYTES as u64) as usize
        };
        let mut out = if self.header_sent {
            Aggregate::new(d)
        } else {
            let (length, size) = (self.length, self.size);
            generate(d, pool, |w| {
                w.write_str("Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n")?;
                // Browsers then show the text as it comes, unsniffed.
                w.write_str("X-Content-Type-Options: nosniff\r\n")?;
                if length {
                    write!(w, "Content-Length: {size}\r\n")?;
                }
                w.write_str("\r\n")
            })?
        };
        if n > 0 {
            let mut b = d.alloc(pool, n)?;
            text_at(self.seed, self.sent, &mut b.writable()[..n]);
            let body = b.seal(n).map_err(|(e, _)| e)?;
            out.append(body).map_err(|(e, _)| e)?;
        }
        self.header_sent = true;
        self.sent += n as u64;
        self.skip_empty_parts();
        Ok((out, self.finished()))
    }
}
