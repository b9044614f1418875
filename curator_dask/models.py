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
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from curator_dask._backend import backend_name
from curator_dask.progress import batch_done
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


def safetensors_keys(model_dir: Path) -> list[str]:
    """The tensor names stored in ``model_dir``'s ``*.safetensors`` files (headers only)."""
    keys: list[str] = []
    for path in sorted(model_dir.glob("*.safetensors")):
        with open(path, "rb") as f:
            (n,) = np.frombuffer(f.read(8), dtype="<u8")
            header = json.loads(f.read(int(n)))
        keys.extend(k for k in header if k != "__metadata__")
    return keys


# -- loaded models, one per model and device in a process ----------------------------------
#: How many loaded models a process keeps; the least recently used is released beyond it.
MAX_LOADED_MODELS = 2

_LOADED: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
_OWNERS: dict[tuple[Any, ...], int] = {}
_LOADED_LOCK = threading.RLock()


def loaded_model(key: tuple[Any, ...], load: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """The ``(model, tokenizer)`` cached under ``key`` in this process, loaded on first use.

    ``key`` is ``(owner key, device)``: the owner key names the model (see :func:`own_model`).

    Stages that differ only in how they use a model (filter, columns, batch size) share
    one loaded copy. At most :data:`MAX_LOADED_MODELS` are kept; the least recently used
    is released first.
    """
    with _LOADED_LOCK:
        got = _LOADED.get(key)
        if got is not None:
            _LOADED.move_to_end(key)
            return got
        got = load()
        _LOADED[key] = got
        while len(_LOADED) > MAX_LOADED_MODELS:
            _LOADED.popitem(last=False)
            _free_device_memory()
        return got


def loaded_model_keys() -> list[tuple[Any, ...]]:
    """The keys of the models loaded in this process, least recently used first."""
    with _LOADED_LOCK:
        return list(_LOADED)


def release_models(key: tuple[Any, ...] | None = None) -> None:
    """Release the model cached under ``key`` (all models when None) in this process."""
    with _LOADED_LOCK:
        if key is None:
            _LOADED.clear()
        else:
            _LOADED.pop(key, None)
    _free_device_memory()


def own_model(stage: object, key: tuple[Any, ...]) -> None:
    """Release ``key``'s model when the last stage built with it is garbage-collected.

    Called when a stage is built (not for the copies a worker unpickles), so a notebook
    that re-creates a stage, or drops it, does not keep its model loaded forever.
    """
    with _LOADED_LOCK:
        _OWNERS[key] = _OWNERS.get(key, 0) + 1
    weakref.finalize(stage, _disown, key)


def _disown(key: tuple[Any, ...]) -> None:
    with _LOADED_LOCK:
        left = _OWNERS.get(key, 1) - 1
        if left > 0:
            _OWNERS[key] = left
            return
        _OWNERS.pop(key, None)
        # the model on every device it was loaded on: cache keys start with the owner key
        dropped = [k for k in _LOADED if k[0] == key]
        for k in dropped:
            del _LOADED[k]
    if dropped:
        _free_device_memory()


def _free_device_memory() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


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


#: How the CUDA libraries under torch say they ran out of memory when torch's own allocator
#: did not (its ``OutOfMemoryError``): a plain ``RuntimeError`` from cuBLAS's or cuDNN's
#: workspace allocation, or CUDA's own ``cudaErrorMemoryAllocation`` text.
OOM_MESSAGES = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says a batch did not fit: a smaller batch may.

    ``torch.OutOfMemoryError`` (torch's caching allocator), ``MemoryError`` (the host, or
    RMM's ``bad_alloc`` when torch allocates through RMM), or a ``RuntimeError`` with one of
    :data:`OOM_MESSAGES` (cuBLAS, cuDNN or a CUDA call outside torch's allocator). Any
    other ``RuntimeError`` is a bug, not a size, and is not retried.
    """
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    return isinstance(err, RuntimeError) and any(m in str(err) for m in OOM_MESSAGES)


def run_batches(
    order: np.ndarray,
    batch_size: int,
    forward: Callable[[np.ndarray], np.ndarray],
    width: int,
    what: str,
) -> tuple[np.ndarray, int, int]:
    """Run ``forward`` over ``order`` in batches; return outputs in input order, retries, size.

    ``forward(idx)`` returns a float array of shape ``(len(idx), width)``. When a batch
    runs out of memory (:func:`is_out_of_memory`: ``torch.OutOfMemoryError`` on a GPU,
    ``MemoryError`` on the CPU, cuBLAS's or cuDNN's allocation failures) the batch is
    retried at half the size **of the batch that failed** (a partition's last batch may be
    smaller than ``batch_size``), and the smaller size is kept for the rest,
    so the retries are bounded by ``log2(batch_size)``. The size in use at the end is
    returned, for the caller to start the next partition with. At one document the error
    is raised again with advice. Each batch done is said to a progress display following
    the task (:func:`curator_dask.progress.batch_done`).
    """
    torch = require("torch", what)
    oom: tuple[type[BaseException], ...] = (torch.OutOfMemoryError, MemoryError, RuntimeError)
    out = np.zeros((len(order), width), dtype=np.float32)
    retries = 0
    size = batch_size
    start = 0
    while start < len(order):
        idx = order[start : start + size]
        try:
            out[idx] = forward(idx)
        except oom as err:
            if not is_out_of_memory(err):
                raise
            failed = len(idx)
            if failed == 1:
                raise type(err)(
                    f"{what}: out of memory on a single document even after halving the "
                    f"batch from {batch_size} ({retries} retries). Use a smaller "
                    "model_inference_batch_size, a smaller max_chars or max_tokens, or give "
                    "each task more memory (e.g. resources=Resources(gpus=1)). Original "
                    f"error: {err}"
                ) from err
            size = max(1, failed // 2)
            logger.warning(
                "%s: out of memory on a batch of %d; retrying with %d", what, failed, size
            )
            retries += 1
            _free_device_memory()
            continue
        start += len(idx)
        batch_done(len(idx))  # a progress display following the task counts it now
    return out, retries, size


def frame_lib(part: Any) -> ModuleType:
    """The module (pandas or cudf) that ``part`` belongs to."""
    if isinstance(part, (pd.DataFrame, pd.Series)):
        return pd
    return sys.modules[type(part).__module__.split(".")[0]]


def new_column(part: Any, values: np.ndarray | Sequence[Any], dtype: str | None) -> Any:
    """A Series of ``values`` on ``part``'s index, in ``part``'s frame library."""
    lib = frame_lib(part)
    return lib.Series(values, index=part.index, dtype=dtype)


def vector_column(part: Any, vectors: np.ndarray) -> Any:
    """An ``(n, dim)`` float32 matrix as a ``list<float32>`` column on ``part``'s index."""
    import pyarrow as pa

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    arr = pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1)))
    lib = frame_lib(part)
    if lib is pd:
        return pd.Series(pd.arrays.ArrowExtensionArray(arr), index=part.index)
    col = lib.Series.from_arrow(arr)
    col.index = part.index
    return col


