"""``nemo_curator.modifiers``: :class:`DocumentModifier` and NeMo's modifiers."""

from __future__ import annotations

from typing import Any

from curator_dask import modifiers as native
from curator_dask.nemo.utils.decorators import batched
from curator_dask.stage import Modifier


class DocumentModifier:
    """Base of NeMo-style modifiers: implement ``modify_document(text) -> text``.

    Called once per document, or once per partition with a Series when decorated with
    :func:`curator_dask.nemo.utils.decorators.batched`.
    """

    def modify_document(self, text: Any) -> Any:
        """The rewritten document (or Series of documents when batched)."""
        raise NotImplementedError(f"{type(self).__name__} must implement modify_document")


class _NativeModifier(DocumentModifier):
    def __init__(self, modifier: Modifier) -> None:
        self.modifier = modifier

    @batched
    def modify_document(self, text: Any) -> Any:
        return self.modifier.modify(text)


class UnicodeReformatter(_NativeModifier):
    """NeMo's ``UnicodeReformatter``: repairs mojibake (ftfy), run by :class:`MojibakeFixer`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(native.MojibakeFixer())


class NewlineNormalizer(_NativeModifier):
    """NeMo's ``NewlineNormalizer``: at most two consecutive newlines."""

    def __init__(self) -> None:
        super().__init__(native.WhitespaceNormalizer(max_consecutive_newlines=2))


__all__ = ["DocumentModifier", "NewlineNormalizer", "UnicodeReformatter"]
