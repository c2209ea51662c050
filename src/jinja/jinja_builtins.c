/* jinja/jinja_builtins: filters (| name), tests (is name), methods of str,
 * dict and list values, and global functions (range, namespace, dict,
 * raise_exception, strftime_now) of the Jinja interpreter, each with the
 * behaviour of its jinja2 / Python counterpart as HF's environment has it
 * (tojson is HF's json.dumps(ensure_ascii=False) override, range is capped
 * at jinja2's sandbox MAX_RANGE). Unknown names are errors naming them.
 * Loops over lists and scans of strings charge the step budget first
 * (jsteps / jwork); integers in format strings and arguments are parsed
 * with range checks; Python's big integers are an error past 64 bits.
 * Case mapping covers ASCII, Latin-1, Greek and Cyrillic (not full Unicode).
 * Owns: nothing. Calls: jinja_value, jinja_eval (lookup/call), libc. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja/jinja_internal.h"

/* ---- argument helpers ----------------------------------------------------- */

typedef struct fargs {
    jctx *c;
    const jnode *n;
    const char *fname;
    jv *pos;
    int npos;
    const char **kwn;
    jv *kwv;
    int nkw;
} fargs;

/* Argument i (positional) or keyword `name`; false if absent. */
static bool arg(const fargs *a, int i, const char *name, jv *out) {
    if (i >= 0 && i < a->npos) {
        *out = a->pos[i];
        return true;
    }
    for (int k = 0; k < a->nkw; k++)
        if (name && !strcmp(a->kwn[k], name)) {
            *out = a->kwv[k];
            return true;
        }
    return false;
}

static void check_args(const fargs *a, int max_pos, const char *const *names) {
    if (a->npos > max_pos)
        jfail(a->c, a->n, TL_ERR_INVALID, "%s() takes at most %d positional argument(s) (%d given)", a->fname,
              max_pos, a->npos);
    for (int k = 0; k < a->nkw; k++) {
        bool ok = false;
        for (int i = 0; names && names[i]; i++)
            if (!strcmp(names[i], a->kwn[k])) ok = true;
        if (!ok) jfail(a->c, a->n, TL_ERR_INVALID, "%s() got an unexpected keyword argument '%s'", a->fname, a->kwn[k]);
    }
}

static const jstr *need_str(const fargs *a, jv v, const char *what) {
    if (v.k != JV_STR)
        jfail(a->c, a->n, TL_ERR_INVALID, "%s: %s must be a string, not %s", a->fname, what, jv_kind_name(v));
    return v.u.s;
}

static int64_t need_int(const fargs *a, jv v, const char *what) {
    if (v.k == JV_INT) return v.u.i;
    if (v.k == JV_BOOL) return v.u.b;
    jfail(a->c, a->n, TL_ERR_INVALID, "%s: %s must be an integer, not %s", a->fname, what, jv_kind_name(v));
}

static const jstr *to_s(jctx *c, jv v) { return jv_to_str(c, v).u.s; }

static jv mkstr(jctx *c, const char *s, size_t n) { return jv_str(c, s, n); }

/* list view of any iterable (dict -> keys, str -> chars, undefined -> []) */
static const jlist *iter_list(const fargs *a, jv v) {
    jctx *c = a->c;
    switch (v.k) {
    case JV_LIST: return jlist_take(c, v.u.l);
    case JV_UNDEF: return jv_list_new(c, 0).u.l;
    case JV_DICT:
        if (!v.u.d->ns) {
            jv r = jv_list_new(c, v.u.d->n);
            for (size_t i = 0; i < v.u.d->n; i++) jv_list_push(c, r, v.u.d->keys[i]);
            return r.u.l;
        }
        break;
    case JV_STR: {
        jv r = jv_list_new(c, 0);
        for (size_t i = 0; i < v.u.s->len;) {
            size_t adv;
            jutf8_decode(v.u.s->s + i, v.u.s->len - i, &adv);
            jv_list_push(c, r, jv_str(c, v.u.s->s + i, adv));
            i += adv;
        }
        return r.u.l;
    }
    default: break;
    }
    jfail(c, a->n, TL_ERR_INVALID, "%s: '%s' object is not iterable", a->fname, jv_kind_name(v));
}

/* ---- case mapping --------------------------------------------------------- */

static uint32_t cp_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}
static uint32_t cp_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}
static bool cp_cased(uint32_t c) { return cp_upper(c) != c || cp_lower(c) != c; }
static bool cp_alpha(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && !jis_space(c));
}

typedef enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_PYTITLE, CASE_JTITLE } case_mode;

static jv case_map(jctx *c, const jstr *s, case_mode m) {
    jbuf b = {.c = c};
    bool prev_cased = false, at_start = true;
    for (size_t i = 0; i < s->len;) {
        size_t adv;
        uint32_t cp = jutf8_decode(s->s + i, s->len - i, &adv);
        uint32_t o = cp;
        switch (m) {
        case CASE_UPPER: o = cp_upper(cp); break;
        case CASE_LOWER: o = cp_lower(cp); break;
        case CASE_CAPITALIZE: o = i == 0 ? cp_upper(cp) : cp_lower(cp); break;
        case CASE_PYTITLE:
            /* str.title(): words are runs of cased letters */
            o = prev_cased ? cp_lower(cp) : cp_upper(cp);
            prev_cased = cp_cased(cp) || (cp >= 0x80 && cp_alpha(cp));
            break;
        case CASE_JTITLE: {
            /* jinja2 title: words start after runs of -, whitespace, ( { [ < */
            bool delim = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jis_space(cp);
            if (delim) {
                at_start = true;
            } else {
                o = at_start ? cp_upper(cp) : cp_lower(cp);
                at_start = false;
            }
            break;
        }
        }
        if (o == cp) jbuf_put(&b, s->s + i, adv);
        else {
            char enc[4];
            jbuf_put(&b, enc, jutf8_encode(o, enc));
        }
        i += adv;
    }
    return jbuf_to_str(&b);
}

/* ---- string helpers ------------------------------------------------------- */

/* strip: which = 1 left, 2 right, 3 both; chars NULL: whitespace */
static jv do_strip(jctx *c, const jstr *s, const jstr *chars, int which) {
    size_t a = 0, b = s->len;
    jwork(c, s->len);
    uint32_t set[64];
    int nset = 0;
    if (chars)
        for (size_t i = 0; i < chars->len && nset < 64;) {
            size_t adv;
            set[nset++] = jutf8_decode(chars->s + i, chars->len - i, &adv);
            i += adv;
        }
    if (which & 1)
        while (a < b) {
            size_t adv;
            uint32_t cp = jutf8_decode(s->s + a, b - a, &adv);
            bool hit = false;
            if (chars) {
                for (int k = 0; k < nset; k++) hit |= set[k] == cp;
            } else
                hit = jis_space(cp);
            if (!hit) break;
            a += adv;
        }
    if (which & 2)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)s->s[st] & 0xC0) == 0x80) st--;
            size_t adv;
            uint32_t cp = jutf8_decode(s->s + st, b - st, &adv);
            bool hit = false;
            if (chars) {
                for (int k = 0; k < nset; k++) hit |= set[k] == cp;
            } else
                hit = jis_space(cp);
            if (!hit) break;
            b = st;
        }
    if (a == 0 && b == s->len) {
        jv v = {0};
        v.k = JV_STR;
        v.u.s = s;
        return v;
    }
    return mkstr(c, s->s + a, b - a);
}

static jv do_replace(jctx *c, const jstr *s, const jstr *old, const jstr *new_, int64_t count) {
    jbuf b = {.c = c};
    size_t i = 0;
    int64_t done = 0;
    if (old->len == 0) {
        /* Python inserts new between every character (and at both ends) */
        for (size_t k = 0; k <= s->len;) {
            if (count < 0 || done < count) {
                jbuf_put(&b, new_->s, new_->len);
                done++;
            }
            if (k == s->len) break;
            size_t adv;
            jutf8_decode(s->s + k, s->len - k, &adv);
            jbuf_put(&b, s->s + k, adv);
            k += adv;
        }
        return jbuf_to_str(&b);
    }
    while (i < s->len) {
        const char *p = (count < 0 || done < count) ? jfind(c, s->s + i, s->len - i, old->s, old->len) : NULL;
        if (!p) break;
        size_t at = (size_t)(p - s->s);
        jbuf_put(&b, s->s + i, at - i);
        jbuf_put(&b, new_->s, new_->len);
        i = at + old->len;
        done++;
        jstep(c);
    }
    jbuf_put(&b, s->s + i, s->len - i);
    return jbuf_to_str(&b);
}

