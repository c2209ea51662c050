/* text/tok_hf: tok_vocab from Hugging Face files: tokenizer.json (model
 * BPE) and GPT-2's encoder.json + vocab.bpe.
 *
 * tokenizer.json is parsed with cJSON and mapped onto the tok_vocab
 * pipeline: normalizer (NFC/NFD/NFKC/NFKD, Prepend, Replace with a string
 * pattern, Sequence), pre_tokenizer (Split, ByteLevel, Digits, Metaspace,
 * Whitespace, Sequence), model (BPE: vocab, merges as "a b" or [a, b],
 * byte_fallback, fuse_unk, ignore_merges, unk_token), added_tokens (with
 * special / lstrip / rstrip / single_word), post_processor (BOS/EOS from
 * TemplateProcessing or Bert/Roberta processing), decoder (Strip of the
 * leading space). Anything else is refused with TL_ERR_UNSUPPORTED naming
 * it, never silently approximated. A vocabulary using ByteLevel anywhere is
 * byte-level; otherwise it is SentencePiece-style (▁ and <0xNN>).
 * Owns: nothing past the returned vocab. Calls: cJSON, tok_vocab. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "text/tok_internal.h"

#define TOK_GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static tl_status tok_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tl_err(TL_ERR_IO, "tokenizer: cannot open '%s'", path);
    if (fseek(f, 0, SEEK_END) || ftell(f) < 0) {
        fclose(f);
        return tl_err(TL_ERR_IO, "tokenizer: cannot size '%s'", path);
    }
    long n = ftell(f);
    rewind(f);
    if (n > TOK_MAX_FILE_BYTES) {
        fclose(f);
        return tl_err(TL_ERR_FORMAT, "tokenizer: '%s' is larger than 1 GiB (TOK_MAX_FILE_BYTES)", path);
    }
    char *b = malloc((size_t)n + 1);
    if (!b) {
        fclose(f);
        return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory reading '%s'", path);
    }
    size_t r = fread(b, 1, (size_t)n, f);
    fclose(f);
    if (r != (size_t)n) {
        free(b);
        return tl_err(TL_ERR_IO, "tokenizer: short read on '%s'", path);
    }
    b[n] = 0;
    *out = b;
    *len = (size_t)n;
    return TL_OK;
}

static cJSON *tok_parse(const char *path, tl_status *st) {
    char *buf;
    size_t len;
    *st = tok_read_file(path, &buf, &len);
    if (*st) return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, len);
    if (!j) {
        const char *e = cJSON_GetErrorPtr();
        *st = tl_err(TL_ERR_FORMAT, "tokenizer: '%s' is not valid JSON (near byte %ld)", path,
                     e && e >= buf && e <= buf + len ? (long)(e - buf) : -1L);
    }
    free(buf);
    return j;
}

static const cJSON *tok_get(const cJSON *o, const char *k) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}
static const char *tok_get_str(const cJSON *o, const char *k) {
    const cJSON *x = tok_get(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}
static bool tok_get_bool(const cJSON *o, const char *k, bool def) {
    const cJSON *x = tok_get(o, k);
    return cJSON_IsBool(x) ? cJSON_IsTrue(x) : def;
}
static bool tok_is_int(const cJSON *x, double lo, double hi) {
    return cJSON_IsNumber(x) && x->valuedouble >= lo && x->valuedouble <= hi && x->valuedouble == (double)(int64_t)x->valuedouble;
}
static bool tok_type_is(const cJSON *o, const char *t) {
    const char *s = tok_get_str(o, "type");
    return s && !strcmp(s, t);
}

/* pattern: {"String": s} or {"Regex": r} */
static tl_status tok_pattern(const cJSON *o, const char **str, const char **re, const char *where) {
    const cJSON *p = tok_get(o, "pattern");
    *str = tok_get_str(p, "String");
    *re = tok_get_str(p, "Regex");
    if (!*str && !*re) return tl_err(TL_ERR_FORMAT, "tokenizer.json: %s without a String or Regex pattern", where);
    return TL_OK;
}

