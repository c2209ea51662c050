/* io/gguf_write: the GGUF v3 writer.
 *
 * Why it is shaped like this: a quantized model is gigabytes, so the writer
 * keeps only metadata (each kv pre-serialized into its on-disk bytes) and
 * tensor descriptors that reference the caller's data, or a fill callback
 * that produces it at write time (one reused buffer); gguf_writer_write then
 * streams header, kvs, tensor infos and data to the file, padding the start
 * of the data section and every tensor to the alignment (as the reference
 * writers do, so files end on an aligned boundary). Inputs are validated
 * when added (TL_ERR_INVALID) so a bad file is never produced. Offsets are
 * assigned at write time because the alignment may change after tensors
 * are added. Host byte order is little-endian (x86-64, aarch64).
 * Owns: copies of keys, names and kv values. Calls: base/status,
 * tensor/dtype, io/gguf (reader accessors for copy_kvs), libc stdio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"

#define GGUF_WRITER_DEFAULT_ALIGN 32u

typedef struct wkv {
    char *key;
    size_t key_len;
    uint32_t type;
    uint8_t *val;   /* [val_len] the value's bytes as they go on disk, after the type field */
    size_t val_len;
} wkv;

typedef struct wtensor {
    char *name;
    size_t name_len;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    tl_type type;
    const void *data; /* [size] the caller's; not copied (NULL when fill is set) */
    size_t size;
    gguf_tensor_fill_fn fill; /* or produce the bytes at write time */
    void *fill_ctx;
} wtensor;

struct gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *ts;
    size_t n_t, cap_t;
    uint32_t align;
    tl_status sticky;       /* error from a void setter, reported by write */
    char sticky_msg[256];
};

static bool grow(void **p, size_t *cap, size_t n, size_t el) {
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, nc * el);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

tl_status gguf_writer_init(gguf_writer **out) {
    if (!out) return tl_err(TL_ERR_INVALID, "gguf_writer_init: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return tl_err(TL_ERR_NOMEM, "gguf_writer_init: no memory");
    (*out)->align = GGUF_WRITER_DEFAULT_ALIGN;
    return TL_OK;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->ts[i].name);
    free(w->kvs);
    free(w->ts);
    free(w);
}

static int64_t find_kv(const gguf_writer *w, const char *key, size_t len) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (w->kvs[i].key_len == len && memcmp(w->kvs[i].key, key, len) == 0) return (int64_t)i;
    return -1;
}

static bool is_align_key(const char *key, size_t len) {
    return len == 17 && memcmp(key, "general.alignment", 17) == 0;
}

bool gguf_writer_remove_kv(gguf_writer *w, const char *key) {
    if (!w || !key) return false;
    size_t len = strlen(key);
    int64_t i = find_kv(w, key, len);
    if (i < 0) return false;
    free(w->kvs[i].key);
    free(w->kvs[i].val);
    memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kvs);
    w->n_kv--;
    if (is_align_key(key, len)) w->align = GGUF_WRITER_DEFAULT_ALIGN;
    return true;
}

/* Value of a kv being set as general.alignment: the spec's type is uint32
 * (the reference reader refuses any other), a nonzero power of two. */
static bool align_value(uint32_t type, const uint8_t *val, uint32_t *out) {
    uint32_t v;
    if (type != GGUF_VT_UINT32) return false;
    memcpy(&v, val, 4);
    if (v == 0 || (v & (v - 1)) != 0) return false;
    *out = v;
    return true;
}

/* Add a kv whose value bytes (after the type field) are given as up to two
 * pieces (a prefix such as a length or array header, then the payload). */
static tl_status add_kv(gguf_writer *w, const char *key, size_t key_len, uint32_t type,
                        const void *pre, size_t pre_len, const void *body, size_t body_len) {
    if (!w || !key) return tl_err(TL_ERR_INVALID, "gguf_writer: NULL writer or key");
    if (find_kv(w, key, key_len) >= 0)
        return tl_err(TL_ERR_INVALID, "gguf_writer: duplicate key '%.*s'", (int)key_len, key);
    if (is_align_key(key, key_len)) {
        uint32_t a;
        if (pre_len != 0 || !align_value(type, body, &a))
            return tl_err(TL_ERR_INVALID,
                          "gguf_writer: 'general.alignment' must be a uint32 power of two");
        w->align = a;
    }
    size_t n;
    if (!tl_add_ok(pre_len, body_len, &n))
        return tl_err(TL_ERR_INVALID, "gguf_writer: key '%.*s': value too large", (int)key_len, key);
    if (!grow((void **)&w->kvs, &w->cap_kv, w->n_kv, sizeof *w->kvs))
        return tl_err(TL_ERR_NOMEM, "gguf_writer: no memory for key '%.*s'", (int)key_len, key);
    wkv kv = {.key = malloc(key_len ? key_len : 1), .key_len = key_len, .type = type,
              .val = malloc(n ? n : 1), .val_len = n};
    if (!kv.key || !kv.val) {
        free(kv.key);
        free(kv.val);
        return tl_err(TL_ERR_NOMEM, "gguf_writer: no memory for key '%.*s'", (int)key_len, key);
    }
    memcpy(kv.key, key, key_len);
    if (pre_len) memcpy(kv.val, pre, pre_len);
    if (body_len) memcpy(kv.val + pre_len, body, body_len);
    w->kvs[w->n_kv++] = kv;
    return TL_OK;
}

