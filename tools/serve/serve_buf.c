/* tools/serve: growable byte buffer, JSON string escaping, UTF-8 checks,
 * OpenAI-shaped error bodies. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sb_free(srv_buf *b) {
    free(b->p);
    *b = (srv_buf){0};
}

static bool sb_reserve(srv_buf *b, size_t extra) {
    if (b->oom) return false;
    if (b->n + extra + 1 <= b->cap) return true;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + extra + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->oom = true;
        return false;
    }
    b->p = np;
    b->cap = nc;
    return true;
}

void sb_add(srv_buf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sb_puts(srv_buf *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_printf(srv_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        sb_add(b, tmp, (size_t)k);
        return;
    }
    if (!sb_reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* length of the valid UTF-8 character at s[0..n), 0 if invalid */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    unsigned cp = c & (0xFF >> (k + 1));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return k;
}

size_t srv_utf8_check(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_len(u + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

void sb_json_str(srv_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    sb_add(b, "\"", 1);
    size_t run = 0; /* start of the bytes copied as they are */
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = utf8_len(u + i, n - i);
        const char *esc = NULL;
        char tmp[8];
        if (!k) esc = "\xEF\xBF\xBD";
        else if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        }
        if (esc) {
            sb_add(b, s + run, i - run);
            sb_puts(b, esc);
            i += k ? k : 1;
            run = i;
        } else {
            i += k;
        }
    }
    sb_add(b, s + run, n - run);
    sb_add(b, "\"", 1);
}

void sb_json_num(srv_buf *b, double f) {
    if (!isfinite(f)) f = -9999.0;
    sb_printf(b, "%.9g", f);
}

void srv_err_set(srv_err *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

void srv_err_json(const srv_err *e, srv_buf *out) {
    sb_puts(out, "{\"error\":{\"message\":");
    sb_json_str(out, e->msg, strlen(e->msg));
    sb_puts(out, ",\"type\":");
    sb_json_str(out, e->type, strlen(e->type));
    sb_puts(out, ",\"param\":");
    if (e->param[0]) sb_json_str(out, e->param, strlen(e->param));
    else sb_puts(out, "null");
    sb_puts(out, ",\"code\":");
    if (e->code) sb_json_str(out, e->code, strlen(e->code));
    else sb_puts(out, "null");
    sb_puts(out, "}}");
}
