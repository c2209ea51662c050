/* jinja/jinja_value: the value type of the Jinja interpreter: arena, lists,
 * hashed dicts, UTF-8 helpers, Python-compatible str()/repr()/float
 * formatting, equality, hashing and ordering, sorting, substring search,
 * and JSON output as HF's tojson (json.dumps with ensure_ascii=False)
 * writes it. Python semantics matter because templates print values
 * directly and the reference renderer is Python's jinja2.
 * Every walker of nested values (print, compare, hash, JSON) stops at
 * JINJA_MAX_VALUE_DEPTH, which also ends cycles a namespace can make, and
 * charges the elements it visits to the step budget.
 * Owns: nothing beyond arena memory. Calls: base/status, libc (memmem). */
#define _GNU_SOURCE /* memmem: glibc's is the linear two-way search */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

/* ---- arena ---------------------------------------------------------------- */

struct jarena_chunk {
    jarena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *jarena_alloc(jarena *a, size_t n) {
    const size_t al = sizeof(max_align_t);
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + al - 1) / al * al;
    if (n == 0) n = al;
    jarena_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > 64 * 1024 ? n : 64 * 1024;
        if (h && h->cap * 2 > cap && h->cap < 4u * 1024 * 1024) cap = h->cap * 2;
        if (a->limit && a->total + cap > a->limit) {
            if (a->total + n > a->limit) return NULL;
            cap = n;
        }
        jarena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = h;
        nc->used = 0;
        nc->cap = cap;
        a->head = nc;
        a->total += cap;
        h = nc;
    }
    void *p = (char *)h->data + h->used;
    h->used += n;
    return p;
}

void jarena_free(jarena *a) {
    jarena_chunk *h = a->head;
    while (h) {
        jarena_chunk *nx = h->next;
        free(h);
        h = nx;
    }
    a->head = NULL;
    a->total = 0;
}

void *jc_alloc(jctx *c, size_t n) {
    void *p = jarena_alloc(c->ar, n);
    if (!p)
        jfail(c, NULL, TL_ERR_NOMEM, "template memory limit (%zu bytes) exceeded",
              c->env->lim.max_memory);
    return p;
}

/* ---- strings, lists, dicts ------------------------------------------------ */

uint32_t jhash_bytes(const char *s, size_t n) {
    /* FNV-1a, then a final mix so the low bits (the slot) spread well */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

static uint32_t jmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

const jstr *jstr_make(jarena *a, const char *s, size_t n) {
    if (n > SIZE_MAX - sizeof(jstr) - 1) return NULL;
    jstr *r = jarena_alloc(a, sizeof(jstr) + n + 1);
    if (!r) return NULL;
    r->len = n;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    r->ncp = jutf8_count(r->s, n);
    r->hash = jhash_bytes(r->s, n);
    return r;
}

jv jv_str(jctx *c, const char *s, size_t n) {
    const jstr *js = jstr_make(c->ar, s, n);
    if (!js)
        jfail(c, NULL, TL_ERR_NOMEM, "template memory limit (%zu bytes) exceeded",
              c->env->lim.max_memory);
    jv v = {0};
    v.k = JV_STR;
    v.u.s = js;
    return v;
}

jv jv_cstr(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }

jlist *jlist_new_a(jarena *a) {
    jlist *l = jarena_alloc(a, sizeof *l);
    if (l) memset(l, 0, sizeof *l);
    return l;
}

bool jlist_push_a(jarena *a, jlist *l, jv item) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        if (nc > SIZE_MAX / sizeof(jv)) return false;
        jv *nv = jarena_alloc(a, nc * sizeof(jv));
        if (!nv) return false;
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = item;
    return true;
}

jdict *jdict_new_a(jarena *a) {
    jdict *d = jarena_alloc(a, sizeof *d);
    if (d) memset(d, 0, sizeof *d);
    return d;
}

/* Key equality as Python's ==; strings never equal other kinds, so string
 * keys need no context (JSON loading, variables). */
static bool jkey_equal(jctx *c, jv a, jv b) {
    if (a.k == JV_STR || b.k == JV_STR)
        return a.k == b.k && a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    return jv_equal(c, a, b);
}

