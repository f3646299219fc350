//! CGI requests that arrive while the cgi is away (`Server::cgi_down`
//! until `Server::cgi_up`): held, then handed to the new incarnation in
//! arrival order and answered byte for byte as without a gap; the bounds
//! (count, body bytes, streamed bodies: 503), the deadline (503), a client
//! that leaves (dropped, nothing goes to the cgi), the order on a
//! pipelined connection.

use super::*;
use crate::{Clock, SERVER};

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    v.extend_from_slice(body);
    v
}

/// What the program answers to a call: its query and body echoed.
fn output(call: &CgiCall<'_>) -> Vec<u8> {
    let q = call.env.get_str("QUERY_STRING").unwrap_or("");
    let body = call.body.as_ref().map(bytes).unwrap_or_default();
    let mut out =
        format!("Content-Type: text/plain\r\nX-Query: {q}\r\n\r\nquery={q} body={}\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The exact bytes of that answer as a response (the fake clock's date).
fn expected(h: &Harness<'_>, call: &CgiCall<'_>) -> Vec<u8> {
    let out = output(call);
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &out[split..];
    let q = call.env.get_str("QUERY_STRING").unwrap_or("");
    let date = crate::date::format(h.srv.clock().unix_secs());
    let date = core::str::from_utf8(&date).unwrap();
    let mut v = format!(
        "HTTP/1.1 200 OK\r\nDate: {date}\r\nServer: {SERVER}\r\nContent-Type: text/plain\r\nX-Query: {q}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// Bytes from the client, then everything pulled (as the component pulls
/// a connection right after its data).
fn send<'d>(h: &mut Harness<'d>, c: ConnId, b: &[u8]) -> Drained<'d> {
    h.send(c, b);
    h.drain(c)
}

fn answer<'d>(h: &mut Harness<'d>, c: ConnId, call: &CgiCall<'d>) -> Vec<u8> {
    let out = make(h.d, CGI_POOL, &output(call));
    h.srv.cgi_reply(c, call.id, Ok(out));
    h.drain(c).bytes
}

#[test]
fn held_calls_go_to_the_new_incarnation_in_arrival_order_byte_exact() {
    let d = domain();
    let mut h = Harness::new(d);
    // One call in flight when the cgi dies: the caller fails it (502).
    let inflight = h.connect();
    h.send(inflight, &get("/cgi-bin/echo?inflight"));
    let k0 = h.drain(inflight).cgi.pop().expect("the call went out");
    h.srv.cgi_down();
    assert!(h.srv.cgi_is_down());
    let (a, b, c) = (h.connect(), h.connect(), h.connect());
    let body: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 251) as u8).collect();
    h.send(b, &get("/cgi-bin/echo?first"));
    h.send(a, &post("/cgi-bin/echo?second", &body));
    h.send(c, &get("/cgi-bin/echo?third"));
    for x in [a, b, c] {
        let dr = h.drain(x);
        assert!(dr.cgi.is_empty() && dr.bytes.is_empty() && !dr.closed, "held, nothing out yet");
    }
    assert_eq!(h.srv.cgi_queue_len(), 3);
    // The dead incarnation's call fails as before.
    h.srv.cgi_reply(inflight, k0.id, Err(cgi_api::Failure::Fault));
    assert_eq!(parse_responses(&h.drain(inflight).bytes, &|_| false)[0].status, 502);
    // Waiting in the queue is not the cgi's time: no 504 however long
    // (below the queue's own deadline).
    h.advance(4_900);
    assert!(h.srv.tick().is_empty());
    let calls = h.srv.cgi_up();
    assert!(!h.srv.cgi_is_down());
    let order: Vec<(ConnId, Option<&str>)> = calls.iter().map(|(x, k)| (*x, k.env.get_str("QUERY_STRING"))).collect();
    assert_eq!(order, vec![(b, Some("first")), (a, Some("second")), (c, Some("third"))]);
    // The held body is the client's own slices, by reference, intact.
    assert_eq!(bytes(calls[1].1.body.as_ref().unwrap()), body);
    for (x, k) in &calls {
        let got = answer(&mut h, *x, k);
        assert_eq!(got, expected(&h, k), "byte-exact answer for {:?}", k.env.get_str("QUERY_STRING"));
    }
    let s = h.srv.stats();
    assert_eq!((s.cgi_queued, s.cgi_queue_served, s.cgi_queue_dropped, s.cgi_queue_refused), (3, 3, 0, 0));
    assert_eq!(s.cgi_timeouts, 0);
    // The cgi is back: calls go out at once again.
    h.send(a, &get("/cgi-bin/echo?after"));
    let k = h.drain(a).cgi.pop().expect("sent at once");
    assert_eq!(answer(&mut h, a, &k), expected(&h, &k));
    // The timeout of a released call runs from its release.
    h.srv.cgi_down();
    send(&mut h, b, &get("/cgi-bin/echo?late"));
    h.advance(1_000);
    let (x, k) = h.srv.cgi_up().pop().unwrap();
    h.advance(4_999);
    assert!(h.srv.tick().is_empty());
    h.advance(1);
    assert_eq!(h.srv.tick(), vec![x]);
    assert_eq!(parse_responses(&h.drain(x).bytes, &|_| false)[0].status, 504);
    drop(k);
}

