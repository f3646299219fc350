*** Settings ***
Documentation       The release configuration: a kernel without debug system calls or
...                 printing, and a root task that writes COM1 through its I/O port
...                 capability. It must pass the same self-test as the debug build.
Library             QemuSystem    ${RELEASE_BUILD_DIR}
Test Tags           release
Test Teardown       Stop System And Attach Log If Failed

*** Variables ***
${RELEASE_BUILD_DIR}        build/variants/release

*** Test Cases ***
Release Image Passes The Root Task Self-Test
    Start System
    Expect Fault    ^\\[supervisor\\] FAULT in component hello_reader: vm fault \\(write denied
    Wait For Serial Line    ^Iolite OS root task \\(seL4 5\\.0\\.0, release kernel    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] ipc: round trip OK
    Wait For Serial Line    ^\\[roottask\\] all checks passed
    # Components print nothing on a release kernel (no debug console), but
    # the supervisor does, through COM1: the hello reader's deliberate fault
    # and its restart prove the loader and supervisor work here too.
    Wait For Serial Line    ^\\[supervisor\\] restarted component hello_reader \\(restart 1\\)
    Serial Should Stay Quiet About Faults    1s
