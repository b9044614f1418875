"""Running users' filter and modifier objects over partitions (private to the layer)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pandas as pd

from curator_dask.nemo.utils.decorators import is_batched


class Opaque:
    """Carries a user object through a graph; dask tokenizes it by a random token.

    Users' filters and modifiers are plain objects dask cannot hash deterministically
    (dask raises with ``tokenize.ensure-deterministic``); every module call is a new graph.
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return self.token


def map_parts(df: Any, fn: Callable[..., Any], obj: Any, *args: Any) -> Any:
    """``df.map_partitions(fn, obj, *args)`` with the output's meta from the empty frame."""
    meta = fn(df._meta, obj, *args)
    return df.map_partitions(_unwrap, fn, Opaque(obj), *args, meta=meta)


def _unwrap(part: Any, fn: Callable[..., Any], holder: Opaque, *args: Any) -> Any:
    return fn(part, holder.obj, *args)


def call(fn: Callable[[Any], Any], values: Any) -> Any:
    """``fn`` on a whole Series when batched, else once per value (a row when a frame)."""
    if is_batched(fn):
        out = fn(values)
        if isinstance(out, (pd.Series, pd.DataFrame)) or hasattr(out, "index"):
            return out
        return pd.Series(out, index=values.index)
    if isinstance(values, pd.DataFrame):
        return values.apply(fn, axis=1) if len(values) else pd.Series([], dtype=object)
    return values.apply(fn)


def keep_mask(fn: Callable[[Any], Any], scores: Any) -> Any:
    """``keep_document`` over ``scores`` as a bool Series (missing: dropped)."""
    mask = call(fn, scores)
    return mask.fillna(False).astype(bool)