class ModelStage(ProcessingStage):
    """What the Hugging Face stages share: checks, loading, teardown and batched inference.

    A subclass is a dataclass with the fields annotated here and a class attribute
    ``default_batch_sizes`` (``{"cpu": n, "cuda": m}``). Its ``__post_init__`` calls
    :meth:`_check_batching` and :meth:`_own_model`, its ``setup`` calls
    :meth:`_load_model`, and its partition transform calls :meth:`_infer` with what to make
    of the model's output.

    The loaded model lives in a per-process cache shared by every stage that uses the same
    model on the same device (see :func:`loaded_model`); a set-up stage holds only its key,
    so dropping the stage that was built (in a notebook) releases the model.
    """

    #: Documents per forward pass when ``model_inference_batch_size`` is None, by device.
    default_batch_sizes: ClassVar[dict[str, int]] = {"cpu": 32, "cuda": 256}

    model_inference_batch_size: int | None
    max_chars: int | None
    max_tokens: int | None
    sort_by_length: bool
    device: str
    autocast: bool
    _max_length: int  # set by the subclass' setup, after _load_model

    def _check_batching(self) -> None:
        """Validate ``model_inference_batch_size``, ``max_chars`` and ``max_tokens``."""
        size = self.model_inference_batch_size
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"model_inference_batch_size must be >= 1 or None, got {size!r}")
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"max_chars must be >= 1 or None, got {self.max_chars}")
        if self.max_tokens is not None and self.max_tokens < 2:
            raise ValueError(f"max_tokens must be >= 2 or None, got {self.max_tokens}")

    def _model_key(self, model_dir: str) -> tuple[Any, ...]:
        """What identifies the model, whatever the device: loader and directory."""
        return (type(self).load_checkpoint, str(Path(model_dir).expanduser().absolute()))

    def _own_model(self, model_dir: str) -> None:
        """Tie the loaded model's lifetime to this stage (see :func:`own_model`)."""
        own_model(self, self._model_key(model_dir))

    def load_checkpoint(self, path: Path, device: str) -> Any:
        """Load the model in ``path`` onto ``device`` (eval mode). Overridden per stage."""
        raise NotImplementedError

    def _load_model(self, model_dir: str) -> Path:
        """Load the tokenizer and model once per process (shared through the cache).

        Sets ``_device``, ``_key`` and ``_torch``; returns the checked model directory.
        """
        torch = require("torch", type(self).__name__)
        path = check_model_dir(model_dir, self.stage_name)
        self._device = resolve_device(self.device, self.resources)
        # the device is part of the cache key: one process may run the model on both
        self._key = (self._model_key(model_dir), self._device)
        device = self._device
        loaded_model(self._key, lambda: (self.load_checkpoint(path, device), load_tokenizer(path)))
        self._torch = torch
        return path

    @property
    def _model(self) -> Any:
        return loaded_model(self._key, self._reload)[0]

    @property
    def _tokenizer(self) -> Any:
        return loaded_model(self._key, self._reload)[1]

    def _reload(self) -> tuple[Any, Any]:
        # The cache released the model (another model came, or the built stage was dropped).
        path = check_model_dir(self._key[0][1], self.stage_name)
        return self.load_checkpoint(path, self._device), load_tokenizer(path)

    def batch_size_for(self, device: str) -> int:
        """``model_inference_batch_size``, or this stage's default for ``device``."""
        if self.model_inference_batch_size is not None:
            return self.model_inference_batch_size
        kind = "cuda" if device.startswith("cuda") else "cpu"
        return self.default_batch_sizes[kind]

    def teardown(self) -> None:
        """Release the model (at the end of a run, on every worker) and forget the state."""
        key = self.__dict__.get("_key")
        if key is not None:
            release_models(key)
        for attr in ("_key", "_torch", "_batch_limit"):
            self.__dict__.pop(attr, None)

    def process(self, part: Any) -> Any:
        return self.process_with_stats(part)[0]

    def _infer(
        self, texts: list[str], width: int, post: Callable[[Any, dict[str, Any]], np.ndarray]
    ) -> tuple[np.ndarray, int]:
        """Run the model over ``texts`` in length-sorted batches; outputs in input order.

        ``post(outputs, batch)`` turns the model's outputs for a padded ``batch`` (computed
        under ``torch.inference_mode()``, and ``torch.autocast`` on a GPU when ``autocast``)
        into a ``(len(batch), width)`` array. Returns the ``(len(texts), width)`` float32
        array and the out-of-memory retry count. A batch size that had to be halved stays
        halved for the later partitions this process runs. Needs ``setup``.
        """
        if not texts:
            return np.zeros((0, width), dtype=np.float32), 0
        model, tokenizer = loaded_model(self._key, self._reload)
        enc = tokenize(tokenizer, texts, self._max_length)
        lengths = np.fromiter((len(x) for x in enc["input_ids"]), dtype=np.int64)
        order = batch_order(lengths, self.sort_by_length)
        torch = self._torch
        pad_id = tokenizer.pad_token_id or 0
        side = getattr(tokenizer, "padding_side", "right")
        cuda = self._device.startswith("cuda")

        def forward(idx: np.ndarray) -> np.ndarray:
            batch = pad_batch(enc, idx, pad_id, side, torch, self._device)
            with torch.inference_mode():
                if self.autocast and cuda:
                    with torch.autocast(device_type="cuda"):
                        outputs = model(**batch)
                else:
                    outputs = model(**batch)
            return post(outputs, batch)

        size = self.__dict__.get("_batch_limit") or self.batch_size_for(self._device)
        out, retries, size = run_batches(order, size, forward, width, self.stage_name)
        if retries:
            self._batch_limit = size
        return out, retries
