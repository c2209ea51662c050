/* tools/serve: the generation endpoints. A parsed request becomes one call
 * with a job per (prompt, choice); the connection thread then waits for the
 * jobs (or streams them) and writes OpenAI's JSON shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve.h"

void srv_reply_error(srv_reply *out, const srv_err *e) {
    out->status = e->http;
    out->ctype = "application/json";
    out->body.n = 0;
    srv_err_json(e, &out->body);
}

/* tokens of text; *out malloc'd */
static bool tokenize(srv_server *s, const char *text, size_t len, bool add_special, int32_t **out, int32_t *n,
                     srv_err *e) {
    int32_t cap = (int32_t)(len < (1u << 28) ? len : (1u << 28)) + 8;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *t = malloc((size_t)cap * sizeof *t);
        if (!t) break;
        tl_status st = tl_tokenize(s->model, text, len, add_special, true, t, cap, n);
        if (st == TL_OK) {
            *out = t;
            return true;
        }
        free(t);
        if (st != TL_ERR_INVALID || *n <= cap) {
            srv_err_set(e, 400, "invalid_request_error", NULL, NULL, "tokenizing failed: %s", tl_last_error());
            return false;
        }
        cap = *n;
    }
    srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory tokenizing");
    return false;
}

static const char *template_src(const srv_server *s) {
    return s->cfg.chat_template ? s->cfg.chat_template : tl_model_chat_template(s->model);
}

static bool tools_on(const srv_req *r) { return r->tools_json && r->tool_choice != TL_TOOL_NONE; }

/* the messages (and tools, unless tool_choice is none: the model is not
 * shown what it may not call) through the chat template */
static bool chat_prompt(srv_server *s, const srv_req *r, int32_t **tok, int32_t *n, srv_err *e) {
    char *text = NULL, *mj = NULL;
    size_t len = 0;
    bool own = srv_template_has_tools(template_src(s));
    if (!srv_chat_messages_json(r, !own, &mj, e)) return false;
    tl_status st = tl_chat_apply_template_json(s->model, s->cfg.chat_template, mj,
                                               own && tools_on(r) ? r->tools_json : NULL, true, &text, &len);
    free(mj);
    if (st != TL_OK) {
        srv_err_set(e, 400, "invalid_request_error", NULL, "messages", "the chat template failed: %s",
                    tl_last_error());
        return false;
    }
    bool ok = tokenize(s, text, len, false, tok, n, e);
    free(text);
    return ok;
}

/* every job its own stop matcher (its held text is per choice) */
static bool make_stops(const srv_req *r, srv_call *c, srv_err *e) {
    for (int32_t i = 0; i < c->n_jobs && r->n_stop; i++)
        if (tl_stop_init(r->stop, r->n_stop, &c->jobs[i].stop) != TL_OK) {
            srv_err_set(e, 400, "invalid_request_error", NULL, "stop", "%s", tl_last_error());
            return false;
        }
    return true;
}

/* every job its own compiled grammar (its parse state is per choice): the
 * request's, or the tool calls' in the model's syntax, lazy (from the
 * call's opening text) for tool_choice auto */
