//! Host tests of the whole stack: two `NetStack`s back to back over an
//! in-memory wire that implements the frame model (headers + payload
//! slices). The wire reads each frame's slices from the pools, as a NIC's
//! DMA would, optionally drops frames, emulates the e1000 checksum and
//! segmentation offloads, and checks every TCP checksum independently, and
//! every data segment against the window its receiver last advertised.

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use std::boxed::Box;

use iolite::{Aggregate, CopyMode, Domain, PoolId, Trust};

use crate::csum;
use crate::frame::{parse_tcp, NicPort, TxFrame, TxOffload, ETH_HDR};
use crate::{Config, ConnId, NetError, NetStack, Recv, TcpState, TxChecksum};

pub(crate) const NET: PoolId = 1;
pub(crate) const RX: PoolId = 2;
pub(crate) const APP: PoolId = 3;

/// A domain owning the stack's pool, a "driver RX" pool and an application
/// (file cache) pool, leaked so it lives for the test.
pub(crate) fn domain(app_pages: u32, app_trust: Trust) -> &'static Domain {
    domain_with(512, app_pages, app_trust)
}

/// As [`domain`], with a stack pool of `net_pages`.
pub(crate) fn domain_with(net_pages: u32, app_pages: u32, app_trust: Trust) -> &'static Domain {
    let d = iolite::testing::domain();
    for (id, pages, trust) in
        [(NET, net_pages, Trust::Trusted), (RX, 2048, Trust::Trusted), (APP, app_pages, app_trust)]
    {
        iolite::testing::own_with(d, id, pages, trust);
    }
    d
}

/// An aggregate of `data` in pool `APP` (filled in place: "read from disk").
pub(crate) fn make<'d>(d: &'d Domain, data: &[u8]) -> Aggregate<'d> {
    let mut b = d.alloc(APP, data.len()).unwrap();
    b.writable()[..data.len()].copy_from_slice(data);
    b.seal(data.len()).map_err(|(e, _)| e).unwrap()
}

pub(crate) fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

type Cable = Rc<RefCell<VecDeque<Vec<u8>>>>;

/// One end of the wire: the NIC of one stack.
pub(crate) struct Port {
    d: &'static Domain,
    pub inbox: Cable,
    pub outbox: Cable,
    drop_permille: u32,
    rng: u32,
    pub dropped: u64,
    pub bad_checksums: u64,
    pub sent: Vec<Vec<u8>>,
    pub capture: bool,
    pub max_slices: usize,
    /// 0: frames go on the wire at once. Otherwise a NIC with a TX ring of
    /// this many frames that sends `rate` per `pump` and holds each frame
    /// (its buffers) until then, as netdrv and the e1000 do.
    pub ring: usize,
    pub rate: usize,
    held: VecDeque<TxFrame<'static>>,
    /// TCP payload bytes put on the wire (retransmissions included).
    pub payload_on_wire: u64,
    /// Frames the "NIC" cut into segments (TSO), the segments, and the
    /// largest payload of such a frame.
    pub tso_frames: u64,
    pub tso_segments: u64,
    pub tso_largest: usize,
    /// TSO frames that broke the e1000's rules (headers, checksum fields,
    /// length): they are not sent.
    pub bad_tso: u64,
    /// The largest frame put on the wire.
    pub largest_frame: usize,
    /// The right edge of the window the peer last advertised to this
    /// port's stack (ack + window, scaled), and the peer's window scale.
    pub peer_edge: Option<u32>,
    peer_scale: u8,
    /// Data segments this port's stack sent beyond that edge (zero-window
    /// probes aside).
    pub beyond_window: u64,
}

impl Port {
    pub fn pair(da: &'static Domain, db: &'static Domain, drop_permille: u32) -> (Port, Port) {
        let (ab, ba): (Cable, Cable) = (Default::default(), Default::default());
        let mk = |d, inbox: &Cable, outbox: &Cable, seed| Port {
            d,
            inbox: inbox.clone(),
            outbox: outbox.clone(),
            drop_permille,
            rng: seed,
            dropped: 0,
            bad_checksums: 0,
            sent: Vec::new(),
            capture: false,
            max_slices: 0,
            ring: 0,
            rate: 0,
            held: VecDeque::new(),
            payload_on_wire: 0,
            tso_frames: 0,
            tso_segments: 0,
            tso_largest: 0,
            bad_tso: 0,
            largest_frame: 0,
            peer_edge: None,
            peer_scale: 0,
            beyond_window: 0,
        };
        (mk(da, &ba, &ab, 7), mk(db, &ab, &ba, 11))
    }

    fn rand(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 17;
        self.rng ^= self.rng << 5;
        self.rng
    }

    /// A slow NIC (see `ring`): sends up to `rate` held frames.
    pub fn pump(&mut self) {
        for _ in 0..self.rate {
            let Some(f) = self.held.pop_front() else { break };
            self.wire(f);
        }
    }

