"""NeMo Curator tutorial-style scripts, run with only the import prefix changed.

Each script is written the way NeMo's Dask-era tutorials are (TinyStories: clean, filter,
exact then fuzzy dedup; PEFT curation: unicode repair, filters, PII redaction, dedup; a
dedup pipeline: exact and fuzzy ``identify_duplicates`` -> ``remove``, written back by
file name). The test swaps ``nemo_curator`` for ``curator_dask.nemo``, runs the script in a
fresh process on a 2-worker cluster (``get_client`` through ``ArgumentHelper``) over the
shipped sample, and checks what it wrote against the same work done independently.
"""

from __future__ import annotations

import glob
import json
import os
import re
from pathlib import Path

import ftfy
import pandas as pd
import pytest

from curator_dask.dedup import FuzzyDeduplicationWorkflow
from curator_dask.filters import RepeatingTopNGramsFilter, WordCountFilter
from tests.nemo.test_scripts import _run

# NeMo's UnicodeReformatter defaults: ftfy's, less ligatures, widths, quotes, line breaks
# and Unicode normalisation.
NEMO_FTFY = ftfy.TextFixerConfig(
    fix_latin_ligatures=False,
    fix_character_width=False,
    uncurl_quotes=False,
    fix_line_breaks=False,
    normalization=None,
)
CLIENT_ARGS = ["--device", "cpu", "--n-workers", "2", "--threads-per-worker", "1"]

TINYSTORIES = """
import argparse

from nemo_curator import ExactDuplicates, FuzzyDuplicates, FuzzyDuplicatesConfig, Sequential
from nemo_curator.datasets import DocumentDataset
from nemo_curator.filters import DocumentFilter, RepeatingTopNGramsFilter, WordCountFilter
from nemo_curator.modifiers import DocumentModifier
from nemo_curator.modifiers.unicode_reformatter import UnicodeReformatter
from nemo_curator.modules import ScoreFilter
from nemo_curator.modules.modify import Modify
from nemo_curator.utils.distributed_utils import get_client
from nemo_curator.utils.file_utils import get_all_files_paths_under
from nemo_curator.utils.script_utils import ArgumentHelper


class QuotationUnifier(DocumentModifier):
    def modify_document(self, text: str) -> str:
        text = text.replace("\\u2018", "'").replace("\\u2019", "'")
        return text.replace("\\u201c", '"').replace("\\u201d", '"')


class IncompleteStoryFilter(DocumentFilter):
    def __init__(self):
        super().__init__()
        self._story_terminators = {".", "!", "?", '"'}

    def score_document(self, text: str) -> bool:
        return text.strip()[-1:] in self._story_terminators

    def keep_document(self, score) -> bool:
        return score


def main(args):
    client = get_client(**ArgumentHelper.parse_client_args(args))
    files = get_all_files_paths_under(args.input_data_dir, keep_extensions="jsonl")
    dataset = DocumentDataset.read_json(files, add_filename=True)
    curation = Sequential(
        [
            Modify(UnicodeReformatter()),
            Modify(QuotationUnifier()),
            ScoreFilter(WordCountFilter(min_words=80), score_field="word_count", score_type=int),
            ScoreFilter(IncompleteStoryFilter()),
            ScoreFilter(RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2)),
        ]
    )
    dataset = curation(dataset)
    exact = ExactDuplicates(id_field="id", text_field="text", cache_dir=args.cache_dir + "/exact")
    dataset = exact.remove(dataset, exact.identify_duplicates(dataset))
    config = FuzzyDuplicatesConfig(
        cache_dir=args.cache_dir + "/fuzzy",
        id_field="id",
        text_field="text",
        seed=42,
        char_ngrams=24,
        num_buckets=20,
        hashes_per_bucket=13,
        false_positive_check=True,
        jaccard_threshold=0.8,
    )
    fuzzy = FuzzyDuplicates(config=config)
    duplicates = fuzzy.identify_duplicates(dataset)
    if duplicates is not None:
        dataset = fuzzy.remove(dataset, duplicates)
    dataset.to_json(args.output_data_dir, write_to_filename=True)
    client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    helper = ArgumentHelper(parser)
    helper.add_distributed_args()
    helper.add_arg_input_data_dir(required=True)
    helper.add_arg_output_data_dir(help="Where the curated files go.")
    parser.add_argument("--cache-dir", required=True)
    main(parser.parse_args())
"""

