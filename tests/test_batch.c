/* test_batch: the batch API (tl_context, tl_decode) against one sequence
 * decoded alone.
 *
 * For each model (the HF tiny fixtures of every architecture, the real
 * SmolLM2 and Gemma-3 files when present): several token streams are
 * decoded alone through tl_session_eval_all (the reference), then together
 * in one context through a seeded schedule of steps that mixes prompt
 * chunks and single tokens of different sequences, splits batches larger
 * than n_batch, forks a sequence from another's prefix (sharing its KV
 * blocks, one of them partly filled, so the copy-on-write path runs),
 * removes a sequence and starts it again, and truncates and re-decodes.
 * Every token's logits must equal its stream's reference at the same
 * position: see TOL for the tolerance and why. Then bad batches (a token
 * outside the vocabulary, a wrong position, a bad sequence id, a pool too
 * full) must fail and leave every sequence as it was, and 64 sequences of
 * 256 tokens must occupy no more KV memory than 1.1x their tokens' bytes.
 * `test_batch cuda` runs the same on the CUDA backend (the GPU machine). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallow.h"
#include "test_util.h"

/* The tolerance. A token's logits in a batch go through the same weights
 * and the same attention over the same positions as alone; what differs is
 * which matmul kernel its row lands in (the CPU runs rows in groups of 4
 * with one kernel and the rest with another, which sum a row's block
 * products in different orders). With f32 weights those agree to the last
 * bit here, so the bound is 1e-5 of the row's largest logit. With quantized
 * weights each layer re-quantizes its input to 8 bits, a rounding
 * difference of one ulp can flip a quant, and over the layers the logits
 * drift: the engine's own spread between a sequence prefilled at once and
 * decoded token by token (both alone, measured per model below; 2-3% on
 * SmolLM2 Q4_1). A batch must stay within twice that spread; a real error
 * (a wrong position, sequence or KV block) moves logits by O(1). */
static double tol;
#define TOL tol

/* On CUDA a token's path depends on its step more than on the CPU: one
 * token runs the fused matvecs (q8_1 activations) and the split-K decode
 * attention, several run f16-dequantized GEMMs and the paged or the
 * tensor-core flash attention (q and the softmax weights rounded to f16);
 * the spread measured alone covers the first two, and 2e-3 of the largest
 * logit covers f16 rounding of q and P over a short context. */
static tl_backend_kind backend = TL_BACKEND_CPU;
static double tol_floor = 1e-5;

#define N_STREAM 5
#define MAX_LEN 40

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11) % n;
}

typedef struct stream {
    int32_t tok[MAX_LEN];
    int32_t len;     /* tokens in the stream */
    float *ref;      /* [len][n_vocab] logits decoded alone */
    int32_t seq;     /* sequence id now, -1: not started */
    int32_t done;    /* positions decoded so far */
} stream;

static double row_err(const float *a, const float *b, int32_t n) {
    double e = 0, mx = 1;
    for (int32_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= e)) e = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
    }
    return e / mx;
}

/* each stream alone, prefilled at once (the reference) and token by token
 * (their difference is the spread the tolerance is made of) */
static double make_refs(tl_model *m, stream *st, int32_t nv) {
    double spread = 0;
    for (int k = 0; k < N_STREAM; k++) {
        tl_session *s = NULL;
        tl_session_params sp = tl_session_default_params();
        sp.n_ctx = 64;
        sp.n_threads = 2;
        CHECK(tl_session_init(m, &sp, &s) == TL_OK, "session: %s", tl_last_error());
        st[k].ref = malloc(sizeof(float) * (size_t)st[k].len * (size_t)nv);
        CHECK(s && tl_session_eval_all(s, st[k].tok, st[k].len, st[k].ref) == TL_OK, "eval_all: %s", tl_last_error());
        CHECK(s && tl_session_rewind(s, 0) == TL_OK, "rewind");
        for (int32_t i = 0; s && i < st[k].len; i++) {
            const float *lg = NULL;
            CHECK(tl_session_eval(s, &st[k].tok[i], 1, &lg) == TL_OK, "eval: %s", tl_last_error());
            const double e = lg ? row_err(lg, st[k].ref + (size_t)i * nv, nv) : INFINITY;
            if (e > spread) spread = e;
        }
        tl_session_free(s);
    }
    return spread;
}

