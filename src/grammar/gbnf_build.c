/* grammar/gbnf_build: rules under construction and the lowering of GBNF's
 * constructs to byte-level alternatives (see gbnf.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf_build.h"

tl_status gb_fail(const gp_state *p, size_t at, const char *what) {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->src[i] == '\n') line++, col = 1;
        else col++;
    }
    return tl_err(TL_ERR_FORMAT, "grammar: line %d, column %d: %s", line, col, what);
}

static tl_status gb_grow(void **v, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return TL_OK;
    int64_t nc = *cap ? (int64_t)*cap * 2 : 16;
    while (nc < need) nc *= 2;
    if (nc > INT32_MAX) return tl_err(TL_ERR_NOMEM, "grammar: too large");
    void *n = realloc(*v, (size_t)nc * elem);
    if (!n) return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
    *v = n;
    *cap = (int32_t)nc;
    return TL_OK;
}

int32_t gb_alt_len(const gp_state *p, int32_t rule) { return p->rules[rule].n; }

tl_status gb_emit(gp_state *p, int32_t rule, int32_t e) {
    if (++p->total > GB_MAX_ELEMS)
        return tl_err(TL_ERR_FORMAT, "grammar: more than %d elements after expanding repetitions", GB_MAX_ELEMS);
    gb_rule *r = &p->rules[rule];
    tl_status s = gb_grow((void **)&r->buf, &r->cap, r->n + 1, sizeof *r->buf);
    if (s) return s;
    r->buf[r->n++] = e;
    return TL_OK;
}

tl_status gb_end_alt(gp_state *p, int32_t rule) { return gb_emit(p, rule, GB_END); }

static uint32_t gb_set_hash(const uint8_t *b) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < 32; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Id of byte set b, adding it if new. */
static tl_status gb_set_id(gp_state *p, const uint8_t b[32], int32_t *out) {
    if (p->n_sets * 2 >= p->hash_cap) {
        int32_t nc = p->hash_cap ? p->hash_cap * 2 : 256;
        int32_t *h = malloc((size_t)nc * sizeof *h);
        if (!h) return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
        for (int32_t i = 0; i < nc; i++) h[i] = -1;
        for (int32_t i = 0; i < p->n_sets; i++) {
            uint32_t k = gb_set_hash(p->sets[i]) & (uint32_t)(nc - 1);
            while (h[k] >= 0) k = (k + 1) & (uint32_t)(nc - 1);
            h[k] = i;
        }
        free(p->set_hash);
        p->set_hash = h;
        p->hash_cap = nc;
    }
    uint32_t k = gb_set_hash(b) & (uint32_t)(p->hash_cap - 1);
    while (p->set_hash[k] >= 0) {
        if (!memcmp(p->sets[p->set_hash[k]], b, 32)) {
            *out = p->set_hash[k];
            return TL_OK;
        }
        k = (k + 1) & (uint32_t)(p->hash_cap - 1);
    }
    tl_status s = gb_grow((void **)&p->sets, &p->cap_sets, p->n_sets + 1, sizeof *p->sets);
    if (s) return s;
    memcpy(p->sets[p->n_sets], b, 32);
    p->set_hash[k] = p->n_sets;
    *out = p->n_sets++;
    return TL_OK;
}

static tl_status gb_emit_range(gp_state *p, int32_t rule, uint8_t lo, uint8_t hi) {
    uint8_t b[32] = {0};
    for (int c = lo; c <= hi; c++) b[c >> 3] |= (uint8_t)(1u << (c & 7));
    int32_t id;
    tl_status s = gb_set_id(p, b, &id);
    return s ? s : gb_emit(p, rule, id);
}

static int gb_utf8(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) return o[0] = (uint8_t)cp, 1;
    if (cp < 0x800) return o[0] = (uint8_t)(0xc0 | cp >> 6), o[1] = (uint8_t)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000)
        return o[0] = (uint8_t)(0xe0 | cp >> 12), o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
               o[2] = (uint8_t)(0x80 | (cp & 0x3f)), 3;
    o[0] = (uint8_t)(0xf0 | cp >> 18), o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

tl_status gb_emit_codepoint(gp_state *p, int32_t rule, uint32_t cp) {
    uint8_t u[4];
    int n = gb_utf8(cp, u);
    for (int i = 0; i < n; i++) {
        tl_status s = gb_emit_range(p, rule, u[i], u[i]);
        if (s) return s;
    }
    return TL_OK;
}

