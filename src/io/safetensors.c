/* io/safetensors: see safetensors.h. The JSON parser here understands just
 * what the format's header needs (objects, arrays of integers, strings with
 * escapes) and rejects anything else with the byte offset.
 * Owns: loaded bytes, index, writer entries. Calls: base/status, libc. */
#include "io/safetensors.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct st_kv {
    char *key, *val;
} st_kv;

struct st_file {
    uint8_t *owned; /* file bytes when opened from a path */
    void *map;      /* [map_size] mapping when opened with st_open_mmap */
    size_t map_size;
    const uint8_t *buf;
    size_t size;
    st_tensor *t;
    int n, cap;
    st_tensor **by_name; /* [n] sorted by name (st_find) */
    st_kv *meta;
    int n_meta, cap_meta;
};

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
                 {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4},  {"U64", 8}, {"BOOL", 1}};

size_t st_dtype_size(const char *dtype) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(dtype, st_dtypes[i].name)) return st_dtypes[i].size;
    return 0;
}

/* ---- JSON ------------------------------------------------------------------ */
typedef struct jp {
    const char *s;
    size_t n, i;
} jp;

static void jws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static tl_status jerr(jp *p, const char *what) {
    return tl_err(TL_ERR_FORMAT, "safetensors: header JSON: %s at byte %zu", what, p->i + 8);
}

static bool jeat(jp *p, char ch) {
    jws(p);
    if (p->i < p->n && p->s[p->i] == ch) {
        p->i++;
        return true;
    }
    return false;
}

static void put_utf8(char *o, size_t *k, uint32_t cp) {
    if (cp < 0x80) {
        o[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parse a string into a NUL-terminated buffer of its raw length (escapes
 * only shrink), found first so a header of many strings never reserves more
 * than its own size: small[cap] when it fits, else malloc'd (free it when
 * *out != small). */
static tl_status jstr_in(jp *p, char *small, size_t cap, char **out) {
    *out = NULL;
    if (!jeat(p, '"')) return jerr(p, "expected a string");
    size_t start = p->i, end = start;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return jerr(p, "unterminated string");
    char *o = end - start < cap ? small : malloc(end - start + 1);
    if (!o) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    size_t k = 0;
    while (p->i < p->n) {
        char c = p->s[p->i++];
        if (c == '"') {
            o[k] = 0;
            *out = o;
            return TL_OK;
        }
        if ((unsigned char)c < 0x20) break;
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        if (p->i >= p->n) break;
        char e = p->s[p->i++];
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            if (p->i + 4 > p->n) goto bad;
            uint32_t cp = 0;
            for (int j = 0; j < 4; j++) {
                int h = hexv(p->s[p->i++]);
                if (h < 0) goto bad;
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                uint32_t lo = 0;
                for (int j = 0; j < 4; j++) {
                    int h = hexv(p->s[p->i + 2 + j]);
                    if (h < 0) goto bad;
                    lo = lo * 16 + (uint32_t)h;
                }
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p->i += 6;
                }
            }
            put_utf8(o, &k, cp); /* a \uXXXX escape (6 bytes) never yields more than 4 */
            break;
        }
        default: goto bad;
        }
    }
bad:
    if (o != small) free(o);
    return jerr(p, "bad or unterminated string");
}

static tl_status jstr(jp *p, char **out) { return jstr_in(p, NULL, 0, out); }

static tl_status jint(jp *p, int64_t *out) {
    jws(p);
    size_t st = p->i;
    int64_t v = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        if (v > (INT64_MAX - 9) / 10) return jerr(p, "integer too large");
        v = v * 10 + (p->s[p->i++] - '0');
    }
    if (p->i == st) return jerr(p, "expected a non-negative integer");
    *out = v;
    return TL_OK;
}

