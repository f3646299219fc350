//! The link across a restart of netdrv, as netstack and the new driver
//! incarnation carry it out (components/netstack `netdrv_died`,
//! components/netdrv `wait_for_fresh_link`): netstack keeps the frames the
//! dead driver had put on the link, quarantines the frames it had lent it
//! (posted to the NIC, or still in the ring), sets the region up again and
//! serves the new incarnation at once; the new one sees none of the old
//! messages; the quarantines end at settlement and every pool is back to
//! where it was.

use core::sync::atomic::Ordering;

use iolite::duplex::Control;
use iolite::testing::{bytes, domain, make, meta, own, pool_region};
use iolite::{init_duplex, Duplex, DuplexAttach, PeerId, PoolId, RwRegion, Side, Trust};
use nic_api::{DRV_SIDE, GEOMETRY, STACK_SIDE, WORD_MAC};

/// netdrv's receive pool and netstack's header pool.
const RX_POOL: PoolId = 1;
const HDR_POOL: PoolId = 2;
/// Each one's slot for the other.
const NETDRV: PeerId = PeerId(0);
const NETSTACK: PeerId = PeerId(0);
const RX_PAGES: u32 = 16;
const MAC: u64 = 1 << 63 | 0x5634_1200_5452;

fn attach(d: &'static iolite::Domain, peer: PeerId, region: RwRegion, side: Side) -> Duplex<'static> {
    // SAFETY: a duplex region of GEOMETRY, living for the whole test; one
    // attachment per side at a time (the dead side's is forgotten first).
    unsafe { Duplex::attach(DuplexAttach { domain: d, peer, region, geometry: GEOMETRY, side }) }.expect("attach")
}

fn in_use(d: &iolite::Domain, pool: PoolId) -> u32 {
    d.pool_stats(pool).unwrap().pages_in_use
}

fn frame(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_mul(31).wrapping_add(i as u8)).collect()
}

