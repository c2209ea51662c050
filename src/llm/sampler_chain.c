/* llm/sampler_chain: the configurable sampler chain, llama.cpp's stages
 * with its meanings, in the order of tl_sampler_params.samplers (default
 * "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"):
 *   dry          logit -= multiplier * base^(L - allowed_length) for a token
 *                that would extend a repeat of L >= allowed_length tokens
 *                of the recent window (repeats do not cross breaker tokens)
 *   top_n_sigma  keep logits >= max - n * stddev(logits)
 *   top_k, top_p, min_p as in the fast path
 *   typ_p        locally typical sampling: keep the tokens whose surprise
 *                is closest to the entropy until their mass reaches p
 *   xtc          with probability xtc_probability, drop every token with
 *                p >= xtc_threshold except the least likely of them
 *                (when at least two are)
 *   temperature  logits / temp (temp <= 0: the most likely token)
 * Mirostat (v1, v2) replaces the cuts: temperature, then a cut that keeps
 * the observed surprise near tau, mu learning at rate eta.
 * Penalties and logit biases are applied by sampler.c before the chain, so
 * "penalties" may only come first. Owns: the DRY ring and scratch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "llm/sampler_impl.h"

static const char *const smp_names[SMP_N_STAGES] = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p",
                                                     "top_p", "min_p", "xtc", "temperature"};

static int smp_by_logit(const void *a, const void *b) {
    const smp_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* Parse "a;b;c" (',' also separates) into s->order. */
static tl_status smp_parse_order(tl_sampler *s, const char *spec) {
    s->n_order = 0;
    const char *p = spec;
    while (*p) {
        while (*p == ';' || *p == ',' || *p == ' ') p++;
        if (!*p) break;
        size_t l = strcspn(p, ";, ");
        int k = -1;
        for (int i = 0; i < SMP_N_STAGES && k < 0; i++)
            if (strlen(smp_names[i]) == l && !strncmp(p, smp_names[i], l)) k = i;
        if (l == 7 && !strncmp(p, "typical", 7)) k = SMP_TYPICAL;
        if (l == 4 && !strncmp(p, "temp", 4)) k = SMP_TEMPERATURE;
        if (k < 0) return tl_err(TL_ERR_INVALID, "sampler: unknown stage '%.*s' in samplers (known: penalties, dry, "
                                 "top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature)", (int)(l > 40 ? 40 : l), p);
        if (k == SMP_PENALTIES && s->n_order)
            return tl_err(TL_ERR_INVALID, "sampler: 'penalties' can only be the first stage");
        for (int i = 0; i < s->n_order; i++)
            if (s->order[i] == (smp_stage)k) return tl_err(TL_ERR_INVALID, "sampler: stage '%s' listed twice", smp_names[k]);
        s->order[s->n_order++] = (smp_stage)k;
        p += l;
    }
    return TL_OK;
}

