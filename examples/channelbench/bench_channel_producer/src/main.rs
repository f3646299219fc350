//! bench_channel_producer: the sending side of the channel benchmark (see
//! `stream_common::bench`); bench/channel boots one image per copy mode.
#![no_std]
#![no_main]

use stream_common::iolite::{PoolLayout, RwRegion};
use stream_common::{bench, CHANNEL_DATAPORT_MIN};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_channel_producer.rs"));

const POOL_PAGES: u32 = PoolLayout::fitting(glue::bench_pool::SIZE).pages;
const _: () = assert!(
    PoolLayout { pages: POOL_PAGES }.region_bytes() == glue::bench_pool::SIZE,
    "pool dataport: not header + whole pages"
);
const _: () = assert!(stream_common::release_ring_fits(POOL_PAGES), "pool larger than the release ring");
const _: () = assert!(glue::channel::SIZE >= CHANNEL_DATAPORT_MIN, "channel dataport too small");

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    let pool = glue::bench_pool::get();
    let channel = glue::channel::get();
    // SAFETY: mapped read-write for as long as we run; used only through
    // the IO-Lite library from here on.
    let (pool, channel) = unsafe {
        (
            RwRegion::from_raw_parts(pool.as_mut_ptr(), pool.len()).expect("pool"),
            RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()).expect("channel"),
        )
    };
    bench::produce(
        bench::ProducerPorts {
            pool_id: glue::pools::BENCH_POOL,
            pool,
            pool_meta: stream_common::static_meta!(POOL_PAGES),
            channel,
            signal_data: glue::data::emit,
            wait_space: || {
                glue::space::wait();
            },
        },
        bench::BUDGET_CYCLES,
    );
    component_runtime::exit(0)
}
