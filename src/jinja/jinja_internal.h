/* jinja/jinja_internal: types shared by the jinja_*.c files (not a public API).
 *
 * Memory model: every value made while rendering (strings, lists, dicts) lives
 * in the environment's arena and is freed at once with it, so values need no
 * reference counts; the arena has a byte limit, which bounds what a template
 * can allocate. The AST lives in the template's own arena.
 * Errors while parsing or rendering longjmp back to the entry point
 * (jinja_parse / jinja_render) after recording the message: no resource is
 * held across that jump except arena memory, which the owner frees.
 * Owns: nothing by itself. Calls: base/status, libc. */
#ifndef TL_JINJA_INTERNAL_H
#define TL_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja/jinja.h"

/* ---- arena ---------------------------------------------------------------- */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t total; /* bytes reserved in chunks */
    size_t limit; /* 0: unlimited */
} jarena;

void *jarena_alloc(jarena *a, size_t n); /* NULL when out of memory or over limit */
void jarena_free(jarena *a);

/* ---- values --------------------------------------------------------------- */

typedef enum jv_kind {
    JV_UNDEF = 0, /* jinja2 Undefined: prints '', false, attribute access fails */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,   /* also tuples (tuple flag: only changes repr) */
    JV_DICT,   /* also namespace() objects (ns flag: attribute-assignable) */
    JV_MACRO,  /* a {% macro %} */
    JV_FUNC,   /* a global function (range, namespace, raise_exception, ...) */
    JV_METHOD, /* a bound method: receiver + name (e.g. "abc".startswith) */
    JV_LOOP    /* the loop variable of a for loop */
} jv_kind;

/* Strings carry their code point count and hash, computed once when made
 * (the copy walks the bytes anyway), so len(), indexing of ASCII text and
 * dict lookups never rescan them. */
typedef struct jstr {
    size_t len;
    size_t ncp;    /* code points */
    uint32_t hash; /* jhash_bytes of s */
    char s[];      /* NUL-terminated, valid UTF-8 */
} jstr;

typedef struct jv jv;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jnode jnode;
typedef struct jloop jloop;
typedef struct jmethod jmethod;

struct jv {
    jv_kind k;
    bool markup; /* STR: a markupsafe.Markup (from |safe, |escape): `+` escapes the other side */
    union {
        bool b;
        int64_t i;
        double f;
        const jstr *s;    /* STR; UNDEF: the undefined name (may be NULL) */
        jlist *l;
        jdict *d;
        const jnode *m;   /* MACRO */
        int fn;           /* FUNC */
        jmethod *meth;
        jloop *loop;
    } u;
};

/* Python iterables that are not lists: jinja2's select/map/... filters
 * return single-use generators (no len(), always true, not JSON), dict
 * .items()/.keys()/.values() return views (len() but no indexing). */
enum { JL_PLAIN = 0, JL_GEN, JL_ITEMS, JL_KEYS, JL_VALUES };

struct jlist {
    size_t n, cap;
    jv *v;
    bool tuple;
    uint8_t lazy;  /* JL_* */
    bool consumed; /* generator already iterated */
};

/* Insertion-ordered; past JDICT_LINEAR entries an open-addressing index
 * (entry + 1 per slot, 0 empty, at most half full) finds keys by hash. */
#define JDICT_LINEAR 8
struct jdict {
    size_t n, cap;
    jv *keys;
    jv *vals;
    uint32_t *hashes; /* [cap] hash of each key */
    uint32_t *idx;    /* [idx_cap] or NULL while n <= JDICT_LINEAR */
    size_t idx_cap;   /* power of two */
    bool ns;          /* namespace object */
};

struct jmethod {
    jv recv;
    const char *name;
};

struct jloop {
    int64_t index0, length;
    const jlist *items;
    int depth;
};

/* ---- AST ------------------------------------------------------------------ */

