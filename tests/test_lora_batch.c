/* test_lora_batch: sequences with different LoRA adapter sets decoded in one
 * batch give the logits each gets decoded alone with its set.
 *
 * The tiny llama and qwen3 fixtures (f32) with the PEFT adapters of
 * tests/fixtures/lora_* (whose logits test_lora_hf.py checks against PEFT):
 * five token streams, each with its own set (one adapter; none; two
 * adapters at user scales; the first adapter again at another scale, which
 * is another group; an MLP-only adapter with patterns plus another), one of
 * them switching from no adapter to one in the middle of its stream. The
 * reference is each stream decoded alone in a session with the same set
 * (switched at the same position). The batched run is one context, prompts
 * in chunks of several sequences per batch, batches larger than n_batch
 * split, then steps of one token per sequence in a shuffled order.
 * Tolerance, as test_batch.c argues it: 1e-5 of the row's largest logit
 * plus twice the spread between the stream prefilled alone and decoded
 * alone token by token (printed; each row's low-rank term is computed in
 * the same order whatever else is in its batch, so what is left is which
 * base matmul kernel a row lands in: 0 for llama here, ~1e-5 for qwen3);
 * attaching the wrong set, scale or rows moves logits by O(1).
 * Also: bad attachments (sequence id, too many adapters, NULL, an adapter
 * loaded for another model) fail, and a batch needing more than 64 distinct
 * (adapter, scale) pairs is refused leaving every sequence as it was.
 * `test_lora_batch cuda` (the GPU machine) runs the same on the CUDA
 * backend, and also checks each stream decoded alone on CUDA against the
 * same on the CPU (which test_lora_hf.py checks against PEFT): within
 * 2e-3 of the row's largest logit, the CUDA backend's f32-accumulated
 * GEMMs over f16-rounded inputs (test_batch.c's CUDA floor). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallow.h"
#include "test_util.h"

#define FIX "tests/fixtures/"
#define N_STREAM 5
#define MAX_LEN 36

static double tol; /* see the header */
static tl_backend_kind backend = TL_BACKEND_CPU;
#define CUDA_VS_CPU 2e-3
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11) % n;
}

typedef struct stream {
    int32_t tok[MAX_LEN], len;
    tl_lora_use use[4], use2[4]; /* the set, and (switch > 0) the set from position `switch_at` on */
    int32_t n_use, n_use2, switch_at;
    float *ref;
    int32_t done;
} stream;

