/* tools/serve: the scheduler thread.
 *
 * It owns the one tl_context. Its n_seq_max sequences are slots; a slot is
 * running a job, or idle and still holding the KV of the last tokens it ran
 * (a cache for prefix reuse). Every step:
 *   1. (under srv->mu) drop cancelled jobs, freeing their sequences at once;
 *      admit queued jobs into idle slots, each starting from the longest
 *      prefix of its prompt that some slot's KV already holds: an idle slot
 *      is truncated to it, a running one's prefix is forked into an idle
 *      slot (sharing the KV blocks); a job waits while the pool's free and
 *      evictable blocks cannot hold its prompt
 *   2. build one batch: one token for every decoding job, then prompt chunks
 *      (at most n_chunk per job, n_batch in all) of the prefilling ones, so
 *      a long prompt never stalls the others' decode for more than a chunk
 *   3. tl_decode; when the pool is full, evict idle caches (least recently
 *      used first), and failing that end the newest prefilling job (503)
 *   4. sample, detokenize, publish pieces to the waiting connections
 * Sampling runs here, so the context and samplers are never shared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

typedef struct sched_slot {
    int32_t seq;
    srv_job *job;         /* running job, NULL: idle */
    int32_t *toks;        /* [n_toks]: the tokens whose KV the sequence holds */
    int32_t n_toks, cap;
    srv_lora_pick lora[SRV_MAX_LORA]; /* adapters that KV was computed with */
    int32_t n_lora;
    bool decoding;        /* the prompt is in; next_tok is due */
    int32_t next_tok;
    tl_sampler *smp;
    tl_detok *dt;
    float *emb;           /* embedding jobs: [n_embd] running sum */
    uint64_t last_used, admitted;
    int32_t b_first, b_n; /* this step's tokens in the batch */
} sched_slot;

typedef struct sched {
    sched_slot *slots;
    int32_t n_slots;
    int32_t *b_tok, *b_seq;
    int8_t *b_lg;
    int32_t b_cap;
    uint64_t tick;
} sched;

/* ---- queue and references (callers hold s->mu) ---------------------------- */

srv_call *srv_call_new(srv_kind kind, int32_t n_jobs) {
    srv_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->jobs = calloc((size_t)n_jobs, sizeof *c->jobs);
    if (!c->jobs) {
        free(c);
        return NULL;
    }
    c->kind = kind;
    c->n_jobs = n_jobs;
    c->refs = 1;
    pthread_cond_init(&c->cv, NULL);
    for (int32_t i = 0; i < n_jobs; i++) c->jobs[i].call = c, c->jobs[i].top_logprobs = -1;
    return c;
}

void srv_call_unref_locked(srv_call *c) {
    if (--c->refs > 0) return;
    for (int32_t i = 0; i < c->n_jobs; i++) {
        srv_job *j = &c->jobs[i];
        for (int32_t k = 0; k < j->n_pieces; k++) free(j->pieces[k].text);
        free(j->pieces);
        free(j->echo_buf);
        free(j->prompt);
        free(j->bias);
        tl_sampler_free(j->smp);
        tl_detok_free(j->dt);
        tl_grammar_free(j->grammar);
        tl_stop_free(j->stop);
        srv_tc_free(j->tcs);
        free(j->embedding);
    }
    pthread_cond_destroy(&c->cv);
    free(c->jobs);
    free(c);
}