static tl_status jint_array(jp *p, int64_t *vals, int max, int *n) {
    *n = 0;
    if (!jeat(p, '[')) return jerr(p, "expected '['");
    if (jeat(p, ']')) return TL_OK;
    for (;;) {
        if (*n >= max) return jerr(p, "array too long");
        tl_status s = jint(p, &vals[(*n)++]);
        if (s != TL_OK) return s;
        if (jeat(p, ']')) return TL_OK;
        if (!jeat(p, ',')) return jerr(p, "expected ',' or ']'");
    }
}

static tl_status parse_tensor(jp *p, st_tensor *t) {
    if (!jeat(p, '{')) return jerr(p, "expected a tensor object");
    bool has_dt = false, has_sh = false, has_off = false;
    char dup[16] = "";
    int64_t off[2] = {0, 0};
    if (!jeat(p, '}'))
        for (;;) {
            char *k, kb[16];
            tl_status s = jstr_in(p, kb, sizeof kb, &k);
            if (s != TL_OK) return s;
            if (!jeat(p, ':')) {
                if (k != kb) free(k);
                return jerr(p, "expected ':'");
            }
            if ((!strcmp(k, "dtype") && has_dt) || (!strcmp(k, "shape") && has_sh) ||
                (!strcmp(k, "data_offsets") && has_off))
                snprintf(dup, sizeof dup, "%s", k);
            if (*dup) {
                s = tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s' gives '%s' twice", t->name, dup);
            } else if (!strcmp(k, "dtype")) {
                char *v, vb[16];
                s = jstr_in(p, vb, sizeof vb, &v);
                if (s == TL_OK) {
                    if (strlen(v) >= sizeof t->dtype || !st_dtype_size(v))
                        s = tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s': unknown dtype '%s'", t->name, v);
                    else
                        strcpy(t->dtype, v);
                    if (v != vb) free(v);
                }
                has_dt = true;
            } else if (!strcmp(k, "shape")) {
                s = jint_array(p, t->shape, ST_MAX_DIMS, &t->ndim);
                has_sh = true;
            } else if (!strcmp(k, "data_offsets")) {
                int n;
                s = jint_array(p, off, 2, &n);
                if (s == TL_OK && n != 2) s = jerr(p, "data_offsets needs 2 values");
                has_off = true;
            } else {
                s = jerr(p, "unknown tensor field");
            }
            if (k != kb) free(k);
            if (s != TL_OK) return s;
            if (jeat(p, '}')) break;
            if (!jeat(p, ',')) return jerr(p, "expected ',' or '}'");
        }
    if (!has_dt || !has_sh || !has_off)
        return tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s' lacks dtype, shape or data_offsets", t->name);
    size_t nb = st_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++)
        if (!tl_mul_ok(nb, (size_t)t->shape[i], &nb))
            return tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s': shape overflows", t->name);
    if (off[1] < off[0] || (size_t)(off[1] - off[0]) != nb)
        return tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s': data_offsets [%lld, %lld] do not span %zu bytes",
                      t->name, (long long)off[0], (long long)off[1], nb);
    t->nbytes = nb;
    t->data = (const void *)(uintptr_t)off[0]; /* resolved to a pointer after the header is parsed */
    return TL_OK;
}

static tl_status parse_meta(jp *p, st_file *f) {
    if (!jeat(p, '{')) return jerr(p, "expected a __metadata__ object");
    if (jeat(p, '}')) return TL_OK;
    for (;;) {
        char *k, *v;
        tl_status s = jstr(p, &k);
        if (s != TL_OK) return s;
        if (!jeat(p, ':')) {
            free(k);
            return jerr(p, "expected ':'");
        }
        s = jstr(p, &v);
        if (s != TL_OK) {
            free(k);
            return s;
        }
        if (f->n_meta == f->cap_meta) {
            int cap = f->cap_meta ? f->cap_meta * 2 : 16;
            st_kv *m = realloc(f->meta, (size_t)cap * sizeof *m);
            if (!m) {
                free(k);
                free(v);
                return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
            }
            f->meta = m;
            f->cap_meta = cap;
        }
        f->meta[f->n_meta].key = k;
        f->meta[f->n_meta++].val = v;
        if (jeat(p, '}')) return TL_OK;
        if (!jeat(p, ',')) return jerr(p, "expected ',' or '}'");
    }
}

