//! Host tests of the domain: holds, generations, quotas, grant lists,
//! cycles, death and quarantine.

use super::*;
use crate::desc::{AggDesc, RelDesc};
use crate::pool::{gen_counter, gen_is_live};
use crate::testing::{bytes, make, map, meta, own, pool_region};
use crate::MAX_SLICES;
use std::vec::Vec;

const FS_POOL: PoolId = 1;
const HTTP_POOL: PoolId = 2;

// Peer slots, as the system composition would assign them.
const FS_HTTP: PeerId = PeerId(0); // in fs: the http component
const HTTP_FS: PeerId = PeerId(0); // in http: fs
const HTTP_TCP: PeerId = PeerId(1); // in http: tcp
const TCP_HTTP: PeerId = PeerId(0); // in tcp: http

/// Moves all returns owed by `from` (to its peer `to_peer`) into `to`,
/// which knows `from` as `from_peer`: what a release ring does.
fn pump(from: &Domain, to_peer: PeerId, to: &Domain, from_peer: PeerId) -> usize {
    let mut rels = Vec::new();
    from.drain_returns(to_peer, |r| {
        rels.push(r);
        true
    })
    .unwrap();
    for r in &rels {
        to.apply_release(r, from_peer).unwrap();
    }
    rels.len()
}

/// fs owns pool 1; http maps it and owns pool 2; tcp maps both; fs
/// maps pool 2 too (data can flow back to it).
fn system() -> (Domain, Domain, Domain) {
    let (fs, http, tcp) = (Domain::new(), Domain::new(), Domain::new());
    let r1 = own(&fs, FS_POOL, 16);
    let r2 = own(&http, HTTP_POOL, 16);
    map(&fs, HTTP_POOL, r2);
    map(&http, FS_POOL, r1);
    map(&tcp, FS_POOL, r1);
    map(&tcp, HTTP_POOL, r2);
    (fs, http, tcp)
}

#[test]
fn pool_exhaustion_is_an_error_value() {
    let d = Domain::new();
    own(&d, 1, 4);
    let bufs: Vec<_> = (0..4).map(|_| d.alloc(1, 1).unwrap()).collect();
    assert_eq!(d.alloc(1, 1).unwrap_err(), Error::PoolExhausted);
    assert_eq!(d.pack(1, 10, |_| ()).unwrap_err(), Error::PoolExhausted);
    assert_eq!(d.alloc(1, 100 * PAGE_SIZE).unwrap_err(), Error::PoolExhausted);
    assert_eq!(d.stats().alloc_failures, 3);
    assert_eq!(d.stats().buffers_in_use, 4);
    // Fragmentation: pages 1 and 3 free is not a 2-page run.
    let mut it = bufs.into_iter();
    let (b0, b1, b2, b3) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    drop((b1, b3));
    assert_eq!(d.alloc(1, 2 * PAGE_SIZE).unwrap_err(), Error::PoolExhausted);
    drop(b2);
    let big = d.alloc(1, 2 * PAGE_SIZE).unwrap();
    assert_eq!(big.remaining(), 2 * PAGE_SIZE);
    assert_eq!(d.pool_stats(1).unwrap().high_water_pages, 4);
    drop((b0, big));
    assert_eq!(d.stats().buffers_in_use, 0);
    // Allocation from a foreign pool is refused.
    let other = Domain::new();
    map(&other, 1, pool_region(4));
    assert_eq!(other.alloc(1, 1).unwrap_err(), Error::NotOwner);
    assert_eq!(other.alloc(9, 1).unwrap_err(), Error::UnknownPool);
}

#[test]
fn generation_increments_on_reallocation_and_stale_refs_are_rejected() {
    // A one-page pool, so the next allocation must reuse the slot.
    let (fs, http) = (Domain::new(), Domain::new());
    map(&http, FS_POOL, own(&fs, FS_POOL, 1));
    let a = make(&fs, FS_POOL, b"old");
    let s0 = a.descs()[0];
    let desc = fs.lend(a, FS_HTTP, 0, 0).unwrap();
    let h = http.accept(&desc, HTTP_FS).unwrap();
    drop(h);
    pump(&http, HTTP_FS, &fs, FS_HTTP);
    assert_eq!(fs.stats().buffers_in_use, 0);
    let b = make(&fs, FS_POOL, b"new");
    let s1 = b.descs()[0];
    assert_eq!(s1.buf, s0.buf, "same slot");
    assert_eq!(gen_counter(s1.gen), gen_counter(s0.gen) + 1, "next generation");
    assert!(gen_is_live(s1.gen) && s1.gen != s0.gen);
    assert_eq!(fs.published(FS_POOL, s1.buf).unwrap(), (s1.gen, 3));
    // Replaying the old descriptor is detected.
    assert_eq!(http.accept(&desc, HTTP_FS).unwrap_err(), Error::GenerationMismatch);
    assert_eq!(http.stats().rejected_descriptors, 1);
}

#[test]
fn forged_descriptors_are_rejected_and_change_nothing() {
    let (fs, http, _tcp) = system();
    let big = make(&fs, FS_POOL, &[7u8; PAGE_SIZE + 10]); // pages 0-1
    let good = big.descs()[0];
    let one = |s: SliceDesc| {
        let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
        d.slices[0] = s;
        d
    };
    let cases = [
        (SliceDesc { pool: 99, ..good }, Error::UnknownPool),
        (SliceDesc { buf: 16, ..good }, Error::BadBuffer),
        (SliceDesc { buf: u32::MAX, ..good }, Error::BadBuffer),
        (SliceDesc { buf: good.buf + 1, ..good }, Error::BadBuffer), // tail page
        (SliceDesc { buf: 5, ..good }, Error::BadBuffer),            // free page
        (SliceDesc { gen: good.gen + 1, ..good }, Error::GenerationMismatch),
        (SliceDesc { off: 0, len: PAGE_SIZE as u32 + 11, ..good }, Error::OutOfBounds),
        (SliceDesc { off: u32::MAX, len: u32::MAX, ..good }, Error::OutOfBounds),
    ];
    for (s, e) in cases {
        assert_eq!(http.accept(&one(s), HTTP_FS).unwrap_err(), e, "{s:?}");
    }
    let mut many = one(good);
    many.nslices = MAX_SLICES as u32 + 1;
    assert_eq!(http.accept(&many, HTTP_FS).unwrap_err(), Error::TooManySlices);
    assert_eq!(http.accept(&one(good), PeerId(MAX_PEERS as u8)).unwrap_err(), Error::BadPeer);
    assert_eq!(http.stats().rejected_descriptors, 10);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    // The genuine slice is fine.
    let ok = http.accept(&one(good), HTTP_FS).unwrap();
    assert_eq!(ok.len(), PAGE_SIZE + 10);
    drop(big);
}

