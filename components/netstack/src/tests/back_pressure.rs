//! The copy modes under back-pressure.
//!
//! In flash and posix mode every frame is a copy in the stack's own pool,
//! held until the NIC has sent it. When the pool filled up (8 keep-alive
//! clients on 1 MiB files), the device layer let smoltcp write the segment
//! and then dropped it: smoltcp counted it as sent, so it went out again
//! only after a retransmission timeout (>= 1 s). And every socket of a
//! listen backlog held a whole send ring, so the heap ran out. These tests
//! reproduce both.

use super::*;

/// Per-thread heap accounting, so that a test can measure what the stack
/// allocates (tests run on their own threads).
mod heap {
    use core::cell::Cell;
    use std::alloc::{GlobalAlloc, Layout, System};

    std::thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    pub struct Counting;

    // SAFETY: forwards to the system allocator; only counts.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            // SAFETY: the caller's contract is passed on.
            let p = unsafe { System.alloc(l) };
            if !p.is_null() {
                let _ = LIVE.try_with(|c| c.set(c.get() + l.size() as isize));
            }
            p
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: the caller's contract is passed on.
            unsafe { System.dealloc(p, l) };
            let _ = LIVE.try_with(|c| c.set(c.get() - l.size() as isize));
        }
    }

    #[global_allocator]
    static A: Counting = Counting;

    /// Bytes this thread has allocated and not freed.
    pub fn live() -> isize {
        LIVE.with(|c| c.get())
    }
}

/// Opens `k` connections from A to B:80 (B listens with `backlog`);
/// returns (A's ids, B's ids) in the same order. B accepts as it can.
fn connect_many(n: &mut Net, k: usize, backlog: usize) -> (Vec<ConnId>, Vec<Option<ConnId>>) {
    n.b.listen(80, backlog).unwrap();
    let ca: Vec<ConnId> = (0..k).map(|i| n.a.connect(([10, 0, 2, 16], 80), 49200 + i as u16).unwrap()).collect();
    for _ in 0..10_000 {
        n.step();
        if ca.iter().all(|&c| n.a.state(c) == Ok(TcpState::Established)) {
            break;
        }
    }
    assert!(ca.iter().all(|&c| n.a.state(c) == Ok(TcpState::Established)), "all connected");
    (ca, alloc::vec![None; k])
}

/// B's id of the connection from A's local port (after `accept`).
fn port_of(n: &Net, cb: ConnId) -> u16 {
    n.b.conns.iter().find(|c| c.id == cb).and_then(|c| c.tuple).map(|t| t.3).unwrap()
}

/// Four copy-mode connections push 256 KiB each through a NIC that holds
/// frames until it sends them, 8 per step, from a pool of 40 pages (about
/// 80 frames): far less than the windows allow in flight. Nothing may be
/// dropped, and nothing sent twice (no retransmission timeout).
fn copy_mode_back_pressure(mode: CopyMode) {
    let (da, db) = (domain_with(40, 1024, Trust::Trusted), domain(1024, Trust::Trusted));
    let a = NetStack::new(da, cfg(1, 15, mode, TxChecksum::Cached), 0);
    let b = NetStack::new(db, cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached), 0);
    let (mut pa, pb) = Port::pair(da, db, 0);
    (pa.ring, pa.rate) = (1024, 8);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    let (ca, mut cb) = connect_many(&mut n, 4, 4);
    let data: Vec<Vec<u8>> = (0..4).map(|i| pattern(256 * 1024, 100 + i)).collect();
    let mut queued: Vec<VecDeque<Aggregate<'static>>> = data.iter().map(|d| mib_aggs(n.da, d)).collect();
    let mut got: Vec<Vec<u8>> = alloc::vec![Vec::new(); 4];
    let t0 = n.now;
    for step in 0.. {
        assert!(step < 200_000, "stalled: {:?} of 262144 each", got.iter().map(|g| g.len()).collect::<Vec<_>>());
        for (i, q) in queued.iter_mut().enumerate() {
            while let Some(x) = q.pop_front() {
                match n.a.send(ca[i], x) {
                    Ok(()) => {}
                    Err((NetError::WouldBlock, x)) => {
                        q.push_front(x);
                        break;
                    }
                    Err((e, _)) => panic!("send: {e:?}"),
                }
            }
        }
        n.step();
        while let Some(c) = n.b.accept(80) {
            let i = (port_of(&n, c) - 49200) as usize;
            cb[i] = Some(c);
        }
        for i in 0..4 {
            let Some(c) = cb[i] else { continue };
            while let Ok(Recv::Data(d)) = n.b.recv(c, usize::MAX) {
                d.slices().for_each(|s| got[i].extend_from_slice(s));
            }
        }
        if got.iter().all(|g| g.len() == 256 * 1024) {
            break;
        }
    }
    let s = n.a.stats();
    std::println!(
        "{mode:?}: {} ms simulated, {} frames, {} deferred, {} dropped, {} payload bytes on the wire",
        n.now - t0,
        s.tx_frames,
        s.tx_deferred,
        s.tx_dropped,
        n.pa.payload_on_wire
    );
    for i in 0..4 {
        assert!(got[i] == data[i], "connection {i} byte-exact");
    }
    assert_eq!(s.tx_dropped, 0, "no frame dropped: {s:?}");
    assert_eq!(n.pa.payload_on_wire, 4 * 256 * 1024, "every byte sent once (no timeout retransmission)");
    assert!(s.tx_deferred > 0, "the pool did run full (the test exercises back-pressure)");
    assert_eq!(n.pa.bad_checksums, 0);
}

