/* quant/quant_legacy: scalar reference kernels for the 32-element block
 * types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL and MXFP4.
 *
 * Quantizers follow the GGUF reference rounding exactly (checked bit for bit
 * against the gguf PyPI package where it implements one): scale from the
 * block's extreme values, computed in float, its reciprocal taken before the
 * scale is rounded to fp16, 0 when the scale is 0. Dots form each block's
 * integer sum exactly and then accumulate sumi * (d_x * d_y) in float in
 * block order. Calls: base/fp16. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

const int8_t quant_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};
const int8_t quant_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float quant_e8m0_half(uint8_t e) {
    /* e < 2 gives a subnormal float: 2^(e-128) = 2^-149 * 2^(e+21) */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int quant_round_away(float x) { return (int)roundf(x); }

int quant_round_even(float x) { return (int)lrintf(x); }

#define H2F tl_fp16_to_fp32
#define F2H tl_fp32_to_fp16

static void block_min_max(const float *x, int n, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* ---- Q4_0: q in 0..15, x = d * (q - 8) ---- */

void quant_q4_0_to_float(const void *src, float *dst, int64_t n) {
    const blk_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)((b[i].qs[j] & 0xF) - 8);
            dst[j + QK / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

void quant_q4_0_from_float(const float *src, void *dst, int64_t n) {
    blk_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float d = quant_absmax_signed(src, QK) / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (int)(src[j] * id + 8.5f);
            int q1 = (int)(src[j + QK / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- Q4_1: q in 0..15, x = d * q + m ---- */

void quant_q4_1_to_float(const void *src, float *dst, int64_t n) {
    const blk_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d), m = H2F(b[i].m);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)(b[i].qs[j] & 0xF) + m;
            dst[j + QK / 2] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

void quant_q4_1_from_float(const float *src, void *dst, int64_t n) {
    blk_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float mn, mx;
        block_min_max(src, QK, &mn, &mx);
        float d = (mx - mn) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        b[i].m = F2H(mn);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (int)((src[j] - mn) * id + 0.5f);
            int q1 = (int)((src[j + QK / 2] - mn) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- Q5_0 / Q5_1: a 5th bit per element in qh (bit j = element j) ---- */

static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void store_qh(uint8_t qh[4], uint32_t v) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(v >> (8 * k));
}

static inline int q5_get(const uint8_t *qs, uint32_t qh, int j) {
    int lo = j < QK / 2 ? (qs[j] & 0xF) : (qs[j - QK / 2] >> 4);
    return lo | (int)((qh >> j) & 1) << 4;
}

void quant_q5_0_to_float(const void *src, float *dst, int64_t n) {
    const blk_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK; j++) dst[j] = d * (float)(q5_get(b[i].qs, qh, j) - 16);
    }
}

void quant_q5_0_from_float(const float *src, void *dst, int64_t n) {
    blk_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float d = quant_absmax_signed(src, QK) / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (int)(src[j] * id + 16.5f);
            int q1 = (int)(src[j + QK / 2] * id + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

void quant_q5_1_to_float(const void *src, float *dst, int64_t n) {
    const blk_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d), m = H2F(b[i].m);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK; j++) dst[j] = d * (float)q5_get(b[i].qs, qh, j) + m;
    }
}

void quant_q5_1_from_float(const float *src, void *dst, int64_t n) {
    blk_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float mn, mx;
        block_min_max(src, QK, &mn, &mx);
        float d = (mx - mn) / 31.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        b[i].m = F2H(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int q0 = (int)((src[j] - mn) * id + 0.5f);
            int q1 = (int)((src[j + QK / 2] - mn) * id + 0.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

/* ---- Q8_0 / Q8_1: d = amax/127, q = round-half-away(x/d) ----
 * Two rounding rules exist in the reference engine: its scalar quantizer
 * (weights, the gguf package) uses id = 1/d and rounds halves away from zero;
 * its SIMD activation quantizer uses id = 127/amax and rounds halves to even.
 * Both are kept: from_float is the first (files stay byte-identical), and
 * the *_act_ref twins are the second, the oracle for our AVX2 activation
 * quantizer, so activations round exactly as the reference engine's do. */

static float q8_block_rule(const float *x, int8_t *qs, int *sum, bool act) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) {
        float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f;
    float id = act ? (amax != 0.0f ? 127.0f / amax : 0.0f) : (d != 0.0f ? 1.0f / d : 0.0f);
    int s = 0;
    for (int j = 0; j < QK; j++) {
        /* the clamp changes nothing for finite input (|x * id| <= 127 up to
         * rounding) but makes inf/NaN/subnormal-scale input defined: NaN
         * goes to -127 exactly as the SIMD max/min sequence does */
        float v = fminf(fmaxf(x[j] * id, -127.0f), 127.0f);
        int q = act ? (int)nearbyintf(v) : quant_round_away(v); /* nearbyint: ties to even (default mode) */
        qs[j] = (int8_t)q;
        s += q;
    }
    *sum = s;
    return d;
}

static float q8_block(const float *x, int8_t *qs, int *sum) { return q8_block_rule(x, qs, sum, false); }

void quant_q8_0_to_float(const void *src, float *dst, int64_t n) {
    const blk_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d);
        for (int j = 0; j < QK; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void quant_q8_0_from_float(const float *src, void *dst, int64_t n) {
    blk_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK; i++, src += QK) b[i].d = F2H(q8_block(src, b[i].qs, &sum));
}

void quant_q8_1_to_float(const void *src, float *dst, int64_t n) {
    const blk_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d);
        for (int j = 0; j < QK; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void quant_q8_1_from_float(const float *src, void *dst, int64_t n) {
    blk_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        int sum;
        float d = q8_block(src, b[i].qs, &sum);
        b[i].d = F2H(d);
        b[i].s = F2H((float)sum * d);
    }
}

void quant_q8_0_act_from_float_ref(const float *src, void *dst, int64_t n) {
    blk_q8_0 *b = dst;
    int sum;
    for (int64_t i = 0; i < n / QK; i++, src += QK) b[i].d = F2H(q8_block_rule(src, b[i].qs, &sum, true));
}

void quant_q8_1_act_from_float_ref(const float *src, void *dst, int64_t n) {
    blk_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        int sum;
        float d = q8_block_rule(src, b[i].qs, &sum, true);
        b[i].d = F2H(d);
        b[i].s = F2H((float)sum * d);
    }
}

/* ---- IQ4_NL: x = d * values[q] with a fixed non-linear codebook ---- */

void quant_iq4_nl_to_float(const void *src, float *dst, int64_t n) {
    const blk_iq4_nl *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = H2F(b[i].d);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)quant_iq4nl_values[b[i].qs[j] & 0xF];
            dst[j + QK / 2] = d * (float)quant_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

/* nearest codebook entry to v (values are sorted ascending) */
int quant_iq4nl_nearest(float v) {
    if (v <= quant_iq4nl_values[0]) return 0;
    if (v >= quant_iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < quant_iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    return v - quant_iq4nl_values[lo] < quant_iq4nl_values[hi] - v ? lo : hi;
}

/* The reference engine's search (llama.cpp's IQ4 quantizer without an
 * importance matrix, 7 tries each way), float for float: weights x^2; the
 * largest magnitude onto the codebook's -127 end, then step counts
 * 127 - 7 .. 127 + 7, each pick of values refit by weighted least squares
 * and kept when it raises the gain sumqx^2 / sumq2. Returns d (0 for a
 * group below 1e-15, idx then all 8, the value 1); idx gets the first
 * pick (callers re-pick with the scale they store). n <= 32. */
float quant_iq4nl_block(const float *x, int n, uint8_t *idx) {
    float w[QK];
    if (n > QK) n = QK; /* callers pass groups of 32 */
    for (int j = 0; j < n; j++) w[j] = x[j] * x[j];
    const float max = quant_absmax_signed(x, n);
    if (fabsf(max) < 1e-15f) {
        memset(idx, 8, (size_t)n);
        return 0.0f;
    }
    const float v0 = (float)quant_iq4nl_values[0];
    float id = 1.0f / (-max / v0);
    float sqx = 0.0f, sq2 = 0.0f;
    for (int j = 0; j < n; j++) {
        const int l = quant_iq4nl_nearest(id * x[j]);
        const float q = (float)quant_iq4nl_values[l];
        idx[j] = (uint8_t)l;
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    float d = sqx / sq2, best = d * sqx;
    for (int t = -7; t <= 7; t++) {
        id = (float)(t + quant_iq4nl_values[0]) / max;
        sqx = sq2 = 0.0f;
        for (int j = 0; j < n; j++) {
            const float q = (float)quant_iq4nl_values[quant_iq4nl_nearest(id * x[j])];
            sqx += w[j] * q * x[j];
            sq2 += w[j] * q * q;
        }
        if (sq2 > 0.0f && sqx * sqx > best * sq2) {
            d = sqx / sq2;
            best = d * sqx;
        }
    }
    return d;
}

/* the values are re-picked with 1/d, d unrounded (only the stored one is fp16) */
void quant_iq4_nl_from_float(const float *src, void *dst, int64_t n) {
    blk_iq4_nl *b = dst;
    uint8_t idx[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        const float d = quant_iq4nl_block(src, QK, idx);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        for (int j = 0; j < QK; j++) idx[j] = (uint8_t)quant_iq4nl_nearest(id * src[j]);
        for (int j = 0; j < QK / 2; j++) b[i].qs[j] = (uint8_t)(idx[j] | idx[j + QK / 2] << 4);
    }
}

/* ---- MXFP4: x = 2^(e-127) * e2m1[q]; quantizer as the gguf package's ---- */

void quant_mxfp4_to_float(const void *src, float *dst, int64_t n) {
    const blk_mxfp4 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        float d = quant_e8m0_half(b[i].e);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)quant_mxfp4_values[b[i].qs[j] & 0xF];
            dst[j + QK / 2] = d * (float)quant_mxfp4_values[b[i].qs[j] >> 4];
        }
    }
}

void quant_mxfp4_from_float(const float *src, void *dst, int64_t n) {
    blk_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) amax = fabsf(src[j]) > amax ? fabsf(src[j]) : amax;
        /* shared exponent: largest E2M1 magnitude is 6 = 1.5 * 2^2 */
        uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2.0f + 127.0f) : 0;
        float d = quant_e8m0_half(e);
        uint8_t idx[QK];
        for (int j = 0; j < QK; j++) {
            int best = 0;
            float best_err = fabsf(d * (float)quant_mxfp4_values[0] - src[j]);
            for (int k = 1; k < 16; k++) {
                float err = fabsf(d * (float)quant_mxfp4_values[k] - src[j]);
                if (err < best_err) {
                    best_err = err;
                    best = k;
                }
            }
            idx[j] = (uint8_t)best;
        }
        b[i].e = e;
        for (int j = 0; j < QK / 2; j++) b[i].qs[j] = (uint8_t)(idx[j] | idx[j + QK / 2] << 4);
    }
}

