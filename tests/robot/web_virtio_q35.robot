*** Settings ***
Documentation       The default image on the machine of a modern PC: QEMU's Q35 (PCIe),
...                 UEFI firmware (OVMF, booting the ISO) and a virtio-net 1.0 NIC on
...                 user networking (`simulate --firmware uefi --machine q35 --nic virtio`).
...                 No address is fixed anywhere: OVMF assigns the BARs (the 64-bit one
...                 virtio's capabilities name may lie above 4 GiB), the root task finds
...                 the function, binds it to netdrv (`netdrv.match = "net"`) and maps that
...                 BAR at its own size; every body is checked byte for byte.
...
...                 Serial lines these tests wait for (stable):
...                 | [roottask] pci 00:02.0 1af4:1041 net -> netdrv (bar1 ..., bar4 ..., ioapic pin N) |
...                 | [netdrv] virtio-net at 00:02.0: BAR4 0x..., 0x4000 bytes |
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot Q35 Under UEFI With Virtio
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           virtio

*** Variables ***
${BUILD_DIR}            ${CURDIR}/../../build
${PORT}                 8094
@{SMALL}                /sub/note.txt    /empty.txt    /file-1k.txt    /index.html    /style.css

*** Keywords ***
Boot Q35 Under UEFI With Virtio
    Start System    --firmware    uefi    --machine    q35    --nic    virtio    --port    ${PORT}:80
    ...    --disk    ${BUILD_DIR}/images/site.img
    # OVMF under TCG takes some seconds before GRUB runs.
    Wait For Serial Line    Iolite OS: GRUB booting seL4 under UEFI \\(multiboot2\\)    timeout=120s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=120s
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[httpd\\] listening on port 80$
    Wait For Web Server    timeout=120
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

*** Test Cases ***
The Root Task Finds The Virtio-Net Function And netdrv Drives It
    Serial Line Seen    ^\\[roottask\\] pci: \\d+ functions found \\(q35/ich9\\)$
    # QEMU puts VGA at 00:01.0, then the NIC and the disk in the order given.
    Serial Line Seen    ^\\[roottask\\] pci 00:02\\.0 1af4:1041 net -> netdrv \\(bar1 0x[0-9a-f]+, bar4 0x[0-9a-f]+, ioapic pin \\d+\\)$
    Serial Line Seen    ^\\[netdrv\\] virtio-net at 00:02\\.0: BAR4 0x[0-9a-f]+, 0x4000 bytes$
    Serial Line Seen    ^\\[netdrv\\] virtio-net at 00:02\\.0 mac 52:54:00:12:34:56 link up$
    ${e1000}=    Run Keyword And Return Status    Serial Line Seen    ^\\[netdrv\\] e1000 at
    Should Not Be True    ${e1000}

Every Demo File Is Byte Exact On Q35 Under UEFI
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10

Pipelined And Keep-Alive Requests Are Byte Exact
    ${n}=    Pipelined Rounds Should Be Byte Exact    2    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{2 * 64 * len($SMALL)}}
    ${n}=    Keep Alive Requests    20    /file-64k.bin
    Should Be Equal As Integers    ${n}    20

No Device Error And No Payload Copied
    ${j}=    Stats Json
    ${d}=    Set Variable    ${j}[netdrv]
    Log    ${d}
    Should Be Equal As Integers    ${d}[drv_device_errors]    0
    Should Be Equal As Integers    ${d}[drv_bytes_copied]    0
    Should Be Equal As Integers    ${d}[drv_tx_rejected]    0
    Should Be True    ${d}[drv_tx_frames] > 100 and ${d}[drv_notifies] > 0
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
