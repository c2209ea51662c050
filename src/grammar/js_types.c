/* grammar/js_types: the GBNF of each JSON Schema type with its keywords. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/js_schema.h"

static const cJSON *js_get(const cJSON *s, const char *k) { return cJSON_GetObjectItemCaseSensitive(s, k); }

/* A non-negative integer keyword; -1 when absent. */
static tl_status js_count(js_ctx *c, const cJSON *s, const char *k, const char *path, long *out) {
    const cJSON *v = js_get(s, k);
    *out = -1;
    if (!v) return TL_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 100000 || v->valuedouble != floor(v->valuedouble))
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "needs an integer 0..100000:", k);
    *out = (long)v->valuedouble;
    return TL_OK;
}

static void js_repeat(js_buf *b, long lo, long hi) {
    if (hi < 0) jb_fmt(b, "{%ld,}", lo);
    else jb_fmt(b, "{%ld,%ld}", lo, hi);
}

static const char *const js_formats[][2] = {
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? "
             "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
    {"uuid", "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}"},
    {"email", "[a-zA-Z0-9._%+-]+ \"@\" [a-zA-Z0-9-]+ ( \".\" [a-zA-Z0-9-]+ )* \".\" [a-zA-Z]{2,20}"},
};

tl_status js_string(js_ctx *c, const cJSON *s, const char *path, js_buf *b) {
    long lo, hi;
    tl_status st = js_count(c, s, "minLength", path, &lo);
    if (!st) st = js_count(c, s, "maxLength", path, &hi);
    if (st) return st;
    const cJSON *pat = js_get(s, "pattern"), *fmt = js_get(s, "format");
    if ((pat || fmt) && (lo >= 0 || hi >= 0))
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "minLength/maxLength together with pattern or format", NULL);
    if (pat && fmt) return js_fail(c, TL_ERR_UNSUPPORTED, path, "pattern together with format", NULL);
    if (hi >= 0 && lo > hi) return js_fail(c, TL_ERR_UNSUPPORTED, path, "minLength > maxLength", NULL);
    jb_str(b, "\"\\\"\" ");
    if (pat) {
        if (!cJSON_IsString(pat)) return js_fail(c, TL_ERR_FORMAT, path, "pattern must be a string", NULL);
        jb_str(b, "( ");
        if ((st = js_regex(c, pat->valuestring, path, b))) return st;
        jb_str(b, " )");
    } else if (fmt) {
        if (!cJSON_IsString(fmt)) return js_fail(c, TL_ERR_FORMAT, path, "format must be a string", NULL);
        const char *f = fmt->valuestring;
        if (!strcmp(f, "date-time")) {
            jb_fmt(b, "( %s ) \"T\" ( %s )", js_formats[0][1], js_formats[1][1]);
        } else {
            size_t i = 0;
            while (i < sizeof js_formats / sizeof *js_formats && strcmp(js_formats[i][0], f)) i++;
            if (i == sizeof js_formats / sizeof *js_formats)
                return js_fail(c, TL_ERR_UNSUPPORTED, path, "unsupported format", f);
            jb_fmt(b, "( %s )", js_formats[i][1]);
        }
    } else {
        jb_str(b, "char");
        if (lo > 0 || hi >= 0) js_repeat(b, lo < 0 ? 0 : lo, hi);
        else jb_str(b, "*");
    }
    jb_str(b, " \"\\\"\"");
    return TL_OK;
}

