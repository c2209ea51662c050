/* AVX2 + F16C bodies of the attention tile loops (attention_f16.h). */
#include <immintrin.h>

#include "backend/cpu/attention_f16.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void attn_cvt_avx2(const uint16_t *const *rows, int64_t hd, float *t) {
    for (int i = 0; i < ATT_TILE; i++)
        for (int64_t e = 0; e < hd; e += 8)
            _mm256_storeu_ps(t + i * hd + e, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(rows[i] + e))));
}

void attn_scores_avx2(const float *kt, const float *q, int64_t hd, float *s) {
    for (int i = 0; i < ATT_TILE; i++) {
        const float *k = kt + i * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        int64_t e = 0;
        for (; e + 16 <= hd; e += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + e), _mm256_loadu_ps(q + e), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + e + 8), _mm256_loadu_ps(q + e + 8), a1);
        }
        if (e < hd) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + e), _mm256_loadu_ps(q + e), a0);
        s[i] = hsum(_mm256_add_ps(a0, a1));
    }
}

void attn_accum_avx2(float *o, const float *p, const float *vt, int64_t hd, int lo, int hi) {
    for (int64_t e = 0; e < hd; e += 8) {
        __m256 acc = _mm256_loadu_ps(o + e);
        for (int i = lo; i < hi; i++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), _mm256_loadu_ps(vt + i * hd + e), acc);
        _mm256_storeu_ps(o + e, acc);
    }
}