bool srv_submit(srv_server *s, srv_call *c) {
    pthread_mutex_lock(&s->mu);
    bool ok = s->q_len + c->n_jobs <= s->cfg.queue_max && !s->stop;
    if (ok) {
        for (int32_t i = 0; i < c->n_jobs; i++) {
            s->queue[(s->q_head + s->q_len) % s->q_cap] = &c->jobs[i];
            s->q_len++;
        }
        c->refs += c->n_jobs;
        s->st.queue_len = s->q_len;
        pthread_cond_signal(&s->sched_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void job_finish_locked(srv_job *j) {
    j->done = true;
    pthread_cond_broadcast(&j->call->cv);
    srv_call_unref_locked(j->call);
}

void srv_cancel_locked(srv_server *s, srv_call *c) {
    int32_t kept = 0, qm = s->q_cap;
    for (int32_t i = 0; i < s->q_len; i++) {
        srv_job *j = s->queue[(s->q_head + i) % qm];
        if (j->call == c) {
            j->cancelled = true;
            job_finish_locked(j);
        } else {
            s->queue[(s->q_head + kept++) % qm] = j;
        }
    }
    s->q_len = kept;
    s->st.queue_len = kept;
    for (int32_t i = 0; i < c->n_jobs; i++) c->jobs[i].cancelled = true;
    pthread_cond_signal(&s->sched_cv);
}

/* ---- slots ------------------------------------------------------------------ */

static bool slot_push(sched_slot *sl, const int32_t *t, int32_t n) {
    if (sl->n_toks + n > sl->cap) {
        int32_t nc = sl->cap ? sl->cap : 256;
        while (nc < sl->n_toks + n) nc *= 2;
        int32_t *nt = realloc(sl->toks, (size_t)nc * sizeof *nt);
        if (!nt) return false;
        sl->toks = nt;
        sl->cap = nc;
    }
    memcpy(sl->toks + sl->n_toks, t, (size_t)n * sizeof *t);
    sl->n_toks += n;
    return true;
}

static void slot_forget(srv_server *s, sched_slot *sl) {
    tl_seq_remove(s->ctx, sl->seq);
    sl->n_toks = 0;
}

/* end the slot's job (caller holds s->mu); keep_kv: leave its KV as a cache */
static void slot_release_locked(srv_server *s, sched_slot *sl, bool keep_kv) {
    sched *sc = s->sched;
    srv_job *j = sl->job;
    tl_sampler_free(sl->smp);
    tl_detok_free(sl->dt);
    free(sl->emb);
    sl->smp = NULL, sl->dt = NULL, sl->emb = NULL;
    sl->job = NULL;
    sl->decoding = false;
    sl->last_used = ++sc->tick;
    if (!keep_kv) slot_forget(s, sl);
    if (j) job_finish_locked(j);
}

static void job_fail_locked(srv_server *s, sched_slot *sl, int http, const char *msg) {
    srv_err_set(&sl->job->err, http, http >= 500 ? "server_error" : "invalid_request_error", NULL, NULL, "%s", msg);
    slot_release_locked(s, sl, false);
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static bool same_lora(const sched_slot *sl, const srv_job *j) {
    if (sl->n_lora != j->n_lora) return false;
    for (int32_t i = 0; i < j->n_lora; i++)
        if (sl->lora[i].id != j->lora[i].id || sl->lora[i].scale != j->lora[i].scale) return false;
    return true;
}

/* free blocks plus those idle caches hold (an upper bound: shared blocks
 * of a cache are freed only when nobody else holds them) */
static int32_t blocks_available(srv_server *s) {
    sched *sc = s->sched;
    tl_kv_stats kv;
    tl_context_kv_stats(s->ctx, &kv);
    int64_t n = kv.n_blocks - kv.n_used;
    for (int32_t i = 0; i < sc->n_slots; i++)
        if (!sc->slots[i].job) n += (sc->slots[i].n_toks + kv.block_size - 1) / kv.block_size;
    return n > kv.n_blocks ? kv.n_blocks : (int32_t)n;
}

static int32_t count_running(const sched *sc) {
    int32_t n = 0;
    for (int32_t i = 0; i < sc->n_slots; i++) n += sc->slots[i].job != NULL;
    return n;
}

static bool slot_setup(srv_server *s, sched_slot *sl, srv_job *j) {
    tl_lora_use use[SRV_MAX_LORA];
    for (int32_t i = 0; i < j->n_lora; i++) use[i] = (tl_lora_use){s->loras[j->lora[i].id].lora, j->lora[i].scale};
    if (tl_seq_set_lora(s->ctx, sl->seq, use, j->n_lora) != TL_OK) return false;
    memcpy(sl->lora, j->lora, sizeof sl->lora);
    sl->n_lora = j->n_lora;
    if (j->embed) {
        sl->emb = calloc((size_t)s->info.n_embd, sizeof *sl->emb);
        return sl->emb != NULL;
    }
    if (j->smp) { /* resuming after preemption: the same sampler, grammar and detokenizer state */
        sl->smp = j->smp, sl->dt = j->dt;
        j->smp = NULL, j->dt = NULL;
        return true;
    }
    if (tl_sampler_init(&j->sp, s->info.n_vocab, &sl->smp) != TL_OK) return false;
    tl_sampler_set_budget(sl->smp, j->max_tokens); /* completion pressure closes the output within max_tokens */
    return tl_sampler_set_grammar(sl->smp, j->grammar) == TL_OK && tl_detok_init(s->model, &sl->dt) == TL_OK;
}

/* an echo whose prompt tokens get logprobs (until the prompt is published) */
static bool echo_scored(const srv_job *j) { return j->echo_buf && j->top_logprobs >= 0; }

/* Place job j (popped from the queue) into an idle slot, reusing the longest
 * cached prefix. false: no room now (the job goes back to the queue's head). */
static bool admit_locked(srv_server *s, srv_job *j) {
    sched *sc = s->sched;
    sched_slot *idle = NULL, *lru = NULL, *busy = NULL;
    /* an echo with logprobs needs every prompt token's logits: no reuse */
    bool all = echo_scored(j);
    int32_t idle_lcp = -1, busy_lcp = 0, cap = all ? 0 : j->n_prompt - 1;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        sched_slot *sl = &sc->slots[i];
        int32_t l = j->embed || !same_lora(sl, j) ? 0 : common_prefix(sl->toks, sl->n_toks, j->prompt, j->n_prompt);
        if (l > cap) l = cap;
        if (sl->job) {
            if (l > busy_lcp) busy_lcp = l, busy = sl;
        } else {
            if (l > idle_lcp || (l == idle_lcp && sl->last_used < idle->last_used)) idle_lcp = l, idle = sl;
            if (!lru || sl->last_used < lru->last_used) lru = sl;
        }
    }
    if (!idle) return false;
    tl_kv_stats kv;
    tl_context_kv_stats(s->ctx, &kv);
    int32_t reuse = busy_lcp > idle_lcp ? busy_lcp : idle_lcp;
    /* a job still prefilling a longer common prefix (the other choices of
     * n, or the same system prompt sent at once): wait for it and fork */
    for (int32_t i = 0; i < sc->n_slots && !j->embed; i++) {
        sched_slot *sl = &sc->slots[i];
        if (!sl->job || sl->decoding || sl->job->embed || !same_lora(sl, j)) continue;
        int32_t l = common_prefix(sl->job->prompt, sl->job->n_prompt, j->prompt, j->n_prompt);
        if ((l > cap ? cap : l) >= reuse + kv.block_size) return false;
    }
    int32_t need = (j->n_prompt - reuse) / kv.block_size + 2;
    if (need > blocks_available(s) && count_running(sc) > 0) return false;
    sched_slot *sl;
    if (busy && busy_lcp > idle_lcp) {
        sl = lru;
        slot_forget(s, sl);
        if (tl_seq_fork(s->ctx, busy->seq, sl->seq, busy_lcp) == TL_OK) slot_push(sl, busy->toks, busy_lcp);
    } else {
        sl = idle;
        if (tl_seq_truncate(s->ctx, sl->seq, idle_lcp) != TL_OK) slot_forget(s, sl);
        else sl->n_toks = idle_lcp;
    }
    sl->job = j;
    sl->admitted = ++sc->tick;
    if (!j->resumed) {
        j->n_cached = sl->n_toks;
        s->st.prompt_tokens += (uint64_t)j->n_prompt;
        s->st.prompt_cached += (uint64_t)sl->n_toks;
    }
    if (!slot_setup(s, sl, j)) job_fail_locked(s, sl, 500, "out of memory setting up the sequence");
    return true;
}

static void admit_all_locked(srv_server *s) {
    sched *sc = s->sched;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        sched_slot *sl = &sc->slots[i];
        if (sl->job && sl->job->cancelled) slot_release_locked(s, sl, false);
    }
    while (s->q_len > 0) {
        srv_job *j = s->queue[s->q_head];
        if (!admit_locked(s, j)) break;
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
    }
    s->st.queue_len = s->q_len;
    int32_t running = 0;
    for (int32_t i = 0; i < sc->n_slots; i++) running += sc->slots[i].job != NULL;
    s->st.running = running;
}

/* ---- one step --------------------------------------------------------------- */

static void batch_add(sched *sc, int32_t tok, int32_t seq, int8_t lg, int32_t *n) {
    sc->b_tok[*n] = tok, sc->b_seq[*n] = seq, sc->b_lg[*n] = lg;
    (*n)++;
}

/* which tokens of an embedding job's chunk keep their hidden state */
static int8_t embed_wants(const srv_server *s, int32_t pos, int32_t n_prompt) {
    if (s->pooling == 2) return pos == 0;
    if (s->pooling == 3) return pos == n_prompt - 1;
    return 1;
}

static int32_t build_batch(srv_server *s) {
    sched *sc = s->sched;
    int32_t n = 0;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        sched_slot *sl = &sc->slots[i];
        sl->b_n = 0;
        if (sl->job && sl->decoding) {
            sl->b_first = n, sl->b_n = 1;
            batch_add(sc, sl->next_tok, sl->seq, 1, &n);
        }
    }
    /* prompt chunks, oldest admission first */
    for (;;) {
        sched_slot *pick = NULL;
        for (int32_t i = 0; i < sc->n_slots; i++) {
            sched_slot *sl = &sc->slots[i];
            if (sl->job && !sl->decoding && sl->b_n == 0 && (!pick || sl->admitted < pick->admitted)) pick = sl;
        }
        int32_t budget = s->cfg.n_batch - n;
        if (!pick || budget <= 0) break;
        srv_job *j = pick->job;
        int32_t k = j->n_prompt - pick->n_toks;
        if (k > s->cfg.n_chunk) k = s->cfg.n_chunk;
        if (k > budget) k = budget;
        pick->b_first = n, pick->b_n = k;
        for (int32_t t = 0; t < k; t++) {
            int32_t pos = pick->n_toks + t;
            int8_t lg = j->embed ? embed_wants(s, pos, j->n_prompt) : pos == j->n_prompt - 1;
            if (echo_scored(j) && pos + 1 < j->n_echo) lg = 1; /* predicts prompt[pos + 1] */
            batch_add(sc, j->prompt[pos], pick->seq, lg, &n);
        }
    }
    return n;
}

/* Preempt a running job: free its sequence and put it back at the head of
 * the queue; its tokens so far (the prompt, what it generated, the token
 * sampled but not yet fed) become its prompt, so on resuming it prefills
 * them again and goes on with the same sampler where it stopped. */
static bool preempt_locked(srv_server *s, sched_slot *sl) {
    srv_job *j = sl->job;
    if (j->embed || s->q_len >= s->q_cap) return false;
    int32_t n = sl->decoding ? sl->n_toks + 1 : j->n_prompt;
    if (sl->decoding) {
        int32_t *np = malloc((size_t)n * sizeof *np);
        if (!np) return false;
        memcpy(np, sl->toks, (size_t)sl->n_toks * sizeof *np);
        np[n - 1] = sl->next_tok;
        free(j->prompt);
        j->prompt = np;
        j->n_prompt = n;
    }
    j->smp = sl->smp, j->dt = sl->dt;
    sl->smp = NULL, sl->dt = NULL;
    j->resumed = true;
    sl->job = NULL;
    sl->decoding = false;
    slot_forget(s, sl);
    s->q_head = (s->q_head + s->q_cap - 1) % s->q_cap;
    s->queue[s->q_head] = j;
    s->q_len++;
    s->st.preempted++;
    return true;
}

/* make room: evict the least recently used idle cache; else preempt the
 * newest job (or, alone, end it with 503). false: nothing left to give up. */
static bool make_room_locked(srv_server *s) {
    sched *sc = s->sched;
    sched_slot *lru = NULL, *newest = NULL;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        sched_slot *sl = &sc->slots[i];
        if (!sl->job && sl->n_toks > 0 && (!lru || sl->last_used < lru->last_used)) lru = sl;
        if (sl->job && (!newest || sl->admitted > newest->admitted)) newest = sl;
    }
    if (lru) {
        slot_forget(s, lru);
        return true;
    }
    if (newest && count_running(sc) > 1 && preempt_locked(s, newest)) return true;
    if (newest) {
        job_fail_locked(s, newest, 503, "the KV cache is full; retry later");
        return true;
    }
    return false;
}

