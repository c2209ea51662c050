/* tallow template: render a chat template for a conversation given as JSON,
 * the way HF's apply_chat_template(tokenize=False) does. The template comes
 * from a file or from a GGUF file's tokenizer.chat_template (read with the io
 * layer, without loading weights: a model tool, see commands.h). Writes the
 * rendered text to stdout byte for byte (no newline added). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "io/gguf.h"
#include "text/chat_template.h"

static void template_usage(FILE *f) {
    fprintf(f,
            "usage: tallow template (--template FILE | -m MODEL.gguf) --messages JSON [options]\n"
            "  --messages JSON|@FILE   array of {\"role\", \"content\", ...} objects\n"
            "  --tools JSON|@FILE      array of tool schemas (default: none)\n"
            "  --vars JSON|@FILE       object of extra template variables\n"
            "  --add-generation-prompt append the assistant turn opener\n"
            "  --bos S / --eos S       bos_token / eos_token (default from the GGUF, else none)\n");
}

/* "@path" reads a file, anything else is the value itself */
static char *arg_text(const char *v, bool *owned) {
    *owned = false;
    if (v[0] != '@') return (char *)v;
    size_t len;
    char *s = args_read_file(v + 1, &len);
    if (!s) {
        fprintf(stderr, "tallow template: cannot read '%s'\n", v + 1);
        return NULL;
    }
    *owned = true;
    return s;
}

/* text of special token `key` (e.g. tokenizer.ggml.bos_token_id) */
static char *gguf_token_text(const gguf_file *g, const char *key) {
    int64_t id;
    if (gguf_get_int(g, key, &id) != TL_OK) return NULL;
    const gguf_kv *toks;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", &toks) != TL_OK || toks->arr_type != GGUF_VT_STRING) return NULL;
    if (id < 0 || (uint64_t)id >= toks->arr_n) return NULL;
    gguf_str s = gguf_arr_str(g, toks, (uint64_t)id);
    char *r = malloc(s.len + 1);
    if (!r) return NULL;
    memcpy(r, s.ptr, s.len);
    r[s.len] = 0;
    return r;
}

int cmd_template(int argc, char **argv) {
    const char *tmpl_path = NULL, *model_path = NULL, *messages = NULL, *tools = NULL, *vars = NULL;
    const char *bos = NULL, *eos = NULL;
    bool add_gen = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "--template")) ok = args_str(argc, argv, &i, &tmpl_path);
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) ok = args_str(argc, argv, &i, &model_path);
        else if (!strcmp(a, "--messages")) ok = args_str(argc, argv, &i, &messages);
        else if (!strcmp(a, "--tools")) ok = args_str(argc, argv, &i, &tools);
        else if (!strcmp(a, "--vars")) ok = args_str(argc, argv, &i, &vars);
        else if (!strcmp(a, "--bos")) ok = args_str(argc, argv, &i, &bos);
        else if (!strcmp(a, "--eos")) ok = args_str(argc, argv, &i, &eos);
        else if (!strcmp(a, "--add-generation-prompt")) add_gen = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            template_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tallow template: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok) {
            template_usage(stderr);
            return 2;
        }
    }
    if ((!tmpl_path) == (!model_path) || !messages) {
        fprintf(stderr, "tallow template: need exactly one of --template / -m, and --messages\n");
        template_usage(stderr);
        return 2;
    }
    int rc = 1;
    char *src = NULL, *gbos = NULL, *geos = NULL, *out = NULL;
    size_t src_len = 0, out_len = 0;
    bool own_m = false, own_t = false, own_v = false;
    char *mtext = NULL, *ttext = NULL, *vtext = NULL;
    if (tmpl_path) {
        src = args_read_file(tmpl_path, &src_len);
        if (!src) {
            fprintf(stderr, "tallow template: cannot read '%s'\n", tmpl_path);
            goto done;
        }
    } else {
        gguf_file *g;
        if (gguf_open(model_path, &g) != TL_OK) {
            fprintf(stderr, "tallow template: %s\n", tl_last_error());
            goto done;
        }
        gguf_str s;
        if (gguf_get_str(g, "tokenizer.chat_template", &s) != TL_OK) {
            fprintf(stderr, "tallow template: %s has no tokenizer.chat_template\n", model_path);
            gguf_close(g);
            goto done;
        }
        src = malloc(s.len + 1);
        if (src) {
            memcpy(src, s.ptr, s.len);
            src[s.len] = 0;
            src_len = s.len;
        }
        gbos = gguf_token_text(g, "tokenizer.ggml.bos_token_id");
        geos = gguf_token_text(g, "tokenizer.ggml.eos_token_id");
        gguf_close(g);
        if (!src) {
            fprintf(stderr, "tallow template: out of memory\n");
            goto done;
        }
    }
    mtext = arg_text(messages, &own_m);
    if (!mtext) goto done;
    if (tools && !(ttext = arg_text(tools, &own_t))) goto done;
    if (vars && !(vtext = arg_text(vars, &own_v))) goto done;
    chat_template_args ca = {
        .messages_json = mtext,
        .tools_json = ttext,
        .add_generation_prompt = add_gen,
        .bos_token = bos ? bos : gbos,
        .eos_token = eos ? eos : geos,
        .extra_json = vtext,
    };
    if (chat_template_render(src, src_len, &ca, &out, &out_len) != TL_OK) {
        fprintf(stderr, "tallow template: %s\n", tl_last_error());
        goto done;
    }
    if (out_len && fwrite(out, 1, out_len, stdout) != out_len) goto done;
    if (fflush(stdout) != 0) goto done;
    rc = 0;
done:
    free(out);
    free(src);
    free(gbos);
    free(geos);
    if (own_m) free(mtext);
    if (own_t) free(ttext);
    if (own_v) free(vtext);
    return rc;
}