tl_status gguf_writer_set_val(gguf_writer *w, const char *key, gguf_vtype type, const void *val) {
    if (!val) return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': NULL value", key ? key : "");
    if (type == GGUF_VT_STRING) {
        const char *s = *(const char *const *)val;
        if (!s) return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': NULL string", key ? key : "");
        return gguf_writer_set_strn(w, key, s, strlen(s));
    }
    size_t sz = gguf_vtype_size(type);
    if (sz == 0)
        return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': %s is not a scalar value type",
                      key ? key : "", gguf_vtype_name(type));
    return add_kv(w, key, key ? strlen(key) : 0, type, NULL, 0, val, sz);
}

tl_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, uint64_t len) {
    if (!v && len) return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': NULL string", key ? key : "");
    return add_kv(w, key, key ? strlen(key) : 0, GGUF_VT_STRING, &len, 8, v, (size_t)len);
}

tl_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    return gguf_writer_set_val(w, key, GGUF_VT_UINT32, &v);
}
tl_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    return gguf_writer_set_val(w, key, GGUF_VT_INT32, &v);
}
tl_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    return gguf_writer_set_val(w, key, GGUF_VT_UINT64, &v);
}
tl_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    return gguf_writer_set_val(w, key, GGUF_VT_FLOAT32, &v);
}
tl_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return gguf_writer_set_val(w, key, GGUF_VT_BOOL, &b);
}
tl_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    return gguf_writer_set_val(w, key, GGUF_VT_STRING, &v);
}

tl_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type,
                              const void *elems, uint64_t n) {
    const char *k = key ? key : "";
    if (!elems && n) return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': NULL array", k);
    uint8_t hdr[12];
    uint32_t et = elem_type;
    memcpy(hdr, &et, 4);
    memcpy(hdr + 4, &n, 8);
    if (elem_type != GGUF_VT_STRING) {
        size_t sz = gguf_vtype_size(elem_type), bytes;
        if (sz == 0)
            return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': arrays of %s are not supported", k,
                          gguf_vtype_name(elem_type));
        if (!tl_mul_ok(sz, (size_t)n, &bytes))
            return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': array too large", k);
        return add_kv(w, key, key ? strlen(key) : 0, GGUF_VT_ARRAY, hdr, 12, elems, bytes);
    }
    /* Strings: serialize (u64 length + bytes each) into one buffer. */
    const char *const *sv = elems;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!sv[i]) return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': element %llu is NULL", k,
                                  (unsigned long long)i);
        if (!tl_add_ok(total, 8 + strlen(sv[i]), &total))
            return tl_err(TL_ERR_INVALID, "gguf_writer: key '%s': array too large", k);
    }
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf) return tl_err(TL_ERR_NOMEM, "gguf_writer: key '%s': no memory", k);
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = strlen(sv[i]);
        memcpy(buf + pos, &len, 8);
        memcpy(buf + pos + 8, sv[i], (size_t)len);
        pos += 8 + (size_t)len;
    }
    tl_status st = add_kv(w, key, key ? strlen(key) : 0, GGUF_VT_ARRAY, hdr, 12, buf, total);
    free(buf);
    return st;
}

tl_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    return gguf_writer_set_arr(w, key, GGUF_VT_STRING, v, n);
}
tl_status gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    return gguf_writer_set_arr(w, key, GGUF_VT_INT32, v, n);
}
tl_status gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    return gguf_writer_set_arr(w, key, GGUF_VT_FLOAT32, v, n);
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t align) {
    if (!w) return;
    if (align == 0 || (align & (align - 1)) != 0) {
        w->sticky = TL_ERR_INVALID;
        snprintf(w->sticky_msg, sizeof w->sticky_msg,
                 "gguf_writer: alignment %u is not a nonzero power of two", align);
        return;
    }
    gguf_writer_remove_kv(w, "general.alignment");
    if (align != GGUF_WRITER_DEFAULT_ALIGN &&
        gguf_writer_set_u32(w, "general.alignment", align) != TL_OK) {
        w->sticky = TL_ERR_NOMEM;
        snprintf(w->sticky_msg, sizeof w->sticky_msg, "gguf_writer: cannot set alignment %u", align);
        return;
    }
    w->align = align;
}

