/* io/gguf: the GGUF v2/v3 reader.
 *
 * Why it is written this way: a model file is untrusted input that decides
 * how much we allocate and where we read. So parsing goes through one
 * cursor that checks every read against the real size, every count is
 * compared with the bytes left BEFORE anything is allocated for it, and all
 * size arithmetic is overflow-checked. Multi-byte values are read with
 * memcpy (the mapping gives no alignment guarantee for metadata) and are
 * little-endian (big-endian files are refused). Nothing is copied: keys,
 * strings and tensor data point into the mapping.
 * Owns: the mapping, the kv/tensor arrays, the string-array offset index and
 * the name hash tables. Calls: base/status, tensor/dtype, libc, POSIX mmap. */
#include "io/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32u

struct gguf_file {
    const uint8_t *base; /* [size] the mapping or the caller's buffer */
    size_t size;
    bool mapped;         /* munmap at close */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;
    int64_t n_kv;
    gguf_kv *kvs;        /* [n_kv] */
    int64_t n_tensors;
    gguf_tensor *tensors; /* [n_tensors] */
    /* open-addressing tables of indices + 1 (0 = empty), sized a power of two */
    uint32_t *kv_hash, *t_hash;
    uint64_t kv_hcap, t_hcap;
};

/* ---- small helpers ------------------------------------------------------ */

static uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Element size of a scalar value type; 0 for STRING/ARRAY/unknown. */
static size_t vt_size(uint32_t t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

size_t gguf_vtype_size(gguf_vtype t) { return vt_size((uint32_t)t); }

static bool vt_is_int(uint32_t t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_UINT16: case GGUF_VT_INT16:
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_UINT64: case GGUF_VT_INT64:
        return true;
    default: return false;
    }
}

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *const names[GGUF_VT_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64"};
    if ((unsigned)t >= GGUF_VT_COUNT) return "unknown";
    return names[t];
}

/* A printable, bounded copy of a name from the file for error messages:
 * file names can be huge or contain control bytes. */
static const char *safe_name(const char *p, uint64_t len, char *buf, size_t cap) {
    size_t n = 0;
    uint64_t lim = cap - 4;
    for (uint64_t i = 0; i < len && n < lim; i++) {
        unsigned char c = (unsigned char)p[i];
        buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > lim) {
        buf[n++] = '.';
        buf[n++] = '.';
        buf[n++] = '.';
    }
    buf[n] = 0;
    return buf;
}

static uint64_t fnv1a(const char *p, uint64_t len) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool str_eq(gguf_str s, const char *p, size_t len) {
    return s.len == len && (len == 0 || memcmp(s.ptr, p, len) == 0);
}

/* ---- the parsing cursor ------------------------------------------------- */

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
    /* what is being parsed, for messages: "key #5 ('general.name')" */
    char what[192];
} cursor;

static size_t cur_left(const cursor *c) { return c->size - c->pos; }

static tl_status cur_short(const cursor *c, const char *field, uint64_t need) {
    return tl_err(TL_ERR_FORMAT,
                  "gguf: %s at byte %zu: %s needs %llu bytes but the file ends at %zu bytes",
                  c->what, c->pos, field, (unsigned long long)need, c->size);
}

static tl_status cur_u32(cursor *c, const char *field, uint32_t *v) {
    if (cur_left(c) < 4) return cur_short(c, field, 4);
    *v = rd_u32(c->base + c->pos);
    c->pos += 4;
    return TL_OK;
}

static tl_status cur_u64(cursor *c, const char *field, uint64_t *v) {
    if (cur_left(c) < 8) return cur_short(c, field, 8);
    *v = rd_u64(c->base + c->pos);
    c->pos += 8;
    return TL_OK;
}