PEFT = """
import argparse
import os

from nemo_curator import ExactDuplicates, ScoreFilter, Sequential
from nemo_curator.datasets import DocumentDataset
from nemo_curator.filters import WordCountFilter
from nemo_curator.modifiers.pii_modifier import PiiModifier
from nemo_curator.modifiers.unicode_reformatter import UnicodeReformatter
from nemo_curator.modules.modify import Modify
from nemo_curator.utils.distributed_utils import get_client
from nemo_curator.utils.file_utils import get_all_files_paths_under
from nemo_curator.utils.script_utils import ArgumentHelper


def run_curation_pipeline(args, input_dir, output_dir):
    client = get_client(**ArgumentHelper.parse_client_args(args))
    files = get_all_files_paths_under(input_dir, keep_extensions="jsonl")
    dataset = DocumentDataset.read_json(files, add_filename=True)
    curation_steps = Sequential(
        [
            Modify(UnicodeReformatter()),
            ScoreFilter(WordCountFilter(min_words=10, max_words=2000), text_field="text"),
            Modify(
                PiiModifier(
                    language="en",
                    supported_entities=["EMAIL_ADDRESS", "IP_ADDRESS"],
                    anonymize_action="replace",
                    device="cpu",
                    batch_size=200,
                ),
                text_field="text",
            ),
        ]
    )
    dataset = curation_steps(dataset)
    dataset = dataset.persist()
    exact = ExactDuplicates(id_field="id", text_field="text", hash_method="md5")
    duplicates = exact.identify_duplicates(dataset)
    dataset = exact.remove(dataset, duplicates)
    dataset.to_json(output_dir, write_to_filename=True)
    client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    helper = ArgumentHelper(parser)
    helper.add_distributed_args()
    helper.add_arg_input_data_dir(required=True)
    helper.add_arg_output_data_dir(help="Where the curated files go.")
    args = parser.parse_args()
    run_curation_pipeline(args, args.input_data_dir, args.output_data_dir)
"""

DEDUP = """
import argparse

from nemo_curator import ExactDuplicates, FuzzyDuplicates, FuzzyDuplicatesConfig
from nemo_curator.datasets import DocumentDataset
from nemo_curator.utils.distributed_utils import get_client, write_to_disk
from nemo_curator.utils.script_utils import ArgumentHelper


def main(args):
    client = get_client(**ArgumentHelper.parse_client_args(args))
    dataset = DocumentDataset.read_json(args.input_data_dir, add_filename="filename")

    exact = ExactDuplicates(id_field="id", text_field="text", cache_dir=args.cache_dir + "/exact")
    exact_duplicates = exact.identify_duplicates(dataset)
    print("exact duplicates:", len(exact_duplicates))
    dataset = exact.remove(dataset, exact_duplicates)

    config = FuzzyDuplicatesConfig(
        cache_dir=args.cache_dir + "/fuzzy",
        id_field="id",
        text_field="text",
        num_buckets=20,
        hashes_per_bucket=13,
        char_ngrams=24,
        buckets_per_shuffle=5,
        false_positive_check=True,
        num_anchors=2,
        jaccard_threshold=0.8,
    )
    fuzzy = FuzzyDuplicates(config=config)
    fuzzy_duplicates = fuzzy.identify_duplicates(dataset)
    dataset = fuzzy.remove(dataset, fuzzy_duplicates)
    write_to_disk(
        dataset.df, args.output_data_dir, write_to_filename="filename", output_type="parquet"
    )
    client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    helper = ArgumentHelper(parser)
    helper.add_distributed_args()
    helper.add_arg_input_data_dir(required=True)
    helper.add_arg_output_data_dir(help="Where the deduplicated files go.")
    parser.add_argument("--cache-dir", required=True)
    main(parser.parse_args())
"""


