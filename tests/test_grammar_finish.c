/* Completion pressure: the shortest completion (tl_grammar_distance) of
 * grammars whose shortest sentences are known by hand, along prefixes, with
 * JSON Schema's minLength / minItems / required members; the mask under a
 * budget (tl_grammar_mask_within) against feeding each token; and the
 * same against feeding each token over a run of visits of one grammar
 * (states met again with other budgets, so kept per-state distances are
 * reused), on the small vocabulary and on Qwen3's; and the
 * sampler with uniform logits and a small budget: every output complete
 * with pressure, most cut without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallow.h"
#include "test_util.h"
#include "text/tokenizer.h"

/* The 256 single bytes, a few multi-byte tokens, an end token. */
#define NB 256
static const char *multi[] = {"ab", "a\"", "\"]", "xyz", "  ", "[\"", "\",\"",
                              /* cut inside a character, whole ones, escapes, closers */
                              "\xe4\xb8", "a\xe4", "\xe4\xb8\xad", "x\xf0\x9f\x98", "\xc3\xa9\xc3", "\xc3\xa9",
                              "\\u", "\\u00", "\\\"", "\"}", "\"}\"", "1,", ", \"", "\": \"", "\xe4\"", "e5"};
#define NM ((int)(sizeof multi / sizeof *multi))
#define NV (NB + NM + 1)
#define EOG (NV - 1)
static char bytes[NB];
static const char *piece[NV];
static size_t piece_len[NV];

static tl_grammar_vocab *mk_vocab(void) {
    uint8_t k[NV];
    for (int i = 0; i < NB; i++) bytes[i] = (char)i, piece[i] = &bytes[i], piece_len[i] = 1, k[i] = 0;
    for (int i = 0; i < NM; i++) piece[NB + i] = multi[i], piece_len[NB + i] = strlen(multi[i]), k[NB + i] = 0;
    piece[EOG] = "</s>", piece_len[EOG] = 4, k[EOG] = 1;
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(NV, piece, piece_len, k, &v) == TL_OK, "vocab: %s", tl_last_error());
    return v;
}

/* cache budget of the grammars made (0: the default) */
static size_t cache_bytes;

static tl_grammar *mk(tl_grammar_vocab *v, const char *gbnf) {
    tl_grammar *g = NULL;
    tl_grammar_params p = tl_grammar_default_params();
    if (cache_bytes) p.mask_cache_bytes = cache_bytes;
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, &p, &g) == TL_OK, "%s: %s", gbnf, tl_last_error());
    return g;
}

static tl_grammar *mk_schema(tl_grammar_vocab *v, const char *schema) {
    char *gbnf = NULL;
    CHECK(tl_json_schema_to_gbnf(schema, strlen(schema), NULL, &gbnf) == TL_OK, "%s: %s", schema, tl_last_error());
    tl_grammar *g = gbnf ? mk(v, gbnf) : NULL;
    free(gbnf);
    return g;
}

/* distance after feeding prefix (-1: the prefix was refused) */
static int32_t dist_after(tl_grammar *g, const char *prefix) {
    tl_grammar_reset(g);
    if (tl_grammar_accept_bytes(g, prefix, strlen(prefix))) return -1;
    int32_t d = -2;
    CHECK(tl_grammar_distance(g, &d) == TL_OK, "distance: %s", tl_last_error());
    return d;
}

typedef struct dist_case {
    const char *gbnf, *prefix;
    int32_t want;
} dist_case;

/* Shortest completions worked out by hand. */
static const dist_case gcases[] = {
    {"root ::= \"abc\"", "", 3},
    {"root ::= \"abc\"", "ab", 1},
    {"root ::= \"abc\"", "abc", 0},
    {"root ::= \"abcdef\" | \"xy\" \"z\"", "", 3},
    {"root ::= \"abcdef\" | \"xy\" \"z\"", "a", 5},
    {"root ::= \"[\" (\"x\" (\",\" \"x\")*)? \"]\"", "", 2},
    {"root ::= \"[\" (\"x\" (\",\" \"x\")*)? \"]\"", "[x,", 2},
    {"root ::= \"a\"{3,5}", "", 3},
    {"root ::= \"a\"{3,5}", "aaaa", 0},
    {"root ::= item item item\nitem ::= [a-z]+ \";\"", "", 6},
    {"root ::= item item item\nitem ::= [a-z]+ \";\"", "abc", 5},
    /* recursion: the shortest way out of a nested list */
    {"root ::= list\nlist ::= \"(\" (list | \"x\")* \")\"", "(((", 3},
    {"root ::= list\nlist ::= \"(\" (list | \"x\")* \")\"", "((x(x", 3},
    {"root ::= [^\"]* \"\\\"\"", "\xc3", 2}, /* the rest of a character, then the quote */
};

