/* document_stats: see _text_kernels.document_stats (and DOC_COLUMNS) for what it gives.
 *
 * The counts of the per-character pass are kept without branches on the character's
 * class (gcc -O2 compiles such ifs to branches, mispredicted about once a word; numba's
 * LLVM makes selects of them): a word's length runs and is reset by whitespace, the
 * longest word is the largest running length, a word holding a letter is counted at its
 * first letter. Each gives what the reference's word-end bookkeeping gives.
 */
#include "text_common.h"

#define DOC_COLUMNS 21

/* _text_kernels._url_prefix: bytes of "https://", "http://", "ftp://" or "www." at data[i]
 * (0: none); a byte past e reads as 0, which no prefix holds. */
static uint64_t url_prefix(const uint8_t *data, int64_t i, int64_t e) {
    int64_t k = e - i < 8 ? e - i : 8;
    uint64_t w = cdk_load(data + i, k);
    if (w == 0x2F2F3A7370747468ULL) return 8;                       /* https:// */
    if ((w & 0x00FFFFFFFFFFFFFFULL) == 0x002F2F3A70747468ULL) return 7; /* http:// */
    if ((w & 0x0000FFFFFFFFFFFFULL) == 0x00002F2F3A707466ULL) return 6; /* ftp:// */
    if ((w & 0x00000000FFFFFFFFULL) == 0x000000002E777777ULL) return 4; /* www. */
    return 0;
}

/* the code point at data[i] */
static inline int64_t cp_at(const uint8_t *data, int64_t i) {
    int64_t k;
    return cdk_decode(data, i, &k);
}

/* A line's (or paragraph's) characters counted into *chars, and, when its bytes are new in
 * this generation of the table (its id is *next_id), into *unique and *unique_chars */
static inline void tally(const uint8_t *data, int64_t a, int64_t b, cdk_table *t, int64_t gen,
                         int64_t *next_id, int64_t *chars, int64_t *unique, int64_t *unique_chars) {
    int64_t nc = cdk_cps(data, a, b);
    *chars += nc;
    if (cdk_intern_range(data, a, b, t, gen, *next_id) == *next_id) {
        *next_id += 1;
        *unique += 1;
        *unique_chars += nc;
    }
}

/* The scratch of one call: a table of lines (then paragraphs) and the paragraphs' ranges. */
typedef struct {
    cdk_table t;
    int64_t *p_starts, *p_ends;
} scratch;

static void scratch_free(scratch *w) {
    cdk_table_free(&w->t);
    free(w->p_starts);
    free(w->p_ends);
    w->p_starts = w->p_ends = NULL;
}

static int scratch_init(scratch *w, int64_t size) {
    scratch_free(w);
    if (cdk_table_init(&w->t, size) != CDK_OK) return CDK_NOMEM;
    w->p_starts = (int64_t *)malloc((size_t)size * sizeof(int64_t));
    w->p_ends = (int64_t *)malloc((size_t)size * sizeof(int64_t));
    if (!(w->p_starts && w->p_ends)) {
        scratch_free(w);
        return CDK_NOMEM;
    }
    return CDK_OK;
}

/* Character, word, line and paragraph counts of every document: out holds n rows of
 * DOC_COLUMNS, row after row. */