def _shards(d: Path, records: list[dict]) -> Path:
    d.mkdir()
    for i in range(3):
        with open(d / f"shard_{i}.jsonl", "w") as f:
            for rec in records[i::3]:
                f.write(json.dumps(rec) + "\n")
    return d


def _written(out: Path, pattern: str, read) -> pd.DataFrame:
    frames = [
        read(p).assign(file=os.path.basename(p)) for p in sorted(glob.glob(str(out / pattern)))
    ]
    return pd.concat(frames, ignore_index=True)


def _shard_of(records: list[dict]) -> dict[str, str]:
    return {rec["id"]: f"shard_{i % 3}" for i, rec in enumerate(records)}


def _fuzzy_kept(frame: pd.DataFrame, tmp: Path, **params) -> int:
    """Documents left by curator_dask's own fuzzy workflow on ``frame``."""
    import dask.dataframe as dd

    result = FuzzyDeduplicationWorkflow(
        df=dd.from_pandas(frame[["id", "text"]], npartitions=3),
        cache_path=str(tmp / "native_cache"),
        output_path=str(tmp / "native_out"),
        **params,
    ).run()
    return result.kept


@pytest.mark.integration
def test_tinystories_style_clean_filter_dedup(tmp_path, sample_records):
    src = _shards(tmp_path / "in", sample_records)
    out = tmp_path / "out"
    _run(TINYSTORIES, tmp_path, "--input-data-dir", str(src), "--output-data-dir", str(out),
         "--cache-dir", str(tmp_path / "cache"), *CLIENT_ARGS)  # fmt: skip
    assert sorted(os.listdir(out)) == ["shard_0.jsonl", "shard_1.jsonl", "shard_2.jsonl"]
    got = _written(out, "*.jsonl", lambda p: pd.read_json(p, lines=True, dtype={"id": str}))
    # The same curation, step by step, with pandas and curator_dask's filters.
    ref = pd.DataFrame(sample_records)
    quotes = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
    ref["text"] = [ftfy.fix_text(t, config=NEMO_FTFY).translate(quotes) for t in ref["text"]]
    words = WordCountFilter(min_words=80).score(ref["text"])
    ref = ref.assign(wc=words)[(words >= 80) & (words <= 100_000)]
    ref = ref[ref["text"].str.strip().str[-1:].isin([".", "!", "?", '"'])]
    ref = RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2).process(ref)
    exact = ref.drop_duplicates("text")
    fuzzy_kept = _fuzzy_kept(exact, tmp_path, char_ngrams=24, num_bands=20,
                             minhashes_per_band=13, jaccard_threshold=0.8)  # fmt: skip
    assert 0 < fuzzy_kept < len(exact) < len(ref) < len(sample_records)
    assert len(got) == fuzzy_kept
    assert got["text"].is_unique
    by_id = ref.set_index("id")
    assert set(got["id"]) <= set(by_id.index)
    assert got["text"].tolist() == by_id.loc[got["id"], "text"].tolist()
    assert got["word_count"].tolist() == by_id.loc[got["id"], "wc"].tolist()
    shard = _shard_of(sample_records)
    assert [f"{shard[i]}.jsonl" for i in got["id"]] == got["file"].tolist()


EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
# Presidio keeps an address only when its domain ends in a public suffix ("x@email.xx"
# and "group@domain.tld", in the sample's manuals, are not addresses to it).
REAL_EMAIL = re.compile(r"[\w.+-]+@(?:[\w-]+\.)+(?:com|org|net|edu|gov|io|de|uk|fr)\b")
IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")


