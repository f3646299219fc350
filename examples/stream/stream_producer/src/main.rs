//! stream_producer: streams a deterministic pseudo-random byte stream to
//! stream_consumer as IO-Lite aggregates of its pool (see
//! `stream_common::stream` for the stream, the lines printed and the
//! ordering protocol), waits for every release, reports, and then waits
//! for the consumer's restarted incarnation (the consumer faults on purpose
//! after the report) before exiting.
#![no_std]
#![no_main]

use stream_common::{iolite::PoolLayout, stream, CHANNEL_DATAPORT_MIN};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/stream_producer.rs"));

/// Data pages of the pool dataport.
const POOL_PAGES: u32 = PoolLayout::fitting(glue::stream_pool::SIZE).pages;
const _: () = assert!(
    PoolLayout { pages: POOL_PAGES }.region_bytes() == glue::stream_pool::SIZE,
    "pool dataport: not header + whole pages"
);
const _: () = assert!(stream_common::release_ring_fits(POOL_PAGES), "pool larger than the release ring");
const _: () = assert!(glue::channel::SIZE >= CHANNEL_DATAPORT_MIN, "channel dataport too small");

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    let pool = glue::stream_pool::get();
    let channel = glue::channel::get();
    // SAFETY: the dataports are mapped read-write for as long as we run and
    // are used only through the IO-Lite library from here on.
    let (pool, channel) = unsafe {
        (
            stream_common::iolite::RwRegion::from_raw_parts(pool.as_mut_ptr(), pool.len()).expect("pool"),
            stream_common::iolite::RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()).expect("channel"),
        )
    };
    stream::produce(
        stream::ProducerPorts {
            pool_id: glue::pools::STREAM_POOL,
            pool,
            pool_meta: stream_common::static_meta!(POOL_PAGES),
            channel,
            signal_data: glue::data::emit,
            wait_space: || {
                glue::space::wait();
            },
        },
        true,
    );
    component_runtime::log!("producer done");
    component_runtime::exit(0)
}
