*** Settings ***
Documentation       The foundation: seL4 5.0.0 boots our root task in QEMU (TCG),
...                 the root task reports its boot info, builds a second thread from
...                 untyped memory and exchanges an IPC message with it.
...                 Any kernel or user fault on the console fails the test.
Library             QemuSystem    ${HELLO_BUILD_DIR}
Suite Setup         Boot The Default Image
Suite Teardown      Stop System
Test Tags           hello
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
# The test variant "hello" (examples/hello/hello.camkes, tests/variants).
${HELLO_BUILD_DIR}        ${CURDIR}/../../build/variants/hello

*** Test Cases ***
Kernel Boots And Drops To User Space
    Wait For Serial Line    Booting all finished, dropped to user space    timeout=60s

Root Task Prints Its Banner
    ${line}=    Wait For Serial Line    ^Iolite OS root task \\(seL4 5\\.0\\.0    timeout=30s
    ${seconds}=    Seconds Since Start
    Log    banner ${{round($seconds, 2)}} s after QEMU started

Root Task Reports Untyped Memory
    ${line}=    Wait For Serial Line    ^\\[roottask\\] boot info: \\d+ untyped caps
    ${mib}=    Evaluate    int(re.search(r"(\\d+) MiB of RAM", $line).group(1))    modules=re
    # The guest has 512 MiB; the kernel and boot modules take a little of it.
    Should Be True    400 <= ${mib} <= 512    untyped RAM ${mib} MiB is implausible for a 512 MiB guest

Root Task Reports Device Regions
    ${line}=    Wait For Serial Line    ^\\[roottask\\] device region 0x[0-9a-f]+-0x[0-9a-f]+
    Log    ${line}

Second Thread Is Built From Untyped Memory
    Wait For Serial Line    ^\\[roottask\\] worker thread started
    Wait For Serial Line    ^\\[worker\\] running

IPC Round Trip Succeeds
    Wait For Serial Line    ^\\[roottask\\] ipc: round trip OK

Root Task Finishes Without Faults
    # The default image runs the hello assembly, whose reader faults on
    # purpose (tests/robot/components.robot); any other fault fails.
    Expect Fault    ^\\[supervisor\\] FAULT in component hello_reader: vm fault \\(write denied
    Wait For Serial Line    ^\\[roottask\\] all checks passed
    Serial Should Stay Quiet About Faults    2s
    System Should Be Running

*** Keywords ***
Boot The Default Image
    Start System
