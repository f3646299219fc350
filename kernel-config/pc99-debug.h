/*
 * Iolite OS: seL4 5.0.0 debug configuration (x86_64 pc99).
 * Serial printing on COM1 and seL4_DebugPutChar / DebugHalt / DebugNameThread,
 * plus the kernel's own assertions.
 */
#include "common.h"
#define CONFIG_DEBUG_BUILD 1
#define CONFIG_PRINTING 1
#define CONFIG_OPTIMISATION_O2 1
/*
 * Per-thread CPU time (seL4_BenchmarkGetThreadUtilisation), for the
 * supervisor's liveness check (roottask/src/liveness.rs): it judges a
 * component stuck only by the CPU time it was given without making
 * progress, so a starved one is never taken for a stuck one. The cost is a
 * time stamp (rdtsc between two cpuid) on every kernel entry. seL4 5.0's
 * fastpath switches threads without accounting; the supervisor absorbs
 * that (a thread switched by the fastpath has just returned from a system
 * call, which counts as progress; see liveness.rs).
 */
#define CONFIG_ENABLE_BENCHMARKS 1
#define CONFIG_BENCHMARK_TRACK_UTILISATION 1
