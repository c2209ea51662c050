/* Grammar tests: GBNF conformance (strings accepted / rejected, written from
 * the grammar syntax), malformed grammars (errors with line:column), token
 * masks against a brute-force check of every token, the sampler with a
 * grammar (only allowed tokens, dead end), and the JSON Schema corpus in
 * tests/fixtures/json_schemas (every valid instance accepted, invalid ones
 * counted). Usage: test_grammar [SCHEMA_DIR] */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "tallow.h"
#include "test_util.h"

/* A vocabulary of the 256 single bytes, a few multi-byte tokens and an end
 * token, so any text can be fed byte by byte. */
#define NB 256
static const char *multi[] = {"ab", "abc", "\"}", "{\"", "true", "fals", "e,", "\xc3\xa9", "\xc3", "\xa9x", "  "};
#define NM ((int)(sizeof multi / sizeof *multi))
#define NV (NB + NM + 2)
static char bytes[NB];
static tl_grammar_vocab *mk_vocab(void) {
    const char *t[NV];
    size_t l[NV];
    uint8_t k[NV];
    for (int i = 0; i < NB; i++) bytes[i] = (char)i, t[i] = &bytes[i], l[i] = 1, k[i] = 0;
    for (int i = 0; i < NM; i++) t[NB + i] = multi[i], l[NB + i] = strlen(multi[i]), k[NB + i] = 0;
    t[NV - 2] = "</s>", l[NV - 2] = 4, k[NV - 2] = 1;  /* end of generation */
    t[NV - 1] = "<pad>", l[NV - 1] = 5, k[NV - 1] = 2; /* never */
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(NV, t, l, k, &v) == TL_OK, "vocab: %s", tl_last_error());
    return v;
}

/* 1: complete sentence, 0: a prefix of one, -1: rejected */
static int run(tl_grammar *g, const char *s) {
    tl_grammar_reset(g);
    if (tl_grammar_accept_bytes(g, s, strlen(s))) return -1;
    return tl_grammar_can_end(g) ? 1 : 0;
}