static tl_status cur_str(cursor *c, const char *field, gguf_str *s) {
    size_t at = c->pos;
    uint64_t len = 0;
    tl_status st = cur_u64(c, field, &len);
    if (st) return st;
    if (len > cur_left(c))
        return tl_err(TL_ERR_FORMAT,
                      "gguf: %s at byte %zu: %s length %llu runs past end of file (%zu bytes)",
                      c->what, at, field, (unsigned long long)len, c->size);
    s->ptr = (const char *)(c->base + c->pos);
    s->len = len;
    c->pos += (size_t)len;
    return TL_OK;
}

/* ---- metadata ----------------------------------------------------------- */

/* Parse one kv value of type `type` at the cursor into kv. String-array
 * element offsets go into a fresh kv->str_off (count already checked against
 * the bytes left, so the index is bounded by the file size). */
static tl_status parse_value(cursor *c, gguf_kv *kv) {
    size_t at = c->pos;
    uint32_t type = kv->type;
    if (type == GGUF_VT_STRING) {
        gguf_str s;
        kv->data = c->base + c->pos; /* the u64 length prefix */
        return cur_str(c, "string", &s);
    }
    if (type != GGUF_VT_ARRAY) {
        size_t sz = vt_size(type);
        if (sz == 0)
            return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: unknown value type %u",
                          c->what, at, type);
        if (cur_left(c) < sz) return cur_short(c, gguf_vtype_name(type), sz);
        kv->data = c->base + c->pos;
        c->pos += sz;
        return TL_OK;
    }
    uint32_t et = 0;
    uint64_t n = 0;
    tl_status st = cur_u32(c, "array element type", &et);
    if (st) return st;
    if (et == GGUF_VT_ARRAY)
        return tl_err(TL_ERR_UNSUPPORTED,
                      "gguf: %s at byte %zu: nested arrays (array of array) are not supported",
                      c->what, at);
    if (et != GGUF_VT_STRING && vt_size(et) == 0)
        return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: unknown array element type %u",
                      c->what, at, et);
    st = cur_u64(c, "array count", &n);
    if (st) return st;
    kv->arr_type = (gguf_vtype)et;
    kv->arr_n = n;
    kv->data = c->base + c->pos;
    size_t min_el = et == GGUF_VT_STRING ? 8 : vt_size(et);
    if (n > cur_left(c) / min_el)
        return tl_err(TL_ERR_FORMAT,
                      "gguf: %s at byte %zu: array of %llu %s elements (%zu bytes or more each) "
                      "runs past end of file (%zu bytes)",
                      c->what, at, (unsigned long long)n, gguf_vtype_name(et), min_el, c->size);
    if (et != GGUF_VT_STRING) {
        c->pos += (size_t)n * min_el;
        return TL_OK;
    }
    uint64_t *off = malloc(n ? (size_t)n * sizeof *off : 1);
    if (!off) return tl_err(TL_ERR_NOMEM, "gguf: %s: no memory for %llu string offsets",
                            c->what, (unsigned long long)n);
    kv->str_off = off;
    for (uint64_t i = 0; i < n; i++) {
        off[i] = c->pos;
        gguf_str s;
        size_t el_at = c->pos;
        uint64_t len = 0;
        if (cur_left(c) < 8)
            return tl_err(TL_ERR_FORMAT,
                          "gguf: %s at byte %zu: string element %llu of %llu: length prefix "
                          "runs past end of file (%zu bytes)",
                          c->what, el_at, (unsigned long long)i, (unsigned long long)n, c->size);
        len = rd_u64(c->base + c->pos);
        if (len > cur_left(c) - 8)
            return tl_err(TL_ERR_FORMAT,
                          "gguf: %s at byte %zu: string element %llu of %llu: length %llu "
                          "runs past end of file (%zu bytes)",
                          c->what, el_at, (unsigned long long)i, (unsigned long long)n,
                          (unsigned long long)len, c->size);
        st = cur_str(c, "string element", &s);
        if (st) return st;
    }
    return TL_OK;
}

/* ---- hash tables -------------------------------------------------------- */

static uint64_t hash_cap(int64_t n) {
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap *= 2;
    return cap;
}

/* Insert index i (name s) into table; returns the index of an existing
 * entry with the same name, or -1 after inserting. */
