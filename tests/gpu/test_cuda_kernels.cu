/* tests/gpu/test_cuda_kernels: every CUDA kernel of src/backend/cuda against
 * its CPU twin, on random inputs, outputs poisoned with NaN before each run.
 * Built only with TALLOW_CUDA=ON and not registered with ctest (CI has no
 * GPU); bench/cuda_bench.sh runs it on the H200.
 *
 * Oracles: weights are random GGUF blocks (random quant bytes, random finite
 * scales) dequantized by quant_dequantize (src/quant, written independently
 * of these kernels, bit-exact with the GGUF spec); references are computed
 * in float64 on the CPU. Tolerances (relative L2 error unless noted):
 *  - float weights (F32/F16/BF16) matvec: 1e-5 (f32 accumulation);
 *  - quantized matvec: 2e-5 against W . dequant(q8_1(x)) (the exact function
 *    computed: int8 activations, f32 scales) and 2e-2 against W . x (the
 *    int8 activation rounding: ~0.4% per element, reported);
 *  - GEMM (f16 tensor cores, f32 accumulate): 3e-3;
 *  - rmsnorm / rope / silu / add: 1e-5; attention over f16 KV: 1e-4 against
 *    a reference using the same f16-rounded K and V;
 *  - get_rows: 1e-6; dequant to f16: 1e-3 (f16 rounding of the output).
 * With --bench: ceilings (copy bandwidth, f16 GEMM) and matvec timings on
 * Llama-3-8B shapes per type, as GB/s and fraction of the copy ceiling.
 * With --probe: only the persistent-chain probe (separate launches vs one
 * kernel with a grid barrier; each variant checked against the library). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "base/fp16.h"
#include "quant/quant.h"
}
#include "backend/cuda/cuda_common.cuh" /* the probe launches on the context's stream; tuning fields */

static int n_pass, n_fail, n_skip;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (cond) {                                                                               \
            n_pass++;                                                                             \
        } else {                                                                                  \
            n_fail++;                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
        }                                                                                         \
    } while (0)

#define OK(call)                                                                                  \
    do {                                                                                          \
        tl_status s_ = (call);                                                                    \
        if (s_ != TL_OK) {                                                                        \
            fprintf(stderr, "FATAL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,             \
                    tl_status_str(s_), tl_last_error());                                          \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* ---- random ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rnd_unif(void) { return (rnd_u32() >> 8) * (1.0f / 16777216.0f); }
static float rnd_normal(void) {
    float u1 = rnd_unif() + 1e-7f, u2 = rnd_unif();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* random raw GGUF data for n_out rows of n_in: random bytes, then every scale
 * field set to a random finite half so values stay in a sane range */
static std::vector<uint8_t> random_weight(tl_type t, int64_t n_in, int64_t n_out) {
    size_t row = tl_row_bytes(t, n_in);
    std::vector<uint8_t> w(row * n_out);
    if (t == TL_TYPE_F32 || t == TL_TYPE_F16 || t == TL_TYPE_BF16) {
        for (int64_t i = 0; i < n_in * n_out; i++) {
            float v = rnd_normal() * 0.05f;
            if (t == TL_TYPE_F32) memcpy(&w[i * 4], &v, 4);
            else {
                uint16_t h = t == TL_TYPE_F16 ? tl_fp32_to_fp16(v) : tl_fp32_to_bf16(v);
                memcpy(&w[i * 2], &h, 2);
            }
        }
        return w;
    }
    for (auto &b : w) b = (uint8_t)rnd_u32();
    const tl_type_info *ti = tl_type_get(t);
    size_t nblk = w.size() / ti->size;
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *p = &w[b * ti->size];
        auto seth = [&](size_t off, float v) {
            uint16_t h = tl_fp32_to_fp16(v);
            memcpy(p + off, &h, 2);
        };
        switch (t) {
        case TL_TYPE_Q4_0: case TL_TYPE_Q8_0: seth(0, (0.5f + rnd_unif()) * 0.01f); break;
        case TL_TYPE_Q4_1: seth(0, (0.5f + rnd_unif()) * 0.01f); seth(2, -0.08f * rnd_unif()); break;
        case TL_TYPE_Q4_K: seth(0, (0.5f + rnd_unif()) * 0.001f); seth(2, (0.5f + rnd_unif()) * 0.001f); break;
        case TL_TYPE_Q6_K: seth(208, (0.5f + rnd_unif()) * 0.001f); break;
        default: break;
        }
    }
    return w;
}

static bool cpu_dequant(tl_type t, const std::vector<uint8_t> &raw, int64_t n_in, int64_t n_out,
                        std::vector<float> &out) {
    out.resize((size_t)n_in * n_out);
    size_t row = tl_row_bytes(t, n_in);
    for (int64_t r = 0; r < n_out; r++)
        if (quant_dequantize(t, &raw[r * row], &out[r * n_in], n_in) != TL_OK) return false;
    return true;
}

static double rel_err(const float *a, const double *ref, size_t n, size_t *n_nan) {
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) { bad++; continue; }
        double d = a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (n_nan) *n_nan = bad;
    return bad ? INFINITY : sqrt(num / (den > 0 ? den : 1e-300));
}

/* q8_1 as the GPU computes it: per 32 values d = amax/127, q = rint(v/d) */
static void cpu_q8_1(const float *x, int64_t n, std::vector<float> &xq) {
    xq.resize(n);
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float d = amax / 127.0f;
        for (int i = 0; i < 32; i++) xq[b * 32 + i] = d > 0 ? d * nearbyintf(x[b * 32 + i] / d) : 0.0f;
    }
}

struct dbuf {
    void *p = nullptr;
    size_t n = 0;
    tlc_ctx *c = nullptr;
    dbuf(tlc_ctx *c_, size_t bytes, const char *what) : n(bytes), c(c_) { OK(tlc_alloc(c, bytes, what, &p)); }
    ~dbuf() { tlc_dfree(c, p, n); }
    float *f() { return (float *)p; }
    void poison() { OK(tlc_memset(c, p, 0xFF, n)); } /* all-ones bytes: NaN floats */
};

static void up(tlc_ctx *c, dbuf &d, const void *h, size_t n) { OK(tlc_upload(c, d.p, h, n)); }
static std::vector<float> down(tlc_ctx *c, dbuf &d, size_t n_floats) {
    std::vector<float> v(n_floats);
    OK(tlc_download(c, v.data(), d.p, n_floats * 4));
    return v;
}

/* a weight uploaded from raw GGUF data, with its device memory and the
 * staging buffer the upload used */
struct dweight {
    dbuf mem, stg;
    tlc_weight w;
    dweight(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out, const std::vector<uint8_t> &raw)
        : mem(c, tlc_weight_bytes(t, n_in, n_out), "w"), stg(c, raw.size(), "staging") {
        OK(tlc_weight_upload(c, &w, t, n_in, n_out, raw.data(), mem.p, stg.p));
    }
};

/* a random input x (n_in, normal) on the device with its q8_1 (act_prep
 * without a norm), the input most matvec checks feed */
struct dinput {
    std::vector<float> x;
    dbuf dx, dq;
    dinput(tlc_ctx *c, int64_t n_in) : x(n_in), dx(c, n_in * 4, "x"), dq(c, tlc_q8_bytes(n_in), "xq") {
        for (auto &v : x) v = rnd_normal();
        up(c, dx, x.data(), n_in * 4);
        OK(tlc_act_prep(c, dx.f(), NULL, 0, n_in, 1, NULL, dq.p));
    }
};

static const tl_type all_types[] = {TL_TYPE_F32, TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_Q4_0,
                                    TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_Q4_K, TL_TYPE_Q6_K};

static bool is_quant(tl_type t) { return !(t == TL_TYPE_F32 || t == TL_TYPE_F16 || t == TL_TYPE_BF16); }

/* ---- tests ------------------------------------------------------------------ */

static void test_weights(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out) {
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    std::vector<float> W;
    if (!cpu_dequant(t, raw, n_in, n_out, W)) {
        printf("  skip %-5s %lldx%lld: CPU dequantizer missing (%s)\n", tl_type_name(t),
               (long long)n_out, (long long)n_in, tl_last_error());
        n_skip++;
        return;
    }
    dweight dwt(c, t, n_in, n_out, raw);
    tlc_weight &w = dwt.w;

    std::vector<float> x(n_in), xq, acc0(n_out);
    for (auto &v : x) v = rnd_normal();
    for (auto &v : acc0) v = rnd_normal();
    cpu_q8_1(x.data(), n_in, xq);
    std::vector<double> ref(n_out), refq(n_out);
    for (int64_t r = 0; r < n_out; r++) {
        double s = 0, sq = 0;
        for (int64_t i = 0; i < n_in; i++) {
            s += (double)W[r * n_in + i] * x[i];
            sq += (double)W[r * n_in + i] * xq[i];
        }
        ref[r] = s;
        refq[r] = sq;
    }
    dbuf dx(c, n_in * 4, "x"), dq(c, tlc_q8_bytes(n_in), "xq"), dy(c, n_out * 4, "y");
    up(c, dx, x.data(), n_in * 4);
    OK(tlc_act_prep(c, dx.f(), NULL, 0, n_in, 1, NULL, dq.p));
    const double *r_exact = is_quant(t) ? refq.data() : ref.data();
    double tol = is_quant(t) ? 2e-5 : 1e-5;

    /* store */
    dy.poison();
    OK(tlc_matvec(c, &w, dx.f(), dq.p, dy.f(), TLC_MV_STORE));
    OK(tlc_sync(c));
    std::vector<float> y = down(c, dy, n_out);
    size_t nn;
    double e = rel_err(y.data(), r_exact, n_out, &nn);
    double e2 = rel_err(y.data(), ref.data(), n_out, NULL);
    CHECK(e < tol, "matvec %s %lldx%lld: rel err %.3g (tol %.1g), %zu non-finite", tl_type_name(t),
          (long long)n_out, (long long)n_in, e, tol, nn);
    CHECK(e2 < 2e-2, "matvec %s vs exact-x reference: %.3g", tl_type_name(t), e2);
    printf("  matvec %-5s %6lldx%-6lld rel err %.2e (vs f32-x ref %.2e)\n", tl_type_name(t),
           (long long)n_out, (long long)n_in, e, e2);

    /* accumulate */
    up(c, dy, acc0.data(), n_out * 4);
    OK(tlc_matvec(c, &w, dx.f(), dq.p, dy.f(), TLC_MV_ACCUM));
    y = down(c, dy, n_out);
    std::vector<double> ra(n_out);
    for (int64_t r = 0; r < n_out; r++) ra[r] = r_exact[r] + acc0[r];
    e = rel_err(y.data(), ra.data(), n_out, &nn);
    CHECK(e < tol, "matvec accum %s: %.3g, %zu non-finite", tl_type_name(t), e, nn);

    /* GLU: rows [0, m) gate, [m, 2m) up */
    if (n_out % 2 == 0) {
        int64_t m = n_out / 2;
        dy.poison();
        OK(tlc_matvec(c, &w, dx.f(), dq.p, dy.f(), TLC_MV_GLU));
        y = down(c, dy, m);
        std::vector<double> rg(m);
        for (int64_t i = 0; i < m; i++) {
            double g = r_exact[i], u = r_exact[i + m];
            rg[i] = g / (1.0 + exp(-g)) * u;
        }
        e = rel_err(y.data(), rg.data(), m, &nn);
        CHECK(e < 4 * tol, "matvec glu %s: %.3g, %zu non-finite", tl_type_name(t), e, nn);
    }

    /* get_rows */
    int32_t toks[3] = {0, (int32_t)(n_out - 1), (int32_t)(n_out / 2)};
    dbuf dt(c, sizeof toks, "toks"), dr(c, 3 * n_in * 4, "rows");
    up(c, dt, toks, sizeof toks);
    dr.poison();
    OK(tlc_get_rows(c, &w, (const int32_t *)dt.p, 3, dr.f()));
    std::vector<float> rows = down(c, dr, 3 * n_in);
    std::vector<double> rr(3 * n_in);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < n_in; i++) rr[k * n_in + i] = W[toks[k] * n_in + i];
    e = rel_err(rows.data(), rr.data(), 3 * n_in, &nn);
    CHECK(e < 1e-6, "get_rows %s: %.3g, %zu non-finite", tl_type_name(t), e, nn);

    /* GEMM: 37 tokens */
    const int64_t nt = 37;
    std::vector<float> X(nt * n_in);
    for (auto &v : X) v = rnd_normal();
    dbuf dX(c, X.size() * 4, "X"), dY(c, nt * n_out * 4, "Y"),
        scr(c, tlc_gemm_scratch_halves(&w, nt) * 2, "gemm scratch");
    up(c, dX, X.data(), X.size() * 4);
    dY.poison();
    OK(tlc_gemm(c, &w, dX.f(), nt, dY.f(), TLC_MV_STORE, scr.p));
    std::vector<float> Y = down(c, dY, nt * n_out);
    std::vector<double> RY(nt * n_out);
    for (int64_t tk = 0; tk < nt; tk++)
        for (int64_t r = 0; r < n_out; r++) {
            double s = 0;
            for (int64_t i = 0; i < n_in; i++) s += (double)W[r * n_in + i] * X[tk * n_in + i];
            RY[tk * n_out + r] = s;
        }
    e = rel_err(Y.data(), RY.data(), nt * n_out, &nn);
    double gtol = t == TL_TYPE_BF16 ? 1e-2 : (t == TL_TYPE_F32 ? 1e-5 : 3e-3); /* f32: SGEMM */
    CHECK(e < gtol, "gemm %s: %.3g (tol %.0e), %zu non-finite", tl_type_name(t), e, gtol, nn);
    printf("  gemm   %-5s %6lldx%-6lld x %lld tokens: rel err %.2e\n", tl_type_name(t), (long long)n_out,
           (long long)n_in, (long long)nt, e);
}

