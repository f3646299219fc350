//! The netstack component: wiring and event loop.
//!
//! * **Below:** the `link` duplex with netdrv (the `nic-api` protocol). Channel
//!   A brings received frames (aggregates of netdrv's `rx_pool`), channel B
//!   takes frames to transmit (headers in our `hdr_pool`, payload by
//!   reference) with the checksum offload request in the tag. We run above
//!   netdrv, so we set the region up at start.
//! * **Above:** the `client` duplex with the socket client (tcp_echo,
//!   httpd): channel A carries [`Event`]s to it, channel B its requests
//!   (the `socket-api` protocol, [`netstack::api`] the state machine). The
//!   client runs above us and set it up.
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
use component_runtime::time::{self, now_ms, rdtsc};
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use glue_rt::map_pool;
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{init_duplex, Aggregate, Domain, Duplex, DuplexAttach, Guard, Next, PeerId, Trust, Want};
use netstack::api::{Event, Session};
use netstack::{Config, NetStack, NicPort, TxChecksum, TxFrame};
use socket_api::{CounterPage, StackCounter as S, Values};

component_runtime::component_entry!(main);
// What the heap holds at most: socket rings within `socket_budget` (10 MiB:
// ~320 sockets, TIME-WAIT ones included); per connection a send queue of at
// most 64 aggregates and 32 held-back sends (~32 KiB at worst; idle ones
// shrink); the checksum cache, the event ring, the socket table and the
// NIC queue (~1.5 MiB). About 20 MiB at worst; the rest is slack against
// fragmentation (a failed allocation panics the component).
component_runtime::global_heap!(32 << 20);
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
const _: () = assert!(glue::link::SIZE >= nic_api::REGION_BYTES && glue::client::SIZE >= socket_api::REGION_BYTES);

/// Frames queued for netdrv beyond the ring (smoltcp stops emitting when
/// this is full; they go out as the ring drains).
const TX_QUEUE: usize = 512;
/// Aggregates a client may have waiting per connection beyond what TCP
/// takes (the peer's window plus the slack) before a send is refused. The
/// client is told `SendFull` at the first held back and stops; this covers
/// what it sent in the same round (httpd: at most 16 sends per connection).
const MAX_PENDING: usize = 32;
/// Events waiting for the client, at most (data waits in TCP beyond).
const EVENTS_CAP: usize = 1024;
/// Bytes a connection may queue beyond its peer's advertised window.
const SEND_SLACK: usize = 64 * 1024;
/// The stack's NIC: netdrv through the link region.
struct Port {
    link: Duplex<'static>,
    /// link.A (frames from netdrv) and link.B (frames to it): broken for
    /// good by a corrupt ring or a forged descriptor, never retried in a loop.
    rx_guard: Guard,
    tx_guard: Guard,
    /// Frames are held back, or our pools run low: wait for netdrv to
    /// return buffers.
    want_releases: bool,
    queue: VecDeque<TxFrame<'static>>,
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
        // netdrv hands us in a batch.
        if self.queue.len() >= TX_QUEUE + nic_api::FWD_CAP {
            return Err(frame);
        }
        self.queue.push_back(frame);
        Ok(())
    }

    fn receive(&mut self) -> Option<Aggregate<'static>> {
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
}

impl Port {
    /// Moves queued frames into netdrv's ring, as many as fit.
    /// `starving`: our pools run low, so netdrv should wake us when it
    /// returns buffers (it holds frames' buffers until they are sent).
    fn flush(&mut self, starving: bool) {
        while let Some(f) = self.queue.pop_front() {
            let tag = f.offload.tag();
            if let Err((_, agg, broke)) = self.tx_guard.send(&mut self.link.tx, f.agg, tag, 0) {
                if let Some(e) = broke {
                    error!("channel link.B from netdrv broken: {e:?}");
                }
                if self.tx_guard.broken().is_some() {
                    // Nobody will send them: their holds go back now.
                    drop(agg);
                    self.queue.clear();
                } else {
                    self.queue.push_front(TxFrame { agg, offload: f.offload });
                }
                break;
            }
            self.posted += 1;
        }
        let waiting = !self.queue.is_empty();
        if waiting {
            self.held_back += 1;
        }
        self.want_releases = waiting || starving;
    }
}

