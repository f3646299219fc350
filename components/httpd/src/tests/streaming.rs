//! Streamed CGI answers: the framing on the wire (chunked for HTTP/1.1,
//! the CGI's Content-Length, close-delimited for HTTP/1.0), byte for byte;
//! HEAD, Status and redirects; the window and its credits; failures and
//! timeouts in the middle of a body.

use super::*;
use crate::{Control, OverWindow};
use cgi_api::wire::STREAM_WINDOW;
use iolite::Aggregate;

const DATE: &str = "Wed, 15 Nov 2023 22:13:21 GMT";

/// A connection with a CGI call out for `GET path` in HTTP/1.`minor`
/// (`method` other than GET: its request line's method).
fn call<'d>(h: &mut Harness<'d>, method: &str, path: &str, minor: u8, extra: &str) -> (ConnId, u32) {
    let c = h.connect();
    h.send(c, format!("{method} {path} HTTP/1.{minor}\r\nHost: t\r\n{extra}\r\n").as_bytes());
    let mut dr = h.drain(c);
    assert!(dr.bytes.is_empty() && !dr.closed);
    (c, dr.cgi.pop().expect("a CGI call").id)
}

fn part<'d>(h: &mut Harness<'d>, c: ConnId, id: u32, b: &[u8]) -> Result<(), OverWindow> {
    let a = make(h.d, CGI_POOL, b);
    h.srv.cgi_part(c, id, a)
}

fn last(h: &mut Harness, c: ConnId, id: u32, b: &[u8]) {
    let a = make(h.d, CGI_POOL, b);
    h.srv.cgi_reply(c, id, Ok(a));
}

/// The response header httpd sends for a streamed 200 (`framing`: the
/// lines between Content-Type and the empty line).
fn head200(conn: &str, ctype: &str, framing: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nDate: {DATE}\r\nServer: {}\r\n{conn}Content-Type: {ctype}\r\n{framing}\r\n",
        crate::SERVER
    )
}

fn credits(h: &mut Harness) -> Vec<Control> {
    h.srv.take_cgi_controls()
}

#[test]
fn a_streamed_answer_goes_out_chunked_as_it_comes_by_reference() {
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "GET", "/cgi-bin/stream", 1, "");
    assert!(h.srv.cgi_awaiting(c, id));
    // The header and the first body bytes: the response starts at once.
    let p1 = make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\nhello");
    let p1_body = p1.range(28, 5).unwrap().descs().to_vec();
    h.srv.cgi_part(c, id, p1).unwrap();
    let dr = h.drain(c);
    let want = format!("{}5\r\nhello", head200("", "text/plain", "Transfer-Encoding: chunked\r\n"));
    assert_eq!(String::from_utf8_lossy(&dr.bytes), want);
    assert!(!dr.closed);
    // The body bytes went out as the cgi's own slice.
    let sent: Vec<SliceDesc> = dr.sends.iter().flat_map(|a| a.descs().to_vec()).collect();
    assert!(sent.contains(&p1_body[0]), "{sent:?}");
    // The part was pulled: its credit goes back to the cgi.
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 1 }]);
    assert!(h.srv.cgi_awaiting(c, id), "the cgi owes the rest");
    // Nothing more until the cgi sends more.
    assert!(h.srv.next(c).is_none());
    // Two parts at once: two chunks, two credits in one control.
    part(&mut h, c, id, b"world!").unwrap();
    part(&mut h, c, id, &[b'x'; 300]).unwrap();
    let dr = h.drain(c);
    let want = format!("\r\n6\r\nworld!\r\n12c\r\n{}", "x".repeat(300));
    assert_eq!(String::from_utf8_lossy(&dr.bytes), want);
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 2 }]);
    // The last part (empty): the last chunk ends the body.
    last(&mut h, c, id, b"");
    let dr = h.drain(c);
    assert_eq!(dr.bytes, b"\r\n0\r\n\r\n");
    assert!(!dr.closed, "HTTP/1.1: the connection stays");
    assert!(credits(&mut h).is_empty(), "no credit for the last part");
    assert!(!h.srv.cgi_awaiting(c, id));
    // The framing was generated; no payload byte was copied.
    assert_eq!(d.stats().bytes_copied, 0);
    let s = h.srv.stats();
    assert_eq!((s.cgi_streams, s.cgi_stream_parts, s.cgi_streams_aborted), (1, 3, 0));
    assert_eq!(s.body_bytes_by_ref, 5 + 6 + 300);
    // The connection serves the next request.
    h.send(c, b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 200);
}

