//! The glue snapshots compile against the real `sel4` crate: if its API
//! drifts from what the generator emits, this test stops compiling. (The
//! snapshots are kept equal to the generator's output by tests/examples.rs.)
#![deny(warnings)]

mod hello_client {
    include!("snapshots/hello/hello_client.rs");
}
mod hello_server {
    include!("snapshots/hello/hello_server.rs");
}
mod hello_reader {
    include!("snapshots/hello/hello_reader.rs");
}
mod pci_config {
    include!("snapshots/iolite/pci_config.rs");
}
mod ticker {
    include!("snapshots/iolite/ticker.rs");
}
mod netdrv {
    include!("snapshots/iolite/netdrv.rs");
}
mod netstack {
    include!("snapshots/iolite/netstack.rs");
}
mod fs {
    include!("snapshots/iolite/fs.rs");
}
mod cgi {
    include!("snapshots/iolite/cgi.rs");
}
mod httpd {
    include!("snapshots/iolite/httpd.rs");
}

struct Echo;

impl hello_server::glue::echo::Echo for Echo {
    fn echo_int(&mut self, value: i32) -> i32 {
        value
    }
    fn add(&mut self, a: u64, b: u64, overflow: &mut u8) -> u64 {
        let (sum, o) = a.overflowing_add(b);
        *overflow = o as u8;
        sum
    }
    fn swap(&mut self, a: &mut u32, b: &mut u32) {
        core::mem::swap(a, b)
    }
    fn is_even(&mut self, value: i32) -> bool {
        value % 2 == 0
    }
    fn count_bytes(&mut self, text: &str) -> u32 {
        text.len() as u32
    }
    fn ping(&mut self) {}
}

#[test]
fn glue_compiles_and_exposes_the_layout() {
    use hello_client::glue as client;
    use hello_reader::glue as reader;
    assert_eq!(client::echo::SLOT, 1);
    assert_eq!(client::ready::SLOT, 2);
    assert_eq!(client::buffer::VADDR, 0x1_0000_0000);
    assert_eq!(reader::buffer::SIZE, 8192);
    // irq, kick, pci_config, wake, tick: slots 1..=5; the IRQ handler
    // after them. The interrupt shares kick's notification (badge bit 2,
    // after netstack's 1).
    assert_eq!(netdrv::glue::irq::IRQ_HANDLER_SLOT, 6);
    assert_eq!(netdrv::glue::irq::BADGE, 2);
    // Function items are typed: taking them checks signatures without
    // making system calls on the host.
    let _: fn(u64, u64, &mut u8) -> u64 = client::echo::add;
    let _: fn() = client::ready::emit;
    let _: fn() -> reader::rt::Dataport<reader::rt::ReadOnly> = reader::buffer::get;
    let _: fn(u16) -> sel4::Result<u8> = pci_config::glue::ports::in8;
    let _: fn(u32, u32) -> u32 = netdrv::glue::pci_config::read32;
    let _: fn() -> sel4::Result<()> = netdrv::glue::irq::acknowledge;
    let _ = hello_server::glue::echo::run::<Echo>;
    let (info, mrs) = hello_server::glue::echo::handle(&mut Echo, 1, sel4::MessageInfo::new(0, 0, 0, 1), [41, 0, 0, 0]);
    assert_eq!((info.label(), info.length(), mrs[0]), (0, 1, 41));
    let (info, _) = hello_server::glue::echo::handle(&mut Echo, 1, sel4::MessageInfo::new(99, 0, 0, 0), [0; 4]);
    assert_eq!(info.label(), hello_server::glue::rt::BAD_REQUEST);
    let (info, _) = hello_server::glue::echo::handle(&mut Echo, 1, sel4::MessageInfo::new(1, 0, 0, 1), [0; 4]);
    assert_eq!(info.label(), hello_server::glue::rt::BAD_REQUEST, "a short message is rejected");
}

#[test]
fn the_compiler_and_glue_rt_agree_on_the_string_limit() {
    // The compiler rejects what the glue could not carry; both must use
    // one limit.
    assert_eq!(camkes::glue::MAX_STRING_BYTES, glue_rt::MAX_STRING_BYTES);
}
