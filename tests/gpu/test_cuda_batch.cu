/* tests/gpu/test_cuda_batch: the kernels of steps of many sequences
 * (cuda_batch.cu, cuda_mm.cu) against CPU twins in float64, random inputs,
 * outputs poisoned with NaN first:
 *  - few-token matvec (2..4 tokens, every type with a decode matvec, store
 *    and accumulate): against the one-token matvec per token and float64;
 *  - small-batch matmul (2..32 tokens, each quantized type, store and
 *    accumulate, row counts that are not a multiple of the 64-row tile,
 *    split inputs): against dequant(W) x in float64; the kernel rounds W's
 *    values and x to f16 (the prefill GEMM's inputs), ~3e-4 relative per
 *    product, so 3e-3 relative L2;
 *  - paged attention (tokens of several sequences at their own positions,
 *    shuffled page tables, sliding windows, GQA 1..8, head sizes 16..256):
 *    against softmax(q K^T) V over the same f16 K and V in float64: f32
 *    arithmetic, 1e-4;
 *  - RoPE per token position (NeoX and adjacent pairs, Llama-3 divisors,
 *    positions to 4095: 2e-4, the f32 angle's rounding there), the KV store
 *    to slots (exact), LayerNorm, GELU, GELU-GLU (1e-5), row
 *    gather (exact) and per-row argmax (ties to the lowest index, NaN never
 *    chosen over a number).
 * Built with TALLOW_CUDA=ON; ctest label gpu. */
#include <algorithm>

#include "gpu_util.h"
extern "C" {
#include "backend/cuda/cuda_backend.h"
}

static float *dput(tlc_ctx *c, const std::vector<float> &h) {
    void *d;
    OK(tlc_alloc(c, h.size() * 4 + 16, "test", &d));
    OK(tlc_upload(c, d, h.data(), h.size() * 4));
    return (float *)d;
}

static std::vector<float> dget(tlc_ctx *c, const void *d, size_t n) {
    std::vector<float> h(n);
    OK(tlc_download(c, h.data(), d, n * 4));
    return h;
}

static void poison(tlc_ctx *c, void *d, size_t n) {
    std::vector<float> h(n, NAN);
    OK(tlc_upload(c, d, h.data(), n * 4));
}

static void test_mm(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out, int64_t m, int mode) {
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    std::vector<float> wf;
    CHECK(cpu_dequant(t, raw, n_in, n_out, wf), "dequant %s", tl_type_name(t));
    tlc_weight w;
    void *dw, *stg;
    OK(tlc_alloc(c, tlc_weight_bytes(t, n_in, n_out), "w", &dw));
    OK(tlc_alloc(c, raw.size(), "staging", &stg));
    OK(tlc_weight_upload(c, &w, t, n_in, n_out, raw.data(), dw, stg));
    std::vector<float> x((size_t)m * n_in), y0((size_t)m * n_out);
    for (auto &v : x) v = rnd_normal();
    for (auto &v : y0) v = rnd_normal();
    float *dx = dput(c, x), *dy = dput(c, y0);
    if (mode == TLC_MV_STORE) poison(c, dy, y0.size());
    tlc_device_info di;
    OK(tlc_get_device_info(c, &di));
    void *scr;
    const size_t sb = tlc_mm_small_scratch(m, n_in, n_out, di.n_sm);
    OK(tlc_alloc(c, sb, "scratch", &scr));
    CHECK(tlc_mm_small_ok(&w, m), "mm ok %s m %lld", tl_type_name(t), (long long)m);
    OK(tlc_mm_small(c, &w, dx, m, dy, n_out, mode, scr));
    std::vector<float> y = dget(c, dy, y0.size());
    std::vector<double> ref(y0.size());
    for (int64_t j = 0; j < m; j++)
        for (int64_t r = 0; r < n_out; r++) {
            double s = mode == TLC_MV_ACCUM ? y0[j * n_out + r] : 0.0;
            for (int64_t k = 0; k < n_in; k++) s += (double)wf[r * n_in + k] * x[j * n_in + k];
            ref[j * n_out + r] = s;
        }
    size_t bad;
    const double e = rel_err(y.data(), ref.data(), y.size(), &bad);
    CHECK(e < 3e-3, "mm %s n_in %lld n_out %lld m %lld %s: rel err %.2e (%zu non-finite)", tl_type_name(t),
          (long long)n_in, (long long)n_out, (long long)m, mode ? "accum" : "store", e, bad);
    tlc_dfree(c, dw, tlc_weight_bytes(t, n_in, n_out));
    tlc_dfree(c, stg, raw.size());
    tlc_dfree(c, dx, x.size() * 4 + 16);
    tlc_dfree(c, dy, y0.size() * 4 + 16);
    tlc_dfree(c, scr, sb);
}

