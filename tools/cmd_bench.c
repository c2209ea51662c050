/* tallow bench: llama-bench-style prompt (ppN) and generation (tgN) speed.
 * pp: one batched forward of N random tokens into an empty cache.
 * tg: N single-token forwards starting from an empty cache.
 * Each test runs once untimed (warm-up), then -r times; rows give mean ± sd
 * and the median. On a GPU three more columns: the floor (the fastest the
 * test could run on this card: tg reads every weight byte a decode step
 * needs plus the KV cache at each depth, at the copy bandwidth; pp does the
 * matmul and attention FLOPs at the f16 GEMM rate; both ceilings measured
 * by this command on the card before the table), the median's fraction of
 * it, and the device memory held (weights + KV cache + activations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "args_lora.h"
#include "base/timer.h"
#include "commands.h"
#include "tallow.h"

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: tallow bench -m MODEL.gguf [options]\n"
            "  -p N        prompt tokens (default 512; 0 = skip)\n"
            "  -n N        generated tokens (default 128; 0 = skip)\n"
            "  -t LIST     threads, comma separated (default: all cores)\n"
            "  -r N        repetitions (default 5)\n"
            "  --device cpu|cuda, -ngl N  backend\n"
            ARGS_LORA_USAGE);
}

/* Floor t/s of a test on a GPU (see the header comment). */
static double bench_floor(const tl_model_info *in, const tl_device_stats *ds, int32_t n, bool prompt) {
    const double e = in->n_embd, qd = (double)in->n_head * in->head_dim, kvd = (double)in->n_head_kv * in->head_dim;
    if (prompt) {
        /* per token: every layer matmul (q, k, v, o, gate, up, down) as 2 FLOPs
         * per weight; attention: q.k and p.v over the causal prefix; the
         * output head once (the last token's logits) */
        const double mm = 2.0 * in->n_layer * (e * (qd + 2 * kvd) + qd * e + 3.0 * e * in->n_ff);
        const double att = 4.0 * in->n_layer * qd * ((double)n * (n + 1) / 2);
        const double flops = mm * n + att + 2.0 * e * in->n_vocab;
        return ds->gemm_tflops > 0 ? n / (flops / (ds->gemm_tflops * 1e12)) : 0;
    }
    /* token t (1..n) reads the weights and t positions of the KV cache */
    const double bytes = (double)ds->decode_bytes + (double)ds->kv_bytes_per_pos * (n + 1) / 2.0;
    return ds->copy_gbs > 0 ? ds->copy_gbs * 1e9 / bytes : 0;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seconds for one run of the test; < 0 on error (message printed). */
static double bench_once(tl_session *s, const int32_t *toks, int32_t n, bool prompt) {
    tl_session_rewind(s, 0);
    int64_t t0 = tl_time_us();
    tl_status st;
    if (prompt) {
        st = tl_session_eval(s, toks, n, NULL);
    } else {
        st = TL_OK;
        for (int32_t i = 0; i < n && !st; i++) st = tl_session_eval(s, &toks[i], 1, NULL);
    }
    if (st) {
        fprintf(stderr, "tallow bench: %s\n", tl_last_error());
        return -1;
    }
    return (tl_time_us() - t0) / 1e6;
}

int cmd_bench(int argc, char **argv) {
    const char *model_path = NULL, *threads = NULL;
    int32_t n_prompt = 512, n_gen = 128, reps = 5;
    tl_model_params mp = tl_model_default_params();
    args_lora la = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m")) ok = args_str(argc, argv, &i, &model_path);
        else if (!strcmp(a, "-p")) ok = args_int(argc, argv, &i, 0, 1 << 20, &n_prompt);
        else if (!strcmp(a, "-n")) ok = args_int(argc, argv, &i, 0, 1 << 20, &n_gen);
        else if (!strcmp(a, "-t")) ok = args_str(argc, argv, &i, &threads);
        else if (!strcmp(a, "-r")) ok = args_int(argc, argv, &i, 1, 1000, &reps);
        else if (args_model_flag(argc, argv, &i, &mp, &ok) || args_lora_flag(argc, argv, &i, &la, &ok)) {
            /* shared flags: parsed (ok says whether the value was good) */
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tallow bench: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) {
            bench_usage(stderr);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "tallow bench: need -m MODEL\n");
        bench_usage(stderr);
        return 2;
    }
    int32_t tlist[16], nt = 0;
    if (threads) {
        const char *p = threads;
        while (*p && nt < 16) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > 1024 || (*end && *end != ',')) {
                fprintf(stderr, "tallow bench: bad thread list '%s'\n", threads);
                return 2;
            }
            tlist[nt++] = (int32_t)v;
            p = *end ? end + 1 : end;
        }
    } else {
        tlist[nt++] = 0;
    }

    tl_model *m;
    if (tl_model_load(model_path, &mp, &m)) {
        fprintf(stderr, "tallow bench: %s\n", tl_last_error());
        return 1;
    }
    if (!args_lora_load(&la, m, "bench")) {
        tl_model_free(m);
        return 1;
    }
    tl_model_info info;
    tl_model_get_info(m, &info);
    int32_t n_max = n_prompt > n_gen ? n_prompt : n_gen;
    int32_t *toks = malloc(((size_t)n_max + 1) * sizeof *toks);
    double *times = malloc((size_t)reps * sizeof *times);
    int rc = 0;
    if (!toks || !times) {
        fprintf(stderr, "tallow bench: out of memory\n");
        rc = 1;
        goto done;
    }
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int32_t i = 0; i < n_max; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        toks[i] = (int32_t)(x % (uint64_t)info.n_vocab);
    }
    /* on a GPU: the card's ceilings, measured now, for the floor columns */
    tl_device_stats ds;
    const bool gpu = mp.backend == TL_BACKEND_CUDA;
    if (gpu) {
        if (!tl_model_device_stats(m, true, &ds)) {
            printf("device %s: copy ceiling %.0f GB/s (device-to-device, read + write), f16 GEMM ceiling %.0f "
                   "TFLOP/s (8192^3), measured now; weights %.2f MiB on the device, %.2f MiB read per decode step\n",
                   ds.name, ds.copy_gbs, ds.gemm_tflops, ds.weight_bytes / 1048576.0, ds.decode_bytes / 1048576.0);
        } else {
            /* the probes need ~4 GiB free (less is tried); without them the
             * table still runs, with no floor */
            fprintf(stderr, "tallow bench: warning: device ceilings not measured (%s); no floor columns\n",
                    tl_last_error());
            if (tl_model_device_stats(m, false, &ds)) {
                fprintf(stderr, "tallow bench: %s\n", tl_last_error());
                rc = 1;
                goto done;
            }
        }
    }
    printf("| %-28s | %10s | %8s | %-7s | %7s | %6s | %20s | %9s | %9s | %5s | %9s |\n", "model", "size", "params",
           "backend", "threads", "test", "t/s (mean ± sd)", "t/s (med)", "floor t/s", "frac", "dev MiB");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------", "-----------:", "---------:",
           "---------", "--------:", "-------:", "---------------------:", "----------:", "----------:", "------:",
           "----------:");
    for (int ti = 0; ti < nt && !rc; ti++) {
        tl_session_params sp = tl_session_default_params();
        sp.n_threads = tlist[ti];
        sp.n_ctx = n_max + 16;
        sp.n_batch = n_prompt > 0 ? n_prompt : 1;
        tl_session *s;
        if (tl_session_init(m, &sp, &s)) {
            fprintf(stderr, "tallow bench: %s\n", tl_last_error());
            rc = 1;
            break;
        }
        if (!args_lora_attach(&la, s, "bench")) {
            tl_session_free(s);
            rc = 1;
            break;
        }
        int nthreads = tlist[ti];
        if (nthreads == 0) nthreads = -1;
        for (int test = 0; test < 2 && !rc; test++) {
            int32_t n = test == 0 ? n_prompt : n_gen;
            if (n == 0) continue;
            if (bench_once(s, toks, n, test == 0) < 0) { /* warm-up */
                rc = 1;
                break;
            }
            double sum = 0, sum2 = 0;
            for (int r = 0; r < reps; r++) {
                double sec = bench_once(s, toks, n, test == 0);
                if (sec < 0) {
                    rc = 1;
                    break;
                }
                times[r] = n / sec;
                sum += times[r];
                sum2 += times[r] * times[r];
            }
            if (rc) break;
            double mean = sum / reps, sd = reps > 1 ? sqrt(fmax(0, (sum2 - sum * mean) / (reps - 1))) : 0;
            qsort(times, (size_t)reps, sizeof *times, bench_cmp);
            double med = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
            char test_name[32], ts[64], thr[16], size[32], params[32];
            snprintf(test_name, sizeof test_name, "%s%d", test == 0 ? "pp" : "tg", n);
            snprintf(ts, sizeof ts, "%.2f ± %.2f", mean, sd);
            if (nthreads > 0) snprintf(thr, sizeof thr, "%d", nthreads);
            else snprintf(thr, sizeof thr, "all");
            snprintf(size, sizeof size, "%.2f MiB", info.n_bytes / 1048576.0);
            snprintf(params, sizeof params, "%.2f M", info.n_params / 1e6);
            char name[64];
            snprintf(name, sizeof name, "%s %s", info.arch, info.ftype);
            char fl[32] = "-", fr[16] = "-", dm[32] = "-";
            if (gpu) {
                double f = bench_floor(&info, &ds, n, test == 0);
                if (f > 0) {
                    snprintf(fl, sizeof fl, "%.1f", f);
                    snprintf(fr, sizeof fr, "%.3f", med / f);
                }
                snprintf(dm, sizeof dm, "%.1f", (ds.weight_bytes + tl_session_device_bytes(s)) / 1048576.0);
            }
            printf("| %-28s | %10s | %8s | %-7s | %7s | %6s | %20s | %9.2f | %9s | %5s | %9s |\n", name, size, params,
                   gpu ? "CUDA" : "CPU", thr, test_name, ts, med, fl, fr, dm);
            fflush(stdout);
        }
        tl_session_free(s);
    }
done:
    free(toks);
    free(times);
    args_lora_free(&la);
    tl_model_free(m);
    return rc;
}
