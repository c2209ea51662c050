/* base/cpu: run-time CPU feature detection and the process-wide choice of
 * the CPU kernel set.
 *
 * Detection (cpuid, computed once): AVX2 + FMA + F16C, and the AVX-512
 * subset our AVX-512 kernels use. The kernel set is the detected best
 * unless the application asked for another through tl_cpu_set_kernels()
 * (include/tallow.h); every dispatch point asks tl_cpu_use_avx2() /
 * tl_cpu_use_avx512(), so one switch moves every kernel together. Cheap to
 * call (one relaxed atomic load). */
#ifndef TL_BASE_CPU_H
#define TL_BASE_CPU_H
#include <stdbool.h>

/* kernel levels, in order: each includes the ones below it */
enum { TL_CPU_LEVEL_SCALAR = 1, TL_CPU_LEVEL_AVX2 = 2, TL_CPU_LEVEL_AVX512 = 3 };

bool tl_cpu_has_avx2_fma(void);   /* AVX2 + FMA + F16C */
/* AVX-512 F + BW + VL + VNNI (vpdpbusd) on top of AVX2: Ice Lake, Sapphire
 * Rapids, Zen 4 and later */
bool tl_cpu_has_avx512(void);
bool tl_cpu_has_avx512_bf16(void); /* tl_cpu_has_avx512() + AVX512_BF16 (vdpbf16ps) */
int tl_cpu_detected_level(void);  /* best level this CPU runs */
int tl_cpu_level(void);           /* the level in use (detected, or the one set) */
/* Set the level in use; level must be <= tl_cpu_detected_level(). */
void tl_cpu_set_level(int level);
static inline bool tl_cpu_use_avx2(void) { return tl_cpu_level() >= TL_CPU_LEVEL_AVX2; }
static inline bool tl_cpu_use_avx512(void) { return tl_cpu_level() >= TL_CPU_LEVEL_AVX512; }
const char *tl_cpu_level_name(int level); /* "scalar", "avx2", "avx512" */
int tl_cpu_count(void);           /* online cores */
#endif
