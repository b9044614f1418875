/* doc_hashes, word_counts and gather_strings: see _text_kernels.py for what each gives. */
#include "text_common.h"

/* Two independent 64-bit hashes of every document's bytes (h1, h2: n each). */
int cdk_doc_hashes(const int64_t *offsets, int64_t n, const uint8_t *data, uint64_t *h1,
                   uint64_t *h2) {
    for (int64_t d = 0; d < n; d++) {
        int64_t s = offsets[d], e = offsets[d + 1], i = s;
        uint64_t a = (uint64_t)(e - s) * CDK_M1;
        uint64_t b = (uint64_t)(e - s) * CDK_M2 + CDK_M3;
        for (; i + 8 <= e; i += 8) {
            uint64_t w = cdk_load(data + i, 8);
            a = cdk_rotl(a ^ w, 27) * CDK_M1;
            b = cdk_rotl(b ^ w, 31) * CDK_M3;
        }
        if (i < e) {
            uint64_t w = cdk_load(data + i, e - i);
            a = (a ^ w) * CDK_M1;
            b = (b ^ w) * CDK_M3;
        }
        h1[d] = cdk_fmix(a);
        h2[d] = cdk_fmix(b ^ CDK_M2);
    }
    return CDK_OK;
}

/* Words (maximal runs of non-whitespace code points) of every document (out: n). */
int cdk_word_counts(const int64_t *offsets, int64_t n, const uint8_t *data,
                    const uint8_t *flags, int64_t *out) {
    for (int64_t d = 0; d < n; d++) {
        int64_t i = offsets[d], e = offsets[d + 1], words = 0, k;
        int in_word = 0;
        while (i < e) {
            int space; /* 0 or 1 */
            if (data[i] < 0x80) {
                space = flags[data[i]] & CDK_WS; /* CDK_WS is bit 0 */
                i += 1;
            } else {
                int64_t cp = cdk_decode(data, i, &k);
                space = flags[cp] & CDK_WS;
                i += k;
            }
            /* without a branch on it (a word boundary is mispredicted about once a word) */
            words += !space & !in_word;
            in_word = !space;
        }
        out[d] = words;
    }
    return CDK_OK;
}

/* The bytes of strings `rows` (n of them) of a string array, one after the other, into
 * out; out_offsets (n + 1) were computed by the caller from the same offsets. */
int cdk_gather_strings(const int64_t *offsets, const uint8_t *data, const int64_t *rows,
                       int64_t n, const int64_t *out_offsets, uint8_t *out) {
    for (int64_t k = 0; k < n; k++) {
        int64_t r = rows[k];
        memcpy(out + out_offsets[k], data + offsets[r], (size_t)(offsets[r + 1] - offsets[r]));
    }
    return CDK_OK;
}