static tl_status tok_hf_normalizer(tok_vocab *v, const cJSON *n) {
    if (!n || cJSON_IsNull(n)) return TL_OK;
    const char *t = tok_get_str(n, "type");
    if (!t) return tl_err(TL_ERR_FORMAT, "tokenizer.json: normalizer without a type");
    tl_status st;
    if (!strcmp(t, "Sequence")) {
        const cJSON *a = tok_get(n, "normalizers"), *x;
        if (!cJSON_IsArray(a)) return tl_err(TL_ERR_FORMAT, "tokenizer.json: Sequence normalizer without a list");
        cJSON_ArrayForEach(x, a) if ((st = tok_hf_normalizer(v, x))) return st;
        return TL_OK;
    }
    if (!strcmp(t, "NFC")) return tok_vocab_add_norm(v, TOK_NORM_NFC, NULL, 0, NULL, 0);
    int uf = 0;
    if (!strcmp(t, "NFD")) uf = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    else if (!strcmp(t, "NFKC")) uf = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else if (!strcmp(t, "NFKD")) uf = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    if (uf) {
        if ((st = tok_vocab_add_norm(v, TOK_NORM_UNICODE, NULL, 0, NULL, 0))) return st;
        v->norm[v->n_norm - 1].uflags = uf;
        return TL_OK;
    }
    if (!strcmp(t, "Prepend")) {
        const char *p = tok_get_str(n, "prepend");
        if (!p) return tl_err(TL_ERR_FORMAT, "tokenizer.json: Prepend normalizer without 'prepend'");
        return tok_vocab_add_norm(v, TOK_NORM_PREPEND, p, strlen(p), NULL, 0);
    }
    if (!strcmp(t, "Replace")) {
        const char *s, *re, *c = tok_get_str(n, "content");
        if ((st = tok_pattern(n, &s, &re, "Replace normalizer"))) return st;
        if (re || !c) return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: Replace normalizer with a regex pattern is not supported");
        return tok_vocab_add_norm(v, TOK_NORM_REPLACE, s, strlen(s), c, strlen(c));
    }
    return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: normalizer '%s' is not supported", t);
}

static tl_status tok_metaspace(tok_vocab *v, const cJSON *p, bool *strip) {
    const char *r = tok_get_str(p, "replacement");
    if (!r) r = "\xE2\x96\x81";
    const char *scheme = tok_get_str(p, "prepend_scheme");
    if (!scheme) scheme = tok_get_bool(p, "add_prefix_space", true) ? "always" : "never";
    tl_status st = tok_vocab_add_norm(v, TOK_NORM_REPLACE, " ", 1, r, strlen(r));
    if (st) return st;
    if (!strcmp(scheme, "always")) st = tok_vocab_add_norm(v, TOK_NORM_PREPEND_IF_NOT, r, strlen(r), NULL, 0);
    else if (!strcmp(scheme, "first")) st = tok_vocab_add_norm(v, TOK_NORM_PREPEND_FIRST_IF_NOT, r, strlen(r), NULL, 0);
    else if (strcmp(scheme, "never"))
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: Metaspace prepend_scheme '%s'", scheme);
    if (st) return st;
    if (strip) *strip = strcmp(scheme, "never") != 0;
    if (tok_get_bool(p, "split", true))
        st = tok_vocab_add_split_literal(v, r, strlen(r), TOK_SPLIT_MERGED_NEXT, false);
    return st;
}

