/* quant/quant_bf16_avx512: the BF16 x BF16 dot with AVX512_BF16's vdpbf16ps
 * (32 pairs of bf16 multiplied and added in pairs into 16 f32 lanes per
 * instruction). Products of two bf16 values are exact in f32, so only the
 * summation order (and the flush of denormal inputs that the instruction
 * does) differs from the scalar dot. Only called when tl_cpu_use_avx512()
 * and tl_cpu_has_avx512_bf16(). Calls: base/fp16. */
#include <immintrin.h>
#include <string.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

static inline __m512bh ld32(const uint16_t *p) {
    __m512i v = _mm512_loadu_si512((const void *)p);
    __m512bh b;
    memcpy(&b, &v, sizeof b);
    return b;
}

void quant_dot_bf16_bf16_avx512(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_dpbf16_ps(a0, ld32(x + i), ld32(y + i));
        a1 = _mm512_dpbf16_ps(a1, ld32(x + i + 32), ld32(y + i + 32));
    }
    for (; i + 32 <= n; i += 32) a0 = _mm512_dpbf16_ps(a0, ld32(x + i), ld32(y + i));
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) sum += tl_bf16_to_fp32(x[i]) * tl_bf16_to_fp32(y[i]);
    *s = sum;
}
