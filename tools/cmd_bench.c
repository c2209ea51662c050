/* tallow bench: speed in llama.cpp's two benchmark forms.
 *
 * Plain mode (llama-bench): pp N, one batched forward of N random tokens,
 * and tg N, N single-token forwards, each after -d tokens of context (the
 * context is prefilled untimed before every run). Each test runs once
 * untimed (warm-up), then -r times; rows give mean ± sd and the median.
 *
 * Batched mode (llama-batched-bench, chosen by -npp/-ntg/-npl): for each
 * (prompt, generation, sequences) triple, the npl prompts of npp tokens in
 * one batch (split into steps of -ub tokens), then ntg steps of one token
 * per sequence, every sequence's logits kept; the columns are
 * llama-batched-bench's (PP, TG, B, N_KV, T_PP, S_PP, T_TG, S_TG, T, S).
 *
 * On a GPU both add the floor (the fastest the test could run on this
 * card: a decode step reads every weight byte once plus each sequence's KV
 * cache at its depth, at the copy bandwidth, or does the step's FLOPs at
 * the f16 GEMM rate, whichever is slower; a prompt does its FLOPs; both
 * ceilings measured by this command on the card before the table), the
 * median's fraction of it and the device memory held. `-o json` prints one
 * JSON object per row (llama-bench's and llama-batched-bench's field names). */
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
            "  -d N        depth: tokens of context before each test (default 0)\n"
            "  -t, --threads LIST  threads, comma separated (default: all cores)\n"
            "  -r N        repetitions (default 5; batched mode 1)\n"
            "  -npp LIST -ntg LIST -npl LIST   batched mode (llama-batched-bench): prompt\n"
            "              tokens, generated tokens and sequences, comma separated\n"
            "  -ub N       tokens per forward in batched mode's prompt phase (default 512)\n"
            "  -o md|json  output format (default md; json: one object per line)\n"
            "  --device cpu|cuda, -ngl N  backend\n"
            "  --cpu-kernels auto|scalar|avx2|avx512  CPU kernel set (default auto: the best\n"
            "              this CPU runs); the set that ran is printed with the results\n"
            "  --cuda-mvm-max N  steps of 2..N tokens run the few-token matvec, longer ones the\n"
            "              small-batch GEMM (0..4, default 4)\n"
            "  --lora FILE[:SCALE]  LoRA adapter (repeatable): all on the plain tests; in batched mode\n"
            "              sequence i uses the (i mod n)-th alone\n"
            "  --profile   batched mode on cuda: time every op (steps run eagerly) and print the\n"
            "              table after each row\n");
}

typedef struct bench_opts {
    const char *model_path;
    int32_t n_prompt, n_gen, depth, reps, ubatch;
    int32_t tlist[16], nt;
    int32_t npp[16], ntg[16], npl[16], n_npp, n_ntg, n_npl;
    bool json, profile;
    tl_model_params mp;
    args_lora la;
} bench_opts;

typedef struct bench_env {
    tl_model *m;
    tl_model_info info;
    tl_device_stats ds;
    bool gpu, have_ds;
    int32_t *toks;
    int32_t n_toks;
} bench_env;

static bool bench_list(const char *s, int32_t lo, int32_t hi, int32_t *out, int32_t *n, const char *what) {
    *n = 0;
    for (const char *p = s; *p && *n < 16;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || (*end && *end != ',')) {
            fprintf(stderr, "tallow bench: bad %s list '%s' (values %d..%d)\n", what, s, lo, hi);
            return false;
        }
        out[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) fprintf(stderr, "tallow bench: empty %s list\n", what);
    return *n > 0;
}

static double bench_median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* matmul FLOPs per token (2 per weight of every layer matmul) */
static double bench_mm_flops(const tl_model_info *in) {
    const double e = in->n_embd, qd = (double)in->n_head * in->head_dim, kvd = (double)in->n_head_kv * in->head_dim;
    return 2.0 * in->n_layer * (e * (qd + 2 * kvd) + qd * e + 3.0 * e * in->n_ff);
}

