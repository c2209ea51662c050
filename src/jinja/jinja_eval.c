/* jinja/jinja_eval: the tree-walking interpreter: scopes, statements,
 * expressions, attribute/item lookup, operators and calls, plus the
 * environment API (variables) and the render entry point.
 *
 * Semantics follow jinja2 as HF runs it: {% set %} inside a for loop lives
 * only for that iteration (namespace() objects carry state out), if-blocks
 * do not open a scope, macros see their parameters and the template's
 * top-level variables, undefined names print as '' but fail on attribute
 * access or arithmetic, a.b tries the attribute (dict methods) then the
 * item, a[b] tries the item then the attribute, missing items are
 * undefined. Output bytes, steps, value memory and macro depth are bounded.
 * Owns: the render context. Calls: jinja_value, jinja_builtins, base/status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

enum { FLOW_NORMAL = 0, FLOW_BREAK = 1, FLOW_CONTINUE = 2 };

_Noreturn void jfail(jctx *c, const jnode *n, tl_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!n) n = c->cur;
    if (n) tl_err(st, "jinja: line %d col %d: %s", n->line, n->col, msg);
    else tl_err(st, "jinja: %s", msg);
    c->err = st;
    longjmp(c->jmp, 1);
}

static _Noreturn void fail_steps(jctx *c) {
    jfail(c, NULL, TL_ERR_UNSUPPORTED, "template ran more than %llu steps (max_steps; loop too long?)",
          (unsigned long long)c->env->lim.max_steps);
}

void jstep(jctx *c) {
    if (++c->steps > c->env->lim.max_steps) fail_steps(c);
}

void jsteps(jctx *c, uint64_t n) {
    if (n > c->env->lim.max_steps - c->steps || (c->steps += n) > c->env->lim.max_steps) fail_steps(c);
}

static void out_put(jctx *c, const char *s, size_t n) {
    if (n > c->env->lim.max_output || c->out_len + n > c->env->lim.max_output)
        jfail(c, NULL, TL_ERR_UNSUPPORTED, "template output exceeds %zu bytes", c->env->lim.max_output);
    if (c->out_len + n + 1 > c->out_cap) {
        size_t nc = c->out_cap ? c->out_cap : 4096;
        while (nc < c->out_len + n + 1) nc *= 2;
        char *np = realloc(c->out, nc);
        if (!np) jfail(c, NULL, TL_ERR_NOMEM, "out of memory");
        c->out = np;
        c->out_cap = nc;
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
    c->out[c->out_len] = 0;
}

/* ---- scopes --------------------------------------------------------------- */

static jv *frame_find(jframe *f, const char *name) {
    for (int i = 0; i < f->n_slots; i++)
        if (!strcmp(f->slot_name[i], name)) return &f->slot_val[i];
    if (f->vars) return jdict_get_str(f->vars, name, strlen(name));
    return NULL;
}

static void frame_set(jctx *c, jframe *f, const char *name, jv v) {
    jv *slot = frame_find(f, name);
    if (slot) {
        *slot = v;
        return;
    }
    if (f->n_slots < (int)(sizeof f->slot_name / sizeof f->slot_name[0])) {
        f->slot_name[f->n_slots] = name;
        f->slot_val[f->n_slots++] = v;
        return;
    }
    if (!f->vars) {
        f->vars = jc_alloc(c, sizeof *f->vars);
        memset(f->vars, 0, sizeof *f->vars);
    }
    jv key = jv_cstr(c, name);
    jv d = {0};
    d.k = JV_DICT;
    d.u.d = f->vars;
    jv_dict_set(c, d, key, v);
}

static jv lookup(jctx *c, jframe *f, const char *name) {
    for (; f; f = f->parent) {
        jv *v = frame_find(f, name);
        if (v) return *v;
    }
    jv *g = jdict_get_str(c->env->globals, name, strlen(name));
    if (g) return *g;
    int fn = jbuiltin_func_id(name);
    if (fn >= 0) {
        jv v = {0};
        v.k = JV_FUNC;
        v.u.fn = fn;
        return v;
    }
    jv u = jv_undef();
    u.u.s = jstr_make(c->ar, name, strlen(name));
    return u;
}

static _Noreturn void fail_undef(jctx *c, const jnode *n, jv u, const char *what) {
    if (u.u.s) jfail(c, n, TL_ERR_INVALID, "'%s' is undefined (%s)", u.u.s->s, what);
    jfail(c, n, TL_ERR_INVALID, "value is undefined (%s)", what);
}

/* ---- lookup --------------------------------------------------------------- */

static jv make_method(jctx *c, jv recv, const char *name) {
    jmethod *m = jc_alloc(c, sizeof *m);
    m->recv = recv;
    m->name = name;
    jv v = {0};
    v.k = JV_METHOD;
    v.u.meth = m;
    return v;
}

static jv undef_named(jctx *c, const char *name) {
    jv u = jv_undef();
    u.u.s = jstr_make(c->ar, name, strlen(name));
    return u;
}