/* log-softmax of logits: the chosen token's logprob and the top k */
static void fill_logprobs(const float *lg, int32_t nv, int32_t tok, int32_t k, srv_piece *p) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < nv; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < nv; i++) sum += exp((double)lg[i] - mx);
    float lse = mx + (float)log(sum);
    p->logprob = lg[tok] - lse;
    p->n_top = 0;
    for (int32_t i = 0; i < nv && k > 0; i++) {
        float v = lg[i];
        if (p->n_top == k && v <= p->top_lp[k - 1]) continue;
        int32_t at = p->n_top < k ? p->n_top++ : k - 1;
        while (at > 0 && p->top_lp[at - 1] < v) {
            p->top_lp[at] = p->top_lp[at - 1], p->top_tok[at] = p->top_tok[at - 1];
            at--;
        }
        p->top_lp[at] = v, p->top_tok[at] = i;
    }
    for (int32_t i = 0; i < p->n_top; i++) p->top_lp[i] -= lse;
}

static bool piece_add_locked(srv_job *j, const srv_piece *p) {
    if (j->n_pieces == j->cap_pieces) {
        int32_t nc = j->cap_pieces ? j->cap_pieces * 2 : 32;
        srv_piece *np = realloc(j->pieces, (size_t)nc * sizeof *np);
        if (!np) return false;
        j->pieces = np;
        j->cap_pieces = nc;
    }
    j->pieces[j->n_pieces++] = *p;
    pthread_cond_broadcast(&j->call->cv);
    return true;
}

