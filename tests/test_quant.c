/* tests/test_quant: the quant module against oracles we did not write.
 *
 * - fp16: all 65536 halves -> float, and ~2M float bit patterns (plus edge
 *   cases: subnormals, the 65504/65520 overflow tie, ties to even, inf, NaN)
 *   -> half, compared with the compiler's own _Float16 conversions (libgcc
 *   soft-float, correctly rounded). bf16: compared with round-to-nearest-even
 *   found by picking the nearer of the two bracketing bf16 values in double.
 * - every type: reference quantize -> dequantize error within the type's
 *   bound (stated per type below), and the scalar vec_dot equals the double
 *   dot of the dequantized rows (so the dot and the dequantizer agree on the
 *   layout; the Python test ties the dequantizer to the gguf package).
 * - AVX2 vs scalar: vec_dot within a float-summation-order tolerance; the
 *   activation quantizers (F16, BF16, Q8_0, Q8_1, Q8_K) bit-exact.
 * TALLOW_QUANT_BENCH=1 also prints single-thread dot throughput. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/fp16.h"
#include "quant/quant.h"
#include "tallow.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rng_unif(void) { return (double)(rng_u64() >> 11) / 9007199254740992.0; }
static float rng_gauss(void) {
    double u = rng_unif(), v = rng_unif();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* ------------------------------------------------------------------ fp16 */

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#ifdef __FLT16_MAX__ /* the compiler has _Float16 (GCC >= 12, clang >= 15 on x86) */
static uint16_t f16_bits(_Float16 h) {
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static void check_fp32_to_fp16(float f, int *bad) {
    uint16_t ours = tl_fp32_to_fp16(f);
    _Float16 h = (_Float16)f;
    uint16_t want = f16_bits(h);
    if (isnan(f)) {
        /* NaN stays NaN, quiet, same sign */
        int ok = (ours & 0x7c00) == 0x7c00 && (ours & 0x200) && (ours >> 15) == (f32_bits(f) >> 31);
        if (!ok && (*bad)++ < 5) fprintf(stderr, "fp16 NaN %08x -> %04x\n", f32_bits(f), ours);
        return;
    }
    if (ours != want && (*bad)++ < 5)
        fprintf(stderr, "fp16(%a = %08x): ours %04x, _Float16 %04x\n", f, f32_bits(f), ours, want);
}

static void test_fp16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 hv;
        uint16_t hb = (uint16_t)h;
        memcpy(&hv, &hb, 2);
        float want = (float)hv, ours = tl_fp16_to_fp32(hb);
        int same = isnan(want) ? isnan(ours) && ((f32_bits(ours) >> 13) & 0x3ff) == (h & 0x3ff) &&
                                     (f32_bits(ours) >> 31) == (h >> 15)
                               : f32_bits(ours) == f32_bits(want);
        if (!same && bad++ < 5) fprintf(stderr, "half %04x: ours %a, _Float16 %a\n", h, ours, want);
    }
    CHECK(bad == 0, "fp16->fp32: %d of 65536 halves differ", bad);

    bad = 0;
    /* every float whose low 10 bits are 0, 0x001, 0xfff, 0x1000 or random
     * below 2^13 (so rounding bits vary) over all exponents and signs */
    for (uint32_t hi = 0; hi < (1u << 19); hi++) {
        uint32_t base = hi << 13;
        check_fp32_to_fp16(bits_f32(base), &bad);
        check_fp32_to_fp16(bits_f32(base | 0x1000), &bad);        /* exact tie */
        check_fp32_to_fp16(bits_f32(base | 0x0fff), &bad);        /* just below */
        check_fp32_to_fp16(bits_f32(base | 0x1001), &bad);        /* just above */
        check_fp32_to_fp16(bits_f32(base | (uint32_t)(rng_u64() & 0x1fff)), &bad);
    }
    /* subnormal results: every float in [2^-26, 2^-14) with 7 mantissa
     * offsets per half-ulp step */
    for (uint32_t e = 101; e < 113; e++)
        for (uint32_t m = 0; m < (1u << 23); m += 0x1ff)
            for (uint32_t s = 0; s < 2; s++) check_fp32_to_fp16(bits_f32(s << 31 | e << 23 | m), &bad);
    const float edge[] = {65504.0f, 65519.99f, 65520.0f, 65520.01f, 1e9f, INFINITY, -INFINITY,
                          0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, -0.0f,
                          0x1.ffcp-15f, 0x1.ffep-15f, NAN, -NAN};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) check_fp32_to_fp16(edge[i], &bad);
    CHECK(bad == 0, "fp32->fp16: %d mismatches vs _Float16", bad);
    /* signalling NaN payload is kept and quieted */
    uint16_t sn = tl_fp32_to_fp16(bits_f32(0x7f802000u));
    CHECK((sn & 0x7e00) == 0x7e00 && (sn & 0x1ff) == 1, "sNaN -> %04x", sn);
}
#else
static void test_fp16(void) {
    printf("SKIP fp16 vs _Float16: this compiler has no _Float16 (tests/test_quant_ref.py still compares with numpy)\n");
}
#endif