/* Entry index of key (hash h) or SIZE_MAX. */
static size_t jdict_slot(jctx *c, const jdict *d, jv key, uint32_t h) {
    if (!d->idx) {
        for (size_t i = 0; i < d->n; i++)
            if (d->hashes[i] == h && jkey_equal(c, d->keys[i], key)) return i;
        return SIZE_MAX;
    }
    size_t mask = d->idx_cap - 1;
    for (size_t j = h & mask; d->idx[j]; j = (j + 1) & mask) {
        size_t e = d->idx[j] - 1;
        if (d->hashes[e] == h && jkey_equal(c, d->keys[e], key)) return e;
    }
    return SIZE_MAX;
}

static bool jdict_reindex(jarena *a, jdict *d, size_t cap) {
    if (cap > SIZE_MAX / sizeof(uint32_t) || cap > UINT32_MAX) return false;
    uint32_t *idx = jarena_alloc(a, cap * sizeof(uint32_t));
    if (!idx) return false;
    memset(idx, 0, cap * sizeof(uint32_t));
    size_t mask = cap - 1;
    for (size_t e = 0; e < d->n; e++) {
        size_t j = d->hashes[e] & mask;
        while (idx[j]) j = (j + 1) & mask;
        idx[j] = (uint32_t)(e + 1);
    }
    d->idx = idx;
    d->idx_cap = cap;
    return true;
}

/* Insert or replace; false when out of memory. */
static bool jdict_put(jarena *a, jctx *c, jdict *d, jv key, uint32_t h, jv val) {
    size_t e = jdict_slot(c, d, key, h);
    if (e != SIZE_MAX) {
        d->vals[e] = val;
        return true;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        if (nc > SIZE_MAX / sizeof(jv)) return false;
        jv *nk = jarena_alloc(a, nc * sizeof(jv));
        jv *nv = jarena_alloc(a, nc * sizeof(jv));
        uint32_t *nh = jarena_alloc(a, nc * sizeof(uint32_t));
        if (!nk || !nv || !nh) return false;
        if (d->n) {
            memcpy(nk, d->keys, d->n * sizeof(jv));
            memcpy(nv, d->vals, d->n * sizeof(jv));
            memcpy(nh, d->hashes, d->n * sizeof(uint32_t));
        }
        d->keys = nk;
        d->vals = nv;
        d->hashes = nh;
        d->cap = nc;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->hashes[d->n] = h;
    d->n++;
    if (d->n > JDICT_LINEAR && (d->n + 1) * 2 > d->idx_cap)
        return jdict_reindex(a, d, d->idx_cap ? d->idx_cap * 2 : 32);
    if (d->idx) { /* room left: add the new entry to the index */
        size_t mask = d->idx_cap - 1, j = h & mask;
        while (d->idx[j]) j = (j + 1) & mask;
        d->idx[j] = (uint32_t)d->n;
    }
    return true;
}

bool jdict_set_a(jarena *a, jdict *d, jv key, jv val) {
    if (key.k != JV_STR) return false;
    return jdict_put(a, NULL, d, key, key.u.s->hash, val);
}

jv jv_list_new(jctx *c, size_t cap) {
    jlist *l = jc_alloc(c, sizeof *l);
    memset(l, 0, sizeof *l);
    if (cap) {
        if (cap > SIZE_MAX / sizeof(jv)) jfail(c, NULL, TL_ERR_NOMEM, "list too large");
        l->v = jc_alloc(c, cap * sizeof(jv));
        l->cap = cap;
    }
    jv v = {0};
    v.k = JV_LIST;
    v.u.l = l;
    return v;
}

void jv_list_push(jctx *c, jv list, jv item) {
    if (!jlist_push_a(c->ar, list.u.l, item))
        jfail(c, NULL, TL_ERR_NOMEM, "template memory limit (%zu bytes) exceeded",
              c->env->lim.max_memory);
}

jv jv_dict_new(jctx *c, size_t cap) {
    (void)cap;
    jdict *d = jc_alloc(c, sizeof *d);
    memset(d, 0, sizeof *d);
    jv v = {0};
    v.k = JV_DICT;
    v.u.d = d;
    return v;
}

void jv_dict_set(jctx *c, jv dict, jv key, jv val) {
    if (!jdict_put(c->ar, c, dict.u.d, key, jv_hash(c, key), val))
        jfail(c, NULL, TL_ERR_NOMEM, "template memory limit (%zu bytes) exceeded",
              c->env->lim.max_memory);
}

jv *jdict_get_str(const jdict *d, const char *key, size_t klen) {
    uint32_t h = jhash_bytes(key, klen);
    if (!d->idx) {
        for (size_t i = 0; i < d->n; i++) {
            const jv *x = &d->keys[i];
            if (d->hashes[i] == h && x->k == JV_STR && x->u.s->len == klen && !memcmp(x->u.s->s, key, klen))
                return &d->vals[i];
        }
        return NULL;
    }
    size_t mask = d->idx_cap - 1;
    for (size_t j = h & mask; d->idx[j]; j = (j + 1) & mask) {
        size_t e = d->idx[j] - 1;
        const jv *x = &d->keys[e];
        if (d->hashes[e] == h && x->k == JV_STR && x->u.s->len == klen && !memcmp(x->u.s->s, key, klen))
            return &d->vals[e];
    }
    return NULL;
}

jv *jdict_get(jctx *c, const jdict *d, jv key) {
    size_t e = jdict_slot(c, d, key, jv_hash(c, key));
    return e == SIZE_MAX ? NULL : &d->vals[e];
}

/* ---- UTF-8 ---------------------------------------------------------------- */

uint32_t jutf8_decode(const char *s, size_t n, size_t *adv) {
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0) {
        *adv = 0;
        return 0;
    }
    unsigned c = p[0];
    if (c < 0x80) {
        *adv = 1;
        return c;
    }
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (len == 1 || (size_t)len > n) {
        *adv = 1;
        return 0xFFFD;
    }
    uint32_t cp = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *adv = 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    *adv = (size_t)len;
    return cp;
}

