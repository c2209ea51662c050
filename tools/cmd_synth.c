/* tools/cmd_synth: `tallow synth --shape NAME --type T -o OUT.gguf`.
 *
 * Writes a random-weight GGUF with the exact dimensions of a standard model
 * (Llama-3-8B, Llama-3.2-1B, Qwen3-0.6B, Qwen3-8B, SmolLM2-135M, or a tiny test shape), so
 * speed benchmarks and CPU/GPU parity checks need no download. Weights are
 * ~N(0, std) (sum of four uniforms), norms 1, drawn per (tensor, row) from
 * the seed so a file does not depend on the thread count. Types follow the
 * usual quantization mixes: legacy quants and Q8_0 keep output.weight at
 * Q6_K (Q8_0: Q8_0) as llama.cpp's quantize does; q4_k_m uses Q6_K for
 * output, and for attn_v/ffn_down on the layers that scheme gives more bits.
 * The tokenizer is a minimal GPT-2-style byte-level vocabulary (256 byte
 * tokens, a few merges, BOS/EOS) padded with unused tokens to n_vocab, so
 * the engine loads and tokenizes with it.
 * With --lora-rank R it writes instead a random LoRA adapter for that shape
 * (llama.cpp's adapter layout, f16 lora_a/lora_b on all seven projections of
 * every layer), so adapter speed can be measured on the same synthetic model.
 * Owns: the tensor buffers until written. Calls: io/gguf writer, quant,
 * base/threadpool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "commands.h"
#include "quant_mix.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/dtype.h"
#include "text/tokenizer.h"

typedef struct synth_shape {
    const char *name;
    const char *arch; /* default family */
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    float rope_base, eps;
    int tied;        /* no output.weight: the head reuses token_embd */
    int rope_freqs;  /* Llama-3.1+ style frequency factors (factor 32, ctx 8192) */
} synth_shape;