static bool make_grammars(srv_server *s, const srv_req *r, srv_call *c, srv_err *e) {
    char *tool_gbnf = NULL;
    const char *const *trig = NULL;
    int32_t n_trig = 0;
    if (tools_on(r)) {
        if (r->gbnf) {
            srv_err_set(e, 400, "invalid_request_error", NULL, "tools", "'tools' cannot be combined with '%s'",
                        r->gbnf_param);
            return false;
        }
        if (tl_tool_grammar(c->tool_fmt, r->tools_json, strlen(r->tools_json), r->tool_choice, r->tool_name,
                            &tool_gbnf, &trig, &n_trig) != TL_OK) {
            srv_err_set(e, 400, "invalid_request_error", NULL, "tools", "%s", tl_last_error());
            return false;
        }
    }
    const char *g = tool_gbnf ? tool_gbnf : r->gbnf;
    const char *param = tool_gbnf ? "tools" : r->gbnf_param;
    bool ok = true;
    if (g && !s->gvocab) {
        srv_err_set(e, 500, "server_error", NULL, param, "grammars are unavailable: no vocabulary index");
        ok = false;
    }
    for (int32_t i = 0; i < c->n_jobs && g && ok; i++) {
        tl_grammar **gr = &c->jobs[i].grammar;
        c->jobs[i].one_call = tool_gbnf && !r->parallel_tools;
        if (tl_grammar_init(s->gvocab, g, strlen(g), NULL, NULL, gr) != TL_OK ||
            (n_trig && tl_grammar_set_triggers(*gr, trig, n_trig) != TL_OK)) {
            srv_err_set(e, 400, "invalid_request_error", NULL, param, "%s", tl_last_error());
            ok = false;
        }
    }
    free(tool_gbnf);
    return ok;
}

static void fill_job(srv_server *s, const srv_req *r, srv_job *j, int32_t index, uint64_t seed) {
    j->index = index;
    j->embed = r->kind == SRV_EMBED;
    int32_t room = s->n_seq_ctx - j->n_prompt;
    j->max_tokens = r->max_tokens >= 0 && r->max_tokens < room ? r->max_tokens : room;
    j->echo = r->echo;
    j->n_echo = r->echo ? j->n_prompt : 0;
    if (r->echo) j->echo_buf = calloc((size_t)j->n_prompt, sizeof *j->echo_buf);
    j->sp = r->sp;
    j->sp.seed = seed;
    /* OpenAI's penalties count every token generated so far (the prompt not) */
    j->sp.presence_penalty = r->presence_penalty;
    j->sp.frequency_penalty = r->frequency_penalty;
    if (r->presence_penalty != 0 || r->frequency_penalty != 0)
        j->sp.repeat_last_n = j->max_tokens < (1 << 20) ? j->max_tokens : (1 << 20);
    j->sp.logit_bias = NULL;
    j->sp.n_logit_bias = 0;
    if (r->n_bias && (j->bias = malloc((size_t)r->n_bias * sizeof *j->bias))) {
        memcpy(j->bias, r->bias, (size_t)r->n_bias * sizeof *j->bias);
        j->sp.logit_bias = j->bias;
        j->sp.n_logit_bias = r->n_bias;
    }
    j->top_logprobs = r->logprobs ? r->top_logprobs : -1;
    j->ignore_eos = r->ignore_eos;
    if (r->lora_given) {
        memcpy(j->lora, r->lora, sizeof j->lora);
        j->n_lora = r->n_lora;
    } else {
        for (int32_t i = 0; i < s->n_loras; i++)
            if (s->loras[i].scale != 0) j->lora[j->n_lora++] = (srv_lora_pick){i, s->loras[i].scale};
    }
}

