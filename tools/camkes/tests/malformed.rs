//! Malformed inputs: each case is a small system, the message the compiler
//! must give (a substring) and where (line:col in the named file).

use camkes::imports::MemoryFiles;
use std::path::Path;

struct Case {
    name: &'static str,
    /// The root file, `sys/main.camkes`.
    source: &'static str,
    /// Extra files, (path, text).
    extra: &'static [(&'static str, &'static str)],
    message: &'static str,
    /// `file:line:col` when the error is not in the root file, else
    /// `line:col`.
    at: &'static str,
}

const STD: &str = "import <std_connector.camkes>;";

const CASES: &[Case] = &[
    Case {
        name: "unknown component",
        source: r#"import <std_connector.camkes>;
assembly { composition { component Nope n; } }"#,
        extra: &[],
        message: r#"unknown component 'Nope'"#,
        at: "2:36",
    },
    Case {
        name: "forward reference to a component",
        source: r#"import <std_connector.camkes>;
assembly { composition { component Late l; } }
component Late { control; }"#,
        extra: &[],
        message: r#"component 'Late' is used before its definition at sys/main.camkes:3:11"#,
        at: "2:36",
    },
    Case {
        name: "forward reference to a procedure",
        source: r#"component C { control; uses P p; }
procedure P { void f(); }"#,
        extra: &[],
        message: r#"procedure 'P' is used before its definition"#,
        at: "1:29",
    },
    Case {
        name: "duplicate interface name",
        source: r#"procedure P { void f(); }
component C {
    uses P p;
    provides P p;
}"#,
        extra: &[],
        message: r#"duplicate interface name 'p' in component 'C' (first declared at sys/main.camkes:3:12)"#,
        at: "4:16",
    },
    Case {
        name: "maybe provides",
        source: r#"procedure P { void f(); }
component C { maybe provides P p; }"#,
        extra: &[],
        message: r#"'maybe' can only qualify uses, consumes or dataport, not 'provides'"#,
        at: "2:21",
    },
    Case {
        name: "maybe emits",
        source: r#"component C { maybe emits E e; }"#,
        extra: &[],
        message: r#"'maybe' can only qualify uses, consumes or dataport, not 'emits'"#,
        at: "1:21",
    },
    Case {
        name: "keyword as a parameter name",
        source: r#"procedure P { void f(in int to); }"#,
        extra: &[],
        message: r#"'to' is a reserved word and cannot be used as a parameter name"#,
        at: "1:29",
    },
    Case {
        name: "keyword as a component name",
        source: r#"component int { control; }"#,
        extra: &[],
        message: r#"'int' is a reserved word and cannot be used as a component name"#,
        at: "1:11",
    },
    Case {
        name: "C keyword as a method name",
        source: r#"procedure P { void volatile(); }"#,
        extra: &[],
        message: r#"'volatile' is a C keyword and cannot be used as a method name"#,
        at: "1:20",
    },
    Case {
        name: "unquoted import",
        source: r#"import foo.camkes;"#,
        extra: &[],
        message: r#"import path must be quoted ("file") or in angle brackets (<file>), found 'foo'"#,
        at: "1:8",
    },
    Case {
        name: "missing import file",
        source: r#"import "interfaces/Nothere.idl4";"#,
        extra: &[],
        message: r#"import 'interfaces/Nothere.idl4' not found"#,
        at: "1:1",
    },
    Case {
        name: "missing angle import",
        source: r#"import <global-connectors.camkes>;"#,
        extra: &[],
        message: r#"import 'global-connectors.camkes' not found in the import path"#,
        at: "1:1",
    },
    Case {
        name: "connection to an unknown interface",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall c(from a.q, to b.p);
} }"#,
        extra: &[],
        message: r#"instance 'a' (component 'A') has no interface 'q'"#,
        at: "7:37",
    },
    Case {
        name: "connection to an unknown instance",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component B { provides P p; }
assembly { composition {
    component B b;
    connection seL4RPCCall c(from x.p, to b.p);
} }"#,
        extra: &[],
        message: r#"unknown instance 'x'"#,
        at: "6:35",
    },
    Case {
        name: "provides on the from side",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall c(from b.p, to a.p);
} }"#,
        extra: &[],
        message: r#"'b.p' is a provides interface and cannot be a 'from' end (those are uses, emits, dataport)"#,
        at: "7:35",
    },
    Case {
        name: "connector joins the wrong kind",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition {
    component A a; component B b;
    connection seL4Notification c(from a.d, to b.d);
} }"#,
        extra: &[],
        message: r#"seL4Notification connects events (emits/consumes), but 'a.d' is a dataport interface"#,
        at: "6:40",
    },
    Case {
        name: "same end connected twice",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition {
    component A a; component B b;
    connection seL4SharedData one(from a.d, to b.d);
    connection seL4SharedData two(from a.d, to b.d);
} }"#,
        extra: &[],
        message: r#"'a.d' is already connected by 'one' at sys/main.camkes:6:40"#,
        at: "7:40",
    },
    Case {
        name: "same end twice in one connection",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall c(from a.p, from a.p, to b.p);
} }"#,
        extra: &[],
        message: r#"'a.p' is already connected by 'c'"#,
        at: "7:45",
    },
    Case {
        name: "dataport size not page-aligned",
        source: r#"component A { control; dataport Buf(100) d; }"#,
        extra: &[],
        message: r#"dataport size 100 is not a multiple of the 4096-byte page size"#,
        at: "1:33",
    },
    Case {
        name: "Buf and Buf(8192) conflict",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf(8192) d; }
assembly { composition {
    component A a; component B b;
    connection seL4SharedData c(from a.d, to b.d);
} }"#,
        extra: &[],
        message: r#"conflicting types on connection 'c': 'b.d' is 'Buf(8192)' but the end at sys/main.camkes:6:38 is 'Buf'"#,
        at: "6:48",
    },
    Case {
        name: "write-only rights",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition {
    component A a; component B b;
    connection seL4SharedData c(from a.d, to b.d);
  } configuration {
    b.d_access = "W";
} }"#,
        extra: &[],
        message: r#"'b.d_access' = "W": write-only cannot be given"#,
        at: "8:18",
    },
    Case {
        name: "malformed rights",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition {
    component A a; component B b;
    connection seL4SharedData c(from a.d, to b.d);
  } configuration {
    b.d_access = "WR";
} }"#,
        extra: &[],
        message: r#"malformed rights "WR" for 'b.d_access'"#,
        at: "8:18",
    },
    Case {
        name: "read-only on MMIO",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; }
