/* jinja/jinja_parse: Jinja lexer and parser: template source -> AST.
 *
 * Lexing follows jinja2's rules as HF configures it: newlines normalized to
 * \n and one trailing newline dropped (keep_trailing_newline=False); "-" on
 * a tag strips all whitespace on that side, "+" disables lstrip/trim;
 * lstrip_blocks strips spaces and tabs before {% and {# when only
 * whitespace precedes them on their line; trim_blocks drops the newline
 * right after %} and #}. Inside a tag, tokens are lexed with strings and
 * brackets respected, so "}}" inside a dict literal does not end the tag.
 * Expressions follow jinja2's precedence: conditional < or < and < not <
 * comparisons < +,- < ~ < *,/,//,% < ** < unary -/+ < postfix ([], ., ())
 * and filters/tests (| and is), which bind to the operand before them.
 * Errors name line and column; nesting depth is limited.
 * Owns: the template arena (AST). Calls: jinja_value (strings), base/status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

typedef enum tk_kind {
    TK_EOF,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP
} tk_kind;

typedef struct tok {
    tk_kind k;
    int line, col;
    const char *s; /* NAME: NUL-terminated name (arena); OP: op text */
    const jstr *str; /* TEXT, STRING */
    int64_t i;
    double f;
} tok;

typedef struct jparser {
    jinja_template *t;
    jarena *ar;
    jmp_buf jmp;
    tl_status err;
    const char *src;
    size_t n;
    /* lexer cursor for line/column */
    size_t lc_pos;
    int lc_line, lc_col;
    tok *toks;
    size_t ntok, captok;
    size_t p; /* parser position */
    int depth;
    int loop_depth;
    int macro_depth;
    jinja_options opt;
} jparser;

static _Noreturn void pfail(jparser *P, int line, int col, tl_status st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static _Noreturn void pfail(jparser *P, int line, int col, tl_status st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tl_err(st, "jinja: line %d col %d: %s", line, col, msg);
    P->err = st;
    longjmp(P->jmp, 1);
}

static void *palloc(jparser *P, size_t n) {
    void *p = jarena_alloc(P->ar, n);
    if (!p) pfail(P, 0, 0, TL_ERR_NOMEM, "out of memory parsing template");
    memset(p, 0, n);
    return p;
}

static const char *pstrdup(jparser *P, const char *s, size_t n) {
    char *r = palloc(P, n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* ---- lexer ---------------------------------------------------------------- */

static void lc_at(jparser *P, size_t pos, int *line, int *col) {
    while (P->lc_pos < pos && P->lc_pos < P->n) {
        if (P->src[P->lc_pos] == '\n') {
            P->lc_line++;
            P->lc_col = 1;
        } else if (((unsigned char)P->src[P->lc_pos] & 0xC0) != 0x80) {
            P->lc_col++;
        }
        P->lc_pos++;
    }
    *line = P->lc_line;
    *col = P->lc_col;
}

static tok *emit(jparser *P, tk_kind k, size_t pos) {
    if (P->ntok == P->captok) {
        size_t nc = P->captok ? P->captok * 2 : 256;
        tok *nt = jarena_alloc(P->ar, nc * sizeof(tok));
        if (!nt) pfail(P, 0, 0, TL_ERR_NOMEM, "out of memory lexing template");
        if (P->ntok) memcpy(nt, P->toks, P->ntok * sizeof(tok));
        P->toks = nt;
        P->captok = nc;
    }
    tok *t = &P->toks[P->ntok++];
    memset(t, 0, sizeof *t);
    t->k = k;
    lc_at(P, pos, &t->line, &t->col);
    return t;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void emit_text(jparser *P, size_t pos, const char *s, size_t n) {
    if (!n) return;
    tok *t = emit(P, TK_TEXT, pos);
    t->str = jstr_make(P->ar, s, n);
    if (!t->str) pfail(P, t->line, t->col, TL_ERR_NOMEM, "out of memory");
}

/* Decode a Python string literal body (unicode-escape rules). */
static const jstr *decode_string(jparser *P, size_t pos, const char *s, size_t n) {
    char *buf = palloc(P, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            buf[o++] = s[i];
            continue;
        }
        char e = s[++i];
        int hexn = 0;
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': buf[o++] = '\\'; break;
        case '\'': buf[o++] = '\''; break;
        case '"': buf[o++] = '"'; break;
        case 'a': buf[o++] = '\a'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'v': buf[o++] = '\v'; break;
        case 'x': hexn = 2; break;
        case 'u': hexn = 4; break;
        case 'U': hexn = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    v = v * 8 + (uint32_t)(s[++i] - '0');
                o += jutf8_encode(v, buf + o);
            } else {
                buf[o++] = '\\';
                buf[o++] = e;
            }
        }
        if (hexn) {
            uint32_t v = 0;
            for (int k = 0; k < hexn; k++) {
                char h = i + 1 < n ? s[i + 1] : 0;
                int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) {
                    int line, col;
                    lc_at(P, pos, &line, &col);
                    pfail(P, line, col, TL_ERR_FORMAT, "truncated \\%c escape in string literal", e);
                }
                v = v * 16 + (uint32_t)d;
                i++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                int line, col;
                lc_at(P, pos, &line, &col);
                pfail(P, line, col, TL_ERR_UNSUPPORTED, "escape \\%c%X is not a valid code point", e, v);
            }
            o += jutf8_encode(v, buf + o);
        }
    }
    const jstr *r = jstr_make(P->ar, buf, o);
    if (!r) pfail(P, 0, 0, TL_ERR_NOMEM, "out of memory");
    return r;
}