/* nearest bf16 by a different method: compare the two candidates in double */
static uint16_t bf16_oracle(float f) {
    uint32_t u = f32_bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs((double)tl_bf16_to_fp32(lo) - (double)f);
    double vh = (double)bits_f32((uint32_t)hi << 16);
    if ((hi & 0x7f80) == 0x7f80 && (hi & 0x7f) == 0) vh = copysign(INFINITY, f); /* rounds to inf */
    double dh = fabs(vh - (double)f);
    if ((lo & 0x7fff) == 0x7f7f && (u & 0xffff) >= 0x8000) {
        /* above the largest finite bf16 by >= half an ulp: inf */
        return (uint16_t)((u >> 16 & 0x8000) | 0x7f80);
    }
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t k = 0; k < 2000000; k++) {
        uint32_t u = (uint32_t)rng_u64();
        if (k % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* tie */
        if (k % 4 == 2) u = (u & 0xffff0000u) | 0x7fffu;
        float f = bits_f32(u);
        uint16_t ours = tl_fp32_to_bf16(f);
        if (isnan(f)) {
            int ok = (ours & 0x7f80) == 0x7f80 && (ours & 0x40) && (ours >> 15) == (u >> 31);
            if (!ok && bad++ < 5) fprintf(stderr, "bf16 NaN %08x -> %04x\n", u, ours);
            continue;
        }
        if ((u & 0x7f800000u) == 0x7f800000u) { /* inf */
            if (ours != (uint16_t)(u >> 16) && bad++ < 5) fprintf(stderr, "bf16 inf %08x\n", u);
            continue;
        }
        uint16_t want = bf16_oracle(f);
        if (ours != want && bad++ < 5) fprintf(stderr, "bf16(%08x): ours %04x want %04x\n", u, ours, want);
        if (tl_bf16_to_fp32(ours) != tl_bf16_to_fp32(ours)) bad++;
    }
    CHECK(bad == 0, "fp32->bf16: %d mismatches", bad);
}

/* ------------------------------------------------------------ type table */

typedef struct {
    tl_type t;
    int n_f16;      /* fp16 scale fields in a block */
    int f16_off[2]; /* their byte offsets */
} type_case;

static const type_case cases[] = {
    {TL_TYPE_F32, 0, {0}},          {TL_TYPE_F16, 0, {0}},          {TL_TYPE_BF16, 0, {0}},
    {TL_TYPE_Q8_0, 1, {0}},         {TL_TYPE_Q8_1, 2, {0, 2}},      {TL_TYPE_Q4_0, 1, {0}},
    {TL_TYPE_Q4_1, 2, {0, 2}},      {TL_TYPE_Q5_0, 1, {0}},         {TL_TYPE_Q5_1, 2, {0, 2}},
    {TL_TYPE_IQ4_NL, 1, {0}},       {TL_TYPE_MXFP4, 0, {0}},        {TL_TYPE_Q2_K, 2, {80, 82}},
    {TL_TYPE_Q3_K, 1, {108}},       {TL_TYPE_Q4_K, 2, {0, 2}},      {TL_TYPE_Q5_K, 2, {0, 2}},
    {TL_TYPE_Q6_K, 1, {208}},       {TL_TYPE_IQ4_XS, 1, {0}},       {TL_TYPE_Q8_K, 0, {0}},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static float h2f_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return tl_fp16_to_fp32(h);
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = tl_fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

/* random bytes for n elements of type t, with the fp16 scales replaced by
 * finite values of moderate size (raw random halves are often inf/NaN) */
static void random_blocks(const type_case *c, uint8_t *buf, int64_t n) {
    const tl_type_info *ti = tl_type_get(c->t);
    size_t bytes = tl_row_bytes(c->t, n);
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)rng_u64();
    if (c->t == TL_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)(void *)buf)[i] = rng_gauss();
        return;
    }
    if (c->t == TL_TYPE_F16 || c->t == TL_TYPE_BF16) {
        const quant_kernels *k = quant_kernels_ref(c->t);
        float *tmp = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) tmp[i] = rng_gauss();
        k->from_float(tmp, buf, n);
        free(tmp);
        return;
    }
    for (int64_t b = 0; b < n / ti->blck; b++) {
        uint8_t *p = buf + (size_t)b * ti->size;
        for (int k = 0; k < c->n_f16; k++) {
            float v = (float)ldexp(0.5 + rng_unif(), -(int)(rng_u64() % 8) - 3);
            put_f16(p + c->f16_off[k], (rng_u64() & 1) ? -v : v);
        }
        if (c->t == TL_TYPE_MXFP4) p[0] = (uint8_t)(120 + rng_u64() % 8);
    }
}

