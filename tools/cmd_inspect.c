/* tools/cmd_inspect: `tallow inspect FILE [--tensors] [--all-arrays]`.
 *
 * Prints what a GGUF file holds so a person (or a test) can see it without
 * loading the model: header facts, every kv (arrays abbreviated unless
 * --all-arrays, long strings cut with their length), the tensor table with
 * --tensors, and totals (parameters, bytes by type). Output is one item per
 * line with stable columns so scripts can parse it; bytes outside printable
 * ASCII in strings are escaped except UTF-8 (printed raw).
 * Owns: nothing. Calls: io/gguf, tensor/dtype. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "io/gguf.h"
#include "tensor/dtype.h"

#define INSPECT_ARR_SHOW 6     /* array elements shown without --all-arrays */
#define INSPECT_STR_MAX 64     /* longer strings are cut (kv values) */

static void inspect_usage(FILE *f) {
    fprintf(f, "usage: tallow inspect FILE [--tensors] [--all-arrays]\n"
               "  print a GGUF file's header, metadata and totals\n"
               "  --tensors     also list every tensor (name, type, shape, offset, bytes)\n"
               "  --all-arrays  print every array element and whole strings\n");
}

/* Print bytes as a quoted string; cut at max bytes (0: no limit), backing
 * off to a UTF-8 character boundary, then say how long it really was. */
static void print_str(const char *p, uint64_t len, uint64_t max) {
    uint64_t n = len;
    if (max && len > max) {
        n = max;
        while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80) n--;
    }
    putchar('"');
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        switch (c) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        default:
            if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
            else putchar(c);
        }
    }
    putchar('"');
    if (n < len) printf("... (%" PRIu64 " bytes)", len);
}

/* A key or tensor name as one whitespace-free token. */
static void print_name(const gguf_str *s) {
    for (uint64_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->ptr[i];
        if (c <= 0x20 || c == 0x7f || c == '\\') printf("\\x%02x", c);
        else putchar(c);
    }
}

static void print_scalar(gguf_vtype t, const uint8_t *p) {
    gguf_kv one = {.type = GGUF_VT_ARRAY, .arr_type = t, .arr_n = 1, .data = p};
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32:
        printf("%" PRId64, gguf_arr_int(&one, 0));
        break;
    case GGUF_VT_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        printf("%" PRIu64, v);
        break;
    }
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        printf("%" PRId64, gguf_arr_int(&one, 0));
        break;
    case GGUF_VT_BOOL: fputs(p[0] ? "true" : "false", stdout); break;
    case GGUF_VT_FLOAT32: printf("%.9g", gguf_arr_float(&one, 0)); break;
    case GGUF_VT_FLOAT64: printf("%.17g", gguf_arr_float(&one, 0)); break;
    default: fputs("?", stdout);
    }
}

static void print_kv(const gguf_file *f, const gguf_kv *kv, bool all) {
    printf("  ");
    print_name(&kv->key);
    if (kv->type == GGUF_VT_STRING) {
        uint64_t len;
        memcpy(&len, kv->data, 8);
        printf(" string = ");
        print_str((const char *)kv->data + 8, len, all ? 0 : INSPECT_STR_MAX);
    } else if (kv->type != GGUF_VT_ARRAY) {
        printf(" %s = ", gguf_vtype_name(kv->type));
        print_scalar(kv->type, kv->data);
    } else {
        printf(" array[%s,%" PRIu64 "] = [", gguf_vtype_name(kv->arr_type), kv->arr_n);
        uint64_t show = (all || kv->arr_n <= INSPECT_ARR_SHOW) ? kv->arr_n : INSPECT_ARR_SHOW;
        size_t esz = gguf_vtype_size(kv->arr_type);
        for (uint64_t i = 0; i < show; i++) {
            if (i) fputs(", ", stdout);
            if (kv->arr_type == GGUF_VT_STRING) {
                gguf_str s = gguf_arr_str(f, kv, i);
                print_str(s.ptr, s.len, all ? 0 : INSPECT_STR_MAX);
            } else {
                print_scalar(kv->arr_type, kv->data + i * esz);
            }
        }
        if (show < kv->arr_n) printf(", ... (%" PRIu64 " more)", kv->arr_n - show);
        putchar(']');
    }
    putchar('\n');
}

static void print_shape(const gguf_tensor *t, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? "," : "", t->ne[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static int64_t n_elems(const gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* checked at open */
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = false, all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tensors")) {
            tensors = true;
        } else if (!strcmp(argv[i], "--all-arrays")) {
            all = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            inspect_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            fprintf(stderr, "tallow inspect: unknown option '%s'\n", argv[i]);
            inspect_usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "tallow inspect: more than one file given\n");
            inspect_usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        inspect_usage(stderr);
        return 2;
    }
    gguf_file *f;
    if (gguf_open(path, &f) != TL_OK) {
        fprintf(stderr, "tallow inspect: %s\n", tl_last_error());
        return 1;
    }
    printf("file:        %s\n", path);
    printf("version:     %" PRIu32 "\n", gguf_version(f));
    printf("alignment:   %" PRIu64 "\n", gguf_alignment(f));
    printf("data offset: %" PRIu64 "\n", gguf_data_offset(f));
    printf("file size:   %zu\n", gguf_size(f));
    printf("kvs:         %" PRId64 "\n", gguf_n_kv(f));
    printf("tensors:     %" PRId64 "\n", gguf_n_tensors(f));
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < gguf_n_kv(f); i++) print_kv(f, gguf_kv_at(f, i), all);

    int64_t n_t = gguf_n_tensors(f);
    if (tensors) {
        printf("\ntensor table:\n  %-5s %-40s %-8s %-24s %14s %14s\n", "#", "name", "type", "shape",
               "offset", "bytes");
        for (int64_t i = 0; i < n_t; i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            char shape[128];
            print_shape(t, shape, sizeof shape);
            printf("  %-5" PRId64 " ", i);
            print_name(&t->name);
            int pad = 40 - (int)t->name.len;
            printf("%*s %-8s %-24s %14" PRIu64 " %14" PRIu64 "\n", pad > 0 ? pad : 0, "",
                   tl_type_name(t->type), shape, t->offset, t->size);
        }
    }
    /* Totals by type, in type-id order. */
    uint64_t params = 0, bytes = 0;
    uint64_t by_n[TL_TYPE_COUNT] = {0}, by_bytes[TL_TYPE_COUNT] = {0}, by_params[TL_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < n_t; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        uint64_t ne = (uint64_t)n_elems(t);
        params += ne;
        bytes += t->size;
        by_n[t->type]++;
        by_bytes[t->type] += t->size;
        by_params[t->type] += ne;
    }
    printf("\ntotals:\n");
    printf("  parameters: %" PRIu64 " (%.2f M)\n", params, (double)params / 1e6);
    printf("  bytes:      %" PRIu64 " (%.2f MiB)\n", bytes, (double)bytes / (1024.0 * 1024.0));
    for (uint32_t t = 0; t < TL_TYPE_COUNT; t++)
        if (by_n[t])
            printf("  type %-8s %6" PRIu64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes\n",
                   tl_type_name(t), by_n[t], by_params[t], by_bytes[t]);
    gguf_close(f);
    return 0;
}