/* attention FLOPs of one token over ctx positions */
static double bench_att_flops(const tl_model_info *in, double ctx) {
    return 4.0 * in->n_layer * (double)in->n_head * in->head_dim * ctx;
}

/* seconds of one decode step of npl sequences at mean depth ctx, at the floor */
static double bench_step_floor(const bench_env *e, int32_t npl, double ctx) {
    const double bytes = (double)e->ds.decode_bytes + (double)npl * (double)e->ds.kv_bytes_per_pos * ctx;
    const double flops = npl * (bench_mm_flops(&e->info) + bench_att_flops(&e->info, ctx) + 2.0 * e->info.n_embd * e->info.n_vocab);
    const double tb = e->ds.copy_gbs > 0 ? bytes / (e->ds.copy_gbs * 1e9) : 0;
    const double tf = e->ds.gemm_tflops > 0 ? flops / (e->ds.gemm_tflops * 1e12) : 0;
    return tb > tf ? tb : tf;
}

/* floor t/s of a plain test (n tokens after depth d) */
static double bench_floor(const bench_env *e, int32_t n, int32_t d, bool prompt) {
    if (!e->have_ds || e->ds.copy_gbs <= 0) return 0;
    if (prompt) {
        const double att = bench_att_flops(&e->info, 1) * ((double)n * (n + 1) / 2 + (double)n * d);
        const double flops = bench_mm_flops(&e->info) * n + att + 2.0 * e->info.n_embd * e->info.n_vocab;
        return e->ds.gemm_tflops > 0 ? n / (flops / (e->ds.gemm_tflops * 1e12)) : 0;
    }
    double sec = 0;
    for (int32_t t = 1; t <= n; t++) sec += bench_step_floor(e, 1, d + t);
    return sec > 0 ? n / sec : 0;
}

static bool bench_fail(tl_status st) {
    if (st) fprintf(stderr, "tallow bench: %s\n", tl_last_error());
    return st != TL_OK;
}

/* seconds of one plain test run; < 0 on error (printed) */
static double bench_once(tl_session *s, const bench_env *e, int32_t n, int32_t d, bool prompt) {
    if (bench_fail(tl_session_rewind(s, 0))) return -1;
    if (d > 0 && bench_fail(tl_session_eval(s, e->toks + n, d, NULL))) return -1;
    if (bench_fail(tl_context_synchronize(tl_session_context(s)))) return -1;
    int64_t t0 = tl_time_us();
    tl_status st = TL_OK;
    if (prompt)
        st = tl_session_eval(s, e->toks, n, NULL);
    else
        for (int32_t i = 0; i < n && !st; i++) st = tl_session_eval(s, &e->toks[i], 1, NULL);
    if (!st) st = tl_context_synchronize(tl_session_context(s));
    if (bench_fail(st)) return -1;
    return (tl_time_us() - t0) / 1e6;
}

