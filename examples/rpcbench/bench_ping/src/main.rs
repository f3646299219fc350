//! bench_ping: the far end of the notification round trip. Each `ping`
//! from bench_client is answered with one `pong`.
#![no_std]
#![no_main]

use component_runtime::log;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_ping.rs"));

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    log!("ping ready");
    loop {
        // Pings that arrive while a pong is being sent merge into one (a
        // notification is a bit field, not a queue); bench_client sends the
        // next ping only after its pong, so none is lost.
        glue::ping::wait();
        glue::pong::emit();
    }
}
