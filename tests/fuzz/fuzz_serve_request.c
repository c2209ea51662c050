/* tests/fuzz/fuzz_serve_request: libFuzzer harness for `tallow serve`'s
 * request bodies. The first byte picks the endpoint (chat, completions,
 * embeddings), the rest is the body given to srv_req_parse, as the server
 * does; then the error (or the parsed fields) is written back as JSON the
 * way the server answers. Checked: an accepted request's fields are in
 * range (what the scheduler relies on), a rejected one has a 4xx status and
 * a message, and every JSON string the server writes is valid UTF-8 with no
 * raw control bytes, whatever bytes went in. An accepted chat request's
 * messages become the template's JSON (both with and without the tools
 * folded in), which must parse; and the body, taken as model output, is
 * streamed in two pieces through the tool-call scanner, whose deltas must
 * parse as JSON members too.
 * Owns: nothing. Calls: tools/serve (serve_parse.c, serve_buf.c,
 * serve_tools.c), cJSON. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/serve/serve.h"

static void check_json_str(const char *s, size_t n) {
    srv_buf b = {0};
    sb_json_str(&b, s, n);
    if (b.oom) return;
    if (srv_utf8_check(b.p, b.n) != b.n) __builtin_trap(); /* escaping must give valid UTF-8 */
    for (size_t i = 0; i < b.n; i++)
        if ((unsigned char)b.p[i] < 0x20) __builtin_trap(); /* control bytes must be escaped */
    sb_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_kind kind = (srv_kind)(data[0] % 3);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    srv_req r;
    srv_err e = {0};
    if (srv_req_parse(kind, body, len, 49152, 2, &r, &e)) {
        if (r.n < 1 || r.n > SRV_MAX_N || r.n_prompts > SRV_MAX_PROMPTS || r.n_stop > SRV_MAX_STOP ||
            r.n_lora > SRV_MAX_LORA || r.n_bias > SRV_MAX_BIAS || r.top_logprobs < 0 ||
            r.top_logprobs > SRV_MAX_TOP_LOGPROBS || (r.max_tokens < 1 && r.max_tokens != -1))
            __builtin_trap();
        if (kind == SRV_CHAT && r.n_msgs < 1) __builtin_trap();
        if (kind != SRV_CHAT && r.n_prompts < 1) __builtin_trap();
        for (int32_t i = 0; i < r.n_prompts; i++)
            for (int32_t k = 0; k < r.prompts[i].n_tok; k++)
                if (r.prompts[i].tok[k] < 0 || r.prompts[i].tok[k] >= 49152) __builtin_trap();
        for (int32_t i = 0; i < r.n_lora; i++)
            if (r.lora[i].id < 0 || r.lora[i].id >= 2) __builtin_trap();
        for (int32_t i = 0; i < r.n_msgs; i++) check_json_str(r.msgs[i].content, strlen(r.msgs[i].content));
        for (int fold = 0; fold < 2 && kind == SRV_CHAT; fold++) {
            char *mj = NULL;
            srv_err me = {0};
            if (srv_chat_messages_json(&r, fold, &mj, &me)) {
                cJSON *v = cJSON_Parse(mj);
                if (!v || !cJSON_IsArray(v)) __builtin_trap();
                cJSON_Delete(v);
            }
            free(mj);
        }
    } else {
        if (e.http < 400 || e.http > 499 || !e.msg[0]) __builtin_trap();
        srv_buf b = {0};
        srv_err_json(&e, &b);
        if (!b.oom && srv_utf8_check(b.p, b.n) != b.n) __builtin_trap();
        sb_free(&b);
    }
    srv_req_free(&r);
    check_json_str(body, len);
    srv_call c = {.tools = true, .tool_fmt = (tl_tool_format)(data[0] / 3 % 3)};
    memcpy(c.id, "chatcmpl-fuzz", 14);
    srv_job j = {.call = &c};
    size_t half = len / 2;
    for (int step = 0; step < 3; step++) {
        srv_buf d = {0};
        bool any;
        const char *at = step == 0 ? body : body + half;
        size_t n = step == 0 ? half : step == 1 ? len - half : 0;
        if (srv_tc_delta(&c, &j, at, n, step == 2, &d, &any) && !d.oom) {
            srv_buf w = {0};
            sb_puts(&w, "{");
            sb_add(&w, d.p, d.n);
            sb_puts(&w, "}");
            cJSON *v = w.oom ? NULL : cJSON_Parse(w.p);
            if (!w.oom && !v) __builtin_trap();
            cJSON_Delete(v);
            sb_free(&w);
        }
        sb_free(&d);
    }
    srv_tc_free(j.tcs);
    return 0;
}
