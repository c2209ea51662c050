/* tallow chat: an interactive multi-turn chat in the terminal.
 *
 * Each turn renders the model's chat template for the whole conversation
 * and tokenizes it; only the tokens after the longest common prefix with
 * what the KV cache already holds are evaluated (the session is rewound to
 * that point first), so earlier turns are not prefilled again. Replies
 * stream as they are sampled. Ctrl-C (SIGINT) stops the current reply and
 * keeps the conversation (the partial reply stays in it); at the prompt it
 * just cancels the line. Ctrl-D (EOF) exits cleanly; /help lists the slash commands. When the conversation
 * outgrows the context, the oldest turns (after the system message) are
 * dropped. Uses only the public API (tallow.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "args_grammar.h"
#include "args_lora.h"
#include "base/timer.h"
#include "commands.h"
#include "prefill.h"
#include "tallow.h"

/* used when the model has no template: ChatML, the most common format */
static const char chat_chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* the slash commands, handled here and never sent to the model */
#define CHAT_COMMANDS_HELP                                        \
    "  /help, /?      list these commands\n"                     \
    "  /reset         clear the conversation (keeps --system)\n" \
    "  /exit, /quit   leave (as Ctrl-D)\n"

static volatile sig_atomic_t chat_sigint;

static void chat_on_sigint(int sig) {
    (void)sig;
    chat_sigint = 1;
}

static void chat_usage(FILE *f) {
    fprintf(f,
            "usage: tallow chat -m MODEL.gguf [options]\n"
            "  --system TEXT       system message\n"
            "  --template FILE     chat template to use instead of the model's\n"
            "  -n N                max tokens per reply (default 512; -1: until end of turn)\n"
            "  -t N / -c N / -b N  threads / context length / prompt batch size\n"
            "  --temp X --top-k N --top-p X --min-p X --repeat-penalty X --presence-penalty X\n"
            "  --frequency-penalty X --repeat-last-n N --seed N\n"
            "  --device cpu|cuda   backend (default cpu)\n"
            "  --cpu-kernels auto|scalar|avx2|avx512  CPU kernel set (default auto: the best this CPU runs)\n"
            "  --stats             after each reply print tokens prefilled/reused and speed to stderr\n"
            ARGS_SAMPLER_USAGE
            ARGS_GRAMMAR_USAGE
            ARGS_LORA_USAGE
            "  -v                  verbose loading\n"
            "In the chat: Ctrl-C stops a reply, Ctrl-D exits, a line ending in \\ continues.\n"
            CHAT_COMMANDS_HELP);
}

typedef struct chat_hist {
    tl_chat_message *m;
    int32_t n, cap;
} chat_hist;

static bool hist_push(chat_hist *h, const char *role, const char *content) {
    if (h->n == h->cap) {
        int32_t nc = h->cap ? h->cap * 2 : 16;
        tl_chat_message *nm = realloc(h->m, (size_t)nc * sizeof *nm);
        if (!nm) return false;
        h->m = nm;
        h->cap = nc;
    }
    char *c = strdup(content);
    if (!c) return false;
    h->m[h->n].role = role; /* roles are string literals */
    h->m[h->n].content = c;
    h->n++;
    return true;
}

static void hist_drop(chat_hist *h, int32_t i) {
    free((char *)h->m[i].content);
    memmove(h->m + i, h->m + i + 1, (size_t)(h->n - i - 1) * sizeof *h->m);
    h->n--;
}

/* Read one input line (a trailing backslash continues it). Returns 1 with
 * *out malloc'd, 0 on EOF, -1 when interrupted by Ctrl-C. */
