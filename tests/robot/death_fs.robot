*** Settings ***
Documentation       The file cache's pages held downstream (components/fs/README.md,
...                 libs/iolite/README.md "Death"): a slow client holds static
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
...
...                 The cgi also resets its fs session in a loop here (test hook
...                 /cgi-bin/fsreset) while a client downloads: each reset must release
...                 what the live cgi held at once (fs's reset_released), never pile it
...                 up in quarantine, so the small cache keeps serving byte-exact.
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
# What the resetting cgi reads each round, holding every buffer (45 pages,
# within its quota of 64), and what the normal client downloads meanwhile.
${RESET_FILES}      /file-64k.bin,/odd-100000.bin,/file-16k.bin
@{DOWNLOADS}        /file-1m.bin    /file-256k.bin    /index.html

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

fs Pages Are Held By The Cache And httpd Alone
    [Documentation]    fs's pool pages in use are the cache's (its budget at most) and
    ...    those of the small files httpd keeps by reference (which may have left
    ...    the cache), within 2 pages: nothing else, e.g. the resetting cgi, holds any.
    ${s}=    Stats Json
    ${bound}=    Evaluate
    ...    $s['fs']['cache_budget_now'] // 4096 + $s['httpd']['file_refs_bytes'] // 4096 + $s['httpd']['file_refs_kept'] + 2
    Should Be True    ${s}[fs][pool_pages_in_use] <= ${bound}
    ...    fs has ${s}[fs][pool_pages_in_use] pool pages in use, more than the cache and httpd's kept files (${bound}): fs ${s}[fs]
    RETURN    ${s}[fs][pool_pages_in_use]

*** Test Cases ***
A CGI Resetting Its fs Session In A Loop Pins No File-Cache Pages
    [Documentation]    The cgi reads three files (45 pages, kept), resets its fs
    ...    session, and again: 8 requests of 25 rounds, while a keep-alive client
    ...    downloads 1 MiB and 256 KiB files through the 256 KiB cache. Each reset
    ...    of the live cgi releases its holds at once (reset_released grows by 200,
    ...    reset_waits not at all): quarantined instead, 200 resets would pin 9000
    ...    pages of the 2048-page pool. The pool pages in use stay below what the
    ...    cache, httpd's quota and one round of the cgi can hold, and go back to
    ...    the baseline after: the cache's and the files httpd keeps, nothing of
    ...    the cgi's (one round left behind would be 45 pages more). Every body the
    ...    client gets and every file the cgi reads is byte-exact (the manifest's
    ...    SHA-256).
    # The baseline: the cache warm with what the test reads.
    FOR    ${path}    IN    @{DOWNLOADS}    /file-64k.bin    /odd-100000.bin    /file-16k.bin
        Fetch File Exact    ${MANIFEST}    ${path}
    END
    ${base}=    fs Pages Are Held By The Cache And httpd Alone
    ${before}=    Stats Json
    ${r}=    Fs Resets Under Static Load    ${MANIFEST}    8    25    ${RESET_FILES}    @{DOWNLOADS}
    ${after}=    Stats Json
    Should Be Equal As Integers    ${r}[released]    200
    Should Be Equal As Integers    ${r}[waited]    0
    Should Be Equal As Integers    ${after}[fs][reset_released]    ${${before}[fs][reset_released] + 200}
    Should Be Equal As Integers    ${after}[fs][reset_waits]    ${before}[fs][reset_waits]
    Should Be True    ${r}[static] > 0
    # The cache (64 pages), httpd's quota (640) and one round of the cgi (45)
    # at most: far below the pool (2048).
    Should Be True    ${r}[max_pages] <= 64 + 640 + 45    ${r}
    ${end}=    Wait Until Keyword Succeeds    10s    1s    fs Pages Are Held By The Cache And httpd Alone
    Log    fs pool pages in use: ${base} before, at most ${r}[max_pages] during, ${end} after
    # The cgi serves on: its page's fragments come from fs afresh.
    Fetch File Exact    ${MANIFEST}    /file-64k.bin
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/page
    Should Be Equal As Integers    ${status}    200
    Serial Should Stay Quiet About Faults    1s

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
