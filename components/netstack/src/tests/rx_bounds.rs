//! Receive-side bounds in pages: tiny received chunks share their
//! connection's page instead of taking one each, a connection's
//! unreleased input keeps at most `Config::rx_conn_pages` pages in use
//! (the rest waits in TCP, whose window closes), and a normal connection
//! is served byte for byte beside dozens of peers that trickle.

use super::*;

/// B's receive pool (its frame headers are in `NET`).
const RXP: PoolId = 5;

/// Pages of B's receive pool in use.
fn rx_pages(n: &Net) -> u32 {
    n.b.domain().pool_stats(RXP).unwrap().pages_in_use
}

/// A connects to B:80 from `port`; returns (A's id, B's id).
fn connect_from(n: &mut Net, port: u16) -> (ConnId, ConnId) {
    let ca = n.a.connect(([10, 0, 2, 16], 80), port).unwrap();
    for _ in 0..10_000 {
        n.step();
        if let Some(cb) = n.b.accept(80) {
            while n.a.state(ca).unwrap() != TcpState::Established {
                n.step();
            }
            return (ca, cb);
        }
    }
    panic!("no connection from port {port}");
}

/// Everything B can take from `cb` now, kept in `held` (a client holding
/// an incomplete request), its bytes appended to `got`.
fn drain(n: &mut Net, cb: ConnId, got: &mut Vec<u8>, held: &mut Vec<Aggregate<'static>>) {
    while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
        d.slices().for_each(|s| got.extend_from_slice(s));
        held.push(d);
    }
}

/// `data` packed with other small objects in A's pool (many in flight).
fn small<'d>(d: &'d Domain, data: &[u8]) -> Aggregate<'d> {
    d.pack(APP, data.len(), |b| b.copy_from_slice(data)).unwrap()
}

/// B with `pages` pages per connection; A and B as in `Net::new`.
fn net(pages: usize) -> Net {
    let mut b = cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached);
    b.rx_conn_pages = pages;
    b.rx_pool = RXP;
    let (da, db) = (domain(1024, Trust::Trusted), domain(1024, Trust::Trusted));
    iolite::testing::own_with(db, RXP, 1024, Trust::Trusted);
    let a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let b = NetStack::new(db, b, 0);
    let (pa, pb) = Port::pair(da, db, 0);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    n.b.listen(80, 64).unwrap();
    n
}

#[test]
fn one_byte_segments_of_dozens_of_peers_share_pages_and_a_normal_client_is_served() {
    let mut n = net(4);
    let base = rx_pages(&n);
    const TRICKLERS: usize = 40;
    const BYTES: usize = 300;
    let conns: Vec<(ConnId, ConnId)> = (0..TRICKLERS).map(|k| connect_from(&mut n, 40000 + k as u16)).collect();
    let mut got = alloc::vec![Vec::new(); TRICKLERS];
    let mut held = Vec::new();
    let head = b"GET /a-request-head-that-never-ends HTTP/1.1\r\nHost: x\r\nX-Pad: ";
    let want =
        |k: usize| -> Vec<u8> { head.iter().chain(pattern(BYTES, k as u32).iter()).copied().take(BYTES).collect() };
    // One byte per segment from every trickler, every step (Nagle is off:
    // each send is a segment); B keeps everything it received.
    for i in 0..BYTES {
        for (k, &(ca, _)) in conns.iter().enumerate() {
            n.a.send(ca, small(n.da, &want(k)[i..i + 1])).unwrap();
        }
        n.step();
        for (k, &(_, cb)) in conns.iter().enumerate() {
            drain(&mut n, cb, &mut got[k], &mut held);
        }
    }
    for _ in 0..50 {
        n.step();
        for (k, &(_, cb)) in conns.iter().enumerate() {
            drain(&mut n, cb, &mut got[k], &mut held);
        }
    }
    for (k, g) in got.iter().enumerate() {
        assert!(*g == want(k), "trickler {k}: byte for byte");
    }
    // Each trickler's 300 chunks are in one page of its own (they used to
    // take a page each: 12000 pages, more than the pool).
    let used = rx_pages(&n) - base;
    assert!(used as usize <= TRICKLERS, "{used} pages for {TRICKLERS} tricklers");
    for &(_, cb) in &conns {
        assert_eq!(n.b.rx_pages_held(cb), Ok(1));
    }
    let s = n.b.stats();
    assert!(s.rx_coalesced_bytes >= (TRICKLERS * (BYTES - 1)) as u64, "{}", s.rx_coalesced_bytes);
    // Adjacent chunks of one page merge: a trickler's bytes are few slices.
    let mut one = Aggregate::new(n.b.domain());
    for d in held.iter().filter(|d| d.descs()[0].buf == held[0].descs()[0].buf) {
        one.append(d.duplicate().unwrap()).unwrap();
    }
    assert_eq!(one.slice_count(), 1, "one slice for a whole trickled head");
    drop(one);

    // A normal client beside them: a request and a 64 KiB body, byte for
    // byte, in pages of its own.
    let (ca, cb) = connect_from(&mut n, 50000);
    let body = pattern(64 * 1024, 99);
    let mut normal = Vec::new();
    let mut off = 0;
    for _ in 0..100_000 {
        if off < body.len() {
            let k = n.a.send_space(ca).unwrap_or(0).min(body.len() - off).min(8192);
            if k > 0 && n.a.send(ca, make(n.da, &body[off..off + k])).is_ok() {
                off += k;
            }
        }
        n.step();
        let mut keep = Vec::new();
        drain(&mut n, cb, &mut normal, &mut keep);
        if normal.len() == body.len() {
            break;
        }
    }
    assert!(normal == body, "the normal client's bytes, exact ({} of {})", normal.len(), body.len());

    // Everything released and the peers gone: the pool is back where it was.
    held.clear();
    for &(ca, _) in &conns {
        n.a.abort(ca).unwrap();
    }
    for _ in 0..200 {
        n.step();
    }
    assert_eq!(rx_pages(&n), base, "pages back");
}

