"""NeMo Curator scripts, written from NeMo's documentation, run with only the prefix changed.

Each script below is a Dask-era NeMo Curator script as its documentation shows them
(``import nemo_curator``). The test replaces ``nemo_curator`` with ``curator_dask.nemo``,
runs the script in a fresh Python process, reads what it wrote, and compares it with the
same work done through curator_dask's own API.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.filters import RepeatedLinesFilter, RepeatingTopNGramsFilter, WordCountFilter
from curator_dask.io import read_jsonl

ROOT = Path(__file__).resolve().parents[2]

FILTER_SCRIPT = '''
import sys

import nemo_curator as nc
from nemo_curator.datasets import DocumentDataset
from nemo_curator.filters import (
    DocumentFilter,
    RepeatedLinesFilter,
    RepeatingTopNGramsFilter,
    WordCountFilter,
)
from nemo_curator.utils.distributed_utils import get_client


class IncompleteStoryFilter(DocumentFilter):
    """Drop stories that do not end with punctuation (a per-document filter)."""

    def __init__(self):
        super().__init__()
        self._story_terminators = {".", "!", "?", '"', "\\u201d"}

    def score_document(self, text: str) -> bool:
        return text.strip()[-1:] in self._story_terminators

    def keep_document(self, score) -> bool:
        return score


def main(input_dir, output_dir):
    client = get_client(cluster_type="cpu", n_workers=2, threads_per_worker=1)
    dataset = DocumentDataset.read_json(input_dir, add_filename=True)
    filters = nc.Sequential(
        [
            nc.ScoreFilter(
                WordCountFilter(min_words=80, lang="en"),
                text_field="text",
                score_field="word_count",
                score_type=int,
            ),
            nc.ScoreFilter(IncompleteStoryFilter(), text_field="text"),
            nc.ScoreFilter(RepeatedLinesFilter(max_repeated_line_fraction=0.7)),
            nc.ScoreFilter(RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2)),
        ]
    )
    filtered = filters(dataset)
    filtered.to_json(output_dir, write_to_filename=True)
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''

EXACT_SCRIPT = """
import sys

from nemo_curator import ExactDuplicates
from nemo_curator.datasets import DocumentDataset

input_dir, cache_dir, output_dir = sys.argv[1:4]
dataset = DocumentDataset.read_json(input_dir)
exact = ExactDuplicates(id_field="id", text_field="text", hash_method="md5", cache_dir=cache_dir)
duplicates = exact(dataset)
docs_to_remove = duplicates.df.map_partitions(lambda x: x[x._hashes.duplicated(keep="first")])
duplicate_ids = list(docs_to_remove.compute().id)
deduped = dataset.df[~dataset.df.id.isin(duplicate_ids)]
DocumentDataset(deduped).to_json(output_dir)
"""

FUZZY_SCRIPT = """
import sys

from nemo_curator import FuzzyDuplicates, FuzzyDuplicatesConfig
from nemo_curator.datasets import DocumentDataset

input_dir, cache_dir, output_dir = sys.argv[1:4]
dataset = DocumentDataset.read_json(input_dir)
config = FuzzyDuplicatesConfig(
    cache_dir=cache_dir,
    id_field="id",
    text_field="text",
    seed=42,
    char_ngrams=24,
    num_buckets=20,
    hashes_per_bucket=13,
    use_64_bit_hash=False,
    buckets_per_shuffle=2,
    false_positive_check=True,
    num_anchors=2,
    jaccard_threshold=0.8,
)
duplicates = FuzzyDuplicates(config=config)(dataset)
duplicates.to_parquet(output_dir)
"""


def _run(script: str, tmp_path: Path, *args: str) -> None:
    swapped = script.replace("nemo_curator", "curator_dask.nemo")
    assert "nemo_curator" not in swapped
    assert swapped.count("curator_dask.nemo") >= 2
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(swapped))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(path), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture
def input_dir(tmp_path: Path, sample_records: list[dict]) -> Path:
    """The sample split over three JSONL files."""
    d = tmp_path / "input"
    d.mkdir()
    for i in range(3):
        with open(d / f"shard_{i}.jsonl", "w") as f:
            for rec in sample_records[i::3]:
                f.write(json.dumps(rec) + "\n")
    return d


@pytest.mark.integration
def test_filter_script_gives_the_native_result(tmp_path, input_dir):
    out = tmp_path / "out"
    _run(FILTER_SCRIPT, tmp_path, str(input_dir), str(out))
    assert sorted(os.listdir(out)) == ["shard_0.jsonl", "shard_1.jsonl", "shard_2.jsonl"]
    got = pd.concat(
        pd.read_json(out / name, lines=True, dtype={"id": str}).assign(file=name)
        for name in sorted(os.listdir(out))
    )
    # The native API, step by step.
    df = read_jsonl(str(input_dir), add_filename=True).compute()
    words = WordCountFilter(min_words=80).score(df["text"])
    df = df[(words >= 80) & (words <= 100_000)].assign(word_count=words)
    df = df[df["text"].str.strip().str[-1:].isin([".", "!", "?", '"', "\u201d"])]
    df = RepeatedLinesFilter(min_unique_line_fraction=0.7).process(df)
    df = RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2).process(df)
    assert 0 < len(got) < 4000
    assert sorted(got["id"]) == sorted(df["id"])
    # The native rows in the script's output order, compared as values: on pandas 2 the two
    # id indexes have different dtypes (object from read_json, Arrow strings from read_jsonl).
    want = df.set_index("id").loc[got["id"]]
    assert got["word_count"].tolist() == want["word_count"].tolist()
    assert got["text"].tolist() == want["text"].tolist()
    # Every document went back to the file it came from.
    assert got["file"].tolist() == want["file_name"].map(os.path.basename).tolist()


@pytest.mark.integration
def test_exact_dedup_script_gives_the_native_result(tmp_path, input_dir):
    out = tmp_path / "out"
    _run(EXACT_SCRIPT, tmp_path, str(input_dir), str(tmp_path / "cache"), str(out))
    got = pd.concat(
        pd.read_json(p, lines=True, dtype={"id": str}) for p in glob.glob(f"{out}/*.jsonl")
    )
    result = ExactDeduplicationWorkflow(
        input_path=str(input_dir), output_path=str(tmp_path / "native"), perform_removal=True
    ).run()
    assert result.removed > 0
    assert len(got) == result.kept == got["text"].nunique()
    native = pd.read_parquet(result.paths["deduplicated"])
    assert set(got["text"]) == set(native["text"])


@pytest.mark.integration
def test_fuzzy_dedup_script_gives_the_native_groups(tmp_path, input_dir):
    out = tmp_path / "out"
    _run(FUZZY_SCRIPT, tmp_path, str(input_dir), str(tmp_path / "cache"), str(out))
    got = pd.read_parquet(out)
    result = FuzzyDeduplicationWorkflow(
        input_path=str(input_dir),
        cache_path=str(tmp_path / "native_cache"),
        output_path=str(tmp_path / "native"),
        char_ngrams=24,
        num_bands=20,
        minhashes_per_band=13,
        bands_per_iteration=2,
        seed=42,
        jaccard_threshold=0.8,
        false_positive_check=True,
        duplicate_groups=True,
    ).run()
    want = pd.read_parquet(result.paths["duplicate_groups"])

    def groups(frame: pd.DataFrame) -> set[frozenset[str]]:
        return {frozenset(g["id"]) for _, g in frame.groupby("group")}

    assert result.duplicate_groups > 0
    assert groups(got) == groups(want)


HISTOGRAM_SCRIPT = """
import sys

