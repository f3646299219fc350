//! bench_raw_server: answers bench_client's calls with a bare seL4
//! Recv/ReplyRecv loop on its endpoint slot. It takes nothing from the glue
//! but the slot number: no decoding, no label or length check, no typed
//! method. This is the "plain seL4 Call/ReplyRecv" baseline next to which
//! the glue's round trip is reported.
#![no_std]
#![no_main]

use component_runtime::log;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_raw_server.rs"));

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    log!("raw server ready");
    let slot = glue::rpc::SLOT;
    // Echo MR0 back in a one-word reply with label 0, as the glue would.
    let reply = sel4::MessageInfo::new(0, 0, 0, 1);
    let (_info, _badge, mut mrs) = sel4::recv(slot);
    loop {
        (_, _, mrs) = sel4::reply_recv(slot, reply, [mrs[0], 0, 0, 0]);
    }
}