static int64_t hash_insert(uint32_t *tab, uint64_t cap, gguf_str s, int64_t i,
                           const gguf_str *(*name_at)(const gguf_file *, int64_t),
                           const gguf_file *f) {
    uint64_t h = fnv1a(s.ptr, s.len) & (cap - 1);
    while (tab[h]) {
        int64_t j = (int64_t)tab[h] - 1;
        if (str_eq(*name_at(f, j), s.ptr, (size_t)s.len)) return j;
        h = (h + 1) & (cap - 1);
    }
    tab[h] = (uint32_t)(i + 1);
    return -1;
}

static int64_t hash_find(const uint32_t *tab, uint64_t cap, const char *name,
                         const gguf_str *(*name_at)(const gguf_file *, int64_t),
                         const gguf_file *f) {
    if (!tab || !name) return -1;
    size_t len = strlen(name);
    uint64_t h = fnv1a(name, len) & (cap - 1);
    while (tab[h]) {
        int64_t j = (int64_t)tab[h] - 1;
        if (str_eq(*name_at(f, j), name, len)) return j;
        h = (h + 1) & (cap - 1);
    }
    return -1;
}

static const gguf_str *kv_name_at(const gguf_file *f, int64_t i) { return &f->kvs[i].key; }
static const gguf_str *t_name_at(const gguf_file *f, int64_t i) { return &f->tensors[i].name; }

/* ---- tensors ------------------------------------------------------------ */

static tl_status parse_tensor_info(cursor *c, gguf_tensor *t, int64_t idx) {
    size_t at = c->pos;
    snprintf(c->what, sizeof c->what, "tensor #%lld", (long long)idx);
    tl_status st = cur_str(c, "tensor name", &t->name);
    if (st) return st;
    char nb[96];
    snprintf(c->what, sizeof c->what, "tensor #%lld ('%s')", (long long)idx,
             safe_name(t->name.ptr, t->name.len, nb, sizeof nb));
    if (t->name.len == 0)
        return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: empty tensor name", c->what, at);
    st = cur_u32(c, "n_dims", &t->n_dims);
    if (st) return st;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: n_dims %u is not in 1..%d",
                      c->what, at, t->n_dims, GGUF_MAX_DIMS);
    int64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne = 0;
        st = cur_u64(c, "dimension", &ne);
        if (st) return st;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: dimension %u is %lld (must be > 0)",
                          c->what, at, d, (long long)ne);
        t->ne[d] = (int64_t)ne;
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return tl_err(TL_ERR_FORMAT,
                          "gguf: %s at byte %zu: element count overflows (dimension %u = %lld)",
                          c->what, at, d, (long long)ne);
    }
    uint32_t type = 0;
    st = cur_u32(c, "tensor type", &type);
    if (st) return st;
    const tl_type_info *ti = tl_type_get(type);
    if (!ti)
        return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: unknown tensor type %u",
                      c->what, at, type);
    t->type = (tl_type)type;
    if (t->ne[0] % ti->blck != 0)
        return tl_err(TL_ERR_FORMAT,
                      "gguf: %s at byte %zu: row length ne[0]=%lld is not a multiple of %s's "
                      "block size %d", c->what, at, (long long)t->ne[0], ti->name, ti->blck);
    size_t size = tl_row_bytes(type, t->ne[0]);
    if (size == 0 || !tl_mul_ok(size, (size_t)(nel / t->ne[0]), &size))
        return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: byte size of %lld %s elements overflows",
                      c->what, at, (long long)nel, ti->name);
    t->size = size;
    st = cur_u64(c, "tensor offset", &t->offset);
    if (st) return st;
    return TL_OK;
}

/* Check data ranges: aligned, inside the file, not overlapping. */
static int cmp_by_offset(const void *a, const void *b, void *ctx) {
    const gguf_tensor *ts = ctx;
    uint64_t x = ts[*(const int64_t *)a].offset, y = ts[*(const int64_t *)b].offset;
    return x < y ? -1 : x > y;
}

