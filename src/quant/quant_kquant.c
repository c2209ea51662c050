/* quant/quant_kquant: scalar reference kernels for the 256-element
 * super-block types Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and the activation
 * type Q8_K they are dotted with.
 *
 * Dequantizers and dots follow the GGUF layouts exactly (dequantization is
 * checked bit for bit against the gguf package). Q8_K's quantizer is the
 * reference engine's (d = max/-127 from the signed largest value, round to
 * nearest even), because it shapes every K-quant dot's result. The weight
 * quantizers are our own (the reference engine's iterative searches are not
 * reproduced): per sub-block a least-squares fit over a small grid of
 * candidate scales, then the sub-block scales quantized against the
 * super-block's fp16 scale, then the values requantized with the scales as
 * stored. Their error is checked against bounds in tests/test_quant.c.
 * Dots: per super-block exact integer sums, then float scaling and float
 * accumulation in block order (the AVX2 twins compute the same integers, so
 * they agree bit for bit). Calls: base/fp16. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

#define H2F tl_fp16_to_fp32
#define F2H tl_fp32_to_fp16

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------ Q8_K */

void quant_q8_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q8_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int j = 0; j < QK_K; j++) dst[j] = b[i].d * (float)b[i].qs[j];
}

void quant_q8_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            float a = fabsf(src[j]);
            if (a > amax) {
                amax = a;
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            /* clamp: no effect on finite input, defines inf/NaN like SIMD */
            float v = fminf(fmaxf(iscale * src[j], -127.0f), 127.0f);
            b[i].qs[j] = (int8_t)quant_round_even(v);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ------------------------------------------------- sub-block fitting */

/* x ~= s * q - m with q in 0..nmax, m >= 0 (the K-quant min is subtracted):
 * least squares over candidate step counts nmax-1 .. nmax+1. Returns s. */
static float fit_asym(const float *x, int n, int nmax, float *m_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (lo > 0.0f) lo = 0.0f;
    if (hi <= lo) {
        *m_out = -lo;
        return 0.0f;
    }
    float best_s = (hi - lo) / (float)nmax, best_b = lo, best_err = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = ((float)nmax + 0.1f * (float)t) / (hi - lo);
        double sq = 0, sqq = 0, sx = 0, sxq = 0;
        int q[QK_K];
        for (int i = 0; i < n; i++) {
            q[i] = clampi((int)lrintf((x[i] - lo) * iscale), 0, nmax);
            sq += q[i];
            sqq += (double)q[i] * q[i];
            sx += x[i];
            sxq += (double)x[i] * q[i];
        }
        double det = n * sqq - sq * sq;
        if (det <= 0) continue;
        double s = (n * sxq - sq * sx) / det;
        double b = (sqq * sx - sq * sxq) / det;
        if (b > 0) { /* the offset must be <= 0: refit the scale alone */
            b = 0;
            s = sqq > 0 ? sxq / sqq : 0;
        }
        if (s <= 0) continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            /* evaluate with nearest q for this (s, b), as the final pass will */
            int qq = clampi((int)lrint((x[i] - b) / s), 0, nmax);
            double e = s * qq + b - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = (float)err;
            best_s = (float)s;
            best_b = (float)b;
        }
    }
    *m_out = -best_b;
    return best_s;
}

/* x ~= s * q with q in -nneg..npos; s is signed (the largest magnitude maps
 * to the -nneg side, which has the extra level). Returns s. */
static float fit_sym(const float *x, int n, int nneg, int npos) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax == 0.0f) return 0.0f;
    float best_s = max / -(float)nneg, best_err = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = -((float)nneg + 0.1f * (float)t) / max;
        double sxq = 0, sqq = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi((int)lrintf(x[i] * iscale), -nneg, npos);
            sxq += (double)x[i] * q;
            sqq += (double)q * q;
        }
        if (sqq <= 0) continue;
        double s = sxq / sqq, err = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi((int)lrint(x[i] / s), -nneg, npos);
            double e = s * q - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = (float)err;
            best_s = (float)s;
        }
    }
    return best_s;
}

