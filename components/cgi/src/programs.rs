//! The built-in CGI programs, run in the cgi component's protection domain.
//!
//! * `/cgi-bin/stats`: the counters of every component, HTML, or JSON with
//!   `?format=json` (see [`crate::stats`]).
//! * `/cgi-bin/metrics` (httpd's `/metrics`): the same counters in the
//!   Prometheus text format (see [`crate::metrics`]).
//! * `/cgi-bin/echo`: the method, the meta-variables and the body. The body
//!   goes back **by reference**: the reply aggregate is a generated part
//!   followed by the very slices the request body arrived in.
//! * `/cgi-bin/page`: a page assembled from static fragments read from the
//!   file system as aggregates (slices of the file cache, kept in a small
//!   fragment cache) with generated parts chained in between. Most of its
//!   bytes are never copied, and the page says how many were referenced,
//!   generated and copied.
//! * `/cgi-bin/stream`: text made over time, in parts (see
//!   [`crate::stream`]): [`Programs::start`] answers [`Started::Stream`],
//!   and the component sends its messages ([`Programs::stream_next`]) as
//!   they are due, while httpd passes each on at once.
//!
//! * `/cgi-bin/upload`: consumes its body as it arrives and answers with
//!   its length and SHA-256 (see [`crate::upload`]): [`Programs::start`]
//!   answers [`Started::Upload`], the component feeds it the body's parts
//!   ([`Programs::upload_feed`]) and sends its output at the end
//!   ([`Programs::upload_finish`]).
//!
//! The other programs do not read a streamed body beyond what came with
//! the request (the component discards the rest, crediting it back):
//! `/cgi-bin/echo` echoes only that (bodies up to httpd's `max_body` come
//! whole).
//!
//! Any other name answers `Status: 404`.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use iolite::{Aggregate, Domain, PoolId};

use crate::env::Env;
use crate::gen::{bytes_escape, generate, html_escape};
use crate::stats::{write_html, write_json, Component, Counters};
use crate::stream::Stream;
use crate::upload::Upload;

/// Where the page's static fragments come from (on target: the fs
/// component, read with `read_shared`; in tests: memory).
pub trait FragmentSource<'d> {
    /// A value that changes whenever the fragment's contents change (e.g.
    /// from ⟨ino, generation, mtime, size⟩), or `None` if it does not exist.
    fn version(&mut self, path: &str) -> Option<u64>;
    /// The whole fragment as an aggregate, by reference.
    fn read(&mut self, path: &str) -> Option<Aggregate<'d>>;
}

/// The fragments `/cgi-bin/page` is made of, in order; generated parts go
/// between them.
pub const FRAGMENTS: [&str; 3] = ["/fragments/top.html", "/fragments/middle.html", "/fragments/bottom.html"];

/// Counters of the programs (exported as the `cgi` component).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// Requests run.
    pub requests: u64,
    /// Requests per program.
    pub stats_requests: u64,
    /// `/cgi-bin/metrics` (`/metrics`) runs.
    pub metrics_requests: u64,
    /// `/cgi-bin/echo` runs.
    pub echo_requests: u64,
    /// `/cgi-bin/page` runs.
    pub page_requests: u64,
    /// `/cgi-bin/stream` runs started.
    pub stream_requests: u64,
    /// `/cgi-bin/stream` runs refused with 503 (too many at once).
    pub streams_refused: u64,
    /// Messages of streamed outputs made.
    pub stream_messages: u64,
    /// `/cgi-bin/upload` runs.
    pub upload_requests: u64,
    /// Body bytes `/cgi-bin/upload` consumed (read in place).
    pub upload_bytes: u64,
    /// `/cgi-bin/tee` runs.
    pub tee_requests: u64,
    /// Body bytes `/cgi-bin/tee` passed back (by reference).
    pub tee_bytes: u64,
    /// Unknown programs (404).
    pub not_found: u64,
    /// Bytes written by the programs (headers and generated text).
    pub generated_bytes: u64,
    /// Bytes passed on by reference (fragments, echoed bodies).
    pub referenced_bytes: u64,
    /// Fragment cache hits and misses.
    pub fragment_hits: u64,
    /// Fragment cache misses (first use or changed).
    pub fragment_misses: u64,
    /// Runs that failed (no memory, missing fragment).
    pub failures: u64,
}

/// Why a program could not produce output (the cgi component then replies
/// with a fault, and httpd answers 502).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramError {
    /// An IO-Lite operation failed (pool exhausted, too many slices).
    Iolite(iolite::Error),
    /// A fragment of `/cgi-bin/page` is missing.
    MissingFragment,
}

