//! Two components talking both ways: two channels and a control page in
//! one shared region.
//!
//! Layout of a duplex region (`g` the [`Geometry`] of both channels):
//!
//! | offset | content |
//! |---|---|
//! | 0 | channel A: side [`Side::A`] sends, side [`Side::B`] receives |
//! | `g.page_bytes()` | channel B: side B sends, side A receives |
//! | `2 * g.page_bytes()` | the control page ([`Control`]) |
//!
//! [`Geometry::duplex_bytes`] is the smallest such region. Which component
//! is side A, and which one initialises the region ([`init_duplex`]), is
//! the protocol's choice (the protocol crates say); the initialiser bumps
//! the region's *generation* every time it (re)initialises, so the other
//! side sees that a restarted peer set the channels up afresh
//! ([`Duplex::peer_restarted`]).
//!
//! Wake-ups use the rings' "signal me" flags: a component calls
//! [`Duplex::disarm`] when it runs, [`Duplex::flush`] after a batch (and
//! signals the peer if it says so), and [`Duplex::arm`] before it blocks
//! (and does not block if it says there is work). The control page's
//! protocol words ([`Control::word`]) carry what the protocol shares
//! besides messages (a MAC address, a link state, a count).

#[cfg(test)]
use core::sync::atomic::AtomicU32;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::channel::{init_channel, Attach, ChannelRx, ChannelTx, Geometry};
use crate::domain::{Domain, PeerId};
use crate::region::RwRegion;
use crate::{Error, Result};

/// "IOLDUPLX": the region's channels are initialised.
pub const DUPLEX_MAGIC: u64 = u64::from_le_bytes(*b"IOLDUPLX");

/// Protocol words in the control page.
pub const WORDS: usize = 8;

/// Which end of a duplex region a component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Sends on channel A, receives on channel B.
    A,
    /// Sends on channel B, receives on channel A.
    B,
}

impl Geometry {
    /// Bytes of a duplex region of two channels of this geometry and the
    /// control page.
    pub const fn duplex_bytes(&self) -> usize {
        2 * self.page_bytes() + 4096
    }

    /// Offset of the channel `sender` sends on in a duplex region.
    pub const fn duplex_channel_offset(&self, sender: Side) -> usize {
        match sender {
            Side::A => 0,
            Side::B => self.page_bytes(),
        }
    }
}

#[repr(C)]
struct Block {
    /// The initialiser: [`DUPLEX_MAGIC`] once both channels are set up.
    magic: AtomicU64,
    /// The initialiser: bumped by every (re)initialisation.
    generation: AtomicU64,
    words: [AtomicU64; WORDS],
}

/// The control page of a duplex region. Each field has one writer.
#[derive(Clone, Copy)]
pub struct Control {
    block: *const Block,
}

impl Control {
    /// The control page of the duplex region `region`.
    ///
    /// # Safety
    /// `region` must be a duplex region of `geometry`, mapped for as long
    /// as the returned value (or a copy) is used, 4096-aligned; its control
    /// page is accessed only through this type.
    pub unsafe fn of(region: RwRegion, geometry: Geometry) -> Result<Control> {
        if region.len() < geometry.duplex_bytes() || !(region.as_ptr() as usize).is_multiple_of(4096) {
            return Err(Error::BadRegion);
        }
        // SAFETY: in range (checked) and aligned; atomics accept any bits.
        let block = unsafe { region.as_ptr().add(2 * geometry.page_bytes()) as *const Block };
        Ok(Control { block })
    }

    fn block(&self) -> &Block {
        // SAFETY: per `of`'s contract.
        unsafe { &*self.block }
    }

    /// The generation of the channels (0: not initialised yet).
    pub fn generation(&self) -> u64 {
        let b = self.block();
        if b.magic.load(Ordering::Acquire) != DUPLEX_MAGIC {
            return 0;
        }
        b.generation.load(Ordering::Acquire)
    }

    /// Protocol word `i` (`i < WORDS`, else panics); the protocol says who
    /// writes it. Read it once per decision: the peer may change it.
    pub fn word(&self, i: usize) -> &AtomicU64 {
        &self.block().words[i]
    }
}

