"""``nemo_curator.modifiers.newline_normalizer``: :class:`NewlineNormalizer`."""

from __future__ import annotations

from curator_dask import modifiers as native
from curator_dask.nemo.modifiers.doc_modifier import NativeModifier


class NewlineNormalizer(NativeModifier):
    """NeMo's ``NewlineNormalizer``: at most two consecutive newlines."""

    def __init__(self) -> None:
        super().__init__(native.WhitespaceNormalizer(max_consecutive_newlines=2))


__all__ = ["NewlineNormalizer"]
