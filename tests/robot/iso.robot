*** Settings ***
Documentation       The bootable ISO (GRUB, multiboot) reaches the root task the same
...                 way the QEMU -kernel boot does; this is the image for real PCs.
Library             QemuSystem    ${BUILD_DIR}
Test Teardown       Stop System And Attach Log If Failed

*** Variables ***
${BUILD_DIR}        build

*** Test Cases ***
ISO Boots To The Root Task
    Start System    --iso
    Wait For Serial Line    Booting all finished, dropped to user space    timeout=90s
    Wait For Serial Line    ^\\[roottask\\] all checks passed    timeout=60s
