//! HTTP/1.1 completeness: chunked request bodies, preconditions, Host,
//! Expect, OPTIONS and 405, multiple ranges.

use super::*;

const CHUNKED_POST: &[u8] = b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";

/// A chunked POST whose body slices must be the client's own: the framing
/// is skipped, the data is never copied.
#[test]
fn chunked_body_reaches_the_cgi_by_reference() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let mut stream = CHUNKED_POST.to_vec();
    stream.extend(b"5;ext=1\r\nhello\r\n0006\r\n world\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n");
    let wire = make(d, NET_POOL, &stream);
    let net_buf = wire.descs()[0].buf;
    h.srv.receive(c, wire);
    let mut dr = h.drain(c);
    let call = dr.cgi.pop().expect("a CGI call");
    let body = call.body.unwrap();
    assert_eq!(bytes(&body), b"hello world0123456789");
    assert_eq!(body.slice_count(), 3, "one slice per chunk");
    assert!(body.descs().iter().all(|s| s.buf == net_buf), "slices of the received buffer");
    assert_eq!(call.env.get_str("CONTENT_LENGTH"), Some("21"));
    assert_eq!(call.env.get_str("HTTP_TRANSFER_ENCODING"), None, "a hop-by-hop field is not passed on");
    assert_eq!(d.stats().bytes_copied, 0);
}

/// Chunked POSTs pipelined with other requests, split at every byte: the
/// next request is parsed from the byte after the trailer section.
#[test]
fn pipelined_after_chunked_split_at_every_byte() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut stream = CHUNKED_POST.to_vec();
    stream.extend(b"3\r\nabc\r\n2;x\r\nde\r\n0\r\nT: 1\r\n\r\n");
    stream.extend(b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
    stream.extend(CHUNKED_POST);
    stream.extend(b"0\r\n\r\n");
    stream.extend(b"GET /missing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    for split in 0..=stream.len() {
        let c = h.connect();
        h.send(c, &stream[..split]);
        h.send(c, &stream[split..]);
        let mut all = Vec::new();
        let mut bodies = Vec::new();
        loop {
            let dr = h.drain(c);
            all.extend(dr.bytes);
            if dr.closed {
                break;
            }
            assert_eq!(dr.cgi.len(), 1, "split {split}");
            for call in dr.cgi {
                bodies.push(call.body.as_ref().map(bytes));
                let out = make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\nok");
                h.srv.cgi_reply(c, call.id, Ok(out));
            }
        }
        assert_eq!(bodies, [Some(b"abcde".to_vec()), Some(Vec::new())], "split {split}");
        let r = parse_responses(&all, &|_| false);
        let got: Vec<u16> = r.iter().map(|r| r.status).collect();
        assert_eq!(got, [200, 200, 200, 404], "split {split}");
        assert_eq!(r[1].body, b"body { color: #222 }\n");
        h.srv.closed(c);
    }
    assert_eq!(d.pool_stats(NET_POOL).unwrap().buffers_in_use, 0, "request buffers all released");
}

