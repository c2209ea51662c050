/* tests/gpu/train_gpu_oracle: GPT-2 training steps on the GPU for the
 * PyTorch comparison (bench/train_gpu_torch.py) and the speed figure.
 *   train_gpu_oracle DIR [--layers L --dim C --heads H --vocab V --ctx T
 *                    --batch B --steps N --matmul f32|tf32|bf16] [--bench N]
 * Oracle mode writes DIR/init.safetensors (initial weights), DIR/batches.bin
 * (int32 ids then targets per step, [steps][2][B*T]), DIR/grads1.safetensors
 * (every parameter's gradient after the first backward, "g.<name>") and
 * DIR/losses.txt (one loss per step; AdamW at --lr-e6 N (lr N * 1e-6,
 * default 1000), betas 0.9/0.95, wd 0.1 on 2-d weights, clip 1.0) and
 * DIR/lr.txt (that lr, for the PyTorch side). --bench N: no files; times N steps after 3
 * warm-up steps and prints tokens/s (median step) and model FLOPs
 * utilization against the H200's 989 dense bf16 TFLOP/s, and the device
 * memory in use after the steps (the pool keeps the step's peak).
 * --profile 1 (with --bench): the timed steps run with the kernel-call
 * timer on, and its table (per tcu_* call, summed over the steps) follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "tallow_train.h"

static int die(const char *what) {
    fprintf(stderr, "train_gpu_oracle: %s: %s\n", what, tl_last_error());
    return 1;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Every parameter's gradient, downloaded, as DIR/grads1.safetensors. */
