//! The client regions we serve (`client`, and `client2` where the
//! assembly connects it) and what we know of the client at the other end
//! of each: its attachment across its incarnations and ours, its faults
//! (cut off, restarted where we may) and its deaths.

use alloc::vec::Vec;
use component_runtime::events::EventsPage;
use component_runtime::link::Link;
use component_runtime::{error, log, warn};
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{Domain, Duplex, DuplexAttach, RwRegion};
use netstack::api::{Session, SessionStats};
use netstack::client::{Client, ClientStats, Fault};
use netstack::NetStack;

use super::{glue, CLIENT, CLIENT2};

/// Aggregates a client may have waiting per connection beyond what TCP
/// takes (the peer's window plus the slack) before a send is refused: its
/// send credit, so a client that keeps to the credit is never refused,
/// however long we were kept from running.
const MAX_PENDING: usize = socket_api::SEND_CREDIT as usize;

/// Events waiting for the client, at most (data waits in TCP beyond).
const EVENTS_CAP: usize = 1024;

/// One client region we serve (`client`, and `client2` where the
/// assembly connects it) and what we know of the client at its other end.
pub(super) struct Slot {
    /// The region's dataport name, for reports (`channel client.B ...`).
    pub(super) region_name: &'static str,
    /// The client's peer slot and death watch (`Link::name`: its
    /// instance name, the region's other end in the assembly
    /// (`glue::<region>::PEERS`), where its deaths are followed, else the
    /// region's name; for reports, the events page and restart requests). Its channels are `client`'s, with
    /// their guards.
    pub(super) link: Link<()>,
    pub(super) region: RwRegion,
    pub(super) control: Control,
    /// We signal it through `event` (the first client only).
    pub(super) signalled: bool,
    /// Listening sockets its session may hold.
    pub(super) listen_budget: usize,
    /// The generation we attached to (0: not yet).
    pub(super) generation: u64,
    /// We are a restarted incarnation: the first attachment is reported.
    pub(super) announce: bool,
    /// A generation a dead incarnation of ours attached to (the region's
    /// `WORD_STACK_ATTACHED` said so at our start): never attached again,
    /// its rings are in any state; the client sets the region up afresh
    /// once it saw our death.
    pub(super) stale: u64,
    /// The generation last seen while the client was alive, and at its
    /// death: a new incarnation is attached once the region shows another
    /// one (what the dead one left there is not attached again).
    pub(super) seen: u64,
    pub(super) dead_generation: u64,
    pub(super) client: Option<Client<'static>>,
    /// The session, kept across incarnations (its counters), while no
    /// client is attached.
    pub(super) spare: Option<Session<'static>>,
    /// We ask the supervisor to restart it when it breaks a channel.
    pub(super) restart: bool,
    /// Reported a region set up again without a death (once per
    /// attachment).
    pub(super) warned: bool,
    /// What its earlier incarnations did (counters only grow).
    pub(super) retired: ClientStats,
    pub(super) broken_before: u64,
    pub(super) cut_off: u64,
    pub(super) restart_requests: u64,
}

impl Slot {
    /// The client's name, for reports.
    pub(super) fn who(&self) -> &'static str {
        self.link.name()
    }

    pub(super) fn stats(&self) -> ClientStats {
        let c = self.client.as_ref().map(|c| c.stats()).unwrap_or_default();
        let r = self.retired;
        ClientStats {
            requests: r.requests + c.requests,
            events: r.events + c.events,
            accepted: r.accepted + c.accepted,
            refused: r.refused + c.refused,
        }
    }

    pub(super) fn session_stats(&self) -> SessionStats {
        match (&self.client, &self.spare) {
            (Some(c), _) => c.session_ref().stats(),
            (None, Some(s)) => s.stats(),
            (None, None) => SessionStats::default(),
        }
    }

    /// Bytes of its client's sends held back on its connections.
    pub(super) fn held_back_bytes(&self) -> usize {
        self.client.as_ref().map_or(0, |c| c.session_ref().held_back_bytes())
    }

    pub(super) fn channels_broken(&self) -> u64 {
        self.broken_before + self.client.as_ref().map_or(0, |c| c.channels_broken() as u64)
    }

    /// Reports a channel the client broke, once.
    pub(super) fn report(&self, f: Fault) {
        error!(
            "channel {}.{} from {} broken: {:?}{}",
            self.region_name,
            f.channel.letter(),
            self.who(),
            f.why,
            if f.releases { " (its releases)" } else { "" }
        );
    }

    /// Attaches to the region when its client set it up: at first, and
    /// after the client's death when a new incarnation set it up again.
    pub(super) fn check_attach(&mut self, d: &'static Domain) {
        let g = self.control.generation();
        let dead = self.link.is_dead();
        if !dead {
            self.seen = g;
        }
        if g == 0 || g == self.generation || g == self.stale || (dead && g == self.dead_generation) {
            return;
        }
        if self.generation != 0 && !dead {
            if !core::mem::replace(&mut self.warned, true) {
                warn!(
                    "{} set its region {} up again without dying (generation {g}): not attached",
                    self.who(),
                    self.region_name
                );
            }
            return;
        }
        let again = dead;
        if dead {
            // The new incarnation is served; what the old one was lent
            // stays quarantined until its death is settled.
            self.link.revived(d);
        }
        self.generation = g;
        self.warned = false;
        // SAFETY: the region is mapped read-write for our lifetime and
        // shared with the client alone; it set it up (the generation) and
        // we are its only side A. A client that lies about it breaks only
        // its own channels (the guards).
        let attached = unsafe {
            Duplex::attach(DuplexAttach {
                domain: d,
                peer: self.link.peer(),
                region: self.region,
                geometry: socket_api::GEOMETRY,
                side: socket_api::STACK_SIDE,
            })
        };
        match attached {
            Ok(duplex) => {
                let session = self.spare.take().unwrap_or_else(|| Session::with_events(MAX_PENDING, EVENTS_CAP));
                self.client = Some(Client::new(duplex, session.with_listen_budget(self.listen_budget)));
                // Ours from now on: a later incarnation of ours must not
                // attach to these channels again (see `stale`).
                socket_api::mark_stack_attached(&self.control, g);
                if self.link.peer() != CLIENT || again || core::mem::take(&mut self.announce) {
                    log!("{} attached on {} (generation {g})", self.who(), self.region_name);
                }
            }
            Err(e) => error!("{}'s region {} (generation {g}) cannot be attached: {e:?}", self.who(), self.region_name),
        }
    }

    /// Cuts off a client that broke a channel; has it restarted where we
    /// may.
    pub(super) fn cut_off(&mut self, stack: &mut NetStack<'static>) {
        let Some(c) = self.client.as_mut() else { return };
        let Some(closed) = c.cut_off(stack) else { return };
        self.cut_off += 1;
        log!(
            "{} cut off: {} connections reset, {} ports closed, {} events dropped",
            self.who(),
            closed.connections,
            closed.ports,
            closed.events
        );
        if self.restart {
            log!("{} broke its channel: asking the supervisor to restart it", self.who());
            self.restart_requests += 1;
            if let Err(e) = component_runtime::restart(self.who()) {
                error!("restart of {} failed: {e}", self.who());
            }
        }
    }

    /// The client died (its link saw it): cut it off (if it was not),
    /// forget what it granted us and quarantine what we lent it.
    pub(super) fn died(&mut self, d: &'static Domain, stack: &mut NetStack<'static>, death: u64) {
        self.dead_generation = self.seen;
        if let Some(mut c) = self.client.take() {
            if !c.is_cut_off() {
                c.close(stack);
            }
            let s = c.stats();
            self.retired.requests += s.requests;
            self.retired.events += s.events;
            self.retired.accepted += s.accepted;
            self.retired.refused += s.refused;
            self.broken_before += c.channels_broken() as u64;
            self.spare = Some(c.into_session());
        }
        let quarantined = self.link.fail(d);
        log!("{} died (death {death}): {quarantined} buffers lent to it quarantined", self.who());
    }
}