static jv do_split(jctx *c, const jstr *s, const jstr *sep, int64_t maxsplit, bool from_right) {
    jv r = jv_list_new(c, 0);
    if (sep) {
        if (!from_right) {
            size_t i = 0;
            int64_t k = 0;
            for (;;) {
                const char *p = (maxsplit < 0 || k < maxsplit) ? jfind(c, s->s + i, s->len - i, sep->s, sep->len) : NULL;
                if (!p) break;
                size_t at = (size_t)(p - s->s);
                jv_list_push(c, r, mkstr(c, s->s + i, at - i));
                i = at + sep->len;
                k++;
            }
            jv_list_push(c, r, mkstr(c, s->s + i, s->len - i));
            return r;
        }
        /* rsplit: collect from the right, then reverse */
        size_t e = s->len;
        int64_t k = 0;
        jv tmp = jv_list_new(c, 0);
        for (;;) {
            const char *p = (maxsplit < 0 || k < maxsplit) ? jrfind(c, s->s, e, sep->s, sep->len) : NULL;
            if (!p) break;
            size_t at = (size_t)(p - s->s);
            jv_list_push(c, tmp, mkstr(c, s->s + at + sep->len, e - at - sep->len));
            e = at;
            k++;
        }
        jv_list_push(c, tmp, mkstr(c, s->s, e));
        for (size_t i = tmp.u.l->n; i-- > 0;) jv_list_push(c, r, tmp.u.l->v[i]);
        return r;
    }
    /* whitespace split: runs of whitespace, no empty strings */
    size_t n = s->len;
    jwork(c, n);
    /* collect word boundaries */
    size_t *ws = jc_alloc(c, (n + 1) * 2 * sizeof(size_t));
    size_t nw = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = jutf8_decode(s->s + i, n - i, &adv);
        if (jis_space(cp)) {
            i += adv;
            continue;
        }
        size_t st = i;
        while (i < n) {
            cp = jutf8_decode(s->s + i, n - i, &adv);
            if (jis_space(cp)) break;
            i += adv;
        }
        ws[2 * nw] = st;
        ws[2 * nw + 1] = i;
        nw++;
    }
    if (maxsplit < 0 || (size_t)maxsplit >= nw) {
        for (size_t w = 0; w < nw; w++) jv_list_push(c, r, mkstr(c, s->s + ws[2 * w], ws[2 * w + 1] - ws[2 * w]));
        return r;
    }
    if (!from_right) {
        for (int64_t w = 0; w < maxsplit; w++) jv_list_push(c, r, mkstr(c, s->s + ws[2 * w], ws[2 * w + 1] - ws[2 * w]));
        /* remainder: from the next word start to the end, trailing whitespace stripped */
        size_t st = ws[2 * maxsplit];
        size_t e = ws[2 * (nw - 1) + 1];
        jv_list_push(c, r, mkstr(c, s->s + st, e - st));
    } else {
        size_t first = nw - (size_t)maxsplit;
        jv_list_push(c, r, mkstr(c, s->s + ws[0], ws[2 * (first - 1) + 1] - ws[0]));
        for (size_t w = first; w < nw; w++) jv_list_push(c, r, mkstr(c, s->s + ws[2 * w], ws[2 * w + 1] - ws[2 * w]));
    }
    return r;
}

static jv do_splitlines(jctx *c, const jstr *s) {
    jv r = jv_list_new(c, 0);
    size_t st = 0;
    for (size_t i = 0; i < s->len;) {
        size_t adv;
        uint32_t cp = jutf8_decode(s->s + i, s->len - i, &adv);
        bool br = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1C && cp <= 0x1E) ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (br) {
            jv_list_push(c, r, mkstr(c, s->s + st, i - st));
            i += adv;
            if (cp == '\r' && i < s->len && s->s[i] == '\n') i++;
            st = i;
        } else
            i += adv;
    }
    if (st < s->len) jv_list_push(c, r, mkstr(c, s->s + st, s->len - st));
    return r;
}

static bool prefix_match(const fargs *a, const jstr *s, jv pre, bool suffix) {
    if (pre.k == JV_LIST && pre.u.l->tuple) {
        jsteps(a->c, pre.u.l->n);
        for (size_t i = 0; i < pre.u.l->n; i++)
            if (prefix_match(a, s, pre.u.l->v[i], suffix)) return true;
        return false;
    }
    const jstr *p = need_str(a, pre, suffix ? "suffix" : "prefix");
    if (p->len > s->len) return false;
    jwork(a->c, p->len);
    return !memcmp(suffix ? s->s + s->len - p->len : s->s, p->s, p->len);
}

/* ---- sorting (stable; comparisons may longjmp) ---------------------------- */

typedef struct sort_ctx {
    jctx *c;
    const jnode *n;
    const char *attr;
    bool case_sensitive;
    bool reverse;
    int by_value; /* dictsort: compare item[1] */
} sort_ctx;

static jv attr_path(jctx *c, const jnode *n, jv obj, const char *path);

static jv sort_key(sort_ctx *s, jv v) {
    if (s->by_value >= 0 && v.k == JV_LIST && v.u.l->n == 2) v = v.u.l->v[s->by_value];
    if (s->attr) v = attr_path(s->c, s->n, v, s->attr);
    if (!s->case_sensitive && v.k == JV_STR) v = case_map(s->c, v.u.s, CASE_LOWER);
    return v;
}

static jv sorted_copy(sort_ctx *s, const jlist *l) {
    jctx *c = s->c;
    size_t n = l->n;
    jsteps(c, n);
    jv r = jv_list_new(c, n);
    for (size_t i = 0; i < n; i++) jv_list_push(c, r, l->v[i]);
    if (n < 2) return r;
    jv *keys = jc_alloc(c, n * sizeof(jv));
    for (size_t i = 0; i < n; i++) keys[i] = sort_key(s, l->v[i]);
    const jnode *saved = c->cur;
    c->cur = s->n;
    jsort(c, r.u.l->v, keys, n, s->reverse);
    c->cur = saved;
    return r;
}

/* "a.b.0" attribute paths as jinja2's make_attrgetter */
static jv attr_path(jctx *c, const jnode *n, jv obj, const char *path) {
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        jstep(c);
        jwork(c, len);
        /* a run of digits is an index (too large for 64 bits: no item has it) */
        int64_t idx;
        bool digits = len > 0 && p[0] != '-' && jparse_i64(p, len, &idx);
        jv key = digits ? jv_int(idx) : jv_str(c, p, len);
        obj = jeval_getitem(c, n, obj, key);
        p += len;
        if (*p == '.') p++;
    }
    return obj;
}

/* ---- tests ---------------------------------------------------------------- */

static const char *const test_names[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "sameas", "eq", "equalto", "==", "ne", "!=", "lt",
    "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "odd", "even",
    "divisibleby", "lower", "upper", "escaped", "filter", "test", NULL};

