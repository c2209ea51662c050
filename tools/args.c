#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool args_has_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "tallow %s: flag %s needs a value\n", argv[0], argv[*i]);
        return false;
    }
    return true;
}

bool args_int(int argc, char **argv, int *i, long lo, long hi, int32_t *out) {
    if (!args_has_value(argc, argv, i)) return false;
    const char *v = argv[*i + 1];
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "tallow %s: %s expects an integer in [%ld, %ld], got '%s'\n", argv[0], argv[*i], lo, hi, v);
        return false;
    }
    *out = (int32_t)x;
    *i += 1;
    return true;
}

bool args_u64(int argc, char **argv, int *i, uint64_t *out) {
    if (!args_has_value(argc, argv, i)) return false;
    const char *v = argv[*i + 1];
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "tallow %s: %s expects a non-negative integer, got '%s'\n", argv[0], argv[*i], v);
        return false;
    }
    *out = x;
    *i += 1;
    return true;
}

bool args_float(int argc, char **argv, int *i, double lo, double hi, float *out) {
    if (!args_has_value(argc, argv, i)) return false;
    const char *v = argv[*i + 1];
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || isnan(x) || x < lo || x > hi) {
        fprintf(stderr, "tallow %s: %s expects a number in [%g, %g], got '%s'\n", argv[0], argv[*i], lo, hi, v);
        return false;
    }
    *out = (float)x;
    *i += 1;
    return true;
}

bool args_str(int argc, char **argv, int *i, const char **out) {
    if (!args_has_value(argc, argv, i)) return false;
    *out = argv[*i + 1];
    *i += 1;
    return true;
}

char *args_read_file(const char *path, size_t *len) {
    bool std_in = !strcmp(path, "-");
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        if (cap >= ((size_t)1 << 30)) {
            free(buf);
            buf = NULL;
            errno = EFBIG;
            break;
        }
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    if (!std_in) fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len) *len = n;
    }
    return buf;
}

/* the CUDA tuning a command's flags set (one per process, as the CPU kernel set) */
static tl_cuda_tuning args_tune;
static bool args_tune_set;

bool args_model_flag(int argc, char **argv, int *i, tl_model_params *mp, bool *ok) {
    const char *a = argv[*i];
    if (!args_tune_set) args_tune = tl_cuda_tuning_default(), args_tune_set = true;
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
        mp->verbose = true;
        *ok = true;
    } else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
        *ok = args_int(argc, argv, i, -1, 1 << 20, &mp->n_gpu_layers);
        if (*ok && mp->n_gpu_layers != 0) mp->backend = TL_BACKEND_CUDA;
    } else if (!strcmp(a, "--cpu-kernels")) {
        /* process-wide: applies to the models this command loads */
        const char *d;
        tl_cpu_kernels k;
        *ok = args_str(argc, argv, i, &d);
        if (*ok && (tl_cpu_kernels_parse(d, &k) != TL_OK || tl_cpu_set_kernels(k) != TL_OK)) {
            fprintf(stderr, "tallow %s: --cpu-kernels: %s\n", argv[0], tl_last_error());
            *ok = false;
        }
    } else if (!strcmp(a, "--cuda-mvm-max")) {
        *ok = args_int(argc, argv, i, 0, 4, &args_tune.mvm_max_tokens);
        mp->cuda_tuning = &args_tune;
    } else if (!strcmp(a, "--device")) {
        const char *d;
        *ok = args_str(argc, argv, i, &d);
        if (*ok && !strcmp(d, "cuda")) {
            mp->backend = TL_BACKEND_CUDA;
        } else if (*ok && !strcmp(d, "cpu")) {
            mp->backend = TL_BACKEND_CPU;
        } else if (*ok) {
            fprintf(stderr, "tallow %s: unknown device '%s' (cpu or cuda)\n", argv[0], d);
            *ok = false;
        }
    } else {
        return false;
    }
    return true;
}

