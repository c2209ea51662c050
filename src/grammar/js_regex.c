/* grammar/js_regex: a JSON Schema "pattern" (the ECMA-262 subset below) as
 * GBNF over the JSON text of the string's contents, so characters that JSON
 * must escape (quote, backslash, controls) appear in their escaped form.
 *   alternation |, groups ( ) and (?: ), quantifiers * + ? {m} {m,} {m,n}
 *   (lazy forms mean the same here), classes [...] [^...] with ranges,
 *   escapes \d \w \s \D \W \S \t \n \r \f \v \uXXXX \xHH and escaped
 *   punctuation, ".", and ^ / $ at the ends. A pattern is a search: without
 *   ^ (or $) any text may come before (or after) the match.
 * Lookaround, backreferences and word boundaries are errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/js_schema.h"

typedef struct rx {
    const char *s;
    size_t i, n;
    js_ctx *c;
    const char *path;
    int depth;
} rx;

typedef struct rx_set {
    uint32_t lo[256], hi[256];
    int n;
} rx_set;

static tl_status rx_fail(rx *r, const char *what) {
    char msg[160];
    snprintf(msg, sizeof msg, "pattern at offset %zu: %s", r->i, what);
    return js_fail(r->c, TL_ERR_UNSUPPORTED, r->path, msg, NULL);
}

static tl_status rx_add(rx *r, rx_set *s, uint32_t lo, uint32_t hi) {
    if (s->n == 256) return rx_fail(r, "character class too large");
    s->lo[s->n] = lo, s->hi[s->n++] = hi;
    return TL_OK;
}

static uint32_t rx_utf8(rx *r) {
    const unsigned char *p = (const unsigned char *)r->s + r->i;
    uint32_t c = p[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (r->i + (size_t)n > r->n) n = 1;
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; k++) v = v << 6 | (p[k] & 0x3f);
    r->i += (size_t)n;
    return v;
}

static int rx_hex(rx *r, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < n; k++) {
        if (r->i >= r->n) return 0;
        char c = r->s[r->i++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 1;
}

/* The set an escape stands for (after the backslash); *single set when it
 * is one character. */
static tl_status rx_escape(rx *r, rx_set *s, bool *negate) {
    *negate = false;
    if (r->i >= r->n) return rx_fail(r, "pattern ends in a backslash");
    char e = r->s[r->i++];
    uint32_t v;
    switch (e) {
    case 'd': return rx_add(r, s, '0', '9');
    case 'D': *negate = true; return rx_add(r, s, '0', '9');
    case 'w': case 'W': {
        *negate = e == 'W';
        tl_status st = rx_add(r, s, 'a', 'z');
        if (!st) st = rx_add(r, s, 'A', 'Z');
        if (!st) st = rx_add(r, s, '0', '9');
        return st ? st : rx_add(r, s, '_', '_');
    }
    case 's': case 'S': {
        *negate = e == 'S';
        tl_status st = rx_add(r, s, '\t', '\r');
        return st ? st : rx_add(r, s, ' ', ' ');
    }
    case 't': return rx_add(r, s, '\t', '\t');
    case 'n': return rx_add(r, s, '\n', '\n');
    case 'r': return rx_add(r, s, '\r', '\r');
    case 'f': return rx_add(r, s, '\f', '\f');
    case 'v': return rx_add(r, s, '\v', '\v');
    case 'u': if (!rx_hex(r, 4, &v)) return rx_fail(r, "bad \\u escape"); return rx_add(r, s, v, v);
    case 'x': if (!rx_hex(r, 2, &v)) return rx_fail(r, "bad \\x escape"); return rx_add(r, s, v, v);
    case 'b': case 'B': return rx_fail(r, "word boundaries are not supported");
    default:
        if (e >= '0' && e <= '9') return rx_fail(r, "backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return rx_fail(r, "unknown escape");
        return rx_add(r, s, (uint32_t)(unsigned char)e, (uint32_t)(unsigned char)e);
    }
}

static int rx_cmp(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Emit set s (complemented if neg) as GBNF over JSON text: plain characters
 * as a class, quote / backslash / controls as their JSON escapes. */
static void rx_emit_set(js_buf *b, const rx_set *s, bool neg) {
    uint32_t v[257][2];
    int n = 0;
    for (int i = 0; i < s->n; i++) v[n][0] = s->lo[i], v[n++][1] = s->hi[i];
    qsort(v, (size_t)n, sizeof *v, rx_cmp);
    uint32_t m[257][2];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && v[i][0] <= m[k - 1][1] + 1) {
            if (v[i][1] > m[k - 1][1]) m[k - 1][1] = v[i][1];
        } else m[k][0] = v[i][0], m[k++][1] = v[i][1];
    }
    if (neg) { /* complement over 0..10FFFF */
        uint32_t c[258][2];
        int q = 0;
        uint32_t next = 0;
        for (int i = 0; i < k; i++) {
            if (m[i][0] > next) c[q][0] = next, c[q++][1] = m[i][0] - 1;
            next = m[i][1] + 1;
        }
        if (next <= 0x10ffff) c[q][0] = next, c[q++][1] = 0x10ffff;
        memcpy(m, c, sizeof(uint32_t) * 2 * (size_t)q);
        k = q;
    }
    bool quote = false, bslash = false, ctl[32] = {false}, plain = false;
    js_buf cls = {0};
    for (int i = 0; i < k; i++) {
        for (uint32_t x = m[i][0]; x <= m[i][1] && x < 0x20; x++) ctl[x] = true;
        if (m[i][0] <= '"' && m[i][1] >= '"') quote = true;
        if (m[i][0] <= '\\' && m[i][1] >= '\\') bslash = true;
        /* the range with controls, quote and backslash cut out */
        uint32_t cuts[3] = {'"', '\\', 0x110000};
        uint32_t lo = m[i][0] < 0x20 ? 0x20 : m[i][0];
        for (int j = 0; j < 3 && lo <= m[i][1]; j++) {
            if (cuts[j] < lo) continue;
            uint32_t hi = cuts[j] - 1 < m[i][1] ? cuts[j] - 1 : m[i][1];
            if (lo <= hi) {
                jb_class_char(&cls, lo);
                if (hi > lo) jb_str(&cls, "-"), jb_class_char(&cls, hi);
                plain = true;
            }
            lo = cuts[j] + 1;
        }
    }
    jb_str(b, "( ");
    bool any = false;
    if (plain) jb_fmt(b, "[%s]", cls.s), any = true;
    if (quote) jb_str(b, any ? " | \"\\\\\\\"\"" : "\"\\\\\\\"\""), any = true;
    if (bslash) jb_str(b, any ? " | \"\\\\\\\\\"" : "\"\\\\\\\\\""), any = true;
    for (int x = 0; x < 32; x++)
        if (ctl[x]) {
            const char *e = x == '\n' ? "n" : x == '\t' ? "t" : x == '\r' ? "r" : x == '\b' ? "b" : x == '\f' ? "f" : NULL;
            if (any) jb_str(b, " | ");
            if (e) jb_fmt(b, "\"\\\\%s\"", e);
            else jb_fmt(b, "\"\\\\u00%02x\"", x);
            any = true;
        }
    if (!any) jb_str(b, "[^\\x00-\\U0010ffff]"); /* matches nothing */
    jb_str(b, " )");
    free(cls.s);
}

