*** Settings ***
Documentation       The network path on the real image (examples/netecho/netecho.camkes):
...                 QEMU's e1000 -> netdrv -> netstack (smoltcp over IO-Lite) -> tcp_echo,
...                 booted with QEMU user networking and 127.0.0.1:5555 forwarded to the
...                 guest's echo port 7.
...
...                 What reaches the guest: slirp terminates the host's TCP connections
...                 and opens its own to 10.0.2.15:7, so the guest only ever sees
...                 well-formed frames from slirp (ARP, IPv4/TCP). The host cannot
...                 inject raw frames; the robustness test makes slirp produce the hard
...                 cases instead: garbage payload, connections reset mid-transfer (RST
...                 towards the guest), connections abandoned with echo data queued,
...                 connects abandoned before the guest answers.
...
...                 The guest's counters come from tcp_echo: a connection that sends
...                 exactly "STATS\\n" gets one JSON line (NetClient.Stats).
Library             QemuSystem    ${NETWORK_BUILD_DIR}
Library             NetClient
Library             Collections
Suite Setup         Boot Network Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           network

*** Variables ***
${NETWORK_BUILD_DIR}        build/variants/network
${ECHO}                     5555
${MIB}                      1048576

*** Keywords ***
Boot Network Image
    Start System    --port    ${ECHO}:7

Counter
    [Arguments]    ${stats}    ${name}
    ${value}=    Get From Dictionary    ${stats}    ${name}
    RETURN    ${value}

*** Test Cases ***
Driver Finds The E1000 And The Link Is Up
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 6 of 6 components running    timeout=90s
    Wait For Serial Line    ^\\[netdrv\\] e1000 at 00:03\\.0 mac 52:54:00:12:34:56 link up$    timeout=30s

Stack Has Its Static Address And Echo Listens
    # netstack, netdrv and tcp_echo print from their own threads: these
    # lines' order among the link-up line above is not fixed.
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip 10\\.0\\.2\\.15/24 gw 10\\.0\\.2\\.2$
    Wait For Serial Line Anywhere    ^\\[tcp_echo\\] echo listening on port 7$
    Wait For Port    ${ECHO}    timeout=60

TCP Timers Run On The TSC Rate Measured At Boot
    [Documentation]    The kernel measures the TSC rate at boot (seL4's tsc_init, against
    ...    the PIT) and the root task checks it over 100 ms of the PIT, keeping the
    ...    kernel's figure when the two agree; the loader passes the rate to every
    ...    component in its start record, and netstack's TCP timers convert the TSC
    ...    with it, not with a constant. No component fell back to the assumed rate.
    ${line}=    Serial Line Seen    ^\\[roottask\\] (TSC at \\d+ MHz \\(the kernel's|warning: the kernel measured the TSC at \\d+ MHz, .* using \\d+ MHz$)
    ${mhz}=    Evaluate    re.search(r"TSC at (\\d+) MHz \\(the kernel's", $line) or re.search(r"using (\\d+) MHz$", $line)    modules=re
    Serial Line Seen    ^\\[netstack\\] TCP timers on the TSC at ${mhz.group(1)} MHz \\(measured at boot\\)$
    ${lines}=    Serial Lines So Far
    Should Not Contain Match    ${lines}    regexp=.*no TSC rate from the loader

Guest Answers ARP
    # slirp resolves 10.0.2.15 by ARP before it forwards the first
    # connection; the echo above only worked if the guest answered.
    ${stats}=    Stats    ${ECHO}
    ${rx}=    Counter    ${stats}    drv_arp_rx
    ${tx}=    Counter    ${stats}    drv_arp_tx
    Should Be True    ${rx} >= 1 and ${tx} >= 1    ARP frames: ${rx} received, ${tx} sent

TCP Timers Run While The Network Is Idle
    [Documentation]    The ticker wakes netstack every 200 ms (netecho.camkes), so TCP's
    ...    retransmission and zero-window-probe timers fire without frames arriving:
    ...    over 3 s of silence netstack runs about 15 times more than netdrv wakes it.
    ${before}=    Stats    ${ECHO}
    Sleep    3s
    ${after}=    Stats    ${ECHO}
    ${stack}=    Evaluate    ${after}[tcp_wakeups] - ${before}[tcp_wakeups]
    ${driver}=    Evaluate    ${after}[drv_wakeups_sent] - ${before}[drv_wakeups_sent]
    Should Be True    ${stack} - ${driver} >= 8    netstack woke ${stack} times, ${driver} of them by netdrv
    Log    netstack woke ${stack} times in 3 s, netdrv signalled ${driver} times

Echo Returns 1 MiB Byte-Exact On One Connection
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    1
    Log    ${r}

Echo Returns 1 MiB Byte-Exact On 8 Concurrent Connections
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    8
    Log    ${r}

Echo Returns 1 MiB Byte-Exact On 32 Concurrent Connections
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    32    timeout=120
    Log    ${r}

1000 Short Connections In A Row All Succeed
    ${r}=    Short Connections    ${ECHO}    1000
    Log    ${r}
    Wait For Serial Line    ^\\[tcp_echo\\] stats: \\{"copy_mode"    timeout=30s

Transmit Copies Follow The Copy Mode
    [Documentation]    iolite: netdrv and netstack copy no payload byte on transmit.
    ...    flash/posix: netstack copies every sent byte twice (into the socket's
    ...    send ring, then into the frame buffer netdrv DMAs from); netdrv never copies.
    ${before}=    Stats    ${ECHO}
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    2
    ${after}=    Stats    ${ECHO}
    ${mode}=    Counter    ${after}    copy_mode
    ${echoed}=    Evaluate    ${after}[bytes_echoed] - ${before}[bytes_echoed]
    ${socket}=    Evaluate    ${after}[tcp_tx_payload_copied_socket] - ${before}[tcp_tx_payload_copied_socket]
    ${frame}=    Evaluate    ${after}[tcp_tx_payload_copied_frame] - ${before}[tcp_tx_payload_copied_frame]
    ${byref}=    Evaluate    ${after}[tcp_tx_payload_by_ref] - ${before}[tcp_tx_payload_by_ref]
    Should Be Equal As Integers    ${after}[drv_bytes_copied]    0
    IF    '${mode}' == 'iolite'
        Should Be Equal As Integers    ${socket}    0
        Should Be Equal As Integers    ${frame}    0
        Should Be True    ${byref} >= ${echoed}    ${byref} bytes by reference for ${echoed} echoed
    ELSE
        Should Be True    ${socket} >= ${echoed}    socket copies ${socket} for ${echoed} echoed
        Should Be True    ${frame} >= ${echoed}    frame copies ${frame} for ${echoed} echoed
    END
    Log    mode ${mode}: ${echoed} bytes echoed, ${byref} by reference, ${socket} + ${frame} copied

Stack Survives Garbage, Reset Storms And Half-Open Connections
    Garbage After Connect    ${ECHO}    20
    Reset Storm    ${ECHO}    100
    Half Open Connections    ${ECHO}    20
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    4
    Log    ${r}
    ${r}=    Short Connections    ${ECHO}    50
    Log    ${r}
    Serial Should Stay Quiet About Faults    2s
    System Should Be Running