static double row_err(const float *a, const float *b, int32_t n) {
    double e = 0, mx = 1e-30;
    for (int32_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return e / mx;
}

/* The stream alone in a session with n_batch tokens per forward, into out. */
static void alone(tl_model *m, stream *s, int32_t nv, int32_t n_batch, float *out) {
    tl_session *se = NULL;
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = 64;
    sp.n_batch = n_batch;
    sp.n_threads = 2;
    CHECK(tl_session_init(m, &sp, &se) == TL_OK, "session: %s", tl_last_error());
    if (!se) return;
    int32_t k = s->switch_at ? s->switch_at : s->len;
    CHECK(tl_session_set_lora(se, s->use, s->n_use) == TL_OK, "set: %s", tl_last_error());
    CHECK(tl_session_eval_all(se, s->tok, k, out) == TL_OK, "ref: %s", tl_last_error());
    if (k < s->len) {
        CHECK(tl_session_set_lora(se, s->use2, s->n_use2) == TL_OK, "set 2: %s", tl_last_error());
        CHECK(tl_session_eval_all(se, s->tok + k, s->len - k, out + (size_t)k * nv) == TL_OK, "ref 2: %s",
              tl_last_error());
    }
    tl_session_free(se);
}

/* The reference (prefilled alone); returns the spread between that and
 * the stream decoded alone token by token. */
static double make_ref(tl_model *m, stream *s, int32_t nv) {
    s->ref = malloc(sizeof(float) * (size_t)s->len * (size_t)nv);
    float *one = malloc(sizeof(float) * (size_t)s->len * (size_t)nv);
    alone(m, s, nv, 64, s->ref);
    alone(m, s, nv, 1, one);
    double sp = 0;
    for (int32_t i = 0; i < s->len; i++) sp = fmax(sp, row_err(one + (size_t)i * nv, s->ref + (size_t)i * nv, nv));
    free(one);
    return sp;
}

/* One batch: up to `chunk` next tokens of each stream in `order`, keeping all logits. */
static void batch_step(tl_context *c, stream *st, const int *order, int n_order, int32_t chunk, int32_t nv,
                       double *worst) {
    int32_t tok[256], seq[256], sidx[256], pos[256], n = 0;
    int8_t keep[256];
    for (int q = 0; q < n_order; q++) {
        stream *s = &st[order[q]];
        if (s->switch_at > 0 && s->done == s->switch_at) { /* the set changes between two batches */
            CHECK(tl_seq_set_lora(c, order[q], s->use2, s->n_use2) == TL_OK, "switch: %s", tl_last_error());
            s->switch_at = -s->switch_at;
        }
        const int32_t limit = s->switch_at > 0 ? s->switch_at : s->len;
        for (int32_t j = 0; j < chunk && s->done + j < limit; j++) {
            tok[n] = s->tok[s->done + j], seq[n] = order[q], sidx[n] = order[q], pos[n] = s->done + j, keep[n] = 1;
            n++;
        }
    }
    if (!n) return;
    tl_batch b = {.n_tokens = n, .token = tok, .seq_id = seq, .logits = keep};
    CHECK(tl_decode(c, &b) == TL_OK, "decode: %s", tl_last_error());
    for (int32_t i = 0; i < n; i++) {
        const float *lg = tl_context_logits(c, i);
        stream *s = &st[sidx[i]];
        double e = lg ? row_err(lg, s->ref + (size_t)pos[i] * nv, nv) : 1e9;
        if (e > *worst) *worst = e;
        CHECK(e <= tol, "stream %d position %d: rel err %.3e (tol %.2e)", sidx[i], pos[i], e, tol);
        s->done = pos[i] + 1 > s->done ? pos[i] + 1 : s->done;
    }
}

static tl_lora *load(tl_model *m, const char *name) {
    tl_lora *l = NULL;
    CHECK(tl_lora_load(m, name, &l) == TL_OK, "load %s: %s", name, tl_last_error());
    return l;
}

static void bad_attach(tl_model *m, tl_context *c, tl_lora *l, tl_lora *other) {
    tl_lora_use u[9];
    for (int i = 0; i < 9; i++) u[i] = (tl_lora_use){l, 1.0f + (float)i};
    CHECK(tl_seq_set_lora(c, 99, u, 1) == TL_ERR_INVALID, "bad sequence id refused");
    CHECK(tl_seq_set_lora(c, 0, u, 9) == TL_ERR_INVALID, "9 adapters refused");
    tl_lora_use nul = {NULL, 1.0f}, oth = {other, 1.0f}, nan_s = {l, NAN};
    CHECK(tl_seq_set_lora(c, 0, &nul, 1) == TL_ERR_INVALID, "NULL adapter refused");
    CHECK(other && tl_seq_set_lora(c, 0, &oth, 1) == TL_ERR_INVALID, "adapter of another model refused: %s",
          tl_last_error());
    CHECK(tl_seq_set_lora(c, 0, &nan_s, 1) == TL_ERR_INVALID, "NaN scale refused");
    /* more than 64 distinct (adapter, scale) pairs in one batch */
    tl_context *big = NULL;
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq_max = 10;
    cp.n_threads = 2;
    CHECK(tl_context_init(m, &cp, &big) == TL_OK, "context: %s", tl_last_error());
    if (!big) return;
    int32_t tok[10], seq[10];
    for (int s = 0; s < 10; s++) {
        for (int i = 0; i < 8; i++) u[i] = (tl_lora_use){l, 0.01f * (float)(8 * s + i + 1)};
        CHECK(tl_seq_set_lora(big, s, u, 8) == TL_OK, "set %d", s);
        tok[s] = 5 + s, seq[s] = s;
    }
    tl_batch b = {.n_tokens = 10, .token = tok, .seq_id = seq};
    CHECK(tl_decode(big, &b) == TL_ERR_INVALID && strstr(tl_last_error(), "64"), "80 groups refused: %s",
          tl_last_error());
    for (int s = 0; s < 10; s++) CHECK(tl_seq_len(big, s) == 0, "sequence %d unchanged", s);
    b.n_tokens = 8; /* 64 pairs fit */
    CHECK(tl_decode(big, &b) == TL_OK, "64 groups decode: %s", tl_last_error());
    tl_context_free(big);
}

/* each stream decoded alone on the CPU with the same sets (adapters loaded
 * for the CPU copy of the model) against its reference from this backend */
static void cross_check(const char *path, const char *const *ad, tl_lora *const *L, const stream *st, int32_t nv) {
    tl_model *mc = NULL;
    tl_model_params mp = tl_model_default_params();
    CHECK(tl_model_load(path, &mp, &mc) == TL_OK, "load %s on the CPU: %s", path, tl_last_error());
    if (!mc) return;
    tl_lora *Lc[4];
    for (int i = 0; i < 4; i++) Lc[i] = ad[i] ? load(mc, ad[i]) : NULL;
    double worst = 0;
    for (int k = 0; k < N_STREAM; k++) {
        stream c = st[k];
        for (int i = 0; i < c.n_use + c.n_use2; i++) {
            tl_lora_use *u = i < c.n_use ? &c.use[i] : &c.use2[i - c.n_use];
            for (int j = 0; j < 4; j++)
                if (u->lora == L[j]) u->lora = Lc[j];
        }
        float *cpu = malloc(sizeof(float) * (size_t)c.len * (size_t)nv);
        alone(mc, &c, nv, 64, cpu);
        for (int32_t i = 0; i < c.len; i++)
            worst = fmax(worst, row_err(st[k].ref + (size_t)i * nv, cpu + (size_t)i * nv, nv));
        free(cpu);
    }
    CHECK(worst <= CUDA_VS_CPU, "%s: streams alone on CUDA vs CPU with their adapters: rel err %.2e", path, worst);
    printf("%s: alone on CUDA vs CPU, adapters attached: worst rel err %.2e (tol %.0e)\n", path, worst, CUDA_VS_CPU);
    for (int i = 0; i < 4; i++) tl_lora_free(Lc[i]);
    tl_model_free(mc);
}

static void test_model(const char *path, const char *const *ad, const char *other_model, const char *other_ad) {
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    mp.backend = backend;
    CHECK(tl_model_load(path, &mp, &m) == TL_OK, "load %s: %s", path, tl_last_error());
    if (!m) return;
    tl_model_info info;
    tl_model_get_info(m, &info);
    const int32_t nv = info.n_vocab;
    tl_lora *L[4];
    for (int i = 0; i < 4; i++) L[i] = ad[i] ? load(m, ad[i]) : NULL;
    stream st[N_STREAM];
    memset(st, 0, sizeof st);
    for (int s = 0; s < N_STREAM; s++) {
        st[s].len = 20 + (int32_t)rnd(MAX_LEN - 20);
        for (int32_t i = 0; i < st[s].len; i++) st[s].tok[i] = (int32_t)rnd((uint32_t)nv);
    }
    st[0].use[0] = (tl_lora_use){L[0], 1.0f}, st[0].n_use = 1;
    st[1].switch_at = 10, st[1].use2[0] = (tl_lora_use){L[1], 0.5f}, st[1].n_use2 = 1; /* none, then one */
    st[2].use[0] = (tl_lora_use){L[1], 0.5f}, st[2].use[1] = (tl_lora_use){L[2] ? L[2] : L[0], 1.5f}, st[2].n_use = 2;
    st[3].use[0] = (tl_lora_use){L[0], -1.0f}, st[3].n_use = 1;
    st[4].use[0] = (tl_lora_use){L[3] ? L[3] : L[1], 1.0f}, st[4].use[1] = (tl_lora_use){L[0], 1.0f}, st[4].n_use = 2;
    double spread = 0;
    for (int s = 0; s < N_STREAM; s++) spread = fmax(spread, make_ref(m, &st[s], nv));
    tol = 1e-5 + 2 * spread;
    if (backend != TL_BACKEND_CPU) {
        tol = fmax(tol, CUDA_VS_CPU); /* rows land in other kernels batched: see test_batch.c */
        cross_check(path, ad, L, st, nv);
    }

    tl_context *c = NULL;
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = N_STREAM;
    cp.n_batch = 16; /* prompt batches below are larger: split */
    cp.n_threads = 2;
    CHECK(tl_context_init(m, &cp, &c) == TL_OK, "context: %s", tl_last_error());
    for (int s = 0; c && s < N_STREAM; s++)
        CHECK(tl_seq_set_lora(c, s, st[s].use, st[s].n_use) == TL_OK, "attach %d: %s", s, tl_last_error());
    double worst = 0;
    int order[N_STREAM] = {0, 1, 2, 3, 4};
    for (int round = 0; c && round < 2; round++) /* prompts: chunks of 7 tokens of every stream per batch */
        batch_step(c, st, order, N_STREAM, 7, nv, &worst);
    for (int it = 0; c && it < MAX_LEN; it++) { /* then one token per stream, shuffled */
        for (int k = N_STREAM - 1; k > 0; k--) {
            int j = (int)rnd((uint32_t)k + 1), t = order[k];
            order[k] = order[j], order[j] = t;
        }
        batch_step(c, st, order, 1 + (int)rnd(N_STREAM), 1, nv, &worst);
        batch_step(c, st, order, N_STREAM, 1, nv, &worst);
    }
    for (int s = 0; s < N_STREAM; s++) CHECK(st[s].done == st[s].len, "stream %d fully decoded (%d of %d)", s, st[s].done, st[s].len);
    printf("%s: %d streams with mixed adapter sets, worst rel err %.2e (alone: prefill vs one by one %.2e)\n", path,
           N_STREAM, worst, spread);
    if (c && other_model) {
        tl_model *om = NULL;
        tl_lora *ol = NULL;
        if (tl_model_load(other_model, &mp, &om) == TL_OK) ol = load(om, other_ad);
        bad_attach(m, c, L[0], ol);
        tl_lora_free(ol);
        tl_model_free(om);
    }
    tl_context_free(c);
    for (int s = 0; s < N_STREAM; s++) free(st[s].ref);
    for (int i = 0; i < 4; i++) tl_lora_free(L[i]);
    tl_model_free(m);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "cuda")) backend = TL_BACKEND_CUDA;
    if (access(FIX "tiny_llama.gguf", R_OK) || access(FIX "lora_llama_r8/adapter_model.safetensors", R_OK)) {
        printf("SKIP: tests/fixtures/tiny_llama.gguf or lora_llama_r8 missing\n");
        return TEST_SKIP;
    }
    const char *llama[4] = {FIX "lora_llama_r8", FIX "lora_llama_r1", FIX "lora_llama_r64_rs", FIX "lora_llama_mlp_pat"};
    test_model(FIX "tiny_llama.gguf", llama, FIX "tiny_qwen3.gguf", FIX "lora_qwen3_r8_rs");
    const char *qwen[4] = {FIX "lora_qwen3_r8_rs", FIX "lora_qwen3_r8_rs.gguf", NULL, NULL};
    test_model(FIX "tiny_qwen3.gguf", qwen, NULL, NULL);
    return test_finish();
}