#[test]
fn bad_releases_are_counted_and_ignored() {
    let (fs, _http, _tcp) = system();
    let a = make(&fs, FS_POOL, b"data");
    let s = a.descs()[0];
    let keep = a.duplicate().unwrap();
    fs.lend(a, FS_HTTP, 0, 0).unwrap();
    let rel = RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count: 1 };
    for bad in [
        RelDesc { count: 2, ..rel },
        RelDesc { count: 0, ..rel },
        RelDesc { gen: s.gen + 1, ..rel },
        RelDesc { buf: 3, ..rel },
        RelDesc { pool: 42, ..rel },
    ] {
        assert!(fs.apply_release(&bad, FS_HTTP).is_err());
    }
    assert!(fs.apply_release(&rel, PeerId(1)).is_err()); // never lent to peer 1
    assert_eq!(fs.stats().bad_releases, 6);
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
    fs.apply_release(&rel, FS_HTTP).unwrap();
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
    assert!(fs.apply_release(&rel, FS_HTTP).is_err(), "double release");
    drop(keep);
    assert_eq!(fs.stats().buffers_in_use, 0);
}

#[test]
fn small_objects_share_a_page() {
    let (fs, http, _tcp) = system();
    let a = fs.pack(FS_POOL, 10, |b| b.fill(b'a')).unwrap();
    let b = fs.pack(FS_POOL, 20, |b| b.fill(b'b')).unwrap();
    let c = fs.pack(FS_POOL, 30, |b| b.fill(b'c')).unwrap();
    let (sa, sb, sc) = (a.descs()[0], b.descs()[0], c.descs()[0]);
    assert_eq!((sa.buf, sa.gen), (sb.buf, sb.gen));
    assert_eq!((sb.buf, sb.off), (sa.buf, 10));
    assert_eq!((sc.buf, sc.off), (sa.buf, 30));
    assert_eq!(fs.stats().buffers_in_use, 1);
    assert_eq!(fs.stats().bytes_copied, 0);
    // Objects are readable by the ACL as soon as they are packed...
    let desc = fs.lend(b, FS_HTTP, 0, 0).unwrap();
    let hb = http.accept(&desc, HTTP_FS).unwrap();
    assert_eq!(bytes(&hb), [b'b'; 20]);
    // ...but bytes past the sealed mark are not.
    let mut beyond = desc;
    beyond.slices[0].off = 60;
    beyond.slices[0].len = 1;
    assert_eq!(http.accept(&beyond, HTTP_FS).unwrap_err(), Error::OutOfBounds);
    // A big object gets its own buffer.
    let big = fs.pack(FS_POOL, PAGE_SIZE, |b| b.fill(1)).unwrap();
    assert_ne!(big.descs()[0].buf, sa.buf);
    drop((a, c, big, hb));
    pump(&http, HTTP_FS, &fs, FS_HTTP);
    assert_eq!(fs.stats().buffers_in_use, 1, "the packer still owns the page");
    fs.flush_pack(FS_POOL).unwrap();
    assert_eq!(fs.stats().buffers_in_use, 0);
}

#[test]
fn writer_sees_only_unsealed_bytes() {
    let d = Domain::new();
    own(&d, 1, 2);
    let mut w = d.alloc(1, 100).unwrap();
    assert_eq!(w.remaining(), PAGE_SIZE);
    w.writable()[..5].copy_from_slice(b"hello");
    let a = w.seal_part(5).unwrap();
    assert_eq!(w.remaining(), PAGE_SIZE - 5);
    w.writable()[0] = b'!'; // the next byte, not the sealed ones
    assert_eq!(bytes(&a), b"hello");
    let (e, w) = w.seal(PAGE_SIZE).unwrap_err();
    assert_eq!(e, Error::InvalidArgument);
    let b = w.seal(1).unwrap();
    assert_eq!(bytes(&b), b"!");
    // Dropping a writer without sealing frees the buffer.
    drop(d.alloc(1, 1).unwrap());
    drop((a, b));
    assert_eq!(d.stats().buffers_in_use, 0);
}

#[test]
fn holds_accessor_reports_local_and_lent() {
    let (fs, http, _tcp) = system();
    let a = make(&fs, FS_POOL, b"cached");
    let buf = a.descs()[0].buf;
    assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 0 });
    let d = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
    assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 1, received: 0 });
    let h = http.accept(&d, HTTP_FS).unwrap();
    assert_eq!(http.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 1 });
    drop(h);
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.holds(FS_POOL, buf).unwrap(), Holds { local: 1, lent: 0, received: 0 });
    assert_eq!(fs.holds(FS_POOL, 1 << 20).unwrap_err(), Error::BadBuffer);
    assert_eq!(fs.holds(99, 0).unwrap_err(), Error::UnknownPool);
}

#[test]
fn three_holders_forwarding_and_release() {
    let (fs, http, tcp) = system();
    // fs keeps the file in its cache and serves it to http.
    let cached = make(&fs, FS_POOL, b"<file body>");
    let d1 = fs.lend(cached.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
    let body = http.accept(&d1, HTTP_FS).unwrap();
    // http prepends a header from its own pool and sends to tcp.
    let mut resp = make(&http, HTTP_POOL, b"HTTP/1.0 200\r\n\r\n");
    resp.append(body.duplicate().unwrap()).unwrap();
    let d2 = http.lend(resp, HTTP_TCP, 0, 0).unwrap();
    let t = tcp.accept(&d2, TCP_HTTP).unwrap();
    assert_eq!(bytes(&t), b"HTTP/1.0 200\r\n\r\n<file body>");
    assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 1);
    // One physical copy: fs's buffer is the one tcp reads.
    assert_eq!(t.descs()[1].pool, FS_POOL);
    drop(body);
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 0, "tcp still holds it through http");
    drop(t);
    assert_eq!(pump(&tcp, TCP_HTTP, &http, HTTP_TCP), 2);
    assert_eq!(http.stats().buffers_in_use, 0, "header buffer freed");
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.stats().buffers_in_use, 1, "still cached");
    drop(cached);
    assert_eq!(fs.stats().buffers_in_use, 0);
    for d in [&fs, &http, &tcp] {
        assert_eq!(d.stats().bytes_copied, 0);
        assert_eq!(d.stats().bad_releases, 0);
    }
}