/* q8_1 blocks on the device against the rule applied on the CPU to the
 * values v the kernel quantized (d = amax/127 in float, q = rint(v/d)):
 * returns the number of quants, scales or sums that differ */
static int q8_mismatch(const std::vector<uint8_t> &q, const float *v, int64_t n) {
    const int8_t *qs = (const int8_t *)q.data();
    const float *ds = (const float *)(qs + n);
    int bad = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[b * 32 + i]));
        float d = amax / 127.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int qi = d > 0 ? (int)nearbyintf(v[b * 32 + i] / d) : 0;
            if (qs[b * 32 + i] != qi) bad++;
            sum += qs[b * 32 + i];
        }
        if (fabsf(ds[2 * b] - d) > 1e-6f * d) bad++;
        if (fabsf(ds[2 * b + 1] - d * sum) > 1e-5f * d * 32 * 127) bad++;
    }
    return bad;
}

/* The decode fusions: act_prep_ss -> matvec with the RMSNorm folded in
 * (STORE, GLU with the q8_1 epilogue) and ACCUM with the epilogue that
 * prepares the next norm. Oracle: float64 rmsnorm + dequantized weights. */
static void test_fused(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out) {
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    std::vector<float> W;
    if (!cpu_dequant(t, raw, n_in, n_out, W)) {
        n_skip++;
        return;
    }
    dweight dwt(c, t, n_in, n_out, raw);
    tlc_weight &w = dwt.w;
    const float eps = 1e-5f;
    std::vector<float> x(n_in), g(n_in), g2(n_out), y0(n_out);
    for (auto &v : x) v = rnd_normal() * 3.0f;
    for (auto &v : g) v = 1.0f + 0.2f * rnd_normal();
    for (auto &v : g2) v = 1.0f + 0.2f * rnd_normal();
    for (auto &v : y0) v = rnd_normal();
    /* references: xg = x o g, scale = rsqrt(mean x^2 + eps) */
    double ss = 0;
    for (float v : x) ss += (double)v * v;
    const double sc = 1.0 / sqrt(ss / n_in + eps);
    std::vector<float> xg(n_in), xgq;
    for (int64_t i = 0; i < n_in; i++) xg[i] = x[i] * g[i];
    cpu_q8_1(xg.data(), n_in, xgq);
    const float *xin = is_quant(t) ? xgq.data() : xg.data();
    std::vector<double> ref(n_out);
    for (int64_t r = 0; r < n_out; r++) {
        double s = 0;
        for (int64_t i = 0; i < n_in; i++) s += (double)W[r * n_in + i] * xin[i];
        ref[r] = s * sc;
    }
    dbuf dx(c, n_in * 4, "x"), dg(c, n_in * 4, "g"), dxf(c, n_in * 4, "xf"), dxq(c, tlc_q8_bytes(n_in), "xq"),
        dss(c, n_in / 32 * 4, "ss"), dy(c, n_out * 4, "y"), dg2(c, n_out * 4, "g2"), dyf(c, n_out * 4, "yf"),
        dyq(c, tlc_q8_bytes(n_out), "yq"), dyss(c, n_out / 32 * 4, "yss");
    up(c, dx, x.data(), n_in * 4);
    up(c, dg, g.data(), n_in * 4);
    up(c, dg2, g2.data(), n_out * 4);
    dxf.poison();
    dxq.poison();
    dss.poison();
    OK(tlc_act_prep_ss(c, dx.f(), dg.f(), n_in, 1, dxf.f(), dxq.p, dss.f()));
    /* the prep itself */
    std::vector<float> hxf = down(c, dxf, n_in), hss = down(c, dss, n_in / 32);
    std::vector<uint8_t> hq(tlc_q8_bytes(n_in));
    OK(tlc_download(c, hq.data(), dxq.p, hq.size()));
    int bad = q8_mismatch(hq, xg.data(), n_in);
    for (int64_t i = 0; i < n_in; i++) bad += hxf[i] != xg[i];
    for (int64_t b = 0; b < n_in / 32; b++) {
        double s = 0;
        for (int i = 0; i < 32; i++) s += (double)x[b * 32 + i] * x[b * 32 + i];
        bad += fabs(hss[b] - s) > 1e-5 * s;
    }
    CHECK(bad == 0, "act_prep_ss %lld: %d bad values", (long long)n_in, bad);

    const double tol = is_quant(t) ? 2e-5 : 1e-5;
    size_t nn;
    /* STORE with the norm folded in */
    tlc_mv_fuse fin = {};
    fin.in_ss = dss.f();
    fin.eps = eps;
    dy.poison();
    OK(tlc_matvec_fused(c, &w, dxf.f(), dxq.p, dy.f(), TLC_MV_STORE, &fin));
    std::vector<float> y = down(c, dy, n_out);
    double e = rel_err(y.data(), ref.data(), n_out, &nn);
    CHECK(e < tol, "fused norm matvec %s %lldx%lld: %.3g, %zu non-finite", tl_type_name(t), (long long)n_out,
          (long long)n_in, e, nn);

    /* ACCUM with the next-norm epilogue */
    up(c, dy, y0.data(), n_out * 4);
    dyf.poison();
    dyq.poison();
    dyss.poison();
    tlc_mv_fuse fe = fin;
    fe.out_norm = dg2.f();
    fe.out_f = dyf.f();
    fe.out_q = dyq.p;
    fe.out_ss = dyss.f();
    OK(tlc_matvec_fused(c, &w, dxf.f(), dxq.p, dy.f(), TLC_MV_ACCUM, &fe));
    y = down(c, dy, n_out);
    std::vector<double> ra(n_out);
    for (int64_t r = 0; r < n_out; r++) ra[r] = ref[r] + y0[r];
    double e_acc = rel_err(y.data(), ra.data(), n_out, &nn);
    std::vector<float> yf = down(c, dyf, n_out), yss = down(c, dyss, n_out / 32), yg(n_out);
    std::vector<uint8_t> yq(tlc_q8_bytes(n_out));
    OK(tlc_download(c, yq.data(), dyq.p, yq.size()));
    int bad_e = 0;
    for (int64_t r = 0; r < n_out; r++) {
        yg[r] = y[r] * g2[r];
        bad_e += yf[r] != yg[r];
    }
    bad_e += q8_mismatch(yq, yg.data(), n_out);
    for (int64_t b = 0; b < n_out / 32; b++) {
        double s = 0;
        for (int i = 0; i < 32; i++) s += (double)y[b * 32 + i] * y[b * 32 + i];
        bad_e += fabs(yss[b] - s) > 1e-5 * s;
    }
    CHECK(e_acc < tol && bad_e == 0, "fused accum+epilogue %s %lldx%lld: %.3g, %d bad epilogue values",
          tl_type_name(t), (long long)n_out, (long long)n_in, e_acc, bad_e);

    /* the same with each block quantizing the f32 input itself (in_q8, how
     * the down projection reads the GLU output): act_prep's bytes, so y, the
     * epilogue's f32/q8_1/sums must be bit-identical to the same launch
     * reading act_prep's q8_1 */
    const bool iq = tlc_mv_in_q8_ok(&w);
    int diff_iq = 0, n_iq = 0;
    const int keep_ks = c->mv_ks, kss[2] = {1, keep_ks};
    /* unsplit, and with the rows split over a cluster as the engine may
     * (each split sums in its own order: the reference runs alike) */
    for (int j = 0; iq && j < (keep_ks > 1 ? 2 : 1); j++) {
        c->mv_ks = kss[j];
        up(c, dy, y0.data(), n_out * 4);
        OK(tlc_matvec_fused(c, &w, dxf.f(), dxq.p, dy.f(), TLC_MV_ACCUM, &fe));
        y = down(c, dy, n_out);
        yf = down(c, dyf, n_out);
        yss = down(c, dyss, n_out / 32);
        OK(tlc_download(c, yq.data(), dyq.p, yq.size()));
        up(c, dy, y0.data(), n_out * 4);
        dyf.poison();
        dyq.poison();
        dyss.poison();
        tlc_mv_fuse fi = fe;
        fi.in_q8 = true;
        OK(tlc_matvec_fused(c, &w, dxf.f(), NULL, dy.f(), TLC_MV_ACCUM, &fi));
        std::vector<float> y2 = down(c, dy, n_out), yf2 = down(c, dyf, n_out), yss2 = down(c, dyss, n_out / 32);
        std::vector<uint8_t> yq2(yq.size());
        OK(tlc_download(c, yq2.data(), dyq.p, yq2.size()));
        diff_iq += memcmp(y2.data(), y.data(), n_out * 4) != 0;
        diff_iq += memcmp(yf2.data(), yf.data(), n_out * 4) != 0;
        diff_iq += memcmp(yss2.data(), yss.data(), n_out / 32 * 4) != 0;
        diff_iq += memcmp(yq2.data(), yq.data(), yq.size()) != 0;
        n_iq += 4;
    }
    c->mv_ks = keep_ks;
    if (iq)
        CHECK(diff_iq == 0, "in-block q8 input %s %lldx%lld: %d of %d outputs differ from the act_prep path",
              tl_type_name(t), (long long)n_out, (long long)n_in, diff_iq, n_iq);

    /* GLU with the norm folded in and the q8_1 epilogue */
    const int64_t m = n_out / 2;
    std::vector<double> rg(m);
    for (int64_t i = 0; i < m; i++) rg[i] = ref[i] / (1.0 + exp(-ref[i])) * ref[i + m];
    tlc_mv_fuse fg = fin;
    fg.out_q = dyq.p;
    dy.poison();
    dyq.poison();
    OK(tlc_matvec_fused(c, &w, dxf.f(), dxq.p, dy.f(), TLC_MV_GLU, &fg));
    y = down(c, dy, m);
    double e_glu = rel_err(y.data(), rg.data(), m, &nn);
    std::vector<uint8_t> gq(tlc_q8_bytes(m));
    OK(tlc_download(c, gq.data(), dyq.p, gq.size()));
    int bad_g = q8_mismatch(gq, y.data(), m);
    CHECK(e_glu < 4 * tol && bad_g == 0, "fused glu+q8 %s %lldx%lld: %.3g, %d bad quants", tl_type_name(t),
          (long long)n_out, (long long)n_in, e_glu, bad_g);
    printf("  fused %-5s %6lldx%-6lld norm-fold %.2e, accum+epilogue %.2e, glu+q8 %.2e (%d bad)%s\n",
           tl_type_name(t), (long long)n_out, (long long)n_in, e, e_acc, e_glu, bad + bad_e + bad_g,
           iq && diff_iq == 0 ? ", in-block q8 input identical" : "");
}