bool jbuiltin_test(jctx *c, const jnode *n, const char *name, jv v, jv *args, int nargs) {
    fargs a = {.c = c, .n = n, .fname = name, .pos = args, .npos = nargs};
    jv x;
    bool has = arg(&a, 0, NULL, &x);
#define NEED1()                                                                      \
    do {                                                                             \
        if (!has) jfail(c, n, TL_ERR_INVALID, "test '%s' needs an argument", name); \
    } while (0)
    if (!strcmp(name, "defined")) return v.k != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.k == JV_UNDEF;
    if (!strcmp(name, "none")) return v.k == JV_NONE;
    if (!strcmp(name, "boolean")) return v.k == JV_BOOL;
    if (!strcmp(name, "false")) return v.k == JV_BOOL && !v.u.b;
    if (!strcmp(name, "true")) return v.k == JV_BOOL && v.u.b;
    if (!strcmp(name, "integer")) return v.k == JV_INT;
    if (!strcmp(name, "float")) return v.k == JV_FLOAT;
    if (!strcmp(name, "number")) return v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL;
    if (!strcmp(name, "string")) return v.k == JV_STR;
    if (!strcmp(name, "mapping")) return v.k == JV_DICT && !v.u.d->ns;
    if (!strcmp(name, "iterable")) return v.k == JV_STR || v.k == JV_LIST || (v.k == JV_DICT && !v.u.d->ns) || v.k == JV_UNDEF;
    if (!strcmp(name, "sequence"))
        return v.k == JV_STR || (v.k == JV_LIST && !v.u.l->lazy) || (v.k == JV_DICT && !v.u.d->ns) || v.k == JV_UNDEF;
    if (!strcmp(name, "callable")) return v.k == JV_MACRO || v.k == JV_FUNC || v.k == JV_METHOD;
    if (!strcmp(name, "escaped")) return false;
    if (!strcmp(name, "sameas")) {
        NEED1();
        if (v.k != x.k) return false;
        switch (v.k) {
        case JV_NONE:
        case JV_UNDEF: return true;
        case JV_BOOL: return v.u.b == x.u.b;
        case JV_INT: return v.u.i == x.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython small ints */
        case JV_STR: return v.u.s == x.u.s;
        case JV_LIST: return v.u.l == x.u.l;
        case JV_DICT: return v.u.d == x.u.d;
        default: return jv_equal(c, v, x);
        }
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) {
        NEED1();
        return jv_equal(c, v, x);
    }
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        NEED1();
        return !jv_equal(c, v, x);
    }
    int cmp_op = 0;
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) cmp_op = 1;
    else if (!strcmp(name, "le") || !strcmp(name, "<=")) cmp_op = 2;
    else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) cmp_op = 3;
    else if (!strcmp(name, "ge") || !strcmp(name, ">=")) cmp_op = 4;
    if (cmp_op) {
        NEED1();
        int r = jv_compare(c, v, x);
        return cmp_op == 1 ? r < 0 : cmp_op == 2 ? r <= 0 : cmp_op == 3 ? r > 0 : r >= 0;
    }
    if (!strcmp(name, "in")) {
        NEED1();
        if (x.k == JV_STR) {
            if (v.k != JV_STR) jfail(c, n, TL_ERR_INVALID, "'in <string>' requires string as left operand");
            return jfind(c, x.u.s->s, x.u.s->len, v.u.s->s, v.u.s->len) != NULL;
        }
        if (x.k == JV_DICT) return jdict_get(c, x.u.d, v) != NULL;
        const jlist *l = iter_list(&a, x);
        jsteps(c, l->n);
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(c, l->v[i], v)) return true;
        return false;
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        int64_t i = need_int(&a, v, "value");
        bool odd = (i % 2) != 0;
        return name[0] == 'o' ? odd : !odd;
    }
    if (!strcmp(name, "divisibleby")) {
        NEED1();
        int64_t i = need_int(&a, v, "value"), d = need_int(&a, x, "divisor");
        if (d == 0) jfail(c, n, TL_ERR_INVALID, "divisibleby: division by zero");
        return i % d == 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        const jstr *s = to_s(c, v);
        jv m = case_map(c, s, name[0] == 'l' ? CASE_LOWER : CASE_UPPER);
        bool any_cased = false;
        for (size_t i = 0; i < s->len;) {
            size_t adv;
            any_cased |= cp_cased(jutf8_decode(s->s + i, s->len - i, &adv));
            i += adv;
        }
        return any_cased && m.u.s->len == s->len && !memcmp(m.u.s->s, s->s, s->len);
    }
    if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        NEED1();
        if (x.k != JV_STR) return false;
        if (name[0] == 't') {
            for (int i = 0; test_names[i]; i++)
                if (!strcmp(test_names[i], x.u.s->s)) return true;
            return false;
        }
        return jbuiltin_filter_known(x.u.s->s);
    }
#undef NEED1
    jfail(c, n, TL_ERR_UNSUPPORTED, "unknown test '%s'", name);
}

bool jbuiltin_test_known(const char *name) {
    for (int i = 0; test_names[i]; i++)
        if (!strcmp(test_names[i], name)) return true;
    return false;
}

/* select/reject: apply test `tname` (or truthiness) with extra args */
static bool apply_test(jctx *c, const jnode *n, jv v, jv tname, jv *extra, int nextra) {
    if (tname.k == JV_UNDEF) return jv_truthy(v);
    if (tname.k != JV_STR) jfail(c, n, TL_ERR_INVALID, "test name must be a string");
    return jbuiltin_test(c, n, tname.u.s->s, v, extra, nextra);
}

/* ---- filters -------------------------------------------------------------- */

static const char *const filter_names[] = {
    "trim", "tojson", "length", "count", "upper", "lower", "capitalize", "title", "join", "default", "d",
    "first", "last", "list", "items", "replace", "string", "int", "float", "safe", "escape", "e",
    "forceescape", "selectattr", "rejectattr", "select", "reject", "map", "abs", "round", "sum", "min",
    "max", "unique", "sort", "reverse", "indent", "dictsort", "wordcount", "batch", "center", "truncate",
    "striptags", "format", "attr", NULL};

bool jbuiltin_filter_known(const char *name) {
    for (int i = 0; filter_names[i]; i++)
        if (!strcmp(filter_names[i], name)) return true;
    return false;
}

static jv html_escape(jctx *c, const jstr *s) {
    jbuf b = {.c = c};
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        switch (ch) {
        case '&': jbuf_puts(&b, "&amp;"); break;
        case '<': jbuf_puts(&b, "&lt;"); break;
        case '>': jbuf_puts(&b, "&gt;"); break;
        case '"': jbuf_puts(&b, "&#34;"); break;
        case '\'': jbuf_puts(&b, "&#39;"); break;
        default: jbuf_put(&b, &ch, 1);
        }
    }
    return jbuf_to_str(&b);
}

static jv py_round(jctx *c, const jnode *n, jv v, int64_t prec, const char *method) {
    double x;
    if (v.k == JV_INT || v.k == JV_BOOL) {
        if (!strcmp(method, "common")) return v.k == JV_INT ? v : jv_int(v.u.b);
        x = (double)(v.k == JV_INT ? v.u.i : v.u.b);
    } else if (v.k == JV_FLOAT)
        x = v.u.f;
    else
        jfail(c, n, TL_ERR_INVALID, "round: '%s' is not a number", jv_kind_name(v));
    double p = pow(10.0, (double)prec);
    if (!strcmp(method, "common")) {
        /* Python round(): correctly rounded, ties to even; via the decimal string */
        char buf[64];
        if (prec >= 0 && prec < 20) {
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            return jv_float(strtod(buf, NULL));
        }
        return jv_float(nearbyint(x * p) / p);
    }
    if (!strcmp(method, "ceil")) return jv_float(ceil(x * p) / p);
    if (!strcmp(method, "floor")) return jv_float(floor(x * p) / p);
    jfail(c, n, TL_ERR_INVALID, "round: method must be 'common', 'ceil' or 'floor'");
}

/* ---- printf-style formatting as Python's str % args ----------------------- */

typedef struct pfspec {
    bool left, plus, space, alt, zero;
    int64_t width, prec; /* -1: none */
} pfspec;

static void pad(jbuf *b, int64_t k, char ch) {
    char buf[64];
    memset(buf, ch, sizeof buf);
    for (; k > 0; k -= (int64_t)sizeof buf) jbuf_put(b, buf, k < (int64_t)sizeof buf ? (size_t)k : sizeof buf);
}

/* A width or precision: digits, at most JINJA_MAX_FORMAT_WIDTH. */
static int64_t pf_number(jctx *c, const jnode *n, const jstr *fmt, size_t *j) {
    int64_t v = 0;
    while (*j < fmt->len && fmt->s[*j] >= '0' && fmt->s[*j] <= '9') {
        v = v * 10 + (fmt->s[(*j)++] - '0');
        if (v > JINJA_MAX_FORMAT_WIDTH)
            jfail(c, n, TL_ERR_UNSUPPORTED, "format: width or precision larger than %d (JINJA_MAX_FORMAT_WIDTH)",
                  JINJA_MAX_FORMAT_WIDTH);
    }
    return v;
}

/* body (code points counted for the width) padded as the spec says */
static void pf_emit(jbuf *b, const pfspec *sp, const char *prefix, int64_t zeros, const char *body, size_t blen,
                    int64_t body_width) {
    int64_t w = (int64_t)strlen(prefix) + zeros + body_width;
    int64_t fill = sp->width > w ? sp->width - w : 0;
    if (!sp->left && !sp->zero) pad(b, fill, ' ');
    jbuf_puts(b, prefix);
    if (!sp->left && sp->zero) pad(b, fill, '0');
    pad(b, zeros, '0');
    jbuf_put(b, body, blen);
    if (sp->left) pad(b, fill, ' ');
}

static void pf_int(jctx *c, const jnode *n, jbuf *b, pfspec sp, char conv, jv v) {
    int64_t x;
    if (v.k == JV_INT) x = v.u.i;
    else if (v.k == JV_BOOL) x = v.u.b;
    else if (v.k == JV_FLOAT && conv != 'x' && conv != 'X' && conv != 'o') {
        if (!(v.u.f >= -9223372036854775808.0 && v.u.f < 9223372036854775808.0))
            jfail(c, n, TL_ERR_UNSUPPORTED, "format: %%%c of %g is outside the 64-bit integer range", conv, v.u.f);
        x = (int64_t)v.u.f;
    } else
        jfail(c, n, TL_ERR_INVALID, "format: %%%c format: a number is required, not %s", conv, jv_kind_name(v));
    uint64_t mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
    char digits[32];
    const char *fmt = conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : conv == 'o' ? "%llo" : "%llu";
    int nd = snprintf(digits, sizeof digits, fmt, (unsigned long long)mag);
    char prefix[8];
    size_t k = 0;
    if (x < 0) prefix[k++] = '-';
    else if (sp.plus) prefix[k++] = '+';
    else if (sp.space) prefix[k++] = ' ';
    if (sp.alt && conv != 'd' && conv != 'i' && conv != 'u') {
        prefix[k++] = '0';
        prefix[k++] = conv == 'o' ? 'o' : conv;
    }
    prefix[k] = 0;
    int64_t zeros = sp.prec > nd ? sp.prec - nd : 0;
    if (sp.prec >= 0) sp.zero = false; /* as C and Python: a precision turns off 0-padding */
    pf_emit(b, &sp, prefix, zeros, digits, (size_t)nd, nd);
}