/* the request's call: prompts tokenized and checked, jobs filled */
static srv_call *make_call(srv_server *s, const srv_req *r, srv_err *e) {
    int32_t *ptok[SRV_MAX_PROMPTS] = {0}, pn[SRV_MAX_PROMPTS] = {0};
    int32_t np = r->kind == SRV_CHAT ? 1 : r->n_prompts;
    srv_call *c = NULL;
    bool ok = true;
    for (int32_t i = 0; i < np && ok; i++) {
        const srv_prompt *p = &r->prompts[i];
        if (r->kind == SRV_CHAT) ok = chat_prompt(s, r, &ptok[i], &pn[i], e);
        else if (p->tok) {
            ptok[i] = malloc((size_t)p->n_tok * sizeof(int32_t));
            ok = ptok[i] != NULL;
            if (ok) memcpy(ptok[i], p->tok, (size_t)p->n_tok * sizeof(int32_t)), pn[i] = p->n_tok;
            else srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        } else ok = tokenize(s, p->text, p->len, true, &ptok[i], &pn[i], e);
        const char *param = r->kind == SRV_CHAT ? "messages" : r->kind == SRV_EMBED ? "input" : "prompt";
        if (ok && pn[i] == 0) {
            srv_err_set(e, 400, "invalid_request_error", NULL, param, "the prompt is empty (0 tokens)");
            ok = false;
        }
        if (ok && pn[i] >= s->n_seq_ctx + (r->kind == SRV_EMBED)) {
            srv_err_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                        "the prompt has %d tokens; the context holds %d per sequence", pn[i], s->n_seq_ctx);
            ok = false;
        }
    }
    int32_t nch = r->kind == SRV_EMBED ? 1 : r->n;
    if (ok) c = srv_call_new(r->kind, np * nch);
    if (ok && !c) srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (c) {
        pthread_mutex_lock(&s->mu);
        uint64_t seed = r->seed_given ? r->sp.seed : (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull + ++s->seed_ctr;
        for (int32_t i = 0; i < np; i++)
            for (int32_t k = 0; k < nch; k++) {
                srv_job *j = &c->jobs[i * nch + k];
                j->n_prompt = pn[i];
                j->prompt = k == nch - 1 ? ptok[i] : malloc((size_t)pn[i] * sizeof(int32_t));
                if (k == nch - 1) ptok[i] = NULL;
                else if (j->prompt) memcpy(j->prompt, ptok[i], (size_t)pn[i] * sizeof(int32_t));
                else j->n_prompt = 0;
                fill_job(s, r, j, i * nch + k, seed + (uint64_t)k);
            }
        pthread_mutex_unlock(&s->mu); /* fill_job reads the adapters' scales */
        for (int32_t i = 0; i < np; i++) c->n_prompt_total += pn[i];
        for (int32_t i = 0; i < c->n_jobs; i++)
            if (c->jobs[i].echo && (!c->jobs[i].echo_buf || !c->jobs[i].prompt)) {
                srv_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
                pthread_mutex_lock(&s->mu);
                srv_call_unref_locked(c);
                pthread_mutex_unlock(&s->mu);
                c = NULL;
                break;
            }
    }
    for (int32_t i = 0; i < np; i++) free(ptok[i]);
    return c;
}

static bool all_done_locked(const srv_call *c) {
    for (int32_t i = 0; i < c->n_jobs; i++)
        if (!c->jobs[i].done) return false;
    return true;
}

static void timed_wait_locked(srv_server *s, srv_call *c, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&c->cv, &s->mu, &ts);
}

/* ---- JSON of results --------------------------------------------------------- */

static void json_token(srv_buf *b, srv_server *s, int32_t tok) {
    size_t n = 0;
    const char *t = tl_token_text(s->model, tok, &n);
    sb_json_str(b, t ? t : "", t ? n : 0);
}

static void json_token_bytes(srv_buf *b, srv_server *s, int32_t tok) {
    size_t n = 0;
    const unsigned char *t = (const unsigned char *)tl_token_text(s->model, tok, &n);
    sb_puts(b, "[");
    for (size_t i = 0; t && i < n; i++) sb_printf(b, i ? ",%u" : "%u", t[i]);
    sb_puts(b, "]");
}

