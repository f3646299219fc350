*** Settings ***
Documentation       The whole system (camkes/iolite.camkes) with the host's Linux TCP stack
...                 as its peer: the e1000 on a TAP device in a network namespace the
...                 suite creates (TapNetwork: tap0 with 10.0.2.2/24, the guest keeps its
...                 static 10.0.2.15/24), not QEMU's user networking, which terminates TCP
...                 itself and hid what a real peer does (one cumulative, delayed ACK for
...                 a whole burst, windows larger than ours).
...
...                 The stall it guards against: a keep-alive client fetching 1 MiB again
...                 and again got about one response per 0.5 s, because data netstack
...                 moved into TCP after the ACK that emptied the send queue waited for
...                 the ticker (200 ms) before going out, once per send window. Now a
...                 response takes a few tens of ms under TCG. The bound below (40
...                 responses in 12 s, 0.3 s each on average) is a stall detector, not a
...                 benchmark: the old code needs 16 s or more, a loaded host far less.
...                 Every body is checked against the site manifest's SHA-256.
...
...                 Needs root, iproute2 and /dev/net/tun (CI: Debian 12 as root); the
...                 namespace and everything in it go away at the end of the suite.
Library             QemuSystem    ${BUILD_DIR}
Library             TapNetwork
Suite Setup         Boot On A Tap Network
Suite Teardown      Run Keywords    Stop System    AND    Delete Tap Network
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build

*** Keywords ***
Boot On A Tap Network
    ${ns}=    Create Tap Network
    Start System In Namespace    ${ns}    --tap    tap0    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    \\[httpd\\] listening on port 80    timeout=120s
    Wait For Web Server On Tap    timeout=120

*** Test Cases ***
Keep-Alive 1 MiB Responses Do Not Stall With A Linux Peer
    [Documentation]    40 x /file-1m.bin on one connection, each read before the
    ...                next request, every body's SHA-256 checked, all within 12 s.
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /file-1m.bin
    ${took}=    Keep Alive Fetches On Tap    /file-1m.bin    40    ${sha}    12
    Log    40 responses of 1 MiB in ${took} s
    System Should Be Running

Small Keep-Alive Responses Over TAP Are Byte-Exact
    [Documentation]    The other end of the size range on the same path: 1 KiB and
    ...                an odd-sized file, 20 times each on one connection.
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /file-1k.txt
    Keep Alive Fetches On Tap    /file-1k.txt    20    ${sha}    30
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /odd-100000.bin
    Keep Alive Fetches On Tap    /odd-100000.bin    20    ${sha}    30

Slow Readers Pin A Few KiB Each And Others Are Served
    [Documentation]    64 clients with 2 KiB receive buffers (the paper's slow WAN
    ...                clients) each start a 1 MiB download and stop reading. Each
    ...                holds a file open in httpd and pins what netstack queued for it
    ...                (its window plus a slack of four windows, at least 8 KiB) and
    ...                what httpd pulled for it (no more per round than netstack said
    ...                the connection can take). Before, the 49th got 503 (httpd had
    ...                48 open files in fs) and each pinned its window plus 64 KiB in
    ...                TCP and up to 512 KiB held back. Meanwhile other clients fetch
    ...                byte-exact.
    Open Slow Readers On Tap    64    /file-1m.bin
    Sleep    2s
    ${stats}=    Stats On Tap
    ${queued}=    Set Variable    ${stats}[netstack][tcp_send_queued_bytes]
    ${held}=    Set Variable    ${stats}[netstack][tcp_send_held_back_bytes]
    Log    TCP queues ${queued} bytes, held back ${held} bytes for 64 slow readers
    Should Be True    ${queued} <= 64 * 16 * 1024    TCP queues hold ${queued} bytes
    Should Be True    ${queued} + ${held} <= 64 * 32 * 1024    ${queued} + ${held} bytes pinned
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /file-64k.bin
    Keep Alive Fetches On Tap    /file-64k.bin    20    ${sha}    30
    ${sha}=    Manifest Sha256    ${BUILD_DIR}/images/site.manifest    /file-1m.bin
    Keep Alive Fetches On Tap    /file-1m.bin    5    ${sha}    30
    [Teardown]    Run Keywords    Close Slow Readers    AND    Attach Serial Log If Test Failed
