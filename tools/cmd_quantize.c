/* tools/cmd_quantize: `tallow quantize IN.gguf OUT.gguf TYPE [-t N]`.
 *
 * Rewrites a GGUF model with its weight matrices in another tensor type.
 * Every kv is copied (general.file_type replaced); each tensor is produced at
 * write time by a fill callback (dequantize each row of the source to f32,
 * quantize it to the chosen type, rows split over a thread pool), so only
 * the mapped input and one output tensor are in memory at once. The file is
 * written as OUT.tmp and renamed, so an error never leaves a half-written OUT.
 *
 * Which tensors are converted follows the usual GGUF convention: tensors of
 * two or more dimensions whose name ends in "weight", except norms, MoE
 * gating, position/token-type embeddings and a few tiny special matrices;
 * everything else (1-D norms and biases) is copied unchanged. A plain TYPE
 * gives every converted tensor that type ("pure"); the mixes q4_k_m and
 * q5_k_m pick per tensor as llama.cpp's quantizer does for dense models:
 *   - output.weight (or token_embd.weight when there is no output.weight,
 *     i.e. tied embeddings): Q6_K, or Q8_0 if its rows are not a multiple
 *     of 256;
 *   - attn_v.weight: Q6_K where quant_mix_more_bits(i, n) holds, i counting attn_v
 *     tensors in file order and n the number of attn_v/attn_qkv tensors;
 *   - ffn_down (layer i of n = block_count): Q6_K where quant_mix_more_bits(i, n);
 *   - attn_qkv.weight (fused): Q5_K for q4_k_m, Q6_K for q5_k_m;
 *   - everything else: the base type (Q4_K or Q5_K).
 * quant_mix_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
 * A row length that is not a multiple of the chosen type's block falls back
 * (Q2_K/Q3_K/IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * then F16 if that still does not fit); the progress line says so. A tensor
 * already in the chosen type is copied byte for byte.
 * Owns: nothing. Calls: io/gguf, quant, tensor/dtype, base/threadpool. */
#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "commands.h"
#include "quant_mix.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/dtype.h"

typedef enum qz_mix { QZ_PURE, QZ_Q4_K_M, QZ_Q5_K_M } qz_mix;

typedef struct qz_target {
    const char *name;
    tl_type base;      /* type of ordinary weight matrices */
    uint32_t ftype;    /* general.file_type (llama_ftype numbering) */
    qz_mix mix;
} qz_target;

static const qz_target qz_targets[] = {
    {"f32", TL_TYPE_F32, 0, QZ_PURE},       {"f16", TL_TYPE_F16, 1, QZ_PURE},
    {"bf16", TL_TYPE_BF16, 32, QZ_PURE},    {"q8_0", TL_TYPE_Q8_0, 7, QZ_PURE},
    {"q4_0", TL_TYPE_Q4_0, 2, QZ_PURE},     {"q4_1", TL_TYPE_Q4_1, 3, QZ_PURE},
    {"q5_0", TL_TYPE_Q5_0, 8, QZ_PURE},     {"q5_1", TL_TYPE_Q5_1, 9, QZ_PURE},
    {"q2_k", TL_TYPE_Q2_K, 10, QZ_PURE},    {"q3_k", TL_TYPE_Q3_K, 11, QZ_PURE},
    {"q4_k", TL_TYPE_Q4_K, 14, QZ_PURE},    {"q5_k", TL_TYPE_Q5_K, 16, QZ_PURE},
    {"q6_k", TL_TYPE_Q6_K, 18, QZ_PURE},    {"iq4_nl", TL_TYPE_IQ4_NL, 25, QZ_PURE},
    {"iq4_xs", TL_TYPE_IQ4_XS, 30, QZ_PURE}, {"q4_k_m", TL_TYPE_Q4_K, 15, QZ_Q4_K_M},
    {"q5_k_m", TL_TYPE_Q5_K, 17, QZ_Q5_K_M},
};
#define QZ_N_TARGETS (sizeof qz_targets / sizeof qz_targets[0])

static void quantize_usage(FILE *f) {
    fprintf(f, "usage: tallow quantize IN.gguf OUT.gguf TYPE [-t N]\n"
               "  rewrite a GGUF model with its weight matrices in TYPE\n"
               "  TYPE: ");
    for (size_t i = 0; i < QZ_N_TARGETS; i++) fprintf(f, "%s%s", i ? ", " : "", qz_targets[i].name);
    fprintf(f, "\n  q4_k_m/q5_k_m use more bits for output, some attn_v and ffn_down tensors\n"
               "  -t N   worker threads (default: number of CPUs)\n");
}