static tl_status tok_hf_pre(tok_vocab *v, const cJSON *p, bool first) {
    if (!p || cJSON_IsNull(p)) return TL_OK;
    const char *t = tok_get_str(p, "type");
    if (!t) return tl_err(TL_ERR_FORMAT, "tokenizer.json: pre_tokenizer without a type");
    tl_status st;
    if (!strcmp(t, "Sequence")) {
        const cJSON *a = tok_get(p, "pretokenizers"), *x;
        if (!cJSON_IsArray(a)) return tl_err(TL_ERR_FORMAT, "tokenizer.json: Sequence pre_tokenizer without a list");
        bool f = first;
        cJSON_ArrayForEach(x, a) {
            if ((st = tok_hf_pre(v, x, f))) return st;
            f = f && v->n_pre == 0;
        }
        return TL_OK;
    }
    if (!strcmp(t, "ByteLevel")) {
        if (tok_get_bool(p, "add_prefix_space", false)) {
            /* a prefix space per piece is only a per-segment normalizer when
             * nothing has split the segment before */
            if (!first || v->n_pre)
                return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: ByteLevel add_prefix_space after another split");
            if ((st = tok_vocab_add_norm(v, TOK_NORM_PREFIX_SPACE, NULL, 0, NULL, 0))) return st;
        }
        if (tok_get_bool(p, "use_regex", true))
            return tok_vocab_add_split(v, TOK_GPT2_RE, strlen(TOK_GPT2_RE), TOK_SPLIT_ISOLATED, false);
        return TL_OK;
    }
    if (!strcmp(t, "Digits")) {
        const char *re = tok_get_bool(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
        return tok_vocab_add_split(v, re, strlen(re), TOK_SPLIT_ISOLATED, false);
    }
    if (!strcmp(t, "Whitespace")) return tok_vocab_add_split(v, "\\w+|[^\\w\\s]+", 13, TOK_SPLIT_REMOVED, true);
    if (!strcmp(t, "WhitespaceSplit")) return tok_vocab_add_split(v, "\\s+", 3, TOK_SPLIT_REMOVED, false);
    if (!strcmp(t, "Metaspace")) {
        if (v->n_pre) return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: Metaspace after another split");
        return tok_metaspace(v, p, NULL);
    }
    if (!strcmp(t, "Split")) {
        const char *s, *re, *b = tok_get_str(p, "behavior");
        if ((st = tok_pattern(p, &s, &re, "Split pre_tokenizer"))) return st;
        tok_split_behavior beh;
        if (!b) return tl_err(TL_ERR_FORMAT, "tokenizer.json: Split without a behavior");
        if (!strcmp(b, "Isolated")) beh = TOK_SPLIT_ISOLATED;
        else if (!strcmp(b, "Removed")) beh = TOK_SPLIT_REMOVED;
        else if (!strcmp(b, "MergedWithPrevious")) beh = TOK_SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) beh = TOK_SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) beh = TOK_SPLIT_CONTIGUOUS;
        else return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: Split behavior '%s'", b);
        bool inv = tok_get_bool(p, "invert", false);
        if (re) return tok_vocab_add_split(v, re, strlen(re), beh, inv);
        return tok_vocab_add_split_literal(v, s, strlen(s), beh, inv);
    }
    return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer '%s' is not supported", t);
}

/* TemplateProcessing / Bert / Roberta: the specials around a single
 * sequence. */
static tl_status tok_hf_post(tok_vocab *v, const cJSON *p) {
    if (!p || cJSON_IsNull(p)) return TL_OK;
    const char *t = tok_get_str(p, "type");
    if (!t) return TL_OK;
    if (!strcmp(t, "Sequence")) {
        const cJSON *a = tok_get(p, "processors"), *x;
        tl_status st;
        cJSON_ArrayForEach(x, a) if ((st = tok_hf_post(v, x))) return st;
        return TL_OK;
    }
    if (!strcmp(t, "ByteLevel")) return TL_OK; /* offsets only */
    if (!strcmp(t, "BertProcessing") || !strcmp(t, "RobertaProcessing")) {
        const cJSON *cls = tok_get(p, "cls"), *sep = tok_get(p, "sep");
        const cJSON *ci = cJSON_GetArrayItem(cls, 1), *si = cJSON_GetArrayItem(sep, 1);
        if (tok_is_int(ci, 0, v->n - 1)) v->bos = (int32_t)ci->valuedouble, v->add_bos = true;
        if (tok_is_int(si, 0, v->n - 1)) v->eos = (int32_t)si->valuedouble, v->add_eos = true;
        return TL_OK;
    }
    if (strcmp(t, "TemplateProcessing"))
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: post_processor '%s' is not supported", t);
    const cJSON *single = tok_get(p, "single"), *specials = tok_get(p, "special_tokens"), *x;
    bool seen_seq = false;
    int n_before = 0, n_after = 0;
    cJSON_ArrayForEach(x, single) {
        if (tok_get(x, "Sequence")) {
            seen_seq = true;
            continue;
        }
        const char *name = tok_get_str(tok_get(x, "SpecialToken"), "id");
        if (!name) continue;
        const cJSON *ids = tok_get(tok_get(specials, name), "ids");
        if (cJSON_GetArraySize(ids) != 1)
            return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: TemplateProcessing special '%s' is not one token", name);
        const cJSON *id = cJSON_GetArrayItem(ids, 0);
        if (!tok_is_int(id, 0, v->n - 1))
            return tl_err(TL_ERR_FORMAT, "tokenizer.json: TemplateProcessing special '%s' has a bad id", name);
        if (!seen_seq) {
            v->bos = (int32_t)id->valuedouble, v->add_bos = true;
            n_before++;
        } else {
            v->eos = (int32_t)id->valuedouble, v->add_eos = true;
            n_after++;
        }
    }
    if (n_before > 1 || n_after > 1)
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: TemplateProcessing adds %d tokens before / %d after", n_before,
                      n_after);
    return TL_OK;
}

