/* convert/hf_tokenizer: tokenizer.json (+ tokenizer_config.json,
 * config.json, chat_template.jinja) -> tokenizer.ggml.* GGUF keys.
 *
 * What is written follows llama.cpp's converter (gguf-py SpecialVocab and
 * the gpt2 / llama-hf vocab paths):
 *  - byte-level BPE (a ByteLevel pre-tokenizer or decoder): model "gpt2",
 *    the merges, and a pre-tokenizer name. llama.cpp picks the name by
 *    hashing the encoding of a test text; we recognise the pre_tokenizer
 *    itself (GPT-2's ByteLevel regex -> "gpt-2", Digits + ByteLevel ->
 *    "smollm", the Llama-3 / Qwen2 split regexes -> "llama-bpe" / "qwen2"),
 *    the names tallow's GGUF tokenizer and llama.cpp both know;
 *  - SentencePiece-style BPE (byte_fallback, no ByteLevel): model "llama",
 *    tokenizer.ggml.add_space_prefix from the normalizer's Prepend("▁") or
 *    Metaspace. llama.cpp's llama-hf path writes -1000 for every score,
 *    which loses the merge order; we write score = -(rank of the first merge
 *    that builds the token) (0 for tokens no merge builds, -1000 for
 *    control / user-defined / padding tokens), so score-driven SentencePiece
 *    BPE (llama.cpp) ranks pairs like HF does, and we also write the merges
 *    themselves, which tallow's loader prefers when present (exact HF order).
 *  - token types: added tokens that are special, or whose text looks like a
 *    control token (<|...|>, <unused...>, <mask>, ...), are CONTROL (3);
 *    other added tokens USER_DEFINED (4) (SentencePiece ones with ▁ written
 *    as a space, as llama.cpp does); <0xNN> pieces of a SentencePiece vocab
 *    BYTE (6); ids no entry covers "[PAD<id>]" UNUSED (5); the rest NORMAL;
 *  - config.json's vocab_size sets the token count: missing ids are padded,
 *    added tokens past it (no embedding row) are dropped, as llama.cpp does;
 *  - special ids: tokenizer_config.json's <type>_token text resolved to the
 *    added token with that content, then config.json's <type>_token_id for
 *    types still unset; add_bos/add_eos from the TemplateProcessing
 *    post-processor, overridden by tokenizer_config.json's add_*_token;
 *  - tokenizer.chat_template from tokenizer_config.json (a list of named
 *    templates gives tokenizer.chat_template.<name> too), else
 *    chat_template.jinja / chat_template.json beside it.
 * Owns: nothing past the call. Calls: cJSON, io/gguf writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/cvt_internal.h"
#include "text/tok_internal.h" /* tok_strmap: token text -> id */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define RE_LLAMA3                                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"     \
    "\\s+(?!\\S)|\\s+"

static const cJSON *jget(const cJSON *o, const char *k) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}
static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *x = jget(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}
static bool jbool(const cJSON *o, const char *k, bool def) {
    const cJSON *x = jget(o, k);
    return cJSON_IsBool(x) ? cJSON_IsTrue(x) : def;
}
static bool type_is(const cJSON *o, const char *t) {
    const char *s = jstr(o, "type");
    return s && !strcmp(s, t);
}
static bool has_type(const cJSON *o, const char *t) {
    if (!o) return false;
    if (cJSON_IsObject(o) && type_is(o, t)) return true;
    const cJSON *x;
    cJSON_ArrayForEach(x, o) if ((cJSON_IsObject(x) || cJSON_IsArray(x)) && has_type(x, t)) return true;
    return false;
}
static bool is_id(const cJSON *x, int64_t n) {
    return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < (double)n &&
           x->valuedouble == (double)(int64_t)x->valuedouble;
}

/* llama.cpp's does_token_look_special: added tokens some models forget to
 * mark special */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(t, "<\xEF\xBD\x9C", 4) && !strcmp(t + n - 4, "\xEF\xBD\x9C>")) return true; /* <｜ ｜> */
    if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

