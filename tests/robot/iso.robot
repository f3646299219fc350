*** Settings ***
Documentation       The bootable ISO (GRUB, multiboot) of the default image, the whole
...                 system: it reaches the root task the same way the QEMU -kernel boot
...                 does, starts every component and serves the site. This is the image
...                 for real PCs.
Library             QemuSystem    ${BUILD_DIR}
Library             WebClient    ${PORT}
Test Teardown       Stop System And Attach Log If Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${PORT}             8080

*** Test Cases ***
ISO Boots The Whole System And Serves The Site
    Start System    --iso    --port    ${PORT}:80    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    Booting all finished, dropped to user space    timeout=90s
    Wait For Serial Line    ^\\[roottask\\] all checks passed    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s
    Wait For Web Server    timeout=90
    ${n}=    Every File Should Be Byte Exact    ${BUILD_DIR}/images/site.manifest
    Log    ${n} site files byte-exact from the ISO boot
