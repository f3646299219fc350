//! `/healthz`: answered by the server from the component's probe, without
//! the cgi, never cached.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// How many components the probe below reports unhealthy.
static SICK: AtomicUsize = AtomicUsize::new(0);

fn probe(out: &mut String) -> usize {
    let n = SICK.load(Ordering::Relaxed);
    for i in 0..n {
        out.push_str(&format!("comp{i}: down (death 1, not restarted yet)\n"));
    }
    n
}

#[test]
fn healthz_says_ok_or_names_what_is_not() {
    let d = domain();
    let mut h = Harness::new(d);
    // No probe: an ordinary path (the site has no such file).
    assert_eq!(h.get("/healthz").status, 404);
    h.srv.set_health_probe(probe);
    SICK.store(0, Ordering::Relaxed);
    let r = h.get("/healthz");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok\n");
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    SICK.store(2, Ordering::Relaxed);
    let r = h.get("/healthz");
    assert_eq!(r.status, 503);
    assert_eq!(r.body, b"comp0: down (death 1, not restarted yet)\ncomp1: down (death 1, not restarted yet)\n");
    assert_eq!(r.header("Content-Length"), Some("82"));
    // HEAD: the same header, no body; the connection stays usable.
    let c = h.connect();
    h.send(c, b"HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    let dr = h.drain(c);
    assert!(!dr.closed);
    let rs = parse_responses(&dr.bytes, &|i| i == 0);
    assert_eq!(rs.len(), 2);
    assert_eq!((rs[0].status, rs[0].body.len(), rs[1].status), (503, 0, 503));
    SICK.store(0, Ordering::Relaxed);
    assert_eq!(h.get("/healthz").body, b"ok\n");
    assert_eq!(h.srv.stats().health_checks, 5);
    assert_eq!(h.srv.stats().cgi_requests, 0, "the cgi is not asked");
}