    /// Frames the slow NIC still holds.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn wire(&mut self, frame: TxFrame<'static>) {
        // "DMA": gather the slices (not a CPU copy of the stack's).
        let mut bytes = Vec::with_capacity(frame.agg.len());
        for s in frame.agg.slices() {
            bytes.extend_from_slice(s);
        }
        self.max_slices = self.max_slices.max(frame.agg.slice_count());
        let frames = match frame.offload {
            TxOffload::TcpChecksum { start, offset } => {
                let (start, offset) = (start as usize, offset as usize);
                let s = csum::sum(&bytes[start..]);
                bytes[offset..offset + 2].copy_from_slice(&s.checksum().to_be_bytes());
                alloc::vec![bytes]
            }
            TxOffload::Tso(t) => match tso_segments(t, &bytes) {
                Some(segments) => {
                    self.tso_frames += 1;
                    self.tso_segments += segments.len() as u64;
                    self.tso_largest = self.tso_largest.max(bytes.len() - t.hdr_len());
                    segments
                }
                None => {
                    self.bad_tso += 1;
                    Vec::new()
                }
            },
            TxOffload::None => alloc::vec![bytes],
        };
        drop(frame); // TX complete: the holds go back
        for bytes in frames {
            self.largest_frame = self.largest_frame.max(bytes.len());
            if let Some(t) = parse_tcp(&bytes, bytes.len()) {
                self.payload_on_wire += t.payload_len as u64;
                let tcp_len = (bytes.len() - t.tcp_off) as u16;
                let s = csum::pseudo_header_v4(t.src, t.dst, 6, tcp_len).plus(csum::sum(&bytes[t.tcp_off..]));
                if s.0 != 0xffff {
                    self.bad_checksums += 1;
                }
                if let Some(edge) = self.peer_edge {
                    let end = t.seq.wrapping_add(t.payload_len as u32);
                    // A zero-window probe is one octet beyond the edge.
                    let probe = t.payload_len == 1 && t.seq == edge;
                    if t.payload_len > 0 && (end.wrapping_sub(edge) as i32) > 0 && !probe {
                        self.beyond_window += 1;
                    }
                }
            }
            // Captured before the wire may drop it: tests check every frame
            // the stack emitted, lost ones too.
            if self.capture {
                self.sent.push(bytes.clone());
            }
            if self.drop_permille > 0 && self.rand() % 1000 < self.drop_permille {
                self.dropped += 1;
                continue;
            }
            self.outbox.borrow_mut().push_back(bytes);
        }
    }

    /// Notes the window a frame for this port's stack advertises (and its
    /// window scale, from a SYN).
    fn note_window(&mut self, f: &[u8]) {
        let Some(t) = parse_tcp(f, f.len()) else { return };
        let flags = f[t.tcp_off + 13];
        let window = u16::from_be_bytes([f[t.tcp_off + 14], f[t.tcp_off + 15]]) as u32;
        if flags & 0x02 != 0 {
            // Options: kind 3 is the window scale (SYNs only; their own
            // window is never scaled).
            let mut i = t.tcp_off + 20;
            while i < t.payload_off {
                match f[i] {
                    0 => break,
                    1 => i += 1,
                    kind => {
                        let len = f.get(i + 1).copied().unwrap_or(0).max(2) as usize;
                        if kind == 3 && len == 3 {
                            self.peer_scale = f[i + 2];
                        }
                        i += len;
                    }
                }
            }
            return;
        }
        if flags & 0x10 != 0 {
            let ack = u32::from_be_bytes(f[t.tcp_off + 8..t.tcp_off + 12].try_into().unwrap());
            let edge = ack.wrapping_add(window << self.peer_scale);
            if self.peer_edge.is_none_or(|e| (edge.wrapping_sub(e) as i32) > 0) {
                self.peer_edge = Some(edge);
            }
        }
    }
}

/// The segments the e1000 cuts a TSO frame into (its manual, §3.5), or
/// `None` if the frame breaks its rules: the headers the request names,
/// the IPv4 header checksum 0, the pseudo-header sum without length in the
/// TCP checksum field, at most `TSO_MAX_FRAME` bytes, some payload.
pub(crate) fn tso_segments(t: nic_api::Tso, frame: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (hdr_len, tcp, mss) = (t.hdr_len(), t.tcp_start(), t.mss());
    t.segments(frame.len())?;
    let pt = parse_tcp(frame, frame.len())?;
    let seed = csum::pseudo_header_v4(pt.src, pt.dst, 6, 0).0.to_be_bytes();
    if !t.matches(frame) || frame[24..26] != [0, 0] || frame[tcp + 16..tcp + 18] != seed {
        return None;
    }
    let (hdr, payload) = frame.split_at(hdr_len);
    let chunks: Vec<&[u8]> = payload.chunks(mss).collect();
    let mut out = Vec::new();
    for (k, chunk) in chunks.iter().enumerate() {
        let mut f = [hdr, chunk].concat();
        let ip_len = (f.len() - ETH_HDR) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        let id = u16::from_be_bytes([f[18], f[19]]).wrapping_add(k as u16);
        f[18..20].copy_from_slice(&id.to_be_bytes());
        let seq = pt.seq.wrapping_add((k * mss) as u32);
        f[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < chunks.len() {
            f[tcp + 13] &= !0x09; // PSH and FIN in the last segment only
        }
        let seeded = csum::Sum(u16::from_be_bytes(seed)).plus(csum::Sum((f.len() - tcp) as u16));
        f[tcp + 16..tcp + 18].copy_from_slice(&seeded.0.to_be_bytes());
        let tcp_sum = csum::sum(&f[tcp..]).checksum();
        f[tcp + 16..tcp + 18].copy_from_slice(&tcp_sum.to_be_bytes());
        let ip_sum = csum::sum(&f[ETH_HDR..tcp]).checksum();
        f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
        out.push(f);
    }
    Some(out)
}

impl NicPort<'static> for Port {
    fn can_transmit(&self) -> bool {
        if self.ring > 0 {
            self.held.len() < self.ring
        } else {
            self.outbox.borrow().len() < 256
        }
    }

    fn transmit(&mut self, frame: TxFrame<'static>) -> Result<(), TxFrame<'static>> {
        if self.ring > 0 {
            // Slack for replies to received frames (see `NicPort`).
            if self.held.len() >= self.ring + 256 {
                return Err(frame);
            }
            self.held.push_back(frame);
        } else {
            self.wire(frame);
        }
        Ok(())
    }

    fn receive(&mut self) -> Option<Aggregate<'static>> {
        let bytes = self.inbox.borrow_mut().pop_front()?;
        self.note_window(&bytes);
        if bytes.is_empty() {
            return Some(Aggregate::new(self.d));
        }
        // "DMA" into a buffer of the driver's RX pool.
        let mut b = self.d.alloc(RX, bytes.len()).ok()?;
        b.writable()[..bytes.len()].copy_from_slice(&bytes);
        b.seal(bytes.len()).ok()
    }
}

