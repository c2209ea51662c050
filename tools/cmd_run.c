/* tallow run: load a model, prefill a prompt, stream a continuation.
 *
 * At the end of the context it stops and says so, or with --context-shift
 * drops the oldest half of the tokens after the first --keep ones and goes on
 * (llama.cpp's context shift). tallow's KV cache keeps each sequence at
 * positions 0..len-1, so the shift rewinds the session to the kept prefix and
 * prefills the surviving tail again at its new positions (no RoPE rotation of
 * cached keys). A failed write on stdout stops the run with status 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "args_grammar.h"
#include "args_lora.h"
#include "base/timer.h"
#include "commands.h"
#include "prefill.h"
#include "tallow.h"

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: tallow run -m MODEL.gguf (-p PROMPT | -f FILE) [options]   (-f -: read the prompt from stdin)\n"
            "  -n N                tokens to generate (default 128; -1: until EOS or context end)\n"
            "  -t N                threads (default: all cores)\n"
            "  -c N                context length (default: min(model, 4096))\n"
            "  -b N                prompt batch size (default 512)\n"
            "  --context-shift     at the end of the context drop the oldest half of the tokens after\n"
            "                      the kept ones and go on (default: stop there, with a message)\n"
            "  --keep N            prompt tokens a context shift keeps (default 0, -1: all; BOS always)\n"
            "  --temp X            temperature (default 0.8; 0 = greedy)\n"
            "  --top-k N           (default 40; 0 = off)\n"
            "  --top-p X           (default 0.95; 1 = off)\n"
            "  --min-p X           (default 0.05; 0 = off)\n"
            "  --repeat-penalty X  (default 1.0 = off)\n"
            "  --presence-penalty X --frequency-penalty X  (-2..2, OpenAI's meanings; default 0 = off)\n"
            "  --repeat-last-n N   (default 64)\n"
            "  --seed N            (default 24301)\n"
            "  --ignore-eos        keep generating past end-of-generation tokens\n"
            "  --no-special        do not parse special-token text in the prompt\n"
            "  --device cpu|cuda   backend (default cpu); -ngl N is accepted as --device cuda\n"
            "  --cpu-kernels auto|scalar|avx2|avx512  CPU kernel set (default auto: the best this CPU runs)\n"
            ARGS_SAMPLER_USAGE
            ARGS_GRAMMAR_USAGE
            ARGS_LORA_USAGE
            "  -v                  verbose loading, prompt progress and context shifts\n");
}

/* Write generated text through to stdout; false when the write failed. */
static bool run_write(const char *p, size_t n) {
    if (n && fwrite(p, 1, n, stdout) != n) return false;
    return fflush(stdout) == 0;
}

int cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL;
    int32_t n_predict = 128;
    tl_session_params sp = tl_session_default_params();
    tl_sampler_params smp = tl_sampler_default_params();
    tl_model_params mp = tl_model_default_params();
    smp.seed = 24301;
    bool ignore_eos = false, parse_special = true, ctx_shift = false;
    int32_t keep = 0;
    args_lora la = {0};
    args_grammar ag = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) ok = args_str(argc, argv, &i, &model_path);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) ok = args_str(argc, argv, &i, &prompt);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) ok = args_str(argc, argv, &i, &prompt_file);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) ok = args_int(argc, argv, &i, -1, 1 << 24, &n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &sp.n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) ok = args_int(argc, argv, &i, 1, 1 << 24, &sp.n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) ok = args_int(argc, argv, &i, 1, 1 << 16, &sp.n_batch);
        else if (!strcmp(a, "--context-shift")) ctx_shift = true;
        else if (!strcmp(a, "--keep")) ok = args_int(argc, argv, &i, -1, 1 << 24, &keep);
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--no-special")) parse_special = false;
        else if (args_model_flag(argc, argv, &i, &mp, &ok) || args_sampler_flag(argc, argv, &i, &smp, &ok) ||
                 args_grammar_flag(argc, argv, &i, &ag, &ok) ||
                 args_lora_flag(argc, argv, &i, &la, &ok)) {
            /* shared flags: parsed (ok says whether the value was good) */
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tallow run: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) {
            run_usage(stderr);
            return 2;
        }
    }
    if (!model_path || (!prompt && !prompt_file) || (prompt && prompt_file)) {
        fprintf(stderr, "tallow run: need -m MODEL and exactly one of -p PROMPT / -f FILE\n");
        run_usage(stderr);
        return 2;
    }
    char *file_text = NULL;
    size_t plen;
    if (prompt_file) {
        file_text = args_read_file(prompt_file, &plen);
        if (!file_text) {
            fprintf(stderr, "tallow run: cannot read prompt %s '%s': %s\n", strcmp(prompt_file, "-") ? "file" : "from",
                    strcmp(prompt_file, "-") ? prompt_file : "stdin", strerror(errno));
            return 1;
        }
        prompt = file_text;
    } else {
        plen = strlen(prompt);
    }

    int rc = 1;
    tl_model *m = NULL;
    tl_session *s = NULL;
    tl_sampler *sampler = NULL;
    tl_detok *dt = NULL;
    int32_t *toks = NULL;
    tl_status st;
    int64_t t0 = tl_time_us();
    if ((st = tl_model_load(model_path, &mp, &m))) goto fail;
    int64_t t_load = tl_time_us() - t0;
    if ((st = tl_session_init(m, &sp, &s))) goto fail;
    if (!args_lora_load(&la, m, "run") || !args_lora_attach(&la, s, "run")) goto out;
    tl_model_info info;
    tl_model_get_info(m, &info);
    if (!args_grammar_load(&ag, m, &smp, "run")) goto out;
    if ((st = tl_sampler_init(&smp, info.n_vocab, &sampler))) goto fail;
    if ((st = tl_detok_init(m, &dt))) goto fail;

    int32_t n_ctx = tl_session_n_ctx(s), n_prompt = 0;
    toks = malloc((size_t)n_ctx * sizeof *toks);
    if (!toks) {
        st = TL_ERR_NOMEM;
        fprintf(stderr, "tallow run: out of memory\n");
        goto out;
    }
    st = tl_tokenize(m, prompt, plen, true, parse_special, toks, n_ctx, &n_prompt);
    if (st == TL_ERR_INVALID && n_prompt > n_ctx) {
        fprintf(stderr, "tallow run: prompt is %d tokens, context is %d (use -c)\n", n_prompt, n_ctx);
        goto out;
    }
    if (st) goto fail;
    if (n_prompt == 0) {
        fprintf(stderr, "tallow run: the prompt is empty and the model adds no BOS token\n");
        goto out;
    }
    /* tokens a context shift keeps: --keep of the prompt, after its BOS */
    int32_t n_keep = keep < 0 ? n_prompt : keep + (toks[0] == tl_token_bos(m) ? 1 : 0);
    if (n_keep > n_prompt) n_keep = n_prompt;
    if (ctx_shift && n_keep > n_ctx - 2) {
        fprintf(stderr,
                "tallow run: --keep leaves no room to shift: %d of the %d-token context kept "
                "(lower --keep or raise -c)\n",
                n_keep, n_ctx);
        goto out;
    }

    for (int32_t i = 0; i < n_prompt; i++) tl_sampler_accept(sampler, toks[i]);
    /* after the prompt: the grammar constrains the generated tokens only */
    if (ag.grammar) tl_sampler_set_grammar(sampler, ag.grammar);
    /* the budget completion pressure closes the output in: -n, or what the
     * context holds when it will not shift */
    int32_t room = n_ctx - n_prompt;
    tl_sampler_set_budget(sampler, n_predict >= 0 && (ctx_shift || n_predict < room) ? n_predict : ctx_shift ? -1 : room);
    const float *logits;
    int64_t t1 = tl_time_us();
    if ((st = prefill_eval(s, toks, n_prompt, sp.n_batch, mp.verbose, &logits))) goto fail;
    int64_t t_prompt = tl_time_us() - t1;
    if (!run_write(prompt, plen)) goto write_fail;

    /* toks[0..n_toks) mirrors what the KV cache holds */
    int32_t n_gen = 0, n_toks = n_prompt, n_shifts = 0;
    char buf[256];
    size_t nb;
    const char *rel;
    size_t n_rel;
    bool stopped = false, ctx_full = false;
    int64_t t2 = tl_time_us();
    while (n_predict < 0 || n_gen < n_predict) {
        int32_t tok = tl_sampler_sample(sampler, logits);
        if (tok < 0) {
            fprintf(stderr, "\ntallow run: stopped at a grammar dead end: %s\n", tl_last_error());
            goto out;
        }
        if (!ignore_eos && tl_token_is_eog(m, tok)) break;
        tl_sampler_accept(sampler, tok);
        n_gen++;
        if ((st = tl_detok_push(dt, tok, buf, sizeof buf, &nb))) goto fail;
        if ((st = tl_stop_push(ag.stop, buf, nb, &rel, &n_rel, &stopped))) goto fail;
        if (!run_write(rel, n_rel)) goto write_fail;
        if (stopped || (n_predict >= 0 && n_gen >= n_predict)) break;
        if (n_toks < n_ctx) {
            toks[n_toks++] = tok;
            if ((st = tl_session_eval(s, &tok, 1, &logits))) goto fail;
            continue;
        }
        if (!ctx_shift) {
            ctx_full = true;
            break;
        }
        int32_t n_discard = (n_toks - n_keep) / 2;
        memmove(toks + n_keep, toks + n_keep + n_discard, (size_t)(n_toks - n_keep - n_discard) * sizeof *toks);
        n_toks -= n_discard;
        toks[n_toks++] = tok;
        if (mp.verbose)
            fprintf(stderr, "\n(context shift: dropped %d tokens after the first %d, prefilling %d again)\n", n_discard,
                    n_keep, n_toks - n_keep);
        if ((st = tl_session_rewind(s, n_keep))) goto fail;
        /* a progress line only after the -v message: else the cursor is inside the output's last line */
        if ((st = mp.verbose ? prefill_eval(s, toks + n_keep, n_toks - n_keep, sp.n_batch, true, &logits)
                             : tl_session_eval(s, toks + n_keep, n_toks - n_keep, &logits)))
            goto fail;
        n_shifts++;
    }
    int64_t t_gen = tl_time_us() - t2;
    if ((st = tl_detok_flush(dt, buf, sizeof buf, &nb))) goto fail;
    if (!stopped) {
        if ((st = tl_stop_push(ag.stop, buf, nb, &rel, &n_rel, &stopped))) goto fail;
        if (!run_write(rel, n_rel)) goto write_fail;
        if (!stopped && !(st = tl_stop_flush(ag.stop, &rel, &n_rel)) && !run_write(rel, n_rel)) goto write_fail;
    }
    if (ctx_full) {
        if (n_predict < 0)
            fprintf(stderr, "\ntallow run: the %d-token context is full: stopped after %d generated tokens "
                            "(raise -c, or --context-shift)\n", n_ctx, n_gen);
        else
            fprintf(stderr, "\ntallow run: the %d-token context is full: stopped after %d of %d tokens "
                            "(raise -c, or --context-shift)\n", n_ctx, n_gen, n_predict);
    }
    if (ag.grammar && !stopped && !tl_grammar_can_end(ag.grammar))
        fprintf(stderr, "\ntallow run: the output stopped before the grammar was complete (raise -n)\n");
    if (!run_write("\n", 1)) goto write_fail;
    fprintf(stderr, "\nload: %.1f ms | prompt: %d tokens in %.1f ms (%.2f t/s) | generation: %d tokens in %.1f ms (%.2f t/s)",
            t_load / 1e3, n_prompt, t_prompt / 1e3, n_prompt * 1e6 / (t_prompt ? t_prompt : 1), n_gen, t_gen / 1e3,
            n_gen ? n_gen * 1e6 / (t_gen ? t_gen : 1) : 0.0);
    if (n_shifts) fprintf(stderr, " | %d context shift%s", n_shifts, n_shifts > 1 ? "s" : "");
    fputc('\n', stderr);
    rc = 0;
    goto out;
write_fail:
    fprintf(stderr, "\ntallow run: cannot write the output: %s\n", errno ? strerror(errno) : "write error");
    goto out;
fail:
    fprintf(stderr, "tallow run: %s\n", tl_last_error());
out:
    free(toks);
    free(file_text);
    tl_detok_free(dt);
    tl_sampler_free(sampler);
    tl_session_free(s);
    args_lora_free(&la);
    args_grammar_free(&ag);
    tl_model_free(m);
    return rc;
}
