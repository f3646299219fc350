*** Settings ***
Documentation       A real Prometheus (Debian's `prometheus`) scrapes the appliance's
...                 /metrics on a TAP network every second; queries through its HTTP API
...                 (/api/v1/query) return the series with the values we caused: the
...                 target up, httpd's /healthz answers counted exactly, and the bytes
...                 fs has read from disk as its own counter page says.
...
...                 The guest on tap0 in a network namespace of its own (TapNetwork:
...                 10.0.2.2/24 on the host side, the guest 10.0.2.15); Prometheus runs in
...                 that namespace, its API on the namespace's 127.0.0.1:9090. Needs root,
...                 iproute2, /dev/net/tun and the prometheus package (./iolite setup).
Library             QemuSystem    ${BUILD_DIR}
Library             TapNetwork
Library             WebClient    10.0.2.15:80
Library             Observability    10.0.2.15:80
Suite Setup         Boot With Prometheus
Suite Teardown      Run Keywords    Stop Prometheus    AND    Stop System    AND    Delete Tap Network
Test Teardown       Attach Serial Log If Test Failed
Test Tags           prometheus

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build

*** Keywords ***
Boot With Prometheus
    ${ns}=    Create Tap Network
    Start System In Namespace    ${ns}    --tap    tap0    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    \\[httpd\\] listening on port 80    timeout=120s
    Wait For Web Server On Tap    timeout=120
    Enter Tap Network
    Start Prometheus    ${ns}    10.0.2.15:80    1s

*** Test Cases ***
Prometheus Scrapes The Appliance And Its API Returns What We Caused
    [Documentation]    up is 1; after exactly 7 /healthz requests (nothing else asks for
    ...    it) iolite_health_checks_total{component="httpd"} is 7 in Prometheus; the
    ...    gauge iolite_component_up of the cgi is 1; a counter Prometheus holds equals
    ...    the one /metrics shows once nothing changes it.
    Prometheus Query Should Return    up{job="iolite"}    1
    FOR    ${i}    IN RANGE    7
        Health Should Be Ok
    END
    ${s}=    Prometheus Query Should Return    iolite_health_checks_total{component="httpd"}    7
    Should Be Equal    ${s}[metric][job]    iolite
    Should Be Equal    ${s}[metric][instance]    10.0.2.15:80
    Prometheus Query Should Return    iolite_component_up{component="cgi"}    1
    Prometheus Query Should Return    iolite_component_deaths_total{component="cgi"}    0
    # A static file read once more: fs's disk reads do not move when served
    # from the cache, so its value is stable between scrapes.
    ${m}=    Scrape Metrics
    ${key}=    Evaluate    ("iolite_disk_reads_total", "fs")
    Prometheus Query Should Return    iolite_disk_reads_total{component="fs"}    ${m}[${key}]
