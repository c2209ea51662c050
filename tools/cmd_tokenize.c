/* tools/cmd_tokenize: `tallow tokenize`: text -> token ids with the
 * tokenizer of a GGUF model or an HF tokenizer.json, for people (one token
 * per line with its piece) and for tests (--jsonl batch mode: one JSON
 * string per input line -> one JSON id array per output line; with
 * --decode the reverse). --bench measures encode speed.
 * Owns: nothing. Calls: io/gguf, text/tokenizer (below the model level, like
 * inspect: a tokenizer file need not be a model). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "commands.h"
#include "io/gguf.h"
#include "text/tokenizer.h"

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: tallow tokenize (-m FILE.gguf | --tokenizer PATH) [options] (TEXT | -f FILE)\n"
            "  -m FILE.gguf        use the GGUF model's tokenizer\n"
            "  --tokenizer PATH    tokenizer.json, a folder holding it, or GPT-2's encoder.json\n"
            "                      (with vocab.bpe beside it)\n"
            "  --ids               print the ids as one JSON array\n"
            "  --pieces            print the pieces as one JSON array of strings\n"
            "  (default: one token per line: id, then its piece quoted)\n"
            "  --no-special        do not match special-token text (for untrusted input)\n"
            "  --raw               do not add BOS/EOS\n"
            "  -f FILE             read the text from FILE ('-' for stdin)\n"
            "  --jsonl             batch: each input line is a JSON string; print one JSON id\n"
            "                      array per line\n"
            "  --decode            with --jsonl: input lines are JSON id arrays; print the\n"
            "                      decoded text as JSON strings\n"
            "  --skip-control      with --decode: leave control tokens out (HF skip_special_tokens)\n"
            "  --bench             encode the text repeatedly for ~1 s and print MB/s\n"
            "                      (with --jsonl: time the encodes, print MB/s to stderr)\n");
}

/* Length of the valid UTF-8 character at s (n bytes left), 0 if invalid. */
static int utf8_char_len(const unsigned char *s, size_t n) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (n < (size_t)len || s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

/* JSON string output. A byte that is not part of a valid UTF-8 character
 * (a piece holding part of one) is shown as the text <0xNN>, so the line
 * stays valid UTF-8; decoded text never has such bytes. */
static void put_json_str(FILE *o, const char *s, size_t n) {
    fputc('"', o);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int l = utf8_char_len((const unsigned char *)s + i, n - i);
        if (!l) {
            fprintf(o, "<0x%02X>", c);
            i++;
            continue;
        }
        if (l > 1) {
            fwrite(s + i, 1, (size_t)l, o);
            i += (size_t)l;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", o); break;
        case '\\': fputs("\\\\", o); break;
        case '\n': fputs("\\n", o); break;
        case '\r': fputs("\\r", o); break;
        case '\t': fputs("\\t", o); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(o, "\\u%04x", c);
            else fputc(c, o);
        }
        i++;
    }
    fputc('"', o);
}

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int put_utf8(unsigned cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

static int read_u4(const char *p, const char *end, unsigned *cp) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexv(p[k]);
        if (h < 0) return 0;
        v = v * 16 + (unsigned)h;
    }
    *cp = v;
    return 1;
}

/* Parse one JSON string (the whole line, whitespace around allowed) into
 * out (capacity >= line length); returns decoded length or -1. A lone
 * surrogate escape is encoded as its 3-byte form (WTF-8), which is what
 * such a test line means byte-wise. */
static long parse_json_str(const char *p, const char *end, char *out) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    if (p >= end || *p != '"') return -1;
    p++;
    long n = 0;
    while (p < end && *p != '"') {
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        if (++p >= end) return -1;
        char e = *p++;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!read_u4(p, end, &cp)) return -1;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                read_u4(p + 2, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            n += put_utf8(cp, out + n);
            break;
        }
        default: return -1;
        }
    }
    if (p >= end) return -1;
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int32_t *ids_buf;
static int32_t ids_cap;

