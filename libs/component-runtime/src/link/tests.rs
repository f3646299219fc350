//! The death protocol's peer side on a page in memory and a fake domain.

use super::*;
use core::cell::RefCell;
use core::sync::atomic::Ordering;

/// A domain that counts: per peer, buffers lent (quarantined at a death)
/// and tainted; per pool, quarantined pages.
#[derive(Default)]
struct Fake {
    lent: RefCell<[u32; 4]>,
    quarantined: RefCell<[u32; 4]>,
    tainted: RefCell<[u32; 4]>,
    active: RefCell<[bool; 4]>,
    pool_quarantine: RefCell<[u32; 4]>,
}

impl Holds for Fake {
    fn peer_failed(&self, p: PeerId) -> u32 {
        let i = p.0 as usize;
        let lent = core::mem::take(&mut self.lent.borrow_mut()[i]);
        self.quarantined.borrow_mut()[i] += lent;
        self.active.borrow_mut()[i] = false;
        self.quarantined.borrow()[i]
    }
    fn peer_restarted(&self, p: PeerId) {
        self.active.borrow_mut()[p.0 as usize] = true;
    }
    fn peer_settled(&self, p: PeerId) -> u32 {
        self.active.borrow_mut()[p.0 as usize] = true;
        core::mem::take(&mut self.quarantined.borrow_mut()[p.0 as usize])
    }
    fn tainted(&self, p: PeerId) -> u32 {
        self.tainted.borrow()[p.0 as usize]
    }
    fn quarantined_pages(&self, pool: PoolId) -> u32 {
        self.pool_quarantine.borrow()[pool as usize]
    }
    fn end_quarantine(&self, pool: PoolId) -> u32 {
        core::mem::take(&mut self.pool_quarantine.borrow_mut()[pool as usize])
    }
}

/// A page with records `names` (all alive, nothing settled).
fn page(names: &[&str]) -> &'static EventsPage {
    // SAFETY: the page is atomics and bytes, all valid as zeroes.
    let mut page: Box<EventsPage> = unsafe { Box::new_zeroed().assume_init() };
    for (i, n) in names.iter().enumerate() {
        page.records[i].name[..n.len()].copy_from_slice(n.as_bytes());
        page.records[i].name_len.store(n.len() as u64, Ordering::Release);
    }
    let page: &'static EventsPage = Box::leak(page);
    page.count.store(names.len() as u64, Ordering::Release);
    page.magic.store(crate::events::EVENTS_MAGIC, Ordering::Release);
    page
}

fn die(page: &EventsPage, i: usize) {
    page.records[i].deaths.fetch_add(1, Ordering::AcqRel);
}

fn settle(page: &EventsPage, i: usize) {
    let deaths = page.records[i].deaths.load(Ordering::Acquire);
    page.records[i].settled.store(deaths, Ordering::Release);
}

thread_local! {
    /// Confirmations this test's `Deaths` made (each test runs on a
    /// thread of its own).
    static CONFIRMED: RefCell<Vec<(usize, u64)>> = const { RefCell::new(Vec::new()) };
}

fn record(component: usize, death: u64) {
    CONFIRMED.with(|c| c.borrow_mut().push((component, death)));
}

fn confirmed(component: usize) -> Vec<u64> {
    CONFIRMED.with(|c| c.borrow().iter().filter(|c| c.0 == component).map(|c| c.1).collect())
}

/// One round as a shell runs it: poll, offer every event to the link.
fn round(deaths: &mut Deaths, link: &mut Link<()>, d: &Fake) -> Vec<PeerEvent> {
    let seen: Vec<_> = deaths.poll(d, &[link.index()]).filter_map(|e| link.see(e, d)).collect();
    if seen.iter().any(|e| matches!(e, PeerEvent::Died { .. })) {
        link.fail(d);
    }
    link.confirm_if_clean(d, deaths);
    seen
}

#[test]
fn a_death_quarantines_and_its_settlement_releases() {
    let p = page(&["me", "netstack", "other"]);
    let d = Fake::default();
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 0, &d, &[]).confirming_with(record);
    let mut link = Link::new("netstack", PeerId(1), Some(p), ());
    assert_eq!(link.index(), Some(1));
    d.lent.borrow_mut()[1] = 5;
    assert!(round(&mut deaths, &mut link, &d).is_empty());

    die(p, 1);
    d.tainted.borrow_mut()[1] = 2;
    assert_eq!(round(&mut deaths, &mut link, &d), [PeerEvent::Died { death: 1 }]);
    assert!(link.is_dead() && link.owes_confirmation());
    assert_eq!(d.quarantined.borrow()[1], 5, "what we lent it is quarantined");
    // Its frames are still in use: not confirmed yet.
    assert!(confirmed(1).is_empty());
    d.tainted.borrow_mut()[1] = 0;
    assert!(round(&mut deaths, &mut link, &d).is_empty());
    assert_eq!(confirmed(1), [1], "confirmed once the taint is gone");
    assert!(!link.owes_confirmation());
    assert!(round(&mut deaths, &mut link, &d).is_empty());
    assert_eq!(confirmed(1), [1], "and only once");

    link.reattach((), &d);
    assert!(!link.is_dead() && d.active.borrow()[1]);
    settle(p, 1);
    assert_eq!(round(&mut deaths, &mut link, &d), [PeerEvent::Settled { death: 1, released: Some(5) }]);
}

