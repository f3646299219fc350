//! System events: the supervisor tells a component's peers that it died,
//! and when every peer has settled that death (the system side of the
//! IO-Lite death protocol, `libs/iolite/README.md` "Death").
//!
//! A component subscribes in the assembly (`<instance>.system_events =
//! "<consumed notification>"`). The loader then maps one page, written only
//! by the supervisor, read-only at [`EVENTS_VADDR`] in every subscriber,
//! and the supervisor signals the named notification with
//! `system_spec::SYSTEM_EVENT_BADGE` whenever the page changes. The page
//! holds one [`Record`] per component of the system spec (in spec order):
//!
//! * `deaths`: how many times the component died (fault, exit, or a
//!   restart on request). It goes up before the component is rebuilt.
//! * `held_down`: 1 once the supervisor stopped restarting the component
//!   (it failed too often: `<instance>.restart_limit`); it does not come
//!   back, so peers stop waiting for it.
//! * `settled`: the highest death number that every peer has *settled*:
//!   each subscriber that shares a dataport with the dead component
//!   confirmed ([`confirm_settled`]) that it no longer uses anything it got
//!   from the dead incarnation (`iolite::Domain::tainted` is 0), directly
//!   or through components downstream of it (hop-by-hop holds).
//!
//! A peer reacts to `Died` with `Domain::peer_failed` (what it lent the
//! dead incarnation is quarantined), confirms once its taint is gone, and
//! on `Settled` drops the quarantine (`Domain::peer_settled`). The
//! restarted component itself keeps its pool pages of the dead incarnation
//! quarantined until its own death is settled (`Domain::end_quarantine`).
//!
//! **Nobody holds a death hostage**: a subscriber has
//! `<instance>.confirm_death_ms` (default 2 s) to confirm. One that does
//! not is judged by the supervisor (`supervisor_policy::late`): an
//! untrusted one (`<instance>.untrusted`) is treated as dead itself
//! (restarted, or stopped if it is not restartable): its death drops its
//! holds, and the first death then waits only for that one to settle. A trusted one is reported by name
//! once and waited for: it may still read the pages, and reusing them
//! under it would be worse than keeping them out of use.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Where the loader maps the events page in a subscriber.
pub const EVENTS_VADDR: u64 = crate::start::START_INFO_VADDR + 0x6000;
/// Marks a valid events page ("IOLEVNTS").
pub const EVENTS_MAGIC: u64 = u64::from_le_bytes(*b"IOLEVNTS");
/// Components the page has records for (the first ones of the spec).
pub const MAX_COMPONENTS: usize = 48;
/// Longest name a record carries.
pub const RECORD_NAME_LEN: usize = 48;
/// Message label of [`confirm_settled`]'s send to the supervisor.
pub const SUPERVISOR_SETTLED_LABEL: u64 = 0xE419;

/// One component's record.
#[repr(C)]
pub struct Record {
    /// Deaths so far.
    pub deaths: AtomicU64,
    /// Highest death every peer has settled.
    pub settled: AtomicU64,
    /// 1 once the component is held down (not restarted any more).
    pub held_down: AtomicU64,
    /// Length of `name`.
    pub name_len: AtomicU64,
    /// The instance name (written once, before any component starts).
    pub name: [u8; RECORD_NAME_LEN],
}

/// The page.
#[repr(C)]
pub struct EventsPage {
    /// [`EVENTS_MAGIC`].
    pub magic: AtomicU64,
    /// Valid records.
    pub count: AtomicU64,
    /// One per component, in spec order.
    pub records: [Record; MAX_COMPONENTS],
    /// The supervisor's free untyped memory in bytes, written after the
    /// system was built and after every restart: a restart that leaked
    /// would show here as a smaller figure (`/cgi-bin/stats`).
    pub free_untyped_bytes: AtomicU64,
    /// Per record (subscriber): the deaths of peers it did not confirm
    /// within its `confirm_death_ms`, each counted once, whatever the
    /// supervisor did about it (restart, stop, report;
    /// `supervisor_policy::late`).
    /// Written by the supervisor only ([`EventsPage::note_late`]).
    pub late_confirms: [AtomicU32; MAX_COMPONENTS],
    /// Bit `i` set while record `i`'s component is not running: from its
    /// death until its new incarnation is built (for good if it is held
    /// down, stopped or not restartable). Written by the supervisor only
    /// ([`EventsPage::set_running`]); what `/healthz` reads.
    pub not_running: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<EventsPage>() <= 4096);

