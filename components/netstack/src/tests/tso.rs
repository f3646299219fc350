//! TCP segmentation offload (`Config::tso`): A sends segments of up to
//! 64 KiB that the wire cuts as the e1000 does (`tso_segments`), B is an
//! ordinary stack. Every segment on the wire is checked against the
//! stream A's application sent and against the window B advertised.

use super::*;
use nic_api::TSO_MAX_FRAME;

/// Ethernet, IPv4 and TCP headers (smoltcp sends no timestamps by
/// default): 54 bytes; the MSS smoltcp derives from a 1514-byte MTU.
const HDR: usize = 54;
const MSS: usize = 1460;

/// A with TSO in `mode`, B receiving into a window of `b_window` bytes;
/// the wire loses `drops` frames per thousand. A's frames are captured.
fn tso_net(mode: CopyMode, b_window: usize, drops: u32) -> Net {
    let mut a = cfg(1, 15, mode, TxChecksum::Cached);
    a.tso = true;
    let mut b = cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached);
    b.recv_window = b_window;
    let mut n = Net::with(a, b, drops);
    n.pa.capture = true;
    n
}

/// What every TSO run must show: the stream byte-exact at B and in every
/// segment A's "NIC" put on the wire, segments of at most the MSS, frames
/// within B's window, valid checksums, every TSO frame well-formed.
fn check_wire(n: &Net, stream: &[u8]) {
    assert!(frames_match_stream(&n.pa.sent, stream) > 0);
    assert_eq!(n.pa.bad_tso, 0, "every TSO frame keeps the e1000's rules");
    assert_eq!(n.pa.bad_checksums + n.pb.bad_checksums, 0);
    assert!(n.pa.peer_edge.is_some(), "B's window was seen");
    assert_eq!(n.pa.beyond_window, 0, "no segment beyond the window B advertised");
    assert!(n.pa.largest_frame <= 1514, "a frame of {} bytes on the wire", n.pa.largest_frame);
    for f in &n.pa.sent {
        if let Some(t) = parse_tcp(f, f.len()) {
            assert!(t.payload_len <= MSS, "a segment of {} bytes", t.payload_len);
        }
    }
    assert_eq!(n.a.stats().tx_tso_frames, n.pa.tso_frames);
    assert_eq!(n.a.stats().tx_withheld, 0);
}

#[test]
fn tso_sends_segments_of_up_to_64_kib_by_reference() {
    let mut n = tso_net(CopyMode::IoLite, 64 * 1024, 0);
    let (ca, cb) = n.connect();
    let data = pattern(1 << 20, 42);
    let aggs = mib_aggs(n.da, &data);
    transfer_checked(&mut n, ca, cb, aggs, &data);
    check_wire(&n, &data);
    let s = n.a.stats();
    assert!(n.pa.tso_frames > 0, "{s:?}");
    // Far more than a jumbo frame's 9216 bytes (the zero-copy payload's
    // bound before smoltcp patch 0007), at most what a frame holds.
    assert!(n.pa.tso_largest > 32 * 1024, "largest TSO payload {}", n.pa.tso_largest);
    assert!(n.pa.tso_largest <= TSO_MAX_FRAME - HDR);
    assert!(n.pa.tso_segments > 4 * n.pa.tso_frames, "{} segments of {} frames", n.pa.tso_segments, n.pa.tso_frames);
    // Zero copy: every payload byte went by reference, once.
    assert_eq!(s.tx_copied(), 0, "{s:?}");
    assert_eq!(n.da.stats().bytes_copied, 0);
    assert_eq!(s.tx_payload_by_ref - s.tx_retransmitted, data.len() as u64, "{s:?}");
    // Payload bytes summed by the stack for checksums: none for TSO frames
    // (the cache saw only frames of one segment).
    let summed = n.a.checksum_cache_stats();
    assert!(summed.bytes_summed + summed.bytes_cached < data.len() as u64 / 2, "{summed:?}");
    assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    std::println!(
        "TSO: {} frames of A, {} of them TSO ({} segments, largest payload {}), {} frames on the wire",
        s.tx_frames,
        n.pa.tso_frames,
        n.pa.tso_segments,
        n.pa.tso_largest,
        n.pa.sent.len()
    );
}