/* The on-disk value bytes of a kv read from a file (after its type field):
 * the reader validated them, so their extent follows from the public
 * accessors. */
static size_t src_value_len(const gguf_file *src, const gguf_kv *kv, const uint8_t **start) {
    uint64_t len;
    if (kv->type == GGUF_VT_STRING) {
        *start = kv->data;
        memcpy(&len, kv->data, 8);
        return 8 + (size_t)len;
    }
    if (kv->type != GGUF_VT_ARRAY) {
        *start = kv->data;
        return gguf_vtype_size(kv->type);
    }
    *start = kv->data - 12; /* element type u32 + count u64 precede the elements */
    if (kv->arr_type != GGUF_VT_STRING || kv->arr_n == 0)
        return 12 + (size_t)kv->arr_n * gguf_vtype_size(kv->arr_type);
    gguf_str last = gguf_arr_str(src, kv, kv->arr_n - 1);
    return (size_t)((const uint8_t *)last.ptr + last.len - *start);
}

tl_status gguf_writer_copy_kvs(gguf_writer *w, const gguf_file *src) {
    if (!w || !src) return tl_err(TL_ERR_INVALID, "gguf_writer_copy_kvs: NULL argument");
    for (int64_t i = 0; i < gguf_n_kv(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        const uint8_t *start;
        size_t n = src_value_len(src, kv, &start);
        tl_status st = add_kv(w, kv->key.ptr, (size_t)kv->key.len, kv->type, NULL, 0, start, n);
        if (st) return tl_err_prefix(st, "gguf_writer_copy_kvs: ");
    }
    return TL_OK;
}

static tl_status add_tensor(gguf_writer *w, const char *name, tl_type type, uint32_t n_dims,
                            const int64_t *ne, const void *data, size_t size,
                            gguf_tensor_fill_fn fill, void *fill_ctx) {
    if (!w || !name || !ne || (!data && !fill))
        return tl_err(TL_ERR_INVALID, "gguf_writer_add_tensor: NULL argument");
    size_t name_len = strlen(name);
    if (name_len == 0) return tl_err(TL_ERR_INVALID, "gguf_writer_add_tensor: empty tensor name");
    for (size_t i = 0; i < w->n_t; i++)
        if (w->ts[i].name_len == name_len && memcmp(w->ts[i].name, name, name_len) == 0)
            return tl_err(TL_ERR_INVALID, "gguf_writer: duplicate tensor name '%s'", name);
    const tl_type_info *ti = tl_type_get(type);
    if (!ti) return tl_err(TL_ERR_INVALID, "gguf_writer: tensor '%s': unknown type %u", name, type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return tl_err(TL_ERR_INVALID, "gguf_writer: tensor '%s': n_dims %u is not in 1..%d", name,
                      n_dims, GGUF_MAX_DIMS);
    wtensor t = {.n_dims = n_dims, .type = type, .data = data, .size = size, .fill = fill,
                 .fill_ctx = fill_ctx};
    size_t want = 0;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0)
            return tl_err(TL_ERR_INVALID, "gguf_writer: tensor '%s': ne[%u] = %lld must be > 0",
                          name, d, (long long)t.ne[d]);
        if (d == 0) {
            want = tl_row_bytes(type, t.ne[0]);
            if (want == 0)
                return tl_err(TL_ERR_INVALID,
                              "gguf_writer: tensor '%s': ne[0] = %lld is not a multiple of %s's "
                              "block size %d", name, (long long)t.ne[0], ti->name, ti->blck);
        } else if (!tl_mul_ok(want, (size_t)t.ne[d], &want)) {
            return tl_err(TL_ERR_INVALID, "gguf_writer: tensor '%s': size overflows", name);
        }
    }
    if (want != size)
        return tl_err(TL_ERR_INVALID, "gguf_writer: tensor '%s': %zu bytes given, %s [%lld, %lld, "
                      "%lld, %lld] needs %zu", name, size, ti->name, (long long)t.ne[0],
                      (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], want);
    if (!grow((void **)&w->ts, &w->cap_t, w->n_t, sizeof *w->ts) ||
        !(t.name = malloc(name_len)))
        return tl_err(TL_ERR_NOMEM, "gguf_writer: no memory for tensor '%s'", name);
    memcpy(t.name, name, name_len);
    t.name_len = name_len;
    w->ts[w->n_t++] = t;
    return TL_OK;
}