typedef struct { const char *gbnf; const char *in[8]; int want[8]; } conf_case;
static const conf_case cases[] = {
    {"root ::= \"abc\"", {"abc", "ab", "abd", "abcd", ""}, {1, 0, -1, -1, 0}},
    {"root ::= \"a\" | \"b\" \"c\"", {"a", "bc", "b", "ac", "c"}, {1, 1, 0, -1, -1}},
    {"root ::= [a-c]+ [0-9]?", {"a", "abc5", "5", "ab55", "cab"}, {1, 1, -1, -1, 1}},
    {"root ::= [^a-c\\n] \"x\"", {"dx", "ax", "\nx", "\xc3\xa9x", "d"}, {1, -1, -1, 1, 0}},
    {"root ::= \"x\"{2,3}", {"x", "xx", "xxx", "xxxx"}, {0, 1, 1, -1}},
    {"root ::= \"x\"{2} \"y\"{1,}", {"xxy", "xxyyy", "xy", "xx"}, {1, 1, -1, 0}},
    {"root ::= (\"ab\" | \"c\")* \"d\"", {"d", "abcd", "cabcd", "abd", "acd", "bd"}, {1, 1, 1, 1, -1, -1}},
    {"root ::= \"\\x41\\u00e9\\t\\\"\\\\\"", {"A\xc3\xa9\t\"\\", "A\xc3\xa9"}, {1, 0}},
    {"root ::= .", {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3", "\xff", "ab"}, {1, 1, 1, 1, 0, -1, -1}},
    {"root ::= [\\u0100-\\u0200]", {"\xc4\x80", "\xc8\x80", "\xc8\x81", "\xc3\xbf"}, {1, 1, -1, -1}},
    {"# comment\nroot ::= a b # trailing\na ::= \"a\"\nb ::= \"b\" |\n  \"B\"\n", {"ab", "aB", "a"}, {1, 1, 0}},
    {"root ::= (\n  \"a\"\n  | \"b\"\n)", {"a", "b"}, {1, 1}},
    {"root ::= \"(\" root \")\" | \"\"", {"", "()", "(())", "(()", "())"}, {1, 1, 1, 0, -1}},
    {"root ::= \"a\"? \"b\"*", {"", "a", "abbb", "bb", "ba"}, {1, 1, 1, 1, -1}},
    /* rules alike at the top, different below (not made one), and alike throughout */
    {"root ::= a c\na ::= \"x\" b\nb ::= \"y\"\nc ::= \"x\" d\nd ::= \"z\"", {"xyxz", "xyxy", "xzxz"}, {1, -1, -1}},
    {"root ::= a \"-\" c\na ::= \"x\" a | \"\"\nc ::= \"y\" c | \"\"", {"xx-yy", "xx-x", "yy-y"}, {1, -1, -1}},
    {"root ::= a \"-\" c\na ::= [0-9] a | \"\"\nc ::= [0-9] c | \"\"", {"12-34", "1-", "-", "1-a"}, {1, 1, 1, -1}},
};

static void test_conformance(tl_grammar_vocab *v) {
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tl_grammar *g = NULL;
        tl_status s = tl_grammar_init(v, cases[c].gbnf, strlen(cases[c].gbnf), NULL, NULL, &g);
        CHECK(s == TL_OK, "case %zu compiles: %s", c, tl_last_error());
        if (s) continue;
        for (int i = 0; i < 8 && cases[c].in[i]; i++) {
            int got = run(g, cases[c].in[i]);
            CHECK(got == cases[c].want[i], "case %zu '%s' on '%s': got %d want %d", c, cases[c].gbnf, cases[c].in[i], got,
                  cases[c].want[i]);
        }
        tl_grammar_free(g);
    }
}

typedef struct { const char *gbnf; const char *msg; } bad_case;
static const bad_case bad[] = {
    {"root ::= \"abc", "line 1, column 10: unterminated string"},
    {"root ::= [abc", "line 1, column 10: unterminated character class"},
    {"root ::= (\"a\"", "line 1, column 10: unclosed '('"},
    {"root ::= \"a\")", "unmatched ')'"},
    {"root ::= b", "line 1, column 10: rule 'b' is used but never defined"},
    {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
    {"start ::= \"a\"", "no rule named 'root'"},
    {"root ::= \"\\q\"", "line 1, column 11: unknown escape"},
    {"root ::= [z-a]", "character range is reversed"},
    {"root ::= \"a\"{3,2}", "n < m"},
    {"root ::= \"a\"{1000000}", "over the cap"},
    {"root ::= * \"a\"", "nothing before it"},
    {"root ::= root \"a\" | \"b\"", "left-recursive"},
    {"root ::= a\na ::= \"x\"? a \"y\"", "left-recursive"},
    {"root \"a\"", "expected '::='"},
    {"root ::= \"a\" x ::= \"b\"", "missing newline"},
    {"root ::= [^\\x00-\\U0010ffff]", "matches nothing"},
    {"root ::= \"\\xff\xff\"", "invalid UTF-8"},
    {"::= \"a\"", "expected a rule name"},
};

/* Equal rules are made one: references to copies point at one of them
 * (which is what lets the mask walk share its work between them); rules
 * that differ, only in what they refer to or in their recursion, are not. */
static void test_dedup(void) {
    const char *src = "root ::= a \"-\" b \"-\" c \"-\" d\na ::= \"x\" s\nb ::= \"x\" t\nc ::= \"x\" u\nd ::= \"y\" s\n"
                      "s ::= [0-9] s | \"\"\nt ::= [0-9] t | \"\"\nu ::= [0-8] u | \"\"";
    gbnf *g = NULL;
    CHECK(gbnf_parse(src, strlen(src), NULL, &g) == TL_OK, "dedup grammar: %s", tl_last_error());
    if (!g) return;
    int32_t ref[4], n = 0;
    for (int32_t pos = g->alts[g->rule_alt[g->root]]; g->elems[pos] != GB_END; pos++)
        if (GB_IS_REF(g->elems[pos]) && n < 4) ref[n++] = GB_REF_RULE(g->elems[pos]);
    CHECK(n == 4, "root refers to 4 rules (%d)", n);
    if (n == 4) {
        CHECK(ref[0] == ref[1], "a and b (x then digits*) are one rule: %d %d", ref[0], ref[1]);
        CHECK(ref[0] != ref[2], "a and c (digits 0-9 vs 0-8) stay two");
        CHECK(ref[0] != ref[3], "a and d (x vs y) stay two");
    }
    gbnf_free(g);
}

static void test_malformed(tl_grammar_vocab *v) {
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        tl_grammar *g = NULL;
        tl_status s = tl_grammar_init(v, bad[c].gbnf, strlen(bad[c].gbnf), NULL, NULL, &g);
        CHECK(s == TL_ERR_FORMAT && !g, "bad %zu '%s' refused (status %d)", c, bad[c].gbnf, s);
        CHECK(strstr(tl_last_error(), bad[c].msg), "bad %zu message '%s' has '%s'", c, tl_last_error(), bad[c].msg);
        tl_grammar_free(g);
    }
}

/* Every mask bit against feeding that token's bytes from the same state. */
static void check_mask(tl_grammar_vocab *v, const char *gbnf, const char *prefix) {
    tl_grammar *g = NULL, *h = NULL;
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &g) == TL_OK, "%s", tl_last_error());
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &h) == TL_OK, "%s", tl_last_error());
    if (!g || !h) return;
    CHECK(tl_grammar_accept_bytes(g, prefix, strlen(prefix)) == TL_OK, "prefix '%s'", prefix);
    const uint32_t *w;
    CHECK(tl_grammar_mask(g, &w) == TL_OK, "mask");
    int wrong = 0;
    for (int t = 0; t < NV; t++) {
        bool bit = w[t >> 5] >> (t & 31) & 1, want;
        tl_grammar_reset(h);
        tl_grammar_accept_bytes(h, prefix, strlen(prefix));
        if (t == NV - 2) want = tl_grammar_can_end(h);
        else if (t == NV - 1) want = false;
        else {
            const char *s = t < NB ? &bytes[t] : multi[t - NB];
            want = tl_grammar_accept_bytes(h, s, t < NB ? 1 : strlen(s)) == TL_OK;
        }
        wrong += bit != want;
    }
    CHECK(wrong == 0, "mask of '%s' after '%s': %d tokens wrong", gbnf, prefix, wrong);
    /* the cached mask equals a fresh one */
    const uint32_t *w2;
    CHECK(tl_grammar_mask(g, &w2) == TL_OK && w2 == w, "second mask comes from the cache");
    tl_grammar_free(g);
    tl_grammar_free(h);
}