typedef enum jnode_kind {
    /* statements */
    JN_TEXT,    /* lit: the text */
    JN_OUTPUT,  /* a: expression */
    JN_IF,      /* a: cond; body: then; body2: else */
    JN_FOR,     /* names: targets; a: iterable; b: filter (may be NULL); body; body2: else */
    JN_SET,     /* names: targets (or a: namespace expr + name: attribute); b: value */
    JN_SETBLOCK,/* name; body */
    JN_MACRO,   /* name; names: params; args: defaults (NULL entries); body */
    JN_BREAK,
    JN_CONTINUE,
    JN_BLOCK,   /* body rendered in place (generation tags) */
    /* expressions */
    JN_LIT,     /* lit */
    JN_NAME,    /* name */
    JN_ATTR,    /* a.name */
    JN_ITEM,    /* a[b] */
    JN_SLICE,   /* a[b:c:d] (each may be NULL) */
    JN_CALL,    /* a(args, kwnames=kwargs) */
    JN_FILTER,  /* a | name(args, kwargs) */
    JN_TEST,    /* a is [not] name(args); op: negated */
    JN_NEG,     /* -a */
    JN_POS,     /* +a */
    JN_NOT,     /* not a */
    JN_AND,
    JN_OR,
    JN_BINOP,   /* op: one of JOP_* ; a, b */
    JN_COMPARE, /* a, then args[i] compared with ops[i] (chained) */
    JN_COND,    /* b if a else c (c may be NULL) */
    JN_LISTLIT, /* args */
    JN_TUPLELIT,/* args */
    JN_DICTLIT  /* args: keys; kwargs: values */
} jnode_kind;

enum {
    JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN
};

struct jnode {
    jnode_kind kind;
    int op;
    int line, col;
    const char *name;
    jv lit;
    jnode *a, *b, *c, *d;
    jnode **body; int n_body;
    jnode **body2; int n_body2;
    jnode **args; int n_args;
    jnode **kwargs; int n_kwargs;
    const char **names; int n_names; /* kwarg names / targets / params */
    int *ops;
};

struct jinja_template {
    jarena arena;
    jnode **body;
    int n_body;
    char *src; /* normalized copy of the source */
};

/* ---- rendering context ---------------------------------------------------- */

typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    /* a few inline slots (loop targets, macro params) and a dict for the rest */
    const char *slot_name[6];
    jv slot_val[6];
    int n_slots;
    jdict *vars;
};

struct jinja_env {
    jarena arena;
    jinja_limits lim;
    jdict *globals;
};

typedef struct jctx {
    jinja_env *env;
    jarena *ar;
    jmp_buf jmp;
    tl_status err;
    /* output buffer (malloc'd); captured regions are cut from its end */
    char *out;
    size_t out_len, out_cap;
    uint64_t steps;
    int depth;        /* macro calls */
    int nest;         /* eval/exec frames (JINJA_MAX_EVAL_DEPTH) */
    int loop_depth;
    jframe *root;
    const jnode *cur; /* node being evaluated (for error positions) */
} jctx;