static void finish_embed_locked(srv_server *s, sched_slot *sl) {
    srv_job *j = sl->job;
    int32_t ne = s->info.n_embd;
    double norm = 0;
    for (int32_t i = 0; i < ne; i++) norm += (double)sl->emb[i] * sl->emb[i];
    float inv = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
    for (int32_t i = 0; i < ne; i++) sl->emb[i] *= inv;
    j->embedding = sl->emb;
    sl->emb = NULL;
    j->finish = "stop";
    slot_release_locked(s, sl, true);
}

/* p->text := text after the job's stop strings (held back while it may
 * still become one); *stopped once one matched */
static void piece_text(srv_job *j, const char *text, size_t n, srv_piece *p, bool *stopped) {
    const char *out = text;
    size_t n_out = n;
    if (j->stop && tl_stop_push(j->stop, text, n, &out, &n_out, stopped) != TL_OK) n_out = 0;
    p->text = malloc(n_out + 1);
    if (p->text) memcpy(p->text, out, n_out), p->text[n_out] = 0, p->len = n_out;
}

/* one sampled token of a generating job (outside the lock: sampling) */
static void sample_one(srv_server *s, sched_slot *sl, int32_t bi, srv_piece *p, bool *eog, bool *stopped,
                       bool *complete) {
    srv_job *j = sl->job;
    int32_t tok;
    memset(p, 0, sizeof *p);
    bool plain = j->sp.presence_penalty == 0 && j->sp.frequency_penalty == 0 && j->sp.n_logit_bias == 0 &&
                 j->sp.repeat_penalty == 1.0f && !j->grammar;
    if (j->sp.temp <= 0 && j->top_logprobs < 0 && plain) {
        if (tl_context_greedy(s->ctx, bi, &tok) != TL_OK) tok = tl_token_eos(s->model);
    } else {
        const float *lg = tl_context_logits(s->ctx, bi);
        tok = tl_sampler_sample(sl->smp, lg);
        if (tok < 0) { /* the grammar allows nothing more: the output is what it can be */
            p->tok = -1;
            *eog = true;
            return;
        }
        if (j->top_logprobs >= 0) fill_logprobs(lg, s->info.n_vocab, tok, j->top_logprobs, p);
    }
    tl_sampler_accept(sl->smp, tok);
    p->tok = tok;
    *eog = !j->ignore_eos && tl_token_is_eog(s->model, tok);
    /* one tool call asked for and it is complete: nothing more may follow */
    *complete = j->one_call && tl_grammar_is_active(j->grammar) && tl_grammar_can_end(j->grammar);
    if (*eog) return;
    char buf[256];
    size_t n = 0;
    if (tl_detok_push(sl->dt, tok, buf, sizeof buf, &n) != TL_OK) n = 0;
    piece_text(j, buf, n, p, stopped);
}

