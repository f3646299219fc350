//! netdrv's `init`: the device (reset, or taken over after a restart), the
//! IO-Lite pools, the link netstack set up, what the dead incarnation's
//! ring received and nobody took, and the rings.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use component_runtime::link::{Deaths, Link};
use component_runtime::start::StartInfo;
use component_runtime::{error, log};
use e1000_regs::{Mmio, Model};
use glue_rt::map_pool;
use glue_rt::pools::rw;
use iolite::duplex::Control;
use iolite::{Aggregate, Domain, Duplex, DuplexAttach, Trust};
use netdrv::e1000::{self, Counter, Setup, E1000};
use netdrv::virtio_net::VirtioNet;
use nic_api::CounterPage;

use super::glue::pools::{APP_POOL, HDR_POOL, RX_POOL, SOCK_POOL};
use super::nic::Nic;
use super::probe::Found;
use super::relink::{publish_link, wait_for_fresh_link, Relink};
use super::{glue, Driver, StartDma, NETSTACK, NETSTACK_NAME, POLL, TAKEOVER, TSO};

impl Driver {
    /// Brings the driver up on the device `probe` found.
    pub(super) fn init(start: &'static StartInfo, found: Found) -> Driver {
        let restarts = start.restarts;
        let d: &'static Domain = Box::leak(Box::new(Domain::new()));
        let (nic, mac, salvaged, chan, deaths) = match found {
            Found::E1000(model, regs) => e1000_up(start, model, regs, d),
            Found::Virtio(regs, layout) => {
                // A restart resets the device as at a first start: a virtio
                // reset stops it using every queue (the dead incarnation's
                // buffers) and, unlike the e1000's RCTL write, costs QEMU no
                // second of held frames.
                map_pools(d);
                let chan = attach_link(d, restarts);
                let deaths = Deaths::new(start.instance as usize, d, &[RX_POOL]);
                let nic = VirtioNet::new(regs, layout, StartDma(start), d, RX_POOL, TSO, sel4::yield_now)
                    .unwrap_or_else(|e| {
                        error!("virtio-net: {e}");
                        component_runtime::exit(1)
                    });
                let mac = nic.mac();
                log!("virtio-net features {:#x} (offered and wanted)", nic.features());
                (Nic::Virtio(nic), mac, VecDeque::new(), chan, deaths)
            }
        };
        // SAFETY: our counter page, mapped read-write.
        let stats = unsafe { CounterPage::at(glue::drv_stats::VADDR as *const u8) };
        let mut nic = nic;
        let tso = nic.tso(TSO);
        let up = nic.link_up();
        publish_link(&chan, mac, up, tso);
        let m = mac;
        log!(
            "{} at {} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} link {}",
            nic.name(),
            super::probe::nic(start).map_or(pci::Function::new(0, 0, 0), |d| d.function()),
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            if up { "up" } else { "down" }
        );
        log!("tcp segmentation offload {}", if tso { "offered" } else { "off" });
        if POLL {
            log!("no interrupt: polling the rings on every tick");
        } else {
            // The kernel masks a level-triggered line until acknowledged;
            // an earlier incarnation may have left it masked.
            let _ = glue::irq::acknowledge();
        }
        Driver {
            nic,
            device_error_seen: false,
            d,
            link: Link::new(NETSTACK_NAME, NETSTACK, deaths.page(), chan),
            relink: Relink::default(),
            deaths,
            stats,
            restarts,
            mac,
            tso,
            bogus_icr_seen: false,
            salvaged,
            wake_stack: true,
            woke: component_runtime::time::rdtsc(),
            waited_relinking: false,
        }
    }
}

/// What bringing a device up leaves: the driver, the MAC address, the
/// frames salvaged from a dead incarnation's ring, the link and the deaths.
type Up = (Nic, [u8; 6], VecDeque<Aggregate<'static>>, Duplex<'static>, Deaths);

