"""The model-loading base shared by classifiers, embeddings and semantic dedup.

Loading from a local directory (safetensors only, never the hub), CPU tokenisation,
length-sorted batching, and halving a batch after an out-of-memory error. Everything
heavy (torch, transformers) is imported inside functions so that importing this module,
:mod:`curator_dask.classifiers` or :mod:`curator_dask.embeddings` does not need the
``models`` extra.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from curator_dask._backend import backend_name
from curator_dask.stage import ProcessingStage, Resources

logger = logging.getLogger(__name__)

MODELS_EXTRA = "pip install 'curator_dask[models]'"

#: Weight files a directory may hold that need pickle to load; refused.
_PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` or raise one ImportError naming the extra to install."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as err:
        raise ImportError(
            f"{what} needs the optional package {module!r}; install the models extra: "
            f"{MODELS_EXTRA}"
        ) from err


def as_names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    """``value`` as a tuple of names: one string is one name, never its characters.

    Raises
    ------
    TypeError
        ``value`` is neither a string nor a sequence of strings.
    ValueError
        ``value`` is an empty sequence (it would keep nothing).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(
            f"{what} must be a string or a list of strings, got {type(value).__name__}"
        ) from None
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{what} must hold strings, got {bad!r}")
    if not items:
        raise ValueError(f"{what} is empty: it would keep no document (use None to keep all)")
    return items


def check_known(names: Sequence[str], known: Sequence[str], what: str, source: str) -> None:
    """Raise ValueError naming the ``names`` that are not in ``known`` (the model's labels)."""
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        shown = list(known) if len(known) <= 40 else [*list(known)[:40], "..."]
        raise ValueError(f"{what}: {unknown} are not labels of {source}; its labels: {shown}")


def default_model_resources() -> Resources:
    """``Resources(gpus=1)`` when dask's dataframe backend is cudf, CPU otherwise.

    Chosen when a stage is constructed, so a pipeline built under
    ``dask.config.set({"dataframe.backend": "cudf"})`` places model stages on GPU workers.
    """
    if backend_name() == "cudf":
        return Resources(gpus=1)
    return Resources()


def resolve_device(device: str, resources: Resources) -> str:
    """Turn ``device="auto"`` into ``"cuda"`` or ``"cpu"``.

    ``auto`` means CUDA when the stage asked for a GPU and this process sees one. A stage
    that did not ask for a GPU stays on the CPU even on a GPU machine: the scheduler did not
    reserve a GPU for it.
    """
    if device != "auto":
        return device
    torch = require("torch", "device='auto'")
    if resources.requires_gpu and torch.cuda.is_available():
        return "cuda"
    if resources.requires_gpu:
        logger.warning("stage asked for a GPU but this process sees none; running on CPU")
    return "cpu"


def check_model_dir(model_dir: str | os.PathLike[str], what: str) -> Path:
    """Return ``model_dir`` as a Path after checking it is a local safetensors checkpoint.

    Raises
    ------
    FileNotFoundError
        ``model_dir`` is not a local directory (hub ids are not fetched).
    ValueError
        The directory holds only pickle weights (``.bin``, ``.pt``...), which are refused.
    """
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"{what}: model_dir {str(model_dir)!r} is not a local directory. curator_dask never "
            "downloads models at run time: download the model once (e.g. `huggingface-cli "
            "download <repo> --local-dir <dir>`) and pass that directory."
        )
    if not any(path.glob("*.safetensors")):
        pickles = sorted(p.name for pat in _PICKLE_WEIGHTS for p in path.glob(pat))
        if pickles:
            raise ValueError(
                f"{what}: {path} holds only pickle weights ({', '.join(pickles)}); loading "
                "them can run arbitrary code, so they are refused. Convert the checkpoint to "
                "safetensors (model.save_pretrained(dir, safe_serialization=True))."
            )
        raise FileNotFoundError(f"{what}: no *.safetensors weights in {path}")
    return path


def read_json(path: Path) -> dict[str, Any]:
    """Read a small JSON file (a model config)."""
    with open(path, encoding="utf-8") as f:
        return dict(json.load(f))


