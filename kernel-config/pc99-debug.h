/*
 * Iolite OS: seL4 5.0.0 debug configuration (x86_64 pc99).
 * Serial printing on COM1 and seL4_DebugPutChar / DebugHalt / DebugNameThread,
 * plus the kernel's own assertions.
 */
#include "common.h"
#define CONFIG_DEBUG_BUILD 1
#define CONFIG_PRINTING 1
#define CONFIG_OPTIMISATION_O2 1
