from __future__ import annotations

import json
import os
import re

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.dedup.semantic import (
    SemanticDeduplicationWorkflow,
    greedy_duplicates,
    keep_order,
)
from curator_dask.embeddings import EmbeddingCreator, column_to_embeddings, read_embeddings
from curator_dask.stage import ready_stage

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sklearn")

TOPICS = [
    [
        "The cat sat on the mat in the kitchen.",
        "The cat sat on the mat in the kitchen!",
        "A cat was sitting on the kitchen mat.",
    ],
    [
        "Interest rates were raised by the central bank today.",
        "Today the central bank raised interest rates.",
    ],
    [
        "Use the ListBuckets operation to list all buckets owned by the sender.",
        "Use the ListBuckets operation to list all the buckets owned by the sender.",
        "ListBuckets returns a list of all buckets owned by the authenticated sender.",
    ],
    ["Photosynthesis converts light energy into chemical energy."],
    [
        "Mr. Darcy walked into the drawing room without a word.",
        "Mr. Darcy walked into the drawing-room without a word.",
    ],
    ["The compiler reports an error when a variable is used before assignment."],
    ["Stir the flour into the melted butter and cook for two minutes."],
    [
        "The train to Edinburgh departs from platform four at noon.",
        "The train to Edinburgh departs from platform four at noon.",
    ],
]


def corpus() -> pd.DataFrame:
    texts = [t for topic in TOPICS for t in topic]
    return pd.DataFrame({"id": [f"doc-{i:02d}" for i in range(len(texts))], "text": texts})


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return corpus()


@pytest.fixture(scope="module")
def vectors(frame) -> np.ndarray:
    stage = ready_stage(EmbeddingCreator(max_chars=2000, model_inference_batch_size=128))
    return column_to_embeddings(stage.process(frame)["embedding"])


def oracle(ids, vectors, order, eps) -> dict[str, str]:
    """Plain-Python greedy: visit in order, remove a doc within eps of an already kept one."""
    kept: list[int] = []
    removed: dict[str, str] = {}
    for j in order:
        sims = [(float(vectors[j] @ vectors[i]), i) for i in kept]
        close = [(s, i) for s, i in sims if s >= 1 - eps]
        if close:
            removed[ids[j]] = ids[max(close)[1]]
        else:
            kept.append(j)
    return removed


def run(tmp_path, df, **params) -> tuple[SemanticDeduplicationWorkflow, dict]:
    wf = SemanticDeduplicationWorkflow(
        df=df, cache_path=str(tmp_path / "cache"), output_path=str(tmp_path / "out"), **params
    )
    with dask.config.set(scheduler="sync"):
        return wf, wf.run()


def removed_map(result: dict) -> dict[str, str]:
    got = pd.read_parquet(result["removed_ids"])
    assert list(got.columns) == ["id", "group"]
    return dict(zip(got["id"], got["group"], strict=True))


@pytest.mark.parametrize("eps", [0.02, 0.1])
def test_one_cluster_matches_brute_force(tmp_path, frame, vectors, eps):
    df = dd.from_pandas(frame, npartitions=3)
    _, result = run(tmp_path, df, n_clusters=1, eps=eps, keep="first")
    expected = oracle(frame["id"].tolist(), vectors, range(len(frame)), eps)
    assert removed_map(result) == expected
    assert result["removed"] == len(expected) > 0
    assert result["documents"] == len(frame)
    # the exact copy is always removed in favour of the earlier one
    assert expected["doc-14"] == "doc-13"


@pytest.mark.parametrize("keep", ["hard", "easy"])
def test_clusters_and_keep_rule_match_brute_force(tmp_path, frame, vectors, keep):
    df = dd.from_pandas(frame, npartitions=3)
    _, result = run(tmp_path, df, n_clusters=4, eps=0.1, keep=keep, seed=7)
    assert result["n_clusters"] == 4
    assigned = read_embeddings(os.path.join(result["cache_dirs"]["kmeans"], "data")).compute()
    assert sorted(assigned["id"]) == sorted(frame["id"])
    assert assigned["cluster"].nunique() > 1
    ids = frame["id"].tolist()
    pos = {d: i for i, d in enumerate(ids)}
    expected: dict[str, str] = {}
    for _, rows in assigned.groupby("cluster"):
        members = [pos[d] for d in rows["id"]]
        sim = dict(zip(members, rows["centroid_sim"].astype(float), strict=True))
        sign = 1 if keep == "hard" else -1  # hard: farthest from the centroid first
        order = sorted(members, key=lambda i: (sign * sim[i], i))
        expected.update(oracle(ids, vectors, order, 0.1))
    assert removed_map(result) == expected
    assert expected


