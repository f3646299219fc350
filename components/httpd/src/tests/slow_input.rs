//! Slow and fragmented input: heads and bodies that arrive slower than
//! `min_input_rate` get 408 after `rate_grace_ms`, a head that never ends
//! gets 408 at `request_timeout_ms` however fast it trickles, and a head
//! sent in many pieces holds one buffer of ours instead of the
//! transport's buffers, one per piece.

use super::*;

fn cfg() -> Config {
    Config { request_timeout_ms: 10_000, min_input_rate: 256, rate_grace_ms: 3_000, ..Config::default() }
}

/// Pages of the transport's pool in use.
fn net_pages(d: &iolite::Domain) -> u32 {
    d.pool_stats(NET_POOL).unwrap().pages_in_use
}

/// The 64 KiB file, byte for byte, on a fresh connection.
fn normal_client_is_served(h: &mut Harness) {
    let r = h.get("/file-64k.bin");
    assert_eq!(r.status, 200);
    assert!(r.body == content(65536, 2), "byte for byte");
}

#[test]
fn a_head_trickled_slower_than_the_minimum_rate_gets_408_after_the_grace() {
    let d = domain();
    let mut h = Harness::with_config(d, cfg());
    let c = h.connect();
    // 100 bytes a second (a byte every 10 ms), never the end of the head.
    let head = [b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: ".as_slice(), &[b'a'; 4000]].concat();
    let mut sent = 0;
    let mut at = 0u64;
    loop {
        h.send(c, &head[sent..sent + 1]);
        sent += 1;
        h.advance(10);
        at += 10;
        let ready = h.srv.tick();
        if !ready.is_empty() {
            assert_eq!(ready, vec![c]);
            break;
        }
        assert!(h.drain(c).bytes.is_empty());
        if at.is_multiple_of(1000) {
            // Served meanwhile.
            normal_client_is_served(&mut h);
        }
    }
    assert_eq!(at, 3000, "at the end of the grace");
    let dr = h.drain(c);
    assert!(dr.closed);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status, r[0].header("Connection")), (1, 408, Some("close")));
    h.srv.closed(c);
    let s = h.srv.stats();
    assert_eq!((s.head_too_slow, s.head_timeouts_408, s.body_too_slow, s.request_timeouts), (1, 0, 0, 1));
    normal_client_is_served(&mut h);
}

#[test]
fn a_head_at_the_minimum_rate_is_served_and_one_that_never_ends_gets_408_at_the_request_timeout() {
    let d = domain();
    let mut h = Harness::with_config(d, cfg());
    // 400 bytes a second, 2000 bytes of head: done in 5 s, served.
    let c = h.connect();
    let pad = "b".repeat(2000 - 45);
    let head = format!("GET /style.css HTTP/1.1\r\nHost: t\r\nX-Pad: {pad}\r\n\r\n").into_bytes();
    assert_eq!(head.len(), 2000);
    for piece in head.chunks(4) {
        h.send(c, piece);
        h.advance(10);
        h.srv.tick();
        assert_eq!(h.srv.stats().request_timeouts, 0, "not timed out");
    }
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert_eq!(r[0].body, b"body { color: #222 }\n");
    assert!(!dr.closed);
    // Fast enough, but it never ends: 408 at 10 s (nginx's
    // client_header_timeout), whatever the rate.
    let never = [b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: ".as_slice(), &[b'c'; 7000]].concat();
    let mut at = 0;
    for piece in never.chunks(7) {
        h.send(c, piece);
        h.advance(10);
        at += 10;
        if !h.srv.tick().is_empty() {
            break;
        }
    }
    assert_eq!(at, 10_000);
    let dr = h.drain(c);
    assert!(dr.closed);
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].status, 408);
    let s = h.srv.stats();
    assert_eq!((s.head_too_slow, s.head_timeouts_408, s.request_timeouts), (0, 1, 1));
}