/* one step: each started, unfinished stream adds a chunk of 1..4 tokens */
static int step(tl_context *c, stream *st, int32_t nv, double *worst) {
    int32_t tok[64], seq[64], from[64], at[64], n = 0;
    int8_t keep[64];
    for (int k = 0; k < N_STREAM; k++) {
        if (st[k].seq < 0 || st[k].done >= st[k].len) continue;
        int32_t chunk = 1 + (int32_t)rnd(4);
        if (st[k].done + chunk > st[k].len) chunk = st[k].len - st[k].done;
        for (int32_t j = 0; j < chunk; j++) {
            tok[n] = st[k].tok[st[k].done + j];
            seq[n] = st[k].seq;
            from[n] = k;
            at[n] = st[k].done + j;
            keep[n] = 1;
            n++;
        }
    }
    if (!n) return 0;
    tl_batch b = {.n_tokens = n, .token = tok, .seq_id = seq, .logits = keep};
    tl_status s = tl_decode(c, &b);
    CHECK(s == TL_OK, "decode of %d tokens: %s", n, tl_last_error());
    if (s) return 0;
    for (int32_t i = 0; i < n; i++) {
        const float *lg = tl_context_logits(c, i);
        CHECK(lg != NULL, "logits of token %d", i);
        if (!lg) continue;
        const double e = row_err(lg, st[from[i]].ref + (size_t)at[i] * nv, nv);
        if (e > *worst) *worst = e;
        CHECK(e <= TOL, "stream %d position %d (seq %d): relative error %g", from[i], at[i], seq[i], e);
        int32_t g = -1, best = 0;
        for (int32_t v = 1; v < nv; v++)
            if (lg[v] > lg[best]) best = v;
        CHECK(tl_context_greedy(c, i, &g) == TL_OK && g == best, "greedy of token %d: %d, argmax %d", i, g, best);
    }
    for (int32_t i = 0; i < n; i++) st[from[i]].done = at[i] + 1 > st[from[i]].done ? at[i] + 1 : st[from[i]].done;
    return n;
}

/* a rejected batch must leave sequence lengths unchanged */
static void bad_batches(tl_context *c, int32_t nv, int32_t seq_ok) {
    int32_t lens[8];
    const int32_t nsq = tl_context_n_seq_max(c) < 8 ? tl_context_n_seq_max(c) : 8;
    for (int32_t s = 0; s < nsq; s++) lens[s] = tl_seq_len(c, s);
    int32_t tok[4] = {1, 2, nv + 5, 3}, seq[4] = {seq_ok, seq_ok, seq_ok, seq_ok};
    tl_batch b = {.n_tokens = 4, .token = tok, .seq_id = seq};
    CHECK(tl_decode(c, &b) == TL_ERR_INVALID && strstr(tl_last_error(), "vocabulary"), "bad token: %s",
          tl_last_error());
    tok[2] = 4;
    int32_t pos[4] = {lens[seq_ok], lens[seq_ok] + 1, lens[seq_ok] + 5, lens[seq_ok] + 3};
    b.pos = pos;
    CHECK(tl_decode(c, &b) == TL_ERR_INVALID && strstr(tl_last_error(), "position"), "bad position: %s",
          tl_last_error());
    b.pos = NULL;
    seq[1] = 1 << 20;
    CHECK(tl_decode(c, &b) == TL_ERR_INVALID && strstr(tl_last_error(), "sequence id"), "bad sequence: %s",
          tl_last_error());
    b.n_tokens = 0;
    CHECK(tl_decode(c, &b) == TL_ERR_INVALID, "empty batch refused");
    for (int32_t s = 0; s < nsq; s++) CHECK(tl_seq_len(c, s) == lens[s], "sequence %d unchanged after bad batches", s);
}

