//! The driver on the simulated 82574L (`Device::new_82574`): what it does
//! differently from the 82540EM (the auto-mask switched off, INT_ASSERTED
//! and the queue causes believed), and the shared paths (receive by
//! reference, transmit one descriptor per slice, TSO) byte for byte on it.

use std::collections::VecDeque;

use super::fake::{Device, MAC};
use super::tests::*;
use super::*;

fn setup_82574() -> Setup {
    Setup { model: Model::I82574L, itr: 200, interrupts: true }
}

/// The driver on a fresh 82574L whose firmware left the auto-mask on
/// (CTRL_EXT.IAME, every cause in IAM).
fn nic_82574(rx_pages: u32) -> (&'static Domain, Nic) {
    let (d, map) = domain(rx_pages);
    let mut dev = Device::new_82574(map.clone());
    dev.set(CTRL_EXT, CTRL_EXT_IAME);
    dev.set(IAM, !0);
    assert_eq!(reset(&mut dev, || {}), Ok(MAC));
    let nic = E1000::new(dev, map, d, RX_POOL, setup_82574()).unwrap();
    assert_eq!(nic.model(), Model::I82574L);
    (d, nic)
}

#[test]
fn the_fake_82574_auto_masks_when_iame_is_set() {
    // What the driver must switch off, shown on the device alone.
    let (_, map) = domain(8);
    let mut dev = Device::new_82574(map);
    dev.set(CTRL_EXT, CTRL_EXT_IAME);
    dev.set(IAM, INT_RXT0);
    dev.write(IMS, INT_RXT0 | INT_TXDW);
    dev.raise(INT_RXT0);
    assert_eq!(dev.read(ICR), INT_RXT0 | INT_ASSERTED);
    assert_eq!(dev.read(IMS), INT_TXDW, "the read masked RXT0");
    assert_eq!(dev.read(ICR), 0, "and cleared ICR");
    // Not asserted (no cause the mask lets through): no INT_ASSERTED, and
    // with a mask and no auto-mask the read leaves ICR as it was.
    dev.raise(INT_RXT0);
    assert_eq!(dev.read(ICR), INT_RXT0);
    dev.write(CTRL_EXT, 0);
    dev.write(IMS, INT_RXT0);
    assert_eq!(dev.read(ICR), INT_RXT0 | INT_ASSERTED);
    assert_eq!(dev.read(ICR), INT_RXT0 | INT_ASSERTED, "not cleared by the read");
    dev.write(ICR, INT_RXT0);
    assert_eq!(dev.read(ICR), 0, "write 1 to clear");
}

#[test]
fn an_82574_is_set_up_without_auto_mask_and_keeps_its_mask() {
    let (_, mut nic) = nic_82574(RING_PAGES + 8);
    let ctrl_ext = nic.regs().writes_to(CTRL_EXT);
    assert_eq!(ctrl_ext.last().map(|v| v & CTRL_EXT_IAME), Some(0));
    assert_eq!(nic.regs().writes_to(IAM), vec![0]);
    assert_eq!(nic.regs().writes_to(ITR), vec![200]);
    let mask = INT_RXT0 | INT_RXO | INT_RXDMT0 | INT_LSC | INT_TXDW;
    assert_eq!(nic.regs().read(IMS), mask);
    for _ in 0..3 {
        nic.regs().raise(INT_RXT0 | INT_TXDW);
        assert_eq!(nic.interrupt(), Interrupt::Causes { icr: INT_RXT0 | INT_TXDW | INT_ASSERTED, link: None });
        assert_eq!(nic.regs().read(IMS), mask, "no cause masked by the read");
        assert_eq!(nic.regs().writes_to(ICR).last(), Some(&(INT_RXT0 | INT_TXDW)), "the causes written back");
    }
    assert_eq!(nic.interrupt(), Interrupt::Causes { icr: 0, link: None }, "the write back cleared them");
    let clears = nic.regs().writes_to(ICR).len();
    nic.interrupt();
    assert_eq!(nic.regs().writes_to(ICR).len(), clears, "nothing to clear: no write");
    nic.regs().set(STATUS, 0);
    nic.regs().raise(INT_LSC);
    assert_eq!(nic.interrupt(), Interrupt::Causes { icr: INT_LSC | INT_ASSERTED, link: Some(false) });
}

