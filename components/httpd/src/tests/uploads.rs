//! Streamed request bodies: a POST to a CGI program larger than
//! `max_body` goes to the cgi in parts (the client's slices, framing
//! skipped), at most `INPUT_WINDOW` without credit; the parts' bytes,
//! the window, credits, a cgi that never reads, a client that stalls or
//! half-closes, chunked framing split at every position, a cgi death.

use super::*;
use crate::{Control, Limits};
use cgi_api::wire::INPUT_WINDOW;

/// A body whose bytes depend on their offset (and CR/LF and hex digits
/// among them, so a framing mistake shows).
fn body(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"0123456789abcdef\r\n;x"[(i * 7 + i / 300) % 20]).collect()
}

fn post(path: &str, len: usize) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n")
}

/// Everything pulled for `c` as (calls, parts, bytes sent, closed).
struct Pulled<'d> {
    calls: Vec<CgiCall<'d>>,
    parts: Vec<(u32, iolite::Aggregate<'d>, bool)>,
    bytes: Vec<u8>,
    closed: bool,
}

fn pull<'d>(h: &mut Harness<'d>, c: ConnId) -> Pulled<'d> {
    let dr = h.drain(c);
    Pulled { calls: dr.cgi, parts: dr.body_parts, bytes: dr.bytes, closed: dr.closed }
}

fn reply(h: &mut Harness, c: ConnId, id: u32, out: &[u8]) {
    let a = make(h.d, CGI_POOL, out);
    h.srv.cgi_reply(c, id, Ok(a));
}

#[test]
fn a_large_body_goes_in_parts_by_reference_within_the_window() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(300 * 1024);
    h.send(c, post("/cgi-bin/upload", want.len()).as_bytes());
    // The call leaves before any of the body: more follows.
    let mut p = pull(&mut h, c);
    assert!(p.bytes.is_empty() && !p.closed && p.parts.is_empty());
    let call = p.calls.pop().expect("the call");
    assert!(call.more && call.body.is_none());
    assert_eq!(call.env.get_str("CONTENT_LENGTH"), Some("307200"));
    let id = call.id;
    assert_eq!(h.srv.stats().cgi_uploads, 1);
    // The client sends it in 8 KiB segments (as the network delivers)
    // until httpd says to stop reading; the cgi credits nothing yet.
    let copied = d.stats().bytes_copied;
    let mut segs = want.chunks(8192);
    let mut feed = |h: &mut Harness| {
        let mut n = 0;
        while !h.srv.input_paused(c) {
            let Some(seg) = segs.next() else { break };
            h.srv.receive(c, make(d, NET_POOL, seg));
            n += 1;
        }
        n
    };
    assert!(feed(&mut h) > 0);
    let p = pull(&mut h, c);
    // The call holds one slot of the window: three parts more, then none.
    assert_eq!(p.parts.len() as u32, INPUT_WINDOW - 1);
    assert!(p.parts.iter().all(|(i, part, more)| *i == id && *more && part.len() <= crate::PART_MAX));
    assert!(h.srv.input_paused(c), "the window is full: stop reading");
    assert!(h.srv.next(c).is_none());
    let mut got: Vec<u8> = p.parts.iter().flat_map(|(_, a, _)| bytes(a)).collect();
    let mut descs: Vec<SliceDesc> = p.parts.iter().flat_map(|(_, a, _)| a.descs().to_vec()).collect();
    // Credits one at a time: one part each, until the last (no `more`).
    let mut last = false;
    let mut credits = 0;
    while !last {
        assert!(h.srv.cgi_input_credit(c, id, 1));
        credits += 1;
        feed(&mut h);
        let p = pull(&mut h, c);
        assert_eq!(p.parts.len(), 1, "one credit, one part (credit {credits})");
        let (i, a, more) = &p.parts[0];
        assert_eq!(*i, id);
        got.extend(bytes(a));
        descs.extend(a.descs().to_vec());
        last = !more;
    }
    assert!(!h.srv.input_paused(c));
    assert_eq!(got, want, "the body, byte for byte");
    // By reference: the very slices the client's bytes arrived in (split
    // at part boundaries), nothing copied.
    assert_eq!(d.stats().bytes_copied, copied);
    assert!(descs.iter().all(|s| s.pool == NET_POOL), "{descs:?}");
    let st = h.srv.stats();
    assert_eq!((st.body_bytes_flattened, st.request_body_bytes_copied_to_parse), (0, 0));
    assert_eq!(st.cgi_upload_bytes, want.len() as u64);
    // A late credit for the finished body is ignored.
    assert!(!h.srv.cgi_input_credit(c, id, 1));
    // The answer, then the connection goes on.
    reply(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nok");
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status, &r[0].body[..]), (1, 200, &b"ok"[..]));
    let r = h.get("/sub/note.txt");
    assert_eq!(r.status, 200);
}

