//! The client region across a restart of netstack, as the two sides carry
//! it out (components/netstack `Slot::stale`, components/httpd
//! `netstack_died`): the dead incarnation's region is not attached again
//! by the new one; the client, which follows netstack's deaths, forgets
//! what the dead one granted it (its received data tainted until dropped),
//! quarantines what it lent it (the bytes it was sending) and sets the
//! region up afresh; the new incarnation attaches to that generation
//! only. Data crosses byte for byte both ways before and after, the new
//! incarnation sees none of the old messages, and at settlement every
//! pool is back where it was.

use iolite::duplex::Control;
use iolite::testing::{bytes, domain, make, meta, own, pool_region};
use iolite::{Domain, Duplex, DuplexAttach, PeerId, PoolId, RwRegion, Trust};
use socket_api::{init_client, mark_stack_attached, stack_attached_before, Event, Request, GEOMETRY, STACK_SIDE};

/// netstack's socket pool (received data) and the client's pool.
const SOCK_POOL: PoolId = 1;
const APP_POOL: PoolId = 2;
/// Each one's slot for the other.
const CLIENT: PeerId = PeerId(1);
const NETSTACK: PeerId = PeerId(0);
const SOCK_PAGES: u32 = 16;

fn stack_attach(d: &'static Domain, region: RwRegion) -> Duplex<'static> {
    // SAFETY: a duplex region of GEOMETRY, living for the whole test; the
    // dead side's attachment is forgotten before a new one is made.
    unsafe { Duplex::attach(DuplexAttach { domain: d, peer: CLIENT, region, geometry: GEOMETRY, side: STACK_SIDE }) }
        .expect("attach")
}

fn in_use(d: &Domain, pool: PoolId) -> u32 {
    d.pool_stats(pool).unwrap().pages_in_use
}

fn body(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_mul(29).wrapping_add((i * 7) as u8)).collect()
}

/// A netstack incarnation: a fresh domain owning the socket pool (its
/// header kept across incarnations) and mapping the client's pool.
fn stack_domain(sock: RwRegion, app: RwRegion) -> &'static Domain {
    let d = domain();
    d.add_owned_pool(SOCK_POOL, sock, meta(SOCK_PAGES), Trust::Trusted).unwrap();
    iolite::testing::map(d, APP_POOL, app);
    d.set_peer_pools(CLIENT, &[APP_POOL]).unwrap();
    d
}

