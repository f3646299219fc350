/*
 * Iolite OS: seL4 5.0.0 release configuration (x86_64 pc99).
 * No debug syscalls and no kernel printing: user components must reach the
 * serial port through an I/O port capability instead of seL4_DebugPutChar.
 */
#include "common.h"
#define CONFIG_OPTIMISATION_O2 1
