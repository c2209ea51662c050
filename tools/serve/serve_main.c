/* tools/serve: `tallow serve` flags, setup and shutdown (SIGINT/SIGTERM). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../args_lora.h"
#include "../commands.h"
#include "serve.h"

/* used when the model has no template: ChatML, the most common format */
static const char serve_chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: tallow serve -m MODEL.gguf [options]\n"
            "  --host ADDR          address to listen on (default 127.0.0.1)\n"
            "  --port N             port (default 8080; 0: any free one, printed at start)\n"
            "  -np N                sequences decoded together (default 4)\n"
            "  -c N                 KV positions shared by all sequences (default 4096)\n"
            "  --seq-ctx N          longest one sequence may grow (default: -c, capped by the model's)\n"
            "  -b N                 most tokens one step evaluates (default 512)\n"
            "  --chunk N            most prompt tokens one sequence prefills per step (default 256)\n"
            "  --kv-block N         positions per KV block (default 16)\n"
            "  -t, --threads N      CPU threads (default: all cores)\n"
            "  --queue N            requests waiting for a sequence before 503 (default 64)\n"
            "  --api-key KEY        require 'Authorization: Bearer KEY' (all but /health)\n"
            "  --api-key-file F     the same, the key read from file F\n"
            "  --chat-template X    'chatml' or a template file (default: the model's own)\n"
            "  --tool-format F      tool-call syntax: auto (from the template's text), hermes,\n"
            "                       llama3 or mistral (default auto; a template that renders no\n"
            "                       tools gets a Hermes system turn, so only hermes there)\n"
            "  --alias NAME         model id clients use (default: the file name)\n"
            "  --pooling P          embeddings pooling: mean, cls or last (default: the model's\n"
            "                       <arch>.pooling_type, else mean)\n"
            "  --body-max N         largest request body in bytes (default 8388608)\n"
            "  --timeout S          idle connection timeout in seconds (default 60)\n"
            "  --device cpu|cuda    backend (default cpu); -ngl N; -v verbose loading\n" ARGS_LORA_USAGE);
}

typedef struct serve_opts {
    const char *model, *host, *key, *key_file, *tmpl, *alias, *pooling, *tool_format;
    int32_t port, kv_block, seq_ctx;
    tl_model_params mp;
    args_lora lora;
} serve_opts;

/* -1: bad usage, 0: --help, 1: go */
static int serve_parse_args(int argc, char **argv, serve_opts *o, srv_config *c) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        int32_t v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 0;
        if (args_model_flag(argc, argv, &i, &o->mp, &ok) || args_lora_flag(argc, argv, &i, &o->lora, &ok)) {
        } else if (!strcmp(a, "-m")) ok = args_str(argc, argv, &i, &o->model);
        else if (!strcmp(a, "--host")) ok = args_str(argc, argv, &i, &o->host);
        else if (!strcmp(a, "--port")) ok = args_int(argc, argv, &i, 0, 65535, &o->port);
        else if (!strcmp(a, "-np")) ok = args_int(argc, argv, &i, 1, 1024, &c->n_parallel);
        else if (!strcmp(a, "-c")) ok = args_int(argc, argv, &i, 16, 1 << 24, &c->n_ctx);
        else if (!strcmp(a, "--seq-ctx")) ok = args_int(argc, argv, &i, 2, 1 << 24, &o->seq_ctx);
        else if (!strcmp(a, "-b")) ok = args_int(argc, argv, &i, 1, 1 << 16, &c->n_batch);
        else if (!strcmp(a, "--chunk")) ok = args_int(argc, argv, &i, 1, 1 << 16, &c->n_chunk);
        else if (!strcmp(a, "--kv-block")) ok = args_int(argc, argv, &i, 1, 256, &o->kv_block);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = args_int(argc, argv, &i, 1, 1024, &c->n_threads);
        else if (!strcmp(a, "--queue")) ok = args_int(argc, argv, &i, 1, 1 << 20, &c->queue_max);
        else if (!strcmp(a, "--timeout")) ok = args_int(argc, argv, &i, 1, 86400, &c->timeout_s);
        else if (!strcmp(a, "--body-max")) {
            ok = args_int(argc, argv, &i, 1024, 1 << 30, &v);
            if (ok) c->body_max = (size_t)v;
        } else if (!strcmp(a, "--api-key")) ok = args_str(argc, argv, &i, &o->key);
        else if (!strcmp(a, "--api-key-file")) ok = args_str(argc, argv, &i, &o->key_file);
        else if (!strcmp(a, "--chat-template")) ok = args_str(argc, argv, &i, &o->tmpl);
        else if (!strcmp(a, "--alias")) ok = args_str(argc, argv, &i, &o->alias);
        else if (!strcmp(a, "--pooling")) ok = args_str(argc, argv, &i, &o->pooling);
        else if (!strcmp(a, "--tool-format")) ok = args_str(argc, argv, &i, &o->tool_format);
        else {
            fprintf(stderr, "tallow serve: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) return -1;
    }
    if (!o->model) {
        fprintf(stderr, "tallow serve: -m MODEL is required\n");
        return -1;
    }
    if (o->pooling && strcmp(o->pooling, "mean") && strcmp(o->pooling, "cls") && strcmp(o->pooling, "last")) {
        fprintf(stderr, "tallow serve: --pooling must be mean, cls or last, not '%s'\n", o->pooling);
        return -1;
    }
    static const char *const fmts[] = {"hermes", "llama3", "mistral"}; /* tl_tool_format order */
    c->tool_format = -1;
    for (int k = 0; k < 3 && o->tool_format; k++)
        if (!strcmp(o->tool_format, fmts[k])) c->tool_format = k;
    if (o->tool_format && c->tool_format < 0 && strcmp(o->tool_format, "auto")) {
        fprintf(stderr, "tallow serve: --tool-format must be auto, hermes, llama3 or mistral, not '%s'\n",
                o->tool_format);
        return -1;
    }
    return 1;
}