static void pf_float(jctx *c, const jnode *n, jbuf *b, const pfspec *sp, char conv, jv v) {
    double x;
    if (v.k == JV_FLOAT) x = v.u.f;
    else if (v.k == JV_INT) x = (double)v.u.i;
    else if (v.k == JV_BOOL) x = v.u.b;
    else jfail(c, n, TL_ERR_INVALID, "format: %%%c format: a number is required, not %s", conv, jv_kind_name(v));
    char spec[16];
    size_t k = 0;
    spec[k++] = '%';
    if (sp->left) spec[k++] = '-';
    if (sp->plus) spec[k++] = '+';
    if (sp->space) spec[k++] = ' ';
    if (sp->alt) spec[k++] = '#';
    if (sp->zero) spec[k++] = '0';
    spec[k++] = '*';
    spec[k++] = '.';
    spec[k++] = '*';
    spec[k++] = conv;
    spec[k] = 0;
    int w = sp->width < 0 ? 0 : (int)sp->width, p = sp->prec < 0 ? 6 : (int)sp->prec;
    int len = snprintf(NULL, 0, spec, w, p, x); /* both bounded by JINJA_MAX_FORMAT_WIDTH */
    if (len < 0) jfail(c, n, TL_ERR_INVALID, "format: cannot format %%%c", conv);
    char *out = jc_alloc(c, (size_t)len + 1);
    snprintf(out, (size_t)len + 1, spec, w, p, x);
    jbuf_put(b, out, (size_t)len);
}

static void pf_str(jctx *c, jbuf *b, const pfspec *sp, char conv, jv v) {
    jbuf t = {.c = c};
    if (conv == 's') jv_write_str(&t, v);
    else jv_write_repr(&t, v);
    const char *p = t.p ? t.p : "";
    size_t len = t.n, ncp = jutf8_count(p, len);
    if (sp->prec >= 0 && (size_t)sp->prec < ncp) { /* at most prec characters */
        len = jutf8_offset(p, len, (size_t)sp->prec);
        ncp = (size_t)sp->prec;
    }
    pfspec s2 = *sp;
    s2.zero = false;
    pf_emit(b, &s2, "", 0, p, len, (int64_t)ncp);
}

/* %s %r %d %i %u %x %X %o %f %F %e %E %g %G %%, with flags, width and
 * precision (Python's rules: widths count characters); no mapping keys */
jv jbuiltin_percent_format(jctx *c, const jnode *n, const jstr *fmt, jv *args, int nargs) {
    jbuf b = {.c = c};
    int ai = 0;
    jwork(c, fmt->len);
    for (size_t i = 0; i < fmt->len; i++) {
        char ch = fmt->s[i];
        if (ch != '%') {
            size_t e = i;
            while (e < fmt->len && fmt->s[e] != '%') e++;
            jbuf_put(&b, fmt->s + i, e - i);
            i = e - 1;
            continue;
        }
        if (i + 1 < fmt->len && fmt->s[i + 1] == '%') {
            jbuf_puts(&b, "%");
            i++;
            continue;
        }
        pfspec sp = {.width = -1, .prec = -1};
        size_t j = i + 1;
        for (; j < fmt->len && strchr("-+ #0", fmt->s[j]); j++) {
            switch (fmt->s[j]) {
            case '-': sp.left = true; break;
            case '+': sp.plus = true; break;
            case ' ': sp.space = true; break;
            case '#': sp.alt = true; break;
            default: sp.zero = true;
            }
        }
        if (j < fmt->len && fmt->s[j] >= '0' && fmt->s[j] <= '9') sp.width = pf_number(c, n, fmt, &j);
        if (j < fmt->len && fmt->s[j] == '.') {
            j++;
            sp.prec = pf_number(c, n, fmt, &j);
        }
        while (j < fmt->len && strchr("hlL", fmt->s[j])) j++; /* Python ignores length modifiers */
        if (j >= fmt->len) jfail(c, n, TL_ERR_INVALID, "format: incomplete format");
        char conv = fmt->s[j];
        if (conv == '(') jfail(c, n, TL_ERR_UNSUPPORTED, "format: mapping keys are not supported");
        if (conv == '*') jfail(c, n, TL_ERR_UNSUPPORTED, "format: '*' widths are not supported");
        if (!strchr("srdiuxXofFeEgG", conv) || !conv)
            jfail(c, n, TL_ERR_UNSUPPORTED, "format: unsupported format character '%c'", conv);
        if (ai >= nargs) jfail(c, n, TL_ERR_INVALID, "format: not enough arguments for format string");
        jv v = args[ai++];
        if (conv == 's' || conv == 'r') pf_str(c, &b, &sp, conv, v);
        else if (strchr("diuxXo", conv)) pf_int(c, n, &b, sp, conv, v);
        else pf_float(c, n, &b, &sp, conv, v);
        i = j;
    }
    if (ai < nargs) jfail(c, n, TL_ERR_INVALID, "format: not all arguments converted during string formatting");
    return jbuf_to_str(&b);
}

static jv filter_map(fargs *a, jv in) {
    jctx *c = a->c;
    jv r = jv_lazy_list(c, JL_GEN);
    if (!jv_truthy(in)) return r; /* jinja2: `if value:` before iterating */
    const jlist *l = iter_list(a, in);
    jv attr, dflt;
    jsteps(c, l->n);
    bool has_attr = arg(a, -1, "attribute", &attr);
    bool has_dflt = arg(a, -1, "default", &dflt);
    if (has_attr) {
        const jstr *path = need_str(a, attr, "attribute");
        for (size_t i = 0; i < l->n; i++) {
            jv v = attr_path(c, a->n, l->v[i], path->s);
            if (v.k == JV_UNDEF && has_dflt) v = dflt;
            jv_list_push(c, r, v);
        }
        return r;
    }
    if (a->npos < 1) jfail(c, a->n, TL_ERR_INVALID, "map: needs a filter name or attribute=");
    const jstr *fname = need_str(a, a->pos[0], "filter name");
    for (size_t i = 0; i < l->n; i++)
        jv_list_push(c, r, jbuiltin_filter(c, a->n, fname->s, l->v[i], a->pos + 1, a->npos - 1, NULL, NULL, 0));
    return r;
}