static jv loop_attr(jctx *c, const jnode *n, jloop *l, const char *name) {
    int64_t i = l->index0, len = l->length;
    if (!strcmp(name, "index")) return jv_int(i + 1);
    if (!strcmp(name, "index0")) return jv_int(i);
    if (!strcmp(name, "revindex")) return jv_int(len - i);
    if (!strcmp(name, "revindex0")) return jv_int(len - i - 1);
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i == len - 1);
    if (!strcmp(name, "length")) return jv_int(len);
    if (!strcmp(name, "depth")) return jv_int(l->depth);
    if (!strcmp(name, "depth0")) return jv_int(l->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? l->items->v[i - 1] : undef_named(c, "previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < len ? l->items->v[i + 1] : undef_named(c, "nextitem");
    if (!strcmp(name, "cycle")) {
        jv lv = {0};
        lv.k = JV_LOOP;
        lv.u.loop = l;
        return make_method(c, lv, "cycle");
    }
    (void)n;
    return undef_named(c, name);
}

jv jeval_getattr(jctx *c, const jnode *n, jv obj, const char *name) {
    switch (obj.k) {
    case JV_UNDEF: {
        char what[160];
        snprintf(what, sizeof what, "getting attribute '%s'", name);
        fail_undef(c, n, obj, what);
    }
    case JV_DICT: {
        if (!obj.u.d->ns && jbuiltin_has_method(obj, name)) return make_method(c, obj, name);
        jv *v = jdict_get_str(obj.u.d, name, strlen(name));
        return v ? *v : undef_named(c, name);
    }
    case JV_LOOP: return loop_attr(c, n, obj.u.loop, name);
    case JV_STR:
    case JV_LIST:
        if (jbuiltin_has_method(obj, name)) return make_method(c, obj, name);
        return undef_named(c, name);
    default: return undef_named(c, name);
    }
}

static bool as_index(jv k, int64_t *out) {
    if (k.k == JV_INT) {
        *out = k.u.i;
        return true;
    }
    if (k.k == JV_BOOL) {
        *out = k.u.b;
        return true;
    }
    return false;
}

jv jeval_getitem(jctx *c, const jnode *n, jv obj, jv key) {
    int64_t idx;
    switch (obj.k) {
    case JV_UNDEF: fail_undef(c, n, obj, "getting an item");
    case JV_DICT: {
        jv *v = jdict_get(c, obj.u.d, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (obj.u.l->lazy) return undef_named(c, "item");
        if (as_index(key, &idx)) {
            int64_t len = (int64_t)obj.u.l->n;
            if (idx < 0) idx += len;
            if (idx >= 0 && idx < len) return obj.u.l->v[idx];
            return undef_named(c, "item");
        }
        break;
    case JV_STR:
        if (as_index(key, &idx)) {
            const jstr *s = obj.u.s;
            int64_t len = (int64_t)s->ncp;
            if (idx < 0) idx += len;
            if (idx >= 0 && idx < len) {
                if (s->ncp == s->len) return jv_str(c, s->s + idx, 1); /* ASCII */
                jwork(c, s->len);
                size_t a = jutf8_offset(s->s, s->len, (size_t)idx), adv;
                jutf8_decode(s->s + a, s->len - a, &adv);
                return jv_str(c, s->s + a, adv);
            }
            return undef_named(c, "item");
        }
        break;
    default: break;
    }
    if (key.k == JV_STR) {
        if (obj.k == JV_DICT && !obj.u.d->ns) {
            if (jbuiltin_has_method(obj, key.u.s->s)) return make_method(c, obj, key.u.s->s);
            return undef_named(c, key.u.s->s);
        }
        return jeval_getattr(c, n, obj, key.u.s->s);
    }
    return undef_named(c, "item");
}

static int64_t slice_index(jctx *c, const jnode *n, jv v, int64_t dflt) {
    if (v.k == JV_NONE || v.k == JV_UNDEF) return dflt;
    int64_t i;
    if (!as_index(v, &i)) jfail(c, n, TL_ERR_INVALID, "slice indices must be integers or None");
    return i;
}

/* Python's slice bounds: lo, hi clamped, then the number of items
 * lo, lo+step, ... before hi (computed without overflow for any step). */
static uint64_t slice_span(jctx *c, const jnode *n, int64_t len, jv vs, jv ve, int64_t step, int64_t *lo_out) {
    int64_t lo, hi;
    if (step > 0) {
        lo = slice_index(c, n, vs, 0);
        hi = slice_index(c, n, ve, len);
        if (lo < 0) lo = lo + len < 0 ? 0 : lo + len;
        if (hi < 0) hi = hi + len < 0 ? 0 : hi + len;
        if (lo > len) lo = len;
        if (hi > len) hi = len;
        *lo_out = lo;
        return hi > lo ? ((uint64_t)(hi - lo) - 1) / (uint64_t)step + 1 : 0;
    }
    lo = slice_index(c, n, vs, len - 1);
    hi = slice_index(c, n, ve, -len - 1);
    if (lo < 0) lo = lo + len < -1 ? -1 : lo + len;
    if (hi < 0) hi = hi + len < -1 ? -1 : hi + len;
    if (lo >= len) lo = len - 1;
    if (hi >= len) hi = len - 1;
    *lo_out = lo;
    uint64_t ustep = (uint64_t)(-(step + 1)) + 1; /* |step|, also for INT64_MIN */
    return lo > hi ? ((uint64_t)(lo - hi) - 1) / ustep + 1 : 0;
}

static jv do_slice(jctx *c, const jnode *n, jv obj, jv vs, jv ve, jv vstep) {
    int64_t step = slice_index(c, n, vstep, 1);
    if (step == 0) jfail(c, n, TL_ERR_INVALID, "slice step cannot be zero");
    if (obj.k == JV_UNDEF) fail_undef(c, n, obj, "slicing");
    int64_t len;
    if (obj.k == JV_LIST && obj.u.l->lazy) return undef_named(c, "slice");
    if (obj.k == JV_LIST) len = (int64_t)obj.u.l->n;
    else if (obj.k == JV_STR) len = (int64_t)obj.u.s->ncp;
    else return undef_named(c, "slice");
    int64_t lo;
    uint64_t cnt = slice_span(c, n, len, vs, ve, step, &lo);
    /* every index lo + k*step for k < cnt lies in [0, len): no overflow */
    if (obj.k == JV_LIST) {
        jsteps(c, cnt);
        jv r = jv_list_new(c, (size_t)cnt);
        r.u.l->tuple = obj.u.l->tuple;
        for (uint64_t k = 0; k < cnt; k++) jv_list_push(c, r, obj.u.l->v[lo + (int64_t)k * step]);
        return r;
    }
    const jstr *s = obj.u.s;
    if (cnt == 0) return jv_str(c, "", 0);
    if (s->ncp == s->len) { /* ASCII: byte = code point */
        if (step == 1) return jv_str(c, s->s + lo, (size_t)cnt);
        jsteps(c, cnt);
        jbuf b = {.c = c};
        for (uint64_t k = 0; k < cnt; k++) jbuf_put(&b, s->s + lo + (int64_t)k * step, 1);
        return jbuf_to_str(&b);
    }
    /* UTF-8: one walk over the characters, forwards or backwards */
    jwork(c, s->len);
    jsteps(c, cnt);
    size_t at = jutf8_offset(s->s, s->len, (size_t)lo);
    if (step == 1) return jv_str(c, s->s + at, jutf8_offset(s->s + at, s->len - at, (size_t)cnt));
    jbuf b = {.c = c};
    for (uint64_t k = 0; k < cnt; k++) {
        size_t adv;
        jutf8_decode(s->s + at, s->len - at, &adv);
        jbuf_put(&b, s->s + at, adv);
        if (k + 1 == cnt) break;
        if (step > 0) {
            for (int64_t m = 0; m < step; m++) /* ends within the string: k + 1 < cnt */
                do at++; while (at < s->len && ((unsigned char)s->s[at] & 0xC0) == 0x80);
        } else {
            for (int64_t m = 0; m > step; m--)
                do at--; while (at > 0 && ((unsigned char)s->s[at] & 0xC0) == 0x80);
        }
    }
    return jbuf_to_str(&b);
}

/* ---- operators ------------------------------------------------------------ */

static bool is_intlike(jv v) { return v.k == JV_INT || v.k == JV_BOOL; }
static int64_t ival(jv v) { return v.k == JV_INT ? v.u.i : (int64_t)v.u.b; }
static bool is_num(jv v) { return is_intlike(v) || v.k == JV_FLOAT; }
static double fval(jv v) { return v.k == JV_FLOAT ? v.u.f : (double)ival(v); }

static const char *op_sym(int op) {
    static const char *const s[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~",
                                    "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return op >= 0 && op <= JOP_NOTIN ? s[op] : "?";
}

static _Noreturn void bad_operands(jctx *c, const jnode *n, int op, jv a, jv b) {
    if (a.k == JV_UNDEF) fail_undef(c, n, a, "operand of an operator");
    if (b.k == JV_UNDEF) fail_undef(c, n, b, "operand of an operator");
    jfail(c, n, TL_ERR_INVALID, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op),
          jv_kind_name(a), jv_kind_name(b));
}

/* seq * times: the result is built by doubling copies, so the work is the
 * result's size (bounded by the memory limit), never the count itself. */
static jv repeat_seq(jctx *c, const jnode *n, jv seq, int64_t times) {
    bool is_str = seq.k == JV_STR;
    size_t unit = is_str ? seq.u.s->len : seq.u.l->n * sizeof(jv);
    if (times <= 0 || unit == 0) {
        if (is_str) return jv_str(c, "", 0);
        jv r = jv_list_new(c, 0);
        r.u.l->tuple = seq.u.l->tuple;
        return r;
    }
    size_t tot;
    if (!tl_mul_ok(unit, (size_t)times, &tot) || tot > c->env->lim.max_memory)
        jfail(c, n, TL_ERR_NOMEM, "%s repetition of %lld would exceed the memory limit (%zu bytes)",
              is_str ? "string" : "list", (long long)times, c->env->lim.max_memory);
    jwork(c, tot);
    char *p = jc_alloc(c, tot + 1);
    memcpy(p, is_str ? (const void *)seq.u.s->s : (const void *)seq.u.l->v, unit);
    for (size_t have = unit; have < tot;) {
        size_t k = have < tot - have ? have : tot - have;
        memcpy(p + have, p, k);
        have += k;
    }
    if (is_str) return jv_str(c, p, tot);
    jv r = jv_list_new(c, 0);
    r.u.l->tuple = seq.u.l->tuple;
    r.u.l->v = (jv *)p; /* jc_alloc memory is max_align_t aligned */
    r.u.l->n = r.u.l->cap = tot / sizeof(jv);
    return r;
}

/* x ** y for y >= 0 by squaring; an overflow is an error (Python has big ints). */
static int64_t ipow(jctx *c, const jnode *n, int64_t x, int64_t y) {
    int64_t r = 1, b = x;
    while (y > 0) {
        if ((y & 1) && __builtin_mul_overflow(r, b, &r)) break;
        y >>= 1;
        if (y && __builtin_mul_overflow(b, b, &b)) break; /* |b| >= 2: r would overflow too */
    }
    if (y > 0) jfail(c, n, TL_ERR_UNSUPPORTED, "integer overflow in ** (64-bit integers)");
    return r;
}

static jv binop(jctx *c, const jnode *n, int op, jv a, jv b) {
    if (op == JOP_CONCAT) {
        jbuf bb = {.c = c};
        jv_write_str(&bb, a);
        jv_write_str(&bb, b);
        return jbuf_to_str(&bb);
    }
    if (is_intlike(a) && is_intlike(b)) {
        int64_t x = ival(a), y = ival(b), r;
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_DIV:
            if (y == 0) jfail(c, n, TL_ERR_INVALID, "division by zero");
            return jv_float((double)x / (double)y);
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (y == 0) jfail(c, n, TL_ERR_INVALID, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) break;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q -= 1;
                m += y;
            }
            return jv_int(op == JOP_FLOORDIV ? q : m);
        }
        case JOP_POW:
            if (y < 0) return jv_float(__builtin_pow((double)x, (double)y));
            return jv_int(ipow(c, n, x, y));
        default: break;
        }
        jfail(c, n, TL_ERR_UNSUPPORTED, "integer overflow in %s", op_sym(op));
    }
    if (is_num(a) && is_num(b)) {
        double x = fval(a), y = fval(b);
        switch (op) {
        case JOP_ADD: return jv_float(x + y);
        case JOP_SUB: return jv_float(x - y);
        case JOP_MUL: return jv_float(x * y);
        case JOP_DIV:
            if (y == 0) jfail(c, n, TL_ERR_INVALID, "float division by zero");
            return jv_float(x / y);
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (y == 0) jfail(c, n, TL_ERR_INVALID, "float modulo by zero");
            double m = __builtin_fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            if (op == JOP_MOD) return jv_float(m);
            return jv_float(__builtin_floor(x / y));
        }
        case JOP_POW: return jv_float(__builtin_pow(x, y));
        default: break;
        }
    }
    if (op == JOP_ADD) {
        if (a.k == JV_STR && b.k == JV_STR) {
            /* Markup + str escapes the str (markupsafe), even without autoescape */
            if (a.markup && !b.markup) b = jbuiltin_filter(c, n, "escape", b, NULL, 0, NULL, NULL, 0);
            if (b.markup && !a.markup) a = jbuiltin_filter(c, n, "escape", a, NULL, 0, NULL, NULL, 0);
            jbuf bb = {.c = c};
            jbuf_put(&bb, a.u.s->s, a.u.s->len);
            jbuf_put(&bb, b.u.s->s, b.u.s->len);
            jv r = jbuf_to_str(&bb);
            r.markup = a.markup || b.markup;
            return r;
        }
        if (a.k == JV_LIST && b.k == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->lazy && !b.u.l->lazy) {
            jsteps(c, a.u.l->n + b.u.l->n);
            jv r = jv_list_new(c, a.u.l->n + b.u.l->n);
            r.u.l->tuple = a.u.l->tuple;
            for (size_t i = 0; i < a.u.l->n; i++) jv_list_push(c, r, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jv_list_push(c, r, b.u.l->v[i]);
            return r;
        }
    }
    if (op == JOP_MOD && a.k == JV_STR) {
        /* Python str % args: a tuple supplies several arguments */
        if (b.k == JV_LIST && b.u.l->tuple && !b.u.l->lazy)
            return jbuiltin_percent_format(c, n, a.u.s, b.u.l->v, (int)b.u.l->n);
        if (b.k == JV_DICT) jfail(c, n, TL_ERR_UNSUPPORTED, "str %% dict (mapping keys) is not supported");
        return jbuiltin_percent_format(c, n, a.u.s, &b, 1);
    }
    if (op == JOP_MUL) {
        if ((a.k == JV_STR || (a.k == JV_LIST && !a.u.l->lazy)) && is_intlike(b)) return repeat_seq(c, n, a, ival(b));
        if ((b.k == JV_STR || (b.k == JV_LIST && !b.u.l->lazy)) && is_intlike(a)) return repeat_seq(c, n, b, ival(a));
    }
    bad_operands(c, n, op, a, b);
}