/* quantize sub-block scales s[0..n) >= 0 to 0..L against d = max/L (fp16) */
static uint16_t quant_scales_unsigned(const float *s, int n, int L, int *ls) {
    float mx = 0.0f;
    for (int j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    uint16_t dh = F2H(mx / (float)L);
    float d = H2F(dh);
    for (int j = 0; j < n; j++) ls[j] = d > 0.0f ? clampi((int)lrintf(s[j] / d), 0, L) : 0;
    return dh;
}

/* signed scales to lo..hi against d = (largest-magnitude scale) / lo */
static uint16_t quant_scales_signed(const float *s, int n, int lo, int hi, int *ls) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(s[j]) > amax) {
            amax = fabsf(s[j]);
            max = s[j];
        }
    uint16_t dh = F2H(max / (float)lo);
    float d = H2F(dh);
    for (int j = 0; j < n; j++) ls[j] = d != 0.0f ? clampi((int)lrintf(s[j] / d), lo, hi) : 0;
    return dh;
}

static inline int q_asym(float x, float D, float M, int nmax) {
    return D > 0.0f ? clampi((int)lrintf((x + M) / D), 0, nmax) : 0;
}

static inline int q_sym(float x, float D, int lo, int hi) {
    return D != 0.0f ? clampi((int)lrintf(x / D), lo, hi) : 0;
}

/* ------------------------------------------------------------------ Q2_K */
/* element e = 128h + 32i + k: 2 bits at qs[32h + k] >> 2i; sub-block e/16 */

void quant_q2_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q2_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, sh = 2 * ((e % 128) / 32), k = e % 32;
            const uint8_t sc = b[i].scales[e / 16];
            const int q = (b[i].qs[32 * h + k] >> sh) & 3;
            dst[e] = (d * (float)(sc & 0xF)) * (float)q - dmin * (float)(sc >> 4);
        }
    }
}

void quant_q2_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q2_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float s[16], m[16];
        int ls[16], lm[16];
        for (int g = 0; g < 16; g++) s[g] = fit_asym(src + 16 * g, 16, 3, &m[g]);
        b[i].d = quant_scales_unsigned(s, 16, 15, ls);
        b[i].dmin = quant_scales_unsigned(m, 16, 15, lm);
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int g = 0; g < 16; g++) b[i].scales[g] = (uint8_t)(ls[g] | lm[g] << 4);
        for (int e = 0; e < QK_K; e++) {
            const int g = e / 16;
            int q = q_asym(src[e], d * (float)ls[g], dmin * (float)lm[g], 3);
            b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
        }
    }
}

/* ------------------------------------------------------------------ Q3_K */
/* 16 6-bit scales (biased by 32): low nibble in scales[j%8] (high nibble for
 * j >= 8), top 2 bits in scales[8 + j%4] at bit 2*(j/4). Element e: low 2
 * bits as Q2_K, third bit = hmask[e%32] bit e/32; set means no -4. */

static inline int q3k_scale(const uint8_t *sc, int j) {
    int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static inline int q3k_value(const blk_q3_k *b, int e) {
    const int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    return ((b->hmask[e % 32] >> (e / 32)) & 1) ? q : q - 4;
}

void quant_q3_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q3_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d);
        for (int e = 0; e < QK_K; e++)
            dst[e] = (d * (float)q3k_scale(b[i].scales, e / 16)) * (float)q3k_value(&b[i], e);
    }
}

void quant_q3_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q3_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float s[16];
        int ls[16];
        for (int g = 0; g < 16; g++) s[g] = fit_sym(src + 16 * g, 16, 4, 3);
        b[i].d = quant_scales_signed(s, 16, -32, 31, ls);
        const float d = H2F(b[i].d);
        memset(b[i].scales, 0, sizeof b[i].scales);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int j = 0; j < 16; j++) {
            const int v = ls[j] + 32;
            b[i].scales[j % 8] |= (uint8_t)((v & 0xF) << (j < 8 ? 0 : 4));
            b[i].scales[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
        }
        for (int e = 0; e < QK_K; e++) {
            const int q = q_sym(src[e], d * (float)ls[e / 16], -4, 3) + 4; /* 0..7 */
            b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)((q & 3) << (2 * ((e % 128) / 32)));
            b[i].hmask[e % 32] |= (uint8_t)((q >> 2) << (e / 32));
        }
    }
}

/* ------------------------------------------------------------ Q4_K, Q5_K */
/* 8 sub-blocks of 32; sub-block j's 4 low bits: qs[32*(j/2) + k], low
 * nibble for even j, high for odd. Q5_K's 5th bit: qh[k] bit j. */

