/* quant/quant_kquant: scalar reference kernels for the 256-element
 * super-block types Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and the activation
 * type Q8_K they are dotted with.
 *
 * Dequantizers and dots follow the GGUF layouts exactly (dequantization is
 * checked bit for bit against the gguf package). Q8_K's quantizer is the
 * reference engine's (d = max/-127 from the signed largest value, round to
 * nearest even), because it shapes every K-quant dot's result. The weight
 * quantizers reproduce the reference engine's (llama.cpp's quantizers
 * without an importance matrix) byte for byte: the same per-sub-block
 * searches, float operations in the same order, its round-to-nearest trick,
 * the sub-block scales quantized against the unrounded super-block scale,
 * then the values requantized with the scales as stored. Checked byte for
 * byte against llama.cpp's output in tests/test_quant.c (fixture
 * tests/fixtures/kquant_quantize_llamacpp.bin).
 * Dots: per super-block exact integer sums, then float scaling and float
 * accumulation in block order (the AVX2 twins compute the same integers, so
 * they agree bit for bit). Calls: base/fp16. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "quant/quant_internal.h"

#define H2F tl_fp16_to_fp32
#define F2H tl_fp32_to_fp16

/* ------------------------------------------------------------------ Q8_K */

void quant_q8_k_to_float(const void *src, float *dst, int64_t n) {
    const blk_q8_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int j = 0; j < QK_K; j++) dst[j] = b[i].d * (float)b[i].qs[j];
}

void quant_q8_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        const float max = quant_absmax_signed(src, QK_K);
        if (max == 0.0f) {
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
/* Byte compatibility with the reference engine depends on every float
 * operation below happening in this order, in float (no double, no FMA:
 * quant_internal.h turns contraction off). */

#define KQ_EPS 1e-15f /* a group whose largest magnitude is below this is zero */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Round to nearest, ties to even, the way the reference does it: adding
 * 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. Exact for
 * |f| < 2^22; beyond that (or for NaN) it wraps exactly as the reference's
 * does, so even such input gives the same bytes. */
static inline int kq_round(float f) {
    const float v = f + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* x ~= s * L - m with L in 0..nmax, m >= 0, per-element weights w. Start
 * from the range [min(x, 0), max(x)]; then for nstep + 1 stretched step
 * counts (nmax + rmin + rdelta * k) round, refit s and the offset by
 * weighted least squares and keep the fit with the smallest weighted error
 * (squared, or absolute when mad). A kept fit's offset becomes the origin
 * of the later candidates (the reference does this too). Returns s, sets
 * *m_out and L (n <= 32). */
static float kq_fit_min(const float *x, const float *w, int n, int nmax, float rmin, float rdelta, int nstep,
                        int mad, uint8_t *L, float *m_out) {
    float lo = x[0], hi = x[0];
    float sw = w[0], swx = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sw += w[i];
        swx += w[i] * x[i];
    }
    if (lo > 0.0f) lo = 0.0f;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *m_out = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo);
    float scale = 1.0f / iscale;
    float best = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(kq_round(iscale * (x[i] - lo)), 0, nmax);
        float e = scale * (float)L[i] + lo - x[i];
        e = mad ? fabsf(e) : e * e;
        best += w[i] * e;
    }
    uint8_t cand[32];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (hi - lo);
        float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(kq_round(iscale * (x[i] - lo)), 0, nmax);
            const float fl = (float)l;
            cand[i] = (uint8_t)l;
            sl += w[i] * fl;
            sl2 += w[i] * fl * fl;
            sxl += w[i] * fl * x[i];
        }
        const float det = sw * sl2 - sl * sl;
        if (!(det > 0.0f)) continue;
        float s = (sw * sxl - swx * sl) / det;
        float off = (sl2 * swx - sl * sxl) / det;
        if (off > 0.0f) { /* the offset may only subtract: refit the scale alone */
            off = 0.0f;
            s = sxl / sl2;
        }
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            float e = s * (float)cand[i] + off - x[i];
            e = mad ? fabsf(e) : e * e;
            err += w[i] * e;
        }
        if (err < best) {
            memcpy(L, cand, (size_t)n);
            best = err;
            scale = s;
            lo = off;
        }
    }
    *m_out = -lo;
    return scale;
}

/* x ~= s * (L - nmax) with L - nmax in -nmax..nmax-1, weights x^2: the
 * largest magnitude maps to -nmax, then 18 nearby step counts (nmax +
 * 0.1k) are tried, each scored by the least-squares gain sumlx^2 / suml2.
 * Returns s (signed), L in 0..2nmax-1 (all 0 for a zero group). */