static int cmp_off(const void *a, const void *b) {
    const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
    uintptr_t u = (uintptr_t)x->data, v = (uintptr_t)y->data;
    return u < v ? -1 : u > v;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

static int cmp_kv(const void *a, const void *b) {
    return strcmp(((const st_kv *)a)->key, ((const st_kv *)b)->key);
}

/* The sorted name index st_find searches, and metadata sorted for st_meta;
 * a tensor name or metadata key given twice is refused. */
static tl_status index_names(st_file *f) {
    f->by_name = malloc((f->n > 0 ? (size_t)f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->by_name[i]->name, f->by_name[i - 1]->name))
            return tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s' is named twice in the header", f->by_name[i]->name);
    if (f->n_meta) qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, cmp_kv);
    for (int i = 1; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, f->meta[i - 1].key))
            return tl_err(TL_ERR_FORMAT, "safetensors: __metadata__ key '%s' is given twice", f->meta[i].key);
    return TL_OK;
}

void st_close(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].val);
    }
    free(f->by_name);
    free(f->t);
    free(f->meta);
    free(f->owned);
    if (f->map) munmap(f->map, f->map_size);
    free(f);
}

tl_status st_open_memory(const void *buf, size_t size, st_file **out) {
    *out = NULL;
    if (size < 8) return tl_err(TL_ERR_FORMAT, "safetensors: file of %zu bytes is too small", size);
    const uint8_t *b = buf;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | b[i];
    if (hl > size - 8)
        return tl_err(TL_ERR_FORMAT, "safetensors: header length %llu runs past end of file (%zu bytes)",
                      (unsigned long long)hl, size);
    if (hl > ST_MAX_HEADER)
        return tl_err(TL_ERR_FORMAT, "safetensors: header length %llu is over ST_MAX_HEADER (%d bytes)",
                      (unsigned long long)hl, ST_MAX_HEADER);
    st_file *f = calloc(1, sizeof *f);
    if (!f) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    f->buf = b;
    f->size = size;
    jp p = {(const char *)b + 8, (size_t)hl, 0};
    tl_status s = TL_OK;
    bool seen_meta = false;
    if (!jeat(&p, '{')) {
        s = jerr(&p, "expected '{'");
        goto fail;
    }
    if (!jeat(&p, '}'))
        for (;;) {
            char *k;
            s = jstr(&p, &k);
            if (s != TL_OK) goto fail;
            if (!jeat(&p, ':')) {
                free(k);
                s = jerr(&p, "expected ':'");
                goto fail;
            }
            if (!strcmp(k, "__metadata__")) {
                free(k);
                s = seen_meta ? tl_err(TL_ERR_FORMAT, "safetensors: header has two __metadata__ objects")
                              : parse_meta(&p, f);
                seen_meta = true;
            } else {
                if (f->n == INT32_MAX / 2) {
                    free(k);
                    s = tl_err(TL_ERR_FORMAT, "safetensors: too many tensors");
                    goto fail;
                }
                if (f->n == f->cap) {
                    int cap = f->cap ? f->cap * 2 : 64;
                    st_tensor *t = realloc(f->t, (size_t)cap * sizeof *t);
                    if (!t) {
                        free(k);
                        s = tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
                        goto fail;
                    }
                    f->t = t;
                    f->cap = cap;
                }
                st_tensor *t = &f->t[f->n++];
                memset(t, 0, sizeof *t);
                t->name = k;
                s = parse_tensor(&p, t);
            }
            if (s != TL_OK) goto fail;
            if (jeat(&p, '}')) break;
            if (!jeat(&p, ',')) {
                s = jerr(&p, "expected ',' or '}'");
                goto fail;
            }
        }
    jws(&p);
    if (p.i != p.n) {
        s = jerr(&p, "trailing bytes after the header object");
        goto fail;
    }
    /* offsets: inside the data section, no overlaps */
    size_t data_size = size - 8 - (size_t)hl;
    st_tensor **ord = malloc((size_t)(f->n ? f->n : 1) * sizeof *ord);
    if (!ord) {
        s = tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
        goto fail;
    }
    for (int i = 0; i < f->n; i++) ord[i] = &f->t[i];
    qsort(ord, (size_t)f->n, sizeof *ord, cmp_off);
    size_t end = 0;
    for (int i = 0; i < f->n; i++) {
        size_t o = (size_t)(uintptr_t)ord[i]->data;
        if (o < end || o > data_size || ord[i]->nbytes > data_size - o) {
            if (o < end)
                s = tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s' data [%zu, +%zu) overlaps another tensor's",
                           ord[i]->name, o, ord[i]->nbytes);
            else
                s = tl_err(TL_ERR_FORMAT, "safetensors: tensor '%s' data [%zu, +%zu) runs past the end of the data "
                                          "section (%zu bytes): truncated file?",
                           ord[i]->name, o, ord[i]->nbytes, data_size);
            free(ord);
            goto fail;
        }
        end = o + ord[i]->nbytes;
    }
    free(ord);
    if ((s = index_names(f)) != TL_OK) goto fail;
    for (int i = 0; i < f->n; i++) f->t[i].data = b + 8 + hl + (size_t)(uintptr_t)f->t[i].data;
    *out = f;
    return TL_OK;