#[test]
fn duplicates_received_from_two_peers_go_back_to_each() {
    // tcp gets the same fs buffer via http (peer 0) and via "cgi" (peer 1).
    let (fs, http, tcp) = system();
    let cgi = Domain::new();
    map(&cgi, FS_POOL, pool_region(1));
    let a = make(&fs, FS_POOL, b"shared");
    let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
    let h = http.accept(&d, HTTP_FS).unwrap();
    let d_h = http.lend(h.duplicate().unwrap(), HTTP_TCP, 0, 0).unwrap();
    let d_h2 = http.lend(h, HTTP_TCP, 0, 0).unwrap();
    let t1 = tcp.accept(&d_h, TCP_HTTP).unwrap();
    let t2 = tcp.accept(&d_h2, TCP_HTTP).unwrap();
    let mut both = t1;
    both.append(t2).unwrap();
    assert_eq!(bytes(&both), b"sharedshared");
    drop(both);
    assert_eq!(pump(&tcp, TCP_HTTP, &http, HTTP_TCP), 1, "coalesced into one release of 2");
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.stats().buffers_in_use, 0);
}

#[test]
fn death_of_a_leaf_releases_everything() {
    let (fs, http, _tcp) = system();
    let mut sent = Vec::new();
    for i in 0..5u8 {
        let a = make(&fs, FS_POOL, &[i; 100]);
        sent.push(fs.lend(a, FS_HTTP, 0, 0).unwrap());
    }
    let held: Vec<_> = sent.iter().map(|d| http.accept(d, HTTP_FS).unwrap()).collect();
    assert_eq!(fs.stats().buffers_in_use, 5);
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 5);
    // http dies: its memory (and `held`) is gone; the loader tells fs.
    std::mem::forget(held);
    assert_eq!(fs.peer_died(FS_HTTP).unwrap(), 5);
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Active);
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
    // The restarted incarnation works normally.
    let a = make(&fs, FS_POOL, b"again");
    let http2 = Domain::new();
    map(&http2, FS_POOL, pool_region(1)); // region contents do not matter here
    let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
    let rel = RelDesc { pool: FS_POOL, buf: d.slices[0].buf, gen: d.slices[0].gen, count: 1 };
    fs.apply_release(&rel, FS_HTTP).unwrap();
    assert_eq!(fs.stats().buffers_in_use, 0);
}

#[test]
fn death_of_an_intermediary_quarantines_until_settled() {
    let (fs, http, tcp) = system();
    let a = make(&fs, FS_POOL, b"in flight");
    let d1 = fs.lend(a, FS_HTTP, 0, 0).unwrap();
    let h = http.accept(&d1, HTTP_FS).unwrap();
    let d2 = http.lend(h, HTTP_TCP, 0, 0).unwrap();
    let t = tcp.accept(&d2, TCP_HTTP).unwrap();
    // http dies while tcp still transmits from fs's buffer.
    assert_eq!(fs.peer_failed(FS_HTTP).unwrap(), 1);
    assert_eq!(tcp.peer_failed(TCP_HTTP).unwrap(), 0);
    assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Dying);
    // Not freed early: the bytes tcp reads stay valid and unreused.
    assert_eq!(fs.stats().buffers_in_use, 1);
    assert!(make(&fs, FS_POOL, b"other").descs()[0].buf != d1.slices[0].buf);
    assert_eq!(bytes(&t), b"in flight");
    // Nothing is sent to or accepted from a dying peer.
    let (e, _) = fs.lend(make(&fs, FS_POOL, b"x"), FS_HTTP, 0, 0).unwrap_err();
    assert_eq!(e, Error::PeerDown);
    assert_eq!(tcp.accept(&d2, TCP_HTTP).unwrap_err(), Error::PeerDown);
    // tcp aborts the dead component's connections; nothing to return.
    drop(t);
    let mut n = 0;
    tcp.drain_returns(TCP_HTTP, |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 0);
    assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    // The loader confirms every peer of http has dropped its state.
    assert_eq!(fs.peer_settled(FS_HTTP).unwrap(), 1);
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(fs.peer_state(FS_HTTP).unwrap(), PeerState::Active);
}

#[test]
fn quotas_refuse_and_back_pressure() {
    let (fs, http, _tcp) = system();
    fs.set_quota(FS_HTTP, 2).unwrap();
    let a = make(&fs, FS_POOL, b"aaaa");
    let b = make(&fs, FS_POOL, b"bbbb");
    let c = make(&fs, FS_POOL, b"cccc");
    let da = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
    fs.lend(b, FS_HTTP, 0, 0).unwrap();
    let (e, c) = fs.lend(c, FS_HTTP, 0, 0).unwrap_err();
    assert_eq!(e, Error::QuotaExceeded);
    assert_eq!(bytes(&c), b"cccc", "handed back intact");
    assert_eq!(fs.stats().quota_refusals, 1);
    assert_eq!(fs.peer_refusals(FS_HTTP).unwrap(), 1);
    // More slices of a buffer the peer already holds are not new buffers.
    fs.lend(a.range(1, 2).unwrap(), FS_HTTP, 0, 0).unwrap();
    // An aggregate of two new buffers is refused as a whole.
    let (e, c) = fs.lend(c.concat(make(&fs, FS_POOL, b"d")).unwrap(), FS_HTTP, 0, 0).unwrap_err();
    assert_eq!(e, Error::QuotaExceeded);
    // The slow consumer releases one buffer: room again.
    let h = http.accept(&da, HTTP_FS).unwrap();
    drop(h);
    pump(&http, HTTP_FS, &fs, FS_HTTP);
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 2, "a is still held via the range");
    let rel = RelDesc { pool: FS_POOL, buf: a.descs()[0].buf, gen: a.descs()[0].gen, count: 1 };
    fs.apply_release(&rel, FS_HTTP).unwrap();
    assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 1);
    let mut c = c;
    c.truncate(4); // only "cccc": one new buffer
    fs.lend(c, FS_HTTP, 0, 0).unwrap_or_else(|(e, _)| panic!("{e:?}"));
    // The owner can always reclaim from a misbehaving peer by declaring
    // it dead (the loader restarts it).
    fs.peer_died(FS_HTTP).unwrap();
    drop(a);
    assert_eq!(fs.stats().buffers_in_use, 0);
}

