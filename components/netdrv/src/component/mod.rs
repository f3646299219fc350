//! netdrv: the NIC driver of the network path (examples/netecho/netecho.camkes):
//! the e1000 (82540EM) or a virtio-net 1.0 device, picked by the function's
//! vendor/device ID. The rings, receive, transmit and the interrupt causes
//! are the libraries' (`netdrv::e1000`, `netdrv::virtio_net`, tested on the
//! host against simulated devices; `nic.rs` gives the round one face for
//! both); this is the seL4 side: discovery, the registers and physical
//! addresses, the link with netstack, the loop. What follows describes the
//! e1000 path; the virtio one is the same in kind (README, "virtio-net").
//!
//! * **Discovery:** the root task finds the NIC (an e1000 or a virtio-net
//!   1.0 device) at boot and binds it to netdrv (`netdrv.match = "net"`):
//!   the start record names its function, the loader maps its register
//!   BAR (the e1000's BAR0, the BAR virtio's capabilities name) and routes
//!   its interrupt. netdrv checks the IDs and that BAR through pci_config,
//!   bounds every access by the BAR's real size, and switches memory
//!   decoding and bus mastering (DMA) on.
//! * **Receive:** 512 RX descriptors, each pointing at a one-page buffer of
//!   the driver's IO-Lite pool (`rx_pool`, read-only for netstack). A
//!   completed buffer is sealed at the frame's length and goes up to netstack
//!   as a one-slice aggregate, by reference. When netstack returns it, the
//!   page goes back to the pool and a fresh buffer refills the descriptor.
//! * **Transmit:** netstack's frames are aggregates (a header slice and
//!   payload slices in any mapped pool). Every slice gets its own data
//!   descriptor at the slice's physical address (every dataport is physically
//!   contiguous; the loader's start record gives the address), so payload is
//!   never copied. The frame's holds are kept until the NIC reports the
//!   descriptor done, then returned. A TCP checksum offload request becomes
//!   a context descriptor (TUCSS/TUCSO), written only when it changes.
//! * **TCP segmentation offload** (attribute `tso`, default 1): offered to
//!   netstack in the link's `WORD_OFFLOADS`; a frame of up to 64 KiB that
//!   asks for it gets a TSO context descriptor and the e1000 cuts it into
//!   segments of at most the MSS (`drv_tx_tso_frames`,
//!   `drv_tx_tso_segments`). With `tso = 0` netstack sends one frame per
//!   segment, and such a request would be rejected.
//! * **Batching:** per wake-up, every completed RX descriptor is drained and
//!   netstack is signalled once, if it asked (the link's "signal me" flags:
//!   it waits for frames, or for its buffers back while its frames wait);
//!   netstack (higher priority) runs to completion at once, then its frames
//!   are posted and TDT is written once, and RDT once after refilling
//!   (in batches: `E1000::rx_refill`).
//!   Before blocking we ask netstack for its frames, so a round of its own
//!   (a timer, its client) kicks us. Interrupt throttling (ITR, attribute
//!   `itr`) bounds the interrupt rate.
//! * **Polling fallback** (attribute `poll = 1`): for a machine whose
//!   interrupt routing does not work, the e1000's interrupts stay masked
//!   and the driver runs its pass on every signal of `tick` instead (the
//!   ticker's `to_drv`, e.g. at 500 Hz). Nothing else changes: a frame
//!   waits at most one tick in either direction. `irq` is then never
//!   waited on or acknowledged (the `irqs` counter stays 0).
//! * **Restart** (`netdrv.restartable` in the assembly): a new incarnation
//!   takes the running e1000 over (`e1000::take_over`: no reset, RCTL
//!   not written again, both rings moved to fresh pages), copies the
//!   frames the dead one's ring received but nobody took into buffers of
//!   its own (`e1000::salvage_rx`; counted), waits until
//!   netstack has set the link up afresh (it sees the death in the system
//!   events page; the region shows no MAC address any more) and attaches
//!   to it. The dead incarnation's pool pages (its rings, the buffers it
//!   had posted or lent) stay quarantined until its death is settled.
//!   Every other death in the system is confirmed at once: what we hold
//!   came through netstack, whose holds cover it.
//! * **Counters:** the `drv_stats` page (`nic_api::DrvCounter`).
//!
//! The shell (`component_runtime::shell`): `init.rs` brings the device,
//! the pools and the link up; [`Driver`]'s round here takes deaths,
//! drains RX up to netstack, posts its frames, refills and publishes;
//! `relink.rs` follows netstack's deaths; `probe.rs` finds the e1000.
use alloc::collections::VecDeque;
use component_runtime::link::{Deaths, Link, PeerEvent};
use component_runtime::shell::{self, Round, Shell, Then};
use component_runtime::start::StartInfo;
use component_runtime::time::rdtsc;
use component_runtime::{error, log};
use core::sync::atomic::Ordering;
use iolite::{Domain, Duplex, PeerId, Want};
use netdrv::e1000::{Counter, Dma, Pull, TxRequest};
use nic_api::{CounterPage, TxOffload};

