*** Settings ***
Documentation       Your own content: `./iolite image --site DIR -o FILE` makes the disk
...                 fs serves from any directory, and the whole system boots with it and
...                 serves every file byte for byte with its Content-Type (checked with
...                 curl). The tree has what real sites have and careless servers get
...                 wrong: names with spaces, UTF-8, `%`, `+`, `#`, `?`, quotes and
...                 brackets, a 255-byte name, folders twelve deep, a directory index,
...                 a relative symlink, an empty file, a 3 MiB file, and types from
...                 nginx's default list (tests/lib/OwnSite.py). Also the trees the image
...                 command must refuse, with exit status 2, a message naming the file
...                 and the reason, and no image left behind; those need no QEMU and
...                 run while the guest boots. One boot.
Library             OperatingSystem
Library             Process
Library             QemuSystem    ${BUILD_DIR}
Library             OwnSite
Suite Setup         Make The Disk And Boot
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${ROOT}             ${CURDIR}/../..
${PORT}             8080

*** Test Cases ***
A Socket Is Refused
    Image Should Be Refused    socket    a socket; fs serves regular files, directories and symlinks only

A FIFO Is Refused
    Image Should Be Refused    fifo    a FIFO; fs serves regular files, directories and symlinks only

An Absolute Symlink Is Refused
    Image Should Be Refused    absolute-symlink    symlink to an absolute path (/etc/hostname)

A Symlink Leaving The Directory Is Refused
    Image Should Be Refused    escaping-symlink    symlink leaves the directory (../../outside.html)

A Symlink Loop Is Refused
    Image Should Be Refused    symlink-loop    more than 8 symlinks in a chain (or a loop)

A Path Over 4096 Bytes Is Refused
    Image Should Be Refused    deep-path    bytes; fs opens at most 4096

A File Over 4 GiB Is Refused
    Image Should Be Refused    huge-file    4294967297 bytes; fs serves files of at most 4294967296 (4 GiB)

Every File Of The Own Site Is Served Byte Exact With Its Type
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=120s
    ${n}=    Every URL Should Match With Curl    ${MANIFEST}    ${PORT}
    Log    ${n} URLs of the own site byte-exact, each with its Content-Type

*** Keywords ***
Make The Disk And Boot
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-own-site-${PORT}
    Remove Directory    ${dir}    recursive=True
    Remove File    ${dir}.json
    ${manifest}=    Make Own Site    ${dir}
    Set Suite Variable    ${MANIFEST}    ${manifest}
    Set Suite Variable    ${IMAGE}    ${dir}.img
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${IMAGE}
    Log    ${r.stdout}${r.stderr}
    Should Be Equal As Integers    ${r.rc}    0    iolite image failed: ${r.stderr}
    Should Contain    ${r.stdout}    make-disk: ${IMAGE} (
    Start System    --port    ${PORT}:80    --disk    ${IMAGE}

Image Should Be Refused
    [Arguments]    ${kind}    ${reason}
    ${dir}=    Set Variable    ${TEMPDIR}/iolite-refused-${kind}-${PORT}
    Run Process    rm    -rf    ${dir}    ${dir}.img
    ${rel}=    Make Refused Site    ${dir}    ${kind}
    ${r}=    Run Process    ${ROOT}/iolite    image    --site    ${dir}    -o    ${dir}.img
    Log    ${r.stderr}
    Should Be Equal As Integers    ${r.rc}    2    ${kind}: exit status
    Should Contain    ${r.stderr}    make-disk: ${dir}/${rel}
    Should Contain    ${r.stderr}    ${reason}
    Should Contain    ${r.stderr}    1 problem(s) in ${dir}; nothing written
    File Should Not Exist    ${dir}.img
    File Should Not Exist    ${dir}.img.tmp
    Run Process    rm    -rf    ${dir}
