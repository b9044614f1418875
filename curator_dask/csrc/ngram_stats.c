/* ngram_stats and word_list_counts: see _text_kernels.py for what each gives. */
#include "text_common.h"

/* The per-document scratch of ngram_stats, for documents of up to `cap` - 2 words. */
typedef struct {
    int64_t cap;
    int64_t *w_start, *w_end, *cum, *prev, *cur, *cnt_prev, *cnt_cur;
} cdk_ngram_scratch;

static void cdk_ngram_scratch_free(cdk_ngram_scratch *w) {
    free(w->w_start);
    free(w->w_end);
    free(w->cum);
    free(w->prev);
    free(w->cur);
    free(w->cnt_prev);
    free(w->cnt_cur);
    memset(w, 0, sizeof(*w));
}

static int cdk_ngram_scratch_init(cdk_ngram_scratch *w, int64_t cap) {
    cdk_ngram_scratch_free(w);
    size_t b = (size_t)(cap + 1) * sizeof(int64_t);
    w->cap = cap;
    w->w_start = (int64_t *)malloc(b);
    w->w_end = (int64_t *)malloc(b);
    w->cum = (int64_t *)malloc(b);
    w->prev = (int64_t *)malloc(b);
    w->cur = (int64_t *)malloc(b);
    w->cnt_prev = (int64_t *)calloc((size_t)cap + 1, sizeof(int64_t)); /* read at 0 when */
    w->cnt_cur = (int64_t *)calloc((size_t)cap + 1, sizeof(int64_t));  /* no id is set */
    if (!(w->w_start && w->w_end && w->cum && w->prev && w->cur && w->cnt_prev && w->cnt_cur)) {
        cdk_ngram_scratch_free(w);
        return CDK_NOMEM;
    }
    return CDK_OK;
}

/* One slot of the n-gram table: a word (its bytes data[a:b]) or an n-gram (its key in a),
 * its id; the slot belongs to the current level when stamp is gen. A slot is one half of
 * a cache line (numba's five arrays are up to four lines a probe). */
typedef struct {
    int64_t stamp, a, b, id;
} cdk_ngram_slot;

/* data[s:e] (e - s <= 8) as a little-endian integer; data_end: the end of the readable
 * bytes, before which 8 are read at once */
static inline uint64_t cdk_tail(const uint8_t *data, int64_t s, int64_t e, int64_t data_end) {
    if (s + 8 <= data_end) {
        uint64_t w = cdk_load(data + s, 8);
        return e - s == 8 ? w : w & ((1ULL << (8 * (e - s))) - 1);
    }
    return cdk_load(data + s, e - s);
}

/* cdk_hash_bytes, with the last bytes read as one word where the buffer allows */
static inline uint64_t cdk_hash_word(const uint8_t *data, int64_t s, int64_t e,
                                     int64_t data_end) {
    uint64_t h = (uint64_t)(e - s) * CDK_M1;
    int64_t i = s;
    while (i + 8 <= e) {
        h = cdk_rotl(h ^ cdk_load(data + i, 8), 27) * CDK_M1;
        i += 8;
    }
    if (i < e) h ^= cdk_tail(data, i, e, data_end);
    return cdk_fmix(h);
}

/* Word n-gram repetition of every document for n = 1 .. max_n, into out (n_docs rows of
 * 1 + 2 * max_n int64, zeroed by the caller). */
