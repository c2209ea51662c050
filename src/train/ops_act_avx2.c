/* train/ops_act_avx2: GELU (tanh form) forward and backward, 8 floats at a
 * time (compiled with -mavx2 -mfma; chosen at run time). The MLP's GELU was
 * the largest cost after the matmuls. Same math as the scalar path in
 * ops_elem.c (base/vmath_avx2.h, shared with the engine's kernels); the
 * tail (< 8 elements) is left to the caller. Owns: nothing. Calls: nothing. */
#include <immintrin.h>
#include <stdint.h>

#include "base/vmath_avx2.h"

int64_t tt__gelu_tanh_fwd_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, tl_gelu_tanh8(v))));
    }
    return i;
}

int64_t tt__gelu_tanh_bwd_avx2(const float *x, const float *g, float *gx, int64_t n) {
    int64_t i = 0;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 k = _mm256_set1_ps(0.7978845608028654f), c3 = _mm256_set1_ps(3.0f * 0.044715f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), t = tl_gelu_tanh8(v);
        __m256 a = _mm256_mul_ps(half, _mm256_add_ps(one, t));
        __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
        __m256 du = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c3, v), v, one));
        __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), du, a);
        _mm256_storeu_ps(gx + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), d));
    }
    return i;
}

/* AdamW/Adam moment and weight update, 8 at a time, in the same order of
 * operations as the scalar loop in optim.c (which libm's errno-setting
 * sqrtf keeps from vectorizing). Returns how many elements it did. */
int64_t tt__adam_avx2(float *w, const float *g, float *m, float *v, int64_t n, float decay, float b1, float b2,
                      float step_size, float bc2s, float eps) {
    const __m256 vdec = _mm256_set1_ps(decay), vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
    const __m256 v1b1 = _mm256_set1_ps(1 - b1), v1b2 = _mm256_set1_ps(1 - b2), vss = _mm256_set1_ps(step_size);
    const __m256 vbc = _mm256_set1_ps(bc2s), veps = _mm256_set1_ps(eps);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gj = _mm256_loadu_ps(g + i);
        __m256 wj = _mm256_mul_ps(_mm256_loadu_ps(w + i), vdec);
        __m256 mj = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), vb1), _mm256_mul_ps(gj, v1b1));
        __m256 vj = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), vb2), _mm256_mul_ps(_mm256_mul_ps(v1b2, gj), gj));
        __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vj), vbc), veps);
        wj = _mm256_sub_ps(wj, _mm256_mul_ps(vss, _mm256_div_ps(mj, den)));
        _mm256_storeu_ps(m + i, mj);
        _mm256_storeu_ps(v + i, vj);
        _mm256_storeu_ps(w + i, wj);
    }
    return i;
}