static tl_status rx_alt(rx *r, js_buf *b, bool *nullable);

static tl_status rx_class(rx *r, js_buf *b) {
    rx_set s = {.n = 0};
    bool neg = r->i < r->n && r->s[r->i] == '^';
    if (neg) r->i++;
    bool first = true;
    while (r->i < r->n && (r->s[r->i] != ']' || first)) {
        first = false;
        uint32_t lo;
        tl_status st;
        if (r->s[r->i] == '\\') {
            r->i++;
            rx_set e = {.n = 0};
            bool en;
            if ((st = rx_escape(r, &e, &en))) return st;
            if (en || e.n != 1 || e.lo[0] != e.hi[0]) {
                if (en) return rx_fail(r, "negated escape inside a class");
                for (int k = 0; k < e.n; k++)
                    if ((st = rx_add(r, &s, e.lo[k], e.hi[k]))) return st;
                continue;
            }
            lo = e.lo[0];
        } else lo = rx_utf8(r);
        uint32_t hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                rx_set e = {.n = 0};
                bool en;
                if ((st = rx_escape(r, &e, &en))) return st;
                if (en || e.n != 1 || e.lo[0] != e.hi[0]) return rx_fail(r, "class range ends in a set");
                hi = e.lo[0];
            } else hi = rx_utf8(r);
            if (hi < lo) return rx_fail(r, "reversed class range");
        }
        if ((st = rx_add(r, &s, lo, hi))) return st;
    }
    if (r->i >= r->n) return rx_fail(r, "unterminated character class");
    r->i++;
    rx_emit_set(b, &s, neg);
    return TL_OK;
}

static tl_status rx_atom(rx *r, js_buf *b, bool *nullable) {
    char ch = r->s[r->i];
    *nullable = false;
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return rx_fail(r, "lookaround and named groups are not supported");
        }
        if (++r->depth > 64) return rx_fail(r, "groups nested too deeply");
        jb_str(b, "( ");
        tl_status st = rx_alt(r, b, nullable);
        r->depth--;
        if (st) return st;
        if (r->i >= r->n || r->s[r->i] != ')') return rx_fail(r, "unclosed group");
        r->i++;
        jb_str(b, " )");
        return TL_OK;
    }
    if (ch == '[') {
        r->i++;
        return rx_class(r, b);
    }
    rx_set s = {.n = 0};
    bool neg = false;
    tl_status st;
    if (ch == '.') {
        r->i++;
        neg = true;
        st = rx_add(r, &s, '\n', '\n');
    } else if (ch == '\\') {
        r->i++;
        st = rx_escape(r, &s, &neg);
    } else if (ch == '^' || ch == '$') {
        return rx_fail(r, "anchor inside the pattern");
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        return rx_fail(r, "quantifier with nothing before it");
    } else {
        uint32_t v = rx_utf8(r);
        st = rx_add(r, &s, v, v);
    }
    if (st) return st;
    rx_emit_set(b, &s, neg);
    return TL_OK;
}

