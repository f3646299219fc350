//! Host tests of channels: zero copy, batching and wake-ups, back-pressure,
//! hostile senders, restarts, two threads.

use super::*;
use crate::desc::PoolId;
use crate::testing::{bytes, make, map, own};
use crate::{SliceDesc, FLAG_EOF, MAX_SLICES, PAGE_SIZE};
use std::vec::Vec;

const FS_POOL: PoolId = 1;
const HTTP_POOL: PoolId = 2;
const PRIVATE_POOL: PoolId = 3; // fs-owned, not in http's ACL
const FS_HTTP: PeerId = PeerId(0);
const HTTP_FS: PeerId = PeerId(0);

fn chan(fwd: usize, rel: usize) -> RwRegion {
    let r = crate::testing::region(channel_bytes(fwd, rel));
    // SAFETY: fresh region.
    unsafe { init_channel(r, Geometry { fwd, rel }).unwrap() };
    r
}

fn at(d: &Domain, peer: PeerId, region: RwRegion, fwd: usize, rel: usize) -> Attach<'_> {
    Attach { domain: d, peer, region, geometry: Geometry { fwd, rel } }
}

fn domains() -> (Domain, Domain) {
    let (fs, http) = (Domain::new(), Domain::new());
    map(&http, FS_POOL, own(&fs, FS_POOL, 16));
    own(&fs, PRIVATE_POOL, 4);
    own(&http, HTTP_POOL, 16);
    (fs, http)
}

fn ends<'a>(fs: &'a Domain, http: &'a Domain, r: RwRegion, cap: (usize, usize)) -> (ChannelTx<'a>, ChannelRx<'a>) {
    // SAFETY: `r` was initialised by chan(); one end each.
    unsafe {
        (
            ChannelTx::attach(at(fs, FS_HTTP, r, cap.0, cap.1)).unwrap(),
            ChannelRx::attach(at(http, HTTP_FS, r, cap.0, cap.1)).unwrap(),
        )
    }
}

#[test]
fn round_trip_is_zero_copy_and_batched() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
    for i in 0..3u8 {
        tx.send(make(&fs, FS_POOL, &[i; 1000]), i as u64, 0).unwrap();
    }
    // A fresh channel: the receiver has not run yet, so it is waiting.
    assert!(tx.flush(), "one notification per batch");
    assert!(!tx.flush(), "nothing new to signal");
    assert_eq!(tx.notifications(), 1);
    for i in 0..3u8 {
        let r = rx.recv().unwrap().unwrap();
        assert_eq!(r.tag, i as u64);
        assert_eq!(bytes(&r.agg), [i; 1000]);
    }
    assert!(rx.recv().unwrap().is_none());
    assert_eq!(fs.stats().bytes_by_ref_sent, 3000);
    assert_eq!(http.stats().bytes_by_ref_received, 3000);
    assert_eq!(fs.stats().bytes_copied + http.stats().bytes_copied, 0);
    assert_eq!(fs.stats().buffers_in_use, 3, "http holds them");
    assert_eq!(rx.flush_releases().unwrap(), 3);
    assert_eq!(tx.poll_releases().unwrap(), 3);
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(fs.stats().releases_received, 3);
}