#[test]
fn limits_a_large_body_only_streams_to_a_cgi() {
    let d = domain();
    let mut h = Harness::new(d);
    // Not to a CGI: the small limit.
    for req in [
        post("/file-1k.txt", 100_000),
        "PUT /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n".to_string(),
    ] {
        let (r, closed) = h.roundtrip(req.as_bytes());
        assert_eq!((r[0].status, closed), (413, true), "{req}");
    }
    // To a CGI: up to max_cgi_body, 413 beyond.
    let (r, closed) = h.roundtrip(post("/cgi-bin/upload", (16 << 20) + 1).as_bytes());
    assert_eq!((r[0].status, closed), (413, true));
    let c = h.connect();
    h.send(c, post("/cgi-bin/upload", 16 << 20).as_bytes());
    assert!(pull(&mut h, c).calls[0].more);
    // A chunked body past the limit: 413 when its size line says so.
    let c = h.connect();
    h.send(c, b"POST /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1000001\r\n");
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r[0].status, p.closed), (413, true));
    // Small bodies are whole, as ever (no `more`).
    let c = h.connect();
    h.send(c, format!("{}{}", post("/cgi-bin/echo", 5), "hello").as_bytes());
    let call = pull(&mut h, c).calls.pop().unwrap();
    assert!(!call.more);
    assert_eq!(bytes(&call.body.unwrap()), b"hello");
}

