//! hello_client: the active half of the hello system.
//!
//! 1. Calls every method of `Echo` on hello_server through the typed glue
//!    and checks each answer (`rpc OK: ...` / `rpc FAILED: ...`).
//! 2. For rounds 1..=3: fills the shared 8 KiB dataport with that round's
//!    pattern (see `pattern.rs`), emits `Ready` to hello_reader, makes one
//!    more RPC, and yields so the reader gets the CPU.
//! 3. Logs `client done` and exits (the supervisor frees it).
#![no_std]
#![no_main]

use component_runtime::log;

mod pattern;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/hello_client.rs"));

/// Dataport rounds; hello.robot expects the reader, restarted after its
/// deliberate fault in round 1, to verify a later one.
const ROUNDS: u32 = 3;

/// Yields after each round. The reader runs at the client's priority, so a
/// yield hands it the CPU when it is runnable; a few of them cover a reader
/// that was just restarted by the supervisor and is still starting up. The
/// reader does not depend on this for correctness (it detects a rewrite
/// under its feet and retries), only for seeing most rounds.
const YIELDS_PER_ROUND: usize = 8;

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    log!("client started");
    match check_rpc() {
        Ok(()) => log!(
            "rpc OK: echo_int(-42)=-42, add(2^64-1,2)=1 overflow=1, add(40,2)=42 overflow=0, \
             swap(7,9)=(9,7), is_even(10)=true, is_even(-3)=false, count_bytes(\"{}\")={}, \
             count_bytes(<{} bytes>)={}, ping()",
            GREETING,
            GREETING.len(),
            LONG_TEXT_LEN,
            LONG_TEXT_LEN
        ),
        Err(what) => log!("rpc FAILED: {}", what),
    }

    let mut buffer = glue::buffer::get();
    for round in 1..=ROUNDS {
        let size = buffer.len();
        pattern::fill(round, size, |offset, bytes| buffer.write(offset, bytes));
        log!("round {}: wrote dataport", round);
        glue::ready::emit();

        let mut overflow = 0;
        let sum = glue::echo::add(u64::from(round), 1000, &mut overflow);
        if sum == u64::from(round) + 1000 && overflow == 0 {
            log!("round {}: rpc OK", round);
        } else {
            log!("round {}: rpc FAILED: add({}, 1000) = {} overflow {}", round, round, sum, overflow);
        }
        for _ in 0..YIELDS_PER_ROUND {
            sel4::yield_now();
        }
    }
    log!("client done");
    component_runtime::exit(0)
}

/// A short string with multi-byte UTF-8 (its byte count is not its
/// character count).
const GREETING: &str = "héllo, Iolite ✓";
/// The glue's limit for an `in string`: long enough that most of it travels
/// in IPC-buffer message registers rather than MR0-3.
const LONG_TEXT_LEN: usize = 800;

/// Calls every `Echo` method once (twice where both outcomes matter) and
/// says which answer was wrong, if any.
fn check_rpc() -> Result<(), &'static str> {
    use glue::echo;

    if echo::echo_int(-42) != -42 {
        return Err("echo_int(-42) did not return -42");
    }

    let mut overflow = 0;
    if echo::add(u64::MAX, 2, &mut overflow) != 1 || overflow != 1 {
        return Err("add(2^64-1, 2) did not return 1 with overflow=1");
    }
    if echo::add(40, 2, &mut overflow) != 42 || overflow != 0 {
        return Err("add(40, 2) did not return 42 with overflow=0");
    }

    let (mut a, mut b) = (7u32, 9u32);
    echo::swap(&mut a, &mut b);
    if (a, b) != (9, 7) {
        return Err("swap(7, 9) did not give (9, 7)");
    }

    if !echo::is_even(10) || echo::is_even(-3) {
        return Err("is_even(10)/is_even(-3) did not give true/false");
    }

    if echo::count_bytes(GREETING) != GREETING.len() as u32 {
        return Err("count_bytes(greeting) is not its UTF-8 length");
    }
    let mut long = [0u8; LONG_TEXT_LEN];
    for (i, b) in long.iter_mut().enumerate() {
        *b = b'a' + (i % 26) as u8;
    }
    let long = core::str::from_utf8(&long).map_err(|_| "long text is not UTF-8")?;
    if echo::count_bytes(long) != LONG_TEXT_LEN as u32 {
        return Err("count_bytes(800-byte text) did not return 800");
    }

    echo::ping();
    Ok(())
}