static float kq_fit_sym(const float *x, int n, int nmax, int8_t *L) {
    const float max = quant_absmax_signed(x, n);
    if (fabsf(max) < KQ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(kq_round(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i], fl = (float)l;
        L[i] = (int8_t)(l + nmax);
        sumlx += w * x[i] * fl;
        suml2 += w * fl * fl;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int t = -9; t <= 9; t++) {
        if (t == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)t) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const float fl = (float)clampi(kq_round(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * fl;
            suml2 += w * fl * fl;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(kq_round(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's 16-value groups: L - 4 in -4..3 from the largest magnitude, then
 * up to 5 sweeps that move single values to their best level when that
 * raises the weighted (x^2) least-squares gain. Returns s, L in 0..7 (all
 * 0 for a zero group). */
static float kq_fit_q3(const float *x, int8_t *L) {
    const int n = 16, nmax = 4;
    const float max = quant_absmax_signed(x, n);
    if (fabsf(max) < KQ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(kq_round(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        L[i] = (int8_t)l;
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0.0f)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int nl = clampi(kq_round(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return sumlx / suml2;
}

/* 2-bit quants L[e], e = 128h + 32i + k, into qs[32h + k] at bits 2i */
static void pack_2bit(uint8_t *qs, const uint8_t *L) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 32; k++) {
            const uint8_t *l = L + 128 * h + k;
            qs[32 * h + k] = (uint8_t)(l[0] | l[32] << 2 | l[64] << 4 | l[96] << 6);
        }
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

/* per 16 values an asymmetric fit weighted by |x| (3 steps, stretched by
 * -0.5 .. +1.0), the 16 scales and 16 mins to 4 bits against max/15 */
void quant_q2_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q2_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint8_t L[QK_K];
        float w[16], s[16], m[16], smax = 0.0f, mmax = 0.0f;
        for (int g = 0; g < 16; g++) {
            const float *x = src + 16 * g;
            for (int k = 0; k < 16; k++) w[k] = fabsf(x[k]);
            s[g] = kq_fit_min(x, w, 16, 3, -0.5f, 0.1f, 15, 1, L + 16 * g, &m[g]);
            if (s[g] > smax) smax = s[g];
            if (m[g] > mmax) mmax = m[g];
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        b[i].d = b[i].dmin = F2H(0.0f);
        if (smax > 0.0f) {
            const float is = 15.0f / smax;
            for (int g = 0; g < 16; g++) b[i].scales[g] = (uint8_t)kq_round(is * s[g]);
            b[i].d = F2H(smax / 15.0f);
        }
        if (mmax > 0.0f) {
            const float is = 15.0f / mmax;
            for (int g = 0; g < 16; g++)
                b[i].scales[g] = (uint8_t)(b[i].scales[g] | (unsigned)kq_round(is * m[g]) << 4);
            b[i].dmin = F2H(mmax / 15.0f);
        }
        /* requantize with the stored scales; a zero scale keeps the fit's L */
        for (int g = 0; g < 16; g++) {
            const float d = H2F(b[i].d) * (float)(b[i].scales[g] & 0xF);
            if (d == 0.0f) continue;
            const float dm = H2F(b[i].dmin) * (float)(b[i].scales[g] >> 4);
            for (int k = 0; k < 16; k++) L[16 * g + k] = (uint8_t)clampi(kq_round((src[16 * g + k] + dm) / d), 0, 3);
        }
        pack_2bit(b[i].qs, L);
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

/* per 16 values kq_fit_q3, the 16 signed scales to 6 bits against the one
 * of largest magnitude (which maps to -32) */
void quant_q3_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q3_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        int8_t L[QK_K];
        float s[16];
        for (int g = 0; g < 16; g++) s[g] = kq_fit_q3(src + 16 * g, L + 16 * g);
        const float smax = quant_absmax_signed(s, 16);
        memset(b[i].scales, 0, sizeof b[i].scales);
        b[i].d = F2H(0.0f);
        if (smax != 0.0f) {
            const float is = -32.0f / smax;
            for (int j = 0; j < 16; j++) {
                const int8_t l8 = (int8_t)kq_round(is * s[j]); /* the reference narrows first */
                const int v = clampi(l8, -32, 31) + 32;
                b[i].scales[j % 8] |= (uint8_t)((v & 0xF) << (j < 8 ? 0 : 4));
                b[i].scales[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
            }
            b[i].d = F2H(1.0f / is);
        }
        for (int g = 0; g < 16; g++) {
            const float d = H2F(b[i].d) * (float)q3k_scale(b[i].scales, g);
            if (d == 0.0f) continue;
            for (int k = 0; k < 16; k++) L[16 * g + k] = (int8_t)(clampi(kq_round(src[16 * g + k] / d), -4, 3) + 4);
        }
        /* bit 2 of each quant into hmask[e % 32] bit e / 32, the rest as Q2_K */
        uint8_t low[QK_K];
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            low[e] = (uint8_t)(L[e] > 3 ? L[e] - 4 : L[e]);
        }
        pack_2bit(b[i].qs, low);
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

/* Q4_K / Q5_K: per 32 values an asymmetric fit weighted by rms(x) + |x|,
 * the 8 scales and 8 mins to 6 bits against max/63; L gets 0..nmax */
static void k45_quantize(const float *src, int nmax, float rmin, int nstep, uint16_t *dh, uint16_t *dminh,
                         uint8_t *scales, uint8_t *L /* [256] */) {
    float w[32], s[8], m[8], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *x = src + 32 * j;
        float sx2 = 0.0f;
        for (int k = 0; k < 32; k++) sx2 += x[k] * x[k];
        const float rms = sqrtf(sx2 / 32.0f);
        for (int k = 0; k < 32; k++) w[k] = rms + fabsf(x[k]);
        s[j] = kq_fit_min(x, w, 32, nmax, rmin, 0.1f, nstep, 0, L + 32 * j, &m[j]);
        if (s[j] > smax) smax = s[j];
        if (m[j] > mmax) mmax = m[j];
    }
    const float is = smax > 0.0f ? 63.0f / smax : 0.0f;
    const float im = mmax > 0.0f ? 63.0f / mmax : 0.0f;
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        const uint8_t a = (uint8_t)kq_round(is * s[j]), c = (uint8_t)kq_round(im * m[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = c < 63 ? c : 63;
    }
    k4_pack_scales(scales, ls, lm);
    *dh = F2H(smax / 63.0f);
    *dminh = F2H(mmax / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        quant_k4_scale_min(scales, j, &sc, &mn);
        const float d = H2F(*dh) * (float)sc;
        if (d == 0.0f) continue; /* keeps the fit's L */
        const float dm = H2F(*dminh) * (float)mn;
        for (int k = 0; k < 32; k++) L[32 * j + k] = (uint8_t)clampi(kq_round((src[32 * j + k] + dm) / d), 0, nmax);
    }
}

void quant_q4_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q4_k *b = dst;
    uint8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        k45_quantize(src, 15, -1.0f, 20, &b[i].d, &b[i].dmin, b[i].scales, q);
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
    uint8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        k45_quantize(src, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, q);
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

/* per 16 values kq_fit_sym (6 bits), the 16 signed scales to int8 against
 * the one of largest magnitude (which maps to -128) */
void quant_q6_k_from_float(const float *src, void *dst, int64_t n) {
    blk_q6_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        int8_t L[QK_K];
        float s[16];
        for (int g = 0; g < 16; g++) s[g] = kq_fit_sym(src + 16 * g, 16, 32, L + 16 * g);
        const float smax = quant_absmax_signed(s, 16);
        if (fabsf(smax) < KQ_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float is = -128.0f / smax;
        b[i].d = F2H(1.0f / is);
        for (int g = 0; g < 16; g++) {
            const int v = kq_round(is * s[g]);
            b[i].scales[g] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            const float d = H2F(b[i].d) * (float)b[i].scales[g];
            if (d == 0.0f) continue;
            for (int k = 0; k < 16; k++) L[16 * g + k] = (int8_t)(clampi(kq_round(src[16 * g + k] / d), -32, 31) + 32);
        }
        memset(b[i].ql, 0, sizeof b[i].ql);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK_K; e++) {
            const int q = L[e];
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

/* per 32 values quant_iq4nl_block's search, the 8 signed scales to 6 bits
 * against d = -(largest-magnitude scale)/32; the values are re-picked with
 * d * l, d unrounded (as the reference does; only the stored d is fp16) */
void quant_iq4_xs_from_float(const float *src, void *dst, int64_t n) {
    blk_iq4_xs *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float s[8];
        uint8_t idx[32];
        for (int j = 0; j < 8; j++) s[j] = quant_iq4nl_block(src + 32 * j, 32, idx);
        const float smax = quant_absmax_signed(s, 8);
        const float d = -smax / 32.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = F2H(d);
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int j = 0; j < 8; j++) {
            const int l = clampi(kq_round(id * s[j]), -32, 31);
            const float dl = d * (float)l;
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int k = 0; k < 32; k++) idx[k] = (uint8_t)quant_iq4nl_nearest(idl * src[32 * j + k]);
            for (int k = 0; k < 16; k++) b[i].qs[16 * j + k] = (uint8_t)(idx[k] | idx[k + 16] << 4);
            const int v = l + 32;
            b[i].scales_l[j / 2] |= (uint8_t)((v & 0xF) << (4 * (j % 2)));
            b[i].scales_h |= (uint16_t)((v >> 4) << (2 * j));
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
