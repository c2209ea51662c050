/* quant/quant_float_avx512: the F16 x F16 dot (decode) in zmm: 16 halves
 * of each side widened by vcvtph2ps per step, four independent FMA chains.
 * Products of two f16 values are exact in f32, so only the summation order
 * differs from the scalar dot. Only called when tl_cpu_use_avx512().
 * Calls: base/fp16 for the tail. */
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

static inline __m512 ld16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

void quant_dot_f16_f16_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(ld16(x + i), ld16(y + i), a0);
        a1 = _mm512_fmadd_ps(ld16(x + i + 16), ld16(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(ld16(x + i + 32), ld16(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(ld16(x + i + 48), ld16(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(ld16(x + i), ld16(y + i), a0);
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; i++) sum += tl_fp16_to_fp32(x[i]) * tl_fp16_to_fp32(y[i]);
    *s = sum;
}
