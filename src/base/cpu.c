#include "base/cpu.h"

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

bool tl_cpu_has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    /* cached: kernels ask per matmul; a race only writes the same value */
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        /* F16C from CPUID leaf 1 (clang's __builtin_cpu_supports lacks "f16c") */
        unsigned a, b, c, d;
        bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }
    return has;
#else
    return false;
#endif
}

bool tl_cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

int tl_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
