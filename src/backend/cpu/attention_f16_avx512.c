/* AVX-512 bodies of the attention tile loops (attention_f16.h), over KV
 * tiles laid out [hd / 16][16 rows][16] by attn_cvt_avx512. Scores:
 * one accumulator per K row (16 rows, 16 lanes of the head dimension
 * each), folded by one 16 x 16 transpose-and-add tree into a vector whose
 * lane i is row i's dot; the tile's 16 exponentials in one pass; the V
 * sum in two accumulator sets (even and odd rows) so that a 64-wide head
 * keeps eight FMA chains in flight. */
#include <immintrin.h>

#include "backend/cpu/attention_f16.h"

/* t [hd / 16][16 rows][16]: a chunk's 16 rows at fixed offsets, so the
 * row loops address them from one pointer */
void attn_cvt_avx512(const uint16_t *const *rows, int64_t hd, float *t) {
    for (int i = 0; i < ATT_TILE; i++)
        for (int64_t e = 0; e < hd; e += 16)
            _mm512_storeu_ps(t + e * ATT_TILE + i * 16,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rows[i] + e))));
}

/* e^x for x <= 0 (the softmax's s - max), -inf to 0: the same
 * range reduction and polynomial as base/vmath_avx2's tl_exp8 */
static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* a, b -> lanes alternating a's and b's pair sums (within each 128-bit lane) */
static inline __m512 fold2(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}
/* two fold2 results -> each 128-bit lane holds [a, b, c, d] partial sums */
static inline __m512 fold4(__m512 ab, __m512 cd) {
    const __m512d x = _mm512_castps_pd(ab), y = _mm512_castps_pd(cd);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}
/* pairs of 128-bit lanes summed: [x.L0+x.L1, x.L2+x.L3, y.L0+y.L1, y.L2+y.L3] */
static inline __m512 fold_lanes(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
}

/* lane i: dot(kt[i], q) */
static inline __m512 scores16(const float *kt, const float *q, int64_t hd) {
    /* one accumulator per row, written out so that they stay in registers */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512 a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    for (int64_t e = 0; e < hd; e += 16) {
        const __m512 qv = _mm512_loadu_ps(q + e);
        const float *k = kt + e * ATT_TILE;
#define ATT_ROW(i) a##i = _mm512_fmadd_ps(_mm512_loadu_ps(k + (i)*16), qv, a##i)
        ATT_ROW(0), ATT_ROW(1), ATT_ROW(2), ATT_ROW(3), ATT_ROW(4), ATT_ROW(5), ATT_ROW(6), ATT_ROW(7);
        ATT_ROW(8), ATT_ROW(9), ATT_ROW(10), ATT_ROW(11), ATT_ROW(12), ATT_ROW(13), ATT_ROW(14), ATT_ROW(15);
#undef ATT_ROW
    }
    /* fold4 lanes: rows 4k..4k+3 in every 128-bit lane; the two lane
     * folds then put row i's total in lane i */
    const __m512 c0 = fold4(fold2(a0, a1), fold2(a2, a3)), c1 = fold4(fold2(a4, a5), fold2(a6, a7));
    const __m512 c2 = fold4(fold2(a8, a9), fold2(a10, a11)), c3 = fold4(fold2(a12, a13), fold2(a14, a15));
    return fold_lanes(fold_lanes(c0, c1), fold_lanes(c2, c3));
}

/* o [64] = f o + sum_i p[i] vt[i] over one 64-float block of the head */
static inline void accum64(float *o, __m512 f, const float *p, const float *vt, int lo, int hi) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(o), f), a1 = _mm512_mul_ps(_mm512_loadu_ps(o + 16), f);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(o + 32), f), a3 = _mm512_mul_ps(_mm512_loadu_ps(o + 48), f),
           b0 = _mm512_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
    int i = lo;
    for (; i + 2 <= hi; i += 2) {
        const __m512 p0 = _mm512_set1_ps(p[i]), p1 = _mm512_set1_ps(p[i + 1]);
        const float *v0 = vt + i * 16, *v1 = v0 + 16;
        a0 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0), a0);
        a1 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 256), a1);
        a2 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 512), a2);
        a3 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 768), a3);
        b0 = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v1), b0);
        b1 = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v1 + 256), b1);
        b2 = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v1 + 512), b2);
        b3 = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v1 + 768), b3);
    }
    if (i < hi) {
        const __m512 p0 = _mm512_set1_ps(p[i]);
        const float *v0 = vt + i * 16;
        a0 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0), a0);
        a1 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 256), a1);
        a2 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 512), a2);
        a3 = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v0 + 768), a3);
    }
    _mm512_storeu_ps(o, _mm512_add_ps(a0, b0));
    _mm512_storeu_ps(o + 16, _mm512_add_ps(a1, b1));
    _mm512_storeu_ps(o + 32, _mm512_add_ps(a2, b2));
    _mm512_storeu_ps(o + 48, _mm512_add_ps(a3, b3));
}

/* the same over 16 floats (heads not a multiple of 64 wide) */
static inline void accum16(float *o, __m512 f, const float *p, const float *vt, int lo, int hi) {
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(o), f), b = _mm512_setzero_ps();
    int i = lo;
    for (; i + 2 <= hi; i += 2) {
        a = _mm512_fmadd_ps(_mm512_set1_ps(p[i]), _mm512_loadu_ps(vt + i * 16), a);
        b = _mm512_fmadd_ps(_mm512_set1_ps(p[i + 1]), _mm512_loadu_ps(vt + (i + 1) * 16), b);
    }
    if (i < hi) a = _mm512_fmadd_ps(_mm512_set1_ps(p[i]), _mm512_loadu_ps(vt + i * 16), a);
    _mm512_storeu_ps(o, _mm512_add_ps(a, b));
}

void attn_tile_avx512(const float *kt, const float *vt, const float *q, int64_t ng, int64_t hd, int lo, int hi,
                      float scale, float *mx, float *l, float *o) {
    const __mmask16 k = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
    for (int64_t g = 0; g < ng; g++, q += hd, o += hd) {
        const __m512 x = _mm512_mul_ps(scores16(kt, q, hd), _mm512_set1_ps(scale));
        /* the new max and the factor e^(old - new) without a branch (the
         * max rises at unpredictable tiles): 1 when it stays, about 1e-38
         * on a span's first tile, where l and o are still 0 */
        const float bm = _mm512_mask_reduce_max_ps(k, x), m = bm > mx[g] ? bm : mx[g];
        const __m512 fv = exp16(_mm512_set1_ps(mx[g] - m)),
                     e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(x, _mm512_set1_ps(m))));
        float p[ATT_TILE];
        _mm512_storeu_ps(p, e);
        mx[g] = m;
        l[g] = l[g] * _mm512_cvtss_f32(fv) + _mm512_reduce_add_ps(e);
        int64_t c = 0;
        for (; c + 64 <= hd; c += 64) accum64(o + c, fv, p, vt + c * ATT_TILE, lo, hi);
        for (; c < hd; c += 16) accum16(o + c, fv, p, vt + c * ATT_TILE, lo, hi);
    }
}