#[test]
fn a_connection_that_keeps_its_input_waits_in_tcp_at_its_share_and_goes_on_when_it_releases() {
    let mut n = net(4);
    let base = rx_pages(&n);
    let (ca, cb) = connect_from(&mut n, 40000);
    // 120 KB in 100-byte segments, none of it released by B: 4 pages (16
    // KiB) are its share, the rest stays in TCP: B's 64 KiB ring fills and
    // its window closes on A.
    let data = pattern(120_000, 5);
    let (mut got, mut held, mut off) = (Vec::new(), Vec::new(), 0);
    // Until the window has closed, and a little longer (not for minutes:
    // a wire that stays idle moves the clock by up to a second a step).
    let mut after = 0;
    for _ in 0..6000 {
        while off < data.len() && n.a.send_space(ca).unwrap_or(0) >= 100 {
            n.a.send(ca, small(n.da, &data[off..off + 100])).unwrap();
            off += 100;
        }
        n.step();
        drain(&mut n, cb, &mut got, &mut held);
        if n.b.rx_waiting_for_pages() {
            after += 1;
            if after == 30 {
                break;
            }
        }
    }
    assert_eq!(got.len(), 4 * 4096, "exactly its share of pages, full");
    assert!(got[..] == data[..got.len()]);
    assert_eq!(n.b.rx_pages_held(cb), Ok(4));
    assert_eq!(rx_pages(&n) - base, 4);
    assert!(n.b.rx_waiting_for_pages());
    assert!(n.b.stats().rx_paused_conn_pages >= 1);
    // B's receive window closed on A: what is unsent waits with A.
    assert!(n.a.send_queued(ca).unwrap() > 0, "A waits");
    assert_eq!(n.a.state(ca), Ok(TcpState::Established));

    // The client lets go: the connection is touched (its user is told to
    // look) and the rest arrives, byte for byte.
    let mut touched = Vec::new();
    n.b.take_touched(&mut touched);
    touched.clear();
    held.clear();
    n.step();
    n.b.take_touched(&mut touched);
    assert!(touched.contains(&cb), "touched once its pages are back");
    assert!(!n.b.rx_waiting_for_pages());
    for _ in 0..6000 {
        while off < data.len() && n.a.send_space(ca).unwrap_or(0) >= 100 {
            n.a.send(ca, small(n.da, &data[off..off + 100])).unwrap();
            off += 100;
        }
        n.step();
        let mut keep = Vec::new();
        drain(&mut n, cb, &mut got, &mut keep);
        if got.len() == data.len() {
            break;
        }
    }
    assert!(got == data, "{} of {} bytes, in order", got.len(), data.len());
    // Idle, nothing held: its open page went back too.
    for _ in 0..20 {
        n.step();
    }
    assert_eq!(rx_pages(&n), base);
    assert!(n.b.stats().rx_open_pages_swept >= 1);
}

#[test]
fn large_chunks_get_whole_pages_within_the_share() {
    let mut n = net(3);
    let (ca, cb) = connect_from(&mut n, 40000);
    let data = pattern(60_000, 6);
    let (mut got, mut held) = (Vec::new(), Vec::new());
    n.a.send(ca, make(n.da, &data[..30_000])).unwrap();
    for _ in 0..40 {
        n.step();
    }
    drain(&mut n, cb, &mut got, &mut held);
    assert_eq!(got.len(), 3 * 4096, "three whole pages, the rest in TCP");
    assert!(got[..] == data[..got.len()]);
    for d in &held {
        let pages: usize = d.slices().map(|s| s.len().div_ceil(4096)).sum();
        assert!(pages >= 1 && d.len() % 4096 == 0, "whole pages: {}", d.len());
    }
    held.clear();
    n.a.send(ca, make(n.da, &data[30_000..])).unwrap();
    for _ in 0..2000 {
        n.step();
        let mut keep = Vec::new();
        drain(&mut n, cb, &mut got, &mut keep);
        if got.len() == data.len() {
            break;
        }
    }
    assert!(got == data, "{} of {}", got.len(), data.len());
}