size_t jutf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

bool jutf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t min;
        if ((c & 0xE0) == 0xC0) len = 2, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000;
        else return false;
        if (i + (size_t)len > n) return false;
        uint32_t cp = c & (0x7F >> len);
        for (int k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += (size_t)len;
    }
    return true;
}

size_t jutf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

size_t jutf8_offset(const char *s, size_t n, size_t index) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (k == index) return i;
            k++;
        }
    }
    return n;
}

bool jis_space(uint32_t cp) {
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- truthiness, equality, ordering --------------------------------------- */

bool jv_truthy(jv v) {
    switch (v.k) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->lazy == JL_GEN || v.u.l->n != 0;
    case JV_DICT: return v.u.d->ns || v.u.d->n != 0;
    default: return true;
    }
}

const jlist *jlist_take(jctx *c, jlist *l) {
    if (l->lazy != JL_GEN) return l;
    if (l->consumed) return jv_list_new(c, 0).u.l;
    l->consumed = true;
    return l;
}

jv jv_lazy_list(jctx *c, int lazy) {
    jv r = jv_list_new(c, 0);
    r.u.l->lazy = (uint8_t)lazy;
    return r;
}

static bool jv_is_num(jv v) { return v.k == JV_BOOL || v.k == JV_INT || v.k == JV_FLOAT; }
static double jv_num(jv v) {
    return v.k == JV_FLOAT ? v.u.f : v.k == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t jv_inum(jv v) { return v.k == JV_INT ? v.u.i : (int64_t)v.u.b; }

static _Noreturn void too_deep(jctx *c, const char *what) {
    jfail(c, NULL, TL_ERR_UNSUPPORTED, "%s values nested deeper than %d (JINJA_MAX_VALUE_DEPTH)", what,
          JINJA_MAX_VALUE_DEPTH);
}

static bool equal_rec(jctx *c, jv a, jv b, int depth) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) return jv_inum(a) == jv_inum(b);
        return jv_num(a) == jv_num(b);
    }
    if (a.k != b.k) return false;
    switch (a.k) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR:
        if (a.u.s->len != b.u.s->len || a.u.s->hash != b.u.s->hash) return false;
        jwork(c, a.u.s->len);
        return !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JV_LIST:
        if (a.u.l->lazy || b.u.l->lazy) return a.u.l == b.u.l;
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return false;
        if (depth >= JINJA_MAX_VALUE_DEPTH) too_deep(c, "compared");
        jsteps(c, a.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_rec(c, a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d->ns || b.u.d->ns) return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n) return false;
        if (depth >= JINJA_MAX_VALUE_DEPTH) too_deep(c, "compared");
        jsteps(c, a.u.d->n);
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jdict_get(c, b.u.d, a.u.d->keys[i]);
            if (!o || !equal_rec(c, a.u.d->vals[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    case JV_METHOD: return a.u.meth == b.u.meth;
    default: return false;
    }
}

bool jv_equal(jctx *c, jv a, jv b) { return equal_rec(c, a, b, 0); }

static uint32_t hash_rec(jctx *c, jv v, int depth) {
    switch (v.k) {
    case JV_STR: return v.u.s->hash;
    case JV_BOOL: return jmix64((uint64_t)v.u.b);
    case JV_INT: return jmix64((uint64_t)v.u.i);
    case JV_FLOAT: {
        /* integral floats hash as the int they equal */
        double f = v.u.f;
        if (f == floor(f) && f >= -9223372036854775808.0 && f < 9223372036854775808.0)
            return jmix64((uint64_t)(int64_t)f);
        uint64_t bits;
        memcpy(&bits, &f, sizeof bits);
        return jmix64(bits);
    }
    case JV_NONE: return 0x9e3779b9u;
    case JV_UNDEF: return 0x85ebca6bu;
    case JV_LIST: {
        if (v.u.l->lazy) return jmix64((uint64_t)(uintptr_t)v.u.l);
        if (depth >= JINJA_MAX_VALUE_DEPTH) too_deep(c, "hashed");
        jsteps(c, v.u.l->n);
        uint32_t h = 0x27d4eb2fu ^ (uint32_t)v.u.l->n;
        for (size_t i = 0; i < v.u.l->n; i++) h = (h ^ hash_rec(c, v.u.l->v[i], depth + 1)) * 0x01000193u;
        return h;
    }
    case JV_DICT: /* unhashable in Python; equal dicts must still agree */
        return v.u.d->ns ? jmix64((uint64_t)(uintptr_t)v.u.d) : jmix64(v.u.d->n ^ 0xd1c7u);
    case JV_MACRO: return jmix64((uint64_t)(uintptr_t)v.u.m);
    case JV_FUNC: return jmix64((uint64_t)v.u.fn ^ 0xf00du);
    case JV_METHOD: return jmix64((uint64_t)(uintptr_t)v.u.meth);
    case JV_LOOP: return jmix64((uint64_t)(uintptr_t)v.u.loop);
    }
    return 0;
}

uint32_t jv_hash(jctx *c, jv v) { return hash_rec(c, v, 0); }

const char *jv_kind_name(jv v) {
    switch (v.k) {
    case JV_UNDEF: return "undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: {
        static const char *const lazy_names[] = {"list", "generator", "dict_items", "dict_keys", "dict_values"};
        if (v.u.l->lazy) return lazy_names[v.u.l->lazy];
        return v.u.l->tuple ? "tuple" : "list";
    }
    case JV_DICT: return v.u.d->ns ? "Namespace" : "dict";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "method";
    case JV_LOOP: return "LoopContext";
    }
    return "?";
}

