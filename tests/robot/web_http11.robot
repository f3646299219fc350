*** Settings ***
Documentation       HTTP/1.1 request features end to end on the default image (the whole
...                 system, iolite mode, no test hooks), every check on the bytes: chunked
...                 request bodies (curl's and hand-framed ones with extensions, trailers and
...                 odd sizes) echoed byte for byte by /cgi-bin/echo; preconditions (RFC 9110
...                 §13: If-Match, If-Unmodified-Since, If-None-Match, If-Range) with the file's
...                 bytes checked against build/images/site.manifest and a 304's framing checked
...                 by a request pipelined behind it; Expect: 100-continue with curl (which
...                 must get the 100 before it sends the body) and by hand, and 417; a
...                 multi-range request parsed as multipart/byteranges, each part compared with
...                 the file, and the stats showing no payload byte copied for it. And REDbot
...                 (the `redbot` package of python-requirements.txt, HTTP lint) against a file,
...                 a directory, a CGI page and a 304: no finding of level BAD other than the
...                 allow-list of components/httpd/README.md ("REDbot").
Library             OperatingSystem
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Library             Http11    ${PORT}
Library             RedBot    ${CURDIR}/../../components/httpd/README.md
Suite Setup         Boot The Web Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8089

*** Keywords ***
Boot The Web Image
    Start System    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] listening on port 80$    timeout=90s
    Wait For Web Server    timeout=90
    Load Site Manifest    ${BUILD_DIR}/images/site.manifest

Status Should Be
    [Arguments]    ${got}    ${want}    ${what}=
    Should Be Equal As Integers    ${got}    ${want}    ${what}

Http Date
    [Documentation]    The IMF-fixdate of `http_date` moved by `seconds`.
    [Arguments]    ${http_date}    ${seconds}
    ${d}=    Evaluate    email.utils.format_datetime(email.utils.parsedate_to_datetime($http_date) + datetime.timedelta(seconds=int($seconds)), usegmt=True)    modules=email.utils,datetime
    RETURN    ${d}

Error Page Should Be
    [Documentation]    httpd's own small HTML page for `status` (not a file's bytes).
    [Arguments]    ${body}    ${status}
    ${text}=    Evaluate    $body.decode()
    Should Match Regexp    ${text}    ^<!DOCTYPE html>\\n<html><head><title>${status} [^<]+</title></head><body><h1>${status} [^<]+</h1></body></html>\\n$

*** Test Cases ***
REDbot Finds Nothing Bad Beyond The Documented Allow-List
    [Documentation]    REDbot (HTTP lint) checks a static file, a directory (/ and
    ...    /sub (301 to /sub/) and /sub/ (no index there: 403), a CGI page, a
    ...    conditional GET answered 304 and a multi-range GET (its own follow-up requests also try If-None-Match, If-Modified-Since,
    ...    ranges and gzip negotiation). Every note of level BAD must be in the
    ...    allow-list of components/httpd/README.md ("REDbot"), and every entry there
    ...    must still be found (a stale entry fails too). First in the suite: REDbot
    ...    holds the Date to within 5 s of the host's clock (DATE_INCORRECT), and the
    ...    guest's clock (PIT ticks since an RTC read) is closest right after boot.
    ${h}    ${file}=    Get Verified File    /style.css
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/style.css    ${OUTPUT DIR}
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/    ${OUTPUT DIR}
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/sub    ${OUTPUT DIR}    expect_status=301
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/sub/    ${OUTPUT DIR}    expect_status=403
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/cgi-bin/page    ${OUTPUT DIR}
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/cgi-bin/stream?size=100000&parts=4&delay_ms=50    ${OUTPUT DIR}
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/style.css    ${OUTPUT DIR}    If-None-Match: ${h}[etag]    expect_status=304
    ${notes}=    Run Redbot    http://127.0.0.1:${PORT}/odd-4097.bin    ${OUTPUT DIR}    Range: bytes=0-9,100-199    expect_status=206
    Bad Findings Should All Be Allowed

A Chunked POST From curl Reaches The CGI Byte For Byte
    [Documentation]    curl frames the body itself (-H 'Transfer-Encoding: chunked'
    ...    --data-binary @file); the echo must return exactly the 40000 bytes sent
    ...    (binary, with CR, LF and chunk-size-like text in them), CONTENT_LENGTH
    ...    set and no transfer coding passed to the program.
    ${body}=    Make Test Body    40000    curl
    ${status}    ${out}    ${trace}=    Curl Chunked Post    /cgi-bin/echo    ${body}    ${OUTPUT DIR}
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}