static void test_norm_prep(tlc_ctx *c) {
    const int64_t n = 4096, rows = 3;
    std::vector<float> x(n * rows), w(n);
    for (auto &v : x) v = rnd_normal() * 3.0f;
    for (auto &v : w) v = 1.0f + 0.1f * rnd_normal();
    dbuf dx(c, x.size() * 4, "x"), dw(c, n * 4, "w"), df(c, x.size() * 4, "f"),
        dq(c, tlc_q8_bytes(n) * rows, "q");
    up(c, dx, x.data(), x.size() * 4);
    up(c, dw, w.data(), n * 4);
    df.poison();
    dq.poison();
    OK(tlc_act_prep(c, dx.f(), dw.f(), 1e-5f, n, rows, df.f(), dq.p));
    std::vector<float> f = down(c, df, x.size());
    std::vector<uint8_t> q(tlc_q8_bytes(n) * rows);
    OK(tlc_download(c, q.data(), dq.p, q.size()));
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        double sc = 1.0 / sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; i++) ref[r * n + i] = x[r * n + i] * sc * w[i];
    }
    size_t nn;
    double e = rel_err(f.data(), ref.data(), ref.size(), &nn);
    CHECK(e < 1e-5, "rmsnorm: %.3g, %zu non-finite", e, nn);
    /* q8_1: |dequant - v| <= d/2 and the stored sum matches */
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *qs = (const int8_t *)&q[r * tlc_q8_bytes(n)];
        const float *ds = (const float *)(qs + n);
        for (int64_t b = 0; b < n / 32; b++) {
            float d = ds[2 * b];
            int sum = 0;
            for (int i = 0; i < 32; i++) {
                double v = ref[r * n + b * 32 + i];
                sum += qs[b * 32 + i];
                if (fabs(d * qs[b * 32 + i] - v) > d * 0.5 + 1e-6 * fabs(v)) bad++;
            }
            if (fabs(ds[2 * b + 1] - d * sum) > 1e-5 * fabs(d) * 32 * 127) bad++;
        }
    }
    CHECK(bad == 0, "act_prep q8_1: %d bad values", bad);
    printf("  rmsnorm+q8_1 prep: rel err %.2e, %d bad quants\n", e, bad);
}

static void test_rope(tlc_ctx *c, bool neox, bool ffac) {
    const int nt = 5, nh = 4, hd = 128, n_rot = 128;
    const float base = 500000.0f, scale = 2.0f;
    const int32_t pos0 = 1000;
    std::vector<float> x(nt * nh * hd), ff(n_rot / 2);
    for (auto &v : x) v = rnd_normal();
    for (auto &v : ff) v = 1.0f + 7.0f * rnd_unif();
    dbuf dx(c, x.size() * 4, "x"), dp(c, 4, "pos"), dff(c, ff.size() * 4, "ff");
    up(c, dx, x.data(), x.size() * 4);
    up(c, dp, &pos0, 4);
    up(c, dff, ff.data(), ff.size() * 4);
    tlc_rope_params p = {n_rot, neox, base, scale, ffac ? dff.f() : NULL};
    OK(tlc_rope(c, dx.f(), nt, 0, nh, hd, (const int32_t *)dp.p, &p));
    std::vector<float> y = down(c, dx, x.size());
    std::vector<double> ref(x.begin(), x.end());
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < n_rot / 2; i++) {
                double th = (pos0 + t) / (double)scale * pow(base, -2.0 * i / n_rot);
                if (ffac) th /= ff[i];
                int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
                double *r = &ref[(t * nh + h) * hd];
                const float *xi = &x[(t * nh + h) * hd];
                r[a] = xi[a] * cos(th) - xi[b] * sin(th);
                r[b] = xi[a] * sin(th) + xi[b] * cos(th);
            }
    size_t nn;
    double e = rel_err(y.data(), ref.data(), ref.size(), &nn);
    /* f32 angles at position ~1000: |theta| error ~ 1e-4 rad at worst */
    CHECK(e < 2e-4, "rope neox=%d ff=%d: %.3g, %zu non-finite", neox, ffac, e, nn);
    printf("  rope   %s%s: rel err %.2e\n", neox ? "neox" : "norm", ffac ? "+freq_factors" : "", e);
}

static void test_elem(tlc_ctx *c) {
    const int64_t n = 100003;
    std::vector<float> a(n), b(n);
    for (auto &v : a) v = rnd_normal() * 4;
    for (auto &v : b) v = rnd_normal();
    dbuf da(c, n * 4, "a"), db(c, n * 4, "b"), dout(c, n * 4, "o"), di(c, 4, "i");
    up(c, da, a.data(), n * 4);
    up(c, db, b.data(), n * 4);
    std::vector<double> r(n);
    size_t nn;
    dout.poison();
    OK(tlc_add(c, da.f(), db.f(), dout.f(), n));
    std::vector<float> o = down(c, dout, n);
    for (int64_t i = 0; i < n; i++) r[i] = (double)a[i] + b[i];
    CHECK(rel_err(o.data(), r.data(), n, &nn) < 1e-7, "add");
    dout.poison();
    OK(tlc_silu_mul(c, da.f(), db.f(), dout.f(), n));
    o = down(c, dout, n);
    for (int64_t i = 0; i < n; i++) r[i] = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
    double e = rel_err(o.data(), r.data(), n, &nn);
    CHECK(e < 1e-6, "silu_mul: %.3g", e);
    /* argmax with a tie: the lower index wins */
    a[77777] = 100.0f;
    a[88888] = 100.0f;
    up(c, da, a.data(), n * 4);
    OK(tlc_memset(c, di.p, 0xFF, 4));
    OK(tlc_argmax(c, da.f(), n, (int32_t *)di.p));
    int32_t am = -1;
    OK(tlc_download(c, &am, di.p, 4));
    CHECK(am == 77777, "argmax: %d", am);
    /* vocabulary-sized, odd length, misaligned start: ties within one
     * thread's stride (4096 apart), across threads, and a maximum in the tail */
    {
        const int64_t nv = 128259;
        std::vector<float> lg(nv + 1);
        for (auto &v : lg) v = rnd_normal();
        dbuf dl(c, (nv + 1) * 4, "logits");
        struct { int64_t a, b, want; } cases[] = {{5000, 5000 + 4096, 5000}, {70001, 70002, 70001},
                                                  {nv - 1, 3, 3}, {nv - 2, nv - 1, nv - 2}};
        int bad = 0;
        for (auto &cs : cases) {
            std::vector<float> h = lg;
            h[1 + cs.a] = 50.0f;
            h[1 + cs.b] = 50.0f;
            up(c, dl, h.data(), (nv + 1) * 4);
            for (int off = 0; off < 2; off++) {
                OK(tlc_memset(c, di.p, 0xFF, 4));
                OK(tlc_argmax(c, dl.f() + 1 - off, nv, (int32_t *)di.p));
                OK(tlc_download(c, &am, di.p, 4));
                /* off 1: the aligned view starts one value earlier, so the
                 * maxima sit one index later (a maximum at nv falls outside) */
                if (am != cs.want + off) bad++;
            }
        }
        CHECK(bad == 0, "argmax over %lld values: %d wrong", (long long)nv, bad);
    }
}

static void test_attention(tlc_ctx *c, int hd, int nh, int nkv, int n_ctx, int pos, bool f16, int n_tok,
                           int64_t plan = 0) {
    /* fill cache positions [0, pos + n_tok) through kv_store in two batches,
     * then attend with n_tok queries at pos.. (prefill) or one (decode,
     * under tlc_attn_plan(plan): the launch shape the plan picks must give
     * the same result at any length, even one past the plan) */
    int G = nh / nkv;
    size_t cache = (size_t)nkv * n_ctx * hd;
    tl_type kt = f16 ? TL_TYPE_F16 : TL_TYPE_F32;
    size_t es = f16 ? 2 : 4;
    int total = pos + n_tok;
    std::vector<float> K((size_t)total * nkv * hd), V(K.size()), Q((size_t)n_tok * nh * hd);
    for (auto &v : K) v = rnd_normal();
    for (auto &v : V) v = rnd_normal();
    for (auto &v : Q) v = rnd_normal();
    dbuf dk(c, cache * es, "kc"), dv(c, cache * es, "vc"), dK(c, K.size() * 4, "K"), dV(c, V.size() * 4, "V"),
        dq(c, Q.size() * 4, "q"), dout(c, Q.size() * 4, "out"), dp(c, 4, "pos"),
        scr(c, tlc_attn_decode_scratch(nh, hd) * 4, "scratch");
    up(c, dK, K.data(), K.size() * 4);
    up(c, dV, V.data(), V.size() * 4);
    up(c, dq, Q.data(), Q.size() * 4);
    int32_t p0 = 0;
    up(c, dp, &p0, 4);
    OK(tlc_kv_store(c, dK.f(), dV.f(), total, 0, nkv, hd, dk.p, dv.p, kt, n_ctx, (const int32_t *)dp.p));
    up(c, dp, &pos, 4);
    float scale = 1.0f / sqrtf((float)hd);
    dout.poison();
    dbuf dq8(c, tlc_q8_bytes((int64_t)nh * hd), "out q8");
    if (n_tok == 1) {
        tlc_attn_plan(c, plan);
        OK(tlc_attn_decode(c, dq.f(), dk.p, dv.p, kt, nh, nkv, hd, n_ctx, (const int32_t *)dp.p, scale,
                           scr.f(), dout.f(), dq8.p));
        tlc_attn_plan(c, 0);
    } else
        OK(tlc_attn_prefill(c, dq.f(), 0, dk.p, dv.p, kt, nh, nkv, hd, n_ctx, n_tok, (const int32_t *)dp.p,
                            scale, dout.f()));
    std::vector<float> o = down(c, dout, Q.size());
    auto rq = [&](float v) { return f16 ? (double)tl_fp16_to_fp32(tl_fp32_to_fp16(v)) : (double)v; };
    std::vector<double> ref(Q.size());
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < nh; h++) {
            int kh = h / G, len = pos + t + 1;
            std::vector<double> s(len);
            double mx = -1e300;
            for (int p = 0; p < len; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)Q[((size_t)t * nh + h) * hd + i] * rq(K[((size_t)p * nkv + kh) * hd + i]);
                s[p] = d * scale;
                mx = std::max(mx, s[p]);
            }
            double l = 0;
            for (int p = 0; p < len; p++) l += (s[p] = exp(s[p] - mx));
            for (int i = 0; i < hd; i++) {
                double a = 0;
                for (int p = 0; p < len; p++) a += s[p] * rq(V[((size_t)p * nkv + kh) * hd + i]);
                ref[((size_t)t * nh + h) * hd + i] = a / l;
            }
        }
    if (n_tok == 1) { /* the fused q8_1 output: |d q - out| <= d/2 per value */
        std::vector<uint8_t> q8(tlc_q8_bytes((int64_t)nh * hd));
        OK(tlc_download(c, q8.data(), dq8.p, q8.size()));
        const int8_t *qs = (const int8_t *)q8.data();
        const float *ds = (const float *)(qs + (size_t)nh * hd);
        int bad = 0;
        for (size_t i = 0; i < (size_t)nh * hd; i++)
            if (!(fabs(ds[2 * (i / 32)] * qs[i] - o[i]) <= 0.5 * ds[2 * (i / 32)] + 1e-6)) bad++;
        CHECK(bad == 0, "attention q8_1 output: %d bad values", bad);
    }
    size_t nn;
    double e = rel_err(o.data(), ref.data(), ref.size(), &nn);
    /* the tensor-core prompt path rounds Q and the softmax weights to f16
     * (10-bit mantissa: ~5e-4 relative each); the f32 walks stay at 1e-4 */
    const bool flash = n_tok > 1 && tlc_flash_prefill_supported(c, kt, hd);
    const double tol = flash ? 2e-3 : 1e-4;
    CHECK(e < tol, "attention hd=%d heads=%d/%d pos=%d f16=%d n_tok=%d plan %lld: %.3g (tol %.0e), %zu non-finite",
          hd, nh, nkv, pos, f16, n_tok, (long long)plan, e, tol, nn);
    printf("  attn   %s hd=%d heads %d/%d pos %d n_tok %d %s%s plan %lld: rel err %.2e\n",
           n_tok == 1 ? "decode " : "prefill", hd, nh, nkv, pos, n_tok, f16 ? "f16" : "f32",
           flash ? " (tensor cores)" : "", (long long)plan, e);
}