/* qsort_r is not C11; a small merge sort on indices keeps this portable. */
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, const gguf_tensor *ts) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_idx(idx, tmp, h, ts);
    sort_idx(idx + h, tmp, n - h, ts);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_by_offset(&idx[j], &idx[i], (void *)ts) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

static tl_status check_tensor_data(gguf_file *f) {
    char nb[96], nb2[96];
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        const char *nm = safe_name(t->name.ptr, t->name.len, nb, sizeof nb);
        if (t->offset % f->alignment != 0)
            return tl_err(TL_ERR_FORMAT,
                          "gguf: tensor '%s' data offset %llu is not a multiple of the alignment %llu",
                          nm, (unsigned long long)t->offset, (unsigned long long)f->alignment);
        uint64_t start, end;
        if (__builtin_add_overflow(f->data_off, t->offset, &start) ||
            __builtin_add_overflow(start, t->size, &end) || end > f->size)
            return tl_err(TL_ERR_FORMAT,
                          "gguf: tensor '%s' data [offset %llu, size %llu] runs past end of file "
                          "(%zu bytes; data section starts at %llu)",
                          nm, (unsigned long long)t->offset, (unsigned long long)t->size, f->size,
                          (unsigned long long)f->data_off);
        t->data = f->base + start;
    }
    if (f->n_tensors < 2) return TL_OK;
    size_t bytes = (size_t)f->n_tensors * sizeof(int64_t);
    int64_t *idx = malloc(bytes), *tmp = malloc(bytes);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return tl_err(TL_ERR_NOMEM, "gguf: no memory to sort %lld tensors", (long long)f->n_tensors);
    }
    for (int64_t i = 0; i < f->n_tensors; i++) idx[i] = i;
    sort_idx(idx, tmp, f->n_tensors, f->tensors);
    tl_status st = TL_OK;
    for (int64_t i = 1; i < f->n_tensors; i++) {
        const gguf_tensor *a = &f->tensors[idx[i - 1]], *b = &f->tensors[idx[i]];
        if (a->offset + a->size > b->offset) { /* no overflow: both checked above */
            st = tl_err(TL_ERR_FORMAT,
                        "gguf: tensors '%s' [offset %llu, size %llu] and '%s' [offset %llu] overlap",
                        safe_name(a->name.ptr, a->name.len, nb, sizeof nb),
                        (unsigned long long)a->offset, (unsigned long long)a->size,
                        safe_name(b->name.ptr, b->name.len, nb2, sizeof nb2),
                        (unsigned long long)b->offset);
            break;
        }
    }
    free(idx);
    free(tmp);
    return st;
}

/* ---- open / close ------------------------------------------------------- */

/* Minimum bytes one kv / one tensor info can take: used to bound the header
 * counts before allocating. kv: key length u64 + type u32 + 1-byte value;
 * tensor: name length u64 + 1 name byte + n_dims u32 + one u64 dim + type
 * u32 + offset u64. */
#define GGUF_MIN_KV_BYTES 13u
#define GGUF_MIN_TINFO_BYTES 33u

static tl_status read_alignment(gguf_file *f, const gguf_kv *kv) {
    uint64_t a = 0;
    if (!vt_is_int(kv->type))
        return tl_err(TL_ERR_FORMAT, "gguf: key 'general.alignment' has type %s (expected uint32)",
                      gguf_vtype_name(kv->type));
    int64_t v = gguf_arr_int(&(gguf_kv){.arr_type = kv->type, .arr_n = 1, .data = kv->data}, 0);
    if (kv->type == GGUF_VT_UINT64) a = rd_u64(kv->data);
    else if (v > 0) a = (uint64_t)v;
    if (a == 0 || (a & (a - 1)) != 0)
        return tl_err(TL_ERR_FORMAT,
                      "gguf: key 'general.alignment' is %lld: the alignment must be a nonzero "
                      "power of two", (long long)v);
    f->alignment = a;
    return TL_OK;
}