int cdk_ngram_stats(const int64_t *offsets, int64_t n_docs, const uint8_t *data,
                    const uint8_t *flags, int64_t max_n, int64_t *out) {
    int64_t width = 1 + 2 * max_n, gen = 0, size = 0;
    int64_t data_end = n_docs > 0 ? offsets[n_docs] : 0;
    int rc = CDK_OK;
    cdk_ngram_scratch w;
    cdk_ngram_slot *table = NULL;
    memset(&w, 0, sizeof(w));
    if (cdk_ngram_scratch_init(&w, 16)) {
        rc = CDK_NOMEM;
        goto done;
    }
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t s = offsets[d], e = offsets[d + 1];
        int64_t need = (e - s) / 2 + 2;
        if (need > w.cap && cdk_ngram_scratch_init(&w, need)) {
            rc = CDK_NOMEM;
            goto done;
        }
        int64_t *w_start = w.w_start, *w_end = w.w_end, *cum = w.cum;
        int64_t *prev = w.prev, *cur = w.cur, *cnt_prev = w.cnt_prev, *cnt_cur = w.cnt_cur;
        /* Words: maximal runs of non-whitespace code points, without a branch on a word's
         * start or end (mispredicted about twice a word): each code point writes the next
         * word's start (kept when a word starts there), its word's end (to a spare slot,
         * w_end[cap], when it is whitespace) and cum[m], the code points of the m words so
         * far (rewritten unchanged between words). */
        int64_t m = 0, i = s, k, chars = 0, spare = w.cap;
        int64_t in_word = 0;
        cum[0] = 0;
        while (i < e) {
            int64_t cp;
            if (data[i] < 0x80) {
                cp = data[i];
                k = 1;
            } else {
                cp = cdk_decode(data, i, &k);
            }
            int64_t word = !(flags[cp] & CDK_WS);
            w_start[m] = i;
            m += word & !in_word;
            chars += word;
            cum[m] = chars;
            w_end[word ? m - 1 : spare] = i + k;
            in_word = word;
            i += k;
        }
        if (m == 0) continue;
        int64_t *row = out + d * width;
        row[0] = cum[m];
        need = cdk_table_size(m);
        if (need > size) {
            free(table);
            table = (cdk_ngram_slot *)calloc((size_t)need, sizeof(cdk_ngram_slot));
            if (!table) {
                rc = CDK_NOMEM;
                goto done;
            }
            size = need;
            gen = 0;
        }
        int64_t mask = size - 1;
        for (int64_t n = 1; n <= max_n; n++) {
            int64_t positions = m - n + 1;
            if (positions <= 0) break;
            gen += 1;
            int64_t next_id = 0;
            if (n == 1) {
                for (int64_t j = 0; j < m; j++) {
                    int64_t a = w_start[j], b = w_end[j];
                    int64_t slot = (int64_t)(cdk_hash_word(data, a, b, data_end) & (uint64_t)mask);
                    int64_t got;
                    for (;;) {
                        cdk_ngram_slot *t = table + slot;
                        if (t->stamp != gen) {
                            t->stamp = gen;
                            t->a = a;
                            t->b = b;
                            t->id = got = next_id;
                            cnt_cur[next_id++] = 0;
                            break;
                        }
                        if (cdk_same(data, a, b, t->a, t->b)) {
                            got = t->id;
                            break;
                        }
                        slot = (slot + 1) & mask;
                    }
                    cur[j] = got;
                    cnt_cur[got] += 1;
                }
            } else {
                for (int64_t j = 0; j < positions; j++) {
                    /* -1: an (n-1)-gram that does not repeat (see below) */
                    int64_t a = prev[j], b = prev[j + 1];
                    if ((a | b) < 0) {
                        cur[j] = -1;
                        continue;
                    }
                    /* numba's int64 arithmetic wraps: so does this, in uint64 */
                    int64_t key = (int64_t)((uint64_t)a * (uint64_t)m + (uint64_t)b);
                    int64_t slot = (int64_t)(cdk_fmix((uint64_t)key) & (uint64_t)mask);
                    int64_t got;
                    for (;;) {
                        cdk_ngram_slot *t = table + slot;
                        if (t->stamp != gen) {
                            t->stamp = gen;
                            t->a = key;
                            t->id = got = next_id;
                            cnt_cur[next_id++] = 0;
                            break;
                        }
                        if (t->a == key) {
                            got = t->id;
                            break;
                        }
                        slot = (slot + 1) & mask;
                    }
                    cur[j] = got;
                    cnt_cur[got] += 1;
                }
            }
            /* The most frequent repeated n-gram and the words repeated n-grams cover,
             * without a branch on whether an n-gram repeats (unpredictable); an n-gram that
             * does not is marked -1 in cur: the next level skips it without its count. */
            int64_t best_count = 0, best_chars = 0, covered = 0, cover_end = 0;
            for (int64_t j = 0; j < positions; j++) {
                int64_t g = cur[j];
                int64_t c = cnt_cur[g < 0 ? 0 : g] & -(int64_t)(g >= 0);
                int64_t rep = c >= 2;
                int64_t nchars = cum[j + n] - cum[j];
                int64_t better = rep & ((c > best_count) | ((c == best_count) & (nchars > best_chars)));
                best_count = better ? c : best_count;
                best_chars = better ? nchars : best_chars;
                cover_end = rep ? j + n : cover_end; /* j + n grows with j */
                covered += (cum[j + 1] - cum[j]) & -(int64_t)(j < cover_end);
                cur[j] = rep ? g : -1;
            }
            for (int64_t j = positions; j < cover_end; j++) covered += cum[j + 1] - cum[j];
            row[2 * n - 1] = best_count * best_chars;
            row[2 * n] = covered;
            if (best_count == 0) break; /* no n-gram repeats, so no longer one does */
            /* this level's ids and counts are the next level's previous ones */
            int64_t *swap = prev;
            prev = cur;
            cur = swap;
            swap = cnt_prev;
            cnt_prev = cnt_cur;
            cnt_cur = swap;
        }
    }
done:
    cdk_ngram_scratch_free(&w);
    free(table);
    return rc;
}

/* the code point at data[i] (its length in *k), ASCII without the decoder's branches */
static inline int64_t cdk_next_cp(const uint8_t *data, int64_t i, int64_t *k) {
    if (data[i] < 0x80) {
        *k = 1;
        return data[i];
    }
    return cdk_decode(data, i, k);
}