static const synth_shape synth_shapes[] = {
    {"llama3-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, 8192, 500000.0f, 1e-5f, 0, 0},
    {"llama3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.0f, 1e-5f, 1, 1},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, 1e-6f, 1, 0},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1000000.0f, 1e-6f, 0, 0},
    {"smollm2-135m", "llama", 576, 30, 9, 3, 64, 1536, 49152, 8192, 100000.0f, 1e-5f, 1, 0},
    {"tiny", "llama", 256, 2, 4, 2, 64, 512, 512, 2048, 10000.0f, 1e-5f, 0, 0},
};

typedef struct synth_tensor {
    char name[64];
    tl_type type;
    int64_t ne[2];
    uint32_t n_dims;
    float value; /* 0: random, else a constant (norm weights) */
    const float *fixed; /* explicit f32 values (rope_freqs), else NULL */
    void *data;
    size_t size;
} synth_tensor;

typedef struct synth_job {
    synth_tensor *t;
    uint64_t seed;
    float std;
    tl_status st;
} synth_job;

static uint64_t synth_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static void synth_rows(void *arg, int ith, int nth) {
    synth_job *j = arg;
    synth_tensor *t = j->t;
    int64_t n = t->ne[0], rows = t->n_dims > 1 ? t->ne[1] : 1;
    int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    if (r0 >= r1) return;
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (!buf) {
        j->st = TL_ERR_NOMEM;
        return;
    }
    size_t row_bytes = tl_row_bytes(t->type, n);
    for (int64_t r = r0; r < r1; r++) {
        uint64_t s = synth_mix(j->seed ^ synth_mix((uint64_t)r + 0x9e3779b97f4a7c15ull));
        for (int64_t i = 0; i < n; i++) {
            if (t->fixed) {
                buf[i] = t->fixed[i];
                continue;
            }
            if (t->value != 0.0f) {
                buf[i] = t->value;
                continue;
            }
            /* four 16-bit uniforms from one 64-bit xorshift step: sum has
             * mean 2, variance 1/3 -> scale to N(0, std)-ish */
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            float u = (float)(s & 0xffff) + (float)((s >> 16) & 0xffff) + (float)((s >> 32) & 0xffff) +
                      (float)(s >> 48);
            buf[i] = (u * (1.0f / 65536.0f) - 2.0f) * 1.7320508f * j->std;
        }
        if (quant_quantize(t->type, buf, (uint8_t *)t->data + (size_t)r * row_bytes, n) != TL_OK)
            j->st = TL_ERR_UNSUPPORTED;
    }
    free(buf);
}

static void synth_usage(FILE *f) {
    fprintf(f,
            "usage: tallow synth --shape NAME --type T -o OUT.gguf [options]\n"
            "  write a random-weight GGUF of a standard model shape\n"
            "  --shape S    llama3-8b | llama3.2-1b | qwen3-0.6b | qwen3-8b | smollm2-135m | tiny\n"
            "  --arch A     llama | qwen3 (default: the shape's family)\n"
            "  --type T     f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q4_k_m | q4_k | q6_k (default f16)\n"
            "  --layers N   override the layer count (quick tests)\n"
            "  --std X      weight standard deviation (default 0.02)\n"
            "  --seed N     (default 1)\n"
            "  --lora-rank R   write a random rank-R LoRA adapter for the shape instead\n"
            "  --lora-alpha A  its alpha (default R, so the scale is 1)\n"
            "  -t, --threads N  threads (default: all cores)\n"
            "  -o FILE      output path\n");
}

/* GPT-2 byte-level alphabet: printable bytes map to themselves, the others
 * to code points 256.. in byte order. Writes the UTF-8 of byte b's symbol. */


static tl_status synth_vocab(gguf_writer *w, int32_t n_vocab, char ***tok_out, int32_t **types_out) {
    static const char *merges[][2] = {{"t", "h"}, {"th", "e"}, {"\xC4\xA0", "t"}, {"i", "n"}, {"e", "r"},
                                      {"a", "n"}, {"o", "n"}, {"\xC4\xA0", "a"}, {"r", "e"}, {"e", "n"}};
    const int n_merges = (int)(sizeof merges / sizeof merges[0]);
    if (n_vocab < 256 + n_merges + 2) return tl_err(TL_ERR_INVALID, "synth: n_vocab %d too small", n_vocab);
    char **toks = calloc((size_t)n_vocab, sizeof *toks);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char *mstr[16];
    if (!toks || !types) return tl_err(TL_ERR_NOMEM, "synth: vocab");
    *tok_out = toks;
    *types_out = types;
    char buf[64];
    int32_t k = 0;
    for (int b = 0; b < 256; b++, k++) {
        tok_byte_level_text((uint8_t)b, buf);
        toks[k] = strdup(buf);
        types[k] = 1;
    }
    for (int i = 0; i < n_merges; i++, k++) {
        snprintf(buf, sizeof buf, "%s%s", merges[i][0], merges[i][1]);
        toks[k] = strdup(buf);
        types[k] = 1;
        snprintf(buf, sizeof buf, "%s %s", merges[i][0], merges[i][1]);
        mstr[i] = strdup(buf);
    }
    for (; k < n_vocab - 2; k++) {
        snprintf(buf, sizeof buf, "<unused_%d>", k);
        toks[k] = strdup(buf);
        types[k] = 5;
    }
    toks[k] = strdup("<|begin_of_text|>");
    types[k++] = 3;
    toks[k] = strdup("<|end_of_text|>");
    types[k++] = 3;
    for (int32_t i = 0; i < n_vocab; i++)
        if (!toks[i]) return tl_err(TL_ERR_NOMEM, "synth: vocab");
    tl_status s = TL_OK;
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe");
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n_vocab);
    if (!s) s = gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n_vocab);
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mstr, (uint64_t)n_merges);
    if (!s) s = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(n_vocab - 2));
    if (!s) s = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(n_vocab - 1));
    if (!s) s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    for (int i = 0; i < n_merges; i++) free(mstr[i]);
    return s;
}

