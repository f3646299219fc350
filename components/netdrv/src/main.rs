//! netdrv: the e1000 (82540EM) driver of the network path
//! (examples/netecho/netecho.camkes).
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
//! * **Batching:** per wake-up, every completed RX descriptor is drained and
//!   netstack is signalled once, if it asked (the link's "signal me" flags:
//!   it waits for frames, or for its buffers back while its frames wait);
//!   netstack (higher priority) runs to completion at once, then its frames
//!   are posted and TDT is written once, and RDT once after refilling.
//!   Before blocking we ask netstack for its frames, so a round of its own
//!   (a timer, its client) kicks us. Interrupt throttling (ITR, attribute
//!   `itr`) bounds the interrupt rate.
//! * **Polling fallback** (attribute `poll = 1`): for a machine whose
//!   interrupt routing does not work, the e1000's interrupts stay masked
//!   and the driver runs its pass on every signal of `tick` instead (the
//!   ticker's `to_drv`, e.g. at 500 Hz). Nothing else changes: a frame
//!   waits at most one tick in either direction. `irq` is then never
//!   waited on or acknowledged (the `irqs` counter stays 0).
//! * **Counters:** the `drv_stats` page (`nic_api::DrvCounter`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use component_runtime::{error, log};
use core::sync::atomic::{fence, Ordering};
use iolite::duplex::Control;
use iolite::{
    Aggregate, BufMeta, BufMut, Domain, Duplex, DuplexAttach, PeerId, PoolId, PoolLayout, RoRegion, RwRegion, Trust,
    Want,
};
use nic_api::{CounterPage, DrvCounter as C, TxOffload, Values};

mod regs;

use regs::*;

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

/// Descriptors per ring (16 bytes each: two pages per ring). QEMU's e1000
/// drops frames that arrive while the RX ring is full, and slirp dumps whole
/// windows at once: a deep ring matters more than anything else here.
const RING: usize = 512;
/// RX buffer size (RCTL.BSIZE = 2048).
const RX_BUF: usize = 2048;
/// Largest frame we transmit (no jumbo frames, CRC added by the NIC).
const MAX_FRAME: usize = 1514;
/// netstack's peer slot here (one channel each way).
const NETSTACK: PeerId = PeerId(0);

const RX_POOL: PoolId = glue::attributes::RX_POOL_ID as PoolId;
const HDR_POOL: PoolId = glue::attributes::HDR_POOL_ID as PoolId;
const SOCK_POOL: PoolId = glue::attributes::SOCK_POOL_ID as PoolId;
const APP_POOL: PoolId = glue::attributes::APP_POOL_ID as PoolId;
const FILE_POOL: PoolId = glue::attributes::FILE_POOL_ID as PoolId;
const CGI_POOL: PoolId = glue::attributes::CGI_POOL_ID as PoolId;
const CGI_REQ_POOL: PoolId = glue::attributes::CGI_REQ_POOL_ID as PoolId;
/// Our pool dataports by name, for the assembly's grant lists.
const POOLS: &[(&str, PoolId)] = &[
    ("rx_pool", RX_POOL),
    ("hdr_pool", HDR_POOL),
    ("sock_pool", SOCK_POOL),
    ("app_pool", APP_POOL),
    ("file_pool", FILE_POOL),
    ("cgi_pool", CGI_POOL),
    ("cgi_req_pool", CGI_REQ_POOL),
];

const _: () = assert!(glue::link::SIZE >= nic_api::REGION_BYTES, "link dataport too small");
/// Poll on `tick` instead of taking the e1000's interrupt (see the top).
const POLL: bool = glue::attributes::POLL != 0;
/// Test images only (`netdrv.test_hooks = 1`): after probing, try writes
/// pci_config must refuse (see `try_forbidden_writes`). A constant, so
/// the default image has no such code.
const TEST_HOOKS: bool = glue::attributes::TEST_HOOKS != 0;

fn rdtsc() -> u64 {
    let lo: u32;
    let hi: u32;
    // SAFETY: rdtsc only writes eax/edx; user-mode rdtsc is allowed.
    unsafe { core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nostack, nomem, preserves_flags)) };
    (hi as u64) << 32 | lo as u64
}

