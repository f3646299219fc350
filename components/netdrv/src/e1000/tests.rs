//! The driver against the simulated device (`fake.rs`): ring set-up, receive
//! into pool buffers and ring wrap, pool exhaustion, bad write-backs,
//! multi-descriptor transmit, checksum contexts, completion and reclaim, a
//! full TX ring, and hostile register values. Every frame is compared byte
//! for byte.

use std::alloc::{alloc_zeroed, Layout};
use std::collections::VecDeque;

use iolite::{BufMeta, PoolLayout, RwRegion, Trust};

use super::fake::{Device, Map, Sent, MAC};
use super::*;

pub(super) const RX_POOL: PoolId = 1;
pub(super) const HDR_POOL: PoolId = 2;
pub(super) const APP_POOL: PoolId = 3;
/// A pool that is not a dataport (not in the DMA map).
const PRIVATE_POOL: PoolId = 4;
/// Pages of the RX pool the rings take (two per ring).
pub(super) const RING_PAGES: u32 = 4;

pub(super) type Nic = E1000<'static, Device, Map>;

pub(super) fn leak<T>(v: T) -> &'static mut T {
    Box::leak(Box::new(v))
}

/// A domain owning the RX pool (`rx_pages` pages), a header and a payload
/// pool (all three "dataports" in the returned map) and a private pool.
pub(super) fn domain(rx_pages: u32) -> (&'static Domain, Map) {
    let d: &'static Domain = leak(Domain::new());
    let mut map = Map::default();
    for (id, pages, dataport) in
        [(RX_POOL, rx_pages, true), (HDR_POOL, 64, true), (APP_POOL, 1024, true), (PRIVATE_POOL, 8, false)]
    {
        let len = PoolLayout { pages }.region_bytes();
        // SAFETY: a non-zero size; leaked, so it lives as long as the domain.
        let base = unsafe { alloc_zeroed(Layout::from_size_align(len, 4096).unwrap()) };
        // SAFETY: fresh memory used only through the domain and the device.
        let region = unsafe { RwRegion::from_raw_parts(base, len) }.unwrap();
        let meta = Box::leak(vec![BufMeta::EMPTY; pages as usize].into_boxed_slice());
        d.add_owned_pool(id, region, meta, Trust::Trusted).unwrap();
        if dataport {
            map.add(base as u64, len as u64);
        }
    }
    (d, map)
}

/// How the tests set up an 82540EM: ITR 200, `interrupts` or polled.
pub(super) fn setup(interrupts: bool) -> Setup {
    Setup { model: Model::I82540EM, itr: 200, interrupts }
}

/// The driver on a fresh device, interrupts on.
pub(super) fn nic(rx_pages: u32) -> (&'static Domain, Nic) {
    let (d, map) = domain(rx_pages);
    let mut dev = Device::new(map.clone());
    assert_eq!(reset(&mut dev, || {}), Ok(MAC));
    (d, E1000::new(dev, map, d, RX_POOL, setup(true)).unwrap())
}

/// `len` pseudo-random bytes (IPv4 ethertype unless `arp`), different per
/// `seed`.
pub(super) fn frame(seed: u64, len: usize, arp: bool) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut f: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    if len >= 14 {
        f[12..14].copy_from_slice(if arp { &[0x08, 0x06] } else { &[0x08, 0x00] });
    }
    f
}

pub(super) fn bytes(agg: &Aggregate<'_>) -> Vec<u8> {
    let mut out = vec![0; agg.len()];
    assert_eq!(agg.read_at(0, &mut out), agg.len());
    out
}

/// Takes every completed frame, returns them in order.
pub(super) fn drain(nic: &mut Nic) -> Vec<Aggregate<'static>> {
    let mut got = Vec::new();
    nic.rx_drain(usize::MAX, |a| {
        got.push(a);
        true
    });
    got
}

