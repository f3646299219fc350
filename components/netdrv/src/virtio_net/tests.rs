//! The driver against the simulated device (`fake.rs`): set-up and
//! negotiation, receive into pool buffers past the header, transmit as
//! header + one descriptor per slice, notifications per batch and their
//! suppression, checksum and TSO headers, a full queue, and a hostile
//! device (used index, id and length). Every frame compared byte for byte.

use std::alloc::{alloc_zeroed, Layout as MemLayout};
use std::collections::VecDeque;

use iolite::{BufMeta, PoolLayout, RwRegion, Trust};

use super::fake::{layout, Device, MAC};
use super::tx::complete_tso_headers;
use super::*;
use crate::e1000::fake::Map;
use crate::e1000::{Pull, TxRequest};

const RX_POOL: PoolId = 1;
const APP_POOL: PoolId = 2;
const ALL: u64 = F_CSUM | F_MAC | F_HOST_TSO4 | F_STATUS | virtio::F_EVENT_IDX;
/// Offered and never taken: merged buffers, guest checksum/TSO4, control queue.
const REFUSED: u64 = 1 << 15 | 1 << 1 | 1 << 7 | 1 << 17;

type Nic = VirtioNet<'static, Device, Map>;

fn domain() -> (&'static Domain, Map) {
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    let mut map = Map::default();
    for (id, pages) in [(RX_POOL, 1024u32), (APP_POOL, 1024)] {
        let len = PoolLayout { pages }.region_bytes();
        // SAFETY: a non-zero size; leaked, so it lives as long as the domain.
        let base = unsafe { alloc_zeroed(MemLayout::from_size_align(len, 4096).unwrap()) };
        // SAFETY: fresh memory used only through the domain and the device.
        let region = unsafe { RwRegion::from_raw_parts(base, len) }.unwrap();
        let meta = Box::leak(vec![BufMeta::EMPTY; pages as usize].into_boxed_slice());
        d.add_owned_pool(id, region, meta, Trust::Trusted).unwrap();
        map.add(base as u64, len as u64);
    }
    (d, map)
}

fn nic_with(offered: u64, tso: bool) -> (&'static Domain, Nic) {
    let (d, map) = domain();
    let dev = Device::new(map.clone(), offered);
    (d, VirtioNet::new(dev, layout(), map, d, RX_POOL, tso, || {}).unwrap())
}

fn nic() -> (&'static Domain, Nic) {
    nic_with(ALL | REFUSED, true)
}

fn dev(nic: &mut Nic) -> &mut Device {
    nic.transport().regs()
}

fn frame(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut f: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn bytes(agg: &Aggregate<'_>) -> Vec<u8> {
    let mut out = vec![0; agg.len()];
    assert_eq!(agg.read_at(0, &mut out), agg.len());
    out
}

fn drain(nic: &mut Nic) -> Vec<Aggregate<'static>> {
    let mut got = Vec::new();
    nic.rx_drain(usize::MAX, |a| {
        got.push(a);
        true
    });
    got
}

