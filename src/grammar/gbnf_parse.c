/* grammar/gbnf_parse: recursive-descent parser for GBNF text, building the
 * byte-level grammar of gbnf.h as it reads.
 *   grammar  := (rule | blank line)*
 *   rule     := name '::=' alts (newline | end)
 *   alts     := seq ('|' seq)*          newlines allowed after '|' and inside ()
 *   seq      := (atom postfix*)*
 *   atom     := "literal" | [class] | [^class] | . | name | '(' alts ')'
 *   postfix  := '*' | '+' | '?' | '{' m '}' | '{' m ',' '}' | '{' m ',' n '}'
 * Comments run from '#' to the end of the line. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_build.h"

static tl_status gp_fail(gp_state *p, size_t at, const char *fmt, const char *arg) {
    char what[200];
    snprintf(what, sizeof what, fmt, arg ? arg : "");
    return gb_fail(p, at, what);
}

static bool gp_eof(const gp_state *p) { return p->pos >= p->len; }
static char gp_peek(const gp_state *p) { return gp_eof(p) ? '\0' : p->src[p->pos]; }

static bool gp_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skip blanks and comments; newlines only when nl_ok. */
static void gp_space(gp_state *p, bool nl_ok) {
    while (!gp_eof(p)) {
        char c = p->src[p->pos];
        if (c == ' ' || c == '\t') p->pos++;
        else if (c == '#') {
            while (!gp_eof(p) && p->src[p->pos] != '\n') p->pos++;
        } else if (nl_ok && (c == '\n' || c == '\r')) p->pos++;
        else break;
    }
}

static size_t gp_name(gp_state *p) {
    size_t s = p->pos;
    while (!gp_eof(p) && gp_word_char(p->src[p->pos])) p->pos++;
    return p->pos - s;
}

/* Decode one UTF-8 code point of the source; invalid bytes are an error. */
static tl_status gp_utf8(gp_state *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->src + p->pos;
    size_t left = p->len - p->pos;
    uint32_t c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || (size_t)n > left) return gp_fail(p, p->pos, "invalid UTF-8 in the grammar text%s", NULL);
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return gp_fail(p, p->pos, "invalid UTF-8 in the grammar text%s", NULL);
        v = v << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return gp_fail(p, p->pos, "invalid UTF-8 in the grammar text%s", NULL);
    p->pos += (size_t)n;
    *cp = v;
    return TL_OK;
}

static tl_status gp_hex(gp_state *p, int digits, uint32_t *cp) {
    size_t at = p->pos;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        char c = gp_peek(p);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return gp_fail(p, at, "escape needs %s hex digits", digits == 2 ? "2" : digits == 4 ? "4" : "8");
        v = v << 4 | (uint32_t)d;
        p->pos++;
    }
    if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return gp_fail(p, at, "escape is not a Unicode scalar value%s", NULL);
    *cp = v;
    return TL_OK;
}

/* One character of a literal or class, with escapes. */
static tl_status gp_char(gp_state *p, uint32_t *cp) {
    if (gp_eof(p)) return gp_fail(p, p->pos, "unexpected end of grammar%s", NULL);
    if (p->src[p->pos] != '\\') return gp_utf8(p, cp);
    size_t at = p->pos++;
    char e = gp_peek(p);
    p->pos++;
    switch (e) {
    case 'x': return gp_hex(p, 2, cp);
    case 'u': return gp_hex(p, 4, cp);
    case 'U': return gp_hex(p, 8, cp);
    case 't': *cp = '\t'; return TL_OK;
    case 'r': *cp = '\r'; return TL_OK;
    case 'n': *cp = '\n'; return TL_OK;
    case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return TL_OK;
    default: {
        char s[2] = {e, 0};
        return gp_fail(p, at, "unknown escape '\\%s'", e ? s : "");
    }
    }
}

static tl_status gp_alts(gp_state *p, int32_t rule, bool nested);