#[test]
fn more_dirty_buffers_than_the_list_holds() {
    let fs = Domain::new();
    let http = Domain::new();
    let r = own(&fs, FS_POOL, 400);
    map(&http, FS_POOL, r);
    let mut held = Vec::new();
    for _ in 0..(DIRTY_CAP + 44) / MAX_SLICES {
        let mut a = Aggregate::new(&fs);
        for _ in 0..MAX_SLICES {
            a.append(make(&fs, FS_POOL, b"z")).unwrap();
        }
        let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
        held.push(http.accept(&d, HTTP_FS).unwrap());
    }
    assert_eq!(fs.stats().buffers_in_use, 300 - 300 % MAX_SLICES as u64);
    drop(held);
    assert!(http.has_returns(HTTP_FS));
    // A small ring: only 10 fit per drain; everything comes back eventually.
    let mut rounds = 0;
    while http.has_returns(HTTP_FS) {
        let mut budget = 10;
        let mut rels = Vec::new();
        http.drain_returns(HTTP_FS, |r| {
            if budget == 0 {
                return false;
            }
            budget -= 1;
            rels.push(r);
            true
        })
        .unwrap();
        for r in rels {
            fs.apply_release(&r, FS_HTTP).unwrap();
        }
        rounds += 1;
        assert!(rounds < 100);
    }
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
}

#[test]
fn lending_outside_the_pool_acl_is_refused() {
    let (fs, _http, _tcp) = system();
    own(&fs, 5, 2); // a pool only http may read
    fs.set_pool_acl(5, &[FS_HTTP]).unwrap();
    let a = make(&fs, 5, b"for http only");
    let (e, a) = fs.lend(a, PeerId(3), 0, 0).unwrap_err();
    assert_eq!(e, Error::NotInAcl);
    assert!(a.eq_bytes(b"for http only"));
    fs.lend(a, FS_HTTP, 0, 0).unwrap();
    assert_eq!(fs.set_pool_acl(5, &[PeerId(200)]).unwrap_err(), Error::BadPeer);
}

#[test]
fn own_buffer_coming_back_is_reclaimed() {
    // fs → http → fs: http hands fs's own buffer back (e.g. a write of
    // data it read). fs's counts stay exact through the loop.
    let (fs, http, _tcp) = system();
    let a = make(&fs, FS_POOL, b"loop");
    let d = fs.lend(a, FS_HTTP, 0, 0).unwrap();
    let h = http.accept(&d, HTTP_FS).unwrap();
    let back = http.lend(h, HTTP_FS, 0, 0).unwrap();
    let again = fs.accept(&back, FS_HTTP).unwrap();
    assert!(again.eq_bytes(b"loop"));
    assert_eq!(fs.stats().buffers_in_use, 1);
    drop(again);
    assert_eq!(pump(&fs, FS_HTTP, &http, HTTP_FS), 1);
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
}