int cdk_document_stats(const int64_t *offsets, int64_t n, const uint8_t *data,
                       const uint8_t *flags, int64_t *out) {
    scratch w;
    memset(&w, 0, sizeof(w));
    if (scratch_init(&w, 16) != CDK_OK) return CDK_NOMEM;
    int64_t gen = 0;
    for (int64_t d = 0; d < n; d++) {
        const int64_t s = offsets[d], e = offsets[d + 1];
        /* -- characters and words ------------------------------------------------------ */
        int64_t chars = 0, ws = 0, alnum = 0, digits = 0, n_words = 0, letter_words = 0;
        int64_t longest = 0, parens = 0, symbols = 0, url_chars = 0, url_end = s, dots = 0;
        int64_t newlines = 0, word_len = 0;
        int64_t in_word = 0, word_letter = 0; /* 0 or 1 */
        int64_t i = s;
        while (i < e) {
            int64_t cp, k;
            if (data[i] < 0x80) {
                cp = data[i];
                k = 1;
            } else {
                cp = cdk_decode(data, i, &k);
            }
            const int64_t f = flags[cp];
            const int64_t space = f & CDK_WS, word = space ^ 1, letter = (f >> 1) & 1; /* 0/1 */
            chars += 1;
            newlines += cp == 10;
            ws += space;
            alnum += (f >> 2) & 1;
            digits += (f >> 3) & 1;
            parens += (f >> 6) & 1;
            n_words += word & (in_word ^ 1);
            word_len = space ? 0 : word_len + 1;
            longest = word_len > longest ? word_len : longest;
            letter_words += word & letter & (word_letter ^ 1);
            word_letter = word & (word_letter | letter);
            in_word = word;
            if (cp == 46) {
                dots += 1;
            } else {
                if (dots) {
                    symbols += dots / 3;
                    dots = 0;
                }
                symbols += (cp == 35) | (cp == 0x2026);
            }
            if ((cp == 104 || cp == 102 || cp == 119) && i >= url_end) {
                int64_t p = (int64_t)url_prefix(data, i, e);
                if (p && i + p < e && !(flags[cp_at(data, i + p)] & CDK_WS)) {
                    int64_t j = i, k2;
                    while (j < e) {
                        int64_t c2 = cdk_decode(data, j, &k2);
                        if (flags[c2] & CDK_WS) break;
                        url_chars += 1;
                        j += k2;
                    }
                    url_end = j;
                }
            }
            i += k;
        }
        symbols += dots / 3;
        /* -- lines and paragraphs ------------------------------------------------------ */
        int64_t need = cdk_table_size(2 * (newlines + 1));
        if (need > w.t.size) {
            if (scratch_init(&w, need) != CDK_OK) return CDK_NOMEM;
            gen = 0;
        }
        cdk_table *t = &w.t;
        gen += 1;
        int64_t lines = 0, unique_lines = 0, line_chars = 0, unique_line_chars = 0;
        int64_t no_end = 0, ellipsis = 0, bullets = 0, paras = 0, next_id = 0;
        int in_para = 0;
        int64_t ls = s;
        while (ls <= e) {
            const uint8_t *nl = (const uint8_t *)memchr(data + ls, '\n', (size_t)(e - ls));
            int64_t le = nl ? (int64_t)(nl - data) : e;
            int64_t a = ls, b = le;
            cdk_strip(data, flags, &a, &b);
            if (a < b) {
                lines += 1;
                tally(data, a, b, t, gen, &next_id, &line_chars, &unique_lines, &unique_line_chars);
                int64_t first = cp_at(data, a);
                int64_t last = cp_at(data, cdk_prev_start(data, b));
                no_end += !(flags[last] & CDK_ENDMARK);
                if (last == 0x2026 ||
                    (b - a >= 3 && data[b - 1] == 46 && data[b - 2] == 46 && data[b - 3] == 46))
                    ellipsis += 1;
                if (flags[first] & CDK_BULLET) {
                    bullets += 1;
                } else if (first == 45 || first == 42 || first == 43) {
                    if (a + 1 == b || (flags[cp_at(data, a + 1)] & CDK_WS)) bullets += 1;
                }
                /* A paragraph is a run of non-blank lines, stripped as a whole. */
                if (!in_para) {
                    in_para = 1;
                    w.p_starts[paras] = a;
                    paras += 1;
                }
                w.p_ends[paras - 1] = b;
            } else {
                in_para = 0;
            }
            ls = le + 1;
        }
        gen += 1;
        next_id = 0;
        int64_t unique_paras = 0, para_chars = 0, unique_para_chars = 0;
        for (int64_t p = 0; p < paras; p++) {
            int64_t a = w.p_starts[p], b = w.p_ends[p];
            tally(data, a, b, t, gen, &next_id, &para_chars, &unique_paras, &unique_para_chars);
        }
        int64_t *r = out + DOC_COLUMNS * d;
        r[0] = chars;
        r[1] = ws;
        r[2] = alnum;
        r[3] = digits;
        r[4] = n_words;
        r[5] = letter_words;
        r[6] = longest;
        r[7] = parens;
        r[8] = symbols;
        r[9] = url_chars;
        r[10] = lines;
        r[11] = unique_lines;
        r[12] = line_chars;
        r[13] = unique_line_chars;
        r[14] = no_end;
        r[15] = ellipsis;
        r[16] = bullets;
        r[17] = paras;
        r[18] = unique_paras;
        r[19] = para_chars;
        r[20] = unique_para_chars;
    }
    scratch_free(&w);
    return CDK_OK;
}
