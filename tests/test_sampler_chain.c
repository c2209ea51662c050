/* The sampler chain's stages against their definitions computed here (in
 * double, from the logits): the kept set and the distribution of many draws
 * for top-n-sigma, typical-p and XTC; DRY's penalty on a token that would
 * extend a repeat, and breakers; mirostat v2 holding the mean surprise near
 * tau; the order string's errors; NaN and all -inf logits. */
#include <math.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

#define NV 12
static const float L[NV] = {3.0f, 2.6f, 2.5f, 1.0f, 0.8f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f, -3.0f, -4.0f};

static tl_sampler *mk(tl_sampler_params p) {
    tl_sampler *s = NULL;
    CHECK(tl_sampler_init(&p, NV, &s) == TL_OK, "init: %s", tl_last_error());
    return s;
}

static tl_sampler_params base(void) {
    tl_sampler_params p = tl_sampler_default_params();
    p.top_k = 0, p.top_p = 1, p.min_p = 0, p.temp = 1, p.seed = 11;
    return p;
}

/* draws vs softmax over keep[] (1 = kept); max abs error of frequencies */
static double dist_err(tl_sampler *s, const int *keep, int n_draw) {
    double f[NV] = {0}, z = 0, e = 0;
    for (int i = 0; i < n_draw; i++) {
        int32_t t = tl_sampler_sample(s, L);
        if (t >= 0 && t < NV) f[t] += 1.0 / n_draw;
    }
    for (int i = 0; i < NV; i++) z += keep[i] ? exp(L[i]) : 0;
    for (int i = 0; i < NV; i++) {
        double want = keep[i] ? exp(L[i]) / z : 0;
        if (!keep[i] && f[i] > 0) return 1.0; /* a token outside the set */
        e = fmax(e, fabs(f[i] - want));
    }
    return e;
}

static void test_top_n_sigma(void) {
    tl_sampler_params p = base();
    p.top_n_sigma = 1.0f;
    double m = 0, sq = 0;
    for (int i = 0; i < NV; i++) m += L[i], sq += (double)L[i] * L[i];
    m /= NV;
    double sd = sqrt(sq / NV - m * m);
    int keep[NV];
    for (int i = 0; i < NV; i++) keep[i] = L[i] >= L[0] - sd;
    tl_sampler *s = mk(p);
    CHECK(dist_err(s, keep, 40000) < 0.015, "top-n-sigma keeps logits >= max - n*sd, softmax among them");
    tl_sampler_free(s);
}

static void test_typical(void) {
    tl_sampler_params p = base();
    p.typical_p = 0.5f;
    double z = 0, pr[NV], H = 0;
    for (int i = 0; i < NV; i++) z += exp(L[i]);
    for (int i = 0; i < NV; i++) pr[i] = exp(L[i]) / z, H -= pr[i] * log(pr[i]);
    /* order by |surprise - H|, take until the mass reaches p */
    int keep[NV] = {0}, used[NV] = {0};
    double cum = 0;
    while (cum < 0.5) {
        int b = -1;
        for (int i = 0; i < NV; i++)
            if (!used[i] && (b < 0 || fabs(-log(pr[i]) - H) < fabs(-log(pr[b]) - H))) b = i;
        used[b] = keep[b] = 1;
        cum += pr[b];
    }
    tl_sampler *s = mk(p);
    CHECK(dist_err(s, keep, 40000) < 0.015, "typical-p keeps the tokens nearest the entropy");
    tl_sampler_free(s);
}

static void test_xtc(void) {
    tl_sampler_params p = base();
    p.xtc_probability = 1.0f, p.xtc_threshold = 0.1f;
    double z = 0;
    for (int i = 0; i < NV; i++) z += exp(L[i]);
    int keep[NV], m = 0;
    for (int i = 0; i < NV; i++) m += exp(L[i]) / z >= 0.1;
    for (int i = 0; i < NV; i++) keep[i] = i >= m - 1; /* the least likely of the top ones stays */
    tl_sampler *s = mk(p);
    CHECK(m >= 2, "fixture has >= 2 tokens over the threshold");
    CHECK(dist_err(s, keep, 40000) < 0.015, "xtc (p=1) drops all top tokens but the least likely");
    tl_sampler_free(s);
    p.xtc_probability = 0.0f;
    p.samplers = "xtc;temperature";
    s = mk(p);
    int all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    CHECK(dist_err(s, all, 40000) < 0.015, "xtc probability 0 changes nothing");
    tl_sampler_free(s);
}

