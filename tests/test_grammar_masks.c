/* Token masks on a real vocabulary (Qwen3's 151k tokens, long and
 * multi-byte ones included) against feeding every token's bytes one by one:
 * the walk accepts whole subtrees of the vocabulary trie at once (runs of
 * string characters, bounded strings, multi-byte characters), and each
 * such shortcut must give exactly the tokens the byte-by-byte automaton
 * takes. First on a small vocabulary made to cross runs' edges, then on
 * Qwen3's. Grammars: the JSON grammar and JSON Schema grammars with strings
 * of bounded length, patterns, and keys that must not be listed names, at
 * every token boundary of a document. The Qwen3 part is skipped when
 * ../shared/tokenizers is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tallow.h"
#include "test_util.h"
#include "text/tokenizer.h"

static tok_vocab *tv;
/* the vocabulary under test */
static int32_t nv;
static const char **text;
static size_t *len;
static uint8_t *kind;

/* Whether every bit of the mask after prefix agrees with feeding the token. */
static void check_at(const tl_grammar_vocab *v, const char *gbnf, const char *prefix, size_t plen, const char *what) {
    tl_grammar *g = NULL, *h = NULL;
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &g) == TL_OK, "%s: %s", what, tl_last_error());
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &h) == TL_OK, "%s: %s", what, tl_last_error());
    if (!g || !h) {
        tl_grammar_free(g);
        tl_grammar_free(h);
        return;
    }
    const uint32_t *w = NULL;
    bool ok = tl_grammar_accept_bytes(g, prefix, plen) == TL_OK && tl_grammar_mask(g, &w) == TL_OK;
    CHECK(ok, "%s: prefix of %zu bytes accepted and masked", what, plen);
    int wrong = 0, first = -1, n_in = 0;
    for (int32_t t = 0; ok && t < nv; t++) {
        size_t l = len[t];
        const char *s = text[t];
        bool bit = w[t >> 5] >> (t & 31) & 1, want = false;
        if (kind[t] == 1) {
            tl_grammar_reset(h);
            want = tl_grammar_accept_bytes(h, prefix, plen) == TL_OK && tl_grammar_can_end(h);
        } else if (kind[t] == 0 && s && l) {
            tl_grammar_reset(h);
            want = tl_grammar_accept_bytes(h, prefix, plen) == TL_OK && tl_grammar_accept_bytes(h, s, l) == TL_OK;
        }
        n_in += bit;
        if (bit != want && first < 0) first = t;
        wrong += bit != want;
    }
    CHECK(wrong == 0, "%s after %zu bytes '%.40s': %d tokens wrong (first %d)", what, plen, prefix, wrong, first);
    CHECK(n_in > 0, "%s after %zu bytes: some token allowed", what, plen);
    tl_grammar_free(g);
    tl_grammar_free(h);
}

/* check_at every byte of doc */
static void check_bytes(const tl_grammar_vocab *v, const char *gbnf, const char *doc, const char *what) {
    for (size_t at = 0; at <= strlen(doc); at++) check_at(v, gbnf, doc, at, what);
}

/* A small vocabulary: every byte, and tokens that cross from a run into
 * bytes the run's later states refuse. */
static void test_small(void) {
    static const char *multi[] = {"ab", "_any", "_ab", "abcdefgh", "abcdefghijk", "a_b", "\xe4\xb8\xad\xe6\x96\x87",
                                  "\xe4\xb8", "\xb8\xad", "\"}", "\",\"", "ab\"", "\\n",
                                  "x\xe4\xb8\xad", "xy", "q\xc3\xa9", "q\xe4\xb8\xad", "\xc3\xa9\xc3\xa9"};
    int nm = (int)(sizeof multi / sizeof *multi);
    static char bytes[256];
    nv = 256 + nm + 1;
    text = malloc((size_t)nv * sizeof *text), len = malloc((size_t)nv * sizeof *len), kind = malloc((size_t)nv);
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, text[i] = &bytes[i], len[i] = 1, kind[i] = 0;
    for (int i = 0; i < nm; i++) text[256 + i] = multi[i], len[256 + i] = strlen(multi[i]), kind[256 + i] = 0;
    text[nv - 1] = "</s>", len[nv - 1] = 4, kind[nv - 1] = 1;
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(nv, text, len, kind, &v) == TL_OK, "%s", tl_last_error());
    if (v) {
        check_bytes(v, "root ::= \"\\\"\" [a-z_]{2} [a-m]{0,6} \"\\\"\"", "\"a_bcd\"", "narrowing run");
        check_bytes(v, "root ::= \"\\\"\" [^\"]{0,7} \"\\\"\"", "\"abc\xe4\xb8\xad\"", "bounded string");
        check_bytes(v, "root ::= \"\\\"\" [^\"]* \"\\\"\"", "\"a\xe4\xb8\xad\"", "string");
        /* runs that take some multi-byte characters or none */
        check_bytes(v, "root ::= [a-z\\u00e9]* \".\"", "ab\xc3\xa9", "some multi-byte");
        check_bytes(v, "root ::= [a-z]* \".\"", "ab", "ASCII only");
        /* a fresh grammar's first mask at a state with no stacks left */
        check_at(v, "root ::= \"a\"", "a", 1, "ended");
    }
    tl_grammar_vocab_free(v);
    free(text), free(len), free(kind);
}