#[test]
fn the_whole_byte_stream_is_exact_and_decodes() {
    // A header in two pieces (the response waits for its end), body bytes
    // in the piece that ends it, a last part with data; a part of 16
    // slices (its size line goes alone, the bytes are the same).
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "GET", "/cgi-bin/stream", 1, "");
    part(&mut h, c, id, b"Status: 201 Created\r\nContent-Ty").unwrap();
    assert!(h.drain(c).bytes.is_empty(), "the header has not ended");
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 1 }], "a header piece is taken at once");
    part(&mut h, c, id, b"pe: text/plain\r\nX-Extra: 1\r\n\r\nab").unwrap();
    let mut sixteen = Aggregate::new(d);
    for i in 0..16u8 {
        // Separate buffers: 16 slices that cannot merge.
        sixteen.append(make(d, CGI_POOL, &[b'A' + i; 3])).unwrap();
    }
    assert_eq!(sixteen.slice_count(), 16);
    h.srv.cgi_part(c, id, sixteen).unwrap();
    last(&mut h, c, id, b"end");
    let dr = h.drain(c);
    let body16: String = (0..16u8).map(|i| String::from_utf8(vec![b'A' + i; 3]).unwrap()).collect();
    let want = format!(
        "HTTP/1.1 201 Created\r\nDate: {DATE}\r\nServer: {}\r\nContent-Type: text/plain\r\nX-Extra: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n30\r\n{body16}\r\n3\r\nend\r\n0\r\n\r\n",
        crate::SERVER
    );
    assert_eq!(String::from_utf8_lossy(&dr.bytes), want);
    assert!(dr.sends.iter().all(|a| a.slice_count() <= iolite::MAX_SLICES));
    assert_eq!(d.stats().bytes_copied, 0);
    assert!(!dr.closed);
}

#[test]
fn a_whole_answer_keeps_its_content_length_and_so_does_one_whose_header_never_ended_early() {
    let d = domain();
    let mut h = Harness::new(d);
    // Whole, one message: as always, Content-Length (the CGI's is replaced).
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    last(&mut h, c, id, b"Content-Type: text/plain\r\nContent-Length: 99\r\n\r\nabc");
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}abc", head200("", "text/plain", "Content-Length: 3\r\n"))
    );
    // Parts that end before the header does: the output is whole when the
    // last comes, and framed by its length.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n").unwrap();
    last(&mut h, c, id, b"\r\nbody");
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}body", head200("", "text/plain", "Content-Length: 4\r\n"))
    );
    assert_eq!(h.srv.stats().cgi_streams, 0);
}

#[test]
fn the_cgis_content_length_frames_a_streamed_body() {
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\n01234").unwrap();
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}01234", head200("", "text/plain", "Content-Length: 10\r\n"))
    );
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 1 }]);
    // The length is reached before the last part: the response is complete,
    // the cgi is told to stop, and what it sends after is dropped.
    part(&mut h, c, id, b"56789").unwrap();
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    let dr = h.drain(c);
    assert_eq!(dr.bytes, b"56789");
    assert!(!dr.closed);
    part(&mut h, c, id, b"more").unwrap();
    last(&mut h, c, id, b"");
    assert!(h.drain(c).bytes.is_empty());
    assert_eq!(h.srv.stats().cgi_late_replies, 2);
    h.send(c, b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 200);

    // More than announced in one part: cut at the length.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}abc", head200("", "text/plain", "Content-Length: 3\r\n"))
    );
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    assert_eq!(h.srv.stats().cgi_stream_excess_bytes, 3);

    // Fewer than announced: the connection closes after them, so the
    // client sees a short body.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\n0123").unwrap();
    last(&mut h, c, id, b"4");
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}01234", head200("", "text/plain", "Content-Length: 10\r\n"))
    );
    assert!(dr.closed);
    assert_eq!(h.srv.stats().cgi_streams_aborted, 1);
}

#[test]
fn http_1_0_gets_a_close_delimited_body() {
    let d = domain();
    let mut h = Harness::new(d);
    for extra in ["", "Connection: keep-alive\r\n"] {
        let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 0, extra);
        part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nfirst ").unwrap();
        part(&mut h, c, id, b"second").unwrap();
        let dr = h.drain(c);
        // Even a keep-alive 1.0 client: the close is the body's end.
        let want = format!("{}first second", head200("Connection: close\r\n", "text/plain", ""));
        assert_eq!(String::from_utf8_lossy(&dr.bytes), want);
        assert!(!dr.closed, "the body goes on");
        last(&mut h, c, id, b" third");
        let dr = h.drain(c);
        assert_eq!(dr.bytes, b" third");
        assert!(dr.closed, "the close ends the body");
        h.srv.closed(c);
    }
    assert_eq!(h.srv.stats().cgi_streams_aborted, 0);
    assert_eq!(d.stats().bytes_copied, 0);
}

