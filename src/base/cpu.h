/* base/cpu: run-time CPU feature detection (x86: AVX2, FMA, F16C, AVX-512).
 * Results are computed once per call site; cheap to call. */
#ifndef TL_BASE_CPU_H
#define TL_BASE_CPU_H
#include <stdbool.h>
bool tl_cpu_has_avx2_fma(void);   /* AVX2 + FMA + F16C */
bool tl_cpu_has_avx512(void);     /* AVX-512 F + BW + VL */
int tl_cpu_count(void);           /* online cores */
#endif
