//! Untrusted pools whose owner reuses pages while a response is unsent:
//! stale bytes never reach the wire, first transmission or retransmission.

use super::*;

/// CGI output: a pool of another domain, mapped read-only and untrusted.
const CGI: PoolId = 4;

/// A queued response in an untrusted pool whose owner reuses its pages
/// while part of it is still unsent (a restarted producer that ends its
/// quarantine at once): every segment built afterwards, first transmission
/// or retransmission, re-checks the published generation; the stale bytes
/// never reach the wire, the connection is reset instead, and it is
/// counted.
/// With `retransmit`, every frame A sends before the reuse is lost, so all
/// it sends afterwards are retransmissions.
fn stale_untrusted_slices_are_withheld(retransmit: bool) {
    let old = iolite::testing::domain();
    old.seed_generations(1);
    let region = iolite::testing::own(old, CGI, 256);
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    iolite::testing::map_with(n.da, CGI, region, Trust::Untrusted);
    let (ca, cb) = n.connect();
    let data = pattern(250_000, 5);
    let mut b = old.alloc(CGI, data.len()).unwrap();
    b.writable()[..data.len()].copy_from_slice(&data);
    let desc = old.lend(b.seal(data.len()).map_err(|(e, _)| e).unwrap(), iolite::PeerId(0), 0, 0).unwrap();
    let agg = n.da.accept(&desc, iolite::PeerId(2)).unwrap();
    if retransmit {
        n.pa.drop_permille = 1000;
    }
    // The send queue takes B's window plus a slack: the test hands A the
    // response in pieces as room appears, as httpd does.
    let mut pending: alloc::collections::VecDeque<Aggregate<'static>> =
        (0..data.len()).step_by(16_384).map(|o| agg.range(o, 16_384.min(data.len() - o)).unwrap()).collect();
    drop(agg);
    let feed = |n: &mut Net, pending: &mut alloc::collections::VecDeque<Aggregate<'static>>| {
        while let Some(p) = pending.pop_front() {
            if let Err((_, p)) = n.a.send(ca, p) {
                pending.push_front(p);
                break;
            }
        }
    };
    feed(&mut n, &mut pending);
    // B does not read: A sends what B's window takes, the rest stays queued.
    let mut got = Vec::new();
    for _ in 0..200 {
        n.step();
        feed(&mut n, &mut pending);
        if n.a.stats().tx_payload_by_ref >= 60_000 {
            break;
        }
    }
    // (With every frame lost, B receives nothing: no more time passes here,
    // so that A's retransmissions do not time the connection out.)
    for _ in 0..2_000 {
        if retransmit || got.len() > 100_000 {
            break;
        }
        match n.b.recv(cb, 20_000) {
            Ok(Recv::Data(d)) => d.slices().for_each(|s| got.extend_from_slice(s)),
            _ => {
                n.step();
                feed(&mut n, &mut pending);
            }
        }
    }
    let unsent = n.a.send_queued(ca).unwrap() + pending.iter().map(|p| p.len()).sum::<usize>();
    assert!(unsent > 100_000, "part of the response is still unsent");
    // The owner dies and its next incarnation takes every page at once,
    // writing other bytes into them.
    // (The old domain is leaked and never used again: its memory is gone.)
    let new: &'static Domain = Box::leak(Box::new(Domain::new()));
    new.seed_generations(2);
    new.add_owned_pool(CGI, region, iolite::testing::meta(256), Trust::Trusted).unwrap();
    new.end_quarantine(CGI).unwrap();
    let mut other = Vec::new();
    while let Ok(mut w) = new.alloc(CGI, 4096) {
        w.writable()[..4096].fill(0xee);
        other.push(w.seal(4096).map_err(|(e, _)| e).unwrap());
    }
    assert!(other.len() > 90, "the owner reused the pages");
    n.pa.drop_permille = 0;
    let mut reset = false;
    for _ in 0..20_000 {
        n.step();
        feed(&mut n, &mut pending);
        match n.b.recv(cb, usize::MAX) {
            Ok(Recv::Data(d)) => d.slices().for_each(|s| got.extend_from_slice(s)),
            Ok(Recv::WouldBlock) => {}
            Ok(Recv::Eof) | Err(_) => {
                reset = true;
                break;
            }
        }
        if n.b.state(cb).map_or(true, |s| s == TcpState::Closed) {
            reset = true;
            break;
        }
    }
    assert!(got.len() < data.len(), "the stale part was not delivered");
    if retransmit {
        assert!(got.is_empty(), "nothing was retransmitted from the reused pages");
    }
    assert!(got[..] == data[..got.len()], "B received only the response's own bytes ({} of them)", got.len());
    assert!(reset, "B's connection was reset");
    let s = n.a.stats();
    assert!(s.tx_stale_withheld >= 1 && s.tx_stale_resets == 1, "{s:?}");
    let st = n.a.take_stale().expect("the stale slice is reported");
    assert_eq!((st.pool, st.gen), (CGI, desc.slices()[0].gen));
    assert_eq!(n.pa.bad_checksums, 0);
}

#[test]
fn stale_untrusted_slices_are_withheld_and_the_connection_reset() {
    stale_untrusted_slices_are_withheld(false);
}

#[test]
fn stale_untrusted_slices_are_withheld_on_retransmission_too() {
    stale_untrusted_slices_are_withheld(true);
}
