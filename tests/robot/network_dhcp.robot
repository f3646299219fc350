*** Settings ***
Documentation       netecho with DHCP (image `network_dhcp`: examples/netecho/netecho.camkes
...                 built with the override netstack.dhcp=1): netstack starts without an
...                 address, asks QEMU's user-networking DHCP server (slirp), logs the
...                 lease it got, and the echo service works on that address.
...
...                 What slirp's server hands out (libslirp, bootp.c): the first client
...                 address 10.0.2.15/24, router 10.0.2.2, server identifier 10.0.2.2,
...                 lease time LEASE_TIME = 24 h = 86400 s. The guest has none of these
...                 configured (its static address attribute is ignored), so seeing them
...                 in its log means they came from the server.
Library             QemuSystem    ${NETWORK_DHCP_BUILD_DIR}
Library             NetClient
Library             Collections
Suite Setup         Start System    --port    ${ECHO}:7
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           network_dhcp

*** Variables ***
${NETWORK_DHCP_BUILD_DIR}   build/variants/network_dhcp
${ECHO}                     5555
${MIB}                      1048576

*** Test Cases ***
Stack Starts Without An Address And Asks DHCP
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 6 of 6 components running    timeout=90s
    Wait For Serial Line    ^\\[netstack\\] ip via dhcp$    timeout=30s

Lease From The Server Is Logged
    ${line}=    Wait For Serial Line    ^\\[netstack\\] dhcp lease     timeout=60s
    ${m}=    Should Match Regexp    ${line}
    ...    ^\\[netstack\\] dhcp lease (\\d+\\.\\d+\\.\\d+\\.\\d+)/(\\d+) gw (\\S+) from (\\S+) for (\\d+) s$
    Should Be Equal    ${m}[1]    10.0.2.15
    Should Be Equal    ${m}[2]    24
    Should Be Equal    ${m}[3]    10.0.2.2
    Should Be Equal    ${m}[4]    10.0.2.2
    Should Be Equal As Integers    ${m}[5]    86400

Echo Works On The Leased Address
    Wait For Port    ${ECHO}    timeout=60
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    1
    Log    ${r}
    ${r}=    Echo Bytes    ${ECHO}    ${MIB}    8
    Log    ${r}
    Serial Should Stay Quiet About Faults    1s
    System Should Be Running