tl_status smp_chain_init(tl_sampler *s) {
    const tl_sampler_params *p = &s->p;
    if (isnan(p->typical_p) || isnan(p->top_n_sigma) || isnan(p->xtc_probability) || isnan(p->xtc_threshold) ||
        !isfinite(p->dry_multiplier) || p->dry_multiplier < 0 || !(p->dry_base >= 1.0f) || !isfinite(p->dry_base) ||
        p->dry_allowed_length < 0 || p->dry_last_n < 0 || p->dry_last_n > (1 << 20) || p->n_dry_breakers < 0 ||
        (p->n_dry_breakers && !p->dry_breakers) || p->mirostat < 0 || p->mirostat > 2 ||
        !(p->mirostat_tau >= 0) || !(p->mirostat_eta >= 0))
        return tl_err(TL_ERR_INVALID, "sampler: typical_p/top_n_sigma/xtc/dry/mirostat settings out of range");
    s->chain = p->typical_p < 1.0f || p->top_n_sigma > 0.0f || p->xtc_probability > 0.0f || p->dry_multiplier > 0.0f ||
               p->mirostat || p->samplers;
    tl_status st = smp_parse_order(s, p->samplers ? p->samplers
                                                  : "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature");
    if (st) return st;
    int32_t w = p->dry_last_n;
    s->dry_hist = malloc(((size_t)w + 1) * sizeof *s->dry_hist);
    s->dry_work = malloc((3 * (size_t)w + 2) * sizeof *s->dry_work);
    s->dry_len = malloc((size_t)s->n_vocab * sizeof *s->dry_len);
    s->breaker = calloc((size_t)s->n_vocab, 1);
    if (!s->dry_hist || !s->dry_work || !s->dry_len || !s->breaker) return tl_err(TL_ERR_NOMEM, "sampler: out of memory");
    for (int32_t i = 0; i < p->n_dry_breakers; i++) {
        int32_t t = p->dry_breakers[i];
        if (t < 0 || t >= s->n_vocab) return tl_err(TL_ERR_INVALID, "sampler: dry breaker token %d out of range", t);
        s->breaker[t] = 1;
    }
    s->p.dry_breakers = NULL; /* not kept: the flags above are the copy */
    s->p.samplers = NULL;
    return TL_OK;
}

void smp_chain_reset(tl_sampler *s) {
    s->n_dry = s->dry_head = 0;
    s->mu = 2.0f * s->p.mirostat_tau;
}

void smp_chain_accept(tl_sampler *s, int32_t tok) {
    int32_t w = s->p.dry_last_n;
    if (!w || !s->dry_hist) return;
    s->dry_hist[s->dry_head] = tok;
    s->dry_head = (s->dry_head + 1) % w;
    if (s->n_dry < w) s->n_dry++;
}

/* DRY on cand[0..n) through dry_len[] by token id. */
static void smp_dry(tl_sampler *s, int32_t n) {
    const tl_sampler_params *p = &s->p;
    int32_t h = s->n_dry;
    if (p->dry_multiplier <= 0.0f || h < 2) return;
    /* r: the history newest first; z: Z-function of r; nb: next breaker in r */
    int32_t *r = s->dry_work, *z = r + h, *nb = z + h;
    for (int32_t i = 0; i < h; i++) r[i] = s->dry_hist[((s->dry_head - 1 - i) % p->dry_last_n + p->dry_last_n) % p->dry_last_n];
    if (s->breaker[r[0]]) return; /* the text just broke any repeat */
    nb[h] = h;
    for (int32_t i = h - 1; i >= 0; i--) nb[i] = s->breaker[r[i]] ? i : nb[i + 1];
    int32_t head_cap = nb[0];
    z[0] = h;
    for (int32_t i = 1, lo = 0, hi = 0; i < h; i++) {
        int32_t k = i < hi ? (z[i - lo] < hi - i ? z[i - lo] : hi - i) : 0;
        while (i + k < h && r[k] == r[i + k]) k++;
        z[i] = k;
        if (i + k > hi) lo = i, hi = i + k;
    }
    for (int32_t c = 0; c < n; c++) s->dry_len[s->cand[c].id] = -1;
    /* the token after a match of the newest tokens would extend it */
    for (int32_t i = 1; i < h; i++) {
        int32_t k = z[i];
        if (k > head_cap) k = head_cap;
        if (k > nb[i] - i) k = nb[i] - i;
        if (k < 1) continue;
        int32_t next = r[i - 1];
        if (next >= 0 && next < s->n_vocab && k > s->dry_len[next]) s->dry_len[next] = k;
    }
    for (int32_t c = 0; c < n; c++) {
        int32_t L = s->dry_len[s->cand[c].id];
        if (L >= p->dry_allowed_length && L > 0)
            s->cand[c].logit -= p->dry_multiplier * powf(p->dry_base, (float)(L - p->dry_allowed_length));
    }
}