fn meta(pages: u32) -> &'static mut [BufMeta] {
    Box::leak(alloc::vec![BufMeta::EMPTY; pages as usize].into_boxed_slice())
}

fn pages_of(size: usize) -> u32 {
    PoolLayout::fitting(size).pages
}

/// A transmitted frame waiting for its last descriptor to be done.
struct InFlight {
    last: usize,
    descs: usize,
    _frame: Aggregate<'static>,
}

struct Driver {
    start: &'static component_runtime::start::StartInfo,
    regs: Registers,
    d: &'static Domain,
    tx_ring: *mut [u64; 2],
    rx_ring: *mut [u64; 2],
    rx_bufs: Vec<Option<BufMut<'static>>>,
    /// Next RX descriptor to look at.
    rx_next: usize,
    /// The RDT value: descriptors [rx_next, rx_tail) belong to the NIC.
    rx_tail: usize,
    /// Next free TX descriptor (the TDT value once written).
    tx_tail: usize,
    tx_used: usize,
    tx_inflight: VecDeque<InFlight>,
    /// A frame that did not fit the ring yet.
    tx_pending: Option<(Aggregate<'static>, TxOffload)>,
    /// The checksum context last given to the NIC (start, offset).
    tx_context: Option<(u16, u16)>,
    /// The link with netstack: frames up on `link.tx`, down on `link.rx`.
    link: Duplex<'static>,
    /// The two link channels; a ring netstack corrupts, or a descriptor
    /// that fails validation, breaks its channel for good (reported once)
    /// instead of being retried in a loop.
    to_stack_guard: iolite::Guard,
    from_stack_guard: iolite::Guard,
    stats: &'static CounterPage,
    c: Values<C>,
}

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
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
fn probe(start: &component_runtime::start::StartInfo) -> Result<Option<Registers>, pci::Refused> {
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
    Ok(Some(Registers::new()))
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

/// # Safety
/// `vaddr..vaddr+size` must be a dataport mapped read-write for the
/// program's lifetime, used only through the returned region.
unsafe fn rw(vaddr: usize, size: usize) -> RwRegion {
    // SAFETY: per the contract.
    unsafe { RwRegion::from_raw_parts(vaddr as *mut u8, size) }.expect("dataport region")
}

/// # Safety
/// As for [`rw`], read-only.
unsafe fn ro(vaddr: usize, size: usize) -> RoRegion {
    // SAFETY: per the contract.
    unsafe { RoRegion::from_raw_parts(vaddr as *const u8, size) }.expect("dataport region")
}

impl Driver {
    fn new(start: &'static component_runtime::start::StartInfo, mut regs: Registers) -> Driver {
        // --- the device, quiet and reset ---
        regs.write(IMC, !0);
        regs.write(CTRL, regs.read(CTRL) | CTRL_RST);
        for _ in 0..100_000 {
            if regs.read(CTRL) & CTRL_RST == 0 {
                break;
            }
            sel4::yield_now();
        }
        regs.write(IMC, !0);
        let _ = regs.read(ICR);
        regs.write(CTRL, (regs.read(CTRL) | CTRL_SLU | CTRL_ASDE) & !CTRL_RST);
        for i in 0..128 {
            regs.write(MTA + 4 * i, 0);
        }
        let mac = regs.mac().unwrap_or_else(|| {
            error!("e1000: receive address 0 not valid");
            component_runtime::exit(1)
        });

        // --- IO-Lite: our RX pool, the pools frames may point into ---
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        // SAFETY (all four): the dataports are mapped as declared for as
        // long as we run, and used only through the IO-Lite domain.
        unsafe {
            d.add_owned_pool(
                RX_POOL,
                rw(glue::rx_pool::VADDR, glue::rx_pool::SIZE),
                meta(pages_of(glue::rx_pool::SIZE)),
                Trust::Trusted,
            )
            .expect("rx pool");
            d.add_foreign_pool(
                HDR_POOL,
                ro(glue::hdr_pool::VADDR, glue::hdr_pool::SIZE),
                meta(pages_of(glue::hdr_pool::SIZE)),
                Trust::Trusted,
            )
            .expect("hdr pool");
            d.add_foreign_pool(
                SOCK_POOL,
                ro(glue::sock_pool::VADDR, glue::sock_pool::SIZE),
                meta(pages_of(glue::sock_pool::SIZE)),
                Trust::Trusted,
            )
            .expect("sock pool");
            d.add_foreign_pool(
                APP_POOL,
                ro(glue::app_pool::VADDR, glue::app_pool::SIZE),
                meta(pages_of(glue::app_pool::SIZE)),
                Trust::Trusted,
            )
            .expect("app pool");
            // Pools of other producers whose buffers frames may carry (the
            // web server's file cache and CGI output); id 0: not in this
            // assembly (the `maybe` dataport is then unmapped).
            if FILE_POOL != 0 {
                d.add_foreign_pool(
                    FILE_POOL,
                    ro(glue::file_pool::VADDR, glue::file_pool::SIZE),
                    meta(pages_of(glue::file_pool::SIZE)),
                    Trust::Trusted,
                )
                .expect("file pool");
            }
            if CGI_POOL != 0 {
                d.add_foreign_pool(
                    CGI_POOL,
                    ro(glue::cgi_pool::VADDR, glue::cgi_pool::SIZE),
                    meta(pages_of(glue::cgi_pool::SIZE)),
                    Trust::Untrusted,
                )
                .expect("cgi pool");
            }
            if CGI_REQ_POOL != 0 {
                d.add_foreign_pool(
                    CGI_REQ_POOL,
                    ro(glue::cgi_req_pool::VADDR, glue::cgi_req_pool::SIZE),
                    meta(pages_of(glue::cgi_req_pool::SIZE)),
                    Trust::Trusted,
                )
                .expect("cgi request pool");
            }
        }
        // Frames from netstack may point only into these pools, and into
        // our own only where we lent the buffer to netstack.
        d.set_peer_pools_named(NETSTACK, glue::attributes::LINK_REFS, POOLS).expect("link grant list");

        // --- the link with netstack (netstack, above us, set it up) ---
        // SAFETY: the link dataport, mapped read-write for our lifetime,
        // shared only with netstack; we are its side A.
        let link = unsafe {
            let region = rw(glue::link::VADDR, glue::link::SIZE);
            if Control::of(region, nic_api::GEOMETRY).map_or(0, |c| c.generation()) == 0 {
                error!("the link with netstack is not initialised (netstack must run above netdrv)");
                component_runtime::exit(1)
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

        // --- descriptor rings: pages of our pool, kept for good ---
        let ring_page = || {
            let mut b = d.alloc(RX_POOL, RING * 16).expect("ring pages");
            let p = b.writable().as_mut_ptr();
            // SAFETY: the pages are ours (an unsealed buffer nobody else can
            // name; physically contiguous, as the whole dataport is); zero
            // them before the NIC sees them.
            unsafe { core::ptr::write_bytes(p, 0, RING * 16) };
            core::mem::forget(b);
            p
        };
        let tx_ring = ring_page() as *mut [u64; 2];
        let rx_ring = ring_page() as *mut [u64; 2];
        let phys = |p: *const u8| start.physical_address(p as u64).expect("ring in a dataport");
        let (tx_pa, rx_pa) = (phys(tx_ring as *const u8), phys(rx_ring as *const u8));

        let mut drv = Driver {
            start,
            regs,
            d,
            tx_ring,
            rx_ring,
            rx_bufs: (0..RING).map(|_| None).collect(),
            rx_next: 0,
            rx_tail: 0,
            tx_tail: 0,
            tx_used: 0,
            tx_inflight: VecDeque::new(),
            tx_pending: None,
            tx_context: None,
            link,
            to_stack_guard: iolite::Guard::new(),
            from_stack_guard: iolite::Guard::new(),
            stats,
            c: Values::new(),
        };
        let r = &mut drv.regs;
        r.write(RDBAL, rx_pa as u32);
        r.write(RDBAH, (rx_pa >> 32) as u32);
        r.write(RDLEN, (RING * 16) as u32);
        r.write(RDH, 0);
        r.write(RDT, 0);
        r.write(RDTR, 0);
        r.write(RADV, 0);
        r.write(TDBAL, tx_pa as u32);
        r.write(TDBAH, (tx_pa >> 32) as u32);
        r.write(TDLEN, (RING * 16) as u32);
        r.write(TDH, 0);
        r.write(TDT, 0);
        r.write(TIDV, 0);
        r.write(TADV, 0);
        r.write(TIPG, TIPG_DEFAULT);
        r.write(TCTL, TCTL_EN | TCTL_PSP | TCTL_CT | TCTL_COLD);
        r.write(ITR, glue::attributes::ITR as u32);
        drv.rx_refill();
        drv.regs.write(RCTL, RCTL_EN | RCTL_BAM | RCTL_SECRC);
        if !POLL {
            drv.regs.write(IMS, INT_RXT0 | INT_RXO | INT_RXDMT0 | INT_LSC | INT_TXDW);
        }

        let up = drv.regs.read(STATUS) & STATUS_LU != 0;
        drv.c[C::LinkUp] = up as u64;
        let m = mac;
        let words = drv.link.control();
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
        if POLL {
            log!("no interrupt: polling the rings on every tick");
        }
        drv
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
            self.link.disarm();
            let mut nested = 0u64;
            self.tx_reap();
            self.rx_drain();
            // The received frames, and the reaped frames' buffers (netstack
            // may wait for them: a full frame pool in the copy modes): if
            // netstack asked for either, it runs now and finds them.
            if self.link.flush() || core::mem::take(&mut wake_stack) {
                self.c[C::Wakeups] += 1;
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
            self.rx_refill();
            let now = rdtsc();
            self.c[C::BusyCycles] += now.wrapping_sub(woke).saturating_sub(nested);
            woke = now;
            self.publish();
            if self.rx_ready() {
                continue;
            }
            // netstack's frames: it kicks us for them while we wait (not
            // while the NIC's ring is full: its interrupt comes then).
            let frames = self.tx_pending.is_none() && self.from_stack_guard.broken().is_none();
            if self.link.arm(Want { data: frames, ..Want::default() }) {
                continue;
            }
            let icr = if POLL {
                // netstack's kicks wait on `kick` meanwhile, unread: its
                // frames go out at the next tick.
                glue::tick::wait();
                // The causes latch in ICR while masked: read for link changes.
                self.regs.read(ICR)
            } else {
                // The interrupt and netstack's kick share this notification
                // (`irq_notification`): each has its own badge bit.
                let bits = glue::irq::wait();
                if bits & glue::irq::BADGE != 0 {
                    // Reading ICR clears the causes and so deasserts the
                    // level line before the kernel unmasks it.
                    let icr = self.regs.read(ICR);
                    let _ = glue::irq::acknowledge();
                    self.c[C::Irqs] += 1;
                    icr
                } else {
                    0
                }
            };
            woke = rdtsc();
            if icr & INT_LSC != 0 {
                let up = self.regs.read(STATUS) & STATUS_LU != 0;
                self.c[C::LinkUp] = up as u64;
                self.link.control().word(nic_api::WORD_LINK_UP).store(up as u64, Ordering::Release);
                log!("link {}", if up { "up" } else { "down" });
            }
        }
    }

    fn publish(&mut self) {
        self.c[C::BytesCopied] = self.d.stats().bytes_copied;
        self.stats.publish(&self.c);
    }

    fn desc(ring: *mut [u64; 2], i: usize) -> *mut [u64; 2] {
        // SAFETY: i < RING, the ring page holds RING descriptors.
        unsafe { ring.add(i % RING) }
    }

    fn rx_status(&self, i: usize) -> (u8, u8, u16) {
        // SAFETY: a descriptor of our ring page; the NIC writes it back.
        let w1 = unsafe { core::ptr::read_volatile(&(*Self::desc(self.rx_ring, i))[1]) };
        ((w1 >> 32) as u8, (w1 >> 40) as u8, w1 as u16)
    }

    fn rx_ready(&self) -> bool {
        self.rx_status(self.rx_next).0 & DD != 0
    }

    /// Hands every completed RX buffer to netstack; returns how many.
    fn rx_drain(&mut self) -> usize {
        let mut n = 0;
        // netstack empties the channel every time it runs, so a batch of at
        // most FWD_CAP frames always fits; the rest waits in the ring (the
        // caller loops while descriptors are done).
        while n < nic_api::FWD_CAP {
            let i = self.rx_next;
            if i == self.rx_tail {
                break;
            }
            let (status, errors, len) = self.rx_status(i);
            if status & DD == 0 {
                break;
            }
            fence(Ordering::Acquire);
            self.rx_next = (i + 1) % RING;
            let Some(mut buf) = self.rx_bufs[i].take() else { continue };
            let len = len as usize;
            if status & RXD_EOP == 0 || errors != 0 || !(14..=RX_BUF).contains(&len) {
                self.c[C::RxDropped] += 1;
                self.rx_bufs[i] = Some(buf); // reuse as is
                continue;
            }
            let w = buf.writable();
            if w[12] == 0x08 && w[13] == 0x06 {
                self.c[C::ArpRx] += 1;
            }
            match buf.seal(len) {
                Ok(agg) => match self.to_stack_guard.send(&mut self.link.tx, agg, 0, 0) {
                    Ok(()) => {
                        n += 1;
                        self.c[C::RxFrames] += 1;
                        self.c[C::RxBytes] += len as u64;
                    }
                    Err((_, _, broke)) => {
                        if let Some(e) = broke {
                            error!("channel link.A from netstack broken: {e:?}");
                        }
                        self.c[C::RxDropped] += 1
                    }
                },
                Err((_, b)) => {
                    self.c[C::RxDropped] += 1;
                    self.rx_bufs[i] = Some(b);
                }
            }
        }
        n
    }

    /// Gives the NIC every free RX descriptor we have a buffer for, then
    /// writes RDT once.
    fn rx_refill(&mut self) {
        let old = self.rx_tail;
        while (self.rx_tail + 1) % RING != self.rx_next {
            let i = self.rx_tail;
            if self.rx_bufs[i].is_none() {
                match self.d.alloc(RX_POOL, RX_BUF) {
                    Ok(b) => self.rx_bufs[i] = Some(b),
                    Err(_) => {
                        self.c[C::RxRingEmpty] += 1;
                        break;
                    }
                }
            }
            let b = self.rx_bufs[i].as_mut().expect("filled above");
            let va = b.writable().as_mut_ptr() as u64;
            let pa = self.start.physical_address(va).expect("rx pool is a dataport");
            let desc = Self::desc(self.rx_ring, i);
            // SAFETY: our descriptor, not owned by the NIC (outside [head, tail)).
            unsafe {
                core::ptr::write_volatile(&mut (*desc)[0], pa);
                core::ptr::write_volatile(&mut (*desc)[1], 0);
            }
            self.rx_tail = (i + 1) % RING;
        }
        if self.rx_tail != old {
            fence(Ordering::Release);
            self.regs.write(RDT, self.rx_tail as u32);
        }
    }

    /// Returns the frames whose descriptors the NIC has finished.
    fn tx_reap(&mut self) -> usize {
        let mut n = 0;
        while let Some(f) = self.tx_inflight.front() {
            let desc = Self::desc(self.tx_ring, f.last);
            // SAFETY: our ring; the NIC writes the status back.
            let w1 = unsafe { core::ptr::read_volatile(&(*desc)[1]) };
            if (w1 >> 32) as u8 & DD == 0 {
                break;
            }
            self.tx_used -= f.descs;
            self.tx_inflight.pop_front();
            n += 1;
        }
        n
    }

    /// Posts netstack's queued frames; writes TDT once.
    fn tx_post(&mut self) {
        let start_tail = self.tx_tail;
        loop {
            let (agg, offload) = match self.tx_pending.take() {
                Some(f) => f,
                None => match self.from_stack_guard.recv(&mut self.link.rx) {
                    iolite::Next::Msg(r) => (r.agg, TxOffload::from_tag(r.tag)),
                    // Empty; or the returns of a rejected descriptor wait
                    // for ring space; or the channel is broken.
                    iolite::Next::Idle | iolite::Next::Wait(_) => break,
                    iolite::Next::Refused(_) => {
                        self.c[C::TxRejected] += 1;
                        continue;
                    }
                    iolite::Next::Broke(e) => {
                        self.c[C::TxRejected] += 1;
                        error!("channel link.B from netstack broken: {e:?}");
                        break;
                    }
                },
            };
            let len = agg.len();
            let offload = match offload {
                TxOffload::TcpChecksum { start, offset }
                    if start < 256 && offset < 256 && (offset as usize + 2) <= len && start < offset =>
                {
                    Some((start, offset))
                }
                TxOffload::TcpChecksum { .. } => {
                    self.c[C::TxRejected] += 1;
                    continue;
                }
                TxOffload::None => None,
            };
            if !(14..=MAX_FRAME).contains(&len) {
                self.c[C::TxRejected] += 1;
                continue;
            }
            let ctx = offload.is_some() && self.tx_context != offload;
            let need = agg.slice_count() + ctx as usize;
            if RING - 1 - self.tx_used < need {
                self.tx_pending = Some((
                    agg,
                    offload.map_or(TxOffload::None, |(start, offset)| TxOffload::TcpChecksum { start, offset }),
                ));
                break;
            }
            // Physical addresses first: a slice outside our dataports
            // (impossible after validation, but checked) rejects the frame
            // before any descriptor is written.
            let mut pas = [(0u64, 0usize); iolite::MAX_SLICES];
            let mut ok = true;
            for (k, s) in agg.slices().enumerate() {
                match self.start.physical_address(s.as_ptr() as u64) {
                    Some(pa) => pas[k] = (pa, s.len()),
                    None => ok = false,
                }
            }
            if !ok {
                self.c[C::TxRejected] += 1;
                continue;
            }
            if let Some(first) = agg.slices().next() {
                if first.len() >= 14 && first[12] == 0x08 && first[13] == 0x06 {
                    self.c[C::ArpTx] += 1;
                }
            }
            let first_idx = self.tx_tail;
            if let (true, Some((start, offset))) = (ctx, offload) {
                // Context descriptor: TUCSS, TUCSO, TUCSE = 0 (to the end).
                let upper = start as u64 | (offset as u64) << 8;
                let lower = upper << 32; // IP fields unused (IPv4 header checksum is done)
                let cmd = (TXD_CMD_DEXT << 24 | TXD_DTYP_C) as u64;
                self.put_tx([lower & 0xffff_ffff_0000_0000, cmd]);
                self.tx_context = offload;
            }
            let n = agg.slice_count();
            for (k, &(pa, l)) in pas[..n].iter().enumerate() {
                let last = k + 1 == n;
                let w1 = if offload.is_some() {
                    let cmd = TXD_CMD_DEXT | TXD_CMD_IFCS | if last { TXD_CMD_EOP | TXD_CMD_RS } else { 0 };
                    (l as u64) | TXD_DTYP_D as u64 | (cmd as u64) << 24 | (TXD_POPTS_TXSM as u64) << 40
                } else {
                    let cmd = TXD_CMD_IFCS | if last { TXD_CMD_EOP | TXD_CMD_RS } else { 0 };
                    (l as u64) | (cmd as u64) << 24
                };
                self.put_tx([pa, w1]);
            }
            let last = (self.tx_tail + RING - 1) % RING;
            let descs = (self.tx_tail + RING - first_idx) % RING;
            self.tx_used += descs;
            self.c[C::TxFrames] += 1;
            self.c[C::TxBytes] += len as u64;
            self.c[C::TxDescriptors] += descs as u64;
            if offload.is_some() {
                self.c[C::TxOffloaded] += 1;
            }
            self.tx_inflight.push_back(InFlight { last, descs, _frame: agg });
        }
        if self.tx_tail != start_tail {
            fence(Ordering::Release);
            self.regs.write(TDT, self.tx_tail as u32);
        }
    }

    fn put_tx(&mut self, words: [u64; 2]) {
        let desc = Self::desc(self.tx_ring, self.tx_tail);
        // SAFETY: a free descriptor of our ring (tx_used < RING - 1).
        unsafe {
            core::ptr::write_volatile(&mut (*desc)[0], words[0]);
            core::ptr::write_volatile(&mut (*desc)[1], words[1]);
        }
        self.tx_tail = (self.tx_tail + 1) % RING;
    }
}
