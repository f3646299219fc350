//! Client glue calling server glue through the mock `sel4`: every method
//! of the hello example's Echo procedure round-trips its arguments.
#![deny(warnings)]

mod client {
    include!(concat!(env!("GLUE_DIR"), "/hello_client.rs"));
}
mod server {
    include!(concat!(env!("GLUE_DIR"), "/hello_server.rs"));
}
mod reader {
    include!(concat!(env!("GLUE_DIR"), "/hello_reader.rs"));
}
// Compiled only: IO ports, IRQs and several RPC roles in one component.
#[allow(dead_code)]
mod pci_config {
    include!(concat!(env!("GLUE_DIR"), "/pci_config.rs"));
}

use std::cell::Cell;

thread_local! {
    static LAST_SENDER: Cell<u64> = const { Cell::new(0) };
}

struct Echo;

impl server::glue::echo::Echo for Echo {
    fn echo_int(&mut self, value: i32) -> i32 {
        value
    }
    fn add(&mut self, a: u64, b: u64, overflow: &mut u8) -> u64 {
        let (sum, o) = a.overflowing_add(b);
        *overflow = o as u8;
        sum
    }
    fn swap(&mut self, a: &mut u32, b: &mut u32) {
        std::mem::swap(a, b)
    }
    fn is_even(&mut self, value: i32) -> bool {
        value % 2 == 0
    }
    fn count_bytes(&mut self, text: &str) -> u32 {
        assert!(text.starts_with("héllo") || text.is_empty());
        text.len() as u32
    }
    fn ping(&mut self) {
        LAST_SENDER.with(|s| s.set(server::glue::echo::sender_badge()));
    }
}

fn main() {
    sel4::serve(|badge, info, mrs| server::glue::echo::handle(&mut Echo, badge, info, mrs));
    use client::glue::echo;
    assert_eq!(echo::echo_int(-5), -5);
    assert_eq!(echo::echo_int(i32::MIN), i32::MIN);
    let mut overflow = 7;
    assert_eq!(echo::add(u64::MAX, 2, &mut overflow), 1);
    assert_eq!(overflow, 1);
    assert_eq!(echo::add(40, 2, &mut overflow), 42);
    assert_eq!(overflow, 0);
    let (mut a, mut b) = (1, u32::MAX);
    echo::swap(&mut a, &mut b);
    assert_eq!((a, b), (u32::MAX, 1));
    assert!(echo::is_even(-4));
    assert!(!echo::is_even(3));
    // 45 bytes: a length word and 6 packed words, past MR3 into the buffer.
    let text = "héllo, this text needs more than four words!";
    assert_eq!(echo::count_bytes(text), text.len() as u32);
    assert_eq!(echo::count_bytes(""), 0);
    let long = format!("héllo{}", "x".repeat(client::glue::rt::MAX_STRING_BYTES - 6));
    assert_eq!(echo::count_bytes(&long), long.len() as u32);
    echo::ping();
    assert_eq!(LAST_SENDER.with(|s| s.get()), echo::SLOT + 100);

    // Notifications: the mock delivers on the same slot number.
    assert_eq!(client::glue::ready::SLOT, 2);
    client::glue::ready::emit();
    assert_eq!(sel4::poll(2), 1);

    // Dataports: the rights are in the types.
    let rw: client::glue::rt::Dataport<client::glue::rt::ReadWrite> = client::glue::buffer::get();
    let ro: reader::glue::rt::Dataport<reader::glue::rt::ReadOnly> = reader::glue::buffer::get();
    assert_eq!((rw.len(), ro.len()), (8192, 8192));
    assert_eq!(pci_config::glue::ports::in16(0xcfc).unwrap(), 0xcfc);
    println!("loopback ok");
}
