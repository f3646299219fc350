//! The stack's configuration from the assembly's attributes (address,
//! checksum mode, windows, budgets, admission), and what we log of it and
//! of the DHCP leases we get.

use component_runtime::time;
use component_runtime::{log, warn};
use netstack::{Config, NetStack, TxChecksum};
use site_config::page;
use site_config::Settings;

use super::glue;
use super::glue::pools::{HDR_POOL, SOCK_POOL};

/// Bytes a connection may queue beyond its peer's advertised window.
const SEND_SLACK: usize = 64 * 1024;

/// A zero-copy connection's send window (see where it is set).
const ZERO_COPY_SEND_WINDOW: usize = 512 * 1024;

/// `a.b.c.d` as its four octets (`None` for anything else).
fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in out.iter_mut() {
        *o = parts.next()?.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// How long we wait for fs to publish the site's values (it mounts the
/// disk first; a missing disk it reports at once).
const SITE_WAIT_MS: u64 = 5000;

/// The site disk's deployment values (docs/config.md), from the page fs
/// publishes (untrusted: one copy, every field checked again), over
/// which our attributes are the defaults. Logged either way.
fn site_values() -> Settings {
    if glue::site_config::PEERS.is_empty() {
        return Settings::default();
    }
    const _: () = assert!(glue::site_config::SIZE >= page::PAGE_BYTES);
    // SAFETY: the site_config dataport, mapped read-only for our lifetime.
    let got =
        unsafe { page::receive(glue::site_config::VADDR as *const u8, SITE_WAIT_MS, time::now_ms, sel4::yield_now) };
    let (warning, line) = got.report(SITE_WAIT_MS);
    if warning {
        warn!("{line}");
    } else {
        log!("{line}");
    }
    let s = got.into_settings();
    if let Some(h) = &s.hostname {
        log!("hostname {h}");
    }
    if let Some(l) = s.log_level {
        component_runtime::console::set_level(l as u8);
    }
    s
}

/// The stack's configuration for our MAC address and the offloads netdrv
/// offers, from the assembly's attributes.
pub(super) fn stack_config(mac: [u8; 6], offloads: nic_api::Offloads) -> Config {
    let mut cfg = Config::new(mac, HDR_POOL);
    cfg.rx_pool = SOCK_POOL;
    cfg.hand_off_pool = glue::pools::BODY_POOL;
    // TCP segments of up to 64 KiB, cut by the e1000 (netdrv.tso).
    cfg.tso = offloads.tso;
    let (addr, prefix) = glue::attributes::ADDRESS.split_once('/').unwrap_or((glue::attributes::ADDRESS, "24"));
    cfg.address = (parse_ipv4(addr).expect("address attribute"), prefix.parse().expect("prefix"));
    cfg.gateway = parse_ipv4(glue::attributes::GATEWAY);
    cfg.dhcp = glue::attributes::DHCP != 0;
    // The site's values over the assembly's: a static address (with its
    // gateway, or none) or DHCP.
    let site = site_values();
    if let Some(address) = site.address {
        cfg.address = address;
        cfg.gateway = site.gateway;
        cfg.dhcp = false;
    }
    if let Some(dhcp) = site.dhcp {
        cfg.dhcp = dhcp;
    }
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
    cfg
}

/// Logs what the configuration says (the test images check these lines).
pub(super) fn log_config(cfg: &Config) {
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
}

/// Logs a DHCP lease (or its loss) once per change: the test image
/// with `dhcp = 1` checks the address, gateway and lease time the
/// server gave.
pub(super) fn log_dhcp(stack: &mut NetStack<'static>) {
    match stack.take_dhcp_change() {
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