def test_result_does_not_depend_on_partitions(tmp_path, frame):
    one = run(tmp_path / "a", dd.from_pandas(frame, npartitions=1), n_clusters=2, keep="first")
    four = run(tmp_path / "b", dd.from_pandas(frame, npartitions=4), n_clusters=2, keep="first")
    assert removed_map(one[1]) == removed_map(four[1])


def test_resume_and_parameter_changes(tmp_path, frame):
    df = dd.from_pandas(frame, npartitions=3)
    _, first = run(tmp_path, df, n_clusters=2, eps=0.05)
    assert first["stats"] == {
        "embeddings_computed": 1,
        "kmeans_computed": 1,
        "duplicates_computed": 1,
    }
    _, again = run(tmp_path, df, n_clusters=2, eps=0.05)
    assert again["stats"] == {
        "embeddings_computed": 0,
        "kmeans_computed": 0,
        "duplicates_computed": 0,
    }
    assert removed_map(again) == removed_map(first)
    # a new eps reuses the embeddings and clusters, never the old duplicates
    _, wider = run(tmp_path, df, n_clusters=2, eps=0.2)
    assert wider["stats"] == {
        "embeddings_computed": 0,
        "kmeans_computed": 0,
        "duplicates_computed": 1,
    }
    assert wider["removed"] > first["removed"]
    _, more = run(tmp_path, df, n_clusters=3, eps=0.05)
    assert more["stats"]["embeddings_computed"] == 0
    assert more["stats"]["kmeans_computed"] == 1
    _, cut = run(tmp_path, df, n_clusters=3, eps=0.05, max_chars=12)
    assert cut["stats"]["embeddings_computed"] == 1
    # a step whose completion marker is missing is computed again
    dup_dir = first["cache_dirs"]["duplicates"]
    os.remove(os.path.join(dup_dir, "_DONE"))
    _, redo = run(tmp_path, df, n_clusters=2, eps=0.05)
    assert redo["stats"]["duplicates_computed"] == 1
    assert removed_map(redo) == removed_map(first)


def test_reads_jsonl_input_and_reports_pairs(tmp_path, frame):
    path = tmp_path / "docs.jsonl"
    with open(path, "w") as f:
        for rec in frame.to_dict("records"):
            f.write(json.dumps(rec) + "\n")
    wf = SemanticDeduplicationWorkflow(
        input_path=str(path),
        cache_path=str(tmp_path / "cache"),
        output_path=str(tmp_path / "out"),
        n_clusters=2,
        eps=0.05,
        keep="first",
    )
    with dask.config.set(scheduler="sync"):
        result = wf.run()
    pairs = wf.duplicate_pairs()
    assert len(pairs) == result["removed"] > 0
    assert (pairs["cosine_similarity"] >= 0.95 - 1e-6).all()
    assert not set(pairs["group"]) & set(pairs["id"])  # every group id is a kept document