static int compare_rec(jctx *c, jv a, jv b, int depth) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) {
            int64_t x = jv_inum(a), y = jv_inum(b);
            return x < y ? -1 : x > y;
        }
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a.k == JV_STR && b.k == JV_STR) {
        /* byte order of UTF-8 equals code point order */
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        jwork(c, n);
        int r = memcmp(a.u.s->s, b.u.s->s, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.k == JV_LIST && b.k == JV_LIST) {
        if (depth >= JINJA_MAX_VALUE_DEPTH) too_deep(c, "compared");
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        jsteps(c, n);
        for (size_t i = 0; i < n; i++) {
            if (equal_rec(c, a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
            return compare_rec(c, a.u.l->v[i], b.u.l->v[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jfail(c, NULL, TL_ERR_INVALID, "cannot compare '%s' with '%s'", jv_kind_name(a),
          jv_kind_name(b));
}

int jv_compare(jctx *c, jv a, jv b) { return compare_rec(c, a, b, 0); }

/* ---- sorting and searching ------------------------------------------------ */

void jsort(jctx *c, jv *v, jv *keys, size_t n, bool reverse) {
    if (n < 2) return;
    uint64_t lg = 1;
    while (((size_t)1 << lg) < n && lg < 63) lg++;
    jsteps(c, (uint64_t)n * lg);
    if (n > SIZE_MAX / (2 * sizeof(jv))) jfail(c, NULL, TL_ERR_NOMEM, "sort: list too large");
    jv *tv = jc_alloc(c, n * sizeof(jv)), *tk = jc_alloc(c, n * sizeof(jv));
    /* bottom-up merge sort: stable, no recursion */
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int r = jv_compare(c, keys[j], keys[i]);
                if (reverse) r = -r;
                if (r < 0) {
                    tv[o] = v[j];
                    tk[o++] = keys[j++];
                } else {
                    tv[o] = v[i];
                    tk[o++] = keys[i++];
                }
            }
            while (i < mid) {
                tv[o] = v[i];
                tk[o++] = keys[i++];
            }
            while (j < hi) {
                tv[o] = v[j];
                tk[o++] = keys[j++];
            }
        }
        memcpy(v, tv, n * sizeof(jv));
        memcpy(keys, tk, n * sizeof(jv));
        if (w > SIZE_MAX / 2) break;
    }
}

const char *jfind(jctx *c, const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    jwork(c, hn);
    return memmem(h, hn, nd, nn);
}

/* Last occurrence: Knuth-Morris-Pratt over the reversed strings (linear;
 * the failure table lives in the arena). */
const char *jrfind(jctx *c, const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn > hn) return NULL;
    if (nn == 0) return h + hn;
    jwork(c, hn + nn);
    if (nn == 1) {
        for (size_t i = hn; i-- > 0;)
            if (h[i] == nd[0]) return h + i;
        return NULL;
    }
    if (nn > SIZE_MAX / sizeof(size_t)) jfail(c, NULL, TL_ERR_NOMEM, "rfind: needle too large");
    size_t *fail = jc_alloc(c, nn * sizeof(size_t));
#define RN(i) nd[nn - 1 - (i)] /* the reversed needle */
    fail[0] = 0;
    for (size_t i = 1, k = 0; i < nn; i++) {
        while (k && RN(i) != RN(k)) k = fail[k - 1];
        if (RN(i) == RN(k)) k++;
        fail[i] = k;
    }
    for (size_t j = 0, k = 0; j < hn; j++) {
        char t = h[hn - 1 - j];
        while (k && t != RN(k)) k = fail[k - 1];
        if (t == RN(k)) k++;
        if (k == nn) return h + (hn - 1 - j); /* the match starts where the reversed scan ended */
    }
#undef RN
    return NULL;
}

bool jparse_i64(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = n > 0 && s[0] == '-';
    if (neg) i++;
    if (i >= n) return false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (lim - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* ---- buffers -------------------------------------------------------------- */

/* Buffers grow inside the arena (old blocks are abandoned, at most doubling
 * the space used) so an error longjmp never leaks them. */
void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (n > SIZE_MAX / 4 || b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) {
            if (nc > SIZE_MAX / 4) jfail(b->c, NULL, TL_ERR_NOMEM, "string too large");
            nc *= 2;
        }
        char *np = jc_alloc(b->c, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }

void jbuf_free(jbuf *b) {
    b->p = NULL;
    b->n = b->cap = 0;
}

jv jbuf_to_str(jbuf *b) {
    jctx *c = b->c;
    const jstr *s = jstr_make(c->ar, b->p ? b->p : "", b->n);
    jbuf_free(b);
    if (!s)
        jfail(c, NULL, TL_ERR_NOMEM, "template memory limit (%zu bytes) exceeded",
              c->env->lim.max_memory);
    jv v = {0};
    v.k = JV_STR;
    v.u.s = s;
    return v;
}

/* ---- Python float repr ---------------------------------------------------- */

void jfmt_float(double f, char *buf, size_t cap) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(buf, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* shortest digits that round-trip, as Python's repr */
    char tmp[64];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    char digits[32];
    int nd = 0;
    const char *q = tmp;
    bool neg = false;
    if (*q == '-') neg = true, q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < 31) digits[nd++] = *q;
    digits[nd] = 0;
    int e = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > e + 1)
                for (int i = e + 1; i < nd; i++) out[o++] = digits[i];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -e - 1; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        out[o] = 0;
        char ex[16];
        snprintf(ex, sizeof ex, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        strcat(out, ex);
    }
    snprintf(buf, cap, "%s", out);
}

/* ---- str() and repr() ----------------------------------------------------- */

static void write_str_repr(jbuf *b, const jstr *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL;
    bool has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    jbuf_put(b, &q, 1);
    for (size_t i = 0; i < s->len;) {
        size_t adv;
        uint32_t cp = jutf8_decode(s->s + i, s->len - i, &adv);
        char esc[16];
        if (cp == (uint32_t)q || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            jbuf_put(b, esc, 2);
        } else if (cp == '\n') jbuf_puts(b, "\\n");
        else if (cp == '\r') jbuf_puts(b, "\\r");
        else if (cp == '\t') jbuf_puts(b, "\\t");
        else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
            snprintf(esc, sizeof esc, "\\x%02x", cp);
            jbuf_puts(b, esc);
        } else
            jbuf_put(b, s->s + i, adv);
        i += adv;
    }
    jbuf_put(b, &q, 1);
}

static void write_str_d(jbuf *b, jv v, int depth);

static void write_repr_d(jbuf *b, jv v, int depth) {
    if (v.k == JV_STR) write_str_repr(b, v.u.s);
    else if (v.k == JV_UNDEF) jbuf_puts(b, "Undefined");
    else write_str_d(b, v, depth);
}

static void write_seq(jbuf *b, jv v, int depth) {
    if (v.k == JV_LIST && v.u.l->lazy == JL_GEN) {
        jbuf_puts(b, "<generator object>");
        return;
    }
    if (depth >= JINJA_MAX_VALUE_DEPTH) too_deep(b->c, "printed");
    if (v.k == JV_LIST && v.u.l->lazy) {
        jbuf_puts(b, jv_kind_name(v));
        jbuf_puts(b, "([");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_puts(b, ", ");
            write_repr_d(b, v.u.l->v[i], depth + 1);
        }
        jbuf_puts(b, "])");
        return;
    }
    if (v.k == JV_LIST) {
        const jlist *l = v.u.l;
        jbuf_puts(b, l->tuple ? "(" : "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i) jbuf_puts(b, ", ");
            write_repr_d(b, l->v[i], depth + 1);
        }
        if (l->tuple && l->n == 1) jbuf_puts(b, ",");
        jbuf_puts(b, l->tuple ? ")" : "]");
    } else {
        const jdict *d = v.u.d;
        if (d->ns) jbuf_puts(b, "<Namespace ");
        jbuf_puts(b, "{");
        for (size_t i = 0; i < d->n; i++) {
            if (i) jbuf_puts(b, ", ");
            write_repr_d(b, d->keys[i], depth + 1);
            jbuf_puts(b, ": ");
            write_repr_d(b, d->vals[i], depth + 1);
        }
        jbuf_puts(b, "}");
        if (d->ns) jbuf_puts(b, ">");
    }
}

