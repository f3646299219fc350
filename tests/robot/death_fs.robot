*** Settings ***
Documentation       The file cache's pages held downstream (components/fs/README.md,
...                 components/iolite/README.md "Death"): a slow client holds static
...                 downloads and CGI pages whose fragments are fs's pages, in an image
...                 with a small cache budget (tests/variants: deathfs), while other
...                 clients force eviction and the cgi (fs's second client) dies. What
...                 the slow client finally receives is byte-exact (the manifest's
...                 sha256, the fragments' bytes) or cut short, never other data.
...
...
...                 This image also caught httpd cutting responses short: with the small
...                 cache, fs refused reads for a while (its buffers held by the slow
...                 client) and httpd closed the connection after 3 883 984 bytes of a
...                 promised body. A busy fs now only delays the body.
Force Tags          deathfs
Library             OperatingSystem
Library             QemuSystem    ${DEATHFS_BUILD_DIR}
Library             WebClient    ${PORT}
Library             DeathClient    ${PORT}
Suite Setup         Boot The Small Cache Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${DEATHFS_BUILD_DIR}    ${CURDIR}/../../build/variants/deathfs
${PORT}             8080
${MANIFEST}         ${DEATHFS_BUILD_DIR}/images/site.manifest
@{FILL}             /file-1m.bin    /file-1m.bin    /file-1m.bin    /file-1m.bin    /file-1m.bin
@{OTHERS}           /file-256k.bin    /odd-100000.bin    /file-64k.bin    /file-1m.bin    /file-16k.bin

*** Keywords ***
Boot The Small Cache Image
    Start System    --port    ${PORT}:80    --disk    ${DEATHFS_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[fs\\] mounted ext2: .* cache budget 256 KiB    timeout=90s
    Wait For Web Server    timeout=90

Others Fetch Other Files
    [Arguments]    ${rounds}
    FOR    ${i}    IN RANGE    ${rounds}
        FOR    ${path}    IN    @{OTHERS}
            Fetch File Exact    ${MANIFEST}    ${path}
        END
    END

*** Test Cases ***
A Held Static Download Survives Eviction Of Its Pages Byte-Exact
    [Documentation]    5 MB of /file-1m.bin and then other files pipelined to a slow
    ...    client: the file cache (256 KiB) evicts the entries still lent downstream
    ...    while other clients read other files. The held pages must not be reused
    ...    before the slow client's data is acknowledged. (fs holds a lent buffer's
    ...    pages through the IO-Lite hold counts, so this passed before the death
    ...    protocol too: a regression guard.)
    Hold Pipeline    @{FILL}    /file-256k.bin    /odd-100000.bin    /odd-4097.bin
    Sleep    3s
    Others Fetch Other Files    3
    ${exact}=    Held Pipeline Should Be Exact Or Reset    ${MANIFEST}
    Should Be Equal As Integers    ${exact}    8

Held CGI Pages Keep Their Fragments When The CGI Dies And fs Evicts
    [Documentation]    The slow client's pipeline ends with /cgi-bin/page responses
    ...    whose fragments are fs pages the cgi forwarded by reference. The cgi
    ...    crashes; other clients then force eviction. fs must keep the pages the
    ...    dead cgi lent on until its death is settled: the held pages carry the
    ...    fragments byte-exact.
    Expect Fault    ^\\[cgi\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi:
    Hold Pipeline    @{FILL}    /cgi-bin/page    /cgi-bin/page    /cgi-bin/page    /cgi-bin/page
    Sleep    3s
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/crash
    Should Be Equal As Integers    ${status}    502
    Wait For Serial Line    ^\\[cgi\\] ready \\(generation \\d+, restart 1\\)$    timeout=60s
    # About 7 MB read through a 1023-page pool: next-fit allocation reuses
    # every page that is free.
    Others Fetch Other Files    5
    ${exact}=    Held Pipeline Should Be Exact Or Reset    ${MANIFEST}
    Should Be True    ${exact} >= 5