static void test_model(const char *path) {
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    mp.backend = backend;
    if (tl_model_load(path, &mp, &m)) {
        CHECK(0, "load %s: %s", path, tl_last_error());
        return;
    }
    tl_model_info info;
    tl_model_get_info(m, &info);
    const int32_t nv = info.n_vocab;
    stream st[N_STREAM];
    memset(st, 0, sizeof st);
    /* gpt2's learned positions bound its streams */
    const int32_t max_len = info.n_ctx_train < MAX_LEN ? info.n_ctx_train : MAX_LEN;
    for (int k = 0; k < N_STREAM; k++) {
        st[k].len = 12 + (int32_t)rnd((uint32_t)(max_len - 12));
        for (int32_t i = 0; i < st[k].len; i++) st[k].tok[i] = (int32_t)rnd((uint32_t)nv);
        st[k].seq = -1;
    }
    /* stream 3 is stream 0's first 9 tokens, then its own (a fork at 9: the
     * block of positions 8..11 is shared partly filled) */
    memcpy(st[3].tok, st[0].tok, 9 * sizeof(int32_t));
    const double spread = make_refs(m, st, nv);
    tol = tol_floor + 2 * spread;

    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = 8;
    cp.n_batch = 7;
    cp.kv_block = 4;
    cp.n_threads = 2;
    tl_context *c = NULL;
    CHECK(tl_context_init(m, &cp, &c) == TL_OK, "context: %s", tl_last_error());
    if (!c) {
        tl_model_free(m);
        return;
    }
    st[0].seq = 0, st[1].seq = 1, st[2].seq = 2;
    double worst = 0;
    int steps = 0, forked = 0, restarted = 0, truncated = 0;
    while (step(c, st, nv, &worst) > 0) {
        steps++;
        if (!forked && st[0].done >= 9) {
            CHECK(tl_seq_fork(c, 0, 3, 9) == TL_OK, "fork: %s", tl_last_error());
            CHECK(tl_seq_fork(c, 0, 3, 9) == TL_ERR_STATE, "fork onto a non-empty sequence is refused");
            st[3].seq = 3, st[3].done = 9, forked = 1;
        }
        if (!restarted && st[1].done >= 6) {
            /* stream 1 leaves (its blocks freed) and comes back from the start as sequence 5 */
            CHECK(tl_seq_remove(c, 1) == TL_OK && tl_seq_len(c, 1) == 0, "remove: %s", tl_last_error());
            st[1].seq = 5, st[1].done = 0, restarted = 1;
            st[4].seq = 1; /* a new stream takes the freed id */
        }
        if (!truncated && st[2].done >= 10 && st[2].done < st[2].len) {
            CHECK(tl_seq_truncate(c, 2, st[2].done - 3) == TL_OK, "truncate: %s", tl_last_error());
            st[2].done -= 3, truncated = 1;
        }
        if (steps == 3) bad_batches(c, nv, 0);
    }
    CHECK(forked && restarted && truncated, "schedule ran fork %d, restart %d, truncate %d", forked, restarted,
          truncated);
    for (int k = 0; k < N_STREAM; k++)
        CHECK(st[k].done == st[k].len && tl_seq_len(c, st[k].seq) == st[k].len, "stream %d decoded %d of %d", k,
              st[k].done, st[k].len);
    printf("%-40s %-7s %-6s %2d steps, worst relative error %.2e (prefill vs decode alone: %.2e)\n", path, info.arch,
           info.ftype, steps, worst, spread);
    tl_context_free(c);

    /* a full pool: seq 0 holds 24 of 32 positions, a 12-token batch for seq 1 does not fit */
    cp.n_ctx = 32, cp.n_seq_max = 2, cp.n_batch = 16;
    CHECK(tl_context_init(m, &cp, &c) == TL_OK, "small context: %s", tl_last_error());
    int32_t t24[25];
    for (int i = 0; i < 25; i++) t24[i] = (int32_t)rnd((uint32_t)nv);
    float *ref24 = malloc(sizeof(float) * (size_t)nv * 25);
    tl_session *s24 = NULL;
    CHECK(tl_session_init(m, NULL, &s24) == TL_OK && tl_session_eval_all(s24, t24, 25, ref24) == TL_OK,
          "reference of 25 tokens: %s", tl_last_error());
    tl_session_free(s24);
    if (c) {
        tl_batch b = {.n_tokens = 24, .token = t24};
        CHECK(tl_decode(c, &b) == TL_OK, "24 tokens: %s", tl_last_error());
        int32_t seq1[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        tl_batch b2 = {.n_tokens = 12, .token = st[1].tok, .seq_id = seq1};
        CHECK(tl_decode(c, &b2) == TL_ERR_FULL && strstr(tl_last_error(), "free"), "full pool: %s", tl_last_error());
        CHECK(tl_seq_len(c, 0) == 24 && tl_seq_len(c, 1) == 0, "sequences intact after a full pool");
        /* sequence 0 goes on as if nothing happened */
        tl_batch b3 = {.n_tokens = 1, .token = t24 + 24};
        CHECK(tl_decode(c, &b3) == TL_OK, "decode after full: %s", tl_last_error());
        const float *lg = tl_context_logits(c, 0);
        CHECK(lg && row_err(lg, ref24 + (size_t)24 * nv, nv) <= TOL, "logits after a rejected batch");
        tl_context_free(c);
    }
    free(ref24);
    for (int k = 0; k < N_STREAM; k++) free(st[k].ref);
    tl_model_free(m);
}

/* 64 sequences x 256 tokens: KV memory follows the live tokens */
static void test_occupancy(const char *path) {
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    mp.backend = backend;
    if (tl_model_load(path, &mp, &m)) {
        CHECK(0, "load %s: %s", path, tl_last_error());
        return;
    }
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = 64 * 256;
    cp.n_seq_max = 64;
    cp.n_batch = 64;
    cp.n_threads = 2;
    tl_context *c = NULL;
    CHECK(tl_context_init(m, &cp, &c) == TL_OK, "context: %s", tl_last_error());
    int32_t tok[64], seq[64];
    tl_status s = TL_OK;
    for (int32_t p = 0; p < 256 && !s; p++) {
        for (int32_t i = 0; i < 64; i++) tok[i] = (p * 7 + i) % 200, seq[i] = i;
        tl_batch b = {.n_tokens = 64, .token = tok, .seq_id = seq};
        s = tl_decode(c, &b);
    }
    CHECK(s == TL_OK, "64 x 256 tokens: %s", tl_last_error());
    tl_kv_stats ks;
    tl_context_kv_stats(c, &ks);
    const double pos_bytes = (double)ks.bytes_per_block / ks.block_size;
    const double ratio = (double)ks.n_used * (double)ks.bytes_per_block / ((double)ks.n_positions * pos_bytes);
    printf("occupancy: %d sequences, %lld positions, %d of %d blocks of %d: %.3fx the tokens' KV bytes\n",
           ks.n_seqs, (long long)ks.n_positions, ks.n_used, ks.n_blocks, ks.block_size, ratio);
    CHECK(ks.n_seqs == 64 && ks.n_positions == 64 * 256 && ratio <= 1.1, "occupancy %.3f", ratio);
    /* the pool is exactly full: one more token anywhere is refused */
    tl_batch b = {.n_tokens = 1, .token = tok, .seq_id = seq};
    CHECK(tl_decode(c, &b) == TL_ERR_FULL, "token past a full pool refused: %s", tl_last_error());
    CHECK(tl_seq_remove(c, 5) == TL_OK && tl_decode(c, &b) == TL_OK, "room again after a removal: %s",
          tl_last_error());
    tl_context_free(c);
    tl_model_free(m);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        backend = TL_BACKEND_CUDA;
        tol_floor = 2e-3;
    }
    const char *models[] = {
        "tests/fixtures/tiny_llama.gguf", "tests/fixtures/tiny_llama_tied.gguf", "tests/fixtures/tiny_llama3rope.gguf",
        "tests/fixtures/tiny_qwen2.gguf", "tests/fixtures/tiny_qwen3.gguf", "tests/fixtures/tiny_gemma3.gguf",
        "tests/fixtures/gpt2_ref.gguf",
        "models/SmolLM2-135M-Instruct.Q4_1.gguf", "models/gemma-3-270m-Q4_K_M.gguf",
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        if (access(models[i], R_OK)) {
            printf("skip %s: not present (scripts/fetch_model.sh fetches the real models)\n", models[i]);
            continue;
        }
        test_model(models[i]);
    }
    test_occupancy("tests/fixtures/tiny_llama.gguf");
    return test_finish();
}