static bool contains(jctx *c, const jnode *n, jv container, jv item) {
    switch (container.k) {
    case JV_STR:
        if (item.k != JV_STR)
            jfail(c, n, TL_ERR_INVALID, "'in <string>' requires string as left operand, not %s",
                  jv_kind_name(item));
        return jfind(c, container.u.s->s, container.u.s->len, item.u.s->s, item.u.s->len) != NULL;
    case JV_LIST: {
        const jlist *l = jlist_take(c, container.u.l);
        jsteps(c, l->n);
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(c, l->v[i], item)) return true;
        return false;
    }
    case JV_DICT: return jdict_get(c, container.u.d, item) != NULL;
    case JV_UNDEF: return false;
    default:
        jfail(c, n, TL_ERR_INVALID, "argument of type '%s' is not iterable", jv_kind_name(container));
    }
}

static bool compare_op(jctx *c, const jnode *n, int op, jv a, jv b) {
    switch (op) {
    case JOP_EQ: return jv_equal(c, a, b);
    case JOP_NE: return !jv_equal(c, a, b);
    case JOP_IN: return contains(c, n, b, a);
    case JOP_NOTIN: return !contains(c, n, b, a);
    default: break;
    }
    if (a.k == JV_UNDEF) fail_undef(c, n, a, "comparison");
    if (b.k == JV_UNDEF) fail_undef(c, n, b, "comparison");
    const jnode *saved = c->cur;
    c->cur = n;
    int r = jv_compare(c, a, b);
    c->cur = saved;
    switch (op) {
    case JOP_LT: return r < 0;
    case JOP_LE: return r <= 0;
    case JOP_GT: return r > 0;
    case JOP_GE: return r >= 0;
    }
    return false;
}

