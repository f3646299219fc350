//! One peer as a component sees it: its channel (a duplex, a channel end,
//! or nothing but the death watch), the channel's guards, and the peer
//! side of the death protocol (`libs/iolite/README.md` "Death",
//! [`crate::events`]).
//!
//! A [`Link`] follows the peer's record in the events page. When
//! [`Link::see`] reports a death, the component stops using the channel
//! (keeps what it had taken, cuts connections, fails requests) and lets
//! the dead incarnation go ([`Link::fail`]: what we lent it is
//! quarantined, what it granted us forgotten). The link then owes the
//! supervisor a confirmation until nothing the dead incarnation gave us
//! is in use here or downstream ([`Link::confirm_if_clean`]); once every
//! peer settled the death, what we lent comes back
//! ([`Holds::peer_settled`]). The component [`Link::reattach`]es to the
//! new incarnation's channel when it is there.
//!
//! [`Deaths`] is the component's own side: the events page, its own
//! quarantine after a restart, and confirming at once the deaths no link
//! claims (nothing of theirs reaches us but through peers we track).

use crate::events::{Event, EventsPage, Watcher, MAX_COMPONENTS};
use iolite::{Domain, Guard, PeerId, PoolId};

/// What a [`Link`] and [`Deaths`] ask of the IO-Lite domain (its holds per
/// peer); [`iolite::Domain`] is the implementation, host tests use a fake.
/// Errors (a peer or pool the domain does not know) count as 0.
pub trait Holds {
    /// `Domain::peer_failed`: buffers now quarantined for the peer.
    fn peer_failed(&self, peer: PeerId) -> u32;
    /// `Domain::peer_restarted`: its new incarnation is served.
    fn peer_restarted(&self, peer: PeerId);
    /// `Domain::peer_settled`: buffers whose quarantine ended.
    fn peer_settled(&self, peer: PeerId) -> u32;
    /// `Domain::tainted`: buffers of the dead incarnation still in use.
    fn tainted(&self, peer: PeerId) -> u32;
    /// `Domain::quarantined_pages` of one of our pools.
    fn quarantined_pages(&self, pool: PoolId) -> u32;
    /// `Domain::end_quarantine` of one of our pools: pages free again.
    fn end_quarantine(&self, pool: PoolId) -> u32;
}

impl Holds for Domain {
    fn peer_failed(&self, peer: PeerId) -> u32 {
        Domain::peer_failed(self, peer).unwrap_or(0)
    }
    fn peer_restarted(&self, peer: PeerId) {
        let _ = Domain::peer_restarted(self, peer);
    }
    fn peer_settled(&self, peer: PeerId) -> u32 {
        Domain::peer_settled(self, peer).unwrap_or(0)
    }
    fn tainted(&self, peer: PeerId) -> u32 {
        Domain::tainted(self, peer).unwrap_or(0)
    }
    fn quarantined_pages(&self, pool: PoolId) -> u32 {
        Domain::quarantined_pages(self, pool).unwrap_or(0)
    }
    fn end_quarantine(&self, pool: PoolId) -> u32 {
        Domain::end_quarantine(self, pool).unwrap_or(0)
    }
}

/// What an event of the page meant for this link's peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// It died (death number `death`): stop using its channel, then
    /// [`Link::fail`].
    Died {
        /// Its death number.
        death: u64,
    },
    /// Every peer settled its latest death; `released` buffers we had
    /// lent it are free again (`None`: the link releases only on request,
    /// [`Link::release_on_request`]; call [`Link::release`]).
    Settled {
        /// The settled death.
        death: u64,
        /// Buffers released, if released now.
        released: Option<u32>,
    },
    /// The supervisor holds it down: it does not come back.
    HeldDown,
}

/// One peer: its channel `C`, the guards of its two directions, and its
/// death watch. `C` is what the component talks to the peer through (a
/// `Duplex`, a `ChannelRx` with its `Copier`, ...), or `()` where the
/// peer's death is all there is to follow.
pub struct Link<C> {
    /// The peer's channel (replaced by [`Link::reattach`]).
    pub chan: C,
    /// The direction we receive on: a corrupt ring or a descriptor that
    /// fails validation breaks it for good (reported once).
    pub rx_guard: Guard,
    /// The direction we send on (its releases come back to us).
    pub tx_guard: Guard,
    name: &'static str,
    peer: PeerId,
    index: Option<usize>,
    death: u64,
    owed: bool,
    dead: bool,
    held_down: bool,
    on_request: bool,
    settled_unreleased: bool,
}

