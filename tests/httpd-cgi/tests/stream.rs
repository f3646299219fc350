//! `/cgi-bin/stream` through httpd, as the two components run it: the
//! program's messages cross the `cgi_api::wire` reply format, httpd sends
//! them on as chunks while a client reads at its own pace, and the cgi
//! sends only what the credits httpd gives back allow.

use cgi_api::wire::{decode_control, decode_reply, reply_tag, Control, Reply, STREAM_WINDOW};
use httpd::testing::*;
use httpd::Action;
use httpd_cgi_tests::programs;
use iolite::{SliceDesc, FLAG_EOF};

/// The text of `/cgi-bin/stream` by its definition (64-byte lines).
fn text(seed: u64, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..size.div_ceil(64) as u64 {
        out.extend_from_slice(format!("{:016x} ", i * 64).as_bytes());
        out.extend(std::iter::repeat_n(b'a' + ((i + seed) % 26) as u8, 46));
        out.push(b'\n');
    }
    out.truncate(size);
    out
}

/// Decodes a chunked body: (data, chunk sizes, whether the last chunk came).
fn dechunk(mut b: &[u8]) -> (Vec<u8>, Vec<usize>, bool) {
    let (mut data, mut sizes) = (Vec::new(), Vec::new());
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return (data, sizes, false) };
        let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap(), 16).unwrap();
        b = &b[eol + 2..];
        if n == 0 {
            assert_eq!(b, b"\r\n", "nothing after the last chunk but its CRLF");
            return (data, sizes, true);
        }
        assert!(b.len() >= n + 2 && &b[n..n + 2] == b"\r\n", "chunk of {n} ends with CRLF");
        data.extend_from_slice(&b[..n]);
        sizes.push(n);
        b = &b[n + 2..];
    }
}

#[test]
fn a_stream_reaches_a_slow_client_in_chunks_within_its_window() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    let c = h.connect();
    h.send(c, b"GET /cgi-bin/stream?size=300000&parts=3&delay_ms=100&seed=2 HTTP/1.1\r\nHost: t\r\n\r\n");
    let call = h.drain(c).cgi.pop().expect("a CGI call");
    let (msg, tag) = cgi_api::wire::encode_request(d, HTTPD_POOL, call.id, &call.env, None).unwrap();
    let (id, env, body) = cgi_api::wire::decode_request(msg, tag).unwrap();
    let now = h.now.get();
    let cgi::Started::Stream(mut s) = progs.start(&env, body, &cgi::Counters::default(), now, true).unwrap() else {
        panic!("a stream")
    };
    // The cgi's side: its window, and what it sent (to check references).
    let mut credit = STREAM_WINDOW;
    let mut sent_descs: Vec<SliceDesc> = Vec::new();
    let (mut wire, mut pulls, mut most_waiting, mut messages) = (Vec::new(), 0usize, 0usize, 0usize);
    let mut ended = false;
    while !ended {
        // The cgi: every message that is due and has credit.
        while credit > 0 && s.due_ms().is_some_and(|t| t <= h.now.get()) {
            let (m, last) = progs.stream_next(&mut s).unwrap();
            let (tag, flags) = (reply_tag(id, !last), if last { FLAG_EOF } else { 0 });
            sent_descs.extend(m.descs().iter().filter(|x| x.pool == CGI_POOL && x.len > 1000));
            credit -= 1;
            messages += 1;
            match decode_reply(tag, flags) {
                (i, Reply::Part) => h.srv.cgi_part(c, i, m).expect("within the window"),
                (i, Reply::Last) => h.srv.cgi_reply(c, i, Ok(m)),
                (_, Reply::Failed | Reply::InputCredit(_)) => unreachable!(),
            }
        }
        // A slow client: one send taken per 10 ms.
        match h.srv.next(c) {
            Some(Action::Send(a)) => {
                pulls += 1;
                wire.extend(bytes(&a));
                let sent: Vec<SliceDesc> = a.descs().to_vec();
                for x in sent.iter().filter(|x| x.pool == CGI_POOL && x.len > 1000) {
                    assert!(sent_descs.iter().any(|y| y.buf == x.buf), "the cgi's own buffer, by reference");
                }
            }
            Some(Action::Close) => panic!("closed"),
            Some(Action::Cgi(_) | Action::CgiBody { .. }) => panic!("another CGI call"),
            None => ended = s.due_ms().is_none() && !h.srv.has_output(c),
        }
        // (pulls counts the header too: at most one under.)
        most_waiting = most_waiting.max(messages.saturating_sub(pulls));
        // httpd's credits back to the cgi, over the wire format.
        for ctl in h.srv.take_cgi_controls() {
            match decode_control(cgi_api::wire::control_tag(ctl)) {
                Control::Credit { id: i, parts } if i == id => credit = (credit + parts).min(STREAM_WINDOW),
                other => panic!("{other:?}"),
            }
        }
        h.advance(10);
    }
    let r = String::from_utf8_lossy(&wire);
    let (head, chunked) = r.split_once("\r\n\r\n").expect("a header");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(head.contains("\r\nTransfer-Encoding: chunked"));
    assert!(!head.contains("Content-Length"));
    let (data, sizes, complete) = dechunk(&wire[head.len() + 4..]);
    assert!(complete, "{}", &chunked[chunked.len().saturating_sub(40)..]);
    assert_eq!(data, text(2, 300000));
    // Each message one chunk: three parts of 100000 bytes, in 32 KiB pieces.
    assert_eq!(sizes.len(), 12);
    assert!(sizes.iter().all(|&n| n <= cgi::stream::MESSAGE_BYTES));
    // Never more than the window waited: a message is sent only on credit.
    assert!(most_waiting <= STREAM_WINDOW as usize + 1, "{most_waiting} waited");
    assert!(most_waiting >= 2, "the client was the slower one: parts waited for it");
    assert_eq!(d.stats().bytes_copied, 0, "the text went from the cgi's pool to the wire by reference");
    assert!(!h.srv.is_closing(c));
}