#[test]
fn send_ref_lends_without_giving_up_the_aggregate() {
    let (fs, http) = domains();
    fs.set_quota(FS_HTTP, 1).unwrap();
    let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
    let cached = make(&fs, FS_POOL, b"cached");
    let buf = cached.descs()[0].buf;
    tx.send_ref(&cached, 1, 0).unwrap();
    tx.send_ref(&cached, 2, 0).unwrap(); // same buffer: within the quota of 1
    assert_eq!(tx.send_ref(&cached, 3, 0).unwrap_err(), Error::Full);
    assert_eq!(fs.holds(FS_POOL, buf).unwrap(), crate::Holds { local: 1, lent: 2, received: 0 });
    assert_eq!(fs.stats().bytes_by_ref_sent, 12);
    let other = make(&fs, FS_POOL, b"other");
    let a = rx.recv().unwrap().unwrap();
    assert_eq!(tx.send_ref(&other, 4, 0).unwrap_err(), Error::QuotaExceeded);
    let b = rx.recv().unwrap().unwrap();
    assert_eq!((a.tag, b.tag), (1, 2));
    assert!(a.agg.eq_bytes(b"cached") && b.agg.eq_bytes(b"cached"));
    drop((a, b));
    rx.flush_releases().unwrap();
    tx.poll_releases().unwrap();
    assert_eq!(fs.holds(FS_POOL, buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
    assert!(cached.eq_bytes(b"cached"), "the sender still has its aggregate");
    let foreign = make(&http, HTTP_POOL, b"not fs's");
    assert_eq!(tx.send_ref(&foreign, 5, 0).unwrap_err(), Error::InvalidArgument);
    drop(cached);
    assert_eq!(fs.pool_stats(FS_POOL).unwrap().buffers_in_use, 1, "only `other` is left");
}

#[test]
fn full_ring_is_back_pressure_not_loss() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
    tx.send(make(&fs, FS_POOL, b"1"), 1, 0).unwrap();
    tx.send(make(&fs, FS_POOL, b"2"), 2, 0).unwrap();
    let (e, back) = tx.send(make(&fs, FS_POOL, b"3"), 3, 0).unwrap_err();
    assert_eq!(e, Error::Full);
    assert_eq!(bytes(&back), b"3");
    assert_eq!(rx.recv().unwrap().unwrap().tag, 1);
    tx.send(back, 3, 0).unwrap();
    assert_eq!(rx.recv().unwrap().unwrap().tag, 2);
    let r = rx.recv().unwrap().unwrap();
    assert_eq!((r.tag, bytes(&r.agg)), (3, b"3".to_vec()));
}

#[test]
fn quota_back_pressure_through_the_channel() {
    let (fs, http) = domains();
    fs.set_quota(FS_HTTP, 1).unwrap();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
    tx.send(make(&fs, FS_POOL, b"a"), 0, 0).unwrap();
    let (e, b) = tx.send(make(&fs, FS_POOL, b"b"), 0, 0).unwrap_err();
    assert_eq!(e, Error::QuotaExceeded);
    drop(rx.recv().unwrap().unwrap());
    rx.flush_releases().unwrap();
    // send() polls releases first, so the slow consumer's release makes room.
    tx.send(b, 0, 0).unwrap();
}

#[test]
fn honest_descriptor_rejected_by_receiver_returns_its_holds() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
    // PRIVATE_POOL is not in http's ACL.
    let mut a = make(&fs, FS_POOL, b"ok ");
    a.append(make(&fs, PRIVATE_POOL, b"secret")).unwrap();
    tx.send(a, 1, 0).unwrap();
    tx.send(make(&fs, FS_POOL, b"next"), 2, 0).unwrap();
    assert_eq!(rx.recv().unwrap_err(), Error::UnknownPool);
    assert_eq!(http.stats().rejected_descriptors, 1);
    // The following message is unaffected.
    let r = rx.recv().unwrap().unwrap();
    assert_eq!(bytes(&r.agg), b"next");
    drop(r);
    rx.flush_releases().unwrap();
    tx.poll_releases().unwrap();
    assert_eq!(fs.stats().bad_releases, 0);
    assert_eq!(fs.stats().buffers_in_use, 0, "nothing leaked at the sender");
}

