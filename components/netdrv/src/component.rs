//! netdrv: the e1000 (82540EM) driver of the network path
//! (examples/netecho/netecho.camkes). The rings, receive, transmit and the
//! interrupt causes are the library's (`netdrv::e1000`, tested on the host
//! against a simulated device); this is the seL4 side: discovery, the
//! registers and physical addresses, the link with netstack, the loop.
//!
//! * **Discovery:** PCI configuration space through the granted ports
//!   0xCF8..0xCFF; the e1000 must be at 00:03.0 with BAR0 where the assembly
//!   maps it. Memory decoding and bus mastering (DMA) are switched on.
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
//!   takes the running e1000 over ([`e1000::take_over`]: no reset, RCTL
//!   not written again, both rings moved to fresh pages), copies the
//!   frames the dead one's ring received but nobody took into buffers of
//!   its own ([`e1000::salvage_rx`]; counted), waits until
//!   netstack has set the link up afresh (it sees the death in the system
//!   events page; the region shows no MAC address any more) and attaches
//!   to it. The dead incarnation's pool pages (its rings, the buffers it
//!   had posted or lent) stay quarantined until its death is settled.
//!   Every other death in the system is confirmed at once: what we hold
//!   came through netstack, whose holds cover it.
//! * **Counters:** the `drv_stats` page (`nic_api::DrvCounter`).
extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use component_runtime::start::StartInfo;
use component_runtime::time::rdtsc;
use component_runtime::{error, log, warn};
use core::sync::atomic::Ordering;
use e1000_regs::Mmio;
use glue_rt::map_pool;
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{Domain, Duplex, DuplexAttach, PeerId, Trust, Want};
use netdrv::e1000::{self, Counter, Dma, Interrupt, Pull, TxRequest, E1000};
use nic_api::{CounterPage, Offloads, TxOffload};

component_runtime::component_entry!(main);
component_runtime::global_heap!(2 << 20);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/netdrv.rs"));

/// The e1000, through the pci_config server (it alone holds the 0xCF8/0xCFC
/// pair, and lets netdrv touch only the function the assembly grants).
const E1000: pci::Device<pci::ThroughServer> = pci::Device::new(
    pci::ThroughServer::new(glue::pci_config::read32, glue::pci_config::write32),
    pci::Function::new(0, 3, 0),
);
const E1000_IDS: (u16, u16) = (0x8086, 0x100e);

/// netstack's peer slot here (one channel each way).
const NETSTACK: PeerId = PeerId(0);

// Pool ids: derived by the compiler from the assembly.
use glue::pools::{APP_POOL, HDR_POOL, RX_POOL, SOCK_POOL};

const _: () = assert!(glue::link::SIZE >= nic_api::REGION_BYTES, "link dataport too small");
/// Poll on `tick` instead of taking the e1000's interrupt (see the top).
const POLL: bool = glue::attributes::POLL != 0;
/// Offer netstack TCP segmentation offload (see the top).
const TSO: bool = glue::attributes::TSO != 0;
/// Test images only (`netdrv.test_hooks = 1`): after probing, try writes
/// pci_config must refuse (see `try_forbidden_writes`). A constant, so
/// the default image has no such code.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;
/// A restart takes the running e1000 over (1, the default) or resets it as
/// at a first start (0: what a real 82540EM's manual asks for; on QEMU the
/// RCTL write then holds received frames for a second). README "Restart".
const TAKEOVER: bool = glue::attributes::TAKEOVER != 0;
/// How long a new incarnation waits for netstack to set the link up again
/// before it gives up (exits).
const RELINK_WAIT_MS: u64 = 5000;

/// netstack's instance name in the events page: the link's other end, as
/// the assembly connects it.
const NETSTACK_NAME: &str = glue::link::PEER;