static int bench_plain(const bench_opts *o, bench_env *e) {
    double *times = malloc((size_t)o->reps * sizeof *times);
    if (!times) return 1;
    if (!o->json) {
        printf("| %-28s | %10s | %8s | %-10s | %7s | %14s | %20s | %9s | %9s | %5s | %9s |\n", "model", "size", "params",
               "backend", "threads", "test", "t/s (mean ± sd)", "t/s (med)", "floor t/s", "frac", "dev MiB");
        printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------", "-----------:",
               "---------:", "------------", "--------:", "---------------:", "---------------------:", "----------:",
               "----------:", "------:", "----------:");
    }
    int rc = 0;
    for (int ti = 0; ti < o->nt && !rc; ti++) {
        tl_session_params sp = tl_session_default_params();
        sp.n_threads = o->tlist[ti];
        const int32_t longest = (o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen) + o->depth;
        sp.n_ctx = longest + 16;
        sp.n_batch = o->n_prompt > 0 ? o->n_prompt : 512;
        tl_session *s;
        if (bench_fail(tl_session_init(e->m, &sp, &s))) return 1;
        if (!args_lora_attach(&o->la, s, "bench")) {
            tl_session_free(s);
            return 1;
        }
        for (int test = 0; test < 2 && !rc; test++) {
            const int32_t n = test == 0 ? o->n_prompt : o->n_gen;
            if (n == 0) continue;
            if (bench_once(s, e, n, o->depth, test == 0) < 0) { /* warm-up */
                rc = 1;
                break;
            }
            double sum = 0, sum2 = 0;
            for (int r = 0; r < o->reps && !rc; r++) {
                const double sec = bench_once(s, e, n, o->depth, test == 0);
                if (sec < 0) rc = 1;
                times[r] = n / sec;
                sum += times[r];
                sum2 += times[r] * times[r];
            }
            if (rc) break;
            const double mean = sum / o->reps;
            const double sd = o->reps > 1 ? sqrt(fmax(0, (sum2 - sum * mean) / (o->reps - 1))) : 0;
            const double med = bench_median(times, o->reps);
            const double fl = e->gpu ? bench_floor(e, n, o->depth, test == 0) : 0;
            const double dev = e->gpu ? (e->ds.weight_bytes + tl_session_device_bytes(s)) / 1048576.0 : 0;
            char test_name[48];
            snprintf(test_name, sizeof test_name, "%s%d", test == 0 ? "pp" : "tg", n);
            if (o->depth) snprintf(test_name + strlen(test_name), 24, " @ d%d", o->depth);
            if (o->json) {
                printf("{\"model_filename\": \"%s\", \"model_type\": \"%s %s\", \"model_size\": %llu, "
                       "\"model_n_params\": %llu, \"backends\": \"%s\", \"n_threads\": %d, \"n_prompt\": %d, "
                       "\"n_gen\": %d, \"n_depth\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"median_ts\": %.6f, "
                       "\"floor_ts\": %.6f, \"cpu_kernels\": \"%s\"}\n",
                       o->model_path, e->info.arch, e->info.ftype, (unsigned long long)e->info.n_bytes,
                       (unsigned long long)e->info.n_params, e->gpu ? "CUDA" : "CPU", o->tlist[ti],
                       test == 0 ? n : 0, test == 0 ? 0 : n, o->depth, mean, sd, med, fl, tl_cpu_kernel_set());
            } else {
                char ts[64], thr[16], size[32], params[32], name[64], fls[32] = "-", fr[16] = "-", dm[32] = "-";
                snprintf(ts, sizeof ts, "%.2f ± %.2f", mean, sd);
                snprintf(thr, sizeof thr, o->tlist[ti] > 0 ? "%d" : "all", o->tlist[ti]);
                snprintf(size, sizeof size, "%.2f MiB", e->info.n_bytes / 1048576.0);
                snprintf(params, sizeof params, "%.2f M", e->info.n_params / 1e6);
                snprintf(name, sizeof name, "%s %s", e->info.arch, e->info.ftype);
                if (fl > 0) {
                    snprintf(fls, sizeof fls, "%.1f", fl);
                    snprintf(fr, sizeof fr, "%.3f", med / fl);
                }
                if (e->gpu) snprintf(dm, sizeof dm, "%.1f", dev);
                char be[32];
                snprintf(be, sizeof be, e->gpu ? "CUDA" : "CPU %s", tl_cpu_kernel_set());
                printf("| %-28s | %10s | %8s | %-10s | %7s | %14s | %20s | %9.2f | %9s | %5s | %9s |\n", name, size,
                       params, be, thr, test_name, ts, med, fls, fr, dm);
            }
            fflush(stdout);
        }
        tl_session_free(s);
    }
    free(times);
    return rc;
}