/* ------------------------------------------------- quantization error */

/* Per-block bound on |x - dequant(quant(x))|, derived from the quantizer's
 * rounding (half a step, or a full step where the extreme value is clamped,
 * plus what rounding the fp16 scales to 11 bits can add); < 0 when the type
 * is checked by RMSE instead. */
static double block_bound(tl_type t, const uint8_t *p) {
    const double u = 1.0 / 2048; /* fp16 relative rounding */
    switch (t) {
    case TL_TYPE_Q8_0:
    case TL_TYPE_Q8_1: return fabs(h2f_at(p)) * (0.5 + 128 * u);
    case TL_TYPE_Q4_0: return fabs(h2f_at(p)) * (1.0 + 16 * u);
    case TL_TYPE_Q5_0: return fabs(h2f_at(p)) * (1.0 + 32 * u);
    case TL_TYPE_Q4_1: return fabs(h2f_at(p)) * (0.5 + 16 * u) + fabs(h2f_at(p + 2)) * u;
    case TL_TYPE_Q5_1: return fabs(h2f_at(p)) * (0.5 + 32 * u) + fabs(h2f_at(p + 2)) * u;
    case TL_TYPE_MXFP4: return 4.0 * ldexp(1.0, (int)p[0] - 128); /* clamp at 6*2^e */
    case TL_TYPE_Q8_K: {
        float d;
        memcpy(&d, p, 4);
        return fabs(d) * (0.5 + 256 * FLT_EPSILON); /* d = 1/iscale is rounded */
    }
    default: return -1.0;
    }
}

static double rmse_of(tl_type t, const float *x, int64_t n, double *max_rel) {
    size_t bytes = tl_row_bytes(t, n);
    uint8_t *q = malloc(bytes);
    float *xh = malloc((size_t)n * sizeof(float));
    CHECK(quant_quantize(t, x, q, n) == TL_OK, "quantize %s", tl_type_name(t));
    CHECK(quant_dequantize(t, q, xh, n) == TL_OK, "dequantize %s", tl_type_name(t));
    const tl_type_info *ti = tl_type_get(t);
    double se = 0.0, worst = 0.0;
    for (int64_t b = 0; b < n / ti->blck; b++) {
        double bound = block_bound(t, q + (size_t)b * ti->size);
        for (int64_t j = b * ti->blck; j < (b + 1) * ti->blck; j++) {
            double e = fabs((double)x[j] - (double)xh[j]);
            se += e * e;
            if (t == TL_TYPE_F16) bound = fabs(x[j]) * (1.0 / 2048) + 0x1p-25;
            if (t == TL_TYPE_BF16) bound = fabs(x[j]) * (1.0 / 256);
            if (t == TL_TYPE_F32) bound = 0.0;
            if (bound >= 0.0) {
                double r = bound > 0 ? e / bound : (e > 0 ? INFINITY : 0.0);
                if (r > worst) worst = r;
            }
        }
    }
    free(q);
    free(xh);
    *max_rel = worst;
    return sqrt(se / (double)n);
}

