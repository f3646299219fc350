*** Settings ***
Documentation       What the CPU must offer (README, "Booting a real PC"), checked where
...                 it can be: the default image booted on QEMU CPU models that have or
...                 lack a feature (`simulate --cpu`). The root task names the CPU and
...                 checks it before it loads anything (component_runtime::cpu); what the
...                 kernel needs before it can print, FSGSBASE, its 32-bit entry code
...                 checks and halts with a line of its own.
...
...                 Serial lines these tests wait for (stable):
...                 | [roottask] cpu: VENDOR "BRAND" family F model M stepping S |
...                 | [roottask] cpu: has everything seL4 and Iolite OS need: lm syscall fsgsbase pat apic fxsr tsc |
...                 | [roottask] cpu: no NAME: WHY |
...                 | [roottask] error: cpu: missing NAME: WHY |
...                 | fsgsbase instructions not supported by the processor (the kernel, no newline) |
Library             Collections
Library             QemuSystem    ${BUILD_DIR}
Test Teardown       Stop System And Attach Log If Failed
Test Tags           cpu

*** Variables ***
${BUILD_DIR}        ${CURDIR}/../../build
${HAS}              ^\\[roottask\\] cpu: has everything seL4 and Iolite OS need: lm syscall fsgsbase pat apic fxsr tsc$

*** Keywords ***
Console Should Not Show
    [Arguments]    ${pattern}
    ${lines}=    Serial Lines So Far
    ${found}=    Evaluate    list(filter(re.compile($pattern).search, $lines))    modules=re
    Should Be Empty    ${found}

*** Test Cases ***
The Root Task Names The CPU And What It Lacks
    # simulate's default CPU: qemu64 plus FSGSBASE and XSAVE. QEMU's qemu64
    # reports neither RDRAND nor an invariant TSC. The NIC and the disk,
    # so that every driver finds its device and all components start.
    Start System    --net    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    ^\\[roottask\\] cpu: AuthenticAMD "QEMU Virtual CPU version 2\\.5\\+" family 15 model 107 stepping 1$    timeout=60s
    Wait For Serial Line    ${HAS}
    Wait For Serial Line    ^\\[roottask\\] cpu: no constant_tsc: clocks assume the TSC rate measured at boot never changes
    Wait For Serial Line    ^\\[roottask\\] cpu: no rdrand: component seeds come from the TSC alone$
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s

A Feature The CPU Has Is Not Named As Lacking
    # TCG emulates RDRAND (an invariant TSC it cannot offer: QEMU drops it).
    Start System    --cpu    qemu64,+fsgsbase,+xsave,+rdrand    --net    --disk    ${BUILD_DIR}/images/site.img
    Wait For Serial Line    ${HAS}    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] cpu: no constant_tsc:
    Wait For Serial Line Anywhere    ^\\[roottask\\] system started: 8 of 8 components running    timeout=60s
    Console Should Not Show    cpu: no rdrand

Without FSGSBASE The Kernel Says So And Halts
    # seL4's 32-bit entry code checks CPUID before paging is on, writes its
    # line to COM1 without a newline and halts: no root task, no reset.
    Start System    --cpu    qemu64,+xsave
    Wait For Serial Text    fsgsbase instructions not supported by the processor    timeout=60s
    Sleep    5s
    System Should Be Running
    Console Should Not Show    Booting all finished|Iolite OS root task

Without A TSC The Root Task Says So And Loads Nothing
    # QEMU still executes RDTSC, so the kernel boots; the root task reads
    # CPUID, names what is missing and stops before loading a component.
    Start System    --cpu    qemu64,+fsgsbase,+xsave,-tsc
    Wait For Serial Line    ^\\[roottask\\] error: cpu: missing tsc: every component's clock reads the TSC$    timeout=60s
    Wait For Serial Line    ^\\[roottask\\] error: cpu: this CPU cannot run Iolite OS \\(README, "Booting a real PC"\\); stopping$
    Sleep    3s
    System Should Be Running
    Console Should Not Show    ^\\[roottask\\] (loading|boot info|system started)|^\\[(ticker|fs|netdrv)\\]
