/* train/ops_act_avx2: GELU (tanh form) forward and backward, 8 floats at a
 * time (compiled with -mavx2 -mfma; chosen at run time). The MLP's GELU was
 * the largest cost after the matmuls. Same math as the scalar path in
 * ops_elem.c: tanh(u) = 1 - 2 / (e^(2u) + 1), e^x by Cody-Waite reduction
 * and Cephes' degree-6 polynomial; the tail (< 8 elements) is left to the
 * caller. Owns: nothing. Calls: nothing. */
#include <immintrin.h>
#include <stdint.h>

static inline __m256 exp8(__m256 x) {
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

static inline __m256 gelu_t(__m256 x) { /* tanh(k (x + c x^3)) */
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
    __m256 e = exp8(_mm256_add_ps(u, u));
    return _mm256_sub_ps(_mm256_set1_ps(1.0f),
                         _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

int64_t tt__gelu_tanh_fwd_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, gelu_t(v))));
    }
    return i;
}

int64_t tt__gelu_tanh_bwd_avx2(const float *x, const float *g, float *gx, int64_t n) {
    int64_t i = 0;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 k = _mm256_set1_ps(0.7978845608028654f), c3 = _mm256_set1_ps(3.0f * 0.044715f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), t = gelu_t(v);
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