int cmd_synth(int argc, char **argv) {
    const char *shape_name = NULL, *arch = NULL, *type_name = "f16", *out = NULL;
    int32_t n_layers = 0, n_threads = 0;
    float std = 0.02f, lora_alpha = 0;
    uint64_t seed = 1;
    int32_t lora_rank = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            synth_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--shape")) ok = args_str(argc, argv, &i, &shape_name);
        else if (!strcmp(a, "--arch")) ok = args_str(argc, argv, &i, &arch);
        else if (!strcmp(a, "--type")) ok = args_str(argc, argv, &i, &type_name);
        else if (!strcmp(a, "-o")) ok = args_str(argc, argv, &i, &out);
        else if (!strcmp(a, "--layers")) ok = args_int(argc, argv, &i, 1, 1024, &n_layers);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &n_threads);
        else if (!strcmp(a, "--std")) ok = args_float(argc, argv, &i, 1e-6, 10, &std);
        else if (!strcmp(a, "--seed")) ok = args_u64(argc, argv, &i, &seed);
        else if (!strcmp(a, "--lora-rank")) ok = args_int(argc, argv, &i, 1, 4096, &lora_rank);
        else if (!strcmp(a, "--lora-alpha")) ok = args_float(argc, argv, &i, 1e-6, 1e6, &lora_alpha);
        else {
            fprintf(stderr, "tallow synth: unknown option '%s'\n", a);
            synth_usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!shape_name || !out) {
        synth_usage(stderr);
        return 2;
    }
    const synth_shape *sh = NULL;
    for (size_t i = 0; i < sizeof synth_shapes / sizeof synth_shapes[0]; i++)
        if (!strcmp(shape_name, synth_shapes[i].name)) sh = &synth_shapes[i];
    if (!sh) {
        fprintf(stderr, "tallow synth: unknown shape '%s'\n", shape_name);
        return 2;
    }
    if (!arch) arch = sh->arch;
    bool qwen3 = !strcmp(arch, "qwen3");
    if (!qwen3 && strcmp(arch, "llama")) {
        fprintf(stderr, "tallow synth: unknown arch '%s' (llama, qwen3)\n", arch);
        return 2;
    }
    /* weight types: main, token_embd, output, attn_v/ffn_down on more-bits layers */
    tl_type tw, temb, tout, tmore;
    if (!strcmp(type_name, "q4_k_m")) {
        tw = temb = TL_TYPE_Q4_K;
        tout = tmore = TL_TYPE_Q6_K;
    } else if (tl_type_from_name(type_name, &tw)) {
        temb = tmore = tw;
        tout = (tw == TL_TYPE_Q4_0 || tw == TL_TYPE_Q4_1 || tw == TL_TYPE_Q5_0 || tw == TL_TYPE_Q5_1 ||
                tw == TL_TYPE_Q4_K)
                   ? TL_TYPE_Q6_K
                   : tw;
    } else {
        fprintf(stderr, "tallow synth: unknown type '%s'\n", type_name);
        return 2;
    }
    /* the K-quant mixes need those quantizers; where this build lacks one,
     * say so and keep the file loadable with Q8_0 in that role */
    tl_type *roles[3] = {&temb, &tout, &tmore};
    for (int r = 0; r < 3; r++) {
        const quant_kernels *qk = quant_kernels_ref(*roles[r]);
        if (!qk || !qk->from_float) {
            fprintf(stderr, "synth: warning: no %s quantizer in this build; using q8_0 instead\n",
                    tl_type_name(*roles[r]));
            *roles[r] = TL_TYPE_Q8_0;
        }
    }
    int32_t nl = n_layers > 0 ? n_layers : sh->n_layer;
    int32_t e = sh->n_embd, hd = sh->head_dim, qd = sh->n_head * hd, kvd = sh->n_head_kv * hd;

    /* tensor list */
    size_t cap = (size_t)nl * 14 + 8, nt = 0;
    synth_tensor *ts = calloc(cap, sizeof *ts);
    float *rf = NULL;
    if (!ts) return 1;