/* Digits of the decimal strings a..b of equal length n (a <= b). */
static void js_digits_range(js_buf *b, const char *a, const char *z, int n) {
    if (n == 0) return;
    if (a[0] == z[0]) {
        jb_fmt(b, "\"%c\" ", a[0]);
        js_digits_range(b, a + 1, z + 1, n - 1);
        return;
    }
    bool a_low = true, z_high = true; /* a = d000.., z = d999.. */
    for (int i = 1; i < n; i++) a_low &= a[i] == '0', z_high &= z[i] == '9';
    if (a_low && z_high) {
        jb_fmt(b, "[%c-%c] ", a[0], z[0]);
        if (n > 1) jb_fmt(b, "[0-9]{%d} ", n - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    jb_str(b, "( ");
    jb_fmt(b, "\"%c\" ", a[0]);
    js_digits_range(b, a + 1, nines, n - 1);
    if (z[0] - a[0] > 1) {
        jb_fmt(b, "| [%c-%c] ", a[0] + 1, z[0] - 1);
        if (n > 1) jb_fmt(b, "[0-9]{%d} ", n - 1);
    }
    jb_fmt(b, "| \"%c\" ", z[0]);
    js_digits_range(b, zeros, z + 1, n - 1);
    jb_str(b, ") ");
}

/* Non-negative integers lo..hi (hi < 0: unbounded) without leading zeros. */
static void js_uint_range(js_buf *b, long long lo, long long hi) {
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%lld", lo);
    int lz = hi < 0 ? la : snprintf(z, sizeof z, "%lld", hi);
    jb_str(b, "( ");
    for (int L = la; L <= lz; L++) {
        char x[24], y[24];
        if (L == la) memcpy(x, a, (size_t)la + 1);
        else {
            x[0] = '1';
            memset(x + 1, '0', (size_t)L - 1);
        }
        if (hi >= 0 && L == lz) memcpy(y, z, (size_t)lz + 1);
        else memset(y, '9', (size_t)L);
        if (L > la) jb_str(b, "| ");
        js_digits_range(b, x, y, L);
    }
    if (hi < 0) jb_fmt(b, "| [1-9] [0-9]{%d,} ", la);
    jb_str(b, ")");
}

tl_status js_number(js_ctx *c, const cJSON *s, bool integer, const char *path, js_buf *b) {
    const cJSON *mn = js_get(s, "minimum"), *mx = js_get(s, "maximum");
    const cJSON *emn = js_get(s, "exclusiveMinimum"), *emx = js_get(s, "exclusiveMaximum");
    if (cJSON_IsBool(emn) || cJSON_IsBool(emx))
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "boolean exclusiveMinimum/Maximum (draft 4)", NULL);
    const cJSON *all[4] = {mn, mx, emn, emx};
    for (int i = 0; i < 4; i++)
        if (all[i] && !cJSON_IsNumber(all[i])) return js_fail(c, TL_ERR_FORMAT, path, "bounds must be numbers", NULL);
    if (!mn && !mx && !emn && !emx) return jb_str(b, integer ? "int" : "number"), TL_OK;
    if (!integer) {
        if (mn && !mx && !emn && !emx && cJSON_IsNumber(mn) && mn->valuedouble == 0) {
            jb_str(b, "( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?");
            return TL_OK;
        }
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "number bounds other than minimum 0", NULL);
    }
    double lo = -INFINITY, hi = INFINITY;
    if (mn && cJSON_IsNumber(mn)) lo = fmax(lo, ceil(mn->valuedouble));
    if (emn && cJSON_IsNumber(emn)) lo = fmax(lo, floor(emn->valuedouble) + 1);
    if (mx && cJSON_IsNumber(mx)) hi = fmin(hi, floor(mx->valuedouble));
    if (emx && cJSON_IsNumber(emx)) hi = fmin(hi, ceil(emx->valuedouble) - 1);
    if (lo > 1e15 || hi < -1e15 || (isfinite(lo) && fabs(lo) > 1e15) || (isfinite(hi) && fabs(hi) > 1e15))
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "integer bounds beyond 1e15", NULL);
    if (lo > hi) return js_fail(c, TL_ERR_UNSUPPORTED, path, "integer bounds admit no value", NULL);
    jb_str(b, "( ");
    bool first = true;
    if (lo < 0) { /* the negative part: "-" then magnitudes max(1, -hi) .. -lo */
        jb_str(b, "\"-\" ");
        js_uint_range(b, hi < 0 ? (long long)-hi : 1, isinf(lo) ? -1 : (long long)-lo);
        first = false;
    }
    if (hi >= 0) {
        if (!first) jb_str(b, " | ");
        js_uint_range(b, lo > 0 ? (long long)lo : 0, isinf(hi) ? -1 : (long long)hi);
    }
    jb_str(b, " )");
    return TL_OK;
}