tl_status gb_ranges_add(gb_ranges *r, uint32_t lo, uint32_t hi) {
    if (r->n >= (1 << 20)) return tl_err(TL_ERR_FORMAT, "grammar: character class with over 2^20 ranges");
    tl_status s = gb_grow((void **)&r->v, &r->cap, r->n + 1, sizeof *r->v);
    if (s) return s;
    r->v[r->n][0] = lo;
    r->v[r->n][1] = hi;
    r->n++;
    return TL_OK;
}

static int gb_cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge; complement over the scalar values when neg; surrogates out. */
static tl_status gb_normalize(gb_ranges *r, bool neg, gb_ranges *o) {
    if (r->n) qsort(r->v, (size_t)r->n, sizeof *r->v, gb_cmp_range);
    gb_ranges m = {0};
    tl_status s = TL_OK;
    for (int32_t i = 0; i < r->n && !s; i++) {
        if (m.n && r->v[i][0] <= m.v[m.n - 1][1] + 1) {
            if (r->v[i][1] > m.v[m.n - 1][1]) m.v[m.n - 1][1] = r->v[i][1];
        } else s = gb_ranges_add(&m, r->v[i][0], r->v[i][1]);
    }
    gb_ranges c = {0};
    if (!s && neg) {
        uint32_t next = 0;
        for (int32_t i = 0; i < m.n && !s; i++) {
            if (m.v[i][0] > next) s = gb_ranges_add(&c, next, m.v[i][0] - 1);
            next = m.v[i][1] + 1;
        }
        if (!s && next <= 0x10ffff) s = gb_ranges_add(&c, next, 0x10ffff);
        free(m.v);
        m = c;
    }
    /* cut the surrogate block D800-DFFF out: UTF-8 cannot carry it */
    for (int32_t i = 0; i < m.n && !s; i++) {
        uint32_t lo = m.v[i][0], hi = m.v[i][1];
        if (hi < 0xd800 || lo > 0xdfff) s = gb_ranges_add(o, lo, hi);
        else {
            if (lo < 0xd800) s = gb_ranges_add(o, lo, 0xd7ff);
            if (!s && hi > 0xdfff) s = gb_ranges_add(o, 0xe000, hi);
        }
    }
    free(m.v);
    return s;
}

/* The rule of k full continuation bytes, shared by every character class
 * of the grammar: sequences that end the same way then end in the same
 * parser positions, so the parses of all multi-byte characters of a class
 * meet again after their lead bytes. */
static tl_status gb_u8_tail(gp_state *p, int32_t near, int k, int32_t *out) {
    if (p->u8_tail[k]) {
        *out = p->u8_tail[k] - 1;
        return TL_OK;
    }
    int32_t r, rest = -1;
    tl_status s = k > 1 ? gb_u8_tail(p, near, k - 1, &rest) : TL_OK;
    if (!s) s = gb_new_rule(p, near, &r);
    if (!s) s = gb_emit_range(p, r, 0x80, 0xbf);
    if (!s && k > 1) s = gb_emit(p, r, GB_REF(rest));
    if (!s) s = gb_end_alt(p, r);
    if (s) return s;
    p->u8_tail[k] = r + 1;
    *out = r;
    return TL_OK;
}

/* Emit the byte-range sequences of code points lo..hi, one alternative of
 * rule each: split at UTF-8 length boundaries, then until every continuation
 * byte spans its full 80-BF range below the first differing position. */
static tl_status gb_utf8_seqs(gp_state *p, int32_t rule, uint32_t lo, uint32_t hi) {
    if (lo > hi) return TL_OK;
    static const uint32_t lim[3] = {0x7f, 0x7ff, 0xffff};
    for (int i = 0; i < 3; i++)
        if (lo <= lim[i] && hi > lim[i]) {
            tl_status s = gb_utf8_seqs(p, rule, lo, lim[i]);
            return s ? s : gb_utf8_seqs(p, rule, lim[i] + 1, hi);
        }
    for (int i = 1; i < 4; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                tl_status s = gb_utf8_seqs(p, rule, lo, lo | m);
                return s ? s : gb_utf8_seqs(p, rule, (lo | m) + 1, hi);
            }
            if ((hi & m) != m) {
                tl_status s = gb_utf8_seqs(p, rule, lo, (hi & ~m) - 1);
                return s ? s : gb_utf8_seqs(p, rule, hi & ~m, hi);
            }
        }
    }
    uint8_t a[4], b[4];
    int n = gb_utf8(lo, a);
    gb_utf8(hi, b);
    int k = 0; /* trailing continuation bytes that take all of 80-BF */
    while (k < n - 1 && a[n - 1 - k] == 0x80 && b[n - 1 - k] == 0xbf) k++;
    for (int i = 0; i < n - k; i++) {
        tl_status s = gb_emit_range(p, rule, a[i], b[i]);
        if (s) return s;
    }
    int32_t t;
    tl_status s = k ? gb_u8_tail(p, rule, k, &t) : TL_OK;
    if (!s && k) s = gb_emit(p, rule, GB_REF(t));
    return s ? s : gb_end_alt(p, rule);
}