/* ---- dots: per block an exact integer sum, then float scaling ---- */

void quant_dot_q4_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_0 *x = vx;
    const blk_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK / 2];
        }
        sumf += (float)sumi * (H2F(x[i].d) * H2F(y[i].d));
    }
    *s = sumf;
}

void quant_dot_q4_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q4_1 *x = vx;
    const blk_q8_1 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += (x[i].qs[j] & 0xF) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + QK / 2];
        }
        sumf += (H2F(x[i].d) * H2F(y[i].d)) * (float)sumi + H2F(x[i].m) * H2F(y[i].s);
    }
    *s = sumf;
}

void quant_dot_q5_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_0 *x = vx;
    const blk_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK; j++) sumi += (q5_get(x[i].qs, qh, j) - 16) * y[i].qs[j];
        sumf += (float)sumi * (H2F(x[i].d) * H2F(y[i].d));
    }
    *s = sumf;
}

void quant_dot_q5_1_q8_1(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q5_1 *x = vx;
    const blk_q8_1 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK; j++) sumi += q5_get(x[i].qs, qh, j) * y[i].qs[j];
        sumf += (H2F(x[i].d) * H2F(y[i].d)) * (float)sumi + H2F(x[i].m) * H2F(y[i].s);
    }
    *s = sumf;
}

void quant_dot_q8_0_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_q8_0 *x = vx;
    const blk_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += (float)sumi * (H2F(x[i].d) * H2F(y[i].d));
    }
    *s = sumf;
}

void quant_dot_iq4_nl_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_iq4_nl *x = vx;
    const blk_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += quant_iq4nl_values[x[i].qs[j] & 0xF] * y[i].qs[j];
            sumi += quant_iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + QK / 2];
        }
        sumf += (float)sumi * (H2F(x[i].d) * H2F(y[i].d));
    }
    *s = sumf;
}

void quant_dot_mxfp4_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const blk_mxfp4 *x = vx;
    const blk_q8_0 *y = vy;
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += quant_mxfp4_values[x[i].qs[j] & 0xF] * y[i].qs[j];
            sumi += quant_mxfp4_values[x[i].qs[j] >> 4] * y[i].qs[j + QK / 2];
        }
        sumf += (float)sumi * (quant_e8m0_half(x[i].e) * H2F(y[i].d));
    }
    *s = sumf;
}
