//! A connection nobody touches for a long time still has its timers
//! served. After a poll, the stack looks only at the connections a
//! segment, the user or a due timer touched (smoltcp patch 0009 and
//! `NetStack::after_poll`); a connection whose segments were all lost,
//! whose peer so has nothing to say and whose user waits, is touched by
//! nothing but its retransmission timer. It must still retransmit, and
//! its peer must get exactly the bytes sent, while the other connections
//! keep the stack busy (polls that are about them only).

use alloc::vec::Vec;

use iolite::CopyMode;

use super::{make, pattern, Net};
use crate::frame::parse_tcp;
use crate::{ConnId, Recv, TcpState, TxChecksum};

/// Connections besides the one that loses its segments.
const OTHERS: usize = 40;
/// The port on A (the client) of the connection that loses its segments.
const LOSER: u16 = 30000;

/// Reads everything `id` has on A.
fn read_all(n: &mut Net, id: ConnId, into: &mut Vec<u8>) {
    while let Ok(Recv::Data(d)) = n.a.recv(id, usize::MAX) {
        d.slices().for_each(|s| into.extend_from_slice(s));
    }
}

#[test]
fn an_untouched_connection_still_gets_its_retransmission() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.b.listen(80, 64).unwrap();
    let client: Vec<ConnId> =
        (0..=OTHERS as u16).map(|k| n.a.connect(([10, 0, 2, 16], 80), LOSER + k).unwrap()).collect();
    let mut server: Vec<(ConnId, u16)> = Vec::new();
    for _ in 0..20_000 {
        n.step();
        while let Some(c) = n.b.accept(80) {
            server.push((c, n.b.peer(c).unwrap().1));
        }
        if server.len() == client.len() && client.iter().all(|&c| n.a.state(c) == Ok(TcpState::Established)) {
            break;
        }
    }
    assert_eq!(server.len(), client.len(), "all connected");
    let port_of = |p: u16| server.iter().find(|s| s.1 == p).unwrap().0;
    let (loser, busy) = (port_of(LOSER), port_of(LOSER + 1));
    let db = n.b.domain();

    // The loser sends once; every segment of it is lost for a while.
    let want = pattern(12_000.min(n.b.send_space(loser).unwrap()), 5);
    n.b.send(loser, make(db, &want)).unwrap();
    let lose_until = n.now + 400;
    let (mut lost, mut got, mut busy_got) = (0, Vec::new(), Vec::new());
    let (mut busy_want, mut round) = (Vec::new(), 0u32);
    let (visits0, polls0) = (n.b.stats().poll_visits, n.now);
    for _ in 0..200_000 {
        // Another connection keeps B polling: a small send every step.
        let piece = pattern(100, round);
        round += 1;
        if n.b.send(busy, make(db, &piece)).is_ok() {
            busy_want.extend_from_slice(&piece);
        }
        n.step();
        if n.now < lose_until {
            n.pa.inbox.borrow_mut().retain(|f| {
                let hit = parse_tcp(f, f.len()).is_some_and(|t| t.dport == LOSER && t.payload_len > 0);
                lost += hit as u32;
                !hit
            });
        }
        read_all(&mut n, client[1], &mut busy_got);
        // Reading nothing sends nothing: until B retransmits, A has
        // nothing for the loser and does not touch it.
        read_all(&mut n, client[0], &mut got);
        if got.len() >= want.len() {
            break;
        }
    }
    assert!(lost > 0, "segments were lost");
    assert!(got == want, "{} of {} bytes, not the ones sent", got.len(), want.len());
    assert!(n.b.stats().tx_retransmitted > 0, "recovered by retransmission: {:?}", n.b.stats());
    // The other connections were not looked at after every poll: B's
    // visits per simulated ms (a poll each while busy) stayed near the
    // one or two connections that did something, far from all of them.
    let per_poll = (n.b.stats().poll_visits - visits0) as f64 / (n.now - polls0) as f64;
    assert!(per_poll < 4.0, "{per_poll:.1} connections looked at per poll of {}", client.len());
    assert!(!busy_got.is_empty() && busy_want.starts_with(&busy_got), "the busy connection's bytes");
}
