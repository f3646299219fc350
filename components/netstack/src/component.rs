//! The netstack component: wiring and event loop.
//!
//! It runs on `component_runtime::shell`: [`Node::init`] builds it (our
//! pools, the link with netdrv, the client regions, the stack) and every
//! wake-up is a `notified` pass of rounds. Each peer is a
//! `component_runtime::link::Link`: netdrv's owns the link duplex
//! (`port`), each client's follows its deaths beside its region
//! (`slot`). The rest: netdrv's deaths (`driver`), the configuration
//! from the assembly (`config`), pools and grants (`pools`), counters
//! (`counters`).
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

use alloc::boxed::Box;
use alloc::vec::Vec;
use component_runtime::events::{self, Watcher};
use component_runtime::link::{Deaths, PeerEvent};
use component_runtime::shell::{self, Round, Shell, Then};
use component_runtime::start::StartInfo;
use component_runtime::time::{now_ms, rdtsc};
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use glue_rt::pools::rw;
use iolite::{Domain, PeerId, PoolId, Want};
use netstack::api::Session;
use netstack::NetStack;
use socket_api::CounterPage;

mod config;
mod counters;
mod driver;
mod pools;
mod port;
mod slot;

use pools::owned_pools;
use port::Port;
use slot::Slot;

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
use glue::pools::{HDR_POOL, SOCK_POOL};

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

/// The component: the stack between netdrv (`port`) and its clients
/// (`slots`), and what the loop keeps between rounds.
struct Node {
    d: &'static Domain,
    stack: NetStack<'static>,
    port: Port,
    /// `client`, then `client2` where the assembly connects it.
    slots: Vec<Slot>,
    /// The system events page (when the assembly subscribes us), our own
    /// quarantine after a restart (the pool pages of ours, headers the NIC
    /// may still send and received data httpd may still read, that our
    /// dead incarnation left in use, until every peer settled its death),
    /// and confirming at once the deaths no link claims.
    deaths: Deaths,
    /// netdrv asked for the frames we queued (it waits for its interrupt).
    kick_drv: bool,
    stats: &'static CounterPage,
    polls: u64,
    wakeups: u64,
    /// TSC cycles we ran (from a wake-up to blocking again), without the
    /// time the client ran inside our `event` signals (it runs above us):
    /// the stack's own CPU cost, which bench/tcp reports per MB.
    busy_cycles: u64,
    /// Cycles spent inside `event` signals this pass (the client's).
    nested_cycles: u64,
    /// When this pass started (a wake-up, or the end of the last pass).
    woke: u64,
    /// Our incarnations before this one.
    restarts: u64,
    /// After a restart: when we started (ms), until the first connection
    /// was accepted (reported: how long new connections waited for us).
    started: Option<u64>,
}

fn main(start: &'static StartInfo) -> ! {
    shell::run(Node::init(start))
}

impl Shell for Node {
    /// One pass: every round there is work for, netdrv kicked for our
    /// frames, our CPU time accounted and the counters published.
    fn notified(&mut self, _round: Round) -> Then {
        self.port.link.chan.disarm();
        for c in self.slots.iter_mut().filter_map(|s| s.client.as_mut()) {
            c.duplex().disarm();
        }
        self.round();
        config::log_dhcp(&mut self.stack);
        if NIC_KICK && core::mem::take(&mut self.kick_drv) {
            // netdrv waits for its interrupt: wake it for our frames.
            glue::kick_drv::emit();
        }
        let pass = rdtsc().wrapping_sub(self.woke);
        self.busy_cycles += pass.saturating_sub(self.nested_cycles);
        self.nested_cycles = 0;
        self.woke = rdtsc();
        self.publish();
        Then::Wait
    }

    /// Before blocking: asks netdrv for frames, for its returns while our
    /// pools run low, and, while frames wait for room in its ring, to say
    /// when it took some; asks each client for what [`Client::want`] says.
    /// True if some of it already came in (another round then). A broken
    /// channel is asked for nothing.
    fn arm(&mut self) -> bool {
        let starving = self.starving();
        let to_drv = self.port.link.tx_guard.broken().is_none();
        let held = !self.port.queue.is_empty();
        let link = Want {
            data: self.port.link.rx_guard.broken().is_none(),
            releases: self.port.want_releases && to_drv,
            room: held && to_drv,
        };
        let mut ready = self.port.link.chan.arm(link);
        // A connection whose input waits for its received pages to come
        // back is resumed by its client's releases: ask to be woken by them.
        let starving = starving || self.stack.rx_waiting_for_pages();
        for c in self.slots.iter_mut().filter_map(|s| s.client.as_mut()) {
            ready |= c.arm(starving);
        }
        ready
    }

    /// Blocks on our `wake` notification (netdrv, the client's kick, the
    /// ticker).
    fn wait(&mut self) -> u64 {
        let badge = glue::wake::wait();
        self.woke = rdtsc();
        self.wakeups += 1;
        badge
    }
}