component Drv { control; dataport Buf regs; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
  } configuration {
    dev.regs_paddr = 0xfed00000;
    dev.regs_size = 0x1000;
    drv.regs_access = "R";
} }"#,
        extra: &[],
        message: r#"seL4HardwareMMIO always maps the device read-write"#,
        at: "6:40",
    },
    Case {
        name: "bad port range format",
        source: r#"import <std_connector.camkes>;
component Uart { hardware; provides IOPort ports; }
component Drv { control; uses IOPort ports; }
assembly { composition {
    component Uart uart; component Drv drv;
    connection seL4HardwareIOPort io(from drv.ports, to uart.ports);
  } configuration {
    uart.ports_attributes = "0x3f8-0x3ff";
} }"#,
        extra: &[],
        message: r#"malformed I/O port range "0x3f8-0x3ff" for 'uart.ports_attributes': expected "0xFIRST:0xLAST""#,
        at: "8:29",
    },
    Case {
        name: "empty port range",
        source: r#"import <std_connector.camkes>;
component Uart { hardware; provides IOPort ports; }
component Drv { control; uses IOPort ports; }
assembly { composition {
    component Uart uart; component Drv drv;
    connection seL4HardwareIOPort io(from drv.ports, to uart.ports);
  } configuration {
    uart.ports_attributes = "0x3ff:0x3f8";
} }"#,
        extra: &[],
        message: r#"is empty: the first port is above the last"#,
        at: "8:29",
    },
    Case {
        name: "missing port range",
        source: r#"import <std_connector.camkes>;
component Uart { hardware; provides IOPort ports; }
component Drv { control; uses IOPort ports; }
assembly { composition {
    component Uart uart; component Drv drv;
    connection seL4HardwareIOPort io(from drv.ports, to uart.ports);
} }"#,
        extra: &[],
        message: r#"seL4HardwareIOPort connection 'io' needs 'uart.ports_bar' (an I/O BAR of the PCI device its driver matches) or 'uart.ports_attributes = "0xFIRST:0xLAST"'"#,
        at: "6:57",
    },
    Case {
        name: "control and hardware",
        source: r#"component C {
    control;
    hardware;
}"#,
        extra: &[],
        message: r#"component 'C' cannot be both control and hardware"#,
        at: "3:5",
    },
    Case {
        name: "unterminated block comment",
        source: r#"procedure P { void f(); }
/* this comment
   never ends"#,
        extra: &[],
        message: r#"unterminated block comment"#,
        at: "2:1",
    },
    Case {
        name: "unknown attribute in configuration",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; } configuration { a.colour = "red"; } }"#,
        extra: &[],
        message: r#"unknown attribute 'colour' for instance 'a' (component 'A')"#,
        at: "3:61",
    },
    Case {
        name: "unknown instance in configuration",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; } configuration { b.priority = 1; } }"#,
        extra: &[],
        message: r#"unknown instance or connection 'b'"#,
        at: "3:59",
    },
    Case {
        name: "setting set twice",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; } configuration {
    a.priority = 1;
    a.priority = 2;
} }"#,
        extra: &[],
        message: r#"'a.priority' is already set at sys/main.camkes:4:7"#,
        at: "5:7",
    },
    Case {
        name: "non-optional interface left unconnected",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P p; }
assembly { composition { component A a; } }"#,
        extra: &[],
        message: r#"non-optional interface 'a.p' is not connected"#,
        at: "4:38",
    },
    Case {
        name: "MMIO to a software component",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
component B { control; dataport Buf d; }
assembly { composition {
    component A a; component B b;
    connection seL4HardwareMMIO c(from a.d, to b.d);
} }"#,
        extra: &[],
        message: r#"seL4HardwareMMIO needs a hardware component on its 'to' side; 'b' (component 'B') is not hardware"#,
        at: "6:48",
    },
    Case {
        name: "two emitters on seL4Notification",
        source: r#"import <std_connector.camkes>;
component A { control; emits E e; }
component B { control; consumes E e; }
assembly { composition {
    component A a1; component A a2; component B b;
    connection seL4Notification c(from a1.e, from a2.e, to b.e);
} }"#,
        extra: &[],
        message: r#"seL4Notification permits only one 'from' end"#,
        at: "6:51",
    },
    Case {
        name: "connector without the std import",
        source: r#"procedure P { void f(); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall c(from a.p, to b.p);
} }"#,
        extra: &[],
        message: r#"unknown connector 'seL4RPCCall' (did you forget 'import <std_connector.camkes>;'?)"#,
        at: "6:16",
    },
    Case {
        name: "unsupported std connector",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4DirectCall c(from a.p, to b.p);
} }"#,
        extra: &[],
        message: r#"connector 'seL4DirectCall' is not supported by this compiler"#,
        at: "7:16",
    },
    Case {
        name: "mistyped assignment",
        source: r#"import <std_connector.camkes>;
component A { control; attribute string label; }
assembly { composition { component A a; } configuration { a.label = 5; } }"#,
        extra: &[],
        message: r#"mistyped assignment: 'a.label' is a string attribute, found an integer"#,
        at: "3:69",
    },
    Case {
        name: "manual's IOAPIC spelling",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
component Drv { control; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    dev.irq_irq_ioapic_level = 1;
} }"#,
        extra: &[],
        message: r#"use 'dev.irq_irq_level'"#,
        at: "8:9",
    },
    Case {
        name: "missing MMIO physical address",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; }
component Drv { control; dataport Buf regs; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
  } configuration {
    dev.regs_size = 4096;
} }"#,
        extra: &[],
        message: r#"seL4HardwareMMIO connection 'm' needs 'dev.regs_bar' (a BAR of the PCI device its driver matches) or 'dev.regs_paddr'"#,
        at: "6:53",
    },
    Case {
        name: "MMIO size differs from the dataport",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf(0x2000) regs; }
assembly { composition { component Dev dev; } configuration {
    dev.regs_size = 0x1000;
} }"#,
        extra: &[],
        message: r#"'dev.regs_size' is 0x1000 but dataport 'regs' is Buf(8192)"#,
        at: "4:21",
    },
    Case {
        name: "duplicate IRQ vector",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
component Drv { control; consumes Irq irq; }
assembly { composition {
    component Dev d1; component Dev d2; component Drv v1; component Drv v2;
    connection seL4HardwareInterrupt i1(from d1.irq, to v1.irq);
    connection seL4HardwareInterrupt i2(from d2.irq, to v2.irq);
  } configuration {
    d1.irq_irq_type = "isa"; d1.irq_irq_ioapic_pin = 4; d1.irq_irq_vector = 4;
    d2.irq_irq_type = "isa"; d2.irq_irq_ioapic_pin = 3; d2.irq_irq_vector = 4;
} }"#,
        extra: &[],
        message: r#"IRQ vector 4 is already used by the interrupt at sys/main.camkes:6:46"#,
        at: "7:46",
    },
    Case {
        name: "unsupported IRQ type",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
assembly { composition { component Dev dev; } configuration {
    dev.irq_irq_type = "msi";
} }"#,
        extra: &[],
        message: r#"'dev.irq_irq_type' = "msi" is not supported; use "device" (the interrupt of the PCI function found for the driver), or "ioapic", "isa" or "pci""#,
        at: "4:24",
    },
    Case {
        name: "uppercase hex prefix",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.priority = 0X10; } }"#,
        extra: &[],
        message: r#"hex literals need a lowercase '0x' prefix"#,
        at: "2:72",
    },
    Case {
        name: "leading-zero decimal",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.priority = 010; } }"#,
        extra: &[],
        message: r#"decimal literal '010' has a leading zero"#,
        at: "2:72",
    },
    Case {
        name: "three-part setting",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.b.c = 1; } }"#,
        extra: &[],
        message: r#"a setting is exactly 'name.attribute = value;'"#,
        at: "2:62",
    },
    Case {
        name: "bare identifier value",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.label = red; } }"#,
        extra: &[],
        message: r#"bare identifier 'red' is not allowed"#,
        at: "2:69",
    },
    Case {
        name: "procedure defined twice",
        source: r#"procedure P { void f(); }
procedure P { void g(); }"#,
        extra: &[],
        message: r#"'P' is already defined at sys/main.camkes:1:11"#,
        at: "2:11",
    },
    Case {
        name: "no assembly",
        source: r#"procedure P { void f(); }"#,
        extra: &[],
        message: r#"no assembly"#,
        at: "1:1",
    },
    Case {
        name: "assembly without instances",
        source: r#"assembly { composition { } }"#,
        extra: &[],
        message: r#"the assembly has no component instances"#,
        at: "1:1",
    },
    Case {
        name: "preprocessor directive",
        source: r#"#define SIZE 4096
component A { control; }"#,
        extra: &[],
        message: r#"preprocessor directive '#define' is not supported"#,
        at: "1:1",
    },
    Case {
        name: "unsupported attribute type",
        source: r#"component A { control; attribute bool flag; }"#,
        extra: &[],
        message: r#"unknown attribute type 'bool'; use int, int64_t, uint64_t or string"#,
        at: "1:34",
    },
    Case {
        name: "priority out of range",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.priority = 300; } }"#,
        extra: &[],
        message: r#"'a.priority' = 300 is out of range (0..=255)"#,
        at: "2:72",
    },
    Case {
        name: "a death confirmation bound of 0 ms",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.confirm_death_ms = 0; } }"#,
        extra: &[],
        message: r#"'a.confirm_death_ms' = 0 is out of range (1..=600000)"#,
        at: "2:80",
    },
    Case {
        name: "untrusted is a flag",
        source: r#"component A { control; }
assembly { composition { component A a; } configuration { a.untrusted = 2; } }"#,
        extra: &[],
        message: r#"'a.untrusted' = 2 is out of range (0..=1)"#,
        at: "2:73",
    },
    Case {
        name: "IOPort connector on another procedure",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component Dev { hardware; provides P p; }
component Drv { control; uses P p; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareIOPort io(from drv.p, to dev.p);
} }"#,
        extra: &[],
        message: r#"seL4HardwareIOPort connects 'IOPort' interfaces; 'drv.p' is 'P'"#,
        at: "7:43",
    },
    Case {
        name: "hardware instance on the software side",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component Dev { hardware; uses P p; }
component Srv { provides P p; }
assembly { composition {
    component Dev dev; component Srv srv;
    connection seL4RPCCall c(from dev.p, to srv.p);
} }"#,
        extra: &[],
        message: r#"'dev' is a hardware component and cannot be on the 'from' side of seL4RPCCall"#,
        at: "7:35",
    },
    Case {
        name: "error inside an imported file",
        source: r#"import "interfaces/Bad.idl4";"#,
        extra: &[("sys/interfaces/Bad.idl4", "procedure P { void f(); }\ncomponent C { maybe provides P p; }")],
        message: r#"'maybe' can only qualify"#,
        at: "sys/interfaces/Bad.idl4:2:21",
    },
    Case {
        name: "out string in an RPC method",
        source: r#"import <std_connector.camkes>;
procedure P { void name(out string s); }
component A { control; uses P p; }
component B { provides P p; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall c(from a.p, to b.p);
} }"#,
        extra: &[],
        message: r#"'out string' parameters are not supported by the Rust glue"#,
        at: "2:29",
    },
    Case {
        name: "instances of one type disagree on an attribute",
        source: r#"import <std_connector.camkes>;
component A { control; attribute int pool_id = 1; }
assembly { composition { component A a; component A b; }
  configuration { a.pool_id = 2; b.pool_id = 3; } }"#,
        extra: &[],
        message: r#"instances 'a' and 'b' of component 'A' give attribute 'pool_id' different values"#,
        at: "4:46",
    },
    Case {
        name: "may_restart is not a list",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; component A b; } configuration { b.restartable = true; a.may_restart = "b"; } }"#,
        extra: &[],
        message: r#"mistyped assignment: 'a.may_restart' expects a list of instance names, found a string"#,
        at: "3:112",
    },
    Case {
        name: "may_restart with a non-string",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; component A b; } configuration { b.restartable = true; a.may_restart = ["b", 2]; } }"#,
        extra: &[],
        message: r#"mistyped assignment: 'a.may_restart' expects a string, found an integer"#,
        at: "3:118",
    },
    Case {
        name: "may_restart names an unknown instance",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; component A b; } configuration {
    b.restartable = true;
    a.may_restart = ["b", "c"];
} }"#,
        extra: &[],
        message: r#"'a.may_restart' names 'c', which is not an instance of this assembly"#,
        at: "5:27",
    },
    Case {
        name: "may_restart names a component that is not restartable",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; component A b; } configuration {
    a.may_restart = ["b"];
} }"#,
        extra: &[],
        message: r#"'a.may_restart' names 'b', which is not restartable (set 'b.restartable = true')"#,
        at: "4:22",
    },
    Case {
        name: "may_restart names itself",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; } configuration {
    a.restartable = true;
    a.may_restart = ["a"];
} }"#,
        extra: &[],
        message: r#"'a.may_restart' names 'a' itself"#,
        at: "5:22",
    },
    Case {
        name: "may_restart names a target twice",
        source: r#"import <std_connector.camkes>;
component A { control; }
assembly { composition { component A a; component A b; } configuration {
    b.restartable = true;
    a.may_restart = ["b", "b"];
} }"#,
        extra: &[],
        message: r#"'a.may_restart' names 'b' twice"#,
        at: "5:27",
    },
    Case {
        name: "may_restart names a hardware instance",
        source: r#"import <std_connector.camkes>;
component A { control; }
component Dev { hardware; }
assembly { composition { component A a; component Dev dev; } configuration {
    a.may_restart = ["dev"];
} }"#,
        extra: &[],
        message: r#"'a.may_restart' names hardware instance 'dev', which has no thread to restart"#,
        at: "5:22",
    },
    Case {
        name: "may_restart on a hardware instance",
        source: r#"import <std_connector.camkes>;
component A { control; }
component Dev { hardware; }
assembly { composition { component A a; component Dev dev; } configuration {
    a.restartable = true;
    dev.may_restart = ["a"];
} }"#,
        extra: &[],
        message: r#"'dev.may_restart' does not apply: hardware component 'dev' has no thread"#,
        at: "6:9",
    },
    Case {
        name: "one device's registers in two components",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf(0x2000) regs; }
component Drv { control; dataport Buf(0x2000) regs; }
component Other { control; dataport Buf(0x2000) regs; }
assembly { composition {
    component Dev dev; component Drv drv; component Other other;
    connection seL4HardwareMMIO m(from drv.regs, from other.regs, to dev.regs);
} configuration { dev.regs_paddr = 0xfeb00000; dev.regs_size = 0x2000; } }"#,
        extra: &[],
        message: r#"device memory of 'dev.regs' (0xfeb00000, 0x2000 bytes) is already mapped into 'drv' at sys/main.camkes:7:40; device registers belong to their one driver"#,
        at: "7:55",
    },
    Case {
        name: "one device region through two connections",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf(0x2000) regs; }
component Drv { control; dataport Buf(0x2000) regs; }
assembly { composition {
    component Dev dev; component Dev alias; component Drv drv; component Drv other;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareMMIO n(from other.regs, to alias.regs);
} configuration {
    dev.regs_paddr = 0xfeb00000; dev.regs_size = 0x2000;
    alias.regs_paddr = 0xfeb01000; alias.regs_size = 0x2000;
} }"#,
        extra: &[],
        message: r#"device memory of 'alias.regs' (0xfeb01000..0xfeb03000) overlaps that of 'dev.regs', already mapped into 'drv' at sys/main.camkes:6:40"#,
        at: "7:40",
    },
    Case {
        name: "a reader's end asks for write access",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition {
    component A a; component A b;
    connection seL4SharedData s(from a.d, to b.d);
} configuration { b.d_access = "RW"; } }"#,
        extra: &[],
        message: r#"'b.d' would be a second writer of 's' (after 'a.d' at sys/main.camkes:5:38): a shared region has one writer; map this end read-only ("R"), or say why with 's.shared_writers = "..."'"#,
        at: "5:46",
    },
    Case {
        name: "two owners of one shared region",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition {
    component A a; component A b; component A c;
    connection seL4SharedData s(from a.d, from b.d, to c.d);
} }"#,
        extra: &[],
        message: r#"'b.d' would be a second writer of 's'"#,
        at: "5:48",
    },
    Case {
        name: "a channel with three ends",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition {
    component A a; component A b; component A c;
    connection seL4SharedData s(from a.d, to b.d, to c.d);
} configuration { s.channel = true; } }"#,
        extra: &[],
        message: r#"'s.channel': a channel joins exactly two ends (one 'from', one 'to'), 's' has 3"#,
        at: "6:31",
    },
    Case {
        name: "shared_writers without a reason",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition {
    component A a; component A b;
    connection seL4SharedData s(from a.d, to b.d);
} configuration { s.shared_writers = " "; } }"#,
        extra: &[],
        message: r#"'s.shared_writers' must say why several components write this region"#,
        at: "6:38",
    },
    Case {
        name: "unknown connection attribute",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition {
    component A a; component A b;
    connection seL4SharedData s(from a.d, to b.d);
} configuration { s.colour = 4096; } }"#,
        extra: &[],
        message: r#"unknown attribute 'colour' for connection 's' (connection settings: channel, shared_writers, pool, initialiser)"#,
        at: "6:21",
    },
    Case {
        name: "channel on a notification",
        source: r#"import <std_connector.camkes>;
component E { control; emits Go go; }
component C { control; consumes Go go; }
assembly { composition {
    component E e; component C c;
    connection seL4Notification n(from e.go, to c.go);
} configuration { n.channel = true; } }"#,
        extra: &[],
        message: r#"'n.channel' applies to seL4SharedData connections only, not seL4Notification"#,
        at: "7:21",
    },
    Case {
        name: "irq_notification names a non-event interface",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
component Drv { control; consumes Irq irq; dataport Buf d; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
} configuration {
    dev.irq_irq_type = "isa"; dev.irq_irq_ioapic_pin = 4; dev.irq_irq_vector = 4;
    drv.irq_notification = "d";
} }"#,
        extra: &[],
        message: r#"'drv.irq_notification' names 'd', which is not another 'consumes' interface of 'drv'"#,
        at: "9:28",
    },
    Case {
        name: "irq_notification on an event that is no interrupt",
        source: r#"import <std_connector.camkes>;
component E { control; emits Go go; emits Go go2; }
component Drv { control; consumes Go kick; consumes Go other; }
assembly { composition {
    component E e; component Drv drv;
    connection seL4Notification k(from e.go, to drv.kick);
    connection seL4Notification o(from e.go2, to drv.other);
} configuration { drv.other_notification = "kick"; } }"#,
        extra: &[],
        message: r#"'drv.other' is not connected by seL4HardwareInterrupt: it has no interrupt to deliver elsewhere"#,
        at: "8:44",
    },
    Case {
        name: "interrupt delivered to another interrupt's notification",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
component Drv { control; consumes Irq irq; consumes Irq irq2; }
assembly { composition {
    component Dev dev; component Dev dev2; component Drv drv;
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
    connection seL4HardwareInterrupt j(from dev2.irq, to drv.irq2);
} configuration {
    dev.irq_irq_type = "isa"; dev.irq_irq_ioapic_pin = 4; dev.irq_irq_vector = 4;
    dev2.irq_irq_type = "isa"; dev2.irq_irq_ioapic_pin = 5; dev2.irq_irq_vector = 5;
    drv.irq_notification = "irq2";
} }"#,
        extra: &[],
        message: r#"'drv.irq2' must be connected by seL4Notification or seL4NotificationNative to take the interrupt of 'i'"#,
        at: "11:28",
    },
    // IO-Lite pools (`<connection>.pool = true`): ids are derived, one
    // name end to end.
    Case {
        name: "two pools with the same name",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; dataport Buf q; }
component C { control; dataport Buf p; dataport Buf q; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
    connection seL4SharedData p(from a.q, to b.q);
} configuration { p.pool = true; } }"#,
        extra: &[],
        message: r#"'p' is already defined at sys/main.camkes:6:31"#,
        at: "7:31",
    },
    Case {
        name: "two pools whose glue names differ only in case",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf a_pool; dataport Buf A_pool; }
component C { control; dataport Buf a_pool; dataport Buf A_pool; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData a_pool(from a.a_pool, to b.a_pool);
    connection seL4SharedData A_pool(from a.A_pool, to b.A_pool);
} configuration { a_pool.pool = true; A_pool.pool = true; } }"#,
        extra: &[],
        message: r#"dataports 'a_pool' and 'A_pool' of component 'P' differ only in case: both pools would be glue::pools::A_POOL"#,
        at: "2:58",
    },
    Case {
        name: "a pool named like the glue's table of pools",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf all; }
component C { control; dataport Buf all; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData all(from a.all, to b.all);
} configuration { all.pool = true; } }"#,
        extra: &[],
        message: r#"dataport 'all' of component 'P' cannot be a pool: its glue constant would be glue::pools::ALL"#,
        at: "2:37",
    },
    Case {
        name: "a hand-written pool id",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; attribute int p_id; }
component C { control; dataport Buf p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
} configuration {
    p.pool = true;
    a.p_id = 3;
} }"#,
        extra: &[],
        message: r#"'a.p_id': IO-Lite pool ids are derived from the assembly, not written by hand: 'p' is pool 1 (glue::pools::P); remove this setting"#,
        at: "9:7",
    },
    Case {
        // Ids follow the connections' order, not the settings'.
        name: "a hand-written pool id without a declaration",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; dataport Buf q; }
component C { control; dataport Buf p; dataport Buf q; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
    connection seL4SharedData q(from a.q, to b.q);
} configuration {
    q.pool = true;
    p.pool = true;
    b.p_id = 1;
} }"#,
        extra: &[],
        message: r#"'b.p_id': IO-Lite pool ids are derived from the assembly, not written by hand: 'p' is pool 1 (glue::pools::P)"#,
        at: "11:7",
    },
    Case {
        name: "an attribute declared for a hand-written pool id",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; attribute int p_id = 5; }
component C { control; dataport Buf p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
} configuration { p.pool = true; } }"#,
        extra: &[],
        message: r#"attribute 'p_id' of component 'P': IO-Lite pool ids are derived from the assembly, not written by hand: 'p' is pool 1 (glue::pools::P); remove this attribute"#,
        at: "2:54",
    },
    Case {
        name: "a pool end named unlike its pool",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; }
component C { control; dataport Buf req_p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.req_p);
} configuration { p.pool = true; } }"#,
        extra: &[],
        message: r#"'b.req_p' is an end of IO-Lite pool 'p', so it must be called 'p' too: a pool has one name"#,
        at: "6:46",
    },
    Case {
        name: "a pool that is a channel",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; }
component C { control; dataport Buf p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
} configuration { p.channel = true; p.pool = true; } }"#,
        extra: &[],
        message: r#"'p' is a channel ('p.channel = true'), so it cannot be an IO-Lite pool too"#,
        at: "7:39",
    },
    Case {
        name: "a pool with several writers",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; }
component C { control; dataport Buf p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
} configuration { p.pool = true; p.shared_writers = "both"; } }"#,
        extra: &[],
        message: r#"IO-Lite pool 'p' has one writer, its producer (the 'from' end): it cannot have 'p.shared_writers'"#,
        at: "7:21",
    },
    Case {
        name: "a pool that is no shared memory",
        source: r#"import <std_connector.camkes>;
component P { control; emits E e; }
component C { control; consumes E e; }
assembly { composition {
    component P a; component C b;
    connection seL4Notification e(from a.e, to b.e);
} configuration { e.pool = true; } }"#,
        extra: &[],
        message: r#"'e.pool' applies to seL4SharedData connections only, not seL4Notification"#,
        at: "7:21",
    },
    Case {
        name: "pool is a boolean",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; }
component C { control; dataport Buf p; }
assembly { composition {
    component P a; component C b;
    connection seL4SharedData p(from a.p, to b.p);
} configuration { p.pool = 2; } }"#,
        extra: &[],
        message: r#"'p.pool' = 2 is out of range (0..=1)"#,
        at: "7:28",
    },
    Case {
        name: "instances of a type that differ in a pool",
        source: r#"import <std_connector.camkes>;
component P { control; dataport Buf p; }
component C { control; maybe dataport Buf p; }
assembly { composition {
    component P a; component C b; component C c;
    connection seL4SharedData p(from a.p, to b.p);
} configuration { p.pool = true; } }"#,
        extra: &[],
        message: r#"instances 'b' and 'c' of component 'C' differ in whether dataport 'p' is an IO-Lite pool (the glue, with its pool ids, is one per type)"#,
        at: "5:47",
    },
    Case {
        name: "two components that call each other",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P call; provides P serve; }
component B { control; uses P call; provides P serve; }
assembly { composition {
    component A a; component B b;
    connection seL4RPCCall ab(from a.call, to b.serve);
    connection seL4RPCCall ba(from b.call, to a.serve);
} }"#,
        extra: &[],
        message: r#"RPC calls form a cycle: a -> b -> a (via 'ab' at sys/main.camkes:7:36, 'ba' at sys/main.camkes:8:36)"#,
        at: "8:36",
    },
    Case {
        name: "a component that calls itself",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component A { control; uses P call; provides P serve; }
assembly { composition {
    component A a;
    connection seL4RPCCall self_call(from a.call, to a.serve);
} }"#,
        extra: &[],
        message: r#"RPC calls form a cycle: a -> a (via 'self_call' at sys/main.camkes:6:43)"#,
        at: "6:43",
    },
    Case {
        name: "a ring of three calls behind a tree of calls",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component N { control; maybe uses P call; provides P serve; }
component M { control; uses P x; uses P y; provides P serve; }
assembly { composition {
    component M root; component N leaf; component N a; component N b; component N c;
    connection seL4RPCCall to_leaf(from root.x, to leaf.serve);
    connection seL4RPCCall to_a(from root.y, to a.serve);
    connection seL4RPCCall ab(from a.call, to b.serve);
    connection seL4RPCCall bc(from b.call, to c.serve);
    connection seL4RPCCall ca(from c.call, to root.serve);
} }"#,
        extra: &[],
        message: r#"RPC calls form a cycle: root -> a -> b -> c -> root"#,
        at: "11:36",
    },
    Case {
        name: "an RPC server below its caller",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component S { provides P p; }
assembly { composition { component C c; component S s;
    connection seL4RPCCall call(from c.p, to s.p); }
  configuration { c.priority = 150; s.priority = 100; } }"#,
        extra: &[],
        message: r#"RPC server 's' (priority 100, set at sys/main.camkes:7:50) is below its caller 'c' (priority 150, set at sys/main.camkes:7:32) on 'call': the caller waits while the server works, so every component in between could delay it; give 's' a priority of at least 150"#,
        at: "6:38",
    },
    Case {
        name: "an RPC server below one of several callers, by default",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component S { provides P p; }
assembly { composition { component C a; component C b; component S s;
    connection seL4RPCCall call(from a.p, from b.p, to s.p); }
  configuration { a.priority = 100; s.priority = 200; } }"#,
        extra: &[],
        message: r#"RPC server 's' (priority 200, set at sys/main.camkes:7:50) is below its caller 'b' (priority 254, the default)"#,
        at: "6:48",
    },
    Case {
        name: "an initialiser not above the end that attaches",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition { component A drv; component A stack;
    connection seL4SharedData link(from drv.d, to stack.d); }
  configuration { link.channel = true; link.initialiser = "stack";
    stack.priority = 140; drv._priority = 140; } }"#,
        extra: &[],
        message: r#"'stack' initialises 'link' (priority 140, set at sys/main.camkes:6:22) but 'drv' attaches to it at its start (priority 140, set at sys/main.camkes:6:43): the initialiser must run first, so give 'stack' a priority above 140"#,
        at: "5:59",
    },
    Case {
        name: "an initialiser that is not an end",
        source: r#"import <std_connector.camkes>;
component A { control; dataport Buf d; }
assembly { composition { component A x; component A y; component A z;
    connection seL4SharedData r(from x.d, to y.d); }
  configuration { r.initialiser = "z"; } }"#,
        extra: &[],
        message: r#"'r.initialiser' names 'z', which is not an end of 'r'"#,
        at: "5:35",
    },
    Case {
        name: "a word an attribute does not know",
        source: r#"import <std_connector.camkes>;
component Netstack { control; attribute string checksum; }
assembly { composition { component Netstack netstack; }
  configuration { netstack.checksum = "ofload"; } }"#,
        extra: &[],
        message: r#"'netstack.checksum' = "ofload" is not one of "cached", "software", "offload""#,
        at: "4:39",
    },
    Case {
        name: "a malformed address",
        source: r#"import <std_connector.camkes>;
component Netstack { control; attribute string address = "10.0.2.15/24"; }
assembly { composition { component Netstack netstack; }
  configuration { netstack.address = "10.0.2.15/42"; } }"#,
        extra: &[],
        message: r#"'netstack.address' = "10.0.2.15/42" is not an IPv4 address with a prefix length"#,
        at: "4:38",
    },
    Case {
        name: "a share for an instance that is not a client",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component Fs { control; provides P fs; attribute string client_files[]; }
component S { provides P p; }
assembly { composition { component C httpd; component Fs fs; component S other; component C cgi;
    connection seL4RPCCall r(from httpd.p, to fs.fs); connection seL4RPCCall q(from cgi.p, to other.p); }
  configuration { fs.client_files = ["httpd=520", "cgi=16"]; } }"#,
        extra: &[],
        message: r#"'fs.client_files' names 'cgi', which does not call 'fs.fs' (its clients: httpd)"#,
        at: "8:51",
    },
    Case {
        name: "a client without a share",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component Fs { control; provides P fs; attribute string client_quota[]; }
assembly { composition { component C httpd; component C cgi; component Fs fs;
    connection seL4RPCCall r(from httpd.p, from cgi.p, to fs.fs); }
  configuration { fs.client_quota = ["cgi=64"]; } }"#,
        extra: &[],
        message: r#"'fs.client_quota' gives client 'httpd' no share (every caller of 'fs.fs' needs one)"#,
        at: "7:37",
    },
    Case {
        name: "a client with two shares",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component Fs { control; provides P fs; attribute string client_files[]; }
assembly { composition { component C httpd; component Fs fs;
    connection seL4RPCCall r(from httpd.p, to fs.fs); }
  configuration { fs.client_files = ["httpd=520", "httpd=16"]; } }"#,
        extra: &[],
        message: r#"'fs.client_files' gives 'httpd' a second share (the first at sys/main.camkes:7:38)"#,
        at: "7:51",
    },
    Case {
        name: "a share that is not a number",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component Fs { control; provides P fs; attribute string client_files[]; }
assembly { composition { component C httpd; component Fs fs;
    connection seL4RPCCall r(from httpd.p, to fs.fs); }
  configuration { fs.client_files = ["httpd=many"]; } }"#,
        extra: &[],
        message: r#"'fs.client_files': "httpd=many" does not give a positive number after '='"#,
        at: "7:38",
    },
    Case {
        name: "a grant for an instance that is not a client",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component PciConfig { control; provides P pci; attribute string allow[]; }
assembly { composition { component C fs; component PciConfig pci_config;
    connection seL4RPCCall r(from fs.p, to pci_config.pci); }
  configuration { fs.match = "block"; pci_config.allow = ["fs=block", "2=net"]; } }"#,
        extra: &[],
        message: r#"'pci_config.allow' names '2', which does not call 'pci_config.pci' (its clients: fs)"#,
        at: "7:71",
    },
    Case {
        name: "a match no driver here has",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; emits Irq irq; }
component Drv { control; dataport Buf regs; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    drv.match = "sound"; dev.regs_bar = 0; dev.regs_size = 4096; dev.irq_irq_type = "device"; dev.irq_irq_vector = 5;
} }"#,
        extra: &[],
        message: r#"names no kind of device a driver here drives; use one of "net", "block""#,
        at: "9:17",
    },
    Case {
        name: "a BAR for a driver without a match",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; emits Irq irq; }
component Drv { control; dataport Buf regs; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    dev.regs_bar = 0; dev.regs_size = 4096; dev.irq_irq_type = "device"; dev.irq_irq_vector = 5;
} }"#,
        extra: &[],
        message: r#"is a device found at boot, but its driver 'drv' names no match (set 'drv.match', e.g. "net")"#,
        at: "6:40",
    },
    Case {
        name: "a fixed address and a BAR",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; emits Irq irq; }
component Drv { control; dataport Buf regs; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    drv.match = "net"; dev.regs_paddr = 0x1000; dev.regs_bar = 0; dev.regs_size = 4096;
} }"#,
        extra: &[],
        message: r#"has both '_paddr' and '_bar'"#,
        at: "6:53",
    },
    Case {
        name: "a device interrupt with a fixed pin",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; emits Irq irq; }
component Drv { control; dataport Buf regs; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    drv.match = "net"; dev.regs_bar = 0; dev.regs_size = 4096; dev.irq_irq_type = "device"; dev.irq_irq_ioapic_pin = 11; dev.irq_irq_vector = 5;
} }"#,
        extra: &[],
        message: r#"does not apply: irq type "device" is routed by the loader"#,
        at: "9:118",
    },
    Case {
        name: "a BAR number past 5",
        source: r#"import <std_connector.camkes>;
component Dev { hardware; dataport Buf regs; emits Irq irq; }
component Drv { control; dataport Buf regs; consumes Irq irq; }
assembly { composition {
    component Dev dev; component Drv drv;
    connection seL4HardwareMMIO m(from drv.regs, to dev.regs);
    connection seL4HardwareInterrupt i(from dev.irq, to drv.irq);
  } configuration {
    drv.match = "net"; dev.regs_bar = 6; dev.regs_size = 4096;
} }"#,
        extra: &[],
        message: r#"'dev.regs_bar' = 6 is out of range (0..=5)"#,
        at: "9:39",
    },
    Case {
        name: "a pci_config grant that is not the client's match",
        source: r#"import <std_connector.camkes>;
procedure P { void f(); }
component C { control; uses P p; }
component PciConfig { control; provides P pci; attribute string allow[]; }
assembly { composition { component C fs; component PciConfig pci_config;
    connection seL4RPCCall r(from fs.p, to pci_config.pci); }
  configuration { fs.match = "block"; pci_config.allow = ["fs=net"]; } }"#,
        extra: &[],
        message: r#"'pci_config.allow': "fs=net" is not the device bound to its client: 'fs' drives "block""#,
        at: "7:59",
    },
    Case {
        name: "a default an attribute does not know",
        source: r#"import <std_connector.camkes>;
component Fs { control; attribute string cache_policy = "lfu"; }
assembly { composition { component Fs fs; } }"#,
        extra: &[],
        message: r#"the default of 'cache_policy' = "lfu" is not one of "lru", "gds""#,
        at: "2:57",
    },
];

fn run(case: &Case) -> Result<(), String> {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", case.source);
    for (path, text) in case.extra {
        files.add(path, *text);
    }
    let diag = match camkes::compile(Path::new("sys/main.camkes"), &[Path::new("sys/lib").to_path_buf()], &files) {
        Ok(_) => return Err(format!("{}: compiled, expected '{}'", case.name, case.message)),
        Err(d) => d,
    };
    let at =
        if case.at.matches(':').count() == 1 { format!("sys/main.camkes:{}", case.at) } else { case.at.to_string() };
    let got_at = format!("{}:{}:{}", diag.pos.file, diag.pos.line, diag.pos.col);
    if !diag.message.contains(case.message) || got_at != at {
        return Err(format!("{}:\n  want {at}: ...{}...\n  got  {diag}", case.name, case.message));
    }
    // The CLI form: file:line:col: error: reason, on one line.
    let line = diag.to_string();
    assert!(line.starts_with(&format!("{at}: error: ")) && !line.contains('\n'), "{line}");
    Ok(())
}

#[test]
fn malformed_inputs_give_the_expected_error_and_position() {
    let _ = STD;
    let failures: Vec<String> = CASES.iter().filter_map(|c| run(c).err()).collect();
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

#[test]
fn there_are_enough_cases() {
    assert!(CASES.len() >= 25, "only {} malformed cases", CASES.len());
}

#[test]
fn attributes_become_glue_constants() {
    let mut files = MemoryFiles::default();
    files.add(
        "sys/main.camkes",
        r#"import <std_connector.camkes>;
component A { control; attribute int pool_id = 1; attribute string site = "www"; attribute uint64_t sizes[]; attribute int unset; }
assembly { composition { component A a; component A b; }
  configuration { a.pool_id = 7; b.pool_id = 7; a.sizes = [4096, 65536]; } }"#,
    );
    let output = camkes::compile(Path::new("sys/main.camkes"), &[], &files).expect("compiles");
    let (_, glue) = output.glue.iter().find(|(name, _)| name == "a.rs").expect("glue for A");
    assert!(glue.contains("pub const POOL_ID: i64 = 7;"), "{glue}");
    assert!(glue.contains("pub const SITE: &str = \"www\";"), "{glue}");
    assert!(glue.contains("pub const SIZES: &[u64] = &[4096, 65536];"), "{glue}");
    assert!(!glue.contains("UNSET"), "an attribute without a value has no constant");
}

#[test]
fn several_emitters_share_one_notification_with_a_badge_bit_each() {
    let mut files = MemoryFiles::default();
    files.add(
        "sys/main.camkes",
        r#"import <std_connector.camkes>;
component E { control; emits Wake w; }
component C { control; consumes Wake w; }
assembly { composition {
    component E a; component E b; component C c;
    connection seL4NotificationNative wake(from a.w, from b.w, to c.w);
} }"#,
    );
    let output = camkes::compile(Path::new("sys/main.camkes"), &[], &files).expect("compiles");
    let badges: Vec<u64> = ["a", "b"].iter().map(|n| output.spec.component(n).unwrap().caps[0].badge).collect();
    assert_eq!(badges, [1, 2]);
    assert_eq!(output.spec.objects.len(), 1, "one notification object");
}

#[test]
fn shared_regions_are_read_only_except_for_their_owner() {
    let mut files = MemoryFiles::default();
    files.add(
        "sys/main.camkes",
        r#"import <std_connector.camkes>;
component W { control; dataport Buf pool; dataport Buf chan; dataport Buf both; }
component R { control; dataport Buf pool; dataport Buf chan; dataport Buf both; }
assembly { composition {
    component W a; component R b;
    connection seL4SharedData pool(from a.pool, to b.pool);
    connection seL4SharedData chan(from a.chan, to b.chan);
    connection seL4SharedData both(from a.both, to b.both);
} configuration {
    chan.channel = true;
    both.shared_writers = "a test of the escape hatch";
    b.both_access = "RW";
} }"#,
    );
    let output = camkes::compile(Path::new("sys/main.camkes"), &[], &files).expect("compiles");
    let access = |c: &str, i: usize| output.spec.component(c).unwrap().mappings[i].access;
    use system_spec::Access::{ReadOnly, ReadWrite};
    assert_eq!((access("a", 0), access("b", 0)), (ReadWrite, ReadOnly), "pool: the owner (from) writes");
    assert_eq!((access("a", 1), access("b", 1)), (ReadWrite, ReadWrite), "a channel: both ends write");
    assert_eq!((access("a", 2), access("b", 2)), (ReadWrite, ReadWrite), "declared shared writers");
    let (_, glue) = output.glue.iter().find(|(name, _)| name == "r.rs").expect("glue for R");
    assert!(glue.contains("pub fn get() -> rt::Dataport<rt::ReadOnly> {"), "{glue}");
}

#[test]
fn an_interrupt_can_share_a_notification_with_its_own_badge_bit() {
    let mut files = MemoryFiles::default();
    files.add(
        "sys/main.camkes",
        r#"import <std_connector.camkes>;
component Dev { hardware; emits Irq irq; }
component Drv { control; consumes Irq irq; consumes Kick kick; }
component Client { control; emits Kick kick; }
assembly { composition {
    component Dev dev; component Drv drv; component Client client;
    connection seL4HardwareInterrupt irq(from dev.irq, to drv.irq);
    connection seL4Notification kick(from client.kick, to drv.kick);
} configuration {
    dev.irq_irq_type = "isa"; dev.irq_irq_ioapic_pin = 4; dev.irq_irq_vector = 4;
    drv.irq_notification = "kick";
} }"#,
    );
    let output = camkes::compile(Path::new("sys/main.camkes"), &[], &files).expect("compiles");
    let spec = &output.spec;
    let notifications: Vec<usize> =
        (0..spec.objects.len()).filter(|&i| spec.objects[i].kind == system_spec::ObjectKind::Notification).collect();
    assert_eq!(notifications.len(), 1, "one notification for the interrupt and the kick: {:?}", spec.objects);
    let irq = spec
        .objects
        .iter()
        .find_map(|o| match &o.kind {
            system_spec::ObjectKind::IoApicIrq(irq) => Some(irq.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!((irq.notification.0 as usize, irq.badge), (notifications[0], 2));
    assert_eq!(spec.component("client").unwrap().caps[0].badge, 1);
    let (_, glue) = output.glue.iter().find(|(name, _)| name == "drv.rs").unwrap();
    assert!(glue.contains("pub const BADGE: sel4::Word = 0x2;"), "{glue}");
}

/// Calls that share a callee but form no ring are fine: many clients of
/// one server, and a chain of servers (httpd -> fs -> pci_config).
#[test]
fn calls_that_form_no_cycle_compile() {
    let mut files = MemoryFiles::default();
    files.add(
        "sys/main.camkes",
        r#"import <std_connector.camkes>;
procedure P { void f(); }
component Client { control; uses P call; }
component Mid { control; uses P call; provides P serve; }
component Server { control; provides P serve; }
assembly { composition {
    component Client c1; component Client c2; component Mid mid; component Server s;
    connection seL4RPCCall to_mid(from c1.call, from c2.call, to mid.serve);
    connection seL4RPCCall to_server(from mid.call, to s.serve);
} }"#,
    );
    let compiled = camkes::compile(Path::new("sys/main.camkes"), &[Path::new("sys/lib").to_path_buf()], &files);
    assert!(compiled.is_ok(), "{:?}", compiled.err());
}