/* word_list_counts' key of the word data[a:b] (its ends not stripped yet), read from the
 * bytes: for words too long for the per-word buffers. 1 when it is a key (all its code
 * points lower-case to one ASCII byte, at most 16 of them). */
static int cdk_word_key_bytes(const uint8_t *data, int64_t a, int64_t b, const uint8_t *strip,
                              const uint8_t *lower, uint64_t *k1, uint64_t *k2) {
    int64_t k, nbytes = 0;
    while (a < b) {
        if (!strip[cdk_next_cp(data, a, &k)]) break;
        a += k;
    }
    while (b > a) {
        int64_t j = cdk_prev_start(data, b);
        if (!strip[cdk_next_cp(data, j, &k)]) break;
        b = j;
    }
    *k1 = *k2 = 0;
    for (int64_t p = a; p < b; p += k) {
        uint64_t c = lower[cdk_next_cp(data, p, &k)];
        if (c == 0 || nbytes >= 16) return 0;
        if (nbytes < 8)
            *k1 |= c << (8 * nbytes);
        else
            *k2 |= c << (8 * (nbytes - 8));
        nbytes += 1;
    }
    return 1;
}

/* the low `bytes` (0..8) bytes of all ones */
static inline uint64_t cdk_low_bytes(int64_t bytes) {
    return bytes >= 8 ? ~0ULL : (1ULL << (8 * bytes)) - 1;
}

/* 1 when a byte of w is 0 */
static inline int cdk_has_zero_byte(uint64_t w) {
    return ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL) != 0;
}

#define CDK_WORD_BUF 64

/* Occurrences per document of the words of a sorted set of packed ASCII words (k1s, k2s:
 * n_keys each), into out (n_docs). lower: the ASCII byte each code point lower-cases to
 * (255: whitespace, 0: none); strip: 1 for the code points stripped from a word's ends.
 *
 * A word's code points are read once: their lower-case bytes and strip bits go to two
 * small buffers, from which its ends are stripped and its key is read as two words; the
 * key's checks and the set's binary search have no data-dependent branch (about one
 * mispredicted branch a word is left, its end). */
int cdk_word_list_counts(const int64_t *offsets, int64_t n_docs, const uint8_t *data,
                         const uint8_t *strip, const uint8_t *lower, const uint64_t *k1s,
                         const uint64_t *k2s, int64_t n_keys, int64_t *out) {
    uint8_t low[CDK_WORD_BUF + 16], stripped[CDK_WORD_BUF];
    memset(low, 0, sizeof(low));
    for (int64_t d = 0; d < n_docs; d++) {
        int64_t i = offsets[d], e = offsets[d + 1], count = 0, k;
        while (i < e) {
            int64_t cp = cdk_next_cp(data, i, &k);
            uint8_t c = lower[cp];
            if (c == 255) { /* whitespace */
                i += k;
                continue;
            }
            int64_t a = i, ncp = 0;
            for (;;) {
                low[ncp & (CDK_WORD_BUF - 1)] = c;
                stripped[ncp & (CDK_WORD_BUF - 1)] = strip[cp];
                ncp += 1;
                i += k;
                if (i >= e) break;
                cp = cdk_next_cp(data, i, &k);
                c = lower[cp];
                if (c == 255) break;
            }
            uint64_t k1, k2;
            int ok;
            if (ncp > CDK_WORD_BUF) {
                ok = cdk_word_key_bytes(data, a, i, strip, lower, &k1, &k2);
            } else {
                int64_t f = 0, l = ncp;
                while (f < l && stripped[f]) f++;
                while (l > f && stripped[l - 1]) l--;
                int64_t len = l - f; /* code points, each one byte of the key */
                uint64_t m1 = cdk_low_bytes(len), m2 = len > 8 ? cdk_low_bytes(len - 8) : 0;
                k1 = cdk_load(low + f, 8) & m1;
                k2 = cdk_load(low + f + 8, 8) & m2;
                /* a byte past the key reads as 0xFF: only the key's own zeros count */
                ok = (len <= 16) & !cdk_has_zero_byte(k1 | ~m1) & !cdk_has_zero_byte(k2 | ~m2);
            }
            if (n_keys == 0) continue;
            /* the first pair not below (k1, k2), without a branch per step (each one a coin
             * toss for the predictor) */
            int64_t lo = 0, len = n_keys;
            while (len > 1) {
                int64_t half = len / 2, m = lo + half - 1;
                int below = (k1s[m] < k1) | ((k1s[m] == k1) & (k2s[m] < k2));
                lo = below ? lo + half : lo;
                len -= half;
            }
            lo += (k1s[lo] < k1) | ((k1s[lo] == k1) & (k2s[lo] < k2));
            lo -= lo == n_keys; /* past the end: compare with the last (not equal) */
            count += ok & (k1s[lo] == k1) & (k2s[lo] == k2);
        }
        out[d] = count;
    }
    return CDK_OK;
}