#[test]
fn a_full_queue_answers_503_by_count_and_by_bytes() {
    let d = domain();
    let cfg = Config { cgi_queue_max: 2, cgi_queue_bytes: 100, ..Config::default() };
    let mut h = Harness::with_config(d, cfg);
    h.srv.cgi_down();
    let (a, b, c) = (h.connect(), h.connect(), h.connect());
    send(&mut h, a, &post("/cgi-bin/echo?a", &[b'x'; 80]));
    // 80 + 30 bytes would pass 100: refused at once, the connection stays.
    h.send(b, &post("/cgi-bin/echo?b", &[b'y'; 30]));
    let dr = h.drain(b);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status, dr.closed), (1, 503, false));
    assert!(dr.cgi.is_empty());
    h.send(b, &get("/cgi-bin/echo?b2"));
    assert!(h.drain(b).bytes.is_empty(), "a call without body fits");
    // Two held: the third is refused by count.
    h.send(c, &get("/cgi-bin/echo?c"));
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!(r[0].status, 503);
    // Static pages are served meanwhile.
    h.send(c, &get("/style.css"));
    let r = parse_responses(&h.drain(c).bytes, &|_| false);
    assert_eq!((r[0].status, r[0].body.as_slice()), (200, &b"body { color: #222 }\n"[..]));
    let s = h.srv.stats();
    assert_eq!((s.cgi_queued, s.cgi_queue_refused), (2, 2));
    let calls = h.srv.cgi_up();
    let qs: Vec<_> = calls.iter().map(|(_, k)| k.env.get_str("QUERY_STRING").unwrap().to_string()).collect();
    assert_eq!(qs, ["a", "b2"]);
    for (x, k) in &calls {
        assert_eq!(answer(&mut h, *x, k), expected(&h, k));
    }
}

#[test]
fn a_streamed_body_in_the_gap_is_refused_and_the_connection_goes_on() {
    let d = domain();
    let mut h = Harness::new(d);
    h.srv.cgi_down();
    let c = h.connect();
    let big = vec![b'z'; 100_000];
    let mut r = post("/cgi-bin/upload", &big);
    r.extend_from_slice(&get("/style.css"));
    h.send(c, &r);
    let dr = h.drain(c);
    assert!(dr.cgi.is_empty() && dr.body_parts.is_empty(), "nothing of it goes to any cgi");
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r.iter().map(|r| r.status).collect::<Vec<_>>(), [503, 200]);
    assert_eq!(r[1].body, b"body { color: #222 }\n");
    assert_eq!(h.srv.stats().cgi_queue_refused, 1);
    assert_eq!(h.srv.cgi_queue_len(), 0);
}