def test_greedy_compares_with_kept_documents_only():
    # a ~ b and b ~ c, but a !~ c: b goes (it is close to a), c stays (b was removed)
    angle = np.deg2rad([0.0, 20.0, 40.0])
    v = np.stack([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)
    eps = 1 - np.cos(np.deg2rad(25))
    removed, kept_by, sim = greedy_duplicates(v, eps, block=2)
    assert removed.tolist() == [False, True, False]
    assert kept_by.tolist() == [-1, 0, -1]
    assert sim[1] == pytest.approx(np.cos(np.deg2rad(20)), abs=1e-6)
    # the same in another visiting order: b first removes both neighbours
    removed, kept_by, _ = greedy_duplicates(v[[1, 0, 2]], eps)
    assert removed.tolist() == [False, True, True]
    assert kept_by.tolist() == [-1, 0, 0]


def test_keep_order_is_deterministic():
    sim = np.array([0.9, 0.5, 0.9, 0.7], dtype=np.float32)
    uid = np.array([3, 1, 0, 2])
    assert keep_order(sim, uid, "hard").tolist() == [1, 3, 2, 0]
    assert keep_order(sim, uid, "easy").tolist() == [2, 0, 3, 1]
    assert keep_order(sim, uid, "first").tolist() == [2, 1, 3, 0]


def test_validation(frame):
    df = dd.from_pandas(frame, npartitions=1)
    with pytest.raises(ValueError, match="keep must be one of"):
        SemanticDeduplicationWorkflow(df=df, cache_path="c", output_path="o", keep="random")
    with pytest.raises(ValueError, match="eps"):
        SemanticDeduplicationWorkflow(df=df, cache_path="c", output_path="o", eps=-0.1)
    with pytest.raises(ValueError, match="input_path or df"):
        SemanticDeduplicationWorkflow(cache_path="c", output_path="o")


def test_embedding_keeps_every_worker_busy_and_counts_its_partitions(tmp_path, frame, capsys):
    """One input partition on a cluster of 2 worker threads: the embedding step runs 4
    partitions per thread (the progress line counts them) and removes what a run of 4
    input partitions removes."""
    from distributed import Client, LocalCluster

    one = dd.from_pandas(frame, npartitions=1)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster,
        Client(cluster) as client,
    ):
        wf = SemanticDeduplicationWorkflow(
            df=one,
            cache_path=str(tmp_path / "cache"),
            output_path=str(tmp_path / "out"),
            n_clusters=2,
            keep="first",
            client=client,
        )
        result = wf.run()
    data = os.path.join(wf.step_dirs()["embeddings"], "data")
    assert len([f for f in os.listdir(data) if f.endswith(".parquet")]) == 8
    # the step's line counts partitions and documents as they finish
    err = capsys.readouterr().err
    # (and, from the workers' events, the model's batches inside them)
    pattern = (
        rf"embeddings: 8/8 partitions \(100%\), {len(frame)} docs in \d+ batches \([\d.,]+/s\)"
    )
    assert re.search(pattern, err), err
    four = run(tmp_path / "b", dd.from_pandas(frame, npartitions=4), n_clusters=2, keep="first")
    assert removed_map(result) == removed_map(four[1])


def test_full_precision_switch_reaches_the_model_and_the_cache_key(tmp_path, frame):
    """``--no-autocast`` (``autocast=False``): the embedding stage runs in single precision on
    a GPU, and its embeddings get their own cache entry; the default keeps its old key."""
    from curator_dask.cli import build_parser

    common = {
        "df": dd.from_pandas(frame, npartitions=1),
        "cache_path": str(tmp_path / "cache"),
        "output_path": str(tmp_path / "out"),
    }
    on = SemanticDeduplicationWorkflow(**common)
    off = SemanticDeduplicationWorkflow(**common, autocast=False)
    assert on._embedding_stage().autocast is True
    assert off._embedding_stage().autocast is False
    assert on.step_dirs()["embeddings"] != off.step_dirs()["embeddings"]
    assert (
        on.step_dirs()["embeddings"]
        == SemanticDeduplicationWorkflow(**common).step_dirs()["embeddings"]
    )
    args = build_parser().parse_args(
        ["semantic-dedup", "in.jsonl", "--cache-dir", "c", "--output", "o", "--no-autocast"]
    )
    assert args.autocast is False


def test_embedding_progress_moves_with_every_batch(tmp_path, frame, capsys):
    """Inside the embedding step every batch of the model is counted as it finishes (the run
    hooks hear it, the line shows the documents and batches), not only each partition."""
    from curator_dask.hooks import RunCallback

    class Batches(RunCallback):
        def __init__(self):
            self.docs: list[int] = []
            self.partitions = 0

        def on_progress(self, run, step, unit, n, record):
            if run.kind == "dedup" and step == "embeddings":
                if unit == "documents":
                    self.docs.append(n)
                else:
                    self.partitions += n

    with Batches() as seen, dask.config.set({"curator.execution.progress": True}):
        run(
            tmp_path,
            dd.from_pandas(frame, npartitions=2),
            n_clusters=2,
            keep="first",
            model_inference_batch_size=1,
        )
    assert seen.docs == [1] * len(frame)  # one event per batch of one document
    assert 0 < seen.partitions < len(frame)  # more often than partitions finish
    err = capsys.readouterr().err
    assert re.search(
        rf"embeddings: \d+/\d+ partitions \(100%\), {len(frame)} docs in {len(frame)} batches", err
    ), err