#[test]
fn forged_descriptor_from_a_malicious_sender() {
    let (fs, http) = domains();
    let r = chan(8, 8);
    let (fwd, relr) = Geometry { fwd: 8, rel: 8 }.split(r).unwrap();
    // SAFETY: the test plays a malicious sender writing raw descriptors.
    let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 8).unwrap() };
    let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 8).unwrap() };
    let mut rx = unsafe { ChannelRx::attach(at(&http, HTTP_FS, r, 8, 8)).unwrap() };
    let live = make(&fs, FS_POOL, b"live data");
    let s = live.descs()[0];
    let mut d = AggDesc { nslices: 2, ..AggDesc::default() };
    d.slices[0] = s;
    d.slices[1] = SliceDesc { len: 5000, ..s }; // beyond sealed bytes
    evil.push(d).unwrap();
    evil.push(AggDesc { nslices: 1000, ..AggDesc::default() }).unwrap();
    assert_eq!(rx.recv().unwrap_err(), Error::OutOfBounds);
    assert_eq!(rx.recv().unwrap_err(), Error::TooManySlices);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    // The claimed holds are handed back (the owner rejects them). The
    // receiver consumes nothing more until they fit in the release ring.
    let mut n = 0;
    loop {
        while let Some(rel) = evil_rel.pop().unwrap() {
            assert!(fs.apply_release(&rel, FS_HTTP).is_err());
            n += 1;
        }
        match rx.recv() {
            Err(Error::Full) => continue,
            Ok(None) => break,
            other => panic!("{other:?}"),
        }
    }
    while let Some(rel) = evil_rel.pop().unwrap() {
        assert!(fs.apply_release(&rel, FS_HTTP).is_err());
        n += 1;
    }
    assert_eq!(n, 2 + MAX_SLICES);
    assert_eq!(fs.stats().bad_releases, n as u64);
    assert!(live.eq_bytes(b"live data"));
}

