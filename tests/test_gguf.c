/* tests/test_gguf: the GGUF reader and writer.
 *
 * 1. Round trip: a file with every value type, string/int/float arrays and
 *    f32/f16/q8_0 tensors is written by gguf_writer and read back; values
 *    are compared with what went in and the layout with the GGUF spec
 *    (32-byte alignment, tensors padded). Cross-checking against a reader
 *    nobody here wrote is tests/test_gguf_ref.py's job (the `gguf` package).
 * 2. Every truncation of that file must fail cleanly, except lengths that
 *    only cut the padding after the last tensor (which is still a valid file).
 * 3. A malformed corpus built byte by byte here (independently of the
 *    writer): each case has a good twin that must open and a bad one that
 *    must fail with TL_ERR_FORMAT and a message naming the culprit.
 * 4. Seeded random mutations: never crash (run under ASan+UBSan in CI).
 * 5. Writer validation, fill callbacks, copy_kvs, getters, open errors,
 *    hashing with 2000 keys and 1500 tensors. */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fp16.h"
#include "io/gguf.h"
#include "test_util.h"

/* ---- a byte builder for hand-made files ---------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n) nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) abort();
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_pad(buf *b, size_t align) {
    uint8_t z = 0;
    while (b->n % align) b_put(b, &z, 1);
}

/* GGUF value type and tensor type ids from the spec, spelled out here so
 * the hand-made files do not depend on the header under test. */
enum { VT_U8 = 0, VT_I8, VT_U16, VT_I16, VT_U32, VT_I32, VT_F32, VT_BOOL, VT_STR, VT_ARR,
       VT_U64, VT_I64, VT_F64 };
enum { TY_F32 = 0, TY_F16 = 1, TY_Q8_0 = 8 };

typedef struct tdesc {
    const char *name;
    uint64_t name_len_claim; /* 0: strlen(name) */
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t offset;
} tdesc;

typedef struct opts {
    char magic[5];
    uint32_t version;
    uint64_t n_kv_claim, n_t_claim; /* 0: the real counts */
    int align_kind;                 /* 0: no key, 1: u32 align_val, 2: string, 3: float32 */
    uint32_t align_val;
    buf extra;                      /* raw extra kvs appended after the standard ones */
    int n_extra;
    tdesc t[2];
    size_t data_size;
} opts;

static void opts_default(opts *o) {
    memset(o, 0, sizeof *o);
    memcpy(o->magic, "GGUF", 4);
    o->version = 3;
    /* tensor_a: f32 [8,2] = 64 bytes at 0; tensor_b: q8_0 [32,1] = 34 bytes at 64 */
    o->t[0] = (tdesc){"tensor_a", 0, 2, {8, 2}, TY_F32, 0};
    o->t[1] = (tdesc){"tensor_b", 0, 2, {32, 1}, TY_Q8_0, 64};
    o->data_size = 128;
}

static void build(const opts *o, buf *b) {
    b->n = 0;
    b_put(b, o->magic, 4);
    b_u32(b, o->version);
    b_u64(b, o->n_t_claim ? o->n_t_claim : 2);
    b_u64(b, o->n_kv_claim ? o->n_kv_claim : (uint64_t)(3 + (o->align_kind != 0) + o->n_extra));
    b_str(b, "general.architecture");
    b_u32(b, VT_STR);
    b_str(b, "test");
    b_str(b, "test.arr");
    b_u32(b, VT_ARR);
    b_u32(b, VT_I32);
    b_u64(b, 3);
    for (int32_t i = 1; i <= 3; i++) b_put(b, &i, 4);
    b_str(b, "test.strs");
    b_u32(b, VT_ARR);
    b_u32(b, VT_STR);
    b_u64(b, 2);
    b_str(b, "a");
    b_str(b, "bc");
    size_t align = 32;
    if (o->align_kind) {
        b_str(b, "general.alignment");
        if (o->align_kind == 1) {
            b_u32(b, VT_U32);
            b_u32(b, o->align_val);
            if (o->align_val && !(o->align_val & (o->align_val - 1)) && o->align_val <= 4096)
                align = o->align_val;
        } else if (o->align_kind == 2) {
            b_u32(b, VT_STR);
            b_str(b, "32");
        } else {
            float f = 32.0f;
            b_u32(b, VT_F32);
            b_put(b, &f, 4);
        }
    }
    b_put(b, o->extra.p, o->extra.n);
    for (int i = 0; i < 2; i++) {
        const tdesc *t = &o->t[i];
        b_u64(b, t->name_len_claim ? t->name_len_claim : strlen(t->name));
        b_put(b, t->name, strlen(t->name));
        b_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 5; d++) b_u64(b, t->ne[d]);
        b_u32(b, t->type);
        b_u64(b, t->offset);
    }
    b_pad(b, align);
    for (size_t i = 0; i < o->data_size; i++) {
        uint8_t v = (uint8_t)(i * 7 + 1);
        b_put(b, &v, 1);
    }
}

/* Extra kv helpers: append to o->extra and count it. */
static void x_key(opts *o, const char *key, uint32_t type) {
    b_str(&o->extra, key);
    b_u32(&o->extra, type);
    o->n_extra++;
}

/* ---- the malformed corpus ----------------------------------------------- */

typedef void (*case_fn)(opts *o, bool bad);