/// An aggregate of `parts` bytes each in its own buffer of `pool`.
pub(super) fn aggregate(d: &'static Domain, pool: PoolId, parts: &[&[u8]]) -> Aggregate<'static> {
    let mut agg = Aggregate::new(d);
    for p in parts {
        agg.append(d.alloc_copy(pool, p).unwrap()).map_err(|_| ()).unwrap();
    }
    agg
}

pub(super) fn pages_in_use(d: &Domain, pool: PoolId) -> u32 {
    d.pool_stats(pool).unwrap().pages_in_use
}

pub(super) fn counter(nic: &Nic, c: Counter) -> u64 {
    nic.counters()[c]
}

/// Posts `frames` (plain), returns how many `pull` calls there were.
pub(super) fn post(nic: &mut Nic, frames: &mut VecDeque<(Aggregate<'static>, TxRequest)>) -> usize {
    let mut pulls = 0;
    nic.tx_post(|| {
        pulls += 1;
        match frames.pop_front() {
            Some((a, r)) => Pull::Frame(a, r),
            None => Pull::Empty,
        }
    });
    pulls
}

#[test]
fn set_up_gives_the_device_both_rings_and_all_rx_descriptors_but_one() {
    let (_, mut nic) = nic(RING_PAGES + RING as u32);
    let dev = nic.regs();
    assert_eq!(dev.writes_to(RDLEN), [(RING * 16) as u32]);
    assert_eq!(dev.writes_to(TDLEN), [(RING * 16) as u32]);
    for base in [RDBAL, TDBAL] {
        let pa = u64::from(dev.writes_to(base + 4)[0]) << 32 | u64::from(dev.writes_to(base)[0]);
        assert!(dev.map().virt(pa, RING * 16).is_some(), "ring {base:#x} at {pa:#x} is in a dataport");
    }
    // One RDT write after the refill: the device has RING - 1 buffers (an
    // RDT equal to RDH would mean none).
    assert_eq!(dev.writes_to(RDT), [0, (RING - 1) as u32]);
    assert_eq!(dev.rx_free(), RING - 1);
    // The receiver is enabled only once its ring is full.
    let pos = |reg: usize| dev.writes.iter().rposition(|w| w.0 == reg).unwrap();
    assert!(pos(RCTL) > pos(RDT));
    assert_eq!(dev.read(IMS), INT_RXT0 | INT_RXO | INT_RXDMT0 | INT_LSC | INT_TXDW);
    assert_eq!(dev.writes_to(TCTL), [TCTL_EN | TCTL_PSP | TCTL_CT | TCTL_COLD]);
    assert_eq!(dev.writes_to(ITR), [200]);
    assert_eq!(counter(&nic, Counter::LinkUp), 1);

    // Polling: no cause unmasked.
    let (d, map) = domain(RING_PAGES + 8);
    let mut dev = Device::new(map.clone());
    reset(&mut dev, || {}).unwrap();
    let mut polled = E1000::new(dev, map, d, RX_POOL, setup(false)).unwrap();
    assert_eq!(polled.regs().read(IMS), 0);
}

#[test]
fn reset_gives_up_on_a_device_that_never_finishes() {
    let (_, map) = domain(RING_PAGES);
    let mut dev = Device::new(map);
    dev.stuck_reset = true;
    let mut yields = 0;
    assert_eq!(reset(&mut dev, || yields += 1), Err(InitError::ResetStuck));
    assert_eq!(yields, RESET_POLLS);
}

#[test]
fn no_valid_receive_address_is_an_error() {
    let (_, map) = domain(RING_PAGES);
    let mut dev = Device::new(map);
    dev.set(RAH0, 0x5634);
    assert_eq!(reset(&mut dev, || {}), Err(InitError::NoMac));
}

#[test]
fn a_head_register_that_does_not_read_back_is_refused() {
    for (reg, name, value) in [(TDH, "TDH", RING as u32 + 7), (RDH, "RDH", u32::MAX), (RDH, "RDH", 3)] {
        let (d, map) = domain(RING_PAGES + 8);
        let mut dev = Device::new(map.clone());
        reset(&mut dev, || {}).unwrap();
        dev.lie = Some((reg, value));
        let r = E1000::new(dev, map, d, RX_POOL, setup(true));
        assert_eq!(r.err(), Some(InitError::Head(name, value)));
    }
}

#[test]
fn received_frames_arrive_whole_in_pool_buffers() {
    let (_, mut nic) = nic(RING_PAGES + RING as u32);
    let sizes = [14, 60, 61, 1000, 1514, 2048];
    let sent: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| frame(i as u64, n, i == 1)).collect();
    for f in &sent {
        assert!(nic.regs().receive(f));
    }
    assert!(nic.rx_ready());
    let got = drain(&mut nic);
    assert!(!nic.rx_ready());
    assert_eq!(got.len(), sent.len());
    for (agg, f) in got.iter().zip(&sent) {
        assert_eq!(bytes(agg), *f);
        assert_eq!(agg.slice_count(), 1, "by reference: one buffer, no copy");
        assert_eq!(agg.descs()[0].pool, RX_POOL);
    }
    assert_eq!(counter(&nic, Counter::RxFrames), 6);
    assert_eq!(counter(&nic, Counter::RxBytes), sizes.iter().sum::<usize>() as u64);
    assert_eq!(counter(&nic, Counter::ArpRx), 1);
    assert_eq!(nic.regs().dma_faults, 0);
}

#[test]
fn the_rx_ring_wraps_and_is_refilled_once_per_pass() {
    let (_, mut nic) = nic(RING_PAGES + RING as u32);
    let mut expected = VecDeque::new();
    let (mut seed, mut passes) = (0u64, 0);
    while seed < 5 * RING as u64 {
        // Batches that do not divide the ring: every wrap position occurs.
        for _ in 0..97 {
            let f = frame(seed, 60 + (seed as usize * 37) % 1455, false);
            assert!(nic.regs().receive(&f), "frame {seed}: the device had a descriptor");
            expected.push_back(f);
            seed += 1;
        }
        // Less than the whole backlog per call, as the component does.
        let mut got = Vec::new();
        while nic.rx_ready() {
            nic.rx_drain(40, |a| {
                got.push(a);
                true
            });
        }
        for agg in got {
            assert_eq!(bytes(&agg), expected.pop_front().unwrap());
        }
        nic.rx_refill();
        passes += 1;
        assert_eq!(nic.regs().rx_free(), RING - 1, "pass {passes}: every buffer back with the device");
    }
    assert!(expected.is_empty());
    assert_eq!(nic.regs().writes_to(RDT).len(), 2 + passes, "one RDT write per refill pass");
    assert_eq!((nic.regs().overruns, nic.regs().dma_faults), (0, 0));
}

#[test]
fn rx_descriptors_go_back_in_batches_while_the_device_has_plenty() {
    let (d, mut nic) = nic(RING_PAGES + RING as u32);
    let writes = |nic: &mut Nic| nic.regs().writes_to(RDT).len();
    let (mut seed, before) = (0u64, writes(&mut nic));
    let in_use = pages_in_use(d, RX_POOL);
    // One frame per pass, as a request-response client sends them: the
    // device keeps all but a few descriptors, so RDT is written once per
    // batch, not once per frame.
    for pass in 1..=3 * RX_REFILL_BATCH {
        let f = frame(seed, 100, false);
        seed += 1;
        assert!(nic.regs().receive(&f));
        let mut got = 0;
        nic.rx_drain(40, |a| {
            assert_eq!(bytes(&a), f);
            got += 1;
            true
        });
        assert_eq!(got, 1);
        nic.rx_refill();
        let free = RING - 1 - nic.regs().rx_free();
        assert!(free < RX_REFILL_BATCH, "pass {pass}: {free} descriptors held back");
        assert_eq!(pages_in_use(d, RX_POOL), in_use, "pass {pass}: every slot keeps a buffer");
    }
    assert_eq!(writes(&mut nic) - before, 3, "one RDT write per {RX_REFILL_BATCH} frames");
    // All but set-up's first write (RDT := RDH, an empty ring) are refills.
    assert_eq!(counter(&nic, Counter::RxTailWrites) as usize, writes(&mut nic) - 1, "every refill's write counted");
    // Below half the ring, every free descriptor goes back at once.
    for _ in 0..RING / 2 + 1 {
        assert!(nic.regs().receive(&frame(seed, 60, false)));
        seed += 1;
    }
    while nic.rx_ready() {
        nic.rx_drain(64, |_| true);
    }
    nic.rx_refill();
    assert_eq!(nic.regs().rx_free(), RING - 1, "a ring more than half used is refilled whole");
    assert_eq!((nic.regs().overruns, nic.regs().dma_faults), (0, 0));
}

#[test]
fn held_buffers_run_the_pool_dry_without_a_stale_descriptor_looking_ready() {
    // Exactly one ring's worth of buffers: netstack holding every frame of
    // a lap leaves the driver with none to give.
    let (d, mut nic) = nic(RING_PAGES + RING as u32 - 1);
    for f in 0..(RING - 1) as u64 {
        assert!(nic.regs().receive(&frame(f, 100, false)));
    }
    drop(drain(&mut nic));
    nic.rx_refill();
    let mut held = Vec::new();
    for f in 0..(RING - 1) as u64 {
        assert!(nic.regs().receive(&frame(1000 + f, 100, false)));
    }
    held.extend(drain(&mut nic));
    nic.rx_refill();
    assert_eq!(pages_in_use(d, RX_POOL), RING_PAGES + RING as u32 - 1, "the pool is dry");
    assert!(counter(&nic, Counter::RxRingEmpty) > 0);
    assert_eq!(nic.regs().rx_free(), 0, "the device owns no descriptor");
    // The next descriptor holds an old completion from the first lap: the
    // driver must not take it for a new frame (its loop would spin).
    assert!(!nic.rx_ready());
    assert_eq!(drain(&mut nic).len(), 0);
    // The holder returns the frames: the ring fills and receives again.
    drop(held);
    nic.rx_refill();
    assert_eq!(nic.regs().rx_free(), RING - 1);
    let f = frame(7, 333, false);
    assert!(nic.regs().receive(&f));
    assert_eq!(drain(&mut nic).iter().map(bytes).collect::<Vec<_>>(), [f]);
}

#[test]
fn a_completion_in_a_descriptor_the_device_does_not_own_is_ignored() {
    let (_, mut nic) = nic(RING_PAGES + 8);
    assert_eq!(nic.regs().rx_free(), 8);
    let mut held = Vec::new();
    for f in 0..8 {
        assert!(nic.regs().receive(&frame(f, 64, false)));
    }
    held.extend(drain(&mut nic));
    nic.rx_refill(); // nothing to give: the device owns nothing
                     // The device claims frames in descriptors it was never given.
    for i in [8, 9, RING - 1] {
        nic.regs().poke_rx(i, 60 | u64::from(DD | RXD_EOP) << 32);
    }
    assert!(!nic.rx_ready());
    assert_eq!(drain(&mut nic).len(), 0);
    assert_eq!(counter(&nic, Counter::RxFrames), 8);
    drop(held);
}

#[test]
fn bad_write_backs_are_dropped_and_their_buffers_reused() {
    let (d, mut nic) = nic(RING_PAGES + RING as u32);
    let in_use = pages_in_use(d, RX_POOL);
    let good = frame(1, 200, false);
    let dev = nic.regs();
    dev.receive_raw(&frame(2, 100, false), DD | RXD_EOP, 0x01); // CRC error
    dev.receive_lying(&frame(3, 100, false), 10, DD | RXD_EOP, 0); // shorter than a header
    dev.receive_lying(&frame(4, 100, false), 4000, DD | RXD_EOP, 0); // longer than the buffer
    assert!(dev.receive(&frame(5, 3000, false))); // two descriptors: no EOP, then EOP
    assert!(dev.receive(&good));
    let got = drain(&mut nic);
    assert_eq!(got.iter().map(bytes).collect::<Vec<_>>(), [good], "only the good frame, whole");
    assert_eq!(counter(&nic, Counter::RxDropped), 4, "one per dropped frame");
    drop(got);
    nic.rx_refill();
    // Every slot has its buffer again (the dropped frames' their own);
    // six descriptors, fewer than a batch, wait to be handed over.
    assert_eq!(pages_in_use(d, RX_POOL), in_use, "dropped buffers went back to the ring, none leaked");
    for f in 0..RX_REFILL_BATCH as u64 {
        assert!(nic.regs().receive(&frame(10 + f, 100, false)));
    }
    drop(drain(&mut nic));
    nic.rx_refill();
    assert_eq!(pages_in_use(d, RX_POOL), in_use);
    assert_eq!(nic.regs().rx_free(), RING - 1);
}

#[test]
fn a_refused_frame_is_counted_as_dropped() {
    let (_, mut nic) = nic(RING_PAGES + 16);
    assert!(nic.regs().receive(&frame(1, 80, false)));
    assert_eq!(nic.rx_drain(8, |_| false), 0);
    assert_eq!((counter(&nic, Counter::RxDropped), counter(&nic, Counter::RxFrames)), (1, 0));
}

#[test]
fn an_aggregate_goes_out_as_one_descriptor_per_slice() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let (hdr, body1, body2) = (frame(1, 54, false), frame(2, 700, false), frame(3, 300, false));
    let mut agg = aggregate(d, HDR_POOL, &[&hdr]);
    agg.append(aggregate(d, APP_POOL, &[&body1, &body2])).map_err(|_| ()).unwrap();
    assert_eq!(agg.slice_count(), 3);
    let mut q = VecDeque::from([(agg, TxRequest::Plain)]);
    post(&mut nic, &mut q);
    assert_eq!(nic.regs().writes_to(TDT), [0, 3], "TDT once, past the three descriptors");
    assert_eq!(nic.regs().transmit(usize::MAX), 3);
    let whole: Vec<u8> = [hdr, body1, body2].concat();
    assert_eq!(nic.regs().sent, [Sent { bytes: whole, checksum: None, descriptors: 3, segment: None }]);
    assert_eq!(counter(&nic, Counter::TxDescriptors), 3);
    assert_eq!(counter(&nic, Counter::TxBytes), 1054);
    assert_eq!(nic.regs().dma_faults, 0);
}

