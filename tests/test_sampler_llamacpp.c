/* The sampler against llama.cpp: tests/fixtures/sampler_llamacpp.json holds
 * llama.cpp b11312's result for each stage on fixed 300-token logit vectors
 * (tests/fixtures/make_sampler_llamacpp.py, tests/llamacpp/lcp_sampler.cpp).
 * tallow exposes only draws, so each case is compared by drawing:
 *   - exact cases (llama.cpp's kept candidates and probabilities): no draw
 *     outside llama.cpp's candidates, and a chi-square goodness of fit of
 *     N_DRAW draws to its probabilities;
 *   - random cases (XTC with 0 < probability < 1, mirostat's steps): a
 *     two-sample chi-square of tallow's draws against llama.cpp's.
 * Tokens with equal logits that no history or bias touches are one bin:
 * which of tied tokens a cut keeps is unspecified (llama.cpp's partial sort
 * picks any; tallow the lowest ids), so the test compares the mass of each
 * tie group, and the number of distinct tokens drawn from a group against
 * the number llama.cpp kept (within 1: a cumulative cut landing exactly on
 * a tie boundary differs with float rounding). The chi-square bound is the
 * upper 1e-6 quantile (Wilson-Hilferty), and tallow's generator is seeded,
 * so a pass is reproducible and a failure is a real difference, not chance.
 * Cases run through both the fast path and the configurable chain where the
 * fast path applies. Cases with a "note" only print llama.cpp's behaviour
 * (NaN logits, every logit -inf), and tallow's own rule for them is checked:
 * a NaN logit is never drawn, all -inf gives token 0. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

#define FIXTURE "tests/fixtures/sampler_llamacpp.json"
#define NV 300
#define N_DRAW 10000
#define MAX_VEC 10

static const char *vec_name[MAX_VEC];
static float vec[MAX_VEC][NV];
static int n_vec;

static const float *vector(const char *name) {
    for (int i = 0; i < n_vec; i++)
        if (!strcmp(vec_name[i], name)) return vec[i];
    return NULL;
}

/* upper 1e-6 quantile of chi-square with df degrees of freedom */
static double chi2_bound(int df) {
    if (df < 1) return INFINITY;
    double a = 2.0 / (9.0 * df), z = 4.753;
    return df * pow(1 - a + z * sqrt(a), 3);
}

typedef struct {
    int n_cls;
    int cls[NV]; /* token -> tie group */
} groups;

/* Tie groups: equal logits in llama.cpp's vector, tokens of the history or
 * a logit bias alone. */
static void make_groups(groups *g, const float *lv, const cJSON *c) {
    bool special[NV] = {false};
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, "history")) if (t->valueint >= 0 && t->valueint < NV) special[t->valueint] = true;
    const cJSON *lb = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "params"), "logit_bias");
    cJSON_ArrayForEach(t, lb) special[cJSON_GetArrayItem(t, 0)->valueint] = true;
    g->n_cls = 0;
    for (int i = 0; i < NV; i++) {
        g->cls[i] = -1;
        if (!special[i])
            for (int j = 0; j < i; j++)
                if (!special[j] && (lv[j] == lv[i] || (isnan(lv[j]) && isnan(lv[i])))) {
                    g->cls[i] = g->cls[j];
                    break;
                }
        if (g->cls[i] < 0) g->cls[i] = g->n_cls++;
    }
}