/* one batched run: prompt seconds and generation seconds */
static int bench_batched_once(tl_context *c, const bench_env *e, int32_t npp, int32_t ntg, int32_t npl, double *t_pp,
                              double *t_tg) {
    const int32_t n = npl * npp > npl ? npl * npp : npl;
    int32_t *tok = malloc((size_t)n * 4), *seq = malloc((size_t)n * 4);
    int8_t *keep = malloc((size_t)n);
    int rc = 1;
    if (!tok || !seq || !keep) goto out;
    for (int32_t s = 0; s < tl_context_n_seq_max(c); s++)
        if (bench_fail(tl_seq_remove(c, s))) goto out;
    /* the prompts: sequence j's tokens, the last of each kept (as the peer) */
    for (int32_t j = 0; j < npl; j++)
        for (int32_t i = 0; i < npp; i++) {
            tok[j * npp + i] = e->toks[(j * 131 + i) % e->n_toks];
            seq[j * npp + i] = j;
            keep[j * npp + i] = i == npp - 1;
        }
    int64_t t0 = tl_time_us();
    if (npp > 0) {
        tl_batch b = {.n_tokens = npl * npp, .token = tok, .seq_id = seq, .logits = keep};
        if (bench_fail(tl_decode(c, &b)) || bench_fail(tl_context_synchronize(c))) goto out;
    }
    int64_t t1 = tl_time_us();
    for (int32_t j = 0; j < npl; j++) seq[j] = j, keep[j] = 1;
    for (int32_t g = 0; g < ntg; g++) {
        for (int32_t j = 0; j < npl; j++) tok[j] = e->toks[(g * 7 + j) % e->n_toks];
        tl_batch b = {.n_tokens = npl, .token = tok, .seq_id = seq, .logits = keep};
        if (bench_fail(tl_decode(c, &b))) goto out;
    }
    if (bench_fail(tl_context_synchronize(c))) goto out;
    int64_t t2 = tl_time_us();
    *t_pp = (t1 - t0) / 1e6;
    *t_tg = (t2 - t1) / 1e6;
    rc = 0;
out:
    free(tok), free(seq), free(keep);
    return rc;
}

/* the op table of the row just run (warm-up and repetitions together) */
static int bench_profile(tl_context *c) {
    char *buf = malloc(1 << 16);
    if (!buf) {
        fprintf(stderr, "tallow bench: out of memory for the profile table\n");
        return 1;
    }
    const int rc = bench_fail(tl_context_profile(c, buf, 1 << 16)) ? 1 : 0;
    if (!rc) printf("\n%s\n", buf);
    free(buf);
    return rc;
}

