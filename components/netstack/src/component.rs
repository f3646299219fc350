//! The netstack component: wiring and event loop.
//!
//! * **Below:** the `link` duplex with netdrv (the `nic-api` protocol). Channel
//!   A brings received frames (aggregates of netdrv's `rx_pool`), channel B
//!   takes frames to transmit (headers in our `hdr_pool`, payload by
//!   reference) with the offload request in the tag: a TCP checksum, or,
//!   where netdrv offers it (`nic_api::WORD_OFFLOADS`, its `tso`
//!   attribute), a TCP segment of up to 64 KiB for the e1000 to cut. We
//!   run above netdrv, so we set the region up at start.
//! * **Above:** the `client` duplex with the socket client (tcp_echo,
//!   httpd): channel A carries events to it, channel B its requests (the
//!   `socket-api` protocol, [`netstack::api`] the state machine,
//!   [`netstack::client`] one client's end). The client runs above us and
//!   set it up. An assembly may connect a second client region, `client2`
//!   (examples/hostile: a hostile test client): attached when its client
//!   set it up, never signalled (we have no event for it: it polls).
//! * **Clients that break the protocol:** a client writes its whole
//!   region, so a corrupt ring or a forged descriptor breaks that channel
//!   ([`iolite::Guard`]). We report it once (`channel client2.B from
//!   hostile broken: CorruptRing`) and cut the client off: its connections
//!   are reset, its ports closed, its requests never read again; its
//!   releases are still taken. If we subscribe to system events and the
//!   assembly lets us restart it (`may_restart`), we have it restarted; its
//!   death runs the IO-Lite death protocol here (what we lent it is
//!   quarantined until the death is settled) and its new incarnation is
//!   attached when it sets the region up again. A region set up again
//!   without a death is not attached (a live client could otherwise make us
//!   forget what it holds).
//! * **Wake-ups:** we block only on our `wake` notification (netdrv, the
//!   client's kick, the ticker), after asking each peer, through the
//!   regions' "signal me" flags, for what we wait for: frames, requests,
//!   and releases while frames are held back or our pools run low. We
//!   signal a peer only for what it asked. The client runs to completion
//!   when we signal it (`event`), so its requests are in the ring when
//!   `emit` returns; we loop until a round produces nothing it asked for.
//!   netdrv runs below us: frames we queue while it is in its own pass
//!   (it woke us) go out when we block; while it waits for its interrupt
//!   it has asked for them, and we kick it (`kick_drv`, when the assembly
//!   connects it).
//! * **Time:** the TSC, at the rate the kernel measured at boot
//!   (`component_runtime::time`). TCP timers (and DHCP's) advance whenever
//!   we run; the assemblies' ticker wakes us periodically (badge bit of its
//!   own), so a timer that expires while the network is idle fires within a
//!   tick period.
//! * **DHCP** (`dhcp = 1`): each lease obtained, renewed or lost is logged
//!   (`dhcp lease A/P gw G from S for T s`).
//! * **Counters:** the `stack_stats` page (`socket_api::StackCounter`).

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use component_runtime::events::{self, Watcher};
use component_runtime::time::{self, now_ms, rdtsc};
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use glue_rt::map_pool;
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{init_duplex, Aggregate, Domain, Duplex, DuplexAttach, Guard, Next, PeerId, RwRegion, Trust, Want};
use netstack::api::{Session, SessionStats};
use netstack::client::{Client, ClientStats, Fault};
use netstack::{Config, NetStack, NicPort, TxChecksum, TxFrame};
use outbox::Outbox;
use socket_api::{CounterPage, StackCounter as S, Values};

component_runtime::component_entry!(main);
// What the heap holds at most: socket rings within `socket_budget` (16 MiB:
// ~500 sockets, TIME-WAIT ones included); per connection a send queue of at
// most 64 aggregates and 32 held-back sends (~32 KiB at worst; idle ones
// shrink: 16 MiB for httpd's 512 connections all at their worst); the
// checksum cache, the event ring, the socket table and the NIC queue
// (~1.5 MiB). About 34 MiB at worst; the rest is slack against
// fragmentation (a failed allocation panics the component).
component_runtime::global_heap!(48 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/netstack.rs"));

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, HDR_POOL, RX_POOL, SOCK_POOL};

/// 1: signal netdrv (`kick_drv`) when it asked for frames (it waits for
/// its interrupt and this kick) and we queued some: it would otherwise
/// post them at the next interrupt (a client that sends on its own, e.g.
/// httpd answering from a CGI reply, or TCP timers run from the ticker).
/// A notification, not the e1000's interrupt-cause register: the device's
/// registers are netdrv's alone.
const NIC_KICK: bool = glue::attributes::NIC_KICK != 0;
const NETDRV: PeerId = PeerId(0);
const CLIENT: PeerId = PeerId(1);
const CLIENT2: PeerId = PeerId(2);
const _: () = assert!(
    glue::link::SIZE >= nic_api::REGION_BYTES
        && glue::client::SIZE >= socket_api::REGION_BYTES
        && glue::client2::SIZE >= socket_api::REGION_BYTES
);

/// Frames queued for netdrv beyond the ring (smoltcp stops emitting when
/// this is full; they go out as the ring drains).
const TX_QUEUE: usize = 512;
/// Aggregates a client may have waiting per connection beyond what TCP
/// takes (the peer's window plus the slack) before a send is refused: its
/// send credit, so a client that keeps to the credit is never refused,
/// however long we were kept from running.
const MAX_PENDING: usize = socket_api::SEND_CREDIT as usize;
/// Events waiting for the client, at most (data waits in TCP beyond).
const EVENTS_CAP: usize = 1024;
/// Bytes a connection may queue beyond its peer's advertised window.
const SEND_SLACK: usize = 64 * 1024;
/// A zero-copy connection's send window (see where it is set).
const ZERO_COPY_SEND_WINDOW: usize = 512 * 1024;
/// The stack's NIC: netdrv through the link region.
struct Port {
    /// The link dataport, set up again when netdrv dies.
    region: RwRegion,
    link: Duplex<'static>,
    /// Frames a dead netdrv incarnation had handed us (taken off the link
    /// before it was reset), delivered before any new one.
    inherited: VecDeque<Aggregate<'static>>,
    /// link.A (frames from netdrv) and link.B (frames to it): broken for
    /// good by a corrupt ring or a forged descriptor, never retried in a loop.
    rx_guard: Guard,
    tx_guard: Guard,
    /// Frames are held back, or our pools run low: wait for netdrv to
    /// return buffers.
    want_releases: bool,
    /// Frames waiting for room in netdrv's ring, in order; at most
    /// `TX_QUEUE` plus a batch of replies (see `transmit`).
    queue: Outbox<TxFrame<'static>>,
    rx_errors: u64,
    held_back: u64,
    /// Frames handed to netdrv (posted on the link).
    posted: u64,
}

