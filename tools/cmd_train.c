/* tools/cmd_train: `tallow train --arch gpt2|llama --text FILE [options]`.
 *
 * Trains a GPT-2-style or Llama-style LM on a text file, byte level or
 * tokenized with --tokenizer (a GGUF's vocabulary or a tokenizer.json; the
 * checkpoint records which, for `tallow export`), with
 * AdamW, warmup + cosine LR, grad clipping; prints a live progress line
 * (step, loss, lr, tokens/s, ETA), evaluates validation loss and prints a
 * short sample every --eval-every steps, and writes into --out DIR:
 * log.csv (step,lr,train_loss,val_loss,grad_norm,tok_per_s,cpu_ms: process CPU
 * time of the step, all threads), loss.png (the loss curve with axes, ticks
 * and a legend: train blue, validation red), ckpt.safetensors (model +
 * optimizer + step + RNG; --resume continues from it bit-identically).
 * Ctrl-C (SIGINT) ends the run after the step in progress, writing the
 * checkpoint, log and plot first; a second Ctrl-C kills at once. The handler
 * only sets a flag (the library installs no handlers).
 * Uses the training framework (src/train) and io/plot directly.
 * Owns: the model, optimizer, dataset of the run. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "base/cpu.h"
#include "base/timer.h"
#include "commands.h"
#include "io/plot.h"
#include "text/tokenizer.h"
#include "tallow_train.h"

/* a public-domain text the repository ships, for a first run */
#define TRAIN_SAMPLE_TEXT "examples/data/austen-sense.txt"

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: tallow train --text FILE [options]   (any UTF-8 text, e.g. " TRAIN_SAMPLE_TEXT ")\n"
            "  --arch gpt2|llama   model family (default llama)\n"
            "  --tokenizer FILE    tokenize with a GGUF model's vocabulary or an HF tokenizer.json\n"
            "                      (vocab = its size; default: bytes, vocab 256)\n"
            "  --layers N --dim N --heads N --kv-heads N   model shape (default 4, 128, 4, heads)\n"
            "  --ctx N             context / training sequence length (default 128)\n"
            "  --batch N           sequences per step (default 8)\n"
            "  --accum N           micro-batches of --batch per optimizer step (default 1)\n"
            ARGS_TRAIN_USAGE
            "  --steps N           optimizer steps (default 500)\n"
            "  --lr X --min-lr X --warmup N   peak lr (1e-3), final lr (lr/10), warmup steps (steps/20)\n"
            "  --wd X --clip X --dropout X    weight decay (0.1), grad-norm clip (1.0), dropout (0)\n"
            "  --val-frac X        tail fraction held out for validation (0.1)\n"
            "  --eval-every N --eval-batches N   validation cadence (100) and size (8)\n"
            "  --ckpt-every N      also checkpoint every N steps (0: only at the end)\n"
            "  --sample-len N      tokens of sample text printed at each eval (64; 0 off)\n"
            "  -t, --threads N --seed N --out DIR (default train-out) --resume CKPT\n"
            "Ctrl-C stops after the current step and writes the checkpoint (exit status 130).\n");
}

static volatile sig_atomic_t train_sigint;

static void train_on_sigint(int sig) {
    (void)sig;
    train_sigint = 1;
}

/* ---- loss curve ------------------------------------------------------------ */
typedef struct pt {
    int64_t step;
    double v;
} pt;

/* the loss curve: train loss per step, validation loss at each eval */
static tl_status write_plot(const char *path, const pt *tr, int ntr, const pt *va, int nva, int64_t steps) {
    double *xy = malloc(sizeof(double) * 2 * (size_t)(ntr + nva + 1));
    if (!xy) return tl_err(TL_ERR_NOMEM, "train: out of memory for the plot");
    double *tx = xy, *ty = tx + ntr, *vx = ty + ntr, *vy = vx + nva;
    for (int i = 0; i < ntr; i++) tx[i] = (double)tr[i].step, ty[i] = tr[i].v;
    for (int i = 0; i < nva; i++) vx[i] = (double)va[i].step, vy[i] = va[i].v;
    plot_series ser[2] = {
        {"train", tx, ty, ntr, {31, 90, 200}, false},
        {"validation", vx, vy, nva, {220, 40, 40}, true},
    };
    plot_spec spec = {800, 500, "step", "loss (cross-entropy, nats)", 0, (double)steps};
    tl_status st = plot_write_png(path, &spec, ser, nva ? 2 : 1);
    free(xy);
    return st;
}

