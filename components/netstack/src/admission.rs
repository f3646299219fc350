//! TCP admission: which connection requests get a socket, which get a
//! SYN cookie, which are dropped (README, "Admission").
//!
//! A listener's backlog holds sockets in LISTEN (free), in SYN-RECEIVED
//! (half-open) and established ones its user has not accepted yet. A SYN
//! takes a free socket only while the listener's half-open budget and its
//! sender's are not used up; beyond them it is answered statelessly with a
//! SYN cookie ([`CookieJar`]), as Linux does: the SYN-ACK's sequence
//! number carries a keyed hash of the 4-tuple, a coarse time counter and
//! the peer's MSS, and a socket is made only when the peer's ACK of it
//! comes back with a cookie that checks out. A sender that holds
//! [`Config::per_address_connections`](crate::Config) sockets already
//! gets nothing (its SYN is dropped), so one address cannot take the
//! whole socket budget.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use iolite::Aggregate;
use smoltcp::socket::tcp::CookieHandshake;

use crate::conn::Tuple;

/// The MSS values a cookie can carry (its 2-bit index), as Linux's IPv4
/// table: the largest not above the peer's is used.
pub(crate) const MSS_TABLE: [u16; 4] = [536, 1300, 1440, 1460];
/// Bits of a cookie below its time counter.
const COOKIE_BITS: u32 = 24;
const COOKIE_MASK: u32 = (1 << COOKIE_BITS) - 1;
/// A cookie's time slot (Linux: 60 s). A cookie is good in the slot it
/// was made in and the next one, so for 64 to 128 s.
pub(crate) const SLOT_MS: u64 = 64_000;
/// Slots a cookie stays good in (Linux's `MAX_SYNCOOKIE_AGE`).
const MAX_AGE: u32 = 2;