/// A hostile sender (httpd) feeding a network stack's receive end:
/// whatever it forges is rejected and counted, nothing of it is
/// delivered, and its honest messages keep flowing in order.
#[test]
fn hostile_sender_cannot_forge_references() {
    const RX: PoolId = 21; // netdrv's receive pool (net reads it)
    const HDR: PoolId = 22; // net's frame headers
    const SOCK: PoolId = 23; // net's received data (lent to http)
    const APP: PoolId = 24; // http's pool
    const FILE: PoolId = 1; // fs's file cache
    const NET_DRV: PeerId = PeerId(0);
    const NET_HTTP: PeerId = PeerId(1);
    const NET_OTHER: PeerId = PeerId(2);
    const HTTP_NET: PeerId = PeerId(0);
    const DRV_NET: PeerId = PeerId(0);
    let (drv, net, http, fs) = (Domain::new(), Domain::new(), Domain::new(), Domain::new());
    let rx_pool = own(&drv, RX, 8);
    let hdr_pool = own(&net, HDR, 8);
    let sock_pool = own(&net, SOCK, 8);
    let app_pool = own(&http, APP, 8);
    let file_pool = own(&fs, FILE, 8);
    map(&net, RX, rx_pool);
    map(&net, APP, app_pool);
    map(&net, FILE, file_pool);
    map(&http, SOCK, sock_pool);
    map(&http, FILE, file_pool);
    let _ = hdr_pool;
    // http maps app, file and sock: its grant list at net, by the
    // dataport names an assembly writes (the rejections below check
    // that the named form set exactly these pools).
    let names: &[(&str, PoolId)] = &[
        ("rx_pool", RX),
        ("hdr_pool", HDR),
        ("app_pool", APP),
        ("file_pool", FILE),
        ("sock_pool", SOCK),
        ("cgi_pool", 0),
    ];
    assert_eq!(net.set_peer_pools(NET_HTTP, &[APP, 77]).unwrap_err(), Error::UnknownPool);
    assert_eq!(net.set_peer_pools_named(NET_HTTP, &["app_pool", "nosuch"], names), Err(Error::UnknownPool));
    assert_eq!(net.set_peer_pools_named(NET_HTTP, &["cgi_pool"], names), Err(Error::UnknownPool), "absent");
    net.set_peer_pools_named(NET_HTTP, &["app_pool", "file_pool", "sock_pool"], names).unwrap();

    // Live buffers http might try to name.
    let header = make(&net, HDR, b"frame header");
    let frame = make(&drv, RX, b"someone else's frame");
    let frame = net.accept(&drv.lend(frame, DRV_NET, 0, 0).unwrap(), NET_DRV).unwrap();
    let others = make(&net, SOCK, b"Authorization: Basic c2VjcmV0");
    let to_other = net.lend(others.duplicate().unwrap(), NET_OTHER, 0, 0).unwrap();
    let kept = make(&net, SOCK, b"never lent to anybody");
    let returned = make(&net, SOCK, b"lent to http, returned");
    let mine = make(&net, SOCK, b"GET / HTTP/1.1");
    let (s_hdr, s_frame, s_other, s_kept, s_ret) =
        (header.descs()[0], frame.descs()[0], others.descs()[0], kept.descs()[0], returned.descs()[0]);
    // http receives `returned` and gives it back, and keeps `mine`.
    let got = http.accept(&net.lend(returned.duplicate().unwrap(), HTTP_NET, 0, 0).unwrap(), HTTP_NET).unwrap();
    drop(got);
    http.drain_returns(HTTP_NET, |r| net.apply_release(&r, NET_HTTP).is_ok()).unwrap();
    let mine_at_http = http.accept(&net.lend(mine.duplicate().unwrap(), NET_HTTP, 0, 0).unwrap(), HTTP_NET).unwrap();
    let file = make(&fs, FILE, b"a cached file");
    let file_at_http = http.accept(&fs.lend(file, PeerId(0), 0, 0).unwrap(), PeerId(1)).unwrap();
    let app = make(&http, APP, b"HTTP/1.1 200 OK");
    let s_app = app.descs()[0];

    // The channel http -> net; http writes raw descriptors.
    let r = chan(64, 64);
    let (fwd, relr) = Geometry { fwd: 64, rel: 64 }.split(r).unwrap();
    // SAFETY: the test plays the hostile sender on a fresh channel.
    let mut evil = unsafe { RingProducer::<AggDesc>::attach(fwd, 64).unwrap() };
    let mut evil_rel = unsafe { RingConsumer::<RelDesc>::attach(relr, 64).unwrap() };
    let mut rx = unsafe { ChannelRx::attach(at(&net, NET_HTTP, r, 64, 64)).unwrap() };
    let one = |s: SliceDesc| {
        let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
        d.slices[0] = s;
        d
    };
    let forged = [
        (one(s_hdr), Error::ForeignPool),   // net's header pool: http does not map it
        (one(s_frame), Error::ForeignPool), // netdrv's receive pool
        (one(SliceDesc { pool: 99, ..s_app }), Error::UnknownPool), // no such pool
        (one(s_other), Error::NotGranted),  // lent to another client, not to http
        (one(s_kept), Error::NotGranted),   // never lent
        (one(s_ret), Error::NotGranted),    // lent once, returned since
        (one(SliceDesc { gen: s_app.gen + 1, ..s_app }), Error::GenerationMismatch),
        (one(SliceDesc { gen: s_app.gen.wrapping_sub(1), ..s_app }), Error::GenerationMismatch),
    ];
    let mut mixed = one(mine_at_http.descs()[0]);
    mixed.nslices = 2;
    mixed.slices[1] = s_hdr;
    let mut expected = 0;
    for (k, (d, e)) in forged.iter().chain([(mixed, Error::ForeignPool)].iter()).enumerate() {
        evil.push(*d).unwrap();
        assert_eq!(rx.recv().unwrap_err(), *e, "forgery {k}");
        // Honest traffic continues: a reply header, then the request
        // back (net's own buffer, which it lent to http).
        let honest = if k % 2 == 0 { app.duplicate().unwrap() } else { mine_at_http.duplicate().unwrap() };
        evil.push(http.lend(honest, HTTP_NET, k as u64, 0).unwrap()).unwrap();
        let m = rx.recv().unwrap().unwrap();
        assert_eq!(m.tag, k as u64);
        let want: &[u8] = if k % 2 == 0 { b"HTTP/1.1 200 OK" } else { b"GET / HTTP/1.1" };
        assert_eq!(bytes(&m.agg), want);
        expected += 1;
        while let Some(rel) = evil_rel.pop().unwrap() {
            let _ = http.apply_release(&rel, HTTP_NET);
        }
    }
    // Guessing generations of a buffer net never lent gets nothing:
    // small numbers are stale (a generation carries a random tag in its
    // high bits), and even the live one, as if guessed, is not granted.
    for gen in (1..63).chain([s_kept.gen]) {
        evil.push(one(SliceDesc { gen, ..s_kept })).unwrap();
        assert!(rx.recv().is_err());
        while let Some(rel) = evil_rel.pop().unwrap() {
            let _ = http.apply_release(&rel, HTTP_NET);
        }
    }
    // A file fragment http was lent by fs is fine (net cannot check fs's
    // grants, only that http maps the pool), and so is its own pool.
    evil.push(http.lend(file_at_http, HTTP_NET, 99, 0).unwrap()).unwrap();
    assert_eq!(bytes(&rx.recv().unwrap().unwrap().agg), b"a cached file");
    assert!(rx.recv().unwrap().is_none());

    let st = net.stats();
    assert_eq!(st.rejected_foreign_pool, 4);
    // Of the 63 guesses, the live generation was refused as not granted,
    // the others as stale.
    assert_eq!(st.rejected_not_granted, 3 + 1);
    assert_eq!(st.rejected_descriptors, forged.len() as u64 + 1 + 63);
    assert_eq!(net.peer_rejections(NET_HTTP).unwrap(), st.rejected_descriptors);
    assert_eq!(net.peer_rejections(NET_DRV).unwrap(), 0);
    // Only honest bytes arrived: 5 headers, 4 requests, the fragment,
    // and the frame netdrv sent.
    assert_eq!(expected, 9);
    assert_eq!(st.bytes_by_ref_received, 5 * 15 + 4 * 14 + 13 + 20);
    // net's own buffers are as they were: held by net (and `others`
    // by the other client), by nobody else.
    assert_eq!(net.holds(SOCK, s_kept.buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
    assert_eq!(net.holds(HDR, s_hdr.buf).unwrap(), crate::Holds { local: 1, lent: 0, received: 0 });
    assert_eq!(net.holds(SOCK, s_other.buf).unwrap().lent, 1);
    assert!(header.eq_bytes(b"frame header") && kept.eq_bytes(b"never lent to anybody"));
    assert_eq!(to_other.slices()[0], s_other);
}

#[test]
fn full_release_ring_drains_over_several_flushes() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1));
    for i in 0..5u8 {
        tx.send(make(&fs, FS_POOL, &[i]), 0, 0).unwrap();
    }
    let got: Vec<_> = (0..5).map(|_| rx.recv().unwrap().unwrap()).collect();
    drop(got);
    let mut rounds = 0;
    while fs.stats().buffers_in_use > 0 {
        assert_eq!(rx.flush_releases().unwrap(), 1);
        tx.poll_releases().unwrap();
        rounds += 1;
    }
    assert_eq!(rounds, 5);
    assert_eq!(rx.flush_releases().unwrap(), 0);
}