/* Sort descending and set prob[i] = softmax (temperature 1); returns n. */
static void smp_softmax(tl_sampler *s, int32_t n) {
    qsort(s->cand, (size_t)n, sizeof *s->cand, smp_by_logit);
    float mx = s->cand[0].logit;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (s->prob[i] = isinf(mx) ? 1.0f : expf(s->cand[i].logit - mx));
    for (int32_t i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
}

static int32_t smp_top_n_sigma(tl_sampler *s, int32_t n) {
    float mx = -INFINITY;
    double sum = 0, sq = 0;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        float l = s->cand[i].logit;
        if (!isfinite(l)) continue;
        mx = l > mx ? l : mx;
        sum += l, sq += (double)l * l, m++;
    }
    if (m < 2) return n;
    double mean = sum / m, sd = sqrt(fmax(sq / m - mean * mean, 0.0));
    float lim = mx - s->p.top_n_sigma * (float)sd;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->cand[i].logit >= lim) s->cand[k++] = s->cand[i];
    return k ? k : n;
}

static int smp_by_shift(const void *a, const void *b) {
    const float *x = a, *y = b; /* pairs (shift, prob index as float bits) */
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static int32_t smp_typical(tl_sampler *s, int32_t n) {
    smp_softmax(s, n);
    double H = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->prob[i] > 0) H -= s->prob[i] * log(s->prob[i]);
    /* (|surprise - entropy|, index) pairs in dry_len's room is too small; use a local buffer */
    float (*pairs)[2] = malloc((size_t)n * sizeof *pairs);
    smp_cand *keep = malloc((size_t)n * sizeof *keep);
    if (!pairs || !keep) {
        free(pairs);
        free(keep);
        return n; /* out of memory: leave the candidates as they are */
    }
    for (int32_t i = 0; i < n; i++) {
        pairs[i][0] = s->prob[i] > 0 ? (float)fabs(-log(s->prob[i]) - H) : INFINITY;
        pairs[i][1] = (float)i;
    }
    qsort(pairs, (size_t)n, sizeof *pairs, smp_by_shift);
    double cum = 0;
    int32_t k = 0;
    for (; k < n; k++) {
        int32_t i = (int32_t)pairs[k][1];
        keep[k] = s->cand[i];
        cum += s->prob[i];
        if (cum >= s->p.typical_p) {
            k++;
            break;
        }
    }
    memcpy(s->cand, keep, (size_t)k * sizeof *keep);
    free(pairs);
    free(keep);
    return k;
}

static int32_t smp_top_p(tl_sampler *s, int32_t n) {
    smp_softmax(s, n);
    double cum = 0;
    for (int32_t i = 0; i < n; i++)
        if ((cum += s->prob[i]) >= s->p.top_p) return i + 1;
    return n;
}

static int32_t smp_min_p(tl_sampler *s, int32_t n) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = s->cand[i].logit > mx ? s->cand[i].logit : mx;
    float lim = mx + logf(s->p.min_p);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->cand[i].logit >= lim) s->cand[k++] = s->cand[i];
    return k ? k : n;
}

static int32_t smp_xtc(tl_sampler *s, int32_t n) {
    if (n < 2) return n;
    double u = (double)(smp_rand(s) >> 11) * (1.0 / 9007199254740992.0);
    if (u >= s->p.xtc_probability) return n;
    smp_softmax(s, n);
    int32_t m = 0;
    while (m < n && s->prob[m] >= s->p.xtc_threshold) m++;
    if (m < 2) return n;
    memmove(s->cand, s->cand + (m - 1), (size_t)(n - m + 1) * sizeof *s->cand);
    return n - m + 1;
}

/* Move the k largest candidates to the front (unordered), 0 < k < n; ties
 * broken by id as in the sort, so the kept set is the sort's. */
