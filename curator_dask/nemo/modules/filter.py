"""``nemo_curator.modules.filter``: ScoreFilter, Score, Filter and the bitext filters.

Every module is lazy: it returns a :class:`DocumentDataset` whose dataframe computes
when written or computed. Methods decorated with
:func:`~curator_dask.nemo.utils.decorators.batched` run once per partition; others once
per document (``Series.apply``), as in NeMo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from curator_dask.nemo.datasets import DocumentDataset
from curator_dask.nemo.modules._base import call, keep_mask, map_parts


def _score_part(
    part: pd.DataFrame,
    filter_obj: Any,
    fields: str | list[str],
    score_field: str | None,
    score_type: Any,
    invert: bool,
    do_filter: bool,
) -> pd.DataFrame:
    scores = call(filter_obj.score_document, part[fields])
    if score_type is not None:
        scores = scores.astype(score_type)
    if score_field is not None:
        part = part.assign(**{score_field: scores})
    if not do_filter:
        return part
    mask = keep_mask(filter_obj.keep_document, scores)
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
            map_parts(
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
            map_parts(
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
            map_parts(dataset.df, _filter_part, holder, self.filter_field, self.invert)
        )


class _FnFilter:
    def __init__(self, score: Any, keep: Any) -> None:
        self.score_document = score
        self.keep_document = keep


def _filter_part(part: pd.DataFrame, holder: _FnFilter, field: str, invert: bool) -> pd.DataFrame:
    mask = keep_mask(holder.keep_document, part[field])
    return part[~mask if invert else mask]


def _fields(src_field: str | Sequence[str], tgt_field: str | Sequence[str]) -> list[str]:
    if isinstance(src_field, str) and isinstance(tgt_field, str):
        return [src_field, tgt_field]
    if isinstance(src_field, str) or isinstance(tgt_field, str):
        raise ValueError(
            "src_field and tgt_field must both be column names or both be lists of them"
        )
    if len(src_field) != len(tgt_field):
        raise ValueError(
            f"src_field and tgt_field name {len(src_field)} and {len(tgt_field)} columns; "
            "they must name as many"
        )
    return [*src_field, *tgt_field]


class JointScoreFilter:
    """Score each pair of columns (bitext) with one filter and keep what it keeps.

    ``filter_obj.score_document`` receives a row holding the ``src_field`` and
    ``tgt_field`` values (a frame of those columns when batched), as in NeMo.

    Parameters
    ----------
    filter_obj : DocumentFilter
        A filter of two text columns (a length ratio, a quality estimate).
    src_field, tgt_field : str or list of str
        Source and target columns (both strings, or lists of the same length).
    score_field : str, optional
        Write the score to this column.
    score_type : type or str, optional
        Cast the score to this dtype.
    invert : bool
        Keep the pairs the filter would drop.
    """

    def __init__(
        self,
        filter_obj: Any,
        src_field: str | list[str] = "src",
        tgt_field: str | list[str] = "tgt",
        score_field: str | None = None,
        score_type: Any = None,
        invert: bool = False,
    ) -> None:
        self.fields = _fields(src_field, tgt_field)
        self.filter_obj = filter_obj
        self.src_field = src_field
        self.tgt_field = tgt_field
        self.score_field = score_field
        self.score_type = score_type
        self.invert = invert

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        return DocumentDataset(
            map_parts(
                dataset.df,
                _score_part,
                self.filter_obj,
                self.fields,
                self.score_field,
                self.score_type,
                self.invert,
                True,
            )
        )


def _parallel_part(
    part: pd.DataFrame,
    objs: tuple[Any, Any],
    fields: tuple[str, str],
    score_fields: tuple[str | None, str | None],
    score_type: Any,
    invert: bool,
) -> pd.DataFrame:
    keep = pd.Series(True, index=part.index)
    for obj, field, score_field in zip(objs, fields, score_fields, strict=True):
        scores = call(obj.score_document, part[field])
        if score_type is not None:
            scores = scores.astype(score_type)
        if score_field is not None:
            part = part.assign(**{score_field: scores})
        mask = keep_mask(obj.keep_document, scores)
        keep &= ~mask if invert else mask
    return part[keep]


class ParallelScoreFilter:
    """Score the source and target columns with one filter each; keep a pair both keep."""

    def __init__(
        self,
        src_filter_obj: Any,
        tgt_filter_obj: Any,
        src_field: str = "src",
        tgt_field: str = "tgt",
        src_score: str | None = None,
        tgt_score: str | None = None,
        score_type: Any = None,
        invert: bool = False,
    ) -> None:
        self.objs = (src_filter_obj, tgt_filter_obj)
        self.fields = (src_field, tgt_field)
        self.score_fields = (src_score, tgt_score)
        self.score_type = score_type
        self.invert = invert

    def __call__(self, dataset: DocumentDataset) -> DocumentDataset:
        return DocumentDataset(
            map_parts(
                dataset.df,
                _parallel_part,
                self.objs,
                self.fields,
                self.score_fields,
                self.score_type,
                self.invert,
            )
        )


__all__ = ["Filter", "JointScoreFilter", "ParallelScoreFilter", "Score", "ScoreFilter"]