impl From<iolite::Error> for ProgramError {
    fn from(e: iolite::Error) -> Self {
        ProgramError::Iolite(e)
    }
}

struct Cached<'d> {
    path: &'static str,
    version: u64,
    agg: Aggregate<'d>,
}

/// The program runner of the cgi component.
pub struct Programs<'d, F> {
    d: &'d Domain,
    pool: PoolId,
    frags: F,
    cache: Vec<Cached<'d>>,
    stats: ProgramStats,
}

/// What a program answered with.
// Taken apart at once by the caller; boxing would allocate per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Started<'d> {
    /// Its whole output.
    Whole(Aggregate<'d>),
    /// A program whose output comes over time: send its messages as they
    /// are due ([`Programs::stream_next`]).
    Stream(Stream),
    /// A program that consumes its body first (fed the request's body
    /// already): feed it the rest ([`Programs::upload_feed`]), then send
    /// its output ([`Programs::upload_finish`]).
    Upload(Upload),
    /// `/cgi-bin/tee`, which answers with its body as it reads it: this is
    /// its first output message (its header and the body that came with
    /// the request, by reference). A whole body ends it; for a streamed
    /// one every further part is its next message
    /// ([`Programs::tee_part`]), the last part its last.
    Tee(Aggregate<'d>),
}

/// The value of `key` in a query string (`a=1&format=json`), undecoded.
pub fn query_param<'q>(query: &'q str, key: &str) -> Option<&'q str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then_some(v)
    })
}