#[test]
fn a_restarted_stack_attaches_only_to_the_region_its_client_set_up_again() {
    let client = domain();
    let app = own(client, APP_POOL, 32);
    let sock = pool_region(SOCK_PAGES);
    let stack = stack_domain(sock, app);
    iolite::testing::map(client, SOCK_POOL, sock);
    client.set_peer_pools(NETSTACK, &[SOCK_POOL]).unwrap();
    let (app_base, sock_base) = (in_use(client, APP_POOL), in_use(stack, SOCK_POOL));

    // The client sets the region up; netstack attaches and marks it.
    let region = iolite::testing::region(GEOMETRY.duplex_bytes());
    // SAFETY: a fresh region nobody uses yet.
    let mut c = unsafe { init_client(client, NETSTACK, region) }.unwrap();
    // SAFETY: the region, mapped for the test.
    let control = unsafe { Control::of(region, GEOMETRY) }.unwrap();
    assert!(!stack_attached_before(&control), "a fresh region is free to attach");
    let mut s = stack_attach(stack, region);
    mark_stack_attached(&control, s.generation());
    assert!(stack_attached_before(&control));

    // Traffic both ways: a request of 3000 bytes in (by reference), a
    // response of 70 000 out (by reference, the stack holds it for TCP).
    let request = body(1, 3000);
    s.tx.send(make(stack, SOCK_POOL, &request), Event::Data { conn: 5 }.encode(), 0).map_err(|(e, _)| e).unwrap();
    let got = c.rx.recv().unwrap().unwrap();
    assert_eq!(Event::decode(got.tag), Some(Event::Data { conn: 5 }));
    assert_eq!(bytes(&got.agg), request);
    let held_request = got.agg;
    let response = body(2, 70_000);
    c.tx.send(make(client, APP_POOL, &response), Request::Send { conn: 5 }.encode(), 0).map_err(|(e, _)| e).unwrap();
    let sent = s.rx.recv().unwrap().unwrap();
    assert_eq!(bytes(&sent.agg), response);
    // One more the dead stack never takes, and an event it never sees taken.
    c.tx.send(make(client, APP_POOL, &body(3, 500)), Request::Send { conn: 5 }.encode(), 0)
        .map_err(|(e, _)| e)
        .unwrap();
    s.tx.send(make(stack, SOCK_POOL, &body(4, 100)), Event::Data { conn: 5 }.encode(), 0).map_err(|(e, _)| e).unwrap();
    let app_lent = in_use(client, APP_POOL);
    assert!(app_lent > app_base);

    // netstack dies: nothing of it runs or returns anything again.
    std::mem::forget(sent);
    std::mem::forget(s);

    // Its new incarnation starts before the client saw the death: the
    // region is the dead one's, it does not attach.
    let stack2 = stack_domain(sock, app);
    assert!(stack_attached_before(&control), "the new incarnation must wait for a fresh region");
    // Its pool pages the dead one left in use (the two Data events) are
    // quarantined there, not reused.
    assert_eq!(stack2.quarantined_pages(SOCK_POOL), Ok(2));

    // The client follows the death: what it lent is quarantined (both
    // sends' buffers), what it holds of the dead one is tainted.
    assert_eq!(client.peer_failed(NETSTACK), Ok(2));
    assert_eq!(client.tainted(NETSTACK), Ok(1));
    drop(c);
    // SAFETY: the dead stack no longer runs, ours was dropped.
    let mut c = unsafe { init_client(client, NETSTACK, region) }.unwrap();
    assert_eq!(c.generation(), 2);
    client.peer_restarted(NETSTACK).unwrap();
    assert!(!stack_attached_before(&control), "set up again: the new incarnation attaches");
    let mut s = stack_attach(stack2, region);
    mark_stack_attached(&control, s.generation());
    assert!(s.rx.recv().unwrap().is_none(), "the send left for the dead stack is not delivered again");
    assert!(c.rx.recv().unwrap().is_none(), "the dead stack's event is gone");

    // The client listens again; both directions work, byte for byte.
    c.tx.send(iolite::Aggregate::new(client), Request::Listen { port: 80, backlog: 64 }.encode(), 0)
        .map_err(|(e, _)| e)
        .unwrap();
    let l = s.rx.recv().unwrap().unwrap();
    assert_eq!(Request::decode(l.tag), Ok(Request::Listen { port: 80, backlog: 64 }));
    drop(l);
    let request2 = body(5, 1460);
    s.tx.send(make(stack2, SOCK_POOL, &request2), Event::Data { conn: 1 }.encode(), 0).map_err(|(e, _)| e).unwrap();
    let r = c.rx.recv().unwrap().unwrap();
    assert_eq!(bytes(&r.agg), request2);
    drop(r);
    let response2 = body(6, 20_000);
    c.tx.send(make(client, APP_POOL, &response2), Request::Send { conn: 1 }.encode(), 0).map_err(|(e, _)| e).unwrap();
    let r = s.rx.recv().unwrap().unwrap();
    assert_eq!(bytes(&r.agg), response2);
    drop(r);
    s.rx.flush_releases().unwrap();
    c.tx.poll_releases().unwrap();
    c.rx.flush_releases().unwrap();
    s.tx.poll_releases().unwrap();

    // The quarantined buffers are not reused before settlement.
    assert_eq!(in_use(client, APP_POOL), app_lent);
    // The client drops the dead incarnation's request: it confirms; the
    // settlement ends both quarantines and every pool is back.
    drop(held_request);
    assert_eq!(client.tainted(NETSTACK), Ok(0));
    assert_eq!(client.peer_settled(NETSTACK), Ok(2));
    assert_eq!(in_use(client, APP_POOL), app_base);
    assert_eq!(stack2.end_quarantine(SOCK_POOL), Ok(2));
    assert_eq!(in_use(stack2, SOCK_POOL), sock_base);
}