#[test]
fn held_calls_past_the_deadline_get_503() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { cgi_queue_timeout_ms: 3_000, ..Config::default() });
    h.srv.cgi_down();
    let a = h.connect();
    send(&mut h, a, &get("/cgi-bin/echo?a"));
    h.advance(1_000);
    let b = h.connect();
    send(&mut h, b, &get("/cgi-bin/echo?b"));
    h.advance(1_999);
    assert!(h.srv.tick().is_empty());
    h.advance(1);
    assert_eq!(h.srv.tick(), vec![a], "only the older one is due");
    let dr = h.drain(a);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r[0].status, dr.closed), (503, false));
    h.advance(1_000);
    assert_eq!(h.srv.tick(), vec![b]);
    assert_eq!(parse_responses(&h.drain(b).bytes, &|_| false)[0].status, 503);
    let s = h.srv.stats();
    // Not the cgi's timeout (that would restart it once more).
    assert_eq!((s.cgi_queue_expired, s.cgi_timeouts, s.cgi_queue_served), (2, 0, 0));
    assert!(h.srv.cgi_up().is_empty());
    // The connections work on.
    h.send(a, &get("/cgi-bin/echo?again"));
    let k = h.drain(a).cgi.pop().expect("the cgi is back");
    assert_eq!(answer(&mut h, a, &k), expected(&h, &k));
}

#[test]
fn a_client_that_leaves_is_dropped_from_the_queue() {
    let d = domain();
    let mut h = Harness::new(d);
    h.srv.cgi_down();
    let (a, b, c) = (h.connect(), h.connect(), h.connect());
    send(&mut h, a, &post("/cgi-bin/echo?a", &[1; 500]));
    send(&mut h, b, &get("/cgi-bin/echo?b"));
    send(&mut h, c, &get("/cgi-bin/echo?c"));
    assert_eq!(h.srv.cgi_queue_len(), 3);
    // a's connection is gone (reset or closed); b sends FIN.
    h.srv.closed(a);
    h.srv.receive_eof(b);
    let dr = h.drain(b);
    assert!(dr.closed && dr.bytes.is_empty() && dr.cgi.is_empty());
    h.srv.closed(b);
    assert_eq!(h.srv.cgi_queue_len(), 1);
    assert_eq!(h.srv.stats().cgi_queue_dropped, 2);
    // One that floods its input while held is closed and dropped too.
    let f = h.connect();
    send(&mut h, f, &get("/cgi-bin/echo?flood"));
    assert_eq!(h.srv.cgi_queue_len(), 2);
    h.send(f, &vec![b'x'; Config::default().max_buffered + 1]);
    assert!(h.drain(f).closed);
    assert_eq!(h.srv.cgi_queue_len(), 1);
    // Nothing goes to the cgi for them, and no cancel either.
    let calls = h.srv.cgi_up();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, c);
    assert!(h.srv.take_cgi_controls().is_empty());
    assert_eq!(answer(&mut h, c, &calls[0].1), expected(&h, &calls[0].1));
    let s = h.srv.stats();
    assert_eq!((s.cgi_queue_served, s.cgi_queue_dropped), (1, 3));
}

#[test]
fn a_pipelined_connection_keeps_its_order_across_the_gap() {
    let d = domain();
    let mut h = Harness::new(d);
    h.srv.cgi_down();
    let c = h.connect();
    let mut r = get("/cgi-bin/echo?one");
    r.extend_from_slice(&get("/style.css"));
    r.extend_from_slice(&get("/cgi-bin/echo?two"));
    r.extend_from_slice(&get("/file-1k.txt"));
    h.send(c, &r);
    let dr = h.drain(c);
    assert!(dr.bytes.is_empty() && dr.cgi.is_empty(), "everything waits behind the held call");
    // A second connection's call arrives later than the first one's.
    let o = h.connect();
    send(&mut h, o, &get("/cgi-bin/echo?other"));
    assert_eq!(h.srv.cgi_queue_len(), 2, "one per connection: the rest waits on it");
    let calls = h.srv.cgi_up();
    assert_eq!(calls.iter().map(|(x, _)| *x).collect::<Vec<_>>(), [c, o]);
    let (_, one) = &calls[0];
    h.srv.cgi_reply(c, one.id, Ok(make(d, CGI_POOL, &output(one))));
    let mut dr = h.drain(c);
    // The answer of one, then style.css; then the call of two goes out
    // (at once: the cgi is back) and file-1k.txt waits behind it.
    let mut want = expected(&h, one);
    let r = parse_responses(&dr.bytes[want.len()..], &|_| false);
    assert_eq!(&dr.bytes[..want.len()], want.as_slice());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].body, b"body { color: #222 }\n");
    let two = dr.cgi.pop().expect("the second call");
    assert_eq!(two.env.get_str("QUERY_STRING"), Some("two"));
    h.srv.cgi_reply(c, two.id, Ok(make(d, CGI_POOL, &output(&two))));
    let dr = h.drain(c);
    want = expected(&h, &two);
    assert_eq!(&dr.bytes[..want.len()], want.as_slice());
    let r = parse_responses(&dr.bytes[want.len()..], &|_| false);
    assert_eq!(r[0].body, content(1024, 1));
    // The other connection's call was released after c's: answered too.
    let (_, k) = &calls[1];
    assert_eq!(answer(&mut h, o, k), expected(&h, k));
}

