*** Settings ***
Documentation       The loader's hardware capabilities on the real image
...                 (examples/hwprobe/hwprobe.camkes, booted with --net): an I/O port
...                 range for PCI configuration space that the kernel enforces, the
...                 e1000's BAR0 mapped uncached, and its IOAPIC interrupt raised,
...                 delivered and acknowledged three times.
Library             QemuSystem    ${HWPROBE_BUILD_DIR}
Suite Setup         Start System    --net
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           hwprobe

*** Variables ***
${HWPROBE_BUILD_DIR}        build/variants/hwprobe

*** Test Cases ***
Root Task Finds The E1000 And Binds It To The Probe
    Wait For Serial Line    ^\\[roottask\\] pci: 6 functions found \\(i440fx/piix3\\)$    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] pci 00:03\\.0 8086:100e net -> pci_probe \\(bar0 0xfebc0000, bar1 io 0x[0-9a-f]+, ioapic pin 11\\)$

Loader Builds The Probe With Its Hardware Objects
    Wait For Serial Line    ^\\[roottask\\] loading 1 components, 4 objects    timeout=60s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 1 of 1 components running

PCI Configuration Space Through The I/O Port Capability
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:00\\.0 8086:1237 class 060000$
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:03\\.0 8086:100e class 020000$
    Wait For Serial Line    ^\\[pci_probe\\] pci bus 0: 6 functions$
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:03\\.0: vendor 0x8086 device 0x100e$
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:03\\.0: bar0 0xfebc0000 size 0x20000$
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:03\\.0: interrupt line 11 pin 1 \\(INTA#\\)$

Kernel Refuses Ports Outside The Granted Range
    Wait For Serial Line    ^\\[pci_probe\\] port 0x80 refused: IllegalOperation$
    Wait For Serial Line    ^\\[pci_probe\\] port 0x3f8 refused: IllegalOperation$
    Wait For Serial Line    ^\\[pci_probe\\] port 0xcfe \\(32-bit, past 0xcff\\) refused: IllegalOperation$

E1000 Registers Through The Uncached MMIO Mapping
    Wait For Serial Line    ^\\[pci_probe\\] pci 00:03\\.0: bar0 matches the mapping \\(0xfebc0000, from the loader.s start record\\)$
    Wait For Serial Line    ^\\[pci_probe\\] e1000 status 0x[0-9a-f]{8} mac 52:54:00:12:34:56 link up$

IOAPIC Interrupt Is Delivered And Acknowledged Three Times
    Wait For Serial Line    ^\\[pci_probe\\] irq OK: cause 0x4 \\(round 1, notification after \\d+ polls, acknowledged\\)$
    Wait For Serial Line    ^\\[pci_probe\\] irq OK: cause 0x80 \\(round 2, notification after \\d+ polls, acknowledged\\)$
    Wait For Serial Line    ^\\[pci_probe\\] irq OK: cause 0x1 \\(round 3, notification after \\d+ polls, acknowledged\\)$

Probe Finishes And Exits Cleanly
    Wait For Serial Line    ^\\[pci_probe\\] hwprobe done$
    Wait For Serial Line    ^\\[supervisor\\] component pci_probe exited \\(status 0\\)$
    Serial Should Stay Quiet About Faults    1s