mod init;
mod nic;
mod probe;
mod relink;

component_runtime::component_entry!(main);
component_runtime::global_heap!(2 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/netdrv.rs"));

/// netstack's peer slot here (one channel each way).
const NETSTACK: PeerId = PeerId(0);

// Pool ids: derived by the compiler from the assembly.
use glue::pools::RX_POOL;

const _: () = assert!(glue::link::SIZE >= nic_api::REGION_BYTES, "link dataport too small");
/// Poll on `tick` instead of taking the e1000's interrupt (see the top).
const POLL: bool = glue::attributes::POLL != 0;
/// Offer netstack TCP segmentation offload (see the top).
const TSO: bool = glue::attributes::TSO != 0;
/// Test images only (`netdrv.test_hooks = 1`): after probing, try writes
/// pci_config must refuse (see `probe::try_forbidden_writes`). A
/// constant, so the default image has no such code.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
/// A restart takes the running e1000 over (1, the default) or resets it as
/// at a first start (0: what a real 82540EM's manual asks for; on QEMU the
/// RCTL write then holds received frames for a second). README "Restart".
const TAKEOVER: bool = glue::attributes::TAKEOVER != 0;

/// netstack's instance name in the events page: the link's other end, as
/// the assembly connects it.
const NETSTACK_NAME: &str = glue::link::PEER;

/// The loader's physical addresses of our dataports.
struct StartDma(&'static StartInfo);

impl Dma for StartDma {
    fn physical(&self, vaddr: u64) -> Option<u64> {
        self.0.physical_address(vaddr)
    }
}

/// netdrv's peers (netstack, above it, over the link) and its round.
struct Driver {
    nic: nic::Nic,
    /// A device error (a virtio used ring that cannot be true) was
    /// reported (once).
    device_error_seen: bool,
    d: &'static Domain,
    /// The link with netstack: frames up on `chan.tx`, down on `chan.rx`;
    /// a ring netstack corrupts, or a descriptor that fails validation,
    /// breaks its channel for good (the link's guards, reported once)
    /// instead of being retried in a loop. Its deaths: [`relink`].
    link: Link<Duplex<'static>>,
    /// netstack's new incarnations: see [`relink::Relink`].
    relink: relink::Relink,
    /// Deaths in the system, and our own quarantine after a restart.
    deaths: Deaths,
    stats: &'static CounterPage,
    /// Incarnations before this one (0: first start).
    restarts: u64,
    /// The MAC address and offloads, published again on every link.
    mac: [u8; 6],
    /// TCP segmentation offload is offered (the device carries it out).
    tso: bool,
    /// An interrupt cause register that did not come from the device was
    /// reported (once).
    bogus_icr_seen: bool,
    /// Frames the dead incarnation left in the NIC's RX ring untaken,
    /// copied into buffers of ours (`e1000::salvage_rx`); they go up
    /// before anything the new ring received.
    salvaged: VecDeque<iolite::Aggregate<'static>>,
    /// netstack waits for us: signal it in this round (at first: it waits
    /// for the MAC address).
    wake_stack: bool,
    /// When this round started (TSC), for `drv_busy_cycles`.
    woke: u64,
    /// The last wait was one while netstack's link was down: its causes
    /// are read and dropped.
    waited_relinking: bool,
}

fn main(start: &'static StartInfo) -> ! {
    init_heap();
    let found = match probe::probe(start) {
        Ok(Some(r)) => r,
        Ok(None) => component_runtime::exit(1),
        Err(e) => {
            error!("PCI configuration space access failed: {e:?}");
            component_runtime::exit(1)
        }
    };
    shell::run(Driver::init(start, found))
}

impl Shell for Driver {
    fn notified(&mut self, round: Round) -> Then {
        if let Some(bits) = round.badge {
            self.woke_by(bits);
        }
        self.check_events();
        if !self.relink() {
            // netstack died and its new incarnation has not set the link
            // up yet: finish the dead one's frames on the NIC (its taint),
            // keep received frames in the RX ring, and wait (its kick, the
            // interrupt, the events page).
            self.nic.tx_reap();
            self.publish();
            self.waited_relinking = true;
            return Then::Wait;
        }
        self.waited_relinking = false;
        self.link.chan.disarm();
        let mut nested = 0u64;
        self.nic.tx_reap();
        self.rx_drain();
        // The received frames, and the reaped frames' buffers (netstack
        // may wait for them: a full frame pool in the copy modes): if
        // netstack asked for either, it runs now and finds them.
        if self.link.chan.flush() || core::mem::take(&mut self.wake_stack) {
            self.nic.count(Counter::Wakeups, 1);
            // netstack runs above us: it handles everything now and
            // returns here when it blocks, its frames queued on the link.
            let t = rdtsc();
            glue::wake::emit();
            nested = rdtsc().wrapping_sub(t);
        }
        if let (_, Some(e)) = self.link.tx_guard.poll_releases(&mut self.link.chan.tx) {
            error!("channel link.A from netstack broken: {e:?} (its releases)");
        }
        self.tx_post();
        let _ = self.link.chan.rx.flush_releases();
        self.nic.rx_refill();
        let now = rdtsc();
        self.nic.count(Counter::BusyCycles, now.wrapping_sub(self.woke).saturating_sub(nested));
        self.woke = now;
        self.publish();
        if self.nic.rx_ready() || !self.salvaged.is_empty() {
            return Then::Again;
        }
        Then::Wait
    }

    /// netstack's frames: it kicks us for them while we wait (not while
    /// the NIC's ring is full: its interrupt comes then). Nothing while
    /// its link is down.
    fn arm(&mut self) -> bool {
        if self.waited_relinking {
            return false;
        }
        let frames = !self.nic.tx_waiting() && self.link.rx_guard.broken().is_none();
        self.link.chan.arm(Want { data: frames, ..Want::default() })
    }

    fn wait(&mut self) -> u64 {
        if POLL {
            // netstack's kicks wait on `kick` meanwhile, unread: its
            // frames go out at the next tick.
            glue::tick::wait();
            return 0;
        }
        // The interrupt and netstack's kick share this notification
        // (`irq_notification`): each has its own badge bit.
        glue::irq::wait()
    }
}

impl Driver {
    /// After a wait: the interrupt's causes (on every tick when polling:
    /// they latch in ICR while masked), link changes published.
    fn woke_by(&mut self, bits: u64) {
        let interrupt = if POLL {
            Some(self.nic.interrupt())
        } else if bits & glue::irq::BADGE != 0 {
            // Reading ICR clears the causes and so deasserts the level
            // line before the kernel unmasks it.
            let causes = self.nic.interrupt();
            let _ = glue::irq::acknowledge();
            self.nic.count(Counter::Irqs, 1);
            Some(causes)
        } else {
            None
        };
        if self.waited_relinking {
            // The frames it announced stay in the RX ring.
            return;
        }
        self.woke = rdtsc();
        let Some(woke) = interrupt else { return };
        if let Some(up) = woke.link {
            self.link.chan.control().word(nic_api::WORD_LINK_UP).store(up as u64, Ordering::Release);
            log!("link {}", if up { "up" } else { "down" });
        }
        if let Some(icr) = woke.bogus.filter(|_| !self.bogus_icr_seen) {
            self.bogus_icr_seen = true;
            let model = self.nic.name();
            error!(
                "{model}: interrupt causes {icr:#x} have bits the model does not define: not believed (device gone?)"
            );
        }
    }

    /// Deaths in the system: netstack's runs the death protocol for the
    /// link ([`relink`]); our own settled ends our pool's quarantine;
    /// every other one is confirmed at once (what we hold came through
    /// netstack, whose holds cover it).
    fn check_events(&mut self) {
        for e in self.deaths.poll(self.d, &[self.link.index()]) {
            match self.link.see(e, self.d) {
                Some(PeerEvent::Died { death }) => self.netstack_died(death),
                Some(PeerEvent::Settled { death, released }) => {
                    log!("netstack death {death} settled: {} buffers lent to it released", released.unwrap_or(0));
                }
                Some(PeerEvent::HeldDown) | None => {}
            }
        }
        if self.link.confirm_if_clean(self.d, &self.deaths) {
            log!("netstack death {}: none of its frames on the NIC any more, confirmed", self.link.death());
        }
    }

    fn publish(&mut self) {
        if let Some(e) = self.nic.device_error().filter(|_| !self.device_error_seen) {
            self.device_error_seen = true;
            error!("virtio-net: {e}: device marked failed, nothing more sent or received");
        }
        self.nic.set_counter(Counter::BytesCopied, self.d.stats().bytes_copied);
        let in_use = self.d.pool_stats(RX_POOL).map_or(0, |p| p.pages_in_use as u64);
        self.nic.set_counter(Counter::RxPoolPagesInUse, in_use);
        self.nic.set_counter(Counter::QuarantinedPages, self.d.quarantined_pages(RX_POOL).unwrap_or(0) as u64);
        self.nic.set_counter(Counter::Restarts, self.restarts);
        // The I/O memory we hold: our pool's pages in use (rings, posted
        // receive buffers, frames netstack holds).
        let mut v = self.nic.counters().clone();
        v.set_io_bytes_held(in_use * iolite::PAGE_SIZE as u64);
        self.stats.publish(&v);
    }

    /// Hands every completed RX buffer to netstack, the salvaged frames
    /// first; returns how many.
    fn rx_drain(&mut self) -> usize {
        let (tx, guard) = (&mut self.link.chan.tx, &mut self.link.tx_guard);
        let mut salvaged = 0;
        while salvaged < nic_api::FWD_CAP {
            let Some(agg) = self.salvaged.pop_front() else { break };
            match guard.send(tx, agg, 0, 0) {
                Ok(()) => salvaged += 1,
                // Full: the rest goes on the next pass.
                Err((_, agg, None)) if guard.broken().is_none() => {
                    self.salvaged.push_front(agg);
                    break;
                }
                Err(_) => {
                    self.salvaged.clear();
                    break;
                }
            }
        }
        // netstack empties the channel every time it runs, so a batch of at
        // most FWD_CAP frames always fits; the rest waits in the ring (the
        // caller loops while descriptors are done).
        salvaged
            + self.nic.rx_drain(nic_api::FWD_CAP - salvaged, |agg| match guard.send(tx, agg, 0, 0) {
                Ok(()) => true,
                Err((_, _, broke)) => {
                    if let Some(e) = broke {
                        error!("channel link.A from netstack broken: {e:?}");
                    }
                    false
                }
            })
    }

    /// Posts netstack's queued frames; TDT is written once.
    fn tx_post(&mut self) {
        let (rx, guard) = (&mut self.link.chan.rx, &mut self.link.rx_guard);
        self.nic.tx_post(|| match guard.recv(rx) {
            iolite::Next::Msg(r) => {
                let req = match TxOffload::from_tag(r.tag) {
                    Some(TxOffload::None) => TxRequest::Plain,
                    Some(TxOffload::TcpChecksum { start, offset }) => TxRequest::TcpChecksum { start, offset },
                    Some(TxOffload::Tso(t)) => TxRequest::Tso(t),
                    // A tag netstack never makes: the frame's holds go back.
                    None => return Pull::Refused,
                };
                Pull::Frame(r.agg, req)
            }
            // Empty; or the returns of a rejected descriptor wait for ring
            // space; or the channel is broken.
            iolite::Next::Idle | iolite::Next::Wait(_) => Pull::Empty,
            iolite::Next::Refused(_) => Pull::Refused,
            iolite::Next::Broke(e) => {
                error!("channel link.B from netstack broken: {e:?}");
                Pull::Broken
            }
        })
    }
}
