/* AVX-512 VNNI bodies of the one-token kernels over 4 weight rows (see
 * gemm.h, gemm_4x1_fn), for Q8_0, Q4_0, Q4_1 and IQ4_NL.
 *
 * Rows sit in the vector lanes: a 512-bit vector holds 16 bytes of each of
 * the 4 rows, one row per 128-bit lane, and the token's matching 16
 * activation bytes, broadcast to every lane, meet them in one vpdpbusd. So
 * the activation block is loaded once for 4 rows, each vpdpbusd does useful
 * work in every lane, and the 4 rows' block sums are converted and scaled by
 * one FMA; a row's 4 lanes are added once, at the end. The weights are read
 * as stored (no repacking): 4 streams of consecutive rows.
 *
 * vpdpbusd takes one unsigned operand, so every weight becomes unsigned
 * bytes u = q + c (Q4_0: the nibble, c = 8; Q8_0 and IQ4_NL's codebook
 * values: q ^ 0x80, c = 128; Q4_1's nibble has no offset) and the offset
 * comes back as c * s_y per block from the table (s_y = d_y * sum(y), a
 * quarter of it in each of a row's 4 lanes). Q4_1 adds its min m_w * s_y.
 * Each block's 4 fp16 scales are read beside its values (a gather stalled
 * the loop on its slowest line). */
#include <immintrin.h>
#include <stddef.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_rows_avx512.h"
#include "quant/quant_internal.h"

enum { R_Q8_0, R_Q4_0, R_Q4_1, R_IQ4_NL };

/* The 4 rows' integer sums of block b (at byte b of each row): 4 int32
 * lanes per row adding up to sum(u * y) over the block's 32 values. */
static inline __attribute__((always_inline)) __m512i r_block(int f, const uint8_t *b, size_t rb, const uint8_t *yq,
                                                               __m512i table) {
    const __m512i ya = gr_bcast16(yq), yb = gr_bcast16(yq + 16), z = _mm512_setzero_si512();
    if (f == R_Q8_0) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        const __m512i a = _mm512_xor_si512(gr_rows16(b, rb, offsetof(blk_q8_0, qs)), flip);
        const __m512i c = _mm512_xor_si512(gr_rows16(b, rb, offsetof(blk_q8_0, qs) + 16), flip);
        return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, a, ya), c, yb);
    }
    const size_t qo = f == R_Q4_1 ? offsetof(blk_q4_1, qs) : offsetof(blk_q4_0, qs);
    const __m512i w = gr_rows16(b, rb, qo), m4 = _mm512_set1_epi8(0x0F);
    __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
    if (f == R_IQ4_NL) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        lo = _mm512_xor_si512(_mm512_shuffle_epi8(table, lo), flip);
        hi = _mm512_xor_si512(_mm512_shuffle_epi8(table, hi), flip);
    }
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, lo, ya), hi, yb);
}

static inline __attribute__((always_inline)) void r_4x1(int f, int64_t n, float *s, const void *vw, size_t rb,
                                                        const uint8_t *y, const float *ds1) {
    const size_t ws = f == R_Q8_0 ? sizeof(blk_q8_0) : f == R_Q4_1 ? sizeof(blk_q4_1) : sizeof(blk_q4_0);
    const size_t ys = f == R_Q4_1 ? sizeof(blk_q8_1) : sizeof(blk_q8_0);
    const size_t yo = f == R_Q4_1 ? offsetof(blk_q8_1, qs) : offsetof(blk_q8_0, qs);
    /* the offset c per lane (a quarter of c: 4 lanes per row) */
    const float off = f == R_Q4_0 ? -2.0f : f == R_Q4_1 ? 0.25f : -32.0f;
    const __m512i table = f == R_IQ4_NL ? _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_iq4nl_values))
                                        : _mm512_setzero_si512();
    const uint8_t *w = vw;
    const int64_t nb = n / QK;
    __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + (size_t)i * ws;
        /* the next 4 rows, as one stream: the 4 rows' interleaved reads
         * leave the hardware prefetcher behind */
        const char *nx = (const char *)w + 4 * rb + (size_t)i * 4 * ws;
        _mm_prefetch(nx, _MM_HINT_T0);
        _mm_prefetch(nx + 64, _MM_HINT_T0);
        const __m512 p = _mm512_cvtepi32_ps(r_block(f, b, rb, y + (size_t)i * ys + yo, table));
        const __m512 dy = _mm512_set1_ps(ds1[2 * i]), sy = _mm512_set1_ps(off * ds1[2 * i + 1]);
        const __m512 dw = gr_f16x4(b, rb, 0);
        if (f == R_Q4_1) {
            acc = _mm512_fmadd_ps(_mm512_mul_ps(p, dy), dw, acc);
            accm = _mm512_fmadd_ps(sy, gr_f16x4(b, rb, offsetof(blk_q4_1, m)), accm);
        } else {
            acc = _mm512_fmadd_ps(_mm512_fmadd_ps(p, dy, sy), dw, acc);
        }
    }
    if (f == R_Q4_1) acc = _mm512_add_ps(acc, accm);
    gr_store4(s, acc);
}

void gemm_q8_0_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1) {
    r_4x1(R_Q8_0, n, s, w, rb, y, ds1);
}
void gemm_q4_0_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1) {
    r_4x1(R_Q4_0, n, s, w, rb, y, ds1);
}
void gemm_q4_1_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1) {
    r_4x1(R_Q4_1, n, s, w, rb, y, ds1);
}
void gemm_iq4_nl_4x1_avx512(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1) {
    r_4x1(R_IQ4_NL, n, s, w, rb, y, ds1);
}
