/* io/gguf: GGUF v2/v3 reader (mmap, validated) and writer.
 *
 * The reader maps the file read-only and validates every count, length,
 * type and offset against the real file size before anything is used, so a
 * malformed or hostile file yields TL_ERR_FORMAT with a message naming the
 * byte offset and the key or tensor involved: never a crash, an over-read or
 * an allocation larger than the file could justify. Strings returned point
 * into the mapping (not NUL-terminated: use .len). Tensor data pointers point
 * into the mapping too: weights are never copied.
 * Owns: the mapping and the kv/tensor index. Calls: base, tensor/dtype. */
#ifndef TL_IO_GGUF_H
#define TL_IO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

typedef enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
} gguf_vtype;

typedef struct gguf_str {
    const char *ptr; /* into the mapping; not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    gguf_vtype type;
    /* scalars (type != ARRAY): raw little-endian value at `data`; for
     * STRING, `data` is the u64 length prefix followed by the bytes */
    /* arrays: element type, count, raw element bytes at `data` */
    gguf_vtype arr_type;
    uint64_t arr_n;
    const uint8_t *data;
    /* string arrays: offsets of each element's u64 length prefix relative
     * to the mapping start (built at open; NULL for other arrays). */
    const uint64_t *str_off;
} gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] fastest-varying (row length); unused dims are 1 */
    tl_type type;
    uint64_t offset;   /* relative to the data section */
    uint64_t size;     /* bytes, from type and ne */
    const void *data;  /* into the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Map and validate a file. On error *out is NULL and a message is set. */
tl_status gguf_open(const char *path, gguf_file **out);
/* Validate a buffer the caller keeps alive (tests, fuzzing). No copy. */
tl_status gguf_open_memory(const void *buf, size_t size, gguf_file **out);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);   /* start of the data section */
const void *gguf_base(const gguf_file *f);       /* start of the mapping */
size_t gguf_size(const gguf_file *f);            /* file size in bytes */

int64_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key); /* NULL if absent */

int64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */

/* Typed getters. TL_ERR_NOT_FOUND if the key is absent (message set),
 * TL_ERR_FORMAT if present with an incompatible type (message names key,
 * expected and actual type). get_int accepts any integer type and checks
 * that the value fits int64; get_float accepts float32/float64 and ints. */
tl_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
tl_status gguf_get_float(const gguf_file *f, const char *key, double *out);
tl_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
tl_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Array access: element type and count; TL_ERR_FORMAT if not an array. */
tl_status gguf_get_arr(const gguf_file *f, const char *key, const gguf_kv **out);

/* Elements of an array kv (bounds already validated at open; i < arr_n). */
gguf_str gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i);
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);   /* any integer elem type */
double gguf_arr_float(const gguf_kv *kv, uint64_t i);  /* float32/64 elem type */

const char *gguf_vtype_name(gguf_vtype t);
/* Bytes of one scalar value of type t; 0 for string, array and unknown. */
size_t gguf_vtype_size(gguf_vtype t);

/* --- writer ---------------------------------------------------------------
 * Builds a GGUF v3 file in memory-light fashion: metadata and tensor infos are
 * kept in the writer, tensor data is referenced (not copied) until write. */
typedef struct gguf_writer gguf_writer;

tl_status gguf_writer_init(gguf_writer **out);
void gguf_writer_free(gguf_writer *w);
/* Default 32; other values are recorded as general.alignment. A value that
 * is not a power of two makes gguf_writer_write fail with TL_ERR_INVALID. */
void gguf_writer_set_alignment(gguf_writer *w, uint32_t align);
tl_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
tl_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
tl_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
tl_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
tl_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
tl_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
tl_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
tl_status gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
tl_status gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Copy every kv of an open file (e.g. for quantize), skipping none. */
tl_status gguf_writer_copy_kvs(gguf_writer *w, const gguf_file *src);
/* data must stay valid until gguf_writer_write returns; size must equal
 * tl_row_bytes(type, ne[0]) * ne[1] * ne[2] * ne[3]. */
tl_status gguf_writer_add_tensor(gguf_writer *w, const char *name, tl_type type,
                                 uint32_t n_dims, const int64_t *ne, const void *data, size_t size);
tl_status gguf_writer_write(gguf_writer *w, const char *path);

/* Any scalar type (val points at one value of `type`, host little-endian),
 * or GGUF_VT_STRING (val points at a `const char *`, NUL-terminated). Keys
 * must be unique (TL_ERR_INVALID otherwise); "general.alignment" must be a
 * uint32 power of two and sets the writer's alignment. */
tl_status gguf_writer_set_val(gguf_writer *w, const char *key, gguf_vtype type, const void *val);
/* String with explicit length (may contain NUL bytes). */
tl_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, uint64_t len);
/* Array of any scalar element type (elems: n packed values), or of strings
 * (elem_type GGUF_VT_STRING, elems: const char *const [n]). */
tl_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type,
                              const void *elems, uint64_t n);
/* A tensor whose bytes are produced at write time (e.g. quantized on the
 * fly), so a converter never holds the whole output in memory: fill(ctx, dst,
 * size) must write exactly `size` bytes to dst; a non-OK status aborts the
 * write (the partial file is removed). The writer reuses one buffer sized for
 * the largest such tensor. */
typedef tl_status (*gguf_tensor_fill_fn)(void *ctx, void *dst, size_t size);
tl_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, tl_type type,
                                      uint32_t n_dims, const int64_t *ne, size_t size,
                                      gguf_tensor_fill_fn fill, void *ctx);
/* Drop a key set earlier (e.g. after copy_kvs, to replace general.file_type).
 * Returns false if it was not set. */
bool gguf_writer_remove_kv(gguf_writer *w, const char *key);

#endif