/* f16 cache values where k2 differs from k1 by more than 1e-3 relative, or
 * v2 from v1 (bit for bit when v_exact) */
static int cache_diffs(tlc_ctx *c, dbuf &k1, dbuf &k2, dbuf &v1, dbuf &v2, size_t bytes, bool v_exact) {
    std::vector<uint16_t> h[4] = {std::vector<uint16_t>(bytes / 2), std::vector<uint16_t>(bytes / 2),
                                  std::vector<uint16_t>(bytes / 2), std::vector<uint16_t>(bytes / 2)};
    dbuf *src[4] = {&k1, &k2, &v1, &v2};
    for (int j = 0; j < 4; j++) OK(tlc_download(c, h[j].data(), src[j]->p, bytes));
    auto far = [](uint16_t a, uint16_t b) {
        const float fa = tl_fp16_to_fp32(a), fb = tl_fp16_to_fp32(b);
        return fabsf(fa - fb) > 1e-3f * fabsf(fb) + 1e-6f;
    };
    int bad = 0;
    for (size_t i = 0; i < bytes / 2; i++)
        if (far(h[0][i], h[1][i]) || (v_exact ? h[2][i] != h[3][i] : far(h[2][i], h[3][i]))) bad++;
    return bad;
}

static void test_rope_kv(tlc_ctx *c, bool neox) {
    /* the fused decode op must equal rope (tested against float64 above) +
     * kv_store on the same inputs: q/k rotated in place, k/v in the cache */
    const int nh = 8, nkv = 2, hd = 64, n_ctx = 64;
    const int32_t pos = 17;
    const int n = (nh + 2 * nkv) * hd;
    std::vector<float> x(n), ff(hd / 2);
    for (auto &v : x) v = rnd_normal();
    for (auto &v : ff) v = 1.0f + 3.0f * rnd_unif();
    size_t cache = (size_t)nkv * n_ctx * hd * 2;
    dbuf a(c, n * 4, "a"), b(c, n * 4, "b"), dp(c, 4, "pos"), dff(c, ff.size() * 4, "ff"), k1(c, cache, "k1"),
        v1(c, cache, "v1"), k2(c, cache, "k2"), v2(c, cache, "v2");
    up(c, a, x.data(), n * 4);
    up(c, b, x.data(), n * 4);
    up(c, dp, &pos, 4);
    up(c, dff, ff.data(), ff.size() * 4);
    for (dbuf *d : {&k1, &v1, &k2, &v2}) OK(tlc_memset(c, d->p, 0, cache));
    tlc_rope_params p = {hd, neox, 10000.0f, 1.0f, dff.f()};
    OK(tlc_rope_kv(c, a.f(), nh, nkv, hd, k1.p, v1.p, n_ctx, (const int32_t *)dp.p, &p));
    OK(tlc_rope(c, b.f(), 1, 0, nh + nkv, hd, (const int32_t *)dp.p, &p));
    OK(tlc_kv_store(c, b.f() + nh * hd, b.f() + (nh + nkv) * hd, 1, 0, nkv, hd, k2.p, v2.p, TL_TYPE_F16, n_ctx,
                    (const int32_t *)dp.p));
    std::vector<float> ya = down(c, a, n), yb = down(c, b, n);
    /* tolerance: the two kernels may contract the rotation's mul/add into
     * FMAs differently (1 ulp), and the cache holds f16 */
    double dmax = 0;
    for (int i = 0; i < (nh + nkv) * hd; i++) dmax = std::max(dmax, (double)fabsf(ya[i] - yb[i]));
    CHECK(dmax < 1e-5, "rope_kv q/k differ from rope by %.3g", dmax);
    const int bad = cache_diffs(c, k1, k2, v1, v2, cache, true);
    CHECK(bad == 0, "rope_kv cache differs from kv_store in %d values", bad);
}

/* The Qwen decode prologue as separate launches (tlc_add_bias, per-head
 * tlc_head_rmsnorm of the q and the k heads, tlc_rope_kv: what a decode
 * step runs where neither fused form applies) against float64: q and k
 * rotated in place (1e-5 relative), v biased, and the f16 cache rows at
 * *d_pos (within f16 rounding of the float64 values), with and without each
 * part. */
static void test_qk_prologue(tlc_ctx *c, int hd, int nh, int nkv, bool neox, bool with_bias, bool with_norm) {
    tlc_rope_params p = {hd, neox, 1000000.0f, 1.0f, NULL};
    const int n_ctx = 16, nt = nh + 2 * nkv, n = nt * hd;
    const int32_t pos = 11;
    const float eps = 1e-6f;
    std::vector<float> x(n), b(n), qn(hd), kn(hd);
    for (auto &v : x) v = 3.0f * rnd_normal();
    for (auto &v : b) v = rnd_normal();
    for (auto &v : qn) v = 0.5f + rnd_unif();
    for (auto &v : kn) v = 0.5f + rnd_unif();
    const size_t cache = (size_t)nkv * n_ctx * hd * 2;
    dbuf dx(c, n * 4, "qkv"), db(c, n * 4, "bias"), dqn(c, hd * 4, "q_norm"), dkn(c, hd * 4, "k_norm"),
        dp(c, 4, "pos"), dk(c, cache, "kc"), dv(c, cache, "vc");
    up(c, dx, x.data(), n * 4);
    up(c, db, b.data(), n * 4);
    up(c, dqn, qn.data(), hd * 4);
    up(c, dkn, kn.data(), hd * 4);
    up(c, dp, &pos, 4);
    OK(tlc_memset(c, dk.p, 0, cache));
    OK(tlc_memset(c, dv.p, 0, cache));
    if (with_bias) OK(tlc_add_bias(c, dx.f(), 1, 0, db.f(), n));
    if (with_norm) {
        OK(tlc_head_rmsnorm(c, dx.f(), 1, 0, nh, hd, dqn.f(), eps));
        OK(tlc_head_rmsnorm(c, dx.f() + (size_t)nh * hd, 1, 0, nkv, hd, dkn.f(), eps));
    }
    OK(tlc_rope_kv(c, dx.f(), nh, nkv, hd, dk.p, dv.p, n_ctx, (const int32_t *)dp.p, &p));
    /* float64: bias, norm (q and k heads), rotation (q and k heads) */
    std::vector<double> ref(n);
    for (int i = 0; i < n; i++) ref[i] = (double)x[i] + (with_bias ? b[i] : 0.0);
    const int half = hd / 2;
    for (int h = 0; h < nh + nkv; h++) {
        double *r = &ref[(size_t)h * hd];
        if (with_norm) {
            double ss = 0;
            for (int i = 0; i < hd; i++) ss += r[i] * r[i];
            const double sc = 1.0 / sqrt(ss / hd + eps);
            for (int i = 0; i < hd; i++) r[i] = r[i] * sc * (h < nh ? qn[i] : kn[i]);
        }
        for (int q = 0; q < half; q++) {
            const int a = neox ? q : 2 * q, bb = neox ? q + half : 2 * q + 1;
            const double th = pos * pow(1000000.0, -2.0 * q / hd), x0 = r[a], x1 = r[bb];
            r[a] = x0 * cos(th) - x1 * sin(th);
            r[bb] = x0 * sin(th) + x1 * cos(th);
        }
    }
    std::vector<float> got = down(c, dx, n);
    size_t nn;
    const double e = rel_err(got.data(), ref.data(), n, &nn);
    std::vector<uint16_t> kh(cache / 2), vh(cache / 2);
    OK(tlc_download(c, kh.data(), dk.p, cache));
    OK(tlc_download(c, vh.data(), dv.p, cache));
    int bad = 0;
    for (int h = 0; h < nkv; h++)
        for (int i = 0; i < hd; i++) {
            const size_t ci = ((size_t)h * n_ctx + pos) * hd + i;
            const double rk = ref[(size_t)(nh + h) * hd + i], rv = ref[(size_t)(nh + nkv + h) * hd + i];
            if (fabs(tl_fp16_to_fp32(kh[ci]) - rk) > 1e-3 * fabs(rk) + 1e-4) bad++;
            if (fabs(tl_fp16_to_fp32(vh[ci]) - rv) > 1e-3 * fabs(rv) + 1e-4) bad++;
        }
    CHECK(e < 1e-5 && bad == 0, "qk prologue hd %d heads %d/%d neox %d bias %d norm %d: rel err %.3g (%zu non-finite), "
          "%d cache values off", hd, nh, nkv, neox, with_bias, with_norm, e, nn, bad);
    printf("  qk prologue hd %3d heads %2d/%d neox %d bias %d norm %d: rel err %.2e, %d cache values off\n", hd, nh, nkv,
           neox, with_bias, with_norm, e, bad);
}

/* The Qwen decode prologue in one launch (tlc_qk_rope_kv: bias, per-head
 * q/k RMSNorm, RoPE, KV store) against float64: q and k rotated in place
 * (1e-5 relative), v biased, and the f16 cache rows at *d_pos (within f16
 * rounding of the float64 values), with and without each part. */
