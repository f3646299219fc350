//! Listings of a spec for review: [`describe`] (every object, component,
//! capability and mapping; the CLI writes it next to the binary spec) and
//! [`rights_table`] (every end of every object with its rights, which
//! `tests/golden/iolite-rights.txt` pins). Made by one pass over the
//! components, so a listing of a large system costs about as much as the
//! system.

use std::collections::HashMap;
use system_spec::{Access, Binding, Component, ObjectId, ObjectKind, Rights, SystemSpec};

/// A human-readable listing of the spec, for reviewing what a change to the
/// assembly does (written next to the binary spec by the CLI).
pub fn describe(spec: &SystemSpec) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "# system spec, format {}", spec.format_version);
    let _ = writeln!(out, "objects:");
    for (i, o) in spec.objects.iter().enumerate() {
        let _ = writeln!(out, "  #{i} {}: {:?}", o.name, o.kind);
    }
    // Whoever maps a device's registers can program its DMA: say who does.
    let _ = writeln!(out, "device regions (holder, rights):");
    let mut device_holders: HashMap<u32, Vec<String>> = HashMap::new();
    for c in &spec.components {
        for m in &c.mappings {
            if matches!(spec.object(m.object).map(|o| &o.kind), Some(ObjectKind::DeviceFrames { .. })) {
                device_holders.entry(m.object.0).or_default().push(format!("{} {}", c.name, access_letters(m.access)));
            }
        }
    }
    for (i, o) in spec.objects.iter().enumerate() {
        let ObjectKind::DeviceFrames { paddr, size } = o.kind else { continue };
        let holders = device_holders.remove(&(i as u32)).unwrap_or_default();
        let holders = if holders.is_empty() { "nobody".to_string() } else { holders.join(", ") };
        let _ = writeln!(out, "  #{i} {} {paddr:#x}+{size:#x}: {holders}", o.name);
    }
    for c in &spec.components {
        let _ = writeln!(
            out,
            "component {} ({}, elf {}): control={} priority={} max_priority={} stack={:#x} restartable={} cnode_bits={} first_free_slot={}",
            c.name, c.component_type, c.elf, c.control, c.priority, c.max_priority, c.stack_size, c.restartable, c.cnode_size_bits, c.first_free_slot
        );
        if !c.may_restart.is_empty() {
            let names: Vec<&str> = c.may_restart.iter().map(|&t| spec.components[t as usize].name.as_str()).collect();
            let _ = writeln!(out, "  may restart: {}", names.join(", "));
        }
        if c.hang_cpu_ms > 0 {
            let _ = writeln!(out, "  liveness: stuck after {} ms of CPU without progress", c.hang_cpu_ms);
        }
        if c.fault_injection {
            let _ = writeln!(out, "  fault injection: granted (test image)");
        }
        if c.restartable {
            let p = c.restart_policy;
            let _ = writeln!(
                out,
                "  restart policy: at most {} restarts in {} ms, back-off {} ms doubling",
                p.limit, p.window_ms, p.backoff_ms
            );
        }
        match (c.events, c.events_notification) {
            (true, Some(n)) => {
                let _ = writeln!(
                    out,
                    "  system events: the events page (read-only), signalled on #{} {} badge {:#x}",
                    n.0,
                    spec.objects[n.0 as usize].name,
                    system_spec::SYSTEM_EVENT_BADGE
                );
            }
            (true, None) => {
                let _ = writeln!(out, "  system events: the events page (read-only), polled");
            }
            _ => {}
        }
        if c.events {
            let _ = writeln!(out, "  confirms a peer's death within {} ms", c.confirm_death_ms);
        }
        if c.untrusted {
            let _ = writeln!(out, "  untrusted: restarted (or stopped) when it does not confirm a death in time");
        }
        if let Some(end) = &c.log_ring {
            let _ = writeln!(
                out,
                "  log ring: #{} {} (read-write here, read-only in the log server), signal slot {}",
                end.ring.0, spec.objects[end.ring.0 as usize].name, end.signal_slot
            );
        }
        if let Some(server) = &c.log_server {
            let names: Vec<&str> = server.rings.iter().map(|r| r.name.as_str()).collect();
            let _ = writeln!(
                out,
                "  log server: waits in slot {}, reads the rings of {} (read-only)",
                server.wait_slot,
                names.join(", ")
            );
        }
        for cap in &c.caps {
            let o = &spec.objects[cap.object.0 as usize];
            let _ = writeln!(
                out,
                "  slot {} -> #{} {} {:?} badge {}",
                cap.slot, cap.object.0, o.name, cap.rights, cap.badge
            );
        }
        for m in &c.mappings {
            let o = &spec.objects[m.object.0 as usize];
            let _ =
                writeln!(out, "  map {:#x} -> #{} {} {:?} cached={}", m.vaddr, m.object.0, o.name, m.access, m.cached);
        }
        for i in &c.interfaces {
            let _ = writeln!(out, "  interface {}: {:?}", i.name, i.binding);
        }
    }
    let _ = writeln!(out, "rights of every end:");
    out.push_str(&rights_table(spec));
    out
}

/// A component's interfaces by what their bindings hold, so that each
/// capability and mapping finds its end in one lookup.
struct EndNames<'a> {
    /// Interface by capability slot (the first interface using it).
    slot: HashMap<u64, &'a str>,
    /// Interrupt consumer by its IRQ handler slot.
    handler: HashMap<u64, &'a str>,
    /// Dataport by virtual address.
    vaddr: HashMap<u64, &'a str>,
}