#define ADD(NAME, T, N0, N1, VAL)                                                                   \
    do {                                                                                            \
        synth_tensor *t_ = &ts[nt++];                                                               \
        snprintf(t_->name, sizeof t_->name, "%s", NAME);                                            \
        t_->type = (T);                                                                             \
        t_->ne[0] = (N0);                                                                           \
        t_->ne[1] = (N1);                                                                           \
        t_->n_dims = (N1) > 0 ? 2 : 1;                                                              \
        if ((N1) <= 0) t_->ne[1] = 1;                                                               \
        t_->value = (VAL);                                                                          \
    } while (0)
    if (lora_rank > 0) {
        /* per projection: n_in, n_out; lora_a is [n_in, rank], lora_b [rank, n_out] */
        static const char *proj[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
        const int32_t pin[7] = {e, e, e, qd, e, e, sh->n_ff}, pout[7] = {qd, kvd, kvd, e, sh->n_ff, sh->n_ff, e};
        char an[64];
        for (int il = 0; il < nl; il++)
            for (int p = 0; p < 7; p++) {
                snprintf(an, sizeof an, "blk.%d.%s.weight.lora_a", il, proj[p]);
                ADD(an, TL_TYPE_F16, pin[p], lora_rank, 0.0f);
                snprintf(an, sizeof an, "blk.%d.%s.weight.lora_b", il, proj[p]);
                ADD(an, TL_TYPE_F16, lora_rank, pout[p], 0.0f);
            }
        goto listed;
    }
    ADD("token_embd.weight", temb, e, sh->n_vocab, 0.0f);
    ADD("output_norm.weight", TL_TYPE_F32, e, 0, 1.0f);
    if (!sh->tied) ADD("output.weight", tout, e, sh->n_vocab, 0.0f);
    if (sh->rope_freqs) {
        /* Llama-3.1 frequency factors: factor 32, low 1, high 4, original ctx 8192 */
        int half = hd / 2;
        rf = malloc(sizeof(float) * (size_t)half);
        if (!rf) return 1;
        for (int i = 0; i < half; i++) {
            double freq = pow(sh->rope_base, -2.0 * i / hd);
            double wl = 2.0 * M_PI / freq;
            if (wl < 8192.0 / 4.0) rf[i] = 1.0f;
            else if (wl > 8192.0 / 1.0) rf[i] = 32.0f;
            else {
                double sm = (8192.0 / wl - 1.0) / (4.0 - 1.0);
                rf[i] = (float)(1.0 / ((1.0 - sm) / 32.0 + sm));
            }
        }
        ADD("rope_freqs.weight", TL_TYPE_F32, half, 0, 0.0f);
        ts[nt - 1].fixed = rf;
    }
    char nm[64];
    for (int il = 0; il < nl; il++) {
        tl_type tv = quant_mix_more_bits(il, nl) ? tmore : tw;
#define L(SUFFIX, T, N0, N1, VAL)                                                                   \
    do {                                                                                            \
        snprintf(nm, sizeof nm, "blk.%d.%s", il, SUFFIX);                                            \
        ADD(nm, T, N0, N1, VAL);                                                                    \
    } while (0)
        L("attn_norm.weight", TL_TYPE_F32, e, 0, 1.0f);
        L("attn_q.weight", tw, e, qd, 0.0f);
        L("attn_k.weight", tw, e, kvd, 0.0f);
        L("attn_v.weight", tv, e, kvd, 0.0f);
        L("attn_output.weight", tw, qd, e, 0.0f);
        if (qwen3) {
            L("attn_q_norm.weight", TL_TYPE_F32, hd, 0, 1.0f);
            L("attn_k_norm.weight", TL_TYPE_F32, hd, 0, 1.0f);
        }
        L("ffn_norm.weight", TL_TYPE_F32, e, 0, 1.0f);
        L("ffn_gate.weight", tw, e, sh->n_ff, 0.0f);
        L("ffn_up.weight", tw, e, sh->n_ff, 0.0f);
        L("ffn_down.weight", tv, sh->n_ff, e, 0.0f);
#undef L
    }
listed:
#undef ADD

    gguf_writer *w = NULL;
    tl_threadpool *tp = NULL;
    char **toks = NULL;
    int32_t *types = NULL;
    int rc = 1;
    tl_status s = gguf_writer_init(&w);
    if (!s) s = tl_threadpool_init(n_threads > 0 ? n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN), &tp);
    if (s) goto done;
    char key[96];