/// Initialises a duplex region (both channels empty, protocol words 0) and
/// publishes the next generation, which it returns. The other side
/// attaches after it sees the generation change. Call it again to reset
/// the region after a restart (of either side).
///
/// # Safety
/// `region` must be the duplex region and neither side may be using its
/// channels.
pub unsafe fn init_duplex(region: RwRegion, geometry: Geometry) -> Result<u64> {
    // SAFETY: per this function's contract.
    let control = unsafe { Control::of(region, geometry)? };
    for side in [Side::A, Side::B] {
        // SAFETY: per this function's contract.
        unsafe { init_channel(sub(region, geometry, side)?, geometry)? };
    }
    let b = control.block();
    let next = match control.generation() {
        0 => 1,
        g => g.wrapping_add(1).max(1),
    };
    for w in &b.words {
        w.store(0, Ordering::Relaxed);
    }
    b.generation.store(next, Ordering::Release);
    b.magic.store(DUPLEX_MAGIC, Ordering::Release);
    Ok(next)
}

/// The channel `sender` sends on.
fn sub(region: RwRegion, geometry: Geometry, sender: Side) -> Result<RwRegion> {
    if region.len() < geometry.duplex_bytes() {
        return Err(Error::BadRegion);
    }
    // SAFETY: inside `region` (checked).
    unsafe {
        RwRegion::from_raw_parts(region.as_ptr().add(geometry.duplex_channel_offset(sender)), geometry.bytes())
            .ok_or(Error::BadRegion)
    }
}

/// Where and how one component attaches to a duplex region.
#[derive(Clone, Copy)]
pub struct DuplexAttach<'d> {
    /// The component's IO-Lite domain.
    pub domain: &'d Domain,
    /// The other component's peer slot in `domain`.
    pub peer: PeerId,
    /// The duplex region.
    pub region: RwRegion,
    /// Both channels' ring capacities (a protocol constant).
    pub geometry: Geometry,
    /// Which end this component is.
    pub side: Side,
}

/// What a component waits for when it blocks ([`Duplex::arm`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Messages from the peer. Leave it out while they cannot be taken
    /// (the receiving end is broken, or a copy stage waits for room):
    /// a message left in the ring would otherwise say "work to do" for
    /// ever.
    pub data: bool,
    /// Releases of what this side lent the peer (it waits for buffers).
    pub releases: bool,
    /// The peer taking what this side sent: it holds messages back (the
    /// ring was full), or has more to send once the peer made progress.
    pub room: bool,
}

/// One component's end of a duplex region: a sender, a receiver, and the
/// control page.
pub struct Duplex<'d> {
    /// What this side sends.
    pub tx: ChannelTx<'d>,
    /// What the peer sends.
    pub rx: ChannelRx<'d>,
    control: Control,
    generation: u64,
}