pub(crate) fn cfg(mac_last: u8, ip_last: u8, mode: CopyMode, checksum: TxChecksum) -> Config {
    let mut c = Config::new([2, 0, 0, 0, 0, mac_last], NET);
    c.address = ([10, 0, 2, ip_last], 24);
    c.copy_mode = mode;
    c.checksum = checksum;
    c.random_seed = mac_last as u64 * 7919;
    c
}

/// Two stacks on a wire: A = 10.0.2.15 (client), B = 10.0.2.16 (server, port 80).
pub(crate) struct Net {
    pub da: &'static Domain,
    pub a: NetStack<'static>,
    pub b: NetStack<'static>,
    pub pa: Port,
    pub pb: Port,
    pub now: u64,
}

impl Net {
    pub fn new(mode_a: CopyMode, checksum: TxChecksum, drop_permille: u32) -> Net {
        Net::with(cfg(1, 15, mode_a, checksum), cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached), drop_permille)
    }

    /// A with `a`, B with `b` (addresses as in [`Net::new`]).
    pub fn with(a: Config, b: Config, drop_permille: u32) -> Net {
        let (da, db) = (domain(1024, Trust::Trusted), domain(1024, Trust::Trusted));
        let a = NetStack::new(da, a, 0);
        let b = NetStack::new(db, b, 0);
        let (pa, pb) = Port::pair(da, db, drop_permille);
        Net { da, a, b, pa, pb, now: 0 }
    }

    /// Polls both stacks; when the wire is idle, jumps to the next timer.
    pub fn step(&mut self) {
        self.pa.pump();
        self.pb.pump();
        self.a.poll(self.now, &mut self.pa);
        self.b.poll(self.now, &mut self.pb);
        let idle = self.pa.inbox.borrow().is_empty()
            && self.pb.inbox.borrow().is_empty()
            && self.pa.held() == 0
            && self.pb.held() == 0;
        let next = if idle {
            let da = self.a.poll_delay(self.now).unwrap_or(1000);
            let db = self.b.poll_delay(self.now).unwrap_or(1000);
            da.min(db).clamp(1, 1000)
        } else {
            1
        };
        self.now += next;
    }

    /// Connects A to B:80; returns (A's id, B's id).
    pub fn connect(&mut self) -> (ConnId, ConnId) {
        let _ = self.b.listen(80, 4);
        let ca = self.a.connect(([10, 0, 2, 16], 80), 49152).unwrap();
        for _ in 0..10_000 {
            self.step();
            if let Some(cb) = self.b.accept(80) {
                while self.a.state(ca).unwrap() != TcpState::Established {
                    self.step();
                }
                return (ca, cb);
            }
        }
        panic!("no connection");
    }

    /// Sends `aggs` from A and receives at B until B has `total` bytes. An
    /// aggregate larger than A can take at once (its peer's window plus
    /// its slack) goes in pieces, as the socket session splits it.
    pub fn transfer(
        &mut self,
        ca: ConnId,
        cb: ConnId,
        mut aggs: VecDeque<Aggregate<'static>>,
        total: usize,
    ) -> Vec<u8> {
        let mut got = Vec::with_capacity(total);
        let mut guard = 0u64;
        while got.len() < total {
            while let Some(a) = aggs.pop_front() {
                match self.a.send(ca, a) {
                    Ok(()) => {}
                    Err((NetError::WouldBlock, mut a)) => {
                        let space = self.a.send_space(ca).unwrap_or(0);
                        if space > 0 && space < a.len() {
                            let tail = a.split_off(space).unwrap();
                            aggs.push_front(tail);
                            aggs.push_front(a);
                            continue;
                        }
                        aggs.push_front(a);
                        break;
                    }
                    Err((e, _)) => panic!("send: {e:?}"),
                }
            }
            self.step();
            while let Ok(Recv::Data(d)) = self.b.recv(cb, usize::MAX) {
                for s in d.slices() {
                    got.extend_from_slice(s);
                }
            }
            guard += 1;
            assert!(guard < 2_000_000, "transfer stalled at {} of {total}", got.len());
        }
        got
    }

    /// Runs until A has nothing unacknowledged.
    pub fn drain(&mut self, ca: ConnId) {
        for _ in 0..100_000 {
            if self.a.send_queued(ca).unwrap_or(0) == 0 {
                self.step();
                return;
            }
            self.step();
        }
        panic!("never acknowledged");
    }
}

