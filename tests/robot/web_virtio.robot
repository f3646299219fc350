*** Settings ***
Documentation       The whole system on a virtio-net 1.0 NIC instead of the e1000: the
...                 default image (the root task finds the device at boot and maps the BAR
...                 its virtio capabilities name, 16 KiB; netdrv picks its virtio driver by
...                 the function's IDs), booted with `simulate --nic virtio --tap tap0` in a
...                 network namespace of its own (tests/lib/TapNetwork.py), the host's
...                 Linux TCP as the peer. On TAP QEMU's virtio-net offers checksum and TCP
...                 segmentation offload (vnet_hdr), so TSO frames go out as GSO frames the
...                 host kernel takes. Every body is checked byte for byte (the site
...                 manifest's SHA-256): every file, 100 keep-alive requests, pipelined
...                 rounds, 1 MiB responses; then /cgi-bin/stats must show the virtio
...                 counters (doorbells, suppressed notifications, no device error) and no
...                 payload byte copied by netdrv or httpd.
...
...                 Serial lines these tests wait for (stable):
...                 | [roottask] pci 00:03.0 1af4:1041 net -> netdrv (bar1 ..., bar4 ..., ioapic pin N) |
...                 | [netdrv] virtio-net at 00:03.0: BAR4 0x..., 0x4000 bytes |
...                 | [netdrv] virtio-net at 00:03.0 mac 52:54:00:12:34:56 link up |
...                 | [netdrv] tcp segmentation offload offered |
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Library             TapNetwork
# Inside the namespace (`Enter Tap Network`), the guest's own address.
Library             WebClient    10.0.2.15:80
Suite Setup         Boot On A Tap Network With Virtio
Suite Teardown      Run Keywords    Stop System    AND    Delete Tap Network
Test Teardown       Attach Serial Log If Test Failed
Test Tags           virtio

*** Variables ***
${BUILD_DIR}            ${CURDIR}/../../build
# The NIC QEMU attaches (simulate --nic). `e1000` runs the same load on the
# e1000 path, for the exits per frame the stats test logs; its virtio
# checks then fail.
${NIC}                  virtio
# Files of the site small enough that 64 responses stay in flight at once.
@{SMALL}                /sub/note.txt    /empty.txt    /file-1k.txt    /index.html    /style.css    /odd-4097.bin

*** Keywords ***
Boot On A Tap Network With Virtio
    ${ns}=    Create Tap Network
    Start System In Namespace    ${ns}    --nic    ${NIC}    --tap    tap0    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    \\[httpd\\] listening on port 80    timeout=120s
    Wait For Web Server On Tap    timeout=120
    Enter Tap Network
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

Driver Counters
    ${j}=    Stats Json
    RETURN    ${j}[netdrv]

*** Test Cases ***
netdrv Drives The Virtio-Net Device
    # No address anywhere: bound by `netdrv.match = "net"`, the BAR the
    # capabilities name mapped at its own size (smaller than the dataport).
    Serial Line Seen    ^\\[roottask\\] pci 00:03\\.0 1af4:1041 net -> netdrv \\(bar1 0x[0-9a-f]+, bar4 0x[0-9a-f]+, ioapic pin \\d+\\)$
    Serial Line Seen    ^\\[netdrv\\] virtio-net at 00:03\\.0: BAR4 0x[0-9a-f]+, 0x4000 bytes$
    Serial Line Seen    ^\\[netdrv\\] virtio-net at 00:03\\.0 mac 52:54:00:12:34:56 link up$
    Serial Line Seen    ^\\[netdrv\\] tcp segmentation offload offered$
    ${e1000}=    Run Keyword And Return Status    Serial Line Seen    ^\\[netdrv\\] e1000 at
    Should Not Be True    ${e1000}

Every Demo File Is Byte Exact
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10

100 Requests On One Keep-Alive Connection
    ${n}=    Keep Alive Requests    100
    Should Be Equal As Integers    ${n}    100

Pipelined Requests Are Byte Exact
    ${n}=    Pipelined Rounds Should Be Byte Exact    5    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{5 * 64 * len($SMALL)}}
    ${n}=    Pipelined Rounds Should Be Byte Exact    5    64    mixed    @{SMALL}    /file-16k.bin
    Should Be Equal As Integers    ${n}    ${{5 * 64}}

Keep-Alive 1 MiB Responses Go Out As TSO Frames
    ${before}=    Driver Counters
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /file-1m.bin
    Leave Tap Network
    Keep Alive Fetches On Tap    /file-1m.bin    10    ${sha}    within=30
    Enter Tap Network
    ${after}=    Driver Counters
    ${tso}=    Evaluate    ${after}[drv_tx_tso_frames] - ${before}[drv_tx_tso_frames]
    ${segments}=    Evaluate    ${after}[drv_tx_tso_segments] - ${before}[drv_tx_tso_segments]
    # 10 MiB in frames of up to 64 KiB: at least 160 of them, 7000+ segments.
    Should Be True    ${tso} >= 160 and ${segments} >= 7000    ${tso} TSO frames, ${segments} segments
    Should Be True    ${after}[drv_tx_tso_header_bytes] >= ${tso} * 54

The Stats Page Shows The Virtio Counters And No Payload Copied
    ${j}=    Stats Json
    Log    ${j}
    ${d}=    Set Variable    ${j}[netdrv]
    ${frames}=    Evaluate    ${d}[drv_rx_frames] + ${d}[drv_tx_frames]
    ${exits}=    Evaluate    ${d}[drv_notifies] + ${d}[drv_irqs]
    ${requests}=    Set Variable    ${j}[httpd][requests]
    Log    ${exits} doorbells and interrupts for ${frames} frames, ${requests} requests (${{round(${exits} / ${frames}, 3)}} per frame, ${{round(${exits} / ${requests}, 3)}} per request)
    Should Be Equal As Integers    ${d}[drv_device_errors]    0
    Should Be Equal As Integers    ${d}[drv_bytes_copied]    0
    Should Be Equal As Integers    ${d}[drv_tx_rejected]    0
    Should Be Equal As Integers    ${d}[drv_link_up]    1
    Should Be True    ${d}[drv_rx_frames] > 1000 and ${d}[drv_tx_frames] > 1000
    Should Be True    ${d}[drv_notifies] > 0
    # Batches the device had not asked to hear of: no doorbell.
    Should Be True    ${d}[drv_notifies_suppressed] > 0
    Should Be Equal As Integers    ${j}[httpd][static_bytes_copied]    0
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