/* logprobs of pieces [from, to) */
static void json_logprobs(srv_buf *b, srv_server *s, const srv_call *c, const srv_job *j, int32_t from, int32_t to) {
    if (j->top_logprobs < 0) {
        sb_puts(b, "null");
        return;
    }
    bool first = true;
    if (c->chat) {
        sb_puts(b, "{\"content\":[");
        for (int32_t i = from; i < to; i++) {
            const srv_piece *p = &j->pieces[i];
            if (p->tok < 0) continue;
            sb_puts(b, first ? "{\"token\":" : ",{\"token\":");
            first = false;
            json_token(b, s, p->tok);
            sb_puts(b, ",\"logprob\":");
            sb_json_num(b, p->logprob);
            sb_puts(b, ",\"bytes\":");
            json_token_bytes(b, s, p->tok);
            sb_puts(b, ",\"top_logprobs\":[");
            for (int32_t k = 0; k < p->n_top; k++) {
                sb_puts(b, k ? ",{\"token\":" : "{\"token\":");
                json_token(b, s, p->top_tok[k]);
                sb_puts(b, ",\"logprob\":");
                sb_json_num(b, p->top_lp[k]);
                sb_puts(b, ",\"bytes\":");
                json_token_bytes(b, s, p->top_tok[k]);
                sb_puts(b, "}");
            }
            sb_puts(b, "]}");
        }
        sb_puts(b, "]}");
        return;
    }
    srv_buf toks = {0}, lps = {0}, tops = {0}, offs = {0};
    size_t off = 0;
    for (int32_t i = 0; i < from; i++) off += j->pieces[i].len;
    for (int32_t i = from; i < to; i++) {
        const srv_piece *p = &j->pieces[i];
        if (p->tok < 0) continue;
        const char *sep = first ? "" : ",";
        first = false;
        sb_puts(&toks, sep), json_token(&toks, s, p->tok);
        sb_puts(&lps, sep);
        if (p->no_lp) sb_puts(&lps, "null");
        else sb_json_num(&lps, p->logprob);
        sb_puts(&offs, sep), sb_printf(&offs, "%zu", off);
        sb_puts(&tops, sep);
        if (p->no_lp) {
            sb_puts(&tops, "null");
            off += p->len;
            continue;
        }
        sb_puts(&tops, "{");
        for (int32_t k = 0; k < p->n_top; k++) {
            if (k) sb_puts(&tops, ",");
            json_token(&tops, s, p->top_tok[k]);
            sb_puts(&tops, ":");
            sb_json_num(&tops, p->top_lp[k]);
        }
        sb_puts(&tops, "}");
        off += p->len;
    }
    sb_printf(b, "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s],\"text_offset\":[%s]}",
              toks.p ? toks.p : "", lps.p ? lps.p : "", tops.p ? tops.p : "", offs.p ? offs.p : "");
    sb_free(&toks), sb_free(&lps), sb_free(&tops), sb_free(&offs);
}

static void json_text(srv_buf *b, const srv_job *j, int32_t from, int32_t to) {
    srv_buf t = {0};
    for (int32_t i = from; i < to; i++) sb_add(&t, j->pieces[i].text ? j->pieces[i].text : "", j->pieces[i].len);
    sb_json_str(b, t.p ? t.p : "", t.n);
    sb_free(&t);
}

static void json_usage(srv_buf *b, const srv_call *c) {
    int32_t gen = 0, cached = 0;
    for (int32_t i = 0; i < c->n_jobs; i++) gen += c->jobs[i].n_gen;
    for (int32_t i = 0; i < c->n_jobs; i++) cached = c->jobs[i].n_cached > cached ? c->jobs[i].n_cached : cached;
    sb_printf(b,
              "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
              "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
              c->n_prompt_total, gen, c->n_prompt_total + gen, cached);
}

static void json_head(srv_buf *b, srv_server *s, const srv_call *c, const char *object) {
    sb_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%ld,\"model\":", c->id, object, c->created);
    sb_json_str(b, s->cfg.model_id, strlen(s->cfg.model_id));
}

