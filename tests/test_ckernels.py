"""The C kernels equal their numba twins, build once per machine, and step aside (to
numba, saying why) where no compiler builds them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import _ckernels, _kernels, _text_kernels, text
from curator_dask.filters.heuristics import COMMON_ENGLISH_WORDS, WORD_PUNCTUATION

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """No library loaded in this process, and an empty machine cache."""
    monkeypatch.setattr(_ckernels, "_LOADED", {})
    with dask.config.set({"curator.cache-dir": str(tmp_path / "cache")}):
        yield tmp_path / "cache"


#: word_list_counts' word lists and stripped characters: the filter's, and short words of
#: the random texts' alphabet, some of 9 to 16 bytes (the second packed word)
_WORD_LISTS = (
    (COMMON_ENGLISH_WORDS, WORD_PUNCTUATION),
    (frozenset({"ab", "cd", "a", "abcdefghij", "abcdefghijab", "abcdefghijabcdef"}), ".#()-"),
    (frozenset({"ab"}), ""),
)


def _inputs(docs: list[str]) -> dict[str, tuple]:
    """Each kernel's arguments (``name`` or ``name:variant``) as text.py builds them."""
    t = text.as_text(pd.Series(docs))
    offsets, data, words = text.utf8_buffers(t)
    flags = text._tables()["flags"]
    rows = np.arange(len(docs), dtype=np.int64)[::2][::-1].copy()  # every other, reversed
    inputs = {
        "doc_hashes": (offsets, data, words),
        "word_counts": (offsets, data, flags),
        "gather_strings": (offsets, data, rows),
        "document_stats": (offsets, data, words, flags),
    }
    for max_n in (1, 2, 3, 4, text.NGRAM_MAX_N):
        inputs[f"ngram_stats:{max_n}"] = (offsets, data, words, flags, max_n)
    lower = text._tables()["ascii_lower"]
    for v, (word_list, chars) in enumerate(_WORD_LISTS):
        k1s, k2s = text._pack_words(word_list)
        strip = text._strip_table(chars)
        inputs[f"word_list_counts:{v}"] = (offsets, data, strip, lower, k1s, k2s)
    return inputs


def _assert_twins(docs: list[str]) -> None:
    lib = _ckernels.library()
    assert lib is not None
    for variant, args in _inputs(docs).items():
        name = variant.split(":")[0]
        c = _ckernels.kernel(name)
        assert c is not getattr(_text_kernels, name), name
        got, want = c(*args), getattr(_text_kernels, name)(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert len(got) == len(want), name
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype, name
            assert a.shape == b.shape, variant
            np.testing.assert_array_equal(a, b, err_msg=variant)


@pytest.mark.c_compiler
def test_the_c_kernels_equal_numbas_on_the_sample(sample_records):
    _assert_twins([r["text"] for r in sample_records])


_ALPHABET = st.sampled_from(
    [*"ab cd\n\n\t.#()[]!?'\"-*+", "...", "…", "•", "\u00a0", "\u3000", "\x1c", "\x85",
    "\u2028", "\r\n", "é", "ß", "東京", "١٢", "\U0001d518", "😀", "\u0301", "abcdefghij"]
)  # fmt: skip


@pytest.mark.c_compiler
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.lists(_ALPHABET, max_size=40).map("".join), min_size=1, max_size=9))
def test_the_c_kernels_equal_numbas_on_random_text(docs):
    _assert_twins(docs)


@pytest.mark.c_compiler
def test_an_empty_partition_and_empty_documents():
    _assert_twins([""])
    _assert_twins(["", "", "a"])


