*** Settings ***
Documentation       Self-healing of the TCP/IP stack under load (camkes/iolite.camkes:
...                 netstack.restartable). 16 keep-alive clients fetch the site's files, every
...                 body checked byte for byte against the manifest, while netstack is made
...                 to fault (or to hang) a few seconds in. The supervisor re-creates it from
...                 the spec; the connections it held are lost (their peers see resets, or
...                 nothing more: the clients give up after 3 s and reconnect). netdrv lets
...                 go of the link and attaches to the new incarnation's; httpd drops every
...                 connection's state, sets the client region up again and listens anew.
...                 What netstack held by reference stays quarantined by its lenders until
...                 every peer confirmed the death (components/netstack/README.md "Its own
...                 restarts").
...
...                 Targets: only connections open at the fault fail (at most one request
...                 each); connections opened after it are served, the first within 500 ms
...                 of the fault; afterwards the pools are back at their baseline, nothing
...                 of the dead incarnation quarantined, no other component restarted, and
...                 the root task's free untyped memory is what it was after loading.
...
...                 Serial lines these tests wait for (stable):
...                 | [netdrv] netstack died (death D): Q buffers lent to it quarantined, T of its frames still on the NIC; link released |
...                 | [netstack] restart N: waiting for netdrv to let go of the link |
...                 | [netdrv] netstack's new incarnation attached after T ms (link generation G) |
...                 | [httpd] netstack died (death D): C connections dropped, R requests unsent, Q buffers lent to it quarantined, region set up again (generation G) |
...                 | [netstack] httpd attached on client (generation G) |
...                 | [netstack] first connection accepted T ms after the restart |
...                 | [netstack] death D settled: P quarantined pool pages free again |
Library             OperatingSystem
Library             QemuSystem    ${RECOVERY_BUILD_DIR}
Library             TapNetwork
Library             WebClient    ${GUEST}
Library             RecoveryClient    ${GUEST}
Suite Setup         Boot The Recovery Image
Suite Teardown      Run Keywords    Stop System    AND    Delete Tap Network
Test Teardown       Attach Serial Log If Test Failed
Test Tags           recovery

*** Variables ***
${RECOVERY_BUILD_DIR}    ${CURDIR}/../../build/variants/recovery
# The guest as the clients reach it: on a TAP network (Boot The Recovery
# Image), the host's Linux TCP stack as their peer.
${GUEST}                10.0.2.15:80
${MANIFEST}             ${RECOVERY_BUILD_DIR}/images/site.manifest
${CLIENTS}              16
@{FILES}                /index.html    /file-16k.bin    /style.css    /file-64k.bin    /odd-100000.bin    /file-1k.txt

*** Keywords ***
Boot The Recovery Image
    ${ns}=    Create Tap Network
    Enter Tap Network
    Start System In Namespace    ${ns}    --tap    tap0    --disk    ${RECOVERY_BUILD_DIR}/images/site.img
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait For Web Server    timeout=90

Pools Of
    [Arguments]    ${stats}
    ${p}=    Create List    ${stats}[netdrv][drv_rx_pool_pages_in_use]    ${stats}[netstack][tcp_hdr_pool_pages_in_use]
    ...    ${stats}[netstack][tcp_sock_pool_pages_in_use]    ${stats}[httpd][pool_pages_in_use]
    ...    ${stats}[fs][pool_pages_in_use]
    RETURN    ${p}

Warm Baseline
    [Documentation]    Every file of the site once (fs's cache and httpd's header cache
    ...    hold them), then a reading of the pools: what the same files take afterwards.
    Every File Should Be Byte Exact    ${MANIFEST}
    ${s}=    Stats Json
    ${s}=    Stats Json
    RETURN    ${s}

Pools Should Be Back To
    [Arguments]    ${baseline}
    ${after}=    Stats Json
    ${p0}=    Pools Of    ${baseline}
    ${p1}=    Pools Of    ${after}
    # httpd's pool may keep one page more: the header cache's objects
    # share pages with the per-response ones (Domain::pack), and the page
    # being filled at the death was quarantined, so later headers went to
    # another one (not one more per restart: the second test checks that).
    ${slack}=    Create List    ${0}    ${0}    ${0}    ${1}    ${0}
    Should Be True    all(a <= b + s for a, b, s in zip($p1, $p0, $slack))
    ...    pool pages in use (netdrv rx, netstack hdr, sock, httpd, fs): before ${p0}, after ${p1}

Free Untyped After Loading
    ${line}=    Serial Line Seen    ^\\[roottask\\] free untyped memory after loading: \\d+ KiB$
    ${kib}=    Evaluate    int(re.search(r"(\\d+) KiB", $line).group(1))    modules=re
    RETURN    ${kib}

Free Untyped After Restart
    [Arguments]    ${n}
    ${lines}=    Serial Lines So Far
    ${free}=    Evaluate    [int(m.group(1)) for m in map(re.compile(r"^\\[supervisor\\] memory after restarting netstack: (\\d+) bytes of untyped free").match, $lines) if m]    modules=re
    Length Should Be    ${free}    ${n}
    RETURN    ${free}

Netstack Loses Its Connections Under Load
    [Arguments]    ${how}    ${death}    ${new_within_ms}
    [Documentation]    The load, the fault (or hang) at 3 s, 4 s more; then the targets.
    ...    Besides the keep-alive clients, a probe opens a fresh connection every 50 ms:
    ...    the clients notice that their connections ended only when they time out (3 s)
    ...    or their peer retransmits, the probe measures when new ones are served.
    ${baseline}=    Warm Baseline
    Start Static Load    ${MANIFEST}    ${CLIENTS}    @{FILES}    timeout=3
    Start Connection Probe    ${MANIFEST}    /index.html
    Sleep    3s
    Mark Load Time    fault
    IF    $how == "fault"
        Inject Fault Into    netstack
    ELSE
        Make Component Hang    netstack
    END
    # The fault takes effect when netdrv stops lending received frames to
    # the dead stack (its "netstack died" line): SYNs it handed over until
    # then are lost with the stack, like the connections it held. A fixed
    # 100 ms after the command was not always enough under load.
    Wait For Serial Line Anywhere    ^\\[netdrv\\] netstack died \\(death ${death}\\)    timeout=10s
    Mark Load Time    effective
    Sleep    4s
    ${r}=    Stop Static Load
    Log    ${CLIENTS} clients, netstack ${how} at 3 s: ${r}
    # The console's lines are checked once the load has stopped (the
    # load's own outcome first).
    IF    $how == "fault"
        Wait For Serial Line    ^\\[supervisor\\] FAULT in component netstack: vm fault \\(.* of an unmapped page\\) at address 0xbad, ip 0xbad$    timeout=30s
    ELSE
        Wait For Serial Line    ^\\[supervisor\\] component netstack is stuck: \\d+ ms of CPU without progress \\(limit \\d+ ms\\): restarting it$    timeout=30s
    END
    Wait For Serial Line    ^\\[supervisor\\] restarted component netstack \\(restart ${death}\\)$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[netdrv\\] netstack died \\(death ${death}\\): \\d+ buffers lent to it quarantined    timeout=30s
    Wait For Serial Line Anywhere    ^\\[httpd\\] netstack died \\(death ${death}\\): \\d+ connections dropped    timeout=30s
    Wait For Serial Line Anywhere    ^\\[netdrv\\] netstack's new incarnation attached after \\d+ ms \\(link generation \\d+\\)$    timeout=30s
    # Only the connections open at the fault failed, each at most once;
    # every connection opened after it was served: the probe's first one
    # within the target, and at most the one in flight at the fault failed.
    Should Be True    ${r}[failed_on_connections_open_at_fault] <= ${CLIENTS}
    Should Be Equal As Integers    ${r}[failed_on_connections_opened_after_effective]    0
    # The target is bench/recovery's verdict on a quiet host: here a
    # shared host's stalls only warn, three times the target fails.
    Should Be True    ${r}[probe_served_after_effective_ms] < 3 * ${new_within_ms}
    IF    ${r}[probe_served_after_effective_ms] >= ${new_within_ms}
        Log    probe served ${r}[probe_served_after_effective_ms] ms after the ${how} took effect, above the ${new_within_ms} ms target    WARN
    END
    ${note}=    Catenate    new connections: first served ${r}[probe_served_after_fault_ms] ms after the command,
    ...    ${r}[probe_served_after_effective_ms] ms after it took effect; longest time without a
    ...    served probe around the fault ${r}[probe_gap_near_fault_ms] ms
    Log    ${note}
    # A hung stack is restarted only once liveness has seen it burn
    # hang_cpu_ms: probes that connect to it meanwhile may be lost with
    # it (their SYNs met a stack that never ran again). After a fault the
    # restart is immediate and none may fail.
    IF    $how == "fault"
        Should Be Equal As Integers    ${r}[probes_failed_after_effective]    0
    ELSE
        Log    probes lost to the hung incarnation before its restart: ${r}[probes_failed_after_effective]
    END
    # The keep-alive clients reconnect once their 3 s timeout ends a
    # connection the dead incarnation held (or a retransmission of their
    # peer met the new one's reset).
    Should Be True    ${r}[first_new_connection_served_after_fault_ms] < 4000
    Should Be True    min(${r}[per_client]) > 0
    Should Be True    ${r}[requests] > 200
    # The death settles once the NIC sent the dead incarnation's frames and
    # httpd dropped what it received from it: the quarantines end.
    Wait For Serial Line Anywhere    ^\\[httpd\\] netstack death ${death}: nothing of the dead incarnation in use any more, confirmed$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[netdrv\\] netstack death ${death}: none of its frames on the NIC any more, confirmed$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[httpd\\] netstack death ${death} settled: \\d+ buffers lent to it released$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[netdrv\\] netstack death ${death} settled: \\d+ buffers lent to it released$    timeout=30s
    Every File Should Be Byte Exact    ${MANIFEST}
    Sleep    1s
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[netstack][tcp_restarts]    ${death}
    Should Be Equal As Integers    ${after}[netstack][tcp_quarantined_pages]    0
    Should Be Equal As Integers    ${after}[httpd][netstack_restarts]    ${death}
    Should Be Equal As Integers    ${after}[netdrv][drv_restarts]    0
    # Nothing leaked: at most what was in use before (a reading itself may
    # hold a header page in flight: read again for a few seconds).
    Wait Until Keyword Succeeds    10s    1s    Pools Should Be Back To    ${baseline}
    # Nobody else was restarted.
    ${lines}=    Serial Lines So Far
    ${others}=    Evaluate    [l for l in $lines if 'restarted component' in l and 'component netstack ' not in l]
    Should Be Empty    ${others}
    # The root task's free untyped memory is what it was after loading.
    ${kib}=    Free Untyped After Loading
    ${free}=    Free Untyped After Restart    ${death}
    Should Be Equal As Integers    ${{ $free[-1] // 1024 }}    ${kib}
    RETURN    ${r}

*** Test Cases ***
A netstack Fault Under Load Fails Only The Connections It Held, New Ones Within 500 ms
    ${r}=    Netstack Loses Its Connections Under Load    fault    1    500

A Hung netstack Is Detected, Restarted And Serves New Connections
    # Liveness needs netstack.hang_cpu_ms (500 ms) of CPU without progress,
    # sampled on the supervisor's clock, before it restarts it (recovery.robot:
    # within 2 s): new connections within 3 s of the hang.
    ${r}=    Netstack Loses Its Connections Under Load    hang    2    3000
    ${free}=    Free Untyped After Restart    2
    Should Be Equal As Integers    ${free}[0]    ${free}[1]    free untyped memory changed across restarts: ${free}