static const char *const ops3[] = {NULL};
static const char *const ops2[] = {"**", "//", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-*/%~<>=()[]{},.:|";

/* Lex tokens inside a tag starting at *ip; kind is '{' or '%'. Returns the
 * right modifier ('-', '+' or 0) and leaves *ip after the closing marker. */
static char lex_tag(jparser *P, size_t *ip, char kind, int tline, int tcol) {
    size_t i = *ip;
    const char *s = P->src;
    size_t n = P->n;
    int depth = 0;
    (void)ops3;
    for (;;) {
        while (i < n && is_ws(s[i])) i++;
        if (i >= n)
            pfail(P, tline, tcol, TL_ERR_FORMAT, "unclosed tag '%s' (missing '%s')",
                  kind == '{' ? "{{" : "{%", kind == '{' ? "}}" : "%}");
        char c = s[i];
        if (kind == '{' && depth == 0) {
            if (c == '-' && i + 2 < n && s[i + 1] == '}' && s[i + 2] == '}') {
                emit(P, TK_VAR_END, i);
                *ip = i + 3;
                return '-';
            }
            if (c == '}' && i + 1 < n && s[i + 1] == '}') {
                emit(P, TK_VAR_END, i);
                *ip = i + 2;
                return 0;
            }
        }
        if (kind == '%') {
            if ((c == '-' || c == '+') && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
                emit(P, TK_BLOCK_END, i);
                *ip = i + 3;
                return c;
            }
            if (c == '%' && i + 1 < n && s[i + 1] == '}') {
                emit(P, TK_BLOCK_END, i);
                *ip = i + 2;
                return 0;
            }
        }
        if (is_name0(c)) {
            size_t st = i;
            while (i < n && (is_name0(s[i]) || is_digit(s[i]))) i++;
            tok *t = emit(P, TK_NAME, st);
            t->s = pstrdup(P, s + st, i - st);
            continue;
        }
        if (is_digit(c)) {
            size_t st = i;
            bool after_dot = P->ntok > 0 && P->toks[P->ntok - 1].k == TK_OP &&
                             !strcmp(P->toks[P->ntok - 1].s, ".");
            while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) i++;
            bool isf = false;
            if (!after_dot && i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
                isf = true;
                i++;
                while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) i++;
            }
            if (!after_dot && i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t j = i + 1;
                if (j < n && (s[j] == '+' || s[j] == '-')) j++;
                if (j < n && is_digit(s[j])) {
                    isf = true;
                    i = j;
                    while (i < n && (is_digit(s[i]) || s[i] == '_')) i++;
                }
            }
            char buf[128];
            size_t bl = 0;
            for (size_t k = st; k < i && bl < sizeof buf - 1; k++)
                if (s[k] != '_') buf[bl++] = s[k];
            buf[bl] = 0;
            tok *t = emit(P, isf ? TK_FLOAT : TK_INT, st);
            if (isf) t->f = strtod(buf, NULL);
            else {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(buf, &end, 10);
                if (errno || bl >= sizeof buf - 1 || v > (unsigned long long)INT64_MAX)
                    pfail(P, t->line, t->col, TL_ERR_UNSUPPORTED, "integer literal too large");
                t->i = (int64_t)v;
            }
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t st = i++;
            while (i < n && s[i] != c) i += s[i] == '\\' ? 2 : 1;
            if (i >= n) {
                int line, col;
                lc_at(P, st, &line, &col);
                pfail(P, line, col, TL_ERR_FORMAT, "unterminated string literal");
            }
            tok *t = emit(P, TK_STRING, st);
            t->str = decode_string(P, st, s + st + 1, i - st - 1);
            i++;
            continue;
        }
        const char *op = NULL;
        for (int k = 0; ops2[k]; k++)
            if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) op = ops2[k];
        if (op) {
            tok *t = emit(P, TK_OP, i);
            t->s = op;
            i += 2;
            continue;
        }
        const char *o1 = strchr(ops1, c);
        if (c && o1) {
            tok *t = emit(P, TK_OP, i);
            t->s = pstrdup(P, &c, 1);
            if (c == '(' || c == '[' || c == '{') depth++;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
            i++;
            continue;
        }
        int line, col;
        lc_at(P, i, &line, &col);
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
            pfail(P, line, col, TL_ERR_FORMAT, "unexpected character '%c'", c);
        pfail(P, line, col, TL_ERR_FORMAT, "unexpected byte 0x%02x", (unsigned char)c);
    }
}

static size_t find_tag_start(const char *s, size_t n, size_t from) {
    for (size_t i = from; i + 1 < n; i++)
        if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    return n;
}

