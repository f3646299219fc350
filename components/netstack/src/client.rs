//! One socket client as the component serves it: its duplex region
//! (requests in on channel B, events out on channel A, the `socket-api`
//! protocol), its [`Session`], and the guards that cut it off when it
//! breaks the protocol. Host-tested here; `component.rs` keeps one per
//! client region and does the logging, the signals and the death protocol.
//!
//! A client writes its whole region, so everything read from it is
//! untrusted: a corrupt ring index or a forged descriptor breaks that
//! channel ([`iolite::Guard`]) and the client is cut off
//! ([`Client::cut_off`]): its session is closed (connections reset, ports
//! no longer listened on, held-back sends and events dropped), its requests
//! are never read again, and its releases are still taken while that ring
//! is sane, so what it returns comes back. Nothing a client writes makes
//! the stack spin: [`Client::want`] asks only for what can change by the
//! client's doing, and a client that keeps every buffer it was lent (its
//! quota) stops getting events without the stack looking again and again.

use iolite::{Aggregate, Duplex, Error, Guard, Next, Want};

use crate::api::{Closed, Event, Session};
use crate::NetStack;

/// Which of a client's two channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Channel A: the stack's events (and the client's releases of them).
    Events,
    /// Channel B: the client's requests.
    Requests,
}

impl Channel {
    /// The channel's letter in the duplex region (`client.A`, `client.B`).
    pub fn letter(self) -> char {
        match self {
            Channel::Events => 'A',
            Channel::Requests => 'B',
        }
    }
}

/// A channel the client just broke, to be reported once:
/// `channel <region>.<letter> from <client> broken: <why>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The channel.
    pub channel: Channel,
    /// Why (a peer fault: `CorruptRing`, `TooManySlices`, ...).
    pub why: Error,
    /// Found in the client's releases (channel A's release ring), not in
    /// the channel's messages.
    pub releases: bool,
}

/// What one client made the stack do so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests taken.
    pub requests: u64,
    /// Events delivered.
    pub events: u64,
    /// Connections accepted for it.
    pub accepted: u64,
    /// Messages refused one by one (quota, a peer going down): the
    /// channel stayed up. A forged reference breaks it instead.
    pub refused: u64,
}

/// The one event the channel did not take, sent first next time.
struct Undelivered<'d> {
    tag: u64,
    agg: Aggregate<'d>,
    /// `Full` (the ring) or `QuotaExceeded` (the client holds its quota of
    /// our buffers): what the stack waits for differs.
    why: Error,
}

/// One client of the stack (see the module docs).
pub struct Client<'d> {
    duplex: Duplex<'d>,
    session: Session<'d>,
    requests: Guard,
    events: Guard,
    undelivered: Option<Undelivered<'d>>,
    /// Cut off ([`Client::cut_off`]): the session is closed for good.
    closed: bool,
    stats: ClientStats,
}

impl<'d> Client<'d> {
    /// A client on its attached duplex end (the stack's side) with its
    /// session.
    pub fn new(duplex: Duplex<'d>, session: Session<'d>) -> Self {
        Self {
            duplex,
            session,
            requests: Guard::new(),
            events: Guard::new(),
            undelivered: None,
            closed: false,
            stats: ClientStats::default(),
        }
    }