#[test]
fn head_to_a_streaming_cgi_sends_the_header_only_and_stops_the_program() {
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "HEAD", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nbody bytes").unwrap();
    let dr = h.drain(c);
    // The fields a GET would get, no body.
    assert_eq!(String::from_utf8_lossy(&dr.bytes), head200("", "text/plain", "Transfer-Encoding: chunked\r\n"));
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    part(&mut h, c, id, b"more").unwrap();
    assert!(h.drain(c).bytes.is_empty());
    // The connection goes on at once.
    h.send(c, b"GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
    let dr = h.drain(c);
    assert_eq!(parse_responses(&dr.bytes, &|_| false)[0].body, b"body { color: #222 }\n");
    // An HTTP/1.0 HEAD keeps its connection: there is no body to delimit.
    let (c, id) = call(&mut h, "HEAD", "/cgi-bin/x", 0, "Connection: keep-alive\r\n");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\n").unwrap();
    let dr = h.drain(c);
    assert_eq!(String::from_utf8_lossy(&dr.bytes), head200("Connection: keep-alive\r\n", "text/plain", ""));
    assert!(!dr.closed);
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    // 204 streamed: no body either.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Status: 204 No Content\r\n\r\n").unwrap();
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r[0].status, r[0].header("Transfer-Encoding"), r[0].header("Content-Length")), (204, None, None));
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
}

#[test]
fn redirects_from_a_streaming_cgi() {
    let d = domain();
    let mut h = Harness::new(d);
    // Client redirect: 302 with Location, the (empty) body chunked.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Location: http://example.org/\r\n\r\n").unwrap();
    last(&mut h, c, id, b"");
    let dr = h.drain(c);
    let want = format!(
        "HTTP/1.1 302 Found\r\nDate: {DATE}\r\nServer: {}\r\nLocation: http://example.org/\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        crate::SERVER
    );
    assert_eq!(String::from_utf8_lossy(&dr.bytes), want);
    // The part that ended the header was taken before the last came.
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 1 }]);
    // Local redirect: served at once, the program is stopped.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Location: /sub/note.txt\r\n\r\n").unwrap();
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    let dr = h.drain(c);
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!((r[0].status, r[0].body.as_slice()), (200, &b"a note in a subdirectory\n"[..]));
    // One with a body is not a local redirect: 502.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Location: /sub/note.txt\r\n\r\nbody").unwrap();
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 502);
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    // A header that does not end within 8 KiB: 502.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, format!("X-Long: {}\r\n", "a".repeat(9000)).as_bytes()).unwrap();
    assert_eq!(parse_responses(&h.drain(c).bytes, &|_| false)[0].status, 502);
}