/* The few-token matvec against the one-token matvec on each token's row (the
 * same q8_1 activation and unit dots, summed in another order: 1e-5
 * relative) and against dequant(W) x in float64 (q8_1 rounds x: 2e-2). */
static void test_mvm(tlc_ctx *c, tl_type t, int64_t n_in, int64_t n_out, int64_t m, int mode) {
    std::vector<uint8_t> raw = random_weight(t, n_in, n_out);
    std::vector<float> wf;
    CHECK(cpu_dequant(t, raw, n_in, n_out, wf), "dequant %s", tl_type_name(t));
    tlc_weight w;
    void *dw, *stg, *dq = NULL;
    OK(tlc_alloc(c, tlc_weight_bytes(t, n_in, n_out), "w", &dw));
    OK(tlc_alloc(c, raw.size(), "staging", &stg));
    OK(tlc_weight_upload(c, &w, t, n_in, n_out, raw.data(), dw, stg));
    std::vector<float> x((size_t)m * n_in), y0((size_t)m * n_out);
    for (auto &v : x) v = rnd_normal();
    for (auto &v : y0) v = rnd_normal();
    float *dx = dput(c, x), *dy = dput(c, y0), *d1 = dput(c, y0);
    if (mode == TLC_MV_STORE) poison(c, dy, y0.size()), poison(c, d1, y0.size());
    const bool fl = tlc_weight_is_float(&w);
    const size_t q8 = tlc_q8_bytes(n_in);
    if (!fl) {
        OK(tlc_alloc(c, q8 * (size_t)m, "xq", &dq));
        OK(tlc_act_prep(c, dx, NULL, 0.0f, n_in, m, NULL, dq));
    }
    CHECK(tlc_mvm_ok(&w, m), "mvm ok %s m %lld", tl_type_name(t), (long long)m);
    OK(tlc_mvm(c, &w, dx, dq, m, dy, n_out, mode));
    for (int64_t j = 0; j < m; j++)
        OK(tlc_matvec(c, &w, dx + j * n_in, fl ? NULL : (uint8_t *)dq + j * q8, d1 + j * n_out, mode));
    std::vector<float> y = dget(c, dy, y0.size()), y1 = dget(c, d1, y0.size());
    std::vector<double> ref(y0.size()), one(y1.begin(), y1.end());
    for (int64_t j = 0; j < m; j++)
        for (int64_t r = 0; r < n_out; r++) {
            double s = mode == TLC_MV_ACCUM ? y0[j * n_out + r] : 0.0;
            for (int64_t k = 0; k < n_in; k++) s += (double)wf[r * n_in + k] * x[j * n_in + k];
            ref[j * n_out + r] = s;
        }
    size_t bad, bad1;
    const double e = rel_err(y.data(), ref.data(), y.size(), &bad), e1 = rel_err(y.data(), one.data(), y.size(), &bad1);
    CHECK(e < 2e-2 && e1 < 1e-5 && !bad && !bad1,
          "mvm %s n_in %lld n_out %lld m %lld %s: rel err %.2e vs float64, %.2e vs matvec (%zu/%zu non-finite)",
          tl_type_name(t), (long long)n_in, (long long)n_out, (long long)m, mode ? "accum" : "store", e, e1, bad, bad1);
    tlc_dfree(c, dw, tlc_weight_bytes(t, n_in, n_out));
    tlc_dfree(c, stg, raw.size());
    tlc_dfree(c, dx, x.size() * 4 + 16);
    tlc_dfree(c, dy, y0.size() * 4 + 16);
    tlc_dfree(c, d1, y0.size() * 4 + 16);
    if (dq) tlc_dfree(c, dq, q8 * (size_t)m);
}