static tl_status parse(gguf_file *f) {
    cursor c = {.base = f->base, .size = f->size, .pos = 0};
    snprintf(c.what, sizeof c.what, "header");
    if (f->size < 4 || memcmp(f->base, "GGUF", 4) != 0) {
        if (f->size < 4)
            return tl_err(TL_ERR_FORMAT, "gguf: file is %zu bytes, too short for the magic 'GGUF'",
                          f->size);
        return tl_err(TL_ERR_FORMAT,
                      "gguf: bad magic %02x %02x %02x %02x (expected 'GGUF'): not a GGUF file",
                      f->base[0], f->base[1], f->base[2], f->base[3]);
    }
    c.pos = 4;
    tl_status st = cur_u32(&c, "version", &f->version);
    if (st) return st;
    if (f->version == 1)
        return tl_err(TL_ERR_FORMAT, "gguf: version 1 files are not supported (only versions 2 "
                                     "and 3); re-convert the model with a current converter");
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return tl_err(TL_ERR_FORMAT, "gguf: big-endian GGUF (version %u byte-swapped) is not "
                                     "supported", __builtin_bswap32(f->version));
    if (f->version != 2 && f->version != 3)
        return tl_err(TL_ERR_FORMAT, "gguf: unknown version %u (supported: 2, 3)", f->version);
    uint64_t n_t = 0, n_kv = 0;
    if ((st = cur_u64(&c, "tensor count", &n_t)) || (st = cur_u64(&c, "kv count", &n_kv)))
        return st;
    size_t left = cur_left(&c);
    if (n_kv > left / GGUF_MIN_KV_BYTES)
        return tl_err(TL_ERR_FORMAT,
                      "gguf: header claims %llu kvs but only %zu bytes follow (each kv needs at "
                      "least %u bytes)", (unsigned long long)n_kv, left, GGUF_MIN_KV_BYTES);
    if (n_t > left / GGUF_MIN_TINFO_BYTES ||
        n_kv * GGUF_MIN_KV_BYTES + n_t * GGUF_MIN_TINFO_BYTES > left)
        return tl_err(TL_ERR_FORMAT,
                      "gguf: header claims %llu tensors and %llu kvs but only %zu bytes follow",
                      (unsigned long long)n_t, (unsigned long long)n_kv, left);
    if (n_kv > UINT32_MAX - 1 || n_t > UINT32_MAX - 1) /* hash slots hold index + 1 */
        return tl_err(TL_ERR_FORMAT, "gguf: too many kvs or tensors");
    f->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kvs);
    f->tensors = calloc(n_t ? (size_t)n_t : 1, sizeof *f->tensors);
    f->kv_hcap = hash_cap((int64_t)n_kv);
    f->t_hcap = hash_cap((int64_t)n_t);
    f->kv_hash = calloc((size_t)f->kv_hcap, sizeof *f->kv_hash);
    f->t_hash = calloc((size_t)f->t_hcap, sizeof *f->t_hash);
    if (!f->kvs || !f->tensors || !f->kv_hash || !f->t_hash)
        return tl_err(TL_ERR_NOMEM, "gguf: no memory for %llu kvs and %llu tensors",
                      (unsigned long long)n_kv, (unsigned long long)n_t);

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    char nb[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &f->kvs[i];
        size_t at = c.pos;
        snprintf(c.what, sizeof c.what, "key #%llu", (unsigned long long)i);
        if ((st = cur_str(&c, "key", &kv->key))) return st;
        f->n_kv = (int64_t)i + 1; /* so close frees this kv's str_off */
        snprintf(c.what, sizeof c.what, "key #%llu ('%s')", (unsigned long long)i,
                 safe_name(kv->key.ptr, kv->key.len, nb, sizeof nb));
        uint32_t type = 0;
        if ((st = cur_u32(&c, "value type", &type))) return st;
        kv->type = (gguf_vtype)type;
        if ((st = parse_value(&c, kv))) return st;
        int64_t dup = hash_insert(f->kv_hash, f->kv_hcap, kv->key, (int64_t)i, kv_name_at, f);
        if (dup >= 0)
            return tl_err(TL_ERR_FORMAT, "gguf: %s at byte %zu: duplicate key (also key #%lld)",
                          c.what, at, (long long)dup);
        if (str_eq(kv->key, "general.alignment", 17) && (st = read_alignment(f, kv))) return st;
    }
    for (uint64_t i = 0; i < n_t; i++) {
        gguf_tensor *t = &f->tensors[i];
        size_t at = c.pos;
        if ((st = parse_tensor_info(&c, t, (int64_t)i))) return st;
        f->n_tensors = (int64_t)i + 1;
        int64_t dup = hash_insert(f->t_hash, f->t_hcap, t->name, (int64_t)i, t_name_at, f);
        if (dup >= 0)
            return tl_err(TL_ERR_FORMAT,
                          "gguf: %s at byte %zu: duplicate tensor name (also tensor #%lld)",
                          c.what, at, (long long)dup);
    }
    /* The data section starts at the next multiple of the alignment; with no
     * tensors the file may end before it. */
    uint64_t end = c.pos, pad = (f->alignment - end % f->alignment) % f->alignment;
    if (__builtin_add_overflow(end, pad, &f->data_off))
        return tl_err(TL_ERR_FORMAT, "gguf: data section offset overflows");
    return check_tensor_data(f);
}