#[test]
fn a_restarted_driver_gets_a_fresh_link_and_the_old_holds_come_back_at_settlement() {
    let stack = domain();
    let hdr = own(stack, HDR_POOL, 32);
    let rx = pool_region(RX_PAGES);
    let drv = domain();
    drv.add_owned_pool(RX_POOL, rx, meta(RX_PAGES), Trust::Trusted).unwrap();
    iolite::testing::map(stack, RX_POOL, rx);
    iolite::testing::map(drv, HDR_POOL, hdr);
    stack.set_peer_pools(NETDRV, &[RX_POOL]).unwrap();
    drv.set_peer_pools(NETSTACK, &[HDR_POOL]).unwrap();
    let (rx_base, hdr_base) = (in_use(drv, RX_POOL), in_use(stack, HDR_POOL));

    // netstack sets the link up, netdrv attaches and publishes its MAC.
    let link = iolite::testing::region(GEOMETRY.duplex_bytes());
    // SAFETY: a fresh region nobody uses yet.
    assert_eq!(unsafe { init_duplex(link, GEOMETRY) }, Ok(1));
    let mut s = attach(stack, NETDRV, link, STACK_SIDE);
    let mut old = attach(drv, NETSTACK, link, DRV_SIDE);
    old.control().word(WORD_MAC).store(MAC, Ordering::Release);

    // Two received frames up: netstack takes one, the other waits.
    let received = [frame(1, 60), frame(2, 1514)];
    for f in &received {
        old.tx.send(make(drv, RX_POOL, f), 0, 0).map_err(|(e, _)| e).unwrap();
    }
    let first = s.rx.recv().unwrap().unwrap().agg;
    // Three frames down: netdrv takes two (posted to the NIC), one waits.
    for k in 0..3 {
        s.tx.send(make(stack, HDR_POOL, &frame(10 + k, 100)), 0, 0).map_err(|(e, _)| e).unwrap();
    }
    let posted: Vec<_> = (0..2).map(|_| old.rx.recv().unwrap().unwrap().agg).collect();
    assert_eq!(in_use(stack, HDR_POOL), hdr_base + 3);

    // netdrv dies: nothing of it runs or returns anything again.
    std::mem::forget(posted);
    std::mem::forget(old);

    // netstack: the frame still on the link is as good as any ...
    let second = s.rx.recv().unwrap().unwrap().agg;
    assert_eq!(bytes(&first), received[0]);
    assert_eq!(bytes(&second), received[1]);
    assert!(s.rx.recv().unwrap().is_none());
    // ... what it lent the dead driver is quarantined (all three frames:
    // the two it took and the one left in the ring), what it holds from
    // it is tainted until dropped.
    assert_eq!(stack.peer_failed(NETDRV), Ok(3));
    assert_eq!(stack.tainted(NETDRV), Ok(2));
    // The link afresh: a new generation, no MAC (the new driver waits for
    // that), the old messages gone.
    drop(s);
    // SAFETY: the dead side no longer runs; ours was dropped.
    assert_eq!(unsafe { init_duplex(link, GEOMETRY) }, Ok(2));
    // SAFETY: the region, mapped for the test.
    let control = unsafe { Control::of(link, GEOMETRY) }.unwrap();
    assert_eq!(control.word(WORD_MAC).load(Ordering::Acquire) >> 63, 0);
    let mut s = attach(stack, NETDRV, link, STACK_SIDE);
    stack.peer_restarted(NETDRV).unwrap();
    // The quarantined frames' buffers are not reused meanwhile.
    assert_eq!(in_use(stack, HDR_POOL), hdr_base + 3);

    // The new incarnation: its pool's header survived, so the pages the
    // dead one left in use are quarantined; it attaches to generation 2
    // and finds nothing of the old messages.
    let new = domain();
    new.add_owned_pool(RX_POOL, rx, meta(RX_PAGES), Trust::Trusted).unwrap();
    iolite::testing::map(new, HDR_POOL, hdr);
    new.set_peer_pools(NETSTACK, &[HDR_POOL]).unwrap();
    assert_eq!(new.quarantined_pages(RX_POOL), Ok(2));
    let mut d = attach(new, NETSTACK, link, DRV_SIDE);
    assert_eq!(d.generation(), 2);
    assert!(d.rx.recv().unwrap().is_none(), "the frame left for the dead driver is not delivered again");
    d.control().word(WORD_MAC).store(MAC, Ordering::Release);

    // Both directions work, byte for byte.
    let up = frame(3, 900);
    d.tx.send(make(new, RX_POOL, &up), 0, 0).map_err(|(e, _)| e).unwrap();
    let got = s.rx.recv().unwrap().unwrap().agg;
    assert_eq!(bytes(&got), up);
    let down = frame(4, 1200);
    s.tx.send(make(stack, HDR_POOL, &down), 7, 0).map_err(|(e, _)| e).unwrap();
    let r = d.rx.recv().unwrap().unwrap();
    assert_eq!((bytes(&r.agg), r.tag), (down, 7));
    drop(r);
    d.rx.flush_releases().unwrap();
    s.tx.poll_releases().unwrap();
    drop(got);
    s.rx.flush_releases().unwrap();
    d.tx.poll_releases().unwrap();

    // netstack lets go of the dead driver's frames: confirmed; settlement
    // ends both quarantines and every pool is back where it was.
    drop((first, second));
    assert_eq!(stack.tainted(NETDRV), Ok(0));
    assert_eq!(in_use(stack, HDR_POOL), hdr_base + 3);
    assert_eq!(stack.peer_settled(NETDRV), Ok(3));
    assert_eq!(in_use(stack, HDR_POOL), hdr_base);
    assert_eq!(new.end_quarantine(RX_POOL), Ok(2));
    assert_eq!(in_use(new, RX_POOL), rx_base);
}