/* the last text of a finished job: the detokenizer's held bytes, then what
 * the stop matcher still holds (a partial match that never completed) */
static void finish_text_locked(sched_slot *sl, srv_job *j) {
    char buf[64];
    size_t n = 0;
    bool stopped = false;
    srv_piece tail = {.tok = -1};
    if (tl_detok_flush(sl->dt, buf, sizeof buf, &n) != TL_OK) n = 0;
    if (n > 0) {
        piece_text(j, buf, n, &tail, &stopped);
        if (stopped) j->finish = "stop";
        if (!tail.text || !tail.len || !piece_add_locked(j, &tail)) free(tail.text);
    }
    const char *held = NULL;
    size_t n_held = 0;
    if (j->stop && tl_stop_flush(j->stop, &held, &n_held) == TL_OK && n_held > 0) {
        srv_piece rest = {.tok = -1, .text = malloc(n_held + 1), .len = n_held};
        if (rest.text) memcpy(rest.text, held, n_held), rest.text[n_held] = 0;
        if (!rest.text || !piece_add_locked(j, &rest)) free(rest.text);
    }
}

/* echo with logprobs: this chunk's logits score the prompt's next tokens
 * (the logits at position i predict token i + 1) */
static void echo_logprobs(srv_server *s, sched_slot *sl) {
    srv_job *j = sl->job;
    for (int32_t t = 0; t < sl->b_n; t++) {
        int32_t pos = sl->n_toks + t;
        const float *lg = pos + 1 < j->n_echo ? tl_context_logits(s->ctx, sl->b_first + t) : NULL;
        if (lg) fill_logprobs(lg, s->info.n_vocab, j->prompt[pos + 1], j->top_logprobs, &j->echo_buf[pos + 1]);
    }
}