static void c_magic(opts *o, bool bad) { if (bad) memcpy(o->magic, "GGUG", 4); }
static void c_v1(opts *o, bool bad) { o->version = bad ? 1 : 2; }
static void c_v4(opts *o, bool bad) { if (bad) o->version = 4; }
static void c_v0(opts *o, bool bad) { if (bad) o->version = 0; }
static void c_big_endian(opts *o, bool bad) { if (bad) o->version = 0x03000000u; }
static void c_huge_nkv(opts *o, bool bad) { if (bad) o->n_kv_claim = 1ull << 60; }
static void c_max_nkv(opts *o, bool bad) { if (bad) o->n_kv_claim = UINT64_MAX; }
static void c_huge_nt(opts *o, bool bad) { if (bad) o->n_t_claim = 1ull << 60; }
static void c_nkv_plus1(opts *o, bool bad) { if (bad) o->n_kv_claim = 4; }
static void c_nt_plus1(opts *o, bool bad) { if (bad) o->n_t_claim = 3; }
static void c_key_len(opts *o, bool bad) {
    if (!bad) { x_key(o, "test.k", VT_U8); b_put(&o->extra, "\1", 1); return; }
    b_u64(&o->extra, 1ull << 62);
    o->n_extra++;
}
static void c_str_len(opts *o, bool bad) {
    x_key(o, "test.s", VT_STR);
    if (bad) b_u64(&o->extra, 9999999);
    else b_str(&o->extra, "hello");
}
static void c_str_len_max(opts *o, bool bad) {
    x_key(o, "test.s", VT_STR);
    if (bad) b_u64(&o->extra, UINT64_MAX);
    else b_str(&o->extra, "");
}
static void c_arr_i32_count(opts *o, bool bad) {
    x_key(o, "test.big", VT_ARR);
    b_u32(&o->extra, VT_I32);
    b_u64(&o->extra, bad ? 1ull << 62 : 1); /* 2^62 * 4 bytes overflows 64 bits */
    b_u32(&o->extra, 7);
}
static void c_arr_u64_count(opts *o, bool bad) {
    x_key(o, "test.big", VT_ARR);
    b_u32(&o->extra, VT_U64);
    b_u64(&o->extra, bad ? UINT64_MAX : 1);
    b_u64(&o->extra, 7);
}
static void c_arr_str_count(opts *o, bool bad) {
    x_key(o, "test.big", VT_ARR);
    b_u32(&o->extra, VT_STR);
    b_u64(&o->extra, bad ? 1ull << 40 : 1);
    b_str(&o->extra, "x");
}
static void c_arr_str_elem(opts *o, bool bad) {
    x_key(o, "test.big", VT_ARR);
    b_u32(&o->extra, VT_STR);
    b_u64(&o->extra, 2);
    b_str(&o->extra, "x");
    if (bad) b_u64(&o->extra, 1ull << 50);
    else b_str(&o->extra, "yz");
}
static void c_vtype(opts *o, bool bad) {
    x_key(o, "test.bad", bad ? 13 : VT_U32);
    b_u32(&o->extra, 5);
}
static void c_vtype_max(opts *o, bool bad) {
    x_key(o, "test.bad", bad ? UINT32_MAX : VT_U32);
    b_u32(&o->extra, 5);
}
static void c_arr_etype(opts *o, bool bad) {
    x_key(o, "test.bad", VT_ARR);
    b_u32(&o->extra, bad ? 13 : VT_U8);
    b_u64(&o->extra, 1);
    b_put(&o->extra, "\5", 1);
}
static void c_nested(opts *o, bool bad) {
    x_key(o, "test.nested", VT_ARR);
    if (bad) {
        b_u32(&o->extra, VT_ARR);
        b_u64(&o->extra, 1);
    }
    b_u32(&o->extra, VT_U8);
    b_u64(&o->extra, 1);
    b_put(&o->extra, "\5", 1);
}
static void c_dup_key(opts *o, bool bad) {
    x_key(o, bad ? "test.arr" : "test.arr2", VT_U8);
    b_put(&o->extra, "\1", 1);
}
static void c_align0(opts *o, bool bad) { o->align_kind = 1; o->align_val = bad ? 0 : 32; }
static void c_align3(opts *o, bool bad) { o->align_kind = 1; o->align_val = bad ? 3 : 64; }
static void c_align_huge(opts *o, bool bad) { o->align_kind = 1; o->align_val = bad ? 1u << 30 : 16; }
static void c_align_str(opts *o, bool bad) { o->align_kind = bad ? 2 : 1; o->align_val = 32; }
static void c_align_f32(opts *o, bool bad) { o->align_kind = bad ? 3 : 1; o->align_val = 32; }
static void c_ndims0(opts *o, bool bad) { if (bad) o->t[1].n_dims = 0; }
static void c_ndims5(opts *o, bool bad) {
    o->t[1].n_dims = bad ? 5 : 4;
    o->t[1].ne[2] = o->t[1].ne[3] = o->t[1].ne[4] = 1;
}
static void c_ne0(opts *o, bool bad) { if (bad) o->t[1].ne[1] = 0; }
static void c_ne_neg(opts *o, bool bad) { if (bad) o->t[1].ne[1] = (uint64_t)-3; }
static void c_ne_overflow(opts *o, bool bad) {
    if (bad) o->t[0].ne[0] = o->t[0].ne[1] = 1ull << 32;
}
static void c_bytes_overflow(opts *o, bool bad) {
    if (bad) { o->t[0].ne[0] = 1ull << 62; o->t[0].ne[1] = 1; }
}
static void c_bytes_huge(opts *o, bool bad) {
    if (bad) { o->t[0].ne[0] = 1ull << 61; o->t[0].ne[1] = 1; }
}
static void c_type4(opts *o, bool bad) { if (bad) o->t[1].type = 4; }
static void c_type1000(opts *o, bool bad) { if (bad) o->t[1].type = 1000; }
static void c_block(opts *o, bool bad) { if (bad) o->t[1].ne[0] = 33; }
static void c_misaligned(opts *o, bool bad) { o->t[1].offset = bad ? 65 : 64; }
static void c_off_past(opts *o, bool bad) { if (bad) o->t[1].offset = 1ull << 40; }
static void c_off_overflow(opts *o, bool bad) { if (bad) o->t[1].offset = UINT64_MAX - 31; }
static void c_data_past(opts *o, bool bad) { if (bad) o->t[1].offset = 96; }
static void c_data_short(opts *o, bool bad) { o->data_size = bad ? 97 : 98; }
static void c_overlap(opts *o, bool bad) { if (bad) o->t[1].offset = 32; }
static void c_overlap_same(opts *o, bool bad) { o->t[1].offset = bad ? 0 : 64; }
static void c_dup_tensor(opts *o, bool bad) { if (bad) o->t[1].name = "tensor_a"; }
static void c_empty_name(opts *o, bool bad) { if (bad) o->t[1].name = ""; }
static void c_name_len(opts *o, bool bad) { if (bad) o->t[1].name_len_claim = 1ull << 60; }

typedef struct mcase {
    const char *what;
    case_fn fn;
    tl_status want;
    const char *word1, *word2; /* both must occur in the message (NULL: skip) */
} mcase;