#[test]
fn each_model_believes_only_the_causes_it_defines() {
    let queue_causes = 0x1f << 20;
    let (_, mut e82574) = nic_82574(RING_PAGES + 8);
    e82574.regs().lie = Some((ICR, INT_ASSERTED | queue_causes | INT_RXT0));
    assert!(matches!(e82574.interrupt(), Interrupt::Causes { link: None, .. }));
    for bogus in [u32::MAX, 1 << 19 | INT_RXT0, 1 << 25] {
        e82574.regs().lie = Some((ICR, bogus));
        assert_eq!(e82574.interrupt(), Interrupt::NotTheDevice(bogus));
    }
    // The same INT_ASSERTED read is not an 82540EM's.
    let (_, mut e82540) = nic(RING_PAGES + 8);
    e82540.regs().lie = Some((ICR, INT_ASSERTED | INT_RXT0));
    assert!(matches!(e82540.interrupt(), Interrupt::NotTheDevice(_)));
    assert!(e82540.regs().writes_to(IAM).is_empty(), "the 82540EM has no IAM");
    e82540.regs().lie = None;
    e82540.regs().raise(INT_RXT0);
    assert_eq!(e82540.interrupt(), Interrupt::Causes { icr: INT_RXT0, link: None });
    assert!(e82540.regs().writes_to(ICR).is_empty(), "its read clears: no write back");
}

#[test]
fn an_82574_receives_by_reference_and_sends_each_slice_in_place() {
    let (d, mut nic) = nic_82574(RING_PAGES + RING as u32);
    let sent: Vec<Vec<u8>> =
        [14, 60, 1514, 2048].iter().enumerate().map(|(i, &n)| frame(i as u64, n, i == 1)).collect();
    for f in &sent {
        assert!(nic.regs().receive(f));
    }
    let got = drain(&mut nic);
    assert_eq!(got.len(), sent.len());
    for (agg, f) in got.iter().zip(&sent) {
        assert_eq!(bytes(agg), *f);
        assert_eq!(agg.slice_count(), 1, "by reference: one buffer, no copy");
    }
    let (hdr, body) = (frame(7, 54, false), frame(8, 1000, false));
    let agg = aggregate(d, HDR_POOL, &[&hdr]);
    let mut agg = agg;
    agg.append(aggregate(d, APP_POOL, &[&body[..400], &body[400..]])).map_err(|_| ()).unwrap();
    post(&mut nic, &mut VecDeque::from([(agg, TxRequest::Plain)]));
    nic.regs().transmit(usize::MAX);
    nic.tx_reap();
    let out = &nic.regs().sent;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, [hdr, body].concat());
    assert_eq!(out[0].descriptors, 3, "one descriptor per slice");
    assert_eq!(pages_in_use(d, APP_POOL), 0);
    assert_eq!(nic.regs().dma_faults, 0);
}

#[test]
fn an_82574_cuts_tso_frames_byte_exact() {
    let (d, mut nic) = nic_82574(RING_PAGES + 8);
    nic.set_tso(true);
    for (i, &(options, mss, paylen)) in [(12, 1448, 20 * 1448 + 5), (0, 1460, 1), (0, 536, 10_000)].iter().enumerate() {
        let hdr = tso_headers(options, 0x1234, 77 * i as u32, i == 0);
        let payload = frame(i as u64 + 40, paylen, false);
        let cut: Vec<&[u8]> = payload.chunks(5000).collect();
        let mut agg = aggregate(d, HDR_POOL, &[&hdr]);
        agg.append(aggregate(d, APP_POOL, &cut)).map_err(|_| ()).unwrap();
        let whole = [hdr.clone(), payload.clone()].concat();
        let before = nic.regs().sent.len();
        post(&mut nic, &mut VecDeque::from([(agg, tso(34, hdr.len(), mss))]));
        nic.regs().transmit(usize::MAX);
        nic.tx_reap();
        let segments = &nic.regs().sent[before..];
        let n = paylen.div_ceil(mss);
        assert_eq!(segments.len(), n, "case {i}");
        for (k, s) in segments.iter().enumerate() {
            check_segment(&s.bytes, &whole, hdr.len(), mss, k, n);
        }
    }
    assert_eq!(counter(&nic, Counter::TxTsoFrames), 3);
    assert_eq!(counter(&nic, Counter::TxRejected), 0);
}
