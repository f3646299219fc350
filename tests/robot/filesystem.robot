*** Settings ***
Documentation       The file system on the image: examples/fsread/fsread.camkes
...                 booted with the site's ext2 image as QEMU's virtio-blk disk
...                 (simulate --disk images/site.img, made by tools/image/make-site-image.sh
...                 from site/). fs drives the disk itself (legacy virtio-pci, DMA into the
...                 cache's pool pages) and serves FsIoLite; fs_reader reads every file
...                 through the IO-Lite channel and prints what it finds.
...
...                 Serial lines these tests wait for (stable; fs_reader prints them in
...                 this order, fs's lines come during the calls that cause them):
...                 | [fs] virtio-blk at 00:05.0: I/O ports 0xc000, ioapic pin 10 (irq), queue N, 16384 sectors |
...                 | [fs] superblock: magic 0xef53 |
...                 | [fs] mounted ext2: block size 4096, cache budget 2048 KiB, chunk 16 KiB, pool N pages, mode M |
...                 | [fs] ready |
...                 | [fs_reader] file PATH SIZE SHA256 (one per file, sorted by path: the lines of images/site.manifest) |
...                 | [fs_reader] files done: N files, B bytes |
...                 | [fs_reader] reread /file-64k.bin: hits +4 misses +0 disk reads +0 disk bytes +0 |
...                 | [fs_reader] path P: KIND ino N size N mtime N generation N |
...                 | [fs_reader] error open P: ERROR (and list_dir, read, close) |
...                 | [fs_reader] policy inode PATH INO; policy step N: ...; policy done: ... |
...                 | [fs] evict INO OFFSET referenced or unreferenced (fs.evict_log = 1) |
...                 | [fs_reader] memory 8 readers of /file-1m.bin: fs pool N pages, private copies N pages, total N pages = X.XX copies of the file's 256 pages (mode M) |
...                 | [fs_reader] bench cold or warm ... cycles ... |
...                 | [fs_reader] disk: N bytes, file data D bytes, by DMA into the pool D bytes, through the bounce area N bytes |
...                 | [fs_reader] fs_reader done |
...
...                 The replacement test expects the iolite copy mode (the default): under
...                 posix the reader never holds the cache's buffers.
Library             OperatingSystem
Library             String
Library             QemuSystem    ${FILESYSTEM_BUILD_DIR}
Suite Setup         Boot With The Site Image
Suite Teardown      Stop System
Test Teardown       Attach Serial Log If Test Failed
Test Tags           filesystem

*** Variables ***
# The test variant "filesystem" of ./iolite test (fsread.camkes); tests/run-all
# passes its folder. The build puts the image and its manifest in images/.
${FILESYSTEM_BUILD_DIR}     ${CURDIR}/../../build/variants/filesystem
${IMAGE}                    ${FILESYSTEM_BUILD_DIR}/images/site.img
${MANIFEST}                 ${FILESYSTEM_BUILD_DIR}/images/site.manifest
${POLICY_EVENT}             ^\\[(fs\\] evict |fs_reader\\] policy (step|done))

*** Test Cases ***
Disk Is Found And The Site Mounted
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 3 of 3 components running    timeout=60s
    Wait For Serial Line    ^\\[fs\\] virtio-blk at 00:05\\.0: I/O ports 0xc000, ioapic pin 10 \\(irq\\), queue \\d+, 16384 sectors$
    Wait For Serial Line    ^\\[fs\\] superblock: magic 0xef53$
    Wait For Serial Line    ^\\[fs\\] mounted ext2: block size 4096, cache budget 2048 KiB, chunk 16 KiB, pool \\d+ pages, mode iolite$
    Wait For Serial Line    ^\\[fs\\] ready$

Every File Of The Site Reads Byte Exact
    ${manifest}=    Get File    ${MANIFEST}
    @{lines}=    Split To Lines    ${manifest}
    ${count}=    Get Length    ${lines}
    Should Be True    ${count} >= 10    the manifest lists the site's files
    FOR    ${line}    IN    @{lines}
        ${escaped}=    Regexp Escape    ${line}
        Wait For Serial Line    ^\\[fs_reader\\] ${escaped}$    timeout=60s
    END
    Wait For Serial Line    ^\\[fs_reader\\] files done: ${count} files, \\d+ bytes$

Second Read Is A Cache Hit Without Disk IO
    Wait For Serial Line    ^\\[fs_reader\\] reread /file-64k\\.bin: hits \\+4 misses \\+0 disk reads \\+0 disk bytes \\+0$

Paths Are Normalised Inside The Site And Stat Gives Inode Numbers
    # index.html's size comes from the manifest, so editing the page does not
    # break the test.
    ${manifest}=    Get File    ${MANIFEST}
    ${size}=    Evaluate    re.search(r"^file /index\\.html (\\d+) ", $manifest, re.M).group(1)    modules=re
    ${line}=    Wait For Serial Line    ^\\[fs_reader\\] path /index\\.html: file ino (\\d+) size ${size} mtime 1700000000 generation \\d+$
    ${ino}=    Evaluate    re.search(r"ino (\\d+)", $line).group(1)    modules=re
    Wait For Serial Line    ^\\[fs_reader\\] path /\\.\\./\\.\\./\\.\\./index\\.html: file ino ${ino} size ${size}
    Wait For Serial Line    ^\\[fs_reader\\] path /sub/\\.\\./index\\.html: file ino ${ino} size ${size}
    Wait For Serial Line    ^\\[fs_reader\\] path //sub/\\./note\\.txt: file ino \\d+ size 71
    Wait For Serial Line    ^\\[fs_reader\\] path /: dir ino 2 size 4096
    Wait For Serial Line    ^\\[fs_reader\\] path /sub: dir ino \\d+

Errors Are Typed
    Wait For Serial Line    ^\\[fs_reader\\] error open /nope\\.txt: NotFound$
    Wait For Serial Line    ^\\[fs_reader\\] error open /sub: NotAFile$
    Wait For Serial Line    ^\\[fs_reader\\] error open /index\\.html/x: NotADirectory$
    Wait For Serial Line    ^\\[fs_reader\\] error open /sub/nope/x: NotFound$
    Wait For Serial Line    ^\\[fs_reader\\] error list_dir /index\\.html: NotADirectory$
    Wait For Serial Line    ^\\[fs_reader\\] error read handle 63: BadHandle$
    Wait For Serial Line    ^\\[fs_reader\\] error close handle 63: BadHandle$

Replacement Order Matches The Policy
    [Documentation]    Budget 16 pages, chunks of 4 pages; the table in fs_reader's
    ...    policy() docs gives the order: the LRU unreferenced entry first, the LRU
    ...    referenced one only when every entry is referenced. Each step must cause
    ...    exactly the evictions listed, and nothing else.
    Wait For Serial Line    ^\\[fs_reader\\] policy: budget 64 KiB$
    ${line}=    Wait For Serial Line    ^\\[fs_reader\\] policy inode /file-64k\\.bin \\d+$
    ${a}=    Evaluate    $line.split()[-1]
    Wait For Serial Line    ^\\[fs_reader\\] policy step 1:
    Next Policy Event Should Be    policy step 2:
    Next Policy Event Should Be    policy step 3:
    Next Policy Event Should Be    evict ${a} 32768 unreferenced
    Next Policy Event Should Be    policy step 4:
    Next Policy Event Should Be    evict ${a} 49152 unreferenced
    Next Policy Event Should Be    policy step 5:
    Next Policy Event Should Be    policy step 6:
    Next Policy Event Should Be    evict ${a} 16384 referenced
    Next Policy Event Should Be    policy step 7:
    Next Policy Event Should Be    evict ${a} 0 unreferenced
    Next Policy Event Should Be    policy done: evictions \\d+ \\(referenced 1\\)

One Copy In Memory For Eight Readers Of A 1 MiB File
    Wait For Serial Line    ^\\[fs_reader\\] memory 8 readers of /file-1m\\.bin: fs pool 256 pages, private copies 0 pages, total 256 pages = 1\\.00 copies of the file's 256 pages \\(mode iolite\\)$

Cold And Warm Reads Are Measured
    Wait For Serial Line    ^\\[fs_reader\\] bench cold /file-1m\\.bin: 1048576 bytes \\d+ cycles \\(disk reads [1-9]\\d*, disk bytes 1048576\\)$
    Wait For Serial Line    ^\\[fs_reader\\] bench warm /file-1m\\.bin: 16777216 bytes \\d+ cycles \\(16 reads, disk reads 0, mode iolite\\)$

File Data Goes From The Disk Into The Pool By DMA
    [Documentation]    No bounce copy: every byte of file data the disk delivered was
    ...    written by the device straight into the cache's pool pages; only
    ...    metadata (into the heap) went through the driver's bounce area.
    Wait For Serial Line    ^\\[fs_reader\\] disk: \\d+ bytes, file data ([1-9]\\d*) bytes, by DMA into the pool \\1 bytes, through the bounce area \\d+ bytes$

Reader Finishes And Exits Cleanly
    Wait For Serial Line    ^\\[fs_reader\\] fs_reader done$
    Wait For Serial Line    ^\\[supervisor\\] component fs_reader exited \\(status 0\\)$
    Serial Should Stay Quiet About Faults    1s

*** Keywords ***
Boot With The Site Image
    File Should Exist    ${IMAGE}    the build makes images/site.img (tools/image/make-site-image.sh)
    Start System    --disk    ${IMAGE}

Next Policy Event Should Be
    [Arguments]    ${expected}
    ${line}=    Wait For Serial Line    ${POLICY_EVENT}
    Should Match Regexp    ${line}    ^\\[fs(_reader)?\\] ${expected}
