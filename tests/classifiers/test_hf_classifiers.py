from __future__ import annotations

import copy
import pickle

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curator_dask import Resources
from curator_dask.classifiers import DomainClassifier, HFSequenceClassifier, QualityClassifier
from curator_dask.stage import run_stage

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LABELS = ("low", "medium", "high")  # the labels of the tiny model (conftest.py)
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "bird",
    "sat",
    "ran",
    "on",
    "over",
    "mat",
    "rug",
    "good",
    "bad",
    "very",
    "text",
    "data",
    "big",
    "small",
]


def make_texts(n: int = 60, seed: int = 0) -> list[str | None]:
    rng = np.random.default_rng(seed)
    texts: list[str | None] = []
    for _i in range(n):
        k = int(rng.integers(1, 90))  # some are longer than the model's 64 positions
        words = list(rng.choice([*WORDS, "zebra", "quux"], size=k))
        texts.append(" ".join(words))
    texts[5] = ""
    texts[17] = None
    return texts


def reference_probs(model_dir, texts, max_length: int = 64, max_chars=None) -> np.ndarray:
    """A direct transformers forward pass over all texts in one padded batch."""
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    clean = [t if isinstance(t, str) else "" for t in texts]
    if max_chars is not None:
        clean = [t[:max_chars] for t in clean]
    enc = tok(clean, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits.softmax(-1).numpy()


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    texts = make_texts()
    return pd.DataFrame({"id": [f"d{i:03d}" for i in range(len(texts))], "text": texts})


@pytest.fixture(scope="module")
def expected(tiny_classifier_dir, frame) -> np.ndarray:
    return reference_probs(tiny_classifier_dir, frame["text"].tolist())


def set_up(stage: HFSequenceClassifier) -> HFSequenceClassifier:
    ready = copy.copy(stage)
    ready.setup()
    return ready


@pytest.mark.parametrize("sort_by_length", [True, False])
def test_matches_direct_forward_on_partitions(tiny_classifier_dir, frame, expected, sort_by_length):
    clf = HFSequenceClassifier(
        model_dir=tiny_classifier_dir,
        model_inference_batch_size=7,
        sort_by_length=sort_by_length,
        write_all_probs=True,
    )
    df = dd.from_pandas(frame, npartitions=3)
    assert df.npartitions == 3
    with dask.config.set(scheduler="sync"):
        out = clf(df).compute()
    # original order and columns kept
    assert out["id"].tolist() == frame["id"].tolist()
    assert out["text"].fillna("").tolist() == frame["text"].fillna("").tolist()
    names = np.asarray(LABELS)
    assert out["label"].tolist() == names[expected.argmax(1)].tolist()
    np.testing.assert_allclose(out["label_prob"].to_numpy(), expected.max(1), atol=1e-5)
    for j, name in enumerate(LABELS):
        np.testing.assert_allclose(out[f"label_prob_{name}"].to_numpy(), expected[:, j], atol=1e-5)
    # the tiny random model must produce more than one label, or the test proves little
    assert out["label"].nunique() >= 2


def test_batch_size_and_order_do_not_change_output(tiny_classifier_dir, frame):
    outs = []
    for bs, srt in [(1, False), (4, True), (1000, True), (13, False)]:
        clf = set_up(
            HFSequenceClassifier(
                model_dir=tiny_classifier_dir, model_inference_batch_size=bs, sort_by_length=srt
            )
        )
        outs.append(clf.process(frame))
    for other in outs[1:]:
        assert other["label"].tolist() == outs[0]["label"].tolist()
        np.testing.assert_allclose(other["label_prob"], outs[0]["label_prob"], atol=1e-5)


def test_max_chars_and_max_tokens(tiny_classifier_dir, frame):
    texts = frame["text"].tolist()
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, max_chars=25))
    np.testing.assert_allclose(
        clf.process(frame)["label_prob"],
        reference_probs(tiny_classifier_dir, texts, max_chars=25).max(1),
        atol=1e-5,
    )
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, max_tokens=8))
    ref = reference_probs(tiny_classifier_dir, texts, max_length=8)
    np.testing.assert_allclose(clf.process(frame)["label_prob"], ref.max(1), atol=1e-5)
    # a larger max_tokens than the model's 64 positions is capped, not an error
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, max_tokens=10_000))
    assert clf._max_length == 64


