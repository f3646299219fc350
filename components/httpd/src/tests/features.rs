//! Every feature of the server, one test (or a few) each.

use super::*;
use crate::Limits;

fn req(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

#[test]
fn static_file_is_sent_by_reference_with_full_headers() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, &req("/file-64k.bin", ""));
    let dr = h.drain(c);
    assert!(!dr.closed);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r.len(), 1);
    let r = &r[0];
    assert_eq!(r.status, 200);
    assert_eq!(r.body, content(65536, 2));
    assert_eq!(r.header("Content-Length"), Some("65536"));
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(r.header("Server"), Some(crate::SERVER));
    assert_eq!(r.header("Date"), Some("Wed, 15 Nov 2023 22:13:21 GMT"));
    assert_eq!(r.header("Last-Modified"), Some("Tue, 14 Nov 2023 22:13:20 GMT"));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    let tag = r.header("ETag").unwrap();
    assert!(tag.starts_with('"') && tag.ends_with("-10000\""), "{tag}");
    assert_eq!(r.header("Connection"), None, "HTTP/1.1 keeps the connection by default");
    // By reference: the file's own slices went out, and nothing was copied.
    let file = h.srv.source_mut().descs("/file-64k.bin");
    let sent: Vec<SliceDesc> = dr.sends.iter().flat_map(|a| a.descs().to_vec()).collect();
    for f in &file {
        assert!(sent.contains(f), "file slice {f:?} sent by reference");
    }
    assert_eq!(d.stats().bytes_copied, 0, "static responses copy nothing");
    assert_eq!(dr.sends.len(), 1, "header and a 4-chunk file fit one aggregate");
    // Generated part + fixed part (merged when they are adjacent in the
    // same pack page, as on a first request) + 4 file chunks.
    assert!((5..=6).contains(&dr.sends[0].slice_count()));
    assert_eq!(h.srv.stats().body_bytes_by_ref, 65536);
}

#[test]
fn large_file_streams_in_pieces_without_copies() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, &req("/file-1m.bin", ""));
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r[0].body, content(1 << 20, 3));
    assert!(dr.sends.len() >= 4, "read lazily in pieces: {}", dr.sends.len());
    assert!(dr.sends.iter().all(|a| a.slice_count() <= iolite::MAX_SLICES));
    assert_eq!(d.stats().bytes_copied, 0);
    assert_eq!(h.srv.source_mut().open.get(), 0, "file closed after the last piece");
    // Everything went back: only the cached header and the site's data remain.
    drop(dr);
    h.srv.closed(c);
    assert_eq!(d.pool_stats(NET_POOL).unwrap().buffers_in_use, 0);
}

#[test]
fn a_small_transport_gets_small_pieces_byte_exact() {
    // A peer that reads through a small window: at most 10000 bytes of
    // the file per pull (headers whole), the same bytes, still no copy.
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, &req("/file-1m.bin", ""));
    let mut bytes = Vec::new();
    let mut pieces = 0;
    while let Some(a) = h.srv.next_within(c, 10_000) {
        let Action::Send(a) = a else { panic!("only sends") };
        assert!(a.len() <= 10_000 + 200, "a piece of {} bytes", a.len());
        bytes.extend(crate::testing::bytes(&a));
        pieces += 1;
    }
    let r = parse_responses(&bytes, &|_| false);
    assert_eq!(r[0].body, content(1 << 20, 3));
    assert!(pieces >= (1 << 20) / 10_000, "{pieces} pieces");
    assert_eq!(d.stats().bytes_copied, 0);
    assert_eq!(h.srv.source_mut().open.get(), 0, "file closed after the last piece");
}

#[test]
fn pipelined_file_requests_hold_one_open_file_at_a_time() {
    // Three pipelined 1 MiB requests on a connection pulled slowly (a
    // reader with a small window): only the file being sent is open, the
    // next request is parsed when its last piece is pulled.
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let one = req("/file-1m.bin", "");
    h.send(c, &[one.as_slice(), one.as_slice(), one.as_slice()].concat());
    let mut bytes = Vec::new();
    let mut most_open = 0;
    while let Some(a) = h.srv.next_within(c, 10_000) {
        let Action::Send(a) = a else { panic!("only sends") };
        most_open = most_open.max(h.srv.source_mut().open.get());
        bytes.extend(crate::testing::bytes(&a));
    }
    assert_eq!(most_open, 1, "files open at once");
    let r = parse_responses(&bytes, &|_| false);
    assert_eq!(r.len(), 3);
    for resp in &r {
        assert_eq!(resp.body, content(1 << 20, 3));
    }
    assert_eq!(h.srv.source_mut().open.get(), 0);
}

#[test]
fn index_html_for_directories_and_redirects() {
    let d = domain();
    let mut h = Harness::new(d);
    let r = h.get("/");
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/html; charset=utf-8")));
    assert!(r.body.starts_with(b"<!DOCTYPE html>"));
    let r = h.get("/docs/");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"<p>docs</p>\n"[..]));
    let r = h.get("/docs?x=1");
    assert_eq!((r.status, r.header("Location")), (301, Some("/docs/?x=1")));
    assert_eq!(h.get("/noindex/").status, 403, "no listings");
    assert_eq!(h.get("/style.css").header("Content-Type"), Some("text/css; charset=utf-8"));
    assert_eq!(h.get("/file-1k.txt").header("Content-Type"), Some("text/plain; charset=utf-8"));
    let r = h.get("/empty.txt");
    assert_eq!((r.status, r.header("Content-Length"), r.body.len()), (200, Some("0"), 0));
    assert_eq!(h.get("/index.html/").status, 404, "a file is not a directory");
    assert_eq!(h.get("/missing").status, 404);
}