static void free_tables(gguf_file *f) {
    for (int64_t i = 0; i < f->n_kv; i++) free((void *)f->kvs[i].str_off);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_hash);
    free(f->t_hash);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    free_tables(f);
    if (f->mapped) munmap((void *)f->base, f->size);
    free(f);
}

static tl_status open_common(const uint8_t *base, size_t size, bool mapped, gguf_file **out) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (mapped) munmap((void *)base, size);
        return tl_err(TL_ERR_NOMEM, "gguf: no memory");
    }
    f->base = base;
    f->size = size;
    f->mapped = mapped;
    tl_status st = parse(f);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return TL_OK;
}

tl_status gguf_open_memory(const void *buf, size_t size, gguf_file **out) {
    if (!out) return tl_err(TL_ERR_INVALID, "gguf_open_memory: out is NULL");
    *out = NULL;
    if (!buf && size) return tl_err(TL_ERR_INVALID, "gguf_open_memory: buf is NULL");
    static const uint8_t empty[1];
    return open_common(buf ? buf : empty, size, false, out);
}

tl_status gguf_open(const char *path, gguf_file **out) {
    if (!out || !path) return tl_err(TL_ERR_INVALID, "gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tl_err(TL_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tl_err(TL_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tl_err(TL_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) {
        close(fd);
        return tl_err(TL_ERR_FORMAT, "gguf: '%s' is empty (0 bytes)", path);
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return tl_err(TL_ERR_IO, "gguf: cannot mmap '%s': %s", path, strerror(e));
    tl_status st = open_common(p, size, true, out);
    if (st) return tl_err_prefix(st, "%s: ", path);
    return TL_OK;
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_off; }
const void *gguf_base(const gguf_file *f) { return f->base; }
size_t gguf_size(const gguf_file *f) { return f->size; }
int64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
int64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i) {
    return (i >= 0 && i < f->n_kv) ? &f->kvs[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return (i >= 0 && i < f->n_tensors) ? &f->tensors[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    int64_t i = hash_find(f->kv_hash, f->kv_hcap, key, kv_name_at, f);
    return i < 0 ? NULL : &f->kvs[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t i = hash_find(f->t_hash, f->t_hcap, name, t_name_at, f);
    return i < 0 ? NULL : &f->tensors[i];
}

static tl_status get_kv(const gguf_file *f, const char *key, const gguf_kv **kv) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return tl_err(TL_ERR_NOT_FOUND, "gguf: key '%s' not found", key);
    return TL_OK;
}

static tl_status wrong_type(const char *key, const gguf_kv *kv, const char *want) {
    if (kv->type == GGUF_VT_ARRAY)
        return tl_err(TL_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected %s", key,
                      gguf_vtype_name(kv->arr_type), want);
    return tl_err(TL_ERR_FORMAT, "gguf: key '%s' is %s, expected %s", key,
                  gguf_vtype_name(kv->type), want);
}

tl_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv;
    tl_status st = get_kv(f, key, &kv);
    if (st) return st;
    if (!vt_is_int(kv->type)) return wrong_type(key, kv, "an integer");
    if (kv->type == GGUF_VT_UINT64 && rd_u64(kv->data) > (uint64_t)INT64_MAX)
        return tl_err(TL_ERR_FORMAT, "gguf: key '%s' value %llu does not fit int64", key,
                      (unsigned long long)rd_u64(kv->data));
    *out = gguf_arr_int(&(gguf_kv){.arr_type = kv->type, .arr_n = 1, .data = kv->data}, 0);
    return TL_OK;
}

tl_status gguf_get_float(const gguf_file *f, const char *key, double *out) {
    const gguf_kv *kv;
    tl_status st = get_kv(f, key, &kv);
    if (st) return st;
    if (!vt_is_int(kv->type) && kv->type != GGUF_VT_FLOAT32 && kv->type != GGUF_VT_FLOAT64)
        return wrong_type(key, kv, "a number");
    *out = gguf_arr_float(&(gguf_kv){.arr_type = kv->type, .arr_n = 1, .data = kv->data}, 0);
    return TL_OK;
}

tl_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv;
    tl_status st = get_kv(f, key, &kv);
    if (st) return st;
    if (kv->type != GGUF_VT_BOOL) return wrong_type(key, kv, "bool");
    *out = kv->data[0] != 0;
    return TL_OK;
}