static bool is_byte_piece(const char *s) {
    static const char hx[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && strchr(hx, s[3]) && strchr(hx, s[4]);
}

/* The flat list of pre-tokenizers. */
static int pre_list(const cJSON *p, const cJSON **out, int max) {
    if (!p || cJSON_IsNull(p)) return 0;
    if (type_is(p, "Sequence")) {
        int n = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, jget(p, "pretokenizers")) {
            int k = pre_list(x, out + n, max - n);
            if (k < 0) return -1;
            n += k;
        }
        return n;
    }
    if (max < 1) return -1;
    out[0] = p;
    return 1;
}

static tl_status pre_name(const cJSON *j, const char *path, const char **name) {
    const cJSON *pt[8];
    int n = pre_list(jget(j, "pre_tokenizer"), pt, 8);
    const cJSON *norm = jget(j, "normalizer");
    bool nfc = type_is(norm, "NFC"), no_norm = !norm || cJSON_IsNull(norm);
    *name = NULL;
    const cJSON *bl = n > 0 && type_is(pt[n - 1], "ByteLevel") ? pt[n - 1] : NULL;
    if (bl && jbool(bl, "add_prefix_space", false))
        return tl_err(TL_ERR_UNSUPPORTED, "convert: %s: ByteLevel add_prefix_space is not supported", path);
    if (n == 1 && bl && jbool(bl, "use_regex", true) && no_norm) *name = "gpt-2";
    else if (n == 2 && bl && jbool(bl, "use_regex", true) && type_is(pt[0], "Digits") &&
             jbool(pt[0], "individual_digits", false) && no_norm)
        *name = "smollm";
    else if (n == 2 && bl && !jbool(bl, "use_regex", true) && type_is(pt[0], "Split") &&
             !jbool(pt[0], "invert", false) && jstr(pt[0], "behavior") && !strcmp(jstr(pt[0], "behavior"), "Isolated")) {
        const char *re = jstr(jget(pt[0], "pattern"), "Regex");
        if (re && !strcmp(re, RE_LLAMA3) && no_norm) *name = "llama-bpe";
        else if (re && !strcmp(re, RE_QWEN2) && nfc) *name = "qwen2";
    }
    if (!*name)
        return tl_err(TL_ERR_UNSUPPORTED,
                      "convert: %s: byte-level pre-tokenizer not recognised (known: GPT-2 ByteLevel, SmolLM "
                      "Digits+ByteLevel, Llama-3 and Qwen2 split regexes)",
                      path);
    return TL_OK;
}

/* content of a tokenizer_config.json "<typ>_token" entry (string or {content}) */
static const char *tc_token(const cJSON *tc, const char *typ) {
    char k[32];
    snprintf(k, sizeof k, "%s_token", typ);
    const cJSON *x = jget(tc, k);
    if (cJSON_IsString(x)) return x->valuestring;
    return jstr(x, "content");
}

#define N_SPECIAL 8
static const char *const sp_types[N_SPECIAL] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot"};
static const char *const sp_keys[N_SPECIAL] = {
    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
    "tokenizer.ggml.mask_token_id",    "tokenizer.ggml.eot_token_id"};

typedef struct special_state {
    int64_t id[N_SPECIAL];  /* -1 unset */
    int add[3];             /* bos, eos, sep: -1 unset, 0/1 */
    const char *text[N_SPECIAL]; /* token text per type, from tokenizer_config (may be rewritten) */
} special_state;