#[test]
fn posix_mode_waits_for_frame_buffers_instead_of_dropping() {
    copy_mode_back_pressure(CopyMode::Posix);
}

#[test]
fn flash_mode_waits_for_frame_buffers_instead_of_dropping() {
    copy_mode_back_pressure(CopyMode::Flash);
}

#[test]
fn iolite_mode_waits_for_header_buffers_instead_of_dropping() {
    // Headers are small and packed, so a pool this small is what it takes.
    let (da, db) =
        (domain_with(2 + crate::device::REPLY_RESERVE_PAGES, 1024, Trust::Trusted), domain(1024, Trust::Trusted));
    let a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let b = NetStack::new(db, cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached), 0);
    let (mut pa, pb) = Port::pair(da, db, 0);
    (pa.ring, pa.rate) = (4096, 16);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    let (ca, cb) = n.connect();
    let data = pattern(1 << 20, 7);
    let got = n.transfer(ca, cb, mib_aggs(n.da, &data), data.len());
    assert!(got == data);
    let s = n.a.stats();
    assert_eq!(s.tx_dropped, 0, "{s:?}");
    assert_eq!(n.pa.payload_on_wire, data.len() as u64, "{s:?}");
    assert!(s.tx_deferred > 0, "{s:?}");
}

/// A copy-mode listener's backlog costs receive rings only: the send ring
/// comes with `accept` (it used to be allocated for every backlog socket:
/// 64 x 128 KiB of netstack's 16 MiB heap for one idle listener).
#[test]
fn copy_mode_backlog_does_not_hold_send_rings() {
    for mode in [CopyMode::Flash, CopyMode::Posix] {
        let d = domain(16, Trust::Trusted);
        let c = cfg(2, 16, mode, TxChecksum::Cached);
        let (recv, send) = (c.recv_window, c.send_window);
        let mut s = NetStack::new(d, c, 0);
        let before = heap::live();
        s.listen(80, 64).unwrap();
        let used = (heap::live() - before) as usize;
        assert!(used < 64 * recv + 64 * 1024, "{mode:?}: 64 listening sockets took {used} bytes of heap");
        assert!(used < 64 * (recv + send));
        assert_eq!(s.socket_memory(), 64 * recv);
    }
}