tl_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv;
    tl_status st = get_kv(f, key, &kv);
    if (st) return st;
    if (kv->type != GGUF_VT_STRING) return wrong_type(key, kv, "string");
    out->len = rd_u64(kv->data);
    out->ptr = (const char *)kv->data + 8;
    return TL_OK;
}

tl_status gguf_get_arr(const gguf_file *f, const char *key, const gguf_kv **out) {
    const gguf_kv *kv;
    tl_status st = get_kv(f, key, &kv);
    if (st) return st;
    if (kv->type != GGUF_VT_ARRAY) return wrong_type(key, kv, "an array");
    *out = kv;
    return TL_OK;
}

gguf_str gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i) {
    gguf_str s = {"", 0};
    if (kv->type != GGUF_VT_ARRAY || kv->arr_type != GGUF_VT_STRING || i >= kv->arr_n ||
        !kv->str_off)
        return s;
    const uint8_t *p = f->base + kv->str_off[i];
    s.len = rd_u64(p);
    s.ptr = (const char *)p + 8;
    return s;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    if (i >= kv->arr_n) return 0;
    const uint8_t *p = kv->data + i * vt_size(kv->arr_type);
    switch (kv->arr_type) {
    case GGUF_VT_UINT8: return *p;
    case GGUF_VT_INT8: return (int8_t)*p;
    case GGUF_VT_BOOL: return *p != 0;
    case GGUF_VT_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case GGUF_VT_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case GGUF_VT_UINT32: return rd_u32(p);
    case GGUF_VT_INT32: return (int32_t)rd_u32(p);
    case GGUF_VT_UINT64: return (int64_t)rd_u64(p); /* wraps above INT64_MAX */
    case GGUF_VT_INT64: return (int64_t)rd_u64(p);
    default: return 0;
    }
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    if (i >= kv->arr_n) return 0;
    const uint8_t *p = kv->data + i * vt_size(kv->arr_type);
    switch (kv->arr_type) {
    case GGUF_VT_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case GGUF_VT_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    case GGUF_VT_UINT64: return (double)rd_u64(p);
    default: return (double)gguf_arr_int(kv, i);
    }
}