/// What we know of netstack's deaths: the death protocol's peer side for
/// the link, from below.
///
/// At its death we stop using the link at once (we may have been in a pass
/// over it), forget the holds it granted us (the frames on the NIC's TX
/// ring: still sent, their buffers tainted until the NIC is done with
/// them), quarantine what we lent it (received frames it had not
/// returned) and clear the MAC address word: that tells its new
/// incarnation we let go, and it sets the link up afresh. We attach to the
/// new generation and publish the offloads and the MAC address again.
/// Frames received meanwhile wait in the NIC's RX ring. We confirm the
/// death once the TX ring holds nothing of the dead incarnation.
#[derive(Default)]
struct StackLife {
    /// Its record in the events page.
    index: Option<usize>,
    /// Its latest death, and whether we still have to confirm it.
    death: u64,
    unconfirmed: bool,
    /// The link generation the dead incarnation used: while `Some`, we
    /// wait for a fresh one (and do not touch the link).
    relinking: Option<u64>,
    /// Since when (ms), for the report.
    since: u64,
    /// Times we attached to a new incarnation's link.
    relinks: u64,
}

/// The loader's physical addresses of our dataports.
struct StartDma(&'static StartInfo);

impl Dma for StartDma {
    fn physical(&self, vaddr: u64) -> Option<u64> {
        self.0.physical_address(vaddr)
    }
}

struct Driver {
    nic: E1000<'static, Mmio, StartDma>,
    d: &'static Domain,
    /// The link with netstack: frames up on `link.tx`, down on `link.rx`.
    link: Duplex<'static>,
    /// The two link channels; a ring netstack corrupts, or a descriptor
    /// that fails validation, breaks its channel for good (reported once)
    /// instead of being retried in a loop.
    to_stack_guard: iolite::Guard,
    from_stack_guard: iolite::Guard,
    stats: &'static CounterPage,
    /// Deaths in the system (the events page, when subscribed).
    events: Option<component_runtime::events::Watcher>,
    /// Our own record there, and the death we started after while our
    /// pool pages of it are quarantined.
    me: usize,
    quarantine: Option<u64>,
    /// Incarnations before this one (0: first start).
    restarts: u64,
    /// netstack's deaths (`netstack.restartable`): see [`StackLife`].
    stack: StackLife,
    /// The MAC address and offloads, published again on every link.
    mac: [u8; 6],
    /// An interrupt cause register that did not come from the device was
    /// reported (once).
    bogus_icr_seen: bool,
    /// Frames the dead incarnation left in the NIC's RX ring untaken,
    /// copied into buffers of ours ([`e1000::salvage_rx`]); they go up
    /// before anything the new ring received.
    salvaged: VecDeque<iolite::Aggregate<'static>>,
}

fn main(start: &'static StartInfo) -> ! {
    init_heap();
    let regs = match probe(start) {
        Ok(Some(r)) => r,
        Ok(None) => component_runtime::exit(1),
        Err(e) => {
            error!("PCI configuration space access failed: {e:?}");
            component_runtime::exit(1)
        }
    };
    let mut drv = Driver::new(start, regs);
    drv.run()
}

/// Finds the e1000, checks BAR0 against the assembly and enables memory
/// decoding and bus mastering.
fn probe(start: &StartInfo) -> Result<Option<Mmio>, pci::Refused> {
    match E1000.ids()? {
        Some(ids) if ids == E1000_IDS => {}
        other => {
            error!("no e1000 at {E1000} (found {other:x?}): boot with --net or --port");
            return Ok(None);
        }
    }
    let mapped = start.physical_address(glue::regs::VADDR as u64).unwrap_or(0);
    // Read only: pci_config refuses a driver's BAR writes (sizing), and the
    // assembly fixes the size (e1000.regs_size, checked by the compiler).
    match E1000.memory_bar0_base()? {
        Some(base) if base == mapped => {}
        Some(base) => {
            error!("pci {E1000}: bar0 {base:#x}, but the assembly maps {mapped:#x} (fix e1000.regs_paddr)");
            return Ok(None);
        }
        None => {
            error!("pci {E1000}: BAR0 is an I/O BAR");
            return Ok(None);
        }
    }
    let command = E1000.read(pci::REG_COMMAND)? & 0xffff;
    E1000.write(
        pci::REG_COMMAND,
        (command | pci::COMMAND_MEMORY | pci::COMMAND_BUS_MASTER) & !pci::COMMAND_INTX_DISABLE,
    )?;
    if TEST_HOOKS {
        try_forbidden_writes()?;
    }
    Ok(Some(Mmio::new(glue::regs::get())))
}

/// Writes a driver must not make (BAR0, the interrupt line, a command bit
/// it does not need), each with the value the register already has, so
/// that nothing changes even where pci_config let them through. Logs
/// whether each was refused, for the end-to-end test of pci_config's
/// policy.
fn try_forbidden_writes() -> Result<(), pci::Refused> {
    let serr = 1 << 8;
    let command = E1000.read(pci::REG_COMMAND)? & 0xffff;
    for (name, register, value) in [
        ("BAR0", pci::REG_BAR0, E1000.read(pci::REG_BAR0)?),
        ("the interrupt line", pci::REG_INTERRUPT, E1000.read(pci::REG_INTERRUPT)?),
        ("SERR# enable", pci::REG_COMMAND, command ^ serr),
    ] {
        match E1000.write(register, value) {
            Err(pci::Refused) => log!("test hook: writing {name} was refused"),
            Ok(()) => {
                error!("test hook: writing {name} was accepted");
                if register == pci::REG_COMMAND {
                    E1000.write(register, command)?;
                }
            }
        }
    }
    Ok(())
}

impl Driver {
    fn new(start: &'static StartInfo, mut regs: Mmio) -> Driver {
        // --- the device: quiet and reset, or, after a restart, taken over
        // as the dead incarnation left it ---
        let restarts = start.restarts;
        let taken_over = TAKEOVER && restarts > 0 && e1000::running(&regs);
        // A take-over stops the dead incarnation's transmitter first
        // (`e1000::quiesce_tx`): only then may netstack reuse the frames it
        // had lent it, which it does once we published our MAC address
        // below and the death is settled. A reset stops it too.
        let mut tx_abandoned = None;
        let mac = if taken_over {
            log!("restart {restarts}: taking the running e1000 over (no reset)");
            e1000::take_over(&mut regs).map(|t| {
                log!(
                    "restart {restarts}: transmitter stopped, {} descriptors the dead incarnation posted not sent",
                    t.tx_abandoned
                );
                tx_abandoned = Some(t.tx_abandoned);
                t.mac
            })
        } else {
            e1000::reset(&mut regs, sel4::yield_now)
        };
        let mac = mac.unwrap_or_else(|e| {
            error!("e1000: {e}");
            component_runtime::exit(1)
        });

        // --- IO-Lite: our RX pool, the pools frames may point into ---
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        // SAFETY (all four): the dataports are mapped as declared for as
        // long as we run, and used only through the IO-Lite domain.
        unsafe {
            map_pool!(owned d, RX_POOL, glue::rx_pool, Trust::Trusted).expect("rx pool");
            map_pool!(foreign d, HDR_POOL, glue::hdr_pool, Trust::Trusted).expect("hdr pool");
            map_pool!(foreign d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
            map_pool!(foreign d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
            // Pools of other producers whose buffers frames may carry (the
            // web server's file cache and CGI output), where the assembly
            // connects them (the `maybe` dataport is otherwise unmapped).
            if let Some(id) = glue::pools::FILE_POOL {
                map_pool!(foreign d, id, glue::file_pool, Trust::Trusted).expect("file pool");
            }
            if let Some(id) = glue::pools::CGI_POOL {
                map_pool!(foreign d, id, glue::cgi_pool, Trust::Untrusted).expect("cgi pool");
            }
            if let Some(id) = glue::pools::CGI_REQ_POOL {
                map_pool!(foreign d, id, glue::cgi_req_pool, Trust::Trusted).expect("cgi request pool");
            }
            if let Some(id) = glue::pools::BODY_POOL {
                map_pool!(foreign d, id, glue::body_pool, Trust::Trusted).expect("body pool");
            }
        }
        // Frames from netstack may point only into these pools, and into
        // our own only where we lent the buffer to netstack.
        d.set_peer_pools_named(NETSTACK, glue::attributes::LINK_REFS, glue::pools::ALL).expect("link grant list");

        // --- the link with netstack (netstack, above us, set it up) ---
        // SAFETY: the link dataport, mapped read-write for our lifetime,
        // shared only with netstack; we are its side A.
        let link = unsafe {
            let region = rw(glue::link::VADDR, glue::link::SIZE);
            if Control::of(region, nic_api::GEOMETRY).map_or(0, |c| c.generation()) == 0 {
                error!("the link with netstack is not initialised (netstack must run above netdrv)");
                component_runtime::exit(1)
            }
            if restarts > 0 {
                wait_for_fresh_link(region);
            }
            // The driver never copies: frames are DMA'd from where they are.
            Duplex::attach(DuplexAttach {
                domain: d,
                peer: NETSTACK,
                region,
                geometry: nic_api::GEOMETRY,
                side: nic_api::DRV_SIDE,
            })
            .expect("link")
        };
        // SAFETY: our counter page, mapped read-write.
        let stats = unsafe { CounterPage::at(glue::drv_stats::VADDR as *const u8) };
        // What the dead incarnation left in use in our pool (rings, posted
        // and lent buffers) stays quarantined until its death is settled.
        let quarantined = d.quarantined_pages(RX_POOL).unwrap_or(0);
        let events = component_runtime::events::Watcher::new();
        let me = start.instance as usize;
        let quarantine = match (quarantined, &events) {
            (0, _) => None,
            (n, Some(w)) => {
                log!("{n} pool pages of the dead incarnation quarantined until its death is settled");
                Some(w.page().state(me).0)
            }
            (n, None) => {
                warn!("{n} pool pages quarantined for good: no system events page (set netdrv.system_events)");
                None
            }
        };

        // --- what the dead incarnation's ring received and nobody took ---
        // Copied (counted) into fresh buffers before the new ring takes the
        // pool's free pages: the dead incarnation's stay quarantined, and
        // a frame lost here would cost its sender a retransmission timeout.
        let mut salvaged = VecDeque::new();
        if taken_over {
            let (va, size) = (glue::rx_pool::VADDR, glue::rx_pool::SIZE);
            // SAFETY: our RX pool dataport, mapped for our lifetime and
            // physically contiguous from the address the loader gives.
            let window = start
                .physical_address(va as u64)
                .map(|pa| unsafe { e1000::PoolWindow::new(va as *const u8, size, pa) });
            let (mut bytes, mut no_room) = (0, 0);
            let found = window.map_or(e1000::Salvaged::default(), |w| {
                e1000::salvage_rx(&regs, &w, |frame| match d.alloc_copy(RX_POOL, frame) {
                    Ok(agg) => {
                        bytes += frame.len();
                        salvaged.push_back(agg);
                    }
                    Err(_) => no_room += 1,
                })
            });
            if found.frames + found.dropped > 0 {
                log!(
                    "restart {restarts}: {} frames the dead incarnation had not taken salvaged ({bytes} bytes copied), {} dropped",
                    salvaged.len(),
                    found.dropped + no_room
                );
            }
        }

        // --- the rings: pages of our pool, kept for good ---
        let itr = glue::attributes::ITR as u32;
        let set_up = if taken_over { E1000::resume } else { E1000::new };
        let mut nic = set_up(regs, StartDma(start), d, RX_POOL, itr, !POLL).unwrap_or_else(|e| {
            error!("e1000: {e}");
            component_runtime::exit(1)
        });
        nic.set_tso(TSO);
        nic.count(Counter::RxSalvaged, salvaged.len() as u64);
        if let Some(n) = tx_abandoned {
            nic.count(Counter::TxQuiesced, 1);
            nic.count(Counter::TxAbandoned, n as u64);
        }
        let up = nic.link_up();
        let m = mac;
        let words = link.control();
        // Before the MAC address: netstack reads the offloads once it sees
        // a valid one.
        words.word(nic_api::WORD_OFFLOADS).store(Offloads { tso: TSO }.word(), Ordering::Release);
        words
            .word(nic_api::WORD_MAC)
            .store(1 << 63 | u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]), Ordering::Release);
        words.word(nic_api::WORD_LINK_UP).store(up as u64, Ordering::Release);
        log!(
            "e1000 at {E1000} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} link {}",
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            if up { "up" } else { "down" }
        );
        log!("tcp segmentation offload {}", if TSO { "offered" } else { "off (tso = 0)" });
        if POLL {
            log!("no interrupt: polling the rings on every tick");
        }
        let stack =
            StackLife { index: events.as_ref().and_then(|w| w.page().index_of(NETSTACK_NAME)), ..StackLife::default() };
        Driver {
            nic,
            d,
            link,
            to_stack_guard: iolite::Guard::new(),
            from_stack_guard: iolite::Guard::new(),
            stats,
            events,
            me,
            quarantine,
            restarts,
            stack,
            mac,
            bogus_icr_seen: false,
            salvaged,
        }
    }

    /// netstack died: let go of the link (see [`StackLife`]).
    fn netstack_died(&mut self, death: u64) {
        let quarantined = self.d.peer_failed(NETSTACK).unwrap_or(0);
        let words = self.link.control();
        words.word(nic_api::WORD_MAC).store(0, Ordering::Release);
        self.stack.death = death;
        self.stack.unconfirmed = true;
        self.stack.since = component_runtime::time::now_ms();
        self.stack.relinking = Some(self.link.generation());
        log!(
            "netstack died (death {death}): {quarantined} buffers lent to it quarantined, {} of its frames still on the NIC; link released",
            self.d.tainted(NETSTACK).unwrap_or(0)
        );
        // Its new incarnation may wait for that: it runs above us and sets
        // the link up before this returns.
        glue::wake::emit();
    }

    /// While we wait for netstack's new incarnation: attaches to the link
    /// once it set it up again (a new generation). True once attached (or
    /// when nothing is awaited).
    fn relink(&mut self) -> bool {
        let Some(old) = self.stack.relinking else { return true };
        let control = self.link.control();
        let g = control.generation();
        if g == 0 || g == old {
            return false;
        }
        // SAFETY: the link dataport, mapped read-write for our lifetime,
        // shared only with netstack, whose new incarnation set it up (a new
        // generation) and waits for our MAC address before using it; we
        // are its side A.
        let attached = unsafe {
            Duplex::attach(DuplexAttach {
                domain: self.d,
                peer: NETSTACK,
                region: rw(glue::link::VADDR, glue::link::SIZE),
                geometry: nic_api::GEOMETRY,
                side: nic_api::DRV_SIDE,
            })
        };
        let link = match attached {
            Ok(l) => l,
            Err(e) => {
                error!("netstack's new link (generation {g}) cannot be attached: {e:?}");
                self.stack.relinking = Some(g);
                return false;
            }
        };
        self.link = link;
        self.to_stack_guard = iolite::Guard::new();
        self.from_stack_guard = iolite::Guard::new();
        let _ = self.d.peer_restarted(NETSTACK);
        self.stack.relinking = None;
        self.stack.relinks += 1;
        self.publish_link();
        // It waits for the MAC address: it runs now, above us.
        glue::wake::emit();
        log!(
            "netstack's new incarnation attached after {} ms (link generation {g})",
            component_runtime::time::now_ms().saturating_sub(self.stack.since)
        );
        true
    }

    /// The protocol words netstack reads: the offloads, then the MAC
    /// address (which says they are valid), and the link state.
    fn publish_link(&mut self) {
        let m = self.mac;
        let words = self.link.control();
        // Before the MAC address: netstack reads the offloads once it sees
        // a valid one.
        words.word(nic_api::WORD_OFFLOADS).store(Offloads { tso: TSO }.word(), Ordering::Release);
        words
            .word(nic_api::WORD_MAC)
            .store(1 << 63 | u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]), Ordering::Release);
        words.word(nic_api::WORD_LINK_UP).store(self.nic.link_up() as u64, Ordering::Release);
    }

    /// Deaths in the system: netstack's runs the death protocol for the
    /// link ([`StackLife`]); our own settled ends our pool's quarantine;
    /// every other one is confirmed at once (what we hold came through
    /// netstack, whose holds cover it).
    fn check_events(&mut self) {
        let Some(w) = self.events.as_mut() else { return };
        let (me, d) = (self.me, self.d);
        let stack = self.stack.index;
        let mut settled_own = None;
        let mut stack_died = None;
        let mut stack_settled = None;
        w.poll(|e| match e {
            component_runtime::events::Event::Died { component, death } if Some(component) == stack => {
                stack_died = Some(death);
            }
            component_runtime::events::Event::Settled { component, death } if Some(component) == stack => {
                stack_settled = Some(death);
            }
            component_runtime::events::Event::Died { component, death } if component != me => {
                component_runtime::events::confirm_settled(component, death);
            }
            component_runtime::events::Event::Settled { component, death } if component == me => {
                settled_own = Some(death);
            }
            _ => {}
        });
        if let Some(death) = stack_died {
            self.netstack_died(death);
        }
        if let Some(death) = stack_settled.filter(|&s| s == self.stack.death) {
            let n = d.peer_settled(NETSTACK).unwrap_or(0);
            log!("netstack death {death} settled: {n} buffers lent to it released");
        }
        if let (true, Some(i)) = (self.stack.unconfirmed, stack) {
            if d.tainted(NETSTACK).unwrap_or(0) == 0 {
                self.stack.unconfirmed = false;
                log!("netstack death {}: none of its frames on the NIC any more, confirmed", self.stack.death);
                component_runtime::events::confirm_settled(i, self.stack.death);
            }
        }
        if let (Some(s), Some(q)) = (settled_own, self.quarantine) {
            if s >= q {
                let n = d.end_quarantine(RX_POOL).unwrap_or(0);
                log!("death {q} settled: {n} quarantined pool pages free again");
                self.quarantine = None;
            }
        }
    }

    fn run(&mut self) -> ! {
        // The kernel masks a level-triggered line until acknowledged; an
        // earlier incarnation may have left it masked.
        if !POLL {
            let _ = glue::irq::acknowledge();
        }
        let mut wake_stack = true; // netstack waits for the MAC address
        let mut woke = rdtsc();
        loop {
            // One turn of the loop: progress (component_runtime::liveness),
            // also when it goes round without waiting under load.
            component_runtime::sel4::progress();
            self.check_events();
            if !self.relink() {
                // netstack died and its new incarnation has not set the
                // link up yet: finish the dead one's frames on the NIC
                // (its taint), keep received frames in the RX ring, and
                // wait (its kick, the interrupt, the events page).
                self.nic.tx_reap();
                self.publish();
                self.wait_while_relinking();
                continue;
            }
            self.link.disarm();
            let mut nested = 0u64;
            self.nic.tx_reap();
            self.rx_drain();
            // The received frames, and the reaped frames' buffers (netstack
            // may wait for them: a full frame pool in the copy modes): if
            // netstack asked for either, it runs now and finds them.
            if self.link.flush() || core::mem::take(&mut wake_stack) {
                self.nic.count(Counter::Wakeups, 1);
                // netstack runs above us: it handles everything now and
                // returns here when it blocks, its frames queued on the link.
                let t = rdtsc();
                glue::wake::emit();
                nested = rdtsc().wrapping_sub(t);
            }
            if let (_, Some(e)) = self.to_stack_guard.poll_releases(&mut self.link.tx) {
                error!("channel link.A from netstack broken: {e:?} (its releases)");
            }
            self.tx_post();
            let _ = self.link.rx.flush_releases();
            self.nic.rx_refill();
            let now = rdtsc();
            self.nic.count(Counter::BusyCycles, now.wrapping_sub(woke).saturating_sub(nested));
            woke = now;
            self.publish();
            if self.nic.rx_ready() || !self.salvaged.is_empty() {
                continue;
            }
            // netstack's frames: it kicks us for them while we wait (not
            // while the NIC's ring is full: its interrupt comes then).
            let frames = !self.nic.tx_waiting() && self.from_stack_guard.broken().is_none();
            if self.link.arm(Want { data: frames, ..Want::default() }) {
                continue;
            }
            let interrupt = if POLL {
                // netstack's kicks wait on `kick` meanwhile, unread: its
                // frames go out at the next tick.
                glue::tick::wait();
                // The causes latch in ICR while masked: read for link changes.
                Some(self.nic.interrupt())
            } else {
                // The interrupt and netstack's kick share this notification
                // (`irq_notification`): each has its own badge bit.
                let bits = glue::irq::wait();
                if bits & glue::irq::BADGE != 0 {
                    // Reading ICR clears the causes and so deasserts the
                    // level line before the kernel unmasks it.
                    let causes = self.nic.interrupt();
                    let _ = glue::irq::acknowledge();
                    self.nic.count(Counter::Irqs, 1);
                    Some(causes)
                } else {
                    None
                }
            };
            woke = rdtsc();
            match interrupt {
                Some(Interrupt::Causes { link: Some(up), .. }) => {
                    self.link.control().word(nic_api::WORD_LINK_UP).store(up as u64, Ordering::Release);
                    log!("link {}", if up { "up" } else { "down" });
                }
                Some(Interrupt::NotTheDevice(icr)) if !self.bogus_icr_seen => {
                    self.bogus_icr_seen = true;
                    error!("e1000: interrupt causes {icr:#x} have reserved bits set: not believed (device gone?)");
                }
                _ => {}
            }
        }
    }

    /// Blocks until something may have changed while netstack's link is
    /// down: the interrupt is acknowledged (its causes read), the frames
    /// it announced stay in the RX ring.
    fn wait_while_relinking(&mut self) {
        if POLL {
            glue::tick::wait();
            let _ = self.nic.interrupt();
            return;
        }
        let bits = glue::irq::wait();
        if bits & glue::irq::BADGE != 0 {
            let _ = self.nic.interrupt();
            let _ = glue::irq::acknowledge();
            self.nic.count(Counter::Irqs, 1);
        }
    }

    fn publish(&mut self) {
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
        let (tx, guard) = (&mut self.link.tx, &mut self.to_stack_guard);
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
        let (rx, guard) = (&mut self.link.rx, &mut self.from_stack_guard);
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

/// After a restart: waits until netstack has set the link up for us (it
/// saw our death): the region no longer shows the dead incarnation's MAC
/// address. netstack runs above us, so this normally returns at once.
fn wait_for_fresh_link(region: iolite::RwRegion) {
    // SAFETY: the link region, a duplex region of this geometry, mapped
    // for our lifetime; only its control words are read here.
    let Ok(control) = (unsafe { Control::of(region, nic_api::GEOMETRY) }) else { return };
    let since = component_runtime::time::now_ms();
    while control.word(nic_api::WORD_MAC).load(Ordering::Acquire) >> 63 == 1 {
        if component_runtime::time::now_ms().saturating_sub(since) > RELINK_WAIT_MS {
            error!("netstack did not set the link up again within {RELINK_WAIT_MS} ms (is it subscribed to system events?)");
            component_runtime::exit(1)
        }
        sel4::yield_now();
    }
}
