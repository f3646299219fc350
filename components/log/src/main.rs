//! log: the console server (camkes/iolite.camkes, examples/netecho/netecho.camkes).
//!
//! It alone writes COM1 (its `serial` I/O port capability, the same on debug
//! and release kernels). Every other component has a one-page log ring the
//! compiler derived from the assembly (`log.log_server = true`; see
//! `component_runtime::logring`): the component's console writes each line
//! into one slot and signals the notification this server waits on. The
//! server then prints every line it finds as `[name] text`, whole, with the
//! name from the spec (not from the ring, which its writer controls), and
//! the lines of all rings in the order of their time stamps. The root task
//! has a ring too, used while this server runs, so the supervisor's
//! reports do not cut into a line either.
//!
//! Why a notification, not polling on the ticker: a line costs its writer
//! one slot copy and one seL4_Signal (no wait, no reply), the server sleeps
//! while nobody prints, and lines appear at once rather than a tick later
//! (the tests wait for them); the server needs no clock and works in
//! assemblies without a ticker.
//!
//! Writers never wait for the server: a ring that is full loses its oldest
//! line. The server runs above the data path (camkes/iolite.camkes), so a
//! fault report reaches the serial line while clients keep the system
//! busy; a line costs the server far more (port writes) than it costs its
//! writer, so each ring has a budget of lines per second
//! (`logring::LineBudget`) and lines beyond it are passed over. Both
//! losses are counted and reported at most once a second per ring:
//! `[log] netstack: 12 lines dropped (ring full), 3000 over its budget`.
//!
//! Lines it prints itself: `[log] printing the lines of N components`,
//! `[log] NAME: N lines dropped (ring full), M over its budget`.
#![no_std]
#![no_main]

use component_runtime::logring::{LineBudget, Reader, Ring};
use component_runtime::start::{StartInfo, MAX_LOG_RINGS, START_FLAG_LOG_SERVER};
use component_runtime::{console, error, log};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/log.rs"));

struct Source {
    ring: &'static Ring,
    /// The writer's name; "" for the root task, whose lines name themselves.
    name: &'static str,
    reader: Reader,
    budget: LineBudget,
    /// Lines lost (ring full) and passed over (budget) not yet reported.
    lost: u64,
    over: u64,
    reported_ms: u64,
}

/// Losses of a ring are reported at most this often.
const REPORT_EVERY_MS: u64 = 1000;

fn main(start: &'static StartInfo) -> ! {
    console::init_io_port(glue::serial::SLOT);
    if start.flags & START_FLAG_LOG_SERVER == 0 {
        error!("no log rings: the assembly does not make this instance its log server (log_server = true)");
        component_runtime::exit(1);
    }
    let mut sources: [Option<Source>; MAX_LOG_RINGS] = [const { None }; MAX_LOG_RINGS];
    for (slot, record) in sources.iter_mut().zip(start.log_rings()) {
        // SAFETY: the loader mapped this ring read-only at `vaddr` for our
        // whole life; a Ring is only atomics.
        let ring = unsafe { &*(record.vaddr as *const Ring) };
        // A restarted server starts at the rings' heads: what its dead
        // incarnation had not printed is not printed twice or half.
        let next = if start.restarts == 0 { 0 } else { ring.head() };
        let now = component_runtime::time::now_ms();
        *slot = Some(Source {
            ring,
            name: record.name(),
            reader: Reader::new(next),
            budget: LineBudget::new(now),
            lost: 0,
            over: 0,
            reported_ms: 0,
        });
    }
    // What the rings hold was written before this line: print it first.
    drain(&mut sources);
    let writers = sources.iter().flatten().filter(|s| !s.name.is_empty()).count();
    log!("printing the lines of {writers} components");
    loop {
        drain(&mut sources);
        sel4::wait(start.log_wait_slot);
    }
}

/// Prints every line the rings hold, oldest stamp first, then what each
/// ring lost.
fn drain(sources: &mut [Option<Source>]) {
    loop {
        let mut oldest: Option<(usize, u64)> = None;
        for (i, s) in sources.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            if let Some(line) = s.reader.peek(s.ring) {
                if oldest.is_none_or(|(_, stamp)| line.stamp < stamp) {
                    oldest = Some((i, line.stamp));
                }
            }
        }
        let Some((i, _)) = oldest else { break };
        let s = sources[i].as_mut().expect("found above");
        if s.budget.take(component_runtime::time::now_ms()) {
            if let Some(line) = s.reader.peek(s.ring) {
                print(s.name, line.text());
            }
        } else {
            s.over += 1;
        }
        // A long backlog is work done, not a hang (component_runtime::liveness).
        component_runtime::sel4::progress();
        s.reader.consume();
    }
    let now = component_runtime::time::now_ms();
    for s in sources.iter_mut().flatten() {
        s.lost += s.reader.take_dropped();
        if (s.lost > 0 || s.over > 0) && now.saturating_sub(s.reported_ms) >= REPORT_EVERY_MS {
            let name = if s.name.is_empty() { "roottask" } else { s.name };
            log!("{name}: {} lines dropped (ring full), {} over its budget", s.lost, s.over);
            (s.lost, s.over, s.reported_ms) = (0, 0, now);
        }
    }
}

fn print(name: &str, text: &[u8]) {
    if !name.is_empty() {
        console::put_byte(b'[');
        name.bytes().for_each(console::put_byte);
        console::put_byte(b']');
        console::put_byte(b' ');
    }
    text.iter().copied().for_each(console::put_byte);
    console::put_byte(b'\r');
    console::put_byte(b'\n');
}
