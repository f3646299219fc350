//! Host tests of the cgi library.

mod metrics;

use std::collections::HashMap;
use std::string::String;
use std::vec::Vec;

use iolite::testing::{bytes, domain, make, own};
use iolite::{Aggregate, Domain, PoolId};

use crate::output::split_output;
use crate::programs::{FragmentSource, Programs, FRAGMENTS};
use crate::stats::{to_html, to_json, Component, Counters};
use crate::Env;

const CGI_POOL: PoolId = 7;
const NET_POOL: PoolId = 3;
const FS_POOL: PoolId = 1;

fn setup() -> &'static Domain {
    let d = domain();
    own(d, CGI_POOL, 64);
    own(d, NET_POOL, 64);
    own(d, FS_POOL, 64);
    d
}

fn counters() -> Counters {
    let mut c = Counters { uptime_ms: 61_500, components: Vec::new(), devices: Vec::new() };
    c.push(Component::new("httpd").with("requests", 12).with("bytes_by_ref_sent", 1_000_000).with("bytes_copied", 0));
    c.push(
        Component::new("netstack")
            .with("tx_payload_by_ref", 999)
            .with("connections_active", 2)
            .with("bytes_copied", 40),
    );
    c.push(Component::new("fs").with("cache_hits", 7).with("cache_misses", 1));
    c
}

#[test]
fn stats_json_parses_and_has_one_object_per_component() {
    let c = counters();
    let j = to_json(&c);
    let v: serde_json::Value = serde_json::from_str(&j).expect("valid JSON");
    assert_eq!(v["schema"], 1);
    assert_eq!(v["uptime_ms"], 61_500);
    assert_eq!(v["httpd"]["requests"], 12);
    assert_eq!(v["netstack"]["connections_active"], 2);
    assert_eq!(v["fs"]["cache_hits"], 7);
    assert_eq!(c.total("bytes_copied"), 40);
    // Names are forced into [a-z0-9_], so nothing can break the JSON.
    let mut c = Counters::default();
    c.push(Component::new("we\"ird</x>").with("a\"b", 1));
    let v: serde_json::Value = serde_json::from_str(&to_json(&c)).unwrap();
    assert_eq!(v["we_ird__x_"]["a_b"], 1);
    let h = to_html(&c);
    assert!(!h.contains("</x>"));
    let h = to_html(&counters());
    assert!(h.contains("<h2>netstack</h2>") && h.contains("<th>cache_<wbr>hits</th><td>7</td>"));
    assert!(h.contains("<strong>1,000,000</strong>"), "grouped digits");
    assert!(h.contains("Up 0h 01m 01s"));
}

/// Fragments held in memory: the "file cache" is FS_POOL.
struct MemFrags<'d> {
    files: HashMap<String, (u64, Aggregate<'d>)>,
    reads: usize,
}

impl<'d> FragmentSource<'d> for MemFrags<'d> {
    fn version(&mut self, path: &str) -> Option<u64> {
        self.files.get(path).map(|f| f.0)
    }
    fn read(&mut self, path: &str) -> Option<Aggregate<'d>> {
        self.reads += 1;
        self.files.get(path).map(|f| f.1.duplicate().unwrap())
    }
}

fn frags(d: &Domain) -> MemFrags<'_> {
    let mut files = HashMap::new();
    for (i, p) in FRAGMENTS.iter().enumerate() {
        let text = format!("<!-- fragment {i} -->{}", "static text ".repeat(200));
        files.insert(p.to_string(), (1, make(d, FS_POOL, text.as_bytes())));
    }
    MemFrags { files, reads: 0 }
}

fn env_for(script: &str, method: &str, query: &str) -> Env {
    let mut e = Env::new();
    e.set("SCRIPT_NAME", script.as_bytes());
    e.set("REQUEST_METHOD", method.as_bytes());
    e.set("QUERY_STRING", query.as_bytes());
    e.set("REMOTE_ADDR", b"10.0.2.2");
    e
}