static void json_final(srv_buf *b, srv_server *s, const srv_call *c) {
    json_head(b, s, c, c->chat ? "chat.completion" : "text_completion");
    sb_puts(b, ",\"choices\":[");
    for (int32_t i = 0; i < c->n_jobs; i++) {
        const srv_job *j = &c->jobs[i];
        sb_printf(b, "%s{\"index\":%d,", i ? "," : "", j->index);
        const char *finish = j->finish ? j->finish : "stop";
        if (c->chat && c->tools) {
            srv_buf t = {0};
            for (int32_t k = 0; k < j->n_pieces; k++) sb_add(&t, j->pieces[k].text ? j->pieces[k].text : "", j->pieces[k].len);
            char *content;
            void *calls;
            srv_tool_result(c, t.p ? t.p : "", t.n, &content, &calls);
            sb_free(&t);
            sb_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if (content) sb_json_str(b, content, strlen(content));
            else sb_puts(b, "null");
            char *cj = cJSON_GetArraySize(calls) ? cJSON_PrintUnformatted(calls) : NULL;
            if (cj) sb_printf(b, ",\"tool_calls\":%s", cj), finish = "tool_calls";
            sb_puts(b, "},");
            free(cj);
            free(content);
            cJSON_Delete(calls);
        } else if (c->chat) {
            sb_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            json_text(b, j, 0, j->n_pieces);
            sb_puts(b, "},");
        } else {
            sb_puts(b, "\"text\":");
            json_text(b, j, 0, j->n_pieces);
            sb_puts(b, ",");
        }
        sb_puts(b, "\"logprobs\":");
        json_logprobs(b, s, c, j, 0, j->n_pieces);
        sb_printf(b, ",\"finish_reason\":\"%s\"}", finish);
    }
    sb_puts(b, "],\"usage\":");
    json_usage(b, c);
    sb_puts(b, "}");
}

/* "..." : base64 of the floats as little-endian float32 (what OpenAI's
 * encoding_format base64 returns; x86 is little-endian) */
static void json_base64_f32(srv_buf *b, const float *v, int32_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)v;
    size_t len = (size_t)n * sizeof(float);
    sb_puts(b, "\"");
    for (size_t i = 0; i < len; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
        char q[4] = {tab[x >> 18 & 63], tab[x >> 12 & 63], i + 1 < len ? tab[x >> 6 & 63] : '=',
                     i + 2 < len ? tab[x & 63] : '='};
        sb_add(b, q, 4);
    }
    sb_puts(b, "\"");
}

static void json_embeddings(srv_buf *b, srv_server *s, const srv_call *c) {
    sb_puts(b, "{\"object\":\"list\",\"data\":[");
    for (int32_t i = 0; i < c->n_jobs; i++) {
        const srv_job *j = &c->jobs[i];
        sb_printf(b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", j->index);
        if (c->base64) {
            json_base64_f32(b, j->embedding, j->embedding ? s->info.n_embd : 0);
        } else {
            sb_puts(b, "[");
            for (int32_t d = 0; d < s->info.n_embd && j->embedding; d++) {
                if (d) sb_puts(b, ",");
                sb_json_num(b, j->embedding[d]);
            }
            sb_puts(b, "]");
        }
        sb_puts(b, "}");
    }
    sb_puts(b, "],\"model\":");
    sb_json_str(b, s->cfg.model_id, strlen(s->cfg.model_id));
    sb_printf(b, ",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", c->n_prompt_total, c->n_prompt_total);
}

/* ---- endpoints ---------------------------------------------------------------- */

void srv_api_generate(srv_server *s, srv_kind kind, const char *body, size_t len, void *conn, srv_reply *out) {
    srv_req r;
    srv_err e = {0};
    out->ctype = "application/json";
    srv_call *c = NULL;
    bool ok = srv_req_parse(kind, body, len, s->info.n_vocab, s->n_loras, &r, &e);
    if (ok && r.model && strcmp(r.model, s->cfg.model_id)) {
        srv_err_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                    "the model '%.100s' does not exist; this server has '%.100s'", r.model, s->cfg.model_id);
        ok = false;
    }
    if (ok) ok = (c = make_call(s, &r, &e)) != NULL;
    if (ok) {
        c->tools = tools_on(&r);
        c->tool_fmt = s->cfg.tool_format >= 0                 ? (tl_tool_format)s->cfg.tool_format
                      : srv_template_has_tools(template_src(s)) ? srv_tool_format(template_src(s))
                                                                : TL_TOOLS_HERMES;
    }
    if (ok) ok = make_stops(&r, c, &e) && make_grammars(s, &r, c, &e);
    if (ok) {
        c->conn = conn;
        c->chat = kind == SRV_CHAT;
        c->stream = r.stream && kind != SRV_EMBED;
        c->include_usage = r.include_usage;
        c->logprobs = r.logprobs;
        c->base64 = kind == SRV_EMBED && !strcmp(r.encoding_format, "base64");
        c->created = (long)time(NULL);
        static const char *const pre[] = {"chatcmpl", "cmpl", "embd"};
        pthread_mutex_lock(&s->mu);
        snprintf(c->id, sizeof c->id, "%s-%lx%04llx", pre[kind], (long)c->created,
                 (unsigned long long)(++s->seed_ctr & 0xFFFF));
        pthread_mutex_unlock(&s->mu);
    }
    srv_req_free(&r);
    if (ok && !srv_submit(s, c)) {
        srv_err_set(&e, 503, "server_error", "queue_full", NULL,
                    "the server is busy: %d requests are waiting already; retry later", s->cfg.queue_max);
        ok = false;
    }
    if (!ok) {
        if (c) {
            pthread_mutex_lock(&s->mu);
            srv_call_unref_locked(c);
            pthread_mutex_unlock(&s->mu);
        }
        srv_reply_error(out, &e);
        return;
    }
    if (c->stream) {
        out->status = 200;
        out->ctype = "text/event-stream";
        out->stream = c;
        return;
    }
    pthread_mutex_lock(&s->mu);
    while (!all_done_locked(c)) {
        if (srv_conn_gone(conn)) {
            srv_cancel_locked(s, c);
            srv_call_unref_locked(c);
            pthread_mutex_unlock(&s->mu);
            out->status = 0; /* nobody to answer */
            return;
        }
        timed_wait_locked(s, c, 50);
    }
    const srv_err *fail = NULL;
    for (int32_t i = 0; i < c->n_jobs && !fail; i++)
        if (c->jobs[i].err.http) fail = &c->jobs[i].err;
    if (fail) srv_reply_error(out, fail);
    else {
        out->status = 200;
        if (kind == SRV_EMBED) json_embeddings(&out->body, s, c);
        else json_final(&out->body, s, c);
    }
    srv_call_unref_locked(c);
    pthread_mutex_unlock(&s->mu);
}