/* Record an error at node n (may be NULL: uses ctx->cur) and longjmp out. */
_Noreturn void jfail(jctx *c, const jnode *n, tl_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* value constructors (allocate in the ctx arena; fail = longjmp) */
static inline jv jv_undef(void) { jv v = {0}; v.k = JV_UNDEF; return v; }
static inline jv jv_none(void) { jv v = {0}; v.k = JV_NONE; return v; }
static inline jv jv_bool(bool b) { jv v = {0}; v.k = JV_BOOL; v.u.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {0}; v.k = JV_INT; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {0}; v.k = JV_FLOAT; v.u.f = f; return v; }

void *jc_alloc(jctx *c, size_t n);
const jstr *jstr_make(jarena *a, const char *s, size_t n); /* NULL on OOM */
jv jv_str(jctx *c, const char *s, size_t n);
jv jv_cstr(jctx *c, const char *s);
jv jv_list_new(jctx *c, size_t cap);
void jv_list_push(jctx *c, jv list, jv item);
jv jv_dict_new(jctx *c, size_t cap);
void jv_dict_set(jctx *c, jv dict, jv key, jv val);
/* arena-level versions (no ctx: for JSON loading); false on OOM */
bool jlist_push_a(jarena *a, jlist *l, jv item);
/* string keys only (JSON objects, variables) */
bool jdict_set_a(jarena *a, jdict *d, jv key, jv val);
jdict *jdict_new_a(jarena *a);
jlist *jlist_new_a(jarena *a);

/* Lookup by string key; NULL when absent. */
jv *jdict_get_str(const jdict *d, const char *key, size_t klen);
/* Lookup by any key (Python equality: 1 == 1.0 == True). */
jv *jdict_get(jctx *c, const jdict *d, jv key);

/* Work charged to the step budget before it is done (fails past max_steps). */
void jsteps(jctx *c, uint64_t n);
static inline void jwork(jctx *c, size_t bytes) { jsteps(c, bytes / JINJA_BYTES_PER_STEP); }

bool jv_truthy(jv v);
/* The items of a list-like value for iteration; a generator is used up. */
const jlist *jlist_take(jctx *c, jlist *l);
jv jv_lazy_list(jctx *c, int lazy); /* new empty generator / view */
/* Python ==; walks nested values up to JINJA_MAX_VALUE_DEPTH, charging steps */
bool jv_equal(jctx *c, jv a, jv b);
/* Python hash, consistent with jv_equal (hash(1) == hash(1.0) == hash(True)) */
uint32_t jv_hash(jctx *c, jv v);
uint32_t jhash_bytes(const char *s, size_t n);
/* <0, 0, >0; fails (longjmp) on incomparable types */
int jv_compare(jctx *c, jv a, jv b);
/* Stable merge sort of v[0..n) by keys[0..n) (both permuted); cmp may longjmp. */
void jsort(jctx *c, jv *v, jv *keys, size_t n, bool reverse);

/* Substring search in O(hn + nn): first / last occurrence, NULL if none. */
const char *jfind(jctx *c, const char *h, size_t hn, const char *nd, size_t nn);
const char *jrfind(jctx *c, const char *h, size_t hn, const char *nd, size_t nn);
/* Decimal digits s[0..n) (optional leading '-') as int64; false on overflow or junk. */
bool jparse_i64(const char *s, size_t n, int64_t *out);
const char *jv_kind_name(jv v);

/* Python str() / repr() appended to a growable buffer */
typedef struct jbuf {
    jctx *c;
    char *p;
    size_t n, cap;
} jbuf;
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
jv jbuf_to_str(jbuf *b); /* copies into the arena; frees the buffer */
void jbuf_free(jbuf *b);
void jv_write_str(jbuf *b, jv v);  /* str(v) */
void jv_write_repr(jbuf *b, jv v); /* repr(v) */
jv jv_to_str(jctx *c, jv v);       /* str(v) as a string value */
void jfmt_float(double f, char *buf, size_t cap); /* Python float repr */

/* JSON */
typedef struct jjson_opts {
    int indent;          /* <0: none */
    const char *item_sep; /* NULL: default */
    const char *key_sep;
    bool sort_keys;
    bool ensure_ascii;
} jjson_opts;
void jv_write_json(jbuf *b, jv v, const jjson_opts *o, int level);
/* Parse JSON into arena values; on error sets tl_err and returns status. */
tl_status jjson_parse(jarena *a, const char *s, size_t n, jv *out);

/* UTF-8 helpers */
size_t jutf8_count(const char *s, size_t n);                 /* code points */
size_t jutf8_offset(const char *s, size_t n, size_t index);  /* byte offset of code point index */
uint32_t jutf8_decode(const char *s, size_t n, size_t *adv); /* one code point */
size_t jutf8_encode(uint32_t cp, char *out);                 /* 1..4 bytes */
bool jutf8_valid(const char *s, size_t n);
bool jis_space(uint32_t cp); /* Python str.isspace */

/* builtins (jinja_builtins.c) */
jv jbuiltin_filter(jctx *c, const jnode *n, const char *name, jv in, jv *args, int nargs,
                   const char **kwn, jv *kwv, int nkw);
bool jbuiltin_test(jctx *c, const jnode *n, const char *name, jv in, jv *args, int nargs);
jv jbuiltin_method(jctx *c, const jnode *n, jv recv, const char *name, jv *args, int nargs,
                   const char **kwn, jv *kwv, int nkw);
bool jbuiltin_has_method(jv recv, const char *name);
jv jbuiltin_call_func(jctx *c, const jnode *n, int fn, jv *args, int nargs, const char **kwn,
                      jv *kwv, int nkw);
int jbuiltin_func_id(const char *name); /* -1 if not a global function */
bool jbuiltin_filter_known(const char *name);
bool jbuiltin_test_known(const char *name);
const char *jbuiltin_func_name(int fn);
jv jbuiltin_percent_format(jctx *c, const jnode *n, const jstr *fmt, jv *args, int nargs);

/* evaluation (jinja_eval.c) used by builtins */
jv jeval_getattr(jctx *c, const jnode *n, jv obj, const char *name);
jv jeval_getitem(jctx *c, const jnode *n, jv obj, jv key);
jv jeval_call(jctx *c, const jnode *n, jv fn, jv *args, int nargs, const char **kwn, jv *kwv,
              int nkw);
void jstep(jctx *c);

#endif