bool args_sampler_flag(int argc, char **argv, int *i, tl_sampler_params *sp, bool *ok) {
    const char *a = argv[*i];
    if (!strcmp(a, "--temp")) *ok = args_float(argc, argv, i, 0, 100, &sp->temp);
    else if (!strcmp(a, "--top-k")) *ok = args_int(argc, argv, i, 0, 1 << 24, &sp->top_k);
    else if (!strcmp(a, "--top-p")) *ok = args_float(argc, argv, i, 0, 1, &sp->top_p);
    else if (!strcmp(a, "--min-p")) *ok = args_float(argc, argv, i, 0, 1, &sp->min_p);
    else if (!strcmp(a, "--repeat-penalty")) *ok = args_float(argc, argv, i, 0.01, 100, &sp->repeat_penalty);
    else if (!strcmp(a, "--presence-penalty")) *ok = args_float(argc, argv, i, -2, 2, &sp->presence_penalty);
    else if (!strcmp(a, "--frequency-penalty")) *ok = args_float(argc, argv, i, -2, 2, &sp->frequency_penalty);
    else if (!strcmp(a, "--repeat-last-n")) *ok = args_int(argc, argv, i, 0, 1 << 20, &sp->repeat_last_n);
    else if (!strcmp(a, "--seed")) *ok = args_u64(argc, argv, i, &sp->seed);
    else if (!strcmp(a, "--typical")) *ok = args_float(argc, argv, i, 0, 1, &sp->typical_p);
    else if (!strcmp(a, "--top-n-sigma")) *ok = args_float(argc, argv, i, -1, 100, &sp->top_n_sigma);
    else if (!strcmp(a, "--xtc-probability")) *ok = args_float(argc, argv, i, 0, 1, &sp->xtc_probability);
    else if (!strcmp(a, "--xtc-threshold")) *ok = args_float(argc, argv, i, 0, 1, &sp->xtc_threshold);
    else if (!strcmp(a, "--dry-multiplier")) *ok = args_float(argc, argv, i, 0, 100, &sp->dry_multiplier);
    else if (!strcmp(a, "--dry-base")) *ok = args_float(argc, argv, i, 1, 100, &sp->dry_base);
    else if (!strcmp(a, "--dry-allowed-length")) *ok = args_int(argc, argv, i, 0, 1 << 20, &sp->dry_allowed_length);
    else if (!strcmp(a, "--dry-penalty-last-n")) *ok = args_int(argc, argv, i, 0, 1 << 20, &sp->dry_last_n);
    else if (!strcmp(a, "--mirostat")) *ok = args_int(argc, argv, i, 0, 2, &sp->mirostat);
    else if (!strcmp(a, "--mirostat-ent")) *ok = args_float(argc, argv, i, 0, 100, &sp->mirostat_tau);
    else if (!strcmp(a, "--mirostat-lr")) *ok = args_float(argc, argv, i, 0, 1, &sp->mirostat_eta);
    else if (!strcmp(a, "--samplers")) *ok = args_str(argc, argv, i, &sp->samplers);
    else return false;
    return true;
}

bool args_train_flag(int argc, char **argv, int *i, tt_device *dev, tt_matmul_prec *mm, bool *ok) {
    static const char *devs[] = {"cpu", "cuda"}, *mms[] = {"f32", "tf32", "bf16"};
    const char *a = argv[*i], *v = NULL;
    const bool is_dev = !strcmp(a, "--device");
    if (!is_dev && strcmp(a, "--matmul")) return false;
    if (!(*ok = args_str(argc, argv, i, &v))) return true;
    const char **names = is_dev ? devs : mms;
    const int n = is_dev ? 2 : 3;
    for (int k = 0; k < n; k++)
        if (!strcmp(v, names[k])) {
            if (is_dev) *dev = k ? TT_CUDA : TT_CPU;
            else *mm = k == 2 ? TT_MM_BF16 : k ? TT_MM_TF32 : TT_MM_F32;
            return true;
        }
    fprintf(stderr, "tallow %s: %s '%s': use %s\n", argv[0], a, v, is_dev ? "cpu or cuda" : "f32, tf32 or bf16");
    *ok = false;
    return true;
}