impl EventsPage {
    /// The component called `name`, if it has a record.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        (0..self.len()).find(|&i| self.name(i) == Some(name))
    }

    /// Number of valid records.
    pub fn len(&self) -> usize {
        (self.count.load(Ordering::Acquire) as usize).min(MAX_COMPONENTS)
    }

    /// True if there is no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of record `i`.
    pub fn name(&self, i: usize) -> Option<&str> {
        let r = self.records.get(i)?;
        let n = (r.name_len.load(Ordering::Acquire) as usize).min(RECORD_NAME_LEN);
        core::str::from_utf8(&r.name[..n]).ok()
    }

    /// The supervisor's free untyped memory, bytes (0 before it was first
    /// written).
    pub fn free_untyped_bytes(&self) -> u64 {
        self.free_untyped_bytes.load(Ordering::Acquire)
    }

    /// (deaths, settled) of record `i`.
    pub fn state(&self, i: usize) -> (u64, u64) {
        let r = &self.records[i];
        (r.deaths.load(Ordering::Acquire), r.settled.load(Ordering::Acquire))
    }

    /// Whether record `i`'s component is held down (not restarted any
    /// more).
    pub fn held_down(&self, i: usize) -> bool {
        self.records[i].held_down.load(Ordering::Acquire) != 0
    }

    /// How many peers' deaths record `i`'s component did not confirm in
    /// time (0 for an index past the records).
    pub fn late_confirms(&self, i: usize) -> u64 {
        self.late_confirms.get(i).map_or(0, |n| u64::from(n.load(Ordering::Acquire)))
    }

    /// The supervisor: record `i`'s component was late to confirm one
    /// more death (saturating; an index past the records is ignored).
    pub fn note_late(&self, i: usize) {
        if let Some(n) = self.late_confirms.get(i) {
            let _ = n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_add(1));
        }
    }
}

/// Why the system is not healthy (one of [`EventsPage::health`]'s
/// findings), per component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unhealthy {
    /// Held down by the supervisor: it will not come back.
    HeldDown,
    /// Dead, its new incarnation not built yet (`deaths` so far).
    Down {
        /// Its deaths so far.
        deaths: u64,
    },
    /// Running again (or never died), but a death is not settled: a peer
    /// has not confirmed it yet, so its pages stay out of use.
    Unsettled {
        /// Its deaths so far.
        deaths: u64,
        /// The highest one every peer settled.
        settled: u64,
    },
}