impl<'d> Duplex<'d> {
    /// Attaches to an initialised duplex region (`CorruptRing` if it is
    /// not initialised yet: look at [`Control::generation`] first).
    ///
    /// # Safety
    /// `at.region` must be the duplex region, initialised with
    /// [`init_duplex`] with the same geometry, mapped read-write for `'d`;
    /// only one component may attach as each side.
    pub unsafe fn attach(at: DuplexAttach<'d>) -> Result<Self> {
        // SAFETY: per this function's contract.
        let control = unsafe { Control::of(at.region, at.geometry)? };
        let generation = control.generation();
        if generation == 0 {
            return Err(Error::CorruptRing);
        }
        let (mine, theirs) = match at.side {
            Side::A => (Side::A, Side::B),
            Side::B => (Side::B, Side::A),
        };
        let end = |sender| -> Result<Attach<'d>> {
            Ok(Attach {
                domain: at.domain,
                peer: at.peer,
                region: sub(at.region, at.geometry, sender)?,
                geometry: at.geometry,
            })
        };
        // SAFETY: per this function's contract: one sender and one receiver
        // per channel.
        let (tx, rx) = unsafe { (ChannelTx::attach(end(mine)?)?, ChannelRx::attach(end(theirs)?)?) };
        Ok(Self { tx, rx, control, generation })
    }

    /// The control page.
    pub fn control(&self) -> Control {
        self.control
    }

    /// The generation this end attached to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the initialiser set the region up again since this end
    /// attached (a restarted peer): these channels are dead then.
    pub fn peer_restarted(&self) -> bool {
        self.control.generation() != self.generation
    }

    /// This side runs: withdraws what [`Duplex::arm`] asked for.
    pub fn disarm(&mut self) {
        self.tx.disarm();
        self.rx.disarm();
    }

    /// Ends a batch: publishes releases, and says whether the peer asked
    /// for anything that happened since the last flush (messages,
    /// releases, room): then the caller signals it, once.
    #[must_use = "signal the peer when this is true"]
    pub fn flush(&mut self) -> bool {
        let sent = self.tx.flush();
        let returned = self.rx.flush();
        sent || returned
    }

    /// Before blocking: asks the peer to signal for what `want` says.
    /// Returns true if some of it is already there: do not block then, run
    /// again.
    pub fn arm(&mut self, want: Want) -> bool {
        let from_tx = self.tx.arm(want.releases, want.room);
        // Room for held-back releases is always worth a wake-up.
        let from_rx = if want.data { self.rx.arm() } else { self.rx.arm_releases_only() };
        from_tx || from_rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::{Guard, Next};
    use crate::testing::{bytes, duplex_ends, make, map, own, region, Note};
    use crate::PoolId;
    use std::sync::Arc;

    const POOL_A: PoolId = 1;
    const POOL_B: PoolId = 2;
    const G: Geometry = Geometry { fwd: 4, rel: 8 };

    fn at(domain: &Domain, region: RwRegion, side: Side) -> DuplexAttach<'_> {
        DuplexAttach { domain, peer: PeerId(0), region, geometry: G, side }
    }

    /// Two components that map each other's pool.
    fn two() -> (&'static Domain, &'static Domain) {
        let (a, b) = (crate::testing::domain(), crate::testing::domain());
        map(b, POOL_A, own(a, POOL_A, 16));
        map(a, POOL_B, own(b, POOL_B, 16));
        (a, b)
    }

    #[test]
    fn both_ways_with_releases_and_wraparound() {
        let (a, b) = two();
        let (mut da, mut db, _) = duplex_ends(a, PeerId(0), b, PeerId(0), G);
        assert_eq!(da.generation(), 1);
        // Many rounds through rings of 4: the indices wrap many times.
        for round in 0..50u64 {
            let n = 1 + round as usize % 4;
            for i in 0..n as u64 {
                da.tx.send(make(a, POOL_A, &[round as u8, i as u8]), round * 10 + i, 0).unwrap();
            }
            if n == 4 {
                // Full: back-pressure, the aggregate comes back whole.
                let (e, back) = da.tx.send(make(a, POOL_A, b"x"), 99, 0).unwrap_err();
                assert_eq!((e, bytes(&back)), (Error::Full, b"x".to_vec()));
            }
            for i in 0..n as u64 {
                let m = db.rx.recv().unwrap().unwrap();
                assert_eq!((m.tag, bytes(&m.agg)), (round * 10 + i, [round as u8, i as u8].to_vec()));
                // The answer goes back on the other channel, with a's
                // buffer by reference after b's own bytes.
                let mut reply = make(b, POOL_B, b"re:");
                reply.append(m.agg).unwrap();
                db.tx.send(reply, m.tag, 0).unwrap();
            }
            let _ = db.flush();
            for i in 0..n as u64 {
                let r = da.rx.recv().unwrap().unwrap();
                assert_eq!(r.tag, round * 10 + i);
                assert_eq!(bytes(&r.agg), [b"re:".as_slice(), &[round as u8, i as u8]].concat());
            }
            // Holds go back hop by hop (a's buffer came back to a, which
            // returns b's hold at once; then b has no use for it either).
            for _ in 0..2 {
                let _ = da.flush();
                let _ = db.flush();
                da.tx.poll_releases().unwrap();
                db.tx.poll_releases().unwrap();
            }
            assert_eq!(a.pool_stats(POOL_A).unwrap().buffers_in_use, 0, "round {round}");
            assert_eq!(b.pool_stats(POOL_B).unwrap().buffers_in_use, 0, "round {round}");
        }
        assert_eq!(a.stats().bytes_copied + b.stats().bytes_copied, 0);
    }

    #[test]
    fn reinitialising_is_a_new_generation() {
        let (a, b) = two();
        let (mut da, db, r) = duplex_ends(a, PeerId(0), b, PeerId(0), G);
        da.tx.send(make(a, POOL_A, b"old"), 1, 0).unwrap();
        da.control().word(3).store(77, Ordering::Relaxed);
        assert!(!db.peer_restarted());
        // b restarts and sets the region up again.
        // SAFETY: the test's ends stop using the old channels.
        let g = unsafe { init_duplex(r, G) }.unwrap();
        assert_eq!(g, 2);
        assert!(db.peer_restarted() && da.peer_restarted());
        assert_eq!(da.control().word(3).load(Ordering::Relaxed), 0, "protocol words start at 0");
        // SAFETY: the region was just initialised; b attaches anew.
        let mut db2 = unsafe {
            Duplex::attach(DuplexAttach { domain: b, peer: PeerId(0), region: r, geometry: G, side: Side::B })
        }
        .unwrap();
        assert!(db2.rx.recv().unwrap().is_none(), "fresh channels: the old message is gone");
        assert!(!db2.peer_restarted());
    }

    #[test]
    fn attaching_needs_an_initialised_region_of_the_right_size() {
        let (a, _) = two();
        let r = region(G.duplex_bytes());
        let at = |region| DuplexAttach { domain: a, peer: PeerId(0), region, geometry: G, side: Side::A };
        // SAFETY: the regions are this test's.
        unsafe {
            assert_eq!(Control::of(r, G).unwrap().generation(), 0);
            assert_eq!(Duplex::attach(at(r)).err(), Some(Error::CorruptRing));
            let small = RwRegion::from_raw_parts(r.as_ptr(), G.duplex_bytes() - 1).unwrap();
            assert_eq!(init_duplex(small, G).err(), Some(Error::BadRegion));
            assert_eq!(Duplex::attach(at(small)).err(), Some(Error::BadRegion));
        }
    }

    #[test]
    fn arm_says_whether_to_block_and_flush_whether_to_signal() {
        let (a, b) = two();
        let (mut da, mut db, _) = duplex_ends(a, PeerId(0), b, PeerId(0), G);
        // Both run (and withdraw the fresh rings' standing requests).
        da.disarm();
        db.disarm();
        da.tx.send(make(a, POOL_A, b"1"), 1, 0).unwrap();
        assert!(!da.flush(), "b runs: no signal");
        assert!(db.arm(Want { data: true, ..Want::default() }), "the look after arming finds it");
        db.disarm();
        let m = db.rx.recv().unwrap().unwrap();
        assert!(!db.arm(Want { data: true, ..Want::default() }), "b may block now");
        da.tx.send(make(a, POOL_A, b"2"), 2, 0).unwrap();
        da.tx.send(make(a, POOL_A, b"3"), 3, 0).unwrap();
        assert!(da.flush(), "b asked: one signal for the batch");
        assert!(!da.flush());
        // a waits for its buffers; b returns one.
        assert!(!da.arm(Want { releases: true, ..Want::default() }));
        db.disarm();
        drop(m);
        assert!(db.flush(), "a asked for releases");
        assert!(da.arm(Want { releases: true, ..Want::default() }), "they are there");
        // b cannot take messages now (say, its copy stage waits for room):
        // a message left in the ring must not keep it from blocking.
        assert!(!db.arm(Want::default()));
        da.disarm();
        da.tx.send(make(a, POOL_A, b"4"), 4, 0).unwrap();
        assert!(!da.flush(), "b did not ask for data");
    }

    #[test]
    fn a_corrupt_peer_breaks_the_channel_and_never_makes_it_spin() {
        let (a, b) = two();
        let (mut da, mut db, r) = duplex_ends(a, PeerId(0), b, PeerId(0), G);
        da.tx.send(make(a, POOL_A, b"ok"), 1, 0).unwrap();
        // b, hostile, publishes an impossible head on channel B (which a
        // reads): a's receive breaks once, and arming says "block".
        // SAFETY: channel B's head word, in the test's region.
        let head = unsafe { &*(r.as_ptr().add(G.duplex_channel_offset(Side::B)) as *const AtomicU32) };
        head.store(0x4000_0000, Ordering::Release);
        let mut g = Guard::new();
        assert!(matches!(g.recv(&mut da.rx), Next::Broke(Error::CorruptRing)));
        assert!(matches!(g.recv(&mut da.rx), Next::Idle));
        assert!(!da.arm(Want { data: true, releases: true, room: false }), "a corrupt ring is no reason to run");
        // a's own direction still works: b gets its message.
        assert_eq!(bytes(&db.rx.recv().unwrap().unwrap().agg), b"ok");
    }

    #[test]
    fn a_rejected_descriptor_waiting_for_release_room_does_not_look_like_work() {
        let (a, b) = two();
        let g1 = Geometry { fwd: 4, rel: 1 };
        let (mut da, mut db, r) = duplex_ends(a, PeerId(0), b, PeerId(0), g1);
        // a forges a descriptor of three slices straight into channel A
        // (b validates it, refuses it and owes three returns; room for one).
        let live = make(a, POOL_A, b"live");
        let mut desc = crate::AggDesc { nslices: 3, ..crate::AggDesc::default() };
        for k in 0..3 {
            desc.slices[k] = crate::SliceDesc { len: 1 << 20, ..live.descs()[0] };
        }
        // SAFETY: channel A's forward ring; the test plays a's producer.
        let mut evil = unsafe {
            crate::ring::RingProducer::<crate::AggDesc>::attach(
                RwRegion::from_raw_parts(r.as_ptr(), g1.release_ring_offset()).unwrap(),
                g1.fwd,
            )
        }
        .unwrap();
        evil.push(desc).unwrap();
        evil.push(desc).unwrap();
        assert_eq!(db.rx.recv().unwrap_err(), Error::OutOfBounds);
        assert_eq!(db.rx.recv().unwrap_err(), Error::Full, "its returns wait for room");
        assert!(!db.arm(Want { data: true, ..Want::default() }), "a descriptor is there, but cannot be taken");
        // a takes the returns it gets: room, and b is told.
        da.tx.poll_releases().unwrap();
        assert!(da.flush(), "b asked for room");
        assert!(db.arm(Want { data: true, ..Want::default() }));
    }

    /// Request/response between two threads that block whenever they have
    /// nothing to do and rely on each other's signals alone, through small
    /// rings (full rings, back-pressure, releases): a lost wake-up leaves a
    /// side blocked with work (its wait times out and the test fails).
    #[test]
    fn two_components_wake_each_other_only_when_asked() {
        const N: u64 = 20_000;
        let r = region(G.duplex_bytes());
        // SAFETY: a fresh region; each thread attaches one side.
        unsafe { init_duplex(r, G) }.unwrap();
        let a = Domain::new();
        let pool_a = own(&a, POOL_A, 8);
        let (note_a, note_b) = (Arc::new(Note::new()), Arc::new(Note::new()));
        let (na, nb) = (note_a.clone(), note_b.clone());
        let server = std::thread::spawn(move || {
            // The echo server: a's buffers go back by reference.
            let b = Domain::new();
            map(&b, POOL_A, pool_a);
            // SAFETY: initialised above; the only side B.
            let mut db = unsafe { Duplex::attach(at(&b, r, Side::B)) }.unwrap();
            let mut served = 0u64;
            let mut signals = 0u64;
            let mut held: Option<crate::channel::Received<'_>> = None;
            while served < N {
                db.disarm();
                loop {
                    let m = match held.take() {
                        Some(m) => m,
                        None => match db.rx.recv().unwrap() {
                            Some(m) => m,
                            None => break,
                        },
                    };
                    let tag = m.tag;
                    match db.tx.send(m.agg, tag, 0) {
                        Ok(()) => served += 1,
                        Err((Error::Full, agg)) => {
                            held = Some(crate::channel::Received { agg, tag, flags: 0 });
                            break;
                        }
                        Err((e, _)) => panic!("{e:?}"),
                    }
                }
                if db.flush() {
                    signals += 1;
                    na.signal();
                }
                let want = Want { data: held.is_none(), releases: true, room: held.is_some() };
                if served < N && !db.arm(want) {
                    assert!(nb.wait(), "server: lost wake-up");
                }
                let _ = db.tx.poll_releases();
            }
            signals
        });
        // SAFETY: initialised above; the only side A.
        let mut da = unsafe { Duplex::attach(at(&a, r, Side::A)) }.unwrap();
        let (mut sent, mut answered, mut signals) = (0u64, 0u64, 0u64);
        while answered < N {
            da.disarm();
            // Releases first: they make the room the sends need.
            let _ = da.tx.poll_releases();
            while sent < N {
                let Ok(mut w) = a.alloc(POOL_A, 8) else { break }; // the pool waits for releases
                w.writable()[..8].copy_from_slice(&sent.to_le_bytes());
                match da.tx.send(w.seal(8).unwrap(), sent, 0) {
                    Ok(()) => sent += 1,
                    Err((Error::Full, _)) => break,
                    Err((e, _)) => panic!("{e:?}"),
                }
            }
            while let Some(m) = da.rx.recv().unwrap() {
                assert_eq!((m.tag, bytes(&m.agg)), (answered, answered.to_le_bytes().to_vec()));
                answered += 1;
            }
            if da.flush() {
                signals += 1;
                note_b.signal();
            }
            let want = Want { data: true, releases: true, room: sent < N };
            if answered < N && !da.arm(want) {
                assert!(note_a.wait(), "client: lost wake-up");
            }
        }
        let server_signals = server.join().unwrap();
        // Batching: far fewer signals than messages each way.
        assert!(signals < N / 2 && server_signals < N / 2, "{signals} {server_signals}");
        assert_eq!(a.stats().bytes_copied, 0);
    }
}