static void test_qk_rope_kv(tlc_ctx *c, int hd, int nh, int nkv, bool neox, bool with_bias, bool with_norm) {
    tlc_rope_params p = {hd, neox, 1000000.0f, 1.0f, NULL};
    if (!tlc_qk_rope_kv_ok(c, hd, &p)) {
        printf("  skip qk+rope+kv hd %d: not this head size\n", hd);
        n_skip++;
        return;
    }
    const int n_ctx = 16, nt = nh + 2 * nkv, n = nt * hd;
    const int32_t pos = 11;
    const float eps = 1e-6f;
    std::vector<float> x(n), b(n), qn(hd), kn(hd);
    for (auto &v : x) v = 3.0f * rnd_normal();
    for (auto &v : b) v = rnd_normal();
    for (auto &v : qn) v = 0.5f + rnd_unif();
    for (auto &v : kn) v = 0.5f + rnd_unif();
    const size_t cache = (size_t)nkv * n_ctx * hd * 2;
    dbuf dx(c, n * 4, "qkv"), db(c, n * 4, "bias"), dqn(c, hd * 4, "q_norm"), dkn(c, hd * 4, "k_norm"),
        dp(c, 4, "pos"), dk(c, cache, "kc"), dv(c, cache, "vc");
    up(c, dx, x.data(), n * 4);
    up(c, db, b.data(), n * 4);
    up(c, dqn, qn.data(), hd * 4);
    up(c, dkn, kn.data(), hd * 4);
    up(c, dp, &pos, 4);
    OK(tlc_memset(c, dk.p, 0, cache));
    OK(tlc_memset(c, dv.p, 0, cache));
    OK(tlc_qk_rope_kv(c, dx.f(), nh, nkv, hd, dk.p, dv.p, n_ctx, (const int32_t *)dp.p, &p, with_bias ? db.f() : NULL,
                      with_norm ? dqn.f() : NULL, with_norm ? dkn.f() : NULL, eps));
    /* float64: bias, norm (q and k heads), rotation (q and k heads) */
    std::vector<double> ref(n);
    for (int i = 0; i < n; i++) ref[i] = (double)x[i] + (with_bias ? b[i] : 0.0);
    const int half = hd / 2;
    for (int h = 0; h < nh + nkv; h++) {
        double *r = &ref[(size_t)h * hd];
        if (with_norm) {
            double ss = 0;
            for (int i = 0; i < hd; i++) ss += r[i] * r[i];
            const double sc = 1.0 / sqrt(ss / hd + eps);
            for (int i = 0; i < hd; i++) r[i] = r[i] * sc * (h < nh ? qn[i] : kn[i]);
        }
        for (int q = 0; q < half; q++) {
            const int a = neox ? q : 2 * q, bb = neox ? q + half : 2 * q + 1;
            const double th = pos * pow(1000000.0, -2.0 * q / hd), x0 = r[a], x1 = r[bb];
            r[a] = x0 * cos(th) - x1 * sin(th);
            r[bb] = x0 * sin(th) + x1 * cos(th);
        }
    }
    std::vector<float> got = down(c, dx, n);
    size_t nn;
    const double e = rel_err(got.data(), ref.data(), n, &nn);
    std::vector<uint16_t> kh(cache / 2), vh(cache / 2);
    OK(tlc_download(c, kh.data(), dk.p, cache));
    OK(tlc_download(c, vh.data(), dv.p, cache));
    int bad = 0;
    for (int h = 0; h < nkv; h++)
        for (int i = 0; i < hd; i++) {
            const size_t ci = ((size_t)h * n_ctx + pos) * hd + i;
            const double rk = ref[(size_t)(nh + h) * hd + i], rv = ref[(size_t)(nh + nkv + h) * hd + i];
            if (fabs(tl_fp16_to_fp32(kh[ci]) - rk) > 1e-3 * fabs(rk) + 1e-4) bad++;
            if (fabs(tl_fp16_to_fp32(vh[ci]) - rv) > 1e-3 * fabs(rv) + 1e-4) bad++;
        }
    CHECK(e < 1e-5 && bad == 0, "qk+rope+kv hd %d heads %d/%d neox %d bias %d norm %d: rel err %.3g (%zu non-finite), "
          "%d cache values off", hd, nh, nkv, neox, with_bias, with_norm, e, nn, bad);
    printf("  qk+rope+kv hd %3d heads %2d/%d neox %d bias %d norm %d: rel err %.2e, %d cache values off\n", hd, nh, nkv,
           neox, with_bias, with_norm, e, bad);
}

/* The attention with the decode prologue folded in (tlc_attn_decode_pro)
 * against tlc_qk_rope_kv followed by tlc_attn_decode (both checked against
 * float64 above), from the same raw [q | k | v] row and cache: the output
 * and the cache row at *d_pos within 1e-5 relative (the q/k norms sum
 * their squares in another order; without norms the same bytes), under the
 * short plan and the long one (positions past a warp's first batch). */
static void test_attn_pro(tlc_ctx *c, int hd, int nh, int nkv, bool neox, bool with_bias, bool with_norm,
                          int pos, int64_t plan, int n_ctx) {
    tlc_rope_params p = {hd, neox, 1000000.0f, 1.0f, NULL};
    if (!tlc_attn_pro_ok(c, hd, &p) || !tlc_qk_rope_kv_ok(c, hd, &p)) {
        printf("  skip attention+prologue hd %d: not this head size\n", hd);
        n_skip++;
        return;
    }
    const int n = (nh + 2 * nkv) * hd;
    const float eps = 1e-6f, scale = 1.0f / sqrtf((float)hd);
    std::vector<float> x(n), b(n), qn(hd), kn(hd);
    for (auto &v : x) v = 2.0f * rnd_normal();
    for (auto &v : b) v = rnd_normal();
    for (auto &v : qn) v = 0.5f + rnd_unif();
    for (auto &v : kn) v = 0.5f + rnd_unif();
    const size_t cache = (size_t)nkv * n_ctx * hd * 2;
    std::vector<uint16_t> kvh(cache / 2);
    dbuf x0(c, n * 4, "qkv 0"), x1(c, n * 4, "qkv 1"), db(c, n * 4, "bias"), dqn(c, hd * 4, "q_norm"),
        dkn(c, hd * 4, "k_norm"), dp(c, 4, "pos"), k0(c, cache, "k0"), v0(c, cache, "v0"), k1(c, cache, "k1"),
        v1(c, cache, "v1"), o0(c, (size_t)nh * hd * 4, "o0"), o1(c, (size_t)nh * hd * 4, "o1"),
        q0(c, tlc_q8_bytes((int64_t)nh * hd), "o0 q8"), q1(c, tlc_q8_bytes((int64_t)nh * hd), "o1 q8"),
        scr(c, tlc_attn_decode_scratch(nh, hd) * 4, "scratch");
    up(c, x0, x.data(), n * 4);
    up(c, x1, x.data(), n * 4);
    up(c, db, b.data(), n * 4);
    up(c, dqn, qn.data(), hd * 4);
    up(c, dkn, kn.data(), hd * 4);
    up(c, dp, &pos, 4);
    for (dbuf *d : {&k0, &v0}) {
        for (auto &v : kvh) v = tl_fp32_to_fp16(rnd_normal());
        up(c, *d, kvh.data(), cache);
    }
    OK(tlc_copy(c, k1.p, k0.p, cache));
    OK(tlc_copy(c, v1.p, v0.p, cache));
    const float *bb = with_bias ? db.f() : NULL, *wq = with_norm ? dqn.f() : NULL, *wk = with_norm ? dkn.f() : NULL;
    o0.poison();
    o1.poison();
    tlc_attn_plan(c, plan);
    OK(tlc_qk_rope_kv(c, x0.f(), nh, nkv, hd, k0.p, v0.p, n_ctx, (const int32_t *)dp.p, &p, bb, wq, wk, eps));
    OK(tlc_attn_decode(c, x0.f(), k0.p, v0.p, TL_TYPE_F16, nh, nkv, hd, n_ctx, (const int32_t *)dp.p, scale, scr.f(),
                       o0.f(), q0.p));
    OK(tlc_attn_decode_pro(c, x1.f(), k1.p, v1.p, TL_TYPE_F16, nh, nkv, hd, n_ctx, (const int32_t *)dp.p, scale,
                           scr.f(), o1.f(), q1.p, &p, bb, wq, wk, eps));
    tlc_attn_plan(c, 0);
    std::vector<float> a = down(c, o0, (size_t)nh * hd), r = down(c, o1, (size_t)nh * hd);
    std::vector<double> ad(a.begin(), a.end());
    size_t nn;
    const double e = rel_err(r.data(), ad.data(), ad.size(), &nn);
    const bool same = memcmp(a.data(), r.data(), a.size() * 4) == 0;
    const int bad = cache_diffs(c, k0, k1, v0, v1, cache, true);
    CHECK(e < 1e-5 && bad == 0 && (with_norm || same),
          "attention+prologue hd %d heads %d/%d neox %d bias %d norm %d pos %d plan %lld: rel err %.3g (%zu "
          "non-finite), %d cache values differ, %s bytes", hd, nh, nkv, neox, with_bias, with_norm, pos,
          (long long)plan, e, nn, bad, same ? "same" : "other");
    printf("  attention+prologue hd %3d heads %2d/%d neox %d bias %d norm %d pos %4d plan %4lld: rel err %.2e (%s), "
           "%d cache diffs\n", hd, nh, nkv, neox, with_bias, with_norm, pos, (long long)plan, e,
           same ? "same bytes" : "other bytes", bad);
}

/* The output head's argmax epilogue (tlc_mv_fuse.argmax, greedy decode
 * without an argmax launch) against the argmax of the logits the same
 * launch stored (lowest row on ties) and against tlc_argmax; tied: every
 * row the same, so row 0 must win. */
static void test_mv_argmax(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out, bool tied) {
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    if (tied) {
        const size_t rb = raw.size() / (size_t)n_out;
        for (int64_t r = 1; r < n_out; r++) memcpy(&raw[(size_t)r * rb], &raw[0], rb);
    }
    dweight dwt(c, t, n_in, n_out, raw);
    tlc_weight &w = dwt.w;
    dinput in(c, n_in);
    dbuf dy(c, n_out * 4, "y"), dk(c, 8, "key"), di(c, 4, "argmax");
    OK(tlc_memset(c, dk.p, 0, 8));
    dy.poison();
    tlc_mv_fuse fz = {};
    fz.argmax = (unsigned long long *)dk.p;
    OK(tlc_matvec_fused(c, &w, in.dx.f(), in.dq.p, dy.f(), TLC_MV_STORE, &fz));
    OK(tlc_argmax(c, dy.f(), n_out, (int32_t *)di.p));
    std::vector<float> y = down(c, dy, n_out);
    unsigned long long key = 0;
    int32_t kern = -1;
    OK(tlc_download(c, &key, dk.p, 8));
    OK(tlc_download(c, &kern, di.p, 4));
    int64_t best = 0;
    for (int64_t i = 1; i < n_out; i++)
        if (y[i] > y[best]) best = i;
    const int32_t got = tlc_argmax_key_row(key);
    CHECK(key && got == best && kern == best && (!tied || best == 0),
          "argmax epilogue %s %lldx%lld%s: key row %d, logits' argmax %lld, tlc_argmax %d", tl_type_name(t),
          (long long)n_out, (long long)n_in, tied ? " tied" : "", got, (long long)best, kern);
    printf("  argmax epilogue %-5s %6lld x %5lld%s: row %d (logits' argmax %lld)\n", tl_type_name(t), (long long)n_out,
           (long long)n_in, tied ? " tied" : "", got, (long long)best);
}

/* What the QKV+RoPE epilogue checks share: a random input x (n_in) and its
 * q8_1, RoPE parameters with random frequency divisors, and two zeroed
 * caches: 1 for the reference (a plain matvec, then tlc_rope_kv), 2 for the
 * fused epilogue (args()). */
struct rope_case : dinput {
    static constexpr int nh = 8, nkv = 2, hd = 64, n_ctx = 64;
    const size_t cache = (size_t)nkv * n_ctx * hd * 2;
    std::vector<float> ff;
    dbuf dp, dff, k1, v1, k2, v2;
    tlc_rope_params p;
    rope_case(tlc_ctx *c, int64_t n_in, int32_t pos)
        : dinput(c, n_in), ff(hd / 2), dp(c, 4, "pos"), dff(c, hd / 2 * 4, "ff"), k1(c, cache, "k1"),
          v1(c, cache, "v1"), k2(c, cache, "k2"), v2(c, cache, "v2") {
        for (auto &v : ff) v = 1.0f + 3.0f * rnd_unif();
        up(c, dp, &pos, 4);
        up(c, dff, ff.data(), ff.size() * 4);
        for (dbuf *d : {&k1, &v1, &k2, &v2}) OK(tlc_memset(c, d->p, 0, cache));
        p = {hd, false, 500000.0f, 1.0f, dff.f()};
    }
    /* the reference RoPE + KV store of the plain matvec's output a */
    void reference(tlc_ctx *c, float *a) {
        OK(tlc_rope_kv(c, a, nh, nkv, hd, k1.p, v1.p, n_ctx, (const int32_t *)dp.p, &p));
    }
    tlc_rope_kv_args args() { return {p, nh, nkv, hd, k2.p, v2.p, n_ctx, (const int32_t *)dp.p}; }
    /* cache values where the epilogue's caches differ from the reference's */
    int diffs(tlc_ctx *c) { return cache_diffs(c, k1, k2, v1, v2, cache, false); }
};