/// A chunked POST (a body of 300 bytes in odd chunks, extensions, a
/// trailer), then a pipelined GET; `max_body` 100 so that it streams.
fn chunked_input() -> (Vec<u8>, Vec<u8>) {
    let want = body(300);
    let mut input = b"POST /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut off = 0;
    for (i, n) in [1usize, 60, 3, 120, 17, 99].into_iter().enumerate() {
        let line = match i {
            0 => format!("{n:x}\r\n"),
            1 => format!("{n:X};ext=\"a;b\"\r\n"),
            2 => format!("000{n:x}\n"),
            _ => format!("{n:x} ; e = v\r\n"),
        };
        input.extend(line.as_bytes());
        input.extend(&want[off..off + n]);
        input.extend(b"\r\n");
        off += n;
    }
    assert_eq!(off, want.len());
    input.extend(b"0;last\r\nX-Sum: 1\r\n\r\nGET /sub/note.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    (input, want)
}

/// Feeds `pieces` of the input one by one, crediting every part as it
/// comes; the body the cgi got, its CONTENT_LENGTH, and the bytes sent.
fn run_chunked(h: &mut Harness, pieces: &[&[u8]]) -> (Vec<u8>, Option<String>, Vec<u8>) {
    let c = h.connect();
    let mut got = Vec::new();
    let mut id = None;
    let mut cl = None;
    let mut out = Vec::new();
    let mut ended = false;
    for piece in pieces {
        h.send(c, piece);
        loop {
            let p = pull(h, c);
            out.extend(&p.bytes);
            assert!(!p.closed);
            for call in p.calls {
                assert!(id.is_none() && call.more);
                cl = call.env.get_str("CONTENT_LENGTH").map(String::from);
                if let Some(b) = &call.body {
                    got.extend(bytes(b));
                }
                id = Some(call.id);
            }
            let n = p.parts.len() as u32;
            for (i, a, more) in p.parts {
                assert_eq!(Some(i), id);
                assert!(!ended);
                got.extend(bytes(&a));
                ended = !more;
            }
            if n == 0 {
                break;
            }
            // The cgi consumed them (and the call's slot, once).
            h.srv.cgi_input_credit(c, id.unwrap(), n + 1);
        }
    }
    assert!(ended, "the last part came");
    reply(h, c, id.unwrap(), b"Content-Type: text/plain\r\n\r\nok");
    out.extend(pull(h, c).bytes);
    h.srv.closed(c);
    (got, cl, out)
}

#[test]
fn chunked_framing_split_at_every_position_streams_the_exact_body() {
    let d = domain();
    let cfg = Config { limits: Limits { max_body: 100, ..Limits::default() }, ..Config::default() };
    let mut h = Harness::with_config(d, cfg);
    let (input, want) = chunked_input();
    let check = |(got, cl, out): (Vec<u8>, Option<String>, Vec<u8>), what: &str| {
        assert_eq!(got, want, "{what}");
        assert_eq!(cl, None, "no CONTENT_LENGTH for a streamed chunked body ({what})");
        let r = parse_responses(&out, &|_| false);
        assert_eq!(r.len(), 2, "{what}");
        assert_eq!((r[0].status, &r[0].body[..]), (200, &b"ok"[..]), "{what}");
        assert_eq!((r[1].status, &r[1].body[..]), (200, &b"a note in a subdirectory\n"[..]), "{what}");
    };
    check(run_chunked(&mut h, &[&input]), "whole");
    for at in 1..input.len() {
        check(run_chunked(&mut h, &[&input[..at], &input[at..]]), &format!("split at {at}"));
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    check(run_chunked(&mut h, &bytes), "byte by byte");
    let bytes: Vec<&[u8]> = input.chunks(7).collect();
    check(run_chunked(&mut h, &bytes), "7 by 7");
    // The head alone, then the rest: only framing is copied to be
    // parsed (line by line), no chunk data, and nothing is flattened.
    let mut h =
        Harness::with_config(d, Config { limits: Limits { max_body: 100, ..Limits::default() }, ..Config::default() });
    check(run_chunked(&mut h, &[&input[..70], &input[70..]]), "head, then the rest");
    let st = h.srv.stats();
    assert_eq!((st.request_body_bytes_copied_to_parse, st.body_bytes_flattened), (0, 0));
    let framing = input.len() - 70 - want.len();
    assert!(st.request_bytes_copied_to_parse <= (70 + framing) as u64, "{st:?}");
}

#[test]
fn a_cgi_that_answers_before_the_body_ends_gets_no_more_and_the_rest_is_discarded() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(200 * 1024);
    let req = post("/cgi-bin/page", want.len());
    h.send(c, req.as_bytes());
    h.send(c, &want[..10_000]);
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    assert_eq!(p.parts.len(), 1);
    // The program never reads: it answers at once.
    reply(&mut h, c, id, b"Content-Type: text/plain\r\n\r\nno body needed");
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r[0].status, &r[0].body[..]), (200, &b"no body needed"[..]));
    // The rest of the body (no credit ever came) is read and dropped, and
    // the request pipelined behind it is answered.
    for seg in want[10_000..].chunks(30_000) {
        h.send(c, seg);
        let p = pull(&mut h, c);
        assert!(p.parts.is_empty() && p.bytes.is_empty() && p.calls.is_empty());
        assert!(!h.srv.input_paused(c), "discarding never pauses");
    }
    h.send(c, b"GET /sub/note.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert_eq!(h.srv.stats().cgi_upload_discarded_bytes, (want.len() - 10_000) as u64);
}

#[test]
fn a_client_that_stalls_mid_body_gets_408_and_the_cgi_a_cancel() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, post("/cgi-bin/upload", 100_000).as_bytes());
    h.send(c, &body(20_000));
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    h.srv.cgi_input_credit(c, id, 2);
    h.srv.take_cgi_controls();
    // The cgi consumed everything and waits for the client: no 504,
    // however long (its timeout runs only while it holds our parts).
    for _ in 0..9 {
        h.advance(1000);
        assert!(h.srv.tick().is_empty());
    }
    h.advance(1000);
    assert_eq!(h.srv.tick(), vec![c]);
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r[0].status, p.closed), (408, true));
    assert_eq!(h.srv.take_cgi_controls(), vec![Control::Cancel { id }]);
    let st = h.srv.stats();
    assert_eq!((st.cgi_uploads_aborted, st.cgi_timeouts), (1, 0));
}

#[test]
fn a_cgi_that_holds_parts_and_credits_none_times_out() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, post("/cgi-bin/upload", 1 << 20).as_bytes());
    for _ in 0..10 {
        h.send(c, &body(16 * 1024));
    }
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    assert!(h.srv.input_paused(c));
    h.advance(5000);
    assert_eq!(h.srv.tick(), vec![c]);
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!(r[0].status, 504);
    assert!(h.srv.take_cgi_controls().contains(&Control::Cancel { id }));
    // Its body is then read and dropped: the connection goes on.
    assert!(!h.srv.input_paused(c));
}

