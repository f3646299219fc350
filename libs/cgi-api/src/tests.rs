//! Host tests of the protocol: meta-variables, the output format, the
//! messages, the counter pages and the restart generation.

use std::string::String;
use std::vec::Vec;

use iolite::testing::{domain, make, own};
use iolite::{Domain, PoolId};

use crate::output::{parse_output, split_head, split_output, Head, Kind, OutputError};
use crate::wire::{
    control_tag, decode_control, decode_reply, decode_request, encode_request, reply_tag, Control, Reply, REPLY_MORE,
};
use crate::{Env, EnvError, Failure, RequestInfo};

const CGI_POOL: PoolId = 7;
const NET_POOL: PoolId = 3;

fn setup() -> &'static Domain {
    let d = domain();
    own(d, CGI_POOL, 64);
    own(d, NET_POOL, 64);
    d
}

fn info<'a>(headers: &'a [(&'a str, &'a [u8])], body: Option<u64>) -> RequestInfo<'a> {
    RequestInfo {
        method: if body.is_some() { "POST" } else { "GET" },
        script_name: "/cgi-bin/echo",
        path_info: "/extra/path",
        query: "a=1&b=%20x",
        protocol: "HTTP/1.1",
        headers,
        remote_addr: "10.0.2.2",
        remote_port: 40000,
        server_name: "iolite.local",
        server_port: 80,
        server_software: "Iolite-httpd/0.1",
        content_length: body,
    }
}

#[test]
fn meta_variables_follow_rfc_3875() {
    let headers: [(&str, &[u8]); 8] = [
        ("Host", b"iolite.local"),
        ("User-Agent", b"test/1"),
        ("Accept", b"text/html"),
        ("accept", b"*/*"),
        ("Content-Type", b"application/x-www-form-urlencoded"),
        ("Authorization", b"Basic secret"),
        ("Proxy", b"http://evil/"),
        ("X_Spoof", b"1"),
    ];
    let e = Env::from_request(&info(&headers, Some(11)));
    let g = |n| e.get_str(n);
    assert_eq!(g("GATEWAY_INTERFACE"), Some("CGI/1.1"));
    assert_eq!(g("REQUEST_METHOD"), Some("POST"));
    assert_eq!(g("SCRIPT_NAME"), Some("/cgi-bin/echo"));
    assert_eq!(g("PATH_INFO"), Some("/extra/path"));
    assert_eq!(g("QUERY_STRING"), Some("a=1&b=%20x"));
    assert_eq!(g("REMOTE_ADDR"), Some("10.0.2.2"));
    assert_eq!(g("REMOTE_PORT"), Some("40000"));
    assert_eq!(g("SERVER_NAME"), Some("iolite.local"));
    assert_eq!(g("SERVER_PORT"), Some("80"));
    assert_eq!(g("SERVER_PROTOCOL"), Some("HTTP/1.1"));
    assert_eq!(g("SERVER_SOFTWARE"), Some("Iolite-httpd/0.1"));
    assert_eq!(g("CONTENT_LENGTH"), Some("11"));
    assert_eq!(g("CONTENT_TYPE"), Some("application/x-www-form-urlencoded"));
    assert_eq!(g("HTTP_HOST"), Some("iolite.local"));
    assert_eq!(g("HTTP_USER_AGENT"), Some("test/1"));
    assert_eq!(g("HTTP_ACCEPT"), Some("text/html, */*"), "repeated fields are joined");
    for hidden in ["HTTP_AUTHORIZATION", "HTTP_PROXY", "HTTP_X_SPOOF", "HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"] {
        assert_eq!(g(hidden), None, "{hidden} must not be passed");
    }
    // Without a body there is no CONTENT_LENGTH / CONTENT_TYPE.
    let e = Env::from_request(&info(&headers, None));
    assert_eq!(e.get("CONTENT_LENGTH"), None);
    assert_eq!(e.get("CONTENT_TYPE"), None);
    assert_eq!(e.get_str("REQUEST_METHOD"), Some("GET"));
}

