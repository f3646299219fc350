//! Frames lost with a dead driver (netdrv restarted: what it had taken
//! from the link never reaches the wire) are resent as soon as the new
//! driver is attached ([`NetStack::retransmit_now`], smoltcp patch 0008),
//! not after the retransmission timeout (at least a second in smoltcp).

use alloc::vec::Vec;

use iolite::CopyMode;

use super::{make, pattern, Net};
use crate::{Recv, TxChecksum};

/// Sends 16 KiB from A, loses every frame A put on the wire, then runs
/// until B has it all; returns the simulated milliseconds that took.
fn lose_in_flight_and_recover(resend_now: bool) -> u64 {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let (ca, cb) = n.connect();
    let data = pattern(16 * 1024, 5);
    n.a.send(ca, make(n.da, &data)).map_err(|(e, _)| e).unwrap();
    n.a.poll(n.now, &mut n.pa);
    // The driver dies with them.
    let lost = n.pa.outbox.borrow().len();
    assert!(lost >= 2, "only {lost} frames were in flight");
    n.pa.outbox.borrow_mut().clear();
    if resend_now {
        assert!(n.a.retransmit_now() >= 1);
    }
    let t0 = n.now;
    let mut got = Vec::new();
    for _ in 0..100_000 {
        n.step();
        while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
            for s in d.slices() {
                got.extend_from_slice(s);
            }
        }
        if got.len() >= data.len() {
            break;
        }
    }
    assert_eq!(got, data, "byte-exact after the loss");
    n.now - t0
}

#[test]
fn frames_lost_with_a_dead_driver_are_resent_at_once() {
    let waited = lose_in_flight_and_recover(false);
    let resent = lose_in_flight_and_recover(true);
    assert!(waited >= 1000, "without: {waited} ms (smoltcp's RTO is at least a second)");
    assert!(resent < 50, "with retransmit_now: {resent} ms");
}

#[test]
fn retransmit_now_leaves_idle_connections_alone() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let (ca, _cb) = n.connect();
    for _ in 0..20 {
        n.step();
    }
    let before = n.pa.payload_on_wire;
    n.a.retransmit_now();
    for _ in 0..20 {
        n.step();
    }
    assert_eq!(n.pa.payload_on_wire, before, "nothing was unacknowledged: nothing resent");
    assert_eq!(n.a.send_queued(ca).unwrap(), 0);
}