void jv_write_repr(jbuf *b, jv v) { write_repr_d(b, v, 0); }
void jv_write_str(jbuf *b, jv v) { write_str_d(b, v, 0); }

static void write_str_d(jbuf *b, jv v, int depth) {
    char tmp[64];
    switch (v.k) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_puts(b, "None"); return;
    case JV_BOOL: jbuf_puts(b, v.u.b ? "True" : "False"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jbuf_puts(b, tmp);
        return;
    case JV_FLOAT:
        jfmt_float(v.u.f, tmp, sizeof tmp);
        jbuf_puts(b, tmp);
        return;
    case JV_STR: jbuf_put(b, v.u.s->s, v.u.s->len); return;
    case JV_LIST:
    case JV_DICT: write_seq(b, v, depth); return;
    case JV_MACRO:
        jbuf_puts(b, "<Macro '");
        jbuf_puts(b, v.u.m->name);
        jbuf_puts(b, "'>");
        return;
    case JV_FUNC:
        jbuf_puts(b, "<function ");
        jbuf_puts(b, jbuiltin_func_name(v.u.fn));
        jbuf_puts(b, ">");
        return;
    case JV_METHOD:
        jbuf_puts(b, "<built-in method ");
        jbuf_puts(b, v.u.meth->name);
        jbuf_puts(b, ">");
        return;
    case JV_LOOP: jbuf_puts(b, "<LoopContext>"); return;
    }
}