/* n_seq sequences of len positions each in a pool of blocks handed out in a
 * shuffled order; m tokens, token j of sequence j % n_seq at a position below len */
static void test_paged(tlc_ctx *c, int nh, int nkv, int D, int n_seq, int len, int m, int window) {
    const int shift = 4, B = 1 << shift, nb_seq = (len + B - 1) / B, n_blocks = n_seq * nb_seq + 3;
    const int64_t N = (int64_t)n_blocks * B, G = nh / nkv;
    std::vector<int32_t> perm(n_blocks), table(n_seq * nb_seq), pos(m), seq(m);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) std::swap(perm[i], perm[rnd_u32() % (i + 1)]);
    for (int i = 0; i < n_seq * nb_seq; i++) table[i] = perm[i];
    /* logical K/V [seq][pos][kvh][D] as f16, placed into [kvh][N][D] through the tables */
    std::vector<uint16_t> kl((size_t)n_seq * len * nkv * D), vl(kl.size()), kp((size_t)nkv * N * D, 0), vp(kp.size(), 0);
    for (size_t i = 0; i < kl.size(); i++) kl[i] = tl_fp32_to_fp16(rnd_normal()), vl[i] = tl_fp32_to_fp16(rnd_normal());
    for (int s = 0; s < n_seq; s++)
        for (int p = 0; p < len; p++)
            for (int h = 0; h < nkv; h++) {
                const int64_t slot = (int64_t)table[s * nb_seq + p / B] * B + p % B;
                memcpy(&kp[((size_t)h * N + slot) * D], &kl[(((size_t)s * len + p) * nkv + h) * D], (size_t)D * 2);
                memcpy(&vp[((size_t)h * N + slot) * D], &vl[(((size_t)s * len + p) * nkv + h) * D], (size_t)D * 2);
            }
    for (int j = 0; j < m; j++) seq[j] = j % n_seq, pos[j] = (int32_t)(rnd_u32() % len);
    std::vector<float> q((size_t)m * nh * D);
    for (auto &v : q) v = rnd_normal();
    void *dk, *dv, *dt, *dpos, *dseq;
    OK(tlc_alloc(c, kp.size() * 2, "k", &dk));
    OK(tlc_alloc(c, vp.size() * 2, "v", &dv));
    OK(tlc_alloc(c, table.size() * 4, "table", &dt));
    OK(tlc_alloc(c, (size_t)m * 4, "pos", &dpos));
    OK(tlc_alloc(c, (size_t)m * 4, "seq", &dseq));
    OK(tlc_upload(c, dk, kp.data(), kp.size() * 2));
    OK(tlc_upload(c, dv, vp.data(), vp.size() * 2));
    OK(tlc_upload(c, dt, table.data(), table.size() * 4));
    OK(tlc_upload(c, dpos, pos.data(), (size_t)m * 4));
    OK(tlc_upload(c, dseq, seq.data(), (size_t)m * 4));
    float *dq = dput(c, q), *dout;
    OK(tlc_alloc(c, q.size() * 4, "out", (void **)&dout));
    poison(c, dout, q.size());
    void *scr;
    const size_t sn = tlc_attn_paged_scratch(m, nh, nkv, D);
    OK(tlc_alloc(c, sn * 4, "scratch", &scr));
    const float scale = 1.0f / sqrtf((float)D);
    const int splits = tlc_attn_paged_splits(m, nkv, len);
    OK(tlc_attn_paged(c, dq, (int64_t)nh * D, m, dk, dv, N, nh, nkv, D, (const int32_t *)dpos, (const int32_t *)dseq,
                      (const int32_t *)dt, nb_seq, shift, window, scale, splits, (float *)scr, dout));
    std::vector<float> out = dget(c, dout, q.size());
    std::vector<double> ref(q.size());
    std::vector<double> sc(len);
    for (int j = 0; j < m; j++)
        for (int h = 0; h < nh; h++) {
            const int s = seq[j], hk = h / (int)G, p1 = pos[j], p0 = window > 0 && p1 - window + 1 > 0 ? p1 - window + 1 : 0;
            double mx = -INFINITY, sum = 0;
            for (int p = p0; p <= p1; p++) {
                double d = 0;
                for (int i = 0; i < D; i++)
                    d += (double)q[((size_t)j * nh + h) * D + i] * tl_fp16_to_fp32(kl[(((size_t)s * len + p) * nkv + hk) * D + i]);
                sc[p] = d * scale;
                mx = std::max(mx, sc[p]);
            }
            for (int p = p0; p <= p1; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int p = p0; p <= p1; p++) o += sc[p] / sum * tl_fp16_to_fp32(vl[(((size_t)s * len + p) * nkv + hk) * D + i]);
                ref[((size_t)j * nh + h) * D + i] = o;
            }
        }
    size_t bad;
    const double e = rel_err(out.data(), ref.data(), out.size(), &bad);
    CHECK(e < 1e-4, "paged attention heads %d/%d D %d seqs %d len %d m %d window %d splits %d: rel err %.2e (%zu "
          "non-finite)", nh, nkv, D, n_seq, len, m, window, splits, e, bad);
    tlc_dfree(c, dk, kp.size() * 2), tlc_dfree(c, dv, vp.size() * 2), tlc_dfree(c, dt, table.size() * 4);
    tlc_dfree(c, dpos, (size_t)m * 4), tlc_dfree(c, dseq, (size_t)m * 4), tlc_dfree(c, dq, q.size() * 4 + 16);
    tlc_dfree(c, dout, q.size() * 4), tlc_dfree(c, scr, sn * 4);
}

