//! Static files: `GET`/`HEAD` of a path of the [`FileSource`]. Directories
//! redirect to `/` or serve their `index.html`; preconditions (RFC 9110
//! §13) may answer 304/412 before any byte is read; a `Range` gives 206
//! (one range) or a `multipart/byteranges` 206 whose part headers are
//! generated into our pool. The fixed part of a 200's header comes from
//! the header cache, keyed by path and checked against the file's version.
//! The file's bytes are not read here: an `Out::File` in the connection's
//! output is pulled piece by piece ([`Core::pull_file`]) as the caller
//! takes the output, by reference.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use iolite::Aggregate;

use super::respond::ALLOW_STATIC;
use super::waiting::waiting;
use super::{Conn, ConnMode, Core, Out, Ticket};
use crate::date;
use crate::hcache::Lookup;
use crate::mime::content_type;
use crate::preconditions::{self, Conditions, Outcome};
use crate::range::{self, RangeSpec};
use crate::reason::reason;
use crate::request::{Method, Request};
use crate::source::{Clock, FileSource, FileStat, Kind, SourceError};

/// The strong validator of a file version.
fn etag(st: &FileStat) -> String {
    format!("\"{:x}-{:x}-{:x}-{:x}\"", st.ino, st.generation, st.mtime, st.size)
}
/// What a 2xx response's header says about the file.
struct Meta<'a> {
    st: &'a FileStat,
    ctype: &'a str,
    /// The ETag.
    tag: &'a str,
    /// Last-Modified.
    lm: &'a str,
}

/// What a `Range` asks of the file (GET only), unless `If-Range` says the
/// client's copy is old.
fn range_spec(req: &Request, st: &FileStat, tag: &str) -> RangeSpec {
    match req.header("range") {
        Some(r) if req.method == Method::Get => {
            let current = match req.header("if-range") {
                None => true,
                Some(v) if v.trim_ascii_start().starts_with(b"\"") || v.starts_with(b"W/") => {
                    preconditions::strong_match(v, tag)
                }
                Some(v) => date::parse(v) == Some(st.mtime),
            };
            if current {
                range::parse(r, st.size)
            } else {
                RangeSpec::Full
            }
        }
        _ => RangeSpec::Full,
    }
}

/// The folder of the site disk httpd never serves (docs/config.md).
const PRIVATE: &str = "/.iolite";

