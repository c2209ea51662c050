/* AVX-512 VNNI bodies of the few-token kernels (2..GEMM_FEW_MAX tokens; see
 * gemm.h).
 *
 * Tokens sit in the vector lanes: a 512-bit vector holds 4 tokens x 4 int32
 * lanes, and a weight block's 16-byte half, broadcast to all four 128-bit
 * lanes, meets the 4 tokens' same 16 activation bytes in one vpdpbusd. So a
 * block is unpacked once per row (no packing into panels, which only pays
 * off over many tokens) and serves every token group, and one convert and
 * one FMA scale 4 tokens' block sums at once.
 *
 * The group table (gemm_few_prep_avx512) holds, per block and 4-token
 * group, 4 vectors: the tokens' element bytes 0..15 and 16..31 side by
 * side, their d_y (each repeated in its token's 4 lanes), and either
 * -128 * the lane's activation sum (Q8_0 activations: weights that are
 * unsigned as stored plus an offset start their sums there, shifted to
 * their offset) or s_y / 4 (Q8_1: the min term m_w * s_y, whose 4 copies
 * per token add up in the final reduction). Tokens past m are zero. */
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "quant/quant_internal.h"

#define FEW_SLOT GEMM_FEW_SLOT

void gemm_few_prep_avx512(tl_type at, int64_t k, const uint8_t *y, size_t ys, int nt, int ng, int g, uint8_t *tab) {
    const int64_t nb = k / QK;
    const bool q81 = at == TL_TYPE_Q8_1;
    const size_t bs = q81 ? sizeof(blk_q8_1) : sizeof(blk_q8_0), qo = q81 ? offsetof(blk_q8_1, qs) : offsetof(blk_q8_0, qs);
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *s = tab + ((size_t)i * (size_t)ng + (size_t)g) * FEW_SLOT;
        float d[4] = {0, 0, 0, 0}, sy[4] = {0, 0, 0, 0};
        memset(s, 0, 128);
        for (int t = 0; t < nt; t++) {
            const uint8_t *b = y + (size_t)t * ys + (size_t)i * bs;
            uint16_t h[2];
            memcpy(h, b, 4);
            memcpy(s + 16 * t, b + qo, 16);
            memcpy(s + 64 + 16 * t, b + qo + 16, 16);
            d[t] = _cvtsh_ss(h[0]);
            sy[t] = q81 ? 0.25f * _cvtsh_ss(h[1]) : 0.0f;
        }
        _mm512_store_ps(s + 128, _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_loadu_ps(d))));
        if (q81) {
            _mm512_store_ps(s + 192, _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_loadu_ps(sy))));
        } else {
            const __m512i one = _mm512_set1_epi8(1);
            __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, _mm512_load_si512(s));
            sum = _mm512_dpbusd_epi32(sum, one, _mm512_load_si512(s + 64));
            _mm512_store_si512(s + 192, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
        }
    }
}

/* the weight types, by how their block becomes unsigned bytes */
enum { F_Q8_0, F_IQ4_NL, F_Q4_0, F_Q5_0, F_Q4_1, F_Q5_1 };

static inline __m512i f_bcast16(const uint8_t *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

/* element bytes 0..15 (w0) and 16..31 (w1) of block i of a row, unsigned
 * (+128 for the signed types, as the table's offsets expect), in all 4
 * 128-bit lanes; d_w broadcast, and (Q4_1, Q5_1) m_w as stored (fp16) */
static inline __attribute__((always_inline)) void f_block(int ty, const uint8_t *row, int64_t i, __m512i *w0,
                                                          __m512i *w1, __m512 *dw, uint16_t *mw) {
    const __m512i lo = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8((char)0x80);
    uint16_t h[2];
    uint32_t qh = 0;
    const uint8_t *qs;
    switch (ty) {
    case F_Q8_0: {
        const blk_q8_0 *b = (const blk_q8_0 *)row + i;
        *dw = _mm512_set1_ps(_cvtsh_ss(b->d));
        *w0 = _mm512_xor_si512(f_bcast16((const uint8_t *)b->qs), top);
        *w1 = _mm512_xor_si512(f_bcast16((const uint8_t *)b->qs + 16), top);
        return;
    }
    case F_Q4_1: case F_Q5_1:
        if (ty == F_Q4_1) {
            const blk_q4_1 *b = (const blk_q4_1 *)row + i;
            memcpy(h, b, 4);
            qs = b->qs;
        } else {
            const blk_q5_1 *b = (const blk_q5_1 *)row + i;
            memcpy(h, b, 4);
            memcpy(&qh, b->qh, 4);
            qs = b->qs;
        }
        *mw = h[1];
        break;
    case F_Q5_0: {
        const blk_q5_0 *b = (const blk_q5_0 *)row + i;
        memcpy(h, b, 2);
        memcpy(&qh, b->qh, 4);
        qs = b->qs;
        break;
    }
    default: { /* Q4_0, IQ4_NL: same block layout */
        const blk_q4_0 *b = (const blk_q4_0 *)row + i;
        memcpy(h, b, 2);
        qs = b->qs;
        break;
    }
    }
    *dw = _mm512_set1_ps(_cvtsh_ss(h[0]));
    const __m512i q = f_bcast16(qs);
    __m512i a = _mm512_and_si512(q, lo), c = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo);
    if (ty == F_Q5_0 || ty == F_Q5_1) {
        /* element j's fifth bit is bit j of qh: 16 bits per half, repeated per lane */
        const __m512i x10 = _mm512_set1_epi8(0x10);
        a = _mm512_mask_add_epi8(a, (__mmask64)((uint64_t)(qh & 0xFFFF) * 0x0001000100010001ull), a, x10);
        c = _mm512_mask_add_epi8(c, (__mmask64)((uint64_t)(qh >> 16) * 0x0001000100010001ull), c, x10);
    }
    if (ty == F_IQ4_NL) {
        const __m512i lut = f_bcast16((const uint8_t *)quant_iq4nl_values);
        a = _mm512_xor_si512(_mm512_shuffle_epi8(lut, a), top);
        c = _mm512_xor_si512(_mm512_shuffle_epi8(lut, c), top);
    }
    *w0 = a, *w1 = c;
}