static bool tok_json_has_type(const cJSON *o, const char *t) {
    if (!o) return false;
    if (cJSON_IsObject(o) && tok_type_is(o, t)) return true;
    const cJSON *x;
    cJSON_ArrayForEach(x, o) if ((cJSON_IsObject(x) || cJSON_IsArray(x)) && tok_json_has_type(x, t)) return true;
    return false;
}

static int tok_decoder_strips(const cJSON *d) {
    if (!d) return 0;
    if (tok_type_is(d, "Strip")) {
        const char *c = tok_get_str(d, "content");
        const cJSON *s = tok_get(d, "start");
        return c && !strcmp(c, " ") && tok_is_int(s, 1, 1e9) ? 1 : 0;
    }
    if (tok_type_is(d, "Metaspace")) {
        const char *scheme = tok_get_str(d, "prepend_scheme");
        if (!scheme) return tok_get_bool(d, "add_prefix_space", true) ? 2 : 0;
        return strcmp(scheme, "never") != 0 ? 2 : 0;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, tok_get(d, "decoders")) {
        int r = tok_decoder_strips(x);
        if (r) return r;
    }
    return 0;
}

static const char *tok_cfg_token(const cJSON *cfg, const char *k) {
    const cJSON *x = tok_get(cfg, k);
    if (cJSON_IsString(x)) return x->valuestring;
    return tok_get_str(x, "content");
}

