//! The counters `/cgi-bin/stats` shows: httpd's, netstack's and netdrv's
//! counter pages, fs's `stats` and `budget` calls, and the
//! supervisor's view from the system events page.

use alloc::vec::Vec;
use cgi::{Component, Counters};
use httpd_api::HttpdCounter;
use nic_api::{Counter, CounterPage, DrvCounter};
use socket_api::StackCounter;

use super::{glue, now_ms};

/// A component's counter page (httpd's, netstack's, netdrv's) as a
/// component, with the names the stats schema uses for the common ones.
fn counter_page<C: Counter>(name: &str, page: &CounterPage) -> Option<Component> {
    if !page.valid() {
        return None;
    }
    let mut c = Component::from_counters(name, page.read::<C>());
    for &k in C::ALL {
        c.describe(k.name(), k.help());
    }
    let alias = |c: &mut Component, to: &str, from: &str| {
        if let Some(v) = c.get(from) {
            c.set(to, v);
        }
    };
    match name {
        "netstack" => {
            alias(&mut c, "checksum_cache_hits", "tcp_csum_hits");
            alias(&mut c, "checksum_cache_misses", "tcp_csum_misses");
            alias(&mut c, "bytes_copied", "tcp_bytes_copied");
            alias(&mut c, "bytes_by_ref_sent", "tcp_bytes_by_ref_sent");
            alias(&mut c, "tx_payload_copied", "tcp_tx_copied");
            alias(&mut c, "connections_accepted", "tcp_connections_accepted");
        }
        "netdrv" => {
            alias(&mut c, "bytes_copied", "drv_bytes_copied");
        }
        _ => {}
    }
    Some(c)
}

/// The PCI functions the root task found at boot (our start record).
fn devices() -> Vec<cgi::Device> {
    let Some(start) = component_runtime::start::start_info() else { return Vec::new() };
    start
        .pci_devices()
        .iter()
        .map(|r| cgi::Device {
            bdf: pci::Function::from_bdf(u32::from(r.bdf)).map(|f| alloc::format!("{f}")).unwrap_or_default(),
            vendor: r.vendor,
            device: r.device,
            class: r.class,
            driver: r.driver().into(),
        })
        .collect()
}

/// Every component's counters, for `/cgi-bin/stats` and the page.
pub(super) fn collect() -> Counters {
    let mut all = Counters { uptime_ms: now_ms(), components: Vec::new(), devices: devices() };
    // SAFETY: the counter pages, mapped read-only; we only load from them.
    let (httpd, stk, drv) = unsafe {
        (
            CounterPage::at(glue::httpd_stats::VADDR as *const u8),
            CounterPage::at(glue::stack_stats::VADDR as *const u8),
            CounterPage::at(glue::drv_stats::VADDR as *const u8),
        )
    };
    all.components.extend(counter_page::<HttpdCounter>("httpd", httpd));
    all.components.extend(counter_page::<StackCounter>("netstack", stk));
    all.components.extend(counter_page::<DrvCounter>("netdrv", drv));
    let mut v = [0u64; 14];
    let [hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce, waits, released] = &mut v;
    if glue::fs::stats(hits, misses, ev, evr, cached, reads, dbytes, copied, pages, data, dma, bounce, waits, released)
        == 0
    {
        all.push(
            Component::new("fs")
                .with("cache_hits", v[0])
                .with("cache_misses", v[1])
                .with("evictions", v[2])
                .with("evictions_referenced", v[3])
                .with("bytes_cached", v[4])
                .with("disk_reads", v[5])
                .with("disk_bytes", v[6])
                .with("bytes_copied", v[7])
                .with("pool_pages_in_use", v[8])
                .with("data_bytes", v[9])
                .with("dma_bytes", v[10])
                .with("bounce_bytes", v[11])
                .with("reset_waits", v[12])
                .with("reset_released", v[13]),
        );
    }
    // The supervisor's view, from the system events page: deaths per
    // component, the peers' deaths each did not confirm in time, and its
    // free untyped memory (the same after any number of restarts unless
    // one leaked).
    if let Some(page) = component_runtime::events::page() {
        let mut sup = Component::new("supervisor");
        sup.set("untyped_free_now", page.free_untyped_bytes());
        for i in 0..page.len() {
            if let Some(name) = page.name(i) {
                sup.set(&alloc::format!("deaths_{name}"), page.state(i).0);
                sup.set(&alloc::format!("settled_{name}"), page.state(i).1);
                sup.set(&alloc::format!("late_confirms_{name}"), page.late_confirms(i));
                let up = page.running(i) && !page.held_down(i);
                sup.set(&alloc::format!("up_{name}"), u64::from(up));
            }
        }
        all.push(sup);
    }
    // The cache's share of memory (components/fs/src/budget.rs): gauges
    // end in `_now`, the low-water mark in `_low`.
    let mut b = [0u64; 11];
    let [budget, low, memory, floor, httpd, netstack, held, shrinks, grows, evicted, updates] = &mut b;
    if glue::fs::budget(budget, low, memory, floor, httpd, netstack, held, shrinks, grows, evicted, updates) == 0 {
        if let Some(fs) = all.components.iter_mut().find(|c| c.name == "fs") {
            for (k, v) in [
                ("cache_budget_now", b[0]),
                ("cache_budget_low", b[1]),
                ("memory_budget", b[2]),
                ("cache_floor", b[3]),
                ("charged_httpd_now", b[4]),
                ("charged_netstack_now", b[5]),
                ("charged_fs_held_now", b[6]),
                ("budget_shrinks", b[7]),
                ("budget_grows", b[8]),
                ("budget_shrink_evictions", b[9]),
                ("budget_updates", b[10]),
            ] {
                fs.set(k, v);
            }
        }
    }
    all
}