static const mcase malformed[] = {
    {"wrong magic", c_magic, TL_ERR_FORMAT, "magic", NULL},
    {"version 1 (good twin: version 2)", c_v1, TL_ERR_FORMAT, "version 1", NULL},
    {"version 4", c_v4, TL_ERR_FORMAT, "version 4", NULL},
    {"version 0", c_v0, TL_ERR_FORMAT, "version 0", NULL},
    {"big-endian", c_big_endian, TL_ERR_FORMAT, "big-endian", NULL},
    {"n_kv 2^60", c_huge_nkv, TL_ERR_FORMAT, "1152921504606846976", "kvs"},
    {"n_kv 2^64-1", c_max_nkv, TL_ERR_FORMAT, "kvs", NULL},
    {"n_tensors 2^60", c_huge_nt, TL_ERR_FORMAT, "1152921504606846976", "tensors"},
    {"n_kv one too many", c_nkv_plus1, TL_ERR_FORMAT, "gguf:", NULL},
    {"n_tensors one too many", c_nt_plus1, TL_ERR_FORMAT, "tensor #2", NULL},
    {"key length 2^62", c_key_len, TL_ERR_FORMAT, "key #3", "past end"},
    {"string length 9999999", c_str_len, TL_ERR_FORMAT, "'test.s'", "9999999"},
    {"string length 2^64-1", c_str_len_max, TL_ERR_FORMAT, "'test.s'", "past end"},
    {"int32 array count 2^62", c_arr_i32_count, TL_ERR_FORMAT, "'test.big'", "4611686018427387904"},
    {"uint64 array count 2^64-1", c_arr_u64_count, TL_ERR_FORMAT, "'test.big'", "past end"},
    {"string array count 2^40", c_arr_str_count, TL_ERR_FORMAT, "'test.big'", "1099511627776"},
    {"string array element length 2^50", c_arr_str_elem, TL_ERR_FORMAT, "'test.big'", "element 1"},
    {"unknown value type 13", c_vtype, TL_ERR_FORMAT, "'test.bad'", "type 13"},
    {"unknown value type 2^32-1", c_vtype_max, TL_ERR_FORMAT, "'test.bad'", "4294967295"},
    {"unknown array element type 13", c_arr_etype, TL_ERR_FORMAT, "'test.bad'", "element type 13"},
    {"nested array (refused)", c_nested, TL_ERR_UNSUPPORTED, "'test.nested'", "nested"},
    {"duplicate key", c_dup_key, TL_ERR_FORMAT, "'test.arr'", "duplicate"},
    {"alignment 0", c_align0, TL_ERR_FORMAT, "alignment", "power of two"},
    {"alignment 3 (good twin: 64)", c_align3, TL_ERR_FORMAT, "alignment", "is 3"},
    {"alignment 2^30 (good twin: 16)", c_align_huge, TL_ERR_FORMAT, "tensor_a", "past end"},
    {"alignment as string", c_align_str, TL_ERR_FORMAT, "alignment", "string"},
    {"alignment as float32", c_align_f32, TL_ERR_FORMAT, "alignment", "float32"},
    {"n_dims 0", c_ndims0, TL_ERR_FORMAT, "'tensor_b'", "n_dims 0"},
    {"n_dims 5 (good twin: 4)", c_ndims5, TL_ERR_FORMAT, "'tensor_b'", "n_dims 5"},
    {"ne 0", c_ne0, TL_ERR_FORMAT, "'tensor_b'", "dimension 1"},
    {"ne negative", c_ne_neg, TL_ERR_FORMAT, "'tensor_b'", "-3"},
    {"ne product overflow", c_ne_overflow, TL_ERR_FORMAT, "'tensor_a'", "overflow"},
    {"byte size overflow", c_bytes_overflow, TL_ERR_FORMAT, "'tensor_a'", "overflow"},
    {"byte size 2^63", c_bytes_huge, TL_ERR_FORMAT, "'tensor_a'", "past end"},
    {"tensor type 4 (retired)", c_type4, TL_ERR_FORMAT, "'tensor_b'", "type 4"},
    {"tensor type 1000", c_type1000, TL_ERR_FORMAT, "'tensor_b'", "type 1000"},
    {"ne[0] not a block multiple", c_block, TL_ERR_FORMAT, "'tensor_b'", "block size"},
    {"offset misaligned", c_misaligned, TL_ERR_FORMAT, "'tensor_b'", "offset 65"},
    {"offset past end", c_off_past, TL_ERR_FORMAT, "'tensor_b'", "offset 1099511627776"},
    {"offset overflow", c_off_overflow, TL_ERR_FORMAT, "'tensor_b'", "past end"},
    {"data runs past end", c_data_past, TL_ERR_FORMAT, "'tensor_b'", "offset 96"},
    {"file one byte short (good twin: no trailing pad)", c_data_short, TL_ERR_FORMAT, "'tensor_b'",
     "past end"},
    {"overlapping tensors", c_overlap, TL_ERR_FORMAT, "overlap", "'tensor_b'"},
    {"tensors at the same offset", c_overlap_same, TL_ERR_FORMAT, "overlap", "tensor_"},
    {"duplicate tensor name", c_dup_tensor, TL_ERR_FORMAT, "'tensor_a'", "duplicate"},
    {"empty tensor name", c_empty_name, TL_ERR_FORMAT, "tensor #1", "empty"},
    {"tensor name length 2^60", c_name_len, TL_ERR_FORMAT, "tensor #1", "past end"},
};

/* Open an exact-size heap copy so ASan sees any over-read. */
static tl_status open_copy(const uint8_t *p, size_t n, gguf_file **f) {
    uint8_t *c = malloc(n ? n : 1);
    if (n) memcpy(c, p, n);
    tl_status st = gguf_open_memory(c, n, f);
    if (st == TL_OK) {
        /* keep the copy alive with the file: tests close via close_copy */
        return st;
    }
    free(c);
    return st;
}
static void close_copy(gguf_file *f) {
    void *base = (void *)gguf_base(f);
    gguf_close(f);
    free(base);
}

static void test_malformed(void) {
    int n = (int)(sizeof malformed / sizeof malformed[0]);
    buf b = {0};
    for (int i = 0; i < n; i++) {
        const mcase *c = &malformed[i];
        for (int bad = 0; bad <= 1; bad++) {
            opts o;
            opts_default(&o);
            c->fn(&o, bad);
            build(&o, &b);
            gguf_file *f = NULL;
            tl_status st = open_copy(b.p, b.n, &f);
            const char *msg = tl_last_error();
            if (!bad) {
                CHECK(st == TL_OK, "case '%s': good twin failed: %s", c->what, msg);
                if (st == TL_OK) close_copy(f);
            } else {
                CHECK(st == c->want && f == NULL, "case '%s': status %d (want %d): %s", c->what,
                      st, c->want, msg);
                CHECK(msg[0] != 0, "case '%s': empty message", c->what);
                CHECK(!c->word1 || strstr(msg, c->word1), "case '%s': '%s' not in: %s", c->what,
                      c->word1, msg);
                CHECK(!c->word2 || strstr(msg, c->word2), "case '%s': '%s' not in: %s", c->what,
                      c->word2, msg);
                if (getenv("TALLOW_TEST_VERBOSE")) printf("  %-40s -> %s\n", c->what, msg);
                if (st == TL_OK) close_copy(f);
            }
            free(o.extra.p);
        }
    }
    free(b.p);
    printf("malformed corpus: %d cases (each with a good twin)\n", n);
}

