"""The shared dedup skeleton: input listing, quarantine, atomic outputs, results, S3, removal."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.dedup import (
    DedupResult,
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    remove_duplicates,
)
from curator_dask.dedup.components import components_in_memory
from curator_dask.dedup.lsh import BAND_SHAPES, bands_for_threshold, candidate_probability
from curator_dask.io import QuarantineWarning


def _docs(n: int = 30) -> list[dict]:
    base = [f"document number {i} says something about topic {i % 7} " * 5 for i in range(n)]
    # every third document is an exact copy of the one before it
    return [
        {"id": f"d{i:03d}", "text": base[i - 1] if i % 3 == 2 else base[i], "src": "x"}
        for i in range(n)
    ]


def _write_jsonl(path, recs, extra_lines=()):
    lines = [json.dumps(r) for r in recs] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")


def _removed(out) -> set[str]:
    return set(pd.read_parquet(out / "removed_ids")["id"])


def test_directory_listing_skips_readme_and_hidden(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write_jsonl(src / "a.jsonl", _docs())
    (src / "README.md").write_text("# not data\n")
    (src / ".hidden.jsonl").write_text("garbage\n")
    (src / "_SUCCESS").write_text("")
    res = ExactDeduplicationWorkflow(str(src), output_path=str(tmp_path / "out")).run()
    assert res.documents == 30
    assert res.removed == 10
    assert isinstance(res, DedupResult)


def test_parq_suffix_is_read_as_parquet(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    pd.DataFrame(_docs()).to_parquet(src / "a.parq")
    (src / "README").write_text("not data\n")
    for path in (str(src), str(src / "a.parq")):
        res = ExactDeduplicationWorkflow(path, output_path=str(tmp_path / "out")).run()
        assert (res.documents, res.removed) == (30, 10)


def test_mixed_or_unknown_formats_ask_for_input_format(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write_jsonl(src / "a.jsonl", _docs())
    pd.DataFrame(_docs()).to_parquet(src / "b.parquet")
    with pytest.raises(ValueError, match="input_format"):
        ExactDeduplicationWorkflow(str(src), output_path=str(tmp_path / "o")).run()
    res = ExactDeduplicationWorkflow(str(src / "*.parquet"), output_path=str(tmp_path / "o")).run()
    assert res.documents == 30
    odd = tmp_path / "data.txt"
    _write_jsonl(odd, _docs())
    with pytest.raises(ValueError, match="input_format"):
        ExactDeduplicationWorkflow(str(odd), output_path=str(tmp_path / "o")).run()
    res = ExactDeduplicationWorkflow(
        str(odd), output_path=str(tmp_path / "o"), input_format="jsonl"
    ).run()
    assert res.documents == 30


def test_quarantine_goes_under_the_output_and_is_counted(tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    _write_jsonl(src / "a.jsonl", _docs(), extra_lines=["{not json", '{"id": "z"}'])
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    with pytest.warns(QuarantineWarning):
        res = ExactDeduplicationWorkflow(str(src), output_path=str(out), perform_removal=True).run()
    assert res.quarantined == 2
    assert res.documents + res.quarantined == 32
    qdir = Path(str(out) + ".curator") / "_quarantine"
    q = pd.concat(pd.read_json(f, lines=True) for f in qdir.glob("*.jsonl"))
    assert len(q) == 2
    assert not (tmp_path / "curator_quarantine").exists()
    kept = pd.read_parquet(out / "deduplicated")
    assert len(kept) + res.removed + res.quarantined == 32
    # outputs are published whole: a marker, no temporary directories left
    assert (Path(str(out / "removed_ids") + ".curator") / "_SUCCESS").exists()
    assert (Path(str(out / "deduplicated") + ".curator") / "_SUCCESS").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert not (Path(str(out) + ".curator") / "_work").exists()


def test_output_inside_input_is_refused(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _write_jsonl(src / "a.jsonl", _docs())
    with pytest.raises(ValueError, match="overlaps"):
        ExactDeduplicationWorkflow(str(src), output_path=str(src / "out")).run()
    assert sorted(p.name for p in src.iterdir()) == ["a.jsonl"]


def test_relative_paths_are_resolved_on_the_client(tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    with gzip.open(src / "a.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(r) for r in _docs()) + "\n")
    monkeypatch.chdir(tmp_path)
    res = FuzzyDeduplicationWorkflow("in", cache_path="c", output_path="o", word_ngrams=3).run()
    assert res.paths["removed_ids"] == str(tmp_path / "o" / "removed_ids")
    assert str(res["cache_dir"]).startswith(str(tmp_path / "c"))
    assert res.removed == 10


def test_result_reads_like_a_summary():
    r = DedupResult("exact-dedup", documents=10, removed=3, duplicate_groups=2, quarantined=1,
                    seconds={"hash": 1.0, "total": 2.0}, paths={"removed_ids": "/x"})  # fmt: skip
    assert r.kept == 7
    assert r["removed"] == 3
    assert r["removed_ids"] == "/x"
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert "documents read" in repr(r)
    assert "11" in repr(r)
    assert "<table>" in r._repr_html_()


def test_duplicate_groups_and_remove_duplicates(tmp_path):
    pdf = pd.DataFrame(_docs())
    df = dd.from_pandas(pdf, npartitions=3)
    out = tmp_path / "out"
    res = ExactDeduplicationWorkflow(output_path=str(out), df=df, duplicate_groups=True).run()
    groups = pd.read_parquet(out / "duplicate_groups")
    assert len(groups) == 20
    assert groups["group"].nunique() == res.duplicate_groups == 10
    # every member listed, the kept one included; applying the table keeps one per group
    kept = remove_duplicates(df, str(out / "duplicate_groups"), keep="first").compute()
    assert set(kept["id"]) == set(pdf["id"]) - _removed(out)
    # a removed-ids table is applied as is
    kept2 = remove_duplicates(df, str(out / "removed_ids"), keep=None).compute()
    assert set(kept2["id"]) == set(kept["id"])
    # a table made elsewhere, with integer group labels; keep="last" keeps the largest id
    table = pd.DataFrame({"id": ["d000", "d001", "d004"], "group": [7, 7, 7]})
    left = remove_duplicates(df, table, keep="last").compute()
    assert set(pdf["id"]) - set(left["id"]) == {"d000", "d001"}
    assert left.columns.tolist() == pdf.columns.tolist()


def test_remove_duplicates_reads_a_table_with_its_storage_options(tmp_path):
    # a directory on a filesystem that needs its options to be found at all: fsspec's
    # dir:// takes its root from storage_options (without them it cannot resolve the path)
    import fsspec

    pdf = pd.DataFrame(_docs(12))
    df = dd.from_pandas(pdf, npartitions=3)
    (tmp_path / "dups").mkdir()
    table = pd.DataFrame({"id": ["d001", "d002", "d004", "d005"], "group": [0, 0, 1, 1]})
    table.to_parquet(tmp_path / "dups" / "part.0.parquet")
    options = {"path": str(tmp_path), "fs": fsspec.filesystem("file")}
    kept = remove_duplicates(df, "dir://dups", keep="first", storage_options=options).compute()
    assert sorted(set(pdf["id"]) - set(kept["id"])) == ["d002", "d005"]
    assert len(kept) == len(pdf) - 2


def test_components_without_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    got = components_in_memory([5, 7, 1, 9], [7, 1, 3, 10])
    assert dict(zip(got["uid"], got["label"], strict=True)) == {
        1: 1, 3: 1, 5: 1, 7: 1, 9: 9, 10: 9,
    }  # fmt: skip


def test_band_shape_follows_the_threshold():
    assert bands_for_threshold(0.8, True) == BAND_SHAPES["recall"] == (30, 8)
    for t in (0.3, 0.5, 0.9):
        b, r = bands_for_threshold(t, True)
        assert candidate_probability(t, b, r) >= 0.99
    assert FuzzyDeduplicationWorkflow().bands() == (30, 8)
    assert FuzzyDeduplicationWorkflow(band_shape="nemo").bands() == (20, 13)
    assert FuzzyDeduplicationWorkflow(jaccard_threshold=0.5).bands() == bands_for_threshold(
        0.5, True
    )
    assert FuzzyDeduplicationWorkflow(num_bands=20, minhashes_per_band=13).bands() == (20, 13)


@pytest.mark.integration
def test_exact_and_fuzzy_on_s3(s3_bucket, tmp_path):
    import s3fs

    url, so = s3_bucket
    fs = s3fs.S3FileSystem(**so)
    recs = _docs()
    fs.pipe(f"{url}/in/a.jsonl", ("\n".join(json.dumps(r) for r in recs) + "\n").encode())
    fs.pipe(f"{url}/in/README.md", b"# not data\n")
    ex = ExactDeduplicationWorkflow(
        f"{url}/in", output_path=f"{url}/exact", storage_options=so, perform_removal=True
    ).run()
    assert (ex.documents, ex.removed) == (30, 10)
    fz = FuzzyDeduplicationWorkflow(
        f"{url}/in", cache_path=f"{url}/cache", output_path=f"{url}/fuzzy", storage_options=so,
        word_ngrams=3,
    ).run()  # fmt: skip
    assert fz.removed == 10
    removed = pd.read_parquet(f"{url}/fuzzy/removed_ids", storage_options=so)
    assert len(removed) == 10
    kept = pd.read_parquet(f"{url}/exact/deduplicated", storage_options=so)
    assert len(kept) == 20
    assert fs.exists(f"{url}/fuzzy/removed_ids.curator/_SUCCESS")
    assert not (tmp_path / "s3:").exists()
    # a rerun reuses the S3 cache
    again = FuzzyDeduplicationWorkflow(
        f"{url}/in", cache_path=f"{url}/cache", output_path=f"{url}/fuzzy", storage_options=so,
        word_ngrams=3,
    ).run()  # fmt: skip
    assert again.stats["minhash_partitions_computed"] == 0