@pytest.mark.c_compiler
def test_document_stats_of_long_lines_repeats_and_a_document_larger_than_the_first_table():
    line = "\u2022 é www.example.org/" + "x" * 300 + " ... …"
    many = "\n".join(["- a", "b.", "- a", "c…", "* ", " +x", "ü", "ü "] * 60)  # tables grow
    docs = [
        "\n".join([line] * 3 + ["", line + "é"]),  # lines longer than a table's 16 slots
        many,
        many + "\n\n" + many,  # a repeated paragraph, larger than the document before
        "\n".join(f"line {i}" for i in range(2_000)),  # 2,000 unique lines
        "a",  # small again: the table grown by the documents before
        "ends in é\u00a0\nö\u3000\n\u2028东京\u2026\n\U0001d518 ...",  # non-ASCII at line ends
        "https://a http:// b ftp://x www.y wwwz www. https://é http://\u00a0x https://",
        "....... #.. .... . ......#",
    ]
    _assert_twins(docs)
    stats = _ckernels.kernel("document_stats")(*_inputs(docs)["document_stats"])
    table = pd.DataFrame(stats.reshape(len(docs), -1), columns=_text_kernels.DOC_COLUMNS)
    assert table["lines"].tolist()[:5] == [4, 480, 960, 2_000, 1]
    assert table["unique_lines"].tolist()[:5] == [2, 6, 6, 2_000, 1]
    assert table["paragraphs"].tolist()[:5] == [2, 1, 2, 1, 1]
    assert table["unique_paragraphs"].tolist()[:5] == [2, 1, 1, 1, 1]
    assert len(_text_kernels.DOC_COLUMNS) == _ckernels.DOC_WIDTH


_URLISH = st.sampled_from(
    [*"hwf. \n#-*+", "https://", "http://", "ftp://", "www.", "ww", "htt", "…", "•", "é",
     "\u00a0", "\u2028", "東", "😀"]
)  # fmt: skip


@pytest.mark.c_compiler
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.lists(_URLISH, max_size=30).map("".join), min_size=1, max_size=6))
def test_document_stats_equals_numbas_on_urls_symbols_and_bullets(docs):
    args = _inputs(docs)["document_stats"]
    c = _ckernels.kernel("document_stats")
    assert c is not _text_kernels.document_stats
    got = c(*args)
    np.testing.assert_array_equal(got, _text_kernels.document_stats(*args))


_NO_MEMORY = """
import resource, sys
import numpy as np
from curator_dask import _ckernels, text
flags = text._tables()["flags"]
assert _ckernels.library() is not None
name = sys.argv[1]
if name == "document_stats":  # 8M empty lines: a line table of 2**26 slots, 3.8 GB
    data, args = np.full(8_000_000, 10, np.uint8), ()
else:  # 32M one-letter words: 7 arrays of 32M int64 a word, 1.8 GB
    data, args = np.tile(np.array([97, 32], np.uint8), 32_000_000), (10,)
offsets = np.array([0, len(data)], np.int64)
with open("/proc/self/status") as f:  # the address space in use, plus 1 GB
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), resource.RLIM_INFINITY))
try:
    _ckernels.kernel(name)(offsets, data, None, flags, *args)
except MemoryError as e:
    print("MemoryError:", e)
"""