def test_filter_by_keeps_only_those_labels(tiny_classifier_dir, frame, expected):
    clf = set_up(
        QualityClassifier(model_dir=tiny_classifier_dir, filter_by=["high", "low"], max_chars=None)
    )
    out, stats = run_stage(clf, frame)
    pred = np.asarray(LABELS)[expected.argmax(1)]
    keep = np.isin(pred, ["high", "low"])
    assert 0 < keep.sum() < len(frame)
    assert out["id"].tolist() == frame["id"][keep].tolist()
    assert set(out["quality_pred"]) <= {"high", "low"}
    assert stats.docs_in == len(frame)
    assert stats.removed == int((~keep).sum())
    assert stats.extra == {"oom_retries": 0}


def test_labels_and_column_names(tiny_classifier_dir, frame):
    clf = set_up(
        DomainClassifier(model_dir=tiny_classifier_dir, labels=["Arts", "Science", "Sports"])
    )
    out = clf.process(frame.head(10))
    assert list(out.columns) == ["id", "text", "domain_pred"]  # NeMo's default: no prob
    assert set(out["domain_pred"]) <= {"Arts", "Science", "Sports"}
    with pytest.raises(ValueError, match="3 outputs"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, labels=["a", "b"])
    with pytest.raises(ValueError, match="filter_by"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, filter_by=["nope"])
    with pytest.raises(ValueError, match="filter_by"):
        HFSequenceClassifier(model_dir="x", labels=["a", "c"], filter_by=["b"])


def test_meta_needs_no_model_and_empty_partition(tiny_classifier_dir, frame):
    clf = HFSequenceClassifier(model_dir=tiny_classifier_dir, write_all_probs=True)
    meta = clf.output_meta(frame.iloc[:0])
    assert "_key" not in clf.__dict__  # never set up
    assert list(meta.columns) == [
        "id", "text", "label", "label_prob", "label_prob_low", "label_prob_medium",
        "label_prob_high",
    ]  # fmt: skip
    out = set_up(clf).process(frame.iloc[:0])
    assert len(out) == 0
    assert list(out.columns) == list(meta.columns)
    assert out.dtypes.equals(meta.dtypes)


def test_model_never_pickled(tiny_classifier_dir):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir))
    assert clf._model is not None  # loaded (held by the process' model cache)
    blob = pickle.dumps(clf)
    assert len(blob) < 2_000
    back = pickle.loads(blob)
    assert "_key" not in back.__dict__
    assert back.token() == clf.token()


def test_refuses_pickle_weights_and_hub_ids(tmp_path, tiny_classifier_dir):
    bad = tmp_path / "pickled"
    bad.mkdir()
    (bad / "config.json").write_text((tiny_classifier_dir / "config.json").read_text())
    (bad / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ValueError, match=r"pickle weights \(pytorch_model.bin\)"):
        set_up(HFSequenceClassifier(model_dir=bad))
    # building the stage (label names from config.json) says so, before any worker
    with pytest.raises(FileNotFoundError, match="never downloads"):
        HFSequenceClassifier(model_dir="nvidia/quality-classifier-deberta")
    # with labels given (a directory that exists only on the workers), setup says so
    with pytest.raises(FileNotFoundError, match="never downloads"):
        set_up(HFSequenceClassifier(model_dir="nvidia/quality-classifier-deberta", labels=LABELS))
    with pytest.raises(ValueError, match="model_inference_batch_size"):
        HFSequenceClassifier(model_dir=bad, model_inference_batch_size=0)


