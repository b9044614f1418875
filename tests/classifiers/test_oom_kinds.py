"""Which errors halve a model batch: torch's, the host's, and the CUDA libraries' own words.

torch's caching allocator raises ``torch.OutOfMemoryError``; cuBLAS and cuDNN, allocating
their workspaces themselves, raise a plain ``RuntimeError`` (``CUBLAS_STATUS_ALLOC_FAILED``,
``CUDNN_STATUS_ALLOC_FAILED``, ``CUDA error: out of memory``) that a smaller batch avoids
just as well. Any other ``RuntimeError`` is a bug and must not be retried.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curator_dask import models
from curator_dask.classifiers import HFSequenceClassifier
from tests.classifiers.test_model_lifecycle import record_batches, set_up, texts

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CUDA_LIBRARY_OOMS = [
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
]


def _runtime_error(message: str):
    def make(_text: str) -> RuntimeError:
        return RuntimeError(message)

    return make


@pytest.mark.parametrize("message", CUDA_LIBRARY_OOMS, ids=["cuda", "cublas", "cudnn"])
def test_a_cuda_library_out_of_memory_halves_the_batch(monkeypatch, tiny_classifier_dir, message):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=8))
    expected = clf.process(texts(6))
    seen = record_batches(monkeypatch, clf._model, fail_above=2, error=_runtime_error(message))
    out, stats = clf.process_with_stats(texts(6))
    assert seen == [6, 3, 1, 1, 1, 1, 1, 1]
    assert stats["oom_retries"] == 2
    pd.testing.assert_frame_equal(out, expected)


def test_another_runtime_error_is_raised_at_once(monkeypatch, tiny_classifier_dir):
    clf = set_up(HFSequenceClassifier(model_dir=tiny_classifier_dir, model_inference_batch_size=8))
    bug = _runtime_error("mat1 and mat2 shapes cannot be multiplied (6x7 and 8x2)")
    seen = record_batches(monkeypatch, clf._model, fail_above=0, error=bug)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        clf.process(texts(6))
    assert seen == [6]  # no retry


def test_run_batches_at_one_document_says_what_to_change():
    def forward(idx: np.ndarray) -> np.ndarray:
        raise RuntimeError(CUDA_LIBRARY_OOMS[1])

    with pytest.raises(RuntimeError, match="smaller model_inference_batch_size") as err:
        models.run_batches(np.arange(4), 4, forward, 2, "test")
    assert "CUBLAS_STATUS_ALLOC_FAILED" in str(err.value)


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (MemoryError("std::bad_alloc: out_of_memory: RMM failure"), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (RuntimeError("index out of range in self"), False),
        (ValueError("out of memory"), False),
    ],
)
def test_is_out_of_memory(err, expected):
    assert models.is_out_of_memory(err) is expected
    assert models.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory")) is True