/// 1 MiB in 16 aggregates of 64 KiB, each of two slices (odd split), so
/// segments cross slice and aggregate boundaries at odd offsets.
pub(crate) fn mib_aggs(d: &'static Domain, data: &[u8]) -> VecDeque<Aggregate<'static>> {
    let mut q = VecDeque::new();
    for chunk in data.chunks(64 * 1024) {
        let cut = 1001.min(chunk.len());
        let mut a = make(d, &chunk[..cut]);
        a.append(make(d, &chunk[cut..])).unwrap();
        q.push_back(a);
    }
    q
}

fn zero_copy_transfer(checksum: TxChecksum, drop_permille: u32) {
    let mut n = Net::new(CopyMode::IoLite, checksum, drop_permille);
    let (ca, cb) = n.connect();
    let data = pattern(1 << 20, 42);
    let mut aggs = mib_aggs(n.da, &data);
    // Queued by reference: no send ring holds a copy (fs charges none).
    n.a.send(ca, aggs.pop_front().unwrap()).map_err(|(e, _)| e).unwrap();
    assert!(n.a.send_queued(ca).unwrap() > 0);
    assert_eq!(n.a.send_ring_bytes(), 0);
    let got = n.transfer(ca, cb, aggs, data.len());
    assert!(got == data, "byte-exact");
    n.drain(ca);
    let s = n.a.stats();
    assert_eq!(s.tx_copied(), 0, "{s:?}");
    assert_eq!(n.da.stats().bytes_copied, 0, "the sender copied nothing");
    assert_eq!(n.pa.bad_checksums + n.pb.bad_checksums, 0);
    assert!(s.tx_payload_by_ref >= data.len() as u64);
    assert_eq!(s.tx_payload_by_ref - s.tx_retransmitted, data.len() as u64, "{s:?}");
    assert!(n.pa.max_slices > 2, "frames carry payload slices");
    // Every acknowledged slice went back to the pool.
    assert_eq!(n.a.held_send_bytes(), 0);
    assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    if drop_permille > 0 {
        assert!(n.pa.dropped > 0 && s.tx_retransmitted > 0, "drops happened and were repaired: {s:?}");
        std::println!(
            "drops {}: A dropped {} B dropped {} frames, retransmitted {} bytes by reference",
            drop_permille,
            n.pa.dropped,
            n.pb.dropped,
            s.tx_retransmitted
        );
    }
    let _ = n.a.close(ca);
    let _ = n.b.close(cb);
    for _ in 0..2000 {
        n.step();
    }
}

/// Checks every TCP frame A sent against `stream` (what A's application
/// sent, in order): each segment's payload must be exactly the stream's
/// bytes at its sequence number. Returns the number of data frames.
pub(crate) fn frames_match_stream(frames: &[Vec<u8>], stream: &[u8]) -> usize {
    let mut isn = None;
    let mut data_frames = 0;
    for f in frames {
        let Some(t) = parse_tcp(f, f.len()) else { continue };
        if t.dport != 80 {
            continue;
        }
        let flags = f[t.tcp_off + 13];
        if flags & 0x02 != 0 {
            isn = Some(t.seq);
            continue;
        }
        if t.payload_len == 0 {
            continue;
        }
        let base = isn.expect("SYN captured first").wrapping_add(1);
        let off = t.seq.wrapping_sub(base) as usize;
        let payload = &f[t.payload_off..t.payload_off + t.payload_len];
        assert!(off + t.payload_len <= stream.len(), "segment at {off}+{} beyond the stream", t.payload_len);
        assert!(
            payload == &stream[off..off + t.payload_len],
            "frame payload at stream offset {off} is not the payload"
        );
        data_frames += 1;
    }
    data_frames
}

/// Sends `aggs` (whose bytes are `stream`) from A to B, with every frame A
/// emits captured and checked against the stream, the received stream
/// compared too, and every reference released at the end.
pub(crate) fn transfer_checked(n: &mut Net, ca: ConnId, cb: ConnId, aggs: VecDeque<Aggregate<'static>>, stream: &[u8]) {
    let got = n.transfer(ca, cb, aggs, stream.len());
    assert!(got == stream, "received stream differs");
    n.drain(ca);
    assert!(frames_match_stream(&n.pa.sent, stream) > 0);
    assert_eq!(n.a.stats().tx_withheld, 0);
    assert_eq!(n.pa.bad_checksums + n.pb.bad_checksums, 0);
    assert_eq!(n.pa.beyond_window, 0, "a segment beyond B's window");
    assert_eq!(n.a.held_send_bytes(), 0);
}

/// `k` aggregates of 1..=4 bytes each queued at once: a segment spans up to
/// hundreds of slices (pipelined responses of small files do this).
fn tiny_aggregates(drop_permille: u32, checksum: TxChecksum) {
    let mut n = Net::new(CopyMode::IoLite, checksum, drop_permille);
    n.pa.capture = true;
    let (ca, cb) = n.connect();
    let mut stream = Vec::new();
    let mut x = 7u32;
    for k in 1..=300usize {
        let mut aggs = VecDeque::new();
        let mut sent = Vec::new();
        for _ in 0..k {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            let bytes = pattern(1 + (x >> 16) as usize % 4, x);
            sent.extend_from_slice(&bytes);
            aggs.push_back(make(n.da, &bytes));
        }
        let got = n.transfer(ca, cb, aggs, sent.len());
        assert!(got == sent, "{k} tiny aggregates: received bytes differ");
        stream.extend_from_slice(&sent);
        // Each tiny aggregate holds a page of the application's pool
        // until acknowledged.
        n.drain(ca);
    }
    n.drain(ca);
    let frames = frames_match_stream(&n.pa.sent, &stream);
    let s = n.a.stats();
    assert_eq!(s.tx_withheld, 0, "{s:?}");
    assert!(s.tx_coalesced_segments > 0 && s.tx_coalesced_bytes > 0, "coalescing was exercised: {s:?}");
    // Every byte sent went either by reference or through the counted copy.
    assert_eq!(s.tx_payload_by_ref + s.tx_coalesced_bytes - s.tx_retransmitted, stream.len() as u64, "{s:?}");
    assert_eq!(s.tx_copied(), s.tx_coalesced_bytes);
    assert_eq!(n.pa.bad_checksums + n.pb.bad_checksums, 0);
    assert!(n.pa.max_slices <= iolite::MAX_SLICES);
    assert_eq!(n.a.held_send_bytes(), 0);
    assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    if drop_permille > 0 {
        assert!(s.tx_retransmitted > 0 && n.pa.dropped > 0, "{s:?}");
    }
    std::println!("{frames} data frames, {s:?}");
}

#[test]
fn one_to_300_tiny_aggregates_per_segment_are_byte_exact() {
    tiny_aggregates(0, TxChecksum::Cached);
}

#[test]
fn tiny_aggregates_with_retransmissions_are_byte_exact() {
    tiny_aggregates(40, TxChecksum::Cached);
}

#[test]
fn tiny_aggregates_with_software_checksums_and_offload() {
    tiny_aggregates(0, TxChecksum::Software);
    tiny_aggregates(10, TxChecksum::Offload);
}

/// Aggregates of 1..=16 slices of 0..=4096 bytes each (empty slices are
/// empty aggregates appended: they contribute nothing).
pub(crate) fn random_slices(
    d: &'static Domain,
    seed: u32,
    count: usize,
    stream: &mut Vec<u8>,
) -> VecDeque<Aggregate<'static>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mut q = VecDeque::new();
    for _ in 0..count {
        let mut a = Aggregate::new(d);
        for _ in 0..1 + next() as usize % 16 {
            let size = match next() % 4 {
                0 => next() as usize % 8, // tiny, often 0
                _ => next() as usize % 4097,
            };
            if size == 0 {
                continue;
            }
            let bytes = pattern(size, next());
            stream.extend_from_slice(&bytes);
            if let Err((_, b)) = a.append(make(d, &bytes)) {
                // 16 slices already (adjacent buffers may not merge): next aggregate.
                q.push_back(core::mem::replace(&mut a, b));
            }
        }
        q.push_back(a);
    }
    q
}