static tl_status tok_hf_build(const cJSON *j, const cJSON *cfg, tok_vocab **out) {
    *out = NULL;
    const cJSON *model = tok_get(j, "model");
    const char *mt = tok_get_str(model, "type");
    const cJSON *vocab = tok_get(model, "vocab"), *merges = tok_get(model, "merges");
    if (!mt && cJSON_IsObject(vocab) && cJSON_IsArray(merges)) mt = "BPE";
    if (!mt || strcmp(mt, "BPE"))
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: model type '%s' is not supported (BPE only)", mt ? mt : "?");
    if (!cJSON_IsObject(vocab)) return tl_err(TL_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    const cJSON *drop = tok_get(model, "dropout");
    if (cJSON_IsNumber(drop) && drop->valuedouble > 0)
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout is not supported");
    const char *csp = tok_get_str(model, "continuing_subword_prefix"), *ews = tok_get_str(model, "end_of_word_suffix");
    if ((csp && *csp) || (ews && *ews))
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer.json: continuing_subword_prefix / end_of_word_suffix");
    /* size: the largest id in vocab or added_tokens */
    const cJSON *added = tok_get(j, "added_tokens"), *x;
    double maxid = -1;
    int64_t n_stated = 0;
    cJSON_ArrayForEach(x, vocab) {
        if (!tok_is_int(x, 0, TOK_MAX_VOCAB - 1))
            return tl_err(TL_ERR_FORMAT, "tokenizer.json: vocab entry '%.64s' has a bad id (0..%d, TOK_MAX_VOCAB)",
                          x->string, TOK_MAX_VOCAB - 1);
        if (x->valuedouble > maxid) maxid = x->valuedouble;
        n_stated++;
    }
    cJSON_ArrayForEach(x, added) {
        const cJSON *id = tok_get(x, "id");
        if (!tok_is_int(id, 0, TOK_MAX_VOCAB - 1) || !tok_get_str(x, "content"))
            return tl_err(TL_ERR_FORMAT, "tokenizer.json: an added token has a bad id (0..%d, TOK_MAX_VOCAB) or no content",
                          TOK_MAX_VOCAB - 1);
        if (id->valuedouble > maxid) maxid = id->valuedouble;
        n_stated++;
    }
    if (!tok_ids_dense((int64_t)maxid + 1, n_stated))
        return tl_err(TL_ERR_FORMAT, "tokenizer.json: ids up to %.0f for %lld tokens: more than half the ids would be "
                                     "unused (tok_ids_dense)", maxid, (long long)n_stated);
    bool byte_level = tok_json_has_type(tok_get(j, "pre_tokenizer"), "ByteLevel") ||
                      tok_json_has_type(tok_get(j, "decoder"), "ByteLevel");
    tok_vocab *v;
    tl_status st = tok_vocab_alloc(byte_level ? TOK_KIND_BYTE_LEVEL : TOK_KIND_SPM, (int32_t)maxid + 1, &v);
    if (st) return st;
    snprintf(v->name, sizeof v->name, "%s", byte_level ? "hf bpe (byte-level)" : "hf bpe (spm)");
    snprintf(v->pre_name, sizeof v->pre_name, "tokenizer.json");
    /* which ids are added tokens, and how */
    uint8_t *kind = calloc((size_t)v->n, 1); /* 0 vocab, 1 added special, 2 added plain, 4 set */
    if (!kind) {
        tok_free(v);
        return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    }
    cJSON_ArrayForEach(x, added) {
        int32_t id = (int32_t)tok_get(x, "id")->valuedouble;
        const char *c = tok_get_str(x, "content");
        if (kind[id] & 4) continue;
        kind[id] = (tok_get_bool(x, "special", false) ? 1 : 2) | 4;
        st = tok_vocab_set(v, id, c, strlen(c), tok_get_bool(x, "special", false) ? TOK_ATTR_CONTROL : TOK_ATTR_USER);
        if (st) goto fail;
    }
    cJSON_ArrayForEach(x, vocab) {
        int32_t id = (int32_t)x->valuedouble;
        if (kind[id] & 4) continue; /* the added token's entry wins */
        kind[id] |= 4;
        const char *s = x->string;
        size_t l = strlen(s);
        uint8_t attr = TOK_ATTR_NORMAL;
        if (!byte_level && l == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') attr = TOK_ATTR_BYTE;
        if ((st = tok_vocab_set(v, id, s, l, attr))) goto fail;
    }
    for (int32_t i = 0; i < v->n; i++)
        if (!(kind[i] & 4) && (st = tok_vocab_set(v, i, "", 0, TOK_ATTR_UNUSED))) goto fail;
    if ((st = tok_vocab_index(v))) goto fail;
    if (cJSON_IsArray(merges)) {
        int32_t rank = 0;
        cJSON_ArrayForEach(x, merges) {
            const char *a, *b;
            size_t al, bl;
            if (cJSON_IsString(x)) {
                const char *s = x->valuestring, *sp = strchr(s + (s[0] ? 1 : 0), ' ');
                if (!sp) {
                    st = tl_err(TL_ERR_FORMAT, "tokenizer.json: merge %d '%.64s' has no space", (int)rank, s);
                    goto fail;
                }
                a = s, al = (size_t)(sp - s), b = sp + 1, bl = strlen(sp + 1);
            } else if (cJSON_GetArraySize(x) == 2 && cJSON_IsString(cJSON_GetArrayItem(x, 0)) &&
                       cJSON_IsString(cJSON_GetArrayItem(x, 1))) {
                a = cJSON_GetArrayItem(x, 0)->valuestring, al = strlen(a);
                b = cJSON_GetArrayItem(x, 1)->valuestring, bl = strlen(b);
            } else {
                st = tl_err(TL_ERR_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [a, b]", (int)rank);
                goto fail;
            }
            /* merges are resolved against model.vocab; an added token's
             * text is looked up the same way (HF keeps both in one map) */
            if ((st = tok_vocab_add_merge(v, a, al, b, bl, rank))) goto fail;
            rank++;
        }
    }
    v->byte_fallback = tok_get_bool(model, "byte_fallback", false);
    v->fuse_unk = tok_get_bool(model, "fuse_unk", false);
    v->ignore_merges = tok_get_bool(model, "ignore_merges", false);
    const char *unk = tok_get_str(model, "unk_token");
    if (unk) v->unk_id = tok_find(v, unk, strlen(unk));
    if ((st = tok_hf_normalizer(v, tok_get(j, "normalizer")))) goto fail;
    if ((st = tok_hf_pre(v, tok_get(j, "pre_tokenizer"), true))) goto fail;
    if ((st = tok_hf_post(v, tok_get(j, "post_processor")))) goto fail;
    v->strip_leading_space = tok_decoder_strips(tok_get(j, "decoder"));
    cJSON_ArrayForEach(x, added) {
        int32_t id = (int32_t)tok_get(x, "id")->valuedouble;
        uint8_t fl = 0;
        if (tok_get_bool(x, "special", false)) fl |= TOK_ADD_SPECIAL;
        if (tok_get_bool(x, "lstrip", false)) fl |= TOK_ADD_LSTRIP;
        if (tok_get_bool(x, "rstrip", false)) fl |= TOK_ADD_RSTRIP;
        if (tok_get_bool(x, "single_word", false)) fl |= TOK_ADD_SINGLE_WORD;
        if (tok_get_bool(x, "normalized", !(fl & TOK_ADD_SPECIAL))) fl |= TOK_ADD_NORMALIZED;
        /* HF matches a normalized token's normalized content after the
         * normalizer has run */
        char *pat = NULL;
        size_t plen = 0;
        if ((fl & TOK_ADD_NORMALIZED) && v->n_norm) {
            const char *c = tok_get_str(x, "content");
            if ((st = tok_normalize_text(v, c, strlen(c), &pat, &plen))) goto fail;
        }
        st = tok_vocab_add_added(v, id, fl, pat, plen);
        free(pat);
        if (st) goto fail;
    }
    /* bos/eos names from tokenizer_config.json when the json lacks them */
    const char *eos = tok_cfg_token(cfg, "eos_token"), *bos = tok_cfg_token(cfg, "bos_token");
    if (eos && v->eos < 0) v->eos = tok_find(v, eos, strlen(eos));
    if (bos && v->bos < 0) v->bos = tok_find(v, bos, strlen(bos));
    if ((st = tok_vocab_precompute(v))) goto fail;
    free(kind);
    tok_vocab_finish(v, NULL, 0);
    *out = v;
    return TL_OK;
fail:
    free(kind);
    tok_free(v);
    return st;
}

static bool tok_ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static bool tok_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

tl_status tok_load_hf_json(const char *path, tok_vocab **out) {
    *out = NULL;
    if (!path) return tl_err(TL_ERR_INVALID, "tok_load_hf_json: no path");
    struct stat sb;
    if (stat(path, &sb)) return tl_err(TL_ERR_IO, "tokenizer: cannot open '%s'", path);
    size_t pl = strlen(path);
    char *a = malloc(pl + 32), *b = malloc(pl + 32);
    if (!a || !b) {
        free(a);
        free(b);
        return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    }
    tl_status st;
    const char *json = path;
    /* dir: the folder; file: the folder the file is in */
    size_t dl = pl;
    if (S_ISDIR(sb.st_mode)) {
        snprintf(a, pl + 32, "%s/tokenizer.json", path);
        if (tok_exists(a)) json = a;
        else {
            snprintf(a, pl + 32, "%s/encoder.json", path);
            snprintf(b, pl + 32, "%s/vocab.bpe", path);
            st = tok_load_gpt2_files(a, b, out);
            free(a);
            free(b);
            return st;
        }
    } else {
        while (dl > 0 && path[dl - 1] != '/') dl--;
        if (tok_ends_with(path, "encoder.json")) {
            snprintf(b, pl + 32, "%.*svocab.bpe", (int)dl, path);
            st = tok_load_gpt2_files(path, b, out);
            free(a);
            free(b);
            return st;
        }
    }
    cJSON *j = tok_parse(json, &st), *cfg = NULL;
    if (j) {
        /* tokenizer_config.json beside it (optional) */
        if (json == a) snprintf(b, pl + 32, "%s/tokenizer_config.json", path);
        else snprintf(b, pl + 32, "%.*stokenizer_config.json", (int)dl, path);
        if (tok_exists(b)) {
            tl_status st2;
            cfg = tok_parse(b, &st2); /* a broken config only loses eos */
        }
        st = tok_hf_build(j, cfg, out);
        if (st) tl_err_prefix(st, "%s: ", json);
    }
    cJSON_Delete(j);
    cJSON_Delete(cfg);
    free(a);
    free(b);
    return st;
}

tl_status tok_load_gpt2_files(const char *encoder_json, const char *vocab_bpe, tok_vocab **out) {
    *out = NULL;
    tl_status st;
    cJSON *enc = tok_parse(encoder_json, &st);
    if (!enc) return st;
    char *bpe;
    size_t blen;
    if ((st = tok_read_file(vocab_bpe, &bpe, &blen))) {
        cJSON_Delete(enc);
        return st;
    }
    /* reuse the tokenizer.json path: build the equivalent document */
    cJSON *j = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(j, "model");
    cJSON *merges = NULL;
    if (j && model) {
        cJSON_AddStringToObject(model, "type", "BPE");
        cJSON_AddItemReferenceToObject(model, "vocab", enc);
        merges = cJSON_AddArrayToObject(model, "merges");
        cJSON *pre = cJSON_AddObjectToObject(j, "pre_tokenizer");
        cJSON_AddStringToObject(pre, "type", "ByteLevel");
        cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
        cJSON_AddBoolToObject(pre, "use_regex", 1);
        cJSON *added = cJSON_AddArrayToObject(j, "added_tokens");
        const cJSON *eot = cJSON_GetObjectItemCaseSensitive(enc, "<|endoftext|>");
        if (eot && cJSON_IsNumber(eot)) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", eot->valuedouble);
            cJSON_AddStringToObject(t, "content", "<|endoftext|>");
            cJSON_AddBoolToObject(t, "special", 1);
            cJSON_AddBoolToObject(t, "normalized", 0);
            cJSON_AddItemToArray(added, t);
        }
    }
    if (!merges) st = tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    /* vocab.bpe: "#version" line, then "a b" per line */
    for (size_t i = 0; !st && i < blen;) {
        size_t e = i;
        while (e < blen && bpe[e] != '\n') e++;
        size_t le = e;
        if (le > i && bpe[le - 1] == '\r') le--;
        /* only the first line may be the "#version" header: merges such
         * as "# #" start with '#' too */
        if (le > i && !(i == 0 && le - i >= 8 && !memcmp(bpe, "#version", 8))) {
            bpe[le] = 0;
            cJSON *s = cJSON_CreateString(bpe + i);
            if (!s) st = tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
            else cJSON_AddItemToArray(merges, s);
        }
        i = e + 1;
    }
    free(bpe);
    if (!st) {
        st = tok_hf_build(j, NULL, out);
        if (st) tl_err_prefix(st, "%s: ", vocab_bpe);
    }
    if (!st) {
        (*out)->eos = tok_find(*out, "<|endoftext|>", 13);
        snprintf((*out)->name, sizeof (*out)->name, "gpt2 files (byte-level)");
        tok_vocab_finish(*out, NULL, 0);
    }
    cJSON_Delete(j);
    cJSON_Delete(enc);
    return st;
}