/// The link across a restart of netstack (components/netdrv `StackLife`,
/// components/netstack `wait_for_released_link`): netdrv lets go of the
/// link at the death (quarantines the received frames it had lent the dead
/// stack, keeps sending the frames already on the NIC, their holds
/// forgotten and their buffers tainted, and clears the MAC address word);
/// the new incarnation sets the link up only then, and netdrv attaches to
/// the new generation and publishes its MAC address again. Nothing of the
/// old messages reaches either side; at settlement every pool is back.
#[test]
fn a_restarted_stack_sets_the_link_up_once_the_driver_let_go() {
    let stack = domain();
    let hdr = own(stack, HDR_POOL, 32);
    let rx = pool_region(RX_PAGES);
    let drv = domain();
    drv.add_owned_pool(RX_POOL, rx, meta(RX_PAGES), Trust::Trusted).unwrap();
    iolite::testing::map(stack, RX_POOL, rx);
    iolite::testing::map(drv, HDR_POOL, hdr);
    stack.set_peer_pools(NETDRV, &[RX_POOL]).unwrap();
    drv.set_peer_pools(NETSTACK, &[HDR_POOL]).unwrap();
    let (rx_base, hdr_base) = (in_use(drv, RX_POOL), in_use(stack, HDR_POOL));

    let link = iolite::testing::region(GEOMETRY.duplex_bytes());
    // SAFETY: a fresh region nobody uses yet.
    assert_eq!(unsafe { init_duplex(link, GEOMETRY) }, Ok(1));
    let mut s = attach(stack, NETDRV, link, STACK_SIDE);
    let mut d = attach(drv, NETSTACK, link, DRV_SIDE);
    d.control().word(WORD_MAC).store(MAC, Ordering::Release);

    // Two received frames up: the stack takes one, the other waits.
    for f in [frame(1, 60), frame(2, 1514)] {
        d.tx.send(make(drv, RX_POOL, &f), 0, 0).map_err(|(e, _)| e).unwrap();
    }
    let taken = s.rx.recv().unwrap().unwrap().agg;
    // Three frames down: netdrv posts two to the NIC, one waits.
    let down: Vec<_> = (0..3).map(|k| frame(20 + k, 300)).collect();
    for f in &down {
        s.tx.send(make(stack, HDR_POOL, f), 0, 0).map_err(|(e, _)| e).unwrap();
    }
    let on_nic: Vec<_> = (0..2).map(|_| d.rx.recv().unwrap().unwrap().agg).collect();
    assert_eq!(bytes(&on_nic[0]), down[0]);
    assert_eq!(in_use(drv, RX_POOL), rx_base + 2);

    // netstack dies: nothing of it runs or returns anything again.
    std::mem::forget(taken);
    std::mem::forget(s);

    // netdrv: both frames it lent are quarantined (the one taken and the
    // one in the ring); the two on the NIC are tainted until sent.
    assert_eq!(drv.peer_failed(NETSTACK), Ok(2));
    assert_eq!(drv.tainted(NETSTACK), Ok(2));
    let control = d.control();
    let old_generation = d.generation();
    control.word(WORD_MAC).store(0, Ordering::Release);

    // The new incarnation waited for that (MAC word clear), then sets the
    // link up; its header pool's pages the dead one left in use (all
    // three frames) are quarantined.
    let stack2 = domain();
    stack2.add_owned_pool(HDR_POOL, hdr, meta(32), Trust::Trusted).unwrap();
    iolite::testing::map(stack2, RX_POOL, rx);
    stack2.set_peer_pools(NETDRV, &[RX_POOL]).unwrap();
    assert_eq!(stack2.quarantined_pages(HDR_POOL), Ok(3));
    assert_eq!(control.word(WORD_MAC).load(Ordering::Acquire) >> 63, 0, "netdrv let go");
    // SAFETY: the dead stack no longer runs and netdrv let go.
    assert_eq!(unsafe { init_duplex(link, GEOMETRY) }, Ok(2));
    let mut s = attach(stack2, NETDRV, link, STACK_SIDE);

    // netdrv sees the new generation and attaches; the NIC meanwhile keeps
    // sending the dead stack's frames byte for byte.
    assert_ne!(control.generation(), old_generation);
    drop(d);
    let mut d = attach(drv, NETSTACK, link, DRV_SIDE);
    drv.peer_restarted(NETSTACK).unwrap();
    d.control().word(WORD_MAC).store(MAC, Ordering::Release);
    assert!(d.rx.recv().unwrap().is_none(), "the frame left for the NIC by the dead stack is gone");
    assert!(s.rx.recv().unwrap().is_none(), "the frame left for the dead stack is gone");

    // Both directions work, byte for byte.
    let up = frame(5, 1000);
    d.tx.send(make(drv, RX_POOL, &up), 0, 0).map_err(|(e, _)| e).unwrap();
    let got = s.rx.recv().unwrap().unwrap().agg;
    assert_eq!(bytes(&got), up);
    let out = frame(6, 1400);
    s.tx.send(make(stack2, HDR_POOL, &out), 9, 0).map_err(|(e, _)| e).unwrap();
    let r = d.rx.recv().unwrap().unwrap();
    assert_eq!((bytes(&r.agg), r.tag), (out, 9));
    drop(r);
    d.rx.flush_releases().unwrap();
    s.tx.poll_releases().unwrap();
    drop(got);
    s.rx.flush_releases().unwrap();
    d.tx.poll_releases().unwrap();

    // The NIC sent the dead stack's frames: netdrv confirms; settlement
    // ends both quarantines and every pool is back where it was.
    assert_eq!(bytes(&on_nic[1]), down[1]);
    drop(on_nic);
    assert_eq!(drv.tainted(NETSTACK), Ok(0));
    assert_eq!(in_use(drv, RX_POOL), rx_base + 2, "lent frames are not reused before settlement");
    assert_eq!(drv.peer_settled(NETSTACK), Ok(2));
    assert_eq!(in_use(drv, RX_POOL), rx_base);
    assert_eq!(stack2.end_quarantine(HDR_POOL), Ok(3));
    assert_eq!(in_use(stack2, HDR_POOL), hdr_base);
}