#[test]
fn a_half_close_mid_body_ends_the_connection_without_an_answer() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    h.send(c, post("/cgi-bin/upload", 100_000).as_bytes());
    h.send(c, &body(70_000));
    let id = pull(&mut h, c).calls[0].id;
    h.srv.receive_eof(c);
    let p = pull(&mut h, c);
    assert!(p.bytes.is_empty() && p.closed);
    assert_eq!(h.srv.take_cgi_controls(), vec![Control::Cancel { id }]);
}

#[test]
fn a_cgi_death_mid_upload_is_502_and_the_rest_of_the_body_is_discarded() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(150_000);
    h.send(c, post("/cgi-bin/upload", want.len()).as_bytes());
    h.send(c, &want[..50_000]);
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    assert!(!p.parts.is_empty());
    h.srv.cgi_reply(c, id, Err(cgi_api::Failure::Fault));
    let p = pull(&mut h, c);
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!(r[0].status, 502);
    assert!(p.parts.is_empty() && !p.closed);
    // No part goes to the dead cgi's id any more; the body's rest is
    // dropped and the next request is answered.
    h.send(c, &want[50_000..]);
    h.send(c, b"GET /sub/note.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let p = pull(&mut h, c);
    assert!(p.parts.is_empty());
    let r = parse_responses(&p.bytes, &|_| false);
    assert_eq!((r.len(), r[0].status), (1, 200));
    assert!(!h.srv.cgi_input_credit(c, id, 1), "a late credit is ignored");
}

#[test]
fn a_streamed_answer_may_begin_while_the_body_still_comes() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(100_000);
    h.send(c, post("/cgi-bin/upload", want.len()).as_bytes());
    h.send(c, &want[..40_000]);
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    let mut got: Vec<u8> = p.parts.iter().flat_map(|(_, a, _)| bytes(a)).collect();
    // The answer's header comes while the body is still arriving.
    h.srv.cgi_part(c, id, make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\nreading")).unwrap();
    h.srv.cgi_input_credit(c, id, 2);
    h.send(c, &want[40_000..]);
    let p = pull(&mut h, c);
    got.extend(p.parts.iter().flat_map(|(_, a, _)| bytes(a)));
    assert!(!p.parts.last().unwrap().2, "the last part");
    assert_eq!(got, want);
    assert!(String::from_utf8_lossy(&p.bytes).ends_with("7\r\nreading"));
    h.srv.cgi_reply(c, id, Ok(make(d, CGI_POOL, b" done")));
    let p = pull(&mut h, c);
    assert_eq!(p.bytes, b"\r\n5\r\n done\r\n0\r\n\r\n");
}

/// A program that streams its answer while it reads its body (as a
/// progress report does): a first part at once, then a line every
/// `every` body bytes, each sent only on output credit (it blocks in its
/// write until then, reading nothing meanwhile), and a summary at the end.
struct Progress<'d> {
    id: u32,
    every: usize,
    /// Output messages it may send (`STREAM_WINDOW`, then httpd's credits).
    credit: u32,
    /// Body parts delivered and not consumed yet.
    inbox: std::collections::VecDeque<(iolite::Aggregate<'d>, bool)>,
    got: Vec<u8>,
    /// The lines it wrote after the first part, in order.
    lines: Vec<String>,
    done: bool,
}

impl<'d> Progress<'d> {
    /// Consumes what it can; returns whether it did anything.
    fn run(&mut self, h: &mut Harness<'d>, c: ConnId) -> bool {
        for ctl in h.srv.take_cgi_controls() {
            match ctl {
                Control::Credit { id, parts } if id == self.id => self.credit += parts,
                other => {
                    let s = h.srv.stats();
                    panic!(
                        "unexpected {other:?} after {} of the body (timeouts: cgi {}, request {}, send {}, streams aborted {})",
                        self.got.len(),
                        s.cgi_timeouts,
                        s.request_timeouts,
                        s.send_timeouts,
                        s.cgi_streams_aborted
                    )
                }
            }
        }
        let mut moved = false;
        while !self.done {
            let Some((part, more)) = self.inbox.front() else { break };
            let (n, step) = (self.got.len(), self.every);
            let (more, reports) = (*more, (n + part.len()) / step > n / step);
            if (reports || !more) && self.credit == 0 {
                // Its write blocks: it reads nothing more until credit.
                break;
            }
            self.got.extend(bytes(part));
            self.inbox.pop_front();
            moved = true;
            if !more {
                let line = format!("{} bytes, sum {:08x}\n", self.got.len(), sum(&self.got));
                self.lines.push(line.clone());
                h.srv.cgi_reply(c, self.id, Ok(make(h.d, CGI_POOL, line.as_bytes())));
                self.done = true;
                break;
            }
            assert!(h.srv.cgi_input_credit(c, self.id, 1));
            if reports {
                self.credit -= 1;
                let line = format!("{} bytes\n", self.got.len());
                self.lines.push(line.clone());
                h.srv.cgi_part(c, self.id, make(h.d, CGI_POOL, line.as_bytes())).unwrap();
            }
        }
        moved
    }
}