/// The first client's region, which it set up before we run (it runs
/// above us); the component exits if it did not.
pub(super) fn client_region() -> (RwRegion, Control) {
    // SAFETY: the client dataport, mapped read-write for our lifetime,
    // shared with the client only; we are its side A.
    let region = unsafe { rw(glue::client::VADDR, glue::client::SIZE) };
    // SAFETY: the client region, a duplex region of that geometry.
    let control = unsafe { Control::of(region, socket_api::GEOMETRY).expect("client region") };
    if control.generation() == 0 {
        error!("the client region is not initialised (the client must run above netstack)");
        component_runtime::exit(1)
    }
    (region, control)
}

/// The slots of the first client (`region`) and, with `has_client2`,
/// the second, attached where their clients set them up (`page`: the
/// events page their deaths are followed on; `restarts`: ours so far).
pub(super) fn open_slots(
    d: &'static Domain,
    (region, control): (RwRegion, Control),
    has_client2: bool,
    page: Option<&EventsPage>,
    restarts: u64,
) -> Vec<Slot> {
    let slot = |region_name, link, region, control, signalled, listen_budget, restart| Slot {
        region_name,
        link,
        region,
        control,
        signalled,
        listen_budget,
        generation: 0,
        announce: restarts > 0,
        stale: 0,
        seen: 0,
        dead_generation: 0,
        client: None,
        spare: None,
        restart,
        warned: false,
        retired: ClientStats::default(),
        broken_before: 0,
        cut_off: 0,
        restart_requests: 0,
    };
    let mut slots = Vec::new();
    // The first client's deaths are followed where the assembly subscribes
    // us to system events (the client region's other end, e.g. httpd,
    // which is restartable): its connections are reset and its state
    // dropped at its death, what we lent it stays quarantined until the
    // death is settled, and its new incarnation is attached when it sets
    // the region up again.
    let link = match page {
        None => Link::new("client", CLIENT, None, ()),
        Some(_) => Link::new(glue::client::PEER, CLIENT, page, ()),
    };
    slots.push(slot("client", link, region, control, true, usize::MAX, false));
    if has_client2 {
        // The region's other end, as the assembly connects it.
        let name = glue::client2::PEERS.first().copied().unwrap_or("");
        // SAFETY: the client2 dataport (mapped: checked above), read-write
        // for our lifetime, shared with the second client only.
        let region = unsafe { rw(glue::client2::VADDR, glue::client2::SIZE) };
        // SAFETY: as for the first client's region.
        let control = unsafe { Control::of(region, socket_api::GEOMETRY).expect("client2 region") };
        let link = match name {
            "" => Link::new("client2", CLIENT2, None, ()),
            name => Link::new(name, CLIENT2, page, ()),
        };
        // Restarting it makes sense only where its death is followed here.
        let restart = link.index().is_some();
        let budget = glue::attributes::CLIENT2_LISTEN as usize;
        slots.push(slot("client2", link, region, control, false, budget, restart));
    }
    for s in &mut slots {
        // A region whose generation a dead incarnation of ours attached
        // to: its client has not set it up again yet (it will once it saw
        // our death); wait for that rather than attach to stale rings.
        if socket_api::stack_attached_before(&s.control) {
            let g = s.control.generation();
            s.stale = g;
            log!(
                "{}'s region {} (generation {g}) was our dead incarnation's: waiting for it to set it up again",
                s.who(),
                s.region_name
            );
        }
        s.check_attach(d);
    }
    slots
}
