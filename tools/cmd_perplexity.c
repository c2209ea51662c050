/* tallow perplexity: the reference engine's method, so numbers compare:
 * tokenize the whole text once (BOS as the model asks), cut it into
 * non-overlapping chunks of CTX tokens, evaluate each chunk from an empty
 * cache (its first token replaced by BOS when the model adds one), and score
 * only the second half of each chunk (every scored token has at least CTX/2
 * tokens of context): NLL of token j+1 under the logits at j. Prints a
 * running estimate per chunk and the final PPL with its standard error
 * (ppl * std(nll)/sqrt(count-1)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "args_lora.h"
#include "base/timer.h"
#include "commands.h"
#include "tallow.h"

static void ppl_usage(FILE *f) {
    fprintf(f,
            "usage: tallow perplexity -m MODEL.gguf -f TEXT [options]\n"
            "  -c N        chunk (context) length (default 512)\n"
            "  --chunks N  evaluate at most N chunks (default: all)\n"
            "  -t, --threads N  threads (default: all cores)\n"
            ARGS_LORA_USAGE
            "  -b N        batch size (default: min(512, c))\n");
}

int cmd_perplexity(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL;
    int32_t n_ctx = 512, max_chunks = -1, n_threads = 0, n_batch = 0;
    args_lora la = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m")) ok = args_str(argc, argv, &i, &model_path);
        else if (!strcmp(a, "-f")) ok = args_str(argc, argv, &i, &text_path);
        else if (!strcmp(a, "-c")) ok = args_int(argc, argv, &i, 8, 1 << 20, &n_ctx);
        else if (!strcmp(a, "--chunks")) ok = args_int(argc, argv, &i, 1, 1 << 30, &max_chunks);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &n_threads);
        else if (!strcmp(a, "-b")) ok = args_int(argc, argv, &i, 1, 1 << 16, &n_batch);
        else if (args_lora_flag(argc, argv, &i, &la, &ok)) {
            /* --lora FILE[:SCALE]: parsed (ok says whether it was good) */
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tallow perplexity: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) {
            ppl_usage(stderr);
            return 2;
        }
    }
    if (!model_path || !text_path) {
        fprintf(stderr, "tallow perplexity: need -m MODEL and -f TEXT\n");
        ppl_usage(stderr);
        return 2;
    }
    size_t len;
    char *text = args_read_file(text_path, &len);
    if (!text) {
        fprintf(stderr, "tallow perplexity: cannot read '%s'\n", text_path);
        return 1;
    }
    int rc = 1;
    tl_model *m = NULL;
    tl_session *s = NULL;
    int32_t *toks = NULL;
    float *logits = NULL;
    if (tl_model_load(model_path, NULL, &m)) goto fail;
    tl_model_info info;
    tl_model_get_info(m, &info);
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_batch = n_batch ? n_batch : (n_ctx < 512 ? n_ctx : 512);
    sp.n_threads = n_threads;
    if (tl_session_init(m, &sp, &s)) goto fail;
    if (!args_lora_load(&la, m, "perplexity") || !args_lora_attach(&la, s, "perplexity")) goto out;

    /* a token is at least one byte, so len + 2 (BOS/EOS) bounds the count */
    if (len > (size_t)INT32_MAX - 2) {
        fprintf(stderr, "tallow perplexity: text too large\n");
        goto out;
    }
    int32_t cap = (int32_t)len + 2, n_tok = 0;
    toks = malloc((size_t)cap * sizeof *toks);
    if (!toks) {
        fprintf(stderr, "tallow perplexity: out of memory\n");
        goto out;
    }
    if (tl_tokenize(m, text, len, true, false, toks, cap, &n_tok)) goto fail;
    int32_t n_chunk = n_tok / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunk) n_chunk = max_chunks;
    if (n_chunk < 1) {
        fprintf(stderr, "tallow perplexity: the text has %d tokens, fewer than one chunk of %d (use a smaller -c)\n",
                n_tok, n_ctx);
        goto out;
    }
    const int32_t first = n_ctx / 2, bos = tl_token_bos(m);
    /* does the model add BOS? tokenize nothing and look */
    int32_t probe[4], n_probe = 0;
    bool add_bos = tl_tokenize(m, "", 0, true, false, probe, 4, &n_probe) == TL_OK && n_probe > 0 && probe[0] == bos;
    logits = malloc((size_t)(n_ctx - first) * (size_t)info.n_vocab * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "tallow perplexity: out of memory for %d x %d logits\n", n_ctx - first, info.n_vocab);
        goto out;
    }
    fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring the last %d positions of each\n", n_tok, n_chunk,
            n_ctx, n_ctx - first - 1);
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    int64_t t0 = tl_time_us();
    for (int32_t c = 0; c < n_chunk; c++) {
        int32_t *chunk = toks + (size_t)c * n_ctx;
        int32_t saved = chunk[0];
        if (add_bos) chunk[0] = bos;
        tl_session_rewind(s, 0);
        tl_status st = tl_session_eval(s, chunk, first, NULL);
        if (!st) st = tl_session_eval_all(s, chunk + first, n_ctx - first, logits);
        chunk[0] = saved;
        if (st) goto fail;
        for (int32_t j = 0; j < n_ctx - first - 1; j++) {
            const float *lg = logits + (size_t)j * info.n_vocab;
            float mx = lg[0];
            for (int32_t v = 1; v < info.n_vocab; v++)
                if (lg[v] > mx) mx = lg[v];
            double sum = 0;
            for (int32_t v = 0; v < info.n_vocab; v++) sum += exp((double)lg[v] - mx);
            double lp = (double)lg[chunk[first + j + 1]] - mx - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        if (c == 0) {
            double sec = (tl_time_us() - t0) / 1e6;
            fprintf(stderr, "perplexity: %.2f s per chunk, ETA %.1f min\n", sec, sec * n_chunk / 60);
        }
        printf("[%d]%.4f,", c + 1, exp(nll / count));
        fflush(stdout);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), err = count > 1 && var > 0 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "tallow perplexity: %s\n", tl_last_error());
out:
    free(logits);
    free(toks);
    free(text);
    tl_session_free(s);
    args_lora_free(&la);
    tl_model_free(m);
    return rc;
}
