//! Early demultiplexing: a connection handed off receives into the
//! hand-off pool (nothing but handed-off input there), falls back to the
//! shared pool when that is full, and goes back to the shared pool when
//! the hand-off ends; the bytes come in order whatever pool they are in.

use super::*;

const HAND_OFF: PoolId = 4;

/// B with a hand-off pool of `pages` pages.
fn net_with_hand_off(pages: u32) -> Net {
    let mut b = cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached);
    b.hand_off_pool = Some(HAND_OFF);
    let (da, db) = (domain(1024, Trust::Trusted), domain(1024, Trust::Trusted));
    iolite::testing::own_with(db, HAND_OFF, pages, Trust::Trusted);
    let a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let b = NetStack::new(db, b, 0);
    let (pa, pb) = Port::pair(da, db, 0);
    Net { da, a, b, pa, pb, now: 0 }
}

/// Sends `data` from A and receives it at B, keeping every aggregate B
/// got while `keep` says so (a client holding its input), and returns
/// (bytes, the pool of every slice, in order).
fn send_and_receive(
    n: &mut Net,
    ca: ConnId,
    cb: ConnId,
    data: &[u8],
    held: &mut Vec<Aggregate<'static>>,
    keep: impl Fn(usize) -> bool,
) -> (Vec<u8>, Vec<PoolId>) {
    let (mut got, mut pools, mut off) = (Vec::new(), Vec::new(), 0);
    for _ in 0..200_000 {
        if off < data.len() {
            let k = n.a.send_space(ca).unwrap_or(0).min(data.len() - off).min(8192);
            if k > 0 && n.a.send(ca, make(n.da, &data[off..off + k])).is_ok() {
                off += k;
            }
        }
        n.step();
        while let Ok(Recv::Data(d)) = n.b.recv(cb, 4096) {
            d.slices().for_each(|s| got.extend_from_slice(s));
            pools.extend(d.descs().iter().map(|s| s.pool));
            if keep(got.len()) {
                held.push(d);
            }
        }
        if got.len() == data.len() {
            return (got, pools);
        }
    }
    panic!("{} of {} bytes arrived", got.len(), data.len());
}

#[test]
fn handed_off_input_lands_in_the_hand_off_pool_and_nothing_else_does() {
    let mut n = net_with_hand_off(64);
    let (ca, cb) = n.connect();
    let mut held = Vec::new();
    let head = pattern(3000, 1);
    let (got, pools) = send_and_receive(&mut n, ca, cb, &head, &mut held, |_| false);
    assert_eq!(got, head);
    assert!(pools.iter().all(|&p| p == NET), "before the hand-off: the shared pool");

    n.b.set_hand_off(cb, true).unwrap();
    let body = pattern(100_000, 2);
    let (got, pools) = send_and_receive(&mut n, ca, cb, &body, &mut held, |_| false);
    assert!(got == body, "byte for byte, in order");
    assert!(pools.iter().all(|&p| p == HAND_OFF), "handed off: the hand-off pool only");
    assert_eq!(n.b.stats().rx_hand_off, body.len() as u64);
    assert_eq!(n.b.stats().rx_hand_off_fallback, 0);

    n.b.set_hand_off(cb, false).unwrap();
    let next = pattern(5000, 3);
    let (got, pools) = send_and_receive(&mut n, ca, cb, &next, &mut held, |_| false);
    assert_eq!(got, next);
    assert!(pools.iter().all(|&p| p == NET), "after the hand-off: the shared pool again");
}

#[test]
fn a_full_hand_off_pool_falls_back_to_the_shared_pool_and_loses_nothing() {
    // 8 pages: the client holds its first 32 KiB of input, so the pool
    // runs out; later input goes to the shared pool (counted), and once
    // the client lets go, to the hand-off pool again.
    let mut n = net_with_hand_off(8);
    let (ca, cb) = n.connect();
    n.b.set_hand_off(cb, true).unwrap();
    let mut held = Vec::new();
    let body = pattern(200_000, 4);
    let (got, pools) = send_and_receive(&mut n, ca, cb, &body[..100_000], &mut held, |len| len <= 32 * 1024);
    assert!(got[..] == body[..100_000]);
    assert!(pools.contains(&HAND_OFF) && pools.contains(&NET), "{pools:?}");
    let s = n.b.stats();
    assert!(s.rx_hand_off_fallback > 0);
    assert_eq!(s.rx_hand_off + s.rx_hand_off_fallback, 100_000);
    held.clear();
    let (got, pools) = send_and_receive(&mut n, ca, cb, &body[100_000..], &mut held, |_| false);
    assert!(got[..] == body[100_000..]);
    assert!(pools.iter().all(|&p| p == HAND_OFF), "room again: the hand-off pool");
}

#[test]
fn a_hand_off_without_a_hand_off_pool_is_refused() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let (_, cb) = n.connect();
    assert_eq!(n.b.set_hand_off(cb, true), Err(NetError::InvalidArgument));
    assert_eq!(n.b.set_hand_off(cb, false), Ok(()));
    assert_eq!(n.b.set_hand_off(cb + 1000, false), Err(NetError::NotFound));
}