static uint32_t js_cp(const char *s, size_t *i) {
    const unsigned char *p = (const unsigned char *)s + *i;
    uint32_t c = p[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    for (int k = 1; k < n; k++)
        if (!p[k]) n = k;
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; k++) v = v << 6 | (p[k] & 0x3f);
    *i += (size_t)n;
    return v;
}

/* A rule for the JSON string contents that are none of names[0..n) whose
 * first `at` bytes equal prefix: over the names' trie, leave it by a
 * character no name continues with (then anything), or follow a child;
 * stop only where no name ends. Escaped spellings of a name are not
 * recognised as that name. */
static int js_not_names(js_ctx *c, const char *const *names, int n, const char *prefix, size_t at) {
    int id = c->n_rules++;
    js_buf b = {0}, cls = {0};
    bool ends = false;
    uint32_t kids[256];
    int nk = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(names[i], prefix, at)) continue;
        if (!names[i][at]) {
            ends = true;
            continue;
        }
        size_t j = at;
        uint32_t cp = js_cp(names[i], &j);
        bool seen = false;
        for (int k = 0; k < nk; k++) seen |= kids[k] == cp;
        if (!seen && nk < 256) kids[nk++] = cp;
    }
    for (int k = 0; k < nk; k++) jb_class_char(&cls, kids[k]);
    /* leave the trie: a plain character no name continues with, or an escape */
    jb_fmt(&b, "( [^\"\\\\\\x00-\\x1f%s] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex hex hex hex ) ) char*",
           cls.s ? cls.s : "");
    for (int k = 0; k < nk; k++) {
        /* the child's prefix: prefix + that character */
        char child[1024];
        size_t cl = 0;
        for (int i = 0; i < n && !cl; i++) {
            if (strncmp(names[i], prefix, at) || !names[i][at]) continue;
            size_t j = at;
            if (js_cp(names[i], &j) == kids[k] && j < sizeof child) memcpy(child, names[i], j), cl = j;
        }
        if (!cl) continue;
        js_buf lit = {0};
        jb_lit(&lit, child + at, cl - at);
        int sub = js_not_names(c, names, n, child, cl);
        jb_fmt(&b, " | %s r%d", lit.s, sub);
        free(lit.s);
    }
    if (!ends) jb_str(&b, " | \"\"");
    jb_fmt(&c->out, "r%d ::= %s\n", id, b.s ? b.s : "\"\"");
    free(b.s);
    free(cls.s);
    return id;
}

/* "name" ws ":" ws value ws for property p (its rule is generated here). */
static tl_status js_kv(js_ctx *c, const cJSON *p, const char *path, js_buf *b) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/properties/%.200s", path, p->string);
    int r = 0;
    tl_status st = js_gen(c, p, sub, &r);
    if (st) return st;
    cJSON *tmp = cJSON_CreateString(p->string);
    char *q = tmp ? cJSON_PrintUnformatted(tmp) : NULL;
    cJSON_Delete(tmp);
    if (!q) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    jb_lit(b, q, strlen(q));
    free(q);
    jb_fmt(b, " ws \":\" ws r%d ws", r);
    return TL_OK;
}

/* The members of an object whose listed properties kv[0..n) come in order
 * (need[k]: required), with additional members (extra, NULL if none)
 * anywhere among them. Written so that every member has exactly one parse:
 *   M_k ::= extra R_k | L_k                  a member, next listed one >= k
 *   L_k ::= kv_k R_{k+1} | L_{k+1}           (second only if k optional)
 *   R_k ::= "," ws M_k | ""                  ("" only if all of k.. optional)
 * An extra member is never also a listed one (its key excludes the names),
 * so after a comma one copy of the extra key's parse is alive, not one per
 * optional property that could have been skipped. */