#[test]
fn source_errors_map_to_statuses() {
    let d = domain();
    let mut h = Harness::new(d);
    for (e, status) in [(SourceError::Forbidden, 403), (SourceError::Failed, 500), (SourceError::NotFound, 404)] {
        h.srv.source_mut().fail = Some(("/style.css".into(), e));
        let (r, closed) = h.roundtrip(&req("/style.css", ""));
        assert_eq!(r[0].status, status);
        assert!(!closed, "a failed lookup does not end the connection");
    }
}

#[test]
fn pipelined_requests_split_at_every_byte() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut stream = Vec::new();
    stream.extend(req("/style.css", ""));
    stream.extend(b"HEAD /file-1k.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    stream.extend(req("/sub/note.txt", ""));
    stream.extend(b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    stream.extend(req("/missing", "Connection: close\r\n"));
    for split in 0..=stream.len() {
        for split2 in [split, (split + 17).min(stream.len())] {
            let c = h.connect();
            h.send(c, &stream[..split]);
            h.send(c, &stream[split..split2]);
            h.send(c, &stream[split2..]);
            let mut dr = h.drain(c);
            assert_eq!(dr.cgi.len(), 1, "the CGI request is handed over (split {split})");
            let call = dr.cgi.pop().unwrap();
            assert_eq!(bytes(call.body.as_ref().unwrap()), b"hello");
            let out = make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\nechoed");
            h.srv.cgi_reply(c, call.id, Ok(out));
            let rest = h.drain(c);
            assert!(rest.closed);
            let mut all = dr.bytes;
            all.extend(rest.bytes);
            let r = parse_responses(&all, &|i| i == 1);
            let got: Vec<u16> = r.iter().map(|r| r.status).collect();
            assert_eq!(got, [200, 200, 200, 200, 404], "split {split}/{split2}");
            assert_eq!(r[0].body, b"body { color: #222 }\n");
            assert_eq!(r[1].header("Content-Length"), Some("1024"));
            assert!(r[1].body.is_empty());
            assert_eq!(r[2].body, b"a note in a subdirectory\n");
            assert_eq!(r[3].body, b"echoed");
            assert_eq!(r[4].header("Connection"), Some("close"));
            h.srv.closed(c);
        }
    }
    assert_eq!(h.srv.connections(), 0);
    assert_eq!(d.pool_stats(NET_POOL).unwrap().buffers_in_use, 0, "request buffers all released");
}

#[test]
fn keep_alive_serves_100_requests_and_reuses_the_header() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let mut fixed = None;
    for i in 0..100 {
        h.send(c, &req("/file-1k.txt", ""));
        let dr = h.drain(c);
        assert!(!dr.closed, "request {i}");
        let r = parse_responses(&dr.bytes, &|_| false);
        assert_eq!((r.len(), r[0].status), (1, 200));
        assert_eq!(r[0].body.len(), 1024);
        // From the second request on, the second slice is the cached fixed
        // header part: the same bytes of the same buffer every time.
        if i > 0 {
            let f = dr.sends[0].descs()[1];
            assert_eq!(*fixed.get_or_insert(f), f, "request {i} reuses the header buffer");
        }
        h.advance(10);
    }
    let s = h.srv.stats();
    assert_eq!((s.header_cache_misses, s.header_cache_hits), (1, 99));
    assert_eq!(d.stats().bytes_copied, 0);
    assert_eq!(s.connections_accepted, 1);
}

#[test]
fn connection_handling_for_1_0_and_1_1() {
    let d = domain();
    let mut h = Harness::new(d);
    let (r, closed) = h.roundtrip(b"GET /style.css HTTP/1.0\r\n\r\n");
    assert!(closed, "HTTP/1.0 closes by default");
    assert_eq!(r[0].header("Connection"), Some("close"));
    let (r, closed) = h.roundtrip(b"GET /style.css HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert!(!closed);
    assert_eq!(r[0].header("Connection"), Some("keep-alive"));
    let (r, closed) = h.roundtrip(&req("/style.css", "Connection: close\r\n"));
    assert!(closed);
    assert_eq!(r[0].header("Connection"), Some("close"));
    let (_, closed) = h.roundtrip(&req("/style.css", "Connection: foo, Close\r\n"));
    assert!(closed, "tokens are case-insensitive lists");
    // A client's FIN after a complete request: answered, then closed.
    let c = h.connect();
    h.send(c, &req("/style.css", ""));
    h.srv.receive_eof(c);
    let dr = h.drain(c);
    assert!(dr.closed);
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].status, 200);
    // A FIN in the middle of a request: just closed.
    let c = h.connect();
    h.send(c, b"GET /style.css HT");
    h.srv.receive_eof(c);
    let dr = h.drain(c);
    assert!(dr.closed && dr.bytes.is_empty());
}

