*** Settings ***
Documentation       IO-Lite on the image: stream_producer streams a deterministic
...                 8 MiB byte stream as aggregates of its pool (multi-buffer, packed
...                 headers, some split in two) to stream_consumer through one IO-Lite
...                 channel (examples/stream/stream.camkes). The consumer checksums what it
...                 receives; the producer's pool is mapped read-only in the consumer, so
...                 its deliberate write into a received buffer faults and the supervisor
...                 reports it by name; every pool is back to its initial free count after
...                 the stream. The same assembly is booted twice: built with
...                 COPY_MODE=iolite (received by reference: nothing copied) and with
...                 COPY_MODE=posix (each aggregate copied once into a private buffer).
...
...                 The lines come in a fixed order (see examples/lib/stream-common/src/stream.rs),
...                 which these tests rely on: each waits after the previous one's line.
Library             QemuSystem    ${STREAM_BUILD_DIR}    AS    Iolite
Library             QemuSystem    ${STREAMPOSIX_BUILD_DIR}    AS    Posix
Suite Teardown      Stop Both Systems
Test Setup          Skip Unless This Variant Is Built
Test Teardown       Attach Serial Logs If Test Failed

*** Variables ***
# The test variants "stream" and "streamposix" of ./iolite test (the stream
# assembly built with COPY_MODE=iolite and COPY_MODE=posix); tests/run-all
# passes their folders and leaves out the tests tagged with a variant that
# was not built.
${STREAM_BUILD_DIR}           ${CURDIR}/../../build/variants/stream
${STREAMPOSIX_BUILD_DIR}      ${CURDIR}/../../build/variants/streamposix
# The consumer's first dataport (the producer's pool, mapped read-only):
# dataports start at 0x1_0000_0000 in declaration order; size from stream.camkes.
${POOL_VADDR}                 0x100000000
${POOL_SIZE}                  0x200000
${HEX}                        0x[0-9a-f]+
${CONSUMER_FAULT}             ^\\[supervisor\\] FAULT in component stream_consumer: vm fault \\(write denied by page rights\\)

*** Test Cases ***
Loader Starts Producer And Consumer
    [Tags]    stream
    [Setup]    Boot The Stream Image
    Iolite.Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 2 of 2 components running    timeout=60s

Producer Streams Aggregates From Its Pool
    [Tags]    stream
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] stream start: \\d+ bytes in \\d+ aggregates
    ${bytes}    ${aggs}=    Numbers In    ${line}    stream start: (\\d+) bytes in (\\d+) aggregates
    Should Be True    ${bytes} >= 8388608 and ${aggs} > 1
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] pool free pages before: \\d+ of \\d+
    ${free}    ${pages}=    Numbers In    ${line}    before: (\\d+) of (\\d+)
    Should Be Equal As Integers    ${free}    ${pages}    the pool starts empty
    Set Suite Variable    ${STREAM_BYTES}    ${bytes}
    Set Suite Variable    ${STREAM_AGGS}    ${aggs}
    Set Suite Variable    ${FREE_BEFORE}    ${free}

Consumer Receives Every Aggregate In Order
    [Tags]    stream
    Iolite.Wait For Serial Line    ^\\[stream_consumer\\] consumer attached: mode iolite, aggregates are received by reference
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_consumer\\] received \\d+ bytes in \\d+ aggregates, checksum ${HEX}$
    ${bytes}    ${aggs}    ${sum}=    Numbers In    ${line}    received (\\d+) bytes in (\\d+) aggregates, checksum (${HEX})
    Should Be Equal As Integers    ${bytes}    ${STREAM_BYTES}
    Should Be Equal As Integers    ${aggs}    ${STREAM_AGGS}
    Set Suite Variable    ${CONSUMER_SUM}    ${sum}

Consumer Copies No Byte In Iolite Mode
    [Tags]    stream
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_consumer\\] copied bytes: \\d+ \\(mode \\w+\\), by reference: \\d+$
    ${copied}    ${mode}    ${by_ref}=    Numbers In    ${line}    copied bytes: (\\d+) \\(mode (\\w+)\\), by reference: (\\d+)
    Should Be Equal    ${mode}    iolite
    Should Be Equal As Integers    ${copied}    0
    Should Be Equal As Integers    ${by_ref}    ${STREAM_BYTES}
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_consumer\\] private pool free pages before: \\d+, after: \\d+$
    ${before}    ${after}=    Numbers In    ${line}    before: (\\d+), after: (\\d+)
    Should Be Equal As Integers    ${after}    ${before}    the consumer's private pool is back to its initial free count