#[test]
fn a_cgi_held_down_fails_the_held_calls_and_new_ones_at_once() {
    let d = domain();
    let mut h = Harness::new(d);
    h.srv.cgi_down();
    let (a, b) = (h.connect(), h.connect());
    send(&mut h, a, &get("/cgi-bin/echo?held"));
    assert_eq!(h.srv.cgi_queue_len(), 1);
    // The supervisor gives up on the cgi: the held call gets its 503 now,
    // not after the queue's deadline.
    assert_eq!(h.srv.cgi_gone(), vec![a]);
    let dr = h.drain(a);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status, dr.closed), (1, 503, false));
    // New calls are not held either; the connection stays usable.
    let dr = send(&mut h, b, &get("/cgi-bin/echo?new"));
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status), (1, 503));
    assert!(dr.cgi.is_empty());
    assert_eq!(h.srv.cgi_queue_len(), 0);
    let s = h.srv.stats();
    assert_eq!((s.cgi_queued, s.cgi_queue_refused, s.cgi_queue_expired), (1, 2, 0));
    // Should it come back after all, calls go out again.
    assert!(h.srv.cgi_up().is_empty());
    let k = send(&mut h, b, &get("/cgi-bin/echo?back")).cgi.pop().expect("sent at once");
    assert_eq!(answer(&mut h, b, &k), expected(&h, &k));
}

#[test]
fn a_call_handed_out_as_the_cgi_dies_is_held_not_refused() {
    // The caller learns of the death while sending a call `next` handed
    // out: the call never reached the dead incarnation, so it waits for
    // the next one like the calls that arrive after the death.
    let d = domain();
    let mut h = Harness::new(d);
    let (a, b) = (h.connect(), h.connect());
    h.send(a, &get("/cgi-bin/echo?unsent"));
    let k = h.drain(a).cgi.pop().expect("handed out");
    h.advance(100);
    assert!(h.srv.cgi_hold(a, k));
    assert!(h.srv.cgi_is_down());
    assert_eq!(h.srv.cgi_queue_len(), 1);
    let dr = h.drain(a);
    assert!(dr.cgi.is_empty() && dr.bytes.is_empty() && !dr.closed, "held, nothing out yet");
    // Its CGI time had started when it was handed out; held, it has not:
    // no 504 however long it waits (below the queue's own deadline, which
    // runs from the hold).
    h.advance(4_950);
    assert!(h.srv.tick().is_empty());
    let calls = h.srv.cgi_up();
    assert_eq!(calls.len(), 1);
    let (x, k) = &calls[0];
    assert_eq!((*x, k.env.get_str("QUERY_STRING")), (a, Some("unsent")));
    assert_eq!(answer(&mut h, a, k), expected(&h, k));
    let s = h.srv.stats();
    assert_eq!((s.cgi_queued, s.cgi_queue_served, s.cgi_queue_refused, s.cgi_timeouts), (1, 1, 0, 0));
    // Held down meanwhile: the same call gets its 503 at once instead.
    h.send(b, &get("/cgi-bin/echo?gone"));
    let k = h.drain(b).cgi.pop().expect("handed out");
    h.srv.cgi_gone();
    assert!(!h.srv.cgi_hold(b, k));
    let dr = h.drain(b);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status, dr.closed), (1, 503, false));
}
