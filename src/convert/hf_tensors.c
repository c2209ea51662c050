/* convert/hf_tensors: the checkpoint's tensors over its safetensors files.
 *
 * A folder holds either model.safetensors or shards named by
 * model.safetensors.index.json ("weight_map": tensor -> file). Every file is
 * mmapped and its header validated when opened (a truncated shard fails here,
 * naming the file and the tensor whose data runs past its end); every tensor
 * the index names must be in the file it names, and no tensor may appear
 * twice. Lookups are linear over a sorted name table (binary search).
 * Owns: the mappings and the name table. Calls: io/safetensors, cJSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/cvt_internal.h"

typedef struct cvt_wentry {
    const char *name; /* into the shard's index */
    const st_tensor *t;
    int file;
    bool used;
} cvt_wentry;

struct cvt_weights {
    st_file **files;
    char **file_names;
    int n_files;
    cvt_wentry *e;
    size_t n;
};

void cvt_weights_free(cvt_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n_files; i++) {
        st_close(w->files[i]);
        free(w->file_names[i]);
    }
    free(w->files);
    free(w->file_names);
    free(w->e);
    free(w);
}

static int went_cmp(const void *a, const void *b) {
    return strcmp(((const cvt_wentry *)a)->name, ((const cvt_wentry *)b)->name);
}

static tl_status add_file(cvt_weights *w, const char *dir, const char *fname) {
    for (int i = 0; i < w->n_files; i++)
        if (!strcmp(w->file_names[i], fname)) return TL_OK;
    if (strchr(fname, '/') || !strcmp(fname, "..") || !*fname)
        return tl_err(TL_ERR_FORMAT, "convert: weight file name '%s' is not a plain file name", fname);
    st_file **nf = realloc(w->files, (size_t)(w->n_files + 1) * sizeof *nf);
    if (!nf) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    w->files = nf;
    char **nn = realloc(w->file_names, (size_t)(w->n_files + 1) * sizeof *nn);
    if (!nn) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    w->file_names = nn;
    char *path = cvt_path_join(dir, fname);
    char *dup = strdup(fname);
    if (!path || !dup) {
        free(path);
        free(dup);
        return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    }
    if (!cvt_file_exists(path)) {
        tl_status s = tl_err(TL_ERR_NOT_FOUND, "convert: weight file '%s' is missing", path);
        free(path);
        free(dup);
        return s;
    }
    st_file *f;
    tl_status s = st_open_mmap(path, &f);
    free(path);
    if (s) {
        free(dup);
        return tl_err_prefix(s, "convert: ");
    }
    w->files[w->n_files] = f;
    w->file_names[w->n_files] = dup;
    w->n_files++;
    return TL_OK;
}

tl_status cvt_weights_open(const char *dir, cvt_weights **out) {
    *out = NULL;
    cvt_weights *w = calloc(1, sizeof *w);
    if (!w) return tl_err(TL_ERR_NOMEM, "convert: out of memory");
    char *single = cvt_path_join(dir, "model.safetensors");
    char *index = cvt_path_join(dir, "model.safetensors.index.json");
    cJSON *ij = NULL;
    tl_status s = TL_OK;
    if (!single || !index) {
        s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
        goto done;
    }
    const cJSON *map = NULL;
    if (cvt_file_exists(index)) {
        if ((s = cvt_read_json(index, &ij))) goto done;
        map = cJSON_GetObjectItemCaseSensitive(ij, "weight_map");
        if (!cJSON_IsObject(map) || !map->child) {
            s = tl_err(TL_ERR_FORMAT, "convert: %s has no \"weight_map\" object", index);
            goto done;
        }
        const cJSON *x;
        cJSON_ArrayForEach(x, map) {
            if (!cJSON_IsString(x)) {
                s = tl_err(TL_ERR_FORMAT, "convert: %s: weight_map entry '%s' is not a file name", index, x->string);
                goto done;
            }
            if ((s = add_file(w, dir, x->valuestring))) goto done;
        }
    } else if (cvt_file_exists(single)) {
        if ((s = add_file(w, dir, "model.safetensors"))) goto done;
    } else {
        s = tl_err(TL_ERR_NOT_FOUND, "convert: '%s' has neither model.safetensors nor model.safetensors.index.json",
                   dir);
        goto done;
    }
    size_t n = 0;
    for (int i = 0; i < w->n_files; i++) n += (size_t)st_n_tensors(w->files[i]);
    w->e = calloc(n ? n : 1, sizeof *w->e);
    if (!w->e) {
        s = tl_err(TL_ERR_NOMEM, "convert: out of memory");
        goto done;
    }
    for (int i = 0; i < w->n_files; i++)
        for (int k = 0; k < st_n_tensors(w->files[i]); k++) {
            const st_tensor *t = st_tensor_at(w->files[i], k);
            w->e[w->n++] = (cvt_wentry){t->name, t, i, false};
        }
    qsort(w->e, w->n, sizeof *w->e, went_cmp);
    for (size_t i = 1; i < w->n; i++)
        if (!strcmp(w->e[i].name, w->e[i - 1].name)) {
            s = tl_err(TL_ERR_FORMAT, "convert: tensor '%s' appears in both %s and %s", w->e[i].name,
                       w->file_names[w->e[i - 1].file], w->file_names[w->e[i].file]);
            goto done;
        }
    if (map) { /* the index and the files must agree */
        const cJSON *x;
        cJSON_ArrayForEach(x, map) {
            const char *f;
            if (!cvt_weights_find(w, x->string, &f) || strcmp(f, x->valuestring)) {
                s = tl_err(TL_ERR_FORMAT, "convert: %s lists tensor '%s' in %s, which does not hold it", index,
                           x->string, x->valuestring);
                goto done;
            }
        }
        for (size_t i = 0; i < w->n; i++)
            if (!cJSON_GetObjectItemCaseSensitive(map, w->e[i].name)) {
                s = tl_err(TL_ERR_FORMAT, "convert: tensor '%s' in %s is not in %s", w->e[i].name,
                           w->file_names[w->e[i].file], index);
                goto done;
            }
    }
done:
    cJSON_Delete(ij);
    free(single);
    free(index);
    if (s) {
        cvt_weights_free(w);
        return s;
    }
    *out = w;
    return TL_OK;
}

static cvt_wentry *went_find(const cvt_weights *w, const char *name) {
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(w->e[mid].name, name);
        if (!c) return &w->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const st_tensor *cvt_weights_find(cvt_weights *w, const char *name, const char **file) {
    cvt_wentry *e = went_find(w, name);
    if (file) *file = e ? w->file_names[e->file] : NULL;
    return e ? e->t : NULL;
}

void cvt_weights_use(cvt_weights *w, const char *name) {
    cvt_wentry *e = went_find(w, name);
    if (e) e->used = true;
}

const char *cvt_weights_unused(const cvt_weights *w, const char *const *ignore_suffixes) {
    for (size_t i = 0; i < w->n; i++) {
        if (w->e[i].used) continue;
        bool skip = false;
        size_t ln = strlen(w->e[i].name);
        for (const char *const *s = ignore_suffixes; s && *s && !skip; s++) {
            size_t ls = strlen(*s);
            skip = ln >= ls && !strcmp(w->e[i].name + ln - ls, *s);
        }
        if (!skip) return w->e[i].name;
    }
    return NULL;
}