static double max_diff(const std::vector<float> &a, const std::vector<float> &b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); i++) d = std::max(d, (double)fabsf(a[i] - b[i]));
    return d;
}

static void test_qkv_rope(tlc_ctx *c, tl_type t, int64_t n_in) {
    /* the QKV matvec with RoPE + KV store in its epilogue must equal the
     * matvec followed by tlc_rope_kv (itself checked against rope + kv_store
     * above, and rope against float64) */
    const int64_t n_out = (rope_case::nh + 2 * rope_case::nkv) * rope_case::hd; /* n_in 512 (one pass per
                                                                                  * warp) and 4096 (8B's) */
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    dweight dwt(c, t, n_in, n_out, raw);
    tlc_weight &w = dwt.w;
    rope_case rc(c, n_in, 23);
    dbuf a(c, n_out * 4, "a"), b(c, n_out * 4, "b");
    OK(tlc_matvec(c, &w, rc.dx.f(), rc.dq.p, a.f(), TLC_MV_STORE));
    rc.reference(c, a.f());
    tlc_rope_kv_args ra = rc.args();
    tlc_mv_fuse fz = {};
    fz.rope = &ra;
    b.poison();
    OK(tlc_matvec_fused(c, &w, rc.dx.f(), rc.dq.p, b.f(), TLC_MV_STORE, &fz));
    const double dmax = max_diff(down(c, a, n_out), down(c, b, n_out));
    const int bad = rc.diffs(c);
    CHECK(dmax < 1e-5 && bad == 0, "qkv+rope epilogue %s: q/k/v differ by %.3g, %d cache values differ",
          tl_type_name(t), dmax, bad);
    printf("  qkv+rope epilogue %-5s n_in %5lld: max diff %.2e, %d cache diffs\n", tl_type_name(t), (long long)n_in, dmax,
           bad);
}

/* The stacked matvec (tlc_matvec2_fused: Q|K in Q4_K over V in Q6_K, one
 * launch) against float64 over the dequantized weights and the q8_1 input,
 * and bit for bit against the two weights' own matvecs (the same per-row
 * arithmetic); with the RoPE+KV epilogue, against those matvecs followed
 * by tlc_rope_kv. */
static void test_matvec2(tlc_ctx *c, int64_t n_in) {
    const tl_type t1 = TL_TYPE_Q4_K, t2 = TL_TYPE_Q6_K;
    const int64_t n1 = (int64_t)(rope_case::nh + rope_case::nkv) * rope_case::hd,
                  n2 = (int64_t)rope_case::nkv * rope_case::hd, n = n1 + n2;
    std::vector<uint8_t> r1 = random_weight(t1, n_in, n1), r2 = random_weight(t2, n_in, n2);
    std::vector<float> W1, W2;
    if (!cpu_dequant(t1, r1, n_in, n1, W1) || !cpu_dequant(t2, r2, n_in, n2, W2)) {
        printf("  skip stacked matvec: CPU dequantizer missing (%s)\n", tl_last_error());
        n_skip++;
        return;
    }
    dbuf dw1(c, tlc_weight_bytes(t1, n_in, n1), "w1"), dw2(c, tlc_weight_bytes(t2, n_in, n2), "w2"),
        stg(c, std::max(r1.size(), r2.size()), "staging");
    tlc_weight w1, w2;
    OK(tlc_weight_upload(c, &w1, t1, n_in, n1, r1.data(), dw1.p, stg.p));
    OK(tlc_weight_upload(c, &w2, t2, n_in, n2, r2.data(), dw2.p, stg.p));
    CHECK(tlc_matvec2_ok(c, &w1, &w2), "stacked matvec: Q4_K over Q6_K refused");
    if (!tlc_matvec2_ok(c, &w1, &w2)) return;
    rope_case rc(c, n_in, 41);
    std::vector<float> xq;
    cpu_q8_1(rc.x.data(), n_in, xq);
    std::vector<double> ref(n);
    for (int64_t r = 0; r < n; r++) {
        const float *wr = r < n1 ? &W1[r * n_in] : &W2[(r - n1) * n_in];
        double sq = 0;
        for (int64_t i = 0; i < n_in; i++) sq += (double)wr[i] * xq[i];
        ref[r] = sq;
    }
    dbuf a(c, n * 4, "a"), b(c, n * 4, "b");
    /* plain: against float64, and against the separate matvecs */
    a.poison();
    b.poison();
    OK(tlc_matvec(c, &w1, rc.dx.f(), rc.dq.p, a.f(), TLC_MV_STORE));
    OK(tlc_matvec(c, &w2, rc.dx.f(), rc.dq.p, a.f() + n1, TLC_MV_STORE));
    OK(tlc_matvec2_fused(c, &w1, &w2, rc.dx.f(), rc.dq.p, b.f(), NULL));
    std::vector<float> ya = down(c, a, n), yb = down(c, b, n);
    size_t nn;
    const double e = rel_err(yb.data(), ref.data(), n, &nn);
    CHECK(e < 2e-5, "stacked matvec q4_k|q6_k n_in %lld: rel err %.3g, %zu non-finite", (long long)n_in, e, nn);
    CHECK(memcmp(ya.data(), yb.data(), n * 4) == 0, "stacked matvec n_in %lld: not the separate matvecs' bytes",
          (long long)n_in);
    /* the RoPE+KV epilogue over the stacked rows */
    rc.reference(c, a.f());
    tlc_rope_kv_args ra = rc.args();
    tlc_mv_fuse fz = {};
    fz.rope = &ra;
    b.poison();
    OK(tlc_matvec2_fused(c, &w1, &w2, rc.dx.f(), rc.dq.p, b.f(), &fz));
    const double dmax = max_diff(down(c, a, n), down(c, b, n));
    const int bad = rc.diffs(c);
    CHECK(dmax < 1e-5 && bad == 0, "stacked qkv+rope n_in %lld: q/k/v differ by %.3g, %d cache values differ",
          (long long)n_in, dmax, bad);
    printf("  stacked matvec q4_k|q6_k n_in %5lld: rel err %.2e; +rope max diff %.2e, %d cache diffs\n",
           (long long)n_in, e, dmax, bad);
}

static void test_graph(tlc_ctx *c) {
    /* capture act_prep + matvec + argmax + pos advance; replays must match
     * the eager result, and the position must advance on the device */
    const int64_t n_in = 1024, n_out = 4096;
    std::vector<uint8_t> raw = random_weight(TL_TYPE_Q8_0, n_in, n_out);
    dweight dwt(c, TL_TYPE_Q8_0, n_in, n_out, raw);
    tlc_weight &w = dwt.w;
    dinput in(c, n_in);
    dbuf dy(c, n_out * 4, "y"), dtok(c, 4, "tok"), dp(c, 4, "pos");
    int32_t zero = 0;
    up(c, dp, &zero, 4);
    OK(tlc_matvec(c, &w, NULL, in.dq.p, dy.f(), TLC_MV_STORE));
    OK(tlc_argmax(c, dy.f(), n_out, (int32_t *)dtok.p));
    int32_t eager = -1;
    OK(tlc_download(c, &eager, dtok.p, 4));
    tlc_graph *g;
    OK(tlc_graph_begin(c));
    OK(tlc_act_prep(c, in.dx.f(), NULL, 0, n_in, 1, NULL, in.dq.p));
    OK(tlc_matvec(c, &w, NULL, in.dq.p, dy.f(), TLC_MV_STORE));
    OK(tlc_argmax(c, dy.f(), n_out, (int32_t *)dtok.p));
    OK(tlc_pos_advance(c, (int32_t *)dp.p, 1));
    OK(tlc_graph_end(c, &g));
    OK(tlc_memset(c, dtok.p, 0xFF, 4));
    for (int i = 0; i < 5; i++) OK(tlc_graph_launch(c, g));
    int32_t tok = -1, pos = -1;
    OK(tlc_download(c, &tok, dtok.p, 4));
    OK(tlc_download(c, &pos, dp.p, 4));
    CHECK(tok == eager && pos == 5, "graph replay: token %d (eager %d), pos %d (want 5)", tok, eager, pos);
    tlc_graph_free(g);
}

static void test_oom(tlc_ctx *c) {
    void *p = NULL;
    tl_status s = tlc_alloc(c, (size_t)1 << 50, "a test allocation", &p);
    CHECK(s == TL_ERR_NOMEM && p == NULL, "huge alloc: status %d", (int)s);
    CHECK(strstr(tl_last_error(), "1125899906842624 bytes") && strstr(tl_last_error(), "free"),
          "OOM message names bytes and free memory: %s", tl_last_error());
    printf("  oom message: %s\n", tl_last_error());
    /* the context stays usable after the failed allocation */
    dbuf d(c, 1024, "after oom");
    OK(tlc_memset(c, d.p, 0, 1024));
    OK(tlc_sync(c));
}

/* ---- bench -------------------------------------------------------------------- */