impl NicPort<'static> for Port {
    fn can_transmit(&self) -> bool {
        self.queue.len() < TX_QUEUE
    }

    fn transmit(&mut self, frame: TxFrame<'static>) -> Result<(), TxFrame<'static>> {
        // Beyond TX_QUEUE only replies to received frames come here (the
        // stack's own segments wait on can_transmit): at most one per frame
        // netdrv hands us in a batch, which the queue's bound leaves room
        // for.
        self.queue.push(frame)
    }

    fn receive(&mut self) -> Option<Aggregate<'static>> {
        if let Some(agg) = self.inherited.pop_front() {
            return Some(agg);
        }
        self.receive_link()
    }
}

impl Port {
    /// The next frame netdrv put on the link.
    fn receive_link(&mut self) -> Option<Aggregate<'static>> {
        loop {
            match self.rx_guard.recv(&mut self.link.rx) {
                Next::Msg(r) => return Some(r.agg),
                Next::Idle | Next::Wait(_) => return None,
                // One message refused (its holds went back): the next.
                Next::Refused(_) => self.rx_errors += 1,
                Next::Broke(e) => {
                    self.rx_errors += 1;
                    error!("channel link.A from netdrv broken: {e:?}");
                    return None;
                }
            }
        }
    }

    /// Moves queued frames into netdrv's ring, as many as fit.
    /// `starving`: our pools run low, so netdrv should wake us when it
    /// returns buffers (it holds frames' buffers until they are sent).
    fn flush(&mut self, starving: bool) {
        let (tx, guard) = (&mut self.link.tx, &mut self.tx_guard);
        self.posted += self.queue.drain(|f| {
            guard.send(tx, f.agg, f.offload.tag(), 0).map_err(|(_, agg, broke)| {
                if let Some(e) = broke {
                    error!("channel link.B from netdrv broken: {e:?}");
                }
                TxFrame { agg, offload: f.offload }
            })
        }) as u64;
        if self.tx_guard.broken().is_some() {
            // Nobody will send them: their holds go back now.
            self.queue.clear();
        }
        let waiting = !self.queue.is_empty();
        if waiting {
            self.held_back += 1;
        }
        self.want_releases = waiting || starving;
    }
}

/// netdrv's instance name in the events page (its record: its deaths): the
/// link's other end, as the assembly connects it.
const NETDRV_NAME: &str = glue::link::PEER;

/// What we know of netdrv's deaths (the assembly subscribes us to system
/// events and netdrv is `restartable`): the death protocol's peer side for
/// the link.
#[derive(Default)]
struct DrvLife {
    /// Its record in the events page.
    index: Option<usize>,
    /// Its latest death, still to be confirmed (nothing it gave us in use).
    death: u64,
    unconfirmed: bool,
    /// The link was reset for a new incarnation that has not published
    /// its MAC address yet; since when (ms).
    awaiting: Option<u64>,
    restarts: u64,
    /// The latest death is settled, but the new incarnation has not yet
    /// stopped the device (it publishes its MAC address after that): the
    /// frames lent to the dead one wait, since the NIC may still read them.
    settled_unquiesced: bool,
    /// Deaths whose release had to wait so (`tcp_drv_releases_deferred`).
    releases_deferred: u64,
}

/// One client region we serve (`client`, and `client2` where the
/// assembly connects it) and what we know of the client at its other end.
struct Slot {
    /// The region's dataport name, for reports (`channel client.B ...`).
    region_name: &'static str,
    /// The client, for reports, the events page and restart requests: its
    /// instance name (the region's other end, `glue::<region>::PEERS`)
    /// where its deaths are followed, else "client".
    who: &'static str,
    peer: PeerId,
    region: RwRegion,
    control: Control,
    /// We signal it through `event` (the first client only).
    signalled: bool,
    /// Listening sockets its session may hold.
    listen_budget: usize,
    /// The generation we attached to (0: not yet).
    generation: u64,
    /// We are a restarted incarnation: the first attachment is reported.
    announce: bool,
    /// A generation a dead incarnation of ours attached to (the region's
    /// `WORD_STACK_ATTACHED` said so at our start): never attached again,
    /// its rings are in any state; the client sets the region up afresh
    /// once it saw our death.
    stale: u64,
    /// The generation last seen while the client was alive, and at its
    /// death: a new incarnation is attached once the region shows another
    /// one (what the dead one left there is not attached again).
    seen: u64,
    dead_generation: u64,
    client: Option<Client<'static>>,
    /// The session, kept across incarnations (its counters), while no
    /// client is attached.
    spare: Option<Session<'static>>,
    /// Its record in the events page (with the death protocol, and a name).
    index: Option<usize>,
    /// Its latest death, and whether it is still to be confirmed (nothing
    /// it gave us in use) and to be followed by a new attachment.
    death: u64,
    unconfirmed: bool,
    dead: bool,
    /// We ask the supervisor to restart it when it breaks a channel.
    restart: bool,
    /// Reported a region set up again without a death (once per
    /// attachment).
    warned: bool,
    /// What its earlier incarnations did (counters only grow).
    retired: ClientStats,
    broken_before: u64,
    cut_off: u64,
    restart_requests: u64,
}

impl Slot {
    fn stats(&self) -> ClientStats {
        let c = self.client.as_ref().map(|c| c.stats()).unwrap_or_default();
        let r = self.retired;
        ClientStats {
            requests: r.requests + c.requests,
            events: r.events + c.events,
            accepted: r.accepted + c.accepted,
            refused: r.refused + c.refused,
        }
    }