#[test]
fn the_checksum_context_is_written_only_when_it_changes() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let csum = |start, offset| TxRequest::TcpChecksum { start, offset };
    let mut q: VecDeque<_> = [(1, csum(34, 50)), (2, csum(34, 50)), (3, csum(34, 40)), (4, TxRequest::Plain)]
        .into_iter()
        .map(|(s, r)| (aggregate(d, HDR_POOL, &[&frame(s, 120, false)]), r))
        .collect();
    post(&mut nic, &mut q);
    nic.regs().transmit(usize::MAX);
    let sums: Vec<_> = nic.regs().sent.iter().map(|s| s.checksum).collect();
    assert_eq!(sums, [Some((34, 50)), Some((34, 50)), Some((34, 40)), None]);
    assert_eq!(counter(&nic, Counter::TxDescriptors), 6, "two contexts, four data descriptors");
    assert_eq!(counter(&nic, Counter::TxOffloaded), 3);
    // Requests the device cannot carry out are refused, not posted.
    let mut bad: VecDeque<_> = [csum(50, 50), csum(60, 50), csum(34, 119), csum(34, 300)]
        .into_iter()
        .map(|r| (aggregate(d, HDR_POOL, &[&frame(9, 120, false)]), r))
        .collect();
    post(&mut nic, &mut bad);
    assert_eq!(counter(&nic, Counter::TxRejected), 4);
    assert_eq!(nic.regs().tx_queued(), 0);
}

#[test]
fn frames_keep_their_buffers_until_the_device_is_done() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let mut q: VecDeque<_> =
        (0..10).map(|i| (aggregate(d, APP_POOL, &[&frame(i, 1000, false)]), TxRequest::Plain)).collect();
    post(&mut nic, &mut q);
    assert_eq!(pages_in_use(d, APP_POOL), 10, "in flight: held by the driver alone");
    assert_eq!(nic.tx_reap(), 0, "nothing done yet");
    nic.regs().transmit(4);
    assert_eq!(nic.tx_reap(), 4);
    assert_eq!(pages_in_use(d, APP_POOL), 6);
    nic.regs().transmit(usize::MAX);
    assert_eq!(nic.tx_reap(), 6);
    assert_eq!((pages_in_use(d, APP_POOL), nic.tx_in_flight()), (0, 0));
    assert_eq!(nic.regs().sent.len(), 10);
}

