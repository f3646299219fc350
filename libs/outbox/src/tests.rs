use std::vec::Vec;

use iolite::testing::{bytes, make, map, own};
use iolite::{init_channel, Attach, ChannelRx, ChannelTx, Domain, Error, Geometry, PeerId};

use super::Outbox;

/// A ring of `room` free slots; what it took, in order.
struct Ring {
    room: usize,
    took: Vec<u32>,
}

impl Ring {
    fn new(room: usize) -> Self {
        Self { room, took: Vec::new() }
    }
    fn offer(&mut self, m: u32) -> Result<(), u32> {
        if self.room == 0 {
            return Err(m);
        }
        self.room -= 1;
        self.took.push(m);
        Ok(())
    }
}

#[test]
fn sends_at_once_while_nothing_waits() {
    let mut ring = Ring::new(8);
    let mut q = Outbox::new(4);
    for m in 0..5 {
        q.send(m, |m| ring.offer(m)).unwrap();
    }
    assert_eq!(ring.took, [0, 1, 2, 3, 4]);
    assert!(q.is_empty());
    assert_eq!((q.queued(), q.refused(), q.peak()), (0, 0, 0));
}

#[test]
fn nothing_overtakes_what_waits() {
    let mut ring = Ring::new(1);
    let mut q = Outbox::new(16);
    q.send(0, |m| ring.offer(m)).unwrap();
    // Full: these wait.
    q.send(1, |m| ring.offer(m)).unwrap();
    q.send(2, |m| ring.offer(m)).unwrap();
    assert_eq!(q.len(), 2);
    // Room for one: the oldest waiting one takes it, not the new one.
    ring.room = 1;
    q.send(3, |m| ring.offer(m)).unwrap();
    assert_eq!(ring.took, [0, 1]);
    assert_eq!(q.len(), 2, "2 and 3 wait, in that order");
    // Room for all: a send drains first, then goes.
    ring.room = 10;
    q.send(4, |m| ring.offer(m)).unwrap();
    assert_eq!(ring.took, [0, 1, 2, 3, 4]);
    assert!(q.is_empty());
    assert_eq!(q.queued(), 3);
    assert_eq!(q.peak(), 2);
}

#[test]
fn a_small_message_does_not_slip_past_a_large_one_that_waits() {
    // A ring whose room is in bytes and takes whole messages only (as a
    // quota of held buffers): it refuses a large message and would take a
    // small one.
    let mut space = 4usize;
    let mut took: Vec<&str> = Vec::new();
    let mut ring = |m: &'static str, space: &mut usize| {
        if m.len() > *space {
            return Err(m);
        }
        *space -= m.len();
        took.push(m);
        Ok(())
    };
    let mut q = Outbox::new(4);
    q.send("large message", |m| ring(m, &mut space)).unwrap();
    q.send("ok", |m| ring(m, &mut space)).unwrap();
    assert_eq!(q.len(), 2, "the small one waits behind the large one");
    space = 100;
    q.drain(|m| ring(m, &mut space));
    assert_eq!(took, ["large message", "ok"]);
}

#[test]
fn order_is_kept_under_any_pattern_of_room() {
    // Room appears in a fixed but irregular pattern; every message arrives
    // exactly once and in order.
    let mut ring = Ring::new(0);
    let mut q = Outbox::new(1000);
    let mut next = 0u32;
    for round in 0..200u32 {
        ring.room += [0, 0, 1, 3, 0, 2][round as usize % 6];
        for _ in 0..(round % 4) {
            q.send(next, |m| ring.offer(m)).unwrap();
            next += 1;
        }
        if round % 3 == 0 {
            q.drain(|m| ring.offer(m));
        }
    }
    ring.room = usize::MAX;
    q.drain(|m| ring.offer(m));
    assert_eq!(ring.took, (0..next).collect::<Vec<_>>());
    assert!(q.queued() > 0, "the pattern made messages wait");
}

#[test]
fn a_full_queue_hands_the_message_back_and_counts_it() {
    let mut ring = Ring::new(0);
    let mut q = Outbox::new(3);
    for m in 0..3 {
        q.send(m, |m| ring.offer(m)).unwrap();
    }
    assert_eq!(q.room(), 0);
    assert_eq!(q.send(3, |m| ring.offer(m)), Err(3));
    assert_eq!(q.push(4), Err(4));
    assert_eq!((q.len(), q.refused()), (3, 2), "bounded: nothing beyond the cap is kept");
    // What did wait is intact and goes first once there is room.
    ring.room = 2;
    assert_eq!(q.drain(|m| ring.offer(m)), 2);
    assert_eq!(ring.took, [0, 1]);
    assert_eq!(q.room(), 2);
    q.send(5, |m| ring.offer(m)).unwrap();
    ring.room = 9;
    q.drain(|m| ring.offer(m));
    assert_eq!(ring.took, [0, 1, 2, 5]);
}