static tl_status gp_literal(gp_state *p, int32_t rule) {
    size_t open = p->pos++;
    while (gp_peek(p) != '"') {
        if (gp_eof(p) || gp_peek(p) == '\n') return gp_fail(p, open, "unterminated string literal%s", NULL);
        uint32_t cp;
        tl_status s = gp_char(p, &cp);
        if (s) return s;
        if ((s = gb_emit_codepoint(p, rule, cp))) return s;
    }
    p->pos++;
    return TL_OK;
}

static tl_status gp_class(gp_state *p, int32_t rule) {
    size_t open = p->pos++;
    bool neg = gp_peek(p) == '^';
    if (neg) p->pos++;
    gb_ranges r = {0};
    tl_status s = TL_OK;
    while (gp_peek(p) != ']') {
        if (gp_eof(p) || gp_peek(p) == '\n') {
            s = gp_fail(p, open, "unterminated character class%s", NULL);
            break;
        }
        uint32_t lo, hi;
        if ((s = gp_char(p, &lo))) break;
        hi = lo;
        if (gp_peek(p) == '-' && p->pos + 1 < p->len && p->src[p->pos + 1] != ']') {
            size_t at = p->pos++;
            if ((s = gp_char(p, &hi))) break;
            if (hi < lo) {
                s = gp_fail(p, at, "character range is reversed%s", NULL);
                break;
            }
        }
        if ((s = gb_ranges_add(&r, lo, hi))) break;
    }
    if (!s) {
        p->pos++;
        s = gb_emit_class(p, rule, &r, neg, open);
    }
    free(r.v);
    return s;
}

static tl_status gp_postfix(gp_state *p, int32_t rule, int32_t atom_start) {
    for (;;) {
        char c = gp_peek(p);
        int32_t lo, hi;
        size_t at = p->pos;
        if (c == '*') lo = 0, hi = -1, p->pos++;
        else if (c == '+') lo = 1, hi = -1, p->pos++;
        else if (c == '?') lo = 0, hi = 1, p->pos++;
        else if (c == '{') {
            p->pos++;
            gp_space(p, false);
            long m = 0, n = -1;
            size_t d = p->pos;
            while (gp_peek(p) >= '0' && gp_peek(p) <= '9' && m <= GB_MAX_REPEAT) m = m * 10 + (gp_peek(p) - '0'), p->pos++;
            if (p->pos == d) return gp_fail(p, at, "expected a count after '{'%s", NULL);
            gp_space(p, false);
            if (gp_peek(p) == ',') {
                p->pos++;
                gp_space(p, false);
                if (gp_peek(p) >= '0' && gp_peek(p) <= '9') {
                    n = 0;
                    while (gp_peek(p) >= '0' && gp_peek(p) <= '9' && n <= GB_MAX_REPEAT) n = n * 10 + (gp_peek(p) - '0'), p->pos++;
                }
            } else n = m;
            gp_space(p, false);
            if (gp_peek(p) != '}') return gp_fail(p, at, "expected '}' to close the repetition%s", NULL);
            p->pos++;
            if (m > GB_MAX_REPEAT || n > GB_MAX_REPEAT) return gp_fail(p, at, "repetition count over the cap of 100000%s", NULL);
            if (n >= 0 && n < m) return gp_fail(p, at, "repetition {m,n} has n < m%s", NULL);
            lo = (int32_t)m, hi = (int32_t)n;
        } else return TL_OK;
        if (atom_start < 0) return gp_fail(p, at, "repetition operator with nothing before it%s", NULL);
        tl_status s = gb_emit_repeat(p, rule, atom_start, lo, hi);
        if (s) return s;
        gp_space(p, p->nested);
    }
}