#[test]
fn a_full_tx_ring_keeps_the_next_frame_waiting_and_wraps() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let total = 3 * RING as u64;
    // Three slices per frame: 170 frames fill 510 of the 511 usable descriptors.
    let make = |i: u64| -> (Vec<u8>, Aggregate<'static>) {
        let parts = [frame(i, 42, false), frame(i + 7, 100 + i as usize % 200, false), frame(i + 9, 64, false)];
        let agg = aggregate(d, APP_POOL, &[&parts[0], &parts[1], &parts[2]]);
        (parts.concat(), agg)
    };
    let (mut next, mut expected) = (0u64, Vec::new());
    let pull_frame = |next: &mut u64, expected: &mut Vec<Vec<u8>>| {
        let (bytes, agg) = make(*next);
        *next += 1;
        expected.push(bytes);
        (agg, TxRequest::Plain)
    };
    let mut pulls = 0;
    nic.tx_post(|| {
        pulls += 1;
        let (a, r) = pull_frame(&mut next, &mut expected);
        Pull::Frame(a, r)
    });
    assert_eq!(nic.tx_in_flight(), 170);
    assert!(nic.tx_waiting(), "the 171st frame waits, whole");
    assert_eq!(pulls, 171, "and nothing more was pulled meanwhile");
    assert_eq!(nic.regs().tx_queued(), 510);
    while next < total || nic.tx_waiting() || nic.tx_in_flight() > 0 {
        // The device finishes a few frames' worth; the driver reaps and
        // posts again, the waiting frame first.
        nic.regs().transmit(3 * 11);
        nic.tx_reap();
        nic.tx_post(|| {
            if next < total {
                let (a, r) = pull_frame(&mut next, &mut expected);
                Pull::Frame(a, r)
            } else {
                Pull::Empty
            }
        });
        assert!(nic.regs().tx_queued() < RING, "the ring never overflows");
    }
    let sent: Vec<Vec<u8>> = nic.regs().sent.iter().map(|s| s.bytes.clone()).collect();
    assert_eq!(sent.len(), total as usize);
    assert!(sent == expected, "every frame once, in order, byte for byte");
    assert_eq!(pages_in_use(d, APP_POOL), 0);
    assert_eq!(nic.regs().dma_faults, 0);
}

#[test]
fn one_tx_descriptor_always_stays_free() {
    // TDT equal to TDH means an empty ring to the device: posting all RING
    // descriptors would make every frame in it vanish.
    let (d, mut nic) = nic(RING_PAGES + 8);
    let mut q: VecDeque<_> =
        (0..RING as u64 + 5).map(|i| (aggregate(d, APP_POOL, &[&frame(i, 60, false)]), TxRequest::Plain)).collect();
    post(&mut nic, &mut q);
    assert_eq!((nic.tx_in_flight(), nic.regs().tx_queued()), (RING - 1, RING - 1));
    assert!(nic.tx_waiting());
    assert_eq!(nic.regs().transmit(usize::MAX), RING - 1);
    assert_eq!(nic.tx_reap(), RING - 1);
    post(&mut nic, &mut q);
    nic.regs().transmit(usize::MAX);
    nic.tx_reap();
    let sent: Vec<_> = nic.regs().sent.iter().map(|s| s.bytes.clone()).collect();
    assert_eq!(sent, (0..RING as u64 + 5).map(|i| frame(i, 60, false)).collect::<Vec<_>>());
}

#[test]
fn frames_of_bad_length_or_outside_the_dataports_are_rejected() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let mut q: VecDeque<_> = [
        aggregate(d, HDR_POOL, &[&frame(1, 13, false)]),
        aggregate(d, HDR_POOL, &[&frame(2, 1000, false), &frame(3, 515, false)]),
        aggregate(d, PRIVATE_POOL, &[&frame(4, 60, false)]),
    ]
    .into_iter()
    .map(|a| (a, TxRequest::Plain))
    .collect();
    post(&mut nic, &mut q);
    let mut refused = 2;
    nic.tx_post(|| match refused {
        0 => Pull::Empty,
        _ => {
            refused -= 1;
            Pull::Refused
        }
    });
    assert_eq!(counter(&nic, Counter::TxRejected), 5);
    assert_eq!(nic.regs().writes_to(TDT), [0], "no descriptor was posted");
    assert_eq!((pages_in_use(d, HDR_POOL), pages_in_use(d, PRIVATE_POOL)), (0, 0), "rejected frames are released");
}

#[test]
fn interrupt_causes_and_link_changes() {
    let (_, mut nic) = nic(RING_PAGES + 8);
    nic.regs().raise(INT_RXT0 | INT_TXDW);
    assert_eq!(nic.interrupt(), Interrupt::Causes { icr: INT_RXT0 | INT_TXDW, link: None });
    assert_eq!(nic.interrupt(), Interrupt::Causes { icr: 0, link: None }, "reading cleared them");
    nic.regs().set(STATUS, 0);
    nic.regs().raise(INT_LSC);
    assert_eq!(nic.interrupt(), Interrupt::Causes { icr: INT_LSC, link: Some(false) });
    assert_eq!(counter(&nic, Counter::LinkUp), 0);
    // A device that no longer answers reads as all ones: not believed, so
    // no link change is made up from it.
    nic.regs().lie = Some((ICR, u32::MAX));
    assert_eq!(nic.interrupt(), Interrupt::NotTheDevice(u32::MAX));
    assert_eq!(counter(&nic, Counter::LinkUp), 0);
    nic.regs().lie = Some((ICR, 1 << 20 | INT_LSC));
    assert!(matches!(nic.interrupt(), Interrupt::NotTheDevice(_)));
}

/// Ethernet + IPv4 + TCP headers as netstack hands them over for TSO:
/// `options` bytes of TCP options, IPv4 identification `id`, sequence
/// number `seq`, PSH | ACK (and FIN if `fin`), the IPv4 header checksum 0
/// and in the TCP checksum field the pseudo-header sum without its length.
pub(super) fn tso_headers(options: usize, id: u16, seq: u32, fin: bool) -> Vec<u8> {
    let tcp_len = 20 + options;
    let mut h = vec![0u8; 14 + 20 + tcp_len];
    h[..6].copy_from_slice(&[0x52, 0x55, 10, 0, 2, 2]);
    h[6..12].copy_from_slice(&MAC);
    h[12..14].copy_from_slice(&[0x08, 0x00]);
    h[14] = 0x45;
    // What smoltcp writes for the whole frame; the device rewrites it.
    h[16..18].copy_from_slice(&0xffffu16.to_be_bytes());
    h[18..20].copy_from_slice(&id.to_be_bytes());
    h[20] = 0x40; // DF
    h[22] = 64;
    h[23] = 6;
    h[26..30].copy_from_slice(&[10, 0, 2, 15]);
    h[30..34].copy_from_slice(&[10, 0, 2, 2]);
    h[34..36].copy_from_slice(&80u16.to_be_bytes());
    h[36..38].copy_from_slice(&51234u16.to_be_bytes());
    h[38..42].copy_from_slice(&seq.to_be_bytes());
    h[42..46].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    h[46] = ((tcp_len / 4) as u8) << 4;
    h[47] = 0x18 | fin as u8; // PSH | ACK (| FIN)
    h[48..50].copy_from_slice(&8192u16.to_be_bytes());
    for (k, b) in h[54..].iter_mut().enumerate() {
        *b = [1, 1, 8, 10][k % 4]; // NOP, NOP, timestamps... any bytes
    }
    let seed = pseudo_sum([10, 0, 2, 15], [10, 0, 2, 2], 0);
    h[50..52].copy_from_slice(&seed.to_be_bytes());
    h
}