#[test]
fn echo_returns_the_body_by_reference() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let body = make(d, NET_POOL, b"hello=world&x=1");
    let body_descs = body.descs().to_vec();
    let before = d.stats().bytes_copied;
    let out = p.run(&env_for("/cgi-bin/echo", "POST", "q=1"), Some(body), &Counters::default()).unwrap();
    assert_eq!(d.stats().bytes_copied, before, "echo copies nothing");
    let (o, rest, _) = split_output(out).unwrap();
    assert_eq!(o.content_type.as_deref(), Some("text/plain; charset=utf-8"));
    let text = String::from_utf8(bytes(&rest)).unwrap();
    assert!(text.starts_with("method: POST\n"));
    assert!(text.contains("QUERY_STRING=q=1\n"));
    assert!(text.contains("body: 15 bytes"));
    assert!(text.ends_with("hello=world&x=1"));
    assert_eq!(rest.descs().last().unwrap(), body_descs.last().unwrap(), "body slice forwarded as is");
    assert_eq!(p.stats().referenced_bytes, 15);
}

#[test]
fn echo_with_a_body_of_many_slices_flattens_once() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let mut body = make(d, NET_POOL, b"0");
    for i in 1..16u8 {
        body.append(make(d, NET_POOL, &[b'0' + i % 10])).map_err(|(e, _)| e).unwrap();
    }
    assert_eq!(body.slice_count(), 16);
    let out = p.run(&env_for("/cgi-bin/echo", "POST", ""), Some(body), &Counters::default()).unwrap();
    assert!(bytes(&out).ends_with(b"0123456789012345"));
    assert_eq!(d.stats().bytes_copied, 16);
}

#[test]
fn stats_program_json_and_html() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let out = p.run(&env_for("/cgi-bin/stats", "GET", "format=json"), None, &counters()).unwrap();
    let (o, body, _) = split_output(out).unwrap();
    assert_eq!(o.content_type.as_deref(), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&bytes(&body)).unwrap();
    assert_eq!(v["httpd"]["requests"], 12);
    assert_eq!(v["cgi"]["requests"], 1, "the cgi's own counters are included");
    let out = p.run(&env_for("/cgi-bin/stats", "GET", ""), None, &counters()).unwrap();
    let (o, body, _) = split_output(out).unwrap();
    assert_eq!(o.content_type.as_deref(), Some("text/html; charset=utf-8"));
    assert!(String::from_utf8(bytes(&body)).unwrap().contains("<h2>cgi</h2>"));
    assert_eq!(d.stats().bytes_copied, 0);
}

#[test]
fn page_is_mostly_referenced_fragments() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let env = env_for("/cgi-bin/page", "GET", "");
    let out = p.run(&env, None, &counters()).unwrap();
    let frag_descs: Vec<_> = FRAGMENTS.iter().map(|f| p.fragments_mut().files[*f].1.descs()[0]).collect();
    for fd in &frag_descs {
        assert!(out.descs().contains(fd), "fragment {fd:?} is in the page by reference");
    }
    let total = out.len() as u64;
    let s = p.stats();
    assert!(s.referenced_bytes * 10 > total * 8, "most bytes referenced: {} of {total}", s.referenced_bytes);
    assert_eq!(s.referenced_bytes + s.generated_bytes, total);
    assert_eq!(d.stats().bytes_copied, 0, "nothing copied");
    let (_, body, _) = split_output(out).unwrap();
    let text = String::from_utf8(bytes(&body)).unwrap();
    assert!(text.starts_with("<!-- fragment 0 -->"));
    assert!(text.contains("request 1 of this page"));
    assert!(text.contains("bytes copied to build it</th><td>0</td>"));
    assert_eq!((s.fragment_misses, s.fragment_hits), (3, 0));
    // Second run: all three from the fragment cache, no reads.
    let reads = p.fragments_mut().reads;
    p.run(&env, None, &counters()).unwrap();
    assert_eq!(p.fragments_mut().reads, reads);
    assert_eq!(p.stats().fragment_hits, 3);
    // A fragment changes: only it is read again, and the new text is used.
    let new = make(d, FS_POOL, b"<!-- new middle -->");
    p.fragments_mut().files.insert(FRAGMENTS[1].to_string(), (2, new));
    let out = p.run(&env, None, &counters()).unwrap();
    assert_eq!(p.fragments_mut().reads, reads + 1);
    assert!(String::from_utf8(bytes(&out)).unwrap().contains("<!-- new middle -->"));
    // A missing fragment is a program failure (httpd: 502).
    p.fragments_mut().files.remove(FRAGMENTS[2]);
    assert!(p.run(&env, None, &counters()).is_err());
    assert_eq!(p.stats().failures, 1);
}