#[test]
fn tso_frames_never_exceed_the_window() {
    // B's window, 8 KiB, is what bounds every TSO frame.
    let mut n = tso_net(CopyMode::IoLite, 8 * 1024, 0);
    let (ca, cb) = n.connect();
    let data = pattern(300_000, 7);
    let aggs = mib_aggs(n.da, &data);
    transfer_checked(&mut n, ca, cb, aggs, &data);
    check_wire(&n, &data);
    assert!(n.pa.tso_frames > 0);
    assert!(n.pa.tso_largest > MSS && n.pa.tso_largest <= 8 * 1024, "largest TSO payload {}", n.pa.tso_largest);
}

#[test]
fn tso_with_losses_retransmits_byte_exact_from_the_same_slices() {
    for drops in [20, 60] {
        let mut n = tso_net(CopyMode::IoLite, 64 * 1024, drops);
        let (ca, cb) = n.connect();
        let data = pattern(1 << 20, drops);
        let aggs = mib_aggs(n.da, &data);
        transfer_checked(&mut n, ca, cb, aggs, &data);
        check_wire(&n, &data);
        let s = n.a.stats();
        assert!(n.pa.dropped > 0 && s.tx_retransmitted > 0, "{s:?}");
        assert_eq!(s.tx_copied(), 0);
        assert_eq!(s.tx_payload_by_ref - s.tx_retransmitted, data.len() as u64, "{s:?}");
        assert_eq!(n.da.pool_stats(APP).unwrap().buffers_in_use, 0);
    }
}

#[test]
fn tso_with_random_slices_and_tiny_aggregates_is_byte_exact() {
    for (seed, drops) in [(3u32, 0u32), (11, 30)] {
        let mut n = tso_net(CopyMode::IoLite, 64 * 1024, drops);
        let (ca, cb) = n.connect();
        let mut stream = Vec::new();
        let aggs = random_slices(n.da, seed, 120, &mut stream);
        transfer_checked(&mut n, ca, cb, aggs, &stream);
        check_wire(&n, &stream);
        assert!(n.pa.tso_frames > 0);
        assert!(n.pa.max_slices <= iolite::MAX_SLICES);
        let s = n.a.stats();
        // By reference, or through the counted coalescing copy.
        assert_eq!(s.tx_payload_by_ref + s.tx_coalesced_bytes - s.tx_retransmitted, stream.len() as u64, "{s:?}");
    }
}

#[test]
fn tso_in_the_copy_modes_copies_once_into_the_frame() {
    for mode in [CopyMode::Posix, CopyMode::Flash] {
        let mut n = tso_net(mode, 64 * 1024, 0);
        let (ca, cb) = n.connect();
        let data = pattern(256 * 1024, 9);
        let aggs = mib_aggs(n.da, &data);
        transfer_checked(&mut n, ca, cb, aggs, &data);
        check_wire(&n, &data);
        assert!(n.pa.tso_frames > 0);
        let s = n.a.stats();
        assert_eq!(s.tx_payload_copied_socket, data.len() as u64, "{s:?}");
        assert_eq!(s.tx_payload_copied_frame, data.len() as u64, "{s:?}");
        assert_eq!(n.da.stats().bytes_copied, 2 * data.len() as u64);
        assert_eq!(s.tx_payload_by_ref, 0);
    }
}

