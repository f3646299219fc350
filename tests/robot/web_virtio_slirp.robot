*** Settings ***
Documentation       The default image on virtio-net and QEMU's user networking (`simulate --nic virtio
...                 --port P:80`): slirp has no vnet_hdr, so QEMU's virtio-net offers neither
...                 checksum offload nor TSO. netdrv must then offer netstack no TSO, and
...                 every frame goes out whole with netstack's own checksums: every file
...                 byte-exact, pipelined rounds byte-exact, no frame offloaded or refused.
...
...                 Serial lines these tests wait for (stable):
...                 | [netdrv] virtio-net features 0x120010020 (offered and wanted) |
...                 | [netdrv] tcp segmentation offload off |
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot With Virtio On User Networking
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           virtio

*** Variables ***
${BUILD_DIR}            ${CURDIR}/../../build
${PORT}                 8093
@{SMALL}                /sub/note.txt    /empty.txt    /file-1k.txt    /index.html    /style.css

*** Keywords ***
Boot With Virtio On User Networking
    Start System    --nic    virtio    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] listening on port 80$    timeout=120s
    Wait For Web Server    timeout=120
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

*** Test Cases ***
Without vnet_hdr Only VERSION_1, Event Index, MAC And Status Are Taken
    # VERSION_1 (32), EVENT_IDX (29), STATUS (16), MAC (5): no CSUM, no TSO.
    Serial Line Seen    ^\\[netdrv\\] virtio-net features 0x120010020 \\(offered and wanted\\)$
    Serial Line Seen    ^\\[netdrv\\] tcp segmentation offload off$

Every Demo File Is Byte Exact
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10

Pipelined And Keep-Alive Requests Are Byte Exact
    ${n}=    Pipelined Rounds Should Be Byte Exact    3    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{3 * 64 * len($SMALL)}}
    ${n}=    Keep Alive Requests    50
    Should Be Equal As Integers    ${n}    50

Frames Went Out Whole With No Offload
    ${j}=    Stats Json
    ${d}=    Set Variable    ${j}[netdrv]
    Log    ${d}
    Should Be Equal As Integers    ${d}[drv_tx_tso_frames]    0
    Should Be Equal As Integers    ${d}[drv_tx_offloaded]    0
    Should Be Equal As Integers    ${d}[drv_tx_rejected]    0
    Should Be Equal As Integers    ${d}[drv_device_errors]    0
    Should Be Equal As Integers    ${d}[drv_bytes_copied]    0
    Should Be True    ${d}[drv_tx_frames] > 500 and ${d}[drv_notifies] > 0
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