impl<'d, S: FileSource<'d>, C: Clock> Core<'d, S, C> {
    pub(super) fn serve_static(&mut self, conn: &mut Conn<'d, S::File>, req: &Request, path: &str, mode: ConnMode) {
        // The site disk's own configuration (`/.iolite/config`, and the
        // write secret it is to hold) is the system's, not the site's.
        if path == PRIVATE || path.strip_prefix(PRIVATE).is_some_and(|rest| rest.starts_with('/')) {
            self.push_simple(conn, 404, req.method == Method::Head, mode, "");
            return;
        }
        self.serve_static_waited(conn, req, path, mode, None);
    }

    /// As `serve_static`, for a request that has waited for the file
    /// source with `ticket` (see `Out::Retry`). A new request queues behind
    /// any that wait, without trying the source.
    pub(super) fn serve_static_waited(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        req: &Request,
        path: &str,
        mode: ConnMode,
        ticket: Option<Ticket>,
    ) {
        let head = req.method == Method::Head;
        if !matches!(req.method, Method::Get | Method::Head) {
            self.push_simple(conn, 405, false, mode, &format!("Allow: {ALLOW_STATIC}\r\n"));
            return;
        }
        if ticket.is_none() && !self.waiting.is_empty() {
            self.stats.file_opens_deferred += 1;
            let (since, ticket) = (self.clock.now_ms(), self.waiting.join());
            conn.outq.push_back(waiting(req, path, mode, since, ticket));
            return;
        }
        let Some(((f, st), path)) = self.open_static(conn, req, path, mode, ticket) else { return };
        // A path still ending in `/` is a file asked for as a directory.
        if st.kind != Kind::File || path.ends_with('/') {
            self.src.close(f);
            let status = if st.kind == Kind::File { 404 } else { 403 };
            self.push_simple(conn, status, head, mode, "");
            return;
        }
        self.serve_file(conn, req, f, &st, &path, mode);
    }

    /// Opens `path` for `req`: a directory's `index.html`, the file itself,
    /// and the path that was opened. `None` when it was answered instead
    /// (a redirect to the directory's `/`, an error) or waits for the
    /// source (busy: queued as `Out::Retry`).
    fn open_static(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        req: &Request,
        path: &str,
        mode: ConnMode,
        ticket: Option<Ticket>,
    ) -> Option<((S::File, FileStat), String)> {
        let head = req.method == Method::Head;
        // A plain GET reads the file from its start next: the source may
        // fetch the first bytes with the open (one call to fs, not three).
        // Not where a precondition or a range may leave them unread.
        let plain = req.method == Method::Get
            && ["range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since"]
                .iter()
                .all(|h| req.header(h).is_none());
        // Not for one that waited for the source: the first read wants
        // `read_chunk` (256 KiB) of fs's buffers at once, and while
        // responses under way read smaller pieces as their clients take
        // them, the freed pages went to those and such an open waited
        // until it expired (503). A plain open needs no buffer; the body
        // is then read as any other.
        let plain = plain && ticket.is_none();
        let first = if plain { self.cfg.read_chunk } else { 0 };
        let open = |src: &mut S, p: &str| if plain { src.open_to_read(p, first) } else { src.open(p) };
        let opened = match open(&mut self.src, path) {
            Err(SourceError::IsDirectory) if !path.ends_with('/') => {
                let q = if req.target.query.is_empty() { String::new() } else { format!("?{}", req.target.query) };
                let loc = format!("Location: {path}/{q}\r\n");
                self.push_simple(conn, 301, head, mode, &loc);
                return None;
            }
            Err(SourceError::IsDirectory) => {
                // The configured names in order; the first that exists.
                let mut found = Err(SourceError::Forbidden);
                for name in &self.cfg.index {
                    let index = format!("{path}{name}");
                    match open(&mut self.src, &index) {
                        Ok(o) => {
                            found = Ok((o, index));
                            break;
                        }
                        Err(SourceError::NotFound | SourceError::IsDirectory) => {}
                        Err(e) => {
                            found = Err(e);
                            break;
                        }
                    }
                }
                found
            }
            Ok(o) => Ok((o, String::from(path))),
            Err(e) => Err(e),
        };
        match opened {
            Ok(o) => Some(o),
            Err(SourceError::Busy) => {
                // Transient: its pages come back as clients read. The
                // request waits for them rather than failing (see
                // `Out::Retry`); `next_within` keeps its first `since`.
                self.stats.file_opens_deferred += 1;
                let since = self.clock.now_ms();
                let ticket = ticket.unwrap_or_else(|| self.waiting.join());
                conn.outq.push_back(waiting(req, path, mode, since, ticket));
                None
            }
            Err(e) => {
                self.push_simple(conn, e.status(), head, mode, "");
                None
            }
        }
    }

    /// The response for an open file: 412 or 304 by the preconditions,
    /// else 200 or 206 (one range, or several as `multipart/byteranges`)
    /// or 416 by the `Range`.
    fn serve_file(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        req: &Request,
        f: S::File,
        st: &FileStat,
        path: &str,
        mode: ConnMode,
    ) {
        let head = req.method == Method::Head;
        let tag = etag(st);
        let lm = date::format(st.mtime);
        let lm = core::str::from_utf8(&lm).unwrap_or("");
        let conds = Conditions {
            if_match: req.header("if-match"),
            if_unmodified_since: req.header("if-unmodified-since"),
            if_none_match: req.header("if-none-match"),
            if_modified_since: req.header("if-modified-since"),
        };
        let outcome = preconditions::evaluate(&conds, true, &tag, st.mtime);
        if outcome == Outcome::Failed {
            self.src.close(f);
            self.push_simple(conn, 412, head, mode, "");
            return;
        }
        if outcome == Outcome::NotModified {
            self.src.close(f);
            let Some(mut a) = self.prefix(304, reason(304), mode) else { return conn.outq.push_back(Out::Close) };
            match self.gen(|w| write!(w, "ETag: {tag}\r\nLast-Modified: {lm}\r\n\r\n")).map(|t| a.append(t)) {
                Some(Ok(())) => conn.outq.push_back(Out::Data(a)),
                _ => conn.outq.push_back(Out::Close),
            }
            return;
        }
        let ctype = content_type(path);
        let meta = Meta { st, ctype, tag: &tag, lm };
        match range_spec(req, st, &tag) {
            RangeSpec::Multi(ranges) => self.multipart(conn, f, st, &ranges, ctype, &tag, lm, mode),
            RangeSpec::Unsatisfiable => {
                self.src.close(f);
                let extra = format!("Content-Range: bytes */{}\r\n", st.size);
                self.push_simple(conn, 416, head, mode, &extra);
            }
            RangeSpec::Partial { start, end } => self.partial(conn, f, &meta, (start, end), mode),
            RangeSpec::Full => self.full(conn, f, &meta, path, head, mode),
        }
    }

    /// A 206 of the one range `start..=end`.
    fn partial(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        f: S::File,
        m: &Meta,
        (start, end): (u64, u64),
        mode: ConnMode,
    ) {
        let Some(mut a) = self.prefix(206, reason(206), mode) else { return conn.outq.push_back(Out::Close) };
        let (size, ctype, tag, lm) = (m.st.size, m.ctype, m.tag, m.lm);
        let len = end - start + 1;
        let tail = self.gen(|w| {
            write!(
                w,
                "Content-Type: {ctype}\r\nContent-Length: {len}\r\nContent-Range: bytes {start}-{end}/{size}\r\n\
                 Last-Modified: {lm}\r\nETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
            )
        });
        match tail.map(|t| a.append(t)) {
            Some(Ok(())) => {
                conn.outq.push_back(Out::Data(a));
                conn.outq.push_back(Out::File { f, off: start, end: end + 1, parts: VecDeque::new() });
            }
            _ => {
                self.src.close(f);
                conn.outq.push_back(Out::Close);
            }
        }
    }

    /// A 200: the per-response prefix, the fixed part of the header from
    /// the header cache (generated on a miss or for a changed file), then
    /// the file (not for `HEAD`).
    fn full(&mut self, conn: &mut Conn<'d, S::File>, f: S::File, m: &Meta, path: &str, head: bool, mode: ConnMode) {
        let Some(mut a) = self.prefix(200, reason(200), mode) else { return conn.outq.push_back(Out::Close) };
        let st = m.st;
        let key = (st.ino, st.generation, st.mtime, st.size);
        let fixed = match self.hcache.get(path, key) {
            Lookup::Hit(h) => {
                self.stats.header_cache_hits += 1;
                Some(h)
            }
            other => {
                if matches!(other, Lookup::Stale) {
                    self.stats.header_cache_invalidations += 1;
                } else {
                    self.stats.header_cache_misses += 1;
                }
                let (size, ctype, tag, lm) = (st.size, m.ctype, m.tag, m.lm);
                let h = self.gen(|w| {
                    write!(
                        w,
                        "Content-Type: {ctype}\r\nContent-Length: {size}\r\nLast-Modified: {lm}\r\n\
                         ETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
                    )
                });
                if let Some(h) = &h {
                    if let Ok(keep) = h.duplicate() {
                        self.hcache.put(path, key, keep);
                    }
                }
                h
            }
        };
        match fixed.map(|t| a.append(t)) {
            Some(Ok(())) => {
                conn.outq.push_back(Out::Data(a));
                if head || st.size == 0 {
                    self.src.close(f);
                } else {
                    conn.outq.push_back(Out::File { f, off: 0, end: st.size, parts: VecDeque::new() });
                }
            }
            _ => {
                self.src.close(f);
                conn.outq.push_back(Out::Close);
            }
        }
    }

    /// The next piece of the file at the front of `conn`'s output:
    /// `Ok(None)` when the source is busy for now (fs out of buffers or its
    /// channel full, typically while slow clients hold cached pages): the
    /// file stays where it is and is read again later, because the header
    /// has promised its bytes. `Err` when it cannot be read at all.
    /// The next piece of the file at the front of `conn`'s output: at most
    /// `max` (>= 1) bytes of it, or the next part's header.
    pub(super) fn pull_file(&mut self, conn: &mut Conn<'d, S::File>, max: usize) -> Result<Option<Aggregate<'d>>, ()> {
        let Some(Out::File { f, off, end, parts }) = conn.outq.front_mut() else { return Err(()) };
        if *off >= *end {
            // The next part's header (and after the last range, the closing
            // delimiter as a part without bytes).
            let Some((hdr, s, e)) = parts.pop_front() else { return Err(()) };
            (*off, *end) = (s, e);
            if s >= e && parts.is_empty() {
                if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                    self.src.close(f);
                }
            }
            return Ok(Some(hdr));
        }
        let want = (*end - *off).min(self.cfg.read_chunk.min(max.max(1)) as u64) as usize;
        let r = self.src.read(f, *off, want);
        let agg = match r {
            Ok(a) if !a.is_empty() && a.len() <= want => a,
            Err(SourceError::Busy) => {
                self.stats.file_reads_deferred += 1;
                return Ok(None);
            }
            _ => {
                if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                    self.src.close(f);
                }
                return Err(());
            }
        };
        *off += agg.len() as u64;
        if *off >= *end && parts.is_empty() {
            if let Some(Out::File { f, .. }) = conn.outq.pop_front() {
                self.src.close(f);
            }
        }
        self.stats.body_bytes_by_ref += agg.len() as u64;
        Ok(Some(agg))
    }

    /// A `multipart/byteranges` 206 (RFC 9110 §14.6): the header and each
    /// part's header are generated into our pool, the file's bytes follow
    /// by reference (the file is read once per range, lazily).
    #[allow(clippy::too_many_arguments)]
    fn multipart(
        &mut self,
        conn: &mut Conn<'d, S::File>,
        f: S::File,
        st: &FileStat,
        ranges: &[(u64, u64)],
        ctype: &str,
        tag: &str,
        lm: &str,
        mode: ConnMode,
    ) {
        self.next_boundary = self.next_boundary.wrapping_add(1);
        // Hex digits of a per-server counter and the file's version: no
        // line of a part header has this form, and a file would have to
        // contain it on its own line to confuse a client.
        let boundary = format!("iolite-{:016x}{:08x}", self.next_boundary, st.mtime as u32 ^ st.ino);
        let size = st.size;
        let heads: Vec<String> = ranges
            .iter()
            .map(|(s, e)| {
                format!("\r\n--{boundary}\r\nContent-Type: {ctype}\r\nContent-Range: bytes {s}-{e}/{size}\r\n\r\n")
            })
            .collect();
        let closing = format!("\r\n--{boundary}--\r\n");
        let len: u64 = heads.iter().map(|h| h.len() as u64).sum::<u64>()
            + ranges.iter().map(|(s, e)| e - s + 1).sum::<u64>()
            + closing.len() as u64;
        let Some(mut a) = self.prefix(206, reason(206), mode) else {
            self.src.close(f);
            return conn.outq.push_back(Out::Close);
        };
        let tail = self.gen(|w| {
            write!(
                w,
                "Content-Type: multipart/byteranges; boundary={boundary}\r\nContent-Length: {len}\r\n\
                 Last-Modified: {lm}\r\nETag: {tag}\r\nAccept-Ranges: bytes\r\n\r\n"
            )
        });
        let mut parts = VecDeque::new();
        for (h, (s, e)) in heads.iter().zip(ranges) {
            match self.gen(|w| w.write_str(h)) {
                Some(g) => parts.push_back((g, *s, e + 1)),
                None => break,
            }
        }
        match (self.gen(|w| w.write_str(&closing)), tail.map(|t| a.append(t))) {
            (Some(c), Some(Ok(()))) if parts.len() == ranges.len() => {
                parts.push_back((c, size, size));
                conn.outq.push_back(Out::Data(a));
                conn.outq.push_back(Out::File { f, off: 0, end: 0, parts });
            }
            _ => {
                self.src.close(f);
                conn.outq.push_back(Out::Close);
            }
        }
    }
}