/* ---- sampling ------------------------------------------------------------- */
static void put_token(const tt_dataset *d, int32_t tok) {
    if (d->tok) { /* the tokenizer's text of the token */
        char *txt;
        size_t len;
        if (tok_decode(d->tok, &tok, 1, false, &txt, &len) != TL_OK) return;
        for (size_t i = 0; i < len; i++) fputc(txt[i] == '\n' ? ' ' : txt[i], stderr);
        free(txt);
        return;
    }
    fputc(tok >= 32 && tok < 127 ? tok : (tok == '\n' ? ' ' : '?'), stderr);
}

static void print_sample(tt_ctx *c, tt_model *m, const tt_dataset *d, int n, tt_rng *r) {
    int64_t ctx = m->cfg.ctx, V = m->cfg.vocab;
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(ctx + n));
    double *p = malloc(sizeof(double) * (size_t)V);
    float *hrow = tt_device_of(m->tok_emb) != TT_CPU ? malloc(sizeof(float) * (size_t)V) : NULL;
    if (!buf || !p) {
        free(buf);
        free(p);
        free(hrow);
        return;
    }
    int64_t len = 8 < ctx ? 8 : ctx;
    for (int64_t i = 0; i < len; i++) buf[i] = d->tokens[d->n_train + i]; /* prompt: start of validation text */
    bool prev = tt_set_grad_enabled(c, false);
    bool tr = m->training;
    m->training = false;
    fprintf(stderr, "  sample: \"");
    for (int64_t i = 0; i < len; i++) put_token(d, buf[i]);
    fprintf(stderr, "|");
    for (int k = 0; k < n; k++) {
        int64_t T = len < ctx ? len : ctx;
        tt_tensor *lg = tt_model_forward(c, m, buf + len - T, 1, T);
        if (!lg) break;
        const float *row = (const float *)tt_data(lg) + (T - 1) * V;
        if (tt_device_of(lg) != TT_CPU) { /* the last row, to the host */
            tt_tensor *last = tt_narrow(c, tt_reshape(c, lg, 1, (int64_t[]){T * V}), 0, (T - 1) * V, V);
            tt_tensor *h = tt_new(TT_F32, 1, &V);
            if (!last || !h || !hrow || tt_copy_across(h, last) != TL_OK) {
                tt_free(h);
                break;
            }
            memcpy(hrow, tt_data(h), sizeof(float) * (size_t)V);
            tt_free(h);
            row = hrow;
        }
        double mx = -1e30, sum = 0;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, row[v]);
        for (int64_t v = 0; v < V; v++) sum += p[v] = exp((row[v] - mx) / 0.8);
        double u = tt_rng_uniform(r) * sum;
        int32_t tok = 0;
        for (; tok < V - 1 && (u -= p[tok]) > 0; tok++) {
        }
        buf[len++] = tok;
        put_token(d, tok);
        tt_ctx_reset(c);
    }
    fprintf(stderr, "\"\n");
    m->training = tr;
    tt_set_grad_enabled(c, prev);
    free(buf);
    free(p);
    free(hrow);
}

static void fmt_eta(double s, char *out, size_t n) {
    if (s < 0 || s > 1e7) s = 0;
    int h = (int)(s / 3600), mi = (int)(s / 60) % 60, se = (int)s % 60;
    if (h) snprintf(out, n, "%dh%02dm", h, mi);
    else snprintf(out, n, "%dm%02ds", mi, se);
}