static int bench_batched(const bench_opts *o, bench_env *e) {
    int32_t max_npl = 1, max_kv = 1;
    for (int a = 0; a < o->n_npl; a++) max_npl = o->npl[a] > max_npl ? o->npl[a] : max_npl;
    for (int a = 0; a < o->n_npp; a++)
        for (int b = 0; b < o->n_ntg; b++)
            for (int c = 0; c < o->n_npl; c++) {
                const int32_t kv = o->npl[c] * (o->npp[a] + o->ntg[b]);
                if (kv > max_kv) max_kv = kv;
            }
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = max_kv + 16 * max_npl;
    cp.n_seq_max = max_npl;
    cp.n_batch = o->ubatch;
    cp.n_threads = o->tlist[0];
    cp.profile = o->profile;
    tl_context *c;
    if (bench_fail(tl_context_init(e->m, &cp, &c))) return 1;
    for (int32_t s = 0; o->la.n && s < max_npl; s++) /* mixed adapters: sequence s uses the (s mod n)-th */
        if (bench_fail(tl_seq_set_lora(c, s, &o->la.use[s % o->la.n], 1))) {
            tl_context_free(c);
            return 1;
        }
    if (!o->json) {
        printf("\nn_kv_max = %d, n_batch = %d, n_threads = %d, backend = %s, cpu kernels = %s\n\n",
               tl_context_n_ctx(c), o->ubatch, o->tlist[0], e->gpu ? "CUDA" : "CPU", tl_cpu_kernel_set());
        printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s "
               "| S_TG floor | frac |\n");
        printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------"
               "|------------|------|\n");
    }
    int rc = 0;
    double *tp = malloc((size_t)o->reps * sizeof *tp), *tt = malloc((size_t)o->reps * sizeof *tt);
    for (int a = 0; a < o->n_npp && !rc && tp && tt; a++)
        for (int b = 0; b < o->n_ntg && !rc; b++)
            for (int k = 0; k < o->n_npl && !rc; k++) {
                const int32_t npp = o->npp[a], ntg = o->ntg[b], npl = o->npl[k];
                double wp, wt;
                if ((rc = bench_batched_once(c, e, npp, ntg, npl, &wp, &wt))) break; /* warm-up */
                for (int r = 0; r < o->reps && !rc; r++) rc = bench_batched_once(c, e, npp, ntg, npl, &tp[r], &tt[r]);
                if (rc) break;
                const double t_pp = bench_median(tp, o->reps), t_tg = bench_median(tt, o->reps);
                const int32_t n_kv = npl * (npp + ntg);
                const double s_pp = t_pp > 0 ? npl * npp / t_pp : 0, s_tg = t_tg > 0 ? npl * ntg / t_tg : 0;
                double floor_tg = 0;
                if (e->gpu && e->have_ds && ntg > 0) {
                    double sec = 0;
                    for (int32_t g = 0; g < ntg; g++) sec += bench_step_floor(e, npl, npp + g + 1);
                    floor_tg = sec > 0 ? npl * ntg / sec : 0;
                }
                if (o->json) {
                    printf("{\"n_kv_max\": %d, \"n_batch\": %d, \"n_ubatch\": %d, \"is_pp_shared\": 0, "
                           "\"n_threads\": %d, \"pp\": %d, \"tg\": %d, \"pl\": %d, \"n_kv\": %d, \"t_pp\": %f, "
                           "\"speed_pp\": %f, \"t_tg\": %f, \"speed_tg\": %f, \"t\": %f, \"speed\": %f, "
                           "\"floor_tg\": %f, \"cpu_kernels\": \"%s\"}\n",
                           tl_context_n_ctx(c), o->ubatch, o->ubatch, o->tlist[0], npp, ntg, npl, n_kv, t_pp, s_pp,
                           t_tg, s_tg, t_pp + t_tg, n_kv / (t_pp + t_tg), floor_tg, tl_cpu_kernel_set());
                } else {
                    char fl[24] = "-", fr[16] = "-";
                    if (floor_tg > 0) {
                        snprintf(fl, sizeof fl, "%.1f", floor_tg);
                        snprintf(fr, sizeof fr, "%.3f", s_tg / floor_tg);
                    }
                    printf("| %5d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f | %10s | %4s |\n",
                           npp, ntg, npl, n_kv, t_pp, s_pp, t_tg, s_tg, t_pp + t_tg, n_kv / (t_pp + t_tg), fl, fr);
                }
                if (o->profile) rc = bench_profile(c);
                fflush(stdout);
            }
    free(tp), free(tt);
    tl_context_free(c);
    return rc;
}