static void k4_pack_scales(uint8_t *s, const int *sc, const int *m) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void quant_q4_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q4_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(b[i].scales, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = b[i].qs + 32 * (j / 2);
            for (int k = 0; k < 32; k++)
                dst[32 * j + k] = dl * (float)((j & 1) ? q[k] >> 4 : q[k] & 0xF) - ml;
        }
    }
}

static void k45_quantize(const float *src, uint16_t *dh, uint16_t *dminh, uint8_t *scales, int nmax,
                         int *q /* [256] */) {
    float s[8], m[8];
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) s[j] = fit_asym(src + 32 * j, 32, nmax, &m[j]);
    *dh = quant_scales_unsigned(s, 8, 63, ls);
    *dminh = quant_scales_unsigned(m, 8, 63, lm);
    k4_pack_scales(scales, ls, lm);
    const float d = H2F(*dh), dmin = H2F(*dminh);
    for (int e = 0; e < QK_K; e++) q[e] = q_asym(src[e], d * (float)ls[e / 32], dmin * (float)lm[e / 32], nmax);
}

void quant_q4_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q4_k *b = dst;
    int q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        k45_quantize(src, &b[i].d, &b[i].dmin, b[i].scales, 15, q);
        for (int p = 0; p < 4; p++)
            for (int k = 0; k < 32; k++)
                b[i].qs[32 * p + k] = (uint8_t)(q[64 * p + k] | q[64 * p + 32 + k] << 4);
    }
}

void quant_q5_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q5_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(b[i].scales, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = b[i].qs + 32 * (j / 2);
            for (int k = 0; k < 32; k++) {
                int v = ((j & 1) ? q[k] >> 4 : q[k] & 0xF) | ((b[i].qh[k] >> j) & 1) << 4;
                dst[32 * j + k] = dl * (float)v - ml;
            }
        }
    }
}

void quant_q5_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q5_k *b = dst;
    int q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        k45_quantize(src, &b[i].d, &b[i].dmin, b[i].scales, 31, q);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int p = 0; p < 4; p++)
            for (int k = 0; k < 32; k++)
                b[i].qs[32 * p + k] = (uint8_t)((q[64 * p + k] & 0xF) | (q[64 * p + 32 + k] & 0xF) << 4);
        for (int e = 0; e < QK_K; e++) b[i].qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
    }
}

/* ------------------------------------------------------------------ Q6_K */
/* element e = 128h + 32i + k: low 4 bits in ql[64h + 32(i&1) + k] (low
 * nibble for i < 2, high for i >= 2), top 2 bits in qh[32h + k] >> 2i;
 * value q - 32, scale int8 per 16 elements */

static inline int q6k_value(const blk_q6_k *b, int e) {
    const int h = e / 128, i = (e % 128) / 32, k = e % 32;
    const uint8_t l = b->ql[64 * h + 32 * (i & 1) + k];
    const int lo = i < 2 ? l & 0xF : l >> 4;
    return (lo | ((b->qh[32 * h + k] >> (2 * i)) & 3) << 4) - 32;
}

void quant_q6_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q6_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d);
        for (int e = 0; e < QK_K; e++)
            dst[e] = (d * (float)b[i].scales[e / 16]) * (float)q6k_value(&b[i], e);
    }
}

void quant_q6_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q6_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float s[16];
        int ls[16];
        for (int g = 0; g < 16; g++) s[g] = fit_sym(src + 16 * g, 16, 32, 31);
        b[i].d = quant_scales_signed(s, 16, -128, 127, ls);
        const float d = H2F(b[i].d);
        for (int g = 0; g < 16; g++) b[i].scales[g] = (int8_t)ls[g];
        memset(b[i].ql, 0, sizeof b[i].ql);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK_K; e++) {
            const int q = q_sym(src[e], d * (float)ls[e / 16], -32, 31) + 32;
            const int h = e / 128, ii = (e % 128) / 32, k = e % 32;
            b[i].ql[64 * h + 32 * (ii & 1) + k] |= (uint8_t)((q & 0xF) << (ii < 2 ? 0 : 4));
            b[i].qh[32 * h + k] |= (uint8_t)((q >> 4) << (2 * ii));
        }
    }
}

/* ---------------------------------------------------------------- IQ4_XS */
/* 8 sub-blocks of 32 with 6-bit scales (biased by 32): low 4 bits in
 * scales_l[j/2] (nibble j%2), top 2 in scales_h bits 2j; values from the
 * IQ4_NL codebook, sub-block j's element k < 16 in the low nibble of
 * qs[16j + k], element k + 16 in its high nibble */

