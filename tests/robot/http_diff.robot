*** Settings ***
Documentation       Differential test against Debian's nginx: every case of tests/http-corpus
...                 (except those that wait for timeouts) is sent raw to our image booted in
...                 QEMU and to nginx serving the same site files (the contents of
...                 images/site.img) on a free loopback port, with /cgi-bin/ proxied to our
...                 server. Statuses, Allow, Content-Range, Transfer-Encoding, connection
...                 persistence, ETag presence and (2xx static) Content-Length and body bytes
...                 are compared (tests/lib/NginxDiff.py). Every difference must be listed,
...                 with its RFC section, in components/httpd/README.md ("Differences from
...                 nginx"); the suite fails on any other, and on a listed one that no longer
...                 occurs. nginx-light comes from ./iolite setup.
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Library             NginxDiff    ${CURDIR}/../http-corpus    ${CURDIR}/../../components/httpd/README.md
Suite Setup         Boot The Web Image And Start nginx
Suite Teardown      Stop Both
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8080

*** Keywords ***
Boot The Web Image And Start nginx
    Start System    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Web Server
    Start Nginx    ${BUILD_DIR}/images/site.img    ${PORT}

Stop Both
    Stop Nginx
    Stop System

*** Test Cases ***
The corpus behaves as nginx does, or differs for a documented reason
    ${line}=    Compare With Nginx    ${PORT}
    Log    ${line}    console=True
    Differences Should All Be Justified
