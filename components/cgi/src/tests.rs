//! Host tests of the cgi library.

use std::alloc::{alloc_zeroed, Layout};
use std::collections::HashMap;
use std::string::String;
use std::vec::Vec;

use iolite::{Aggregate, BufMeta, Domain, PoolId, PoolLayout, RwRegion, Trust};

use crate::output::{parse_output, split_output, Kind, OutputError};
use crate::programs::{FragmentSource, Programs, FRAGMENTS};
use crate::stats::{to_html, to_json, Component, Counters};
use crate::wire::{decode_request, encode_request};
use crate::{Env, EnvError, Failure, RequestInfo};

const CGI_POOL: PoolId = 7;
const NET_POOL: PoolId = 3;
const FS_POOL: PoolId = 1;

fn domain() -> &'static Domain {
    Box::leak(Box::new(Domain::new()))
}

fn own(d: &Domain, id: PoolId, pages: u32) {
    let len = PoolLayout { pages }.region_bytes();
    let layout = Layout::from_size_align(len, 4096).unwrap();
    // SAFETY: non-zero size, never freed, used only as a region.
    let r = unsafe {
        let p = alloc_zeroed(layout);
        assert!(!p.is_null());
        RwRegion::from_raw_parts(p, len).unwrap()
    };
    let meta = Box::leak(vec![BufMeta::EMPTY; pages as usize].into_boxed_slice());
    d.add_owned_pool(id, r, meta, Trust::Trusted).unwrap();
}

fn setup() -> &'static Domain {
    let d = domain();
    own(d, CGI_POOL, 64);
    own(d, NET_POOL, 64);
    own(d, FS_POOL, 64);
    d
}

/// Fills a buffer in place (like a producer would); no copy is counted.
fn make<'d>(d: &'d Domain, pool: PoolId, bytes: &[u8]) -> Aggregate<'d> {
    let mut b = d.alloc(pool, bytes.len()).unwrap();
    b.writable()[..bytes.len()].copy_from_slice(bytes);
    b.seal(bytes.len()).map_err(|(e, _)| e).unwrap()
}

fn bytes(a: &Aggregate<'_>) -> Vec<u8> {
    a.slices().flat_map(|s| s.iter().copied()).collect()
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
    assert_eq!(o.reason, "OK");
    assert_eq!(o.content_type.as_deref(), Some("text/html"));
    assert_eq!(o.fields, vec![("X-Thing".into(), "1".into())], "framing fields are the server's");
    // LF line ends are accepted (RFC 3875 NL), and Status sets the code.
    let text = b"Status: 404 Nope\nContent-Type: text/plain\n\nmissing";
    let o = parse_output(text, text.len()).unwrap();
    assert_eq!((o.status, o.reason.as_str()), (404, "Nope"));
    assert_eq!(o.header_len, text.len() - 7);
    // Status alone with no body is fine (no Content-Type needed).
    let o = parse_output(b"Status: 204\r\n\r\n", 15).unwrap();
    assert_eq!((o.status, o.reason.as_str()), (204, "No Content"));
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

fn counters() -> Counters {
    let mut c = Counters { uptime_ms: 61_500, components: Vec::new() };
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
fn counter_pages_and_the_restart_generation() {
    use crate::chan;
    let layout = Layout::from_size_align(chan::REGION_BYTES, 4096).unwrap();
    // SAFETY: non-zero size, never freed, used only through chan.
    let base = unsafe { alloc_zeroed(layout) };
    let mut out = Vec::new();
    // SAFETY: a zeroed page-aligned region, read and written only here.
    unsafe {
        assert!(!chan::read(base, &mut out), "never published");
        chan::publish(base, b"requests=3\nbytes_copied=0\nbad line\nx=y\n");
        assert!(chan::read(base, &mut out));
    }
    let c = chan::parse_counters("httpd", &out);
    assert_eq!(c.get("requests"), Some(3));
    assert_eq!(c.get("bytes_copied"), Some(0));
    assert_eq!(c.counters.len(), 2);
    let mut text = String::new();
    chan::format_counters(&c, &mut text);
    assert_eq!(text, "requests=3\nbytes_copied=0\n");
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
fn pattern_is_seed_and_offset_in_hex() {
    let mut b = [0u8; 40];
    crate::gen::pattern(0xdead_beef, &mut b);
    assert_eq!(&b, b"deadbeef00000000deadbeef00000010deadbeef");
    let (mut x, mut y) = (vec![0u8; 4096], vec![0u8; 4096]);
    crate::gen::pattern(1, &mut x);
    crate::gen::pattern(2, &mut y);
    assert!(x.chunks(16).zip(y.chunks(16)).all(|(a, b)| a != b));
}
