//! The three example assemblies of the checked CAmkES reference (verified
//! against the upstream parser): all parse; the ones within our subset
//! compile; where we are stricter, the error says why.

use camkes::imports::MemoryFiles;
use std::path::Path;
use system_spec::{Access, Binding, ObjectKind};

const RPC: &str = r#"/* Example 1: synchronous RPC between two components. */
import <std_connector.camkes>;

procedure KeyValue {
    include <stdint.h>;
    int      get(in string key, out uint32_t value);
    void     put(refin string key, in uint32_t value);
    uint32_t count(void);
    int      bulk(in int keys[], inout int status);
};

component Client {
    control;                      // has a run() thread
    uses KeyValue kv;
    attribute string label;
    attribute int retries = 3;    // default used when not configured
}

component Store {
    provides KeyValue kv;
    has mutex lock;
    attribute int capacity;
}

assembly {
    composition {
        component Client client;
        component Store  store;
        connection seL4RPCCall client_store(from client.kv, to store.kv);
    }
    configuration {
        client.label          = "alpha";
        client.priority       = 100;     // all threads of client
        client._stack_size    = 8192;    // control thread only
        store.capacity        = 0x40;
        store.kv_priority     = 150;     // interface thread of store.kv
        store.heap_size       = 16384;
        store.cnode_size_bits = 10;
        store.affinity        = 0;
    }
}
"#;

const SHARED: &str = r#"/* Example 2: shared memory, read-write for the producer, read-only for the consumer. */
import <std_connector.camkes>;

component Producer {
    control;
    dataport Buf(8192) frame;
    emits Ready ready;
}

component Consumer {
    control;
    dataport Buf(8192) frame;
    consumes Ready ready;
}

assembly {
    composition {
        component Producer producer;
        component Consumer consumer;
        connection seL4SharedData   frame_conn(from producer.frame, to consumer.frame);
        connection seL4Notification ready_conn(from producer.ready, to consumer.ready);
    }
    configuration {
        producer.frame_access = "RW";
        consumer.frame_access = "R";
    }
}
"#;

const HARDWARE: &str = r#"/* Example 3 (x86): a device with MMIO registers, an IOAPIC interrupt and an I/O port range. */
import <std_connector.camkes>;   /* also brings in procedure IOPort */

component UartDevice {
    hardware;
    dataport Buf(0x1000) regs;
    emits Interrupt irq;
    provides IOPort ports;
}

component UartDriver {
    control;
    dataport Buf(0x1000) regs;
    consumes Interrupt irq;
    uses IOPort ports;
    has semaphore rx_ready;
}

assembly {
    composition {
        component UartDevice uart_hw;
        component UartDriver uart_drv;
        connection seL4HardwareMMIO      uart_mmio(from uart_drv.regs, to uart_hw.regs);
        connection seL4HardwareInterrupt uart_irq (from uart_hw.irq,   to uart_drv.irq);
        connection seL4HardwareIOPort    uart_io  (from uart_drv.ports, to uart_hw.ports);
    }
    configuration {
        uart_hw.regs_paddr           = 0xFED00000;
        uart_hw.regs_size            = 0x1000;      /* must equal sizeof the dataport type */
        uart_hw.regs_hardware_cached = false;
        uart_hw.irq_irq_type         = "ioapic";
        uart_hw.irq_irq_ioapic       = 0;
        uart_hw.irq_irq_ioapic_pin   = 4;
        uart_hw.irq_irq_level        = 0;           /* edge */
        uart_hw.irq_irq_polarity     = 0;           /* active high */
        uart_hw.irq_irq_vector       = 20;
        uart_hw.ports_attributes     = "0x3f8:0x3ff";  /* inclusive range: 8 ports */
        uart_drv.priority            = 200;
        uart_drv.rx_ready_value      = 0;
    }
}
"#;

fn compile(text: &str) -> Result<camkes::Output, String> {
    let mut files = MemoryFiles::default();
    files.add("x.camkes", text);
    camkes::compile(Path::new("x.camkes"), &[], &files).map_err(|d| d.to_string())
}

#[test]
fn all_three_parse() {
    for text in [RPC, SHARED, HARDWARE] {
        camkes::parser::parse(camkes::lexer::lex(&"x.camkes".into(), text).unwrap()).unwrap();
    }
}

#[test]
fn the_shared_data_example_compiles() {
    let out = compile(SHARED).unwrap();
    let consumer = out.spec.component("consumer").unwrap();
    assert!(matches!(consumer.interfaces[0].binding, Binding::Dataport { access: Access::ReadOnly, size: 8192, .. }));
}

#[test]
fn stricter_rules_are_explained() {
    // Rust components bring their own locks.
    assert!(compile(RPC).unwrap_err().contains("'has mutex' is not supported"));
    assert!(compile(HARDWARE).unwrap_err().contains("'has semaphore' is not supported"));
    // Without the semaphore, the hardware example compiles.
    let text = HARDWARE
        .replace("    has semaphore rx_ready;\n", "")
        .replace("        uart_drv.rx_ready_value      = 0;\n", "");
    let out = compile(&text).unwrap();
    let kinds: Vec<_> = out.spec.objects.iter().map(|o| o.kind.clone()).collect();
    assert!(kinds.contains(&ObjectKind::DeviceFrames { paddr: 0xFED00000, size: 0x1000 }));
    assert!(kinds.contains(&ObjectKind::IoPorts { first: 0x3f8, last: 0x3ff }));
    // One thread per component: per-interface thread attributes are refused.
    let text = RPC.replace("    has mutex lock;\n", "");
    assert!(compile(&text)
        .unwrap_err()
        .contains("per-interface thread attribute 'store.kv_priority' is not supported"));
    let text = text.replace("        store.kv_priority     = 150;     // interface thread of store.kv\n", "");
    assert!(compile(&text).unwrap_err().contains("'store.heap_size' is not supported"));
}
