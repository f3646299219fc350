//! The access and error logs: nginx's `combined` format plus
//! `$request_time`, escaped and bounded; the body bytes really pulled.

use super::*;
use crate::server::{escape_into, AGENT_MAX, REQUEST_MAX};

fn lines(h: &mut Harness<'_>) -> Vec<String> {
    h.srv.take_log_lines().into_iter().collect()
}

#[test]
fn one_combined_line_per_response_with_the_bytes_sent() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(
        c,
        b"GET /file-1k.txt?x=1 HTTP/1.1\r\nHost: t\r\nReferer: http://a/b\r\nUser-Agent: curl/7.88.1\r\n\r\n\
          HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    h.advance(12);
    let dr = h.drain(c);
    assert!(!dr.closed);
    let l = lines(&mut h);
    assert_eq!(
        l,
        [
            "10.0.2.2 - - [15/Nov/2023:22:13:21 +0000] \"GET /file-1k.txt?x=1 HTTP/1.1\" 200 1024 \"http://a/b\" \"curl/7.88.1\" 0.012",
            // HEAD: no body sent. A pipelined request's time starts when
            // it is taken up (the first was done), as nginx's does.
            "10.0.2.2 - - [15/Nov/2023:22:13:21 +0000] \"HEAD /index.html HTTP/1.1\" 200 0 \"-\" \"-\" 0.000",
        ]
    );
    let s = h.srv.stats();
    assert_eq!((s.access_log_lines, s.access_log_lines_dropped), (2, 0));
    assert_eq!(
        s.access_log_bytes_copied as usize,
        "GET /file-1k.txt?x=1 HTTP/1.1http://a/bcurl/7.88.1".len() + "HEAD /index.html HTTP/1.1".len()
    );
}

#[test]
fn errors_get_an_error_line_with_their_cause() {
    let d = domain();
    let mut h = Harness::new(d);
    assert_eq!(h.get("/nope.html").status, 404);
    let l = lines(&mut h);
    assert_eq!(l.len(), 2);
    assert!(l[0].starts_with("10.0.2.2 - - [15/Nov/2023:22:13:21 +0000] \"GET /nope.html HTTP/1.1\" 404 "), "{}", l[0]);
    assert_eq!(
        l[1],
        "2023/11/15 22:13:21 [error] *1: not found (404), client: 10.0.2.2, request: \"GET /nope.html HTTP/1.1\""
    );
    // A malformed head: refused, logged with its raw line, then closed.
    let (r, closed) = h.roundtrip(b"GET /a b c\x01 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(closed);
    assert_eq!(r[0].status, 400);
    let l = lines(&mut h);
    assert!(l[0].contains("\"GET /a b c\\x01 HTTP/1.1\" 400 "), "{}", l[0]);
    assert!(l[1].contains("[error] *2: malformed request (400), client: 10.0.2.2"), "{}", l[1]);
}

#[test]
fn hostile_strings_are_escaped_and_cut() {
    let d = domain();
    let mut h = Harness::new(d);
    // (Control bytes are refused in fields, 400: the request line test
    // above has one.)
    let agent = format!("evil\" \\ \u{e9}\t[31m{}", "A".repeat(200));
    let c = h.connect();
    h.send(c, format!("GET /index.html HTTP/1.1\r\nHost: t\r\nUser-Agent: {agent}\r\n\r\n").as_bytes());
    h.drain(c);
    let l = lines(&mut h);
    assert_eq!(l.len(), 1);
    let ua = l[0].rsplit_once(" \"").unwrap().1;
    let ua = ua.rsplit_once("\" ").unwrap().0;
    assert!(ua.starts_with("evil\\x22 \\x5C \\xC3\\xA9\\x09[31mAAA"), "{ua}");
    assert!(ua.ends_with("...") && ua.len() <= AGENT_MAX, "{ua}");
    assert!(l[0].len() <= 240, "fits a log ring line: {}", l[0].len());
    // The escaper on its own: nothing printable passes unescaped but
    // ASCII 0x20..0x7e without `"` and `\`.
    let mut s = String::new();
    assert_eq!(escape_into(&mut s, b"a\"b\\c\n\x7f\xff", 64), s.len());
    assert_eq!(s, "a\\x22b\\x5Cc\\x0A\\x7F\\xFF");
    let mut s = String::new();
    escape_into(&mut s, "x".repeat(500).as_bytes(), REQUEST_MAX);
    assert_eq!(s.len(), REQUEST_MAX);
    assert!(s.ends_with("..."));
    // A cut never splits an escape.
    let mut s = String::new();
    escape_into(&mut s, &[b'"'; 100], 10);
    assert_eq!(s, "\\x22...");
}

#[test]
fn lines_beyond_the_pending_bound_are_counted_not_kept() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    for _ in 0..crate::server::PENDING_MAX + 10 {
        h.send(c, b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
        h.drain(c);
    }
    assert_eq!(lines(&mut h).len(), crate::server::PENDING_MAX);
    assert_eq!(h.srv.stats().access_log_lines_dropped, 10);
}

#[test]
fn the_print_rate_is_bounded_and_drops_are_reported_once_a_second() {
    use crate::server::LogRate;
    let mut r = LogRate::new(0);
    let burst = (0..1000).filter(|_| r.admit(0)).count() as u64;
    assert_eq!(burst, LogRate::BURST);
    assert_eq!(r.report(500), None, "not before a second");
    assert_eq!(r.report(1000), Some(1000 - LogRate::BURST));
    assert_eq!(r.report(1000), None, "reported once");
    // A second later: a second's worth.
    let next = (0..1000).filter(|_| r.admit(2000)).count() as u64;
    assert_eq!(next, LogRate::PER_SECOND);
    assert_eq!(r.report(2000), Some(1000 - LogRate::PER_SECOND));
    assert_eq!(r.dropped_total(), 2000 - LogRate::BURST - LogRate::PER_SECOND);
    // Quiet: nothing to report.
    assert!(r.admit(10_000));
    assert_eq!(r.report(20_000), None);
}