import nemo_curator as nc
from nemo_curator.datasets import DocumentDataset
from nemo_curator.filters import HistogramFilter

input_dir, cache_dir, output_dir = sys.argv[1:4]
dataset = DocumentDataset.read_json(input_dir)
filters = nc.Sequential(
    [
        nc.ScoreFilter(HistogramFilter(lang="en"), text_field="text", score_field="hist_en"),
        nc.ScoreFilter(
            HistogramFilter(lang="xx", threshold=0.6, cache_dir=cache_dir),
            text_field="text",
            score_field="hist_xx",
        ),
    ]
)
filters(dataset).to_json(output_dir)
"""


@pytest.mark.integration
def test_histogram_filter_script_scores_as_nemo_documents(tmp_path, input_dir, sample_records):
    from curator_dask.filters import HistogramFilter as NativeHistogram

    # Documents in other scripts and empty ones, beside the English sample.
    others = ["日本語の文章です。" * 20, "Русский текст здесь. " * 30, "   ", "", "\u3000x "]
    with open(input_dir / "shard_3.jsonl", "w") as f:
        for i, text in enumerate(others):
            f.write(json.dumps({"id": f"other-{i}", "text": text}) + "\n")
    # A histogram in the layout of M2M-100's histograms.tar.gz: one character per line,
    # most frequent first, cut at the line that starts with "]".
    hist = tmp_path / "cache" / "histograms" / "checkpoint" / "edunov" / "cc60_multilingual"
    (hist / "clean_hists").mkdir(parents=True)
    lines = [" 1000", "e 900", "t 800", "a 700", "o 600", "n 500", "i 400", "s 300", "] 0", "h 1"]
    (hist / "clean_hists" / "xx").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    _run(HISTOGRAM_SCRIPT, tmp_path, str(input_dir), str(tmp_path / "cache"), str(out))
    got = pd.concat(
        pd.read_json(p, lines=True, dtype={"id": str}) for p in glob.glob(f"{out}/*.jsonl")
    )

    # NeMo's rule, one document at a time: characters of the stripped text in the
    # histogram over its length (0 when empty), kept above the threshold.
    def score(text: str, chars: set[str]) -> float:
        s = text.strip()
        return sum(c in chars for c in s) / len(s) if s else 0.0

    en = set(NativeHistogram(lang="en").histogram) | {
        c for c in map(chr, range(0x3001)) if c.isspace()
    }
    xx = set(" etaonis")
    records = [*sample_records, *({"id": f"other-{i}", "text": t} for i, t in enumerate(others))]
    kept = {
        r["id"]: (score(r["text"], en), score(r["text"], xx))
        for r in records
        if score(r["text"], en) > 0.8 and score(r["text"], xx) > 0.6
    }
    assert 0 < len(kept) < len(sample_records)
    assert not any(k.startswith("other-") for k in kept)
    assert sorted(got["id"]) == sorted(kept)
    for row in got.itertuples():
        assert row.hist_en == pytest.approx(kept[row.id][0])
        assert row.hist_xx == pytest.approx(kept[row.id][1])
