/* Small dedup kernels: unique_per_doc (curator_dask/dedup/minhash.py's _unique_per_doc, with
 * _sort_range and _insertion_sort), union_into and flatten (curator_dask/dedup/components.py's
 * _union_into and _flatten, for int32 and int64 parents). Each gives, bit for bit, what its
 * numba twin gives (tests/dedup/test_ckernels_dedup_small.py compares them). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CDK_OK 0
#define CDK_NOMEM 1

#define CDK_SMALL_SORT 16 /* ranges up to this long are insertion-sorted */
#define CDK_CROWDED 32    /* a bucket with more values: the range is quicksorted instead */

/* Sort v[lo:hi] in place by insertion: short ranges, and ranges almost in order. */
static inline void cdk_insertion_sort(uint64_t *v, int64_t lo, int64_t hi) {
    for (int64_t k = lo + 1; k < hi; k++) {
        uint64_t x = v[k];
        int64_t t = k;
        while (t > lo && x < v[t - 1]) {
            v[t] = v[t - 1];
            t--;
        }
        v[t] = x;
    }
}

#define CDK_SWAP(a, b)                                                                          \
    do {                                                                                        \
        uint64_t s_ = (a);                                                                      \
        (a) = (b);                                                                              \
        (b) = s_;                                                                               \
    } while (0)

/* Sort v[lo:hi] in place (ascending): quicksort on a median of three, the smaller side first
 * and the larger on a stack (at most 64 pairs), insertion sort for short ranges. */
static inline void cdk_sort_range(uint64_t *v, int64_t lo, int64_t hi) {
    int64_t stack[128];
    int top = 0;
    for (;;) {
        while (hi - lo > CDK_SMALL_SORT) {
            int64_t mid = lo + (hi - lo) / 2;
            /* median of three into v[mid], the smallest at v[lo], the largest at v[hi - 1] */
            if (v[mid] < v[lo]) CDK_SWAP(v[mid], v[lo]);
            if (v[hi - 1] < v[mid]) {
                CDK_SWAP(v[hi - 1], v[mid]);
                if (v[mid] < v[lo]) CDK_SWAP(v[mid], v[lo]);
            }
            uint64_t pivot = v[mid];
            int64_t i = lo, j = hi - 1;
            for (;;) { /* Hoare: v[lo..i] <= pivot <= v[j..hi-1] after the scans */
                i++;
                while (v[i] < pivot) i++;
                j--;
                while (pivot < v[j]) j--;
                if (i >= j) break;
                CDK_SWAP(v[i], v[j]);
            }
            /* v[lo:j+1] <= pivot <= v[j+1:hi]; push the larger side, go on with the smaller */
            if (j + 1 - lo < hi - j - 1) {
                stack[top] = j + 1;
                stack[top + 1] = hi;
                hi = j + 1;
            } else {
                stack[top] = lo;
                stack[top + 1] = j + 1;
                lo = j + 1;
            }
            top += 2;
        }
        cdk_insertion_sort(v, lo, hi);
        if (top == 0) return;
        top -= 2;
        lo = stack[top];
        hi = stack[top + 1];
    }
}

/* Each document's hashes (n documents: offsets, n + 1) sorted and de-duplicated, one after
 * the other into out (as long as hashes); out_off (n + 1, zeroed by the caller) gets where
 * each document's ones end, *npos how many there are in all. A counting pass on the top bits
 * and a scatter from the input put uniform hashes almost in order where they go (no copy
 * before or after), and one insertion pass finishes the sort; a range with a crowded bucket
 * is copied there and quicksorted instead. */
int cdk_unique_per_doc(const uint64_t *hashes, const int64_t *offsets, int64_t n, uint64_t *out,
                       int64_t *out_off, int64_t *npos) {
    int64_t longest = 0, pos = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t m = offsets[i + 1] - offsets[i];
        longest = m > longest ? m : longest;
    }
    int64_t *count = malloc((size_t)(2 * longest + 2) * sizeof(int64_t));
    if (count == NULL) return CDK_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = offsets[i], m = offsets[i + 1] - s;
        const uint64_t *src = hashes + s;
        uint64_t *v = out + pos;
        int64_t crowded = 1; /* a short range is sorted where it is copied */
        if (m > CDK_SMALL_SORT) {
            int bits = 1;
            while (((int64_t)1 << bits) < m) bits++;
            int shift = 64 - bits;
            int64_t buckets = (int64_t)1 << bits;
            for (int64_t t = 0; t <= buckets; t++) count[t] = 0;
            crowded = 0;
            for (int64_t k = 0; k < m; k++) {
                int64_t c = ++count[(int64_t)(src[k] >> shift) + 1];
                crowded |= c > CDK_CROWDED; /* no branch: it is rarely true */
            }
            if (!crowded) {
                for (int64_t t = 0; t < buckets; t++) count[t + 1] += count[t];
                for (int64_t k = 0; k < m; k++) {
                    uint64_t x = src[k];
                    v[count[x >> shift]++] = x;
                }
            }
        }
        if (crowded) {
            memmove(v, src, (size_t)m * sizeof(uint64_t));
            if (m > CDK_SMALL_SORT) cdk_sort_range(v, 0, m);
        }
        /* an insertion pass: the whole sort of a short range, the last step of a bucketed one */
        cdk_insertion_sort(v, 0, m);
        if (m > 0) { /* compacted without a branch on a repeat */
            int64_t w = 1;
            for (int64_t k = 1; k < m; k++) {
                uint64_t x = v[k];
                v[w] = x;
                w += x != v[w - 1];
            }
            pos += w;
        }
        out_off[i + 1] = pos;
    }
    free(count);
    *npos = pos;
    return CDK_OK;
}

/* Union-find: the edges (a[k], b[k]), m of them, joined into parent (parent[i] <= i always
 * holds: a root is the smallest slot of its tree), paths halved on the way; then flatten:
 * every slot pointed at its root (parent[i] < i is final by the time i is reached). */
#define CDK_UNION(NAME, T)                                                                      \
    int NAME(T *parent, const T *a, const T *b, int64_t m) {                                    \
        for (int64_t k = 0; k < m; k++) {                                                       \
            T x = a[k], y = b[k];                                                               \
            while (parent[x] != x) {                                                            \
                parent[x] = parent[parent[x]];                                                  \
                x = parent[x];                                                                  \
            }                                                                                   \
            while (parent[y] != y) {                                                            \
                parent[y] = parent[parent[y]];                                                  \
                y = parent[y];                                                                  \
            }                                                                                   \
            if (x < y)                                                                          \
                parent[y] = x;                                                                  \
            else if (y < x)                                                                     \
                parent[x] = y;                                                                  \
        }                                                                                       \
        return CDK_OK;                                                                          \
    }
#define CDK_FLATTEN(NAME, T)                                                                    \
    int NAME(T *parent, int64_t n) {                                                            \
        for (int64_t i = 0; i < n; i++) parent[i] = parent[parent[i]];                          \
        return CDK_OK;                                                                          \
    }

CDK_UNION(cdk_union_into_i32, int32_t)
CDK_UNION(cdk_union_into_i64, int64_t)
CDK_FLATTEN(cdk_flatten_i32, int32_t)
CDK_FLATTEN(cdk_flatten_i64, int64_t)