/* Encode with a buffer that grows to fit. */
static int encode_all(const tok_vocab *v, const char *t, size_t n, bool add, bool parse, int32_t *n_out) {
    for (;;) {
        tl_status st = tok_encode(v, t, n, add, parse, ids_buf, ids_cap, n_out);
        if (st == TL_OK) return 0;
        if (st == TL_ERR_INVALID && *n_out > ids_cap) {
            int32_t nc = *n_out + 1024;
            int32_t *nb = realloc(ids_buf, sizeof(int32_t) * (size_t)nc);
            if (!nb) {
                fprintf(stderr, "tallow tokenize: out of memory\n");
                return 1;
            }
            ids_buf = nb;
            ids_cap = nc;
            continue;
        }
        fprintf(stderr, "tallow tokenize: %s\n", tl_last_error());
        return 1;
    }
}

static int run_jsonl(const tok_vocab *v, FILE *in, bool add, bool parse, bool decode, bool skip_control, bool bench) {
    double t_enc = 0;
    size_t n_bytes = 0;
    char *line = NULL, *buf = NULL;
    size_t lcap = 0, bcap = 0;
    ssize_t ln;
    long lineno = 0;
    int rc = 0;
    while ((ln = getline(&line, &lcap, in)) >= 0) {
        lineno++;
        if ((size_t)ln + 16 > bcap) {
            bcap = (size_t)ln + 16;
            char *nb = realloc(buf, bcap);
            if (!nb) { rc = 1; break; }
            buf = nb;
        }
        if (decode) {
            /* [1, 2, 3] */
            int32_t n = 0;
            const char *p = line;
            while (*p && *p != '[') p++;
            if (*p) p++;
            for (;;) {
                while (*p == ' ' || *p == ',') p++;
                if (*p == ']' || !*p) break;
                char *e;
                errno = 0;
                long x = strtol(p, &e, 10);
                if (e == p || errno) {
                    fprintf(stderr, "tallow tokenize: line %ld: bad id array\n", lineno);
                    rc = 1;
                    goto out;
                }
                p = e;
                if (n >= ids_cap) {
                    int32_t nc = ids_cap ? ids_cap * 2 : 1024;
                    int32_t *nb = realloc(ids_buf, sizeof(int32_t) * (size_t)nc);
                    if (!nb) { rc = 1; goto out; }
                    ids_buf = nb;
                    ids_cap = nc;
                }
                ids_buf[n++] = (int32_t)x;
            }
            char *text;
            size_t tl;
            if (tok_decode(v, ids_buf, n, !skip_control, &text, &tl)) {
                fprintf(stderr, "tallow tokenize: line %ld: %s\n", lineno, tl_last_error());
                rc = 1;
                goto out;
            }
            put_json_str(stdout, text, tl);
            fputc('\n', stdout);
            free(text);
            continue;
        }
        long n = parse_json_str(line, line + ln, buf);
        if (n < 0) {
            fprintf(stderr, "tallow tokenize: line %ld: not a JSON string\n", lineno);
            rc = 1;
            break;
        }
        int32_t cnt;
        double t0 = bench ? now_s() : 0;
        if (encode_all(v, buf, (size_t)n, add, parse, &cnt)) { rc = 1; break; }
        if (bench) {
            t_enc += now_s() - t0;
            n_bytes += (size_t)n;
        }
        fputc('[', stdout);
        for (int32_t i = 0; i < cnt; i++) printf(i ? ", %d" : "%d", ids_buf[i]);
        fputs("]\n", stdout);
    }
out:
    if (bench && !rc)
        fprintf(stderr, "encode: %zu bytes in %.3f s = %.2f MB/s (one thread, load excluded)\n", n_bytes, t_enc,
                t_enc > 0 ? (double)n_bytes / t_enc / 1e6 : 0.0);
    free(line);
    free(buf);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *tokpath = NULL, *file = NULL, *text = NULL;
    bool ids = false, pieces = false, parse = true, add = true, jsonl = false, decode = false, bench = false;
    bool skip_control = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!args_str(argc, argv, &i, &model)) return 2;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!args_str(argc, argv, &i, &tokpath)) return 2;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!args_str(argc, argv, &i, &file)) return 2;
        } else if (!strcmp(a, "--ids")) ids = true;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else if (!strcmp(a, "--no-special")) parse = false;
        else if (!strcmp(a, "--raw")) add = false;
        else if (!strcmp(a, "--jsonl")) jsonl = true;
        else if (!strcmp(a, "--decode")) decode = true;
        else if (!strcmp(a, "--skip-control")) skip_control = true;
        else if (!strcmp(a, "--bench")) bench = true;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tallow tokenize: unknown option '%s'\n", a);
            tokenize_usage(stderr);
            return 2;
        } else if (!text) text = a;
        else {
            fprintf(stderr, "tallow tokenize: more than one TEXT argument\n");
            return 2;
        }
    }
    if ((!model) == (!tokpath) || (!text) == (!file) || (ids && pieces) || (decode && !jsonl)) {
        tokenize_usage(stderr);
        return 2;
    }
    tok_vocab *v = NULL;
    if (model) {
        gguf_file *g;
        if (gguf_open(model, &g)) {
            fprintf(stderr, "tallow tokenize: %s\n", tl_last_error());
            return 1;
        }
        tl_status st = tok_load_gguf(g, &v);
        gguf_close(g);
        if (st) {
            fprintf(stderr, "tallow tokenize: %s: %s\n", model, tl_last_error());
            return 1;
        }
    } else if (tok_load_hf_json(tokpath, &v)) {
        fprintf(stderr, "tallow tokenize: %s: %s\n", tokpath, tl_last_error());
        return 1;
    }
    int rc = 0;
    if (jsonl) {
        FILE *in = stdin;
        if (file && strcmp(file, "-")) in = fopen(file, "rb");
        if (!in || text) {
            fprintf(stderr, "tallow tokenize: --jsonl reads -f FILE: %s\n", in ? "TEXT given" : strerror(errno));
            tok_free(v);
            return in ? 2 : 1;
        }
        rc = run_jsonl(v, in, add, parse, decode, skip_control, bench);
        if (in != stdin) fclose(in);
        tok_free(v);
        free(ids_buf);
        return rc;
    }
    size_t len;
    char *owned = NULL;
    if (file) {
        if (!strcmp(file, "-")) {
            size_t cap = 1 << 16;
            owned = malloc(cap);
            len = 0;
            size_t r;
            while (owned && (r = fread(owned + len, 1, cap - len, stdin)) > 0) {
                len += r;
                if (len == cap) {
                    char *nb = realloc(owned, cap *= 2);
                    if (!nb) { free(owned); owned = NULL; }
                    owned = nb;
                }
            }
        } else
            owned = args_read_file(file, &len);
        if (!owned) {
            fprintf(stderr, "tallow tokenize: cannot read '%s'\n", file);
            tok_free(v);
            return 1;
        }
        text = owned;
    } else
        len = strlen(text);
    int32_t cnt = 0;
    if (encode_all(v, text, len, add, parse, &cnt)) rc = 1;
    else if (bench) {
        int iters = 0;
        double t0 = now_s(), t;
        do {
            int32_t c2;
            tok_encode(v, text, len, add, parse, ids_buf, ids_cap, &c2);
            iters++;
            t = now_s() - t0;
        } while (t < 1.0);
        printf("%zu bytes -> %d tokens, %.2f MB/s (%d runs in %.2f s)\n", len, cnt, (double)len * iters / t / 1e6,
               iters, t);
    } else if (ids) {
        fputc('[', stdout);
        for (int32_t i = 0; i < cnt; i++) printf(i ? ", %d" : "%d", ids_buf[i]);
        fputs("]\n", stdout);
    } else if (pieces) {
        fputc('[', stdout);
        for (int32_t i = 0; i < cnt; i++) {
            size_t pl;
            const char *p = tok_piece(v, ids_buf[i], &pl);
            if (i) fputs(", ", stdout);
            put_json_str(stdout, p, pl);
        }
        fputs("]\n", stdout);
    } else {
        for (int32_t i = 0; i < cnt; i++) {
            size_t pl;
            const char *p = tok_piece(v, ids_buf[i], &pl);
            printf("%6d ", ids_buf[i]);
            put_json_str(stdout, p, pl);
            fputc('\n', stdout);
        }
    }
    free(owned);
    free(ids_buf);
    tok_free(v);
    return rc;
}