#[test]
fn random_slice_sizes_are_byte_exact_with_and_without_drops() {
    for (seed, drops) in [(3u32, 0u32), (5, 0), (11, 30), (13, 60)] {
        let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, drops);
        n.pa.capture = true;
        let (ca, cb) = n.connect();
        let mut stream = Vec::new();
        let aggs = random_slices(n.da, seed, 120, &mut stream);
        transfer_checked(&mut n, ca, cb, aggs, &stream);
        let s = n.a.stats();
        assert_eq!(s.tx_payload_by_ref + s.tx_coalesced_bytes - s.tx_retransmitted, stream.len() as u64, "{s:?}");
        assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    }
}

mod stream_model {
    use super::*;
    use proptest::prelude::*;

    /// A slice size: mostly tiny (many slices per segment), sometimes up to
    /// a page, sometimes empty.
    fn slice_size() -> impl Strategy<Value = usize> {
        prop_oneof![4 => 0usize..8, 2 => 0usize..200, 1 => 0usize..=4096]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever the aggregates and slices queued, and whatever frames
        /// the wire loses, every frame carries exactly the model's bytes at
        /// its sequence number and the receiver gets the model stream.
        #[test]
        fn frames_carry_exactly_the_stream(
            aggs in proptest::collection::vec(proptest::collection::vec(slice_size(), 1..16), 1..60),
            drops in prop_oneof![Just(0u32), Just(30u32)],
        ) {
            let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, drops);
            n.pa.capture = true;
            let (ca, cb) = n.connect();
            let mut model: Vec<u8> = Vec::new();
            let mut q = VecDeque::new();
            for (i, sizes) in aggs.iter().enumerate() {
                let mut a = Aggregate::new(n.da);
                for (j, &size) in sizes.iter().enumerate() {
                    if size == 0 {
                        continue;
                    }
                    let bytes = pattern(size, (i * 31 + j) as u32);
                    model.extend_from_slice(&bytes);
                    a.append(make(n.da, &bytes)).map_err(|(e, _)| e).unwrap();
                }
                q.push_back(a);
            }
            if model.is_empty() {
                return Ok(());
            }
            transfer_checked(&mut n, ca, cb, q, &model);
            prop_assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
        }
    }
}

#[test]
fn a_connection_sent_tiny_aggregates_holds_a_bounded_queue() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.pa.capture = true;
    let (ca, cb) = n.connect();
    // 3000 one-byte aggregates of 3000 slices, as fast as the stack takes
    // them: small sends share entries (16 slices each), and beyond 64
    // entries the stack says WouldBlock, so the queue's heap is bounded
    // by entries, not by how finely the sender cuts its data.
    let data = pattern(3000, 77);
    let mut aggs: VecDeque<Aggregate<'static>> = VecDeque::new();
    for &byte in &data {
        // Packed objects of 2 bytes, 1 sent: the slices share pages but are
        // not contiguous, so every one stays a slice of its own.
        let obj = n.da.pack(APP, 2, |b| b.copy_from_slice(&[byte, 0])).unwrap();
        aggs.push_back(obj.range(0, 1).unwrap());
    }
    let mut most = 0;
    let mut got = Vec::new();
    for _ in 0..100_000 {
        while let Some(a) = aggs.pop_front() {
            match n.a.send(ca, a) {
                Ok(()) => {}
                Err((NetError::WouldBlock, a)) => {
                    aggs.push_front(a);
                    break;
                }
                Err((e, _)) => panic!("{e:?}"),
            }
        }
        most = most.max(n.a.send_queue_entries(ca).unwrap());
        n.step();
        while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
            d.slices().for_each(|s| got.extend_from_slice(s));
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert!(got == data, "byte-exact");
    assert!(most <= 64, "{most} entries");
    assert!(frames_match_stream(&n.pa.sent, &data) > 0);
}

