*** Settings ***
Documentation       A restarted component gets the same deployment values again
...                 (docs/config.md): the system boots with a site disk whose
...                 `/.iolite/config` moves it to 10.0.2.20:8081 with its own `Server:`
...                 header and index names (tests/lib/SiteConfig.py), then netstack,
...                 httpd and fs each really fault (`Inject Fault Into`) and are
...                 restarted: the new netstack and httpd read the page again, the new fs
...                 reads the same disk and publishes the same values, and after each the
...                 site is served byte for byte at the same address and port with the
...                 same header. The image is tests/variants' recovery (fault injection
...                 granted). One boot.
Library             OperatingSystem
Library             Process
Library             QemuSystem    ${RECOVERY_BUILD_DIR}
Library             SiteConfig
Suite Setup         Make The Disk And Boot
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           recovery

*** Variables ***
${RECOVERY_BUILD_DIR}    ${CURDIR}/../../build/variants/recovery
${ROOT}             ${CURDIR}/../..
${PORT}             8080
${SERVER}           shop-httpd/2 (iolite)
${VALUES}           address 10\\.0\\.2\\.20/24, gateway 10\\.0\\.2\\.2, hostname shop-1\\.example, listen_port 8081

*** Test Cases ***
A Restarted Netstack Takes The Same Address
    ${mark}=    Serial Mark
    Inject Fault Into    netstack
    Wait For Serial Line Anywhere    ^\\[netstack\\] site config: ${VALUES}    timeout=60s    since=${mark}
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip 10\\.0\\.2\\.20/24 gw 10\\.0\\.2\\.2$    timeout=60s    since=${mark}
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 8081$    timeout=60s    since=${mark}
    The Site Should Be Served

A Restarted Httpd Takes The Same Port And Names
    ${mark}=    Serial Mark
    Inject Fault Into    httpd
    Wait For Serial Line Anywhere    ^\\[httpd\\] site config: ${VALUES}    timeout=60s    since=${mark}
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 8081$    timeout=60s    since=${mark}
    The Site Should Be Served

A Restarted Fs Publishes The Same Values
    ${mark}=    Serial Mark
    Inject Fault Into    fs
    Wait For Serial Line Anywhere    ^\\[fs\\] /\\.iolite/config: ${VALUES}    timeout=60s    since=${mark}
    Wait For Serial Line Anywhere    ^\\[fs\\] ready \\(restart 1    timeout=60s    since=${mark}
    The Site Should Be Served
    # Then a restarted httpd reads what the new fs published.
    ${mark}=    Serial Mark
    Inject Fault Into    httpd
    Wait For Serial Line Anywhere    ^\\[httpd\\] site config: ${VALUES}    timeout=60s    since=${mark}
    The Site Should Be Served

*** Keywords ***
Make The Disk And Boot
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-restart-${PORT}
    Make Config Site    ${dir}    good
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${dir}.img
    Should Be Equal As Integers    ${r.rc}    0    ${r.stderr}
    Set Suite Variable    ${DIR}    ${dir}
    Start System    --port    ${PORT}:10.0.2.20:8081    --disk    ${dir}.img
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 8081$    timeout=120s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s
    The Site Should Be Served

The Site Should Be Served
    Wait Until Keyword Succeeds    30s    1s    Site Should Be Served Byte Exact    ${DIR}    ${PORT}    ${SERVER}    home.html
