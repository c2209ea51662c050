/* tools/serve: `tallow serve`, an OpenAI-compatible HTTP server.
 *
 * Three parts, one file each, talking to the engine only through tallow.h:
 *   serve_http.c   libmicrohttpd glue: one thread per connection, routing,
 *                  the API key, the body size limit, SSE streaming
 *   serve_parse.c  request JSON -> srv_req (every check, OpenAI-shaped
 *                  errors); pure, so the fuzz target drives it directly
 *   serve_sched.c  the scheduler thread: ONE tl_context, its n_seq_max
 *                  sequences as slots, continuous batching, chunked
 *                  prefill, prefix reuse, cancellation, the bounded queue
 * serve_api.c turns a parsed request into jobs and their results into
 * OpenAI JSON; serve_tools.c does the tool calls (messages for the
 * template, tool_calls results, streamed deltas); serve_buf.c is a growable
 * byte buffer with JSON escaping.
 *
 * Ownership: an HTTP request (srv_call) owns its jobs. The scheduler holds
 * a reference on the call while any of its jobs is queued or running; the
 * connection thread holds one until the response is done. Whoever drops the
 * last one frees it. Everything shared lives under srv->mu. */
#ifndef TL_SERVE_H
#define TL_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tallow.h"

/* ---- byte buffer -------------------------------------------------------- */

typedef struct srv_buf {
    char *p;
    size_t n, cap;
    bool oom; /* an append failed: the content is incomplete */
} srv_buf;

void sb_free(srv_buf *b);
void sb_add(srv_buf *b, const char *s, size_t n);
void sb_puts(srv_buf *b, const char *s);
void sb_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string literal with quotes; bytes that are not valid UTF-8
 * become U+FFFD (token pieces may end inside a character) */
void sb_json_str(srv_buf *b, const char *s, size_t n);
/* f as a JSON number (non-finite: -9999, as logprobs of -inf are usually shown) */
void sb_json_num(srv_buf *b, double f);
/* offset of the first byte that is not valid UTF-8, or n if all are */
size_t srv_utf8_check(const char *s, size_t n);

/* ---- errors --------------------------------------------------------------- */

typedef struct srv_err {
    int http;         /* 400, 401, 404, 413, 503, ... */
    const char *type; /* "invalid_request_error", "authentication_error", ... */
    const char *code; /* NULL or e.g. "model_not_found", "context_length_exceeded" */
    char param[64];   /* the offending field, "" if none */
    char msg[480];
} srv_err;