static void test_roundtrip(void) {
    const int64_t n = 256 * 64;
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = rng_gauss();
    /* a few blocks with outliers, all-equal and all-zero values */
    for (int j = 0; j < 256; j++) x[256 + j] = j == 17 ? 40.0f : rng_gauss() * 0.01f;
    for (int j = 0; j < 256; j++) x[512 + j] = 0.25f;
    for (int j = 0; j < 256; j++) x[768 + j] = 0.0f;
    double rmse_q4_0 = 0, rmse_q5_0 = 0;
    printf("quantize->dequantize on N(0,1) data (%lld values):\n", (long long)n);
    for (size_t c = 0; c < N_CASES; c++) {
        tl_type t = cases[c].t;
        if (!quant_kernels_ref(t)) {
            printf("  %-7s no kernels (skipped)\n", tl_type_name(t));
            continue;
        }
        double worst;
        double rmse = rmse_of(t, x, n, &worst);
        uint8_t zero_blk[8] = {0};
        double expect_bound = block_bound(t, zero_blk);
        if (t == TL_TYPE_Q4_0) rmse_q4_0 = rmse;
        if (t == TL_TYPE_Q5_0) rmse_q5_0 = rmse;
        printf("  %-7s rmse %.5f  max err / bound %.3f%s\n", tl_type_name(t), rmse, worst,
               expect_bound < 0 && t != TL_TYPE_F32 && t != TL_TYPE_F16 && t != TL_TYPE_BF16
                   ? " (no per-element bound; rmse checked)" : "");
        CHECK(worst <= 1.0, "%s: error %.3f x its bound", tl_type_name(t), worst);
        CHECK(rmse < 0.3, "%s: rmse %.4f", tl_type_name(t), rmse); /* 2 bits: ~0.29 */
    }
    /* types without a simple per-element bound: IQ4_NL must beat Q4_0 (same
     * size, better codebook); K-quants must be in their bits' neighbourhood */
    double wr;
    double r_iq4 = rmse_of(TL_TYPE_IQ4_NL, x, n, &wr);
    CHECK(r_iq4 < rmse_q4_0, "iq4_nl rmse %.5f not below q4_0's %.5f", r_iq4, rmse_q4_0);
    /* K-quants (and IQ4): byte-identical to llama.cpp's quantizers, checked
     * in tests/test_quant_llamacpp.c; here bound them (a) absolutely, at
     * what they achieve on N(0,1) plus ~8% (Q2_K: llama.cpp's search
     * minimizes |x|-weighted absolute error, so its rmse is ~0.287), and (b)
     * relative to the legacy type of the same bits, which they must beat
     * (finer scales) -- a packing bug would blow both */
    double r_q4_1 = rmse_of(TL_TYPE_Q4_1, x, n, &wr), r_q5_1 = rmse_of(TL_TYPE_Q5_1, x, n, &wr);
    const struct { tl_type t; double max_rmse, must_beat; } kq[] = {
        {TL_TYPE_Q2_K, 0.31, 1e9},         {TL_TYPE_Q3_K, 0.152, rmse_q4_0 * 2.0},
        {TL_TYPE_Q4_K, 0.0755, r_q4_1},    {TL_TYPE_Q5_K, 0.038, r_q5_1},
        {TL_TYPE_Q6_K, 0.0182, rmse_q5_0 / 2.0}, {TL_TYPE_IQ4_XS, 0.0805, rmse_q4_0},
    };
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        if (!quant_kernels_ref(kq[i].t)) continue;
        double r = rmse_of(kq[i].t, x, n, &wr);
        CHECK(r < kq[i].max_rmse, "%s rmse %.5f >= %.4f", tl_type_name(kq[i].t), r, kq[i].max_rmse);
        CHECK(r < kq[i].must_beat, "%s rmse %.5f not below %.5f", tl_type_name(kq[i].t), r, kq[i].must_beat);
    }
    free(x);
}

/* --------------------------------------------------------------- dots */

typedef struct {
    double max_ref_vs_deq;  /* |ref - double dot of dequantized| / tol */
    double max_simd_vs_ref; /* |simd - ref| / tol */
} dot_stats;

/* kf: the kernels of the level under test (its vec_dot is compared with
 * the scalar one when it is a different function) */
static void test_dot_type(const type_case *c, dot_stats *st, const quant_kernels *kf) {
    const quant_kernels *kr = quant_kernels_ref(c->t);
    if (!kr || !kr->vec_dot) return;
    const tl_type vt = kr->vec_dot_type;
    const quant_kernels *kv = quant_kernels_ref(vt);
    const int64_t blck = tl_type_get(c->t)->blck;
    const int64_t vblck = tl_type_get(vt)->blck;
    const int64_t unit = blck > vblck ? blck : vblck;
    const int64_t lens[] = {1, 2, 3, 7, 8, 33, 128};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (int rep = 0; rep < 20; rep++) {
            int64_t n = lens[li] * unit;
            if (blck == 1 && rep % 2) n += rep; /* plain types: odd tails too */
            uint8_t *x = malloc(tl_row_bytes(c->t, n));
            uint8_t *y = malloc(tl_row_bytes(vt, n));
            float *yf = malloc((size_t)n * sizeof(float));
            float *xd = malloc((size_t)n * sizeof(float));
            float *yd = malloc((size_t)n * sizeof(float));
            random_blocks(c, x, n);
            for (int64_t i = 0; i < n; i++) yf[i] = rng_gauss() * (rep % 3 == 0 ? 100.0f : 1.0f);
            kv->from_float(yf, y, n);
            kr->to_float(x, xd, n);
            kv->to_float(y, yd, n);
            double exact = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)xd[i] * (double)yd[i];
                mag += fabs((double)xd[i] * (double)yd[i]);
            }
            float sr, sf;
            kr->vec_dot(n, &sr, x, y);
            /* summation in float over nb block terms: each result is within
             * (nb + 8) * eps * sum|terms| of the exact sum (Higham's
             * bound); Q4_1/Q5_1 use the activation sum s rounded to fp16 */
            double nb = (double)n / 32.0 + 1.0;
            double tol = (nb + 8.0) * FLT_EPSILON * mag + 1e-30;
            double tol_deq = tol;
            if (c->t == TL_TYPE_Q4_1 || c->t == TL_TYPE_Q5_1) tol_deq += mag / 1024.0;
            if (blck == 1) tol_deq = 2.0 * FLT_EPSILON * mag + 1e-30; /* ref sums in double */
            double r = fabs((double)sr - exact) / tol_deq;
            if (r > st->max_ref_vs_deq) st->max_ref_vs_deq = r;
            if (kf && kf->vec_dot != kr->vec_dot) {
                kf->vec_dot(n, &sf, x, y);
                double r2 = fabs((double)sf - (double)sr) / (2.0 * tol);
                if (r2 > st->max_simd_vs_ref) st->max_simd_vs_ref = r2;

            }
            free(x);
            free(y);
            free(yf);
            free(xd);
            free(yd);
        }
    }
}