static const qz_target *qz_find_target(const char *s) {
    char low[16];
    size_t n = strlen(s);
    if (n >= sizeof low) return NULL;
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)s[i]);
    for (size_t i = 0; i < QZ_N_TARGETS; i++)
        if (!strcmp(low, qz_targets[i].name)) return &qz_targets[i];
    return NULL;
}

static bool has_sub(const char *s, const char *sub) { return strstr(s, sub) != NULL; }
static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Tensors that are converted at all (the rest are copied as they are). */
static bool qz_is_weight(const char *name, uint32_t n_dims) {
    return n_dims >= 2 && ends_with(name, "weight") && !has_sub(name, "_norm.weight") &&
           !has_sub(name, "ffn_gate_inp.weight") && strcmp(name, "position_embd.weight") &&
           strcmp(name, "token_types.weight") && !has_sub(name, "ssm_conv1d.weight") &&
           !has_sub(name, "attn_rel_b.weight");
}


static bool fits(tl_type t, int64_t ne0) { return ne0 % tl_type_get(t)->blck == 0; }

/* State shared by the planning pass over the tensors in file order. */
typedef struct qz_mixstate {
    qz_mix mix;
    bool has_output;
    int n_layer;   /* block_count */
    int n_wv, i_wv; /* attn_v/attn_qkv count; attn_v seen so far */
    int i_ffn_down;
} qz_mixstate;

static tl_type qz_mix_type(qz_mixstate *ms, tl_type base, const char *name, int64_t ne0) {
    if (ms->mix == QZ_PURE) return base;
    if (!strcmp(name, "output.weight") || (!ms->has_output && !strcmp(name, "token_embd.weight")))
        return ne0 % 256 ? TL_TYPE_Q8_0 : TL_TYPE_Q6_K;
    if (has_sub(name, "attn_v.weight")) {
        bool more = quant_mix_more_bits(ms->i_wv, ms->n_wv);
        ms->i_wv++;
        return more ? TL_TYPE_Q6_K : base;
    }
    if (has_sub(name, "attn_qkv.weight")) return ms->mix == QZ_Q4_K_M ? TL_TYPE_Q5_K : TL_TYPE_Q6_K;
    if (has_sub(name, "ffn_down")) {
        int layer;
        if (sscanf(name, "blk.%d.", &layer) != 1) layer = ms->i_ffn_down;
        ms->i_ffn_down++;
        return quant_mix_more_bits(layer, ms->n_layer) ? TL_TYPE_Q6_K : base;
    }
    return base;
}

/* One output tensor: where its bytes come from and how. */
typedef struct qz_job qz_job;
typedef struct qz_run {
    tl_threadpool *tp;
    float **scratch;   /* [n_threads][max_ne0] */
    int n_tensors, done;
    double mb_in, mb_out;
} qz_run;

struct qz_job {
    qz_run *run;
    const gguf_tensor *src;
    char *name;
    tl_type dst;
    bool convert;        /* false: copy bytes */
    char note[96];       /* fallback note or "" */
    uint8_t *out;        /* set during fill */
    int64_t nrows;
    size_t src_row, dst_row;
    atomic_int failed;   /* set by any thread whose row conversion failed */
};

static void qz_rows(void *arg, int ith, int nth) {
    qz_job *j = arg;
    int64_t r0 = j->nrows * ith / nth, r1 = j->nrows * (ith + 1) / nth;
    float *buf = j->run->scratch[ith];
    const uint8_t *src = j->src->data;
    int64_t ne0 = j->src->ne[0];
    for (int64_t r = r0; r < r1; r++) {
        /* both calls only fail on a type without kernels or a bad length,
         * both checked before the write starts */
        if (quant_dequantize(j->src->type, src + (size_t)r * j->src_row, buf, ne0) != TL_OK ||
            quant_quantize(j->dst, buf, j->out + (size_t)r * j->dst_row, ne0) != TL_OK) {
            atomic_store(&j->failed, 1);
            return;
        }
    }
}

