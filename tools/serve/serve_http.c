/* tools/serve: the HTTP layer on libmicrohttpd.
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a handler
 * may block: a non-streaming request waits in its handler for its jobs, and
 * a streaming response's reader waits for the next pieces. Both poll the
 * socket while they wait, so a client that goes away is noticed within
 * ~50 ms and its sequences are freed; a failed write ends the response and
 * its free callback cancels the jobs too. Bodies are capped (413 up front
 * from Content-Length, or once the bytes pass the cap) and idle
 * connections time out. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "serve.h"

struct srv_http {
    struct MHD_Daemon *d;
};

typedef struct conn_state {
    srv_buf body;
    bool too_big;
} conn_state;

typedef struct stream_state {
    srv_server *s;
    srv_call *call;
    srv_buf pend;
    size_t off;
    bool ended;
} stream_state;

bool srv_conn_gone(void *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_state *st = cls;
    (void)pos;
    while (st->off == st->pend.n) {
        if (st->ended) return st->call->stream_done ? MHD_CONTENT_READER_END_OF_STREAM
                                                    : MHD_CONTENT_READER_END_WITH_ERROR;
        st->pend.n = 0, st->off = 0;
        if (!srv_stream_next(st->s, st->call, &st->pend)) st->ended = true;
        if (st->pend.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t k = st->pend.n - st->off;
    if (k > max) k = max;
    memcpy(buf, st->pend.p + st->off, k);
    st->off += k;
    return (ssize_t)k;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    srv_server *s = st->s;
    pthread_mutex_lock(&s->mu);
    bool finished = true;
    for (int32_t i = 0; i < st->call->n_jobs; i++) finished &= st->call->jobs[i].done;
    if (!finished) srv_cancel_locked(s, st->call);
    srv_call_unref_locked(st->call);
    pthread_mutex_unlock(&s->mu);
    sb_free(&st->pend);
    free(st);
}

static enum MHD_Result send_reply(srv_server *s, struct MHD_Connection *conn, srv_reply *r) {
    if (r->status == 0) return MHD_NO; /* the client left: close */
    pthread_mutex_lock(&s->mu);
    if (r->status >= 100 && r->status < 600) s->st.req_by_status[r->status]++;
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *resp;
    if (r->stream) {
        stream_state *st = calloc(1, sizeof *st);
        if (!st) {
            pthread_mutex_lock(&s->mu);
            srv_cancel_locked(s, r->stream);
            srv_call_unref_locked(r->stream);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        st->s = s, st->call = r->stream;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
        if (!resp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (r->body.oom) {
            sb_free(&r->body);
            r->status = 500;
            sb_puts(&r->body, "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                              "\"code\":null}}");
        }
        resp = MHD_create_response_from_buffer(r->body.n, r->body.p ? r->body.p : (char *)"", MHD_RESPMEM_MUST_COPY);
        sb_free(&r->body);
        if (!resp) return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_error(srv_server *s, struct MHD_Connection *conn, int http, const char *type,
                                  const char *code, const char *msg) {
    srv_err e = {0};
    srv_err_set(&e, http, type, code, NULL, "%s", msg);
    srv_reply r = {0};
    srv_reply_error(&r, &e);
    return send_reply(s, conn, &r);
}

static bool key_ok(srv_server *s, struct MHD_Connection *conn) {
    if (!s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    const char *k = h + 7, *want = s->cfg.api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned diff = (unsigned)(nk != nw); /* compare every byte: no early exit on a mismatch */
    for (size_t i = 0; i < nw; i++) diff |= (unsigned)(want[i] ^ (i < nk ? k[i] : 0));
    return diff == 0;
}

static enum MHD_Result route(srv_server *s, struct MHD_Connection *conn, const char *url, const char *method,
                             conn_state *cs) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    srv_reply r = {0};
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(s, conn, 405, "invalid_request_error", NULL, "/health takes GET");
        r.status = 200, r.ctype = "application/json";
        sb_puts(&r.body, "{\"status\":\"ok\"}");
        return send_reply(s, conn, &r);
    }
    if (!key_ok(s, conn))
        return send_error(s, conn, 401, "invalid_request_error", "invalid_api_key",
                          "missing or wrong API key (send 'Authorization: Bearer KEY')");
    static const struct {
        const char *url;
        srv_kind kind;
    } gen[] = {{"/v1/chat/completions", SRV_CHAT}, {"/chat/completions", SRV_CHAT},
               {"/v1/completions", SRV_COMPLETION}, {"/completions", SRV_COMPLETION},
               {"/v1/embeddings", SRV_EMBED},       {"/embeddings", SRV_EMBED}};
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++)
        if (!strcmp(url, gen[i].url)) {
            if (!post) return send_error(s, conn, 405, "invalid_request_error", NULL, "this endpoint takes POST");
            srv_api_generate(s, gen[i].kind, cs->body.p ? cs->body.p : "", cs->body.n, conn, &r);
            return send_reply(s, conn, &r);
        }
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!get) return send_error(s, conn, 405, "invalid_request_error", NULL, "/v1/models takes GET");
        srv_api_models(s, &r);
    } else if (!strcmp(url, "/metrics")) {
        if (!get) return send_error(s, conn, 405, "invalid_request_error", NULL, "/metrics takes GET");
        srv_api_metrics(s, &r);
    } else if (!strcmp(url, "/lora-adapters")) {
        if (get) srv_api_lora_get(s, &r);
        else if (post) srv_api_lora_post(s, cs->body.p ? cs->body.p : "", cs->body.n, &r);
        else return send_error(s, conn, 405, "invalid_request_error", NULL, "/lora-adapters takes GET or POST");
    } else {
        char msg[300];
        snprintf(msg, sizeof msg, "no endpoint %.200s %.20s", url, method);
        return send_error(s, conn, 404, "invalid_request_error", "not_found", msg);
    }
    return send_reply(s, conn, &r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    srv_server *s = cls;
    conn_state *cs = *con_cls;
    (void)version;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->cfg.body_max) {
            cs->too_big = true;
            char msg[160];
            snprintf(msg, sizeof msg, "the request body has %.20s bytes; the limit is %zu", cl, s->cfg.body_max);
            return send_error(s, conn, 413, "invalid_request_error", "request_too_large", msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->body.n + *upload_size > s->cfg.body_max) cs->too_big = true;
        if (!cs->too_big) sb_add(&cs->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body is over the limit of %zu bytes", s->cfg.body_max);
        return send_error(s, conn, 413, "invalid_request_error", "request_too_large", msg);
    }
    if (cs->body.oom) return send_error(s, conn, 500, "server_error", NULL, "out of memory reading the body");
    return route(s, conn, url, method, cs);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode t) {
    conn_state *cs = *con_cls;
    (void)cls, (void)conn, (void)t;
    if (!cs) return;
    sb_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

tl_status srv_http_start(srv_server *s, const char *host, int port, srv_http **out, int *bound_port) {
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) || !ai) {
        fprintf(stderr, "tallow serve: cannot resolve host '%s'\n", host);
        return TL_ERR_INVALID;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s, MHD_OPTION_CONNECTION_LIMIT, 512u,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr, "tallow serve: cannot listen on %s:%d (in use, or not permitted)\n", host, port);
        return TL_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        MHD_stop_daemon(d);
        return TL_ERR_NOMEM;
    }
    h->d = d;
    *out = h;
    return TL_OK;
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