    fn session_stats(&self) -> SessionStats {
        match (&self.client, &self.spare) {
            (Some(c), _) => c.session_ref().stats(),
            (None, Some(s)) => s.stats(),
            (None, None) => SessionStats::default(),
        }
    }

    /// Bytes of its client's sends held back on its connections.
    fn held_back_bytes(&self) -> usize {
        self.client.as_ref().map_or(0, |c| c.session_ref().held_back_bytes())
    }

    fn channels_broken(&self) -> u64 {
        self.broken_before + self.client.as_ref().map_or(0, |c| c.channels_broken() as u64)
    }

    /// Reports a channel the client broke, once.
    fn report(&self, f: Fault) {
        error!(
            "channel {}.{} from {} broken: {:?}{}",
            self.region_name,
            f.channel.letter(),
            self.who,
            f.why,
            if f.releases { " (its releases)" } else { "" }
        );
    }

    /// Attaches to the region when its client set it up: at first, and
    /// after the client's death when a new incarnation set it up again.
    fn check_attach(&mut self, d: &'static Domain) {
        let g = self.control.generation();
        if !self.dead {
            self.seen = g;
        }
        if g == 0 || g == self.generation || g == self.stale || (self.dead && g == self.dead_generation) {
            return;
        }
        if self.generation != 0 && !self.dead {
            if !core::mem::replace(&mut self.warned, true) {
                warn!(
                    "{} set its region {} up again without dying (generation {g}): not attached",
                    self.who, self.region_name
                );
            }
            return;
        }
        let again = self.dead;
        if self.dead {
            // The new incarnation is served; what the old one was lent
            // stays quarantined until its death is settled.
            let _ = d.peer_restarted(self.peer);
            self.dead = false;
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
                peer: self.peer,
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
                if self.peer != CLIENT || again || core::mem::take(&mut self.announce) {
                    log!("{} attached on {} (generation {g})", self.who, self.region_name);
                }
            }
            Err(e) => error!("{}'s region {} (generation {g}) cannot be attached: {e:?}", self.who, self.region_name),
        }
    }

    /// Cuts off a client that broke a channel; has it restarted where we
    /// may.
    fn cut_off(&mut self, stack: &mut NetStack<'static>) {
        let Some(c) = self.client.as_mut() else { return };
        let Some(closed) = c.cut_off(stack) else { return };
        self.cut_off += 1;
        log!(
            "{} cut off: {} connections reset, {} ports closed, {} events dropped",
            self.who,
            closed.connections,
            closed.ports,
            closed.events
        );
        if self.restart {
            log!("{} broke its channel: asking the supervisor to restart it", self.who);
            self.restart_requests += 1;
            if let Err(e) = component_runtime::restart(self.who) {
                error!("restart of {} failed: {e}", self.who);
            }
        }
    }

    /// The client died: cut it off (if it was not), forget what it granted
    /// us and quarantine what we lent it.
    fn died(&mut self, d: &'static Domain, stack: &mut NetStack<'static>, death: u64) {
        self.death = death;
        self.dead = true;
        self.dead_generation = self.seen;
        self.unconfirmed = true;
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
        let quarantined = d.peer_failed(self.peer).unwrap_or(0);
        log!("{} died (death {death}): {quarantined} buffers lent to it quarantined", self.who);
    }

    /// Confirms its latest death once nothing it gave us is in use.
    fn confirm(&mut self, d: &'static Domain) {
        if let (true, Some(i)) = (self.unconfirmed, self.index) {
            if d.tainted(self.peer).unwrap_or(0) == 0 {
                self.unconfirmed = false;
                events::confirm_settled(i, self.death);
            }
        }
    }
}

struct Node {
    d: &'static Domain,
    stack: NetStack<'static>,
    port: Port,
    /// `client`, then `client2` where the assembly connects it.
    slots: Vec<Slot>,
    /// The system events page (when the assembly subscribes us): the death
    /// protocol for our clients.
    sys_events: Option<Watcher>,
    /// netdrv asked for the frames we queued (it waits for its interrupt).
    kick_drv: bool,
    /// netdrv's deaths and restarts.
    drv: DrvLife,
    stats: &'static CounterPage,
    polls: u64,
    wakeups: u64,
    /// TSC cycles we ran (from a wake-up to blocking again), without the
    /// time the client ran inside our `event` signals (it runs above us):
    /// the stack's own CPU cost, which bench/tcp reports per MB.
    busy_cycles: u64,
    /// Cycles spent inside `event` signals this pass (the client's).
    nested_cycles: u64,
    /// Our record in the events page, our incarnations before this one,
    /// and the death of ours whose pool pages (headers the NIC may still
    /// send, received data httpd may still read) stay quarantined until
    /// every peer settled it.
    me: usize,
    restarts: u64,
    own_quarantine: Option<u64>,
    /// After a restart: when we started (ms), until the first connection
    /// was accepted (reported: how long new connections waited for us).
    started: Option<u64>,
}

/// The pools we own (headers, received data, and the hand-off pool where
/// the assembly connects one): their pages a dead incarnation left in use
/// are quarantined in the next one.
fn owned_pools() -> impl Iterator<Item = iolite::PoolId> {
    [HDR_POOL, SOCK_POOL].into_iter().chain(glue::pools::BODY_POOL)
}

/// Pages of our pools quarantined after a restart of ours.
fn quarantined_pages(d: &Domain) -> u32 {
    owned_pools().map(|p| d.quarantined_pages(p).unwrap_or(0)).sum()
}

/// How long a restarted netstack waits for netdrv to let go of the link
/// its dead incarnation shared with it before setting it up anyway.
const RELINK_WAIT_MS: u64 = 1000;

/// After a restart of ours: netdrv runs below us and may be in the middle
/// of a pass over the link our dead incarnation shared with it (we may
/// have died inside its signal). Setting the link up under it would let
/// it write stale ring indices into the fresh rings (a `CorruptRing` for
/// good). So we wait until it let go: it saw our death in the events page
/// and cleared the MAC address word (then signals us). Bounded, for a
/// netdrv that does not follow our deaths.
fn wait_for_released_link(region: RwRegion) {
    // SAFETY: the link region, a duplex region of this geometry, mapped
    // for our lifetime; only its control words are read here.
    let Ok(control) = (unsafe { Control::of(region, nic_api::GEOMETRY) }) else { return };
    let since = now_ms();
    while control.generation() != 0 && control.word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 1 {
        if now_ms().saturating_sub(since) > RELINK_WAIT_MS {
            warn!("netdrv did not let go of the link within {RELINK_WAIT_MS} ms: setting it up anyway");
            return;
        }
        // netdrv's signal, or the ticker's within 200 ms.
        glue::wake::wait();
    }
    log!("netdrv let go of the link after {} ms", now_ms().saturating_sub(since));
}