/* ---- round trip through the writer -------------------------------------- */

static char g_path[512];

static const char *const g_strs[] = {"a", "", "ccc", "\xc3\xbc" "n\xc3\xaf" "code \"q\"\n"};
static const int32_t g_i32[] = {1, -2, 3, INT32_MIN, INT32_MAX};
static const float g_f32[] = {0.5f, -1.25f, 3.4e38f, 1e-45f};
static const uint8_t g_u8[] = {0, 1, 255};
static const double g_f64[] = {1e300, -2.5};
static const int64_t g_i64[] = {INT64_MIN, 0, INT64_MAX};

static float g_tf32[4 * 3];
static uint16_t g_tf16[8 * 2];
static uint8_t g_tq8[2 * 2 * 34]; /* q8_0 [64,2]: 2 blocks per row, 34 bytes each */

static tl_status write_sample(const char *path) {
    for (int i = 0; i < 12; i++) g_tf32[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 16; i++) g_tf16[i] = tl_fp32_to_fp16((float)i / 8.0f);
    for (size_t i = 0; i < sizeof g_tq8; i++) g_tq8[i] = (uint8_t)(i * 13 + 5);
    gguf_writer *w;
    tl_status st = gguf_writer_init(&w);
    if (st) return st;
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = (1ull << 63) + 5;
    int64_t i64 = -(1ll << 40);
    double f64 = 1e300;
    int ok = !gguf_writer_set_str(w, "general.architecture", "tallowtest") &&
             !gguf_writer_set_val(w, "test.u8", GGUF_VT_UINT8, &u8) &&
             !gguf_writer_set_val(w, "test.i8", GGUF_VT_INT8, &i8) &&
             !gguf_writer_set_val(w, "test.u16", GGUF_VT_UINT16, &u16) &&
             !gguf_writer_set_val(w, "test.i16", GGUF_VT_INT16, &i16) &&
             !gguf_writer_set_u32(w, "test.u32", 4000000000u) &&
             !gguf_writer_set_i32(w, "test.i32", -2000000000) &&
             !gguf_writer_set_u64(w, "test.u64", u64) &&
             !gguf_writer_set_val(w, "test.i64", GGUF_VT_INT64, &i64) &&
             !gguf_writer_set_f32(w, "test.f32", 0.1f) &&
             !gguf_writer_set_val(w, "test.f64", GGUF_VT_FLOAT64, &f64) &&
             !gguf_writer_set_bool(w, "test.bool", true) &&
             !gguf_writer_set_bool(w, "test.bool0", false) &&
             !gguf_writer_set_str(w, "test.str", "h\xc3\xa9llo\nworld") &&
             !gguf_writer_set_str(w, "test.empty", "") &&
             !gguf_writer_set_strn(w, "test.nul", "a\0b", 3) &&
             !gguf_writer_set_arr_str(w, "test.arr_str", g_strs, 4) &&
             !gguf_writer_set_arr_i32(w, "test.arr_i32", g_i32, 5) &&
             !gguf_writer_set_arr_f32(w, "test.arr_f32", g_f32, 4) &&
             !gguf_writer_set_arr(w, "test.arr_u8", GGUF_VT_UINT8, g_u8, 3) &&
             !gguf_writer_set_arr(w, "test.arr_f64", GGUF_VT_FLOAT64, g_f64, 2) &&
             !gguf_writer_set_arr(w, "test.arr_i64", GGUF_VT_INT64, g_i64, 3) &&
             !gguf_writer_set_arr_i32(w, "test.arr_empty", NULL, 0) &&
             !gguf_writer_set_arr_str(w, "test.arr_str_empty", NULL, 0) &&
             !gguf_writer_add_tensor(w, "t.f32", TL_TYPE_F32, 2, (int64_t[]){4, 3}, g_tf32,
                                     sizeof g_tf32) &&
             !gguf_writer_add_tensor(w, "t.f16", TL_TYPE_F16, 2, (int64_t[]){8, 2}, g_tf16,
                                     sizeof g_tf16) &&
             !gguf_writer_add_tensor(w, "t.q8", TL_TYPE_Q8_0, 2, (int64_t[]){64, 2}, g_tq8,
                                     sizeof g_tq8);
    st = ok ? gguf_writer_write(w, path) : TL_ERR_INVALID;
    if (!ok) fprintf(stderr, "writer setup failed: %s\n", tl_last_error());
    gguf_writer_free(w);
    return st;
}

static bool str_is(gguf_str s, const char *p, size_t n) {
    return s.len == n && memcmp(s.ptr, p, n) == 0;
}