/// The ones'-complement sum of the IPv4 pseudo-header (TCP, length `len`).
fn pseudo_sum(src: [u8; 4], dst: [u8; 4], len: u16) -> u16 {
    let mut b = Vec::from(src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&[0, 6]);
    b.extend_from_slice(&len.to_be_bytes());
    super::fake::internet_sum(&b)
}

/// Checks `seg` is segment `k` of `n` cut from `frame` (headers of
/// `hdr_len`, `mss`): the headers as expected, both checksums valid, the
/// payload the frame's `k`th `mss` bytes.
pub(super) fn check_segment(seg: &[u8], frame: &[u8], hdr_len: usize, mss: usize, k: usize, n: usize) {
    use super::fake::internet_sum;
    let payload = &frame[hdr_len..][k * mss..((k + 1) * mss).min(frame.len() - hdr_len)];
    assert!(seg.len() <= MAX_FRAME, "segment {k}: {} bytes", seg.len());
    assert_eq!(&seg[hdr_len..], payload, "segment {k}: payload");
    assert_eq!(seg[..12], frame[..12], "addresses");
    let ip_len = u16::from_be_bytes([seg[16], seg[17]]) as usize;
    assert_eq!(ip_len, seg.len() - 14, "segment {k}: IPv4 total length");
    let id = |f: &[u8]| u16::from_be_bytes([f[18], f[19]]);
    assert_eq!(id(seg), id(frame).wrapping_add(k as u16), "segment {k}: identification");
    assert_eq!(internet_sum(&seg[14..34]), 0xffff, "segment {k}: IPv4 header checksum");
    let seq = |f: &[u8]| u32::from_be_bytes(f[38..42].try_into().unwrap());
    assert_eq!(seq(seg), seq(frame).wrapping_add((k * mss) as u32), "segment {k}: sequence number");
    let flags = if k + 1 == n { frame[47] } else { frame[47] & !0x09 };
    assert_eq!(seg[47], flags, "segment {k}: PSH and FIN only in the last");
    // Everything else of the headers is the frame's.
    let mut a = seg[..hdr_len].to_vec();
    let mut b = frame[..hdr_len].to_vec();
    for r in [16..20, 24..26, 38..42, 47..48, 50..52] {
        a[r.clone()].fill(0);
        b[r].fill(0);
    }
    assert_eq!(a, b, "segment {k}: the other header bytes");
    let tcp_len = (seg.len() - 34) as u16;
    let s = pseudo_sum([10, 0, 2, 15], [10, 0, 2, 2], tcp_len) as u32 + internet_sum(&seg[34..]) as u32;
    assert_eq!(((s & 0xffff) + (s >> 16)) as u16, 0xffff, "segment {k}: TCP checksum");
}

pub(super) fn tso(tcp_start: usize, hdr_len: usize, mss: usize) -> TxRequest {
    TxRequest::Tso(nic_api::Tso::new(tcp_start, hdr_len, mss).unwrap())
}

#[test]
fn a_tso_frame_is_a_context_then_one_data_descriptor_per_slice() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    nic.set_tso(true);
    let hdr = tso_headers(12, 0x0101, 0xffff_f000, true);
    let parts = [frame(1, 1000, false), frame(2, 16384, false), frame(3, 3, false), frame(4, 5000, false)];
    let mut agg = aggregate(d, HDR_POOL, &[&hdr]);
    agg.append(aggregate(d, APP_POOL, &[&parts[0], &parts[1], &parts[2], &parts[3]])).map_err(|_| ()).unwrap();
    let pas: Vec<u64> = agg.slices().map(|s| nic.regs().map().physical(s.as_ptr() as u64).unwrap()).collect();
    let whole: Vec<u8> = [hdr.clone(), parts.concat()].concat();
    let paylen = whole.len() - 66;
    let mut q = VecDeque::from([(agg, tso(34, 66, 1448))]);
    post(&mut nic, &mut q);
    assert_eq!(nic.regs().writes_to(TDT), [0, 6], "TDT once: a context and five data descriptors");
    nic.regs().transmit(usize::MAX);
    // The descriptors, word for word (the manual's layouts, §3.3).
    let context = [14 | 24 << 8 | 33 << 16 | 34 << 32 | 50 << 40, paylen as u64 | 0x27 << 24 | 66 << 40 | 1448 << 48];
    let data = |k: usize, len: usize, last: bool| {
        [pas[k], len as u64 | 1 << 20 | if last { 0x2f } else { 0x26 } << 24 | 0x03 << 40]
    };
    let mut want = vec![context, data(0, 66, false)];
    for (k, p) in parts.iter().enumerate() {
        want.push(data(k + 1, p.len(), k == 3));
    }
    assert_eq!(nic.regs().tx_descriptors, want);
    // What the device put on the wire: 16 segments of at most 1448 bytes.
    let n = paylen.div_ceil(1448);
    assert_eq!(n, 16);
    let sent = nic.regs().sent.clone();
    assert_eq!(sent.len(), n);
    for (k, s) in sent.iter().enumerate() {
        assert_eq!(s.segment, Some(k));
        check_segment(&s.bytes, &whole, 66, 1448, k, n);
    }
    assert_eq!(sent.iter().map(|s| s.bytes.len() - 66).sum::<usize>(), paylen);
    assert_eq!(sent[0].bytes.len(), MAX_FRAME);
    assert_eq!(counter(&nic, Counter::TxTsoFrames), 1);
    assert_eq!(counter(&nic, Counter::TxTsoSegments), n as u64);
    assert_eq!(counter(&nic, Counter::TxFrames), 1);
    assert_eq!(counter(&nic, Counter::TxBytes), whole.len() as u64);
    assert_eq!(counter(&nic, Counter::TxDescriptors), 6);
    assert_eq!(counter(&nic, Counter::TxOffloaded), 1);
    assert_eq!(nic.regs().dma_faults, 0);
    assert_eq!(nic.tx_reap(), 1);
    assert_eq!(pages_in_use(d, APP_POOL), 0, "the frame's holds went back after DD");
}