A Hand-Chunked POST With Extensions, Trailers And Odd Sizes Is Decoded Exactly
    [Documentation]    Chunks of 1, 2, 3, 7, 0x3ff, 4096, 0xabc, 13 and 17 bytes with sizes
    ...    in leading-zero, upper- and lower-case hex, extensions (tokens, quoted
    ...    strings with escapes, whitespace around `;` and `=`), a last-chunk with an
    ...    extension and two trailer fields, written in pieces that split size lines,
    ...    CRLFs and the trailer. The body comes back exactly, and the GET pipelined
    ...    after the trailer is answered with the file's bytes.
    ${body}=    Make Test Body    9000    hand
    ${status}    ${out}=    Raw Chunked Post    /cgi-bin/echo    ${body}    /file-1k.txt
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}

An 8 MiB Chunked Upload Streams To The CGI And Its Checksum Comes Back
    [Documentation]    curl POSTs 8 MiB of random bytes with -H 'Transfer-Encoding: chunked'
    ...    --data-binary @file to /cgi-bin/upload, which consumes the body as it arrives
    ...    (httpd hands it over in parts of the client's slices, a window of four, the cgi
    ...    crediting each) and answers with its length and SHA-256: both must match what
    ...    was sent. The stats: one streamed body more, its bytes handed over in parts,
    ...    no body byte copied by httpd to parse or flatten it, none by netstack to
    ...    send, and none into the CGI request pool: netstack received the body into its
    ...    hand-off pool (early demultiplexing: it holds nothing but bodies for the cgi),
    ...    so it went to the cgi by reference; the cgi consumed all of it.
    ${before}=    Stats Json
    ${status}    ${out}    ${sha}    ${seconds}=    Curl Upload    /cgi-bin/upload    8388608    ${OUTPUT DIR}
    Status Should Be    ${status}    200
    Should Be Equal    ${out}    ${{ b"length: 8388608\nsha256: " + $sha.encode() + b"\n" }}
    Log    8 MiB uploaded in ${seconds} s
    ${after}=    Stats Json
    Log    ${after}
    Should Be Equal As Integers    ${after}[httpd][cgi_uploads]    ${${before}[httpd][cgi_uploads] + 1}
    Should Be True    ${after}[httpd][cgi_upload_bytes] - ${before}[httpd][cgi_upload_bytes] >= 8388608 - 65536
    Should Be True    ${after}[httpd][cgi_upload_parts] - ${before}[httpd][cgi_upload_parts] >= 128
    FOR    ${c}    ${name}    IN    httpd    request_body_bytes_copied_to_parse    httpd    body_bytes_flattened
    ...    httpd    cgi_upload_discarded_bytes    httpd    cgi_uploads_aborted    netstack    tcp_tx_copied
        Should Be Equal As Integers    ${after}[${c}][${name}]    ${before}[${c}][${name}]    ${c} ${name}
    END
    # By reference: curl waits for the 100 Continue (Expect: 100-continue
    # beyond 1 MiB), which httpd sends after it handed the connection off,
    # so every body byte lands in netstack's hand-off pool (body_pool) and
    # goes to the cgi from there; none in the shared pool, none copied.
    ${copied}=    Evaluate    ${after}[httpd][cgi_body_bytes_copied] - ${before}[httpd][cgi_body_bytes_copied]
    ${by_ref}=    Evaluate    ${after}[httpd][cgi_body_bytes_by_ref] - ${before}[httpd][cgi_body_bytes_by_ref]
    ${fallback}=    Evaluate    ${after}[netstack][tcp_rx_hand_off_fallback_bytes] - ${before}[netstack][tcp_rx_hand_off_fallback_bytes]
    ${handed}=    Evaluate    ${after}[netstack][tcp_rx_hand_off_bytes] - ${before}[netstack][tcp_rx_hand_off_bytes]
    Log    body bytes by reference ${by_ref}, copied ${copied}; netstack: ${handed} into the hand-off pool, ${fallback} beside it
    Should Be Equal As Integers    ${copied}    0    body bytes copied into the CGI request pool
    Should Be Equal As Integers    ${fallback}    0
    Should Be True    ${by_ref} >= 8388608    ${by_ref} body bytes by reference
    Should Be True    ${handed} >= 8388608
    Should Be True    ${after}[httpd][hand_off_switches] - ${before}[httpd][hand_off_switches] >= 2
    Should Be Equal As Integers    ${${after}[cgi][upload_bytes] - ${before}[cgi][upload_bytes]}    8388608
    Should Be Equal As Integers    ${after}[httpd][copy_mode]    0    the image is built in iolite mode
    # A 64 KiB body still comes whole, and the connection's next request works.
    ${status}    ${out}    ${sha}    ${seconds}=    Curl Upload    /cgi-bin/upload    1000    ${OUTPUT DIR}    chunked=False
    Status Should Be    ${status}    200
    Should Be Equal    ${out}    ${{ b"length: 1000\nsha256: " + $sha.encode() + b"\n" }}

