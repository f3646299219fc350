//! hello_server: serves the `Echo` procedure (examples/hello/Echo.idl4)
//! to hello_client through the generated glue. Every method is a pure
//! function of its arguments, so the client can check each answer.
#![no_std]
#![no_main]

use component_runtime::log;

component_runtime::component_entry!(main);
include!(concat!(env!("IOLITE_GLUE_DIR"), "/hello_server.rs"));

struct Server;

impl glue::echo::Echo for Server {
    fn echo_int(&mut self, value: i32) -> i32 {
        value
    }

    fn add(&mut self, a: u64, b: u64, overflow: &mut u8) -> u64 {
        let (sum, carried) = a.overflowing_add(b);
        *overflow = u8::from(carried);
        sum
    }

    fn swap(&mut self, a: &mut u32, b: &mut u32) {
        core::mem::swap(a, b);
    }

    fn is_even(&mut self, value: i32) -> bool {
        value % 2 == 0
    }

    fn count_bytes(&mut self, text: &str) -> u32 {
        // Bytes, not characters: the client checks the UTF-8 length.
        text.len() as u32
    }

    fn ping(&mut self) {}
}

fn main(_start: &'static component_runtime::start::StartInfo) -> ! {
    // Calls that arrive before `run` reaches its first receive simply wait
    // in the endpoint's queue, so "ready" here is already true for clients.
    log!("server ready");
    glue::echo::run(&mut Server)
}