/* {% raw %}: copy text verbatim up to {% endraw %} */
static bool try_raw(jparser *P, size_t tag_tok, size_t *ip, char *rmod_out, size_t *text_start, size_t *text_end) {
    if (P->ntok != tag_tok + 3) return false;
    tok *nm = &P->toks[tag_tok + 1];
    if (nm->k != TK_NAME || strcmp(nm->s, "raw")) return false;
    const char *s = P->src;
    size_t n = P->n;
    for (size_t i = *ip; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t j = i + 2;
        char lmod = 0;
        if (j < n && (s[j] == '-' || s[j] == '+')) lmod = s[j++];
        while (j < n && is_ws(s[j])) j++;
        if (n - j < 6 || memcmp(s + j, "endraw", 6)) continue;
        j += 6;
        while (j < n && is_ws(s[j])) j++;
        char rmod = 0;
        if (j < n && (s[j] == '-' || s[j] == '+')) rmod = s[j++];
        if (j + 1 >= n || s[j] != '%' || s[j + 1] != '}') continue;
        *text_start = *ip;
        if (*rmod_out == '-') /* {% raw -%} */
            while (*text_start < i && is_ws(s[*text_start])) (*text_start)++;
        *text_end = i;
        if (lmod == '-') {
            while (*text_end > *text_start && is_ws(s[*text_end - 1])) (*text_end)--;
        } else if (lmod != '+' && P->opt.lstrip_blocks) { /* lstrip before {% endraw %} */
            size_t e = *text_end;
            while (e > *text_start && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
            if (e > *text_start && s[e - 1] == '\n') *text_end = e;
        }
        *ip = j + 2;
        *rmod_out = rmod;
        P->ntok = tag_tok; /* drop the raw tag tokens */
        return true;
    }
    pfail(P, nm->line, nm->col, TL_ERR_FORMAT, "unclosed {%% raw %%} (missing {%% endraw %%})");
}

static void lex(jparser *P, const jinja_options *opt) {
    const char *s = P->src;
    size_t n = P->n, pos = 0;
    bool line_starting = true;
    while (pos < n) {
        size_t p = find_tag_start(s, n, pos);
        if (p >= n) {
            emit_text(P, pos, s + pos, n - pos);
            break;
        }
        size_t tlen = p - pos;
        char kind = s[p + 1];
        size_t inner = p + 2;
        char lmod = 0;
        if (inner < n && (s[inner] == '-' || s[inner] == '+')) lmod = s[inner++];
        if (lmod == '-') {
            while (tlen > 0 && is_ws(s[pos + tlen - 1])) tlen--;
        } else if (lmod != '+' && opt->lstrip_blocks && (kind == '%' || kind == '#')) {
            size_t l = 0; /* start of the last line of the text */
            for (size_t k = tlen; k > 0; k--)
                if (s[pos + k - 1] == '\n') {
                    l = k;
                    break;
                }
            if (l > 0 || line_starting) {
                bool all_ws = true;
                for (size_t k = l; k < tlen; k++)
                    if (!is_ws(s[pos + k])) all_ws = false;
                if (all_ws) tlen = l;
            }
        }
        emit_text(P, pos, s + pos, tlen);
        int tline, tcol;
        lc_at(P, p, &tline, &tcol);
        char rmod = 0;
        size_t i;
        if (kind == '#') {
            i = inner;
            size_t e = n;
            for (size_t k = inner; k + 1 < n; k++)
                if (s[k] == '#' && s[k + 1] == '}') {
                    e = k;
                    break;
                }
            if (e >= n) pfail(P, tline, tcol, TL_ERR_FORMAT, "unclosed comment (missing '#}')");
            if (e > inner && (s[e - 1] == '-' || s[e - 1] == '+')) rmod = s[e - 1];
            i = e + 2;
        } else {
            size_t tag_tok = P->ntok;
            emit(P, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, p);
            i = inner;
            rmod = lex_tag(P, &i, kind, tline, tcol);
            size_t rs, re;
            if (kind == '%' && try_raw(P, tag_tok, &i, &rmod, &rs, &re)) emit_text(P, rs, s + rs, re - rs);
        }
        pos = i;
        bool ate_nl = false;
        if (rmod == '-') {
            while (pos < n && is_ws(s[pos])) {
                ate_nl = s[pos] == '\n';
                pos++;
            }
        } else if (rmod != '+' && opt->trim_blocks && (kind == '%' || kind == '#') && pos < n &&
                   s[pos] == '\n') {
            pos++;
            ate_nl = true;
        }
        line_starting = ate_nl;
    }
    emit(P, TK_EOF, n);
}

/* ---- parser helpers ------------------------------------------------------- */

static tok *cur(jparser *P) { return &P->toks[P->p]; }
static tok *nexttok(jparser *P) { return P->p + 1 < P->ntok ? &P->toks[P->p + 1] : &P->toks[P->ntok - 1]; }
static void adv(jparser *P) {
    if (P->p + 1 < P->ntok) P->p++;
}

static const char *tk_desc(const tok *t, char *buf, size_t cap) {
    switch (t->k) {
    case TK_EOF: return "end of template";
    case TK_TEXT: return "template text";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_NAME: snprintf(buf, cap, "'%s'", t->s); return buf;
    case TK_STRING: return "string literal";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_OP: snprintf(buf, cap, "'%s'", t->s); return buf;
    }
    return "?";
}

static _Noreturn void unexpected(jparser *P, const char *expected) {
    char b[80];
    tok *t = cur(P);
    pfail(P, t->line, t->col, TL_ERR_FORMAT, "expected %s, got %s", expected, tk_desc(t, b, sizeof b));
}

static bool is_op(jparser *P, const char *op) {
    tok *t = cur(P);
    return t->k == TK_OP && !strcmp(t->s, op);
}
static bool is_name(jparser *P, const char *nm) {
    tok *t = cur(P);
    return t->k == TK_NAME && !strcmp(t->s, nm);
}
static bool skip_op(jparser *P, const char *op) {
    if (is_op(P, op)) {
        adv(P);
        return true;
    }
    return false;
}
static bool skip_name(jparser *P, const char *nm) {
    if (is_name(P, nm)) {
        adv(P);
        return true;
    }
    return false;
}
static void expect_op(jparser *P, const char *op) {
    if (!skip_op(P, op)) {
        char b[16];
        snprintf(b, sizeof b, "'%s'", op);
        unexpected(P, b);
    }
}
static void expect_block_end(jparser *P) {
    if (cur(P)->k != TK_BLOCK_END) unexpected(P, "'%}'");
    adv(P);
}
static const char *expect_name(jparser *P) {
    if (cur(P)->k != TK_NAME) unexpected(P, "a name");
    const char *s = cur(P)->s;
    adv(P);
    return s;
}

static jnode *mknode(jparser *P, jnode_kind k, const tok *at) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* growable node arrays in the arena */
typedef struct nvec {
    jnode **v;
    int n, cap;
} nvec;
static void nvec_push(jparser *P, nvec *a, jnode *x) {
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 4;
        jnode **nv = palloc(P, (size_t)nc * sizeof *nv);
        if (a->n) memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
}
typedef struct svec {
    const char **v;
    int n, cap;
} svec;
static void svec_push(jparser *P, svec *a, const char *x) {
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 4;
        const char **nv = palloc(P, (size_t)nc * sizeof *nv);
        if (a->n) memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
}

static void enter(jparser *P) {
    if (++P->depth > JINJA_MAX_NESTING) {
        tok *t = cur(P);
        pfail(P, t->line, t->col, TL_ERR_UNSUPPORTED, "template nesting deeper than %d (JINJA_MAX_NESTING)",
              JINJA_MAX_NESTING);
    }
}
static void leave(jparser *P) { P->depth--; }

/* ---- expressions ---------------------------------------------------------- */

static jnode *parse_expr(jparser *P, bool with_cond);
static jnode *parse_or(jparser *P);
static jnode *parse_unary(jparser *P, bool with_filter);
static jnode *parse_primary(jparser *P);
static jnode *parse_postfix(jparser *P, jnode *n);
static jnode *parse_filter_expr(jparser *P, jnode *n);

static bool at_expr_end(jparser *P) {
    tok *t = cur(P);
    return t->k == TK_VAR_END || t->k == TK_BLOCK_END || t->k == TK_EOF ||
           (t->k == TK_OP && (!strcmp(t->s, ")") || !strcmp(t->s, "]") || !strcmp(t->s, "}")));
}

/* expression or unparenthesized tuple "a, b" */
static jnode *parse_tuple(jparser *P, bool with_cond, const char *extra_end) {
    tok *at = cur(P);
    jnode *first = parse_expr(P, with_cond);
    if (!is_op(P, ",")) return first;
    nvec items = {0};
    nvec_push(P, &items, first);
    while (skip_op(P, ",")) {
        if (at_expr_end(P) || (extra_end && is_name(P, extra_end))) break;
        nvec_push(P, &items, parse_expr(P, with_cond));
    }
    jnode *t = mknode(P, JN_TUPLELIT, at);
    t->args = items.v;
    t->n_args = items.n;
    return t;
}

static jnode *parse_expr(jparser *P, bool with_cond) {
    enter(P);
    jnode *e = parse_or(P);
    if (with_cond) {
        while (is_name(P, "if")) {
            tok *at = cur(P);
            adv(P);
            jnode *c = mknode(P, JN_COND, at);
            c->b = e;
            c->a = parse_or(P);
            if (skip_name(P, "else")) c->c = parse_expr(P, true);
            e = c;
        }
    }
    leave(P);
    return e;
}

static jnode *parse_not(jparser *P);
static jnode *parse_and(jparser *P) {
    jnode *l = parse_not(P);
    while (is_name(P, "and")) {
        tok *at = cur(P);
        adv(P);
        jnode *n = mknode(P, JN_AND, at);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}
static jnode *parse_or(jparser *P) {
    jnode *l = parse_and(P);
    while (is_name(P, "or")) {
        tok *at = cur(P);
        adv(P);
        jnode *n = mknode(P, JN_OR, at);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static jnode *parse_compare(jparser *P);
static jnode *parse_not(jparser *P) {
    if (is_name(P, "not")) {
        tok *at = cur(P);
        adv(P);
        enter(P);
        jnode *n = mknode(P, JN_NOT, at);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_math1(jparser *P);
static jnode *parse_compare(jparser *P) {
    tok *at = cur(P);
    jnode *first = parse_math1(P);
    nvec rhs = {0};
    int ops[64];
    int nops = 0;
    for (;;) {
        int op = 0;
        tok *t = cur(P);
        if (t->k == TK_OP) {
            if (!strcmp(t->s, "==")) op = JOP_EQ;
            else if (!strcmp(t->s, "!=")) op = JOP_NE;
            else if (!strcmp(t->s, "<")) op = JOP_LT;
            else if (!strcmp(t->s, "<=")) op = JOP_LE;
            else if (!strcmp(t->s, ">")) op = JOP_GT;
            else if (!strcmp(t->s, ">=")) op = JOP_GE;
            if (op) adv(P);
        } else if (is_name(P, "in")) {
            op = JOP_IN;
            adv(P);
        } else if (is_name(P, "not") && nexttok(P)->k == TK_NAME && !strcmp(nexttok(P)->s, "in")) {
            op = JOP_NOTIN;
            adv(P);
            adv(P);
        }
        if (!op) break;
        if (nops == 64) pfail(P, t->line, t->col, TL_ERR_UNSUPPORTED, "comparison chain too long");
        ops[nops++] = op;
        nvec_push(P, &rhs, parse_math1(P));
    }
    if (!nops) return first;
    jnode *n = mknode(P, JN_COMPARE, at);
    n->a = first;
    n->args = rhs.v;
    n->n_args = rhs.n;
    n->ops = palloc(P, (size_t)nops * sizeof(int));
    memcpy(n->ops, ops, (size_t)nops * sizeof(int));
    return n;
}

static jnode *binop(jparser *P, const tok *at, int op, jnode *a, jnode *b) {
    jnode *n = mknode(P, JN_BINOP, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_concat(jparser *P);
static jnode *parse_math1(jparser *P) {
    jnode *l = parse_concat(P);
    for (;;) {
        tok *t = cur(P);
        int op = is_op(P, "+") ? JOP_ADD : is_op(P, "-") ? JOP_SUB : 0;
        if (!op) break;
        adv(P);
        l = binop(P, t, op, l, parse_concat(P));
    }
    return l;
}
static jnode *parse_math2(jparser *P);
static jnode *parse_concat(jparser *P) {
    jnode *l = parse_math2(P);
    while (is_op(P, "~")) {
        tok *t = cur(P);
        adv(P);
        l = binop(P, t, JOP_CONCAT, l, parse_math2(P));
    }
    return l;
}
static jnode *parse_pow(jparser *P);
static jnode *parse_math2(jparser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        tok *t = cur(P);
        int op = is_op(P, "*") ? JOP_MUL : is_op(P, "/") ? JOP_DIV : is_op(P, "//") ? JOP_FLOORDIV
                 : is_op(P, "%") ? JOP_MOD : 0;
        if (!op) break;
        adv(P);
        l = binop(P, t, op, l, parse_pow(P));
    }
    return l;
}
static jnode *parse_pow(jparser *P) {
    jnode *l = parse_unary(P, true);
    while (is_op(P, "**")) {
        tok *t = cur(P);
        adv(P);
        l = binop(P, t, JOP_POW, l, parse_unary(P, true));
    }
    return l;
}

static jnode *parse_unary(jparser *P, bool with_filter) {
    tok *at = cur(P);
    jnode *n;
    enter(P);
    if (is_op(P, "-") || is_op(P, "+")) {
        bool neg = is_op(P, "-");
        adv(P);
        n = mknode(P, neg ? JN_NEG : JN_POS, at);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static void parse_call_args(jparser *P, jnode *n) {
    /* at '(' */
    expect_op(P, "(");
    nvec args = {0}, kwv = {0};
    svec kwn = {0};
    while (!is_op(P, ")")) {
        if (args.n + kwv.n > 0) expect_op(P, ",");
        if (is_op(P, ")")) break;
        if (is_op(P, "*") || is_op(P, "**")) {
            tok *t = cur(P);
            pfail(P, t->line, t->col, TL_ERR_UNSUPPORTED, "unsupported: *args / **kwargs in calls");
        }
        if (cur(P)->k == TK_NAME && nexttok(P)->k == TK_OP && !strcmp(nexttok(P)->s, "=")) {
            svec_push(P, &kwn, cur(P)->s);
            adv(P);
            adv(P);
            nvec_push(P, &kwv, parse_expr(P, true));
        } else {
            if (kwv.n) {
                tok *t = cur(P);
                pfail(P, t->line, t->col, TL_ERR_FORMAT, "positional argument follows keyword argument");
            }
            nvec_push(P, &args, parse_expr(P, true));
        }
    }
    expect_op(P, ")");
    n->args = args.v;
    n->n_args = args.n;
    n->kwargs = kwv.v;
    n->n_kwargs = kwv.n;
    n->names = kwn.v;
    n->n_names = kwn.n;
}

static jnode *parse_primary(jparser *P) {
    tok *t = cur(P);
    jnode *n;
    switch (t->k) {
    case TK_NAME:
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = mknode(P, JN_LIT, t);
            n->lit = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = mknode(P, JN_LIT, t);
            n->lit = jv_none();
        } else {
            n = mknode(P, JN_NAME, t);
            n->name = t->s;
        }
        adv(P);
        return n;
    case TK_STRING: {
        /* adjacent string literals concatenate */
        n = mknode(P, JN_LIT, t);
        const jstr *s = t->str;
        adv(P);
        while (cur(P)->k == TK_STRING) {
            const jstr *s2 = cur(P)->str;
            jstr *cat = palloc(P, sizeof(jstr) + s->len + s2->len + 1);
            cat->len = s->len + s2->len;
            memcpy(cat->s, s->s, s->len);
            memcpy(cat->s + s->len, s2->s, s2->len);
            cat->s[cat->len] = 0;
            s = cat;
            adv(P);
        }
        n->lit.k = JV_STR;
        n->lit.u.s = s;
        return n;
    }
    case TK_INT:
        n = mknode(P, JN_LIT, t);
        n->lit = jv_int(t->i);
        adv(P);
        return n;
    case TK_FLOAT:
        n = mknode(P, JN_LIT, t);
        n->lit = jv_float(t->f);
        adv(P);
        return n;
    case TK_OP:
        if (!strcmp(t->s, "(")) {
            adv(P);
            if (skip_op(P, ")")) {
                n = mknode(P, JN_TUPLELIT, t);
                return n;
            }
            jnode *e = parse_expr(P, true);
            if (is_op(P, ",")) {
                nvec items = {0};
                nvec_push(P, &items, e);
                while (skip_op(P, ",")) {
                    if (is_op(P, ")")) break;
                    nvec_push(P, &items, parse_expr(P, true));
                }
                e = mknode(P, JN_TUPLELIT, t);
                e->args = items.v;
                e->n_args = items.n;
            }
            expect_op(P, ")");
            return e;
        }
        if (!strcmp(t->s, "[")) {
            adv(P);
            nvec items = {0};
            while (!is_op(P, "]")) {
                if (items.n) expect_op(P, ",");
                if (is_op(P, "]")) break;
                nvec_push(P, &items, parse_expr(P, true));
            }
            expect_op(P, "]");
            n = mknode(P, JN_LISTLIT, t);
            n->args = items.v;
            n->n_args = items.n;
            return n;
        }
        if (!strcmp(t->s, "{")) {
            adv(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(P, "}")) {
                if (keys.n) expect_op(P, ",");
                if (is_op(P, "}")) break;
                nvec_push(P, &keys, parse_expr(P, true));
                expect_op(P, ":");
                nvec_push(P, &vals, parse_expr(P, true));
            }
            expect_op(P, "}");
            n = mknode(P, JN_DICTLIT, t);
            n->args = keys.v;
            n->n_args = keys.n;
            n->kwargs = vals.v;
            n->n_kwargs = vals.n;
            return n;
        }
        break;
    default: break;
    }
    unexpected(P, "an expression");
}

static jnode *parse_subscript_part(jparser *P) {
    /* one subscript: expr or slice [a]:[b][:[c]] */
    tok *at = cur(P);
    jnode *start = NULL;
    if (!is_op(P, ":")) {
        start = parse_expr(P, true);
        if (!is_op(P, ":")) return start;
    }
    jnode *s = mknode(P, JN_SLICE, at);
    s->b = start;
    expect_op(P, ":");
    if (!is_op(P, "]") && !is_op(P, ",") && !is_op(P, ":")) s->c = parse_expr(P, true);
    if (skip_op(P, ":"))
        if (!is_op(P, "]") && !is_op(P, ",")) s->d = parse_expr(P, true);
    return s;
}

static jnode *parse_postfix(jparser *P, jnode *n) {
    for (;;) {
        tok *t = cur(P);
        if (is_op(P, ".")) {
            adv(P);
            tok *nm = cur(P);
            if (nm->k == TK_NAME) {
                jnode *a = mknode(P, JN_ATTR, t);
                a->a = n;
                a->name = nm->s;
                adv(P);
                n = a;
            } else if (nm->k == TK_INT) {
                jnode *a = mknode(P, JN_ITEM, t);
                a->a = n;
                a->b = mknode(P, JN_LIT, nm);
                a->b->lit = jv_int(nm->i);
                adv(P);
                n = a;
            } else
                unexpected(P, "an attribute name");
        } else if (is_op(P, "[")) {
            adv(P);
            jnode *sub = parse_subscript_part(P);
            if (is_op(P, ",")) {
                pfail(P, t->line, t->col, TL_ERR_UNSUPPORTED, "unsupported: tuple subscripts");
            }
            expect_op(P, "]");
            if (sub->kind == JN_SLICE) {
                sub->a = n;
                n = sub;
            } else {
                jnode *it = mknode(P, JN_ITEM, t);
                it->a = n;
                it->b = sub;
                n = it;
            }
        } else if (is_op(P, "(")) {
            jnode *c = mknode(P, JN_CALL, t);
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else
            break;
    }
    return n;
}

static jnode *parse_filter_expr(jparser *P, jnode *n) {
    for (;;) {
        tok *t = cur(P);
        if (is_op(P, "|")) {
            adv(P);
            jnode *f = mknode(P, JN_FILTER, t);
            const char *nm = expect_name(P);
            while (is_op(P, ".")) { /* dotted filter names */
                adv(P);
                const char *nm2 = expect_name(P);
                size_t l1 = strlen(nm), l2 = strlen(nm2);
                char *cat = palloc(P, l1 + l2 + 2);
                memcpy(cat, nm, l1);
                cat[l1] = '.';
                memcpy(cat + l1 + 1, nm2, l2 + 1);
                nm = cat;
            }
            f->name = nm;
            f->a = n;
            if (is_op(P, "(")) parse_call_args(P, f);
            n = f;
        } else if (is_name(P, "is")) {
            adv(P);
            jnode *te = mknode(P, JN_TEST, t);
            if (skip_name(P, "not")) te->op = 1;
            tok *tn = cur(P);
            te->name = expect_name(P);
            (void)tn;
            te->a = n;
            tok *c = cur(P);
            if (is_op(P, "(")) {
                parse_call_args(P, te);
            } else if ((c->k == TK_NAME || c->k == TK_STRING || c->k == TK_INT || c->k == TK_FLOAT ||
                        (c->k == TK_OP && (!strcmp(c->s, "[") || !strcmp(c->s, "{")))) &&
                       !(c->k == TK_NAME && (!strcmp(c->s, "else") || !strcmp(c->s, "or") ||
                                             !strcmp(c->s, "and") || !strcmp(c->s, "if") ||
                                             !strcmp(c->s, "in") || !strcmp(c->s, "not") ||
                                             !strcmp(c->s, "is")))) {
                jnode *arg = parse_postfix(P, parse_primary(P));
                te->args = palloc(P, sizeof(jnode *));
                te->args[0] = arg;
                te->n_args = 1;
            }
            n = te;
        } else if (is_op(P, "(")) {
            jnode *c = mknode(P, JN_CALL, t);
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else
            break;
    }
    return n;
}

/* ---- statements ----------------------------------------------------------- */

static void parse_body(jparser *P, nvec *out, const char *const *stops);

static bool at_stop(jparser *P, const char *const *stops) {
    if (cur(P)->k != TK_BLOCK_BEGIN || !stops) return false;
    tok *nm = nexttok(P);
    if (nm->k != TK_NAME) return false;
    for (int i = 0; stops[i]; i++)
        if (!strcmp(nm->s, stops[i])) return true;
    return false;
}

/* consume "{% name" of a stop tag; returns the name */
static const char *take_stop(jparser *P, const char *const *stops, const char *what, const tok *open) {
    if (cur(P)->k == TK_EOF) {
        char list[128] = "";
        for (int i = 0; stops[i]; i++) {
            if (i) strncat(list, " or ", sizeof list - strlen(list) - 1);
            strncat(list, stops[i], sizeof list - strlen(list) - 1);
        }
        pfail(P, open->line, open->col, TL_ERR_FORMAT, "unclosed '%s' (expected %s before end of template)",
              what, list);
    }
    adv(P); /* {% */
    const char *nm = cur(P)->s;
    adv(P);
    return nm;
}

static void parse_assign_names(jparser *P, svec *names) {
    bool paren = skip_op(P, "(");
    svec_push(P, names, expect_name(P));
    while (skip_op(P, ",")) {
        if (cur(P)->k != TK_NAME) break;
        svec_push(P, names, expect_name(P));
    }
    if (paren) expect_op(P, ")");
}

static jnode *parse_statement(jparser *P) {
    tok *open = cur(P); /* {% */
    adv(P);
    tok *kw = cur(P);
    if (kw->k != TK_NAME) unexpected(P, "a tag name");
    const char *k = kw->s;
    adv(P);
    if (!strcmp(k, "if")) {
        jnode *root = mknode(P, JN_IF, kw);
        jnode *node = root;
        node->a = parse_tuple(P, false, NULL);
        expect_block_end(P);
        static const char *const stops[] = {"elif", "else", "endif", NULL};
        for (;;) {
            nvec body = {0};
            parse_body(P, &body, stops);
            node->body = body.v;
            node->n_body = body.n;
            const char *s = take_stop(P, stops, "if", open);
            if (!strcmp(s, "elif")) {
                tok *at = &P->toks[P->p - 1];
                jnode *nx = mknode(P, JN_IF, at);
                nx->op = 1; /* an elif: walked as a chain, not nested */
                nx->a = parse_tuple(P, false, NULL);
                expect_block_end(P);
                node->body2 = palloc(P, sizeof(jnode *));
                node->body2[0] = nx;
                node->n_body2 = 1;
                node = nx;
                continue;
            }
            if (!strcmp(s, "else")) {
                expect_block_end(P);
                static const char *const stops2[] = {"endif", NULL};
                nvec eb = {0};
                parse_body(P, &eb, stops2);
                node->body2 = eb.v;
                node->n_body2 = eb.n;
                take_stop(P, stops2, "if", open);
            }
            expect_block_end(P);
            break;
        }
        return root;
    }
    if (!strcmp(k, "for")) {
        jnode *n = mknode(P, JN_FOR, kw);
        svec names = {0};
        parse_assign_names(P, &names);
        n->names = names.v;
        n->n_names = names.n;
        if (!skip_name(P, "in")) unexpected(P, "'in'");
        n->a = parse_tuple(P, false, "if");
        if (skip_name(P, "if")) n->b = parse_expr(P, true);
        if (is_name(P, "recursive"))
            pfail(P, cur(P)->line, cur(P)->col, TL_ERR_UNSUPPORTED, "unsupported: recursive for loops");
        expect_block_end(P);
        static const char *const stops[] = {"else", "endfor", NULL};
        P->loop_depth++;
        nvec body = {0};
        parse_body(P, &body, stops);
        P->loop_depth--;
        n->body = body.v;
        n->n_body = body.n;
        const char *s = take_stop(P, stops, "for", open);
        if (!strcmp(s, "else")) {
            expect_block_end(P);
            static const char *const stops2[] = {"endfor", NULL};
            nvec eb = {0};
            parse_body(P, &eb, stops2);
            n->body2 = eb.v;
            n->n_body2 = eb.n;
            take_stop(P, stops2, "for", open);
        }
        expect_block_end(P);
        return n;
    }
    if (!strcmp(k, "set")) {
        jnode *n = mknode(P, JN_SET, kw);
        if (cur(P)->k == TK_NAME && nexttok(P)->k == TK_OP && !strcmp(nexttok(P)->s, ".")) {
            tok *nt = cur(P);
            jnode *obj = mknode(P, JN_NAME, nt);
            obj->name = nt->s;
            adv(P);
            adv(P);
            n->a = obj;
            n->name = expect_name(P);
        } else {
            svec names = {0};
            parse_assign_names(P, &names);
            n->names = names.v;
            n->n_names = names.n;
        }
        if (skip_op(P, "=")) {
            n->b = parse_tuple(P, true, NULL);
            expect_block_end(P);
            return n;
        }
        if (n->a || n->n_names != 1) unexpected(P, "'='");
        if (is_op(P, "|"))
            pfail(P, cur(P)->line, cur(P)->col, TL_ERR_UNSUPPORTED, "unsupported: filters on {%% set %%} blocks");
        expect_block_end(P);
        jnode *sb = mknode(P, JN_SETBLOCK, kw);
        sb->name = n->names[0];
        static const char *const stops[] = {"endset", NULL};
        nvec body = {0};
        parse_body(P, &body, stops);
        sb->body = body.v;
        sb->n_body = body.n;
        take_stop(P, stops, "set", open);
        expect_block_end(P);
        return sb;
    }
    if (!strcmp(k, "macro")) {
        jnode *n = mknode(P, JN_MACRO, kw);
        n->name = expect_name(P);
        expect_op(P, "(");
        svec params = {0};
        nvec defs = {0};
        while (!is_op(P, ")")) {
            if (params.n) expect_op(P, ",");
            if (is_op(P, ")")) break;
            svec_push(P, &params, expect_name(P));
            nvec_push(P, &defs, skip_op(P, "=") ? parse_expr(P, true) : NULL);
        }
        expect_op(P, ")");
        expect_block_end(P);
        n->names = params.v;
        n->n_names = params.n;
        n->args = defs.v;
        n->n_args = defs.n;
        static const char *const stops[] = {"endmacro", NULL};
        int saved_loop = P->loop_depth;
        P->loop_depth = 0;
        P->macro_depth++;
        nvec body = {0};
        parse_body(P, &body, stops);
        P->macro_depth--;
        P->loop_depth = saved_loop;
        n->body = body.v;
        n->n_body = body.n;
        take_stop(P, stops, "macro", open);
        if (cur(P)->k == TK_NAME) adv(P); /* {% endmacro name %} */
        expect_block_end(P);
        return n;
    }
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        if (P->loop_depth == 0)
            pfail(P, kw->line, kw->col, TL_ERR_FORMAT, "'%s' outside of a for loop", k);
        jnode *n = mknode(P, k[0] == 'b' ? JN_BREAK : JN_CONTINUE, kw);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(k, "generation")) {
        expect_block_end(P);
        jnode *n = mknode(P, JN_BLOCK, kw);
        static const char *const stops[] = {"endgeneration", NULL};
        nvec body = {0};
        parse_body(P, &body, stops);
        n->body = body.v;
        n->n_body = body.n;
        take_stop(P, stops, "generation", open);
        expect_block_end(P);
        return n;
    }
    static const char *const unsupported[] = {"call", "filter", "include", "import", "from", "extends",
                                              "block", "with", "do", "autoescape", "trans", NULL};
    for (int i = 0; unsupported[i]; i++)
        if (!strcmp(k, unsupported[i]))
            pfail(P, kw->line, kw->col, TL_ERR_UNSUPPORTED, "unsupported tag '{%% %s %%}'", k);
    pfail(P, kw->line, kw->col, TL_ERR_FORMAT, "unknown tag '%s'", k);
}

static void parse_body(jparser *P, nvec *out, const char *const *stops) {
    enter(P);
    for (;;) {
        tok *t = cur(P);
        if (t->k == TK_EOF) break;
        if (t->k == TK_TEXT) {
            jnode *n = mknode(P, JN_TEXT, t);
            n->lit.k = JV_STR;
            n->lit.u.s = t->str;
            nvec_push(P, out, n);
            adv(P);
            continue;
        }
        if (t->k == TK_VAR_BEGIN) {
            adv(P);
            jnode *n = mknode(P, JN_OUTPUT, t);
            n->a = parse_tuple(P, true, NULL);
            if (cur(P)->k != TK_VAR_END) unexpected(P, "'}}'");
            adv(P);
            nvec_push(P, out, n);
            continue;
        }
        if (t->k == TK_BLOCK_BEGIN) {
            if (at_stop(P, stops)) break;
            tok *nm = nexttok(P);
            if (nm->k == TK_NAME && (!strncmp(nm->s, "end", 3) || !strcmp(nm->s, "else") ||
                                     !strcmp(nm->s, "elif")))
                pfail(P, nm->line, nm->col, TL_ERR_FORMAT, "unexpected '%s' (no open block it closes)",
                      nm->s);
            nvec_push(P, out, parse_statement(P));
            continue;
        }
        unexpected(P, "template text or a tag");
    }
    leave(P);
}

/* Unknown filters and tests are compile-time errors in jinja2, except inside
 * an if-block or a conditional expression (a "soft" frame: e.g. a branch
 * guarded by `x is filter`), where they fail only when run. A for body,
 * macro, set-block or call block starts a new, non-soft frame.
 * This walk also bounds the syntax tree's depth: operator chains such as
 * a ~ b ~ c are built by loops, not recursion, so only here is their depth
 * seen; every later walk (the evaluator) is then bounded too. */
static void check_names(jparser *P, const jnode *n, bool soft, int depth);
static void check_list(jparser *P, jnode *const *v, int k, bool soft, int depth) {
    for (int i = 0; i < k; i++)
        if (v[i]) check_names(P, v[i], soft, depth);
}
static void check_names(jparser *P, const jnode *n, bool soft, int depth) {
    if (!n) return;
    if (depth > JINJA_MAX_NESTING)
        pfail(P, n->line, n->col, TL_ERR_UNSUPPORTED, "template nesting deeper than %d (JINJA_MAX_NESTING)",
              JINJA_MAX_NESTING);
    if (n->kind == JN_FILTER && !soft && !jbuiltin_filter_known(n->name))
        pfail(P, n->line, n->col, TL_ERR_UNSUPPORTED, "unknown filter '%s'", n->name);
    if (n->kind == JN_TEST && !soft && !jbuiltin_test_known(n->name))
        pfail(P, n->line, n->col, TL_ERR_UNSUPPORTED, "unknown test '%s'", n->name);
    bool s_in = soft, s_body = soft;
    switch (n->kind) {
    case JN_IF:
    case JN_COND: s_in = s_body = true; break;
    case JN_FOR: s_body = false; break; /* the iterable stays in the outer frame */
    case JN_MACRO:
    case JN_SETBLOCK:
    case JN_BLOCK: s_in = s_body = false; break;
    default: break;
    }
    if (n->kind == JN_IF) { /* an elif chain is walked at one depth */
        for (;;) {
            check_names(P, n->a, true, depth + 1);
            check_list(P, n->body, n->n_body, true, depth + 1);
            if (n->n_body2 == 1 && n->body2[0]->kind == JN_IF && n->body2[0]->op == 1) {
                n = n->body2[0];
                continue;
            }
            check_list(P, n->body2, n->n_body2, true, depth + 1);
            return;
        }
    }
    if (n->kind == JN_FOR) {
        check_names(P, n->a, s_in, depth + 1);
        check_names(P, n->b, false, depth + 1);
    } else {
        check_names(P, n->a, s_in, depth + 1);
        check_names(P, n->b, s_in, depth + 1);
    }
    check_names(P, n->c, s_in, depth + 1);
    check_names(P, n->d, s_in, depth + 1);
    check_list(P, n->args, n->n_args, n->kind == JN_MACRO ? false : s_in, depth + 1);
    check_list(P, n->kwargs, n->n_kwargs, s_in, depth + 1);
    check_list(P, n->body, n->n_body, s_body, depth + 1);
    check_list(P, n->body2, n->n_body2, s_body, depth + 1);
}

/* ---- entry ---------------------------------------------------------------- */

jinja_options jinja_hf_options(void) {
    jinja_options o = {.trim_blocks = true, .lstrip_blocks = true};
    return o;
}

tl_status jinja_parse(const char *src, size_t len, const jinja_options *opt, jinja_template **out) {
    *out = NULL;
    if (!src) return tl_err(TL_ERR_INVALID, "jinja: NULL template");
    if (!jutf8_valid(src, len)) return tl_err(TL_ERR_FORMAT, "jinja: template is not valid UTF-8");
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    t->arena.limit = 0;
    /* normalize newlines, drop one trailing newline (keep_trailing_newline=False) */
    char *s = malloc(len + 1);
    if (!s) {
        free(t);
        return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else
            s[n++] = src[i];
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    s[n] = 0;
    t->src = s;
    jparser *P = calloc(1, sizeof *P);
    if (!P) {
        free(s);
        free(t);
        return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    }
    P->t = t;
    P->ar = &t->arena;
    P->src = s;
    P->n = n;
    P->lc_line = 1;
    P->lc_col = 1;
    if (opt) P->opt = *opt;
    if (setjmp(P->jmp)) {
        tl_status st = P->err;
        free(P);
        jinja_template_free(t);
        return st;
    }
    lex(P, &P->opt);
    nvec body = {0};
    parse_body(P, &body, NULL);
    if (cur(P)->k != TK_EOF) unexpected(P, "end of template");
    check_list(P, body.v, body.n, false, 0);
    t->body = body.v;
    t->n_body = body.n;
    free(P);
    *out = t;
    return TL_OK;
}

void jinja_template_free(jinja_template *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t->src);
    free(t);
}
