//! hostile_client: a hostile socket client of netstack, in the test image
//! only (examples/hostile/hostile.camkes; tests/robot/hostile_net.robot).
//!
//! It sets its region up (netstack's `client2`) as an honest client does,
//! listens on `port` and waits for netstack's `Listening`: netstack has
//! attached to this incarnation. Then it writes garbage into the rings of
//! its region, straight into ring memory (the typed channel API cannot
//! make it): one attack per incarnation (`StartInfo::restarts`), since
//! every attack that breaks a channel has netstack cut it off and the
//! supervisor restart it.
//!
//! * Incarnation 0 waits for a trigger (a connection to `port` that sends
//!   data), then, on a channel netstack keeps: a flood of listens beyond
//!   its listen budget; requests with garbage tags; `Send`, `Close` and
//!   `Abort` on every connection id up to its own plus 64 (other clients'
//!   connections); garbage releases (unknown pools, out-of-range
//!   buffers, guessed generations, huge counts); every ring's "signal me"
//!   flag set; the region's generation rewritten without dying. Each is
//!   logged with what netstack answered. Then it keeps every buffer
//!   netstack lends it (received data on the trigger connection) for
//!   `HOLD_TICKS` and breaks its request ring (an impossible head) while
//!   holding them.
//! * Incarnations 1 to 6, one each: a descriptor claiming 2^31 slices; a
//!   slice of a pool nobody maps; an impossible tail of the event ring;
//!   an impossible head of its release ring; an impossible tail of the
//!   ring netstack returns holds on, then a descriptor whose holds would
//!   go back there (it names a pool outside our grant list, which now
//!   breaks the channel first); `Send`s whose slices name the pools netstack maps (its
//!   grant list has none) with guessed generations, out-of-range buffers,
//!   offsets and lengths (the first breaks the channel).
//! * Incarnation 7 and later: an honest client on `port` (it releases
//!   what it gets), so the test sees netstack serving it again.
//!
//! Every number it makes up comes from a xorshift generator seeded with
//! the start record's random seed (or the `seed` attribute plus the
//! incarnation), logged first. It has no wake-up from netstack: it polls
//! on the ticker (10 Hz), and netstack reads its requests when it runs.
#![no_std]
#![no_main]

use component_runtime::{log, warn};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use glue_rt::pools::rw;
use iolite::ring::{RingConsumer, RingProducer};
use iolite::{init_duplex, AggDesc, RelDesc, RwRegion, SliceDesc};
use socket_api::{ErrorCode, Event, Request, GEOMETRY as G};

component_runtime::component_entry!(main);
// socket-api links `alloc` (its client half allocates); we allocate
// nothing, so the least heap does.
component_runtime::global_heap!(4096);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/hostile_client.rs"));

const PORT: u16 = glue::attributes::PORT as u16;
const SEED: u64 = glue::attributes::SEED as u64;
const _: () = assert!(glue::client::SIZE >= socket_api::REGION_BYTES);

/// The pools netstack maps: the compiler numbers a system's pools 1, 2,
/// … in the order the assembly writes them (camkes/iolite.camkes has
/// seven, netstack maps them all), so a hostile component guesses them
/// without any attribute.
const POOLS: [u32; 7] = [1, 2, 3, 4, 5, 6, 7];
/// Ticks (10 Hz) it keeps the buffers it holds before breaking its channel.
const HOLD_TICKS: u32 = 100;
/// Most received buffers it keeps (netstack's quota for it is far lower).
const MAX_HELD: usize = 64;

