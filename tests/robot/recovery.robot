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
Library             OperatingSystem
Library             String
Library             QemuSystem    ${RECOVERY_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Recovery Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           recovery

*** Variables ***
${RECOVERY_BUILD_DIR}    ${CURDIR}/../../build/variants/recovery
${PORT}             8080

*** Keywords ***
Boot The Recovery Image
    Start System    --port    ${PORT}:80    --disk    ${RECOVERY_BUILD_DIR}/images/site.img
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait For Web Server    timeout=90

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

*** Test Cases ***
The Recovery Image Carries The Command Reader
    # The counterpart of iso.robot's check that the default image has none.
    ${img}=    Get Binary File    ${RECOVERY_BUILD_DIR}/images/roottask.elf
    Should Be True    $img.__contains__(b"cannot inject a")
    ${spec}=    Get File    ${RECOVERY_BUILD_DIR}/system/system.txt
    Should Contain    ${spec}    fault injection: granted

An Injected Fault Into The Cgi Is Reported By Name And Restarted
    Fault Is Reported And Restarted    cgi

An Injected Fault Into The Log Server Is Reported By Name And Restarted
    Fault Is Reported And Restarted    log

A Command For An Unknown Component Is Refused
    Inject Fault Into    nosuch
    Wait For Serial Line    ^\\[supervisor\\] error: cannot inject a fault into component nosuch: no such component$    timeout=10s
    The Site Should Be Byte Exact
