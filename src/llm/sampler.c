/* llm/sampler: token selection from logits.
 * Order of the filters (the one users of the reference engine expect):
 * logit bias -> penalties (repetition, presence, frequency) -> top-k ->
 * top-p -> min-p -> temperature -> draw.
 * top-p and min-p look at probabilities before temperature. Greedy when
 * temp <= 0. A seeded splitmix64 generator makes runs reproducible. An
 * attached grammar removes the tokens it does not allow right after the
 * biases and penalties, so every later stage sees only allowed tokens.
 * Owns: candidate buffers, the recent-token ring with per-token counts,
 * and a copy of the logit biases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tallow.h"

#include "llm/sampler_impl.h"

tl_sampler_params tl_sampler_default_params(void) {
    tl_sampler_params p;
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.logit_bias = NULL;
    p.n_logit_bias = 0;
    p.seed = 0x5eed;
    p.typical_p = 1.0f;
    p.top_n_sigma = -1.0f;
    p.xtc_probability = 0.0f;
    p.xtc_threshold = 0.1f;
    p.dry_multiplier = 0.0f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_last_n = 1024;
    p.dry_breakers = NULL;
    p.n_dry_breakers = 0;
    p.mirostat = 0;
    p.mirostat_tau = 5.0f;
    p.mirostat_eta = 0.1f;
    p.samplers = NULL;
    p.grammar_finish = 64;
    return p;
}

tl_status tl_sampler_init(const tl_sampler_params *p, int32_t n_vocab, tl_sampler **out) {
    *out = NULL;
    if (n_vocab < 1) return tl_err(TL_ERR_INVALID, "sampler: n_vocab %d", n_vocab);
    tl_sampler_params q = p ? *p : tl_sampler_default_params();
    if (!(q.repeat_penalty > 0.0f) || isnan(q.temp) || isnan(q.top_p) || isnan(q.min_p))
        return tl_err(TL_ERR_INVALID, "sampler: repeat_penalty must be > 0 and temp/top_p/min_p numbers");
    if (q.repeat_last_n < 0 || q.repeat_last_n > (1 << 20))
        return tl_err(TL_ERR_INVALID, "sampler: repeat_last_n %d out of range", q.repeat_last_n);
    if (!isfinite(q.presence_penalty) || !isfinite(q.frequency_penalty))
        return tl_err(TL_ERR_INVALID, "sampler: presence/frequency penalties must be finite");
    if (q.n_logit_bias < 0 || q.n_logit_bias > n_vocab || (q.n_logit_bias && !q.logit_bias))
        return tl_err(TL_ERR_INVALID, "sampler: %d logit biases for %d tokens", q.n_logit_bias, n_vocab);
    for (int32_t i = 0; i < q.n_logit_bias; i++) {
        const tl_logit_bias *b = &q.logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return tl_err(TL_ERR_INVALID, "sampler: logit_bias[%d]: token %d not in [0, %d)", i, b->token, n_vocab);
        if (isnan(b->bias) || b->bias == INFINITY)
            return tl_err(TL_ERR_INVALID, "sampler: logit_bias[%d]: bias must be a number or -inf", i);
    }
    tl_sampler *s = calloc(1, sizeof *s);
    if (!s) return tl_err(TL_ERR_NOMEM, "sampler: out of memory");
    s->p = q;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    s->recent = malloc(((size_t)q.repeat_last_n + 1) * sizeof *s->recent);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->bias = malloc(((size_t)q.n_logit_bias + 1) * sizeof *s->bias);
    if (!s->cand || !s->prob || !s->recent || !s->count || !s->bias) {
        tl_sampler_free(s);
        return tl_err(TL_ERR_NOMEM, "sampler: out of memory");
    }
    if (q.n_logit_bias) memcpy(s->bias, q.logit_bias, (size_t)q.n_logit_bias * sizeof *s->bias);
    s->p.logit_bias = s->bias;
    tl_status cs = smp_chain_init(s);
    if (cs) {
        tl_sampler_free(s);
        return cs;
    }
    s->budget = -1;
    tl_sampler_reset(s);
    *out = s;
    return TL_OK;
}

void tl_sampler_free(tl_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->prob);
    free(s->recent);
    free(s->count);
    free(s->bias);
    free(s->dry_hist);
    free(s->dry_work);
    free(s->dry_len);
    free(s->breaker);
    free(s);
}

void tl_sampler_reset(tl_sampler *s) {
    for (int32_t r = 0; r < s->n_recent; r++) s->count[s->recent[r]] = 0;
    s->n_recent = 0;
    s->recent_head = 0;
    s->rng = s->p.seed;
    smp_chain_reset(s);
    if (s->grammar) tl_grammar_reset(s->grammar);
}

tl_status tl_sampler_set_grammar(tl_sampler *s, tl_grammar *g) {
    s->grammar = g;
    return TL_OK;
}

void tl_sampler_set_budget(tl_sampler *s, int32_t n) { s->budget = n < 0 ? -1 : n; }

void tl_sampler_accept(tl_sampler *s, int32_t tok) {
    if (s->budget > 0) s->budget--;
    /* a token the grammar refuses leaves it as it was; the next sample then
     * sees the same mask */
    if (s->grammar) (void)tl_grammar_accept(s->grammar, tok);
    if (tok >= 0 && tok < s->n_vocab) smp_chain_accept(s, tok);
    if (s->p.repeat_last_n == 0 || tok < 0 || tok >= s->n_vocab) return;
    if (s->n_recent == s->p.repeat_last_n) s->count[s->recent[s->recent_head]]--; /* evicted */
    s->count[tok]++;
    s->recent[s->recent_head] = tok;
    s->recent_head = (s->recent_head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

static uint64_t smp_next(uint64_t *x);
uint64_t smp_rand(tl_sampler *s) { return smp_next(&s->rng); }

static uint64_t smp_next(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int smp_cmp(const void *a, const void *b) {
    const smp_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* stable order for equal logits */
}

/* Move the k largest candidates to the front (unordered), k < n. */
static void smp_select(smp_cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = c[lo + (hi - lo) / 2].logit;
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (c[i].logit > pivot) i++;
            while (c[j].logit < pivot) j--;
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

/* Each distinct token of the window is penalised once, with count[t] its
 * occurrences; a processed token's count is negated as a mark, then restored. */
static void smp_penalize(tl_sampler *s) {
    const tl_sampler_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
    for (int32_t r = 0; r < s->n_recent; r++) {
        int32_t t = s->recent[r];
        if (s->count[t] < 0) continue;
        float *l = &s->cand[t].logit;
        if (p->repeat_penalty != 1.0f) *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
        *l -= p->frequency_penalty * (float)s->count[t] + p->presence_penalty;
        s->count[t] = -s->count[t];
    }
    for (int32_t r = 0; r < s->n_recent; r++)
        if (s->count[s->recent[r]] < 0) s->count[s->recent[r]] = -s->count[s->recent[r]];
}

#define SMP_PREFIX 256

/* How many candidates survive top-p then min-p, given that the first
 * n_sorted of n are sorted (descending), prob[i] = exp(logit_i - max) for
 * all n and sum is their total. False if the answer depends on the order of
 * the unsorted tail (the caller then sorts everything and asks again). */
static bool smp_cuts(const tl_sampler *s, int32_t n_sorted, int32_t n, double sum, int32_t *keep) {
    const tl_sampler_params *p = &s->p;
    int32_t k = n;
    bool known = true;
    if (p->top_p < 1.0f) {
        /* smallest prefix whose mass reaches top_p */
        double cum = 0.0;
        int32_t i = 0;
        while (i < n_sorted && (cum += s->prob[i] / sum) < p->top_p) i++;
        if (i < n_sorted) k = i + 1;
        else known = n_sorted == n; /* any cut lies in the unsorted tail */
    }
    if (p->min_p > 0.0f) {
        /* keep those with prob >= min_p * max; prob[0] is the max */
        int32_t lim = known ? k : n, j = 1;
        while (j < lim && j < n_sorted && s->prob[j] >= p->min_p * s->prob[0]) j++;
        if (j < lim && j < n_sorted) {
            k = j; /* cut inside the sorted part, before any top-p cut */
            known = true;
        } else if (j != lim) {
            known = false; /* ran off the sorted part undecided */
        }
    }
    *keep = k;
    return known;
}

/* The grammar's mask, under completion pressure when the budget is within
 * grammar_finish tokens of the shortest completion. */
static tl_status smp_grammar_mask(tl_sampler *s, const uint32_t **w) {
    if (s->budget < 0 || s->p.grammar_finish < 0) return tl_grammar_mask(s->grammar, w);
    int32_t d;
    tl_status st = tl_grammar_distance(s->grammar, &d);
    if (st) return st;
    if ((int64_t)s->budget <= (int64_t)d + s->p.grammar_finish) return tl_grammar_mask_within(s->grammar, s->budget, w);
    return tl_grammar_mask(s->grammar, w);
}

int32_t tl_sampler_sample(tl_sampler *s, const float *logits) {
    const tl_sampler_params *p = &s->p;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        s->cand[i].id = i;
        s->cand[i].logit = isnan(logits[i]) ? -INFINITY : logits[i]; /* a NaN logit is never chosen */
    }
    for (int32_t i = 0; i < p->n_logit_bias; i++) s->cand[p->logit_bias[i].token].logit += p->logit_bias[i].bias;
    smp_penalize(s);
    if (s->grammar) {
        /* keep only the tokens the grammar allows, in id order */
        const uint32_t *w;
        if (smp_grammar_mask(s, &w)) return -1;
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (w[i >> 5] >> (i & 31) & 1) s->cand[m++] = s->cand[i];
        if (!m) {
            tl_err(TL_ERR_STATE, "sampler: the grammar allows no token here (dead end)");
            return -1;
        }
        n = m;
    }
    /* every logit -inf (all masked or banned): nothing to prefer, take the
     * first candidate (the cuts below would divide 0 by 0) */
    bool any = false;
    for (int32_t i = 0; i < n && !any; i++) any = s->cand[i].logit > -INFINITY;
    if (!any) return s->cand[0].id;
    if (s->chain) return smp_chain_sample(s, n);
    if (p->temp <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (s->cand[i].logit > s->cand[best].logit) best = i;
        return s->cand[best].id;
    }
    if (p->top_k > 0 && p->top_k < n) {
        smp_select(s->cand, n, p->top_k);
        n = p->top_k;
    }
    const bool cuts = p->top_p < 1.0f || p->min_p > 0.0f;
    /* Sorting a whole 50k-250k vocabulary costs milliseconds per token, and
     * the top-p / min-p cuts nearly always fall among the few hundred most
     * likely tokens: sort only those, and sort everything only when a cut
     * lands beyond them (the same tokens either way, up to the order of equal
     * logits at the boundary). Without cuts nothing needs
     * sorting at all. */
    int32_t n_sorted = n;
    if (!cuts) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (s->cand[i].logit > s->cand[best].logit) best = i;
        smp_cand t = s->cand[0];
        s->cand[0] = s->cand[best];
        s->cand[best] = t;
    } else {
        if (n > SMP_PREFIX) {
            smp_select(s->cand, n, SMP_PREFIX);
            n_sorted = SMP_PREFIX;
        }
        qsort(s->cand, (size_t)n_sorted, sizeof *s->cand, smp_cmp);
    }
    /* probabilities at temperature 1 for top-p / min-p; cand[0] is the max */
    const float mx = s->cand[0].logit;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (s->prob[i] = expf(s->cand[i].logit - mx));
    if (cuts) {
        int32_t keep;
        if (!smp_cuts(s, n_sorted, n, sum, &keep)) {
            qsort(s->cand, (size_t)n, sizeof *s->cand, smp_cmp);
            sum = 0.0;
            for (int32_t i = 0; i < n; i++) sum += (s->prob[i] = expf(s->cand[i].logit - mx));
            smp_cuts(s, n, n, sum, &keep);
        }
        n = keep;
    }
    sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (s->prob[i] = expf((s->cand[i].logit - mx) / p->temp));
    double r = (double)(smp_next(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += s->prob[i];
        if (r < cum) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