#[test]
fn mib_transfer_is_byte_exact_with_zero_copies() {
    zero_copy_transfer(TxChecksum::Cached, 0);
}

#[test]
fn mib_transfer_with_drops_retransmits_from_the_same_slices() {
    zero_copy_transfer(TxChecksum::Cached, 30);
}

#[test]
fn mib_transfer_with_plain_software_checksums() {
    zero_copy_transfer(TxChecksum::Software, 0);
}

#[test]
fn mib_transfer_with_nic_checksum_offload() {
    zero_copy_transfer(TxChecksum::Offload, 10);
}

fn copy_mode_transfer(mode: CopyMode) {
    let mut n = Net::new(mode, TxChecksum::Cached, 0);
    let (ca, cb) = n.connect();
    // What fs charges its cache for: the bytes a send ring holds, from the
    // copy until the peer acknowledges them.
    assert_eq!(n.a.send_ring_bytes(), 0);
    let first = pattern(5000, 3);
    n.a.send(ca, make(n.da, &first)).map_err(|(e, _)| e).unwrap();
    assert_eq!(n.a.send_ring_bytes(), 5000);
    assert_eq!(n.a.send_queued(ca).unwrap(), 5000);
    let mut got: Vec<u8> = Vec::new();
    while got.len() < first.len() {
        n.step();
        while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
            got.extend(d.slices().flatten().copied());
        }
    }
    assert!(got == first);
    n.drain(ca);
    assert_eq!(n.a.send_ring_bytes(), 0, "acknowledged: nothing held");
    let data = pattern(256 * 1024, 9);
    let aggs = mib_aggs(n.da, &data);
    let got = n.transfer(ca, cb, aggs, data.len());
    assert!(got == data);
    n.drain(ca);
    let s = n.a.stats();
    let sent = (data.len() + first.len()) as u64;
    assert_eq!(s.tx_payload_copied_socket, sent, "{s:?}");
    assert_eq!(s.tx_payload_copied_frame, sent, "{s:?}");
    assert_eq!(n.da.stats().bytes_copied, 2 * sent);
    assert_eq!(s.tx_payload_by_ref, 0);
    assert_eq!(n.pa.bad_checksums, 0);
    // The application's buffers were released at once (copied).
    assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
}

#[test]
fn flash_mode_copies_into_socket_and_frames() {
    copy_mode_transfer(CopyMode::Flash);
}

#[test]
fn posix_mode_copies_into_socket_and_frames() {
    copy_mode_transfer(CopyMode::Posix);
}

#[test]
fn checksum_cache_hits_when_the_same_aggregate_is_sent_twice() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let (ca, cb) = n.connect();
    // A 100 000-byte "file", sent twice; the second copy starts at a
    // stream offset that is no multiple of the MSS, so segments are cut at
    // other places.
    let data = pattern(100_000, 5);
    let file = make(n.da, &data);
    let first = n.transfer(ca, cb, VecDeque::from([file.duplicate().unwrap()]), data.len());
    let s1 = n.a.checksum_cache_stats();
    let second = n.transfer(ca, cb, VecDeque::from([file]), data.len());
    let s2 = n.a.checksum_cache_stats();
    assert!(first == data && second == data);
    let (hits, misses) = (s2.hits - s1.hits, s2.misses - s1.misses);
    let rate = hits * 100 / (hits + misses);
    let bytes_rate = (s2.bytes_cached - s1.bytes_cached) * 100 / data.len() as u64;
    std::println!(
        "checksum cache, second send: {hits} hits, {misses} misses ({rate}% of lookups), {bytes_rate}% of payload bytes not summed again; overall {}%",
        s2.hit_rate_percent()
    );
    assert!(rate >= 50, "hit rate {rate}%");
    // Misses left: blocks that straddled a segment boundary the first time.
    assert_eq!(n.pa.bad_checksums, 0);
}

#[test]
fn untrusted_pools_are_never_cached() {
    let (da, db) = (domain(256, Trust::Untrusted), domain(64, Trust::Trusted));
    let mut a = NetStack::new(da, cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached), 0);
    let b = NetStack::new(db, cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached), 0);
    let (pa, pb) = Port::pair(da, db, 0);
    let mut n =
        Net { da, a: NetStack::new(da, cfg(3, 15, CopyMode::IoLite, TxChecksum::Cached), 0), b, pa, pb, now: 0 };
    core::mem::swap(&mut n.a, &mut a);
    let (ca, cb) = n.connect();
    let data = pattern(50_000, 1);
    let file = make(da, &data);
    n.transfer(ca, cb, VecDeque::from([file.duplicate().unwrap()]), data.len());
    n.transfer(ca, cb, VecDeque::from([file]), data.len());
    let s = n.a.checksum_cache_stats();
    assert_eq!(s.hits + s.misses, 0);
    assert!(s.bytes_summed >= 100_000);
}

