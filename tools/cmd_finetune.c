/* tools/cmd_finetune: `tallow finetune -m BASE.gguf --lora-rank R --lora-alpha A
 * --targets q,k,v,o,gate,up,down (--text FILE | --chat FILE.jsonl) -o OUT.gguf`:
 * train a LoRA adapter on a frozen GGUF model (src/lora/lora_train.c over the
 * training framework: AdamW, warmup + cosine schedule, gradient clipping,
 * safetensors checkpoints with exact resume) and write it as a GGUF adapter
 * that `tallow run --lora OUT.gguf` applies. --device cuda trains on the GPU
 * with the base weights uploaded in their own GGUF type.
 *
 * --text: the file tokenized with the model's tokenizer; batches are random
 * windows of --ctx + 1 tokens from the first (1 - --val-frac) of it, the
 * held-out loss is measured on fixed windows of the rest. --chat: one JSON
 * object per line, {"messages": [{"role": ..., "content": ...}, ...]},
 * rendered with the model's chat template; only the assistant turns'
 * tokens are trained (each turn's span is where the conversation rendered
 * up to the turn with a generation prompt ends and the one through the
 * turn ends), one conversation per row, cut or padded to --ctx.
 * Uses the training framework's public API and the lora module directly. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/timer.h"
#include "commands.h"
#include "lora/lora_train.h"
#include "tallow_train.h"

static void finetune_usage(FILE *f) {
    fprintf(f,
            "usage: tallow finetune -m BASE.gguf (--text FILE | --chat FILE.jsonl) [-o OUT.gguf] [options]\n"
            "  --lora-rank R      adapter rank (default 8)\n"
            "  --lora-alpha A     alpha; s = A / R (default 2 R)\n"
            "  --rslora           s = A / sqrt(R)\n"
            "  --targets LIST     of q,k,v,o,gate,up,down or all (default all)\n"
            "  -o FILE            the GGUF adapter to write (default lora.gguf)\n"
            "  --steps N          optimizer steps (default 100)\n"
            "  --batch B          sequences per step (default 4)\n"
            "  --ctx T            tokens per sequence (default 128)\n"
            "  --lr X             peak learning rate (default 1e-3), AdamW\n"
            "  --warmup N         linear warmup steps, then cosine to lr/10 (default 10)\n"
            "  --weight-decay X   AdamW decoupled decay (default 0)\n"
            "  --clip X           global gradient-norm clip (default 1; 0 = off)\n"
            "  --val-frac X       held-out fraction of the data (default 0.1)\n"
            "  --eval-every N     held-out loss every N steps (default 0: at the start and end only)\n"
            "  --eval-batches N   batches per held-out loss (default 4)\n"
            "  --checkpoint FILE  save adapter + optimizer state here every --save-every steps and at the end\n"
            "  --save-every N     (default 50)\n"
            "  --resume FILE      continue from a checkpoint (same base, data and options)\n"
            "  --seed N           initialisation and batch order (default 1)\n"
            "  -t N               threads (default 2)\n" ARGS_TRAIN_USAGE
            "                     (cuda: the base weights are uploaded in their GGUF type: F32, F16, BF16,\n"
            "                     Q4_0, Q4_1, Q8_0, Q4_K, Q6_K)\n");
}

typedef struct ft_opts {
    const char *model, *text, *chat, *out, *ckpt, *resume, *targets;
    int32_t rank, steps, batch, ctx, warmup, eval_every, eval_batches, save_every, threads;
    float alpha, lr, wd, clip, val_frac;
    uint64_t seed;
    bool rslora;
    tt_device dev;
    tt_matmul_prec mm;
} ft_opts;

/* Chat rows: [n][ctx] ids and targets (-100 outside assistant turns). */
typedef struct ft_rows {
    int32_t *ids, *tg;
    int64_t n, n_train, ctx;
} ft_rows;