#[test]
fn a_body_slower_than_the_minimum_rate_gets_408() {
    let d = domain();
    let mut h = Harness::with_config(d, cfg());
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    // 50 bytes a second.
    let mut at = 0;
    loop {
        h.send(c, b"x");
        h.advance(20);
        at += 20;
        if !h.srv.tick().is_empty() {
            break;
        }
        assert!(at < 10_000);
    }
    assert_eq!(at, 3000);
    let dr = h.drain(c);
    assert!(dr.closed && dr.cgi.is_empty(), "nothing went to the cgi");
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].status, 408);
    let s = h.srv.stats();
    assert_eq!((s.body_too_slow, s.head_too_slow), (1, 0));
}

#[test]
fn a_streamed_body_slower_than_the_minimum_rate_gets_408() {
    let d = domain();
    let mut h = Harness::with_config(d, cfg());
    let c = h.connect();
    // Larger than max_body: the call goes at once, the body in parts.
    h.send(c, b"POST /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(dr.cgi.len(), 1);
    assert!(dr.cgi[0].more);
    let mut at = 0;
    let mut parts = 0;
    loop {
        h.send(c, &[b'y'; 10]);
        h.advance(100);
        at += 100;
        parts += h.drain(c).body_parts.len();
        // The cgi consumes every part at once: only the client is slow.
        h.srv.cgi_input_credit(c, dr.cgi[0].id, 1);
        if !h.srv.tick().is_empty() {
            break;
        }
        assert!(at < 60_000);
    }
    assert!(parts > 0);
    assert_eq!(at, 3000, "100 bytes a second: 408 at the end of the grace");
    assert_eq!(h.srv.stats().body_too_slow, 1);
    assert_eq!(h.srv.stats().cgi_uploads_aborted, 1);
}

#[test]
fn a_head_in_many_pieces_holds_one_buffer_of_ours_not_one_per_piece() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { min_input_rate: 0, ..cfg() });
    let base = net_pages(d);
    let c = h.connect();
    // 3000 bytes, each in a buffer of its own (the harness makes a page
    // per piece): more than the transport's pool has pages, if kept.
    let pad = "z".repeat(3000 - 45);
    let head = format!("GET /style.css HTTP/1.1\r\nHost: t\r\nX-Pad: {pad}\r\n\r\n").into_bytes();
    assert!(head.len() > 512 * 5);
    let cap = h.srv.config().max_input_slices as u32;
    let mut most = 0;
    for b in &head {
        h.send(c, core::slice::from_ref(b));
        most = most.max(net_pages(d) - base);
    }
    assert!(most <= cap + 1, "{most} pages of the transport's pool held");
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert_eq!(r[0].body, b"body { color: #222 }\n");
    let s = h.srv.stats();
    assert!(s.input_flattens >= (head.len() as u64) / (cap as u64 + 1), "{}", s.input_flattens);
    assert!(s.input_bytes_flattened > 0);
    assert_eq!(net_pages(d), base, "everything given back");
}

/// With the default settings, a head whose first bytes came at once and
/// the rest only after a 3 s stall (a segment lost just after them,
/// retransmitted after 1 s and again after 2 s more) is served, not
/// refused as slow.
#[test]
fn a_head_stalled_by_a_lost_segment_is_served_with_the_defaults() {
    let d = domain();
    let mut h = Harness::with_config(d, Config::default());
    let c = h.connect();
    let head = [b"GET /file-64k.bin HTTP/1.1\r\nHost: t\r\nX-Pad: ".as_slice(), &[b'p'; 6000], b"\r\n\r\n"].concat();
    h.send(c, &head[..40]);
    for _ in 0..30 {
        h.advance(100);
        assert!(h.srv.tick().is_empty(), "no verdict while the segment is retransmitted");
        assert!(h.drain(c).bytes.is_empty());
    }
    h.send(c, &head[40..]);
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 200);
    assert!(r[0].body == content(65536, 2), "byte for byte");
    assert_eq!(h.srv.stats().head_too_slow, 0);
}
