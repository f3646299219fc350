*** Settings ***
Documentation       Self-healing of the network path under load: 16 keep-alive clients
...                 fetch the site's files (up to 256 KiB, every body against the
...                 manifest's SHA-256) while netdrv is made to fault a few seconds in.
...                 The supervisor restarts it (netdrv.restartable); the new incarnation
...                 takes the running e1000 over and netstack sets the link up again for
...                 it, resending what the dead one lost at once. Targets: no failed
...                 request, every body byte-exact, no 300 ms without a completed
...                 response, the pools back to where they were once the death is
...                 settled, no other component restarted.
...
...                 The fault: netdrv's test hook (netdrv.test_hooks = 1) panics on a
...                 received frame carrying IOLITE-TEST-FAULT-NETDRV, in its first
...                 incarnation only (the retransmitted frame then passes).
...
...                 Serial lines these tests wait for (stable):
...                 | [netdrv] test hook: fault frame received, faulting |
...                 | [supervisor] restarted component netdrv (restart 1) |
...                 | [netdrv] restart 1: taking the running e1000 over (no reset) |
...                 | [netstack] netdrv died (death D): Q buffers lent to it quarantined, K frames it received kept, link set up again (generation G) |
...                 | [netstack] netdrv back after T ms: N connections resend what is unacknowledged |
...                 | [netdrv] death D settled: P quarantined pool pages free again |
Library             OperatingSystem
Library             QemuSystem    ${WEBTEST_BUILD_DIR}
Library             WebClient    ${PORT}
Library             RecoveryClient    ${PORT}
Suite Setup         Boot The Web Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           webtest

*** Variables ***
${WEBTEST_BUILD_DIR}    ${CURDIR}/../../build/variants/webtest
${PORT}                 8080
${CLIENTS}              16
${MAX_GAP_MS}           300

*** Keywords ***
Boot The Web Image
    Start System    --port    ${PORT}:80    --disk    ${WEBTEST_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] cgi attached \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90

Pools Of
    [Arguments]    ${stats}
    ${p}=    Create List    ${stats}[netdrv][drv_rx_pool_pages_in_use]    ${stats}[netstack][tcp_hdr_pool_pages_in_use]
    ...    ${stats}[netstack][tcp_sock_pool_pages_in_use]
    RETURN    ${p}

*** Test Cases ***
A netdrv Fault Under Load Fails No Request
    Expect Fault    ^\\[netdrv\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component netdrv:
    ${before}=    Stats Json
    Should Be Equal As Integers    ${before}[netdrv][drv_restarts]    0
    Start Keep Alive Load    ${CLIENTS}    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Sleep    3s
    ${n}=    Load Progress
    Should Be True    ${n} > 50    only ${n} responses in 3 s before the fault
    ${status}=    Send Netdrv Fault Frame
    Wait For Serial Line    ^\\[netdrv\\] test hook: fault frame received, faulting$    timeout=10s
    Wait For Serial Line    ^\\[netstack\\] netdrv died \\(death 1\\)    timeout=10s
    Wait For Serial Line    ^\\[netdrv\\] restart 1: taking the running e1000 over \\(no reset\\)$    timeout=10s
    ${back}=    Wait For Serial Line    ^\\[netstack\\] netdrv back after \\d+ ms    timeout=10s
    Sleep    3s
    ${r}=    Stop Load
    Log    ${back}
    Log    fault request answered with ${status}
    Should Be Equal As Integers    ${r}[failed]    0    failed requests: ${r}[failures]
    Should Be True    ${r}[requests] > 200
    Should Be True    ${r}[gap_ms] < ${MAX_GAP_MS}    largest gap ${r}[gap_ms] ms at ${r}[gap_at_s] s
    # The old incarnation's pages come back once every peer confirmed.
    Wait For Serial Line    ^\\[netdrv\\] death 1 settled: \\d+ quarantined pool pages free again$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[netstack\\] netdrv death 1 settled: \\d+ buffers lent to it released$    timeout=30s
    Sleep    1s
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[netdrv][drv_restarts]    1
    Should Be Equal As Integers    ${after}[netdrv][drv_quarantined_pages]    0
    ${p0}=    Pools Of    ${before}
    ${p1}=    Pools Of    ${after}
    Should Be Equal    ${p1}    ${p0}    pool pages in use (netdrv rx, netstack hdr, sock): before ${p0}, after ${p1}
    # Nobody else was restarted.
    ${lines}=    Serial Lines So Far
    ${others}=    Evaluate    [l for l in $lines if 'restarted component' in l and 'component netdrv ' not in l]
    Should Be Empty    ${others}
    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