/// SipHash-2-4 of `m` under `k` (Aumasson and Bernstein's keyed hash, as
/// Linux's cookies use it): nobody without the key can make a cookie.
pub(crate) fn siphash24(k: [u64; 2], m: &[u8]) -> u64 {
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut v = [
        k[0] ^ 0x736f_6d65_7073_6575,
        k[1] ^ 0x646f_7261_6e64_6f6d,
        k[0] ^ 0x6c79_6765_6e65_7261,
        k[1] ^ 0x7465_6462_7974_6573,
    ];
    let absorb = |v: &mut [u64; 4], word: u64| {
        v[3] ^= word;
        round(v);
        round(v);
        v[0] ^= word;
    };
    let mut chunks = m.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        absorb(&mut v, u64::from_le_bytes(w));
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    absorb(&mut v, u64::from_le_bytes(last) | ((m.len() as u64) << 56));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Makes and checks SYN cookies (Linux's `secure_tcp_syn_cookie` and
/// `check_tcp_syn_cookie`, with SipHash): a cookie is
/// `h0(tuple) + isn + (slot << 24) + ((h1(tuple, slot) + mss index) & 0xffffff)`,
/// where `isn` is the peer's initial sequence number, `slot` the time
/// counter and `h0`, `h1` keyed hashes.
pub(crate) struct CookieJar {
    keys: [[u64; 2]; 2],
    /// The slot the last cookie was sent in: ACKs are taken for cookies
    /// only while one may be outstanding (as Linux checks only after a
    /// recent overflow), so that nobody can guess at cookies otherwise.
    last_sent: Option<u64>,
}

impl CookieJar {
    /// Keys derived from the stack's random seed.
    pub fn new(seed: u64) -> Self {
        let base = [seed, seed.rotate_left(32) ^ 0x10_1173_c00c_1e5a];
        let key = |i: u8| [siphash24(base, &[b'k', i, 0]), siphash24(base, &[b'k', i, 1])];
        Self { keys: [key(0), key(1)], last_sent: None }
    }

    fn hash(&self, which: usize, t: &Tuple, slot: u32) -> u32 {
        let mut m = [0u8; 16];
        m[..4].copy_from_slice(&t.0);
        m[4..6].copy_from_slice(&t.1.to_be_bytes());
        m[6..10].copy_from_slice(&t.2);
        m[10..12].copy_from_slice(&t.3.to_be_bytes());
        m[12..16].copy_from_slice(&slot.to_be_bytes());
        siphash24(self.keys[which], &m) as u32
    }

    /// The cookie (our initial sequence number) for a SYN on `t` (local
    /// address, local port, remote address, remote port) with initial
    /// sequence number `isn` and MSS option `mss`, at `now_ms`; and the
    /// MSS it carries.
    pub fn make(&mut self, t: &Tuple, isn: u32, mss: Option<u16>, now_ms: u64) -> (u32, u16) {
        let slot = now_ms / SLOT_MS;
        self.last_sent = Some(slot);
        // No MSS option: 536 (RFC 9293); 0 counts as absent, as in smoltcp.
        let peer = mss.filter(|&m| m != 0).unwrap_or(536);
        let index = MSS_TABLE.iter().rposition(|&m| m <= peer).unwrap_or(0);
        let count = slot as u32;
        let cookie = self
            .hash(0, t, 0)
            .wrapping_add(isn)
            .wrapping_add(count << COOKIE_BITS)
            .wrapping_add(self.hash(1, t, count).wrapping_add(index as u32) & COOKIE_MASK);
        (cookie, MSS_TABLE[index])
    }

    /// Whether cookies may be outstanding at `now_ms` (one was sent in
    /// this slot or the one before).
    pub fn recently_sent(&self, now_ms: u64) -> bool {
        self.last_sent.is_some_and(|s| now_ms / SLOT_MS - s < MAX_AGE as u64)
    }

    /// The MSS a cookie carries if `cookie` is one we made for `t` and
    /// initial sequence number `isn` in this slot or the one before.
    pub fn check(&self, t: &Tuple, isn: u32, cookie: u32, now_ms: u64) -> Option<u16> {
        let count = (now_ms / SLOT_MS) as u32;
        let c = cookie.wrapping_sub(self.hash(0, t, 0).wrapping_add(isn));
        let age = count.wrapping_sub(c >> COOKIE_BITS) & (u32::MAX >> COOKIE_BITS);
        if age >= MAX_AGE {
            return None;
        }
        let index = c.wrapping_sub(self.hash(1, t, count.wrapping_sub(age))) & COOKIE_MASK;
        MSS_TABLE.get(index as usize).copied()
    }
}

/// What one remote address holds in the backlogs (this poll).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AddrUse {
    /// Sockets in SYN-RECEIVED.
    pub half_open: usize,
    /// Sockets in the backlogs that are not free (half-open, established).
    pub held: usize,
}

/// One listener's backlog as a poll starts (counts move as SYNs take
/// sockets).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortRoom {
    pub port: u16,
    /// Sockets in LISTEN.
    pub free: usize,
    /// Sockets in SYN-RECEIVED.
    pub half_open: usize,
    /// Established connections not accepted yet.
    pub ready: usize,
    /// The backlog its user asked for.
    pub want: usize,
}

/// The admission limits (from [`Config`](crate::Config)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub half_open: usize,
    pub per_address_half_open: usize,
    pub per_address_connections: usize,
}

/// What the device layer needs to admit connection requests, and what it
/// leaves for the stack (kept across polls for its memory).
pub(crate) struct Admission<'d> {
    pub jar: CookieJar,
    pub limits: Limits,
    /// The time of the poll running.
    pub now_ms: u64,
    /// Per listener (this poll).
    pub rooms: Vec<PortRoom>,
    /// Per remote address, what it holds in the backlogs (this poll).
    pub backlog_use: BTreeMap<[u8; 4], AddrUse>,
    /// Per remote address, its connections (accepted or connected):
    /// kept up to date as connections are made and forgotten.
    pub conns_by_addr: BTreeMap<[u8; 4], usize>,
    /// The 4-tuples of the backlogs' sockets (this poll): an ACK for one
    /// of them is no cookie's.
    pub backlog_tuples: BTreeSet<Tuple>,
    /// ACKs whose cookies checked out, for the stack to make their
    /// sockets after the poll and then hand them to smoltcp.
    pub cookie_acks: Vec<(Aggregate<'d>, CookieHandshake)>,
    /// Segments received after a cookie's ACK in the same poll, for the
    /// same 4-tuple (a reset right after the handshake, a FIN): smoltcp
    /// gets them after that ACK, once the socket exists. Given to
    /// smoltcp at once, a reset would find no socket and be lost, and
    /// the connection would stay established with nobody at the other
    /// end.
    pub cookie_followers: Vec<Aggregate<'d>>,
    /// Frames smoltcp gets before the NIC's at the next poll (the ACKs of
    /// cookies, once their sockets exist).
    pub inject: VecDeque<Aggregate<'d>>,
}

