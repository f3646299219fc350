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
# Inside the namespace (`Enter Tap Network`), the guest's own address.
Library             WebClient    10.0.2.15:80
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
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

Memory Should Be Back To
    [Arguments]    ${before}
    ${now}=    Stats Json
    Log    ${now}
    FOR    ${c}    ${name}    ${slack}    IN
    ...    netstack    tcp_connections    0    netstack    tcp_socket_bytes    0
    ...    netstack    tcp_send_queued_bytes    0    netstack    tcp_hdr_pool_pages_in_use    0
    ...    netstack    tcp_sock_pool_pages_in_use    0    httpd    connections_open    0
    # httpd's pool: response headers are packed into shared pages, and the
    # page being filled when the load stopped stays (one or two pages).
    ...    httpd    pool_pages_in_use    2
    # The heaps: tables keep the size they grew to (256 KiB).
    ...    netstack    tcp_heap_used    262144    httpd    heap_used    262144
        Should Be True    ${now}[${c}][${name}] <= ${before}[${c}][${name}] + ${slack}
        ...    ${c} ${name}: ${now}[${c}][${name}] now, ${before}[${c}][${name}] before
    END

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

Two Hundred Clients That Never Read Cost Only Themselves
    [Documentation]    200 connections ask for 3 x 1 MiB and never read (zero window: a 1 KiB
    ...    receive buffer, the host's TCP as their end, not slirp's socket) while
    ...    8 normal clients fetch for 20 s: no fault, no failed request, every response
    ...    byte-exact, netstack does no work for the 200 while their window is closed (it
    ...    offers their held-back sends to TCP only when a segment or a timer gives them
    ...    room: fewer than 1000 failed offers in all, where the old session made 200 per
    ...    poll), the normal clients are not starved (at least 30% of their rate alone), and
    ...    once the 200 are gone netstack's and httpd's memory (heap, socket rings, pool
    ...    pages, queued sends, connections) is back to what it was. The throughput the 8
    ...    keep is a benchmark figure, not a pass mark on a shared TCG host (it measured 47%
    ...    to 106% across runs of one image here): bench/zerowindow measures it, side by
    ...    side with Linux + nginx, as the median of rounds. On the old image 136 of the 200
    ...    got 503 (httpd's 64 slots were taken) and so did the normal clients (890 errors).
    ...    On TAP: through QEMU's user networking (a port forward with a listen backlog
    ...    of one) the 177th of them was once closed before any byte, cause not found;
    ...    this path has no such forward in between.
    [Setup]    Enter Tap Network
    # Every path of the test fetched once first: the baseline has their
    # cached response headers.
    ${status}    ${h}    ${body}=    Fetch    /file-1m.bin    method=HEAD
    Should Be Equal As Integers    ${status}    200
    ${before}=    Stats Json
    ${alone}=    Concurrent Clients    8    10    /file-64k.bin /index.html
    ${n}=    Open Zero Window Connections    200
    ${held}=    Stats Json
    Log    ${held}
    Should Be True    ${held}[netstack][tcp_connections] >= 200    they are open
    ${loaded}=    Concurrent Clients    8    20    /file-64k.bin /index.html
    Should Be Equal As Integers    ${loaded}[errors]    0
    ${during}=    Stats Json
    Log    ${during}
    ${retries}=    Evaluate    $during['netstack']['tcp_send_retries'] - $held['netstack']['tcp_send_retries']
    Should Be True    ${retries} < 1000
    ...    netstack offered held-back sends to connections with no room ${retries} times in 20 s
    Close Zero Window Connections
    Wait Until Keyword Succeeds    60s    2s    Memory Should Be Back To    ${before}
    # The host is shared and noisy: the baseline is the mean of the rate
    # alone before and after.
    ${after}=    Concurrent Clients    8    10    /file-64k.bin /index.html
    ${base}=    Evaluate    ($alone['per_second'] + $after['per_second']) / 2
    ${ratio}=    Evaluate    $loaded['per_second'] / $base
    Log    with the 200: ${loaded}[per_second] req/s = ${ratio} of the rate alone (${alone}[per_second] before, ${after}[per_second] after)
    Should Be True    ${ratio} >= 0.3
    ...    starved: ${loaded}[per_second] req/s with them; alone ${alone}[per_second] before, ${after}[per_second] after
    Serial Should Stay Quiet About Faults    1s
    [Teardown]    Run Keywords    Close Zero Window Connections    AND    Leave Tap Network
    ...    AND    Attach Serial Log If Test Failed