static void qz_progress(const qz_job *j, size_t size) {
    qz_run *run = j->run;
    run->done++;
    run->mb_in += (double)j->src->size / 1e6;
    run->mb_out += (double)size / 1e6;
    int w = 20, filled = run->n_tensors ? run->done * w / run->n_tensors : w;
    char bar[32];
    for (int k = 0; k < w; k++) bar[k] = k < filled ? '#' : '.';
    bar[w] = 0;
    char shape[64];
    int o = snprintf(shape, sizeof shape, "%" PRId64, j->src->ne[0]);
    for (uint32_t d = 1; d < j->src->n_dims && o < (int)sizeof shape; d++)
        o += snprintf(shape + o, sizeof shape - (size_t)o, "x%" PRId64, j->src->ne[d]);
    fprintf(stderr, "[%s] %4d/%d %-36s %-14s %-6s -> %-6s %8.2f -> %8.2f MB%s%s%s\n", bar,
            run->done, run->n_tensors, j->name, shape, tl_type_name(j->src->type),
            tl_type_name(j->dst), (double)j->src->size / 1e6, (double)size / 1e6,
            j->convert ? "" : " (copied)", j->note[0] ? "  " : "", j->note);
}

static tl_status qz_fill(void *ctx, void *dst, size_t size) {
    qz_job *j = ctx;
    if (!j->convert) {
        memcpy(dst, j->src->data, size);
    } else {
        j->out = dst;
        atomic_store(&j->failed, 0);
        tl_threadpool_run(j->run->tp, qz_rows, j);
        if (atomic_load(&j->failed))
            return tl_err(TL_ERR_INVALID, "quantize: %s -> %s failed", tl_type_name(j->src->type),
                          tl_type_name(j->dst));
    }
    qz_progress(j, size);
    return TL_OK;
}

