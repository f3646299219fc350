*** Settings ***
Documentation       The release configuration (RELEASE=ON) of the whole system,
...                 camkes/iolite.camkes: a kernel without debug system calls or
...                 printing, a root task that writes COM1 through its I/O port
...                 capability until the log component runs, and log printing every
...                 component's lines through its own I/O port capability. It must boot
...                 every component, serve the demo site byte for byte and report a
...                 fault by the component's name, as the debug build does. The image
...                 (tests/variants' release) has the cgi's test hooks for the fault.
...
...                 Serial lines these tests wait for (stable):
...                 | Iolite OS root task (seL4 5.0.0, release kernel, x86_64 pc99) |
...                 | [roottask] all checks passed |
...                 | [roottask] system started: 8 of 8 components running; supervising faults |
...                 | [log] printing the lines of 7 components |
...                 | [httpd] listening on port 80 |
...                 | [supervisor] FAULT in component cgi: ... |
...                 | [supervisor] restarted component cgi (restart 1) |
Library             OperatingSystem
Library             QemuSystem    ${RELEASE_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Release Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           release

*** Variables ***
# The release image (tests/variants); tests/run-all passes its folder.
${RELEASE_BUILD_DIR}        ${CURDIR}/../../build/variants/release
${PORT}                     8080

*** Keywords ***
Boot The Release Image
    Start System    --port    ${PORT}:80    --disk    ${RELEASE_BUILD_DIR}/images/site.img
    Check Bodies Against Site    ${RELEASE_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

*** Test Cases ***
The Release Kernel Boots And The Root Task Passes Its Self-Test
    Wait For Serial Line    ^Iolite OS root task \\(seL4 5\\.0\\.0, release kernel, x86_64 pc99\\)$    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] ipc: round trip OK
    Wait For Serial Line    ^\\[roottask\\] all checks passed$
    # A release kernel prints nothing: no boot messages on the console,
    # and not even their text in the kernel image.
    ${kernel_spoke}=    Run Keyword And Return Status    Serial Line Seen    Booting all finished
    Should Not Be True    ${kernel_spoke}    the kernel printed its boot messages: not a release kernel
    ${kernel}=    Get Binary File    ${RELEASE_BUILD_DIR}/images/kernel32.elf
    Should Not Be True    $kernel.__contains__(b"Booting all finished")    the kernel image has the debug build's messages

Every Component Starts And Prints Through Log
    Wait For Serial Line    ^\\[roottask\\] system started: 8 of 8 components running; supervising faults$    timeout=60s
    # log prints the lines of all 7 other components from their rings (and
    # the root task's, whose lines name themselves); it says so once it runs.
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[log\\] printing the lines of 7 components$
    # Each component's first lines, in whichever order they come.
    FOR    ${line}    IN
    ...    ^\\[ticker\\] PIT at 20 Hz \\(divisor 59659\\), boot time \\d+
    ...    ^\\[pci_config\\] ready: 2 grants \\(1=00:05\\.0 2=00:03\\.0\\)$
    ...    ^\\[fs\\] ready$
    ...    ^\\[netdrv\\] e1000 at 00:03\\.0 mac 52:54:00:12:34:56 link up$
    ...    ^\\[netstack\\] ip 10\\.0\\.2\\.15/24 gw 10\\.0\\.2\\.2$
    ...    ^\\[cgi\\] ready \\(generation 1, restart 0\\)$
    ...    ^\\[httpd\\] listening on port 80$
    ...    ^\\[httpd\\] cgi attached \\(generation 1\\)$
        Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ${line}
    END
    ${n}=    Console Lines Should Be Whole    roottask    supervisor    log    pci_config    ticker
    ...    netdrv    netstack    fs    httpd    cgi
    Should Be True    ${n} >= 15

The Site Answers Byte-Exact
    Wait For Web Server    timeout=90
    ${n}=    Every File Should Be Byte Exact    ${RELEASE_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    ${status}    ${h}    ${body}=    Fetch    /
    Should Be Equal As Integers    ${status}    200
    ${file}=    Get Binary File    ${CURDIR}/../../site/index.html
    Should Be Equal    ${body}    ${file}
    # One connection, several requests, every body checked against the
    # manifest's SHA-256.
    ${ok}=    Keep Alive Requests    10    /file-64k.bin
    Should Be Equal As Integers    ${ok}    10
    ${statuses}=    Pipelined Requests    /index.html    /style.css    /file-1k.txt    /file-64k.bin
    Should Be Equal As Strings    ${statuses}    [200, 200, 200, 200]

CGI Pages Are Generated And Served
    # /cgi-bin/page: the site's fragments around the generated parts,
    # checked byte for byte (WebClient's site check).
    ${ok}=    Keep Alive Requests    3    /cgi-bin/page
    Should Be Equal As Integers    ${ok}    3
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo    method=POST    body=release=1&n=42
    Should Be Equal As Integers    ${status}    200
    ${body}=    Evaluate    $body.decode("utf-8", "replace")
    Should Contain    ${body}    method: POST
    Should Contain    ${body}    CONTENT_LENGTH=14
    Should End With    ${body}    release=1&n=42

A Fault In The CGI Is Reported By Name And The CGI Restarted
    # No kernel fault message on a release kernel: the supervisor's report,
    # through log, is the only one.
    Expect Fault    ^\\[cgi\\] PANIC at .*: /cgi-bin/crash: crashing on purpose$
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi: user exception invalid opcode
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/crash
    Should Be Equal As Integers    ${status}    502
    Wait For Serial Line    ^\\[cgi\\] crash requested$
    Wait For Serial Line    ^\\[supervisor\\] FAULT in component cgi: user exception invalid opcode \\(panic or abort\\) \\(vector 6, code 0x0\\), ip 0x[0-9a-f]+$
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi \\(restart 1\\)$
    Wait Until Keyword Succeeds    30s    0.5s    Serial Line Seen    ^\\[cgi\\] ready \\(generation 2, restart 1\\)$
    Wait Until Keyword Succeeds    30s    0.5s    Serial Line Seen    ^\\[httpd\\] cgi restarted \\(generation 2\\): \\d+ requests failed with 502$
    ${ok}=    Keep Alive Requests    2    /cgi-bin/page
    Should Be Equal As Integers    ${ok}    2
    ${ok}=    Keep Alive Requests    2    /index.html
    Should Be Equal As Integers    ${ok}    2

No Fault Besides The Provoked One
    Serial Should Stay Quiet About Faults    2s
    System Should Be Running
