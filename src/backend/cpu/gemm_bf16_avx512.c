/* AVX-512 BF16 body of the BF16 prefill GEMM (layouts in gemm.h).
 *
 * The F16 kernel's tile (32 weight rows by up to 12 tokens, 24 zmm
 * accumulators) on element pairs: one vdpbf16ps multiplies a pair of
 * elements of 16 rows by the token's pair, broadcast from memory as one
 * 32-bit value, and adds both products into the rows' f32 sums. Products
 * of two bf16 values are exact in f32; the instruction adds a pair's two
 * products before the accumulator and flushes denormal inputs, so results
 * differ from the scalar dot in summation order (and for denormals).
 * Only called when tl_cpu_use_avx512() and tl_cpu_has_avx512_bf16(). */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "base/transpose_avx2.h"
#include "base/fp16.h"
#include "quant/quant_internal.h"

size_t gemm_bf16_panel_bytes(int64_t k) { return (size_t)((k + 1) / 2) * GEMM_F16_ROWS * 2 * sizeof(uint16_t); }

void gemm_bf16_panel_pack_avx512(const uint16_t *w, size_t row_bytes, int nrows, int64_t k, uint16_t *panel) {
    /* 8 pairs (16 elements) of each of the 32 rows at a time: a transpose
     * of 32-bit pairs, 8 rows x 8 pairs per step */
    const int64_t np = (k + 1) / 2;
    int64_t p = 0;
    for (; p + 8 <= k / 2; p += 8) {
        for (int q = 0; q < GEMM_F16_ROWS / 8; q++) {
            __m256i r[8];
            for (int j = 0; j < 8; j++) {
                const int row = q * 8 + j;
                r[j] = row < nrows ? _mm256_loadu_si256((const __m256i *)((const uint8_t *)w + (size_t)row * row_bytes +
                                                                          (size_t)p * 4))
                                   : _mm256_setzero_si256();
            }
            /* then r[i] holds pair p + i of the 8 rows, r[i + 4] pair p + i + 4 */
            cpu_transpose8x32(r);
            for (int i = 0; i < 4; i++) {
                _mm256_storeu_si256((__m256i *)(panel + (size_t)(p + i) * GEMM_F16_ROWS * 2 + q * 16), r[i]);
                _mm256_storeu_si256((__m256i *)(panel + (size_t)(p + i + 4) * GEMM_F16_ROWS * 2 + q * 16), r[i + 4]);
            }
        }
    }
    for (; p < np; p++)
        for (int r = 0; r < GEMM_F16_ROWS; r++)
            for (int h = 0; h < 2; h++) {
                uint16_t v = 0;
                if (r < nrows && 2 * p + h < k) memcpy(&v, (const uint8_t *)w + (size_t)r * row_bytes + (size_t)(2 * p + h) * 2, 2);
                panel[((size_t)p * GEMM_F16_ROWS + r) * 2 + h] = v;
            }
}

void gemm_bf16_round_group_avx512(const float *x, uint16_t *y, int64_t k, int nt) {
    const int64_t np = (k + 1) / 2;
    for (int t = 0; t < nt; t++) {
        const float *xt = x + (size_t)t * (size_t)k;
        int64_t e = 0;
        for (; e + 16 <= k; e += 16) {
            uint32_t v[8];
            quant_bf16_from_float_avx2(xt + e, v, 16);
            for (int i = 0; i < 8; i++) memcpy(y + ((e / 2 + i) * nt + t) * 2, &v[i], 4);
        }
        for (; e < 2 * np; e++) y[((e / 2) * nt + t) * 2 + (e & 1)] = e < k ? tl_fp32_to_bf16(xt[e]) : 0;
    }
}

static inline __m512bh bh_load(const uint16_t *p) {
    __m512i v = _mm512_load_si512((const void *)p);
    __m512bh b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static inline __m512bh bh_bcast(const uint16_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    __m512i b = _mm512_set1_epi32(v);
    __m512bh r;
    memcpy(&r, &b, sizeof r);
    return r;
}

static inline __attribute__((always_inline)) void bf16_tile(int nt, bool two, int64_t np, const uint16_t *panel,
                                                            const uint16_t *y, float *out, int64_t ldo, __mmask16 k0,
                                                            __mmask16 k1) {
    __m512 a[GEMM_F16_TOK], b[GEMM_F16_TOK];
    /* unrolled so that the accumulators live in registers */
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) a[t] = b[t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; p++) {
        const uint16_t *w = panel + (size_t)p * GEMM_F16_ROWS * 2;
        const __m512bh w0 = bh_load(w);
        const __m512bh w1 = two ? bh_load(w + 32) : w0;
        const uint16_t *yp = y + (size_t)p * (size_t)nt * 2;
#pragma GCC unroll 12
        for (int t = 0; t < nt; t++) {
            const __m512bh v = bh_bcast(yp + 2 * t);
            a[t] = _mm512_dpbf16_ps(a[t], w0, v);
            if (two) b[t] = _mm512_dpbf16_ps(b[t], w1, v);
        }
    }
#pragma GCC unroll 12
    for (int t = 0; t < nt; t++) {
        _mm512_mask_storeu_ps(out + t * ldo, k0, a[t]);
        if (two) _mm512_mask_storeu_ps(out + t * ldo + 16, k1, b[t]);
    }
}

#define BF16_TILE_CASES(TWO)                                                                                           \
    switch (nt) {                                                                                                      \
    case 1: bf16_tile(1, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 2: bf16_tile(2, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 3: bf16_tile(3, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 4: bf16_tile(4, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 5: bf16_tile(5, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 6: bf16_tile(6, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 7: bf16_tile(7, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 8: bf16_tile(8, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 9: bf16_tile(9, TWO, np, panel, y, out, ldo, k0, k1); break;                                                 \
    case 10: bf16_tile(10, TWO, np, panel, y, out, ldo, k0, k1); break;                                               \
    case 11: bf16_tile(11, TWO, np, panel, y, out, ldo, k0, k1); break;                                               \
    default: bf16_tile(12, TWO, np, panel, y, out, ldo, k0, k1); break;                                               \
    }

void gemm_bf16_panel_run_avx512(int64_t k, const uint16_t *panel, const uint16_t *y, int nt, int nrows, float *out,
                                int64_t ldo) {
    const int64_t np = (k + 1) / 2;
    const __mmask16 k0 = (__mmask16)(nrows >= 16 ? 0xFFFF : (1u << nrows) - 1);
    const __mmask16 k1 = (__mmask16)(nrows >= 32 ? 0xFFFF : nrows > 16 ? (1u << (nrows - 16)) - 1 : 0);
    if (nrows > 16) {
        BF16_TILE_CASES(true)
    } else {
        BF16_TILE_CASES(false)
    }
}