/// A frame B accepts: an IPv4/TCP segment from A to B:80 (for mutation).
fn captured_segment(n: &mut Net) -> Vec<u8> {
    n.pa.capture = true;
    let (ca, _cb) = n.connect();
    n.a.send(ca, make(n.da, b"hello, world")).unwrap();
    n.step();
    n.pa.capture = false;
    n.pa.sent.iter().rev().find(|f| parse_tcp(f, f.len()).is_some_and(|t| t.payload_len > 0)).unwrap().clone()
}

#[test]
fn malformed_frames_do_not_panic_and_the_stack_keeps_working() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let seg = captured_segment(&mut n);
    let mut bad: Vec<Vec<u8>> = Vec::new();
    for cut in 0..seg.len() {
        bad.push(seg[..cut].to_vec()); // truncated
    }
    for i in ETH_HDR..seg.len() {
        let mut f = seg.clone();
        f[i] ^= 0x5a; // bad checksums, lengths, flags, options...
        bad.push(f);
    }
    for len in [0u16, 1, 19, 20, 39, 41, 0xffff] {
        let mut f = seg.clone();
        f[16..18].copy_from_slice(&len.to_be_bytes()); // IPv4 total length
        bad.push(f);
    }
    for off in [0u8, 1, 4, 15] {
        let mut f = seg.clone();
        f[46] = off << 4; // TCP data offset
        bad.push(f);
    }
    let mut x = 99u32;
    for _ in 0..3000 {
        let len = (x % 1600) as usize;
        let mut f: Vec<u8> = pattern(len, x);
        if len > 14 && x.is_multiple_of(3) {
            f[..14].copy_from_slice(&seg[..14]); // plausible Ethernet header
            if len > 24 {
                f[14] = 0x45;
                f[23] = if x.is_multiple_of(2) { 6 } else { 1 };
            }
        }
        bad.push(f);
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
    }
    bad.push(Vec::new());
    let count = bad.len();
    for f in bad {
        n.pb.inbox.borrow_mut().push_back(f);
        n.b.poll(n.now, &mut n.pb);
        n.now += 1;
    }
    assert!(n.b.stats().rx_frames >= count as u64);
    // Still works: a fresh connection transfers data.
    n.pa.inbox.borrow_mut().clear();
    let ca = n.a.connect(([10, 0, 2, 16], 80), 50000).unwrap();
    let mut cb = None;
    for _ in 0..10_000 {
        n.step();
        if let Some(c) = n.b.accept(80) {
            if n.a.state(ca) == Ok(TcpState::Established) {
                cb = Some(c);
                break;
            }
            cb = Some(c);
        }
        if cb.is_some() && n.a.state(ca) == Ok(TcpState::Established) {
            break;
        }
    }
    let cb = cb.expect("accepted");
    let data = pattern(10_000, 3);
    let got = n.transfer(ca, cb, VecDeque::from([make(n.da, &data)]), data.len());
    assert!(got == data);
}

#[test]
fn answers_icmp_echo() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let seg = captured_segment(&mut n); // B now knows A's MAC
    let mut f = seg[..34].to_vec();
    f[16..18].copy_from_slice(&(20u16 + 8 + 4).to_be_bytes());
    f[23] = 1; // ICMP
    f[24..26].copy_from_slice(&[0, 0]);
    let ip = csum::sum(&f[14..34]).checksum();
    f[24..26].copy_from_slice(&ip.to_be_bytes());
    let mut icmp = alloc::vec![8u8, 0, 0, 0, 0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g'];
    let c = csum::sum(&icmp).checksum();
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    n.pb.capture = true;
    n.pb.inbox.borrow_mut().push_back(f);
    n.b.poll(n.now, &mut n.pb);
    let reply = n.pb.sent.iter().find(|r| r.len() >= 42 && r[23] == 1 && r[34] == 0).expect("echo reply");
    assert_eq!(&reply[38..42], &[0x12, 0x34, 0, 1]);
    assert_eq!(&reply[42..], b"ping");
}

#[test]
fn static_defaults_and_errors() {
    let d = domain(16, Trust::Trusted);
    let mut s = NetStack::new(d, Config::new([2, 0, 0, 0, 0, 1], NET), 0);
    assert_eq!(s.address(), Some([10, 0, 2, 15]));
    assert_eq!(s.listen(0, 1), Err(NetError::InvalidArgument));
    assert_eq!(s.listen(80, 0), Err(NetError::InvalidArgument));
    s.listen(80, 2).unwrap();
    assert_eq!(s.listen(80, 2), Err(NetError::AddressInUse));
    assert_eq!(s.accept(80), None);
    assert_eq!(s.accept(81), None);
    assert!(matches!(s.send(77, Aggregate::new(d)), Err((NetError::NotFound, _))));
    assert_eq!(s.close(77), Err(NetError::NotFound));
    s.unlisten(80).unwrap();
    assert_eq!(s.unlisten(80), Err(NetError::NotFound));
}

#[test]
fn closing_releases_everything_and_the_peer_sees_eof() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    let (ca, cb) = n.connect();
    let data = pattern(300_000, 8);
    // Send, then close at once: the FIN follows the data.
    // At most the peer's window (64 KiB) plus the slack (64 KiB) is taken.
    n.a.send(ca, make(n.da, &data[..120_000])).unwrap();
    n.a.send(ca, make(n.da, &data[120_000..])).unwrap_err();
    n.a.close(ca).unwrap();
    assert!(matches!(n.a.send(ca, make(n.da, b"x")), Err((NetError::NotConnected, _))));
    let mut got = Vec::new();
    let mut eof = false;
    for _ in 0..100_000 {
        n.step();
        match n.b.recv(cb, usize::MAX).unwrap() {
            Recv::Data(d) => d.slices().for_each(|s| got.extend_from_slice(s)),
            Recv::Eof => {
                eof = true;
                break;
            }
            Recv::WouldBlock => {}
        }
    }
    assert!(eof && got == data[..120_000]);
    n.b.close(cb).unwrap();
    for _ in 0..200 {
        n.step();
    }
    // A's connection goes after TIME-WAIT; its references went with the ACKs.
    assert_eq!(n.a.held_send_bytes(), 0);
    assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    n.now += 60_000;
    for _ in 0..50 {
        n.step();
    }
    assert!(!n.a.exists(ca) && !n.b.exists(cb));
}

