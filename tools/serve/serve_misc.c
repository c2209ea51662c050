/* tools/serve: the small endpoints: /v1/models, /metrics (Prometheus
 * text format) and /lora-adapters. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve.h"

void srv_api_models(srv_server *s, srv_reply *out) {
    out->status = 200;
    out->ctype = "application/json";
    sb_puts(&out->body, "{\"object\":\"list\",\"data\":[{\"id\":");
    sb_json_str(&out->body, s->cfg.model_id, strlen(s->cfg.model_id));
    sb_printf(&out->body,
              ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"tallow\",\"meta\":{\"n_vocab\":%d,"
              "\"n_ctx\":%d,\"n_ctx_train\":%d,\"n_embd\":%d,\"n_params\":%llu}}]}",
              (long)time(NULL), s->info.n_vocab, s->n_seq_ctx, s->info.n_ctx_train, s->info.n_embd,
              (unsigned long long)s->info.n_params);
}

static void metric(srv_buf *b, const char *name, const char *type, const char *help, double v) {
    sb_printf(b, "# HELP tallow_%s %s\n# TYPE tallow_%s %s\ntallow_%s %.17g\n", name, help, name, type, name, v);
}

void srv_api_metrics(srv_server *s, srv_reply *out) {
    pthread_mutex_lock(&s->mu);
    srv_stats st = s->st;
    pthread_mutex_unlock(&s->mu);
    srv_buf *b = &out->body;
    out->status = 200;
    out->ctype = "text/plain; version=0.0.4";
    sb_puts(b, "# HELP tallow_requests_total HTTP requests answered, by status code\n"
               "# TYPE tallow_requests_total counter\n");
    for (int code = 100; code < 600; code++)
        if (st.req_by_status[code])
            sb_printf(b, "tallow_requests_total{status=\"%d\"} %llu\n", code,
                      (unsigned long long)st.req_by_status[code]);
    metric(b, "prompt_tokens_total", "counter", "prompt tokens of admitted requests", (double)st.prompt_tokens);
    metric(b, "prompt_tokens_cached_total", "counter", "prompt tokens whose KV was reused from a cached prefix",
           (double)st.prompt_cached);
    metric(b, "prompt_tokens_evaluated_total", "counter", "prompt tokens prefilled", (double)st.prompt_evaluated);
    metric(b, "generated_tokens_total", "counter", "tokens generated", (double)st.gen_tokens);
    metric(b, "decode_steps_total", "counter", "batched decode steps run", (double)st.steps);
    metric(b, "preemptions_total", "counter", "running requests put back in the queue when the KV cache was full",
           (double)st.preempted);
    metric(b, "decode_seconds_total", "counter", "time spent in decode steps", st.busy_s);
    metric(b, "tokens_per_second", "gauge", "generated tokens per second of decode time",
           st.busy_s > 0 ? (double)st.gen_tokens / st.busy_s : 0.0);
    metric(b, "queue_length", "gauge", "requests waiting for a sequence", st.queue_len);
    metric(b, "sequences_running", "gauge", "sequences running a request", st.running);
    metric(b, "sequences_cached", "gauge", "idle sequences holding a cached prefix", st.cached_seqs);
    metric(b, "kv_blocks_used", "gauge", "KV cache blocks in use", st.kv.n_used);
    metric(b, "kv_blocks_free", "gauge", "KV cache blocks free", st.kv.n_blocks - st.kv.n_used);
    metric(b, "kv_block_size", "gauge", "positions per KV block", st.kv.block_size);
}

static void lora_list_locked(srv_server *s, srv_buf *b) {
    sb_puts(b, "[");
    for (int32_t i = 0; i < s->n_loras; i++) {
        sb_printf(b, "%s{\"id\":%d,\"path\":", i ? "," : "", i);
        sb_json_str(b, s->loras[i].path, strlen(s->loras[i].path));
        sb_puts(b, ",\"scale\":");
        sb_json_num(b, s->loras[i].scale);
        sb_puts(b, "}");
    }
    sb_puts(b, "]");
}

void srv_api_lora_get(srv_server *s, srv_reply *out) {
    out->status = 200;
    out->ctype = "application/json";
    pthread_mutex_lock(&s->mu);
    lora_list_locked(s, &out->body);
    pthread_mutex_unlock(&s->mu);
}

/* body: [{"id", "scale"}, ...]: the default scales of requests that name no
 * adapters; an adapter not listed gets scale 0 (off) */
void srv_api_lora_post(srv_server *s, const char *body, size_t len, srv_reply *out) {
    srv_err e = {0};
    float scale[SRV_MAX_LORA] = {0};
    out->ctype = "application/json";
    const char *end = NULL;
    cJSON *root = srv_utf8_check(body, len) == len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    bool ok = root != NULL;
    if (!ok) srv_err_set(&e, 400, "invalid_request_error", NULL, NULL, "the request body is not valid UTF-8 JSON");
    if (ok && !cJSON_IsArray(root)) {
        srv_err_set(&e, 400, "invalid_request_error", NULL, NULL, "the body must be a list of {\"id\", \"scale\"}");
        ok = false;
    }
    int i = 0;
    for (const cJSON *it = ok ? root->child : NULL; it && ok; it = it->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(it, "scale");
        char param[24];
        snprintf(param, sizeof param, "[%d]", i);
        if (!cJSON_IsNumber(id) || id->valuedouble != floor(id->valuedouble) || id->valuedouble < 0 ||
            id->valuedouble >= s->n_loras) {
            srv_err_set(&e, 400, "invalid_request_error", NULL, param, "entry %d: 'id' must be an adapter id in [0, %d)",
                        i, s->n_loras);
            ok = false;
        } else if (!cJSON_IsNumber(sc) || !isfinite(sc->valuedouble) || fabs(sc->valuedouble) > 1e4) {
            srv_err_set(&e, 400, "invalid_request_error", NULL, param, "entry %d: 'scale' must be a number", i);
            ok = false;
        } else {
            scale[(int)id->valuedouble] = (float)sc->valuedouble;
        }
    }
    cJSON_Delete(root);
    if (!ok) {
        srv_reply_error(out, &e);
        return;
    }
    out->status = 200;
    pthread_mutex_lock(&s->mu);
    for (int32_t k = 0; k < s->n_loras; k++) s->loras[k].scale = scale[k];
    lora_list_locked(s, &out->body);
    pthread_mutex_unlock(&s->mu);
}