fn sum(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}

/// A client uploads 1 MiB to a program that streams its answer while
/// reading, and reads none of the answer until its upload is done (as
/// many clients do: they write the whole request first). The answer's
/// first part fills the transport (its send window closes) at once. The body must
/// still reach the program whole, as it credits it: the only thing that
/// waits for the client is the answer. It used to stall: nothing of the
/// connection was pulled while its send side was full, body parts
/// included, so the program waited for input, the client for its window.
#[test]
fn a_client_that_does_not_read_its_answer_still_uploads_to_a_program_that_reads() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(1 << 20);
    h.send(c, post("/cgi-bin/progress", want.len()).as_bytes());
    let mut wire = Wire::new(64 * 1024);
    let mut dr = Drained::new();
    h.pump(c, &mut wire, &mut dr);
    let call = dr.cgi.pop().expect("the call");
    assert!(call.more);
    let mut cgi = Progress {
        id: call.id,
        // A line at 384 KiB and 768 KiB: with the first part and the
        // summary, the output window's worth (STREAM_WINDOW), so that its
        // output never blocks it (the answer waits at httpd).
        every: 384 * 1024,
        credit: cgi_api::wire::STREAM_WINDOW,
        inbox: Default::default(),
        got: Vec::new(),
        lines: Vec::new(),
        done: false,
    };
    // It answers at once with a first part larger than the transport,
    // and consumes the call's message.
    let banner = content(100 * 1024, 7);
    let mut first = b"Content-Type: text/plain\r\n\r\n".to_vec();
    first.extend(&banner);
    cgi.credit -= 1;
    h.srv.cgi_part(c, call.id, make(d, CGI_POOL, &first)).unwrap();
    assert!(h.srv.cgi_input_credit(c, call.id, 1));
    let mut segs = want.chunks(8192).peekable();
    let mut rounds = 0;
    while !cgi.done {
        rounds += 1;
        assert!(
            rounds < 1000,
            "stalled: the program got {} of {} bytes ({} parts waiting at it)",
            cgi.got.len(),
            want.len(),
            cgi.inbox.len()
        );
        // The client writes while TCP lets it (httpd reads the connection).
        let mut n = 0;
        while n < 8 && !h.srv.input_paused(c) {
            let Some(seg) = segs.next() else { break };
            h.srv.receive(c, make(d, NET_POOL, seg));
            n += 1;
        }
        h.pump(c, &mut wire, &mut dr);
        cgi.inbox.extend(dr.body_parts.drain(..).map(|(id, p, more)| {
            assert_eq!(id, call.id);
            (p, more)
        }));
        cgi.run(&mut h, c);
        h.advance(100);
        for id in h.srv.tick() {
            assert_eq!(id, c);
        }
        assert!(!dr.closed, "closed after {} ms", rounds * 100);
    }
    assert!(segs.peek().is_none());
    assert_eq!(cgi.got, want, "the body reached the program byte for byte");
    assert_eq!(wire.held, dr.bytes.len(), "the client has read nothing");
    // Now it reads: the whole answer, chunked, byte for byte.
    for _ in 0..100 {
        wire.read_all();
        h.pump(c, &mut wire, &mut dr);
    }
    let mut expect = format!(
        "HTTP/1.1 200 OK\r\nDate: Wed, 15 Nov 2023 22:13:21 GMT\r\nServer: {}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        crate::SERVER,
        banner.len()
    )
    .into_bytes();
    expect.extend(&banner);
    assert!(cgi.lines.len() > 2, "it reported progress");
    let last = format!("{} bytes, sum {:08x}\n", want.len(), sum(&want));
    assert_eq!(cgi.lines.last(), Some(&last));
    for line in &cgi.lines {
        expect.extend(format!("\r\n{:x}\r\n{line}", line.len()).as_bytes());
    }
    expect.extend(b"\r\n0\r\n\r\n");
    assert_eq!(String::from_utf8_lossy(&dr.bytes), String::from_utf8_lossy(&expect));
    assert!(!dr.closed);
    let s = h.srv.stats();
    assert_eq!((s.cgi_uploads_aborted, s.cgi_timeouts, s.request_timeouts, s.send_timeouts), (0, 0, 0, 0));
}

