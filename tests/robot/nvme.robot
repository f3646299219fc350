*** Settings ***
Documentation       The default image on Q35 with the site disk on QEMU's NVMe controller
...                 (`simulate --shape q35-nvme`: `-device nvme`, class 01/08/02, the e1000
...                 where QEMU puts it). The root task binds fs to the NVMe (fs.match =
...                 "block") and maps its memory BAR0; fs brings the controller up (admin
...                 queue, identify, one I/O queue pair), mounts the site and serves every
...                 file byte for byte, the data DMAed straight into the file cache's pages
...                 (PRP lists for multi-page chunks): disk reads counted, 0 bytes copied.
...                 Completion is polled (no MSI is programmed at boot). A controller
...                 without a namespace: fs says so in words and nothing faults.
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Test Teardown       Stop System And Attach Log If Failed
Test Tags           nvme

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             18734
@{SMALL}            /index.html    /style.css    /file-1k.txt    /sub/note.txt

*** Keywords ***
Stats Should Name
    [Arguments]    ${stats}    ${bdf}    ${id}    ${class}    ${driver}
    FOR    ${d}    IN    @{stats}[devices]
        IF    '${d}[bdf]' == '${bdf}'
            Should Be Equal    ${d}[id]    ${id}
            Should Be Equal    ${d}[class]    ${class}
            Should Be Equal    ${d}[driver]    ${driver}
            RETURN
        END
    END
    Fail    /cgi-bin/stats names no device ${bdf}: ${stats}[devices]

*** Test Cases ***
The Site Is Served From An NVMe Disk, DMAed Into The Cache
    Start System    --shape    q35-nvme    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[roottask\\] pci: \\d+ functions found \\(q35/ich9\\)$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[roottask\\] pci 00:03\\.0 1b36:0010 block -> fs \\(bar0 0x[0-9a-f]+, ioapic pin 23\\)$
    Wait For Serial Line Anywhere    ^\\[fs\\] nvme at 00:03\\.0: BAR0 0x[0-9a-f]+, model "QEMU NVMe Ctrl", serial "iolite-site", version 0x[0-9a-f]+, namespace 1: \\d+ blocks of 512 bytes, polled \\(no MSI programmed at boot\\)$
    Wait For Serial Line Anywhere    ^\\[fs\\] superblock: magic 0xef53$
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[httpd\\] listening on port 80$
    Wait For Web Server    timeout=90
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10
    ${n}=    Pipelined Rounds Should Be Byte Exact    1    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{64 * len($SMALL)}}
    ${stats}=    Stats Json
    Log    ${stats}[fs]
    Stats Should Name    ${stats}    00:03.0    1b36:0010    010802    fs
    Stats Should Name    ${stats}    00:02.0    8086:100e    020000    netdrv
    # Every file read from the disk, the file data by DMA into the pool's
    # pages (more than the 1 MiB file: every byte of the site), only
    # metadata through the bounce area, and nothing copied.
    ${fs}=    Set Variable    ${stats}[fs]
    Should Be True    ${fs}[disk_reads] > 10    disk reads: ${fs}
    Should Be True    ${fs}[data_bytes] >= 1048576    file data from the disk: ${fs}
    Should Be Equal As Integers    ${fs}[dma_bytes]    ${fs}[data_bytes]    file data not all by DMA: ${fs}
    Should Be True    0 < ${fs}[bounce_bytes] < ${fs}[dma_bytes]    metadata only through the bounce area: ${fs}
    Should Be Equal As Integers    ${fs}[bytes_copied]    0
    Should Be Equal As Integers    ${stats}[httpd][static_bytes_copied]    0
    Serial Should Stay Quiet About Faults    1s

An NVMe Without A Namespace: fs Says So And Nothing Faults
    # QEMU's controller with no drive: identify namespace 1 is all zeros.
    Start System    --shape    q35    --port    ${PORT}:80    --    -device    nvme,serial=empty
    Wait For Serial Line Anywhere    ^\\[roottask\\] pci 00:03\\.0 1b36:0010 block -> fs    timeout=60s
    Wait For Serial Line Anywhere    ^\\[fs\\] error: 00:03\\.0: nvme: namespace 1: no blocks \\(not attached\\?\\)$
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running
    Serial Should Stay Quiet About Faults    2s