fail:
    st_close(f);
    return s;
}

tl_status st_open(const char *path, st_file **out) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return tl_err(TL_ERR_IO, "safetensors: cannot open '%s'", path);
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (sz < 0) {
        fclose(fp);
        return tl_err(TL_ERR_IO, "safetensors: cannot size '%s'", path);
    }
    uint8_t *buf = malloc((size_t)sz + 1);
    if (!buf) {
        fclose(fp);
        return tl_err(TL_ERR_NOMEM, "safetensors: out of memory for '%s' (%ld bytes)", path, sz);
    }
    size_t got = fread(buf, 1, (size_t)sz, fp);
    fclose(fp);
    if (got != (size_t)sz) {
        free(buf);
        return tl_err(TL_ERR_IO, "safetensors: short read of '%s'", path);
    }
    tl_status s = st_open_memory(buf, (size_t)sz, out);
    if (s != TL_OK) {
        free(buf);
        return tl_err_prefix(s, "%s: ", path);
    }
    (*out)->owned = buf;
    return TL_OK;
}

tl_status st_open_mmap(const char *path, st_file **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tl_err(TL_ERR_IO, "safetensors: cannot open '%s'", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tl_err(TL_ERR_IO, "safetensors: '%s' is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return tl_err(TL_ERR_FORMAT, "safetensors: %s: file of %zu bytes is too small", path, size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file referenced */
    if (m == MAP_FAILED) return tl_err(TL_ERR_IO, "safetensors: cannot map '%s'", path);
    tl_status s = st_open_memory(m, size, out);
    if (s != TL_OK) {
        munmap(m, size);
        return tl_err_prefix(s, "%s: ", path);
    }
    (*out)->map = m;
    (*out)->map_size = size;
    return TL_OK;
}

int st_n_tensors(const st_file *f) { return f->n; }
const st_tensor *st_tensor_at(const st_file *f, int i) { return i >= 0 && i < f->n ? &f->t[i] : NULL; }

const st_tensor *st_find(const st_file *f, const char *name) {
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (!c) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    int lo = 0, hi = f->n_meta;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->meta[mid].key, key);
        if (!c) return f->meta[mid].val;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- writer ------------------------------------------------------------------ */
typedef struct st_went {
    char *name;
    char dtype[8];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} st_went;

struct st_writer {
    st_went *e;
    int n, cap;
    st_kv *meta;
    int n_meta, cap_meta;
};

tl_status st_writer_init(st_writer **out) {
    *out = calloc(1, sizeof **out);
    return *out ? TL_OK : tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
}

void st_writer_free(st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].val);
    }
    free(w->e);
    free(w->meta);
    free(w);
}

