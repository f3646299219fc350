*** Settings ***
Documentation       Deployment values at boot from the site disk's `/.iolite/config`
...                 (docs/config.md): fs parses the file and publishes the checked values
...                 in a read-only page; netstack and httpd check them again and use them
...                 over the assembly's defaults.
...
...                 A good file moves the system to another static address (10.0.2.20/24
...                 on QEMU's user network, reached through a host forward to that address:
...                 `simulate --port H:10.0.2.20:8081`) and port (8081), with its own
...                 `Server:` header, hostname (CGI's SERVER_NAME without a Host) and index
...                 names: every file is checked byte for byte with curl. A bad file is
...                 refused by `./iolite image` on the host with its `file:line` errors
...                 (exit status 2, no image); put on a disk without that check, it is
...                 refused at boot with the same lines on serial, and the system serves the
...                 site on the assembly's defaults (10.0.2.15, port 80). Without a disk,
...                 netstack says so and takes the defaults at once (httpd then waits for
...                 fs, which has nothing to serve). `dhcp = true` takes the address from
...                 QEMU's DHCP server (10.0.2.15) instead. Four boots.
...
...                 Serial lines waited for:
...                 | [fs] /.iolite/config: address 10.0.2.20/24, gateway 10.0.2.2, ... |
...                 | [netstack] site config: address 10.0.2.20/24, ... |
...                 | [netstack] ip 10.0.2.20/24 gw 10.0.2.2 |
...                 | [httpd] listening on port 8081 |
...                 | [fs] error: /.iolite/config:LINE: what is wrong |
...                 | [fs] error: /.iolite/config refused: assembly defaults for every key |
...                 | [netstack] warning: site config: /.iolite/config refused: assembly defaults |
Library             OperatingSystem
Library             Process
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Library             SiteConfig
Test Teardown       Stop System And Attach Log If Failed
Test Tags           site_config

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${ROOT}             ${CURDIR}/../..
${PORT}             8080
${STARTED}          ^\\[roottask\\] system started: 8 of 8 components running

*** Test Cases ***
A Bad Config Is Refused On The Host With Its Lines
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-bad-host-${PORT}
    Make Config Site    ${dir}    bad
    Remove File    ${dir}.img
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${dir}.img
    Log    ${r.stderr}
    Should Be Equal As Integers    ${r.rc}    2
    ${errors}=    Bad Config Errors
    FOR    ${e}    IN    @{errors}
        Should Contain    ${r.stderr}    make-disk: ${e}
    END
    Should Contain    ${r.stderr}    refused (the boot would use the assembly's defaults); nothing written
    File Should Not Exist    ${dir}.img
    File Should Not Exist    ${dir}.img.tmp

The Host Check Says Where To Forward
    # What `./iolite run` forwards 127.0.0.1:8080 to for this file.
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-forward-${PORT}
    Make Config Site    ${dir}    good
    ${r}=    Run Process    cargo    run    -q    --release    -p    site-config-check    --    --forward    8080
    ...    ${dir}/.iolite/config    cwd=${ROOT}
    Should Be Equal As Integers    ${r.rc}    0    ${r.stderr}
    Should Be Equal    ${r.stdout.strip()}    8080:10.0.2.20:8081
    Make Config Site    ${dir}    dhcp
    ${r}=    Run Process    cargo    run    -q    --release    -p    site-config-check    --    --forward    8080
    ...    ${dir}/.iolite/config    cwd=${ROOT}
    Should Be Equal    ${r.stdout.strip()}    8080:10.0.2.15:8082

A Good Config Moves Address, Port And Names
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-good-${PORT}
    Make Config Site    ${dir}    good
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${dir}.img
    Log    ${r.stdout}${r.stderr}
    Should Be Equal As Integers    ${r.rc}    0    ${r.stderr}
    Should Contain    ${r.stderr}    make-disk: /.iolite/config: ok: address 10.0.2.20/24, gateway 10.0.2.2
    Start System    --port    ${PORT}:10.0.2.20:8081    --disk    ${dir}.img
    Wait For Serial Line Anywhere    ^\\[fs\\] /\\.iolite/config: address 10\\.0\\.2\\.20/24, gateway 10\\.0\\.2\\.2, hostname shop-1\\.example, listen_port 8081, server_name "shop-httpd/2 \\(iolite\\)", index home\\.html index\\.html, log_level info$    timeout=120s
    Wait For Serial Line Anywhere    ^\\[netstack\\] site config: address 10\\.0\\.2\\.20/24    timeout=60s
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip 10\\.0\\.2\\.20/24 gw 10\\.0\\.2\\.2$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[httpd\\] site config: address 10\\.0\\.2\\.20/24    timeout=60s
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 8081$    timeout=60s
    Wait For Serial Line Anywhere    ${STARTED}    timeout=60s
    Site Should Be Served Byte Exact    ${dir}    ${PORT}    shop-httpd/2 (iolite)    home.html
    # The hostname: CGI's SERVER_NAME for a request without Host.
    ${status}    ${headers}    ${body}=    Get With Curl    ${PORT}    /cgi-bin/echo    http10_without_host=True
    Should Be Equal As Integers    ${status}    200
    ${text}=    Convert To String    ${body}
    Should Contain    ${text}    \nSERVER_NAME=shop-1.example\n
    Should Contain    ${text}    \nSERVER_PORT=8081\n
    Should Contain    ${text}    \nSERVER_SOFTWARE=shop-httpd/2 (iolite)\n
    # The file itself is the system's: never served, by its path or a link.
    Wait For Serial Line Anywhere    ^\\[fs\\] /\\.iolite: 2 objects hidden from clients$
    FOR    ${path}    IN    /.iolite/config    /config-link    /.iolite/
        ${status}    ${headers}    ${body}=    Get With Curl    ${PORT}    ${path}
        Should Be Equal As Integers    ${status}    404    ${path}
        ${text}=    Convert To String    ${body}
        Should Not Contain    ${text}    listen_port
    END

A Bad Config At Boot Means Defaults, Said On Serial
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-bad-${PORT}
    Make Config Site    ${dir}    bad
    Make Unchecked Disk    ${dir}    ${dir}.img
    Start System    --port    ${PORT}:80    --disk    ${dir}.img
    ${errors}=    Bad Config Errors
    FOR    ${e}    IN    @{errors}
        ${pattern}=    Evaluate    "^\\\\[fs\\\\] error: " + re.escape($e) + "$"    modules=re
        Wait For Serial Line Anywhere    ${pattern}    timeout=120s
    END
    Wait For Serial Line Anywhere    ^\\[fs\\] error: /\\.iolite/config refused: assembly defaults for every key$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[netstack\\] warning: site config: /\\.iolite/config refused: assembly defaults$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip 10\\.0\\.2\\.15/24 gw 10\\.0\\.2\\.2$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[httpd\\] warning: site config: /\\.iolite/config refused: assembly defaults$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 80$    timeout=60s
    Wait For Serial Line Anywhere    ${STARTED}    timeout=60s
    Site Should Be Served Byte Exact    ${dir}    ${PORT}    Iolite-httpd/0.1    index.html
    System Should Be Running

Dhcp True Takes The Address From DHCP
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-config-dhcp-${PORT}
    Make Config Site    ${dir}    dhcp
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${dir}.img
    Should Be Equal As Integers    ${r.rc}    0    ${r.stderr}
    Start System    --port    ${PORT}:8082    --disk    ${dir}.img
    Wait For Serial Line Anywhere    ^\\[netstack\\] site config: dhcp true, listen_port 8082$    timeout=120s
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip via dhcp$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[netstack\\] dhcp lease 10\\.0\\.2\\.15/24 gw 10\\.0\\.2\\.2 from 10\\.0\\.2\\.2    timeout=60s
    Wait For Serial Line Anywhere    ^\\[httpd\\] listening on port 8082$    timeout=60s
    Wait Until Keyword Succeeds    30s    1s    Site Should Be Served Byte Exact    ${dir}    ${PORT}    Iolite-httpd/0.1    index.html

No Disk Means Defaults, Said On Serial
    # No block device: the root task does not start fs (devices are found
    # at boot), so nobody publishes the page and netstack's bounded wait
    # ends in the assembly's defaults, said as a warning.
    Start System    --port    ${PORT}:80
    Wait For Serial Line Anywhere    ^\\[roottask\\] error: pci: no device for fs\\.match = "block"    timeout=120s
    Wait For Serial Line Anywhere    ^\\[netstack\\] warning: no site config from fs within \\d+ ms: assembly defaults$    timeout=60s
    Wait For Serial Line Anywhere    ^\\[netstack\\] ip 10\\.0\\.2\\.15/24 gw 10\\.0\\.2\\.2$    timeout=60s
