"""``nemo_curator.modules``: the dataset-to-dataset modules of NeMo Curator's Dask API.

Every module is lazy: it returns a :class:`DocumentDataset` whose dataframe computes
when written or computed. Filters and modifiers whose methods are
:func:`~curator_dask.nemo.utils.decorators.batched` run once per partition; others run
once per document (``Series.apply``), as in NeMo.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.utils.decorators import is_batched


class _Opaque:
    """Carries a user object through a graph; dask tokenizes it by a random token.

    Users' filters and modifiers are plain objects dask cannot hash deterministically
    (dask raises with ``tokenize.ensure-deterministic``); every module call is a new graph.
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return self.token


def _map(df: Any, fn: Callable[..., Any], obj: Any, *args: Any) -> Any:
    """``df.map_partitions(fn, obj, *args)`` with the output's meta from the empty frame."""
    meta = fn(df._meta, obj, *args)
    return df.map_partitions(_unwrap, fn, _Opaque(obj), *args, meta=meta)


def _unwrap(part: Any, fn: Callable[..., Any], holder: _Opaque, *args: Any) -> Any:
    return fn(part, holder.obj, *args)


def _call(fn: Callable[[Any], Any], values: pd.Series) -> pd.Series:
    if is_batched(fn):
        out = fn(values)
        return out if isinstance(out, pd.Series) else pd.Series(out, index=values.index)
    return values.apply(fn)


def _score_part(
    part: pd.DataFrame,
    filter_obj: Any,
    text_field: str,
    score_field: str | None,
    score_type: Any,
    invert: bool,
    do_filter: bool,
) -> pd.DataFrame:
    scores = _call(filter_obj.score_document, part[text_field])
    if score_type is not None:
        scores = scores.astype(score_type)
    if score_field is not None:
        part = part.assign(**{score_field: scores})
    if not do_filter:
        return part
    mask = _call(filter_obj.keep_document, scores).fillna(False).astype(bool)
    return part[~mask if invert else mask]


class ScoreFilter:
    """Score every document with ``filter_obj`` and keep those it keeps.

    Parameters
    ----------
    filter_obj : DocumentFilter
        Implements ``score_document`` and ``keep_document``.
    text_field : str
        Column holding the text.
    score_field : str, optional
        Write the score to this column.
    score_type : type or str, optional
        Cast the score to this dtype.
    invert : bool
        Keep the documents the filter would drop.
    """

    def __init__(
        self,
        filter_obj: Any,
        text_field: str = "text",
        score_field: str | None = None,
        score_type: Any = None,
        invert: bool = False,
    ) -> None:
        self.filter_obj = filter_obj
        self.text_field = text_field
        self.score_field = score_field
        self.score_type = score_type
        self.invert = invert

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        return DocumentDataset(
            _map(
                dataset.df,
                _score_part,
                self.filter_obj,
                self.text_field,
                self.score_field,
                self.score_type,
                self.invert,
                True,
            )
        )


class Score:
    """Write ``score_fn``'s score of every document to ``score_field``; drop nothing."""

    def __init__(
        self,
        score_fn: Callable[[Any], Any],
        score_field: str,
        text_field: str = "text",
        score_type: Any = None,
    ) -> None:
        self.score_fn = score_fn
        self.score_field = score_field
        self.text_field = text_field
        self.score_type = score_type

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        holder = _FnFilter(self.score_fn, None)
        return DocumentDataset(
            _map(
                dataset.df,
                _score_part,
                holder,
                self.text_field,
                self.score_field,
                self.score_type,
                False,
                False,
            )
        )


class Filter:
    """Keep the documents for which ``filter_fn(row[filter_field])`` is True."""

    def __init__(
        self, filter_fn: Callable[[Any], Any], filter_field: str, invert: bool = False
    ) -> None:
        self.filter_fn = filter_fn
        self.filter_field = filter_field
        self.invert = invert

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        holder = _FnFilter(None, self.filter_fn)
        return DocumentDataset(
            _map(dataset.df, _filter_part, holder, self.filter_field, self.invert)
        )