/* the prompt is in: its pieces (text, and logprobs if asked; the first
 * token's are null) become the job's first pieces. A detokenizer of its own,
 * so the completion's text is the same as without echo. */
static void echo_publish(srv_server *s, srv_job *j) {
    tl_detok *dt = NULL;
    bool ok = tl_detok_init(s->model, &dt) == TL_OK;
    for (int32_t i = 0; i < j->n_echo; i++) {
        srv_piece *p = &j->echo_buf[i];
        char buf[256];
        size_t n = 0;
        if (!ok || tl_detok_push(dt, j->prompt[i], buf, sizeof buf, &n) != TL_OK) n = 0;
        if (i == j->n_echo - 1 && ok) { /* bytes of a character the prompt cut short */
            size_t m = 0;
            if (tl_detok_flush(dt, buf + n, sizeof buf - n, &m) == TL_OK) n += m;
        }
        p->tok = j->prompt[i];
        p->no_lp = i == 0;
        if (j->top_logprobs < 0) p->n_top = 0;
        p->text = malloc(n + 1);
        if (p->text) memcpy(p->text, buf, n), p->text[n] = 0, p->len = n;
    }
    tl_detok_free(dt);
    pthread_mutex_lock(&s->mu);
    for (int32_t i = 0; i < j->n_echo; i++)
        if (!piece_add_locked(j, &j->echo_buf[i])) free(j->echo_buf[i].text);
    free(j->echo_buf);
    j->echo_buf = NULL;
    pthread_mutex_unlock(&s->mu);
}

