"""``nemo_curator.modifiers``: :class:`DocumentModifier` and NeMo's modifiers."""

from __future__ import annotations

from typing import Any

from curator_dask.nemo.modifiers.doc_modifier import DocumentModifier
from curator_dask.nemo.modifiers.newline_normalizer import NewlineNormalizer
from curator_dask.nemo.modifiers.unicode_reformatter import UnicodeReformatter


def __getattr__(name: str) -> Any:
    # The PII modifier imports presidio (the ``pii`` extra) only when it is asked for.
    if name == "PiiModifier":
        from curator_dask.nemo.modifiers.pii_modifier import PiiModifier

        return PiiModifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DocumentModifier", "NewlineNormalizer", "PiiModifier", "UnicodeReformatter"]
