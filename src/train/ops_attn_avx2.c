/* train/ops_attn_avx2: the f32 softmax rows of attention and their
 * backward, 8 floats at a time (compiled with -mavx2 -mfma; chosen at run
 * time). Same steps as the scalar rows in ops_attn.c, with e^x from
 * base/vmath_avx2.h (shared with the engine's kernels) instead of libm's
 * expf; the last (< 8) columns of a row go through a masked load.
 * Owns: nothing. Calls: nothing. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "base/vmath_avx2.h"

static inline __m256i tail_mask(int64_t n) { /* lanes [0, n) of 8 */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline float hsum8(__m256 v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

/* p [Tn, S]: scale, causal mask (row i keeps columns < i + S - Tn + 1) and
 * softmax each row in place; masked columns become 0. */
void tt__attn_softmax_avx2(float *p, int64_t Tn, int64_t S, float scale, int causal) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t i = 0; i < Tn; i++) {
        float *r = p + i * S;
        int64_t lim = causal ? i + (S - Tn) + 1 : S;
        if (lim > S) lim = S;
        int64_t nv = lim / 8 * 8;
        __m256i tm = tail_mask(lim - nv);
        __m256 mx = _mm256_set1_ps(-INFINITY);
        for (int64_t j = 0; j < nv; j += 8) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(r + j), vs);
            _mm256_storeu_ps(r + j, v);
            mx = _mm256_max_ps(mx, v);
        }
        if (nv < lim) {
            __m256 v = _mm256_mul_ps(_mm256_maskload_ps(r + nv, tm), vs);
            _mm256_maskstore_ps(r + nv, tm, v);
            mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(tm)));
        }
        const __m256 vm = _mm256_set1_ps(hmax8(mx));
        __m256 sum = _mm256_setzero_ps();
        for (int64_t j = 0; j < nv; j += 8) {
            __m256 e = tl_exp8(_mm256_sub_ps(_mm256_loadu_ps(r + j), vm));
            _mm256_storeu_ps(r + j, e);
            sum = _mm256_add_ps(sum, e);
        }
        if (nv < lim) {
            __m256 e = _mm256_and_ps(tl_exp8(_mm256_sub_ps(_mm256_maskload_ps(r + nv, tm), vm)),
                                     _mm256_castsi256_ps(tm));
            _mm256_maskstore_ps(r + nv, tm, e);
            sum = _mm256_add_ps(sum, e);
        }
        float s = hsum8(sum);
        const __m256 inv = _mm256_set1_ps(s > 0 ? 1 / s : 0);
        for (int64_t j = 0; j < nv; j += 8) _mm256_storeu_ps(r + j, _mm256_mul_ps(_mm256_loadu_ps(r + j), inv));
        if (nv < lim) _mm256_maskstore_ps(r + nv, tm, _mm256_mul_ps(_mm256_maskload_ps(r + nv, tm), inv));
        for (int64_t j = lim; j < S; j++) r[j] = 0;
    }
}

/* dS = scale * P * (dP - rowsum(P * dP)), in place over dp [Tn, S] */
void tt__attn_dsoftmax_avx2(const float *p, float *dp, int64_t Tn, int64_t S, float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t nv = S / 8 * 8;
    __m256i tm = tail_mask(S - nv);
    for (int64_t i = 0; i < Tn; i++) {
        const float *pr = p + i * S;
        float *d = dp + i * S;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t j = 0; j < nv; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(pr + j), _mm256_loadu_ps(d + j), acc);
        if (nv < S) acc = _mm256_fmadd_ps(_mm256_maskload_ps(pr + nv, tm), _mm256_maskload_ps(d + nv, tm), acc);
        const __m256 vsum = _mm256_set1_ps(hsum8(acc));
        for (int64_t j = 0; j < nv; j += 8) {
            __m256 v = _mm256_sub_ps(_mm256_loadu_ps(d + j), vsum);
            _mm256_storeu_ps(d + j, _mm256_mul_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(pr + j)), v));
        }
        if (nv < S) {
            __m256 v = _mm256_sub_ps(_mm256_maskload_ps(d + nv, tm), vsum);
            _mm256_maskstore_ps(d + nv, tm, _mm256_mul_ps(_mm256_mul_ps(vs, _mm256_maskload_ps(pr + nv, tm)), v));
        }
    }
}