Producer And Consumer Checksums Match
    [Tags]    stream
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] stream done: \\d+ bytes, checksum ${HEX}$
    ${bytes}    ${sum}=    Numbers In    ${line}    stream done: (\\d+) bytes, checksum (${HEX})
    Should Be Equal As Integers    ${bytes}    ${STREAM_BYTES}
    Should Be Equal    ${sum}    ${CONSUMER_SUM}

Writing A Received Buffer Faults And Is Reported By Name
    [Tags]    stream
    # The one fault this image provokes on purpose (any other fails).
    Iolite.Expect Fault    ${CONSUMER_FAULT}
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] consumer still holds \\d+ pages of the stream$
    ${held}=    Numbers In    ${line}    holds (\\d+) pages
    Should Be True    ${held} > 0    the consumer faults holding part of the stream
    Set Suite Variable    ${HELD_PAGES}    ${held}
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_consumer\\] writing to a received buffer \\(expect a fault\\) at ${HEX}$
    ${addr}=    Numbers In    ${line}    at (${HEX})$
    Should Be True    ${POOL_VADDR} <= ${addr} < ${POOL_VADDR} + ${POOL_SIZE}    the buffer is in the producer's pool
    Iolite.Wait For Serial Line    ${CONSUMER_FAULT} at address ${addr}, ip ${HEX}$

Consumer Restarts Without Repeating The Fault
    [Tags]    stream
    # The supervisor's lines and the new incarnation's come in either
    # order (it may run before the supervisor reports the restart).
    Iolite.Wait For Serial Line Anywhere    ^\\[supervisor\\] restarted component stream_consumer \\(restart 1\\)$
    Iolite.Wait For Serial Line Anywhere    ^\\[stream_consumer\\] consumer restarted \\(restart 1\\)
    Iolite.Wait For Serial Line Anywhere    ^\\[supervisor\\] component stream_consumer exited \\(status 0\\)$

Producer Is Unaffected By The Fault
    [Tags]    stream
    ${line}=    Iolite.Wait For Serial Line
    ...    ^\\[stream_producer\\] consumer restarted after its fault \\(restart 1\\): death protocol dropped \\d+ buffers, pool free pages \\d+ of \\d+$
    ${dropped}    ${free}=    Numbers In    ${line}    dropped (\\d+) buffers, pool free pages (\\d+) of
    Should Be True    ${dropped} > 0    the dead consumer's holds are released by the death protocol
    Should Be Equal As Integers    ${free}    ${FREE_BEFORE}    nothing leaks: the pool is whole again

Every Pool Is Back To Its Initial Free Count
    [Tags]    stream
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] pool free pages after: \\d+ of \\d+$
    ${free}    ${pages}=    Numbers In    ${line}    after: (\\d+) of (\\d+)
    Should Be Equal As Integers    ${free}    ${FREE_BEFORE}
    # Batching and back-pressure are visible: far fewer notifications than
    # aggregates, and the consumer's quota was hit.
    ${line}=    Iolite.Wait For Serial Line    ^\\[stream_producer\\] back-pressure:
    ${refusals}    ${notes}    ${aggs}=    Numbers In    ${line}    (\\d+) quota refusals.* (\\d+) data notifications for (\\d+) aggregates
    Should Be True    ${notes} * 4 < ${aggs}    one notification per batch, not per aggregate
    Should Be True    ${refusals} > 0    the consumer's quota pushed back

Producer Finishes After The Death Protocol
    [Tags]    stream
    Iolite.Wait For Serial Line    ^\\[stream_producer\\] producer done$
    Iolite.Wait For Serial Line    ^\\[supervisor\\] component stream_producer exited \\(status 0\\)$
    Iolite.Serial Should Stay Quiet About Faults    1s
    Iolite.System Should Be Running

