*** Settings ***
Documentation       Self-healing: faults and hangs injected into the running system
...                 (roottask/src/inject.rs) are reported by name and the component is
...                 restarted, while the site keeps serving byte-exact and no other
...                 component is restarted.
...
...                 The keywords `Inject Fault Into` and `Make Component Hang`
...                 (tests/lib/QemuSystem.py) write a command to the serial console;
...                 the supervisor obeys it only for components the assembly grants
...                 (`<instance>.fault_injection = 1`): the recovery image
...                 (tests/variants) grants every component, the default image none
...                 and has no command reader (tests/robot/iso.robot).
...
...                 Serial lines these tests wait for (stable):
...                 | [supervisor] injected a fault into component NAME: ip OLD -> 0xbad |
...                 | [supervisor] FAULT in component NAME: vm fault (read of an unmapped page) at address 0xbad, ip 0xbad |
...                 | [supervisor] restarted component NAME (restart N) |
...                 | [supervisor] component NAME is stuck: C ms of CPU without progress (limit L ms): restarting it |
...                 | [supervisor] memory after restarting NAME: F bytes of untyped free, NAME built from U bytes |
Library             OperatingSystem
Library             String
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
${GUEST}            10.0.2.15:80

*** Keywords ***
Boot The Recovery Image
    ${ns}=    Create Tap Network
    Enter Tap Network
    Start System In Namespace    ${ns}    --tap    tap0    --disk    ${RECOVERY_BUILD_DIR}/images/site.img
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait For Web Server    timeout=90
    Check Bodies Against Site    ${RECOVERY_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

The Site Should Be Byte Exact
    ${n}=    Every File Should Be Byte Exact    ${RECOVERY_BUILD_DIR}/images/site.manifest
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?after\=recovery
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${{$body.decode()}}    QUERY_STRING=after=recovery

Restarts So Far
    [Documentation]    The supervisor's restart lines since the boot, as a list of names.
    ${lines}=    Serial Lines So Far
    ${names}=    Evaluate    [m.group(1) for m in map(re.compile(r"^\\[supervisor\\] restarted component (\\w+)").match, $lines) if m]    modules=re
    RETURN    ${names}

Fault Is Reported And Restarted
    [Arguments]    ${component}
    ${before}=    Restarts So Far
    Inject Fault Into    ${component}
    Wait For Serial Line    ^\\[supervisor\\] injected a fault into component ${component}: ip 0x[0-9a-f]+ -> 0xbad$    timeout=10s
    Wait For Serial Line    ^\\[supervisor\\] FAULT in component ${component}: vm fault \\(.* of an unmapped page\\) at address 0xbad, ip 0xbad$    timeout=10s
    ${t}=    Seconds From Command To Line    ^\\[supervisor\\] restarted component ${component} \\(restart \\d+\\)$    timeout=20s
    Log    ${component}: fault injected and restarted in ${t} s
    Sleep    0.5s
    The Site Should Be Byte Exact
    ${after}=    Restarts So Far
    ${expected}=    Evaluate    $before + [$component]
    Should Be Equal    ${after}    ${expected}    only ${component} is restarted

Hang Is Detected And Restarted
    [Arguments]    ${component}
    ${before}=    Restarts So Far
    Make Component Hang    ${component}
    Wait For Serial Line    ^\\[supervisor\\] injected a hang into component ${component}: ip 0x[0-9a-f]+ -> 0x[0-9a-f]+$    timeout=10s
    Wait For Serial Line    ^\\[supervisor\\] component ${component} is stuck: \\d+ ms of CPU without progress \\(limit \\d+ ms\\): restarting it$    timeout=10s
    ${t}=    Seconds From Command To Line    ^\\[supervisor\\] restarted component ${component} \\(restart \\d+\\)$    timeout=10s
    Log    ${component}: hang detected and restarted ${t} s after the command
    Should Be True    ${t} < 2.0    ${component}: ${t} s from the hang to the restart
    Sleep    0.5s
    The Site Should Be Byte Exact
    ${after}=    Restarts So Far
    ${expected}=    Evaluate    $before + [$component]
    Should Be Equal    ${after}    ${expected}    only ${component} is restarted
    RETURN    ${t}

HTTPD CGI Failures Reported
    [Documentation]    The requests httpd failed with 502 for dead incarnations of the cgi so
    ...    far: the sum of its `cgi died` and `cgi restarted` lines' counts (with the
    ...    death protocol the first counts them and the second 0; without, the second).
    ${lines}=    Serial Lines So Far
    ${n}=    Evaluate    sum(int(m.group(1)) for m in map(re.compile(r"^\\[httpd\\] cgi (?:died \\(death \\d+\\)|restarted \\(generation \\d+\\)): (\\d+) requests failed with 502").match, $lines) if m)    modules=re
    RETURN    ${n}

Memory Lines
    [Arguments]    ${component}
    ${lines}=    Serial Lines So Far
    ${found}=    Evaluate    [(int(m.group(1)), int(m.group(2))) for m in map(re.compile(r"^\\[supervisor\\] memory after restarting ${component}: (\\d+) bytes of untyped free, ${component} built from (\\d+) bytes$").match, $lines) if m]    modules=re
    RETURN    ${found}