#[test]
fn head_sends_headers_only() {
    let d = domain();
    let mut h = Harness::new(d);
    let (r, _) = h.roundtrip(b"HEAD /file-64k.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r[0].status, r[0].header("Content-Length")), (200, Some("65536")));
    assert!(r[0].body.is_empty());
    let (r, _) = h.roundtrip(b"HEAD /missing HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r[0].status, 404);
    assert!(r[0].body.is_empty());
    assert_eq!(h.srv.source_mut().open.get(), 0);
}

#[test]
fn conditional_requests_give_304_both_ways() {
    let d = domain();
    let mut h = Harness::new(d);
    let full = h.get("/style.css");
    let tag = full.header("ETag").unwrap().to_string();
    let lm = full.header("Last-Modified").unwrap().to_string();
    let status = |h: &mut Harness, extra: String| h.roundtrip(&req("/style.css", &extra)).0[0].clone();
    let r = status(&mut h, format!("If-None-Match: {tag}\r\n"));
    assert_eq!((r.status, r.header("ETag"), r.body.len()), (304, Some(tag.as_str()), 0));
    assert_eq!(status(&mut h, format!("If-None-Match: \"x\", W/{tag}\r\n")).status, 304, "weak comparison");
    assert_eq!(status(&mut h, "If-None-Match: *\r\n".into()).status, 304);
    assert_eq!(status(&mut h, "If-None-Match: \"other\"\r\n".into()).status, 200);
    assert_eq!(status(&mut h, format!("If-Modified-Since: {lm}\r\n")).status, 304);
    assert_eq!(status(&mut h, "If-Modified-Since: Wed, 15 Nov 2023 00:00:00 GMT\r\n".into()).status, 304);
    assert_eq!(status(&mut h, "If-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT\r\n".into()).status, 200);
    assert_eq!(status(&mut h, "If-Modified-Since: Mon Nov 13 08:49:37 2023\r\n".into()).status, 200);
    assert_eq!(status(&mut h, "If-Modified-Since: garbage\r\n".into()).status, 200, "bad dates are ignored");
    assert_eq!(
        status(&mut h, format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}\r\n")).status,
        200,
        "If-None-Match takes precedence"
    );
    // The file changes: the old tag no longer matches.
    h.srv.source_mut().put("/style.css", b"body { color: #000 }\n", MTIME + 60);
    let r = status(&mut h, format!("If-None-Match: {tag}\r\n"));
    assert_eq!(r.status, 200);
    assert_ne!(r.header("ETag"), Some(tag.as_str()));
    assert_eq!(status(&mut h, format!("If-Modified-Since: {lm}\r\n")).status, 200);
}

#[test]
fn single_ranges_206_and_416() {
    let d = domain();
    let mut h = Harness::new(d);
    let data = content(65536, 2);
    let get = |h: &mut Harness, extra: &str| h.roundtrip(&req("/file-64k.bin", extra)).0[0].clone();
    let r = get(&mut h, "Range: bytes=100-199\r\n");
    assert_eq!((r.status, r.header("Content-Range")), (206, Some("bytes 100-199/65536")));
    assert_eq!(r.body, &data[100..200]);
    let r = get(&mut h, "Range: bytes=-10\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &data[65526..]));
    let r = get(&mut h, "Range: bytes=16000-\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &data[16000..]), "across chunk boundaries");
    let r = get(&mut h, "Range: bytes=70000-\r\n");
    assert_eq!((r.status, r.header("Content-Range")), (416, Some("bytes */65536")));
    let r = get(&mut h, "Range: bytes=0-40000,30000-65535\r\n");
    assert_eq!((r.status, r.body.len()), (200, 65536), "overlapping ranges over the size: the whole file");
    let r = get(&mut h, "Range: bytes=0-9\r\nIf-Range: \"stale\"\r\n");
    assert_eq!(r.status, 200, "If-Range mismatch");
    let tag = get(&mut h, "").header("ETag").unwrap().to_string();
    let r = get(&mut h, &format!("Range: bytes=0-9\r\nIf-Range: {tag}\r\n"));
    assert_eq!((r.status, r.body.as_slice()), (206, &data[..10]));
    let r = get(&mut h, "Range: bytes=0-9\r\nIf-Range: Tue, 14 Nov 2023 22:13:20 GMT\r\n");
    assert_eq!(r.status, 206);
    let (r, _) = h.roundtrip(b"HEAD /file-64k.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n");
    assert_eq!(r[0].status, 200, "Range applies to GET only");
    let (r, _) = h.roundtrip(&req("/empty.txt", "Range: bytes=0-\r\n"));
    assert_eq!(r[0].status, 416);
    assert_eq!(d.stats().bytes_copied, 0, "ranges are sub-aggregates, not copies");
    assert_eq!(h.srv.stats().partial, 5);
}

#[test]
fn errors_and_limits() {
    let d = domain();
    let lim =
        Limits { max_request_line: 256, max_header_bytes: 512, max_headers: 8, max_body: 1000, max_cgi_body: 1000 };
    let mut h = Harness::with_config(d, Config { limits: lim, ..Config::default() });
    let check = |h: &mut Harness, raw: &[u8], want: u16| {
        let (r, closed) = h.roundtrip(raw);
        assert_eq!(r.len(), 1, "{:?}", String::from_utf8_lossy(&raw[..raw.len().min(80)]));
        assert_eq!(r[0].status, want, "{:?}", String::from_utf8_lossy(&raw[..raw.len().min(80)]));
        (r.into_iter().next().unwrap(), closed)
    };
    let (_, closed) = check(&mut h, b"GET / HTTP/1.1\r\nHost t\r\n\r\n", 400);
    assert!(closed, "errors in the head close the connection");
    check(&mut h, b"GET / HTTP/1.1\r\n\r\n", 400); // no Host
    check(&mut h, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    check(&mut h, b"GET / HTTP/1.0\r\n\r\n", 200); // 1.0 needs no Host
    let long = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(300));
    check(&mut h, long.as_bytes(), 414);
    let long = format!("GET /{}", "a".repeat(300)); // still arriving
    check(&mut h, long.as_bytes(), 414);
    let big = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "b".repeat(600));
    check(&mut h, big.as_bytes(), 431);
    let many: String = (0..9).map(|i| format!("X-{i}: v\r\n")).collect();
    check(&mut h, format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes(), 431);
    check(&mut h, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n", 413);
    let (r, closed) = check(&mut h, b"BREW /x HTTP/1.1\r\nHost: t\r\n\r\n", 501);
    assert_eq!(r.header("Allow"), Some("GET, HEAD, POST, OPTIONS"));
    assert!(closed);
    for m in ["get", "SEARCH"] {
        check(&mut h, format!("{m} / HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(), 501);
    }
    check(&mut h, b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", 501);
    let (r, closed) = check(&mut h, b"POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nab", 405);
    assert_eq!(r.header("Allow"), Some("GET, HEAD, OPTIONS"));
    assert!(!closed, "405 keeps a well-framed connection");
    check(&mut h, b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505);
    check(&mut h, b"GET / HTTP/0.9\r\nHost: t\r\n\r\n", 505);
    // A higher HTTP/1 minor is served as HTTP/1.1 (RFC 9110 §2.5): the
    // same bytes as for 1.1, the connection kept, the next request found.
    let c = h.connect();
    h.send(c, b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
    let want = parse_responses(&h.drain(c).bytes, &|_| false).remove(0).body;
    h.srv.closed(c);
    assert!(!want.is_empty());
    for v in ["1.2", "1.9"] {
        let raw = format!("GET /index.html HTTP/{v}\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
        let c = h.connect();
        h.send(c, raw.as_bytes());
        let dr = h.drain(c);
        let r = parse_responses(&dr.bytes, &|_| false);
        assert_eq!(r.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200], "HTTP/{v}");
        assert!(dr.bytes.starts_with(b"HTTP/1.1 200"), "answered as HTTP/1.1");
        assert_eq!(r[0].body, want, "HTTP/{v}");
        assert_eq!(r[1].body, b"body { color: #222 }\n");
        assert!(!dr.closed, "HTTP/{v}");
        h.srv.closed(c);
    }
    check(&mut h, b"GET / HTTP/1.10\r\nHost: t\r\n\r\n", 400);
    check(&mut h, b"GET / FOO/1.1\r\nHost: t\r\n\r\n", 400);
    let (_, closed) =
        check(&mut h, b"POST /index.html HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 405);
    assert!(!closed, "a chunked body keeps the framing");
    check(&mut h, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
    let (r, closed) =
        check(&mut h, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
    assert_eq!(r.header("Allow"), None, "a 501 for a transfer coding is not about methods");
    assert!(closed);
    check(
        &mut h,
        b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    );
    check(&mut h, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
    check(&mut h, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400);
    check(&mut h, b"GET / HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\n\r\n", 417);
    assert_eq!(h.srv.connections(), 2, "every error closed the connection, except the two 405s");
}

#[test]
fn expect_100_continue() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(dr.bytes, b"HTTP/1.1 100 Continue\r\n\r\n");
    h.send(c, b"abc");
    let dr = h.drain(c);
    assert_eq!(bytes(dr.cgi[0].body.as_ref().unwrap()), b"abc");
}

#[test]
fn no_100_continue_to_http10() {
    // RFC 9110 §15.2: no 1xx to an HTTP/1.0 client; §10.1.1: its
    // 100-continue expectation is ignored (other expectations are still 417).
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(dr.bytes, b"", "nothing before the body");
    h.send(c, b"abc");
    let dr = h.drain(c);
    assert_eq!(bytes(dr.cgi[0].body.as_ref().unwrap()), b"abc");
    let (r, closed) = h.roundtrip(b"GET / HTTP/1.0\r\nExpect: teapot\r\n\r\n");
    assert_eq!((r[0].status, closed), (417, true));
}

#[test]
fn path_traversal_never_leaves_the_root() {
    let d = domain();
    let mut h = Harness::new(d);
    for bad in [
        "/../etc/passwd",
        "/..",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/sub/../../x",
        "/%2E%2E%2Fetc",
        "/sub%2f..%2f..%2fx",
        "/..%5c..%5cwindows",
        "/sub/%00.txt",
        "/.%2e/x",
    ] {
        let (r, _) = h.roundtrip(&req(bad, ""));
        assert_eq!(r[0].status, 400, "{bad}");
    }
    let (r, _) = h.roundtrip(b"GET /..\\..\\x HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r[0].status, 400);
    // Inside the root, `..` and `.` resolve normally.
    assert_eq!(h.get("/sub/../index.html").status, 200);
    assert_eq!(h.get("/./sub/./note.txt").status, 200);
    assert_eq!(h.get("/sub/%6eote.txt").status, 200, "percent-decoded");
    assert_eq!(h.get("http://any.host/style.css").status, 200, "absolute-form");
}

#[test]
fn connection_limit_evicts_the_longest_idle_then_gives_503() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { max_connections: 3, ..Config::default() });
    let cs: Vec<ConnId> = (0..3).map(|_| h.connect()).collect();
    // All three idle (keep-alive, nothing pending): the oldest one is
    // closed to make room, not the newcomer refused.
    h.send(cs[1], &req("/style.css", ""));
    let _ = h.drain(cs[1]);
    h.send(cs[2], &req("/style.css", ""));
    let _ = h.drain(cs[2]);
    let c3 = h.srv.accept(None).unwrap_or_else(|_| panic!("an idle connection makes room"));
    assert_eq!(h.srv.take_woken(), vec![cs[0]], "the longest idle one");
    assert!(h.srv.is_closing(cs[0]));
    assert!(h.drain(cs[0]).closed);
    h.srv.closed(cs[0]);
    assert_eq!(h.srv.stats().idle_evictions, 1);
    // Now every connection is busy (a request arriving): 503.
    for &c in &[cs[1], cs[2], c3] {
        h.send(c, b"GET /style.css HTTP/1.1\r\n");
    }
    let Err(refusal) = h.srv.accept(None) else { panic!("refused when nothing is idle") };
    let r = parse_responses(&bytes(&refusal), &|_| false);
    assert_eq!((r[0].status, r[0].header("Connection"), r[0].header("Retry-After")), (503, Some("close"), Some("1")));
    assert_eq!(h.srv.stats().connections_refused, 1);
    h.srv.closed(cs[1]);
    let c = h.connect();
    h.send(c, &req("/style.css", ""));
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 200);
}

#[test]
fn timeouts_with_a_fake_clock() {
    let d = domain();
    // No minimum rate: the bound here is the whole request's time.
    let cfg = Config { request_timeout_ms: 5000, idle_timeout_ms: 8000, min_input_rate: 0, ..Config::default() };
    let mut h = Harness::with_config(d, cfg);
    // Slowloris: a byte a second never completes the head: 408 at 5 s.
    let c = h.connect();
    let head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: 1234567890\r\n\r\n";
    let mut i = 0;
    loop {
        h.send(c, &head[i..i + 1]);
        i += 1;
        h.advance(1000);
        if !h.srv.tick().is_empty() {
            break;
        }
        assert!(h.drain(c).bytes.is_empty());
    }
    assert_eq!(i, 5);
    let dr = h.drain(c);
    assert!(dr.closed);
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].status, 408);
    h.srv.closed(c);
    // A body that stops arriving: 408 too.
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    h.advance(5000);
    assert_eq!(h.srv.tick(), vec![c]);
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 408);
    h.srv.closed(c);
    // An idle keep-alive connection is closed without a response.
    let c = h.connect();
    h.send(c, &req("/style.css", ""));
    h.drain(c);
    h.advance(7999);
    assert!(h.srv.tick().is_empty());
    h.advance(1);
    assert_eq!(h.srv.tick(), vec![c]);
    let dr = h.drain(c);
    assert!(dr.closed && dr.bytes.is_empty());
    assert_eq!((h.srv.stats().request_timeouts, h.srv.stats().idle_closes), (2, 1));
}

#[test]
fn header_cache_reuse_and_invalidation() {
    let d = domain();
    let mut h = Harness::new(d);
    let fixed_of = |h: &mut Harness, p: &str| {
        let c = h.connect();
        h.send(c, &req(p, ""));
        let dr = h.drain(c);
        h.srv.closed(c);
        (dr.sends[0].descs()[1], parse_responses(&dr.bytes, &|_| false).remove(0))
    };
    let (_, r1) = fixed_of(&mut h, "/style.css");
    let (a, _) = fixed_of(&mut h, "/style.css");
    let (b, _) = fixed_of(&mut h, "/style.css");
    assert_eq!(a, b, "the same IO-Lite buffer");
    assert_eq!(a.pool, HTTPD_POOL);
    let s = h.srv.stats();
    assert_eq!((s.header_cache_misses, s.header_cache_hits, s.header_cache_invalidations), (1, 2, 0));
    // A new version of the file: rebuilt once, then reused again.
    h.srv.source_mut().put("/style.css", b"p { margin: 0 }\n", MTIME + 5);
    let (_, r2) = fixed_of(&mut h, "/style.css");
    let (c, _) = fixed_of(&mut h, "/style.css");
    assert_ne!(a, c);
    assert_eq!(r2.body, b"p { margin: 0 }\n");
    assert_eq!(r2.header("Content-Length"), Some("16"));
    assert_ne!(r1.header("ETag"), r2.header("ETag"));
    let (d2, _) = fixed_of(&mut h, "/style.css");
    assert_eq!(c, d2);
    let s = h.srv.stats();
    assert_eq!((s.header_cache_misses, s.header_cache_hits, s.header_cache_invalidations), (1, 4, 1));
    // Bounded: an LRU of `header_cache_entries`.
    let mut h = Harness::with_config(d, Config { header_cache_entries: 2, ..Config::default() });
    for p in ["/style.css", "/file-1k.txt", "/sub/note.txt", "/style.css"] {
        h.get(p);
    }
    assert_eq!(h.srv.header_cache_len(), 2);
    assert_eq!(h.srv.stats().header_cache_hits, 0);
}

#[test]
fn cgi_failures_timeouts_and_redirects() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { cgi_timeout_ms: 2000, ..Config::default() });
    fn call<'d>(h: &mut Harness<'d>, path: &str, extra: &str) -> (ConnId, CgiCall<'d>) {
        let c = h.connect();
        h.send(c, &req(path, extra));
        let mut dr = h.drain(c);
        (c, dr.cgi.pop().expect("cgi call"))
    }
    let answer = |h: &mut Harness, c, id, r: Result<&[u8], cgi_api::Failure>| {
        let r = r.map(|b| make(h.d, CGI_POOL, b));
        h.srv.cgi_reply(c, id, r);
        let dr = h.drain(c);
        (parse_responses(&dr.bytes, &|_| false), dr.closed)
    };
    // Timeout → 504, and the late reply is dropped.
    let (c, k) = call(&mut h, "/cgi-bin/slow", "");
    h.advance(1999);
    assert!(h.srv.tick().is_empty());
    h.advance(1);
    assert_eq!(h.srv.tick(), vec![c]);
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!(r[0].status, 504);
    let (r, _) = answer(&mut h, c, k.id, Ok(b"Content-Type: text/plain\r\n\r\nlate"));
    assert!(r.is_empty());
    assert_eq!(h.srv.stats().cgi_late_replies, 1);
    // The connection still works after a 504.
    h.send(c, &req("/style.css", ""));
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 200);
    // Fault → 502; garbage output → 502.
    let (c, k) = call(&mut h, "/cgi-bin/crash", "");
    assert_eq!(answer(&mut h, c, k.id, Err(cgi_api::Failure::Fault)).0[0].status, 502);
    let (c, k) = call(&mut h, "/cgi-bin/bad", "");
    assert_eq!(answer(&mut h, c, k.id, Ok(b"this is not a CGI header")).0[0].status, 502);
    // Status and extra fields honoured.
    let (c, k) = call(&mut h, "/cgi-bin/x", "");
    let (r, _) = answer(
        &mut h,
        c,
        k.id,
        Ok(b"Status: 418 Short and stout\r\nContent-Type: text/plain\r\nX-Tea: yes\r\n\r\ntea"),
    );
    assert_eq!((r[0].status, r[0].header("X-Tea"), r[0].body.as_slice()), (418, Some("yes"), &b"tea"[..]));
    // Client redirect → 302 with Location.
    let (c, k) = call(&mut h, "/cgi-bin/x", "");
    let (r, _) = answer(&mut h, c, k.id, Ok(b"Location: http://example.org/\r\n\r\n"));
    assert_eq!((r[0].status, r[0].header("Location")), (302, Some("http://example.org/")));
    // Local redirect → the server serves the other path itself.
    let (c, k) = call(&mut h, "/cgi-bin/x", "");
    let (r, _) = answer(&mut h, c, k.id, Ok(b"Location: /sub/note.txt\r\n\r\n"));
    assert_eq!((r[0].status, r[0].body.as_slice()), (200, &b"a note in a subdirectory\n"[..]));
    // Local redirect to another CGI: a new call; a loop ends in 502.
    let (c, mut k) = call(&mut h, "/cgi-bin/loop", "");
    for _ in 0..4 {
        h.srv.cgi_reply(c, k.id, Ok(make(d, CGI_POOL, b"Location: /cgi-bin/loop?again\r\n\r\n")));
        let mut dr = h.drain(c);
        k = dr.cgi.pop().expect("redirected to the CGI again");
        assert_eq!(k.env.get_str("QUERY_STRING"), Some("again"));
    }
    h.srv.cgi_reply(c, k.id, Ok(make(d, CGI_POOL, b"Location: /cgi-bin/loop?again\r\n\r\n")));
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 502);
    // HEAD through CGI: headers only, with the length of the body.
    let c = h.connect();
    h.send(c, b"HEAD /cgi-bin/x HTTP/1.1\r\nHost: t\r\n\r\n");
    let k = h.drain(c).cgi.pop().unwrap();
    h.srv.cgi_reply(c, k.id, Ok(make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\n12345")));
    let r = parse_responses(&h.drain(c).bytes, &|_| true);
    assert_eq!((r[0].status, r[0].header("Content-Length"), r[0].body.len()), (200, Some("5"), 0));
    let s = h.srv.stats();
    assert_eq!((s.cgi_timeouts, s.cgi_failures), (1, 3));
}

#[test]
fn flooding_input_closes_the_connection() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { max_buffered: 64 * 1024, max_pipeline: 2, ..Config::default() });
    let c = h.connect();
    // 3000 pipelined requests in one go while nothing is pulled.
    let one = req("/style.css", "");
    for _ in 0..100 {
        let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 30).collect();
        h.send(c, &burst);
    }
    let dr = h.drain(c);
    assert!(dr.closed);
    // Pipelining within the bounds works: 40 requests, 40 responses.
    let c = h.connect();
    let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 40).collect();
    h.send(c, &burst);
    let dr = h.drain(c);
    assert_eq!(parse_responses(&dr.bytes, &|_| false).len(), 40);
    assert!(!dr.closed);
}

