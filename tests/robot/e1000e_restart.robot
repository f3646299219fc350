*** Settings ***
Documentation       netdrv restarted on the e1000e (82574L): the recovery image (tests/variants)
...                 on `simulate --shape q35-e1000e`, a fault injected into netdrv; the new
...                 incarnation takes the running 82574 over without a reset, as it does
...                 the 82540EM (tests/robot/recovery_net.robot), and the site is served
...                 byte for byte again, keep-alive and pipelined, with the dead
...                 incarnation's pool pages back and nobody else restarted.
...
...                 Serial lines these tests wait for (stable):
...                 | [netdrv] restart 1: taking the running e1000e over (no reset) |
...                 | [netstack] netdrv back after N ms |
...                 | [netdrv] death 1 settled: N quarantined pool pages free again |
Library             QemuSystem    ${RECOVERY_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Recovery Image On The e1000e
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           recovery    e1000e-restart

*** Variables ***
${RECOVERY_BUILD_DIR}    ${CURDIR}/../../build/variants/recovery
${PORT}                  8095
@{SMALL}                 /index.html    /style.css    /file-1k.txt    /sub/note.txt

*** Keywords ***
Boot The Recovery Image On The e1000e
    Start System    --shape    q35-e1000e    --port    ${PORT}:80    --disk    ${RECOVERY_BUILD_DIR}/images/site.img
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait For Web Server    timeout=90
    Check Bodies Against Site    ${RECOVERY_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    Serial Line Seen    ^\\[netdrv\\] e1000e at 00:02\\.0 mac 52:54:00:12:34:56 link (up|down)$

*** Test Cases ***
A netdrv Fault On The e1000e: Taken Over, No Reset, The Site Byte Exact Again
    ${before}=    Stats Json
    Should Be Equal As Integers    ${before}[netdrv][drv_restarts]    0
    Keep Alive Requests    10    /file-64k.bin
    Inject Fault Into    netdrv
    Wait For Serial Line    ^\\[supervisor\\] FAULT in component netdrv: vm fault \\(.* of an unmapped page\\) at address 0xbad, ip 0xbad$    timeout=30s
    Wait For Serial Line    ^\\[netdrv\\] restart 1: taking the running e1000e over \\(no reset\\)$    timeout=30s
    Wait For Serial Line    ^\\[netstack\\] netdrv back after \\d+ ms    timeout=30s
    ${n}=    Every File Should Be Byte Exact    ${RECOVERY_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10
    Keep Alive Requests    20    /file-64k.bin
    ${n}=    Pipelined Rounds Should Be Byte Exact    1    64    each    @{SMALL}
    Should Be Equal As Integers    ${n}    ${{64 * len($SMALL)}}
    Wait For Serial Line Anywhere    ^\\[netdrv\\] death 1 settled: \\d+ quarantined pool pages free again$    timeout=30s
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[netdrv][drv_restarts]    1
    Should Be Equal As Integers    ${after}[netdrv][drv_quarantined_pages]    0
    Should Be Equal As Integers    ${after}[netdrv][drv_link_up]    1
    ${lines}=    Serial Lines So Far
    ${others}=    Evaluate    [l for l in $lines if 'restarted component' in l and 'component netdrv ' not in l]
    Should Be Empty    ${others}
    Serial Should Stay Quiet About Faults    1s