tl_status st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape,
                        const void *data, size_t nbytes) {
    size_t es = st_dtype_size(dtype), nb = es;
    if (!es || ndim < 0 || ndim > ST_MAX_DIMS)
        return tl_err(TL_ERR_INVALID, "safetensors: tensor '%s': bad dtype '%s' or ndim %d", name, dtype, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || !tl_mul_ok(nb, (size_t)shape[i], &nb))
            return tl_err(TL_ERR_INVALID, "safetensors: tensor '%s': bad shape", name);
    if (nb != nbytes)
        return tl_err(TL_ERR_INVALID, "safetensors: tensor '%s': %zu bytes given, shape needs %zu", name, nbytes, nb);
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        st_went *e = realloc(w->e, (size_t)cap * sizeof *e);
        if (!e) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
        w->e = e;
        w->cap = cap;
    }
    st_went *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype);
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->data = data;
    e->nbytes = nbytes;
    w->n++;
    return TL_OK;
}

tl_status st_writer_meta(st_writer *w, const char *key, const char *value) {
    if (w->n_meta == w->cap_meta) {
        int cap = w->cap_meta ? w->cap_meta * 2 : 16;
        st_kv *m = realloc(w->meta, (size_t)cap * sizeof *m);
        if (!m) return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
        w->meta = m;
        w->cap_meta = cap;
    }
    w->meta[w->n_meta].key = strdup(key);
    w->meta[w->n_meta].val = strdup(value);
    if (!w->meta[w->n_meta].key || !w->meta[w->n_meta].val) {
        free(w->meta[w->n_meta].key);
        free(w->meta[w->n_meta].val);
        return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    }
    w->n_meta++;
    return TL_OK;
}

/* Growable text buffer for the header. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096);
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_str(b, esc);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

tl_status st_writer_write(st_writer *w, const char *path) {
    sbuf b = {0};
    char num[64];
    sb_str(&b, "{");
    bool first = true;
    if (w->n_meta) {
        sb_str(&b, "\"__metadata__\":{");
        for (int i = 0; i < w->n_meta; i++) {
            if (i) sb_str(&b, ",");
            sb_json_str(&b, w->meta[i].key);
            sb_str(&b, ":");
            sb_json_str(&b, w->meta[i].val);
        }
        sb_str(&b, "}");
        first = false;
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        st_went *e = &w->e[i];
        if (!first) sb_str(&b, ",");
        first = false;
        sb_json_str(&b, e->name);
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, e->dtype);
        sb_str(&b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)e->shape[d]);
            sb_str(&b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", off, off + e->nbytes);
        sb_str(&b, num);
        off += e->nbytes;
    }
    sb_str(&b, "}");
    while (!b.oom && b.n % 8) sb_str(&b, " "); /* data starts 8-aligned */
    if (b.oom) {
        free(b.p);
        return tl_err(TL_ERR_NOMEM, "safetensors: out of memory building the header");
    }
    size_t plen = strlen(path) + 8;
    char *tmp = malloc(plen);
    if (!tmp) {
        free(b.p);
        return tl_err(TL_ERR_NOMEM, "safetensors: out of memory");
    }
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *fp = fopen(tmp, "wb");
    tl_status s = TL_OK;
    if (!fp) {
        s = tl_err(TL_ERR_IO, "safetensors: cannot create '%s'", tmp);
    } else {
        uint8_t hl[8];
        uint64_t n = b.n;
        for (int i = 0; i < 8; i++) hl[i] = (uint8_t)(n >> (8 * i));
        bool ok = fwrite(hl, 1, 8, fp) == 8 && fwrite(b.p, 1, b.n, fp) == b.n;
        for (int i = 0; ok && i < w->n; i++) ok = fwrite(w->e[i].data, 1, w->e[i].nbytes, fp) == w->e[i].nbytes;
        if (fclose(fp) != 0) ok = false;
        if (!ok || rename(tmp, path) != 0) {
            remove(tmp);
            s = tl_err(TL_ERR_IO, "safetensors: writing '%s' failed", path);
        }
    }
    free(tmp);
    free(b.p);
    return s;
}