#[test]
fn a_settlement_of_an_older_death_is_not_the_latest() {
    let p = page(&["me", "cgi"]);
    let d = Fake::default();
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 0, &d, &[]).confirming_with(|_, _| {});
    let mut link = Link::new("cgi", PeerId(0), Some(p), ());
    die(p, 1);
    round(&mut deaths, &mut link, &d);
    // Settled for death 1, but it died again before we looked.
    settle(p, 1);
    die(p, 1);
    let seen = round(&mut deaths, &mut link, &d);
    assert_eq!(seen, [PeerEvent::Died { death: 2 }], "settled 1 is not the latest death");
    settle(p, 1);
    let seen = round(&mut deaths, &mut link, &d);
    assert_eq!(seen, [PeerEvent::Settled { death: 2, released: Some(0) }]);
}

#[test]
fn deaths_no_link_claims_are_confirmed_at_once() {
    let p = page(&["me", "fs", "netdrv", "cgi"]);
    let d = Fake::default();
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 0, &d, &[]).confirming_with(record);
    let mut fs = Link::new("fs", PeerId(1), Some(p), ());
    die(p, 2);
    die(p, 1);
    d.tainted.borrow_mut()[1] = 1;
    round(&mut deaths, &mut fs, &d);
    assert_eq!(confirmed(2), [1], "netdrv: nothing of it reaches us but through the peers we track");
    assert!(confirmed(1).is_empty(), "fs: its buffers are still in use");
    assert!(confirmed(3).is_empty(), "cgi did not die");
}

#[test]
fn our_own_quarantine_ends_when_our_death_is_settled() {
    let p = page(&["other", "me"]);
    die(p, 1);
    let d = Fake::default();
    d.pool_quarantine.borrow_mut()[2] = 7;
    d.pool_quarantine.borrow_mut()[3] = 1;
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 1, &d, &[2, 3]);
    assert_eq!(deaths.quarantine(), Some(1));
    assert_eq!(deaths.poll(&d, &[]).count(), 0);
    assert_eq!(d.pool_quarantine.borrow()[2], 7, "not settled yet");
    settle(p, 1);
    let seen: Vec<_> = deaths.poll(&d, &[]).collect();
    assert_eq!(seen, [Event::Settled { component: 1, death: 1 }]);
    assert_eq!(deaths.quarantine(), None);
    assert_eq!(*d.pool_quarantine.borrow(), [0; 4], "both pools free again");
}

#[test]
fn without_a_page_nothing_is_seen_and_the_quarantine_stays() {
    let d = Fake::default();
    d.pool_quarantine.borrow_mut()[0] = 3;
    let mut deaths = Deaths::on(None, 0, &d, &[0]);
    assert_eq!(deaths.quarantine(), None);
    assert_eq!(deaths.poll(&d, &[]).count(), 0);
    assert_eq!(d.pool_quarantine.borrow()[0], 3);
    let mut link: Link<()> = Link::new("fs", PeerId(0), deaths.page(), ());
    assert_eq!(link.index(), None);
    assert!(!link.confirm_if_clean(&d, &deaths));
}

#[test]
fn a_link_that_releases_on_request_waits_for_it() {
    let p = page(&["me", "netdrv"]);
    let d = Fake::default();
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 0, &d, &[]).confirming_with(|_, _| {});
    let mut link = Link::new("netdrv", PeerId(0), Some(p), ()).release_on_request();
    d.lent.borrow_mut()[0] = 4;
    die(p, 1);
    round(&mut deaths, &mut link, &d);
    assert_eq!(link.release(&d), None, "not settled");
    settle(p, 1);
    assert_eq!(round(&mut deaths, &mut link, &d), [PeerEvent::Settled { death: 1, released: None }]);
    assert!(link.settled_unreleased());
    assert_eq!(d.quarantined.borrow()[0], 4, "kept until asked");
    assert_eq!(link.release(&d), Some(4));
    assert_eq!(link.release(&d), None, "once");
}

#[test]
fn a_held_down_peer_is_reported_and_remembered() {
    let p = page(&["me", "cgi", "fs"]);
    p.records[2].held_down.store(1, Ordering::Release);
    let d = Fake::default();
    let mut deaths = Deaths::on(Some(Watcher::on(p)), 0, &d, &[]).confirming_with(|_, _| {});
    let fs: Link<()> = Link::new("fs", PeerId(1), Some(p), ());
    assert!(fs.is_held_down(), "held down before we started");
    let mut cgi = Link::new("cgi", PeerId(0), Some(p), ());
    assert!(!cgi.is_held_down());
    die(p, 1);
    p.records[1].held_down.store(1, Ordering::Release);
    let seen = round(&mut deaths, &mut cgi, &d);
    assert_eq!(seen, [PeerEvent::Died { death: 1 }, PeerEvent::HeldDown]);
    assert!(cgi.is_held_down());
}

#[test]
fn the_guards_start_healthy_on_a_new_channel() {
    let d = Fake::default();
    let mut link = Link::new("netstack", PeerId(0), None, 1u32);
    link.rx_guard.note(iolite::Error::CorruptRing);
    assert!(link.rx_guard.broken().is_some());
    assert_eq!(link.reattach(2, &d), 1, "the old channel is handed back");
    assert_eq!(link.chan, 2);
    assert!(link.rx_guard.broken().is_none() && link.tx_guard.broken().is_none());
}