static void test_masks(tl_grammar_vocab *v) {
    const char *json = tl_grammar_json_gbnf();
    check_mask(v, json, "");
    check_mask(v, json, "{\"a");
    check_mask(v, json, "{\"a\": [1, tr");
    check_mask(v, json, "{\"a\": \"\xc3");
    check_mask(v, "root ::= [a-c]* \"e,\" | \"fals\" \"e\"", "");
    check_mask(v, "root ::= .* \"x\"", "\xc3\xa9");
}

static void test_sampler(tl_grammar_vocab *v) {
    const char *gb = "root ::= \"ab\" [xy] | \"true\"";
    tl_grammar *g = NULL;
    CHECK(tl_grammar_init(v, gb, strlen(gb), NULL, NULL, &g) == TL_OK, "%s", tl_last_error());
    tl_sampler_params p = tl_sampler_default_params();
    p.top_k = 0, p.top_p = 1, p.min_p = 0, p.temp = 1;
    tl_sampler *s = NULL;
    CHECK(tl_sampler_init(&p, NV, &s) == TL_OK, "sampler");
    CHECK(tl_sampler_set_grammar(s, g) == TL_OK, "attach");
    static float logits[NV];
    uint64_t x = 99;
    for (int run_i = 0; run_i < 50; run_i++) {
        tl_sampler_reset(s);
        char out[64] = {0};
        size_t n = 0;
        for (int step = 0; step < 10; step++) {
            for (int i = 0; i < NV; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, logits[i] = (float)(x % 1000) / 100.0f;
            int32_t t = tl_sampler_sample(s, logits);
            CHECK(t >= 0, "a token is allowed at step %d", step);
            if (t < 0) break;
            if (t == NV - 2) break;
            const char *txt = t < NB ? &bytes[t] : multi[t - NB];
            size_t l = t < NB ? 1 : strlen(txt);
            if (n + l < sizeof out) memcpy(out + n, txt, l), n += l;
            tl_sampler_accept(s, t);
        }
        CHECK(!strcmp(out, "abx") || !strcmp(out, "aby") || !strcmp(out, "true"), "sampled '%s' is in the grammar", out);
    }
    /* after the end token nothing is allowed: a dead end, not a crash */
    tl_sampler_reset(s);
    tl_grammar_accept_bytes(g, "true", 4);
    tl_sampler_accept(s, NV - 2);
    CHECK(tl_grammar_ended(g), "end token accepted at a complete sentence");
    CHECK(tl_sampler_sample(s, logits) == -1, "dead end gives -1");
    tl_sampler_free(s);
    tl_grammar_free(g);
}

static void test_lazy(tl_grammar_vocab *v) {
    const char *gb = "root ::= \"<call>\" [0-9]+ \"</call>\"";
    tl_grammar *g = NULL;
    CHECK(tl_grammar_init(v, gb, strlen(gb), NULL, NULL, &g) == TL_OK, "%s", tl_last_error());
    const char *trig[] = {"<call>"};
    CHECK(tl_grammar_set_triggers(g, trig, 1) == TL_OK, "triggers");
    CHECK(!tl_grammar_is_active(g), "inactive before the trigger");
    const char *text = "hi <ca";
    for (const char *p = text; *p; p++) tl_grammar_accept(g, (uint8_t)*p);
    CHECK(!tl_grammar_is_active(g), "a partial trigger does not activate");
    for (const char *p = "ll>4"; *p; p++) tl_grammar_accept(g, (uint8_t)*p);
    CHECK(tl_grammar_is_active(g), "active after the trigger");
    const uint32_t *w;
    tl_grammar_mask(g, &w);
    CHECK((w['5' >> 5] >> ('5' & 31) & 1) && !(w['x' >> 5] >> ('x' & 31) & 1), "constrained after the trigger");
    tl_grammar_free(g);
}

static void test_schema_errors(void) {
    const char *s[][2] = {
        {"{\"type\": \"string\", \"foo\": 1}", "unsupported keyword 'foo'"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"format\": \"uri\"}}}", "'#/properties/a': unsupported format 'uri'"},
        {"{\"type\": \"object\", \"patternProperties\": {}}", "unsupported keyword 'patternProperties'"},
        {"{\"$ref\": \"#/$defs/nope\"}", "$ref not found"},
        {"{\"type\": \"strin\"}", "unknown type 'strin'"},
        {"{\"type\": \"string\",\n \"pattern\": \"(?=a)\"}", "lookaround"},
        {"{\"type\": \"string\", \"pattern\": \"^x([a-z/ ]*)*$\"}", "repeated group that can match the empty string"},
        {"{\"type\": \"string\", \"pattern\": \"^(a?|b){2,}$\"}", "repeated group that can match the empty string"},
        {"{\"type\": ", "line 1, column 9: invalid JSON"},
    };
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
        char *out = NULL;
        tl_status st = tl_json_schema_to_gbnf(s[i][0], strlen(s[i][0]), NULL, &out);
        CHECK(st != TL_OK && !out, "schema %zu refused", i);
        CHECK(strstr(tl_last_error(), s[i][1]), "schema %zu message '%s' has '%s'", i, tl_last_error(), s[i][1]);
        free(out);
    }
}