/* ---- expressions ---------------------------------------------------------- */

static jv eval(jctx *c, jframe *f, const jnode *n);
static int exec_body(jctx *c, jframe *f, jnode *const *body, int nb);

typedef struct jargs {
    jv *pos;
    int npos;
    jv *kw;
    const char **kwn;
    int nkw;
} jargs;

static jargs eval_args(jctx *c, jframe *f, const jnode *n) {
    jargs a = {0};
    a.npos = n->n_args;
    a.nkw = n->n_kwargs;
    a.kwn = n->names;
    if (a.npos) {
        a.pos = jc_alloc(c, (size_t)a.npos * sizeof(jv));
        for (int i = 0; i < a.npos; i++) a.pos[i] = eval(c, f, n->args[i]);
    }
    if (a.nkw) {
        a.kw = jc_alloc(c, (size_t)a.nkw * sizeof(jv));
        for (int i = 0; i < a.nkw; i++) a.kw[i] = eval(c, f, n->kwargs[i]);
    }
    return a;
}

static jv call_macro(jctx *c, const jnode *n, const jnode *m, jv *args, int nargs, const char **kwn,
                     jv *kwv, int nkw) {
    if (c->depth >= c->env->lim.max_depth)
        jfail(c, n, TL_ERR_UNSUPPORTED, "macro calls nested deeper than %d (runaway recursion?)",
              c->env->lim.max_depth);
    if (nargs > m->n_names)
        jfail(c, n, TL_ERR_INVALID, "macro '%s' takes not more than %d argument(s)", m->name, m->n_names);
    jframe fr;
    memset(&fr, 0, sizeof fr);
    fr.parent = c->root;
    bool *given = jc_alloc(c, (size_t)(m->n_names + 1) * sizeof(bool));
    memset(given, 0, (size_t)(m->n_names + 1) * sizeof(bool));
    for (int i = 0; i < nargs; i++) {
        frame_set(c, &fr, m->names[i], args[i]);
        given[i] = true;
    }
    for (int k = 0; k < nkw; k++) {
        int idx = -1;
        for (int i = 0; i < m->n_names; i++)
            if (!strcmp(m->names[i], kwn[k])) idx = i;
        if (idx < 0) jfail(c, n, TL_ERR_INVALID, "macro '%s' has no argument named '%s'", m->name, kwn[k]);
        if (given[idx]) jfail(c, n, TL_ERR_INVALID, "macro '%s' got multiple values for argument '%s'", m->name, kwn[k]);
        frame_set(c, &fr, m->names[idx], kwv[k]);
        given[idx] = true;
    }
    for (int i = 0; i < m->n_names; i++) {
        if (given[i]) continue;
        jv v = m->args[i] ? eval(c, &fr, m->args[i]) : undef_named(c, m->names[i]);
        frame_set(c, &fr, m->names[i], v);
    }
    c->depth++;
    int saved_loop = c->loop_depth;
    c->loop_depth = 0;
    size_t start = c->out_len;
    exec_body(c, &fr, m->body, m->n_body);
    c->loop_depth = saved_loop;
    c->depth--;
    jv r = jv_str(c, c->out + start, c->out_len - start);
    c->out_len = start;
    if (c->out) c->out[start] = 0;
    return r;
}