#[test]
fn env_wire_round_trip_and_rejects_garbage() {
    let headers: [(&str, &[u8]); 2] = [("Host", b"h"), ("X-Bin", b"caf\xc3\xa9 \xff")];
    let e = Env::from_request(&info(&headers, Some(3)));
    let enc = e.encode();
    assert_eq!(Env::decode(&enc).unwrap(), e);
    assert_eq!(Env::decode(b"").unwrap(), Env::new());
    assert_eq!(Env::decode(b"A=1"), Err(EnvError::Malformed), "missing NUL");
    assert_eq!(Env::decode(b"noequals\0"), Err(EnvError::Malformed));
    assert_eq!(Env::decode(b"lower=1\0"), Err(EnvError::Malformed));
    assert_eq!(Env::decode(b"=1\0"), Err(EnvError::Malformed));
    let many: Vec<u8> = (0..200).flat_map(|i| format!("V{i}=x\0").into_bytes()).collect();
    assert_eq!(Env::decode(&many), Err(EnvError::TooLarge));
    assert_eq!(Env::decode(&vec![b'A'; 20000]), Err(EnvError::TooLarge));
}

#[test]
fn output_document_status_and_fields() {
    let o = parse_output(
        b"Content-Type: text/html\r\nX-Thing: 1\r\nConnection: close\r\nContent-Length: 99\r\n\r\nbody",
        30 + 63,
    )
    .unwrap();
    assert_eq!(o.kind, Kind::Document);
    assert_eq!(o.status, 200);
    assert_eq!(o.reason, None, "the server sends the standard phrase");
    assert_eq!(o.content_type.as_deref(), Some("text/html"));
    assert_eq!(o.fields, vec![("X-Thing".into(), "1".into())], "framing fields are the server's");
    assert_eq!(o.content_length, Some(99), "read, for a streamed body's framing");
    // LF line ends are accepted (RFC 3875 NL), and Status sets the code.
    let text = b"Status: 404 Nope\nContent-Type: text/plain\n\nmissing";
    let o = parse_output(text, text.len()).unwrap();
    assert_eq!((o.status, o.reason.as_deref()), (404, Some("Nope")));
    assert_eq!(o.header_len, text.len() - 7);
    // Status alone with no body is fine (no Content-Type needed).
    let o = parse_output(b"Status: 204\r\n\r\n", 15).unwrap();
    assert_eq!((o.status, o.reason.as_deref()), (204, None));
}

#[test]
fn output_redirects() {
    let t = b"Location: /index.html\r\n\r\n";
    let o = parse_output(t, t.len()).unwrap();
    assert_eq!(o.kind, Kind::LocalRedirect("/index.html".into()));
    let t = b"Location: http://example.org/x\r\n\r\n";
    let o = parse_output(t, t.len()).unwrap();
    assert_eq!(o.kind, Kind::ClientRedirect("http://example.org/x".into()));
    assert_eq!(o.status, 302);
    assert!(o.fields.contains(&("Location".into(), "http://example.org/x".into())));
    let t = b"Location: https://e/\r\nStatus: 301 Moved\r\nContent-Type: text/html\r\n\r\n<a>moved</a>";
    let o = parse_output(t, t.len()).unwrap();
    assert_eq!((o.status, o.kind.clone()), (301, Kind::ClientRedirect("https://e/".into())));
    // A local redirect must be alone.
    let t = b"Location: /x\r\nStatus: 200\r\n\r\n";
    assert_eq!(parse_output(t, t.len()), Err(OutputError::BadLocalRedirect));
    let t = b"Location: /x\r\n\r\nbody";
    assert_eq!(parse_output(t, t.len()), Err(OutputError::BadLocalRedirect));
    let t = b"Location: relative\r\n\r\n";
    assert_eq!(parse_output(t, t.len()), Err(OutputError::BadLocation));
    let t = b"Location: //host/x\r\n\r\n";
    assert_eq!(parse_output(t, t.len()), Err(OutputError::BadLocation));
}