/* Patterns open at an end, whose one repeated character is written once. */
static void test_patterns(tl_grammar_vocab *v) {
    static const struct { const char *pattern, *in[4]; int want[4]; } pc[] = {
        {"\\\\w+", {"\"a b\"", "\" -\"", "\"-x-\"", "\"\""}, {1, -1, 1, -1}},
        {"^\\\\w+", {"\"ab c\"", "\" ab\"", "\"a\"", NULL}, {1, -1, 1}},
        {"\\\\w+$", {"\"a b\"", "\"ab \"", "\" a\"", NULL}, {1, -1, 1}},
        {"^\\\\d+$", {"\"12\"", "\"1a\"", NULL}, {1, -1}},
        {"a\\\\+", {"\"xa+\"", "\"aa\"", NULL}, {1, -1}},
    };
    for (size_t c = 0; c < sizeof pc / sizeof *pc; c++) {
        char sch[256], *gb = NULL;
        snprintf(sch, sizeof sch, "{\"type\": \"string\", \"pattern\": \"%s\"}", pc[c].pattern);
        CHECK(tl_json_schema_to_gbnf(sch, strlen(sch), NULL, &gb) == TL_OK, "pattern %s: %s", pc[c].pattern, tl_last_error());
        tl_grammar *g = NULL;
        if (gb) CHECK(tl_grammar_init(v, gb, strlen(gb), NULL, NULL, &g) == TL_OK, "pattern %s: %s", pc[c].pattern, tl_last_error());
        for (int i = 0; g && i < 4 && pc[c].in[i]; i++) {
            int got = run(g, pc[c].in[i]);
            CHECK(got == pc[c].want[i], "pattern %s on %s: got %d want %d", pc[c].pattern, pc[c].in[i], got, pc[c].want[i]);
        }
        tl_grammar_free(g);
        free(gb);
    }
}