/* The dots of one kernel level against the scalar ones (level SCALAR:
 * the scalar ones against the dequantized dot). Prints per type which
 * kernel ran, so the log shows what this CPU covered. */
static void test_dots_level(int level) {
    const char *ln = tl_cpu_level_name(level);
    printf("vec_dot, %s kernels (error / tolerance, <= 1 passes):\n", ln);
    for (size_t c = 0; c < N_CASES; c++) {
        const quant_kernels *kr = quant_kernels_ref(cases[c].t);
        if (!kr || !kr->vec_dot) continue;
        const quant_kernels *kf = level == TL_CPU_LEVEL_SCALAR ? NULL : quant_kernels_at(level, cases[c].t);
        const quant_kernels *kb = level > TL_CPU_LEVEL_AVX2 ? quant_kernels_at(level - 1, cases[c].t) : kr;
        /* a level's own kernel, not one it repeats from the level below */
        const bool own = kf && kf->vec_dot != kb->vec_dot;
        if (level != TL_CPU_LEVEL_SCALAR && !own) {
            printf("  %-7s . %-5s (no %s kernel)\n", tl_type_name(cases[c].t), tl_type_name(kr->vec_dot_type), ln);
            continue;
        }
        dot_stats st = {0, 0};
        test_dot_type(&cases[c], &st, kf);
        if (level == TL_CPU_LEVEL_SCALAR)
            printf("  %-7s . %-5s scalar vs dequantized dot %.3f\n", tl_type_name(cases[c].t),
                   tl_type_name(kr->vec_dot_type), st.max_ref_vs_deq);
        else
            printf("  %-7s . %-5s %s vs scalar %.3f\n", tl_type_name(cases[c].t), tl_type_name(kr->vec_dot_type), ln,
                   st.max_simd_vs_ref);
        CHECK(st.max_ref_vs_deq <= 1.0, "%s: scalar dot off the dequantized dot by %.3f x tol",
              tl_type_name(cases[c].t), st.max_ref_vs_deq);
        CHECK(st.max_simd_vs_ref <= 1.0, "%s: %s dot off the scalar by %.3f x tol", tl_type_name(cases[c].t), ln,
              st.max_simd_vs_ref);
    }
}

/* ------------------------------------------ SIMD activation quantizers */

static void fill_pattern(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = rng_gauss(); break;
        case 1: x[i] = rng_gauss() * 1e-3f; break;
        case 2: /* amax 127 per block -> d = 1: many exact .5 ties */
            x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(rng_u64() % 254) - 127) + 0.5f;
            break;
        case 3: x[i] = (i % 64 < 32) ? 0.0f : -0.0f; break; /* zero blocks */
        case 4: x[i] = (float)ldexp(rng_gauss(), -140); break; /* subnormal floats */
        case 5: x[i] = rng_gauss() * 60000.0f; break; /* near fp16 overflow */
        case 6: x[i] = (i % 256 == 5) ? 1e4f : rng_gauss(); break;
        default: x[i] = bits_f32((uint32_t)rng_u64()); /* any bit pattern incl NaN/inf */
        }
    }
}