def load_tokenizer(model_dir: Path) -> Any:
    """Load the tokenizer saved in ``model_dir`` (local files only)."""
    transformers = require("transformers", "loading a tokenizer")
    return transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)


def load_model(auto_class: str, model_dir: Path, device: str) -> Any:
    """Load ``transformers.<auto_class>`` from ``model_dir`` (safetensors only), in eval mode."""
    transformers = require("transformers", "loading a model")
    cls = getattr(transformers, auto_class)
    model = cls.from_pretrained(str(model_dir), use_safetensors=True, local_files_only=True)
    return model.to(device).eval()


def token_limit(tokenizer: Any, config: Any, max_tokens: int | None) -> int:
    """Tokens per document: ``max_tokens`` capped by what the model's positions allow."""
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and tok_max < 1_000_000:
        limits.append(tok_max)
    pos_max = getattr(config, "max_position_embeddings", None)
    if isinstance(pos_max, int) and pos_max > 0:
        limits.append(pos_max)
    if max_tokens is not None:
        limits.append(max_tokens)
    return min(limits) if limits else 512


def texts_of(text: Any, max_chars: int | None) -> list[str]:
    """The partition's texts as Python strings, missing as ``""``, cut to ``max_chars``."""
    if not isinstance(text, pd.Series):
        text = text.to_pandas()
    values = text.fillna("").astype(str)
    if max_chars is not None:
        values = values.str.slice(0, max_chars)
    return values.tolist()


def tokenize(tokenizer: Any, texts: list[str], max_length: int) -> dict[str, list[list[int]]]:
    """Tokenise without padding (padding happens per batch, after sorting)."""
    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=False)
    return {k: list(v) for k, v in enc.items()}


def pad_batch(
    encodings: dict[str, list[list[int]]],
    idx: np.ndarray,
    pad_token_id: int,
    padding_side: str,
    torch: ModuleType,
    device: str,
) -> dict[str, Any]:
    """Pad the documents ``idx`` of ``encodings`` to their longest and return tensors."""
    rows = {k: [v[i] for i in idx] for k, v in encodings.items()}
    width = max(len(r) for r in rows["input_ids"])
    out = {}
    for key, seqs in rows.items():
        fill = pad_token_id if key == "input_ids" else 0
        arr = np.full((len(seqs), width), fill, dtype=np.int64)
        for j, seq in enumerate(seqs):
            if padding_side == "left":
                arr[j, width - len(seq) :] = seq
            else:
                arr[j, : len(seq)] = seq
        out[key] = torch.from_numpy(arr).to(device)
    return out


def batch_order(lengths: np.ndarray, sort_by_length: bool) -> np.ndarray:
    """Document order for batching: longest first when sorting, else the input order.

    Longest first puts the batch most likely to run out of GPU memory at the start, so a
    halved batch size (see :func:`run_batches`) applies to everything after it.
    """
    if sort_by_length:
        return np.argsort(-lengths, kind="stable")
    return np.arange(len(lengths))