#[test]
fn draining_a_full_release_ring_wakes_the_receiver() {
    // The receiver could queue only one of its releases; if the sender
    // drained the ring silently, a receiver waiting for data would never
    // flush the rest while the sender waits for pool space.
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 1), (8, 1));
    for i in 0..3u8 {
        tx.send(make(&fs, FS_POOL, &[i]), 0, 0).unwrap();
    }
    let _ = tx.flush();
    drop((0..3).map(|_| rx.recv().unwrap().unwrap()).collect::<Vec<_>>());
    assert_eq!(rx.flush_releases().unwrap(), 1, "the ring holds one release");
    assert!(rx.flush(), "a fresh ring: its consumer counts as waiting once");
    // The receiver blocks with releases held back: it asks for room.
    assert!(!rx.arm(), "nothing to do yet");
    assert_eq!(tx.poll_releases().unwrap(), 1);
    assert!(tx.flush(), "the sender signals the receiver after draining a full ring");
    assert!(rx.arm(), "room now: the receiver does not block");
    rx.disarm();
    assert_eq!(rx.flush_releases().unwrap(), 1);
    tx.poll_releases().unwrap();
    assert!(!tx.flush(), "the receiver runs (disarmed): no signal");
    assert_eq!(rx.flush_releases().unwrap(), 1);
    assert!(!rx.arm(), "every release queued: it waits for data only");
    tx.poll_releases().unwrap();
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert!(!tx.flush(), "it did not ask for room");
    assert_eq!(tx.poll_releases().unwrap(), 0);
    assert!(!tx.flush(), "no signal when nothing was drained");
}