static int chat_read_line(char **out) {
    *out = NULL;
    char *acc = NULL;
    size_t acc_len = 0;
    for (;;) {
        char *line = NULL;
        size_t cap = 0;
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            bool intr = errno == EINTR || chat_sigint;
            free(line);
            clearerr(stdin);
            if (intr) {
                free(acc);
                return -1;
            }
            if (acc) { /* EOF after a continuation: use what we have */
                *out = acc;
                return 1;
            }
            return 0;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        bool more = n > 0 && line[n - 1] == '\\';
        if (more) line[--n] = 0;
        char *na = realloc(acc, acc_len + (size_t)n + 2);
        if (!na) {
            free(line);
            free(acc);
            return 0;
        }
        acc = na;
        memcpy(acc + acc_len, line, (size_t)n);
        acc_len += (size_t)n;
        if (more) acc[acc_len++] = '\n';
        acc[acc_len] = 0;
        free(line);
        if (!more) {
            *out = acc;
            return 1;
        }
    }
}

/* growable reply text */
typedef struct chat_text {
    char *p;
    size_t n, cap;
} chat_text;

static void text_add(chat_text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        while (nc < t->n + n + 1) nc *= 2;
        char *np = realloc(t->p, nc);
        if (!np) return; /* keep what we have; the text on screen is complete */
        t->p = np;
        t->cap = nc;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}

int cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system_msg = NULL, *tmpl_path = NULL;
    int32_t n_predict = 512;
    tl_session_params sp = tl_session_default_params();
    tl_sampler_params smp = tl_sampler_default_params();
    tl_model_params mp = tl_model_default_params();
    smp.seed = 24301;
    bool stats = false;
    args_lora la = {0};
    args_grammar ag = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) ok = args_str(argc, argv, &i, &model_path);
        else if (!strcmp(a, "--system")) ok = args_str(argc, argv, &i, &system_msg);
        else if (!strcmp(a, "--template")) ok = args_str(argc, argv, &i, &tmpl_path);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) ok = args_int(argc, argv, &i, -1, 1 << 24, &n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &sp.n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) ok = args_int(argc, argv, &i, 16, 1 << 24, &sp.n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) ok = args_int(argc, argv, &i, 1, 1 << 16, &sp.n_batch);
        else if (!strcmp(a, "--stats")) stats = true;
        else if (args_model_flag(argc, argv, &i, &mp, &ok) || args_sampler_flag(argc, argv, &i, &smp, &ok) ||
                 args_grammar_flag(argc, argv, &i, &ag, &ok) || args_lora_flag(argc, argv, &i, &la, &ok)) {
            /* shared flags: parsed (ok says whether the value was good) */
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tallow chat: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) {
            chat_usage(stderr);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "tallow chat: need -m MODEL\n");
        chat_usage(stderr);
        return 2;
    }

    int rc = 1;
    tl_model *m = NULL;
    tl_session *s = NULL;
    tl_sampler *sampler = NULL;
    tl_detok *dt = NULL;
    int32_t *toks = NULL, *cache = NULL;
    char *tmpl_file = NULL, *prompt = NULL, *line = NULL;
    chat_hist hist = {0};
    chat_text reply = {0};
    tl_status st;
    const char *tmpl = NULL;

    if (tmpl_path) {
        size_t tl;
        tmpl_file = args_read_file(tmpl_path, &tl);
        if (!tmpl_file) {
            fprintf(stderr, "tallow chat: cannot read template '%s'\n", tmpl_path);
            return 1;
        }
        tmpl = tmpl_file;
    }
    if ((st = tl_model_load(model_path, &mp, &m))) goto fail;
    if ((st = tl_session_init(m, &sp, &s))) goto fail;
    if (!args_lora_load(&la, m, "chat") || !args_lora_attach(&la, s, "chat")) goto out;
    tl_model_info info;
    tl_model_get_info(m, &info);
    if (!args_grammar_load(&ag, m, &smp, "chat")) goto out;
    if ((st = tl_sampler_init(&smp, info.n_vocab, &sampler))) goto fail;
    if ((st = tl_detok_init(m, &dt))) goto fail;
    if (!tmpl && !tl_model_chat_template(m)) {
        fprintf(stderr, "tallow chat: the model has no chat template; using ChatML (--template FILE to choose)\n");
        tmpl = chat_chatml;
    }
    int32_t n_ctx = tl_session_n_ctx(s), n_cached = 0;
    toks = malloc((size_t)n_ctx * sizeof *toks);
    cache = malloc((size_t)n_ctx * sizeof *cache);
    if (!toks || !cache) {
        fprintf(stderr, "tallow chat: out of memory\n");
        goto out;
    }
    if (system_msg && !hist_push(&hist, "system", system_msg)) {
        fprintf(stderr, "tallow chat: out of memory\n");
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = chat_on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read returns EINTR */
    struct sigaction old_sa;
    sigaction(SIGINT, &sa, &old_sa);

    bool tty = isatty(STDIN_FILENO);
    fprintf(stderr,
            "tallow chat: %s (%s, %d-token context). Ctrl-C stops a reply, Ctrl-D exits, /help lists commands.\n",
            info.name ? info.name : model_path, info.arch ? info.arch : "?", n_ctx);

    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        chat_sigint = 0;
        free(line);
        int r = chat_read_line(&line);
        if (r == 0) {
            if (tty) printf("\n");
            break;
        }
        if (r < 0) {
            printf("\n");
            if (tty) fprintf(stderr, "(input cancelled; Ctrl-D exits)\n");
            fflush(stdout);
            continue;
        }
        if (line[0] == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
            fputs(CHAT_COMMANDS_HELP, stderr);
            continue;
        }
        if (!strcmp(line, "/reset")) {
            while (hist.n > (system_msg ? 1 : 0)) hist_drop(&hist, hist.n - 1);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (!hist_push(&hist, "user", line)) {
            fprintf(stderr, "tallow chat: out of memory\n");
            goto out;
        }

        /* render + tokenize the whole conversation; drop old turns if too long */
        int32_t n_new = 0;
        bool fits = false;
        for (;;) {
            free(prompt);
            prompt = NULL;
            size_t plen;
            st = tl_chat_apply_template(m, tmpl, hist.m, hist.n, true, &prompt, &plen);
            if (st) break;
            st = tl_tokenize(m, prompt, plen, false, true, toks, n_ctx, &n_new);
            if (st == TL_OK && n_new + 8 < n_ctx) {
                fits = true;
                break;
            }
            if (st != TL_OK && st != TL_ERR_INVALID) break;
            st = TL_OK;
            int32_t first = system_msg ? 1 : 0;
            if (hist.n - first <= 1) break; /* only the new message left */
            hist_drop(&hist, first);        /* oldest user turn ... */
            if (hist.n - first > 1 && strcmp(hist.m[first].role, "user")) hist_drop(&hist, first); /* ... and its reply */
            fprintf(stderr, "(context full: dropped the oldest turn)\n");
        }
        if (st) {
            fprintf(stderr, "tallow chat: %s\n", tl_last_error());
            hist_drop(&hist, hist.n - 1);
            continue;
        }
        if (!fits) {
            fprintf(stderr, "tallow chat: the message does not fit in the %d-token context\n", n_ctx);
            hist_drop(&hist, hist.n - 1);
            continue;
        }

        if (n_new == 0) {
            fprintf(stderr, "tallow chat: the chat template rendered nothing\n");
            hist_drop(&hist, hist.n - 1);
            continue;
        }
        /* reuse the KV cache up to the common prefix */
        int32_t common = 0;
        while (common < n_cached && common < n_new && cache[common] == toks[common]) common++;
        if (common == n_new) common--; /* evaluate at least one token to get logits */
        if (common < tl_session_pos(s) && (st = tl_session_rewind(s, common))) goto fail;
        n_cached = common;
        const float *logits;
        int64_t t0 = tl_time_us();
        st = prefill_eval(s, toks + common, n_new - common, sp.n_batch, mp.verbose, &logits);
        if (st) goto fail;
        memcpy(cache + common, toks + common, (size_t)(n_new - common) * sizeof *toks);
        n_cached = n_new;
        int64_t t_prompt = tl_time_us() - t0;
        /* the prompt feeds the penalties only; each reply starts the grammar anew */
        tl_sampler_set_grammar(sampler, NULL);
        tl_sampler_reset(sampler);
        for (int32_t i = 0; i < n_new; i++) tl_sampler_accept(sampler, toks[i]);
        if (ag.grammar) {
            tl_grammar_reset(ag.grammar);
            tl_sampler_set_grammar(sampler, ag.grammar);
        }
        /* completion pressure's budget: -n, or what the context still holds */
        tl_sampler_set_budget(sampler, n_predict >= 0 && n_predict < n_ctx - n_new ? n_predict : n_ctx - n_new);
        tl_stop_reset(ag.stop);
        const char *rel;
        size_t n_rel;
        bool stopped = false;

        /* stream the reply */
        reply.n = 0;
        if (reply.p) reply.p[0] = 0;
        char buf[256];
        size_t nb;
        int32_t n_gen = 0;
        bool interrupted = false, ctx_full = false;
        int64_t t1 = tl_time_us();
        while (n_predict < 0 || n_gen < n_predict) {
            if (chat_sigint) {
                interrupted = true;
                break;
            }
            int32_t tok = tl_sampler_sample(sampler, logits);
            if (tok < 0) {
                fprintf(stderr, "\n(reply stopped at a grammar dead end: %s)", tl_last_error());
                break;
            }
            if (tl_token_is_eog(m, tok)) break;
            tl_sampler_accept(sampler, tok);
            n_gen++;
            if ((st = tl_detok_push(dt, tok, buf, sizeof buf, &nb))) goto fail;
            if ((st = tl_stop_push(ag.stop, buf, nb, &rel, &n_rel, &stopped))) goto fail;
            fwrite(rel, 1, n_rel, stdout);
            fflush(stdout);
            text_add(&reply, rel, n_rel);
            if (stopped) break;
            if (n_cached >= n_ctx) {
                ctx_full = true;
                break;
            }
            if ((st = tl_session_eval(s, &tok, 1, &logits))) goto fail;
            cache[n_cached++] = tok;
        }
        if ((st = tl_detok_flush(dt, buf, sizeof buf, &nb))) goto fail;
        if (!stopped && !(st = tl_stop_push(ag.stop, buf, nb, &rel, &n_rel, &stopped))) {
            fwrite(rel, 1, n_rel, stdout);
            text_add(&reply, rel, n_rel);
            if (!stopped && !(st = tl_stop_flush(ag.stop, &rel, &n_rel))) {
                fwrite(rel, 1, n_rel, stdout);
                text_add(&reply, rel, n_rel);
            }
        }
        if (st) goto fail;
        int64_t t_gen = tl_time_us() - t1;
        printf("\n");
        fflush(stdout);
        if (interrupted) fprintf(stderr, "(reply stopped)\n");
        if (ctx_full) fprintf(stderr, "(context full: reply cut)\n");
        if (stats)
            fprintf(stderr, "[prompt: %d tokens, %d reused from cache, %d prefilled in %.1f ms | reply: %d tokens, %.2f t/s]\n",
                    n_new, common, n_new - common, t_prompt / 1e3, n_gen, n_gen ? n_gen * 1e6 / (t_gen ? t_gen : 1) : 0.0);
        if (interrupted && reply.n == 0) {
            hist_drop(&hist, hist.n - 1); /* nothing was said: forget the question */
            continue;
        }
        if (!hist_push(&hist, "assistant", reply.p ? reply.p : "")) {
            fprintf(stderr, "tallow chat: out of memory\n");
            goto out;
        }
    }
    sigaction(SIGINT, &old_sa, NULL);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "tallow chat: %s\n", tl_last_error());
out:
    for (int32_t i = 0; i < hist.n; i++) free((char *)hist.m[i].content);
    free(hist.m);
    free(reply.p);
    free(line);
    free(prompt);
    free(toks);
    free(cache);
    free(tmpl_file);
    tl_detok_free(dt);
    tl_sampler_free(sampler);
    tl_session_free(s);
    args_lora_free(&la);
    args_grammar_free(&ag);
    tl_model_free(m);
    return rc;
}