jv jeval_call(jctx *c, const jnode *n, jv fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    jstep(c);
    switch (fn.k) {
    case JV_MACRO: return call_macro(c, n, fn.u.m, args, nargs, kwn, kwv, nkw);
    case JV_FUNC: return jbuiltin_call_func(c, n, fn.u.fn, args, nargs, kwn, kwv, nkw);
    case JV_METHOD:
        return jbuiltin_method(c, n, fn.u.meth->recv, fn.u.meth->name, args, nargs, kwn, kwv, nkw);
    case JV_UNDEF: fail_undef(c, n, fn, "called as a function");
    default: jfail(c, n, TL_ERR_INVALID, "'%s' object is not callable", jv_kind_name(fn));
    }
}

static _Noreturn void fail_nest(jctx *c, const jnode *n) {
    jfail(c, n, TL_ERR_UNSUPPORTED, "evaluation nested deeper than %d (JINJA_MAX_EVAL_DEPTH; runaway recursion?)",
          JINJA_MAX_EVAL_DEPTH);
}

static jv eval(jctx *c, jframe *f, const jnode *n) {
    if (++c->nest > JINJA_MAX_EVAL_DEPTH) fail_nest(c, n);
    const jnode *saved = c->cur;
    c->cur = n;
    jv r;
    switch (n->kind) {
    case JN_LIT: r = n->lit; break;
    case JN_NAME: r = lookup(c, f, n->name); break;
    case JN_ATTR: r = jeval_getattr(c, n, eval(c, f, n->a), n->name); break;
    case JN_ITEM: {
        jv o = eval(c, f, n->a);
        r = jeval_getitem(c, n, o, eval(c, f, n->b));
        break;
    }
    case JN_SLICE: {
        jv o = eval(c, f, n->a);
        jv s = n->b ? eval(c, f, n->b) : jv_none();
        jv e = n->c ? eval(c, f, n->c) : jv_none();
        jv st = n->d ? eval(c, f, n->d) : jv_none();
        r = do_slice(c, n, o, s, e, st);
        break;
    }
    case JN_CALL: {
        if (n->a->kind == JN_ATTR) {
            jv obj = eval(c, f, n->a->a);
            if ((obj.k == JV_STR || obj.k == JV_LIST || (obj.k == JV_DICT && !obj.u.d->ns) ||
                 obj.k == JV_LOOP) &&
                jbuiltin_has_method(obj, n->a->name)) {
                jargs a = eval_args(c, f, n);
                jstep(c);
                c->cur = n;
                r = jbuiltin_method(c, n, obj, n->a->name, a.pos, a.npos, a.kwn, a.kw, a.nkw);
                break;
            }
            jv fn = jeval_getattr(c, n->a, obj, n->a->name);
            jargs a = eval_args(c, f, n);
            c->cur = n;
            r = jeval_call(c, n, fn, a.pos, a.npos, a.kwn, a.kw, a.nkw);
            break;
        }
        jv fn = eval(c, f, n->a);
        jargs a = eval_args(c, f, n);
        c->cur = n;
        r = jeval_call(c, n, fn, a.pos, a.npos, a.kwn, a.kw, a.nkw);
        break;
    }
    case JN_FILTER: {
        jv in = eval(c, f, n->a);
        jargs a = eval_args(c, f, n);
        c->cur = n;
        jstep(c);
        r = jbuiltin_filter(c, n, n->name, in, a.pos, a.npos, a.kwn, a.kw, a.nkw);
        break;
    }
    case JN_TEST: {
        jv in = eval(c, f, n->a);
        jargs a = eval_args(c, f, n);
        c->cur = n;
        bool t = jbuiltin_test(c, n, n->name, in, a.pos, a.npos);
        r = jv_bool(n->op ? !t : t);
        break;
    }
    case JN_NEG:
    case JN_POS: {
        jv v = eval(c, f, n->a);
        if (v.k == JV_INT || v.k == JV_BOOL) {
            int64_t x = ival(v);
            if (n->kind == JN_NEG && x == INT64_MIN) jfail(c, n, TL_ERR_UNSUPPORTED, "integer overflow");
            r = jv_int(n->kind == JN_NEG ? -x : x);
        } else if (v.k == JV_FLOAT)
            r = jv_float(n->kind == JN_NEG ? -v.u.f : v.u.f);
        else if (v.k == JV_UNDEF)
            fail_undef(c, n, v, "operand of unary -/+");
        else
            jfail(c, n, TL_ERR_INVALID, "bad operand type for unary %s: '%s'", n->kind == JN_NEG ? "-" : "+",
                  jv_kind_name(v));
        break;
    }
    case JN_NOT: r = jv_bool(!jv_truthy(eval(c, f, n->a))); break;
    case JN_AND: {
        jv a = eval(c, f, n->a);
        r = jv_truthy(a) ? eval(c, f, n->b) : a;
        break;
    }
    case JN_OR: {
        jv a = eval(c, f, n->a);
        r = jv_truthy(a) ? a : eval(c, f, n->b);
        break;
    }
    case JN_BINOP: {
        jv a = eval(c, f, n->a);
        jv b = eval(c, f, n->b);
        r = binop(c, n, n->op, a, b);
        break;
    }
    case JN_COMPARE: {
        jv left = eval(c, f, n->a);
        r = jv_bool(true);
        for (int i = 0; i < n->n_args; i++) {
            jv right = eval(c, f, n->args[i]);
            if (!compare_op(c, n, n->ops[i], left, right)) {
                r = jv_bool(false);
                break;
            }
            left = right;
        }
        break;
    }
    case JN_COND:
        if (jv_truthy(eval(c, f, n->a))) r = eval(c, f, n->b);
        else r = n->c ? eval(c, f, n->c) : undef_named(c, "conditional");
        break;
    case JN_LISTLIT:
    case JN_TUPLELIT:
        r = jv_list_new(c, (size_t)n->n_args);
        r.u.l->tuple = n->kind == JN_TUPLELIT;
        for (int i = 0; i < n->n_args; i++) jv_list_push(c, r, eval(c, f, n->args[i]));
        break;
    case JN_DICTLIT:
        r = jv_dict_new(c, (size_t)n->n_args);
        for (int i = 0; i < n->n_args; i++) {
            jv k = eval(c, f, n->args[i]);
            if (k.k == JV_LIST && !k.u.l->tuple) jfail(c, n, TL_ERR_INVALID, "unhashable type: 'list'");
            if (k.k == JV_DICT) jfail(c, n, TL_ERR_INVALID, "unhashable type: 'dict'");
            jv_dict_set(c, r, k, eval(c, f, n->kwargs[i]));
        }
        break;
    default: jfail(c, n, TL_ERR_UNSUPPORTED, "internal: statement node in expression");
    }
    c->cur = saved;
    c->nest--;
    return r;
}