*** Test Cases ***
The Recovery Image Carries The Command Reader
    # The counterpart of iso.robot's check that the default image has none.
    ${img}=    Get Binary File    ${RECOVERY_BUILD_DIR}/images/roottask.elf
    Should Be True    $img.__contains__(b"cannot inject a")
    ${spec}=    Get File    ${RECOVERY_BUILD_DIR}/system/system.txt
    Should Contain    ${spec}    fault injection: granted

An Injected Fault Into The Cgi Is Reported By Name And Restarted
    Fault Is Reported And Restarted    cgi

A Cgi Fault Under Load Fails Only The Requests In Flight
    # Eight keep-alive clients each fetch, in turn, two streamed CGI pages
    # (/cgi-bin/stream's text), an echo of a POST of 2 KiB of their own and
    # three static files, every body checked byte for byte. A fault in the
    # cgi fails what its dead incarnation had (at most one request per
    # client; httpd counts them in its `cgi died` line); requests that
    # arrive until the new incarnation attaches are held by httpd and
    # answered by it (components/httpd/README.md, "held while the cgi is
    # away"): every request sent after the fault got 200 and its bytes.
    # A first fault just before makes the supervisor's back-off hold the
    # restart after this one for at least 100 ms (restart_backoff_ms):
    # a gap that requests certainly arrive in (a first restart is
    # immediate and the gap often shorter than a client's round trip).
    # Eight: the cgi runs at most 8 streams at once (503 beyond).
    ${clients}=    Set Variable    8
    Inject Fault Into    cgi
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi \\(restart \\d+\\)$    timeout=20s
    Wait For Serial Line    ^\\[httpd\\] cgi restarted    timeout=20s
    Sleep    1s
    ${before}=    Stats Json
    ${restarts}=    Restarts So Far
    ${n0}=    HTTPD CGI Failures Reported
    Start Static Load    ${RECOVERY_BUILD_DIR}/images/site.manifest    ${clients}
    ...    /cgi-bin/stream?size\=3000&parts\=1&seed\=3    POST /cgi-bin/echo?load
    ...    /cgi-bin/stream?size\=70000&parts\=2&delay_ms\=0&length\=1&seed\=5    /index.html    /file-64k.bin
    ...    /odd-100000.bin
    Sleep    3s
    Mark Load Time    fault
    Inject Fault Into    cgi
    ${t}=    Seconds From Command To Line    ^\\[supervisor\\] FAULT in component cgi: .*ip 0xbad$    timeout=10s
    ${backoff}=    Wait For Serial Line    ^\\[supervisor\\] component cgi died \\d+ times in \\d+ ms: restart in \\d+ ms \\(back-off\\)$    timeout=10s
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi \\(restart \\d+\\)$    timeout=20s
    Sleep    4s
    ${r}=    Stop Static Load
    ${after}=    Stats Json
    Log    httpd before: ${before}[httpd]
    Log    httpd after: ${after}[httpd]
    Log    netstack after: ${after}[netstack]
    ${failed}=    Only Requests In Flight At Should Have Failed    fault    ${t}    ${clients}
    ${n1}=    HTTPD CGI Failures Reported
    ${in_flight}=    Evaluate    ${n1} - ${n0}
    Log    ${failed} requests failed at the fault, httpd failed ${in_flight} in flight; ${backoff}; ${r}
    # A request the dead cgi had may have been a stream whose client had
    # all of it: it counts at httpd, not as a failure at the client.
    Should Be True    ${failed} <= ${in_flight}    the clients saw ${failed} failures, httpd failed ${in_flight}
    ${h0}=    Set Variable    ${before}[httpd]
    ${h1}=    Set Variable    ${after}[httpd]
    ${queued}=    Evaluate    ${h1}[cgi_queued] - ${h0}[cgi_queued]
    ${served}=    Evaluate    ${h1}[cgi_queue_served] - ${h0}[cgi_queue_served]
    ${dropped}=    Evaluate    ${h1}[cgi_queue_dropped] - ${h0}[cgi_queue_dropped]
    Log    held while the cgi was away: ${queued}, served by the new incarnation: ${served}, dropped: ${dropped}
    Should Be True    ${queued} > 0    no request arrived in the back-off's gap
    ${expect}=    Evaluate    ${queued} - ${dropped}
    Should Be Equal As Integers    ${served}    ${expect}
    Should Be Equal As Integers    ${h1}[cgi_queue_refused]    ${h0}[cgi_queue_refused]
    Should Be Equal As Integers    ${h1}[cgi_queue_expired]    ${h0}[cgi_queue_expired]
    ${after_restarts}=    Restarts So Far
    ${expected}=    Evaluate    $restarts + ['cgi']
    Should Be Equal    ${after_restarts}    ${expected}    only the cgi is restarted
    The Site Should Be Byte Exact

An Injected Fault Into The Log Server Is Reported By Name And Restarted
    Fault Is Reported And Restarted    log