impl Node {
    /// Maps our pools, sets the link with netdrv up (we run above it),
    /// attaches to the client regions (our clients run above us and set
    /// them up), waits for netdrv's MAC address and makes the stack.
    fn init(start: &'static StartInfo) -> Node {
        init_heap();
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        pools::map_pools(d);
        let has_client2 = pools::grant(d, start);

        // --- the link with netdrv: we run first, so we set it up ---
        // SAFETY: the link dataport, mapped read-write for our lifetime.
        let link_region = unsafe { rw(glue::link::VADDR, glue::link::SIZE) };
        let restarts = start.restarts;
        let started_ms = now_ms();
        if restarts > 0 {
            log!("restart {restarts}: waiting for netdrv to let go of the link");
            port::wait_for_released_link(link_region);
        }
        // SAFETY: the link dataport, shared only with netdrv, which
        // attaches only after we initialised it (it runs below us; after a
        // restart of ours, once it let go of the old link: above).
        let link = unsafe { port::set_up_link(d, link_region) };
        if restarts > 0 && NIC_KICK {
            // netdrv waits for the fresh link: it attaches when it runs.
            glue::kick_drv::emit();
        }
        // Frames are not application data: never copied here (smoltcp copies
        // the payload it keeps, counted by the stack).

        // --- the client regions: the clients run above us and set them up ---
        let client = slot::client_region();
        let watcher = Watcher::new();
        let page = watcher.as_ref().map(Watcher::page);
        let slots = slot::open_slots(d, client, has_client2, page, restarts);
        let owned: Vec<PoolId> = owned_pools().collect();
        let deaths = Deaths::on(watcher, start.instance as usize, d, &owned);
        // The copy modes' send copy is the stack's own (into the socket's send
        // ring, counted there), as write(2) copies once: no copy stage here.
        // SAFETY: our counter page, mapped read-write.
        let stats = unsafe { CounterPage::at(glue::stack_stats::VADDR as *const u8) };

        // --- netdrv tells us the MAC address with its first wake-up (and,
        // before it, the offloads it offers) ---
        let mac = port::wait_for_mac(&link);
        let offloads =
            nic_api::Offloads::from_word(link.control().word(nic_api::WORD_OFFLOADS).load(Ordering::Acquire));
        let cfg = config::stack_config(mac, offloads);
        let stack = NetStack::new(d, cfg.clone(), now_ms());
        config::log_config(&cfg);

        Node {
            d,
            stack,
            port: Port::new(link_region, link, page),
            slots,
            deaths,
            kick_drv: false,
            stats,
            polls: 0,
            wakeups: 0,
            busy_cycles: 0,
            nested_cycles: 0,
            woke: rdtsc(),
            restarts,
            started: (restarts > 0).then_some(started_ms),
        }
    }

    /// Handles everything there is: frames, client requests, releases,
    /// our clients' deaths; signals the client once per round that
    /// produced something for it.
    fn round(&mut self) {
        loop {
            component_runtime::sel4::progress(); // one pass: progress
            if let (_, Some(e)) = self.port.link.tx_guard.poll_releases(&mut self.port.link.chan.tx) {
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
            self.kick_drv |= self.port.link.chan.flush();
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
    /// death protocol's peer side for netdrv and our clients (their
    /// links). Every other death is confirmed at once (`Deaths::poll`):
    /// nothing we hold came from it but through the peers we count holds
    /// with (their own taint covers what we hold). Our own death settled
    /// ends our pools' quarantine there: nobody uses what the dead
    /// incarnation lent any more (the NIC sent its frames, the client
    /// dropped its data), so its pool pages are ours again.
    fn check_events(&mut self) {
        let mut claimed: Vec<Option<usize>> = self.slots.iter().map(|s| s.link.index()).collect();
        claimed.push(self.port.link.index());
        for e in self.deaths.poll(self.d, &claimed) {
            match self.port.link.see(e, self.d) {
                Some(PeerEvent::Died { death }) => self.netdrv_died(death),
                Some(PeerEvent::Settled { death, .. }) => self.netdrv_settled(death),
                // A netdrv held down never comes back (see
                // `release_drv_frames`).
                Some(PeerEvent::HeldDown) => {}
                None => self.client_event(e),
            }
        }
        for s in self.slots.iter_mut() {
            s.link.confirm_if_clean(self.d, &self.deaths);
        }
        self.port.link.confirm_if_clean(self.d, &self.deaths);
    }

    /// An event of the page about one of our clients, if it is.
    fn client_event(&mut self, e: events::Event) {
        for s in self.slots.iter_mut() {
            match s.link.see(e, self.d) {
                Some(PeerEvent::Died { death }) => s.died(self.d, &mut self.stack, death),
                Some(PeerEvent::Settled { death, released }) => {
                    let n = released.unwrap_or(0);
                    log!("{} death {death} settled: {n} buffers lent to it released", s.who());
                }
                // A held-down client's connections went with its death.
                Some(PeerEvent::HeldDown) | None => {}
            }
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
}