#[test]
fn copy_mode_send_rings_are_sized_by_the_peers_window() {
    // B accepts in posix mode; A connects with a 2 KiB receive window,
    // then (another run) with 64 KiB. B's send ring holds what the peer
    // may have queued (window and slack), rounded to a power of two: 16 KiB
    // and 128 KiB; the transfer through the small ring is byte-exact.
    let mut rings = Vec::new();
    for window in [2048usize, 64 * 1024] {
        let mut a = cfg(1, 15, CopyMode::IoLite, TxChecksum::Cached);
        a.recv_window = window;
        let b = cfg(2, 16, CopyMode::Posix, TxChecksum::Cached);
        let mut n = Net::with(a, b, 0);
        let _ = n.b.listen(80, 1);
        let listening = n.b.socket_memory();
        let ca = n.a.connect(([10, 0, 2, 16], 80), 49152).unwrap();
        let mut cb = None;
        for _ in 0..10_000 {
            n.step();
            if let Some(c) = n.b.accept(80) {
                cb = Some(c);
                break;
            }
        }
        let cb = cb.expect("accepted");
        // The accepted socket's send ring, and a fresh backlog socket's
        // receive ring (the backlog is refilled).
        rings.push(n.b.socket_memory() - listening - 64 * 1024);
        let data = pattern(100_000, 3);
        let mut off = 0;
        let mut got = Vec::new();
        for _ in 0..200_000 {
            while off < data.len() {
                let k = n.b.send_space(cb).unwrap().min(data.len() - off);
                if k == 0 {
                    break;
                }
                n.b.send(cb, make(n.b.domain(), &data[off..off + k])).unwrap();
                off += k;
            }
            n.step();
            while let Ok(Recv::Data(d)) = n.a.recv(ca, usize::MAX) {
                d.slices().for_each(|s| got.extend_from_slice(s));
            }
            if got.len() == data.len() {
                break;
            }
        }
        assert!(got == data, "byte-exact through a {window}-byte window");
    }
    assert_eq!(rings, [16 * 1024, 128 * 1024]);
}

mod admission;
mod back_pressure;
mod dhcp;
mod hand_off;
mod relink;
mod rx_bounds;
mod stale;
mod timers;
mod tso;

#[test]
fn a_burst_of_connections_beyond_the_backlog_waits_and_gets_in() {
    // Twelve clients at once against a backlog of 4 that the server accepts
    // from, each sending its request at once: nobody is reset (smoltcp
    // alone would answer the SYNs beyond the listening sockets with RST:
    // "connection refused"). The SYNs beyond the free listening sockets
    // get SYN cookies (the 4 in SYN-RECEIVED might be a flood's); their
    // ACKs find the accept queue full and are dropped, and the requests,
    // which carry the cookie again, get in once the server accepted.
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.b.listen(80, 4).unwrap();
    let clients: Vec<ConnId> = (0..12).map(|i| n.a.connect(([10, 0, 2, 16], 80), 49152 + i).unwrap()).collect();
    let mut sent = [false; 12];
    // Per client port, what the server received on its connection.
    let mut got: std::collections::BTreeMap<u16, Vec<u8>> = Default::default();
    let mut accepted = Vec::new();
    for _ in 0..200_000 {
        n.step();
        for (i, &c) in clients.iter().enumerate() {
            if !sent[i] && n.a.state(c) == Ok(TcpState::Established) {
                let req = std::format!("GET /{i} HTTP/1.1\r\n\r\n");
                n.a.send(c, make(n.da, req.as_bytes())).unwrap();
                sent[i] = true;
            }
        }
        while let Some(cb) = n.b.accept(80) {
            accepted.push(cb);
        }
        for &cb in &accepted {
            let port = n.b.peer(cb).unwrap().1;
            while let Ok(Recv::Data(d)) = n.b.recv(cb, usize::MAX) {
                d.slices().for_each(|s| got.entry(port).or_default().extend_from_slice(s));
            }
        }
        let states: Vec<TcpState> = clients.iter().map(|&c| n.a.state(c).unwrap_or(TcpState::Closed)).collect();
        assert!(!states.contains(&TcpState::Closed), "a client was reset: {states:?}");
        if got.len() == 12 && got.values().all(|v| v.ends_with(b"\r\n\r\n")) {
            break;
        }
    }
    assert_eq!(accepted.len(), 12);
    for i in 0..12u16 {
        assert_eq!(got[&(49152 + i)], std::format!("GET /{i} HTTP/1.1\r\n\r\n").as_bytes(), "client {i}");
    }
    let st = n.b.stats();
    assert!(st.syn_cookies_sent >= 8 && st.syn_cookies_validated >= 8, "{st:?}");
    assert!(st.syn_dropped_backlog_full > 0, "the burst did exceed the backlog");
    assert_eq!(st.syn_cookies_rejected, 0);
    // Within a few retransmissions (1 s, then 2 s, ...), not minutes.
    assert!(n.now < 15_000, "took {} ms", n.now);
}
