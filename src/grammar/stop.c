/* grammar/stop: stop strings over streamed text. Text is held back while
 * its end could still grow into a stop string, so a caller printing what
 * tl_stop_push releases never prints part of a stop string; at a match the
 * text before it is released and the match is reported.
 * Owns: copies of the strings and the held bytes. Calls: base. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tallow.h"

#define STOP_MAX_LEN 4096
#define STOP_MAX_N 256

struct tl_stop {
    char **str;
    size_t *len;
    int32_t n;
    size_t max_len;
    char *buf; /* held bytes, then the text of the current push */
    size_t n_buf, cap;
    bool stopped;
};

void tl_stop_free(tl_stop *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n; i++) free(s->str[i]);
    free(s->str);
    free(s->len);
    free(s->buf);
    free(s);
}

tl_status tl_stop_init(const char *const *strs, int32_t n, tl_stop **out) {
    *out = NULL;
    if (n < 0 || n > STOP_MAX_N || (n && !strs)) return tl_err(TL_ERR_INVALID, "stop: %d strings (at most %d)", n, STOP_MAX_N);
    tl_stop *s = calloc(1, sizeof *s);
    if (!s) return tl_err(TL_ERR_NOMEM, "stop: out of memory");
    s->str = calloc((size_t)n + 1, sizeof *s->str);
    s->len = calloc((size_t)n + 1, sizeof *s->len);
    if (!s->str || !s->len) {
        tl_stop_free(s);
        return tl_err(TL_ERR_NOMEM, "stop: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        size_t l = strs[i] ? strlen(strs[i]) : 0;
        if (!l || l > STOP_MAX_LEN) {
            tl_stop_free(s);
            return tl_err(TL_ERR_INVALID, "stop: string %d is empty or over %d bytes", i, STOP_MAX_LEN);
        }
        if (!(s->str[i] = strdup(strs[i]))) {
            tl_stop_free(s);
            return tl_err(TL_ERR_NOMEM, "stop: out of memory");
        }
        s->len[i] = l;
        s->n = i + 1;
        if (l > s->max_len) s->max_len = l;
    }
    *out = s;
    return TL_OK;
}

void tl_stop_reset(tl_stop *s) {
    s->n_buf = 0;
    s->stopped = false;
}

/* Length of the longest end of b[0..n) that begins some stop string. */
static size_t stop_pending(const tl_stop *s, const char *b, size_t n) {
    size_t best = 0;
    for (int32_t i = 0; i < s->n; i++) {
        size_t l = s->len[i] - 1 < n ? s->len[i] - 1 : n;
        for (; l > best; l--)
            if (!memcmp(b + n - l, s->str[i], l)) {
                best = l;
                break;
            }
    }
    return best;
}

tl_status tl_stop_push(tl_stop *s, const char *text, size_t len, const char **out, size_t *n_out, bool *stopped) {
    *out = NULL, *n_out = 0, *stopped = s->stopped;
    if (s->stopped) return TL_OK;
    if (s->n_buf + len + 1 > s->cap) {
        size_t nc = (s->n_buf + len + 1) * 2;
        char *b = realloc(s->buf, nc);
        if (!b) return tl_err(TL_ERR_NOMEM, "stop: out of memory");
        s->buf = b;
        s->cap = nc;
    }
    /* held bytes move to the front of the buffer on each release */
    memcpy(s->buf + s->n_buf, text, len);
    size_t n = s->n_buf + len;
    /* the earliest match; a match may start in the held bytes */
    size_t at = SIZE_MAX;
    for (int32_t i = 0; i < s->n; i++) {
        size_t l = s->len[i];
        for (size_t p = 0; p + l <= n && p < at; p++)
            if (s->buf[p] == s->str[i][0] && !memcmp(s->buf + p, s->str[i], l)) {
                at = p;
                break;
            }
    }
    if (at != SIZE_MAX) {
        s->stopped = *stopped = true;
        *out = s->buf, *n_out = at;
        s->n_buf = 0;
        return TL_OK;
    }
    size_t hold = stop_pending(s, s->buf, n);
    /* the released bytes are returned from a second region so the held
     * ones can move to the front: copy released bytes to the end first */
    size_t rel = n - hold;
    if (n + rel + 1 > s->cap) {
        size_t nc = (n + rel + 1) * 2;
        char *b = realloc(s->buf, nc);
        if (!b) return tl_err(TL_ERR_NOMEM, "stop: out of memory");
        s->buf = b;
        s->cap = nc;
    }
    memcpy(s->buf + n, s->buf, rel);
    memmove(s->buf, s->buf + rel, hold);
    s->n_buf = hold;
    *out = s->buf + n, *n_out = rel;
    return TL_OK;
}

tl_status tl_stop_flush(tl_stop *s, const char **out, size_t *n_out) {
    *out = s->buf, *n_out = s->stopped ? 0 : s->n_buf;
    s->n_buf = 0;
    return TL_OK;
}