typedef struct ft_data {
    tt_dataset text; /* --text */
    ft_rows chat;    /* --chat */
    bool is_chat;
} ft_data;

static bool ft_parse(int argc, char **argv, ft_opts *o) {
    *o = (ft_opts){.out = "lora.gguf", .targets = "all", .rank = 8, .alpha = -1, .steps = 100, .batch = 4,
                   .ctx = 128, .warmup = 10, .eval_batches = 4, .save_every = 50, .threads = 2, .lr = 1e-3f,
                   .clip = 1.0f, .val_frac = 0.1f, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) ok = args_str(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--text")) ok = args_str(argc, argv, &i, &o->text);
        else if (!strcmp(a, "--chat")) ok = args_str(argc, argv, &i, &o->chat);
        else if (!strcmp(a, "-o")) ok = args_str(argc, argv, &i, &o->out);
        else if (!strcmp(a, "--checkpoint")) ok = args_str(argc, argv, &i, &o->ckpt);
        else if (!strcmp(a, "--resume")) ok = args_str(argc, argv, &i, &o->resume);
        else if (!strcmp(a, "--targets")) ok = args_str(argc, argv, &i, &o->targets);
        else if (!strcmp(a, "--lora-rank")) ok = args_int(argc, argv, &i, 1, 4096, &o->rank);
        else if (!strcmp(a, "--lora-alpha")) ok = args_float(argc, argv, &i, 1e-6, 1e6, &o->alpha);
        else if (!strcmp(a, "--rslora")) o->rslora = true;
        else if (!strcmp(a, "--steps")) ok = args_int(argc, argv, &i, 0, 1 << 30, &o->steps);
        else if (!strcmp(a, "--batch")) ok = args_int(argc, argv, &i, 1, 4096, &o->batch);
        else if (!strcmp(a, "--ctx")) ok = args_int(argc, argv, &i, 2, 1 << 16, &o->ctx);
        else if (!strcmp(a, "--lr")) ok = args_float(argc, argv, &i, 0, 10, &o->lr);
        else if (!strcmp(a, "--warmup")) ok = args_int(argc, argv, &i, 0, 1 << 30, &o->warmup);
        else if (!strcmp(a, "--weight-decay")) ok = args_float(argc, argv, &i, 0, 10, &o->wd);
        else if (!strcmp(a, "--clip")) ok = args_float(argc, argv, &i, 0, 1e6, &o->clip);
        else if (!strcmp(a, "--val-frac")) ok = args_float(argc, argv, &i, 0.001, 0.9, &o->val_frac);
        else if (!strcmp(a, "--eval-every")) ok = args_int(argc, argv, &i, 0, 1 << 30, &o->eval_every);
        else if (!strcmp(a, "--eval-batches")) ok = args_int(argc, argv, &i, 1, 1 << 20, &o->eval_batches);
        else if (!strcmp(a, "--save-every")) ok = args_int(argc, argv, &i, 1, 1 << 30, &o->save_every);
        else if (!strcmp(a, "--seed")) ok = args_u64(argc, argv, &i, &o->seed);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &o->threads);
        else if (args_train_flag(argc, argv, &i, &o->dev, &o->mm, &ok)) (void)0; /* ok says whether it parsed */
        else {
            fprintf(stderr, "tallow finetune: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) return false;
    }
    if (!o->model || !o->text == !o->chat) {
        fprintf(stderr, "tallow finetune: need -m BASE.gguf and exactly one of --text FILE / --chat FILE.jsonl\n");
        return false;
    }
    if (o->alpha < 0) o->alpha = 2.0f * (float)o->rank;
    return true;
}

/* ---- chat data ------------------------------------------------------------------ */

/* Tokens of messages[0..n) rendered (with a generation prompt if gen). */
static tl_status chat_tokens(const tl_model *m, const tl_chat_message *msg, int32_t n, bool gen, int32_t **toks,
                             int32_t *nt) {
    char *text = NULL;
    size_t len = 0;
    tl_status s = tl_chat_apply_template(m, NULL, msg, n, gen, &text, &len);
    if (s) return s;
    int32_t cap = (int32_t)len + 16;
    *toks = malloc((size_t)cap * sizeof **toks);
    s = *toks ? tl_tokenize(m, text, len, false, true, *toks, cap, nt) : TL_ERR_NOMEM;
    free(text);
    return s;
}

/* One conversation -> one row of ctx + 1 tokens' ids/targets. */
static tl_status chat_row(const tl_model *m, const cJSON *msgs, int64_t ctx, int32_t *ids, int32_t *tg, int lineno) {
    int32_t n = cJSON_GetArraySize(msgs);
    tl_chat_message *mv = calloc((size_t)(n ? n : 1), sizeof *mv);
    int32_t *full = NULL, *part = NULL, nf = 0;
    tl_status s = mv ? TL_OK : TL_ERR_NOMEM;
    for (int32_t i = 0; i < n && !s; i++) {
        const cJSON *e = cJSON_GetArrayItem(msgs, i), *r = cJSON_GetObjectItem(e, "role"),
                    *c = cJSON_GetObjectItem(e, "content");
        if (!cJSON_IsString(r) || !cJSON_IsString(c))
            s = tl_err(TL_ERR_FORMAT, "line %d: message %d needs string \"role\" and \"content\"", lineno, i);
        else mv[i] = (tl_chat_message){r->valuestring, c->valuestring};
    }
    if (!s) s = chat_tokens(m, mv, n, false, &full, &nf);
    for (int64_t t = 0; t < ctx; t++) {
        ids[t] = t < nf ? full[t] : 0;
        tg[t] = -100;
    }
    int trained = 0;
    for (int32_t i = 0; i < n && !s; i++) { /* assistant turn i: its tokens are [start, end) */
        if (strcmp(mv[i].role, "assistant")) continue;
        int32_t start, end;
        if ((s = chat_tokens(m, mv, i, true, &part, &start))) break;
        free(part);
        part = NULL;
        if ((s = chat_tokens(m, mv, i + 1, false, &part, &end))) break;
        free(part);
        part = NULL;
        for (int32_t p = start; p < end && p < nf; p++)
            if (p >= 1 && p - 1 < ctx) { /* position p - 1 predicts token p */
                tg[p - 1] = full[p];
                trained++;
            }
    }
    if (!s && !trained)
        s = tl_err(TL_ERR_FORMAT, "line %d: no assistant tokens within the first %lld tokens", lineno, (long long)ctx);
    free(full);
    free(part);
    free(mv);
    return s;
}

static tl_status chat_load(const tl_model *m, const char *path, int64_t ctx, double val_frac, ft_rows *r) {
    size_t len;
    char *buf = args_read_file(path, &len);
    if (!buf) return tl_err(TL_ERR_IO, "cannot read '%s'", path);
    int64_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
    r->ids = malloc((size_t)(cap * ctx) * sizeof *r->ids);
    r->tg = malloc((size_t)(cap * ctx) * sizeof *r->tg);
    r->ctx = ctx;
    tl_status s = r->ids && r->tg ? TL_OK : TL_ERR_NOMEM;
    int lineno = 0;
    for (char *line = buf, *next; !s && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lineno++;
        if (!line[strspn(line, " \t\r")]) continue;
        cJSON *j = cJSON_Parse(line);
        const cJSON *msgs = j ? cJSON_GetObjectItem(j, "messages") : NULL;
        if (!cJSON_IsArray(msgs)) s = tl_err(TL_ERR_FORMAT, "%s line %d: not {\"messages\": [...]}", path, lineno);
        else s = chat_row(m, msgs, ctx, r->ids + r->n * ctx, r->tg + r->n * ctx, lineno);
        if (s) s = tl_err_prefix(s, "%s: ", path);
        else r->n++;
        cJSON_Delete(j);
    }
    free(buf);
    r->n_train = r->n - (int64_t)ceil((double)r->n * val_frac);
    if (!s && (r->n_train < 1 || r->n_train == r->n))
        s = tl_err(TL_ERR_INVALID, "%s: %lld conversations do not split into training and held-out rows", path,
                   (long long)r->n);
    return s;
}

/* ---- batches and steps -------------------------------------------------------------- */

static tl_status ft_batch(const ft_data *d, bool val, tt_rng *rng, int64_t k, int64_t B, int64_t T, int32_t *ids,
                          int32_t *tg) {
    if (!d->is_chat)
        return rng ? tt_dataset_batch(&d->text, val, rng, B, T, ids, tg)
                   : tt_dataset_batch_at(&d->text, val, k, B, T, ids, tg);
    const ft_rows *r = &d->chat;
    int64_t lo = val ? r->n_train : 0, n = val ? r->n - r->n_train : r->n_train;
    for (int64_t b = 0; b < B; b++) {
        int64_t row = lo + (rng ? (int64_t)(tt_rng_next(rng) % (uint64_t)n) : (k * B + b) % n);
        memcpy(ids + b * T, r->ids + row * r->ctx, (size_t)T * sizeof *ids);
        memcpy(tg + b * T, r->tg + row * r->ctx, (size_t)T * sizeof *tg);
    }
    return TL_OK;
}

static tl_status ft_eval(tt_ctx *c, lora_trainee *t, const ft_data *d, const ft_opts *o, int32_t *ids, int32_t *tg,
                         double *loss) {
    bool prev = tt_set_grad_enabled(c, false);
    double sum = 0;
    tl_status s = TL_OK;
    for (int64_t k = 0; k < o->eval_batches && !s; k++) {
        if ((s = ft_batch(d, true, NULL, k, o->batch, o->ctx, ids, tg))) break;
        tt_tensor *l = lora_train_loss(c, t, ids, tg, o->batch, o->ctx);
        if (!l) s = TL_ERR_INVALID;
        else sum += tt_get(l, 0);
        tt_ctx_reset(c);
    }
    tt_set_grad_enabled(c, prev);
    *loss = sum / o->eval_batches;
    return s;
}

static tl_status ft_train(const tl_model *m, const ft_opts *o, const ft_data *d) {
    lora_train_config cfg = {.rank = o->rank, .alpha = o->alpha, .rslora = o->rslora, .seed = o->seed};
    if (!lora_parse_targets(o->targets, &cfg.targets))
        return tl_err(TL_ERR_INVALID, "--targets '%s': use q,k,v,o,gate,up,down or all", o->targets);
    lora_trainee t;
    tl_status s = lora_train_init(&t, m, &cfg);
    if (s) return s;
    if ((s = lora_train_to(&t, o->dev))) {
        lora_train_free(&t);
        return s;
    }
    tt_ctx *c = NULL;
    tt_optim opt;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, o->lr);
    oc.weight_decay = o->wd;
    memset(&opt, 0, sizeof opt);
    int32_t *ids = malloc((size_t)o->batch * (size_t)o->ctx * sizeof *ids);
    int32_t *tg = malloc((size_t)o->batch * (size_t)o->ctx * sizeof *tg);
    if (!ids || !tg) s = tl_err(TL_ERR_NOMEM, "out of memory");
    if (!s) s = tt_ctx_init(o->threads, &c);
    if (!s) tt_ctx_set_matmul_prec(c, o->mm);
    if (!s) s = tt_optim_init(&opt, &oc, &t.reg.params);
    tt_rng rng;
    tt_rng_seed(&rng, o->seed ^ 0x5eedULL);
    int64_t step = 0;
    if (!s && o->resume) {
        s = tt_checkpoint_load(o->resume, &t.reg, &opt, &step, &rng);
        if (!s) fprintf(stderr, "resumed %s at step %lld\n", o->resume, (long long)step);
    }
    tt_schedule sch = {.kind = TT_SCHED_COSINE, .lr_max = o->lr, .lr_min = o->lr / 10, .warmup = o->warmup,
                       .total = o->steps};
    printf("adapter: rank %d, alpha %g%s, %lld parameters over %d weights, device %s\n", o->rank, o->alpha,
           o->rslora ? " (rsLoRA)" : "", (long long)tt_params_count(&t.reg.params), t.reg.params.n / 2,
           tt_device_name(o->dev));
    double vl;
    if (!s && !(s = ft_eval(c, &t, d, o, ids, tg, &vl))) printf("step %lld: held-out loss %.4f\n", (long long)step, vl);
    int64_t t0 = tl_time_us();
    for (; !s && step < o->steps; step++) {
        if ((s = ft_batch(d, false, &rng, 0, o->batch, o->ctx, ids, tg))) break;
        tt_params_zero_grad(&t.reg.params);
        tt_tensor *l = lora_train_loss(c, &t, ids, tg, o->batch, o->ctx);
        if (!l) {
            s = tl_err_prefix(TL_ERR_INVALID, "step %lld: ", (long long)step);
            break;
        }
        double loss = tt_get(l, 0);
        s = tt_backward(c, l);
        tt_ctx_reset(c);
        if (s) break;
        double lr = tt_schedule_lr(&sch, step);
        if ((s = tt_optim_step_clipped(&opt, lr, o->clip))) break;
        double gn = tt_optim_last_norm(&opt);
        printf("step %lld: loss %.4f, grad norm %.3f, lr %.2e, %.3f s\n", (long long)step + 1, loss, gn, lr,
               (tl_time_us() - t0) / 1e6);
        fflush(stdout);
        if (o->eval_every && (step + 1) % o->eval_every == 0 && !(s = ft_eval(c, &t, d, o, ids, tg, &vl)))
            printf("step %lld: held-out loss %.4f\n", (long long)step + 1, vl);
        if (o->ckpt && (step + 1) % o->save_every == 0 && !s) s = tt_checkpoint_save(o->ckpt, &t.reg, &opt, step + 1, &rng);
    }
    if (!s && !(s = ft_eval(c, &t, d, o, ids, tg, &vl))) printf("step %lld: held-out loss %.4f\n", (long long)step, vl);
    if (!s && o->ckpt) s = tt_checkpoint_save(o->ckpt, &t.reg, &opt, step, &rng);
    if (!s) s = lora_train_export(&t, o->out, o->text ? o->text : o->chat);
    if (!s) printf("wrote %s (tallow run -m %s --lora %s)\n", o->out, o->model, o->out);
    free(ids);
    free(tg);
    tt_optim_free(&opt);
    tt_ctx_free(c);
    lora_train_free(&t);
    return s;
}

int cmd_finetune(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            finetune_usage(stdout);
            return 0;
        }
    ft_opts o;
    if (!ft_parse(argc, argv, &o)) {
        finetune_usage(stderr);
        return 2;
    }
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    ft_data d;
    memset(&d, 0, sizeof d);
    d.is_chat = o.chat != NULL;
    tl_status s = tl_model_load(o.model, &mp, &m);
    if (!s && o.text) s = tt_dataset_load_tokenized(&d.text, o.text, o.model, o.val_frac);
    if (!s && o.chat) s = chat_load(m, o.chat, o.ctx, o.val_frac, &d.chat);
    if (!s && o.text && d.text.n - d.text.n_train <= o.ctx + 1)
        s = tl_err(TL_ERR_INVALID, "%s: the held-out part (%lld tokens) is shorter than --ctx + 1", o.text,
                   (long long)(d.text.n - d.text.n_train));
    if (!s) s = ft_train(m, &o, &d);
    if (s) fprintf(stderr, "tallow finetune: %s\n", tl_last_error());
    tt_dataset_free(&d.text);
    free(d.chat.ids);
    free(d.chat.tg);
    tl_model_free(m);
    return s ? 1 : 0;
}
