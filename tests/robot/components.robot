*** Settings ***
Documentation       The component framework on the real image: the loader builds the
...                 hello assembly (examples/hello/hello.camkes) from the spec the
...                 CAmkES compiler wrote, and the components talk through the
...                 generated glue: an RPC round trip with typed arguments, a
...                 notification, and an 8 KiB dataport mapped read-write in
...                 hello_client and read-only in hello_reader. hello_reader then
...                 writes into its read-only mapping: the supervisor reports the fault
...                 by name and restarts it (it is restartable), while the others run on.
Library             QemuSystem    ${HELLO_BUILD_DIR}
Suite Setup         Boot The Hello System
Suite Teardown      Stop System
Test Tags           hello
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
# The test variant "hello" (examples/hello/hello.camkes, tests/variants).
${HELLO_BUILD_DIR}        ${CURDIR}/../../build/variants/hello

*** Test Cases ***
Loader Starts Every Component Of The Assembly
    Wait For Serial Line    ^\\[roottask\\] loading 3 components, 3 objects    timeout=30s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 3 of 3 components running

RPC Round Trip With Typed Arguments
    ${line}=    Wait For Serial Line    ^\\[hello_client\\] rpc (OK|FAILED)
    Should Contain    ${line}    rpc OK:
    # Spot-check values that only a correct marshalling gives.
    Should Contain    ${line}    add(2^64-1,2)=1 overflow=1
    Should Contain    ${line}    swap(7,9)=(9,7)
    Should Contain    ${line}    count_bytes(<800 bytes>)=800

Notification And Read-Only Dataport Carry Data
    Wait For Serial Line    ^\\[hello_client\\] round 1: wrote dataport
    Wait For Serial Line    ^\\[hello_reader\\] dataport OK: round 1, 8192 bytes verified \\(restart 0\\)

Write Into The Read-Only Dataport Faults And Is Reported By Name
    # The one fault this system provokes on purpose (any other fails).
    Expect Fault    ^\\[supervisor\\] FAULT in component hello_reader: vm fault \\(write denied
    Wait For Serial Line    ^\\[hello_reader\\] writing to read-only dataport
    ${line}=    Wait For Serial Line
    ...    ^\\[supervisor\\] FAULT in component hello_reader: vm fault \\(write denied by page rights\\) at address 0x100000000, ip 0x[0-9a-f]+$
    Log    ${line}

Restartable Component Comes Back Clean
    Wait For Serial Line    ^\\[supervisor\\] restarted component hello_reader \\(restart 1\\)
    Wait For Serial Line    ^\\[hello_reader\\] reader started \\(restart 1\\)
    Wait For Serial Line    ^\\[hello_reader\\] dataport OK: round [23], 8192 bytes verified \\(restart 1\\)

Other Components Keep Running After The Fault
    # The client runs on while the reader is stopped at its fault: each
    # component starts as soon as it is built, so the client may finish
    # before the supervisor (which runs once all are built) restarts it.
    Wait For Serial Line Anywhere    ^\\[hello_client\\] client done
    ${lines}=    Serial Lines So Far
    ${fault}=    Evaluate    [i for i, l in enumerate($lines) if l.startswith('[hello_reader] writing to read-only dataport')][0]
    ${last}=    Evaluate    [i for i, l in enumerate($lines) if l.startswith('[hello_client] round 3: rpc OK')][0]
    Should Be True    ${fault} < ${last}    the client's last round came after the reader's fault

Component Exits Cleanly Through The Supervisor
    Wait For Serial Line Anywhere    ^\\[supervisor\\] component hello_client exited \\(status 0\\)
    Serial Should Stay Quiet About Faults    2s
    System Should Be Running

*** Keywords ***
Boot The Hello System
    Start System