#[test]
fn each_connection_keeps_its_own_peer_for_cgi() {
    let d = domain();
    let mut h = Harness::new(d);
    let peers = [Remote { addr: [10, 0, 2, 2], port: 40001 }, Remote { addr: [192, 168, 7, 9], port: 65535 }];
    let conns: Vec<ConnId> =
        peers.iter().map(|&p| h.srv.accept(Some(p)).unwrap_or_else(|_| panic!("refused"))).collect();
    // Requests in the opposite order of the accepts: the peer follows the
    // connection, not the order of events.
    for (&c, p) in conns.iter().zip(peers).rev() {
        h.send(c, b"GET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n");
        let call = h.drain(c).cgi.pop().expect("a CGI call");
        let want = format!("{}.{}.{}.{}", p.addr[0], p.addr[1], p.addr[2], p.addr[3]);
        assert_eq!(call.env.get_str("REMOTE_ADDR"), Some(want.as_str()));
        assert_eq!(call.env.get_str("REMOTE_PORT"), Some(p.port.to_string().as_str()));
    }
    // A connection whose peer the transport did not tell has empty values
    // rather than another connection's.
    let c = h.srv.accept(None).unwrap_or_else(|_| panic!("refused"));
    h.send(c, b"GET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n");
    let call = h.drain(c).cgi.pop().expect("a CGI call");
    assert_eq!(call.env.get_str("REMOTE_ADDR"), Some(""));
    assert_eq!(call.env.get_str("REMOTE_PORT"), Some("0"));
}

