from __future__ import annotations

import dask.dataframe as dd
import pandas as pd
import pytest

from curator_dask.dedup.exact import ExactDeduplicationWorkflow, hash_texts


def _frame() -> pd.DataFrame:
    # "dup" straddles partitions 0 and 2 (3 partitions of 3 rows)
    return pd.DataFrame(
        {
            "id": [f"d{i}" for i in range(9)],
            "text": ["dup", "a", "b", "c", "a", "e", "f", "dup", "dup"],
        }
    )


def _removed(out) -> pd.DataFrame:
    return pd.read_parquet(out / "removed_ids").sort_values("id").reset_index(drop=True)


@pytest.mark.parametrize("method", ["md5", "xxh128", "fast128"])
def test_matches_pandas_drop_duplicates(tmp_path, method):
    pdf = _frame()
    df = dd.from_pandas(pdf, npartitions=3)
    summary = ExactDeduplicationWorkflow(
        output_path=str(tmp_path), df=df, hash_method=method, perform_removal=True
    ).run()
    ref_kept = pdf.sort_values("id").drop_duplicates("text", keep="first")
    expect = sorted(set(pdf["id"]) - set(ref_kept["id"]))
    got = _removed(tmp_path)
    assert got["id"].tolist() == expect
    assert dict(zip(got["id"], got["group"], strict=False)) == {"d4": "d1", "d7": "d0", "d8": "d0"}
    assert summary["removed"] == 3
    assert summary["duplicate_groups"] == 2
    assert summary["documents"] == 9
    kept = pd.read_parquet(tmp_path / "deduplicated")
    assert sorted(kept["id"]) == sorted(ref_kept["id"])


def test_keep_last(tmp_path):
    df = dd.from_pandas(_frame(), npartitions=2)
    ExactDeduplicationWorkflow(output_path=str(tmp_path), df=df, keep="last").run()
    assert _removed(tmp_path)["id"].tolist() == ["d0", "d1", "d7"]


def test_idempotent(tmp_path):
    df = dd.from_pandas(_frame(), npartitions=3)
    ExactDeduplicationWorkflow(output_path=str(tmp_path / "1"), df=df, perform_removal=True).run()
    again = dd.read_parquet(str(tmp_path / "1" / "deduplicated"))
    s = ExactDeduplicationWorkflow(output_path=str(tmp_path / "2"), df=again).run()
    assert s["removed"] == 0


def test_sample_equals_exact_truth(tmp_path, sample_records, sample_truth_exact_groups):
    df = dd.from_pandas(pd.DataFrame(sample_records), npartitions=4)
    s = ExactDeduplicationWorkflow(output_path=str(tmp_path), df=df, hash_method="fast128").run()
    got = pd.read_parquet(tmp_path / "removed_ids")
    expect = {i for g in sample_truth_exact_groups for i in sorted(g)[1:]}
    assert set(got["id"]) == expect
    assert s["duplicate_groups"] == len(sample_truth_exact_groups)


def test_reads_input_path(tmp_path, sample_path):
    s = ExactDeduplicationWorkflow(input_path=str(sample_path), output_path=str(tmp_path)).run()
    assert s["documents"] == 4000
    assert s["removed"] == 399


def test_hash_texts_and_arguments():
    h = hash_texts(pd.Series(["x", "y", "x", None]), "md5")
    assert (h[0] == h[2]).all()
    assert not (h[0] == h[1]).all()
    assert hash_texts(pd.Series([], dtype=object), "md5").shape == (0, 2)
    with pytest.raises(ValueError, match="hash_method"):
        ExactDeduplicationWorkflow(output_path="x", hash_method="sha7")
    with pytest.raises(ValueError, match="keep"):
        ExactDeduplicationWorkflow(output_path="x", keep="longest")
