//! bench_glue_server: answers `RpcBench.echo` through the generated glue
//! (`glue::rpc::run`), the path every real component's RPC takes.
#![no_std]
#![no_main]

use component_runtime::log;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/bench_glue_server.rs"));

struct Echo;

impl glue::rpc::RpcBench for Echo {
    fn echo(&mut self, value: u64) -> u64 {
        value
    }
}

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    log!("glue server ready");
    glue::rpc::run(&mut Echo)
}
