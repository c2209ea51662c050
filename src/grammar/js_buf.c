/* grammar/js_buf: see js_buf.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/js_buf.h"

void jb_put(js_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->n + n + 1) nc *= 2;
        char *t = realloc(b->s, nc);
        if (!t) {
            b->oom = true;
            return;
        }
        b->s = t;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void jb_str(js_buf *b, const char *s) { jb_put(b, s, strlen(s)); }

void jb_fmt(js_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        jb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jb_put(b, big, (size_t)n);
    free(big);
}

void jb_lit(js_buf *b, const char *s, size_t n) {
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            jb_put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            jb_fmt(b, "\\x%02x", c);
        } else {
            jb_put(b, (const char *)&c, 1);
        }
    }
    jb_put(b, "\"", 1);
}

void jb_class_char(js_buf *b, uint32_t c) {
    if (c == ']' || c == '[' || c == '\\' || c == '-' || c == '^' || c == '"') {
        char e[2] = {'\\', (char)c};
        jb_put(b, e, 2);
    } else if (c < 0x20 || c == 0x7f) {
        jb_fmt(b, "\\x%02x", c);
    } else if (c < 0x80) {
        char e = (char)c;
        jb_put(b, &e, 1);
    } else if (c < 0x10000) {
        jb_fmt(b, "\\u%04x", c);
    } else {
        jb_fmt(b, "\\U%08x", c);
    }
}