#[test]
fn cycle_through_a_downstream_peer_unwinds() {
    // fs → http → tcp → http: http holds fs's buffer both from fs (its
    // primary grantor) and back from tcp, while tcp holds http's grant.
    // The excess must go back to tcp first, or http and tcp would keep
    // each other's holds forever.
    let (fs, http, tcp) = system();
    let a = make(&fs, FS_POOL, b"cyc");
    let h = http.accept(&fs.lend(a, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
    let t = tcp.accept(&http.lend(h, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
    let h2 = http.accept(&tcp.lend(t.duplicate().unwrap(), TCP_HTTP, 0, 0).unwrap(), HTTP_TCP).unwrap();
    drop(h2);
    drop(t);
    let mut rounds = 0;
    while pump(&tcp, TCP_HTTP, &http, HTTP_TCP)
        + pump(&http, HTTP_TCP, &tcp, TCP_HTTP)
        + pump(&http, HTTP_FS, &fs, FS_HTTP)
        > 0
    {
        rounds += 1;
        assert!(rounds < 10);
    }
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Make(u8),
        Send(usize),
        Recv,
        Fwd(usize, bool),
        TcpRecv,
        Split(u8, usize, usize),
        Drop(u8, usize),
        PumpHttp,
        PumpTcp,
        /// tcp sends something back to http (a cycle http→tcp→http).
        Back(usize),
        HttpRecvBack,
        /// http sends something to fs, the owner (a cycle fs→http→fs).
        ToFs(usize),
        FsRecv,
        PumpBack,
        PumpFs,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u8..50).prop_map(Op::Make),
            (0usize..8).prop_map(Op::Send),
            Just(Op::Recv),
            ((0usize..8), any::<bool>()).prop_map(|(i, h)| Op::Fwd(i, h)),
            Just(Op::TcpRecv),
            (0u8..3, 0usize..8, 0usize..60).prop_map(|(w, i, at)| Op::Split(w, i, at)),
            (0u8..3, 0usize..8).prop_map(|(w, i)| Op::Drop(w, i)),
            Just(Op::PumpHttp),
            Just(Op::PumpTcp),
            (0usize..8).prop_map(Op::Back),
            Just(Op::HttpRecvBack),
            (0usize..8).prop_map(Op::ToFs),
            Just(Op::FsRecv),
            Just(Op::PumpBack),
            Just(Op::PumpFs),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// Whatever the interleaving of sends, forwards, duplicates,
        /// drops and (partial) release delivery, the bytes each holder
        /// sees never change, no release is ever rejected, and once
        /// everything is dropped and delivered every buffer is back.
        #[test]
        fn holds_balance_across_three_components(ops in proptest::collection::vec(op(), 1..60)) {
            let (fs, http, tcp) = system();
            let mut held: [Vec<(Aggregate<'_>, Vec<u8>)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
            let mut to_http: Vec<(AggDesc, Vec<u8>)> = Vec::new();
            let mut to_tcp: Vec<(AggDesc, Vec<u8>)> = Vec::new();
            let mut back_http: Vec<(AggDesc, Vec<u8>)> = Vec::new();
            let mut to_fs: Vec<(AggDesc, Vec<u8>)> = Vec::new();
            let mut n = 0u8;
            for op in ops {
                match op {
                    Op::Make(len) => {
                        n = n.wrapping_add(1);
                        let v = vec![n; len as usize];
                        if let Ok(mut w) = fs.alloc(FS_POOL, v.len()) {
                            w.writable()[..v.len()].copy_from_slice(&v);
                            held[0].push((w.seal(v.len()).unwrap(), v));
                        }
                    }
                    Op::Send(i) => if let Some((a, v)) = held[0].get(i) {
                        let d = fs.lend(a.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
                        to_http.push((d, v.clone()));
                    },
                    Op::Recv => if let Some((d, v)) = to_http.pop() {
                        held[1].push((http.accept(&d, HTTP_FS).unwrap(), v));
                    },
                    Op::Fwd(i, with_header) => if let Some((a, v)) = held[1].get(i) {
                        let mut out = a.duplicate().unwrap();
                        let mut bytes_out = v.clone();
                        if with_header {
                            if let Ok(hd) = http.pack(HTTP_POOL, 3, |b| b.copy_from_slice(b"hd:")) {
                                out.prepend(hd).unwrap();
                                bytes_out.splice(0..0, b"hd:".iter().copied());
                            }
                        }
                        let d = http.lend(out, HTTP_TCP, 0, 0).unwrap();
                        to_tcp.push((d, bytes_out));
                    },
                    Op::TcpRecv => if let Some((d, v)) = to_tcp.pop() {
                        held[2].push((tcp.accept(&d, TCP_HTTP).unwrap(), v));
                    },
                    Op::Split(w, i, at) => {
                        let h = &mut held[w as usize];
                        if i < h.len() && at <= h[i].1.len() {
                            let t = h[i].0.split_off(at).unwrap();
                            let tv = h[i].1.split_off(at);
                            h.push((t, tv));
                        }
                    }
                    Op::Drop(w, i) => {
                        let h = &mut held[w as usize];
                        if i < h.len() { h.swap_remove(i); }
                    }
                    Op::PumpHttp => { pump(&http, HTTP_FS, &fs, FS_HTTP); }
                    Op::PumpTcp => { pump(&tcp, TCP_HTTP, &http, HTTP_TCP); }
                    Op::Back(i) => if let Some((a, v)) = held[2].get(i) {
                        let d = tcp.lend(a.duplicate().unwrap(), TCP_HTTP, 0, 0).unwrap();
                        back_http.push((d, v.clone()));
                    },
                    Op::HttpRecvBack => if let Some((d, v)) = back_http.pop() {
                        held[1].push((http.accept(&d, HTTP_TCP).unwrap(), v));
                    },
                    Op::ToFs(i) => if let Some((a, v)) = held[1].get(i) {
                        let d = http.lend(a.duplicate().unwrap(), HTTP_FS, 0, 0).unwrap();
                        to_fs.push((d, v.clone()));
                    },
                    Op::FsRecv => if let Some((d, v)) = to_fs.pop() {
                        held[0].push((fs.accept(&d, FS_HTTP).unwrap(), v));
                    },
                    Op::PumpBack => { pump(&http, HTTP_TCP, &tcp, TCP_HTTP); }
                    Op::PumpFs => { pump(&fs, FS_HTTP, &http, HTTP_FS); }
                }
                for h in &held {
                    for (a, v) in h { prop_assert!(a.eq_bytes(v)); }
                }
            }
            // Everything in flight is received, then all is dropped.
            for (d, _) in to_http.drain(..) { held[1].push((http.accept(&d, HTTP_FS).unwrap(), vec![])); }
            for (d, _) in to_tcp.drain(..) { held[2].push((tcp.accept(&d, TCP_HTTP).unwrap(), vec![])); }
            for (d, _) in back_http.drain(..) { held[1].push((http.accept(&d, HTTP_TCP).unwrap(), vec![])); }
            for (d, _) in to_fs.drain(..) { held[0].push((fs.accept(&d, FS_HTTP).unwrap(), vec![])); }
            for h in &mut held { h.clear(); }
            http.flush_pack(HTTP_POOL).unwrap();
            let mut rounds = 0;
            while pump(&tcp, TCP_HTTP, &http, HTTP_TCP)
                + pump(&http, HTTP_FS, &fs, FS_HTTP)
                + pump(&http, HTTP_TCP, &tcp, TCP_HTTP)
                + pump(&fs, FS_HTTP, &http, HTTP_FS)
                > 0
            {
                rounds += 1;
                prop_assert!(rounds < 100, "releases must quiesce");
            }
            prop_assert_eq!(fs.pool_stats(HTTP_POOL).unwrap().buffers_in_use, 0);
            prop_assert_eq!(http.peer_held_buffers(HTTP_FS).unwrap(), 0);
            prop_assert_eq!(tcp.peer_held_buffers(TCP_HTTP).unwrap(), 0);
            prop_assert_eq!(fs.stats().buffers_in_use, 0);
            prop_assert_eq!(http.stats().buffers_in_use, 0);
            prop_assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
            prop_assert_eq!(tcp.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
            prop_assert_eq!(tcp.pool_stats(HTTP_POOL).unwrap().buffers_in_use, 0);
            prop_assert_eq!(fs.peer_held_buffers(FS_HTTP).unwrap(), 0);
            prop_assert_eq!(http.peer_held_buffers(HTTP_TCP).unwrap(), 0);
            for d in [&fs, &http, &tcp] {
                prop_assert_eq!(d.stats().bad_releases, 0);
                prop_assert_eq!(d.stats().bytes_copied, 0);
            }
        }
    }
}

#[test]
fn pool_stats_free_pages_owned_and_foreign() {
    let (fs, http) = (Domain::new(), Domain::new());
    map(&http, FS_POOL, own(&fs, FS_POOL, 10));
    let st = |d: &Domain| {
        let s = d.pool_stats(FS_POOL).unwrap();
        assert_eq!(s.free_pages, s.pages - s.pages_in_use);
        (s.buffers_in_use, s.pages_in_use, s.free_pages)
    };
    assert_eq!(st(&fs), (0, 0, 10));
    let big = make(&fs, FS_POOL, &vec![7u8; 2 * PAGE_SIZE + 1]); // 3 pages
    let small = make(&fs, FS_POOL, b"x");
    assert_eq!(st(&fs), (2, 4, 6));
    assert_eq!(st(&http), (0, 0, 10), "the reader holds nothing yet");
    let got = http.accept(&fs.lend(big, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
    assert_eq!(st(&http), (1, 3, 7), "the reader counts the pages it holds");
    drop((got, small));
    pump(&http, HTTP_FS, &fs, FS_HTTP);
    assert_eq!(st(&http), (0, 0, 10));
    assert_eq!(st(&fs), (0, 0, 10));
    assert_eq!(fs.pool_stats(FS_POOL).unwrap().high_water_pages, 4);
}

#[test]
fn untrusted_pools_are_flagged() {
    let d = Domain::new();
    let r = pool_region(2);
    d.add_foreign_pool(7, r.read_only(), meta(2), Trust::Untrusted).unwrap();
    assert_eq!(d.pool_trust(7).unwrap(), Trust::Untrusted);
    assert_eq!(d.add_foreign_pool(7, r.read_only(), meta(2), Trust::Trusted).unwrap_err(), Error::InvalidArgument);
    assert_eq!(d.add_owned_pool(8, r, meta(1), Trust::Trusted).unwrap_err(), Error::BadRegion, "meta too small");
}

/// The owner of a pool dies and a new incarnation registers the same
/// region (the dataport survives): pages a consumer still reads are
/// quarantined, every generation continues its counter, and a stale
/// reference never validates against new contents.
#[test]
fn restarted_owner_quarantines_and_never_repeats_generations() {
    let region = pool_region(4);
    let old = Domain::new();
    old.seed_generations(1);
    old.add_owned_pool(FS_POOL, region, meta(4), Trust::Untrusted).unwrap();
    let http = Domain::new();
    map(&http, FS_POOL, region);
    // Old incarnation: page 0 held by the consumer, page 1 freed
    // after two uses, pages 2-3 never used.
    let held = http.accept(&old.lend(make(&old, FS_POOL, b"held response"), FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
    let s_held = held.descs()[0];
    let mut freed = Vec::new();
    for _ in 0..2 {
        let a = make(&old, FS_POOL, b"gone");
        freed.push(a.descs()[0]);
    }
    let s_freed = *freed.last().unwrap();
    assert_eq!(s_held.buf, 0);
    assert_eq!((s_freed.buf, gen_counter(s_freed.gen)), (2, 1));
    let freed_desc = {
        let mut slices = [SliceDesc::default(); MAX_SLICES];
        slices[0] = s_freed;
        AggDesc { nslices: 1, slices, ..Default::default() }
    };
    // The owner dies (its memory is gone) and comes back on the same region.
    // (`old` is never used again.)
    let new = Domain::new();
    new.seed_generations(2);
    new.add_owned_pool(FS_POOL, region, meta(4), Trust::Untrusted).unwrap();
    assert_eq!(new.quarantined_pages(FS_POOL).unwrap(), 1);
    assert_eq!(new.pool_stats(FS_POOL).unwrap().free_pages, 3);
    // It fills every free page; the held page is never handed out.
    let fresh: Vec<_> = (0..3).map(|i| make(&new, FS_POOL, &[b'a' + i; 64])).collect();
    assert!(fresh.iter().all(|a| a.descs()[0].buf != s_held.buf));
    assert_eq!(new.alloc(FS_POOL, 1).unwrap_err(), Error::PoolExhausted);
    assert_eq!(bytes(&held), b"held response", "the consumer's bytes did not change");
    // The still-held reference re-validates (same contents); the freed
    // one does not, though page 2 is live again: its counter went on.
    assert_eq!(http.published(FS_POOL, s_held.buf).unwrap().0, s_held.gen);
    let again = fresh.iter().find(|a| a.descs()[0].buf == s_freed.buf).unwrap().descs()[0];
    assert_eq!(gen_counter(again.gen), gen_counter(s_freed.gen) + 1);
    assert_eq!(http.accept(&freed_desc, HTTP_FS).unwrap_err(), Error::GenerationMismatch);
    // The consumer settles; the system ends the quarantine.
    drop(held);
    drop(fresh);
    assert_eq!(new.end_quarantine(FS_POOL).unwrap(), 1);
    assert_eq!(new.pool_stats(FS_POOL).unwrap().free_pages, 4);
    // Page 0 is reused with the next counter, never with the old generation.
    let all: Vec<_> = (0..4).map(|_| make(&new, FS_POOL, b"x")).collect();
    let p0 = all.iter().find(|a| a.descs()[0].buf == 0).unwrap().descs()[0];
    assert_eq!(gen_counter(p0.gen), gen_counter(s_held.gen) + 1);
    assert_ne!(p0.gen, s_held.gen);
    assert!(http.published(FS_POOL, 0).unwrap().0 != s_held.gen);
}

/// Generations over many reallocations and re-registrations of one
/// page: the counter strictly increases, the tag is never 0, and tags
/// differ between seeds (they cannot be predicted from the counter).
#[test]
fn generations_are_monotonic_across_incarnations_and_tagged() {
    let region = pool_region(1);
    let mut last_counter = 0;
    let mut seen = std::collections::HashSet::new();
    let mut tags = std::collections::HashSet::new();
    for incarnation in 0..20u64 {
        let d = Domain::new();
        d.seed_generations(incarnation.wrapping_mul(0x1234_5678_9abc) ^ 77);
        d.add_owned_pool(FS_POOL, region, meta(1), Trust::Trusted).unwrap();
        assert_eq!(d.quarantined_pages(FS_POOL).unwrap(), 0, "everything was freed");
        for _ in 0..50 {
            let g = make(&d, FS_POOL, b"x").descs()[0].gen;
            assert!(gen_is_live(g));
            assert!(gen_counter(g) > last_counter, "counter goes up across incarnations");
            last_counter = gen_counter(g);
            assert!(seen.insert(g), "generation {g:#x} repeated");
            tags.insert(g >> crate::pool::GEN_COUNTER_BITS);
        }
    }
    assert!(tags.len() > 500, "tags look random ({} distinct of 1000)", tags.len());
}

/// fs lends a buffer to cgi, which forwards it to http, which lends it
/// to tcp. cgi dies: fs quarantines what cgi had, http's use is tainted
/// by cgi until tcp releases it; the new cgi is served at once; only
/// after the system settles does fs get its buffer back.
#[test]
fn death_with_forwarded_buffers_quarantines_until_consumers_release() {
    const FS_CGI: PeerId = PeerId(1);
    const CGI_FS: PeerId = PeerId(0);
    const CGI_HTTP: PeerId = PeerId(1);
    const HTTP_CGI: PeerId = PeerId(2);
    let (fs, http, tcp) = system();
    let cgi = Domain::new();
    map(&cgi, FS_POOL, region_of(&fs, FS_POOL));
    let a = make(&fs, FS_POOL, b"fragment");
    let c = cgi.accept(&fs.lend(a, FS_CGI, 0, 0).unwrap(), CGI_FS).unwrap();
    let h = http.accept(&cgi.lend(c, CGI_HTTP, 0, 0).unwrap(), HTTP_CGI).unwrap();
    let t = tcp.accept(&http.lend(h, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
    // cgi dies.
    // (`cgi` is never used again.)
    assert_eq!(fs.peer_failed(FS_CGI).unwrap(), 1);
    assert_eq!(http.peer_failed(HTTP_CGI).unwrap(), 0);
    assert_eq!(http.tainted(HTTP_CGI).unwrap(), 1, "http lent it on to tcp");
    // The new cgi is served at once; the quarantined buffer is not freed.
    fs.peer_restarted(FS_CGI).unwrap();
    http.peer_restarted(HTTP_CGI).unwrap();
    let b = make(&fs, FS_POOL, b"for the new cgi");
    fs.lend(b, FS_CGI, 0, 0).unwrap();
    assert_eq!(fs.stats().buffers_in_use, 2);
    assert_eq!(bytes(&t), b"fragment");
    // tcp releases (its segment was ACKed): http is no longer tainted.
    drop(t);
    pump(&tcp, TCP_HTTP, &http, HTTP_TCP);
    assert_eq!(http.tainted(HTTP_CGI).unwrap(), 0);
    assert_eq!(http.pool_stats(FS_POOL).unwrap().buffers_in_use, 0);
    // The supervisor publishes "settled": fs drops the quarantine only.
    assert_eq!(fs.peer_settled(FS_CGI).unwrap(), 1);
    assert_eq!(fs.stats().buffers_in_use, 1, "the new incarnation's buffer stays lent");
    assert_eq!(fs.peer_held_buffers(FS_CGI).unwrap(), 1);
}

/// A buffer a dead peer lent back to us (echo) while we had lent it to
/// that peer: our quarantine must not keep our own taint alive
/// (no self-deadlock).
#[test]
fn quarantine_does_not_keep_taint_alive() {
    const HTTP_CGI: PeerId = PeerId(2);
    const CGI_HTTP: PeerId = PeerId(0);
    let (_fs, http, tcp) = system();
    // tcp's received data: http got it from tcp (pool 2 is http's, so
    // use fs's pool 1 as "tcp's" foreign pool seen from http).
    let cgi = Domain::new();
    map(&cgi, HTTP_POOL, region_of(&http, HTTP_POOL));
    map(&cgi, FS_POOL, region_of(&_fs, FS_POOL));
    let body = make(&_fs, FS_POOL, b"posted body");
    let h = http.accept(&_fs.lend(body, FS_HTTP, 0, 0).unwrap(), HTTP_FS).unwrap();
    let c = cgi.accept(&http.lend(h, HTTP_CGI, 0, 0).unwrap(), CGI_HTTP).unwrap();
    let back = http.accept(&cgi.lend(c, CGI_HTTP, 0, 0).unwrap(), HTTP_CGI).unwrap();
    let t = tcp.accept(&http.lend(back, HTTP_TCP, 0, 0).unwrap(), TCP_HTTP).unwrap();
    // (`cgi` is never used again.)
    assert_eq!(http.peer_failed(HTTP_CGI).unwrap(), 1);
    assert_eq!(http.tainted(HTTP_CGI).unwrap(), 1);
    drop(t);
    pump(&tcp, TCP_HTTP, &http, HTTP_TCP);
    assert_eq!(http.tainted(HTTP_CGI).unwrap(), 0, "quarantined holds are not uses");
    assert_eq!(_fs.stats().buffers_in_use, 1, "still quarantined in http");
    assert_eq!(http.peer_settled(HTTP_CGI).unwrap(), 1);
    pump(&http, HTTP_FS, &_fs, FS_HTTP);
    assert_eq!(_fs.stats().buffers_in_use, 0);
}

fn region_of(d: &Domain, pool: PoolId) -> RwRegion {
    let pools = d.pools.borrow();
    let e = pools.iter().flatten().find(|e| e.id == pool).unwrap();
    let base = e.data_ptr(0, 0) as usize - e.layout.header_bytes();
    // SAFETY: the leaked host region behind the pool, alive for the test.
    unsafe { RwRegion::from_raw_parts(base as *mut u8, e.layout.region_bytes()) }.unwrap()
}

/// fs owns pool 1 and lends to http (its peer 0) and cgi (its peer 1); cgi
/// passes references on to http. In cgi: fs is peer 0, http peer 1. In
/// http: fs is peer 0, cgi peer 1.
fn vouch_system() -> (Domain, Domain, Domain) {
    let (fs, cgi, http) = (Domain::new(), Domain::new(), Domain::new());
    let r = own(&fs, FS_POOL, 16);
    map(&cgi, FS_POOL, r);
    map(&http, FS_POOL, r);
    (fs, cgi, http)
}
const FS_CGI: PeerId = PeerId(1);
const CGI_FS: PeerId = PeerId(0);
const CGI_HTTP: PeerId = PeerId(1);
const HTTP_CGI: PeerId = PeerId(1);

#[test]
fn a_vouched_reference_outlives_the_passing_peers_early_return() {
    let (fs, cgi, http) = vouch_system();
    let cached = make(&fs, FS_POOL, b"<fragment>");
    let s = cached.descs()[0];
    // fs -> cgi -> http, by reference.
    let d1 = fs.lend(cached.duplicate().unwrap(), FS_CGI, 0, 0).unwrap();
    let at_cgi = cgi.accept(&d1, CGI_FS).unwrap();
    let d2 = cgi.lend(at_cgi, CGI_HTTP, 0, 0).unwrap();
    let at_http = http.accept(&d2, HTTP_CGI).unwrap();
    // http has fs vouch for it: a hold of its own, from the owner.
    fs.vouch(FS_POOL, s.buf, s.gen, FS_HTTP).unwrap();
    http.take_vouched(FS_POOL, s.buf, s.gen, HTTP_FS).unwrap();
    // The cgi's hold goes back at once, the owner's stays.
    assert_eq!(http.holds(FS_POOL, s.buf).unwrap(), Holds { local: 1, lent: 0, received: 1 });
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 0);
    assert_eq!(pump(&http, HTTP_CGI, &cgi, CGI_HTTP), 1);
    assert_eq!(pump(&cgi, CGI_FS, &fs, FS_CGI), 1);
    // fs drops it from its cache: only http's hold keeps it now.
    drop(cached);
    assert_eq!(fs.holds(FS_POOL, s.buf).unwrap(), Holds { local: 0, lent: 1, received: 0 });
    assert_eq!(bytes(&at_http), b"<fragment>");
    // When http is done the buffer goes back to the pool.
    drop(at_http);
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.stats().buffers_in_use, 0);
    assert_eq!(fs.stats().bad_releases, 0);
}

#[test]
fn the_owner_vouches_only_for_a_buffer_another_peer_holds() {
    let (fs, cgi, http) = vouch_system();
    let cached = make(&fs, FS_POOL, b"<fragment>");
    let s = cached.descs()[0];
    // Nobody but fs holds it: a reference the cgi made up.
    assert_eq!(fs.vouch(FS_POOL, s.buf, s.gen, FS_HTTP), Err(Error::NotGranted));
    // Only http itself holds it: still not the cgi's to pass on.
    let d = fs.lend(cached.duplicate().unwrap(), FS_HTTP, 0, 0).unwrap();
    let at_http = http.accept(&d, HTTP_FS).unwrap();
    assert_eq!(fs.vouch(FS_POOL, s.buf, s.gen, FS_HTTP), Err(Error::NotGranted));
    // The cgi holds it, but at another generation than claimed.
    let d = fs.lend(cached.duplicate().unwrap(), FS_CGI, 0, 0).unwrap();
    let at_cgi = cgi.accept(&d, CGI_FS).unwrap();
    assert_eq!(fs.vouch(FS_POOL, s.buf, s.gen ^ 0x100, FS_HTTP), Err(Error::NotGranted));
    // Out of range, or a pool fs does not own.
    assert_eq!(fs.vouch(FS_POOL, 1 << 20, s.gen, FS_HTTP), Err(Error::BadBuffer));
    assert_eq!(fs.vouch(HTTP_POOL, s.buf, s.gen, FS_HTTP), Err(Error::UnknownPool));
    assert_eq!(fs.stats().rejected_not_granted, 3);
    // Refusals changed nothing: one hold each.
    assert_eq!(fs.holds(FS_POOL, s.buf).unwrap(), Holds { local: 1, lent: 2, received: 0 });
    // Once the cgi returned it, it can no longer be vouched for.
    drop(at_cgi);
    assert_eq!(pump(&cgi, CGI_FS, &fs, FS_CGI), 1);
    assert_eq!(fs.vouch(FS_POOL, s.buf, s.gen, FS_HTTP), Err(Error::NotGranted));
    drop(at_http);
}

#[test]
fn vouching_counts_against_the_receivers_quota() {
    let (fs, cgi, _http) = vouch_system();
    fs.set_quota(FS_HTTP, 1).unwrap();
    let mut keep = Vec::new();
    for body in [b"one".as_slice(), b"two".as_slice()] {
        let a = make(&fs, FS_POOL, body);
        let s = a.descs()[0];
        let d = fs.lend(a.duplicate().unwrap(), FS_CGI, 0, 0).unwrap();
        keep.push((a, cgi.accept(&d, CGI_FS).unwrap(), s));
    }
    let (s0, s1) = (keep[0].2, keep[1].2);
    fs.vouch(FS_POOL, s0.buf, s0.gen, FS_HTTP).unwrap();
    // A second hold on the same buffer is no new buffer for the quota.
    fs.vouch(FS_POOL, s0.buf, s0.gen, FS_HTTP).unwrap();
    assert_eq!(fs.vouch(FS_POOL, s1.buf, s1.gen, FS_HTTP), Err(Error::QuotaExceeded));
    assert_eq!(fs.holds(FS_POOL, s1.buf).unwrap(), Holds { local: 1, lent: 1, received: 0 });
}

#[test]
fn a_vouched_hold_for_a_buffer_no_longer_used_goes_straight_back() {
    let (fs, cgi, http) = vouch_system();
    let cached = make(&fs, FS_POOL, b"x");
    let s = cached.descs()[0];
    let d = fs.lend(cached.duplicate().unwrap(), FS_CGI, 0, 0).unwrap();
    let _at_cgi = cgi.accept(&d, CGI_FS).unwrap();
    fs.vouch(FS_POOL, s.buf, s.gen, FS_HTTP).unwrap();
    // http dropped what it had before the vouch arrived.
    assert_eq!(http.take_vouched(FS_POOL, s.buf, s.gen, HTTP_FS), Err(Error::GenerationMismatch));
    assert_eq!(pump(&http, HTTP_FS, &fs, FS_HTTP), 1);
    assert_eq!(fs.holds(FS_POOL, s.buf).unwrap(), Holds { local: 1, lent: 1, received: 0 });
    assert_eq!(fs.stats().bad_releases, 0);
}