/* check_at every token boundary of doc */
static void check_doc(const tl_grammar_vocab *v, const char *gbnf, const char *doc, const char *what) {
    int32_t toks[512], n = 0;
    CHECK(tok_encode(tv, doc, strlen(doc), false, false, toks, 512, &n) == TL_OK, "tokenize");
    size_t at = 0;
    for (int32_t i = 0; i <= n; i++) {
        check_at(v, gbnf, doc, at, what);
        if (i < n) {
            size_t l;
            tok_piece(tv, toks[i], &l);
            at += l;
        }
    }
}

/* The masks of one grammar fed the whole of doc token by token, at every
 * token boundary, against feeding each token after the prefix: caches warm
 * from earlier positions (frame entries made at one key or string and
 * reused at the next, under another cut) must give the same masks as a
 * fresh grammar. */
static void check_doc_warm(const tl_grammar_vocab *v, const char *gbnf, const char *doc, const char *what) {
    int32_t toks[512], n = 0;
    CHECK(tok_encode(tv, doc, strlen(doc), false, false, toks, 512, &n) == TL_OK, "tokenize");
    tl_grammar *g = NULL, *h = NULL;
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &g) == TL_OK, "%s: %s", what, tl_last_error());
    CHECK(tl_grammar_init(v, gbnf, strlen(gbnf), NULL, NULL, &h) == TL_OK, "%s: %s", what, tl_last_error());
    size_t at = 0;
    for (int32_t i = 0; g && h && i <= n; i++) {
        const uint32_t *w = NULL;
        CHECK(tl_grammar_mask(g, &w) == TL_OK, "%s: mask at %zu", what, at);
        int wrong = 0, first = -1;
        for (int32_t t = 0; w && t < nv; t++) {
            bool bit = w[t >> 5] >> (t & 31) & 1, want = false;
            tl_grammar_reset(h);
            bool pre = tl_grammar_accept_bytes(h, doc, at) == TL_OK;
            if (kind[t] == 1) want = pre && tl_grammar_can_end(h);
            else if (kind[t] == 0 && text[t] && len[t]) want = pre && tl_grammar_accept_bytes(h, text[t], len[t]) == TL_OK;
            if (bit != want && first < 0) first = t;
            wrong += bit != want;
        }
        CHECK(wrong == 0, "%s (warm) after %zu bytes '%.40s': %d tokens wrong (first %d)", what, at, doc, wrong, first);
        if (i < n) {
            size_t l;
            tok_piece(tv, toks[i], &l);
            CHECK(tl_grammar_accept(g, toks[i]) == TL_OK, "%s: token %d accepted", what, i);
            at += l;
        }
    }
    tl_grammar_free(g);
    tl_grammar_free(h);
}

/* check_doc_warm on the grammar of schema, unlisted members allowed or not */
static void check_schema_warm(const tl_grammar_vocab *v, const char *schema, bool extra, const char *doc) {
    char *gb = NULL;
    tl_json_schema_params jp = tl_json_schema_default_params();
    jp.extra_properties = extra;
    CHECK(tl_json_schema_to_gbnf(schema, strlen(schema), &jp, &gb) == TL_OK, "schema %s: %s", schema, tl_last_error());
    if (gb) check_doc_warm(v, gb, doc, schema);
    free(gb);
}

static void check_schema(const tl_grammar_vocab *v, const char *schema, const char *doc) {
    char *gb = NULL;
    tl_json_schema_params jp = tl_json_schema_default_params();
    CHECK(tl_json_schema_to_gbnf(schema, strlen(schema), &jp, &gb) == TL_OK, "schema %s: %s", schema, tl_last_error());
    if (gb) check_doc(v, gb, doc, schema);
    free(gb);
}

