/* backend/cpu/elementwise_avx2: the FFN activations 8 floats at a time
 * (compiled with -mavx2 -mfma; elementwise.c calls them after
 * tl_cpu_use_avx2() and does the tail). libm's tanhf/expm1f per
 * element were 9% of a Gemma-3 prompt and expf 3% of a SmolLM2 one
 * (perf, 2026-11-30). Each returns how many elements it did (a multiple
 * of 8). Owns: nothing. Calls: base/vmath_avx2.h. */
#include <immintrin.h>
#include <stdint.h>

#include "base/vmath_avx2.h"

int64_t ops__gelu_avx2(float *x, int64_t n);
int64_t ops__gelu_mul_avx2(float *g, const float *u, int64_t n);
int64_t ops__silu_mul_avx2(float *g, const float *u, int64_t n);

int64_t ops__gelu_avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, tl_gelu8(_mm256_loadu_ps(x + i)));
    return i;
}

int64_t ops__gelu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(tl_gelu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    return i;
}

int64_t ops__silu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(tl_silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    return i;
}