/// The e1000: reset, or taken over after a restart, with what the dead
/// incarnation's ring received and nobody took.
fn e1000_up(start: &'static StartInfo, model: Model, mut regs: Mmio, d: &'static Domain) -> Up {
    let restarts = start.restarts;
    let taken_over = TAKEOVER && restarts > 0 && e1000::running(&regs);
    let (mac, tx_abandoned) = device(model, &mut regs, taken_over, restarts);
    map_pools(d);
    let chan = attach_link(d, restarts);
    // What the dead incarnation left in use in our pool (rings, posted
    // and lent buffers) stays quarantined until its death is settled.
    let deaths = Deaths::new(start.instance as usize, d, &[RX_POOL]);
    let salvaged = if taken_over { salvage(start, &regs, d, restarts) } else { VecDeque::new() };

    // --- the rings: pages of our pool, kept for good ---
    let itr = glue::attributes::ITR as u32;
    let set_up = if taken_over { E1000::resume } else { E1000::new };
    let setup = Setup { model, itr, interrupts: !POLL };
    let mut nic = set_up(regs, StartDma(start), d, RX_POOL, setup).unwrap_or_else(|e| {
        error!("{}: {e}", model.name());
        component_runtime::exit(1)
    });
    nic.set_tso(TSO);
    nic.count(Counter::RxSalvaged, salvaged.len() as u64);
    if let Some(n) = tx_abandoned {
        nic.count(Counter::TxQuiesced, 1);
        nic.count(Counter::TxAbandoned, n as u64);
    }
    (Nic::E1000(nic), mac, salvaged, chan, deaths)
}

/// The device: quiet and reset, or, after a restart, taken over as the
/// dead incarnation left it. Returns the MAC address and, after a take
/// over, how many descriptors the dead incarnation posted were not sent.
fn device(model: Model, regs: &mut Mmio, taken_over: bool, restarts: u64) -> ([u8; 6], Option<usize>) {
    // A take-over stops the dead incarnation's transmitter first
    // (`e1000::quiesce_tx`): only then may netstack reuse the frames it
    // had lent it, which it does once we published our MAC address
    // and the death is settled. A reset stops it too.
    let mut tx_abandoned = None;
    let mac = if taken_over {
        log!("restart {restarts}: taking the running {} over (no reset)", model.name());
        e1000::take_over(regs).map(|t| {
            log!(
                "restart {restarts}: transmitter stopped, {} descriptors the dead incarnation posted not sent",
                t.tx_abandoned
            );
            tx_abandoned = Some(t.tx_abandoned);
            t.mac
        })
    } else {
        e1000::reset(regs, sel4::yield_now)
    };
    let mac = mac.unwrap_or_else(|e| {
        error!("{}: {e}", model.name());
        component_runtime::exit(1)
    });
    (mac, tx_abandoned)
}

/// IO-Lite: our RX pool, the pools frames may point into, and what
/// netstack may reference.
fn map_pools(d: &'static Domain) {
    // SAFETY (all of them): the dataports are mapped as declared for as
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
}

/// The link with netstack (netstack, above us, set it up; after a restart
/// of ours, set it up again).
fn attach_link(d: &'static Domain, restarts: u64) -> Duplex<'static> {
    // SAFETY: the link dataport, mapped read-write for our lifetime,
    // shared only with netstack; we are its side A.
    unsafe {
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
    }
}

/// What the dead incarnation's ring received and nobody took: copied
/// (counted) into fresh buffers before the new ring takes the pool's free
/// pages. The dead incarnation's stay quarantined, and a frame lost here
/// would cost its sender a retransmission timeout.
fn salvage(start: &StartInfo, regs: &Mmio, d: &'static Domain, restarts: u64) -> VecDeque<Aggregate<'static>> {
    let mut salvaged = VecDeque::new();
    let (va, size) = (glue::rx_pool::VADDR, glue::rx_pool::SIZE);
    // SAFETY: our RX pool dataport, mapped for our lifetime and
    // physically contiguous from the address the loader gives.
    let window =
        start.physical_address(va as u64).map(|pa| unsafe { e1000::PoolWindow::new(va as *const u8, size, pa) });
    let (mut bytes, mut no_room) = (0, 0);
    let found = window.map_or(e1000::Salvaged::default(), |w| {
        e1000::salvage_rx(regs, &w, |frame| match d.alloc_copy(RX_POOL, frame) {
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
    salvaged
}