#[test]
fn tso_frames_of_every_shape_are_cut_byte_exact() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    nic.set_tso(true);
    // Payload lengths around multiples of the MSS, the largest frame,
    // tiny MSSs; headers with and without options.
    let cases: &[(usize, usize, usize)] = &[
        (0, 1460, 1),
        (0, 1460, 1460),
        (0, 1460, 1461),
        (0, 1460, 2 * 1460),
        (12, 1448, 44 * 1448 + 17),
        (12, 1448, nic_api::TSO_MAX_FRAME - 66),
        (0, 536, 10_000),
        (40, 100, 1000),
    ];
    for (i, &(options, mss, paylen)) in cases.iter().enumerate() {
        let hdr = tso_headers(options, 0xfff0, 1000 * i as u32, i % 2 == 0);
        let hdr_len = hdr.len();
        let payload = frame(i as u64 + 10, paylen, false);
        // Slices of varying sizes, as a send queue's ranges are.
        let cut: Vec<&[u8]> = payload.chunks(7000 + 1111 * i).collect();
        let mut agg = aggregate(d, HDR_POOL, &[&hdr]);
        agg.append(aggregate(d, APP_POOL, &cut)).map_err(|_| ()).unwrap();
        let whole = [hdr.clone(), payload.clone()].concat();
        let before = nic.regs().sent.len();
        post(&mut nic, &mut VecDeque::from([(agg, tso(34, hdr_len, mss))]));
        nic.regs().transmit(usize::MAX);
        nic.tx_reap();
        let sent = &nic.regs().sent[before..];
        let n = paylen.div_ceil(mss);
        assert_eq!(sent.len(), n, "case {i}");
        for (k, s) in sent.iter().enumerate() {
            check_segment(&s.bytes, &whole, hdr_len, mss, k, n);
        }
    }
    assert_eq!(counter(&nic, Counter::TxTsoFrames), cases.len() as u64);
    assert_eq!(counter(&nic, Counter::TxRejected), 0);
    assert_eq!(pages_in_use(d, APP_POOL), 0);
}

#[test]
fn tso_requests_that_do_not_fit_their_frame_are_rejected() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    let hdr = tso_headers(0, 1, 1, false);
    let with = |h: &[u8], payload: usize| {
        let mut a = aggregate(d, HDR_POOL, &[h]);
        if payload > 0 {
            a.append(aggregate(d, APP_POOL, &[&frame(5, payload, false)])).map_err(|_| ()).unwrap();
        }
        a
    };
    // Not enabled: rejected, however good.
    post(&mut nic, &mut VecDeque::from([(with(&hdr, 3000), tso(34, 54, 1460))]));
    assert_eq!(counter(&nic, Counter::TxRejected), 1);
    nic.set_tso(true);
    let patched = |at: usize, v: u8| {
        let mut h = hdr.clone();
        h[at] = v;
        h
    };
    let mut split = aggregate(d, HDR_POOL, &[&hdr[..40], &hdr[40..]]);
    split.append(aggregate(d, APP_POOL, &[&frame(6, 3000, false)])).map_err(|_| ()).unwrap();
    let bad = [
        (with(&hdr, 0), tso(34, 54, 1460)),                               // no payload
        (with(&hdr, nic_api::TSO_MAX_FRAME - 54 + 1), tso(34, 54, 1460)), // longer than 64 KiB
        (with(&hdr, 3000), tso(34, 66, 1448)),                            // a 20-byte TCP header, not 32
        (with(&patched(13, 0xdd), 3000), tso(34, 54, 1460)),              // IPv6
        (with(&patched(14, 0x46), 3000), tso(34, 54, 1460)),              // a 24-byte IPv4 header
        (with(&patched(23, 17), 3000), tso(34, 54, 1460)),                // UDP
        (split, tso(34, 54, 1460)),                                       // headers in two slices
    ];
    let n = bad.len() as u64;
    post(&mut nic, &mut bad.into_iter().collect());
    assert_eq!(counter(&nic, Counter::TxRejected), 1 + n);
    assert_eq!(nic.regs().writes_to(TDT), [0], "no descriptor was posted");
    assert_eq!((pages_in_use(d, HDR_POOL), pages_in_use(d, APP_POOL)), (0, 0), "rejected frames are released");
    assert_eq!(counter(&nic, Counter::TxTsoFrames), 0);
}

#[test]
fn a_tso_frame_waits_whole_for_room_and_replaces_the_checksum_context() {
    let (d, mut nic) = nic(RING_PAGES + 8);
    nic.set_tso(true);
    // 505 descriptors in use: 7 left, of which one always stays free.
    let mut q: VecDeque<_> =
        (0..505u64).map(|i| (aggregate(d, APP_POOL, &[&frame(i, 60, false)]), TxRequest::Plain)).collect();
    post(&mut nic, &mut q);
    let hdr = tso_headers(0, 7, 7, false);
    let parts: Vec<Vec<u8>> = (0..5).map(|i| frame(100 + i, 2000, false)).collect();
    let mut agg = aggregate(d, HDR_POOL, &[&hdr]);
    agg.append(aggregate(d, APP_POOL, &parts.iter().map(|p| &p[..]).collect::<Vec<_>>())).map_err(|_| ()).unwrap();
    let whole = [hdr.clone(), parts.concat()].concat();
    let csum = TxRequest::TcpChecksum { start: 34, offset: 50 };
    let mut q = VecDeque::from([
        (agg, tso(34, 54, 1460)),
        (aggregate(d, HDR_POOL, &[&frame(7, 120, false)]), csum),
        (aggregate(d, HDR_POOL, &[&frame(8, 120, false)]), csum),
    ]);
    post(&mut nic, &mut q);
    assert!(nic.tx_waiting(), "a context and six data descriptors do not fit in six");
    assert_eq!(nic.regs().tx_queued(), 505);
    nic.regs().transmit(usize::MAX);
    nic.tx_reap();
    post(&mut nic, &mut q);
    nic.regs().transmit(usize::MAX);
    let sent = &nic.regs().sent[505..];
    assert_eq!(sent.len(), 7 + 2);
    for (k, s) in sent[..7].iter().enumerate() {
        check_segment(&s.bytes, &whole, 54, 1460, k, 7);
    }
    // The checksum frames after it: their context is written again (the
    // TSO context took the device's only one), once.
    assert_eq!(sent[7].checksum, Some((34, 50)));
    assert_eq!(sent[8].checksum, Some((34, 50)));
    let contexts = nic.regs().tx_descriptors.iter().filter(|w| w[1] >> 20 & 0x20f == 0x200).count();
    assert_eq!(contexts, 2, "one TSO context, one checksum context");
    assert_eq!(counter(&nic, Counter::TxDescriptors), 505 + 7 + 1 + 2);
}