A Command For An Unknown Component Is Refused
    Inject Fault Into    nosuch
    Wait For Serial Line    ^\\[supervisor\\] error: cannot inject a fault into component nosuch: no such component$    timeout=10s
    The Site Should Be Byte Exact

An Injected Fault Into The Ticker Is Reported By Name And Restarted
    Fault Is Reported And Restarted    ticker
    # Time went on: the clock page's count continued (httpd's Date and
    # timeouts read it), checked by the site serving again above.

Time Goes On Across A Restart Of The Ticker
    # A restarted ticker continues the clock page's count, plus the ticks
    # its downtime took: the uptime everybody reads neither goes back nor
    # lags by the downtime.
    ${j}=    Stats Json
    ${u0}=    Set Variable    ${j}[uptime_ms]
    ${t0}=    Evaluate    time.monotonic()    modules=time
    Inject Fault Into    ticker
    Wait For Serial Line    ^\\[supervisor\\] restarted component ticker \\(restart \\d+\\)$    timeout=20s
    Sleep    1s
    ${j}=    Stats Json
    ${u1}=    Set Variable    ${j}[uptime_ms]
    ${t1}=    Evaluate    time.monotonic()    modules=time
    ${host}=    Evaluate    int(($t1 - $t0) * 1000)
    ${guest}=    Evaluate    ${u1} - ${u0}
    Log    ${guest} ms of guest uptime in ${host} ms of host time across the ticker's restart
    Should Be True    ${guest} > 0
    # Two stats requests bracket the host interval: allow their latency and
    # the 50 ms tick on either side.
    Should Be True    abs(${guest} - ${host}) < 400    guest ${guest} ms vs host ${host} ms

An Injected Fault Into Pci Config Is Reported By Name And Restarted
    Fault Is Reported And Restarted    pci_config
    Wait For Serial Line    ^\\[pci_config\\] ready    timeout=10s

A Hung Cgi Is Detected And Restarted Within 2 s
    Hang Is Detected And Restarted    cgi

A Hung Ticker Is Detected And Restarted Within 2 s
    Hang Is Detected And Restarted    ticker

A Hung Pci Config Is Detected And Restarted Within 2 s
    Hang Is Detected And Restarted    pci_config

A Hung Log Server Is Detected And Restarted Within 2 s
    Hang Is Detected And Restarted    log

A Starved Cgi Is Not Taken For A Stuck One
    # Eight clients download 1 MiB files while CGI requests come: the cgi,
    # below everything, gets little CPU; it must not be restarted.
    ${before}=    Restarts So Far
    ${r}=    CGI Requests Under Static Load    8    /file-1m.bin    20
    Log    ${r}
    ${after}=    Restarts So Far
    Should Be Equal    ${after}    ${before}    nothing restarted under load
    ${lines}=    Serial Lines So Far
    ${stuck}=    Evaluate    [l for l in $lines if " is stuck: " in l]
    ${n}=    Get Length    ${stuck}
    Log    ${n} stuck verdicts so far (all from the injected hangs)

A Hundred Restarts Leak No Memory
    # The boot allocator's free untyped memory is reported after every
    # restart and must not move; each incarnation of a component is built
    # from as many bytes of its private untyped as the last. Four
    # components in turn: each is restarted every fourth step, which keeps
    # it below its hold-down (more than 5 deaths in 10 s).
    @{components}=    Create List    cgi    ticker    pci_config    fs
    FOR    ${i}    IN RANGE    100
        ${component}=    Evaluate    $components[${i} % 4]
        Inject Fault Into    ${component}
        Wait For Serial Line    ^\\[supervisor\\] restarted component ${component} \\(restart \\d+\\)$    timeout=20s
        IF    $component == "cgi"
            Wait For Serial Line    ^\\[httpd\\] cgi restarted    timeout=20s
        END
        Sleep    0.6s
    END
    ${free}=    Create List
    FOR    ${component}    IN    @{components}
        ${mem}=    Memory Lines    ${component}
        ${n}=    Get Length    ${mem}
        Should Be True    ${n} >= 25    ${component}: ${n} memory lines for 25 restarts
        ${used}=    Evaluate    sorted(set(u for f, u in $mem))
        Length Should Be    ${used}    1    ${component}'s private memory use changed across restarts: ${used}
        ${free}=    Evaluate    $free + [f for f, u in $mem]
    END
    ${distinct}=    Evaluate    sorted(set($free))
    ${n}=    Get Length    ${free}
    Log    ${n} restarts, free untyped memory after each: ${distinct}
    Length Should Be    ${distinct}    1    free untyped memory changed across restarts: ${distinct}
    # The same figures in /cgi-bin/stats, from the system events page.
    ${stats}=    Stats Json
    Should Be Equal As Integers    ${stats}[supervisor][untyped_free_now]    ${distinct}[0]
    FOR    ${component}    IN    @{components}
        Should Be True    ${stats}[supervisor][deaths_${component}] >= 25
    END
    The Site Should Be Byte Exact