class _FnFilter:
    def __init__(self, score: Any, keep: Any) -> None:
        self.score_document = score
        self.keep_document = keep


def _filter_part(part: pd.DataFrame, holder: _FnFilter, field: str, invert: bool) -> pd.DataFrame:
    mask = _call(holder.keep_document, part[field]).fillna(False).astype(bool)
    return part[~mask if invert else mask]


def _modify_part(part: pd.DataFrame, modifier: Any, text_field: str) -> pd.DataFrame:
    return part.assign(**{text_field: _call(modifier.modify_document, part[text_field])})


class Modify:
    """Rewrite ``text_field`` with ``modifier.modify_document``."""

    def __init__(self, modifier: Any, text_field: str = "text") -> None:
        self.modifier = modifier
        self.text_field = text_field

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        return DocumentDataset(_map(dataset.df, _modify_part, self.modifier, self.text_field))


class Sequential:
    """Apply ``modules`` one after the other."""

    def __init__(self, modules: Sequence[Callable[[DocumentDataset], DocumentDataset]]) -> None:
        self.modules = list(modules)

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        for module in self.modules:
            dataset = module(dataset)
        return dataset


def _add_id_part(
    part: pd.DataFrame,
    id_field: str,
    prefix: str,
    start: int | None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    n = len(part)
    if start is None:
        number = (partition_info or {}).get("number", 0)
        ids = [f"{prefix}-{number:04d}{i:010d}" for i in range(n)]
    else:
        ids = [f"{prefix}-{start + i:010d}" for i in range(n)]
    return part.assign(**{id_field: pd.Series(ids, index=part.index, dtype="str")})


class AddId:
    """Add an ``id_field`` of unique string ids ``<id_prefix>-<number>``.

    With ``start_index`` the numbers run ``start_index, start_index + 1, ...`` through
    the dataset in order (this computes the partition lengths); without it they are
    the partition number (4 digits) then the row within it (10 digits).
    """

    def __init__(
        self, id_field: str, id_prefix: str = "doc_id", start_index: int | None = None
    ) -> None:
        self.id_field = id_field
        self.id_prefix = id_prefix
        self.start_index = start_index

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        df = dataset.df
        if self.start_index is None:
            return DocumentDataset(
                df.map_partitions(_add_id_part, self.id_field, self.id_prefix, None)
            )
        lengths = df.map_partitions(len).compute().tolist()
        starts = (self.start_index + np.concatenate([[0], np.cumsum(lengths)[:-1]])).tolist()
        parts = [
            df.get_partition(i).map_partitions(
                _add_id_part, self.id_field, self.id_prefix, int(starts[i])
            )
            for i in range(df.npartitions)
        ]
        import dask.dataframe as dd

        return DocumentDataset(dd.concat(parts))


# -- deduplication ---------------------------------------------------------------------------
def _dedup_output(
    dataset: DocumentDataset,
    result: Any,
    id_field: str,
    perform_removal: bool,
    hash_column: str | None,
) -> DocumentDataset:
    import dask.dataframe as dd

    from curator_dask.dedup import remove_duplicates

    if perform_removal:
        removed = result.paths["removed_ids"]
        return DocumentDataset(
            remove_duplicates(dataset.df, removed, keep=None, id_column=id_field)
        )
    groups = dd.read_parquet(result.paths["duplicate_groups"])
    groups = groups.rename(columns={"id": id_field})
    if hash_column:
        groups = groups.rename(columns={"group": hash_column})
    return DocumentDataset(groups)


class ExactDuplicates:
    """NeMo's ``ExactDuplicates``, run by :class:`curator_dask.dedup.ExactDeduplicationWorkflow`.

    Calling it computes. With ``perform_removal=False`` it returns every member of every
    duplicate group: ``id_field`` and ``_hashes`` (a group key equal within a group, as
    NeMo's hash column is), so NeMo's ``x._hashes.duplicated(keep="first")`` recipe works;
    with ``perform_removal=True`` the dataset without duplicates (the smallest id of each
    group kept). The workflow's files go to ``cache_dir`` (a temporary directory if None).
    """

    def __init__(
        self,
        logger: Any = None,
        id_field: str = "id",
        text_field: str = "text",
        hash_method: str = "md5",
        perform_removal: bool = False,
        profile_dir: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.id_field = id_field
        self.text_field = text_field
        self.hash_method = hash_method
        self.perform_removal = perform_removal
        self.cache_dir = cache_dir

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        import tempfile

        from curator_dask.dedup import ExactDeduplicationWorkflow

        out = self.cache_dir or tempfile.mkdtemp(prefix="exact_duplicates_")
        result = ExactDeduplicationWorkflow(
            df=dataset.df,
            output_path=out,
            text_column=self.text_field,
            id_column=self.id_field,
            hash_method=self.hash_method,
            perform_removal=False,
            duplicate_groups=True,
        ).run()
        return _dedup_output(dataset, result, self.id_field, self.perform_removal, "_hashes")


class FuzzyDuplicatesConfig:
    """NeMo's ``FuzzyDuplicatesConfig``; see :class:`FuzzyDuplicates` for the mapping."""

    def __init__(
        self,
        cache_dir: str,
        profile_dir: str | None = None,
        id_field: str = "id",
        text_field: str = "text",
        perform_removal: bool = False,
        seed: int = 42,
        char_ngrams: int = 24,
        num_buckets: int = 20,
        hashes_per_bucket: int = 13,
        use_64_bit_hash: bool = False,
        buckets_per_shuffle: int = 1,
        false_positive_check: bool = False,
        num_anchors: int = 2,
        jaccard_threshold: float = 0.8,
        **kwargs: Any,
    ) -> None:
        if cache_dir is None:
            raise ValueError("FuzzyDuplicatesConfig needs a cache_dir")
        self.cache_dir = cache_dir
        self.id_field = id_field
        self.text_field = text_field
        self.perform_removal = perform_removal
        self.seed = seed
        self.char_ngrams = char_ngrams
        self.num_buckets = num_buckets
        self.hashes_per_bucket = hashes_per_bucket
        self.buckets_per_shuffle = buckets_per_shuffle
        self.false_positive_check = false_positive_check
        self.num_anchors = num_anchors
        self.jaccard_threshold = jaccard_threshold


class FuzzyDuplicates:
    """NeMo's ``FuzzyDuplicates``, run by :class:`curator_dask.dedup.FuzzyDeduplicationWorkflow`.

    ``num_buckets`` -> ``num_bands``, ``hashes_per_bucket`` -> ``minhashes_per_band``,
    ``buckets_per_shuffle`` -> ``bands_per_iteration``, ``char_ngrams``, ``seed``,
    ``false_positive_check`` and ``jaccard_threshold`` keep their names; ``num_anchors``
    is accepted (our check compares every candidate pair, not anchors). Calling it
    computes; it returns ``id_field`` and ``group`` for every member of every duplicate
    group, or with ``perform_removal`` the dataset without duplicates.
    """

    def __init__(self, config: FuzzyDuplicatesConfig, logger: Any = None) -> None:
        self.config = config

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        import os

        from curator_dask.dedup import FuzzyDeduplicationWorkflow

        c = self.config
        result = FuzzyDeduplicationWorkflow(
            df=dataset.df,
            cache_path=os.path.join(c.cache_dir, "cache"),
            output_path=os.path.join(c.cache_dir, "output"),
            text_column=c.text_field,
            id_column=c.id_field,
            char_ngrams=c.char_ngrams,
            num_bands=c.num_buckets,
            minhashes_per_band=c.hashes_per_bucket,
            bands_per_iteration=c.buckets_per_shuffle,
            seed=c.seed,
            jaccard_threshold=c.jaccard_threshold,
            false_positive_check=c.false_positive_check,
            perform_removal=False,
            duplicate_groups=True,
        ).run()
        return _dedup_output(dataset, result, c.id_field, c.perform_removal, None)


__all__ = [
    "AddId",
    "ExactDuplicates",
    "Filter",
    "FuzzyDuplicates",
    "FuzzyDuplicatesConfig",
    "Modify",
    "Score",
    "ScoreFilter",
    "Sequential",
]
