*** Settings ***
Documentation       fs short of buffers because clients hold its pages, on the small-cache
...                 image (tests/variants: deathfs, a 256 KiB file cache) with the host's
...                 Linux TCP as the peer (TAP, as web_tap.robot): its windows let each
...                 zero-copy connection keep up to 512 KiB in flight, and with a cache that
...                 small every client's read of a large file is a miss into new pages of
...                 the 8 MiB file pool, so 48 fast clients pin more than the pool holds.
...                 fs then refuses opens and reads (NoMemory) until the clients' ACKs give
...                 pages back. httpd answered such an open 503; now the request waits for
...                 the pages (503 only after 10 s of refusals), so every response is 200
...                 and byte-exact.
...
...                 Needs root, iproute2 and /dev/net/tun, as web_tap.robot.
Force Tags          deathfs
Library             QemuSystem    ${DEATHFS_BUILD_DIR}
Library             TapNetwork
Library             WebClient    10.0.2.15:80
Suite Setup         Boot The Small Cache Image On A Tap Network
Suite Teardown      Run Keywords    Stop System    AND    Delete Tap Network
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${DEATHFS_BUILD_DIR}    ${CURDIR}/../../build/variants/deathfs

*** Keywords ***
Boot The Small Cache Image On A Tap Network
    ${ns}=    Create Tap Network
    Start System In Namespace    ${ns}    --tap    tap0    --disk    ${DEATHFS_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[fs\\] mounted ext2: .* cache budget 256 KiB    timeout=120s
    Wait For Web Server On Tap    timeout=120
    Check Bodies Against Site    ${DEATHFS_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

*** Test Cases ***
Fast Downloads Beyond The Pool Wait For fs Instead Of Failing
    [Documentation]    48 keep-alive clients fetch 1 MiB and 256 KiB files in runs of 10 s:
    ...    no error and every body byte-exact (Concurrent Clients checks each against
    ...    the site), and no request answered 503 for a busy fs. How much the clients
    ...    pin depends on how fast the host lets them read, so the runs repeat (at most
    ...    4) until fs has refused an open: else the test did not reach its case.
    [Setup]    Enter Tap Network
    ${before}=    Stats Json
    ${opens}=    Set Variable    0
    FOR    ${run}    IN RANGE    4
        ${r}=    Concurrent Clients    48    10    /file-1m.bin /file-256k.bin /file-1m.bin
        ${after}=    Stats Json
        ${opens}=    Evaluate    $after['httpd']['file_opens_deferred'] - $before['httpd']['file_opens_deferred']
        ${reads}=    Evaluate    $after['httpd']['file_reads_deferred'] - $before['httpd']['file_reads_deferred']
        Log    run ${run}: ${r}; so far fs refused ${opens} opens and ${reads} reads for a while
        IF    ${opens} > 0    BREAK
    END
    Should Be Equal As Integers    ${after}[httpd][file_opens_expired]    0
    Should Be True    ${opens} > 0    fs never refused an open: the pool was not short
    [Teardown]    Run Keywords    Leave Tap Network    AND    Attach Serial Log If Test Failed
