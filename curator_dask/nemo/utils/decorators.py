"""``nemo_curator.utils.decorators``: mark a method as working on a whole partition."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def batched(fn: F) -> F:
    """Mark ``score_document``/``keep_document``/``modify_document`` as taking a Series.

    A batched method receives one partition's column (a pandas Series) and returns a
    Series with the same index, instead of being called once per document.
    """
    fn._batched = True  # type: ignore[attr-defined]
    return fn


def is_batched(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` was decorated with :func:`batched`."""
    return bool(getattr(fn, "_batched", False))
