/* base/cpu: see cpu.h. Calls: base/status. */
#include "base/cpu.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/status.h"
#include "tallow.h"

#if defined(__x86_64__) || defined(__i386__)
static bool cpuid_avx2_fma(void) {
    __builtin_cpu_init();
    /* F16C from CPUID leaf 1 (clang's __builtin_cpu_supports lacks "f16c") */
    unsigned a, b, c, d;
    bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

/* leaf 7 subleaf 0: EBX bit 16 F, 30 BW, 31 VL; ECX bit 11 VNNI. The OS must
 * also save the zmm and opmask state (XCR0 bits 1, 2, 5, 6, 7). */
static bool cpuid_avx512(void) {
    unsigned a, b, c, d;
    if (!cpuid_avx2_fma() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool isa = (b >> 16 & 1) && (b >> 30 & 1) && (b >> 31 & 1) && (c >> 11 & 1);
    if (!isa) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xE6) == 0xE6;
}

/* leaf 7 subleaf 1: EAX bit 5 AVX512_BF16 */
static bool cpuid_avx512_bf16(void) {
    unsigned a, b, c, d;
    return cpuid_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
}
#endif

/* cached: kernels ask per matmul; a race only writes the same value */
static int has_avx2 = -1, has_512 = -1, has_bf16 = -1;

bool tl_cpu_has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (has_avx2 < 0) has_avx2 = cpuid_avx2_fma();
    return has_avx2;
#else
    return false;
#endif
}

bool tl_cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (has_512 < 0) has_512 = cpuid_avx512();
    return has_512;
#else
    return false;
#endif
}

bool tl_cpu_has_avx512_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (has_bf16 < 0) has_bf16 = cpuid_avx512_bf16();
    return has_bf16;
#else
    return false;
#endif
}

int tl_cpu_detected_level(void) {
    if (tl_cpu_has_avx512()) return TL_CPU_LEVEL_AVX512;
    return tl_cpu_has_avx2_fma() ? TL_CPU_LEVEL_AVX2 : TL_CPU_LEVEL_SCALAR;
}

/* 0: not chosen yet (the detected level on first use) */
static atomic_int cpu_level;

int tl_cpu_level(void) {
    int lv = atomic_load_explicit(&cpu_level, memory_order_relaxed);
    if (lv) return lv;
    lv = tl_cpu_detected_level();
    atomic_store_explicit(&cpu_level, lv, memory_order_relaxed);
    return lv;
}

void tl_cpu_set_level(int level) { atomic_store_explicit(&cpu_level, level, memory_order_relaxed); }

const char *tl_cpu_level_name(int level) {
    switch (level) {
    case TL_CPU_LEVEL_AVX512: return "avx512";
    case TL_CPU_LEVEL_AVX2: return "avx2";
    default: return "scalar";
    }
}

tl_status tl_cpu_set_kernels(tl_cpu_kernels k) {
    int want;
    switch (k) {
    case TL_CPU_KERNELS_AUTO: want = tl_cpu_detected_level(); break;
    case TL_CPU_KERNELS_SCALAR: want = TL_CPU_LEVEL_SCALAR; break;
    case TL_CPU_KERNELS_AVX2: want = TL_CPU_LEVEL_AVX2; break;
    case TL_CPU_KERNELS_AVX512: want = TL_CPU_LEVEL_AVX512; break;
    default: return tl_err(TL_ERR_INVALID, "tl_cpu_set_kernels: unknown kernel set %d", (int)k);
    }
    if (want > tl_cpu_detected_level())
        return tl_err(TL_ERR_UNSUPPORTED, "tl_cpu_set_kernels: this CPU cannot run the %s kernels (best: %s)",
                      tl_cpu_level_name(want), tl_cpu_level_name(tl_cpu_detected_level()));
    tl_cpu_set_level(want);
    return TL_OK;
}

const char *tl_cpu_kernel_set(void) { return tl_cpu_level_name(tl_cpu_level()); }

tl_status tl_cpu_kernels_parse(const char *name, tl_cpu_kernels *out) {
    static const struct { const char *name; tl_cpu_kernels k; } tab[] = {
        {"auto", TL_CPU_KERNELS_AUTO}, {"scalar", TL_CPU_KERNELS_SCALAR},
        {"avx2", TL_CPU_KERNELS_AVX2}, {"avx512", TL_CPU_KERNELS_AVX512},
    };
    for (size_t i = 0; name && i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(name, tab[i].name)) return *out = tab[i].k, TL_OK;
    return tl_err(TL_ERR_INVALID, "unknown CPU kernel set '%s' (auto, scalar, avx2, avx512)", name ? name : "");
}

int tl_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
