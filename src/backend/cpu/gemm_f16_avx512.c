/* AVX-512 body of the F16 prefill GEMM (layouts in gemm.h).
 *
 * A tile is 32 weight rows (two zmm of f32 after vcvtph2ps) by up to 12
 * tokens: 24 accumulators. Per element of k the two weight vectors are
 * converted once and each token's activation is broadcast from memory
 * into two FMAs, so the loop is FMA bound with no horizontal sums; the
 * accumulators are the 32 outputs of each token, stored as they are.
 * Products of two f16 values are exact in f32, so results differ from the
 * scalar dot only in summation order. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "base/transpose_avx2.h"

size_t gemm_f16_panel_bytes(int64_t k) { return (size_t)k * GEMM_F16_ROWS * sizeof(uint16_t); }

void gemm_f16_panel_pack_avx512(const uint16_t *w, size_t row_bytes, int nrows, int64_t k, uint16_t *panel) {
    /* 8 elements of each of the 32 rows at a time: a 32 x 8 transpose of
     * 16-bit values, done as 8 rows x 8 through unpacks per quarter */
    int64_t e = 0;
    for (; e + 8 <= k; e += 8) {
        for (int q = 0; q < GEMM_F16_ROWS / 8; q++) {
            __m128i r[8];
            for (int j = 0; j < 8; j++) {
                const int row = q * 8 + j;
                r[j] = row < nrows ? _mm_loadu_si128((const __m128i *)((const uint8_t *)w + (size_t)row * row_bytes +
                                                                       (size_t)e * 2))
                                   : _mm_setzero_si128();
            }
            cpu_transpose8x16(r); /* r[i]: element e + i of rows q*8 .. q*8+7 */
            for (int i = 0; i < 8; i++)
                _mm_store_si128((__m128i *)(panel + (size_t)(e + i) * GEMM_F16_ROWS + q * 8), r[i]);
        }
    }
    for (; e < k; e++)
        for (int r = 0; r < GEMM_F16_ROWS; r++) {
            uint16_t v = 0;
            if (r < nrows) memcpy(&v, (const uint8_t *)w + (size_t)r * row_bytes + (size_t)e * 2, 2);
            panel[(size_t)e * GEMM_F16_ROWS + r] = v;
        }
}

void gemm_f16_round_group_avx512(const float *x, float *y, int64_t k, int nt) {
    for (int t = 0; t < nt; t++) {
        const float *xt = x + (size_t)t * (size_t)k;
        int64_t e = 0;
        for (; e + 16 <= k; e += 16) {
            float v[16];
            _mm512_storeu_ps(v, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(xt + e), _MM_FROUND_TO_NEAREST_INT)));
            for (int i = 0; i < 16; i++) y[(e + i) * nt + t] = v[i];
        }
        for (; e < k; e++) y[e * nt + t] = _cvtsh_ss(_cvtss_sh(xt[e], _MM_FROUND_TO_NEAREST_INT));
    }
}

/* NT tokens (1..12), two 16-row halves (the second only when TWO) */
static inline __attribute__((always_inline)) void f16_tile(int nt, bool two, int64_t k, const uint16_t *panel,
                                                           const float *y, float *out, int64_t ldo, __mmask16 k0,
                                                           __mmask16 k1) {
    __m512 a[GEMM_F16_TOK], b[GEMM_F16_TOK];
    /* unrolled so that the accumulators live in registers */
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) a[t] = b[t] = _mm512_setzero_ps();
    for (int64_t e = 0; e < k; e++) {
        const uint16_t *p = panel + (size_t)e * GEMM_F16_ROWS;
        const __m512 w0 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)p));
        const __m512 w1 = two ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p + 16))) : w0;
        const float *ye = y + e * nt;
#pragma GCC unroll 12
        for (int t = 0; t < nt; t++) {
            const __m512 v = _mm512_set1_ps(ye[t]);
            a[t] = _mm512_fmadd_ps(w0, v, a[t]);
            if (two) b[t] = _mm512_fmadd_ps(w1, v, b[t]);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) {
        _mm512_mask_storeu_ps(out + t * ldo, k0, a[t]);
        if (two) _mm512_mask_storeu_ps(out + t * ldo + 16, k1, b[t]);
    }
}

#define F16_TILE_CASES(TWO)                                                                                            \
    switch (nt) {                                                                                                      \
    case 1: f16_tile(1, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 2: f16_tile(2, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 3: f16_tile(3, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 4: f16_tile(4, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 5: f16_tile(5, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 6: f16_tile(6, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 7: f16_tile(7, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 8: f16_tile(8, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 9: f16_tile(9, TWO, k, panel, y, out, ldo, k0, k1); break;                                                   \
    case 10: f16_tile(10, TWO, k, panel, y, out, ldo, k0, k1); break;                                                 \
    case 11: f16_tile(11, TWO, k, panel, y, out, ldo, k0, k1); break;                                                 \
    default: f16_tile(12, TWO, k, panel, y, out, ldo, k0, k1); break;                                                 \
    }

void gemm_f16_panel_run_avx512(int64_t k, const uint16_t *panel, const float *y, int nt, int nrows, float *out,
                               int64_t ldo) {
    const __mmask16 k0 = (__mmask16)(nrows >= 16 ? 0xFFFF : (1u << nrows) - 1);
    const __mmask16 k1 = (__mmask16)(nrows >= 32 ? 0xFFFF : nrows > 16 ? (1u << (nrows - 16)) - 1 : 0);
    if (nrows > 16) {
        F16_TILE_CASES(true)
    } else {
        F16_TILE_CASES(false)
    }
}