/* ---- statements ----------------------------------------------------------- */

/* Materialize an iterable as a list (dict -> keys, str -> characters). */
static const jlist *as_iterable(jctx *c, const jnode *n, jv v) {
    switch (v.k) {
    case JV_LIST: return jlist_take(c, v.u.l);
    case JV_UNDEF: {
        jv e = jv_list_new(c, 0);
        return e.u.l;
    }
    case JV_DICT: {
        if (v.u.d->ns) break;
        jv r = jv_list_new(c, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jv_list_push(c, r, v.u.d->keys[i]);
        return r.u.l;
    }
    case JV_STR: {
        const jstr *s = v.u.s;
        jv r = jv_list_new(c, 0);
        for (size_t i = 0; i < s->len;) {
            size_t adv;
            jutf8_decode(s->s + i, s->len - i, &adv);
            jv_list_push(c, r, jv_str(c, s->s + i, adv));
            i += adv;
        }
        return r.u.l;
    }
    default: break;
    }
    jfail(c, n, TL_ERR_INVALID, "'%s' object is not iterable", jv_kind_name(v));
}

static void bind_targets(jctx *c, const jnode *n, jframe *fr, const char **names, int nn, jv item) {
    if (nn == 1) {
        frame_set(c, fr, names[0], item);
        return;
    }
    const jlist *l;
    if (item.k == JV_LIST) l = jlist_take(c, item.u.l);
    else if (item.k == JV_STR || item.k == JV_DICT) l = as_iterable(c, n, item);
    else jfail(c, n, TL_ERR_INVALID, "cannot unpack non-iterable %s object", jv_kind_name(item));
    if ((int)l->n != nn)
        jfail(c, n, TL_ERR_INVALID, "cannot unpack %zu values into %d names", l->n, nn);
    for (int i = 0; i < nn; i++) frame_set(c, fr, names[i], l->v[i]);
}

static int exec_for(jctx *c, jframe *f, const jnode *n) {
    const jlist *items = as_iterable(c, n, eval(c, f, n->a));
    if (n->b) {
        jv kept = jv_list_new(c, 0);
        for (size_t i = 0; i < items->n; i++) {
            jstep(c);
            jframe tf;
            memset(&tf, 0, sizeof tf);
            tf.parent = f;
            bind_targets(c, n, &tf, n->names, n->n_names, items->v[i]);
            if (jv_truthy(eval(c, &tf, n->b))) jv_list_push(c, kept, items->v[i]);
        }
        items = kept.u.l;
    }
    if (items->n == 0) {
        if (n->n_body2) {
            jframe ef;
            memset(&ef, 0, sizeof ef);
            ef.parent = f;
            return exec_body(c, &ef, n->body2, n->n_body2);
        }
        return FLOW_NORMAL;
    }
    jloop *lp = jc_alloc(c, sizeof *lp);
    lp->items = items;
    lp->length = (int64_t)items->n;
    lp->depth = c->loop_depth + 1;
    jv lv = {0};
    lv.k = JV_LOOP;
    lv.u.loop = lp;
    c->loop_depth++;
    for (size_t i = 0; i < items->n; i++) {
        jstep(c);
        lp->index0 = (int64_t)i;
        jframe fr;
        memset(&fr, 0, sizeof fr);
        fr.parent = f;
        frame_set(c, &fr, "loop", lv);
        bind_targets(c, n, &fr, n->names, n->n_names, items->v[i]);
        int flow = exec_body(c, &fr, n->body, n->n_body);
        if (flow == FLOW_BREAK) break;
    }
    c->loop_depth--;
    return FLOW_NORMAL;
}

static int exec_stmt_in(jctx *c, jframe *f, const jnode *n) {
    switch (n->kind) {
    case JN_TEXT: out_put(c, n->lit.u.s->s, n->lit.u.s->len); return FLOW_NORMAL;
    case JN_OUTPUT: {
        jv v = eval(c, f, n->a);
        if (v.k == JV_STR) {
            out_put(c, v.u.s->s, v.u.s->len);
        } else {
            jbuf b = {.c = c};
            jv_write_str(&b, v);
            if (b.n) out_put(c, b.p, b.n);
        }
        return FLOW_NORMAL;
    }
    case JN_IF:
        /* an elif chain is walked, not recursed into: any length runs in bounded stack */
        for (;;) {
            if (jv_truthy(eval(c, f, n->a))) return exec_body(c, f, n->body, n->n_body);
            if (n->n_body2 == 1 && n->body2[0]->kind == JN_IF && n->body2[0]->op == 1) {
                n = n->body2[0];
                jstep(c);
                c->cur = n;
                continue;
            }
            return exec_body(c, f, n->body2, n->n_body2);
        }
    case JN_FOR: return exec_for(c, f, n);
    case JN_SET: {
        jv v = eval(c, f, n->b);
        if (n->a) {
            jv ns = eval(c, f, n->a);
            if (ns.k != JV_DICT || !ns.u.d->ns)
                jfail(c, n, TL_ERR_INVALID, "cannot assign attribute on non-namespace object '%s'",
                      n->a->name);
            jv_dict_set(c, ns, jv_cstr(c, n->name), v);
            return FLOW_NORMAL;
        }
        bind_targets(c, n, f, n->names, n->n_names, v);
        return FLOW_NORMAL;
    }
    case JN_SETBLOCK: {
        size_t start = c->out_len;
        exec_body(c, f, n->body, n->n_body);
        jv s = jv_str(c, c->out + start, c->out_len - start);
        c->out_len = start;
        if (c->out) c->out[start] = 0;
        frame_set(c, f, n->name, s);
        return FLOW_NORMAL;
    }
    case JN_MACRO: {
        jv m = {0};
        m.k = JV_MACRO;
        m.u.m = n;
        frame_set(c, f, n->name, m);
        return FLOW_NORMAL;
    }
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    case JN_BLOCK: {
        /* {% generation %}: HF renders it as a call block, a scope of its own */
        jframe bf;
        memset(&bf, 0, sizeof bf);
        bf.parent = f;
        exec_body(c, &bf, n->body, n->n_body);
        return FLOW_NORMAL;
    }
    default: jfail(c, n, TL_ERR_UNSUPPORTED, "internal: expression node as statement");
    }
}

static int exec_stmt(jctx *c, jframe *f, const jnode *n) {
    jstep(c);
    if (++c->nest > JINJA_MAX_EVAL_DEPTH) fail_nest(c, n);
    c->cur = n;
    int flow = exec_stmt_in(c, f, n);
    c->nest--;
    return flow;
}

static int exec_body(jctx *c, jframe *f, jnode *const *body, int nb) {
    for (int i = 0; i < nb; i++) {
        int flow = exec_stmt(c, f, body[i]);
        if (flow != FLOW_NORMAL) return flow;
    }
    return FLOW_NORMAL;
}

/* ---- environment and entry ------------------------------------------------ */

tl_status jinja_env_init(const jinja_limits *lim, jinja_env **out) {
    *out = NULL;
    jinja_env *e = calloc(1, sizeof *e);
    if (!e) return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    if (lim) e->lim = *lim;
    if (!e->lim.max_output) e->lim.max_output = 16u << 20;
    if (!e->lim.max_memory) e->lim.max_memory = 256u << 20;
    if (!e->lim.max_steps) e->lim.max_steps = 20000000;
    if (!e->lim.max_depth) e->lim.max_depth = 100;
    e->arena.limit = e->lim.max_memory;
    e->globals = jdict_new_a(&e->arena);
    if (!e->globals) {
        free(e);
        return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    }
    *out = e;
    return TL_OK;
}

void jinja_env_free(jinja_env *e) {
    if (!e) return;
    jarena_free(&e->arena);
    free(e);
}

static tl_status env_set(jinja_env *e, const char *name, jv v) {
    const jstr *k = jstr_make(&e->arena, name, strlen(name));
    jv key = {0};
    key.k = JV_STR;
    key.u.s = k;
    if (!k || !jdict_set_a(&e->arena, e->globals, key, v))
        return tl_err(TL_ERR_NOMEM, "jinja: out of memory setting '%s'", name);
    return TL_OK;
}

tl_status jinja_env_set_json(jinja_env *e, const char *name, const char *json, size_t len) {
    jv v;
    tl_status st = jjson_parse(&e->arena, json, len, &v);
    if (st != TL_OK) return tl_err_prefix(st, "jinja: variable '%s': ", name);
    return env_set(e, name, v);
}

tl_status jinja_env_set_json_object(jinja_env *e, const char *json, size_t len) {
    jv v;
    tl_status st = jjson_parse(&e->arena, json, len, &v);
    if (st != TL_OK) return tl_err_prefix(st, "jinja: variables: ");
    if (v.k != JV_DICT) return tl_err(TL_ERR_INVALID, "jinja: variables must be a JSON object");
    for (size_t i = 0; i < v.u.d->n; i++) {
        jv k = v.u.d->keys[i];
        jv key = k;
        if (!jdict_set_a(&e->arena, e->globals, key, v.u.d->vals[i]))
            return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    }
    return TL_OK;
}

tl_status jinja_env_set_str(jinja_env *e, const char *name, const char *s) {
    if (!s) return env_set(e, name, jv_none());
    if (!jutf8_valid(s, strlen(s))) return tl_err(TL_ERR_INVALID, "jinja: variable '%s' is not valid UTF-8", name);
    const jstr *js = jstr_make(&e->arena, s, strlen(s));
    if (!js) return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    jv v = {0};
    v.k = JV_STR;
    v.u.s = js;
    return env_set(e, name, v);
}

tl_status jinja_env_set_bool(jinja_env *e, const char *name, bool b) { return env_set(e, name, jv_bool(b)); }

tl_status jinja_render(const jinja_template *t, jinja_env *e, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    jctx *c = calloc(1, sizeof *c);
    if (!c) return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    c->env = e;
    c->ar = &e->arena;
    jframe *root = calloc(1, sizeof *root);
    if (!root) {
        free(c);
        return tl_err(TL_ERR_NOMEM, "jinja: out of memory");
    }
    c->root = root;
    if (setjmp(c->jmp)) {
        tl_status st = c->err;
        free(c->out);
        free(root);
        free(c);
        return st;
    }
    exec_body(c, root, t->body, t->n_body);
    if (!c->out) out_put(c, "", 0);
    *out = c->out;
    if (out_len) *out_len = c->out_len;
    free(root);
    free(c);
    return TL_OK;
}
