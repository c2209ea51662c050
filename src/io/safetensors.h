/* io/safetensors: reader and writer for the safetensors format (an 8-byte
 * little-endian header length, a JSON header mapping tensor names to
 * {dtype, shape, data_offsets} plus an optional "__metadata__" string map,
 * then the raw little-endian data). Used for training checkpoints and test
 * fixtures.
 * The reader loads the file, parses the header with a small JSON parser and
 * validates everything before use: header length within the file, known
 * dtypes, shapes whose byte size equals the offsets' span, offsets inside the
 * data section and not overlapping, no tensor name, metadata key or tensor
 * field given twice, and the header no larger than ST_MAX_HEADER (the
 * reference implementation's limit). Every string is copied into exactly its
 * own length, so memory follows the header's size. Errors name the tensor
 * and the offending value. st_open_mmap maps the file read-only instead of reading it, so a
 * converter can stream many gigabytes of weights without holding them in
 * memory. Owns: the file bytes (or mapping) and the parsed index.
 * Calls: base/status, POSIX mmap. */
#ifndef TL_IO_SAFETENSORS_H
#define TL_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER 100000000 /* bytes of JSON header */

typedef struct st_tensor {
    char *name;
    char dtype[8]; /* "F32", "F64", "I32", "I64", "F16", "BF16", "U8", ... */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data; /* into the loaded file */
    size_t nbytes;
} st_tensor;

typedef struct st_file st_file;

tl_status st_open(const char *path, st_file **out);
/* Same, but the file is mmapped read-only (tensor data points into the
 * mapping); errors are prefixed with the path. */
tl_status st_open_mmap(const char *path, st_file **out);
/* Parse a buffer the caller keeps alive (no copy). */
tl_status st_open_memory(const void *buf, size_t size, st_file **out);
void st_close(st_file *f);
int st_n_tensors(const st_file *f);
const st_tensor *st_tensor_at(const st_file *f, int i);
const st_tensor *st_find(const st_file *f, const char *name); /* NULL if absent; O(log n) */
const char *st_meta(const st_file *f, const char *key);       /* NULL if absent */
size_t st_dtype_size(const char *dtype);                      /* 0 if unknown */

typedef struct st_writer st_writer;
tl_status st_writer_init(st_writer **out);
void st_writer_free(st_writer *w);
/* data is referenced until st_writer_write returns; nbytes must match dtype x shape. */
tl_status st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape,
                        const void *data, size_t nbytes);
tl_status st_writer_meta(st_writer *w, const char *key, const char *value);
/* Writes to path.tmp then renames, so a crash never leaves a torn checkpoint. */
tl_status st_writer_write(st_writer *w, const char *path);

#endif