#[test]
fn flush_signals_only_what_the_peer_asked_for() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(2, 8), (2, 8));
    // The receiver runs (which withdraws a fresh ring's standing
    // request): sends are not signalled.
    rx.disarm();
    tx.send(make(&fs, FS_POOL, b"a"), 1, 0).unwrap();
    assert!(!tx.flush());
    // It blocks: the look after arming finds the message.
    assert!(rx.arm());
    rx.disarm();
    let a = rx.recv().unwrap().unwrap();
    assert!(!rx.arm(), "nothing more: it may block");
    tx.send(make(&fs, FS_POOL, b"b"), 2, 0).unwrap();
    tx.send(make(&fs, FS_POOL, b"c"), 3, 0).unwrap();
    assert!(tx.flush(), "one signal for the batch");
    assert_eq!(tx.send(make(&fs, FS_POOL, b"d"), 4, 0).unwrap_err().0, Error::Full);
    assert!(!tx.flush(), "the request was used up");
    // The sender waits for room and for its buffers.
    assert!(!tx.arm(true, true));
    drop(a);
    assert!(rx.flush(), "releases: the sender asked");
    assert!(tx.arm(true, false), "releases arrived: do not block");
    tx.disarm();
    tx.poll_releases().unwrap();
    assert!(!tx.arm(true, true), "nothing left: the sender blocks");
    rx.disarm();
    let _b = rx.recv().unwrap().unwrap();
    assert!(rx.flush(), "room: the sender asked");
    assert!(!rx.flush());
    assert!(tx.arm(false, true), "room now");
    tx.disarm();
    tx.send(make(&fs, FS_POOL, b"d"), 4, 0).unwrap();
    assert!(!tx.arm(false, false), "nothing to wait for");
    // Waiting for the receiver to take what was sent (not full).
    tx.disarm();
    assert!(!tx.arm(false, true), "c and d are still in the ring");
    rx.disarm();
    let _c = rx.recv().unwrap().unwrap();
    let _d = rx.recv().unwrap().unwrap();
    assert!(rx.flush(), "the sender asked to hear when they were taken");
    assert!(tx.arm(false, true), "all taken: do not block");
    assert_eq!((tx.notifications(), rx.notifications()), (1, 3));
}

#[test]
fn control_flags_pass_through() {
    let (fs, http) = domains();
    let (mut tx, mut rx) = ends(&fs, &http, chan(8, 8), (8, 8));
    tx.request_reclaim().unwrap();
    tx.send_eof().unwrap();
    let a = rx.recv().unwrap().unwrap();
    assert!(a.agg.is_empty() && a.flags == FLAG_RECLAIM);
    let b = rx.recv().unwrap().unwrap();
    assert!(b.agg.is_empty() && b.flags == FLAG_EOF);
}

#[test]
fn dead_receiver_then_channel_reset() {
    let (fs, http) = domains();
    let r = chan(4, 4);
    let (mut tx, mut rx) = ends(&fs, &http, r, (4, 4));
    tx.send(make(&fs, FS_POOL, b"x"), 0, 0).unwrap();
    tx.send(make(&fs, FS_POOL, b"y"), 0, 0).unwrap();
    let got = rx.recv().unwrap().unwrap(); // one received, one still in the ring
    std::mem::forget(got);
    let _ = (rx, tx);
    // The loader restarts http: fs drops its holds, the channel is reset.
    fs.peer_died(FS_HTTP).unwrap();
    assert_eq!(fs.stats().buffers_in_use, 0);
    // SAFETY: nobody uses the channel during the reset.
    unsafe { init_channel(r, Geometry { fwd: 4, rel: 4 }).unwrap() };
    let mut tx = unsafe { ChannelTx::attach(at(&fs, FS_HTTP, r, 4, 4)).unwrap() };
    tx.send(make(&fs, FS_POOL, b"z"), 0, 0).unwrap();
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
}