#[test]
fn a_zero_bound_never_keeps_anything() {
    let mut ring = Ring::new(1);
    let mut q = Outbox::new(0);
    assert_eq!(q.send(1, |m| ring.offer(m)), Ok(()));
    assert_eq!(q.send(2, |m| ring.offer(m)), Err(2));
    assert_eq!((q.len(), q.refused()), (0, 1));
}

#[test]
fn drain_stops_at_the_first_refusal_and_keeps_the_rest() {
    let mut ring = Ring::new(0);
    let mut q = Outbox::new(8);
    for m in 0..6 {
        q.push(m).unwrap();
    }
    assert_eq!(q.drain(|m| ring.offer(m)), 0);
    ring.room = 4;
    assert_eq!(q.drain(|m| ring.offer(m)), 4);
    assert_eq!(q.len(), 2);
    ring.room = 4;
    assert_eq!(q.drain(|m| ring.offer(m)), 2);
    assert_eq!(ring.took, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_ring_that_takes_part_of_a_message_keeps_the_rest_first() {
    // A byte stream with `room` bytes of space: it takes what fits of a
    // message and hands back the tail (as a TCP send window).
    let mut space = 5usize;
    let mut stream: Vec<u8> = Vec::new();
    let mut take = |mut m: Vec<u8>, space: &mut usize| -> Result<(), Vec<u8>> {
        let n = m.len().min(*space);
        stream.extend(m.drain(..n));
        *space -= n;
        if m.is_empty() {
            Ok(())
        } else {
            Err(m)
        }
    };
    let mut q = Outbox::new(4);
    q.send(b"hello ".to_vec(), |m| take(m, &mut space)).unwrap();
    q.send(b"world".to_vec(), |m| take(m, &mut space)).unwrap();
    assert_eq!(q.len(), 2, "the tail of the first and the second wait");
    space = 3;
    q.drain(|m| take(m, &mut space));
    space = 100;
    q.drain(|m| take(m, &mut space));
    assert!(q.is_empty());
    assert_eq!(stream, b"hello world");
}

#[test]
fn clear_and_shrink() {
    let mut q = Outbox::new(100);
    for m in 0..50 {
        q.push(m).unwrap();
    }
    assert_eq!(q.clear(), 50);
    assert!(q.is_empty());
    q.shrink();
    assert_eq!(q.queue.capacity(), 0, "an empty queue gives its memory back");
    q.push(1).unwrap();
    q.shrink();
    assert_eq!(q.len(), 1, "a queue that is not empty keeps what waits");
}

/// In front of an IO-Lite channel: aggregates wait for ring slots, go in
/// order once the receiver takes some, and a full queue hands the
/// aggregate (and its buffers) back instead of keeping it.
#[test]
fn in_front_of_an_iolite_channel() {
    let a: &'static Domain = Box::leak(Box::new(Domain::new()));
    let b: &'static Domain = Box::leak(Box::new(Domain::new()));
    map(b, 1, own(a, 1, 32));
    let geometry = Geometry { fwd: 4, rel: 16 };
    let shared = iolite::testing::region(geometry.bytes());
    // SAFETY: a fresh region, initialised once and shared by these two ends.
    let (mut tx, mut rx) = unsafe {
        init_channel(shared, geometry).unwrap();
        (
            ChannelTx::attach(Attach { domain: a, peer: PeerId(0), region: shared, geometry }).unwrap(),
            ChannelRx::attach(Attach { domain: b, peer: PeerId(0), region: shared, geometry }).unwrap(),
        )
    };
    let ring = |tx: &mut ChannelTx<'static>, (tag, agg)| tx.send(agg, tag, 0).map_err(|(_, agg)| (tag, agg));
    let mut q = Outbox::new(6);
    for tag in 0..10u64 {
        let msg = (tag, make(a, 1, format!("message {tag}").as_bytes()));
        assert!(q.send(msg, |m| ring(&mut tx, m)).is_ok(), "4 fit the ring, 6 the queue");
    }
    assert_eq!((q.len(), q.refused()), (6, 0), "4 in the ring, 6 wait");
    assert_eq!(q.send((10, make(a, 1, b"one too many")), |m| ring(&mut tx, m)).map_err(|(t, _)| t), Err(10));
    assert_eq!(q.refused(), 1);
    let mut got = Vec::new();
    while got.len() < 10 {
        while let Some(m) = rx.recv().unwrap() {
            got.push((m.tag, bytes(&m.agg)));
        }
        let _ = rx.flush_releases();
        q.drain(|m| ring(&mut tx, m));
    }
    let want: Vec<(u64, Vec<u8>)> = (0..10u64).map(|t| (t, format!("message {t}").into_bytes())).collect();
    assert_eq!(got, want, "every aggregate once, in order, intact");
    assert!(q.is_empty());
    // Full ring, nothing waiting: a send that finds it full queues.
    for t in 20..24u64 {
        q.send((t, make(a, 1, b"x")), |m| ring(&mut tx, m)).unwrap();
    }
    assert!(q.is_empty());
    q.send((24, make(a, 1, b"y")), |m| ring(&mut tx, m)).unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(tx.send(make(a, 1, b"z"), 99, 0).err().map(|(e, _)| e), Some(Error::Full));
}