static int bench_parse(int argc, char **argv, bench_opts *o) {
    const char *threads = NULL, *npp = NULL, *ntg = NULL, *npl = NULL, *fmt = NULL;
    bool reps_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m")) ok = args_str(argc, argv, &i, &o->model_path);
        else if (!strcmp(a, "-p")) ok = args_int(argc, argv, &i, 0, 1 << 20, &o->n_prompt);
        else if (!strcmp(a, "-n")) ok = args_int(argc, argv, &i, 0, 1 << 20, &o->n_gen);
        else if (!strcmp(a, "-d")) ok = args_int(argc, argv, &i, 0, 1 << 24, &o->depth);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_str(argc, argv, &i, &threads);
        else if (!strcmp(a, "-r")) ok = args_int(argc, argv, &i, 1, 1000, &o->reps), reps_set = true;
        else if (!strcmp(a, "-ub")) ok = args_int(argc, argv, &i, 1, 1 << 16, &o->ubatch);
        else if (!strcmp(a, "-npp")) ok = args_str(argc, argv, &i, &npp);
        else if (!strcmp(a, "-ntg")) ok = args_str(argc, argv, &i, &ntg);
        else if (!strcmp(a, "-npl")) ok = args_str(argc, argv, &i, &npl);
        else if (!strcmp(a, "-o")) ok = args_str(argc, argv, &i, &fmt);
        else if (!strcmp(a, "--profile")) o->profile = true;
        else if (args_model_flag(argc, argv, &i, &o->mp, &ok) || args_lora_flag(argc, argv, &i, &o->la, &ok)) {
            /* shared flags: parsed (ok says whether the value was good) */
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            return -1;
        } else {
            fprintf(stderr, "tallow bench: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) return 2;
    }
    if (!o->model_path) return fprintf(stderr, "tallow bench: need -m MODEL\n"), 2;
    if (fmt && strcmp(fmt, "md") && strcmp(fmt, "json") && strcmp(fmt, "jsonl"))
        return fprintf(stderr, "tallow bench: -o takes md or json, not '%s'\n", fmt), 2;
    o->json = fmt && strcmp(fmt, "md");
    if (threads ? !bench_list(threads, 1, 1024, o->tlist, &o->nt, "thread") : (o->tlist[o->nt++] = 0, false)) return 2;
    if (npp || ntg || npl) {
        if (!npp || !ntg || !npl) return fprintf(stderr, "tallow bench: batched mode needs -npp, -ntg and -npl\n"), 2;
        if (!bench_list(npp, 0, 1 << 16, o->npp, &o->n_npp, "-npp") ||
            !bench_list(ntg, 0, 1 << 16, o->ntg, &o->n_ntg, "-ntg") ||
            !bench_list(npl, 1, 4096, o->npl, &o->n_npl, "-npl"))
            return 2;
        if (!reps_set) o->reps = 1;
    } else if (o->profile) {
        return fprintf(stderr, "tallow bench: --profile needs batched mode (-npp/-ntg/-npl; -npl 1 times one sequence)\n"), 2;
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.n_prompt = 512, .n_gen = 128, .reps = 5, .ubatch = 512, .mp = tl_model_default_params()};
    int prc = bench_parse(argc, argv, &o);
    if (prc) {
        if (prc > 0) bench_usage(stderr);
        return prc < 0 ? 0 : prc;
    }
    bench_env e = {0};
    if (tl_model_load(o.model_path, &o.mp, &e.m)) {
        fprintf(stderr, "tallow bench: %s\n", tl_last_error());
        return 1;
    }
    if (!args_lora_load(&o.la, e.m, "bench")) {
        tl_model_free(e.m);
        return 1;
    }
    tl_model_get_info(e.m, &e.info);
    e.n_toks = 4096 + o.n_prompt + o.n_gen + o.depth;
    e.toks = malloc((size_t)e.n_toks * sizeof *e.toks);
    int rc = 1;
    if (!e.toks) {
        fprintf(stderr, "tallow bench: out of memory\n");
        goto done;
    }
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int32_t i = 0; i < e.n_toks; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        e.toks[i] = (int32_t)(x % (uint64_t)e.info.n_vocab);
    }
    /* on a GPU: the card's ceilings, measured now, for the floor columns */
    e.gpu = o.mp.backend == TL_BACKEND_CUDA;
    if (e.gpu) {
        if (!tl_model_device_stats(e.m, true, &e.ds)) {
            e.have_ds = true;
            if (!o.json)
                printf("device %s: copy ceiling %.0f GB/s (device-to-device, read + write), f16 GEMM ceiling %.0f "
                       "TFLOP/s (8192^3), measured now; weights %.2f MiB on the device, %.2f MiB read per decode "
                       "step\n",
                       e.ds.name, e.ds.copy_gbs, e.ds.gemm_tflops, e.ds.weight_bytes / 1048576.0,
                       e.ds.decode_bytes / 1048576.0);
        } else {
            /* the probes need ~4 GiB free (less is tried); without them the
             * table still runs, with no floor */
            fprintf(stderr, "tallow bench: warning: device ceilings not measured (%s); no floor columns\n",
                    tl_last_error());
            if (bench_fail(tl_model_device_stats(e.m, false, &e.ds))) goto done;
        }
    }
    rc = o.n_npl ? bench_batched(&o, &e) : bench_plain(&o, &e);
done:
    free(e.toks);
    args_lora_free(&o.la);
    tl_model_free(e.m);
    return rc;
}