/// Whether the loader mapped a dataport at `vaddr` (an optional one the
/// assembly connects).
fn mapped(start: &component_runtime::start::StartInfo, vaddr: usize) -> bool {
    start.dataports().iter().any(|r| r.vaddr == vaddr as u64)
}

fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in out.iter_mut() {
        *o = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    init_heap();
    let d: &'static Domain = Box::leak(Box::new(Domain::new()));
    // SAFETY (all pools): the dataports are mapped as the assembly declares
    // for as long as we run, and used only through this domain.
    unsafe {
        map_pool!(owned d, HDR_POOL, glue::hdr_pool, Trust::Trusted).expect("hdr pool");
        map_pool!(owned d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
        map_pool!(foreign d, RX_POOL, glue::rx_pool, Trust::Trusted).expect("rx pool");
        map_pool!(foreign d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
        // Optional pools the client forwards slices of (web server: the
        // file cache, CGI output), where the assembly connects them.
        if let Some(id) = glue::pools::FILE_POOL {
            map_pool!(foreign d, id, glue::file_pool, Trust::Trusted).expect("file pool");
        }
        if let Some(id) = glue::pools::CGI_POOL {
            // Untrusted: its producer can rewrite its buffers, so no
            // checksum is ever cached for them.
            map_pool!(foreign d, id, glue::cgi_pool, Trust::Untrusted).expect("cgi pool");
        }
        if let Some(id) = glue::pools::CGI_REQ_POOL {
            map_pool!(foreign d, id, glue::cgi_req_pool, Trust::Trusted).expect("cgi request pool");
        }
        // The hand-off pool, where the assembly connects one: received
        // data of connections the client passes on (Request::HandOff).
        if let Some(id) = glue::pools::BODY_POOL {
            map_pool!(owned d, id, glue::body_pool, Trust::Trusted).expect("body pool");
        }
    }
    // What each peer may reference in what it sends us: netdrv its received
    // frames, the client the pools it maps (never our headers or netdrv's
    // receive pool), and our own buffers only where we lent them to it.
    d.set_peer_pools_named(NETDRV, glue::attributes::LINK_REFS, glue::pools::ALL).expect("link grant list");
    d.set_peer_pools_named(CLIENT, glue::attributes::CLIENT_REFS, glue::pools::ALL).expect("client grant list");
    // A client may hold this many of our buffers (received data) at once.
    let _ = d.set_quota(CLIENT, glue::attributes::CLIENT_QUOTA as u32);
    let has_client2 = mapped(start, glue::client2::VADDR);
    if has_client2 {
        d.set_peer_pools_named(CLIENT2, glue::attributes::CLIENT2_REFS, glue::pools::ALL).expect("client2 grant list");
        let _ = d.set_quota(CLIENT2, glue::attributes::CLIENT2_QUOTA as u32);
    }

    // --- the link with netdrv: we run first, so we set it up ---
    // SAFETY: the link dataport, mapped read-write for our lifetime, shared
    // only with netdrv, which attaches only after we initialised it (it
    // runs below us).
    let link_region = unsafe { rw(glue::link::VADDR, glue::link::SIZE) };
    let restarts = start.restarts;
    let started_ms = now_ms();
    if restarts > 0 {
        log!("restart {restarts}: waiting for netdrv to let go of the link");
        wait_for_released_link(link_region);
    }
    // SAFETY: as above.
    let link = unsafe {
        let region = link_region;
        init_duplex(region, nic_api::GEOMETRY).expect("link");
        Duplex::attach(DuplexAttach {
            domain: d,
            peer: NETDRV,
            region,
            geometry: nic_api::GEOMETRY,
            side: nic_api::STACK_SIDE,
        })
        .expect("link")
    };
    if restarts > 0 && NIC_KICK {
        // netdrv waits for the fresh link: it attaches when it runs.
        glue::kick_drv::emit();
    }
    // Frames are not application data: never copied here (smoltcp copies
    // the payload it keeps, counted by the stack).

    // --- the client region: the client runs above us and set it up ---
    // SAFETY: the client dataport, mapped read-write for our lifetime,
    // shared with the client only; we are its side A.
    let region = unsafe { rw(glue::client::VADDR, glue::client::SIZE) };
    // SAFETY: the client region, a duplex region of that geometry.
    let control = unsafe { Control::of(region, socket_api::GEOMETRY).expect("client region") };
    if control.generation() == 0 {
        error!("the client region is not initialised (the client must run above netstack)");
        component_runtime::exit(1)
    }
    let sys_events = Watcher::new();
    let slot = |region_name, who, peer, region, control, signalled, listen_budget, index, restart| Slot {
        region_name,
        who,
        peer,
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
        index,
        death: 0,
        unconfirmed: false,
        dead: false,
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
    let (who, index) = match &sys_events {
        None => ("client", None),
        Some(w) => (glue::client::PEER, w.page().index_of(glue::client::PEER)),
    };
    slots.push(slot("client", who, CLIENT, region, control, true, usize::MAX, index, false));
    if has_client2 {
        // The region's other end, as the assembly connects it.
        let name = glue::client2::PEERS.first().copied().unwrap_or("");
        // SAFETY: the client2 dataport (mapped: checked above), read-write
        // for our lifetime, shared with the second client only.
        let region = unsafe { rw(glue::client2::VADDR, glue::client2::SIZE) };
        // SAFETY: as for the first client's region.
        let control = unsafe { Control::of(region, socket_api::GEOMETRY).expect("client2 region") };
        let who = if name.is_empty() { "client2" } else { name };
        let index = sys_events.as_ref().and_then(|w| w.page().index_of(name));
        // Restarting it makes sense only where its death is followed here.
        let restart = index.is_some();
        let budget = glue::attributes::CLIENT2_LISTEN as usize;
        slots.push(slot("client2", who, CLIENT2, region, control, false, budget, index, restart));
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
                s.who,
                s.region_name
            );
        }
        s.check_attach(d);
    }
    // After a restart: what our dead incarnation left in use in our pools
    // (headers on the NIC's ring, received data the client holds) stays
    // quarantined until every peer settled that death.
    let me = start.instance as usize;
    let quarantined = quarantined_pages(d);
    let own_quarantine = match (quarantined, &sys_events) {
        (0, _) => None,
        (n, Some(w)) if me < w.page().len() => {
            log!("{n} pool pages of the dead incarnation quarantined until its death is settled");
            Some(w.page().state(me).0)
        }
        (n, _) => {
            warn!("{n} pool pages quarantined for good: no system events page (set netstack.system_events)");
            None
        }
    };
    // The copy modes' send copy is the stack's own (into the socket's send
    // ring, counted there), as write(2) copies once: no copy stage here.
    // SAFETY: our counter page, mapped read-write.
    let stats = unsafe { CounterPage::at(glue::stack_stats::VADDR as *const u8) };

    // --- netdrv tells us the MAC address with its first wake-up (and,
    // before it, the offloads it offers) ---
    let mac = loop {
        let m = link.control().word(nic_api::WORD_MAC).load(Ordering::Acquire);
        if m >> 63 == 1 {
            let b = m.to_le_bytes();
            break [b[0], b[1], b[2], b[3], b[4], b[5]];
        }
        glue::wake::wait();
    };
    let offloads = nic_api::Offloads::from_word(link.control().word(nic_api::WORD_OFFLOADS).load(Ordering::Acquire));
    let mut cfg = Config::new(mac, HDR_POOL);
    cfg.rx_pool = SOCK_POOL;
    cfg.hand_off_pool = glue::pools::BODY_POOL;
    // TCP segments of up to 64 KiB, cut by the e1000 (netdrv.tso).
    cfg.tso = offloads.tso;
    let (addr, prefix) = glue::attributes::ADDRESS.split_once('/').unwrap_or((glue::attributes::ADDRESS, "24"));
    cfg.address = (parse_ipv4(addr).expect("address attribute"), prefix.parse().expect("prefix"));
    cfg.gateway = parse_ipv4(glue::attributes::GATEWAY);
    cfg.dhcp = glue::attributes::DHCP != 0;
    cfg.checksum = match glue::attributes::CHECKSUM {
        "offload" => TxChecksum::Offload,
        "software" => TxChecksum::Software,
        _ => TxChecksum::Cached,
    };
    // A zero-copy send queue holds references into the file cache, not
    // bytes of our heap: a larger window costs no memory here and lets
    // httpd fill it in fewer, larger rounds (each a wake-up of httpd, a
    // read from fs and their address-space switches). A copy mode's ring
    // is heap, sized per peer within this.
    cfg.send_window = match cfg.copy_mode {
        iolite::CopyMode::IoLite => ZERO_COPY_SEND_WINDOW,
        _ => 128 * 1024,
    };
    // Smaller than the library's default: slirp sends a whole window at
    // once, and the RX ring must absorb the windows of every connection.
    cfg.recv_window = 32 * 1024;
    // Socket rings come from our heap (a listener of backlog 64 holds
    // 64 receive rings, each copy-mode connection a send ring as well);
    // beyond the assembly's `socket_budget`, connections wait in the backlog
    // rather than the heap running out. The rest is for the checksum cache
    // and bookkeeping (held-back sends and events are bounded too).
    cfg.socket_memory = glue::attributes::SOCKET_BUDGET as usize;
    cfg.time_wait_cap = glue::attributes::TIME_WAIT_CAP as usize;
    // Bounded by the compiler (1..=65536), like the admission settings.
    cfg.rx_conn_pages = glue::attributes::RX_CONN_PAGES as usize;
    // Admission (README, "Admission"): the assembly's policy.
    cfg.syn_recv_timeout_ms = glue::attributes::SYN_RECV_TIMEOUT_MS as u64;
    cfg.half_open_budget = glue::attributes::HALF_OPEN_BUDGET as usize;
    cfg.per_address_half_open = glue::attributes::PER_ADDRESS_HALF_OPEN as usize;
    cfg.per_address_connections = glue::attributes::PER_ADDRESS_CONNECTIONS as usize;
    // Initial sequence numbers and the SYN cookies' key: not the
    // library's constant, which anyone could read (the TSC at this point
    // of the boot differs from run to run).
    cfg.random_seed ^= time::rdtsc().rotate_left(17);
    cfg.send_slack = SEND_SLACK;
    let stack = NetStack::new(d, cfg.clone(), now_ms());
    if cfg.tso {
        log!("tcp segmentation offload by the nic");
    }
    match time::measured_tsc_mhz() {
        Some(mhz) => log!("TCP timers on the TSC at {mhz} MHz (measured at boot)"),
        None => warn!("TCP timers on the TSC at an assumed {} MHz", time::tsc_mhz()),
    }
    if cfg.dhcp {
        log!("ip via dhcp");
    } else {
        let (a, p) = cfg.address;
        match cfg.gateway {
            Some(g) => log!("ip {}.{}.{}.{}/{} gw {}.{}.{}.{}", a[0], a[1], a[2], a[3], p, g[0], g[1], g[2], g[3]),
            None => log!("ip {}.{}.{}.{}/{}", a[0], a[1], a[2], a[3], p),
        }
    }

    let drv = DrvLife { index: sys_events.as_ref().and_then(|w| w.page().index_of(NETDRV_NAME)), ..DrvLife::default() };
    let mut node = Node {
        d,
        stack,
        port: Port {
            region: link_region,
            link,
            inherited: VecDeque::new(),
            rx_guard: Guard::new(),
            tx_guard: Guard::new(),
            want_releases: false,
            queue: Outbox::new(TX_QUEUE + nic_api::FWD_CAP),
            rx_errors: 0,
            held_back: 0,
            posted: 0,
        },
        slots,
        sys_events,
        kick_drv: false,
        drv,
        stats,
        polls: 0,
        wakeups: 0,
        busy_cycles: 0,
        nested_cycles: 0,
        me,
        restarts,
        own_quarantine,
        started: (restarts > 0).then_some(started_ms),
    };
    let mut woke = rdtsc();
    loop {
        // One turn of the loop: progress (component_runtime::liveness),
        // also when it goes round without waiting under load.
        component_runtime::sel4::progress();
        node.port.link.disarm();
        for c in node.slots.iter_mut().filter_map(|s| s.client.as_mut()) {
            c.duplex().disarm();
        }
        node.round();
        node.log_dhcp();
        if NIC_KICK && core::mem::take(&mut node.kick_drv) {
            // netdrv waits for its interrupt: wake it for our frames.
            glue::kick_drv::emit();
        }
        let pass = rdtsc().wrapping_sub(woke);
        node.busy_cycles += pass.saturating_sub(node.nested_cycles);
        node.nested_cycles = 0;
        woke = rdtsc();
        node.publish();
        if node.arm() {
            // Something came in since we last looked: another round.
            continue;
        }
        glue::wake::wait();
        woke = rdtsc();
        node.wakeups += 1;
    }
}

impl Node {
    /// Handles everything there is: frames, client requests, releases,
    /// our clients' deaths; signals the client once per round that
    /// produced something for it.
    fn round(&mut self) {
        loop {
            component_runtime::sel4::progress(); // one pass: progress
            if let (_, Some(e)) = self.port.tx_guard.poll_releases(&mut self.port.link.tx) {
                error!("channel link.B from netdrv broken: {e:?} (its releases)");
            }
            self.check_events();
            self.check_driver();
            for s in self.slots.iter_mut() {
                s.check_attach(self.d);
            }
            for s in self.slots.iter_mut() {
                let Some(mut c) = s.client.take() else { continue };
                c.take_requests(&mut self.stack, &mut |f| s.report(f));
                s.client = Some(c);
            }
            let mut sessions: Vec<&mut Session<'static>> =
                self.slots.iter_mut().filter_map(|s| s.client.as_mut()).map(|c| c.session()).collect();
            self.polls += netstack::api::run(&mut sessions, &mut self.stack, now_ms(), &mut self.port) as u64;
            drop(sessions);
            if let Some(t) = self.started.filter(|_| self.slots[0].stats().accepted > 0) {
                self.started = None;
                log!("first connection accepted {} ms after the restart", now_ms().saturating_sub(t));
            }
            if let Some(s) = self.stack.take_stale() {
                warn!(
                    "pool {} buffer {} is no longer generation {:#x}: its segments withheld, the connection reset",
                    s.pool, s.buf, s.gen
                );
            }
            for s in self.slots.iter_mut() {
                let Some(mut c) = s.client.take() else { continue };
                c.deliver(&mut |f| s.report(f));
                s.client = Some(c);
                s.cut_off(&mut self.stack);
            }
            // The stack held segments back for lack of frame buffers (or
            // ring space): netdrv must wake us when it gives some back.
            let starving = self.starving() || self.stack.tx_blocked();
            self.port.flush(starving);
            // Frames (and the received frames' buffers) to netdrv: if it
            // waits for them, kick it after the round.
            self.kick_drv |= self.port.link.flush();
            let mut again = false;
            for s in self.slots.iter_mut() {
                let Some(c) = s.client.as_mut() else { continue };
                // A client we cannot signal polls for what we did.
                if c.flush() && s.signalled {
                    // The client asked for what we did (events, its buffers
                    // back, its requests taken). It runs above us: it handles
                    // them now and its requests are queued when this returns.
                    let t = rdtsc();
                    glue::event::emit();
                    self.nested_cycles += rdtsc().wrapping_sub(t);
                    again = true;
                }
            }
            if again {
                continue;
            }
            break;
        }
    }

    /// Deaths and settlements of our peers (the system events page): the
    /// death protocol's peer side for our clients. Every other death is
    /// confirmed at once: nothing we hold came from it but through the
    /// peers we count holds with (their own taint covers what we hold).
    fn check_events(&mut self) {
        let Some(w) = self.sys_events.as_mut() else { return };
        let mut seen = Vec::new();
        w.poll(|e| seen.push(e));
        for e in seen {
            match e {
                events::Event::Died { component, death } if Some(component) == self.drv.index => {
                    self.netdrv_died(death);
                }
                events::Event::Settled { component, death } if Some(component) == self.drv.index => {
                    if death == self.drv.death {
                        self.drv.settled_unquiesced = true;
                        if self.drv.awaiting.is_some() {
                            self.drv.releases_deferred += 1;
                            log!("netdrv death {death} settled: what was lent to it waits until the new incarnation stopped the device");
                        }
                        self.release_drv_frames();
                    }
                }
                events::Event::Died { component, death } => {
                    match self.slots.iter_mut().find(|s| s.index == Some(component)) {
                        Some(s) => s.died(self.d, &mut self.stack, death),
                        None => events::confirm_settled(component, death),
                    }
                }
                events::Event::Settled { component, death } => {
                    if let Some(s) = self.slots.iter_mut().find(|s| s.index == Some(component) && s.death == death) {
                        let n = self.d.peer_settled(s.peer).unwrap_or(0);
                        log!("{} death {death} settled: {n} buffers lent to it released", s.who);
                    }
                }
                // A held-down client's connections went with its death.
                events::Event::HeldDown { .. } => {}
            }
        }
        for s in self.slots.iter_mut() {
            s.confirm(self.d);
        }
        // Our own death settled: nobody uses what the dead incarnation
        // lent any more (the NIC sent its frames, the client dropped its
        // data), so its pool pages are ours again.
        if let (Some(death), Some(w)) = (self.own_quarantine, self.sys_events.as_ref()) {
            if w.page().state(self.me).1 >= death {
                let n: u32 = owned_pools().map(|p| self.d.end_quarantine(p).unwrap_or(0)).sum();
                log!("death {death} settled: {n} quarantined pool pages free again");
                self.own_quarantine = None;
            }
        }
        if let (true, Some(i)) = (self.drv.unconfirmed, self.drv.index) {
            if self.d.tainted(NETDRV).unwrap_or(0) == 0 {
                self.drv.unconfirmed = false;
                events::confirm_settled(i, self.drv.death);
            }
        }
    }

    /// netdrv died: keep the frames it had handed us, forget what it
    /// granted us, quarantine what we lent it (the frames it had not sent
    /// yet: their holds go back, and so their buffers to their owners,
    /// once its death is settled), set the link up afresh for its new
    /// incarnation and serve that one at once. Our queued frames wait for
    /// it; the ones the dead one took are lost, and TCP resends them as
    /// soon as the new one is there ([`Node::check_driver`]).
    fn netdrv_died(&mut self, death: u64) {
        let mut kept = 0;
        while let Some(agg) = self.port.receive_link() {
            self.port.inherited.push_back(agg);
            kept += 1;
        }
        let quarantined = self.d.peer_failed(NETDRV).unwrap_or(0);
        // SAFETY: the link dataport, mapped read-write for our lifetime and
        // shared with netdrv alone; its dead incarnation no longer runs (the
        // supervisor stopped it before publishing the death) and a new one
        // attaches only once the region no longer shows a MAC address,
        // which this initialisation clears.
        let link = unsafe {
            init_duplex(self.port.region, nic_api::GEOMETRY).expect("link");
            Duplex::attach(DuplexAttach {
                domain: self.d,
                peer: NETDRV,
                region: self.port.region,
                geometry: nic_api::GEOMETRY,
                side: nic_api::STACK_SIDE,
            })
            .expect("link")
        };
        let generation = link.generation();
        self.port.link = link;
        self.port.rx_guard = Guard::new();
        self.port.tx_guard = Guard::new();
        let _ = self.d.peer_restarted(NETDRV);
        self.drv.death = death;
        self.drv.settled_unquiesced = false;
        self.drv.unconfirmed = true;
        self.drv.awaiting = Some(now_ms());
        self.drv.restarts += 1;
        log!(
            "netdrv died (death {death}): {quarantined} buffers lent to it quarantined, {kept} frames it received kept, link set up again (generation {generation})"
        );
    }

    /// The frames we lent a dead netdrv go back to their pools only when
    /// both its death is settled and its new incarnation has stopped the
    /// device reading the dead one's rings (`e1000::quiesce_tx`, before it
    /// publishes its MAC address): a NIC that DMAs later (real hardware;
    /// QEMU sends inside the TDT write) would otherwise read pages already
    /// reused. A netdrv held down never comes back: its frames stay out
    /// of use (the device may still hold them).
    fn release_drv_frames(&mut self) {
        if !self.drv.settled_unquiesced || self.drv.awaiting.is_some() {
            return;
        }
        self.drv.settled_unquiesced = false;
        let n = self.d.peer_settled(NETDRV).unwrap_or(0);
        log!("netdrv death {} settled: {n} buffers lent to it released", self.drv.death);
    }

    /// Once netdrv's new incarnation is attached (its MAC address is on
    /// the link again, published after it stopped the device): every
    /// connection resends what the dead one may have lost, now rather
    /// than after the RTO, and the frames lent to the dead one may go
    /// back once its death is settled too.
    fn check_driver(&mut self) {
        let Some(since) = self.drv.awaiting else { return };
        if self.port.link.control().word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 0 {
            return;
        }
        self.drv.awaiting = None;
        self.release_drv_frames();
        let n = self.stack.retransmit_now();
        self.kick_drv = true;
        log!("netdrv back after {} ms: {n} connections resend what is unacknowledged", now_ms().saturating_sub(since));
    }

    /// Before blocking: asks netdrv for frames, for its returns while our
    /// pools run low, and, while frames wait for room in its ring, to say
    /// when it took some; asks each client for what [`Client::want`] says.
    /// True if some of it already came in. A broken channel is asked for
    /// nothing.
    fn arm(&mut self) -> bool {
        let starving = self.starving();
        let to_drv = self.port.tx_guard.broken().is_none();
        let held = !self.port.queue.is_empty();
        let link = Want {
            data: self.port.rx_guard.broken().is_none(),
            releases: self.port.want_releases && to_drv,
            room: held && to_drv,
        };
        let mut ready = self.port.link.arm(link);
        // A connection whose input waits for its received pages to come
        // back is resumed by its client's releases: ask to be woken by them.
        let starving = starving || self.stack.rx_waiting_for_pages();
        for c in self.slots.iter_mut().filter_map(|s| s.client.as_mut()) {
            ready |= c.arm(starving);
        }
        ready
    }

    /// Logs a DHCP lease (or its loss) once per change: the test image
    /// with `dhcp = 1` checks the address, gateway and lease time the
    /// server gave.
    fn log_dhcp(&mut self) {
        match self.stack.take_dhcp_change() {
            Some(Some(l)) => {
                let (a, p) = l.address;
                let s = l.server;
                let gw = l.gateway.map(|g| alloc::format!("{}.{}.{}.{}", g[0], g[1], g[2], g[3]));
                let secs = l.lease_secs.map(|t| alloc::format!("{t} s"));
                log!(
                    "dhcp lease {}.{}.{}.{}/{} gw {} from {}.{}.{}.{} for {}",
                    a[0],
                    a[1],
                    a[2],
                    a[3],
                    p,
                    gw.as_deref().unwrap_or("none"),
                    s[0],
                    s[1],
                    s[2],
                    s[3],
                    secs.as_deref().unwrap_or("an unstated time")
                );
            }
            Some(None) => log!("dhcp lease lost: no address"),
            None => {}
        }
    }

    /// Whether a pool we allocate from is more than 3/4 used: then received
    /// data may be waiting in smoltcp for room, and every returned buffer
    /// matters.
    fn starving(&self) -> bool {
        [HDR_POOL, SOCK_POOL]
            .iter()
            .any(|&p| self.d.pool_stats(p).map(|s| s.pages_in_use as u64 * 4 >= s.pages as u64 * 3).unwrap_or(false))
    }

    fn publish(&mut self) {
        let s = self.stack.stats();
        let c = self.stack.checksum_cache_stats();
        let ds = self.d.stats();
        let mut ss = SessionStats::default();
        for st in self.slots.iter().map(|s| s.session_stats()) {
            ss.events_deferred += st.events_deferred;
            ss.events_dropped += st.events_dropped;
            ss.sends_refused += st.sends_refused;
            ss.send_full += st.send_full;
            ss.receive_pauses += st.receive_pauses;
            ss.listens_refused += st.listens_refused;
            ss.send_retries += st.send_retries;
        }
        let first = self.slots[0].stats();
        let second = self.slots.get(1).map(|s| s.stats()).unwrap_or_default();
        let broken = [self.port.rx_guard, self.port.tx_guard].iter().filter(|g| g.broken().is_some()).count() as u64
            + self.slots.iter().map(|s| s.channels_broken()).sum::<u64>();
        let mut v = Values::<S>::new();
        // Every counter of the page's declaration gets its value here: a new
        // one does not compile until it has a line.
        for &k in <S as socket_api::Counter>::ALL {
            v[k] = match k {
                S::CopyMode => self.stack.config().copy_mode.number(),
                S::ChecksumMode => match self.stack.config().checksum {
                    TxChecksum::Cached => 0,
                    TxChecksum::Software => 1,
                    TxChecksum::Offload => 2,
                },
                S::TxFrames => s.tx_frames,
                S::TxDropped => s.tx_dropped,
                S::RxFrames => s.rx_frames,
                S::TxPayloadByRef => s.tx_payload_by_ref,
                S::TxRetransmitted => s.tx_retransmitted,
                S::TxPayloadCopiedSocket => s.tx_payload_copied_socket,
                S::TxPayloadCopiedFrame => s.tx_payload_copied_frame,
                S::TxCopied => s.tx_copied(),
                S::TxCoalescedSegments => s.tx_coalesced_segments,
                S::RxPayload => s.rx_payload,
                S::RxPayloadCopied => s.rx_payload_copied,
                S::CsumHits => c.hits,
                S::CsumMisses => c.misses,
                S::CsumBytesCached => c.bytes_cached,
                S::CsumBytesSummed => c.bytes_summed,
                S::CsumHitRatePercent => c.hit_rate_percent(),
                S::BytesCopied => ds.bytes_copied,
                S::BytesByRefSent => ds.bytes_by_ref_sent,
                S::ConnectionsAccepted => first.accepted + second.accepted,
                S::Polls => self.polls,
                S::Wakeups => self.wakeups,
                S::ClientRequests => first.requests,
                S::ClientEvents => first.events,
                S::TxHeldBack => self.port.held_back,
                S::BusyCycles => self.busy_cycles,
                S::TxDeferred => s.tx_deferred,
                S::AcceptDeferred => s.accept_deferred,
                S::SocketBytes => self.stack.socket_memory() as u64,
                S::RejectedDescriptors => ds.rejected_descriptors,
                S::RejectedForeignPool => ds.rejected_foreign_pool,
                S::RejectedNotGranted => ds.rejected_not_granted,
                S::TxStaleWithheld => s.tx_stale_withheld,
                S::TxStaleResets => s.tx_stale_resets,
                S::TxCoalescedBytes => s.tx_coalesced_bytes,
                S::TxWithheld => s.tx_withheld,
                S::TxHeaderBytes => s.tx_header_bytes,
                S::TxNontcpFrameBytes => s.tx_nontcp_frame_bytes,
                S::RxFrameBytesFlattened => s.rx_frame_bytes_flattened,
                S::EventsDeferred => ss.events_deferred,
                S::EventsDropped => ss.events_dropped,
                S::SendsRefused => ss.sends_refused,
                S::SendFull => ss.send_full,
                S::ReceivePauses => ss.receive_pauses,
                S::Connections => self.stack.connections() as u64,
                S::HeapUsed => heap_used() as u64,
                S::SendQueuedBytes => self.stack.held_send_bytes() as u64,
                S::RxErrors => self.port.rx_errors,
                S::ChannelsBroken => broken,
                S::HdrPoolPagesInUse => self.d.pool_stats(HDR_POOL).map_or(0, |p| p.pages_in_use as u64),
                S::SockPoolPagesInUse => self.d.pool_stats(SOCK_POOL).map_or(0, |p| p.pages_in_use as u64),
                S::ListensRefused => ss.listens_refused,
                S::ClientsCutOff => self.slots.iter().map(|s| s.cut_off).sum(),
                S::ClientRestartRequests => self.slots.iter().map(|s| s.restart_requests).sum(),
                S::Client2Requests => second.requests,
                S::Client2Events => second.events,
                S::Client2Refused => second.refused,
                S::Client2Rejected => self.d.peer_rejections(CLIENT2).unwrap_or(0),
                S::BadReleases => ds.bad_releases,
                S::SendRetries => ss.send_retries,
                S::TimeWaitRecycled => s.time_wait_recycled,
                S::TxTsoFrames => s.tx_tso_frames,
                S::Tso => self.stack.config().tso as u64,
                S::TxTsoSplit => s.tx_tso_split,
                S::SendHeldBackBytes => self.slots.iter().map(Slot::held_back_bytes).sum::<usize>() as u64,
                S::SendRingBytesInUse => self.stack.send_ring_bytes() as u64,
                S::RxHandOffBytes => s.rx_hand_off,
                S::RxHandOffFallbackBytes => s.rx_hand_off_fallback,
                S::Restarts => self.restarts,
                S::QuarantinedPages => quarantined_pages(self.d) as u64,
                S::DrvReleasesDeferred => self.drv.releases_deferred,
                S::SynDroppedBacklogFull => s.syn_dropped_backlog_full,
                // Receive-side bounds in pages.
                S::RxCoalescedBytes => s.rx_coalesced_bytes,
                S::RxPausedConnPages => s.rx_paused_conn_pages,
                S::RxOpenPagesSwept => s.rx_open_pages_swept,
                S::BacklogRecycled => s.backlog_recycled,
                S::SynRecvTimeouts => s.syn_recv_timeouts,
                S::SynCookiesSent => s.syn_cookies_sent,
                S::SynCookiesValidated => s.syn_cookies_validated,
                S::SynCookiesRejected => s.syn_cookies_rejected,
                S::SynDroppedPerAddress => s.syn_dropped_per_address,
                S::DeadConnsForgotten => s.dead_conns_forgotten,
                S::DeadInputDropped => s.dead_input_dropped,
            };
        }
        self.stats.publish(&v);
    }
}
