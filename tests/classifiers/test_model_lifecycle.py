"""Batch sizes by device, out-of-memory halving, and when loaded models are released."""

from __future__ import annotations

import copy
import gc

import pandas as pd
import pytest

from curator_dask import models
from curator_dask.classifiers import HFSequenceClassifier, QualityClassifier
from curator_dask.embeddings import EmbeddingCreator
from curator_dask.stage import ready_stage, teardown_all

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

LABELS = ("low", "medium", "high")


def texts(n: int, seed: int = 0) -> pd.DataFrame:
    words = ["the", "cat", "sat", "on", "a", "mat", "big", "dog", "ran"]
    rows = [
        " ".join(words[(i + j + seed) % len(words)] for j in range(3 + i % 7)) for i in range(n)
    ]
    return pd.DataFrame({"id": range(n), "text": rows})


def record_batches(monkeypatch, model, fail_above: int | None = None, error=None) -> list[int]:
    """Record each forward pass' batch rows; raise ``error`` for batches above ``fail_above``."""
    real = model.forward
    seen: list[int] = []

    def forward(*args, **kwargs):
        rows = kwargs["input_ids"].shape[0]
        seen.append(rows)
        if fail_above is not None and rows > fail_above:
            raise error("out of memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "forward", forward)
    return seen


def set_up(stage):
    ready = copy.copy(stage)
    ready.setup()
    return ready


def test_default_batch_sizes_follow_the_device(monkeypatch, tiny_classifier_dir):
    clf = HFSequenceClassifier(model_dir=tiny_classifier_dir)
    assert clf.model_inference_batch_size is None
    assert (clf.batch_size_for("cpu"), clf.batch_size_for("cuda:1")) == (32, 256)
    emb = EmbeddingCreator()
    assert (emb.batch_size_for("cpu"), emb.batch_size_for("cuda")) == (32, 128)
    assert HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=7)\
        .batch_size_for("cuda") == 7  # fmt: skip
    ready = set_up(clf)
    seen = record_batches(monkeypatch, ready._model)
    ready.process(texts(70))
    assert seen == [32, 32, 6]  # the CPU default


@pytest.mark.parametrize("error", [torch.OutOfMemoryError, MemoryError])
def test_oom_halves_the_failed_batch_and_remembers(monkeypatch, tiny_classifier_dir, error):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=16))
    expected = clf.process(texts(6))
    seen = record_batches(monkeypatch, clf._model, fail_above=2, error=error)
    # a 6-document partition: the batch that failed had 6 rows, so the retry has 3, then 1
    out, stats = clf.process_with_stats(texts(6))
    assert seen == [6, 3, 1, 1, 1, 1, 1, 1]
    assert stats["oom_retries"] == 2
    pd.testing.assert_frame_equal(out, expected)
    # the next partition on this worker starts at the size that worked, not at 16
    seen.clear()
    _, stats = clf.process_with_stats(texts(4, seed=1))
    assert seen == [1, 1, 1, 1]
    assert stats["oom_retries"] == 0


def test_one_loaded_model_per_model_and_release_on_gc(tiny_classifier_dir):
    teardown_all()
    models.release_models()
    first = QualityClassifier(model_dir=tiny_classifier_dir, labels=LABELS)
    ready_stage(first).process(texts(3))
    # variants of the same model (a notebook re-creating the stage) share one loaded copy
    for keep in ("low", "high", ["low", "medium"]):
        variant = QualityClassifier(model_dir=tiny_classifier_dir, labels=LABELS, filter_by=keep)
        ready_stage(variant).process(texts(3))
    assert len(models.loaded_model_keys()) == 1
    # dropping every stage built with the model releases it
    del first, variant
    gc.collect()
    assert models.loaded_model_keys() == []
    # a set-up stage still works: the model is loaded again on demand
    again = QualityClassifier(model_dir=tiny_classifier_dir, labels=LABELS)
    assert len(ready_stage(again).process(texts(3))) == 3
    assert len(models.loaded_model_keys()) == 1
    # the end of a run (teardown on every worker) releases it too
    teardown_all()
    assert models.loaded_model_keys() == []


def test_at_most_max_loaded_models(tiny_classifier_dir, tmp_path):
    teardown_all()
    models.release_models()
    stages = []
    for i in range(models.MAX_LOADED_MODELS + 2):
        link = tmp_path / f"copy{i}"
        link.symlink_to(tiny_classifier_dir, target_is_directory=True)
        stage = HFSequenceClassifier(model_dir=link)
        stages.append(stage)
        ready_stage(stage).process(texts(2))
        assert len(models.loaded_model_keys()) <= models.MAX_LOADED_MODELS
    assert models.loaded_model_keys()[-1][0][1] == str(link)
    teardown_all()
