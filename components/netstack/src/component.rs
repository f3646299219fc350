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

use alloc::boxed::Box;
use alloc::vec::Vec;
use component_runtime::events::{self, Watcher};
use component_runtime::start::StartInfo;
use component_runtime::time::{now_ms, rdtsc};
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use glue_rt::pools::rw;
use iolite::{Domain, PeerId, Want};
use netstack::api::Session;
use netstack::NetStack;
use socket_api::CounterPage;

mod config;
mod counters;
mod driver;
mod pools;
mod port;
mod slot;

use driver::{DrvLife, NETDRV_NAME};
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
    /// When this pass started (a wake-up, or the end of the last pass).
    woke: u64,
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

fn main(start: &'static StartInfo) -> ! {
    Node::init(start).run()
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
        let sys_events = Watcher::new();
        let page = sys_events.as_ref().map(Watcher::page);
        let slots = slot::open_slots(d, client, has_client2, page, restarts);
        let me = start.instance as usize;
        let own_quarantine = pools::own_quarantine(d, me, page);
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

        let drv = DrvLife { index: page.and_then(|p| p.index_of(NETDRV_NAME)), ..DrvLife::default() };
        Node {
            d,
            stack,
            port: Port::new(link_region, link),
            slots,
            sys_events,
            kick_drv: false,
            drv,
            stats,
            polls: 0,
            wakeups: 0,
            busy_cycles: 0,
            nested_cycles: 0,
            woke: rdtsc(),
            me,
            restarts,
            own_quarantine,
            started: (restarts > 0).then_some(started_ms),
        }
    }

    /// The loop: a pass after every wake-up, then block unless something
    /// came in meanwhile.
    fn run(mut self) -> ! {
        self.woke = rdtsc();
        loop {
            // One turn of the loop: progress (component_runtime::liveness),
            // also when it goes round without waiting under load.
            component_runtime::sel4::progress();
            self.notified();
            if self.arm() {
                // Something came in since we last looked: another round.
                continue;
            }
            glue::wake::wait();
            self.woke = rdtsc();
            self.wakeups += 1;
        }
    }

    /// One pass: every round there is work for, netdrv kicked for our
    /// frames, our CPU time accounted and the counters published.
    fn notified(&mut self) {
        self.port.link.disarm();
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
    }

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
                    self.netdrv_settled(death);
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
        self.confirm_netdrv();
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

    /// Whether a pool we allocate from is more than 3/4 used: then received
    /// data may be waiting in smoltcp for room, and every returned buffer
    /// matters.
    fn starving(&self) -> bool {
        [HDR_POOL, SOCK_POOL]
            .iter()
            .any(|&p| self.d.pool_stats(p).map(|s| s.pages_in_use as u64 * 4 >= s.pages as u64 * 3).unwrap_or(false))
    }
}