/* Each corpus file: {"schema": ..., "tests": [{"data": ..., "valid": bool}]}. */
static void test_corpus(tl_grammar_vocab *v, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("no schema corpus at %s\n", dir);
        CHECK(0, "corpus %s present", dir);
        return;
    }
    int n_schema = 0, n_valid = 0, ok_valid = 0, n_invalid = 0, rej_invalid = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *txt = test_read_file(path, NULL);
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        if (!j) continue;
        char *sch = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "schema"));
        char *gb = NULL;
        /* JSON Schema's own meaning: unlisted members allowed unless forbidden */
        tl_json_schema_params jp = tl_json_schema_default_params();
        jp.extra_properties = true;
        tl_status st = tl_json_schema_to_gbnf(sch, strlen(sch), &jp, &gb);
        CHECK(st == TL_OK, "%s converts: %s", e->d_name, tl_last_error());
        tl_grammar *g = NULL;
        if (!st) {
            st = tl_grammar_init(v, gb, strlen(gb), NULL, NULL, &g);
            CHECK(st == TL_OK, "%s compiles: %s", e->d_name, tl_last_error());
        }
        n_schema += g != NULL;
        for (const cJSON *t = cJSON_GetObjectItem(j, "tests")->child; t && g; t = t->next) {
            char *doc = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "data"));
            bool valid = cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"));
            int r = run(g, doc);
            if (valid) {
                n_valid++;
                ok_valid += r == 1;
                CHECK(r == 1, "%s: valid %.100s accepted", e->d_name, doc);
            } else {
                n_invalid++;
                rej_invalid += r != 1;
                if (r == 1 && getenv("SHOW")) printf("ACCEPTED INVALID %s: %.200s\n", e->d_name, doc);
            }
            free(doc);
        }
        tl_grammar_free(g);
        free(gb);
        free(sch);
        cJSON_Delete(j);
    }
    closedir(d);
    printf("corpus: %d schemas, valid accepted %d/%d, invalid rejected %d/%d\n", n_schema, ok_valid, n_valid,
           rej_invalid, n_invalid);
    CHECK(n_schema >= 100, "at least 100 schemas (%d)", n_schema);
    CHECK(rej_invalid * 10 >= n_invalid * 7, "most invalid instances rejected (%d/%d)", rej_invalid, n_invalid);
}

int main(int argc, char **argv) {
    tl_grammar_vocab *v = mk_vocab();
    if (!v) return test_finish();
    test_conformance(v);
    test_dedup();
    test_patterns(v);
    test_malformed(v);
    test_masks(v);
    test_sampler(v);
    test_lazy(v);
    test_schema_errors();
    test_corpus(v, argc > 1 ? argv[1] : "tests/fixtures/json_schemas");
    tl_grammar_vocab_free(v);
    return test_finish();
}