static void after_decode(srv_server *s) {
    sched *sc = s->sched;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        sched_slot *sl = &sc->slots[i];
        if (!sl->job || sl->b_n == 0) continue;
        srv_job *j = sl->job;
        if (sl->decoding) {
            slot_push(sl, &sl->next_tok, 1);
        } else {
            if (j->embed)
                for (int32_t t = 0; t < sl->b_n; t++) {
                    const float *h = sc->b_lg[sl->b_first + t] ? tl_context_embedding(s->ctx, sl->b_first + t) : NULL;
                    for (int32_t d = 0; h && d < s->info.n_embd; d++) sl->emb[d] += h[d];
                }
            if (echo_scored(j)) echo_logprobs(s, sl);
            slot_push(sl, j->prompt + sl->n_toks, sl->b_n);
            pthread_mutex_lock(&s->mu);
            s->st.prompt_evaluated += (uint64_t)sl->b_n;
            pthread_mutex_unlock(&s->mu);
            if (sl->n_toks < j->n_prompt) continue; /* more chunks to go */
        }
        if (j->embed) {
            pthread_mutex_lock(&s->mu);
            finish_embed_locked(s, sl);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        if (j->echo_buf) echo_publish(s, j);
        if (j->max_tokens == 0) { /* echo only: the prompt scored, nothing generated */
            pthread_mutex_lock(&s->mu);
            j->finish = "length";
            slot_release_locked(s, sl, true);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        srv_piece p;
        bool eog, stopped = false, complete = false;
        sample_one(s, sl, sl->b_first + sl->b_n - 1, &p, &eog, &stopped, &complete);
        pthread_mutex_lock(&s->mu);
        if (p.tok >= 0) s->st.gen_tokens++, j->n_gen++;
        const char *fin = NULL;
        if (eog || stopped || complete) fin = "stop";
        else if (j->n_gen >= j->max_tokens || sl->n_toks + 1 >= s->n_seq_ctx) fin = "length";
        if (!eog && !piece_add_locked(j, &p)) free(p.text);
        if (fin) {
            j->finish = fin;
            if (!stopped) finish_text_locked(sl, j);
            slot_release_locked(s, sl, true);
        } else {
            sl->next_tok = p.tok;
            sl->decoding = true;
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static void step(srv_server *s) {
    sched *sc = s->sched;
    for (;;) {
        int32_t n = build_batch(s);
        if (n == 0) return;
        tl_batch b = {.n_tokens = n, .token = sc->b_tok, .seq_id = sc->b_seq, .logits = sc->b_lg};
        double t0 = srv_now();
        tl_status st = tl_decode(s->ctx, &b);
        if (st == TL_OK) {
            pthread_mutex_lock(&s->mu);
            s->st.busy_s += srv_now() - t0;
            s->st.steps++;
            pthread_mutex_unlock(&s->mu);
            after_decode(s);
            return;
        }
        pthread_mutex_lock(&s->mu);
        bool again = st == TL_ERR_FULL && make_room_locked(s);
        if (st != TL_ERR_FULL) {
            char msg[300];
            snprintf(msg, sizeof msg, "decode failed: %s", tl_last_error());
            fprintf(stderr, "tallow serve: %s\n", msg);
            for (int32_t i = 0; i < sc->n_slots; i++)
                if (sc->slots[i].job && sc->slots[i].b_n) job_fail_locked(s, &sc->slots[i], 500, msg);
        }
        pthread_mutex_unlock(&s->mu);
        if (!again) return;
    }
}

static void snapshot_locked(srv_server *s) {
    sched *sc = s->sched;
    tl_context_kv_stats(s->ctx, &s->st.kv);
    int32_t running = 0, cached = 0;
    for (int32_t i = 0; i < sc->n_slots; i++) {
        running += sc->slots[i].job != NULL;
        cached += !sc->slots[i].job && sc->slots[i].n_toks > 0;
    }
    s->st.running = running;
    s->st.cached_seqs = cached;
}

static void *sched_main(void *arg) {
    srv_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        admit_all_locked(s);
        snapshot_locked(s);
        if (s->st.running == 0) {
            pthread_cond_wait(&s->sched_cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        step(s);
        pthread_mutex_lock(&s->mu);
    }
    /* shutting down: end every job */
    sched *sc = s->sched;
    for (int32_t i = 0; i < sc->n_slots; i++)
        if (sc->slots[i].job) job_fail_locked(s, &sc->slots[i], 503, "the server is shutting down");
    while (s->q_len > 0) {
        srv_job *j = s->queue[s->q_head];
        srv_err_set(&j->err, 503, "server_error", NULL, NULL, "the server is shutting down");
        job_finish_locked(j);
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

tl_status srv_sched_start(srv_server *s) {
    sched *sc = calloc(1, sizeof *sc);
    if (!sc) return TL_ERR_NOMEM;
    sc->n_slots = s->cfg.n_parallel;
    sc->slots = calloc((size_t)sc->n_slots, sizeof *sc->slots);
    sc->b_cap = s->cfg.n_batch;
    sc->b_tok = malloc((size_t)sc->b_cap * sizeof *sc->b_tok);
    sc->b_seq = malloc((size_t)sc->b_cap * sizeof *sc->b_seq);
    sc->b_lg = malloc((size_t)sc->b_cap);
    s->q_cap = s->cfg.queue_max + sc->n_slots;
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->sched = sc;
    if (!sc->slots || !sc->b_tok || !sc->b_seq || !sc->b_lg || !s->queue) return TL_ERR_NOMEM;
    for (int32_t i = 0; i < sc->n_slots; i++) sc->slots[i].seq = i;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->sched_cv, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s)) return TL_ERR_NOMEM;
    return TL_OK;
}

void srv_sched_stop(srv_server *s) {
    sched *sc = s->sched;
    if (!sc) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    for (int32_t i = 0; i < sc->n_slots; i++) free(sc->slots[i].toks);
    free(sc->slots);
    free(sc->b_tok);
    free(sc->b_seq);
    free(sc->b_lg);
    free(sc);
    free(s->queue);
    s->sched = NULL;
}