#[test]
fn unknown_program_is_404() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let out = p.run(&env_for("/cgi-bin/nope", "GET", ""), None, &Counters::default()).unwrap();
    let (o, _, _) = split_output(out).unwrap();
    assert_eq!(o.status, 404);
}

#[test]
fn pattern_is_seed_and_offset_in_hex() {
    let mut b = [0u8; 40];
    crate::gen::pattern(0xdead_beef, &mut b);
    assert_eq!(&b, b"deadbeef00000000deadbeef00000010deadbeef");
    let (mut x, mut y) = (vec![0u8; 4096], vec![0u8; 4096]);
    crate::gen::pattern(1, &mut x);
    crate::gen::pattern(2, &mut y);
    assert!(x.chunks(16).zip(y.chunks(16)).all(|(a, b)| a != b));
}

mod stream {
    use super::*;
    use crate::programs::Started;
    use crate::stream::{text_at, Stream, LINE, MAX_DELAY_MS, MAX_SIZE, MESSAGE_BYTES};

    /// The text by its definition, line by line.
    fn text(seed: u32, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0u64;
        while out.len() < size {
            out.extend_from_slice(format!("{:016x} ", i * 64).as_bytes());
            out.extend(std::iter::repeat_n(b'a' + ((i + u64::from(seed)) % 26) as u8, 46));
            out.push(b'\n');
            i += 1;
        }
        out.truncate(size);
        out
    }

    #[test]
    fn the_text_depends_on_the_offset_only() {
        let want = text(5, 1000);
        assert_eq!(&want[..64], b"0000000000000000 ffffffffffffffffffffffffffffffffffffffffffffff\n");
        // Any window of it, at any offset.
        for off in [0, 1, 16, 17, 63, 64, 65, 200, 937] {
            for len in [0, 1, 5, 63, 64, 130] {
                let end = (off + len).min(1000);
                let mut buf = vec![0u8; end - off];
                text_at(5, off as u64, &mut buf);
                assert_eq!(buf, &want[off..end], "at {off}, {len} bytes");
            }
        }
        // Far out: the offset in the line.
        let mut line = [0u8; LINE];
        text_at(0, 0x1234_5640, &mut line);
        assert!(line.starts_with(b"0000000012345640 "));
    }

    /// Runs a stream to its end at the times it asks for: (due time,
    /// message bytes, last) per message.
    fn run(d: &'static Domain, query: &str) -> (Vec<(u64, Vec<u8>, bool)>, Stream) {
        let mut s = Stream::from_query(query, 1000);
        let mut out = Vec::new();
        while let Some(due) = s.due_ms() {
            let (m, last) = s.next_message(d, CGI_POOL).unwrap();
            assert!(m.slice_count() <= 2, "a header and one buffer at most");
            out.push((due, bytes(&m), last));
            if last {
                assert_eq!(s.due_ms(), None);
            }
        }
        (out, s)
    }

    #[test]
    fn parts_come_at_their_times_in_messages_of_at_most_32_kib() {
        let d = setup();
        let (msgs, _) = run(d, "size=100000&parts=3&delay_ms=250&seed=1");
        let header = b"Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n";
        assert!(msgs[0].1.starts_with(header));
        let body: Vec<u8> = msgs.iter().flat_map(|(_, m, _)| m.clone()).skip(header.len()).collect();
        assert_eq!(body, text(1, 100000));
        // Parts of 33333, 33333, 33334 bytes at 0, 250, 500 ms: two
        // messages each (32 KiB, then the rest).
        let sched: Vec<(u64, usize)> = msgs.iter().map(|(t, m, _)| (*t, m.len())).collect();
        assert_eq!(
            sched,
            vec![
                (1000, header.len() + MESSAGE_BYTES),
                (1000, 33333 - MESSAGE_BYTES),
                (1250, MESSAGE_BYTES),
                (1250, 33333 - MESSAGE_BYTES),
                (1500, MESSAGE_BYTES),
                (1500, 33334 - MESSAGE_BYTES)
            ]
        );
        assert_eq!(msgs.iter().filter(|m| m.2).count(), 1);
        assert!(msgs.last().unwrap().2, "the last message says so");
        assert_eq!(d.stats().bytes_copied, 0, "made in place, not copied");
    }