#[test]
fn chunked_edge_cases() {
    let d = domain();
    let lim = crate::Limits { max_body: 1000, ..crate::Limits::default() };
    let mut h = Harness::with_config(d, Config { limits: lim, ..Config::default() });
    let post = |te: &str, body: &str| format!("POST /index.html HTTP/1.1\r\nHost: t\r\n{te}\r\n{body}");
    let te = "Transfer-Encoding: chunked\r\n";
    for (raw, want, closes) in [
        (post(te, "5\r\nhello\r\n0\r\n\r\n"), 405, false),
        (post("Transfer-Encoding: CHUNKED\r\n", "0\r\n\r\n"), 405, false),
        (post("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 501, true),
        (post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400, true),
        (post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"), 400, true),
        (post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"), 400, true),
        (post(te, "3e9\r\n"), 413, true),
        (post(te, "-1\r\n"), 400, true),
        (post(te, "1ffffffffffffffff\r\n"), 400, true),
        (post(te, "z\r\n"), 400, true),
        (post(te, "5\r\nhello!\r\n0\r\n\r\n"), 400, true),
        (post(te, "5\r\nhello0\r\n\r\n"), 400, true),
        (post(te, "0\r\nbad trailer\r\n\r\n"), 400, true),
    ] {
        let (r, closed) = h.roundtrip(raw.as_bytes());
        assert_eq!(r.iter().map(|r| r.status).collect::<Vec<_>>(), [want], "{raw:?}");
        assert_eq!(closed, closes, "{raw:?}");
    }
    // Half-close in the middle of the body: no response, the connection
    // closes and nothing is left behind.
    let c = h.connect();
    h.send(c, post(te, "5\r\nhel").as_bytes());
    assert!(h.drain(c).bytes.is_empty());
    h.srv.receive_eof(c);
    let dr = h.drain(c);
    assert!(dr.bytes.is_empty() && dr.closed);
    h.srv.closed(c);
    // A body that never completes: 408.
    let c = h.connect();
    h.send(c, post(te, "5\r\nhello\r\n").as_bytes());
    h.advance(11_000);
    h.srv.tick();
    let dr = h.drain(c);
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].status, 408);
    assert!(dr.closed);
    h.srv.closed(c);
    // 100-continue before a chunked body.
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(h.drain(c).bytes, b"HTTP/1.1 100 Continue\r\n\r\n");
    h.send(c, b"3\r\nabc\r\n0\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(bytes(dr.cgi[0].body.as_ref().unwrap()), b"abc");
    drop(dr);
    h.srv.closed(c);
    assert_eq!(d.pool_stats(NET_POOL).unwrap().buffers_in_use, 0);
}

/// Many small chunks: the body is flattened once it needs more slices than
/// an aggregate holds (a counted copy), and stays byte-exact.
#[test]
fn chunked_body_with_many_chunks() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, CHUNKED_POST);
    let mut want = Vec::new();
    for i in 0..40u8 {
        let data = content(100 + i as usize, i);
        want.extend(&data);
        let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
        chunk.extend(&data);
        chunk.extend(b"\r\n");
        h.send(c, &chunk);
    }
    h.send(c, b"0\r\n\r\n");
    let mut dr = h.drain(c);
    let body = dr.cgi.pop().unwrap().body.unwrap();
    assert_eq!(bytes(&body), want);
    assert!(h.srv.stats().bodies_flattened >= 1);
}

#[test]
fn preconditions_in_the_order_of_rfc_9110() {
    let d = domain();
    let mut h = Harness::new(d);
    let tag = h.get("/file-1k.txt").header("ETag").unwrap().to_string();
    let lm = h.get("/file-1k.txt").header("Last-Modified").unwrap().to_string();
    let earlier = "Sat, 01 Jan 2000 00:00:00 GMT";
    let weak = format!("W/{tag}");
    let mut status = |extra: String| {
        let (r, _) = h.roundtrip(&req_with("/file-1k.txt", &extra));
        assert_eq!(r.len(), 1);
        if r[0].status == 200 {
            assert_eq!(r[0].body, content(1024, 1), "{extra}");
        }
        (r[0].status, r[0].header("Content-Range").map(String::from))
    };
    for (extra, want) in [
        (format!("If-Match: {tag}\r\n"), 200),
        ("If-Match: *\r\n".to_string(), 200),
        (format!("If-Match: \"a\", {tag}\r\n"), 200),
        ("If-Match: \"a\", \"b\"\r\n".to_string(), 412),
        (format!("If-Match: {weak}\r\n"), 412),
        (format!("If-Unmodified-Since: {lm}\r\n"), 200),
        (format!("If-Unmodified-Since: {earlier}\r\n"), 412),
        (format!("If-Match: {tag}\r\nIf-Unmodified-Since: {earlier}\r\n"), 200),
        (format!("If-Match: \"a\"\r\nIf-None-Match: {tag}\r\n"), 412),
        (format!("If-None-Match: {weak}\r\n"), 304),
        (format!("If-Unmodified-Since: {lm}\r\nIf-None-Match: {tag}\r\n"), 304),
        (format!("If-Unmodified-Since: {earlier}\r\nIf-Modified-Since: {lm}\r\n"), 412),
        (format!("If-None-Match: \"a\"\r\nIf-Modified-Since: {lm}\r\n"), 200),
    ] {
        assert_eq!(status(extra.clone()).0, want, "{extra}");
    }
    // If-Range: strong comparison only; a weak or other tag gets the whole file.
    assert_eq!(status(format!("Range: bytes=0-9\r\nIf-Range: {tag}\r\n")), (206, Some("bytes 0-9/1024".into())));
    assert_eq!(status(format!("Range: bytes=0-9\r\nIf-Range: {weak}\r\n")), (200, None));
    assert_eq!(status(format!("Range: bytes=0-9\r\nIf-Range: {lm}\r\n")).0, 206);
    // Preconditions do not turn a 404 into a 412 (RFC 9110 §13.2.1).
    let (r, _) = h.roundtrip(&req_with("/missing", "If-Match: \"a\"\r\n"));
    assert_eq!(r[0].status, 404);
}

fn req_with(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

#[test]
fn options_405_and_host() {
    let d = domain();
    let mut h = Harness::new(d);
    for (raw, status, allow) in [
        (&b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n"[..], 200, Some("GET, HEAD, POST, OPTIONS")),
        (b"OPTIONS /index.html HTTP/1.1\r\nHost: t\r\n\r\n", 200, Some("GET, HEAD, OPTIONS")),
        (b"OPTIONS /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n", 200, Some("GET, HEAD, POST, OPTIONS")),
        (b"PUT /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nab", 405, Some("GET, HEAD, OPTIONS")),
        (b"DELETE /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n", 405, Some("GET, HEAD, POST, OPTIONS")),
        (b"TRACE / HTTP/1.1\r\nHost: t\r\n\r\n", 405, Some("GET, HEAD, OPTIONS")),
        (b"GET * HTTP/1.1\r\nHost: t\r\n\r\n", 400, None),
        (b"GET / HTTP/1.1\r\nHost: t:99999\r\n\r\n", 400, None),
        (b"GET / HTTP/1.1\r\nHost: t:8x\r\n\r\n", 400, None),
        (b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, None),
        (b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n", 400, None),
        (b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200, None),
        (b"GET http://t:0x1/ HTTP/1.1\r\nHost: t\r\n\r\n", 400, None),
    ] {
        let (r, closed) = h.roundtrip(raw);
        let what = String::from_utf8_lossy(raw);
        assert_eq!(r[0].status, status, "{what}");
        assert_eq!(r[0].header("Allow"), allow, "{what}");
        assert_eq!(closed, status == 400, "{what}");
        if status == 200 && allow.is_some() {
            assert_eq!(r[0].header("Content-Length"), Some("0"));
            assert!(r[0].body.is_empty());
        }
    }
}

/// Parses a multipart/byteranges body into (Content-Range, bytes) parts.
fn multipart_parts(r: &Resp) -> Vec<(String, Vec<u8>)> {
    let ct = r.header("Content-Type").unwrap();
    let boundary = ct.strip_prefix("multipart/byteranges; boundary=").expect("multipart");
    let delim = format!("\r\n--{boundary}");
    let body = &r.body;
    let mut parts = Vec::new();
    let mut pos = 0;
    loop {
        assert_eq!(&body[pos..pos + delim.len()], delim.as_bytes(), "delimiter at {pos}");
        pos += delim.len();
        if &body[pos..] == b"--\r\n" {
            return parts;
        }
        assert_eq!(&body[pos..pos + 2], b"\r\n");
        pos += 2;
        let head_end = pos + body[pos..].windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = std::str::from_utf8(&body[pos..head_end]).unwrap();
        let cr = head.lines().find_map(|l| l.strip_prefix("Content-Range: bytes ")).unwrap().to_string();
        assert!(head.contains("Content-Type: application/octet-stream"), "{head}");
        let (range, _) = cr.split_once('/').unwrap();
        let (s, e) = range.split_once('-').unwrap();
        let n = e.parse::<usize>().unwrap() - s.parse::<usize>().unwrap() + 1;
        pos = head_end + 4;
        parts.push((cr, body[pos..pos + n].to_vec()));
        pos += n;
    }
}

#[test]
fn multiple_ranges_are_multipart_by_reference() {
    let d = domain();
    let mut h = Harness::new(d);
    let data = content(65536, 2);
    let c = h.connect();
    h.send(c, &req_with("/file-64k.bin", "Range: bytes=0-9,20000-40000,-5\r\n"));
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 206);
    assert_eq!(r[0].header("Content-Range"), None);
    assert_eq!(r[0].header("Content-Length").unwrap().parse::<usize>().unwrap(), r[0].body.len());
    let parts = multipart_parts(&r[0]);
    assert_eq!(
        parts,
        vec![
            ("0-9/65536".to_string(), data[..10].to_vec()),
            ("20000-40000/65536".to_string(), data[20000..40001].to_vec()),
            ("65531-65535/65536".to_string(), data[65531..].to_vec()),
        ]
    );
    // The file's bytes went out as slices of its cache buffers.
    let file: Vec<_> = h.srv.source_mut().descs("/file-64k.bin").iter().map(|s| s.buf).collect();
    let sent_file_bytes: usize = dr
        .sends
        .iter()
        .flat_map(|a| a.descs().to_vec())
        .filter(|s| file.contains(&s.buf))
        .map(|s| s.len as usize)
        .sum();
    assert_eq!(sent_file_bytes, 10 + 20001 + 5);
    assert_eq!(d.stats().bytes_copied, 0);
    assert_eq!(h.srv.source_mut().open.get(), 0, "the file was closed after the last part");
    // The connection goes on with the next request.
    h.send(c, &req_with("/style.css", ""));
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!(r[0].body, b"body { color: #222 }\n");
}