impl<C> Link<C> {
    /// The link with peer slot `peer`, the instance called `name` (its
    /// record in `page`, when there is one), over `chan`.
    pub fn new(name: &'static str, peer: PeerId, page: Option<&EventsPage>, chan: C) -> Link<C> {
        let index = page.and_then(|p| p.index_of(name));
        Link {
            chan,
            rx_guard: Guard::new(),
            tx_guard: Guard::new(),
            name,
            peer,
            index,
            death: 0,
            owed: false,
            dead: false,
            // Held down before we started: the watcher took that as seen.
            held_down: page.zip(index).is_some_and(|(p, i)| p.held_down(i)),
            on_request: false,
            settled_unreleased: false,
        }
    }

    /// What we lent a dead incarnation goes back only when the component
    /// says so ([`Link::release`]), not at once when the death is settled:
    /// for a peer behind which a device may still read the buffers.
    pub fn release_on_request(mut self) -> Link<C> {
        self.on_request = true;
        self
    }

    /// The peer's instance name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its peer slot in our domain.
    pub fn peer(&self) -> PeerId {
        self.peer
    }

    /// Its record in the events page (`None`: not there, or no page).
    pub fn index(&self) -> Option<usize> {
        self.index
    }

    /// Its latest death we saw (0: none).
    pub fn death(&self) -> u64 {
        self.death
    }

    /// It died and no new incarnation is attached yet.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The supervisor holds it down (seen at our start or since).
    pub fn is_held_down(&self) -> bool {
        self.held_down
    }

    /// We still owe the supervisor the confirmation of its latest death.
    pub fn owes_confirmation(&self) -> bool {
        self.owed
    }

    /// Takes an event of the page: `None` if it is not about this peer (or
    /// is a settlement of a death that is not its latest). A settlement
    /// releases what we lent the dead incarnation (unless
    /// [`Link::release_on_request`]).
    pub fn see(&mut self, e: Event, d: &dyn Holds) -> Option<PeerEvent> {
        match e {
            Event::Died { component, death } if Some(component) == self.index => {
                self.death = death;
                self.owed = true;
                self.dead = true;
                self.settled_unreleased = false;
                Some(PeerEvent::Died { death })
            }
            Event::Settled { component, death } if Some(component) == self.index && death == self.death => {
                if self.on_request {
                    self.settled_unreleased = true;
                    return Some(PeerEvent::Settled { death, released: None });
                }
                Some(PeerEvent::Settled { death, released: Some(d.peer_settled(self.peer)) })
            }
            Event::HeldDown { component } if Some(component) == self.index => {
                self.held_down = true;
                Some(PeerEvent::HeldDown)
            }
            _ => None,
        }
    }

    /// After a death, once we no longer use the channel: forgets the holds
    /// the dead incarnation granted us (what we still use of it is tainted
    /// from now on) and quarantines what we lent it; returns the buffers
    /// quarantined. Sends to it are refused until [`Link::revived`].
    pub fn fail(&mut self, d: &dyn Holds) -> u32 {
        d.peer_failed(self.peer)
    }

    /// With [`Link::release_on_request`]: once the latest death is
    /// settled, releases what we lent the dead incarnation (once); the
    /// buffers released, or `None` while the death is not settled.
    pub fn release(&mut self, d: &dyn Holds) -> Option<u32> {
        core::mem::take(&mut self.settled_unreleased).then(|| d.peer_settled(self.peer))
    }

    /// The death is settled but [`Link::release`] was not called since.
    pub fn settled_unreleased(&self) -> bool {
        self.settled_unreleased
    }

    /// Confirms the latest death to the supervisor (through `deaths`) once
    /// nothing the dead incarnation gave us is in use here or downstream;
    /// true when it confirmed just now.
    pub fn confirm_if_clean(&mut self, d: &dyn Holds, deaths: &Deaths) -> bool {
        let Some(i) = self.index.filter(|_| self.owed) else { return false };
        if d.tainted(self.peer) != 0 {
            return false;
        }
        self.owed = false;
        deaths.confirm(i, self.death);
        true
    }

    /// A new incarnation is attached: the peer slot serves again (what
    /// the dead one was lent stays quarantined until its settlement).
    pub fn revived(&mut self, d: &dyn Holds) {
        d.peer_restarted(self.peer);
        self.dead = false;
    }

    /// Attaches to a new incarnation's channel: `chan` replaces the old
    /// one (returned), the guards start healthy, and the peer is revived.
    pub fn reattach(&mut self, chan: C, d: &dyn Holds) -> C {
        self.rx_guard = Guard::new();
        self.tx_guard = Guard::new();
        self.revived(d);
        core::mem::replace(&mut self.chan, chan)
    }
}

