// The CPU features glibc found at start-up (CPU_FEATURE_ACTIVE from <sys/platform/x86.h>): no
// cpuid instruction of our own, which traps to the hypervisor in a VM (~20 us a start on the
// development VM). That header spells its return type _Bool, a C keyword that GCC accepts in
// C++ and clang does not (the fuzzing build); it gets the C++ spelling for the include only.
#pragma once

#if defined(__x86_64__)
#define _Bool bool
#include <sys/platform/x86.h>
#undef _Bool
#endif