static inline int iq4xs_scale(const blk_iq4_xs *b, int j) {
    int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    int hi = (b->scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

void quant_iq4_xs_to_float(const void *src, float *dst, int64_t n) {
    const blk_iq4_xs *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = H2F(b[i].d);
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)iq4xs_scale(&b[i], j);
            const uint8_t *q = b[i].qs + 16 * j;
            for (int k = 0; k < 16; k++) {
                dst[32 * j + k] = dl * (float)quant_iq4nl_values[q[k] & 0xF];
                dst[32 * j + k + 16] = dl * (float)quant_iq4nl_values[q[k] >> 4];
            }
        }
    }
}

void quant_iq4_xs_from_float(const float *src, void *dst, int64_t n) {
    blk_iq4_xs *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float s[8];
        int ls[8];
        uint8_t idx[32];
        for (int j = 0; j < 8; j++) s[j] = quant_iq4nl_block(src + 32 * j, 32, idx);
        b[i].d = quant_scales_signed(s, 8, -32, 31, ls);
        const float d = H2F(b[i].d);
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int j = 0; j < 8; j++) {
            const int v = ls[j] + 32;
            b[i].scales_l[j / 2] |= (uint8_t)((v & 0xF) << (4 * (j % 2)));
            b[i].scales_h |= (uint16_t)((v >> 4) << (2 * j));
            const float dl = d * (float)ls[j];
            const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int k = 0; k < 32; k++)
                idx[k] = dl != 0.0f ? (uint8_t)quant_iq4nl_nearest(src[32 * j + k] * id) : 8;
            for (int k = 0; k < 16; k++) b[i].qs[16 * j + k] = (uint8_t)(idx[k] | idx[k + 16] << 4);
        }
    }
}

/* ------------------------------------------------------------------ dots */

void quant_dot_q2_k_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q2_k *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, summ = 0;
        for (int g = 0; g < 16; g++) summ += (x[i].scales[g] >> 4) * y[i].bsums[g];
        for (int e = 0; e < QK_K; e++) {
            const int q = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            sumi += (x[i].scales[e / 16] & 0xF) * q * y[i].qs[e];
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi - (H2F(x[i].dmin) * y[i].d) * (float)summ;
    }
    *s = sumf;
}

void quant_dot_q3_k_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q3_k *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int g = 0; g < 16; g++) {
            int sg = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) sg += q3k_value(&x[i], e) * y[i].qs[e];
            sumi += q3k_scale(x[i].scales, g) * sg;
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi;
    }
    *s = sumf;
}

void quant_dot_q4_k_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_k *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(x[i].scales, j, &sc, &m);
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            const int8_t *a = y[i].qs + 32 * j;
            int sj = 0;
            for (int k = 0; k < 32; k++) sj += ((j & 1) ? q[k] >> 4 : q[k] & 0xF) * a[k];
            sumi += sc * sj;
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi - (H2F(x[i].dmin) * y[i].d) * (float)summ;
    }
    *s = sumf;
}

void quant_dot_q5_k_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_k *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(x[i].scales, j, &sc, &m);
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            const uint8_t *q = x[i].qs + 32 * (j / 2);
            const int8_t *a = y[i].qs + 32 * j;
            int sj = 0;
            for (int k = 0; k < 32; k++)
                sj += (((j & 1) ? q[k] >> 4 : q[k] & 0xF) | ((x[i].qh[k] >> j) & 1) << 4) * a[k];
            sumi += sc * sj;
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi - (H2F(x[i].dmin) * y[i].d) * (float)summ;
    }
    *s = sumf;
}

void quant_dot_q6_k_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q6_k *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int g = 0; g < 16; g++) {
            int sg = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) sg += q6k_value(&x[i], e) * y[i].qs[e];
            sumi += x[i].scales[g] * sg;
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi;
    }
    *s = sumf;
}

void quant_dot_iq4_xs_q8_k(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_xs *x = vx;
    const blk_q8_k *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = x[i].qs + 16 * j;
            const int8_t *a = y[i].qs + 32 * j;
            int sj = 0;
            for (int k = 0; k < 16; k++)
                sj += quant_iq4nl_values[q[k] & 0xF] * a[k] + quant_iq4nl_values[q[k] >> 4] * a[k + 16];
            sumi += iq4xs_scale(&x[i], j) * sj;
        }
        sumf += (H2F(x[i].d) * y[i].d) * (float)sumi;
    }
    *s = sumf;
}