    #[test]
    fn lengths_bounds_and_odd_sizes() {
        let d = setup();
        // length=1: the program announces its length.
        let (msgs, _) = run(d, "size=10&parts=2&delay_ms=0&length=1");
        assert!(String::from_utf8_lossy(&msgs[0].1).contains("\r\nContent-Length: 10\r\n\r\n"));
        // Nothing: the header alone, last.
        let (msgs, _) = run(d, "size=0&parts=5&delay_ms=100");
        assert_eq!((msgs.len(), msgs[0].2), (1, true));
        assert!(msgs[0].1.ends_with(b"\r\n\r\n"));
        // Fewer bytes than parts: the empty parts are skipped, the bytes
        // still come at their parts' times.
        let (msgs, _) = run(d, "size=3&parts=6&delay_ms=10");
        let times: Vec<u64> = msgs.iter().map(|m| m.0).collect();
        assert_eq!(times, vec![1000, 1010, 1030, 1050], "the header at once, then a byte each at parts 1, 3, 5");
        assert!(msgs[0].1.ends_with(b"nosniff\r\n\r\n"), "the header alone");
        // Defaults and clamps.
        let s = Stream::from_query("size=99999999999&parts=0&delay_ms=86400000", 0);
        assert_eq!(s.size(), MAX_SIZE);
        let mut s = s;
        let _ = s.next_message(d, CGI_POOL).unwrap();
        assert_eq!(s.due_ms(), Some(0), "one part (at least), so everything is due at once");
        let s = Stream::from_query("size=100&parts=2&delay_ms=86400000", 0);
        let mut s = s;
        let _ = s.next_message(d, CGI_POOL).unwrap();
        assert_eq!(s.due_ms(), Some(MAX_DELAY_MS));
        assert_eq!(Stream::from_query("", 0).size(), 1 << 20);
    }

    #[test]
    fn a_full_pool_is_waited_for_not_a_failure() {
        let d = domain();
        own(d, CGI_POOL, 16);
        let mut s = Stream::from_query("size=40000&parts=1&delay_ms=0", 0);
        let hog = d.alloc(CGI_POOL, 12 * 4096).unwrap();
        assert_eq!(s.next_message(d, CGI_POOL).err(), Some(iolite::Error::PoolExhausted));
        drop(hog);
        let (m, last) = s.next_message(d, CGI_POOL).unwrap();
        assert!(!last);
        assert!(bytes(&m).starts_with(b"Content-Type: "), "the header was not lost");
    }

    #[test]
    fn start_streams_only_when_the_component_has_room() {
        let d = setup();
        let mut p = Programs::new(d, CGI_POOL, frags(d));
        let env = env_for("/cgi-bin/stream", "GET", "size=100&parts=1");
        assert!(matches!(p.start(&env, None, &Counters::default(), 0, true).unwrap(), Started::Stream(_)));
        let Started::Whole(out) = p.start(&env, None, &Counters::default(), 0, false).unwrap() else {
            panic!("a whole answer")
        };
        let (o, body, _) = split_output(out).unwrap();
        assert_eq!(o.status, 503);
        assert!(o.fields.contains(&("Retry-After".into(), "1".into())));
        assert!(body.eq_bytes(b"too many streams at once\n"));
        // `run` never streams.
        assert_eq!(split_output(p.run(&env, None, &Counters::default()).unwrap()).unwrap().0.status, 503);
        let s = p.stats();
        assert_eq!((s.stream_requests, s.streams_refused), (1, 2));
    }
}