/* JSON Schemas: the grammar's whitespace is optional, so the shortest
 * instance is written without any. */
static const dist_case scases[] = {
    {"{\"type\": \"string\", \"minLength\": 5}", "", 7},                 /* "xxxxx" */
    {"{\"type\": \"string\", \"minLength\": 5}", "\"ab", 4},             /* xxx" */
    {"{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 3}", "", 7}, /* [0,0,0] */
    {"{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 3}", "[12,", 4},
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"bb\": {\"type\": \"string\"}},"
     " \"required\": [\"a\", \"bb\"]}", "", 15},                          /* {"a":0,"bb":""} */
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"bb\": {\"type\": \"string\"}},"
     " \"required\": [\"a\"]}", "", 7},                                   /* {"a":0} */
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"bb\": {\"type\": \"string\"}},"
     " \"required\": [\"a\", \"bb\"]}", "{\"a\":12,\"bb\":\"xyz", 2},      /* "} */
    {"{\"enum\": [\"long value\", \"ab\"]}", "", 4},
};

static void test_distance(tl_grammar_vocab *v) {
    for (size_t i = 0; i < sizeof gcases / sizeof *gcases; i++) {
        tl_grammar *g = mk(v, gcases[i].gbnf);
        if (!g) continue;
        int32_t d = dist_after(g, gcases[i].prefix);
        CHECK(d == gcases[i].want, "%s after '%s': %d, want %d", gcases[i].gbnf, gcases[i].prefix, d, gcases[i].want);
        tl_grammar_free(g);
    }
    for (size_t i = 0; i < sizeof scases / sizeof *scases; i++) {
        tl_grammar *g = mk_schema(v, scases[i].gbnf);
        if (!g) continue;
        int32_t d = dist_after(g, scases[i].prefix);
        CHECK(d == scases[i].want, "%s after '%s': %d, want %d", scases[i].gbnf, scases[i].prefix, d, scases[i].want);
        tl_grammar_free(g);
    }
    tl_grammar *g = mk(v, "root ::= \"ab\"");
    if (g) {
        int32_t d = 0;
        CHECK(tl_grammar_accept(g, (unsigned char)'a') == TL_OK && tl_grammar_accept(g, (unsigned char)'b') == TL_OK &&
                  tl_grammar_accept(g, EOG) == TL_OK && tl_grammar_distance(g, &d) == TL_OK && d == 0,
              "ended: distance %d", d);
        tl_grammar_free(g);
    }
}

/* Every bit of the budgeted mask against the definition: a token stays iff
 * the plain mask has it and, fed, it leaves a distance within the limit. */
static void check_within(tl_grammar_vocab *v, const char *gbnf, const char *prefix, int32_t budget) {
    tl_grammar *g = mk(v, gbnf);
    if (!g) return;
    int32_t d0 = dist_after(g, prefix);
    int32_t limit = d0 > budget - 1 ? d0 - 1 : budget - 2;
    uint32_t plain[(NV + 31) / 32], within[(NV + 31) / 32];
    const uint32_t *w;
    CHECK(tl_grammar_mask(g, &w) == TL_OK, "mask");
    memcpy(plain, w, sizeof plain);
    CHECK(tl_grammar_mask_within(g, budget, &w) == TL_OK, "mask_within: %s", tl_last_error());
    memcpy(within, w, sizeof within);
    int32_t n_want = 0, bad = 0;
    for (int32_t t = 0; t < EOG; t++) {
        bool in_plain = plain[t >> 5] >> (t & 31) & 1, want = false;
        if (in_plain) {
            int32_t d = dist_after(g, prefix);
            (void)d;
            if (tl_grammar_accept_bytes(g, piece[t], piece_len[t]) == TL_OK) {
                CHECK(tl_grammar_distance(g, &d) == TL_OK, "distance");
                want = d <= limit;
            }
        }
        n_want += want;
        bad += want != (bool)(within[t >> 5] >> (t & 31) & 1);
    }
    bool eog = plain[EOG >> 5] >> (EOG & 31) & 1; /* where the grammar may end, the end token stays */
    n_want += eog;
    bad += eog != (bool)(within[EOG >> 5] >> (EOG & 31) & 1);
    if (!n_want) /* nothing qualifies: the plain mask comes back */
        bad = memcmp(plain, within, sizeof plain) != 0;
    CHECK(!bad, "%s after '%s', budget %d: %d tokens differ", gbnf, prefix, budget, bad);
    tl_grammar_free(g);
}