void srv_err_set(srv_err *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* {"error": {"message", "type", "param", "code"}} */
void srv_err_json(const srv_err *e, srv_buf *out);

/* ---- parsed requests -------------------------------------------------------- */

typedef enum srv_kind { SRV_CHAT, SRV_COMPLETION, SRV_EMBED } srv_kind;

#define SRV_MAX_N 16        /* choices per request (n) */
#define SRV_MAX_PROMPTS 64  /* prompts in one completions/embeddings request */
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_STOP 4
#define SRV_MAX_BIAS 1024   /* logit_bias entries */
#define SRV_MAX_LORA 8       /* adapters on the server and per request */

typedef struct srv_lora_pick {
    int32_t id; /* index into the server's adapters */
    float scale;
} srv_lora_pick;

/* One prompt: text to tokenize or token ids given by the client. */
typedef struct srv_prompt {
    const char *text; /* points into the request's JSON; NULL when tokens */
    size_t len;
    int32_t *tok;     /* malloc'd when the client gave ids */
    int32_t n_tok;
} srv_prompt;

typedef struct srv_req {
    srv_kind kind;
    void *json;                 /* the parsed cJSON tree; strings below point into it */
    const char *model;          /* NULL: not given */
    tl_chat_message *msgs;      /* chat: [n_msgs], content strings owned by msg_buf */
    int32_t n_msgs;
    char **msg_own;             /* chat: contents joined from parts (malloc'd), [n_msgs] */
    srv_prompt prompts[SRV_MAX_PROMPTS];
    int32_t n_prompts;
    int32_t max_tokens;         /* -1: until the context's end */
    tl_sampler_params sp;
    bool seed_given;
    int32_t n;                  /* choices */
    bool stream, include_usage;
    bool logprobs;              /* chat: logprobs true; completions: logprobs given */
    int32_t top_logprobs;
    bool echo;                  /* completions: the prompt comes back before the completion */
    bool ignore_eos;            /* extension: generate past end-of-generation tokens (benchmarks) */
    const char *stop[SRV_MAX_STOP];
    int32_t n_stop;
    float presence_penalty, frequency_penalty;
    tl_logit_bias *bias;        /* logit_bias, malloc'd [n_bias] */
    int32_t n_bias;
    srv_lora_pick lora[SRV_MAX_LORA];
    int32_t n_lora;
    bool lora_given;
    const char *encoding_format; /* embeddings: "float" (default) or "base64" */
    char *gbnf;                 /* response_format json_object / json_schema, or grammar: GBNF, malloc'd */
    const char *gbnf_param;     /* the field it came from, for errors */
    char *tools_json;           /* chat: the `tools` list as JSON text, malloc'd; NULL: none */
    tl_tool_choice tool_choice; /* auto unless tool_choice says otherwise */
    const char *tool_name;      /* TL_TOOL_NAMED: the function */
    bool parallel_tools;        /* parallel_tool_calls (default false, as llama-server) */
} srv_req;

/* Parse and check a body. n_vocab bounds token ids, n_lora adapter ids.
 * false: e says what and where. srv_req_free releases either way. */
bool srv_req_parse(srv_kind kind, const char *body, size_t len, int32_t n_vocab, int32_t n_lora, srv_req *r,
                   srv_err *e);
void srv_req_free(srv_req *r);

/* ---- jobs: one choice of one prompt, what the scheduler runs ------------ */

typedef struct srv_piece {
    char *text;     /* detokenized bytes now complete (may be "") */
    size_t len;
    int32_t tok;
    float logprob;  /* when the job asked for logprobs */
    bool no_lp;     /* an echoed first prompt token: nothing predicted it (logprob null) */
    int32_t n_top;
    int32_t top_tok[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
} srv_piece;

typedef struct srv_call srv_call;

typedef struct srv_job {
    srv_call *call;
    int32_t index;        /* choice index in the response */
    /* input, fixed once queued */
    int32_t *prompt;      /* [n_prompt] */
    int32_t n_prompt;
    bool embed;
    int32_t max_tokens;   /* >= 1, or 0 with echo: only the prompt is scored */
    bool echo;            /* the prompt's pieces come first (completions' echo) */
    srv_piece *echo_buf;  /* [n_echo] while the prompt is prefilled: its tokens' logprobs, then published */
    int32_t n_echo;       /* the prompt's length when queued */
    tl_sampler_params sp; /* sp.logit_bias points at bias */
    tl_logit_bias *bias;  /* [sp.n_logit_bias], malloc'd */
    int32_t top_logprobs; /* -1: no logprobs */
    bool ignore_eos;
    tl_grammar *grammar;  /* NULL: free text; the job owns it */
    tl_stop *stop;        /* the request's stop strings (NULL: none); the scheduler feeds it */
    bool one_call;        /* tools without parallel_tool_calls: end once the grammar's call is complete */
    /* the scheduler's, kept while a preempted job waits to resume */
    tl_sampler *smp;
    tl_detok *dt;
    bool resumed;
    srv_lora_pick lora[SRV_MAX_LORA];
    int32_t n_lora;
    /* output, under srv->mu */
    srv_piece *pieces;
    int32_t n_pieces, cap_pieces, n_read; /* n_read: taken by the connection */
    int32_t lp_sent;      /* streaming with tools: pieces whose logprobs went out */
    size_t lp_bytes;      /* their text's bytes */
    float *embedding;     /* [n_embd] when done */
    int32_t n_gen, n_cached;
    const char *finish;   /* "stop" / "length" once done */
    bool done, cancelled;
    bool fin_sent;        /* streaming: its last chunk went out */
    struct srv_tc_stream *tcs; /* streaming with tools: the connection's parse state */
    srv_err err;          /* err.http != 0: failed */
} srv_job;

struct srv_call {
    srv_kind kind;
    srv_job *jobs;
    int32_t n_jobs;
    int32_t refs;         /* under srv->mu */
    pthread_cond_t cv;    /* signalled when any job has news */
    void *conn;           /* the MHD connection, to notice a closed socket */
    /* for the response */
    char id[40];
    long created;
    bool stream, include_usage, chat, logprobs;
    bool base64;          /* embeddings as base64 of little-endian float32 */
    bool tools;           /* chat with tools: the output is parsed for tool calls */
    tl_tool_format tool_fmt;
    int32_t n_prompt_total;
    int32_t stream_stage; /* serve_api's streaming progress */
    int32_t stream_job;   /* next job whose role chunk is due */
    bool stream_done;
};

/* ---- the server ------------------------------------------------------------ */

typedef struct srv_lora {
    char name[128];
    char path[512];
    tl_lora *lora;
    float scale; /* default scale (POST /lora-adapters changes it) */
} srv_lora;

typedef struct srv_stats {
    uint64_t req_by_status[600];
    uint64_t prompt_tokens, prompt_cached, prompt_evaluated, gen_tokens, steps, preempted;
    double busy_s;          /* time spent in decode steps */
    int32_t queue_len, running, cached_seqs;
    tl_kv_stats kv;
} srv_stats;

typedef struct srv_config {
    int32_t n_parallel;     /* sequences (slots) */
    int32_t n_ctx;          /* total KV positions */
    int32_t n_batch;        /* most tokens one step evaluates */
    int32_t n_chunk;        /* most prompt tokens one sequence prefills per step */
    int32_t n_threads;
    int32_t queue_max;      /* waiting jobs before 503 */
    size_t body_max;        /* bytes */
    int32_t timeout_s;      /* idle connection timeout */
    const char *api_key;    /* NULL: none */
    const char *model_id;
    const char *chat_template; /* template source */
    int32_t tool_format;    /* a tl_tool_format, or -1: picked from the template's text */
} srv_config;

typedef struct srv_server {
    srv_config cfg;
    tl_model *model;
    tl_context *ctx;
    tl_model_info info;
    int32_t n_seq_ctx;
    int32_t pooling;        /* 1 mean, 2 cls, 3 last */
    tl_grammar_vocab *gvocab; /* for response_format / grammar */
    srv_lora loras[SRV_MAX_LORA];
    int32_t n_loras;
    pthread_mutex_t mu;
    pthread_cond_t sched_cv; /* the scheduler waits for work */
    srv_job **queue;         /* FIFO ring [q_cap]: queue_max new jobs + preempted ones */
    int32_t q_cap;
    int32_t q_head, q_len;
    bool stop;
    srv_stats st;
    pthread_t thread;
    uint64_t seed_ctr;
    double t_start;
    void *sched;             /* serve_sched's private state */
} srv_server;

/* scheduler */
tl_status srv_sched_start(srv_server *s);
void srv_sched_stop(srv_server *s);
/* Queue every job of c (all or none). false: the queue is full (503). */
bool srv_submit(srv_server *s, srv_call *c);
/* Mark c's jobs cancelled (the client went away); the scheduler frees their
 * sequences at its next step. Caller holds s->mu. */
void srv_cancel_locked(srv_server *s, srv_call *c);
/* Drop a reference; frees the call at zero. Caller holds s->mu. */
void srv_call_unref_locked(srv_call *c);
srv_call *srv_call_new(srv_kind kind, int32_t n_jobs);

/* api: endpoint bodies. Each fills status + body (JSON) or, for a stream,
 * returns a call the connection streams from with srv_stream_next. */
typedef struct srv_reply {
    int status;
    srv_buf body;
    const char *ctype;
    srv_call *stream; /* non-NULL: stream SSE from this call */
} srv_reply;

void srv_api_generate(srv_server *s, srv_kind kind, const char *body, size_t len, void *conn, srv_reply *out);
void srv_api_models(srv_server *s, srv_reply *out);
void srv_api_metrics(srv_server *s, srv_reply *out);
void srv_api_lora_get(srv_server *s, srv_reply *out);
void srv_api_lora_post(srv_server *s, const char *body, size_t len, srv_reply *out);
void srv_reply_error(srv_reply *out, const srv_err *e);
/* Next SSE bytes of a streaming call into out (blocking until some are
 * ready). false: the stream is over (out may still hold the last bytes). */
bool srv_stream_next(srv_server *s, srv_call *c, srv_buf *out);
/* the connection's socket was closed by the peer */
bool srv_conn_gone(void *conn);

/* tools (serve_tools.c) */
/* The model's tool-call syntax, from its chat template's text. */
tl_tool_format srv_tool_format(const char *tmpl);
/* Whether the template renders `tools` itself. */
bool srv_template_has_tools(const char *tmpl);
/* The messages as JSON for tl_chat_apply_template_json: content parts
 * joined, null content as "", tool_calls' arguments strings parsed to
 * objects (templates index them). fold: the template knows no tools, so
 * describe the tools (tools_json, NULL: none) in the system turn and write
 * the history's calls and results as Hermes text. *out malloc'd. */
bool srv_chat_messages_json(const srv_req *r, bool fold, char **out, srv_err *e);
/* tool_calls of the whole text: *content (NULL when only whitespace is
 * left) and a cJSON array of calls, ids made unique with the call's id. */
void srv_tool_result(const srv_call *c, const char *text, size_t len, char **content, void **calls);
/* Streaming: the next deltas of job j's new text (final: it is done) as
 * JSON members of a chat delta ("content":... and/or "tool_calls":[...])
 * appended to out; false when there is nothing to send. */
bool srv_tc_delta(const srv_call *c, srv_job *j, const char *text, size_t len, bool final, srv_buf *out,
                  bool *any_call);
void srv_tc_free(struct srv_tc_stream *t);
/* Bytes of job j's text that its deltas have given out so far: the content
 * sent, or all of it once a call has started (its tokens are the call's). */
size_t srv_tc_released(const srv_job *j);

/* http */
typedef struct srv_http srv_http;
tl_status srv_http_start(srv_server *s, const char *host, int port, srv_http **out, int *bound_port);
void srv_http_stop(srv_http *h);

double srv_now(void);

#endif