static tl_sampler_params params_of(const cJSON *pj, tl_logit_bias *bias, int32_t *breakers, bool chain) {
    tl_sampler_params p = tl_sampler_default_params();
    p.top_k = 0, p.top_p = 1, p.min_p = 0, p.temp = 1, p.seed = 20261202;
    static const struct { const char *name; size_t off; char type; } F[] = {
        {"temp", offsetof(tl_sampler_params, temp), 'f'},
        {"top_k", offsetof(tl_sampler_params, top_k), 'i'},
        {"top_p", offsetof(tl_sampler_params, top_p), 'f'},
        {"min_p", offsetof(tl_sampler_params, min_p), 'f'},
        {"repeat_penalty", offsetof(tl_sampler_params, repeat_penalty), 'f'},
        {"repeat_last_n", offsetof(tl_sampler_params, repeat_last_n), 'i'},
        {"presence_penalty", offsetof(tl_sampler_params, presence_penalty), 'f'},
        {"frequency_penalty", offsetof(tl_sampler_params, frequency_penalty), 'f'},
        {"typical_p", offsetof(tl_sampler_params, typical_p), 'f'},
        {"top_n_sigma", offsetof(tl_sampler_params, top_n_sigma), 'f'},
        {"xtc_probability", offsetof(tl_sampler_params, xtc_probability), 'f'},
        {"xtc_threshold", offsetof(tl_sampler_params, xtc_threshold), 'f'},
        {"dry_multiplier", offsetof(tl_sampler_params, dry_multiplier), 'f'},
        {"dry_base", offsetof(tl_sampler_params, dry_base), 'f'},
        {"dry_allowed_length", offsetof(tl_sampler_params, dry_allowed_length), 'i'},
        {"dry_last_n", offsetof(tl_sampler_params, dry_last_n), 'i'},
        {"mirostat", offsetof(tl_sampler_params, mirostat), 'i'},
        {"mirostat_tau", offsetof(tl_sampler_params, mirostat_tau), 'f'},
        {"mirostat_eta", offsetof(tl_sampler_params, mirostat_eta), 'f'},
    };
    const cJSON *x;
    cJSON_ArrayForEach(x, pj) {
        bool known = false;
        for (size_t i = 0; i < sizeof F / sizeof *F; i++) {
            if (strcmp(F[i].name, x->string)) continue;
            known = true;
            if (F[i].type == 'f') *(float *)((char *)&p + F[i].off) = (float)x->valuedouble;
            else *(int32_t *)((char *)&p + F[i].off) = (int32_t)x->valueint;
        }
        if (!strcmp(x->string, "logit_bias")) {
            const cJSON *e;
            cJSON_ArrayForEach(e, x) {
                const cJSON *b = cJSON_GetArrayItem(e, 1);
                bias[p.n_logit_bias].token = cJSON_GetArrayItem(e, 0)->valueint;
                bias[p.n_logit_bias++].bias = cJSON_IsNull(b) ? -INFINITY : (float)b->valuedouble;
            }
            p.logit_bias = bias;
            known = true;
        }
        if (!strcmp(x->string, "dry_breakers")) {
            const cJSON *e;
            cJSON_ArrayForEach(e, x) breakers[p.n_dry_breakers++] = e->valueint;
            p.dry_breakers = breakers;
            known = true;
        }
        if (!strcmp(x->string, "samplers")) p.samplers = x->valuestring, known = true;
        CHECK(known, "parameter '%s' known", x->string);
    }
    if (chain && !p.samplers) p.samplers = "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature";
    return p;
}

static tl_sampler *mk(const tl_sampler_params *p, const cJSON *c) {
    tl_sampler *s = NULL;
    CHECK(tl_sampler_init(p, NV, &s) == TL_OK, "%s: init: %s", cJSON_GetObjectItem(c, "name")->valuestring,
          tl_last_error());
    if (!s) return NULL;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, "history")) tl_sampler_accept(s, t->valueint);
    return s;
}

/* tallow's draws (counts per token) against llama.cpp's probabilities */
static void compare_exact(const char *what, const groups *g, const double *P, const double *cnt, double n) {
    double Pc[NV] = {0}, Cc[NV] = {0};
    int kept[NV] = {0}, drawn[NV] = {0}, outside = 0, first_out = -1;
    for (int i = 0; i < NV; i++) {
        Pc[g->cls[i]] += P[i], Cc[g->cls[i]] += cnt[i];
        kept[g->cls[i]] += P[i] > 0, drawn[g->cls[i]] += cnt[i] > 0;
    }
    for (int c = 0; c < g->n_cls; c++)
        if (Pc[c] == 0 && Cc[c] > 0) outside += (int)Cc[c], first_out = c;
    CHECK(outside == 0, "%s: %d draws outside llama.cpp's candidates (tie group %d)", what, outside, first_out);
    /* chi-square over groups, those expecting < 5 draws pooled */
    double x2 = 0, pool_e = 0, pool_o = 0;
    int bins = 0;
    for (int c = 0; c < g->n_cls; c++) {
        double e = Pc[c] * n;
        if (Pc[c] == 0) continue;
        if (e < 5) {
            pool_e += e, pool_o += Cc[c];
            continue;
        }
        x2 += (Cc[c] - e) * (Cc[c] - e) / e, bins++;
        /* one group off alone can hide in a sum over many: each by itself
         * too (binomial z, 5.3: about 1e-7 each side, 300 groups at most) */
        double z = (Cc[c] - e) / sqrt(e * fmax(1 - Pc[c], 1e-9));
        CHECK(e < 20 || fabs(z) <= 5.3, "%s: tie group %d drawn %.0f times, llama.cpp's p %.5f expects %.1f (z %.1f)",
              what, c, Cc[c], Pc[c], e, z);
        /* every kept token of a group is drawn if each expects >= 20 draws */
        int lo = e / kept[c] >= 20 ? kept[c] - 1 : 0;
        CHECK(drawn[c] <= kept[c] + 1 && drawn[c] >= lo, "%s: tie group %d: %d tokens drawn, llama.cpp keeps %d",
              what, c, drawn[c], kept[c]);
    }
    if (pool_e > 0) x2 += (pool_o - pool_e) * (pool_o - pool_e) / fmax(pool_e, 1.0), bins++;
    CHECK(x2 <= chi2_bound(bins - 1), "%s: chi-square %.1f over %d bins, bound %.1f", what, x2, bins,
          chi2_bound(bins - 1));
}

