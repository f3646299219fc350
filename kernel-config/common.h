/*
 * Iolite OS: seL4 5.0.0 configuration shared by the debug and release
 * builds, for x86_64 pc99 under QEMU (TCG) and on real x86_64 PCs.
 *
 * This replaces include/plat/pc99/autoconf.h of the fetched kernel tree.
 * The shipped header is sel4test's configuration; ours differs where
 * QEMU's software CPU or our system needs it (see README.md here):
 *   - no CONFIG_SUPPORT_PCID: TCG reports "PCIDs not supported";
 *   - no CONFIG_HUGE_PAGE: 1 GiB pages are absent on qemu64;
 *   - CONFIG_XAPIC instead of CONFIG_X2APIC: QEMU 7.2's TCG has no x2APIC;
 *   - no CONFIG_IOMMU: QEMU's default machine has none;
 *   - none of the sel4test user-library switches (CONFIG_LIB_*).
 */
#define AUTOCONF_INCLUDED 1

#define CONFIG_ARCH_X86 1
#define CONFIG_ARCH_X86_64 1
#define CONFIG_PLAT_PC99 1
#define CONFIG_WORD_SIZE 64
#define CONFIG_MAX_NUM_NODES 1

#define CONFIG_XAPIC 1
#define CONFIG_IRQ_IOAPIC 1
#define CONFIG_MAX_NUM_IOAPIC 1
#define CONFIG_FSGSBASE_INST 1
#define CONFIG_FXSAVE 1
#define CONFIG_XSAVE_SIZE 512
#define CONFIG_HAVE_FPU 1
#define CONFIG_FPU_MAX_RESTORES_SINCE_SWITCH 64
#define CONFIG_HAVE_CACHE 1
#define CONFIG_CACHE_LN_SZ 64
#define CONFIG_MAX_RMRR_ENTRIES 32
#define CONFIG_SYSCALL 1

#define CONFIG_KERNEL_STACK_BITS 12
#define CONFIG_TIMER_TICK_MS 2
#define CONFIG_TIME_SLICE 5
#define CONFIG_NUM_DOMAINS 1
#define CONFIG_DOMAIN_SCHEDULE ""
#define CONFIG_NUM_PRIORITIES 256
#define CONFIG_ROOT_CNODE_SIZE_BITS 16
#define CONFIG_RETYPE_FAN_OUT_LIMIT 256
#define CONFIG_MAX_NUM_WORK_UNITS_PER_PREEMPTION 100
#define CONFIG_MAX_NUM_BOOTINFO_UNTYPED_CAPS 230
#define CONFIG_FASTPATH 1
#define CONFIG_KERNEL_CFLAGS ""
#define CONFIG_KERNEL_COMPILER ""
#define CONFIG_KERNEL_EXTRA_CPPFLAGS ""
#define CONFIG_CROSS_COMPILER_PREFIX ""