#[test]
fn output_errors() {
    let cases: &[(&[u8], OutputError)] = &[
        (b"Content-Type: text/html\r\n", OutputError::NoHeaderEnd),
        (b"no colon here\r\n\r\n", OutputError::BadField),
        (b"Bad Name: x\r\n\r\n", OutputError::BadField),
        (b"X: a\x01b\r\n\r\n", OutputError::BadField),
        (b"Status: 99 Low\r\nContent-Type: a/b\r\n\r\n", OutputError::BadStatus),
        (b"Status: 600\r\nContent-Type: a/b\r\n\r\n", OutputError::BadStatus),
        (b"Status: 100 Continue\r\nContent-Type: a/b\r\n\r\n", OutputError::BadStatus),
        (b"Status: abc\r\nContent-Type: a/b\r\n\r\n", OutputError::BadStatus),
        (b"Status: 200\r\nStatus: 404\r\nContent-Type: a/b\r\n\r\n", OutputError::Duplicate),
        (b"Content-Type: a/b\r\nContent-Type: c/d\r\n\r\n", OutputError::Duplicate),
        (b"X-A: 1\r\n\r\nbody", OutputError::MissingContentType),
        (b"Content-Type: a/b\r\nContent-Length: 1x\r\n\r\n", OutputError::BadField),
        (b"Content-Type: a/b\r\nContent-Length: -1\r\n\r\n", OutputError::BadField),
        (b"Content-Type: a/b\r\nContent-Length: 1234567890123456789\r\n\r\n", OutputError::BadField),
        (b"Content-Type: a/b\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", OutputError::Duplicate),
        (b"\r\n", OutputError::MissingContentType),
    ];
    for (t, want) in cases {
        assert_eq!(parse_output(t, t.len() + 4), Err(*want), "{:?}", String::from_utf8_lossy(t));
    }
    let many: Vec<u8> =
        (0..40).flat_map(|i| format!("X-{i}: v\r\n").into_bytes()).chain(b"\r\n".iter().copied()).collect();
    assert_eq!(parse_output(&many, many.len()), Err(OutputError::TooManyFields));
    let huge: Vec<u8> = std::iter::repeat_n(b'a', 9000).collect();
    assert_eq!(parse_output(&huge, huge.len()), Err(OutputError::NoHeaderEnd));
}

#[test]
fn split_output_passes_the_body_by_reference() {
    let d = setup();
    let head = make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\n");
    let body = make(d, CGI_POOL, &[b'x'; 10000]);
    let body_desc = body.descs()[0];
    let mut out = head;
    out.append(body).map_err(|(e, _)| e).unwrap();
    let before = d.stats().bytes_copied;
    let (o, rest, copied) = split_output(out).unwrap();
    assert_eq!(o.content_type.as_deref(), Some("text/plain"));
    assert_eq!(rest.len(), 10000);
    assert_eq!(rest.descs(), &[body_desc], "the same slice, not a copy");
    assert_eq!(d.stats().bytes_copied, before);
    assert_eq!(copied, 28, "only the header is copied to be parsed");
}