#[test]
fn a_copy_mode_tso_frame_without_a_long_enough_run_of_pages_goes_in_pieces() {
    // A's pool of 64 pages with every 10th held elsewhere: plenty of free
    // pages, but no 16 in a row for a 64 KiB frame.
    let (da, db) = (domain_with(64, 1024, Trust::Trusted), domain(1024, Trust::Trusted));
    let pages: Vec<_> = (0..64).map(|_| da.alloc(NET, iolite::PAGE_SIZE).unwrap()).collect();
    let held: Vec<_> = pages.into_iter().enumerate().filter(|(i, _)| i % 10 == 5).map(|(_, b)| b).collect();
    let mut a = cfg(1, 15, CopyMode::Posix, TxChecksum::Cached);
    a.tso = true;
    let (a, b) = (NetStack::new(da, a, 0), NetStack::new(db, cfg(2, 16, CopyMode::IoLite, TxChecksum::Cached), 0));
    let (pa, pb) = Port::pair(da, db, 0);
    let mut n = Net { da, a, b, pa, pb, now: 0 };
    n.pa.capture = true;
    let (ca, cb) = n.connect();
    let data = pattern(512 * 1024, 21);
    let aggs = mib_aggs(n.da, &data);
    transfer_checked(&mut n, ca, cb, aggs, &data);
    check_wire(&n, &data);
    let s = n.a.stats();
    assert!(n.pa.tso_frames > 0, "{s:?}");
    assert!(n.pa.max_slices > 1, "frames in pieces");
    assert_eq!(s.tx_dropped, 0, "{s:?}");
    // Each payload byte copied once into the socket and twice into frames
    // (scratch, then the pieces) where the frame went in pieces; every
    // copy counted.
    assert_eq!(s.tx_payload_copied_socket, data.len() as u64);
    assert!(s.tx_payload_copied_frame > data.len() as u64, "{s:?}");
    assert_eq!(n.da.stats().bytes_copied, s.tx_payload_copied_socket + s.tx_payload_copied_frame);
    drop(held);
}

#[test]
fn without_tso_no_frame_exceeds_the_mtu() {
    let mut n = Net::new(CopyMode::IoLite, TxChecksum::Cached, 0);
    n.pa.capture = true;
    let (ca, cb) = n.connect();
    let data = pattern(256 * 1024, 5);
    let aggs = mib_aggs(n.da, &data);
    transfer_checked(&mut n, ca, cb, aggs, &data);
    assert_eq!((n.pa.tso_frames, n.a.stats().tx_tso_frames), (0, 0));
    assert!(n.pa.largest_frame <= 1514);
    assert_eq!(n.pa.beyond_window, 0);
}

#[test]
fn a_segment_of_many_small_slices_goes_as_several_frames_by_reference() {
    // Pipelined responses of small files: hundreds of aggregates of
    // 100..300 bytes queued at once, so a 64 KiB segment spans hundreds
    // of slices, a frame takes 15. Without TSO one MSS spans about 7 of
    // them (no copy either); with TSO the segment goes as several frames
    // of whole MSSs, each by reference, instead of being mostly coalesced.
    for drops in [0, 30] {
        let mut n = tso_net(CopyMode::IoLite, 64 * 1024, drops);
        let (ca, cb) = n.connect();
        let mut stream = Vec::new();
        let mut aggs = VecDeque::new();
        for i in 0..1500u32 {
            let size = 100 + (i as usize * 37) % 201;
            let bytes = pattern(size, i);
            stream.extend_from_slice(&bytes);
            // One byte more than sent: neighbours in a page stay slices of
            // their own, as separate responses' buffers are.
            let obj = n.da.pack(APP, size + 1, |b| b[..size].copy_from_slice(&bytes)).unwrap();
            aggs.push_back(obj.range(0, size).unwrap());
        }
        transfer_checked(&mut n, ca, cb, aggs, &stream);
        check_wire(&n, &stream);
        let s = n.a.stats();
        assert!(s.tx_tso_split > 0, "{s:?}");
        assert_eq!(s.tx_coalesced_bytes, 0, "{s:?}");
        assert_eq!(s.tx_copied(), 0, "{s:?}");
        assert_eq!(s.tx_payload_by_ref - s.tx_retransmitted, stream.len() as u64, "{s:?}");
        assert!(n.pa.max_slices <= iolite::MAX_SLICES);
        // Full segments on the wire: the frames were cut at multiples of
        // the MSS.
        let short =
            n.pa.sent
                .iter()
                .filter_map(|f| parse_tcp(f, f.len()))
                .filter(|t| t.payload_len > 0 && t.payload_len < MSS)
                .count();
        assert!(short * 4 < n.pa.tso_frames as usize + 10, "{short} short segments, {} TSO frames", n.pa.tso_frames);
    }
}