jv jbuiltin_filter(jctx *c, const jnode *n, const char *name, jv in, jv *args, int nargs,
                   const char **kwn, jv *kwv, int nkw) {
    fargs a = {.c = c, .n = n, .fname = name, .pos = args, .npos = nargs, .kwn = kwn, .kwv = kwv, .nkw = nkw};
    jv x, y;
    if (!strcmp(name, "trim")) {
        static const char *const kw[] = {"chars", NULL};
        check_args(&a, 1, kw);
        const jstr *chars = arg(&a, 0, "chars", &x) && x.k != JV_NONE ? need_str(&a, x, "chars") : NULL;
        return do_strip(c, to_s(c, in), chars, 3);
    }
    if (!strcmp(name, "tojson")) {
        static const char *const kw[] = {"indent", "ensure_ascii", "separators", "sort_keys", NULL};
        check_args(&a, 4, kw);
        jjson_opts o = {.indent = -1};
        if (arg(&a, 0, "indent", &x) && x.k != JV_NONE) {
            o.indent = (int)need_int(&a, x, "indent");
            if (o.indent < 0) o.indent = 0;
            if (o.indent > 64) jfail(c, n, TL_ERR_UNSUPPORTED, "tojson: indent too large");
        }
        if (arg(&a, 1, "ensure_ascii", &x)) o.ensure_ascii = jv_truthy(x);
        if (arg(&a, 2, "separators", &x) && x.k != JV_NONE) {
            if (x.k != JV_LIST || x.u.l->n != 2) jfail(c, n, TL_ERR_INVALID, "tojson: separators must be a pair");
            o.item_sep = need_str(&a, x.u.l->v[0], "separator")->s;
            o.key_sep = need_str(&a, x.u.l->v[1], "separator")->s;
        }
        if (arg(&a, 3, "sort_keys", &x)) o.sort_keys = jv_truthy(x);
        jbuf b = {.c = c};
        const jnode *saved = c->cur;
        c->cur = n;
        jv_write_json(&b, in, &o, 0);
        c->cur = saved;
        return jbuf_to_str(&b);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        check_args(&a, 0, NULL);
        switch (in.k) {
        case JV_STR: return jv_int((int64_t)in.u.s->ncp);
        case JV_LIST:
            if (in.u.l->lazy == JL_GEN) break;
            return jv_int((int64_t)in.u.l->n);
        case JV_DICT: return jv_int((int64_t)in.u.d->n);
        case JV_UNDEF: return jv_int(0);
        default: break;
        }
        switch (in.k) {
        default: jfail(c, n, TL_ERR_INVALID, "object of type '%s' has no len()", jv_kind_name(in));
        }
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
        check_args(&a, 0, NULL);
        case_mode m = name[0] == 'u' ? CASE_UPPER : name[0] == 'l' ? CASE_LOWER : name[0] == 'c' ? CASE_CAPITALIZE : CASE_JTITLE;
        return case_map(c, to_s(c, in), m);
    }
    if (!strcmp(name, "join")) {
        static const char *const kw[] = {"d", "attribute", NULL};
        check_args(&a, 2, kw);
        const jstr *sep = arg(&a, 0, "d", &x) ? to_s(c, x) : NULL;
        bool has_attr = arg(&a, 1, "attribute", &y) && y.k != JV_NONE;
        const jlist *l = iter_list(&a, in);
        jsteps(c, l->n);
        jbuf b = {.c = c};
        for (size_t i = 0; i < l->n; i++) {
            if (i && sep) jbuf_put(&b, sep->s, sep->len);
            jv item = has_attr ? attr_path(c, n, l->v[i], to_s(c, y)->s) : l->v[i];
            jv_write_str(&b, item);
        }
        return jbuf_to_str(&b);
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        static const char *const kw[] = {"default_value", "boolean", NULL};
        check_args(&a, 2, kw);
        jv dv = arg(&a, 0, "default_value", &x) ? x : jv_str(c, "", 0);
        bool boolean = arg(&a, 1, "boolean", &y) && jv_truthy(y);
        if (in.k == JV_UNDEF || (boolean && !jv_truthy(in))) return dv;
        return in;
    }
    if (!strcmp(name, "first")) {
        check_args(&a, 0, NULL);
        const jlist *l = iter_list(&a, in);
        jv u = jv_undef();
        return l->n ? l->v[0] : u;
    }
    if (!strcmp(name, "last")) {
        check_args(&a, 0, NULL);
        if (in.k == JV_DICT || (in.k == JV_LIST && in.u.l->lazy))
            jfail(c, n, TL_ERR_INVALID, "last: '%s' object is not reversible", jv_kind_name(in));
        const jlist *l = iter_list(&a, in);
        jv u = jv_undef();
        return l->n ? l->v[l->n - 1] : u;
    }
    if (!strcmp(name, "list")) {
        check_args(&a, 0, NULL);
        const jlist *l = iter_list(&a, in);
        jsteps(c, l->n);
        jv r = jv_list_new(c, l->n);
        for (size_t i = 0; i < l->n; i++) jv_list_push(c, r, l->v[i]);
        return r;
    }
    if (!strcmp(name, "items")) {
        check_args(&a, 0, NULL);
        jv r = jv_lazy_list(c, JL_GEN);
        if (in.k == JV_UNDEF) return r;
        if (in.k != JV_DICT || in.u.d->ns) jfail(c, n, TL_ERR_INVALID, "items: can only get item pairs from a mapping");
        jsteps(c, in.u.d->n);
        for (size_t i = 0; i < in.u.d->n; i++) {
            jv t = jv_list_new(c, 2);
            t.u.l->tuple = true;
            jv_list_push(c, t, in.u.d->keys[i]);
            jv_list_push(c, t, in.u.d->vals[i]);
            jv_list_push(c, r, t);
        }
        return r;
    }
    if (!strcmp(name, "replace")) {
        static const char *const kw[] = {"old", "new", "count", NULL};
        check_args(&a, 3, kw);
        if (!arg(&a, 0, "old", &x) || !arg(&a, 1, "new", &y)) jfail(c, n, TL_ERR_INVALID, "replace: needs old and new");
        jv cnt;
        int64_t count = arg(&a, 2, "count", &cnt) && cnt.k != JV_NONE ? need_int(&a, cnt, "count") : -1;
        return do_replace(c, to_s(c, in), to_s(c, x), to_s(c, y), count);
    }
    if (!strcmp(name, "string")) {
        check_args(&a, 0, NULL);
        return jv_to_str(c, in);
    }
    if (!strcmp(name, "safe")) {
        check_args(&a, 0, NULL);
        jv r = jv_to_str(c, in);
        r.markup = true;
        return r;
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) {
        check_args(&a, 0, NULL);
        if (in.k == JV_STR && in.markup && name[0] != 'f') return in;
        jv r = html_escape(c, to_s(c, in));
        r.markup = true;
        return r;
    }
    if (!strcmp(name, "int")) {
        static const char *const kw[] = {"default", "base", NULL};
        check_args(&a, 2, kw);
        jv dv = arg(&a, 0, "default", &x) ? x : jv_int(0);
        int64_t base = arg(&a, 1, "base", &y) ? need_int(&a, y, "base") : 10;
        if (in.k == JV_INT) return in;
        if (in.k == JV_BOOL) return jv_int(in.u.b);
        double d;
        if (in.k == JV_FLOAT) d = in.u.f;
        else if (in.k == JV_STR) {
            /* jinja2: int(s, base), else int(float(s)), else the default */
            const jstr *s = do_strip(c, in.u.s, NULL, 3).u.s;
            if (s->len == 0) return dv;
            char *end;
            if (base == 0 || (base >= 2 && base <= 36)) { /* Python's valid bases; others raise */
                errno = 0;
                long long v = strtoll(s->s, &end, (int)base);
                if (end != s->s && *end == 0) {
                    if (errno == ERANGE)
                        jfail(c, n, TL_ERR_UNSUPPORTED, "int: '%.40s' is outside the 64-bit integer range", s->s);
                    return jv_int(v);
                }
            }
            d = strtod(s->s, &end);
            if (end == s->s || *end != 0) return dv;
        } else
            return dv;
        if (isnan(d)) return dv;
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
            jfail(c, n, TL_ERR_UNSUPPORTED, "int: %g is outside the 64-bit integer range", d);
        return jv_int((int64_t)d);
    }
    if (!strcmp(name, "float")) {
        static const char *const kw[] = {"default", NULL};
        check_args(&a, 1, kw);
        jv dv = arg(&a, 0, "default", &x) ? x : jv_float(0.0);
        if (in.k == JV_FLOAT) return in;
        if (in.k == JV_INT) return jv_float((double)in.u.i);
        if (in.k == JV_BOOL) return jv_float(in.u.b);
        if (in.k == JV_STR) {
            const jstr *s = do_strip(c, in.u.s, NULL, 3).u.s;
            char *end;
            double d = strtod(s->s, &end);
            if (s->len && *end == 0) return jv_float(d);
        }
        return dv;
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr") || !strcmp(name, "select") ||
        !strcmp(name, "reject")) {
        bool attr_mode = strstr(name, "attr") != NULL;
        bool keep_match = name[0] == 's';
        if (!jv_truthy(in)) return jv_lazy_list(c, JL_GEN); /* jinja2: `if seq:` before iterating */
        const jlist *l = iter_list(&a, in);
        int base = 0;
        const char *path = NULL;
        if (attr_mode) {
            if (a.npos < 1) jfail(c, n, TL_ERR_INVALID, "%s: needs an attribute name", name);
            path = need_str(&a, a.pos[0], "attribute")->s;
            base = 1;
        }
        jv tname = a.npos > base ? a.pos[base] : jv_undef();
        jv *extra = a.npos > base + 1 ? a.pos + base + 1 : NULL;
        int nextra = a.npos > base + 1 ? a.npos - base - 1 : 0;
        jv r = jv_lazy_list(c, JL_GEN);
        for (size_t i = 0; i < l->n; i++) {
            jstep(c);
            jv v = attr_mode ? attr_path(c, n, l->v[i], path) : l->v[i];
            if (apply_test(c, n, v, tname, extra, nextra) == keep_match) jv_list_push(c, r, l->v[i]);
        }
        return r;
    }
    if (!strcmp(name, "map")) return filter_map(&a, in);
    if (!strcmp(name, "abs")) {
        if (in.k == JV_INT) {
            if (in.u.i == INT64_MIN) jfail(c, n, TL_ERR_UNSUPPORTED, "integer overflow");
            return jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
        }
        if (in.k == JV_BOOL) return jv_int(in.u.b);
        if (in.k == JV_FLOAT) return jv_float(fabs(in.u.f));
        jfail(c, n, TL_ERR_INVALID, "bad operand type for abs(): '%s'", jv_kind_name(in));
    }
    if (!strcmp(name, "round")) {
        static const char *const kw[] = {"precision", "method", NULL};
        check_args(&a, 2, kw);
        int64_t prec = arg(&a, 0, "precision", &x) ? need_int(&a, x, "precision") : 0;
        const char *method = arg(&a, 1, "method", &y) ? need_str(&a, y, "method")->s : "common";
        return py_round(c, n, in, prec, method);
    }
    if (!strcmp(name, "sum")) {
        static const char *const kw[] = {"attribute", "start", NULL};
        check_args(&a, 2, kw);
        bool has_attr = arg(&a, 0, "attribute", &x) && x.k != JV_NONE;
        jv acc = arg(&a, 1, "start", &y) ? y : jv_int(0);
        const jlist *l = iter_list(&a, in);
        jsteps(c, l->n);
        for (size_t i = 0; i < l->n; i++) {
            jv v = has_attr ? attr_path(c, n, l->v[i], to_s(c, x)->s) : l->v[i];
            bool ai = acc.k == JV_INT || acc.k == JV_BOOL, vi = v.k == JV_INT || v.k == JV_BOOL;
            if (ai && vi) {
                int64_t r;
                if (__builtin_add_overflow(acc.k == JV_INT ? acc.u.i : acc.u.b, v.k == JV_INT ? v.u.i : v.u.b, &r))
                    jfail(c, n, TL_ERR_UNSUPPORTED, "integer overflow in sum");
                acc = jv_int(r);
            } else if ((ai || acc.k == JV_FLOAT) && (vi || v.k == JV_FLOAT)) {
                double p = acc.k == JV_FLOAT ? acc.u.f : (double)(acc.k == JV_INT ? acc.u.i : acc.u.b);
                double q = v.k == JV_FLOAT ? v.u.f : (double)(v.k == JV_INT ? v.u.i : v.u.b);
                acc = jv_float(p + q);
            } else
                jfail(c, n, TL_ERR_INVALID, "sum: unsupported operand types '%s' and '%s'", jv_kind_name(acc), jv_kind_name(v));
        }
        return acc;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max") || !strcmp(name, "sort") || !strcmp(name, "unique") ||
        !strcmp(name, "dictsort")) {
        static const char *const kw[] = {"reverse", "case_sensitive", "attribute", "by", NULL};
        check_args(&a, 3, kw);
        sort_ctx s = {.c = c, .n = n, .by_value = -1};
        if (!strcmp(name, "sort")) {
            if (arg(&a, 0, "reverse", &x)) s.reverse = jv_truthy(x);
            if (arg(&a, 1, "case_sensitive", &x)) s.case_sensitive = jv_truthy(x);
            if (arg(&a, 2, "attribute", &x) && x.k != JV_NONE) s.attr = to_s(c, x)->s;
        } else if (!strcmp(name, "dictsort")) {
            if (arg(&a, 0, "case_sensitive", &x)) s.case_sensitive = jv_truthy(x);
            s.by_value = 0;
            if (arg(&a, 1, "by", &x)) {
                const jstr *by = need_str(&a, x, "by");
                if (!strcmp(by->s, "value")) s.by_value = 1;
                else if (strcmp(by->s, "key")) jfail(c, n, TL_ERR_INVALID, "dictsort: by must be 'key' or 'value'");
            }
            if (arg(&a, 2, "reverse", &x)) s.reverse = jv_truthy(x);
            if (in.k != JV_DICT || in.u.d->ns) jfail(c, n, TL_ERR_INVALID, "dictsort: value is not a dict");
            jv pairs = jbuiltin_filter(c, n, "items", in, NULL, 0, NULL, NULL, 0);
            return sorted_copy(&s, pairs.u.l);
        } else {
            if (arg(&a, 0, "case_sensitive", &x)) s.case_sensitive = jv_truthy(x);
            if (arg(&a, 1, "attribute", &x) && x.k != JV_NONE) s.attr = to_s(c, x)->s;
        }
        const jlist *l = iter_list(&a, in);
        if (!strcmp(name, "sort")) return sorted_copy(&s, l);
        if (!strcmp(name, "unique")) {
            jv r = jv_lazy_list(c, JL_GEN);
            jv seen = jv_dict_new(c, 0); /* a set of the keys kept */
            jsteps(c, l->n);
            for (size_t i = 0; i < l->n; i++) {
                jv k = sort_key(&s, l->v[i]);
                if (!jdict_get(c, seen.u.d, k)) {
                    jv_dict_set(c, seen, k, jv_none());
                    jv_list_push(c, r, l->v[i]);
                }
            }
            return r;
        }
        if (l->n == 0) return jv_undef();
        jsteps(c, l->n);
        bool want_max = name[1] == 'a';
        size_t best = 0;
        jv bk = sort_key(&s, l->v[0]);
        for (size_t i = 1; i < l->n; i++) {
            jv k = sort_key(&s, l->v[i]);
            int r = jv_compare(c, k, bk);
            if (want_max ? r > 0 : r < 0) {
                best = i;
                bk = k;
            }
        }
        return l->v[best];
    }
    if (!strcmp(name, "reverse")) {
        check_args(&a, 0, NULL);
        if (in.k == JV_STR) {
            jbuf b = {.c = c};
            const jstr *s = in.u.s;
            for (size_t e = s->len; e > 0;) {
                size_t st = e - 1;
                while (st > 0 && ((unsigned char)s->s[st] & 0xC0) == 0x80) st--;
                jbuf_put(&b, s->s + st, e - st);
                e = st;
            }
            return jbuf_to_str(&b);
        }
        bool was_plain = in.k != JV_LIST || in.u.l->lazy != JL_GEN;
        const jlist *l = iter_list(&a, in);
        jsteps(c, l->n);
        jv r = was_plain && in.k == JV_LIST ? jv_lazy_list(c, JL_GEN) : jv_list_new(c, l->n);
        for (size_t i = l->n; i-- > 0;) jv_list_push(c, r, l->v[i]);
        return r;
    }
    if (!strcmp(name, "indent")) {
        static const char *const kw[] = {"width", "first", "blank", NULL};
        check_args(&a, 3, kw);
        jbuf ind = {.c = c};
        if (arg(&a, 0, "width", &x)) {
            if (x.k == JV_STR) jbuf_put(&ind, x.u.s->s, x.u.s->len);
            else {
                int64_t w = need_int(&a, x, "width");
                if (w > JINJA_MAX_FORMAT_WIDTH)
                    jfail(c, n, TL_ERR_UNSUPPORTED, "indent: width larger than %d (JINJA_MAX_FORMAT_WIDTH)",
                          JINJA_MAX_FORMAT_WIDTH);
                pad(&ind, w, ' ');
            }
        } else
            jbuf_puts(&ind, "    ");
        bool first = arg(&a, 1, "first", &x) && jv_truthy(x);
        bool blank = arg(&a, 2, "blank", &y) && jv_truthy(y);
        const jstr *s = to_s(c, in);
        jbuf tmp = {.c = c};
        jbuf_put(&tmp, s->s, s->len);
        jbuf_puts(&tmp, "\n");
        jv lines = do_splitlines(c, jbuf_to_str(&tmp).u.s);
        const jlist *l = lines.u.l;
        jbuf b = {.c = c};
        if (first) jbuf_put(&b, ind.p ? ind.p : "", ind.n);
        for (size_t i = 0; i < l->n; i++) {
            const jstr *line = l->v[i].u.s;
            if (i) {
                jbuf_puts(&b, "\n");
                if (blank || line->len) jbuf_put(&b, ind.p ? ind.p : "", ind.n);
            }
            jbuf_put(&b, line->s, line->len);
        }
        return jbuf_to_str(&b);
    }
    if (!strcmp(name, "wordcount")) {
        const jstr *s = to_s(c, in);
        jwork(c, s->len);
        int64_t k = 0;
        bool inw = false;
        for (size_t i = 0; i < s->len;) {
            size_t adv;
            uint32_t cp = jutf8_decode(s->s + i, s->len - i, &adv);
            bool w = (cp >= '0' && cp <= '9') || cp == '_' || cp_alpha(cp);
            if (w && !inw) k++;
            inw = w;
            i += adv;
        }
        return jv_int(k);
    }
    if (!strcmp(name, "batch")) {
        static const char *const kw[] = {"linecount", "fill_with", NULL};
        check_args(&a, 2, kw);
        if (!arg(&a, 0, "linecount", &x)) jfail(c, n, TL_ERR_INVALID, "batch: needs linecount");
        int64_t cnt = need_int(&a, x, "linecount");
        if (cnt <= 0) jfail(c, n, TL_ERR_INVALID, "batch: linecount must be positive");
        bool fill = arg(&a, 1, "fill_with", &y) && y.k != JV_NONE;
        const jlist *l = iter_list(&a, in);
        jsteps(c, l->n);
        if (fill && l->n % (uint64_t)cnt) jsteps(c, (uint64_t)cnt - l->n % (uint64_t)cnt); /* the last batch's filler */
        jv r = jv_lazy_list(c, JL_GEN), cur = jv_list_new(c, 0);
        for (size_t i = 0; i < l->n; i++) {
            jv_list_push(c, cur, l->v[i]);
            if ((int64_t)cur.u.l->n == cnt) {
                jv_list_push(c, r, cur);
                cur = jv_list_new(c, 0);
            }
        }
        if (cur.u.l->n) {
            while (fill && (int64_t)cur.u.l->n < cnt) jv_list_push(c, cur, y);
            jv_list_push(c, r, cur);
        }
        return r;
    }
    if (!strcmp(name, "format")) {
        if (a.nkw) jfail(c, n, TL_ERR_UNSUPPORTED, "format: keyword arguments are not supported");
        return jbuiltin_percent_format(c, n, to_s(c, in), args, nargs);
    }
    if (!strcmp(name, "attr")) {
        check_args(&a, 1, NULL);
        if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "attr: needs a name");
        if (in.k == JV_DICT && !in.u.d->ns) return jbuiltin_has_method(in, to_s(c, x)->s)
                                                     ? jeval_getattr(c, n, in, to_s(c, x)->s) : jv_undef();
        return jeval_getattr(c, n, in, to_s(c, x)->s);
    }
    if (!strcmp(name, "center") || !strcmp(name, "truncate") || !strcmp(name, "striptags"))
        jfail(c, n, TL_ERR_UNSUPPORTED, "unsupported filter '%s'", name);
    jfail(c, n, TL_ERR_UNSUPPORTED, "unknown filter '%s'", name);
}