/* the API key from --api-key or the first line of --api-key-file */
static bool serve_key(serve_opts *o, char **own) {
    *own = NULL;
    if (!o->key_file) return true;
    size_t n = 0;
    char *k = args_read_file(o->key_file, &n);
    if (!k) {
        fprintf(stderr, "tallow serve: cannot read --api-key-file %s\n", o->key_file);
        return false;
    }
    k[strcspn(k, "\r\n")] = 0;
    if (!k[0]) {
        fprintf(stderr, "tallow serve: --api-key-file %s is empty\n", o->key_file);
        free(k);
        return false;
    }
    o->key = *own = k;
    return true;
}

static bool serve_template(serve_opts *o, srv_server *s, char **own) {
    *own = NULL;
    if (!o->tmpl) {
        s->cfg.chat_template = tl_model_chat_template(s->model) ? NULL : serve_chatml;
        return true;
    }
    if (!strcmp(o->tmpl, "chatml")) {
        s->cfg.chat_template = serve_chatml;
        return true;
    }
    size_t n = 0;
    *own = args_read_file(o->tmpl, &n);
    if (!*own) {
        fprintf(stderr, "tallow serve: --chat-template: '%s' is neither 'chatml' nor a readable file\n", o->tmpl);
        return false;
    }
    s->cfg.chat_template = *own;
    return true;
}

/* a forced llama3/mistral syntax needs a template that renders the tools
 * (one that does not gets the Hermes system turn, which asks for Hermes) */
static bool serve_tool_format(const srv_server *s) {
    const char *t = s->cfg.chat_template ? s->cfg.chat_template : tl_model_chat_template(s->model);
    if (s->cfg.tool_format <= TL_TOOLS_HERMES || srv_template_has_tools(t)) return true;
    fprintf(stderr, "tallow serve: --tool-format %s: the chat template renders no tools (the server then adds a "
                    "Hermes system turn), so only hermes or auto can apply; pass a --chat-template that renders them\n",
            s->cfg.tool_format == TL_TOOLS_LLAMA3 ? "llama3" : "mistral");
    return false;
}

static char *serve_model_id(const serve_opts *o) {
    if (o->alias) return strdup(o->alias);
    const char *b = strrchr(o->model, '/');
    char *id = strdup(b ? b + 1 : o->model);
    if (!id) return NULL;
    size_t n = strlen(id);
    if (n > 5 && !strcmp(id + n - 5, ".gguf")) id[n - 5] = 0;
    return id;
}

static bool serve_context(serve_opts *o, srv_server *s) {
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = s->cfg.n_ctx;
    cp.n_seq_max = s->cfg.n_parallel;
    cp.n_batch = s->cfg.n_batch;
    cp.n_threads = s->cfg.n_threads;
    cp.kv_block = o->kv_block;
    cp.n_seq_ctx = o->seq_ctx;
    cp.embeddings = true;
    if (tl_context_init(s->model, &cp, &s->ctx) != TL_OK) {
        fprintf(stderr, "tallow serve: %s\n", tl_last_error());
        return false;
    }
    s->n_seq_ctx = tl_context_n_seq_ctx(s->ctx);
    /* one step's batch must fit the pool's positions */
    if (s->cfg.n_batch > tl_context_n_ctx(s->ctx)) s->cfg.n_batch = tl_context_n_ctx(s->ctx);
    if (s->cfg.n_chunk > s->cfg.n_batch) s->cfg.n_chunk = s->cfg.n_batch;
    return true;
}