#define KEY(K) (snprintf(key, sizeof key, "%s.%s", arch, K), key)
    s = gguf_writer_set_str(w, "general.architecture", arch);
    if (lora_rank > 0) {
        if (!s) s = gguf_writer_set_str(w, "general.type", "adapter");
        if (!s) s = gguf_writer_set_str(w, "adapter.type", "lora");
        if (!s) s = gguf_writer_set_f32(w, "adapter.lora.alpha", lora_alpha > 0 ? lora_alpha : (float)lora_rank);
        if (s) goto done;
        goto tensors;
    }
    if (!s) {
        char gname[96];
        snprintf(gname, sizeof gname, "synthetic %s %s", sh->name, type_name);
        s = gguf_writer_set_str(w, "general.name", gname);
    }
    if (!s) s = gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh->n_ctx);
    if (!s) s = gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)e);
    if (!s) s = gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)nl);
    if (!s) s = gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)sh->n_ff);
    if (!s) s = gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sh->n_head);
    if (!s) s = gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv);
    if (!s) s = gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hd);
    if (!s) s = gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hd);
    if (!s) s = gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hd);
    if (!s) s = gguf_writer_set_f32(w, KEY("rope.freq_base"), sh->rope_base);
    if (!s) s = gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps);
    if (!s) s = gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)sh->n_vocab);
#undef KEY
    if (!s) s = synth_vocab(w, sh->n_vocab, &toks, &types);
    if (s) goto done;

tensors:;
    int64_t t0 = tl_time_us();
    uint64_t total = 0;
    for (size_t i = 0; i < nt; i++) {
        synth_tensor *t = &ts[i];
        t->size = tl_row_bytes(t->type, t->ne[0]) * (size_t)t->ne[1];
        if (!t->size) {
            s = tl_err(TL_ERR_INVALID, "synth: %s: row of %lld is not a whole number of %s blocks", t->name,
                       (long long)t->ne[0], tl_type_name(t->type));
            goto done;
        }
        t->data = malloc(t->size);
        if (!t->data) {
            s = tl_err(TL_ERR_NOMEM, "synth: %zu bytes for %s", t->size, t->name);
            goto done;
        }
        synth_job job = {t, synth_mix(seed * 1000003u + i), std, TL_OK};
        tl_threadpool_run(tp, synth_rows, &job);
        if (job.st) {
            s = tl_err(job.st, "synth: %s: quantizing to %s failed (%s)", t->name, tl_type_name(t->type),
                       job.st == TL_ERR_UNSUPPORTED ? "no quantizer for this type" : "out of memory");
            goto done;
        }
        s = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size);
        if (s) goto done;
        total += t->size;
    }
    int64_t t1 = tl_time_us();
    s = gguf_writer_write(w, out);
    if (s) goto done;
    int64_t t2 = tl_time_us();
    fprintf(stderr, "synth: %s (%s, %d layers, %s): %zu tensors, %.2f GiB; generated in %.1f s, written in %.1f s\n",
            out, arch, nl, type_name, nt, total / 1073741824.0, (t1 - t0) / 1e6, (t2 - t1) / 1e6);
    rc = 0;
done:
    if (s) fprintf(stderr, "tallow synth: %s\n", tl_last_error());
    for (size_t i = 0; i < nt; i++) free(ts[i].data);
    free(ts);
    free(rf);
    if (toks)
        for (int32_t i = 0; i < sh->n_vocab; i++) free(toks[i]);
    free(toks);
    free(types);
    tl_threadpool_free(tp);
    gguf_writer_free(w);
    return rc;
}