/// Where the rings of the region are (`iolite::duplex` and `iolite::ring`
/// layouts): channel A (netstack's events) at 0, its release ring (ours)
/// after it; channel B (our requests) one channel further, its release ring
/// (netstack's returns) after it; the control page after both.
const EVENTS: usize = 0;
const EVENT_RELEASES: usize = G.release_ring_offset();
const REQUESTS: usize = G.page_bytes();
const RETURNS: usize = G.page_bytes() + G.release_ring_offset();
const CONTROL: usize = 2 * G.page_bytes();
/// A ring's words: head (producer), its "signal me" flag, tail (consumer),
/// its flag.
const HEAD: usize = 0;
const WANT_SPACE: usize = 4;
const TAIL: usize = 64;
const WANT_DATA: usize = 68;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What netstack said so far.
#[derive(Default)]
struct Seen {
    listening: u32,
    listening_on_port: bool,
    errors: u32,
    /// Errors by code (index: the code).
    by_code: [u32; 9],
    /// Our connection (the trigger), and the data events on it.
    conn: Option<u32>,
    data: u32,
    /// Holds netstack returned on the returns ring (refused descriptors).
    returns: u32,
    /// Events that do not decode.
    garbage: u32,
}

struct Hostile {
    base: usize,
    requests: RingProducer<AggDesc>,
    events: RingConsumer<AggDesc>,
    releases: RingProducer<RelDesc>,
    returns: RingConsumer<RelDesc>,
    rng: Rng,
    seen: Seen,
    /// Slices of data events kept (never released while holding).
    held: [SliceDesc; MAX_HELD],
    nheld: usize,
}

/// The region's part at `off`, `len` bytes.
fn part(region: RwRegion, off: usize, len: usize) -> RwRegion {
    // SAFETY: inside the region (the offsets are the layout's).
    unsafe { RwRegion::from_raw_parts(region.as_ptr().add(off), len) }.expect("non-null")
}

impl Hostile {
    /// Our ends of the rings of the region we just set up.
    fn new(region: RwRegion, rng: Rng) -> Hostile {
        let fwd = G.release_ring_offset();
        let rel = G.bytes() - fwd;
        // SAFETY: the four rings of the region we initialised; we are the
        // producer or consumer named, and nobody else on our side.
        let (requests, events, releases, returns) = unsafe {
            (
                RingProducer::attach(part(region, REQUESTS, fwd), G.fwd).expect("request ring"),
                RingConsumer::attach(part(region, EVENTS, fwd), G.fwd).expect("event ring"),
                RingProducer::attach(part(region, EVENT_RELEASES, rel), G.rel).expect("release ring"),
                RingConsumer::attach(part(region, RETURNS, rel), G.rel).expect("returns ring"),
            )
        };
        Hostile {
            base: region.as_ptr() as usize,
            requests,
            events,
            releases,
            returns,
            rng,
            seen: Seen::default(),
            held: [SliceDesc::default(); MAX_HELD],
            nheld: 0,
        }
    }

