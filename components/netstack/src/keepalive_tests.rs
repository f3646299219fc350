//! A keep-alive client fetching 1 MiB again and again from a server that is
//! driven the way the netstack component drives the stack: it runs only
//! when frames arrive, when its client (httpd) hands it requests, or when
//! the ticker wakes it (every 200 ms: 20 Hz, every 4th tick). Nothing else
//! polls it, so a segment it could send but did not is sent at the next
//! tick at the earliest: a stall.
//!
//! The peer stands for the host's Linux TCP on a TAP device where it
//! matters here: its receive window (4 MiB, as Linux's autotuning grows it)
//! is larger than our send window, and it acknowledges a burst that
//! arrives in one batch with one cumulative ACK (delayed ACKs; QEMU hands
//! the guest's frames over in batches). The server then sees everything in
//! flight acknowledged at once, with nothing more to come from the peer.

use alloc::vec::Vec;

use iolite::{Aggregate, CopyMode, Trust};

use crate::api::{Event, Request, Session};
use crate::tests::{cfg, domain, make, pattern, Port};
use crate::{NetStack, Recv, TcpState, TxChecksum};

/// The ticker's period for netstack (20 Hz, `net_every = 4`).
const TICK_MS: u64 = 200;
/// What httpd hands netstack per `Send`: reads of 15 file-cache chunks.
const PIECE: usize = 15 * 16 * 1024;

struct Outcome {
    /// Response bodies, as the client received them.
    bodies: Vec<Vec<u8>>,
    /// Ticker wake-ups (no frame arrived, no request) after which the
    /// server put payload on the wire: data that waited for the ticker.
    ticker_rescues: u32,
    /// Simulated milliseconds for all responses.
    elapsed_ms: u64,
}

fn fetch_repeatedly(mode: CopyMode, responses: usize, body: &[u8]) -> Outcome {
    let (da, db) = (domain(64, Trust::Trusted), domain(1024, Trust::Trusted));
    let mut client_cfg = cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached);
    client_cfg.recv_window = 4 << 20;
    let mut a = NetStack::new(da, client_cfg, 0);
    let mut b = NetStack::new(db, cfg(2, 16, mode, TxChecksum::Cached), 0);
    let (mut pa, mut pb) = Port::pair(da, db, 0);
    let file = make(db, body);

    let mut sess = Session::new(1024);
    sess.handle(&mut b, Request::Listen { port: 80, backlog: 4 }.encode(), Aggregate::new(db));
    let ca = a.connect(([10, 0, 2, 16], 80), 40000).unwrap();

    let mut now = 0u64;
    let mut next_tick = TICK_MS;
    let mut conn = None;
    let mut request = Vec::new();
    let mut requests_sent = 0;
    let mut bodies = Vec::new();
    let mut current = Vec::new();
    let mut ticker_rescues = 0;
    for _ in 0..2_000_000 {
        // The client: the host's stack, always responsive.
        a.poll(now, &mut pa);
        while let Ok(Recv::Data(d)) = a.recv(ca, usize::MAX) {
            d.slices().for_each(|s| current.extend_from_slice(s));
            if current.len() >= body.len() {
                bodies.push(core::mem::take(&mut current));
            }
        }
        if bodies.len() == responses {
            return Outcome { bodies, ticker_rescues, elapsed_ms: now };
        }

        let open = a.state(ca) == Ok(TcpState::Established);
        if open && requests_sent == bodies.len() && requests_sent < responses {
            a.send(ca, make(da, b"GET /file-1m.bin HTTP/1.1\r\n\r\n")).unwrap();
            requests_sent += 1;
            a.poll(now, &mut pa);
        }

        // The server: only frames, its client's requests or the ticker wake it.
        let frames = !pb.inbox.borrow().is_empty();
        let tick = now >= next_tick;
        if tick {
            next_tick = now + TICK_MS;
        }
        if frames || tick {
            let on_wire = pb.payload_on_wire;
            sess.run(&mut b, now, &mut pb);
            // Events go to httpd, which answers at once; its requests are
            // handled in the next pass of the same round (component.rs).
            let mut answered = false;
            while let Some((ev, _, agg)) = sess.next_event() {
                match ev {
                    Event::Accepted { conn: c, .. } => conn = Some(c),
                    Event::Data { conn: c } if Some(c) == conn => {
                        agg.unwrap().slices().for_each(|s| request.extend_from_slice(s));
                        while let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                            request.drain(..end + 4);
                            for off in (0..body.len()).step_by(PIECE) {
                                let piece = file.range(off, PIECE.min(body.len() - off)).unwrap();
                                sess.handle(&mut b, Request::Send { conn: c }.encode(), piece);
                            }
                            answered = true;
                        }
                    }
                    // A window that closes: httpd would stop pulling the
                    // file; here all of it is queued already.
                    Event::Window { .. } | Event::Peer { .. } | Event::Listening { .. } => {}
                    e => panic!("unexpected event {e:?}"),
                }
            }
            if answered {
                sess.run(&mut b, now, &mut pb);
            }
            if tick && !frames && !answered && pb.payload_on_wire > on_wire {
                ticker_rescues += 1;
            }
        }

        // Time: a millisecond per exchange while frames are on the wire,
        // otherwise on to the next timer (the client's delayed ACK or
        // retransmission, or the ticker).
        let busy = !pa.inbox.borrow().is_empty() || !pb.inbox.borrow().is_empty();
        let until_tick = next_tick.saturating_sub(now).max(1);
        now += if busy { 1 } else { a.poll_delay(now).unwrap_or(until_tick).clamp(1, until_tick) };
    }
    panic!("{} of {responses} responses after {now} simulated ms", bodies.len());
}

fn never_waits_for_the_ticker(mode: CopyMode) {
    let body = pattern(1 << 20, 13);
    let out = fetch_repeatedly(mode, 6, &body);
    for (i, got) in out.bodies.iter().enumerate() {
        assert!(got[..] == body[..], "response {i}: {} bytes, not the file's", got.len());
    }
    assert_eq!(
        out.ticker_rescues, 0,
        "sendable data waited for the ticker {} times ({} simulated ms for 6 MiB)",
        out.ticker_rescues, out.elapsed_ms
    );
    // Each response is far quicker than one ticker period.
    assert!(out.elapsed_ms < 6 * TICK_MS / 2, "6 responses took {} simulated ms", out.elapsed_ms);
}

#[test]
fn keep_alive_mib_responses_never_wait_for_the_ticker() {
    never_waits_for_the_ticker(CopyMode::IoLite);
}

#[test]
fn keep_alive_mib_responses_never_wait_for_the_ticker_in_posix_mode() {
    never_waits_for_the_ticker(CopyMode::Posix);
}