#[test]
fn the_window_bounds_what_waits_and_credits_follow_the_pulls() {
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\n").unwrap();
    let header = h.drain(c);
    assert!(!header.bytes.is_empty());
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 1 }]);
    // A client that does not read: the caller pulls nothing; parts up to
    // the window wait here.
    for i in 0..STREAM_WINDOW {
        part(&mut h, c, id, format!("part {i}\n").as_bytes()).unwrap();
    }
    assert!(!h.srv.cgi_awaiting(c, id), "the cgi has no credit left: it owes nothing");
    assert!(h.srv.holds_output(c));
    // Without a credit, the cgi has no business sending more.
    assert_eq!(part(&mut h, c, id, b"one too many"), Err(OverWindow));
    // And no timeout while it waits for us, however long.
    h.advance(Config::default().cgi_timeout_ms * 3);
    h.srv.tick();
    assert!(!h.srv.is_closing(c));
    assert_eq!(h.srv.stats().cgi_timeouts, 0);
    // Two pulled: two credits back.
    for _ in 0..2 {
        assert!(matches!(h.srv.next(c), Some(Action::Send(_))));
    }
    assert_eq!(credits(&mut h), vec![Control::Credit { id, parts: 2 }]);
    assert!(h.srv.cgi_awaiting(c, id));
    part(&mut h, c, id, b"part 4\n").unwrap();
    last(&mut h, c, id, b"part 5\n");
    let dr = h.drain(c);
    let body: String = (2..6).map(|i| format!("\r\n7\r\npart {i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&dr.bytes), format!("{body}\r\n0\r\n\r\n"));
}

#[test]
fn the_cgi_dying_mid_stream_ends_the_response_without_its_last_chunk() {
    let d = domain();
    let mut h = Harness::new(d);
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nsent").unwrap();
    let dr = h.drain(c);
    assert_eq!(
        String::from_utf8_lossy(&dr.bytes),
        format!("{}4\r\nsent", head200("", "text/plain", "Transfer-Encoding: chunked\r\n"))
    );
    // A part arrives and is not pulled yet; then the cgi dies (the
    // component fails every pending call with Fault).
    let stale = make(d, CGI_POOL, b"never sent");
    let stale_desc = stale.descs()[0];
    h.srv.cgi_part(c, id, stale).unwrap();
    h.srv.cgi_reply(c, id, Err(cgi_api::Failure::Fault));
    let dr = h.drain(c);
    // Nothing of the dead cgi's queued part, no last chunk: the close.
    assert!(dr.bytes.is_empty(), "{:?}", String::from_utf8_lossy(&dr.bytes));
    assert!(dr.closed);
    assert!(dr.sends.iter().all(|a| !a.descs().contains(&stale_desc)));
    // The queued part was dropped: nothing here holds the dead cgi's buffer.
    assert_eq!(d.holds(CGI_POOL, stale_desc.buf).unwrap().local, 0);
    let s = h.srv.stats();
    assert_eq!((s.cgi_streams_aborted, s.cgi_failures), (1, 1));
    h.srv.closed(c);
    // A Fault before anything was pulled: the header may still go, never
    // the queued part, and never a last chunk.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nqueued").unwrap();
    h.srv.cgi_reply(c, id, Err(cgi_api::Failure::Fault));
    let dr = h.drain(c);
    assert_eq!(String::from_utf8_lossy(&dr.bytes), head200("", "text/plain", "Transfer-Encoding: chunked\r\n"));
    assert!(dr.closed);
}

#[test]
fn a_stream_the_cgi_stops_feeding_times_out_and_a_gone_client_stops_the_cgi() {
    let d = domain();
    let mut h = Harness::with_config(d, Config { cgi_timeout_ms: 2000, ..Config::default() });
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nsome").unwrap();
    let dr = h.drain(c);
    assert!(dr.bytes.ends_with(b"4\r\nsome"));
    credits(&mut h);
    h.advance(1999);
    assert!(h.srv.tick().is_empty());
    h.advance(1);
    assert_eq!(h.srv.tick(), vec![c]);
    let dr = h.drain(c);
    assert!(dr.bytes.is_empty() && dr.closed, "cut off: no last chunk");
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    let s = h.srv.stats();
    assert_eq!((s.cgi_timeouts, s.cgi_streams_aborted), (1, 1));
    h.srv.closed(c);
    assert!(credits(&mut h).is_empty(), "told once");

    // The client goes away mid-stream: the cgi is told to stop.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nsome").unwrap();
    h.drain(c);
    credits(&mut h);
    h.srv.closed(c);
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    part(&mut h, c, id, b"late").unwrap();
    // A call whose header never came: also cancelled when the client goes.
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    h.srv.closed(c);
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);

    // A client that stops reading: its parts wait, and after the send
    // timeout the connection goes (and the cgi is told).
    let (c, id) = call(&mut h, "GET", "/cgi-bin/x", 1, "");
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\n").unwrap();
    h.drain(c);
    credits(&mut h);
    // The window full: the cgi owes nothing (no cgi timeout).
    for _ in 0..STREAM_WINDOW {
        part(&mut h, c, id, b"unread").unwrap();
    }
    h.advance(Config::default().send_timeout_ms);
    assert_eq!(h.srv.tick(), vec![c]);
    assert!(h.drain(c).closed);
    assert_eq!(credits(&mut h), vec![Control::Cancel { id }]);
    assert_eq!(h.srv.stats().send_timeouts, 1);
}

#[test]
fn requests_behind_a_stream_are_answered_after_it_in_order() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, b"GET /cgi-bin/x HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n");
    let id = h.drain(c).cgi.pop().unwrap().id;
    part(&mut h, c, id, b"Content-Type: text/plain\r\n\r\none").unwrap();
    let mut bytes = h.drain(c).bytes;
    part(&mut h, c, id, b"two").unwrap();
    bytes.extend(h.drain(c).bytes);
    last(&mut h, c, id, b"");
    bytes.extend(h.drain(c).bytes);
    let want =
        format!("{}3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n", head200("", "text/plain", "Transfer-Encoding: chunked\r\n"));
    assert!(bytes.starts_with(want.as_bytes()), "{:?}", String::from_utf8_lossy(&bytes));
    let r = parse_responses(&bytes[want.len()..], &|_| false);
    assert_eq!((r.len(), r[0].body.as_slice()), (1, &b"body { color: #222 }\n"[..]));
}