/// A restarted driver takes the running device over: no reset, no RCTL
/// write (QEMU would hold received frames for a second), the dead
/// incarnation's buffers get nothing more, the device never owns a
/// descriptor of the new ring before it is filled, and both directions
/// work byte for byte afterwards.
#[test]
fn a_restarted_driver_takes_the_running_device_over_without_writing_rctl() {
    // Room for two sets of rings and two full RX rings: the dead
    // incarnation's pages stay in use (quarantined in a real restart).
    let (d, map) = domain(3 * (RING_PAGES + RING as u32));
    let mut dev = Device::new(map.clone());
    assert!(!running(&dev), "a device after power-on is not running");
    reset(&mut dev, || {}).unwrap();
    let mut old = E1000::new(dev, map.clone(), d, RX_POOL, setup(true)).unwrap();
    // The old incarnation ran a while: frames in, some drained, one
    // completed but never drained, a frame sent.
    let early: Vec<Vec<u8>> = (0..300).map(|i| frame(100 + i, 60 + i as usize, false)).collect();
    for f in &early {
        assert!(old.regs().receive(f));
    }
    let mut got = Vec::new();
    old.rx_drain(299, |a| {
        got.push(a);
        true
    });
    old.rx_refill();
    let i = old.rx_next;
    let undrained = old.rx_bufs[i].as_mut().map(|b| b.writable().as_ptr() as u64).unwrap();
    let mut q = VecDeque::from([(aggregate(d, HDR_POOL, &[&frame(7, 100, false)]), TxRequest::Plain)]);
    post(&mut old, &mut q);
    old.regs().transmit(usize::MAX);
    let old_rings = [old.rx_ring.phys, old.tx_ring.phys];
    // It dies: nothing of it is returned (its pages stay in use).
    let mut dev = std::mem::replace(old.regs(), Device::new(map.clone()));
    std::mem::forget(old);
    std::mem::forget(got);
    let undrained_bytes = early[299].clone();
    // The device goes on receiving into the buffers it had posted.
    let meanwhile: Vec<Vec<u8>> = (0..4).map(|i| frame(500 + i, 70 + i as usize, i == 0)).collect();
    for f in &meanwhile {
        assert!(dev.receive(f));
    }

    assert!(running(&dev));
    let writes_before = dev.writes.len();
    let (rdt, tdt) = (dev.read(RDT), dev.read(TDT));
    assert_eq!(take_over(&mut dev), Ok(TakenOver { mac: MAC, tx_abandoned: 0 }));
    assert_eq!(dev.read(RDH), rdt, "the device owns no receive descriptor");
    assert_eq!(dev.read(TDH), tdt);
    // What no incarnation took is salvaged, in order; nothing drained is.
    let (va, len, pa) = map.0[0];
    // SAFETY: the RX pool's memory, leaked by `domain`.
    let window = unsafe { PoolWindow::new(va as *const u8, len as usize, pa) };
    let mut salvaged = Vec::new();
    let found = salvage_rx(&dev, &window, |f| salvaged.push(f.to_vec()));
    let mut expected = vec![undrained_bytes.clone()];
    expected.extend(meanwhile.iter().cloned());
    assert_eq!(found, Salvaged { frames: 5, dropped: 0 });
    assert_eq!(salvaged, expected);
    let mut nic = E1000::resume(dev, map, d, RX_POOL, setup(true)).unwrap();
    let dev = nic.regs();
    let after = &dev.writes[writes_before..];
    assert!(!after.iter().any(|w| w.0 == RCTL), "RCTL is not written again");
    assert!(!after.iter().any(|w| w.0 == CTRL && w.1 & CTRL_RST != 0), "no reset");
    // Head and tail stay equal until the one RDT write that fills the ring.
    let rdh_writes: Vec<u32> = after.iter().filter(|w| w.0 == RDH).map(|w| w.1).collect();
    let rdt_writes: Vec<u32> = after.iter().filter(|w| w.0 == RDT).map(|w| w.1).collect();
    assert!(rdh_writes.iter().all(|&h| h == rdt), "{rdh_writes:?}");
    assert_eq!(rdt_writes, [rdt, ((rdt as usize + RING - 1) % RING) as u32]);
    let new_rings = [nic.rx_ring.phys, nic.tx_ring.phys];
    assert!(new_rings.iter().all(|r| !old_rings.contains(r)), "fresh ring pages");
    assert_eq!(nic.regs().rx_free(), RING - 1);

    // Receive: into the new ring's buffers, the old buffer untouched.
    let later: Vec<Vec<u8>> = (0..3).map(|i| frame(900 + i, 1000 + i as usize, false)).collect();
    for f in &later {
        assert!(nic.regs().receive(f));
    }
    let got = drain(&mut nic);
    assert_eq!(got.iter().map(bytes).collect::<Vec<_>>(), later);
    // SAFETY: the dead incarnation's buffer, still allocated (leaked).
    let kept = unsafe { std::slice::from_raw_parts(undrained as *const u8, undrained_bytes.len()) };
    assert_eq!(kept, &undrained_bytes[..], "the dead incarnation's buffer is not written again");
    assert_eq!(salvage_rx(nic.regs(), &window, |_| {}).frames, 0, "the new ring's frames were taken");
    // Transmit: checksum context written afresh, frame byte-exact.
    let f = frame(8, 200, false);
    let mut q = VecDeque::from([(aggregate(d, HDR_POOL, &[&f]), TxRequest::TcpChecksum { start: 34, offset: 50 })]);
    post(&mut nic, &mut q);
    assert_eq!(nic.regs().transmit(usize::MAX), 2);
    let sent = nic.regs().sent.last().unwrap().clone();
    assert_eq!(sent.descriptors, 1);
    assert_eq!(sent.checksum, Some((34, 50)), "the context reached the device");
    assert_eq!(sent.bytes.len(), f.len());
    assert_eq!(&sent.bytes[..50], &f[..50]);
    assert_eq!(&sent.bytes[52..], &f[52..]);
    assert_eq!(nic.regs().dma_faults, 0);
}

/// The other way to restart (`netdrv.takeover = 0`): a reset. The
/// simulated device, like QEMU's, ignores CTRL.RST, so `reset` turns the
/// receiver and transmitter off itself before the rings move, and the new
/// rings start at 0 with RCTL written again last.
#[test]
fn a_reset_turns_off_a_device_that_ignores_ctrl_rst_before_the_rings_move() {
    let (d, map) = domain(2 * (RING_PAGES + RING as u32) + 8);
    let mut dev = Device::new(map.clone());
    reset(&mut dev, || {}).unwrap();
    assert!(dev.writes_to(RCTL).is_empty(), "nothing to turn off after power-on");
    let mut old = E1000::new(dev, map.clone(), d, RX_POOL, setup(true)).unwrap();
    for i in 0..5 {
        assert!(old.regs().receive(&frame(i, 100, false)));
    }
    let mut dev = std::mem::replace(old.regs(), Device::new(map.clone()));
    std::mem::forget(old);
    assert!(running(&dev));
    let before = dev.writes.len();
    reset(&mut dev, || {}).unwrap();
    assert_eq!(dev.read(RCTL), 0);
    assert_eq!(dev.read(TCTL), 0);
    assert!(!running(&dev));
    let mut nic = E1000::new(dev, map, d, RX_POOL, setup(true)).unwrap();
    let dev = nic.regs();
    let after = &dev.writes[before..];
    let pos = |reg: usize| after.iter().position(|w| w.0 == reg).unwrap();
    let last = |reg: usize| after.iter().rposition(|w| w.0 == reg).unwrap();
    assert!(pos(RCTL) < pos(RDBAL) && pos(TCTL) < pos(TDBAL), "off before the rings move");
    assert!(last(RCTL) > last(RDT), "on again once the ring is full");
    assert_eq!(dev.read(RCTL), RCTL_OURS);
    assert_eq!((dev.read(RDH), dev.read(RDT)), (0, (RING - 1) as u32));
    let f = frame(77, 300, false);
    assert!(nic.regs().receive(&f));
    assert_eq!(drain(&mut nic).iter().map(bytes).collect::<Vec<_>>(), [f]);
}