/* *nullable: the sequence can match the empty string. A group that can is
 * refused under an unbounded repetition: x* is lowered as R ::= x R | "",
 * which is left-recursive when x matches nothing. */
static tl_status rx_seq(rx *r, js_buf *b, bool *nullable) {
    *nullable = true;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n) return TL_OK;
        jb_str(b, "( ");
        bool an;
        tl_status st = rx_atom(r, b, &an);
        if (st) return st;
        jb_str(b, " )");
        bool opt = false;
        if (r->i < r->n) {
            char q = r->s[r->i];
            bool unbounded = q == '*' || q == '+';
            opt = q == '*' || q == '?';
            if (q == '*' || q == '+' || q == '?') {
                jb_put(b, &q, 1);
                r->i++;
            } else if (q == '{') {
                size_t save = r->i++;
                long m = 0, n = -1;
                int d = 0;
                while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9' && m < 100000) m = m * 10 + (r->s[r->i++] - '0'), d++;
                if (r->i < r->n && r->s[r->i] == ',') {
                    r->i++;
                    if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
                        n = 0;
                        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9' && n < 100000) n = n * 10 + (r->s[r->i++] - '0');
                    }
                } else n = m;
                if (!d || r->i >= r->n || r->s[r->i] != '}' || (n >= 0 && n < m)) {
                    r->i = save;
                    return rx_fail(r, "bad {m,n} quantifier");
                }
                r->i++;
                unbounded = n < 0;
                opt = m == 0;
                if (n < 0) jb_fmt(b, "{%ld,}", m);
                else jb_fmt(b, "{%ld,%ld}", m, n);
            }
            if (an && unbounded) return rx_fail(r, "a repeated group that can match the empty string");
            if (r->i < r->n && r->s[r->i] == '?') r->i++; /* lazy: same language */
            if (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '{'))
                return rx_fail(r, "stacked quantifiers");
        }
        *nullable = *nullable && (an || opt);
        jb_str(b, " ");
    }
    return TL_OK;
}

static tl_status rx_alt(rx *r, js_buf *b, bool *nullable) {
    *nullable = false;
    for (;;) {
        bool sn;
        tl_status st = rx_seq(r, b, &sn);
        if (st) return st;
        *nullable = *nullable || sn;
        if (r->i >= r->n || r->s[r->i] != '|') return TL_OK;
        r->i++;
        jb_str(b, " | ");
    }
}

/* Whether re[i..n) is one atom that matches one character: an escape, a
 * class, "." or a plain character. */
static bool rx_one_char(const char *re, size_t i, size_t n) {
    if (n - i == 1) return !strchr("()[]{}|*+?\\^$", re[i]);
    if (n - i == 2 && re[i] == '\\') return true;
    if (n - i < 3 || re[i] != '[' || re[n - 1] != ']') return false;
    for (size_t k = i + 1; k < n - 1; k++) {
        if (re[k] == '\\') k++;
        else if (re[k] == ']' && k > i + 1) return false;
    }
    return true;
}

static tl_status js_regex_body(js_ctx *c, const char *re, const char *path, js_buf *b) {
    rx r = {.s = re, .i = 0, .n = strlen(re), .c = c, .path = path, .depth = 0};
    bool start = r.n && re[0] == '^';
    bool end = r.n > 1 && re[r.n - 1] == '$' && re[r.n - 2] != '\\';
    if (start) r.i = 1;
    if (!start) jb_str(b, "char* ");
    jb_str(b, "( ");
    bool nullable;
    tl_status st = rx_alt(&r, b, &nullable);
    if (st) return st;
    if (r.i < r.n && r.s[r.i] == '$' && r.i + 1 == r.n) r.i++;
    if (r.i != r.n) return rx_fail(&r, "unbalanced ')'");
    jb_str(b, " )");
    if (!end) jb_str(b, " char*");
    return TL_OK;
}

/* A pattern X+ of one character X, open at an end, matches the strings
 * that hold an X there: X+ char* is X char*, and char* X+ is char* X.
 * Written without the +, the parse has no loop that comes and goes with
 * every X, so its states repeat (and its masks are cheap). */
tl_status js_regex(js_ctx *c, const char *re, const char *path, js_buf *b) {
    size_t n = strlen(re);
    bool start = n && re[0] == '^';
    bool end = n > 1 && re[n - 1] == '$' && re[n - 2] != '\\';
    size_t i0 = start ? 1 : 0, be = end ? n - 1 : n;
    if ((start && end) || be < i0 + 2 || re[be - 1] != '+' || re[be - 2] == '\\' || !rx_one_char(re, i0, be - 1))
        return js_regex_body(c, re, path, b);
    char *one = malloc(n);
    if (!one) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    memcpy(one, re, be - 1);
    memcpy(one + be - 1, re + be, n - be);
    one[n - 1] = 0;
    tl_status st = js_regex_body(c, one, path, b);
    free(one);
    return st;
}