static bool serve_loras(serve_opts *o, srv_server *s) {
    if (!args_lora_load(&o->lora, s->model, "serve")) return false;
    for (int32_t i = 0; i < o->lora.n; i++) {
        srv_lora *l = &s->loras[i];
        tl_lora_info li;
        tl_lora_get_info(o->lora.use[i].lora, &li);
        snprintf(l->name, sizeof l->name, "%s", li.name);
        snprintf(l->path, sizeof l->path, "%s", o->lora.path[i]);
        l->lora = (tl_lora *)o->lora.use[i].lora;
        l->scale = o->lora.use[i].scale;
    }
    s->n_loras = o->lora.n;
    return true;
}

/* the pooling "<arch>.pooling_type" names (GGUF's values: 1 mean, 2 cls,
 * 3 last); none given, or 0 (none: one vector per token, which the
 * embeddings endpoint cannot return): mean */
static int32_t serve_pooling(const srv_server *s) {
    char key[96];
    int64_t v = 0;
    snprintf(key, sizeof key, "%s.pooling_type", s->info.arch);
    if (tl_model_meta_int(s->model, key, &v) != TL_OK || v < 1 || v > 3) return 1;
    return (int32_t)v;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o = {.host = "127.0.0.1", .port = 8080, .mp = tl_model_default_params()};
    srv_server s = {0};
    s.cfg = (srv_config){.n_parallel = 4, .n_ctx = 4096, .n_batch = 512, .n_chunk = 256, .queue_max = 64,
                         .body_max = 8u << 20, .timeout_s = 60};
    int pr = serve_parse_args(argc, argv, &o, &s.cfg);
    if (pr <= 0) {
        serve_usage(pr ? stderr : stdout);
        return pr ? 2 : 0;
    }
    if (s.cfg.n_chunk > s.cfg.n_batch) s.cfg.n_chunk = s.cfg.n_batch;
    s.pooling = !o.pooling || !strcmp(o.pooling, "mean") ? 1 : !strcmp(o.pooling, "cls") ? 2 : 3;
    char *key_own = NULL, *tmpl_own = NULL, *id = serve_model_id(&o);
    int rc = 1;
    srv_http *h = NULL;
    bool sched = false;
    if (!id || !serve_key(&o, &key_own)) goto done;
    s.cfg.api_key = o.key && o.key[0] ? o.key : NULL;
    s.cfg.model_id = id;
    if (tl_model_load(o.model, &o.mp, &s.model) != TL_OK) {
        fprintf(stderr, "tallow serve: %s\n", tl_last_error());
        goto done;
    }
    tl_model_get_info(s.model, &s.info);
    if (!o.pooling) s.pooling = serve_pooling(&s);
    if (tl_grammar_vocab_init(s.model, &s.gvocab) != TL_OK)
        fprintf(stderr, "tallow serve: no grammars (response_format): %s\n", tl_last_error());
    if (!serve_template(&o, &s, &tmpl_own) || !serve_tool_format(&s) || !serve_context(&o, &s) ||
        !serve_loras(&o, &s))
        goto done;
    if (srv_sched_start(&s) != TL_OK) {
        fprintf(stderr, "tallow serve: cannot start the scheduler (out of memory)\n");
        goto done;
    }
    sched = true;
    /* the threads started from here on inherit the blocked signals; the main
     * thread takes them with sigwait */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int port = 0;
    if (srv_http_start(&s, o.host, o.port, &h, &port) != TL_OK) goto done;
    fprintf(stderr, "tallow serve: %s (%d sequences, %d KV positions, %d per sequence) listening on http://%s:%d\n",
            id, s.cfg.n_parallel, tl_context_n_ctx(s.ctx), s.n_seq_ctx, o.host, port);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "tallow serve: signal %d, shutting down\n", sig);
    rc = 0;
done:
    if (sched) {
        pthread_mutex_lock(&s.mu);
        s.stop = true; /* the scheduler ends every job, so connection threads can finish */
        pthread_cond_signal(&s.sched_cv);
        pthread_mutex_unlock(&s.mu);
    }
    srv_http_stop(h);
    if (sched) srv_sched_stop(&s);
    args_lora_free(&o.lora);
    tl_context_free(s.ctx);
    tl_grammar_vocab_free(s.gvocab);
    tl_model_free(s.model);
    free(key_own);
    free(tmpl_own);
    free(id);
    return rc;
}
