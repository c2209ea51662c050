/* tests/fuzz/fuzz_safetensors: libFuzzer harness for the safetensors reader.
 * The input is parsed with st_open_memory; when it validates, every tensor's
 * first and last data byte is read (ASan flags a range the validation let
 * through), every name is looked up again and the metadata is read.
 * Owns: nothing. Calls: io/safetensors. */
#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file *f;
    if (st_open_memory(data, size, &f) != TL_OK) return 0;
    unsigned sum = 0;
    for (int i = 0; i < st_n_tensors(f); i++) {
        const st_tensor *t = st_tensor_at(f, i);
        const uint8_t *d = t->data;
        if (t->nbytes) sum += d[0] + d[t->nbytes - 1];
        if (st_find(f, t->name) != t) __builtin_trap(); /* names are unique: lookup finds this one */
        sum += (unsigned)t->ndim + (unsigned)st_dtype_size(t->dtype);
    }
    const char *fmt = st_meta(f, "format");
    if (fmt) sum += (unsigned)strlen(fmt);
    fuzz_sink = sum;
    st_close(f);
    return 0;
}
