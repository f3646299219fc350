//! stream_consumer: receives the stream from stream_producer, checks its
//! order and checksum and reports (see `stream_common::stream`). Then, once
//! the producer has printed its final report, it writes into a buffer it
//! received: the pool is mapped read-only here, so the write faults, the
//! supervisor reports `FAULT in component stream_consumer` and restarts it
//! (it is `restartable`). The restarted consumer (`StartInfo.restarts` > 0)
//! does not fault again: it tells the producer and exits.
#![no_std]
#![no_main]

use component_runtime::{error, log};
use stream_common::iolite::{PoolLayout, RoRegion, RwRegion};
use stream_common::{stream, CHANNEL_DATAPORT_MIN};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/stream_consumer.rs"));

const POOL_PAGES: u32 = PoolLayout::fitting(glue::stream_pool::SIZE).pages;
const _: () = assert!(glue::channel::SIZE >= CHANNEL_DATAPORT_MIN, "channel dataport too small");
/// The private pool: room for the largest aggregate, which the copying
/// modes copy into one buffer.
const PRIVATE_PAGES: u32 = 160;
const _: () = assert!(PRIVATE_PAGES as usize * 4096 >= stream::MAX_AGGREGATE as usize, "private pool too small");

fn main(start: &'static component_runtime::start::StartInfo) -> ! {
    let channel = glue::channel::get();
    // SAFETY: mapped read-write for as long as we run; used only through
    // the IO-Lite library and the control block from here on.
    let channel = unsafe { RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()) }.expect("channel");
    if start.restarts > 0 {
        log!("consumer restarted (restart {}): the stream is over, not writing again", start.restarts);
        stream::announce_restart(channel, start.restarts, glue::space::emit);
        component_runtime::exit(0)
    }
    let pool = glue::stream_pool::get();
    // SAFETY: mapped read-only for as long as we run.
    let pool = unsafe { RoRegion::from_raw_parts(pool.as_ptr(), pool.len()) }.expect("pool");
    let (private, private_meta) = stream_common::static_pool!(PRIVATE_PAGES);
    let report = stream::consume(stream::ConsumerPorts {
        pool_id: glue::pools::STREAM_POOL,
        pool,
        pool_meta: stream_common::static_meta!(POOL_PAGES),
        private,
        private_meta,
        channel,
        signal_space: glue::space::emit,
        wait_data: || {
            glue::data::wait();
        },
        // Fault holding part of the stream: the producer must get it back
        // through the death protocol (tests/robot/iolite.robot).
        hold_at_end: stream::MAX_HELD,
    });
    if report.probe_received {
        log!("writing to a received buffer (expect a fault) at {:#x}", report.probe);
    } else {
        log!(
            "writing to the producer's pool (expect a fault) at {:#x}: in mode {} the received data are private copies",
            report.probe,
            stream_common::iolite::BUILD_COPY_MODE.name()
        );
    }
    write_read_only(report.probe as *mut u8);
    // Only reached if the pool were mapped writable.
    error!("the write into the producer's pool did not fault");
    component_runtime::exit(1)
}

/// Writes the byte at `ptr` back unchanged (as hello_reader does): the
/// write must fault; if the mapping were wrongly writable, nothing changes.
fn write_read_only(ptr: *mut u8) {
    // SAFETY: `ptr` is inside the pool dataport, mapped (readable) for the
    // component's lifetime. The write is meant to fault.
    unsafe {
        let value = core::ptr::read_volatile(ptr);
        core::ptr::write_volatile(ptr, value);
    }
}
