/* The LSH step's kernels: band_hashes, member_set_hash and verify_anchors (see
 * curator_dask/dedup/lsh.py's _band_hashes, _member_set_hash and _verify_anchors, the
 * reference, bit for bit; tests/dedup/test_ckernels_lsh.py compares the two). */
#include "text_common.h"

#define CDK_LSH_POLY 0x9E3779B97F4A7C15ULL /* minhash.POLY */
#define CDK_LSH_SEP 0x632BE59BD9B4E019ULL  /* lsh._SEP */
#define CDK_LSH_SET0 0x2545F4914F6CDD1DULL /* _member_set_hash's start */

/* minhash._fmix64 (MurmurHash3's finaliser) */
static inline uint64_t cdk_lsh_fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    return k ^ (k >> 33);
}

/* Bands first_band .. first_band + num_bands - 1 (rows values each) of n signatures of ncols
 * values (row-major) into out (n x num_bands). Each band's start depends on its index only:
 * computed once, not once a document. */
#define CDK_BAND_HASHES(NAME, T)                                                              \
    int NAME(const T *sig, int64_t n, int64_t ncols, int64_t num_bands, int64_t rows,         \
             int64_t first_band, uint64_t *out) {                                             \
        uint64_t *seed = (uint64_t *)malloc((size_t)(num_bands > 0 ? num_bands : 1) * 8);     \
        if (seed == NULL) return CDK_NOMEM;                                                   \
        for (int64_t k = 0; k < num_bands; k++)                                               \
            seed[k] = cdk_lsh_fmix64((uint64_t)(first_band + k + 1) * CDK_LSH_SEP);          \
        for (int64_t i = 0; i < n; i++) {                                                     \
            const T *row = sig + i * ncols + first_band * rows;                               \
            for (int64_t k = 0; k < num_bands; k++) {                                         \
                uint64_t acc = seed[k];                                                       \
                for (int64_t j = 0; j < rows; j++)                                            \
                    acc = (acc ^ (uint64_t)row[k * rows + j]) * CDK_LSH_POLY;                 \
                out[i * num_bands + k] = cdk_lsh_fmix64(acc);                                 \
            }                                                                                 \
        }                                                                                     \
        free(seed);                                                                           \
        return CDK_OK;                                                                        \
    }

CDK_BAND_HASHES(cdk_band_hashes_u32, uint32_t)
CDK_BAND_HASHES(cdk_band_hashes_u64, uint64_t)

/* A hash of each bucket's sorted members uid[starts[g]:ends[g]] (out: n). */
int cdk_member_set_hash(const int64_t *uid, const int64_t *starts, const int64_t *ends,
                        int64_t n, uint64_t *out) {
    for (int64_t g = 0; g < n; g++) {
        uint64_t acc = CDK_LSH_SET0;
        int64_t p = starts[g], e = ends[g];
        if (e - p >= 2) { /* every bucket hashed has two members or more */
            acc = (acc ^ (uint64_t)uid[p]) * CDK_LSH_POLY;
            acc = (acc ^ (uint64_t)uid[p + 1]) * CDK_LSH_POLY;
            p += 2;
        }
        for (; p < e; p++) acc = (acc ^ (uint64_t)uid[p]) * CDK_LSH_POLY;
        out[g] = cdk_lsh_fmix64(acc);
    }
    return CDK_OK;
}

/* lsh._find: the root of a, halving the path on the way */
static inline int64_t cdk_lsh_find(int64_t *parent, int64_t a) {
    while (parent[a] != a) {
        parent[a] = parent[parent[a]];
        a = parent[a];
    }
    return a;
}

/* minhash.jaccard_sorted of two sorted sets of distinct values, the merge without a branch
 * on which side steps (taken either way about half the time on sets that differ). */
static inline double cdk_lsh_jaccard(const uint64_t *a, int64_t na, const uint64_t *b,
                                     int64_t nb) {
    int64_t i = 0, j = 0, inter = 0;
    while (i < na && j < nb) {
        uint64_t x = a[i], y = b[j];
        if (x == y) { /* near-duplicates: mostly taken, predicted */
            inter++;
            i++;
            j++;
            continue;
        }
        i += x < y;
        j += y < x;
    }
    int64_t uni = na + nb - inter;
    return uni ? (double)inter / (double)uni : 0.0;
}