/* ---- streaming ------------------------------------------------------------------ */

static void chunk_open(srv_buf *b, srv_server *s, const srv_call *c) {
    sb_puts(b, "data: ");
    json_head(b, s, c, c->chat ? "chat.completion.chunk" : "text_completion");
    sb_puts(b, ",\"choices\":[");
}

/* a chunk of job j's pieces [from, to), finish: its finish_reason or NULL */
static void chunk_job(srv_buf *b, srv_server *s, const srv_call *c, const srv_job *j, int32_t from, int32_t to,
                      const char *finish, bool role) {
    chunk_open(b, s, c);
    sb_printf(b, "{\"index\":%d,", j->index);
    if (c->chat) {
        if (role) sb_puts(b, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},");
        else if (from == to) sb_puts(b, "\"delta\":{},");
        else sb_puts(b, "\"delta\":{\"content\":"), json_text(b, j, from, to), sb_puts(b, "},");
    } else {
        sb_puts(b, "\"text\":");
        json_text(b, j, from, to);
        sb_puts(b, ",");
    }
    sb_puts(b, "\"logprobs\":");
    if (from < to) json_logprobs(b, s, c, j, from, to);
    else sb_puts(b, "null");
    if (finish) sb_printf(b, ",\"finish_reason\":\"%s\"}]}\n\n", finish);
    else sb_puts(b, ",\"finish_reason\":null}]}\n\n");
}

/* with tools: the logprobs of the pieces whose text the deltas gave out
 * since the last time (all that are left at the end), or null */
static void tool_logprobs(srv_buf *b, srv_server *s, const srv_call *c, srv_job *j, int32_t to, bool end) {
    size_t rel = srv_tc_released(j);
    int32_t from = j->lp_sent;
    while (j->lp_sent < to && (end || j->lp_bytes + j->pieces[j->lp_sent].len <= rel))
        j->lp_bytes += j->pieces[j->lp_sent++].len;
    if (j->lp_sent > from && j->top_logprobs >= 0) json_logprobs(b, s, c, j, from, j->lp_sent);
    else sb_puts(b, "null");
}