impl<'d> Admission<'d> {
    pub fn new(seed: u64, limits: Limits) -> Self {
        Self {
            jar: CookieJar::new(seed),
            limits,
            now_ms: 0,
            rooms: Vec::new(),
            backlog_use: BTreeMap::new(),
            conns_by_addr: BTreeMap::new(),
            backlog_tuples: BTreeSet::new(),
            cookie_acks: Vec::new(),
            cookie_followers: Vec::new(),
            inject: VecDeque::new(),
        }
    }

    /// Whether a cookie ACK of `tuple` waits for its socket (this poll).
    pub fn cookie_pending(&self, tuple: &Tuple) -> bool {
        self.cookie_acks.iter().any(|(_, h)| {
            let ip = |a: smoltcp::wire::IpAddress| match a {
                smoltcp::wire::IpAddress::Ipv4(v) => Some(v.octets()),
                #[allow(unreachable_patterns)]
                _ => None,
            };
            ip(h.local.addr) == Some(tuple.0)
                && h.local.port == tuple.1
                && ip(h.remote.addr) == Some(tuple.2)
                && h.remote.port == tuple.3
        })
    }

    /// Sockets `addr` holds: its connections and its backlog sockets.
    pub fn held_by(&self, addr: [u8; 4]) -> usize {
        self.conns_by_addr.get(&addr).copied().unwrap_or(0) + self.backlog_use.get(&addr).map_or(0, |u| u.held)
    }

    /// A connection from `addr` was made (`+1`) or forgotten.
    pub fn count_conn(&mut self, addr: [u8; 4], made: bool) {
        if made {
            *self.conns_by_addr.entry(addr).or_insert(0) += 1;
        } else if let Some(n) = self.conns_by_addr.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.conns_by_addr.remove(&addr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vector() {
        // The SipHash paper's example: key 00..0f, message 00..0e.
        let k = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let m: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k, &m), 0xa129_ca61_49be_45e5);
        // The empty message (the reference implementation's vectors.h).
        assert_eq!(siphash24(k, &[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn cookies_check_out_for_their_tuple_and_slot_only() {
        let mut jar = CookieJar::new(42);
        let t: Tuple = ([10, 0, 2, 16], 80, [10, 0, 2, 15], 40000);
        let now = 5 * SLOT_MS + 100;
        for (mss, want) in [(Some(1460), 1460), (Some(1400), 1300), (None, 536), (Some(9000), 1460), (Some(100), 536)] {
            let (c, m) = jar.make(&t, 0xdead_beef, mss, now);
            assert_eq!(m, want);
            assert_eq!(jar.check(&t, 0xdead_beef, c, now), Some(want));
            // The next slot still takes it, the one after does not.
            assert_eq!(jar.check(&t, 0xdead_beef, c, now + SLOT_MS), Some(want));
            assert_eq!(jar.check(&t, 0xdead_beef, c, now + 2 * SLOT_MS), None);
            // Another port, address, peer ISN or cookie: refused.
            assert_eq!(jar.check(&(t.0, t.1, t.2, 40001), 0xdead_beef, c, now), None);
            assert_eq!(jar.check(&(t.0, t.1, [10, 0, 2, 14], t.3), 0xdead_beef, c, now), None);
            // (An ISN a few apart moves the MSS index, as in Linux: it is
            // the cookie that must be guessed.)
            assert_eq!(jar.check(&t, 0xdead_beef ^ 0x10_0000, c, now), None);
            assert_eq!(jar.check(&t, 0xdead_beef, c ^ 0x100, now), None);
        }
        // Another key (seed) makes other cookies.
        let (c, _) = jar.make(&t, 1, Some(1460), now);
        assert_eq!(CookieJar::new(43).check(&t, 1, c, now), None);
        // Of 100000 guesses, about 4 in 2^24 may pass by chance (the MSS
        // index is 2 of the 24 checked bits): none here.
        let passed =
            (0..100_000u32).filter(|&g| jar.check(&t, 1, g.wrapping_mul(2_654_435_761), now).is_some()).count();
        assert!(passed <= 1, "{passed} guesses passed");
        assert!(jar.recently_sent(now + SLOT_MS) && !jar.recently_sent(now + 2 * SLOT_MS));
    }
}