impl EventsPage {
    /// Marks record `i`'s component running or not (the supervisor: not
    /// at a death, running once its new incarnation is built). An index
    /// past the bitmap is ignored.
    pub fn set_running(&self, i: usize, running: bool) {
        if i >= 64 {
            return;
        }
        let bit = 1u64 << i;
        if running {
            self.not_running.fetch_and(!bit, Ordering::AcqRel);
        } else {
            self.not_running.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// Whether record `i`'s component runs (true past the bitmap).
    pub fn running(&self, i: usize) -> bool {
        i >= 64 || self.not_running.load(Ordering::Acquire) & (1u64 << i) == 0
    }

    /// Calls `f` with every component that is not healthy (in record
    /// order) and returns how many there were: 0 when every component is
    /// up and every death settled. Cheap: a few loads per record, so a
    /// load balancer may poll it as often as it likes.
    pub fn health(&self, mut f: impl FnMut(&str, Unhealthy)) -> usize {
        let mut n = 0;
        for i in 0..self.len() {
            let (deaths, settled) = self.state(i);
            let finding = if self.held_down(i) {
                Unhealthy::HeldDown
            } else if !self.running(i) {
                Unhealthy::Down { deaths }
            } else if settled < deaths {
                Unhealthy::Unsettled { deaths, settled }
            } else {
                continue;
            };
            n += 1;
            f(self.name(i).unwrap_or("?"), finding);
        }
        n
    }
}

/// The events page, if the loader mapped one here (the assembly subscribes
/// this component).
pub fn page() -> Option<&'static EventsPage> {
    if !crate::start::has_events() {
        return None;
    }
    // SAFETY: the loader mapped the page read-only at EVENTS_VADDR for the
    // component's life (START_FLAG_EVENTS); only atomics are read from it
    // after start, and the names were written before we started.
    let p = unsafe { &*(EVENTS_VADDR as *const EventsPage) };
    (p.magic.load(Ordering::Acquire) == EVENTS_MAGIC).then_some(p)
}

/// What changed since the last [`Watcher::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Component `component` died (its `death`-th death).
    Died {
        /// Record index.
        component: usize,
        /// Its death number.
        death: u64,
    },
    /// Every peer settled death number `death` of `component`.
    Settled {
        /// Record index.
        component: usize,
        /// The settled death number.
        death: u64,
    },
    /// The supervisor holds `component` down: it will not be restarted, so
    /// what waits for its return should fail now.
    HeldDown {
        /// Record index.
        component: usize,
    },
}

/// Remembers what a component has seen of the events page.
pub struct Watcher {
    page: &'static EventsPage,
    seen: [(u64, u64); MAX_COMPONENTS],
    held_down: [bool; MAX_COMPONENTS],
}

impl Watcher {
    /// A watcher that treats the current state as seen, so a fresh
    /// incarnation does not act on deaths that happened before it started;
    /// `None` without an events page.
    pub fn new() -> Option<Watcher> {
        Some(Watcher::on(page()?))
    }

    /// A watcher of `page` (host tests: a page in memory), taking its
    /// current state as seen.
    pub fn on(page: &'static EventsPage) -> Watcher {
        let mut seen = [(0, 0); MAX_COMPONENTS];
        let mut held_down = [false; MAX_COMPONENTS];
        for (i, (s, h)) in seen.iter_mut().zip(held_down.iter_mut()).enumerate().take(page.len()) {
            *s = page.state(i);
            *h = page.held_down(i);
        }
        Watcher { page, seen, held_down }
    }

    /// The page.
    pub fn page(&self) -> &'static EventsPage {
        self.page
    }

    /// Calls `f` for every death, settlement and hold-down published since
    /// the last poll (per component: a death, then its settlement, then the
    /// hold-down).
    pub fn poll(&mut self, mut f: impl FnMut(Event)) {
        for i in 0..self.page.len() {
            let (deaths, settled) = self.page.state(i);
            let seen = &mut self.seen[i];
            if deaths > seen.0 {
                seen.0 = deaths;
                f(Event::Died { component: i, death: deaths });
            }
            if settled > seen.1 {
                seen.1 = settled;
                f(Event::Settled { component: i, death: settled });
            }
            if !self.held_down[i] && self.page.held_down(i) {
                self.held_down[i] = true;
                f(Event::HeldDown { component: i });
            }
        }
    }

    /// The deaths since the last look, as (record index, death number)
    /// (at most one per component); settlements seen meanwhile are passed
    /// over. Owned, so the caller may act on itself while going through.
    pub fn deaths(&mut self) -> core::iter::Take<core::array::IntoIter<(usize, u64), MAX_COMPONENTS>> {
        let mut died = [(0, 0); MAX_COMPONENTS];
        let mut n = 0;
        self.poll(|e| {
            if let Event::Died { component, death } = e {
                died[n] = (component, death);
                n += 1;
            }
        });
        died.into_iter().take(n)
    }
}

