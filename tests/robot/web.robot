*** Settings ***
Documentation       The whole system (camkes/iolite.camkes) serving the demo site:
...                 QEMU's e1000 -> netdrv -> netstack -> httpd, files from fs's IO-Lite
...                 cache by reference, CGI in its own restartable component. Booted with
...                 `simulate --port 8080:80 --disk images/site.img`, so the site is at
...                 http://127.0.0.1:8080/ (QEMU forwards it to the guest's port 80).
...                 The image is tests/variants' webtest: the default image plus the cgi's
...                 test hooks (cgi.test_hooks = 1: /cgi-bin/crash, spin, slow, restart,
...                 blob), which the default image does not have (tests/robot/iso.robot).
...                 /cgi-bin/stream (output over time, streamed to the client) is a program
...                 of the default image.
...
...                 Serial lines these tests wait for (stable):
...                 | [roottask] system started: 8 of 8 components running |
...                 | [pci_config] ready: 2 grants (1=00:05.0 2=00:03.0) |
...                 | [ticker] PIT at 20 Hz (divisor 59659), boot time T (...) |
...                 | [fs] ready |
...                 | [httpd] listening on port 80 |
...                 | [cgi] ready (generation G, restart R) |
...                 | [httpd] cgi attached (generation 1) |
...                 | [netstack] ip A/P gw G |
...                 | [cgi] crash requested (then the panic and the supervisor's FAULT and restart) |
...                 | [httpd] cgi restarted (generation G): N requests failed with 502 |
...                 | [cgi] spinning forever |
...                 | [httpd] cgi timed out: asking the supervisor to restart it |
...                 | [supervisor] restarted component cgi at the request of httpd (restart R) |
...
...                 Chromium (Debian's `chromium`) renders the index page headless; the
...                 screenshot is kept as web-index.png in the output folder. The setup
...                 installs chromium and wrk with apt when they are missing.
Library             OperatingSystem
Library             Process
Library             Collections
Library             QemuSystem    ${WEBTEST_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Web Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           webtest

*** Variables ***
# The webtest image (tests/variants); tests/run-all passes its folder.
# The build puts the site image and its manifest in images/.
${WEBTEST_BUILD_DIR}    ${CURDIR}/../../build/variants/webtest
${PORT}                 8080
${CORPUS}               ${CURDIR}/../http-corpus
${CHROMIUM_FLAGS}       --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync

*** Keywords ***
Boot The Web Image
    Start System    --port    ${PORT}:80    --disk    ${WEBTEST_BUILD_DIR}/images/site.img
    # Every keep-alive, pipelined and load response is checked byte for byte.
    Check Bodies Against Site    ${WEBTEST_BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site

Status Should Be
    [Arguments]    ${path}    ${want}    ${method}=GET    &{headers}
    ${status}    ${h}    ${body}=    Fetch    ${path}    method=${method}    headers=${headers}
    Should Be Equal As Integers    ${status}    ${want}    ${method} ${path}
    RETURN    ${h}    ${body}

Raw Request Should Give
    [Arguments]    ${raw}    ${want}
    ${status}=    Status Of Raw Request    ${raw}
    Should Be Equal As Strings    ${status}    ${want}

Install If Missing
    [Arguments]    ${command}    ${package}
    ${rc}=    Run And Return Rc    command -v ${command}
    IF    ${rc} != 0
        ${r}=    Run Process    apt-get    install    -y    ${package}    timeout=600s
        Log    ${r.stdout}
    END

*** Test Cases ***
All Components Start And The Site Answers
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=90s
    Wait For Serial Line    ^\\[pci_config\\] ready: 2 grants \\(1=00:05\\.0 2=00:03\\.0\\)$
    Wait For Serial Line    ^\\[fs\\] ready$    timeout=60s
    # httpd listens and attaches the cgi in whichever order the cgi comes up.
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[httpd\\] listening on port 80$
    Wait Until Keyword Succeeds    60s    0.5s    Serial Line Seen    ^\\[httpd\\] cgi attached \\(generation 1\\)$
    Wait For Web Server    timeout=90

pci_config Refuses Driver Writes Beyond The Command Bits It Needs
    # netdrv's test hook (netdrv.test_hooks = 1) writes BAR0, the interrupt
    # line and the command register's SERR# bit, each with its current
    # value (harmless if let through); pci_config must refuse and log each.
    # netdrv's own probe (memory decoding, bus mastering) went through: the
    # site answers.
    Serial Line Seen    ^\\[pci_config\\] warning: refused write of BAR0 \\(0x10\\) by client 2 \\(00:03\\.0\\): drivers write only the command register$
    Serial Line Seen    ^\\[netdrv\\] test hook: writing BAR0 was refused$
    Serial Line Seen    ^\\[pci_config\\] warning: refused write of interrupt line/pin \\(0x3c\\) by client 2 \\(00:03\\.0\\): drivers write only the command register$
    Serial Line Seen    ^\\[netdrv\\] test hook: writing the interrupt line was refused$
    Serial Line Seen    ^\\[pci_config\\] warning: refused write of command/status \\(0x4\\) by client 2 \\(00:03\\.0\\): command bits 0x0100 are not a driver's to change$
    Serial Line Seen    ^\\[netdrv\\] test hook: writing SERR# enable was refused$
    ${accepted}=    Run Keyword And Return Status    Serial Line Seen    ^\\[netdrv\\] error: test hook: writing .* was accepted
    Should Not Be True    ${accepted}

The Test Image Has The Test Hooks Built In
    # The counterpart of iso.robot's check that the default image has none:
    # text each hook's code carries (crash, spin, slow, restart; blob's
    # `application/octet-stream` no longer tells: /cgi-bin/tee has it too).
    ${elf}=    Get Binary File    ${WEBTEST_BUILD_DIR}/system/elves/cgi.elf
    ${found}=    Evaluate    list(filter($elf.__contains__, (b"crash requested", b"crashing on purpose", b"spinning forever", b"slept ", b"not restarted: ")))
    Length Should Be    ${found}    5

Every Demo File Is Byte Exact
    ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10

Index Page Is Served As The Directory Index
    ${h}    ${body}=    Status Should Be    /    200
    ${file}=    Get Binary File    ${CURDIR}/../../site/index.html
    Should Be Equal    ${body}    ${file}
    Should Start With    ${h}[content-type]    text/html

HEAD, Conditional And Range Requests
    ${h}    ${body}=    Status Should Be    /file-64k.bin    200    HEAD
    Should Be Equal As Strings    ${h}[content-length]    65536
    Length Should Be    ${body}    0
    ${etag}=    Set Variable    ${h}[etag]
    Status Should Be    /file-64k.bin    304    If-None-Match=${etag}
    Status Should Be    /file-64k.bin    304    If-Modified-Since=${h}[last-modified]
    ${h}    ${body}=    Status Should Be    /file-64k.bin    206    Range=bytes=1000-1999
    Length Should Be    ${body}    1000
    Should Be Equal As Strings    ${h}[content-range]    bytes 1000-1999/65536
    Status Should Be    /file-64k.bin    416    Range=bytes=70000-

Error Statuses
    Status Should Be    /no/such/file    404
    Status Should Be    /sub    301
    Raw Request Should Give    GET /index.html HTTP/1.1\\r\\nHost: t\\r\\nBad Header\\r\\n\\r\\n    400
    Raw Request Should Give    BREW /index.html HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n    501
    ${long}=    Evaluate    "/" + "a" * 9000
    Raw Request Should Give    GET ${long} HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n    414
    ${big}=    Evaluate    "x" * 9000
    Raw Request Should Give    GET / HTTP/1.1\\r\\nHost: t\\r\\nX-Big: ${big}\\r\\n\\r\\n    431
    Raw Request Should Give    GET / HTTP/2.0\\r\\nHost: t\\r\\n\\r\\n    505

The CGI Maps No Pool With Other Clients' Requests
    # From the compiled spec: the cgi's mappings (section "component cgi" of
    # system.txt) include no pool that holds raw network data or httpd's
    # buffers, only the pool of requests httpd hands it and netstack's
    # hand-off pool (request bodies for the cgi, nothing else).
    ${spec}=    Get File    ${BUILD_DIR}/system/system.txt
    ${maps}=    Evaluate    [l.split(" -> ")[1].split()[1] for l in $spec.split("\\ncomponent cgi ")[1].split("\\ncomponent ")[0].splitlines() if l.strip().startswith("map ")]
    Log    ${maps}
    FOR    ${pool}    IN    sock_pool    app_pool    rx_pool    hdr_pool
        List Should Not Contain Value    ${maps}    ${pool}
    END
    List Should Contain Value    ${maps}    cgi_req_pool
    List Should Contain Value    ${maps}    body_pool
    # A short POST body that comes in the same segment as its head is in
    # the shared pool: it reaches the cgi as a counted copy. One that comes
    # in a segment of its own (how the peer cut the stream is its choice:
    # QEMU's user networking sometimes splits it) is in netstack's hand-off
    # pool and goes by reference. Either way it is echoed intact and its
    # bytes are accounted for.
    ${j0}=    Stats Json
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo    method=POST    body=only-mine
    Should Be Equal As Integers    ${status}    200
    Should End With    ${body}    ${{b"only-mine"}}
    ${j}=    Stats Json
    ${copied}=    Evaluate    ${j}[httpd][cgi_body_bytes_copied] - ${j0}[httpd][cgi_body_bytes_copied]
    ${by_ref}=    Evaluate    ${j}[httpd][cgi_body_bytes_by_ref] - ${j0}[httpd][cgi_body_bytes_by_ref]
    Log    body to the cgi: ${copied} bytes copied, ${by_ref} by reference
    Should Be True    ${copied} + ${by_ref} >= 9
    # Honest traffic: no grant was ever refused.
    Should Be Equal As Integers    ${j}[httpd][rejected_descriptors]    0
    Should Be Equal As Integers    ${j}[netstack][tcp_rejected_descriptors]    0

100 Requests On One Keep-Alive Connection
    ${n}=    Keep Alive Requests    100
    Should Be Equal As Integers    ${n}    100

Pipelined Requests Are Answered In Order
    ${s}=    Pipelined Requests    /index.html    HEAD /style.css    /cgi-bin/echo    /file-1k.txt    /sub/note.txt
    Should Be Equal    ${s}    ${{[200, 200, 200, 200, 200]}}

CGI Echo With GET And POST
    ${h}    ${body}=    Status Should Be    /cgi-bin/echo?x\=1&y\=two    200
    ${body}=    Evaluate    $body.decode("utf-8", "replace")
    Should Contain    ${body}    method: GET
    Should Contain    ${body}    QUERY_STRING=x=1&y=two
    # QEMU's user networking (slirp) makes the host's connections come from
    # the guest's gateway, 10.0.2.2 (QEMU's default, and the assembly's
    # netstack.gateway). Not read from the console: lines of components
    # printing at once can interleave there.
    Should Match Regexp    ${body}    (?m)^REMOTE_ADDR=10\\.0\\.2\\.2$
    Should Match Regexp    ${body}    (?m)^REMOTE_PORT=[1-9][0-9]*$
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo    method=POST    body=hello=iolite&n=42
    ...    headers=${{{"Content-Type": "application/x-www-form-urlencoded"}}}
    Should Be Equal As Integers    ${status}    200
    ${body}=    Evaluate    $body.decode("utf-8", "replace")
    Should Contain    ${body}    method: POST
    Should Contain    ${body}    CONTENT_LENGTH=17
    Should End With    ${body}    hello=iolite&n=42
    ${h}    ${body}=    Status Should Be    /cgi-bin/page    200
    Should Contain    ${body}    ${{b"</html>"}}

A Streamed CGI Answer Arrives While The Program Still Runs
    [Documentation]    /cgi-bin/stream makes 10 MiB of text in 20 parts 200 ms apart, so the
    ...    program runs for 3.8 s. Its output used to reach the client only once it was
    ...    complete; now each part goes out as it is made (chunked, by reference): the
    ...    first body byte comes within a second, half of the body only after the program's
    ...    schedule put it there, and every byte is checked.
    ${before}=    Stats Json
    ${r}=    Fetch Streamed    /cgi-bin/stream?size\=10485760&parts\=20&delay_ms\=200
    Should Be Equal As Integers    ${r}[status]    200
    Should Be Equal    ${r}[headers][transfer-encoding]    chunked
    Dictionary Should Not Contain Key    ${r}[headers]    content-length
    Should Be True    ${r}[complete]    the last chunk came
    Should Be Equal    ${r}[trailing]    ${{b""}}
    Body Should Be Stream Text    ${r}[body]    10485760
    Length Should Be    ${r}[body]    10485760
    ${half}=    Evaluate    next(t for t, n in $r['arrivals'] if n >= 5242880)
    Log    first byte after ${r}[first_byte_s] s, first body byte after ${r}[first_body_s] s, half after ${half} s, all after ${r}[total_s] s (${{len($r['chunks'])}} chunks)
    Should Be True    ${r}[total_s] >= 3.7    the program's 19 delays of 200 ms
    Should Be True    ${r}[first_body_s] < 1.0    the first part comes at once, not after the program
    Should Be True    ${r}[first_body_s] * 4 < ${r}[total_s]
    Should Be True    ${half} >= 1.5    the body arrives as it is made (part 10 is due at 2 s)
    ${j}=    Stats Json
    Should Be Equal As Integers    ${j}[httpd][cgi_streams]    ${${before}[httpd][cgi_streams] + 1}
    Should Be True    ${j}[httpd][cgi_stream_parts] - ${before}[httpd][cgi_stream_parts] >= 300
    Should Be Equal As Integers    ${j}[httpd][cgi_streams_aborted]    ${before}[httpd][cgi_streams_aborted]
    # By reference end to end: the cgi makes the text in its pool, httpd
    # adds only the chunks' size lines.
    Should Be Equal As Integers    ${j}[httpd][cgi_bytes_copied]    0
    Should Be Equal As Integers    ${j}[httpd][bytes_copied]    ${before}[httpd][bytes_copied]
    Should Be Equal As Integers    ${j}[cgi][bytes_copied]    0
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_copied]    0

Streamed CGI Framing: Content-Length, HTTP/1.0 And HEAD
    # The program announces its length: httpd frames by it, no chunks.
    ${r}=    Fetch Streamed    /cgi-bin/stream?size\=100000&parts\=4&delay_ms\=100&length\=1&seed\=3
    Should Be Equal As Strings    ${r}[headers][content-length]    100000
    Dictionary Should Not Contain Key    ${r}[headers]    transfer-encoding
    Should Be True    ${r}[complete] and not ${r}[closed]
    Body Should Be Stream Text    ${r}[body]    100000    seed=3
    Length Should Be    ${r}[body]    100000
    # HTTP/1.0 has no chunks: the body ends with the connection.
    ${r}=    Fetch Streamed    /cgi-bin/stream?size\=100000&parts\=4&delay_ms\=100    version=1.0
    Dictionary Should Not Contain Key    ${r}[headers]    transfer-encoding
    Dictionary Should Not Contain Key    ${r}[headers]    content-length
    Should Be Equal    ${r}[headers][connection]    close
    Should Be True    ${r}[closed]
    Body Should Be Stream Text    ${r}[body]    100000
    Length Should Be    ${r}[body]    100000
    # HEAD: the header a GET gets, no body, and the program is stopped
    # (a 10 s program answers at once).
    ${r}=    Fetch Streamed    /cgi-bin/stream?size\=100000&parts\=10&delay_ms\=1000    method=HEAD
    Should Be Equal As Integers    ${r}[status]    200
    Should Be Equal    ${r}[headers][transfer-encoding]    chunked
    Should Be Equal    ${r}[trailing]    ${{b""}}
    Should Be True    ${r}[total_s] < 2

Stats Parse And Static Content Is Never Copied
    FOR    ${path}    IN    /index.html    /file-64k.bin    /file-1m.bin    /style.css    /cgi-bin/page
        Status Should Be    ${path}    200
    END
    # A response of one segment, twice: its checksum is the stack's
    # (cached), where the NIC computes those of segments it cuts (TSO).
    FOR    ${i}    IN RANGE    2
        Status Should Be    /file-1k.txt    200
    END
    # A POST body goes to the CGI and back by reference.
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo    method=POST    body=${{"x" * 3000}}
    Should Be Equal As Integers    ${status}    200
    Should End With    ${{$body.decode()}}    ${{"x" * 3000}}
    ${j}=    Stats Json
    Should Be Equal As Integers    ${j}[schema]    1
    FOR    ${c}    IN    httpd    netstack    netdrv    fs    cgi
        Dictionary Should Contain Key    ${j}    ${c}
    END
    Log    ${j}
    Should Be Equal As Integers    ${j}[httpd][copy_mode]    0    the image is built in iolite mode
    Should Be Equal As Integers    ${j}[httpd][static_bytes_copied]    0
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_copied]    0
    Should Be Equal As Integers    ${j}[netdrv][drv_bytes_copied]    0
    Should Be Equal As Integers    ${j}[fs][bytes_copied]    0
    # The CGI body path: output and POST bodies by reference end to end.
    Should Be Equal As Integers    ${j}[httpd][cgi_bytes_copied]    0
    Should Be Equal As Integers    ${j}[cgi][bytes_copied]    0
    Should Be Equal As Integers    ${j}[netstack][tcp_tx_coalesced_bytes]    0
    Should Be True    ${j}[httpd][body_bytes_by_ref] >= 1048576
    Should Be True    ${j}[httpd][header_cache_hits] >= 1
    Should Be True    ${j}[netstack][checksum_cache_hits] >= 1
    # TCP segmentation offload (netdrv.tso = 1, the default): the large
    # files went in frames of up to 64 KiB that the e1000 cut into many
    # segments, still by reference (no copy above).
    Should Be Equal As Integers    ${j}[netstack][tcp_tso]    1
    Should Be True    ${j}[netstack][tcp_tx_tso_frames] >= ${j}[netdrv][drv_tx_tso_frames] > 0
    Should Be True    ${j}[netdrv][drv_tx_tso_segments] > 4 * ${j}[netdrv][drv_tx_tso_frames]

A CGI Crash Gives 502 And The Next CGI Request Succeeds
    Expect Fault    ^\\[cgi\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi:
    Status Should Be    /cgi-bin/crash    502
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi \\(restart 1\\)$
    # cgi's and httpd's lines about the new incarnation come in either
    # order (each component's lines reach the console through its own ring).
    Wait For Serial Line Anywhere    ^\\[cgi\\] ready \\(generation 2, restart 1\\)$
    Wait For Serial Line Anywhere    ^\\[httpd\\] cgi restarted \\(generation 2\\): \\d+ requests failed with 502$
    ${h}    ${body}=    Status Should Be    /cgi-bin/echo?after\=crash    200
    ${body}=    Evaluate    $body.decode("utf-8", "replace")
    Should Contain    ${body}    QUERY_STRING=after=crash
    Status Should Be    /index.html    200
    ${j}=    Stats Json
    Should Be Equal As Integers    ${j}[httpd][cgi_restarts]    1

The Supervisor Refuses Restarts The Assembly Does Not Grant
    # The assembly lets httpd restart cgi, and nobody anything else: the
    # cgi (its /cgi-bin/restart asks the supervisor) may restart nothing.
    ${h}    ${body}=    Status Should Be    /cgi-bin/restart?component\=httpd    200
    Should Be Equal    ${{$body.decode()}}    not restarted: refused: the assembly does not grant it (may_restart)\n
    Wait For Serial Line    ^\\[supervisor\\] error: cgi may not restart component httpd \\(not granted by the assembly's cgi\\.may_restart\\): refused$
    ${h}    ${body}=    Status Should Be    /cgi-bin/restart?component\=nosuch    200
    Should Be Equal    ${{$body.decode()}}    not restarted: no such component\n
    Wait For Serial Line    ^\\[supervisor\\] error: cgi asked to restart component nosuch, which does not exist: refused$
    # Nothing was restarted: httpd serves on with the same cgi.
    Status Should Be    /index.html    200
    Serial Should Stay Quiet About Faults    1s

Connections The Server Closes Are Not Refused For TIME-WAIT
    [Documentation]    With `Connection: close` httpd closes first, so netstack's side
    ...    of each connection waits in TIME-WAIT, holding a socket and its ring.
    ...    Without netstack's cap (time_wait_cap) about 320 such connections in
    ...    a few seconds took every ring of its socket budget and each later
    ...    client was reset. 2000 in a row: all answered, byte-exact.
    ${before}=    Stats Json
    ${r}=    Connections Closed By The Server    2000    /file-1k.txt
    Log    ${r}
    ${j}=    Stats Json
    ${recycled}=    Evaluate    $j['netstack']['tcp_time_wait_recycled'] - $before['netstack']['tcp_time_wait_recycled']
    Should Be True    ${recycled} > 0    no connection was taken out of TIME-WAIT: the cap was never reached
    Should Be True    ${j}[netstack][tcp_socket_bytes] <= 10485760

Dynamic Pages Are Answered While Eight Clients Download 1 MiB Files
    # The cgi runs below netdrv, netstack and httpd, so under static load
    # it got no CPU: the first CGI request timed out (504), httpd had the
    # healthy cgi restarted, its new incarnation starved before it could
    # attach and every later CGI request got 503. httpd now lends it its
    # priority in short windows while it is starved.
    ${before}=    Stats Json
    ${r}=    CGI Requests Under Static Load    8    /file-1m.bin    20
    Log    ${r}
    ${j}=    Stats Json
    Should Be Equal As Integers    ${j}[httpd][cgi_timeouts]    ${before}[httpd][cgi_timeouts]
    Should Be Equal As Integers    ${j}[httpd][cgi_restart_requests]    ${before}[httpd][cgi_restart_requests]
    Should Be Equal As Integers    ${j}[httpd][cgi_restarts]    ${before}[httpd][cgi_restarts]
    Log    priority lent to the cgi ${${j}[httpd][cgi_priority_lends] - ${before}[httpd][cgi_priority_lends]} times
    Serial Should Stay Quiet About Faults    1s

A Spinning CGI Gives 504, httpd Has It Restarted And Serves On
    ${before}=    Stats Json
    Start Fetch    /cgi-bin/spin
    Wait For Serial Line    ^\\[cgi\\] spinning forever$
    # The cgi runs below httpd, netstack and netdrv: static files are
    # served while it spins.
    FOR    ${i}    IN RANGE    3
        Status Should Be    /index.html    200
    END
    # httpd's cgi_timeout_ms is 5 s.
    ${status}    ${h}    ${body}=    Finish Fetch    timeout=30
    Should Be Equal As Integers    ${status}    504
    Wait For Serial Line    ^\\[httpd\\] cgi timed out: asking the supervisor to restart it$
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi at the request of httpd \\(restart 2\\)$
    # In either order (see the crash case above).
    Wait For Serial Line Anywhere    ^\\[cgi\\] ready \\(generation 3, restart 2\\)$
    # The timed-out request was answered (504): nothing else was pending.
    Wait For Serial Line Anywhere    ^\\[httpd\\] cgi restarted \\(generation 3\\): 0 requests failed with 502$
    Status Should Be    /index.html    200
    ${h}    ${body}=    Status Should Be    /cgi-bin/echo?after\=spin    200
    ${body}=    Evaluate    $body.decode("utf-8", "replace")
    Should Contain    ${body}    QUERY_STRING=after=spin
    ${j}=    Stats Json
    Should Be Equal As Integers    ${j}[httpd][cgi_restart_requests]    ${${before}[httpd][cgi_restart_requests] + 1}
    Should Be Equal As Integers    ${j}[httpd][cgi_restart_failures]    0
    Should Be Equal As Integers    ${j}[httpd][cgi_timeouts]    ${${before}[httpd][cgi_timeouts] + 1}

A CGI Crash In The Middle Of A Stream Cuts The Response Off Cleanly
    [Documentation]    A stream's program dies (the cgi crashes on another request) after its
    ...    first parts went out: the client gets what was sent, a correct prefix, then the
    ...    close without the last chunk (an incomplete response, not a short complete one),
    ...    and no byte of the dead cgi's parts that had not gone out (its pages are
    ...    quarantined until httpd and netstack confirm, libs/iolite/README.md
    ...    "Death"). The restarted cgi streams again.
    Expect Fault    ^\\[cgi\\] PANIC
    Expect Fault    ^\\[supervisor\\] FAULT in component cgi:
    ${raw}=    Fetch Streamed    /cgi-bin/stream?size\=400000&parts\=8&delay_ms\=1500&seed\=7    stop_after=50000
    Status Should Be    /cgi-bin/crash    502
    ${r}=    Finish Held Stream
    Log    ${{len($r['body'])}} body bytes in ${r}[chunks], closed ${r}[closed]
    Should Be Equal As Integers    ${r}[status]    200
    Should Not Be True    ${r}[complete]    no last chunk after the crash
    Should Be True    ${r}[closed]
    Should Be True    50000 <= len($r['body']) < 400000
    Body Should Be Stream Text    ${r}[body]    400000    seed=7
    Wait For Serial Line    ^\\[supervisor\\] restarted component cgi \\(restart 3\\)$
    Wait For Serial Line    ^\\[httpd\\] cgi restarted \\(generation 4\\): \\d+ requests failed with 502$
    ${r}=    Fetch Streamed    /cgi-bin/stream?size\=200000&parts\=2&delay_ms\=100
    Should Be True    ${r}[complete]
    Body Should Be Stream Text    ${r}[body]    200000
    Length Should Be    ${r}[body]    200000
    ${j}=    Stats Json
    Should Be True    ${j}[httpd][cgi_streams_aborted] >= 1

32 Concurrent Clients For 20 Seconds Without Errors
    ${r}=    Concurrent Clients    32    20
    Log    ${r}
    Should Be Equal As Integers    ${r}[errors]    0

In Iolite Mode The Cache Keeps Its Memory Under Load
    # fs's cache gets fs.memory_budget (4 MiB) less the copies of I/O data
    # others hold (components/fs/src/budget.rs). Here file pages go out by
    # reference, so nothing holds a copy: netstack's send rings are empty
    # (charged 0) and httpd's pool holds only headers, so the budget never
    # fell below today's fixed 3 MiB since boot (posix mode's does:
    # web_copymodes.robot). Every body is checked byte for byte.
    ${r}=    Concurrent Clients    8    8    /file-1m.bin /file-64k.bin /index.html
    ${stats}=    Stats Json
    Log    ${stats}
    ${fs}=    Get From Dictionary    ${stats}    fs
    Cache Budget Should Follow The Model    ${stats}
    Should Be True    ${fs}[cache_budget_low] >= 3 * 1048576    lowest budget ${fs}[cache_budget_low]
    Should Be Equal As Integers    ${fs}[charged_netstack_now]    0
    Should Be Equal As Integers    ${stats}[netstack][tcp_send_ring_bytes_in_use]    0
    Should Be True    ${fs}[budget_updates] > 0

The Index Page Renders In Headless Chromium
    Install If Missing    chromium    chromium
    ${profile}=    Set Variable    ${OUTPUT DIR}/chromium-profile
    Remove Directory    ${profile}    recursive=True
    ${png}=    Set Variable    ${OUTPUT DIR}/web-index.png
    ${r}=    Run Process    chromium    @{{"${CHROMIUM_FLAGS}".split()}}    --user-data-dir\=${profile}
    ...    --window-size\=1280,900    --screenshot\=${png}    http://127.0.0.1:${PORT}/    timeout=120s
    Log    ${r.stderr}
    File Should Exist    ${png}
    ${size}=    Get File Size    ${png}
    Should Be True    ${size} > 20000    a rendered page, not a blank one (${size} bytes)
    ${r}=    Run Process    chromium    @{{"${CHROMIUM_FLAGS}".split()}}    --user-data-dir\=${profile}
    ...    --dump-dom    http://127.0.0.1:${PORT}/    timeout=120s
    Should Contain    ${r.stdout}    <title>Iolite OS</title>
    Log    <img src="web-index.png" width="640">    html=True

The Hostile Corpus Gets The Expected Outcomes
    ${n}=    Run Http Corpus    ${CORPUS}
    Should Be Equal As Integers    ${n}    209
    Status Should Be    /index.html    200

No Fault Besides The Provoked One
    Serial Should Stay Quiet About Faults    2s
    System Should Be Running

Console Lines Of All Components Come Out Whole
    [Documentation]    By now the boot, the crashes, the timeouts and the restarts above
    ...    have had every component and the supervisor print, several at once. The
    ...    log component prints every line whole with its writer's name: no line
    ...    holds a second prefix, and the lines the tests wait for appear exactly once.
    Serial Line Seen    ^\\[log\\] printing the lines of 7 components$
    ${n}=    Console Lines Should Be Whole    roottask    supervisor    log    pci_config    ticker
    ...    netdrv    netstack    fs    httpd    cgi
    Should Be True    ${n} >= 25
    ${lines}=    Serial Lines So Far
    FOR    ${want}    IN    [netstack] ip 10.0.2.15/24 gw 10.0.2.2    [httpd] listening on port 80
    ...    [fs] ready    [roottask] system started: 8 of 8 components running; supervising faults
        ${count}=    Count Values In List    ${lines}    ${want}
        Should Be Equal As Integers    ${count}    1    ${want}
    END