static void test_within(tl_grammar_vocab *v) {
    const char *str = "root ::= \"\\\"\" [a-z]* \"\\\"\"";
    check_within(v, str, "\"", 1);  /* only tokens ending at the close: " and a" */
    check_within(v, str, "\"", 2);  /* one more letter may come */
    check_within(v, str, "\"ab", 50);
    const char *list = "root ::= \"[\" (str (\",\" str)*)? \"]\"\nstr ::= \"\\\"\" [a-z]{2,} \"\\\"\"";
    check_within(v, list, "[\"a", 3);
    check_within(v, list, "[\"abc\",", 6);
    check_within(v, "root ::= \"abcdef\"", "", 2); /* past the budget: tokens that get closer */
    check_within(v, "root ::= \"ab\" \" \"*", "ab", 1); /* complete: the end token only */
    check_within(v, "root ::= \"ab\" \" \"*", "ab", 2);
    /* the cases above, checked by hand for one token */
    tl_grammar *g = mk(v, str);
    if (!g) return;
    const uint32_t *w;
    (void)dist_after(g, "\"");
    CHECK(tl_grammar_mask_within(g, 1, &w) == TL_OK, "mask_within");
    CHECK((w['"' >> 5] >> ('"' & 31) & 1) && !(w['a' >> 5] >> ('a' & 31) & 1) &&
              (w[(NB + 1) >> 5] >> ((NB + 1) & 31) & 1),
          "budget 1 inside a string: close only");
    tl_grammar_free(g);
}

/* One grammar g through every prefix and budget, each prefix visited
 * twice, its budgeted masks against the definition: with h fed the prefix
 * and then each token of the plain mask, a text token stays iff it leaves
 * at most limit bytes; end tokens in the plain mask stay; when nothing
 * stays the plain mask comes back. Tokens: n of text[]/len[]/kind[]. */
static void check_visits(tl_grammar_vocab *v, int32_t n, const char *const *text, const size_t *len,
                         const uint8_t *kind, const char *what, const char *gbnf, const char *const *prefixes,
                         int n_pre) {
    tl_grammar *g = mk(v, gbnf), *h = mk(v, gbnf);
    int32_t nw = (n + 31) / 32, *dist = malloc((size_t)n * sizeof *dist);
    uint32_t *plain = malloc((size_t)nw * 4);
    CHECK(dist && plain, "alloc");
    for (int round = 0; round < 2 && g && h && dist && plain; round++)
        for (int k = 0; k < n_pre; k++) {
            const char *pre = prefixes[k];
            int32_t d0 = dist_after(g, pre), nd = 0;
            const uint32_t *w;
            CHECK(d0 >= 0 && tl_grammar_mask(g, &w) == TL_OK, "%s: prefix '%s'", what, pre);
            if (d0 < 0) continue;
            memcpy(plain, w, (size_t)nw * 4);
            for (int32_t t = 0; t < n; t++) { /* the distance each allowed text token leaves (-1: not text) */
                dist[t] = -1;
                if (!(plain[t >> 5] >> (t & 31) & 1) || kind[t]) continue;
                int32_t dh = dist_after(h, pre);
                CHECK(dh == d0 && tl_grammar_accept_bytes(h, text[t], len[t]) == TL_OK &&
                          tl_grammar_distance(h, &dist[t]) == TL_OK,
                      "'%s' then token %d", pre, t);
                nd += dist[t] != d0;
            }
            /* budgets from one below the distance to past the farthest token */
            int32_t hi = 0;
            for (int32_t t = 0; t < n; t++)
                if (dist[t] > hi) hi = dist[t] < d0 + 64 ? dist[t] : d0 + 64;
            for (int32_t budget = d0 > 1 ? d0 - 1 : 1; budget <= d0 + 4 || budget <= hi + 2; budget++) {
                int32_t limit = d0 > budget - 1 ? d0 - 1 : budget - 2, n_want = 0, bad = 0, first = -1;
                CHECK(dist_after(g, pre) == d0 && tl_grammar_mask_within(g, budget, &w) == TL_OK, "mask_within: %s",
                      tl_last_error());
                for (int32_t t = 0; t < n; t++) {
                    bool in = plain[t >> 5] >> (t & 31) & 1;
                    bool want = in && (kind[t] || dist[t] <= limit);
                    n_want += want;
                    if (n_want && want != (bool)(w[t >> 5] >> (t & 31) & 1)) bad++, first = first < 0 ? t : first;
                }
                if (!n_want) bad = memcmp(plain, w, (size_t)nw * 4) != 0;
                CHECK(!bad, "%s after '%s' (round %d), budget %d: %d tokens differ (first %d)", what, pre, round,
                      budget, bad, first);
                if (budget > d0 + 64) break;
            }
            CHECK(nd > 0 || round, "%s after '%s': some token leaves another distance (the check would see none)", what, pre);
        }
    tl_grammar_free(g);
    tl_grammar_free(h);
    free(dist), free(plain);
}