tl_status gb_emit_class(gp_state *p, int32_t rule, gb_ranges *r, bool neg, size_t at) {
    gb_ranges n = {0};
    tl_status s = gb_normalize(r, neg, &n);
    if (!s && n.n == 0) s = gb_fail(p, at, "character class matches nothing");
    if (s) {
        free(n.v);
        return s;
    }
    /* the one-byte part is one byte set */
    uint8_t ascii[32] = {0};
    bool any_ascii = false, multi = false;
    for (int32_t i = 0; i < n.n; i++) {
        for (uint32_t c = n.v[i][0]; c <= n.v[i][1] && c < 0x80; c++) {
            ascii[c >> 3] |= (uint8_t)(1u << (c & 7));
            any_ascii = true;
        }
        multi |= n.v[i][1] >= 0x80;
    }
    int32_t id = -1;
    if (any_ascii && (s = gb_set_id(p, ascii, &id))) goto out;
    if (!multi) {
        s = gb_emit(p, rule, id);
        goto out;
    }
    int32_t sub;
    if ((s = gb_new_rule(p, rule, &sub))) goto out;
    if (any_ascii && ((s = gb_emit(p, sub, id)) || (s = gb_end_alt(p, sub)))) goto out;
    for (int32_t i = 0; i < n.n && !s; i++) {
        uint32_t lo = n.v[i][0] < 0x80 ? 0x80 : n.v[i][0];
        if (n.v[i][1] >= 0x80) s = gb_utf8_seqs(p, sub, lo, n.v[i][1]);
    }
    if (!s) s = gb_emit(p, rule, GB_REF(sub));
out:
    free(n.v);
    return s;
}

static tl_status gb_emit_all(gp_state *p, int32_t rule, const int32_t *e, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        tl_status s = gb_emit(p, rule, e[i]);
        if (s) return s;
    }
    return TL_OK;
}

tl_status gb_emit_repeat(gp_state *p, int32_t rule, int32_t atom_start, int32_t lo, int32_t hi) {
    gb_rule *r = &p->rules[rule];
    int32_t n = r->n - atom_start;
    int32_t atom;
    tl_status s;
    if (n == 0) return TL_OK; /* an empty literal repeated is still empty */
    if (n == 1) {
        atom = r->buf[atom_start];
    } else {
        /* a multi-element atom (a literal) gets its own rule */
        int32_t w;
        if ((s = gb_new_rule(p, rule, &w))) return s;
        r = &p->rules[rule];
        if ((s = gb_emit_all(p, w, r->buf + atom_start, n)) || (s = gb_end_alt(p, w))) return s;
        atom = GB_REF(w);
    }
    p->total -= n;
    p->rules[rule].n = atom_start;
    for (int32_t i = 0; i < lo; i++)
        if ((s = gb_emit(p, rule, atom))) return s;
    if (hi == lo) return TL_OK;
    int32_t tail;
    if ((s = gb_new_rule(p, rule, &tail))) return s;
    if (hi < 0) { /* tail ::= atom tail | empty */
        if ((s = gb_emit(p, tail, atom)) || (s = gb_emit(p, tail, GB_REF(tail))) || (s = gb_end_alt(p, tail)) ||
            (s = gb_end_alt(p, tail)))
            return s;
        return gb_emit(p, rule, GB_REF(tail));
    }
    /* t_1 ::= atom | empty;  t_k ::= atom t_(k-1) | empty */
    if ((s = gb_emit(p, tail, atom)) || (s = gb_end_alt(p, tail)) || (s = gb_end_alt(p, tail))) return s;
    for (int32_t k = 1; k < hi - lo; k++) {
        int32_t t;
        if ((s = gb_new_rule(p, rule, &t))) return s;
        if ((s = gb_emit(p, t, atom)) || (s = gb_emit(p, t, GB_REF(tail))) || (s = gb_end_alt(p, t)) ||
            (s = gb_end_alt(p, t)))
            return s;
        tail = t;
    }
    return gb_emit(p, rule, GB_REF(tail));
}