/* two histograms (counts per token) from the same distribution? */
static void compare_hist(const char *what, const groups *g, const double *a, double na, const double *b, double nb) {
    double A[NV] = {0}, B[NV] = {0};
    for (int i = 0; i < NV; i++) A[g->cls[i]] += a[i], B[g->cls[i]] += b[i];
    double x2 = 0, pa = 0, pb = 0, ka = sqrt(nb / na), kb = sqrt(na / nb);
    int bins = 0;
    for (int c = 0; c < g->n_cls; c++) {
        if (A[c] + B[c] < 10) {
            pa += A[c], pb += B[c];
            continue;
        }
        x2 += (ka * A[c] - kb * B[c]) * (ka * A[c] - kb * B[c]) / (A[c] + B[c]), bins++;
    }
    if (pa + pb > 0) x2 += (ka * pa - kb * pb) * (ka * pa - kb * pb) / (pa + pb), bins++;
    CHECK(x2 <= chi2_bound(bins - 1), "%s: two-sample chi-square %.1f over %d bins, bound %.1f", what, x2, bins,
          chi2_bound(bins - 1));
}

static void hist_of(const cJSON *h, double *out, double *n) {
    memset(out, 0, NV * sizeof *out);
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, h) {
        int t = cJSON_GetArrayItem(e, 0)->valueint;
        double k = cJSON_GetArrayItem(e, 1)->valuedouble;
        if (t >= 0 && t < NV) out[t] += k;
        *n += k;
    }
}

static bool fast_path_case(const cJSON *pj) {
    const cJSON *x;
    cJSON_ArrayForEach(x, pj) {
        const char *k = x->string;
        if (strcmp(k, "temp") && strcmp(k, "top_k") && strcmp(k, "top_p") && strcmp(k, "min_p") &&
            strcmp(k, "repeat_penalty") && strcmp(k, "repeat_last_n") && strcmp(k, "presence_penalty") &&
            strcmp(k, "frequency_penalty") && strcmp(k, "logit_bias"))
            return false;
    }
    return true;
}

static int n_exact, n_random, n_shown;