jv jv_to_str(jctx *c, jv v) {
    if (v.k == JV_STR) return v;
    jbuf b = {.c = c};
    jv_write_str(&b, v);
    return jbuf_to_str(&b);
}

/* ---- JSON output (Python json.dumps) -------------------------------------- */

static void json_write_string(jbuf *b, const char *s, size_t n, bool ascii) {
    jbuf_puts(b, "\"");
    size_t run = 0; /* start of the pending unescaped run */
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        const char *e = NULL;
        char tmp[16];
        size_t adv = 1;
        if (ch == '"') e = "\\\"";
        else if (ch == '\\') e = "\\\\";
        else if (ch == '\n') e = "\\n";
        else if (ch == '\r') e = "\\r";
        else if (ch == '\t') e = "\\t";
        else if (ch == '\b') e = "\\b";
        else if (ch == '\f') e = "\\f";
        else if (ch < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", ch);
            e = tmp;
        } else if (ascii && ch >= 0x80) {
            uint32_t cp = jutf8_decode(s + i, n - i, &adv);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            e = tmp;
        }
        if (e) {
            jbuf_put(b, s + run, i - run);
            jbuf_puts(b, e);
            i += adv;
            run = i;
        } else
            i++;
    }
    jbuf_put(b, s + run, n - run);
    jbuf_puts(b, "\"");
}

