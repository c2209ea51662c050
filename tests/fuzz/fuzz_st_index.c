/* tests/fuzz/fuzz_st_index: libFuzzer harness for a checkpoint's sharded
 * weights: the input carries model.safetensors.index.json and one shard
 * ("a.safetensors"), split as fuzz_split2 says, written to a scratch folder
 * and opened with cvt_weights_open (index parsed with cJSON, every named
 * file mmapped and validated, index and files cross-checked, duplicates
 * refused); then every tensor is looked up by name and read.
 * Owns: nothing. Calls: convert (cvt_weights), io/safetensors. */
#include "convert/cvt_internal.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *idx, *shard;
    size_t in, sn;
    fuzz_split2(data, size, &idx, &in, &shard, &sn);
    fuzz_write(fuzz_path(0, "model.safetensors.index.json"), idx, in);
    fuzz_write(fuzz_path(1, "a.safetensors"), shard, sn);
    cvt_weights *w;
    if (cvt_weights_open(fuzz_dir(), &w) != TL_OK) return 0;
    /* the shard's own tensors, found again through the index */
    st_file *f;
    unsigned sum = 0;
    if (st_open_memory(shard, sn, &f) == TL_OK) {
        for (int i = 0; i < st_n_tensors(f); i++) {
            const char *file;
            const st_tensor *t = cvt_weights_find(w, st_tensor_at(f, i)->name, &file);
            if (!t || strcmp(file, "a.safetensors")) __builtin_trap(); /* opened means the index agrees */
            const uint8_t *d = t->data;
            if (t->nbytes) sum += d[0] + d[t->nbytes - 1];
            cvt_weights_use(w, t->name);
        }
        st_close(f);
    }
    if (cvt_weights_unused(w, NULL)) __builtin_trap(); /* every tensor was used above */
    fuzz_sink = sum;
    cvt_weights_free(w);
    return 0;
}