static const char *json_prefixes[] = {
    "{\"a\": \"hello wor", "{\"a\": \"x\\", "{\"a\": \"x\\u0", "{\"a\": \"\xe4", "{\"a\": [1, 2",
    "{\"a\": {\"b\": ", "{\"a\": 12", "{\"a\": [\"", "{\"", "{\"a\": \"\",",
};
#define N_JSON_PRE ((int)(sizeof json_prefixes / sizeof *json_prefixes))
/* strings of bounded length: every character a new state, at the same
 * distance (at most 12) or one closer (at least 3), or farther after
 * being closer (up to 3 letters, or 5 to 8 and a mark) */
static const char *bounded[] = {"root ::= \"\\\"\" [^\"\\\\]{0,12} \"\\\"\"",
                                "root ::= \"\\\"\" [^\"\\\\]{3,12} \"\\\"\""};
static const char *bounded_prefixes[] = {"\"", "\"a", "\"abc\xe4", "\"abcdefghij"};

static void check_bounded(tl_grammar_vocab *v, int32_t n, const char *const *text, const size_t *len,
                          const uint8_t *kind) {
    check_visits(v, n, text, len, kind, "string{0,12}", bounded[0], bounded_prefixes, 4);
    check_visits(v, n, text, len, kind, "string{3,12}", bounded[1], bounded_prefixes, 4);
    const char *gap = "root ::= \"\\\"\" ( [a-z]{0,3} | [a-z]{5,8} \"!\" ) \"\\\"\"";
    const char *gp[] = {"\"", "\"a", "\"ab", "\"abcde"};
    check_visits(v, n, text, len, kind, "letters{0,3}|{5,8}!", gap, gp, 4);
}

static void test_visits(tl_grammar_vocab *v) {
    uint8_t k[NV];
    for (int i = 0; i < NV; i++) k[i] = i == EOG;
    check_visits(v, NV, piece, piece_len, k, "json", tl_grammar_json_gbnf(), json_prefixes, N_JSON_PRE);
    const char *list = "root ::= \"[\" (str (\",\" str)*)? \"]\"\nstr ::= \"\\\"\" [a-z]{2,} \"\\\"\"";
    const char *lp[] = {"[\"a", "[\"abc\",", "[\"ab"};
    check_visits(v, NV, piece, piece_len, k, "list", list, lp, 3);
    check_bounded(v, NV, piece, piece_len, k);
    /* caches too small for most masks and distance lists: kept ones dropped,
     * others never kept */
    cache_bytes = 64;
    check_visits(v, NV, piece, piece_len, k, "json, 64-byte cache", tl_grammar_json_gbnf(), json_prefixes, N_JSON_PRE);
    cache_bytes = 0;
}

/* The same on Qwen3's vocabulary (skipped when ../shared/tokenizers is
 * absent): long tokens, and many cut inside a multi-byte character. */