/// A dead incarnation's descriptors are not believed beyond the pool: a
/// buffer outside it, a frame over two descriptors, a bad length or an
/// error is dropped, and a ring outside the pool is not read at all.
#[test]
fn salvage_believes_nothing_outside_the_pool() {
    let (d, map) = domain(2 * (RING_PAGES + RING as u32));
    let mut dev = Device::new(map.clone());
    reset(&mut dev, || {}).unwrap();
    let mut old = E1000::new(dev, map.clone(), d, RX_POOL, setup(true)).unwrap();
    let frames: Vec<Vec<u8>> = (0..6).map(|i| frame(40 + i, 100, false)).collect();
    for f in &frames {
        assert!(old.regs().receive(f));
    }
    let first = old.rx_next;
    // Tamper with what the dead incarnation left: frame 1's buffer points
    // outside the pool, 2 has an error, 3 says 9000 bytes, 4 lacks EOP
    // (so 5, its continuation, goes too).
    let outside = map.0[1].2; // the header pool's physical address
    let at = |k: usize| (first + k) % RING;
    let [_, w1] = old.rx_ring.read(at(1));
    old.rx_ring.write(at(1), [outside, w1]);
    let [a2, w2] = old.rx_ring.read(at(2));
    old.rx_ring.write(at(2), [a2, w2 | 1 << 40]);
    let [a3, w3] = old.rx_ring.read(at(3));
    old.rx_ring.write(at(3), [a3, (w3 & !0xffff) | 9000]);
    let [a4, w4] = old.rx_ring.read(at(4));
    old.rx_ring.write(at(4), [a4, w4 & !(u64::from(RXD_EOP) << 32)]);
    let mut dev = std::mem::replace(old.regs(), Device::new(map.clone()));
    std::mem::forget(old);
    take_over(&mut dev).unwrap();
    let (va, len, pa) = map.0[0];
    // SAFETY: the RX pool's memory, leaked by `domain`.
    let window = unsafe { PoolWindow::new(va as *const u8, len as usize, pa) };
    let mut got = Vec::new();
    let found = salvage_rx(&dev, &window, |f| got.push(f.to_vec()));
    assert_eq!(got, [frames[0].clone()]);
    assert_eq!(found, Salvaged { frames: 1, dropped: 4 });
    // A ring base outside the pool: nothing is read.
    let (hva, hlen, hpa) = map.0[1];
    // SAFETY: the header pool's memory, leaked by `domain`.
    let elsewhere = unsafe { PoolWindow::new(hva as *const u8, hlen as usize, hpa) };
    assert_eq!(salvage_rx(&dev, &elsewhere, |_| panic!("read")), Salvaged::default());
}

#[test]
fn a_take_over_stops_the_device_reading_what_the_dead_incarnation_posted() {
    let (d, map) = domain(3 * (RING_PAGES + RING as u32));
    let mut dev = Device::new(map.clone());
    reset(&mut dev, || {}).unwrap();
    let mut old = E1000::new(dev, map.clone(), d, RX_POOL, setup(true)).unwrap();
    // One frame sent, then three posted that a slow device has not
    // fetched yet when the driver dies (QEMU sends inside the TDT write;
    // real hardware DMAs later).
    let first = frame(1, 300, false);
    let mut q = VecDeque::from([(aggregate(d, HDR_POOL, &[&first]), TxRequest::Plain)]);
    post(&mut old, &mut q);
    assert_eq!(old.regs().transmit(usize::MAX), 1);
    let pending: Vec<Vec<u8>> = (0..3).map(|i| frame(10 + i, 400 + i as usize, false)).collect();
    let mut q: VecDeque<_> = pending.iter().map(|f| (aggregate(d, HDR_POOL, &[f]), TxRequest::Plain)).collect();
    post(&mut old, &mut q);
    assert!(q.is_empty(), "all three posted");
    let mut dev = std::mem::replace(old.regs(), Device::new(map.clone()));
    std::mem::forget(old);
    assert!(running(&dev));
    let tdt = dev.read(TDT);
    let posted = (tdt as usize + RING - dev.read(TDH) as usize) % RING;
    assert!(posted >= 3, "the device still has descriptors to fetch: {posted}");
    let writes_before = dev.writes.len();

    let taken = take_over(&mut dev).unwrap();
    assert_eq!(taken, TakenOver { mac: MAC, tx_abandoned: posted });
    // The transmitter went off before the ring was emptied, and the head
    // is at the tail: the device owns no transmit descriptor.
    let after = &dev.writes[writes_before..];
    let off = after.iter().position(|w| w.0 == TCTL && w.1 & TCTL_EN == 0).expect("TCTL.EN cleared");
    let tdh = after.iter().position(|w| w.0 == TDH).expect("TDH written");
    assert!(off < tdh, "{after:?}");
    assert_eq!(dev.read(TDH), tdt);
    // A device that would go on now fetches nothing: the frames the dead
    // incarnation lent it may be reused.
    assert_eq!(dev.transmit(usize::MAX), 0);
    assert_eq!(dev.sent.len(), 1);
    assert_eq!(dev.sent[0].bytes, first);

    // The new incarnation enables the transmitter again on fresh rings and
    // sends byte-exact; none of the abandoned frames goes out.
    let mut nic = E1000::resume(dev, map, d, RX_POOL, setup(true)).unwrap();
    assert_ne!(nic.regs().read(TCTL) & TCTL_EN, 0);
    let next = frame(20, 500, false);
    let mut q = VecDeque::from([(aggregate(d, HDR_POOL, &[&next]), TxRequest::Plain)]);
    post(&mut nic, &mut q);
    assert_eq!(nic.regs().transmit(usize::MAX), 1);
    let sent: Vec<&[u8]> = nic.regs().sent.iter().map(|s| &s.bytes[..]).collect();
    assert_eq!(sent, [&first[..], &next[..]]);
}