An 8 MiB Chunked Upload To A Program That Streams It Back As It Reads Comes Back Exactly
    [Documentation]    curl POSTs 8 MiB of random bytes chunked to /cgi-bin/tee, which answers
    ...    with its body as it reads it: each part httpd hands it goes back out as a part of
    ...    its streamed (chunked) answer while curl is still sending, by reference, and the
    ...    part is credited only once it went. The answer's SHA-256 must be the body's; the
    ...    stats: one streamed body, one streamed answer, all 8 MiB passed back, nothing
    ...    aborted or discarded. Then a client that reads its answer slowly through a
    ...    16 KiB receive buffer while it uploads 2 MiB: httpd's send side fills again and
    ...    again mid-upload, and the body must still flow as the program credits it (it
    ...    used to stop while the send side was full) and come back byte for byte.
    ${before}=    Stats Json
    ${status}    ${out}    ${sha}    ${seconds}=    Curl Upload    /cgi-bin/tee    8388608    ${OUTPUT DIR}
    Status Should Be    ${status}    200
    Log    8 MiB passed through in ${seconds} s
    Should Be Equal As Integers    ${{ len($out) }}    8388608
    Should Be Equal    ${{ hashlib.sha256($out).hexdigest() }}    ${sha}
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[httpd][cgi_uploads]    ${${before}[httpd][cgi_uploads] + 1}
    Should Be Equal As Integers    ${after}[httpd][cgi_streams]    ${${before}[httpd][cgi_streams] + 1}
    Should Be Equal As Integers    ${${after}[cgi][tee_bytes] - ${before}[cgi][tee_bytes]}    8388608
    FOR    ${c}    ${name}    IN    httpd    cgi_upload_discarded_bytes    httpd    cgi_uploads_aborted
    ...    httpd    cgi_streams_aborted    httpd    cgi_timeouts    httpd    send_timeouts
        Should Be Equal As Integers    ${after}[${c}][${name}]    ${before}[${c}][${name}]    ${c} ${name}
    END
    ${out}    ${sha}    ${seconds}    ${err}=    Upload While Reading Slowly    /cgi-bin/tee    2097152
    Should Be Empty    ${err}
    Log    2 MiB read slowly in ${seconds} s
    Should Be Equal As Integers    ${{ len($out) }}    2097152
    Should Be Equal    ${{ hashlib.sha256($out).hexdigest() }}    ${sha}

If-Match: A Matching Tag, * Or A List With It Serves The File, Others Get 412
    ${h}    ${file}=    Get Verified File    /odd-4097.bin
    ${etag}=    Set Variable    ${h}[etag]
    FOR    ${value}    IN    ${etag}    *    "nope", ${etag}    "a","b" ,${etag}
        ${status}    ${rh}    ${body}=    Exchange    GET    /odd-4097.bin    ${{{"If-Match": $value}}}
        Status Should Be    ${status}    200    If-Match: ${value}
        Body Should Be The File    ${body}    /odd-4097.bin
    END
    # Not matching: a list without it, and our tag made weak (If-Match
    # compares strongly). The 412's framing is checked by a GET behind it.
    FOR    ${value}    IN    "nope"    "nope", "other"    W/${etag}
        ${status}    ${rh}    ${body}=    Exchange    GET    /odd-4097.bin    ${{{"If-Match": $value}}}    follow=/sub/note.txt
        Status Should Be    ${status}    412    If-Match: ${value}
        Error Page Should Be    ${body}    412
    END