/// A program that began its answer and waits for a slow client's next
/// body part owes no output: its stream's timeout runs only while it
/// holds parts it has not credited, as before the answer began.
#[test]
fn a_streaming_program_waiting_for_a_slow_body_is_not_timed_out() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    let want = body(100_000);
    h.send(c, post("/cgi-bin/progress", want.len()).as_bytes());
    h.send(c, &want[..70_000]);
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    let mut got: Vec<u8> = p.parts.iter().flat_map(|(_, a, _)| bytes(a)).collect();
    h.srv.cgi_part(c, id, make(d, CGI_POOL, b"Content-Type: text/plain\r\n\r\nreading")).unwrap();
    h.srv.cgi_input_credit(c, id, 1 + p.parts.len() as u32);
    let mut sent = pull(&mut h, c).bytes;
    // 1000 bytes a second: 30 s, six times the cgi's timeout, each gap
    // well within the request timeout.
    for piece in want[70_000..].chunks(1000) {
        for _ in 0..10 {
            h.advance(100);
            h.srv.tick();
        }
        h.send(c, piece);
        let p = pull(&mut h, c);
        assert!(!p.closed);
        sent.extend(p.bytes);
        for (_, a, more) in &p.parts {
            got.extend(bytes(a));
            if *more {
                h.srv.cgi_input_credit(c, id, 1);
            }
        }
    }
    assert_eq!(got, want);
    h.srv.cgi_reply(c, id, Ok(make(d, CGI_POOL, b" done")));
    sent.extend(pull(&mut h, c).bytes);
    assert!(String::from_utf8_lossy(&sent)
        .ends_with("Transfer-Encoding: chunked\r\n\r\n7\r\nreading\r\n5\r\n done\r\n0\r\n\r\n"));
    let s = h.srv.stats();
    assert_eq!((s.cgi_timeouts, s.cgi_streams_aborted, s.request_timeouts), (0, 0, 0));
}

/// `input_to_cgi` is what the component hands off to netstack: true from
/// the parsed head of a request whose body goes to the cgi (whole or
/// streamed, Content-Length or chunked) until the body has all arrived,
/// never for other requests.
#[test]
fn input_goes_to_the_cgi_exactly_while_a_body_for_it_arrives() {
    let d = domain();
    let mut h = Harness::new(d);
    let c = h.connect();
    assert!(!h.srv.input_to_cgi(c));
    // A GET: no body, nothing handed off.
    h.send(c, b"GET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(!h.srv.input_to_cgi(c));
    let p = pull(&mut h, c);
    reply(&mut h, c, p.calls[0].id, b"Content-Type: text/plain\r\n\r\nok");
    let _ = pull(&mut h, c);
    // A whole body (below max_body): from the head until its last byte.
    let small = body(1000);
    h.send(c, post("/cgi-bin/echo", small.len()).as_bytes());
    assert!(h.srv.input_to_cgi(c), "head parsed, body to come");
    h.send(c, &small[..500]);
    assert!(h.srv.input_to_cgi(c));
    h.send(c, &small[500..]);
    assert!(!h.srv.input_to_cgi(c), "the body is complete");
    let p = pull(&mut h, c);
    reply(&mut h, c, p.calls[0].id, b"Content-Type: text/plain\r\n\r\nok");
    let _ = pull(&mut h, c);
    // A streamed chunked body: until its last chunk and trailer.
    h.send(c, b"POST /cgi-bin/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(h.srv.input_to_cgi(c));
    let big = body(100 * 1024);
    let mut chunked = Vec::new();
    for piece in big.chunks(10_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    h.send(c, &chunked);
    assert!(h.srv.input_to_cgi(c), "the terminating chunk has not come");
    let p = pull(&mut h, c);
    let id = p.calls[0].id;
    for _ in 0..INPUT_WINDOW * 4 {
        h.srv.cgi_input_credit(c, id, 1);
        let _ = pull(&mut h, c);
    }
    h.send(c, b"0\r\n\r\n");
    for _ in 0..INPUT_WINDOW * 4 {
        h.srv.cgi_input_credit(c, id, 1);
        let _ = pull(&mut h, c);
    }
    assert!(!h.srv.input_to_cgi(c), "the body ended");
    // A POST to a file is not for the cgi.
    let c2 = h.connect();
    h.send(c2, post("/index.html", 10).as_bytes());
    assert!(!h.srv.input_to_cgi(c2));
}
