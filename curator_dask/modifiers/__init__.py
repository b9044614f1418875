"""Document modifiers: subclass :class:`Modifier` and implement ``modify(text)``."""

from __future__ import annotations

from curator_dask.modifiers.lines import C4LineModifier, CitationRemover, LineRemover
from curator_dask.modifiers.normalizers import (
    MojibakeFixer,
    UnicodeNormalizer,
    WhitespaceNormalizer,
)
from curator_dask.stage import Modifier

__all__ = [
    "C4LineModifier",
    "CitationRemover",
    "LineRemover",
    "Modifier",
    "MojibakeFixer",
    "UnicodeNormalizer",
    "WhitespaceNormalizer",
]