/* median over reps timed replays of g (after one untimed) in us per item */
static double graph_median_us(tlc_ctx *c, tlc_graph *g, int reps, int per_graph) {
    tlc_timer *tm;
    OK(tlc_timer_init(&tm));
    OK(tlc_graph_launch(c, g));
    std::vector<double> ts;
    for (int r = 0; r < reps; r++) {
        double ms;
        OK(tlc_timer_start(c, tm));
        OK(tlc_graph_launch(c, g));
        OK(tlc_timer_stop(c, tm, &ms));
        ts.push_back(ms * 1000.0 / per_graph);
    }
    tlc_timer_free(tm);
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

static void bench(tlc_ctx *c) {
    tlc_device_info di;
    OK(tlc_get_device_info(c, &di));
    double bw = 0, tf = 0;
    OK(tlc_measure_copy_bw(c, (size_t)2 << 30, 20, &bw));
    OK(tlc_measure_gemm(c, 8192, 10, &tf));
    printf("\nBENCH device %s, %d SMs, L2 %zu MB\n", di.name, di.n_sm, di.l2_bytes >> 20);
    printf("BENCH ceiling copy %.0f GB/s (2 GiB device-to-device, read+write)\n", bw);
    printf("BENCH ceiling gemm f16 %.0f TFLOP/s (8192^3 cuBLAS, random data)\n", tf);
    struct { int64_t n_out, n_in; const char *what; } shapes[] = {
        {4096, 4096, "wq/wo"}, {14336, 4096, "gate|up"}, {4096, 14336, "down"},
        {6144, 4096, "qkv fused"}, {28672, 4096, "gate+up GLU"}, {128256, 4096, "output"},
        /* the decode fusions as a layer runs them (norm folded in, q8_1 epilogues) */
        {6144, 4096, "qkv +norm"}, {4096, 4096, "wo +epi"}, {28672, 4096, "GLU +norm+q8"}, {4096, 14336, "down +epi"}};
    tl_type types[] = {TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_Q8_0, TL_TYPE_Q4_0, TL_TYPE_Q4_1, TL_TYPE_Q4_K, TL_TYPE_Q6_K};
    printf("BENCH %-6s %-12s %14s %9s %9s %7s\n", "type", "shape", "", "us", "GB/s", "frac");
    for (tl_type t : types)
        for (auto &sh : shapes) {
            size_t wb = tlc_weight_bytes(t, sh.n_in, sh.n_out);
            size_t raw = tl_row_bytes(t, sh.n_in) * sh.n_out;
            /* enough copies that the set is > 4x L2, so each launch streams from HBM */
            int ncopy = (int)std::max<size_t>(1, (size_t)(4 * di.l2_bytes) / wb + 1);
            if (ncopy > 16) ncopy = 16;
            std::vector<uint8_t> h = random_weight(t, sh.n_in, std::min<int64_t>(sh.n_out, 1024));
            std::vector<uint8_t> hraw(raw);
            for (size_t i = 0; i < raw; i += h.size()) memcpy(&hraw[i], h.data(), std::min(h.size(), raw - i));
            void *stg;
            OK(tlc_alloc(c, raw, "bench staging", &stg));
            std::vector<void *> mem(ncopy);
            std::vector<tlc_weight> ws(ncopy);
            for (int k = 0; k < ncopy; k++) {
                OK(tlc_alloc(c, wb, "bench weight", &mem[k]));
                OK(tlc_weight_upload(c, &ws[k], t, sh.n_in, sh.n_out, hraw.data(), mem[k], stg));
            }
            tlc_dfree(c, stg, raw);
            int64_t n_out = sh.n_out;
            int mode = strstr(sh.what, "GLU") ? TLC_MV_GLU : (strstr(sh.what, "epi") ? TLC_MV_ACCUM : TLC_MV_STORE);
            void *x, *xq, *y;
            OK(tlc_alloc(c, sh.n_in * 4, "x", &x));
            OK(tlc_alloc(c, tlc_q8_bytes(sh.n_in), "xq", &xq));
            OK(tlc_alloc(c, n_out * 4, "y", &y));
            std::vector<float> hx(sh.n_in);
            for (auto &v : hx) v = rnd_normal();
            OK(tlc_upload(c, x, hx.data(), sh.n_in * 4));
            OK(tlc_act_prep(c, (float *)x, NULL, 0, sh.n_in, 1, NULL, xq));
            /* fusion buffers: sums of squares (ones), norm weights, the q8_1 output */
            std::vector<float> ones(n_out, 1.0f);
            void *fss, *fg, *fq, *fyf, *fyss;
            OK(tlc_alloc(c, n_out * 4, "ss", &fss));
            OK(tlc_alloc(c, n_out * 4, "g", &fg));
            OK(tlc_alloc(c, tlc_q8_bytes(n_out), "yq", &fq));
            OK(tlc_alloc(c, n_out * 4, "yf", &fyf));
            OK(tlc_alloc(c, n_out * 4, "yss", &fyss));
            OK(tlc_upload(c, fss, ones.data(), n_out * 4));
            OK(tlc_upload(c, fg, ones.data(), n_out * 4));
            tlc_mv_fuse fz = {};
            if (strstr(sh.what, "norm")) {
                fz.in_ss = (float *)fss;
                fz.eps = 1e-5f;
            }
            if (strstr(sh.what, "q8") || strstr(sh.what, "epi")) fz.out_q = fq;
            if (strstr(sh.what, "epi")) {
                fz.out_norm = (float *)fg;
                fz.out_f = (float *)fyf;
                fz.out_ss = (float *)fyss;
            }
            const int per_graph = 64;
            tlc_graph *g;
            OK(tlc_graph_begin(c));
            for (int i = 0; i < per_graph; i++)
                OK(tlc_matvec_fused(c, &ws[i % ncopy], (float *)x, xq, (float *)y, mode, &fz));
            OK(tlc_graph_end(c, &g));
            const double us = graph_median_us(c, g, 7, per_graph);
            double bytes = (double)raw + sh.n_in * (is_quant(t) ? 1.125 : 4.0) + (mode == TLC_MV_GLU ? n_out / 2 : n_out) * 4.0;
            double gbs = bytes / (us * 1e-6) / 1e9;
            printf("BENCH %-6s %-12s %6lldx%-6lld %9.2f %9.0f %7.3f\n", tl_type_name(t), sh.what, (long long)sh.n_out,
                   (long long)sh.n_in, us, gbs, gbs / bw);
            tlc_graph_free(g);
            for (int k = 0; k < ncopy; k++) tlc_dfree(c, mem[k], wb);
            tlc_dfree(c, x, sh.n_in * 4);
            tlc_dfree(c, xq, tlc_q8_bytes(sh.n_in));
            tlc_dfree(c, y, n_out * 4);
            tlc_dfree(c, fss, n_out * 4);
            tlc_dfree(c, fg, n_out * 4);
            tlc_dfree(c, fq, tlc_q8_bytes(n_out));
            tlc_dfree(c, fyf, n_out * 4);
            tlc_dfree(c, fyss, n_out * 4);
        }
    /* prefill GEMM on an 8B layer's shapes, 512 tokens (dequant included) */
    for (tl_type t : {TL_TYPE_F16, TL_TYPE_Q4_0, TL_TYPE_Q8_0}) {
        int64_t n_in = 4096, n_out = 14336, nt = 512;
        size_t raw = tl_row_bytes(t, n_in) * n_out;
        std::vector<uint8_t> h = random_weight(t, n_in, n_out);
        void *wm, *stg, *x, *y, *scr;
        tlc_weight w;
        OK(tlc_alloc(c, tlc_weight_bytes(t, n_in, n_out), "w", &wm));
        OK(tlc_alloc(c, raw, "stg", &stg));
        OK(tlc_weight_upload(c, &w, t, n_in, n_out, h.data(), wm, stg));
        OK(tlc_alloc(c, nt * n_in * 4, "x", &x));
        OK(tlc_alloc(c, nt * n_out * 4, "y", &y));
        OK(tlc_alloc(c, tlc_gemm_scratch_halves(&w, nt) * 2, "scr", &scr));
        std::vector<float> hx(nt * n_in);
        for (auto &v : hx) v = rnd_normal();
        OK(tlc_upload(c, x, hx.data(), hx.size() * 4));
        tlc_timer *tm;
        OK(tlc_timer_init(&tm));
        OK(tlc_gemm(c, &w, (float *)x, nt, (float *)y, 0, scr));
        std::vector<double> ts;
        for (int r = 0; r < 9; r++) {
            double ms;
            OK(tlc_timer_start(c, tm));
            OK(tlc_gemm(c, &w, (float *)x, nt, (float *)y, 0, scr));
            OK(tlc_timer_stop(c, tm, &ms));
            ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        double ms = ts[ts.size() / 2];
        double tfl = 2.0 * n_in * n_out * nt / (ms * 1e-3) / 1e12;
        printf("BENCH gemm %-5s 14336x4096 x 512 tok: %.3f ms, %.0f TFLOP/s (%.2f of gemm ceiling)\n",
               tl_type_name(t), ms, tfl, tfl / tf);
        tlc_timer_free(tm);
        tlc_dfree(c, wm, 0); tlc_dfree(c, stg, 0); tlc_dfree(c, x, 0); tlc_dfree(c, y, 0); tlc_dfree(c, scr, 0);
    }
}


/* ---- persistent-chain probe (--probe) -----------------------------------------
 * What would one kernel per decode layer buy over a launch per matvec? Two
 * dependent F16 matvecs y1 = W1 x, y2 = W2 y1 (n x n, n = 2048: 8 MiB each,
 * about a Q4_0 4096x4096 Wo), timed per pair in a graph of 32 pairs rotating
 * over copies > 4x L2, as
 *   lib:     the library's matvec twice (tlc_matvec);
 *   split:   the probe's own phase kernel twice (launch per matvec, PDL);
 *   chain:   one kernel, grid barrier between the phases, W2 loaded after it;
 *   chain+pf: the same with each warp's W2 row loaded into registers before
 *            the barrier (the prefetch a persistent layer kernel would do);
 *   chain-ra(+pf): both with a release/acquire barrier and a backed-off spin.
 * One warp per row (grid = SMs x 16 warps covers 2048 rows once), 8 uint4
 * per lane = the whole 4 KiB row in flight. The barrier is self-resetting
 * (count + generation), so graph replays stay valid. */
struct pc_bar_t { unsigned int count, gen; };

__device__ __forceinline__ void pc_grid_sync(pc_bar_t *b) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int g = *(volatile unsigned int *)&b->gen;
        __threadfence();
        if (atomicAdd(&b->count, 1u) == gridDim.x - 1) {
            b->count = 0;
            __threadfence();
            atomicAdd(&b->gen, 1u);
        } else {
            while (*(volatile unsigned int *)&b->gen == g) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

/* the same with release/acquire atomics and a backed-off spin instead of
 * full fences and a busy volatile spin */
__device__ __forceinline__ void pc_grid_sync_ra(pc_bar_t *b) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int g, old, cur;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(&b->gen) : "memory");
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(&b->count) : "memory");
        if (old == gridDim.x - 1) {
            asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(&b->count) : "memory");
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&b->gen) : "memory");
        } else {
            do {
                __nanosleep(32);
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(&b->gen) : "memory");
            } while (cur == g);
        }
    }
    __syncthreads();
}

__device__ __forceinline__ float pc_dot(const uint4 (&w)[8], const float *x, int lane, bool l2) {
    float s = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const float *xp = x + (k * 32 + lane) * 8;
        float4 a = l2 ? __ldcg((const float4 *)xp) : *(const float4 *)xp;
        float4 b = l2 ? __ldcg((const float4 *)xp + 1) : *((const float4 *)xp + 1);
        const __half2 *h = (const __half2 *)&w[k];
        float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]),
               f3 = __half22float2(h[3]);
        s += f0.x * a.x + f0.y * a.y + f1.x * a.z + f1.y * a.w + f2.x * b.x + f2.y * b.y + f3.x * b.z + f3.y * b.w;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__device__ __forceinline__ void pc_load(uint4 (&w)[8], const __half *W, int n, int row, int lane) {
#pragma unroll
    for (int k = 0; k < 8; k++) w[k] = __ldcs((const uint4 *)(W + (size_t)row * n) + k * 32 + lane);
}

/* one phase per launch: y = W x (rows: one per warp) */
__global__ void __launch_bounds__(512) pc_phase_k(const __half *W, const float *x, float *y, int n) {
    pdl_trigger();
    const int lane = threadIdx.x & 31, row = blockIdx.x * 16 + (threadIdx.x >> 5);
    uint4 w[8];
    if (row < n) pc_load(w, W, n, row, lane);
    pdl_wait();
    if (row >= n) return;
    const float s = pc_dot(w, x, lane, false);
    if (lane == 0) y[row] = s;
}

template <bool PF, bool RA>
__global__ void __launch_bounds__(512, 1) pc_chain_k(const __half *W1, const __half *W2, const float *x, float *y1,
                                                     float *y2, int n, pc_bar_t *bar) {
    pdl_trigger();
    const int lane = threadIdx.x & 31, row = blockIdx.x * 16 + (threadIdx.x >> 5);
    uint4 w[8];
    if (row < n) pc_load(w, W1, n, row, lane);
    pdl_wait();
    if (row < n) {
        const float s = pc_dot(w, x, lane, false);
        if (lane == 0) y1[row] = s;
    }
    if (PF && row < n) pc_load(w, W2, n, row, lane);
    if (RA)
        pc_grid_sync_ra(bar);
    else
        pc_grid_sync(bar);
    if (row >= n) return;
    if (!PF) pc_load(w, W2, n, row, lane);
    const float s = pc_dot(w, y1, lane, true); /* y1 written by other blocks: through L2 */
    if (lane == 0) y2[row] = s;
}