static void json_newline(jbuf *b, const jjson_opts *o, int level) {
    static const char sp[] = "                                                                "; /* 64 */
    jbuf_puts(b, "\n");
    for (int i = 0; i < level; i++) jbuf_put(b, sp, (size_t)o->indent < sizeof sp - 1 ? (size_t)o->indent : sizeof sp - 1);
}

void jv_write_json(jbuf *b, jv v, const jjson_opts *o, int level) {
    const char *isep = o->item_sep ? o->item_sep : (o->indent >= 0 ? "," : ", ");
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    char tmp[64];
    if (level >= JINJA_MAX_VALUE_DEPTH && (v.k == JV_LIST || v.k == JV_DICT)) too_deep(b->c, "tojson:");
    switch (v.k) {
    case JV_NONE: jbuf_puts(b, "null"); return;
    case JV_BOOL: jbuf_puts(b, v.u.b ? "true" : "false"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jbuf_puts(b, tmp);
        return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jbuf_puts(b, "NaN");
        else if (isinf(v.u.f)) jbuf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            jfmt_float(v.u.f, tmp, sizeof tmp);
            jbuf_puts(b, tmp);
        }
        return;
    case JV_STR: json_write_string(b, v.u.s->s, v.u.s->len, o->ensure_ascii); return;
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->lazy) break;
        if (l->n == 0) {
            jbuf_puts(b, "[]");
            return;
        }
        jbuf_puts(b, "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i) jbuf_puts(b, isep);
            if (o->indent >= 0) json_newline(b, o, level + 1);
            jv_write_json(b, l->v[i], o, level + 1);
        }
        if (o->indent >= 0) json_newline(b, o, level);
        jbuf_puts(b, "]");
        return;
    }
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->ns) break;
        if (d->n == 0) {
            jbuf_puts(b, "{}");
            return;
        }
        /* key order: insertion, or sorted (the values follow as payloads) */
        jv *keys = d->keys, *vals = d->vals;
        if (o->sort_keys) {
            keys = jc_alloc(b->c, d->n * sizeof(jv));
            vals = jc_alloc(b->c, d->n * sizeof(jv));
            memcpy(keys, d->keys, d->n * sizeof(jv));
            memcpy(vals, d->vals, d->n * sizeof(jv));
            jsort(b->c, vals, keys, d->n, false);
        }
        jbuf_puts(b, "{");
        for (size_t i = 0; i < d->n; i++) {
            jv k = keys[i];
            if (i) jbuf_puts(b, isep);
            if (o->indent >= 0) json_newline(b, o, level + 1);
            if (k.k == JV_STR) json_write_string(b, k.u.s->s, k.u.s->len, o->ensure_ascii);
            else if (k.k == JV_INT || k.k == JV_FLOAT || k.k == JV_BOOL || k.k == JV_NONE) {
                jbuf_puts(b, "\"");
                if (k.k == JV_BOOL) jbuf_puts(b, k.u.b ? "true" : "false");
                else if (k.k == JV_NONE) jbuf_puts(b, "null");
                else jv_write_str(b, k);
                jbuf_puts(b, "\"");
            } else
                jfail(b->c, NULL, TL_ERR_INVALID, "tojson: keys must be str, int, float, bool or None, not %s",
                      jv_kind_name(k));
            jbuf_puts(b, ksep);
            jv_write_json(b, vals[i], o, level + 1);
        }
        if (o->indent >= 0) json_newline(b, o, level);
        jbuf_puts(b, "}");
        return;
    }
    default: break;
    }
    jfail(b->c, NULL, TL_ERR_INVALID, "tojson: object of type '%s' is not JSON serializable",
          jv_kind_name(v));
}
