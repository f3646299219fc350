//! A large chunked POST through httpd to the real `/cgi-bin/upload`, as
//! the two components run it: the call and the body parts cross the
//! `cgi_api::wire` request format, the program consumes each part as it
//! comes and credits it back (an input credit on the reply format), and
//! the client sends only while httpd reads (`input_paused`). Its answer
//! is the body's length and SHA-256. Then `/cgi-bin/echo`, a program that
//! does not read a streamed body: it answers at once and the rest of the
//! body is discarded.

use cgi_api::wire::{
    body_part_tag, decode_input, decode_reply, encode_request_more, input_credit_tag, Input, Reply, INPUT_WINDOW,
};
use httpd::testing::*;
use httpd::Action;
use httpd_cgi_tests::programs;
use iolite::FLAG_EOF;
use sha2::{Digest, Sha256};

fn random(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `body` framed chunked in chunks of odd sizes.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let sizes = [1usize, 4095, 70_000, 13, 65_536, 100_003];
    let (mut off, mut i) = (0, 0);
    while off < body.len() {
        let n = sizes[i % sizes.len()].min(body.len() - off);
        out.extend(format!("{n:x}\r\n").as_bytes());
        out.extend(&body[off..off + n]);
        out.extend(b"\r\n");
        off += n;
        i += 1;
    }
    out.extend(b"0\r\n\r\n");
    out
}

#[test]
fn a_large_chunked_body_reaches_the_upload_program_in_parts() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    let body = random(2 << 20, 0x9e37_79b9_7f4a_7c15);
    let mut wire = b"POST /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    wire.extend(chunked(&body));
    wire.extend(b"GET /sub/note.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let c = h.connect();
    let mut upload = None;
    let mut id = 0;
    let mut out = Vec::new();
    let (mut off, mut seg) = (0, 0usize);
    let (mut credits_due, mut most_held) = (0u32, 0u32);
    let mut done = false;
    for _ in 0..100_000 {
        // The client: segments of varying size, while httpd reads.
        if off < wire.len() && !h.srv.input_paused(c) {
            let n = [1460usize, 7, 32_768, 9000][seg % 4].min(wire.len() - off);
            h.send(c, &wire[off..off + n]);
            off += n;
            seg += 1;
        }
        // httpd's side.
        while let Some(a) = h.srv.next(c) {
            match a {
                Action::Send(a) => out.extend(bytes(&a)),
                Action::Close => panic!("closed"),
                Action::Cgi(call) => {
                    let (msg, tag) =
                        encode_request_more(d, HTTPD_POOL, call.id, &call.env, call.body, call.more).unwrap();
                    let Input::Request { id: i, more } = decode_input(tag) else { panic!("a request") };
                    assert!(more, "2 MiB streams");
                    let (_, env, first) = cgi_api::wire::decode_request(msg, tag).unwrap();
                    assert_eq!(env.get_str("CONTENT_LENGTH"), None, "chunked: no length");
                    let cgi::Started::Upload(u) =
                        progs.start(&env, first, &cgi::Counters::default(), 0, false).unwrap()
                    else {
                        panic!("an upload")
                    };
                    upload = Some(u);
                    id = i;
                    credits_due += 1;
                }
                Action::CgiBody { id: i, part, more } => {
                    let tag = body_part_tag(i, more);
                    let Input::Part { id: i, more } = decode_input(tag) else { panic!("a part") };
                    assert_eq!(i, id);
                    progs.upload_feed(upload.as_mut().unwrap(), &part);
                    if more {
                        credits_due += 1;
                    } else {
                        let out = progs.upload_finish(upload.take().unwrap()).unwrap();
                        assert_eq!(decode_reply(cgi_api::wire::reply_tag(id, false), FLAG_EOF), (id, Reply::Last));
                        h.srv.cgi_reply(c, id, Ok(out));
                    }
                }
            }
        }
        most_held = most_held.max(credits_due);
        // The program consumed what it was given: credits back, over the
        // reply format, one message per round.
        if credits_due > 0 {
            let (i, kind) = decode_reply(input_credit_tag(id, credits_due), 0);
            let Reply::InputCredit(n) = kind else { panic!("{kind:?}") };
            credits_due -= n;
            h.srv.cgi_input_credit(c, i, n);
        }
        let r = parse_responses(&out, &|_| false);
        if r.len() == 2 {
            done = true;
            let want = format!("length: {}\nsha256: {:x}\n", body.len(), Sha256::digest(&body));
            assert_eq!(String::from_utf8_lossy(&r[0].body), want);
            assert_eq!(r[1].body, b"a note in a subdirectory\n");
            break;
        }
    }
    assert!(done, "answered");
    assert!(most_held <= INPUT_WINDOW, "at most the window at the cgi ({most_held})");
    let st = h.srv.stats();
    assert_eq!((st.cgi_uploads, st.body_bytes_flattened, st.cgi_upload_discarded_bytes), (1, 0, 0));
    assert_eq!(progs.stats().upload_bytes, body.len() as u64);
}

#[test]
fn a_program_that_does_not_read_a_streamed_body_answers_and_the_rest_is_dropped() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    let body = random(300_000, 7);
    let c = h.connect();
    h.send(c, format!("POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
    let call = h.drain(c).cgi.pop().expect("the call");
    assert!(call.more);
    let (msg, tag) = encode_request_more(d, HTTPD_POOL, call.id, &call.env, call.body, call.more).unwrap();
    let (id, env, first) = cgi_api::wire::decode_request(msg, tag).unwrap();
    let out = progs.run(&env, first, &cgi::Counters::default()).unwrap();
    h.srv.cgi_reply(c, id, Ok(out));
    let mut sent = h.drain(c).bytes;
    for seg in body.chunks(50_000) {
        h.send(c, seg);
        let dr = h.drain(c);
        assert!(dr.body_parts.is_empty(), "nothing more for a program that answered");
        sent.extend(dr.bytes);
    }
    h.send(c, b"GET /sub/note.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    sent.extend(h.drain(c).bytes);
    let r = parse_responses(&sent, &|_| false);
    assert_eq!(r.len(), 2);
    let text = String::from_utf8_lossy(&r[0].body);
    assert!(text.contains("CONTENT_LENGTH=300000\n") && text.contains("body: 0 bytes"), "{text}");
    assert_eq!(r[1].body, b"a note in a subdirectory\n");
    assert_eq!(h.srv.stats().cgi_upload_discarded_bytes, body.len() as u64);
}