#[test]
fn a_cgi_request_awaits_its_answer_until_answered_or_timed_out() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, b"GET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n");
    let call = h.drain(c).cgi.pop().expect("a CGI call");
    assert!(h.srv.cgi_awaiting(c, call.id));
    assert!(!h.srv.cgi_awaiting(c, call.id + 1));
    h.advance(Config::default().cgi_timeout_ms);
    h.srv.tick();
    assert!(!h.srv.cgi_awaiting(c, call.id), "answered with 504");
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!(r[0].status, 504);
    h.srv.closed(c);
    assert!(!h.srv.cgi_awaiting(c, call.id));
}

/// A plain GET fetches the first bytes with the open (fs's `open_read`):
/// a small file is one call to the source, a large one one call fewer,
/// and the bodies are the files' bytes. Where a precondition or a range
/// may leave the start unread, the open fetches nothing.
#[test]
fn a_plain_get_reads_the_start_of_the_file_with_the_open() {
    let d = domain();
    let mut h = Harness::new(d);
    let small = content(1000, 4);
    let large = content(600_000, 5);
    h.srv.source_mut().put("/small.txt", &small, 1);
    h.srv.source_mut().put("/large.bin", &large, 1);
    let calls = h.srv.source_mut().calls.clone();
    let c = h.connect();
    let get = |h: &mut Harness, req: &[u8]| {
        h.send(c, req);
        let dr = h.drain(c);
        assert!(!dr.closed);
        parse_responses(&dr.bytes, &|_| false)
    };
    let r = get(&mut h, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert!(r[0].body == small);
    assert_eq!(calls.get(), 1, "the open alone");
    calls.set(0);
    let r = get(&mut h, b"GET /large.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert!(r[0].body == large, "body of {} bytes, not the file's", r[0].body.len());
    let chunk = Config::default().read_chunk;
    let reads = large.len().div_ceil(chunk);
    assert_eq!(calls.get() as usize, reads, "the open, and every read but the first");
    // A range: the open fetches nothing, the range is read.
    calls.set(0);
    let r = get(&mut h, b"GET /small.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\n\r\n");
    assert_eq!(r[0].status, 206);
    assert!(r[0].body == small[10..20]);
    assert_eq!(calls.get(), 2, "the open, then the read");
    // HEAD reads nothing at all.
    calls.set(0);
    h.send(c, b"HEAD /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(parse_responses(&dr.bytes, &|_| true)[0].status, 200);
    assert_eq!(calls.get(), 1);
}

/// fs refusing a read for now (busy: its buffers are held downstream, e.g.
/// by slow clients) delays the body; it does not cut the response short.
#[test]
fn a_busy_file_source_delays_the_body_instead_of_cutting_it() {
    let d = domain();
    let mut h = Harness::new(d);
    let data = content(300_000, 9);
    h.srv.source_mut().put("/big.bin", &data, 1);
    let c = h.connect();
    h.send(c, b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut got = Vec::new();
    // The header and the first piece, then three refused reads.
    assert!(matches!(h.srv.next(c), Some(Action::Send(a)) if { got.extend(bytes(&a)); true }));
    h.srv.source_mut().busy_reads = 3;
    let mut waits = 0;
    loop {
        let dr = h.drain(c);
        assert!(!dr.closed, "the response was cut short");
        got.extend(dr.bytes);
        if !h.srv.waits_for_source(c) {
            break;
        }
        waits += 1;
        assert!(waits < 10);
    }
    assert!(waits >= 1, "the output waited for the source");
    assert_eq!(h.srv.stats().file_reads_deferred, 3);
    let r = parse_responses(&got, &|_| false);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 200);
    assert!(r[0].body == data, "body of {} bytes, not the file's", r[0].body.len());
}

/// fs short of buffers at the open (clients hold its pages) is a wait,
/// not an error: the request is tried again as the component pumps the
/// connection, and the answer keeps its place among pipelined ones.
#[test]
fn a_busy_source_at_the_open_delays_the_request_instead_of_failing_it() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.srv.source_mut().busy_opens = 3;
    h.send(c, &[req("/file-64k.bin", ""), req("/style.css", "")].concat());
    let mut got = Vec::new();
    let mut waits = 0;
    loop {
        let dr = h.drain(c);
        assert!(!dr.closed);
        got.extend(dr.bytes);
        if !h.srv.waits_for_source(c) {
            break;
        }
        assert!(got.is_empty(), "nothing goes out before the waiting answer");
        waits += 1;
        h.advance(100);
        assert!(waits < 10);
    }
    assert!(waits >= 2, "the answer waited ({waits} pulls)");
    assert_eq!(h.srv.stats().file_opens_deferred, 3);
    assert_eq!(h.srv.stats().file_opens_expired, 0);
    let r = parse_responses(&got, &|_| false);
    assert_eq!(r.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200]);
    assert!(r[0].body == content(65536, 2), "the file's bytes, in order");
    assert_eq!(r[1].body, b"body { color: #222 }\n");
}

/// A CGI's local redirect to a file fs cannot open for now, on a
/// connection that closes after it: the file's answer still comes before
/// the close.
#[test]
fn a_local_redirect_to_a_busy_file_is_answered_before_the_close() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, b"GET /cgi-bin/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let k = h.drain(c).cgi.pop().expect("the call");
    h.srv.source_mut().busy_opens = 2;
    h.srv.cgi_reply(c, k.id, Ok(make(d, CGI_POOL, b"Location: /file-64k.bin\r\n\r\n")));
    let mut got = Vec::new();
    let mut closed = false;
    for _ in 0..10 {
        let dr = h.drain(c);
        got.extend(dr.bytes);
        if dr.closed {
            closed = true;
            break;
        }
        h.advance(100);
    }
    assert!(closed, "the connection closes after the answer");
    let r = parse_responses(&got, &|_| false);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 200);
    assert!(r[0].body == content(65536, 2), "the file's bytes");
    assert_eq!(h.srv.stats().file_opens_deferred, 2);
}