static void test_visits_qwen3(void) {
    if (access("../shared/tokenizers/qwen3", R_OK)) {
        printf("note: ../shared/tokenizers/qwen3 absent, real-vocabulary budget checks skipped\n");
        return;
    }
    tok_vocab *tv = NULL;
    CHECK(tok_load_hf_json("../shared/tokenizers/qwen3", &tv) == TL_OK, "%s", tl_last_error());
    if (!tv) return;
    int32_t n = tok_n_vocab(tv);
    const char **text = malloc((size_t)n * sizeof *text);
    size_t *len = malloc((size_t)n * sizeof *len);
    uint8_t *kind = malloc((size_t)n);
    tl_grammar_vocab *v = NULL;
    if (text && len && kind) {
        for (int32_t i = 0; i < n; i++) {
            text[i] = tok_piece(tv, i, &len[i]);
            kind[i] = tok_is_eog(tv, i) ? 1 : tok_is_control(tv, i) ? 2 : 0;
            if (!kind[i] && (!text[i] || !len[i])) kind[i] = 2;
        }
        CHECK(tl_grammar_vocab_init_pieces(n, text, len, kind, &v) == TL_OK, "%s", tl_last_error());
    }
    if (v) check_visits(v, n, text, len, kind, "json on qwen3", tl_grammar_json_gbnf(), json_prefixes, N_JSON_PRE);
    if (v) check_bounded(v, n, text, len, kind);
    cache_bytes = 64 << 10;
    if (v) check_visits(v, n, text, len, kind, "json on qwen3, 64 KiB cache", tl_grammar_json_gbnf(), json_prefixes, N_JSON_PRE);
    cache_bytes = 0;
    tl_grammar_vocab_free(v);
    free(text), free(len), free(kind);
    tok_free(tv);
}

/* Uniform logits over the byte vocabulary: a string almost never closes by
 * chance, so without pressure most outputs are cut by the budget; with it
 * every one must be complete. */
static int32_t finished(tl_grammar_vocab *v, const char *gbnf, int32_t budget, int32_t finish, int n_seeds) {
    float logits[NV];
    for (int i = 0; i < NV; i++) logits[i] = 0.0f;
    int32_t ok = 0;
    for (int seed = 1; seed <= n_seeds; seed++) {
        tl_grammar *g = mk(v, gbnf);
        tl_sampler_params p = tl_sampler_default_params();
        p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = (uint64_t)seed, p.grammar_finish = finish;
        tl_sampler *s = NULL;
        CHECK(g && tl_sampler_init(&p, NV, &s) == TL_OK, "sampler");
        if (!s) {
            tl_grammar_free(g);
            continue;
        }
        tl_sampler_set_grammar(s, g);
        tl_sampler_set_budget(s, budget);
        for (int32_t n = 0; n < budget; n++) {
            int32_t t = tl_sampler_sample(s, logits);
            CHECK(t >= 0, "seed %d: dead end: %s", seed, tl_last_error());
            if (t < 0 || t == EOG) break;
            tl_sampler_accept(s, t);
        }
        ok += tl_grammar_can_end(g);
        tl_sampler_free(s);
        tl_grammar_free(g);
    }
    return ok;
}

static void test_sampler(tl_grammar_vocab *v) {
    char *gbnf = NULL;
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"minLength\": 3},"
                         " \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 2}},"
                         " \"required\": [\"name\", \"tags\"]}";
    CHECK(tl_json_schema_to_gbnf(schema, strlen(schema), NULL, &gbnf) == TL_OK, "schema: %s", tl_last_error());
    if (!gbnf) return;
    /* shortest: {"name":"xxx","tags":["",""]} is 30 bytes */
    int32_t with = finished(v, gbnf, 40, 64, 20), without = finished(v, gbnf, 40, -1, 20);
    CHECK(with == 20, "with pressure: %d of 20 complete", with);
    CHECK(without < 10, "without pressure: %d of 20 complete (the test would not see pressure work)", without);
    /* a budget below the shortest completion: no crash, no dead end, cut */
    int32_t low = finished(v, gbnf, 10, 64, 5);
    CHECK(low == 0, "budget 10 < 30: %d complete", low);
    free(gbnf);
}

int main(void) {
    tl_grammar_vocab *v = mk_vocab();
    if (!v) return test_finish();
    test_distance(v);
    test_within(v);
    test_visits(v);
    test_sampler(v);
    tl_grammar_vocab_free(v);
    test_visits_qwen3();
    return test_finish();
}
