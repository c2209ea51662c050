/* tests/fuzz/fuzz_gguf: libFuzzer harness for the GGUF reader.
 *
 * Opens the input with gguf_open_memory and, when it validates, touches every
 * kv, array element and tensor byte range the reader exposes, so ASan flags
 * any pointer the validation let through. Not built by CMake; see README.
 * Owns: nothing. Calls: io/gguf. */
#include <stdint.h>
#include <string.h>

#include "io/gguf.h"

static volatile unsigned fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f;
    if (gguf_open_memory(data, size, &f) != TL_OK) return 0;
    unsigned sum = 0;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (kv->key.len) sum += (unsigned char)kv->key.ptr[kv->key.len - 1];
        if (kv->type == GGUF_VT_ARRAY) {
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                if (kv->arr_type == GGUF_VT_STRING) {
                    gguf_str s = gguf_arr_str(f, kv, j);
                    if (s.len) sum += (unsigned char)s.ptr[s.len - 1];
                } else {
                    sum += (unsigned)gguf_arr_int(kv, j) + (gguf_arr_float(kv, j) > 0);
                }
            }
        } else if (kv->type == GGUF_VT_STRING) {
            uint64_t len;
            memcpy(&len, kv->data, 8);
            if (len) sum += kv->data[8 + len - 1];
        } else {
            sum += kv->data[gguf_vtype_size(kv->type) - 1];
        }
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *d = t->data;
        sum += d[0] + d[t->size - 1];
        char name[80];
        size_t n = t->name.len < sizeof name - 1 ? (size_t)t->name.len : sizeof name - 1;
        memcpy(name, t->name.ptr, n);
        name[n] = 0;
        sum += gguf_find_tensor(f, name) != NULL;
    }
    fuzz_sink = sum;
    gguf_close(f);
    return 0;
}
