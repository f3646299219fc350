*** Settings ***
Documentation       A hostile cgi: the test hook /cgi-bin/hostile (test images only,
...                 `cgi.test_hooks = 1`: tests/variants' webtest) attacks its peers through
...                 the rings it can write. mode=forge writes replies for httpd straight into
...                 the reply ring of cgi_chan, whose slices name pools the cgi may not
...                 reference (httpd's application pool and netstack's socket pool, their
...                 ids read from the image's system.txt as an attacker would), then guessed
...                 generations and out-of-range buffers: the first forged reference breaks
...                 the channel, counted, and nothing after it is read. mode=garbage writes impossible
...                 heads into the reply ring of cgi_chan and into its release ring of
...                 fs_channel. Each time the receivers report the broken channel by name,
...                 once; httpd has the supervisor restart the cgi; the hostile request gets
...                 502 (or a reset), never forged bytes; static files stay byte-exact and
...                 the system goes idle again.
Library             OperatingSystem
Library             QemuSystem    ${WEBTEST_BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Boot The Test Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           webtest

*** Variables ***
${WEBTEST_BUILD_DIR}    ${CURDIR}/../../build/variants/webtest
${PORT}                 8084

*** Keywords ***
Boot The Test Image
    Start System    --port    ${PORT}:80    --disk    ${WEBTEST_BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[httpd\\] cgi attached \\(generation 1\\)$    timeout=90s
    Wait For Web Server    timeout=90

Hostile Request Gets No Forged Bytes
    [Arguments]    ${mode}
    # A reset is an acceptable answer too; an answer must be httpd's own 502.
    ${result}    ${r}=    Run Keyword And Ignore Error    Fetch    /cgi-bin/hostile?mode\=${mode}
    IF    $result == "PASS"
        Should Be Equal As Integers    ${r}[0]    502
        Should Be True    len($r[2]) < 512    502 body of ${{len($r[2])}} bytes
        Should Contain    ${r}[2]    ${{b"502"}}
    ELSE
        Log    hostile request: ${r}
    END

Pool Id Mapped By Httpd Not Cgi
    [Arguments]    ${pool}
    # The compiler derives pool ids; system.txt lists each pool's ends.
    ${spec}=    Get File    ${WEBTEST_BUILD_DIR}/system/system.txt
    ${rows}=    Evaluate    (lambda text, p: [l.split() for l in text.splitlines() if l.split()[:1] == [p]])($spec.split("\\nIO-Lite pools (ids derived from the assembly):\\n")[1], $pool)
    Log    ${rows}
    Should Be True    [r[2] for r in $rows].count("httpd." + $pool) == 1    httpd maps ${pool}
    Should Be True    not any(r[2].startswith("cgi.") for r in $rows)    the cgi does not map ${pool}
    Should Be True    len({r[1] for r in $rows}) == 1    one id at every end of ${pool}
    RETURN    ${rows}[0][1]

Counted Once
    [Arguments]    ${pattern}
    ${lines}=    Serial Lines So Far
    ${n}=    Evaluate    sum(map(bool, map(re.compile($pattern).search, $lines)))    modules=re
    Should Be Equal As Integers    ${n}    1    ${pattern}: ${n} lines

The System Goes Idle
    # Neither httpd nor netstack spins on the broken channel: over 2 s of
    # no requests their wake-ups stay at the ticker's pace (10 Hz for
    # httpd) plus the two stats requests, far below a busy loop's.
    ${a}=    Stats Json
    Sleep    2s
    ${b}=    Stats Json
    ${httpd}=    Evaluate    ${b}[httpd][wakeups] - ${a}[httpd][wakeups]
    ${stack}=    Evaluate    ${b}[netstack][tcp_wakeups] - ${a}[netstack][tcp_wakeups]
    Log    wake-ups in 2 s: httpd ${httpd}, netstack ${stack}
    Should Be True    ${httpd} < 200
    Should Be True    ${stack} < 200

*** Test Cases ***
A Forged Reference From The CGI Costs The CGI Its Channel
    ${mark}=    Serial Mark
    ${app}=    Pool Id Mapped By Httpd Not Cgi    app_pool
    ${sock}=    Pool Id Mapped By Httpd Not Cgi    sock_pool
    ${before}=    Stats Json
    Hostile Request Gets No Forged Bytes    forge&pools\=${app},${sock}
    Wait For Serial Line    ^\\[cgi\\] hostile: 8 forged replies written$
    # A pool outside the cgi's grant list breaks the channel at once: the
    # other forged replies are never read.
    Wait For Serial Line    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken: ForeignPool$
    Wait For Serial Line    ^\\[httpd\\] cgi broke its reply channel: asking the supervisor to restart it$
    # The hostile request was the one left unanswered.
    Wait For Serial Line    ^\\[httpd\\] cgi died \\(death \\d+\\): 1 requests failed with 502,
    # The supervisor's line may come before or after httpd's death line.
    Wait For Serial Line Anywhere    ^\\[supervisor\\] restarted component cgi at the request of httpd \\(restart \\d+\\)$    since=${mark}
    Wait For Serial Line    ^\\[httpd\\] cgi restarted \\(generation \\d+\\): 0 requests failed with 502$
    ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[httpd][rejected_foreign_pool]    ${${before}[httpd][rejected_foreign_pool] + 1}
    Should Be Equal As Integers    ${after}[httpd][rejected_descriptors]    ${${before}[httpd][rejected_descriptors] + 1}
    Should Be Equal As Integers    ${after}[httpd][cgi_restart_requests]    ${${before}[httpd][cgi_restart_requests] + 1}
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?after\=forge
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${body}    ${{b"QUERY_STRING=after=forge"}}
    The System Goes Idle
    Counted Once    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken:
    Serial Should Stay Quiet About Faults    1s

Garbage Ring Heads From The CGI Break Only Its Channels
    ${mark}=    Serial Mark
    ${before}=    Stats Json
    Hostile Request Gets No Forged Bytes    garbage
    Wait For Serial Line    ^\\[cgi\\] hostile: ring heads overwritten$
    # fs: the cgi is its client 2 (channel2).
    Wait For Serial Line    ^\\[fs\\] error: channel channel2 from client 2 broken: CorruptRing$
    Wait For Serial Line    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken: CorruptRing$
    Wait For Serial Line    ^\\[httpd\\] cgi broke its reply channel: asking the supervisor to restart it$
    # The hostile request was the one left unanswered.
    Wait For Serial Line    ^\\[httpd\\] cgi died \\(death \\d+\\): 1 requests failed with 502,
    # The supervisor's line may come before or after httpd's death line.
    Wait For Serial Line Anywhere    ^\\[supervisor\\] restarted component cgi at the request of httpd \\(restart \\d+\\)$    since=${mark}
    Wait For Serial Line    ^\\[httpd\\] cgi restarted \\(generation \\d+\\): 0 requests failed with 502$
    ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    # The new cgi's channel from fs works again (fs reset it): /cgi-bin/page
    # reads its fragments from fs.
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/page
    Should Be Equal As Integers    ${status}    200
    ${after}=    Stats Json
    Should Be Equal As Integers    ${after}[httpd][cgi_restart_requests]    ${${before}[httpd][cgi_restart_requests] + 1}
    The System Goes Idle
    Counted Once    ^\\[fs\\] error: channel channel2 from client 2 broken:
    Counted Once    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken: CorruptRing$
    Serial Should Stay Quiet About Faults    1s

A File Buffer The CGI Never Received Is Refused By fs
    [Documentation]    mode=unheld: the cgi replies with a header of its own and a slice of a
    ...    live buffer of fs's file pool at its current published generation, a buffer fs
    ...    never lent it (the cgi maps the pool and reads the generation). Every check httpd
    ...    can make alone passes; fs, asked to vouch for the reference, finds no other
    ...    client holding it. httpd breaks the cgi's channel, nothing of the buffer reaches
    ...    the client, and /cgi-bin/page, whose fragments fs did lend the cgi, is still
    ...    vouched for and served byte-exact.
    # A cached page the cgi does not hold: the buffer it will name.
    ${status}    ${h}    ${body}=    Fetch    /index.html
    Should Be Equal As Integers    ${status}    200
    ${before}=    Stats Json
    Hostile Request Gets No Forged Bytes    unheld
    Wait For Serial Line    ^\\[cgi\\] hostile: reply with file buffer \\d+ \\(generation 0x[0-9a-f]+, \\d+ bytes\\) written: true$
    Wait For Serial Line    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken: file buffer \\d+ it does not hold$
    Wait For Serial Line    ^\\[httpd\\] cgi broke its reply channel: asking the supervisor to restart it$
    Wait For Serial Line    ^\\[httpd\\] cgi died \\(death \\d+\\): 1 requests failed with 502,
    Wait For Serial Line    ^\\[httpd\\] cgi restarted \\(generation \\d+\\): 0 requests failed with 502$
    ${mid}=    Stats Json
    Should Be Equal As Integers    ${mid}[httpd][cgi_file_refs_unheld]    ${${before}[httpd][cgi_file_refs_unheld] + 1}
    Should Be Equal As Integers    ${mid}[httpd][cgi_restart_requests]    ${${before}[httpd][cgi_restart_requests] + 1}
    # The page's fragments come from fs through the cgi: fs vouches for
    # each, and the page holds every fragment's bytes.
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/page
    Should Be Equal As Integers    ${status}    200
    FOR    ${name}    IN    top    middle    bottom
        ${fragment}=    Get Binary File    ${CURDIR}/../../site/fragments/${name}.html
        Should Contain    ${body}    ${fragment}
    END
    ${after}=    Stats Json
    Should Be True    ${after}[httpd][cgi_file_refs_vouched] > ${mid}[httpd][cgi_file_refs_vouched]
    Should Be Equal As Integers    ${after}[httpd][cgi_file_refs_unheld]    ${mid}[httpd][cgi_file_refs_unheld]
    ${n}=    Every File Should Be Byte Exact    ${WEBTEST_BUILD_DIR}/images/site.manifest
    Should Be True    ${n} >= 10
    The System Goes Idle
    Counted Once    ^\\[httpd\\] error: channel cgi_chan.B from cgi broken: file buffer
    Serial Should Stay Quiet About Faults    1s