#[test]
fn split_output_copies_only_the_header_whatever_the_slices() {
    let d = setup();
    let text = b"Status: 201 Made\nContent-Type: text/plain\r\n\r\nbody bytes, and more of them";
    let hlen = text.iter().position(|&b| b == b'b').unwrap();
    // Every way of cutting the output into two or three slices.
    for a in 1..text.len() {
        for b in [a, (a + 7).min(text.len() - 1), text.len() - 1] {
            if b < a {
                continue;
            }
            let mut out = make(d, CGI_POOL, &text[..a]);
            if b > a {
                out.append(make(d, CGI_POOL, &text[a..b])).map_err(|(e, _)| e).unwrap();
            }
            out.append(make(d, CGI_POOL, &text[b..])).map_err(|(e, _)| e).unwrap();
            let (o, rest, copied) = split_output(out).unwrap();
            assert_eq!((o.status, copied), (201, hlen), "cut at {a}, {b}");
            assert!(rest.eq_bytes(&text[hlen..]));
        }
    }
    // No header end: at most MAX_OUTPUT_HEADER bytes looked at, an error.
    let out = make(d, CGI_POOL, &[b'a'; 9000]);
    assert_eq!(split_output(out).err(), Some(OutputError::NoHeaderEnd));
}

#[test]
fn request_message_round_trip() {
    let d = setup();
    let headers: [(&str, &[u8]); 1] = [("Host", b"h")];
    let env = Env::from_request(&info(&headers, Some(5)));
    let body = make(d, NET_POOL, b"abcde");
    let bd = body.descs()[0];
    let (msg, tag) = encode_request(d, CGI_POOL, 42, &env, Some(body)).unwrap();
    let (id, env2, body2) = decode_request(msg, tag).unwrap();
    assert_eq!(id, 42);
    assert_eq!(env2, env);
    let body2 = body2.unwrap();
    assert_eq!(body2.descs(), &[bd]);
    let (msg, tag) = encode_request(d, CGI_POOL, 7, &env, None).unwrap();
    let (_, _, none) = decode_request(msg, tag).unwrap();
    assert!(none.is_none());
    // A lying tag is refused.
    let msg = make(d, CGI_POOL, b"A=1\0");
    assert!(decode_request(msg, crate::wire::request_tag(1, 99)).is_err());
}

#[test]
fn failures_map_to_gateway_statuses() {
    assert_eq!(Failure::Timeout.status(), 504);
    assert_eq!(Failure::Fault.status(), 502);
    assert_eq!(Failure::BadOutput(OutputError::NoHeaderEnd).status(), 502);
    assert_eq!(Failure::Unavailable.status(), 503);
}

#[test]
fn the_restart_generation() {
    use crate::chan;
    // The restart generation: each start of the cgi initialises the
    // region afresh, and httpd sees the number change.
    let region = iolite::testing::region(chan::REGION_BYTES);
    // SAFETY: a fresh region used only here.
    unsafe {
        let ctl = iolite::duplex::Control::of(region, chan::GEOMETRY).unwrap();
        assert_eq!(ctl.generation(), 0);
        assert_eq!(iolite::init_duplex(region, chan::GEOMETRY), Ok(1));
        assert_eq!(iolite::init_duplex(region, chan::GEOMETRY), Ok(2));
        assert_eq!(ctl.generation(), 2);
    }
    assert_eq!(chan::B_OFF, chan::CHANNEL_BYTES, "the hostile test hook writes channel B's head there");
    const { assert!(chan::REGION_BYTES <= 0x20000) };
}

#[test]
fn split_head_waits_for_the_end_of_the_header() {
    let d = setup();
    let text = b"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
    let hlen = text.len() - 5;
    // Cut anywhere: before the header's end it is handed back untouched
    // (nothing copied), from there on it parses, with the body so far.
    for cut in 1..=text.len() {
        match split_head(make(d, CGI_POOL, &text[..cut])).unwrap() {
            Head::Incomplete(a) => {
                assert!(cut < hlen, "cut at {cut}");
                assert!(a.eq_bytes(&text[..cut]));
            }
            Head::Done(o, body, copied) => {
                assert!(cut >= hlen, "cut at {cut}");
                assert_eq!((o.content_length, copied), (Some(5), hlen));
                assert!(body.eq_bytes(&text[hlen..cut]));
            }
        }
    }
    // A local redirect whose body has not begun is one; with a body, not.
    let t = b"Location: /x\r\n\r\n";
    assert!(
        matches!(split_head(make(d, CGI_POOL, t)), Ok(Head::Done(o, _, _)) if o.kind == Kind::LocalRedirect("/x".into()))
    );
    let t = b"Location: /x\r\n\r\nb";
    assert_eq!(split_head(make(d, CGI_POOL, t)).err(), Some(OutputError::BadLocalRedirect));
    // No end within 8 KiB: refused, not waited for.
    assert_eq!(split_head(make(d, CGI_POOL, &[b'a'; 8192])).err(), Some(OutputError::NoHeaderEnd));
    assert!(matches!(split_head(make(d, CGI_POOL, &[b'a'; 8191])), Ok(Head::Incomplete(_))));
}