@pytest.mark.c_compiler
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
@pytest.mark.parametrize("name", ["document_stats", "ngram_stats"])
def test_a_c_kernel_that_cannot_allocate_raises_memory_error(tmp_path, name):
    out = subprocess.run(
        [sys.executable, "-c", _NO_MEMORY, name],
        env={**os.environ, "PYTHONPATH": str(ROOT), "DASK_CURATOR__CACHE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "MemoryError: a C kernel could not allocate" in out.stdout, out.stderr[-2000:]


@pytest.mark.c_compiler
def test_documents_that_outgrow_the_scratch_and_tables():
    """Long lines and many repeated lines and n-grams, documents growing one after the other
    (so scratch and tables grow mid-partition; the first table holds 8 words), a document
    larger than all before it after small ones, and non-ASCII at words' and lines' ends."""
    words = ["the", "The,", "«and»", "of…", "é", "東京", "to—", "a", "\u00a0", "😀"]
    rng = np.random.default_rng(7)
    docs = ["", "a", "a a", "The the THE. (the)"]
    for size in (9, 30, 200, 1_000, 5_000, 20_000):
        picks = rng.integers(0, len(words), size)
        docs.append(" ".join(words[p] for p in picks))
        docs.append(("one two three é\n" * (size // 4)).rstrip())  # many repeated n-grams
        docs.append("\n".join(words[p] * 3 for p in picks))  # lines ending in non-ASCII
    docs += ["x y " * 40_000, "", "\u3000".join(["東京"] * 3_000), "short"]
    # words of over 64 code points (word_list_counts reads those from the bytes), stripped
    # to a listed word or not, and a key of 16 bytes
    docs += ["((" * 40 + "The" + ".," * 30, "«" * 70 + "the»", "the" * 30, "x" * 100]
    docs += ["(abcdefghijABCDEF). abcdefghijabcdefg -abcdefghijab- " + "#" * 65 + "ab"]
    _assert_twins(docs)


_CHILD = """
import json, sys
import pandas as pd
from curator_dask import _ckernels, _kernels, text
t = text.as_text(pd.Series(["one two", "three"]))
words = _ckernels.kernel("word_counts")(*text.utf8_buffers(t)[:2], text._tables()["flags"])
print(json.dumps({"words": words.tolist(), "compile": _kernels.compile_seconds(),
                  "lib": _ckernels.library()._name}))
"""


def _child(cache: Path, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env={**os.environ, "PYTHONPATH": str(ROOT), "DASK_CURATOR__CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.c_compiler
def test_a_machine_builds_the_library_once_and_later_processes_load_it(tmp_path):
    first = _child(tmp_path / "cache")
    second = _child(tmp_path / "cache")
    assert first["words"] == second["words"] == [2, 1]
    assert first["compile"] > 0  # the build counts as compile time
    assert second["compile"] == 0.0  # loaded, not built
    assert first["lib"] == second["lib"]
    assert Path(first["lib"]).parent == tmp_path / "cache" / "ckernels"
    assert [p.name for p in (tmp_path / "cache" / "ckernels").iterdir()] == [
        Path(first["lib"]).name
    ]  # no temporary file left


@pytest.mark.c_compiler
def test_the_build_is_said_as_a_compile(fresh):
    heard = []
    sink = lambda state, kernel, seconds: heard.append((state, kernel))  # noqa: E731
    _kernels.compile_sinks().append(sink)
    before = _kernels.compile_seconds()
    try:
        assert _ckernels.library() is not None
    finally:
        _kernels.compile_sinks().remove(sink)
    assert heard == [("start", "C kernels"), ("end", "C kernels")]
    assert _kernels.compile_seconds() > before


@pytest.mark.c_compiler
def test_a_changed_source_builds_a_new_library(fresh, tmp_path, monkeypatch):
    lib = _ckernels.library()
    src = tmp_path / "csrc"
    src.mkdir()
    for f in Path(_ckernels._SOURCES).iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    with open(src / "text_small.c", "a") as f:
        f.write("\nint cdk_extra(void) { return 7; }\n")
    monkeypatch.setattr(_ckernels, "_SOURCES", str(src))
    monkeypatch.setattr(_ckernels, "_LOADED", {})
    changed = _ckernels.library()
    assert changed._name != lib._name
    assert changed.cdk_extra() == 7


@pytest.mark.parametrize(
    ("cc", "why"),
    [("/nonexistent/cc", "no C compiler"), ("false", "exited 1")],
)
def test_without_a_working_compiler_numbas_kernels_run_and_say_why(
    fresh, monkeypatch, caplog, cc, why
):
    monkeypatch.setenv("CC", cc)
    with caplog.at_level(logging.WARNING, logger="curator_dask"):
        assert _ckernels.library() is None
        assert _ckernels.library() is None  # said once per process
    said = [r.getMessage() for r in caplog.records if "C kernels" in r.getMessage()]
    assert len(said) == 1, said
    assert why in said[0], said
    assert _ckernels.kernel("word_counts") is _text_kernels.word_counts
    assert not list(fresh.glob("ckernels/*.so"))


def test_c_kernels_false_keeps_numbas(fresh):
    with dask.config.set({"curator.c-kernels": False}):
        assert _ckernels.library() is None
        assert _ckernels.kernel("doc_hashes") is _text_kernels.doc_hashes
    assert not fresh.exists()


@pytest.mark.c_compiler
def test_without_a_cache_dir_the_library_is_built_for_the_process(fresh):
    with dask.config.set({"curator.cache-dir": False}):
        lib = _ckernels.library()
    assert lib is not None
    assert "curator-dask-ckernels-" in lib._name
