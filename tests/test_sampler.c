/* Sampler tests: every filter against its definition computed here from
 * first principles (softmax in double, explicit cut-offs), and the
 * empirical distribution of many draws against the analytic one. */
#include <math.h>
#include <string.h>

#include "tallow.h"
#include "test_util.h"

#define NV 8

static tl_sampler *mk(float temp, int top_k, float top_p, float min_p, float rp, uint64_t seed) {
    tl_sampler_params p = tl_sampler_default_params();
    p.temp = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.repeat_penalty = rp, p.seed = seed;
    tl_sampler *s = NULL;
    CHECK(tl_sampler_init(&p, NV, &s) == TL_OK, "init: %s", tl_last_error());
    return s;
}

/* draw n times, return the frequency of each id */
static void histo(tl_sampler *s, const float *logits, int n, double *freq) {
    memset(freq, 0, sizeof(double) * NV);
    for (int i = 0; i < n; i++) freq[tl_sampler_sample(s, logits)] += 1.0 / n;
}

/* A large vocabulary exercises the partial-sort path (cuts inside the most
 * likely 256) and its full-sort fallback (flat logits: the top-p cut falls
 * far beyond them). Expected kept set and probabilities are computed here
 * from the definitions, in double, over a full sort. */
#define BV 5000
static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
static void big_vocab(double spread, float top_p, float min_p, int N, const char *what) {
    static float lg[BV];
    static double sorted[BV], p[BV];
    uint64_t x = 12345;
    for (int i = 0; i < BV; i++) { /* roughly normal: sum of 4 uniforms */
        double u = 0;
        for (int k = 0; k < 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u += (double)(x >> 11) / 9007199254740992.0 - 0.5;
        }
        lg[i] = (float)(u * spread);
        sorted[i] = lg[i];
    }
    qsort(sorted, BV, sizeof(double), cmp_desc);
    double z = 0, cum = 0;
    for (int i = 0; i < BV; i++) z += exp(sorted[i] - sorted[0]);
    int keep = BV;
    if (top_p < 1)
        for (int i = 0; i < BV; i++)
            if ((cum += exp(sorted[i] - sorted[0]) / z) >= top_p) {
                keep = i + 1;
                break;
            }
    if (min_p > 0) {
        int k = 1;
        while (k < keep && exp(sorted[k] - sorted[0]) >= min_p) k++;
        keep = k;
    }
    const double thr = sorted[keep - 1];
    double zk = 0;
    for (int i = 0; i < BV; i++) p[i] = lg[i] >= thr ? exp(lg[i] - sorted[0]) : 0, zk += p[i];
    tl_sampler_params sp = tl_sampler_default_params();
    sp.temp = 1, sp.top_k = 0, sp.top_p = top_p, sp.min_p = min_p, sp.seed = 77;
    tl_sampler *s = NULL;
    CHECK(tl_sampler_init(&sp, BV, &s) == TL_OK, "init %s", what);
    static double freq[BV];
    memset(freq, 0, sizeof freq);
    int outside = 0;
    for (int d = 0; d < N; d++) {
        int t = tl_sampler_sample(s, lg);
        freq[t] += 1.0 / N;
        outside += p[t] == 0;
    }
    /* per-token z-scores where at least 20 draws are expected (a normal
     * approximation is meaningless below that); the rest as one bucket */
    double worst = 0, tail_p = 0, tail_f = 0;
    for (int i = 0; i < BV; i++) {
        double pi = p[i] / zk;
        if (pi * N < 20 || pi > 0.999) {
            tail_p += pi, tail_f += freq[i];
            continue;
        }
        double e = fabs(freq[i] - pi) / sqrt(pi * (1 - pi) / N);
        if (e > worst) worst = e;
    }
    if (tail_p * N >= 20) {
        double e = fabs(tail_f - tail_p) / sqrt(tail_p * (1 - tail_p) / N);
        if (e > worst) worst = e;
    }
    CHECK(outside == 0 && worst < 5.5, "%s: keep %d of %d, %d draws outside the kept set, worst deviation %.1f sd",
          what, keep, BV, outside, worst);
    tl_sampler_free(s);
}