static void test_rows(tlc_ctx *c) {
    /* RoPE per token: token t at pos[t], q and k heads adjacent in a strided row */
    const int nh = 6, hd = 64, m = 5, ts = nh * hd + 32;
    for (int neox = 0; neox < 2; neox++) {
        std::vector<float> x((size_t)m * ts), fdiv(hd / 2);
        for (auto &v : x) v = rnd_normal();
        for (auto &v : fdiv) v = 1.0f + 3.0f * rnd_unif();
        std::vector<int32_t> pos = {0, 7, 300, 4095, 17};
        float *dx = dput(c, x), *df = dput(c, fdiv);
        void *dp;
        OK(tlc_alloc(c, m * 4, "pos", &dp));
        OK(tlc_upload(c, dp, pos.data(), m * 4));
        const tlc_rope_params rp = {hd, neox == 1, 500000.0f, 1.0f, df};
        OK(tlc_rope_rows(c, dx, m, ts, nh, hd, (const int32_t *)dp, &rp));
        std::vector<float> y = dget(c, dx, x.size());
        std::vector<double> ref(x.begin(), x.end());
        for (int t = 0; t < m; t++)
            for (int h = 0; h < nh; h++)
                for (int p = 0; p < hd / 2; p++) {
                    const double ang = pos[t] * pow(500000.0, -2.0 * p / hd) / fdiv[p];
                    const int a = neox ? p : 2 * p, b = neox ? p + hd / 2 : 2 * p + 1;
                    const double x0 = x[t * ts + h * hd + a], x1 = x[t * ts + h * hd + b];
                    ref[t * ts + h * hd + a] = x0 * cos(ang) - x1 * sin(ang);
                    ref[t * ts + h * hd + b] = x0 * sin(ang) + x1 * cos(ang);
                }
        /* the angle pos * theta is formed in f32: at position 4095 its rounding alone moves
         * a rotated value by up to ~2.5e-4 of its size (~5e-5 over the five tokens' rows) */
        const double e = rel_err(y.data(), ref.data(), y.size(), NULL);
        CHECK(e < 2e-4, "rope rows neox %d: rel err %.2e", neox, e);
        tlc_dfree(c, dx, x.size() * 4 + 16), tlc_dfree(c, df, fdiv.size() * 4 + 16), tlc_dfree(c, dp, m * 4);
    }
    /* KV store to slots: exact f16 of the values, at [kvh][N][hd] */
    {
        const int nkv = 3, d = 32, n = 4, N = 64;
        std::vector<float> k((size_t)n * 200), v(k.size());
        for (auto &e : k) e = rnd_normal();
        for (auto &e : v) e = rnd_normal();
        std::vector<int32_t> slot = {5, 63, 0, 17};
        float *dk = dput(c, k), *dvv = dput(c, v);
        void *kc, *vc, *ds;
        OK(tlc_alloc(c, (size_t)nkv * N * d * 2, "kc", &kc));
        OK(tlc_alloc(c, (size_t)nkv * N * d * 2, "vc", &vc));
        OK(tlc_alloc(c, n * 4, "slot", &ds));
        OK(tlc_upload(c, ds, slot.data(), n * 4));
        OK(tlc_memset(c, kc, 0, (size_t)nkv * N * d * 2));
        OK(tlc_kv_store_slots(c, dk, dvv, n, 200, nkv, d, kc, vc, N, (const int32_t *)ds));
        std::vector<uint16_t> hk((size_t)nkv * N * d), hv(hk.size());
        OK(tlc_download(c, hk.data(), kc, hk.size() * 2));
        OK(tlc_download(c, hv.data(), vc, hv.size() * 2));
        int bad = 0;
        for (int t = 0; t < n; t++)
            for (int h = 0; h < nkv; h++)
                for (int i = 0; i < d; i++) {
                    bad += hk[((size_t)h * N + slot[t]) * d + i] != tl_fp32_to_fp16(k[t * 200 + h * d + i]);
                    bad += hv[((size_t)h * N + slot[t]) * d + i] != tl_fp32_to_fp16(v[t * 200 + h * d + i]);
                }
        CHECK(bad == 0, "kv store slots: %d values misplaced", bad);
        tlc_dfree(c, dk, k.size() * 4 + 16), tlc_dfree(c, dvv, v.size() * 4 + 16);
        tlc_dfree(c, kc, (size_t)nkv * N * d * 2), tlc_dfree(c, vc, (size_t)nkv * N * d * 2), tlc_dfree(c, ds, n * 4);
    }
    /* LayerNorm, GELU, GELU-GLU, gather, argmax */
    {
        const int n = 300, m = 7;
        std::vector<float> x((size_t)m * 2 * n), w(n), b(n);
        for (auto &e : x) e = rnd_normal() * 3.0f + 0.5f;
        for (auto &e : w) e = rnd_normal();
        for (auto &e : b) e = rnd_normal();
        float *dx = dput(c, x), *dw = dput(c, w), *db = dput(c, b), *dy;
        OK(tlc_alloc(c, x.size() * 4, "y", (void **)&dy));
        poison(c, dy, x.size());
        OK(tlc_layernorm(c, dx, dw, db, 1e-5f, n, m, dy));
        std::vector<float> y = dget(c, dy, (size_t)m * n);
        std::vector<double> ref((size_t)m * n);
        for (int j = 0; j < m; j++) {
            double mu = 0, var = 0;
            for (int i = 0; i < n; i++) mu += x[j * n + i];
            mu /= n;
            for (int i = 0; i < n; i++) var += (x[j * n + i] - mu) * (x[j * n + i] - mu);
            var /= n;
            for (int i = 0; i < n; i++) ref[j * n + i] = (x[j * n + i] - mu) / sqrt(var + 1e-5) * w[i] + b[i];
        }
        CHECK(rel_err(y.data(), ref.data(), y.size(), NULL) < 1e-5, "layernorm");
        auto gelu = [](double v) { return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
        OK(tlc_glu_gelu_rows(c, dx, dy, m, n));
        y = dget(c, dy, (size_t)m * n);
        for (int j = 0; j < m; j++)
            for (int i = 0; i < n; i++) ref[j * n + i] = gelu(x[j * 2 * n + i]) * x[j * 2 * n + n + i];
        CHECK(rel_err(y.data(), ref.data(), y.size(), NULL) < 1e-5, "gelu glu");
        OK(tlc_gelu_rows(c, dx, m, n, 2 * n));
        y = dget(c, dx, x.size());
        std::vector<double> ref2(x.begin(), x.end());
        for (int j = 0; j < m; j++)
            for (int i = 0; i < n; i++) ref2[j * 2 * n + i] = gelu(x[j * 2 * n + i]);
        CHECK(rel_err(y.data(), ref2.data(), y.size(), NULL) < 1e-5, "gelu rows (strided)");
        OK(tlc_upload(c, dx, x.data(), x.size() * 4));
        std::vector<int32_t> rows = {6, 0, 3};
        void *dr;
        OK(tlc_alloc(c, 12, "rows", &dr));
        OK(tlc_upload(c, dr, rows.data(), 12));
        OK(tlc_gather_rows(c, dx, n, (const int32_t *)dr, 3, dy));
        y = dget(c, dy, (size_t)3 * n);
        int bad = 0;
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < n; i++) bad += y[r * n + i] != x[rows[r] * n + i];
        CHECK(bad == 0, "gather rows: %d differ", bad);
        /* argmax: row 0 a tie (lowest wins), row 1 NaNs before the max, row 2 all NaN but one */
        std::vector<float> a((size_t)3 * 1000);
        for (auto &e : a) e = rnd_normal();
        a[17] = a[900] = 50.0f;
        a[1000 + 0] = NAN, a[1000 + 5] = NAN, a[1000 + 444] = 60.0f;
        for (int i = 0; i < 1000; i++) a[2000 + i] = NAN;
        a[2000 + 777] = -1.0f;
        float *da = dput(c, a);
        void *dam;
        OK(tlc_alloc(c, 12, "argmax", &dam));
        OK(tlc_argmax_rows(c, da, 1000, 1000, 3, (int32_t *)dam));
        int32_t am[3];
        OK(tlc_download(c, am, dam, 12));
        CHECK(am[0] == 17 && am[1] == 444 && am[2] == 777, "argmax rows: %d %d %d (want 17 444 777)", am[0], am[1], am[2]);
        tlc_dfree(c, dx, x.size() * 4 + 16), tlc_dfree(c, dw, w.size() * 4 + 16), tlc_dfree(c, db, b.size() * 4 + 16);
        tlc_dfree(c, dy, x.size() * 4), tlc_dfree(c, dr, 12), tlc_dfree(c, da, a.size() * 4 + 16), tlc_dfree(c, dam, 12);
    }
}

