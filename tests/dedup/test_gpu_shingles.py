"""Shingle hashes from a string column's characters: the device kernels' logic on a CPU.

The per-document functions in ``curator_dask.dedup._gpu_shingles`` are compiled by
``numba.njit`` here and by ``numba.cuda.jit`` on a GPU; both must give the host
reference's hashes bit for bit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curator_dask.dedup import _gpu_shingles as G
from curator_dask.dedup.minhash import shingle_hashes, utf8_buffers

EDGE = [
    "",
    None,
    "a",
    "ASCII ONLY, text_with 123!! and-dashes",
    "Héllo wörld ÉÉ 😊 x y z",
    "ﬁne ① Σσς ΣΑΣ",
    "a\x00b\tc\nd",
    "日本語のテキスト 中文 한국어",
    "  leading and trailing  ",
]
CASES = [("word", "simple", 1), ("word", "simple", 5), ("word", "none", 3), ("char", "none", 1)]
CASES += [("char", "none", 5), ("char", None, 7)]


@pytest.fixture(scope="module")
def texts(sample_records) -> pd.Series:
    return pd.Series([r["text"] for r in sample_records[:1500]] + EDGE, dtype=object)


def test_packed_units_are_cudf_code_points():
    # cudf's own example (StringMethods.code_points): "é" is its UTF-8 bytes, 0xC3A9
    data, offsets = utf8_buffers(pd.Series(["a", "xyz", "éee"]))
    units, unit_offsets = G.pack_utf8(data, offsets)
    assert units.tolist() == [97, 120, 121, 122, 50089, 101, 101]
    assert unit_offsets.tolist() == [0, 1, 4, 7]
    data, offsets = utf8_buffers(pd.Series(["😊"]))
    assert G.pack_utf8(data, offsets)[0].tolist() == [0xF09F988A]


@pytest.mark.parametrize(("kind", "norm", "ngram"), CASES)
def test_kernels_equal_the_host_reference_bit_for_bit(texts, kind, norm, ngram):
    want_h, want_o = shingle_hashes(texts, ngram, kind, norm)
    units, unit_offsets = G.pack_utf8(*utf8_buffers(texts))
    h, o, host = G.shingle_hashes_from_units(units, unit_offsets, ngram, kind, norm)
    if kind == "word" and norm == "simple":
        assert 0 < len(host) < len(texts) // 4  # non-ASCII documents only
        assert all(not str(texts.iloc[i] or "").isascii() for i in host)
    else:
        assert len(host) == 0
    h, o = G.splice_host_docs(h, o, host, texts.iloc[host], ngram, kind, norm)
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(h, want_h)


def test_unsupported_normalisation_is_refused():
    assert not G.device_supported("char", "simple")
    units, offsets = G.pack_utf8(*utf8_buffers(pd.Series(["ab"])))
    with pytest.raises(ValueError, match="normalization='none'"):
        G.shingle_hashes_from_units(units, offsets, 2, "char", "simple")


@pytest.mark.gpu
@pytest.mark.parametrize(("kind", "norm", "ngram"), CASES)
def test_device_shingles_equal_the_host_reference(texts, kind, norm, ngram):
    cudf = pytest.importorskip("cudf")
    cupy = pytest.importorskip("cupy")
    want_h, want_o = shingle_hashes(texts, ngram, kind, norm)
    gtext = cudf.from_pandas(texts)
    h, o = G.device_shingle_hashes(gtext, ngram, kind, norm)
    np.testing.assert_array_equal(cupy.asnumpy(o), want_o)
    np.testing.assert_array_equal(cupy.asnumpy(h), want_h)
