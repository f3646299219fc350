*** Settings ***
Documentation       The bootable ISO (GRUB for BIOS, multiboot2) of the default image, the whole
...                 system: it reaches the root task the same way the QEMU -kernel boot
...                 does, starts every component and serves the site. This is the image
...                 for real PCs, so it is also where the default image is checked to
...                 have none of the cgi's test hooks (tests/variants' webtest has them),
...                 no hostile client of netstack (tests/variants' nethostile has one) and
...                 no fault injection (tests/variants' recovery has it).
Library             OperatingSystem
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Suite Setup         Start System    --iso    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8080
@{HOOKS}            /cgi-bin/crash    /cgi-bin/spin    /cgi-bin/slow?ms=1    /cgi-bin/restart?component=httpd
...                 /cgi-bin/blob?size=16    /cgi-bin/pattern?seed=1&size=16    /cgi-bin/fshog?path=/index.html
...                 /cgi-bin/hostile?mode=forge    /cgi-bin/hostile?mode=garbage    /cgi-bin/noconfirm    /cgi-bin/fsreset?rounds=1

*** Test Cases ***
ISO Boots The Whole System And Serves The Site
    # GRUB for BIOS loads seL4 by multiboot2 as GRUB for UEFI does
    # (tests/robot/uefi.robot): the RSDP comes from multiboot 2's ACPI tag.
    Wait For Serial Line    Iolite OS: GRUB booting seL4 under BIOS \\(multiboot2\\)    timeout=90s
    Wait For Serial Line    ^ACPI: RSDP from the boot loader \\(multiboot 2\\)$    timeout=30s
    Wait For Serial Line    Booting all finished, dropped to user space    timeout=90s
    Wait For Serial Line    ^\\[roottask\\] all checks passed    timeout=60s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s
    Wait For Web Server    timeout=90
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Log    ${n} site files byte-exact from the ISO boot

The Default Image Answers 404 For Every Test Hook
    # The cgi runs the library's programs only: each hook is an unknown
    # program, answered by the library's 404, and nothing crashes, spins
    # or restarts.
    FOR    ${hook}    IN    @{HOOKS}
        ${status}    ${h}    ${body}=    Fetch    ${hook}
        Should Be Equal As Integers    ${status}    404    GET ${hook}
        Should Be Equal    ${body}    ${{b"no such program\n"}}    GET ${hook}
    END
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?after\=hooks
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${{$body.decode()}}    QUERY_STRING=after=hooks
    Serial Should Stay Quiet About Faults    1s
    # Not just unreachable: absent from the binary. The hook names
    # themselves may be compared as integers, so look for text each hook's
    # code carries (its log line, panic message, reply), which webtest's
    # binary has (tests/robot/web.robot). (Not blob's and pattern's
    # `application/octet-stream`: the library's /cgi-bin/tee, in every
    # image, answers with it too. One constant builds all hooks in or
    # none, so the others' texts stand for them.)
    ${elf}=    Get Binary File    ${BUILD_DIR}/system/elves/cgi.elf
    ${found}=    Evaluate    list(filter($elf.__contains__, (b"crash requested", b"crashing on purpose", b"spinning forever", b"slept ", b"not restarted: ", b"forged replies written", b"ring heads overwritten")))
    Should Be Empty    ${found}    the default image's cgi contains test hooks

The Default Image Has No Hostile Client
    # examples/hostile adds it to the whole system for the nethostile
    # image only: neither its ELF, nor its text inside the root task (which
    # carries every component), nor an instance in the spec.
    File Should Not Exist    ${BUILD_DIR}/system/elves/hostile_client.elf
    ${img}=    Get Binary File    ${BUILD_DIR}/images/roottask.elf
    Should Not Be True    $img.__contains__(b"an honest client from now on")    the root task carries the hostile client
    ${spec}=    Get File    ${BUILD_DIR}/system/system.txt
    Should Not Contain    ${spec}    hostile
    Should Contain    ${spec}    interface client2: Unconnected

The Default Image Has No Fault Injection
    # The supervisor reads injection commands from COM1 only in a root
    # task built for a spec that grants some component `fault_injection`
    # (roottask/build.rs): here no component is granted, and the command
    # reader, its command word and its replies are not in the binary
    # (tests/robot/recovery.robot checks the recovery image has them).
    ${spec}=    Get File    ${BUILD_DIR}/system/system.txt
    Should Not Contain    ${spec}    fault injection
    ${img}=    Get Binary File    ${BUILD_DIR}/images/roottask.elf
    ${found}=    Evaluate    list(filter($img.__contains__, (b"iolite-inject", b"cannot inject a", b"injected a ")))
    Should Be Empty    ${found}    the default image's root task contains the fault-injection path
    # And a command on the console does nothing: nothing faults, the
    # cgi still answers.
    Inject Fault Into    cgi
    Sleep    2s
    ${lines}=    Serial Lines So Far
    ${bad}=    Evaluate    [l for l in $lines if "FAULT" in l or "inject" in l or "restarted component" in l]
    Should Be Empty    ${bad}
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?after\=inject
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${{$body.decode()}}    QUERY_STRING=after=inject