def run_batches(
    order: np.ndarray,
    batch_size: int,
    forward: Callable[[np.ndarray], np.ndarray],
    width: int,
    what: str,
) -> tuple[np.ndarray, int]:
    """Run ``forward`` over ``order`` in batches; return outputs in input order and retries.

    ``forward(idx)`` returns a float array of shape ``(len(idx), width)``. On
    ``torch.OutOfMemoryError`` the batch size is halved and the batch retried; the smaller
    size is kept for the rest of the partition, so the retries are bounded by
    ``log2(batch_size)``. At batch size 1 the error is raised again with advice.
    """
    torch = require("torch", what)
    out = np.zeros((len(order), width), dtype=np.float32)
    retries = 0
    size = batch_size
    start = 0
    while start < len(order):
        idx = order[start : start + size]
        try:
            out[idx] = forward(idx)
        except torch.OutOfMemoryError as err:
            if size == 1:
                raise torch.OutOfMemoryError(
                    f"{what}: out of GPU memory on a single document even after halving the "
                    f"batch from model_inference_batch_size={batch_size} ({retries} "
                    "retries). Use a smaller model_inference_batch_size, a smaller max_chars "
                    "or max_tokens, or give each task more of the GPU (e.g. "
                    f"resources=Resources(gpus=1)). Original error: {err}"
                ) from err
            new_size = max(1, size // 2)
            logger.warning(
                "%s: out of GPU memory on a batch of %d; retrying with %d", what, size, new_size
            )
            size = new_size
            retries += 1
            _empty_cache(torch)
            continue
        start += len(idx)
    return out, retries


def _empty_cache(torch: ModuleType) -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def frame_lib(part: Any) -> ModuleType:
    """The module (pandas or cudf) that ``part`` belongs to."""
    if isinstance(part, (pd.DataFrame, pd.Series)):
        return pd
    return sys.modules[type(part).__module__.split(".")[0]]


def new_column(part: Any, values: np.ndarray | Sequence[Any], dtype: str | None) -> Any:
    """A Series of ``values`` on ``part``'s index, in ``part``'s frame library."""
    lib = frame_lib(part)
    return lib.Series(values, index=part.index, dtype=dtype)


class ModelStage(ProcessingStage):
    """What the Hugging Face stages share: checks, loading, teardown and batched inference.

    A subclass is a dataclass with the fields annotated here. Its ``__post_init__`` calls
    :meth:`_check_batching`, its ``setup`` calls :meth:`_load_model`, and its partition
    transform calls :meth:`_infer` with what to make of the model's output.
    """

    model_inference_batch_size: int
    max_chars: int | None
    max_tokens: int | None
    sort_by_length: bool
    device: str
    _max_length: int  # set by the subclass' setup, after _load_model

    def _check_batching(self) -> None:
        """Validate ``model_inference_batch_size``, ``max_chars`` and ``max_tokens``."""
        if self.model_inference_batch_size < 1:
            raise ValueError(
                f"model_inference_batch_size must be >= 1, got {self.model_inference_batch_size}"
            )
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"max_chars must be >= 1 or None, got {self.max_chars}")
        if self.max_tokens is not None and self.max_tokens < 2:
            raise ValueError(f"max_tokens must be >= 2 or None, got {self.max_tokens}")

    def _load_model(self, model_dir: str, auto_class: str) -> Path:
        """Load the tokenizer and ``transformers.<auto_class>`` once per worker process.

        Sets ``_device``, ``_tokenizer``, ``_model`` and ``_torch``; returns the checked
        model directory.
        """
        torch = require("torch", type(self).__name__)
        path = check_model_dir(model_dir, self.stage_name)
        self._device = resolve_device(self.device, self.resources)
        self._tokenizer = load_tokenizer(path)
        self._model = load_model(auto_class, path, self._device)
        self._torch = torch
        return path

    def teardown(self) -> None:
        for attr in ("_model", "_tokenizer", "_torch"):
            self.__dict__.pop(attr, None)

    def process(self, part: Any) -> Any:
        return self.process_with_stats(part)[0]

    def _infer(
        self, texts: list[str], width: int, post: Callable[[Any, dict[str, Any]], np.ndarray]
    ) -> tuple[np.ndarray, int]:
        """Run the model over ``texts`` in length-sorted batches; outputs in input order.

        ``post(outputs, batch)`` turns the model's outputs for a padded ``batch`` (computed
        under ``torch.inference_mode()``) into a ``(len(batch), width)`` array. Returns the
        ``(len(texts), width)`` float32 array and the OOM retry count. Needs ``setup``.
        """
        if not texts:
            return np.zeros((0, width), dtype=np.float32), 0
        enc = tokenize(self._tokenizer, texts, self._max_length)
        lengths = np.fromiter((len(x) for x in enc["input_ids"]), dtype=np.int64)
        order = batch_order(lengths, self.sort_by_length)
        torch = self._torch
        pad_id = self._tokenizer.pad_token_id or 0
        side = getattr(self._tokenizer, "padding_side", "right")

        def forward(idx: np.ndarray) -> np.ndarray:
            batch = pad_batch(enc, idx, pad_id, side, torch, self._device)
            with torch.inference_mode():
                outputs = self._model(**batch)
            return post(outputs, batch)

        return run_batches(order, self.model_inference_batch_size, forward, width, self.stage_name)
