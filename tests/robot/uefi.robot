*** Settings ***
Documentation       The ISO booted by UEFI firmware (OVMF, Debian's `ovmf`;
...                 `simulate --firmware uefi`): grub-mkrescue's EFI GRUB loads seL4 by
...                 multiboot2, the kernel takes the ACPI RSDP from multiboot 2's ACPI tag
...                 (kernel-config/patches 0005: UEFI leaves none in the BIOS area), and
...                 the whole system serves the site byte-exact.
...
...                 The image is the default one: OVMF assigns other BARs than SeaBIOS
...                 (the e1000's at 0x81000000 on `pc`), which the root task finds at boot.
...
...                 Serial lines these tests wait for (stable):
...                 | Iolite OS: GRUB booting seL4 under UEFI (multiboot2) |
...                 | ACPI: RSDP from the boot loader (multiboot 2) |
...                 | [roottask] system started: 8 of 8 components running |
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Test Teardown       Stop System And Attach Log If Failed
Test Tags           uefi-boot

*** Variables ***
${BUILD_DIR}            ${CURDIR}/../../build
${PORT}                 8080

*** Keywords ***
Boot Under UEFI
    [Arguments]    ${machine}
    Start System    --firmware    uefi    --machine    ${machine}    --port    ${PORT}:80
    ...    --disk    ${BUILD_DIR}/images/site.img
    # OVMF under TCG takes some seconds before GRUB runs.
    Wait For Serial Line    Iolite OS: GRUB booting seL4 under UEFI \\(multiboot2\\)    timeout=120s
    Wait For Serial Line    ^ACPI: RSDP from the boot loader \\(multiboot 2\\)$    timeout=30s
    Wait For Serial Line    ^Booting all finished, dropped to user space$    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] cpu: has everything seL4 and Iolite OS need    timeout=30s
    Wait For Serial Line    ^\\[roottask\\] all checks passed    timeout=60s
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s
    Wait For Web Server    timeout=90

*** Test Cases ***
The ISO Boots Under UEFI On pc And Serves The Site Byte Exact
    Boot Under UEFI    pc
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10    only ${n} files in the manifest
    # The keep-alive and pipelining cases, every body by the manifest.
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    ${ok}=    Keep Alive Requests    10    /file-64k.bin
    Should Be Equal As Integers    ${ok}    10
    ${statuses}=    Pipelined Requests    /index.html    /style.css    /file-1k.txt    /file-64k.bin
    Should Be Equal    ${statuses}    ${{[200, 200, 200, 200]}}
    ${status}    ${h}    ${body}=    Fetch    /cgi-bin/echo?firmware\=uefi
    Should Be Equal As Integers    ${status}    200
    Should Contain    ${{$body.decode()}}    QUERY_STRING=firmware=uefi
    Serial Should Stay Quiet About Faults    1s

The ISO Boots Under UEFI On q35 And Serves The Site Byte Exact
    Boot Under UEFI    q35
    Check Bodies Against Site    ${BUILD_DIR}/images/site.manifest    ${CURDIR}/../../site
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Should Be True    ${n} > 10    only ${n} files in the manifest
    ${ok}=    Keep Alive Requests    10    /file-64k.bin
    Should Be Equal As Integers    ${ok}    10
    ${statuses}=    Pipelined Requests    /index.html    /style.css    /file-1k.txt    /file-64k.bin
    Should Be Equal    ${statuses}    ${{[200, 200, 200, 200]}}
    Serial Should Stay Quiet About Faults    1s