static void test_dry(void) {
    tl_sampler_params p = base();
    p.temp = 0; /* greedy: the penalty decides */
    p.dry_multiplier = 0.8f, p.dry_base = 1.75f, p.dry_allowed_length = 2;
    float lg[NV] = {0};
    lg[3] = 1.0f, lg[4] = 0.5f; /* 3 would repeat, 4 is next best */
    tl_sampler *s = mk(p);
    int32_t hist[] = {1, 2, 3, 7, 1, 2};
    for (int i = 0; i < 6; i++) tl_sampler_accept(s, hist[i]);
    /* "1 2" matched, 3 would extend it: L = 2, penalty 0.8 * 1.75^0 = 0.8 */
    CHECK(tl_sampler_sample(s, lg) == 4, "dry: a token extending a repeat of 2 is penalised by 0.8");
    lg[3] = 1.31f; /* 1.31 - 0.8 = 0.51 > 0.5 */
    CHECK(tl_sampler_sample(s, lg) == 3, "dry: exactly multiplier * base^0");
    tl_sampler_free(s);
    /* longer repeat: "1 2 3" then "1 2 3" -> 7 extends length 3: 0.8 * 1.75 */
    s = mk(p);
    int32_t h2[] = {1, 2, 3, 7, 1, 2, 3};
    for (int i = 0; i < 7; i++) tl_sampler_accept(s, h2[i]);
    float l2[NV] = {0};
    l2[7] = 1.0f + 0.8f * 1.75f - 0.02f, l2[5] = 1.0f;
    CHECK(tl_sampler_sample(s, l2) == 5, "dry: length 3 costs 0.8 * 1.75");
    l2[7] = 1.0f + 0.8f * 1.75f + 0.02f;
    CHECK(tl_sampler_sample(s, l2) == 7, "dry: and no more");
    tl_sampler_free(s);
    /* a breaker inside the repeat stops it */
    int32_t br[] = {2};
    p.dry_breakers = br, p.n_dry_breakers = 1;
    s = mk(p);
    for (int i = 0; i < 6; i++) tl_sampler_accept(s, hist[i]);
    lg[3] = 1.0f;
    CHECK(tl_sampler_sample(s, lg) == 3, "dry: no penalty across a breaker");
    tl_sampler_free(s);
}

static void test_mirostat(void) {
    tl_sampler_params p = base();
    p.mirostat = 2, p.mirostat_tau = 2.0f, p.mirostat_eta = 0.1f;
    tl_sampler *s = mk(p);
    double z = 0;
    for (int i = 0; i < NV; i++) z += exp(L[i]);
    double sur = 0;
    int n = 20000;
    for (int i = 0; i < n; i++) {
        int32_t t = tl_sampler_sample(s, L);
        sur += -log2(exp(L[t]) / z);
    }
    /* the surprise it targets is of the truncated distribution; with this
     * fixture the untruncated surprise's mean must sit near tau */
    CHECK(fabs(sur / n - 2.0) < 0.35, "mirostat v2 mean surprise %.3f near tau 2", sur / n);
    tl_sampler_free(s);
    p.mirostat = 1;
    s = mk(p);
    int ok = 1;
    for (int i = 0; i < 2000; i++) {
        int32_t t = tl_sampler_sample(s, L);
        ok &= t >= 0 && t < NV;
    }
    CHECK(ok, "mirostat v1 draws valid tokens");
    tl_sampler_free(s);
}

static void test_edges(void) {
    tl_sampler_params p = base();
    tl_sampler *s = NULL;
    p.samplers = "top_k;bogus";
    CHECK(tl_sampler_init(&p, NV, &s) == TL_ERR_INVALID && strstr(tl_last_error(), "'bogus'"), "unknown stage named");
    p.samplers = "top_k;penalties";
    CHECK(tl_sampler_init(&p, NV, &s) == TL_ERR_INVALID, "penalties must come first");
    p.samplers = "top_k;top_k";
    CHECK(tl_sampler_init(&p, NV, &s) == TL_ERR_INVALID, "stage twice refused");
    p = base();
    p.mirostat = 3;
    CHECK(tl_sampler_init(&p, NV, &s) == TL_ERR_INVALID, "mirostat 3 refused");
    p = base();
    p.typical_p = 0.9f;
    s = mk(p);
    float nanl[NV];
    for (int i = 0; i < NV; i++) nanl[i] = NAN;
    nanl[5] = 0.0f;
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= tl_sampler_sample(s, nanl) == 5;
    CHECK(ok, "NaN logits are never chosen");
    float neg[NV];
    for (int i = 0; i < NV; i++) neg[i] = -INFINITY;
    int32_t t = tl_sampler_sample(s, neg);
    CHECK(t >= 0 && t < NV, "all -inf logits still give a token");
    tl_sampler_free(s);
    /* the order matters: temperature before top_p differs from after */
    p = base();
    p.top_p = 0.5f, p.temp = 3.0f, p.samplers = "temperature;top_p";
    s = mk(p);
    int seen_wide = 0;
    for (int i = 0; i < 5000; i++) seen_wide |= tl_sampler_sample(s, L) >= 3;
    tl_sampler_free(s);
    p.samplers = "top_p;temperature";
    s = mk(p);
    int seen_wide2 = 0;
    for (int i = 0; i < 5000; i++) seen_wide2 |= tl_sampler_sample(s, L) >= 3;
    tl_sampler_free(s);
    CHECK(seen_wide && !seen_wide2, "order: top_p after temperature keeps more tokens than before it");
}

int main(void) {
    test_top_n_sigma();
    test_typical();
    test_xtc();
    test_dry();
    test_mirostat();
    test_edges();
    return test_finish();
}