    /// The 32-bit word at `off` of the region.
    fn word(&self, off: usize) -> &'static AtomicU32 {
        // SAFETY: inside the mapped region, 4-aligned; both sides access
        // ring words atomically.
        unsafe { &*((self.base + off) as *const AtomicU32) }
    }

    /// Takes every event; releases what data events lend unless `keep`
    /// (then keeps it, up to `MAX_HELD`). Takes netstack's returns.
    fn drain(&mut self, keep: bool) {
        while let Ok(Some(d)) = self.events.pop() {
            let n = (d.nslices as usize).min(d.slices.len());
            for s in &d.slices[..n] {
                if keep && self.nheld < MAX_HELD {
                    self.held[self.nheld] = *s;
                    self.nheld += 1;
                } else {
                    let _ = self.releases.push(RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count: 1 });
                }
            }
            match Event::decode(d.tag) {
                Some(Event::Listening { port }) => {
                    self.seen.listening += 1;
                    self.seen.listening_on_port |= port == PORT;
                }
                Some(Event::Accepted { port, conn }) if port == PORT => self.seen.conn = Some(conn),
                Some(Event::Data { conn }) if Some(conn) == self.seen.conn => self.seen.data += 1,
                Some(Event::Error { code, .. }) => {
                    self.seen.errors += 1;
                    self.seen.by_code[(code as usize).min(8)] += 1;
                }
                Some(_) => {}
                None => self.seen.garbage += 1,
            }
        }
        while let Ok(Some(_)) = self.returns.pop() {
            self.seen.returns += 1;
        }
    }

    /// Waits for the next tick, then drains.
    fn tick(&mut self, keep: bool) {
        glue::tick::wait();
        self.drain(keep);
    }

    /// Ticks until `done` says so, at most `max` ticks; whether it did.
    fn wait_until(&mut self, max: u32, done: impl Fn(&Hostile) -> bool) -> bool {
        for _ in 0..max {
            if done(self) {
                return true;
            }
            self.tick(false);
        }
        done(self)
    }

    /// Puts a descriptor on the request ring, waiting for room (netstack
    /// takes what is there when it runs).
    fn push(&mut self, d: AggDesc) {
        for _ in 0..600 {
            match self.requests.push(d) {
                Ok(()) => return,
                Err(iolite::Error::Full) => self.tick(false),
                Err(e) => {
                    warn!("request ring: {e:?}");
                    return;
                }
            }
        }
        warn!("request ring full for a minute: request dropped");
    }

    fn request(&mut self, tag: u64) {
        self.push(AggDesc { nslices: 0, flags: 0, tag, ..AggDesc::default() });
    }

    /// Sends `tags` (each must be answered by an error event) in batches
    /// of what the rings hold; returns how many errors came back.
    fn answered(&mut self, tags: impl Iterator<Item = u64>) -> (u32, u32) {
        let before = self.seen.errors;
        let (mut sent, mut batch) = (0u32, 0u32);
        for t in tags {
            self.request(t);
            sent += 1;
            batch += 1;
            if batch == 128 {
                let want = before + sent;
                self.wait_until(100, |h| h.seen.errors >= want);
                batch = 0;
            }
        }
        let want = before + sent;
        self.wait_until(100, |h| h.seen.errors >= want);
        (sent, self.seen.errors - before)
    }

    /// Incarnation 0: what a channel netstack keeps must survive (see the
    /// crate docs), then keeping its buffers, then a broken request ring.
    fn flood_hold_and_break(&mut self) {
        log!("waiting for the trigger: a connection to port {PORT} that sends data");
        while self.seen.data == 0 {
            self.tick(false);
        }
        let own = self.seen.conn.unwrap_or(0);
        log!("triggered on connection {own}");

        // Listens far beyond its budget: 64 of backlog 64, 64 of backlog 1.
        let no_memory = self.seen.by_code[ErrorCode::NoMemory as usize];
        let listening = self.seen.listening;
        let listens = (0..64u16)
            .map(|p| Request::Listen { port: 20000 + p, backlog: 64 })
            .chain((0..64u16).map(|p| Request::Listen { port: 21000 + p, backlog: 1 }));
        for r in listens {
            self.request(r.encode());
        }
        self.wait_until(100, |h| {
            h.seen.listening - listening + h.seen.by_code[ErrorCode::NoMemory as usize] - no_memory >= 128
        });
        log!(
            "listen flood: 128 listens, {} listening, {} refused for memory",
            self.seen.listening - listening,
            self.seen.by_code[ErrorCode::NoMemory as usize] - no_memory
        );

        // Tags that are no request (operation codes 0 and 6..=255).
        let bad = self.seen.by_code[ErrorCode::BadRequest as usize];
        let mut tags = [0u64; 64];
        for t in tags.iter_mut() {
            let op = 6 + self.rng.below(250);
            *t = (self.rng.next() & !(0xff << 56)) | (op % 256) << 56;
        }
        tags[0] &= !(0xff << 56);
        let (sent, errors) = self.answered(tags.into_iter());
        log!(
            "{sent} garbage requests: {errors} errors, {} of them BadRequest",
            self.seen.by_code[ErrorCode::BadRequest as usize] - bad
        );

        // Every connection id up to ours plus 64 but ours.
        let (yours, found) =
            (self.seen.by_code[ErrorCode::NotYours as usize], self.seen.by_code[ErrorCode::NotFound as usize]);
        let ids = (1..=own.saturating_add(64)).filter(|&c| c != own);
        let reqs = ids.flat_map(|conn| {
            [Request::Send { conn }, Request::Close { conn }, Request::Abort { conn }].map(|r| r.encode())
        });
        let (sent, errors) = self.answered(reqs);
        log!(
            "{sent} requests on connections not ours: {errors} refused (NotYours {}, NotFound {}), {} taken",
            self.seen.by_code[ErrorCode::NotYours as usize] - yours,
            self.seen.by_code[ErrorCode::NotFound as usize] - found,
            sent - errors
        );

        // Releases of nothing it holds: unknown pools, out-of-range
        // buffers, guessed generations, huge and zero counts.
        for k in 0..32 {
            let pool = if k % 4 == 0 { self.rng.next() as u32 } else { POOLS[self.rng.below(7) as usize] };
            let buf = if k % 3 == 0 { u32::MAX - self.rng.below(8) as u32 } else { self.rng.below(1024) as u32 };
            let count = [0, 1, u32::MAX, self.rng.next() as u32][k % 4];
            let _ = self.releases.push(RelDesc { pool, buf, gen: self.rng.next() as u32, count });
        }
        log!("32 garbage releases written");

        // Every "signal me" flag of every ring.
        for ring in [EVENTS, EVENT_RELEASES, REQUESTS, RETURNS] {
            self.word(ring + WANT_SPACE).store(u32::MAX, Ordering::Release);
            self.word(ring + WANT_DATA).store(u32::MAX, Ordering::Release);
        }
        // The region's generation, as if we had set it up again.
        // SAFETY: the control page's generation word (after the magic),
        // 8-aligned in the mapped region.
        let generation = unsafe { &*((self.base + CONTROL + 8) as *const AtomicU64) };
        let g = generation.load(Ordering::Relaxed).wrapping_add(0x1000);
        generation.store(g, Ordering::Release);
        log!("signal flags set and region generation rewritten to {g}");
        // Netstack must still serve us: a port given up, another taken.
        let listening = self.seen.listening;
        self.request(Request::Unlisten { port: 21002 }.encode());
        self.request(Request::Listen { port: 21100, backlog: 1 }.encode());
        self.wait_until(100, |h| h.seen.listening > listening);
        log!("still served: {} listening, {} garbage events", self.seen.listening - listening, self.seen.garbage);

        // Keep every buffer netstack lends us.
        log!("holding: send data now");
        let mut quiet = 0;
        while self.nheld == 0 || quiet < 30 {
            let n = self.nheld;
            self.tick(true);
            quiet = if self.nheld == n { quiet + 1 } else { 0 };
        }
        // netstack's quota counts buffers (pages), and small pieces share
        // their connection's page: several slices may name one buffer.
        let held = &self.held[..self.nheld];
        let buffers = (0..held.len())
            .filter(|&i| !held[..i].iter().any(|h| (h.pool, h.buf) == (held[i].pool, held[i].buf)))
            .count();
        log!("holding {buffers} received buffers ({} slices), returning none", self.nheld);
        for _ in 0..HOLD_TICKS {
            self.tick(true);
        }
        self.break_head(REQUESTS, "request ring");
    }

    /// Publishes an impossible head (far more entries than the ring holds)
    /// of the ring at `ring`, which we produce into. Logged first: netstack
    /// may see it, and have us restarted, before a line after it is out.
    fn break_head(&mut self, ring: usize, what: &str) {
        log!("overwriting the {what} head");
        let tail = self.word(ring + TAIL).load(Ordering::Acquire);
        self.word(ring + HEAD).store(tail.wrapping_add(0x4000_0000), Ordering::Release);
    }

    /// Publishes an impossible tail (more taken than was put) of the ring
    /// at `ring`, which we consume from (logged first, as above).
    fn break_tail(&mut self, ring: usize, what: &str) {
        log!("overwriting the {what} tail");
        let head = self.word(ring + HEAD).load(Ordering::Acquire);
        self.word(ring + TAIL).store(head.wrapping_add(77), Ordering::Release);
    }

    /// `Send`s whose slices name the pools netstack maps (its grant list
    /// for us has none) with guessed generations, out-of-range buffers,
    /// offsets and lengths: the first breaks our request channel, so
    /// netstack reads none of the others.
    fn forge_sends(&mut self) {
        let own = self.seen.conn.unwrap_or(0);
        log!("writing {} forged descriptors naming the pools netstack maps", POOLS.len() * 3);
        for pool in POOLS {
            let (buf, gen) = (self.rng.below(1024) as u32, self.rng.next() as u32);
            for s in [
                SliceDesc { pool, buf, gen, off: 0, len: 4096 },
                SliceDesc { pool, buf: u32::MAX, gen: 1, off: 0, len: 1 },
                SliceDesc { pool, buf: 0, gen: gen | 1, off: u32::MAX - 8, len: 4096 },
            ] {
                let mut d = AggDesc { nslices: 1, tag: Request::Send { conn: own }.encode(), ..AggDesc::default() };
                d.slices[0] = s;
                self.push(d);
            }
        }
    }

    /// One attack that breaks a channel (incarnations 1 to 6), each logged
    /// before it is written.
    fn attack(&mut self, k: u64) {
        match k {
            1 => {
                log!("writing a descriptor of 2^31 slices");
                self.push(AggDesc { nslices: 0x8000_0000, ..AggDesc::default() });
            }
            2 => {
                log!("writing a descriptor naming pool 0xdeadbeef");
                let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
                d.slices[0] = SliceDesc { pool: 0xdead_beef, buf: 0, gen: self.rng.next() as u32, off: 0, len: 64 };
                self.push(d);
            }
            3 => {
                self.break_tail(EVENTS, "event ring");
                // An event for netstack to put there: an error report.
                self.request(0);
            }
            4 => self.break_head(EVENT_RELEASES, "release ring"),
            6 => self.forge_sends(),
            _ => {
                self.break_tail(RETURNS, "returns ring");
                // A refused descriptor: its hold must go back there.
                let mut d = AggDesc { nslices: 1, ..AggDesc::default() };
                d.slices[0] = SliceDesc { pool: POOLS[4], buf: 0, gen: 1, off: 0, len: 1 };
                self.push(d);
            }
        }
    }
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let k = start.restarts;
    let seed = if SEED != 0 { SEED.wrapping_add(k) } else { start.seed };
    log!("incarnation {k}, seed {seed:#018x}");
    // SAFETY: our client dataport, mapped read-write for our lifetime,
    // shared with netstack only; netstack does not use its channels until
    // we published the generation.
    let region = unsafe { rw(glue::client::VADDR, glue::client::SIZE) };
    // SAFETY: as above; nobody on our side uses it yet.
    let g = unsafe { init_duplex(region, G) }.expect("client region");
    let mut h = Hostile::new(region, Rng(seed | 1));
    h.request(Request::Listen { port: PORT, backlog: 1 }.encode());
    if !h.wait_until(600, |h| h.seen.listening_on_port) {
        warn!("netstack never answered the listen (generation {g})");
    }
    log!("listening on port {PORT} (generation {g})");
    match k {
        0 => h.flood_hold_and_break(),
        1..=6 => h.attack(k),
        _ => {
            log!("all attacks done: an honest client from now on");
            loop {
                h.tick(false);
            }
        }
    }
    // Netstack cuts us off and has us restarted.
    loop {
        h.tick(true);
    }
}