fn aggregate(d: &'static Domain, parts: &[&[u8]]) -> Aggregate<'static> {
    let mut agg = Aggregate::new(d);
    for p in parts {
        agg.append(d.alloc_copy(APP_POOL, p).unwrap()).map_err(|_| ()).unwrap();
    }
    agg
}

fn post(nic: &mut Nic, frames: &mut VecDeque<(Aggregate<'static>, TxRequest)>) {
    nic.tx_post(|| match frames.pop_front() {
        Some((a, r)) => Pull::Frame(a, r),
        None => Pull::Empty,
    });
}

fn c(nic: &Nic, k: Counter) -> u64 {
    nic.counters()[k]
}

fn in_use(d: &Domain, pool: PoolId) -> u32 {
    d.pool_stats(pool).unwrap().pages_in_use
}

#[test]
fn set_up_negotiates_version_1_and_fills_the_receive_queue_with_one_notify() {
    let (_, mut nic) = nic();
    assert_eq!(nic.features(), ALL | virtio::F_VERSION_1, "only what the driver wants");
    assert_eq!(nic.mac(), MAC);
    assert!(nic.tso());
    assert!(nic.link_up());
    let dev = dev(&mut nic);
    assert_eq!(dev.status, 1 | 2 | 4 | 8);
    assert_eq!(dev.notifies, [1, 0]);
    // All 256 receive buffers are the device's.
    let mut n = 0;
    while dev.receive(&frame(n, 60)) {
        n += 1;
    }
    assert_eq!(n, 256);
    assert_eq!(dev.dma_faults, 0);
}

#[test]
fn a_legacy_device_or_one_refusing_the_features_is_not_driven() {
    let (d, map) = domain();
    let mut dev = Device::new(map.clone(), ALL);
    dev.offered &= !virtio::F_VERSION_1;
    let e = VirtioNet::new(dev, layout(), map.clone(), d, RX_POOL, true, || {}).err();
    assert_eq!(e, Some(InitError::Transport(TransportError::NoVersion1)));
    let mut dev = Device::new(map.clone(), ALL);
    dev.refuse_features = true;
    let e = VirtioNet::new(dev, layout(), map.clone(), d, RX_POOL, true, || {}).err();
    assert_eq!(e, Some(InitError::Transport(TransportError::FeaturesRefused)));
    let dev = Device::new(map.clone(), ALL & !F_MAC);
    let e = VirtioNet::new(dev, layout(), map, d, RX_POOL, true, || {}).err();
    assert_eq!(e, Some(InitError::Transport(TransportError::Missing(F_MAC))));
}

#[test]
fn without_the_offloads_tso_is_not_offered_and_requests_are_rejected() {
    let (d, mut nic) = nic_with(F_MAC | virtio::F_EVENT_IDX, true);
    assert!(!nic.tso());
    let f = frame(1, 100);
    let mut q: VecDeque<_> = [
        (aggregate(d, &[&f]), TxRequest::TcpChecksum { start: 34, offset: 50 }),
        (aggregate(d, &[&f]), TxRequest::Tso(nic_api::Tso::new(34, 54, 1460).unwrap())),
        (aggregate(d, &[&f]), TxRequest::Plain),
    ]
    .into();
    post(&mut nic, &mut q);
    assert_eq!(c(&nic, Counter::TxRejected), 2);
    let sent = dev(&mut nic).transmit();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].frame, f);
}

#[test]
fn received_frames_go_up_past_the_header_by_reference_and_buffers_come_back() {
    let (d, mut nic) = nic();
    let before = in_use(d, RX_POOL);
    let frames: Vec<Vec<u8>> = (0..300).map(|k| frame(k, 14 + (k as usize * 37) % 1501)).collect();
    let mut got = Vec::new();
    for chunk in frames.chunks(100) {
        for f in chunk {
            assert!(dev(&mut nic).receive(f));
        }
        assert!(nic.rx_ready());
        let copied = d.stats().bytes_copied;
        let frames = drain(&mut nic);
        assert_eq!(d.stats().bytes_copied, copied, "received by reference");
        got.extend(frames.iter().map(bytes));
        nic.rx_refill();
    }
    assert_eq!(got, frames);
    assert_eq!(c(&nic, Counter::RxFrames), 300);
    assert_eq!(c(&nic, Counter::RxBytes), frames.iter().map(|f| f.len() as u64).sum::<u64>());
    // The frames are dropped (netstack released them): the pool is back.
    assert_eq!(in_use(d, RX_POOL), before);
    // Refills went out in batches: 300 frames, a handful of notifications.
    assert!(dev(&mut nic).notifies[0] <= 4, "{:?}", dev(&mut nic).notifies);
}

#[test]
fn a_frame_is_a_header_descriptor_then_one_per_slice_one_notify_per_batch() {
    let (d, mut nic) = nic();
    let hdr = frame(1, 54);
    let (p1, p2) = (frame(2, 1000), frame(3, 400));
    let mut q: VecDeque<_> = (0..5).map(|_| (aggregate(d, &[&hdr, &p1, &p2]), TxRequest::Plain)).collect();
    let copied = d.stats().bytes_copied;
    post(&mut nic, &mut q);
    assert_eq!(dev(&mut nic).notifies[1], 1, "one doorbell for the batch");
    assert_eq!(d.stats().bytes_copied, copied, "nothing copied");
    let sent = dev(&mut nic).transmit();
    assert_eq!(sent.len(), 5);
    let whole = [hdr.clone(), p1.clone(), p2.clone()].concat();
    for s in &sent {
        assert_eq!(s.hdr, [0; 12]);
        assert_eq!(s.frame, whole);
        assert_eq!(s.descriptors, 4);
    }
    assert_eq!(nic.tx_in_flight(), 5, "until reaped");
    assert_eq!(nic.tx_reap(), 5);
    assert_eq!(nic.tx_in_flight(), 0);
    assert_eq!(c(&nic, Counter::TxDescriptors), 20);
    assert_eq!(c(&nic, Counter::Notifies), 2, "the receive fill and this batch");
}