impl<'a> EndNames<'a> {
    fn of(c: &'a Component) -> EndNames<'a> {
        let mut names = EndNames { slot: HashMap::new(), handler: HashMap::new(), vaddr: HashMap::new() };
        for i in &c.interfaces {
            let name = i.name.as_str();
            match i.binding {
                Binding::RpcClient { slot }
                | Binding::RpcServer { slot }
                | Binding::EventEmitter { slot }
                | Binding::EventConsumer { slot }
                | Binding::IoPortUser { slot } => {
                    names.slot.entry(slot).or_insert(name);
                }
                Binding::InterruptConsumer { slot, irq_handler_slot } => {
                    names.slot.entry(slot).or_insert(name);
                    names.handler.entry(irq_handler_slot).or_insert(name);
                }
                Binding::Dataport { vaddr, .. } => {
                    names.vaddr.entry(vaddr).or_insert(name);
                }
                Binding::Unconnected => {}
            }
        }
        names
    }

    /// `component.interface` of the capability in `slot`; the console's
    /// wiring, which has no interface, by what it is; else `component.?`.
    fn cap(&self, c: &Component, slot: u64) -> String {
        match self.slot.get(&slot).or_else(|| self.handler.get(&slot)) {
            Some(name) => format!("{}.{name}", c.name),
            None if c.log_ring.as_ref().is_some_and(|r| r.signal_slot == slot) => format!("{}.(log signal)", c.name),
            None if c.log_server.as_ref().is_some_and(|l| l.wait_slot == slot) => format!("{}.(log wait)", c.name),
            None => format!("{}.?", c.name),
        }
    }

    /// `component.dataport` of the mapping at `vaddr`, or `component.?`.
    fn mapping(&self, c: &Component, vaddr: u64) -> String {
        match self.vaddr.get(&vaddr) {
            Some(name) => format!("{}.{name}", c.name),
            None => format!("{}.?", c.name),
        }
    }
}

fn access_letters(access: Access) -> &'static str {
    match access {
        Access::ReadOnly => "R",
        Access::ReadWrite => "RW",
    }
}

fn rights_letters(r: Rights) -> String {
    let mut s = String::new();
    for (on, letter) in [(r.read, "R"), (r.write, "W"), (r.grant, "G"), (r.grant_reply, "P")] {
        if on {
            s.push_str(letter);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

/// Every end of every object, one line each, in object order: the
/// object, what it is, who holds it and with which rights (mappings:
/// `R`/`RW`; capabilities: `R` receive, `W` send, `G` grant, `P`
/// grant-reply, `-` none, then the badge). Made for review: a change in
/// anybody's rights is a changed line (`tests/golden/iolite-rights.txt`).
pub fn rights_table(spec: &SystemSpec) -> String {
    use std::fmt::Write;
    // Every end, bucketed by object in one pass over the components (in
    // their order, mappings before capabilities, as the table lists them),
    // then the console rings, which the loader maps outside the dataports.
    let mut ends: Vec<Vec<String>> = vec![Vec::new(); spec.objects.len()];
    for c in &spec.components {
        let names = EndNames::of(c);
        for m in &c.mappings {
            let cached = if m.cached { "" } else { " uncached" };
            let end = names.mapping(c, m.vaddr);
            if let Some(lines) = ends.get_mut(m.object.0 as usize) {
                lines.push(format!("{end:<24} map {}{cached}", access_letters(m.access)));
            }
        }
        for cap in &c.caps {
            let badge = if cap.badge != 0 { format!(" badge {:#x}", cap.badge) } else { String::new() };
            let end = names.cap(c, cap.slot);
            if let Some(lines) = ends.get_mut(cap.object.0 as usize) {
                lines.push(format!("{end:<24} cap {}{badge}", rights_letters(cap.rights)));
            }
        }
    }
    let mut rings: Vec<Vec<String>> = vec![Vec::new(); spec.objects.len()];
    for c in &spec.components {
        let mut ring_line = |ring: ObjectId, line: String| {
            if let Some(lines) = rings.get_mut(ring.0 as usize) {
                lines.push(line);
            }
        };
        if let Some(r) = &c.log_ring {
            ring_line(r.ring, format!("{:<24} map RW", format!("{}.(log ring)", c.name)));
        }
        if let Some(l) = &c.log_server {
            let mut read = std::collections::HashSet::new();
            for r in l.rings.iter().filter(|r| read.insert(r.ring)) {
                ring_line(r.ring, format!("{:<24} map R", format!("{}.(log rings)", c.name)));
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "# {:<18} {:<28} {:<24} rights", "object", "kind", "end (component.interface)");
    for (i, o) in spec.objects.iter().enumerate() {
        let kind = match &o.kind {
            ObjectKind::Endpoint => "endpoint".to_string(),
            ObjectKind::Notification => "notification".to_string(),
            ObjectKind::Frames { size } => format!("frames {size:#x}"),
            ObjectKind::DeviceFrames { paddr, size } => format!("device {paddr:#x}+{size:#x}"),
            ObjectKind::IoApicIrq(irq) => format!("irq pin {} badge {:#x}", irq.pin, irq.badge),
            ObjectKind::IoPorts { first, last } => format!("ports {first:#x}:{last:#x}"),
            // The device bound to the driver at boot.
            ObjectKind::PciBarFrames { driver, bar, size } => format!("pci bar{bar}+{size:#x} ({driver})"),
            ObjectKind::PciBarPorts { driver, bar } => format!("pci bar{bar} ports ({driver})"),
            ObjectKind::PciIrq(irq) => format!("pci irq badge {:#x} ({})", irq.badge, irq.driver),
        };
        let mut holders = 0;
        for end in ends[i].iter().chain(&rings[i]) {
            let _ = writeln!(out, "{:<20} {kind:<28} {end}", o.name);
            holders += 1;
        }
        if holders == 0 {
            let _ = writeln!(out, "{:<20} {kind:<28} {:<24} -", o.name, "(nobody)");
        }
    }
    out
}