static inline size_t f_bytes(int ty) {
    switch (ty) {
    case F_Q8_0: return sizeof(blk_q8_0);
    case F_Q4_1: return sizeof(blk_q4_1);
    case F_Q5_0: return sizeof(blk_q5_0);
    case F_Q5_1: return sizeof(blk_q5_1);
    default: return sizeof(blk_q4_0);
    }
}

#define FEW_PF_ROWS 8

/* blocks per pass: the min types keep a pass's m_w of 16 rows on the stack */
#define FEW_CHUNK 64

/* NR rows (1 or 2) against NG token groups over blocks [i0, i1):
 * acc[r * NG + g]; the min types' m_w of row r and block i go to
 * msc[(i - i0) * 16 + r] */
static inline __attribute__((always_inline)) void f_rows(int ty, int ng, int nr, int64_t i0, int64_t i1,
                                                         const uint8_t *w, size_t rb, const uint8_t *tab, __m512 *acc,
                                                         uint16_t *msc) {
    /* Q4_0 / Q5_0 offsets are 8 / 16 (the table holds -128 * sum) */
    const bool sgn = ty != F_Q4_1 && ty != F_Q5_1;
    const int sh = ty == F_Q4_0 ? 4 : ty == F_Q5_0 ? 3 : 0;
#pragma GCC unroll 8
    for (int q = 0; q < nr * ng; q++) acc[q] = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i++) {
        __m512i w0[2], w1[2];
        __m512 dw[2];
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            /* the rows FEW_PF_ROWS ahead: the weights stream from memory once
             * per matmul, and the hardware prefetcher alone leaves these
             * loads waiting */
            __builtin_prefetch(w + (size_t)(r + FEW_PF_ROWS) * rb + (size_t)i * f_bytes(ty), 0, 0);
            f_block(ty, w + (size_t)r * rb, i, &w0[r], &w1[r], &dw[r], &msc[(i - i0) * 16 + r]);
        }
#pragma GCC unroll 4
        for (int g = 0; g < ng; g++) {
            const uint8_t *s = tab + ((size_t)i * (size_t)ng + (size_t)g) * FEW_SLOT;
            const __m512i y0 = _mm512_load_si512(s), y1 = _mm512_load_si512(s + 64);
            const __m512 dy = _mm512_load_ps(s + 128);
            const __m512i init = !sgn ? _mm512_setzero_si512() : sh ? _mm512_srai_epi32(_mm512_load_si512(s + 192), sh)
                                                                    : _mm512_load_si512(s + 192);
#pragma GCC unroll 2
            for (int r = 0; r < nr; r++) {
                __m512i a = _mm512_dpbusd_epi32(init, w0[r], y0);
                a = _mm512_dpbusd_epi32(a, w1[r], y1);
                acc[r * ng + g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(dw[r], dy), acc[r * ng + g]);
            }
        }
    }
}

/* add each token's 4 lanes: token q of the group in lane 4q */
static inline __m512 f_reduce(__m512 a) {
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4E));
    return _mm512_add_ps(a, _mm512_permute_ps(a, 0xB1));
}

/* acc's tokens into out (added unless first) for row r */
static inline __attribute__((always_inline)) void f_out(__m512 acc, int g, int m, int r, bool first, float *out,
                                                        int64_t ldo) {
    float o[16];
    _mm512_storeu_ps(o, f_reduce(acc));
    for (int t = 0; t < 4 && 4 * g + t < m; t++) {
        float *p = &out[(4 * g + t) * ldo + r];
        *p = first ? o[4 * t] : *p + o[4 * t];
    }
}

