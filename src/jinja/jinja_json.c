/* jinja/jinja_json: a small validating JSON parser (RFC 8259) producing Jinja
 * values, used to load messages, tools and extra variables for chat
 * templates. Strict: UTF-8 is validated, \u escapes (with surrogate pairs)
 * are decoded, nesting depth is limited (JINJA_MAX_VALUE_DEPTH), trailing
 * garbage is an error, a repeated key keeps its last value (as Python's json),
 * and every error names the byte offset. Integers that fit int64 stay integers
 * (as Python's json keeps them); others become floats.
 * Owns: nothing (values go to the caller's arena). Calls: base/status, libc. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja_internal.h"

typedef struct jp {
    jarena *a;
    const char *s;
    size_t n, i;
    tl_status st;
} jp;

static bool jp_fail(jp *p, tl_status st, const char *what) {
    if (p->st == TL_OK) {
        p->st = st;
        tl_err(st, "json: %s at byte %zu", what, p->i);
    }
    return false;
}

static void jp_ws(jp *p) {
    while (p->i < p->n) {
        char ch = p->s[p->i];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') p->i++;
        else break;
    }
}

static int hexv(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static bool jp_hex4(jp *p, uint32_t *out) {
    if (p->n - p->i < 4) return jp_fail(p, TL_ERR_FORMAT, "truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexv(p->s[p->i + (size_t)k]);
        if (h < 0) return jp_fail(p, TL_ERR_FORMAT, "bad hex digit in \\u escape");
        v = v * 16 + (uint32_t)h;
    }
    p->i += 4;
    *out = v;
    return true;
}

static bool jp_string(jp *p, const jstr **out) {
    p->i++; /* opening quote */
    size_t start = p->i;
    /* fast path: no escapes */
    size_t j = start;
    while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' && (unsigned char)p->s[j] >= 0x20) j++;
    if (j < p->n && p->s[j] == '"') {
        if (!jutf8_valid(p->s + start, j - start)) return jp_fail(p, TL_ERR_FORMAT, "invalid UTF-8 in string");
        *out = jstr_make(p->a, p->s + start, j - start);
        p->i = j + 1;
        if (!*out) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
        return true;
    }
    /* slow path: decode into a scratch buffer no longer than the raw text */
    size_t end = start;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return jp_fail(p, TL_ERR_FORMAT, "unterminated string");
    char *buf = malloc(end - start + 1);
    if (!buf) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
    size_t o = 0;
    while (p->i < end) {
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch < 0x20) {
            free(buf);
            return jp_fail(p, TL_ERR_FORMAT, "control character in string");
        }
        if (ch != '\\') {
            buf[o++] = (char)ch;
            p->i++;
            continue;
        }
        p->i++;
        char e = p->s[p->i++];
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (!jp_hex4(p, &cp)) {
                free(buf);
                return false;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (p->i + 1 < p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                    p->i += 2;
                    if (!jp_hex4(p, &lo)) {
                        free(buf);
                        return false;
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        free(buf);
                        return jp_fail(p, TL_ERR_FORMAT, "unpaired surrogate in \\u escape");
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    free(buf);
                    return jp_fail(p, TL_ERR_FORMAT, "unpaired surrogate in \\u escape");
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf);
                return jp_fail(p, TL_ERR_FORMAT, "unpaired surrogate in \\u escape");
            }
            /* an escape is >= 6 bytes of input and <= 4 of output */
            o += jutf8_encode(cp, buf + o);
            break;
        }
        default:
            free(buf);
            p->i--;
            return jp_fail(p, TL_ERR_FORMAT, "bad escape in string");
        }
    }
    p->i = end + 1;
    if (!jutf8_valid(buf, o)) {
        free(buf);
        return jp_fail(p, TL_ERR_FORMAT, "invalid UTF-8 in string");
    }
    *out = jstr_make(p->a, buf, o);
    free(buf);
    if (!*out) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
    return true;
}

