*** Settings ***
Documentation       Nobody holds the death protocol hostage (roottask/src/supervisor/mod.rs,
...                 "Nobody holds a death hostage"): the cgi (untrusted, cgi.untrusted)
...                 stops confirming deaths (test hook /cgi-bin/noconfirm), then the ticker,
...                 whose clock page it maps, is made to fault. The supervisor waits
...                 cgi.confirm_death_ms (2000 ms), says so by name and restarts the cgi;
...                 the ticker's death then settles (its record's settled count reaches its
...                 deaths), the new cgi serves byte-exact and static files stay
...                 byte-exact. Before, the death stayed unsettled for ever. The late
...                 confirmation counts once, on the cgi (late_confirms_cgi).
...                 Runs on the recovery image (fault injection and the cgi's test hooks).
Library             OperatingSystem
Library             QemuSystem    ${RECOVERY_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Recovery Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           recovery

*** Variables ***
${RECOVERY_BUILD_DIR}    ${CURDIR}/../../build/variants/recovery
${PORT}                  8086

*** Keywords ***
Boot The Recovery Image
    Start System    --port    ${PORT}:80    --disk    ${RECOVERY_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] cgi attached \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90

Death Of Ticker Is Settled
    [Arguments]    ${before}
    ${s}=    Stats Json
    Should Be Equal As Integers    ${s}[supervisor][deaths_ticker]    ${${before}[supervisor][deaths_ticker] + 1}
    Should Be Equal As Integers    ${s}[supervisor][settled_ticker]    ${s}[supervisor][deaths_ticker]

*** Test Cases ***
A CGI That Never Confirms A Death Is Restarted And The Death Settles
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/noconfirm
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${body}    ${{b"no confirmations"}}
    Wait For Serial Line    ^\\[cgi\\] test hook: confirming no death from now on$
    ${before}=    Stats Json
    ${mark}=    Serial Mark
    Inject Fault Into    ticker
    Wait For Serial Line
    ...    ^\\[supervisor\\] cgi did not confirm the death of ticker within 2000 ms: restarting it$    timeout=30s
    Wait For Serial Line Anywhere    ^\\[supervisor\\] restarted component cgi \\(restart \\d+\\)$    since=${mark}
    Wait For Serial Line    ^\\[httpd\\] cgi restarted \\(generation \\d+\\): \\d+ requests failed with 502$
    # The ticker's death is settled once the cgi's is: nothing stays
    # unsettled.
    Wait Until Keyword Succeeds    20s    1s    Death Of Ticker Is Settled    ${before}
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[supervisor][deaths_cgi]    ${${before}[supervisor][deaths_cgi] + 1}
    Should Be Equal As Integers    ${after}[supervisor][settled_cgi]    ${after}[supervisor][deaths_cgi]
    # Counted once, on the cgi (the late one), not on the ticker.
    Should Be Equal As Integers    ${after}[supervisor][late_confirms_cgi]    ${${before}[supervisor][late_confirms_cgi] + 1}
    Should Be Equal As Integers    ${after}[supervisor][late_confirms_ticker]    ${before}[supervisor][late_confirms_ticker]
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?after\=noconfirm
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${body}    ${{b"QUERY_STRING=after=noconfirm"}}
    ${n}=    Every File Should Be Byte Exact    ${RECOVERY_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    Serial Should Stay Quiet About Faults    1s