int main(void) {
    test_small();
    if (access("../shared/tokenizers/qwen3", R_OK)) {
        printf("note: ../shared/tokenizers/qwen3 absent, real-vocabulary mask checks skipped\n");
        return test_finish();
    }
    CHECK(tok_load_hf_json("../shared/tokenizers/qwen3", &tv) == TL_OK, "%s", tl_last_error());
    if (!tv) return test_finish();
    nv = tok_n_vocab(tv);
    text = malloc((size_t)nv * sizeof *text), len = malloc((size_t)nv * sizeof *len), kind = malloc((size_t)nv);
    for (int32_t i = 0; i < nv; i++) {
        text[i] = tok_piece(tv, i, &len[i]);
        kind[i] = tok_is_eog(tv, i) ? 1 : tok_is_control(tv, i) ? 2 : 0;
    }
    tl_grammar_vocab *v = NULL;
    CHECK(tl_grammar_vocab_init_pieces(nv, text, len, kind, &v) == TL_OK, "%s", tl_last_error());
    if (!v) return test_finish();

    check_doc(v, tl_grammar_json_gbnf(), "{\"name\": \"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \\\"q\\\"\", \"n\": [1, -2.5e3, true]}",
              "json");
    /* strings of at most / at least some characters: runs that count down */
    check_schema(v,
                 "{\"type\": \"object\", \"properties\": {\"info\": {\"type\": \"string\", \"maxLength\": 16}, "
                 "\"code\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 5}}, \"required\": [\"info\"]}",
                 "{\"info\": \"Charging \xe4\xb8\xad ok\", \"code\": \"AB\"}");
    /* unanchored patterns and keys other than the listed names */
    check_schema(v,
                 "{\"type\": \"object\", \"properties\": {\"program\": {\"type\": \"string\", \"pattern\": \"\\\\w+\"}, "
                 "\"option\": {\"type\": \"string\"}}, \"additionalProperties\": {\"type\": \"integer\"}}",
                 "{\"program\": \"Computer Science\", \"opt\": 3, \"option\": \"x\"}");
    /* a run that narrows: two letters-or-digits, then letters only */
    check_schema(v, "{\"type\": \"string\", \"pattern\": \"^[a-z0-9]{2}[a-z]{0,6}$\"}", "\"a1bcdef\"");
    /* a repeated group that cannot match the empty string is still taken */
    check_schema(v, "{\"type\": \"string\", \"pattern\": \"^(ab?|c)*$\"}", "\"abacab\"");
    /* Lexeme frames reused under other cuts: the key of unlisted members
     * (names of earlier members excluded) at every member, string bodies
     * of several properties (ending before "," or "}"), numbers, an object
     * schema used at two places; then a grammar regular as a whole (no
     * nested objects), cut where whitespace separates lexemes. */
    const char *objs = "{\"type\": \"object\", \"properties\": {\"alpha\": {\"type\": \"string\"}, "
                       "\"beta\": {\"type\": \"integer\"}, \"gamma\": {\"type\": \"string\"}, "
                       "\"alps\": {\"type\": \"string\", \"pattern\": \"\\\\w+\"}, "
                       "\"sub\": {\"$ref\": \"#/$defs/p\"}, \"subs\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/p\"}}}, "
                       "\"$defs\": {\"p\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}, "
                       "\"tag\": {\"type\": \"string\"}}}}}";
    const char *doc = "{\"alpha\": \"a b\", \"al\": 1, \"beta\": 12, \"gamma\": \"x,y}\", \"alps\": \"q r\", \"extra\": [true], "
                      "\"sub\": {\"x\": 1.5, \"tag\": \"t\"}, \"subs\": [{\"x\": 2, \"tag\": \"u\"}, {\"x\": -3}]}";
    check_schema_warm(v, objs, true, doc);
    check_schema_warm(v, objs, false, "{\"alpha\": \"a\", \"gamma\": \"b\", \"sub\": {\"tag\": \"c\"}}");
    check_schema_warm(v,
                      "{\"type\": \"object\", \"properties\": {\"program\": {\"type\": \"string\", \"pattern\": \"\\\\w+\"}, "
                      "\"n\": {\"type\": \"integer\"}, \"option\": {\"type\": \"string\"}}, \"required\": [\"program\"], "
                      "\"additionalProperties\": false}",
                      false, "{\"program\": \"Computer Science\", \"n\": 7, \"option\": \"Software\"}");
    /* one string frame under cuts that take "," only and "}" only */
    check_schema_warm(v,
                      "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}, \"b\": {\"type\": \"string\"}}, "
                      "\"required\": [\"a\", \"b\"], \"additionalProperties\": false}",
                      false, "{\"a\": \"x\", \"b\": \"y\"}");
    /* frames that may end inside their run of characters, before a cut
     * that takes the run's own bytes: the words here run into each other,
     * and after "AB" a token such as "UIKit" is allowed only where the
     * first word ends inside it (unbounded: inside sets; bounded: whole
     * subtrees) */
    check_doc_warm(v, "root ::= w ws n\nw ::= [A-Z0-9_.,:;!?()+*/-]+\nws ::= [ ]?\nn ::= [A-Z] [a-z]+", "AB Kit", "words");
    check_doc_warm(v, "root ::= w ws n\nw ::= [A-Z0-9_.,:;!?()+*/-]{1,12}\nws ::= [ ]?\nn ::= [A-Z] [a-z]+", "AB Kit",
                   "bounded words");
    check_doc_warm(v, tl_grammar_json_gbnf(), "{\"k\": [\"a\", {\"k\": \"b\", \"n\": 1}], \"n\": 2}", "json (warm)");
    tl_grammar_vocab_free(v);
    free(text), free(len), free(kind);
    tok_free(tv);
    return test_finish();
}
