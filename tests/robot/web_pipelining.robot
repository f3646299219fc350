*** Settings ***
Documentation       Pipelining checks bytes: many requests sent at once on one connection,
...                 every response present, in order, and every body byte-exact against the
...                 site manifest's SHA-256 (HEAD: no body, the right Content-Length); the
...                 server must close after the last request (nothing stalls).
...
...                 64 pipelined responses of a small file are hundreds of tiny aggregates
...                 (response header + file fragment) in netstack's send queue, so one TCP
...                 segment spans more slices than a frame takes. netstack used to send such
...                 a segment with stale bytes of its scratch buffer as payload (a TCP option
...                 block inside a response header), under a valid checksum, and then stall.
...
...                 Runs 20 rounds on the default image (iolite mode) and, through
...                 tests/variants' NAME@TAG lines, on the flash and posix images
...                 (${PIPELINING_BUILD_DIR} is then the variant's).
Library             Collections
Library             QemuSystem    ${PIPELINING_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot And Wait For The Web Server
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           pipelining

*** Variables ***
${BUILD_DIR}                ${CURDIR}/../../build
${PIPELINING_BUILD_DIR}     ${BUILD_DIR}
${PORT}                     8087
${COUNT}                    64
# Every image (iolite, flash, posix) gets the full run: ~10 s each.
${ROUNDS}                   20
# Files of the site small enough that 64 responses stay in flight at once.
@{SMALL}                    /sub/note.txt    /empty.txt    /file-1k.txt    /fragments/top.html
...                         /fragments/middle.html    /fragments/bottom.html    /live.html    /index.html
...                         /style.css    /odd-4097.bin    /live.js
# The smallest: the most responses (slices) per TCP segment.
@{TINY}                     /sub/note.txt    /empty.txt    /fragments/bottom.html    /fragments/top.html

*** Keywords ***
Boot And Wait For The Web Server
    Start System    --port    ${PORT}:80    --disk    ${PIPELINING_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] listening on port 80$    timeout=90s
    Wait For Web Server    timeout=90
    Check Bodies Against Site    ${PIPELINING_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    ${stats}=    Stats Json
    ${mode}=    Set Variable    ${stats}[netstack][tcp_copy_mode]
    Set Suite Variable    ${MODE}    ${mode}
    Log    copy mode ${mode}: ${ROUNDS} rounds

*** Test Cases ***
Sixty-Four Pipelined GETs Of Each Small File Are Byte Exact
    ${n}=    Pipelined Rounds Should Be Byte Exact    ${ROUNDS}    ${COUNT}    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{${ROUNDS} * ${COUNT} * len($SMALL)}}

Sixty-Four Pipelined GETs Of Mixed Files Are Byte Exact
    ${n}=    Pipelined Rounds Should Be Byte Exact    ${ROUNDS}    ${COUNT}    mixed    @{TINY}    /file-1k.txt
    Should Be Equal As Integers    ${n}    ${{${ROUNDS} * ${COUNT}}}
    ${n}=    Pipelined Rounds Should Be Byte Exact    ${ROUNDS}    ${COUNT}    mixed    @{SMALL}    /file-16k.bin
    Should Be Equal As Integers    ${n}    ${{${ROUNDS} * ${COUNT}}}

Pipelined HEAD And GET Mixes Are Byte Exact
    @{paths}=    Create List
    FOR    ${p}    IN    @{TINY}
        Append To List    ${paths}    HEAD ${p}    ${p}
    END
    Append To List    ${paths}    HEAD /file-64k.bin    /cgi-bin/page    HEAD /index.html    /style.css
    ${n}=    Pipelined Rounds Should Be Byte Exact    ${ROUNDS}    ${COUNT}    mixed    @{paths}
    Should Be Equal As Integers    ${n}    ${{${ROUNDS} * ${COUNT}}}

Static Bodies Went By Reference Or Through A Counted Copy
    ${j}=    Stats Json
    Log    ${j}
    IF    ${MODE} == 0
        # Segments of many tiny slices are partly coalesced (counted);
        # httpd itself copies no static byte.
        Should Be Equal As Integers    ${j}[httpd][static_bytes_copied]    0
        Should Be True    ${j}[netstack][tcp_tx_coalesced_bytes] > 0
        Should Be Equal As Integers    ${j}[netstack][tcp_tx_copied]    ${j}[netstack][tcp_tx_coalesced_bytes]
    END
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_withheld]    0
    # No response was cut short: netstack refused none of httpd's sends
    # (httpd keeps to its send credit, however late netstack runs).
    Should Be Equal As Integers    ${j}[netstack][tcp_sends_refused]    0
    Should Be Equal As Integers    ${j}[httpd][send_errors]    0
    Log    httpd waited for send credit ${j}[httpd][send_credit_waits] times
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