static void smp_top_k(smp_cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        smp_cand pv = c[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (smp_by_logit(&c[i], &pv) < 0) i++;
            while (smp_by_logit(&c[j], &pv) > 0) j--;
            if (i <= j) {
                smp_cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
}

/* Draw from softmax(cand[0..n)); *p_out its probability. */
static int32_t smp_draw(tl_sampler *s, int32_t n, float *p_out) {
    smp_softmax(s, n);
    double r = (double)(smp_rand(s) >> 11) * (1.0 / 9007199254740992.0), cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += s->prob[i];
        if (r < cum) {
            *p_out = s->prob[i];
            return i;
        }
    }
    *p_out = s->prob[n - 1];
    return n - 1;
}

static int32_t smp_mirostat(tl_sampler *s, int32_t n) {
    const tl_sampler_params *p = &s->p;
    if (p->temp > 0)
        for (int32_t i = 0; i < n; i++) s->cand[i].logit /= p->temp;
    smp_softmax(s, n);
    int32_t k = n;
    if (p->mirostat == 1) {
        /* Zipf exponent from the top 100, then the k that gives surprise mu */
        int32_t m = n < 100 ? n : 100;
        double num = 0, den = 0;
        for (int32_t i = 0; i + 1 < m; i++) {
            if (!(s->prob[i + 1] > 0)) break;
            double t = log((i + 2.0) / (i + 1.0)), b = log(s->prob[i] / s->prob[i + 1]);
            num += t * b, den += t * t;
        }
        double sh = den > 0 ? num / den : 1.0, eps = sh - 1;
        /* eps / (1 - N^-eps) is positive on both sides of eps = 0 (a flatter
         * than Zipf distribution has eps < 0), its limit there 1 / ln N */
        double ratio = fabs(eps) > 1e-6 ? eps / (1 - pow((double)s->n_vocab, -eps)) : 1 / log((double)s->n_vocab);
        double kk = sh > 0 ? pow(ratio * pow(2.0, s->mu), 1 / sh) : n;
        k = !(kk >= 1) ? 1 : kk >= n ? n : (int32_t)kk;
    } else {
        k = 0;
        while (k < n && -log2f(s->prob[k]) <= s->mu) k++;
        if (k == 0) k = 1;
    }
    float pr;
    int32_t i = smp_draw(s, k, &pr);
    s->mu -= p->mirostat_eta * (-log2f(pr) - p->mirostat_tau);
    return s->cand[i].id;
}

int32_t smp_chain_sample(tl_sampler *s, int32_t n) {
    const tl_sampler_params *p = &s->p;
    /* not every logit is -inf here: tl_sampler_sample took that case */
    for (int32_t o = 0; o < s->n_order; o++) {
        switch (s->order[o]) {
        case SMP_PENALTIES: break; /* applied before the chain */
        case SMP_DRY: smp_dry(s, n); break;
        default: break;
        }
    }
    if (p->mirostat) return smp_mirostat(s, n);
    if (p->temp <= 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (s->cand[i].logit > s->cand[best].logit) best = i;
        return s->cand[best].id;
    }
    for (int32_t o = 0; o < s->n_order; o++) {
        switch (s->order[o]) {
        case SMP_TOP_N_SIGMA: if (p->top_n_sigma > 0) n = smp_top_n_sigma(s, n); break;
        case SMP_TOP_K:
            if (p->top_k > 0 && p->top_k < n) {
                smp_top_k(s->cand, n, p->top_k);
                n = p->top_k;
            }
            break;
        case SMP_TYPICAL: if (p->typical_p < 1.0f) n = smp_typical(s, n); break;
        case SMP_TOP_P: if (p->top_p < 1.0f) n = smp_top_p(s, n); break;
        case SMP_MIN_P: if (p->min_p > 0.0f) n = smp_min_p(s, n); break;
        case SMP_XTC: if (p->xtc_probability > 0.0f) n = smp_xtc(s, n); break;
        case SMP_TEMPERATURE:
            for (int32_t i = 0; i < n; i++) s->cand[i].logit /= p->temp;
            break;
        default: break;
        }
    }
    float pr;
    return s->cand[smp_draw(s, n, &pr)].id;
}