static void test_simd_from_float(int level) {
    const tl_type ts[] = {TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_Q8_0, TL_TYPE_Q8_1, TL_TYPE_Q8_K};
    const char *ln = tl_cpu_level_name(level);
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        const quant_kernels *kr = quant_kernels_ref(ts[k]), *kf = quant_kernels_at(level, ts[k]);
        const quant_kernels *kb = level > TL_CPU_LEVEL_AVX2 ? quant_kernels_at(level - 1, ts[k]) : kr;
        if (!kr || !kf) continue;
        if (kf->from_float == kb->from_float) {
            printf("  %-5s from_float: no %s kernel\n", tl_type_name(ts[k]), ln);
            continue;
        }
        /* Q8_0/Q8_1's SIMD quantizers serve activations only and follow the
         * reference engine's SIMD rounding rule, whose scalar twin is *_act_ref */
        quant_from_float_fn ref_ff = ts[k] == TL_TYPE_Q8_0   ? quant_q8_0_act_from_float_ref
                                     : ts[k] == TL_TYPE_Q8_1 ? quant_q8_1_act_from_float_ref
                                                             : kr->from_float;
        int n_bad = 0, n_cmp = 0;
        const int kinds = 8;
        for (int kind = 0; kind < kinds; kind++) {
            for (int rep = 0; rep < 20; rep++) {
                int64_t n = 256 * (1 + rep % 5);
                if (tl_type_get(ts[k])->blck == 1) n += rep; /* tails */
                float *x = malloc((size_t)n * sizeof(float));
                fill_pattern(x, n, kind);
                size_t bytes = tl_row_bytes(ts[k], n);
                uint8_t *a = malloc(bytes), *b = malloc(bytes);
                memset(a, 0xAA, bytes);
                memset(b, 0x55, bytes);
                ref_ff(x, a, n);
                kf->from_float(x, b, n);
                n_cmp++;
                if (memcmp(a, b, bytes) != 0) {
                    if (n_bad++ < 3) {
                        size_t at = 0;
                        while (a[at] == b[at]) at++;
                        fprintf(stderr, "%s from_float kind %d n %lld: first diff at byte %zu\n",
                                tl_type_name(ts[k]), kind, (long long)n, at);
                    }
                }
                free(x);
                free(a);
                free(b);
            }
        }
        printf("  %-5s from_float: %s == scalar on %d rows: %s\n", tl_type_name(ts[k]), ln, n_cmp,
               n_bad ? "NO" : "yes");
        CHECK(n_bad == 0, "%s: SIMD quantizer differs on %d of %d rows", tl_type_name(ts[k]), n_bad, n_cmp);
    }
}

/* The two Q8 rounding rules on a block where x * id hits exact halves
 * (amax 127 makes id 1 under both): the weight rule rounds 2.5 -> 3 and
 * -3.5 -> -4 (away from zero), the activation rule 2.5 -> 2, -3.5 -> -4
 * (to even). The SIMD activation quantizers must follow the second (the
 * scalar kernel set uses the first, like the reference engine's generic
 * build). */
static void test_q8_rules(void) {
    float x[32] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f};
    uint8_t a[sizeof(float) * 32], b[sizeof(float) * 32];
    quant_quantize(TL_TYPE_Q8_0, x, a, 32);
    quant_q8_0_act_from_float_ref(x, b, 32);
    const int8_t *qa = (const int8_t *)(a + 2), *qb = (const int8_t *)(b + 2); /* after the fp16 d */
    CHECK(qa[1] == 3 && qa[2] == -4 && qa[3] == 1 && qa[4] == -1 && qa[5] == 2,
          "q8_0 weight rule: halves away from zero (got %d %d %d %d %d)", qa[1], qa[2], qa[3], qa[4], qa[5]);
    CHECK(qb[1] == 2 && qb[2] == -4 && qb[3] == 0 && qb[4] == 0 && qb[5] == 2,
          "q8_0 activation rule: halves to even (got %d %d %d %d %d)", qb[1], qb[2], qb[3], qb[4], qb[5]);
    for (int lv = TL_CPU_LEVEL_AVX2; lv <= tl_cpu_detected_level(); lv++) {
        uint8_t c[sizeof(float) * 32];
        quant_kernels_at(lv, TL_TYPE_Q8_0)->from_float(x, c, 32);
        CHECK(memcmp(b, c, tl_row_bytes(TL_TYPE_Q8_0, 32)) == 0,
              "q8_0 %s activation quantizer follows the activation rule", tl_cpu_level_name(lv));
    }
}

/* Our activation quantizers vs llama.cpp's own (tests/fixtures/
 * q8_act_llamacpp.bin, made by make_q8_act_llamacpp.py from its AVX2
 * quantize_row_q8_0/q8_1): the scalar activation twins byte for byte, and
 * the AVX2 from_float too when this CPU runs it. */
