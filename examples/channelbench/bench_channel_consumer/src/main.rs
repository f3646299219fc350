//! bench_channel_consumer: the receiving side of the channel benchmark (see
//! `stream_common::bench`): reads every byte of every message.
#![no_std]
#![no_main]

use stream_common::iolite::{PoolLayout, RoRegion, RwRegion};
use stream_common::{bench, CHANNEL_DATAPORT_MIN};

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_channel_consumer.rs"));

const POOL_PAGES: u32 = PoolLayout::fitting(glue::bench_pool::SIZE).pages;
const _: () = assert!(glue::channel::SIZE >= CHANNEL_DATAPORT_MIN, "channel dataport too small");
/// The private pool: one 1 MiB copy at a time, with room to spare.
const PRIVATE_PAGES: u32 = 320;
const _: () = assert!(PRIVATE_PAGES as usize * 4096 >= bench::MAX_MESSAGE, "private pool too small");

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    let pool = glue::bench_pool::get();
    let channel = glue::channel::get();
    // SAFETY: mapped (read-only, read-write) for as long as we run.
    let (pool, channel) = unsafe {
        (
            RoRegion::from_raw_parts(pool.as_ptr(), pool.len()).expect("pool"),
            RwRegion::from_raw_parts(channel.as_mut_ptr(), channel.len()).expect("channel"),
        )
    };
    let (private, private_meta) = stream_common::static_pool!(PRIVATE_PAGES);
    bench::consume(bench::ConsumerPorts {
        pool_id: glue::pools::BENCH_POOL,
        pool,
        pool_meta: stream_common::static_meta!(POOL_PAGES),
        private,
        private_meta,
        channel,
        signal_space: glue::space::emit,
        wait_data: || {
            glue::data::wait();
        },
    });
    component_runtime::exit(0)
}
