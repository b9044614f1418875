/* Shared pieces of the C kernels (see curator_dask/_ckernels.py).
 *
 * Each kernel here gives, bit for bit, what its numba twin in curator_dask/_text_kernels.py
 * gives: the numba kernels are the reference (and what runs where no C compiler is found),
 * tests/test_ckernels.py compares the two on random and real text. The input is an Arrow
 * string array as it lies in memory: int64 byte offsets, UTF-8 bytes, one flags byte per
 * code point (the WS, LETTER, ... bits below). Outputs are written to arrays the caller
 * allocated; scratch memory is malloc'ed here and a kernel returns CDK_NOMEM when it fails.
 */
#ifndef CURATOR_DASK_TEXT_COMMON_H
#define CURATOR_DASK_TEXT_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CDK_OK 0
#define CDK_NOMEM 1

/* bits of the per-code-point flags (curator_dask._text_kernels) */
#define CDK_WS 1
#define CDK_LETTER 2
#define CDK_ALNUM 4
#define CDK_DIGIT 8
#define CDK_ENDMARK 16
#define CDK_BULLET 32
#define CDK_PAREN 64

#define CDK_M1 0x9E3779B97F4A7C15ULL
#define CDK_M2 0xBF58476D1CE4E5B9ULL
#define CDK_M3 0x94D049BB133111EBULL

static inline uint64_t cdk_fmix(uint64_t h) {
    h ^= h >> 30;
    h *= CDK_M2;
    h ^= h >> 27;
    h *= CDK_M3;
    return h ^ (h >> 31);
}

static inline uint64_t cdk_rotl(uint64_t h, int r) { return (h << r) | (h >> (64 - r)); }

/* k (0..8) bytes from p as a little-endian integer */
static inline uint64_t cdk_load(const uint8_t *p, int64_t k) {
    uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (k == 8) {
        memcpy(&w, p, 8);
        return w;
    }
#endif
    for (int64_t j = 0; j < k; j++) w |= (uint64_t)p[j] << (8 * j);
    return w;
}

/* _text_kernels.hash_bytes: a 64-bit hash of data[s:e] */
static inline uint64_t cdk_hash_bytes(const uint8_t *data, int64_t s, int64_t e) {
    uint64_t h = (uint64_t)(e - s) * CDK_M1;
    int64_t i = s;
    while (i + 8 <= e) {
        h = cdk_rotl(h ^ cdk_load(data + i, 8), 27) * CDK_M1;
        i += 8;
    }
    if (i < e) h ^= cdk_load(data + i, e - i);
    return cdk_fmix(h);
}

/* _text_kernels._decode: the code point starting at data[i]; its length in *k */
static inline int64_t cdk_decode(const uint8_t *data, int64_t i, int64_t *k) {
    int64_t b = data[i];
    if (b < 0x80) {
        *k = 1;
        return b;
    }
    if (b < 0xE0) {
        *k = 2;
        return ((b & 0x1F) << 6) | ((int64_t)data[i + 1] & 0x3F);
    }
    if (b < 0xF0) {
        *k = 3;
        return ((b & 0x0F) << 12) | (((int64_t)data[i + 1] & 0x3F) << 6) |
               ((int64_t)data[i + 2] & 0x3F);
    }
    *k = 4;
    return ((b & 0x07) << 18) | (((int64_t)data[i + 1] & 0x3F) << 12) |
           (((int64_t)data[i + 2] & 0x3F) << 6) | ((int64_t)data[i + 3] & 0x3F);
}

/* start byte of the code point that ends just before byte j */
static inline int64_t cdk_prev_start(const uint8_t *data, int64_t j) {
    j -= 1;
    while ((data[j] & 0xC0) == 0x80) j -= 1;
    return j;
}

/* code points in data[s:e]: the bytes that are not UTF-8 continuation bytes (10xxxxxx),
 * eight at a time */
static inline int64_t cdk_cps(const uint8_t *data, int64_t s, int64_t e) {
    int64_t c = e - s, i = s;
    for (; i + 8 <= e; i += 8) {
        uint64_t w = cdk_load(data + i, 8);
        uint64_t cont = (w & ~(w << 1)) & 0x8080808080808080ULL; /* bit 7 set, bit 6 clear */
        c -= (int64_t)(((cont >> 7) * 0x0101010101010101ULL) >> 56);
    }
    for (; i < e; i++) c -= (data[i] & 0xC0) == 0x80;
    return c;
}

/* data[*s:*e] without its leading and trailing whitespace (_text_kernels._strip), ASCII
 * ends read in place */
static inline void cdk_strip(const uint8_t *data, const uint8_t *flags, int64_t *s, int64_t *e) {
    int64_t a = *s, b = *e, k;
    while (a < b) {
        int64_t cp = data[a];
        k = 1;
        if (cp >= 0x80) cp = cdk_decode(data, a, &k);
        if (!(flags[cp] & CDK_WS)) break;
        a += k;
    }
    while (b > a) {
        int64_t j = b - 1, cp = data[j];
        if (cp >= 0x80) {
            j = cdk_prev_start(data, b);
            cp = cdk_decode(data, j, &k);
        }
        if (!(flags[cp] & CDK_WS)) break;
        b = j;
    }
    *s = a;
    *e = b;
}

static inline int cdk_same(const uint8_t *data, int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    return e1 - s1 == e2 - s2 && memcmp(data + s1, data + s2, (size_t)(e1 - s1)) == 0;
}

/* An open-addressing table of byte ranges to ids, valid for one
 * generation: a slot belongs to the current one when its stamp is gen. */
typedef struct {
    int64_t size;
    int64_t *stamp, *starts, *ends, *ids;
} cdk_table;

static inline void cdk_table_free(cdk_table *t) {
    free(t->stamp);
    free(t->starts);
    free(t->ends);
    free(t->ids);
    memset(t, 0, sizeof(*t));
}

/* a table of `size` slots (a power of two), every stamp 0; CDK_NOMEM on failure */
static inline int cdk_table_init(cdk_table *t, int64_t size) {
    cdk_table_free(t);
    t->size = size;
    t->stamp = (int64_t *)calloc((size_t)size, sizeof(int64_t));
    t->starts = (int64_t *)malloc((size_t)size * sizeof(int64_t));
    t->ends = (int64_t *)malloc((size_t)size * sizeof(int64_t));
    t->ids = (int64_t *)malloc((size_t)size * sizeof(int64_t));
    if (!(t->stamp && t->starts && t->ends && t->ids)) {
        cdk_table_free(t);
        return CDK_NOMEM;
    }
    return CDK_OK;
}

/* _text_kernels._table_size */
static inline int64_t cdk_table_size(int64_t items) {
    int64_t size = 16;
    while (size < 2 * items) size *= 2;
    return size;
}

/* _text_kernels._intern_range: the id of data[s:e]; next_id when unseen (then stored) */
static inline int64_t cdk_intern_range(const uint8_t *data, int64_t s, int64_t e, cdk_table *t,
                                       int64_t gen, int64_t next_id) {
    int64_t mask = t->size - 1;
    int64_t slot = (int64_t)(cdk_hash_bytes(data, s, e) & (uint64_t)mask);
    while (t->stamp[slot] == gen) {
        if (cdk_same(data, s, e, t->starts[slot], t->ends[slot])) return t->ids[slot];
        slot = (slot + 1) & mask;
    }
    t->stamp[slot] = gen;
    t->starts[slot] = s;
    t->ends[slot] = e;
    t->ids[slot] = next_id;
    return next_id;
}

#endif
