*** Settings ***
Documentation       netdrv's polling fallback (image `network_poll`: examples/netecho/netecho.camkes
...                 built with netdrv.poll=1, ticker.drv_every=1, ticker.hz=500): the e1000's
...                 interrupts stay masked and netdrv runs its pass on every tick of the ticker
...                 (2 ms) instead. The echo service must work as with interrupts, and the
...                 driver's interrupt counter must stay 0 (so it really polled).
Library             QemuSystem    ${NETWORK_POLL_BUILD_DIR}
Library             NetClient
Library             Collections
Suite Setup         Start System    --port    ${ECHO}:7
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           network_poll

*** Variables ***
${NETWORK_POLL_BUILD_DIR}   build/variants/network_poll
${ECHO}                     5555
${MIB}                      1048576

*** Test Cases ***
Driver Comes Up Without Its Interrupt
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 6 of 6 components running    timeout=90s
    # The ticker (priority 200) starts before the driver.
    Wait For Serial Line    ^\\[ticker\\] PIT at 500 Hz
    Wait For Serial Line    ^\\[netdrv\\] e1000 at 00:03\\.0 mac 52:54:00:12:34:56 link up$    timeout=30s
    Wait For Serial Line    ^\\[netdrv\\] no interrupt: polling the rings on every tick$

Echo Works By Polling
    Wait For Port    ${ECHO}    timeout=60
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    1
    Log    ${r}
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    8
    Log    ${r}
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    32    timeout=120
    Log    ${r}
    ${r}=    Short Connections    ${ECHO}    200
    Log    ${r}

No Interrupt Was Taken
    ${stats}=    Stats    ${ECHO}
    Should Be Equal As Integers    ${stats}[drv_irqs]    0
    # Frames on the wire: the e1000 cuts a TSO frame (netdrv.tso) into
    # many segments.
    ${sent}=    Evaluate
    ...    ${stats}[drv_tx_frames] - ${stats}[drv_tx_tso_frames] + ${stats}[drv_tx_tso_segments]
    Should Be True    ${stats}[drv_rx_frames] > 10000 and ${sent} > 10000
    ...    frames: ${stats}[drv_rx_frames] received, ${sent} sent (${stats}[drv_tx_frames] handed to the e1000)
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