int main(void) {
    tlc_ctx *c;
    OK(tlc_init(0, NULL, &c));
    const tl_type types[] = {TL_TYPE_Q4_0, TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_Q4_K, TL_TYPE_Q6_K};
    const int64_t shapes[][3] = {{256, 100, 2}, {512, 130, 5}, {1024, 64, 8}, {256, 77, 13},
                                 {512, 200, 16}, {256, 64, 31}, {768, 300, 32}, {4096, 96, 4}};
    for (tl_type t : types)
        for (auto &sh : shapes)
            for (int mode = 0; mode < 2; mode++) test_mm(c, t, sh[0], sh[1], sh[2], mode);
    const tl_type mvm_types[] = {TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_F32, TL_TYPE_Q4_0,
                                 TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_Q4_K, TL_TYPE_Q6_K};
    const int64_t mvm_shapes[][3] = {{256, 100, 2}, {512, 131, 3}, {1024, 64, 4}, {256, 77, 4},
                                     {4096, 96, 4}, {768, 300, 3}, {14336, 40, 2}, {2048, 1, 2}};
    for (tl_type t : mvm_types)
        for (auto &sh : mvm_shapes)
            for (int mode = 0; mode < 2; mode++) test_mvm(c, t, sh[0], sh[1], sh[2], mode);
    const int att[][7] = {{4, 2, 16, 2, 40, 5, 0},   {8, 8, 64, 3, 200, 9, 0},   {32, 8, 128, 4, 700, 64, 0},
                          {4, 1, 256, 2, 600, 3, 512}, {8, 1, 64, 5, 90, 7, 4},   {16, 2, 32, 1, 33, 2, 0},
                          {12, 12, 64, 6, 1300, 1, 0}, {64, 8, 128, 2, 300, 16, 0}};
    for (auto &a : att) test_paged(c, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    test_rows(c);
    tlc_free(c);
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}
