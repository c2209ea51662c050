/* base/vmath_avx2: 8-wide float math shared by the engine's and the
 * training framework's AVX2 element-wise kernels. Include only from files
 * compiled with -mavx2 -mfma (the *_avx2.c files) and call only after
 * tl_cpu_use_avx2(). e^x by Cody-Waite reduction (ln 2 split in two)
 * and Cephes' degree-6 polynomial for e^r on [-ln2/2, ln2/2]: ~1 ulp over
 * the clamped range [-87, 88]. tanh(u) = 1 - 2 / (e^(2u) + 1) (exact limits
 * +-1, no cancellation trouble where GELU uses it). */
#ifndef TL_BASE_VMATH_AVX2_H
#define TL_BASE_VMATH_AVX2_H

#include <immintrin.h>

static inline __m256 tl_exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* the tanh of GELU's tanh form: tanh(sqrt(2/pi) (x + 0.044715 x^3)) */
static inline __m256 tl_gelu_tanh8(__m256 x) {
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
    __m256 e = tl_exp8(_mm256_add_ps(u, u));
    return _mm256_sub_ps(_mm256_set1_ps(1.0f),
                         _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

/* gelu(x) = x/2 (1 + tanh(...)) */
static inline __m256 tl_gelu8(__m256 x) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), tl_gelu_tanh8(x)));
}

/* silu(x) = x / (1 + e^-x) */
static inline __m256 tl_silu8(__m256 x) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), tl_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

#endif