static void probe_chain(tlc_ctx *c) {
    const int n = 2048, per_graph = 32;
    const size_t wb = (size_t)n * n * 2;
    tlc_device_info di;
    OK(tlc_get_device_info(c, &di));
    const int ncopy = std::min<int>(16, (int)(4 * di.l2_bytes / (2 * wb)) + 1);
    if ((int64_t)c->n_sm * 16 < n) {
        printf("PROBE skip: %d SMs x 16 warps < %d rows\n", c->n_sm, n);
        return;
    }
    std::vector<uint8_t> hw(wb);
    for (size_t i = 0; i < wb / 2; i++) {
        uint16_t h = tl_fp32_to_fp16(rnd_normal() * 0.02f);
        memcpy(&hw[2 * i], &h, 2);
    }
    std::vector<void *> W(2 * ncopy);
    std::vector<tlc_weight> tw(2 * ncopy);
    for (int k = 0; k < 2 * ncopy; k++) {
        OK(tlc_alloc(c, wb, "probe w", &W[k]));
        OK(tlc_weight_upload(c, &tw[k], TL_TYPE_F16, n, n, hw.data(), W[k], NULL));
    }
    std::vector<float> hx(n);
    for (auto &v : hx) v = rnd_normal();
    dbuf dx(c, n * 4, "x"), d1(c, n * 4, "y1"), d2(c, n * 4, "y2"), dref(c, n * 4, "ref"), dbar(c, 64, "bar");
    up(c, dx, hx.data(), n * 4);
    OK(tlc_memset(c, dbar.p, 0, 64));
    /* reference: the library's two matvecs on the first pair */
    OK(tlc_matvec(c, &tw[0], dx.f(), NULL, d1.f(), TLC_MV_STORE));
    OK(tlc_matvec(c, &tw[1], d1.f(), NULL, dref.f(), TLC_MV_STORE));
    std::vector<float> ref = down(c, dref, n);
    std::vector<double> refd(ref.begin(), ref.end());
    const char *names[6] = {"lib", "split", "chain", "chain+pf", "chain-ra", "chain-ra+pf"};
    double us[6];
    for (int v = 0; v < 6; v++) {
        auto run = [&](int k) {
            const __half *w1 = (const __half *)W[2 * k], *w2 = (const __half *)W[2 * k + 1];
            cudaError_t e = cudaSuccess;
            if (v == 0) {
                OK(tlc_matvec(c, &tw[2 * k], dx.f(), NULL, d1.f(), TLC_MV_STORE));
                OK(tlc_matvec(c, &tw[2 * k + 1], d1.f(), NULL, d2.f(), TLC_MV_STORE));
            } else if (v == 1) {
                e = tlc_launch(c, pc_phase_k, dim3(tlc_div_up(n, 16)), dim3(512), 0, w1, (const float *)dx.f(), d1.f(), n);
                if (e == cudaSuccess)
                    e = tlc_launch(c, pc_phase_k, dim3(tlc_div_up(n, 16)), dim3(512), 0, w2, (const float *)d1.f(),
                                   d2.f(), n);
            } else {
                auto k = v == 2 ? pc_chain_k<false, false>
                         : v == 3 ? pc_chain_k<true, false>
                         : v == 4 ? pc_chain_k<false, true>
                                  : pc_chain_k<true, true>;
                e = tlc_launch(c, k, dim3(c->n_sm), dim3(512), 0, w1, w2,
                               (const float *)dx.f(), d1.f(), d2.f(), n, (pc_bar_t *)dbar.p);
            }
            if (e != cudaSuccess) {
                fprintf(stderr, "FATAL probe launch: %s\n", cudaGetErrorString(e));
                exit(1);
            }
        };
        /* correctness of this variant on the first pair */
        d2.poison();
        run(0);
        OK(tlc_sync(c));
        std::vector<float> y = down(c, d2, n);
        size_t nn;
        double e = rel_err(y.data(), refd.data(), n, &nn);
        CHECK(e < 1e-5 && nn == 0, "probe %s: rel err %.3g vs the library, %zu non-finite", names[v], e, nn);
        tlc_graph *g;
        OK(tlc_graph_begin(c));
        for (int i = 0; i < per_graph; i++) run(i % ncopy);
        OK(tlc_graph_end(c, &g));
        us[v] = graph_median_us(c, g, 9, per_graph);
        tlc_graph_free(g);
    }
    const double floor_us = 2.0 * wb / 4.2e6; /* bytes / (4.2e12 B/s) in us */
    for (int v = 0; v < 6; v++)
        printf("PROBE %-9s %2dx (2 x %dx%d f16 matvec, %.1f MiB): %7.2f us per pair (floor ~%.2f us at 4.2 TB/s)\n",
               names[v], per_graph, n, n, 2.0 * wb / 1048576.0, us[v], floor_us);
    for (int k = 0; k < 2 * ncopy; k++) tlc_dfree(c, W[k], wb);
}

int main(int argc, char **argv) {
    bool do_bench = argc > 1 && !strcmp(argv[1], "--bench");
    /* tuning values out of range: refused, naming the field, before any
     * device is touched (so this part runs on machines without a GPU too) */
    for (int k = 0; k < 4; k++) {
        tl_cuda_tuning t = tl_cuda_tuning_default();
        const char *field = k == 0 ? "att_split_min" : k == 1 ? "mv_store_units" : k == 2 ? "mv_glu_units"
                                                                                         : "mv_split_max";
        if (k == 0) t.att_split_min = 0;
        if (k == 1) t.mv_store_units = 3;
        if (k == 2) t.mv_glu_units = 16;
        if (k == 3) t.mv_split_max = 0;
        tlc_ctx *bad = NULL;
        const tl_status s = tlc_init(0, &t, &bad);
        CHECK(s == TL_ERR_INVALID && !bad && strstr(tl_last_error(), field), "tuning %s out of range: %s, %s",
              field, tl_status_str(s), tl_last_error());
    }
    tlc_ctx *c;
    if (tlc_init(0, NULL, &c) != TL_OK) {
        printf("skip: %s (tuning checks: %d passed, %d failed)\n", tl_last_error(), n_pass, n_fail);
        return n_fail ? 1 : 77;
    }
    if (argc > 1 && !strcmp(argv[1], "--probe")) {
        probe_chain(c);
        printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
        tlc_free(c);
        return n_fail ? 1 : 0;
    }
    printf("matvec / get_rows / gemm against quant_dequantize + float64:\n");
    for (tl_type t : all_types) {
        test_weights(c, t, 4096, 1000);
        test_weights(c, t, 768, 38);   /* rows not a multiple of the block's 8 rows, short rows */
        test_weights(c, t, 14336, 64); /* long rows: several unrolled iterations */
    }
    for (tl_type t : all_types) {
        test_fused(c, t, 4096, 1024);
        test_fused(c, t, 14336, 64); /* GLU: one group of 32 outputs */
        test_fused(c, t, 512, 128);
    }
    test_norm_prep(c);
    test_rope(c, false, false);
    test_rope(c, true, false);
    test_rope(c, false, true);
    test_elem(c);
    test_attention(c, 128, 32, 8, 4096, 0, true, 1);
    test_attention(c, 128, 32, 8, 4096, 37, true, 1);
    test_attention(c, 128, 32, 8, 4096, 3000, true, 1);  /* many splits */
    test_attention(c, 64, 32, 8, 4096, 700, false, 1);
    /* decode under each plan: short (the cluster's splits only), long (no
     * cluster), and a short plan that a longer context oversteps */
    {
        /* the cluster merge gathers into owner ranks: head_dim 128 with 4
         * and 8 heads per KV head and head_dim 64 with 8 have 2-4 owners */
        const int64_t cl = tlc_attn_cluster_len(c);
        for (int pos : {0, 9, 77, 127}) {
            test_attention(c, 128, 32, 8, 1024, pos, true, 1, cl);
            test_attention(c, 64, 32, 8, 1024, pos, true, 1, cl);
            test_attention(c, 128, 32, 8, 1024, pos, true, 1, 1024);
            test_attention(c, 128, 64, 8, 1024, pos, true, 1, cl); /* 8 heads per KV head */
            test_attention(c, 64, 64, 8, 1024, pos, true, 1, cl);  /* gather: 2 owner ranks */
        }
        test_attention(c, 128, 32, 8, 4096, 3000, true, 1, cl);
        test_attention(c, 64, 16, 8, 1024, 500, true, 1, cl);
    }
    test_attention(c, 128, 16, 8, 1024, 100, true, 1);   /* qwen3-0.6b grouping */
    test_attention(c, 128, 32, 8, 1024, 0, true, 65);    /* prefill from 0 */
    test_attention(c, 64, 32, 8, 1024, 200, true, 19);   /* prefill continuing a cache */
    test_attention(c, 128, 32, 8, 1024, 0, true, 512);  /* a full 512-token prompt (8 query tiles) */
    test_attention(c, 64, 32, 8, 4096, 3000, true, 130); /* deep: 49 KV tiles, ragged last query tile */
    test_attention(c, 128, 16, 8, 1024, 5, true, 64);    /* G = 2, one query tile, cache not tile-aligned */
    test_attention(c, 64, 8, 8, 256, 0, true, 2);        /* no grouping, two tokens */
    test_attention(c, 16, 4, 2, 512, 11, true, 1);       /* head_dim 16 (the HF tiny fixtures) */
    test_attention(c, 16, 4, 2, 512, 3, false, 12);
    test_rope_kv(c, false);
    test_rope_kv(c, true);
    {
        const int64_t cl = tlc_attn_cluster_len(c);
        for (int pos : {0, 9, 77, 127}) {
            test_attn_pro(c, 128, 32, 8, true, false, true, pos, cl, 1024); /* Qwen3-8B */
            test_attn_pro(c, 128, 16, 8, true, true, false, pos, cl, 1024); /* Qwen2 bias */
            test_attn_pro(c, 64, 32, 8, false, true, true, pos, cl, 1024);  /* adjacent pairs, both */
            test_attn_pro(c, 16, 4, 2, true, true, true, pos, cl, 1024);    /* the tiny fixtures' size */
        }
        test_attn_pro(c, 128, 32, 8, true, false, true, 3000, 4096, 4096); /* long plan, later batches */
        test_attn_pro(c, 64, 32, 8, false, true, true, 3000, 4096, 4096);
        test_attn_pro(c, 128, 16, 8, true, true, false, 700, 4096, 4096);
    }
    for (int hd : {128, 64, 16, 256})
        for (int parts = 1; parts < 4; parts++) {
            test_qk_rope_kv(c, hd, 16, 8, true, parts & 1, parts & 2); /* Qwen: NeoX pairs */
            test_qk_rope_kv(c, hd, 4, 2, false, parts & 1, parts & 2);
            test_qk_prologue(c, hd, 16, 8, true, parts & 1, parts & 2);
            test_qk_prologue(c, hd, 4, 2, false, parts & 1, parts & 2);
        }
    for (tl_type t : {TL_TYPE_F16, TL_TYPE_Q4_0, TL_TYPE_Q8_0, TL_TYPE_Q4_K})
        for (int64_t n_in : {512, 4096}) test_qkv_rope(c, t, n_in);
    for (int64_t n_in : {512, 4096}) test_matvec2(c, n_in);
    for (tl_type t : {TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_Q4_0, TL_TYPE_Q8_0, TL_TYPE_Q6_K, TL_TYPE_Q4_K}) {
        test_mv_argmax(c, t, 2048, 128256, false); /* a Llama-3 vocabulary */
        test_mv_argmax(c, t, 4096, 1000, false);   /* a partial last block */
        test_mv_argmax(c, t, 512, 777, true);
    }
    test_graph(c);
    test_oom(c);
    OK(tlc_sync(c));
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    if (do_bench) bench(c);
    tlc_free(c);
    return n_fail ? 1 : 0;
}