/// Tells the supervisor that this component no longer uses anything it got
/// from death number `death` of component `component` (record index). The
/// supervisor ignores confirmations of deaths that are not the latest or
/// from components that are not peers of the dead one. Does not wait for
/// an answer.
pub fn confirm_settled(component: usize, death: u64) {
    let slot = crate::supervisor_slot();
    if slot == 0 {
        return;
    }
    let info = sel4::MessageInfo::new(SUPERVISOR_SETTLED_LABEL, 0, 0, 2);
    sel4::send(slot, info, [component as u64, death, 0, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_counts_late_confirmations_per_record() {
        // SAFETY: the page is atomics and bytes, all valid as zeroes (as
        // the supervisor's fresh frame is).
        let page: Box<EventsPage> = unsafe { Box::new_zeroed().assume_init() };
        page.note_late(3);
        page.note_late(3);
        page.note_late(0);
        assert_eq!((page.late_confirms(3), page.late_confirms(0), page.late_confirms(1)), (2, 1, 0));
        // Past the records: ignored, read as 0.
        page.note_late(MAX_COMPONENTS);
        assert_eq!(page.late_confirms(MAX_COMPONENTS), 0);
        // Saturates instead of wrapping to 0.
        page.late_confirms[5].store(u32::MAX, Ordering::Relaxed);
        page.note_late(5);
        assert_eq!(page.late_confirms(5), u64::from(u32::MAX));
    }

    fn named(page: &EventsPage, names: &[&str]) {
        for (r, n) in page.records.iter().zip(names) {
            // SAFETY: a host page of our own, nobody reads it meanwhile.
            unsafe { core::ptr::copy_nonoverlapping(n.as_ptr(), r.name.as_ptr() as *mut u8, n.len()) };
            r.name_len.store(n.len() as u64, Ordering::Relaxed);
        }
        page.count.store(names.len() as u64, Ordering::Relaxed);
    }

    fn findings(page: &EventsPage) -> Vec<(String, Unhealthy)> {
        let mut v = Vec::new();
        let n = page.health(|name, u| v.push((name.to_string(), u)));
        assert_eq!(n, v.len());
        v
    }

    #[test]
    fn health_follows_a_death_through_restart_and_settlement() {
        // SAFETY: as above.
        let page: Box<EventsPage> = unsafe { Box::new_zeroed().assume_init() };
        named(&page, &["log", "fs", "cgi"]);
        assert_eq!(findings(&page), []);
        // cgi dies: down until rebuilt, then unsettled until its peers
        // confirm.
        page.records[2].deaths.store(1, Ordering::Relaxed);
        page.set_running(2, false);
        assert_eq!(findings(&page), [("cgi".into(), Unhealthy::Down { deaths: 1 })]);
        page.set_running(2, true);
        assert_eq!(findings(&page), [("cgi".into(), Unhealthy::Unsettled { deaths: 1, settled: 0 })]);
        page.records[2].settled.store(1, Ordering::Relaxed);
        assert_eq!(findings(&page), []);
        // Settled before the rebuild (no peer to wait for): still down.
        page.records[1].deaths.store(1, Ordering::Relaxed);
        page.records[1].settled.store(1, Ordering::Relaxed);
        page.set_running(1, false);
        assert_eq!(findings(&page), [("fs".into(), Unhealthy::Down { deaths: 1 })]);
        // Held down wins over the rest.
        page.records[1].held_down.store(1, Ordering::Relaxed);
        page.records[0].deaths.store(2, Ordering::Relaxed);
        assert_eq!(
            findings(&page),
            [("log".into(), Unhealthy::Unsettled { deaths: 2, settled: 0 }), ("fs".into(), Unhealthy::HeldDown)]
        );
        // Past the bitmap: ignored, taken as running.
        page.set_running(64, false);
        assert!(page.running(64));
    }
}