static void test_q8_act_vs_llamacpp(void) {
    FILE *f = fopen("tests/fixtures/q8_act_llamacpp.bin", "rb");
    CHECK(f != NULL, "fixture tests/fixtures/q8_act_llamacpp.bin missing (run from the repo root)");
    if (!f) return;
    int32_t hdr[2] = {0, 0};
    size_t got = fread(hdr, sizeof hdr[0], 2, f);
    const int32_t rows = hdr[0], n = hdr[1];
    CHECK(got == 2 && rows > 0 && rows < 1000 && n > 0 && n % 32 == 0 && n <= 4096, "fixture header");
    if (got != 2 || rows <= 0 || rows >= 1000 || n <= 0 || n % 32 || n > 4096) {
        fclose(f);
        return;
    }
    const size_t nx = (size_t)rows * (size_t)n, b0 = (size_t)n / 32 * 34, b1 = (size_t)n / 32 * 36;
    float *x = malloc(nx * sizeof *x);
    uint8_t *r0 = malloc((size_t)rows * b0), *r1 = malloc((size_t)rows * b1), *y = malloc(b1);
    int ok = x && r0 && r1 && y && fread(x, sizeof *x, nx, f) == nx && fread(r0, b0, (size_t)rows, f) == (size_t)rows &&
             fread(r1, b1, (size_t)rows, f) == (size_t)rows;
    fclose(f);
    CHECK(ok, "fixture truncated");
    /* the best SIMD level this CPU runs (its quantizers repeat the AVX2 ones or are tested against them) */
    const int lv = tl_cpu_detected_level();
    const bool simd = lv >= TL_CPU_LEVEL_AVX2;
    int bad_ref0 = 0, bad_ref1 = 0, bad_simd0 = 0, bad_simd1 = 0;
    for (int32_t i = 0; ok && i < rows; i++) {
        const float *xi = x + (size_t)i * (size_t)n;
        quant_q8_0_act_from_float_ref(xi, y, n);
        bad_ref0 += memcmp(y, r0 + (size_t)i * b0, b0) != 0;
        quant_q8_1_act_from_float_ref(xi, y, n);
        bad_ref1 += memcmp(y, r1 + (size_t)i * b1, b1) != 0;
        if (!simd) continue;
        quant_kernels_at(lv, TL_TYPE_Q8_0)->from_float(xi, y, n);
        bad_simd0 += memcmp(y, r0 + (size_t)i * b0, b0) != 0;
        quant_kernels_at(lv, TL_TYPE_Q8_1)->from_float(xi, y, n);
        bad_simd1 += memcmp(y, r1 + (size_t)i * b1, b1) != 0;
    }
    printf("  q8_0/q8_1 activations vs llama.cpp on %d rows: scalar twin %d/%d rows differ, %s %d/%d\n", rows,
           bad_ref0, bad_ref1, simd ? tl_cpu_level_name(lv) : "(no SIMD)", bad_simd0, bad_simd1);
    CHECK(bad_ref0 == 0 && bad_ref1 == 0, "scalar activation twins differ from llama.cpp");
    CHECK(bad_simd0 == 0 && bad_simd1 == 0, "SIMD activation quantizers differ from llama.cpp");
    free(x);
    free(r0);
    free(r1);
    free(y);
}

/* ------------------------------------------------------------- API */

static void test_api(void) {
    float x[32] = {0};
    uint8_t q[64];
    CHECK(quant_quantize(TL_TYPE_Q8_0, x, q, 31) == TL_ERR_INVALID, "non-multiple length accepted");
    CHECK(quant_dequantize(TL_TYPE_IQ2_XXS, q, x, 256) == TL_ERR_UNSUPPORTED, "iq2_xxs claimed");
    CHECK(strstr(tl_last_error(), "iq2_xxs") != NULL, "message names the type: %s", tl_last_error());
    CHECK(quant_kernels_get((tl_type)4) == NULL, "retired id 4 has kernels");
    CHECK(quant_kernels_get(TL_TYPE_Q4_1) && quant_kernels_get(TL_TYPE_Q4_1)->vec_dot_type == TL_TYPE_Q8_1,
          "q4_1 pairs with q8_1");
    CHECK(quant_kernels_get(TL_TYPE_Q4_0)->vec_dot_type == TL_TYPE_Q8_0, "q4_0 pairs with q8_0");
    CHECK(quant_kernels_get(TL_TYPE_F16)->vec_dot_type == TL_TYPE_F16, "f16 pairs with f16");
}

/* The public selection: every set up to the detected one can be chosen
 * and is what then runs; a higher one is refused and changes nothing. */