static void run_case(const cJSON *c, bool chain) {
    char what[200];
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const char *kind = cJSON_GetObjectItem(c, "kind")->valuestring;
    const cJSON *lvj = cJSON_GetObjectItem(c, "lcp_vector");
    const float *tv = vector(cJSON_GetObjectItem(c, "vector")->valuestring);
    const float *lv = lvj ? vector(lvj->valuestring) : tv;
    snprintf(what, sizeof what, "%s [%s]", name, chain ? "forced chain" : "as configured");
    CHECK(tv && lv, "%s: vectors present", what);
    if (!tv || !lv) return;
    static tl_logit_bias bias[NV];
    static int32_t breakers[NV];
    const cJSON *pj = cJSON_GetObjectItem(c, "params");
    tl_sampler_params p = params_of(pj, bias, breakers, chain);
    groups g;
    make_groups(&g, lv, c);
    static double cnt[NV], P[NV], H[NV];
    const cJSON *note = cJSON_GetObjectItem(c, "note");
    if (note) {
        /* shown, not compared: llama.cpp's behaviour, and tallow's own rule */
        tl_sampler *s = mk(&p, c);
        if (!s) return;
        bool all_inf = true, nan_drawn = false, bad = false;
        int first = -2;
        for (int i = 0; i < NV; i++) all_inf &= tv[i] == -INFINITY;
        const cJSON *lb = cJSON_GetObjectItem(pj, "logit_bias");
        all_inf |= lb && cJSON_GetArraySize(lb) == NV;
        for (int d = 0; d < 200; d++) {
            int32_t t = tl_sampler_sample(s, tv);
            bad |= t < 0 || t >= NV;
            if (t >= 0 && t < NV) nan_drawn |= isnan(tv[t]), first = first == -2 ? t : first;
        }
        CHECK(!bad && !nan_drawn, "%s: tallow draws valid, non-NaN tokens", what);
        if (all_inf) CHECK(first == 0, "%s: every logit -inf gives token 0 (got %d)", what, first);
        const cJSON *h = cJSON_GetObjectItem(c, "hist");
        if (!chain) {
            char *top = h ? cJSON_PrintUnformatted(cJSON_GetArrayItem(h, 0)) : NULL;
            printf("shown: %s: tallow's first draw %d; llama.cpp's %s %s (%s)\n", name, first,
                   h ? "first [token, count] drawn" : "candidates:", top ? top : "in the fixture", note->valuestring);
            free(top);
        }
        n_shown++;
        tl_sampler_free(s);
        return;
    }
    if (!strcmp(kind, "dist") || !strcmp(kind, "miro")) {
        memset(P, 0, sizeof P);
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "dist")) P[cJSON_GetArrayItem(e, 0)->valueint] =
            cJSON_GetArrayItem(e, 1)->valuedouble;
        memset(cnt, 0, sizeof cnt);
        if (!strcmp(kind, "dist")) {
            tl_sampler *s = mk(&p, c);
            if (!s) return;
            for (int d = 0; d < N_DRAW; d++) {
                int32_t t = tl_sampler_sample(s, tv);
                if (t >= 0 && t < NV) cnt[t]++;
            }
            tl_sampler_free(s);
            compare_exact(what, &g, P, cnt, N_DRAW);
            n_exact++;
            return;
        }
        /* mirostat: step 1 of many seeded runs against the exact step-1
         * distribution, then each step's histogram against llama.cpp's */
        const cJSON *steps = cJSON_GetObjectItem(c, "steps");
        int runs = cJSON_GetObjectItem(c, "runs")->valueint, n_step = cJSON_GetArraySize(steps);
        static double hs[16][NV];
        memset(hs, 0, sizeof hs);
        for (int r = 0; r < runs; r++) {
            tl_sampler_params q = p;
            q.seed = 1000003u * (uint64_t)(r + 1);
            tl_sampler *s = mk(&q, c);
            if (!s) return;
            for (int t = 0; t < n_step && t < 16; t++) {
                int32_t tok = tl_sampler_sample(s, tv);
                if (tok >= 0 && tok < NV) hs[t][tok]++;
                tl_sampler_accept(s, tok);
            }
            tl_sampler_free(s);
        }
        compare_exact(what, &g, P, hs[0], runs);
        for (int t = 0; t < n_step && t < 16; t++) {
            double n_l;
            hist_of(cJSON_GetArrayItem(steps, t), H, &n_l);
            char w2[240];
            snprintf(w2, sizeof w2, "%s step %d", what, t + 1);
            compare_hist(w2, &g, H, n_l, hs[t], runs);
        }
        n_random++;
        return;
    }
    /* random stage: tallow's draws against llama.cpp's */
    double n_l;
    hist_of(cJSON_GetObjectItem(c, "hist"), H, &n_l);
    tl_sampler *s = mk(&p, c);
    if (!s) return;
    memset(cnt, 0, sizeof cnt);
    for (int d = 0; d < N_DRAW; d++) {
        int32_t t = tl_sampler_sample(s, tv);
        if (t >= 0 && t < NV) cnt[t]++;
    }
    tl_sampler_free(s);
    compare_hist(what, &g, H, n_l, cnt, N_DRAW);
    n_random++;
}

int main(void) {
    char *txt = test_read_file(FIXTURE, NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECK(j != NULL, "fixture %s readable", FIXTURE);
    if (!j) return test_finish();
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(j, "vectors")) {
        if (n_vec == MAX_VEC || cJSON_GetArraySize(v) != NV) continue;
        vec_name[n_vec] = v->string;
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, v) vec[n_vec][i++] = cJSON_IsNull(x) ? NAN : cJSON_IsString(x) ? -INFINITY
                                                                                               : (float)x->valuedouble;
        n_vec++;
    }
    const cJSON *c;
    int n_case = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) {
        n_case++;
        run_case(c, false);
        if (fast_path_case(cJSON_GetObjectItem(c, "params"))) run_case(c, true);
    }
    printf("%d cases: %d exact comparisons, %d distribution comparisons, %d shown only\n", n_case, n_exact, n_random,
           n_shown);
    CHECK(n_case >= 80, "fixture has the expected size (%d cases)", n_case);
    cJSON_Delete(j);
    return test_finish();
}