/* ---- methods -------------------------------------------------------------- */

static const char *const str_methods[] = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "replace", "upper", "lower",
    "title", "capitalize", "find", "rfind", "count", "join", "isdigit", "isalpha", "isalnum", "isspace",
    "isupper", "islower", "splitlines", "removeprefix", "removesuffix", "format", "index", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};
static const char *const list_methods[] = {"index", "count", NULL};

static bool in_names(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

bool jbuiltin_has_method(jv recv, const char *name) {
    switch (recv.k) {
    case JV_STR: return in_names(str_methods, name);
    case JV_DICT: return !recv.u.d->ns && in_names(dict_methods, name);
    case JV_LIST: return !recv.u.l->lazy && in_names(list_methods, name);
    case JV_LOOP: return !strcmp(name, "cycle");
    default: return false;
    }
}

static jv str_format(fargs *a, const jstr *fmt) {
    jctx *c = a->c;
    jbuf b = {.c = c};
    jwork(c, fmt->len);
    int auto_idx = 0;
    for (size_t i = 0; i < fmt->len; i++) {
        char ch = fmt->s[i];
        if (ch == '{' && i + 1 < fmt->len && fmt->s[i + 1] == '{') {
            jbuf_puts(&b, "{");
            i++;
            continue;
        }
        if (ch == '}' && i + 1 < fmt->len && fmt->s[i + 1] == '}') {
            jbuf_puts(&b, "}");
            i++;
            continue;
        }
        if (ch != '{') {
            jbuf_put(&b, &ch, 1);
            continue;
        }
        size_t e = i + 1;
        while (e < fmt->len && fmt->s[e] != '}') e++;
        if (e >= fmt->len) jfail(c, a->n, TL_ERR_INVALID, "format: single '{' in format string");
        const char *f = fmt->s + i + 1;
        size_t fl = e - i - 1;
        for (size_t k = 0; k < fl; k++)
            if (f[k] == ':' || f[k] == '!' || f[k] == '.' || f[k] == '[')
                jfail(c, a->n, TL_ERR_UNSUPPORTED, "format: format specs and field access are not supported");
        jv v;
        if (fl == 0) {
            if (auto_idx >= a->npos) jfail(c, a->n, TL_ERR_INVALID, "format: not enough arguments");
            v = a->pos[auto_idx++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            int64_t idx;
            if (!jparse_i64(f, fl, &idx) || idx >= a->npos)
                jfail(c, a->n, TL_ERR_INVALID, "format: replacement index '%.*s' out of range (%d arguments)",
                      (int)(fl > 32 ? 32 : fl), f, a->npos);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (int k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == fl && !memcmp(a->kwn[k], f, fl)) {
                    v = a->kwv[k];
                    found = true;
                }
            if (!found) jfail(c, a->n, TL_ERR_INVALID, "format: missing argument '%.*s'", (int)fl, f);
        }
        jv_write_str(&b, v);
        i = e;
    }
    return jbuf_to_str(&b);
}

static bool all_chars(jctx *c, const jstr *s, int kind) {
    if (s->len == 0) return false;
    jwork(c, s->len);
    bool any_cased = false;
    for (size_t i = 0; i < s->len;) {
        size_t adv;
        uint32_t cp = jutf8_decode(s->s + i, s->len - i, &adv);
        i += adv;
        switch (kind) {
        case 0: if (!(cp >= '0' && cp <= '9')) return false; break;
        case 1: if (!cp_alpha(cp) || jis_space(cp)) return false; break;
        case 2: if (!(cp_alpha(cp) || (cp >= '0' && cp <= '9'))) return false; break;
        case 3: if (!jis_space(cp)) return false; break;
        case 4: if (cp_lower(cp) != cp) return false; any_cased |= cp_cased(cp); break;
        case 5: if (cp_upper(cp) != cp) return false; any_cased |= cp_cased(cp); break;
        }
    }
    return kind >= 4 ? any_cased : true;
}

jv jbuiltin_method(jctx *c, const jnode *n, jv recv, const char *name, jv *args, int nargs,
                   const char **kwn, jv *kwv, int nkw) {
    fargs a = {.c = c, .n = n, .fname = name, .pos = args, .npos = nargs, .kwn = kwn, .kwv = kwv, .nkw = nkw};
    jv x, y;
    if (recv.k == JV_STR) {
        const jstr *s = recv.u.s;
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            check_args(&a, 1, NULL);
            if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "%s() takes an argument", name);
            return jv_bool(prefix_match(&a, s, x, name[0] == 'e'));
        }
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
            check_args(&a, 1, NULL);
            const jstr *chars = arg(&a, 0, NULL, &x) && x.k != JV_NONE ? need_str(&a, x, "chars") : NULL;
            return do_strip(c, s, chars, name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3);
        }
        if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
            static const char *const kw[] = {"sep", "maxsplit", NULL};
            check_args(&a, 2, kw);
            const jstr *sep = arg(&a, 0, "sep", &x) && x.k != JV_NONE ? need_str(&a, x, "sep") : NULL;
            if (sep && sep->len == 0) jfail(c, n, TL_ERR_INVALID, "%s: empty separator", name);
            int64_t maxsplit = arg(&a, 1, "maxsplit", &y) ? need_int(&a, y, "maxsplit") : -1;
            return do_split(c, s, sep, maxsplit, name[0] == 'r');
        }
        if (!strcmp(name, "replace")) {
            check_args(&a, 3, NULL);
            if (a.npos < 2) jfail(c, n, TL_ERR_INVALID, "replace() takes at least 2 arguments");
            int64_t count = a.npos > 2 ? need_int(&a, a.pos[2], "count") : -1;
            return do_replace(c, s, need_str(&a, a.pos[0], "old"), need_str(&a, a.pos[1], "new"), count);
        }
        if (!strcmp(name, "upper")) return case_map(c, s, CASE_UPPER);
        if (!strcmp(name, "lower")) return case_map(c, s, CASE_LOWER);
        if (!strcmp(name, "title")) return case_map(c, s, CASE_PYTITLE);
        if (!strcmp(name, "capitalize")) return case_map(c, s, CASE_CAPITALIZE);
        if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
            check_args(&a, 1, NULL);
            if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "%s() takes an argument", name);
            const jstr *sub = need_str(&a, x, "substring");
            if (!strcmp(name, "count")) {
                if (sub->len == 0) return jv_int((int64_t)s->ncp + 1);
                int64_t k = 0;
                for (size_t i = 0; i + sub->len <= s->len;) {
                    const char *p = jfind(c, s->s + i, s->len - i, sub->s, sub->len);
                    if (!p) break;
                    k++;
                    i = (size_t)(p - s->s) + sub->len;
                }
                return jv_int(k);
            }
            const char *p = name[0] == 'r' ? jrfind(c, s->s, s->len, sub->s, sub->len)
                                           : jfind(c, s->s, s->len, sub->s, sub->len);
            if (!p) {
                if (name[0] == 'i') jfail(c, n, TL_ERR_INVALID, "index: substring not found");
                return jv_int(-1);
            }
            jwork(c, (size_t)(p - s->s));
            return jv_int((int64_t)jutf8_count(s->s, (size_t)(p - s->s)));
        }
        if (!strcmp(name, "join")) {
            check_args(&a, 1, NULL);
            if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "join() takes an argument");
            const jlist *l = iter_list(&a, x);
            jsteps(c, l->n);
            jbuf b = {.c = c};
            for (size_t i = 0; i < l->n; i++) {
                if (i) jbuf_put(&b, s->s, s->len);
                const jstr *item = need_str(&a, l->v[i], "sequence item");
                jbuf_put(&b, item->s, item->len);
            }
            return jbuf_to_str(&b);
        }
        if (!strcmp(name, "isdigit")) return jv_bool(all_chars(c, s, 0));
        if (!strcmp(name, "isalpha")) return jv_bool(all_chars(c, s, 1));
        if (!strcmp(name, "isalnum")) return jv_bool(all_chars(c, s, 2));
        if (!strcmp(name, "isspace")) return jv_bool(all_chars(c, s, 3));
        if (!strcmp(name, "islower")) return jv_bool(all_chars(c, s, 4));
        if (!strcmp(name, "isupper")) return jv_bool(all_chars(c, s, 5));
        if (!strcmp(name, "splitlines")) return do_splitlines(c, s);
        if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
            check_args(&a, 1, NULL);
            if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "%s() takes an argument", name);
            const jstr *p = need_str(&a, x, "affix");
            if (p->len <= s->len) {
                if (name[6] == 'p' && !memcmp(s->s, p->s, p->len)) return mkstr(c, s->s + p->len, s->len - p->len);
                if (name[6] == 's' && !memcmp(s->s + s->len - p->len, p->s, p->len))
                    return mkstr(c, s->s, s->len - p->len);
            }
            return recv;
        }
        if (!strcmp(name, "format")) return str_format(&a, s);
    } else if (recv.k == JV_DICT && !recv.u.d->ns) {
        const jdict *d = recv.u.d;
        if (!strcmp(name, "get")) {
            check_args(&a, 2, NULL);
            if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "get() takes at least 1 argument");
            jv *v = jdict_get(c, d, x);
            if (v) return *v;
            return arg(&a, 1, NULL, &y) ? y : jv_none();
        }
        if (!strcmp(name, "items")) {
            check_args(&a, 0, NULL);
            jv r = jv_lazy_list(c, JL_ITEMS);
            jsteps(c, d->n);
            for (size_t i = 0; i < d->n; i++) {
                jv t = jv_list_new(c, 2);
                t.u.l->tuple = true;
                jv_list_push(c, t, d->keys[i]);
                jv_list_push(c, t, d->vals[i]);
                jv_list_push(c, r, t);
            }
            return r;
        }
        if (!strcmp(name, "keys") || !strcmp(name, "values")) {
            check_args(&a, 0, NULL);
            jv r = jv_lazy_list(c, name[0] == 'k' ? JL_KEYS : JL_VALUES);
            jsteps(c, d->n);
            for (size_t i = 0; i < d->n; i++) jv_list_push(c, r, name[0] == 'k' ? d->keys[i] : d->vals[i]);
            return r;
        }
    } else if (recv.k == JV_LIST && !recv.u.l->lazy) {
        const jlist *l = recv.u.l;
        check_args(&a, 1, NULL);
        if (!arg(&a, 0, NULL, &x)) jfail(c, n, TL_ERR_INVALID, "%s() takes an argument", name);
        jsteps(c, l->n);
        if (!strcmp(name, "index")) {
            for (size_t i = 0; i < l->n; i++)
                if (jv_equal(c, l->v[i], x)) return jv_int((int64_t)i);
            jfail(c, n, TL_ERR_INVALID, "list.index(x): x not in list");
        }
        if (!strcmp(name, "count")) {
            int64_t k = 0;
            for (size_t i = 0; i < l->n; i++) k += jv_equal(c, l->v[i], x);
            return jv_int(k);
        }
    } else if (recv.k == JV_LOOP && !strcmp(name, "cycle")) {
        if (a.npos == 0) jfail(c, n, TL_ERR_INVALID, "loop.cycle() needs at least one argument");
        return a.pos[recv.u.loop->index0 % a.npos];
    }
    jfail(c, n, TL_ERR_UNSUPPORTED, "'%s' object has no supported method '%s'", jv_kind_name(recv), name);
}