If-Unmodified-Since: An Earlier Date Gets 412, The Same Or A Later One The File
    ${h}    ${file}=    Get Verified File    /file-16k.bin
    ${earlier}=    Http Date    ${h}[last-modified]    -86400
    ${later}=    Http Date    ${h}[last-modified]    86400
    ${status}    ${rh}    ${body}=    Exchange    GET    /file-16k.bin    ${{{"If-Unmodified-Since": $earlier}}}    follow=/sub/note.txt
    Status Should Be    ${status}    412    If-Unmodified-Since: ${earlier}
    Error Page Should Be    ${body}    412
    FOR    ${date}    IN    ${h}[last-modified]    ${later}
        ${status}    ${rh}    ${body}=    Exchange    GET    /file-16k.bin    ${{{"If-Unmodified-Since": $date}}}
        Status Should Be    ${status}    200    If-Unmodified-Since: ${date}
        Body Should Be The File    ${body}    /file-16k.bin
    END

If-None-Match And If-Modified-Since Give A 304 Without A Body
    [Documentation]    A GET pipelined behind each 304 must start right after the 304's
    ...    empty line: a 304 carrying any body byte fails here. A tag that does not
    ...    match serves the file.
    ${h}    ${file}=    Get Verified File    /index.html
    FOR    ${field}    ${value}    IN    If-None-Match    ${h}[etag]    If-None-Match    "x", W/${h}[etag]
    ...    If-None-Match    *    If-Modified-Since    ${h}[last-modified]
        ${status}    ${rh}    ${body}=    Exchange    GET    /index.html    ${{{$field: $value}}}    follow=/file-1k.txt
        Status Should Be    ${status}    304    ${field}: ${value}
        Should Be Equal    ${body}    ${{b""}}
        Should Be Equal    ${rh}[etag]    ${h}[etag]
        Should Be Equal    ${rh}[last-modified]    ${h}[last-modified]
        Dictionary Should Not Contain Key    ${rh}    content-length
    END
    ${status}    ${rh}    ${body}=    Exchange    GET    /index.html    ${{{"If-None-Match": '"stale"'}}}
    Status Should Be    ${status}    200
    Body Should Be The File    ${body}    /index.html

If-Range: A Stale Validator Gets The Whole File, A Current One The Range
    ${h}    ${file}=    Get Verified File    /odd-100000.bin
    ${earlier}=    Http Date    ${h}[last-modified]    -1
    # Stale: another tag, our tag made weak (If-Range compares strongly),
    # a date other than Last-Modified.
    FOR    ${value}    IN    "stale"    W/${h}[etag]    ${earlier}
        ${status}    ${rh}    ${body}=    Exchange    GET    /odd-100000.bin    ${{{"Range": "bytes=1000-1999", "If-Range": $value}}}
        Status Should Be    ${status}    200    If-Range: ${value}
        Body Should Be The File    ${body}    /odd-100000.bin
    END
    FOR    ${value}    IN    ${h}[etag]    ${h}[last-modified]
        ${status}    ${rh}    ${body}=    Exchange    GET    /odd-100000.bin    ${{{"Range": "bytes=99990-", "If-Range": $value}}}    follow=/sub/note.txt
        Status Should Be    ${status}    206    If-Range: ${value}
        Should Be Equal    ${rh}[content-range]    bytes 99990-99999/100000
        Should Be Equal    ${body}    ${file[99990:]}
    END

