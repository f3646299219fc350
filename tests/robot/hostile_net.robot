*** Settings ***
Documentation       A hostile socket client of netstack (tests/variants' nethostile:
...                 examples/hostile/hostile.camkes, the whole system plus the client on
...                 netstack's second client region). Triggered by a connection to its
...                 port, it floods netstack with listens beyond its budget, garbage tags,
...                 requests on other clients' connections, garbage releases, scribbled
...                 signal flags and generation; then it keeps every buffer it is lent;
...                 then, one per incarnation, it breaks each ring of its region
...                 (impossible heads and tails, too many slices, an unknown pool) and
...                 sends slices of pools it may not reference (the first one costs it
...                 the channel). netstack reports each broken channel once by
...                 name, cuts the client off and has it restarted; httpd keeps serving
...                 static files and CGI byte-exact on connections the client tried to
...                 abort, netstack and httpd stay idle between requests, and what the
...                 client held comes back.
Library             OperatingSystem
Library             QemuSystem    ${NETHOSTILE_BUILD_DIR}
Library             WebClient    ${PORT}
Library             NetClient
Suite Setup         Boot The Image
Suite Teardown      Run Keywords    Close Connection    AND    Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           nethostile

*** Variables ***
${NETHOSTILE_BUILD_DIR}     ${CURDIR}/../../build/variants/nethostile
${PORT}                     8088
# The host port forwarded to the hostile client's port 7000 (tests/run-all
# passes a free one as ECHO).
${ECHO}                     8089
${PATHS}                    /index.html /file-16k.bin /file-64k.bin /style.css /cgi-bin/page /cgi-bin/echo?hostile

*** Keywords ***
Boot The Image
    Start System    --port    ${PORT}:80    --port    ${ECHO}:7000    --disk    ${NETHOSTILE_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[netstack\\] hostile attached on client2 \\(generation 1\\)$    timeout=90s
    Wait For Serial Line    ^\\[hostile\\] listening on port 7000 \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90
    Check Bodies Against Site    ${NETHOSTILE_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    # Warm-up (the load the tests put on it later: the stack's tables and
    # queues grow to it and keep their size), then what the system holds
    # when idle.
    ${n}=    Every File Should Be Byte Exact    ${NETHOSTILE_BUILD_DIR}/images/site.manifest
    ${r}=    Concurrent Clients    4    10    ${PATHS}
    Sleep    1s
    ${baseline}=    Stats Json
    Set Suite Variable    ${BASELINE}    ${baseline}

Counted
    [Arguments]    ${pattern}    ${count}
    ${lines}=    Serial Lines So Far
    ${n}=    Evaluate    sum(map(bool, map(re.compile($pattern).search, $lines)))    modules=re
    Should Be Equal As Integers    ${n}    ${count}    ${pattern}: ${n} lines

The System Goes Idle
    # Over 2 s without requests netstack runs at the ticker's pace (5 Hz)
    # plus the two stats requests, in wake-ups and in rounds (a loop that
    # never blocks shows in rounds, not wake-ups); httpd at its 10 Hz.
    ${a}=    Stats Json
    Sleep    2s
    ${b}=    Stats Json
    ${httpd}=    Evaluate    ${b}[httpd][wakeups] - ${a}[httpd][wakeups]
    ${wakeups}=    Evaluate    ${b}[netstack][tcp_wakeups] - ${a}[netstack][tcp_wakeups]
    ${polls}=    Evaluate    ${b}[netstack][tcp_polls] - ${a}[netstack][tcp_polls]
    Log    in 2 s: httpd ${httpd} wake-ups, netstack ${wakeups} wake-ups and ${polls} polls
    Should Be True    ${httpd} < 200
    Should Be True    ${wakeups} < 200
    Should Be True    ${polls} < 400

Delta
    [Arguments]    ${after}    ${name}
    ${d}=    Evaluate    ${after}[netstack][${name}] - ${BASELINE}[netstack][${name}]
    RETURN    ${d}

*** Test Cases ***
A Flood From The Hostile Client Costs Only The Hostile Client
    # httpd connections open before the flood: the client guesses their
    # ids and sends Send, Close and Abort on each.
    Open Keep Alive Connections    4    /file-16k.bin
    Open Connection    ${ECHO}
    Send On Connection    go\n
    ${seed}=    Serial Line Seen    ^\\[hostile\\] incarnation 0, seed 0x[0-9a-f]{16}$
    Log    ${seed}
    Wait For Serial Line    ^\\[hostile\\] triggered on connection \\d+$
    Wait For Serial Line    ^\\[hostile\\] listen flood: 128 listens, 3 listening, 125 refused for memory$
    Wait For Serial Line    ^\\[hostile\\] 64 garbage requests: 64 errors, 64 of them BadRequest$
    ${line}=    Wait For Serial Line
    ...    ^\\[hostile\\] (\\d+) requests on connections not ours: \\1 refused \\(NotYours (\\d+), NotFound \\d+\\), 0 taken$
    # The 4 connections above (3 requests each) were among them.
    ${yours}=    Evaluate    int(re.search(r"NotYours (\\d+)", $line).group(1))    modules=re
    Should Be True    ${yours} >= 12    ${line}
    ${served}=    Keep Alive Connections Should Serve    /file-16k.bin
    Should Be Equal As Integers    ${served}    4
    Wait For Serial Line    ^\\[hostile\\] 32 garbage releases written$
    Wait For Serial Line    ^\\[hostile\\] signal flags set and region generation rewritten to \\d+$
    Wait For Serial Line    ^\\[netstack\\] warning: hostile set its region client2 up again without dying \\(generation \\d+\\): not attached$
    Wait For Serial Line    ^\\[hostile\\] still served: 1 listening, 0 garbage events$
    ${after}=    Stats Json
    ${refused}=    Delta    ${after}    tcp_listens_refused
    Should Be Equal As Integers    ${refused}    125
    ${refused}=    Delta    ${after}    tcp_client2_refused
    Should Be Equal As Integers    ${refused}    0
    ${bad}=    Delta    ${after}    tcp_bad_releases
    Should Be Equal As Integers    ${bad}    32
    Should Be Equal As Integers    ${after}[netstack][tcp_clients_cut_off]    0
    Should Be Equal As Integers    ${after}[netstack][tcp_channels_broken]    0
    ${n}=    Every File Should Be Byte Exact    ${NETHOSTILE_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    Counted    ^\\[netstack\\] warning: hostile set its region    1

A Client That Keeps Every Buffer Gets No More And Costs No CPU
    Wait For Serial Line    ^\\[hostile\\] holding: send data now$
    # 32 KiB, more than the 4 pages of netstack's quota for it
    # (netstack.client2_quota: 4 buffers; small pieces would share one).
    ${page}=    Evaluate    "0123456789abcdef" * 256
    Send On Connection    ${page}    pieces=8
    Wait For Serial Line    ^\\[hostile\\] holding 4 received buffers \\(\\d+ slices\\), returning none$
    ${s}=    Stats Json
    Should Be Equal As Integers    ${s}[netstack][tcp_clients_cut_off]    0
    The System Goes Idle
    ${r}=    Concurrent Clients    4    3    ${PATHS}
    Log    ${r}

Every Broken Channel Is Reported Once By Name And Costs Only The Client
    # Incarnation 0 breaks its request ring while holding 4 buffers: they
    # are quarantined at its death and released when it is settled.
    Wait For Serial Line    ^\\[hostile\\] overwriting the request ring head$    timeout=60s
    Wait For Serial Line    ^\\[netstack\\] error: channel client2.B from hostile broken: CorruptRing$
    Wait For Serial Line    ^\\[netstack\\] hostile cut off: 1 connections reset, 4 ports closed, \\d+ events dropped$
    Connection Should Be Closed By Peer
    Wait For Serial Line    ^\\[netstack\\] hostile broke its channel: asking the supervisor to restart it$
    Wait For Serial Line    ^\\[netstack\\] hostile died \\(death 1\\): 4 buffers lent to it quarantined$
    Wait For Serial Line    ^\\[netstack\\] hostile death 1 settled: 4 buffers lent to it released$
    # One attack per incarnation; httpd serves byte-exact meanwhile.
    ${r}=    Concurrent Clients    4    10    ${PATHS}
    Log    ${r}
    # The order of a death's settlement and the next incarnation's first
    # lines is not fixed: those are counted below.
    # 5: the descriptor meant to have holds returned onto the corrupt ring
    # names a pool outside the client's grant list, which breaks the
    # channel before any return is written.
    FOR    ${k}    ${attack}    ${report}    IN
    ...    1    writing a descriptor of 2\\^31 slices    client2.B from hostile broken: TooManySlices
    ...    2    writing a descriptor naming pool 0xdeadbeef    client2.B from hostile broken: UnknownPool
    ...    3    overwriting the event ring tail    client2.A from hostile broken: CorruptRing
    ...    4    overwriting the release ring head    client2.A from hostile broken: CorruptRing \\(its releases\\)
    ...    5    overwriting the returns ring tail    client2.B from hostile broken: ForeignPool
    ...    6    writing 21 forged descriptors naming the pools netstack maps    client2.B from hostile broken: ForeignPool
        Wait For Serial Line    ^\\[hostile\\] ${attack}$    timeout=60s
        Wait For Serial Line    ^\\[netstack\\] error: channel ${report}$
        Wait For Serial Line    ^\\[netstack\\] hostile cut off: 0 connections reset, 1 ports closed, \\d+ events dropped$
        Wait For Serial Line    ^\\[netstack\\] hostile died \\(death ${${k} + 1}\\): 0 buffers lent to it quarantined$
    END
    Wait For Serial Line    ^\\[hostile\\] all attacks done: an honest client from now on$    timeout=60s
    FOR    ${k}    IN RANGE    8
        Counted    ^\\[hostile\\] incarnation ${k}, seed 0x[0-9a-f]{16}$    1
    END
    Counted    ^\\[netstack\\] hostile attached on client2 \\(generation \\d+\\)$    8
    Counted    ^\\[hostile\\] listening on port 7000 \\(generation \\d+\\)$    8
    Wait Until Keyword Succeeds    20s    1s    Counted    ^\\[netstack\\] hostile death \\d+ settled:    7
    # Each broken channel reported once, by name; nobody else's.
    Counted    ^\\[netstack\\] error: channel client2\\.    7
    Counted    ^\\[netstack\\] error: channel client2\\.B from hostile broken: CorruptRing$    1
    Counted    ^\\[netstack\\] error: channel client2\\.B from hostile broken: ForeignPool$    2
    Counted    ^\\[netstack\\] error: channel (client|link)\\.    0
    Counted    ^\\[(httpd|fs|cgi|netdrv)\\] error:    0
    Counted    ^\\[supervisor\\] restarted component hostile at the request of netstack    7
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[netstack][tcp_clients_cut_off]    7
    Should Be Equal As Integers    ${after}[netstack][tcp_client_restart_requests]    7
    Should Be Equal As Integers    ${after}[netstack][tcp_channels_broken]    7
    # Attack 2's unknown pool, attack 5's descriptor and the first of
    # attack 6's forged sends were read, rejected and counted (unknown
    # pools count as foreign), and each broke the channel; none of the
    # other 20 forged sends was read.
    ${foreign}=    Delta    ${after}    tcp_rejected_foreign_pool
    Should Be Equal As Integers    ${foreign}    3

Memory Comes Back And The System Goes Idle
    Wait Until Keyword Succeeds    120s    1s
    ...    Serial Line Seen    ^\\[hostile\\] all attacks done: an honest client from now on$
    ${n}=    Every File Should Be Byte Exact    ${NETHOSTILE_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    The System Goes Idle
    ${after}=    Stats Json
    # The client listens on one port again, as after boot; its buffers are
    # back in netstack's pool and its sockets' rings in the budget.
    Should Be Equal As Integers    ${after}[netstack][tcp_socket_bytes]    ${BASELINE}[netstack][tcp_socket_bytes]
    Should Be True
    ...    ${after}[netstack][tcp_sock_pool_pages_in_use] <= ${BASELINE}[netstack][tcp_sock_pool_pages_in_use]
    ...    sock pool pages ${after}[netstack][tcp_sock_pool_pages_in_use]
    Should Be True
    ...    ${after}[netstack][tcp_hdr_pool_pages_in_use] <= ${BASELINE}[netstack][tcp_hdr_pool_pages_in_use] + 1
    ...    header pool pages ${after}[netstack][tcp_hdr_pool_pages_in_use]
    Log    netstack after boot and warm-up: ${BASELINE}[netstack]
    Log    netstack after the attacks: ${after}[netstack]
    Should Be True
    ...    ${after}[netstack][tcp_heap_used] <= ${BASELINE}[netstack][tcp_heap_used] + 16384
    ...    heap ${after}[netstack][tcp_heap_used], after boot ${BASELINE}[netstack][tcp_heap_used]
    Serial Should Stay Quiet About Faults    1s