struct Node {
    d: &'static Domain,
    stack: NetStack<'static>,
    port: Port,
    session: Session<'static>,
    /// The client region: events on `client.tx`, requests on `client.rx`.
    client: Duplex<'static>,
    /// client.B (requests) and client.A (events): see `Port`'s guards.
    requests_guard: Guard,
    events_guard: Guard,
    /// netdrv asked for the frames we queued (it waits for its interrupt).
    kick_drv: bool,
    /// The one event the channel did not take (ring full or the client's
    /// quota), sent first next time; the others wait in the session.
    undelivered: Option<(u64, Option<Aggregate<'static>>)>,
    stats: &'static CounterPage,
    accepted: u64,
    polls: u64,
    wakeups: u64,
    client_requests: u64,
    client_events: u64,
    /// TSC cycles we ran (from a wake-up to blocking again), without the
    /// time the client ran inside our `event` signals (it runs above us):
    /// the stack's own CPU cost, which bench/tcp reports per MB.
    busy_cycles: u64,
    /// Cycles spent inside `event` signals this pass (the client's).
    nested_cycles: u64,
}

fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in out.iter_mut() {
        *o = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
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
    }
    // What each peer may reference in what it sends us: netdrv its received
    // frames, the client the pools it maps (never our headers or netdrv's
    // receive pool), and our own buffers only where we lent them to it.
    d.set_peer_pools_named(NETDRV, glue::attributes::LINK_REFS, glue::pools::ALL).expect("link grant list");
    d.set_peer_pools_named(CLIENT, glue::attributes::CLIENT_REFS, glue::pools::ALL).expect("client grant list");
    // A client may hold this many of our buffers (received data) at once.
    let _ = d.set_quota(CLIENT, glue::attributes::CLIENT_QUOTA as u32);