static int save_grads(const char *dir, tt_model *m) {
    int n = m->params.n;
    char path[1024], **names = calloc((size_t)n, sizeof *names);
    const tt_tensor **ts = calloc((size_t)n, sizeof *ts);
    tt_tensor **hs = calloc((size_t)n, sizeof *hs);
    for (int i = 0; i < n; i++) {
        tt_tensor *p = m->params.p[i].t;
        hs[i] = tt_new(TT_F32, p->ndim, p->shape);
        if (!p->grad || tt_copy_across(hs[i], p->grad) != TL_OK) return die("grad download");
        names[i] = malloc(128);
        snprintf(names[i], 128, "g.%s", m->params.p[i].name);
        ts[i] = hs[i];
    }
    snprintf(path, sizeof path, "%s/grads1.safetensors", dir);
    tl_status s = tt_tensors_save(path, n, (const char *const *)names, ts);
    for (int i = 0; i < n; i++) {
        free(names[i]);
        tt_free(hs[i]);
    }
    free(names);
    free(ts);
    free(hs);
    return s == TL_OK ? 0 : die("save grads");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: train_gpu_oracle DIR [--layers L --dim C --heads H --vocab V --ctx T --batch B "
                        "--steps N --matmul f32|tf32|bf16] [--bench N]\n");
        return 2;
    }
    const char *dir = argv[1], *mm = "f32";
    int64_t L = 2, C = 128, H = 4, V = 512, T = 64, B = 4, steps = 20, bench = 0, lr_e6 = 1000, prof = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        int64_t v = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--layers")) L = v;
        else if (!strcmp(argv[i], "--dim")) C = v;
        else if (!strcmp(argv[i], "--heads")) H = v;
        else if (!strcmp(argv[i], "--vocab")) V = v;
        else if (!strcmp(argv[i], "--ctx")) T = v;
        else if (!strcmp(argv[i], "--batch")) B = v;
        else if (!strcmp(argv[i], "--steps")) steps = v;
        else if (!strcmp(argv[i], "--bench")) bench = v;
        else if (!strcmp(argv[i], "--lr-e6")) lr_e6 = v;
        else if (!strcmp(argv[i], "--profile")) prof = v;
        else if (!strcmp(argv[i], "--matmul")) mm = argv[i + 1];
        else {
            fprintf(stderr, "train_gpu_oracle: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (bench) steps = bench + 3;
    tt_matmul_prec prec = !strcmp(mm, "bf16") ? TT_MM_BF16 : !strcmp(mm, "tf32") ? TT_MM_TF32 : TT_MM_F32;
    tt_model_config k = tt_model_config_default(TT_ARCH_GPT2, V, T, C, L, H);
    tt_model m;
    tt_optim o;
    tt_ctx *c;
    if (tt_model_init(&m, &k, 1) != TL_OK) return die("model");
    char path[1024];
    if (!bench) {
        snprintf(path, sizeof path, "%s/init.safetensors", dir);
        if (tt_checkpoint_save(path, &m, NULL, 0, NULL) != TL_OK) return die("save init");
    }
    if (tt_model_to(&m, TT_CUDA) != TL_OK) return die("to cuda");
    double lr = (double)lr_e6 * 1e-6;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, lr);
    oc.beta2 = 0.95;
    oc.weight_decay = 0.1;
    if (tt_optim_init(&o, &oc, &m.params) != TL_OK) return die("optim");
    if (tt_ctx_init(4, &c) != TL_OK) return die("ctx");
    tt_ctx_set_matmul_prec(c, prec);
    size_t nbt = (size_t)(B * T);
    int32_t *batches = malloc(sizeof(int32_t) * nbt * 2 * (size_t)steps);
    tt_rng r;
    tt_rng_seed(&r, 1234);
    for (size_t i = 0; i < nbt * 2 * (size_t)steps; i++) batches[i] = (int32_t)(tt_rng_next(&r) % (uint64_t)V);
    FILE *lf = NULL;
    if (!bench) {
        snprintf(path, sizeof path, "%s/batches.bin", dir);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(batches, sizeof(int32_t), nbt * 2 * (size_t)steps, f) != nbt * 2 * (size_t)steps) {
            fprintf(stderr, "train_gpu_oracle: cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        snprintf(path, sizeof path, "%s/lr.txt", dir);
        FILE *lrf = fopen(path, "w");
        if (!lrf) return 1;
        fprintf(lrf, "%.9g\n", lr);
        fclose(lrf);
        snprintf(path, sizeof path, "%s/losses.txt", dir);
        lf = fopen(path, "w");
        if (!lf) return 1;
    }
    double *dt = calloc((size_t)steps, sizeof *dt);
    for (int64_t s = 0; s < steps; s++) {
        const int32_t *ids = batches + (size_t)s * 2 * nbt, *tg = ids + nbt;
        if (prof && bench && s == 3 && tt_device_profile(TT_CUDA, true) != TL_OK) return die("profile");
        int64_t t0 = tl_time_us();
        tt_params_zero_grad(&m.params);
        tt_tensor *l = tt_model_loss(c, &m, ids, tg, B, T, NULL);
        if (!l) return die("loss");
        if (tt_backward(c, l) != TL_OK) return die("backward");
        if (s == 0 && !bench && save_grads(dir, &m)) return 1;
        if (tt_optim_step_clipped(&o, lr, 1.0) != TL_OK) return die("step");
        double lv = tt_get(l, 0); /* waits for the step */
        tt_ctx_reset(c);
        dt[s] = (double)(tl_time_us() - t0) / 1e6;
        if (lf) fprintf(lf, "%.9g %.9g\n", lv, tt_optim_last_norm(&o));
        if (bench) fprintf(stderr, "step %lld: loss %.4f, %.1f ms\n", (long long)s, lv, dt[s] * 1e3);
    }
    if (lf) fclose(lf);
    if (prof && bench) {
        char *tab = malloc(1 << 16);
        if (!tab || tt_device_profile_report(TT_CUDA, tab, 1 << 16) != TL_OK) return die("profile report");
        printf("kernel calls over %lld steps:\n%s", (long long)bench, tab);
        free(tab);
    }
    if (bench) {
        qsort(dt + 3, (size_t)bench, sizeof *dt, cmp_d);
        double med = dt[3 + bench / 2], tps = (double)(B * T) / med;
        double n_params = (double)tt_params_count(&m.params);
        double flops = 6.0 * n_params * (double)(B * T) + 12.0 * (double)(L * B * T * T * C); /* per step */
        size_t fr = 0, tot = 0;
        tt_device_memory(TT_CUDA, &fr, &tot);
        printf("tallow gpt2 L%lld C%lld B%lld T%lld %s: %.0f tok/s (median step %.1f ms), MFU %.1f%% of 989 TFLOP/s, "
               "device memory in use %.1f GiB\n",
               (long long)L, (long long)C, (long long)B, (long long)T, mm, tps, med * 1e3,
               100.0 * flops / med / 989e12, (double)(tot - fr) / (1 << 30));
    }
    free(dt);
    free(batches);
    tt_ctx_free(c);
    tt_optim_free(&o);
    tt_model_free(&m);
    return 0;
}