Expect 100-continue: curl Gets The 100 Before It Sends The Body
    [Documentation]    curl is told to wait up to 30 s for the 100 (its default fallback
    ...    is 1 s): it must see `HTTP/1.1 100 Continue`, then send the body, in less
    ...    than that, never "Done waiting for 100-continue". The echo is byte-exact.
    ${body}=    Make Test Body    20000    expect
    ${status}    ${out}    ${seconds}    ${trace}=    Curl Post Expecting Continue    /cgi-bin/echo    ${body}    ${OUTPUT DIR}    30
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}
    Should Be True    ${seconds} < 30    curl waited ${seconds} s
    Should Contain    ${trace}    < HTTP/1.1 100 Continue
    # The same with a chunked body (the 100 comes from the chunked decoder's
    # wait for data, a path of its own).
    ${status}    ${out}    ${seconds}    ${trace}=    Curl Post Expecting Continue    /cgi-bin/echo    ${body}    ${OUTPUT DIR}    30    chunked=True
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}
    Should Be True    ${seconds} < 30    curl waited ${seconds} s

Expect 100-continue: The 100 Comes Before Any Body Byte Is Sent
    ${body}=    Make Test Body    3000    raw-expect
    ${status}    ${out}=    Continue Before Body    /cgi-bin/echo    ${body}
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}

Expect 100-continue From An HTTP/1.0 Client Gets No 100
    [Documentation]    RFC 9110 §15.2: no 1xx to an HTTP/1.0 client; §10.1.1: the
    ...    expectation is ignored. Nothing arrives while the body is held back for
    ...    2 s; then the body is echoed exactly.
    ${body}=    Make Test Body    500    http10
    ${status}    ${out}=    No Continue For Http10    /cgi-bin/echo    ${body}
    Status Should Be    ${status}    200
    Echo Body Should Be    ${out}    ${body}

An Unknown Expectation Gets 417 And Never Reaches The CGI
    ${before}=    Stats Json
    ${status}    ${h}    ${body}=    Exchange    POST    /cgi-bin/echo    ${{{"Expect": "teapot"}}}    body=never-echoed
    Status Should Be    ${status}    417
    Error Page Should Be    ${body}    417
    ${after}=    Stats Json
    # The stats requests are CGI requests themselves: only the second one
    # is between the two snapshots.
    Should Be Equal As Integers    ${after}[httpd][cgi_requests]    ${${before}[httpd][cgi_requests] + 1}

Multi-Range Requests Are Exact multipart/byteranges Sent Without A Copy
    [Documentation]    `bytes=0-9,100-199,-50` of a 64 KiB file, and three ranges of the
    ...    1 MiB file of which one spans several of httpd's reads (256 KiB): each
    ...    part's Content-Range and bytes against the file (itself checked against
    ...    the manifest), then the stats: a 206 more, at least the ranges' bytes
    ...    more by reference, and no payload byte copied anywhere (iolite mode).
    ${h64}    ${f64}=    Get Verified File    /file-64k.bin
    ${h1m}    ${f1m}=    Get Verified File    /file-1m.bin
    ${before}=    Stats Json
    ${status}    ${h}    ${body}=    Exchange    GET    /file-64k.bin    ${{{"Range": "bytes=0-9,100-199,-50"}}}    follow=/sub/note.txt
    Status Should Be    ${status}    206
    Dictionary Should Not Contain Key    ${h}    content-range
    ${n}=    Multipart Byteranges Should Be    ${h}    ${body}    ${f64}    ${h64}[content-type]    0-9    100-199    65486-65535
    Should Be Equal As Integers    ${n}    3
    ${status}    ${h}    ${body}=    Exchange    GET    /file-1m.bin    ${{{"Range": "bytes=5-5, 300000-600000,1048000-"}}}
    Status Should Be    ${status}    206
    Multipart Byteranges Should Be    ${h}    ${body}    ${f1m}    ${h1m}[content-type]    5-5    300000-600000    1048000-1048575
    ${after}=    Stats Json
    Log    ${after}
    Should Be Equal As Integers    ${after}[httpd][partial]    ${${before}[httpd][partial] + 2}
    Should Be True    ${after}[httpd][body_bytes_by_ref] >= ${before}[httpd][body_bytes_by_ref] + 160 + 300578
    FOR    ${c}    ${name}    IN    httpd    static_bytes_copied    netstack    tcp_tx_copied
    ...    netdrv    drv_bytes_copied    fs    bytes_copied    netstack    tcp_tx_coalesced_bytes
        Should Be Equal As Integers    ${after}[${c}][${name}]    0    ${c} ${name}
    END
    Should Be Equal As Integers    ${after}[httpd][copy_mode]    0    the image is built in iolite mode

No Fault
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
