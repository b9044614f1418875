from __future__ import annotations

import copy
import pickle

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask.embeddings import (
    EmbeddingCreator,
    column_to_embeddings,
    default_embedding_model_dir,
    embeddings_to_column,
    read_embeddings,
)
from curator_dask.stage import run_stage

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXTS = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The central bank raised interest rates by a quarter point.",
    "Interest rates were increased by 0.25 percent by the central bank.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "",
    "Call ListObjectsV2 to return up to 1,000 objects in an Amazon S3 bucket. " * 15,
    "short",
    None,
    "The quick brown fox jumps over the lazy dog.",
]


@pytest.fixture(scope="module")
def minilm():
    """The bundled all-MiniLM-L6-v2, loaded directly with transformers (the reference)."""
    path = default_embedding_model_dir()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    return tok, model


def reference(minilm, texts, max_chars=None, max_length=256) -> np.ndarray:
    tok, model = minilm
    clean = [t if isinstance(t, str) else "" for t in texts]
    if max_chars is not None:
        clean = [t[:max_chars] for t in clean]
    enc = tok(clean, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state.numpy()
    mask = enc["attention_mask"].numpy()[:, :, None].astype(np.float32)
    mean = (hidden * mask).sum(1) / mask.sum(1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def expected(minilm) -> np.ndarray:
    """Reference vectors of TEXTS; the long text is cut at 256 tokens (sentence_bert_config)."""
    return reference(minilm, TEXTS)


@pytest.fixture(scope="module")
def expected_500(minilm) -> np.ndarray:
    return reference(minilm, TEXTS, max_chars=500)


def variant(ready: EmbeddingCreator, **params) -> EmbeddingCreator:
    """A copy of a set-up stage with other parameters, sharing its model."""
    new = copy.copy(ready)  # a copy drops the "_" runtime attributes
    new.__dict__.update({k: v for k, v in ready.__dict__.items() if k.startswith("_")})
    new.__dict__.update(params)
    return new


@pytest.fixture(scope="module")
def ready() -> EmbeddingCreator:
    stage = copy.copy(EmbeddingCreator(model_inference_batch_size=3, max_chars=None))
    stage.setup()
    return stage


@pytest.mark.parametrize("sort_by_length", [True, False])
def test_matches_direct_transformers_on_partitions(expected_500, sort_by_length):
    frame = pd.DataFrame({"id": range(len(TEXTS)), "text": TEXTS})
    stage = EmbeddingCreator(
        model_inference_batch_size=3, max_chars=500, sort_by_length=sort_by_length
    )
    df = dd.from_pandas(frame, npartitions=3)
    assert df.npartitions == 3
    out_df = stage(df)
    assert out_df._meta["embedding"].dtype == out_df.dtypes["embedding"]
    with dask.config.set(scheduler="sync"):
        out = out_df.compute()
    assert out["id"].tolist() == list(range(len(TEXTS)))
    got = column_to_embeddings(out["embedding"])
    assert got.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(got, expected_500, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_batching_does_not_change_vectors(ready, expected):
    frame = pd.DataFrame({"text": TEXTS})
    out, stats = run_stage(ready, frame)
    assert stats.extra == {"oom_retries": 0}
    np.testing.assert_allclose(column_to_embeddings(out["embedding"]), expected, atol=2e-5)
    one = variant(ready, model_inference_batch_size=1, sort_by_length=False)
    np.testing.assert_allclose(
        column_to_embeddings(one.process(frame)["embedding"]), expected, atol=2e-5
    )


def test_paraphrases_are_closer_than_unrelated_texts(ready):
    vectors, _ = ready.embed([t for t in TEXTS[:5] if t])
    sim = vectors @ vectors.T
    assert sim[0, 1] > 0.5 > sim[0, 2]
    assert sim[2, 3] > 0.5 > sim[2, 4]
    assert sim[0, 1] > max(sim[0, 2], sim[0, 3], sim[0, 4], sim[1, 2], sim[1, 3])
    assert sim[2, 3] > max(sim[0, 2], sim[1, 3], sim[2, 4], sim[3, 4])


def test_oom_retry_is_counted(monkeypatch, ready, expected):
    stage = variant(ready, model_inference_batch_size=8)
    real = stage._model.forward

    def forward(*args, **kwargs):
        if kwargs["input_ids"].shape[0] > 4:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(*args, **kwargs)

    monkeypatch.setattr(stage._model, "forward", forward)
    out, stats = run_stage(stage, pd.DataFrame({"text": TEXTS}))
    assert stats.extra == {"oom_retries": 1}
    np.testing.assert_allclose(column_to_embeddings(out["embedding"]), expected, atol=2e-5)


def test_embeddings_round_trip_through_parquet(tmp_path, ready):
    frame = pd.DataFrame({"id": [f"d{i}" for i in range(6)], "text": TEXTS[:6]})
    out = ready.process(frame)
    df = dd.from_pandas(out, npartitions=2)
    with dask.config.set(scheduler="sync"):
        df.to_parquet(tmp_path / "emb", write_index=False)
        back = read_embeddings(str(tmp_path / "emb")).compute()
    assert back["id"].tolist() == frame["id"].tolist()
    np.testing.assert_array_equal(
        column_to_embeddings(back["embedding"]), column_to_embeddings(out["embedding"])
    )


def test_column_helpers_and_empty_partition(ready):
    vectors = np.arange(12, dtype=np.float32).reshape(4, 3)
    part = pd.DataFrame({"x": range(4)}, index=[10, 11, 12, 13])
    col = embeddings_to_column(part, vectors)
    assert col.index.tolist() == [10, 11, 12, 13]
    np.testing.assert_array_equal(column_to_embeddings(col), vectors)
    empty = ready.process(pd.DataFrame({"text": pd.Series([], dtype="str")}))
    assert len(empty) == 0
    meta = EmbeddingCreator().output_meta(pd.DataFrame({"text": pd.Series([], dtype="str")}))
    assert empty.dtypes.equals(meta.dtypes)


def test_stage_pickles_without_model(ready):
    blob = pickle.dumps(ready)
    assert len(blob) < 2_000
    assert "_key" not in pickle.loads(blob).__dict__


@pytest.mark.gpu
def test_gpu_matches_cpu(expected):
    """Embeddings on a GPU equal the CPU reference (full precision), and to fp16 with autocast."""
    from curator_dask import Resources

    frame = pd.DataFrame({"text": TEXTS})
    full = copy.copy(
        EmbeddingCreator(
            model_inference_batch_size=3,
            max_chars=None,
            autocast=False,
            resources=Resources(gpus=1),
        )
    )
    full.setup()
    assert full._device == "cuda"
    got = column_to_embeddings(full.process(frame)["embedding"])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    half = copy.copy(
        EmbeddingCreator(model_inference_batch_size=3, max_chars=None, resources=Resources(gpus=1))
    )
    half.setup()
    assert half.autocast
    got = column_to_embeddings(half.process(frame)["embedding"])
    np.testing.assert_allclose(got, expected, atol=2e-2)
