"""Dedup commands under bad input: one input listing (README and hidden files skipped), the
quarantine beside the output directory, and every document accounted for.

The audit reads ``deduplicated/``, ``removed_ids/`` and ``<output>.curator/_quarantine/``
back with pyarrow and json; ``read = kept + removed + quarantined``; kept and removed ids
are disjoint and together the ids of every readable input document.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from _audit import cli

pytestmark = pytest.mark.integration


def test_exact_dedup_accounts_for_every_document(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    docs = [{"id": f"a{i}", "text": f"text number {i % 7} here"} for i in range(40)]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[:20]) + "{bad\n")
    more = gzip.compress("".join(json.dumps(d) + "\n" for d in docs[20:30]).encode())
    broken = bytearray(gzip.compress("".join(json.dumps(d) + "\n" for d in docs[30:]).encode()))
    broken[len(broken) // 2] ^= 0x10
    (src / "b.jsonl.gz").write_bytes(more + bytes(broken))  # second member corrupt
    (src / "README.md").write_text("# not data\n")
    (src / "_hidden.jsonl").write_text(json.dumps({"id": "h", "text": "hidden"}) + "\n")
    out = tmp_path / "out"
    args = ["exact-dedup", str(src), "--output", str(out), "--perform-removal"]
    proc = cli([*args, "--n-workers", "1", "-q"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # nothing in cwd; the run's metadata beside its output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out", "out.curator"]
    kept = ds.dataset(out / "deduplicated", format="parquet").to_table().to_pylist()
    removed = ds.dataset(out / "removed_ids", format="parquet").to_table().column("id")
    quarantine = [
        json.loads(line)
        for f in sorted((Path(str(out) + ".curator") / "_quarantine").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    kept_ids = [d["id"] for d in kept]
    removed_ids = removed.to_pylist()
    assert not set(kept_ids) & set(removed_ids)
    assert len(set(kept_ids)) == len(kept_ids)
    readable = {d["id"] for d in docs[:30]}
    assert set(kept_ids) | set(removed_ids) == readable
    # one text per kept document, each the text of the input document with that id
    by_id = {d["id"]: d["text"] for d in docs}
    assert all(by_id[d["id"]] == d["text"] for d in kept)
    assert len({d["text"] for d in kept}) == len(kept)
    # read = kept + removed + quarantined, with quarantined rows naming their files
    files = {Path(q["file"]).name for q in quarantine}
    assert files == {"a.jsonl", "b.jsonl.gz"}
    # the summary table on stdout says the same numbers
    table = dict(re.findall(r"^  (\S.*?)\s{2,}(\d+)$", proc.stdout, flags=re.M))
    assert table["documents read"] == str(len(kept) + len(removed_ids) + len(quarantine))
    assert table["quarantined"] == str(len(quarantine))


def _quarantine(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for f in sorted((Path(str(out) + ".curator") / "_quarantine").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]


def _zst_inputs(src: Path) -> tuple[list[dict], Path, Path]:
    """Good documents, a .zst of random bytes and a .zst with a flipped bit."""
    import os

    import zstandard

    src.mkdir()
    good = [{"id": f"g{i}", "text": f"good document number {i} here"} for i in range(20)]
    (src / "ok.jsonl").write_text("".join(json.dumps(d) + "\n" for d in good))
    garbage = src / "garbage.jsonl.zst"
    garbage.write_bytes(os.urandom(3000))
    body = "".join(json.dumps({"id": f"c{i}", "text": f"doc {i}"}) + "\n" for i in range(300))
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(body.encode()))
    data[len(data) // 2] ^= 1
    corrupt = src / "corrupt.jsonl.zst"
    corrupt.write_bytes(bytes(data))
    return good, garbage, corrupt


def test_a_corrupt_or_garbage_zst_is_quarantined_by_the_dedup_commands_and_read_jsonl(
    tmp_path: Path,
) -> None:
    """Issue 21 (4): no bare ZstdError; the bad files are quarantine rows naming them."""
    from curator_dask.io import QuarantineWarning, read_jsonl

    good, garbage, corrupt = _zst_inputs(tmp_path / "in")
    src = tmp_path / "in"
    for command in ("exact-dedup", "fuzzy-dedup"):
        out = tmp_path / command
        args = [command, str(src), "--output", str(out), "--perform-removal", "-q", "--json"]
        if command == "fuzzy-dedup":
            args += ["--cache-dir", str(tmp_path / "cache")]
        proc = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        quarantine = _quarantine(out)
        assert {q["file"] for q in quarantine} == {str(garbage), str(corrupt)}
        kept = ds.dataset(out / "deduplicated", format="parquet").to_table().to_pylist()
        assert sorted(d["id"] for d in kept) == sorted(d["id"] for d in good)
        assert json.loads(proc.stdout)["quarantined"] == len(quarantine)
    qdir = tmp_path / "q"
    with pytest.warns(QuarantineWarning):
        got = read_jsonl(str(src), quarantine_path=str(qdir)).compute()
    assert sorted(got["id"]) == sorted(d["id"] for d in good)
    rows = [json.loads(x) for f in qdir.rglob("*.jsonl") for x in f.read_text().splitlines()]
    assert {q["file"] for q in rows} == {str(garbage), str(corrupt)}


@pytest.mark.parametrize("command", ["exact-dedup", "fuzzy-dedup"])
def test_perform_removal_with_a_column_typed_differently_in_two_files(
    tmp_path: Path, command: str
) -> None:
    """Issue 21 (4): ``score`` is a double in one Parquet file and a string in the other.

    ``deduplicated/`` is written with the run's one schema (a string column: ``"0.5"``,
    ``"high"``, as ``curator-dask run`` writes it) and holds every document not removed,
    with its id and text unaltered; removed + kept = the input.
    """
    import pandas as pd

    src = tmp_path / "in"
    src.mkdir()
    a = pd.DataFrame(
        {
            "id": [f"a{i}" for i in range(20)],
            "text": [f"alpha doc {i % 5} is here today" for i in range(20)],
            "score": [0.5] * 20,
        }
    )
    b = pd.DataFrame(
        {
            "id": [f"b{i}" for i in range(20)],
            "text": [f"beta number {i} lives over there" for i in range(20)],
            "score": ["high"] * 20,
        }
    )
    a.to_parquet(src / "a.parquet")
    b.to_parquet(src / "b.parquet")
    out = tmp_path / "out"
    args = [command, str(src), "--output", str(out), "--perform-removal", "-q"]
    if command == "fuzzy-dedup":
        args += ["--cache-dir", str(tmp_path / "cache")]
    proc = cli([*args, "--n-workers", "1"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = ds.dataset(out / "deduplicated", format="parquet").to_table()
    kept = table.to_pylist()
    removed = ds.dataset(out / "removed_ids", format="parquet").to_table().column("id").to_pylist()
    texts = {r["id"]: r["text"] for r in [*a.to_dict("records"), *b.to_dict("records")]}
    assert sorted([d["id"] for d in kept] + removed) == sorted(texts)
    assert all(texts[d["id"]] == d["text"] for d in kept)
    assert {d["score"] for d in kept} == {"0.5", "high"}
    assert len(removed) == 15  # 5 texts, 4 copies each removed


def test_removed_ids_are_not_published_when_deduplicated_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21 (4): the outputs are written first and put in place together."""
    import pandas as pd

    from curator_dask.dedup import ExactDeduplicationWorkflow, _common

    texts = [f"t {i % 3}" for i in range(12)]
    df = pd.DataFrame({"id": [f"d{i}" for i in range(12)], "text": texts})
    real = _common.remove_documents

    def broken(*args: object, **kwargs: object) -> object:
        kept = real(*args, **kwargs)
        return kept.map_partitions(lambda p: p.assign(text=1 / 0), meta=kept._meta)

    monkeypatch.setattr(_common, "remove_documents", broken)
    import dask.dataframe as dd

    wf = ExactDeduplicationWorkflow(
        output_path=str(tmp_path / "out"), df=dd.from_pandas(df, 2), perform_removal=True
    )
    with pytest.raises(ZeroDivisionError):
        wf.run()
    out = tmp_path / "out"
    assert not (out / "removed_ids").exists()
    assert not (out / "deduplicated").exists()
    assert not out.exists() or not [p for p in out.iterdir() if ".tmp-" in p.name]
