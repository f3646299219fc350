*** Settings ***
Documentation       fs serves each client from its own open-file table and quota of held
...                 buffers (fs.client_files, fs.client_quota in camkes/iolite.camkes): a CGI
...                 that opens files in a loop and keeps every buffer it reads gets errors,
...                 and httpd keeps serving the static files byte for byte. The hog is a test
...                 hook (/cgi-bin/fshog), so this runs on a test image: the whole system with
...                 `cgi.test_hooks = 1` (tests/variants: webtest).
...
...                 fs's error codes on the wire (fs_api::ErrorCode): TooManyOpen = 12,
...                 ChannelBusy = 13 (the client holds its whole quota).
Library             OperatingSystem
Library             QemuSystem    ${WEBTEST_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Test Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           webtest

*** Variables ***
${WEBTEST_BUILD_DIR}       ${CURDIR}/../../build/variants/webtest
${PORT}                     8083

*** Keywords ***
Boot The Test Image
    Start System    --port    ${PORT}:80    --disk    ${WEBTEST_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] cgi attached \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90

Hog Should Report
    [Arguments]    ${path}
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/fshog?path\=${path}
    Should Be Equal As Integers    ${status}    200
    ${body}=    Evaluate    $body.decode("ascii")
    Log    ${body}
    ${m}=    Evaluate    dict(kv.split("=") for kv in $body.split())
    RETURN    ${m}

*** Test Cases ***
A CGI That Opens And Hoards Files Gets Errors, Static Files Stay Byte Exact
    # Static files first: the cache is warm and every byte is checked.
    ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    # The hog: opens these in turn until fs refuses (its table: 16 files),
    # then reads and keeps every buffer until fs refuses (its quota: 64
    # distinct buffers; /file-1m.bin alone is 64 chunks of the cache).
    ${m}=    Hog Should Report    /file-1m.bin,/file-256k.bin,/odd-100000.bin
    Should Be Equal As Integers    ${m}[opened]    16
    Should Be Equal As Integers    ${m}[open_error]    -12
    Should Be Equal As Integers    ${m}[read_error]    -13
    Should Be True    0 < ${m}[held_buffers] <= 64    the cgi's quota (fs.client_quota)
    Should Be True    1048576 <= ${m}[held_bytes] < 2 * 1048576    it read /file-1m.bin, and then hardly anything more
    # Again: its table is still full, it gets nothing more.
    ${m}=    Hog Should Report    /index.html
    Should Be Equal As Integers    ${m}[opened]    0
    Should Be Equal As Integers    ${m}[open_error]    -12
    # httpd is unaffected: every file, byte for byte, twice.
    FOR    ${round}    IN RANGE    2
        ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
        Should Be True    ${n} >= 10
    END
    ${status}    ${h}    ${body}=    Fetch    /file-1m.bin
    Should Be Equal As Integers    ${status}    200