/// Most events one [`Deaths::poll`] hands back (a death, a settlement and
/// a hold-down per record).
pub const MAX_EVENTS: usize = 3 * MAX_COMPONENTS;

/// The events [`Deaths::poll`] hands back, in page order.
pub type Events = core::iter::Take<core::array::IntoIter<Event, MAX_EVENTS>>;

/// The component's own side of the death protocol: the events page, the
/// quarantine of the pool pages a dead incarnation of ours left in use,
/// and how deaths are confirmed.
pub struct Deaths {
    watcher: Option<Watcher>,
    me: usize,
    /// Our death whose pool pages are quarantined until it is settled.
    quarantine: Option<u64>,
    pools: [Option<PoolId>; 4],
    confirm: fn(usize, u64),
}

impl Deaths {
    /// The component with record `me` (`StartInfo::instance`) and its own
    /// `pools`, on the events page the assembly subscribes it to (if any).
    /// What a dead incarnation of ours left in use there is quarantined
    /// until its death is settled (reported; without a page, for good).
    pub fn new(me: usize, d: &dyn Holds, pools: &[PoolId]) -> Deaths {
        Deaths::on(Watcher::new(), me, d, pools)
    }

    /// [`Deaths::new`] on a given watcher (host tests: a page in memory).
    pub fn on(watcher: Option<Watcher>, me: usize, d: &dyn Holds, pools: &[PoolId]) -> Deaths {
        assert!(pools.len() <= 4, "at most four pools of our own");
        let mut own = [None; 4];
        for (o, &p) in own.iter_mut().zip(pools) {
            *o = Some(p);
        }
        let quarantined: u32 = pools.iter().map(|&p| d.quarantined_pages(p)).sum();
        let page = watcher.as_ref().map(Watcher::page).filter(|p| me < p.len());
        let quarantine = match (quarantined, page) {
            (0, _) => None,
            (n, Some(p)) => {
                crate::log!("{n} pool pages of the dead incarnation quarantined until its death is settled");
                Some(p.state(me).0)
            }
            (n, None) => {
                let name = crate::component_name();
                crate::warn!("{n} pool pages quarantined for good: no system events page (set {name}.system_events)");
                None
            }
        };
        Deaths { watcher, me, quarantine, pools: own, confirm: crate::events::confirm_settled }
    }

    /// Confirms through `f` instead of telling the supervisor (a test hook
    /// that withholds confirmations, host tests that record them).
    pub fn confirming_with(mut self, f: fn(usize, u64)) -> Deaths {
        self.confirm = f;
        self
    }

    /// The events page, if we are subscribed.
    pub fn page(&self) -> Option<&'static EventsPage> {
        self.watcher.as_ref().map(Watcher::page)
    }

    /// Our own record.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The death of ours whose pool pages are still quarantined.
    pub fn quarantine(&self) -> Option<u64> {
        self.quarantine
    }

    /// Tells the supervisor we no longer use anything of death `death` of
    /// record `component`.
    pub fn confirm(&self, component: usize, death: u64) {
        (self.confirm)(component, death)
    }

    /// What changed on the page since the last poll. Deaths of records not
    /// in `claimed` (the links' [`Link::index`]) and not ours are confirmed
    /// at once; our own death settled ends our quarantine. Every event is
    /// handed back, for the links to [`Link::see`].
    pub fn poll(&mut self, d: &dyn Holds, claimed: &[Option<usize>]) -> Events {
        let mut seen = [Event::HeldDown { component: 0 }; MAX_EVENTS];
        let mut n = 0;
        let Some(w) = self.watcher.as_mut() else { return seen.into_iter().take(0) };
        let (me, confirm) = (self.me, self.confirm);
        w.poll(|e| {
            if let Event::Died { component, death } = e {
                if component != me && !claimed.contains(&Some(component)) {
                    confirm(component, death);
                }
            }
            seen[n] = e;
            n += 1;
        });
        let page = w.page();
        if let Some(death) = self.quarantine.filter(|_| me < page.len()) {
            if page.state(me).1 >= death {
                let freed: u32 = self.pools.iter().flatten().map(|&p| d.end_quarantine(p)).sum();
                crate::log!("death {death} settled: {freed} quarantined pool pages free again");
                self.quarantine = None;
            }
        }
        seen.into_iter().take(n)
    }
}

#[cfg(test)]
mod tests;