/// While requests wait for a busy source, a new one queues behind them
/// without trying the source, and only the oldest few try: the pages that
/// come back go to those that waited longest, whatever order the
/// connections are pumped in.
#[test]
fn requests_waiting_for_the_source_are_served_oldest_first() {
    let d = domain();
    let mut h = Harness::new(d);
    h.srv.source_mut().busy_opens = u32::MAX;
    let conns: Vec<_> = (0..12).map(|_| h.connect()).collect();
    let calls = h.srv.source_mut().calls.get();
    for &c in &conns {
        h.send(c, &req("/file-1k.txt", ""));
    }
    assert_eq!(h.srv.source_mut().calls.get(), calls + 1, "only the first tried the source");
    assert!(conns.iter().all(|&c| h.srv.waits_for_source(c)));
    h.srv.source_mut().busy_opens = 0;
    // The newest is pumped first, but it is not among the oldest eight.
    let mut got = vec![Vec::new(); conns.len()];
    let dr = h.drain(conns[11]);
    assert!(dr.bytes.is_empty() && h.srv.waits_for_source(conns[11]));
    for (i, &c) in conns.iter().enumerate().rev() {
        got[i].extend(h.drain(c).bytes);
    }
    let answered: Vec<bool> = got.iter().map(|b| !b.is_empty()).collect();
    assert_eq!(answered, [vec![true; 8], vec![false; 4]].concat(), "the oldest eight first");
    // Then the four, now among the oldest waiting.
    for (i, &c) in conns.iter().enumerate() {
        got[i].extend(h.drain(c).bytes);
    }
    for b in &got {
        let r = parse_responses(b, &|_| false);
        assert_eq!((r.len(), r[0].status), (1, 200));
        assert!(r[0].body == content(1024, 1), "byte-exact");
    }
    assert!(conns.iter().all(|&c| !h.srv.waits_for_source(c)));
    assert_eq!(h.srv.stats().file_opens_expired, 0);
}

