//! Runs tests/http-corpus through the state machine: every file, whole and
//! split into three segments, on a fresh connection of one server; each
//! must give exactly the expected outcome. A connection that stays open
//! must then serve a normal request, and so must the server at the end.

use std::path::PathBuf;

use httpd::testing::*;
use httpd::ConnId;
use httpd_api::{Counter, HttpdCounter, Values};
use httpd_cgi_tests::{programs, NoFrags};

/// The runner's wait: past both the request and the idle timeout.
const WAIT_MS: u64 = 20_000;

struct Case {
    file: String,
    bytes: Vec<u8>,
    expect: Vec<String>,
}

fn corpus() -> Vec<Case> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../http-corpus");
    let index = std::fs::read_to_string(dir.join("expected.tsv")).expect("tests/http-corpus/expected.tsv");
    let mut cases = Vec::new();
    for line in index.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut cols = line.split('\t');
        let file = cols.next().unwrap().to_string();
        let expect =
            cols.next().unwrap_or_else(|| panic!("{file}: no expectation")).split(',').map(String::from).collect();
        let bytes = std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        cases.push(Case { file, bytes, expect });
    }
    // Every .http file is listed.
    let listed: Vec<&str> = cases.iter().map(|c| c.file.as_str()).collect();
    for e in std::fs::read_dir(&dir).unwrap() {
        let n = e.unwrap().file_name().into_string().unwrap();
        if n.ends_with(".http") {
            assert!(listed.contains(&n.as_str()), "{n} is not in expected.tsv");
        }
    }
    cases
}

/// Statuses in a byte stream of responses. A response whose body is not
/// there (nothing follows, or the next response starts right away) was a
/// HEAD response.
fn statuses(mut b: &[u8]) -> Vec<u16> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hs);
        let Ok(httparse::Status::Complete(n)) = r.parse(b) else {
            panic!("unparsable response: {:?}", String::from_utf8_lossy(b))
        };
        let code = r.code.unwrap();
        let cl: usize = r
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map_or(0, |h| std::str::from_utf8(h.value).unwrap().parse().unwrap());
        let rest = &b[n..];
        let body = if (100..200).contains(&code)
            || code == 204
            || code == 304
            || rest.starts_with(b"HTTP/1.1 ")
            || rest.is_empty()
        {
            0
        } else {
            cl
        };
        assert!(rest.len() >= body, "truncated body");
        out.push(code);
        b = &rest[body..];
    }
    out
}

/// Pulls everything, answering CGI calls with the real programs.
fn pump<'d>(h: &mut Harness<'d>, c: ConnId, progs: &mut cgi::Programs<'d, NoFrags>) -> (Vec<u8>, bool) {
    let mut all = Vec::new();
    loop {
        let dr = h.drain(c);
        all.extend(dr.bytes);
        if dr.closed {
            return (all, true);
        }
        if dr.cgi.is_empty() {
            return (all, false);
        }
        for call in dr.cgi {
            let mut counters = cgi::Counters { uptime_ms: h.now.get(), components: Vec::new(), devices: Vec::new() };
            let mut v = Values::<HttpdCounter>::new();
            h.srv.counters(&mut v);
            counters.push(cgi::Component::from_counters("httpd", v.iter().map(|(c, n)| (c.name(), n))));
            let out = progs.run(&call.env, call.body, &counters).map_err(|_| cgi_api::Failure::Fault);
            h.srv.cgi_reply(c, call.id, out);
        }
    }
}

fn run_case<'d>(h: &mut Harness<'d>, progs: &mut cgi::Programs<'d, NoFrags>, case: &Case, split: bool) {
    let what = format!("{} ({})", case.file, if split { "split" } else { "whole" });
    let c = h.connect();
    if split {
        let n = case.bytes.len();
        let (a, b) = (n / 3, 2 * n / 3);
        h.send(c, &case.bytes[..a]);
        h.send(c, &case.bytes[a..b]);
        h.send(c, &case.bytes[b..]);
    } else {
        h.send(c, &case.bytes);
    }
    let (mut bytes, mut closed) = pump(h, c, progs);
    let mut got: Vec<String> = statuses(&bytes).iter().map(|s| s.to_string()).collect();
    let mut want = case.expect.clone();
    if let Some(w) = want.iter().position(|e| e == "wait") {
        assert!(!closed, "{what}: closed before the wait");
        let before: Vec<String> = want.drain(..w).collect();
        want.remove(0);
        assert_eq!(got, before, "{what}: before the timeout");
        h.advance(WAIT_MS);
        h.srv.tick();
        let (b, cl) = pump(h, c, progs);
        bytes = b;
        closed = cl;
        got = statuses(&bytes).iter().map(|s| s.to_string()).collect();
    }
    let want_close = want.last().map(String::as_str) == Some("close");
    if want_close {
        want.pop();
    }
    assert_eq!(got, want, "{what}: responses");
    assert_eq!(closed, want_close, "{what}: connection closed?");
    if closed {
        h.srv.closed(c);
        return;
    }
    // Still open: the framing held, a normal request works on it.
    h.send(c, b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let (b, closed) = pump(h, c, progs);
    assert_eq!(statuses(&b), vec![200], "{what}: follow-up request");
    assert!(closed);
    h.srv.closed(c);
}

#[test]
fn hostile_corpus_gives_the_expected_outcomes() {
    let cases = corpus();
    assert!(cases.len() >= 110, "corpus has {} cases", cases.len());
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    for case in &cases {
        run_case(&mut h, &mut progs, case, false);
        run_case(&mut h, &mut progs, case, true);
    }
    assert_eq!(h.srv.connections(), 0);
    // The server still answers a normal request.
    let r = h.get("/index.html");
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with(b"<!DOCTYPE html>"));
    // Nothing leaked: every request buffer went back to the network pool.
    assert_eq!(d.pool_stats(NET_POOL).unwrap().buffers_in_use, 0);
    assert_eq!(h.srv.source_mut().open.get(), 0, "every file closed");
    eprintln!("corpus: {} cases, each whole and split, all as expected", cases.len());
}