/* ---- global functions ----------------------------------------------------- */

enum { FN_RANGE, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int jbuiltin_func_id(const char *name) {
    for (int i = 0; i < FN_COUNT; i++)
        if (!strcmp(fn_names[i], name)) return i;
    return -1;
}

const char *jbuiltin_func_name(int fn) { return fn >= 0 && fn < FN_COUNT ? fn_names[fn] : "?"; }

jv jbuiltin_call_func(jctx *c, const jnode *n, int fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    fargs a = {.c = c, .n = n, .fname = jbuiltin_func_name(fn), .pos = args, .npos = nargs, .kwn = kwn, .kwv = kwv, .nkw = nkw};
    switch (fn) {
    case FN_RANGE: {
        check_args(&a, 3, NULL);
        if (nargs < 1) jfail(c, n, TL_ERR_INVALID, "range expected at least 1 argument");
        int64_t start = 0, stop, step = 1;
        if (nargs == 1) stop = need_int(&a, args[0], "stop");
        else {
            start = need_int(&a, args[0], "start");
            stop = need_int(&a, args[1], "stop");
            if (nargs == 3) step = need_int(&a, args[2], "step");
        }
        if (step == 0) jfail(c, n, TL_ERR_INVALID, "range() arg 3 must not be zero");
        /* the item count in unsigned arithmetic: exact for any int64 bounds */
        uint64_t cnt;
        if (step > 0) cnt = stop > start ? ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1 : 0;
        else cnt = start > stop ? ((uint64_t)start - (uint64_t)stop - 1) / ((uint64_t)(-(step + 1)) + 1) + 1 : 0;
        if (cnt > JINJA_MAX_RANGE)
            jfail(c, n, TL_ERR_UNSUPPORTED, "range too big: the sandbox blocks ranges larger than %d (JINJA_MAX_RANGE)",
                  JINJA_MAX_RANGE);
        jsteps(c, cnt);
        jv r = jv_list_new(c, (size_t)cnt);
        int64_t v = start;
        for (uint64_t k = 0; k < cnt; k++) {
            jv_list_push(c, r, jv_int(v));
            if (k + 1 < cnt) v += step; /* the next item lies between start and stop */
        }
        return r;
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        jv d = jv_dict_new(c, 0);
        d.u.d->ns = fn == FN_NAMESPACE;
        if (nargs > 1) jfail(c, n, TL_ERR_INVALID, "%s() takes at most 1 positional argument", a.fname);
        if (nargs == 1) {
            jv src = args[0];
            if (src.k == JV_DICT) {
                jsteps(c, src.u.d->n);
                for (size_t i = 0; i < src.u.d->n; i++) jv_dict_set(c, d, src.u.d->keys[i], src.u.d->vals[i]);
            } else if (src.k == JV_LIST) {
                jsteps(c, src.u.l->n);
                for (size_t i = 0; i < src.u.l->n; i++) {
                    jv p = src.u.l->v[i];
                    if (p.k != JV_LIST || p.u.l->n != 2) jfail(c, n, TL_ERR_INVALID, "%s(): sequence elements must be pairs", a.fname);
                    jv_dict_set(c, d, p.u.l->v[0], p.u.l->v[1]);
                }
            } else
                jfail(c, n, TL_ERR_INVALID, "%s(): '%s' object is not a mapping", a.fname, jv_kind_name(src));
        }
        for (int k = 0; k < nkw; k++) jv_dict_set(c, d, jv_cstr(c, kwn[k]), kwv[k]);
        return d;
    }
    case FN_RAISE: {
        const jstr *msg = nargs > 0 ? to_s(c, args[0]) : NULL;
        jfail(c, n, TL_ERR_INVALID, "raise_exception: %s", msg ? msg->s : "");
    }
    case FN_STRFTIME: {
        check_args(&a, 1, NULL);
        if (nargs < 1) jfail(c, n, TL_ERR_INVALID, "strftime_now() needs a format");
        const jstr *fmt = need_str(&a, args[0], "format");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[512];
        size_t len = fmt->len ? strftime(buf, sizeof buf, fmt->s, &tmv) : 0;
        if (fmt->len && len == 0) jfail(c, n, TL_ERR_INVALID, "strftime_now: format too long or empty result");
        return mkstr(c, buf, len);
    }
    default: break;
    }
    jfail(c, n, TL_ERR_UNSUPPORTED, "unknown function");
}