#[test]
fn frames_keep_their_buffers_until_the_device_gives_them_back() {
    let (d, mut nic) = nic();
    let before = in_use(d, APP_POOL);
    let mut q: VecDeque<_> = [(aggregate(d, &[&frame(1, 60)]), TxRequest::Plain)].into();
    post(&mut nic, &mut q);
    let heads = dev(&mut nic).hold_transmit();
    assert_eq!(nic.tx_reap(), 0);
    assert_eq!(in_use(d, APP_POOL), before + 1);
    dev(&mut nic).complete(1, heads[0] as u32, 0);
    assert_eq!(nic.tx_reap(), 1);
    assert_eq!(in_use(d, APP_POOL), before);
}

#[test]
fn the_device_that_did_not_ask_is_not_notified() {
    let (d, mut nic) = nic();
    let mut q: VecDeque<_> = [(aggregate(d, &[&frame(1, 60)]), TxRequest::Plain)].into();
    post(&mut nic, &mut q);
    // The device holds the chain without catching up (avail_event stays
    // at 1): later batches need no doorbell.
    dev(&mut nic).hold_transmit();
    let mut q: VecDeque<_> = (0..3).map(|k| (aggregate(d, &[&frame(k, 60)]), TxRequest::Plain)).collect();
    post(&mut nic, &mut q);
    assert_eq!(dev(&mut nic).notifies[1], 2, "avail_event asked for index 1");
    let mut q: VecDeque<_> = [(aggregate(d, &[&frame(9, 60)]), TxRequest::Plain)].into();
    post(&mut nic, &mut q);
    assert_eq!(dev(&mut nic).notifies[1], 2);
    assert_eq!(c(&nic, Counter::NotifiesSuppressed), 1);
}

#[test]
fn a_checksum_request_becomes_the_header_fields() {
    let (d, mut nic) = nic();
    let f = frame(1, 200);
    let mut q: VecDeque<_> = [(aggregate(d, &[&f]), TxRequest::TcpChecksum { start: 34, offset: 50 })].into();
    post(&mut nic, &mut q);
    let s = dev(&mut nic).transmit().remove(0);
    assert_eq!(s.hdr, [1, 0, 0, 0, 0, 0, 34, 0, 16, 0, 0, 0]);
    assert_eq!(s.frame, f);
    // Offsets outside the frame are rejected.
    let mut q: VecDeque<_> = [(aggregate(d, &[&f]), TxRequest::TcpChecksum { start: 34, offset: 199 })].into();
    post(&mut nic, &mut q);
    assert_eq!(c(&nic, Counter::TxRejected), 1);
}

/// Headers of a TCP/IPv4 frame as netstack prepares them for TSO.
fn tso_frame(payload: usize) -> (Vec<u8>, Vec<u8>) {
    let mut h = frame(7, 54);
    h[14] = 0x45;
    h[23] = 6;
    h[24..26].copy_from_slice(&[0, 0]);
    h[46] = 5 << 4;
    h[50..52].copy_from_slice(&0x1234u16.to_be_bytes());
    (h, frame(8, payload))
}

fn internet_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn a_tso_frame_gets_gso_fields_and_headers_a_host_stack_accepts() {
    let (d, mut nic) = nic();
    let (h, payload) = tso_frame(60_000);
    let t = nic_api::Tso::new(34, 54, 1460).unwrap();
    // The headers and the payload's first bytes share the first slice.
    let first = [h.clone(), payload[..100].to_vec()].concat();
    let mut q: VecDeque<_> = [(aggregate(d, &[&first, &payload[100..]]), TxRequest::Tso(t))].into();
    post(&mut nic, &mut q);
    let s = dev(&mut nic).transmit().remove(0);
    assert_eq!(s.hdr[..10], [1, 1, 54, 0, 0xb4, 0x05, 34, 0, 16, 0]);
    assert_eq!(s.descriptors, 4, "header, rewritten headers, the rest of slice 0, slice 1");
    let len = 54 + 60_000;
    assert_eq!(s.frame.len(), len);
    assert_eq!(s.frame[54..], payload[..]);
    // IPv4: the total length and a header checksum that verifies.
    assert_eq!(u16::from_be_bytes([s.frame[16], s.frame[17]]) as usize, len - 14);
    assert_eq!(internet_sum(&s.frame[14..34]), 0xffff);
    // TCP: the pseudo-header seed plus the TCP length (Linux's GSO form).
    let want = internet_sum(&[0x12, 0x34, ((len - 34) >> 8) as u8, (len - 34) as u8]);
    assert_eq!(u16::from_be_bytes([s.frame[50], s.frame[51]]), want);
    assert_eq!(s.frame[..14], h[..14]);
    assert_eq!(c(&nic, Counter::TxTsoFrames), 1);
    assert_eq!(c(&nic, Counter::TxTsoSegments), 60_000u64.div_ceil(1460));
    assert_eq!(c(&nic, Counter::TxTsoHeaderBytes), 54);
    // netstack's own header buffer is untouched.
    let mut h2 = h.clone();
    complete_tso_headers(&mut h2, t, len);
    assert_ne!(h2, h);
}