static bool jp_number(jp *p, jv *out) {
    size_t st = p->i;
    bool is_float = false;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return jp_fail(p, TL_ERR_FORMAT, "bad number");
    if (p->s[p->i] == '0') p->i++;
    else if (p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    else
        return jp_fail(p, TL_ERR_FORMAT, "bad number");
    if (p->i < p->n && p->s[p->i] == '.') {
        is_float = true;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jp_fail(p, TL_ERR_FORMAT, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_float = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jp_fail(p, TL_ERR_FORMAT, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char tmp[64];
    size_t len = p->i - st;
    char *num = len < sizeof tmp ? tmp : malloc(len + 1);
    if (!num) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
    memcpy(num, p->s + st, len);
    num[len] = 0;
    if (!is_float) {
        errno = 0;
        long long v = strtoll(num, NULL, 10);
        if (errno == 0) {
            *out = jv_int(v);
            if (num != tmp) free(num);
            return true;
        }
    }
    *out = jv_float(strtod(num, NULL));
    if (num != tmp) free(num);
    return true;
}

static bool jp_value(jp *p, jv *out, int depth);

static bool jp_lit(jp *p, const char *w, jv v, jv *out) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n)) return jp_fail(p, TL_ERR_FORMAT, "unexpected character");
    p->i += n;
    *out = v;
    return true;
}

static bool jp_value(jp *p, jv *out, int depth) {
    memset(out, 0, sizeof *out);
    jp_ws(p);
    if (p->i >= p->n) return jp_fail(p, TL_ERR_FORMAT, "unexpected end of input");
    char ch = p->s[p->i];
    if ((ch == '{' || ch == '[') && depth >= JINJA_MAX_VALUE_DEPTH)
        return jp_fail(p, TL_ERR_UNSUPPORTED, "nesting deeper than 256 arrays/objects (JINJA_MAX_VALUE_DEPTH)");
    if (ch == '{') {
        p->i++;
        jdict *d = jdict_new_a(p->a);
        if (!d) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
        } else {
            for (;;) {
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != '"') return jp_fail(p, TL_ERR_FORMAT, "expected string key");
                jv k = {0};
                k.k = JV_STR;
                if (!jp_string(p, &k.u.s)) return false;
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return jp_fail(p, TL_ERR_FORMAT, "expected ':'");
                p->i++;
                jv v;
                if (!jp_value(p, &v, depth + 1)) return false;
                if (!jdict_set_a(p->a, d, k, v)) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == '}') {
                    p->i++;
                    break;
                }
                return jp_fail(p, TL_ERR_FORMAT, "expected ',' or '}'");
            }
        }
        out->k = JV_DICT;
        out->u.d = d;
        return true;
    }
    if (ch == '[') {
        p->i++;
        jlist *l = jlist_new_a(p->a);
        if (!l) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
        } else {
            for (;;) {
                jv v;
                if (!jp_value(p, &v, depth + 1)) return false;
                if (!jlist_push_a(p->a, l, v)) return jp_fail(p, TL_ERR_NOMEM, "out of memory");
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    continue;
                }
                if (p->i < p->n && p->s[p->i] == ']') {
                    p->i++;
                    break;
                }
                return jp_fail(p, TL_ERR_FORMAT, "expected ',' or ']'");
            }
        }
        out->k = JV_LIST;
        out->u.l = l;
        return true;
    }
    if (ch == '"') {
        out->k = JV_STR;
        return jp_string(p, &out->u.s);
    }
    if (ch == 't') return jp_lit(p, "true", jv_bool(true), out);
    if (ch == 'f') return jp_lit(p, "false", jv_bool(false), out);
    if (ch == 'n') return jp_lit(p, "null", jv_none(), out);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return jp_number(p, out);
    return jp_fail(p, TL_ERR_FORMAT, "unexpected character");
}

tl_status jjson_parse(jarena *a, const char *s, size_t n, jv *out) {
    jp p = {.a = a, .s = s, .n = n, .i = 0, .st = TL_OK};
    memset(out, 0, sizeof *out);
    if (!jp_value(&p, out, 0)) return p.st;
    jp_ws(&p);
    if (p.i != p.n) {
        jp_fail(&p, TL_ERR_FORMAT, "trailing characters after JSON value");
        return p.st;
    }
    return TL_OK;
}