/// With more connections than `socket_memory` allows rings for, the stack
/// stays within it: connections wait in the backlog (they are established
/// and can receive) and are accepted as finished ones give their rings
/// back; every response arrives complete. Nothing panics, nothing is lost.
#[test]
fn copy_mode_connections_wait_for_ring_memory_and_all_complete() {
    let (da, db) = (domain(1024, Trust::Trusted), domain_with(512, 1024, Trust::Trusted));
    let a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let mut cb_cfg = cfg(2, 16, CopyMode::Posix, TxChecksum::Cached);
    cb_cfg.recv_window = 16 * 1024;
    cb_cfg.send_window = 64 * 1024;
    // Rings for 8 listening sockets and 2 connections at a time.
    cb_cfg.socket_memory = 8 * 16 * 1024 + 2 * 64 * 1024 + 2 * 16 * 1024;
    let budget = cb_cfg.socket_memory;
    let b = NetStack::new(db, cb_cfg, 0);
    let (pa, pb) = Port::pair(da, db, 0);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    let k = 6;
    let (ca, mut cb) = connect_many(&mut n, k, 8);
    let body: Vec<Vec<u8>> = (0..k).map(|i| pattern(100_000, 200 + i as u32)).collect();
    let mut pending: Vec<VecDeque<Aggregate<'static>>> = (0..k).map(|_| VecDeque::new()).collect();
    // Allocated before the heap is measured (what the "client" keeps).
    let mut got: Vec<Vec<u8>> = (0..k).map(|_| Vec::with_capacity(100_000)).collect();
    let mut eof = alloc::vec![false; k];
    let mut most_live = 0;
    let heap0 = heap::live();
    let mut most_heap = 0isize;
    for step in 0.. {
        assert!(step < 400_000, "stalled: {:?}", got.iter().map(|g| g.len()).collect::<Vec<_>>());
        while let Some(c) = n.b.accept(80) {
            let i = (port_of(&n, c) - 49200) as usize;
            cb[i] = Some(c);
            // The response: 100 000 bytes, then close.
            pending[i] = mib_aggs(db, &body[i]);
        }
        for i in 0..k {
            let Some(c) = cb[i] else { continue };
            while let Some(x) = pending[i].pop_front() {
                match n.b.send(c, x) {
                    Ok(()) => {}
                    Err((NetError::WouldBlock, x)) => {
                        pending[i].push_front(x);
                        break;
                    }
                    Err((e, _)) => panic!("send: {e:?}"),
                }
            }
            if pending[i].is_empty() && n.b.exists(c) && n.b.state(c) == Ok(TcpState::Established) {
                n.b.close(c).unwrap();
            }
        }
        n.step();
        for i in 0..k {
            loop {
                match n.a.recv(ca[i], usize::MAX) {
                    Ok(Recv::Data(d)) => d.slices().for_each(|s| got[i].extend_from_slice(s)),
                    Ok(Recv::Eof) if !eof[i] => {
                        eof[i] = true;
                        n.a.close(ca[i]).unwrap();
                        break;
                    }
                    _ => break,
                }
            }
        }
        assert!(n.b.socket_memory() <= budget, "{} > {budget}", n.b.socket_memory());
        most_heap = most_heap.max(heap::live() - heap0);
        most_live = most_live
            .max(cb.iter().flatten().filter(|&&c| n.b.exists(c) && n.b.state(c) == Ok(TcpState::Established)).count());
        if eof.iter().all(|&e| e) {
            break;
        }
    }
    for i in 0..k {
        assert!(got[i] == body[i], "response {i} complete and exact");
    }
    let s = n.b.stats();
    assert!(s.accept_deferred > 0, "connections did wait for memory: {s:?}");
    assert!(most_live <= 2, "at most 2 connections had rings at once, saw {most_live}");
    // The heap grew by the rings of 2 connections (and the listeners'
    // refills) plus frames on the wire, not by 6 connections' rings.
    assert!((most_heap as usize) < budget + 64 * 1024, "heap growth {most_heap}, ring budget {budget}");
    assert_eq!(s.tx_dropped, 0);
}

/// One round of both stacks 1 ms later (`Net::step` skips idle time up to
/// the stacks' next timer: here, time must stay short of TIME-WAIT's end).
fn tick(n: &mut Net) {
    n.pa.pump();
    n.pb.pump();
    n.a.poll(n.now, &mut n.pa);
    n.b.poll(n.now, &mut n.pb);
    n.now += 1;
}