#[test]
fn a_full_queue_keeps_the_next_frame_waiting_whole() {
    let (d, mut nic) = nic();
    let parts: Vec<Vec<u8>> = (0..4).map(|k| frame(k, 100)).collect();
    let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
    // 5 descriptors a frame: 51 fit 256, the 52nd waits.
    let mut q: VecDeque<_> = (0..60).map(|_| (aggregate(d, &refs), TxRequest::Plain)).collect();
    post(&mut nic, &mut q);
    assert!(nic.tx_waiting());
    assert_eq!(nic.tx_in_flight(), 51);
    assert_eq!(dev(&mut nic).transmit().len(), 51);
    nic.tx_reap();
    post(&mut nic, &mut q);
    assert!(!nic.tx_waiting());
    let sent = dev(&mut nic).transmit();
    assert_eq!(sent.len(), 9);
    assert!(sent.iter().all(|s| s.frame == parts.concat()));
}

#[test]
fn a_used_index_ahead_of_what_is_in_flight_stops_the_driver() {
    let (d, mut nic) = nic();
    let before = in_use(d, APP_POOL);
    let mut q: VecDeque<_> = [(aggregate(d, &[&frame(1, 60)]), TxRequest::Plain)].into();
    post(&mut nic, &mut q);
    dev(&mut nic).set_used_idx(1, 40);
    assert_eq!(nic.tx_reap(), 0);
    assert!(matches!(nic.device_error(), Some(UsedError::Index(40, 0))));
    assert_eq!(dev(&mut nic).status & 128, 128, "marked FAILED");
    assert_eq!(c(&nic, Counter::DeviceErrors), 1);
    // Frames from now on are refused, so netstack gets its buffers back.
    let mut q: VecDeque<_> = [(aggregate(d, &[&frame(2, 60)]), TxRequest::Plain)].into();
    post(&mut nic, &mut q);
    assert_eq!(c(&nic, Counter::TxRejected), 1);
    assert_eq!(in_use(d, APP_POOL), before + 1, "only the frame the device may still read");
    assert!(!nic.rx_ready());
}

#[test]
fn a_used_id_that_heads_nothing_in_flight_stops_the_driver() {
    let (_, mut nic) = nic();
    assert!(dev(&mut nic).receive(&frame(1, 60)));
    // Descriptor 300 does not exist; then a second entry for the same head.
    dev(&mut nic).complete(0, 300, 72);
    assert_eq!(drain(&mut nic).len(), 1);
    assert_eq!(drain(&mut nic).len(), 0);
    assert_eq!(nic.device_error(), Some(UsedError::Id(300)));
    let (_, mut nic) = self::nic();
    assert!(dev(&mut nic).receive(&frame(1, 60)));
    assert_eq!(drain(&mut nic).len(), 1);
    // The first buffer's head again, no longer in flight (the refill has
    // not run).
    dev(&mut nic).complete(0, 0, 72);
    drain(&mut nic);
    assert!(matches!(nic.device_error(), Some(UsedError::Id(_))));
}

#[test]
fn bad_received_lengths_drop_the_frame_and_the_buffer_comes_back() {
    let (d, mut nic) = nic();
    let before = in_use(d, RX_POOL);
    assert!(dev(&mut nic).receive(&frame(1, 60)));
    // Device writes: beyond the buffer, only the header, header + 13.
    for (k, len) in [(1u32, 5000u32), (2, 12), (3, 25)] {
        let head = 255 - k;
        dev(&mut nic).complete(0, head, len);
    }
    let got = drain(&mut nic);
    assert_eq!(got.len(), 1);
    assert_eq!(bytes(&got[0]), frame(1, 60));
    assert_eq!(c(&nic, Counter::RxDropped), 3);
    assert_eq!(nic.device_error(), None);
    drop(got);
    nic.rx_refill();
    assert_eq!(in_use(d, RX_POOL), before);
}