def test_resources_follow_the_dataframe_backend():
    assert HFSequenceClassifier(model_dir="m", labels=LABELS).resources == Resources()
    with dask.config.set({"dataframe.backend": "cudf"}):
        gpu = QualityClassifier(model_dir="m", labels=LABELS)
    assert gpu.resources == Resources(gpus=1)
    shared = gpu.with_(resources=Resources(gpus=0.25))
    assert shared.resources.to_dask() == {"GPU": 0.25}
    assert gpu.resources.gpus == 1  # with_ copies


def test_auto_device_is_cpu_without_gpu_request(tiny_classifier_dir):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir))
    assert clf._device == "cpu"
    assert next(clf._model.parameters()).device.type == "cpu"


def _fail_above(monkeypatch, clf, max_rows: int) -> list[int]:
    """Make the model's forward raise OutOfMemoryError for batches above ``max_rows``."""
    real = clf._model.forward
    seen: list[int] = []

    def forward(*args, **kwargs):
        rows = kwargs["input_ids"].shape[0]
        seen.append(rows)
        if rows > max_rows:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(*args, **kwargs)

    monkeypatch.setattr(clf._model, "forward", forward)
    return seen


def test_oom_halves_the_batch_and_counts_retries(monkeypatch, tiny_classifier_dir, frame, expected):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=16))
    seen = _fail_above(monkeypatch, clf, max_rows=5)
    out, stats = run_stage(clf, frame)
    assert stats.extra == {"oom_retries": 2}  # 16 -> 8 -> 4
    assert seen[:3] == [16, 8, 4]
    assert max(seen[3:]) == 4  # the smaller batch is kept for the rest of the partition
    assert out["id"].tolist() == frame["id"].tolist()
    np.testing.assert_allclose(out["label_prob"], expected.max(1), atol=1e-5)


def test_oom_at_batch_of_one_suggests_smaller_batch(monkeypatch, tiny_classifier_dir, frame):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=4))
    seen = _fail_above(monkeypatch, clf, max_rows=0)
    with pytest.raises(torch.OutOfMemoryError, match="smaller model_inference_batch_size"):
        clf.process(frame)
    assert seen == [4, 2, 1]


@pytest.mark.gpu
def test_gpu_matches_cpu(tiny_classifier_dir, frame, expected):
    full = HFSequenceClassifier(model_dir=tiny_classifier_dir, autocast=False)
    clf = set_up(full.with_(resources=Resources(gpus=1)))
    assert clf._device == "cuda"
    out = clf.process(frame)
    np.testing.assert_allclose(out["label_prob"], expected.max(1), atol=1e-4)
    # half precision (the GPU default) agrees to fp16's precision
    half = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, resources=Resources(gpus=1)))
    assert half.autocast
    np.testing.assert_allclose(half.process(frame)["label_prob"], expected.max(1), atol=2e-2)


def test_arguments_checked_when_the_stage_is_built(tiny_classifier_dir, frame, expected):
    # one string is one label
    one = HFSequenceClassifier(model_dir=tiny_classifier_dir, filter_by="high")
    assert one.filter_by == ("high",)
    got = set_up(one).process(frame)
    assert set(got["label"]) == {"high"}
    assert len(got) == int((expected.argmax(1) == LABELS.index("high")).sum())
    # unknown labels are refused against config.json's id2label, on the client
    with pytest.raises(ValueError, match=r"\['High'\] are not labels of .*config.json"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, filter_by="High")
    with pytest.raises(ValueError, match=r"\['x'\] are not labels of labels="):
        HFSequenceClassifier(model_dir="only/on/workers", labels=["a", "b"], filter_by=["x"])
    with pytest.raises(ValueError, match=r"2 labels .* a model with 3 outputs"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, labels=["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, filter_by=[])
    with pytest.raises(TypeError, match="string or a list"):
        HFSequenceClassifier(model_dir=tiny_classifier_dir, filter_by=3)