/// Serves `count` connections in a row, each answered and closed by the
/// server first (so the server's side waits in TIME-WAIT), with rings for
/// four sockets and TIME-WAIT kept for at most `time_wait_cap`, the client
/// on a new port each time or always on the same one (`same_port`).
/// Returns the number served before one was refused or not answered
/// within 2 s, and the server's stats.
fn serve_server_closed_in_a_row(time_wait_cap: usize, count: usize, same_port: bool) -> (usize, crate::NetStats) {
    let (da, db) = (domain(1024, Trust::Trusted), domain(1024, Trust::Trusted));
    let a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let mut cb_cfg = cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached);
    cb_cfg.recv_window = 16 * 1024;
    cb_cfg.socket_memory = 4 * 16 * 1024;
    cb_cfg.time_wait_cap = time_wait_cap;
    let b = NetStack::new(db, cb_cfg, 0);
    let (pa, pb) = Port::pair(da, db, 0);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    n.b.listen(80, 2).unwrap();
    let start = n.now;
    for i in 0..count {
        let body = pattern(100 + i, i as u32);
        let port = if same_port { 50000 } else { 50000 + i as u16 };
        let ca = n.a.connect(([10, 0, 2, 16], 80), port).unwrap();
        let mut served = None;
        for _ in 0..2000 {
            tick(&mut n);
            if let Some(cb) = n.b.accept(80) {
                served = Some(cb);
                break;
            }
            if n.a.state(ca) == Ok(TcpState::Closed) {
                break; // reset: no socket was listening
            }
        }
        let Some(cb) = served else {
            return (i, n.b.stats());
        };
        n.b.send(cb, make(db, &body)).map_err(|(e, _)| e).unwrap();
        n.b.close(cb).unwrap();
        let mut got = Vec::new();
        for _ in 0..2000 {
            tick(&mut n);
            match n.a.recv(ca, usize::MAX) {
                Ok(Recv::Data(d)) => d.slices().for_each(|s| got.extend_from_slice(s)),
                Ok(Recv::Eof) => break,
                _ => {}
            }
        }
        assert_eq!(got, body, "connection {i}: the response, byte-exact");
        n.a.close(ca).unwrap();
        while n.a.exists(ca) {
            tick(&mut n);
        }
    }
    // All of it well within smoltcp's TIME-WAIT delay (10 s): no socket
    // left TIME-WAIT by its timer.
    assert!(n.now - start < 10_000, "took {} ms", n.now - start);
    (count, n.b.stats())
}

/// A web server closes its connections first (HTTP/1.0 clients,
/// `Connection: close`), so its side of each waits in TIME-WAIT. Without a
/// cap, a few of them take every ring the budget allows and the next
/// client is refused (measured on the real image: about 300 served, then
/// thousands of resets). With the cap, the oldest is dropped silently
/// (never a segment: the peer has closed) and every client is served.
#[test]
fn connections_we_closed_first_do_not_wait_for_time_wait() {
    let (served, s) = serve_server_closed_in_a_row(usize::MAX, 40, false);
    assert!(served < 40, "without a cap, TIME-WAIT fills the rings: {served} served, {s:?}");
    assert_eq!(s.time_wait_recycled, 0);
    let (served, s) = serve_server_closed_in_a_row(1, 40, false);
    assert_eq!(served, 40, "{s:?}");
    assert!(s.time_wait_recycled >= 38, "{s:?}");
}

/// A client that opens its next connection from the port of one we
/// closed first, while ours still waits in TIME-WAIT (Linux reuses such
/// ports on loopback, and QEMU's port forward passes the host client's
/// port on to the guest). smoltcp dropped that SYN without a word, so the
/// client got in only after TIME-WAIT (10 s). Now a SYN beyond the old
/// connection's sequence numbers reopens it at once, and any other gets an
/// ACK that makes the client reset the old one and retransmit: each of
/// these six is served within 2 s of its connect. (smoltcp's ISNs are
/// random: of the five reuses here, four reopen and one takes the ACK.)
#[test]
fn a_new_connection_on_the_ports_of_one_in_time_wait_gets_in() {
    let (served, s) = serve_server_closed_in_a_row(64, 6, true);
    assert_eq!(served, 6, "{s:?}");
    assert_eq!(s.time_wait_recycled, 0, "not by the cap: {s:?}");
}
