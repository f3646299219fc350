//! The real `/cgi-bin/tee` through httpd, as the two components run it:
//! the program passes its body back as it reads it (each part is its next
//! output message, by reference, sent on output credit and credited back
//! once it went), while the client uploads 1 MiB chunked and reads its
//! answer slowly through a small window. httpd's send side is full most of
//! the time (`Harness::pump` pulls as the component does: only body parts
//! while the transport is full), and the body must keep flowing as the
//! program credits it; the answer is the body, byte for byte.

use std::collections::VecDeque;

use cgi_api::wire::{
    body_part_tag, decode_control, decode_input, decode_reply, encode_request_more, input_credit_tag, reply_tag,
    Control, Input, Reply, INPUT_WINDOW, STREAM_WINDOW,
};
use httpd::testing::*;
use httpd_cgi_tests::programs;
use iolite::{Aggregate, FLAG_EOF};

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

/// Decodes a chunked body: (data, whether the last chunk came).
fn dechunk(mut b: &[u8]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return (data, false) };
        let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap(), 16).unwrap();
        b = &b[eol + 2..];
        if n == 0 {
            return (data, b == b"\r\n");
        }
        if b.len() < n + 2 {
            return (data, false);
        }
        assert_eq!(&b[n..n + 2], b"\r\n", "chunk of {n} ends with CRLF");
        data.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

#[test]
fn tee_passes_an_upload_back_to_a_client_that_reads_slowly_while_it_sends() {
    let d = domain();
    let mut h = Harness::new(d);
    let mut progs = programs(d);
    let body = random(1 << 20, 0x2545_f491_4f6c_dd1d);
    let mut input = b"POST /cgi-bin/tee HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in body.chunks(10_000) {
        input.extend(format!("{:x}\r\n", piece.len()).as_bytes());
        input.extend(piece);
        input.extend(b"\r\n");
    }
    input.extend(b"0\r\n\r\n");
    let c = h.connect();
    // The transport: 32 KiB the client has not read; it reads 2 KiB a round.
    let mut wire = Wire::new(32 * 1024);
    let mut dr = Drained::new();
    // The cgi's side of the tee (as the component's `Teeing`).
    let (mut id, mut credit) = (0u32, STREAM_WINDOW);
    let mut out: VecDeque<(Aggregate, bool, bool)> = VecDeque::new();
    let (mut held, mut most_held, mut ended) = (0u32, 0u32, false);
    // Rounds in which body parts went to the cgi while the transport was
    // full: the case that used to stall.
    let mut parts_while_full = 0;
    let mut off = 0;
    let copied = d.stats().bytes_copied;
    for round in 0..200_000 {
        if off < input.len() && !h.srv.input_paused(c) {
            let n = 4096.min(input.len() - off);
            h.send(c, &input[off..off + n]);
            off += n;
        }
        let full = wire.full();
        let parts_before = dr.body_parts.len();
        h.pump(c, &mut wire, &mut dr);
        if full && dr.body_parts.len() > parts_before {
            parts_while_full += 1;
        }
        if let Some(call) = dr.cgi.pop() {
            let (msg, tag) = encode_request_more(d, HTTPD_POOL, call.id, &call.env, call.body, call.more).unwrap();
            let Input::Request { more, .. } = decode_input(tag) else { panic!("a request") };
            assert!(more, "1 MiB streams");
            let (i, env, first) = cgi_api::wire::decode_request(msg, tag).unwrap();
            let cgi::Started::Tee(m) = progs.start(&env, first, &cgi::Counters::default(), 0, false).unwrap() else {
                panic!("a tee")
            };
            id = i;
            held += 1;
            out.push_back((m, false, true));
        }
        for (i, part, more) in dr.body_parts.drain(..) {
            let Input::Part { id: i, more } = decode_input(body_part_tag(i, more)) else { panic!("a part") };
            assert_eq!(i, id);
            held += u32::from(more);
            out.push_back((progs.tee_part(part), !more, more));
        }
        most_held = most_held.max(held);
        for ctl in h.srv.take_cgi_controls() {
            match decode_control(cgi_api::wire::control_tag(ctl)) {
                Control::Credit { id: i, parts } if i == id => credit = (credit + parts).min(STREAM_WINDOW),
                other => panic!("unexpected {other:?}"),
            }
        }
        // The program writes what it has credit for; each part it wrote is
        // credited back.
        while credit > 0 {
            let Some((m, last, credit_due)) = out.pop_front() else { break };
            credit -= 1;
            let (tag, flags) = (reply_tag(id, !last), if last { FLAG_EOF } else { 0 });
            match decode_reply(tag, flags) {
                (i, Reply::Part) => h.srv.cgi_part(c, i, m).expect("within the window"),
                (i, Reply::Last) => h.srv.cgi_reply(c, i, Ok(m)),
                (_, other) => unreachable!("{other:?}"),
            }
            if credit_due {
                let (i, Reply::InputCredit(n)) = decode_reply(input_credit_tag(id, 1), 0) else { unreachable!() };
                held -= n;
                // False once the last part went (late credits are ignored).
                h.srv.cgi_input_credit(c, i, n);
            }
        }
        // The client reads a little.
        wire.held = wire.held.saturating_sub(2048);
        h.advance(1);
        if round % 100 == 0 {
            h.srv.tick();
        }
        assert!(!dr.closed, "closed after {round} rounds");
        if wire.held == 0 {
            let split = dr.bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
            if let Some(s) = split {
                let (got, last) = dechunk(&dr.bytes[s..]);
                if last {
                    assert_eq!(got.len(), body.len());
                    assert!(got == body, "the answer is the body, byte for byte");
                    ended = true;
                    break;
                }
            }
        }
    }
    assert!(ended, "the answer ended");
    let head = String::from_utf8_lossy(&dr.bytes[..dr.bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap()]);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\nContent-Type: application/octet-stream\r\n"), "{head}");
    assert!(head.ends_with("\r\nTransfer-Encoding: chunked"), "{head}");
    assert!(most_held <= INPUT_WINDOW, "at most the window at the cgi ({most_held})");
    assert!(parts_while_full > 10, "body parts went while the send side was full ({parts_while_full} rounds)");
    // By reference, but for the chunked body that came with the call (it
    // crossed `max_body` in 4 KiB segments: more slices than one
    // aggregate holds, flattened once and counted).
    let st = h.srv.stats();
    assert!(st.body_bytes_flattened <= 64 * 1024 + 10_000);
    assert_eq!(d.stats().bytes_copied - copied, st.body_bytes_flattened, "nothing else copied");
    assert_eq!((st.cgi_uploads, st.cgi_uploads_aborted, st.cgi_streams_aborted, st.send_timeouts), (1, 0, 0, 0));
    assert_eq!(progs.stats().tee_bytes, body.len() as u64);
}
