"""The parameters of the dedup workflows, as plain dataclasses (no heavy imports).

Each workflow class subclasses its parameters and adds the computation; the CLI builds its
options from these fields (flag, type, default, and help from the docstring) without
importing dask.dataframe, pyarrow or numba, so ``--help`` stays fast.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

HASH_METHODS = ("md5", "xxh128", "fast128")

#: Named ``(num_bands, minhashes_per_band)`` shapes. ``"recall"`` (240 hashes) is the
#: default with the candidate check at Jaccard 0.8; ``"nemo"`` is NeMo Curator's default.
BAND_SHAPES: dict[str, tuple[int, int]] = {"recall": (30, 8), "nemo": (20, 13)}


@dataclass(frozen=True)
class Command:
    """A workflow's ``curator-dask`` subcommand: its options are the parameters' fields.

    ``workflow`` is ``"module:Class"``, imported only when the command runs (``--help``
    stays fast); ``required`` are the fields the command needs; ``choices`` limit fields
    to values. ``needs`` are packages checked before a cluster starts for ``needs_what``
    (``install`` is the line to install them; not needed when the option ``needs_unless``
    is given).
    ``threads_below`` is the setting below which (input bytes) the command runs on dask's
    threaded scheduler in its own process, with no distributed cluster; None for the
    pipelines' rule (``curator.cluster.threads-below``: one in-process worker).
    """

    name: str
    workflow: str
    help: str
    required: tuple[str, ...] = ("output_path",)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    needs_what: str = ""
    install: str = ""
    needs_unless: str | None = None
    threads_below: str | None = "curator.dedup.threads-below"


_COMMON_INPUT = """\
    input_path : str or list of str, optional
        JSONL or Parquet files, a directory or a glob, local or a URL (``s3://...``), listed
        and read by :mod:`curator_dask.io` (a directory: files with a JSONL or Parquet suffix,
        names starting with ``.`` or ``_`` skipped). Or give ``df``."""

_OUTPUT_AND_COLUMNS = """\
    output_path : str
        Where ``removed_ids/`` (and ``duplicate_groups/``, ``deduplicated/``) are written;
        quarantined records go beside it, to ``<output_path>.curator/_quarantine/``.
    text_column : str
        Column holding the text.
    id_column : str
        Column holding the document id (ids must be unique).
    blocksize : int or str, optional
        Partition size for the reader; default: from the workers' memory, at most
        ``curator.io.blocksize``."""
_COMMON_TAIL = """\
    input_format : {"jsonl", "parquet"}, optional
        The input's format; default: from the file suffixes.
    storage_options : dict, optional
        fsspec options (JSON on the command line) for every path: input, cache, output.
        Default: none.
    duplicate_groups : bool
        Also write every member of every duplicate group (``id, group``) to
        ``duplicate_groups/``."""


_DEPRECATED = """\
    input_blocksize : int or str, optional
        Deprecated spelling of ``blocksize`` (a ``DeprecationWarning``)."""


@dataclass
class ExactParams:
    command: ClassVar[Command] = Command(
        "exact-dedup",
        "curator_dask.dedup.exact:ExactDeduplicationWorkflow",
        "remove documents with identical text",
        choices={"keep": ("first", "last")},
    )
    __doc__ = f"""Parameters of :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.

    Parameters
    ----------
{_COMMON_INPUT}
{_OUTPUT_AND_COLUMNS}
    hash_method : {{"md5", "xxh128", "fast128"}}
        128-bit hash of the UTF-8 text. Identical texts always share a hash; different
        texts collide with probability ~ n^2 / 2^129.
    keep : {{"first", "last"}}
        Which document of a group survives: the smallest id (``"first"``) or the largest.
    perform_removal : bool
        Also write the dataset without the removed documents to ``deduplicated/``.
    df : dask.dataframe.DataFrame, optional
        The input as a dask frame instead of ``input_path``.
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.
{_COMMON_TAIL}
{_DEPRECATED}
    """

    input_path: str | Sequence[str] | None = None
    output_path: str = "exact_dedup_output"
    text_column: str = "text"
    id_column: str = "id"
    blocksize: int | str | None = None
    hash_method: str = "md5"
    keep: str = "first"
    perform_removal: bool = False
    df: Any = field(default=None, repr=False)
    client: Any = field(default=None, repr=False)
    input_format: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    duplicate_groups: bool = False
    #: Deprecated spelling of ``blocksize`` (:func:`take_input_blocksize`).
    input_blocksize: InitVar[int | str | None] = None


@dataclass
class FuzzyParams:
    command: ClassVar[Command] = Command(
        "fuzzy-dedup",
        "curator_dask.dedup.fuzzy:FuzzyDeduplicationWorkflow",
        "remove near-duplicates (MinHash + LSH)",
        required=("output_path", "cache_path"),
        choices={"keep": ("first", "longest")},
    )
    __doc__ = f"""Parameters of :class:`~curator_dask.dedup.FuzzyDeduplicationWorkflow`.

    Parameters
    ----------
{_COMMON_INPUT}
    cache_path : str
        Where intermediate results are checkpointed (see "Cache and resume" in
        ``docs/dedup.md``). Keyed by the input and the parameters: a changed parameter never
        reuses stale results; a restarted run continues where it stopped.
{_OUTPUT_AND_COLUMNS}
    char_ngrams : int, optional
        Character shingle length (raw text unless ``normalization="simple"``), instead of
        words (NeMo Curator uses 24). Default: words (``word_ngrams``).
    word_ngrams : int, optional
        Word shingle length after the ``"simple"`` normalisation (NFKC, lower-case,
        ``[\\\\W_]+`` -> space); a document with fewer tokens gets one shingle, all its tokens.
        Default 5 when neither is given.
    num_bands : int, optional
        LSH bands (see :mod:`curator_dask.dedup.lsh`). Default: ``band_shape``'s, else what
        ``jaccard_threshold`` asks for (:func:`~curator_dask.dedup.lsh.bands_for_threshold`:
        30 at 0.8 with the check).
    minhashes_per_band : int, optional
        MinHash values per LSH band. Default: ``band_shape``'s, else what
        ``jaccard_threshold`` asks for (8 at 0.8 with the check).
    bands_per_iteration : int, optional
        Bands bucketed per LSH pass; default ``curator.dedup.bands-per-iteration`` or the
        memory planner (:func:`curator_dask.dedup.planner.plan_lsh`).
    use_64_bit_hash : bool
        64-bit MinHash values (fewer collisions, twice the memory) instead of 32-bit.
    seed : int
        Seed of the MinHash functions.
    jaccard_threshold : float
        Similarity that makes a duplicate (checked exactly with the candidate check).
    false_positive_check : bool
        Verify every candidate pair's exact Jaccard before it becomes an edge.
    keep : {{"first", "longest"}}
        Survivor of each duplicate group: smallest id, or most characters (ties: smallest id).
    perform_removal : bool
        Also write the dataset without the removed documents to ``deduplicated/``.
    normalization : {{"simple", "none"}}, optional
        Text normalisation before shingling; default ``"simple"`` for words, ``"none"``
        for characters.
    df : dask.dataframe.DataFrame, optional
        Input frame instead of ``input_path``.
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.
    band_shape : {{"recall", "nemo"}}, optional
        A named ``(num_bands, minhashes_per_band)``: ``"recall"`` 30 x 8, ``"nemo"`` 20 x 13
        (NeMo Curator's shape). Default: from ``jaccard_threshold``.
{_COMMON_TAIL}
    num_anchors : int, optional
        Candidate check against at most this many anchors per bucket, or every pair a bucket
        needs with None (exhaustive, quadratic in the worst case); see
        :func:`~curator_dask.dedup.lsh.verify_buckets`.
{_DEPRECATED}
    """

    input_path: str | Sequence[str] | None = None
    cache_path: str = "fuzzy_dedup_cache"
    output_path: str = "fuzzy_dedup_output"
    text_column: str = "text"
    id_column: str = "id"
    blocksize: int | str | None = None
    char_ngrams: int | None = None
    word_ngrams: int | None = None
    num_bands: int | None = None
    minhashes_per_band: int | None = None
    bands_per_iteration: int | None = None
    use_64_bit_hash: bool = False
    seed: int = 42
    jaccard_threshold: float = 0.8
    false_positive_check: bool = True
    keep: str = "first"
    perform_removal: bool = False
    normalization: str | None = None
    df: Any = field(default=None, repr=False)
    client: Any = field(default=None, repr=False)
    band_shape: str | None = None
    input_format: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    duplicate_groups: bool = False
    num_anchors: int | None = 4
    #: Deprecated spelling of ``blocksize`` (:func:`take_input_blocksize`).
    input_blocksize: InitVar[int | str | None] = None


@dataclass
class SemanticParams:
    command: ClassVar[Command] = Command(
        "semantic-dedup",
        "curator_dask.dedup.semantic:SemanticDeduplicationWorkflow",
        "remove semantic near-duplicates (embeddings + k-means)",
        required=("output_path", "cache_path"),
        choices={"keep": ("hard", "easy", "first"), "device": ("auto", "cpu", "cuda")},
        needs=("torch", "transformers"),
        needs_what="embeddings",
        install="curator_dask[models]",
        needs_unless="embedding_column",  # given embeddings: no model is loaded
        threads_below=None,
    )
    __doc__ = f"""Parameters of :class:`~curator_dask.dedup.SemanticDeduplicationWorkflow`.

    Two documents are duplicates when the cosine distance of their embeddings,
    ``1 - cos(a, b)``, is at most ``eps`` and k-means put them in the same cluster.

    Parameters
    ----------
    cache_path : str
        Where the steps' results are checkpointed (embeddings, clusters, duplicates).
    output_path : str
        Where ``removed_ids/`` (and ``duplicate_groups/``, ``deduplicated/``) are written;
        quarantined records go beside it, to ``<output_path>.curator/_quarantine/``.
{_COMMON_INPUT}
    df : dask.dataframe.DataFrame, optional
        The input frame instead of ``input_path``.
    text_column : str
        Column holding the text.
    id_column : str
        Column holding the document id (ids must be unique).
    n_clusters : int
        k-means clusters (capped at the number of documents). Only documents of one cluster
        are compared, so more clusters is faster and may miss pairs split across clusters.
    eps : float
        Cosine-distance threshold: a document within ``eps`` of a kept document of its
        cluster is removed (``eps=0.01``: cosine similarity >= 0.99).
    keep : {{"hard", "easy", "first"}}
        Which document of a set of duplicates survives. Documents of a cluster are visited in
        an order and each is kept unless it is within ``eps`` of one already kept:
        ``"hard"`` visits the documents farthest from the centroid first (keeps the least
        typical, as in SemDeDup), ``"easy"`` the nearest first, ``"first"`` in input order.
        Ties are broken by input order, so the result is deterministic.
    model_dir : str, optional
        Local embedding model directory; default: the bundled all-MiniLM-L6-v2.
    model_inference_batch_size : int, optional
        Documents per forward pass (see :class:`~curator_dask.embeddings.EmbeddingCreator`).
    max_chars : int, optional
        Characters of each text embedded.
    max_tokens : int, optional
        Tokens of each text embedded; default: the model's ``max_seq_length``.
    seed : int
        Seed of the k-means initial centroids.
    kmeans_max_iter : int
        Maximum k-means iterations.
    blocksize : int or str, optional
        Partition size for the reader; default: from the workers' memory, at most
        ``curator.io.blocksize``.
    device : str
        Where the embedding model runs (``"auto"``, ``"cpu"``, ``"cuda"``).
    autocast : bool
        On a GPU, embed in half precision (``torch.autocast``): faster, and the removed set
        may differ from a CPU run's at the margin of ``eps``. Off: single precision, as on
        a CPU. Never used on a CPU.
    client : distributed.Client, optional
        Run on this client; otherwise on the active dask scheduler.
    perform_removal : bool
        Also write the dataset without the removed documents to ``deduplicated/``.
{_COMMON_TAIL}
    embedding_column : str, optional
        Use this column of the input (a list of floats per document) as the embeddings
        instead of computing them; no model is loaded. Default: computed.
{_DEPRECATED}
    """

    cache_path: str
    output_path: str
    input_path: str | Sequence[str] | None = None
    df: Any = field(default=None, repr=False)
    text_column: str = "text"
    id_column: str = "id"
    n_clusters: int = 100
    eps: float = 0.01
    keep: str = "hard"
    model_dir: str | None = None
    model_inference_batch_size: int = 128
    max_chars: int | None = 2000
    max_tokens: int | None = None
    seed: int = 42
    kmeans_max_iter: int = 100
    blocksize: int | str | None = None
    device: str = "auto"
    autocast: bool = True
    client: Any = field(default=None, repr=False)
    perform_removal: bool = False
    input_format: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    duplicate_groups: bool = False
    embedding_column: str | None = None
    #: Deprecated spelling of ``blocksize`` (:func:`take_input_blocksize`).
    input_blocksize: InitVar[int | str | None] = None


#: The dedup methods with a ``curator-dask`` subcommand, in ``--help`` order. A new method
#: adds its parameters (with their :class:`Command`) here, its workflow in its own module and
#: one export line in ``dedup/__init__.py``.
COMMANDS: list[type] = [ExactParams, FuzzyParams, SemanticParams]


def take_input_blocksize(params: Any, input_blocksize: int | str | None) -> None:
    """Move the deprecated ``input_blocksize=`` to ``blocksize`` (a ``DeprecationWarning``).

    Called first in each workflow's ``__post_init__``. Giving both with different values is
    a ``ValueError``.
    """
    if input_blocksize is None:
        return
    warnings.warn(
        f"{type(params).__name__}(input_blocksize=...) is deprecated: use blocksize=..., "
        "the readers' and the command line's name",
        DeprecationWarning,
        stacklevel=4,
    )
    if params.blocksize is not None and params.blocksize != input_blocksize:
        raise ValueError(
            f"give blocksize or its old name input_blocksize, not both "
            f"(got {params.blocksize!r} and {input_blocksize!r})"
        )
    params.blocksize = input_blocksize


def _input_blocksize(params: Any) -> int | str | None:
    warnings.warn("input_blocksize is deprecated: read blocksize", DeprecationWarning, stacklevel=2)
    return params.blocksize  # type: ignore[no-any-return]


# reading the old name still works (and warns); the dataclass default stays the InitVar's
for _cls in (ExactParams, FuzzyParams, SemanticParams):
    _cls.input_blocksize = property(_input_blocksize)  # type: ignore[union-attr]