/* with tools: content and tool_calls deltas of pieces [from, to), then the
 * finish chunk; each chunk's logprobs are those of the tokens it released
 * (content held back while it may open a call gets them when it goes out) */
static void tool_chunks(srv_buf *b, srv_server *s, const srv_call *c, srv_job *j, int32_t from, int32_t to) {
    srv_buf t = {0}, d = {0};
    for (int32_t i = from; i < to; i++) sb_add(&t, j->pieces[i].text ? j->pieces[i].text : "", j->pieces[i].len);
    bool any_call = false;
    for (int pass = 0; pass < 1 + j->done; pass++) {
        d.n = 0;
        bool final = pass == 1;
        if (!srv_tc_delta(c, j, final ? "" : (t.p ? t.p : ""), final ? 0 : t.n, final, &d, &any_call)) continue;
        chunk_open(b, s, c);
        sb_printf(b, "{\"index\":%d,\"delta\":{", j->index);
        sb_add(b, d.p, d.n);
        sb_puts(b, "},\"logprobs\":");
        tool_logprobs(b, s, c, j, to, final);
        sb_puts(b, ",\"finish_reason\":null}]}\n\n");
    }
    if (j->done) {
        chunk_open(b, s, c);
        sb_printf(b, "{\"index\":%d,\"delta\":{},\"logprobs\":", j->index);
        tool_logprobs(b, s, c, j, to, true);
        sb_printf(b, ",\"finish_reason\":\"%s\"}]}\n\n", any_call ? "tool_calls" : j->finish ? j->finish : "stop");
    }
    sb_free(&t);
    sb_free(&d);
}

static bool any_text(const srv_job *j, int32_t from, int32_t to) {
    for (int32_t i = from; i < to; i++)
        if (j->pieces[i].len || j->pieces[i].tok >= 0) return true;
    return false;
}

bool srv_stream_next(srv_server *s, srv_call *c, srv_buf *out) {
    pthread_mutex_lock(&s->mu);
    bool more = true;
    for (;;) {
        if (c->stream_done) {
            more = false;
            break;
        }
        if (c->chat && c->stream_job < c->n_jobs) { /* the role chunks first */
            for (; c->stream_job < c->n_jobs; c->stream_job++)
                chunk_job(out, s, c, &c->jobs[c->stream_job], 0, 0, NULL, true);
            break;
        }
        bool all_fin = true;
        for (int32_t i = 0; i < c->n_jobs; i++) {
            srv_job *j = &c->jobs[i];
            if (j->fin_sent) continue;
            int32_t from = j->n_read, to = j->n_pieces;
            if (j->err.http) {
                sb_puts(out, "data: ");
                srv_err_json(&j->err, out);
                sb_puts(out, "\n\n");
                j->fin_sent = true;
                continue;
            }
            if (c->tools) {
                if (to > from || j->done) tool_chunks(out, s, c, j, from, to);
            } else {
                if (to > from && any_text(j, from, to)) chunk_job(out, s, c, j, from, to, NULL, false);
                if (j->done) chunk_job(out, s, c, j, to, to, j->finish ? j->finish : "stop", false);
            }
            j->n_read = to;
            if (j->done) j->fin_sent = true;
            else all_fin = false;
        }
        if (all_fin) {
            if (c->include_usage) {
                chunk_open(out, s, c);
                sb_puts(out, "],\"usage\":");
                json_usage(out, c);
                sb_puts(out, "}\n\n");
            }
            sb_puts(out, "data: [DONE]\n\n");
            c->stream_done = true;
            break;
        }
        if (out->n) break;
        if (srv_conn_gone(c->conn)) {
            srv_cancel_locked(s, c);
            c->stream_done = true;
            more = false;
            break;
        }
        timed_wait_locked(s, c, 50);
    }
    pthread_mutex_unlock(&s->mu);
    return more;
}