static tl_status js_members(js_ctx *c, js_buf *kv, const bool *need, int n, const char *extra, js_buf *b) {
    int *R = calloc((size_t)n + 1, sizeof *R), *M = calloc((size_t)n + 1, sizeof *M);
    int *L = calloc((size_t)n + 1, sizeof *L);
    bool *opt = calloc((size_t)n + 2, sizeof *opt); /* opt[k]: all of k.. optional */
    if (!R || !M || !L || !opt) {
        free(R), free(M), free(L), free(opt);
        return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    }
    opt[n] = true;
    for (int k = n - 1; k >= 0; k--) opt[k] = opt[k + 1] && !need[k];
    for (int k = 0; k <= n; k++) R[k] = c->n_rules++, M[k] = c->n_rules++, L[k] = c->n_rules++;
    for (int k = 0; k <= n; k++) {
        bool has_m = extra || k < n; /* M_n without extras is empty */
        if (has_m)
            jb_fmt(&c->out, "r%d ::= \",\" ws r%d%s\n", R[k], M[k], opt[k] ? " | \"\"" : "");
        else
            jb_fmt(&c->out, "r%d ::= \"\"\n", R[k]);
        if (k < n) {
            if (!need[k] && k + 1 < n) jb_fmt(&c->out, "r%d ::= %s r%d | r%d\n", L[k], kv[k].s, R[k + 1], L[k + 1]);
            else jb_fmt(&c->out, "r%d ::= %s r%d\n", L[k], kv[k].s, R[k + 1]);
        }
        if (extra && k < n) jb_fmt(&c->out, "r%d ::= %s r%d | r%d\n", M[k], extra, R[k], L[k]);
        else if (extra) jb_fmt(&c->out, "r%d ::= %s r%d\n", M[k], extra, R[k]);
        else if (k < n) jb_fmt(&c->out, "r%d ::= r%d\n", M[k], L[k]);
    }
    if (!extra && !n) jb_str(b, "\"{\" ws \"}\"");
    else jb_fmt(b, "\"{\" ws %sr%d%s \"}\"", opt[0] ? "( " : "", M[0], opt[0] ? " )?" : "");
    free(R), free(M), free(L), free(opt);
    return TL_OK;
}

tl_status js_object(js_ctx *c, const cJSON *s, const char *path, js_buf *b) {
    const cJSON *props = js_get(s, "properties"), *req = js_get(s, "required"), *addl = js_get(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return js_fail(c, TL_ERR_FORMAT, path, "properties must be an object", NULL);
    if (req && !cJSON_IsArray(req)) return js_fail(c, TL_ERR_FORMAT, path, "required must be an array", NULL);
    int n = props ? cJSON_GetArraySize(props) : 0;
    /* required names that are not properties still must appear */
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return js_fail(c, TL_ERR_FORMAT, path, "required lists non-strings", NULL);
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return js_fail(c, TL_ERR_UNSUPPORTED, path, "required property not in properties:", r->valuestring);
    }
    /* extras: additional members when allowed (JSON Schema's default) */
    js_buf extra = {0};
    /* the keys of additional members: any string but the listed names */
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (!names) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    int nn = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
        if (strlen(p->string) < 1000) names[nn++] = p->string;
    int key = -1;
    bool extras = addl ? !cJSON_IsFalse(addl) : c->p.extra_properties;
    if (extras) {
        int inner = js_not_names(c, names, nn, "", 0);
        key = c->n_rules++;
        jb_fmt(&c->out, "r%d ::= \"\\\"\" r%d \"\\\"\"\n", key, inner);
    }
    free(names);
    if (extras && (!addl || cJSON_IsTrue(addl))) jb_fmt(&extra, "r%d \":\" ws value ws", key);
    else if (cJSON_IsObject(addl)) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        int r = 0;
        tl_status st = js_gen(c, addl, sub, &r);
        if (st) {
            free(extra.s);
            return st;
        }
        jb_fmt(&extra, "r%d \":\" ws r%d ws", key, r);
    } else if (addl && !cJSON_IsFalse(addl)) {
        return js_fail(c, TL_ERR_FORMAT, path, "additionalProperties must be a boolean or a schema", NULL);
    }
    /* kv expressions and required flags in property order */
    js_buf *kv = calloc((size_t)n + 1, sizeof *kv);
    bool *need = calloc((size_t)n + 1, sizeof *need);
    tl_status st = kv && need ? TL_OK : tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p && !st; p = p->next, i++) {
        st = js_kv(c, p, path, &kv[i]);
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!strcmp(r->valuestring, p->string)) need[i] = true;
    }
    if (!st) st = js_members(c, kv, need, n, extra.s, b);
    for (int k = 0; kv && k < n; k++) free(kv[k].s);
    free(kv);
    free(need);
    free(extra.s);
    return st;
}

