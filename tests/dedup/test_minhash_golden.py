# ruff: noqa: RUF001 (the sample is text in many scripts on purpose)
"""Signatures of a fixed multilingual sample, as digests recorded before any speed-up.

The word and character shingles and the 32- and 64-bit signatures of documents in a dozen
scripts (sentences written for this test, in random order, with capitals, punctuation,
accents, a final sigma and compatibility forms) must not change: a faster shingler or
kernel must give the same bits. The digests were recorded at ``f747aa7``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from curator_dask.dedup.minhash import minhash_permutations, minhash_signatures, shingle_hashes

SENTENCES = [
    "The river rose after three days of rain, and the old bridge held.",
    "Le marché ouvre à sept heures ; les pêcheurs arrivent déjà fatigués.",
    "Die Straßenbahn fährt heute nicht über den Großen Platz.",
    "El niño pidió otra canción, y la abuela sonrió sin decir nada.",
    "Поезд опоздал на двадцать минут, но никто не жаловался.",
    "Ο δρόμος προς το χωριό ήταν στενός και ΣΚΟΤΕΙΝΟΣ το βράδυ.",
    "東京の図書館は月曜日に休みです。駅から歩いて十分かかります。",
    "我们明天早上去山上看日出，记得带上外套。",
    "서울의 겨울은 춥지만 시장은 늘 사람들로 붐빈다.",
    "बारिश के बाद गाँव की सड़कें फिर से हरी हो गईं।",
    "القطار يصل إلى المدينة قبل منتصف الليل بقليل.",
    "הספרייה פתוחה עד שמונה בערב, חוץ מיום שישי.",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ and the ﬁrst ligature, ① circled, “quoted” — dashed…",
    "Çocuklar bahçede oynarken öğretmen kapıyı kapattı.",
    "ที่ตลาดเช้านี้มีผลไม้สดมากมาย",
    "Tiếng Việt có nhiều dấu: người, được, những, thường.",
]


def multilingual_sample(n: int = 300, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        picks = rng.integers(0, len(SENTENCES), size=int(rng.integers(0, 12)))
        docs.append(" ".join(SENTENCES[i] for i in picks))
    docs[7] = ""  # an empty document: no shingles, the all-max signature
    return docs


def _digest(*arrays: np.ndarray) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[
        :32
    ]


GOLDEN = {
    ("word", 5, False): "bc02511fbbdc15fd9ccd36cccf8059a0",
    ("word", 5, True): "554ef52878322008fb1b632feb14ab74",
    ("word", 1, False): "5b5452a8473f08536425ec0823cb7ed2",
    ("char", 7, False): "71cff8405e91722e5eaa49927822c45a",
}


@pytest.mark.parametrize("dtype", ["string[pyarrow]", "object"])
@pytest.mark.parametrize(("kind", "ngram", "wide"), list(GOLDEN))
def test_multilingual_signatures_are_those_recorded(dtype, kind, ngram, wide):
    text = pd.Series(multilingual_sample(), dtype=dtype)
    hashes, offsets = shingle_hashes(text, ngram, kind=kind)
    sig = minhash_signatures(hashes, offsets, minhash_permutations(260, 42, wide), wide)
    assert sig.dtype == (np.uint64 if wide else np.uint32)
    assert _digest(hashes, offsets, sig) == GOLDEN[(kind, ngram, wide)]
