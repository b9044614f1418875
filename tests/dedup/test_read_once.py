"""Each workflow reads its input once, and still accounts for every record."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.io import JsonlReader, QuarantineWarning
from tests.dedup.test_fuzzy import _corpus, _ref_removed


def _write(src, pdf: pd.DataFrame, n_files: int = 3) -> int:
    """``pdf`` over ``n_files`` JSONL files, plus one bad line in the last; lines written."""
    src.mkdir()
    chunks = [pdf.iloc[i::n_files] for i in range(n_files)]
    for k, chunk in enumerate(chunks):
        lines = [json.dumps({"id": r.id, "text": r.text}) for r in chunk.itertuples()]
        if k == n_files - 1:
            lines.append("{not json")
        (src / f"part-{k}.jsonl").write_text("\n".join(lines) + "\n")
    return len(pdf) + 1


@pytest.fixture
def reads(monkeypatch):
    """Counts ``JsonlReader.read_file`` calls per (file, range)."""
    seen: collections.Counter = collections.Counter()
    original = JsonlReader.read_file

    def counting(self, path, start, end):
        seen[(path, start, end)] += 1
        return original(self, path, start, end)

    monkeypatch.setattr(JsonlReader, "read_file", counting)
    return seen


def _kept(out) -> pd.DataFrame:
    return pd.read_parquet(out / "deduplicated")


def test_exact_dedup_reads_the_input_once(tmp_path, reads):
    pdf = pd.DataFrame(
        {"id": [f"d{i}" for i in range(30)], "text": [f"text {i % 11}" for i in range(30)]}
    )
    lines = _write(tmp_path / "in", pdf)
    out = tmp_path / "out"
    with pytest.warns(QuarantineWarning):
        res = ExactDeduplicationWorkflow(
            str(tmp_path / "in"), output_path=str(out), perform_removal=True, blocksize=64
        ).run()
    assert len(reads) >= 3  # several partitions (one per file at least) ...
    assert set(reads.values()) == {1}  # ... each read exactly once
    expect_kept = pdf.sort_values("id").drop_duplicates("text", keep="first")  # smallest id
    kept = _kept(out)
    assert sorted(kept["id"]) == sorted(expect_kept["id"])
    assert list(kept.columns) == ["id", "text"]
    assert res.quarantined == 1
    assert len(kept) + res.removed + res.quarantined == lines
    assert not (Path(str(out) + ".curator") / "_work").exists()


def test_fuzzy_dedup_reads_the_input_once(tmp_path, reads):
    pdf = _corpus(seed=3, n_base=15)[["id", "text"]]
    ref = _ref_removed(_corpus(seed=3, n_base=15))
    lines = _write(tmp_path / "in", pdf)
    out = tmp_path / "out"
    wf = FuzzyDeduplicationWorkflow(
        input_path=str(tmp_path / "in"),
        cache_path=str(tmp_path / "cache"),
        output_path=str(out),
        word_ngrams=3,
        false_positive_check=True,
        perform_removal=True,
    )
    with pytest.warns(QuarantineWarning):
        res = wf.run()
    assert len(reads) == 3
    assert set(reads.values()) == {1}  # the candidate check and removal read the cache
    assert set(pd.read_parquet(out / "removed_ids")["id"]) == ref
    kept = _kept(out)
    assert sorted(kept["id"]) == sorted(set(pdf["id"]) - ref)
    assert res.quarantined == 1
    assert len(kept) + res.removed + res.quarantined == lines
    # a second run resumes from the cache: the input is not read at all
    reads.clear()
    again = wf.run()
    assert not reads
    assert again.removed == res.removed
    assert again.documents + again.quarantined == lines