static void test_set_kernels(void) {
    const int top = tl_cpu_detected_level();
    const tl_cpu_kernels sets[] = {TL_CPU_KERNELS_SCALAR, TL_CPU_KERNELS_AVX2, TL_CPU_KERNELS_AVX512};
    for (int i = 0; i < 3; i++) {
        const int lv = TL_CPU_LEVEL_SCALAR + i;
        tl_status st = tl_cpu_set_kernels(sets[i]);
        if (lv <= top) {
            CHECK(st == TL_OK && strcmp(tl_cpu_kernel_set(), tl_cpu_level_name(lv)) == 0, "set %s: got %s",
                  tl_cpu_level_name(lv), tl_cpu_kernel_set());
            CHECK(quant_kernels_get(TL_TYPE_Q8_0) == quant_kernels_at(lv, TL_TYPE_Q8_0), "set %s: dispatch",
                  tl_cpu_level_name(lv));
        } else {
            CHECK(st == TL_ERR_UNSUPPORTED && strstr(tl_last_error(), tl_cpu_level_name(lv)),
                  "set %s on a %s CPU: %s", tl_cpu_level_name(lv), tl_cpu_level_name(top), tl_last_error());
        }
    }
    tl_cpu_kernels k;
    CHECK(tl_cpu_kernels_parse("avx3", &k) == TL_ERR_INVALID, "parse accepts 'avx3'");
    CHECK(tl_cpu_kernels_parse("avx512", &k) == TL_OK && k == TL_CPU_KERNELS_AVX512, "parse avx512");
    CHECK(tl_cpu_set_kernels((tl_cpu_kernels)7) == TL_ERR_INVALID, "set 7 accepted");
    CHECK(tl_cpu_set_kernels(TL_CPU_KERNELS_AUTO) == TL_OK && tl_cpu_level() == top, "auto is the detected level");
}

/* ----------------------------------------------------------- bench */

/* thread CPU time: the build machine is shared, wall time is noisy */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(void) {
    const tl_type ts[] = {TL_TYPE_Q4_0, TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_F16, TL_TYPE_Q4_K,
                          TL_TYPE_Q5_K, TL_TYPE_Q6_K};
    const int64_t n = 4096;
    printf("bench: single thread, rows of %lld (%s kernels)\n", (long long)n, tl_cpu_kernel_set());
    for (size_t k = 0; k < 2 * sizeof ts / sizeof ts[0]; k++) {
        /* first pass 32 rows (cache-resident: kernel speed), then 8192 rows
         * (>= 18 MB: weights stream from memory, as in decode) */
        const int64_t rows = k < sizeof ts / sizeof ts[0] ? 32 : 8192;
        if (k == 0 || k == sizeof ts / sizeof ts[0]) printf(" %lld rows:\n", (long long)rows);
        const tl_type t = ts[k % (sizeof ts / sizeof ts[0])];
        const quant_kernels *kf = quant_kernels_get(t);
        if (!kf || !kf->vec_dot) continue;
        const quant_kernels *kv = quant_kernels_get(kf->vec_dot_type);
        size_t rb = tl_row_bytes(t, n);
        uint8_t *w = malloc(rb * (size_t)rows);
        float *xf = malloc((size_t)n * sizeof(float));
        uint8_t *a = malloc(tl_row_bytes(kf->vec_dot_type, n));
        for (int64_t i = 0; i < n; i++) xf[i] = rng_gauss();
        for (int64_t r = 0; r < rows; r++) quant_quantize(t, xf, w + rb * (size_t)r, n);
        kv->from_float(xf, a, n);
        float sink = 0; /* printed below so the dots cannot be dropped */
        double t0 = now_s(), el;
        int passes = 0;
        do {
            for (int64_t r = 0; r < rows; r++) {
                float s;
                kf->vec_dot(n, &s, w + rb * (size_t)r, a);
                sink += s;
            }
            passes++;
            el = now_s() - t0;
        } while (el < 0.3);
        double gb = (double)rb * (double)rows * passes / el / 1e9;
        printf("  %-5s . %-5s %6.2f GB/s of weights, %6.2f Gelem/s  (checksum %g)\n", tl_type_name(t),
               tl_type_name(kf->vec_dot_type), gb, (double)n * (double)rows * passes / el / 1e9, (double)sink);
        free(w);
        free(xf);
        free(a);
    }
}

int main(void) {
    test_fp16();
    test_bf16();
    test_api();
    test_roundtrip();
    /* every kernel level this CPU runs against the scalar twins; the
     * levels it lacks are named as skipped */
    const int top = tl_cpu_detected_level();
    printf("kernel levels: this CPU runs up to %s\n", tl_cpu_level_name(top));
    for (int lv = TL_CPU_LEVEL_SCALAR; lv <= TL_CPU_LEVEL_AVX512; lv++) {
        if (lv > top) {
            printf("SKIP %s kernels: CPU lacks %s\n", tl_cpu_level_name(lv),
                   lv == TL_CPU_LEVEL_AVX2 ? "AVX2+FMA+F16C" : "AVX-512 F/BW/VL/VNNI");
            continue;
        }
        test_dots_level(lv);
        if (lv > TL_CPU_LEVEL_SCALAR) test_simd_from_float(lv);
    }
    test_q8_rules();
    test_q8_act_vs_llamacpp();
    test_set_kernels();
    const char *b = getenv("TALLOW_QUANT_BENCH");
    if (b && *b && strcmp(b, "0") != 0) bench();
    return test_finish();
}
