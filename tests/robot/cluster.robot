*** Settings ***
Documentation       Two appliances behind Debian's haproxy, the way web operators scale
...                 out (tools/cluster/README.md): a bridge in a network namespace the
...                 suite creates, each appliance (image `cluster`: the whole system with
...                 netstack.dhcp=1) on its own TAP device with its own MAC, its address a
...                 fixed lease by MAC from Debian's dnsmasq on the bridge, haproxy on the
...                 bridge's side with the configuration tools/cluster/cluster.py writes
...                 (round robin, health checks on httpd's /healthz, retries 3 with a
...                 redispatch on every retry, retry-on conn-failure empty-response
...                 response-timeout).
...
...                 Under a load of keep-alive clients (real HTTP/1.1, every body checked
...                 against the site manifest's SHA-256) one appliance's QEMU is killed
...                 (SIGKILL: the machine loses power) and later booted again. What the
...                 clients may see, from haproxy's documented retry behaviour: nothing
...                 fails but a response that was already being forwarded from the killed
...                 appliance when it died (haproxy never replays a request whose response
...                 it began to send: that client sees its body cut), so at most one per
...                 client, each from the killed appliance and begun before the kill. A
...                 request it had sent there without an answer yet is retried on the
...                 other when `timeout server` (10 s) strikes; one that cannot connect is
...                 retried after `timeout connect` (1 s). Every other failure (an error
...                 status, a refused or reset connection, a wrong byte, a cut from the
...                 live appliance) fails the test. After the restart haproxy's stats (its
...                 stats socket, `show stat`) show sessions and 2xx answers going to it
...                 again, and the clients get responses from it.
...
...                 Needs root, iproute2, /dev/net/tun, haproxy and dnsmasq (./iolite
...                 setup installs them); the namespace and all in it go away at the end.
Library             QemuSystem    ${CLUSTER_BUILD_DIR}    app1    AS    App1
Library             QemuSystem    ${CLUSTER_BUILD_DIR}    app2    AS    App2
Library             Cluster
Library             Collections
Suite Setup         Boot Two Appliances Behind Haproxy
Suite Teardown      Run Keywords    App1.Stop System    AND    App2.Stop System    AND    Delete Cluster Network
Test Teardown       Run Keywords    App1.Attach Serial Log If Test Failed    AND    App2.Attach Serial Log If Test Failed
Test Tags           cluster

*** Variables ***
${CLUSTER_BUILD_DIR}    ${CURDIR}/../../build/variants/cluster
# haproxy's health check: httpd's /healthz (200 when every component is up
# and every death settled, 503 otherwise).
${CHECK}                /healthz
${CLIENTS}              4

*** Keywords ***
Boot Two Appliances Behind Haproxy
    ${ns}=    Create Cluster Network    2
    Set Suite Variable    ${NS}    ${ns}
    Set Suite Variable    ${MANIFEST}    ${CLUSTER_BUILD_DIR}/images/site.manifest
    Set Suite Variable    @{PATHS}    /index.html    /file-1k.txt    /file-16k.bin    /file-64k.bin
    Boot Appliance    1
    Boot Appliance    2
    Start Haproxy    2    ${CHECK}
    Appliance Should Get Its Lease    1
    Appliance Should Get Its Lease    2
    Wait Until Haproxy Says    1    UP    timeout=120
    Wait Until Haproxy Says    2    UP    timeout=120

Boot Appliance
    [Arguments]    ${n}
    ${args}=    Appliance Arguments    ${n}    ${CLUSTER_BUILD_DIR}/images/site.img
    Run Keyword    App${n}.Start System In Namespace    ${NS}    @{args}

Appliance Should Get Its Lease
    [Documentation]    The lease netstack logs is the one dnsmasq holds for this MAC:
    ...                its fixed address, the bridge as router and server, 1 h.
    [Arguments]    ${n}
    ${line}=    Run Keyword    App${n}.Wait For Serial Line Anywhere    ^\\[netstack\\] dhcp lease    timeout=180s
    ${want}=    Appliance Address    ${n}
    ${router}=    Router Address
    ${want}    ${router}=    Regexp Escape    ${want}    ${router}
    Should Match Regexp    ${line}
    ...    ^\\[netstack\\] dhcp lease ${want}/24 gw ${router} from ${router} for 3600 s$

*** Test Cases ***
Round Robin Spreads Byte-Exact Responses Over Both
    [Documentation]    40 requests on one keep-alive connection through haproxy: every
    ...                body the site's file, each appliance serving a fair share (round
    ...                robin balances every request of a connection on its own).
    ${served}=    Fetch Through Haproxy    40    ${MANIFEST}    @{PATHS}
    ${one}=    Get From Dictionary    ${served}    app1    0
    ${two}=    Get From Dictionary    ${served}    app2    0
    Should Be True    ${one} + ${two} == 40    ${served}
    Should Be True    ${one} >= 12 and ${two} >= 12    unfair: ${served}

An Appliance Killed Under Load Costs No Request And Gets Traffic Back
    [Documentation]    See the suite's documentation for what the clients may see.
    Start Load Through Haproxy    ${CLIENTS}    ${MANIFEST}    @{PATHS}
    Sleep    6s
    Mark Load    kill
    App2.Kill System
    ${down}=    Wait Until Haproxy Says    2    DOWN    timeout=30
    Log    haproxy took app2 out ${down} s after the kill
    Sleep    6s
    Mark Load    restart
    Boot Appliance    2
    Appliance Should Get Its Lease    2
    ${up}=    Wait Until Haproxy Says    2    UP    timeout=120
    Mark Load    up
    ${at_up}=    Haproxy Server Stats    2
    Sleep    8s
    ${r}=    Stop Load
    ${after}=    Haproxy Server Stats    2
    Should Be Empty    ${r}[failed]    failed requests: ${r}[failed]
    ${n_cut}=    Get Length    ${r}[cut]
    Should Be True    ${n_cut} <= ${CLIENTS}    more cut responses than clients: ${r}[cut]
    FOR    ${c}    IN    @{r}[cut]
        Should Be True    $c['server'] == 'app2' and $c['before']['kill']
        ...    a cut response not in flight on the killed appliance: ${c}
    END
    # Nothing begun between the kill and the restart came from app2.
    ${after_kill}=    Get From Dictionary    ${r}[per_server_after][kill]    app2    0
    ${after_restart}=    Get From Dictionary    ${r}[per_server_after][restart]    app2    0
    Should Be Equal As Integers    ${after_kill}    ${after_restart}
    # Traffic returned: the clients got byte-exact responses from app2 after
    # haproxy put it back, and haproxy counted sessions and 2xx answers.
    ${back}=    Get From Dictionary    ${r}[per_server_after][up]    app2    0
    Should Be True    ${back} >= 10    app2 served ${back} responses in the 8 s after it came back: ${r}
    Should Be True    int($after['stot']) >= int($at_up['stot']) + 10    haproxy stot ${at_up}[stot] -> ${after}[stot]
    Should Be True    int($after['hrsp_2xx']) >= int($at_up['hrsp_2xx']) + 10
    Should Be Equal    ${after}[status]    UP
    App1.Serial Should Stay Quiet About Faults    1s
    App2.Serial Should Stay Quiet About Faults    1s
    App1.System Should Be Running
    App2.System Should Be Running