/// A source that stays busy costs the request a 503 after
/// `source_wait_ms`, not the connection: the next request is served.
#[test]
fn a_source_busy_for_too_long_gets_503_and_the_connection_goes_on() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { source_wait_ms: 2000, ..Config::default() });
    let c = h.connect();
    h.srv.source_mut().busy_opens = u32::MAX;
    h.send(c, &req("/file-1k.txt", ""));
    for _ in 0..19 {
        let dr = h.drain(c);
        assert!(dr.bytes.is_empty() && !dr.closed);
        assert!(h.srv.waits_for_source(c));
        h.advance(100);
    }
    h.advance(100);
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 503);
    assert!(!dr.closed);
    assert_eq!(h.srv.stats().file_opens_expired, 1);
    h.srv.source_mut().busy_opens = 0;
    h.send(c, &req("/file-1k.txt", ""));
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!((r[0].status, r[0].body.as_slice()), (200, &content(1024, 1)[..]));
}

/// A CGI request pipelined behind a response the client does not take
/// (a slow reader) waits without its clock running: the CGI's timeout
/// counts from when the call leaves, so a slow client cannot make httpd
/// time out (and restart) a healthy CGI.
#[test]
fn a_cgi_call_behind_a_slow_readers_pipeline_times_from_its_dispatch() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { cgi_timeout_ms: 2000, ..Config::default() });
    let c = h.connect();
    h.send(c, b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\nGET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n");
    // The first response starts to go out (both requests are parsed then),
    // and then the client reads nothing for longer than the CGI timeout:
    // nothing more is taken from its output.
    assert!(matches!(h.srv.next(c), Some(Action::Send(_))));
    h.advance(5000);
    h.srv.tick();
    assert_eq!(h.srv.stats().cgi_timeouts, 0, "no CGI was called yet, so none timed out");
    let dr = h.drain(c);
    let call = dr.cgi.into_iter().next().expect("the CGI call leaves now");
    h.advance(1999);
    h.srv.tick();
    assert_eq!(h.srv.stats().cgi_timeouts, 0);
    assert!(h.srv.cgi_awaiting(c, call.id));
    h.advance(1);
    h.srv.tick();
    assert!(!h.srv.cgi_awaiting(c, call.id), "timed out 2 s after the call left");
    assert_eq!(h.srv.stats().cgi_timeouts, 1);
}