static tl_status write_specials(gguf_writer *w, const cJSON *j, const cJSON *tc, const cJSON *config, int64_t n) {
    special_state ss;
    for (int i = 0; i < N_SPECIAL; i++) ss.id[i] = -1, ss.text[i] = tc ? tc_token(tc, sp_types[i]) : NULL;
    ss.add[0] = ss.add[1] = ss.add[2] = -1;
    const char **bos = &ss.text[0], **eos = &ss.text[1], **sep = &ss.text[3], **cls = &ss.text[5];
    if (!*bos && *cls && tc) *bos = *cls;
    if (!*eos && *sep && tc) *eos = *sep;
    bool have_eot_type = false;
    const cJSON *post = jget(j, "post_processor");
    if (cJSON_IsObject(post)) {
        const cJSON *procs = jget(post, "processors"), *p;
        const cJSON *one[1] = {post};
        int np = cJSON_IsArray(procs) ? cJSON_GetArraySize(procs) : 1;
        for (int i = 0; i < np; i++) {
            p = cJSON_IsArray(procs) ? cJSON_GetArrayItem(procs, i) : one[0];
            if (type_is(p, "RobertaProcessing")) {
                ss.add[0] = ss.add[1] = ss.add[2] = 1;
                continue;
            }
            if (!type_is(p, "TemplateProcessing")) continue;
            const cJSON *single = jget(p, "single");
            int ns = cJSON_GetArraySize(single);
            if (ns <= 1) continue;
            const char *first = jstr(jget(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id");
            const char *last = jstr(jget(cJSON_GetArrayItem(single, ns - 1), "SpecialToken"), "id");
            if (first) {
                if (!tc) *bos = first;
                ss.add[0] = (*bos && !strcmp(first, *bos)) || (*cls && !strcmp(first, *cls));
            }
            if (last) {
                if (!tc) *eos = last;
                else if (!*eos || strcmp(last, *eos)) {
                    /* the template ends with another token: it becomes EOS, the
                     * configured one EOT (as llama.cpp does) */
                    if (!have_eot_type) ss.text[7] = *eos, have_eot_type = true;
                    *eos = last;
                }
                ss.add[1] = *eos && !strcmp(last, *eos);
            }
        }
    }
    const cJSON *added = jget(j, "added_tokens");
    for (int t = 0; t < N_SPECIAL; t++) {
        if (t == 7 && !have_eot_type) continue;
        if (tc && t < 7 && (t == 0 || t == 1 || t == 3)) {
            char k[32];
            snprintf(k, sizeof k, "add_%s_token", sp_types[t]);
            const cJSON *a = jget(tc, k);
            if (cJSON_IsBool(a)) ss.add[t == 0 ? 0 : t == 1 ? 1 : 2] = cJSON_IsTrue(a);
        }
        if (!tc || !ss.text[t]) continue;
        const cJSON *x;
        cJSON_ArrayForEach(x, added) {
            const char *c = jstr(x, "content");
            if (c && !strcmp(c, ss.text[t])) {
                const cJSON *id = jget(x, "id");
                if (is_id(id, n) && ss.id[t] < 0) ss.id[t] = (int64_t)id->valuedouble;
                break;
            }
        }
    }
    if (config) {
        const cJSON *txt = jget(config, "text_config");
        for (int t = 0; t < 7; t++) {
            if (ss.id[t] >= 0) continue;
            char k[32];
            snprintf(k, sizeof k, "%s_token_id", sp_types[t]);
            const cJSON *x = jget(config, k);
            if (!x) x = jget(txt, k);
            if (is_id(x, n)) ss.id[t] = (int64_t)x->valuedouble;
        }
    }
    tl_status s = TL_OK;
    for (int t = 0; t < N_SPECIAL && !s; t++)
        if (ss.id[t] >= 0) s = gguf_writer_set_u32(w, sp_keys[t], (uint32_t)ss.id[t]);
    static const char *const add_keys[3] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                            "tokenizer.ggml.add_sep_token"};
    for (int t = 0; t < 3 && !s; t++)
        if (ss.add[t] >= 0) s = gguf_writer_set_bool(w, add_keys[t], ss.add[t] == 1);
    return s;
}

static tl_status write_chat_template(gguf_writer *w, const cJSON *tc, const char *dir) {
    if (!tc) return TL_OK;
    const cJSON *ct = jget(tc, "chat_template");
    if (cJSON_IsString(ct)) return gguf_writer_set_str(w, "tokenizer.chat_template", ct->valuestring);
    if (cJSON_IsArray(ct)) {
        const cJSON *x;
        tl_status s = TL_OK;
        cJSON_ArrayForEach(x, ct) {
            const char *name = jstr(x, "name"), *tpl = jstr(x, "template");
            if (!name || !tpl) continue;
            char key[256];
            if (!strcmp(name, "default")) snprintf(key, sizeof key, "tokenizer.chat_template");
            else snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
            if ((s = gguf_writer_set_str(w, key, tpl))) return s;
        }
        return TL_OK;
    }
    /* chat_template.jinja, then chat_template.json */
    char *p = cvt_path_join(dir, "chat_template.jinja");
    if (!p) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    tl_status s = TL_OK;
    if (cvt_file_exists(p)) {
        FILE *f = fopen(p, "rb");
        char *buf = NULL;
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
        if (f && n >= 0 && n < (1L << 28) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
            fread(buf, 1, (size_t)n, f) == (size_t)n) {
            s = gguf_writer_set_strn(w, "tokenizer.chat_template", buf, (uint64_t)n);
        } else {
            s = tl_err(TL_ERR_IO, "convert: cannot read '%s'", p);
        }
        if (f) fclose(f);
        free(buf);
        free(p);
        return s;
    }
    free(p);
    p = cvt_path_join(dir, "chat_template.json");
    if (!p) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    if (cvt_file_exists(p)) {
        cJSON *cj;
        if (!(s = cvt_read_json(p, &cj))) {
            const char *t = jstr(cj, "chat_template");
            if (t) s = gguf_writer_set_str(w, "tokenizer.chat_template", t);
            cJSON_Delete(cj);
        }
    }
    free(p);
    return s;
}

tl_status cvt_tokenizer_write(gguf_writer *w, const char *dir, const cJSON *config, int64_t n_vocab_cfg,
                              int64_t *n_tokens) {
    char *tpath = cvt_path_join(dir, "tokenizer.json"), *cpath = cvt_path_join(dir, "tokenizer_config.json");
    cJSON *j = NULL, *tc = NULL;
    char **tokens = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    char **merges = NULL;
    tok_strmap map = {0};
    char *cat = NULL;
    size_t cat_cap = 0;
    int64_t n = 0, n_merges = 0;
    tl_status s = TL_OK;
    if (!tpath || !cpath) {
        s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
        goto done;
    }
    if (!cvt_file_exists(tpath)) {
        s = tl_err(TL_ERR_NOT_FOUND, "convert: tokenizer file '%s' is missing", tpath);
        goto done;
    }
    if ((s = cvt_read_json(tpath, &j))) goto done;
    if (cvt_file_exists(cpath) && (s = cvt_read_json(cpath, &tc))) goto done;
    const cJSON *model = jget(j, "model"), *vocab = jget(model, "vocab"), *jm = jget(model, "merges"), *x;
    const char *mt = jstr(model, "type");
    if (!mt && cJSON_IsObject(vocab) && cJSON_IsArray(jm)) mt = "BPE";
    if (!mt || strcmp(mt, "BPE")) {
        s = tl_err(TL_ERR_UNSUPPORTED, "convert: %s: tokenizer model '%s' is not supported (BPE only)", tpath,
                   mt ? mt : "?");
        goto done;
    }
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(jm)) {
        s = tl_err(TL_ERR_FORMAT, "convert: %s: model.vocab must be an object and model.merges a list", tpath);
        goto done;
    }
    bool byte_level = has_type(jget(j, "pre_tokenizer"), "ByteLevel") || has_type(jget(j, "decoder"), "ByteLevel");
    bool spm = !byte_level && jbool(model, "byte_fallback", false);
    if (!byte_level && !spm) {
        s = tl_err(TL_ERR_UNSUPPORTED,
                   "convert: %s: BPE tokenizer is neither byte-level (ByteLevel) nor SentencePiece-style "
                   "(byte_fallback)",
                   tpath);
        goto done;
    }
    const char *pre = "default";
    if (byte_level && (s = pre_name(j, tpath, &pre))) goto done;
    /* size: largest id + 1, padded to config.json's vocab_size */
    int64_t maxid = -1, n_stated = 0;
    const cJSON *added = jget(j, "added_tokens");
    cJSON_ArrayForEach(x, vocab) {
        if (!is_id(x, TOK_MAX_VOCAB)) {
            s = tl_err(TL_ERR_FORMAT, "convert: %s: vocab entry '%.64s' has a bad id (0..%d, TOK_MAX_VOCAB)", tpath,
                       x->string, TOK_MAX_VOCAB - 1);
            goto done;
        }
        if ((int64_t)x->valuedouble > maxid) maxid = (int64_t)x->valuedouble;
        n_stated++;
    }
    cJSON_ArrayForEach(x, added) {
        if (!is_id(jget(x, "id"), TOK_MAX_VOCAB) || !jstr(x, "content")) {
            s = tl_err(TL_ERR_FORMAT, "convert: %s: an added token has a bad id (0..%d, TOK_MAX_VOCAB) or no content",
                       tpath, TOK_MAX_VOCAB - 1);
            goto done;
        }
        int64_t id = (int64_t)jget(x, "id")->valuedouble;
        /* added tokens past config.json's vocab_size have no embedding row:
         * llama.cpp drops them (Gemma 3's <image_soft_token>) */
        if (n_vocab_cfg > 0 && id >= n_vocab_cfg) continue;
        n_stated++;
        if (id > maxid) maxid = id;
    }
    n = maxid + 1;
    if (n < 1) {
        s = tl_err(TL_ERR_FORMAT, "convert: %s: empty vocabulary", tpath);
        goto done;
    }
    if (n_vocab_cfg > 0 && n_vocab_cfg < n) {
        s = tl_err(TL_ERR_FORMAT, "convert: %s has token id %lld but config.json's vocab_size is %lld", tpath,
                   (long long)maxid, (long long)n_vocab_cfg);
        goto done;
    }
    if (n_vocab_cfg > n) n = n_vocab_cfg;
    /* padding and holes are allowed, but memory must follow the input */
    if (!tok_ids_dense(n, n_stated)) {
        s = tl_err(TL_ERR_FORMAT, "convert: %s: %lld token slots (largest id or config.json's vocab_size) for %lld "
                                  "tokens: more than half would be padding (tok_ids_dense)",
                   tpath, (long long)n, (long long)n_stated);
        goto done;
    }
    tokens = calloc((size_t)n, sizeof *tokens);
    types = calloc((size_t)n, sizeof *types);
    scores = calloc((size_t)n, sizeof *scores);
    if (!tokens || !types || !scores) {
        s = tl_err(TL_ERR_NOMEM, "convert: out of memory (%lld tokens)", (long long)n);
        goto done;
    }
    /* added tokens first: their entry wins over the vocab's */
    cJSON_ArrayForEach(x, added) {
        int64_t id = (int64_t)jget(x, "id")->valuedouble;
        if (id >= n || tokens[id]) continue;
        const char *c = jstr(x, "content");
        bool special = jbool(x, "special", false);
        int tt = special || looks_special(c) ? TT_CONTROL : TT_USER;
        size_t cl = strlen(c);
        char *t = malloc(cl + 1);
        if (!t) {
            s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
            goto done;
        }
        if (spm && tt == TT_USER) { /* ▁ -> ' ' as llama.cpp pre-normalizes user-defined pieces */
            size_t o = 0;
            for (size_t i = 0; i < cl;) {
                if (i + 3 <= cl && !memcmp(c + i, "\xE2\x96\x81", 3)) t[o++] = ' ', i += 3;
                else t[o++] = c[i++];
            }
            t[o] = 0;
        } else {
            memcpy(t, c, cl + 1);
        }
        tokens[id] = t;
        types[id] = tt;
        scores[id] = -1000.0f;
    }
    cJSON_ArrayForEach(x, vocab) {
        int64_t id = (int64_t)x->valuedouble;
        if (tokens[id]) continue;
        if (!(tokens[id] = strdup(x->string))) {
            s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
            goto done;
        }
        types[id] = spm && is_byte_piece(x->string) ? TT_BYTE : TT_NORMAL;
    }
    for (int64_t i = 0; i < n; i++)
        if (!tokens[i]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
            if (!(tokens[i] = strdup(pad))) {
                s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
                goto done;
            }
            types[i] = TT_UNUSED;
            scores[i] = -1000.0f;
        }
    /* merges as "a b" strings */
    n_merges = cJSON_GetArraySize(jm);
    merges = calloc((size_t)(n_merges ? n_merges : 1), sizeof *merges);
    if (!merges || (s = tok_strmap_init(&map, (uint32_t)cJSON_GetArraySize(vocab)))) {
        if (!s) s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
        goto done;
    }
    cJSON_ArrayForEach(x, vocab) {
        if ((s = tok_strmap_put(&map, x->string, strlen(x->string), (int32_t)x->valuedouble, false))) goto done;
    }
    int64_t r = 0;
    cJSON_ArrayForEach(x, jm) {
        const char *a, *b;
        size_t al, bl;
        if (cJSON_IsString(x)) {
            const char *m = x->valuestring, *sp = strchr(m + (m[0] ? 1 : 0), ' ');
            if (!sp) {
                s = tl_err(TL_ERR_FORMAT, "convert: %s: merge %lld '%.64s' has no space", tpath, (long long)r, m);
                goto done;
            }
            a = m, al = (size_t)(sp - m), b = sp + 1, bl = strlen(sp + 1);
        } else if (cJSON_GetArraySize(x) == 2 && cJSON_IsString(cJSON_GetArrayItem(x, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(x, 1))) {
            a = cJSON_GetArrayItem(x, 0)->valuestring, al = strlen(a);
            b = cJSON_GetArrayItem(x, 1)->valuestring, bl = strlen(b);
        } else {
            s = tl_err(TL_ERR_FORMAT, "convert: %s: merge %lld is neither \"a b\" nor [a, b]", tpath, (long long)r);
            goto done;
        }
        /* a space inside a part is written as U+0120 (llama.cpp's choice;
         * byte-level vocabularies never hold a raw space) */
        char *m = malloc(2 * (al + bl) + 2), *o = m;
        if (!m) {
            s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
            goto done;
        }
        for (int part = 0; part < 2; part++) {
            const char *p = part ? b : a;
            size_t pl = part ? bl : al;
            for (size_t i = 0; i < pl; i++) {
                if (p[i] == ' ') *o++ = (char)0xC4, *o++ = (char)0xA0;
                else *o++ = p[i];
            }
            if (!part) *o++ = ' ';
        }
        *o = 0;
        merges[r] = m;
        if (spm) { /* score of the merged token: -(rank of the first merge that builds it) */
            if (al + bl + 1 > cat_cap) { /* scratch for the merged token's text a + b */
                char *nc = realloc(cat, al + bl + 1);
                if (!nc) {
                    s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
                    goto done;
                }
                cat = nc;
                cat_cap = al + bl + 1;
            }
            memcpy(cat, a, al);
            memcpy(cat + al, b, bl);
            int32_t id = tok_strmap_get(&map, cat, al + bl);
            if (id >= 0 && id < n && types[id] == TT_NORMAL && scores[id] == 0.0f && r > 0) scores[id] = -(float)r;
        }
        r++;
    }
    /* keys, in llama.cpp's order */
    if ((s = gguf_writer_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2")) ||
        (s = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre)) ||
        (s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n)))
        goto done;
    if (spm && (s = gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n))) goto done;
    if ((s = gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n))) goto done;
    if (n_merges && (s = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                                 (uint64_t)n_merges)))
        goto done;
    if (spm) {
        bool prefix = false;
        const cJSON *norm = jget(j, "normalizer"), *pt = jget(j, "pre_tokenizer");
        const cJSON *list[2] = {norm, pt};
        for (int k = 0; k < 2; k++) {
            const cJSON *o = list[k], *one;
            const cJSON *items = type_is(o, "Sequence") ? (k ? jget(o, "pretokenizers") : jget(o, "normalizers")) : NULL;
            int cnt = items ? cJSON_GetArraySize(items) : 1;
            for (int i = 0; i < cnt; i++) {
                one = items ? cJSON_GetArrayItem(items, i) : o;
                if (type_is(one, "Prepend") && jstr(one, "prepend") && !strcmp(jstr(one, "prepend"), "\xE2\x96\x81"))
                    prefix = true;
                if (type_is(one, "Metaspace")) {
                    const char *sch = jstr(one, "prepend_scheme");
                    prefix = sch ? strcmp(sch, "never") != 0 : jbool(one, "add_prefix_space", true);
                }
            }
        }
        if ((s = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", prefix))) goto done;
    }
    if ((s = write_specials(w, j, tc, config, n))) goto done;
    if ((s = write_chat_template(w, tc, dir))) goto done;
    *n_tokens = n;
done:
    if (tokens)
        for (int64_t i = 0; i < n; i++) free(tokens[i]);
    if (merges)
        for (int64_t i = 0; i < n_merges; i++) free(merges[i]);
    free(tokens);
    free(types);
    free(scores);
    free(merges);
    tok_strmap_free(&map);
    free(cat);
    cJSON_Delete(j);
    cJSON_Delete(tc);
    free(tpath);
    free(cpath);
    return s;
}