int main(void) {
    big_vocab(12.0, 0.9f, 0, 20000, "peaked, top-p 0.9 (cut inside the sorted prefix)");
    big_vocab(12.0, 1.0f, 0.05f, 20000, "peaked, min-p 0.05");
    big_vocab(12.0, 0.999f, 0.01f, 20000, "peaked, top-p 0.999 then min-p 0.01");
    big_vocab(0.2, 0.9f, 0, 2000, "flat, top-p 0.9 (cut far past the prefix: full sort)");
    big_vocab(0.2, 1.0f, 0.75f, 2000, "flat, min-p 0.75 (cut past the prefix)");
    big_vocab(3.0, 1.0f, 0, 20000, "no cuts (no sort)");
    const float logits[NV] = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, -3.0f, 0.5f};
    double freq[NV], p[NV], z = 0;

    /* greedy */
    tl_sampler *s = mk(0, 0, 1, 0, 1, 1);
    CHECK(tl_sampler_sample(s, logits) == 1, "greedy picks the argmax");
    tl_sampler_free(s);

    /* plain temperature-1 sampling follows softmax */
    for (int i = 0; i < NV; i++) z += exp(logits[i]);
    for (int i = 0; i < NV; i++) p[i] = exp(logits[i]) / z;
    s = mk(1, 0, 1, 0, 1, 42);
    const int N = 200000;
    histo(s, logits, N, freq);
    for (int i = 0; i < NV; i++) {
        double sd = sqrt(p[i] * (1 - p[i]) / N);
        CHECK(fabs(freq[i] - p[i]) < 5 * sd + 1e-9, "softmax id %d: freq %.4f vs p %.4f", i, freq[i], p[i]);
    }
    tl_sampler_free(s);

    /* temperature 0.5 sharpens: p ~ exp(2 l) */
    z = 0;
    for (int i = 0; i < NV; i++) z += exp(logits[i] / 0.5);
    s = mk(0.5f, 0, 1, 0, 1, 7);
    histo(s, logits, N, freq);
    for (int i = 0; i < NV; i++) {
        double pi = exp(logits[i] / 0.5) / z, sd = sqrt(pi * (1 - pi) / N);
        CHECK(fabs(freq[i] - pi) < 5 * sd + 1e-9, "temp 0.5 id %d: freq %.4f vs p %.4f", i, freq[i], pi);
    }
    tl_sampler_free(s);

    /* top-k 2: only ids 1 and 5, renormalised */
    s = mk(1, 2, 1, 0, 1, 3);
    histo(s, logits, N, freq);
    double p1 = exp(3.0) / (exp(3.0) + exp(2.9));
    CHECK(fabs(freq[1] - p1) < 0.01 && fabs(freq[5] - (1 - p1)) < 0.01, "top-k 2: %.4f %.4f", freq[1], freq[5]);
    tl_sampler_free(s);

    /* top-p: smallest prefix (by prob) whose mass reaches top_p */
    {
        double mass = p[1] + p[5]; /* the two largest */
        s = mk(1, 0, (float)(mass - 1e-3), 0, 1, 5);
        histo(s, logits, 20000, freq);
        CHECK(freq[1] + freq[5] > 0.999, "top-p keeps only the 2 largest: %.4f", freq[1] + freq[5]);
        tl_sampler_free(s);
        s = mk(1, 0, (float)(mass + 1e-3), 0, 1, 5);
        histo(s, logits, 20000, freq);
        CHECK(freq[2] > 0.1 && freq[0] == 0, "top-p just above 2-mass adds the third: %.4f %.4f", freq[2], freq[0]);
        tl_sampler_free(s);
    }

    /* min-p 0.5: keep ids with p >= 0.5 * p_max: exp(l - 3) >= 0.5 -> l >= 3 - ln 2 = 2.307 */
    s = mk(1, 0, 1, 0.5f, 1, 9);
    histo(s, logits, 20000, freq);
    CHECK(freq[1] > 0 && freq[5] > 0 && freq[2] > 0 && freq[0] == 0 && freq[7] == 0, "min-p set");
    tl_sampler_free(s);

    /* repetition penalty: positive logits divided, negative multiplied */
    s = mk(0, 0, 1, 0, 2.0f, 1);
    tl_sampler_accept(s, 1);
    CHECK(tl_sampler_sample(s, logits) == 5, "penalised argmax moves to id 5 (3/2 < 2.9)");
    tl_sampler_accept(s, 5);
    tl_sampler_accept(s, 2);
    CHECK(tl_sampler_sample(s, logits) == 1, "after penalising 1,5,2 (-> 1.5, 1.45, 1.25) argmax is id 1 again");
    tl_sampler_accept(s, 3); /* negative logit: multiplied, -1 -> -2 */
    float neg[NV] = {-5, -5, -5, -1.0f, -5, -5, -5, -1.5f};
    CHECK(tl_sampler_sample(s, neg) == 7, "negative logit penalised by multiplication");
    tl_sampler_free(s);

    /* presence / frequency penalties (OpenAI): l -= f * count + p * (count > 0) */
    {
        tl_sampler_params sp = tl_sampler_default_params();
        sp.temp = 0;
        sp.repeat_last_n = 3;
        sp.frequency_penalty = 0.06f;
        tl_sampler *q = NULL;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_OK, "init penalties: %s", tl_last_error());
        tl_sampler_accept(q, 1);
        CHECK(tl_sampler_sample(q, logits) == 1, "one occurrence: 3 - 0.06 > 2.9");
        tl_sampler_accept(q, 1);
        CHECK(tl_sampler_sample(q, logits) == 5, "two occurrences: 3 - 0.12 < 2.9");
        tl_sampler_accept(q, 4);
        tl_sampler_accept(q, 4); /* window 3: the first 1 is evicted, count back to 1 */
        CHECK(tl_sampler_sample(q, logits) == 1, "eviction lowers the count: 3 - 0.06 > 2.9");
        tl_sampler_reset(q);
        CHECK(tl_sampler_sample(q, logits) == 1, "reset clears the counts");
        tl_sampler_free(q);
        sp.frequency_penalty = 0;
        sp.presence_penalty = 0.45f;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_OK, "init presence");
        tl_sampler_accept(q, 1);
        tl_sampler_accept(q, 1);
        tl_sampler_accept(q, 5);
        CHECK(tl_sampler_sample(q, logits) == 1, "presence once per token: 2.55 beats 2.5 and 2.45");
        tl_sampler_free(q);
    }

    /* logit bias: -inf bans, a positive bias promotes; bad entries are refused */
    {
        tl_logit_bias lb[2] = {{1, -INFINITY}, {6, 10.0f}};
        tl_sampler_params sp = tl_sampler_default_params();
        sp.temp = 0;
        sp.logit_bias = lb;
        sp.n_logit_bias = 1;
        tl_sampler *q = NULL;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_OK, "init bias");
        lb[0].token = 0; /* copied at init: later edits do not reach the sampler */
        CHECK(tl_sampler_sample(q, logits) == 5, "banned argmax");
        tl_sampler_free(q);
        lb[0].token = 1;
        sp.n_logit_bias = 2;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_OK, "init bias 2");
        CHECK(tl_sampler_sample(q, logits) == 6, "promoted id 6 (-3 + 10)");
        tl_sampler_free(q);
        sp.temp = 1;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_OK, "init bias sampled");
        histo(q, logits, 20000, freq);
        CHECK(freq[1] == 0 && freq[6] > 0.9, "banned never drawn: %.4f, promoted %.4f", freq[1], freq[6]);
        tl_sampler_free(q);
        lb[1].token = NV;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_ERR_INVALID && !q, "token out of range refused");
        lb[1].token = 2;
        lb[1].bias = NAN;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_ERR_INVALID, "NaN bias refused");
        sp.logit_bias = NULL;
        CHECK(tl_sampler_init(&sp, NV, &q) == TL_ERR_INVALID, "count without array refused");
    }

    /* same seed, same sequence; different seed, different sequence */
    tl_sampler *a = mk(1, 0, 1, 0, 1, 123), *b = mk(1, 0, 1, 0, 1, 123), *c = mk(1, 0, 1, 0, 1, 124);
    int same_ab = 1, same_ac = 1;
    for (int i = 0; i < 64; i++) {
        int x = tl_sampler_sample(a, logits), y = tl_sampler_sample(b, logits), w = tl_sampler_sample(c, logits);
        same_ab &= x == y;
        same_ac &= x == w;
    }
    CHECK(same_ab && !same_ac, "seeded reproducibility");
    tl_sampler_free(a), tl_sampler_free(b), tl_sampler_free(c);

    /* bad parameters are refused */
    tl_sampler_params bad = tl_sampler_default_params();
    bad.repeat_penalty = 0;
    tl_sampler *x = NULL;
    CHECK(tl_sampler_init(&bad, NV, &x) == TL_ERR_INVALID && x == NULL, "bad penalty refused");
    CHECK(tl_sampler_init(NULL, 0, &x) == TL_ERR_INVALID, "n_vocab 0 refused");
    return test_finish();
}