static void check_sample(const gguf_file *f) {
    CHECK(gguf_version(f) == 3, "version %u", gguf_version(f));
    CHECK(gguf_alignment(f) == 32, "alignment %llu", (unsigned long long)gguf_alignment(f));
    CHECK(gguf_n_kv(f) == 24, "n_kv %lld", (long long)gguf_n_kv(f));
    CHECK(gguf_n_tensors(f) == 3, "n_tensors %lld", (long long)gguf_n_tensors(f));
    /* kv order is preserved */
    CHECK(str_is(gguf_kv_at(f, 0)->key, "general.architecture", 20), "first key");
    CHECK(str_is(gguf_kv_at(f, 23)->key, "test.arr_str_empty", 18), "last key");
    CHECK(gguf_kv_at(f, 24) == NULL && gguf_kv_at(f, -1) == NULL, "kv_at bounds");
    int64_t iv = 0;
    double dv = 0;
    bool bv = false;
    gguf_str sv;
    CHECK(!gguf_get_int(f, "test.u8", &iv) && iv == 200, "u8 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.i8", &iv) && iv == -5, "i8 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.u16", &iv) && iv == 60000, "u16 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.i16", &iv) && iv == -30000, "i16 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.u32", &iv) && iv == 4000000000ll, "u32 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.i32", &iv) && iv == -2000000000, "i32 %lld", (long long)iv);
    CHECK(!gguf_get_int(f, "test.i64", &iv) && iv == -(1ll << 40), "i64 %lld", (long long)iv);
    tl_status st = gguf_get_int(f, "test.u64", &iv); /* 2^63+5 does not fit int64 */
    CHECK(st == TL_ERR_FORMAT && strstr(tl_last_error(), "test.u64"), "u64 range: %s",
          tl_last_error());
    const gguf_kv *kv = gguf_find_kv(f, "test.u64");
    uint64_t u64 = 0;
    CHECK(kv && kv->type == GGUF_VT_UINT64, "u64 kv");
    if (kv) memcpy(&u64, kv->data, 8);
    CHECK(u64 == (1ull << 63) + 5, "u64 raw %llu", (unsigned long long)u64);
    CHECK(!gguf_get_float(f, "test.f32", &dv) && (float)dv == 0.1f, "f32 %g", dv);
    CHECK(!gguf_get_float(f, "test.f64", &dv) && dv == 1e300, "f64 %g", dv);
    CHECK(!gguf_get_float(f, "test.i16", &dv) && dv == -30000.0, "int as float %g", dv);
    CHECK(!gguf_get_bool(f, "test.bool", &bv) && bv, "bool");
    CHECK(!gguf_get_bool(f, "test.bool0", &bv) && !bv, "bool0");
    CHECK(!gguf_get_str(f, "test.str", &sv) && str_is(sv, "h\xc3\xa9llo\nworld", 12), "str");
    CHECK(!gguf_get_str(f, "test.empty", &sv) && sv.len == 0, "empty str");
    CHECK(!gguf_get_str(f, "test.nul", &sv) && str_is(sv, "a\0b", 3), "str with NUL");
    CHECK(!gguf_get_str(f, "general.architecture", &sv) && str_is(sv, "tallowtest", 10), "arch");
    /* type mismatches and absence */
    st = gguf_get_str(f, "test.u32", &sv);
    CHECK(st == TL_ERR_FORMAT && strstr(tl_last_error(), "test.u32") &&
          strstr(tl_last_error(), "uint32"), "str of u32: %s", tl_last_error());
    st = gguf_get_int(f, "test.f32", &iv);
    CHECK(st == TL_ERR_FORMAT && strstr(tl_last_error(), "float32"), "int of f32: %s",
          tl_last_error());
    st = gguf_get_int(f, "test.arr_i32", &iv);
    CHECK(st == TL_ERR_FORMAT && strstr(tl_last_error(), "array"), "int of array: %s",
          tl_last_error());
    st = gguf_get_bool(f, "test.u8", &bv);
    CHECK(st == TL_ERR_FORMAT, "bool of u8");
    st = gguf_get_float(f, "test.str", &dv);
    CHECK(st == TL_ERR_FORMAT, "float of str");
    st = gguf_get_int(f, "no.such.key", &iv);
    CHECK(st == TL_ERR_NOT_FOUND && strstr(tl_last_error(), "no.such.key"), "absent: %s",
          tl_last_error());
    CHECK(gguf_find_kv(f, "test") == NULL && gguf_find_kv(f, "test.u8x") == NULL, "prefixes");
    const gguf_kv *arr = NULL;
    st = gguf_get_arr(f, "test.u8", &arr);
    CHECK(st == TL_ERR_FORMAT, "arr of scalar");
    /* arrays */
    CHECK(!gguf_get_arr(f, "test.arr_str", &arr) && arr->arr_type == GGUF_VT_STRING &&
          arr->arr_n == 4, "arr_str");
    if (arr && arr->arr_type == GGUF_VT_STRING)
        for (uint64_t i = 0; i < 4; i++)
            CHECK(str_is(gguf_arr_str(f, arr, i), g_strs[i], strlen(g_strs[i])), "arr_str[%d]",
                  (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_i32", &arr) && arr->arr_type == GGUF_VT_INT32 &&
          arr->arr_n == 5, "arr_i32");
    for (uint64_t i = 0; arr && i < 5; i++)
        CHECK(gguf_arr_int(arr, i) == g_i32[i], "arr_i32[%d]", (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_f32", &arr) && arr->arr_type == GGUF_VT_FLOAT32 &&
          arr->arr_n == 4, "arr_f32");
    for (uint64_t i = 0; arr && i < 4; i++)
        CHECK((float)gguf_arr_float(arr, i) == g_f32[i], "arr_f32[%d]", (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_u8", &arr) && arr->arr_n == 3, "arr_u8");
    for (uint64_t i = 0; arr && i < 3; i++)
        CHECK(gguf_arr_int(arr, i) == g_u8[i], "arr_u8[%d]", (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_f64", &arr) && arr->arr_n == 2, "arr_f64");
    for (uint64_t i = 0; arr && i < 2; i++)
        CHECK(gguf_arr_float(arr, i) == g_f64[i], "arr_f64[%d]", (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_i64", &arr) && arr->arr_n == 3, "arr_i64");
    for (uint64_t i = 0; arr && i < 3; i++)
        CHECK(gguf_arr_int(arr, i) == g_i64[i], "arr_i64[%d]", (int)i);
    CHECK(!gguf_get_arr(f, "test.arr_empty", &arr) && arr->arr_n == 0 &&
          arr->arr_type == GGUF_VT_INT32, "arr_empty");
    CHECK(!gguf_get_arr(f, "test.arr_str_empty", &arr) && arr->arr_n == 0 &&
          arr->arr_type == GGUF_VT_STRING, "arr_str_empty");
    /* tensors: spec layout with 32-byte alignment: 48 bytes -> next at 64,
     * 32 bytes at 64 -> next at 96, 136 bytes at 96 (ends at 232; padded to 256). */
    const gguf_tensor *t = gguf_find_tensor(f, "t.f32");
    CHECK(t && t->type == TL_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 3 &&
          t->ne[2] == 1 && t->ne[3] == 1 && t->size == 48 && t->offset == 0, "t.f32 info");
    CHECK(t && !memcmp(t->data, g_tf32, sizeof g_tf32), "t.f32 data");
    t = gguf_find_tensor(f, "t.f16");
    CHECK(t && t->type == TL_TYPE_F16 && t->ne[0] == 8 && t->ne[1] == 2 && t->size == 32 &&
          t->offset == 64, "t.f16 info");
    CHECK(t && !memcmp(t->data, g_tf16, sizeof g_tf16), "t.f16 data");
    t = gguf_find_tensor(f, "t.q8");
    CHECK(t && t->type == TL_TYPE_Q8_0 && t->ne[0] == 64 && t->ne[1] == 2 && t->size == 136 &&
          t->offset == 96, "t.q8 info");
    CHECK(t && !memcmp(t->data, g_tq8, sizeof g_tq8), "t.q8 data");
    CHECK(t && (const uint8_t *)t->data ==
                   (const uint8_t *)gguf_base(f) + gguf_data_offset(f) + 96, "data pointer");
    CHECK(gguf_data_offset(f) % 32 == 0, "data offset aligned");
    CHECK(gguf_size(f) == gguf_data_offset(f) + 256, "size %zu, data offset %llu", gguf_size(f),
          (unsigned long long)gguf_data_offset(f));
    CHECK(gguf_find_tensor(f, "t.f3") == NULL && gguf_find_tensor(f, "nope") == NULL, "absent");
    CHECK(gguf_tensor_at(f, 3) == NULL && gguf_tensor_at(f, 0) != NULL, "tensor_at bounds");
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(p, 1, (size_t)sz, fp);
    fclose(fp);
    return p;
}

static void test_truncation(const uint8_t *file, size_t size) {
    /* Lengths >= size - 24 only cut the padding after the last tensor (its
     * data ends 24 bytes before the padded end, see check_sample): valid. */
    size_t valid_from = size - 24;
    int n_fail = 0, n_ok = 0;
    for (size_t len = 0; len < size; len++) {
        gguf_file *f = NULL;
        tl_status st = open_copy(file, len, &f);
        if (len < valid_from) {
            CHECK(st == TL_ERR_FORMAT && f == NULL, "truncated to %zu: status %d: %s", len, st,
                  tl_last_error());
            CHECK(strstr(tl_last_error(), "bytes") != NULL, "truncated to %zu: message: %s", len,
                  tl_last_error());
            n_fail++;
        } else {
            CHECK(st == TL_OK, "truncated padding to %zu: %s", len, tl_last_error());
            n_ok++;
        }
        if (st == TL_OK) close_copy(f);
    }
    printf("truncation: %d lengths refused, %d (trailing padding only) accepted\n", n_fail, n_ok);
}

/* ---- random mutations --------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Touch everything an open file exposes, so ASan sees any bad pointer. */
static unsigned walk(const gguf_file *f) {
    unsigned sum = 0;
    const uint8_t *base = gguf_base(f);
    size_t size = gguf_size(f);
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        for (uint64_t j = 0; j < kv->key.len; j++) sum += (unsigned char)kv->key.ptr[j];
        if (kv->type == GGUF_VT_ARRAY) {
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                if (kv->arr_type == GGUF_VT_STRING) {
                    gguf_str s = gguf_arr_str(f, kv, j);
                    CHECK((const uint8_t *)s.ptr >= base &&
                          (const uint8_t *)s.ptr + s.len <= base + size, "string in file");
                    if (s.len) sum += (unsigned char)s.ptr[0] + (unsigned char)s.ptr[s.len - 1];
                } else if (kv->arr_type == GGUF_VT_FLOAT32 || kv->arr_type == GGUF_VT_FLOAT64) {
                    sum += gguf_arr_float(kv, j) > 0;
                } else {
                    sum += (unsigned)gguf_arr_int(kv, j);
                }
            }
        } else if (kv->type == GGUF_VT_STRING) {
            uint64_t len;
            memcpy(&len, kv->data, 8);
            CHECK(kv->data + 8 + len <= base + size, "string kv in file");
            if (len) sum += kv->data[8] + kv->data[8 + len - 1];
        } else {
            sum += kv->data[gguf_vtype_size(kv->type) - 1];
        }
        char key[64];
        size_t kl = kv->key.len < 63 ? (size_t)kv->key.len : 63;
        memcpy(key, kv->key.ptr, kl);
        key[kl] = 0;
        sum += gguf_find_kv(f, key) != NULL;
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *d = t->data;
        CHECK(t->size > 0 && d >= base && d + t->size <= base + size, "tensor data in file");
        CHECK(t->offset % gguf_alignment(f) == 0, "tensor aligned");
        sum += d[0] + d[t->size - 1];
    }
    return sum;
}

static void test_mutations(const uint8_t *file, size_t size, int iters) {
    int n_ok = 0, n_err = 0;
    unsigned sink = 0;
    uint8_t *m = malloc(size);
    for (int it = 0; it < iters; it++) {
        memcpy(m, file, size);
        size_t len = size;
        int k = 1 + (int)(rng() % 4);
        for (int j = 0; j < k; j++) {
            size_t pos = (size_t)(rng() % size);
            switch (rng() % 6) {
            case 0: m[pos] ^= (uint8_t)(1u << (rng() % 8)); break;
            case 1: m[pos] = (uint8_t)rng(); break;
            case 2: m[pos] = (rng() & 1) ? 0xff : 0; break;
            case 3: { /* an interesting 64-bit value over a count, length or offset */
                static const uint64_t vals[] = {0, 1, 2, 31, 32, 33, 64, 0x7fffffffffffffffull,
                                                0x8000000000000000ull, UINT64_MAX, 1ull << 32,
                                                1ull << 60};
                uint64_t v = vals[rng() % (sizeof vals / sizeof vals[0])];
                if (pos + 8 <= size) memcpy(m + pos, &v, 8);
                break;
            }
            case 4: { uint32_t v = (uint32_t)(rng() % 16); if (pos + 4 <= size) memcpy(m + pos, &v, 4); break; }
            default: if (rng() % 4 == 0) len = pos; break;
            }
        }
        gguf_file *f = NULL;
        tl_status st = open_copy(m, len, &f);
        if (st == TL_OK) {
            n_ok++;
            sink += walk(f);
            close_copy(f);
        } else {
            n_err++;
            CHECK(f == NULL && tl_last_error()[0] != 0, "mutation %d: error without message", it);
            CHECK(st == TL_ERR_FORMAT || st == TL_ERR_UNSUPPORTED, "mutation %d: status %d", it, st);
        }
    }
    free(m);
    printf("mutations: %d opened, %d refused (checksum %u)\n", n_ok, n_err, sink);
}

/* ---- writer validation, copy_kvs, open errors, many names ---------------- */

static void test_writer_errors(void) {
    gguf_writer *w;
    CHECK(!gguf_writer_init(&w), "init");
    float d[64] = {0};
    CHECK(!gguf_writer_add_tensor(w, "x", TL_TYPE_F32, 1, (int64_t[]){4}, d, 16), "add x");
    CHECK(gguf_writer_add_tensor(w, "x", TL_TYPE_F32, 1, (int64_t[]){4}, d, 16) == TL_ERR_INVALID &&
          strstr(tl_last_error(), "duplicate"), "dup tensor: %s", tl_last_error());
    CHECK(gguf_writer_add_tensor(w, "y", TL_TYPE_F32, 1, (int64_t[]){4}, d, 12) == TL_ERR_INVALID &&
          strstr(tl_last_error(), "'y'"), "size mismatch: %s", tl_last_error());
    CHECK(gguf_writer_add_tensor(w, "y", TL_TYPE_F32, 0, (int64_t[]){4}, d, 16) == TL_ERR_INVALID,
          "n_dims 0");
    CHECK(gguf_writer_add_tensor(w, "y", TL_TYPE_F32, 5, (int64_t[]){4, 1, 1, 1, 1}, d, 16) ==
          TL_ERR_INVALID, "n_dims 5");
    CHECK(gguf_writer_add_tensor(w, "y", TL_TYPE_F32, 2, (int64_t[]){4, 0}, d, 0) == TL_ERR_INVALID,
          "ne 0");
    CHECK(gguf_writer_add_tensor(w, "y", TL_TYPE_Q8_0, 1, (int64_t[]){33}, d, 34) == TL_ERR_INVALID
          && strstr(tl_last_error(), "block"), "block: %s", tl_last_error());
    CHECK(gguf_writer_add_tensor(w, "y", (tl_type)4, 1, (int64_t[]){4}, d, 16) == TL_ERR_INVALID,
          "unknown type");
    CHECK(gguf_writer_add_tensor(w, "", TL_TYPE_F32, 1, (int64_t[]){4}, d, 16) == TL_ERR_INVALID,
          "empty name");
    CHECK(!gguf_writer_set_u32(w, "k", 1), "set k");
    CHECK(gguf_writer_set_str(w, "k", "v") == TL_ERR_INVALID && strstr(tl_last_error(), "'k'"),
          "dup key: %s", tl_last_error());
    CHECK(gguf_writer_set_u32(w, "general.alignment", 48) == TL_ERR_INVALID, "align 48 kv");
    CHECK(gguf_writer_set_val(w, "z", GGUF_VT_ARRAY, d) == TL_ERR_INVALID, "array as scalar");
    CHECK(gguf_writer_set_arr(w, "z", GGUF_VT_ARRAY, d, 1) == TL_ERR_INVALID, "nested array");
    CHECK(gguf_writer_remove_kv(w, "k") && !gguf_writer_remove_kv(w, "k"), "remove kv");
    CHECK(!gguf_writer_set_str(w, "k", "v"), "set k again after remove");
    char bad_path[600];
    snprintf(bad_path, sizeof bad_path, "%s.nodir/x.gguf", g_path);
    CHECK(gguf_writer_write(w, bad_path) == TL_ERR_IO, "write to missing dir");
    gguf_writer_set_alignment(w, 3);
    CHECK(gguf_writer_write(w, g_path) == TL_ERR_INVALID && strstr(tl_last_error(), "alignment"),
          "alignment 3: %s", tl_last_error());
    gguf_writer_free(w);

    /* alignment 64 is honored and recorded, and the reader agrees */
    CHECK(!gguf_writer_init(&w), "init");
    gguf_writer_set_alignment(w, 64);
    CHECK(!gguf_writer_add_tensor(w, "a", TL_TYPE_F32, 1, (int64_t[]){3}, d, 12), "add a");
    CHECK(!gguf_writer_add_tensor(w, "b", TL_TYPE_F32, 1, (int64_t[]){5}, d, 20), "add b");
    CHECK(!gguf_writer_write(w, g_path), "write: %s", tl_last_error());
    gguf_writer_free(w);
    gguf_file *f;
    CHECK(!gguf_open(g_path, &f), "open aligned: %s", tl_last_error());
    if (f) {
        int64_t a = 0;
        CHECK(gguf_alignment(f) == 64 && !gguf_get_int(f, "general.alignment", &a) && a == 64,
              "alignment 64");
        CHECK(gguf_data_offset(f) % 64 == 0 && gguf_find_tensor(f, "b")->offset == 64 &&
              gguf_size(f) % 64 == 0, "64-aligned layout");
        gguf_close(f);
    }
}

/* fill callback: element i of the tensor is base + i (f32) */
typedef struct fill_ctx {
    float base;
    int calls;
    tl_status fail;
} fill_ctx;

static tl_status fill_f32(void *ctx, void *dst, size_t size) {
    fill_ctx *c = ctx;
    c->calls++;
    if (c->fail) return tl_err(c->fail, "test fill failed on purpose");
    float *d = dst;
    for (size_t i = 0; i < size / 4; i++) d[i] = c->base + (float)i;
    return TL_OK;
}

static void test_fill(void) {
    gguf_writer *w;
    CHECK(!gguf_writer_init(&w), "init");
    fill_ctx a = {100.0f, 0, TL_OK}, b = {-5.0f, 0, TL_OK};
    float plain[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(!gguf_writer_add_tensor_fill(w, "fa", TL_TYPE_F32, 2, (int64_t[]){64, 3}, 64 * 3 * 4,
                                       fill_f32, &a), "add fa");
    CHECK(!gguf_writer_add_tensor(w, "p", TL_TYPE_F32, 1, (int64_t[]){8}, plain, 32), "add p");
    CHECK(!gguf_writer_add_tensor_fill(w, "fb", TL_TYPE_F32, 1, (int64_t[]){5}, 20, fill_f32, &b),
          "add fb");
    CHECK(gguf_writer_add_tensor_fill(w, "fc", TL_TYPE_F32, 1, (int64_t[]){5}, 24, fill_f32, &b) ==
          TL_ERR_INVALID, "fill size mismatch");
    CHECK(!gguf_writer_write(w, g_path), "write: %s", tl_last_error());
    CHECK(a.calls == 1 && b.calls == 1, "each fill called once");
    gguf_file *f;
    CHECK(!gguf_open(g_path, &f), "open: %s", tl_last_error());
    if (f) {
        const gguf_tensor *ta = gguf_find_tensor(f, "fa"), *tb = gguf_find_tensor(f, "fb"),
                          *tp = gguf_find_tensor(f, "p");
        int bad = 0;
        for (int i = 0; ta && i < 192; i++) {
            float v;
            memcpy(&v, (const uint8_t *)ta->data + 4 * i, 4);
            bad += v != 100.0f + (float)i;
        }
        for (int i = 0; tb && i < 5; i++) {
            float v;
            memcpy(&v, (const uint8_t *)tb->data + 4 * i, 4);
            bad += v != -5.0f + (float)i;
        }
        CHECK(ta && tb && tp && bad == 0 && !memcmp(tp->data, plain, 32), "filled data (%d bad)",
              bad);
        gguf_close(f);
    }
    /* a failing fill aborts the write and removes the partial file */
    b.fail = TL_ERR_UNSUPPORTED;
    remove(g_path);
    CHECK(gguf_writer_write(w, g_path) == TL_ERR_UNSUPPORTED &&
          strstr(tl_last_error(), "'fb'") && strstr(tl_last_error(), "on purpose"),
          "failing fill: %s", tl_last_error());
    CHECK(access(g_path, F_OK) != 0, "partial file removed");
    gguf_writer_free(w);
}

static void test_copy_kvs(const gguf_file *src) {
    gguf_writer *w;
    CHECK(!gguf_writer_init(&w), "init");
    CHECK(!gguf_writer_copy_kvs(w, src), "copy_kvs: %s", tl_last_error());
    CHECK(gguf_writer_copy_kvs(w, src) == TL_ERR_INVALID, "copy_kvs twice: duplicates");
    CHECK(!gguf_writer_write(w, g_path), "write copy: %s", tl_last_error());
    gguf_writer_free(w);
    gguf_file *f;
    CHECK(!gguf_open(g_path, &f), "open copy: %s", tl_last_error());
    if (!f) return;
    CHECK(gguf_n_kv(f) == gguf_n_kv(src) && gguf_n_tensors(f) == 0, "copy counts");
    for (int64_t i = 0; i < gguf_n_kv(f) && i < gguf_n_kv(src); i++) {
        const gguf_kv *a = gguf_kv_at(src, i), *b = gguf_kv_at(f, i);
        CHECK(a->key.len == b->key.len && !memcmp(a->key.ptr, b->key.ptr, a->key.len) &&
              a->type == b->type && a->arr_type == b->arr_type && a->arr_n == b->arr_n,
              "copied kv %d header", (int)i);
        /* value bytes: from data to the start of the next key (or of the
         * tensor infos) are identical */
        const uint8_t *ae = i + 1 < gguf_n_kv(src) ? (const uint8_t *)gguf_kv_at(src, i + 1)->key.ptr - 8
                                                   : NULL;
        const uint8_t *be = i + 1 < gguf_n_kv(f) ? (const uint8_t *)gguf_kv_at(f, i + 1)->key.ptr - 8
                                                 : NULL;
        if (ae && be)
            CHECK(ae - a->data == be - b->data && !memcmp(a->data, b->data, (size_t)(ae - a->data)),
                  "copied kv %d bytes", (int)i);
    }
    gguf_close(f);
}

static void test_open_errors(void) {
    gguf_file *f = NULL;
    CHECK(gguf_open("/nonexistent/dir/x.gguf", &f) == TL_ERR_IO && f == NULL &&
          strstr(tl_last_error(), "/nonexistent/dir/x.gguf"), "missing: %s", tl_last_error());
    CHECK(gguf_open("/tmp", &f) == TL_ERR_IO && f == NULL, "directory: %s", tl_last_error());
    FILE *fp = fopen(g_path, "wb");
    if (fp) fclose(fp);
    CHECK(gguf_open(g_path, &f) == TL_ERR_FORMAT && strstr(tl_last_error(), "empty"),
          "empty file: %s", tl_last_error());
    CHECK(gguf_open_memory(NULL, 0, &f) == TL_ERR_FORMAT, "NULL, 0");
}

/* 2000 keys and 1500 tensors: every one found through the hash tables. */
static void test_many_names(void) {
    gguf_writer *w;
    CHECK(!gguf_writer_init(&w), "init");
    char name[64];
    static float data[1];
    int ok = 1;
    for (int i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "k.%d", i);
        ok &= !gguf_writer_set_i32(w, name, i * 3);
    }
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        ok &= !gguf_writer_add_tensor(w, name, TL_TYPE_F32, 1, (int64_t[]){1}, data, 4);
    }
    CHECK(ok, "setup: %s", tl_last_error());
    CHECK(!gguf_writer_write(w, g_path), "write: %s", tl_last_error());
    gguf_writer_free(w);
    gguf_file *f;
    CHECK(!gguf_open(g_path, &f), "open: %s", tl_last_error());
    if (!f) return;
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        int64_t v = -1;
        snprintf(name, sizeof name, "k.%d", i);
        bad += gguf_get_int(f, name, &v) != TL_OK || v != i * 3;
    }
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        const gguf_tensor *t = gguf_find_tensor(f, name);
        bad += !t || t != gguf_tensor_at(f, i) || t->offset != (uint64_t)i * 32;
    }
    CHECK(bad == 0, "%d names not found or wrong", bad);
    CHECK(gguf_find_kv(f, "k.2000") == NULL && gguf_find_tensor(f, "blk.1500.w") == NULL,
          "absent names");
    gguf_close(f);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_path, sizeof g_path, "%s/tallow_test_gguf_%d.gguf", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    test_malformed();
    tl_status st = write_sample(g_path);
    CHECK(st == TL_OK, "write sample: %s", tl_last_error());
    size_t size = 0;
    uint8_t *file = st == TL_OK ? read_all(g_path, &size) : NULL;
    gguf_file *f = NULL;
    CHECK(file && !gguf_open(g_path, &f), "open sample: %s", tl_last_error());
    if (f) {
        CHECK(size % 32 == 0, "file size %zu is padded to the alignment", size);
        check_sample(f);
        gguf_file *fm = NULL;
        CHECK(!gguf_open_memory(file, size, &fm), "open_memory sample");
        if (fm) {
            check_sample(fm);
            gguf_close(fm);
        }
        const char *out = getenv("TALLOW_GGUF_OUT"); /* for inspecting the sample by hand */
        if (out && *out) {
            FILE *fp = fopen(out, "wb");
            if (fp) { fwrite(file, 1, size, fp); fclose(fp); }
        }
        test_truncation(file, size);
        test_mutations(file, size, 20000);
        test_copy_kvs(f);
        gguf_close(f);
    }
    free(file);
    test_writer_errors();
    test_fill();
    test_open_errors();
    test_many_names();
    remove(g_path);
    return test_finish();
}