Posix Mode Copies Every Byte Once And Streams The Same Data
    [Tags]    streamposix
    [Setup]    Boot The Posix Image
    Posix.Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 2 of 2 components running    timeout=60s
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_producer\\] stream start: \\d+ bytes in \\d+ aggregates
    ${bytes}    ${aggs}=    Numbers In    ${line}    stream start: (\\d+) bytes in (\\d+) aggregates
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_producer\\] pool free pages before: \\d+ of
    ${free_before}=    Numbers In    ${line}    before: (\\d+) of
    Posix.Wait For Serial Line    ^\\[stream_consumer\\] consumer attached: mode posix, each aggregate is copied into a private buffer
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_consumer\\] received \\d+ bytes in \\d+ aggregates, checksum ${HEX}$
    ${rbytes}    ${raggs}    ${sum}=    Numbers In    ${line}    received (\\d+) bytes in (\\d+) aggregates, checksum (${HEX})
    Should Be Equal As Integers    ${rbytes}    ${bytes}
    Should Be Equal As Integers    ${raggs}    ${aggs}
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_consumer\\] copied bytes: \\d+ \\(mode \\w+\\)
    ${copied}    ${mode}=    Numbers In    ${line}    copied bytes: (\\d+) \\(mode (\\w+)\\)
    Should Be Equal    ${mode}    posix
    Should Be Equal As Integers    ${copied}    ${bytes}    posix copies every streamed byte exactly once
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_consumer\\] private pool free pages before: \\d+, after: \\d+$
    ${pbefore}    ${pafter}=    Numbers In    ${line}    before: (\\d+), after: (\\d+)
    Should Be Equal As Integers    ${pafter}    ${pbefore}
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_producer\\] stream done: \\d+ bytes, checksum ${HEX}$
    ${pbytes}    ${psum}=    Numbers In    ${line}    stream done: (\\d+) bytes, checksum (${HEX})
    Should Be Equal    ${psum}    ${sum}
    Should Be Equal As Integers    ${pbytes}    ${bytes}
    Set Suite Variable    ${POSIX_FREE_BEFORE}    ${free_before}

Posix Mode Write Into The Producer's Pool Faults Too
    [Tags]    streamposix
    # The copies were private, so the consumer held none of the producer's
    # buffers when it faulted.
    Posix.Wait For Serial Line    ^\\[stream_producer\\] consumer still holds 0 pages of the stream$
    Posix.Wait For Serial Line    ^\\[stream_consumer\\] writing to the producer's pool \\(expect a fault\\) at ${HEX}
    # The one fault this image provokes on purpose (any other fails).
    Posix.Expect Fault    ${CONSUMER_FAULT}
    Posix.Wait For Serial Line    ${CONSUMER_FAULT}
    ${line}=    Posix.Wait For Serial Line    ^\\[stream_producer\\] pool free pages after: \\d+ of
    ${free_after}=    Numbers In    ${line}    after: (\\d+) of
    Should Be Equal As Integers    ${free_after}    ${POSIX_FREE_BEFORE}
    Posix.Wait For Serial Line    ^\\[stream_producer\\] producer done$
    Posix.Serial Should Stay Quiet About Faults    1s
    Posix.System Should Be Running

*** Keywords ***
Boot The Stream Image
    Skip Unless Built    ${STREAM_BUILD_DIR}
    Iolite.Start System

Boot The Posix Image
    Skip Unless Built    ${STREAMPOSIX_BUILD_DIR}
    # One QEMU at a time: the iolite image has done its part.
    Iolite.Stop System
    Posix.Start System

Skip Unless This Variant Is Built
    ${dir}=    Set Variable If    "streamposix" in $TEST_TAGS    ${STREAMPOSIX_BUILD_DIR}    ${STREAM_BUILD_DIR}
    Skip Unless Built    ${dir}

Skip Unless Built
    [Arguments]    ${dir}
    ${built}=    Evaluate    os.access(os.path.join($dir, "simulate"), os.X_OK)    modules=os
    Skip If    not ${built}    no image in ${dir}: build it first (./iolite test builds the variants)

Stop Both Systems
    Iolite.Stop System
    Posix.Stop System

Attach Serial Logs If Test Failed
    Iolite.Attach Serial Log If Test Failed
    Posix.Attach Serial Log If Test Failed

Numbers In
    [Documentation]    The groups of ``pattern`` in ``line`` (one value, or a list).
    [Arguments]    ${line}    ${pattern}
    ${match}    @{groups}=    Should Match Regexp    ${line}    ${pattern}
    IF    len($groups) == 1    RETURN    ${groups}[0]
    RETURN    @{groups}