@pytest.mark.integration
def test_peft_style_pii_redaction_and_dedup(tmp_path, sample_records):
    pytest.importorskip("presidio_analyzer")  # the pii extra
    # Messages written for this test, with personal details, next to the shipped sample;
    # two differ only in the address, so they are duplicates once it is replaced.
    written = [
        {"id": "mail-0", "text": "Hello team, please send the quarterly report to "
         "alice.smith@example.com by Monday so that we can review it together."},
        {"id": "mail-1", "text": "Hello team, please send the quarterly report to "
         "bob.jones@example.org by Monday so that we can review it together."},
        {"id": "mail-2", "text": "The staging server at 10.20.30.40 went down twice this "
         "week; ask carol@example.net before restarting it again tonight."},
    ]  # fmt: skip
    src = _shards(tmp_path / "in", sample_records)
    with open(src / "mail.jsonl", "w") as f:
        for rec in written:
            f.write(json.dumps(rec) + "\n")
    out = tmp_path / "out"
    _run(PEFT, tmp_path, "--input-data-dir", str(src), "--output-data-dir", str(out),
         *CLIENT_ARGS)  # fmt: skip
    got = _written(out, "*.jsonl", lambda p: pd.read_json(p, lines=True, dtype={"id": str}))
    assert "mail.jsonl" in set(got["file"])
    assert got["text"].is_unique
    # no address is left anywhere
    assert not got["text"].str.contains(REAL_EMAIL).any()
    assert pd.DataFrame(sample_records)["text"].str.contains(REAL_EMAIL).sum() > 0
    mail = got[got["file"] == "mail.jsonl"].set_index("id")["text"]
    assert len(mail) == 2  # mail-0 and mail-1 became one text
    assert "Hello team, please send the quarterly report to <EMAIL_ADDRESS> by Monday" in (
        mail.iloc[0] if mail.index[0] != "mail-2" else mail.iloc[1]
    )
    assert mail["mail-2"] == (
        "The staging server at <IP_ADDRESS> went down twice this week; ask <EMAIL_ADDRESS> "
        "before restarting it again tonight."
    )
    # The sample's documents without an address or IP pass unchanged (after ftfy and the
    # word-count filter), one per distinct text.
    ref = pd.DataFrame(sample_records)
    ref["text"] = [ftfy.fix_text(t, config=NEMO_FTFY) for t in ref["text"]]
    words = WordCountFilter(min_words=10, max_words=2000).score(ref["text"])
    ref = ref[(words >= 10) & (words <= 2000)]
    # (no "@", no IPv4, and no ":" either: Presidio's IPv6 pattern takes "::", the
    # reStructuredText literal-block marker in the sample's manuals, for an address)
    clean = ref[
        ~ref["text"].str.contains(EMAIL)
        & ~ref["text"].str.contains(IPV4)
        & ~ref["text"].str.contains(":", regex=False)
    ]
    assert 0 < len(clean) < len(ref)
    assert set(clean["text"]) <= set(got["text"])
    sample_out = got[got["file"] != "mail.jsonl"]
    assert set(sample_out["id"]) <= set(ref["id"])
    assert len(sample_out) <= ref["text"].nunique()


@pytest.mark.integration
def test_exact_and_fuzzy_identify_then_remove_by_file_name(tmp_path, sample_records):
    src = _shards(tmp_path / "in", sample_records)
    out = tmp_path / "out"
    _run(DEDUP, tmp_path, "--input-data-dir", str(src), "--output-data-dir", str(out),
         "--cache-dir", str(tmp_path / "cache"), *CLIENT_ARGS)  # fmt: skip
    assert sorted(os.listdir(out)) == ["shard_0.parquet", "shard_1.parquet", "shard_2.parquet"]
    got = _written(out, "*.parquet", pd.read_parquet)
    assert "filename" not in got.columns
    ref = pd.DataFrame(sample_records)
    exact = ref.drop_duplicates("text")
    fuzzy_kept = _fuzzy_kept(exact, tmp_path, char_ngrams=24, num_bands=20,
                             minhashes_per_band=13, jaccard_threshold=0.8,
                             num_anchors=2)  # fmt: skip
    assert fuzzy_kept < len(exact) < len(ref)
    assert len(got) == fuzzy_kept
    assert got["text"].is_unique
    assert set(got["id"]) <= set(exact["id"]) | set(ref["id"])
    shard = _shard_of(sample_records)
    assert [f"{shard[i]}.parquet" for i in got["id"]] == got["file"].tolist()
    assert os.path.isdir(tmp_path / "cache" / "exact" / "_exact_duplicates.parquet")