/* The min term m_w * s_y with the 16 rows in the lanes: per block one
 * convert of their m_w and one FMA per token (instead of a broadcast and
 * an FMA per row and group in f_rows). s_y / 4 is lane 4q of the slot. */
static inline __attribute__((always_inline)) void f_min(int ng, int64_t i0, int64_t i1, const uint16_t *msc,
                                                        const uint8_t *tab, int nrows, int m, float *out, int64_t ldo) {
    __m512 acc[4 * GEMM_FEW_GROUPS];
#pragma GCC unroll 16
    for (int t = 0; t < 4 * ng; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i++) {
        const __m512 mv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(msc + (i - i0) * 16)));
        const uint8_t *s = tab + (size_t)i * (size_t)ng * FEW_SLOT + 192;
#pragma GCC unroll 16
        for (int t = 0; t < 4 * ng; t++)
            acc[t] = _mm512_fmadd_ps(mv, _mm512_set1_ps(*(const float *)(s + (t / 4) * FEW_SLOT + 16 * (t % 4))), acc[t]);
    }
    const __mmask16 keep = (__mmask16)((1u << nrows) - 1);
    for (int t = 0; t < m; t++) {
        float *p = out + t * ldo;
        _mm512_mask_storeu_ps(p, keep, _mm512_fmadd_ps(acc[t], _mm512_set1_ps(4.0f), _mm512_maskz_loadu_ps(keep, p)));
    }
}

/* up to 16 rows */
static inline __attribute__((always_inline)) void f_run(int ty, int ng, int64_t nb, const uint8_t *w, size_t rb,
                                                        int nrows, const uint8_t *tab, int m, float *out,
                                                        int64_t ldo) {
    const bool min = ty == F_Q4_1 || ty == F_Q5_1;
    uint16_t msc[FEW_CHUNK * 16];
    if (min && nrows < 16) memset(msc, 0, sizeof msc);
    for (int64_t i0 = 0; i0 < nb; i0 += FEW_CHUNK) {
        const int64_t i1 = i0 + FEW_CHUNK < nb ? i0 + FEW_CHUNK : nb;
        const bool first = i0 == 0;
        int r = 0;
        for (; r + 2 <= nrows; r += 2) {
            __m512 acc[2 * GEMM_FEW_GROUPS];
            f_rows(ty, ng, 2, i0, i1, w + (size_t)r * rb, rb, tab, acc, msc + r);
#pragma GCC unroll 8
            for (int q = 0; q < 2 * ng; q++) f_out(acc[q], q % ng, m, r + q / ng, first, out, ldo);
        }
        if (r < nrows) {
            __m512 acc[GEMM_FEW_GROUPS];
            f_rows(ty, ng, 1, i0, i1, w + (size_t)r * rb, rb, tab, acc, msc + r);
#pragma GCC unroll 4
            for (int g = 0; g < ng; g++) f_out(acc[g], g, m, r, first, out, ldo);
        }
        if (min) f_min(ng, i0, i1, msc, tab, nrows, m, out, ldo);
    }
}

/* one instance per type and group count, so every loop above unrolls */
#define F_NG(ty)                                                                                                       \
    switch (ng) {                                                                                                      \
    case 1: f_run(ty, 1, nb, w, rb, nrows, tab, m, out, ldo); break;                                                   \
    case 2: f_run(ty, 2, nb, w, rb, nrows, tab, m, out, ldo); break;                                                   \
    case 3: f_run(ty, 3, nb, w, rb, nrows, tab, m, out, ldo); break;                                                   \
    default: f_run(ty, 4, nb, w, rb, nrows, tab, m, out, ldo); break;                                                  \
    }

static void f_run16(tl_type t, int64_t nb, const uint8_t *w, size_t rb, int nrows, const uint8_t *tab, int m,
                    float *out, int64_t ldo) {
    const int ng = (m + 3) / 4;
    switch (t) {
    case TL_TYPE_Q8_0: F_NG(F_Q8_0); break;
    case TL_TYPE_IQ4_NL: F_NG(F_IQ4_NL); break;
    case TL_TYPE_Q4_0: F_NG(F_Q4_0); break;
    case TL_TYPE_Q5_0: F_NG(F_Q5_0); break;
    case TL_TYPE_Q4_1: F_NG(F_Q4_1); break;
    case TL_TYPE_Q5_1: F_NG(F_Q5_1); break;
    default: break;
    }
}

void gemm_few_run_avx512(tl_type t, int64_t k, const uint8_t *w, size_t rb, int nrows, const uint8_t *tab, int m,
                         float *out, int64_t ldo) {
    for (int r = 0; r < nrows; r += 16)
        f_run16(t, k / QK, w + (size_t)r * rb, rb, nrows - r < 16 ? nrows - r : 16, tab, m, out + r, ldo);
}