#[test]
fn request_copies_are_counted_as_what_they_are() {
    let d = domain();
    let mut h = Harness::new(d);
    let head: &[u8] = b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n";
    // Header and body in one piece: the body's bytes are copied into the
    // parse buffer with the header (and still passed on by reference).
    let c = h.connect();
    let mut both = head.to_vec();
    both.extend_from_slice(b"name=iolite");
    h.srv.receive(c, make(d, NET_POOL, &both));
    let mut dr = h.drain(c);
    assert!(dr.cgi.pop().expect("a CGI call").body.unwrap().eq_bytes(b"name=iolite"));
    let s = h.srv.stats();
    assert_eq!(s.request_bytes_copied_to_parse, both.len() as u64);
    assert_eq!(s.request_body_bytes_copied_to_parse, 11);
    // Body in its own aggregate, after the header was parsed: not copied.
    let c = h.connect();
    h.srv.receive(c, make(d, NET_POOL, head));
    h.srv.receive(c, make(d, NET_POOL, b"name=iolite"));
    let mut dr = h.drain(c);
    assert!(dr.cgi.pop().expect("a CGI call").body.unwrap().eq_bytes(b"name=iolite"));
    let s2 = h.srv.stats();
    assert_eq!(s2.request_bytes_copied_to_parse - s.request_bytes_copied_to_parse, head.len() as u64);
    assert_eq!(s2.request_body_bytes_copied_to_parse, 11);
}

#[test]
fn a_client_that_stops_reading_is_closed_after_the_send_timeout() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { send_timeout_ms: 60_000, ..Config::default() });
    let c = h.connect();
    // Two pipelined requests; the transport takes the first response, then
    // nothing more (the client stopped reading: the network is full).
    h.send(c, &req("/style.css", ""));
    h.send(c, &req("/style.css", ""));
    assert!(h.srv.next(c).is_some());
    h.advance(59_000);
    assert!(h.srv.tick().contains(&c), "output still waits");
    assert!(!h.srv.is_closing(c));
    h.advance(1_000);
    assert!(h.srv.tick().contains(&c));
    assert!(h.srv.is_closing(c), "closed after 60 s without progress");
    assert_eq!(h.srv.stats().send_timeouts, 1);
    assert!(h.drain(c).closed);
}

/// A site disk's values (docs/config.md): the `Server` header, the index
/// names in order; and its `/.iolite/` folder is never served.
#[test]
fn site_values_and_the_private_folder() {
    let d = domain();
    let cfg = Config {
        server_software: String::from("shop-httpd/2"),
        index: vec![String::from("home.html"), String::from("index.html")],
        ..Config::default()
    };
    let mut h = Harness::with_config(d, cfg);
    h.srv.source_mut().put("/docs/home.html", b"<p>home</p>\n", 1_700_000_000);
    h.srv.source_mut().put("/.iolite/config", b"listen_port = 8081\n", 1_700_000_000);
    let get = |h: &mut Harness<'_>, path: &str| {
        let c = h.connect();
        h.send(c, &req(path, "Connection: close\r\n"));
        let dr = h.drain(c);
        parse_responses(&dr.bytes, &|_| false).remove(0)
    };
    let r = get(&mut h, "/docs/");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"<p>home</p>\n"[..]), "the first index name found");
    assert_eq!(r.header("Server"), Some("shop-httpd/2"));
    let r = get(&mut h, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<!DOCTYPE html><title>Iolite</title><p>hello</p>\n", "the second when the first is missing");
    assert_eq!(get(&mut h, "/sub/").status, 403, "none of them");
    for p in ["/.iolite/config", "/.iolite", "/.iolite/", "/a/../.iolite/config"] {
        let r = get(&mut h, p);
        assert_eq!(r.status, 404, "{p}");
        assert!(!r.body.windows(11).any(|w| w == b"listen_port"), "{p}: nothing of the file");
        assert_eq!(r.header("Server"), Some("shop-httpd/2"));
    }
}