impl<'d, F: FragmentSource<'d>> Programs<'d, F> {
    /// A runner generating into `pool` (owned by the cgi's domain `d`).
    pub fn new(d: &'d Domain, pool: PoolId, frags: F) -> Self {
        Self { d, pool, frags, cache: Vec::new(), stats: ProgramStats::default() }
    }

    /// The counters.
    pub fn stats(&self) -> ProgramStats {
        self.stats
    }

    /// The fragment source.
    pub fn fragments_mut(&mut self) -> &mut F {
        &mut self.frags
    }

    /// The cgi component's counters, for `/cgi-bin/stats`.
    pub fn component(&self) -> Component {
        let s = self.stats;
        Component::new("cgi")
            .with("requests", s.requests)
            .with("generated_bytes", s.generated_bytes)
            .with("referenced_bytes", s.referenced_bytes)
            .with("fragment_hits", s.fragment_hits)
            .with("fragment_misses", s.fragment_misses)
            .with("failures", s.failures)
            .with("stream_requests", s.stream_requests)
            .with("streams_refused", s.streams_refused)
            .with("stream_messages", s.stream_messages)
            .with("upload_requests", s.upload_requests)
            .with("upload_bytes", s.upload_bytes)
            .with("tee_requests", s.tee_requests)
            .with("tee_bytes", s.tee_bytes)
            .with("metrics_requests", s.metrics_requests)
            .with_iolite(&self.d.stats())
    }

    /// Drops the cached fragments (e.g. on `FLAG_RECLAIM`).
    pub fn drop_cache(&mut self) {
        self.cache.clear();
    }

    /// Runs the program named by `SCRIPT_NAME` and returns its whole
    /// output (CGI header, empty line, body). `/cgi-bin/stream` cannot
    /// answer this way: it says 503 (use [`Programs::start`]).
    pub fn run(
        &mut self,
        env: &Env,
        body: Option<Aggregate<'d>>,
        counters: &Counters,
    ) -> Result<Aggregate<'d>, ProgramError> {
        match self.start(env, body, counters, 0, false)? {
            Started::Whole(a) => Ok(a),
            Started::Upload(u) => self.upload_finish(u),
            Started::Tee(a) => Ok(a),
            Started::Stream(_) => unreachable!("not allowed to stream"),
        }
    }

    /// Starts the program named by `SCRIPT_NAME` at `now_ms`: its whole
    /// output, or (`/cgi-bin/stream`, if `may_stream`: the component has
    /// room for another) a stream whose messages come later; when it may
    /// not, that program answers `503` with `Retry-After`.
    pub fn start(
        &mut self,
        env: &Env,
        body: Option<Aggregate<'d>>,
        counters: &Counters,
        now_ms: u64,
        may_stream: bool,
    ) -> Result<Started<'d>, ProgramError> {
        self.stats.requests += 1;
        let r = match env.get_str("SCRIPT_NAME").unwrap_or("") {
            "/cgi-bin/stream" if may_stream => {
                self.stats.stream_requests += 1;
                return Ok(Started::Stream(Stream::from_query(env.get_str("QUERY_STRING").unwrap_or(""), now_ms)));
            }
            "/cgi-bin/stream" => {
                self.stats.streams_refused += 1;
                self.gen(|w| {
                    w.write_str(
                        "Status: 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ntoo many streams at once\n",
                    )
                })
            }
            "/cgi-bin/upload" => {
                self.stats.upload_requests += 1;
                let mut u = Upload::new();
                if let Some(b) = &body {
                    self.upload_feed(&mut u, b);
                }
                return Ok(Started::Upload(u));
            }
            "/cgi-bin/tee" => {
                self.stats.tee_requests += 1;
                return self.run_tee(body).map(Started::Tee).inspect_err(|_| self.stats.failures += 1);
            }
            "/cgi-bin/stats" => self.run_stats(env, counters),
            "/cgi-bin/metrics" => self.run_metrics(counters),
            "/cgi-bin/echo" => self.run_echo(env, body),
            "/cgi-bin/page" => self.run_page(env, counters),
            _ => {
                self.stats.not_found += 1;
                self.gen(|w| {
                    w.write_str(
                        "Status: 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nno such program\n",
                    )
                })
            }
        };
        if r.is_err() {
            self.stats.failures += 1;
        }
        r.map(Started::Whole)
    }

    /// The next message of a stream [`Programs::start`] began (see
    /// [`Stream::next_message`]): `(message, last)`; on an error (our pool
    /// is full for now) try again when buffers come back.
    pub fn stream_next(&mut self, s: &mut Stream) -> Result<(Aggregate<'d>, bool), ProgramError> {
        let (m, last) = s.next_message(self.d, self.pool)?;
        self.stats.stream_messages += 1;
        self.stats.generated_bytes += m.len() as u64;
        Ok((m, last))
    }

    /// Feeds a part of its body to a running `/cgi-bin/upload`.
    pub fn upload_feed(&mut self, u: &mut Upload, part: &Aggregate<'_>) {
        u.feed(part);
        self.stats.upload_bytes += part.len() as u64;
    }

    /// `/cgi-bin/upload`'s output, its body complete.
    pub fn upload_finish(&mut self, u: Upload) -> Result<Aggregate<'d>, ProgramError> {
        let r = u.finish(self.d, self.pool);
        match &r {
            Ok(a) => self.stats.generated_bytes += a.len() as u64,
            Err(_) => self.stats.failures += 1,
        }
        Ok(r?)
    }

    fn gen(&mut self, f: impl Fn(&mut dyn Write) -> core::fmt::Result) -> Result<Aggregate<'d>, ProgramError> {
        let a = generate(self.d, self.pool, f)?;
        self.stats.generated_bytes += a.len() as u64;
        Ok(a)
    }

    fn run_stats(&mut self, env: &Env, counters: &Counters) -> Result<Aggregate<'d>, ProgramError> {
        self.stats.stats_requests += 1;
        let mut all = counters.clone();
        all.push(self.component());
        let json = query_param(env.get_str("QUERY_STRING").unwrap_or(""), "format") == Some("json");
        self.gen(|w| {
            if json {
                w.write_str("Content-Type: application/json\r\nCache-Control: no-store\r\n\r\n")?;
                write_json(w, &all)
            } else {
                w.write_str("Content-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n\r\n")?;
                write_html(w, &all)
            }
        })
    }

    fn run_metrics(&mut self, counters: &Counters) -> Result<Aggregate<'d>, ProgramError> {
        self.stats.metrics_requests += 1;
        let mut all = counters.clone();
        all.push(self.component());
        self.gen(|w| {
            write!(w, "Content-Type: {}\r\nCache-Control: no-store\r\n\r\n", crate::metrics::CONTENT_TYPE)?;
            crate::metrics::write_metrics(w, &all)
        })
    }

    fn run_echo(&mut self, env: &Env, body: Option<Aggregate<'d>>) -> Result<Aggregate<'d>, ProgramError> {
        self.stats.echo_requests += 1;
        let blen = body.as_ref().map_or(0, |b| b.len());
        let mut out = self.gen(|w| {
            w.write_str("Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n\r\n")?;
            w.write_str("method: ")?;
            bytes_escape(w, env.get("REQUEST_METHOD").unwrap_or(b""))?;
            w.write_str("\n\nmeta-variables:\n")?;
            for (n, v) in env.iter() {
                write!(w, "{n}=")?;
                bytes_escape(w, v)?;
                w.write_char('\n')?;
            }
            write!(w, "\nbody: {blen} bytes (passed back by reference)\n")
        })?;
        if let Some(b) = body {
            self.stats.referenced_bytes += b.len() as u64;
            if let Err((_, b)) = out.append(b) {
                // More slices than an aggregate holds: one counted copy.
                let flat = b.copy_to_pool(self.pool)?;
                out.append(flat).map_err(|(e, _)| e)?;
            }
        }
        Ok(out)
    }

    /// `/cgi-bin/tee`'s first message: a header, then whatever body came
    /// with the request, by reference.
    fn run_tee(&mut self, body: Option<Aggregate<'d>>) -> Result<Aggregate<'d>, ProgramError> {
        let mut out =
            self.gen(|w| w.write_str("Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n"))?;
        if let Some(b) = body {
            self.stats.tee_bytes += b.len() as u64;
            self.stats.referenced_bytes += b.len() as u64;
            if let Err((_, b)) = out.append(b) {
                // More slices than an aggregate holds: one counted copy.
                let flat = b.copy_to_pool(self.pool)?;
                out.append(flat).map_err(|(e, _)| e)?;
            }
        }
        Ok(out)
    }

    /// `/cgi-bin/tee`'s next message: a part of its body, passed back as
    /// it is (by reference).
    pub fn tee_part(&mut self, part: Aggregate<'d>) -> Aggregate<'d> {
        self.stats.tee_bytes += part.len() as u64;
        self.stats.referenced_bytes += part.len() as u64;
        part
    }

    fn fragment(&mut self, path: &'static str) -> Result<Aggregate<'d>, ProgramError> {
        let v = self.frags.version(path).ok_or(ProgramError::MissingFragment)?;
        if let Some(c) = self.cache.iter().find(|c| c.path == path && c.version == v) {
            self.stats.fragment_hits += 1;
            return Ok(c.agg.duplicate()?);
        }
        self.stats.fragment_misses += 1;
        self.cache.retain(|c| c.path != path);
        let agg = self.frags.read(path).ok_or(ProgramError::MissingFragment)?;
        self.cache.push(Cached { path, version: v, agg: agg.duplicate()? });
        Ok(agg)
    }

    fn run_page(&mut self, env: &Env, counters: &Counters) -> Result<Aggregate<'d>, ProgramError> {
        self.stats.page_requests += 1;
        let copied_before = self.d.stats().bytes_copied;
        let mut frags = Vec::with_capacity(FRAGMENTS.len());
        for p in FRAGMENTS {
            frags.push(self.fragment(p)?);
        }
        let referenced: usize = frags.iter().map(|f| f.len()).sum();
        let n = self.stats.page_requests;
        let remote = String::from(env.get_str("REMOTE_ADDR").unwrap_or("?"));
        let head =
            self.gen(|w| w.write_str("Content-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n\r\n"))?;
        let up = counters.uptime_ms;
        let part1 = self.gen(|w| {
            write!(w, "<p class=\"meta\">Assembled for <code>")?;
            html_escape(w, &remote)?;
            writeln!(w, "</code> at uptime {}.{:03} s; this is request {n} of this page.</p>", up / 1000, up % 1000)
        })?;
        let generated_so_far = head.len() + part1.len();
        let by_ref = counters.total("bytes_by_ref_sent");
        let copied = counters.total("bytes_copied");
        let copied_now = self.d.stats().bytes_copied - copied_before;
        let part2 = self.gen(|w| {
            write!(
                w,
                "<table class=\"accounting\"><tr><th>bytes of this page from {} cached fragments, by reference</th><td>{referenced}</td></tr>\n\
                 <tr><th>bytes generated before this table (CGI header and the line above)</th><td>{generated_so_far}</td></tr>\n\
                 <tr><th>bytes copied to build it</th><td>{copied_now}</td></tr>\n\
                 <tr><th>system-wide: payload bytes passed by reference / copied</th><td>{by_ref} / {copied}</td></tr></table>\n",
                FRAGMENTS.len()
            )
        })?;
        self.stats.referenced_bytes += referenced as u64;
        let mut it = frags.into_iter();
        let mut out = head;
        for part in [it.next(), Some(part1), it.next(), Some(part2), it.next()].into_iter().flatten() {
            out.append(part).map_err(|(e, _)| e)?;
        }
        Ok(out)
    }
}
