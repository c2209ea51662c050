/* tests/fuzz/fuzz_gguf: libFuzzer harness for the GGUF reader and the GGUF
 * tokenizer loader.
 *
 * Opens the input with gguf_open_memory and, when it validates, touches every
 * kv, array element and tensor byte range the reader exposes, so ASan flags
 * any pointer the validation let through; then builds a tokenizer from its
 * tokenizer.ggml.* keys and encodes and decodes a short text with it.
 * Owns: nothing. Calls: io/gguf, text/tokenizer. */
#include "fuzz_util.h"
#include "io/gguf.h"
#include "text/tokenizer.h"

static void touch_kvs(const gguf_file *f, unsigned *sum) {
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (kv->key.len) *sum += (unsigned char)kv->key.ptr[kv->key.len - 1];
        if (kv->type == GGUF_VT_ARRAY) {
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                if (kv->arr_type == GGUF_VT_STRING) {
                    gguf_str s = gguf_arr_str(f, kv, j);
                    if (s.len) *sum += (unsigned char)s.ptr[s.len - 1];
                } else {
                    *sum += (unsigned)gguf_arr_int(kv, j) + (gguf_arr_float(kv, j) > 0);
                }
            }
        } else if (kv->type == GGUF_VT_STRING) {
            uint64_t len;
            memcpy(&len, kv->data, 8);
            if (len) *sum += kv->data[8 + len - 1];
        } else {
            *sum += kv->data[gguf_vtype_size(kv->type) - 1];
        }
    }
}

static void touch_tensors(const gguf_file *f, unsigned *sum) {
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *d = t->data;
        if (t->size) *sum += d[0] + d[t->size - 1];
        char name[80];
        size_t n = t->name.len < sizeof name - 1 ? (size_t)t->name.len : sizeof name - 1;
        memcpy(name, t->name.ptr, n);
        name[n] = 0;
        *sum += gguf_find_tensor(f, name) != NULL;
    }
}

static void try_tokenizer(const gguf_file *f, unsigned *sum) {
    tok_vocab *v;
    if (tok_load_gguf(f, &v) != TL_OK) return;
    static const char text[] = "Hello, world! 123 <|im_start|>\n\xc3\xa9\xe2\x96\x81\xf0\x9f\x98\x80 \xff";
    int32_t ids[256], n = 0;
    if (tok_encode(v, text, sizeof text - 1, true, true, ids, 256, &n) == TL_OK) {
        char *out;
        size_t len;
        if (tok_decode(v, ids, n, true, &out, &len) == TL_OK) {
            *sum += (unsigned)len;
            free(out);
        }
    }
    *sum += (unsigned)tok_n_vocab(v);
    tok_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f;
    if (gguf_open_memory(data, size, &f) != TL_OK) return 0;
    unsigned sum = 0;
    touch_kvs(f, &sum);
    touch_tensors(f, &sum);
    try_tokenizer(f, &sum);
    fuzz_sink = sum;
    gguf_close(f);
    return 0;
}