    // --- the link with netdrv: we run first, so we set it up ---
    // SAFETY: the link dataport, mapped read-write for our lifetime, shared
    // only with netdrv, which attaches only after we initialised it (it
    // runs below us).
    let link = unsafe {
        let region = rw(glue::link::VADDR, glue::link::SIZE);
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
    // Frames are not application data: never copied here (smoltcp copies
    // the payload it keeps, counted by the stack).

    // --- the client region: the client runs above us and set it up ---
    // SAFETY: the client dataport, mapped read-write for our lifetime,
    // shared with the client only; we are its side A.
    let client = unsafe {
        let region = rw(glue::client::VADDR, glue::client::SIZE);
        if Control::of(region, socket_api::GEOMETRY).map_or(0, |c| c.generation()) == 0 {
            error!("the client region is not initialised (the client must run above netstack)");
            component_runtime::exit(1)
        }
        Duplex::attach(DuplexAttach {
            domain: d,
            peer: CLIENT,
            region,
            geometry: socket_api::GEOMETRY,
            side: socket_api::STACK_SIDE,
        })
        .expect("client")
    };
    // The copy modes' send copy is the stack's own (into the socket's send
    // ring, counted there), as write(2) copies once: no copy stage here.
    // SAFETY: our counter page, mapped read-write.
    let stats = unsafe { CounterPage::at(glue::stack_stats::VADDR as *const u8) };

    // --- netdrv tells us the MAC address with its first wake-up ---
    let mac = loop {
        let m = link.control().word(nic_api::WORD_MAC).load(Ordering::Acquire);
        if m >> 63 == 1 {
            let b = m.to_le_bytes();
            break [b[0], b[1], b[2], b[3], b[4], b[5]];
        }
        glue::wake::wait();
    };
    let mut cfg = Config::new(mac, HDR_POOL);
    cfg.rx_pool = SOCK_POOL;
    let (addr, prefix) = glue::attributes::ADDRESS.split_once('/').unwrap_or((glue::attributes::ADDRESS, "24"));
    cfg.address = (parse_ipv4(addr).expect("address attribute"), prefix.parse().expect("prefix"));
    cfg.gateway = parse_ipv4(glue::attributes::GATEWAY);
    cfg.dhcp = glue::attributes::DHCP != 0;
    cfg.checksum = match glue::attributes::CHECKSUM {
        "offload" => TxChecksum::Offload,
        "software" => TxChecksum::Software,
        _ => TxChecksum::Cached,
    };
    cfg.send_window = 128 * 1024;
    // Smaller than the library's default: slirp sends a whole window at
    // once, and the RX ring must absorb the windows of every connection.
    cfg.recv_window = 32 * 1024;
    // Socket rings come from our heap (a listener of backlog 64 holds
    // 64 receive rings, each copy-mode connection a send ring as well);
    // beyond the assembly's `socket_budget`, connections wait in the backlog
    // rather than the heap running out. The rest is for the checksum cache
    // and bookkeeping (held-back sends and events are bounded too).
    cfg.socket_memory = glue::attributes::SOCKET_BUDGET as usize;
    cfg.send_slack = SEND_SLACK;
    let stack = NetStack::new(d, cfg.clone(), now_ms());
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

    let mut node = Node {
        d,
        stack,
        port: Port {
            link,
            rx_guard: Guard::new(),
            tx_guard: Guard::new(),
            want_releases: false,
            queue: VecDeque::new(),
            rx_errors: 0,
            held_back: 0,
            posted: 0,
        },
        session: Session::with_events(MAX_PENDING, EVENTS_CAP),
        client,
        requests_guard: Guard::new(),
        events_guard: Guard::new(),
        kick_drv: false,
        undelivered: None,
        stats,
        accepted: 0,
        polls: 0,
        wakeups: 0,
        client_requests: 0,
        client_events: 0,
        busy_cycles: 0,
        nested_cycles: 0,
    };
    let mut woke = rdtsc();
    loop {
        node.port.link.disarm();
        node.client.disarm();
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
    /// Handles everything there is: frames, client requests, releases;
    /// signals the client once per round that produced something for it.
    fn round(&mut self) {
        loop {
            if let (_, Some(e)) = self.port.tx_guard.poll_releases(&mut self.port.link.tx) {
                error!("channel link.B from netdrv broken: {e:?} (its releases)");
            }
            if let (_, Some(e)) = self.events_guard.poll_releases(&mut self.client.tx) {
                error!("channel client.A from client broken: {e:?} (its releases)");
            }
            loop {
                match self.requests_guard.recv(&mut self.client.rx) {
                    Next::Msg(r) => {
                        self.client_requests += 1;
                        self.session.handle(&mut self.stack, r.tag, r.agg);
                    }
                    Next::Idle | Next::Wait(_) => break,
                    Next::Refused(_) => {}
                    Next::Broke(e) => {
                        error!("channel client.B from client broken: {e:?}");
                        break;
                    }
                }
            }
            self.polls += self.session.run(&mut self.stack, now_ms(), &mut self.port) as u64;
            if let Some(s) = self.stack.take_stale() {
                warn!(
                    "pool {} buffer {} is no longer generation {:#x}: its segments withheld, the connection reset",
                    s.pool, s.buf, s.gen
                );
            }
            let mut delivered = 0;
            loop {
                let (tag, agg) = match self.undelivered.take() {
                    Some(x) => x,
                    None => match self.session.next_event() {
                        Some((ev, tag, agg)) => {
                            if let Event::Accepted { .. } = ev {
                                self.accepted += 1;
                            }
                            (tag, agg)
                        }
                        None => break,
                    },
                };
                let agg = agg.unwrap_or_else(|| Aggregate::new(self.d));
                match self.events_guard.send(&mut self.client.tx, agg, tag, 0) {
                    Ok(()) => delivered += 1,
                    Err((_, agg, broke)) => {
                        if let Some(e) = broke {
                            error!("channel client.A from client broken: {e:?}");
                        }
                        if self.events_guard.broken().is_some() {
                            // Nobody reads them: drop (releasing) the rest.
                            drop(agg);
                            continue;
                        }
                        // Ring full or the client's quota: keep it, in order.
                        self.undelivered = Some((tag, Some(agg)));
                        break;
                    }
                }
            }
            self.client_events += delivered;
            // The stack held segments back for lack of frame buffers (or
            // ring space): netdrv must wake us when it gives some back.
            let starving = self.starving() || self.stack.tx_blocked();
            self.port.flush(starving);
            // Frames (and the received frames' buffers) to netdrv: if it
            // waits for them, kick it after the round.
            self.kick_drv |= self.port.link.flush();
            if self.client.flush() {
                // The client asked for what we did (events, its buffers
                // back, its requests taken). It runs above us: it handles
                // them now and its requests are queued when this returns.
                let t = rdtsc();
                glue::event::emit();
                self.nested_cycles += rdtsc().wrapping_sub(t);
                continue;
            }
            break;
        }
    }

    /// Before blocking: asks netdrv for frames, for its returns while our
    /// pools run low, and, while frames wait for room in its ring, to say
    /// when it took some; asks the client for requests, for its returns
    /// while our pools run low or an event waits for its quota, and for
    /// room while an event waits. True if some of it already came in. A
    /// broken channel is asked for nothing.
    fn arm(&mut self) -> bool {
        let starving = self.starving();
        let (to_drv, to_client) = (self.port.tx_guard.broken().is_none(), self.events_guard.broken().is_none());
        let held = !self.port.queue.is_empty();
        let link = Want {
            data: self.port.rx_guard.broken().is_none(),
            releases: self.port.want_releases && to_drv,
            room: held && to_drv,
        };
        let waiting = self.undelivered.is_some();
        let client = Want {
            data: self.requests_guard.broken().is_none(),
            releases: (starving || waiting) && to_client,
            room: waiting && to_client,
        };
        let from_link = self.port.link.arm(link);
        let from_client = self.client.arm(client);
        from_link || from_client
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
        let ss = self.session.stats();
        let c = self.stack.checksum_cache_stats();
        let ds = self.d.stats();
        let broken = [self.port.rx_guard, self.port.tx_guard, self.requests_guard, self.events_guard]
            .iter()
            .filter(|g| g.broken().is_some())
            .count() as u64;
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
                S::ConnectionsAccepted => self.accepted,
                S::Polls => self.polls,
                S::Wakeups => self.wakeups,
                S::ClientRequests => self.client_requests,
                S::ClientEvents => self.client_events,
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
                S::Connections => self.stack.connections() as u64,
                S::HeapUsed => heap_used() as u64,
                S::SendQueuedBytes => self.stack.held_send_bytes() as u64,
                S::RxErrors => self.port.rx_errors,
                S::ChannelsBroken => broken,
                S::HdrPoolPagesInUse => self.d.pool_stats(HDR_POOL).map_or(0, |p| p.pages_in_use as u64),
                S::SockPoolPagesInUse => self.d.pool_stats(SOCK_POOL).map_or(0, |p| p.pages_in_use as u64),
            };
        }
        self.stats.publish(&v);
    }
}