/* lsh._check: rows s+i and s+j; joined (1) when similar */
static inline int cdk_lsh_check(int64_t *parent, const uint64_t *sets, const int64_t *lo,
                                const int64_t *hi, int64_t s, int64_t i, int64_t j,
                                double threshold) {
    const uint64_t *a = sets + lo[s + i], *b = sets + lo[s + j];
    if (cdk_lsh_jaccard(a, hi[s + i] - lo[s + i], b, hi[s + j] - lo[s + j]) >= threshold) {
        int64_t ri = cdk_lsh_find(parent, i), rj = cdk_lsh_find(parent, j);
        parent[ri > rj ? ri : rj] = ri < rj ? ri : rj;
        return 1;
    }
    return 0;
}

/* cdk_lsh_check, and the edge (s+i, s+j) appended to out_a/out_b where joined (lsh._push_edge) */
static inline int cdk_lsh_join(int64_t *parent, const uint64_t *sets, const int64_t *lo,
                               const int64_t *hi, int64_t s, int64_t i, int64_t j,
                               double threshold, int64_t *out_a, int64_t *out_b,
                               int64_t *n_out) {
    if (!cdk_lsh_check(parent, sets, lo, hi, s, i, j, threshold)) return 0;
    out_a[*n_out] = s + i;
    out_b[*n_out] = s + j;
    *n_out += 1;
    return 1;
}

/* lsh._verify_anchors over the n_groups buckets rows starts[g]..ends[g]-1. Each edge joins
 * two parts of its bucket, so a bucket of k rows gives at most k - 1: out_a and out_b hold
 * the sum of those (the caller's bound); their count goes to counts[0], the checks made to
 * counts[1]. */
int cdk_verify_anchors(const int64_t *starts, const int64_t *ends, int64_t n_groups,
                       const uint64_t *sets, const int64_t *lo, const int64_t *hi,
                       double threshold, int64_t max_anchors, int64_t *out_a, int64_t *out_b,
                       int64_t *counts) {
    int64_t kmax = 1, n_out = 0, n_checked = 0;
    for (int64_t g = 0; g < n_groups; g++)
        if (ends[g] - starts[g] > kmax) kmax = ends[g] - starts[g];
    int64_t *parent = (int64_t *)malloc((size_t)kmax * 8);
    int64_t *anchors = (int64_t *)malloc((size_t)(max_anchors > 0 ? max_anchors : 1) * 8);
    if (parent == NULL || anchors == NULL) {
        free(parent);
        free(anchors);
        return CDK_NOMEM;
    }
    for (int64_t g = 0; g < n_groups; g++) {
        int64_t s = starts[g], k = ends[g] - s, n_anchors = 0;
        int64_t budget = max_anchors * k; /* extra checks for members no anchor vouches for */
        for (int64_t i = 0; i < k; i++) parent[i] = i;
        for (int64_t j = 0; j < k; j++) {
            if (hi[s + j] == lo[s + j]) continue;
            int matched = 0;
            for (int64_t t = 0; t < n_anchors; t++) {
                int64_t i = anchors[t];
                if (cdk_lsh_find(parent, i) == cdk_lsh_find(parent, j)) {
                    matched = 1;
                    continue;
                }
                n_checked++;
                matched |= cdk_lsh_join(parent, sets, lo, hi, s, i, j, threshold, out_a, out_b,
                                        &n_out);
            }
            if (matched) continue;
            /* no anchor matched: a partner among the earlier members, while the budget lasts */
            for (int64_t i = 0; i < j; i++) {
                if (budget <= 0) break;
                if (hi[s + i] == lo[s + i] || cdk_lsh_find(parent, i) == cdk_lsh_find(parent, j))
                    continue;
                budget--;
                n_checked++;
                matched |= cdk_lsh_join(parent, sets, lo, hi, s, i, j, threshold, out_a, out_b,
                                        &n_out);
            }
            if (!matched && n_anchors < max_anchors) anchors[n_anchors++] = j;
        }
    }
    free(parent);
    free(anchors);
    counts[0] = n_out;
    counts[1] = n_checked;
    return CDK_OK;
}