static tl_status gp_seq(gp_state *p, int32_t rule, bool nested) {
    int32_t atom_start = -1;
    for (;;) {
        gp_space(p, nested);
        char c = gp_peek(p);
        size_t at = p->pos;
        int32_t start = gb_alt_len(p, rule);
        tl_status s = TL_OK;
        if (c == '"') s = gp_literal(p, rule);
        else if (c == '[') s = gp_class(p, rule);
        else if (c == '.') {
            p->pos++;
            gb_ranges r = {0};
            s = gb_ranges_add(&r, 0, 0x10ffff);
            if (!s) s = gb_emit_class(p, rule, &r, false, at);
            free(r.v);
        } else if (gp_word_char(c)) {
            size_t n = gp_name(p);
            int32_t ref;
            if ((s = gb_rule_ref(p, p->src + at, n, at, &ref))) return s;
            s = gb_emit(p, rule, GB_REF(ref));
            /* "name ::=" here means the previous rule ended without a newline */
            size_t save = p->pos;
            gp_space(p, false);
            if (p->len - p->pos >= 3 && !strncmp(p->src + p->pos, "::=", 3)) {
                return gp_fail(p, at, "rule definition inside another rule (missing newline?)%s", NULL);
            }
            p->pos = save;
        } else if (c == '(') {
            p->pos++;
            int32_t sub;
            if ((s = gb_new_rule(p, rule, &sub))) return s;
            bool was = p->nested;
            p->nested = true;
            s = gp_alts(p, sub, true);
            p->nested = was;
            if (s) return s;
            gp_space(p, true);
            if (gp_peek(p) != ')') return gp_fail(p, at, "unclosed '('%s", NULL);
            p->pos++;
            s = gb_emit(p, rule, GB_REF(sub));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            return gp_fail(p, at, "repetition operator with nothing before it%s", NULL);
        } else {
            return TL_OK; /* end of sequence: '|', ')', newline, end */
        }
        if (s) return s;
        atom_start = start;
        gp_space(p, nested);
        if ((s = gp_postfix(p, rule, atom_start))) return s;
    }
}

static tl_status gp_alts(gp_state *p, int32_t rule, bool nested) {
    for (;;) {
        tl_status s = gp_seq(p, rule, nested);
        if (s) return s;
        if ((s = gb_end_alt(p, rule))) return s;
        gp_space(p, nested);
        if (gp_peek(p) != '|') return TL_OK;
        p->pos++;
        gp_space(p, true);
    }
}

static tl_status gp_rule(gp_state *p) {
    size_t at = p->pos;
    size_t n = gp_name(p);
    if (!n) {
        char c[2] = {gp_peek(p), 0};
        return gp_fail(p, at, "expected a rule name, found '%s'", c);
    }
    int32_t rule;
    tl_status s = gb_rule_define(p, p->src + at, n, at, &rule);
    if (s) return s;
    gp_space(p, false);
    if (p->len - p->pos < 3 || strncmp(p->src + p->pos, "::=", 3))
        return gp_fail(p, p->pos, "expected '::=' after the rule name%s", NULL);
    p->pos += 3;
    gp_space(p, true);
    p->nested = false;
    if ((s = gp_alts(p, rule, false))) return s;
    gp_space(p, false);
    char c = gp_peek(p);
    if (c == '\r') p->pos++, c = gp_peek(p);
    if (!gp_eof(p) && c != '\n') {
        char t[2] = {c, 0};
        return gp_fail(p, p->pos, c == ')' ? "unmatched ')'%s" : "unexpected '%s'", c == ')' ? NULL : t);
    }
    return TL_OK;
}

tl_status gbnf_parse(const char *src, size_t len, const char *root, gbnf **out) {
    *out = NULL;
    if (!src) return tl_err(TL_ERR_INVALID, "grammar: no text");
    if (len > GB_MAX_SRC) return tl_err(TL_ERR_FORMAT, "grammar: %zu bytes is over the cap of %u", len, GB_MAX_SRC);
    gp_state p;
    memset(&p, 0, sizeof p);
    p.src = src;
    p.len = len;
    tl_status s = TL_OK;
    for (;;) {
        gp_space(&p, true);
        if (gp_eof(&p)) break;
        if ((s = gp_rule(&p))) break;
    }
    if (!s) s = gb_finish(&p, root ? root : "root", out);
    gb_state_free(&p);
    return s;
}