tl_status gguf_writer_add_tensor(gguf_writer *w, const char *name, tl_type type, uint32_t n_dims,
                                 const int64_t *ne, const void *data, size_t size) {
    return add_tensor(w, name, type, n_dims, ne, data, size, NULL, NULL);
}

tl_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, tl_type type,
                                      uint32_t n_dims, const int64_t *ne, size_t size,
                                      gguf_tensor_fill_fn fill, void *ctx) {
    return add_tensor(w, name, type, n_dims, ne, NULL, size, fill, ctx);
}

/* ---- output ------------------------------------------------------------- */

typedef struct wout {
    FILE *fp;
    uint64_t pos;
    bool failed;
} wout;

static void out_bytes(wout *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (fwrite(p, 1, n, o->fp) != n) o->failed = true;
    o->pos += n;
}
static void out_u32(wout *o, uint32_t v) { out_bytes(o, &v, 4); }
static void out_u64(wout *o, uint64_t v) { out_bytes(o, &v, 8); }
static void out_pad(wout *o, uint32_t align) {
    static const uint8_t zeros[256];
    uint64_t pad = (align - o->pos % align) % align;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        out_bytes(o, zeros, k);
        pad -= k;
    }
}

tl_status gguf_writer_write(gguf_writer *w, const char *path) {
    if (!w || !path) return tl_err(TL_ERR_INVALID, "gguf_writer_write: NULL argument");
    if (w->sticky) return tl_err(w->sticky, "%s", w->sticky_msg);
    /* Offsets first, overflow-checked: each tensor starts aligned. */
    uint64_t *offs = malloc((w->n_t ? w->n_t : 1) * sizeof *offs);
    if (!offs) return tl_err(TL_ERR_NOMEM, "gguf_writer_write: no memory");
    uint64_t end = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        uint64_t a = (end + w->align - 1) / w->align * w->align;
        if (a < end || __builtin_add_overflow(a, w->ts[i].size, &end)) {
            free(offs);
            return tl_err(TL_ERR_INVALID, "gguf_writer_write: tensor data too large");
        }
        offs[i] = a;
    }
    size_t fill_max = 0;
    for (size_t i = 0; i < w->n_t; i++)
        if (w->ts[i].fill && w->ts[i].size > fill_max) fill_max = w->ts[i].size;
    uint8_t *fill_buf = fill_max ? malloc(fill_max) : NULL;
    if (fill_max && !fill_buf) {
        free(offs);
        return tl_err(TL_ERR_NOMEM, "gguf_writer_write: no memory for a %zu-byte tensor buffer",
                      fill_max);
    }
    wout o = {.fp = fopen(path, "wb")};
    if (!o.fp) {
        free(offs);
        free(fill_buf);
        return tl_err(TL_ERR_IO, "gguf_writer_write: cannot create '%s'", path);
    }
    out_bytes(&o, "GGUF", 4);
    out_u32(&o, 3);
    out_u64(&o, w->n_t);
    out_u64(&o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kvs[i];
        out_u64(&o, kv->key_len);
        out_bytes(&o, kv->key, kv->key_len);
        out_u32(&o, kv->type);
        out_bytes(&o, kv->val, kv->val_len);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->ts[i];
        out_u64(&o, t->name_len);
        out_bytes(&o, t->name, t->name_len);
        out_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) out_u64(&o, (uint64_t)t->ne[d]);
        out_u32(&o, (uint32_t)t->type);
        out_u64(&o, offs[i]);
    }
    out_pad(&o, w->align);
    uint64_t data_start = o.pos;
    tl_status fill_st = TL_OK;
    for (size_t i = 0; i < w->n_t && !o.failed && !fill_st; i++) {
        const wtensor *t = &w->ts[i];
        out_pad(&o, w->align); /* no-op for the first: data_start is aligned */
        if (o.pos - data_start != offs[i]) o.failed = true; /* cannot happen; guards the layout */
        if (t->fill) {
            fill_st = t->fill(t->fill_ctx, fill_buf, t->size);
            if (fill_st)
                tl_err_prefix(fill_st, "gguf_writer_write: tensor '%.*s': ", (int)t->name_len,
                              t->name);
            else
                out_bytes(&o, fill_buf, t->size);
        } else {
            out_bytes(&o, t->data, t->size);
        }
    }
    if (w->n_t) out_pad(&o, w->align);
    free(offs);
    free(fill_buf);
    bool ok = !o.failed && !ferror(o.fp);
    if (fclose(o.fp) != 0) ok = false;
    if (fill_st || !ok) {
        remove(path);
        if (fill_st) return fill_st;
        return tl_err(TL_ERR_IO, "gguf_writer_write: writing '%s' failed", path);
    }
    return TL_OK;
}