int cmd_train(int argc, char **argv) {
    const char *text = NULL, *out = "train-out", *resume = NULL, *arch = "llama", *tokenizer = NULL;
    tt_device dev = TT_CPU;
    tt_matmul_prec mmp = TT_MM_F32;
    int32_t layers = 4, dim = 128, heads = 4, kv_heads = 0, ctxlen = 128, batch = 8, steps = 500, warmup = -1;
    int32_t accum = 1;
    int32_t eval_every = 100, eval_batches = 8, ckpt_every = 0, threads = 0, sample_len = 64;
    float lr = 1e-3f, min_lr = -1, wd = 0.1f, clip = 1.0f, dropout = 0, val_frac = 0.1f;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            train_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--text")) ok = args_str(argc, argv, &i, &text);
        else if (!strcmp(a, "--out")) ok = args_str(argc, argv, &i, &out);
        else if (!strcmp(a, "--resume")) ok = args_str(argc, argv, &i, &resume);
        else if (!strcmp(a, "--arch")) ok = args_str(argc, argv, &i, &arch);
        else if (args_train_flag(argc, argv, &i, &dev, &mmp, &ok)) (void)0; /* ok says whether it parsed */
        else if (!strcmp(a, "--tokenizer")) ok = args_str(argc, argv, &i, &tokenizer);
        else if (!strcmp(a, "--layers")) ok = args_int(argc, argv, &i, 0, 256, &layers);
        else if (!strcmp(a, "--dim")) ok = args_int(argc, argv, &i, 8, 16384, &dim);
        else if (!strcmp(a, "--heads")) ok = args_int(argc, argv, &i, 1, 256, &heads);
        else if (!strcmp(a, "--kv-heads")) ok = args_int(argc, argv, &i, 1, 256, &kv_heads);
        else if (!strcmp(a, "--ctx")) ok = args_int(argc, argv, &i, 2, 4096, &ctxlen);
        else if (!strcmp(a, "--batch")) ok = args_int(argc, argv, &i, 1, 4096, &batch);
        else if (!strcmp(a, "--accum")) ok = args_int(argc, argv, &i, 1, 4096, &accum);
        else if (!strcmp(a, "--steps")) ok = args_int(argc, argv, &i, 1, 100000000, &steps);
        else if (!strcmp(a, "--warmup")) ok = args_int(argc, argv, &i, 0, 100000000, &warmup);
        else if (!strcmp(a, "--eval-every")) ok = args_int(argc, argv, &i, 0, 100000000, &eval_every);
        else if (!strcmp(a, "--eval-batches")) ok = args_int(argc, argv, &i, 1, 100000, &eval_batches);
        else if (!strcmp(a, "--ckpt-every")) ok = args_int(argc, argv, &i, 0, 100000000, &ckpt_every);
        else if (!strcmp(a, "--sample-len")) ok = args_int(argc, argv, &i, 0, 100000, &sample_len);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 0, 1024, &threads);
        else if (!strcmp(a, "--lr")) ok = args_float(argc, argv, &i, 0, 10, &lr);
        else if (!strcmp(a, "--min-lr")) ok = args_float(argc, argv, &i, 0, 10, &min_lr);
        else if (!strcmp(a, "--wd")) ok = args_float(argc, argv, &i, 0, 10, &wd);
        else if (!strcmp(a, "--clip")) ok = args_float(argc, argv, &i, 0, 1e9, &clip);
        else if (!strcmp(a, "--dropout")) ok = args_float(argc, argv, &i, 0, 0.99, &dropout);
        else if (!strcmp(a, "--val-frac")) ok = args_float(argc, argv, &i, 0.001, 0.9, &val_frac);
        else if (!strcmp(a, "--seed")) ok = args_u64(argc, argv, &i, &seed);
        else {
            fprintf(stderr, "tallow train: unknown option '%s'\n", a);
            train_usage(stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!text) {
        fprintf(stderr, "tallow train: need --text FILE, the text to train on (e.g. --text %s)\n", TRAIN_SAMPLE_TEXT);
        train_usage(stderr);
        return 2;
    }
    if (access(text, R_OK) != 0) {
        fprintf(stderr, "tallow train: cannot read --text '%s': %s (pass any UTF-8 text file; the repository ships %s)\n",
                text, strerror(errno), TRAIN_SAMPLE_TEXT);
        return 1;
    }
    tt_arch ar;
    if (!strcmp(arch, "gpt2")) ar = TT_ARCH_GPT2;
    else if (!strcmp(arch, "llama")) ar = TT_ARCH_LLAMA;
    else {
        fprintf(stderr, "tallow train: --arch must be gpt2 or llama\n");
        return 2;
    }
    if (warmup < 0) warmup = steps / 20;
    if (min_lr < 0) min_lr = lr / 10;
    if (threads <= 0) threads = tl_cpu_count();
    mkdir(out, 0755);

    int rc = 1;
    tt_dataset d = {0};
    tt_ctx *c = NULL;
    tt_model m = {0};
    tt_optim o = {0};
    tt_trainer tr = {0};
    FILE *csv = NULL;
    pt *ptr = NULL, *pva = NULL;
    int ntr = 0, nva = 0;
    char path[4096], rec[4096] = "";
    int64_t rec_vocab = 256;
    /* a resumed run tokenizes with the tokenizer its checkpoint records unless told otherwise */
    if (resume && tt_checkpoint_read_tokenizer(resume, rec, sizeof rec, &rec_vocab) != TL_OK) goto fail;
    if (!tokenizer && rec[0]) tokenizer = rec;
    if (tokenizer ? tt_dataset_load_tokenized(&d, text, tokenizer, val_frac) != TL_OK
                  : tt_dataset_load_bytes(&d, text, val_frac) != TL_OK)
        goto fail;
    tt_model_config cfg = tt_model_config_default(ar, d.vocab, ctxlen, dim, layers, heads);
    if (kv_heads) cfg.kv_heads = kv_heads;
    cfg.dropout = dropout;
    if (resume && tt_checkpoint_read_config(resume, &cfg) != TL_OK) goto fail;
    if (cfg.vocab != d.vocab) {
        tl_err(TL_ERR_INVALID, "checkpoint vocab %lld != dataset vocab %lld (%s)", (long long)cfg.vocab,
               (long long)d.vocab, tokenizer ? tokenizer : "bytes");
        goto fail;
    }
    if (tt_ctx_init(threads, &c) != TL_OK) goto fail;
    if (tt_model_init(&m, &cfg, seed) != TL_OK) goto fail;
    if (tt_model_to(&m, dev) != TL_OK) goto fail;
    tt_ctx_set_matmul_prec(c, mmp);
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, lr);
    oc.weight_decay = wd;
    oc.beta2 = 0.99;
    if (tt_optim_init(&o, &oc, &m.params) != TL_OK) goto fail;
    if (tt_trainer_init(&tr, c, &m, &o, &d, batch, cfg.ctx, seed + 1) != TL_OK) goto fail;
    tr.clip = clip;
    tr.accum = accum;
    tr.sched = (tt_schedule){TT_SCHED_COSINE, lr, min_lr, warmup, steps, 0, 0};
    if (resume) {
        if (tt_checkpoint_load(resume, &m, &o, &tr.step, &tr.rng) != TL_OK) goto fail;
        fprintf(stderr, "resumed from %s at step %lld\n", resume, (long long)tr.step);
        if (tr.step >= steps) {
            tl_err(TL_ERR_INVALID, "the checkpoint is at step %lld: nothing to do for --steps %d (raise it)",
                   (long long)tr.step, steps);
            goto fail;
        }
    }
    fprintf(stderr, "%s: %lld params (%lld layers, dim %lld, %lld heads / %lld kv, ffn %lld, ctx %lld, vocab %lld), "
                    "%lld train / %lld val tokens (%s), batch %d, %d threads, device %s\n",
            cfg.arch == TT_ARCH_GPT2 ? "gpt2" : "llama", (long long)tt_params_count(&m.params), (long long)cfg.layers,
            (long long)cfg.dim, (long long)cfg.heads, (long long)cfg.kv_heads, (long long)cfg.ffn, (long long)cfg.ctx,
            (long long)cfg.vocab, (long long)d.n_train, (long long)(d.n - d.n_train),
            d.tok_path ? d.tok_path : "bytes", batch, threads, tt_device_name(dev));
    snprintf(path, sizeof path, "%s/log.csv", out);
    csv = fopen(path, resume ? "a" : "w");
    if (!csv) {
        fprintf(stderr, "tallow train: cannot write %s\n", path);
        goto fail;
    }
    if (!resume) fprintf(csv, "step,lr,train_loss,val_loss,grad_norm,tok_per_s,cpu_ms\n");
    ptr = malloc(sizeof(pt) * (size_t)(steps + 1));
    pva = malloc(sizeof(pt) * (size_t)(steps / (eval_every > 0 ? eval_every : steps + 1) + 3));
    if (!ptr || !pva) goto fail;
    tt_rng srng;
    tt_rng_seed(&srng, seed + 7);
    bool tty = isatty(2);
    int64_t t0 = tl_time_us(), start_step = tr.step;
    double tok_s = 0, ema = 0;
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = train_on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills at once */
    train_sigint = 0;
    sigaction(SIGINT, &sa, &old_sa);
    bool interrupted = false;
    while (tr.step < steps) {
        if (train_sigint) {
            interrupted = true;
            break;
        }
        int64_t ts = tl_time_us();
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double loss, gn, cur_lr = tt_schedule_lr(&tr.sched, tr.step);
        if (tt_trainer_step(&tr, &loss, &gn) != TL_OK) goto fail;
        double dt = (double)(tl_time_us() - ts) / 1e6;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
        tok_s = (double)(batch * accum * cfg.ctx) / (dt > 0 ? dt : 1e-9);
        ema = tr.step - start_step == 1 ? loss : 0.9 * ema + 0.1 * loss;
        ptr[ntr++] = (pt){tr.step, loss};
        double elapsed = (double)(tl_time_us() - t0) / 1e6;
        double per = elapsed / (double)(tr.step - start_step);
        char eta[32];
        fmt_eta(per * (double)(steps - tr.step), eta, sizeof eta);
        bool eval = eval_every > 0 && (tr.step % eval_every == 0 || tr.step == steps);
        double vl = NAN;
        if (eval) {
            if (tt_trainer_eval(&tr, eval_batches, &vl) != TL_OK) goto fail;
            pva[nva++] = (pt){tr.step, vl};
        }
        char vbuf[32] = "";
        if (eval) snprintf(vbuf, sizeof vbuf, "%.6f", vl);
        fprintf(csv, "%lld,%.6g,%.6f,%s,%.4f,%.1f,%.1f\n", (long long)tr.step, cur_lr, loss, vbuf, gn, tok_s, cpu_ms);
        if (tty || eval || tr.step % 50 == 0 || tr.step == steps)
            fprintf(stderr, "%sstep %lld/%d | loss %.4f (avg %.4f) | lr %.2e | %.0f tok/s | ETA %s%s", tty ? "\r" : "",
                    (long long)tr.step, steps, loss, ema, cur_lr, tok_s, eta, tty ? "   " : "\n");
        if (eval) {
            fprintf(stderr, "%sstep %lld: val loss %.4f (train avg %.4f)\n", tty ? "\n" : "", (long long)tr.step, vl,
                    ema);
            if (sample_len > 0 && !train_sigint) print_sample(c, &m, &d, sample_len, &srng);
        }
        if (ckpt_every > 0 && tr.step % ckpt_every == 0) {
            snprintf(path, sizeof path, "%s/ckpt.safetensors", out);
            if (tt_checkpoint_save_tokenizer(path, &m, &o, tr.step, &tr.rng, d.tok_path, d.vocab) != TL_OK) goto fail;
        }
        fflush(csv);
    }
    sigaction(SIGINT, &old_sa, NULL);
    if (tty) fprintf(stderr, "\n");
    if (interrupted) fprintf(stderr, "interrupted at step %lld of %d\n", (long long)tr.step, steps);
    snprintf(path, sizeof path, "%s/ckpt.safetensors", out);
    if (tt_checkpoint_save_tokenizer(path, &m, &o, tr.step, &tr.rng, d.tok_path, d.vocab) != TL_OK) goto fail;
    fprintf(stderr, "checkpoint: %s%s\n", path, interrupted ? " (--resume it to continue)" : "");
    snprintf(path, sizeof path, "%s/loss.png", out);
    if (ntr > 0 && write_plot(path, ptr, ntr, pva, nva, steps) != TL_OK) goto fail;
    if (ntr > 0) fprintf(stderr, "loss curve: %s; log: %s/log.csv\n", path, out);
    if (nva > 0 && !interrupted) printf("final val loss %.4f\n", pva[nva - 1].v);
    rc = interrupted ? 130 : 0;
fail:
    if (rc == 1) fprintf(stderr, "tallow train: %s\n", tl_last_error());
    if (csv) fclose(csv);
    free(ptr);
    free(pva);
    tt_trainer_free(&tr);
    tt_optim_free(&o);
    tt_model_free(&m);
    tt_ctx_free(c);
    tt_dataset_free(&d);
    return rc;
}