tl_status js_array(js_ctx *c, const cJSON *s, const char *path, js_buf *b) {
    const cJSON *items = js_get(s, "items"), *prefix = js_get(s, "prefixItems");
    long lo, hi;
    tl_status st = js_count(c, s, "minItems", path, &lo);
    if (!st) st = js_count(c, s, "maxItems", path, &hi);
    if (st) return st;
    if (lo < 0) lo = 0;
    if (hi >= 0 && lo > hi) return js_fail(c, TL_ERR_UNSUPPORTED, path, "minItems > maxItems", NULL);
    if (cJSON_IsArray(items)) { /* draft 4-2019 tuple form */
        if (prefix) return js_fail(c, TL_ERR_UNSUPPORTED, path, "items as an array together with prefixItems", NULL);
        prefix = items;
        items = NULL;
    }
    int np = prefix ? cJSON_GetArraySize(prefix) : 0;
    int *pr = calloc((size_t)np + 1, sizeof *pr);
    if (!pr) return tl_err(TL_ERR_NOMEM, "json schema: out of memory");
    int i = 0;
    for (const cJSON *x = prefix ? prefix->child : NULL; x && !st; x = x->next, i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/prefixItems/%d", path, i);
        st = js_gen(c, x, sub, &pr[i]);
    }
    int it = -1; /* rule of the items after the prefix; -1 none allowed */
    if (!st && (!items || cJSON_IsTrue(items))) {
        jb_fmt(&c->out, "r%d ::= value\n", it = c->n_rules++);
    } else if (!st && !cJSON_IsFalse(items)) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/items", path);
        st = js_gen(c, items, sub, &it);
    }
    if (st) {
        free(pr);
        return st;
    }
    if (hi >= 0 && hi < np) np = (int)hi; /* prefix items past maxItems can never appear */
    if (it < 0 && lo > np) {
        free(pr);
        return js_fail(c, TL_ERR_UNSUPPORTED, path, "minItems beyond the prefixItems with items false", NULL);
    }
    /* element k (0-based) written as (k ? "," ws : "") elem ws; elements at
     * k >= lo optional, each optional one nesting the rest */
    long max_total = it < 0 ? np : hi; /* -1: unbounded */
    jb_str(b, "\"[\" ws ");
    long k = 0, open = 0;
    for (; k < np; k++) {
        if (k >= lo) jb_str(b, "( "), open++;
        jb_fmt(b, "%sr%d ws ", k ? "\",\" ws " : "", pr[k]);
    }
    if (it >= 0 && (max_total < 0 || max_total > np)) {
        long req_more = lo > np ? lo - np : 0;
        for (long q = 0; q < req_more; q++, k++) jb_fmt(b, "%sr%d ws ", k ? "\",\" ws " : "", it);
        long opt_more = max_total < 0 ? -1 : max_total - np - req_more;
        if (k == 0) { /* no element yet: the first carries no comma */
            if (opt_more != 0) {
                jb_fmt(b, "( r%d ws ( \",\" ws r%d ws )", it, it);
                if (opt_more < 0) jb_str(b, "*");
                else jb_fmt(b, "{0,%ld}", opt_more - 1);
                jb_str(b, " )? ");
            }
        } else if (opt_more != 0) {
            jb_fmt(b, "( \",\" ws r%d ws )", it);
            if (opt_more < 0) jb_str(b, "*");
            else jb_fmt(b, "{0,%ld}", opt_more);
            jb_str(b, " ");
        }
    }
    for (; open > 0; open--) jb_str(b, ")? ");
    jb_str(b, "\"]\"");
    free(pr);
    return TL_OK;
}
