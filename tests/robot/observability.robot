*** Settings ***
Documentation       What an operator reads: the access and error logs on the console
...                 (nginx's combined format plus $request_time; components/httpd/README.md
...                 "Access and error logs"), /metrics in the Prometheus text format
...                 (parsed by prometheus_client's parser), and /healthz, which a load
...                 balancer polls: 200 while every component is up and every death
...                 settled, 503 naming the cgi while it is dead, then 200 again.
...
...                 Lines these tests read (stable):
...                 | [httpd] ADDR - - [TIME] "REQUEST" STATUS BYTES "REFERER" "AGENT" SECONDS |
...                 | [httpd] DATE TIME [error] *CONN: CAUSE (STATUS), client: ADDR, request: "REQUEST" |
...                 | [httpd] N access log lines dropped (rate limit) |
...
...                 It crashes the cgi on purpose (/cgi-bin/crash): the test image
...                 (tests/variants: webtest).
Library             OperatingSystem
Library             QemuSystem    ${WEBTEST_BUILD_DIR}
Library             WebClient    ${PORT}
Library             Observability    127.0.0.1:${PORT}
Suite Setup         Boot The Web Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           webtest    observability

*** Variables ***
${WEBTEST_BUILD_DIR}    ${CURDIR}/../../build/variants/webtest
${PORT}             8080
# QEMU's user networking: every client is its gateway, 10.0.2.2.
${CLIENT}           10.0.2.2

*** Keywords ***
Boot The Web Image
    Start System    --port    ${PORT}:80    --disk    ${WEBTEST_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] cgi attached \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90

Let The Log Budget Refill
    # The log prints 50 lines at once, 50 more a second (LogRate): lines
    # a test looks for must not find it spent by the test before.
    Sleep    1.5s

*** Test Cases ***
Curl Requests Are Logged In The Combined Format
    [Documentation]    Real curl requests: a file with a referer and a hostile user agent
    ...    (quotes, a backslash, non-ASCII bytes), escaped as nginx escapes them; a
    ...    404 with its error line; the bytes logged are the body's.
    Let The Log Budget Refill
    ${agent}=    Set Variable    evil" \\ \u00e9 <x>
    ${status}    ${body}=    Curl    /file-1k.txt    -A    ${agent}    -e    http://example.test/from?a=1
    Should Be Equal As Integers    ${status}    200
    ${len}=    Get Length    ${body}
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .*"GET /file-1k.txt HTTP/1.1" 200    timeout=20s
    Access Line Should Be    ${line}    ${CLIENT}    GET /file-1k.txt HTTP/1.1    200    ${len}
    ...    http://example.test/from?a=1    ${agent}
    ${status}    ${body}=    Curl    /no/such/file.html    -A    curl-obs
    Should Be Equal As Integers    ${status}    404
    ${len}=    Get Length    ${body}
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .*"GET /no/such/file.html HTTP/1.1" 404    timeout=20s
    Access Line Should Be    ${line}    ${CLIENT}    GET /no/such/file.html HTTP/1.1    404    ${len}    -    curl-obs
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .* \\[error\\] .*404    timeout=20s
    Error Line Should Be    ${line}    not found    404    GET /no/such/file.html HTTP/1.1
    # A HEAD sends no body: 0 bytes.
    ${status}    ${body}=    Curl    /index.html    -I    -A    curl-head
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .*"HEAD /index.html HTTP/1.1" 200    timeout=20s
    Access Line Should Be    ${line}    ${CLIENT}    HEAD /index.html HTTP/1.1    200    0    -    curl-head

A Malformed Request And A Cgi Failure Get Error Lines With Their Cause
    [Documentation]    A control byte in the request line (400: malformed request,
    ...    logged escaped) and a crashing CGI (502: CGI failed).
    Expect Fault    ^\\[cgi\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi:
    Let The Log Budget Refill
    ${status}=    Status Of Raw Request    GET /bad\x01path HTTP/1.1\r\nHost: x\r\n\r\n
    Should Be Equal As Integers    ${status}    400
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .*"GET /bad\\\\x01path HTTP/1.1" 400    timeout=20s
    # (The 400 page's length: `any`; the other fields exactly.)
    Access Line Should Be    ${line}    ${CLIENT}    GET /bad\x01path HTTP/1.1    400    any    -    -
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .* \\[error\\] .*\\(400\\)    timeout=20s
    Error Line Should Be    ${line}    malformed request    400    GET /bad\x01path HTTP/1.1
    ${mark}=    Serial Mark
    ${status}    ${body}=    Curl    /cgi-bin/crash
    Should Be Equal As Integers    ${status}    502
    ${line}=    Wait For Serial Line    ^\\[httpd\\] .* \\[error\\] .*\\(502\\)    timeout=30s
    Error Line Should Be    ${line}    CGI failed (fault or invalid output)    502    GET /cgi-bin/crash HTTP/1.1
    # The new cgi's line reaches the console through its own ring: before
    # or after httpd's error line.
    Wait For Serial Line Anywhere    ^\\[cgi\\] ready \\(generation \\d+, restart \\d+\\)$    timeout=60s    since=${mark}

A Flood Of Requests Is Rate-Limited In The Log, Not In The Data Path
    [Documentation]    400 requests as fast as four keep-alive clients go: every one
    ...    answered 200 with the same body; the log prints at most its budget (50 at
    ...    once, 50/s), reports the rest as dropped, and printed + dropped add up to
    ...    400 exactly; the counter of /metrics agrees.
    Let The Log Budget Refill
    ${before}=    Scrape Metrics
    ${since}=    Serial Mark
    ${took}=    Flood    400    flood-agent
    Wait For Serial Line    ^\\[httpd\\] \\d+ access log lines dropped \\(rate limit\\)$    timeout=20s
    # The last report comes a second after the last drop.
    Sleep    2.5s
    ${lines}=    Serial Lines So Far
    ${dropped}=    Flood Lines Should Be Bounded    ${lines}    ${since}    400    flood-agent    ${took}
    ${after}=    Scrape Metrics
    ${key}=    Evaluate    ("iolite_access_log_rate_dropped_total", "httpd")
    Should Be Equal As Numbers    ${after}[${key}]    ${{ $before[$key] + $dropped }}

Metrics Parse And Cover Every Counter Of The Stats Page
    [Documentation]    /metrics parsed by prometheus_client's parser: every family
    ...    iolite_*, with HELP and TYPE, counters ending in _total; the samples are
    ...    exactly the counters of /cgi-bin/stats; a counter moves by what we did.
    ${stats}=    Stats Json
    ${m}=    Scrape Metrics
    Metrics Should Cover Stats    ${m}    ${stats}
    ${key}=    Evaluate    ("iolite_health_checks_total", "httpd")
    FOR    ${i}    IN RANGE    5
        Health Should Be Ok
    END
    ${m2}=    Scrape Metrics
    Should Be Equal As Numbers    ${m2}[${key}]    ${{ $m[$key] + 5 }}
    ${up}=    Evaluate    ("iolite_component_up", "cgi")
    Should Be Equal As Numbers    ${m2}[${up}]    1

Healthz Is Ok, Then 503 Naming The Dead Cgi, Then Ok Again
    [Documentation]    Polled every 10 ms on one keep-alive connection while the cgi
    ...    crashes three times in a row (its restarts back off), so
    ...    the poll sees it down or its death unsettled; httpd answers throughout,
    ...    the cgi being dead.
    Expect Fault    ^\\[cgi\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi:
    Health Should Be Ok
    Start Health Poll
    Sleep    0.5s
    FOR    ${i}    IN RANGE    3
        ${status}    ${h}    ${body}=    Fetch    /cgi-bin/crash
        Should Be Equal As Integers    ${status}    502
        Wait For Serial Line    ^\\[cgi\\] ready \\(generation \\d+, restart \\d+\\)$    timeout=60s
    END
    Wait Until Keyword Succeeds    30s    0.5s    Health Should Be Ok
    Sleep    0.5s
    ${states}=    Stop Health Poll
    ${n}=    Health Poll Should Have Seen    ${states}    cgi
    Log    ${n} distinct 503 answers
