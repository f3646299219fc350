*** Settings ***
Documentation       The default image on QEMU's Q35 with an e1000e (Intel 82574L,
...                 8086:10d3) as its NIC (`simulate --shape q35-e1000e`) and the legacy
...                 virtio-blk as its disk: the root task binds netdrv to the 82574L it
...                 finds, netdrv tells the model by its IDs and drives it with the same
...                 e1000 library as the 82540EM (legacy descriptors, TSO, INTx through the
...                 IOAPIC pin Q35 routes). Every file of the manifest byte for byte,
...                 keep-alive and 64 pipelined requests, TSO frames cut by the 82574,
...                 `/cgi-bin/stats` naming the device and no payload byte copied (netdrv,
...                 fs, httpd; netstack: none for whole files, only its coalescing of small
...                 pipelined responses, counted as such). Then once more under UEFI
...                 (OVMF booting the ISO, `--firmware uefi`): the site byte for byte.
...
...                 Serial lines these tests wait for (stable):
...                 | [roottask] pci 00:02.0 8086:10d3 net -> netdrv (bar0 ..., ioapic pin 22) |
...                 | [netdrv] e1000e at 00:02.0 mac 52:54:00:12:34:56 link up or down |
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot Q35 With An E1000e
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           e1000e

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8094
@{SMALL}            /index.html    /style.css    /file-1k.txt    /sub/note.txt

*** Keywords ***
Boot Q35 With An E1000e
    [Arguments]    @{firmware}
    Start System    --shape    q35-e1000e    @{firmware}    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=150s
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[httpd\\] listening on port 80$
    Wait For Web Server    timeout=90
    ${s}=    Seconds Since Start
    Log    first HTTP response ${{round($s, 1)}} s after QEMU started (q35-e1000e @{firmware})    console=True

*** Test Cases ***
The Root Task Binds netdrv To The 82574L And netdrv Drives It As An e1000e
    # QEMU puts VGA at 00:01.0, then the NIC and the disk in the order given.
    Serial Line Seen    ^\\[roottask\\] pci: \\d+ functions found \\(q35/ich9\\)$
    Serial Line Seen    ^\\[roottask\\] pci 00:02\\.0 8086:10d3 net -> netdrv \\(bar0 0x[0-9a-f]+.*ioapic pin 22\\)$
    Serial Line Seen    ^\\[netdrv\\] e1000e at 00:02\\.0 mac 52:54:00:12:34:56 link (up|down)$
    Serial Line Seen    ^\\[netdrv\\] tcp segmentation offload offered$
    Serial Should Stay Quiet About Faults    1s

The Site Is Served Byte Exact, Keep-Alive And Pipelined
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10
    Keep Alive Requests    50    /file-16k.bin
    ${n}=    Pipelined Rounds Should Be Byte Exact    2    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{2 * 64 * len($SMALL)}}

Stats Name The e1000e And Count No Payload Byte Copied
    # Counted from here: the pipelined rounds above had netstack coalesce
    # small responses into one copy (tcp_tx_coalesced_bytes, its own cause,
    # the same on any NIC); whole files go by reference.
    ${j0}=    Stats Json
    FOR    ${path}    IN    /file-64k.bin    /file-1m.bin
        ${status}    ${h}    ${body}=    Fetch    ${path}
        Should Be Equal As Integers    ${status}    200    ${path}
    END
    ${j}=    Stats Json
    Log    ${j}
    ${found}=    Create List
    FOR    ${d}    IN    @{j}[devices]
        IF    '${d}[bdf]' == '00:02.0'    Append To List    ${found}    ${d}
    END
    Length Should Be    ${found}    1    /cgi-bin/stats names no device 00:02.0: ${j}[devices]
    Should Be Equal    ${found}[0][id]    8086:10d3
    Should Be Equal    ${found}[0][driver]    netdrv
    Should Be Equal As Integers    ${j}[netdrv][drv_bytes_copied]    0
    Should Be Equal As Integers    ${j}[httpd][static_bytes_copied]    0
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_copied]    ${j0}[netstack][tcp_tx_copied]
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_copied]    ${j}[netstack][tcp_tx_coalesced_bytes]
    Should Be True    ${j}[httpd][body_bytes_by_ref] - ${j0}[httpd][body_bytes_by_ref] >= 65536 + 1048576
    Should Be Equal As Integers    ${j}[fs][bytes_copied]    0
    # The megabyte went in TSO frames the 82574 cut into segments, by
    # reference; frames came in and the interrupt was taken.
    Should Be True    ${j}[netdrv][drv_tx_tso_frames] > 0
    Should Be True    ${j}[netdrv][drv_tx_tso_segments] > 4 * ${j}[netdrv][drv_tx_tso_frames]
    Should Be True    ${j}[netdrv][drv_rx_frames] > 100
    Should Be True    ${j}[netdrv][drv_irqs] > 0
    Should Be Equal As Integers    ${j}[netdrv][drv_link_up]    1
    Serial Should Stay Quiet About Faults    1s

Under UEFI Too: OVMF Boots The ISO And The e1000e Serves The Site
    Stop System
    Boot Q35 With An E1000e    --firmware    uefi
    Serial Line Seen    ^\\[roottask\\] pci 00:02\\.0 8086:10d3 net -> netdrv \\(bar0 0x[0-9a-f]+.*ioapic pin \\d+\\)$
    Serial Line Seen    ^\\[netdrv\\] e1000e at 00:02\\.0 mac 52:54:00:12:34:56 link (up|down)$
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10
    Keep Alive Requests    20    /file-64k.bin
    ${n}=    Pipelined Rounds Should Be Byte Exact    1    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{64 * len($SMALL)}}
    Serial Should Stay Quiet About Faults    1s
