/* text/tok_map: the two open-addressing hash maps the tokenizer uses
 * (string -> id, u64 pair -> rank/id). Linear probing, power-of-two
 * capacity kept at most half full, so lookups are one or two probes.
 * Owns: its arrays. Calls: libc. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

static uint32_t tok_hash_bytes(const char *k, size_t len) {
    uint32_t h = TOK_HASH_INIT;
    for (size_t i = 0; i < len; i++) h = tok_hash_step(h, (unsigned char)k[i]);
    return tok_hash_final(h);
}

static uint32_t tok_cap_for(uint32_t expect) {
    uint32_t cap = 16;
    while (cap < expect * 2u + 2u && cap < (1u << 30)) cap <<= 1;
    return cap;
}

tl_status tok_strmap_init(tok_strmap *m, uint32_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = tok_cap_for(expect);
    m->ent = malloc(sizeof *m->ent * m->cap);
    if (!m->ent) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for a string map");
    for (uint32_t i = 0; i < m->cap; i++) m->ent[i].val = -1;
    return TL_OK;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->ent);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static tl_status tok_strmap_grow(tok_strmap *m) {
    tok_strmap n;
    tl_status st = tok_strmap_init(&n, m->cap);
    if (st) return st;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->ent[i].val < 0) continue;
        uint32_t mask = n.cap - 1, j = m->ent[i].hash & mask;
        while (n.ent[j].val >= 0) j = (j + 1) & mask;
        n.ent[j] = m->ent[i];
    }
    n.arena = m->arena;
    n.arena_len = m->arena_len;
    n.arena_cap = m->arena_cap;
    n.count = m->count;
    m->arena = NULL;
    tok_strmap_free(m);
    *m = n;
    return TL_OK;
}

tl_status tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t val, bool replace) {
    if (len > UINT32_MAX / 2) return tl_err(TL_ERR_FORMAT, "tokenizer: token of %zu bytes", len);
    if (val < 0) return tl_err(TL_ERR_INVALID, "tokenizer: negative map value");
    if ((m->count + 1) * 2 > m->cap) {
        tl_status st = tok_strmap_grow(m);
        if (st) return st;
    }
    uint32_t h = tok_hash_bytes(k, len), mask = m->cap - 1, i = h & mask;
    while (m->ent[i].val >= 0) {
        if (m->ent[i].hash == h && m->ent[i].len == len && !memcmp(m->arena + m->ent[i].off, k, len)) {
            if (replace) m->ent[i].val = val;
            return TL_OK;
        }
        i = (i + 1) & mask;
    }
    if (!m->arena || m->arena_len + len > m->arena_cap) { /* allocated even for "" keys: no NULL + 0 */
        size_t nc = m->arena_cap ? m->arena_cap : 4096;
        while (nc < m->arena_len + len) nc *= 2;
        if (nc > UINT32_MAX) return tl_err(TL_ERR_FORMAT, "tokenizer: vocabulary text over 4 GiB");
        char *na = realloc(m->arena, nc);
        if (!na) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for keys");
        m->arena = na;
        m->arena_cap = nc;
    }
    if (len) memcpy(m->arena + m->arena_len, k, len);
    m->ent[i].hash = h;
    m->ent[i].val = val;
    m->ent[i].off = (uint32_t)m->arena_len;
    m->ent[i].len = (uint32_t)len;
    m->arena_len += len;
    m->count++;
    return TL_OK;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len) {
    return tok_strmap_get_h(m, k, len, tok_hash_bytes(k, len));
}

int32_t tok_strmap_get_h(const tok_strmap *m, const char *k, size_t len, uint32_t h) {
    if (!m->cap) return -1;
    uint32_t mask = m->cap - 1, i = h & mask;
    while (m->ent[i].val >= 0) {
        if (m->ent[i].hash == h && m->ent[i].len == len && !memcmp(m->arena + m->ent[i].off, k, len))
            return m->ent[i].val;
        i = (i + 1) & mask;
    }
    return -1;
}

tl_status tok_pairmap_init(tok_pairmap *m, uint32_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = tok_cap_for(expect);
    m->ent = malloc(sizeof *m->ent * m->cap);
    if (!m->ent) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for a pair map");
    for (uint32_t i = 0; i < m->cap; i++) m->ent[i].key = UINT64_MAX;
    return TL_OK;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->ent);
    memset(m, 0, sizeof *m);
}

static tl_status tok_pairmap_grow(tok_pairmap *m) {
    tok_pairmap n;
    tl_status st = tok_pairmap_init(&n, m->cap);
    if (st) return st;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->ent[i].key == UINT64_MAX) continue;
        uint32_t mask = n.cap - 1, j = tok_mix64(m->ent[i].key) & mask;
        while (n.ent[j].key != UINT64_MAX) j = (j + 1) & mask;
        n.ent[j] = m->ent[i];
    }
    n.count = m->count;
    tok_pairmap_free(m);
    *m = n;
    return TL_OK;
}

tl_status tok_pairmap_put(tok_pairmap *m, uint64_t k, int32_t rank, int32_t id, bool replace) {
    if (k == UINT64_MAX) return tl_err(TL_ERR_INVALID, "tokenizer: reserved pair key");
    if ((m->count + 1) * 2 > m->cap) {
        tl_status st = tok_pairmap_grow(m);
        if (st) return st;
    }
    uint32_t mask = m->cap - 1, i = tok_mix64(k) & mask;
    while (m->ent[i].key != UINT64_MAX) {
        if (m->ent[i].key == k) {
            if (replace) {
                m->ent[i].rank = rank;
                m->ent[i].id = id;
            }
            return TL_OK;
        }
        i = (i + 1) & mask;
    }
    m->ent[i].key = k;
    m->ent[i].rank = rank;
    m->ent[i].id = id;
    m->count++;
    return TL_OK;
}