#[test]
fn upload_consumes_its_body_in_parts_and_answers_length_and_sha256() {
    use crate::programs::Started;
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    // SHA-256 test vectors (FIPS 180-2): "abc", and the empty body.
    let out = p.run(&env_for("/cgi-bin/upload", "POST", ""), Some(make(d, NET_POOL, b"abc")), &Counters::default());
    let (_, body, _) = split_output(out.unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(bytes(&body)).unwrap(),
        "length: 3\nsha256: ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
    );
    let out = p.run(&env_for("/cgi-bin/upload", "GET", ""), None, &Counters::default()).unwrap();
    assert!(
        bytes(&out).ends_with(b"length: 0\nsha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n")
    );
    // The 448-bit vector, fed in parts split anywhere (the request's body,
    // then parts of several slices), read in place: nothing copied.
    let msg = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    let want = "length: 56\nsha256: 248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1\n";
    for cut in [0, 1, 17, 55, 56] {
        let first = (cut > 0).then(|| make(d, NET_POOL, &msg[..cut]));
        let Started::Upload(mut u) =
            p.start(&env_for("/cgi-bin/upload", "POST", ""), first, &Counters::default(), 0, false).unwrap()
        else {
            panic!("not an upload")
        };
        let before = d.stats().bytes_copied;
        for piece in msg[cut..].chunks(10) {
            let mut part = make(d, NET_POOL, &piece[..piece.len() / 2]);
            part.append(make(d, NET_POOL, &piece[piece.len() / 2..])).map_err(|(e, _)| e).unwrap();
            p.upload_feed(&mut u, &part);
        }
        assert_eq!(d.stats().bytes_copied, before);
        let (_, body, _) = split_output(p.upload_finish(u).unwrap()).unwrap();
        assert_eq!(String::from_utf8(bytes(&body)).unwrap(), want, "cut at {cut}");
    }
    assert_eq!(p.stats().upload_requests, 7);
    assert_eq!(p.stats().upload_bytes, 3 + 5 * 56);
}

#[test]
fn tee_answers_with_its_body_by_reference_whole_or_part_by_part() {
    use crate::programs::Started;
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let head = b"Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n";
    // Whole: the body behind the header, the request's own slices.
    let body = make(d, NET_POOL, b"hello\r\n\0tee");
    let descs = body.descs().to_vec();
    let before = d.stats().bytes_copied;
    let out = p.run(&env_for("/cgi-bin/tee", "POST", ""), Some(body), &Counters::default()).unwrap();
    assert_eq!(d.stats().bytes_copied, before);
    let mut want = head.to_vec();
    want.extend(b"hello\r\n\0tee");
    assert_eq!(bytes(&out), want);
    assert!(out.descs().ends_with(&descs), "by reference");
    let (o, b, _) = split_output(out).unwrap();
    assert_eq!((o.status, bytes(&b)), (200, b"hello\r\n\0tee".to_vec()));
    // Streamed: the first message, then each part as it is.
    let first = make(d, NET_POOL, b"abc");
    let Started::Tee(m) =
        p.start(&env_for("/cgi-bin/tee", "POST", ""), Some(first), &Counters::default(), 0, false).unwrap()
    else {
        panic!("not a tee")
    };
    assert!(bytes(&m).ends_with(b"\r\n\r\nabc"));
    let part = make(d, NET_POOL, b"defgh");
    let pd = part.descs().to_vec();
    let m = p.tee_part(part);
    assert_eq!((bytes(&m), m.descs().to_vec()), (b"defgh".to_vec(), pd));
    // Without a body: the header alone.
    let out = p.run(&env_for("/cgi-bin/tee", "GET", ""), None, &Counters::default()).unwrap();
    assert_eq!(bytes(&out), head);
    let s = p.stats();
    assert_eq!((s.tee_requests, s.tee_bytes), (3, 11 + 3 + 5));
}

#[test]
fn stats_name_the_devices_found_at_boot() {
    let mut c = counters();
    c.devices = vec![
        crate::Device {
            bdf: "00:07.0".into(),
            vendor: 0x8086,
            device: 0x100e,
            class: 0x02_0000,
            driver: "netdrv".into(),
        },
        crate::Device {
            bdf: "00:04.0".into(),
            vendor: 0x10ec,
            device: 0x8139,
            class: 0x02_0000,
            driver: String::new(),
        },
    ];
    let v: serde_json::Value = serde_json::from_str(&to_json(&c)).expect("valid JSON");
    assert_eq!(v["devices"][0]["bdf"], "00:07.0");
    assert_eq!(v["devices"][0]["id"], "8086:100e");
    assert_eq!(v["devices"][0]["class"], "020000");
    assert_eq!(v["devices"][0]["driver"], "netdrv");
    assert_eq!(v["devices"][1]["driver"], "");
    assert_eq!(v["httpd"]["requests"], 12, "the components are still there");
    let h = to_html(&c);
    assert!(h.contains("<tr><td>00:07.0</td><td>8086:100e</td><td>020000</td><td>netdrv</td></tr>"), "{h}");
    assert!(h.contains("<tr><td>00:04.0</td><td>10ec:8139</td><td>020000</td><td>(left alone)</td></tr>"));
}