#[test]
fn reply_and_control_messages() {
    use iolite::FLAG_EOF;
    // Replies: whole (as ever), parts, the last part, a failure.
    assert_eq!(decode_reply(reply_tag(7, false), FLAG_EOF), (7, Reply::Last));
    assert_eq!(reply_tag(7, false), 7, "a whole reply's tag is its id, as before streaming");
    assert_eq!(decode_reply(reply_tag(7, true), 0), (7, Reply::Part));
    assert_eq!(decode_reply(reply_tag(u32::MAX, true), 0), (u32::MAX, Reply::Part));
    assert_eq!(decode_reply(reply_tag(7, false), 0), (7, Reply::Failed));
    assert_eq!(decode_reply(7 | REPLY_MORE, FLAG_EOF), (7, Reply::Last), "EOF wins");
    // Controls: credits (at least one) and cancels, any id.
    for id in [0, 1, 0xdead_beef, u32::MAX] {
        for c in [Control::Credit { id, parts: 1 }, Control::Credit { id, parts: 4 }, Control::Cancel { id }] {
            assert_eq!(decode_control(control_tag(c)), c);
        }
    }
    assert_eq!(decode_control(control_tag(Control::Credit { id: 3, parts: 0 })), Control::Credit { id: 3, parts: 1 });
}

#[test]
fn streamed_request_bodies() {
    use crate::wire::{
        body_part_tag, decode_input, encode_request_more, input_credit_tag, Input, BODY_MORE, BODY_PART,
    };
    use iolite::FLAG_EOF;
    let d = setup();
    let env = Env::from_request(&info(&[], None));
    // A request whose body follows: BODY_MORE in its tag, still decodable.
    let body = make(d, NET_POOL, b"first");
    let (msg, tag) = encode_request_more(d, NET_POOL, 9, &env, Some(body), true).unwrap();
    assert_eq!(decode_input(tag), Input::Request { id: 9, more: true });
    let (id, got, b) = decode_request(msg, tag).unwrap();
    assert_eq!((id, got), (9, env.clone()));
    assert_eq!(iolite::testing::bytes(&b.unwrap()), b"first");
    let (_, tag) = encode_request(d, NET_POOL, 9, &env, None).unwrap();
    assert_eq!(decode_input(tag), Input::Request { id: 9, more: false });
    // Body parts: told apart from requests, never decoded as one.
    for id in [0, 9, u32::MAX] {
        for more in [false, true] {
            let t = body_part_tag(id, more);
            assert_eq!(decode_input(t), Input::Part { id, more });
            assert!(decode_request(make(d, NET_POOL, b"xxxx"), t).is_err());
        }
    }
    assert_eq!(body_part_tag(1, true) & (BODY_PART | BODY_MORE), BODY_PART | BODY_MORE);
    // Input credits on the reply channel: not output, not a failure.
    assert_eq!(decode_reply(input_credit_tag(7, 3), 0), (7, Reply::InputCredit(3)));
    assert_eq!(decode_reply(input_credit_tag(u32::MAX, 0), 0), (u32::MAX, Reply::InputCredit(1)));
    assert_eq!(decode_reply(input_credit_tag(7, 3), FLAG_EOF), (7, Reply::Last), "EOF wins");
}