#[test]
fn two_components_on_two_threads() {
    // fs and http run concurrently; a small pool forces buffers to be
    // recycled through the release path many times.
    const MSGS: u64 = 3000;
    let pool = crate::testing::pool_region(8);
    let r = chan(4, 4);
    let producer = std::thread::spawn(move || {
        let fs = Domain::new();
        fs.add_owned_pool(FS_POOL, pool, crate::testing::meta(8), crate::Trust::Trusted).unwrap();
        // SAFETY: initialised before the threads start; one sender.
        let mut tx = unsafe { ChannelTx::attach(at(&fs, FS_HTTP, r, 4, 4)).unwrap() };
        let mut seq = 0u64;
        let mut gens = std::collections::HashSet::new();
        while seq < MSGS {
            let len = 1 + (seq as usize * 37) % (2 * PAGE_SIZE);
            let mut w = match fs.alloc(FS_POOL, len) {
                Ok(w) => w,
                Err(Error::PoolExhausted) => {
                    tx.poll_releases().unwrap();
                    std::thread::yield_now();
                    continue;
                }
                Err(e) => panic!("{e:?}"),
            };
            gens.insert(w.id());
            for (i, b) in w.writable()[..len].iter_mut().enumerate() {
                *b = (seq as usize + i) as u8;
            }
            let mut a = w.seal(len).unwrap();
            loop {
                match tx.send(a, seq, if seq == MSGS - 1 { FLAG_EOF } else { 0 }) {
                    Ok(()) => break,
                    Err((Error::Full, back)) => {
                        a = back;
                        let _ = tx.flush(); // a polling receiver
                        tx.poll_releases().unwrap();
                        std::thread::yield_now();
                    }
                    Err((e, _)) => panic!("{e:?}"),
                }
            }
            let _ = tx.flush();
            seq += 1;
        }
        while fs.stats().buffers_in_use > 0 {
            tx.poll_releases().unwrap();
            std::thread::yield_now();
        }
        assert_eq!(fs.stats().bytes_copied, 0);
        assert_eq!(fs.stats().bad_releases, 0);
        gens.len()
    });
    let consumer = std::thread::spawn(move || {
        let http = Domain::new();
        map(&http, FS_POOL, pool);
        // SAFETY: as above; one receiver.
        let mut rx = unsafe { ChannelRx::attach(at(&http, HTTP_FS, r, 4, 4)).unwrap() };
        let mut expect = 0u64;
        loop {
            match rx.recv().unwrap() {
                Some(m) => {
                    assert_eq!(m.tag, expect);
                    let len = 1 + (expect as usize * 37) % (2 * PAGE_SIZE);
                    assert_eq!(m.agg.len(), len);
                    for (i, b) in bytes(&m.agg).into_iter().enumerate() {
                        assert_eq!(b, (expect as usize + i) as u8);
                    }
                    expect += 1;
                    let eof = m.flags & FLAG_EOF != 0;
                    drop(m);
                    while http.has_returns(HTTP_FS) {
                        rx.flush_releases().unwrap();
                        std::thread::yield_now();
                    }
                    if eof {
                        break;
                    }
                }
                None => std::thread::yield_now(),
            }
        }
        assert_eq!(http.stats().bytes_copied, 0);
        expect
    });
    assert_eq!(consumer.join().unwrap(), MSGS);
    let distinct = producer.join().unwrap();
    assert!(distinct as u64 > 8, "buffers were recycled with new generations");
}