    /// The client's session (for [`crate::api::run`]).
    pub fn session(&mut self) -> &mut Session<'d> {
        &mut self.session
    }

    /// The client's session, to read.
    pub fn session_ref(&self) -> &Session<'d> {
        &self.session
    }

    /// The session, once the client is gone (its counters live on).
    pub fn into_session(self) -> Session<'d> {
        self.session
    }

    /// The client's region.
    pub fn duplex(&mut self) -> &mut Duplex<'d> {
        &mut self.duplex
    }

    /// What the client made the stack do.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The first channel the client broke, and why.
    pub fn broken(&self) -> Option<(Channel, Error)> {
        match (self.requests.broken(), self.events.broken()) {
            (Some(e), _) => Some((Channel::Requests, e)),
            (None, Some(e)) => Some((Channel::Events, e)),
            (None, None) => None,
        }
    }

    /// Channels broken (0, 1 or 2).
    pub fn channels_broken(&self) -> usize {
        self.requests.broken().is_some() as usize + self.events.broken().is_some() as usize
    }

    /// Whether the client was cut off.
    pub fn is_cut_off(&self) -> bool {
        self.closed
    }

    /// Applies the client's releases and handles its requests (none once
    /// it is cut off). `fault` hears of each channel that breaks now.
    pub fn take_requests(&mut self, stack: &mut NetStack<'d>, fault: &mut dyn FnMut(Fault)) {
        if let (_, Some(why)) = self.events.poll_releases(&mut self.duplex.tx) {
            fault(Fault { channel: Channel::Events, why, releases: true });
        }
        while !self.closed {
            match self.requests.recv(&mut self.duplex.rx) {
                Next::Msg(r) => {
                    self.stats.requests += 1;
                    self.session.handle(stack, r.tag, r.agg);
                }
                Next::Idle | Next::Wait(_) => break,
                // Its holds went back; the channel stays up.
                Next::Refused(_) => self.stats.refused += 1,
                Next::Broke(why) => {
                    fault(Fault { channel: Channel::Requests, why, releases: false });
                    break;
                }
            }
        }
    }

    /// Hands the session's events to the client, in order, as far as the
    /// channel takes them (the first one it refuses waits for the next
    /// round). `fault` hears of the events channel breaking.
    pub fn deliver(&mut self, fault: &mut dyn FnMut(Fault)) {
        while !self.closed {
            let (tag, agg) = match self.undelivered.take() {
                Some(u) => (u.tag, u.agg),
                None => match self.session.next_event() {
                    Some((ev, tag, agg)) => {
                        if let Event::Accepted { .. } = ev {
                            self.stats.accepted += 1;
                        }
                        (tag, agg.unwrap_or_else(|| Aggregate::new(self.duplex.rx.domain())))
                    }
                    None => break,
                },
            };
            match self.events.send(&mut self.duplex.tx, agg, tag, 0) {
                Ok(()) => self.stats.events += 1,
                Err((why, agg, broke)) => {
                    if let Some(e) = broke {
                        fault(Fault { channel: Channel::Events, why: e, releases: false });
                    }
                    if self.events.broken().is_some() {
                        // Nobody reads it: dropped (its holds released);
                        // the caller cuts the client off.
                        drop(agg);
                        break;
                    }
                    // Ring full or the client's quota: kept, in order.
                    self.undelivered = Some(Undelivered { tag, agg, why });
                    break;
                }
            }
        }
    }

    /// Ends a round: publishes releases; true if the client asked to be
    /// signalled for what happened (the caller signals it, once).
    pub fn flush(&mut self) -> bool {
        self.duplex.flush()
    }

    /// If the client broke a channel and is not cut off yet: cuts it off
    /// (see the module docs) and says what went back. Once.
    pub fn cut_off(&mut self, stack: &mut NetStack<'d>) -> Option<Closed> {
        if self.closed || self.broken().is_none() {
            return None;
        }
        Some(self.close(stack))
    }

    /// Cuts the client off whatever its channels' state (it died, or the
    /// component stops serving it): as [`Client::cut_off`].
    pub fn close(&mut self, stack: &mut NetStack<'d>) -> Closed {
        self.closed = true;
        let mut closed = self.session.close_all(stack);
        closed.events += self.undelivered.take().is_some() as usize;
        closed
    }

    /// What to ask the client for before blocking ([`Duplex::arm`]):
    /// requests while they are read; its releases while our pools run low
    /// (`starving`) or an event waits for its quota or for room; room only
    /// while an event waits for the ring. An event refused for the quota
    /// waits for releases alone: the ring may well have room, and asking
    /// for room then would say "run again" at once, for ever, while the
    /// client keeps what it holds.
    pub fn want(&self, starving: bool) -> Want {
        let to_client = self.events.broken().is_none();
        let waiting = self.undelivered.is_some();
        let for_room = self.undelivered.as_ref().is_some_and(|u| u.why == Error::Full);
        Want {
            data: !self.closed && self.requests.broken().is_none(),
            releases: (starving || waiting) && to_client,
            room: for_room && to_client,
        }
    }

    /// Before blocking: [`Client::want`] on the region; true if some of it
    /// is already there (run again instead of blocking).
    pub fn arm(&mut self, starving: bool) -> bool {
        let want = self.want(starving);
        self.duplex.arm(want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Request;
    use crate::tests::{make, Net};
    use crate::TxChecksum;
    use alloc::vec::Vec;
    use core::sync::atomic::{AtomicU32, Ordering};
    use iolite::ring::{RingConsumer, RingProducer};
    use iolite::{AggDesc, CopyMode, Domain, PeerId, RelDesc, RwRegion, SliceDesc};
    use socket_api::GEOMETRY as G;

    /// The client's peer slot in the stack's domain (as the component's).
    const CLIENT: PeerId = PeerId(1);

    /// A stack (`n.b`) with one client on a fresh region: the stack's
    /// `Client`, the client's own domain and region end (side B), and the
    /// raw region (for what a hostile client writes).
    fn setup(quota: u32) -> (Net, Client<'static>, Duplex<'static>, RwRegion) {
        let n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
        let db = n.b.domain();
        let dc: &'static Domain = iolite::testing::domain();
        db.set_quota(CLIENT, quota).unwrap();
        let (stack_end, client_end, region) = iolite::testing::duplex_ends(db, CLIENT, dc, PeerId(0), G);
        (n, Client::new(stack_end, Session::with_events(8, 64)), client_end, region)
    }

    /// The 32-bit word at `off` of the region.
    fn word(r: RwRegion, off: usize) -> &'static AtomicU32 {
        assert!(off + 4 <= r.len() && off.is_multiple_of(4));
        // SAFETY: inside the leaked test region, 4-aligned; the rings'
        // words are accessed atomically by both ends.
        unsafe { &*(r.as_ptr().add(off) as *const AtomicU32) }
    }

    /// Offsets of the rings in the region: head at +0, tail at +64.
    const EVENTS: usize = 0;
    fn event_releases() -> usize {
        G.release_ring_offset()
    }
    fn requests() -> usize {
        G.page_bytes()
    }

    fn sub(r: RwRegion, off: usize, len: usize) -> RwRegion {
        // SAFETY: inside `r`.
        unsafe { RwRegion::from_raw_parts(r.as_ptr().add(off), len).unwrap() }
    }

    /// The client's request channel as raw ring memory, continuing at the
    /// published head (what a hostile client writes with).
    fn raw_requests(r: RwRegion) -> RingProducer<AggDesc> {
        // SAFETY: channel B's forward ring; the typed producer is not used
        // again by the test after this.
        unsafe { RingProducer::attach(sub(r, requests(), G.release_ring_offset()), G.fwd).unwrap() }
    }

    /// The stack's events as raw ring memory (a client that takes them
    /// without ever returning what they lend).
    fn raw_events(r: RwRegion) -> RingConsumer<AggDesc> {
        // SAFETY: channel A's forward ring; the client's typed receiver is
        // not used by the test.
        unsafe { RingConsumer::attach(sub(r, EVENTS, G.release_ring_offset()), G.fwd).unwrap() }
    }

    fn request(c: &mut Duplex<'static>, r: Request) {
        let d = c.rx.domain();
        c.tx.send(Aggregate::new(d), r.encode(), 0).unwrap();
    }

    /// One round as the component runs it; returns the faults reported.
    fn round(n: &mut Net, c: &mut Client<'static>) -> Vec<Fault> {
        let mut faults = Vec::new();
        c.take_requests(&mut n.b, &mut |f| faults.push(f));
        n.step();
        c.session().poll(&mut n.b);
        c.deliver(&mut |f| faults.push(f));
        let _ = c.flush();
        faults
    }

    /// A listens on 80 through the channel and A connects to it; returns
    /// A's connection id.
    fn listen_and_connect(n: &mut Net, c: &mut Client<'static>, ce: &mut Duplex<'static>) -> u32 {
        request(ce, Request::Listen { port: 80, backlog: 2 });
        assert!(round(n, c).is_empty());
        let ca = n.a.connect(([10, 0, 2, 16], 80), 40000).unwrap();
        for _ in 0..1000 {
            assert!(round(n, c).is_empty());
            if c.stats().accepted == 1 && n.a.state(ca) == Ok(crate::TcpState::Established) {
                return ca;
            }
        }
        panic!("not accepted");
    }

    #[test]
    fn a_client_that_keeps_its_quota_is_not_polled_in_a_loop() {
        let (mut n, mut c, mut ce, region) = setup(2);
        let ca = listen_and_connect(&mut n, &mut c, &mut ce);
        // The client takes every event but never returns a buffer. Small
        // chunks share their connection's open page, so pieces of 3000
        // bytes fill a page per 4096 bytes: the third page is beyond the
        // quota of two buffers.
        let mut events = raw_events(region);
        let mut held = Vec::new();
        for k in 0..6u8 {
            n.a.send(ca, make(n.da, &[k; 3000])).unwrap();
            for _ in 0..20 {
                round(&mut n, &mut c);
                while let Some(e) = events.pop().unwrap() {
                    held.extend(e.slices[..e.nslices as usize].iter().copied());
                }
            }
        }
        let mut bufs: Vec<(u32, u32)> = held.iter().map(|s| (s.pool, s.buf)).collect();
        bufs.dedup();
        assert_eq!(bufs.len(), 2, "two buffers delivered: the quota");
        assert_eq!(held.iter().map(|s| s.len as usize).sum::<usize>(), 2 * 4096, "two full pages");
        assert_eq!(n.b.domain().peer_held_buffers(CLIENT), Ok(2));
        // An event waits for the quota and the ring is empty: before
        // blocking, the stack asks for releases, not for room, and finds
        // nothing to do (it would otherwise run again at once, for ever).
        assert!(c.undelivered.as_ref().is_some_and(|u| u.why == Error::QuotaExceeded));
        assert_eq!(c.want(false), Want { data: true, releases: true, room: false });
        for _ in 0..3 {
            c.duplex().disarm();
            round(&mut n, &mut c);
            assert!(!c.arm(false), "nothing changed: block");
        }
        // A release is what it waits for: then it runs, and the data flows.
        // SAFETY: channel A's release ring; the client's typed end never
        // released anything.
        let mut rel = unsafe {
            RingProducer::<RelDesc>::attach(sub(region, event_releases(), region.len() - event_releases()), G.rel)
                .unwrap()
        };
        let s = held[0];
        let count = held.iter().filter(|h| (h.pool, h.buf) == (s.pool, s.buf)).count() as u32;
        rel.push(RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count }).unwrap();
        c.duplex().disarm();
        assert!(c.arm(false), "a release came in: run again");
        round(&mut n, &mut c);
        let mut more = Vec::new();
        while let Some(e) = events.pop().unwrap() {
            more.extend(e.slices[..e.nslices as usize].iter().map(|s| (s.pool, s.buf)));
        }
        more.dedup();
        assert_eq!(more.len(), 1, "one more buffer delivered");
    }

    #[test]
    fn a_corrupt_request_ring_cuts_the_client_off_and_its_sockets_go_back() {
        let (mut n, mut c, mut ce, region) = setup(64);
        let ca = listen_and_connect(&mut n, &mut c, &mut ce);
        assert_eq!(n.b.connections(), 1);
        // Far more entries than the ring holds.
        let head = word(region, requests());
        head.store(word(region, requests() + 64).load(Ordering::Relaxed).wrapping_add(5000), Ordering::Release);
        let mut faults = Vec::new();
        for _ in 0..5 {
            faults.extend(round(&mut n, &mut c));
        }
        assert_eq!(faults, [Fault { channel: Channel::Requests, why: Error::CorruptRing, releases: false }], "once");
        assert_eq!(c.broken(), Some((Channel::Requests, Error::CorruptRing)));
        let closed = c.cut_off(&mut n.b).expect("cut off once");
        assert_eq!((closed.connections, closed.ports), (1, 1));
        assert_eq!(c.cut_off(&mut n.b), None);
        // The ring still "holds" entries: never asked for, so never work.
        assert!(!c.want(false).data);
        c.duplex().disarm();
        assert!(!c.arm(false));
        // Its connection is reset and forgotten, its port free again.
        for _ in 0..50 {
            n.step();
        }
        assert_eq!(n.b.connections(), 0);
        assert!(n.a.state(ca).is_err() || n.a.state(ca) == Ok(crate::TcpState::Closed));
        assert_eq!(n.b.listen(80, 1), Ok(()));
        assert_eq!(n.b.socket_memory(), n.b.config().recv_window, "one listening socket: the new one");
    }

    #[test]
    fn a_forged_reference_costs_the_client_its_channel() {
        let (mut n, mut c, _ce, region) = setup(64);
        let db = n.b.domain();
        let before = db.stats();
        let mut ring = raw_requests(region);
        // Slices of pools the stack maps but the client may not reference
        // (the test client's grant list is empty), with guessed
        // generations, out-of-range buffers and lengths: the first one
        // breaks the channel, the others are never read.
        let forged = [(1, 0, 1, 0, 4096), (2, u32::MAX, 7, 0, 1), (3, 0, 0x5eed, u32::MAX - 8, 4096)];
        db.set_peer_pools(CLIENT, &[]).unwrap();
        for (pool, buf, gen, off, len) in forged {
            let mut d = AggDesc { nslices: 1, tag: Request::Send { conn: 1 }.encode(), ..AggDesc::default() };
            d.slices[0] = SliceDesc { pool, buf, gen, off, len };
            ring.push(d).unwrap();
        }
        let faults = round(&mut n, &mut c);
        assert_eq!(faults, [Fault { channel: Channel::Requests, why: Error::ForeignPool, releases: false }]);
        assert_eq!(c.stats().refused, 0);
        assert_eq!(db.stats().rejected_foreign_pool - before.rejected_foreign_pool, 1);
        assert_eq!(c.broken(), Some((Channel::Requests, Error::ForeignPool)));
        assert!(c.cut_off(&mut n.b).is_some(), "the client is cut off");
        // Nothing more is read from it, however sane.
        ring.push(AggDesc { nslices: 1000, ..AggDesc::default() }).unwrap();
        assert!(round(&mut n, &mut c).is_empty(), "not read again");
        assert_eq!(db.stats().rejected_descriptors - before.rejected_descriptors, 1);
    }

    #[test]
    fn guessed_generations_and_out_of_range_slices_of_a_granted_pool_break_the_channel() {
        // A live buffer of a pool the client may reference (the stack's
        // own application pool here), not lent to the client.
        let probe = |forge: &dyn Fn(SliceDesc) -> SliceDesc| {
            let (mut n, mut c, _ce, region) = setup(64);
            let db = n.b.domain();
            db.set_peer_pools(CLIENT, &[crate::tests::APP]).unwrap();
            let live = make(db, b"a live buffer");
            let s = live.descs()[0];
            let mut d = AggDesc { nslices: 1, tag: Request::Send { conn: 1 }.encode(), ..AggDesc::default() };
            d.slices[0] = forge(s);
            raw_requests(region).push(d).unwrap();
            let faults = round(&mut n, &mut c);
            let refused = c.stats().refused;
            let cut = c.cut_off(&mut n.b).is_some();
            drop(live);
            (faults.first().map(|f| (f.channel, f.why)), refused, cut)
        };
        assert_eq!(
            probe(&|s| SliceDesc { gen: s.gen ^ 0x0010_0000, ..s }),
            (Some((Channel::Requests, Error::GenerationMismatch)), 0, true)
        );
        assert_eq!(
            probe(&|s| SliceDesc { buf: u32::MAX, ..s }),
            (Some((Channel::Requests, Error::BadBuffer)), 0, true)
        );
        assert_eq!(
            probe(&|s| SliceDesc { off: 0, len: 1 << 20, ..s }),
            (Some((Channel::Requests, Error::OutOfBounds)), 0, true)
        );
        // The right generation of a buffer it was never lent: the same.
        assert_eq!(probe(&|s| s), (Some((Channel::Requests, Error::NotGranted)), 0, true));
    }

    #[test]
    fn the_clients_releases_are_checked_and_a_corrupt_release_ring_is_reported() {
        let (mut n, mut c, mut ce, region) = setup(64);
        let db = n.b.domain();
        let _ = listen_and_connect(&mut n, &mut c, &mut ce);
        // Garbage releases on a sane ring: each refused and counted, none
        // breaks anything.
        // SAFETY: channel A's release ring; the client's typed end is not
        // used to release after this.
        let mut rel = unsafe {
            RingProducer::<RelDesc>::attach(sub(region, event_releases(), region.len() - event_releases()), G.rel)
                .unwrap()
        };
        let bad = db.stats().bad_releases;
        for r in [
            RelDesc { pool: 1, buf: u32::MAX, gen: 1, count: 1 },
            RelDesc { pool: 1, buf: 0, gen: 0x5eed, count: 1 },
            RelDesc { pool: 1, buf: 0, gen: 0, count: u32::MAX },
            RelDesc { pool: 0xdead, buf: 0, gen: 1, count: 1 },
        ] {
            rel.push(r).unwrap();
        }
        assert!(round(&mut n, &mut c).is_empty());
        assert_eq!(db.stats().bad_releases - bad, 4);
        assert_eq!(c.broken(), None);
        // An impossible head of the release ring breaks the events channel.
        let head = word(region, event_releases());
        head.store(head.load(Ordering::Relaxed).wrapping_add(1 << 30), Ordering::Release);
        let mut faults = Vec::new();
        for _ in 0..3 {
            faults.extend(round(&mut n, &mut c));
        }
        assert_eq!(faults, [Fault { channel: Channel::Events, why: Error::CorruptRing, releases: true }]);
        assert!(c.cut_off(&mut n.b).is_some());
        assert!(!c.want(true).releases && !c.want(true).room);
    }

    #[test]
    fn an_impossible_events_tail_breaks_the_events_channel_at_the_next_event() {
        let (mut n, mut c, mut ce, region) = setup(64);
        // The client claims to have taken more events than were sent.
        let tail = word(region, EVENTS + 64);
        tail.store(tail.load(Ordering::Relaxed).wrapping_add(77), Ordering::Release);
        // A request that makes an event (an error: not its connection).
        request(&mut ce, Request::Close { conn: 12345 });
        let faults = round(&mut n, &mut c);
        assert_eq!(faults, [Fault { channel: Channel::Events, why: Error::CorruptRing, releases: false }]);
        assert!(c.cut_off(&mut n.b).is_some());
        request(&mut ce, Request::Listen { port: 80, backlog: 1 });
        assert!(round(&mut n, &mut c).is_empty(), "cut off: its requests are not read");
        assert_eq!(n.b.listen(80, 1), Ok(()), "and did nothing");
    }

    /// httpd restartable: the component follows its client's death
    /// (`component/slot.rs`, `Slot::died`): the dead incarnation's client is
    /// closed (its connections reset, its port closed, its events dropped),
    /// what the stack lent it is quarantined (`peer_failed`), and the
    /// session lives on (its counters) for the next incarnation, which
    /// attaches to the region set up afresh, listens on the same port and
    /// is served; the quarantine ends when the death is settled.
    #[test]
    fn a_dead_clients_sockets_go_and_its_next_incarnation_listens_again() {
        let (mut n, mut c, mut ce, _region) = setup(64);
        let db = n.b.domain();
        let ca = listen_and_connect(&mut n, &mut c, &mut ce);
        // Data for the client, delivered (lent) but never returned: the
        // client dies holding it.
        n.a.send(ca, make(n.da, &[7; 300])).unwrap();
        for _ in 0..20 {
            round(&mut n, &mut c);
        }
        let held = db.peer_held_buffers(CLIENT).unwrap();
        assert!(held >= 1, "the client holds what it was sent");
        // Its death: the component cuts it off and quarantines.
        let closed = c.close(&mut n.b);
        assert_eq!((closed.connections, closed.ports), (1, 1));
        let quarantined = db.peer_failed(CLIENT).unwrap();
        assert_eq!(quarantined, held, "what it held stays quarantined");
        let session = c.into_session();
        for _ in 0..50 {
            n.step();
        }
        assert_eq!(n.b.connections(), 0, "its connection is gone");
        assert!(n.a.state(ca).is_err() || n.a.state(ca) == Ok(crate::TcpState::Closed), "and reset at the peer");
        // The new incarnation: a fresh region, a fresh domain of its own.
        let dc2: &'static Domain = iolite::testing::domain();
        let (stack_end, mut ce2, r2) = iolite::testing::duplex_ends(db, CLIENT, dc2, PeerId(0), G);
        db.peer_restarted(CLIENT).unwrap();
        let mut c2 = Client::new(stack_end, session);
        let ca2 = listen_and_connect(&mut n, &mut c2, &mut ce2);
        n.a.send(ca2, make(n.da, b"served again")).unwrap();
        // The events as the client's ring holds them (the test's client
        // domain does not map the stack's pool): the data is delivered.
        let mut events = raw_events(r2);
        let mut got = 0;
        for _ in 0..50 {
            round(&mut n, &mut c2);
            while let Some(e) = events.pop().unwrap() {
                got += e.slices[..e.nslices as usize].iter().map(|s| s.len).sum::<u32>();
            }
            if got >= 12 {
                break;
            }
        }
        assert_eq!(got, 12, "the new incarnation gets its data");
        // The dead one's buffers come back only when its death is settled.
        let in_use = db.pool_stats(crate::tests::NET).unwrap().buffers_in_use;
        assert!(db.peer_settled(CLIENT).unwrap() >= held);
        assert!(db.pool_stats(crate::tests::NET).unwrap().buffers_in_use < in_use, "quarantined buffers freed");
        assert_eq!(c2.stats().accepted, 1);
    }
}