static uint32_t gb_name_hash(const char *name, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)name[i]) * 16777619u;
    return h;
}

static int32_t gb_find(const gp_state *p, const char *name, size_t n) {
    if (!p->name_cap) return -1;
    uint32_t m = (uint32_t)p->name_cap - 1;
    for (uint32_t k = gb_name_hash(name, n) & m; p->name_hash[k] >= 0; k = (k + 1) & m) {
        const char *q = p->rules[p->name_hash[k]].name;
        if (!strncmp(q, name, n) && q[n] == '\0') return p->name_hash[k];
    }
    return -1;
}

/* Index rule i by its name unless a rule of that name is indexed already. */
static tl_status gb_index_name(gp_state *p, int32_t i) {
    if ((p->n_rules + 1) * 2 > p->name_cap) {
        int32_t nc = p->name_cap ? p->name_cap * 2 : 256;
        int32_t *h = malloc((size_t)nc * sizeof *h);
        if (!h) return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
        memset(h, 0xff, (size_t)nc * sizeof *h);
        for (int32_t k = 0; k < p->name_cap; k++) {
            int32_t r = p->name_hash[k];
            if (r < 0) continue;
            uint32_t j = gb_name_hash(p->rules[r].name, strlen(p->rules[r].name)) & (uint32_t)(nc - 1);
            while (h[j] >= 0) j = (j + 1) & (uint32_t)(nc - 1);
            h[j] = r;
        }
        free(p->name_hash);
        p->name_hash = h;
        p->name_cap = nc;
    }
    const char *name = p->rules[i].name;
    size_t n = strlen(name);
    uint32_t m = (uint32_t)p->name_cap - 1, k = gb_name_hash(name, n) & m;
    for (; p->name_hash[k] >= 0; k = (k + 1) & m)
        if (!strcmp(p->rules[p->name_hash[k]].name, name)) return TL_OK;
    p->name_hash[k] = i;
    return TL_OK;
}

static tl_status gb_add_rule(gp_state *p, char *name, int32_t *out) {
    if (!name) return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
    if (p->n_rules >= GB_MAX_RULES) {
        free(name);
        return tl_err(TL_ERR_FORMAT, "grammar: more than %d rules after expansion", GB_MAX_RULES);
    }
    tl_status s = gb_grow((void **)&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules);
    if (s) {
        free(name);
        return s;
    }
    gb_rule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = name;
    *out = p->n_rules;
    s = gb_index_name(p, p->n_rules);
    p->n_rules++;
    return s;
}

tl_status gb_new_rule(gp_state *p, int32_t parent, int32_t *out) {
    const char *pn = p->rules[parent].name;
    size_t n = strlen(pn) + 16;
    char *name = malloc(n);
    if (name) snprintf(name, n, "%s_%d", pn, p->n_rules);
    tl_status s = gb_add_rule(p, name, out);
    if (!s) p->rules[*out].defined = true;
    return s;
}


tl_status gb_rule_ref(gp_state *p, const char *name, size_t n, size_t at, int32_t *out) {
    int32_t i = gb_find(p, name, n);
    if (i < 0) {
        tl_status s = gb_add_rule(p, strndup(name, n), &i);
        if (s) return s;
        p->rules[i].first_use = at;
    }
    *out = i;
    return TL_OK;
}

tl_status gb_rule_define(gp_state *p, const char *name, size_t n, size_t at, int32_t *out) {
    int32_t i;
    tl_status s = gb_rule_ref(p, name, n, at, &i);
    if (s) return s;
    if (p->rules[i].defined) {
        char what[160];
        snprintf(what, sizeof what, "rule '%.*s' is defined twice", (int)(n > 100 ? 100 : n), name);
        return gb_fail(p, at, what);
    }
    p->rules[i].defined = true;
    *out = i;
    return TL_OK;
}

void gb_state_free(gp_state *p) {
    for (int32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].buf);
    }
    free(p->rules);
    free(p->sets);
    free(p->set_hash);
    free(p->name_hash);
    memset(p, 0, sizeof *p);
}
