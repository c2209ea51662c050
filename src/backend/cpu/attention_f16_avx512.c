/* AVX-512 bodies of the attention inner loops (attention_f16.h): 16 f16
 * elements converted and multiplied per instruction; a tile's 16
 * exponentials in one pass. */
#include <immintrin.h>

#include "backend/cpu/attention_f16.h"
#include "base/vmath_avx2.h"

static inline __m512 ld16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

void attn_scores_avx512(const uint16_t *const *rows, int n, const float *q, int64_t hd, float *s) {
    for (int i = 0; i < n; i++) {
        const uint16_t *k = rows[i];
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        int64_t e = 0;
        for (; e + 32 <= hd; e += 32) {
            a0 = _mm512_fmadd_ps(ld16(k + e), _mm512_loadu_ps(q + e), a0);
            a1 = _mm512_fmadd_ps(ld16(k + e + 16), _mm512_loadu_ps(q + e + 16), a1);
        }
        if (e < hd) a0 = _mm512_fmadd_ps(ld16(k + e), _mm512_loadu_ps(q + e), a0);
        s[i] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    }
}

void attn_accum_avx512(float *o, const float *p, const uint16_t *const *rows, int n, int64_t hd) {
    for (int64_t e = 0; e < hd; e += 16) {
        __m512 acc = _mm512_loadu_ps(o + e);
        for (int i = 0; i < n; i++) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[i]), ld16(rows[i] + e), acc);
        _mm512_storeu_ps(o + e, acc);
    }
}

float attn_exp_avx512(float *s, int n, float mx) {
    const __mmask16 k = (__mmask16)((1u << n) - 1);
    const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, s), _mm512_set1_ps(mx));
    const __m256 lo = tl_exp8(_mm512_castps512_ps256(x)), hi = tl_exp8(_mm512_extractf32x8_ps(x, 1));
    const __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    _mm512_mask_storeu_ps(s, k, e);
    return _mm512_mask_reduce_add_ps(k, e);
}