static int qz_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* block_count of the file's architecture; 0 if absent. */
static int qz_block_count(const gguf_file *f) {
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch) != TL_OK || arch.len > 200) return 0;
    char key[256];
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
    int64_t n;
    if (gguf_get_int(f, key, &n) != TL_OK || n <= 0 || n > 100000) return 0;
    return (int)n;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int npos = 0;
    int32_t n_threads = qz_default_threads();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (!args_int(argc, argv, &i, 1, 256, &n_threads)) return 2;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            fprintf(stderr, "tallow quantize: unknown option '%s'\n", argv[i]);
            quantize_usage(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            fprintf(stderr, "tallow quantize: too many arguments\n");
            quantize_usage(stderr);
            return 2;
        }
    }
    if (npos != 3) {
        quantize_usage(stderr);
        return 2;
    }
    const char *in_path = pos[0], *out_path = pos[1];
    const qz_target *tgt = qz_find_target(pos[2]);
    if (!tgt) {
        fprintf(stderr, "tallow quantize: unknown type '%s' (one of:", pos[2]);
        for (size_t i = 0; i < QZ_N_TARGETS; i++) fprintf(stderr, " %s", qz_targets[i].name);
        fprintf(stderr, ")\n");
        return 1;
    }

    gguf_file *f = NULL;
    if (gguf_open(in_path, &f) != TL_OK) {
        fprintf(stderr, "tallow quantize: %s\n", tl_last_error());
        return 1;
    }
    int rc = 1;
    int64_t nt = gguf_n_tensors(f);
    qz_job *jobs = calloc(nt > 0 ? (size_t)nt : 1, sizeof *jobs);
    qz_run run = {.n_tensors = (int)nt};
    gguf_writer *w = NULL;
    char *tmp_path = NULL;
    if (!jobs) {
        fprintf(stderr, "tallow quantize: out of memory\n");
        goto done;
    }

    /* plan: the type of every tensor, in file order */
    qz_mixstate ms = {.mix = tgt->mix, .has_output = gguf_find_tensor(f, "output.weight") != NULL,
                      .n_layer = qz_block_count(f)};
    int max_blk = -1;
    for (int64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char nm[512];
        snprintf(nm, sizeof nm, "%.*s", (int)(t->name.len < 511 ? t->name.len : 511), t->name.ptr);
        if (has_sub(nm, "attn_v.weight") || has_sub(nm, "attn_qkv.weight") ||
            has_sub(nm, "attn_kv_b.weight"))
            ms.n_wv++;
        int b;
        if (sscanf(nm, "blk.%d.", &b) == 1 && b > max_blk) max_blk = b;
    }
    if (ms.n_layer == 0) ms.n_layer = max_blk + 1;

    int64_t max_ne0 = 1;
    tl_type requant_from = TL_TYPE_F32;
    bool requant = false;
    for (int64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        qz_job *j = &jobs[i];
        j->run = &run;
        j->src = t;
        if (!(j->name = malloc(t->name.len + 1))) {
            fprintf(stderr, "tallow quantize: out of memory\n");
            goto done;
        }
        memcpy(j->name, t->name.ptr, t->name.len);
        j->name[t->name.len] = 0;
        j->dst = t->type;
        if (qz_is_weight(j->name, t->n_dims)) {
            tl_type want = qz_mix_type(&ms, tgt->base, j->name, t->ne[0]);
            if (!fits(want, t->ne[0])) {
                tl_type fb = quant_row_fallback(want, t->ne[0]);
                snprintf(j->note, sizeof j->note, "fallback: row %" PRId64 " not a multiple of %s's %d",
                         t->ne[0], tl_type_name(want), (int)tl_type_get(want)->blck);
                want = fb;
            }
            j->dst = want;
        }
        j->convert = j->dst != t->type;
        if (j->convert) {
            if (!quant_kernels_ref(t->type)) {
                fprintf(stderr, "tallow quantize: tensor '%s': cannot read type %s\n", j->name,
                        tl_type_name(t->type));
                goto done;
            }
            if (!quant_kernels_ref(j->dst)) {
                fprintf(stderr, "tallow quantize: tensor '%s': no quantizer for %s\n", j->name,
                        tl_type_name(j->dst));
                goto done;
            }
            if (tl_type_get(t->type)->quantized) {
                requant = true;
                requant_from = t->type;
            }
            if (t->ne[0] > max_ne0) max_ne0 = t->ne[0];
        }
        j->nrows = t->ne[1] * t->ne[2] * t->ne[3];
        j->src_row = tl_row_bytes(t->type, t->ne[0]);
        j->dst_row = tl_row_bytes(j->dst, t->ne[0]);
    }
    if (requant)
        fprintf(stderr, "tallow quantize: note: the input is already quantized (%s); requantizing "
                        "compounds the error\n", tl_type_name(requant_from));

    if (tl_threadpool_init(n_threads, &run.tp) != TL_OK) {
        fprintf(stderr, "tallow quantize: %s\n", tl_last_error());
        goto done;
    }
    int nth = tl_threadpool_size(run.tp);
    run.scratch = calloc((size_t)nth, sizeof *run.scratch);
    if (!run.scratch) {
        fprintf(stderr, "tallow quantize: out of memory\n");
        goto done;
    }
    for (int k = 0; k < nth; k++)
        if (!(run.scratch[k] = malloc((size_t)max_ne0 * sizeof(float)))) {
            fprintf(stderr, "tallow quantize: out of memory\n");
            goto done;
        }

    tl_status st = gguf_writer_init(&w);
    if (!st) st = gguf_writer_copy_kvs(w, f);
    if (!st) {
        gguf_writer_remove_kv(w, "general.file_type");
        st = gguf_writer_set_u32(w, "general.file_type", tgt->ftype);
    }
    if (!st && tl_type_get(tgt->base)->quantized && !gguf_find_kv(f, "general.quantization_version"))
        st = gguf_writer_set_u32(w, "general.quantization_version", 2);
    for (int64_t i = 0; i < nt && !st; i++) {
        qz_job *j = &jobs[i];
        size_t size = j->dst_row * (size_t)j->nrows;
        st = gguf_writer_add_tensor_fill(w, j->name, j->dst, j->src->n_dims, j->src->ne, size,
                                         qz_fill, j);
    }
    if (st) {
        fprintf(stderr, "tallow quantize: %s\n", tl_last_error());
        goto done;
    }

    size_t plen = strlen(out_path);
    if (!(tmp_path = malloc(plen + 5))) {
        fprintf(stderr, "tallow quantize: out of memory\n");
        goto done;
    }
    memcpy(tmp_path, out_path, plen);
    memcpy(tmp_path + plen, ".tmp", 5);
    fprintf(stderr, "tallow quantize: %s -> %s as %s, %d threads, %" PRId64 " tensors\n", in_path,
            out_path, tgt->name, nth, nt);
    if (gguf_writer_write(w, tmp_path) != TL_OK) {
        fprintf(stderr, "tallow quantize: %s\n", tl_last_error());
        remove(tmp_path);
        goto done;
    }
    if (rename(tmp_path, out_path) != 0) {
        fprintf(stderr, "tallow quantize: cannot rename %s to %s\n", tmp_path, out_path);
        remove(tmp_path);
        goto done;
    }
    fprintf(stderr, "tallow quantize: done: %.2f MB -> %.2f MB\n", run.mb_in, run.mb_out);
    rc = 0;

done:
    free(tmp_path);
    gguf_writer_free(w);
    if (run.scratch)
        for (int k = 0; k < tl_threadpool_size(run.tp); k++) free(run.scratch[k]);
    free(run.scratch);
    if (run.tp) tl_threadpool_free(run.tp);
    if (jobs)
        for (int64_t i = 0; i < nt; i++) free(jobs[i].name);
    free(jobs);
    gguf_close(f);
    return rc;
}
