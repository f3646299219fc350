//! A CGI request through httpd and the real echo program: the request
//! leaves as a `CgiCall`, crosses the `cgi_api::wire` format, runs, and its
//! output goes back out; the POST body and the output stay by reference.

use httpd::testing::*;
use httpd_cgi_tests::programs;
use iolite::SliceDesc;

#[test]
fn cgi_round_trip_by_reference() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    let c = h.connect();
    let body = make(d, NET_POOL, b"name=iolite");
    let body_desc = body.descs()[0];
    let head = make(
        d,
        NET_POOL,
        b"POST /cgi-bin/echo/extra?x=1 HTTP/1.1\r\nHost: iolite.local:8080\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\n",
    );
    h.srv.receive(c, head);
    h.srv.receive(c, body);
    let mut dr = h.drain(c);
    let call = dr.cgi.pop().expect("a CGI call");
    let e = &call.env;
    for (k, v) in [
        ("REQUEST_METHOD", "POST"),
        ("SCRIPT_NAME", "/cgi-bin/echo"),
        ("PATH_INFO", "/extra"),
        ("QUERY_STRING", "x=1"),
        ("CONTENT_LENGTH", "11"),
        ("CONTENT_TYPE", "application/x-www-form-urlencoded"),
        ("REMOTE_ADDR", "10.0.2.2"),
        ("REMOTE_PORT", "40000"),
        ("SERVER_NAME", "iolite.local"),
        ("SERVER_PORT", "80"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("HTTP_HOST", "iolite.local:8080"),
    ] {
        assert_eq!(e.get_str(k), Some(v), "{k}");
    }
    let body = call.body.unwrap();
    assert_eq!(body.descs(), &[body_desc], "the POST body is passed by reference");
    // Over the wire format and back, then run the program.
    let (msg, tag) = cgi_api::wire::encode_request(d, HTTPD_POOL, call.id, &call.env, Some(body)).unwrap();
    let (id, env, body) = cgi_api::wire::decode_request(msg, tag).unwrap();
    let out = progs.run(&env, body, &cgi::Counters::default()).unwrap();
    let out_descs = out.descs().to_vec();
    assert!(!h.srv.holds_output(c), "nothing to send while the CGI runs");
    h.srv.cgi_reply(c, id, Ok(out));
    // The reply is in memory: a server short of buffers must still send it.
    assert!(h.srv.holds_output(c));
    let dr = h.drain(c);
    assert!(!h.srv.holds_output(c), "all sent");
    let r = parse_responses(&dr.bytes, &|_| false);
    assert_eq!(r[0].status, 200);
    assert_eq!(r[0].header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r[0].header("Cache-Control"), Some("no-store"));
    assert!(r[0].body.ends_with(b"name=iolite"));
    let sent: Vec<SliceDesc> = dr.sends.iter().flat_map(|a| a.descs().to_vec()).collect();
    assert_eq!(sent.last(), out_descs.last(), "the echoed body went out as the same slice");
    assert_eq!(sent.last().unwrap().buf, body_desc.buf);
    assert_eq!(d.stats().bytes_copied, 0, "CGI in and out without payload copies");
    assert!(!dr.closed);
}
